"""The public surface: exports, the type stub matching the native module, and picklable errors."""

import ast
import inspect
import pathlib
import pickle

import pytest

import macroflow as mf
from macroflow import _native

STUB = pathlib.Path(mf.__file__).with_name("_native.pyi")
# Type aliases defined only in the stub.
STUB_ONLY = {"FseAlgorithm", "CouplerKind", "TcpState", "Address", "FiveTuple", "FlowResult",
             "FseGroupSpec", "WindowState", "FseFlowInfo", "FseGroupInfo", "FsePush", "FseRegistered",
             "FseRegisteredWindow"}


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_classes():
    return {n.name: n for n in stub_tree().body if isinstance(n, ast.ClassDef) and n.name not in STUB_ONLY}


def test_package_reexports_everything_public():
    public = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    import macroflow.reports, macroflow.reproductions, macroflow.sweeps  # noqa: F401, E401 (must not shadow the API)

    workflow = {"run", "sweep", "reproduce", "report", "load_results"}  # macroflow.api
    assert set(mf.__all__) == public | workflow
    for name in public:
        assert getattr(mf, name) is getattr(_native, name)
    for name in workflow:
        assert getattr(mf, name) is getattr(mf.api, name) and getattr(mf, name).__doc__


def test_py_typed_marker_exists():
    assert STUB.with_name("py.typed").exists()


def test_stub_names_match_the_module():
    names = set()
    for node in stub_tree().body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    runtime = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    assert names - STUB_ONLY == runtime


@pytest.mark.parametrize("name", sorted(stub_classes()))
def test_stub_class_members_match(name):
    node = stub_classes()[name]
    cls = getattr(_native, name)
    stub_members = {
        n.name: n
        for n in node.body
        if isinstance(n, ast.FunctionDef) and (not n.name.startswith("_") or n.name in DUNDERS)
    }
    if issubclass(cls, BaseException):
        assert not stub_members
        bases = [b.id for b in node.bases]
        assert [b.__name__ for b in cls.__bases__] == bases
        return
    runtime = {
        n for n in dir(cls) if not n.startswith("_") or (n in DUNDERS and n in vars(cls))
    }
    stub_names = set(stub_members) - {"__init__"}
    assert stub_names == runtime, f"stub {sorted(stub_names)} vs runtime {sorted(runtime)}"
    for mname, fn in stub_members.items():
        is_property = any(
            isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list
        )
        if mname == "__init__":
            target = cls
        else:
            target = getattr(cls, mname)
            assert is_property == isinstance(target, property) or is_property == (
                type(target).__name__ == "getset_descriptor"
            ), mname
            if is_property or mname.startswith("__"):
                continue  # slot wrappers have CPython's own parameter names
        stub_params = [a.arg for a in fn.args.args + fn.args.kwonlyargs if a.arg != "self"]
        try:
            sig = inspect.signature(target)
        except (ValueError, TypeError):
            continue
        runtime_params = [p for p in sig.parameters if p != "self"]
        assert stub_params == runtime_params, f"{name}.{mname}"
        # Defaults too (issue 14: stubs checked against the bindings), where both sides state a
        # literal (PyO3 shows a default it cannot print as `...`).
        args = fn.args.args + fn.args.kwonlyargs
        defaults = dict(zip([a.arg for a in fn.args.args][len(fn.args.args) - len(fn.args.defaults):], fn.args.defaults))
        defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None})
        for a in args:
            if a.arg == "self" or a.arg not in defaults:
                continue
            try:
                stub_default = ast.literal_eval(defaults[a.arg])
            except ValueError:
                continue
            rt = sig.parameters[a.arg].default
            if rt is inspect.Parameter.empty or rt is Ellipsis:
                continue
            assert stub_default == rt and type(stub_default) is type(rt), \
                f"{name}.{mname}({a.arg}=...): stub {stub_default!r}, bindings {rt!r}"


DUNDERS = {"__init__", "__len__", "__contains__"}


@pytest.mark.parametrize(
    "exc",
    [
        mf.CouplingError,
        mf.InvalidValueError,
        mf.UnknownFlowError,
        mf.DuplicateFlowError,
        mf.UnknownGroupError,
        mf.GroupNotEmptyError,
        mf.MissingInputError,
        mf.TimeWentBackwardsError,
        mf.UnsupportedError,
    ],
)
def test_errors_pickle_and_keep_their_message(exc):
    e = pickle.loads(pickle.dumps(exc("some message")))
    assert type(e) is exc
    assert str(e) == "some message"


def test_raised_errors_pickle():
    g = mf.FseGroup("active")
    with pytest.raises(mf.UnknownFlowError) as info:
        g.leave(3)
    e = pickle.loads(pickle.dumps(info.value))
    assert type(e) is mf.UnknownFlowError and str(e) == "unknown flow #3"


def test_constants():
    assert mf.FSE_ALGORITHMS == ("active", "conservative_active", "simple_passive", "passive")
    assert mf.TCP_COUPLER_KINDS == ("ccc", "ccc_handover", "ccc_int", "ccc_handover_int", "etcp", "efcm")
    assert mf.TCP_STATES == ("SS", "CA", "FR")
    for a in mf.FSE_ALGORITHMS:
        assert mf.FseGroup(a).algorithm == a
    for k in mf.TCP_COUPLER_KINDS:
        assert mf.TcpCoupler(k).name == k


def test_value_classes_cannot_be_built_or_changed_from_python():
    for cls in (mf.FlowView, mf.Outcome, mf.Response, mf.Release, mf.ConnView, mf.TcbInit):
        with pytest.raises(TypeError):
            cls()
    r = mf.TcpCoupler().register(1, 1.0, 10.0, 20.0)
    with pytest.raises(AttributeError):
        r.cwnd_pkts = 1.0  # type: ignore[misc]
