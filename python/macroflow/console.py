"""What the CLI and the main job show while they work: rich progress bars (simulated time for a
run, runs done and time left for a sweep) and the PASS/FAIL table of a reproduction."""

from __future__ import annotations

import json
import pathlib
from typing import Callable, Tuple

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from macroflow.sweeps import SweepProgress

__all__ = ["console", "sweep_progress", "print_checks"]

#: Progress goes to stderr, so stdout carries only results.
console = Console(stderr=True)


def sweep_progress(title: str, quiet: bool) -> Tuple[Progress, Callable[[SweepProgress], None]]:
    """A rich progress bar of runs done and time left, as an on_progress callback."""
    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    )
    state = {}

    def update(p: SweepProgress) -> None:
        if "task" not in state:
            prog.start()
            if p.already:
                console.print(f"{title}: {p.already} of {p.total} runs already stored; running {p.total - p.already}")
            state["task"] = prog.add_task(title, total=p.total, completed=p.already)
        prog.update(state["task"], completed=p.already + p.done)
        if p.already + p.done == p.total:
            prog.stop()

    return prog, update


def print_checks(root: pathlib.Path) -> None:
    rep = json.loads((root / "reproduction.json").read_text())
    table = Table(title=rep["title"])
    for col in ("check", "expected", "ours", ""):
        table.add_column(col)
    for c in rep["checks"]:
        table.add_row(c["name"], c["expected"], c["ours"], "[green]PASS[/]" if c["passed"] else "[red]FAIL[/]")
    Console().print(table)
    passed = sum(c["passed"] for c in rep["checks"])
    Console().print(f"{passed} of {len(rep['checks'])} checks pass")
