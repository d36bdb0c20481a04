"""The experiment workflow for notebooks, mirroring the CLI: :func:`run` (``macroflow run``),
:func:`sweep` (``macroflow sweep``), :func:`reproduce`, :func:`report` and :func:`load_results`.

>>> import macroflow
>>> path = macroflow.run("scenarios/coupled_vs_uncoupled_dumbbell.toml", duration_s=10)
>>> tables = macroflow.load_results(path)              # {"flows": pyarrow.Table, ...}
>>> runs = macroflow.sweep("scenarios/coupled_vs_uncoupled_dumbbell.toml",
...                        {"topology.queue_pkts": [40, 83]}, seeds=2, duration_s=10)
"""

from __future__ import annotations

import pathlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import pyarrow as pa

from macroflow import results as _results
from macroflow import sweeps as _sweep
from macroflow.scenario import Scenario, load, with_duration

__all__ = ["run", "sweep", "reproduce", "report", "load_results"]

PathLike = Union[str, pathlib.Path]


def run(scenario: Union[PathLike, Scenario], out: PathLike = "out/results", duration_s: Optional[float] = None,
        engine: str = "sim") -> pathlib.Path:
    """Runs a scenario (a file or a validated :class:`~macroflow.scenario.Scenario`) into the
    results store `out` unless it is stored already; returns the run's directory. `engine` is
    "sim" (the simulator) or "linux" (real kernel TCP in network namespaces, :mod:`macroflow.linux`)."""
    _results.check_engine(engine)
    sc = scenario if isinstance(scenario, Scenario) else load(scenario)
    if duration_s is not None:
        sc = with_duration(sc, duration_s, "duration_s")
    return _results.run_to_store(sc, out, engine=engine)


def sweep(
    scenario: PathLike,
    settings: Union[Mapping[str, Sequence[Any]], Sequence[str]] = (),
    seeds: Union[int, Sequence[int]] = 1,
    out: Optional[PathLike] = None,
    workers: Optional[int] = None,
    ray: Optional[str] = None,
    duration_s: Optional[float] = None,
    engine: str = "sim",
) -> List[pathlib.Path]:
    """Runs a scenario file over a grid: `settings` maps dotted paths to values
    (``{"topology.queue_pkts": [40, 83]}``) or is a list of CLI-style ``"key=v1,v2"`` strings.
    Stored runs are skipped. Returns each job's run directory (grid order, seeds innermost);
    the store (default ``out/sweeps/<scenario name>``) also gets ``sweep.json``."""
    pairs = [(k, list(v)) for k, v in settings.items()] if isinstance(settings, Mapping) else list(settings)
    sc, jobs, meta = _sweep.plan_file(scenario, pairs, seeds, duration_s, engine)
    store = pathlib.Path(out) if out is not None else pathlib.Path("out/sweeps") / sc.name
    return _sweep.sweep(jobs, store, workers=workers, ray=ray, meta=meta)


def reproduce(name: str, out: Optional[PathLike] = None, **kwargs: Any) -> pathlib.Path:
    """Runs a named reproduction (:data:`macroflow.reproductions.REPRODUCTIONS`) and returns the path
    of its HTML report; keywords as :func:`macroflow.reproductions.reproduce`."""
    from macroflow.reproductions import reproduce as _reproduce

    return _reproduce(name, out, **kwargs)


def report(store: PathLike, out: Optional[PathLike] = None) -> pathlib.Path:
    """Writes the self-contained HTML report of a results store; returns its path."""
    from macroflow.reports import write_report

    return write_report(store, out)


def load_results(path: PathLike) -> Dict[str, pa.Table]:
    """The tables of one stored run (a directory from :func:`run` or :func:`sweep`)."""
    return _results.load_results(path)
