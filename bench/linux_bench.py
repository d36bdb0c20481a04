"""The Linux engine's costs (issue 15), each beside a peer measured in the same run:

1. set-up plus teardown of a 10-host scenario (a dumbbell of 5 pairs: 12 namespaces, 11 links, 5
   wires): the engine (iproute2 batches) against the same objects made one command each, the way
   shell scripts build testbeds; and the whole overhead of a 1-second run (agents, epoch, reports);
2. the delay line by link rate: one cubic flow through a 10 ms wire with a one-BDP queue;
   goodput, and how well the delay was held: the delay line's own lateness (each frame's send
   time minus its kernel arrival stamp plus the delay: the median and 99th percentile from its
   histogram, the maximum) and its drops; the peer is the same link and queue with no delay (no
   delay line in the path), so the ratio is what the delay line costs in throughput;
3. the 1 Gbit/s wire under constant-rate UDP loads (50, 70, 95 % of its rate): the delay held
   while the host has CPU to spare, and the load at which the whole host runs out;
4. CPU per Gbit/s carried: the delay line's CPU seconds (its direction threads', from its own
   report) over the bits it forwarded (both directions), and the whole host's CPU against the
   peer's.

Usage (root): .venv/bin/python bench/linux_bench.py [--rates 1e8,2e8,3e8,5e8,1e9] [--udp-loads 0.5,0.7,0.95] [--seconds 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

from macroflow import linux
from macroflow.scenario import parse


def _dumbbell(pairs: int, duration: float) -> str:
    flows = "".join(f'[[flows]]\ntype = "tcp"\npair = {i}\n' for i in range(pairs))
    return f'name = "bench"\nduration_s = {duration}\n[topology]\nkind = "dumbbell"\npairs = {pairs}\n{flows}'


def _naive_sh(real):
    """`_sh` that runs each line of an iproute2 batch as its own command (the peer)."""
    def sh(args, input=None, check=True, timeout=60):
        if "-batch" in args and input is not None:
            base = [a for a in args if a not in ("-batch", "-")]
            last = None
            for line in input.splitlines():
                if line.strip():
                    last = real(base + line.split(), None, check, timeout)
            return last
        return real(args, input, check, timeout)
    return sh


def setup_teardown(repeat: int) -> Dict[str, Any]:
    sc = parse(_dumbbell(5, 1.0))
    p = linux.check(sc)
    out: Dict[str, Any] = {"nodes": len(p.nodes), "links": len(p.pairs), "wires": sum(pr.wired for pr in p.pairs)}
    for name, sh in (("engine", linux._sh), ("one command each", _naive_sh(linux._sh))):
        setup, teardown = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as d:
                saved = linux._sh
                linux._sh = sh
                try:
                    tb = linux.Testbed(sc, p, pathlib.Path(d))
                    with tb:
                        t0 = time.monotonic()
                        tb.build()
                        setup.append(time.monotonic() - t0)
                        t1 = time.monotonic()
                finally:
                    linux._sh = saved
                teardown.append(time.monotonic() - t1)
        out[name] = {"setup_s": statistics.median(setup), "teardown_s": statistics.median(teardown)}
    walls = []
    for _ in range(repeat):
        t0 = time.monotonic()
        linux.run(sc)
        walls.append(time.monotonic() - t0)
    out["run_1s_wall_s"] = statistics.median(walls)
    out["run_overhead_s"] = statistics.median(walls) - 1.0
    return out


def _bdp_pkts(rate_bps: float) -> int:
    """One BDP at the delay-line RTT (20 ms) in 1500-byte packets, at least 20."""
    return max(20, int(rate_bps * 0.020 / 12000))


_CUBIC = '[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\ncc = "cubic"\n'


def _pair(rate_bps: float, delay_s: float, seconds: float, flows: str) -> str:
    return (f'name = "dlbench"\nduration_s = {seconds}\nsample_interval_s = 0.1\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n'
            f'links = [{{from = "a", to = "b", rate_bps = {rate_bps}, delay_s = {delay_s}, queue_pkts = {_bdp_pkts(rate_bps)}}}]\n'
            + flows)


def one_link(rate_bps: float, delay_s: float, seconds: float, flows: str = _CUBIC) -> Dict[str, Any]:
    """`flows` (a bulk cubic flow a -> b by default) and ping beside it, through the engine's own pieces."""
    sc = parse(_pair(rate_bps, delay_s, seconds, flows))
    p = linux.check(sc)
    with tempfile.TemporaryDirectory() as d, linux.Testbed(sc, p, pathlib.Path(d)) as tb:
        tb.build()
        epoch = time.monotonic_ns() + 2 * 10**9
        tb.start(epoch)
        tb.wait_ready(epoch - 10**8)
        time.sleep(max(0.0, (epoch - time.monotonic_ns()) / 1e9) + 1.0)  # past slow start
        b0 = linux._CpuMonitor._read()
        ping = subprocess.run(["ip", "netns", "exec", tb.ns[0], "ping", "-n", "-q", "-i", "0.01", "-w", str(max(1, int(seconds - 2))),
                               p.node_addr(1)], capture_output=True, text=True)
        b1 = linux._CpuMonitor._read()
        tb.wait_agents(epoch + int((seconds + 15) * 1e9))
        dl = tb.stop_delay_line()
        reps = [json.loads((pathlib.Path(d) / f"agent{n}.report.json").read_text()) for n in range(2)]
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", ping.stdout)
    loss = re.search(r"([\d.]+)% packet loss", ping.stdout)
    sink = [c for r in reps for c in r["sink_tcp"]]
    got = sum(c["bytes"] for c in sink)
    out: Dict[str, Any] = {
        "rate_bps": rate_bps, "delay_s": delay_s, "goodput_bps": got * 8 / seconds,
        "udp_bytes": sum(c["bytes"] for r in reps for c in r.get("sink_udp", [])),
        "ping_ms": {"min": float(m.group(1)), "avg": float(m.group(2)), "max": float(m.group(3))} if m else None,
        "ping_loss": float(loss.group(1)) / 100 if loss else None,
        "host_cpu_busy": 1 - (b1[1] - b0[1]) / max(1, b1[0] - b0[0]),
        # The tbf queue (one BDP) adds up to this much to a ping's RTT.
        "queue_bound_ms": _bdp_pkts(rate_bps) * 1500 * 8 / rate_bps * 1e3,
    }
    if dl:
        w = dl["wires"][0]
        bits = 8 * (w["ab"]["tx_bytes"] + w["ba"]["tx_bytes"])
        cpu_s = (w["ab"]["cpu_ns"] + w["ba"]["cpu_ns"]) / 1e9  # its direction threads' own CPU
        hist = [a + b for a, b in zip(w["ab"]["late_hist_log2_us"], w["ba"]["late_hist_log2_us"])]
        out["delay_line"] = {
            "late_p50_us": _quantile_us(hist, 0.5), "late_p99_us": _quantile_us(hist, 0.99),
            "cpu_s": cpu_s, "gbit": bits / 1e9, "cpu_s_per_gbit": cpu_s / (bits / 1e9) if bits else None,
            **{f"{d}_{k}": w[d][k] for d in ("ab", "ba") for k in ("tx_pkts", "own_drops_pkts", "reordered_pkts", "late_pkts", "max_late_ns", "mean_late_ns")},
        }
    return out


def _quantile_us(hist: List[int], q: float) -> float:
    """The upper edge (us) of the histogram bucket holding quantile q (bucket 0: under 1 us,
    bucket k: [2^(k-1), 2^k) us): an upper bound of the quantile."""
    total, seen = sum(hist), 0
    for k, n in enumerate(hist):
        seen += n
        if total and seen >= q * total:
            return float(2 ** k)
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1e8,2e8,3e8,5e8,1e9")
    ap.add_argument("--udp-loads", default="0.5,0.7,0.95", help="UDP loads on the 1 Gbit/s wire, as fractions of its rate")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=pathlib.Path, default=None, help="also write the figures here")
    a = ap.parse_args()
    os.environ[linux.DELAY_ENV] = "delayline"  # this bench measures the delay line, even where netem exists
    caps = linux.capabilities()
    if caps.missing:
        sys.exit("the linux engine cannot run here: " + "; ".join(caps.missing))
    res: Dict[str, Any] = {"kernel": caps.kernel, "cpus": len(os.sched_getaffinity(0))}
    st = setup_teardown(a.repeat)
    res["setup_teardown"] = st
    e, n = st["engine"], st["one command each"]
    print(f"Set-up + teardown of a 10-host dumbbell ({st['nodes']} namespaces, {st['links']} links, {st['wires']} wires), median of {a.repeat}:")
    print(f"  engine (batched):  set-up {e['setup_s']:.2f} s, teardown {e['teardown_s']:.2f} s")
    print(f"  one command each:  set-up {n['setup_s']:.2f} s, teardown {n['teardown_s']:.2f} s  "
          f"(engine / peer = {(e['setup_s'] + e['teardown_s']) / (n['setup_s'] + n['teardown_s']):.2f})")
    print(f"  a whole 1-s run: {st['run_1s_wall_s']:.2f} s wall (overhead {st['run_overhead_s']:.2f} s: set-up, agents, epoch, reports, teardown)")
    res["links"] = []
    print(f"\nOne cubic flow through a link, {a.seconds:g} s, one-BDP queue; delay line (10 ms each way) against the same link "
          f"with no delay.\nLateness: each frame's departure after its due time (arrival stamp + 10 ms), upper bounds of the "
          f"median and 99th percentile from the delay line's histogram:")
    print(f"  {'rate':>9} {'goodput':>10} {'peer':>10} {'ratio':>6} {'late p50':>9} {'p99':>7} {'max':>8} "
          f"{'>0.5ms':>7} {'own drops':>9} {'reord':>5} {'dl cpu s/Gbit':>13} {'host cpu':>8} {'peer cpu':>8}")
    for r in [float(x) for x in a.rates.split(",")]:
        dlr = one_link(r, 0.010, a.seconds)
        peer = one_link(r, 0.0, a.seconds)
        res["links"].append({"delay_line": dlr, "peer_no_delay": peer})
        d = dlr.get("delay_line", {})
        print(f"  {r / 1e6:7.0f}M {dlr['goodput_bps'] / 1e6:8.1f}M {peer['goodput_bps'] / 1e6:8.1f}M "
              f"{dlr['goodput_bps'] / peer['goodput_bps'] if peer['goodput_bps'] else float('nan'):6.2f} "
              f"{d.get('late_p50_us', float('nan')) / 1e3:7.3f}ms {d.get('late_p99_us', float('nan')) / 1e3:5.2f}ms "
              f"{max(d.get('ab_max_late_ns', 0), d.get('ba_max_late_ns', 0)) / 1e6:6.2f}ms "
              f"{d.get('ab_late_pkts', 0) + d.get('ba_late_pkts', 0):7d} "
              f"{d.get('ab_own_drops_pkts', 0) + d.get('ba_own_drops_pkts', 0):9d} {d.get('ab_reordered_pkts', 0) + d.get('ba_reordered_pkts', 0):5d} "
              f"{d.get('cpu_s_per_gbit') or float('nan'):13.3f} {dlr['host_cpu_busy']:8.0%} {peer['host_cpu_busy']:8.0%}")
    # The bounds on the one-way delay: 0.5 ms up to 100 Mbit/s, 1 ms at 1 Gbit/s (linear
    # in between is ours): the largest rate whose 99th percentile of lateness stays within.
    held = [x["delay_line"]["rate_bps"] for x in res["links"]
            if x["delay_line"].get("delay_line", {}).get("late_p99_us", float("inf")) <= 1e3 * _bound_ms(x["delay_line"]["rate_bps"])]
    print(f"\nLargest rate holding the delay (99th percentile of lateness within the bound) under a bulk TCP flow: "
          f"{max(held) / 1e6:.0f} Mbit/s" if held else "\nNo rate held the delay within the bound.")
    # The same 1 Gbit/s wire under UDP loads below and at its rate: what the delay line holds while
    # the machine has CPU to spare, and where the whole host (sender, receiver, delay line) runs out.
    res["udp_load_1g"] = []
    print(f"\nThe 1 Gbit/s wire (10 ms each way) under a constant-rate UDP flow, {a.seconds:g} s:")
    print(f"  {'load':>6} {'received':>9} {'late p50':>9} {'p99':>7} {'max':>8} {'>0.5ms':>7} {'own drops':>9} {'host cpu':>8}")
    for load in [float(x) for x in a.udp_loads.split(",")]:
        u = one_link(1e9, 0.010, a.seconds, f'[[flows]]\ntype = "udp"\nsrc = "a"\ndst = "b"\nrate_bps = {load * 1e9}\n')
        res["udp_load_1g"].append({"load": load, **u})
        d = u.get("delay_line", {})
        print(f"  {load:6.0%} {u['udp_bytes'] * 8 / a.seconds / 1e6:7.0f}M {d.get('late_p50_us', float('nan')) / 1e3:7.3f}ms "
              f"{d.get('late_p99_us', float('nan')) / 1e3:5.2f}ms {max(d.get('ab_max_late_ns', 0), d.get('ba_max_late_ns', 0)) / 1e6:6.2f}ms "
              f"{d.get('ab_late_pkts', 0) + d.get('ba_late_pkts', 0):7d} {d.get('ab_own_drops_pkts', 0) + d.get('ba_own_drops_pkts', 0):9d} "
              f"{u['host_cpu_busy']:8.0%}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2))


def _bound_ms(rate_bps: float) -> float:
    """0.5 ms up to 100 Mbit/s, 1 ms from 1 Gbit/s, linear in between (issue 15's two points)."""
    return 0.5 if rate_bps <= 1e8 else 1.0 if rate_bps >= 1e9 else 0.5 + 0.5 * (rate_bps - 1e8) / 9e8


if __name__ == "__main__":
    main()
