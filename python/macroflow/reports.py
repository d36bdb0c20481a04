"""The HTML report of a results store: one self-contained page (inline CSS, figures as PNG data
URIs, no script, nothing fetched) with, for a named reproduction, the source's expected outcomes
beside ours with PASS/FAIL (INFO for information rows, not counted) and each check's note; then,
for each store (a reproduction's parts, or the store itself), a summary table per parameter point
(mean +- std over seeds), the figures a reproduction's part asks for (else each metric against each
swept parameter), CDFs of the queue and of per-flow goodput, and time series of one seed per point.

The page is deterministic: the same store gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import pathlib
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import matplotlib

from macroflow.metrics import SUMMARY_FIELDS
from macroflow.plots import METRIC_LABELS, _key, arm_styles, cdf, metric_by_arm, metric_vs_param, share_vs_param, time_series
from macroflow.reproductions import check_status, tally
from macroflow.results import current_runs, damaged_runs, load_results

__all__ = ["write_report", "MAX_TIME_SERIES", "KEY_METRICS"]

#: Time-series figures per store (one seed per parameter point), to keep the page small.
MAX_TIME_SERIES = 8
#: The metrics plotted against each swept parameter.
KEY_METRICS = ("total_goodput_bps", "tcp_goodput_bps", "jain_tcp", "loss_ratio", "mean_queue_delay_s", "mean_rtt_s")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{background:#dff3df;color:#145214;font-weight:bold}.fail{background:#f8dcdc;color:#7a1010;font-weight:bold}
.info{background:#e3eef9;color:#1b4a7a;font-weight:bold}
.verdict{font-size:1.1em;padding:.5em;display:inline-block}.muted{color:#666;font-size:.9em}.warn{background:#fff3cd;color:#664d03;padding:.5em}
figure{margin:1em 0}img{max-width:100%}
"""


def _png(fig: "matplotlib.figure.Figure") -> str:
    buf = io.BytesIO()
    # No software/date metadata in the PNG: the same store gives the same bytes.
    fig.savefig(buf, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _img(fig: "matplotlib.figure.Figure", caption: str) -> str:
    return f'<figure><img alt="{html.escape(caption)}" src="{_png(fig)}"><figcaption class="muted">{html.escape(caption)}</figcaption></figure>'


def _fmt(metric: str, xs: Sequence[float]) -> str:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if not xs:
        return "n/a"
    scale = METRIC_LABELS.get(metric, (metric, 1.0))[1]
    m = statistics.fmean(xs) * scale
    digits = 3 if abs(m) < 10 else 1
    if len(xs) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} &plusmn; {statistics.stdev(xs) * scale:.{digits}f}"


def _label(params: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(single point)"


def _points(runs: List[Dict[str, Any]]) -> List[Tuple[Dict[str, Any], List[Dict[str, Any]]]]:
    """Runs grouped by parameter point, in a stable order."""
    groups: Dict[str, Tuple[Dict[str, Any], List[Dict[str, Any]]]] = {}
    for r in runs:
        groups.setdefault(json.dumps(r["params"], sort_keys=True), (r["params"], []))[1].append(r)
    def order(item: Tuple[Dict[str, Any], List[Dict[str, Any]]]) -> Tuple[Any, ...]:
        # Numbers in numeric order (2 before 10), then text.
        return tuple((k, _key(v)) for k, v in sorted(item[0].items()))

    return sorted(groups.values(), key=order)


def _swept(store: pathlib.Path, runs: List[Dict[str, Any]]) -> List[str]:
    """The parameters with more than one value: from sweep.json's grid, else from the runs."""
    sweep_json = store / "sweep.json"
    if sweep_json.exists():
        grid = json.loads(sweep_json.read_text()).get("grid") or {}
        keys = [k for k, v in grid.items() if len(v) > 1]
        if keys:
            return keys
    keys: List[str] = []
    for r in runs:
        for k in r["params"]:
            if k not in keys and len({json.dumps(x["params"].get(k)) for x in runs}) > 1:
                keys.append(k)
    return keys


def _has(runs: List[Dict[str, Any]], metric: str) -> bool:
    """Whether any run's summary has a number for `metric` (older runs may lack newer fields)."""
    return any(isinstance(r["summary"].get(metric), (int, float)) and not math.isnan(r["summary"][metric]) for r in runs)


def _arm_order(spec: Dict[str, Any], params: Dict[str, Any]) -> Tuple[Any, ...]:
    """Sort key of a parameter point in an arms experiment: arm (in the spec's order, then the
    reference, then anything else), then x."""
    order = list(spec["arms"]) + [spec.get("reference")]
    a = params.get(spec["arm"])
    return (order.index(a) if a in order else len(order), _key(params.get(spec["x"])), json.dumps(params, sort_keys=True))


def _spec_figures(runs: List[Dict[str, Any]], specs: List[Dict[str, Any]], labels: Dict[str, str]) -> List[str]:
    """The figures a reproduction's part asks for (see :class:`macroflow.reproductions.Part`)."""
    out: List[str] = []
    for spec in specs:
        where = spec.get("where", {})
        runs_all, runs = runs, [r for r in runs if all(r["params"].get(k) == v for k, v in where.items())]
        if spec["kind"] == "arms":
            x, arm, ref = spec["x"], spec["arm"], spec.get("reference")
            xlabel = spec.get("xlabel", x)
            names = [labels.get(str(a), str(a)) for a in spec["arms"]]
            ref_name = labels.get(str(ref), str(ref)) if ref is not None else None
            out.append(f"<h3>Against {html.escape(xlabel)}</h3>")
            for m in spec["metrics"]:
                if not _has(runs, m):
                    continue
                draw_ref = ref is not None and m not in spec.get("no_reference", [])
                fig = metric_by_arm(runs, x, arm, m, spec["arms"], reference=ref if draw_ref else None, labels=labels, xlabel=xlabel)
                caption = f"{METRIC_LABELS.get(m, (m,))[0]} against the {xlabel}: one line per arm ({', '.join(names)})"
                if draw_ref:
                    caption += f"; {ref_name} as the dashed horizontal reference (it does not depend on the {xlabel})"
                elif ref is not None:
                    caption += f"; {ref_name} not drawn (its value is fixed by definition)"
                out.append(_img(fig, caption + "; mean over seeds, shaded from min to max."))
        elif spec["kind"] == "share":
            x, flow = spec["x"], int(spec.get("flow", 0))
            xlabel = spec.get("xlabel", x)
            from_s = spec.get("from_s")
            shares: Dict[Any, List[float]] = {}
            for r in runs:
                if x not in r["params"]:
                    continue
                g = _delivered_from(r["path"], float(from_s)) if from_s is not None else \
                    load_results(r["path"])["flows"].column("goodput_bps").to_pylist()
                total = sum(g)
                shares.setdefault(r["params"][x], []).append(g[flow] / total if total > 0 and flow < len(g) else float("nan"))
            ideal = {v: float(i) for v, i in spec.get("ideal", [])}
            fig = share_vs_param(shares, ideal, xlabel, label=spec.get("label", "measured"), ideal_label=spec.get("ideal_label", "ideal"))
            out.append(f"<h3>Against {html.escape(xlabel)}</h3>")
            since = f" from {float(from_s):g} s to the end" if from_s is not None else ""
            out.append(_img(fig, f"flow {flow + 1}'s share of the aggregate TCP goodput{since} against the {xlabel}, measured "
                                 f"(mean over seeds, bars from min to max) and ideal."))
        else:
            raise ValueError(f"unknown figure kind {spec['kind']!r} in reproduction.json")
        runs = runs_all
    return out


def _delivered_from(path: Any, from_s: float) -> List[float]:
    """Bytes each TCP flow of a run delivered from its first sample at or after `from_s` to its
    last sample (0 for a flow with fewer than two such samples)."""
    res = load_results(path)
    t = res["flow_samples"].to_pydict()
    first: Dict[int, float] = {}
    last: Dict[int, float] = {}
    for ts, f, b in zip(t["t_s"], t["flow"], t["delivered_bytes"]):
        if ts >= from_s and b is not None:
            first.setdefault(f, float(b))
            last[f] = float(b)
    return [last.get(f, 0.0) - first.get(f, 0.0) for f in range(res["flows"].num_rows)]


def _parts_figures(store: pathlib.Path, specs: List[Dict[str, Any]], labels: Dict[str, str]) -> List[str]:
    """A reproduction's figures across its parts (``{"kind": "parts", "parts": [...], "by": param,
    "values": [...], "x": param, "metrics": [...], "where": {...}}``): each metric against `x`, one
    line per (part, value of `by`): e.g. the simulator against Linux, with and without cross
    traffic."""
    out: List[str] = []
    for spec in specs:
        if spec["kind"] != "parts":
            raise ValueError(f"unknown figure kind {spec['kind']!r} in reproduction.json")
        where = spec.get("where", {})
        runs: List[Dict[str, Any]] = []
        for part in spec["parts"]:
            for r in current_runs(store / part)[0] if (store / part).is_dir() else []:
                if all(r["params"].get(k) == v for k, v in where.items()):
                    runs.append({**r, "params": {**r["params"], "series": f"{part}/{r['params'].get(spec['by'])}"}})
        series = [f"{part}/{v}" for v in spec["values"] for part in spec["parts"]]
        names = {s_: f"{labels.get(s_.split('/')[0], s_.split('/')[0])}, {labels.get(s_.split('/')[1], s_.split('/')[1])}" for s_ in series}
        xlabel = spec.get("xlabel", spec["x"])
        out.append(f"<h2>{html.escape(spec.get('title', 'Across the parts'))}</h2>")
        for m in spec["metrics"]:
            if not _has(runs, m):
                continue
            fig = metric_by_arm(runs, spec["x"], "series", m, series, labels=names, xlabel=xlabel)
            out.append(_img(fig, f"{METRIC_LABELS.get(m, (m,))[0]} against the {xlabel}: one line per "
                                 f"{', '.join(names[s_] for s_ in series)}; mean over seeds, shaded from min to max."))
    return out


def _section(store: pathlib.Path, title: Optional[str], labels: Dict[str, str],
             figures: Optional[List[Dict[str, Any]]] = None) -> str:
    """One store: its summary table, its figures (`figures`: a reproduction's specs; without
    them, each key metric against each swept parameter), CDFs and time series."""
    runs, others, missing = current_runs(store)
    if not runs:
        raise FileNotFoundError(f"{store}: no stored runs (nothing to report)")
    points = _points(runs)
    arms = [f for f in (figures or []) if f["kind"] == "arms"]
    if arms:
        # The arms in their order (uncoupled, coupled, reference), each by x: tables and lines read in that order.
        points.sort(key=lambda pt: _arm_order(arms[0], pt[0]))
    parts: List[str] = []
    name = title or runs[0]["scenario"].get("name", store.name)
    seeds = sorted({r["seed"] for r in runs})
    parts.append(f"<h2>{html.escape(name)}</h2>")
    parts.append(
        f'<p class="muted">{len(runs)} runs, {len(points)} parameter point(s), seeds {html.escape(str(seeds))}, '
        f'{html.escape(str(runs[0]["scenario"].get("duration_s")))} s simulated each; store <code>{html.escape(str(store))}</code>; '
        f'code version {html.escape(str(runs[0].get("version")))}'
        + (f"; {others} other stored run(s) of earlier sweeps or builds are not shown" if others else "")
        + (f"; the latest sweep is incomplete: {missing} of its runs are not stored" if missing else "")
        + ".</p>"
    )
    damaged = damaged_runs(store)
    if damaged:
        parts.append(f'<p class="warn">{len(damaged)} damaged run(s) are not shown (run the sweep again to repair them): '
                     + "; ".join(html.escape(d) for d in damaged) + ".</p>")
    # Summary table.
    pkeys = list(points[0][0]) if points[0][0] else []
    head = "".join(f"<th>{html.escape(k)}</th>" for k in pkeys) + "<th>seeds</th>"
    head += "".join(f'<th title="{html.escape(desc)}">{html.escape(METRIC_LABELS.get(m, (m,))[0])}</th>' for m, desc in SUMMARY_FIELDS.items())
    rows = []
    for params, rs in points:
        cells = "".join(f"<td>{html.escape(str(labels.get(str(params.get(k)), params.get(k))))}</td>" for k in pkeys)
        cells += f'<td class="num">{len(rs)}</td>'
        cells += "".join(f'<td class="num">{_fmt(m, [r["summary"].get(m, float("nan")) for r in rs])}</td>' for m in SUMMARY_FIELDS)
        rows.append(f"<tr>{cells}</tr>")
    parts.append('<h3>Summary (mean &plusmn; std over seeds)</h3><div style="overflow-x:auto"><table>'
                 f"<tr>{head}</tr>{''.join(rows)}</table></div>")
    # The reproduction's figures, or each metric against each swept parameter.
    swept = [] if figures else _swept(store, runs)
    if figures:
        parts.extend(_spec_figures(runs, figures, labels))
    for p in swept:
        others = [k for k in swept if k != p]
        series = others[0] if len(others) == 1 else None
        parts.append(f"<h3>Against {html.escape(p)}</h3>")
        for m in KEY_METRICS:
            if all(math.isnan(r["summary"].get(m, float("nan"))) for r in runs):
                continue
            fig = metric_vs_param(runs, p, m, series_param=series, labels=labels)
            parts.append(_img(fig, f"{METRIC_LABELS[m][0]} against {p}" + (f", one line per {series}" if series else "")))
    # CDFs, one line per point (all seeds pooled).
    queue: Dict[str, List[float]] = {}
    goodput: Dict[str, List[float]] = {}
    first_tables = []
    for params, rs in points:
        label = _label({k: labels.get(str(v), v) for k, v in params.items()})
        for i, r in enumerate(rs):
            t = load_results(r["path"])
            queue.setdefault(label, []).extend(t["queue_samples"].column("pkts").to_pylist())
            goodput.setdefault(label, []).extend(g / 1e6 for g in t["flows"].column("goodput_bps").to_pylist())
            goodput[label].extend(g / 1e6 for g in t["media_flows"].column("goodput_bps").to_pylist())
            if i == 0:
                first_tables.append((label, r, t))
    styles = None
    if arms:
        a = arms[0]
        pts = [(params.get(a["arm"]), params.get(a["x"])) for params, _ in points]
        styles = dict(zip([_label({k: labels.get(str(v), v) for k, v in params.items()}) for params, _ in points],
                          arm_styles(pts, a["arms"], a.get("reference"))))
    if any(queue.values()):
        parts.append("<h3>Distributions</h3>")
        parts.append(_img(cdf(queue, "bottleneck queue (packets)", styles=styles), "CDF of the sampled bottleneck queue length, all seeds pooled, per parameter point"))
    if any(goodput.values()):
        parts.append(_img(cdf(goodput, "per-flow goodput (Mbit/s)", styles=styles), "CDF of per-flow goodput (TCP and media flows), all seeds pooled, per parameter point"))
    # Time series of the first seed of each point.
    parts.append("<h3>Over time</h3>")
    shown = first_tables
    if arms and len(first_tables) > MAX_TIME_SERIES:
        # Each arm at the smallest and the largest x, and the reference arm.
        a = arms[0]
        xs = sorted({r["params"][a["x"]] for _, r, _ in first_tables if r["params"].get(a["arm"]) in a["arms"]}, key=_key)
        ends = {xs[0], xs[-1]} if xs else set()
        shown = [ft for ft in first_tables if ft[1]["params"].get(a["arm"]) == a.get("reference")
                 or ft[1]["params"].get(a["x"]) in ends][:MAX_TIME_SERIES]
        parts.append(f'<p class="muted">Showing {len(shown)} of {len(first_tables)} parameter points: each arm at the '
                     f'smallest and the largest {html.escape(a.get("xlabel", a["x"]))}, and {html.escape(labels.get(str(a.get("reference")), str(a.get("reference"))))}.</p>')
    elif len(first_tables) > MAX_TIME_SERIES:
        shown = first_tables[:MAX_TIME_SERIES]
        parts.append(f'<p class="muted">Showing {MAX_TIME_SERIES} of {len(first_tables)} parameter points (the first in table order).</p>')
    for label, r, t in shown:
        parts.append(_img(time_series(t, f"{label}, seed {r['seed']}"), f"{label}, seed {r['seed']}: rate, cwnd and queue over time"))
    return "\n".join(parts)


def _flow_section(part_dir: pathlib.Path, labels: Dict[str, str]) -> str:
    """A part of a flow-level reproduction (``flow.json``, see :mod:`macroflow.firehose`): its
    description, a table of the mean totals per point and model, and its figures."""
    from macroflow.firehose import METRIC_KEYS
    from macroflow.plots import flow_bars, flow_lines, network_map

    data = json.loads((part_dir / "flow.json").read_text())
    rows = data["rows"]
    out = [f"<h2>{html.escape(data['title'])}</h2>", f"<p>{html.escape(data['description'])}</p>"]
    keys = [k for k in (rows[0] if rows else {}) if k not in METRIC_KEYS and k != "pattern"]
    metrics = [m for m in ("goodput", "relative", "zombie", "dead", "jain", "iterations") if rows and m in rows[0]]
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in keys) + (r["model"],), []).append(r)
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys + ["model", "patterns"] + metrics)
    body = []
    for key, rs in groups.items():
        cells = "".join(f"<td>{html.escape(str(v))}</td>" for v in key[:-1])
        cells += f"<td>{html.escape(labels.get(key[-1], key[-1]))}</td><td class=\"num\">{len(rs)}</td>"
        for m in metrics:
            vals = [float(r[m]) for r in rs]
            mean = sum(vals) / len(vals)
            cells += f'<td class="num">{mean:.4g}</td>'
        body.append(f"<tr>{cells}</tr>")
    if "goodputs" in (rows[0] if rows else {}):
        body = [f"<tr><td>{html.escape(str(r['example']))}</td><td>{html.escape(labels.get(r['model'], r['model']))}</td>"
                f"<td>{html.escape(', '.join(f'{g:g}' for g in r['goodputs']))}</td><td class=\"num\">{r['goodput']:.4g}</td>"
                f"<td class=\"num\">{r['jain']:.2f}</td><td class=\"num\">{r['dead']:.4g}</td><td class=\"num\">{r['zombie']:.4g}</td></tr>"
                for r in rows]
        head = "<th>example</th><th>model</th><th>goodput per flow</th><th>total</th><th>Jain</th><th>dead</th><th>zombie</th>"
    out.append(f'<div style="overflow-x:auto"><table><tr>{head}</tr>{"".join(body)}</table></div>')
    for spec in data.get("figures", []):
        sel = [r for r in rows if all(r.get(k) == v for k, v in spec.get("where", {}).items())]
        if spec["kind"] == "lines":
            fig = flow_lines(sel, spec["x"], spec["y"], models=spec.get("models"), labels=labels, title=spec.get("title", ""),
                             xlabel=spec.get("xlabel"), logx=spec.get("logx", False))
        elif spec["kind"] == "bars":
            fig = flow_bars(sel, spec["metrics"], labels=labels, title=spec.get("title", ""))
        elif spec["kind"] == "network":
            fig = network_map(data["network"], spec.get("title", ""))
        else:
            raise ValueError(f"{part_dir}: unknown figure kind {spec['kind']!r}")
        out.append(_img(fig, spec.get("title", "")))
    return "\n".join(out)


def write_report(store: Union[str, pathlib.Path], out: Optional[Union[str, pathlib.Path]] = None) -> pathlib.Path:
    """Writes the report of `store` (default ``store/report.html``) and returns its path."""
    store = pathlib.Path(store)
    if not store.is_dir():
        raise FileNotFoundError(f"{store}: no such results directory")
    out = pathlib.Path(out) if out is not None else store / "report.html"
    rep_file = store / "reproduction.json"
    rep = json.loads(rep_file.read_text()) if rep_file.exists() else None
    labels = {str(k): str(v) for k, v in (rep or {}).get("labels", {}).items()}
    body: List[str] = []
    with matplotlib.rc_context({"svg.hashsalt": "macroflow", "font.size": 9}):
        if rep is not None:
            title = rep["title"]
            body.append(f"<h1>{html.escape(title)}</h1>")
            body.append(f"<p><b>Source:</b> {html.escape(rep.get('source', ''))}</p>")
            body.append(f"<p>{html.escape(rep.get('description', ''))}</p>")
            checks = rep.get("checks", [])
            statuses = [check_status(c) for c in checks]
            cls = "fail" if "FAIL" in statuses else "pass"
            body.append(f'<p class="verdict {cls}">{html.escape(tally(checks))}</p>')
            if "INFO" in statuses:
                body.append('<p class="muted">INFO rows are information beside the source\'s words, neither PASS nor FAIL; '
                            'their notes say why they are not checks.</p>')
            rows = "".join(
                f"<tr><td>{html.escape(c['name'])}</td><td>{html.escape(str(c['expected']))}</td>"
                f"<td>{html.escape(str(c['ours']))}</td><td class=\"{st.lower()}\">{st}</td>"
                f"<td class=\"muted\">{html.escape(c.get('note', ''))}</td></tr>"
                for c, st in zip(checks, statuses)
            )
            body.append(f"<table><tr><th>check</th><th>expected (source)</th><th>ours</th><th></th><th>note</th></tr>{rows}</table>")
            if rep.get("duration_s") is not None:
                body.append(f'<p class="muted">{html.escape(str(rep.get("seeds")))} seeds per point, '
                            f'{html.escape(str(rep.get("duration_s")))} s simulated per run.</p>')
            else:
                body.append(f'<p class="muted">{html.escape(str(rep.get("seeds")))} traffic patterns per point.</p>')
            body.extend(_parts_figures(store, rep.get("figures", []), labels))
            for part in rep.get("parts", []):
                if part.get("kind") == "flow":
                    body.append(_flow_section(store / part["dir"], labels))
                else:
                    body.append(_section(store / part["dir"], part.get("title"), labels, part.get("figures")))
        else:
            runs, _, _ = current_runs(store)
            if not runs:
                raise FileNotFoundError(f"{store}: no stored runs (nothing to report)")
            title = runs[0]["scenario"].get("name", store.name)
            body.append(f"<h1>{html.escape(title)}</h1>")
            body.append(_section(store, None, labels))
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + '\n<p class="muted">Written by macroflow (macroflow report).</p></body></html>\n'
    )
    tmp = out.with_name(f".{out.name}.tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(page)
    tmp.replace(out)
    return out
