"""The flow-level model from Python (seed 002): the binding's errors, the paper's examples, clamp
against the literal Fig. 5, the topology and traffic generators, the real networks, and the
fire-hose reproduction end to end."""

from __future__ import annotations

import json
import math
import random

import networkx as nx
import pytest

from macroflow import flowsim as fs
from macroflow._native import FlowModel, FlowModelError

FIG2 = [("S1", "R1", 20.0), ("S2", "R1", 20.0), ("R1", "R2", 20.0), ("R2", "D1", 20.0), ("R2", "D2", 2.0)]


@pytest.mark.parametrize("links, flows, routes, message", [
    ([("a", "a", 1.0)], [], None, "self-loop"),
    ([("a", "b", -1.0)], [], None, "capacity must be finite and >= 0"),
    ([("a", "b", float("nan"))], [], None, "capacity must be finite"),
    ([("a", "b", 1.0), ("c", "d", 1.0)], [], None, "disconnected graph"),
    ([("a", "b", 1.0)], [("b", "a")], None, "no path from \"b\" to \"a\""),
    ([("a", "b", 1.0)], [("a", "z")], None, "unknown node \"z\""),
    ([("a", "b", 1.0)], [("a", "a")], None, "flow from \"a\" to itself"),
    ([("a", "b", 1.0), ("a", "b", 2.0)], [], None, "already exists"),
    ([("a", "b", 1.0), ("b", "c", 1.0)], [("a", "c")], [["a", "c"]], "no link"),
    ([("a", "b", 1.0), ("b", "c", 1.0)], [("a", "c")], [["a", "b"]], "not at the sink"),
    ([("a", "b", 1.0)], [("a", "b")], [], "expected 1 values"),
])
def test_bad_input_gets_a_clear_error(links, flows, routes, message):
    with pytest.raises(FlowModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FlowModel(links, flows, routes=routes)


def test_bad_calls_get_clear_errors():
    m = FlowModel(FIG2, [("S1", "D1"), ("S2", "D2")])
    with pytest.raises(FlowModelError, match="unknown sender model 'nope'|unknown sender model \"nope\""):
        m.senders("nope")
    with pytest.raises(FlowModelError, match="alpha must be finite and >= 0"):
        m.senders("limited_ratio", alpha=-1)
    with pytest.raises(FlowModelError, match="expected 2 values"):
        m.clamp([1.0])
    with pytest.raises(FlowModelError, match="demand must be >= 0"):
        m.clamp([1.0, -2.0])
    with pytest.raises(FlowModelError, match="k must be finite and >= 1"):
        m.loss_load(0.5)
    with pytest.raises(FlowModelError, match="not max-min fair"):
        m.check_max_min([10.0, 2.0])
    with pytest.raises(FlowModelError, match="no flow 5"):
        m.route(5)
    # The model is unchanged by the failed calls.
    assert m.clamp() == [18.0, 2.0]


def test_figure_2_from_python():
    m = FlowModel(FIG2, [("S1", "D1"), ("S2", "D2")])
    assert m.initial_demands() == [20.0, 20.0]
    naive = m.senders("naive")
    assert naive["goodput"] == [10.0, 2.0]
    assert naive["total_zombie"] == 8.0
    assert naive["flow_dead"] == [0.0, 8.0]
    lr = m.senders("limited_ratio", alpha=0.2, epsilon=1e-9)
    assert lr["converged"] and math.isclose(lr["goodput"][0], 17.6)
    one = m.solve([20.0, 2.0])
    assert one["goodput"] == [18.0, 2.0] and one["total_zombie"] == 0.0


def test_given_routes_are_used():
    links = [("a", "b", 1.0), ("b", "c", 1.0), ("a", "d", 5.0), ("d", "e", 5.0), ("e", "c", 5.0)]
    short = FlowModel(links, [("a", "c")])
    long = FlowModel(links, [("a", "c")], routes=[["a", "d", "e", "c"]])
    assert short.clamp() == [1.0] and long.clamp() == [5.0]
    assert long.hop_counts() == [3]


def test_clamp_equals_the_literal_algorithm_on_random_instances():
    rng = random.Random(5)
    for _ in range(150):
        n = rng.randint(3, 9)
        links = {(a, b): rng.choice([0.5, 1.0, 2.0, 3.5, 10.0]) for a in range(n) for b in range(n)
                 if a != b and rng.random() < 0.35}
        g = nx.DiGraph(list(links))
        pairs = [(a, b) for a in g for b in g if a != b and nx.has_path(g, a, b)]
        if not pairs:
            continue
        flows = [rng.choice(pairs) for _ in range(rng.randint(1, 12))]
        m = FlowModel([(str(a), str(b), c) for (a, b), c in links.items()], [(str(a), str(b)) for a, b in flows],
                      require_connected=False)
        fast, plain = m.clamp(), m.clamp_oracle()
        assert fast == pytest.approx(plain, rel=1e-9, abs=1e-12)
        m.check_max_min(fast)


def test_generators_follow_the_paper_and_are_deterministic():
    topo = fs.synthetic("barabasi", 300, 330, "geometric", seed=3, edge_nodes=200)
    again = fs.synthetic("barabasi", 300, 330, "geometric", seed=3, edge_nodes=200)
    assert sorted(topo.graph.edges) == sorted(again.graph.edges)
    g = topo.graph
    assert len(topo.edge_nodes) == 200 and all(g.degree(v) == 1 for v in topo.edge_nodes)
    assert nx.is_connected(g)
    for v in topo.edge_nodes:  # leaf links have depth 1: capacity 10^0
        (u,) = g[v]
        assert g.edges[u, v]["capacity"] == 1.0
    caps = {d["capacity"] for _, _, d in g.edges(data=True)}
    assert caps <= {10.0 ** k for k in range(10)} and len(caps) > 1
    fs.assign_capacities(g, "arithmetic")
    assert {d["capacity"] for _, _, d in g.edges(data=True)} <= set(map(float, range(1, 12)))
    with pytest.raises(ValueError, match="capacity scheme"):
        fs.assign_capacities(g, "cubic")
    with pytest.raises(ValueError, match="topology kind"):
        fs.synthetic("hot", 10, 10, "geometric", seed=1)
    er = fs.erdos_renyi(50, 80, seed=1)
    assert er.number_of_edges() == 80


def test_edge_routers_attach_far_from_the_center():
    core = fs.barabasi(200, 220, seed=2)
    g, edges = fs.attach_edge_routers(core, 150, seed=2)
    inner = g.subgraph([v for v in g if g.degree(v) > 1 or not v.startswith("e")])
    added = [v for v in edges if v.startswith("e")]
    assert added, "edge routers were added"
    bc = nx.betweenness_centrality(nx.Graph(g.subgraph([v for v in g if not v.startswith("e")])))
    center = max(sorted(bc), key=lambda v: bc[v])
    dist = nx.single_source_shortest_path_length(inner, center)
    radius = max(dist.values())
    for v in added:
        (host,) = g[v]
        assert dist[host] >= radius / 2


def test_uniform_flows_use_every_node_equally_and_never_reflexively():
    nodes = [f"n{i}" for i in range(10)]
    flows = fs.uniform_flows(nodes, 30, seed=1)
    assert all(s != t for s, t in flows)
    assert all(sum(1 for s, _ in flows if s == v) == 3 for v in nodes)
    assert all(sum(1 for _, t in flows if t == v) == 3 for v in nodes)
    assert fs.uniform_flows(nodes, 30, seed=1) == flows


def test_skew_concentrates_sources():
    nodes = [f"n{i}" for i in range(100)]
    flat = fs.skewed_flows(nodes, 2000, 0.0001, seed=1)
    steep = fs.skewed_flows(nodes, 2000, 0.5, seed=1)
    assert len({s for s, _ in flat}) > 90
    assert len({s for s, _ in steep}) < 25
    assert all(s != t for s, t in steep)
    with pytest.raises(ValueError, match="lambda"):
        fs.skewed_flows(nodes, 10, -1.0, seed=1)


def test_geant_leaves_share_their_node_capacity():
    g = fs.geant()
    assert g.info["core_nodes"] == 22 and g.info["core_edges"] == 36
    assert len(g.flows) == g.info["flows"] > 400
    node = "de1.de"
    core = nx.Graph([(a, b) for a, b in g.graph.edges if "@" not in a and "@" not in b])
    node_cap = 10.0 * core.degree(node)
    src = sum(d["capacity"] for a, b, d in g.graph.edges(data=True)
              for leaf in (a, b) if leaf.startswith("s") and leaf.endswith(f"@{node}"))
    sink = sum(d["capacity"] for a, b, d in g.graph.edges(data=True)
               for leaf in (a, b) if leaf.startswith("t") and leaf.endswith(f"@{node}"))
    assert sink == pytest.approx(node_cap)
    assert src == pytest.approx(node_cap)
    m = fs.model_of(g)
    r = fs.evaluate(m, ("naive", "limited_ratio"))
    assert r["limited_ratio"]["goodput"] > r["naive"]["goodput"]
    assert r["clamp"]["goodput"] >= r["limited_ratio"]["goodput"] - 1e-9


def test_fire_hose_reproduction_end_to_end(tmp_path):
    from macroflow.reproductions import reproduce

    report = reproduce("fire-hose", tmp_path, seeds=1, quick=True, workers=2)
    rep = json.loads((tmp_path / "reproduction.json").read_text())
    assert [p["name"] for p in rep["parts"]] == ["examples", "inefficiency", "core-density", "demand", "skew", "real", "loss-load"]
    examples = [c for c in rep["checks"] if c["name"].startswith("Fig.")]
    assert len(examples) == 9 and all(c["passed"] for c in examples)
    page = report.read_text()
    assert page.count("<h2>") == 7 and page.count("data:image/png;base64") >= 15
    with pytest.raises(ValueError, match="no duration"):
        reproduce("fire-hose", tmp_path, duration_s=10.0)
    # Stored parts are reused: the second run writes the same report.
    again = reproduce("fire-hose", tmp_path, seeds=1, quick=True, workers=2)
    assert again.read_text() == page


def test_check_max_min_is_scale_free_and_refuses_a_bad_tolerance():
    # Issue 12: [0, 1e-9] on one link of capacity 1e-9 shared by two flows was accepted.
    for c in (1e-9, 1.0, 1e9):
        m = FlowModel([("a", "b", c)], [("a", "b"), ("a", "b")])
        with pytest.raises(FlowModelError, match="NoBottleneck"):
            m.check_max_min([0.0, c])
        m.check_max_min([c / 2, c / 2])
        for tol in (float("nan"), -1e-9, 1.0, 1e9):
            with pytest.raises(FlowModelError, match="BadTolerance"):
                m.check_max_min([c / 2, c / 2], tol=tol)


def test_mmf_must_be_finite_rates():
    m = FlowModel(FIG2, [("S1", "D1"), ("S2", "D2")])
    for bad in ([float("nan"), 1.0], [-1.0, 1.0], [float("inf"), 1.0]):
        with pytest.raises(FlowModelError, match="mmf"):
            m.solve([1.0, 1.0], mmf=bad)
    m.solve([1.0, 1.0], mmf=[1.0, 1.0])
