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
import os
import pathlib
import random
import resource
import time
import zipfile
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
#: The shortest run the analysis can use: the warm-up and some minutes (Fig. 5's longer intervals
#: need hours; a shorter run shows them as missing).
MIN_SECONDS = WARMUP_S + 200.0
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

#: The diagnostic runs' jitters (two Reno flows at 10 ms, 20 Mbit/s: 600 us is the default).
DIAGNOSTIC_JITTERS_S = (0.0, 50e-6)


def host_jitter_s(bottleneck_rate_bps: float) -> float:
    """The hosts' sending jitter of the sharing and completion-time runs: one bottleneck service
    time of a full packet (600 us at 20 Mbit/s, 120 us at 100 Mbit/s). The paper's testbed hosts
    have timing noise of their own; a deterministic simulator has none, and identical flows over
    a drop-tail queue then lock into a repeating pattern of which flow loses at each overflow.
    Floyd and Jacobson (1992) remove these phase effects with a random per-packet processing time
    at the source of up to the bottleneck service time, the magnitude taken here (ns-2's TCP
    ``overhead_`` is that knob). Chosen from that rule before the runs were made, not fitted; the
    ``-nojitter`` diagnostic run shows what it changes."""
    return round(PACKET_BITS / bottleneck_rate_bps, 9)

#: Section 4 / Fig. 8: the short flow's size, the spacing of its starts, the warm-up before the first.
FCT_SIZE_BYTES = 12_000_000
FCT_SPACING_S = 45.0
FCT_FIRST_S = 100.0
#: After the last short flow's slot: time for one that takes longer than the spacing.
FCT_MARGIN_S = 120.0
#: What :func:`_execute` stores; bump when it changes (a stored run of another format is run again).
#: 2: the peak memory is the worker's own (VmHWM); format 1 runs stored the same series with a
#: peak memory that included the driver's (``max_rss_bytes`` is then shown as unknown).
FORMAT = 2
#: Formats whose series and summaries are what FORMAT stores.
COMPATIBLE_FORMATS = (1, 2)


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


def _dumbbell_delay_s(rtt_s: float, jitter_s: float) -> float:
    """The bottleneck's one-way delay for a base RTT (1 ms access links on each side), less half the
    hosts' jitter: a round trip draws it twice (data and ACK), J on average, so the mean base RTT
    stays the paper's."""
    return round(rtt_s / 2 - 0.002 - jitter_s / 2, 9)


def random_drop_run(cc: str, hours: float, seed: int = 1) -> Run:
    d = _base("weakconv_random_drop.toml")
    d["name"] = f"weakconv-rd-{cc}"
    d["seed"] = seed
    d["duration_s"] = round(hours * 3600.0, 3)
    p = P_RENO if cc == "newreno" else P_CUBIC
    forward = d["topology"]["links"][0]
    forward["queue"] = dict(forward["queue"], p=p)
    d["flows"][0]["cc"] = cc
    return Run(f"rd-{cc}", "random_drop", {"cc": cc, "p_loss": p, "rtt_s": 0.1}, d)


def sharing_run(cc: str, n: int, rtt_s: float, arm: str, hours: float, seed: int = 1,
                jitter_s: Optional[float] = None) -> Run:
    """N flows over N x 10 Mbit/s with a one-BDP buffer (section 3.2), the hosts with the sending
    jitter of :func:`host_jitter_s`. Another `jitter_s` (drop-tail only) is a diagnostic of phase
    locking: the run's name ends in ``-nojitter`` (0) or ``-jitter<us>us``."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    if jitter_s is not None and arm != "droptail":
        raise ValueError("a run with another jitter is a diagnostic of the drop-tail arm")
    if jitter_s is not None and not 0.0 <= jitter_s <= 1.0:
        raise ValueError(f"jitter_s must be in [0, 1] s, got {jitter_s}")
    d = _base("weakconv_sharing.toml")
    rate = 10e6 * n
    d["name"] = f"weakconv-share-{cc}-{n}-{round(rtt_s * 1000)}ms-{arm}"
    d["seed"] = seed
    d["duration_s"] = round(hours * 3600.0, 3)
    t = d["topology"]
    jit = host_jitter_s(rate) if jitter_s is None else jitter_s
    t.update(pairs=n, bottleneck_rate_bps=rate, bottleneck_delay_s=_dumbbell_delay_s(rtt_s, jit), access_jitter_s=jit)
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
    name = f"share-{cc}-{n}-{round(rtt_s * 1000)}ms-{arm}" + (
        "" if jitter_s is None else "-nojitter" if jitter_s == 0 else f"-jitter{round(jitter_s * 1e6)}us")
    return Run(name, "sharing", {"cc": cc, "n": n, "rtt_s": rtt_s, "arm": arm, "queue_pkts": q,
                                 "access_jitter_s": t["access_jitter_s"]}, d)


def fct_run(arm: str, reps: int, seed: int, sample_s: float = 0.0, spacing_s: float = FCT_SPACING_S,
            cc: Optional[str] = None) -> Run:
    """9 long flows over 100 Mbit/s and `reps` flows of 12 MB on the 10th pair, one every
    `spacing_s` after a warm-up (seed 001 Fig. 8), all with `cc` (default: the base file's,
    CUBIC). `sample_s` 0: summaries only (the completion times are in the flows table)."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    d = _base("weakconv_fct.toml")
    d["name"] = f"weakconv-fct-{arm}"
    d["seed"] = seed
    d["sample_interval_s"] = sample_s
    # The last flow gets the spacing and a margin: one slower than the spacing still completes.
    d["duration_s"] = FCT_FIRST_S + spacing_s * (reps - 1) + spacing_s + FCT_MARGIN_S
    t = d["topology"]
    if arm == "drr":
        q = t.pop("queue_pkts")
        t["queue"] = {"kind": "drr", "limit_pkts": q, "quantum_bytes": 1500}
    g = {"group": "all"} if arm == "ccc" else {}
    d["groups"] = [{"name": "all", "kind": COUPLER}] if arm == "ccc" else []
    # The seed draws the hosts' jitter, and it moves the start times too (the long flows over the
    # first second, each short flow within a second after its slot): the seeds' repetitions differ
    # from the first packet on, not only where the jitter has had time to tell.
    if cc is not None:
        d["flows"] = [dict(f, cc=cc) for f in d["flows"]]
    longs = [dict(f, start_s=st, **g) for f, st in zip((f for f in d["flows"] if "size_bytes" not in f), _start_times(seed, 9))]
    jitter = random.Random(f"weakconv-fct-{seed}")
    shorts = [{"type": "tcp", "pair": 9, "cc": longs[0]["cc"], "size_bytes": FCT_SIZE_BYTES,
               "start_s": round(FCT_FIRST_S + spacing_s * k + jitter.uniform(0.0, 1.0), 6), **g} for k in range(reps)]
    d["flows"] = longs + shorts
    kind = "shots" if sample_s else "fct"
    ccn = d["flows"][0]["cc"]
    name = f"{kind}-{arm}-s{seed}" + ("" if cc is None else f"-{cc}")
    return Run(name, kind, {"arm": arm, "reps": reps, "seed": seed, "spacing_s": spacing_s, "cc": ccn}, d)


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
    if not plan.hours * 3600.0 >= MIN_SECONDS:
        raise ValueError(f"hours must be at least {MIN_SECONDS / 3600:.3f} (the {WARMUP_S:g}-s warm-up and "
                         f"{MIN_SECONDS - WARMUP_S:g} s), got {plan.hours}")
    runs = [random_drop_run(cc, plan.hours) for cc in CCS]
    runs += [sharing_run(cc, n, 0.1, "droptail", plan.hours) for cc in CCS for n in FLOW_COUNTS]
    if plan.full:
        runs += [sharing_run(cc, n, 0.01, "droptail", plan.hours) for cc in CCS for n in FLOW_COUNTS]
        runs += [sharing_run(cc, n, 0.1, arm, plan.hours) for arm in ("ccc", "drr") for cc in CCS for n in FLOW_COUNTS]
        # The diagnostic of phase locking: the set-up that locked hardest without the hosts' jitter,
        # and with a twelfth of it (how much noise it takes).
        runs += [sharing_run("newreno", 2, 0.01, "droptail", plan.hours, jitter_s=j) for j in DIAGNOSTIC_JITTERS_S]
    arms = ARMS if plan.full else ("droptail",)
    runs += [fct_run(arm, plan.fct_reps, seed) for arm in arms for seed in range(1, plan.fct_seeds + 1)]
    # The paper does not name Fig. 8's TCP: NewReno beside the CUBIC default, one seed's worth.
    runs += [fct_run("droptail", plan.fct_reps, 1, cc="newreno")]
    runs += [fct_run(arm, 4, 1, sample_s=0.1, spacing_s=60.0) for arm in arms]
    return runs


# --- running -------------------------------------------------------------------------------------

class RunError(ValueError):
    """A run failed (its name and why), or some runs of :func:`run_all` did."""


def _execute(run: Run, version: str) -> Dict[str, Any]:
    """In a fresh worker process: runs the scenario and returns the compact series, the flows'
    summaries and what it cost (wall, CPU, this process's peak RSS: the run's alone). A worker
    importing other code than the driver's (rebuilt or edited since the start) refuses: its
    results would be stored under the driver's key."""
    from macroflow.scenario import run as run_scenario

    if code_version() != version:
        raise RunError(f"{run.name}: the worker runs code {code_version()}, the driver {version}: the package changed "
                       "after the reproduction started; start it again")
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
        # A flow is sampled from its start until it completes: before, it has delivered nothing;
        # after, what it delivered stays (not the zeros of a missing sample).
        cum = np.maximum.accumulate(cum, axis=1)
        out["t_s"], out["cum_bytes"] = times, cum
    meta = {k.decode(): v.decode() for k, v in (tables["flows"].schema.metadata or {}).items()}
    out["cost"] = {"wall_s": wall_s, "cpu_s": cpu_s, "max_rss_bytes": _peak_rss_bytes(),
                   "events": int(meta.get("events", 0)), "samples_bytes": int(fs.nbytes)}
    out["sampling_stopped_at_s"] = meta.get("sampling_stopped_at_s", "")
    out["packets_dropped"] = int(meta.get("packets_dropped", 0))
    out["coupling_errors"] = sum(int(v) for k, v in meta.items() if k.startswith("coupling_errors_"))
    return out


def _peak_rss_bytes() -> int:
    """This process's own peak resident memory (VmHWM of its address space). Not getrusage's
    ru_maxrss: Linux carries that across execve, so a spawned worker would report the driver's
    size at the fork (which grows as the driver holds more stored runs)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # not Linux: the best there is


def _execute_named(job: Any) -> Any:
    run, version = job
    try:
        return run.name, _execute(run, version), None
    except Exception as e:  # one run's failure is reported with its name; the others go on
        return run.name, None, f"{run.name}: {type(e).__name__}: {e}"


def _tmp(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _store(run: Run, root: pathlib.Path, got: Dict[str, Any]) -> None:
    d = root / "runs"
    d.mkdir(parents=True, exist_ok=True)
    arrays = {"t_s": got.get("t_s", np.zeros(0)), "cum_bytes": got.get("cum_bytes", np.zeros((0, 0), dtype=np.int64))}
    z = d / f"{run.name}.npz"
    with open(_tmp(z), "wb") as fh:
        np.savez_compressed(fh, **arrays)
    _tmp(z).replace(z)
    write_json_atomic(d / f"{run.name}.json", {
        "name": run.name, "kind": run.kind, "params": run.params, "key": run.key, "format": FORMAT, "version": code_version(),
        "scenario": run.scenario, "flows": got["flows"], "cost": got["cost"], "packets_dropped": got["packets_dropped"],
        "sampling_stopped_at_s": got["sampling_stopped_at_s"], "coupling_errors": got.get("coupling_errors", 0)})


def stored(run: Run, root: pathlib.Path) -> Optional[Dict[str, Any]]:
    """The stored run (its json, with the arrays under ``t_s`` and ``cum_bytes``), or None when
    it is missing, damaged or from another scenario, code or storage format."""
    j, z = root / "runs" / f"{run.name}.json", root / "runs" / f"{run.name}.npz"
    if not (j.exists() and z.exists()):
        return None
    try:
        meta = json.loads(j.read_text())
        if meta.get("key") != run.key or meta.get("format", 1) not in COMPATIBLE_FORMATS:
            return None
        if meta.get("format", 1) < 2:
            meta["cost"]["max_rss_bytes"] = None
        with np.load(z) as a:
            meta["t_s"], meta["cum_bytes"] = a["t_s"], a["cum_bytes"]
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return meta


def warmup_counts(run: Run, root: pathlib.Path) -> Dict[str, List[int]]:
    """Each flow's ``data_pkts_sent``, ``retransmits``, ``fast_recoveries`` and ``timeouts`` at the
    end of the warm-up: the same
    scenario run for :data:`WARMUP_S` only (the simulator is deterministic, so its first seconds
    are the long run's), cached as ``runs/NAME.warmup.json``. The loss ratio after the warm-up is
    the long run's counts minus these (slow start's burst of losses would otherwise count)."""
    f = root / "runs" / f"{run.name}.warmup.json"
    if f.exists():
        try:
            got = json.loads(f.read_text())
            if got.get("key") == run.key and got.get("v") == 3:
                return got["counts"]
        except (ValueError, KeyError):
            pass
    from macroflow.scenario import run as run_scenario

    sc = dict(run.scenario, duration_s=WARMUP_S)
    tables = run_scenario(validate(sc, run.name + " (warm-up)"))
    t = tables["flows"].to_pydict()
    counts = {k: list(t[k]) for k in ("data_pkts_sent", "retransmits", "fast_recoveries", "timeouts", "delivered_bytes")}
    counts["packets_dropped"] = int(tables["flows"].schema.metadata[b"packets_dropped"])
    f.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(f, {"key": run.key, "v": 3, "counts": counts})
    return counts


def _packets(r: Run) -> float:
    """How much a run simulates (its packets): longest first keeps both workers busy to the end."""
    sc = r.scenario
    if r.kind == "random_drop":
        rate = 10e6
    else:
        rate = sc["topology"].get("bottleneck_rate_bps", 0.0)
    return rate * sc["duration_s"]


def run_all(runs: Sequence[Run], root: pathlib.Path, workers: Optional[int] = None,
            on_done: Optional[Callable[[Run, Dict[str, Any], int, int], None]] = None) -> Dict[str, Dict[str, Any]]:
    """Runs the runs not stored yet under `root` (each in a fresh process, `workers` at once,
    default the CPU count) and returns every run's stored data by name. `on_done(run, data, done,
    total)` after each run computed now. A run that fails is reported (RunError naming every
    failed run) after the others have been stored; workers exit when the driver is killed."""
    from macroflow.sweeps import _watch_parent

    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"two runs with one name: {sorted(n for n in names if names.count(n) > 1)}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out: Dict[str, Dict[str, Any]] = {}
    todo = []
    for r in runs:
        got = stored(r, root)
        if got is None:
            todo.append(r)
        else:
            out[r.name] = got
    failed: List[str] = []
    if todo:
        n = workers or multiprocessing.cpu_count() or 1
        todo.sort(key=lambda r: -_packets(r))
        ctx = multiprocessing.get_context("spawn")
        by_name = {r.name: r for r in todo}
        version = code_version()
        with ctx.Pool(processes=min(n, len(todo)), maxtasksperchild=1, initializer=_watch_parent,
                      initargs=(os.getpid(),)) as pool:
            # Stored as each finishes: a killed reproduction keeps every run done so far.
            for i, (name, got, err) in enumerate(pool.imap_unordered(_execute_named, [(r, version) for r in todo]), 1):
                r = by_name[name]
                if err is not None:
                    failed.append(err)
                    continue
                _store(r, root, got)
                out[r.name] = stored(r, root) or {}
                if on_done:
                    on_done(r, out[r.name], i, len(todo))
    if failed:
        raise RunError(f"{len(failed)} of {len(todo)} runs failed (the others are stored):\n" + "\n".join(failed))
    return out
