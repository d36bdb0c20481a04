"""Scenario files (TOML), validated with pydantic, and running them on the simulator.

A scenario describes a topology (the dissertation's dumbbell, a parking lot, or any graph of named
nodes and links), the queue discipline of its links (drop-tail, RED, RIO behind a token bucket,
WRR, DRR, random or periodic loss), coupling groups (TCP couplers, FSE algorithms, or "none" for an
uncoupled baseline), flows (TCP, rate-controlled media, UDP and web cross traffic), priority
changes, the links to measure, duration and seed. :func:`load` validates a file and reports every mistake with
the file, the field path and what was expected; nothing runs on an invalid file. :func:`run`
builds the simulation and returns its results as Arrow tables.

Every field is documented on its model below; ``scenarios/`` has a commented example of each.
"""

from __future__ import annotations

import json
import pathlib
try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]
from typing import Annotated, Any, Callable, Dict, List, Literal, Optional, Tuple, Union

import pyarrow as pa
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from macroflow._native import CONGESTION_CONTROLS, FSE_ALGORITHMS, QUEUE_SPEC_SCHEMA, RATE_CONTROLLERS, TCP_COUPLER_KINDS
from macroflow._native import SimulationInternalError
from macroflow.sim import Simulation, SimulationError, tables

__all__ = ["Scenario", "ScenarioError", "load", "parse", "validate", "run", "json_schema", "PROGRESS_STEPS"]


# Names from the simulator's registries (one list each, in crates/sim): a controller added there is
# valid here, and in the schema, without an edit.
CcName = Literal[CONGESTION_CONTROLS]  # type: ignore[valid-type]
RateControllerName = Literal[RATE_CONTROLLERS]  # type: ignore[valid-type]


class ScenarioError(ValueError):
    """An invalid scenario; the message names the file, the field path and what was expected."""


#: The largest priority (only ratios matter; the coupling crate's bound).
MAX_PRIORITY = 1e12
#: The largest rate in bit/s a source may have.
MAX_RATE_BPS = 1e15
#: The longest time anywhere in a scenario (a duration, start, delay): about 31 years.
MAX_TIME_S = 1e9
#: The most jitter a link may have (the simulator's MAX_JITTER): a per-packet host delay of more
#: than a second is a mistake.
MAX_JITTER_S = 1.0
#: The most time-series samples a run may take (duration / sample interval).
MAX_SAMPLES = 1e7
#: A kernel congestion control's name (TCP_CA_NAME_MAX is 16 bytes with the terminating zero).
LINUX_CC_PATTERN = r"^[A-Za-z0-9_]{1,15}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _check_queue(spec: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A queue spec (see ``Simulation.add_link``) is checked by building it on a scratch link,
    so the file is validated by the same code that runs it."""
    if spec is None:
        return None
    s = Simulation()
    a, b = s.add_node("a"), s.add_node("b")
    try:
        s.add_link(a, b, 1e9, 0.0, queue=spec)
    except SimulationInternalError as e:
        # A bug, not a bad file: pydantic would turn any ValueError into a validation error.
        raise _Internal(e) from e
    except SimulationError as e:
        raise ValueError(str(e)) from None
    return spec


class _Internal(RuntimeError):
    """Carries a SimulationInternalError through pydantic (which passes RuntimeErrors on);
    `validate` re-raises the original."""


#: A queue spec: the simulator reads and checks it, and its Rust type is the one description of
#: the kinds, keys, types and defaults; :func:`json_schema` puts that type's generated schema
#: (``QUEUE_SPEC_SCHEMA``) where pydantic's has this stand-in, so it is stated nowhere here.
QueueSpec = Annotated[Dict[str, Any], AfterValidator(_check_queue), WithJsonSchema({
    "type": "object", "x-macroflow-queue-spec": True,
    "description": "A queue spec: macroflow.QUEUE_SPEC_SCHEMA (scenario.json_schema() embeds it)"})]


class Dumbbell(_Strict):
    """N sender/receiver pairs across one bottleneck (defaults: seed 003's 10 Mbit/s, 100 ms RTT,
    1-BDP queue). Flows give ``pair``; links to measure: ``bottleneck``, ``reverse``."""

    kind: Literal["dumbbell"] = "dumbbell"
    pairs: int = Field(ge=1, le=262143)  # the simulator's MAX_PAIRS
    bottleneck_rate_bps: float = Field(default=10e6, gt=0, le=MAX_RATE_BPS)
    bottleneck_delay_s: float = Field(default=0.048, ge=0, le=MAX_TIME_S)
    #: Drop-tail size of the bottleneck queue (83 packets when neither this nor ``queue`` is given).
    queue_pkts: Optional[int] = Field(default=None, ge=1, le=10**6)  # the simulator's MAX_QUEUE_PKTS
    #: Any queue discipline for the bottleneck, e.g. {kind = "red", limit_pkts = 83}.
    queue: Optional[QueueSpec] = None
    access_rate_bps: float = Field(default=1e9, gt=0, le=MAX_RATE_BPS)
    access_delays_s: Optional[List[Annotated[float, Field(ge=0)]]] = None
    random_drop: float = Field(default=0.0, ge=0, le=1)
    #: The hosts' sending jitter: each packet a host sends (data or ACK) takes longer on its link
    #: to the router by a uniform draw in [0, access_jitter_s], order kept: ns-2's TCP overhead_,
    #: the random processing time that breaks a deterministic simulation's phase effects (Floyd
    #: and Jacobson 1992). Simulator only.
    access_jitter_s: float = Field(default=0.0, ge=0, le=MAX_JITTER_S)

    @model_validator(mode="after")
    def _one_delay_per_pair(self) -> "Dumbbell":
        if self.access_delays_s is not None and len(self.access_delays_s) != self.pairs:
            raise ValueError(f"access_delays_s has {len(self.access_delays_s)} entries for {self.pairs} pairs")
        if self.queue is not None and (self.queue_pkts is not None or self.random_drop):
            raise ValueError("give queue, or queue_pkts/random_drop, not both")
        return self


class ParkingLot(_Strict):
    """Routers R0..R{hops} in a chain, host H{i} on router R{i}: flows give ``src``/``dst`` host
    names (H0 -> H{hops} crosses every hop); links to measure: ``hop0``, ``hop1``, ..."""

    kind: Literal["parking_lot"]
    hops: int = Field(ge=1, le=262143)  # the simulator's MAX_HOPS
    rate_bps: float = Field(default=10e6, gt=0, le=MAX_RATE_BPS)
    delay_s: float = Field(default=0.01, ge=0, le=MAX_TIME_S)
    queue_pkts: Optional[int] = Field(default=None, ge=1, le=10**6)  # the simulator's MAX_QUEUE_PKTS
    queue: Optional[QueueSpec] = None
    access_rate_bps: float = Field(default=1e9, gt=0, le=MAX_RATE_BPS)
    access_delay_s: float = Field(default=0.001, ge=0, le=MAX_TIME_S)
    #: The hosts' sending jitter (see Dumbbell.access_jitter_s). Simulator only.
    access_jitter_s: float = Field(default=0.0, ge=0, le=MAX_JITTER_S)

    @model_validator(mode="after")
    def _one_queue(self) -> "ParkingLot":
        if self.queue is not None and self.queue_pkts is not None:
            raise ValueError("give queue or queue_pkts, not both")
        return self


class GraphLink(_Strict):
    """A link between two named nodes, both directions unless ``duplex = false``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    from_: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    rate_bps: float = Field(gt=0, le=MAX_RATE_BPS)
    delay_s: float = Field(ge=0, le=MAX_TIME_S)
    queue_pkts: Optional[int] = Field(default=None, ge=1, le=10**6)  # the simulator's MAX_QUEUE_PKTS
    queue: Optional[QueueSpec] = None
    duplex: bool = True
    #: Each packet's propagation is longer by a uniform draw in [0, jitter_s], order kept (see
    #: Dumbbell.access_jitter_s), in each direction the link has. Simulator only.
    jitter_s: float = Field(default=0.0, ge=0, le=MAX_JITTER_S)

    @model_validator(mode="after")
    def _one_queue(self) -> "GraphLink":
        if self.queue is not None and self.queue_pkts is not None:
            raise ValueError("give queue or queue_pkts, not both")
        if self.from_ == self.to:
            raise ValueError(f"a link from {self.to!r} to itself")
        return self


class Graph(_Strict):
    """Any topology: named nodes and links; routes are shortest paths. Flows give ``src``/``dst``
    node names; links to measure are named "from->to"."""

    kind: Literal["graph"]
    nodes: List[str] = Field(min_length=2)
    links: List[GraphLink] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> "Graph":
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("node names must be unique")
        for i, l in enumerate(self.links):
            for end in (l.from_, l.to):
                if end not in self.nodes:
                    raise ValueError(f"links[{i}]: {end!r} is not one of the nodes")
        return self


Topology = Annotated[Union[Dumbbell, ParkingLot, Graph], Field(discriminator="kind")]


class Group(_Strict):
    """A coupling group: a TCP coupler (ccc, ccc_handover, their integer window modes ccc_int and
    ccc_handover_int, etcp, efcm: ``TCP_COUPLER_KINDS``) for TCP flows, an FSE
    algorithm (active, conservative_active, simple_passive, passive) for media flows or for TCP
    flows (not both in one group; a TCP flow reports cwnd/SRTT once per round trip, seed 003
    Fig. 6.3), or "none":
    a baseline in which the group's flows run uncoupled (their priorities and priority changes
    then have no effect), so one file can be swept over ``groups.0.kind = none,ccc``; or
    "measured" (simulator only; seed 000): TCP flows start in one macroflow running
    ``coupler``, false-sharing detectors watch every pair, and ``test``'s "no share" splits a pair
    (``respond``), "share" merges it back. Media flows in a measured group (``respond = false``)
    are observed only: each runs its own controller while the detectors watch (RFC 8382's
    media-flow cases)."""

    name: str = Field(min_length=1)
    kind: str
    #: Measured groups: the TCP coupler each macroflow runs (default ccc).
    coupler: Optional[str] = None
    #: Measured groups: the test whose answer the response acts on (default out_of_order, the
    #: seed's sec. 5.2).
    test: Optional[Literal["asymmetric_loss", "symmetric_loss", "delay", "out_of_order", "sbd"]] = None
    #: Measured groups: the correlation tests' confidence level (default 0.9; seed 000 Fig. 11).
    confidence: Optional[float] = Field(default=None, gt=0, lt=1)
    #: Measured groups: split and merge on the test's answers (default true); false: detect only.
    respond: Optional[bool] = None
    #: Measured groups: how long a detection keeps new flows unshared (default 600 s).
    memory_expiry_s: Optional[float] = Field(default=None, gt=0, le=MAX_TIME_S)
    #: FSE signalling delay, uniform in [min, max] (seed 003 Fig. 6.11); FSE groups only. A
    #: flow's fse_delay_min_s/fse_delay_max_s replace it for that flow.
    delay_min_s: float = Field(default=0.0, ge=0, le=MAX_TIME_S)
    delay_max_s: float = Field(default=0.0, ge=0, le=MAX_TIME_S)
    #: TCP couplers: segments beyond its flight a coupler's answer may let a connection send at
    #: once (crates/coupling's tcp module: 0, the default, means never more than its own
    #: controller would). A large value hands a joiner its whole share as one burst, as the
    #: dissertation's ctrlTCP without ack-clocking did (seed 003 Figs. 7.1(a), 9.3).
    max_burst_pkts: float = Field(default=0.0, ge=0, le=1e6)

    @model_validator(mode="after")
    def _known_kind(self) -> "Group":
        if self.kind not in ("none", "measured") and self.kind not in TCP_COUPLER_KINDS and self.kind not in FSE_ALGORITHMS:
            raise ValueError(
                f"kind {self.kind!r} is neither a TCP coupler {TCP_COUPLER_KINDS}, an FSE algorithm {FSE_ALGORITHMS}, "
                f"'measured', nor 'none'"
            )
        measured_only = {k: getattr(self, k) for k in ("coupler", "test", "confidence", "respond", "memory_expiry_s")}
        # Kept on "none" so a file can be swept over groups.0.kind = none,measured.
        if self.kind not in ("measured", "none"):
            for k, v in measured_only.items():
                if v is not None:
                    raise ValueError(f"{k} is for a measured group (kind = 'measured'), not {self.kind!r}")
        elif self.coupler is not None and self.coupler not in TCP_COUPLER_KINDS:
            raise ValueError(f"coupler {self.coupler!r} is not a TCP coupler {TCP_COUPLER_KINDS}")
        if self.delay_max_s < self.delay_min_s:
            raise ValueError("delay_max_s must be >= delay_min_s")
        if (self.delay_min_s or self.delay_max_s) and (self.kind in TCP_COUPLER_KINDS or self.kind == "measured"):
            raise ValueError(f"delay_min_s/delay_max_s: a signalling delay is for FSE groups, not {self.kind!r}")
        if self.max_burst_pkts and self.kind in FSE_ALGORITHMS:
            raise ValueError(f"max_burst_pkts is for TCP coupler groups, not the FSE algorithm {self.kind!r}")
        return self

    @property
    def is_fse(self) -> bool:
        return self.kind in FSE_ALGORITHMS

    @property
    def couples(self) -> bool:
        return self.kind != "none"


class _Endpoints(_Strict):
    """Where a flow runs: ``pair`` on a dumbbell, ``src``/``dst`` node names elsewhere."""

    pair: Optional[int] = Field(default=None, ge=0, le=2046)
    src: Optional[str] = None
    dst: Optional[str] = None
    start_s: float = Field(default=0.0, ge=0, le=MAX_TIME_S)


class TcpFlow(_Endpoints):
    type: Literal["tcp"]
    #: Bytes to send (a flow that completes); bulk when absent.
    size_bytes: Optional[int] = Field(default=None, ge=1, le=2**62)
    cc: CcName = "newreno"
    group: Optional[str] = None
    priority: float = Field(default=1.0, gt=0, le=MAX_PRIORITY)
    #: DSCP of its packets (WRR classifies by it).
    dscp: int = Field(default=0, ge=0, le=63)
    #: The receiver delays ACKs (every second segment, 200 ms timer); false: an ACK per segment,
    #: as ns-2's default TCPSink. Simulator only (the linux engine refuses false).
    delayed_ack: bool = True
    #: In an FSE group: this flow's signalling delay to the FSE, uniform in [min, max], instead of
    #: the group's (seed 003 Fig. 6.11 delays flow 1's signals only). Both or neither.
    fse_delay_min_s: Optional[float] = Field(default=None, ge=0, le=MAX_TIME_S)
    fse_delay_max_s: Optional[float] = Field(default=None, ge=0, le=MAX_TIME_S)
    #: The kernel congestion control on the linux engine (reno, cubic, bbr, a loaded BPF one);
    #: default: cc's counterpart (macroflow.linux.KERNEL_CC). The simulator runs cc.
    linux_cc: Optional[str] = Field(default=None, pattern=LINUX_CC_PATTERN)


class MediaFlow(_Endpoints):
    type: Literal["media"]
    controller: RateControllerName = "nada"
    source: Literal["greedy", "app_limited", "video"] = "greedy"
    rate_bps: Optional[float] = Field(default=None, gt=0, le=MAX_RATE_BPS)
    #: (start, end) seconds in which the application sends nothing.
    pauses: List[Annotated[Tuple[float, float], Field(strict=False)]] = []
    packet_bytes: int = Field(default=1200, ge=40, le=65535)
    group: Optional[str] = None
    priority: float = Field(default=1.0, gt=0, le=MAX_PRIORITY)
    #: As TcpFlow.fse_delay_min_s / fse_delay_max_s.
    fse_delay_min_s: Optional[float] = Field(default=None, ge=0, le=MAX_TIME_S)
    fse_delay_max_s: Optional[float] = Field(default=None, ge=0, le=MAX_TIME_S)

    @model_validator(mode="after")
    def _sane(self) -> "MediaFlow":
        if self.source == "app_limited" and self.rate_bps is None:
            raise ValueError("an app_limited source needs rate_bps")
        for i, (a, b) in enumerate(self.pauses):
            if not 0 <= a < b:
                raise ValueError(f"pauses[{i}] = ({a}, {b}): a pause is (start, end) with 0 <= start < end")
        return self


class UdpFlow(_Endpoints):
    type: Literal["udp"]
    kind: Literal["cbr", "self_similar"] = "cbr"
    rate_bps: Optional[float] = Field(default=None, gt=0, le=MAX_RATE_BPS)
    load_bps: Optional[float] = Field(default=None, gt=0, le=MAX_RATE_BPS)
    dscp: int = Field(default=0, ge=0, le=63)
    #: When it stops sending (default: the end of the run): cross traffic that comes and goes.
    end_s: Optional[float] = Field(default=None, gt=0, le=MAX_TIME_S)

    @model_validator(mode="after")
    def _rate_given(self) -> "UdpFlow":
        if self.kind == "cbr" and self.rate_bps is None:
            raise ValueError("a cbr flow needs rate_bps")
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"end_s = {self.end_s} is not after start_s = {self.start_s}: the flow would send nothing")
        return self


class WebFlow(_Endpoints):
    """Web-like cross traffic: short TCP flows with Poisson arrivals and Pareto sizes, offering
    ``load_bps`` on average until ``end_s`` (default: the end of the run). They are numbered
    after the file's TCP flows."""

    type: Literal["web"]
    load_bps: float = Field(gt=0, le=MAX_RATE_BPS)
    mean_size_bytes: float = Field(default=50e3, gt=0)
    end_s: Optional[float] = Field(default=None, gt=0, le=MAX_TIME_S)
    pareto_shape: float = Field(default=1.2, gt=1)
    cc: CcName = "newreno"
    #: As TcpFlow.linux_cc.
    linux_cc: Optional[str] = Field(default=None, pattern=LINUX_CC_PATTERN)

    @model_validator(mode="after")
    def _ends_after_start(self) -> "WebFlow":
        if self.end_s is not None and self.end_s < self.start_s:
            raise ValueError(f"end_s = {self.end_s} is before start_s = {self.start_s}: the workload would send nothing")
        return self


Flow = Annotated[Union[TcpFlow, MediaFlow, UdpFlow, WebFlow], Field(discriminator="type")]


class PriorityChange(_Strict):
    at_s: float = Field(ge=0, le=MAX_TIME_S)
    flow: int = Field(ge=0, le=2**31, description="index into flows (a coupled TCP flow, or a media flow in an FSE group)")
    priority: float = Field(gt=0, le=MAX_PRIORITY)


def _node_names(t: Union[Dumbbell, ParkingLot, Graph]) -> List[str]:
    if isinstance(t, ParkingLot):
        return [f"{p}{i}" for i in range(t.hops + 1) for p in ("H", "R")]
    if isinstance(t, Graph):
        return list(t.nodes)
    return []


def _link_names(t: Union[Dumbbell, ParkingLot, Graph]) -> List[str]:
    if isinstance(t, Dumbbell):
        return ["bottleneck", "reverse"]
    if isinstance(t, ParkingLot):
        return [f"hop{i}" for i in range(t.hops)]
    names = []
    for l in t.links:
        names.append(f"{l.from_}->{l.to}")
        if l.duplex:
            names.append(f"{l.to}->{l.from_}")
    return names


class Scenario(_Strict):
    #: Also the default output folder of a sweep, so a safe slug (issue 13: "../../x" wrote outside).
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    seed: int = Field(default=1, ge=0, le=2**64 - 1)
    duration_s: float = Field(gt=0, le=MAX_TIME_S)
    #: Period of the time series (per-flow cwnd, rates; queues of measured links); 0: none.
    sample_interval_s: float = Field(default=0.1, ge=0)

    @model_validator(mode="after")
    def _samples_bounded(self) -> "Scenario":
        if 0 < self.sample_interval_s < 1e-6:
            raise ValueError(f"sample_interval_s = {self.sample_interval_s}: at least 1e-6 s (or 0: no time series)")
        if self.sample_interval_s and self.duration_s / self.sample_interval_s > MAX_SAMPLES:
            raise ValueError(
                f"sample_interval_s = {self.sample_interval_s} gives {self.duration_s / self.sample_interval_s:.3g} samples "
                f"over duration_s = {self.duration_s}; at most {MAX_SAMPLES:g} (or 0: no time series)")
        return self
    topology: Topology
    #: Links whose queue is sampled (see each topology for names). Default: the dumbbell's
    #: bottleneck, every parking-lot hop, every graph link.
    measure_links: Optional[List[str]] = None
    groups: List[Group] = []
    flows: List[Flow] = Field(min_length=1)
    priority_changes: List[PriorityChange] = []

    @model_validator(mode="before")
    @classmethod
    def _dumbbell_by_default(cls, data: Any) -> Any:
        # Files written before other topologies existed have no topology.kind.
        if isinstance(data, dict) and isinstance(data.get("topology"), dict) and "kind" not in data["topology"]:
            data = {**data, "topology": {**data["topology"], "kind": "dumbbell"}}
        return data

    @model_validator(mode="after")
    def _references(self) -> "Scenario":
        names = {g.name: g for g in self.groups}
        if len(names) != len(self.groups):
            raise ValueError("group names must be unique")
        topo = self.topology
        nodes = set(_node_names(topo))
        for i, f in enumerate(self.flows):
            if isinstance(topo, Dumbbell):
                if f.pair is None or f.src is not None or f.dst is not None:
                    raise ValueError(f"flows[{i}]: on a dumbbell give pair (not src/dst)")
                if f.pair >= topo.pairs:
                    raise ValueError(f"flows[{i}].pair = {f.pair}, but the dumbbell has {topo.pairs} pairs")
            else:
                if f.pair is not None or f.src is None or f.dst is None:
                    raise ValueError(f"flows[{i}]: on a {topo.kind} give src and dst node names (not pair)")
                for end in (f.src, f.dst):
                    if end not in nodes:
                        raise ValueError(f"flows[{i}]: {end!r} is not a node of the {topo.kind} (nodes: {sorted(nodes)})")
                if f.src == f.dst:
                    raise ValueError(f"flows[{i}]: src and dst are the same node")
            group = getattr(f, "group", None)
            lo, hi = getattr(f, "fse_delay_min_s", None), getattr(f, "fse_delay_max_s", None)
            if (lo is None) != (hi is None):
                raise ValueError(f"flows[{i}]: give fse_delay_min_s and fse_delay_max_s together")
            if lo is not None and hi < lo:
                raise ValueError(f"flows[{i}]: fse_delay_max_s must be >= fse_delay_min_s")
            if lo is not None and (group is None or (group in names and names[group].couples and not names[group].is_fse)):
                raise ValueError(f"flows[{i}]: fse_delay_min_s/fse_delay_max_s are for a flow in an FSE group")
            if group is None:
                continue
            if group not in names:
                raise ValueError(f"flows[{i}].group {group!r} is not one of the groups {sorted(names)}")
            g = names[group]
            if isinstance(f, MediaFlow) and g.kind == "measured":
                if g.respond is not False:
                    raise ValueError(
                        f"flows[{i}] is a media flow in measured group {group!r}, which responds: media flows are "
                        f"observed only (their detectors run, nothing regroups them); give the group respond = false")
            elif isinstance(f, MediaFlow) and g.couples and not g.is_fse:
                raise ValueError(f"flows[{i}] is a media flow but group {group!r} is a TCP coupler")
            if g.is_fse or g.kind == "measured":
                kinds = {type(o) for o in self.flows if getattr(o, "group", None) == group}
                if len(kinds) > 1:
                    kind, what = ("FSE", "an FSE group couples") if g.is_fse else ("measured", "a measured group measures")
                    raise ValueError(
                        f"flows[{i}]: {kind} group {group!r} has both TCP and media flows; {what} "
                        f"TCP flows or media flows, not both")
        for i, c in enumerate(self.priority_changes):
            f = self.flows[c.flow] if c.flow < len(self.flows) else None
            if (not isinstance(f, (TcpFlow, MediaFlow)) or f.group is None
                    or (isinstance(f, MediaFlow) and names[f.group].couples and not names[f.group].is_fse)):
                raise ValueError(f"priority_changes[{i}].flow = {c.flow} is not a coupled TCP flow or a media flow in an FSE group")
        if self.measure_links is not None:
            known = _link_names(topo)
            for i, l in enumerate(self.measure_links):
                if l not in known:
                    raise ValueError(f"measure_links[{i}] = {l!r} is not a link of the {topo.kind} (links: {known})")
        return self

    def group(self, name: Optional[str]) -> Optional[Group]:
        """The group called `name` (None for None)."""
        return next((g for g in self.groups if g.name == name), None) if name is not None else None


#: Tags of the tagged unions, which pydantic puts in an error's location but a file does not have.
_TAGS = {"dumbbell", "parking_lot", "graph", "tcp", "media", "udp", "web"}


def json_schema() -> Dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario, as the dict a TOML file parses to: pydantic's
    for the models here, with the simulator's queue spec schema (``QUEUE_SPEC_SCHEMA``, generated
    from its Rust type) for every queue table."""
    schema = Scenario.model_json_schema()
    queue = json.loads(QUEUE_SPEC_SCHEMA)
    defs = schema.setdefault("$defs", {})
    for name, d in queue["$defs"].items():
        if name in defs:
            raise RuntimeError(f"the queue spec's schema and the scenario's both define {name}")
        defs[name] = d

    def swap(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("x-macroflow-queue-spec"):
                return {"$ref": queue["$ref"], "description": queue["description"]}
            return {k: swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    return swap(schema)


def _explain(e: ValidationError, source: str) -> ScenarioError:
    lines = [f"{source}: invalid scenario"]
    for err in e.errors():
        loc = err["loc"]
        keep = [p for i, p in enumerate(loc) if not (p in _TAGS and i > 0 and (loc[i - 1] == "topology" or isinstance(loc[i - 1], int)))]
        path = ".".join(str(p) for p in keep) or "(top level)"
        lines.append(f"  {path}: {err['msg']}")
    return ScenarioError("\n".join(lines))


def validate(data: Dict[str, Any], source: str = "<dict>") -> Scenario:
    """Validates a scenario given as the dictionary a TOML file parses to (sweeps build these)."""
    if _depth(data) > MAX_NESTING:
        raise ScenarioError(f"{source}: tables or values nest deeper than {MAX_NESTING} levels")
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise _explain(e, source) from None
    except _Internal as e:
        raise e.args[0] from None


#: The largest scenario file read (real ones are a few kB).
MAX_SCENARIO_BYTES = 1 << 20
#: The deepest nesting of tables or values a scenario may have (real ones nest four or five deep).
MAX_NESTING = 64


def _check_shape(text: str, source: str) -> None:
    """Refuses text whose size or nesting would make parsing or validation take minutes or overflow
    the stack (issue 13: 30,000 nested ``[topology.queue.inner...]`` tables never finished
    parsing; thousands crashed validation; arrays nested over many lines overflowed tomllib's
    recursion). Measured on the raw text before parsing, skipping strings and comments: the
    nesting of brackets and braces across lines, and the parts of every dotted key (a table
    header's or a key's before ``=``)."""
    if len(text) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{source}: {len(text):,} characters; a scenario is at most {MAX_SCENARIO_BYTES:,}")
    depth = deepest = 0
    line, dots, in_key, quote, i, n = 1, 0, True, "", 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
            if ch == "\n":
                line += 1
            i += 1
            continue
        if text.startswith(('"""', "'''"), i):
            quote = text[i:i + 3]
            i += 3
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif ch == "\n":
            line, dots, in_key = line + 1, 0, depth == 0
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
        elif ch == "=":
            in_key = False
        elif ch == "." and (in_key or depth > 0 and text[i - 1:i] not in "0123456789"):
            dots += 1
        if max(deepest, dots + 1) > MAX_NESTING:
            raise ScenarioError(f"{source}:{line}: tables, keys or values nest deeper than {MAX_NESTING} levels")
        i += 1


def _depth(data: Any) -> int:
    """The nesting depth of parsed data (iterative: no recursion to overflow)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        v, d = todo.pop()
        deepest = max(deepest, d)
        if d > MAX_NESTING:
            break
        if isinstance(v, dict):
            todo.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            todo.extend((x, d + 1) for x in v)
    return deepest


def with_duration(sc: Scenario, duration_s: float, source: str = "duration") -> Scenario:
    """`sc` with another duration, validated as the file's own would be (finite, > 0, and within
    the sample bound); ScenarioError names `source` otherwise."""
    return validate({**sc.model_dump(mode="python"), "duration_s": duration_s}, source)


def parse(text: str, source: str = "<string>") -> Scenario:
    """Validates a scenario given as TOML text."""
    return validate(parse_toml(text, source), source)


def parse_toml(text: str, source: str = "<string>") -> Dict[str, Any]:
    """TOML text as a dict, after the shape checks (size, nesting), not yet validated."""
    _check_shape(text, source)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{source}: not valid TOML: {e}") from None


#: The scenario files shipped in the package (a checkout's ``scenarios/`` links here).
SHIPPED = pathlib.Path(__file__).resolve().parent / "scenarios"


def find(path: Union[str, pathlib.Path]) -> pathlib.Path:
    """`path` if it exists; otherwise, for ``scenarios/NAME.toml``, ``NAME.toml`` or ``NAME``, the
    shipped scenario of that name if there is one (so the README's commands work outside a
    checkout); otherwise `path`. A missing file anywhere else stays missing: a mistyped path to
    an edited copy must not run the shipped original."""
    p = pathlib.Path(path)
    try:
        if p.exists():
            return p
    except OSError:  # a name too long for the file system: let open() say so
        return p
    if str(p.parent) not in (".", "scenarios"):
        return p
    name = p.name if p.suffix == ".toml" else p.name + ".toml"
    shipped = SHIPPED / name
    return shipped if shipped.is_file() else p


def read(path: Union[str, pathlib.Path]) -> Tuple[str, pathlib.Path]:
    """The text of a scenario file (UTF-8, at most ``MAX_SCENARIO_BYTES``; see :func:`find` for
    shipped names) and the path it was read from."""
    p = find(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_SCENARIO_BYTES + 1)  # /dev/zero, or a huge file by mistake
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e.strerror or e}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{p}: larger than {MAX_SCENARIO_BYTES:,} bytes; not a scenario file")
    try:
        return raw.decode("utf-8"), p
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{p}: not UTF-8 text (byte {e.start}): a scenario file is TOML") from None


def load(path: Union[str, pathlib.Path]) -> Scenario:
    """Reads and validates a scenario file (see :func:`read`)."""
    text, p = read(path)
    return parse(text, str(p))


def _build_topology(s: Simulation, t: Union[Dumbbell, ParkingLot, Graph]) -> Tuple[Callable[[Any], Tuple[int, int]], Dict[str, int]]:
    """Builds the topology; returns how to find a flow's (src, dst) node ids and the links by name."""
    if isinstance(t, Dumbbell):
        d = s.dumbbell(
            t.pairs,
            bottleneck_rate_bps=t.bottleneck_rate_bps,
            bottleneck_delay_s=t.bottleneck_delay_s,
            queue_pkts=t.queue_pkts,
            access_rate_bps=t.access_rate_bps,
            access_delays_s=t.access_delays_s,
            random_drop=t.random_drop,
            queue=t.queue,
            access_jitter_s=t.access_jitter_s,
        )
        return (lambda f: (d["senders"][f.pair], d["receivers"][f.pair])), {"bottleneck": d["bottleneck"], "reverse": d["reverse"]}
    if isinstance(t, ParkingLot):
        p = s.parking_lot(
            t.hops, rate_bps=t.rate_bps, delay_s=t.delay_s, queue_pkts=t.queue_pkts,
            access_rate_bps=t.access_rate_bps, access_delay_s=t.access_delay_s, queue=t.queue,
            access_jitter_s=t.access_jitter_s,
        )
        ids = {f"H{i}": h for i, h in enumerate(p["hosts"])}
        ids.update({f"R{i}": r for i, r in enumerate(p["routers"])})
        return (lambda f: (ids[f.src], ids[f.dst])), {f"hop{i}": l for i, l in enumerate(p["hops"])}
    ids = {n: s.add_node(n) for n in t.nodes}
    links: Dict[str, int] = {}
    for l in t.links:
        ends = [(l.from_, l.to)] + ([(l.to, l.from_)] if l.duplex else [])
        for a, b in ends:
            links[f"{a}->{b}"] = s.add_link(ids[a], ids[b], l.rate_bps, l.delay_s, queue_pkts=l.queue_pkts, queue=l.queue, jitter_s=l.jitter_s)
    return (lambda f: (ids[f.src], ids[f.dst])), links


def _add_group(s: Simulation, g: Group) -> int:
    if g.is_fse:
        return s.add_fse_group(g.kind)
    if g.kind == "measured":
        return s.add_measured_group(
            coupler=g.coupler or "ccc",
            test=g.test or "out_of_order",
            confidence=0.9 if g.confidence is None else g.confidence,
            respond=True if g.respond is None else g.respond,
            memory_expiry_s=600.0 if g.memory_expiry_s is None else g.memory_expiry_s,
            max_burst_pkts=g.max_burst_pkts,
        )
    return s.add_coupling_group(g.kind, max_burst_pkts=g.max_burst_pkts)


def _default_measured(t: Union[Dumbbell, ParkingLot, Graph]) -> List[str]:
    return ["bottleneck"] if isinstance(t, Dumbbell) else _link_names(t)


#: Progress is reported this many times over a run (the simulator runs in as many chunks).
PROGRESS_STEPS = 100


def run(sc: Scenario, progress: Optional[Callable[[float], None]] = None) -> Dict[str, pa.Table]:
    """Runs a validated scenario and returns its results as Arrow tables. `progress`, if given, is
    called with the simulated time (seconds) reached, about :data:`PROGRESS_STEPS` times. TCP
    flows are numbered in file order, then the web workloads' flows; media and UDP flows have
    their own numbering."""
    s = Simulation(seed=sc.seed)
    ends, links = _build_topology(s, sc.topology)
    ids: Dict[int, int] = {}
    for i, f in enumerate(sc.flows):
        src, dst = ends(f)
        if isinstance(f, TcpFlow):
            ids[i] = s.add_tcp_flow(src, dst, start_s=f.start_s, size_bytes=f.size_bytes, cc=f.cc, dscp=f.dscp,
                                    delayed_ack=f.delayed_ack)
        elif isinstance(f, MediaFlow):
            ids[i] = s.add_media_flow(
                src, dst, controller=f.controller, source=f.source, rate_bps=f.rate_bps,
                pauses=list(f.pauses), packet_bytes=f.packet_bytes, start_s=f.start_s,
            )
        elif isinstance(f, UdpFlow):
            ids[i] = s.add_udp_flow(src, dst, kind=f.kind, rate_bps=f.rate_bps, load_bps=f.load_bps, start_s=f.start_s, dscp=f.dscp,
                                    end_s=f.end_s)
    for f in sc.flows:
        if isinstance(f, WebFlow):
            # Until the run's end by default; a workload starting after it then has no flows.
            end_s = f.end_s if f.end_s is not None else max(f.start_s, sc.duration_s)
            s.add_web_workload([ends(f)], f.load_bps, mean_size_bytes=f.mean_size_bytes, start_s=f.start_s,
                               end_s=end_s, pareto_shape=f.pareto_shape, cc=f.cc)
    group_ids = {g.name: _add_group(s, g) for g in sc.groups if g.couples}
    for i, f in enumerate(sc.flows):
        g = sc.group(getattr(f, "group", None))
        if g is None or not g.couples:
            continue
        lo, hi = (g.delay_min_s, g.delay_max_s) if f.fse_delay_min_s is None else (f.fse_delay_min_s, f.fse_delay_max_s)
        if isinstance(f, TcpFlow) and g.is_fse:
            s.couple_tcp_fse(ids[i], group_ids[g.name], f.priority, delay_min_s=lo, delay_max_s=hi)
        elif isinstance(f, TcpFlow):
            s.couple(ids[i], group_ids[g.name], f.priority)
        elif g.kind == "measured":
            s.measure_media(ids[i], group_ids[g.name])
        else:
            s.couple_media(ids[i], group_ids[g.name], f.priority, delay_min_s=lo, delay_max_s=hi)
    for c in sc.priority_changes:
        if sc.group(sc.flows[c.flow].group).couples:
            if isinstance(sc.flows[c.flow], MediaFlow):
                s.set_media_priority_at(c.at_s, ids[c.flow], c.priority)
            else:
                s.set_priority_at(c.at_s, ids[c.flow], c.priority)
    if sc.sample_interval_s:
        measured = sc.measure_links if sc.measure_links is not None else _default_measured(sc.topology)
        s.sample_every(sc.sample_interval_s, [links[n] for n in measured])
    if progress is None:
        s.run(sc.duration_s)
    else:
        for i in range(1, PROGRESS_STEPS + 1):
            s.run(sc.duration_s if i == PROGRESS_STEPS else sc.duration_s * i / PROGRESS_STEPS)
            progress(s.now_s)
    return tables(s.results())
