"""Figures in the forms the congestion-control papers use, from stored runs (matplotlib, Agg).

- :func:`time_series`: per-flow rate, per-flow cwnd and the queue over time, one run (e.g. seed 003
  Figs. 9.2, 9.6).
- :func:`metric_vs_param`: a summary metric against a swept parameter, mean over seeds with the
  min-max spread (e.g. Figs. 9.9-9.12); numeric parameters as lines, categorical ones as points.
- :func:`metric_by_arm`: a summary metric against a swept parameter (e.g. the number of flows), one
  line per arm (uncoupled, coupled) and a reference arm that does not depend on the parameter (one
  flow alone) drawn flat, mean over seeds with the min-max band: Figs. 9.9-9.11 as drawn there.
- :func:`share_vs_param`: one flow's share of the aggregate against a parameter (the priority
  ratio), measured beside the ideal (Fig. 9.12).
- :func:`cdf`: empirical CDFs of samples, one line per label.
- :func:`flow_lines`, :func:`flow_bars`, :func:`network_map`: the flow-level model's figures (seed
  002): a metric against a parameter per sender model, totals per model, and routers shaded by dead
  and zombie flow (Fig. 4).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot's global state
(so figures can be made from worker threads and are closed by garbage collection); axis labels
carry units.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["time_series", "metric_vs_param", "metric_by_arm", "arm_styles", "share_vs_param", "cdf", "flow_lines", "flow_bars", "network_map", "METRIC_LABELS"]

#: How each summary metric is shown: (axis label, scale from stored units).
METRIC_LABELS: Dict[str, tuple] = {
    "tcp_goodput_bps": ("TCP goodput, sum (Mbit/s)", 1e-6),
    "media_goodput_bps": ("media goodput, sum (Mbit/s)", 1e-6),
    "udp_throughput_bps": ("UDP throughput (Mbit/s)", 1e-6),
    "total_goodput_bps": ("total goodput (Mbit/s)", 1e-6),
    "jain_tcp": ("Jain's fairness index (TCP)", 1.0),
    "loss_ratio": ("bottleneck loss (%)", 100.0),
    "utilization": ("bottleneck utilization (%)", 100.0),
    "mean_queue_pkts": ("mean queue (packets)", 1.0),
    "max_queue_pkts": ("max queue (packets)", 1.0),
    "mean_queue_delay_s": ("mean queueing delay (ms)", 1e3),
    "mean_rtt_s": ("mean RTT (ms)", 1e3),
    "retransmits": ("TCP retransmissions", 1.0),
    "timeouts": ("TCP timeouts", 1.0),
    "max_burst_pkts": ("largest burst, any TCP flow (packets)", 1.0),
}


def _figure(rows: int = 1, height: float = 3.2, width: float = 7.5) -> Figure:
    return Figure(figsize=(width, height * rows), dpi=100, layout="constrained")


def _tcp_rates(fs: pa.Table) -> Dict[int, tuple]:
    """flow -> (t_s, rate Mbit/s) from the cumulative delivered bytes of the periodic samples."""
    out = {}
    if fs.num_rows == 0:
        return out
    flows = np.asarray(fs.column("flow").to_numpy(zero_copy_only=False))
    t = np.asarray(fs.column("t_s").to_numpy(zero_copy_only=False), dtype=float)
    b = np.asarray(fs.column("delivered_bytes").to_numpy(zero_copy_only=False), dtype=float)
    for f in sorted(set(flows.tolist())):
        m = flows == f
        tf, bf = t[m], b[m]
        if len(tf) < 2:
            continue
        dt = np.diff(tf)
        ok = dt > 0
        out[f] = (tf[1:][ok], (np.diff(bf)[ok] * 8 / dt[ok]) / 1e6)
    return out


def time_series(tables: Mapping[str, pa.Table], title: str = "") -> Figure:
    """Stacked panels over time: each flow's rate (TCP: delivered bytes per sample interval; media:
    the sending rate), each TCP flow's cwnd, and the queue of each sampled link. Panels without
    data are left out."""
    fs, ms, qs = tables["flow_samples"], tables["media_samples"], tables["queue_samples"]
    panels: List[str] = []
    rates = _tcp_rates(fs)
    if rates or ms.num_rows:
        panels.append("rate")
    if fs.num_rows:
        panels.append("cwnd")
    if qs.num_rows:
        panels.append("queue")
    fig = _figure(max(1, len(panels)), height=2.3)
    if not panels:
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no time series recorded (sample_interval_s unset)", ha="center", va="center")
        ax.set_axis_off()
        return fig
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, panel in zip(axes, panels):
        if panel == "rate":
            for f, (t, r) in rates.items():
                ax.plot(t, r, lw=0.9, label=f"tcp {f}")
            if ms.num_rows:
                mf = ms.column("flow").to_pylist()
                mt = ms.column("t_s").to_pylist()
                mr = ms.column("rate_bps").to_pylist()
                for f in sorted(set(mf)):
                    pts = [(t, r / 1e6) for g, t, r in zip(mf, mt, mr) if g == f and r is not None]
                    if pts:
                        ax.plot(*zip(*pts), lw=0.9, ls="--", label=f"media {f}")
            ax.set_ylabel("rate (Mbit/s)")
        elif panel == "cwnd":
            ff, ft, fc = fs.column("flow").to_pylist(), fs.column("t_s").to_pylist(), fs.column("cwnd_pkts").to_pylist()
            for f in sorted(set(ff)):
                pts = [(t, c) for g, t, c in zip(ff, ft, fc) if g == f]
                ax.plot(*zip(*pts), lw=0.9, label=f"tcp {f}")
            ax.set_ylabel("cwnd (packets)")
        else:
            ql, qt, qp = qs.column("link").to_pylist(), qs.column("t_s").to_pylist(), qs.column("pkts").to_pylist()
            for link in sorted(set(ql)):
                pts = [(t, p) for g, t, p in zip(ql, qt, qp) if g == link]
                ax.plot(*zip(*pts), lw=0.8, label=f"link {link}")
            ax.set_ylabel("queue (packets)")
        ax.grid(alpha=0.3)
        n = len(ax.get_lines())
        if n:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", ncol=1 if n <= 10 else 2, frameon=False)
    axes[-1].set_xlabel("time (s)")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def _is_numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _key(v: Any) -> Any:
    """Sorts numbers numerically before text."""
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def metric_vs_param(
    runs: Sequence[Mapping[str, Any]],
    param: str,
    metric: str,
    series_param: Optional[str] = None,
    labels: Optional[Mapping[str, str]] = None,
) -> Figure:
    """`metric` (a key of each run's ``summary``) against `param` (a key of each run's
    ``params``): the mean over seeds, with the min-max spread over seeds as error bars; one line
    per value of `series_param`. `labels` renames parameter values in the legend and ticks."""
    labels = dict(labels or {})
    ylabel, scale = METRIC_LABELS.get(metric, (metric, 1.0))
    groups: Dict[Any, Dict[Any, List[float]]] = {}
    for r in runs:
        p = r["params"]
        if param not in p:
            continue
        s = p.get(series_param) if series_param else None
        v = r["summary"].get(metric, float("nan"))
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        groups.setdefault(s, {}).setdefault(p[param], []).append(v * scale)
    xs_all = sorted({x for g in groups.values() for x in g}, key=_key)
    numeric = _is_numeric(xs_all)
    fig = _figure(height=3.0, width=6.0)
    ax = fig.subplots()
    n = max(1, len(groups))
    for i, (s, by_x) in enumerate(sorted(groups.items(), key=lambda kv: _key(kv[0]))):
        xs = sorted(by_x, key=_key)
        means = np.array([np.mean(by_x[x]) for x in xs])
        lo = means - np.array([min(by_x[x]) for x in xs])
        hi = np.array([max(by_x[x]) for x in xs]) - means
        if numeric:
            pos = np.array(xs, dtype=float)
        else:
            # Categorical: side by side around each category, so error bars do not overlap.
            pos = np.array([xs_all.index(x) for x in xs], dtype=float) + (i - (n - 1) / 2) * 0.12
        label = None if s is None else f"{series_param} = {labels.get(str(s), s)}"
        ax.errorbar(pos, means, yerr=[lo, hi], marker="o", ms=4, capsize=3, lw=1.2 if numeric else 0, elinewidth=1, label=label)
    if not numeric:
        ax.set_xticks(range(len(xs_all)), [str(labels.get(str(x), x)) for x in xs_all])
    ax.set_xlabel(param)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    seeds = max((len(v) for g in groups.values() for v in g.values()), default=0)
    ax.set_title(f"mean over {seeds} seed{'s' if seeds != 1 else ''}; bars: min to max", fontsize="small")
    if any(s is not None for s in groups):
        ax.legend(fontsize="small", frameon=False)
    return fig


def _finite(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


#: Colours of the arms in the order given, and of the reference arm.
_ARM_COLORS = ("tab:red", "tab:blue", "tab:green", "tab:purple", "tab:brown")
_REFERENCE_COLOR = "0.25"


def metric_by_arm(
    runs: Sequence[Mapping[str, Any]],
    x: str,
    arm: str,
    metric: str,
    arms: Sequence[Any],
    reference: Optional[Any] = None,
    labels: Optional[Mapping[str, str]] = None,
    xlabel: Optional[str] = None,
) -> Figure:
    """`metric` (a key of each run's ``summary``) against the swept parameter `x` (e.g. the number
    of flows), one line per value of the parameter `arm` in the order of `arms` (e.g. uncoupled,
    coupled): the mean over seeds with the min-max band over seeds. Runs whose `arm` is `reference`
    (one flow alone) do not depend on `x`: they are drawn as a dashed horizontal line at their mean
    over seeds across the whole axis, with their min-max band. `labels` renames arm values in the
    legend, which sits outside the axes so it never covers data."""
    labels = dict(labels or {})
    ylabel, scale = METRIC_LABELS.get(metric, (metric, 1.0))
    by_arm: Dict[Any, Dict[Any, List[float]]] = {a: {} for a in arms}
    ref: List[float] = []
    for r in runs:
        p = r["params"]
        v = r["summary"].get(metric)
        if not _finite(v):
            continue
        if reference is not None and p.get(arm) == reference:
            ref.append(float(v) * scale)
        elif p.get(arm) in by_arm and x in p:
            by_arm[p[arm]].setdefault(p[x], []).append(float(v) * scale)
    xs_all = sorted({v for g in by_arm.values() for v in g}, key=_key)
    fig = _figure(height=3.0, width=7.0)
    ax = fig.subplots()
    handles: List[Any] = []
    names: List[str] = []
    for i, a in enumerate(arms):
        pts = by_arm[a]
        if not pts:
            continue
        xs = sorted(pts, key=_key)
        color = _ARM_COLORS[i % len(_ARM_COLORS)]
        mean = np.array([np.mean(pts[v]) for v in xs])
        band = ax.fill_between(xs, [min(pts[v]) for v in xs], [max(pts[v]) for v in xs], color=color, alpha=0.15, lw=0)
        # Earlier arms wider, with larger hollow markers: where arms coincide, each stays visible.
        (line,) = ax.plot(xs, mean, marker="os^Dv"[i % 5], ms=max(7.5 - 2.5 * i, 4.0), lw=max(2.6 - 0.9 * i, 1.2),
                          color=color, mfc="white" if i < len(arms) - 1 else color, mew=1.4, label=labels.get(str(a), str(a)))
        handles.append((band, line))
        names.append(line.get_label())
    if ref:
        m = float(np.mean(ref))
        band = ax.axhspan(min(ref), max(ref), color=_REFERENCE_COLOR, alpha=0.12, lw=0)
        line = ax.axhline(m, color=_REFERENCE_COLOR, ls="--", lw=1.4, label=labels.get(str(reference), str(reference)))
        handles.append((band, line))
        names.append(line.get_label())
    if xs_all and _is_numeric(xs_all):
        ax.set_xticks(xs_all)
        pad = 0.04 * (max(xs_all) - min(xs_all) or 1.0)
        ax.set_xlim(min(xs_all) - pad, max(xs_all) + pad)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    seeds = max([len(v) for g in by_arm.values() for v in g.values()] + [len(ref)], default=0)
    ax.set_title(f"mean over {seeds} seed{'s' if seeds != 1 else ''}; shaded: min to max", fontsize="small")
    if handles:
        # Each entry shows the line over its band; outside the axes, so it never covers data.
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return fig


def arm_styles(points: Sequence[tuple], arms: Sequence[Any], reference: Optional[Any] = None) -> List[Dict[str, Any]]:
    """Line properties for per-point lines (CDFs) of an arms experiment, for `points` given as
    (arm value, x value) pairs: each arm in its colour of :func:`metric_by_arm`, light at the
    smallest x and dark at the largest; the reference arm dark grey and dashed; others default."""
    from matplotlib import colormaps

    maps = ("Reds", "Blues", "Greens", "Purples", "Oranges")
    out: List[Dict[str, Any]] = []
    for a, x in points:
        if reference is not None and a == reference:
            out.append({"color": _REFERENCE_COLOR, "ls": "--"})
        elif a in arms:
            i = list(arms).index(a)
            xs = sorted({px for pa, px in points if pa == a}, key=_key)
            t = 0.4 + 0.55 * (xs.index(x) / (len(xs) - 1) if len(xs) > 1 else 1.0)
            out.append({"color": colormaps[maps[i % len(maps)]](t), "ls": "-"})
        else:
            out.append({})
    return out


def share_vs_param(
    shares: Mapping[Any, Sequence[float]],
    ideal: Mapping[Any, float],
    xlabel: str,
    label: str = "measured",
    ideal_label: str = "ideal",
    ylabel: str = "share of the aggregate TCP goodput",
) -> Figure:
    """One flow's share of the aggregate against a parameter (e.g. the priority ratio): the mean
    over seeds with min-max error bars, and the ideal share as a dashed line."""
    fig = _figure(height=3.0, width=7.0)
    ax = fig.subplots()
    xs = sorted((v for v in shares if any(_finite(s) for s in shares[v])), key=_key)
    handles: List[Any] = []
    if xs:
        vals = {v: [float(s) for s in shares[v] if _finite(s)] for v in xs}
        mean = np.array([np.mean(vals[v]) for v in xs])
        err = [mean - np.array([min(vals[v]) for v in xs]), np.array([max(vals[v]) for v in xs]) - mean]
        handles.append(ax.errorbar(xs, mean, yerr=err, marker="o", ms=4.5, lw=1.6, capsize=3, color=_ARM_COLORS[1], label=label))
    ix = sorted(ideal, key=_key)
    if ix:
        handles.extend(ax.plot(ix, [ideal[v] for v in ix], ls="--", marker="x", ms=5, lw=1.3, color=_REFERENCE_COLOR, label=ideal_label))
    ticks = sorted(set(xs) | set(ix), key=_key)
    if ticks and _is_numeric(ticks):
        ax.set_xticks(ticks)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    seeds = max((len(shares[v]) for v in xs), default=0)
    ax.set_title(f"mean over {seeds} seed{'s' if seeds != 1 else ''}; bars: min to max", fontsize="small")
    if handles:
        # Measured first, then the ideal; outside the axes.
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return fig


def cdf(samples: Mapping[str, Sequence[float]], xlabel: str, title: str = "",
        styles: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Figure:
    """Empirical CDFs, one step line per label (labels without samples are skipped). `styles`
    gives a label its line properties (e.g. ``{"color": ..., "ls": "--"}``); without it, the
    default colours, with the line style changing past ten lines so no two look alike."""
    fig = _figure(height=3.0, width=7.5)
    ax = fig.subplots()
    dashes = ("-", "--", ":", "-.")
    for i, (label, xs) in enumerate(samples.items()):
        x = np.sort(np.asarray([v for v in xs if v is not None and not math.isnan(v)], dtype=float))
        if len(x):
            kw: Dict[str, Any] = {"color": f"C{i % 10}", "ls": dashes[(i // 10) % len(dashes)]}
            kw.update((styles or {}).get(label, {}))
            # From 0 at the smallest sample, so a line of few samples does not start in mid-air.
            ax.step(np.r_[x[0], x], np.r_[0.0, np.arange(1, len(x) + 1) / len(x)], where="post", label=str(label), lw=1.1, **kw)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        ax.set_title(title, fontsize="small")
    return fig


#: Flow-level metrics (seed 002): axis labels. Units are the model's (flow units, or Gbit/s on the real networks).
FLOW_METRICS: Dict[str, str] = {
    "goodput": "goodput (sum over flows)",
    "zombie": "zombie flow",
    "dead": "dead flow",
    "dropped": "dropped flow",
    "jain": "Jain's fairness index",
    "relative": "goodput relative to clamp",
}


def flow_lines(rows: Sequence[Mapping[str, Any]], x: str, y: str, models: Optional[Sequence[str]] = None,
               labels: Optional[Mapping[str, str]] = None, title: str = "", xlabel: Optional[str] = None,
               logx: bool = False) -> Figure:
    """`y` against `x`, one line per sender model: the mean over patterns with the min-max spread."""
    labels = dict(labels or {})
    fig = _figure(height=3.0, width=7.5)
    ax = fig.subplots()
    present = list(dict.fromkeys(r["model"] for r in rows))
    for m in (models or present):
        pts: Dict[Any, List[float]] = {}
        for r in rows:
            if r["model"] == m:
                pts.setdefault(r[x], []).append(float(r[y]))
        if not pts:
            continue
        xs = sorted(pts, key=_key)
        mean = np.array([np.mean(pts[v]) for v in xs])
        lo = mean - np.array([min(pts[v]) for v in xs])
        hi = np.array([max(pts[v]) for v in xs]) - mean
        ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", ms=3.5, lw=1.2, capsize=2.5, label=labels.get(m, m))
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(FLOW_METRICS.get(y, y))
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=8, loc="best")
    return fig


def flow_bars(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], labels: Optional[Mapping[str, str]] = None,
              title: str = "") -> Figure:
    """Grouped bars: each metric's mean over patterns per sender model, with the min-max spread."""
    labels = dict(labels or {})
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig = _figure(height=3.0, width=7.5)
    ax = fig.subplots()
    width = 0.8 / max(len(models), 1)
    for j, m in enumerate(models):
        vals = [[float(r[k]) for r in rows if r["model"] == m] for k in metrics]
        mean = np.array([np.mean(v) for v in vals])
        err = [mean - np.array([min(v) for v in vals]), np.array([max(v) for v in vals]) - mean]
        xs = np.arange(len(metrics)) + (j - (len(models) - 1) / 2) * width
        ax.bar(xs, mean, width, yerr=err, capsize=2, label=labels.get(m, m))
    ax.set_xticks(np.arange(len(metrics)), [FLOW_METRICS.get(k, k) for k in metrics])
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return fig


def network_map(net: Mapping[str, Any], title: str = "") -> Figure:
    """Fig. 4's picture: routers sized by capacity and shaded by the dead flow (left) and the zombie
    flow (right) leaving them; links sized by capacity and shaded by utilization. Light is low."""
    fig = _figure(height=4.2, width=9.0)
    axes = fig.subplots(1, 2)
    nodes = net["nodes"]
    idx = {n["id"]: i for i, n in enumerate(nodes)}
    xy = np.array([[n["x"], n["y"]] for n in nodes], dtype=float)
    cap = np.array([n["capacity"] for n in nodes], dtype=float)
    size = 4 + 60 * np.sqrt(cap / cap.max()) if len(cap) and cap.max() > 0 else np.full(len(nodes), 6.0)
    ecap = np.array([e["capacity"] for e in net["edges"]], dtype=float)
    emax = ecap.max() if len(ecap) else 1.0
    from matplotlib.collections import LineCollection

    segs = [[xy[idx[e["a"]]], xy[idx[e["b"]]]] for e in net["edges"]]
    for ax, key, name in ((axes[0], "dead", "dead flow"), (axes[1], "zombie", "zombie flow")):
        lc = LineCollection(segs, linewidths=0.3 + 2.0 * ecap / emax, cmap="Greys",
                            array=np.array([e["utilization"] for e in net["edges"]]), clim=(0, 1), alpha=0.7)
        ax.add_collection(lc)
        val = np.array([n[key] for n in nodes], dtype=float)
        sc = ax.scatter(xy[:, 0], xy[:, 1], s=size, c=val, cmap="Reds", vmin=0, vmax=max(val.max(), 1e-9),
                        edgecolors="k", linewidths=0.2, zorder=3)
        fig.colorbar(sc, ax=ax, shrink=0.7, label=f"{name} leaving the router")
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.autoscale_view()
    if title:
        fig.suptitle(title)
    return fig
