"""Issue 14: one queue spec schema. The simulator's Rust type (``QueueSpec`` in
crates/sim/src/net/queue/spec.rs) reads every spec, and its generated JSON Schema
(``QUEUE_SPEC_SCHEMA``) is what Python reads; these tests hold the two, the registry of kinds
(``QUEUE_KINDS``) and the docs together."""

from __future__ import annotations

import ast
import copy
import json
import pathlib

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

import macroflow
from macroflow import QUEUE_KINDS, QUEUE_SPEC_SCHEMA, Simulation, SimulationError
from macroflow.sim import tables

import fuzzing

SCHEMA = json.loads(QUEUE_SPEC_SCHEMA)
VARIANTS = {v["properties"]["kind"]["const"]: v for v in SCHEMA["$defs"]["QueueSpec"]["oneOf"]}


def build(spec, rate_bps=10e6):
    """Adds a link with `spec`; its id, or the SimulationError."""
    s = Simulation()
    a, b = s.add_node("a"), s.add_node("b")
    return s.add_link(a, b, rate_bps, 0.01, queue=spec)


def test_the_schema_kinds_are_the_registry_and_each_has_an_example():
    assert tuple(VARIANTS) == QUEUE_KINDS
    assert [e["kind"] for e in SCHEMA["examples"]] == list(QUEUE_KINDS)
    for kind, v in VARIANTS.items():
        assert v["additionalProperties"] is False, kind
        assert v["description"], kind


@pytest.mark.parametrize("example", SCHEMA["examples"], ids=lambda e: e["kind"])
def test_every_kind_in_the_schema_builds_and_carries_traffic(example):
    s = Simulation(seed=1)
    d = s.dumbbell(2, queue=copy.deepcopy(example))
    for i in range(2):
        s.add_tcp_flow(d["senders"][i], d["receivers"][i], dscp=46 * i)
    s.run(3.0)
    flows = tables(s.results())["flows"].to_pylist()
    assert all(f["delivered_bytes"] > 0 for f in flows), flows


def _kind_specs(kind):
    """Specs of one kind drawn from the schema alone."""
    v = dict(VARIANTS[kind])
    return fuzzing.from_schema({"$defs": SCHEMA["$defs"], **v})


def _builds(spec):
    try:
        build(spec)
        return True
    except SimulationError:
        return False


@pytest.mark.parametrize("kind", QUEUE_KINDS)
def test_the_schema_alone_describes_a_spec_of_every_kind_that_builds(kind):
    """Not only the examples: from its kind's schema (keys, types, bounds), hypothesis finds a spec
    the simulator accepts, so the schema describes what the simulator reads."""
    spec = find(_kind_specs(kind), _builds,
                settings=settings(max_examples=2000, database=None, suppress_health_check=list(HealthCheck)))
    assert spec["kind"] == kind


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(fuzzing.queue_specs(), st.data())
def test_what_the_simulator_accepts_the_schema_accepts(spec, data):
    """The schema is never stricter than the simulator: a spec that builds is valid by the schema
    (jsonschema), and one the schema refuses is refused by the simulator with a SimulationError
    (the other direction does not hold: relations between keys are not in the schema). Specs
    are drawn from the schema, and some have a value replaced by a hostile one."""
    jsonschema = pytest.importorskip("jsonschema")
    spec = copy.deepcopy(spec)
    if isinstance(spec, dict) and spec and data.draw(st.booleans()):
        slots = list(fuzzing._slots(spec))
        path, key = data.draw(st.sampled_from(slots))
        fuzzing._at(spec, path)[key] = copy.deepcopy(data.draw(fuzzing.HOSTILE))
    try:
        build(spec)
        ok = True
    except SimulationError:
        ok = False
    errors = [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(spec)]
    if ok:
        assert not errors, (spec, errors)


def test_the_add_link_docs_name_every_kind_and_key():
    stub = ast.parse(pathlib.Path(macroflow.__file__).with_name("_native.pyi").read_text())
    sim = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Simulation")
    doc = ast.get_docstring(next(n for n in sim.body if isinstance(n, ast.FunctionDef) and n.name == "add_link"))
    lines, kind = {}, None  # each kind's summary: its "- ``kind``: ..." line and those continuing it
    for line in doc.splitlines():
        if line.startswith("- ``"):
            kind = line[len("- ``"):].split("``")[0]
            lines[kind] = line
        elif kind and line.startswith("  "):
            lines[kind] += line
        else:
            kind = None
    assert tuple(lines) == QUEUE_KINDS
    for kind, v in VARIANTS.items():
        for key in v["properties"]:
            if key != "kind" and not (key.startswith("limit_") and "limit" in lines[kind]):
                assert f"``{key}``" in lines[kind], (kind, key)
    for key in SCHEMA["$defs"]["WrrClassSpec"]["properties"]:
        assert key in lines["wrr"]


def test_the_scenario_schema_embeds_the_queue_schema():
    from macroflow.scenario import json_schema

    schema = json_schema()
    assert schema["$defs"]["QueueSpec"] == SCHEMA["$defs"]["QueueSpec"]
    dumbbell = schema["$defs"]["Dumbbell"]["properties"]["queue"]
    assert {"$ref": "#/$defs/QueueSpec"} in [{k: v for k, v in x.items() if k == "$ref"} for x in dumbbell["anyOf"]]
    assert "x-macroflow-queue-spec" not in json.dumps(schema)
    jsonschema = pytest.importorskip("jsonschema")
    for name, data in fuzzing.shipped():
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(data)), name


@pytest.mark.parametrize("spec, needle", [
    ({"kind": "red", "limit_pkts": None}, "queue.limit_pkts: invalid type: None, expected usize"),
    ({"kind": "red", "limit_pkts": True}, "queue.limit_pkts: invalid type: boolean `true`"),
    ({"kind": "red", "limit_pkts": 10**30}, "queue.limit_pkts: invalid value: integer 1000000000000000000000000000000"),
    ({"kind": "drop_tail", "limit_pkts": object()}, "queue.limit_pkts: unsupported value <object"),
    ({"kind": "drop_tail", "limit_pkts": set(range(10**5))}, "queue.limit_pkts: unsupported value {0, 1, 2"),
    ({"kind": "drop_tail", "limit_pkts": 10**1000}, "queue.limit_pkts: invalid value: integer 1000000"),
    ({"kind": "random_drop", "p": float("nan"), "inner": {"kind": "drr", "limit_pkts": 1}}, "queue.p: got NaN"),
    ({"kind": "red", "limit_pkts": 10, "max_th_pkts": float("inf")}, "queue.max_th_pkts: got inf"),
    ({"kind": "loss_period", "p": 0.1, "start_s": float("inf"), "end_s": 1.0, "inner": {"kind": "drr", "limit_pkts": 1}},
     "queue.start_s: got inf"),
    ({"kind": "token_bucket", "rate_bps": float("nan"), "bucket_bytes": 1, "inner": {"kind": "drr", "limit_pkts": 1}},
     "queue.rate_bps: got NaN"),
    ({"kind": "wrr", "classes": [{"dscps": [64], "weight": 1, "queue": {"kind": "drr", "limit_pkts": 1}}]},
     "queue.classes[0].dscps"),
    ({"kind": "wrr", "classes": [{"dscps": [300], "weight": 1, "queue": {"kind": "drr", "limit_pkts": 1}}]},
     "queue.classes[0].dscps[0]: invalid value: integer `300`, expected u8"),
    ({"kind": "random_drop", "p": 0.1, "inner": {"kind": "fifo"}},
     'queue.inner.kind: unknown queue kind "fifo"; expected drop_tail, random_drop, loss_period, red, rio, token_bucket, wrr or drr'),
    ({"kind": "drop_tail", "limit_pkts": 2_000_000}, "limit_pkts: got 2000000, expected at most 1e6 packets"),
    ({"kind": "drop_tail", "limit_bytes": 2 * 10**9}, "limit_bytes: got 2000000000, expected at most 1.5e9 bytes"),
])
def test_bad_values_name_their_path(spec, needle):
    with pytest.raises(SimulationError) as e:
        build(spec)
    assert needle in str(e.value) and len(str(e.value)) < 300, str(e.value)


def test_numpy_numbers_tuples_and_key_order_are_read():
    np = pytest.importorskip("numpy")
    assert build({"limit_pkts": np.int64(40), "max_p": np.float32(0.5), "kind": "red"}) == 0
    assert build({"kind": "wrr", "classes": ({"dscps": (0, 46), "weight": np.uint8(2),
                                               "queue": {"kind": "drr", "limit_pkts": 5}},)}) == 0
    # `kind` after the keys it decides still gives each key's own path.
    with pytest.raises(SimulationError, match=r"queue\.gentle: invalid type"):
        build({"limit_pkts": 5, "gentle": "yes", "kind": "red"})


def test_red_defaults_are_ns2s_whatever_the_key_order():
    """Omitted RED keys take ns-2's defaults: a spec with them all written out runs identically."""
    def run(q):
        s = Simulation(seed=3)
        d = s.dumbbell(2, queue=q)
        for i in range(2):
            s.add_tcp_flow(d["senders"][i], d["receivers"][i])
        s.run(10.0)
        return tables(s.results())["links"].to_pylist()

    short = run({"kind": "red", "limit_pkts": 40})
    full = run({"mean_pkt_bytes": 1000, "gentle": True, "q_weight": 0.002, "max_p": 0.1, "max_th_pkts": 15,
                "min_th_pkts": 5, "limit_pkts": 40, "kind": "red"})
    assert short == full
    assert VARIANTS["red"]["properties"]["max_p"]["default"] == 0.1


def test_shared_values_cannot_blow_up_and_pythons_numbers_read_as_before() -> None:
    """Review of issue 14: a key before `kind` is kept while the spec is read; a list holding
    itself twice, 40 levels deep (41 Python objects), expanded to 2^40 values and aborted the
    interpreter. Every value now has at most MAX_PARTS entries and items in all, and is refused
    at once beyond that. And values PyO3's own extraction read before the serde reader still
    read: numpy bools, numpy arrays and ranges as lists, 0-d arrays for floats. (A Python int
    beyond 64 bits is refused as an integer, with its value: no field needs one.)"""
    import time
    import numpy as np

    s = Simulation(seed=1)
    a, b = s.add_node("a"), s.add_node("b")
    x = 0
    for _ in range(40):
        x = [x, x]
    t0 = time.monotonic()
    for spec in ({"oops": x}, {"kind": "random_drop", "p": 0.1, "inner": {"oops": x}}):
        with pytest.raises(SimulationError, match="more than 100000 dict entries and list items"):
            s.add_link(a, b, 1e6, 0.01, queue=spec)
    assert time.monotonic() - t0 < 5.0
    with pytest.raises(SimulationError, match="more than 100000"):
        s.add_link(a, b, 1e6, 0.01, queue={"kind": "wrr", "classes": range(10**12)})
    red = {"kind": "red", "limit_pkts": 83, "gentle": np.True_, "max_th_pkts": 30,
           "max_p": np.asarray(0.1)}
    s.add_link(a, b, 1e6, 0.01, queue=red)
    wrr = {"kind": "wrr", "classes": [
        {"dscps": np.array([46, 34]), "weight": 2, "queue": {"kind": "drop_tail", "limit_pkts": 10}},
        {"dscps": range(0, 2), "weight": 1, "queue": {"kind": "drop_tail", "limit_pkts": 10}}]}
    s.add_link(b, a, 1e6, 0.01, queue=wrr)
