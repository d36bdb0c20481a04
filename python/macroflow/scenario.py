"""Scenario files (TOML), validated with pydantic, and running them on the simulator.

A scenario describes a topology (for now the dumbbell of the dissertation's experiments), coupling
groups (TCP couplers or FSE algorithms), flows (TCP, rate-controlled media, UDP cross traffic),
priority changes, duration and seed. :func:`load` validates a file and reports every mistake with
the file, the field path and what was expected; nothing runs on an invalid file. :func:`run`
builds the simulation and returns its results as Arrow tables.

This is the first part of issue 5; the CLI, sweeps, the results store and reports build on it.
"""

from __future__ import annotations

import pathlib
import tomllib
from typing import Annotated, Any, Callable, Dict, List, Literal, Optional, Tuple, Union

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from macroflow._native import FSE_ALGORITHMS, TCP_COUPLER_KINDS
from macroflow.sim import Simulation, tables

__all__ = ["Scenario", "ScenarioError", "load", "parse", "validate", "run"]


class ScenarioError(ValueError):
    """An invalid scenario; the message names the file, the field path and what was expected."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dumbbell(_Strict):
    """N sender/receiver pairs across one bottleneck (defaults: seed 003's 10 Mbit/s, 100 ms RTT,
    1-BDP queue)."""

    kind: Literal["dumbbell"] = "dumbbell"
    pairs: int = Field(ge=1)
    bottleneck_rate_bps: float = Field(default=10e6, gt=0)
    bottleneck_delay_s: float = Field(default=0.048, ge=0)
    queue_pkts: int = Field(default=83, ge=1)
    access_rate_bps: float = Field(default=1e9, gt=0)
    access_delays_s: Optional[List[Annotated[float, Field(ge=0)]]] = None
    random_drop: float = Field(default=0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _one_delay_per_pair(self) -> "Dumbbell":
        if self.access_delays_s is not None and len(self.access_delays_s) != self.pairs:
            raise ValueError(f"access_delays_s has {len(self.access_delays_s)} entries for {self.pairs} pairs")
        return self


class Group(_Strict):
    """A coupling group: a TCP coupler (ccc, ccc_handover, etcp, efcm) for TCP flows, or an FSE
    algorithm (active, conservative_active, simple_passive, passive) for media flows."""

    name: str = Field(min_length=1)
    kind: str
    #: FSE signalling delay, uniform in [min, max] (seed 003 Fig. 6.11); FSE groups only.
    delay_min_s: float = Field(default=0.0, ge=0)
    delay_max_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _known_kind(self) -> "Group":
        if self.kind not in TCP_COUPLER_KINDS and self.kind not in FSE_ALGORITHMS:
            raise ValueError(f"kind {self.kind!r} is neither a TCP coupler {TCP_COUPLER_KINDS} nor an FSE algorithm {FSE_ALGORITHMS}")
        if self.delay_max_s < self.delay_min_s:
            raise ValueError("delay_max_s must be >= delay_min_s")
        return self

    @property
    def is_fse(self) -> bool:
        return self.kind in FSE_ALGORITHMS


class TcpFlow(_Strict):
    type: Literal["tcp"]
    pair: int = Field(ge=0)
    start_s: float = Field(default=0.0, ge=0)
    size_bytes: Optional[int] = Field(default=None, ge=1)
    cc: Literal["newreno", "cubic", "ledbat"] = "newreno"
    group: Optional[str] = None
    priority: float = Field(default=1.0, gt=0)


class MediaFlow(_Strict):
    type: Literal["media"]
    pair: int = Field(ge=0)
    start_s: float = Field(default=0.0, ge=0)
    controller: Literal["nada", "gcc", "tfrc", "rap"] = "nada"
    source: Literal["greedy", "app_limited", "video"] = "greedy"
    rate_bps: Optional[float] = Field(default=None, gt=0)
    pauses: List[Tuple[float, float]] = []
    packet_bytes: int = Field(default=1200, ge=40)
    group: Optional[str] = None
    priority: float = Field(default=1.0, gt=0)


class UdpFlow(_Strict):
    type: Literal["udp"]
    pair: int = Field(ge=0)
    start_s: float = Field(default=0.0, ge=0)
    kind: Literal["cbr", "self_similar"] = "cbr"
    rate_bps: Optional[float] = Field(default=None, gt=0)
    load_bps: Optional[float] = Field(default=None, gt=0)


Flow = Annotated[Union[TcpFlow, MediaFlow, UdpFlow], Field(discriminator="type")]


class PriorityChange(_Strict):
    at_s: float = Field(ge=0)
    flow: int = Field(ge=0, description="index into flows (a coupled TCP flow)")
    priority: float = Field(gt=0)


class Scenario(_Strict):
    name: str = Field(min_length=1)
    seed: int = Field(default=1, ge=0)
    duration_s: float = Field(gt=0)
    sample_interval_s: Optional[float] = Field(default=0.1, gt=0)
    topology: Dumbbell
    groups: List[Group] = []
    flows: List[Flow] = Field(min_length=1)
    priority_changes: List[PriorityChange] = []

    @model_validator(mode="after")
    def _references(self) -> "Scenario":
        names = {g.name: g for g in self.groups}
        if len(names) != len(self.groups):
            raise ValueError("group names must be unique")
        for i, f in enumerate(self.flows):
            if f.pair >= self.topology.pairs:
                raise ValueError(f"flows[{i}].pair = {f.pair}, but the dumbbell has {self.topology.pairs} pairs")
            group = getattr(f, "group", None)
            if group is None:
                continue
            if group not in names:
                raise ValueError(f"flows[{i}].group {group!r} is not one of the groups {sorted(names)}")
            if isinstance(f, TcpFlow) and names[group].is_fse:
                raise ValueError(f"flows[{i}] is TCP but group {group!r} is an FSE group (for media flows)")
            if isinstance(f, MediaFlow) and not names[group].is_fse:
                raise ValueError(f"flows[{i}] is a media flow but group {group!r} is a TCP coupler")
        for i, c in enumerate(self.priority_changes):
            if c.flow >= len(self.flows) or not isinstance(self.flows[c.flow], TcpFlow) or self.flows[c.flow].group is None:
                raise ValueError(f"priority_changes[{i}].flow = {c.flow} is not a coupled TCP flow")
        return self


def _explain(e: ValidationError, source: str) -> ScenarioError:
    lines = [f"{source}: invalid scenario"]
    for err in e.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {path}: {err['msg']}")
    return ScenarioError("\n".join(lines))


def validate(data: Dict[str, Any], source: str = "<dict>") -> Scenario:
    """Validates a scenario given as the dictionary a TOML file parses to (sweeps build these)."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise _explain(e, source) from None


def parse(text: str, source: str = "<string>") -> Scenario:
    """Validates a scenario given as TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{source}: not valid TOML: {e}") from None
    return validate(data, source)


def load(path: Union[str, pathlib.Path]) -> Scenario:
    """Reads and validates a scenario file."""
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e}") from None
    return parse(text, str(p))


#: Progress is reported this many times over a run (the simulator runs in as many chunks).
PROGRESS_STEPS = 100


def run(sc: Scenario, progress: Optional[Callable[[float], None]] = None) -> Dict[str, pa.Table]:
    """Runs a validated scenario and returns its results as Arrow tables. `progress`, if given, is
    called with the simulated time (seconds) reached, about :data:`PROGRESS_STEPS` times."""
    s = Simulation(seed=sc.seed)
    t = sc.topology
    d = s.dumbbell(
        t.pairs,
        bottleneck_rate_bps=t.bottleneck_rate_bps,
        bottleneck_delay_s=t.bottleneck_delay_s,
        queue_pkts=t.queue_pkts,
        access_rate_bps=t.access_rate_bps,
        access_delays_s=t.access_delays_s,
        random_drop=t.random_drop,
    )
    ids: Dict[int, int] = {}
    for i, f in enumerate(sc.flows):
        src, dst = d["senders"][f.pair], d["receivers"][f.pair]
        if isinstance(f, TcpFlow):
            ids[i] = s.add_tcp_flow(src, dst, start_s=f.start_s, size_bytes=f.size_bytes, cc=f.cc)
        elif isinstance(f, MediaFlow):
            ids[i] = s.add_media_flow(
                src, dst, controller=f.controller, source=f.source, rate_bps=f.rate_bps,
                pauses=list(f.pauses), packet_bytes=f.packet_bytes, start_s=f.start_s,
            )
        else:
            ids[i] = s.add_udp_flow(src, dst, kind=f.kind, rate_bps=f.rate_bps, load_bps=f.load_bps, start_s=f.start_s)
    group_ids = {g.name: (s.add_fse_group(g.kind) if g.is_fse else s.add_coupling_group(g.kind)) for g in sc.groups}
    for i, f in enumerate(sc.flows):
        g = getattr(f, "group", None)
        if g is None:
            continue
        grp = next(x for x in sc.groups if x.name == g)
        if isinstance(f, TcpFlow):
            s.couple(ids[i], group_ids[g], f.priority)
        else:
            s.couple_media(ids[i], group_ids[g], f.priority, delay_min_s=grp.delay_min_s, delay_max_s=grp.delay_max_s)
    for c in sc.priority_changes:
        s.set_priority_at(c.at_s, ids[c.flow], c.priority)
    if sc.sample_interval_s:
        s.sample_every(sc.sample_interval_s, [d["bottleneck"]])
    if progress is None:
        s.run(sc.duration_s)
    else:
        for i in range(1, PROGRESS_STEPS + 1):
            s.run(sc.duration_s if i == PROGRESS_STEPS else sc.duration_s * i / PROGRESS_STEPS)
            progress(s.now_s)
    return tables(s.results())
