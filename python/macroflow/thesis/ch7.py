"""Seed 003 chapter 7 reproduced (see macroflow.thesis.core for the machinery): a joining connection
handed a share of a large aggregate window, without and with the ack-clocked handover of
Algorithm 4 (Fig. 7.1), and what the handover does to the completion time of a short flow joining
a long one (Fig. 7.2, the same experiment as Fig. 9.7).

The join analysis (:func:`join_jobs`, :func:`join_analysis`) is shared with chapter 9's Fig. 9.3,
which repeats Fig. 7.1 with two connections.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Optional, Tuple

from macroflow.reproductions import Check
from macroflow.sweeps import Job
from macroflow.thesis.core import Analysis, FigureSet, draw_arms, job, loads, mean, register, runs_by, start_times

__all__ = ["join_jobs", "join_analysis", "flow_series", "queue_series", "subplots", "MSS_BYTES"]

#: The simulator's TCP payload per 1500-byte packet (its default MSS).
MSS_BYTES = 1448
#: The couplers of the join experiments: ctrlTCP without and with Algorithm 4, and uncoupled
#: connections as a reference the text does not draw.
WITHOUT, WITH, UNCOUPLED = "ccc", "ccc_handover", "none"
ARM_LABELS = {WITHOUT: "ctrlTCP without ack-clocking", WITH: "ctrlTCP with ack-clocking (Alg. 4)", UNCOUPLED: "uncoupled"}


# --- helpers shared with chapter 9 ---------------------------------------------------------------

def subplots(rows: int, cols: int, w: float, h: float, **kw: Any) -> Tuple[Any, Any]:
    """A grid of axes at the chapter pages' resolution (core.new_figure makes one)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=(w, h), dpi=110, squeeze=False, **kw)


def flow_series(run: Dict[str, Any]) -> Dict[int, Dict[str, List[Any]]]:
    """Each TCP flow's samples of the run: flow id -> {"t", "cwnd", "ssthresh", "state", "delivered"}."""
    t = loads(run)["flow_samples"].to_pydict()
    out: Dict[int, Dict[str, List[Any]]] = {}
    for ts, f, w, ss, st, b in zip(t["t_s"], t["flow"], t["cwnd_pkts"], t["ssthresh_pkts"], t["state"], t["delivered_bytes"]):
        d = out.setdefault(int(f), {"t": [], "cwnd": [], "ssthresh": [], "state": [], "delivered": []})
        d["t"].append(float(ts))
        d["cwnd"].append(float(w))
        d["ssthresh"].append(float(ss))
        d["state"].append(st)
        d["delivered"].append(float(b))
    return out


def queue_series(run: Dict[str, Any]) -> Tuple[List[float], List[float]]:
    """The measured link's queue samples (packets) of a run with one measured link."""
    t = loads(run)["queue_samples"].to_pydict()
    return [float(x) for x in t["t_s"]], [float(x) for x in t["pkts"]]


def bottleneck_drops(run: Dict[str, Any]) -> int:
    """Packets dropped at the run's measured link (the bottleneck)."""
    tables = loads(run)
    links = set(tables["queue_samples"].column("link").to_pylist())
    return int(sum(l["dropped_pkts"] for l in tables["links"].to_pylist() if l["link"] in links))


def _at(series: Dict[str, List[Any]], key: str, t_s: float) -> float:
    """The last sample of `key` at or before `t_s` (NaN before the first)."""
    got = float("nan")
    for ts, v in zip(series["t"], series[key]):
        if ts > t_s + 1e-9:
            break
        got = v
    return got


# --- Fig. 7.1 and Fig. 9.3: a connection joining a large aggregate --------------------------------

def join_jobs(base: Dict[str, Any], seeds: int) -> List[Job]:
    """Per seed and arm (ctrlTCP without and with ack-clocking, and uncoupled): the base run, and the
    same run stopped just before the first join (``part = "before"``), whose bottleneck drops are
    those of the start-up; the run's drops minus these are the drops the joins cause (the
    simulator is deterministic, so the two runs are the same up to the first join; the analysis
    checks that on connection 1's samples). Connection 1 starts at a time drawn over the first
    second (the text does not give it); the joiners at the file's times."""
    join = min(f["start_s"] for f in base["flows"][1:])
    out = []
    for s in range(1, seeds + 1):
        for arm in (WITHOUT, WITH, UNCOUPLED):
            data = copy.deepcopy(base)
            data["groups"][0]["kind"] = arm
            data["flows"][0]["start_s"] = start_times(s, 1)[0]
            out.append(job({"coupling": arm, "part": "run"}, data, s))
            before = copy.deepcopy(data)
            before["duration_s"] = round(join - 0.001, 6)
            out.append(job({"coupling": arm, "part": "before"}, before, s))
    return out


def _join_numbers(run: Dict[str, Any], before: Optional[Dict[str, Any]], join_s: float) -> Dict[str, Any]:
    """What the checks compare for one run: drops after the first join (NaN if the run stopped
    before it does not match the run up to the join), the joiners' largest burst and
    retransmissions, the queue's peak after the join."""
    flows = loads(run)["flows"].to_pylist()
    joiners = [f for f in flows if f["flow"] != 0]
    drops_after = float("nan")
    same = False
    if before is not None:
        a, b = flow_series(run).get(0), flow_series(before).get(0)
        if a and b:
            last = b["t"][-1]
            same = (abs(_at(a, "delivered", last) - _at(b, "delivered", last)) < 1
                    and abs(_at(a, "cwnd", last) - _at(b, "cwnd", last)) < 1e-9)
        if same:
            drops_after = float(bottleneck_drops(run) - bottleneck_drops(before))
    qt, qp = queue_series(run)
    return {
        "drops_after": drops_after,
        "same_prefix": same,
        "burst": max((f["max_burst_pkts"] for f in joiners), default=0),
        "retx": sum(f["retransmits"] for f in joiners),
        "timeouts": sum(f["timeouts"] for f in joiners),
        "q_peak": max((p for t, p in zip(qt, qp) if t >= join_s), default=float("nan")),
        "q_peak_before": max((p for t, p in zip(qt, qp) if t < join_s), default=float("nan")),
        "q_min_join": min((p for t, p in zip(qt, qp) if join_s <= t <= join_s + 0.5), default=float("nan")),
    }


def join_analysis(runs: List[Dict[str, Any]], fig_id: str, what: str, claim_loss: str, claim_fixed: str) -> Analysis:
    """Figures and checks of a join experiment (Fig. 7.1 or 9.3): per arm (columns) the
    time-sequence plot of the joining connections (segments delivered since each joined), every
    connection's cwnd, and the bottleneck queue, for the first seed; the checks on the means over
    seeds: no drop after the join with ack-clocking, drops without it, and a smaller joining burst
    with it."""
    a = Analysis()
    main = runs_by(runs, part="run")
    if not main:
        a.notes.append("No runs.")
        return a
    flows0 = loads(main[0])["flows"].to_pylist()
    starts = {f["flow"]: float(f["start_s"]) for f in flows0}
    join_s = min(v for k, v in starts.items() if k != 0)
    nums: Dict[str, List[Dict[str, Any]]] = {}
    for arm in (WITHOUT, WITH, UNCOUPLED):
        for r in runs_by(runs, coupling=arm, part="run"):
            pre = next((b for b in runs_by(runs, coupling=arm, part="before") if b["seed"] == r["seed"]), None)
            nums.setdefault(arm, []).append(_join_numbers(r, pre, join_s))

    def m(arm: str, key: str) -> float:
        return mean([n[key] for n in nums.get(arm, [])])

    # The figure: one column per arm, the dissertation's two first.
    arms = [x for x in (WITHOUT, WITH, UNCOUPLED) if runs_by(runs, coupling=x, part="run")]
    fig, ax = subplots(3, len(arms), 4.0 * len(arms), 7.6, sharex=True)
    for c, arm in enumerate(arms):
        r = runs_by(runs, coupling=arm, part="run")[0]
        fs = flow_series(r)
        t0 = join_s - 0.5
        for f in sorted(fs):
            d = fs[f]
            ts = [t for t in d["t"] if t >= t0]
            if f != 0:
                b0 = _at(d, "delivered", starts[f])
                seq = [(b - (0 if math.isnan(b0) else b0)) / MSS_BYTES for t, b in zip(d["t"], d["delivered"]) if t >= starts[f]]
                ax[0][c].plot([t for t in d["t"] if t >= starts[f]], seq, label=f"connection {f + 1}")
            ax[1][c].plot(ts, [w for t, w in zip(d["t"], d["cwnd"]) if t >= t0], label=f"connection {f + 1}")
        qt, qp = queue_series(r)
        ax[2][c].plot([t for t in qt if t >= t0], [p for t, p in zip(qt, qp) if t >= t0], color="0.3")
        n = nums[arm][0]
        drops = "n/a" if math.isnan(n["drops_after"]) else f"{n['drops_after']:.0f}"
        ax[0][c].set_title(f"{'(a) ' if arm == WITHOUT else '(b) ' if arm == WITH else ''}{ARM_LABELS[arm]}\n"
                           f"drops after the join: {drops}, joiners' largest burst: {n['burst']} pkts", fontsize=8)
        for s in sorted(v for k, v in starts.items() if k != 0):
            for row in range(3):
                ax[row][c].axvline(s, color="0.7", lw=0.8, ls=":")
        ax[0][c].set_ylabel("segments delivered since joining")
        ax[1][c].set_ylabel("cwnd (packets)")
        ax[2][c].set_ylabel("bottleneck queue (packets)")
        ax[2][c].set_xlabel("time (s)")
        for row in range(2):
            ax[row][c].legend(fontsize=7)
        for row in range(3):
            ax[row][c].grid(alpha=0.3)
    fig.tight_layout()
    a.figures.append((fig_id, fig, what))

    n_seeds = len(nums.get(WITH, []))
    seeds_txt = f"mean over {n_seeds} run{'s' if n_seeds != 1 else ''}"
    w_drops, wo_drops, u_drops = m(WITH, "drops_after"), m(WITHOUT, "drops_after"), m(UNCOUPLED, "drops_after")
    prefix_ok = all(n["same_prefix"] for ns in nums.values() for n in ns)
    prefix_note = ("" if prefix_ok else "The run stopped before the join did not match the full run up to the join, so "
                   "the drops after the join could not be separated from the start-up's (NaN). ")
    a.checks.append(Check(
        f"Fig. {fig_id}: with ack-clocking, no packet lost after the join",
        f"0 bottleneck drops from the first join to the end ({claim_fixed}); tolerance: none ({seeds_txt})",
        f"{w_drops:.1f} drops (queue peak {m(WITH, 'q_peak'):.0f} of its limit)", w_drops == 0,
        prefix_note + ("" if w_drops == 0 else
                       f"The joiners were released their share one segment per N ACKs of the others, yet the bottleneck "
                       f"dropped {w_drops:.1f} packets after the join; the uncoupled reference dropped {u_drops:.1f}.")))
    without_ok = wo_drops > 0
    note = prefix_note
    if not without_ok:
        note += (
            f"Our ctrlTCP without Algorithm 4 is not the algorithm the text measured. Since issue 11 no coupler answer may "
            f"let a connection send more at once than its own controller would (the coupler's max_burst_pkts, 0 by "
            f"default): a joiner is told its own initial window and an ssthresh of its share, and slow-starts up to "
            f"the share on its own ACK clock, while the connections already running give up their share at once. The "
            f"aggregate therefore never exceeds one window and the joiners' largest burst is the initial window "
            f"({m(WITHOUT, 'burst'):.0f} packets, as an uncoupled connection's {m(UNCOUPLED, 'burst'):.0f}); the queue "
            f"peaked at {m(WITHOUT, 'q_peak'):.0f} packets after the join (83 is full), {m(WITHOUT, 'retx'):.0f} "
            f"retransmissions by the joiners. The dissertation's draft algorithm [9] handed the joiner its whole share "
            f"as one burst (Algorithm 5, line 12). That variant needs an unbounded burst limit: the simulator's engine "
            f"has it (Sim::set_max_burst_pkts in crates/sim), but neither the Python Simulation nor the scenario files "
            f"expose it, so no scenario can run it. For scale: uncoupled joiners, which send their initial window on "
            f"top of a full aggregate, caused {u_drops:.1f} drops after the join.")
    a.checks.append(Check(
        f"Fig. {fig_id}: without ack-clocking, the join causes losses",
        f"> 0 bottleneck drops from the first join to the end ({claim_loss}); tolerance: any drop ({seeds_txt})",
        f"{wo_drops:.1f} drops (queue peak {m(WITHOUT, 'q_peak'):.0f})", without_ok, note))
    wb, wob = m(WITH, "burst"), m(WITHOUT, "burst")
    a.checks.append(Check(
        f"Fig. {fig_id}: the joining connections' burst",
        "largest burst of the joiners (packets one sender emits at one instant) smaller with ack-clocking than without "
        f"(the text: the ack clock avoids 'sudden bursts'); tolerance: strictly smaller ({seeds_txt})",
        f"{wb:.1f} vs {wob:.1f} packets", wb < wob,
        "With Algorithm 4 a joiner starts with one segment and gets one more per N ACKs of the others, so its bursts "
        "are those of its own ACK clock; without it, the joiner's first flight is its initial window of 10 segments."
        if wb < wob else "The ack-clocked joiner still sent bursts as large as without the handover."))
    a.checks.append(Check(
        f"Fig. {fig_id}: uncoupled joiners (a reference the text does not draw)",
        "no claim in the source", f"{u_drops:.1f} drops after the join, largest burst {m(UNCOUPLED, 'burst'):.0f} packets, "
        f"queue peak {m(UNCOUPLED, 'q_peak'):.0f}", False,
        "Uncoupled joiners send their initial window on top of a full aggregate and slow-start against it, so the queue "
        "overflows; coupling (with or without Algorithm 4) hands over part of the aggregate instead of adding to it.",
        info=True))
    a.checks.append(Check(
        f"Fig. {fig_id}: the queue at the join (not in the text)", "no claim in the source",
        f"lowest queue in the 0.5 s after the first join: without ack-clocking {m(WITHOUT, 'q_min_join'):.0f}, with "
        f"{m(WITH, 'q_min_join'):.0f}, uncoupled {m(UNCOUPLED, 'q_min_join'):.0f} packets", False,
        "With either coupler the connections already running give up the joiner's share at once, while the joiner ramps "
        "up (by slow start, or by the others' ACKs with Algorithm 4): if the queue empties, the link idles briefly at the "
        "join, the price of sending no burst.", info=True))
    a.table = {
        "title": f"Per arm ({seeds_txt}): what happens after the first join at {join_s:g} s",
        "columns": ["arm", "bottleneck drops after the join", "joiners' largest burst (pkts)", "joiners' retransmissions",
                    "joiners' timeouts", "queue peak after the join (pkts)", "queue peak before (start-up)"],
        "rows": [[ARM_LABELS[x], f"{m(x, 'drops_after'):.1f}", f"{m(x, 'burst'):.1f}", f"{m(x, 'retx'):.1f}",
                  f"{m(x, 'timeouts'):.1f}", f"{m(x, 'q_peak'):.0f}", f"{m(x, 'q_peak_before'):.0f}"] for x in arms],
    }
    return a


def _analyse_71(runs: List[Dict[str, Any]]) -> Analysis:
    return join_analysis(
        runs, "7.1",
        "Connections 2 and 3 joining at 5 and 6 s (dotted lines). Top: time-sequence plot of connections 2 and 3 "
        "(segments delivered since each joined); middle: every connection's cwnd; bottom: the bottleneck queue. "
        "Columns: (a) ctrlTCP without ack-clocking, (b) with Algorithm 4, and uncoupled connections (not in the "
        "dissertation) for scale.",
        "'The congestion spike due to sudden bursts from connection 2 causes significant packet losses', ll. 2436-2437",
        "'using the ack clock from the preexisting connection eliminates the congestion', ll. 2445-2446")


register(FigureSet(
    name="7.1",
    chapter=7,
    captions={"7.1": "(The caption of Fig. 7.1 is not in the text of seed 003; the figure is described in sec. 7.3, "
                     "ll. 2430-2446: a time-sequence plot of connections 2 and 3, (a) without and (b) with ack-clocking.)"},
    claim=("\"Connections 2 and 3 join after 5 and 6 seconds, respectively, and they receive large cwnd values from the "
           "aggregate. Fig. 7.1(a) shows a time-sequence plot of connections 2 and 3. The congestion spike due to sudden "
           "bursts from connection 2 causes significant packet losses. [...] A small burst is also visible when connection "
           "3 joins.\" (seed 003, ll. 2434-2439); \"Fig. 7.1(b) illustrates that using the ack clock from the preexisting "
           "connection eliminates the congestion that is shown in Fig. 7.1(a).\" (ll. 2445-2446)"),
    setting=("Three TCP connections on one host pair of the dumbbell: 10 Mbit/s, 100 ms RTT, 1500-byte packets, an "
             "83-packet (1 BDP) drop-tail queue (l. 2432-2433); connections 2 and 3 start at 5 and 6 s (l. 2434). Left "
             "open: connection 1's start (drawn over the first second per seed), the duration (8 s: both joins and 2 s "
             "after), the TCP variant (the text ran Linux 3.17.4's TCP code in ns-2, l. 2454: newreno_abc, Linux reno's "
             "growth; initial window 10, SACK, delayed ACKs). Arms: ctrlTCP without (ccc) and with (ccc_handover) the "
             "ack-clocked handover, plus uncoupled connections as a reference. Each run is repeated stopped just before "
             "the first join, so that the drops caused by the joins are the difference (connection 1's start-up "
             "overshoot drops packets too). One illustrative run, as the dissertation's figure."),
    base="thesis_7_1_join_burst.toml",
    jobs=join_jobs,
    analyse=_analyse_71,
    seeds=1,
    environment="ns-2 simulation (with the TCP-Linux module, Linux 3.17.4 TCP code)",
))


# --- Figs. 7.2 and 9.7: completion time of a short flow joining a long one ------------------------

#: Bottleneck capacities of Figs. 7.2 and 9.7, Mbit/s ("varying the capacity from 1 Mbps to 10 Mbps").
FCT_CAPACITIES_MBPS = tuple(range(1, 11))
FCT_ARMS = (UNCOUPLED, WITHOUT, WITH)
FCT_LABELS = {UNCOUPLED: "uncoupled", WITHOUT: "ctrlTCP", WITH: "ctrlTCP with ack-clocking"}
#: Why the short flow's FCT falls by less than 40 % at some capacities, and why the uncoupled dip
#: at 2 Mbit/s is missing: measured for this reproduction with the same settings and seeds through
#: the Python API (``Simulation.add_tcp_flow(..., delayed_ack=False)``; scenario files cannot turn
#: delayed ACKs off).
WHY_72_DELAYED_ACKS = (
    "Measured cause: our receivers send delayed ACKs (one per two segments, as Linux and FreeBSD do), and Algorithm 4 "
    "releases one segment to the joiner per N ACKs of the other connections, so delayed ACKs halve the rate at which the "
    "short flow's 18 segments are released and it takes about half an RTT longer. The same settings and seeds with the "
    "receivers acknowledging every segment (ns-2's default TCP sink does; the text does not say which sink it used), run "
    "through the Python API since scenario files cannot turn delayed ACKs off: the reduction is 45.5-46.8 % at 6-10 "
    "Mbit/s and 67-79 % at 1-5 Mbit/s, above 40 % at every capacity.")
#: The same measurement for the uncoupled dip at 2 Mbit/s.
WHY_72_DIP = (
    "Measured: with the receivers acknowledging every segment (the same settings and seeds through the Python API, "
    "Simulation.add_tcp_flow(..., delayed_ack=False); scenario files cannot turn delayed ACKs off) the uncoupled short "
    "flow shows the text's dip, 1.039 s at 2 Mbit/s against 1.172 s at 3 Mbit/s (means over 10 runs). With delayed "
    "ACKs, as here, it does not; what they change in the 2 Mbit/s dynamics was not traced further.")
#: The long flow as the text's "25 Mb" read literally (bits): run once per capacity, uncoupled, to
#: show when it would end (the reproduction reads "25 Mb" as 25 MB; see the scenario file).
LITERAL_LONG_BYTES = 25_000_000 // 8
PKT_BITS = 1500 * 8


def _bdp_pkts(rate_bps: float, rtt_s: float = 0.1) -> int:
    """1 BDP in 1500-byte packets, rounded (83 at 10 Mbit/s, as the text's queue)."""
    return max(1, round(rate_bps * rtt_s / PKT_BITS))


def _fct_duration(rate_bps: float, long_bytes: int) -> float:
    """Long enough for the long flow alone at this capacity, with margin for slow start and losses."""
    return round(long_bytes * 8 / rate_bps * 1.3 + 15.0, 1)


def _fct_jobs(base: Dict[str, Any], seeds: int) -> List[Job]:
    """Per capacity, arm and seed: the long flow starting at a time drawn over the first second,
    the short one over the sixth (the same two times for every capacity and arm of a seed), the
    queue 1 BDP of the capacity. Plus, per capacity, one uncoupled run of seed 1 with the long
    flow as 25 Mbit (``long = "25 Mbit"``)."""
    out = []
    long_bytes = int(base["flows"][0]["size_bytes"])
    for s in range(1, seeds + 1):
        t_long, t_short = start_times(s, 2)
        for cap in FCT_CAPACITIES_MBPS:
            rate = cap * 1e6
            for arm in FCT_ARMS:
                data = copy.deepcopy(base)
                data["topology"].update(bottleneck_rate_bps=rate, queue_pkts=_bdp_pkts(rate))
                data["duration_s"] = _fct_duration(rate, long_bytes)
                data["groups"][0]["kind"] = arm
                data["flows"][0]["start_s"] = t_long
                data["flows"][1]["start_s"] = round(5.0 + t_short, 6)
                out.append(job({"capacity_mbps": cap, "coupling": arm, "long": "25 MB"}, data, s))
    t_long, t_short = start_times(1, 2)
    for cap in FCT_CAPACITIES_MBPS:
        rate = cap * 1e6
        data = copy.deepcopy(base)
        data["topology"].update(bottleneck_rate_bps=rate, queue_pkts=_bdp_pkts(rate))
        data["duration_s"] = _fct_duration(rate, LITERAL_LONG_BYTES)
        data["groups"][0]["kind"] = UNCOUPLED
        data["flows"][0].update(start_s=t_long, size_bytes=LITERAL_LONG_BYTES)
        data["flows"][1]["start_s"] = round(5.0 + t_short, 6)
        out.append(job({"capacity_mbps": cap, "coupling": UNCOUPLED, "long": "25 Mbit"}, data, 1))
    return out


def _fcts(run: Dict[str, Any]) -> Tuple[float, float, float, float]:
    """(long flow's FCT, short flow's FCT, long flow's start, short flow's start); NaN for a flow
    that did not complete."""
    f = sorted(loads(run)["flows"].to_pylist(), key=lambda x: x["flow"])
    fct = [float("nan") if x["fct_s"] is None else float(x["fct_s"]) for x in f[:2]]
    return fct[0], fct[1], float(f[0]["start_s"]), float(f[1]["start_s"])


def _analyse_72(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    long_fct: Dict[str, Dict[float, List[float]]] = {}
    short_fct: Dict[str, Dict[float, List[float]]] = {}
    pairs: Dict[Tuple[str, int], Dict[int, Tuple[float, float]]] = {}
    for r in runs:
        p = r["params"]
        if p.get("long") != "25 MB":
            continue
        lf, sf, _, _ = _fcts(r)
        long_fct.setdefault(p["coupling"], {}).setdefault(p["capacity_mbps"], []).append(lf)
        short_fct.setdefault(p["coupling"], {}).setdefault(p["capacity_mbps"], []).append(sf)
        pairs.setdefault((p["coupling"], p["capacity_mbps"]), {})[int(r["seed"])] = (lf, sf)
    seeds = sorted({int(r["seed"]) for r in runs if r["params"].get("long") == "25 MB"})
    n = len(seeds)
    unfinished = sum(1 for arm in short_fct for xs in list(short_fct[arm].values()) + list(long_fct[arm].values())
                     for x in xs if math.isnan(x))
    if unfinished:
        a.notes.append(f"{unfinished} flow(s) did not complete within the run; their FCT is missing (NaN) from the means.")

    fig, ax = subplots(1, 1, 5.6, 3.6)
    draw_arms(ax[0][0], {FCT_LABELS[x]: short_fct.get(x, {}) for x in FCT_ARMS}, "bottleneck capacity (Mbit/s)",
              "FCT of the 200 kbit flow (s)")
    ax[0][0].set_xticks(list(FCT_CAPACITIES_MBPS))
    fig.tight_layout()
    a.figures.append(("7.2", fig, f"Completion time of the short flow (200 kbit, starting in the sixth second) next to "
                                  f"the long flow (25 MB, starting in the first), mean over {n} runs with the min-max "
                                  f"band, against the bottleneck capacity. The same runs are Fig. 9.7."))

    def m(arm: str, cap: int, which: Dict[str, Dict[float, List[float]]]) -> float:
        return mean(which.get(arm, {}).get(cap, []))

    def rel(arm: str, cap: int, which: Dict[str, Dict[float, List[float]]]) -> float:
        u = m(UNCOUPLED, cap, which)
        return m(arm, cap, which) / u - 1 if u and not math.isnan(u) else float("nan")

    fig, ax = subplots(1, 2, 9.6, 3.6)
    caps = list(FCT_CAPACITIES_MBPS)
    for arm in (WITHOUT, WITH):
        ax[0][0].plot(caps, [-100 * rel(arm, c, short_fct) for c in caps], marker="o", ms=4, label=FCT_LABELS[arm])
        ax[0][1].plot(caps, [100 * rel(arm, c, long_fct) for c in caps], marker="o", ms=4, label=FCT_LABELS[arm])
    ax[0][0].axhline(40, color="0.4", ls="--", lw=0.9, label="40 % (the text, 3-10 Mbit/s)")
    ax[0][1].axhspan(-1, 1, color="0.85", label="within 1 %")
    ax[0][0].set_ylabel("short flow: FCT reduction vs uncoupled (%)")
    ax[0][1].set_ylabel("long flow: FCT change vs uncoupled (%)")
    for x in ax[0]:
        x.set_xlabel("bottleneck capacity (Mbit/s)")
        x.set_xticks(caps)
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    fig.tight_layout()
    a.figures.append(("9.7", fig, f"The same runs as Fig. 7.2 relative to the uncoupled flows (means over {n} runs): "
                                  "left, how much shorter the short flow's FCT is; right, the long flow's FCT change."))

    for cap in FCT_CAPACITIES_MBPS:
        red = -rel(WITH, cap, short_fct)
        text = (f"{100 * red:.1f} % ({m(WITH, cap, short_fct):.3f} s vs uncoupled {m(UNCOUPLED, cap, short_fct):.3f} s; "
                f"ctrlTCP without ack-clocking {m(WITHOUT, cap, short_fct):.3f} s)")
        per_seed = []
        for s in seeds:
            u, h = pairs.get((UNCOUPLED, cap), {}).get(s), pairs.get((WITH, cap), {}).get(s)
            if u and h and u[1] > 0:
                per_seed.append(1 - h[1] / u[1])
        spread = (f"Per seed: {100 * min(per_seed):.0f} % to {100 * max(per_seed):.0f} %." if per_seed else "")
        if cap <= 2:
            a.checks.append(Check(f"{cap} Mbit/s: the short flow's FCT with ack-clocking vs uncoupled (Fig. 7.2)",
                                  "no threshold: the text excepts 1 and 2 Mbit/s from its 'more than 40 %' (l. 2479)",
                                  text, False, spread, info=True))
            continue
        ok = red > 0.40
        note = spread
        if not ok:
            note = (f"The reduction at {cap} Mbit/s is {100 * red:.1f} %, short of the text's 'more than 40%'. " + spread + " "
                    + WHY_72_DELAYED_ACKS)
        a.checks.append(Check(f"{cap} Mbit/s: the short flow's FCT with ack-clocking vs uncoupled (Fig. 7.2)",
                              f"reduced by more than 40 % (l. 2479: 'for all other bottleneck capacities except 1 and 2 "
                              f"Mbps'); tolerance: none, mean over {n} runs", text, ok, note))
    for cap in FCT_CAPACITIES_MBPS:
        r = rel(WITH, cap, long_fct)
        ok = abs(r) < 0.01
        a.checks.append(Check(f"{cap} Mbit/s: the long flow's FCT with ack-clocking vs uncoupled (Fig. 7.2)",
                              f"changed by under 1 % (l. 2486: 'only 0.66% or less in all cases', a reduction); "
                              f"tolerance 1 %, mean over {n} runs",
                              f"{100 * r:+.2f} % ({m(WITH, cap, long_fct):.2f} s vs {m(UNCOUPLED, cap, long_fct):.2f} s)", ok,
                              ("A reduction, as the text says." if r < 0 else "An increase, where the text reports a "
                               "reduction; within the tolerance.") if ok else
                              f"The long flow's completion time moved by {100 * r:+.2f} %, more than the text's 0.66 %."))
    for cap in FCT_CAPACITIES_MBPS:
        h, c = m(WITH, cap, short_fct), m(WITHOUT, cap, short_fct)
        ok = h < c
        a.checks.append(Check(f"{cap} Mbit/s: ack-clocking further improves the short flow's FCT (Fig. 9.7)",
                              f"ctrlTCP with ack-clocking < ctrlTCP without (l. 3226: 'ctrlTCP with ack-clocking further "
                              f"improves the short flow's FCT'); tolerance: strictly smaller, mean over {n} runs",
                              f"{h:.3f} s vs {c:.3f} s", ok,
                              "" if ok else
                              "Our ctrlTCP without Algorithm 4 lets the joiner send its initial window (10 segments) at "
                              "once and slow-start to its share on its own ACKs; the handover starts it at one segment "
                              "and releases its share one segment per N ACKs of the long flow. For a 17-segment flow the "
                              "initial window can be the faster start, where the text's variant without ack-clocking "
                              "bursted its whole share (see Fig. 7.1's checks)."))
    u2, u3 = m(UNCOUPLED, 2, short_fct), m(UNCOUPLED, 3, short_fct)
    h2, h3 = m(WITH, 2, short_fct), m(WITH, 3, short_fct)
    ok = u2 < u3
    a.checks.append(Check("Uncoupled: the short flow is faster at 2 than at 3 Mbit/s (Fig. 9.7)",
                          "FCT(2 Mbit/s) < FCT(3 Mbit/s) uncoupled (ll. 3227-3232: 'in the uncoupled 2 Mbps scenario, the "
                          f"short flow was even faster than in the 3 Mbps scenario'); tolerance: strictly, mean over {n} runs",
                          f"{u2:.3f} s vs {u3:.3f} s", ok,
                          "The text explains the dip by the 2 Mbit/s queue (17 packets) holding one initial window but "
                          "not two. " + ("" if ok else WHY_72_DIP)))
    ok = h2 > h3
    a.checks.append(Check("Coupled: no dip at 2 Mbit/s (Fig. 9.7, 'coupling also removes a synchronization effect')",
                          "ctrlTCP with ack-clocking: FCT(2 Mbit/s) > FCT(3 Mbit/s) (the short flow's FCT falls with the "
                          f"capacity); tolerance: strictly, mean over {n} runs",
                          f"{h2:.3f} s vs {h3:.3f} s", ok, ""))
    rows = []
    for cap in FCT_CAPACITIES_MBPS:
        lit = [r for r in runs if r["params"].get("long") == "25 Mbit" and r["params"]["capacity_mbps"] == cap]
        lit_end = lit_short = float("nan")
        if lit:
            lf, sf, ls, ss = _fcts(lit[0])
            lit_end, lit_short = ls + lf, ss
        rows.append([cap, _bdp_pkts(cap * 1e6),
                     *(f"{m(x, cap, short_fct):.3f}" for x in FCT_ARMS),
                     f"{-100 * rel(WITH, cap, short_fct):.1f}",
                     *(f"{m(x, cap, long_fct):.2f}" for x in FCT_ARMS),
                     f"{100 * rel(WITH, cap, long_fct):+.2f}",
                     f"{lit_end:.2f} ({'before' if lit_end < lit_short else 'after'} the short flow's start at "
                     f"{lit_short:.2f} s)"])
    a.table = {"title": f"Means over {n} runs per capacity (s); the last column: a long flow of 25 Mbit (the text's "
                        "'25 Mb' read as bits), uncoupled, seed 1: when it ends",
               "columns": ["Mbit/s", "queue (pkts)", "short: uncoupled", "short: ctrlTCP", "short: + ack-clocking",
                           "short: reduction (%)", "long: uncoupled", "long: ctrlTCP", "long: + ack-clocking",
                           "long: change (%)", "25 Mbit long flow ends at (s)"],
               "rows": rows}
    ends = [(cap, row[-1]) for cap, row in zip(FCT_CAPACITIES_MBPS, rows)]
    early = [cap for cap, text in ends if "before" in text]
    a.notes.append(
        "The long flow's size: the text's '25 Mb' is read as 25 MB. Read as 25 Mbit (3.1 MB), the long flow is over before "
        f"the short one starts at {', '.join(str(c) for c in early) or 'no'} Mbit/s (the table's last column, from an "
        "uncoupled run per capacity), so the two would never share the path there and coupling could not change the short "
        "flow's completion time, yet the text reports reductions of more than 40 % for 3-10 Mbit/s and a change of the long "
        "flow's completion time 'in all cases'. The short flow's '200 Kb' is read as 200 kbit (25,000 bytes, 18 segments).")
    return a


register(FigureSet(
    name="7.2",
    chapter=7,
    captions={"7.2": "Flow completion time (FCT) of short flows.",
              "9.7": "(The caption of Fig. 9.7 is not in the text of seed 003; the figure is described in sec. 9.3, "
                     "ll. 3222-3232: the short flow's FCT uncoupled, with ctrlTCP, and with ctrlTCP and ack-clocking, as "
                     "the capacity varies from 1 to 10 Mbit/s.)"},
    claim=("\"Fig. 7.2 demonstrates the reduction of a short flow's completion times by immediately taking a share of the "
           "aggregate. [...] there is a significant improvement in the short flow's completion time using our ack-clock "
           "mechanism, and the FCT is reduced by more than 40% for all other bottleneck capacities except 1 and 2 Mbps. "
           "[...] the dip at 2 Mbps only exists when flows compete [...]. Because the long flow gets to rapidly increase its "
           "cwnd when a short flow terminates, the ack-clock mechanism reduced the FCT of the long flow too, but only by a "
           "negligible amount: only 0.66% or less in all cases.\" (seed 003, ll. 2472-2486); \"It can be seen from Fig. 9.7 "
           "that ctrlTCP with ack-clocking further improves the short flow's FCT. Coupling also removes a synchronization "
           "effect: in the uncoupled 2 Mbps scenario, the short flow was even faster than in the 3 Mbps scenario because it "
           "was the first to send its initial window (IW) into the queue, which did not have enough space for the IWs of two "
           "flows.\" (ll. 3226-3232)"),
    setting=("Dumbbell with RTT 100 ms, MTU 1500 bytes and a 1-BDP drop-tail queue (l. 2474; round(capacity x 100 ms / "
             "1500 bytes): 8 packets at 1 Mbit/s, 17 at 2, 83 at 10); capacity 1 to 10 Mbit/s; a long flow (25 MB) starting "
             "at random over the first second and a short flow (200 kbit) over the sixth, 10 runs (ll. 2472-2476, "
             "3228-3229). Arms: uncoupled, ctrlTCP (ccc) and ctrlTCP with the ack-clocked handover (ccc_handover). Left "
             "open or read by us: '25 Mb' as 25 MB (see the note), the TCP variant (Linux 3.17.4's code in ns-2: "
             "newreno_abc, initial window 10), the duration (until the long flow ends, with margin)."),
    base="thesis_7_2_fct.toml",
    jobs=_fct_jobs,
    analyse=_analyse_72,
    seeds=10,
    environment=("ns-2 simulation (TCP-Linux module); the dissertation confirmed the FCT reduction in emulation at 6, 8 "
                 "and 10 Mbit/s (Fig. 9.8, FreeBSD testbed), which `macroflow reproduce thesis-9.3-linux` runs on "
                 "real Linux TCP with macroflow_ccc"),
))
