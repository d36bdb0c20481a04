"""The false-sharing reproduction (issue 20) end to end on a cut-down plan: one point per
topology, one seed, 40-s runs. Checks that every part runs, the analysis finds the detection
events and the split, and the page and its figures are written; the full plan's figures are in
the closing note of issue 20 and on the page it writes."""

import json

import pytest

from macroflow.falseshare import report as F
from macroflow.falseshare import runs as R


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(R, "ALPHAS", (0.5,))
    monkeypatch.setattr(R, "BW_RATIOS", (4,))
    monkeypatch.setattr(R, "DELAY_RATIOS", (1, 7))
    monkeypatch.setattr(R, "CONFIDENCES", (0.5, 0.99))
    monkeypatch.setattr(R, "RESPONSE_ALPHAS", (0.5,))
    monkeypatch.setattr(R, "SHARED_HOPS", (1, 2))
    monkeypatch.setattr(R, "HOP_RATIOS", (7,))


def test_the_cut_down_reproduction_runs_analyses_and_writes_its_page(tiny, tmp_path):
    page = F.reproduce_false_sharing(tmp_path, seeds=1, duration_s=40.0, workers=2)
    data = json.loads((tmp_path / "reproduction.json").read_text())
    names = [c["name"] for c in data["checks"]]
    assert any("Eq. 1" in n for n in names) and any("Fig. 12" in n for n in names)
    err = next(c for c in data["checks"] if c["name"].startswith("Every measured run"))
    assert err["passed"], err
    # The out-of-order test finds the DiffServ pair's false sharing, and the response splits it.
    det = data["tables"]["detection"]["a"]["0.5"]["out_of_order"]
    assert det["accuracy"] == 1.0 and 2.0 < det["time_s"] < 20.0, det
    resp = data["tables"]["response"]
    assert resp and resp[0]["detect_s"] is not None, resp
    # On identical paths (Fig. 1(d), ratio 1) the out-of-order test never says no share.
    assert data["tables"]["detection"]["d"]["1"]["out_of_order"]["accuracy"] == 1.0
    text = page.read_text()
    assert [r["hops"] for r in data["tables"]["hops"]] == [1, 2]
    # The SBD cases: every case scored for every test, SBD's checks and its error check on the page.
    rows = data["tables"]["sbd_cases"]
    assert {(r["case"], r["test"]) for r in rows} == {(c, t) for c in R.SBD_CASES for t in R.TESTS}
    for case in ("shared", "disjoint", "moving", "uncongested"):
        assert any(c["name"] == f"SBD case {case}" for c in data["checks"]), case
    sbd_err = next(c for c in data["checks"] if c["name"] == "The SBD cases' detectors without an error")
    assert sbd_err["passed"], sbd_err
    shared = next(r for r in rows if (r["case"], r["test"]) == ("shared", "sbd"))
    assert shared["late_right"] > 0.5 and shared["wrong"] < 0.1, shared
    for fig in ("Fig. 2", "Fig. 5", "Figs. 6-8", "Figs. 9 and 10", "Fig. 11", "Fig. 12", "SBD cases", "SBD case moving"):
        assert f"<h2>{fig}" in text, fig
    assert text.count("data:image/png;base64,") >= 6
    # A second call computes nothing: every run is stored.
    F.reproduce_false_sharing(tmp_path, seeds=1, duration_s=40.0, workers=2)
    assert json.loads((tmp_path / "reproduction.json").read_text())["computed_runs"] == 0


def test_bad_plans_are_refused(tmp_path):
    with pytest.raises(ValueError, match="seeds must be >= 1"):
        F.reproduce_false_sharing(tmp_path, seeds=0)
    with pytest.raises(ValueError, match="duration_s >= 30"):
        F.reproduce_false_sharing(tmp_path, duration_s=10.0)
    assert not any(tmp_path.iterdir())
