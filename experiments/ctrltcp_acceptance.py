"""Issue 11's acceptance runs for ctrlTCP on the dissertation's dumbbell (seed 003 sec. 9.3).

    python experiments/ctrltcp_acceptance.py storm --seeds 10 --flows 2-10
    python experiments/ctrltcp_acceptance.py storm --seeds 30 --flows 3-9 --queues 42,166
    python experiments/ctrltcp_acceptance.py priorities --seeds 10 --ratios 1,10,100,1000,1e6

`storm` runs every (flows, seed, queue) uncoupled, with `ccc` and with `ccc_handover`, and reports
each coupled run whose loss ratio exceeds the uncoupled run of the same seed by more than 1
percentage point (a violation), the largest burst (packets one TCP flow sent at one instant)
against the initial window and the uncoupled run of the same seed, and the timeouts of every run.
`priorities` runs two coupled flows with priorities 1:r and compares loss and goodput with the
uncoupled pair of the same seed. Runs are independent and use all cores.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor
from typing import List, Optional, Tuple

import typer

from macroflow.metrics import summarize
from macroflow.reproductions import _dumbbell_scenario
from macroflow.scenario import run, validate

KINDS = ("none", "ccc", "ccc_handover")
INITIAL_WINDOW_PKTS = 10
app = typer.Typer(add_completion=False)


def _one(job: Tuple[int, str, Tuple[float, ...], int, Optional[int], float]) -> dict:
    n, kind, priorities, seed, queue, duration = job
    sc = _dumbbell_scenario(n, kind, list(priorities), seed, duration)
    if queue is not None:
        sc["topology"]["queue_pkts"] = queue
    tables = run(validate(sc))
    s = summarize(tables)
    bursts = [f["max_burst_pkts"] for f in tables["flows"].to_pylist()]
    return {"n": n, "kind": kind, "ratio": priorities[-1] / priorities[0], "seed": seed, "queue": queue,
            "loss": s["loss_ratio"], "timeouts": int(s["timeouts"]), "goodput_bps": s["tcp_goodput_bps"],
            "burst": max(bursts, default=0)}


def _run_all(jobs: List[tuple]) -> List[dict]:
    with ProcessPoolExecutor(os.cpu_count() or 1) as ex:
        return list(ex.map(_one, jobs, chunksize=4))


def _range(text: str) -> List[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


@app.command()
def storm(seeds: int = 10, flows: str = "2-10", queues: str = "default", duration_s: float = 100.0) -> None:
    """Loss, bursts and timeouts of coupled runs against the uncoupled run of the same seed."""
    ns = _range(flows)
    qs = [None if q == "default" else int(q) for q in queues.split(",")]
    jobs = [(n, k, (1.0,) * n, s, q, duration_s) for n, k, s, q in itertools.product(ns, KINDS, range(1, seeds + 1), qs)]
    res = _run_all(jobs)
    base = {(r["n"], r["seed"], r["queue"]): r for r in res if r["kind"] == "none"}
    violations, over_iw = 0, 0
    for r in res:
        if r["kind"] == "none":
            continue
        b = base[(r["n"], r["seed"], r["queue"])]
        if r["loss"] > b["loss"] + 0.01:
            violations += 1
            print(f"VIOLATION {r}: uncoupled loss {b['loss']:.2%}")
        if r["burst"] > max(INITIAL_WINDOW_PKTS, b["burst"]):
            over_iw += 1
            print(f"burst {r['burst']} > max(IW {INITIAL_WINDOW_PKTS}, uncoupled {b['burst']}): {r['kind']} "
                  f"n={r['n']} seed={r['seed']} queue={r['queue']}")
    for q in qs:
        for k in KINDS:
            rs = [r for r in res if r["kind"] == k and r["queue"] == q]
            worst = max((r["loss"] - base[(r["n"], r["seed"], q)]["loss"] for r in rs), default=0.0)
            print(f"queue {q or 'default'} {k:13s} runs {len(rs)} loss mean {sum(r['loss'] for r in rs) / len(rs):.2%} "
                  f"max {max(r['loss'] for r in rs):.2%} worst excess over uncoupled {worst:+.2%} "
                  f"timeouts/run mean {sum(r['timeouts'] for r in rs) / len(rs):.1f} max {max(r['timeouts'] for r in rs)} "
                  f"goodput {sum(r['goodput_bps'] for r in rs) / len(rs) / 1e6:.2f} Mbit/s max burst {max(r['burst'] for r in rs)}")
    print("timeouts per run (columns: seeds 1..)")
    for q, k, n in itertools.product(qs, KINDS, ns):
        rs = sorted((r for r in res if (r["queue"], r["kind"], r["n"]) == (q, k, n)), key=lambda r: r["seed"])
        print(f"  queue {q or 'default'} {k:13s} N={n:2d}: " + " ".join(f"{r['timeouts']:3d}" for r in rs))
    print(f"violations: {violations} of {len(res) - len(base)} coupled runs; bursts above max(IW, uncoupled): {over_iw}")


@app.command()
def priorities(seeds: int = 10, ratios: str = "1,10,100,1000,1e6", duration_s: float = 100.0) -> None:
    """Two coupled flows with priorities 1:r against the uncoupled pair of the same seed."""
    rs_ = [float(x) for x in ratios.split(",")]
    jobs = [(2, "none", (1.0, 1.0), s, None, duration_s) for s in range(1, seeds + 1)]
    jobs += [(2, k, (1.0, r), s, None, duration_s) for k in KINDS[1:] for r in rs_ for s in range(1, seeds + 1)]
    res = _run_all(jobs)
    base = {r["seed"]: r for r in res if r["kind"] == "none"}
    print(f"uncoupled: loss {sum(b['loss'] for b in base.values()) / len(base):.2%} "
          f"goodput {sum(b['goodput_bps'] for b in base.values()) / len(base) / 1e6:.2f} Mbit/s")
    for k in KINDS[1:]:
        for r in rs_:
            rows = [x for x in res if x["kind"] == k and x["ratio"] == r]
            worst = max(x["loss"] - base[x["seed"]]["loss"] for x in rows)
            print(f"{k:13s} 1:{r:<9g} loss {sum(x['loss'] for x in rows) / len(rows):.2%} worst excess {worst:+.2%} "
                  f"timeouts/run max {max(x['timeouts'] for x in rows)} "
                  f"goodput {sum(x['goodput_bps'] for x in rows) / len(rows) / 1e6:.2f} Mbit/s max burst {max(x['burst'] for x in rows)}")


if __name__ == "__main__":
    app()
