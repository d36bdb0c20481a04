"""The ``macroflow`` command (also ``python -m macroflow``).

Without arguments it runs the main job (:func:`macroflow.demo.main`: the coupling library's worked
examples, then the coupled-versus-uncoupled reproduction, leaving ``out/report.html``). Commands:
``run FILE``, ``sweep FILE --set key=v1,v2 --seeds N``, ``reproduce NAME``, ``report DIR``,
``detect CAPTURE``, ``list``; ``--help`` on each says what it does.
"""

from __future__ import annotations

import pathlib
import sys
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from macroflow import demo
from macroflow._native import SimulationError
from macroflow.results import ENGINES, StoreError, load_results, run_to_store
from macroflow.scenario import ScenarioError, load, with_duration
from macroflow.console import console, sweep_progress
from macroflow.sweeps import SweepError, SweepProgress, plan_file, sweep

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="macroflow: coupled congestion control experiments. Without a command: the main job "
    "(worked examples, then the coupled-vs-uncoupled reproduction into out/report.html).",
)


def _fail(msg: str) -> None:
    typer.echo(msg, err=True)
    raise typer.Exit(2)


@app.command("run")
def run_cmd(
    file: pathlib.Path = typer.Argument(..., help="a scenario file (TOML), e.g. scenarios/coupled_vs_uncoupled_dumbbell.toml"),
    out: pathlib.Path = typer.Option(pathlib.Path("out/results"), help="results store: one directory per run, keyed by a hash"),
    duration: Optional[float] = typer.Option(None, help="override the scenario's duration_s (seconds)"),
    engine: str = typer.Option("sim", help="sim (the simulator) or linux (real kernel TCP in network namespaces; root)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Run one scenario file on the simulator (or real Linux) and store its results.

    FILE is validated first (nothing runs on an invalid file; with --engine linux, nor on one the
    kernel or the engine cannot run); the run shows its time, and its tables are stored as Parquet
    with a manifest under OUT/<hash>. A run already in the store is not repeated."""
    if engine not in ENGINES:
        _fail(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    try:
        sc = load(file)
    except ScenarioError as e:
        _fail(str(e))
    if duration is not None:
        try:
            sc = with_duration(sc, duration, "--duration")
        except ScenarioError as e:
            _fail(str(e))
    if engine == "linux":
        from macroflow.linux import LinuxEngineError, check

        try:
            check(sc)  # before the progress bar: a refusal is one clear message
        except LinuxEngineError as e:
            _fail(f"{file}: {e}")
    unit = "s simulated" if engine == "sim" else "s on Linux"
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:.1f} " + unit),
        TimeElapsedColumn(), console=console, disable=quiet,
    ) as prog:
        task = prog.add_task(sc.name, total=sc.duration_s)
        try:
            path = run_to_store(sc, out, progress=lambda t: prog.update(task, completed=t), engine=engine)
        except (StoreError, SimulationError, ScenarioError) as e:
            _fail(str(e))
        prog.update(task, completed=sc.duration_s)
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


@app.command("sweep")
def sweep_cmd(
    file: pathlib.Path = typer.Argument(..., help="the scenario file to sweep"),
    set_: List[str] = typer.Option(
        [], "--set", help="KEY=V1,V2,...: a dotted path into the file and its values, e.g. topology.queue_pkts=40,83 "
        "or groups.0.kind=none,ccc; repeat for a grid (the cartesian product)",
    ),
    seeds: int = typer.Option(1, help="seeds per point: the file's seed and the ones after it"),
    out: Optional[pathlib.Path] = typer.Option(None, help="results store (default out/sweeps/<scenario name>)"),
    workers: Optional[int] = typer.Option(None, help="local processes (default: one per CPU)"),
    ray: Optional[str] = typer.Option(None, help="run on Ray instead: a cluster address, 'auto', or 'local' for a private instance"),
    duration: Optional[float] = typer.Option(None, help="override the scenario's duration_s (seconds)"),
    engine: str = typer.Option("sim", help="sim, or linux: real kernel TCP in network namespaces (root; one run at a time unless --workers)"),
    report: bool = typer.Option(True, help="write OUT/report.html when done"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
) -> None:
    """Run a scenario file over a grid of settings and seeds.

    Every point is validated before anything runs. Runs go to a local process pool (or a Ray
    cluster with --ray) and into a results store; runs already stored are skipped, so a killed
    sweep started again runs only what is missing. Example:
    macroflow sweep scenarios/coupled_vs_uncoupled_dumbbell.toml --set groups.0.kind=ccc,etcp --set topology.queue_pkts=40,83 --seeds 3"""
    try:
        sc, jobs, meta = plan_file(file, set_, seeds, duration, engine=engine)
    except (ScenarioError, SweepError) as e:
        _fail(str(e))
    out = out or pathlib.Path("out/sweeps") / sc.name
    prog, update = sweep_progress(f"sweep {sc.name}", quiet)
    last: List[SweepProgress] = []

    def on_progress(p: SweepProgress) -> None:
        last[:] = [p]
        update(p)

    try:
        sweep(jobs, out, workers=workers, ray=ray, on_progress=on_progress, meta=meta)
    except (SweepError, StoreError) as e:
        _fail(str(e))
    finally:
        prog.stop()
    p = last[0]
    typer.echo(f"{p.total} runs in {out}: {p.done} run now, {p.already} already stored")
    if report:
        from macroflow.reports import write_report

        typer.echo(f"report: {write_report(out)}")


@app.command("reproduce")
def reproduce_cmd(
    name: str = typer.Argument(..., help="a named reproduction (see `macroflow list`)"),
    out: Optional[pathlib.Path] = typer.Option(None, help="where to store it (default out/reproductions/NAME)"),
    seeds: Optional[int] = typer.Option(None, help="seeds per point; for flow-level reproductions (fire-hose), traffic patterns per point (default: the reproduction's)"),
    duration: Optional[float] = typer.Option(None, help="simulated seconds per run (default: the reproduction's)"),
    quick: bool = typer.Option(False, help="fewer seeds and shorter runs, for a first look"),
    workers: Optional[int] = typer.Option(None, help="local processes (default: one per CPU)"),
    ray: Optional[str] = typer.Option(None, help="run on Ray: a cluster address, 'auto', or 'local'"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    linux: bool = typer.Option(False, "--linux", help="thesis figures only: also run those with a testbed counterpart on "
                               "real Linux (root; one seed unless --seeds)"),
) -> None:
    """Run a named reproduction of a source's experiment and check it.

    Runs its sweeps (resuming after a kill), compares our results with the source's expected
    outcomes, and writes DIR/reproduction.json and DIR/report.html with the figures and PASS/FAIL
    (INFO rows are shown beside the source's words but not counted; every FAIL and INFO has a note)."""
    from macroflow.reproductions import FALSE_SHARING, REPRODUCTIONS, WEAK_CONVERGENCE, print_checks, reproduce

    thesis_sets: Optional[List[str]] = None
    if name not in REPRODUCTIONS and name not in (WEAK_CONVERGENCE, FALSE_SHARING):
        from macroflow.thesis import set_of

        try:
            thesis_sets = [s.name for s in set_of(name)]
        except KeyError:
            _fail(f"no reproduction {name!r}; known: {', '.join(sorted(REPRODUCTIONS))}, {WEAK_CONVERGENCE}, {FALSE_SHARING}, and the thesis's "
                  "figures: thesis, thesis-chN, thesis-fig-X.Y (see macroflow list)")
    bars = {}

    def on_progress(part: str, p: SweepProgress) -> None:
        if part not in bars:
            bars[part] = sweep_progress(f"{name}/{part}", quiet)
        bars[part][1](p)

    try:
        path = reproduce(name, out, seeds=seeds, duration_s=duration, quick=quick, workers=workers, ray=ray, on_progress=on_progress,
                         linux=linux)
    except (ValueError, SweepError, StoreError) as e:
        _fail(str(e))
    finally:
        for prog, _ in bars.values():
            prog.stop()
    print_checks(path.parent, only=thesis_sets)
    typer.echo(f"report: {path}")


@app.command("report")
def report_cmd(
    dir: pathlib.Path = typer.Argument(..., help="a results store (from run, sweep or reproduce)"),
    out: Optional[pathlib.Path] = typer.Option(None, help="the HTML file (default DIR/report.html)"),
) -> None:
    """Write a self-contained HTML report of a results store.

    Summary tables, figures (time series, each metric against each swept parameter with the
    spread over seeds, CDFs) and, for a named reproduction, the source's expected values beside
    ours with PASS/FAIL/INFO and notes."""
    from macroflow.reports import write_report

    try:
        typer.echo(f"report: {write_report(dir, out)}")
    except (FileNotFoundError, ValueError, StoreError) as e:
        _fail(str(e))


@app.command("list")
def list_cmd() -> None:
    """List the shipped scenario files, the names scenario files may use, and the reproductions."""
    from macroflow.reproductions import REPRODUCTIONS

    from macroflow.scenario import SHIPPED

    typer.echo(f"scenarios (in {SHIPPED}; `macroflow run scenarios/NAME.toml` finds them from anywhere):")
    for f in sorted(SHIPPED.glob("*.toml")):
        typer.echo(f"  scenarios/{f.name}")
    from macroflow._native import CONGESTION_CONTROLS, FSE_ALGORITHMS, RATE_CONTROLLERS, TCP_COUPLER_KINDS

    typer.echo(f"congestion controls (cc): {', '.join(CONGESTION_CONTROLS)}")
    typer.echo(f"rate controllers (controller): {', '.join(RATE_CONTROLLERS)}")
    typer.echo(f"TCP couplers (groups kind): {', '.join(TCP_COUPLER_KINDS)}")
    typer.echo(f"FSE algorithms (groups kind): {', '.join(FSE_ALGORITHMS)}")
    typer.echo("queue disciplines (queue kind; keys, [optional=default]):")
    for kind, keys in _queue_kinds():
        typer.echo(f"  {kind}: {keys}")
    typer.echo("reproductions (macroflow reproduce NAME):")
    for name, r in sorted(REPRODUCTIONS.items()):
        typer.echo(f"  {name}: {r.title}")
    typer.echo("  false-sharing: seed 000, false sharing in shared congestion management: Eq. 1 and 2 on Fig. 1's four "
               "topologies, the detection tests and SBD (time, accuracy, confidence), and the response (--quick: 2 seeds, 100 s)")
    typer.echo("  weak-convergence: seed 001, the weak convergence of TCP bandwidth sharing: its Markov model, the 12-hour "
               "runs of Tables 1-2 and Figs. 2-8, and the same with ctrlTCP or DRR (--quick: 1-hour runs)")
    from macroflow.thesis import core as thesis

    typer.echo("  thesis: seed 003's evaluation figure by figure (out/reproductions/thesis/index.html); "
               "thesis-chN for one chapter, or one figure:")
    for s in thesis.SETS:
        typer.echo(f"  thesis-fig-{s.name}: Fig{'s' if len(s.figures) > 1 else ''}. {', '.join(s.figures)} (chapter {s.chapter})")


@app.command("detect")
def detect_cmd(
    capture: pathlib.Path = typer.Argument(..., help="a pcap or pcapng capture (Ethernet, Linux cooked SLL/SLL2 or raw IP)"),
    flows: List[str] = typer.Option(
        [], "--flows", help="a flow by its index in --list or as src:sport-dst:dport (\\[addr]:port for IPv6); repeat, "
        "or separate with commas (default: every flow with one-way delays)",
    ),
    list_: bool = typer.Option(False, "--list", help="list the flows found, with packet counts, and stop"),
    interval_s: Optional[float] = typer.Option(None, "--interval-s", help="group every X seconds (default: SBD's T, 0.35 s)"),
    confidence: float = typer.Option(0.9, help="the false-sharing tests' confidence level, strictly between 0 and 1"),
    ts_hz: Optional[int] = typer.Option(None, "--ts-hz", help="the senders' TSval clock rate in Hz (default: estimated "
                                        "per flow: 1000 for Linux, 1000000 for the simulator)"),
    json_: bool = typer.Option(False, "--json", help="print everything as one JSON document"),
) -> None:
    """Which flows of a capture share a bottleneck: RFC 8382 SBD and seed 000's four false-sharing tests.

    One-way delays come from the TCP timestamp option (TSval, relative and, at Linux's 1 ms
    ticks, coarse); losses from sequence gaps and retransmissions. Prints a line per grouping
    interval (time, SBD's groups, per pair of flows the four tests' answers) and a summary.
    Example: macroflow detect bottleneck.pcap --list; macroflow detect bottleneck.pcap --flows 0 --flows 1"""
    import json

    from macroflow._native import CouplingError
    from macroflow.detect import DetectError, detect, format_flows, format_result, read_capture, select

    try:
        cap = read_capture(capture, ts_hz=ts_hz)
        if list_:
            out = json.dumps([f.as_dict() for f in cap.flows], indent=1) if json_ else "\n".join(format_flows(cap))
        else:
            result = detect(cap, select(cap, flows), interval_s=interval_s, confidence=confidence)
            out = json.dumps(result, indent=1) if json_ else "\n".join(format_result(result))
    except (DetectError, CouplingError) as e:
        _fail(str(e))
    typer.echo(out)


def _queue_kinds() -> List[tuple]:
    """Each queue kind with its keys, read from the simulator's queue spec schema (QUEUE_KINDS is
    the registry; the schema has each kind's keys and defaults)."""
    import json

    from macroflow._native import QUEUE_KINDS, QUEUE_SPEC_SCHEMA

    variants = {v["properties"]["kind"]["const"]: v for v in json.loads(QUEUE_SPEC_SCHEMA)["$defs"]["QueueSpec"]["oneOf"]}
    out = []
    for kind in QUEUE_KINDS:
        v = variants[kind]
        required = set(v.get("required", []))
        one_of = [b["required"][0] for b in v.get("oneOf", [])]  # give exactly one of these
        keys = [" | ".join(one_of)] if one_of else []
        rest = [k for k in v["properties"] if k != "kind" and k not in one_of]
        keys += [k for k in rest if k in required]
        keys += [f"[{k}={json.dumps(v['properties'][k]['default'])}]" if "default" in v["properties"][k] else f"[{k}]"
                 for k in rest if k not in required]
        out.append((kind, ", ".join(keys)))
    return out


linux_app = typer.Typer(help="ctrlTCP in the running kernel: the BPF congestion control macroflow_ccc (root).")
rule_app = typer.Typer(help="Which connections join which group, with which priority (tried in order).")
linux_app.add_typer(rule_app, name="rule")
app.add_typer(linux_app, name="linux")


def _ccc(fn, *args, **kw):
    from macroflow import ccc

    try:
        return getattr(ccc, fn)(*args, **kw)
    except (RuntimeError, ValueError, OSError) as e:
        _fail(str(e))


@linux_app.command("load")
def linux_load(
    handover: bool = typer.Option(True, help="ack-clocked handover for joining connections (Algorithm 4)"),
    max_burst: int = typer.Option(0, help="the coupler's burst limit, packets (0: none beyond the connection's own)"),
    stale_s: int = typer.Option(30, "--stale-s", help="take a member out of its group after this long not heard from (no "
                                "report, no ACK of its data; 0: never); a live one rejoins at its next report"),
) -> None:
    """Load and register macroflow_ccc (stays registered after this command: pinned in /sys/fs/bpf)."""
    r = _ccc("load", handover=handover, max_burst_pkts=max_burst, stale_s=stale_s)
    typer.echo(f"loaded macroflow_ccc (pinned at {r['pin_dir']}); use it per socket "
               "(setsockopt TCP_CONGESTION), per route (ip route ... congctl macroflow_ccc) or system-wide "
               "(sysctl net.ipv4.tcp_congestion_control=macroflow_ccc)")


@linux_app.command("unload")
def linux_unload() -> None:
    """Unregister macroflow_ccc: sockets using it keep it until they close; new ones cannot choose it."""
    r = _ccc("unload")
    typer.echo(f"unloaded macroflow_ccc ({r['coupled_connections']} coupled connections keep it until they close)")


@linux_app.command("status")
def linux_status(json_: bool = typer.Option(False, "--json", help="print the status as JSON")) -> None:
    """Groups, their members (cwnd, priority, state), sum_cwnd and CoCo, the rules and the counters."""
    from macroflow import ccc

    st = _ccc("status")
    if json_:
        import json

        typer.echo(json.dumps(st, indent=1))
    else:
        typer.echo(ccc.format_status(st))


@linux_app.command("gc")
def linux_gc(min_idle: float = typer.Option(10.0, help="delete groups empty for at least this many seconds")) -> None:
    """Delete the groups that have been empty for a while (the program keeps emptied groups)."""
    n = _ccc("gc", min_idle)
    typer.echo(f"deleted {n} idle group{'s' if n != 1 else ''}")


def _ports(ports: Optional[str]):
    if ports is None:
        return None
    lo, _, hi = ports.partition("-")
    try:
        return (int(lo), int(hi or lo))
    except ValueError:
        _fail(f"--ports takes PORT or LO-HI, got {ports!r}")


@rule_app.command("add")
def rule_add(
    prefix: Optional[str] = typer.Option(None, help="the remote address's prefix, e.g. 10.0.0.0/8"),
    ports: Optional[str] = typer.Option(None, help="the remote port or range, e.g. 5000-5100"),
    cgroup: Optional[str] = typer.Option(None, help="a cgroup v2 path (relative to /sys/fs/cgroup)"),
    group: Optional[int] = typer.Option(None, help="the group number (default: the address pair's group)"),
    priority: float = typer.Option(1.0, help="the priority, in (0, 256]"),
    uncoupled: bool = typer.Option(False, help="matching connections run uncoupled"),
) -> None:
    """Append a rule (the first matching rule decides)."""
    i = _ccc("rule_add", prefix=prefix, ports=_ports(ports), cgroup=cgroup, group=group, priority=priority,
             uncoupled=uncoupled)
    typer.echo(f"rule {i} added")


@rule_app.command("list")
def rule_list() -> None:
    """The rules in the order they are tried."""
    from macroflow import ccc

    rs = _ccc("rules")
    if not rs:
        typer.echo("no rules: connections are grouped by address pair, priority 1")
    for r in rs:
        typer.echo(ccc.format_rule(r))


@rule_app.command("del")
def rule_del(index: int = typer.Argument(..., help="the rule's index (see `rule list`)")) -> None:
    """Delete a rule; the ones after it move up."""
    from macroflow import ccc

    r = _ccc("rule_del", index)
    typer.echo(f"deleted {ccc.format_rule(r)}")



tiu_app = typer.Typer(help="TCP-in-UDP: coupled connections forced onto one path (root).")
tiu_rule_app = typer.Typer(help="Which connect()s ride TiU (the longest matching prefix decides).")
tiu_app.add_typer(tiu_rule_app, name="rule")
app.add_typer(tiu_app, name="tiu")


def _tiu(fn, *args, **kw):
    from macroflow import tiu

    try:
        return getattr(tiu, fn)(*args, **kw)
    except (RuntimeError, ValueError, TypeError, OSError) as e:
        _fail(str(e))


@tiu_app.command("enable")
def tiu_enable(
    dev: List[str] = typer.Option(..., "--dev", help="a device, or NETNS:DEV for one in a network namespace; repeat"),
    port: int = typer.Option(8899, help="the TiU UDP port (both ends must use the same)"),
    cgroup: Optional[str] = typer.Option(None, help="the cgroup v2 directory whose sockets' handshakes carry the "
                                         "TiU-Setup option (default: the cgroup v2 root, every socket; "
                                         "when TiU is enabled already, another one is added)"),
) -> None:
    """Enable TiU on devices (their offloads set for it); stays on after this command (pinned in /sys/fs/bpf)."""
    ds = _tiu("enable", dev, port=port, cgroup=cgroup)
    typer.echo("TiU on port %d runs on %s; add a rule (macroflow tiu rule add PREFIX) for outgoing connections"
               % (port, ", ".join(d["dev"] + (f" (netns {d['netns']})" if d["netns"] else "") for d in ds)))


@tiu_app.command("disable")
def tiu_disable() -> None:
    """Take TiU off every device; connections riding it stall unless their peer falls back."""
    from macroflow import tiu

    r = _tiu("disable")
    typer.echo(f"TiU disabled on {len(r['devices'])} devices ({r['connections']} connections were riding it); "
               f"tiu_sockops detached from {', '.join(r['cgroups']) or 'no cgroup'}")
    name = lambda d: d["dev"] + (f" (netns {d['netns']})" if d["netns"] else "")  # noqa: E731
    for d in r["gone"]:
        typer.echo(f"{name(d)} was gone: nothing to detach")
    if r["restored"]:
        typer.echo("offloads and gso_max_segs as before on " + ", ".join(name(d) for d in r["restored"]))
    for why in r["not_restored"]:
        typer.echo(f"settings not put back: {why}")
    if r["rules"]:
        typer.echo(f"{len(r['rules'])} rules removed (add them again after the next enable):")
        for x in r["rules"]:
            typer.echo("  " + tiu.format_rule(x))


@tiu_app.command("status")
def tiu_status(json_: bool = typer.Option(False, "--json", help="print the status as JSON")) -> None:
    """Per host pair the port pair and ID table, the rules, and the counters."""
    from macroflow import tiu

    st = _tiu("status")
    if json_:
        import json

        typer.echo(json.dumps(st, indent=1))
    else:
        typer.echo(tiu.format_status(st))


@tiu_rule_app.command("add")
def tiu_rule_add(
    prefix: str = typer.Argument(..., help="the destination prefix, e.g. 10.0.0.0/8 or fd00::/8"),
    ports: Optional[str] = typer.Option(None, help="the destination port or range, e.g. 5000-5100"),
    mark: int = typer.Option(0, help="only sockets with this SO_MARK (0: any)"),
    never: bool = typer.Option(False, help="matching connections never ride TiU (an exception)"),
) -> None:
    """Add a rule (replacing one for the same prefix)."""
    _tiu("rule_add", prefix, ports=_ports(ports), mark=mark, tiu=not never)
    typer.echo(f"rule for {prefix} added")


@tiu_rule_app.command("list")
def tiu_rule_list() -> None:
    from macroflow import tiu

    rs = _tiu("rules")
    if not rs:
        typer.echo("no rules: only connections learned from TiU SYNs ride TiU")
    for r in rs:
        typer.echo(tiu.format_rule(r))


@tiu_rule_app.command("del")
def tiu_rule_del(prefix: str = typer.Argument(..., help="the rule's prefix")) -> None:
    _tiu("rule_del", prefix)
    typer.echo(f"rule for {prefix} deleted")


def main() -> None:
    if len(sys.argv) == 1:
        demo.main()
    else:
        app()


if __name__ == "__main__":
    main()
