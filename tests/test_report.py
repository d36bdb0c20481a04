"""The HTML report and its figures: self-contained, deterministic, escaped, complete."""

import base64
import json
import re

import pytest

from macroflow.plots import cdf, metric_vs_param, time_series
from macroflow.reports import write_report
from macroflow.results import list_runs, load_results, run_to_store, write_json_atomic
from macroflow.scenario import parse

SCENARIO = """
name = "report <b>&amp; test"
seed = 1
duration_s = 6.0
sample_interval_s = 0.1
[topology]
kind = "dumbbell"
pairs = 2
[[groups]]
name = "g"
kind = "ccc"
[[flows]]
type = "tcp"
pair = 0
group = "g"
[[flows]]
type = "tcp"
pair = 0
group = "g"
priority = 0.5
[[flows]]
type = "media"
pair = 1
"""

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    base = parse(SCENARIO)
    for q in (20, 83):
        for seed in (1, 2):
            sc = base.model_copy(update={"seed": seed, "topology": base.topology.model_copy(update={"queue_pkts": q})})
            run_to_store(sc, d, params={"topology.queue_pkts": q})
    return d


def _images(page):
    return re.findall(r'src="data:image/png;base64,([^"]+)"', page)


def test_report_is_self_contained_complete_and_escaped(store):
    page = write_report(store).read_text()
    imgs = _images(page)
    # 6 metrics against the swept queue, 2 CDFs, one time series per point.
    assert len(imgs) == 6 + 2 + 2
    for b in imgs:
        assert base64.b64decode(b).startswith(PNG)
    lower = page.lower()
    assert "http://" not in lower and "https://" not in lower and "<script" not in lower
    assert "report &lt;b&gt;&amp;amp; test" in page and "<b>&amp; test" not in page
    assert "Summary (mean" in page and "topology.queue_pkts" in page


def test_report_is_deterministic(store, tmp_path):
    a = write_report(store, tmp_path / "a.html").read_bytes()
    b = write_report(store, tmp_path / "b.html").read_bytes()
    assert a == b


def test_reproduction_checks_are_shown_with_pass_and_fail(store, tmp_path):
    import shutil

    root = tmp_path / "rep"
    shutil.copytree(store, root / "part")
    write_json_atomic(root / "reproduction.json", {
        "name": "x", "title": "A <reproduction>", "source": "seed 003, Fig. 9.9", "description": "d",
        "seeds": 2, "duration_s": 6.0, "parts": [{"name": "part", "title": "Part one", "dir": "part"}],
        "checks": [
            {"name": "good", "expected": ">= 1", "ours": "2", "passed": True, "note": ""},
            {"name": "bad", "expected": "< 1", "ours": "2", "passed": False, "note": "why"},
        ],
        "labels": {"20": "short queue"},
    })
    page = write_report(root).read_text()
    assert "A &lt;reproduction&gt;" in page and "1 of 2 checks pass" in page
    assert page.count(">PASS<") == 1 and page.count(">FAIL<") == 1
    assert "Part one" in page and "short queue" in page


def test_an_empty_store_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no stored runs"):
        write_report(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such results directory"):
        write_report(tmp_path / "missing")


def test_figures_have_data(store):
    runs = list_runs(store)
    t = load_results(runs[0]["path"])
    fig = time_series(t, "x")
    axes = fig.get_axes()
    assert [a.get_ylabel() for a in axes] == ["rate (Mbit/s)", "cwnd (packets)", "queue (packets)"]
    assert all(a.get_lines() for a in axes)
    # Rate panel: two TCP flows and the media flow.
    assert len(axes[0].get_lines()) == 3
    num = metric_vs_param(runs, "topology.queue_pkts", "mean_queue_pkts")
    assert num.get_axes()[0].get_xlabel() == "topology.queue_pkts"
    cat_runs = [dict(r, params={"kind": "a" if r["params"]["topology.queue_pkts"] == 20 else "b"}) for r in runs]
    cat = metric_vs_param(cat_runs, "kind", "loss_ratio")
    assert [t.get_text() for t in cat.get_axes()[0].get_xticklabels()] == ["a", "b"]
    c = cdf({"x": [1.0, 2.0, 3.0], "empty": []}, "v (ms)")
    assert len(c.get_axes()[0].get_lines()) == 1


def test_cli_report(store, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "macroflow", "report", str(store), "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and out.exists(), r.stderr
    r = subprocess.run([sys.executable, "-m", "macroflow", "report", str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 2 and "no such results directory" in r.stderr
    assert json.loads((next(store.glob("*/manifest.json"))).read_text())["params"]
