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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from macroflow.results import list_runs, load_results, write_json_atomic
from macroflow.scenario import validate
from macroflow.sweeps import Job, SweepProgress, sweep

__all__ = ["Check", "Part", "Reproduction", "REPRODUCTIONS", "reproduce"]


@dataclass(frozen=True)
class Check:
    """One expected outcome: what the source says, what we measured, and whether it holds."""

    name: str
    expected: str
    ours: str
    passed: bool
    note: str = ""


@dataclass(frozen=True)
class Part:
    """One sweep of a reproduction, stored in ``DIR/<name>/``."""

    name: str
    title: str
    jobs: List[Job]
    grid: Dict[str, List[Any]]


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


# --- coupled versus uncoupled TCP on the dissertation's dumbbell ---------------------------------

FLOW_COUNTS = (2, 4, 6, 8, 10)
PRIORITY_RATIOS = (1, 2, 3, 4, 5)
COUPLINGS = ("none", "ccc_handover")


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


def _cvu_parts(seeds: int, duration_s: float) -> List[Part]:
    flows_jobs = [
        Job({"flows": n, "coupling": c}, validate(_dumbbell_scenario(n, c, [1.0] * n, s, duration_s), f"flows={n} coupling={c} seed={s}"))
        for n in FLOW_COUNTS
        for c in COUPLINGS
        for s in range(1, seeds + 1)
    ]
    prio_jobs = [
        Job({"priority_ratio": r}, validate(_dumbbell_scenario(2, "ccc_handover", [float(r), 1.0], s, duration_s), f"ratio={r} seed={s}"))
        for r in PRIORITY_RATIOS
        for s in range(1, seeds + 1)
    ]
    return [
        Part("flows", "Coupled (ctrlTCP) versus uncoupled NewReno flows, by number of flows (Figs. 9.9-9.11)", flows_jobs,
             {"flows": list(FLOW_COUNTS), "coupling": list(COUPLINGS)}),
        Part("priority", "Two ctrlTCP flows with priority ratio P1:P2 (Fig. 9.12)", prio_jobs,
             {"priority_ratio": list(PRIORITY_RATIOS)}),
    ]


def _mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def _by(runs: List[Dict[str, Any]], **params: Any) -> List[Dict[str, Any]]:
    return [r for r in runs if all(r["params"].get(k) == v for k, v in params.items())]


def _cvu_checks(runs: Mapping[str, List[Dict[str, Any]]]) -> List[Check]:
    """Seed 003 section 9.3 and its summary (ctrlTCP "yields lower queuing delays and packet loss
    rates than uncoupled TCP flows, and has negligible impact on aggregate throughput"): for every
    number of flows, coupled against uncoupled means over seeds."""
    out: List[Check] = []
    fl = runs["flows"]

    def m(n: int, c: str, metric: str) -> float:
        return _mean([r["summary"][metric] for r in _by(fl, flows=n, coupling=c)])

    for n in FLOW_COUNTS:
        u, c = m(n, "none", "mean_rtt_s"), m(n, "ccc_handover", "mean_rtt_s")
        out.append(Check(f"{n} flows: mean RTT (Fig. 9.9)", "coupled < uncoupled", f"{c * 1e3:.1f} ms vs {u * 1e3:.1f} ms", c < u))
    for n in FLOW_COUNTS:
        u, c = m(n, "none", "loss_ratio"), m(n, "ccc_handover", "loss_ratio")
        out.append(Check(f"{n} flows: bottleneck loss ratio (Fig. 9.11)", "coupled < uncoupled", f"{c:.2%} vs {u:.2%}", c < u))
    for n in FLOW_COUNTS:
        u, c = m(n, "none", "tcp_goodput_bps"), m(n, "ccc_handover", "tcp_goodput_bps")
        rel = c / u - 1
        out.append(Check(f"{n} flows: aggregate TCP goodput (Fig. 9.10)", "coupled within 10 % of uncoupled",
                         f"{c / 1e6:.2f} vs {u / 1e6:.2f} Mbit/s ({rel:+.1%})", abs(rel) <= 0.10))
    for n in FLOW_COUNTS:
        u, c = m(n, "none", "jain_tcp"), m(n, "ccc_handover", "jain_tcp")
        out.append(Check(f"{n} flows: Jain's index of TCP goodput (Fig. 9.13)", "coupled >= 0.95 and >= uncoupled",
                         f"{c:.3f} vs {u:.3f}", c >= 0.95 and c >= u))
    for r in PRIORITY_RATIOS:
        shares = []
        for run in _by(runs["priority"], priority_ratio=r):
            g = load_results(run["path"])["flows"].column("goodput_bps").to_pylist()
            shares.append(g[0] / (g[0] + g[1]))
        ideal = r / (r + 1)
        got = _mean(shares)
        out.append(Check(f"priority {r}:1: flow 1's share of the aggregate (Fig. 9.12)", f"{ideal:.3f} +- 0.05",
                         f"{got:.3f}", abs(got - ideal) <= 0.05))
    return out


REPRODUCTIONS: Dict[str, Reproduction] = {
    "coupled-vs-uncoupled": Reproduction(
        name="coupled-vs-uncoupled",
        title="Coupled versus uncoupled TCP flows on the dissertation's dumbbell (ctrlTCP)",
        source="Seed 003 (dissertation on coupled congestion control), Chapter 9, section 9.3, Figs. 9.9-9.12, "
        "and its summary: ctrlTCP 'yields lower queuing delays and packet loss rates than uncoupled TCP flows, "
        "and has negligible impact on aggregate throughput'.",
        description="10 Mbit/s bottleneck, 100 ms RTT, 83-packet drop-tail queue; N NewReno flows from one host, "
        "starting at random over the first second, uncoupled or coupled by ctrlTCP (TCP-CCC) with equal priorities; "
        "self-similar UDP cross traffic at 50 % load. Then two coupled flows with priority ratios 1..5. "
        "The figures carry no numbers in the text, so the checks are the directions the text states, with the "
        "tolerances written beside them.",
        parts=_cvu_parts,
        checks=_cvu_checks,
        labels={"none": "uncoupled", "ccc_handover": "ctrlTCP"},
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


def reproduce(
    name: str,
    out: Optional[Union[str, pathlib.Path]] = None,
    seeds: Optional[int] = None,
    duration_s: Optional[float] = None,
    quick: bool = False,
    workers: Optional[int] = None,
    ray: Optional[str] = None,
    on_progress: Optional[Callable[[str, SweepProgress], None]] = None,
) -> pathlib.Path:
    """Runs the named reproduction into `out` (default ``out/reproductions/NAME``), checks it and
    writes ``reproduction.json`` and ``report.html`` there; returns the report's path. `quick`
    uses the reproduction's smaller seed count and duration (for a first look; say so when citing)."""
    if name not in REPRODUCTIONS:
        raise KeyError(f"no reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}")
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
        "parts": [{"name": p.name, "title": p.title, "dir": p.name} for p in parts],
        "checks": [asdict(c) for c in checks],
        "labels": rep.labels,
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

    from macroflow._native import __version__

    patterns = seeds if seeds is not None else (rep.quick_seeds if quick else rep.seeds)
    if patterns < 1:
        raise ValueError(f"seeds (traffic patterns) must be >= 1, got {patterns}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    root = pathlib.Path(out) if out is not None else pathlib.Path("out/reproductions") / rep.name
    meta = {"patterns": patterns, "quick": quick, "version": __version__}
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
