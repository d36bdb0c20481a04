"""Seed 003 chapters 7 and 9 reproduced (macroflow.thesis.ch7, ch9): every set's runs build and
validate, each set's analysis runs on real runs (one seed, some shortened) and returns checks that
name their tolerance, and the couplers do what the checks rely on: the dissertation's ctrlTCP
without ack-clocking bursts a joiner's share and loses packets where Algorithm 4 does not,
ctrlTCP halves the aggregate once where EFCM does not, priorities split the window, the two VMs'
aggregates are equal, and the receiver's delayed ACKs are what lengthens a small window's RTT."""

from __future__ import annotations

import dataclasses
import math

import pytest

from macroflow import thesis
from macroflow.metrics import jain
from macroflow.reproductions import _dumbbell_scenario, check_status
from macroflow.scenario import SHIPPED, load, run, validate
from macroflow.thesis import ch7, ch9, core

NAMES = ("7.1", "7.2", "9.2", "9.3", "9.5", "9.6", "9.9", "9.13")
SETS = {s.name: s for s in thesis.SETS if s.name in NAMES}
#: Shortened durations for the analysis tests where the full ones are not needed (9.9: 100 s).
SHORT = {"9.9": 20.0}


def _jobs(name, seeds=1):
    s = SETS[name]
    return s.jobs(core.base_scenario(s.base), seeds)


def _job(name, **params):
    return next(j for j in _jobs(name) if all(j.params.get(k) == v for k, v in params.items()))


def test_the_sets_are_registered_with_their_figures():
    assert set(SETS) == set(NAMES)
    assert SETS["7.2"].figures == ["7.2", "9.7", "9.8"] and SETS["7.2"].chapter == 7
    assert core.set_of("thesis-fig-9.8") == [SETS["7.2"]]
    assert SETS["9.9"].figures == ["9.9", "9.10", "9.11", "9.12"]
    assert SETS["9.13"].figures == ["9.13", "3.1"]
    assert core.set_of("thesis-fig-3.1") == [SETS["9.13"]] and core.set_of("thesis-fig-9.7") == [SETS["7.2"]]
    assert all(SETS[n].seeds == 1 for n in ("7.1", "9.3", "9.6"))
    assert all(SETS[n].seeds == 10 for n in ("7.2", "9.2", "9.5", "9.9", "9.13"))


@pytest.mark.parametrize("name", NAMES)
def test_jobs_build_and_validate(name):
    jobs = _jobs(name)
    assert jobs and len({j.key for j in jobs}) == len(jobs), "two jobs with the same scenario"
    for j in jobs:
        validate(j.scenario.model_dump(mode="python", by_alias=True))
        assert j.scenario.seed == 1
    assert len({j.key for j in _jobs(name, 2)}) > len(jobs)


def test_grid_sizes():
    assert len(_jobs("7.1")) == 4 * 2  # four arms, each also stopped before the join
    # capacities x (4 arms with an ACK per segment + 3 with delayed ACKs), plus the literal 25 Mbit flow per capacity
    assert len(_jobs("7.2")) == 10 * (4 + 3) + 10
    assert len(_jobs("9.2")) == 5 * 2
    assert len(_jobs("9.5")) == 3 * 6
    assert len(_jobs("9.6")) == 2  # the two receivers
    # delayed ACKs: 6 x 2 arms + 4 ratios (1:1 is the 2-connection ctrlTCP point); an ACK per segment:
    # ctrlTCP 1-6, one connection alone, 4 ratios
    assert len(_jobs("9.9")) == 6 * 2 + 4 + 6 + 1 + 4
    assert len(_jobs("9.13")) == 4 * 2


def test_arms_and_receivers_are_what_the_text_ran():
    """The dissertation's ctrlTCP without ack-clocking is ccc with an unbounded burst limit; the ns-2
    sets' receivers acknowledge every segment, the testbed's (9.9, 9.13) delay ACKs."""
    burst = _job("7.1", coupling=ch7.BURST, part="run").scenario.groups[0]
    assert (burst.kind, burst.max_burst_pkts) == ("ccc", 1e6)
    plain = _job("7.1", coupling=ch7.WITHOUT, part="run").scenario.groups[0]
    assert (plain.kind, plain.max_burst_pkts) == ("ccc", 0.0)
    for name, params in (("7.1", {}), ("9.3", {}), ("9.2", {}), ("9.5", {}), ("7.2", {"receiver": ch7.ACK_EACH})):
        assert all(not f.delayed_ack for f in _job(name, **params).scenario.flows if f.type == "tcp"), name
    assert all(f.delayed_ack for f in _job("7.2", receiver=ch7.DELAYED).scenario.flows)
    assert all(f.delayed_ack for f in _job("9.9", receiver=ch7.DELAYED).scenario.flows if f.type == "tcp")
    assert all(f.delayed_ack for f in _job("9.13").scenario.flows)
    assert all(f.delayed_ack for f in _job("9.6").scenario.flows)  # the checks' run; the other is ch7.ACK_EACH
    with pytest.raises(ValueError, match="receiver"):
        ch7.set_receiver({"flows": []}, "sometimes")


def test_scenario_files_state_the_dissertations_settings():
    for name in ("thesis_7_1_join_burst", "thesis_9_3_join_ackclock", "thesis_7_2_fct", "thesis_9_6_priorities",
                 "thesis_9_13_vm_fairness", "thesis_9_9_ctrltcp_cross"):
        t = load(SHIPPED / f"{name}.toml").topology
        assert (t.bottleneck_rate_bps, t.queue_pkts) == (10e6, 83), name
        assert 2 * (t.bottleneck_delay_s + 2 * 0.001) == pytest.approx(0.1), name
    g = load(SHIPPED / "thesis_9_2_loss_event.toml").topology
    rtt = 2 * sum(l.delay_s for l in g.links if (l.from_, l.to) in (("s1", "r1"), ("r1", "r2"), ("r2", "d1")))
    assert rtt == pytest.approx(0.1)
    assert [f.start_s for f in load(SHIPPED / "thesis_7_1_join_burst.toml").flows] == [0.0, 5.0, 6.0]
    fig96 = load(SHIPPED / "thesis_9_6_priorities.toml")
    assert [(f.start_s, f.priority) for f in fig96.flows] == [(3.0, 0.75), (30.0, 0.25)]
    # Fig. 7.2's queue is 1 BDP at every capacity (83 packets at 10 Mbit/s, as the text's).
    assert [ch7._bdp_pkts(c * 1e6) for c in (1, 2, 10)] == [8, 17, 83]


def test_the_9_9_file_is_what_the_reproduction_builds():
    """The shipped file is _dumbbell_scenario's 2-connection ctrlTCP point: the thesis set reuses
    that builder, so the two must not drift apart."""
    shipped = load(SHIPPED / "thesis_9_9_ctrltcp_cross.toml")
    built = validate(_dumbbell_scenario(2, "ccc_handover", [1.0, 1.0], 1, shipped.duration_s))
    assert shipped == built


def test_fig_9_2_losses_hit_connection_1_only():
    q = ch9._loss_queue([ch9._period(10.0, "timeout"), ch9._period(18.0, "timeout")])
    assert (q["start_s"], q["end_s"], q["p"]) == (10.0, 10.2, 1.0)
    assert (q["inner"]["start_s"], q["inner"]["inner"]["kind"]) == (18.0, "drop_tail")
    j = _job("9.5", coupling="etcp", timeouts=2)
    links = j.scenario.topology.links
    assert links[0].queue["kind"] == "loss_period" and all(l.queue is None for l in links[1:])


def _drops_after_join(coupling):
    run_ = run(_job("7.1", coupling=coupling, part="run").scenario)
    before = run(_job("7.1", coupling=coupling, part="before").scenario)
    drops = run_["links"].to_pylist()[0]["dropped_pkts"] - before["links"].to_pylist()[0]["dropped_pkts"]
    return drops, max(f["max_burst_pkts"] for f in run_["flows"].to_pylist() if f["flow"] != 0)


def test_ack_clocking_removes_the_joining_burst_and_its_losses():
    """Fig. 7.1: without ack-clocking (the share handed over at once) connection 2 sends half of a
    100-odd packet aggregate as one burst and the bottleneck drops packets after the join; with
    Algorithm 4 the joiners never send more than 3 segments at once and nothing is lost; our
    burst-limited ccc's joiner sends its 10-segment initial window and no more."""
    drops, burst = _drops_after_join(ch7.BURST)
    assert drops > 0 and burst >= 40
    drops, burst = _drops_after_join(ch7.WITH)
    assert drops == 0 and burst <= 3
    assert _drops_after_join(ch7.WITHOUT)[1] == 10


def test_delayed_acks_lengthen_the_small_windows_rtt():
    """Fig. 9.12's explanation, measured: at priorities 5:1 the small window's mean RTT is over 10 %
    longer than the large one's when the receivers delay ACKs, and within 3 % with an ACK per
    segment (the windows are the same; the delayed-ACK timer holds the small window's ACKs)."""
    def rtts(receiver):
        j = _job("9.9", priority_ratio=5, receiver=receiver)
        f = sorted(run(j.scenario)["flows"].to_pylist(), key=lambda x: x["flow"])
        return f[1]["mean_rtt_s"] / f[0]["mean_rtt_s"]

    assert rtts(ch7.DELAYED) > 1.10
    assert rtts(ch7.ACK_EACH) == pytest.approx(1.0, abs=0.03)


def _cwnds(tables, t0, t1):
    t = tables["flow_samples"].to_pydict()
    out = {0: [], 1: []}
    for ts, f, w in zip(t["t_s"], t["flow"], t["cwnd_pkts"]):
        if t0 <= ts <= t1 and f in out:
            out[f].append(w)
    return out


def test_ctrltcp_halves_the_aggregate_once_and_efcm_does_not():
    """Fig. 9.2: a loss of connection 1 at 25 s halves ctrlTCP's aggregate (0.4-0.6 of it) but takes
    only about a quarter off EFCM's."""
    def ratio(case):
        r = run(_job("9.2", case=case, part="run").scenario)
        pre, post = _cwnds(r, 24.0, 24.99), _cwnds(r, 25.0, 27.0)
        agg_pre = sum(pre[0]) / len(pre[0]) + sum(pre[1]) / len(pre[1])
        return min(a + b for a, b in zip(post[0], post[1])) / agg_pre

    assert 0.4 <= ratio("ccc-drop") <= 0.6
    assert ratio("b") > 0.6


def test_fig_9_6_priorities_split_the_window():
    """Fig. 9.6: while both run, connection 1 holds 3/4 of the aggregate cwnd (within 0.02)."""
    r = run(_job("9.6").scenario)
    w = _cwnds(r, 35.0, 80.0)
    assert sum(w[0]) / (sum(w[0]) + sum(w[1])) == pytest.approx(0.75, abs=0.02)


def test_ctrltcp_makes_the_two_vms_equal():
    """Figs. 9.13/3.1: VM1's flow (priority 3) and VM2's three flows (priority 1 each) under ctrlTCP
    deliver equal aggregates (Jain's index of the two >= 0.99); uncoupled, VM2 takes about 3/4."""
    coupled = run(_job("9.13", vm2_flows=3, coupling="ccc_handover").scenario)["flows"].to_pylist()
    g = [f["goodput_bps"] for f in coupled]
    assert jain([g[0], sum(g[1:])]) >= 0.99
    plain = run(_job("9.13", vm2_flows=3, coupling="none").scenario)["flows"].to_pylist()
    g = [f["goodput_bps"] for f in plain]
    assert sum(g[1:]) / sum(g) == pytest.approx(0.75, abs=0.08)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Every set run with one seed (9.9 shortened)."""
    root = tmp_path_factory.mktemp("thesis-ch79")
    out = {}
    for name, s in SETS.items():
        if name in SHORT:
            def jobs(base, seeds, s=s, d=SHORT[name]):
                return s.jobs({**base, "duration_s": d}, seeds)

            s = dataclasses.replace(s, jobs=jobs)
        out[name] = core.run_set(s, root, seeds=1, workers=1)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_analysis_draws_its_figures_and_states_tolerances(stored, name):
    r = stored[name]
    figs = [f["fig"] for f in r["figures"]]
    assert figs and set(figs) <= set(SETS[name].figures)
    assert all(f["png"].startswith("data:image/png;base64,") for f in r["figures"])
    assert r["checks"]
    for c in r["checks"]:
        assert c["expected"] and c["ours"]
        if check_status(c) == "INFO":
            continue
        assert "tolerance" in c["expected"], c["expected"]
        if check_status(c) == "FAIL":
            assert c["note"], f"a FAIL without an explanation: {c['name']}"


def test_the_long_flow_read_as_bits_ends_before_the_short_one_starts(stored):
    """Why Fig. 7.2's long flow is 25 MB: as 25 Mbit it is over before the short flow starts at
    10 Mbit/s (the table's last column, from a real run)."""
    row = next(r for r in stored["7.2"]["table"]["rows"] if r[0] == 10)
    assert "before the short flow's start" in row[-1]
    assert not math.isnan(float(row[-1].split()[0]))
