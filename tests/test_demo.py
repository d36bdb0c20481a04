"""The main job's worked examples reproduce the draft's tables and Fig. 9.2's loss reaction
(the main job as a whole is run by tests/test_reproduce.py)."""

import pytest

from macroflow.demo import appendix_c_walkthrough, one_loss


def _table(step):
    return [(r.flow, r.priority, round(r.fse_rate_mbps, 2), round(r.desired_rate_mbps, 2)) for r in step.rows]


def test_appendix_c_tables_match_the_draft():
    steps = appendix_c_walkthrough()
    # (rows as (flow, P, FSE_R, DR), S_CR, TLO) exactly as printed in RFC 8699 (draft) App. C.1.
    expected = [
        ([(1, 1.0, 1.0, 1.0)], 1.0, 0.0),
        ([(1, 1.0, 10.0, 10.0)], 10.0, 0.0),
        ([(1, 1.0, 10.0, 10.0), (2, 0.5, 1.0, 1.0)], 11.0, 0.0),
        ([(1, 1.0, 6.0, 8.0), (2, 0.5, 1.0, 1.0)], 9.0, 0.0),
        ([(1, 1.0, 6.0, 8.0), (2, 0.5, 3.33, 3.33)], 10.0, 0.0),
        ([(1, 1.0, 2.0, 2.0), (2, 0.5, 3.33, 3.33)], 11.0, 5.33),
        ([(1, 1.0, 2.0, 2.0), (2, 0.5, 9.33, 9.33)], 12.0, 0.0),
        ([(2, 0.5, 9.33, 9.33)], 9.33, 0.0),
    ]
    assert len(steps) == len(expected)
    for step, (rows, s_cr, tlo) in zip(steps, expected):
        assert _table(step) == rows, step.title
        assert step.s_cr_mbps == pytest.approx(s_cr, abs=0.006), step.title
        assert step.tlo_mbps == pytest.approx(tlo, abs=0.006), step.title


def test_one_loss_halves_only_under_ctrltcp():
    assert one_loss("ccc").kept == pytest.approx(0.5)
    assert one_loss("efcm").kept == pytest.approx(0.75)
    assert one_loss(None).kept == pytest.approx(0.75)
    assert one_loss("etcp").kept == pytest.approx(0.5)
