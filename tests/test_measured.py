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

    with pytest.raises(LinuxEngineError, match="'measured' runs in the simulator only"):
        plan(load(FILE))
