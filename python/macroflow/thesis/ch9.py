"""Seed 003 chapter 9 reproduced (see macroflow.thesis.core for the machinery): ctrlTCP (TCP-CCC)
against uncoupled TCP, E-TCP and EFCM on the dissertation's dumbbell.

- Fig. 9.2: the cwnd of two Reno connections after a packet drop of connection 1 (uncoupled, EFCM,
  ctrlTCP) and after a timeout of connection 1 (E-TCP, ctrlTCP).
- Fig. 9.3: two coupled connections, the second joining at 5 s, without and with ack-clocking
  (chapter 7's join analysis, :func:`macroflow.thesis.ch7.join_analysis`).
- Fig. 9.5: the two connections' aggregate throughput as connection 1 is made to time out more often.
- Fig. 9.6: priorities 0.75 and 0.25, connection 2 present from 30 to 85 s.
- Figs. 9.9-9.12: 1-6 connections with 50 % self-similar cross traffic, and priority ratios;
  the runs of the ``coupled-vs-uncoupled`` reproduction (its scenario builder is reused).
- Figs. 9.13 and 3.1: Jain's index between two hosts' (VMs') aggregates, one flow against 1-4.

Fig. 9.7 is the same experiment as Fig. 7.2, and Fig. 9.8 its emulation counterpart (chapter 7's set
``7.2`` carries the three captions).
"""

from __future__ import annotations

import copy
import math
import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from macroflow.metrics import jain
from macroflow.reproductions import (
    _corr,
    CLAIM_GOODPUT,
    WHY_ONE_FLOW,
    Check,
    _dumbbell_scenario,
    _pair_rates,
)
from macroflow.sweeps import Job
from macroflow.thesis.ch7 import (
    ACK_EACH,
    DELAYED,
    RECEIVER_LABELS,
    RECEIVER_WHY,
    flow_series,
    join_analysis,
    join_jobs,
    set_receiver,
    subplots,
)
from macroflow.thesis.core import Analysis, FigureSet, draw_arms, job, loads, mean, register, runs_by, start_times

CTRLTCP = "ccc_handover"
LABELS = {"none": "uncoupled", "efcm": "EFCM", "etcp": "E-TCP", CTRLTCP: "ctrlTCP", "ccc": "ctrlTCP without ack-clocking"}


def _why_not_fallen(j: float, prev: Optional[float], ideal: float, n_runs: int) -> str:
    """The note of a failed 'fairness deteriorates' check: which half of the tolerance failed."""
    if prev is not None and j >= prev:
        return "The uncoupled index did not fall as VM2 opened another flow."
    return (f"The index fell (from {prev:.4f}) but not below 0.95; equal shares per flow would give {ideal:.4f}: VM1's one "
            "flow got more than an equal per-flow share" + (" in this one run (one run per point, the Linux leg's default: "
                                                            "how a few flows split varies from run to run)." if n_runs == 1 else "."))


def _window(series: Dict[str, List[Any]], key: str, t0: float, t1: float) -> List[Any]:
    """The samples of `key` with t0 <= t <= t1."""
    return [v for t, v in zip(series["t"], series[key]) if t0 - 1e-9 <= t <= t1 + 1e-9]


def _sum_series(a: Dict[str, List[Any]], b: Dict[str, List[Any]]) -> Tuple[List[float], List[float]]:
    """Times both flows were sampled at, and the sum of their cwnd there."""
    wb = {round(t, 6): w for t, w in zip(b["t"], b["cwnd"])}
    ts, ws = [], []
    for t, w in zip(a["t"], a["cwnd"]):
        k = round(t, 6)
        if k in wb:
            ts.append(t)
            ws.append(w + wb[k])
    return ts, ws


# --- Fig. 9.2: one loss event, and one timeout, of connection 1 ----------------------------------

#: The time of the induced loss (l. 3079: "a packet drop for connection 1 at 25 seconds").
DROP_AT_S = 25.0
#: How connection 1's losses are induced: (drop probability, length of the period) on its access
#: link. A packet drop: 5 % of its packets over 200 ms (about an RTT), a few packets, one loss event
#: that fast recovery repairs (a fixed window of p = 1 does not work: each connection sends its
#: window in clumps, so a 10-50 ms window catches a whole clump or nothing). A timeout: every packet
#: for 200 ms, so no duplicate ACK comes back and the RTO fires after the period (unless ACKs of
#: packets queued before the period clock out packets after it and fast recovery takes over). The
#: analysis keeps the runs whose event was the intended one and says how many (INFO rows).
LOSS = {"drop": (0.05, 0.2), "timeout": (1.0, 0.2)}
#: The panels: (case id, coupler, event, title). The text's three panels are (a) uncoupled, (b)
#: EFCM and (c), described once as ctrlTCP (l. 3077) and once as E-TCP with a timeout (ll.
#: 3129-3131); both are here, and ctrlTCP after a timeout for the contrast the text draws.
CASES_92 = (
    ("a", "none", "drop", "(a) uncoupled, packet drop"),
    ("b", "efcm", "drop", "(b) EFCM, packet drop"),
    ("ccc-drop", CTRLTCP, "drop", "ctrlTCP, packet drop"),
    ("c", "etcp", "timeout", "(c) E-TCP, timeout of connection 1"),
    ("ccc-timeout", CTRLTCP, "timeout", "ctrlTCP, timeout of connection 1"),
)
#: Runs per panel: the figure draws one, the checks use every run in which the induced event was
#: the intended one (some drops and no timeout; a timeout).
SEEDS_92 = 10


def _loss_queue(periods: Sequence[Tuple[float, float, float]]) -> Dict[str, Any]:
    """Connection 1's access queue: drop-tail behind one loss period per (start, end, p)."""
    q: Dict[str, Any] = {"kind": "drop_tail", "limit_pkts": 1000}
    for start, end, prob in sorted(periods, reverse=True):
        q = {"kind": "loss_period", "p": prob, "start_s": start, "end_s": end, "inner": q}
    return q


def _period(at_s: float, event: str) -> Tuple[float, float, float]:
    prob, length = LOSS[event]
    return (at_s, round(at_s + length, 6), prob)


def _with_losses(base: Dict[str, Any], kind: str, periods: Sequence[Tuple[float, float, float]], seed: int) -> Dict[str, Any]:
    data = copy.deepcopy(base)
    data["groups"][0]["kind"] = kind
    link = data["topology"]["links"][0]
    if (link["from"], link["to"]) != ("s1", "r1"):
        raise ValueError("the base's first link must be connection 1's access link s1->r1")
    link["queue"] = _loss_queue(periods)
    for f, t in zip(data["flows"], start_times(seed, len(data["flows"]))):
        f["start_s"] = t
    return data


def _jobs_92(base: Dict[str, Any], seeds: int) -> List[Job]:
    """Per panel and seed: the run, and the same run stopped just before the loss (``part =
    "before"``), so that connection 1's timeouts caused by the loss are the difference (the
    simulator is deterministic up to the loss)."""
    out = []
    for s in range(1, seeds + 1):
        for case, kind, event, _ in CASES_92:
            data = _with_losses(base, kind, [_period(DROP_AT_S, event)], s)
            out.append(job({"case": case, "coupling": kind, "event": event, "part": "run"}, data, s))
            before = copy.deepcopy(data)
            before["duration_s"] = round(DROP_AT_S - 0.001, 6)
            out.append(job({"case": case, "coupling": kind, "event": event, "part": "before"}, before, s))
    return out


def _access_drops(run: Dict[str, Any]) -> int:
    """Packets connection 1's access link dropped (the induced losses)."""
    return int(sum(l["dropped_pkts"] for l in loads(run)["links"].to_pylist() if (l["src"], l["dst"]) == ("s1", "r1")))


def _measure_92(run: Dict[str, Any], before: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What the checks compare for one run of a panel."""
    fs = flow_series(run)
    f1, f2 = fs[0], fs[1]
    ts, agg = _sum_series(f1, f2)
    t0, t1 = DROP_AT_S, DROP_AT_S + 2

    def ratio(series: List[float], t: List[float]) -> float:
        pre = [w for x, w in zip(t, series) if DROP_AT_S - 1 <= x < DROP_AT_S]
        post = [w for x, w in zip(t, series) if t0 <= x <= t1]
        return min(post) / statistics.fmean(pre) if pre and post else float("nan")

    def diff(lo: float, hi: float) -> float:
        xs = [abs(p - q) / (p + q) for p, q in zip(_window(f1, "cwnd", lo, hi), _window(f2, "cwnd", lo, hi)) if p + q > 0]
        return statistics.fmean(xs) if xs else float("nan")

    timeouts = loads(run)["flows"].to_pylist()[0]["timeouts"]
    before_to = loads(before)["flows"].to_pylist()[0]["timeouts"] if before is not None else None
    return {
        "agg_ratio": ratio(agg, ts), "w2_ratio": ratio(f2["cwnd"], f2["t"]),
        "w2_min": min(_window(f2, "cwnd", DROP_AT_S, DROP_AT_S + 3)),
        "w2_ss": any(s == "SS" for s in _window(f2, "state", DROP_AT_S, DROP_AT_S + 3)),
        "diff": diff(DROP_AT_S + 1, DROP_AT_S + 10), "diff_before": diff(DROP_AT_S - 5, DROP_AT_S - 0.01),
        "drops": _access_drops(run),
        "timeouts": None if before_to is None else timeouts - before_to,
        "series": (f1, f2, ts, agg),
    }


def _intended(event: str, x: Dict[str, Any]) -> bool:
    """The induced event was what the panel asks for: a packet drop that fast recovery repaired (no
    timeout of connection 1 after it), or a timeout."""
    if x["timeouts"] is None:
        return False
    return x["drops"] > 0 and x["timeouts"] == 0 if event == "drop" else x["timeouts"] >= 1


def _analyse_92(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    fig, ax = subplots(2, 3, 12.0, 6.4, sharey=True)
    got: Dict[str, List[Dict[str, Any]]] = {}
    counts: Dict[str, Tuple[int, int]] = {}
    for i, (case, kind, event, title) in enumerate(CASES_92):
        measured = []
        for r in runs_by(runs, case=case, part="run"):
            pre = next((b for b in runs_by(runs, case=case, part="before") if b["seed"] == r["seed"]), None)
            measured.append((int(r["seed"]), _measure_92(r, pre)))
        ok = [(s, x) for s, x in measured if _intended(event, x)]
        counts[case] = (len(ok), len(measured))
        got[case] = [x for _, x in ok]
        x = ax[i // 3][i % 3]
        if not (ok or measured):
            continue
        seed, shown = (ok or measured)[0]
        f1, f2, ts, agg = shown["series"]
        lo, hi = DROP_AT_S - 10, DROP_AT_S + 20
        for d, lab in ((f1, "connection 1"), (f2, "connection 2")):
            x.plot(_window(d, "t", lo, hi), _window(d, "cwnd", lo, hi), label=lab)
        x.plot([t for t in ts if lo <= t <= hi], [w for t, w in zip(ts, agg) if lo <= t <= hi], "k--", lw=0.8, label="sum")
        x.axvline(DROP_AT_S, color="0.6", ls=":", lw=0.9)
        x.set_title(f"{title}, seed {seed}\n(connection 1: {shown['drops']} packets dropped, "
                    f"{shown['timeouts']} timeout(s) after it)", fontsize=8)
        x.set_xlabel("time (s)")
        x.set_ylabel("cwnd (packets)")
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    ax[1][2].axis("off")
    fig.tight_layout()
    a.figures.append(("9.2", fig, "cwnd of the two Reno connections (and their sum, dashed) around the loss induced for "
                                  f"connection 1 at {DROP_AT_S:g} s (dotted): a packet drop (one loss event) in the top row, "
                                  "a timeout in the bottom row. Each panel shows the first seed whose induced event was the "
                                  "intended one (the checks use all of those seeds)."))

    def g(case: str, key: str) -> float:
        return mean([float(x[key]) for x in got.get(case, [])])

    def runs_txt(case: str) -> str:
        k, n = counts.get(case, (0, 0))
        return f"mean over the {k} of {n} runs whose induced event was the intended one"

    d, db = g("a", "diff"), g("a", "diff_before")
    a.checks.append(Check("(a) uncoupled: slow convergence after connection 1's loss",
                          "the two windows differ by more than 10 % of their sum on average from 1 to 10 s after the drop "
                          "(l. 3080: 'without coupling, it takes quite some time to converge'); tolerance: > 0.10, "
                          + runs_txt("a"),
                          f"{d:.3f} (in the 5 s before the drop: {db:.3f})", d > 0.10,
                          "Connection 1 halved its window and connection 2 did not; both then add one segment per RTT, so "
                          "the difference stays until the next loss." if d > 0.10 else
                          "The windows came together within 10 s of the drop."))
    e = g("b", "agg_ratio")
    a.checks.append(Check("(b) EFCM: the aggregate is not halved",
                          "lowest aggregate cwnd within 2 s of the drop / the aggregate in the second before, above a "
                          "halving (l. 3082: 'with EFCM, the aggregate is not halved'; a halved aggregate gives 0.5, EFCM's "
                          f"halving of one of two equal windows 0.75); tolerance: > 0.6, {runs_txt('b')}", f"{e:.2f}", e > 0.6,
                          "EFCM puts each connection's own reduction into the shared window unscaled: connection 1's halving "
                          "removes a quarter of the aggregate." if e > 0.6 else "EFCM's aggregate fell to half or less."))
    c = g("ccc-drop", "agg_ratio")
    a.checks.append(Check("ctrlTCP: one loss of connection 1 halves the aggregate, as for one flow",
                          "lowest aggregate cwnd within 2 s of the drop / the aggregate in the second before: 0.5 "
                          "(ll. 3054-3057: a drop of connection 1 'should' give 'the same behavior of the traffic aggregate' "
                          f"as one flow's loss: halved); tolerance: 0.4 to 0.6, {runs_txt('ccc-drop')}",
                          f"{c:.2f} (connection 2 alone: {g('ccc-drop', 'w2_ratio'):.2f})", 0.4 <= c <= 0.6,
                          "One reduction of the aggregate at the loss event's start; connection 2 takes its reduced share at "
                          "its next ACK." if 0.4 <= c <= 0.6 else "The aggregate's reduction was not one halving."))
    n_ss = sum(1 for x in got.get("c", []) if x["w2_ss"])
    k = len(got.get("c", []))
    ok = k > 0 and n_ss == k
    a.checks.append(Check("(c) E-TCP: connection 1's timeout forces connection 2 into slow start",
                          "connection 2 reports slow start (SS) within 3 s of the timeout (ll. 3129-3131: E-TCP 'forcing all "
                          "flows to slow start if any one has a timeout'); tolerance: in every run in which connection 1 "
                          "timed out",
                          f"in {n_ss} of {k} runs (its lowest cwnd: {g('c', 'w2_min'):.1f} on average, sampled every 10 ms)", ok,
                          "E-TCP restarts the shared window at one segment per connection; connection 2 is told one segment "
                          "and slow-starts (its window grows by the ACKs of its whole flight, so the 10 ms samples catch it "
                          "already at a few segments)." if ok else "Connection 2 did not always enter slow start."))
    n_ss2 = sum(1 for x in got.get("ccc-timeout", []) if x["w2_ss"])
    k2 = len(got.get("ccc-timeout", []))
    w2r = g("ccc-timeout", "w2_ratio")
    ok = k2 > 0 and n_ss2 == 0 and w2r >= 0.4
    a.checks.append(Check("ctrlTCP: connection 1's timeout does not send connection 2 into slow start",
                          "connection 2 not in slow start within 3 s of the timeout, and its window at most halved (ll. "
                          "3119-3126: no slow start for the group 'if at least one of the flows is still receiving "
                          "acknowledgements'); tolerance: SS in no run, lowest cwnd / before >= 0.4, "
                          f"{runs_txt('ccc-timeout')}",
                          f"connection 2 in SS in {n_ss2} of {k2} runs; lowest cwnd / before: {w2r:.2f}", ok,
                          "The timeout starts one loss event: the aggregate is halved once and connection 2, still receiving "
                          "ACKs, keeps its (halved) share in congestion avoidance." if ok else
                          "Connection 2 fell into slow start or far below half its window."))
    for case, kind, event, title in CASES_92:
        k, n = counts.get(case, (0, 0))
        drops = [x["drops"] for x in got.get(case, [])]
        a.checks.append(Check(f"{title}: the induced event", "a packet drop: some packets and no timeout of connection 1 "
                              "after them; a timeout: at least one (the intended event)",
                              f"intended in {k} of {n} runs; packets dropped: {min(drops, default=0)}-{max(drops, default=0)}",
                              False,
                              "Timeouts counted against the same run stopped just before the loss; the runs where the loss "
                              "did not produce the intended event are left out of the checks above.", info=True))
    return a


register(FigureSet(
    name="9.2",
    chapter=9,
    captions={"9.2": "cwnd of two TCP Reno flows"},
    claim=("\"Fig. 9.2 captures the behavior of two TCP Reno flows, without coupling, with EFCM, and with our proposed "
           "coupled congestion control mechanism, respectively. We artificially induced a packet drop for connection 1 at "
           "25 seconds. Fig. 9.2(a) shows that without coupling, it takes quite some time to converge, and with EFCM (see "
           "Fig. 9.2(b)), the aggregate is not halved, and the flows remain aggressive.\" (seed 003, ll. 3077-3082); "
           "\"E-TCP does not adopt this rationale, instead forcing all flows to slow start if any one has a timeout (see "
           "Fig. 9.2(c) where we artificially induced a timeout for connection 1 to simulate this behavior).\" "
           "(ll. 3129-3131)"),
    setting=("Two TCP Reno connections on the dumbbell of l. 3075 (10 Mbit/s, 100 ms RTT, 1500-byte packets, 83-packet "
             "queue), from two senders so that the loss hits connection 1 only: a loss period on connection 1's access link "
             "from 25 s, 200 ms long, dropping 5 % of its packets for 'a packet drop' (a few packets: one loss event; the "
             "INFO rows say how many) and all of them for a timeout (no duplicate ACK comes back; the RTO fires after the "
             "period). The text leaves open how "
             "it dropped packets, the start times (drawn over the first second), the duration (60 s) and the repetitions "
             "(its figure is one run; here 10 per panel, one drawn). Reno: Linux 3.17.4's code in ns-2 (ll. 3085-3086), "
             "newreno_abc here. The text's panel (c) is described "
             "both as ctrlTCP and as E-TCP with a timeout; both are drawn, with ctrlTCP after a timeout for contrast. Each "
             "run is repeated stopped just before the loss, to count the timeouts the loss caused. " + RECEIVER_WHY),
    base="thesis_9_2_loss_event.toml",
    jobs=_jobs_92,
    analyse=_analyse_92,
    seeds=SEEDS_92,
    environment="ns-2 simulation (TCP-Linux module, Linux 3.17.4 TCP code; E-TCP and EFCM implemented by the author)",
))


# --- Fig. 9.3: the join of Fig. 7.1 with two connections -----------------------------------------

def _analyse_93(runs: List[Dict[str, Any]]) -> Analysis:
    return join_analysis(
        runs, "9.3",
        "Connection 2 joining at 5 s (dotted line). Top: packet sequence plot of connection 2 (segments delivered since "
        "it joined); middle: both connections' cwnd; bottom: the bottleneck queue. Columns: ctrlTCP without ack-clocking "
        "as the text ran it (the share handed over as one burst) and with it, then our burst-limited ccc and uncoupled "
        "connections (neither in the dissertation).",
        "'Without ack-clocking, the congestion spike causes significant packet loss', ll. 3173-3174",
        "'Our ack clocking algorithm completely eliminates this issue', l. 3175")


register(FigureSet(
    name="9.3",
    chapter=9,
    captions={"9.3": "Coupling of 2 flows when flow 2 joins after 5 seconds. Packet sequence plots and cwnd plots are "
                     "shown with and without the use of ack-clocking mechanism"},
    claim=("\"Fig. 9.3 shows the packet sequence diagrams and cwnd plots over time of two coupled-TCP Reno connections, with "
           "and without ack-clocking. Without ack-clocking, the congestion spike causes significant packet loss. Our ack "
           "clocking algorithm completely eliminates this issue.\" (seed 003, ll. 3172-3175); the mechanism: \"we utilize "
           "the acknowledgements connection 1 receives to pace the sending of connection 2 over the course of the first "
           "RTT\" (ll. 3167-3169)."),
    setting=("Two coupled TCP Reno connections on one host pair of the dumbbell of sec. 9.2.3 (10 Mbit/s, 100 ms RTT, "
             "1500-byte packets, 83-packet queue, l. 3075); connection 2 starts at 5 s (the caption). Left open: connection "
             "1's start (drawn over the first second), the duration (8 s), the Reno variant (Linux 3.17.4's code in ns-2: "
             "newreno_abc), the receiver (an ACK per segment, ns-2's sinks). Arms: ctrlTCP without ack-clocking as the text "
             "ran it (connection 2 handed its share of the aggregate to send at once, ll. 3156-3159: ccc with "
             "max_burst_pkts = 1e6) and with it (ccc_handover); references the text does not draw: our default ccc (burst "
             "limit 0: the joiner slow-starts to its share) and uncoupled connections. Each run is also stopped just before "
             "the join, so that the join's drops are the difference. One run, as the figure. " + RECEIVER_WHY),
    base="thesis_9_3_join_ackclock.toml",
    jobs=join_jobs,
    analyse=_analyse_93,
    seeds=1,
    environment="ns-2 simulation (TCP-Linux module, Linux 3.17.4 TCP code)",
))


# --- Fig. 9.5: aggregate throughput as timeouts of connection 1 are provoked ----------------------

COUPLERS_95 = ("efcm", CTRLTCP, "etcp")
#: Provoked timeouts per run (the text does not give its x axis).
TIMEOUTS_95 = (0, 1, 2, 3, 4, 5)
#: The first provoked timeout and the spacing of the next ones: each 200 ms loss period ends in
#: one timeout, and 8 s leave the aggregate time to recover (E-TCP's restart takes about 2 s).
FIRST_TIMEOUT_S, TIMEOUT_EVERY_S = 10.0, 8.0


def _jobs_95(base: Dict[str, Any], seeds: int) -> List[Job]:
    out = []
    for s in range(1, seeds + 1):
        for kind in COUPLERS_95:
            for k in TIMEOUTS_95:
                periods = [_period(FIRST_TIMEOUT_S + i * TIMEOUT_EVERY_S, "timeout") for i in range(k)]
                out.append(job({"coupling": kind, "timeouts": k}, _with_losses(base, kind, periods, s), s))
    return out


def _analyse_95(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    series: Dict[str, Dict[float, List[float]]] = {}
    by_seed: Dict[Tuple[str, int], Dict[int, float]] = {}
    provoked: Dict[Tuple[str, int], List[float]] = {}
    for kind in COUPLERS_95:
        base_to = {int(r["seed"]): loads(r)["flows"].to_pylist()[0]["timeouts"] for r in runs_by(runs, coupling=kind, timeouts=0)}
        for k in TIMEOUTS_95:
            for r in runs_by(runs, coupling=kind, timeouts=k):
                series.setdefault(LABELS[kind], {}).setdefault(k, []).append(r["summary"]["tcp_goodput_bps"] / 1e6)
                by_seed.setdefault((kind, k), {})[int(r["seed"])] = r["summary"]["tcp_goodput_bps"]
                if int(r["seed"]) in base_to:
                    extra = loads(r)["flows"].to_pylist()[0]["timeouts"] - base_to[int(r["seed"])]
                    provoked.setdefault((kind, k), []).append(extra)
    n = len(runs_by(runs, coupling=CTRLTCP, timeouts=0))
    fig, ax = subplots(1, 1, 5.6, 3.6)
    draw_arms(ax[0][0], series, "provoked timeouts of connection 1", "aggregate throughput of 2 flows (Mbit/s)")
    fig.tight_layout()
    a.figures.append(("9.5", fig, f"Aggregate goodput of the two connections over 60 s as connection 1 is made to time out "
                                  f"0-5 times (every {TIMEOUT_EVERY_S:g} s from {FIRST_TIMEOUT_S:g} s), mean over {n} runs with "
                                  "the min-max band."))

    def m(kind: str, k: int) -> float:
        return mean(series.get(LABELS[kind], {}).get(k, []))

    for k in TIMEOUTS_95:
        e, c, t = m("efcm", k), m(CTRLTCP, k), m("etcp", k)
        text = f"EFCM {e:.3f}, ctrlTCP {c:.3f}, E-TCP {t:.3f} Mbit/s"

        def above(x: str, y: str) -> str:
            xs, ys = by_seed.get((x, k), {}), by_seed.get((y, k), {})
            common = sorted(set(xs) & set(ys))
            return f"{sum(1 for s in common if xs[s] > ys[s])} of {len(common)}"
        extra = (f" Per seed (the same start times in every arm): EFCM above ctrlTCP in {above('efcm', CTRLTCP)} runs, ctrlTCP "
                 f"above E-TCP in {above(CTRLTCP, 'etcp')}. Timeouts of connection 1 beyond the run without provoked ones: "
                 f"ctrlTCP {mean(provoked.get((CTRLTCP, k), [])):.1f}, E-TCP {mean(provoked.get(('etcp', k), [])):.1f}, "
                 f"EFCM {mean(provoked.get(('efcm', k), [])):.1f} (means).")
        if k == 0:
            why = (f"E-TCP is {100 * (1 - t / c):.1f} % below ctrlTCP already: it halves the shared window once per "
                   "connection that loses a packet, so a congestion event that hits both connections halves it twice (no "
                   "notion of a loss event, sec. 9.2.3)." if t < 0.99 * c else
                   f"Without provoked timeouts the three are within {100 * (max(e, c, t) / min(e, c, t) - 1):.1f} % of "
                   "each other: the two connections alone fill the bottleneck whichever coupler runs them.")
            a.checks.append(Check("No provoked timeout: aggregate throughput (Fig. 9.5)", "no claim in the source", text, False,
                                  "The same runs without the loss periods, for scale. " + why + extra, info=True))
            continue
        ok = e > c > t
        note = extra
        if not ok:
            if not e > c:
                note = ("EFCM's aggregate was not above ctrlTCP's: the two connections share the bottleneck with nothing else, "
                        "so ctrlTCP's aggregate, one NewReno flow's window, already fills it between losses, and EFCM's "
                        "extra aggressiveness mostly fills the queue. " + note)
            if not c > t:
                note = "ctrlTCP's aggregate was not above E-TCP's. " + note
        a.checks.append(Check(f"{k} provoked timeout{'s' if k > 1 else ''}: EFCM > ctrlTCP > E-TCP (Fig. 9.5)",
                              f"aggregate throughput ordered EFCM > ctrlTCP > E-TCP (ll. 3199-3209); tolerance: strict, means "
                              f"over {n} runs", text, ok, note))
    return a


register(FigureSet(
    name="9.5",
    chapter=9,
    captions={"9.5": "Throughput of 2 flows, for ctrlTCP, E-TCP, and EFCM while (the rest of the caption is cut off in "
                     "the text of seed 003, l. 3207)"},
    claim=("\"we simulated the behavior of two TCP Reno connections by varying the number of timeouts. We achieved this by "
           "dropping a series of packets (per provoked timeout) from only one of the flows. [...] the aggregate throughput of "
           "two connections coupled with EFCM is more than ctrlTCP and E-TCP because it is more aggressive than one flows. "
           "However, the aggregate throughput of two connections coupled with ctrlTCP is more than E-TCP because our mechanism "
           "does not force all flows to enter slow start if one has a timeout.\" (seed 003, ll. 3195-3209)"),
    setting=("Fig. 9.2's setting (two Reno connections from two senders over the 10 Mbit/s, 100 ms, 83-packet bottleneck, "
             "newreno_abc, an ACK per segment as ns-2's sinks), 60 s. Each provoked timeout is a 200 ms loss period (p = 1) on connection 1's access link, every "
             "8 s from 10 s: 'a series of packets' (l. 3197). Not stated and chosen here: the number of timeouts (0-5), their "
             "times, the duration, the repetitions (10 runs with start times over the first second, as the chapter's other "
             "tests, l. 3235). ctrlTCP = ccc_handover."),
    base="thesis_9_2_loss_event.toml",
    jobs=_jobs_95,
    analyse=_analyse_95,
    seeds=10,
    environment="ns-2 simulation (TCP-Linux module; E-TCP and EFCM implemented by the author)",
))


# --- Fig. 9.6: priorities 0.75 and 0.25 ------------------------------------------------------------

#: The receivers of Fig. 9.6: the text does not say where it ran (ns-2, whose sinks acknowledge every
#: segment, or the FreeBSD testbed, which delays ACKs), so the main run keeps the simulator's
#: default (delayed ACKs, the file's) and the same run with an ACK per segment is shown beside it.
RECEIVERS_96 = (DELAYED, ACK_EACH)


def _jobs_96(base: Dict[str, Any], seeds: int) -> List[Job]:
    """The file's run as it is (the text gives both start times) and the same run with an ACK per
    segment; more seeds repeat them."""
    return [job({"case": "0.75/0.25", "receiver": r}, set_receiver(copy.deepcopy(base), r), s)
            for s in range(1, seeds + 1) for r in RECEIVERS_96]


def _measure_96(r: Dict[str, Any]) -> Dict[str, Any]:
    """What Fig. 9.6's checks compare for one run: connection 1's share and the windows' correlation
    while both run, connection 1's window after connection 2 left against the aggregate before,
    and what happened at connection 2's end (a timeout, and whether its last byte had arrived)."""
    flows = sorted(loads(r)["flows"].to_pylist(), key=lambda f: f["flow"])
    start2 = float(flows[1]["start_s"])
    end2 = start2 + float(flows[1]["fct_s"]) if flows[1]["fct_s"] is not None else float("nan")
    fs = flow_series(r)
    f1, f2 = fs[0], fs[1]
    ts, agg = _sum_series(f1, f2)
    # While both run: from 5 s after connection 2 joins (its handover and catch-up) to 1 s before it ends.
    t0, t1 = start2 + 5.0, end2 - 1.0
    w2 = {round(t, 6): w for t, w in zip(f2["t"], f2["cwnd"]) if t0 <= t <= t1}
    pairs = [(w, w2[round(t, 6)]) for t, w in zip(f1["t"], f1["cwnd"]) if round(t, 6) in w2]
    share = sum(p for p, _ in pairs) / sum(p + q for p, q in pairs) if pairs else float("nan")
    corr = _corr([p for p, _ in pairs], [q for _, q in pairs])
    before = [w for t, w in zip(ts, agg) if end2 - 2.0 <= t < end2]
    after = _window(f1, "cwnd", end2 + 1.0, end2 + 3.0)
    ratio = statistics.fmean(after) / statistics.fmean(before) if before and after else float("nan")
    # A retransmission timeout of connection 2 near its end: its window restarts at one or two segments in SS.
    rto = [t for t, w, s in zip(f2["t"], f2["cwnd"], f2["state"]) if end2 - 2.0 <= t <= end2 + 0.5 and s == "SS" and w <= 2.0]
    size = flows[1]["delivered_bytes"]
    whole = [t for t, b in zip(f2["t"], f2["delivered"]) if b >= size]
    at = rto[0] if rto else float("nan")
    agg_before = [w for t, w in zip(ts, agg) if rto and t < at]
    w1_after = [w for t, w in zip(f1["t"], f1["cwnd"]) if rto and t >= at]
    return {"start2": start2, "end2": end2, "t0": t0, "t1": t1, "share": share, "corr": corr, "ratio": ratio,
            "timeouts2": int(flows[1]["timeouts"]), "rto_at": at, "whole_at": whole[0] if whole else float("nan"),
            "agg_before_rto": agg_before[-1] if agg_before else float("nan"),
            "w1_after_rto": w1_after[0] if w1_after else float("nan"),
            "w2_min_after": min((w for t, w in zip(f2["t"], f2["cwnd"]) if rto and t >= at), default=float("nan")),
            "series": (f1, f2, ts, agg)}


def _analyse_96(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    got = {rcv: _measure_96(rs[0]) for rcv in RECEIVERS_96 if (rs := runs_by(runs, receiver=rcv))}
    fig, ax = subplots(len(got), 1, 7.0, 3.0 * len(got), sharex=True)
    for i, (rcv, x96) in enumerate(got.items()):
        f1, f2, ts, agg = x96["series"]
        x = ax[i][0]
        x.plot(f1["t"], f1["cwnd"], label="connection 1 (P = 0.75)")
        x.plot([t for t in f2["t"] if t >= x96["start2"]], [w for t, w in zip(f2["t"], f2["cwnd"]) if t >= x96["start2"]],
               label="connection 2 (P = 0.25)")
        x.plot(ts, agg, "k--", lw=0.7, label="sum")
        for t in (x96["start2"], x96["end2"]):
            if not math.isnan(t):
                x.axvline(t, color="0.6", ls=":", lw=0.9)
        x.set_title(f"receivers with {RECEIVER_LABELS[rcv]}" + (" (the checks)" if rcv == RECEIVERS_96[0] else
                                                                 " (for comparison)"), fontsize=8)
        x.set_ylabel("cwnd (packets)")
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    ax[-1][0].set_xlabel("time (s)")
    fig.tight_layout()
    main = got[RECEIVERS_96[0]]
    other = got.get(ACK_EACH)
    a.figures.append(("9.6", fig, f"cwnd of the two ctrlTCP connections; connection 2 runs from {main['start2']:g} s to "
                                  f"{main['end2']:.1f} s (dotted). Top: the simulator's receivers, which delay ACKs; "
                                  "bottom: the same run with an ACK per segment."))
    a.checks.append(Check("Connection 1's share of the aggregate cwnd while both run (Fig. 9.6)",
                          "0.75 (l. 3216: 'flow 1 gets 3/4 of the aggregate cwnd while flow 2 gets 1/4'); tolerance +- 0.05",
                          f"{main['share']:.3f} (cwnd samples from {main['t0']:g} s to {main['t1']:.1f} s)",
                          abs(main["share"] - 0.75) <= 0.05, "ctrlTCP gives each connection P / sum(P) of the aggregate."))
    corr = main["corr"]
    a.checks.append(Check("The two windows move together (Fig. 9.6)",
                          "the two cwnd series correlated while both run (ll. 3217-3218: 'they increase and decrease their "
                          "cwnds at the same time'); tolerance: Pearson correlation >= 0.8", f"{corr:.3f}", corr >= 0.8,
                          "Each window is a fixed share of one aggregate, so they rise and fall together." if corr >= 0.8 else
                          "The windows did not follow one aggregate."))
    ratio = main["ratio"]
    other_txt = ("" if other is None else
                 f"The same run with an ACK per segment: connection 2 ended at {other['end2']:.1f} s with "
                 f"{other['timeouts2']} timeout(s), and connection 1 then held {other['ratio']:.2f} of the aggregate before. ")
    note = ("ctrlTCP keeps the aggregate when a connection leaves (Algorithm 6); connection 1 grows to it on its own ACK "
            "clock (no burst). " + other_txt)
    if not ratio >= 0.8:
        if not math.isnan(main["rto_at"]):
            at = main["rto_at"]
            halved = (f"ctrlTCP takes the timeout as a new loss event and halves the aggregate (from "
                      f"{main['agg_before_rto']:.0f} to connection 1's {main['w1_after_rto']:.0f} packets); connection 1 "
                      f"then holds all of it, as the text says, but that is half the aggregate before. ")
            if main["whole_at"] < at:
                note = (f"A spurious retransmission timeout of connection 2 at the end of its transfer: its last byte had "
                        f"reached the receiver by {main['whole_at']:.2f} s, yet the sample at {at:.2f} s shows it in slow "
                        f"start with {main['w2_min_after']:.0f} segments ({main['timeouts2']} timeout(s) in its run). The "
                        f"receiver's delayed-ACK timer (200 ms in the simulator; FreeBSD's is 100 ms, Linux's 40 ms at "
                        f"least) held the ACK of the last segment for as long as the sender's RTO (200 ms at least). "
                        + halved + other_txt + "The text does not say how its connection 2 ended (here a sized transfer).")
            else:
                note = (f"Connection 2 timed out at the end of its transfer (the sample at {at:.2f} s shows it in slow start; "
                        f"{main['timeouts2']} timeout(s) in its run): its last segments were lost and, at the end of its "
                        f"data, no later segments could bring the duplicate ACKs that start fast recovery. " + halved
                        + other_txt + "The text does not say how its connection 2 ended (here a sized transfer).")
        else:
            note = "Connection 1 did not take over the aggregate within 3 s (a loss in that window halves it). " + other_txt
    a.checks.append(Check("After connection 2 leaves, connection 1 takes the whole aggregate (Fig. 9.6)",
                          "connection 1's mean cwnd 1-3 s after connection 2 ends / the aggregate in the 2 s before: 1 (l. "
                          "3218: 'Outside of this interval, flow 1 gets all of the cwnd'); tolerance: >= 0.8",
                          f"{ratio:.2f}", ratio >= 0.8, note))
    if other is not None:
        a.checks.append(Check("The same run with an ACK per segment (not the checks' receiver)",
                              "no claim for this receiver (the text does not say where Fig. 9.6 ran); the tolerances above",
                              f"share {other['share']:.3f}, correlation {other['corr']:.3f}, connection 1 after connection 2 "
                              f"left / the aggregate before: {other['ratio']:.2f}", False,
                              f"Connection 2 ended at {other['end2']:.1f} s with {other['timeouts2']} timeout(s).", info=True))
    a.checks.append(Check("When connection 2 ended", "85 s (l. 3215: 'between t=30 sec and t=85 sec')",
                          f"{main['end2']:.1f} s", False,
                          "The text does not say how connection 2 stopped; here it is a transfer sized to last 55 s at 1/4 of "
                          "10 Mbit/s (see the scenario file).", info=True))
    return a


register(FigureSet(
    name="9.6",
    chapter=9,
    captions={"9.6": "(The caption of Fig. 9.6 is not in the text of seed 003; the figure is described in sec. 9.3, ll. "
                     "3213-3219: the cwnd of two ctrlTCP connections with priorities 0.75 and 0.25.)"},
    claim=("\"Fig. 9.6 showcases an example of ctrlTCP where two connections are created with priorities 0.75 and 0.25, "
           "respectively. Connection 1 starts at t=3 sec and connection 2 starts at t=30 sec. It can be seen from Fig. 9.6 "
           "that between t=30 sec and t=85 sec (the duration when two flows coexist), flow 1 gets 3/4 of the aggregate cwnd "
           "while flow 2 gets 1/4. It is also observable that the two flows are coupled, as they increase and decrease their "
           "cwnds at the same time. Outside of this interval, flow 1 gets all of the cwnd.\" (seed 003, ll. 3213-3219)"),
    setting=("Two ctrlTCP (ccc_handover) connections on one host pair of the section's dumbbell (10 Mbit/s, 100 ms RTT, "
             "83-packet queue), priorities 0.75 and 0.25, starting at 3 s and 30 s (l. 3214). Connection 2 must end at 85 s; "
             "scenarios have no stop time for a TCP flow, so it is a transfer of 16,590,833 bytes, which lasts 55 s at 1/4 of "
             "10 Mbit/s (computed from the setting, not fitted). The run lasts 100 s; newreno_abc. The text does not say "
             "where this figure ran (sec. 9.3 has ns-2 runs, whose sinks acknowledge every segment, and FreeBSD testbed runs, "
             "which delay ACKs), so the checks keep the simulator's default receiver (delayed ACKs) and the same run with an "
             "ACK per segment is shown beside them. One run each, as the figure. The same case on real Linux TCP: "
             "`macroflow reproduce thesis-9.3-linux`."),
    base="thesis_9_6_priorities.toml",
    jobs=_jobs_96,
    analyse=_analyse_96,
    seeds=1,
    environment="not stated (ns-2 with TCP-Linux, or the FreeBSD 11 testbed of sec. 9.3)",
    linux="thesis-9.3-linux",
))


# --- Figs. 9.9-9.12: 1-6 connections under self-similar cross traffic; priority ratios -----------

#: Connections per run (the issue's 1-6; the text does not give the figures' x axis).
FLOW_COUNTS_99 = (1, 2, 3, 4, 5, 6)
ARMS_99 = ("none", CTRLTCP)
PRIORITY_RATIOS_99 = (1, 2, 3, 4, 5)
#: Fig. 9.12's ratio is measured from here on (the start-up is not the split the priorities ask for).
STEADY_FROM_S = 5.0
#: The receivers of Figs. 9.9-9.12. The self-similar cross traffic is the testbed's (D-ITG, ll.
#: 3235-3240; ns-2 had TMIX), and the captions of Figs. 9.9-9.11 say "emulation": FreeBSD 11, whose
#: receivers delay ACKs, so the checks' runs delay ACKs (the builder's default). Fig. 9.12 is
#: confirmed "both [in] the simulation and emulation" (ll. 3250-3254), and ns-2's sinks acknowledge
#: every segment: ctrlTCP's points (1-6 connections, the priority ratios) and one connection alone
#: are run again with an ACK per segment, to measure what the receiver changes (INFO).
RECEIVERS_99 = (DELAYED, ACK_EACH)


def _scenario_99(n: int, coupling: str, priorities: List[float], seed: int, dur: float, receiver: str) -> Dict[str, Any]:
    """The coupled-vs-uncoupled reproduction's dumbbell (its own builder) with this receiver."""
    return set_receiver(_dumbbell_scenario(n, coupling, priorities, seed, dur), receiver)


def _jobs_99(base: Dict[str, Any], seeds: int) -> List[Job]:
    """Per seed: N connections uncoupled and ctrlTCP, and two ctrlTCP connections at each priority
    ratio, with delayed ACKs (the checks); ctrlTCP's points and one connection alone again with an
    ACK per segment. The file's duration."""
    dur = float(base["duration_s"])
    out = []
    for s in range(1, seeds + 1):
        for rcv in RECEIVERS_99:
            for n in FLOW_COUNTS_99:
                for c in ARMS_99:
                    if rcv == ACK_EACH and c == "none" and n > 1:
                        continue  # the uncoupled points other than one connection alone: not needed for the comparison
                    out.append(job({"flows": n, "coupling": c, "receiver": rcv}, _scenario_99(n, c, [1.0] * n, s, dur, rcv), s))
            for r in PRIORITY_RATIOS_99:
                if r == 1:
                    continue  # the 2-connection ctrlTCP run above (the same scenario, stored once)
                out.append(job({"priority_ratio": r, "receiver": rcv},
                               _scenario_99(2, CTRLTCP, [float(r), 1.0], s, dur, rcv), s))
    return out


def _ratio_runs(runs: List[Dict[str, Any]], r: int, receiver: str = DELAYED) -> List[Dict[str, Any]]:
    """Fig. 9.12's runs with priority ratio r:1 (1:1 is the 2-connection ctrlTCP point of Figs. 9.9-9.11)."""
    if r == 1:
        return runs_by(runs, flows=2, coupling=CTRLTCP, receiver=receiver)
    return runs_by(runs, priority_ratio=r, receiver=receiver)


def _analyse_99(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()

    def vals(metric: str, scale: float = 1.0, rcv: str = DELAYED, arms: Sequence[str] = ARMS_99) -> Dict[str, Dict[float, List[float]]]:
        return {LABELS[c]: {n: [r["summary"][metric] * scale for r in runs_by(runs, flows=n, coupling=c, receiver=rcv)]
                            for n in FLOW_COUNTS_99} for c in arms}

    rtt, gp, loss = vals("mean_rtt_s", 1e3), vals("tcp_goodput_bps", 1e-6), vals("loss_ratio", 100.0)
    gp_each = vals("tcp_goodput_bps", 1e-6, ACK_EACH, (CTRLTCP,))[LABELS[CTRLTCP]]
    one_each = mean([r["summary"]["tcp_goodput_bps"] / 1e6 for r in runs_by(runs, flows=1, coupling="none", receiver=ACK_EACH)])
    n_runs = len(runs_by(runs, flows=2, coupling=CTRLTCP, receiver=DELAYED))
    each_label = f"{LABELS[CTRLTCP]}, {RECEIVER_LABELS[ACK_EACH]} (INFO)"
    for fig_id, data, ylabel, what in (
            ("9.9", rtt, "average RTT (ms)", "mean RTT of the TCP connections"),
            ("9.10", {**gp, each_label: gp_each}, "aggregate TCP goodput (Mbit/s)", "aggregate goodput of the TCP connections"),
            ("9.11", loss, "loss ratio at the bottleneck (%)", "loss ratio of the bottleneck (all traffic)")):
        fig, ax = subplots(1, 1, 5.4, 3.5)
        draw_arms(ax[0][0], data, "number of TCP connections", ylabel, {each_label: ":"})
        ax[0][0].set_xticks(list(FLOW_COUNTS_99))
        fig.tight_layout()
        a.figures.append((fig_id, fig, f"The {what} against the number of connections, uncoupled and with ctrlTCP, with 50 % "
                                       f"self-similar UDP cross traffic, receivers that delay ACKs (the FreeBSD testbed's); "
                                       f"mean over {n_runs} runs with the min-max band."
                                       + (" Dotted: ctrlTCP with an ACK per segment (ns-2's receiver), for comparison."
                                          if fig_id == "9.10" else "")))
    ratios: Dict[str, Dict[float, List[float]]] = {}
    whole: Dict[str, Dict[float, List[float]]] = {}
    cwnds: Dict[str, Dict[float, List[float]]] = {}
    rtts: Dict[str, Dict[float, List[Tuple[float, float]]]] = {}
    for rcv in RECEIVERS_99:
        for r in PRIORITY_RATIOS_99:
            for run in _ratio_runs(runs, r, rcv):
                steady, w, cw = _pair_rates(run["path"], STEADY_FROM_S)
                ratios.setdefault(rcv, {}).setdefault(r, []).append(steady)
                whole.setdefault(rcv, {}).setdefault(r, []).append(w)
                cwnds.setdefault(rcv, {}).setdefault(r, []).append(cw)
                f = sorted(loads(run)["flows"].to_pylist(), key=lambda x: x["flow"])
                rtts.setdefault(rcv, {}).setdefault(r, []).append((f[0]["mean_rtt_s"] or float("nan"),
                                                                    f[1]["mean_rtt_s"] or float("nan")))
    fig, ax = subplots(1, 1, 5.4, 3.5)
    draw_arms(ax[0][0], {"ctrlTCP, delayed ACKs (the checks)": ratios.get(DELAYED, {}),
                         "ctrlTCP, an ACK per segment (INFO)": ratios.get(ACK_EACH, {})},
              "priority ratio P1:P2", "throughput ratio flow 1 : flow 2", {"ctrlTCP, an ACK per segment (INFO)": ":"})
    ax[0][0].plot(list(PRIORITY_RATIOS_99), list(PRIORITY_RATIOS_99), "k--", lw=0.8, label="ideal")
    ax[0][0].legend(fontsize=8)
    ax[0][0].set_xticks(list(PRIORITY_RATIOS_99))
    fig.tight_layout()
    a.figures.append(("9.12", fig, f"Throughput ratio of two ctrlTCP connections (delivered bytes from {STEADY_FROM_S:g} s) "
                                   f"against their priority ratio, with the same cross traffic, receivers that delay ACKs "
                                   f"(the testbed's) and, dotted, that acknowledge every segment (ns-2's); mean over "
                                   f"{n_runs} runs with the min-max band."))

    def m(data: Dict[str, Dict[float, List[float]]], c: str, n: int) -> float:
        return mean(data[LABELS[c]][n])

    def spread(data: Dict[str, Dict[float, List[float]]], c: str, n: int, fmt: str) -> str:
        xs = [x for x in data[LABELS[c]][n] if not math.isnan(x)]
        return f"{LABELS[c]} {min(xs):{fmt}} to {max(xs):{fmt}}" if xs else f"{LABELS[c]}: no runs"

    claim_99 = "'our mechanism reduces both the average RTT and loss' (ll. 3244-3246)"
    for data, name, fmt, unit, claim in ((rtt, "average RTT (Fig. 9.9)", ".1f", " ms", claim_99),
                                         (loss, "loss ratio (Fig. 9.11)", ".3f", " %", claim_99)):
        for n in FLOW_COUNTS_99:
            c, u = m(data, CTRLTCP, n), m(data, "none", n)
            ours = f"{c:{fmt}}{unit} vs {u:{fmt}}{unit}"
            note = f"Over runs: {spread(data, CTRLTCP, n, fmt)}; {spread(data, 'none', n, fmt)}."
            if n == 1:
                a.checks.append(Check(f"1 connection: {name}", "no claim: one connection alone is the same coupled or not",
                                      ours, False, note, info=True))
                continue
            ok = c < u
            a.checks.append(Check(f"{n} connections: {name}", f"ctrlTCP < uncoupled ({claim}); tolerance: strict, means over "
                                  f"{n_runs} runs", ours, ok, note if ok else
                                  "The claim rests on the aggregate backing off as one flow after a loss where uncoupled "
                                  "connections back off one of N windows. " + note))
    one = mean(gp[LABELS["none"]][1])
    for n in FLOW_COUNTS_99:
        c, u = m(gp, CTRLTCP, n), m(gp, "none", n)
        rel = c / u - 1
        if n == 1:
            continue
        ok = abs(rel) <= 0.10
        note = f"Over runs: {spread(gp, CTRLTCP, n, '.2f')}; {spread(gp, 'none', n, '.2f')} Mbit/s."
        if not ok:
            note = (f"Coupled goodput {rel:+.1%} against uncoupled. " + WHY_ONE_FLOW + " " + note)
        a.checks.append(Check(f"{n} connections: aggregate goodput (Fig. 9.10)",
                              f"ctrlTCP within 10 % of uncoupled ({CLAIM_GOODPUT}); tolerance 10 %, means over {n_runs} runs",
                              f"{c:.2f} vs {u:.2f} Mbit/s ({rel:+.1%})", ok, note))
        r1 = c / one - 1
        ce = mean(gp_each.get(n, []))
        r_each = ce / one_each - 1
        gap, gap_each = one - c, one_each - ce
        why = ""
        if r1 < -0.05:
            why = (f"Measured: with an ACK per segment (ctrlTCP's runs and one connection alone again, the same seeds and "
                   f"cross traffic) ctrlTCP has {ce:.2f} against one connection's {one_each:.2f} Mbit/s ({r_each:+.1%}), so "
                   f"the receiver's delayed ACKs make {100 * (1 - gap_each / gap):.0f} % of the gap: ctrlTCP splits one "
                   f"window into N small ones, and a window of a few segments often leaves one unacknowledged segment to "
                   f"the receiver's delayed-ACK timer (200 ms, two RTTs here). ")
        a.checks.append(Check(f"{n} connections: aggregate goodput, ctrlTCP vs one connection alone",
                              "no claim in the source; coupled connections are meant to be as aggressive as one",
                              f"{c:.2f} vs {one:.2f} Mbit/s ({r1:+.1%}); with an ACK per segment {ce:.2f} vs "
                              f"{one_each:.2f} ({r_each:+.1%})", False,
                              why + "One connection alone is the 1-connection uncoupled point (the same cross traffic per "
                              "seed).", info=True))
    for r in PRIORITY_RATIOS_99:
        got, w = mean(ratios[DELAYED].get(r, [])), mean(whole[DELAYED].get(r, []))
        ok = abs(got - r) <= 0.10 * r
        xs = [x for x in ratios[DELAYED].get(r, []) if not math.isnan(x)]
        note = (f"Over runs: {min(xs):.2f} to {max(xs):.2f}. " if xs else "") + f"Whole run, start-up included: {w:.2f}."
        cw = mean(cwnds[DELAYED].get(r, []))
        r1, r2 = mean([x for x, _ in rtts[DELAYED].get(r, [])]), mean([y for _, y in rtts[DELAYED].get(r, [])])
        ge, cwe = mean(ratios.get(ACK_EACH, {}).get(r, [])), mean(cwnds.get(ACK_EACH, {}).get(r, []))
        e1 = mean([x for x, _ in rtts.get(ACK_EACH, {}).get(r, [])])
        e2 = mean([y for _, y in rtts.get(ACK_EACH, {}).get(r, [])])
        each = (f"With an ACK per segment (the same seeds): throughput ratio {ge:.2f} "
                f"({'within' if abs(ge - r) <= 0.10 * r else 'outside'} the tolerance), cwnd ratio {cwe:.2f}, mean RTTs "
                f"{1e3 * e1:.0f} and {1e3 * e2:.0f} ms. ")
        if not ok:
            note = (f"The windows follow the priorities (ratio of the mean cwnd samples: {cw:.2f}); the throughput ratio is "
                    f"higher because connection 2's mean RTT is longer ({1e3 * r2:.0f} vs {1e3 * r1:.0f} ms) and throughput "
                    f"is window / RTT. With its small window more of connection 2's segments wait for the receiver's "
                    f"delayed-ACK timer (200 ms in the simulator, 100 ms in FreeBSD): measured, " + each[0].lower()
                    + each[1:] + note)
        else:
            note = each + note
        a.checks.append(Check(f"Priority ratio {r}:1: throughput ratio (Fig. 9.12)",
                              f"{r} (ll. 3249-3254: the shares follow the priorities, 'close to the ideal behaviour'); "
                              f"tolerance +- 10 %, from {STEADY_FROM_S:g} s, mean over {n_runs} runs",
                              f"{got:.2f} (cwnd ratio {cw:.2f})", ok, note))
    a.notes.append(
        "These are the runs of the coupled-vs-uncoupled reproduction (macroflow.reproductions._dumbbell_scenario, NewReno "
        "with ns-2's per-ACK increase, 'newreno'), for 1-6 connections and drawn as the dissertation's figures; that "
        "reproduction also compares coupled connections with one connection alone for 2-10 connections. The dissertation "
        "ran these tests in emulation (FreeBSD 11 kernels on a CORE-emulated dumbbell; the captions of Figs. 9.9-9.11 say "
        "'emulation') and, for Fig. 9.12, also in ns-2 (with TMIX cross traffic there; the comparison runs here keep the "
        "self-similar traffic and change only the receiver). The same scenarios on real Linux TCP coupled by "
        "macroflow_ccc: `macroflow reproduce thesis-9.3-linux`.")
    return a


register(FigureSet(
    name="9.9",
    chapter=9,
    captions={"9.9": "Average delay (in milliseconds) as the number of TCP connections is varied, with and without coupled "
                     "congestion control (emulation)",
              "9.10": "Average goodput as the number of TCP connections is varied, with and without coupled congestion "
                      "control (emulation)",
              "9.11": "Loss ratio as the number of TCP connections is varied, with and without coupled congestion control "
                      "(emulation)",
              "9.12": "Throughput ratio as the priorities of two TCP connections are varied"},
    claim=("\"Fig. 9.9 and 9.11 illustrate the average RTT, and loss ratio, with and without coupling, respectively. It can be "
           "seen from the graphs that our mechanism reduces both the average RTT and loss without significantly affecting "
           "goodput as we varied the number of flows (see Fig. 9.10). Fig. 9.12 demonstrates that our mechanism can "
           "distribute the share of the aggregate cwnd to the TCP connections based on the needs of the applications. Both "
           "the simulation and emulation results confirm that our mechanism calculates and assigns the shares as we vary the "
           "priority ratio between two TCP Reno connections, close to the ideal behaviour.\" (seed 003, ll. 3244-3254)"),
    setting=("The testbed's dumbbell (10 Mbit/s, 100 ms RTT, MTU 1500, 83-packet queue, NewReno; ll. 3189-3193); 10 runs "
             "with start times drawn over the first second (l. 3235); self-similar cross traffic at 50 % of the bottleneck "
             "(ll. 3235-3237; D-ITG's 11 Pareto on/off sources there, the simulator's self_similar UDP source here). Left "
             "open: the number of connections (1-6, as the issue states), the duration (100 s, the coupled-vs-uncoupled "
             "reproduction's), the priority ratios (1-5). ctrlTCP = ccc_handover. The receiver: the testbed's FreeBSD "
             "delays ACKs, as the simulator's default does (100 ms timer there, 200 ms here); ctrlTCP's points and one "
             "connection alone are run again with an ACK per segment (ns-2's sinks acknowledge every packet unless a "
             "script chooses a DelAck sink; Fig. 9.12 was also simulated) to measure what the receiver changes."),
    base="thesis_9_9_ctrltcp_cross.toml",
    jobs=_jobs_99,
    analyse=_analyse_99,
    seeds=10,
    environment=("emulation: FreeBSD 11 kernels on a CORE-emulated dumbbell (Figs. 9.9-9.11), and ns-2 for Fig. 9.12 too; "
                 "`macroflow reproduce thesis-9.3-linux` runs the same scenarios on real Linux TCP with macroflow_ccc"),
    linux="thesis-9.3-linux",
))


# --- Figs. 9.13 and 3.1: fairness between two VMs -------------------------------------------------

VM2_FLOWS = (1, 2, 3, 4)
ARMS_913 = ("none", CTRLTCP)
#: Jain's index is computed from the bytes delivered from here on (after the start-up).
JAIN_FROM_S = 5.0


def _jobs_913(base: Dict[str, Any], seeds: int) -> List[Job]:
    """VM1 (pair 0): one flow with priority n; VM2 (pair 1): n flows with priority 1, so that the two
    aggregates are equal under ctrlTCP; all in one group, uncoupled or ctrlTCP."""
    vm1, vm2 = base["flows"][0], base["flows"][1]
    out = []
    for s in range(1, seeds + 1):
        for n in VM2_FLOWS:
            times = start_times(s, 1 + n)
            for c in ARMS_913:
                data = copy.deepcopy(base)
                data["groups"][0]["kind"] = c
                data["flows"] = ([dict(vm1, start_s=times[0], priority=float(n))]
                                 + [dict(vm2, start_s=t, priority=1.0) for t in times[1:]])
                out.append(job({"vm2_flows": n, "coupling": c}, data, s))
    return out


def _vm_jain(run: Dict[str, Any]) -> Tuple[float, float]:
    """Jain's index of the two VMs' aggregates (flow 0 is VM1's, the others VM2's): from the bytes
    delivered after JAIN_FROM_S, and over the whole run."""
    fs = flow_series(run)
    flows = loads(run)["flows"].to_pylist()
    gp = {f["flow"]: f["delivered_bytes"] for f in flows}

    def delivered(f: int) -> float:
        d = fs[f]
        last = d["delivered"][-1]
        first = next((b for t, b in zip(d["t"], d["delivered"]) if t >= JAIN_FROM_S - 1e-9), last)
        return last - first

    x1 = delivered(0)
    x2 = sum(delivered(f) for f in fs if f != 0)
    w1 = gp[0]
    w2 = sum(v for k, v in gp.items() if k != 0)
    return jain([x1, x2]), jain([w1, w2])


def _analyse_913(runs: List[Dict[str, Any]]) -> Analysis:
    a = Analysis()
    steady: Dict[str, Dict[float, List[float]]] = {}
    whole: Dict[str, Dict[int, List[float]]] = {}
    for c in ARMS_913:
        for n in VM2_FLOWS:
            for r in runs_by(runs, vm2_flows=n, coupling=c):
                j, w = _vm_jain(r)
                steady.setdefault("with ctrlTCP" if c != "none" else "without coupling", {}).setdefault(n, []).append(j)
                whole.setdefault(c, {}).setdefault(n, []).append(w)
    n_runs = len(runs_by(runs, vm2_flows=1, coupling=CTRLTCP))
    fig, ax = subplots(1, 1, 5.4, 3.5)
    draw_arms(ax[0][0], steady, "flows in VM2 (VM1: 1 flow)", "Jain's index of the two VMs")
    ax[0][0].plot(list(VM2_FLOWS), [(1 + n) ** 2 / (2 * (1 + n * n)) for n in VM2_FLOWS], "k:", lw=0.9,
                  label="every flow an equal share")
    ax[0][0].legend(fontsize=8)
    ax[0][0].set_xticks(list(VM2_FLOWS))
    ax[0][0].set_ylim(0.6, 1.02)
    fig.tight_layout()
    a.figures.append(("9.13", fig, f"Jain's index of the two VMs' aggregate throughput (bytes delivered from {JAIN_FROM_S:g} s "
                                   f"to 60 s) against the number of flows in VM2, mean over {n_runs} runs with the min-max "
                                   "band; dotted: the index if every flow got an equal share. The same figure is Fig. 3.1."))
    key = {"none": "without coupling", CTRLTCP: "with ctrlTCP"}
    for n in VM2_FLOWS:
        j = mean(steady[key[CTRLTCP]].get(n, []))
        a.checks.append(Check(f"{n} flow{'s' if n > 1 else ''} in VM2, ctrlTCP: fairness between the VMs (Figs. 9.13, 3.1)",
                              "Jain's index 1 (l. 983: 'our ctrlTCP algorithm achieves perfect fairness'); tolerance: >= "
                              f"0.98, from {JAIN_FROM_S:g} s, mean over {n_runs} runs",
                              f"{j:.4f} (whole run: {mean(whole[CTRLTCP].get(n, [])):.4f})", j >= 0.98,
                              "VM1's flow has priority n and VM2's n flows priority 1 each: ctrlTCP gives each VM half of "
                              "one aggregate." if j >= 0.98 else "The VMs' aggregates were not equal."))
    prev = None
    for n in VM2_FLOWS:
        j = mean(steady[key["none"]].get(n, []))
        ideal = (1 + n) ** 2 / (2 * (1 + n * n))
        if n == 1:
            a.checks.append(Check("1 flow in VM2, uncoupled: fairness between the VMs", "no claim (one flow each)",
                                  f"{j:.4f}", False, "Two uncoupled flows with the same RTT share about equally.", info=True))
        else:
            ok = j < 0.95 and (prev is None or j < prev)
            a.checks.append(Check(f"{n} flows in VM2, uncoupled: fairness deteriorates (Figs. 9.13, 3.1)",
                                  "Jain's index falls as VM2 opens flows (l. 982: 'Without coupling, fairness deteriorates'); "
                                  "tolerance: < 0.95 and strictly lower than with one flow fewer, from "
                                  f"{JAIN_FROM_S:g} s, mean over {n_runs} runs",
                                  f"{j:.4f} (with {n - 1}: {prev:.4f}; every flow an equal share would give {ideal:.4f})", ok,
                                  "Uncoupled, each flow takes about an equal share, so VM2 gets n/(n+1) of the path." if ok else
                                  _why_not_fallen(j, prev, ideal, n_runs)))
        prev = j
    a.notes.append(
        "The dissertation shared ctrlTCP's state across two VirtualBox VMs running FreeBSD 11 (l. 3257); here the two VMs are "
        "two sender hosts of the dumbbell with one coupling group across both. It does not say how it weighted the VMs; the "
        "priorities here (VM1's flow n, each of VM2's n flows 1) are what makes ctrlTCP give the two aggregates equal "
        "halves.")
    return a


register(FigureSet(
    name="9.13",
    chapter=9,
    captions={"9.13": "[...] VM2. Without coupling, fairness deteriorates; our ctrlTCP algorithm achieves perfect fairness. "
                      "(the start of the caption is lost in the text of seed 003, ll. 3291-3293; it is presumably Fig. 3.1's)",
              "3.1": "Fairness between two VMs, with 1 flow in VM1 and 1 to 4 flows in VM2. Without coupling, fairness "
                     "deteriorates; our ctrlTCP algorithm achieves perfect fairness."},
    claim=("\"Fig. 9.13 shows Jain's Fairness Index [...] for N = 2 aggregate flows x1 and x2, calculated using the traffic "
           "that originated from two VMs across a 10 Mbit/s x 100 ms bottleneck with and without the coupled congestion "
           "control algorithm in Section 9.2.\" (seed 003, ll. 3259-3262); Fig. 3.1: \"Fairness between two VMs, with 1 flow "
           "in VM1 and 1 to 4 flows in VM2. Without coupling, fairness deteriorates; our ctrlTCP algorithm achieves perfect "
           "fairness.\" (ll. 980-983)"),
    setting=("Dumbbell 10 Mbit/s x 100 ms (l. 3261) with the chapter's 83-packet queue; VM1 and VM2 are two sender hosts "
             "(pairs 0 and 1); VM1 one flow, VM2 1-4 flows; FreeBSD's NewReno (l. 3193; newreno_abc, as FreeBSD counts "
             "bytes) and FreeBSD's receivers, which delay ACKs (as the simulator's do by default). Coupled: one ctrlTCP "
             "(ccc_handover) group across both VMs, priorities VM1 n : VM2 1 each, so the "
             "aggregates are equal; uncoupled: the same flows without a group. Not stated and chosen: no cross traffic, "
             "60 s, 10 runs with start times over the first second, the index from bytes delivered after 5 s."),
    base="thesis_9_13_vm_fairness.toml",
    jobs=_jobs_913,
    analyse=_analyse_913,
    seeds=10,
    environment="FreeBSD 11 kernels in two VirtualBox VMs with ctrlTCP's state shared across the hypervisor (emulation)",
    # The two VMs become two sender namespaces whose connections share one macroflow_ccc group
    # (the kernel's maps are the hypervisor's shared state).
    on_linux=True,
))
