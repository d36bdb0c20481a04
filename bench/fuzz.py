#!/usr/bin/env python3
"""The issue-13 fuzzers (tests/fuzzing.py) for a fixed time: scenario files and the API, each in
its own child process, in rounds of 200 hypothesis examples with a new seed per round, until the
time is up. Prints the examples run and exits non-zero with the child's report (the shrunk
failing example) on the first failure.

Usage: python3 bench/fuzz.py [--minutes 10] [--kinds scenarios,api]   (make bench-fuzz)
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import fuzzing  # noqa: E402  (the fuzzers themselves, shared with tests/test_fuzz.py)

ROUND = 200


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="wall time per kind")
    ap.add_argument("--kinds", default="scenarios,api")
    args = ap.parse_args()
    for kind in args.kinds.split(","):
        start, seed, examples = time.monotonic(), 0, 0
        while time.monotonic() - start < args.minutes * 60:
            seed += 1
            p = fuzzing.run_in_child(kind, ROUND, seed)
            if p.returncode != 0:
                print(f"{kind}: FAILED in round {seed} (rc {p.returncode}) after {examples} examples\n"
                      f"{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
                return 1
            examples += ROUND
        print(f"{kind}: {examples} examples in {time.monotonic() - start:.0f} s, no crash, no foreign exception, "
              f"no example over the time bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
