#!/usr/bin/env python3
"""Run one dumbbell scenario in ns-2 and print comparable figures.

    python3 bench/peers/ns2_dumbbell.py --scenario A [--duration 10] [--json]

Runs `ns bench/peers/ns2_dumbbell.tcl key=value ...` as a child process (one process per
run, so the peak RSS is that run's), times the whole ns process with time.perf_counter,
and parses the one RESULT line the Tcl script prints. The Tcl script writes no trace file:
it reads in-memory counters (see ns2_dumbbell.tcl). Needs Debian's `ns2` package
(bench/peers/install.sh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

HERE = Path(__file__).resolve().parent
TCL = HERE / "ns2_dumbbell.tcl"

# ns-2's DropTail admits a packet only while fewer than limit-1 packets wait, i.e. it holds
# limit-1 waiting packets plus the one on the wire. ns-3's DropTailQueue "83p" holds 83
# waiting packets plus the one being serialized by the device. To give both simulators the
# same buffer (queue_pkts waiting), the ns-2 limit is queue_pkts + 1.
NS2_QLIMIT_OFFSET = 1


def ns2_version(ns_bin: str) -> str:
    version = "ns-2"
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "ns2"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            version = f"ns-2 (Debian ns2 {out.stdout.strip()})"
    except (OSError, subprocess.SubprocessError):
        pass
    return version


def main() -> None:
    ap = C.base_arg_parser(__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=["sack1", "newreno"], default="sack1",
                    help="for NewReno scenarios: sack1: Agent/TCP/Sack1 + Agent/TCPSink/Sack1/DelAck "
                         "(SACK on, default); newreno: Agent/TCP/Newreno + Agent/TCPSink/DelAck (no "
                         "SACK). CUBIC scenarios use Agent/TCP/Linux (tcp_cubic) + TCPSink/Sack1.")
    ap.add_argument("--ns", default=None, help="path to the ns binary (default: ns on PATH)")
    args = ap.parse_args()
    sc = C.scenario_from_args(args)

    ns_bin = args.ns or shutil.which("ns")
    if args.ns and not (os.path.isfile(args.ns) and os.access(args.ns, os.X_OK)):
        C.die(f"--ns {args.ns}: not an executable file")
    if not ns_bin:
        C.die("ns-2 is not installed (no `ns` on PATH). Install it with "
              "`bash bench/peers/install.sh` or `apt-get update && apt-get install -y ns2`.")

    starts = C.start_times(sc, args.seed, args.stagger)
    params = {
        "n": sc.n_flows,
        "bw": f"{sc.bottleneck_bps:.0f}",
        "bdelay": repr(sc.bottleneck_delay_s),
        "abw": f"{sc.access_bps:.0f}",
        "adelays": ",".join(repr(a) for a in sc.delays()),
        "qlim": sc.queue_pkts + NS2_QLIMIT_OFFSET,
        "aqlim": C.ACCESS_QUEUE_PKTS,
        "dur": repr(sc.duration_s),
        "seed": args.seed,
        "starts": ",".join(repr(t) for t in starts),
        "variant": "cubic" if sc.tcp == "cubic" else args.variant,
        "delackon": int(sc.delack),
        "loss": repr(sc.loss),
        "warmup": repr(sc.warmup_s),
        "mss": C.MSS_BYTES,
        "hdr": 40,
        "tsopt": C.TCP_IP_HDR_BYTES - 40,
        "ackhdr": C.ACK_IP_BYTES,
        "iw": C.INITIAL_CWND_SEGMENTS,
        "wnd": C.RECV_WINDOW_PKTS,
        "minrto": C.MIN_RTO_S,
        "tick": C.CLOCK_GRANULARITY_S,
        "delack": C.DELACK_TIMEOUT_S,
    }
    cmd = [ns_bin, str(TCL)] + [f"{k}={v}" for k, v in params.items()]
    run = C.run_child(cmd)
    if run.returncode != 0:
        C.die(f"ns exited with {run.returncode}\ncommand: {' '.join(cmd)}\n"
              f"stdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-2000:]}", 1)
    line = next((l for l in run.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        C.die(f"no RESULT line from ns\nstdout:\n{run.stdout[-2000:]}\n"
              f"stderr:\n{run.stderr[-2000:]}", 1)
    tok = line.split()[1:]
    r = dict(zip(tok[0::2], tok[1::2]))

    wall = run.wall_seconds
    delivered = int(r["delivered_data_pkts"])
    app_pkts = int(r["app_delivered_pkts"])
    arrivals = int(r["bottleneck_arrivals"])
    drops = int(r["bottleneck_drops"])
    goodput = app_pkts * C.MSS_BYTES * 8.0 / sc.duration_s
    flow_pkts = [int(x) for x in r["flow_app_pkts"].split(",")]
    if sc.tcp == "cubic":
        tcp = "Agent/TCP/Linux (tcp_cubic) + TCPSink/Sack1"
    else:
        tcp = "Agent/TCP/Sack1 + TCPSink/Sack1" if args.variant == "sack1" else "Agent/TCP/Newreno + TCPSink"
    if sc.delack:
        tcp += "/DelAck"
    after = None
    if "warm_arrivals" in r:
        span = sc.duration_s - sc.warmup_s
        arr, dr = int(r["warm_arrivals"]), int(r["warm_drops"])
        after = {"warmup_s": sc.warmup_s, "loss_ratio": round(dr / arr, 8) if arr else 0.0,
                 "mean_queue_pkts": round(float(r["warm_mean_queue"]), 4),
                 "goodput_bps": round(int(r["warm_app_pkts"]) * C.MSS_BYTES * 8.0 / span, 1),
                 "rexmit_pkts": int(r["warm_rexmit"])}
    result = C.Result(
        simulator="ns-2",
        simulator_version=f"{ns2_version(ns_bin)}, ns-version {r['version']}",
        scenario=sc.name,
        n_flows=sc.n_flows,
        sim_seconds=float(r["now"]),
        wall_seconds=round(wall, 6),
        wall_clock_scope="whole ns process (Tcl setup + run), perf_counter in the driver",
        delivered_data_pkts=delivered,
        delivered_pkts_per_wall_s=round(delivered / wall, 1) if wall > 0 else None,
        app_delivered_pkts=app_pkts,
        events=None,  # ns-2 exposes no scheduler event count to Tcl
        events_per_wall_s=None,
        peak_rss_mb=round(run.maxrss_kb / 1024.0, 1),
        goodput_bps=round(goodput, 1),
        goodput_utilization=round(goodput / sc.bottleneck_bps, 6),
        bottleneck_arrivals=arrivals,
        bottleneck_drops=drops,  # the ErrorModel's random drops included (the QueueMonitor sees them)
        loss_ratio=round(drops / arrivals, 8) if arrivals else 0.0,
        mean_queue_pkts=round(float(r["mean_queue_pkts"]), 4),
        seed=args.seed,
        stagger=args.stagger,
        after_warmup=after,
        extra={
            "tcp": tcp,
            "flow_goodput_bps": [round(p * C.MSS_BYTES * 8.0 / sc.duration_s, 1) for p in flow_pkts],
            "run_only_wall_s": float(r["run_wall_s"]),
            "sender_data_pkts": int(r["sender_data_pkts"]),
            "sender_rexmit_pkts": int(r["sender_rexmit_pkts"]),
            "sender_rtos": int(r["sender_rtos"]),
            "ns2_queue_limit": sc.queue_pkts + NS2_QLIMIT_OFFSET,
            "start_times_s": starts,
        },
    )
    C.emit(result, args.json)


if __name__ == "__main__":
    main()
