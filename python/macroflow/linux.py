"""The Linux engine (issue 15): a scenario's topology as network namespaces on this machine, real
kernel TCP between them, and the same Arrow tables as the simulator.

    macroflow run --engine linux scenarios/coupled_vs_uncoupled_dumbbell.toml

How a scenario becomes a testbed (every name and address is derived here, in :func:`plan`):

- **Nodes**: one namespace per host and router (``mfl<pid>r<run>-n<i>``), each with its node
  address ``10.255.x.y/32`` on ``lo``, forwarding on, IPv6 off, static routes (shortest paths in
  hops, as the simulator's) with that address as source, and static neighbour entries (no ARP).
- **Links**: a duplex link is one veth pair; each end's egress has the link's rate and queue: a
  ``tbf`` (``stab overhead -14``, so rate and byte limits count IP bytes as the simulator does)
  with a ``pfifo`` or ``bfifo`` child. A link with a delay or random loss passes through the
  run's wire namespace (``...-w``), where its two halves are joined with the propagation delay
  and the random loss: by ``netem`` on a bridge when the kernel has netem, else by the userspace
  delay line (``crates/linux``); this machine's kernel has no netem (:func:`capabilities` says
  what is there, and ``MACROFLOW_LINUX_DELAY=delayline|netem`` chooses).
- **Traffic and measurement**: one agent per node (``crates/linux``, the same build as this
  module's ``_native``): TCP senders with a kernel congestion control per flow, sinks, UDP and web
  traffic from the simulator's own generators, TCP_INFO and qdisc samples.

Everything is checked before anything is created (:func:`check`: a feature the engine or this
kernel cannot do is a :class:`LinuxEngineError` naming the field), and everything created is
removed on success, failure, Ctrl-C and SIGTERM; a run also removes what runs of dead processes
left (:func:`remove_stale`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa

from macroflow.scenario import Dumbbell, Graph, MediaFlow, ParkingLot, Scenario, ScenarioError, TcpFlow, UdpFlow, WebFlow

__all__ = ["LinuxEngineError", "check", "plan", "capabilities", "run", "remove_stale", "live_namespaces", "KERNEL_CC"]


class LinuxEngineError(ScenarioError):
    """The Linux engine cannot run a scenario (a feature it or this kernel lacks, a missing tool or
    privilege) or a run failed; the message names the field or the step."""


#: The kernel's counterpart of each simulator congestion control (a flow's ``cc``); a flow may name
#: any kernel one with ``linux_cc`` instead.
KERNEL_CC = {"newreno": "reno", "newreno_abc": "reno", "reno_int": "reno", "cubic": "cubic", "vegas": "vegas"}
#: ctrlTCP in the kernel (issue 16): the BPF congestion control coupled flows run.
CCC_NAME = "macroflow_ccc"
#: Group kinds the kernel runs as macroflow_ccc (ctrlTCP in whole packets: the _int modes'
#: arithmetic; the float modes differ from it only by rounding).
CCC_KINDS = frozenset({"ccc", "ccc_handover", "ccc_int", "ccc_handover_int"})
#: A coupled flow's cc: macroflow_ccc runs the kernel's NewReno per connection.
RENO_CCS = frozenset({"newreno", "newreno_abc", "reno_int"})
#: Namespaces a run may create (nodes plus the wire namespace): each costs processes and memory.
MAX_NODES = 64
#: The shortest sampling interval the agents keep (they wake once per interval).
MIN_SAMPLE_INTERVAL_S = 0.01
#: The longest run (a day).
MAX_DURATION_S = 86400.0
#: The fastest link (tbf's rates are 64-bit; the delay line holds its delay to about 1 Gbit/s).
MAX_RATE_BPS = 40e9
#: The slowest link tbf is given (a 1500-byte packet every 12 s).
MIN_RATE_BPS = 1000.0
#: The most web flows a run may draw (the simulator's MAX_WEB_FLOWS).
MAX_WEB_FLOWS = 1_000_000
#: Sinks listen on these ports in every node.
TCP_PORT, UDP_PORT = 5001, 5002
#: The sinks' media reflector (issue 21): media flows' reports come back from it.
MEDIA_PORT = 5003
#: Ethernet header bytes, which tbf would otherwise count on top of the IP packet.
ETH_HEADER_BYTES = 14
#: A frame sent this much after its due time counts as late in the delay line's report.
LATE_THRESHOLD_NS = 500_000
PREFIX = "mfl"
_NAME = re.compile(rf"^{PREFIX}(\d+)r(\d+)-")


# --------------------------------------------------------------------------------------------
# The plan: the testbed a scenario becomes, computed without touching the system.


@dataclass
class Queue:
    """A drop-tail queue in packets or bytes, and the random loss before it (the delay line's)."""

    limit_pkts: Optional[int]
    limit_bytes: Optional[int]
    loss: float = 0.0


@dataclass
class Link:
    """One direction of a link, numbered as the simulator numbers it."""

    id: int
    src: int
    dst: int
    rate_bps: float
    delay_s: float
    queue: Queue
    duplex: int  # index of the veth pair (one per duplex or simplex link)


@dataclass
class Pair:
    """A veth pair (through the wire namespace when either direction has delay or loss)."""

    index: int
    a: int
    b: int
    ab: Optional[Link] = None
    ba: Optional[Link] = None

    @property
    def wired(self) -> bool:
        return any(l is not None and (l.delay_s > 0 or l.queue.loss > 0) for l in (self.ab, self.ba))

    @property
    def dev(self) -> str:
        """The interface's name at either end (each end is in its own node's namespace)."""
        return f"e{self.index}"

    def addr(self, node: int) -> str:
        """The link address of `node`'s end (10.<hi>.<lo>.1 or .2 on a /30)."""
        hi, lo = divmod(self.index, 256)
        return f"10.{hi}.{lo}.{1 if node == self.a else 2}"

    def mac(self, node: int, wire: bool = False) -> str:
        hi, lo = divmod(self.index, 256)
        return f"02:00:{1 if wire else 0:02x}:{hi:02x}:{lo:02x}:{0x0a if node == self.a else 0x0b:02x}"


@dataclass
class Seat:
    """A coupled flow's place: its scenario group (index among the coupled groups), priority,
    whether the group uses handover, and its priority changes (at_s, priority)."""

    group: int
    priority: float
    handover: bool
    changes: List[Tuple[float, float]] = field(default_factory=list)


@dataclass
class FseSeat:
    """A media flow's place in an FSE group served by macroflowd: the group's name (its label),
    algorithm, the flow's priority and its priority changes (at_s, priority)."""

    group: str
    algorithm: str
    priority: float
    changes: List[Tuple[float, float]] = field(default_factory=list)


@dataclass
class Plan:
    """The testbed of a scenario: nodes (simulator names), links in simulator id order, veth
    pairs, next hops, and each flow's ends."""

    nodes: List[str]
    links: List[Link]
    pairs: List[Pair]
    measured: List[int]
    #: (node, dst node) -> pair index of the first hop.
    next_hop: Dict[Tuple[int, int], int]
    ends: List[Tuple[int, int]]  # per scenario flow (web workloads too)
    kernel_cc: Dict[int, str]  # scenario flow index -> kernel congestion control
    #: Where this testbed will not behave as the simulator does (recorded as warnings of the run).
    notes: List[str] = field(default_factory=list)
    #: What makes the wires' delay and random loss: "netem" or "delay line" (:func:`check` chooses
    #: from what the kernel has; the plan alone assumes the delay line).
    delay: str = "delay line"
    #: Coupled TCP flows (scenario flow index -> seat): they run macroflow_ccc.
    seats: Dict[int, "Seat"] = field(default_factory=dict)
    #: Media flows in FSE groups (scenario flow index -> seat, its group index the scenario
    #: group's name): macroflowd serves them (issue 21).
    fse: Dict[int, "FseSeat"] = field(default_factory=dict)

    def path_delay_s(self, a: int, b: int) -> float:
        """The propagation delay from node `a` to node `b` along the routes."""
        by_pair_dir = {(l.duplex, l.src): l for l in self.links}
        total, n, hops = 0.0, a, 0
        while n != b and hops <= len(self.nodes):
            pr = self.pairs[self.next_hop[(n, b)]]
            total += by_pair_dir[(pr.index, n)].delay_s
            n = pr.b if n == pr.a else pr.a
            hops += 1
        return total

    def node_addr(self, n: int) -> str:
        hi, lo = divmod(n + 1, 256)
        return f"10.255.{hi}.{lo}"


def _queue(spec: Optional[Dict[str, Any]], pkts: Optional[int], default_pkts: int, loss: float, where: str) -> Queue:
    """A link's queue from the scenario's keywords or spec, or LinuxEngineError naming `where`."""
    if spec is None:
        return Queue(pkts if pkts is not None else default_pkts, None, loss)
    kind = spec.get("kind")
    if kind == "random_drop":
        inner = _queue(spec.get("inner"), None, default_pkts, 0.0, f"{where}.inner")
        # Nested random drops are independent: a packet passes both with (1-p)(1-q).
        return Queue(inner.limit_pkts, inner.limit_bytes, 1 - (1 - float(spec["p"])) * (1 - inner.loss))
    if kind == "drop_tail":
        p, b = spec.get("limit_pkts"), spec.get("limit_bytes")
        if p is None and b is None:
            p = default_pkts
        return Queue(int(p) if p is not None else None, int(b) if b is not None else None, loss)
    raise LinuxEngineError(
        f"{where}.kind = {kind!r}: the linux engine has drop_tail (pfifo/bfifo behind tbf) and random_drop "
        f"(in the delay line); this kernel has no red, codel or fq, and wrr/drr/rio/token_bucket/loss_period "
        f"are the simulator's")


def _expand(sc: Scenario) -> Tuple[List[str], List[Link], List[Pair], Dict[str, int]]:
    """Nodes, directed links (in the simulator's id order: each duplex link adds a->b then b->a),
    veth pairs, and link ids by measure name, mirroring the simulator's topology builders."""
    t = sc.topology
    nodes: List[str] = []
    links: List[Link] = []
    pairs: List[Pair] = []
    names: Dict[str, int] = {}

    def node(name: str) -> int:
        nodes.append(name)
        return len(nodes) - 1

    def duplex(a: int, b: int, rate: float, delay: float, q: Queue, both: bool = True) -> Tuple[int, Optional[int]]:
        p = Pair(len(pairs), a, b)
        pairs.append(p)
        p.ab = Link(len(links), a, b, rate, delay, q, p.index)
        links.append(p.ab)
        if both:
            p.ba = Link(len(links), b, a, rate, delay, q, p.index)
            links.append(p.ba)
        return p.ab.id, (p.ba.id if p.ba else None)

    if isinstance(t, Dumbbell):
        left, right = node("R1"), node("R2")
        q = _queue(t.queue, t.queue_pkts, 83, t.random_drop, "topology.queue")
        fwd, rev = duplex(left, right, t.bottleneck_rate_bps, t.bottleneck_delay_s, q)
        names.update(bottleneck=fwd, reverse=rev)  # type: ignore[arg-type]
        delays = t.access_delays_s if t.access_delays_s is not None else [0.001] * t.pairs
        for i in range(t.pairs):
            s, r = node(f"S{i + 1}"), node(f"D{i + 1}")
            duplex(s, left, t.access_rate_bps, delays[i], Queue(10_000, None))  # the bindings' access queue
            duplex(right, r, t.access_rate_bps, delays[i], Queue(10_000, None))
    elif isinstance(t, ParkingLot):
        q = _queue(t.queue, t.queue_pkts, 1000, 0.0, "topology.queue")
        routers = []
        for i in range(t.hops + 1):
            r, h = node(f"R{i}"), node(f"H{i}")
            duplex(h, r, t.access_rate_bps, t.access_delay_s, Queue(10_000, None))
            routers.append(r)
        for i in range(t.hops):
            names[f"hop{i}"] = duplex(routers[i], routers[i + 1], t.rate_bps, t.delay_s, q)[0]
    else:
        ids = {n: node(n) for n in t.nodes}
        for i, l in enumerate(t.links):
            q = _queue(l.queue, l.queue_pkts, 1000, 0.0, f"topology.links.{i}.queue")
            f, r = duplex(ids[l.from_], ids[l.to], l.rate_bps, l.delay_s, q, l.duplex)
            names[f"{l.from_}->{l.to}"] = f
            if r is not None:
                names[f"{l.to}->{l.from_}"] = r
    return nodes, links, pairs, names


def _next_hops(n_nodes: int, links: List[Link], pairs: List[Pair]) -> Dict[Tuple[int, int], int]:
    """For every (node, destination) the pair of its first hop: a breadth-first search backwards
    from each destination over directed links, the lowest link id among the links one hop closer
    (the simulator's rule: shortest paths in hops)."""
    out: Dict[Tuple[int, int], int] = {}
    for d in range(n_nodes):
        dist = _hops_to(links, d)
        for l in sorted(links, key=lambda l: l.id):
            if l.src in dist and l.dst in dist and l.src != d and dist[l.dst] == dist[l.src] - 1:
                out.setdefault((l.src, d), l.duplex)
    return out


def _hops_to(links: List[Link], d: int) -> Dict[int, int]:
    """Each node's distance in hops to `d` over the directed links (those that cannot reach `d`
    are absent)."""
    into: Dict[int, List[Link]] = {}
    for l in links:
        into.setdefault(l.dst, []).append(l)
    dist, frontier = {d: 0}, deque([d])
    while frontier:
        v = frontier.popleft()
        for l in into.get(v, []):
            if l.src not in dist:
                dist[l.src] = dist[v] + 1
                frontier.append(l.src)
    return dist


def plan(sc: Scenario) -> Plan:
    """The testbed `sc` becomes, or LinuxEngineError naming the first field the engine cannot do.
    Touches nothing on the system (see :func:`check` for what this kernel has)."""
    for i, f in enumerate(sc.flows):
        if isinstance(f, MediaFlow) and f.source == "video":
            raise LinuxEngineError(
                f"flows.{i}.source = 'video': the linux engine's media flows send greedy or app_limited "
                f"sources; the video trace source runs in the simulator only")
        g = sc.group(getattr(f, "group", None))
        if g is not None and g.is_fse and not isinstance(f, MediaFlow):
            raise LinuxEngineError(
                f"flows.{i}: TCP flows in FSE group {g.name!r} run in the simulator only; on the linux engine "
                f"macroflowd couples media flows, and the kernel couples TCP flows with ctrlTCP (macroflow_ccc)")
        if g is not None and g.kind == "measured":
            raise LinuxEngineError(f"flows.{i}: measured groups run in the simulator only")
    for i, f in enumerate(sc.flows):
        if isinstance(f, TcpFlow) and not f.delayed_ack:
            raise LinuxEngineError(f"flows.{i}.delayed_ack = false: the kernel's receiver delays ACKs as it decides; "
                                   f"an ACK per segment is the simulator's only")
    for i, g in enumerate(sc.groups):
        if g.couples and g.max_burst_pkts:
            raise LinuxEngineError(f"groups.{i}.max_burst_pkts = {g.max_burst_pkts:g}: macroflow_ccc's burst limit is set "
                                   f"when it is loaded, for every group (the engine runs it without one)")
        if g.couples and g.kind not in CCC_KINDS and not g.is_fse:
            raise LinuxEngineError(
                f"groups.{i}.kind = {g.kind!r}: the kernel couples connections with ctrlTCP (macroflow_ccc, "
                f"kinds {sorted(CCC_KINDS)}); {g.kind!r} runs in the simulator only")
    t = sc.topology
    jitter = [("topology.access_jitter_s", getattr(t, "access_jitter_s", 0.0))] + [
        (f"topology.links.{i}.jitter_s", l.jitter_s) for i, l in enumerate(getattr(t, "links", []))]
    for where, j in jitter:
        if j:
            raise LinuxEngineError(f"{where} = {j:g}: the sending jitter is the simulator's stand-in for a real "
                                   f"host's timing noise; the linux engine's hosts have their own (and its delay "
                                   f"line adds none)")
    if sc.duration_s > MAX_DURATION_S:
        raise LinuxEngineError(f"duration_s = {sc.duration_s}: the linux engine runs in real time, at most {MAX_DURATION_S:g} s")
    if 0 < sc.sample_interval_s < MIN_SAMPLE_INTERVAL_S:
        raise LinuxEngineError(
            f"sample_interval_s = {sc.sample_interval_s}: the linux engine samples at most every {MIN_SAMPLE_INTERVAL_S} s")
    nodes, links, pairs, names = _expand(sc)
    if len(nodes) + 1 > MAX_NODES:
        raise LinuxEngineError(
            f"topology: {len(nodes)} nodes; the linux engine creates a namespace per node and runs at most {MAX_NODES - 1}")
    for l in links:
        if not MIN_RATE_BPS <= l.rate_bps <= MAX_RATE_BPS:
            raise LinuxEngineError(f"topology: link {nodes[l.src]}->{nodes[l.dst]} at {l.rate_bps:g} bit/s; the linux engine "
                                   f"shapes {MIN_RATE_BPS:g} to {MAX_RATE_BPS:g} bit/s")
    kernel_cc: Dict[int, str] = {}
    seats: Dict[int, Seat] = {}
    notes: List[str] = []
    coupled_groups = [g.name for g in sc.groups if g.couples]
    for i, f in enumerate(sc.flows):
        g = sc.group(getattr(f, "group", None))
        if isinstance(f, TcpFlow) and g is not None and g.couples:
            allowed = ["reno_int"] if g.kind.endswith("_int") else sorted(RENO_CCS)
            if f.cc not in allowed or f.linux_cc not in (None, CCC_NAME):
                key = "linux_cc" if f.linux_cc not in (None, CCC_NAME) else "cc"
                raise LinuxEngineError(
                    f"flows.{i}.{key}: a flow of coupled group {g.name!r} runs macroflow_ccc, ctrlTCP over the kernel's "
                    f"NewReno: its cc must be one of {allowed} (as the simulator's {g.kind} takes) and linux_cc unset")
            seats[i] = Seat(coupled_groups.index(g.name), f.priority, g.kind in ("ccc_handover", "ccc_handover_int"))
            kernel_cc[i] = CCC_NAME
            continue
        if isinstance(f, (TcpFlow, WebFlow)):
            cc = f.linux_cc or KERNEL_CC.get(f.cc)
            if cc is None:
                raise LinuxEngineError(
                    f"flows.{i}.cc = {f.cc!r}: the kernel has no counterpart of the simulator's {f.cc}; name a kernel "
                    f"one with flows.{i}.linux_cc (counterparts: {KERNEL_CC})")
            kernel_cc[i] = cc
            if f.linux_cc is None and f.cc == "newreno":
                notes.append(f"flows.{i}: the simulator's newreno grows by a/cwnd per ACK; kernel reno counts acknowledged "
                             f"segments (the simulator's newreno_abc), which with delayed ACKs grows twice as fast")
        if isinstance(f, WebFlow):
            end = f.end_s if f.end_s is not None else sc.duration_s
            expected = f.load_bps * max(0.0, min(end, sc.duration_s) - f.start_s) / (8 * f.mean_size_bytes)
            if expected > MAX_WEB_FLOWS:
                raise LinuxEngineError(f"flows.{i}.load_bps = {f.load_bps:g}: about {expected:.3g} web flows in the run; "
                                       f"at most {MAX_WEB_FLOWS:g}")
    if isinstance(sc.topology, Dumbbell):
        ends = [(1 + 2 * f.pair + 1, 1 + 2 * f.pair + 2) for f in sc.flows]  # S{pair+1}, D{pair+1}
    else:
        ids = {n: i for i, n in enumerate(nodes)}
        ends = [(ids[f.src], ids[f.dst]) for f in sc.flows]
    measured = sc.measure_links if sc.measure_links is not None else (
        ["bottleneck"] if isinstance(sc.topology, Dumbbell) else list(names))
    hops = _next_hops(len(nodes), links, pairs)
    for i, (a, b) in enumerate(ends):
        if (a, b) not in hops:
            raise LinuxEngineError(f"flows.{i}: no route from {nodes[a]} to {nodes[b]}")
        if isinstance(sc.flows[i], (TcpFlow, WebFlow)) and (b, a) not in hops:
            raise LinuxEngineError(f"flows.{i}: no route back from {nodes[b]} to {nodes[a]} for the ACKs")
    notes += _path_notes(nodes, links, pairs, hops, ends, sc)
    if seats:
        notes.append("coupled flows run macroflow_ccc (ctrlTCP in the kernel, over the kernel's NewReno): a handover's "
                     "released segments reach a joiner at its next ACK (a BPF congestion control writes only its own "
                     "socket), not at the releasing ACK as in the simulator")
    fse: Dict[int, FseSeat] = {}
    for i, f in enumerate(sc.flows):
        g = sc.group(getattr(f, "group", None))
        if isinstance(f, MediaFlow) and g is not None and g.is_fse:
            if g.delay_min_s or g.delay_max_s or f.fse_delay_min_s or f.fse_delay_max_s:
                raise LinuxEngineError(
                    f"flows.{i}: an FSE signalling delay is the simulator's; on the linux engine the flow's UPDATE goes "
                    f"to macroflowd over a Unix socket, whose delay is what it is")
            fse[i] = FseSeat(g.name, g.kind, f.priority)
    if fse:
        notes.append("media flows run the simulator's controllers over real UDP; their receiver half runs at the sender "
                     "on the receiver's per-packet reports, a reverse-path propagation delay behind (agent::media)")
    for c in sc.priority_changes:
        if c.flow in seats:
            seats[c.flow].changes.append((c.at_s, c.priority))
        if c.flow in fse:
            fse[c.flow].changes.append((c.at_s, c.priority))
    return Plan(nodes, links, pairs, [names[m] for m in measured], hops, ends, kernel_cc, notes, seats=seats, fse=fse)


def _path_notes(nodes: List[str], links: List[Link], pairs: List[Pair], hops: Dict[Tuple[int, int], int],
                ends: List[Tuple[int, int]], sc: Scenario) -> List[str]:
    """Where paths or queues differ from the simulator's: equal-cost paths (the simulator spreads
    flows over them by a hash; the kernel here takes the first), and a flow whose slowest link is
    its own host's (the queue is then in the sender's qdisc, which TCP Small Queues keep short,
    not in a router's)."""
    out = []
    by_pair_dir = {(l.duplex, l.src): l for l in links}
    for i, (a, b) in enumerate(ends):
        path, n = [], a
        while n != b and len(path) <= len(nodes):
            pr = pairs[hops[(n, b)]]
            path.append(by_pair_dir[(pr.index, n)])
            n = pr.b if n == pr.a else pr.a
        if len(path) > 1 and isinstance(sc.flows[i], (TcpFlow, WebFlow)) and path[0].rate_bps <= min(l.rate_bps for l in path[1:]):
            out.append(f"flows.{i}: its slowest link ({nodes[a]}->{nodes[path[0].dst]}) is its own host's, where TCP Small "
                       f"Queues keep the queue short; in the simulator that queue fills as a router's would")
        elif len(path) == 1 and isinstance(sc.flows[i], (TcpFlow, WebFlow)):
            out.append(f"flows.{i}: {nodes[a]} and {nodes[b]} are neighbours: the link's queue is in the sender's qdisc, "
                       f"where TCP Small Queues keep it short")
    # Equal-cost next hops: more than one link one hop closer to a destination.
    for d in {b for _, b in ends} | {a for a, _ in ends}:
        dd = _hops_to(links, d)
        for v in dd:
            closer = [l for l in links if l.src == v and l.dst in dd and dd[l.dst] == dd[v] - 1]
            if len(closer) > 1:
                out.append(f"topology: {nodes[v]} has {len(closer)} equal-cost next hops towards {nodes[d]}; the simulator "
                           f"spreads flows over them by a hash, this testbed takes the first ({nodes[closer[0].dst]})")
                break
    return out


# --------------------------------------------------------------------------------------------
# What this machine can do, checked at run time.


@dataclass
class Capabilities:
    root: bool
    tools: Dict[str, str]  # tool -> version line ("" when missing)
    qdiscs: Dict[str, bool]
    congestion_controls: List[str]
    kernel: str
    missing: List[str] = field(default_factory=list)
    #: Whether `ip link add ... type bridge` works (the netem wires need it).
    bridge: bool = False

    def describe(self) -> str:
        have = [k for k, v in self.qdiscs.items() if v]
        lack = [k for k, v in self.qdiscs.items() if not v]
        return (f"kernel {self.kernel}; qdiscs present: {', '.join(have)}; absent: {', '.join(lack) or 'none'}; "
                f"congestion controls: {', '.join(self.congestion_controls)}")


#: Qdiscs probed: what the engine uses and what it would use if present.
PROBED_QDISCS = ("tbf", "htb", "pfifo", "bfifo", "netem", "fq", "fq_codel", "red", "sfq", "codel", "prio")
TOOLS = {"ip": ["ip", "-V"], "tc": ["tc", "-V"], "ethtool": ["ethtool", "--version"], "sysctl": ["sysctl", "--version"]}
_CAPS: Optional[Capabilities] = None


def _sh(args: Sequence[str], input: Optional[str] = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    p = subprocess.run(list(args), input=input, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise LinuxEngineError(f"`{' '.join(args)}` failed ({p.returncode}): {(p.stderr or p.stdout).strip()[:2000]}")
    return p


def capabilities(refresh: bool = False) -> Capabilities:
    """Root, the tools, the qdiscs and congestion controls this kernel has (probed in a scratch
    namespace, removed at once), cached per process."""
    global _CAPS
    if _CAPS is not None and not refresh:
        return _CAPS
    tools = {}
    for name, cmd in TOOLS.items():
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            tools[name] = (p.stdout or p.stderr).strip().splitlines()[0] if p.returncode == 0 else ""
        except (OSError, IndexError, subprocess.TimeoutExpired):
            tools[name] = ""
    caps = Capabilities(os.geteuid() == 0, tools, {q: False for q in PROBED_QDISCS}, [], os.uname().release)
    debian = {"ip": "iproute2", "tc": "iproute2", "sysctl": "procps"}
    caps.missing += [f"the tool {t} (Debian: {debian.get(t, t)})" for t, v in tools.items() if not v]
    if not caps.root:
        caps.missing.append("root (network namespaces, qdiscs and AF_PACKET need CAP_NET_ADMIN and CAP_SYS_ADMIN)")
    try:
        caps.congestion_controls = pathlib.Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        caps.missing.append("/proc/sys/net/ipv4/tcp_available_congestion_control")
    if caps.root and tools.get("ip") and tools.get("tc"):
        probe = f"{PREFIX}{os.getpid()}r0-probe"
        _OURS.add(probe)
        try:
            _sh(["ip", "netns", "del", probe], check=False)  # a dead process's of the same pid
            p = _sh(["ip", "netns", "add", probe], check=False)
            if p.returncode != 0:
                caps.missing.append(f"network namespaces (`ip netns add` failed: {p.stderr.strip()})")
            else:
                for q in PROBED_QDISCS:
                    extra = {"tbf": ["rate", "1mbit", "burst", "3000", "limit", "3000"], "htb": ["default", "1"]}.get(q, [])
                    r = _sh(["tc", "-n", probe, "qdisc", "replace", "dev", "lo", "root", q, *extra], check=False)
                    caps.qdiscs[q] = r.returncode == 0
                _sh(["tc", "-n", probe, "qdisc", "del", "dev", "lo", "root"], check=False)
                caps.bridge = _sh(["ip", "-n", probe, "link", "add", "mflbr", "type", "bridge"], check=False).returncode == 0
                caps.missing += [f"the {q} qdisc" for q in ("tbf", "pfifo", "bfifo") if not caps.qdiscs[q]]
        finally:
            _sh(["ip", "netns", "del", probe], check=False)
            _OURS.discard(probe)
    _CAPS = caps
    return caps


def _cc_available(name: str) -> bool:
    """Whether the kernel takes `name` as a socket's congestion control (which also loads a module
    that provides it, as the agents' sockets would)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
            return True
        except OSError:
            return False


def check(sc: Scenario) -> Plan:
    """The plan of `sc` after checking this machine can run it (root, tools, qdiscs, each flow's
    congestion control); LinuxEngineError naming the field or what is missing otherwise. Nothing
    is left on the system (the qdisc probe's scratch namespace is removed at once)."""
    p = plan(sc)
    caps = capabilities()
    if caps.missing:
        raise LinuxEngineError("the linux engine cannot run on this machine: missing " + "; ".join(caps.missing)
                               + f" ({caps.describe() if caps.root else 'not root'})")
    p.delay = delay_method(caps, p)
    if p.delay == "netem" and any(pr.wired and any(l is not None and l.queue.loss > 0 for l in (pr.ab, pr.ba)) for pr in p.pairs):
        p.notes.append("random loss is netem's, drawn from the kernel's generator: not reproducible from the scenario's seed "
                       "(MACROFLOW_LINUX_DELAY=delayline draws it from the seed)")
    if p.seats:
        from macroflow import ccc

        why = ccc.missing()
        if why and not ccc.is_loaded():
            raise LinuxEngineError(f"flows.{min(p.seats)}: coupled flows run macroflow_ccc, which cannot be loaded here: "
                                   + "; ".join(why))
    for i, cc in sorted(p.kernel_cc.items()):
        if cc == CCC_NAME:
            continue  # loaded by the run if it is not loaded yet
        if not _cc_available(cc):
            key = "linux_cc" if sc.flows[i].linux_cc else "cc"  # type: ignore[union-attr]
            raise LinuxEngineError(
                f"flows.{i}.{key}: this kernel has no congestion control {cc!r} (available: "
                f"{' '.join(caps.congestion_controls)}; a module or a loaded BPF one adds more)")
    return p


#: Chooses how the wires make their delay and random loss (issue 15: netem when the kernel has
#: it, the delay line when not).
DELAY_ENV = "MACROFLOW_LINUX_DELAY"


#: netem's limits as iproute2 6.1 passes them: a delay in 32-bit ticks of 64 ns (tc refuses 274.9 s,
#: checked), a 32-bit packet limit.
NETEM_MAX_DELAY_S = 274.0
NETEM_MAX_LIMIT = 2**32 - 1


def delay_method(caps: Capabilities, p: Optional["Plan"] = None) -> str:
    """"netem" when the kernel has netem and bridges (and netem can express every wire of `p`),
    else "delay line"; ``MACROFLOW_LINUX_DELAY`` set to ``netem`` or ``delayline`` chooses (netem
    asked for where it is absent or cannot express a wire is an error)."""
    want = os.environ.get(DELAY_ENV, "").strip().lower()
    if want not in ("", "netem", "delayline"):
        raise LinuxEngineError(f"{DELAY_ENV}={want!r}: expected 'netem' or 'delayline' (or unset: netem when present)")
    has = caps.qdiscs.get("netem", False) and caps.bridge
    if want == "netem" and not has:
        raise LinuxEngineError(f"{DELAY_ENV}=netem: this kernel has no " + ("netem qdisc" if not caps.qdiscs.get("netem") else "bridge")
                               + " (leave it unset to use the userspace delay line)")
    if has and want != "delayline" and p is not None:
        for l in p.links:
            if l.delay_s > NETEM_MAX_DELAY_S or _netem_limit_pkts(l) > NETEM_MAX_LIMIT:
                if want == "netem":
                    raise LinuxEngineError(f"{DELAY_ENV}=netem: link {l.id} ({p.nodes[l.src]} -> {p.nodes[l.dst]}): netem holds at "
                                           f"most {NETEM_MAX_DELAY_S:.0f} s and {NETEM_MAX_LIMIT} packets (leave it unset to "
                                           f"use the userspace delay line)")
                return "delay line"
    return "netem" if has and want != "delayline" else "delay line"


def _netem_limit_pkts(l: "Link") -> int:
    """netem's packet limit for a wire direction: more than the link's rate can put in flight over
    the delay (back to back packets of 28 IP bytes, the smallest with a UDP header; tbf counts IP
    bytes), plus tbf's burst: netem never drops for want of room, so its drops are its random loss."""
    return int(l.rate_bps * l.delay_s / (8 * 28)) + 2 * _tbf_burst_bytes(l.rate_bps) // 28 + 1000


def _netem_qdisc(l: "Link") -> str:
    """The netem qdisc (a `tc qdisc` tail) that gives direction `l` its delay and random loss."""
    loss = f" loss random {l.queue.loss * 100:.10g}%" if l.queue.loss > 0 else ""
    return f"netem delay {int(round(l.delay_s * 1e6))}us limit {_netem_limit_pkts(l)}{loss}"


def netem_commands(p: Plan) -> Tuple[List[str], List[str]]:
    """The wire namespace's `ip` and `tc` batch lines when netem makes the delay: per wired pair a
    bridge joining its two halves, and on each half's egress the netem of the direction that
    leaves through it (w<i>b carries a -> b, w<i>a carries b -> a)."""
    ip, tc = [], []
    for pr in p.pairs:
        if not pr.wired:
            continue
        br = f"b{pr.index}"
        ip += [f"link add {br} type bridge stp_state 0 forward_delay 0", f"link set {br} up",
               f"link set w{pr.index}a master {br}", f"link set w{pr.index}b master {br}"]
        for l, side in ((pr.ab, "b"), (pr.ba, "a")):
            if l is not None and (l.delay_s > 0 or l.queue.loss > 0):
                tc.append(f"qdisc replace dev w{pr.index}{side} root {_netem_qdisc(l)}")
    return ip, tc


# --------------------------------------------------------------------------------------------
# Names, stale runs, cleanup.

_RUNS = iter(range(1, 1 << 62))
#: Namespaces this process created and has not yet deleted (a namespace named with this
#: process's pid but not here is a dead process's that had the same pid: stale).
_OURS: set = set()


def live_namespaces(own_only: bool = False) -> List[str]:
    """The namespaces of this engine's runs on the machine (of this process only when `own_only`)."""
    p = _sh(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    mine = [n for n in names if _NAME.match(n)]
    if own_only:
        mine = [n for n in mine if int(_NAME.match(n).group(1)) == os.getpid()]  # type: ignore[union-attr]
    return mine


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespaces(names: Sequence[str]) -> List[str]:
    """Kills every process in each namespace, then deletes them; returns the errors (never raises:
    cleanup must go on)."""
    errors = []
    for ns in names:
        p = _sh(["ip", "netns", "pids", ns], check=False)
        for pid in p.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    for ns in names:
        p = _sh(["ip", "netns", "del", ns], check=False)
        if p.returncode != 0 and "No such file" not in p.stderr:
            errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
        else:
            _OURS.discard(ns)
    return errors


def remove_stale() -> int:
    """Removes the namespaces (and their processes) of runs whose process is gone (killed with
    SIGKILL, or a machine that lost power); returns how many namespaces."""
    def stale(n: str) -> bool:
        pid = int(_NAME.match(n).group(1))  # type: ignore[union-attr]
        return n not in _OURS if pid == os.getpid() else not _alive(pid)

    names = [n for n in live_namespaces() if stale(n)]
    _delete_namespaces(names)
    return len(names)


class _Terminated(SystemExit):
    """SIGTERM or SIGHUP during a run: unwinds through the cleanup, then exits 128 + signal."""


# --------------------------------------------------------------------------------------------
# The testbed.

#: Loads the engine's native module by path in a bare interpreter (no site, no package import: an
#: agent starts in tens of milliseconds) and runs one of crates/linux's programs.
_BOOT = (
    "import sys, importlib.util as u\n"
    "s = u.spec_from_file_location('macroflow._native', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
    "m._linux_main(sys.argv[2:])\n"
)

#: Per-namespace kernel settings: what the simulator does not model is turned off where Linux
#: allows (ECN, the metrics cache, slow start after idle), buffers that never limit a flow.
NODE_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.tcp_ecn": "0",
    "net.ipv4.tcp_slow_start_after_idle": "0",
    "net.ipv4.tcp_rmem": "4096 131072 33554432",
    "net.ipv4.tcp_wmem": "4096 16384 33554432",
}
WIRE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1",
                # netem's bridges: bridged frames bypass netfilter where br_netfilter is loaded.
                "net.bridge.bridge-nf-call-iptables": "0", "net.bridge.bridge-nf-call-ip6tables": "0",
                "net.bridge.bridge-nf-call-arptables": "0"}
#: Offloads off on every veth: segments of one MSS as the simulator sends them, checksums in
#: software (the delay line copies frames between interfaces).
OFFLOADS = ["tso", "off", "gso", "off", "gro", "off", "tx", "off"]


def _tbf_burst_bytes(rate_bps: float) -> int:
    """tbf's bucket: two full frames, or 50 us at the link rate when that is more (fewer timer
    wake-ups at Gbit/s rates); the simulator's link sends one packet at a time."""
    return max(2 * 1514, int(rate_bps / 8 * 50e-6))


class Testbed:
    """The namespaces, links, qdiscs and processes of one run; a context manager that removes all
    of it on exit, whatever the exit."""

    def __init__(self, sc: Scenario, p: Plan, workdir: pathlib.Path):
        self.sc, self.p, self.dir = sc, p, workdir
        #: Coupled flows: macroflow_ccc's socket map id and each coupled group's number (run()).
        self.ccc: Optional[Dict[str, Any]] = None
        run = next(_RUNS)
        self.prefix = f"{PREFIX}{os.getpid()}r{run}-"
        self.ns = [f"{self.prefix}n{i}" for i in range(len(p.nodes))]
        self.wire_ns = f"{self.prefix}w"
        self.created: List[str] = []
        self.procs: Dict[str, subprocess.Popen] = {}
        self.cleanup_errors: List[str] = []
        self._old_handlers: Dict[int, Any] = {}

    # -- lifetime
    def __enter__(self) -> "Testbed":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        raise _Terminated(128 + signum)

    def __exit__(self, *exc: Any) -> None:
        # A signal during the cleanup is recorded, not acted on, until the cleanup is done: a
        # second Ctrl-C or SIGTERM must not cut it short. (Blocking the signal would not do: a
        # process-directed signal goes to another thread, and Python still runs its handler in
        # the main thread.)
        got: List[int] = []
        main = threading.current_thread() is threading.main_thread()
        during: Dict[int, Any] = {}
        if main:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                during[sig] = signal.signal(sig, lambda signum, frame: got.append(signum))
        try:
            for proc in self.procs.values():
                if proc.poll() is None:
                    proc.kill()
            for proc in self.procs.values():
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.cleanup_errors.append(f"process {proc.pid} did not exit")
            # Also any of this run's namespaces a signal kept from being recorded.
            extra = [n for n in live_namespaces(own_only=True) if n.startswith(self.prefix) and n not in self.created]
            self.cleanup_errors += _delete_namespaces(self.created + extra)
        finally:
            for sig, h in during.items():
                signal.signal(sig, self._old_handlers.get(sig, h))
        if got and exc[0] is None:
            if got[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise _Terminated(128 + got[0])

    # -- building
    def _add_ns(self, name: str, sysctls: Dict[str, str]) -> None:
        # Recorded first: a signal while `ip netns add` runs must not leave it unknown.
        self.created.append(name)
        _OURS.add(name)
        _sh(["ip", "netns", "add", name])
        # -e: a kernel booted without IPv6 has no net.ipv6 keys, and needs none of them.
        _sh(["ip", "netns", "exec", name, "sysctl", "-e", "-q", "-w", *[f"{k}={v}" for k, v in sysctls.items()]])

    def build(self) -> None:
        p = self.p
        for ns in self.ns:
            self._add_ns(ns, NODE_SYSCTLS)
        if any(pr.wired for pr in p.pairs):
            self._add_ns(self.wire_ns, WIRE_SYSCTLS)
        links, node_cmds, wire_cmds = [], {i: ["link set lo up"] for i in range(len(p.nodes))}, []
        for pr in p.pairs:
            for n, other in ((pr.a, pr.b), (pr.b, pr.a)):
                dev = pr.dev
                if pr.wired:
                    w = f"w{pr.index}{'a' if n == pr.a else 'b'}"
                    links.append(f"link add {dev} netns {self.ns[n]} address {pr.mac(n)} type veth "
                                 f"peer name {w} netns {self.wire_ns} address {pr.mac(n, wire=True)}")
                    wire_cmds += [f"link set {w} promisc on", f"link set {w} up"]
                elif n == pr.a:
                    links.append(f"link add {dev} netns {self.ns[n]} address {pr.mac(n)} type veth "
                                 f"peer name {pr.dev} netns {self.ns[other]} address {pr.mac(other)}")
                node_cmds[n] += [
                    f"addr add {pr.addr(n)}/30 dev {dev}",
                    f"link set {dev} up",
                    f"neigh replace {pr.addr(other)} lladdr {pr.mac(other)} dev {dev} nud permanent",
                ]
        for n in range(len(p.nodes)):
            node_cmds[n].append(f"addr add {p.node_addr(n)}/32 dev lo")
            for d in range(len(p.nodes)):
                if d == n or (n, d) not in p.next_hop:
                    continue
                pr = p.pairs[p.next_hop[(n, d)]]
                other = pr.b if n == pr.a else pr.a
                node_cmds[n].append(f"route add {p.node_addr(d)}/32 via {pr.addr(other)} dev {pr.dev} src {p.node_addr(n)}")
        _sh(["ip", "-batch", "-"], input="\n".join(links) + "\n")
        for n, cmds in node_cmds.items():
            _sh(["ip", "-n", self.ns[n], "-batch", "-"], input="\n".join(cmds) + "\n")
        if wire_cmds:
            _sh(["ip", "-n", self.wire_ns, "-batch", "-"], input="\n".join(wire_cmds) + "\n")
        for pr in p.pairs:
            for n in (pr.a, pr.b):
                _sh(["ip", "netns", "exec", self.ns[n], "ethtool", "-K", pr.dev, *OFFLOADS])
            if pr.wired:
                for side in "ab":
                    _sh(["ip", "netns", "exec", self.wire_ns, "ethtool", "-K", f"w{pr.index}{side}", *OFFLOADS])
        tc: Dict[int, List[str]] = {}
        for l in p.links:
            dev = p.pairs[l.duplex].dev
            q = l.queue
            child = f"pfifo limit {q.limit_pkts}" if q.limit_bytes is None else f"bfifo limit {q.limit_bytes}"
            tc.setdefault(l.src, []).extend([
                f"qdisc replace dev {dev} root handle 1: stab overhead -{ETH_HEADER_BYTES} tbf rate {int(l.rate_bps)}bit "
                f"burst {_tbf_burst_bytes(l.rate_bps)} limit {max(3028, q.limit_bytes or 0)}",
                f"qdisc replace dev {dev} parent 1:1 handle 10: {child}",
            ])
        for n, cmds in tc.items():
            _sh(["tc", "-n", self.ns[n], "-batch", "-"], input="\n".join(cmds) + "\n")
        if p.delay == "netem" and any(pr.wired for pr in p.pairs):
            ip_cmds, tc_cmds = netem_commands(p)
            _sh(["ip", "-n", self.wire_ns, "-batch", "-"], input="\n".join(ip_cmds) + "\n")
            if tc_cmds:
                _sh(["tc", "-n", self.wire_ns, "-batch", "-"], input="\n".join(tc_cmds) + "\n")

    # -- processes
    def _start(self, name: str, ns: str, kind: str, config: Dict[str, Any]) -> None:
        import macroflow._native as native

        cfg = self.dir / f"{name}.json"
        cfg.write_text(json.dumps(config))
        log = open(self.dir / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(
            ["ip", "netns", "exec", ns, os.environ.get("MACROFLOW_PYTHON", _python()), "-S", "-c", _BOOT,
             str(native.__file__), kind, str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def log(self, name: str) -> str:
        try:
            return (self.dir / f"{name}.log").read_text()[-3000:]
        except OSError:
            return ""

    def start(self, epoch_ns: int) -> None:
        sc, p = self.sc, self.p
        if p.delay == "delay line" and any(pr.wired for pr in p.pairs):
            wires = []
            for pr in p.pairs:
                if not pr.wired:
                    continue
                ab, ba = pr.ab, pr.ba
                wires.append({
                    "name": f"pair{pr.index}", "a": f"w{pr.index}a", "b": f"w{pr.index}b",
                    "delay_ab_ns": int(round(ab.delay_s * 1e9)) if ab else 0,
                    "delay_ba_ns": int(round(ba.delay_s * 1e9)) if ba else 0,
                    "loss_ab": ab.queue.loss if ab else 0.0, "loss_ba": ba.queue.loss if ba else 0.0,
                    "seed": (sc.seed * 1_000_003 + pr.index) % (1 << 64),
                })
            self._start("delayline", self.wire_ns, "delayline", {
                "wires": wires, "ready_path": str(self.dir / "delayline.ready"),
                "report_path": str(self.dir / "delayline.report.json"), "late_threshold_ns": LATE_THRESHOLD_NS})
        if p.fse:
            self._start("fsed", self.ns[0], "fsed", {
                "socket": str(self.fse_socket), "mode": 0o600, "config": self.fse_config(),
                "ready_path": str(self.dir / "fsed.ready")})
        for n in range(len(p.nodes)):
            self._start(f"agent{n}", self.ns[n], "agent", self.agent_config(n, epoch_ns))

    @property
    def fse_socket(self) -> pathlib.Path:
        return self.dir / "fse.sock"

    def fse_config(self) -> str:
        """macroflowd's configuration: each FSE group of the scenario a label with its algorithm."""
        groups = sorted({(s.group, s.algorithm) for s in self.p.fse.values()})
        lines = [f"max_clients = {len(self.p.fse) + 16}", "[default_user]", f"max_flows = {len(self.p.fse) + 16}"]
        for name, alg in groups:
            lines += ["[[group]]", f"key = {json.dumps('label:' + name)}", f"algorithm = {json.dumps(alg)}"]
        return "\n".join(lines) + "\n"

    def stop_fsed(self) -> None:
        proc = self.procs.get("fsed")
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def agent_config(self, n: int, epoch_ns: int) -> Dict[str, Any]:
        sc, p = self.sc, self.p
        tcp, udp, web = [], [], []
        udp_ids = 0
        tcp_ids = 0
        for i, f in enumerate(sc.flows):
            src, dst = p.ends[i]
            # A flow that starts at or after the end never runs (the simulator's stays pending):
            # not given to the agent, a row of zeros in the tables.
            if isinstance(f, TcpFlow):
                if src == n and f.start_s < sc.duration_s:
                    tcp.append({"flow": tcp_ids, "dst": p.node_addr(dst), "port": TCP_PORT, "cc": p.kernel_cc[i],
                                "start_s": f.start_s, "size_bytes": f.size_bytes, "dscp": f.dscp})
                    seat = p.seats.get(i)
                    if seat is not None:
                        assert self.ccc is not None, "run() sets the groups before the agents start"
                        tcp[-1]["ccc"] = {"group": self.ccc["groups"][seat.group], "priority": seat.priority,
                                          "handover": seat.handover,
                                          "changes": [{"at_s": t, "priority": q} for t, q in seat.changes]}
                tcp_ids += 1
            elif isinstance(f, UdpFlow):
                if src == n and f.start_s < sc.duration_s:
                    udp.append({"flow": udp_ids, "dst": p.node_addr(dst), "port": UDP_PORT, "start_s": f.start_s,
                                "kind": f.kind, "rate_bps": f.rate_bps, "load_bps": f.load_bps, "dscp": f.dscp,
                                # Past the run's end it changes nothing (the agent refuses times
                                # beyond its limit, so none is sent).
                                "end_s": f.end_s if f.end_s is not None and f.end_s < sc.duration_s else None,
                                "seed": _udp_seed(sc.seed, udp_ids)})
                udp_ids += 1
        media = []
        for k, (i, f) in enumerate((i, f) for i, f in enumerate(sc.flows) if isinstance(f, MediaFlow)):
            src, dst = p.ends[i]
            if src != n or f.start_s >= sc.duration_s:
                continue
            seat = p.fse.get(i)
            back = p.path_delay_s(dst, src)
            media.append({
                "flow": k, "dst": p.node_addr(dst), "port": MEDIA_PORT, "controller": f.controller,
                "packet_bytes": f.packet_bytes, "source": f.source, "rate_bps": f.rate_bps,
                "pauses": [[a, b] for a, b in f.pauses], "start_s": f.start_s, "dscp": 0,
                "feedback_delay_s": back, "base_rtt_s": p.path_delay_s(src, dst) + back,
                **({"fse": {"socket": str(self.fse_socket), "group": seat.group, "algorithm": seat.algorithm,
                            "priority": seat.priority,
                            "changes": [{"at_s": t, "priority": q} for t, q in seat.changes]}} if seat else {}),
            })
        for w, (i, f) in enumerate((i, f) for i, f in enumerate(sc.flows) if isinstance(f, WebFlow)):
            src, dst = p.ends[i]
            if src == n and f.start_s < sc.duration_s:
                # Flows drawn after the end would not run: the draws stop there.
                end_s = min(f.end_s if f.end_s is not None else sc.duration_s, sc.duration_s)
                web.append({"workload": w, "dst": p.node_addr(dst), "port": TCP_PORT, "load_bps": f.load_bps,
                            "mean_size_bytes": f.mean_size_bytes, "pareto_shape": f.pareto_shape, "start_s": f.start_s,
                            "end_s": end_s, "cc": p.kernel_cc[i], "seed": (sc.seed * 104729 + i) % (1 << 64)})
        qdiscs = [{"link": l.id, "dev": p.pairs[l.duplex].dev, "sample": l.id in p.measured and sc.sample_interval_s > 0}
                  for l in p.links if l.src == n]
        return {
            "epoch_ns": epoch_ns, "duration_s": sc.duration_s, "sample_interval_s": sc.sample_interval_s,
            "ready_path": str(self.dir / f"agent{n}.ready"), "report_path": str(self.dir / f"agent{n}.report.json"),
            "sink": {"tcp_port": TCP_PORT, "udp_port": UDP_PORT, "media_port": MEDIA_PORT}, "tcp": tcp, "udp": udp,
            "web": web, "media": media, "qdiscs": qdiscs,
            **({"ccc_map_id": self.ccc["map_id"]} if self.ccc is not None and any("ccc" in t for t in tcp) else {}),
        }

    def wait_ready(self, deadline_ns: int) -> None:
        for name in self.procs:
            path = self.dir / f"{name}.ready"
            while not path.exists():
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise LinuxEngineError(f"the {name} process exited ({proc.returncode}) before it was ready:\n{self.log(name)}")
                if time.monotonic_ns() > deadline_ns:
                    raise LinuxEngineError(f"the {name} process was not ready in time (host overloaded?):\n{self.log(name)}")
                time.sleep(0.005)

    def wait_agents(self, deadline_ns: int) -> None:
        for name, proc in self.procs.items():
            if name in ("delayline", "fsed"):
                continue
            left = max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9)
            try:
                rc = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise LinuxEngineError(f"the {name} process did not finish by the end of the run:\n{self.log(name)}") from None
            if rc != 0:
                raise LinuxEngineError(f"the {name} process failed ({rc}):\n{self.log(name)}")

    def stop_delay_line(self) -> Optional[Dict[str, Any]]:
        proc = self.procs.get("delayline")
        if proc is None:
            return None
        if proc.poll() is not None:
            raise LinuxEngineError(f"the delay line exited ({proc.returncode}) during the run:\n{self.log('delayline')}")
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise LinuxEngineError(f"the delay line did not stop on SIGTERM:\n{self.log('delayline')}") from None
        if rc != 0:
            raise LinuxEngineError(f"the delay line failed ({rc}):\n{self.log('delayline')}")
        return json.loads((self.dir / "delayline.report.json").read_text())

    def netem_report(self) -> Optional[Dict[str, Any]]:
        """The netem wires' counters at the end of a run (None when netem makes no delay): per
        wire and direction, what it sent and dropped. Its drops are random loss where the
        direction has some (its limit leaves no room for others: :func:`_netem_limit_pkts`), its
        own drops where it has none; with one delay per direction it cannot reorder."""
        if self.p.delay != "netem" or not any(pr.wired for pr in self.p.pairs):
            return None
        r = _sh(["tc", "-n", self.wire_ns, "-s", "-j", "qdisc", "show"])
        try:
            stats = {q["dev"]: q for q in json.loads(r.stdout or "[]") if q.get("root")}
        except (ValueError, KeyError, TypeError) as e:
            raise LinuxEngineError(f"could not read netem's counters ({e}): {r.stdout[:500]}") from None
        wires = []
        for pr in self.p.pairs:
            if not pr.wired:
                continue
            w: Dict[str, Any] = {"name": f"pair{pr.index}"}
            for d, l, side in (("ab", pr.ab, "b"), ("ba", pr.ba, "a")):
                q = stats.get(f"w{pr.index}{side}", {})
                if l is None or (l.delay_s == 0 and l.queue.loss == 0) or q.get("kind") == "noqueue":
                    # No delay nor loss this way: a plain bridged veth, nothing counted here.
                    w[d] = {"shaped": False}
                    continue
                sent, drops, held = int(q.get("packets", 0)), int(q.get("drops", 0)), int(q.get("qlen", 0))
                lossy = l.queue.loss > 0
                w[d] = {"shaped": True, "qdisc": q.get("kind"), "rx_pkts": sent + drops + held, "tx_pkts": sent,
                        "tx_bytes": int(q.get("bytes", 0)), "lost_pkts": drops if lossy else 0,
                        "own_drops_pkts": 0 if lossy else drops, "held_at_end_pkts": held}
            wires.append(w)
        return {"method": "netem", "wires": wires}


def _udp_seed(seed: int, k: int) -> int:
    """The generator seed of the scenario's k-th UDP flow: the scenario's seed plus k. The
    simulator draws every UDP packet from its one generator, seeded with the scenario's seed, so
    when a UDP flow is the simulation's only random source (as in ``sim-vs-linux``) the first UDP
    flow sends exactly the simulator's packets on Linux too: the engines see the same cross
    traffic, and the comparison is paired."""
    return (seed + k) % (1 << 64)


def _python() -> str:
    import sys

    return sys.executable


class _CpuMonitor:
    """The host's CPU use over a run (from /proc/stat, once a second): real TCP is distorted when
    the machine is busy, so a run says when it was (issue 15)."""

    def __init__(self) -> None:
        #: (CLOCK_MONOTONIC ns at the end of the second, busy fraction of that second).
        self.samples: List[Tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _read() -> Tuple[int, int]:
        fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    def _loop(self) -> None:
        last = self._read()
        while not self._stop.wait(1.0):
            now = self._read()
            total, idle = now[0] - last[0], now[1] - last[1]
            if total > 0:
                self.samples.append((time.monotonic_ns(), 1 - idle / total))
            last = now

    def __enter__(self) -> "_CpuMonitor":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


#: A run whose host was this busy in some second gets a warning.
OVERLOAD_BUSY = 0.95


def run(sc: Scenario, progress: Optional[Callable[[float], None]] = None, workdir: Optional[pathlib.Path] = None) -> Dict[str, pa.Table]:
    """Runs a validated scenario on real Linux TCP in network namespaces and returns the
    simulator's tables (see :func:`macroflow.sim.tables`; quantities Linux does not expose are
    null). Raises LinuxEngineError before creating anything when the engine or this machine cannot
    run `sc`. Run-wide facts (engine, kernel, tools, delay-line counters, warnings) are in the
    tables' schema metadata."""
    p = check(sc)
    remove_stale()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="macroflow-linux-")) if workdir is None else workdir
    try:
        with Testbed(sc, p, tmp) as tb, _CpuMonitor() as cpu:
            t0 = time.monotonic()
            ccc_before = _ccc_prepare(tb) if p.seats else None
            tb.build()
            setup_s = time.monotonic() - t0
            procs = len(p.nodes) + 1
            epoch_ns = time.monotonic_ns() + int((1.0 + 0.15 * procs) * 1e9)
            tb.start(epoch_ns)
            tb.wait_ready(epoch_ns - 50_000_000)
            end_ns = epoch_ns + int(sc.duration_s * 1e9)
            while True:
                now = time.monotonic_ns()
                if now >= end_ns:
                    break
                for name, proc in tb.procs.items():
                    if proc.poll() is not None and (name == "delayline" or proc.returncode != 0):
                        raise LinuxEngineError(f"the {name} process exited ({proc.returncode}) during the run:\n{tb.log(name)}")
                if progress is not None and now > epoch_ns:
                    progress((now - epoch_ns) / 1e9)
                time.sleep(min(0.2, max(0.0, (end_ns - now) / 1e9)))
            # Sized flows still open at the end are cut by their agents; give them time to report.
            tb.wait_agents(end_ns + int((10 + 0.5 * procs) * 1e9))
            tb.stop_fsed()
            dl = tb.stop_delay_line() or tb.netem_report()
            reports = [json.loads((tmp / f"agent{n}.report.json").read_text()) for n in range(len(p.nodes))]
            if progress is not None:
                progress(sc.duration_s)
            # Only the seconds of the run itself: set-up, start-up and teardown are busy by nature.
            busy = [b for t, b in cpu.samples if epoch_ns + 10**9 <= t <= end_ns]
            warnings = p.notes + _warnings(busy, reports, dl) + _veth_drops(tb)
            info = {"setup_s": setup_s, "wires": p.delay if any(pr.wired for pr in p.pairs) else None, "cpu_busy_max": max(busy, default=float("nan")),
                    "cpu_busy_mean": sum(busy) / len(busy) if busy else float("nan")}
            if ccc_before is not None:
                info["ccc"] = _ccc_finish(tb, ccc_before, warnings)
        if tb.cleanup_errors:
            raise LinuxEngineError("cleanup failed: " + "; ".join(tb.cleanup_errors))
        return _tables(sc, p, reports, dl, warnings, info)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def _ccc_prepare(tb: "Testbed") -> Dict[str, Any]:
    """Coupled flows: loads macroflow_ccc if it is not loaded (and leaves it loaded: other runs
    may be using it; `macroflow linux unload` removes it), draws a group number per coupled group
    (random, so concurrent runs do not share groups), and returns the counters before the run."""
    import secrets

    from macroflow import ccc

    loaded_here = False
    if ccc.is_loaded():
        ccc.gc()  # groups of earlier runs, empty for 10 s: the program never deletes groups
    else:
        try:
            ccc.load()
            loaded_here = True
        except RuntimeError as e:
            if not ccc.is_loaded():  # another run may have loaded it meanwhile
                raise LinuxEngineError(f"coupled flows need macroflow_ccc: {e}") from e
    st = ccc.status()
    cfg = st.get("config")
    # The scenario's groups have the simulator's defaults: no burst limit beyond the connection's
    # own (handover is set per socket, from the group's kind). A program loaded by hand with other
    # settings would run another experiment than the one the scenario describes.
    if cfg is None:
        raise LinuxEngineError("macroflow_ccc is loaded by an older build, whose settings cannot be read: "
                               "`macroflow linux unload`, then run again (the run loads it)")
    if cfg["max_burst_pkts"] != 0:
        raise LinuxEngineError(f"macroflow_ccc is loaded with a burst limit of {cfg['max_burst_pkts']} packets; the "
                               "scenario's coupled groups have none (as in the simulator): `macroflow linux unload`, "
                               "then run again (the run loads it), or load it with --max-burst 0")
    n = 1 + max(s.group for s in tb.p.seats.values())
    groups: List[int] = []
    while len(groups) < n:
        g = 1 + secrets.randbelow(2**31 - 2)
        if g not in groups:
            groups.append(g)
    tb.ccc = {"map_id": int(_native_ccc_map_id()), "groups": groups}
    return {"stats": st["stats"], "loaded_here": loaded_here, "config": cfg}


def _native_ccc_map_id() -> int:
    from macroflow import _native

    return _native._ccc_socket_map_id()


def _ccc_finish(tb: "Testbed", before: Dict[str, Any], warnings: List[str]) -> Dict[str, Any]:
    """The counters' change over the run (other users of macroflow_ccc on this machine count too);
    a warning for any connection that ran uncoupled or any error of the coupler."""
    from macroflow import ccc

    after = ccc.status()["stats"]
    delta = {k: after[k] - before["stats"].get(k, 0) for k in after}
    uncoupled = {k: v for k, v in delta.items() if k.startswith("uncoupled_") and v}
    errors = {k: v for k, v in delta.items() if k.startswith("errors_") and v}
    if uncoupled:
        warnings.append(f"macroflow_ccc: connections ran uncoupled (plain NewReno) during the run: {uncoupled}")
    if errors:
        warnings.append(f"macroflow_ccc: coupler errors during the run: {errors}")
    return {"loaded_by_run": before["loaded_here"], "loaded_with": before["config"],
            "groups": tb.ccc["groups"] if tb.ccc else [], "counters": delta}


def _veth_drops(tb: "Testbed") -> List[str]:
    """Frames the veths themselves dropped (after a qdisc counted them as sent: a full backlog
    at the receiving end), which no other counter shows."""
    out = []
    names = list(tb.p.nodes) + (["the wire namespace"] if tb.wire_ns in tb.created else [])
    for n, ns in enumerate(tb.ns + ([tb.wire_ns] if tb.wire_ns in tb.created else [])):
        r = _sh(["ip", "-n", ns, "-s", "-j", "link", "show"], check=False)
        try:
            links = json.loads(r.stdout or "[]")
        except ValueError:
            out.append(f"could not read the interface counters of {names[n]}")
            continue
        for l in links:
            st = l.get("stats64", {})
            dropped = st.get("rx", {}).get("dropped", 0) + st.get("tx", {}).get("dropped", 0)
            if dropped and l.get("ifname") != "lo":
                out.append(f"{names[n]}: interface {l.get('ifname')} dropped {dropped} frames (not counted as link drops)")
    return out


def _warnings(busy: List[float], reports: List[Dict[str, Any]], dl: Optional[Dict[str, Any]]) -> List[str]:
    out = []
    hot = [b for b in busy if b > OVERLOAD_BUSY]
    if hot:
        out.append(f"host overloaded: CPU above {OVERLOAD_BUSY:.0%} busy in {len(hot)} of {len(busy)} seconds "
                   f"(real TCP is distorted when senders, the delay line and the kernel compete for CPU)")
    late = sum(r.get("late_samples", 0) for r in reports)
    if late:
        out.append(f"{late} sampling instants taken more than half an interval late")
    for r in reports:
        for e in r.get("errors", []):
            out.append(f"agent: {e}")
        for m in r.get("media", []):
            if m.get("fse_errors"):
                out.append(f"media flow {m['flow']}: {m['fse_errors']} calls to macroflowd failed (it ran on its own "
                           f"controller's rate meanwhile; the first error is in the errors above)")
            if m.get("bad_reports"):
                out.append(f"media flow {m['flow']}: {m['bad_reports']} datagrams at its sender were not its reports")
        if r.get("sink_udp_socket_drops"):
            out.append(f"a UDP sink's socket dropped {r['sink_udp_socket_drops']} datagrams (its receive buffer was full)")
        if r.get("stopped_by_signal"):
            out.append("an agent was stopped by a signal before the end of the run")
    if dl and dl.get("method") == "netem":
        for w in dl["wires"]:
            for d in ("ab", "ba"):
                if w[d].get("own_drops_pkts"):
                    out.append(f"netem {w['name']}.{d}: {w[d]['own_drops_pkts']} frames dropped by netem itself (its limit)")
    elif dl:
        late = sent = 0
        worst = (0, "")
        for w in dl["wires"]:
            for d in ("ab", "ba"):
                s = w[d]
                if s["own_drops_pkts"] or s["reordered_pkts"]:
                    out.append(f"delay line {w['name']}.{d}: {s['own_drops_pkts']} frames dropped by the delay line itself, "
                               f"{s['reordered_pkts']} reordered")
                late, sent = late + s["late_pkts"], sent + s["tx_pkts"]
                worst = max(worst, (s["max_late_ns"], f"{w['name']}.{d}"))
        if late:
            out.append(f"delay line: {late} of {sent} frames left more than {LATE_THRESHOLD_NS / 1e6:g} ms after their due "
                       f"time (the worst {worst[0] / 1e6:.2f} ms late, on {worst[1]})")
        if not dl.get("memory_locked", True) or not all(w[d].get("sched_fifo", True) for w in dl["wires"] for d in ("ab", "ba")):
            out.append("delay line: without real-time priority or locked memory (CAP_SYS_NICE, CAP_IPC_LOCK): its delay is less robust")
    return out


# --------------------------------------------------------------------------------------------
# Reports to the simulator's tables.

_SCHEMAS: Optional[Dict[str, pa.Schema]] = None
#: Columns the kernel does not report (TCP_INFO has no count of drops, timeouts or recoveries, and bursts
#: at an instant are not observable): null in this engine's tables.
NULL_COLUMNS = {"flows": ("lost_pkts", "timeouts", "max_burst_pkts", "burst_hist", "fast_recoveries"), "links": ("max_queue_pkts",)}


def _schemas() -> Dict[str, pa.Schema]:
    """The simulator's table schemas (from an empty simulation), with the columns this engine
    cannot fill made nullable."""
    global _SCHEMAS
    if _SCHEMAS is None:
        from macroflow.sim import Simulation, tables

        out = {}
        for name, t in tables(Simulation().results()).items():
            s = t.schema.remove_metadata()
            for col in NULL_COLUMNS.get(name, ()):
                i = s.get_field_index(col)
                s = s.set(i, s.field(i).with_nullable(True))
            out[name] = s
        _SCHEMAS = out
    return _SCHEMAS


#: Linux tcp_ca_state values.
_CA_OPEN, _CA_DISORDER, _CA_CWR, _CA_RECOVERY, _CA_LOSS = range(5)
#: TCP_INFINITE_SSTHRESH, which the simulator writes as 1e9 (its initial ssthresh).
_INFINITE_SSTHRESH = 0x7FFFFFFF


def _state(ca_state: int, cwnd: int, ssthresh: int) -> str:
    """The simulator's coupling state (SS, CA, FR) of a TCP_INFO sample: fast recovery in
    Recovery, slow start below ssthresh (as after a timeout), congestion avoidance otherwise."""
    if ca_state == _CA_RECOVERY:
        return "FR"
    return "SS" if cwnd < ssthresh else "CA"


def _ssthresh(v: int) -> float:
    return 1e9 if v >= _INFINITE_SSTHRESH else float(v)


def _tables(sc: Scenario, p: Plan, reports: List[Dict[str, Any]], dl: Optional[Dict[str, Any]],
            warnings: List[str], info: Dict[str, Any]) -> Dict[str, pa.Table]:
    schemas = _schemas()
    dur = sc.duration_s
    # TCP flows: the file's, then each web workload's in order (the simulator's numbering).
    file_flows: Dict[int, Tuple[int, int, Dict[str, Any]]] = {}
    web: Dict[Tuple[int, int], Tuple[int, int, Dict[str, Any]]] = {}
    for n, r in enumerate(reports):
        for c, f in enumerate(r["tcp"]):
            if f.get("flow") is not None:
                file_flows[f["flow"]] = (n, c, f)
            else:
                web[(f["workload"], f["index"])] = (n, c, f)
    for k, i in enumerate(i for i, x in enumerate(sc.flows) if isinstance(x, TcpFlow)):
        if k not in file_flows:  # started at or after the end: never ran
            f0 = sc.flows[i]
            file_flows[k] = (p.ends[i][0], -1, {"flow": k, "cc": p.kernel_cc[i], "local_port": 0, "start_s": f0.start_s,  # type: ignore[union-attr]
                                                 "size_bytes": f0.size_bytes, "info": None, "finished_s": None})  # type: ignore[union-attr]
    order = [file_flows[k] for k in sorted(file_flows)] + [web[k] for k in sorted(web)]
    ids = {(n, c): fid for fid, (n, c, _) in enumerate(order)}  # (node, conn index) -> flow id
    # A connection is its sink's (the flow's destination node) peer address and port: the same
    # source port may be reused towards another destination.
    sinks: Dict[Tuple[int, str, int], Dict[str, Any]] = {}
    for n, r in enumerate(reports):
        for s in r["sink_tcp"]:
            sinks[(n, s["peer_addr"], s["peer_port"])] = s
    srtt: Dict[int, List[float]] = {}
    flow_samples: Dict[str, list] = {k: [] for k in schemas["flow_samples"].names}
    for n, r in enumerate(reports):
        s = r["tcp_samples"]
        for k in range(len(s["t_s"])):
            fid = ids[(n, s["conn"][k])]
            cwnd, ssth = s["cwnd_pkts"][k], s["ssthresh_pkts"][k]
            flow_samples["t_s"].append(s["t_s"][k])
            flow_samples["flow"].append(fid)
            flow_samples["cwnd_pkts"].append(float(cwnd))
            flow_samples["ssthresh_pkts"].append(_ssthresh(ssth))
            flow_samples["state"].append(_state(s["ca_state"][k], cwnd, ssth))
            # tcpi_bytes_acked counts the SYN as a byte (and the FIN once acknowledged).
            flow_samples["delivered_bytes"].append(max(0, s["bytes_acked"][k] - 1))
            rtt = s["srtt_us"][k] / 1e6 if s["srtt_us"][k] else None
            flow_samples["srtt_s"].append(rtt)
            if rtt is not None:
                srtt.setdefault(fid, []).append(rtt)
    flow_samples = _sorted_columns(flow_samples, "flow")
    flows = []
    for fid, (n, _, f) in enumerate(order):
        src_addr = p.node_addr(n)
        dst_node = p.ends[_scenario_index(sc, f)][1]
        sink = sinks.get((dst_node, src_addr, f["local_port"]))
        delivered = sink["bytes"] if sink else 0
        start = f["start_s"]
        done = f.get("finished_s")
        fct = done - start if done is not None and f.get("size_bytes") is not None else None
        active = (done if fct is not None else dur) - start
        i = f.get("info") or {}
        rtts = srtt.get(fid) or ([i["rtt_us"] / 1e6] if i.get("rtt_us") else [])
        dst = p.nodes[dst_node]
        flows.append({
            "flow": fid, "src": p.nodes[n], "dst": dst, "cc": f["cc"], "start_s": start, "fct_s": fct,
            "delivered_bytes": delivered, "goodput_bps": delivered * 8 / active if active > 0 else 0.0,
            "data_pkts_sent": i.get("data_segs_out", 0), "retransmits": i.get("total_retrans", 0),
            # TCP_INFO's tcpi_lost is the sender's current estimate, not a count of drops.
            "lost_pkts": None, "timeouts": None, "max_burst_pkts": None, "burst_hist": None, "fast_recoveries": None,
            "mean_rtt_s": sum(rtts) / len(rtts) if rtts else None,
        })
    udp_recv: Dict[int, Dict[str, Any]] = {}
    for r in reports:
        for u in r["sink_udp"]:
            udp_recv[u["flow"]] = u
    udp_flows = []
    udp_sent = {u["flow"]: u for r in reports for u in r["udp"]}
    for k, (i, f) in enumerate((i, f) for i, f in enumerate(sc.flows) if isinstance(f, UdpFlow)):
        sent = udp_sent.get(k, {"pkts": 0, "bytes": 0})  # absent: started at or after the end
        got = udp_recv.get(k, {"pkts": 0, "bytes": 0})
        active = (min(f.end_s, dur) if f.end_s is not None else dur) - f.start_s  # as the simulator
        udp_flows.append({
            "flow": k, "src": p.nodes[p.ends[i][0]], "dst": p.nodes[p.ends[i][1]],
            "sent_pkts": sent["pkts"], "sent_bytes": sent["bytes"], "received_pkts": got["pkts"], "received_bytes": got["bytes"],
            "throughput_bps": got["bytes"] * 8 / active if active > 0 else 0.0,
        })
    # The kernel's counters since each qdisc was made (before the run): the run's are the difference.
    start = {q["link"]: q for r in reports for q in r.get("qdiscs_at_start", [])}
    qfinal = {}
    for r in reports:
        for q in r["qdiscs"]:
            q0 = start.get(q["link"], {})
            qfinal[q["link"]] = dict(q, **{k: q[k] - q0.get(k, 0) for k in ("sent_pkts", "sent_bytes", "drops")})
    qs: Dict[int, List[int]] = {}
    queue_samples: Dict[str, list] = {k: [] for k in schemas["queue_samples"].names}
    for r in reports:
        s = r["qdisc_samples"]
        for k in range(len(s["t_s"])):
            queue_samples["t_s"].append(s["t_s"][k])
            queue_samples["link"].append(s["link"][k])
            queue_samples["pkts"].append(s["qlen_pkts"][k])
            queue_samples["bytes"].append(s["backlog_bytes"][k])
            qs.setdefault(s["link"][k], []).append(s["qlen_pkts"][k])
    queue_samples = _sorted_columns(queue_samples, "link")
    lost = _delay_line_losses(p, dl)
    links = []
    for l in p.links:
        q = qfinal.get(l.id, {})
        sent, drops = q.get("sent_pkts", 0), q.get("drops", 0) + lost.get(l.id, 0)
        offered = sent + q.get("drops", 0) + q.get("qlen_pkts", 0)
        samples = qs.get(l.id)
        links.append({
            "link": l.id, "src": p.nodes[l.src], "dst": p.nodes[l.dst], "rate_bps": int(l.rate_bps),
            "offered_pkts": offered, "dropped_pkts": drops, "tx_pkts": sent - lost.get(l.id, 0), "tx_bytes": q.get("sent_bytes", 0),
            "utilization": q.get("sent_bytes", 0) * 8 / (l.rate_bps * dur), "loss_ratio": drops / offered if offered else 0.0,
            "mean_queue_pkts": sum(samples) / len(samples) if samples else float("nan"),
            # The sampled maximum is only a lower bound of the true one: null, as unobservable.
            "max_queue_pkts": None,
        })
    meta = {
        "engine": "linux", "duration_s": str(dur),
        # What the manifest's "engine" holds (macroflow.results), as one JSON entry.
        "linux": json.dumps({"kernel": capabilities().kernel, "tools": capabilities().tools,
                             "capabilities": capabilities().describe(), "info": info,
                             "delay_line": dl if dl and dl.get("method") != "netem" else {},
                             "netem": dl if dl and dl.get("method") == "netem" else {}, "warnings": warnings}, sort_keys=True),
    }
    media_flows, media_samples = _media_tables(sc, p, reports, schemas)
    rows = {"flows": flows, "udp_flows": udp_flows, "media_flows": media_flows, "links": links}
    out = {name: pa.Table.from_pylist(rows[name], schema=schemas[name]) for name in rows}
    out["flow_samples"] = pa.Table.from_pydict(flow_samples, schema=schemas["flow_samples"])
    out["queue_samples"] = pa.Table.from_pydict(queue_samples, schema=schemas["queue_samples"])
    out["media_samples"] = pa.Table.from_pydict(media_samples, schema=schemas["media_samples"])
    # Measured groups run in the simulator only (plan() refuses them).
    for name in ("detections", "detector_samples", "measured_groups"):
        out[name] = schemas[name].empty_table()
    return {k: v.replace_schema_metadata(meta) for k, v in out.items()}


def _media_tables(sc: Scenario, p: Plan, reports: List[Dict[str, Any]],
                  schemas: Dict[str, pa.Schema]) -> Tuple[List[Dict[str, Any]], Dict[str, list]]:
    """`media_flows` and `media_samples` as the simulator writes them: goodput over the time
    from the flow's start to the end, what arrived as its sink's reflector counted it, the mean
    one-way delay from the reports."""
    sent = {m["flow"]: m for r in reports for m in r.get("media", [])}
    got = {m["flow"]: m for r in reports for m in r.get("sink_media", [])}
    rows: List[Dict[str, Any]] = []
    samples: Dict[str, list] = {k: [] for k in schemas["media_samples"].names}
    for k, (i, f) in enumerate((i, f) for i, f in enumerate(sc.flows) if isinstance(f, MediaFlow)):
        s = sent.get(k, {})
        g = got.get(k, {})
        active = sc.duration_s - f.start_s
        recv_bytes = g.get("bytes", 0)
        rows.append({
            "flow": k, "controller": f.controller, "src": p.nodes[p.ends[i][0]], "dst": p.nodes[p.ends[i][1]],
            "sent_bytes": s.get("sent_bytes", 0), "received_bytes": recv_bytes,
            "goodput_bps": recv_bytes * 8 / active if active > 0 else 0.0,
            "mean_owd_s": s["owd_sum_s"] / s["received_pkts"] if s.get("received_pkts") else None,
        })
        for (t, rate, cc), rb in zip(s.get("samples", []), s.get("received_series", [])):
            samples["t_s"].append(t)
            samples["flow"].append(k)
            samples["rate_bps"].append(rate)
            samples["cc_rate_bps"].append(cc)
            samples["received_bytes"].append(rb)
    return rows, _sorted_columns(samples, "flow") if samples["t_s"] else samples


def _sorted_columns(cols: Dict[str, list], by: str) -> Dict[str, list]:
    """Columns of a time series (from several agents) in the simulator's row order: by time,
    then by `by` (flow or link)."""
    order = sorted(range(len(cols["t_s"])), key=lambda i: (cols["t_s"][i], cols[by][i]))
    return {k: [v[i] for i in order] for k, v in cols.items()}


def _scenario_index(sc: Scenario, f: Dict[str, Any]) -> int:
    """The scenario flow an agent's TCP flow report belongs to: a file flow by its TCP number, a
    web flow by its workload's number."""
    if f.get("flow") is not None:
        return [i for i, x in enumerate(sc.flows) if isinstance(x, TcpFlow)][f["flow"]]
    return [i for i, x in enumerate(sc.flows) if isinstance(x, WebFlow)][f["workload"]]


def _delay_line_losses(p: Plan, dl: Optional[Dict[str, Any]]) -> Dict[int, int]:
    """Random losses the delay line (or netem) applied, by link id (its wires are named pair<index>)."""
    out: Dict[int, int] = {}
    if not dl:
        return out
    for w in dl["wires"]:
        pr = p.pairs[int(w["name"][4:])]
        if pr.ab is not None:
            out[pr.ab.id] = w["ab"].get("lost_pkts", 0)
        if pr.ba is not None:
            out[pr.ba.id] = w["ba"].get("lost_pkts", 0)
    return out
