"""The CLI and the results store."""

import json
import pathlib
import subprocess
import sys

from macroflow.results import load_results, run_key, run_to_store
from macroflow.scenario import load

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scenarios" / "coupled_vs_uncoupled_dumbbell.toml"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "macroflow", *args], capture_output=True, text=True, cwd=cwd)


def test_run_stores_parquet_with_a_manifest_and_does_not_repeat(tmp_path):
    sc = load(EXAMPLE).model_copy(update={"duration_s": 5.0})
    a = run_to_store(sc, tmp_path)
    assert a.name == run_key(sc)
    manifest = json.loads((a / "manifest.json").read_text())
    assert set(manifest["tables"]) >= {"flows", "links", "media_flows"}
    t = load_results(a)
    assert t["flows"].num_rows == 2
    mtime = (a / "manifest.json").stat().st_mtime_ns
    assert run_to_store(sc, tmp_path) == a and (a / "manifest.json").stat().st_mtime_ns == mtime
    other = sc.model_copy(update={"seed": 2})
    assert run_key(other) != run_key(sc)
    assert not list(tmp_path.glob(".partial-*")), "no half-written results left"


def test_a_rebuilt_engine_does_not_reuse_stored_runs(tmp_path, monkeypatch):
    import macroflow.results as results

    sc = load(EXAMPLE).model_copy(update={"duration_s": 2.0})
    version = results.code_version()
    assert version.startswith(results.__version__ + "+"), version
    a = run_to_store(sc, tmp_path)
    assert json.loads((a / "manifest.json").read_text())["version"] == version
    # Another build of the same package version: a new key, so the run is computed again.
    monkeypatch.setattr(results, "code_version", lambda: version + "-rebuilt")
    b = run_to_store(sc, tmp_path)
    assert b != a and (b / "manifest.json").exists()


def test_cli_run_list_help_and_errors(tmp_path):
    r = cli("run", str(EXAMPLE), "--out", str(tmp_path), "--duration", "3")
    assert r.returncode == 0, r.stderr
    assert "goodput" in r.stdout and "media/nada" in r.stdout
    # One run (and the store's lock file, .store.lock).
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nduration_s = -1\n[topology]\npairs = 1\n[[flows]]\ntype = "tcp"\npair = 0\n')
    r = cli("run", str(bad))
    assert r.returncode == 2 and "duration_s" in r.stderr and "bad.toml" in r.stderr
    r = cli("list")
    assert "scenarios/coupled_vs_uncoupled_dumbbell.toml" in r.stdout
    # The queue kinds, from the simulator's registry, each with its keys from the schema.
    from macroflow import QUEUE_KINDS
    for kind in QUEUE_KINDS:
        assert f"\n  {kind}: " in r.stdout, r.stdout
    assert "  red: limit_pkts | limit_bytes, [gentle=true], [max_p=0.1]" in r.stdout, r.stdout
    # A shipped scenario by its name, from a directory without one (outside a checkout).
    r = subprocess.run([sys.executable, "-m", "macroflow", "run", "scenarios/red_queue.toml", "--out", str(tmp_path / "o"),
                        "--duration", "1", "-q"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = cli("run", "--help")
    assert r.returncode == 0 and "scenario file" in r.stdout
