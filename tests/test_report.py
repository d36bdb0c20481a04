"""The HTML report and its figures: self-contained, deterministic, escaped, complete."""

import base64
import json
import re

import pytest

from macroflow.plots import cdf, metric_by_arm, metric_vs_param, share_vs_param, time_series
from macroflow.reports import write_report
from macroflow.results import list_runs, load_results, run_to_store, write_json_atomic
from macroflow.scenario import parse

SCENARIO = """
name = "report-test"
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
    # A store path with markup in it: the report shows it, escaped. (Scenario names are slugs.)
    d = tmp_path_factory.mktemp("store") / "a <b>&amp; dir"
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
    assert "a &lt;b&gt;&amp;amp; dir" in page and "<b>&amp; dir" not in page
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
            {"name": "aside", "expected": "the source's words", "ours": "3", "passed": False, "note": "our reading", "info": True},
        ],
        "labels": {"20": "short queue"},
    })
    page = write_report(root).read_text()
    assert "A &lt;reproduction&gt;" in page and "1 of 2 checks pass (1 information row, not counted)" in page
    assert page.count(">PASS<") == 1 and page.count(">FAIL<") == 1 and page.count(">INFO<") == 1
    # The note sits beside its status in the same row.
    assert re.search(r"<td class=\"fail\">FAIL</td><td class=\"muted\">why</td>", page)
    assert re.search(r"<td class=\"info\">INFO</td><td class=\"muted\">our reading</td>", page)
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


LABELS = {"none": "uncoupled", "ccc_handover": "ctrlTCP", "one_flow": "one flow"}


def _arm_runs(**extra):
    """Manifest-like runs of an arms experiment: two arms at 2, 4 and 6 flows and one flow alone,
    two seeds each (the goodput grows with N uncoupled and stays flat coupled)."""
    runs = []
    for seed in (1, 2):
        runs.append({"params": {"flows": 1, "coupling": "one_flow"}, "seed": seed,
                     "summary": {"tcp_goodput_bps": 4e6 + seed * 1e5, "jain_tcp": 1.0, **extra}})
        for n in (6, 2, 4):  # stored in no particular order
            runs.append({"params": {"flows": n, "coupling": "none"}, "seed": seed,
                         "summary": {"tcp_goodput_bps": (4 + n / 2) * 1e6 + seed * 1e5, "jain_tcp": 0.95, **extra}})
            runs.append({"params": {"flows": n, "coupling": "ccc_handover"}, "seed": seed,
                         "summary": {"tcp_goodput_bps": 4e6 - seed * 1e5, "jain_tcp": 0.99, **extra}})
    return runs


def test_metric_by_arm_puts_the_swept_parameter_on_x_and_one_line_per_arm():
    fig = metric_by_arm(_arm_runs(), "flows", "coupling", "tcp_goodput_bps", ["none", "ccc_handover"],
                        reference="one_flow", labels=LABELS, xlabel="number of flows")
    ax = fig.get_axes()[0]
    assert ax.get_xlabel() == "number of flows" and ax.get_ylabel() == "TCP goodput, sum (Mbit/s)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["uncoupled", "ctrlTCP", "one flow"]
    unc, cpl, one = ax.get_lines()
    # x is the number of flows, in numeric order; y the mean over seeds in Mbit/s.
    assert list(unc.get_xdata()) == [2, 4, 6] and list(cpl.get_xdata()) == [2, 4, 6]
    assert list(unc.get_ydata()) == pytest.approx([5.15, 6.15, 7.15])
    assert list(cpl.get_ydata()) == pytest.approx([3.85, 3.85, 3.85])
    # One flow does not depend on N: a horizontal line across the axis at its mean.
    assert list(one.get_ydata()) == pytest.approx([4.15, 4.15]) and list(one.get_xdata()) == [0, 1]
    assert one.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "6"]
    # Min-max bands over seeds: one per arm and the reference's.
    assert len(ax.collections) == 2 and len(ax.patches) == 1
    assert "mean over 2 seeds" in ax.get_title()
    # The legend is outside the axes, so it never covers data.
    assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1


def test_share_vs_param_draws_measured_and_ideal_against_the_ratio():
    fig = share_vs_param({1: [0.5, 0.52], 3: [0.76, 0.74], 2: [0.66, 0.67]}, {r: r / (r + 1) for r in (1, 2, 3)},
                         "priority ratio", label="flow 1, measured", ideal_label="ideal r/(r+1)")
    ax = fig.get_axes()[0]
    assert ax.get_xlabel() == "priority ratio"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["flow 1, measured", "ideal r/(r+1)"]
    measured, ideal = ax.get_lines()[0], ax.get_lines()[-1]
    assert list(measured.get_xdata()) == [1, 2, 3] and list(measured.get_ydata()) == pytest.approx([0.51, 0.665, 0.75])
    assert list(ideal.get_ydata()) == pytest.approx([0.5, 2 / 3, 0.75])


def test_arm_figures_follow_the_metrics_present(tmp_path):
    from macroflow.reports import _spec_figures

    spec = {"kind": "arms", "x": "flows", "xlabel": "number of flows", "arm": "coupling", "arms": ["none", "ccc_handover"],
            "reference": "one_flow", "metrics": ["tcp_goodput_bps", "jain_tcp", "max_burst_pkts"], "no_reference": ["jain_tcp"]}
    without = [p for p in _spec_figures(_arm_runs(), [spec], LABELS) if p.startswith("<figure")]
    assert len(without) == 2  # no run has max_burst_pkts: no empty figure
    with_burst = _spec_figures(_arm_runs(max_burst_pkts=12.0), [spec], LABELS)
    figs = [p for p in with_burst if p.startswith("<figure")]
    assert len(figs) == 3 and "largest burst, any TCP flow (packets) against the number of flows" in figs[2]
    assert "one flow as the dashed horizontal reference" in figs[0] and "one flow not drawn" in figs[1]


@pytest.fixture(scope="module")
def arms_store(tmp_path_factory):
    """A small coupled-vs-uncoupled store: 2 and 4 flows in both arms and one flow alone, 2 seeds, 3 s."""
    from macroflow.reproductions import _dumbbell_scenario, _one_flow_scenario
    from macroflow.scenario import validate

    root = tmp_path_factory.mktemp("arms")
    for seed in (1, 2):
        run_to_store(validate(_one_flow_scenario(seed, 3.0)), root / "flows", params={"flows": 1, "coupling": "one_flow"})
        for n in (2, 4):
            for c in ("none", "ccc_handover"):
                run_to_store(validate(_dumbbell_scenario(n, c, [1.0] * n, seed, 3.0)), root / "flows", params={"flows": n, "coupling": c})
        for r in (1, 3):
            run_to_store(validate(_dumbbell_scenario(2, "ccc_handover", [float(r), 1.0], seed, 3.0)), root / "priority",
                         params={"priority_ratio": r})
    write_json_atomic(root / "reproduction.json", {
        "name": "cvu", "title": "cvu", "source": "s", "description": "d", "seeds": 2, "duration_s": 3.0,
        "parts": [
            {"name": "flows", "title": "Flows", "dir": "flows", "figures": [
                {"kind": "arms", "x": "flows", "xlabel": "number of flows", "arm": "coupling", "arms": ["none", "ccc_handover"],
                 "reference": "one_flow", "metrics": ["mean_rtt_s", "tcp_goodput_bps", "jain_tcp", "max_burst_pkts"],
                 "no_reference": ["jain_tcp"]}]},
            {"name": "priority", "title": "Priority", "dir": "priority", "figures": [
                {"kind": "share", "x": "priority_ratio", "xlabel": "priority ratio", "flow": 0,
                 "ideal": [[1, 0.5], [3, 0.75]], "label": "flow 1", "ideal_label": "ideal"}]},
        ],
        "checks": [{"name": "c", "expected": "e", "ours": "o", "passed": True, "note": ""}],
        "labels": LABELS,
    })
    return root


def test_reproduction_figures_are_drawn_by_arm_in_arm_order(arms_store, tmp_path):
    page = write_report(arms_store, tmp_path / "a.html").read_text()
    has_burst = any("max_burst_pkts" in r["summary"] for r in list_runs(arms_store / "flows"))
    captions = re.findall(r'<figcaption class="muted">([^<]*)</figcaption>', page)
    arm_figs = [c for c in captions if "against the number of flows" in c]
    assert len(arm_figs) == 3 + has_burst
    assert all("one line per arm (uncoupled, ctrlTCP)" in c for c in arm_figs)
    # No figure puts the arm on the x axis any more.
    assert not any("against coupling" in c for c in captions)
    assert sum("share of the aggregate TCP goodput against the priority ratio" in c for c in captions) == 1
    # Points (summary rows, lines, time series) read uncoupled, ctrlTCP, one flow; each by N.
    series = [c.split(", seed")[0] for c in captions if c.endswith("rate, cwnd and queue over time") and "coupling" in c]
    assert series == ["coupling=uncoupled, flows=2", "coupling=uncoupled, flows=4", "coupling=ctrlTCP, flows=2",
                      "coupling=ctrlTCP, flows=4", "coupling=one flow, flows=1"]
    # Self-contained and deterministic.
    for b in _images(page):
        assert base64.b64decode(b).startswith(PNG)
    assert write_report(arms_store, tmp_path / "b.html").read_text() == page


def test_report_shows_the_latest_sweep_and_counts_the_other_runs(tmp_path, monkeypatch):
    # A rebuilt engine (or another sweep) stores new runs beside the old ones in the same directory;
    # the report draws the latest sweep's runs (sweep.json) and says how many others it left out.
    import macroflow.results as results

    base = parse(SCENARIO).model_copy(update={"duration_s": 2.0})
    scs = [base.model_copy(update={"seed": s}) for s in (1, 2)]
    for sc in scs:
        run_to_store(sc, tmp_path)
    rebuilt = results.code_version() + "-rebuilt"
    monkeypatch.setattr(results, "code_version", lambda: rebuilt)
    new = [run_to_store(sc, tmp_path).name for sc in scs]
    write_json_atomic(tmp_path / "sweep.json", {"runs": [{"key": k} for k in new + ["0" * 16]]})
    assert len(list_runs(tmp_path)) == 4
    current, others, missing = results.current_runs(tmp_path)
    assert (sorted(r["key"] for r in current), others, missing) == (sorted(new), 2, 1)
    assert all(r["version"] == rebuilt for r in current)
    page = write_report(tmp_path, tmp_path / "r.html").read_text()
    assert "2 runs," in page and "2 other stored run(s)" in page and "1 of its runs are not stored" in page
