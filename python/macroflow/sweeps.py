"""Sweeps: one scenario run over a grid of parameter settings and seeds, on a local process pool
(the default) or on a Ray cluster, into a results store (:mod:`macroflow.results`).

A sweep is planned completely before anything runs: every point is built and validated, so an
invalid setting stops the sweep with the field path in the error and nothing runs. Runs already in
the store are skipped, so a sweep killed at any moment (``kill -9`` included) and started again
runs only what is missing. Workers return their tables as Parquet bytes and only this process
writes to the store (atomically, see :func:`macroflow.results.store_run`); Ray workers therefore
need no shared file system, and the pool and Ray give byte-identical results.

Settings use dotted paths into the scenario file, list items by index::

    topology.queue_pkts=40,83,160      groups.0.kind=none,ccc      flows.1.start_s=5.0
"""

from __future__ import annotations

import concurrent.futures as cf
import fcntl
import copy
import itertools
import multiprocessing
import os
import pathlib
import signal
import socket
import threading
import time
try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from macroflow.results import ENGINES, StoreError, clean_partials, code_version, compute_run, is_stored, run_key, store_run, write_json_atomic
from macroflow.scenario import Scenario, ScenarioError, parse_toml, validate
from macroflow.scenario import read as read_scenario

__all__ = ["Job", "SweepError", "parse_setting", "set_path", "plan", "sweep", "SweepProgress"]


class SweepError(ValueError):
    """A sweep that cannot be planned or run; the message says which setting or engine."""


@dataclass(frozen=True)
class Job:
    """One run of a sweep: the settings that made it (dotted path -> value) and its scenario."""

    params: Dict[str, Any]
    scenario: Scenario
    engine: str = "sim"

    @property
    def key(self) -> str:
        return run_key(self.scenario, self.engine)


def _scalar(text: str) -> Any:
    """A value as TOML reads it (42, 0.5, 1e6, true, "x"), or the bare text (ccc, none). A whole
    number in exponent form (1e6) is an int: the strict scenario models take ints for float
    fields but not floats for int ones (``--set flows.0.size_bytes=1e6``)."""
    try:
        v = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if isinstance(v, float) and "." not in text and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def parse_setting(text: str) -> Tuple[str, List[Any]]:
    """Parses ``key=v1,v2,...`` (the CLI's ``--set``) into the dotted key and its values."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise SweepError(f"--set {text!r}: expected key=value[,value...], e.g. topology.queue_pkts=40,83")
    vals = [_scalar(v.strip()) for v in values.split(",")]
    if any(v == "" for v in vals):
        raise SweepError(f"--set {text!r}: an empty value")
    return key, vals


def set_path(data: Dict[str, Any], dotted: str, value: Any) -> Dict[str, Any]:
    """A copy of `data` with the field at `dotted` set to `value`. Tables may gain a key (the
    scenario's validation says whether it is a field); list items must exist."""
    out = copy.deepcopy(data)
    node: Any = out
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SweepError(f"--set {dotted}: {where} is not an item of a list of {len(node)}")
            idx: Any = int(part)
        elif isinstance(node, dict):
            if not last and part not in node:
                raise SweepError(f"--set {dotted}: {where} is not in the scenario")
            idx = part
        else:
            raise SweepError(f"--set {dotted}: {'.'.join(parts[:i])} is a value, not a table or list")
        if last:
            node[idx] = value
        else:
            node = node[idx]
    return out


def plan(
    base: Mapping[str, Any],
    settings: Sequence[Tuple[str, Sequence[Any]]] = (),
    seeds: Union[int, Sequence[int]] = 1,
    source: str = "<sweep>",
    engine: str = "sim",
) -> List[Job]:
    """Every job of a sweep: the cartesian product of `settings` (key, values) times `seeds`
    (a count, meaning the base seed and the ones after it, or explicit seeds), validated (on the
    linux engine, also planned: a point the engine cannot run stops the sweep before any runs)."""
    if engine not in ENGINES:
        raise SweepError(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    keys = [k for k, _ in settings]
    if len(set(keys)) != len(keys):
        raise SweepError(f"a key is set twice: {keys}")
    for k, vals in settings:
        if not vals:
            raise SweepError(f"--set {k}: no values")
    if isinstance(seeds, int):
        if seeds < 1:
            raise SweepError(f"--seeds {seeds}: expected at least 1")
        first = int(base.get("seed", 1))
        seed_list = list(range(first, first + seeds))
    else:
        seed_list = list(seeds)
        if not seed_list or len(set(seed_list)) != len(seed_list) or any(s < 0 for s in seed_list):
            raise SweepError(f"seeds {seed_list}: expected distinct integers >= 0")
    jobs = []
    for combo in itertools.product(*(vals for _, vals in settings)):
        params = dict(zip(keys, combo))
        data: Dict[str, Any] = dict(base)
        for k, v in params.items():
            data = set_path(data, k, v)
        for s in seed_list:
            label = ", ".join(f"{k}={v}" for k, v in params.items())
            where = f"{source} [{label}{', ' if label else ''}seed={s}]"
            sc = validate(set_path(data, "seed", s), where)
            if engine == "linux":
                from macroflow.linux import LinuxEngineError, plan as linux_plan

                try:
                    linux_plan(sc)
                except LinuxEngineError as e:
                    raise SweepError(f"{where}: {e}") from None
            jobs.append(Job(params, sc, engine))
    return jobs


def _work(scenario: Dict[str, Any], params: Dict[str, Any], version: str, engine: str = "sim") -> Tuple[Dict[str, Any], Dict[str, bytes]]:
    """Runs one job in a worker (a pool process or a Ray task), which must run the driver's code:
    the driver keys and finds results by its own code version."""
    if code_version() != version:
        raise SweepError(f"a worker runs code {code_version()}, the driver {version}: the package was rebuilt or "
                         "changed after the sweep started, or a Ray node has another build; restart with one build")
    try:
        return compute_run(validate(scenario, "<worker>"), params, engine=engine)
    except Exception as e:
        # One line naming the point, picklable back to the driver (issue 13: chained tracebacks
        # that did not say which run failed, and aborted the sweep).
        raise JobError(f"{_point(params, scenario.get('seed'))}: {type(e).__name__}: {e}") from None


class JobError(SweepError):
    """One run of a sweep failed; the message names its parameter point and seed."""


def _point(params: Mapping[str, Any], seed: Any) -> str:
    return ", ".join([f"{k}={v}" for k, v in params.items()] + [f"seed={seed}"])


def _watch_parent(parent: int) -> None:
    """Pool-worker initializer: exit when the driver is gone (kill -9 leaves no one to stop the
    pool; issue 13: workers and the resource tracker lived on indefinitely)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        # SIGTERM first: a Linux-engine run in this worker removes its namespaces on it (issue
        # 15); then exit for certain.
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="macroflow-parent-watch").start()


@dataclass
class SweepProgress:
    """What :func:`sweep` reports after each stored run (and once before the first)."""

    total: int
    already: int
    done: int = 0
    keys: List[str] = field(default_factory=list)


def _pool_engine(workers: int) -> Callable[[List[Job]], Iterable[Tuple[Dict[str, Any], Dict[str, bytes]]]]:
    def run_all(todo: List[Job]) -> Iterable[Tuple[Dict[str, Any], Dict[str, bytes]]]:
        # "spawn": workers start clean (no copy of the driver's threads or locks).
        ctx = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_watch_parent,
                                    initargs=(os.getpid(),)) as ex:
            futs = [ex.submit(_work, j.scenario.model_dump(mode="json"), j.params, code_version(), j.engine) for j in todo]
            try:
                for f in cf.as_completed(futs):
                    try:
                        yield f.result()
                    except JobError as e:
                        yield e
                    except cf.process.BrokenProcessPool:
                        raise SweepError(f"a worker process died (out of memory, or killed) with {sum(not g.done() for g in futs)} "
                                         "runs unfinished; the runs stored so far are kept, run the sweep again to resume") from None
            except BaseException:
                for f in futs:
                    f.cancel()
                raise

    return run_all


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fails fast on an address nothing listens at (Ray itself retries for many minutes)."""
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise SweepError(f"--ray {address}: expected 'auto', 'local', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise SweepError(f"--ray {address}: cannot connect: {e}") from None


def _ray_engine(address: str) -> Callable[[List[Job]], Iterable[Tuple[Dict[str, Any], Dict[str, bytes]]]]:
    try:
        import ray
    except ImportError:
        raise SweepError("--ray needs the ray package: pip install 'macroflow[ray]' (or ray>=2.9)") from None

    def run_all(todo: List[Job]) -> Iterable[Tuple[Dict[str, Any], Dict[str, bytes]]]:
        started_here = not ray.is_initialized()
        if started_here and address not in ("local", "auto"):
            _check_reachable(address)
        if started_here:
            try:
                # "local" starts a private Ray instance in this process; otherwise connect.
                if address == "local":
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(address=address, log_to_driver=False)
            except Exception as e:  # ray raises ConnectionError, RuntimeError, ValueError ...
                raise SweepError(f"--ray {address}: cannot connect: {e}") from None
        try:
            remote = ray.remote(_work)
            pending = [remote.remote(j.scenario.model_dump(mode="json"), j.params, code_version(), j.engine) for j in todo]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                try:
                    yield ray.get(ready[0])
                except ray.exceptions.RayTaskError as e:
                    if not isinstance(e.cause, JobError):
                        raise
                    yield e.cause  # the plain one-line error, not Ray's coloured traceback
        finally:
            if started_here:
                ray.shutdown()

    return run_all


def sweep(
    jobs: Sequence[Job],
    out: Union[str, pathlib.Path],
    workers: Optional[int] = None,
    ray: Optional[str] = None,
    on_progress: Optional[Callable[[SweepProgress], None]] = None,
    meta: Optional[Mapping[str, Any]] = None,
) -> List[pathlib.Path]:
    """Runs the jobs not yet in the store `out` and returns every job's result directory, in
    job order. `workers` is the size of the local pool (default: the CPU count); `ray` is a Ray
    address ("auto", "ray://host:10001", or "local" for a private instance) to use instead.
    `meta` is added to ``out/sweep.json`` (e.g. the grid and the scenario file)."""
    out = pathlib.Path(out)
    if workers is not None and workers < 1:
        raise SweepError(f"--workers {workers}: expected at least 1")
    linux = any(j.engine == "linux" for j in jobs)
    if linux and ray:
        raise SweepError("--ray: the linux engine runs in this machine's network namespaces; use the local pool")
    if linux:
        # Real TCP is distorted by CPU contention: one run at a time unless asked (issue 15).
        workers = workers or 1
        from macroflow.linux import LinuxEngineError, check

        try:
            for j in jobs:  # root, tools, qdiscs, each point's congestion controls: before anything runs
                if j.engine == "linux":
                    check(j.scenario)
        except LinuxEngineError as e:
            raise SweepError(str(e)) from None
    keys = [j.key for j in jobs]
    unique: Dict[str, Job] = {}
    for j in jobs:
        unique.setdefault(j.key, j)
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(20, "not a directory", str(out))
        out.mkdir(parents=True, exist_ok=True)
        lock = open(out / ".sweep.lock", "a+")
    except OSError as e:
        raise StoreError(f"{e.filename or out}: cannot store results: {e.strerror or e}") from None
    with lock:
        try:
            # One sweep at a time per store (issue 13: two overwrote each other's sweep.json).
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SweepError(f"{out}: another sweep is writing this store; wait for it or use another --out") from None
        try:
            return _sweep_locked(jobs, keys, unique, out, workers, ray, on_progress, meta)
        finally:
            if linux:
                # What a worker killed mid-run left (its own cleanup did not run).
                from macroflow.linux import remove_stale

                remove_stale()


def _sweep_locked(jobs: Sequence[Job], keys: List[str], unique: Dict[str, Job], out: pathlib.Path,
                  workers: Optional[int], ray: Optional[str], on_progress: Optional[Callable[[SweepProgress], None]],
                  meta: Optional[Mapping[str, Any]]) -> List[pathlib.Path]:
    clean_partials(out)
    try:
        write_json_atomic(
            out / "sweep.json",
            {
                **dict(meta or {}),
                "version": code_version(),
                "runs": [{"key": j.key, "params": j.params, "seed": j.scenario.seed} for j in jobs],
            },
        )
    except OSError as e:
        raise StoreError(f"{out / 'sweep.json'}: cannot write: {e.strerror or e}") from None
    todo = [j for k, j in unique.items() if not is_stored(out, k)]
    prog = SweepProgress(total=len(unique), already=len(unique) - len(todo))
    if on_progress:
        on_progress(prog)
    failed: List[str] = []
    if todo:
        engine = _ray_engine(ray) if ray else _pool_engine(workers or os.cpu_count() or 1)
        for result in engine(todo):
            if isinstance(result, JobError):
                failed.append(str(result))  # the others still run and are stored
                continue
            manifest, blobs = result
            store_run(out, manifest, blobs)
            prog.done += 1
            prog.keys.append(manifest["key"])
            if on_progress:
                on_progress(prog)
    if failed:
        raise SweepError(f"{len(failed)} of {len(todo)} runs failed (the others are stored):\n  " + "\n  ".join(failed))
    return [out / k for k in keys]


def plan_file(
    path: Union[str, pathlib.Path],
    settings: Sequence[Union[str, Tuple[str, Sequence[Any]]]] = (),
    seeds: Union[int, Sequence[int]] = 1,
    duration_s: Optional[float] = None,
    engine: str = "sim",
) -> Tuple[Scenario, List[Job], Dict[str, Any]]:
    """Plans a sweep of a scenario file from settings given CLI-style (``"key=v1,v2"``) or as
    (key, values) pairs; returns the base scenario, the jobs and the metadata for ``sweep.json``."""
    # The same reading and shape checks as a single run's (size, UTF-8, nesting).
    text, p = read_scenario(path)
    base = parse_toml(text, str(p))
    sc = validate(base, str(p))
    if duration_s is not None:
        if not duration_s > 0:
            raise SweepError(f"--duration: expected seconds > 0, got {duration_s}")
        base = set_path(base, "duration_s", duration_s)
    parsed = [parse_setting(s) if isinstance(s, str) else (s[0], list(s[1])) for s in settings]
    jobs = plan(base, parsed, seeds, str(p), engine)
    meta = {
        "name": sc.name,
        "engine": engine,
        "file": str(p),
        "grid": {k: v for k, v in parsed},
        "seeds": sorted({j.scenario.seed for j in jobs}),
    }
    return sc, jobs, meta
