"""Named reproductions and the main job: checks are computed from stored runs, written beside the
source's expectations, and a second run reuses the store."""

import json
from html import escape
import subprocess
import sys

import pytest

from macroflow.reproductions import REPRODUCTIONS, reproduce


def test_unknown_reproduction_is_a_clear_error(tmp_path):
    with pytest.raises(KeyError, match="no reproduction 'nope'; known: coupled-vs-uncoupled"):
        reproduce("nope", tmp_path)
    r = subprocess.run([sys.executable, "-m", "macroflow", "reproduce", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "known: coupled-vs-uncoupled" in r.stderr


def test_coupled_vs_uncoupled_writes_checks_and_report(tmp_path):
    report = reproduce("coupled-vs-uncoupled", tmp_path, seeds=2, duration_s=20.0, workers=2)
    assert report == tmp_path / "report.html" and report.exists()
    rep = json.loads((tmp_path / "reproduction.json").read_text())
    assert rep["seeds"] == 2 and rep["duration_s"] == 20.0
    assert [p["name"] for p in rep["parts"]] == ["flows", "priority"]
    checks = rep["checks"]
    # RTT, loss, goodput and fairness for each number of flows, then each priority ratio.
    assert len(checks) == 4 * 5 + 5
    for c in checks:
        assert set(c) == {"name", "expected", "ours", "passed", "note"} and isinstance(c["passed"], bool)
    # The priority split is the mechanism itself: it must hold even on short runs.
    assert all(c["passed"] for c in checks if c["name"].startswith("priority"))
    n_runs = len(list(tmp_path.glob("*/*/manifest.json")))
    assert n_runs == 5 * 2 * 2 + 5 * 2
    html = report.read_text()
    assert escape(rep["title"]) in html and "PASS" in html
    # A second call reuses every stored run and gives the same checks.
    before = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*/manifest.json")}
    reproduce("coupled-vs-uncoupled", tmp_path, seeds=2, duration_s=20.0, workers=2)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*/manifest.json")} == before
    assert json.loads((tmp_path / "reproduction.json").read_text())["checks"] == checks


def test_every_reproduction_plans_valid_scenarios():
    from macroflow.firehose import PARTS

    for name, rep in REPRODUCTIONS.items():
        if rep.flow_parts:  # flow-level: named parts of macroflow.firehose, no scenarios
            assert rep.parts is None and set(rep.flow_parts) <= set(PARTS), name
            continue
        parts = rep.parts(1, 1.0)
        assert parts, name
        for p in parts:
            assert p.jobs and len({j.key for j in p.jobs}) == len(p.jobs), (name, p.name)


def test_main_job_leaves_the_report(tmp_path):
    r = subprocess.run([sys.executable, "-m", "macroflow"], cwd=tmp_path, check=True, capture_output=True, text=True)
    assert "S_CR = 9.33, TLO = 0" in r.stdout  # the worked examples still come first
    assert "checks pass" in r.stdout
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Coupled versus uncoupled" in html
