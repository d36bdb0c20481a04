#!/usr/bin/env python3
"""Prints the detector benchmarks (issue 20, "Detector cost") from criterion's estimates and the
memory figures of `detect_memory`: ns per observation of the false-sharing detector and of the naive
peer measured in the same run (correlations recomputed from the window on every sample), and their
ratio; SBD's ns per packet at 35 and 3,500 packets per T interval; one SBD grouping call for 2 to
1,000 flows with its growth against 2 flows; bytes live per flow pair (per flow for SBD) after 1e3,
1e5 and 1e7 observations.

    python3 bench/report_detect.py [--out bench/results/detect.json]

`--out` also writes every figure, the machine's CPU count (`nproc`) and the date as JSON.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
CRITERION = REPO / "target" / "criterion"
MEMORY = REPO / "target" / "detect_memory.json"
COMMAND = "nice make bench-detect"


def estimate(group: str, bench: str):
    """criterion's estimate for one benchmark, the one it prints as "time": the slope of total time
    against iterations over its linearly growing samples (the mean per iteration when sampled
    flat). (ns per iteration, lower, upper end of its 95 % interval)."""
    f = CRITERION / group / bench / "new" / "estimates.json"
    if not f.is_file():
        return None
    est = json.loads(f.read_text())
    e = est.get("slope") or est["mean"]
    ci = e["confidence_interval"]
    return e["point_estimate"], ci["lower_bound"], ci["upper_bound"]


def by_parameter(group: str):
    """Every parameter of a group measured with BenchmarkId::from_parameter, sorted."""
    rows = []
    for d in (CRITERION / group).glob("*/new/estimates.json"):
        name = d.parent.parent.name
        if name.isdigit():
            rows.append((int(name), estimate(group, name)))
    return sorted(rows)


def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def fmt(e) -> str:
    return f"{e[0]:10.1f} ns  [{e[1]:.1f}, {e[2]:.1f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, help="also write the figures here as JSON")
    args = ap.parse_args()
    if not CRITERION.is_dir():
        print(f"no criterion results under {CRITERION}; run `cargo bench -p macroflow-bench --bench detect` first",
              file=sys.stderr)
        return 1
    out = {"command": COMMAND, "nproc": nproc(), "cpu": cpu_model(),
           "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")}

    print("false-sharing detector, one observation (on_packet or on_loss), steady state [95 % CI]:")
    det = estimate("falseshare_on_packet", "detector")
    peer = estimate("falseshare_on_packet", "naive_peer")
    if det is None or peer is None:
        print("  (not measured)")
        return 1
    print(f"  {'detector (streaming sums)':34} {fmt(det)}")
    print(f"  {'naive peer (recomputed window)':34} {fmt(peer)}")
    ratio = peer[0] / det[0]
    print(f"  {'peer / detector':34} {ratio:10.1f}x")
    out["falseshare"] = {
        "detector_ns_per_obs": det[0], "detector_ci_ns": det[1:],
        "naive_peer_ns_per_obs": peer[0], "naive_peer_ci_ns": peer[1:],
        "peer_over_detector": ratio,
    }

    print("SBD per-flow statistics, one packet (on_packet or on_loss) [95 % CI]:")
    sbd = by_parameter("sbd_on_packet")
    out["sbd_on_packet"] = {}
    for ppi, e in sbd:
        print(f"  {ppi:>6} packets per T interval      {fmt(e)}")
        out["sbd_on_packet"][str(ppi)] = {"ns_per_pkt": e[0], "ci_ns": e[1:]}
    if len(sbd) >= 2:
        r = sbd[0][1][0] / sbd[-1][1][0]
        print(f"  {sbd[0][0]} vs {sbd[-1][0]} packets per interval: {r:.2f}x (the interval close, amortized)")
        out["sbd_on_packet"]["low_over_high_rate"] = r

    print("SBD grouping, one call [95 % CI]; growth against the smallest N:")
    grp = by_parameter("sbd_group")
    out["sbd_group"] = {}
    if grp:
        n0, e0 = grp[0]
        for n, e in grp:
            growth = e[0] / e0[0]
            print(f"  {n:>6} flows {fmt(e)}  {e[0] / n:8.1f} ns/flow  {growth:8.1f}x for {n / n0:.0f}x the flows")
            out["sbd_group"][str(n)] = {"ns_per_call": e[0], "ci_ns": e[1:], "ns_per_flow": e[0] / n,
                                        "growth_vs_smallest": growth}

    if MEMORY.is_file():
        mem = json.loads(MEMORY.read_text())
        out["memory"] = mem
        for key, label in (("detector", "false-sharing detector, per flow pair"), ("sbd_flow", "SBD statistics, per flow")):
            m = mem[key]
            print(f"{label}: {m['new_bytes']} heap bytes from new() + {m['inline_bytes']} inline")
            for r in m["rows"]:
                extra = f", memory() says {r['reported_heap_bytes']}" if r.get("reported_heap_bytes") is not None else ""
                print(f"  after {r['observations']:>10} observations: {r['live_bytes']:>7} bytes live, "
                      f"{r['allocations_since_new']} allocations since new(){extra}")
            rows = m["rows"]
            growth = rows[-1]["live_bytes"] - rows[-2]["live_bytes"]
            print(f"  growth from {rows[-2]['observations']} to {rows[-1]['observations']} observations: {growth} bytes")
    else:
        print(f"(no {MEMORY.name}: run `cargo run --release -p macroflow-bench --bin detect_memory`)")

    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
