"""macroflow: coupled congestion control (FSE, TCP-CCC) and the instruments that prove it.

The coupling layer is the Rust crate ``coupling``; this package exposes it through thin bindings
(``macroflow._native``). Conventions: ids are ``int``; points in time are ``now_ns: int``
nanoseconds on a clock the caller chooses (nothing here reads a clock); spans such as RTTs and
timeouts are float seconds (``_s``); rates are float bit/s (``_bps``); windows are float packets
(``_pkts``). Every error is a :class:`CouplingError` (a ``ValueError``), and a call that raises
leaves the object unchanged, except :class:`CouplingInternalError`: a bug (a panic inside the
crate, caught) after which the object is closed.

Experiments (scenario files, sweeps, reproductions, reports) have a Python API mirroring the
``macroflow`` command: :func:`run`, :func:`sweep`, :func:`reproduce`, :func:`report`,
:func:`load_results` (see :mod:`macroflow.api`). Shared-bottleneck detection (RFC 8382:
:class:`SbdFlowStats`, :class:`SbdGrouper`) and the false-sharing tests
(:class:`FalseSharingDetector`) take float seconds and run on captures in :mod:`macroflow.detect`
(``macroflow detect``). The flow-level model of fairness-enforcing
networks is :class:`FlowModel` (``crates/flowsim``; topologies and traffic in :mod:`macroflow.flowsim`).
The client of ``macroflowd``, the FSE and TCP-CCC as a daemon on a Unix socket, is
:class:`FseClient` (:mod:`macroflow.fse_client`).
"""

from macroflow._native import (
    CONGESTION_CONTROLS,
    FSE_ALGORITHMS,
    QUEUE_KINDS,
    QUEUE_SPEC_SCHEMA,
    RATE_CONTROLLERS,
    SENDER_MODELS,
    TCP_COUPLER_KINDS,
    TCP_STATES,
    ConnView,
    CouplingError,
    CouplingInternalError,
    DuplicateFlowError,
    FalseSharingDetector,
    FlowModel,
    FlowModelError,
    FlowModelInternalError,
    FlowView,
    Fse,
    FseClient,
    FseError,
    FseGroup,
    FseGroupView,
    GroupNotEmptyError,
    InvalidValueError,
    MissingInputError,
    Outcome,
    Release,
    Response,
    SbdConfig,
    SbdFlowStats,
    SbdGrouper,
    Simulation,
    SimulationError,
    SimulationInternalError,
    TcbCache,
    TcbInit,
    TcpCoupler,
    TcpGroups,
    TcpGroupView,
    TimeWentBackwardsError,
    UnknownFlowError,
    UnknownGroupError,
    UnsupportedError,
    __version__,
)
from macroflow.api import load_results, report, reproduce, run, sweep

__all__ = [
    "CONGESTION_CONTROLS",
    "FSE_ALGORITHMS",
    "QUEUE_KINDS",
    "QUEUE_SPEC_SCHEMA",
    "RATE_CONTROLLERS",
    "SENDER_MODELS",
    "TCP_COUPLER_KINDS",
    "TCP_STATES",
    "ConnView",
    "CouplingError",
    "CouplingInternalError",
    "DuplicateFlowError",
    "FalseSharingDetector",
    "FlowModel",
    "FlowModelError",
    "FlowModelInternalError",
    "FlowView",
    "Fse",
    "FseClient",
    "FseError",
    "FseGroup",
    "FseGroupView",
    "GroupNotEmptyError",
    "InvalidValueError",
    "MissingInputError",
    "Outcome",
    "Release",
    "Response",
    "SbdConfig",
    "SbdFlowStats",
    "SbdGrouper",
    "Simulation",
    "SimulationError",
    "SimulationInternalError",
    "TcbCache",
    "TcbInit",
    "TcpCoupler",
    "TcpGroups",
    "TcpGroupView",
    "TimeWentBackwardsError",
    "UnknownFlowError",
    "UnknownGroupError",
    "UnsupportedError",
    "__version__",
    "load_results",
    "report",
    "reproduce",
    "run",
    "sweep",
]
