#!/usr/bin/env python3
"""Peak memory of the largest topologies (issue 13: the README states the largest that fits in
1 GB). Each size runs in its own process: build a dumbbell of N pairs or a parking lot of N hops,
add one bulk TCP flow end to end, run 5 s, take the results; print the process's peak resident
size (VmHWM) and wall time.

Usage: .venv/bin/python bench/topology_memory.py [--sizes 10000,100000,250000,262143]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = """
import sys, time
from macroflow._native import Simulation
kind, n = sys.argv[1], int(sys.argv[2])
t = time.time()
s = Simulation(seed=1)
if kind == "dumbbell":
    d = s.dumbbell(n)
    a, b = d["senders"][0], d["receivers"][0]
else:
    d = s.parking_lot(n)
    a, b = d["hosts"][0], d["hosts"][-1]
s.add_tcp_flow(a, b)
s.run(5)
links = len(s.results()["links"]["link"])
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) // 1024
print(f"{kind:>12} {n:>8,} {links:>10,} {peak:>8,} {time.time() - t:>7.1f}")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,250000,262143")
    args = ap.parse_args()
    print(f"{'topology':>12} {'size':>8} {'links':>10} {'peak MB':>8} {'wall s':>7}")
    for kind in ("dumbbell", "parking_lot"):
        for n in (int(x) for x in args.sizes.split(",")):
            p = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], capture_output=True, text=True)
            print(p.stdout.rstrip() if p.returncode == 0 else f"{kind:>12} {n:>8,}  failed: {p.stderr.strip()[-200:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
