"""Sweeps: planning and its errors, the local pool, resuming after kill -9, Ray equal to the pool."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

import macroflow
from macroflow.results import list_runs, run_to_store
from macroflow.scenario import ScenarioError, load, run
from macroflow.sweeps import SweepError, parse_setting, plan, plan_file, set_path, sweep

ROOT = pathlib.Path(__file__).resolve().parent.parent
FILE = ROOT / "scenarios" / "coupled_vs_uncoupled_dumbbell.toml"


def _store_bytes(store):
    """Every stored file of every run, by run key: equal stores are byte-identical."""
    out = {}
    for r in list_runs(store):
        d = pathlib.Path(r["path"])
        out[r["key"]] = {f.name: f.read_bytes() for f in sorted(d.iterdir())}
    return out


def test_settings_parse_as_toml_values():
    assert parse_setting("topology.queue_pkts=40,83") == ("topology.queue_pkts", [40, 83])
    assert parse_setting("groups.0.kind=ccc,etcp") == ("groups.0.kind", ["ccc", "etcp"])
    assert parse_setting("x=1e6, 0.5,true") == ("x", [1e6, 0.5, True])
    for bad in ("nokey", "=1", "k=", "k=1,,2"):
        with pytest.raises(SweepError):
            parse_setting(bad)


def test_set_path_copies_and_rejects_unknown_paths():
    d = {"a": {"b": 1}, "l": [{"x": 1}]}
    assert set_path(d, "l.0.x", 5) == {"a": {"b": 1}, "l": [{"x": 5}]}
    assert d["l"][0]["x"] == 1  # the original is unchanged
    assert set_path(d, "a.c", 2)["a"] == {"b": 1, "c": 2}  # validation decides if c is a field
    with pytest.raises(SweepError, match="l.3 is not an item"):
        set_path(d, "l.3.x", 1)
    with pytest.raises(SweepError, match="nope is not in the scenario"):
        set_path(d, "nope.x", 1)
    with pytest.raises(SweepError, match="a.b is a value"):
        set_path(d, "a.b.c", 1)


def test_an_invalid_point_stops_the_sweep_before_anything_runs(tmp_path):
    with pytest.raises(ScenarioError) as e:
        plan_file(FILE, ["topology.queue_pkts=40,-1"], seeds=2)
    assert "topology.queue_pkts=-1" in str(e.value) and "topology.queue_pkts:" in str(e.value)
    with pytest.raises(ScenarioError, match="topology.bogus: Extra inputs"):
        plan_file(FILE, ["topology.bogus=1"])
    with pytest.raises(SweepError, match="--seeds 0"):
        plan_file(FILE, [], seeds=0)
    with pytest.raises(SweepError, match="set twice"):
        plan({"seed": 1}, [("a", [1]), ("a", [2])])
    # The CLI exits 2 with the message and creates no store.
    out = tmp_path / "store"
    r = subprocess.run([sys.executable, "-m", "macroflow", "sweep", str(FILE), "--set", "groups.0.kind=ccc,bogus",
                        "--out", str(out), "-q"], capture_output=True, text=True)
    assert r.returncode == 2 and "groups.0.kind" in r.stderr and "bogus" in r.stderr
    assert not out.exists()


def test_plan_is_the_grid_times_the_seeds():
    sc, jobs, meta = plan_file(FILE, ["topology.queue_pkts=40,83", "groups.0.kind=ccc,etcp"], seeds=3, duration_s=2.0)
    assert len(jobs) == 12 and len({j.key for j in jobs}) == 12
    assert meta["grid"] == {"topology.queue_pkts": [40, 83], "groups.0.kind": ["ccc", "etcp"]}
    assert meta["seeds"] == [1, 2, 3]
    assert jobs[0].params == {"topology.queue_pkts": 40, "groups.0.kind": "ccc"}
    assert [j.scenario.seed for j in jobs[:3]] == [1, 2, 3]
    assert all(j.scenario.duration_s == 2.0 for j in jobs)


def test_progress_chunks_do_not_change_results():
    sc = load(FILE).model_copy(update={"duration_s": 5.0})
    seen = []
    a = run(sc, progress=seen.append)
    b = run(sc)
    assert seen[-1] == pytest.approx(5.0) and len(seen) >= 50 and seen == sorted(seen)
    for name in a:
        assert a[name].equals(b[name]), name


def test_pool_sweep_stores_every_run_once_and_resumes(tmp_path):
    calls = []
    paths = macroflow.sweep(FILE, {"topology.queue_pkts": [40, 83]}, seeds=2, out=tmp_path, workers=2, duration_s=4.0)
    assert len(paths) == 4 and all((p / "manifest.json").exists() for p in paths)
    runs = list_runs(tmp_path)
    assert sorted(r["params"]["topology.queue_pkts"] for r in runs) == [40, 40, 83, 83]
    assert all(r["summary"]["total_goodput_bps"] > 0 for r in runs)
    sw = json.loads((tmp_path / "sweep.json").read_text())
    assert len(sw["runs"]) == 4 and sw["grid"] == {"topology.queue_pkts": [40, 83]}
    # The same runs one by one give the same bytes.
    ref = tmp_path / "ref"
    for p in paths:
        m = json.loads((p / "manifest.json").read_text())
        run_to_store(load(FILE).model_validate(m["scenario"]), ref, params=m["params"])
    assert _store_bytes(ref) == _store_bytes(tmp_path)
    # Started again, nothing runs.
    _, jobs, _ = plan_file(FILE, ["topology.queue_pkts=40,83"], seeds=2, duration_s=4.0)
    sweep(jobs, tmp_path, workers=2, on_progress=calls.append)
    assert calls[-1].already == 4 and calls[-1].done == 0


def test_a_sweep_killed_with_sigkill_resumes_without_loss_or_duplicates(tmp_path):
    """kill -9 the CLI (and its workers) mid-sweep, start it again: only the missing runs run,
    and the store equals that of an uninterrupted sweep."""
    out = tmp_path / "killed"
    # 100 Mbit/s for 40 s: each run takes a noticeable fraction of a second.
    args = [sys.executable, "-m", "macroflow", "sweep", str(FILE), "--set", "topology.bottleneck_rate_bps=100e6",
            "--set", "topology.queue_pkts=100,200,400,800", "--seeds", "4", "--duration", "40", "--workers", "2",
            "--no-report", "-q", "--out"]
    proc = subprocess.Popen(args + [str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    # Stored runs only: pathlib's "*" also matches the hidden .partial-* directory a run is written
    # in before its rename, which the resumed sweep rightly discards and runs again.
    def stored() -> int:
        return sum(1 for m in out.glob("*/manifest.json") if not m.parent.name.startswith("."))

    while time.monotonic() < deadline and stored() < 2:
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = stored()
    assert 2 <= before < 16, f"killed too late to test anything: {before} runs stored"
    r = subprocess.run(args + [str(out)], capture_output=True, text=True, check=True)
    assert f"16 runs in {out}: {16 - before} run now, {before} already stored" in r.stdout
    assert not list(out.glob(".partial-*"))
    ref = tmp_path / "ref"
    subprocess.run(args + [str(ref)], capture_output=True, text=True, check=True)
    got, want = _store_bytes(out), _store_bytes(ref)
    assert len(want) == 16 and got == want
    for key in got:
        for f in got[key]:
            if f.endswith(".parquet"):
                pq.read_table(out / key / f)


def test_ray_gives_the_same_results_as_the_pool(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'macroflow[ray]')")
    _, jobs, meta = plan_file(FILE, ["topology.queue_pkts=40,83"], seeds=2, duration_s=4.0)
    sweep(jobs, tmp_path / "pool", workers=2, meta=meta)
    sweep(jobs, tmp_path / "ray", ray="local", meta=meta)  # starts and stops a private Ray instance
    assert not ray.is_initialized()
    pool, on_ray = _store_bytes(tmp_path / "pool"), _store_bytes(tmp_path / "ray")
    assert len(pool) == 4 and pool == on_ray


def test_ray_errors_are_clear(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed")
    _, jobs, _ = plan_file(FILE, [], duration_s=1.0)
    with pytest.raises(SweepError, match="--ray 127.0.0.1:1: cannot connect"):
        sweep(jobs, tmp_path, ray="127.0.0.1:1")


def test_a_worker_with_other_code_refuses_the_job():
    # The driver keys and finds runs by its code version; a worker running other code (rebuilt
    # since, or a Ray node with another build) would store runs the driver never finds.
    from macroflow.results import code_version
    from macroflow.sweeps import SweepError, _work

    with pytest.raises(SweepError, match="a worker runs code"):
        _work({}, {}, code_version() + "-other")


def test_code_version_covers_every_module_of_the_package(monkeypatch):
    import pathlib

    import macroflow.results as results

    assert results.code_version() == results._CODE_VERSION, "taken at import, not when first asked"
    assert results.code_version().startswith(results.__version__ + "+")
    before = results._fingerprint()
    real = pathlib.Path.read_bytes
    for name in ("firehose.py", "flowsim.py", "sim.py", "reproductions.py", "metrics.py"):
        # An edit of any module changes the fingerprint (flow-level parts reused stale checks).
        monkeypatch.setattr(pathlib.Path, "read_bytes", lambda p, n=name: real(p) + (b"#" if p.name == n else b""))
        assert results._fingerprint() != before, name
    monkeypatch.setattr(pathlib.Path, "read_bytes", real)
    assert results._fingerprint() == before
