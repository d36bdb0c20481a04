"""Issue 14: the seeded outputs pinned. Every shipped scenario, and two long web runs (one with
time series, one without, so finished flows are freed at different times), are run and each
result table is reduced to its row count and a hash of its values; the digests must equal
tests/snapshots/seeded.json. A refactoring must leave them unchanged; a change of behaviour
updates the file in its own commit, saying why:

    MACROFLOW_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest tests/test_snapshot.py
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Dict, List

import pytest

from macroflow import scenario

ROOT = pathlib.Path(__file__).resolve().parent.parent
PINNED = pathlib.Path(__file__).with_name("snapshots") / "seeded.json"

WEB = """
name = "web-long"
seed = 3
duration_s = 400.0
sample_interval_s = {interval}
[topology]
kind = "dumbbell"
pairs = 2
bottleneck_rate_bps = 10e6
[[flows]]
type = "web"
pair = 0
load_bps = 6e6
[[flows]]
type = "tcp"
pair = 1
cc = "cubic"
group = "g"
priority = 2.0
[[flows]]
type = "tcp"
pair = 1
start_s = 5.0
size_bytes = 20_000_000
group = "g"
[[groups]]
name = "g"
kind = "ccc_handover"
"""


def cases() -> Dict[str, scenario.Scenario]:
    out = {p.name: scenario.load(p) for p in sorted((ROOT / "scenarios").glob("*.toml"))}
    out["web, 400 s, sampled"] = scenario.parse(WEB.format(interval=0.05))
    out["web, 400 s, no time series"] = scenario.parse(WEB.format(interval=0))
    return out


def digest(sc: scenario.Scenario) -> Dict[str, List]:
    """Per table: [rows, sha256 prefix of its values] (repr of each value: exact floats)."""
    d = {}
    for name, t in sorted(scenario.run(sc).items()):
        cols = {k: [repr(x) for x in v] for k, v in t.to_pydict().items()}
        d[name] = [t.num_rows, hashlib.sha256(json.dumps(cols, sort_keys=True).encode()).hexdigest()[:16]]
    return d


def test_seeded_outputs_match_the_pinned_snapshot() -> None:
    got = {name: digest(sc) for name, sc in cases().items()}
    if os.environ.get("MACROFLOW_UPDATE_SNAPSHOT"):
        PINNED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(PINNED.read_text())
    differ = [f"{case}: {table} {pinned.get(case, {}).get(table)} -> {v}"
              for case, tables in got.items() for table, v in tables.items()
              if pinned.get(case, {}).get(table) != v]
    missing = sorted(set(pinned) - set(got))
    assert not differ and not missing, "seeded outputs changed:\n" + "\n".join(differ + [f"{m}: gone" for m in missing])
