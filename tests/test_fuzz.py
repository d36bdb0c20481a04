"""Issue 13: the scenario-file and API fuzzers of tests/fuzzing.py, bounded for CI (the
10-minute runs are `make bench-fuzz`). Each runs in a child process, so a crash of the
interpreter is reported with the child's output instead of killing the test run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

EXAMPLES = int(os.environ.get("MACROFLOW_FUZZ_EXAMPLES", "300"))


@pytest.mark.parametrize("kind", ["scenarios", "api"])
def test_fuzzer_finds_nothing(kind: str) -> None:
    code = f"import sys; sys.path.insert(0, 'tests'); import fuzzing; fuzzing.limit_memory(); fuzzing.fuzz({kind!r}, {EXAMPLES}, 1)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
