#!/usr/bin/env python3
"""Prints the coupling benchmarks (criterion's estimates) as ns per call, with each size's ratio
against the smallest group measured in the same run: ~1 means the call does not grow with the
group, ~N/10 means it grows linearly."""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
GROUPS = [
    ("fse_passive_update", "passive FSE update (RFC 8699 App. C)"),
    ("fse_simple_passive_update", "simple passive FSE update (Alg. 3)"),
    ("tcp_ccc_update", "TCP-CCC update (Alg. 7)"),
    ("fse_active_update", "active FSE update (Alg. 1)"),
    ("fse_conservative_active_update", "conservative active FSE update (Alg. 2)"),
]


def main() -> int:
    if not ROOT.is_dir():
        print(f"no criterion results under {ROOT}; run `cargo bench -p macroflow-bench` first", file=sys.stderr)
        return 1
    print(f"{'call':44} {'flows':>7} {'ns/call':>10} {'vs smallest':>12}")
    for group, label in GROUPS:
        rows = []
        for d in (ROOT / group).glob("*/new/estimates.json"):
            n = int(d.parent.parent.name)
            est = json.loads(d.read_text())
            rows.append((n, est["mean"]["point_estimate"]))
        if not rows:
            print(f"{label:44} (not measured)")
            continue
        rows.sort()
        base = rows[0][1]
        for n, ns in rows:
            print(f"{label:44} {n:>7} {ns:>10.1f} {ns / base:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
