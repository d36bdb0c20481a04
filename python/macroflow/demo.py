"""The main job (``make run``, ``macroflow`` without arguments).

1. RFC 8699 (draft) Appendix C.1, the passive FSE's example operation, as the draft's tables.
2. One loss on one of two TCP connections in congestion avoidance (seed 003 Fig. 9.2): how much
   of the aggregate window each coupler keeps.
3. The headline reproduction, coupled versus uncoupled TCP on the dissertation's dumbbell
   (:mod:`macroflow.reproductions`), on the simulator and a local process pool, leaving
   ``out/report.html`` (its runs are stored under ``out/reproductions/``).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import List, Optional, Tuple

from macroflow._native import FseGroup, TcpCoupler

MBPS = 1e6


@dataclass(frozen=True)
class Row:
    flow: int
    priority: float
    fse_rate_mbps: float
    desired_rate_mbps: float
    rate_mbps: float


@dataclass(frozen=True)
class Step:
    """The FSE after one step of the walk-through."""

    title: str
    rows: Tuple[Row, ...]
    s_cr_mbps: float
    tlo_mbps: float


def _snapshot(g: FseGroup, title: str) -> Step:
    rows = tuple(
        Row(v.flow, v.priority, v.fse_rate_bps / MBPS, v.desired_rate_bps / MBPS, v.fse_rate_bps / MBPS)
        for v in sorted(g.flows(), key=lambda v: v.flow)
    )
    return Step(title, rows, g.sum_calculated_rate / MBPS, g.leftover / MBPS)


def appendix_c_walkthrough() -> List[Step]:
    """Runs the draft's example: two flows on a 10 Mbit/s bottleneck, a toy controller that adds
    1 Mbit/s without congestion and takes 2 away with it, flows updating in turn."""
    g = FseGroup("passive")
    t = 0

    def now() -> int:
        nonlocal t
        t += 100_000_000  # 100 ms between updates
        return t

    def fse_r(flow: int) -> float:
        return g.flow(flow).fse_rate_bps

    steps = []
    g.register(1, 1.0, 1 * MBPS, now())
    steps.append(_snapshot(g, "Flow #1 begins (bulk, priority 1)"))
    for cc in range(2, 11):
        g.update(1, cc * MBPS, now())
    steps.append(_snapshot(g, "Flow #1's controller has increased its rate to 10"))
    g.register(2, 0.5, 1 * MBPS, now())
    steps.append(_snapshot(g, "Flow #2 joins (bulk, priority 0.5)"))
    g.update(1, fse_r(1) - 2 * MBPS, now())
    steps.append(_snapshot(g, "Flow #1 updates: CC_R = 8 (congestion)"))
    g.update(2, fse_r(2) + 1 * MBPS, now())
    steps.append(_snapshot(g, "Flow #2 updates: CC_R = 2"))
    g.update(1, fse_r(1) + 1 * MBPS, now(), desired_rate_bps=2 * MBPS)
    steps.append(_snapshot(g, "Flow #1 updates: CC_R = 7, application-limited to 2"))
    g.update(2, fse_r(2) + 1 * MBPS, now())
    steps.append(_snapshot(g, "Flow #2 updates: CC_R = 4.33, takes the leftover rate"))
    g.leave(1)
    g.update(2, fse_r(2) - 2 * MBPS, now())
    steps.append(_snapshot(g, "Flow #1 terminates; flow #2 updates: CC_R = 7.33"))
    return steps


def _num(x: float) -> str:
    """Two decimals at most, as the draft prints them: 1, 0.5, 3.33."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def format_step(step: Step) -> str:
    lines = [step.title + ":", "-" * 43, "| # | FGI |   P   |  FSE_R  |  DR  | Rate |"]
    for r in step.rows:
        lines.append(
            f"| {r.flow} |  1  | {_num(r.priority):^5} | {_num(r.fse_rate_mbps):^7} "
            f"| {_num(r.desired_rate_mbps):^4} | {_num(r.rate_mbps):^4} |"
        )
    lines.append("-" * 43)
    lines.append(f"S_CR = {_num(step.s_cr_mbps)}, TLO = {_num(step.tlo_mbps)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class LossResult:
    coupler: str
    before_pkts: float
    after_pkts: float

    @property
    def kept(self) -> float:
        return self.after_pkts / self.before_pkts


def one_loss(kind: Optional[str]) -> LossResult:
    """Two connections at 50 packets each; connection 1 sees one loss, enters Fast Recovery and
    leaves it with half its window. Returns the aggregate window before and after: the group's
    (``sum_cwnd``) for a coupler, whose connections grow back to their shares on their own ACKs
    rather than in a burst; the two windows' sum uncoupled (kind None)."""
    windows = {1: 50.0, 2: 50.0}
    coupler = TcpCoupler(kind) if kind else None
    if coupler is not None:
        for conn in windows:
            windows[conn] = coupler.register(conn, 1.0, windows[conn], 1e9).cwnd_pkts
        for conn in windows:  # both settle in congestion avoidance with their share
            r = coupler.update(conn, windows[conn], windows[conn], "CA")
            windows[conn] = r.cwnd_pkts
    before = coupler.sum_cwnd if coupler is not None else sum(windows.values())
    half = windows[1] / 2
    if coupler is not None:
        assert coupler.update(1, windows[1], half, "FR") is None  # no answer in Fast Recovery
        windows[1] = coupler.update(1, half, half, "CA").cwnd_pkts
        windows[2] = coupler.update(2, windows[2], windows[2], "CA").cwnd_pkts
        return LossResult(kind, before, coupler.sum_cwnd)
    windows[1] = half
    return LossResult("uncoupled", before, sum(windows.values()))


def main(out: str = "out") -> None:
    print("RFC 8699 Appendix C.1: example operation of the passive FSE (rates in Mbit/s)\n")
    for step in appendix_c_walkthrough():
        print(format_step(step))
        print()
    print("One loss on connection 1 of 2 (seed 003 Fig. 9.2): aggregate window kept\n")
    print(f"{'coupler':>12} {'before':>8} {'after':>8} {'kept':>6}")
    for kind in (None, "ccc", "efcm", "etcp"):
        r = one_loss(kind)
        print(f"{r.coupler:>12} {r.before_pkts:>8.1f} {r.after_pkts:>8.1f} {r.kept:>6.2f}")
    print("\nctrlTCP (ccc) halves the aggregate as one TCP flow would; EFCM keeps 3/4, as uncoupled flows do.")
    print("\nCoupled versus uncoupled TCP on the dissertation's dumbbell (seed 003 section 9.3):", flush=True)
    import shutil

    from macroflow.console import sweep_progress
    from macroflow.reproductions import print_checks, reproduce

    name = "coupled-vs-uncoupled"
    bars = {}

    def on_progress(part, p):
        if part not in bars:
            bars[part] = sweep_progress(f"{name}/{part}", False)
        bars[part][1](p)

    report = reproduce(name, pathlib.Path(out) / "reproductions" / name, on_progress=on_progress)
    for prog, _ in bars.values():
        prog.stop()
    print_checks(report.parent)
    final = pathlib.Path(out) / "report.html"
    shutil.copyfile(report, final)
    print(f"report: {final}")
