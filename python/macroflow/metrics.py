"""Summary figures of one run, computed from its Arrow tables (as :func:`macroflow.sim.tables` and
the results store give them). Reports, sweeps and the reproductions' checks all use these, so a
figure means the same thing everywhere.

Units are in the names: ``_bps`` bit/s, ``_pkts`` packets, ``_s`` seconds; ratios are in [0, 1].
"""

from __future__ import annotations

import math

from typing import Dict, List, Optional, Sequence

import pyarrow as pa

__all__ = ["jain", "bottleneck_links", "summarize", "SUMMARY_FIELDS"]

#: The run-wide figures :func:`summarize` returns, with what they mean (for report tables).
SUMMARY_FIELDS: Dict[str, str] = {
    "tcp_goodput_bps": "sum of the TCP flows' goodput",
    "media_goodput_bps": "sum of the media flows' goodput",
    "udp_throughput_bps": "sum of the UDP flows' received throughput",
    "total_goodput_bps": "all of the above",
    "jain_tcp": "Jain's fairness index of the TCP flows' goodput, weighted by priority when given",
    "loss_ratio": "packets dropped / offered at the bottleneck link(s)",
    "utilization": "bottleneck utilization (mean over the bottleneck links)",
    "mean_queue_pkts": "time-mean bottleneck queue length",
    "max_queue_pkts": "largest bottleneck queue length",
    "mean_queue_delay_s": "mean queue length times packet size over the link rate",
    "mean_rtt_s": "mean over the TCP flows of each flow's mean RTT",
    "retransmits": "TCP retransmissions, all flows",
    "timeouts": "TCP retransmission timeouts, all flows",
    "max_burst_pkts": "largest burst of any TCP flow: data packets one sender emitted at one instant",
}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _total(xs: Sequence[Optional[float]]) -> float:
    """The sum of the known values; NaN when every value is unknown (null)."""
    known = [x for x in xs if x is not None]
    return float(sum(known)) if known or not xs else float("nan")


def _largest(xs: Sequence[Optional[float]]) -> float:
    return float(max((x for x in xs if x is not None), default=float("nan")))


def jain(xs: Sequence[float], weights: Optional[Sequence[float]] = None) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of `xs`, each divided by its weight first
    (so flows getting shares in proportion to their priorities score 1). NaN without flows."""
    if weights is not None:
        if len(weights) != len(xs):
            raise ValueError(f"{len(weights)} weights for {len(xs)} values")
        if any(not w > 0 for w in weights):
            raise ValueError(f"weights must be > 0, got {list(weights)}")
        # x / w in log space: the index is scale-free, and a weight of 1e-300 must not overflow
        # (issue 13: OverflowError after a whole run).
        logs = [math.log(x) - math.log(w) if x > 0 else -math.inf for x, w in zip(xs, weights)]
        top = max(logs, default=-math.inf)
        xs = [math.exp(v - top) if top > -math.inf else 0.0 for v in logs]
    n = len(xs)
    if n == 0:
        return float("nan")
    m = max(abs(x) for x in xs)
    if m == 0:
        return 1.0
    xs = [x / m for x in xs]  # scale-free; keeps x * x in range
    return sum(xs) ** 2 / (n * sum(x * x for x in xs))


def bottleneck_links(t: Dict[str, pa.Table]) -> List[int]:
    """The links a run measured (those in ``queue_samples``); without samples, the link that
    dropped most (ties: the slowest)."""
    sampled = sorted(set(t["queue_samples"].column("link").to_pylist())) if t["queue_samples"].num_rows else []
    if sampled:
        return sampled
    links = t["links"].to_pylist()
    if not links:
        return []
    return [max(links, key=lambda l: (l["dropped_pkts"], -l["rate_bps"]))["link"]]


def summarize(t: Dict[str, pa.Table], priorities: Optional[Dict[int, float]] = None) -> Dict[str, float]:
    """The figures of :data:`SUMMARY_FIELDS` for one run. `priorities` (TCP flow id -> priority)
    weights Jain's index for coupled flows that are meant to share unequally."""
    tcp = t["flows"].to_pylist()
    tcp_g = [f["goodput_bps"] for f in tcp]
    media_g = sum(f["goodput_bps"] for f in t["media_flows"].to_pylist())
    udp_g = sum(f["throughput_bps"] for f in t["udp_flows"].to_pylist())
    weights = [priorities.get(f["flow"], 1.0) for f in tcp] if priorities else None
    out: Dict[str, float] = {
        "tcp_goodput_bps": float(sum(tcp_g)),
        "media_goodput_bps": float(media_g),
        "udp_throughput_bps": float(udp_g),
        "total_goodput_bps": float(sum(tcp_g) + media_g + udp_g),
        "jain_tcp": jain(tcp_g, weights),
        "mean_rtt_s": _mean([f["mean_rtt_s"] for f in tcp if f["mean_rtt_s"] is not None]),
        "retransmits": float(sum(f["retransmits"] for f in tcp)),
        # Null where an engine cannot observe them (the Linux engine: TCP_INFO has no count of
        # timeouts, and bursts at an instant are not visible): NaN then, not 0.
        "timeouts": _total([f["timeouts"] for f in tcp]),
        "max_burst_pkts": _largest([f["max_burst_pkts"] for f in tcp]),
    }
    ids = set(bottleneck_links(t))
    links = [l for l in t["links"].to_pylist() if l["link"] in ids]
    offered = sum(l["offered_pkts"] for l in links)
    out["loss_ratio"] = sum(l["dropped_pkts"] for l in links) / offered if offered else 0.0
    out["utilization"] = sum(l["utilization"] for l in links) / len(links) if links else float("nan")
    out["mean_queue_pkts"] = sum(l["mean_queue_pkts"] for l in links) / len(links) if links else float("nan")
    out["max_queue_pkts"] = _largest([l["max_queue_pkts"] for l in links])
    # Mean packet size on the link from its own counters, so the delay needs no assumption.
    delays = [
        l["mean_queue_pkts"] * (l["tx_bytes"] / l["tx_pkts"]) * 8 / l["rate_bps"]
        for l in links
        if l["tx_pkts"]
    ]
    out["mean_queue_delay_s"] = sum(delays) / len(delays) if delays else float("nan")
    return out
