"""The results store: each run's tables as Parquet under a directory keyed by a hash of the
scenario (with its seed and parameters) and the code version, with a manifest.

Layout of a store directory ``DIR``::

    DIR/<key>/manifest.json      key, engine (name; for linux: kernel, tools, delay line,
                                 warnings), scenario (as validated), params (the sweep's settings,
                                 dotted path -> value), seed, version, tables, rows, summary
                                 (macroflow.metrics.summarize), priorities (TCP flow id -> priority)
    DIR/<key>/<table>.parquet    one per table of macroflow.sim.TABLES
    DIR/sweep.json               written by a sweep: the base scenario, grid, seeds and run keys
    DIR/reproduction.json        written by a named reproduction: its checks, expected vs ours

A run is written to a temporary directory (``DIR/.partial-*``) and renamed into place when
complete, so a run killed at any moment leaves either nothing or a whole result, never half of one;
leftover partial directories are ignored, and removed by the next sweep when their writer is dead.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.parquet as pq

from macroflow._native import __version__
from macroflow.metrics import summarize
from macroflow.scenario import Scenario, TcpFlow, run

__all__ = [
    "code_version",
    "run_key",
    "compute_run",
    "store_run",
    "is_stored",
    "clean_partials",
    "run_to_store",
    "load_results",
    "list_runs",
    "current_runs",
    "write_json_atomic",
]


def _fingerprint() -> str:
    """A hash of the native library as loaded and of every module of the package: any rebuild of
    the engine or edit of the Python code that makes or checks runs changes it."""
    import macroflow._native as native

    h = hashlib.sha256()
    with open(str(native.__file__), "rb") as f:  # in chunks: the library is tens of MB
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


# Taken when the package is imported (right after the native library is loaded), not when first
# asked: a library rebuilt under a running session must not lend its hash to the old code.
_CODE_VERSION = f"{__version__}+{_fingerprint()}"


def code_version() -> str:
    """The package version and a fingerprint of the code that decides what a run stores (the
    native library and the package's modules, as imported). Results are keyed by it, so a rebuilt
    engine or changed analysis never reuses runs stored by older code of the same version."""
    return _CODE_VERSION


#: The engines a scenario runs on: the simulator (the default) and real Linux TCP in network
#: namespaces (:mod:`macroflow.linux`).
ENGINES = ("sim", "linux")


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")


def run_key(sc: Scenario, engine: str = "sim") -> str:
    """The hash that names a run: the validated scenario (parameters and seed), the code version,
    and the engine when it is not the simulator (so a simulator run keeps its key)."""
    check_engine(engine)
    body: Dict[str, Any] = {"scenario": sc.model_dump(mode="json"), "version": code_version()}
    if engine != "sim":
        body["engine"] = engine
    if engine == "linux":
        from macroflow import linux

        # netem's random loss is not the seed's: its runs are not the delay line's (which keep
        # the keys they had before netem was an option).
        if linux.delay_method(linux.capabilities(), linux.plan(sc)) == "netem":
            body["linux_delay"] = "netem"
    blob = json.dumps(body, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_engine(sc: Scenario, engine: str = "sim", progress: Optional[Callable[[float], None]] = None) -> Dict[str, pa.Table]:
    """`sc`'s tables from `engine`."""
    check_engine(engine)
    if engine == "linux":
        from macroflow import linux

        return linux.run(sc, progress=progress)
    return run(sc, progress=progress)


def _engine_facts(engine: str, tables: Mapping[str, pa.Table]) -> Dict[str, Any]:
    """What the manifest records of the engine: its name; for Linux, the kernel, the tools'
    versions, what the kernel lacks, the delay line's counters, set-up time and CPU use, and the
    run's warnings (a busy host, late samples, frames the delay line failed to carry)."""
    if engine == "sim":
        return {"name": "sim"}
    meta = tables["flows"].schema.metadata or {}
    return {"name": engine, **json.loads(meta.get(engine.encode(), b"{}"))}


def write_json_atomic(path: pathlib.Path, data: Any) -> None:
    """Writes JSON so that a reader (or a kill) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def _priorities(sc: Scenario) -> Dict[str, float]:
    """TCP flow id -> priority of the coupled TCP flows (the simulator numbers TCP flows 0, 1, ...
    in file order, separately from media and UDP flows)."""
    tcp = [f for f in sc.flows if isinstance(f, TcpFlow)]
    return {str(i): f.priority for i, f in enumerate(tcp) if f.group is not None and sc.group(f.group).couples}


def compute_run(
    sc: Scenario,
    params: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[float], None]] = None,
    engine: str = "sim",
) -> Tuple[Dict[str, Any], Dict[str, bytes]]:
    """Runs `sc` on `engine` and returns its manifest and its tables as Parquet bytes, ready for
    :func:`store_run`. This is what sweep workers (local processes or Ray tasks) execute, so that
    only the driver writes to the store and a worker needs no shared file system."""
    tables = run_engine(sc, engine, progress)
    prio = _priorities(sc)
    blobs = {}
    for name, table in tables.items():
        buf = pa.BufferOutputStream()
        pq.write_table(table, buf)
        blobs[name] = buf.getvalue().to_pybytes()
    manifest = {
        "key": run_key(sc, engine),
        "engine": _engine_facts(engine, tables),
        "scenario": sc.model_dump(mode="json"),
        "params": dict(params or {}),
        "seed": sc.seed,
        "priorities": prio,
        "summary": summarize(tables, {int(k): v for k, v in prio.items()}),
        "version": code_version(),
        "tables": sorted(tables),
        "rows": {name: t.num_rows for name, t in tables.items()},
        "sha256": {name: hashlib.sha256(blob).hexdigest() for name, blob in blobs.items()},
    }
    manifest["checksum"] = _manifest_checksum(manifest)
    return manifest, blobs


#: What every manifest holds (besides its own checksum).
MANIFEST_FIELDS = ("key", "scenario", "params", "seed", "priorities", "summary", "version", "tables", "rows", "sha256")


def _manifest_checksum(manifest: Mapping[str, Any]) -> str:
    """sha256 of the manifest's content without its own checksum: the summaries a report reads
    from it cannot be edited unnoticed (issue 13)."""
    body = {k: v for k, v in manifest.items() if k not in ("checksum", "path")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def damage(run_dir: Union[str, pathlib.Path]) -> Optional[str]:
    """Why the run in `run_dir` cannot be trusted (a message naming the file), or None when it is
    complete and intact: its manifest parses, has every field, matches its checksum and its
    directory's name, and every table file is there with the bytes it was stored with."""
    return _check_run(pathlib.Path(run_dir))[1]


def _check_run(d: pathlib.Path) -> Tuple[Dict[str, Any], Optional[str]]:
    """The run's manifest as read (empty when unreadable) and why the run cannot be trusted (None
    when intact): one read of the manifest and of each table for every caller."""
    m = d / "manifest.json"
    if not d.is_dir():
        return {}, f"{d}: not a directory"
    manifest, why = _read_manifest(m)
    if why is not None:
        return manifest, why
    missing = [f for f in MANIFEST_FIELDS + ("checksum",) if f not in manifest]
    if missing:
        return manifest, f"{m}: missing {', '.join(missing)} (damaged)"
    if manifest["checksum"] != _manifest_checksum(manifest):
        return manifest, f"{m}: checksum does not match its content (edited or damaged)"
    if manifest["key"] != d.name:
        return manifest, f"{m}: key {manifest['key']!r} is not its directory's name {d.name!r}"
    for name in manifest["tables"]:
        f = d / f"{name}.parquet"
        if not f.is_file() or f.is_symlink():
            return manifest, f"{f}: cannot read: not a regular file"
        try:
            digest = hashlib.sha256(f.read_bytes()).hexdigest()
        except OSError as e:
            return manifest, f"{f}: cannot read: {e.strerror or e}"
        if digest != manifest["sha256"].get(name):
            return manifest, f"{f}: its bytes are not the ones stored (replaced or damaged)"
    return manifest, None


#: The largest manifest read (real ones are a few kB).
MAX_MANIFEST_BYTES = 16 << 20


def _read_manifest(m: pathlib.Path) -> Tuple[Dict[str, Any], Optional[str]]:
    """A manifest as a dict, or why it cannot be read (not a regular file: a FIFO would hang the
    read; too large; not JSON, nested too deep; not an object)."""
    if not m.is_file() or m.is_symlink():
        return {}, f"{m}: cannot read: not a regular file"
    if m.stat().st_size > MAX_MANIFEST_BYTES:
        return {}, f"{m}: larger than {MAX_MANIFEST_BYTES:,} bytes; not a manifest"
    try:
        manifest = json.loads(m.read_text())
    except OSError as e:
        return {}, f"{m}: cannot read: {e.strerror or e}"
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return {}, f"{m}: not JSON: {str(e)[:200] or type(e).__name__}"
    if not isinstance(manifest, dict):
        return {}, f"{m}: not a manifest (a JSON object), got {type(manifest).__name__}"
    return manifest, None


def _older_build(run_dir: pathlib.Path, manifest: Dict[str, Any]) -> bool:
    """Whether `manifest` (read from `run_dir`) is a run stored by an older build that did not
    record checksums: it cannot be verified, but it is not damaged either; it is never a current
    run (its key holds the other code version), so reports count it among the other stored runs
    (as they did before)."""
    return ("checksum" not in manifest and "sha256" not in manifest and "key" in manifest
            and manifest.get("version") != code_version() and manifest["key"] == run_dir.name)


def is_stored(out: Union[str, pathlib.Path], key: str) -> bool:
    """Whether the run `key` is complete and intact in the store `out` (a damaged run is not, so
    running it again repairs it)."""
    d = pathlib.Path(out) / key
    return (d / "manifest.json").exists() and damage(d) is None


class StoreError(Exception):
    """The results store cannot be written: its path is a file, it is not writable, the disk is
    full. The message names the path and the reason."""


def store_run(out: Union[str, pathlib.Path], manifest: Dict[str, Any], blobs: Mapping[str, bytes]) -> pathlib.Path:
    """Writes one run into the store atomically (a temporary directory renamed into place; the
    manifest is written last, so a directory without one is never a result)."""
    try:
        return _store_run(pathlib.Path(out), manifest, blobs)
    except OSError as e:
        raise StoreError(f"{e.filename or out}: cannot store results: {e.strerror or e}") from None


def _store_run(out: pathlib.Path, manifest: Dict[str, Any], blobs: Mapping[str, bytes]) -> pathlib.Path:
    final = out / manifest["key"]
    if is_stored(out, manifest["key"]):
        return final
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "not a directory", str(out))
    out.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".partial-{os.getpid()}-", dir=out))
    try:
        for name, blob in blobs.items():
            (tmp / f"{name}.parquet").write_bytes(blob)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        # Check and move under the store's lock: two writers of the same run (two `macroflow
        # run`s of one scenario) each found it missing, and the second moved the first's intact
        # copy aside as damaged.
        with open(out / ".store.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if is_stored(out, manifest["key"]):
                shutil.rmtree(tmp, ignore_errors=True)  # another writer stored it (same key, same content)
                return final
            if final.exists() or final.is_symlink():
                # A damaged copy of this run (a file in its place, a table replaced): moved aside,
                # kept for inspection, and the run stored again.
                os.replace(final, out / f".damaged-{manifest['key']}-{os.getpid()}-{time.time_ns()}")
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def clean_partials(out: Union[str, pathlib.Path]) -> int:
    """Removes the temporary directories of writers that died (killed mid-write); returns how
    many. Those of live processes are left alone."""
    n = 0
    for d in pathlib.Path(out).glob(".partial-*"):
        try:
            pid = int(d.name.split("-")[1])
            os.kill(pid, 0)
            continue  # its writer is alive
        except (ValueError, IndexError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        n += 1
    return n


def run_to_store(
    sc: Scenario,
    out: Union[str, pathlib.Path],
    params: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[float], None]] = None,
    engine: str = "sim",
) -> pathlib.Path:
    """Runs `sc` on `engine` unless its result is already in `out`; returns the result directory.
    `params` (the sweep's settings that produced `sc`) are recorded in the manifest; `progress`
    is passed to the engine's run."""
    key = run_key(sc, engine)
    if is_stored(out, key):
        return pathlib.Path(out) / key
    p = pathlib.Path(out)
    if p.exists() and not p.is_dir():  # say so before the run, not after it
        raise StoreError(f"{p}: cannot store results: not a directory")
    return store_run(out, *compute_run(sc, params, progress, engine))


def load_results(path: Union[str, pathlib.Path]) -> Dict[str, pa.Table]:
    """The tables of one stored run (a directory holding ``manifest.json``)."""
    p = pathlib.Path(path)
    if not (p / "manifest.json").exists():
        raise FileNotFoundError(f"{p}: not a stored run (no manifest.json)")
    manifest, why = _check_run(p)
    if why is not None:
        raise StoreError(f"damaged run: {why}; run the scenario again to repair it")
    return {name: pq.read_table(p / f"{name}.parquet") for name in manifest["tables"]}


def list_runs(store: Union[str, pathlib.Path]) -> List[Dict[str, Any]]:
    """The manifests of every complete run in a store directory, each with ``path`` added, in a
    stable order (by params, then seed, then key)."""
    store = pathlib.Path(store)
    if not store.is_dir():
        raise FileNotFoundError(f"{store}: no such results directory")
    runs = []
    for m in store.glob("*/manifest.json"):
        if m.parent.name.startswith("."):
            continue
        d, why = _check_run(m.parent)
        if why is not None and not _older_build(m.parent, d):
            continue  # damaged runs: see damaged_runs(); a sweep or run repairs them
        d = dict(d, path=str(m.parent))
        runs.append(d)
    runs.sort(key=lambda d: (json.dumps(d.get("params", {}), sort_keys=True), d.get("seed", 0), d["key"]))
    return runs


def damaged_runs(store: Union[str, pathlib.Path]) -> List[str]:
    """Why each run directory of the store that cannot be trusted is damaged (one message each):
    reports show these instead of skipping them silently."""
    store = pathlib.Path(store)
    out = []
    for d in sorted(store.iterdir()) if store.is_dir() else []:
        if not re.fullmatch(r"[0-9a-f]{16}", d.name):
            continue  # not a run: sweep.json, a report, a writer's .partial-* directory
        manifest, why = _check_run(d)
        if why is not None and not _older_build(d, manifest):
            out.append(why)
    return out


def current_runs(store: Union[str, pathlib.Path]) -> Tuple[List[Dict[str, Any]], int, int]:
    """The stored runs of the store's latest sweep (the keys its ``sweep.json`` lists), how many
    other complete runs the store holds (older sweeps, older builds: a rebuilt engine stores new
    runs beside the old ones) and how many of the latest sweep's runs are missing (a sweep killed
    or failed part-way). Without a ``sweep.json``: every run, 0, 0."""
    runs = list_runs(store)
    sweep = pathlib.Path(store) / "sweep.json"
    if not sweep.exists():
        return runs, 0, 0
    wanted = {r["key"] for r in json.loads(sweep.read_text()).get("runs", [])}
    current = [r for r in runs if r["key"] in wanted]
    return current, len(runs) - len(current), len(wanted) - len(current)


def jsonable(x: Any) -> Any:
    """`x` with every dict key a string, tuples as lists, numpy scalars as Python numbers and NaN
    and infinities as None: what ``reproduction.json`` files hold (JSON has neither)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if getattr(x, "shape", None) == () and hasattr(x, "item"):
        x = x.item()  # a numpy scalar
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
