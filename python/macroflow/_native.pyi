"""Type hints for ``macroflow._native``, the thin bindings of the Rust crate ``coupling``.

Conventions used throughout:

- Flow, connection and group ids are non-negative ``int`` (u64).
- Points in time are ``now_ns: int``, integer nanoseconds since an epoch the caller chooses (a
  simulator's start, or a monotonic clock the caller reads). Nothing here reads a clock.
- The shared-bottleneck and false-sharing detectors (:class:`SbdFlowStats`,
  :class:`FalseSharingDetector`) take points in time as ``float`` seconds instead (``now_s``),
  and one-way delays as ``owd_ns: int``.
- Spans of time (RTTs, timeouts, expiry) are ``float`` seconds, named ``..._s``. They must be
  finite and >= 0.
- Rates are ``float`` bit/s (``..._bps``); windows are ``float`` packets (``..._pkts``).
- Every error is a :class:`CouplingError` subclass with a message naming the field, the value and
  what was expected. A call that raises leaves the object unchanged.
"""

from ipaddress import IPv4Address, IPv6Address
import os
from typing import Any, Final, Literal, Optional, TypedDict, Union

__version__: Final[str]

FseAlgorithm = Literal["active", "conservative_active", "simple_passive", "passive"]
CouplerKind = Literal["ccc", "ccc_handover", "ccc_int", "ccc_handover_int", "etcp", "efcm"]
TcpState = Literal["SS", "CA", "FR"]
Address = Union[str, IPv4Address, IPv6Address]
FiveTuple = tuple[Address, Address, int, int, int]
"""``(src_ip, dst_ip, protocol, src_port, dst_port)``."""

FSE_ALGORITHMS: Final[tuple[str, ...]]
"""The FSE algorithm names, in the order of RFC 8699 / seed 003."""
TCP_COUPLER_KINDS: Final[tuple[str, ...]]
"""The TCP coupler names."""
TCP_STATES: Final[tuple[str, ...]]
"""``("SS", "CA", "FR")``: slow start, congestion avoidance, fast recovery."""
CONGESTION_CONTROLS: Final[tuple[str, ...]]
"""The TCP congestion controls the simulator builds (``cc=``), from its registry
(``crates/sim/src/transport/cc.rs``, ``CONGESTION_CONTROLS``)."""
RATE_CONTROLLERS: Final[tuple[str, ...]]
"""The rate-based media controllers (``controller=``), from the simulator's registry
(``crates/sim/src/transport/controllers.rs``)."""
QUEUE_KINDS: Final[tuple[str, ...]]
"""The queue disciplines a queue spec's ``kind`` names (``Simulation.add_link(queue=...)``, a
scenario's ``[topology.queue]``), from the simulator's registry (``QueueSpec::KINDS`` in
``crates/sim/src/net/queue/spec.rs``)."""
QUEUE_SPEC_SCHEMA: Final[str]
"""The JSON Schema (draft 2020-12, JSON text) of a queue spec, generated from the simulator's
Rust type ``QueueSpec``: one object schema per kind under ``$defs/QueueSpec`` (keys, types,
bounds, defaults, descriptions) and one valid spec per kind under ``examples``. Relations between
keys (a max threshold above the min, distinct DSCPs) are not in it; the simulator checks them."""

# ----------------------------------------------------------------------------------------------
# Exceptions

class CouplingError(ValueError):
    """Base class of every error of the coupling layer; the object is left unchanged."""

class InvalidValueError(CouplingError):
    """A number or name outside its domain (NaN, infinite, negative, zero priority, unknown
    algorithm or kind, bad address, bad grouping arguments, ...)."""

class UnknownFlowError(CouplingError, KeyError):
    """The flow (or connection) id is not registered."""

class DuplicateFlowError(CouplingError):
    """The flow (or connection) id is already registered."""

class UnknownGroupError(CouplingError, KeyError):
    """The flow group id does not exist."""

class GroupNotEmptyError(CouplingError):
    """A group's algorithm can only be changed while it has no flows."""

class MissingInputError(CouplingError):
    """An input the algorithm needs was not given (e.g. ``rtt_s`` for "conservative_active")."""

class TimeWentBackwardsError(CouplingError):
    """``now_ns`` is earlier than a time the group has already seen."""

class UnsupportedError(CouplingError):
    """The operation is not meaningful for this coupler."""

class CouplingInternalError(CouplingError):
    """A bug in the coupling layer (a panic inside the crate, caught): the object it happened in
    is closed, and every later call that reaches it (its arguments valid) raises this too, with
    the panic's message. Please report it."""

# ----------------------------------------------------------------------------------------------
# Flow State Exchange (RFC 8699)

class FlowView:
    """A registered flow as the FSE stores it (read-only)."""

    @property
    def flow(self) -> int: ...
    @property
    def priority(self) -> float: ...
    @property
    def fse_rate_bps(self) -> float:
        """FSE_R: the rate last assigned to the flow."""
    @property
    def desired_rate_bps(self) -> float:
        """DR: the flow's desired rate; ``inf`` means unlimited."""

class Outcome:
    """What UPDATE returns (read-only)."""

    @property
    def rate_bps(self) -> float:
        """The rate the updating flow uses from now on."""
    @property
    def assignments(self) -> list[tuple[int, float]]:
        """``(flow, rate_bps)`` for every flow of the group (active algorithms); empty for the
        passive algorithms, which only answer the updating flow."""

class FseGroup:
    """One FSE flow group running one algorithm.

    ``algorithm`` is one of "active" (RFC 8699 sec. 5.3.1), "conservative_active" (sec. 5.3.2;
    needs ``rtt_s`` on every update), "simple_passive" (seed 003 Algorithm 3) and "passive"
    (RFC 8699 draft App. C). An unknown name raises InvalidValueError listing the valid ones.
    """

    def __init__(self, algorithm: FseAlgorithm) -> None: ...
    def register(
        self, flow: int, priority: float, initial_rate_bps: float, now_ns: int = 0
    ) -> float:
        """Registers a flow (priority > 0, initial rate >= 0); returns the rate to use now."""
    def update(
        self,
        flow: int,
        cc_rate_bps: float,
        now_ns: int = 0,
        desired_rate_bps: float = float("inf"),
        rtt_s: Optional[float] = None,
    ) -> Outcome:
        """UPDATE with the controller's rate CC_R, the application's desired rate DR (``inf``:
        bulk transfer) and the flow's RTT in seconds (required by "conservative_active")."""
    def set_priority(self, flow: int, priority: float, now_ns: int = 0) -> list[tuple[int, float]]:
        """Changes a flow's priority; active algorithms return every flow's new rate, passive
        ones an empty list (the change applies at the flow's next update)."""
    def leave(self, flow: int) -> list[tuple[int, float]]:
        """The flow leaves; its share stays in S_CR. Active algorithms return the remaining
        flows' new rates."""
    def expire(self, now_ns: int, timeout_s: float) -> tuple[list[int], list[tuple[int, float]]]:
        """Removes flows silent for longer than ``timeout_s`` (as if each had left); returns them in
        ascending order and, for the active algorithms, the remaining flows' new rates."""
    @property
    def algorithm(self) -> str: ...
    @property
    def sum_calculated_rate(self) -> float:
        """S_CR, the group's aggregate rate."""
    @property
    def sum_priority(self) -> float:
        """S_P, the sum of the priorities."""
    @property
    def leftover(self) -> float:
        """TLO, the total leftover rate ("passive" only; else 0)."""
    @property
    def timer_ns(self) -> Optional[int]:
        """The instant until which "conservative_active" holds rates after a decrease."""
    def flows(self) -> list[FlowView]:
        """The registered flows in the group's internal order."""
    def flow(self, flow: int) -> FlowView:
        """One flow; raises UnknownFlowError."""
    def __len__(self) -> int: ...
    def __contains__(self, flow: object) -> bool: ...

class FseGroupView:
    """A read-only snapshot of one group of an :class:`Fse`."""

    @property
    def gid(self) -> int: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def sum_calculated_rate(self) -> float: ...
    @property
    def sum_priority(self) -> float: ...
    @property
    def leftover(self) -> float: ...
    @property
    def timer_ns(self) -> Optional[int]: ...
    @property
    def flows(self) -> list[FlowView]: ...
    def __len__(self) -> int: ...

class Fse:
    """A Flow State Exchange: many flow groups, each with its own algorithm, and the grouping
    that decides which flows are coupled (RFC 8699 sec. 5.1).

    Groups created implicitly by ``register`` run ``default_algorithm``. With
    ``soft_state_timeout_s``, :meth:`expire` removes flows silent for longer than that.
    """

    def __init__(
        self,
        default_algorithm: FseAlgorithm = "conservative_active",
        soft_state_timeout_s: Optional[float] = None,
    ) -> None: ...
    @property
    def default_algorithm(self) -> str: ...
    @property
    def soft_state_timeout_s(self) -> Optional[float]: ...
    def configure_group(self, gid: int, algorithm: FseAlgorithm) -> None:
        """Creates group ``gid`` with ``algorithm``, or changes the algorithm of an existing
        empty group (GroupNotEmptyError otherwise). A configured group is kept, with its
        algorithm, when its last flow leaves."""
    def register(
        self,
        flow: int,
        priority: float,
        initial_rate_bps: float,
        now_ns: int = 0,
        group: Optional[int] = None,
        five_tuple: Optional[FiveTuple] = None,
        dscp: int = 0,
        label: Optional[str] = None,
    ) -> tuple[int, float]:
        """Registers a flow; returns ``(gid, rate_bps)``. Exactly one of ``group`` (an explicit
        group id), ``five_tuple`` (with ``dscp`` in 0..=63: multiplexed flows share a group) and
        ``label`` (configured: flows with the same label share a group) must be given."""
    def update(
        self,
        flow: int,
        cc_rate_bps: float,
        now_ns: int = 0,
        desired_rate_bps: float = float("inf"),
        rtt_s: Optional[float] = None,
    ) -> Outcome:
        """UPDATE in the flow's group; see :meth:`FseGroup.update`."""
    def set_priority(self, flow: int, priority: float, now_ns: int = 0) -> list[tuple[int, float]]: ...
    def leave(self, flow: int) -> list[tuple[int, float]]:
        """The flow leaves; a group left empty is dropped."""
    def expire(self, now_ns: int) -> list[tuple[int, list[int], list[tuple[int, float]]]]:
        """Removes silent flows (soft state). Returns, per group that lost flows, ``(gid, removed
        flows, remaining flows' new rates)`` (rates only for the active algorithms). Empty without a
        soft-state timeout."""
    def remove_group(self, gid: int) -> None:
        """Removes an empty group, configured or not; raises GroupNotEmptyError otherwise."""
    def group_of(self, flow: int) -> int: ...
    def group_ids(self) -> list[int]:
        """Group ids in ascending order."""
    def group(self, gid: int) -> FseGroupView:
        """A snapshot of one group; raises UnknownGroupError."""
    def __len__(self) -> int:
        """The number of registered flows."""
    def __contains__(self, flow: object) -> bool: ...

# ----------------------------------------------------------------------------------------------
# TCP coupling (seed 003 ch. 7, 9)

class Response:
    """The cwnd and ssthresh a coupler assigns to a connection (read-only)."""

    @property
    def cwnd_pkts(self) -> float: ...
    @property
    def ssthresh_pkts(self) -> float: ...

class Release:
    """Segments released to a joining connection by ack-clocked handover (read-only)."""

    @property
    def conn(self) -> int: ...
    @property
    def cwnd_pkts(self) -> float:
        """The window the connection may use now (its full share once ``done``)."""
    @property
    def done(self) -> bool: ...

class ConnView:
    """A connection's coupled state (read-only)."""

    @property
    def conn(self) -> int: ...
    @property
    def priority(self) -> float: ...
    @property
    def cwnd_pkts(self) -> float:
        """The window last assigned to the connection."""
    @property
    def ssthresh_pkts(self) -> float: ...
    @property
    def state(self) -> str:
        """The last reported state: "SS", "CA" or "FR"."""
    @property
    def coordinating(self) -> bool:
        """The connection is the coordinating connection (CoCo); always False for baselines."""
    @property
    def handover(self) -> Optional[tuple[int, float]]:
        """``(released, target)`` segments while in ack-clocked handover."""
    @property
    def timed_out(self) -> bool:
        """Timed out and not yet back at its share (ctrlTCP's ssbit); False for the baselines."""

class TcpCoupler:
    """One coupled group of TCP connections.

    ``kind``: "ccc" (ctrlTCP / TCP-CCC), "ccc_handover" (with ack-clocked handover of a joining
    connection's share), "ccc_int" and "ccc_handover_int" (the same in the integer window mode:
    whole-packet windows, priorities in units of 2^-16 (smaller ones are refused), shares rounded
    to the nearest packet and every other division floored, as the kernel port computes), "etcp" (Ensemble TCP baseline) or "efcm" (EFCM
    baseline).

    No answer lets a connection send a larger burst than its own controller would, plus
    ``max_burst_pkts`` segments beyond what it has in flight: a share above that is reached by the
    connection's own slow start (the answer's ssthresh is at least the share).
    """

    def __init__(self, kind: CouplerKind = "ccc", max_burst_pkts: float = 0.0) -> None: ...
    def register(
        self, conn: int, priority: float, cwnd_pkts: float, ssthresh_pkts: float
    ) -> Response:
        """Registers a connection; returns the cwnd and ssthresh it uses from now on."""
    def update(
        self,
        conn: int,
        cwnd_pkts: float,
        ssthresh_pkts: float,
        state: TcpState,
        timeout: bool = False,
        in_flight_pkts: float = 0.0,
    ) -> Optional[Response]:
        """UPDATE after the connection's controller changed cwnd; ``None`` in Fast Recovery.
        ``timeout=True`` (only with state "SS") reports a retransmission timeout.
        ``in_flight_pkts``: segments in flight (0 when unknown, the most conservative)."""
    def leave(self, conn: int) -> None: ...
    def set_priority(self, conn: int, priority: float) -> None:
        """Changes a connection's priority; the new share applies from its next update."""
    def on_ack(self, conn: int) -> list[Release]:
        """A new ACK arrived for ``conn``; returns the segments released to joiners
        ("ccc_handover", "ccc_handover_int"; the others only check ``conn``)."""
    @property
    def name(self) -> str:
        """The kind."""
    @property
    def sum_cwnd(self) -> float:
        """The aggregate congestion window."""
    @property
    def sum_ssthresh(self) -> float:
        """The aggregate ssthresh (0 until the first loss)."""
    @property
    def coco(self) -> Optional[int]:
        """The coordinating connection (the "ccc" kinds); None for the baselines."""
    @property
    def all_in_slow_start(self) -> bool:
        """Every connection is in SS (the "ccc" kinds; UnsupportedError otherwise)."""
    @property
    def handovers_running(self) -> int:
        """Connections in ack-clocked handover (0 except for "ccc_handover" and "ccc_handover_int")."""
    def conn(self, conn: int) -> ConnView:
        """One connection; raises UnknownFlowError."""
    def conns(self) -> list[ConnView]:
        """All connections in registration order."""
    def __len__(self) -> int: ...
    def __contains__(self, conn: object) -> bool: ...

class TcpGroupView:
    """A read-only snapshot of one group of a :class:`TcpGroups`."""

    @property
    def gid(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def sum_cwnd(self) -> float: ...
    @property
    def conns(self) -> list[ConnView]: ...
    def __len__(self) -> int: ...

class TcpGroups:
    """Many coupled TCP groups with flow grouping (the CCC entity of a host). Groups created
    implicitly by ``register`` run ``default_kind``. ``max_burst_pkts`` is every group's burst
    limit, with the meaning of :class:`TcpCoupler`'s constructor argument."""

    def __init__(self, default_kind: CouplerKind = "ccc", max_burst_pkts: float = 0.0) -> None: ...
    @property
    def default_kind(self) -> str: ...
    @property
    def max_burst_pkts(self) -> float: ...
    def set_max_burst_pkts(self, pkts: float) -> None:
        """Sets the burst limit of every group, now and for groups created later; a bad limit
        raises and changes nothing."""
    def configure_group(self, gid: int, kind: CouplerKind) -> None:
        """Creates group ``gid`` with ``kind``, or changes the kind of an existing empty group. A
        configured group is kept when its last connection leaves."""
    def remove_group(self, gid: int) -> None:
        """Removes an empty group, configured or not; raises GroupNotEmptyError otherwise."""
    def register(
        self,
        conn: int,
        priority: float,
        cwnd_pkts: float,
        ssthresh_pkts: float,
        group: Optional[int] = None,
        five_tuple: Optional[FiveTuple] = None,
        dscp: int = 0,
        label: Optional[str] = None,
    ) -> tuple[int, Response]:
        """Registers a connection; returns ``(gid, response)``. Exactly one of ``group``,
        ``five_tuple`` (with ``dscp``) and ``label``, as for :meth:`Fse.register`."""
    def update(
        self,
        conn: int,
        cwnd_pkts: float,
        ssthresh_pkts: float,
        state: TcpState,
        timeout: bool = False,
        in_flight_pkts: float = 0.0,
    ) -> Optional[Response]: ...
    def on_ack(self, conn: int) -> list[Release]: ...
    def set_priority(self, conn: int, priority: float) -> None: ...
    def leave(self, conn: int) -> None:
        """The connection leaves; a group left empty is dropped."""
    def group_of(self, conn: int) -> int: ...
    def group_ids(self) -> list[int]: ...
    def group(self, gid: int) -> TcpGroupView: ...
    def __contains__(self, conn: object) -> bool: ...

# ----------------------------------------------------------------------------------------------
# TCB interdependence (RFC 9040)

class TcbInit:
    """Values to initialize a new connection with; ``None``: nothing valid is cached."""

    @property
    def mss(self) -> Optional[int]: ...
    @property
    def pmtu(self) -> Optional[int]: ...
    @property
    def srtt_s(self) -> Optional[float]: ...
    @property
    def rttvar_s(self) -> Optional[float]: ...
    @property
    def rto_s(self) -> Optional[float]: ...
    @property
    def cwnd_pkts(self) -> Optional[float]:
        """Only with ``share_congestion``."""
    @property
    def ssthresh_pkts(self) -> Optional[float]:
        """Only with ``share_congestion``."""

class TcbCache:
    """The TCB interdependence cache: per-peer TCP state shared temporally (merged at close) and
    by the ensemble of open connections (RTT samples, fair share of cwnd).

    A peer is ``addr`` (``str`` or ``ipaddress`` object), optionally narrowed to a destination
    ``port``. cwnd and ssthresh are shared only with ``share_congestion=True``. Entries without
    open connections that were not written for ``expiry_s`` are forgotten.
    """

    def __init__(
        self,
        share_congestion: bool = False,
        expiry_s: float = 600.0,
        min_mss: int = 536,
        min_rto_s: float = 1.0,
        min_ssthresh_pkts: float = 2.0,
        initial_window_pkts: float = 10.0,
    ) -> None: ...
    @property
    def share_congestion(self) -> bool: ...
    @property
    def expiry_s(self) -> float: ...
    @property
    def min_mss(self) -> int: ...
    @property
    def min_rto_s(self) -> float: ...
    @property
    def min_ssthresh_pkts(self) -> float: ...
    @property
    def initial_window_pkts(self) -> float: ...
    def open(self, addr: Address, conn: int, now_ns: int, port: Optional[int] = None) -> TcbInit:
        """Opens a connection: returns its initial values and counts it in the ensemble."""
    def lookup(self, addr: Address, now_ns: int, port: Optional[int] = None) -> TcbInit:
        """What a new connection would be initialized with, without opening it."""
    def on_cwnd(
        self, addr: Address, conn: int, cwnd_pkts: float, now_ns: int, port: Optional[int] = None
    ) -> None:
        """The current window of an open connection (ensemble sharing of cwnd)."""
    def on_rtt_sample(
        self, addr: Address, rtt_s: float, now_ns: int, port: Optional[int] = None
    ) -> None:
        """An RTT sample (> 0) from any connection to the peer (RFC 6298 filter)."""
    def on_mss_option(self, addr: Address, mss: int, now_ns: int, port: Optional[int] = None) -> None: ...
    def on_pmtu(self, addr: Address, pmtu: int, now_ns: int, port: Optional[int] = None) -> None: ...
    def close(
        self,
        addr: Address,
        conn: int,
        now_ns: int,
        port: Optional[int] = None,
        srtt_s: Optional[float] = None,
        rttvar_s: Optional[float] = None,
        cwnd_pkts: Optional[float] = None,
        ssthresh_pkts: Optional[float] = None,
    ) -> None:
        """Closes a connection and merges its state into the cache (mean of old and current)."""
    def expire(self, now_ns: int) -> int:
        """Drops expired entries; returns how many."""
    def __len__(self) -> int:
        """The number of cached peers."""

# ----------------------------------------------------------------------------------------------
# Shared bottleneck detection (RFC 8382) and false sharing (seed 000 sec. 4.1)
#
# Unlike the coupling classes above, these take points in time as float seconds (``now_s``,
# ``start_s``) since an epoch the caller chooses (``macroflow.detect`` uses a capture's first
# packet; a float keeps nanoseconds for about 100 days from it, so do not use the Unix epoch);
# they are rounded to integer nanoseconds as ``Simulation`` rounds its ``start_s``. One-way delays
# are ``owd_ns: int`` nanoseconds, exact and relative: any constant offset per flow (unsynchronized
# clocks, a TSval offset), even a negative delay, is fine. Decisions are "share", "no_share" or
# "inconclusive". Results are plain dicts and lists.

class SbdConfig:
    """RFC 8382's parameters (sec. 2.1), its recommended values (sec. 2.2) as defaults; keyword
    arguments only, validated here: a bad one raises InvalidValueError naming it (``t_s`` > 0,
    ``n`` in 2..=65536, ``m`` in 1..=n, ``c_s`` in -1..=1, ``c_h`` in c_s..=1, ``p_l`` in 0..=1,
    the other thresholds finite and >= 0). Frozen; ``==`` compares every parameter."""

    def __init__(
        self,
        *,
        t_s: float = 0.35,
        n: int = 50,
        m: int = 30,
        c_s: float = -0.01,
        c_h: float = 0.3,
        p_l: float = 0.1,
        p_f: float = 0.1,
        p_mad: float = 0.1,
        p_d: float = 0.1,
        p_s: float = 0.15,
        p_v: float = 0.7,
    ) -> None: ...
    @property
    def t_s(self) -> float:
        """T: the base interval of the measurements, seconds."""
    @property
    def n(self) -> int:
        """N: intervals behind freq_est and pkt_loss (the history kept)."""
    @property
    def m(self) -> int:
        """M (<= N): intervals behind mean_delay, skew_est and var_est."""
    @property
    def c_s(self) -> float:
        """Congested while skew_est < c_s."""
    @property
    def c_h(self) -> float:
        """Hysteresis: a congested flow stays so while skew_est < c_h."""
    @property
    def p_l(self) -> float:
        """Congested whatever the skew above this loss fraction; high-loss groups divide by pkt_loss."""
    @property
    def p_f(self) -> float:
        """freq_est difference that divides a group."""
    @property
    def p_mad(self) -> float:
        """Relative var_est difference that divides a group."""
    @property
    def p_d(self) -> float:
        """Relative pkt_loss difference that divides a high-loss group."""
    @property
    def p_s(self) -> float:
        """skew_est difference that divides a group."""
    @property
    def p_v(self) -> float:
        """A mean crossing is significant beyond p_v * var_est."""
    @property
    def warmup_intervals(self) -> int:
        """max(2*M, N): T intervals with data before a flow is grouped (60 with the defaults)."""

class SbdFlowStats:
    """One flow's statistics of RFC 8382 sec. 3.2 (``coupling::sbd::FlowStats``) in fixed
    memory: intervals ``[start_s + k*T, start_s + (k+1)*T)`` close when a call reaches their end;
    the statistics are those of the closed intervals. Give every flow to be grouped the same
    ``start_s``, so their intervals line up. ``config`` None: ``SbdConfig()``."""

    def __init__(self, config: Optional[SbdConfig] = None, start_s: float = 0.0) -> None: ...
    @property
    def config(self) -> SbdConfig: ...
    def on_packet(self, now_s: float, owd_ns: int) -> None:
        """A packet received at ``now_s`` with relative one-way delay ``owd_ns`` (|owd_ns| <=
        2**52). Times must not go back (TimeWentBackwardsError)."""
    def on_loss(self, now_s: float, lost_pkts: int = 1) -> None:
        """``lost_pkts`` packets found lost at ``now_s`` (counted in the interval open then)."""
    def advance(self, now_s: float) -> int:
        """Closes the intervals that ended at or before ``now_s``; returns how many."""
    def summary(self) -> dict[str, Any]:
        """The statistics after the last closed interval (sec. 3.2), the grouper's input:
        ``skew_est`` (-1..1; negative: the queue is mostly full), ``var_est_ns`` (mean absolute
        deviation of OWD), ``freq_est`` (significant mean crossings per interval), ``pkt_loss``
        (lost / (received + lost) over N intervals), ``mean_delay_ns`` (None before any data;
        in the caller's OWD base), ``intervals_closed``, ``data_intervals`` (intervals with samples
        since mean_delay last became defined: the warm-up count) and ``skew_samples``."""
    def counters(self) -> dict[str, int]:
        """Running totals: ``received_pkts``, ``lost_pkts``, ``intervals_closed``,
        ``empty_intervals``, ``samples_without_mean_delay``, ``samples_without_previous_mean``."""
    def last_interval(self) -> Optional[dict[str, Any]]:
        """The most recently closed interval (None before the first): ``received_pkts``,
        ``lost_pkts``, ``mean_owd_ns`` (E[OWD], None when empty), ``skew_base``,
        ``skew_samples``, ``var_base_ns``, ``var_samples``, ``crossing``."""
    @property
    def current_interval_end_s(self) -> float:
        """The end of the open interval."""
    @property
    def history_len(self) -> int:
        """Closed intervals held (at most N)."""

class SbdGrouper:
    """RFC 8382 sec. 3.3.1's grouping, with the per-flow hysteresis of step 1
    (``coupling::sbd::SbdGrouper``). ``config`` None: ``SbdConfig()``."""

    def __init__(self, config: Optional[SbdConfig] = None) -> None: ...
    @property
    def config(self) -> SbdConfig: ...
    def group(self, flows: dict[int, Union[SbdFlowStats, dict[str, Any]]]) -> dict[str, Any]:
        """Groups the flows from their summaries now: ``flows`` maps each flow id to its
        :class:`SbdFlowStats` or to a summary dict as ``SbdFlowStats.summary()`` returns it
        (``mean_delay_ns`` and ``intervals_closed`` may be left out; a missing or unknown key,
        or a value out of its domain, raises InvalidValueError naming it, and nothing changes).
        Returns ``groups`` (lists of flow ids sharing a bottleneck, each sorted, sorted by their
        first id), ``not_congested`` and ``insufficient_data`` (short of the warm-up, or no compared
        sample): every flow is in exactly one of the three; ``congested`` {flow: "skew" |
        "hysteresis" | "loss"}, why each grouped flow is congested; ``splits``, the divisions made,
        in order, each {``step``: "freq_est" | "var_est" | "skew_est" | "pkt_loss", ``below``,
        ``above`` (the flows either side of the cut), ``below_value``, ``above_value``,
        ``threshold`` (in the statistic's units: the difference exceeded it)}."""
    def was_congested(self, flow: int) -> bool:
        """Whether the flow was congested at its last decision (the hysteresis state)."""
    def forget(self, flow: int) -> bool:
        """Drops the flow's hysteresis state (call it when a flow ends); returns whether it had any."""

class FalseSharingDetector:
    """Seed 000's four false-sharing tests for the pair (``a``, ``b``)
    (``coupling::falseshare::FalseSharingDetector``): asymmetric and symmetric loss correlation,
    delay correlation (each deciding when the ``confidence`` intervals of its cross and auto
    metrics stop overlapping) and out of order (no share after ``min_occasions`` reordering
    occasions, ``occasion_gap_s`` apart, within ``horizon_s``). ``a`` is the asymmetric test's
    comparison flow. Packets carry the pair's shared sequence number (one counter at the source
    for both flows); reports may come in any order within ``reorder_window_pkts``. Parameters
    are checked here: a bad one raises InvalidValueError naming the keyword (``confidence``
    strictly in (0, 1); ``*_min_samples`` in 1..=``*_window_samples`` <= 65536;
    ``reorder_window_pkts`` in 1..=2**20; ``min_occasions`` in 1..=65536; ``horizon_s`` >
    (min_occasions - 1) * occasion_gap_s); ``a == b`` raises DuplicateFlowError. Memory is
    fixed at construction (about 72 KiB with the defaults)."""

    def __init__(
        self,
        a: int,
        b: int,
        start_s: float = 0.0,
        *,
        confidence: float = 0.9,
        reorder_window_pkts: int = 256,
        loss_min_samples: int = 10,
        loss_window_samples: int = 1024,
        delay_min_samples: int = 10,
        delay_window_samples: int = 2048,
        extent_pkts: int = 3,
        min_occasions: int = 10,
        occasion_gap_s: float = 0.5,
        horizon_s: float = 10.0,
    ) -> None: ...
    @property
    def flows(self) -> tuple[int, int]:
        """``(a, b)``."""
    def on_packet(self, now_s: float, flow: int, seq: int, owd_ns: int) -> None:
        """A packet of ``flow`` (``a`` or ``b``, else UnknownFlowError) with shared sequence number
        ``seq`` (< 2**64 - 1) arrived at ``now_s`` with relative one-way delay ``owd_ns``
        (within 2**46 ns of the flow's first). Arrivals are taken in call order (the out-of-order
        test's arrival order). A number already reported for the other flow is refused."""
    def on_loss(self, now_s: float, flow: int, seq: int) -> None:
        """The packet of ``flow`` numbered ``seq`` was found lost, reported at ``now_s`` (an arrival
        of the same number wins)."""
    def flush(self, now_s: float) -> int:
        """Finalizes every number up to the highest reported (the end of a trace; numbers never
        reported count as unreported); returns how many."""
    def decisions(self) -> dict[str, dict[str, Any]]:
        """Every test's answer now, under ``asymmetric_loss``, ``symmetric_loss``, ``delay`` and
        ``out_of_order``. Each has ``decision`` and ``history`` {``decision``, ``since_s``,
        ``first_share_at_s``, ``first_no_share_at_s`` (None if never), ``share_detection_time_s``,
        ``no_share_detection_time_s`` (from ``start_s``: the detection times of sec. 4),
        ``changes``, ``start_s``}. The loss tests add ``kind``, ``auto`` and ``cross`` (the
        conditional loss probabilities as {``value``, ``lo``, ``hi``, ``samples``}, their Wilson
        interval; None without trials), ``trials``, ``auto_lost``, ``cross_lost`` and ``counters``
        {``conditions``, ``not_interleaved``, ``broken_by_gap``, ``trials``}; the delay test
        ``auto`` and ``cross`` (pooled correlations with their Fisher interval), ``directions``
        (samples taken at a's and at b's packets: {``samples``, ``auto_r``, ``cross_r``}),
        ``samples`` and ``counters`` {``positions``, ``interleaved``, ``samples``,
        ``missing_delay``, ``gaps``}; the out-of-order test ``arrivals``, ``reordered_pkts``,
        ``occasions``, ``recent_occasions``, ``last_occasion_at_s``, ``max_extent_pkts`` and
        ``within_flow_late_pkts``."""
    def counters(self) -> dict[str, int]:
        """Running totals of the inputs: ``packets``, ``loss_reports``, ``duplicate_packets``,
        ``duplicate_loss_reports``, ``lost_then_received``, ``loss_reports_for_received``,
        ``after_finalized``, ``finalized_duplicates``, ``beyond_record``, ``finalized_pkts``,
        ``unreported_pkts``, ``pending_pkts``."""

class SimulationError(ValueError):
    """A simulation was built or run with an invalid parameter; the message names it."""

class SimulationInternalError(SimulationError):
    """A bug in the simulator (a panic inside the engine, caught): the simulation is closed.
    Please report it."""

class Simulation:
    """The packet-level simulator. Build the topology first; adding the first flow fixes it and
    computes routes. Times are float seconds (``_s``), rates bit/s (``_bps``). Flows and priority
    changes may be added between ``run`` calls, starting at ``now_s`` or later (an earlier start
    is refused: it would run the clock backwards)."""

    def __init__(self, seed: int = 1) -> None: ...
    def add_node(self, name: str) -> int: ...
    def add_link(
        self,
        src: int,
        dst: int,
        rate_bps: float,
        delay_s: float,
        queue_pkts: int | None = None,
        queue_bytes: int | None = None,
        random_drop: float = 0.0,
        queue: dict[str, Any] | None = None,
        jitter_s: float = 0.0,
    ) -> int:
        """A one-way link with a drop-tail queue (packets or bytes; 1000 packets by default),
        optionally with Bernoulli random drop in front of it; or with any discipline given as a
        ``queue`` spec (not both). A spec is a dict with ``kind`` (one of :data:`QUEUE_KINDS`)
        and that kind's keys; :data:`QUEUE_SPEC_SCHEMA` is its JSON Schema, generated from the
        simulator's type (the authority on keys, types, bounds and defaults). In short:

        - ``drop_tail``: ``limit_pkts`` or ``limit_bytes``
        - ``random_drop``: ``p``, ``inner`` (a spec)
        - ``loss_period``: ``p``, ``start_s``, ``end_s``, ``inner`` (drops only in [start, end))
        - ``red``: limit, ``min_th_pkts``, ``max_th_pkts``, ``max_p``, ``q_weight``, ``gentle``,
          ``mean_pkt_bytes`` (omitted: ns-2's defaults 5, 15, 0.1, 0.002, true, 1000)
        - ``rio``: limit, ``in_min_th_pkts``, ``in_max_th_pkts``, ``in_max_p``, ``out_min_th_pkts``,
          ``out_max_th_pkts``, ``out_max_p`` (color 0 in profile), optional ``q_weight``, ``gentle``,
          ``mean_pkt_bytes``
        - ``token_bucket``: ``rate_bps``, ``bucket_bytes``, ``inner`` (colors packets for RIO)
        - ``wrr``: ``classes`` (list of ``{dscps, weight, queue}``), ``default_class`` (default 0)
        - ``drr``: ``limit_pkts``, ``quantum_bytes`` (default 1500)

        Specs nest at most 16 levels (``inner``, a class's ``queue``). Unknown kinds or keys,
        missing keys, values of the wrong type (``None`` and booleans are not numbers) and bad
        values raise SimulationError naming the path, e.g. ``queue.inner.kind: unknown queue
        kind "fifo"; ...`` or ``queue: missing field `inner```.

        ``jitter_s`` (0 ..= 1): each packet's propagation is longer by a uniform draw in
        [0, jitter_s], its order kept: a host's sending jitter (ns-2's TCP ``overhead_``)."""
    def dumbbell(
        self,
        pairs: int,
        bottleneck_rate_bps: float = 10e6,
        bottleneck_delay_s: float = 0.048,
        queue_pkts: int | None = None,
        access_rate_bps: float = 1e9,
        access_delays_s: list[float] | None = None,
        random_drop: float = 0.0,
        queue: dict[str, Any] | None = None,
        access_jitter_s: float = 0.0,
    ) -> dict[str, Any]:
        """The dissertation's dumbbell by default (83-packet drop-tail bottleneck); ``queue`` (a
        spec, see :meth:`add_link`) replaces the bottleneck's queue; ``access_jitter_s`` is the
        hosts' sending jitter, on each host's link to its router. Returns ``senders``,
        ``receivers`` (node ids), ``bottleneck`` and ``reverse`` (link ids). A failed call leaves
        the topology unchanged."""
    def parking_lot(
        self,
        hops: int,
        rate_bps: float = 10e6,
        delay_s: float = 0.01,
        queue_pkts: int | None = None,
        access_rate_bps: float = 1e9,
        access_delay_s: float = 0.001,
        queue: dict[str, Any] | None = None,
        access_jitter_s: float = 0.0,
    ) -> dict[str, Any]:
        """Routers R0..R{hops} in a chain (duplex links of ``rate_bps``, ``delay_s``, a drop-tail
        of ``queue_pkts`` (default 1000) or a ``queue`` spec), host H{i} on router R{i} (its link
        to the router with ``access_jitter_s`` of sending jitter). Returns
        ``routers``, ``hosts`` (node ids) and ``hops`` (the forward links R{i} -> R{i+1})."""
    def add_tcp_flow(
        self,
        src: int,
        dst: int,
        start_s: float = 0.0,
        size_bytes: int | None = None,
        cc: str = "newreno",
        mss: int = 1448,
        initial_cwnd_pkts: float = 10.0,
        delayed_ack: bool = True,
        sack: bool = True,
        min_rto_s: float = 0.2,
        dscp: int = 0,
    ) -> int:
        """A TCP flow; bulk when ``size_bytes`` is None. ``cc``: ``newreno`` (1/cwnd per ACK, as ns-2
        and ns-3), ``newreno_abc`` (RFC 3465 counting of acknowledged segments, as Linux),
        ``cubic`` (RFC 9438), ``ledbat`` (RFC 6817), ``vegas`` (Linux tcp_vegas) or ``reno_int``
        (Linux Reno with whole-packet windows, the only kind an integer-mode coupling group,
        ``ccc_int``, accepts); the list is ``CONGESTION_CONTROLS``."""
    def add_udp_flow(
        self,
        src: int,
        dst: int,
        kind: Literal["cbr", "self_similar"] = "cbr",
        rate_bps: float | None = None,
        pkt_bytes: int = 1000,
        load_bps: float | None = None,
        start_s: float = 0.0,
        dscp: int = 0,
        end_s: float | None = None,
    ) -> int:
        """A UDP flow: constant bit rate, or the self-similar cross traffic of seed 003 sec. 9.3
        (11 on/off streams, Pareto on-times with H = 0.8) scaled to ``load_bps``, sending from
        ``start_s`` until ``end_s`` (None: the end of the run)."""
    def add_web_workload(
        self,
        pairs: list[tuple[int, int]],
        load_bps: float,
        mean_size_bytes: float = 50e3,
        start_s: float = 0.0,
        end_s: float = 60.0,
        pareto_shape: float = 1.2,
        cc: str = "newreno",
    ) -> list[int]:
        """Short TCP flows, Poisson arrivals and Pareto sizes, between the node pairs."""
    def add_media_flow(
        self,
        src: int,
        dst: int,
        controller: Literal["nada", "tfrc", "rap", "gcc"] = "nada",
        source: Literal["greedy", "app_limited", "video"] = "greedy",
        rate_bps: float | None = None,
        trace_file: str | os.PathLike[str] | None = None,
        fps: float = 30.0,
        pauses: list[tuple[float, float]] = ...,
        packet_bytes: int = 1200,
        start_s: float = 0.0,
        dscp: int = 0,
    ) -> int:
        """A rate-controlled media flow: the controller paces packets; the source is greedy,
        application-limited at ``rate_bps``, or video (a trace file of frame sizes, or a synthetic
        trace of ``rate_bps``); ``pauses`` are intervals without data."""
    def add_fse_group(self, algorithm: FseAlgorithm) -> int: ...
    def couple_media(
        self, flow: int, group: int, priority: float, delay_min_s: float = 0.0, delay_max_s: float = 0.0
    ) -> None:
        """Couples a media flow to an FSE group; its signalling with the FSE is delayed uniformly
        in [delay_min_s, delay_max_s]."""
    def measure_media(self, flow: int, group: int) -> None:
        """Observes a media flow that has not started with a measured group's detectors
        (detection only: the group needs ``respond=False``; a group measures TCP flows or media
        flows, not both)."""
    def couple_tcp_fse(
        self, flow: int, group: int, priority: float, delay_min_s: float = 0.0, delay_max_s: float = 0.0
    ) -> None:
        """Couples a TCP flow that has not started to an FSE group (seed 003 sec. 6.3.1, Fig. 6.3).
        It registers when it starts; once per round trip (the first ACK beyond the highest byte
        sent at its previous update, in the Open state) it reports CC_R = cwnd * MSS / SRTT, and
        the rate FSE_R the group's algorithm answers (passive: to the updating flow only; active:
        to every flow) sets cwnd = max(1, FSE_R * SRTT / MSS), ssthresh unchanged; an answer
        reaching a flow in loss recovery is dropped. It leaves when its transfer completes. Its
        signalling with the FSE is delayed uniformly in [delay_min_s, delay_max_s]. A group
        couples TCP flows or media flows, not both, and a TCP flow is in one group (an FSE's or
        a TCP coupler's): SimulationError otherwise, with nothing changed."""
    def add_coupling_group(self, kind: CouplerKind, max_burst_pkts: float = 0.0) -> int:
        """A TCP coupling group; `max_burst_pkts`: segments beyond its flight an answer may let a
        connection send at once (0: never more than its own controller would)."""
    def add_measured_group(
        self,
        coupler: CouplerKind = "ccc",
        test: str = "out_of_order",
        confidence: float = 0.9,
        respond: bool = True,
        memory_expiry_s: float = 600.0,
        max_burst_pkts: float = 0.0,
    ) -> int:
        """A measured TCP coupling group (seed 000): its flows start in one macroflow running
        `coupler`; false-sharing detectors watch every pair (tables `detections`,
        `detector_samples`, `measured_groups`); unless `respond` is false, `test`'s (one of
        asymmetric_loss, symmetric_loss, delay, out_of_order, or sbd: RFC 8382) "no share" splits a pair and "share"
        merges it back; a detection keeps new flows unshared for `memory_expiry_s`. With
        `respond=False` it may instead watch media flows (`measure_media`); a group measures
        one kind of flow, and its tables' flow numbers are then media-flow numbers."""
    def couple(self, flow: int, group: int, priority: float) -> None: ...
    def set_priority_at(self, t_s: float, flow: int, priority: float) -> None:
        """Changes coupled TCP flow `flow`'s priority at `t_s`, in its TCP coupler group or its
        FSE group (there active algorithms redistribute at once, passive ones at the flow's next
        update)."""
    def set_media_priority_at(self, t_s: float, flow: int, priority: float) -> None:
        """Changes media flow `flow`'s priority in its FSE group at `t_s` (seed 003 Fig. 5.13):
        active algorithms redistribute at once, passive ones at the flow's next UPDATE."""
    def sample_every(self, interval_s: float, links: list[int] = ...) -> None:
        """Records every flow's cwnd/ssthresh/state/delivered bytes and the given links' queues."""
    def capture(self, link: int, path: str | os.PathLike[str]) -> None:
        """Captures every packet the link transmits into a pcap file (headers only, nanosecond
        timestamps, raw IPv4); complete after :meth:`flush_captures`."""
    def flush_captures(self) -> None: ...
    def run(self, until_s: float) -> None:
        """Runs to ``until_s`` simulated seconds; releases the GIL."""
    @property
    def now_s(self) -> float: ...
    def results(self) -> dict[str, Any]:
        """Tables: ``flows``, ``udp_flows``, ``media_flows``, ``links``, ``flow_samples``, ``queue_samples``,
        ``media_samples``, each a ``pyarrow.RecordBatch`` built in Rust and handed over without a
        copy (the Arrow C data interface); :func:`macroflow.sim.tables` makes them tables. Each has
        a fixed schema (``crates/py/src/tables.rs``), the same for an empty table as for a full
        one: integers (ids, counts, bytes, a link's ``rate_bps``) are ``int64``, other numbers
        ``float64``, names ``string``, and only ``fct_s``, ``mean_rtt_s``, ``mean_owd_s`` and ``srtt_s`` are
        nullable (a missing value is a null, never a null-typed column). Beside them:
        ``packets`` (created, delivered, dropped, in_flight), ``events``, ``duration_s``, ``sampling_stopped_at_s`` (when the time series stopped at 2 M rows; None when they did not),
        and ``coupling_errors``: calls the couplers refused, by call (``register``: the flow then ran
        uncoupled; ``update``: the sender kept its own window; ``on_ack``, ``leave``,
        ``set_priority``, ``fse``); none are expected.

        ``flows`` (one row per TCP flow): ``flow``, ``src``, ``dst``, ``cc``, ``start_s``, ``fct_s``
        (null unless a finite flow completed), ``delivered_bytes``, ``goodput_bps``,
        ``data_pkts_sent``, ``retransmits``, ``timeouts``, ``max_burst_pkts``, ``burst_hist``,
        ``fast_recoveries``, ``mean_rtt_s`` (null without an RTT sample).

        A burst is the data packets (new or retransmitted) one flow's sender emits back to back at
        one simulated instant, however many calls emitted them (an ACK's retransmission and the
        new data after it, a coupler's handover, go-back-N after a timeout); packets at different
        instants are different bursts. ``max_burst_pkts`` is the largest burst of the run (0 before
        the flow sends). ``burst_hist`` is a list of 11 counts (Arrow ``list<int64>``): entry ``k``
        counts the bursts of ``2**k`` to ``2**(k+1) - 1`` packets, i.e. 1, 2-3, 4-7, ...,
        512-1023, and the last entry (``k = 10``) every burst of 1024 packets or more
        (``sim::stats::burst_bucket``)."""

# --- the flow-level model (crates/flowsim, seed 002) ---------------------------------------------

class FlowModelError(ValueError):
    """A flow-level model built or run with invalid input; the message names it."""

class FlowModelInternalError(FlowModelError):
    """A bug in the flow-level model (a panic inside the crate, caught). The model is immutable,
    so it is unchanged and still usable. Please report it."""

SENDER_MODELS: tuple[str, ...]
"""``naive``, ``full_balanced``, ``full_share``, ``naive_ratio``, ``limited_ratio`` (seed 002 Eqs. 1-5)."""

class FlowResult(TypedDict):
    demand: list[float]
    goodput: list[float]
    flow_dead: list[float]
    flow_zombie: list[float]
    flow_zombie_suffered: list[float]
    link_dropped: list[float]
    link_dead: list[float]
    link_zombie: list[float]
    link_utilization: list[float]
    total_goodput: float
    total_dead: float
    total_zombie: float
    total_dropped: float
    jain: float
    iterations: int
    converged: bool
    delta: float

class FlowModel:
    """A network (directed links with capacities in flow units) and its routed flows; immutable.
    Nodes are created by name as links name them."""

    def __init__(
        self,
        links: list[tuple[str, str, float]],
        flows: list[tuple[str, str]],
        routes: list[list[str]] | None = None,
        nodes: list[str] | None = None,
        require_connected: bool = True,
    ) -> None:
        """Flows go on shortest-hop paths (ties to the first-added link), or on ``routes`` (node
        names, source first). Raises FlowModelError on a self-loop, a negative/NaN/infinite
        capacity, a duplicate link, an unknown node, a flow to itself, no path, a bad route, or (with
        ``require_connected``) a disconnected graph."""
    @property
    def n_flows(self) -> int: ...
    @property
    def n_links(self) -> int: ...
    @property
    def n_nodes(self) -> int: ...
    def links(self) -> list[tuple[str, str, float]]: ...
    def nodes(self) -> list[str]: ...
    def route(self, i: int) -> list[int]: ...
    def hop_counts(self) -> list[int]: ...
    def initial_demands(self) -> list[float]:
        """Eq. 1: each sender link's capacity split equally among the flows that start on it."""
    def clamp(self, demands: list[float] | None = None) -> list[float]:
        """The max-min fair rates (Fig. 5's clamp by progressive filling); demands default to infinity."""
    def clamp_oracle(self, demands: list[float] | None = None) -> list[float]:
        """Fig. 5 as written: one brick-wall computation per flow (slow; a reference)."""
    def check_max_min(self, rates: list[float], demands: list[float] | None = None, tol: float = 1e-9) -> None:
        """Raises FlowModelError saying why ``rates`` are not max-min fair. ``tol`` in [0, 1) is
        relative (to each quantity compared and to the largest capacity), so the verdict does not
        depend on the instance's units; another ``tol`` raises FlowModelError (BadTolerance)."""
    def senders(
        self, model: str, alpha: float = 0.2, epsilon: float = 1e-6, max_iterations: int = 10_000,
        mmf: list[float] | None = None,
    ) -> FlowResult:
        """A sender model iterated to its fixed point (Fig. 6), with dead and zombie flow against ``mmf``
        (clamp's rates, computed when not given). The iteration stops when no demand moves by more
        than ``epsilon`` times the capacity of the flow's first link (relative, so the answer scales
        with the instance); ``converged`` says whether it did before ``max_iterations``."""
    def loss_load(
        self, k: float, epsilon: float = 1e-4, max_iterations: int = 10_000, mmf: list[float] | None = None
    ) -> FlowResult:
        """Loss-load routers and senders with penalty ``k`` (section 9), computed in log space (any
        ``k`` >= 1 at any scale); ``epsilon`` is relative as in ``senders``. Raises FlowModelError
        when the routers on a cycle of links never settle; ``converged`` is False when the senders
        did not within ``max_iterations``."""
    def solve(self, demands: list[float], mmf: list[float] | None = None) -> FlowResult:
        """The brick-wall flow for fixed demands (no sender reaction)."""


# --- the client of macroflowd (crates/fsed; public module macroflow.fse_client) ------------------

FseGroupSpec = Union[int, str, dict[str, Any]]
"""A flow group as :class:`FseClient` takes it: an ``int`` (explicit flow group id), a ``str`` (a
configured label) or ``{"src", "dst", "protocol", "src_port", "dst_port", "dscp"}`` (addresses as
IPv4 or IPv6 strings or ``ipaddress`` objects; ``dscp`` optional, 0)."""
WindowState = Literal["slow_start", "congestion_avoidance", "fast_recovery", "SS", "CA", "FR"]

class FseError(CouplingError):
    """macroflowd refused a request and changed nothing."""

    field: str
    """What it refused, e.g. ``"register_rate.priority"``, ``"update_rate.flow"``."""
    message: str
    """Why."""

class FseFlowInfo(TypedDict):
    flow: int
    group: int
    priority: float
    """The priority the client asked for."""
    effective_priority: float
    """The priority the coupler uses (lower if the user's share is limited by the policy)."""
    rate_or_cwnd: float
    """FSE_R (rate flows, bit/s) or the coupler's window for it (window flows, packets)."""
    desired_rate_bps: float
    """DR (rate flows; ``inf``: unlimited); 0 for window flows."""

class FseGroupInfo(TypedDict):
    group: int
    coupler: str
    """"active", "conservative_active", "simple_passive", "passive", or the TCP coupler's name."""
    flows: list[FseFlowInfo]
    """This connection's own flows only (others' are counted in ``flow_count``)."""
    flow_count: int
    sum_calculated: float
    """S_CR (rate groups) or the aggregate window (window groups)."""
    leftover: float
    """TLO, the passive algorithm's leftover (0 otherwise)."""

class FsePush(TypedDict):
    flow: int
    rate_bps: float

class FseRegistered(TypedDict):
    flow: int
    group: int
    rate_bps: float

class FseRegisteredWindow(TypedDict):
    flow: int
    group: int
    cwnd_pkts: float
    ssthresh_pkts: float

class FseClient:
    """A connection to ``macroflowd`` on the Unix socket ``path`` (see :mod:`macroflow.fse_client`).

    Blocking, one request at a time; calls from several threads take turns, and the GIL is
    released while a call waits for the daemon. A daemon refusal raises :class:`FseError` (nothing
    changed); an argument that cannot be sent (or a request too large for a frame) raises
    InvalidValueError (a ``ValueError``) naming it before anything is sent; socket errors are ``OSError`` subclasses. A context manager:
    leaving the ``with`` block closes the connection, and the daemon removes its flows.
    """

    def __init__(self, path: Union[str, os.PathLike[str]]) -> None:
        """Connects and says Hello (FileNotFoundError if nothing is at ``path``; ConnectionError
        if the daemon refuses the connection, e.g. at its ``max_clients``)."""
    @staticmethod
    def connect(path: Union[str, os.PathLike[str]]) -> FseClient:
        """The same as ``FseClient(path)``."""
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def peer(self) -> tuple[int, int]:
        """``(uid, pid)``: who the daemon sees this process as (the kernel's SO_PEERCRED)."""
    def register_rate(
        self,
        group: FseGroupSpec,
        priority: float,
        initial_rate_bps: float,
        algorithm: Optional[FseAlgorithm] = None,
        timeout_ms: Optional[int] = None,
        desired_rate_bps: Optional[float] = None,
    ) -> FseRegistered:
        """Registers a rate-based flow with its controller's initial rate. ``algorithm``: the
        group's if this flow creates it (else it must match; None: the configuration's).
        ``timeout_ms``: soft state, the flow is removed when silent for longer (None: the
        configuration's default). ``desired_rate_bps``: the application's desired rate, used by
        every ``update_rate`` that names none (None: unlimited)."""
    def register_window(
        self,
        group: FseGroupSpec,
        priority: float,
        cwnd_pkts: float,
        ssthresh_pkts: float,
        timeout_ms: Optional[int] = None,
    ) -> FseRegisteredWindow:
        """Registers a window-based flow (TCP-CCC or the configured TCP coupler)."""
    def update_rate(
        self,
        flow: int,
        cc_rate_bps: float,
        desired_rate_bps: Optional[float] = None,
        rtt_us: Optional[int] = None,
    ) -> float:
        """UPDATE of a rate flow: its controller's rate CC_R, what the application wants (None:
        unlimited), its RTT in microseconds ("conservative_active" needs it). Returns the rate to
        use now."""
    def update_window(
        self,
        flow: int,
        cwnd_pkts: float,
        ssthresh_pkts: float,
        state: WindowState,
        timeout: bool = False,
        in_flight_pkts: float = 0.0,
    ) -> Optional[tuple[float, float]]:
        """UPDATE of a window flow; returns ``(cwnd_pkts, ssthresh_pkts)`` to use, or None to
        keep its own."""
    def set_priority(self, flow: int, priority: float) -> None: ...
    def refresh(self, flow: int) -> None:
        """Keeps a flow's soft state alive without an update."""
    def leave(self, flow: int) -> None: ...
    def subscribe(self, flow: int) -> None:
        """Pushes of this flow's new rate whenever its group recomputes it (active algorithms)."""
    def query_flow(self, flow: int) -> FseFlowInfo: ...
    def query_group(self, group: int) -> FseGroupInfo:
        """A group this connection has a flow in."""
    def take_pushes(self) -> list[FsePush]:
        """The pushes received so far, oldest first."""
    def wait_push(self, timeout_s: float) -> Optional[FsePush]:
        """The next push, waiting up to ``timeout_s`` seconds; None if none came."""
    def close(self) -> None:
        """Closes the connection (the daemon removes its flows); later calls raise OSError."""
    def __enter__(self) -> FseClient: ...
    def __exit__(self, *args: object) -> bool: ...
