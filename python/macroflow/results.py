"""The results store: each run's tables as Parquet under a directory keyed by a hash of the
scenario (with its seed and parameters) and the code version, with a manifest.

A run is written to a temporary directory and renamed into place when complete, so a run killed at
any moment leaves either nothing or a whole result, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import tempfile
from typing import Dict, Union

import pyarrow as pa
import pyarrow.parquet as pq

from macroflow._native import __version__
from macroflow.scenario import Scenario, run

__all__ = ["run_key", "run_to_store", "load_results"]


def run_key(sc: Scenario) -> str:
    """The hash that names a run: the validated scenario (parameters and seed) and the code version."""
    blob = json.dumps({"scenario": sc.model_dump(mode="json"), "version": __version__}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_to_store(sc: Scenario, out: Union[str, pathlib.Path]) -> pathlib.Path:
    """Runs `sc` unless its result is already in `out`; returns the result directory."""
    out = pathlib.Path(out)
    final = out / run_key(sc)
    if (final / "manifest.json").exists():
        return final
    out.mkdir(parents=True, exist_ok=True)
    tables = run(sc)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".partial-", dir=out))
    try:
        for name, table in tables.items():
            pq.write_table(table, tmp / f"{name}.parquet")
        manifest = {
            "key": final.name,
            "scenario": sc.model_dump(mode="json"),
            "version": __version__,
            "tables": sorted(tables),
            "rows": {name: t.num_rows for name, t in tables.items()},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def load_results(path: Union[str, pathlib.Path]) -> Dict[str, pa.Table]:
    """The tables of one stored run."""
    p = pathlib.Path(path)
    manifest = json.loads((p / "manifest.json").read_text())
    return {name: pq.read_table(p / f"{name}.parquet") for name in manifest["tables"]}
