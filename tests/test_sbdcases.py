"""Scoring of the shared-bottleneck detection cases (macroflow.falseshare.sbdcases), on worked
step functions whose right/wrong fractions and times are computed by hand."""

import math

import pytest

from macroflow.falseshare import runs as R
from macroflow.falseshare import sbdcases as S

EVENTS = [("sbd", 20.0, "no_share"), ("delay", 5.0, "share"), ("sbd", 40.0, "share"), ("sbd", 50.0, "inconclusive")]


def test_steps_start_inconclusive_and_keep_one_test():
    assert S.steps(EVENTS, "sbd") == [(0.0, "inconclusive"), (20.0, "no_share"), (40.0, "share"), (50.0, "inconclusive")]
    assert S.steps([], "delay") == [(0.0, "inconclusive")]


def test_score_by_hand():
    st = S.steps(EVENTS, "sbd")
    # Truth share over [10, 60): share 40-50 (10 s of 50), no share 20-40 (20 s); right first at 40.
    s = S.score(st, 10.0, 60.0, "share")
    assert s["right"] == pytest.approx(0.2) and s["wrong"] == pytest.approx(0.4)
    assert s["late_right"] == pytest.approx(10 / 25)  # [35, 60): share 40-50
    assert s["time_s"] == pytest.approx(30.0)
    # Truth no share: right 20-40 (0.4); wrong (share) 0.2; right at once when the phase starts there.
    s = S.score(st, 10.0, 60.0, "no_share")
    assert (s["right"], s["wrong"], s["time_s"]) == (pytest.approx(0.4), pytest.approx(0.2), 10.0)
    assert S.score(st, 25.0, 60.0, "no_share")["time_s"] == 0.0
    # Nothing to detect: any definite answer is wrong.
    s = S.score(st, 0.0, 60.0, "inconclusive")
    assert s["right"] == pytest.approx(30 / 60) and s["wrong"] == pytest.approx(30 / 60)
    assert s["time_s"] is None  # saying nothing takes no time
    # Never right: no time.
    assert S.score(S.steps([], "sbd"), 0.0, 10.0, "share")["time_s"] is None
    assert math.isnan(S.score(st, 5.0, 5.0, "share")["right"])


def test_an_answer_that_held_for_no_time_does_not_count():
    # A loss test flips twice at one instant: no share at 64.4 s is overridden at once.
    ev = [("symmetric_loss", 64.4, "no_share"), ("symmetric_loss", 64.4, "inconclusive"), ("symmetric_loss", 80.0, "no_share")]
    assert S.steps(ev, "symmetric_loss") == [(0.0, "inconclusive"), (64.4, "inconclusive"), (80.0, "no_share")]
    assert S.score(S.steps(ev, "symmetric_loss"), 40.5, 100.0, "no_share")["time_s"] == pytest.approx(39.5)


def test_every_case_file_matches_its_phases():
    for case, (_, phases) in R.SBD_CASES.items():
        duration, starts = S.case_flows(case)
        assert duration == 120.0 and len(starts) >= 2, case
        assert phases[0][0] == 0.0 and phases[-1][1] is None
        assert all(a[1] == b[0] for a, b in zip(phases, phases[1:])), case
