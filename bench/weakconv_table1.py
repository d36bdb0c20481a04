"""Seed 001's Table 1 on this machine (issue 19): the eight simulated 12-hour rows from scratch
with 2 worker processes (the issue: under 30 minutes of wall time on 2 cores), each row's wall time
and peak memory, and the peers measured in the same run: the same rows at 1 hour (time should grow
12x with simulated time: the simulator's cost is per packet), and the 2-flow Reno row with its time
series off at 1 and 12 hours (the simulator's own memory must not grow with simulated time; with
the series on, a run also holds its per-second rows: 43,200 per flow, in Rust, Python and Arrow).

    .venv/bin/python bench/weakconv_table1.py [--workers 2] [--out bench/results/weakconv_table1.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time


def table1_runs(hours: float) -> list:
    from macroflow.weakconv import runs as R

    return [R.random_drop_run(cc, hours) for cc in R.CCS] + [R.sharing_run(cc, n, 0.1, "droptail", hours)
                                                           for cc in R.CCS for n in R.FLOW_COUNTS]


def measure(hours: float, workers: int, runs: list = None) -> dict:
    from macroflow.weakconv import runs as R

    runs = runs or table1_runs(hours)
    with tempfile.TemporaryDirectory(prefix="weakconv-bench-") as d:
        t0 = time.monotonic()
        got = R.run_all(runs, pathlib.Path(d), workers=workers)
        elapsed = time.monotonic() - t0
    rows = {r.name: {k: got[r.name]["cost"][k] for k in ("wall_s", "cpu_s", "max_rss_bytes", "samples_bytes", "events")} for r in runs}
    return {"hours": hours, "workers": workers, "elapsed_s": elapsed, "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results/weakconv_table1.json"))
    args = ap.parse_args()
    peer = measure(1.0, args.workers)
    full = measure(12.0, args.workers)
    print(f"Table 1, 8 simulated rows, {args.workers} workers on {os.cpu_count()} CPUs:")
    print(f"  12 h: {full['elapsed_s']:.0f} s wall ({full['elapsed_s'] / 60:.1f} min; the issue's limit 30 min)")
    print(f"   1 h: {peer['elapsed_s']:.0f} s wall (peer); ratio {full['elapsed_s'] / peer['elapsed_s']:.1f} for 12x the simulated time")
    print(f"  {'row':34} {'wall 12h':>9} {'wall 1h':>8} {'ratio':>6} {'RSS 12h':>8} {'RSS 1h':>7} {'series 12h':>10} {'RSS-series 12h vs 1h':>21}")
    worst = 0.0
    for name, r in full["rows"].items():
        p = peer["rows"][name]
        rest12 = (r["max_rss_bytes"] - r["samples_bytes"]) / 2**20
        rest1 = (p["max_rss_bytes"] - p["samples_bytes"]) / 2**20
        worst = max(worst, rest12 - rest1)
        print(f"  {name:34} {r['wall_s']:8.0f}s {p['wall_s']:7.1f}s {r['wall_s'] / p['wall_s']:6.1f} {r['max_rss_bytes'] / 2**20:7.0f}M "
              f"{p['max_rss_bytes'] / 2**20:6.0f}M {r['samples_bytes'] / 2**20:9.1f}M {rest12:9.0f}M vs {rest1:5.0f}M")
    print(f"  memory beyond the returned series' Arrow bytes grows by at most {worst:.0f} MB from 1 h to 12 h")
    from macroflow.weakconv import runs as R

    quiet = {}
    for h in (1.0, 12.0):
        r = R.sharing_run("newreno", 2, 0.1, "droptail", h)
        r.scenario["sample_interval_s"] = 0.0
        r = R.Run(r.name + "-nosamples", r.kind, r.params, r.scenario)
        quiet[h] = measure(h, 1, [r])["rows"][r.name]
    grow = quiet[12.0]["max_rss_bytes"] / quiet[1.0]["max_rss_bytes"]
    print(f"  2 flows, time series off: peak memory {quiet[1.0]['max_rss_bytes'] / 2**20:.1f} MB at 1 h, "
          f"{quiet[12.0]['max_rss_bytes'] / 2**20:.1f} MB at 12 h (ratio {grow:.3f}); wall {quiet[1.0]['wall_s']:.1f} s and "
          f"{quiet[12.0]['wall_s']:.1f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"full": full, "peer_1h": peer, "no_series": {str(k): v for k, v in quiet.items()},
                                    "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=1))
    print(f"  written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
