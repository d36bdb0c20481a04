#!/usr/bin/env bash
# Install the peer simulators used by bench/peers:
#   * ns-3 Python bindings: PyPI package `ns3` (cppyy-based, `from ns import ns`), into the
#     project venv .venv when it exists, else into the current python3;
#   * ns-2: Debian package `ns2` (gives /usr/bin/ns).
# Idempotent: skips what is already there. Environment overrides:
#   NS3_SPEC   pip requirement for ns-3 (default: ns3==3.44.post0, the measured version;
#              set NS3_SPEC=ns3 for the newest)
#   PYTHON     interpreter to install ns3 into (default: .venv/bin/python, else python3)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NS3_SPEC="${NS3_SPEC:-ns3==3.44.post0}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then
        PYTHON="$REPO/.venv/bin/python"
    else
        PYTHON="$(command -v python3)"
    fi
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
APT_UPDATED=0
apt_install() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        $SUDO apt-get update -q
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$@"
}

# --- ns-2 -------------------------------------------------------------------------------
if command -v ns >/dev/null 2>&1 && dpkg-query -W ns2 >/dev/null 2>&1; then
    echo "ns-2 already installed: $(dpkg-query -W -f='${Version}' ns2)"
else
    apt_install ns2
fi

# --- ns-3 (PyPI) ------------------------------------------------------------------------
# pip builds cppyy / CPyCppyy from source, and cling parses the C++ standard headers at
# run time: both need a C++ compiler with libstdc++ headers.
if ! command -v g++ >/dev/null 2>&1; then
    apt_install g++
fi
if "$PYTHON" -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("ns3") else 1)' 2>/dev/null; then
    echo "ns3 already installed for $PYTHON: $("$PYTHON" -m pip show ns3 2>/dev/null | sed -n 's/^Version: //p')"
else
    echo "installing $NS3_SPEC into $PYTHON (about 70 MB download, ~400 MB installed)"
    "$PYTHON" -m pip install -q "$NS3_SPEC"
fi

# --- smoke check ------------------------------------------------------------------------
echo "ns-2: $(command -v ns)"
# (cppyy prints harmless "Failed to materialize symbols" lines on import: filtered out)
if ! out="$("$PYTHON" -c 'from ns import ns; print("ns-3 bindings import OK")' 2>&1)"; then
    echo "$out" | grep -v "Failed to materialize symbols" >&2
    echo "error: the ns-3 bindings do not import with $PYTHON" >&2
    exit 1
fi
echo "$out" | grep -v "Failed to materialize symbols"
