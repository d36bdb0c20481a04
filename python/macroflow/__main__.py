"""`macroflow` / `python -m macroflow`: without arguments, the main job (the coupling demonstration
in macroflow.demo); `macroflow run FILE` runs a scenario file into the results store; `macroflow
list` lists the shipped scenarios."""

from __future__ import annotations

import pathlib
import sys

import typer
from rich.console import Console
from rich.table import Table

from macroflow import demo
from macroflow.results import load_results, run_to_store
from macroflow.scenario import ScenarioError, load

app = typer.Typer(add_completion=False, help="macroflow: coupled congestion control experiments.")
SCENARIOS = pathlib.Path(__file__).resolve().parent.parent.parent / "scenarios"


@app.command("run")
def run_cmd(
    file: pathlib.Path = typer.Argument(..., help="a scenario file (TOML), e.g. scenarios/coupled_vs_uncoupled_dumbbell.toml"),
    out: pathlib.Path = typer.Option(pathlib.Path("out/results"), help="results store: one directory per run, keyed by a hash"),
    duration: float = typer.Option(None, help="override the scenario's duration_s (seconds)"),
) -> None:
    """Validate FILE, run it on the simulator, and store its tables as Parquet with a manifest.
    A run already in the store is not repeated."""
    try:
        sc = load(file)
    except ScenarioError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2)
    if duration is not None:
        if not duration > 0:
            typer.echo(f"--duration: expected seconds > 0, got {duration}", err=True)
            raise typer.Exit(2)
        sc = sc.model_copy(update={"duration_s": duration})
    path = run_to_store(sc, out)
    t = load_results(path)
    table = Table(title=f"{sc.name}: {path}")
    for col in ("kind", "flow", "goodput Mbit/s"):
        table.add_column(col)
    for f in t["flows"].to_pylist():
        table.add_row("tcp", str(f["flow"]), f"{f['goodput_bps'] / 1e6:.3f}")
    for f in t["media_flows"].to_pylist():
        table.add_row(f"media/{f['controller']}", str(f["flow"]), f"{f['goodput_bps'] / 1e6:.3f}")
    for f in t["udp_flows"].to_pylist():
        table.add_row("udp", str(f["flow"]), f"{f['throughput_bps'] / 1e6:.3f}")
    Console().print(table)


@app.command("list")
def list_cmd() -> None:
    """List the shipped scenario files."""
    for f in sorted(SCENARIOS.glob("*.toml")):
        typer.echo(f.relative_to(SCENARIOS.parent))


def main() -> None:
    if len(sys.argv) == 1:
        demo.main()
    else:
        app()


if __name__ == "__main__":
    main()
