"""The kernel port's C core (bpf/ccc_core.h, issue 16) against crates/coupling's ctrlTCP.

The C core is the one deliberate second implementation of ctrlTCP: the BPF congestion control
compiles it, and here its userspace build (bpf/ccc_vectors_check.c) runs the test vectors
`coupling::tcp::vectors` cuts from TcpCccInt (the integer window mode: whole packets, priorities
in units of 2^-16) and must print every op's answer and the group's state after it exactly as
the Rust did. The vectors are thousands of random, plausible TCP lives (bpf/README.md).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from macroflow import _native

BPF = pathlib.Path(__file__).resolve().parent.parent / "bpf"


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang): the C core cannot be built")
    exe = tmp_path_factory.mktemp("ccc") / "ccc_vectors_check"
    p = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", str(BPF), str(BPF / "ccc_vectors_check.c"),
                        "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return exe


def _check(exe: pathlib.Path, text: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe)], input=text, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_c_core_reproduces_every_vector(checker: pathlib.Path, seed: int) -> None:
    text = _native._ccc_vectors(seed, 1000, 300)
    p = _check(checker, text)
    assert p.returncode == 0, p.stderr[-3000:]
    ops = sum(1 for line in text.splitlines() if " = " in line)
    assert ops == 300_000
    assert f"{ops} agree, 0 differ" in p.stderr, p.stderr[-1000:]
    assert p.stdout.splitlines() == [line for line in text.splitlines() if not line.startswith("#")] or p.stdout == text


def test_a_wrong_expectation_is_caught(checker: pathlib.Path) -> None:
    """The check can fail: one number changed in one answer, or in one snapshot, is reported with
    its vector and line."""
    lines = _native._ccc_vectors(5, 20, 100).splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("U ") and " = none " not in line and " = ERR " not in line and i > 200)
    op, rest = lines[k].split(" = ", 1)
    answer, snap = rest.split(" | ", 1)
    for bad in (f"{op} = {int(answer.split()[0]) + 1} {answer.split()[1]} | {snap}",
                f"{op} = {answer} | {int(snap.split()[0]) + 1} {snap.split(' ', 1)[1]}"):
        p = _check(checker, "\n".join(lines[:k] + [bad] + lines[k + 1:]) + "\n")
        assert p.returncode != 0
        assert f"line {k + 1} differs" in p.stderr, p.stderr[-1000:]


def test_a_malformed_vector_is_an_error(checker: pathlib.Path) -> None:
    p = _check(checker, "vector 0 handover 0\nQ 1 2 = ok | 0 0 - - 0 0\nend\n")
    assert p.returncode != 0 and p.stderr.strip()


def test_the_hand_worked_vectors(checker: pathlib.Path) -> None:
    """Unit tests of ccc.rs redone by hand in integer arithmetic (bpf/ccc_vectors_hand.txt)."""
    p = _check(checker, (BPF / "ccc_vectors_hand.txt").read_text())
    assert p.returncode == 0, p.stderr[-3000:]
    assert " 0 differ" in p.stderr


def test_the_core_compiles_for_bpf_without_library_calls(tmp_path: pathlib.Path) -> None:
    """The same header builds for the BPF target with no call out of it (BPF has no libgcc: a
    128-bit multiply or divide would be an undefined __multi3 or __udivti3)."""
    clang = shutil.which("clang")
    if clang is None:
        pytest.skip("clang is absent (`make deps` installs Debian's clang): the BPF build of the core is not checked")
    obj = tmp_path / "ccc_bpf.o"
    p = subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-c", str(BPF / "ccc_bpf_compile_test.c"), "-o", str(obj)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    und = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout.split()
    assert und == [], und


def test_the_multiply_divide_is_exact(checker: pathlib.Path) -> None:
    """ccc_muldiv_small (branch-free Knuth D, so the verifier walks it once) against 128-bit
    arithmetic: random divisors of every width with full-width factors, and every pair of edge
    values (2^32 +- 1, 2^47, 2^63, 2^64 - 1, ...)."""
    p = subprocess.run([str(checker), "-m", "2000000"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "cases, 0 differ" in p.stderr
