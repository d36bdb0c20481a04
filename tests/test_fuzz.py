"""Issue 13: the scenario-file and API fuzzers of tests/fuzzing.py, bounded for CI (the
10-minute runs are `make bench-fuzz`). Each runs in a child process, so a crash of the
interpreter is reported with the child's output instead of killing the test run."""

from __future__ import annotations

import os

import pytest

import fuzzing

EXAMPLES = int(os.environ.get("MACROFLOW_FUZZ_EXAMPLES", "300"))


@pytest.mark.parametrize("kind", ["scenarios", "api"])
def test_fuzzer_finds_nothing(kind: str) -> None:
    p = fuzzing.run_in_child(kind, EXAMPLES, 1, timeout=900)
    assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
