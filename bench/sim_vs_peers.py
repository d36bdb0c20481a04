#!/usr/bin/env python3
"""Speed and fidelity of macroflow's simulator against ns-2 and ns-3, measured in one run.

Every scenario is defined once, in bench/peers/common.py, and run in macroflow
(bench/src/bin/sim_scenarios.rs), ns-2 and ns-3 with the same flow start times. For each one this
prints each simulator's wall time, delivered data packets per wall second, events per second, peak
memory, goodput, per-flow goodput, loss ratio and mean bottleneck queue, then macroflow's speed
ratios and its figures against each peer.

Two suites:
- speed (issue 3): A, B, C. Goals: C at least 2 million delivered data packets per wall second;
  A and B goodput within 5 %, loss ratio and mean queue within 20 % of ns-3's.
- fidelity (issue 12): D short RTT and small buffer, E RTT unfairness (5 RTTs), F single-flow
  sawtooth, G CUBIC, M and N Mathis' law under 1 % random loss with and without delayed ACKs.
  Goals: G loss ratio and mean queue after the warm-up within 20 % of both peers; M at least as
  many delivered packets per wall second as ns-2. The other figures are shown, with the reasons the peers differ
  in bench/peers/README.md ("Fidelity suite").

Usage: python3 bench/sim_vs_peers.py [--suite speed|fidelity|all] [--scenarios A,G,...]
                                     [--peers ns2,ns3] [--duration-scale X] [--seed N]
Peers: `bash bench/peers/install.sh` installs them (ns-2 from Debian, ns-3 from PyPI).
"""

from __future__ import annotations

import argparse
import json
import os
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


def build_baseline(rev: str) -> pathlib.Path:
    """`sim_scenarios` built from git revision `rev` (a detached worktree and target directory
    under target/baseline/), to compare speed before and after a change in one run."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    base = ROOT / "target" / "baseline" / sha[:12]
    src = base / "src"
    if not src.exists():
        subprocess.run(["git", "worktree", "add", "--detach", "-f", str(src), sha], cwd=ROOT, check=True,
                       capture_output=True)
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "macroflow-bench", "--bin", "sim_scenarios"],
                   cwd=src, check=True, env={**os.environ, "CARGO_TARGET_DIR": str(base / "target")})
    return base / "target" / "release" / "sim_scenarios"


def ours(sc: common.Scenario, starts: list[float], seed: int, binary: pathlib.Path = OURS) -> dict | None:
    r = run_json([str(binary), "--scenario", sc.name, "--flows", str(sc.n_flows),
                  "--bottleneck-bps", f"{sc.bottleneck_bps:.0f}", "--bottleneck-delay-s", repr(sc.bottleneck_delay_s),
                  "--access-bps", f"{sc.access_bps:.0f}", "--access-delays-s", ",".join(repr(d) for d in sc.delays()),
                  "--queue-pkts", str(sc.queue_pkts), "--duration", repr(sc.duration_s), "--cc", sc.tcp,
                  "--delack", "1" if sc.delack else "0", "--loss", repr(sc.loss),
                  "--rwnd-pkts", str(common.RECV_WINDOW_PKTS), "--seed", str(seed),
                  "--warmup-s", repr(sc.warmup_s), "--starts", ",".join(repr(s) for s in starts)])
    if r is not None:
        r["peak_rss_mb"] = (r.pop("peak_memory_bytes") or 0) / 2**20
        r["extra"] = {"flow_goodput_bps": r.pop("flow_goodput_bps"), "sender_rexmit_pkts": r.pop("sender_rexmit_pkts"),
                      "sender_rtos": r.pop("sender_rtos"), "sender_data_pkts": r.pop("sender_data_pkts")}
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
    return run_json(cmd + ["--scenario", scenario, "--duration", repr(duration), "--seed", str(seed), "--json"])


def rel(a: float, b: float) -> float:
    return (a - b) / b if b else float("nan")


def check(label: str, good: bool, detail: str) -> bool:
    print(f"  {label}: {detail} {'PASS' if good else 'FAIL'}")
    return good


def ns2_run_rate(r: dict) -> float | None:
    """ns-2's delivered packets per second of its run alone (`extra.run_only_wall_s`, Tcl set-up
    excluded): the scope of macroflow's and ns-3's wall times."""
    t = r.get("extra", {}).get("run_only_wall_s")
    return r["delivered_data_pkts"] / t if t else None


def jain(x: list[float]) -> float:
    s = sum(x)
    q = sum(v * v for v in x)
    return s * s / (len(x) * q) if q else 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=("speed", "fidelity", "all"), default="all")
    ap.add_argument("--scenarios", default=None, help="comma-separated names (overrides --suite)")
    ap.add_argument("--peers", default="ns2,ns3")
    ap.add_argument("--duration-scale", type=float, default=1.0,
                    help="fraction of each scenario's simulated time (1 = the issues' durations)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="FILE", help="also write every record to FILE (one JSON object)")
    ap.add_argument("--baseline", metavar="REV", help="also run macroflow as built at git revision REV and "
                    "compare speed (issue 14: a change must leave no scenario slower)")
    args = ap.parse_args()
    if args.scenarios:
        names = [n for n in args.scenarios.split(",") if n]
        unknown = [n for n in names if n not in common.SCENARIOS]
        if unknown:
            ap.error(f"unknown scenario(s) {unknown}; known: {sorted(common.SCENARIOS)}")
    else:
        names = [n for n, s in common.SCENARIOS.items() if args.suite in ("all", s.suite)]
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "macroflow-bench", "--bin", "sim_scenarios"],
                   cwd=ROOT, check=True)
    peers = [p for p in args.peers.split(",") if p]
    baseline = build_baseline(args.baseline) if args.baseline else None
    ok = True
    everything: dict[str, dict] = {}
    for name in names:
        sc = common.SCENARIOS[name]
        duration = sc.duration_s * args.duration_scale
        sc = common.with_duration(sc, duration)
        starts = common.start_times(sc, args.seed, True)
        if baseline:
            # Alternately, best of three each: a run of a tenth of a second varies by tens of per
            # cent on a shared machine, and the fastest run is the one least disturbed.
            tries: dict[str, list] = {"macroflow": [], f"@{args.baseline}": []}
            for _ in range(3):
                tries["macroflow"].append(ours(sc, starts, args.seed))
                tries[f"@{args.baseline}"].append(ours(sc, starts, args.seed, baseline))
            rows = {k: max((r for r in v if r), key=lambda r: r["delivered_pkts_per_wall_s"], default=None)
                    for k, v in tries.items()}
        else:
            rows = {"macroflow": ours(sc, starts, args.seed)}
        for p in peers:
            rows[p] = peer(p, name, duration, args.seed)
        everything[name] = rows
        print(f"\nScenario {name} ({sc.suite}): {sc.description or ''} ({duration:g} s simulated)")
        print(f"{'simulator':>10} {'wall s':>9} {'pkts/wall s':>12} {'events/s':>12} {'peak MB':>8} "
              f"{'goodput Mb/s':>13} {'loss %':>8} {'mean queue':>11} {'retx':>7} {'RTOs':>6}  per-flow goodput Mb/s")
        for sim, r in rows.items():
            if r is None:
                print(f"{sim:>10}  (not run)")
                continue
            ev = r.get("events_per_wall_s")
            x = r.get("extra", {})
            flows = " ".join(f"{g / 1e6:.2f}" for g in x.get("flow_goodput_bps", []))
            print(f"{sim:>10} {r['wall_seconds']:>9.3f} {r['delivered_pkts_per_wall_s']:>12,.0f} "
                  f"{(f'{ev:,.0f}' if ev else '-'):>12} {r['peak_rss_mb']:>8.1f} {r['goodput_bps'] / 1e6:>13.3f} "
                  f"{r['loss_ratio'] * 100:>8.4f} {r['mean_queue_pkts']:>11.2f} {x.get('sender_rexmit_pkts', '-'):>7} "
                  f"{x.get('sender_rtos', '-'):>6}  {flows}")
        m = rows["macroflow"]
        if m is None:
            ok = False
            continue
        b = rows.get(f"@{args.baseline}") if baseline else None
        if b:
            ratio = m["delivered_pkts_per_wall_s"] / b["delivered_pkts_per_wall_s"]
            same = all(m[k] == b[k] for k in ("goodput_bps", "loss_ratio", "mean_queue_pkts"))
            # Wall times of runs under a second vary by a few per cent: 5 % is the noise allowance.
            ok &= check(f"speed vs {args.baseline}", ratio >= 0.95,
                        f"{ratio:.3f}x ({m['delivered_pkts_per_wall_s']:,.0f} vs {b['delivered_pkts_per_wall_s']:,.0f} "
                        f"pkts per wall s; outputs {'identical' if same else 'DIFFER'})")
        for p in peers:
            if rows.get(p):
                line = f"  speed: macroflow / {p} = {m['delivered_pkts_per_wall_s'] / rows[p]['delivered_pkts_per_wall_s']:.1f}x"
                if ns2_run_rate(rows[p]):
                    line += f" ({m['delivered_pkts_per_wall_s'] / ns2_run_rate(rows[p]):.1f}x against ns-2's run alone, Tcl set-up excluded)"
                print(line)
        if sc.warmup_s > 0:
            print(f"  after the first {sc.warmup_s:g} s: " + "; ".join(
                f"{s} loss {r['after_warmup']['loss_ratio'] * 100:.4f}% queue {r['after_warmup']['mean_queue_pkts']:.2f} "
                f"goodput {r['after_warmup']['goodput_bps'] / 1e6:.3f} retx {r['after_warmup']['rexmit_pkts']}"
                for s, r in rows.items() if r and r.get("after_warmup")))
        model = common.mathis_bps(sc)
        if model:
            print("  Mathis (Eq. 5, b = %d): %.3f Mb/s; goodput / Mathis: %s" % (
                common.DELACK_COUNT if sc.delack else 1, model / 1e6,
                ", ".join(f"{s} {r['goodput_bps'] / model:.3f}" for s, r in rows.items() if r)))
        if sc.n_flows > 1:
            print("  Jain's index of per-flow goodput: " + ", ".join(
                f"{s} {jain(r['extra']['flow_goodput_bps']):.3f}" for s, r in rows.items() if r))
        for p in peers:
            r = rows.get(p)
            if r:
                print(f"  vs {p}: goodput {rel(m['goodput_bps'], r['goodput_bps']) * 100:+.1f}%, "
                      f"loss {rel(m['loss_ratio'], r['loss_ratio']) * 100:+.1f}%, "
                      f"mean queue {rel(m['mean_queue_pkts'], r['mean_queue_pkts']) * 100:+.1f}%"
                      + ("" if not (m.get("after_warmup") and r.get("after_warmup")) else
                         f"; after the warm-up: goodput {rel(m['after_warmup']['goodput_bps'], r['after_warmup']['goodput_bps']) * 100:+.1f}%, "
                         f"loss {rel(m['after_warmup']['loss_ratio'], r['after_warmup']['loss_ratio']) * 100:+.1f}%, "
                         f"mean queue {rel(m['after_warmup']['mean_queue_pkts'], r['after_warmup']['mean_queue_pkts']) * 100:+.1f}%"))
        if name == "C":
            ok &= check("goal >= 2,000,000 delivered pkts per wall s", m["delivered_pkts_per_wall_s"] >= 2e6,
                        f"{m['delivered_pkts_per_wall_s']:,.0f}")
        n3 = rows.get("ns3")
        if n3 and name in ("A", "B"):
            for key, tol, label in (("goodput_bps", 0.05, "goodput"), ("loss_ratio", 0.20, "loss ratio"),
                                    ("mean_queue_pkts", 0.20, "mean queue")):
                d = rel(m[key], n3[key])
                ok &= check(f"{label} vs ns-3", abs(d) <= tol, f"{d * 100:+.1f}% (goal within {tol * 100:.0f}%)")
        if name == "G":
            for p in peers:
                r = rows.get(p)
                if r is None:
                    ok = False
                    continue
                if not (m.get("after_warmup") and r.get("after_warmup")):
                    ok &= check(f"CUBIC vs {p}", False, f"no figures after a warm-up: a {duration:g} s run is not "
                                f"longer than the {common.SCENARIOS[name].warmup_s:g} s warm-up")
                    continue
                # The steady state, after the warm-up: the start-up overshoot is a transient whose size
                # differs between the peers themselves (README, "Fidelity suite").
                for key, label in (("loss_ratio", "loss ratio"), ("mean_queue_pkts", "mean queue")):
                    d = rel(m["after_warmup"][key], r["after_warmup"][key])
                    ok &= check(f"CUBIC {label} after {sc.warmup_s:g} s vs {p}", abs(d) <= 0.20,
                                f"{d * 100:+.1f}% (goal within 20%)")
        if name == "M" and rows.get("ns2"):
            # Against ns-2's run alone (its Tcl set-up is a large share of so short a run).
            a, b = m["delivered_pkts_per_wall_s"], ns2_run_rate(rows["ns2"]) or rows["ns2"]["delivered_pkts_per_wall_s"]
            ok &= check("lossy Mathis speed >= ns-2 (run alone)", a >= b, f"{a:,.0f} vs {b:,.0f} delivered pkts per wall s")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(everything, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
