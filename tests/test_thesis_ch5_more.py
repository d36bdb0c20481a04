"""Seed 003 Figs. 5.14-5.31 reproduced (macroflow.thesis.ch5_more): every set's runs build and
validate, each set's analysis runs on real (shortened) runs and returns checks that name their
tolerance, and the FSE does what the checks rely on: equal rates whatever the RTTs, and goodputs in
the priority ratio under web-like background traffic."""

from __future__ import annotations

import dataclasses
import re

import pytest

from macroflow import thesis
from macroflow.metrics import jain
from macroflow.reproductions import check_status
from macroflow.scenario import SHIPPED, load, run, validate
from macroflow.thesis import ch5_more, core

SETS = {s.name: s for s in thesis.SETS if s.name in ("5.14", "5.20", "5.28", "5.31")}
#: How an expected text states its tolerance or the relation it checks.
TOLERANCE = re.compile(r"%|within|>=|<=|no margin|at least|\[")
#: Shortened durations for the analysis tests (the shipped files run 300 s, 60 s for Fig. 5.28).
SHORT = {"5.14": 10.0, "5.20": 10.0, "5.28": 20.0, "5.31": 20.0}


def test_the_sets_are_registered_with_their_figures():
    assert SETS["5.14"].figures == [f"5.{i}" for i in range(14, 20)]
    assert SETS["5.20"].figures == [f"5.{i}" for i in range(20, 28)]
    assert SETS["5.28"].figures == ["5.28", "5.29", "5.30"]
    assert SETS["5.31"].figures == ["5.31"]
    assert SETS["5.28"].seeds == 1 and all(SETS[n].seeds == 10 for n in ("5.14", "5.20", "5.31"))


@pytest.mark.parametrize("name", sorted(SETS))
def test_jobs_build_and_validate(name):
    s = SETS[name]
    jobs = s.jobs(core.base_scenario(s.base), 1)
    assert jobs and len({j.key for j in jobs}) == len(jobs)
    for j in jobs:
        validate(j.scenario.model_dump(mode="python", by_alias=True))
        assert j.scenario.seed == 1
        media = [f for f in j.scenario.flows if f.type == "media"]
        assert media and all(0 <= f.start_s < 1 for f in media) and all(f.packet_bytes == 1000 for f in media)
    # Two seeds: the same points again with other start times.
    assert len(s.jobs(core.base_scenario(s.base), 2)) == 2 * len(jobs)


def test_grid_sizes():
    assert len(SETS["5.14"].jobs(core.base_scenario(SETS["5.14"].base), 1)) == 2 * 3 * 4 * 2
    # Equal RTTs: 6 counts x 2 controllers; RTT ratios: 6 configurations x 4 ratios; 2 arms each.
    assert len(SETS["5.20"].jobs(core.base_scenario(SETS["5.20"].base), 1)) == (12 + 24) * 2


def test_rtts_follow_the_dissertations_ratio():
    got = ch5_more.rtts(5, 16, 0.1)
    assert [round(r / got[-1] * 3, 9) for r in got] == [48, 24, 12, 6, 3]
    assert ch5_more.rtts(2, 1, 0.1) == [0.1, 0.1]
    # The shipped file's access delays give exactly these RTTs.
    t = load(SHIPPED / "thesis_5_20_rtt_fairness.toml").topology
    assert [round(2 * (t.bottleneck_delay_s + 2 * a), 9) for a in t.access_delays_s] == [round(r, 9) for r in got]
    # And every job's access delays give the RTTs of its ratio.
    for j in SETS["5.20"].jobs(core.base_scenario(SETS["5.20"].base), 1):
        t = j.scenario.topology
        want = ch5_more.rtts(j.params["flows"], j.params["rtt_ratio"], 0.1)
        assert [2 * (t.bottleneck_delay_s + 2 * a) for a in t.access_delays_s] == pytest.approx(want, abs=1e-8)


def test_scenario_files_state_the_dissertations_settings():
    for name in ("thesis_5_14_queue_lengths", "thesis_5_28_app_limited", "thesis_5_31_background"):
        sc = load(SHIPPED / f"{name}.toml")
        t = sc.topology
        assert t.bottleneck_rate_bps == 10e6 and t.queue_pkts == 62, name
        rtts = [2 * (t.bottleneck_delay_s + 2 * a) for a in (t.access_delays_s or [0.001])]
        assert rtts[0] == pytest.approx(0.1), name
        assert all(g.kind == "conservative_active" for g in sc.groups)
    bg = load(SHIPPED / "thesis_5_31_background.toml")
    t = bg.topology
    assert [round(2 * (t.bottleneck_delay_s + 2 * a), 6) for a in t.access_delays_s] == [0.1, 0.08, 0.09, 0.1]
    assert sum(f.load_bps for f in bg.flows if f.type == "web") == pytest.approx(5e6)
    assert bg.duration_s == 300


def _job(name, **params):
    s = SETS[name]
    return next(j for j in s.jobs(core.base_scenario(s.base), 1) if all(j.params[k] == v for k, v in params.items()))


def _short(job, duration_s):
    return validate({**job.scenario.model_dump(mode="python", by_alias=True), "duration_s": duration_s})


def test_the_fse_equalises_rap_flows_whatever_their_rtts():
    """Fig. 5.22's claim at its extreme: RTTs of 100 and 6.25 ms. With the FSE the two sending rates
    are within 1 % of each other and the goodputs' index is 1.00 at two decimals (the goodputs differ
    by what each flow loses at the drop-tail queue); without it the short-RTT flow takes most of the link."""
    fse = run(_short(_job("5.20", controller="rap", flows=2, rtt_ratio=16, fse="conservative_active"), 60.0))
    rows = fse["media_flows"].to_pylist()
    a, b = [f["sent_bytes"] for f in rows]
    assert abs(a - b) <= 0.01 * max(a, b), (a, b)
    assert jain([f["goodput_bps"] for f in rows]) >= ch5_more.JAIN_FSE
    none = run(_short(_job("5.20", controller="rap", flows=2, rtt_ratio=16, fse="none"), 60.0))
    assert jain([f["goodput_bps"] for f in none["media_flows"].to_pylist()]) < 0.9


def test_goodput_ratio_follows_the_priority_under_web_traffic():
    """Fig. 5.31: priorities 1 and 0.2 under 50 % web-like load give a goodput ratio within 0.01 of 0.2."""
    r = run(_short(_job("5.31", priority2=0.2), 60.0))
    g1, g2 = [f["goodput_bps"] for f in r["media_flows"].to_pylist()]
    assert g2 / g1 == pytest.approx(0.2, abs=0.01)
    assert r["flows"].num_rows > 50  # the background is there: many short TCP flows


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Every set run with one seed and shortened durations."""
    root = tmp_path_factory.mktemp("thesis-ch5-more")
    out = {}
    for name, s in SETS.items():
        def jobs(base, seeds, s=s, d=SHORT[name]):
            return s.jobs({**base, "duration_s": d}, seeds)

        out[name] = core.run_set(dataclasses.replace(s, jobs=jobs), root, seeds=1, workers=1)
    return out


@pytest.mark.parametrize("name", sorted(SETS))
def test_analysis_draws_every_figure_and_states_tolerances(stored, name):
    r = stored[name]
    assert [f["fig"] for f in r["figures"]] == SETS[name].figures
    assert all(f["png"].startswith("data:image/png;base64,") for f in r["figures"])
    assert r["checks"]
    for c in r["checks"]:
        assert c["expected"] and c["ours"]
        if check_status(c) == "INFO":
            continue
        assert TOLERANCE.search(c["expected"]), c["expected"]
        if check_status(c) == "FAIL":
            assert c["note"], f"a FAIL without an explanation: {c['name']}"


def test_short_runs_already_show_the_fse_fairness(stored):
    """Even 10 s runs give the FSE's index >= 0.995 at every RTT ratio (the checks of Figs. 5.22-5.27)."""
    rows = [c for c in stored["5.20"]["checks"] if "different RTTs, with the FSE" in c["name"]]
    assert len(rows) == 6 and all(check_status(c) == "PASS" for c in rows)
