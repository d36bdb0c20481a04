"""The packet-level simulator from Python: :class:`Simulation` (the Rust engine) and results as
Arrow tables (record batches built in Rust with fixed schemas, shared with pyarrow without a copy).

>>> from macroflow.sim import Simulation, tables
>>> s = Simulation(seed=1)
>>> d = s.dumbbell(2)                      # the dissertation's 10 Mbit/s, 100 ms RTT dumbbell
>>> f = s.add_tcp_flow(d["senders"][0], d["receivers"][0])
>>> s.run(10.0)
>>> t = tables(s.results())                # {"flows", "udp_flows", "media_flows", "links", "flow_samples", ...}
"""

from __future__ import annotations

from typing import Any, Dict

import pyarrow as pa

from macroflow._native import Simulation, SimulationError

__all__ = ["Simulation", "SimulationError", "tables"]

TABLES = (
    "flows", "udp_flows", "media_flows", "links", "flow_samples", "queue_samples", "media_samples",
    "detections", "detector_samples", "measured_groups",
)


def tables(results: Dict[str, Any]) -> Dict[str, pa.Table]:
    """Turns :meth:`Simulation.results` into Arrow tables; run-wide figures (``packets``,
    ``events``, ``duration_s``, ``coupling_errors``) go into each table's schema metadata.

    Each table has a fixed schema, defined once in the bindings (``crates/py/src/tables.rs``):
    an empty table, or a column of nulls only (``fct_s`` when no flow finished), has the same
    types as a full one. The tables share the record batches' memory (no copy)."""
    meta = {
        "duration_s": str(results["duration_s"]),
        "events": str(results["events"]),
        # When the time series stopped at the simulator's row bound ("" when they did not).
        "sampling_stopped_at_s": "" if results.get("sampling_stopped_at_s") is None else str(results["sampling_stopped_at_s"]),
        **{f"packets_{k}": str(v) for k, v in results["packets"].items()},
        # Calls the couplers refused, by call (none are expected).
        **{f"coupling_errors_{k}": str(v) for k, v in results["coupling_errors"].items()},
    }
    return {name: pa.Table.from_batches([results[name]]).replace_schema_metadata(meta) for name in TABLES}
