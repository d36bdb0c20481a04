"""Seed 002's experiments (fire-hose senders in networks of max-min fair routers) as the parts of
the ``fire-hose`` reproduction: each part computes rows (one per topology, parameter, traffic
pattern and sender model), the specs of its figures, and its checks against the paper's numbers.

The parts follow the paper's sections: the worked examples (Figs. 1-3, 17), potential
inefficiency (section 4.3, Fig. 4), core density (6.2, Figs. 8-15), number of flows (6.3, Fig. 16),
traffic skew (7, Figs. 18-20), real networks (8, Figs. 21-22) and loss-load routers (9, Fig. 23).
Rows are plain JSON; :mod:`macroflow.reports` draws the figures from them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import networkx as nx

from macroflow import flowsim as fs

__all__ = ["FlowPart", "METRIC_KEYS", "PARTS", "run_part"]

ALPHA = 0.2  # section 5.2: "We arbitrarily select α = 0.2"
MODELS = ("naive", "full_balanced", "limited_ratio")
MODEL_LABELS = {"clamp": "clamp (optimal)", "naive": "naive fire-hose", "full_balanced": "full balanced",
                "full_share": "full share", "limited_ratio": "limited ratio", "naive_ratio": "naive ratio"}


@dataclass
class FlowPart:
    """What a part computed: rows, figure specs (see :func:`macroflow.reports`), checks."""

    name: str
    title: str
    description: str
    rows: List[Dict[str, Any]] = field(default_factory=list)
    figures: List[Dict[str, Any]] = field(default_factory=list)
    checks: List[Tuple[str, str, str, bool, str]] = field(default_factory=list)
    network: Optional[Dict[str, Any]] = None


def _mean(xs: Sequence[float]) -> float:
    xs = list(xs)
    return statistics.fmean(xs) if xs else float("nan")


def _rows(base: Dict[str, Any], result: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [dict(base, model=m, **{k: v for k, v in r.items() if not isinstance(v, list)}) for m, r in result.items()]


def _sel(rows: Sequence[Dict[str, Any]], **kw: Any) -> List[Dict[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


#: The keys of a row that are measurements; every other key names the instance (topology, parameters, pattern).
METRIC_KEYS = frozenset({"model", "goodput", "dead", "zombie", "dropped", "jain", "iterations", "converged", "relative", "goodputs"})


def _ratio(rows: Sequence[Dict[str, Any]], model: str, **kw: Any) -> List[float]:
    """Per instance (every key that is not a metric: topology, parameters, pattern): the model's
    goodput over clamp's on the same instance."""
    clamp = {tuple(sorted((k, v) for k, v in r.items() if k not in METRIC_KEYS)): r["goodput"] for r in rows if r["model"] == "clamp"}
    out = []
    for r in _sel(rows, model=model, **kw):
        c = clamp[tuple(sorted((k, v) for k, v in r.items() if k not in METRIC_KEYS))]
        if c > 0:
            out.append(r["goodput"] / c)
    return out


def _check(part: FlowPart, name: str, expected: str, ours: str, passed: bool, note: str = "") -> None:
    part.checks.append((name, expected, ours, bool(passed), note))


# --- the worked examples --------------------------------------------------------------------------

def examples(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    part = FlowPart("examples", "Worked examples (Figs. 1, 2, 3 and 17)",
                    "The paper's toy topologies, with fire-hose senders (Eq. 1) and clamp. Fig. 3 is not in the text: "
                    "the topology is built to match every number the text gives (S1-R1, S2-R1, S3-R2 and R2-R3 of 20, "
                    "R1-R2 of 12, R2-D2 of 2).")
    f1 = [("S1", "R1", 20.0), ("S2", "R1", 20.0), ("R1", "R2", 20.0), ("R2", "D1", 5.0), ("R2", "D2", 2.0)]
    f2 = [x if x[:2] != ("R2", "D1") else ("R2", "D1", 20.0) for x in f1]
    f3 = [("S1", "R1", 20.0), ("S2", "R1", 20.0), ("R1", "R2", 12.0), ("R2", "D2", 2.0), ("S3", "R2", 20.0),
          ("R2", "R3", 20.0), ("R3", "D1", 20.0), ("R3", "D3", 20.0)]
    star = [(s, "H", 2.0) for s in ("S1", "S2", "S3")] + [("H", s, 2.0) for s in ("S1", "S2", "S3")]
    cases = [
        ("Fig. 1", f1, [("S1", "D1"), ("S2", "D2")]),
        ("Fig. 2", f2, [("S1", "D1"), ("S2", "D2")]),
        ("Fig. 3", f3, [("S1", "D1"), ("S2", "D2"), ("S3", "D3")]),
        ("Fig. 17, three flows", star, [("S1", "S2"), ("S2", "S3"), ("S3", "S1")]),
        ("Fig. 17, four flows", star, [("S1", "S2"), ("S2", "S3"), ("S3", "S1"), ("S2", "S1")]),
    ]
    res = {}
    for name, links, flows in cases:
        m = fs.FlowModel(links, flows)
        mmf = m.clamp()
        naive = m.senders("naive", mmf=mmf)
        lr = m.senders("limited_ratio", alpha=ALPHA, mmf=mmf)
        link_names = [f"{a}->{b}" for a, b, _ in m.links()]
        res[name] = (mmf, naive, lr, link_names)
        part.rows.append({"example": name, "model": "clamp", "goodputs": [round(x, 6) for x in mmf],
                          "goodput": sum(mmf), "jain": fs._jain(mmf), "dead": 0.0, "zombie": 0.0})
        for label, r in (("naive", naive), ("limited_ratio", lr)):
            part.rows.append({"example": name, "model": label, "goodputs": [round(x, 6) for x in r["goodput"]],
                              "goodput": r["total_goodput"], "jain": r["jain"], "dead": r["total_dead"],
                              "zombie": r["total_zombie"]})
    progress(1.0)
    mmf, n, _, ln = res["Fig. 1"]
    drop = dict(zip(ln, n["link_dropped"]))
    _check(part, "Fig. 1: fire-hose goodputs", "5 and 2", f"{n['goodput'][0]:g} and {n['goodput'][1]:g}", n["goodput"] == [5.0, 2.0])
    _check(part, "Fig. 1: dropped at the access router R1", "20 (10 per flow)", f"{drop['R1->R2']:g}", drop["R1->R2"] == 20.0)
    _check(part, "Fig. 1: dead packets of S2->D2 (crossed R1->R2, dropped at R2)", "8", f"{n['flow_dead'][1]:g}",
           n["flow_dead"][1] == 8.0, "S1->D1 also has 5 dead (dropped at R2->D1), which the text does not mention")
    _check(part, "Fig. 1: zombies", "0 (fire-hose is optimal here)", f"{n['total_zombie']:g}", n["total_zombie"] == 0.0)
    mmf, n, lr, _ = res["Fig. 2"]
    _check(part, "Fig. 2: S1->D1 goodput, fire-hose vs optimal", "10 vs 18", f"{n['goodput'][0]:g} vs {mmf[0]:g}",
           n["goodput"][0] == 10.0 and mmf[0] == 18.0)
    _check(part, "Fig. 2: zombie packets", "8", f"{n['total_zombie']:g}", n["total_zombie"] == 8.0)
    mmf, n, _, _ = res["Fig. 3"]
    _check(part, "Fig. 3: optimal goodputs, total, Jain", "2, 10, 10; 22; 0.79",
           f"{mmf[1]:g}, {mmf[0]:g}, {mmf[2]:g}; {sum(mmf):g}; {fs._jain(mmf):.2f}",
           mmf == [10.0, 2.0, 10.0] and f"{fs._jain(mmf):.2f}" == "0.79")
    _check(part, "Fig. 3: fire-hose goodputs, total, Jain", "S1->D1 6, S3->D3 14; 22; 0.68",
           f"{n['goodput'][0]:g}, {n['goodput'][2]:g}; {n['total_goodput']:g}; {n['jain']:.2f}",
           n["goodput"] == [6.0, 2.0, 14.0] and f"{n['jain']:.2f}" == "0.68")
    g3 = res["Fig. 17, three flows"][1]["total_goodput"]
    g4 = res["Fig. 17, four flows"][1]["total_goodput"]
    _check(part, "Fig. 17: total goodput with three, then four flows", "6, then 5", f"{g3:g}, then {g4:g}", (g3, g4) == (6.0, 5.0))
    return part


# --- section 4.3: potential inefficiency (Fig. 4) -------------------------------------------------

def inefficiency(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    flows_n = 2500 if quick else 10_000
    part = FlowPart("inefficiency", "Potential inefficiency of fire-hose senders (section 4.3, Fig. 4)",
                    f"The realistic topology (topohub backbone/emea_nosc with 768 edge routers, arithmetic capacities; the "
                    f"paper's HOT graph is not public), {flows_n} uniform flows, fire-hose senders (Eq. 1) against clamp.")
    topo = fs.synthetic("realistic", 0, 0, "arithmetic", seed=1)
    flows = fs.uniform_flows(topo.edge_nodes, flows_n, seed=1)
    m = fs.model_of(topo, flows)
    r = fs.evaluate(m, senders=("naive",), keep=True)
    progress(0.8)
    part.rows += _rows({"flows": flows_n, "pattern": 1}, r)
    naive, clamp = r["naive"], r["clamp"]
    gap = clamp["goodput"] - naive["goodput"]
    _check(part, "clamp's goodput over fire-hose's", "about 2.6x (325 vs 125 flow units on HOT)",
           f"{clamp['goodput'] / naive['goodput']:.2f}x ({clamp['goodput']:.0f} vs {naive['goodput']:.0f})",
           clamp["goodput"] > naive["goodput"], "a different topology: the direction is checked, not the size")
    _check(part, "dead flow far exceeds the goodput lost", "650 dead vs 200 lost", f"{naive['dead']:.0f} dead vs {gap:.0f} lost",
           naive["dead"] > 2 * gap)
    unasked = sum(max(0.0, fair - d) for fair, d in zip(clamp["flow_goodput"], m.initial_demands()))
    _check(part, "the goodput lost equals the zombie flow", "'corresponds exactly to the number of zombie packets'",
           f"{gap:.1f} lost, {naive['zombie']:.1f} zombie", abs(gap - naive["zombie"]) <= 0.05 * max(gap, 1e-9),
           f"within 5 %. The rest: senders that ask a flow for less than its fair share (Eq. 1 splits an access link "
           f"equally) lose {unasked:.1f} without any drop, which no definition of zombies counts")
    part.network = _network_picture(m, topo, naive)
    part.figures.append({"kind": "network", "title": f"Dead (left) and zombie (right) flow, fire-hose senders, {flows_n} flows"})
    progress(1.0)
    return part


def _network_picture(m: fs.FlowModel, topo: fs.Topology, res: Dict[str, Any]) -> Dict[str, Any]:
    """Fig. 4's picture data: core routers (edge routers left out) sized by capacity and shaded by
    the dead and the zombie flow on their outgoing links; links sized by capacity, shaded by use."""
    links = m.links()
    core = [v for v in topo.graph.nodes if topo.graph.degree(v) > 1]
    sub = topo.graph.subgraph(core)
    if all("pos" in sub.nodes[v] for v in core):  # topohub's (longitude, latitude): a map
        pos = {v: sub.nodes[v]["pos"] for v in core}
    else:
        pos = nx.spring_layout(sub, seed=1, iterations=60)
    cap = {v: 0.0 for v in core}
    dead = {v: 0.0 for v in core}
    zombie = {v: 0.0 for v in core}
    util: Dict[Tuple[str, str], float] = {}
    for (a, b, c), d, z, u in zip(links, res["link_dead"], res["link_zombie"], res["link_utilization"]):
        if a in cap:
            cap[a] += c
            dead[a] += d
            zombie[a] += z
        util[(a, b)] = u
    order = sorted(core, key=fs._natural)
    return {
        "nodes": [{"id": v, "x": round(float(pos[v][0]), 5), "y": round(float(pos[v][1]), 5), "capacity": cap[v],
                   "dead": dead[v], "zombie": zombie[v]} for v in order],
        "edges": [{"a": a, "b": b, "capacity": float(sub.edges[a, b]["capacity"]),
                   "utilization": max(util.get((a, b), 0.0), util.get((b, a), 0.0))}
                  for a, b in sorted(sub.edges, key=lambda e: (fs._natural(e[0]), fs._natural(e[1])))],
    }


# --- section 6.2: core density ----------------------------------------------------------------------

def core_density(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    edges = (800, 1000, 1500, 2500) if quick else (800, 900, 1000, 1200, 1500, 2000, 3000)
    part = FlowPart("core-density", "Goodput and zombies against core density (section 6.2, Figs. 8-15)",
                    f"Barabási-style and Erdős-Rényi cores of 768 nodes with {', '.join(map(str, edges))} requested edges, "
                    f"edge routers added until there are 768, geometric and arithmetic capacities; 1.5 flows per edge "
                    f"router (1,152), uniform; {patterns} flow patterns per point.")
    todo = [(k, e, c) for k in ("barabasi", "erdos_renyi") for e in edges for c in ("geometric", "arithmetic")]
    for n, (kind, e, caps) in enumerate(todo):
        topo = fs.synthetic(kind, 768, e, caps, seed=e)
        for p in range(1, patterns + 1):
            m = fs.model_of(topo, fs.uniform_flows(topo.edge_nodes, 1152, seed=p))
            part.rows += _rows({"topology": kind, "capacities": caps, "edges": e, "pattern": p}, fs.evaluate(m, MODELS))
        progress((n + 1) / len(todo))
    for kind in ("barabasi", "erdos_renyi"):
        for caps in ("geometric", "arithmetic"):
            part.figures.append({"kind": "lines", "x": "edges", "y": "goodput", "where": {"topology": kind, "capacities": caps},
                                 "title": f"{_TOPO[kind]}, {caps} capacities: goodput", "xlabel": "core edges requested"})
            part.figures.append({"kind": "lines", "x": "edges", "y": "zombie", "where": {"topology": kind, "capacities": caps},
                                 "models": MODELS, "title": f"{_TOPO[kind]}, {caps} capacities: zombie flow", "xlabel": "core edges requested"})
    # "Each data point ... represents the mean across ten different flow patterns. Across all of
    # these graphs, the performance of the limited ratio algorithm varies by at most 2% of clamp
    # and both naïve and full balanced remain within 11%": per point, the mean ratio.
    points = [(k, c, e) for k in ("barabasi", "erdos_renyi") for c in ("geometric", "arithmetic") for e in edges]

    def worst(model: str) -> Tuple[float, Tuple[str, str, int]]:
        return min((_mean(_ratio(part.rows, model, topology=k, capacities=c, edges=e)), (k, c, e)) for k, c, e in points)

    lr, nv, fb = worst("limited_ratio"), worst("naive"), worst("full_balanced")
    _check(part, "limited ratio within 2 % of clamp at every point", ">= 0.98 of clamp (mean over patterns)",
           f"worst {lr[0]:.3f} ({_TOPO[lr[1][0]]}, {lr[1][1]}, {lr[1][2]} edges)", lr[0] >= 0.98)
    _check(part, "naive and full-balanced within 11 % of clamp at every point", ">= 0.89 of clamp (mean over patterns)",
           f"naive worst {nv[0]:.3f} ({_TOPO[nv[1][0]]}, {nv[1][1]}, {nv[1][2]} edges), full balanced worst {fb[0]:.3f}",
           nv[0] >= 0.89 and fb[0] >= 0.89)
    _check(part, "limited ratio has the fewest zombies", "fewer than naive and full balanced (Figs. 10, 11, 14, 15)",
           f"mean {_mean(r['zombie'] for r in _sel(part.rows, model='limited_ratio')):.2f} vs "
           f"{_mean(r['zombie'] for r in _sel(part.rows, model='naive')):.2f} and "
           f"{_mean(r['zombie'] for r in _sel(part.rows, model='full_balanced')):.2f}",
           _mean(r["zombie"] for r in _sel(part.rows, model="limited_ratio"))
           < min(_mean(r["zombie"] for r in _sel(part.rows, model=x)) for x in ("naive", "full_balanced")))
    lo = _mean(r["goodput"] for r in _sel(part.rows, model="clamp", edges=edges[0], capacities="geometric"))
    hi = _mean(r["goodput"] for r in _sel(part.rows, model="clamp", edges=edges[-1], capacities="geometric"))
    _check(part, "a denser core carries more", "goodput rises with core edges (Figs. 8, 9)", f"clamp {lo:.0f} -> {hi:.0f}", hi > lo)
    return part


_TOPO = {"barabasi": "Barabási", "erdos_renyi": "Erdős-Rényi", "realistic": "realistic (topohub)"}


def _fixed_topologies() -> Dict[str, fs.Topology]:
    """Section 6.3's three graphs: Barabási (768-node core, 857 edges), Erdős-Rényi with 318 more
    edges, and the realistic one; geometric capacities."""
    return {"barabasi": fs.synthetic("barabasi", 768, 857, "geometric", seed=7),
            "erdos_renyi": fs.synthetic("erdos_renyi", 768, 857 + 318, "geometric", seed=7),
            "realistic": fs.synthetic("realistic", 0, 0, "geometric", seed=7)}


# --- section 6.3: number of flows -------------------------------------------------------------------

def demand(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    counts = (500, 1000, 2500, 5000) if quick else (250, 500, 1000, 1500, 2500, 4000, 6000, 8000, 10000)
    part = FlowPart("demand", "Goodput against the number of flows (section 6.3, Fig. 16)",
                    f"Flows added to fixed Erdős-Rényi, realistic and Barabási topologies (geometric capacities): "
                    f"{', '.join(map(str, counts))} uniform flows; {patterns} patterns per point.")
    topos = _fixed_topologies()
    todo = [(k, c) for k in topos for c in counts]
    for n, (kind, count) in enumerate(todo):
        for p in range(1, patterns + 1):
            m = fs.model_of(topos[kind], fs.uniform_flows(topos[kind].edge_nodes, count, seed=p))
            part.rows += _rows({"topology": kind, "flows": count, "pattern": p}, fs.evaluate(m, MODELS))
        progress((n + 1) / len(todo))
    for kind in topos:
        part.figures.append({"kind": "lines", "x": "flows", "y": "goodput", "where": {"topology": kind},
                             "title": f"{_TOPO[kind]}: goodput", "xlabel": "flows"})
    last, first = counts[-1], counts[0]
    nv_last = {k: _mean(_ratio(part.rows, "naive", topology=k, flows=last)) for k in topos}
    nv_first = {k: _mean(_ratio(part.rows, "naive", topology=k, flows=first)) for k in topos}
    lr_all = [x for k in topos for c in counts for x in _ratio(part.rows, "limited_ratio", topology=k, flows=c)]
    _check(part, "naive falls further below optimal as flows are added (Barabási, realistic)",
           "naive/clamp lower at the most flows than at the fewest",
           ", ".join(f"{_TOPO[k]} {nv_first[k]:.3f} -> {nv_last[k]:.3f}" for k in ("barabasi", "realistic")),
           all(nv_last[k] < nv_first[k] for k in ("barabasi", "realistic")))
    _check(part, "limited ratio tracks clamp", "close to optimal at every count", f"min {min(lr_all):.3f} of clamp", min(lr_all) >= 0.95,
           "threshold 0.95 is ours")
    er = [r["goodput"] / (len(topos["erdos_renyi"].edge_nodes)) for r in _sel(part.rows, model="clamp", topology="erdos_renyi", flows=last)]
    _check(part, "Erdős-Rényi satisfies the edge routers' full demand", "goodput near the number of edge routers (768)",
           f"clamp {_mean(er) * 768:.0f}", _mean(er) >= 0.9, "at the most flows; threshold 0.9 is ours")
    return part


# --- section 7: skew --------------------------------------------------------------------------------

LAMBDAS = (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5)


def skew(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    lambdas = (0.0001, 0.005, 0.05, 0.5) if quick else LAMBDAS
    part = FlowPart("skew", "Goodput and zombies against traffic skew (section 7, Figs. 18-20)",
                    f"2,500 flows with sources drawn with probability proportional to exp(-λ i) over a random order of the "
                    f"edge routers, destinations uniform; λ in {', '.join(map(str, lambdas))}; loss-load with k = 10 and "
                    f"limited ratio with α = 1 as in section 9; {patterns} patterns per point.")
    topos = _fixed_topologies()
    todo = [(k, lam) for k in topos for lam in lambdas]
    for n, (kind, lam) in enumerate(todo):
        for p in range(1, patterns + 1):
            m = fs.model_of(topos[kind], fs.skewed_flows(topos[kind].edge_nodes, 2500, lam, seed=p))
            r = fs.evaluate(m, MODELS, loss_load_k=(10,))
            r["limited_ratio_a1"] = fs.evaluate(m, ("limited_ratio",), alpha=1.0)["limited_ratio"]
            part.rows += _rows({"topology": kind, "lambda": lam, "pattern": p}, r)
        progress((n + 1) / len(todo))
    for kind in topos:
        part.figures.append({"kind": "lines", "x": "lambda", "y": "goodput", "where": {"topology": kind}, "logx": True,
                             "models": ("clamp",) + MODELS, "title": f"{_TOPO[kind]}: goodput", "xlabel": "λ"})
    for kind in ("barabasi", "realistic"):
        part.figures.append({"kind": "lines", "x": "lambda", "y": "zombie", "where": {"topology": kind}, "logx": True,
                             "models": MODELS, "title": f"{_TOPO[kind]}: zombie flow", "xlabel": "λ"})
    c_lo = {k: _mean(r["goodput"] for r in _sel(part.rows, model="clamp", topology=k, **{"lambda": lambdas[0]})) for k in topos}
    c_hi = {k: _mean(r["goodput"] for r in _sel(part.rows, model="clamp", topology=k, **{"lambda": lambdas[-1]})) for k in topos}
    _check(part, "skew lowers goodput", "goodput falls as λ grows (Fig. 18)",
           ", ".join(f"{_TOPO[k]} {c_lo[k]:.0f} -> {c_hi[k]:.0f}" for k in topos), all(c_hi[k] < c_lo[k] for k in topos))
    big = [lam for lam in lambdas if lam > 0.1]
    z = [r["zombie"] / max(r["goodput"], 1e-9) for lam in big for r in _sel(part.rows, model="naive", **{"lambda": lam})
         if r["topology"] in ("barabasi", "realistic")]
    _check(part, "zombies vanish with skew", "naive creates no zombies once λ > 0.1 (Figs. 19, 20)",
           f"naive zombies at most {max(z) * 100:.2f} % of goodput at λ = {big}", max(z) <= 0.01, "threshold 1 % is ours")
    wins = []
    for lam in lambdas:
        if lam > 0.005:
            a = _mean(r["goodput"] for r in _sel(part.rows, model="limited_ratio_a1", **{"lambda": lam}))
            b = _mean(r["goodput"] for r in _sel(part.rows, model="loss_load_k10", **{"lambda": lam}))
            wins.append((lam, a, b))
    _check(part, "limited ratio (α = 1) against loss-load (k = 10) under skew", "limited ratio better for λ > 0.005 (section 9)",
           "; ".join(f"λ={lam}: {a:.1f} vs {b:.1f}" for lam, a, b in wins), all(a >= b for _, a, b in wins),
           "mean goodput over all three topologies")
    return part


# --- section 8: real networks ---------------------------------------------------------------------

def real(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    part = FlowPart("real", "Real networks (section 8, Figs. 21 and 22)",
                    "GEANT (SNDlib, from topohub) with its own demand matrix and 10 Gbit/s core links; SNDlib ta2 (65 nodes) with "
                    f"OC-192/48/12 capacities and {patterns} log-normal traffic matrices, standing in for the Level 3 map. Each "
                    "flow has its own source and sink leaf, sized by its share of its node's demand; routes are shortest by "
                    "link length. Units: Gbit/s.")
    g = fs.geant()
    part.rows += _rows({"topology": "geant", "pattern": 1}, fs.evaluate(fs.model_of(g), MODELS))
    progress(1 / (patterns + 1))
    for p in range(1, patterns + 1):
        t = fs.lognormal_network(p)
        part.rows += _rows({"topology": "ta2", "pattern": p}, fs.evaluate(fs.model_of(t), MODELS))
        progress((p + 1) / (patterns + 1))
    for topo in ("geant", "ta2"):
        part.figures.append({"kind": "bars", "where": {"topology": topo}, "metrics": ("goodput", "zombie", "dead"),
                             "title": f"{'GEANT' if topo == 'geant' else 'ta2 (Level 3 stand-in)'}: goodput, zombie and dead flow (Gbit/s)"})
    for topo, paper in (("geant", "clamp 192, limited ratio 186, naive 162 Gbit/s; zombies 5.5 and 31"),
                        ("ta2", "Level 3: clamp 266, limited ratio 263, naive 228 Gbit/s")):
        c = _mean(r["goodput"] for r in _sel(part.rows, model="clamp", topology=topo))
        lr = _mean(_ratio(part.rows, "limited_ratio", topology=topo))
        nv = _mean(_ratio(part.rows, "naive", topology=topo))
        zl = _mean(r["zombie"] for r in _sel(part.rows, model="limited_ratio", topology=topo))
        zn = _mean(r["zombie"] for r in _sel(part.rows, model="naive", topology=topo))
        name = "GEANT" if topo == "geant" else "ta2"
        _check(part, f"{name}: limited ratio within 3 % of clamp", f">= 0.97 ({paper})",
               f"{lr:.3f} (clamp {c:.1f} Gbit/s)", lr >= 0.97)
        _check(part, f"{name}: naive well below, about 85 % of optimal", "0.80-0.90 of clamp", f"{nv:.3f}", 0.80 <= nv <= 0.90)
        _check(part, f"{name}: limited ratio makes far fewer zombies", "zombies limited ratio << naive",
               f"{zl:.1f} vs {zn:.1f} Gbit/s", zl < 0.5 * zn)
    return part


# --- section 9: loss-load ---------------------------------------------------------------------------

def loss_load(patterns: int, quick: bool, progress: Callable[[float], None]) -> FlowPart:
    ks = (1, 2, 5, 10)
    part = FlowPart("loss-load", "Loss-load routers against limited ratio (section 9, Fig. 23)",
                    f"The ta2 network with {patterns} log-normal matrices: loss-load routers and senders with penalty k against "
                    "limited ratio with α = 1/k on brick-wall routers; goodput relative to clamp.")
    for p in range(1, patterns + 1):
        m = fs.model_of(fs.lognormal_network(p))
        mmf = m.clamp()
        c = sum(mmf)
        for k in ks:
            ll = m.loss_load(float(k), mmf=mmf)
            lr = m.senders("limited_ratio", alpha=1.0 / k, mmf=mmf)
            for name, r in (("loss_load", ll), ("limited_ratio", lr)):
                part.rows.append({"k": k, "pattern": p, "model": name, "goodput": r["total_goodput"], "relative": r["total_goodput"] / c,
                                  "zombie": r["total_zombie"], "dead": r["total_dead"], "iterations": r["iterations"],
                                  "converged": r["converged"]})
        progress(p / patterns)
    part.figures.append({"kind": "lines", "x": "k", "y": "relative", "models": ("limited_ratio", "loss_load"),
                         "title": "Goodput relative to clamp: limited ratio (α = 1/k) and loss-load (k)", "xlabel": "k (α = 1/k)"})
    diffs = []
    for k in ks:
        for p in range(1, patterns + 1):
            a = _sel(part.rows, k=k, pattern=p, model="limited_ratio")[0]["relative"]
            b = _sel(part.rows, k=k, pattern=p, model="loss_load")[0]["relative"]
            diffs.append(abs(a - b))
    _check(part, "goodput nearly identical for each α = 1/k pair", "|limited ratio - loss-load| <= 0.02 of clamp",
           f"max difference {max(diffs):.4f}", max(diffs) <= 0.02, "threshold 0.02 is ours")
    unconv = [r for r in part.rows if not r["converged"]]
    _check(part, "every fixed point converged", "all", f"{len(part.rows) - len(unconv)} of {len(part.rows)}", not unconv)
    return part


PARTS: Dict[str, Callable[[int, bool, Callable[[float], None]], FlowPart]] = {
    "examples": examples,
    "inefficiency": inefficiency,
    "core-density": core_density,
    "demand": demand,
    "skew": skew,
    "real": real,
    "loss-load": loss_load,
}


def run_part(name: str, patterns: int, quick: bool, progress: Optional[Callable[[float], None]] = None) -> FlowPart:
    return PARTS[name](patterns, quick, progress or (lambda f: None))
