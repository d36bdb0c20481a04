"""The flow-level model of seed 002 from Python: topologies, traffic, and the experiment loop.

``crates/flowsim`` does the computing (clamp, the brick-wall flow, sender models, loss-load); this
module builds its inputs the way the paper does and collects what it measures:

- synthetic topologies (section 6.1): Erdős-Rényi and Barabási-style cores, edge routers attached
  at least half the radius from the most central node, capacities by depth in an arithmetic or a
  geometric progression; the paper's HOT graph is not public, so the "realistic" class is a
  router-level topology from ``topohub`` with the same edge-router construction;
- traffic: uniform without replacement (6.1.2) and skewed sources (section 7);
- real networks (section 8): SNDlib GEANT with its own demand matrix, and SNDlib ta2 with a
  log-normal matrix standing in for Level 3, each flow sourced and sunk at a leaf of its own;
- :func:`evaluate`: clamp and every sender model on one instance, with dead and zombie flow.

Everything is deterministic given a seed (numpy's PCG64 and networkx's seeded generators).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import networkx as nx
import numpy as np

from macroflow._native import SENDER_MODELS, FlowModel, FlowModelError

__all__ = [
    "Topology", "FlowModel", "FlowModelError", "SENDER_MODELS", "barabasi", "erdos_renyi", "from_topohub",
    "attach_edge_routers", "assign_capacities", "synthetic", "fat_tree", "uniform_flows", "skewed_flows",
    "geant", "lognormal_network", "evaluate", "model_of",
]

#: Capacity of an OC-192, OC-48 and OC-12 link in Gbit/s (the Level 3 map of section 8).
OC192_GBPS, OC48_GBPS, OC12_GBPS = 9.953, 2.488, 0.622


@dataclass
class Topology:
    """An undirected graph with capacities (both directions of an edge get the same) and the
    nodes that source and sink traffic. `routes` (optional) pins each flow's path for the real
    networks, where flows come with the topology."""

    name: str
    graph: nx.Graph
    edge_nodes: List[str]
    flows: List[Tuple[str, str]] = field(default_factory=list)
    routes: Optional[List[List[str]]] = None
    #: Free-form facts for the report (sizes, how it was built).
    info: Dict[str, object] = field(default_factory=dict)

    def links(self) -> List[Tuple[str, str, float]]:
        out = []
        for a, b, d in sorted(self.graph.edges(data=True), key=lambda e: (str(e[0]), str(e[1]))):
            out.append((str(a), str(b), float(d["capacity"])))
            out.append((str(b), str(a), float(d["capacity"])))
        return out


def model_of(topo: Topology, flows: Optional[Sequence[Tuple[str, str]]] = None) -> FlowModel:
    """The Rust model of `topo` with `flows` (default: the topology's own flows and routes)."""
    if flows is None:
        return FlowModel(topo.links(), list(topo.flows), routes=topo.routes, nodes=sorted(map(str, topo.graph.nodes)))
    return FlowModel(topo.links(), list(flows), nodes=sorted(map(str, topo.graph.nodes)))


# --- synthetic cores (section 6.1) ----------------------------------------------------------------

def barabasi(n: int, e: int, seed: int) -> nx.Graph:
    """Section 6.1: "we iteratively add nodes one by one and probabilistically attach them to
    (e/n) other nodes with probability in proportion to the node degrees". A fractional e/n
    attaches floor(e/n) or one more with the fraction as probability, so about e edges result."""
    if n < 2 or e < n - 1:
        raise ValueError(f"barabasi needs n >= 2 and e >= n - 1, got n={n}, e={e}")
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    g.add_edge(0, 1)
    ends = [0, 1]  # each node once per unit of degree: sampling it is preferential
    m = e / n
    for v in range(2, n):
        k = int(m) + (1 if rng.random() < m - int(m) else 0)
        k = max(1, min(k, v))
        chosen: List[int] = []
        while len(chosen) < k:
            u = ends[int(rng.integers(len(ends)))]
            if u not in chosen:
                chosen.append(u)
        for u in chosen:
            g.add_edge(v, u)
            ends += [v, u]
    return g


def erdos_renyi(n: int, e: int, seed: int) -> nx.Graph:
    """Section 6.1: "we insert e edges uniformly at random from among the set of n^2 possible edges"."""
    if n < 2 or e < 1 or e > n * (n - 1) // 2:
        raise ValueError(f"erdos_renyi needs n >= 2 and 1 <= e <= n(n-1)/2, got n={n}, e={e}")
    return nx.gnm_random_graph(n, e, seed=seed)


def from_topohub(key: str) -> nx.Graph:
    """A topology of the ``topohub`` package (e.g. ``backbone/emea_nosc``, ``sndlib/geant``)."""
    import topohub

    try:
        data = topohub.get(key)
    except KeyError as e:
        raise ValueError(f"topohub has no topology {key!r}") from e
    return _node_link_graph(data)


def _node_link_graph(data: Dict[str, Any]) -> nx.Graph:
    """topohub's node-link data (links under "edges") as a graph. Built here rather than with
    ``nx.node_link_graph(data, edges="edges")``: that keyword needs networkx 3.4, which needs
    Python 3.10, and the package supports 3.9."""
    g = nx.Graph(**data.get("graph", {}))
    g.add_nodes_from((n["id"], {k: v for k, v in n.items() if k != "id"}) for n in data["nodes"])
    g.add_edges_from((e["source"], e["target"], {k: v for k, v in e.items() if k not in ("source", "target")})
                     for e in data["edges"])
    return g


def attach_edge_routers(core: nx.Graph, edge_nodes: int, seed: int) -> Tuple[nx.Graph, List[str]]:
    """Section 6.1: "we select the largest connected component and remove any edge routers (nodes
    of degree one) attached to nodes with more than one non-edge router link. Finally, we add edge
    routers to nodes at least half of the radius from a central node (determined by maximum
    betweenness) until we have reached the desired number of edge nodes." The radius is the
    central node's eccentricity. Nodes are renamed ``c<i>`` (core) and ``e<i>`` (added edge
    routers). Returns the graph and its edge routers (every node of degree one)."""
    if edge_nodes < 2:
        raise ValueError(f"edge_nodes must be >= 2, got {edge_nodes}")
    rng = np.random.default_rng(seed)
    comp = max(sorted(nx.connected_components(core), key=lambda c: sorted(c)[0]), key=len)
    g = nx.Graph(core.subgraph(comp))
    g = nx.relabel_nodes(g, {v: f"c{i}" for i, v in enumerate(sorted(g.nodes, key=str))})
    deg = dict(g.degree)
    drop = [v for v in sorted(g.nodes) if deg[v] == 1
            and sum(1 for w in g[next(iter(g[v]))] if deg[w] > 1) > 1]
    g.remove_nodes_from(drop)
    if g.number_of_nodes() < 2:
        raise ValueError("the core's largest component has fewer than two nodes")
    bc = nx.betweenness_centrality(g)
    center = max(sorted(g.nodes), key=lambda v: bc[v])
    dist = nx.single_source_shortest_path_length(g, center)
    radius = max(dist.values())
    eligible = sorted(v for v in g.nodes if dist[v] >= radius / 2 and g.degree(v) > 1) or sorted(g.nodes)
    leaves = sum(1 for v in g.nodes if g.degree(v) == 1)
    i = 0
    while leaves < edge_nodes:
        host = eligible[int(rng.integers(len(eligible)))]
        g.add_edge(host, f"e{i}")
        i += 1
        leaves += 1
    edges = sorted((v for v in g.nodes if g.degree(v) == 1), key=_natural)
    return g, edges


def _natural(v: str) -> Tuple[str, int]:
    head = v.rstrip("0123456789")
    return (head, int(v[len(head):] or 0))


def assign_capacities(g: nx.Graph, scheme: str) -> None:
    """Section 6.1.1: a link's depth is the least distance from either end to an edge router,
    plus one (leaf links have depth 1); arithmetic: capacity = depth; geometric: 10^(depth-1)."""
    if scheme not in ("arithmetic", "geometric"):
        raise ValueError(f"capacity scheme must be 'arithmetic' or 'geometric', got {scheme!r}")
    leaves = [v for v in g.nodes if g.degree(v) == 1]
    dist = nx.multi_source_dijkstra_path_length(g, leaves, weight=lambda u, v, d: 1)
    for a, b, d in g.edges(data=True):
        depth = 1 + min(dist[a], dist[b])
        d["capacity"] = float(depth) if scheme == "arithmetic" else 10.0 ** (depth - 1)


def synthetic(kind: str, n: int, e: int, capacities: str, seed: int, edge_nodes: int = 768,
              core_key: str = "backbone/emea_nosc") -> Topology:
    """A topology of section 6.1: `kind` is ``barabasi``, ``erdos_renyi`` or ``realistic`` (the
    topohub router-level graph `core_key` standing in for HOT; `n` and `e` are then ignored)."""
    if kind == "barabasi":
        core = barabasi(n, e, seed)
    elif kind == "erdos_renyi":
        core = erdos_renyi(n, e, seed)
    elif kind == "realistic":
        core = from_topohub(core_key)
    else:
        raise ValueError(f"topology kind must be barabasi, erdos_renyi or realistic, got {kind!r}")
    g, edges = attach_edge_routers(core, edge_nodes, seed)
    assign_capacities(g, capacities)
    name = f"{kind}" + ("" if kind == "realistic" else f" n={n} e={e}") + f", {capacities}"
    return Topology(name, g, edges, info={"nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
                                          "edge_nodes": len(edges), "core": core_key if kind == "realistic" else kind})


def fat_tree(k: int, capacity: float = 1.0) -> Topology:
    """A k-ary fat tree (k even): k^3/4 hosts, 5k^2/4 switches, 3k^3/4 edges (each two links)."""
    if k < 2 or k % 2:
        raise ValueError(f"fat tree needs an even k >= 2, got {k}")
    g = nx.Graph()
    h = k // 2
    hosts = []
    for p in range(k):
        for a in range(h):
            for c in range(h):
                g.add_edge(f"a{p}.{a}", f"core{a * h + c}", capacity=capacity)
            for ed in range(h):
                g.add_edge(f"a{p}.{a}", f"ed{p}.{ed}", capacity=capacity)
        for ed in range(h):
            for j in range(h):
                host = f"h{p}.{ed}.{j}"
                g.add_edge(f"ed{p}.{ed}", host, capacity=capacity)
                hosts.append(host)
    return Topology(f"fat tree k={k}", g, hosts, info={"hosts": len(hosts), "links": 2 * g.number_of_edges()})


# --- traffic --------------------------------------------------------------------------------------

def uniform_flows(edge_nodes: Sequence[str], count: int, seed: int) -> List[Tuple[str, str]]:
    """Section 6.1.2: "we sample sources and destinations uniformly at random without replacement,
    ensuring that no reflexive flows are generated, and re-initializing the source and destination
    sets when they are exhausted"."""
    if len(edge_nodes) < 2:
        raise ValueError("need at least two edge nodes")
    rng = np.random.default_rng(seed)
    nodes = list(edge_nodes)
    src: List[str] = []
    dst: List[str] = []
    out = []
    for _ in range(count):
        if not src:
            src = [nodes[i] for i in rng.permutation(len(nodes))]
        s = src.pop()
        while True:
            if not dst:
                dst = [nodes[i] for i in rng.permutation(len(nodes))]
            j = next((j for j in range(len(dst) - 1, -1, -1) if dst[j] != s), None)
            if j is not None:
                out.append((s, dst.pop(j)))
                break
            dst = []
    return out


def skewed_flows(edge_nodes: Sequence[str], count: int, lam: float, seed: int) -> List[Tuple[str, str]]:
    """Section 7: "sources are chosen from an exponential distribution with exponent λ and
    destinations chosen uniformly at random with replacement": the i-th node of a random order is a
    source with probability proportional to exp(-λ i); a destination equal to its source is drawn again."""
    if not (lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"lambda must be finite and >= 0, got {lam}")
    if len(edge_nodes) < 2:
        raise ValueError("need at least two edge nodes")
    rng = np.random.default_rng(seed)
    order = [edge_nodes[i] for i in rng.permutation(len(edge_nodes))]
    w = np.exp(-lam * np.arange(len(order)))
    srcs = rng.choice(len(order), size=count, p=w / w.sum())
    out = []
    for s in srcs:
        while True:
            t = int(rng.integers(len(order)))
            if t != s:
                break
        out.append((order[int(s)], order[t]))
    return out


# --- real networks (section 8) --------------------------------------------------------------------

def _with_leaves(name: str, core: nx.Graph, demands: Dict[Tuple[str, str], float], node_cap: Dict[str, float],
                 info: Dict[str, object]) -> Topology:
    """Section 8: "we attach leaf nodes to each flow's actual origin and destination ... each leaf
    node sources and sinks precisely one flow. The total leaf node access capacity at each
    original node is identical to the actual capacity of the original node; each leaf node's
    incoming/outgoing capacity is set in proportion to the fraction its flow represents of the
    actual node's total original incoming/outgoing demand." Routes are the shortest paths by
    link length (``dist``) in the core; a core without lengths uses hop counts."""
    out_total: Dict[str, float] = {}
    in_total: Dict[str, float] = {}
    for (o, d), v in demands.items():
        out_total[o] = out_total.get(o, 0.0) + v
        in_total[d] = in_total.get(d, 0.0) + v
    g = nx.Graph()
    for a, b, d in core.edges(data=True):
        g.add_edge(str(a), str(b), capacity=float(d["capacity"]))
    weight = "dist" if all("dist" in d for _, _, d in core.edges(data=True)) else None
    paths = dict(nx.all_pairs_dijkstra_path(core, weight=weight)) if weight else dict(nx.all_pairs_shortest_path(core))
    flows, routes = [], []
    for i, ((o, d), v) in enumerate(sorted(demands.items())):
        s, t = f"s{i}@{o}", f"t{i}@{d}"
        g.add_edge(s, str(o), capacity=node_cap[o] * v / out_total[o])
        g.add_edge(str(d), t, capacity=node_cap[d] * v / in_total[d])
        flows.append((s, t))
        routes.append([s] + [str(x) for x in paths[o][d]] + [t])
    info = dict(info, flows=len(flows), core_nodes=core.number_of_nodes(), core_edges=core.number_of_edges())
    return Topology(name, g, [f for f, _ in flows] + [t for _, t in flows], flows=flows, routes=routes, info=info)


def geant(core_gbps: float = 10.0, key: str = "sndlib/geant") -> Topology:
    """SNDlib GEANT (22 PoPs, 36 links in topohub; the paper used 21 PoPs and 35 core links of a
    2007 snapshot) with its own demand matrix. topohub carries no capacities: every core link gets
    `core_gbps` (the paper: "a core of 21 PoPs connected by a 10-Gbps backbone"); a node's capacity
    is the sum of its links'. The paper scales demands to 50 times each node's capacity; fire-hose
    senders never reach such demands, so they do not bind and are not modelled."""
    import topohub

    g = _node_link_graph(topohub.get(key, use_names=True))
    for _, _, d in g.edges(data=True):
        d["capacity"] = core_gbps
    node_cap = {v: sum(d["capacity"] for _, _, d in g.edges(v, data=True)) for v in g.nodes}
    demands = {(o, d): float(v) for o, row in g.graph["demands"].items() for d, v in row.items() if v > 0 and o != d}
    return _with_leaves("GEANT (SNDlib)", g, demands, node_cap, {"core_gbps": core_gbps, "source": key})


def lognormal_network(seed: int, key: str = "sndlib/ta2", sigma: float = 1.0) -> Topology:
    """The stand-in for the paper's Level 3 map (66 PoPs, OC-192 links first, then OC-48 and
    OC-12), which is not public: SNDlib ta2 (65 nodes, 108 links) with link capacities by edge
    betweenness (the busiest half OC-192, the next 30 % OC-48, the rest OC-12) and a log-normal
    traffic matrix over all ordered node pairs (Nucci et al., as the paper), one pattern per seed."""
    rng = np.random.default_rng(seed)
    g = from_topohub(key)
    g = nx.relabel_nodes(g, {v: f"p{v}" for v in g.nodes})
    eb = nx.edge_betweenness_centrality(g)
    ranked = sorted(g.edges, key=lambda e: (-eb[e], str(e)))
    for i, (a, b) in enumerate(ranked):
        frac = i / len(ranked)
        g.edges[a, b]["capacity"] = OC192_GBPS if frac < 0.5 else OC48_GBPS if frac < 0.8 else OC12_GBPS
    node_cap = {v: sum(d["capacity"] for _, _, d in g.edges(v, data=True)) for v in g.nodes}
    nodes = sorted(g.nodes, key=_natural)
    demands = {(o, d): float(rng.lognormal(0.0, sigma)) for o in nodes for d in nodes if o != d}
    return _with_leaves(f"{key} with a log-normal matrix (seed {seed})", g, demands, node_cap,
                        {"source": key, "sigma": sigma, "seed": seed})


# --- one experiment point -------------------------------------------------------------------------

def evaluate(model: FlowModel, senders: Sequence[str] = ("naive", "full_balanced", "limited_ratio"),
             alpha: float = 0.2, epsilon: float = 1e-6, loss_load_k: Sequence[float] = (),
             keep: bool = False) -> Dict[str, Dict[str, object]]:
    """clamp and each sender model (and loss-load for each k) on one instance: ``{name: {goodput,
    dead, zombie, dropped, jain, iterations, converged}}`` (totals in the model's units). `keep`
    also returns the per-link and per-flow vectors."""
    mmf = model.clamp()
    out: Dict[str, Dict[str, object]] = {
        "clamp": {"goodput": float(sum(mmf)), "dead": 0.0, "zombie": 0.0, "dropped": 0.0,
                  "jain": _jain(mmf), "iterations": 0, "converged": True},
    }
    if keep:
        out["clamp"]["flow_goodput"] = list(mmf)
    runs = [(s, lambda s=s: model.senders(s, alpha=alpha, epsilon=epsilon, mmf=mmf)) for s in senders]
    runs += [(f"loss_load_k{k:g}", lambda k=k: model.loss_load(k, mmf=mmf)) for k in loss_load_k]
    for name, run in runs:
        r = run()
        row: Dict[str, object] = {"goodput": r["total_goodput"], "dead": r["total_dead"], "zombie": r["total_zombie"],
                                  "dropped": r["total_dropped"], "jain": r["jain"], "iterations": r["iterations"],
                                  "converged": r["converged"]}
        if keep:
            row.update({k: r[k] for k in ("link_dead", "link_zombie", "link_dropped", "link_utilization")})
            row["flow_goodput"] = r["goodput"]
        out[name] = row
    return out


def _jain(x: Sequence[float]) -> float:
    a = np.asarray(x, dtype=float)
    s2 = float((a * a).sum())
    return 1.0 if len(a) == 0 or s2 == 0 else float(a.sum() ** 2 / (len(a) * s2))
