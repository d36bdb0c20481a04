"""Measured coupling groups in scenario files (issue 20): share by default, detect false sharing,
split (seed 000 sec. 4-5). The simulator's side is tested in crates/sim/tests/measured.rs."""

import pathlib

import pytest

from macroflow import InvalidValueError
from macroflow._native import Simulation, SimulationError
from macroflow.scenario import ScenarioError, load, parse, run

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILE = ROOT / "python" / "macroflow" / "scenarios" / "measured_false_sharing.toml"


def _with(**group):
    text = FILE.read_text()
    head, tail = text.split('kind = "measured"', 1)
    tail = tail.split("\n[[flows]]", 1)[1]
    extra = "".join(f"{k} = {v}\n" for k, v in group.items())
    return head + 'kind = "measured"\n' + extra + "\n[[flows]]" + tail


def test_the_shipped_example_detects_splits_and_frees_the_fast_flow():
    t = run(load(FILE))
    m = t["measured_groups"].to_pylist()
    assert len(m) == 1 and m[0]["splits"] == 1 and m[0]["merges"] == 0
    assert m[0]["detector_errors"] == m[0]["action_errors"] == m[0]["events_dropped"] == 0
    # Every observed segment arrived, was dropped, or is in flight at the end.
    assert 0 <= m[0]["sent_pkts"] - m[0]["arrived_pkts"] - m[0]["dropped_pkts"] < 500
    ooo = [d for d in t["detections"].to_pylist() if d["test"] == "out_of_order"]
    assert ooo and ooo[0]["decision"] == "no_share"
    assert 2.0 < ooo[0]["t_s"] - ooo[0]["start_s"] < 15.0, ooo[0]  # the seed: 5-10 s
    flows = t["flows"].to_pylist()
    assert flows[0]["goodput_bps"] > 7e6, flows  # the 10 Mbit/s path, freed
    # Fig. 5's series: each test's metrics every second for the pair.
    ds = t["detector_samples"].to_pylist()
    assert {d["test"] for d in ds} == {"asymmetric_loss", "symmetric_loss", "delay", "out_of_order"}
    delay = [d for d in ds if d["test"] == "delay" and d["auto"] is not None]
    assert delay[-1]["cross_hi"] < delay[-1]["auto_lo"], "different paths: cross below auto"
    assert t["flows"].schema.metadata[b"coupling_errors_register"] == b"0"


def test_detection_only_keeps_the_flows_coupled():
    sc = parse(_with(respond="false"))
    t = run(sc)
    m = t["measured_groups"].to_pylist()[0]
    assert m["splits"] == 0
    assert any(d["decision"] == "no_share" for d in t["detections"].to_pylist())
    shared = run(sc)["flows"].to_pylist()[0]["goodput_bps"]
    split = run(load(FILE))["flows"].to_pylist()[0]["goodput_bps"]
    assert split > 2 * shared, (split, shared)


@pytest.mark.parametrize(
    "group, match",
    [
        ({"coupler": '"cubic"'}, "not a TCP coupler"),
        ({"test": '"rtt"'}, "test"),
        ({"confidence": "1.0"}, "confidence"),
        ({"confidence": "0"}, "confidence"),
        ({"memory_expiry_s": "0"}, "memory_expiry_s"),
        ({"delay_min_s": "0.1", "delay_max_s": "0.2"}, "signalling delay is for FSE groups"),
    ],
)
def test_bad_measured_groups_name_the_field(group, match):
    with pytest.raises(ScenarioError, match=match):
        parse(_with(**group))


def test_measured_fields_on_other_kinds_are_refused():
    text = FILE.read_text().replace('kind = "measured"', 'kind = "ccc"')
    with pytest.raises(ScenarioError, match="coupler is for a measured group"):
        parse(text)
    text = _with(test='"delay"').replace('kind = "measured"', 'kind = "active"').replace('coupler = "ccc"', "")
    with pytest.raises(ScenarioError, match="test is for a measured group"):
        parse(text)


def test_the_bindings_refuse_bad_arguments_and_add_nothing():
    s = Simulation(seed=1)
    with pytest.raises(InvalidValueError, match="invalid test: got 'rtt'"):
        s.add_measured_group(test="rtt")
    with pytest.raises(InvalidValueError, match="invalid coupler"):
        s.add_measured_group(coupler="fse")
    with pytest.raises(SimulationError, match="confidence"):
        s.add_measured_group(confidence=1.5)
    with pytest.raises(SimulationError, match="max_burst_pkts"):
        s.add_measured_group(max_burst_pkts=-1.0)
    assert s.add_measured_group() == 0, "nothing was added by the refused calls"


def test_the_linux_engine_refuses_a_measured_group():
    from macroflow.linux import LinuxEngineError, plan

    with pytest.raises(LinuxEngineError, match="measured groups run in the simulator only"):
        plan(load(FILE))


# --- media flows watched (the SBD cases) and UDP cross traffic that stops ---------------------

SBD_CASE4 = ROOT / "python" / "macroflow" / "scenarios" / "sbd_case4_uncongested.toml"


def test_media_flows_in_a_measured_group_are_watched():
    t = run(load(SBD_CASE4))
    m = t["measured_groups"].to_pylist()
    assert len(m) == 1 and m[0]["members"] == "media" and m[0]["sent_pkts"] > 10_000, m
    assert m[0]["detector_errors"] == m[0]["events_dropped"] == m[0]["splits"] == 0
    # Every detection names the pair (0, 1) of media flows.
    assert all((d["flow_a"], d["flow_b"]) == (0, 1) for d in t["detections"].to_pylist())


def _case4(group_extra="", flows_extra=""):
    text = SBD_CASE4.read_text().replace('respond = false\n', group_extra)
    return text + flows_extra


def test_media_flows_need_a_group_that_only_watches():
    with pytest.raises(ScenarioError, match="respond = false"):
        parse(_case4(), "x.toml")
    with pytest.raises(ScenarioError, match="respond = false"):
        parse(_case4("respond = true\n"), "x.toml")
    tcp = '\n[[flows]]\ntype = "tcp"\nsrc = "s"\ndst = "d1"\ngroup = "watched"\n'
    with pytest.raises(ScenarioError, match="not both"):
        parse(_case4("respond = false\n", tcp), "x.toml")
    # A priority change is for FSE-coupled media flows, not watched ones.
    change = "\n[[priority_changes]]\nat_s = 5.0\nflow = 0\npriority = 2.0\n"
    with pytest.raises(ScenarioError, match="priority_changes"):
        parse(_case4("respond = false\n", change), "x.toml")


def test_the_binding_refuses_media_flows_it_cannot_watch():
    s = Simulation(seed=1)
    a, b, c = s.add_node("a"), s.add_node("b"), s.add_node("c")
    s.add_link(a, b, 10e6, 0.01)
    s.add_link(b, a, 10e6, 0.01)
    s.add_link(b, c, 10e6, 0.01)
    s.add_link(c, b, 10e6, 0.01)
    f = s.add_media_flow(a, c, start_s=1.0)
    responds = s.add_measured_group(respond=True)
    with pytest.raises(SimulationError, match="respond"):
        s.measure_media(f, responds)
    with pytest.raises(SimulationError, match="measured group"):
        s.measure_media(f, 7)
    watches = s.add_measured_group(test="sbd", respond=False)
    s.measure_media(f, watches)
    with pytest.raises(SimulationError, match="not in a measured group yet"):
        s.measure_media(f, watches)


def test_a_udp_flow_stops_at_its_end_s():
    text = SBD_CASE4.read_text() + (
        '\n[[flows]]\ntype = "udp"\nsrc = "s"\ndst = "d2"\nrate_bps = 1e6\nstart_s = 10.0\nend_s = 30.0\n')
    u = run(parse(text, "x.toml"))["udp_flows"].to_pylist()[0]
    assert abs(u["sent_pkts"] - 2500) <= 1, u  # 125 packets a second for 20 s
    assert abs(u["throughput_bps"] - 1e6) < 1e4, u  # over the 20 s it sent
    bad = text.replace("end_s = 30.0", "end_s = 10.0")
    with pytest.raises(ScenarioError, match="end_s"):
        parse(bad, "x.toml")
    with pytest.raises(SimulationError, match="end_s"):
        Simulation(seed=1).add_udp_flow(0, 1, rate_bps=1e6, start_s=2.0, end_s=-1.0)
