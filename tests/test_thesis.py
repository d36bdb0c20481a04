"""The thesis reproductions' machinery (macroflow.thesis.core): names, running a figure set into a
store with reuse and resumption, the index and chapter pages, and the CLI's handling of the names.
Each chapter's sets are tested in tests/test_thesis_ch*.py."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from macroflow import thesis
from macroflow.__main__ import app
from macroflow.reproductions import Check, reproduce
from macroflow.results import list_runs
from macroflow.thesis import core


def _tiny_set(calls):
    """A set of two points (FSE and none) on the shipped FSE example, shortened to 5 s."""

    def jobs(base, seeds):
        out = []
        for kind in ("passive", "none"):
            for s in range(1, seeds + 1):
                data = dict(base, duration_s=5.0, groups=[dict(base["groups"][0], kind=kind)])
                out.append(core.job({"kind": kind}, data, s))
        return out

    def analyse(runs):
        calls.append(len(runs))
        fig, ax = core.new_figure()
        core.draw_arms(ax, {k: {1: [r["summary"]["media_goodput_bps"] for r in core.runs_by(runs, kind=k)]}
                            for k in ("passive", "none")}, "x", "goodput")
        g = {k: core.mean([r["summary"]["media_goodput_bps"] for r in core.runs_by(runs, kind=k)]) for k in ("passive", "none")}
        return core.Analysis(figures=[("99.1", fig, "goodput")],
                             checks=[Check("goodput > 0", "> 0 (tolerance: none)", f"{g['passive']:.0f}", g["passive"] > 0)],
                             notes=["a note"])

    return core.FigureSet(name="99.1", chapter=99, captions={"99.1": "A caption", "99.2": "Another"},
                          claim="a claim (l. 1)", setting="a setting", base="fse_media_flows.toml",
                          jobs=jobs, analyse=analyse, seeds=2)


@pytest.fixture
def tiny(monkeypatch):
    calls = []
    monkeypatch.setattr(core, "SETS", [])
    core.register(_tiny_set(calls))
    return calls


def test_every_registered_set_is_named_and_builds_valid_jobs():
    assert thesis.SETS, "the chapter modules register their sets"
    names = thesis.names()
    assert names[0] == "thesis"
    for s in thesis.SETS:
        assert f"thesis-ch{s.chapter}" in names
        for f in s.figures:
            assert thesis.set_of(f"thesis-fig-{f}") == [s]
        jobs = s.jobs(core.base_scenario(s.base), 1)
        assert jobs, f"set {s.name} has no runs"
        assert len({j.key for j in jobs}) == len(jobs), f"set {s.name} has two identical runs"
    # In the dissertation's order, each figure in one set only.
    order = [core._fig_key(s.name) for s in thesis.SETS]
    assert [(s.chapter, k) for s, k in zip(thesis.SETS, order)] == sorted((s.chapter, k) for s, k in zip(thesis.SETS, order))
    figs = [f for s in thesis.SETS for f in s.figures]
    assert len(figs) == len(set(figs))


def test_unknown_names_are_refused_naming_the_known_ones(tiny):
    with pytest.raises(KeyError, match="thesis-fig-<X.Y> \\(99.1, 99.2\\)"):
        core.set_of("thesis-fig-5.99")
    with pytest.raises(KeyError, match="thesis-ch<N> \\(99\\)"):
        core.set_of("thesis-ch4")
    assert core.set_of("thesis-fig-99.2")[0].name == "99.1"
    with pytest.raises(ValueError, match="registered twice"):
        core.register(_tiny_set([]))


def test_a_set_runs_reuses_and_resumes(tiny, tmp_path):
    page = core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    assert page == tmp_path / "chapter-99.html"
    res = json.loads((tmp_path / "fig-99.1" / "result.json").read_text())
    assert res["cost"]["computed_runs"] == 2 and len(res["runs"]) == 2
    assert res["checks"][0]["set"] == "99.1" and res["checks"][0]["passed"]
    html = page.read_text()
    for text in ("A caption", "a claim (l. 1)", "a setting", "a note", "data:image/png;base64,", "1 of 1 checks pass"):
        assert text in html
    index = (tmp_path / "index.html").read_text()
    assert "chapter-99.html#fig-99.1" in index
    assert json.loads((tmp_path / "reproduction.json").read_text())["checks"][0]["set"] == "99.1"
    # Again: nothing computed, the analysis not run again.
    core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    assert tiny == [2]
    assert json.loads((tmp_path / "fig-99.1" / "result.json").read_text())["cost"]["computed_runs"] == 2
    # A killed reproduction lost one run: only that one is computed again, and analysed again
    # (on Linux a run computed again is not the same run).
    run = list_runs(tmp_path / "fig-99.1")[0]
    shutil.rmtree(run["path"])
    core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    assert json.loads((tmp_path / "fig-99.1" / "result.json").read_text())["cost"]["computed_runs"] == 3
    assert len(list_runs(tmp_path / "fig-99.1")) == 2
    assert tiny == [2, 2]
    # More seeds: the stored runs are reused, the new ones computed, and the analysis sees all
    # four; the cost is of these runs (the two new ones), not carried over from other runs.
    core.reproduce_thesis("thesis", out=tmp_path, seeds=2, workers=1)
    assert json.loads((tmp_path / "fig-99.1" / "result.json").read_text())["cost"]["computed_runs"] == 2
    assert tiny == [2, 2, 4]
    with pytest.raises(ValueError, match="seeds"):
        core.reproduce_thesis("thesis", out=tmp_path, seeds=0)


def test_the_reproduce_command_takes_thesis_names(tiny, tmp_path):
    r = CliRunner().invoke(app, ["reproduce", "thesis-fig-7.77", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "thesis-fig-X.Y" in r.output
    r = CliRunner().invoke(app, ["reproduce", "thesis-ch99", "--out", str(tmp_path), "--seeds", "1", "--workers", "1", "-q"])
    assert r.exit_code == 0, r.output
    assert "goodput > 0" in r.output and "chapter-99.html" in r.output
    with pytest.raises(ValueError, match="no --duration"):
        reproduce("thesis-ch99", tmp_path, duration_s=5.0)
    r = CliRunner().invoke(app, ["list"])
    assert "thesis-fig-99.1: Figs. 99.1, 99.2 (chapter 99)" in r.output


def test_a_changed_analysis_is_run_again_on_the_stored_runs(tiny, tmp_path, monkeypatch):
    """The runs are keyed by the engine and the package's modules; the analyses live in
    macroflow/thesis/, so an edit there must redo result.json (it was reused stale) without
    computing the runs again."""
    core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    monkeypatch.setattr(core, "_ANALYSIS_VERSION", core._ANALYSIS_VERSION + "-edited")
    core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    assert tiny == [2, 2]
    res = json.loads((tmp_path / "fig-99.1" / "result.json").read_text())
    assert res["cost"]["computed_runs"] == 2 and res["version"].endswith("-edited")


def test_two_points_that_are_the_same_run_are_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(core, "SETS", [])
    bad = _tiny_set([])

    def jobs(base, seeds):
        data = dict(base, duration_s=5.0)
        return [core.job({"kind": "a"}, data, 1), core.job({"kind": "b"}, data, 1)]

    core.register(core.FigureSet(**{**bad.__dict__, "jobs": jobs}))
    with pytest.raises(ValueError, match="are the same run"):
        core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, seeds=1, workers=1)
    assert not (tmp_path / "fig-99.1").exists(), "nothing ran"


def test_a_linux_counterpart_is_linked_with_its_tally_once_stored(monkeypatch, tmp_path):
    monkeypatch.setattr(core, "SETS", [])
    core.register(core.FigureSet(**{**_tiny_set([]).__dict__, "linux": "thesis-9.3-linux"}))
    root = tmp_path / "thesis"
    page = core.reproduce_thesis("thesis-fig-99.1", out=root, seeds=1, workers=1)
    assert "sudo macroflow reproduce thesis-9.3-linux" in page.read_text()
    (tmp_path / "thesis-9.3-linux").mkdir()
    (tmp_path / "thesis-9.3-linux" / "reproduction.json").write_text(json.dumps(
        {"seeds": 3, "duration_s": 60.0, "checks": [{"name": "a", "expected": "", "ours": "", "passed": True},
                                                     {"name": "b", "expected": "", "ours": "", "passed": False}]}))
    core.write_pages(root)
    html = page.read_text()
    assert '../thesis-9.3-linux/report.html' in html and "1 of 2 checks pass" in html



def _why_no_linux() -> str:
    """Why the Linux engine cannot run here ("" when it can), as tests/test_linux.py asks."""
    import os

    from macroflow import linux

    if os.geteuid() != 0:
        return "not root: the linux engine needs CAP_NET_ADMIN and CAP_SYS_ADMIN"
    return "; ".join(linux.capabilities().missing)


@pytest.mark.skipif(bool(_why_no_linux()), reason=f"linux engine unavailable: {_why_no_linux()}")
def test_a_set_with_a_testbed_counterpart_runs_on_linux_beside_the_simulator(monkeypatch, tmp_path):
    """`--linux`: the same jobs on the Linux engine into fig-X.Y/linux/, the same analysis, a block
    of its own on the page and "Linux: " checks in reproduction.json; sets without a counterpart
    are refused by name."""
    calls = []

    def jobs(base, seeds):
        return [core.job({"flows": 2}, dict(base, duration_s=4.0, flows=base["flows"][:2]), s) for s in range(1, seeds + 1)]

    def analyse(runs):
        calls.append([r["engine"] if "engine" in r else "sim" for r in runs])
        g = core.mean([r["summary"]["tcp_goodput_bps"] for r in runs])
        return core.Analysis(checks=[Check("goodput", "> 1 Mbit/s (tolerance: none)", f"{g:.3g}", g > 1e6)])

    monkeypatch.setattr(core, "SETS", [])
    core.register(core.FigureSet(name="98.1", chapter=98, captions={"98.1": "c"}, claim="x", setting="y",
                                 base="linux_reno_dumbbell.toml", jobs=jobs, analyse=analyse, seeds=1, on_linux=True))
    page = core.reproduce_thesis("thesis-fig-98.1", out=tmp_path, linux=True)
    assert (tmp_path / "fig-98.1" / "linux" / "result.json").exists()
    html = page.read_text()
    assert "The same runs on real Linux" in html and "Analysed by older code" not in html
    names = [c["name"] for c in json.loads((tmp_path / "reproduction.json").read_text())["checks"]]
    assert names == ["goodput", "Linux: goodput"]
    assert len(calls) == 2
    # An edited analysis, run without --linux: the Linux block is shown as stale and not counted.
    monkeypatch.setattr(core, "_ANALYSIS_VERSION", core._ANALYSIS_VERSION + "-edited")
    core.reproduce_thesis("thesis-fig-98.1", out=tmp_path)
    assert "Analysed by older code" in page.read_text()
    names = [c["name"] for c in json.loads((tmp_path / "reproduction.json").read_text())["checks"]]
    assert names == ["goodput"]
    monkeypatch.setattr(core, "SETS", [])
    core.register(_tiny_set([]))
    with pytest.raises(ValueError, match="no.*Linux testbed counterpart|none of its figures"):
        core.reproduce_thesis("thesis-fig-99.1", out=tmp_path, linux=True)
