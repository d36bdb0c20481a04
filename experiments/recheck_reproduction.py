"""Re-evaluates a reproduction's checks and report from the runs already in its store, whatever code
version stored them: for when a check's wording or explanation changed after hours of real-time runs
(the Linux engine's), which `macroflow reproduce` would otherwise run again under the new code
version. The runs are used as stored; reproduction.json records which code versions made them.

Usage: .venv/bin/python experiments/recheck_reproduction.py NAME [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import pathlib
from dataclasses import asdict
from typing import Any, Dict, List, Tuple

from macroflow.reports import write_report
from macroflow.reproductions import REPRODUCTIONS
from macroflow.results import code_version, list_runs, write_json_atomic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    a = ap.parse_args()
    rep = REPRODUCTIONS[a.name]
    root = a.out or pathlib.Path("out/reproductions") / a.name
    old = json.loads((root / "reproduction.json").read_text())
    parts = rep.parts(old["seeds"], old["duration_s"])
    stored: Dict[str, List[Dict[str, Any]]] = {}
    versions = set()
    for part in parts:
        wanted = {(json.dumps(j.params, sort_keys=True), j.scenario.seed) for j in part.jobs}
        seen: Dict[Tuple[str, int], Dict[str, Any]] = {}
        for r in list_runs(root / part.name):
            k = (json.dumps(r["params"], sort_keys=True), r["seed"])
            if k not in wanted:
                continue
            if k in seen:
                raise SystemExit(f"{root / part.name}: two stored runs of {k} (code versions {seen[k]['version']} and "
                                 f"{r['version']}); remove one")
            seen[k] = r
            versions.add(r["version"])
        missing = wanted - set(seen)
        if missing:
            raise SystemExit(f"{root / part.name}: {len(missing)} of {len(wanted)} runs missing; run the reproduction")
        stored[part.name] = list(seen.values())
    checks = rep.checks(stored)
    write_json_atomic(root / "reproduction.json", {
        **old,
        "title": rep.title, "source": rep.source, "description": rep.description,
        "checks": [asdict(c) for c in checks], "labels": rep.labels,
        **({"figures": rep.figures} if rep.figures else {}),
        "parts": [{"name": p.name, "title": p.title, "dir": p.name, **({"figures": p.figures} if p.figures else {})} for p in parts],
        "rechecked": {"by": code_version(), "runs_stored_by": sorted(versions)},
    })
    print(write_report(root))


if __name__ == "__main__":
    main()
