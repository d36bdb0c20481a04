"""The machinery of the thesis reproductions: a figure set (runs, analysis, checks), running sets
into a results store with resumption and reuse, and the report pages (index and one per chapter).

A :class:`FigureSet` is one experiment of seed 003 that one or more of its figures show (Figs. 5.7-5.12
are the same runs drawn six ways). Its runs are built from a shipped scenario file (the settings,
in one place a user can run with ``macroflow run``) varied per point and seed, and stored as a
sweep in ``ROOT/fig-X.Y/`` (so a killed reproduction resumes and a finished one is reused). Its
analysis reads the stored runs and returns our figures drawn the dissertation's way and the checks;
``ROOT/fig-X.Y/result.json`` keeps them with the cost, and the pages are written from those files.
"""

from __future__ import annotations

import html
import json
import math
import pathlib
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from macroflow.reproductions import Check, check_status, tally
from macroflow.results import code_version, list_runs, load_results, write_json_atomic
from macroflow.scenario import SHIPPED, parse_toml, validate
from macroflow.sweeps import Job, SweepProgress, sweep

__all__ = ["FigureSet", "Analysis", "SETS", "register", "set_of", "names", "reproduce_thesis", "base_scenario",
           "start_times", "runs_by", "SOURCE"]

#: The dissertation (seed 003) and where its text is.
SOURCE = "Seed 003 (S. Islam, dissertation on coupled congestion control)"

#: Chapter titles as the dissertation gives them.
CHAPTERS: Dict[int, str] = {
    1: "Introduction",
    3: "Background: coupled congestion control for TCP",
    5: "The Flow State Exchange for rate-based media flows (Algorithms 1 and 2, RAP and TFRC)",
    6: "The passive FSE with NADA and GCC (Algorithm 3)",
    7: "Ack-clocking a joining flow (Algorithm 4)",
    8: "OpenTCP: coupling TCP and LEDBAT",
    9: "ctrlTCP (TCP-CCC)",
}


@dataclass
class Analysis:
    """What a set's analysis returns: figures as (figure id, matplotlib figure, what it shows),
    the checks (each names its figure), explanations of disagreements and findings (paragraphs of
    plain text), and an optional table of our numbers beside the source's."""

    figures: List[Tuple[str, Any, str]] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    table: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class FigureSet:
    """One experiment of the dissertation and the figures that show it."""

    #: The first figure's number, "5.7": the reproduction is ``thesis-fig-5.7``, stored in ``fig-5.7/``.
    name: str
    chapter: int
    #: Figure number -> the dissertation's caption (verbatim).
    captions: Dict[str, str]
    #: The dissertation's words about these figures (quoted, with seed 003's line numbers).
    claim: str
    #: The settings we use and where the text states them; what it leaves open and what we chose.
    setting: str
    #: The shipped scenario file the runs are built from (in ``scenarios/``).
    base: str
    #: (base scenario as a dict, seeds) -> the runs.
    jobs: Callable[[Dict[str, Any], int], List[Job]]
    #: The stored runs (manifests, with ``params``) -> figures and checks.
    analyse: Callable[[List[Dict[str, Any]]], Analysis]
    seeds: int = 10
    #: Where the dissertation ran it (ns-2 simulation, a testbed, emulation), and what of it we
    #: can run on the Linux testbed.
    environment: str = "ns-2 simulation"
    #: What must hold, in one sentence (the index page's row); the claim's start when empty.
    summary: str = ""
    #: A named reproduction running the same scenarios on real Linux (the dissertation's
    #: testbed figures): the page links it and shows its checks when it is stored beside ROOT.
    linux: str = ""
    #: The set's own runs also run on the Linux engine (kernel TCP in network namespaces, root)
    #: with ``macroflow reproduce thesis... --linux``: stored in ``fig-X.Y/linux/``, analysed by
    #: the same function, shown beside the simulator's on the page.
    on_linux: bool = False

    @property
    def figures(self) -> List[str]:
        return list(self.captions)

    @property
    def reproduction(self) -> str:
        return f"thesis-fig-{self.name}"


#: Every set, in the dissertation's order (filled by the chapter modules).
SETS: List[FigureSet] = []


def register(s: FigureSet) -> FigureSet:
    if any(x.name == s.name for x in SETS):
        raise ValueError(f"figure set {s.name} registered twice")
    SETS.append(s)
    SETS.sort(key=lambda x: (x.chapter, _fig_key(x.name)))
    return s


def _fig_key(fig: str) -> Tuple[int, int]:
    a, _, b = fig.partition(".")
    return (int(a), int(b or 0))


def names() -> List[str]:
    """Every name ``macroflow reproduce`` takes for the thesis: ``thesis``, ``thesis-ch5`` (a
    chapter), and ``thesis-fig-X.Y`` for every figure (a figure of a set names the whole set)."""
    out = ["thesis"] + [f"thesis-ch{c}" for c in sorted({s.chapter for s in SETS})]
    out += [f"thesis-fig-{f}" for s in SETS for f in s.figures]
    return out


def set_of(name: str) -> List[FigureSet]:
    """The sets a name runs (see :func:`names`); KeyError naming the known ones otherwise."""
    if name == "thesis":
        return list(SETS)
    if name.startswith("thesis-ch"):
        got = [s for s in SETS if f"thesis-ch{s.chapter}" == name]
        if got:
            return got
    if name.startswith("thesis-fig-"):
        fig = name[len("thesis-fig-"):]
        for s in SETS:
            if fig in s.captions:
                return [s]
    raise KeyError(f"no thesis reproduction {name!r}; known: thesis, thesis-ch<N> "
                   f"({', '.join(str(c) for c in sorted({s.chapter for s in SETS}))}), thesis-fig-<X.Y> "
                   f"({', '.join(f for s in SETS for f in s.figures)})")


# --- building runs -------------------------------------------------------------------------------

def base_scenario(file: str) -> Dict[str, Any]:
    """The shipped scenario file `file` (in ``scenarios/``) as a dict, validated once as it is."""
    p = SHIPPED / file
    data = parse_toml(p.read_text(), str(p))
    validate(data, str(p))
    return data


def start_times(seed: int, n: int, over_s: float = 1.0) -> List[float]:
    """`n` start times uniform over the first `over_s` seconds, drawn from `seed` (the dissertation's
    "randomly picked start times over the first second"), rounded to the microsecond."""
    rng = random.Random(f"thesis-start-{seed}")
    return [round(rng.uniform(0.0, over_s), 6) for _ in range(n)]


def job(params: Dict[str, Any], data: Dict[str, Any], seed: int) -> Job:
    sc = dict(data)
    sc["seed"] = seed
    return Job(params, validate(sc, f"{data.get('name')} {params} seed={seed}"))


def runs_by(runs: Sequence[Dict[str, Any]], **params: Any) -> List[Dict[str, Any]]:
    """The runs whose params have these values, by seed."""
    got = [r for r in runs if all(r["params"].get(k) == v for k, v in params.items())]
    return sorted(got, key=lambda r: int(r["seed"]))


# --- running -------------------------------------------------------------------------------------

def _analysis_fingerprint() -> str:
    """The code version of the runs (:func:`code_version`: the engine and the package's top-level
    modules) and a hash of this package's modules (the analyses): a stored ``result.json`` is
    reused only when both are unchanged. Taken at import, as ``code_version`` is."""
    import hashlib

    h = hashlib.sha256(code_version().encode())
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return f"{code_version()}+{h.hexdigest()[:12]}"


_ANALYSIS_VERSION = _analysis_fingerprint()


def _png(fig: Any) -> str:
    from macroflow.reports import _png as png

    return png(fig)


def run_set(s: FigureSet, root: pathlib.Path, seeds: Optional[int] = None, workers: Optional[int] = None,
            on_progress: Optional[Callable[[str, SweepProgress], None]] = None, engine: str = "sim") -> Dict[str, Any]:
    """Runs the set's missing runs into ``root/fig-X.Y/`` (``.../linux/`` on the Linux engine),
    analyses all of them and writes ``result.json`` there (reused as it is when the runs, the seed
    count and the code are the same)."""
    seeds = seeds if seeds is not None else s.seeds
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    if engine not in ("sim", "linux"):
        raise ValueError(f"engine must be 'sim' or 'linux', got {engine!r}")
    d = root / f"fig-{s.name}" / ("linux" if engine == "linux" else "")
    base = base_scenario(s.base)
    jobs = s.jobs(base, seeds)
    if engine == "linux":
        jobs = [Job(j.params, j.scenario, "linux") for j in jobs]
    # A run is stored by its scenario and seed only: two points with the same scenario would be
    # one run, found under the first point's params and missing under the second's.
    seen: Dict[str, Job] = {}
    for j in jobs:
        other = seen.setdefault(j.key, j)
        if other.params != j.params:
            raise ValueError(f"figure set {s.name}: the points {other.params} and {j.params} are the same run "
                             f"(scenario {j.scenario.name!r}, seed {j.scenario.seed}); reuse one point for both")
    wanted = sorted(seen)
    result_file = d / "result.json"
    old = json.loads(result_file.read_text()) if result_file.exists() else None
    stored_before = {r["key"] for r in list_runs(d)} if d.exists() else set()
    todo = len(set(wanted) - stored_before)
    t0 = time.monotonic()
    sweep(jobs, d, workers=workers, meta={"name": s.reproduction, "file": s.base, "grid": {}, "seeds": list(range(1, seeds + 1))},
          on_progress=(lambda p: on_progress(s.name + ("/linux" if engine == "linux" else ""), p)) if on_progress else None)
    run_s = time.monotonic() - t0
    # The cost of these runs: carried over while they are the same runs (a rebuild or another
    # seed count makes new ones, whose cost starts again); runs reused cost nothing now.
    cost = dict((old or {}).get("cost") or {}) if old and old.get("runs") == wanted else {}
    if todo:
        cost["computed_runs"] = cost.get("computed_runs", 0) + todo
        cost["compute_s"] = cost.get("compute_s", 0.0) + run_s
    # Reused only when nothing was computed now: a run computed again (lost, damaged) is the same
    # on the simulator, but not on Linux, whose runs are not deterministic.
    if (old and not todo and old.get("runs") == wanted and old.get("version") == _ANALYSIS_VERSION
            and old.get("seeds") == seeds):
        old["cost"] = {**cost, "last_s": run_s}
        write_json_atomic(result_file, old)
        return old
    runs = [r for r in list_runs(d) if r["key"] in set(wanted)]
    t1 = time.monotonic()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"font.size": 9}):
        a = s.analyse(runs)
        figs = [{"fig": f, "caption": s.captions.get(f, ""), "what": what, "png": _png(fig)} for f, fig, what in a.figures]
    # pyplot keeps every figure open until closed: a whole thesis run holds hundreds.
    for _, fig, _ in a.figures:
        plt.close(fig)
    cost["analysis_s"] = time.monotonic() - t1
    cost["last_s"] = run_s + cost["analysis_s"]
    out = {
        "name": s.name, "chapter": s.chapter, "reproduction": s.reproduction, "captions": s.captions,
        "claim": s.claim, "summary": s.summary, "setting": s.setting, "linux": s.linux, "on_linux_available": s.on_linux, "base": s.base, "environment": s.environment,
        "seeds": seeds, "version": _ANALYSIS_VERSION, "runs": wanted, "engine": engine,
        "checks": [{**asdict(c), "set": s.name, **({"name": f"Linux: {c.name}"} if engine == "linux" else {})} for c in a.checks], "notes": a.notes, "table": a.table, "figures": figs, "cost": cost,
    }
    write_json_atomic(result_file, out)
    return out


def reproduce_thesis(name: str = "thesis", out: Optional[Union[str, pathlib.Path]] = None, seeds: Optional[int] = None,
                     quick: bool = False, workers: Optional[int] = None,
                     on_progress: Optional[Callable[[str, SweepProgress], None]] = None, linux: bool = False) -> pathlib.Path:
    """Runs the sets `name` names (see :func:`names`) into `out` (default
    ``out/reproductions/thesis``), then writes the index and every chapter page from the results
    stored there; returns the page of the chapter run (the index for ``thesis``). `quick`: 2 seeds
    per point instead of the dissertation's 10, for a first look (say so when citing); `seeds`
    overrides every set's count. `linux`: the sets with a testbed counterpart (``on_linux``)
    also run on the Linux engine (root; real time, one run at a time unless `workers` says
    otherwise), with one seed unless `seeds` is given."""
    sets = set_of(name)
    root = pathlib.Path(out) if out is not None else pathlib.Path("out/reproductions/thesis")
    if linux and not any(s.on_linux for s in sets):
        raise ValueError(f"{name}: none of its figures has a Linux testbed counterpart (sets that have one: "
                         f"{', '.join(x.reproduction for x in SETS if x.on_linux) or 'none'})")
    if linux:
        # Root, tools, this kernel: before hours of simulator runs, not after them.
        from macroflow.linux import LinuxEngineError, check

        try:
            for s in sets:
                if s.on_linux:
                    for j in s.jobs(base_scenario(s.base), 1):
                        check(j.scenario)
        except LinuxEngineError as e:
            raise ValueError(f"--linux: {e}") from None
    try:
        for s in sets:
            # Single illustrative runs stay single under --quick.
            n = seeds if seeds is not None else (min(2, s.seeds) if quick else s.seeds)
            run_set(s, root, n, workers, on_progress)
            if linux and s.on_linux:
                run_set(s, root, seeds if seeds is not None else 1, workers, on_progress, engine="linux")
    finally:
        # What is stored is shown, also when a later set failed or the run was interrupted.
        write_pages(root)
    if name == "thesis":
        return root / "index.html"
    return root / f"chapter-{sets[0].chapter}.html"


def stored_results(root: pathlib.Path) -> List[Dict[str, Any]]:
    """Every set's ``result.json`` under `root`, in the dissertation's order."""
    got = []
    for s in SETS:
        f = root / f"fig-{s.name}" / "result.json"
        if f.exists():
            r = json.loads(f.read_text())
            lx = root / f"fig-{s.name}" / "linux" / "result.json"
            if lx.exists():
                r["on_linux"] = json.loads(lx.read_text())
                # Analysed by other code than the simulator's result beside it: shown, marked, not
                # counted (a run without --linux does not redo the Linux leg).
                r["on_linux"]["stale"] = r["on_linux"].get("version") != r.get("version")
            got.append(r)
    return got


def checks_of(results: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Every check of the results, the Linux engine's (named "Linux: ...") after each set's own."""
    return [c for r in results for c in list(r["checks"])
            + ([] if r.get("on_linux", {}).get("stale", True) else list(r["on_linux"]["checks"]))]


# --- pages ---------------------------------------------------------------------------------------

def _esc(x: Any) -> str:
    return html.escape(str(x))


def _checks_table(checks: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{_esc(c['name'])}</td><td>{_esc(c['expected'])}</td><td>{_esc(c['ours'])}</td>"
        f"<td class=\"{check_status(c).lower()}\">{check_status(c)}</td><td class=\"muted\">{_esc(c.get('note', ''))}</td></tr>"
        for c in checks)
    return ("<table><tr><th>check</th><th>expected (dissertation; tolerance)</th><th>ours</th><th></th><th>note</th></tr>"
            f"{rows}</table>")


def _minutes(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


def _linux_html(r: Mapping[str, Any], root: pathlib.Path) -> str:
    """The Linux testbed's counterpart of a set: its tally and a link when it is stored beside
    `root` (``out/reproductions/NAME``), else the command that runs it."""
    name = r.get("linux")
    if not name:
        return ""
    f = root.parent / name / "reproduction.json"
    if not f.exists():
        return (f'<p><b>On real Linux:</b> not run here yet: <code>sudo macroflow reproduce {_esc(name)}</code> runs the same '
                f"scenarios on kernel TCP in network namespaces (root; real time).</p>")
    rep = json.loads(f.read_text())
    st = [check_status(c) for c in rep["checks"]]
    cls = "fail" if "FAIL" in st else "pass"
    return (f'<p><b>On real Linux</b> (<a href="../{_esc(name)}/report.html">{_esc(name)}</a>, {rep.get("seeds")} seed(s), '
            f'{rep.get("duration_s")} s per run): <span class="{cls}">{_esc(tally(rep["checks"]))}</span>.</p>')


def _set_html(r: Mapping[str, Any], root: Optional[pathlib.Path] = None) -> str:
    figs = ", ".join(r["captions"])
    out = [f'<h2 id="fig-{_esc(r["name"])}">Fig{"s" if len(r["captions"]) > 1 else ""}. {_esc(figs)}</h2>']
    out.append("<dl>" + "".join(f"<dt>Figure {_esc(f)}</dt><dd><i>{_esc(c)}</i></dd>" for f, c in r["captions"].items()) + "</dl>")
    out.append(f"<p><b>The dissertation:</b> {_esc(r['claim'])}</p>")
    out.append(f"<p><b>Setting:</b> {_esc(r['setting'])} <span class=\"muted\">Scenario file: scenarios/{_esc(r['base'])}; "
               f"run: <code>macroflow reproduce {_esc(r['reproduction'])}</code>. The dissertation's environment: "
               f"{_esc(r['environment'])}.</span></p>")
    cost = r.get("cost", {})
    out.append(f'<p class="verdict {"fail" if any(check_status(c) == "FAIL" for c in r["checks"]) else "pass"}">'
               f"{_esc(tally(r['checks']))}</p>")
    out.append(_checks_table(r["checks"]))
    if root is not None:
        out.append(_linux_html(r, root))
    lx = r.get("on_linux")
    if lx:
        out.append(f'<h3>The same runs on real Linux (network namespaces: kernel TCP, or the simulator\'s media controllers over real UDP coupled by macroflowd; {lx["seeds"]} seed'
                   f'{"s" if lx["seeds"] != 1 else ""} per point)</h3>')
        if lx.get("stale"):
            out.append('<p class="warn">Analysed by older code than the simulator\'s result above (its checks are not '
                       f'counted): <code>sudo macroflow reproduce {_esc(r["reproduction"])} --linux</code> runs it again.</p>')
        out.append(f'<p class="verdict {"fail" if any(check_status(c) == "FAIL" for c in lx["checks"]) else "pass"}">'
                   f"{_esc(tally(lx['checks']))}</p>")
        out.append(_checks_table(lx["checks"]))
        for note in lx.get("notes", []):
            out.append(f'<p class="note">{_esc(note)}</p>')
        for f in lx["figures"]:
            out.append(f'<figure><img alt="{_esc(f["what"])}" src="{f["png"]}"><figcaption class="muted">Ours on real Linux, for '
                       f'Figure {_esc(f["fig"])}: {_esc(f["what"])}</figcaption></figure>')
    elif r.get("on_linux_available"):
        out.append('<p class="muted">This set also runs on real Linux: <code>sudo macroflow reproduce '
                   f'{_esc(r["reproduction"])} --linux</code>.</p>')
    for note in r.get("notes", []):
        out.append(f'<p class="note">{_esc(note)}</p>')
    if r.get("table"):
        t = r["table"]
        head = "".join(f"<th>{_esc(h)}</th>" for h in t["columns"])
        body = "".join("<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in row) + "</tr>" for row in t["rows"])
        out.append(f"<p><b>{_esc(t.get('title', ''))}</b></p><table><tr>{head}</tr>{body}</table>")
    for f in r["figures"]:
        out.append(f'<figure><img alt="{_esc(f["what"])}" src="{f["png"]}"><figcaption class="muted">Ours, for '
                   f'Figure {_esc(f["fig"])} ("{_esc(f["caption"])}"): {_esc(f["what"])}</figcaption></figure>')
    out.append(f'<p class="muted">{len(r["runs"])} runs ({r["seeds"]} seed{"s" if r["seeds"] != 1 else ""} per point); '
               f'computing them took {_minutes(cost.get("compute_s", 0.0))} of wall time on this machine '
               f'({cost.get("computed_runs", 0)} runs computed, the rest reused), the analysis {_minutes(cost.get("analysis_s", 0.0))}.</p>')
    return "\n".join(out)


_CSS_EXTRA = ".note{border-left:3px solid #c90;padding-left:.6em}dl{font-size:.9em}dd{margin-bottom:.3em}"


def _page(title: str, body: List[str]) -> str:
    from macroflow.reports import _CSS

    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{_esc(title)}</title><style>{_CSS}{_CSS_EXTRA}</style></head><body>\n" + "\n".join(body)
            + '\n<p class="muted">Written by macroflow (macroflow reproduce thesis).</p></body></html>\n')


def _write(path: pathlib.Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(text)
    tmp.replace(path)


def _short(s: FigureSet) -> str:
    if s.summary:
        return s.summary
    return s.claim if len(s.claim) <= 240 else s.claim[:240].rsplit(" ", 1)[0] + " ..."


def write_pages(root: pathlib.Path) -> List[pathlib.Path]:
    """The index page and one page per chapter from the results stored under `root`; also
    ``root/reproduction.json`` with every check (what ``print_checks`` reads)."""
    results = stored_results(root)
    written = []
    by_ch: Dict[int, List[Mapping[str, Any]]] = {}
    for r in results:
        by_ch.setdefault(r["chapter"], []).append(r)
    for ch, rs in sorted(by_ch.items()):
        body = [f'<p><a href="index.html">Index</a></p><h1>Seed 003, chapter {ch}: {_esc(CHAPTERS.get(ch, ""))}</h1>',
                f'<p class="verdict {"fail" if any(check_status(c) == "FAIL" for c in checks_of(rs)) else "pass"}">'
                f"{_esc(tally(checks_of(rs)))}</p>"]
        body += [_set_html(r, root) for r in rs]
        p = root / f"chapter-{ch}.html"
        _write(p, _page(f"Seed 003 chapter {ch}", body))
        written.append(p)
    rows = []
    for s in SETS:
        r = next((x for x in results if x["name"] == s.name), None)
        if r is None:
            rows.append(f"<tr><td>{_esc(', '.join(s.figures))}</td><td>{s.chapter}</td><td class=\"muted\">{_esc(_short(s))}</td>"
                        f"<td colspan=3 class=\"muted\">not run yet "
                        f"(<code>macroflow reproduce {_esc(s.reproduction)}</code>)</td></tr>")
            continue
        st = [check_status(c) for c in checks_of([r])]
        cls = "fail" if "FAIL" in st else "pass"
        lx = r.get("on_linux")
        text = tally(r["checks"]) + (f"; on Linux{' (stale, not counted)' if lx['stale'] else ''}: {tally(lx['checks'])}"
                                     if lx else "")
        rows.append(f'<tr><td><a href="chapter-{s.chapter}.html#fig-{_esc(s.name)}">{_esc(", ".join(s.figures))}</a></td>'
                    f"<td>{s.chapter}</td><td class=\"muted\">{_esc(_short(s))}</td><td class=\"{cls}\">{_esc(text)}</td>"
                    f"<td class=\"num\">{_minutes(r.get('cost', {}).get('compute_s', 0.0))}"
                    + (f" + {_minutes(lx.get('cost', {}).get('compute_s', 0.0))} on Linux" if lx else "") + "</td>"
                    f"<td>{_esc(r['environment'])}</td></tr>")
    cost_rows = "".join(
        f"<tr><td><a href=\"chapter-{ch}.html\">{ch}</a></td><td class=\"num\">{sum(len(r['runs']) for r in rs)}</td>"
        f"<td class=\"num\">{_minutes(sum(r.get('cost', {}).get('compute_s', 0.0) for r in rs))}</td>"
        f"<td class=\"num\">{_minutes(sum(r.get('cost', {}).get('last_s', 0.0) for r in rs))}</td></tr>"
        for ch, rs in sorted(by_ch.items()))
    allc = checks_of(results)
    body = ["<h1>Seed 003 reproduced, figure by figure</h1>",
            f"<p><b>Source:</b> {_esc(SOURCE)}. Each figure's caption and the dissertation's words are quoted on its chapter "
            "page beside our figure (drawn with the same axes and series) and the checks. Figures whose numbers the text does "
            "not give are checked on the direction or relation it states, with the tolerance written beside the check and chosen "
            "before our result was seen. Every disagreement has its explanation beside it.</p>",
            f'<p class="verdict {"fail" if any(check_status(c) == "FAIL" for c in allc) else "pass"}">{_esc(tally(allc))}</p>',
            "<table><tr><th>figures</th><th>chapter</th><th>what must hold</th><th>checks</th><th>compute</th><th>dissertation's environment</th></tr>"
            + "".join(rows) + "</table>",
            "<h2>Cost per chapter (this machine)</h2><table><tr><th>chapter</th><th>runs</th><th>computing the simulator's runs</th>"
            f"<th>last invocation (reused runs cost nothing)</th></tr>{cost_rows}</table>"]
    p = root / "index.html"
    _write(p, _page("Seed 003 reproduced", body))
    written.append(p)
    write_json_atomic(root / "reproduction.json", {"name": "thesis", "title": "Seed 003 reproduced, figure by figure",
                                                   "checks": allc})
    return written


# --- helpers for the analyses --------------------------------------------------------------------

def mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def tables_of(run: Mapping[str, Any]) -> Dict[str, Any]:
    return load_results(run["path"])


def loads(run: Mapping[str, Any]) -> Dict[str, Any]:
    """The stored run's tables (Arrow), as :func:`macroflow.results.load_results` gives them."""
    return load_results(run["path"])


def new_figure(w: float = 5.0, h: float = 3.2) -> Tuple[Any, Any]:
    """A matplotlib figure and axes of the size the chapter pages use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(w, h), dpi=110)
    return fig, ax


def draw_arms(ax: Any, series: Mapping[str, Mapping[float, Sequence[float]]], xlabel: str, ylabel: str,
              styles: Optional[Mapping[str, str]] = None) -> None:
    """Draws one line per arm the way the dissertation draws its sweeps: x (number of flows,
    queue length, priority ratio, ...) against the mean over runs, with the min-max over runs as
    a band (invisible when every run agrees). `series`: arm label -> {x: [one value per run]}."""
    markers = "osD^vx+*"
    for i, (label, pts) in enumerate(series.items()):
        xs = sorted(pts)
        ys = [mean(pts[x]) for x in xs]
        lo = [min((v for v in pts[x] if v is not None and not math.isnan(v)), default=float("nan")) for x in xs]
        hi = [max((v for v in pts[x] if v is not None and not math.isnan(v)), default=float("nan")) for x in xs]
        style = (styles or {}).get(label, "-")
        line, = ax.plot(xs, ys, style, marker=markers[i % len(markers)], label=label, ms=4)
        if any(h > l for l, h in zip(lo, hi)):
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.18, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
