"""The long-run simulations of seed 001 (sections 3 and 4) and the arms beyond it: what runs, and
a runner that stores each run's per-second byte counts with what the run cost.

Every run is built from a shipped scenario file (``scenarios/weakconv_*.toml``) varied in code
(:func:`experiments`). A run is stored as ``runs/<name>.npz`` (the per-flow cumulative delivered
bytes at each sample, the flows' summary columns) and ``runs/<name>.json`` (its scenario, code
version, wall and CPU time and the peak memory of the process that ran it). A stored run is reused
while its scenario and the code are the same; a killed reproduction resumes with the runs left.

Why not :func:`macroflow.sweeps.sweep`: the issue asks for the time and the memory of each row, so
every run gets a fresh process (``maxtasksperchild=1``) whose peak RSS is that run's alone, and the
12-hour series are kept as compact arrays (a few MB) rather than the full sample tables.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import pathlib
import random
import resource
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from macroflow.results import code_version, write_json_atomic
from macroflow.scenario import SHIPPED, parse_toml, validate

#: Seed 001 section 3: every experiment runs 12 hours.
HOURS = 12.0
#: The first seconds of every series are left out (slow start, the flows finding their shares);
#: the paper does not say what it left out of its 12 hours.
WARMUP_S = 100.0
#: The flows' packets: 1448 payload bytes in 1500-byte IP packets. The paper's rates are of IP
#: packets (its 2-flow row has a mean of 10.0 Mbit/s on a 20 Mbit/s link loaded above 99 %), so
#: the delivered payload is scaled by 1500/1448.
WIRE_PER_PAYLOAD = 1500.0 / 1448.0
PACKET_BITS = 12000.0

#: Section 3.1's drop probabilities (Eq. 5 for Reno, Eq. 6 for CUBIC, 10 Mbit/s at RTT 100 ms).
P_RENO = 1.1e-4
P_CUBIC = 3.4e-4
#: Section 3.2: N flows over N x 10 Mbit/s.
FLOW_COUNTS = (2, 3, 10)
#: The congestion controls: "Reno" with delayed ACKs and no ABC is the simulator's newreno (cwnd
#: grows 1/cwnd per ACK, so 1/2 per RTT with an ACK per two segments: the paper's a = 2).
CCS = ("newreno", "cubic")
#: The bottleneck arms: the paper's drop-tail queue, and beyond it the flows coupled by ctrlTCP
#: (one group, equal priorities) or a per-flow fair queue (DRR) instead of drop-tail.
ARMS = ("droptail", "ccc", "drr")
#: The "ccc" arm's coupler: ctrlTCP with the ack-clocked handover of a joining flow (seed 003
#: Algorithm 4), the project's TCP-CCC.
COUPLER = "ccc_handover"

#: Section 4 / Fig. 8: the short flow's size, the spacing of its starts, the warm-up before the first.
FCT_SIZE_BYTES = 12_000_000
FCT_SPACING_S = 45.0
FCT_FIRST_S = 100.0


@dataclass(frozen=True)
class Run:
    """One simulation: a name (the file stem under ``runs/``), what it is for, and its scenario."""

    name: str
    kind: str  # "random_drop", "sharing", "fct", "shots"
    params: Dict[str, Any]
    scenario: Dict[str, Any]

    @property
    def key(self) -> str:
        """The scenario and the code: a stored run with another key is computed again."""
        body = json.dumps({"scenario": self.scenario, "version": code_version()}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:24]


def _base(file: str) -> Dict[str, Any]:
    p = SHIPPED / file
    data = parse_toml(p.read_text(), str(p))
    validate(data, str(p))
    return data


def _start_times(seed: int, n: int) -> List[float]:
    """Start times uniform over the first second, drawn from the run's seed."""
    rng = random.Random(f"weakconv-start-{seed}")
    return [round(rng.uniform(0.0, 1.0), 6) for _ in range(n)]


def _bdp_pkts(rate_bps: float, rtt_s: float) -> int:
    return max(2, round(rate_bps * rtt_s / PACKET_BITS))


def _dumbbell_delay_s(rtt_s: float) -> float:
    """The bottleneck's one-way delay for a base RTT (1 ms access links on each side)."""
    return round(rtt_s / 2 - 0.002, 6)


def random_drop_run(cc: str, hours: float, seed: int = 1) -> Run:
    d = _base("weakconv_random_drop.toml")
    d["name"] = f"weakconv-rd-{cc}"
    d["seed"] = seed
    d["duration_s"] = round(hours * 3600.0, 3)
    d["topology"]["random_drop"] = P_RENO if cc == "newreno" else P_CUBIC
    d["flows"][0]["cc"] = cc
    return Run(f"rd-{cc}", "random_drop", {"cc": cc, "p_loss": d["topology"]["random_drop"], "rtt_s": 0.1}, d)


def sharing_run(cc: str, n: int, rtt_s: float, arm: str, hours: float, seed: int = 1) -> Run:
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    d = _base("weakconv_sharing.toml")
    rate = 10e6 * n
    d["name"] = f"weakconv-share-{cc}-{n}-{round(rtt_s * 1000)}ms-{arm}"
    d["seed"] = seed
    d["duration_s"] = round(hours * 3600.0, 3)
    t = d["topology"]
    t.update(pairs=n, bottleneck_rate_bps=rate, bottleneck_delay_s=_dumbbell_delay_s(rtt_s))
    q = _bdp_pkts(rate, rtt_s)
    if arm == "drr":
        t.pop("queue_pkts", None)
        t["queue"] = {"kind": "drr", "limit_pkts": q, "quantum_bytes": 1500}
    else:
        t["queue_pkts"] = q
    d["groups"] = [{"name": "all", "kind": COUPLER}] if arm == "ccc" else []
    starts = _start_times(seed, n)
    d["flows"] = [{"type": "tcp", "pair": i, "cc": cc, "start_s": starts[i], **({"group": "all"} if arm == "ccc" else {})}
                  for i in range(n)]
    name = f"share-{cc}-{n}-{round(rtt_s * 1000)}ms-{arm}"
    return Run(name, "sharing", {"cc": cc, "n": n, "rtt_s": rtt_s, "arm": arm, "queue_pkts": q}, d)


def fct_run(arm: str, reps: int, seed: int, sample_s: float = 0.0, spacing_s: float = FCT_SPACING_S) -> Run:
    """9 long NewReno flows over 100 Mbit/s and `reps` flows of 12 MB on the 10th pair, one every
    `spacing_s` after a warm-up (seed 001 Fig. 8). `sample_s` 0: summaries only (the
    completion times are in the flows table)."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    d = _base("weakconv_fct.toml")
    d["name"] = f"weakconv-fct-{arm}"
    d["seed"] = seed
    d["sample_interval_s"] = sample_s
    d["duration_s"] = FCT_FIRST_S + spacing_s * reps
    t = d["topology"]
    if arm == "drr":
        q = t.pop("queue_pkts")
        t["queue"] = {"kind": "drr", "limit_pkts": q, "quantum_bytes": 1500}
    g = {"group": "all"} if arm == "ccc" else {}
    d["groups"] = [{"name": "all", "kind": COUPLER}] if arm == "ccc" else []
    longs = [dict(f, **g) for f in d["flows"] if "size_bytes" not in f]
    shorts = [{"type": "tcp", "pair": 9, "cc": "newreno", "size_bytes": FCT_SIZE_BYTES,
               "start_s": FCT_FIRST_S + spacing_s * k, **g} for k in range(reps)]
    d["flows"] = longs + shorts
    kind = "shots" if sample_s else "fct"
    return Run(f"{kind}-{arm}-s{seed}", kind, {"arm": arm, "reps": reps, "seed": seed, "spacing_s": spacing_s}, d)


@dataclass(frozen=True)
class Plan:
    """How much to run: the paper's 12 hours and 2000 repetitions, or less for a first look."""

    hours: float = HOURS
    fct_seeds: int = 4
    fct_reps: int = 500
    #: The beyond-the-paper arms (ctrlTCP, DRR) and the 10 ms RTT rows.
    full: bool = True


PLANS = {"full": Plan(), "quick": Plan(hours=1.0, fct_seeds=2, fct_reps=100)}


def experiments(plan: Plan) -> List[Run]:
    """Every run of the reproduction: Table 1's eight simulated rows first (the numeric row is the
    Markov model), then the 10 ms rows, the coupled and DRR arms and the completion times."""
    if not plan.hours > 0:
        raise ValueError(f"hours must be > 0, got {plan.hours}")
    runs = [random_drop_run(cc, plan.hours) for cc in CCS]
    runs += [sharing_run(cc, n, 0.1, "droptail", plan.hours) for cc in CCS for n in FLOW_COUNTS]
    if plan.full:
        runs += [sharing_run(cc, n, 0.01, "droptail", plan.hours) for cc in CCS for n in FLOW_COUNTS]
        runs += [sharing_run(cc, n, 0.1, arm, plan.hours) for arm in ("ccc", "drr") for cc in CCS for n in FLOW_COUNTS]
    arms = ARMS if plan.full else ("droptail",)
    runs += [fct_run(arm, plan.fct_reps, seed) for arm in arms for seed in range(1, plan.fct_seeds + 1)]
    runs += [fct_run(arm, 4, 1, sample_s=0.1, spacing_s=60.0) for arm in arms]
    return runs


# --- running -------------------------------------------------------------------------------------

def _execute(run: Run) -> Dict[str, Any]:
    """In a fresh worker process: runs the scenario and returns the compact series, the flows'
    summaries and what it cost (wall, CPU, this process's peak RSS: the run's alone)."""
    from macroflow.scenario import run as run_scenario

    t0, c0 = time.monotonic(), time.process_time()
    sc = validate(run.scenario, run.name)
    tables = run_scenario(sc)
    wall_s, cpu_s = time.monotonic() - t0, time.process_time() - c0
    flows = tables["flows"].to_pydict()
    out: Dict[str, Any] = {"flows": flows}
    fs = tables["flow_samples"]
    if fs.num_rows:
        t = np.asarray(fs.column("t_s").to_numpy())
        f = np.asarray(fs.column("flow").to_numpy())
        b = np.asarray(fs.column("delivered_bytes").to_numpy())
        times = np.unique(t)
        nflows = len(flows["flow"])
        cum = np.zeros((nflows, len(times)), dtype=np.int64)
        cum[f, np.searchsorted(times, t)] = b
        out["t_s"], out["cum_bytes"] = times, cum
    meta = {k.decode(): v.decode() for k, v in (tables["flows"].schema.metadata or {}).items()}
    out["cost"] = {"wall_s": wall_s, "cpu_s": cpu_s, "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                   "events": int(meta.get("events", 0)), "samples_bytes": int(fs.nbytes)}
    out["sampling_stopped_at_s"] = meta.get("sampling_stopped_at_s", "")
    out["packets_dropped"] = int(meta.get("packets_dropped", 0))
    return out


def _execute_named(run: Run) -> Any:
    return run.name, _execute(run)


def _store(run: Run, root: pathlib.Path, got: Dict[str, Any]) -> None:
    d = root / "runs"
    d.mkdir(parents=True, exist_ok=True)
    arrays = {"t_s": got.get("t_s", np.zeros(0)), "cum_bytes": got.get("cum_bytes", np.zeros((0, 0), dtype=np.int64))}
    tmp = d / f".{run.name}.npz.tmp"
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    tmp.replace(d / f"{run.name}.npz")
    write_json_atomic(d / f"{run.name}.json", {
        "name": run.name, "kind": run.kind, "params": run.params, "key": run.key, "version": code_version(),
        "scenario": run.scenario, "flows": got["flows"], "cost": got["cost"], "packets_dropped": got["packets_dropped"],
        "sampling_stopped_at_s": got["sampling_stopped_at_s"]})


def stored(run: Run, root: pathlib.Path) -> Optional[Dict[str, Any]]:
    """The stored run (its json, with the arrays under ``t_s`` and ``cum_bytes``), or None when
    it is missing, damaged or from another scenario or code."""
    j, z = root / "runs" / f"{run.name}.json", root / "runs" / f"{run.name}.npz"
    if not (j.exists() and z.exists()):
        return None
    try:
        meta = json.loads(j.read_text())
        if meta.get("key") != run.key:
            return None
        with np.load(z) as a:
            meta["t_s"], meta["cum_bytes"] = a["t_s"], a["cum_bytes"]
    except (ValueError, OSError, KeyError):
        return None
    return meta


def run_all(runs: Sequence[Run], root: pathlib.Path, workers: Optional[int] = None,
            on_done: Optional[Callable[[Run, Dict[str, Any], int, int], None]] = None) -> Dict[str, Dict[str, Any]]:
    """Runs the runs not stored yet under `root` (each in a fresh process, `workers` at once,
    default the CPU count) and returns every run's stored data by name. `on_done(run, data, done,
    total)` after each run computed now."""
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"two runs with one name: {sorted(n for n in names if names.count(n) > 1)}")
    out: Dict[str, Dict[str, Any]] = {}
    todo = []
    for r in runs:
        got = stored(r, root)
        if got is None:
            todo.append(r)
        else:
            out[r.name] = got
    if todo:
        n = workers or multiprocessing.cpu_count() or 1
        if n < 1:
            raise ValueError(f"workers must be >= 1, got {n}")
        # Longest first: the 10-flow rows would otherwise start last and finish alone.
        todo.sort(key=lambda r: -r.scenario["duration_s"] * r.scenario["topology"].get("bottleneck_rate_bps", 0))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(processes=min(n, len(todo)), maxtasksperchild=1) as pool:
            by_name = {r.name: r for r in todo}
            # Stored as each finishes: a killed reproduction keeps every run done so far.
            for i, (name, got) in enumerate(pool.imap_unordered(_execute_named, todo), 1):
                r = by_name[name]
                _store(r, root, got)
                out[r.name] = stored(r, root) or {}
                if on_done:
                    on_done(r, out[r.name], i, len(todo))
    return out
