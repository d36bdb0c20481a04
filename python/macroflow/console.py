"""What the CLI and the main job show while they work: rich progress bars (simulated time for a
run, runs done and time left for a sweep) and the PASS/FAIL table of a reproduction."""

from __future__ import annotations

from typing import Callable, Tuple

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from macroflow.sweeps import SweepProgress

__all__ = ["console", "sweep_progress"]

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
