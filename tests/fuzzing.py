"""Fuzzers for issue 13, shared by the bounded CI test (tests/test_fuzz.py) and the 10-minute
bench target (bench/fuzz.py, `make bench-fuzz`).

- Scenario files: the shipped scenarios mutated by hypothesis (a value replaced by one of many
  hostile ones, a key deleted or added, a table nested), and scenarios drawn from the scenario's
  JSON schema (`from_schema` of `scenario.json_schema()`: pydantic's for the models, with the
  queue spec schema the simulator generates from its Rust type), are validated and, when valid,
  run for a fraction of a second. Allowed outcomes: valid and run, or one of the package's errors
  (ScenarioError, SimulationError) naming the problem.
- The API: random calls, with hostile arguments, on every public method of the bindings
  (Simulation, Fse, FseGroup, TcpCoupler, TcpGroups, TcbCache, FlowModel). Allowed: a result, or
  the package's errors (all derive from ValueError), or Python's own calling-convention errors
  (TypeError for a wrong type or arity, OverflowError for an integer beyond 64 bits).

Anything else, a panic crossing into Python, or a crash of the interpreter, is a failure. So is
a hang: every example gets EXAMPLE_TIME_S of wall time, then a SIGALRM; a run that is merely long
(a big valid scenario) stops there like Ctrl-C stops it, and counts as fine, but one that does not
answer the signal within GRACE_S more is killed with a traceback of where it was. Run each fuzzer
in a child process (tests/test_fuzz.py, bench/fuzz.py) so a crash is reported instead of killing
the runner.
"""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import json
import math
import pathlib
import signal
import subprocess
import sys
import tempfile
try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]
from typing import Any, Callable, Iterator, List, Optional, Tuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE_TIME_S = 5.0
GRACE_S = 10.0


class Budget(Exception):
    """An example's wall time is up (raised from SIGALRM, as Ctrl-C raises KeyboardInterrupt)."""


def _alarm(signum: int, frame: Any) -> None:
    raise Budget()


@contextlib.contextmanager
def time_bound() -> Iterator[None]:
    """EXAMPLE_TIME_S of wall time, then Budget; no answer to it within GRACE_S: a traceback and
    exit (a hang)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    faulthandler.dump_traceback_later(EXAMPLE_TIME_S + GRACE_S, exit=True)
    signal.setitimer(signal.ITIMER_REAL, EXAMPLE_TIME_S)
    try:
        yield
    except Budget:
        pass  # long but interruptible: not a hang
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)

HOSTILE = st.one_of(
    st.sampled_from([0, -1, 1, 2, 2**31, 2**63, 2**64, -(2**63), 10**30, 0.0, -0.0, 1e-300, 5e-324, 1e300, 1e15, 1e18,
                     math.inf, -math.inf, math.nan, "", "x", "../../x", "\x00", "é", True, False, None, [], {}, [1, 2], {"kind": "drop_tail"}]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=8),
    st.lists(st.floats(allow_nan=True), max_size=3),
)


# Values of the right type at the edges of (or just past) what is valid: most examples then stay
# valid and reach the simulator, where the crashes were.
EXTREME_NUMBER = st.one_of(
    st.sampled_from([0, 1, 2, 3, 63, 64, 2047, 2048, 4096, 10**6, 1e-12, 1e-9, 1e-6, 0.001, 0.5, 0.999, 1.0, 1e6, 1e9,
                     1e12, 1e15, 1e16, 5e-324, 1e-300]),
    st.floats(min_value=1e-12, max_value=1e15),
    st.integers(min_value=0, max_value=5000),
)


def shipped() -> List[Tuple[str, dict]]:
    return [(p.name, tomllib.loads(p.read_text())) for p in sorted((ROOT / "scenarios").glob("*.toml"))]


def _slots(d: Any, path: Tuple = ()) -> Iterator[Tuple]:
    """Every place in a nested dict/list: (path to the container, key or index)."""
    if isinstance(d, dict):
        for k, v in d.items():
            yield path, k
            yield from _slots(v, path + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield path, i
            yield from _slots(v, path + (i,))


def _at(d: Any, path: Tuple) -> Any:
    for k in path:
        d = d[k]
    return d


@st.composite
def mutated_scenario(draw: Callable) -> dict:
    name, base = draw(st.sampled_from(shipped()))
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        slots = list(_slots(data))
        if not slots:
            break
        path, key = draw(st.sampled_from(slots))
        parent = _at(data, path)
        op = draw(st.sampled_from(["set", "set", "set", "delete", "add", "nest"]))
        if op == "set":
            old = parent[key]
            numeric = isinstance(old, (int, float)) and not isinstance(old, bool)
            # Copies: sampled_from hands out the same [] or {} each time, and a shared one could
            # end up inside itself.
            parent[key] = copy.deepcopy(draw(EXTREME_NUMBER) if numeric and draw(st.integers(0, 4)) else draw(HOSTILE))
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "kind", "inner", "queue", "priority", "pairs"]))] = copy.deepcopy(draw(HOSTILE))
        elif op == "nest":
            parent[key] = {"kind": "random_drop", "p": 0.1, "inner": parent[key]}
    return data


def check_scenario(data: dict) -> None:
    """One scenario example: validated, and if valid run briefly; only package errors allowed (a
    caught panic, SimulationInternalError, is a bug: it fails the example)."""
    from macroflow._native import SimulationError, SimulationInternalError
    from macroflow.scenario import ScenarioError, run, validate, with_duration

    with time_bound():
        try:
            sc = validate(data, "fuzz")
            sc = with_duration(sc, min(sc.duration_s, 0.2))
            run(sc)
        except SimulationInternalError:  # a bug, a spin at one instant included
            raise
        except (ScenarioError, SimulationError):
            pass


# --- scenario files generated from the schema ---------------------------------------------------

def from_schema(schema: dict) -> Any:
    """A hypothesis strategy for the JSON-schema subset pydantic emits for the scenario models
    (`$ref`/`$defs`, `anyOf`/`oneOf`, `const`, `enum`, objects with `required` and
    `additionalProperties`, arrays with `items`/`prefixItems`/`minItems`/`maxItems`, bounded
    numbers, integers and strings with a `pattern`). hypothesis-jsonschema is the library for
    this, but its 0.23.1 (the latest) calls `many.more()`, gone from hypothesis' internals since,
    and fails on every object schema. Numbers are drawn mostly near their lower bound, sometimes
    at either bound or anywhere between, so most examples stay small enough to run."""
    defs: dict = {}
    todo = [schema]
    while todo:  # every `$defs`, wherever it is (names are unique)
        node = todo.pop()
        if isinstance(node, dict):
            defs.update(node.get("$defs", {}))
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    refs: dict = {}

    def number(node: dict, integer: bool) -> Any:
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum", node.get("exclusiveMaximum"))
        if integer:
            lo = -(2**63) if lo is None else int(lo) + (1 if "exclusiveMinimum" in node else 0)
            hi = 2**63 if hi is None else int(hi) - (1 if "exclusiveMaximum" in node else 0)
            near = st.integers(lo, min(hi, max(lo, 0) + 10))
            return st.one_of(near, near, st.sampled_from([lo, hi]), st.integers(lo, hi))
        lo_f = -1e18 if lo is None else float(lo)
        hi_f = 1e18 if hi is None else float(hi)
        whole = st.floats(lo_f, hi_f, allow_nan=False, allow_infinity=False,
                          exclude_min="exclusiveMinimum" in node, exclude_max="exclusiveMaximum" in node)
        near = st.floats(lo_f, min(hi_f, max(lo_f, 0.0) + 10.0), allow_nan=False,
                         exclude_min="exclusiveMinimum" in node)
        edges = [v for v in (lo_f, hi_f) if not (v == lo_f and "exclusiveMinimum" in node)
                 and not (v == hi_f and "exclusiveMaximum" in node)]
        return st.one_of(near, near, whole, *([st.sampled_from(edges)] if edges else []))

    def strat(node: dict) -> Any:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in refs:
                refs[name] = st.deferred(lambda: strat(defs[name]))
            return refs[name]
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        for key in ("anyOf", "oneOf"):
            if key in node:
                rest = {k: v for k, v in node.items() if k != key}
                if "properties" in rest:  # an object whose alternatives each add required keys
                    return st.one_of([strat({**rest, **x, "required": rest.get("required", []) + x.get("required", [])})
                                      for x in node[key]])
                return st.one_of([strat(x) for x in node[key]])
        t = node.get("type")
        if t == "object":
            props = node.get("properties", {})
            if not props:  # a free-form table: anything
                return st.dictionaries(st.text(max_size=8), HOSTILE, max_size=3)
            required = set(node.get("required", []))
            return st.fixed_dictionaries({k: strat(v) for k, v in props.items() if k in required},
                                         optional={k: strat(v) for k, v in props.items() if k not in required})
        if t == "array":
            if "prefixItems" in node:
                return st.tuples(*[strat(x) for x in node["prefixItems"]]).map(list)
            lo = node.get("minItems", 0)
            return st.lists(strat(node.get("items", {})), min_size=lo, max_size=min(node.get("maxItems", lo + 4), lo + 4))
        if t == "integer":
            return number(node, True)
        if t == "number":
            return number(node, False)
        if t == "string":
            if "pattern" in node:
                return st.from_regex(node["pattern"], fullmatch=True)
            return st.text(min_size=node.get("minLength", 0), max_size=max(node.get("minLength", 0), 12))
        if t == "boolean":
            return st.booleans()
        if t == "null":
            return st.none()
        return HOSTILE

    return strat(schema)


def queue_spec_schema() -> dict:
    """The queue spec's JSON Schema, generated by the simulator from its Rust type."""
    from macroflow._native import QUEUE_SPEC_SCHEMA
    return json.loads(QUEUE_SPEC_SCHEMA)


def _queue_specs() -> List[dict]:
    """Valid specs of every kind: the schema's examples (one per kind)."""
    return queue_spec_schema()["examples"]


def queue_specs() -> Any:
    """Queue specs drawn from the schema (every kind and key, nested, values within the schema's
    bounds, mostly valid), its examples, or hostile dicts."""
    return st.one_of(from_schema(queue_spec_schema()), st.sampled_from(_queue_specs()).map(copy.deepcopy),
                     st.dictionaries(st.sampled_from(["kind", "limit_pkts", "inner", "p", "classes"]), HOSTILE, max_size=3))


@st.composite
def schema_scenario(draw: Callable) -> dict:
    from macroflow.scenario import json_schema
    return draw(from_schema(json_schema()))


# --- the API ------------------------------------------------------------------------------------

def _targets() -> List[Tuple[str, Callable[[], Any]]]:
    import macroflow._native as n

    def sim() -> Any:
        s = n.Simulation(seed=1)
        d = s.dumbbell(2)
        s.add_tcp_flow(d["senders"][0], d["receivers"][0])
        return s

    def model() -> Any:
        return n.FlowModel([("a", "b", 1.0), ("b", "c", 2.0), ("c", "a", 1.0)], [("a", "c"), ("b", "a")])

    out = [("Simulation", lambda: n.Simulation(seed=1)), ("Simulation (running)", sim),
           ("Fse", lambda: n.Fse()), ("TcpGroups", lambda: n.TcpGroups()), ("TcbCache", lambda: n.TcbCache())]
    if hasattr(n, "FseGroup"):
        out.append(("FseGroup", lambda: n.FseGroup("passive")))
    if hasattr(n, "TcpCoupler"):
        out.append(("TcpCoupler", lambda: n.TcpCoupler("ccc")))
    out.append(("FlowModel", model))
    return out


def _methods(obj: Any) -> List[str]:
    return sorted(m for m in dir(obj) if not m.startswith("_"))


ARG = st.one_of(HOSTILE, st.integers(0, 5), st.floats(0, 10), st.sampled_from(["a", "b", "newreno", "ccc", "passive", "cbr"]),
                queue_specs())


#: Keyword names the bindings take (from their signatures), so every parameter can be reached,
#: the 7th positional of add_media_flow (fps) as well as the first.
KEYWORDS = ["fps", "initial_cwnd_pkts", "rate_bps", "load_bps", "queue", "queue_pkts", "queue_bytes", "pairs",
            "hops", "start_s", "end_s", "size_bytes", "priority", "interval_s", "links", "trace_file", "source",
            "controller", "kind", "cc", "mss", "pauses", "packet_bytes", "max_burst_pkts", "epsilon",
            "max_iterations", "k", "alpha", "mmf", "demands", "tol", "now_ns", "timeout_s", "until_s"]


@st.composite
def api_calls(draw: Callable) -> Tuple[int, List[Tuple[str, list, dict]]]:
    target = draw(st.integers(0, len(_targets()) - 1))
    calls = []
    for _ in range(draw(st.integers(1, 8))):
        calls.append((draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=1)),
                      draw(st.lists(ARG, max_size=8)),
                      draw(st.dictionaries(st.sampled_from(KEYWORDS), ARG, max_size=3))))
    return target, calls


def check_api(example: Tuple[int, List[Tuple[str, list, dict]]]) -> None:
    """A sequence of calls on one fresh object: each method picked by its first letter's rank."""
    target, calls = example
    name, make = _targets()[target]
    obj = make()
    methods = _methods(obj)
    with time_bound():
        _calls(name, obj, methods, calls)


def _calls(name: str, obj: Any, methods: List[str], calls: List[Tuple[str, list, dict]]) -> None:
    from macroflow._native import CouplingInternalError, FlowModelInternalError, SimulationInternalError

    internal = (SimulationInternalError, CouplingInternalError, FlowModelInternalError)
    for pick, args, kwargs in calls:
        m = methods[(ord(pick) - ord("a")) % len(methods)]
        try:
            attr = getattr(obj, m)  # a getter runs here
            if callable(attr):
                attr(*args, **kwargs)
        except internal as e:  # a caught panic: a bug
            raise AssertionError(f"{name}.{m}{tuple(args)} raised {type(e).__name__}: {e}") from None
        except (ValueError, TypeError, OverflowError):
            pass  # the package's errors derive from ValueError; the others are Python's calling convention
        except Budget:
            raise
        except BaseException as e:  # a PanicException derives from BaseException
            raise AssertionError(f"{name}.{m}{tuple(args)} raised {type(e).__module__}.{type(e).__name__}: {e}") from None
    # The dunders too (a panic in __repr__ would close an object without an error): repr, len, in.
    for probe, what in ((repr, "repr"), (len, "len"), (lambda o: 1 in o, "in")):
        try:
            probe(obj)
        except internal as e:
            raise AssertionError(f"{what}({name}) raised {type(e).__name__}: {e}") from None
        except (ValueError, TypeError, OverflowError):
            pass  # no len() or `in` (TypeError), or a closed object's refusal
        except Budget:
            raise
        except BaseException as e:
            raise AssertionError(f"{what}({name}) raised {type(e).__module__}.{type(e).__name__}: {e}") from None


def run_in_child(kind: str, examples: int, seed: int, timeout: Optional[float] = None) -> "subprocess.CompletedProcess[str]":
    """One round of `fuzz` in a child process, under the memory limit, in a scratch directory:
    the API fuzzer calls `capture(link, path)` with whatever path it drew, and those files must
    not land in the repository."""
    tests = str(pathlib.Path(__file__).resolve().parent)
    code = (f"import sys; sys.path.insert(0, {tests!r}); import fuzzing; fuzzing.limit_memory(); "
            f"fuzzing.fuzz({kind!r}, {examples}, {seed})")
    with tempfile.TemporaryDirectory(prefix="macroflow-fuzz-") as scratch:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=scratch)


def limit_memory(limit_bytes: int = 3 << 30) -> None:
    """In the fuzzing child: an address-space limit, so an unbounded allocation fails there (and
    is reported) instead of exhausting the machine."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def fuzz(kind: str, examples: int, seed: int) -> None:
    """Runs `examples` hypothesis examples of one fuzzer, deterministic given `seed` (raises on the
    first failure, shrunk)."""
    if kind == "scenarios":
        # Half mutations of the shipped files (mostly valid: they reach the simulator), half
        # drawn from the schema (every field and variant, in combinations no file has).
        strat, check = st.one_of(mutated_scenario(), schema_scenario()), check_scenario
    else:
        strat, check = api_calls(), check_api

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strat)
    def prop(x: Any) -> None:
        check(x)

    from hypothesis import seed as hypothesis_seed
    hypothesis_seed(seed)(prop)()
