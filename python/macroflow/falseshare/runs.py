"""What the ``false-sharing`` reproduction runs (seed 000): the four topologies of its Fig. 1 from
the shipped scenario files (``scenarios/falseshare_fig1*.toml``), each point once uncoupled and
once as a measured group that only watches (``respond = false``: the flows stay in one macroflow,
so the run is the seed's "shared" case and its detectors' answers are the detection experiment at
once), plus the confidence sweep of Fig. 11, the response runs of Fig. 12, and the four
shared-bottleneck detection cases (``scenarios/sbd_case*.toml``: RMCAT media flows, each case
with its truth per phase) on which SBD is scored against the seed's tests.

Every part is a sweep (:func:`macroflow.sweeps.sweep`) into ``ROOT/<part>/``: stored runs are
reused, a killed reproduction resumes, ``--ray`` runs it on a cluster.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from macroflow.scenario import SHIPPED, parse_toml, validate
from macroflow.sweeps import Job

#: The scenario files, by the seed's panel of Fig. 1.
FILES = {
    "a": "falseshare_fig1a_diffserv.toml",
    "b": "falseshare_fig1b_unshared.toml",
    "c": "falseshare_fig1c_semishared.toml",
    "d": "falseshare_fig1d_fullyshared.toml",
}
TOPOLOGY = {"a": "DiffServ (Fig. 1(a))", "b": "unshared (Fig. 1(b))", "c": "semi-shared (Fig. 1(c))",
            "d": "fully shared, different RTTs (Fig. 1(d))"}
#: Fig. 2 and 6: the fraction of the bottleneck for AF, "varied from 10% to 90%".
ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Figs. 9 and 10: shared hops on Fig. 1(d)'s test paths, at delay ratios 3 and 7.
SHARED_HOPS = (1, 2, 3)
HOP_RATIOS = (3, 7)
#: Fig. 1(b), (c): the ratio of the two paths' bottleneck bandwidths (Fig. 3's axis runs to 10).
BW_RATIOS = (1, 2, 4, 8)
#: Fig. 1(d): the ratio of the two last hops' delays (Fig. 10 uses 3 and 7); 1 is genuine sharing.
DELAY_RATIOS = (1, 3, 5, 7)
#: Fig. 11: detection time against the confidence level, on Fig. 1(b) at ratio 4.
CONFIDENCES = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
#: Fig. 12: the response runs (the AF flow is the faster one from alpha 0.3 on).
RESPONSE_ALPHAS = (0.3, 0.5, 0.7, 0.9)
#: The tests, as the measured group names them: the seed's four and RFC 8382's SBD.
TESTS = ("asymmetric_loss", "symmetric_loss", "delay", "out_of_order", "sbd")
TEST_LABEL = {"asymmetric_loss": "asymmetric loss", "symmetric_loss": "symmetric loss", "delay": "delay",
              "out_of_order": "out-of-order", "sbd": "SBD (RFC 8382)"}
#: Fig. 1(b)'s and (c)'s slow path, 20 Mbit/s; (d)'s near last hop, 15 ms.
BASE_RATE_BPS = 20e6
BASE_HOP_S = 0.015
#: Fig. 1(a)'s bottleneck.
DIFFSERV_RATE_BPS = 100e6


#: The shared-bottleneck detection cases (issue 20: "SBD ... on the RMCAT SBD test cases"): file,
#: and the truth for every pair of its media flows in each phase (start, end or None: the run's
#: end; a pair's first phase starts when its younger flow does). "inconclusive": nothing to
#: detect (no bottleneck), so a definite answer is unsupported.
SBD_CASES: Dict[str, Tuple[str, Tuple[Tuple[float, Any, str], ...]]] = {
    "shared": ("sbd_case1_shared.toml", ((0.0, None, "share"),)),
    "disjoint": ("sbd_case2_disjoint.toml", ((0.0, None, "no_share"),)),
    "moving": ("sbd_case3_moving.toml", ((0.0, 60.0, "no_share"), (60.0, None, "share"))),
    "uncongested": ("sbd_case4_uncongested.toml", ((0.0, None, "inconclusive"),)),
}


@dataclass(frozen=True)
class Plan:
    seeds: int
    duration_s: float


@functools.lru_cache(maxsize=None)
def _base(panel: str) -> Dict[str, Any]:
    """The panel's shipped file, parsed once (every run deep-copies it before changing it)."""
    return parse_toml((SHIPPED / FILES[panel]).read_text(), FILES[panel])


def sbd_case(case: str, seed: int) -> Dict[str, Any]:
    """One run of an SBD case: its shipped file at `seed` (its own duration: the phases are fixed)."""
    sc = parse_toml((SHIPPED / SBD_CASES[case][0]).read_text(), SBD_CASES[case][0])
    sc["seed"] = seed
    sc["name"] = f"{sc['name']}-s{seed}"
    return sc


def _measured(respond: bool, confidence: float = 0.9) -> Dict[str, Any]:
    return {"name": "test", "kind": "measured", "coupler": "ccc", "test": "out_of_order", "respond": respond,
            "confidence": confidence}


def with_shared_hops(sc: Dict[str, Any], hops: int) -> Dict[str, Any]:
    """Fig. 1(d) with `hops` shared bottlenecks in a row (seed 000 sec. 4.3: "the number of
    shared bottlenecks can be tuned ... Across each shared link in the path, we also have cross
    traffic"): the bottleneck r0 -> r1 (links.1) becomes r0 -> m1 -> ... -> r1, each hop a copy of
    it, and each hop gets cross traffic of its own, a copy of the original's (long TCP, web, CBR,
    both ways) between hosts u_j and v_j on either side of it; the original u and v become the
    first hop's. The test flows cross every hop."""
    if hops == 1:
        return sc
    sc = copy.deepcopy(sc)
    topo = sc["topology"]
    links = topo["links"]
    bottleneck = links[1]
    assert (bottleneck["from"], bottleneck["to"]) == ("r0", "r1"), "links.1 is Fig. 1(d)'s bottleneck"
    chain = ["r0"] + [f"m{j}" for j in range(1, hops)] + ["r1"]
    topo["nodes"] += chain[1:-1]
    links[1:2] = [dict(copy.deepcopy(bottleneck), **{"from": a, "to": b}) for a, b in zip(chain, chain[1:])]
    up = next(l for l in links if (l["from"], l["to"]) == ("u", "r0"))
    down = next(l for l in links if (l["from"], l["to"]) == ("r1", "v"))
    down["from"] = chain[1]  # v: the first hop's far side
    cross = [f for f in sc["flows"] if {f.get("src"), f.get("dst")} <= {"u", "v"} and "src" in f]
    for j in range(1, hops):
        u, v = f"u{j}", f"v{j}"
        topo["nodes"] += [u, v]
        links.append(dict(copy.deepcopy(up), **{"from": u, "to": chain[j]}))
        links.append(dict(copy.deepcopy(down), **{"from": chain[j + 1], "to": v}))
        for f in cross:
            g = copy.deepcopy(f)
            g["src"], g["dst"] = {"u": u, "v": v}[f["src"]], {"u": u, "v": v}[f["dst"]]
            sc["flows"].append(g)
    return sc


def scenario(panel: str, x: float, arm: str, seed: int, duration_s: float, confidence: float = 0.9,
             hops: int = 1) -> Dict[str, Any]:
    """One run: panel a-d at its swept value `x` (alpha, bandwidth or delay ratio); `arm` "none"
    (uncoupled), "shared" (a measured group that only watches) or "respond" (it splits on the
    out-of-order test's no share)."""
    sc = copy.deepcopy(_base(panel))
    links = sc["topology"]["links"]
    if panel == "a":
        af = round(10 * x)
        q = links[0]["queue"]
        q["classes"][0]["weight"] = af
        q["classes"][1]["weight"] = 10 - af
        q["classes"][0]["queue"]["rate_bps"] = x * DIFFSERV_RATE_BPS
    elif panel in ("b", "c"):
        links[0]["rate_bps"] = x * BASE_RATE_BPS
    else:
        links[0]["delay_s"] = round(x * BASE_HOP_S, 9)
        sc = with_shared_hops(sc, hops)
    sc["groups"] = [{"name": "test", "kind": "none"}] if arm == "none" else [_measured(arm == "respond", confidence)]
    sc["seed"] = seed
    sc["duration_s"] = duration_s
    # The detectors' metrics (Fig. 5) and the flows' windows, every second.
    sc["sample_interval_s"] = 1.0 if arm != "none" else 0.0
    sc["name"] = f"falseshare-{panel}-{x:g}-{arm}" + (f"-{hops}hops" if hops > 1 else "")
    return sc


def parts(plan: Plan) -> List[Tuple[str, str, List[Job], Dict[str, List[Any]]]]:
    """(part name, title, jobs, grid) of every part."""
    seeds = range(1, plan.seeds + 1)

    def job(panel: str, x: float, arm: str, s: int, **extra: Any) -> Job:
        sc = scenario(panel, x, arm, s, plan.duration_s, **extra)
        params: Dict[str, Any] = {"panel": panel, "x": x, "arm": arm, **extra}
        return Job(params, validate(sc, f"{sc['name']} seed={s}"))

    xs = {"a": ALPHAS, "b": BW_RATIOS, "c": BW_RATIOS, "d": DELAY_RATIOS}
    out = []
    for panel in "abcd":
        jobs = [job(panel, x, arm, s) for x in xs[panel] for arm in ("none", "shared") for s in seeds]
        out.append((f"fig1{panel}", f"{TOPOLOGY[panel]}: uncoupled and one macroflow watched by the detectors", jobs,
                    {"x": list(xs[panel]), "arm": ["none", "shared"]}))
    jobs = [job("b", 4, "shared", s, confidence=c) for c in CONFIDENCES for s in seeds]
    out.append(("confidence", "Fig. 11: the detectors at other confidence levels (Fig. 1(b), ratio 4)", jobs,
                {"confidence": list(CONFIDENCES)}))
    jobs = [job("d", x, arm, s, hops=h) for h in SHARED_HOPS if h > 1 for x in HOP_RATIOS for arm in ("none", "shared")
            for s in seeds]
    out.append(("hops", "Figs. 9 and 10: more shared hops on Fig. 1(d) (one hop: the fig1d part)", jobs,
                {"hops": [h for h in SHARED_HOPS if h > 1], "x": list(HOP_RATIOS), "arm": ["none", "shared"]}))
    jobs = [job("a", x, "respond", s) for x in RESPONSE_ALPHAS for s in seeds]
    out.append(("response", "Fig. 12: the measured group splits on the out-of-order test's no share (Fig. 1(a))", jobs,
                {"x": list(RESPONSE_ALPHAS)}))
    jobs = []
    for case in SBD_CASES:
        for s in seeds:
            sc = sbd_case(case, s)
            jobs.append(Job({"case": case}, validate(sc, sc["name"])))
    out.append(("sbd_cases", "SBD and the seed's tests on the four shared-bottleneck detection cases (media flows)", jobs,
                {"case": list(SBD_CASES)}))
    return out


def correct(panel: str, x: float, test: str) -> str:
    """The answer the seed counts as correct for `test` on panel/x (sec. 4.2): no share wherever
    the flows do not share every bottleneck; on Fig. 1(d) the loss, delay (and SBD) tests are
    right to say share, since "all packet drops and queuing delays are caused by a single router",
    and only the out-of-order test can (and should) say no share, because the RTTs differ. At
    delay ratio 1 the paths are identical: share, and the out-of-order test's right answer is to
    stay inconclusive (it never says share)."""
    if panel != "d":
        return "no_share"
    if x == 1:
        return "inconclusive" if test == "out_of_order" else "share"
    return "no_share" if test == "out_of_order" else "share"


def panels_of(names: Sequence[str]) -> List[str]:
    return [n[-1] for n in names if n.startswith("fig1")]
