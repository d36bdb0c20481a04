"""Seed 001's long runs and their analysis (macroflow.weakconv.runs, .report): the set-up against
the paper's text, the measurements on series whose answer is known, and a whole (short) reproduction
that writes its page, resumes without recomputing, and refuses what it cannot honour."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from macroflow.scenario import validate
from macroflow.weakconv import report as W
from macroflow.weakconv import runs as R


# --- the set-up ----------------------------------------------------------------------------------

def test_the_full_plan_is_the_papers_set_up():
    runs = R.experiments(R.PLANS["full"])
    names = [r.name for r in runs]
    assert len(names) == len(set(names)) == 2 + 6 + 6 + 12 + 2 + 3 * 4 + 1 + 3
    by = {r.name: r for r in runs}
    for r in runs:
        validate(r.scenario, r.name)
        if r.kind in ("random_drop", "sharing"):
            assert r.scenario["duration_s"] == 12 * 3600 and r.scenario["sample_interval_s"] == 1.0
    # Section 3.1: P_reno = 1.1e-4, P_cubic = 3.4e-4 on the data packets only, RTT 100 ms on an
    # uncongested path.
    for cc, p in (("newreno", 1.1e-4), ("cubic", 3.4e-4)):
        fwd, back = by[f"rd-{cc}"].scenario["topology"]["links"]
        assert (fwd["from"], fwd["to"], back["from"], back["to"]) == ("snd", "rcv", "rcv", "snd")
        assert fwd["queue"]["kind"] == "random_drop" and fwd["queue"]["p"] == p and "queue" not in back
        assert not fwd["duplex"] and not back["duplex"] and fwd["rate_bps"] >= 100 * 10e6
        assert fwd["delay_s"] + back["delay_s"] == pytest.approx(0.1)
        assert by[f"rd-{cc}"].scenario["flows"][0]["cc"] == cc
    # Section 3.2: N flows over N x 10 Mbit/s, one-BDP drop-tail buffer (1500-byte packets).
    for n, q100, q10 in ((2, 167, 17), (3, 250, 25), (10, 833, 83)):
        for cc in R.CCS:
            s = by[f"share-{cc}-{n}-100ms-droptail"].scenario
            t = s["topology"]
            assert t["pairs"] == n and t["bottleneck_rate_bps"] == n * 10e6 and t["queue_pkts"] == q100
            assert [f["cc"] for f in s["flows"]] == [cc] * n and not s["groups"]
            assert by[f"share-{cc}-{n}-10ms-droptail"].scenario["topology"]["queue_pkts"] == q10
            t10 = by[f"share-{cc}-{n}-10ms-droptail"].scenario["topology"]
            # The mean base RTT is the paper's: the jitter's mean (J/2 each way) taken off the bottleneck.
            assert 2 * (t10["bottleneck_delay_s"] + 0.002) + t10["access_jitter_s"] == pytest.approx(0.01)
            c = by[f"share-{cc}-{n}-100ms-ccc"].scenario
            assert c["groups"] == [{"name": "all", "kind": R.COUPLER}] and all(f["group"] == "all" for f in c["flows"])
            d = by[f"share-{cc}-{n}-100ms-drr"].scenario["topology"]
            assert d["queue"]["kind"] == "drr" and d["queue"]["limit_pkts"] == q100 and "queue_pkts" not in d
            # The hosts' jitter: one bottleneck service time of a 1500-byte packet, in every arm.
            for arm, rtt in (("droptail", 100), ("droptail", 10), ("ccc", 100), ("drr", 100)):
                jit = by[f"share-{cc}-{n}-{rtt}ms-{arm}"].scenario["topology"]["access_jitter_s"]
                assert jit == pytest.approx(1500 * 8 / (n * 10e6))
    assert by["share-newreno-2-10ms-droptail-nojitter"].scenario["topology"]["access_jitter_s"] == 0.0
    assert by["share-newreno-2-10ms-droptail-jitter50us"].scenario["topology"]["access_jitter_s"] == 50e-6
    # Section 4: 9 long flows over 100 Mbit/s and 12-MB flows one after another on the 10th pair.
    f = by["fct-droptail-s1"].scenario
    shorts = [x for x in f["flows"] if "size_bytes" in x]
    assert len(f["flows"]) - len(shorts) == 9 and len(shorts) == R.PLANS["full"].fct_reps
    assert {x["size_bytes"] for x in shorts} == {12_000_000} and {x["pair"] for x in shorts} == {9}
    starts = [x["start_s"] for x in shorts]
    slots = R.FCT_FIRST_S + R.FCT_SPACING_S * np.arange(len(shorts))
    assert np.all((np.asarray(starts) >= slots) & (np.asarray(starts) < slots + 1.0))
    assert f["duration_s"] == slots[-1] + R.FCT_SPACING_S + R.FCT_MARGIN_S
    assert f["sample_interval_s"] == 0  # 500 flows: the completion times are in the flows table
    assert f["topology"]["access_jitter_s"] == pytest.approx(1500 * 8 / 100e6)
    assert 2 * (f["topology"]["bottleneck_delay_s"] + 0.002) + f["topology"]["access_jitter_s"] == pytest.approx(0.1)
    base = validate(R._base("weakconv_sharing.toml"), "sharing").topology  # the file is the 2-flow 100-ms row
    assert (base.bottleneck_delay_s, base.access_jitter_s) == (
        by["share-newreno-2-100ms-droptail"].scenario["topology"]["bottleneck_delay_s"], R.host_jitter_s(20e6))
    assert {x["cc"] for x in f["flows"]} == {"cubic"} and {x["cc"] for x in by["fct-droptail-s1-newreno"].scenario["flows"]} == {"newreno"}
    # Each seed starts its flows at other times too (not only other jitter draws).
    s2 = by["fct-droptail-s2"].scenario["flows"]
    assert all(a["start_s"] != b["start_s"] for a, b in zip(f["flows"], s2))


def test_bad_arms_and_plans_are_refused():
    with pytest.raises(ValueError, match="arm"):
        R.sharing_run("newreno", 2, 0.1, "red", 1.0)
    with pytest.raises(ValueError, match="arm"):
        R.fct_run("fq", 3, 1)
    with pytest.raises(ValueError, match="reps"):
        R.fct_run("ccc", 0, 1)
    with pytest.raises(ValueError, match="hours"):
        R.experiments(R.Plan(hours=0.05))
    with pytest.raises(ValueError, match="drop-tail"):
        R.sharing_run("newreno", 2, 0.1, "drr", 1.0, jitter_s=0.0)
    with pytest.raises(ValueError, match="jitter_s"):
        R.sharing_run("newreno", 2, 0.1, "droptail", 1.0, jitter_s=-1.0)


def test_the_hosts_jitter_unlocks_the_run_that_locked_hardest():
    """Two Reno flows at 10 ms over 20 Mbit/s and a 17-packet drop-tail: in a deterministic
    simulation they lock into a cycle in which one flow takes about twice the other's rate, hour
    after hour (issue 19's first full run: 6.7 / 13.3 Mbit/s over 12 hours); with the hosts
    sending with a jitter of one bottleneck service time they share (Floyd and Jacobson's phase
    effects, and their remedy). Half an hour each (goodput over the whole run)."""
    from macroflow.scenario import run as run_scenario

    def shares(jitter: bool) -> list:
        r = R.sharing_run("newreno", 2, 0.01, "droptail", 0.5, jitter_s=None if jitter else 0.0)
        f = run_scenario(validate(r.scenario, r.name))["flows"].to_pydict()
        return sorted(f["goodput_bps"])

    locked, free = shares(False), shares(True)
    assert locked[1] > 1.5 * locked[0], locked
    assert free[1] < 1.05 * free[0], free
    assert sum(free) > 0.9 * sum(locked)  # sharing costs no throughput


# --- the measurements ----------------------------------------------------------------------------

def _run(per_s_bytes: np.ndarray, start_s: float = 1.0) -> dict:
    t = start_s + np.arange(per_s_bytes.shape[-1] + 1, dtype=float)
    cum = np.concatenate([np.zeros((per_s_bytes.shape[0], 1), dtype=np.int64), np.cumsum(per_s_bytes, axis=1)], axis=1)
    return {"name": "synthetic", "t_s": t, "cum_bytes": cum}


def test_rates_are_per_second_ip_level_after_the_warm_up():
    run = _run(np.full((1, 400), 1448 * 100, dtype=np.int64))  # 100 segments a second
    x = W.rates_mbps(run, 0)
    assert len(x) == 400 + 1 - R.WARMUP_S
    assert np.allclose(x, 100 * 1500 * 8 / 1e6)  # 1.2 Mbit/s of 1500-byte packets
    with pytest.raises(ValueError, match="warm-up"):
        W.rates_mbps(_run(np.ones((1, 50), dtype=np.int64)), 0)
    bad = _run(np.ones((1, 300), dtype=np.int64))
    bad["t_s"] = bad["t_s"] * 0.5
    with pytest.raises(ValueError, match="one second"):
        W.rates_mbps(bad, 0, warmup_s=0)


def test_interval_std_of_known_series():
    # Alternating 0, 2 per second: 1-s std 1, 2-s blocks are all 1 (std 0), 4-s blocks too.
    x = np.tile([0.0, 2.0], 600)
    assert W.interval_std(x, 1) == pytest.approx(np.std(x, ddof=1))
    assert W.interval_std(x, 4) == pytest.approx(0.0)
    # Independent noise: the std of L-second means falls as 1/sqrt(L).
    rng = np.random.default_rng(3)
    y = rng.normal(10, 2, 360000)
    assert W.interval_std(y, 100) == pytest.approx(2 / 10, rel=0.1)
    assert math.isnan(W.interval_std(y[:250], 100))  # fewer than 3 blocks


def test_half_interval_interpolates_on_log_axes_and_says_when_never():
    stds = [1.0, 1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1]  # crosses 0.5 between 30 s and 60 s
    got = W.half_interval_s(stds)
    f = (math.log(0.5) - math.log(0.6)) / (math.log(0.4) - math.log(0.6))
    assert got == pytest.approx(math.exp(math.log(30) + f * (math.log(60) - math.log(30))))
    assert W.half_interval_s([1.0, 0.9, 0.9, 0.8, 0.8, 0.7, 0.7, 0.6]) is None
    assert W.half_interval_s([1.0, 0.9, float("nan"), 0.1, 0.1, 0.1, 0.1, 0.1]) is None


def test_theory_loss_ratios_are_eq5_and_eq6():
    # Table 2's "theory" column: 3.8e-5 (Reno) and 2.9e-4 (CUBIC) at 100 ms need the mean RTT
    # with the queue; at exactly 100 ms and 10 Mbit/s Eq. 5 with 1500-byte packets gives 1.08e-4.
    assert W.theory_p("newreno", 10e6, 0.1) == pytest.approx(0.75 * (12000 / (10e6 * 0.1)) ** 2)
    w = 10e6 * 0.1 / 12000
    assert W.theory_p("cubic", 10e6, 0.1) == pytest.approx(0.1 / (w / 1.17) ** (4 / 3))


def test_bootstrap_interval_contains_the_quantile_and_is_deterministic():
    x = np.random.default_rng(1).exponential(10, 2000)
    lo, hi = W.bootstrap_ci(x, 95)
    assert lo < np.percentile(x, 95) < hi
    assert W.bootstrap_ci(x, 95) == (lo, hi)


# --- a whole reproduction, short -----------------------------------------------------------------

TINY = R.Plan(hours=0.1, fct_seeds=1, fct_reps=20)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("weakconv")
    old = R.PLANS["quick"]
    R.PLANS["quick"] = TINY
    try:
        page = W.reproduce_weak_convergence(root, quick=True, workers=2)
    finally:
        R.PLANS["quick"] = old
    return page


def test_a_short_reproduction_writes_its_page_and_checks(tiny: pathlib.Path):
    data = json.loads((tiny.parent / "reproduction.json").read_text())
    assert tiny.exists() and tiny.parent.name == "quick"
    text = tiny.read_text()
    for fig in ("Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5", "Fig. 7", "Fig. 8", "Table 1", "data:image/png;base64,"):
        assert fig in text, fig
    names = [c["name"] for c in data["checks"]]
    assert sum(n.startswith("Table 1, ") for n in names) == 8 * 4
    assert sum(n.startswith("Table 1 numeric row") for n in names) == 4
    # Table 1's numeric row is the model's and is printed exactly.
    assert all(c["passed"] for c in data["checks"] if c["name"].startswith("Table 1 numeric row"))
    # Every FAIL and INFO row says why, and a reference to a section's notes finds some there.
    import re

    for c in data["checks"]:
        if not c["passed"]:
            assert c["note"], c
            m = re.match(r"see the notes? under (.+)$", c["note"])
            assert m is None or data["notes"].get(m.group(1)), (c["name"], c["note"], sorted(data["notes"]))
    # The cost of every run: a fresh process each, so the peak memory is the run's own.
    costs = data["tables"]["costs"]
    assert len(costs) == len(R.experiments(TINY)) and all(c["max_rss_mb"] > 10 and c["wall_s"] > 0 for c in costs)
    assert data["computed_runs"] == len(costs)


def test_a_second_reproduction_reuses_every_run(tiny: pathlib.Path):
    old = R.PLANS["quick"]
    R.PLANS["quick"] = TINY
    try:
        W.reproduce_weak_convergence(tiny.parent.parent, quick=True, workers=2)
    finally:
        R.PLANS["quick"] = old
    assert json.loads((tiny.parent / "reproduction.json").read_text())["computed_runs"] == 0


def test_a_damaged_run_is_computed_again(tiny: pathlib.Path):
    run = R.experiments(TINY)[0]
    (tiny.parent / "runs" / f"{run.name}.npz").write_bytes(b"not an npz")
    assert R.stored(run, tiny.parent) is None
    got = R.run_all([run], tiny.parent, workers=1)
    assert R.stored(run, tiny.parent) is not None and got[run.name]["cum_bytes"].shape[0] == 1


def test_a_failing_run_is_named_and_the_others_are_stored(tmp_path: pathlib.Path):
    good = R.sharing_run("newreno", 2, 0.1, "droptail", 0.1)
    bad = R.sharing_run("newreno", 2, 0.1, "droptail", 0.1, seed=2)
    bad.scenario["flows"][0]["cc"] = "no-such-cc"
    bad = R.Run("broken", bad.kind, bad.params, bad.scenario)
    with pytest.raises(R.RunError, match="(?s)1 of 2 runs failed.*broken: ScenarioError"):
        R.run_all([good, bad], tmp_path, workers=2)
    assert R.stored(good, tmp_path) is not None and R.stored(bad, tmp_path) is None


def test_warm_up_counts_are_the_long_runs_first_seconds(tmp_path: pathlib.Path):
    # The simulator is deterministic: the warm-up twin's counters are the long run's at 100 s,
    # so the loss ratio after the warm-up leaves slow start's burst of losses out.
    run = R.sharing_run("cubic", 2, 0.1, "droptail", 0.1)
    w = R.warmup_counts(run, tmp_path)
    assert all(x > 0 for x in w["data_pkts_sent"]) and sum(w["retransmits"]) > 0
    assert R.warmup_counts(run, tmp_path) == w  # cached
    got = R.run_all([run], tmp_path, workers=1)[run.name]
    assert all(a > b for a, b in zip(got["flows"]["data_pkts_sent"], w["data_pkts_sent"]))
    # Exactly the long run's first 100 s: the bytes delivered at 100 s are the twin's at its end.
    at = int(np.searchsorted(got["t_s"], R.WARMUP_S))
    assert got["t_s"][at] == R.WARMUP_S
    assert list(got["cum_bytes"][:, at]) == w["delivered_bytes"]


def test_cycle_power_tells_a_locked_run_from_a_random_walk():
    t = np.arange(43000)
    assert W.cycle_power(10 + 3 * np.sin(2 * np.pi * t / 4.62)) > 0.9  # a 4.62-s cycle, as one locked run
    assert W.cycle_power(np.random.default_rng(2).normal(10, 3, t.size)) < 0.01
    # A mean-reverting walk with a 100-s memory (a flow returning to its share): its power is spread
    # over the many frequencies below 1/100 s.
    e = np.random.default_rng(1).normal(0, 1, t.size)
    x = np.empty(t.size)
    x[0] = 10.0
    for i in range(1, t.size):
        x[i] = x[i - 1] + 0.01 * (10.0 - x[i - 1]) + 0.3 * e[i]
    assert W.cycle_power(x) < W.LOCKED_POWER
    # A slow walk (a 3000-s memory) puts its power at periods above 600 s, which are left out.
    y = np.empty(t.size)
    y[0] = 10.0
    for i in range(1, t.size):
        y[i] = y[i - 1] + (10.0 - y[i - 1]) / 3000 + 0.1 * e[i]
    assert W.cycle_power(y + np.random.default_rng(4).normal(0, 2, t.size)) < W.LOCKED_POWER


def test_completion_times_leave_out_overlapping_and_unfinished_repetitions():
    flows = [{"type": "tcp", "pair": i} for i in range(9)] + [{"type": "tcp", "pair": 9, "size_bytes": 12_000_000}] * 4
    fct = [None] * 9 + [10.0, 50.0, 12.0, None]
    start = [0.0] * 9 + [100.0, 145.0, 190.0, 235.0]
    # The second runs past the third's start (145 + 50 > 190): the third shared the link, left out;
    # the fourth never completed: censored.
    a = W.Analysis({"x": {"flows": {"flow": list(range(13)), "fct_s": fct, "start_s": start}, "scenario": {"flows": flows}}},
                   R.PLANS["quick"])
    g = W._fcts(a, ["x"])
    assert list(g["fct_s"]) == [10.0, 50.0] and g["overlaps"] == 1 and g["censored"] == 1


def test_the_cli_refuses_options_the_reproduction_cannot_honour(tmp_path: pathlib.Path):
    from macroflow.reproductions import reproduce

    for kw in ({"seeds": 3}, {"duration_s": 10.0}, {"ray": "local"}, {"linux": True}):
        with pytest.raises(ValueError, match="weak-convergence"):
            reproduce("weak-convergence", tmp_path, **kw)
    assert not any(tmp_path.iterdir())
