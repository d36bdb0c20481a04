"""The client of ``macroflowd``: the Flow State Exchange (RFC 8699) and TCP-CCC as a daemon that
the flows of many processes register with over a Unix domain socket (``crates/fsed``, issue 21).

:class:`FseClient` wraps the Rust client (``fsed::client::Client``): one connection, one request
at a time, blocking, with the GIL released while it waits for the daemon. Typical use::

    from macroflow.fse_client import FseClient, FseError, spawn_daemon

    with spawn_daemon("/tmp/fse.sock"), FseClient("/tmp/fse.sock") as c:
        r = c.register_rate("wlan0 uplink", priority=1.0, initial_rate_bps=1e6, algorithm="active")
        c.subscribe(r["flow"])                           # pushes of this flow's new rates
        rate = c.update_rate(r["flow"], cc_rate_bps=2e6)  # the rate to send at now
        push = c.wait_push(0.1)                          # {"flow", "rate_bps"} or None

A flow's **group** (RFC 8699 sec. 5.1) is an ``int`` (an explicit flow group id, e.g. an SBD
verdict), a ``str`` (a label the configuration may name, e.g. ``"wlan0 uplink"``), or a dict
``{"src", "dst", "protocol", "src_port", "dst_port", "dscp"}`` (the same five-tuple and DSCP:
multiplexed; addresses as IPv4 or IPv6 strings, IPv4 sent as IPv4-mapped IPv6; ``dscp`` defaults to
0). The daemon scopes groups to the caller's user (SO_PEERCRED) unless its configuration shares
them. Rate groups run ``algorithm`` ("active", "conservative_active", "simple_passive",
"passive"; None: the configuration's); a window flow's state is "slow_start",
"congestion_avoidance" or "fast_recovery" ("SS", "CA", "FR" too).

Errors: a daemon refusal is :class:`FseError` (a :class:`~macroflow.CouplingError`, so a
``ValueError``) with ``.field`` (e.g. ``"register_rate.priority"``) and ``.message``, and the daemon
changed nothing. Values the daemon checks (priorities, rates, windows) are sent as given; an
argument that cannot be sent at all (a group of another type, a bad address or port, an unknown
algorithm or state name, a negative id, a request too large for a 16 KiB frame) raises :class:`~macroflow.InvalidValueError` (a
``ValueError``) naming it before anything is sent. Socket errors are ``OSError`` subclasses
(``FileNotFoundError`` when nothing is at the path, ``ConnectionResetError`` when the daemon
closed the connection). Closing a client (or its process ending) removes its flows at once.

:func:`spawn_daemon` starts a ``macroflowd`` for tests and demonstrations; :func:`find_daemon`
says which binary it would run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional, Union

from macroflow._native import FseClient, FseError

__all__ = ["FseClient", "FseError", "find_daemon", "spawn_daemon"]

PathLike = Union[str, "os.PathLike[str]"]


def _repo_root() -> Optional[Path]:
    """The checkout this package runs from (python/macroflow/ inside it), if it does."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "Cargo.toml").is_file() and (root / "crates" / "fsed").is_dir() else None


def find_daemon(binary: Optional[PathLike] = None) -> Optional[str]:
    """The ``macroflowd`` binary to run: ``binary`` if given, else ``$MACROFLOWD``, else
    ``macroflowd`` on ``PATH``, else ``target/release/macroflowd`` or ``target/debug/macroflowd`` of
    the checkout this package runs from (``$CARGO_TARGET_DIR`` first, if set); None if there is
    none. Build it with ``cargo build --release -p macroflow-fsed`` (``make build`` does)."""
    if binary is not None:
        return str(binary) if os.access(binary, os.X_OK) else None
    env = os.environ.get("MACROFLOWD")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("macroflowd")
    if found:
        return found
    targets = []
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.append(Path(os.environ["CARGO_TARGET_DIR"]))
    root = _repo_root()
    if root is not None:
        targets.append(root / "target")
    for t in targets:
        for profile in ("release", "debug"):
            p = t / profile / "macroflowd"
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return None


def _accepts(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(1.0)
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


@contextlib.contextmanager
def spawn_daemon(
    socket_path: PathLike,
    config_text: Optional[str] = None,
    binary: Optional[PathLike] = None,
    timeout_s: float = 10.0,
) -> Iterator[subprocess.Popen]:
    """Runs ``macroflowd --socket socket_path`` (permissions 0600: this user only) for the
    ``with`` block and yields its process; on exit it is stopped with SIGTERM (SIGKILL if it has
    not exited 5 s later) and its socket file is gone.

    ``config_text``: the configuration file's text (TOML, see ``crates/fsed/src/config.rs``;
    None: the defaults). ``binary``: see :func:`find_daemon`; FileNotFoundError if there is none.
    Returns once the socket accepts connections; RuntimeError with the daemon's output if it
    exits first or does not listen within ``timeout_s``, FileExistsError if another daemon is
    already listening at ``socket_path``."""
    exe = find_daemon(binary)
    if exe is None:
        where = f"{binary!r} is not an executable file" if binary is not None else (
            f"$MACROFLOWD={os.environ['MACROFLOWD']!r} is not an executable file"
            if os.environ.get("MACROFLOWD")
            else "not on PATH, $MACROFLOWD unset, and no target/{release,debug}/macroflowd in the checkout"
        )
        raise FileNotFoundError(
            f"macroflowd: {where}; build it with `cargo build --release -p macroflow-fsed`"
        )
    path = os.fspath(socket_path)
    if _accepts(path):
        raise FileExistsError(f"{path}: a daemon is already listening there")
    with tempfile.TemporaryDirectory(prefix="macroflowd-") as work:
        args = [exe, "--socket", path, "--mode", "600"]
        if config_text is not None:
            cfg = os.path.join(work, "macroflowd.toml")
            with open(cfg, "w") as f:
                f.write(config_text)
            args += ["--config", cfg]
        log_path = os.path.join(work, "stderr.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

        def output() -> str:
            with open(log_path, "rb") as f:
                return f.read().decode(errors="replace").strip()

        try:
            deadline = time.monotonic() + timeout_s
            while not _accepts(path):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"macroflowd exited with status {proc.returncode} before listening: {output()}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"macroflowd did not listen on {path} within {timeout_s} s: {output()}")
                time.sleep(0.01)
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            # A daemon stopped by SIGTERM removes its socket; one that was killed leaves it.
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.stat(path).st_mode) and not _accepts(path):
                    os.unlink(path)
