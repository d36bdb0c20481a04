"""Shared scenario definitions, TCP settings and the result record for the peer benchmarks.

The peer scripts (ns3_dumbbell.py, ns2_dumbbell.py) import this module; it has no
dependency beyond the Python standard library.

Topology (all scenarios): N senders -> R1 -> bottleneck -> R2 -> N receivers, one bulk
TCP NewReno flow per sender/receiver pair, data in one direction only. The only queue
that ever fills is the drop-tail queue at R1 on the R1->R2 bottleneck link; every access
link queue is made large (ACCESS_QUEUE_PKTS) so that it never drops.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

# ---------------------------------------------------------------------------------------
# TCP and packet settings shared by both simulators (see README.md for what each one
# can and cannot express).
# ---------------------------------------------------------------------------------------
MSS_BYTES = 1448                 # TCP payload per data segment
TCP_IP_HDR_BYTES = 52            # 20 IP + 20 TCP + 12 TCP timestamp option
IP_PKT_BYTES = MSS_BYTES + TCP_IP_HDR_BYTES   # 1500-byte IP data packets
ACK_IP_BYTES = TCP_IP_HDR_BYTES  # pure ACK: 52 IP bytes (ns-3 adds SACK blocks when needed)
INITIAL_CWND_SEGMENTS = 10
DELACK_COUNT = 2                 # ACK every second full segment
DELACK_TIMEOUT_S = 0.200
MIN_RTO_S = 0.200
CLOCK_GRANULARITY_S = 0.001      # ns-3 ClockGranularity default; ns-2 tcpTick_ set to match
SOCKET_BUFFER_BYTES = 8 * 1024 * 1024   # send and receive buffers: flows are cwnd-limited
RECV_WINDOW_PKTS = SOCKET_BUFFER_BYTES // MSS_BYTES   # ns-2 window_ (packets) equivalent
ACCESS_QUEUE_PKTS = 100_000      # access-link queues: effectively unbounded, never drop
DEFAULT_SEED = 1
START_SPREAD_S = 0.100           # flows start uniformly at random in [0, 100 ms)


@dataclass(frozen=True)
class Scenario:
    name: str
    n_flows: int
    bottleneck_bps: float
    bottleneck_delay_s: float     # one-way propagation delay of the bottleneck link
    access_bps: float
    access_delay_s: float         # one-way propagation delay of each access link
    queue_pkts: int               # drop-tail limit of the bottleneck queue (packets waiting,
                                  # not counting the one being serialized; see README)
    duration_s: float             # simulated seconds
    description: str = ""
    # Fidelity cases (issue 12) vary the rest; the speed cases A-C keep the defaults.
    access_delays_s: Optional[tuple] = None  # per flow (both access links), overrides access_delay_s
    tcp: str = "newreno"          # "newreno" or "cubic"
    delack: bool = True           # 2-segment delayed ACKs (else an ACK per segment)
    loss: float = 0.0             # Bernoulli loss of packets entering the bottleneck (data only)
    suite: str = "speed"          # "speed" (issue 3) or "fidelity" (issue 12)
    warmup_s: float = 0.0         # > 0: also report the figures over [warmup_s, end] alone

    def delays(self) -> list[float]:
        """One-way delay of each flow's access links (sender's and receiver's)."""
        if self.access_delays_s is not None:
            assert len(self.access_delays_s) == self.n_flows
            return list(self.access_delays_s)
        return [self.access_delay_s] * self.n_flows

    def rtts_s(self) -> list[float]:
        """Each flow's two-way propagation delay (no serialization, no queueing)."""
        return [2.0 * (2.0 * a + self.bottleneck_delay_s) for a in self.delays()]

    @property
    def base_rtt_s(self) -> float:
        """Two-way propagation delay of the first flow."""
        return self.rtts_s()[0]

    @property
    def bdp_pkts(self) -> float:
        return self.bottleneck_bps * self.base_rtt_s / (8.0 * IP_PKT_BYTES)


# Fidelity cases are also measured over [WARMUP_S, end]: the start-up (every flow's slow-start
# overshoot into the queue at once) is a transient whose size varies between simulators with small
# details (see README, "Fidelity suite"), and would otherwise dominate short runs' loss ratios.
WARMUP_S = 20.0

SCENARIOS: dict[str, Scenario] = {
    "A": Scenario("A", 2, 10e6, 0.048, 1e9, 0.001, 83, 300.0,
                  "2 flows, 10 Mbit/s, 100 ms RTT, 83-packet (1 BDP) queue"),
    "B": Scenario("B", 10, 100e6, 0.048, 1e9, 0.001, 833, 100.0,
                  "10 flows, 100 Mbit/s, 100 ms RTT, 833-packet (1 BDP) queue"),
    "C": Scenario("C", 10, 10e9, 8e-6, 10e9, 1e-6, 100, 5.0,
                  "10 flows, 10 Gbit/s everywhere, 20 us propagation RTT, 100-packet queue"),
    # ---- fidelity suite (issue 12): cases the speed benchmark does not cover ----
    "D": Scenario("D", 4, 100e6, 0.0005, 1e9, 0.00025, 8, 60.0,
                  "short RTT, small buffer: 4 flows, 100 Mbit/s, 2 ms RTT, 8-packet (half-BDP) queue",
                  suite="fidelity", warmup_s=WARMUP_S),
    "E": Scenario("E", 5, 20e6, 0.005, 1e9, 0.001, 100, 200.0,
                  "RTT unfairness: 5 flows, 20 Mbit/s, RTTs 14, 30, 50, 90, 170 ms, 100-packet queue",
                  access_delays_s=(0.001, 0.005, 0.010, 0.020, 0.040), suite="fidelity", warmup_s=WARMUP_S),
    "F": Scenario("F", 1, 10e6, 0.048, 1e9, 0.001, 41, 300.0,
                  "single-flow sawtooth: 1 flow, 10 Mbit/s, 100 ms RTT, 41-packet (half-BDP) queue",
                  suite="fidelity", warmup_s=WARMUP_S),
    "G": Scenario("G", 8, 100e6, 0.018, 1e9, 0.001, 333, 60.0,
                  "CUBIC: 8 flows, 100 Mbit/s, 40 ms RTT, 333-packet (1 BDP) queue",
                  tcp="cubic", suite="fidelity", warmup_s=WARMUP_S),
    "M": Scenario("M", 1, 100e6, 0.048, 1e9, 0.001, 1000, 1000.0,
                  "Mathis, delayed ACKs: 1 flow, 1 % random loss, 100 ms RTT, 100 Mbit/s (never full)",
                  loss=0.01, suite="fidelity", warmup_s=WARMUP_S),
    "N": Scenario("N", 1, 100e6, 0.048, 1e9, 0.001, 1000, 1000.0,
                  "Mathis, an ACK per segment: as M without delayed ACKs",
                  loss=0.01, delack=False, suite="fidelity", warmup_s=WARMUP_S),
}


def mathis_bps(sc: Scenario) -> Optional[float]:
    """Mathis et al. 1997 (seed 001 Eq. 5): MSS / RTT * sqrt(3 / (2 b p)), b = segments per ACK,
    for the lossy single-flow cases; None for the others."""
    if sc.loss <= 0 or sc.n_flows != 1:
        return None
    b = DELACK_COUNT if sc.delack else 1
    return MSS_BYTES * 8.0 / sc.base_rtt_s * (3.0 / (2.0 * b * sc.loss)) ** 0.5


def start_times(scenario: Scenario, seed: int, stagger: bool) -> list[float]:
    """Per-flow start times (s). Staggered: uniform in [0, START_SPREAD_S) from a seeded
    PRNG, identical for both simulators; otherwise all flows start at t = 0."""
    if not stagger:
        return [0.0] * scenario.n_flows
    rng = random.Random(seed)
    return [round(rng.uniform(0.0, START_SPREAD_S), 9) for _ in range(scenario.n_flows)]


@dataclass
class Result:
    simulator: str
    simulator_version: str
    scenario: str
    n_flows: int
    sim_seconds: float
    wall_seconds: float
    wall_clock_scope: str
    delivered_data_pkts: int               # data packets arriving at the receivers' TCP
    delivered_pkts_per_wall_s: float
    app_delivered_pkts: int                # unique in-order segments delivered to the sinks
    events: Optional[int]
    events_per_wall_s: Optional[float]
    peak_rss_mb: float                     # ru_maxrss of the child process running the sim
    goodput_bps: float                     # application bytes * 8 / sim_seconds
    goodput_utilization: float             # goodput / bottleneck rate
    bottleneck_arrivals: int               # packets enqueued or dropped at the bottleneck
    bottleneck_drops: int
    loss_ratio: float                      # drops / arrivals
    mean_queue_pkts: float                 # time-average bottleneck queue (packets waiting)
    seed: int
    stagger: bool
    after_warmup: Optional[dict] = None    # warmup_s, loss_ratio, mean_queue_pkts, goodput_bps,
                                           # rexmit_pkts over [warmup_s, end] (fidelity cases)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=False)

    def to_text(self) -> str:
        d = dataclasses.asdict(self)
        extra = d.pop("extra")
        width = max(len(k) for k in d)
        lines = [f"{k:<{width}}  {v}" for k, v in d.items()]
        for k, v in extra.items():
            lines.append(f"{'extra.' + k:<{width}}  {v}")
        return "\n".join(lines)


def base_arg_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    p.add_argument("--duration", type=float, default=None,
                   help="simulated seconds (overrides the scenario's duration)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help="seed for start-time staggering and the simulator's RNG")
    p.add_argument("--no-stagger", dest="stagger", action="store_false",
                   help="start every flow at t=0 instead of uniformly within the first 100 ms")
    p.add_argument("--json", action="store_true", help="print exactly one JSON line")
    return p


def with_duration(sc: Scenario, duration_s: float) -> Scenario:
    """`sc` run for `duration_s`; a run no longer than the warm-up has none (whole run only)."""
    return dataclasses.replace(sc, duration_s=duration_s,
                               warmup_s=sc.warmup_s if sc.warmup_s < duration_s else 0.0)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    sc = SCENARIOS[args.scenario]
    if args.duration is not None:
        if args.duration <= 0:
            raise SystemExit("--duration must be positive")
        sc = with_duration(sc, args.duration)
    return sc


@dataclass
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float      # perf_counter around the whole child process
    maxrss_kb: int           # ru_maxrss of that child only (Linux: kilobytes)


def run_child(cmd: list[str], env: Optional[dict] = None) -> ChildRun:
    """Run cmd as a child process and return its output, wall time and peak RSS.

    os.wait4 gives the resource usage of exactly this child, so the peak memory is per
    run even when several runs happen from one driver."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    # Read both pipes to EOF without deadlocking, then reap with wait4 for the rusage.
    import threading
    err_chunks: list[str] = []
    t = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()))
    t.start()
    out = proc.stdout.read()
    t.join()
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    proc.stderr.close()
    return ChildRun(proc.returncode, out, "".join(err_chunks), wall, int(rusage.ru_maxrss))


def emit(result: Result, as_json: bool) -> None:
    if as_json:
        print(result.to_json(), flush=True)
    else:
        print(result.to_text(), flush=True)


def die(msg: str, code: int = 2) -> "None":
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)
