"""Seed 003 chapter 6 reproduced: the passive Flow State Exchange (Algorithm 3, sec. 6.3.5) with
the RMCAT controllers NADA and GCC, and with TCP (see macroflow.thesis.core for the machinery).

Algorithm 3 is the coupling crate's ``simple_passive`` FSE (crates/coupling fse.rs: "seed 003
Algorithm 3 (sec. 6.3.5)"); its ``passive`` kind is RFC 8699's draft Appendix C (desired rate and
leftover rate TLO), a later algorithm.

Sets (each a shipped ``scenarios/thesis_6_*.toml``):

- ``6.3``: two TCP flows coupled with the passive FSE, Jain's index against the RTT ratio.
- ``6.6``: three NADA and three GCC flows whose priorities change at 50 s.
- ``6.7`` (Figs. 6.7, 6.8): RMCAT "round-trip time fairness", with and without the FSE.
- ``6.9`` (Figs. 6.9, 6.10): RMCAT "media pause and resume", with and without the FSE.
- ``6.11``: two GCC flows, flow 1's signalling with the FSE delayed.

Figs. 6.6-6.11 are single illustrative runs in the dissertation (time series); we draw seed 1 the
same way and compute the checks over every seed run (runs cost well under a second each).
"""

from __future__ import annotations

import copy
import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from macroflow.metrics import jain
from macroflow.reproductions import Check
from macroflow.sweeps import Job
from macroflow.thesis.core import Analysis, FigureSet, draw_arms, job, loads, register, runs_by, start_times

#: Seed 003 Algorithm 3 in the coupling crate.
FSE = "simple_passive"
CONTROLLERS = ("nada", "gcc")
LABEL = {"nada": "NADA", "gcc": "GCC"}
ARM = {"none": "without FSE", FSE: "with FSE"}
#: Time step of the interval means the checks use (the samples are every 0.1 s).
STEP_S = 1.0


# --- building runs -------------------------------------------------------------------------------

def _vary(base: Dict[str, Any], seed: int, controller: Optional[str] = None, kind: Optional[str] = None) -> Dict[str, Any]:
    """The base scenario with every media flow's controller set, the group's kind set, and the
    flows' start times drawn over the first second from `seed` (seed 003's "randomly picked start
    times over the first second")."""
    data = copy.deepcopy(base)
    times = start_times(seed, len(data["flows"]))
    for f, t in zip(data["flows"], times):
        if controller is not None and f["type"] == "media":
            f["controller"] = controller
        f["start_s"] = t
    if kind is not None:
        data["groups"][0]["kind"] = kind
    return data


# --- reading runs --------------------------------------------------------------------------------

def _np() -> Any:
    import numpy

    return numpy


@dataclass
class Series:
    """One run's media time series: per flow the sending rate the controller uses (the FSE's rate
    when coupled) and the bytes received so far, and the bottleneck's queuing delay."""

    t: Any                      # sample times (s), the same for every flow
    rate: Dict[int, Any]        # flow -> sending rate (bit/s) at t; 0 while paused or not started
    recv: Dict[int, Any]        # flow -> cumulative received bytes at t
    q_t: Any                    # queue sample times
    q_delay_s: Any              # bottleneck queuing delay at q_t (bytes * 8 / capacity)
    capacity_bps: float
    duration_s: float


def series(run: Dict[str, Any]) -> Series:
    """The time series of a stored run (its ``media_samples`` and ``queue_samples``)."""
    tables = loads(run)
    sc = run["scenario"]
    ms = tables["media_samples"]
    t_all = ms.column("t_s").to_numpy()
    fl = ms.column("flow").to_numpy()
    rate_all = ms.column("rate_bps").to_numpy()
    recv_all = ms.column("received_bytes").to_numpy()
    media = [f for f in sc["flows"] if f["type"] == "media"]
    t = None
    rate, recv = {}, {}
    for i, f in enumerate(media):
        sel = fl == i
        ti = t_all[sel]
        r = rate_all[sel].astype(float).copy()
        # The controller holds its rate while the application sends nothing (before the start and
        # during a pause); what the flow sends then is 0, and that is what the figures show.
        off = ti < f.get("start_s", 0.0)
        for a, b in f.get("pauses", []):
            off |= (ti >= a) & (ti < b)
        r[off] = 0.0
        rate[i], recv[i] = r, recv_all[sel].astype(float)
        t = ti if t is None else t
    qs = tables["queue_samples"]
    cap = float(sc["topology"]["bottleneck_rate_bps"])
    q_t = qs.column("t_s").to_numpy()
    q_d = qs.column("bytes").to_numpy().astype(float) * 8.0 / cap
    return Series(t, rate, recv, q_t, q_d, cap, float(sc["duration_s"]))


def window_mean(t: Any, x: Any, a: float, b: float) -> float:
    """The mean of the samples x taken at a <= t < b."""
    sel = (t >= a) & (t < b)
    return float(x[sel].mean()) if sel.any() else float("nan")


def received_rate(s: Series, flow: int, a: float, b: float) -> float:
    """Bit/s received by `flow` between the samples nearest to a and b."""
    np = _np()
    ia, ib = int(np.argmin(abs(s.t - a))), int(np.argmin(abs(s.t - b)))
    dt = s.t[ib] - s.t[ia]
    return float((s.recv[flow][ib] - s.recv[flow][ia]) * 8.0 / dt) if dt > 0 else float("nan")


def interval_rates(s: Series, flows: Sequence[int], a: float, b: float, step: float = STEP_S) -> List[Tuple[float, List[float]]]:
    """(interval start, mean sending rate of each flow) for the intervals [a, a + step), ..., < b."""
    out = []
    k = 0
    while a + (k + 1) * step <= b + 1e-9:
        lo = a + k * step
        out.append((lo, [window_mean(s.t, s.rate[f], lo, lo + step) for f in flows]))
        k += 1
    return out


def settle_time(s: Series, flows: Sequence[int], ok: Any, a: float = 1.0, step: float = STEP_S) -> float:
    """The start of the first interval of `step` (from `a`, after the last flow started) from which
    `ok(rates)` holds for every interval to the end of the run; inf if the last one fails."""
    iv = interval_rates(s, flows, a, s.duration_s, step)
    t = math.inf
    for lo, rates in reversed(iv):
        if not ok(rates):
            break
        t = lo
    return t


def peak(t: Any, x: Any, a: float, b: float) -> float:
    sel = (t >= a) & (t < b)
    return float(x[sel].max()) if sel.any() else float("nan")


def _mbps(x: float) -> str:
    return f"{x / 1e6:.3f} Mbit/s"


def _range(xs: Sequence[float], fmt: str = "{:.3f}", of: str = "seeds") -> str:
    """The value, or "lo to hi over n seeds (median m)"; `of` names what the values are of."""
    xs = [x for x in xs if not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return "no runs"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return f"{fmt.format(min(xs))} to {fmt.format(max(xs))} over {len(xs)} {of} (median {fmt.format(statistics.median(xs))})"


def _secs(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:.0f} s"


# --- drawing -------------------------------------------------------------------------------------

def _grid(rows: int, cols: int, w: float, h: float, sharey: Any = "row") -> Tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(w, h), dpi=110, sharex=True, sharey=sharey, squeeze=False)
    return fig, axes


MARKERS = "osD^v"


def _marks(n: int, i: int) -> Tuple[int, int]:
    """Eight markers per line, staggered between lines so that overlapping lines stay apart."""
    step = max(1, n // 8)
    return (min(n - 1, i * step // 5), step)


def draw_rates(ax: Any, s: Series, labels: Sequence[str], title: str) -> None:
    """Sending rate of each flow over time, one line per flow with markers that identify the line
    (as the dissertation's "markers identify the line and not plotted points")."""
    n = len(s.t)
    for i, lab in enumerate(labels):
        ax.plot(s.t, s.rate[i] / 1e6, lw=0.9, marker=MARKERS[i % len(MARKERS)], markevery=_marks(n, i), ms=4, label=lab)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("sending rate (Mbit/s)")
    ax.grid(alpha=0.3)


def draw_delay(ax: Any, s: Series, one_way_s: Sequence[float], labels: Sequence[str]) -> None:
    """Each flow's one-way delay as its base delay plus the bottleneck's queuing delay (the only
    queue its packets meet); one line when every flow has the same base delay."""
    if len(set(one_way_s)) == 1:
        ax.plot(s.q_t, (one_way_s[0] + s.q_delay_s) * 1e3, lw=0.9, color="k", label="every flow")
    else:
        n = len(s.q_t)
        for i, (d, lab) in enumerate(zip(one_way_s, labels)):
            ax.plot(s.q_t, (d + s.q_delay_s) * 1e3, lw=0.9, marker=MARKERS[i % len(MARKERS)], markevery=_marks(n, i),
                    ms=4, label=lab)
    ax.set_ylabel("one-way delay (ms)")
    ax.set_xlabel("time (s)")
    ax.grid(alpha=0.3)


def finish(fig: Any, axes: Any) -> None:
    """y axes from 0 (after everything is drawn, so shared axes keep room for every panel's data)."""
    for row in axes:
        for ax in row:
            ax.set_ylim(bottom=0)
    fig.tight_layout()


def one_way_delays(sc: Dict[str, Any]) -> List[float]:
    topo = sc["topology"]
    acc = topo.get("access_delays_s") or [0.001] * topo["pairs"]
    return [topo["bottleneck_delay_s"] + 2 * acc[f["pair"]] for f in sc["flows"] if f["type"] == "media"]


# --- Fig. 6.6: priorities ------------------------------------------------------------------------

#: Priorities after the change at 50 s (l. 2237-2238), of flows 1, 2, 3.
PRIOS_6_6 = (1.0, 0.66, 0.33)
CHANGE_S = 50.0
#: Tolerance of every ratio check of Fig. 6.6 (chosen before the runs were looked at).
RATIO_TOL = 0.10


def jobs_6_6(base: Dict[str, Any], seeds: int) -> List[Job]:
    return [job({"controller": c}, _vary(base, s, c), s) for c in CONTROLLERS for s in range(1, seeds + 1)]


def _ratio_check(name: str, ratios: List[float], want: float, what: str, of: str = "seeds") -> Check:
    lo, hi = want * (1 - RATIO_TOL), want * (1 + RATIO_TOL)
    worst = max(ratios, key=lambda r: abs(r - want)) if ratios else float("nan")
    ok = bool(ratios) and all(lo <= r <= hi for r in ratios)
    return Check(name, f"{what} = {want:g} (the priority ratio), within +-{RATIO_TOL:.0%}: [{lo:.3f}, {hi:.3f}]",
                 f"{_range(ratios, of=of)}; furthest from {want:g}: {worst:.3f}", ok)


def analyse_6_6(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    fig, axes = _grid(1, 2, 9.0, 3.4)
    for k, c in enumerate(CONTROLLERS):
        rs = runs_by(runs, controller=c)
        if not rs:
            continue
        ss = [series(r) for r in rs]
        s0 = ss[0]
        ax = axes[0][k]
        draw_rates(ax, s0, [f"flow {i + 1} (priority 1 -> {p:g})" for i, p in enumerate(PRIOS_6_6)],
                   f"({'ab'[k]}) FSE with {LABEL[c]}")
        ax.axvline(CHANGE_S, color="grey", ls=":", lw=1)
        ax.set_xlabel("time (s)")
        ax.legend(fontsize=7)
        # Sending rate per 5-s interval (the figure's quantity), before the change (from 20 s: the
        # flows have left their start-up) and after it (from 55 s: 5 s to apply it).
        before, after2, after3 = [], [], []
        for s in ss:
            for _, (r1, r2, r3) in interval_rates(s, [0, 1, 2], 20.0, CHANGE_S, 5.0):
                before += [r2 / r1, r3 / r1]
            for _, (r1, r2, r3) in interval_rates(s, [0, 1, 2], CHANGE_S + 5.0, s.duration_s, 5.0):
                after2.append(r2 / r1)
                after3.append(r3 / r1)
        L = LABEL[c]
        a.checks.append(_ratio_check(f"Fig. 6.6 {L}: equal priorities, 20-50 s", before, 1.0,
                                     "each 5-s mean sending rate of flows 2 and 3 over flow 1's", "intervals x seeds"))
        a.checks.append(_ratio_check(f"Fig. 6.6 {L}: flow 2 after the change (55 s-end)", after2, 0.66,
                                     "each 5-s mean sending rate of flow 2 over flow 1's", "intervals x seeds"))
        a.checks.append(_ratio_check(f"Fig. 6.6 {L}: flow 3 after the change (55 s-end)", after3, 0.33,
                                     "each 5-s mean sending rate of flow 3 over flow 1's", "intervals x seeds"))
        # What the flows receive (their goodput), not only the rate they are told.
        got2 = [received_rate(s, 1, CHANGE_S + 5.0, s.duration_s) / received_rate(s, 0, CHANGE_S + 5.0, s.duration_s) for s in ss]
        got3 = [received_rate(s, 2, CHANGE_S + 5.0, s.duration_s) / received_rate(s, 0, CHANGE_S + 5.0, s.duration_s) for s in ss]
        a.checks.append(_ratio_check(f"Fig. 6.6 {L}: flow 2's received rate after the change", got2, 0.66,
                                     "flow 2's received rate over flow 1's, 55 s-end"))
        a.checks.append(_ratio_check(f"Fig. 6.6 {L}: flow 3's received rate after the change", got3, 0.33,
                                     "flow 3's received rate over flow 1's, 55 s-end"))
        tot_b = [sum(received_rate(s, i, 20.0, CHANGE_S) for i in range(3)) / s.capacity_bps for s in ss]
        tot_a = [sum(received_rate(s, i, CHANGE_S + 5.0, s.duration_s) for i in range(3)) / s.capacity_bps for s in ss]
        a.checks.append(Check(f"Fig. 6.6 {L}: the three flows' received rate over the capacity",
                              "not stated (the figure shows the rates only)",
                              f"20-50 s: {_range(tot_b)}; 55 s-end: {_range(tot_a)}", False,
                              "Shows that the shares are of a used link: the priorities divide what the aggregate gets.", info=True))
    finish(fig, axes)
    a.figures.append(("6.6", fig, "sending rate of each flow (seed 1), priorities of flows 2 and 3 lowered to 0.66 and "
                                  "0.33 at 50 s (dotted line); (a) NADA, (b) GCC"))
    return a


register(FigureSet(
    name="6.6", chapter=6,
    captions={"6.6": "Sending rates of 3 NADA flows and 3 GCC flows as the priorities of flows are varied at around 50 "
                     "seconds. (Note that markers identify the line and not plotted points)"},
    claim="\"The three flows started out with a priority of 1 each. At around 50 s, the priorities of streams 2 and 3 were "
          "decreased to 0.66 and 0.33, respectively. This means that flows get their assigned proportion of the available "
          "capacity without requiring any further changes in the congestion controllers.\" (seed 003 l. 2236-2240)",
    setting="Dumbbell (Fig. 6.5), 3 NADA flows (a) and, separately, 3 GCC flows (b), coupled by the passive FSE "
            "(Algorithm 3, the coupling crate's simple_passive); priorities 1, 1, 1, changed to 1, 0.66, 0.33 at 50 s "
            "(l. 2237-2238). One-way delay 50 ms (l. 2206-2207), queue for 300 ms (l. 2205-2206: 94 packets of 1200 "
            "bytes). The text gives no capacity for Fig. 6.6: we take 3 Mbit/s, the capacity it gives for the other 2-3 flow "
            "test with a 50-ms path (Fig. 6.11, l. 2294) and about the most NADA can fill here: NADA's RMAX is 1.5 Mbit/s "
            "(RFC 8698) and flow 1's share after the change is 1/1.99 of the capacity, 1.508 Mbit/s at 3 Mbit/s, so NADA's "
            "flow 1 stays at RMAX after the change (flows 2 and 3 then get slightly more than 0.66 and 0.33 of its rate); "
            "at a larger capacity RMAX would distort the shares more. Duration 100 s (not stated). Single run in the "
            "dissertation; we draw seed 1 and check every seed (start times drawn over the first second). Tolerance of each ratio: +-10 %, chosen before "
            "looking.",
    base="thesis_6_6_priorities.toml", jobs=jobs_6_6, analyse=analyse_6_6, seeds=10,
    environment="ns-2 simulation (NADA); Chromium 47's WebRTC simulator for GCC (seed 003 l. 196-197, 1832-1833)",
    # Issue 21: the same controllers over real UDP in network namespaces, coupled across processes
    # by macroflowd (the FSE as a daemon): `macroflow reproduce thesis-fig-6.6 --linux`.
    on_linux=True,
))


# --- Figs. 6.7, 6.8: round-trip time fairness ----------------------------------------------------

#: Jain's index of the 1-s mean sending rates above which the flows count as converged to a fair
#: allocation, and the band around the fair share (capacity / n) for the rates' own convergence;
#: both chosen before the runs were looked at.
JAIN_CONVERGED = 0.95
SHARE_BAND = 0.20
#: "Delay is largely unaffected": the mean queuing delay with the FSE within this fraction of the
#: uncoupled one, or within DELAY_ABS_S of it.
DELAY_REL, DELAY_ABS_S = 0.30, 0.010


def jobs_arms(base: Dict[str, Any], seeds: int) -> List[Job]:
    return [job({"controller": c, "fse": k}, _vary(base, s, c, k), s)
            for c in CONTROLLERS for k in ARM for s in range(1, seeds + 1)]


def _fair_share_ok(cap: float, n: int) -> Any:
    share = cap / n
    return lambda rates: all(abs(r - share) <= SHARE_BAND * share for r in rates)


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def analyse_6_7(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    rows = []
    for k, c in enumerate(CONTROLLERS):
        L, fig_id = LABEL[c], ("6.7", "6.8")[k]
        fig, axes = _grid(2, 2, 9.0, 5.6)
        got: Dict[str, Dict[str, List[float]]] = {}
        for j, arm in enumerate(ARM):
            rs = runs_by(runs, controller=c, fse=arm)
            if not rs:
                continue
            ss = [series(r) for r in rs]
            n = len(ss[0].rate)
            ow = one_way_delays(rs[0]["scenario"])
            labels = [f"flow {i + 1} ({d * 1e3:.0f} ms)" for i, d in enumerate(ow)]
            draw_rates(axes[0][j], ss[0], labels, f"({'ab'[j]}) {ARM[arm]}")
            draw_delay(axes[1][j], ss[0], ow, labels)
            flows = list(range(n))
            g = got.setdefault(arm, {})
            g["jain_t"] = [settle_time(s, flows, lambda r: jain(r) >= JAIN_CONVERGED) for s in ss]
            g["jain_min"] = [min(jain(r) for _, r in interval_rates(s, flows, 1.0, s.duration_s)) for s in ss]
            g["share_t"] = [settle_time(s, flows, _fair_share_ok(s.capacity_bps, n)) for s in ss]
            g["jain_recv"] = [jain([received_rate(s, i, 20.0, s.duration_s) for i in flows]) for s in ss]
            g["qdelay"] = [window_mean(s.q_t, s.q_delay_s, 10.0, s.duration_s) for s in ss]
            g["util"] = [sum(received_rate(s, i, 20.0, s.duration_s) for i in flows) / s.capacity_bps for s in ss]
        axes[0][0].legend(fontsize=7)
        finish(fig, axes)
        a.figures.append((fig_id, fig, f"{L}: sending rate of each flow (top) and each flow's one-way delay (its base "
                                       "delay plus the bottleneck's queuing delay, bottom), seed 1; (a) without the FSE, "
                                       "(b) with the passive FSE"))
        if set(got) != set(ARM):
            continue
        no, yes = got["none"], got[FSE]
        for key, what in (("jain_t", f"Jain's index of the 1-s mean sending rates stays >= {JAIN_CONVERGED}"),
                          ("share_t", f"every flow's 1-s mean sending rate stays within +-{SHARE_BAND:.0%} of capacity/5")):
            m_yes, m_no = _median(yes[key]), _median(no[key])
            note = ""
            if key == "jain_t" and m_yes >= m_no:
                note = (f"Without the FSE the {L} flows' 1-s Jain index never fell below {min(no['jain_min']):.3f} after "
                        f"the first second in any run (with it: {min(yes['jain_min']):.4f}): by this measure the uncoupled "
                        "flows are fair from the start (they start at the same rate and ramp up alike), so the FSE cannot "
                        "converge sooner. The definition was fixed before looking and is kept; the rates' own convergence "
                        "(the next check) separates the arms.")
            elif m_yes >= m_no:
                note = "Not faster with the FSE by this measure; see the figure and the table."
            a.checks.append(Check(
                f"Fig. {fig_id} {L}: converges faster with the FSE ({'fairness' if key == 'jain_t' else 'rates'})",
                f"\"the FSE helps both NADA and GCC flows to converge more quickly than without\" (l. 2247-2248): the "
                f"median over seeds of the time from which {what} is lower with the FSE (strictly)",
                f"with FSE {', '.join(_secs(x) for x in yes[key])} (median {_secs(m_yes)}); without "
                f"{', '.join(_secs(x) for x in no[key])} (median {_secs(m_no)})",
                m_yes < m_no, note))
        a.checks.append(Check(
            f"Fig. {fig_id} {L}: perfect fairness with the FSE",
            "\"The FSE not only enforces perfect fairness\" (caption): Jain's index of the five flows' received rates, "
            "20 s-end, >= 0.99 in every run",
            _range(yes["jain_recv"], "{:.4f}"), all(x >= 0.99 for x in yes["jain_recv"])))
        a.checks.append(Check(
            f"Fig. {fig_id} {L}: fairness without the FSE", "not claimed (Fig. 6.7(a)/6.8(a) show it)",
            _range(no["jain_recv"], "{:.4f}"), False, "Jain's index of the received rates, 20 s-end.", info=True))
        d_yes, d_no = statistics.fmean(yes["qdelay"]), statistics.fmean(no["qdelay"])
        tol = max(DELAY_ABS_S, DELAY_REL * d_no)
        a.checks.append(Check(
            f"Fig. {fig_id} {L}: delay largely unaffected",
            f"\"Delay is largely unaffected\" (caption): mean queuing delay (10 s-end) with the FSE within "
            f"max({DELAY_ABS_S * 1e3:.0f} ms, {DELAY_REL:.0%}) of the uncoupled one",
            f"with FSE {d_yes * 1e3:.1f} ms, without {d_no * 1e3:.1f} ms (means over seeds; tolerance {tol * 1e3:.1f} ms)",
            abs(d_yes - d_no) <= tol))
        for arm, g in got.items():
            rows.append([L, ARM[arm], _secs(_median(g["jain_t"])), _secs(_median(g["share_t"])),
                         f"{statistics.fmean(g['jain_recv']):.4f}", f"{statistics.fmean(g['qdelay']) * 1e3:.1f}",
                         f"{statistics.fmean(g['util']):.3f}"])
    a.table = {"title": "Our numbers (means or medians over seeds; the dissertation gives none)",
               "columns": ["controller", "arm", f"converged: Jain >= {JAIN_CONVERGED} (median)",
                           f"converged: rates within {SHARE_BAND:.0%} of C/5 (median)", "Jain, received rates",
                           "mean queuing delay (ms)", "received / capacity"],
               "rows": rows}
    return a


_RTT_CAPTION = ("Sending rates and delays of five {c} flows with one way delays of 10 ms, 25 ms, 50 ms, 100 ms, and 150 ms. "
                "The FSE not only enforces perfect fairness but also helps the congestion control mechanism to converge "
                "quickly. Delay is largely unaffected. (Note that markers identify the line and not plotted points)")

register(FigureSet(
    name="6.7", chapter=6,
    captions={"6.7": _RTT_CAPTION.format(c="NADA"), "6.8": _RTT_CAPTION.format(c="GCC")},
    claim="\"Fig. 6.7 and 6.8 show results for the test case 'round-trip time fairness' for five RMCAT flows with different "
          "round-trip times. The one way propagation delays of flows are 10 ms, 25 ms, 50 ms, 100 ms, and 150 ms, "
          "respectively. Fig. 6.7(b) and 6.8(b) show that the FSE helps both NADA and GCC flows to converge more quickly "
          "than without the FSE (Fig. 6.7(a) and 6.8(a)).\" (seed 003 l. 2244-2248; the test case l. 2218-2221)",
    setting="RMCAT test case \"round-trip time fairness\": dumbbell with 5 pairs, 4 Mbit/s (l. 2207-2208), one-way delays "
            "10, 25, 50, 100, 150 ms (1 ms bottleneck plus two access links per pair), queue for 300 ms (125 packets of "
            "1200 bytes), 5 NADA flows (Fig. 6.7) and 5 GCC flows (Fig. 6.8), uncoupled (a) and coupled by the passive FSE "
            "(b). Duration 120 s (not stated). \"Converge\" is not defined in the text; defined here before looking: the "
            f"time from which Jain's index of the flows' 1-s mean sending rates stays >= {JAIN_CONVERGED} to the end, "
            f"and the time from which every flow's 1-s mean sending rate stays within +-{SHARE_BAND:.0%} of capacity/5. "
            "Single runs in the dissertation; we draw seed 1 and check 10 seeds (start times over the first second).",
    base="thesis_6_7_rtt_fairness.toml", jobs=jobs_arms, analyse=analyse_6_7, seeds=10,
    environment="ns-2 simulation (NADA); Chromium 47's WebRTC simulator for GCC (seed 003 l. 196-197, 1832-1833)",
))


# --- Figs. 6.9, 6.10: media pause and resume -----------------------------------------------------

#: The paused flow (S2; index 1) and its pause, as in the scenario file.
PAUSED = 1
#: Phases of the fairness check (s): before the pause, during it (the two others), after the
#: resume (10 s to settle after 60 s).
PHASES = (("before the pause, 10-40 s", 10.0, 40.0, (0, 1, 2)),
          ("during the pause, 45-60 s", 45.0, 60.0, (0, 2)),
          ("after the resume, 70 s-end", 70.0, None, (0, 1, 2)))
#: The window after the resume in which the delay spike is measured (s).
SPIKE = (60.0, 70.0)


def analyse_6_9(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    rows = []
    for k, c in enumerate(CONTROLLERS):
        L, fig_id = LABEL[c], ("6.9", "6.10")[k]
        fig, axes = _grid(2, 2, 9.0, 5.6)
        got: Dict[str, Dict[str, Any]] = {}
        for j, arm in enumerate(ARM):
            rs = runs_by(runs, controller=c, fse=arm)
            if not rs:
                continue
            ss = [series(r) for r in rs]
            ow = one_way_delays(rs[0]["scenario"])
            labels = [f"flow {i + 1}" + (" (paused 40-60 s)" if i == PAUSED else "") for i in range(len(ss[0].rate))]
            draw_rates(axes[0][j], ss[0], labels, f"({'ab'[j]}) {ARM[arm]}")
            draw_delay(axes[1][j], ss[0], ow, labels)
            for ax in (axes[0][j], axes[1][j]):
                ax.axvspan(40.0, 60.0, color="grey", alpha=0.12, lw=0)
            g = got.setdefault(arm, {})
            for name, lo, hi, flows in PHASES:
                g[name] = [jain([received_rate(s, i, lo, hi or s.duration_s) for i in flows]) for s in ss]
            g["spike"] = [peak(s.q_t, s.q_delay_s, *SPIKE) for s in ss]
            total = [sum(s.rate.values()) for s in ss]
            g["agg_before"] = [window_mean(s.t, x, SPIKE[0] - 1.0, SPIKE[0]) for s, x in zip(ss, total)]
            g["agg_peak"] = [peak(s.t, x, SPIKE[0], SPIKE[0] + 1.0) for s, x in zip(ss, total)]
            g["before_peak"] = [peak(s.q_t, s.q_delay_s, 10.0, 40.0) for s in ss]
        axes[0][0].legend(fontsize=7)
        finish(fig, axes)
        a.figures.append((fig_id, fig, f"{L}: sending rate of each flow (top; flow 2 paused in the shaded 40-60 s) and the "
                                       "one-way delay (50 ms plus the bottleneck's queuing delay, bottom), seed 1; (a) without "
                                       "the FSE, (b) with the passive FSE"))
        if set(got) != set(ARM):
            continue
        no, yes = got["none"], got[FSE]
        for name, _, _, _ in PHASES:
            a.checks.append(Check(
                f"Fig. {fig_id} {L}: fair with the FSE, {name}",
                "\"the FSE distributes the aggregate fairly by enforcing strict fairness\" (l. 2255-2284): Jain's index of "
                "the sending flows' received rates >= 0.99 in every run",
                f"with FSE {_range(yes[name], '{:.4f}')}; without {_range(no[name], '{:.4f}')}",
                all(x >= 0.99 for x in yes[name])))
        m_yes, m_no = statistics.fmean(yes["spike"]), statistics.fmean(no["spike"])
        note = ""
        if m_yes >= m_no:
            note = (f"The flows' aggregate sending rate peaks at {statistics.fmean(yes['agg_peak']) / 1e6:.2f} Mbit/s in the "
                    f"second after the resume with the FSE, {statistics.fmean(no['agg_peak']) / 1e6:.2f} without (from "
                    f"{statistics.fmean(yes['agg_before']) / 1e6:.2f} and {statistics.fmean(no['agg_before']) / 1e6:.2f} just "
                    "before it; means over seeds). See the note below the checks.")
        a.checks.append(Check(
            f"Fig. {fig_id} {L}: smaller delay spike after the resume",
            "\"The FSE also improves the delay spike introduced by a NADA flow (see Fig. 6.9) or a GCC flow (see Fig. 6.10) "
            "after a long pause\" (l. 2284-2286): the peak queuing delay in the 10 s after the resume (60-70 s), mean over "
            "seeds, lower with the FSE (strictly)",
            f"with FSE {m_yes * 1e3:.1f} ms ({_range([x * 1e3 for x in yes['spike']], '{:.0f}')} ms); without "
            f"{m_no * 1e3:.1f} ms ({_range([x * 1e3 for x in no['spike']], '{:.0f}')} ms)",
            m_yes < m_no, note))
        if m_yes >= m_no and c == "nada":
            a.notes.append(
                "Why the FSE makes NADA's spike after the resume larger here (traced in seed 1's time series): during the "
                "pause the two remaining NADA flows are held at NADA's RMAX (1.5 Mbit/s each, 3.0 of the 3.5 Mbit/s), so "
                "the queue is empty and NADA is in accelerated ramp-up when flow 2 resumes. The passive FSE adds the "
                "resumed flow's held rate to S_CR when it registers again (RFC 8699 sec. 5.3.1 step (1); Algorithm 3 shows "
                "only UPDATE), and the other two flows, which see an empty queue for one more feedback interval, ramp back "
                "towards their received rate of 1.5 Mbit/s; each of those UPDATEs raises S_CR again, which the FSE shares "
                "among all three. Uncoupled, only the resumed flow adds its held rate. After the queue has drained, the "
                "three coupled flows re-enter accelerated ramp-up together and their increases add up in S_CR, a second "
                "smaller spike (visible in Fig. 6.9(b)). This is the interaction of NADA's accelerated ramp-up with the "
                "FSE that sec. 6.3.3 (l. 2080-2084) describes for the conservative algorithm. The dissertation's ns-2 "
                "NADA (the authors' code of the time, l. 201-203) may have ramped up differently after a pause, or had "
                "another RMAX; the text gives neither. GCC, whose increase is gradual (multiplicative at most 8 % per "
                "second), shows the improvement the text describes (Fig. 6.10).")
        for arm, g in got.items():
            rows.append([L, ARM[arm]] + [f"{statistics.fmean(g[n]):.4f}" for n, _, _, _ in PHASES]
                        + [f"{statistics.fmean(g['before_peak']) * 1e3:.1f}", f"{statistics.fmean(g['spike']) * 1e3:.1f}",
                           f"{statistics.fmean(g['agg_before']) / 1e6:.2f}", f"{statistics.fmean(g['agg_peak']) / 1e6:.2f}"])
    a.table = {"title": "Our numbers (means over seeds; the dissertation gives none)",
               "columns": ["controller", "arm"] + [f"Jain, {n}" for n, _, _, _ in PHASES]
                          + ["peak queuing delay 10-40 s (ms)", "peak queuing delay 60-70 s (ms)",
                             "sum of sending rates 59-60 s (Mbit/s)", "its peak 60-61 s (Mbit/s)"],
               "rows": rows}
    return a


_PR_CAPTION = ("Sending rates and delays of two continuous and one intermittent {c} flows, with and without the FSE. "
               "(Note that markers identify the line and not plotted points)")

register(FigureSet(
    name="6.9", chapter=6,
    captions={"6.9": _PR_CAPTION.format(c="NADA"), "6.10": _PR_CAPTION.format(c="GCC")},
    claim="\"In this test, all three flows start with the same priority. At around 40 s flow 1 was paused for 20 seconds. "
          "Fig. 6.9(b) and 6.10(b) show that the FSE distributes the aggregate fairly by enforcing strict fairness. The FSE "
          "also improves the delay spike introduced by a NADA flow (see Fig. 6.9) or a GCC flow (see Fig. 6.10) after a long "
          "pause.\" (seed 003 l. 2253-2286; the test case: \"S2 is paused for 20 seconds at around 40 seconds\", l. 2223-2225)",
    setting="RMCAT test case \"media pause and resume\": dumbbell with 3 pairs, 3.5 Mbit/s (l. 2208), one-way delay 50 ms, "
            "queue for 300 ms (109 packets of 1200 bytes), 3 NADA flows (Fig. 6.9) and 3 GCC flows (Fig. 6.10), uncoupled (a) "
            "and coupled by the passive FSE (b). Which flow pauses: the test case says S2 (l. 2224-2225), the results say "
            "\"flow 1\" (l. 2254-2255); both are the second flow if the flows are numbered from 0 (as ns-2 does), so we pause "
            "S2, the second flow (flow 2 in our figures), from 40 to 60 s. Duration 100 s (not stated). A paused flow leaves "
            "the FSE and registers again on resuming (RFC 8699 sec. 5.3). Single runs in the dissertation; we draw seed 1 "
            "and check 10 seeds (start times over the first second).",
    base="thesis_6_9_pause_resume.toml", jobs=jobs_arms, analyse=analyse_6_9, seeds=10,
    environment="ns-2 simulation (NADA); Chromium 47's WebRTC simulator for GCC (seed 003 l. 196-197, 1832-1833)",
    # Issue 21: on real UDP, coupled by macroflowd (see Fig. 6.6's set).
    on_linux=True,
))


# --- Fig. 6.11: delayed signalling ---------------------------------------------------------------

#: Arm -> flow 1's (fse_delay_min_s, fse_delay_max_s): the three of Fig. 6.11 and a 0-ms reference
#: (the text compares with Figs. 6.8(b) and 6.10(b), "tests without delayed feedback", l. 2296-2297).
#: Flow 2's delay stays as the scenario file fixes it (none).
DELAYS = {"0 ms": (0.0, 0.0), "50 ms": (0.05, 0.05), "100 ms": (0.1, 0.1), "1-100 ms": (0.001, 0.1)}
PANEL = {"0 ms": "reference: no delay", "50 ms": "(a) fixed 50 ms", "100 ms": "(b) fixed 100 ms",
         "1-100 ms": "(c) uniform 1-100 ms"}
#: The two flows' received-rate ratio (10 s-end) that counts as fair: within +-10 % of 1.
FAIR_TOL = 0.10


def jobs_6_11(base: Dict[str, Any], seeds: int) -> List[Job]:
    out = []
    for arm, (lo, hi) in DELAYS.items():
        for s in range(1, seeds + 1):
            d = _vary(base, s)
            # Only flow 1's signalling is delayed (l. 2291-2294, 2298-2299); flow 2 keeps its own.
            d["flows"][0].update(fse_delay_min_s=lo, fse_delay_max_s=hi)
            out.append(job({"delay": arm}, d, s))
    return out


def analyse_6_11(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    fig, axes = _grid(1, 4, 11.0, 3.2, sharey=True)
    rows = []
    for j, arm in enumerate(DELAYS):
        rs = runs_by(runs, delay=arm)
        if not rs:
            continue
        ss = [series(r) for r in rs]
        draw_rates(axes[0][j], ss[0], ["flow 1 (signalling delayed)", "flow 2"], PANEL[arm])
        axes[0][j].set_xlabel("time (s)")
        if j:
            axes[0][j].set_ylabel("")
        else:
            axes[0][j].legend(fontsize=7, loc="lower right")
        ratio = [received_rate(s, 0, 10.0, s.duration_s) / received_rate(s, 1, 10.0, s.duration_s) for s in ss]
        # How far apart the two rates are from interval to interval ("slightly affected").
        spread = [statistics.fmean(abs(r1 - r2) / (r1 + r2) for _, (r1, r2) in interval_rates(s, [0, 1], 10.0, s.duration_s))
                  for s in ss]
        util = [(received_rate(s, 0, 10.0, s.duration_s) + received_rate(s, 1, 10.0, s.duration_s)) / s.capacity_bps for s in ss]
        rows.append([arm, f"{statistics.fmean(ratio):.3f}", f"{statistics.fmean(spread):.4f}", f"{statistics.fmean(util):.3f}"])
        if arm == "0 ms":
            a.checks.append(Check("Fig. 6.11 reference without delay: flow 1 / flow 2 received rate",
                                  "not in Fig. 6.11 (the text compares with Figs. 6.8(b), 6.10(b))", _range(ratio), False,
                                  "The same two coupled GCC flows with instant signalling.", info=True))
            continue
        lo, hi = 1 - FAIR_TOL, 1 / (1 - FAIR_TOL)
        a.checks.append(Check(
            f"Fig. 6.11 {PANEL[arm]}: still fair",
            "\"the flows can achieve a fair rate allocation even with delayed feedback\" (l. 2301-2302): flow 1's received "
            f"rate over flow 2's (10 s-end) within [{lo:.2f}, {hi:.2f}] (+-10 %) in every run",
            _range(ratio), all(lo <= x <= hi for x in ratio)))
        a.checks.append(Check(
            f"Fig. 6.11 {PANEL[arm]}: mean difference of the two 1-s sending rates",
            "\"the rate allocation is slightly affected when we increase the fixed delay from 50 ms to 100 ms\" (l. 2294-2296)",
            _range(spread, "{:.4f}") + " (|r1 - r2| / (r1 + r2))", False,
            "Not counted: \"slightly\" has no number; compare with the 0-ms row of the table.", info=True))
    finish(fig, axes)
    a.figures.append(("6.11", fig, "sending rates of the two coupled GCC flows (seed 1) with the signalling between flow 1 "
                                   "and the FSE delayed (flow 2's not): none (reference), fixed 50 ms (a), fixed 100 ms (b), "
                                   "uniform 1-100 ms (c)"))
    a.table = {"title": "Our numbers (means over seeds; the dissertation gives none)",
               "columns": ["signalling delay", "flow 1 / flow 2 received rate", "mean |r1 - r2| / (r1 + r2) per 1 s",
                           "received / capacity"],
               "rows": rows}
    a.notes.append(
        "As in the dissertation, only flow 1's signalling with the FSE is delayed (l. 2291-2294, 2298-2299); flow 2's is "
        "\"fixed\" at a value the text does not give, and we take none (0 ms). Flow 1's delay applies to each of its "
        "messages, its UPDATEs to the FSE and the FSE's answers to it (the simple passive FSE answers only the flow that "
        "updated), each drawn anew in the uniform case; so flow 1 takes the FSE's rate one signalling round trip (2 x the "
        "delay) after the UPDATE it answers, flow 2 at once. Whether the dissertation delayed both directions is not said.")
    return a


register(FigureSet(
    name="6.11", chapter=6,
    captions={"6.11": "Two GCC flows coupled via the FSE, where delay between stream 1 and the FSE is varied based on (a) "
                      "fixed delay of 50 ms (b) fixed delay of 100 ms, and (c) uniformly distributed random delay, between 1 "
                      "and 100 ms."},
    claim="\"It can be seen from Fig. 6.11 that the rate allocation is slightly affected when we increase the fixed delay from "
          "50 ms to 100 ms (see Fig. 6.11(a) and 6.11(b) compared to tests without delayed feedback (see Fig. 6.8(b) and "
          "6.10(b)). [...] Delay is selected from a uniformly random distribution where values vary between 1 and 100 ms. "
          "Fig. 6.11(c) demonstrates the robustness of the FSE as the flows can achieve a fair rate allocation even with "
          "delayed feedback.\" (seed 003 l. 2294-2302)",
    setting="Dumbbell with 2 pairs, 3 Mbit/s (l. 2294), one-way delay 50 ms, queue for 300 ms (94 packets of 1200 bytes), "
            "2 GCC flows coupled by the passive FSE, flow 1's signalling delayed by a fixed 50 ms, a fixed 100 ms, or uniformly "
            "in [1, 100] ms per message (the caption says 1-100 ms; the figure's axis text, l. 2320-2322, \"between 0 and 100 "
            "ms\"), and a 0-ms reference. As in the dissertation only flow 1's signalling is delayed (its UPDATEs and the "
            "FSE's answers to it; a flow's own fse_delay_min_s/fse_delay_max_s); flow 2's is \"fixed\" (l. 2293-2294) at a "
            "value the text does not give: we take 0 ms. Duration 100 s (not stated). Single runs in the dissertation; we "
            "draw seed 1 and check 10 seeds.",
    base="thesis_6_11_fse_delay.toml", jobs=jobs_6_11, analyse=analyse_6_11, seeds=10,
    environment="Chromium 47's WebRTC simulator (GCC; seed 003 l. 196-197, 1832-1833)",
))


# --- Fig. 6.3: two TCP flows under the passive FSE -----------------------------------------------

#: Flow 2's RTT over flow 1's (10 ms). The text gives no values.
RTT_RATIOS = (1, 2, 4, 8, 16)
#: Flow 1's RTT: 2 x (1 ms bottleneck + 2 x 2 ms access).
SHORT_RTT_S = 0.010
TCP_ARMS = {FSE: "coupled (passive FSE)", "none": "uncoupled (reference)"}


def _access_for(ratio: float) -> float:
    """Flow 2's access delay for RTT ratio x SHORT_RTT_S (one-way = 1 ms + 2 x access)."""
    return round((ratio * SHORT_RTT_S / 2 - 0.001) / 2, 9)


def jobs_6_3(base: Dict[str, Any], seeds: int) -> List[Job]:
    out = []
    for arm in TCP_ARMS:
        for r in RTT_RATIOS:
            for s in range(1, seeds + 1):
                d = _vary(base, s, kind=arm)
                d["topology"]["access_delays_s"] = [_access_for(1), _access_for(r)]
                out.append(job({"coupling": arm, "rtt_ratio": r}, d, s))
    return out


def tcp_flows(run: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The two TCP flows' rows of the run's flows table (flow 1, the short RTT, first)."""
    return sorted(loads(run)["flows"].to_pylist(), key=lambda f: f["flow"])


def tcp_goodputs(run: Dict[str, Any]) -> List[float]:
    """The two TCP flows' goodputs over the run (flow 1, the short RTT, first)."""
    return [f["goodput_bps"] for f in tcp_flows(run)]


def _lag_note(per_flow: Dict[str, Dict[float, Dict[str, List[float]]]], r: float) -> str:
    """How the long-RTT flow fares at ratio `r` coupled against uncoupled (the mechanism behind the
    FSE's unfairness there), from the runs' per-flow counts; empty without both arms."""
    if r not in per_flow.get(FSE, {}) or r not in per_flow.get("none", {}):
        return ""
    c, u = per_flow[FSE][r], per_flow["none"][r]
    return (f"How, at ratio {r}: once per its own round trip the long-RTT flow sets cwnd = FSE_R x SRTT from the FSE's "
            "answer (half the sum the short-RTT flow's far more frequent reports keep moving), so its window moves in "
            "large steps it sends as bursts into the "
            f"13-packet queue (largest burst {c['max_burst_pkts'][1]:.0f} packets coupled, {u['max_burst_pkts'][1]:.0f} "
            f"uncoupled; means over seeds) and loses far more than uncoupled ({c['retransmits'][1]:.0f} retransmits and "
            f"{c['timeouts'][1]:.0f} timeouts per run, against {u['retransmits'][1]:.0f} and {u['timeouts'][1]:.0f}); in "
            "loss recovery it calls no UPDATE, and the FSE's sum moves with the short-RTT flow's reports alone.")


def analyse_6_3(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    pts: Dict[str, Dict[float, List[float]]] = {}
    short_share: Dict[str, Dict[float, float]] = {}
    #: arm -> ratio -> per flow (mean over seeds): retransmits, timeouts, measured mean RTT (s).
    per_flow: Dict[str, Dict[float, Dict[str, List[float]]]] = {}
    for arm, label in TCP_ARMS.items():
        for r in RTT_RATIOS:
            rs = runs_by(runs, coupling=arm, rtt_ratio=r)
            if rs:
                fl = [tcp_flows(x) for x in rs]
                g = [[f["goodput_bps"] for f in x] for x in fl]
                pts.setdefault(label, {})[r] = [jain(x) for x in g]
                short_share.setdefault(arm, {})[r] = statistics.fmean(x[0] / sum(x) for x in g)
                per_flow.setdefault(arm, {})[r] = {
                    k: [statistics.fmean(float(x[i][k]) for x in fl) for i in range(2)]
                    for k in ("retransmits", "timeouts", "mean_rtt_s", "max_burst_pkts")}
    fig, ax = _grid(1, 1, 5.0, 3.2)
    ax = ax[0][0]
    draw_arms(ax, pts, "RTT ratio (flow 2's base RTT / flow 1's, flow 1: 10 ms)", "Jain's fairness index")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(RTT_RATIOS), [str(r) for r in RTT_RATIOS])
    fig.tight_layout()
    a.figures.append(("6.3", fig, "Jain's index of the two TCP flows' goodputs against the RTT ratio, mean and min-max over "
                                  "seeds: coupled with the passive FSE, and uncoupled for reference"))
    c = pts.get(TCP_ARMS[FSE], {})
    means = {r: statistics.fmean(v) for r, v in sorted(c.items())}
    if means:
        lo_r, hi_r = min(means), max(means)
        a.checks.append(Check(
            "Fig. 6.3: fair at equal RTTs", "both flows have the same priority (l. 1940-1941): mean Jain's index at RTT "
            "ratio 1 >= 0.95", f"{means[lo_r]:.4f}", means[lo_r] >= 0.95))
        a.checks.append(Check(
            "Fig. 6.3: fairness deteriorates with the RTT ratio",
            "\"TCP's fairness deteriorates as the flow RTT ratio decreases\" (caption; our ratio is long over short, see "
            f"the note): mean Jain's index at the largest ratio ({hi_r}) at least 0.05 below ratio 1",
            f"{means[hi_r]:.4f} at {hi_r} vs {means[lo_r]:.4f} at 1; flow 1 (the short RTT) gets "
            f"{short_share[FSE][hi_r]:.0%} of the goodput at {hi_r}", means[hi_r] <= means[lo_r] - 0.05,
            _lag_note(per_flow, hi_r)))
        steps = list(means.values())
        rises = [b - x for x, b in zip(steps, steps[1:])]
        ok = all(x <= 0.02 for x in rises)
        note = ""
        # Ratios at which the longer-RTT flow (flow 2) gets more, coupled and uncoupled alike: the
        # index dips there for another reason than the FSE's lag, which favours the short-RTT flow.
        flipped = [r for r, x in sorted(short_share[FSE].items())
                   if r > 1 and x < 0.5 and short_share.get("none", {}).get(r, 0.0) < 0.5]
        if not ok and flipped:
            pf, pu = per_flow[FSE], per_flow["none"]
            note = (
                "The index dips before it falls: at RTT ratio " + ", ".join(str(r) for r in flipped) + " the longer-RTT "
                "flow gets more (flow 1's share " + ", ".join(f"{short_share[FSE][r]:.0%}" for r in flipped) + "), because "
                "the drop-tail queue's losses fall on flow 1 (retransmits per run, flow 1 / flow 2: "
                + ", ".join(f"{pf[r]['retransmits'][0]:.0f} / {pf[r]['retransmits'][1]:.0f}" for r in flipped)
                + "; timeouts " + ", ".join(f"{pf[r]['timeouts'][0]:.0f} / {pf[r]['timeouts'][1]:.0f}" for r in flipped)
                + "). The uncoupled flows show the same at these ratios, stronger (flow 1's share "
                + ", ".join(f"{short_share['none'][r]:.0%}" for r in flipped) + ", retransmits "
                + ", ".join(f"{pu[r]['retransmits'][0]:.0f} / {pu[r]['retransmits'][1]:.0f}" for r in flipped)
                + "): a phase effect of two ack-clocked flows at a 13-packet drop-tail queue, in which the flow whose "
                "packets meet the full queue is the same one time after time (Floyd and Jacobson's traffic phase "
                "effects), not the FSE's lag. The passive FSE narrows it (it gives both flows the same rate at their next "
                "UPDATE) but cannot undo it, as flow 1 calls no UPDATE while in loss recovery."
                + f" The lag the dissertation describes shows at ratio {hi_r}, where the short-RTT flow gets "
                f"{short_share[FSE][hi_r]:.0%}. The text gives no RTTs and the figure's values are not in it, so whether "
                "the dissertation's ns-2 runs had such a dip cannot be told.")
        a.checks.append(Check(
            "Fig. 6.3: no recovery at larger ratios",
            "mean Jain's index never rises by more than 0.02 from one ratio to the next",
            ", ".join(f"{r}: {m:.4f}" for r, m in means.items()), ok, note))
    u = pts.get(TCP_ARMS["none"], {})
    longer_wins = [r for r, x in sorted(short_share.get("none", {}).items()) if r > 1 and x < 0.5]
    if u:
        a.checks.append(Check(
            "Fig. 6.3: uncoupled reference", "not in the dissertation's figure",
            ", ".join(f"{r}: {statistics.fmean(v):.4f}" for r, v in sorted(u.items())) + "; flow 1's share of the goodput: "
            + ", ".join(f"{r}: {x:.0%}" for r, x in sorted(short_share["none"].items())), False,
            "The same two NewReno flows without coupling: how much of the unfairness is TCP's own RTT bias. The "
            "dissertation shows no uncoupled arm." + (
                " With a 13-packet drop-tail queue the uncoupled shares also depend on phase effects: at RTT ratio "
                + ", ".join(str(r) for r in longer_wins) + " the longer-RTT flow gets more." if longer_wins else ""),
            info=True))
    a.notes.append(
        "The caption says fairness deteriorates as the RTT ratio \"decreases\" (l. 2022-2024), the text that the cause is "
        "large RTT differences (l. 1934-1940). We draw the ratio as the long RTT over the short one (>= 1), so fairness is "
        "expected to fall as it grows; the caption's ratio must be the short RTT over the long one.")
    if FSE in per_flow:
        rtts = per_flow[FSE]
        a.notes.append(
            "The x axis is the ratio of the base RTTs. A full 13-packet queue at 3 Mbit/s holds 52 ms of 1500-byte "
            "packets, more than flow 1's base RTT of 10 ms, so the RTTs the flows measure differ far less than their base "
            "RTTs (coupled, mean measured RTT flow 2 / flow 1: "
            + ", ".join(f"{r}: {x['mean_rtt_s'][1] / x['mean_rtt_s'][0]:.1f}" for r, x in sorted(rtts.items()))
            + "; see the table).")
    rows = []
    for arm, label in TCP_ARMS.items():
        for r, x in sorted(per_flow.get(arm, {}).items()):
            rows.append([label, str(r), f"{x['mean_rtt_s'][0] * 1e3:.0f} / {x['mean_rtt_s'][1] * 1e3:.0f}",
                         f"{statistics.fmean(pts[label][r]):.4f}", f"{short_share[arm][r]:.0%}",
                         f"{x['retransmits'][0]:.0f} / {x['retransmits'][1]:.0f}",
                         f"{x['timeouts'][0]:.1f} / {x['timeouts'][1]:.1f}",
                         f"{x['max_burst_pkts'][0]:.0f} / {x['max_burst_pkts'][1]:.0f}"])
    a.table = {"title": "Our numbers (means over seeds; the dissertation gives none)",
               "columns": ["arm", "base RTT ratio", "measured mean RTT, flow 1 / flow 2 (ms)", "Jain's index",
                           "flow 1's share of the goodput", "retransmits, flow 1 / flow 2", "timeouts, flow 1 / flow 2",
                           "largest burst, flow 1 / flow 2 (packets)"],
               "rows": rows}
    return a


FIG_6_3 = register(FigureSet(
    name="6.3", chapter=6,
    captions={"6.3": "Jain's fairness index [20] for two TCP flows with heterogeneous RTTs coupled with the passive FSE. "
                     "TCP's fairness deteriorates as the flow RTT ratio decreases due to the lag in adopting the FSE assigned "
                     "rate."},
    claim="\"a passive FSE can create problems with flows that do not update their rate for relatively longer periods - "
          "typically because RTTs are significantly different. This is shown in Fig. 6.3, where two TCP flows are coupled "
          "using a passive FSE in ns-2 simulations (dumbbell topology, 3 Mbps bottleneck, and a queue length of 13 packets). "
          "Because TCP updates its rate as a function of the RTT, large RTT differences also delay the feedback from the "
          "FSE. This prevents the FSE from imposing strict fairness (in the test shown in Fig. 6.3, both flows have the same "
          "priority).\" (seed 003 l. 1933-1941)",
    setting="Dumbbell, 3 Mbit/s, drop-tail queue of 13 packets (l. 1937-1938), two NewReno flows of priority 1 coupled by "
            "the passive FSE (Algorithm 3; once per round trip, outside loss recovery, a TCP flow calls UPDATE with "
            "CC_R = cwnd x MSS / SRTT and sets cwnd = FSE_R x SRTT / MSS from the answer: crates/sim "
            "engine/tcp_flows/fse.rs). The receivers ACK every segment, as ns-2's default TCPSink (the text names no sink; "
            "the simulator's default would delay ACKs). The RTTs are not given: flow 1 has a base RTT of 10 ms (the RTT of "
            "the chapter-5 dumbbell the 13-packet queue comes from, l. 1487), flow 2 has 1, 2, 4, 8, 16 times that. An "
            "uncoupled arm is added for reference. Duration 100 s (not stated); Jain's index of the two flows' goodputs over the run; 10 seeds with "
            "start times over the first second.",
    base="thesis_6_3_tcp_passive.toml", jobs=jobs_6_3, analyse=analyse_6_3, seeds=10,
    environment="ns-2 simulation",
))
