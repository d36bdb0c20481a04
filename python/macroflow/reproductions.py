"""Named reproductions: an experiment of a source document, run as sweeps into a results store,
with the source's expected outcome beside ours and a pass/fail for each check.

A reproduction has parts (each a sweep into ``DIR/<part>/``) and a check function over the stored
runs; :func:`reproduce` runs the parts (skipping stored runs, so it resumes after a kill), writes
``DIR/reproduction.json`` and the HTML report ``DIR/report.html``. Later issues add entries to
:data:`REPRODUCTIONS`.
"""

from __future__ import annotations

import json
import math
import pathlib
import random
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from macroflow.results import list_runs, load_results, write_json_atomic
from macroflow.scenario import validate
from macroflow.sweeps import Job, SweepProgress, sweep

__all__ = ["Check", "Part", "Reproduction", "REPRODUCTIONS", "reproduce", "check_status", "tally", "print_checks"]


@dataclass(frozen=True)
class Check:
    """One expected outcome: what the source says, what we measured, and whether it holds.

    An information row (``info=True``) is neither PASS nor FAIL: it shows a comparison beside the
    source's words (and our explanation in `note`) without counting it; its `passed` is False."""

    name: str
    expected: str
    ours: str
    passed: bool
    note: str = ""
    info: bool = False

    @property
    def status(self) -> str:
        return check_status(asdict(self))


def check_status(c: Mapping[str, Any]) -> str:
    """"INFO", "PASS" or "FAIL" of a check as stored in ``reproduction.json`` (rows written before
    information rows existed have no "info" key)."""
    if c.get("info"):
        return "INFO"
    return "PASS" if c["passed"] else "FAIL"


def tally(checks: Sequence[Mapping[str, Any]]) -> str:
    """"P of N checks pass" over the counted checks, and how many information rows were left out."""
    statuses = [check_status(c) for c in checks]
    counted = len(statuses) - statuses.count("INFO")
    text = f"{statuses.count('PASS')} of {counted} checks pass"
    if statuses.count("INFO"):
        n = statuses.count("INFO")
        text += f" ({n} information row{'s' if n != 1 else ''}, not counted)"
    return text


def print_checks(root: Union[str, pathlib.Path], only: Optional[Sequence[str]] = None) -> None:
    """Prints the checks of ``root/reproduction.json`` as a table: check, expected, ours,
    INFO/PASS/FAIL and the note (every FAIL and INFO row carries its explanation there), then the
    tally. Written for a terminal; piped or captured output gets a wide table (not 80 columns).
    `only`: the checks whose ``set`` is one of these (the thesis's figure sets), not all."""
    from rich.console import Console
    from rich.table import Table

    rep = json.loads((pathlib.Path(root) / "reproduction.json").read_text())
    if only is not None:
        rep["checks"] = [c for c in rep["checks"] if c.get("set") in set(only)]
    con = Console()
    if not con.is_terminal:
        con = Console(width=160)
    table = Table(title=_rich_escape(rep["title"]), show_lines=True)
    table.add_column("check", max_width=30)
    table.add_column("expected", max_width=30)
    table.add_column("ours", max_width=24)
    table.add_column("", no_wrap=True)
    table.add_column("note", ratio=1, min_width=30)
    style = {"PASS": "[green]PASS[/]", "FAIL": "[red]FAIL[/]", "INFO": "[cyan]INFO[/]"}
    esc = _rich_escape
    for c in rep["checks"]:
        table.add_row(esc(c["name"]), esc(str(c["expected"])), esc(str(c["ours"])), style[check_status(c)], esc(c.get("note", "")))
    con.print(table)
    con.print(esc(tally(rep["checks"])))


def _rich_escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@dataclass(frozen=True)
class Part:
    """One sweep of a reproduction, stored in ``DIR/<name>/``."""

    name: str
    title: str
    jobs: List[Job]
    grid: Dict[str, List[Any]]
    #: The figures the report draws for this part instead of every metric against every swept
    #: parameter (specs for :mod:`macroflow.reports`, stored in ``reproduction.json``): ``{"kind":
    #: "arms", ...}`` a metric against `x` with one line per arm and a reference arm drawn flat;
    #: ``{"kind": "share", ...}`` one flow's share of the TCP goodput against `x` beside its ideal.
    figures: List[Dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Reproduction:
    name: str
    title: str
    source: str
    description: str
    #: (seeds, duration_s) -> the parts to run (packet-level reproductions).
    parts: Optional[Callable[[int, float], List[Part]]] = None
    #: {part name: [manifests of its runs]} -> the checks.
    checks: Optional[Callable[[Mapping[str, List[Dict[str, Any]]]], List[Check]]] = None
    #: Flow-level reproductions instead name parts of :data:`macroflow.firehose.PARTS`; `seeds` is
    #: then the number of traffic patterns per point and there is no duration.
    flow_parts: Sequence[str] = ()
    seeds: int = 10
    duration_s: float = 100.0
    quick_seeds: int = 3
    quick_duration_s: float = 30.0
    #: Readable names for parameter values in the report.
    labels: Dict[str, str] = field(default_factory=dict)
    #: Figures across the parts (specs for :mod:`macroflow.reports`, kind "parts").
    figures: List[Dict[str, Any]] = field(default_factory=list)


# --- coupled versus uncoupled TCP on the dissertation's dumbbell ---------------------------------

FLOW_COUNTS = (2, 4, 6, 8, 10)
PRIORITY_RATIOS = (1, 2, 3, 4, 5)
#: The two arms run for every number of flows: uncoupled NewReno, and ctrlTCP with ack-clocked handover.
COUPLINGS = ("none", "ccc_handover")
#: The third arm: one NewReno flow alone on the same path with the same cross traffic (the same
#: for every N, so run once per seed). Stored in the "flows" part with params
#: ``{"flows": 1, "coupling": "one_flow"}``.
ONE_FLOW = "one_flow"
#: What the report draws for the flows part, in this order (``max_burst_pkts`` only when the runs'
#: summaries have it).
CVU_METRICS = ("mean_rtt_s", "loss_ratio", "tcp_goodput_bps", "jain_tcp", "timeouts", "max_burst_pkts")

#: Seed 003's words for the comparison with uncoupled flows (section 9.3 under Figs. 9.9-9.11, and
#: the conclusions of chapter 9, section 9.5).
CLAIM_RESULTS = ('"our mechanism reduces both the average RTT and loss without significantly affecting goodput '
                 'as we varied the number of flows" (seed 003, 9.3)')
CLAIM_SUMMARY = ('ctrlTCP "yields lower queuing delays and packet loss rates than uncoupled TCP flows, and has '
                 'negligible impact on aggregate end-to-end performance" (seed 003, 9.5)')
#: What the source says about goodput against uncoupled flows, quoted beside the information rows.
CLAIM_GOODPUT = ('seed 003: "without significantly affecting goodput" (9.3); "negligible impact on aggregate '
                 'end-to-end performance" (9.5)')
#: Why the goodput of N uncoupled flows is not the reference for coupled flows.
WHY_ONE_FLOW = ("N uncoupled NewReno flows are N times as aggressive as one: N additive increases per RTT, and a "
                "loss halves only one of the N windows. Against unresponsive, bursty cross traffic they therefore "
                "take more of the link than one flow would. Coupled flows are meant to behave as one flow, so the "
                "fair reference for their goodput is one NewReno flow alone (the check against one flow), not N "
                "uncoupled flows.")


def _dumbbell_scenario(n: int, coupling: str, priorities: Sequence[float], seed: int, duration_s: float) -> Dict[str, Any]:
    """Seed 003 section 9.3: 10 Mbit/s, 100 ms RTT, 1-BDP (83-packet) queue; n NewReno flows from
    one host to another, starting at random over the first second; self-similar cross traffic
    taking 50 % of the bottleneck on average."""
    rng = random.Random(seed)
    flows: List[Dict[str, Any]] = []
    for i in range(n):
        f: Dict[str, Any] = {"type": "tcp", "pair": 0, "start_s": round(rng.uniform(0.0, 1.0), 6), "cc": "newreno"}
        if coupling != "none":
            f.update(group="tcp", priority=float(priorities[i]))
        flows.append(f)
    flows.append({"type": "udp", "pair": 1, "kind": "self_similar", "load_bps": 5e6})
    return {
        "name": f"ctrltcp-{coupling}-{n}",
        "seed": seed,
        "duration_s": duration_s,
        "sample_interval_s": 0.1,
        "topology": {"kind": "dumbbell", "pairs": 2, "bottleneck_rate_bps": 10e6, "bottleneck_delay_s": 0.048, "queue_pkts": 83},
        "groups": [] if coupling == "none" else [{"name": "tcp", "kind": coupling}],
        "flows": flows,
    }


def _one_flow_scenario(seed: int, duration_s: float) -> Dict[str, Any]:
    """The reference arm: one NewReno flow alone on the same dumbbell with the same seed (so the
    same start time as the first flow of the other arms and the same cross traffic)."""
    sc = _dumbbell_scenario(1, "none", [1.0], seed, duration_s)
    sc["name"] = "ctrltcp-one-flow"
    return sc


def _cvu_parts(seeds: int, duration_s: float) -> List[Part]:
    flows_jobs = [
        Job({"flows": n, "coupling": c}, validate(_dumbbell_scenario(n, c, [1.0] * n, s, duration_s), f"flows={n} coupling={c} seed={s}"))
        for n in FLOW_COUNTS
        for c in COUPLINGS
        for s in range(1, seeds + 1)
    ]
    flows_jobs += [
        Job({"flows": 1, "coupling": ONE_FLOW}, validate(_one_flow_scenario(s, duration_s), f"one flow seed={s}"))
        for s in range(1, seeds + 1)
    ]
    prio_jobs = [
        Job({"priority_ratio": r}, validate(_dumbbell_scenario(2, "ccc_handover", [float(r), 1.0], s, duration_s), f"ratio={r} seed={s}"))
        for r in PRIORITY_RATIOS
        for s in range(1, seeds + 1)
    ]
    return [
        Part("flows", "Uncoupled and coupled (ctrlTCP) NewReno flows by number of flows, and one NewReno flow alone "
             "(Figs. 9.9-9.11)", flows_jobs,
             {"flows": list(FLOW_COUNTS), "coupling": list(COUPLINGS) + [ONE_FLOW]},
             figures=[{"kind": "arms", "x": "flows", "xlabel": "number of flows", "arm": "coupling",
                       "arms": list(COUPLINGS), "reference": ONE_FLOW, "metrics": list(CVU_METRICS),
                       # One flow's Jain's index is 1 by definition: nothing to compare with.
                       "no_reference": ["jain_tcp"]}]),
        Part("priority", "Two ctrlTCP flows with priority ratio P1:P2 (Fig. 9.12)", prio_jobs,
             {"priority_ratio": list(PRIORITY_RATIOS)},
             figures=[{"kind": "share", "x": "priority_ratio", "xlabel": "priority ratio r (P1:P2 = r:1)", "flow": 0,
                       "label": "flow 1, measured (ctrlTCP)", "ideal_label": "ideal r/(r+1)",
                       "ideal": [[r, r / (r + 1)] for r in PRIORITY_RATIOS]}]),
    ]


def _mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def _by(runs: List[Dict[str, Any]], **params: Any) -> List[Dict[str, Any]]:
    return [r for r in runs if all(r["params"].get(k) == v for k, v in params.items())]


#: (seed, value) of each run of one arm at one point.
Samples = List[Tuple[int, float]]


def _finite(xs: Samples) -> Samples:
    return [(s, x) for s, x in xs if not math.isnan(x)]


def _values(xs: Samples) -> List[float]:
    return [x for _, x in xs]


def _range(xs: Samples, fmt: Callable[[float], str]) -> str:
    """"lo (seed a) to hi (seed b)" over seeds, or the one value."""
    xs = _finite(xs)
    if not xs:
        return "no runs"
    lo, hi = min(xs, key=lambda p: p[1]), max(xs, key=lambda p: p[1])
    if len(xs) == 1 or lo[1] == hi[1]:
        return fmt(lo[1]) + ("" if len(xs) == 1 else " (every seed)")
    return f"{fmt(lo[1])} (seed {lo[0]}) to {fmt(hi[1])} (seed {hi[0]})"


def _overlap(a: Samples, b: Samples) -> Optional[bool]:
    a, b = _values(_finite(a)), _values(_finite(b))
    if not a or not b:
        return None
    return min(a) <= max(b) and min(b) <= max(a)


def _versus(a_name: str, a: Samples, b_name: str, b: Samples, fmt: Callable[[float], str]) -> str:
    """Each arm's range over seeds (with the seeds at its ends) and whether the ranges overlap:
    a difference inside the seed-to-seed spread, or a consistent one."""
    text = f"Over seeds: {a_name} {_range(a, fmt)}; {b_name} {_range(b, fmt)}"
    ov = _overlap(a, b)
    if ov is None:
        return text + "."
    return text + ("; the ranges overlap." if ov else "; the ranges do not overlap.")


def _spread_word(a: Samples, b: Samples) -> str:
    """How to read a difference of means: inside the seed-to-seed spread or consistent."""
    return ("inside the spread over seeds" if _overlap(a, b) else "consistent over seeds") if _overlap(a, b) is not None else "without runs to compare"


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f} ms"


def _pct(x: float) -> str:
    return f"{x:.2%}"


def _mbps(x: float) -> str:
    return f"{x / 1e6:.2f} Mbit/s"


def _rel(a: float, b: float) -> float:
    return a / b - 1 if b else float("nan")


#: Why coupled flows fall below one flow as N grows (measured for issue 11, 10 seeds, 100 s each, with the
#: simulator's 200 ms delayed-ACK timer on and off on both sides).
WHY_DELAYED_ACKS = (
    "Measured cause: the aggregate window is one flow's (about 41-43 segments), split into N windows of about 4 at "
    "N = 10; with such small windows a flow often has one unacknowledged segment and the receiver's delayed-ACK "
    "timer (200 ms, two RTTs) holds its ACK, so the flow idles (478-752 timer ACKs per run at N = 10, none for one "
    "flow). With delayed ACKs off on both sides the coupled aggregate matches one flow up to N = 6 (4.62-4.66 vs 4.66 "
    "Mbit/s) and is 4 % below it at N = 10 (4.47 vs 4.66): delayed ACKs explain 80-96 % of the gap for N >= 4; the "
    "rest is timeouts of windows too small for three duplicate ACKs. ")


def _cvu_checks(runs: Mapping[str, List[Dict[str, Any]]]) -> List[Check]:
    """Seed 003 section 9.3 and its summary, for every number of flows (means over seeds): RTT, loss
    and Jain's index of coupled against uncoupled flows as the source states them; aggregate
    goodput of coupled flows against one NewReno flow alone (coupled N flows are meant to be
    exactly as aggressive as one flow); coupled against uncoupled goodput, and coupled against one
    flow's loss, as information rows. Every row's note gives the range over seeds; every FAIL and
    INFO row also says why."""
    out: List[Check] = []
    fl = runs["flows"]

    def samples(metric: str, **params: Any) -> Samples:
        return sorted((int(r["seed"]), float(r["summary"].get(metric, float("nan")))) for r in _by(fl, **params))

    def arm(n: int, c: str, metric: str) -> Samples:
        return samples(metric, flows=n, coupling=c)

    def mean(xs: Samples) -> float:
        return _mean(_values(xs))

    one = {m: samples(m, coupling=ONE_FLOW) for m in ("loss_ratio", "tcp_goodput_bps")}
    def below_uncoupled(metric: str, name: str, fmt: Callable[[float], str], failed: str, why: str) -> None:
        """The source's direction for `metric`: coupled below uncoupled, for every number of flows."""
        for n in FLOW_COUNTS:
            us, cs = arm(n, "none", metric), arm(n, "ccc_handover", metric)
            u, c = mean(us), mean(cs)
            ok = c < u
            note = _versus("coupled", cs, "uncoupled", us, fmt)
            if not ok:
                note = f"Coupled flows did not {failed} ({_rel(c, u):+.1%} relative, {_spread_word(cs, us)}). {why} " + note
            out.append(Check(f"{n} flows: {name}", "coupled < uncoupled", f"{fmt(c)} vs {fmt(u)}", ok, note))

    below_uncoupled("mean_rtt_s", "mean RTT (Fig. 9.9)", _ms, "lower the mean RTT",
                    "The claim rests on one aggregate window halved per loss where uncoupled flows halve one of N "
                    "windows, which should keep the queue shorter.")
    below_uncoupled("loss_ratio", "bottleneck loss ratio (Fig. 9.11)", _pct, "lose less",
                    "The claim rests on the aggregate backing off as one flow after a loss, where uncoupled flows back "
                    "off one of N windows.")
    for n in FLOW_COUNTS:
        cs, os_ = arm(n, "ccc_handover", "loss_ratio"), one["loss_ratio"]
        c, o = mean(cs), mean(os_)
        if _overlap(cs, os_) is False:
            how = (f"Coupled {n} flows lose more than one flow on every seed: the coupled aggregate pushes the queue "
                   "harder than one flow would." if c > o else f"Coupled {n} flows lose less than one flow on every seed.")
        else:
            how = (f"The means differ by {_rel(c, o):+.0%}, but the ranges over seeds overlap: not a consistent "
                   "difference (a coupled aggregate that behaves as one flow should lose about as much as one flow).")
        out.append(Check(f"{n} flows: bottleneck loss ratio, coupled vs one flow", "no claim in the source; coupled "
                         "flows are meant to behave as one flow (about equal)", f"{_pct(c)} vs {_pct(o)} ({_rel(c, o):+.0%})",
                         False, how + " " + _versus("coupled", cs, "one flow", os_, _pct), info=True))
    for n in FLOW_COUNTS:
        cs, os_ = arm(n, "ccc_handover", "tcp_goodput_bps"), one["tcp_goodput_bps"]
        c, o = mean(cs), mean(os_)
        rel = _rel(c, o)
        ok = abs(rel) <= 0.05
        note = _versus("coupled", cs, "one flow", os_, _mbps)
        if not ok:
            side = "less" if rel < 0 else "more"
            note = (f"Coupled {n} flows are meant to be exactly as aggressive as one NewReno flow on the same path with "
                    f"the same cross traffic; the coupled aggregate got {rel:+.1%} ({side}) against one flow, "
                    f"{_spread_word(cs, os_)}. " + (WHY_DELAYED_ACKS if rel < 0 else "") + note)
        out.append(Check(f"{n} flows: aggregate TCP goodput, coupled vs one flow (Fig. 9.10)",
                         "coupled within 5 % of one NewReno flow alone", f"{_mbps(c)} vs {_mbps(o)} ({rel:+.1%})", ok, note))
    for n in FLOW_COUNTS:
        us, cs = arm(n, "none", "tcp_goodput_bps"), arm(n, "ccc_handover", "tcp_goodput_bps")
        u, c = mean(us), mean(cs)
        out.append(Check(f"{n} flows: aggregate TCP goodput, coupled vs uncoupled (Fig. 9.10)", CLAIM_GOODPUT,
                         f"{_mbps(c)} vs {_mbps(u)} ({_rel(c, u):+.1%})", False, WHY_ONE_FLOW, info=True))
    for n in FLOW_COUNTS:
        us, cs = arm(n, "none", "jain_tcp"), arm(n, "ccc_handover", "jain_tcp")
        u, c = mean(us), mean(cs)
        ok = c >= 0.95 and c >= u
        note = _versus("coupled", cs, "uncoupled", us, lambda x: f"{x:.3f}")
        if not ok:
            note = ("ctrlTCP gives each flow its priority's share of one aggregate window, so with equal priorities the "
                    "flows' goodputs should be about equal (index near 1). " + note)
        out.append(Check(f"{n} flows: Jain's index of TCP goodput (Fig. 9.13)", "coupled >= 0.95 and >= uncoupled",
                         f"{c:.3f} vs {u:.3f}", ok, note))
    for r in PRIORITY_RATIOS:
        shares: Samples = []
        for run in _by(runs["priority"], priority_ratio=r):
            g = load_results(run["path"])["flows"].column("goodput_bps").to_pylist()
            shares.append((int(run["seed"]), g[0] / (g[0] + g[1]) if g[0] + g[1] > 0 else float("nan")))
        shares.sort()
        ideal = r / (r + 1)
        got = mean(shares)
        ok = abs(got - ideal) <= 0.05
        note = f"Over seeds: {_range(shares, lambda x: f'{x:.3f}')}."
        if not ok:
            note = (f"ctrlTCP assigns flow 1 the share P1/(P1+P2) = {ideal:.3f} of the aggregate window; its goodput "
                    f"share is {got - ideal:+.3f} off. " + note)
        out.append(Check(f"priority {r}:1: flow 1's share of the aggregate (Fig. 9.12)", f"{ideal:.3f} +- 0.05",
                         f"{got:.3f}", ok, note))
    return out


# --- the simulator against real Linux TCP (issue 15) -------------------------------------------

SVL_FLOWS = (1, 2, 4, 8)
SVL_CROSS = ("none", "self_similar")
#: The one CUBIC case: (flows, cross traffic).
SVL_CUBIC = (2, "none")
#: The simulator's counterpart of kernel reno: NewReno counting acknowledged segments (RFC 3465),
#: as Linux's tcp_reno_cong_avoid does. The a/cwnd-per-ACK rule ("newreno") grows half as fast
#: with delayed ACKs, so it would not be the same algorithm.
SVL_SIM_RENO = "newreno_abc"
#: Tolerances of the issue: goodput and loss 10 %, queue 20 % (relative); a loss ratio also
#: passes within 0.1 percentage points, since one or two flows lose a handful of packets a minute.
SVL_TOL = {"tcp_goodput_bps": 0.10, "loss_ratio": 0.10, "mean_queue_pkts": 0.20}
SVL_LOSS_ABS = 0.001
SVL_METRICS = ("tcp_goodput_bps", "loss_ratio", "mean_queue_pkts", "mean_rtt_s", "jain_tcp")
#: What Linux does that the simulator does not model, and what of it the engine turns off.
SVL_DIFFERENCES = (
    "Turned off on the Linux engine: TSO/GSO/GRO and checksum offload on every veth, the TCP metrics cache "
    "(tcp_no_metrics_save), ECN, slow start after idle; receive buffers large enough that autotuning never "
    "limits a flow. Cannot be turned off per namespace: PRR (RFC 6937) in recovery, RACK-TLP loss detection, "
    "Linux's adaptive delayed ACKs (quick-ack mode at start, 40 ms minimum timer, the simulator's is 200 ms), "
    "TSQ and pacing of the first RTT (internal pacing for flows without fq), HyStart in cubic (a global module "
    "parameter), and the 14-byte Ethernet header the tbf does not count (stab overhead -14) but the veth carries.")


def _svl_scenario(n: int, cross: str, cc: str, seed: int, duration_s: float) -> Dict[str, Any]:
    """Seed 003's dumbbell (10 Mbit/s, 100 ms RTT, 83 packets) with n flows of `cc` from one host
    pair, starting at random over the first second, and optionally 50 % self-similar UDP."""
    rng = random.Random(seed)
    sim_cc, kernel_cc = (SVL_SIM_RENO, "reno") if cc == "reno" else ("cubic", "cubic")
    flows: List[Dict[str, Any]] = [
        {"type": "tcp", "pair": 0, "start_s": round(rng.uniform(0.0, 1.0), 6), "cc": sim_cc, "linux_cc": kernel_cc}
        for _ in range(n)
    ]
    if cross == "self_similar":
        flows.append({"type": "udp", "pair": 1, "kind": "self_similar", "load_bps": 5e6})
    return {
        "name": f"svl-{cc}-{n}-{cross}", "seed": seed, "duration_s": duration_s, "sample_interval_s": 0.1,
        "topology": {"kind": "dumbbell", "pairs": 2, "bottleneck_rate_bps": 10e6, "bottleneck_delay_s": 0.048, "queue_pkts": 83},
        "flows": flows,
    }


def _svl_points() -> List[Tuple[int, str, str]]:
    return [(n, c, "reno") for n in SVL_FLOWS for c in SVL_CROSS] + [(SVL_CUBIC[0], SVL_CUBIC[1], "cubic")]


def _svl_parts(seeds: int, duration_s: float) -> List[Part]:
    parts = []
    for engine in ("sim", "linux"):
        jobs = [
            Job({"flows": n, "cross": c, "cc": cc},
                validate(_svl_scenario(n, c, cc, s, duration_s), f"{engine} flows={n} cross={c} cc={cc} seed={s}"), engine)
            for n, c, cc in _svl_points()
            for s in range(1, seeds + 1)
        ]
        title = "The simulator" if engine == "sim" else "Real Linux TCP in network namespaces (the linux engine)"
        parts.append(Part(engine, title, jobs, {"flows": list(SVL_FLOWS), "cross": list(SVL_CROSS), "cc": ["reno", "cubic"]},
                          figures=[{"kind": "arms", "x": "flows", "xlabel": "number of reno flows", "arm": "cross",
                                    "arms": list(SVL_CROSS), "metrics": list(SVL_METRICS), "where": {"cc": "reno"}}]))
    return parts


def _svl_checks(runs: Mapping[str, List[Dict[str, Any]]]) -> List[Check]:
    """Per point (flows, cross traffic, cc): the mean over seeds of each figure on both engines
    with the relative difference; goodput, loss and mean queue are checked against the issue's
    tolerances, mean RTT and Jain's index are shown as information."""
    out: List[Check] = []
    fmts = {"tcp_goodput_bps": _mbps, "loss_ratio": _pct, "mean_queue_pkts": lambda x: f"{x:.1f} pkts",
            "mean_rtt_s": _ms, "jain_tcp": lambda x: f"{x:.3f}"}
    names = {"tcp_goodput_bps": "aggregate TCP goodput", "loss_ratio": "bottleneck loss ratio",
             "mean_queue_pkts": "mean bottleneck queue", "mean_rtt_s": "mean RTT", "jain_tcp": "Jain's index"}
    for n, c, cc in _svl_points():
        label = f"{n} {cc} flow{'s' if n > 1 else ''}, {'no cross traffic' if c == 'none' else '50 % self-similar'}"
        for metric in ("tcp_goodput_bps", "loss_ratio", "mean_queue_pkts", "mean_rtt_s", "jain_tcp"):
            if metric == "jain_tcp" and n == 1:
                continue
            sim = sorted((int(r["seed"]), float(r["summary"].get(metric, float("nan")))) for r in _by(runs["sim"], flows=n, cross=c, cc=cc))
            lx = sorted((int(r["seed"]), float(r["summary"].get(metric, float("nan")))) for r in _by(runs["linux"], flows=n, cross=c, cc=cc))
            a, b = _mean(_values(lx)), _mean(_values(sim))
            rel = _rel(a, b)
            fmt = fmts[metric]
            note = _versus("linux", lx, "sim", sim, fmt)
            tol = SVL_TOL.get(metric)
            ours = f"linux {fmt(a)} vs sim {fmt(b)} ({rel:+.1%})"
            if tol is None:
                out.append(Check(f"{label}: {names[metric]}", "shown beside each other", ours, False, note, info=True))
                continue
            ok = abs(rel) <= tol or (metric == "loss_ratio" and abs(a - b) <= SVL_LOSS_ABS)
            if not ok:
                note = SVL_WHY.get((metric, cc, c), SVL_WHY.get((metric, cc, None), SVL_WHY_DEFAULT)) + " " + note
            expected = f"within {tol:.0%}" + (f" (or {SVL_LOSS_ABS:.1%} absolute)" if metric == "loss_ratio" else "")
            out.append(Check(f"{label}: {names[metric]}", expected, ours, ok, note))
    return out


#: Why a figure differs by more than its tolerance, per (metric, cc, cross traffic or None for any),
#: from what the runs show (filled in from the measured runs; see the closing note of issue 15).
SVL_WHY: Dict[Tuple[str, str, Optional[str]], str] = {
    ("loss_ratio", "cubic", None): (
        "Measured cause (issue 15, 5 seeds): the slow-start overshoot. Nearly all the simulator's drops are in the "
        "first 6 s (345-396 per run of its 388-433 in 60 s); Linux drops 12-77 there, because its cubic runs HyStart "
        "(a global module parameter, on here), which leaves slow start on the delay increase before the queue "
        "overflows, and the simulator's CUBIC has no HyStart. With HyStart turned off for a check "
        "(/sys/module/tcp_cubic/parameters/hystart = 0, restored after), Linux drops 241-249 in the first 6 s; the "
        "rest of the gap lies in the recovery from that overshoot and was not measured further (Linux's PRR, which "
        "paces segments into the full queue, is one candidate). After slow start both engines drop about 40 packets in 54 s, and goodput "
        "and queue agree within 2 %."),
}
SVL_WHY_DEFAULT = "Not yet explained: " + SVL_DIFFERENCES


# --- ctrlTCP in the kernel against the simulator (issue 16) ------------------------------------

#: The coupler both engines run: ctrlTCP with ack-clocked handover in whole packets (the kernel's
#: macroflow_ccc is this arithmetic), over reno_int, the simulator's Linux Reno in whole packets
#: (tcp_reno_cong_avoid with snd_cwnd_cnt; the kernel's reno on the linux engine), in every arm.
T93L_CCC = "ccc_handover_int"
T93L_CROSS = ("none", "self_similar")
T93L_ARMS = ("none", T93L_CCC)
T93L_CC = "reno_int"
#: Fig. 9.7/9.8: the capacities of the emulation (Fig. 9.8), the long flow (25 Mbit) and the short
#: one (200 kbit) starting at random in the first and the sixth second.
T93L_CAPS = (6e6, 8e6, 10e6)
T93L_HANDOVER_ARMS = ("none", "ccc_int", T93L_CCC)
T93L_ENGINES = ("sim", "linux")


def _t93l_dumbbell(flows: List[Dict[str, Any]], coupling: str, cross: str, seed: int, duration_s: float,
                   name: str, rate_bps: float = 10e6, sample_s: float = 0.1) -> Dict[str, Any]:
    for f in flows:
        f.setdefault("type", "tcp")
        f.setdefault("pair", 0)
        f["cc"] = T93L_CC
        if coupling != "none":
            f["group"] = "tcp"
    if cross == "self_similar":
        flows = flows + [{"type": "udp", "pair": 1, "kind": "self_similar", "load_bps": rate_bps / 2}]
    return {
        "name": name, "seed": seed, "duration_s": duration_s, "sample_interval_s": sample_s,
        "topology": {"kind": "dumbbell", "pairs": 2, "bottleneck_rate_bps": rate_bps, "bottleneck_delay_s": 0.048,
                     "queue_pkts": 83},
        "groups": [] if coupling == "none" else [{"name": "tcp", "kind": coupling}],
        "flows": flows,
    }


def _t93l_parts(seeds: int, duration_s: float) -> List[Part]:
    parts: List[Part] = []
    for engine in T93L_ENGINES:
        def job(params: Dict[str, Any], sc: Dict[str, Any], s: int) -> Job:
            return Job(params, validate(sc, f"{engine} {params} seed={s}"), engine)

        flows = []
        for s in range(1, seeds + 1):
            for cross in T93L_CROSS:
                for n in FLOW_COUNTS:
                    for c in T93L_ARMS:
                        rng = random.Random(s)
                        fl = [{"start_s": round(rng.uniform(0.0, 1.0), 6)} for _ in range(n)]
                        flows.append(job({"flows": n, "coupling": c, "cross": cross},
                                         _t93l_dumbbell(fl, c, cross, s, duration_s, f"t93l-{c}-{n}-{cross}"), s))
                rng = random.Random(s)
                flows.append(job({"flows": 1, "coupling": ONE_FLOW, "cross": cross},
                                 _t93l_dumbbell([{"start_s": round(rng.uniform(0.0, 1.0), 6)}], "none", cross, s, duration_s,
                                                f"t93l-one-{cross}"), s))
        prio = []
        for s in range(1, seeds + 1):
            for r in PRIORITY_RATIOS:
                rng = random.Random(s)
                fl = [{"start_s": round(rng.uniform(0.0, 1.0), 6), "priority": float(r)},
                      {"start_s": round(rng.uniform(0.0, 1.0), 6), "priority": 1.0}]
                prio.append(job({"priority_ratio": r}, _t93l_dumbbell(fl, T93L_CCC, "self_similar", s, duration_s,
                                                                     f"t93l-prio-{r}"), s))
        fig96 = []
        for s in range(1, seeds + 1):
            # Fig. 9.6: priorities 0.75 and 0.25; connection 1 from 3 s, connection 2 from 30 s; both
            # until 85 s (the figure's interval in which they coexist).
            fl = [{"start_s": 3.0, "priority": 0.75}, {"start_s": 30.0, "priority": 0.25}]
            fig96.append(job({"case": "0.75/0.25"}, _t93l_dumbbell(fl, T93L_CCC, "none", s, 85.0, "t93l-fig96"), s))
        ho = []
        for s in range(1, seeds + 1):
            for cap in T93L_CAPS:
                for c in T93L_HANDOVER_ARMS:
                    rng = random.Random(s)
                    # The long flow sends until the end: a 25 Mbit flow (3.1 MB) is over in 3-5 s at
                    # 6-10 Mbit/s, before the short one starts in the sixth second, so the two would
                    # never meet (seed 003's Fig. 9.7 shows them meeting; its "25 Mb" cannot be bits).
                    fl = [{"start_s": round(rng.uniform(0.0, 1.0), 6)},
                          {"start_s": round(5.0 + rng.uniform(0.0, 1.0), 6), "size_bytes": 200_000 // 8}]
                    ho.append(job({"capacity_bps": cap, "coupling": c},
                                  _t93l_dumbbell(fl, c, "none", s, 20.0, f"t93l-ho-{c}-{cap / 1e6:g}mbps", rate_bps=cap), s))
        where = "the simulator" if engine == "sim" else "kernel TCP with macroflow_ccc (the linux engine)"
        parts += [
            Part(f"{engine}-flows", f"N reno flows uncoupled and coupled, and one flow alone, with and without 50 % "
                 f"self-similar cross traffic: {where} (Figs. 9.9-9.11)", flows,
                 {"flows": list(FLOW_COUNTS), "coupling": list(T93L_ARMS) + [ONE_FLOW], "cross": list(T93L_CROSS)},
                 figures=[{"kind": "arms", "x": "flows", "xlabel": "number of flows", "arm": "coupling",
                           "arms": list(T93L_ARMS), "reference": ONE_FLOW, "metrics": ["mean_rtt_s", "loss_ratio",
                           "tcp_goodput_bps", "jain_tcp"], "no_reference": ["jain_tcp"], "where": {"cross": "self_similar"}}]),
            Part(f"{engine}-priority", f"Two coupled flows with priority ratio r:1: {where} (Fig. 9.12)", prio,
                 {"priority_ratio": list(PRIORITY_RATIOS)},
                 figures=[{"kind": "share", "x": "priority_ratio", "xlabel": "priority ratio r (P1:P2 = r:1)", "flow": 0,
                           "from_s": T93L_STEADY_FROM_S, "label": f"flow 1 ({engine})", "ideal_label": "ideal r/(r+1)",
                           "ideal": [[r, r / (r + 1)] for r in PRIORITY_RATIOS]}]),
            Part(f"{engine}-fig96", f"Priorities 0.75 and 0.25, the second connection joining at 30 s: {where} "
                 f"(Fig. 9.6)", fig96, {"case": ["0.75/0.25"]}),
            Part(f"{engine}-handover", f"A 200 kbit flow joining a 25 Mbit flow: {where} (Figs. 9.7, 9.8)", ho,
                 {"capacity_bps": list(T93L_CAPS), "coupling": list(T93L_HANDOVER_ARMS)}),
        ]
    return parts


#: Fig. 9.12's throughput ratio is measured from here to the end: the two flows start at random in
#: the first second, and the one that starts first holds most of the path until the coupling has
#: evened them out (1.9:1 over the first 5 s at equal priorities on kernel TCP, seed 1), a start-up
#: transient that says nothing about the split the priorities ask for. The whole-run ratio is
#: printed beside it (and Fig. 9.12's figure plots the share from here too).
T93L_STEADY_FROM_S = 5.0


def _pair_rates(path: Any, t0_s: float) -> Tuple[float, float, float]:
    """Flows 0 and 1 of a run: (throughput ratio from `t0_s` to the last common sample, from their
    delivered bytes; whole-run goodput ratio; ratio of their mean cwnd samples from `t0_s`)."""
    res = load_results(path)
    g = res["flows"].column("goodput_bps").to_pylist()
    t = res["flow_samples"].to_pydict()
    got: Dict[int, Dict[float, Tuple[float, float]]] = {0: {}, 1: {}}
    for ts, f, b, w in zip(t["t_s"], t["flow"], t["delivered_bytes"], t["cwnd_pkts"]):
        if f in got and ts >= t0_s and b is not None:
            got[f][round(ts, 3)] = (float(b), float("nan") if w is None else float(w))
    common = sorted(set(got[0]) & set(got[1]))
    nan = float("nan")
    whole = g[0] / g[1] if g[1] else nan
    if len(common) < 2:
        return nan, whole, nan
    a, z = common[0], common[-1]
    d0, d1 = got[0][z][0] - got[0][a][0], got[1][z][0] - got[1][a][0]
    w0, w1 = sum(got[0][x][1] for x in common), sum(got[1][x][1] for x in common)
    return (d0 / d1 if d1 > 0 else nan), whole, (w0 / w1 if w1 > 0 else nan)


def _corr(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's correlation, NaN for fewer than 3 pairs or a constant side (numpy's:
    statistics.correlation is Python 3.10+, and the package supports 3.9)."""
    import numpy as np

    if len(a) < 3 or len(a) != len(b):
        return float("nan")
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _t93l_checks(runs: Mapping[str, List[Dict[str, Any]]]) -> List[Check]:
    """Kernel TCP with macroflow_ccc against the source's directions and ideals (counted), each row
    with the simulator's figure for the same scenario beside it."""
    out: List[Check] = []

    def samples(part: str, metric: str, **params: Any) -> Samples:
        return sorted((int(r["seed"]), float(r["summary"].get(metric, float("nan")))) for r in _by(runs[part], **params))

    def both(metric: str, part: str, **params: Any) -> Tuple[Samples, Samples]:
        return samples(f"linux-{part}", metric, **params), samples(f"sim-{part}", metric, **params)

    def beside(fmt: Callable[[float], str], lx: Samples, sm: Samples) -> str:
        return f"linux {fmt(_mean(_values(lx)))} (sim {fmt(_mean(_values(sm)))})"

    for cross in T93L_CROSS:
        cw = "50 % self-similar" if cross == "self_similar" else "no cross traffic"
        for metric, name, fmt in (("mean_rtt_s", "mean RTT (Fig. 9.9)", _ms), ("loss_ratio", "loss ratio (Fig. 9.11)", _pct)):
            for n in FLOW_COUNTS:
                cl, cs = both(metric, "flows", flows=n, coupling=T93L_CCC, cross=cross)
                ul, us = both(metric, "flows", flows=n, coupling="none", cross=cross)
                c, u = _mean(_values(cl)), _mean(_values(ul))
                ok = c < u
                note = _versus("coupled", cl, "uncoupled", ul, fmt) + f" Simulator: coupled {fmt(_mean(_values(cs)))}, " \
                    f"uncoupled {fmt(_mean(_values(us)))}."
                out.append(Check(f"{n} flows, {cw}: {name}", "coupled < uncoupled (kernel TCP)",
                                 f"{beside(fmt, cl, cs)} vs {beside(fmt, ul, us)}", ok, note))
        for n in FLOW_COUNTS:
            cl, cs = both("tcp_goodput_bps", "flows", flows=n, coupling=T93L_CCC, cross=cross)
            ol, os_ = both("tcp_goodput_bps", "flows", flows=1, coupling=ONE_FLOW, cross=cross)
            c, o = _mean(_values(cl)), _mean(_values(ol))
            rel = _rel(c, o)
            ok = abs(rel) <= 0.05
            note = _versus("coupled", cl, "one flow", ol, _mbps) + f" Simulator: {_rel(_mean(_values(cs)), _mean(_values(os_))):+.1%}."
            if not ok and rel < 0:
                note = "Coupled flows are meant to be as aggressive as one reno flow. " + WHY_DELAYED_ACKS + note
            out.append(Check(f"{n} flows, {cw}: aggregate goodput, coupled vs one reno flow (Fig. 9.10)",
                             "within 5 %", f"{beside(_mbps, cl, cs)} vs one flow {beside(_mbps, ol, os_)} ({rel:+.1%})", ok, note))
    for r in PRIORITY_RATIOS:
        got: Dict[Tuple[str, str], Samples] = {}
        for engine in T93L_ENGINES:
            for run in _by(runs[f"{engine}-priority"], priority_ratio=r):
                for kind, x in zip(("steady", "whole", "cwnd"), _pair_rates(run["path"], T93L_STEADY_FROM_S)):
                    got.setdefault((engine, kind), []).append((int(run["seed"]), x))
        nan = float("nan")
        m = {(e, k): _mean(_values(sorted(got.get((e, k), [])))) if got.get((e, k)) else nan
             for e in T93L_ENGINES for k in ("steady", "whole", "cwnd")}
        lx = m[("linux", "steady")]
        ok = abs(lx - r) <= 0.05 * r
        out.append(Check(f"priority {r}:1: throughput ratio of the two flows from {T93L_STEADY_FROM_S:g} s (Fig. 9.12)",
                         f"{r} +- 5 %", f"linux {lx:.2f} (sim {m[('sim', 'steady')]:.2f})", ok,
                         f"Over seeds (linux): {_range(sorted(got[('linux', 'steady')]), lambda x: f'{x:.2f}')}. "
                         f"Whole run, start-up included: linux {m[('linux', 'whole')]:.2f}, sim {m[('sim', 'whole')]:.2f}. "
                         f"Ratio of the mean cwnd samples from {T93L_STEADY_FROM_S:g} s: linux {m[('linux', 'cwnd')]:.2f}, "
                         f"sim {m[('sim', 'cwnd')]:.2f}."))
    shares: Dict[str, List[float]] = {"linux": [], "sim": []}
    corrs: Dict[str, List[float]] = {"linux": [], "sim": []}
    for engine in T93L_ENGINES:
        for run in runs[f"{engine}-fig96"]:
            t = load_results(run["path"])["flow_samples"].to_pydict()
            by: Dict[int, Dict[float, float]] = {0: {}, 1: {}}
            for ts, f, w in zip(t["t_s"], t["flow"], t["cwnd_pkts"]):
                if f in by and 35.0 <= ts <= 84.0 and w is not None:
                    by[f][round(ts, 3)] = float(w)
            common = sorted(set(by[0]) & set(by[1]))
            a, b = [by[0][x] for x in common], [by[1][x] for x in common]
            if common:
                shares[engine].append(sum(a) / (sum(a) + sum(b)))
                corrs[engine].append(_corr(a, b))
    sl, ss = _mean(shares["linux"]), _mean(shares["sim"])
    out.append(Check("0.75/0.25: connection 1's share of the aggregate cwnd while both run (Fig. 9.6)", "0.75 +- 0.05",
                     f"linux {sl:.3f} (sim {ss:.3f})", abs(sl - 0.75) <= 0.05,
                     "Mean of cwnd samples from 35 s (5 s after connection 2 joins) to 84 s."))
    cl, cs = _mean(corrs["linux"]), _mean(corrs["sim"])
    out.append(Check("0.75/0.25: the two windows move together (Fig. 9.6)", "correlation of the cwnd samples >= 0.8",
                     f"linux {cl:.3f} (sim {cs:.3f})", cl >= 0.8,
                     "Pearson correlation of the two connections' cwnd sampled every 0.1 s from 35 s to 84 s: ctrlTCP "
                     "sets each window to its share of one aggregate, so they rise and fall together."))
    for cap in T93L_CAPS:
        fct: Dict[Tuple[str, str], Samples] = {}
        for engine in T93L_ENGINES:
            for c in T93L_HANDOVER_ARMS:
                xs = []
                for run in _by(runs[f"{engine}-handover"], capacity_bps=cap, coupling=c):
                    v = load_results(run["path"])["flows"].column("fct_s").to_pylist()[1]
                    xs.append((int(run["seed"]), float("nan") if v is None else float(v)))
                fct[(engine, c)] = sorted(xs)
        h, u = _mean(_values(fct[("linux", T93L_CCC)])), _mean(_values(fct[("linux", "none")]))
        if any(math.isnan(x) for _, x in fct[("linux", T93L_CCC)] + fct[("linux", "none")]):
            h = u = float("nan")  # a short flow that did not finish: no comparison
        nh = _mean(_values(fct[("linux", "ccc_int")]))
        sim = {c: _mean(_values(fct[("sim", c)])) for c in T93L_HANDOVER_ARMS}
        out.append(Check(f"{cap / 1e6:g} Mbit/s: the 200 kbit flow's completion time, handover vs uncoupled (Figs. 9.7, 9.8)",
                         "handover < uncoupled (kernel TCP)",
                         f"linux {h:.3f} s vs {u:.3f} s (sim {sim[T93L_CCC]:.3f} vs {sim['none']:.3f} s)", h < u,
                         f"Coupled without handover: linux {nh:.3f} s, sim {sim['ccc_int']:.3f} s. "
                         + _versus("handover", fct[("linux", T93L_CCC)], "uncoupled", fct[("linux", "none")], lambda x: f"{x:.3f} s")))
    return out


REPRODUCTIONS: Dict[str, Reproduction] = {
    "coupled-vs-uncoupled": Reproduction(
        name="coupled-vs-uncoupled",
        title="Coupled versus uncoupled TCP flows on the dissertation's dumbbell (ctrlTCP)",
        source="Seed 003 (dissertation on coupled congestion control), Chapter 9, section 9.3, Figs. 9.9-9.12: "
        + CLAIM_RESULTS + "; and its conclusions: " + CLAIM_SUMMARY + ".",
        description="10 Mbit/s bottleneck, 100 ms RTT, 83-packet drop-tail queue; N NewReno flows from one host, "
        "starting at random over the first second, uncoupled or coupled by ctrlTCP (TCP-CCC) with equal priorities; "
        "self-similar UDP cross traffic at 50 % load. A third arm, one NewReno flow alone on the same path with the "
        "same seeds and cross traffic, is the honest reference for the coupled goodput: coupled N flows are meant to "
        "be exactly as aggressive as one flow, while N uncoupled flows are N times as aggressive as one, so the "
        "comparison of goodput with uncoupled flows is shown as information (INFO, not counted) beside the source's "
        "words. Then two coupled flows with priority ratios 1..5. The figures carry no numbers in the text, so the "
        "checks are the directions the text states, with the tolerances written beside them.",
        parts=_cvu_parts,
        checks=_cvu_checks,
        labels={"none": "uncoupled", "ccc_handover": "ctrlTCP", ONE_FLOW: "one flow"},
    ),
    "sim-vs-linux": Reproduction(
        name="sim-vs-linux",
        title="The simulator against real Linux TCP on the dissertation's dumbbell",
        source="Issue 15's cross-check on seed 003's dumbbell (sec. 7.3, 9.2.3: 10 Mbit/s, 100 ms RTT, 83 packets).",
        description="1, 2, 4 and 8 NewReno flows from one host pair, with and without 50 % self-similar UDP cross "
        "traffic (the simulator's generator drives the real UDP sender), and 2 CUBIC flows; start times drawn over the "
        "first second per seed. The simulator runs newreno_abc (Linux's tcp_reno_cong_avoid rule) and its CUBIC; Linux "
        "runs the kernel's reno and cubic through tbf + pfifo and the userspace delay line. " + SVL_DIFFERENCES,
        parts=_svl_parts,
        checks=_svl_checks,
        seeds=5,
        duration_s=60.0,
        quick_seeds=2,
        quick_duration_s=20.0,
        labels={"sim": "simulator", "linux": "Linux", "none": "no cross traffic", "self_similar": "50 % self-similar"},
        figures=[{"kind": "parts", "title": "The simulator against Linux (reno flows)", "parts": ["sim", "linux"], "by": "cross",
                  "values": list(SVL_CROSS), "x": "flows", "xlabel": "number of reno flows", "metrics": list(SVL_METRICS),
                  "where": {"cc": "reno"}}],
    ),
    "thesis-9.3-linux": Reproduction(
        name="thesis-9.3-linux",
        title="ctrlTCP on real kernel TCP (macroflow_ccc) against the simulator: seed 003 Figs. 9.6, 9.7-9.12",
        source="Seed 003, Chapter 9, section 9.3 (" + CLAIM_RESULTS + "; Fig. 9.6: priorities 0.75/0.25 give "
        "3/4 and 1/4 of the aggregate cwnd and the flows 'increase and decrease their cwnds at the same time'; "
        "Figs. 9.7/9.8: ctrlTCP with ack-clocking shortens the short flow's completion time; Fig. 9.12: shares "
        "'close to the ideal behaviour'), emulated there on a patched FreeBSD kernel, here on a stock Linux kernel.",
        description="The dissertation's dumbbell (10 Mbit/s, 100 ms RTT, 83 packets) on both engines with the same "
        "scenario files: kernel reno connections coupled by the BPF congestion control macroflow_ccc (ctrlTCP with "
        "handover in whole packets) on the linux engine, and reno_int (Linux Reno in whole packets) coupled by "
        "ccc_handover_int in the simulator. "
        "N = 2..10 flows uncoupled and coupled, and one flow alone, with and without 50 % self-similar UDP; two "
        "coupled flows with priority ratios 1..5; Fig. 9.6's 0.75/0.25 case; Fig. 9.7/9.8's 200 kbit flow joining a "
        "long flow at 6, 8 and 10 Mbit/s, uncoupled, coupled without and with handover (the long flow runs to the end: "
        "a 25 Mbit one would finish before the short one starts). Every check is on kernel "
        "TCP, with the simulator's figure for the same scenario beside it. One difference of the kernel port: a "
        "handover's released segments reach the joiner at its own next ACK.",
        parts=_t93l_parts,
        checks=_t93l_checks,
        seeds=3,
        duration_s=60.0,
        quick_seeds=1,
        quick_duration_s=30.0,
        labels={"none": "uncoupled", T93L_CCC: "ctrlTCP", "ccc_int": "ctrlTCP without handover", ONE_FLOW: "one flow",
                "self_similar": "50 % self-similar"},
    ),
    "fire-hose": Reproduction(
        name="fire-hose",
        title="Fire-hose senders in networks of max-min fair routers: dead and zombie packets",
        source="Seed 002 (fairness-enforcing routers and fire-hose senders): the worked examples of section 4.1 "
        "(Figs. 1-3, 17), section 4.3 (Fig. 4), core density (6.2, Figs. 8-15), number of flows (6.3, Fig. 16), "
        "skew (7, Figs. 18-20), real networks (8, Figs. 21-22) and loss-load routers (9, Fig. 23).",
        description="The flow-level model of crates/flowsim: every router divides each link max-min among the rates "
        "offered to it; clamp is the optimal max-min assignment; senders are naive fire-hose (Eq. 1), full balanced "
        "(Eq. 2) and limited ratio (Eq. 5, alpha = 0.2) iterated to a fixed point (Fig. 6). Synthetic topologies "
        "have 768 edge routers; the paper's HOT graph and Level 3 map are not public, so a topohub router-level "
        "graph and SNDlib ta2 with log-normal traffic stand in for them (each part says so). Thresholds the paper "
        "does not state are ours and are marked in the notes.",
        flow_parts=("examples", "inefficiency", "core-density", "demand", "skew", "real", "loss-load"),
        seeds=10,
        quick_seeds=2,
        labels={"clamp": "clamp (optimal)", "naive": "naive fire-hose", "full_balanced": "full balanced",
                "limited_ratio": "limited ratio", "limited_ratio_a1": "limited ratio (α = 1)",
                "loss_load_k10": "loss-load (k = 10)", "loss_load": "loss-load (k)"},
    ),
}


#: Seed 001 (the weak convergence of TCP bandwidth sharing), see :mod:`macroflow.weakconv`.
WEAK_CONVERGENCE = "weak-convergence"
FALSE_SHARING = "false-sharing"


def reproduce(
    name: str,
    out: Optional[Union[str, pathlib.Path]] = None,
    seeds: Optional[int] = None,
    duration_s: Optional[float] = None,
    quick: bool = False,
    workers: Optional[int] = None,
    ray: Optional[str] = None,
    on_progress: Optional[Callable[[str, SweepProgress], None]] = None,
    linux: bool = False,
) -> pathlib.Path:
    """Runs the named reproduction into `out` (default ``out/reproductions/NAME``), checks it and
    writes ``reproduction.json`` and ``report.html`` there; returns the report's path. `quick`
    uses the reproduction's smaller seed count and duration (for a first look; say so when citing).
    `linux` (thesis names only): also run the figures that have a Linux testbed counterpart there."""
    if name == WEAK_CONVERGENCE:
        # Seed 001 (macroflow.weakconv): the Markov model, the 12-hour runs and the arms beyond it.
        from macroflow.weakconv import reproduce_weak_convergence

        if seeds is not None or duration_s is not None or ray is not None or linux:
            raise ValueError(f"{name}: the paper's 12-hour runs have fixed seeds and durations and run in local processes "
                             "(no --seeds, --duration, --ray or --linux; --quick for 1-hour runs)")
        return reproduce_weak_convergence(out, quick=quick, workers=workers,
                                          on_progress=(lambda p: on_progress("runs", p)) if on_progress else None)
    if name == FALSE_SHARING:
        # Seed 000 (macroflow.falseshare): Fig. 1's topologies, Eq. 1 and 2, the detectors and the response.
        from macroflow.falseshare.report import reproduce_false_sharing

        if linux:
            raise ValueError(f"{name}: measured groups run in the simulator only (no --linux)")
        return reproduce_false_sharing(out, quick=quick, seeds=seeds, duration_s=duration_s, workers=workers, ray=ray,
                                       on_progress=on_progress)
    if name not in REPRODUCTIONS and name.startswith("thesis"):
        # Seed 003 figure by figure (macroflow.thesis): thesis, thesis-chN, thesis-fig-X.Y.
        from macroflow.thesis import reproduce_thesis

        if duration_s is not None or ray is not None:
            raise ValueError(f"{name}: the thesis's figures use the dissertation's durations and run in local processes "
                             "(no --duration, no --ray)")
        return reproduce_thesis(name, out, seeds=seeds, quick=quick, workers=workers, on_progress=on_progress, linux=linux)
    if linux:
        raise ValueError(f"{name}: --linux is for the thesis's figures (a reproduction on Linux has its own name, e.g. "
                         "thesis-9.3-linux)")
    if name not in REPRODUCTIONS:
        raise KeyError(f"no reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}, thesis (see macroflow list)")
    rep = REPRODUCTIONS[name]
    if rep.flow_parts:
        if duration_s is not None:
            raise ValueError(f"{name} is a flow-level (steady-state) reproduction: it has no duration")
        if ray is not None:
            raise ValueError(f"{name} runs its parts in local processes; it does not use Ray")
        return _reproduce_flow(rep, out, seeds, quick, workers, on_progress)
    seeds = seeds if seeds is not None else (rep.quick_seeds if quick else rep.seeds)
    duration_s = duration_s if duration_s is not None else (rep.quick_duration_s if quick else rep.duration_s)
    if seeds < 1 or not duration_s > 0:
        raise ValueError(f"seeds must be >= 1 and duration_s > 0, got {seeds} and {duration_s}")
    root = pathlib.Path(out) if out is not None else pathlib.Path("out/reproductions") / name
    parts = rep.parts(seeds, duration_s)
    stored: Dict[str, List[Dict[str, Any]]] = {}
    for part in parts:
        d = root / part.name
        sweep(part.jobs, d, workers=workers, ray=ray, meta={"name": f"{name}/{part.name}", "file": None, "grid": part.grid,
                                                           "seeds": list(range(1, seeds + 1))},
              on_progress=(lambda p, n=part.name: on_progress(n, p)) if on_progress else None)
        wanted = {j.key for j in part.jobs}
        stored[part.name] = [r for r in list_runs(d) if r["key"] in wanted]
    checks = rep.checks(stored)
    write_json_atomic(root / "reproduction.json", {
        "name": rep.name,
        "title": rep.title,
        "source": rep.source,
        "description": rep.description,
        "seeds": seeds,
        "duration_s": duration_s,
        "parts": [{"name": p.name, "title": p.title, "dir": p.name, **({"figures": p.figures} if p.figures else {})} for p in parts],
        "checks": [asdict(c) for c in checks],
        "labels": rep.labels,
        **({"figures": rep.figures} if rep.figures else {}),
    })
    from macroflow.reports import write_report  # matplotlib is only loaded when a report is made

    return write_report(root)


def _flow_part(name: str, patterns: int, quick: bool) -> Dict[str, Any]:
    """Runs one flow-level part (in a worker process) and returns what ``flow.json`` holds; the
    driver writes it, so a worker left behind by a killed driver writes nothing."""
    from macroflow.firehose import run_part

    part = run_part(name, patterns, quick)
    return {"title": part.title, "description": part.description, "rows": part.rows, "figures": part.figures,
            "network": part.network, "checks": [asdict(Check(*c)) for c in part.checks]}


def _reproduce_flow(rep: Reproduction, out: Optional[Union[str, pathlib.Path]], seeds: Optional[int], quick: bool,
                    workers: Optional[int], on_progress: Optional[Callable[[str, SweepProgress], None]]) -> pathlib.Path:
    """A flow-level reproduction: each part in a local process into ``DIR/<part>/flow.json`` (a
    stored part with the same pattern count, quickness and code version is reused), then
    reproduction.json and the report."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import os

    from macroflow.results import code_version

    patterns = seeds if seeds is not None else (rep.quick_seeds if quick else rep.seeds)
    if patterns < 1:
        raise ValueError(f"seeds (traffic patterns) must be >= 1, got {patterns}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    root = pathlib.Path(out) if out is not None else pathlib.Path("out/reproductions") / rep.name
    meta = {"patterns": patterns, "quick": quick, "version": code_version()}
    checks: Dict[str, List[Dict[str, Any]]] = {}
    for p in rep.flow_parts:
        f = root / p / "flow.json"
        if f.exists():
            stored = json.loads(f.read_text())
            if stored.get("meta") == meta:
                checks[p] = stored["checks"]
    todo = [p for p in rep.flow_parts if p not in checks]
    prog = SweepProgress(total=len(rep.flow_parts), already=len(checks))
    if on_progress:
        on_progress("parts", prog)
    if todo:
        n = workers or os.cpu_count() or 1
        with cf.ProcessPoolExecutor(max_workers=min(n, len(todo)), mp_context=mp.get_context("spawn")) as pool:
            futs = {pool.submit(_flow_part, p, patterns, quick): p for p in todo}
            for fut in cf.as_completed(futs):
                p = futs[fut]
                data = fut.result()
                (root / p).mkdir(parents=True, exist_ok=True)
                write_json_atomic(root / p / "flow.json", {"meta": meta, **data})
                checks[p] = data["checks"]
                prog.done += 1
                prog.keys.append(p)
                if on_progress:
                    on_progress("parts", prog)
    write_json_atomic(root / "reproduction.json", {
        "name": rep.name,
        "title": rep.title,
        "source": rep.source,
        "description": rep.description,
        "seeds": patterns,
        "duration_s": None,
        "parts": [{"name": p, "title": p, "dir": p, "kind": "flow"} for p in rep.flow_parts],
        "checks": [c for p in rep.flow_parts for c in checks[p]],
        "labels": rep.labels,
    })
    from macroflow.reports import write_report

    return write_report(root)
