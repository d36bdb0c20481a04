#!/usr/bin/env python3
"""Speed and fidelity of macroflow's simulator against ns-2 and ns-3, measured in one run.

For each scenario of issue 3 (A, B, C: see bench/src/bin/sim_scenarios.rs and bench/peers/),
runs macroflow, ns-2 and ns-3 with the same flow start times, prints each simulator's wall time,
delivered data packets per wall second, events per second, peak memory, goodput, loss ratio and
mean bottleneck queue, then macroflow's speed ratios and its goodput / loss / queue against ns-3,
with the issue's goals:
- scenario C: at least 2 million delivered data packets per wall second;
- A and B: goodput within 5 %, loss ratio and mean queue within 20 % of ns-3's.

Usage: python3 bench/sim_vs_peers.py [--scenarios A,B,C] [--peers ns2,ns3] [--duration-scale X]
Peers: `bash bench/peers/install.sh` installs them (ns-2 from Debian, ns-3 from PyPI).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "peers"))
import common  # noqa: E402  (the peers' scenario definitions and start times)

OURS = ROOT / "target" / "release" / "sim_scenarios"
VENV_PY = ROOT / ".venv" / "bin" / "python"


def run_json(cmd: list[str]) -> dict | None:
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        print(f"  ! {' '.join(cmd[:3])}... failed: {p.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def ours(scenario: str, duration: float, starts: list[float], seed: int) -> dict | None:
    r = run_json([str(OURS), "--scenario", scenario, "--duration", str(duration), "--seed", str(seed),
                  "--starts", ",".join(str(s) for s in starts)])
    if r is not None:
        r["peak_rss_mb"] = (r.pop("peak_memory_bytes") or 0) / 2**20
    return r


def peer(name: str, scenario: str, duration: float, seed: int) -> dict | None:
    if name == "ns2":
        if shutil.which("ns") is None:
            print("  ! ns-2 is not installed (bash bench/peers/install.sh)", file=sys.stderr)
            return None
        cmd = [sys.executable, "bench/peers/ns2_dumbbell.py"]
    else:
        py = str(VENV_PY) if VENV_PY.exists() else sys.executable
        cmd = [py, "bench/peers/ns3_dumbbell.py"]
    return run_json(cmd + ["--scenario", scenario, "--duration", str(duration), "--seed", str(seed), "--json"])


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="A,B,C")
    ap.add_argument("--peers", default="ns2,ns3")
    ap.add_argument("--duration-scale", type=float, default=1.0,
                    help="fraction of each scenario's simulated time (1 = the issue's durations)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "macroflow-bench", "--bin", "sim_scenarios"],
                   cwd=ROOT, check=True)
    peers = [p for p in args.peers.split(",") if p]
    ok = True
    for name in args.scenarios.split(","):
        sc = common.SCENARIOS[name]
        duration = sc.duration_s * args.duration_scale
        starts = common.start_times(sc, args.seed, True)
        rows = {"macroflow": ours(name, duration, starts, args.seed)}
        for p in peers:
            rows[p] = peer(p, name, duration, args.seed)
        print(f"\nScenario {name}: {sc.description or ''} ({duration:g} s simulated)")
        print(f"{'simulator':>10} {'wall s':>9} {'pkts/wall s':>12} {'events/s':>12} {'peak MB':>8} "
              f"{'goodput Mb/s':>13} {'loss %':>8} {'mean queue':>11}")
        for sim, r in rows.items():
            if r is None:
                print(f"{sim:>10}  (not run)")
                continue
            ev = r.get("events_per_wall_s")
            print(f"{sim:>10} {r['wall_seconds']:>9.3f} {r['delivered_pkts_per_wall_s']:>12,.0f} "
                  f"{(f'{ev:,.0f}' if ev else '-'):>12} {r['peak_rss_mb']:>8.1f} {r['goodput_bps'] / 1e6:>13.3f} "
                  f"{r['loss_ratio'] * 100:>8.4f} {r['mean_queue_pkts']:>11.2f}")
        m = rows["macroflow"]
        if m is None:
            ok = False
            continue
        for p in peers:
            if rows.get(p):
                print(f"  speed: macroflow / {p} = {m['delivered_pkts_per_wall_s'] / rows[p]['delivered_pkts_per_wall_s']:.1f}x")
        if name == "C":
            good = m["delivered_pkts_per_wall_s"] >= 2e6
            ok &= good
            print(f"  goal >= 2,000,000 delivered pkts per wall s: {m['delivered_pkts_per_wall_s']:,.0f} "
                  f"{'PASS' if good else 'FAIL'}")
        n3 = rows.get("ns3")
        if n3 and name in ("A", "B"):
            for key, tol, label in (("goodput_bps", 0.05, "goodput"), ("loss_ratio", 0.20, "loss ratio"),
                                    ("mean_queue_pkts", 0.20, "mean queue")):
                d = rel(m[key], n3[key])
                good = abs(d) <= tol
                ok &= good
                print(f"  {label} vs ns-3: {d * 100:+.1f}% (goal within {tol * 100:.0f}%) {'PASS' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
