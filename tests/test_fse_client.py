"""macroflow.fse_client against a real ``macroflowd`` (the scenarios of crates/fsed/tests/server.rs,
through the Python client): RFC 8699 App. C through the daemon equal to the library's FseGroup
(and TCP-CCC's to TcpCoupler) bit for bit; bad requests raise FseError naming the field and change
nothing, bad arguments raise ValueError before anything is sent; bad frames on a raw socket;
pushes to a subscribed flow; the peer's uid and pid; clients closed, killed mid-message or whose
process dies lose their flows; the per-user policy (max_flows, groups) for this test's own uid;
many clients in threads, with the GIL released while a call waits.

The daemon is the ``macroflowd`` binary (``make build`` builds it; ``$MACROFLOWD`` names another);
without one every test here is skipped, saying so.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import macroflow as mf
from macroflow.fse_client import FseClient, FseError, find_daemon, spawn_daemon

M = 1e6


def _binary():
    """find_daemon()'s answer, else the checkout's build next to this test file (the installed
    package, in tests/install_check.sh, does not know the checkout)."""
    b = find_daemon()
    if b is not None or os.environ.get("MACROFLOWD"):
        return b
    root = Path(__file__).resolve().parents[1]
    for profile in ("release", "debug"):
        p = root / "target" / profile / "macroflowd"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


BINARY = _binary()
SKIP_REASON = (
    f"macroflowd not found ($MACROFLOWD={os.environ['MACROFLOWD']!r} is not an executable)"
    if os.environ.get("MACROFLOWD")
    else "macroflowd not found (not on PATH, no target/{release,debug}/macroflowd): "
    "build it with `cargo build --release -p macroflow-fsed` (`make build` does)"
)


@pytest.fixture
def start():
    """start(config_text=None) -> socket path of a fresh daemon, stopped after the test."""
    if BINARY is None:
        print(SKIP_REASON)
        pytest.skip(SKIP_REASON)
    stack = []
    # Short paths: a Unix socket's path is at most 107 bytes (pytest's tmp_path can be longer).
    work = tempfile.mkdtemp(prefix="mfd-", dir="/tmp")

    def go(config_text=None):
        path = os.path.join(work, f"fse{len(stack)}.sock")
        cm = spawn_daemon(path, config_text, binary=BINARY)
        cm.__enter__()
        stack.append(cm)
        return path

    yield go
    for cm in reversed(stack):
        cm.__exit__(None, None, None)
    for name in os.listdir(work):
        os.unlink(os.path.join(work, name))
    os.rmdir(work)


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def field_of(excinfo) -> str:
    assert type(excinfo.value) is FseError, repr(excinfo.value)
    return excinfo.value.field


def wait_until(cond, what, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


# --- RFC 8699 App. C through the daemon, bit for bit ------------------------------------------


@pytest.mark.parametrize("algorithm", ["passive", "simple_passive", "active"])
def test_appendix_c_through_the_daemon_equals_the_library(start, algorithm):
    """App. C's steps (crates/coupling/tests/appendix_c.rs, as crates/fsed/tests/server.rs drives
    them) through the daemon and on an in-process FseGroup, the whole table compared bit for bit
    after every step; with "passive" the last table is the draft's (flow 2 alone at 9.33)."""
    c = FseClient(start())
    lib = mf.FseGroup(algorithm)
    clock = [0]

    def tick():
        clock[0] += 100_000_000
        return clock[0]

    r1 = c.register_rate("app-c", 1.0, M, algorithm=algorithm)
    f1, g = r1["flow"], r1["group"]
    assert bits(r1["rate_bps"]) == bits(lib.register(f1, 1.0, M, now_ns=tick()))

    def same(step):
        info = c.query_group(g)
        assert info["group"] == g and info["coupler"] == algorithm, step
        assert bits(info["sum_calculated"]) == bits(lib.sum_calculated_rate), f"{step}: S_CR"
        assert bits(info["leftover"]) == bits(lib.leftover), f"{step}: TLO"
        want = sorted(lib.flows(), key=lambda v: v.flow)
        assert info["flow_count"] == len(want) == len(info["flows"]), step
        for got, w in zip(info["flows"], want):
            assert got["flow"] == w.flow and got["group"] == g, step
            assert bits(got["priority"]) == bits(w.priority), f"{step}: P"
            assert bits(got["effective_priority"]) == bits(w.priority), f"{step}: P (no policy)"
            assert bits(got["rate_or_cwnd"]) == bits(w.fse_rate_bps), f"{step}: FSE_R"
            assert bits(got["desired_rate_bps"]) == bits(w.desired_rate_bps), f"{step}: DR"
            assert c.query_flow(w.flow) == got, step

    def update(f, cc, dr=None):
        got = c.update_rate(f, cc, dr)
        want = lib.update(f, cc, now_ns=tick(), desired_rate_bps=math.inf if dr is None else dr).rate_bps
        assert bits(got) == bits(want), (f, cc, dr, got, want)

    same("flow 1 registers")
    for cc in range(2, 11):
        update(f1, cc * M)
        same(f"flow 1 at {cc}")
    r2 = c.register_rate("app-c", 0.5, M)
    f2 = r2["flow"]
    assert r2["group"] == g
    assert bits(r2["rate_bps"]) == bits(lib.register(f2, 0.5, M, now_ns=tick()))
    same("flow 2 joins")
    update(f1, 8 * M)
    same("flow 1 at 8")
    update(f2, 2 * M)
    same("flow 2 at 2")
    # Flow 1 increases by 1 but its application wants 2: the leftover TLO.
    update(f1, lib.flow(f1).fse_rate_bps + M, 2 * M)
    same("flow 1 application-limited")
    update(f2, lib.flow(f2).fse_rate_bps + M)
    same("flow 2 takes the leftover")
    c.leave(f1)
    lib.leave(f1)
    update(f2, lib.flow(f2).fse_rate_bps - 2 * M)
    same("flow 1 left")
    if algorithm == "passive":
        # The draft's last table: flow 2 alone at 9.33 with priority 0.5.
        last = c.query_group(g)
        assert last["flows"][0]["rate_or_cwnd"] / M == pytest.approx(9.33, abs=0.006), last
    c.close()


def test_window_flows_through_the_daemon_equal_tcp_ccc(start):
    """Window flows run the configured TCP coupler ("ccc" by default): the daemon's answers equal
    an in-process TcpCoupler's bit for bit."""
    c = FseClient(start())
    lib = mf.TcpCoupler("ccc")
    r1 = c.register_window("tcp", 1.0, 10.0, 20.0)
    want = lib.register(r1["flow"], 1.0, 10.0, 20.0)
    assert (bits(r1["cwnd_pkts"]), bits(r1["ssthresh_pkts"])) == (bits(want.cwnd_pkts), bits(want.ssthresh_pkts))
    r2 = c.register_window("tcp", 2.0, 4.0, 64.0)
    assert r2["group"] == r1["group"]
    want = lib.register(r2["flow"], 2.0, 4.0, 64.0)
    assert (bits(r2["cwnd_pkts"]), bits(r2["ssthresh_pkts"])) == (bits(want.cwnd_pkts), bits(want.ssthresh_pkts))
    f1, f2 = r1["flow"], r2["flow"]
    steps = [
        (f1, 30.0, 20.0, "congestion_avoidance", False, 25.0),
        (f2, 12.0, 64.0, "slow_start", False, 10.0),
        (f1, 15.0, 15.0, "fast_recovery", False, 14.0),
        (f1, 16.0, 15.0, "CA", False, 0.0),
        (f2, 1.0, 8.0, "slow_start", True, 0.0),
        (f2, 9.0, 8.0, "congestion_avoidance", False, 8.0),
    ]
    short = {"slow_start": "SS", "congestion_avoidance": "CA", "fast_recovery": "FR"}
    answers = []
    for f, cwnd, ssth, state, timeout, in_flight in steps:
        got = c.update_window(f, cwnd, ssth, state, timeout=timeout, in_flight_pkts=in_flight)
        w = lib.update(f, cwnd, ssth, short.get(state, state), timeout=timeout, in_flight_pkts=in_flight)
        if w is None:
            assert got is None, (f, state)
        else:
            assert got is not None and tuple(map(bits, got)) == (bits(w.cwnd_pkts), bits(w.ssthresh_pkts)), (f, state)
        answers.append(got)
        info = c.query_group(r1["group"])
        assert info["coupler"] == "ccc"
        assert bits(info["sum_calculated"]) == bits(lib.sum_cwnd)
        for fi in info["flows"]:
            assert bits(fi["rate_or_cwnd"]) == bits(lib.conn(fi["flow"]).cwnd_pkts)
            assert fi["desired_rate_bps"] == 0.0
    assert answers[2] is None, "fast recovery keeps its own window"
    assert any(a is not None for a in answers)


# --- errors -----------------------------------------------------------------------------------


def test_bad_requests_raise_fse_error_naming_the_field_and_change_nothing(start):
    path = start("max_timeout_s = 60.0\n")
    c = FseClient(path)
    other = FseClient(path)
    r = c.register_rate("x", 1.0, M, algorithm="active")
    f, g = r["flow"], r["group"]
    c.update_rate(f, 2 * M)

    def snapshot():
        return c.query_group(g), c.query_flow(f)

    before = snapshot()
    bad = [
        (lambda: c.register_rate("x", 0.0, M), "register_rate.priority"),
        (lambda: c.register_rate("x", math.nan, M), "register_rate.priority"),
        (lambda: c.register_rate("x", -1.0, M), "register_rate.priority"),
        (lambda: c.register_rate("x", 1.0, -1.0), "register_rate.initial_rate_bps"),
        (lambda: c.register_rate("x", 1.0, math.nan), "register_rate.initial_rate_bps"),
        (lambda: c.register_rate("x", 1.0, M, algorithm="passive"), "register_rate.algorithm"),
        (lambda: c.register_rate("x", 1.0, M, timeout_ms=0), "register_rate.timeout_ms"),
        (lambda: c.register_rate("x", 1.0, M, timeout_ms=61_000), "register_rate.timeout_ms"),
        (lambda: c.register_rate("", 1.0, M), "register_rate.group"),
        (lambda: c.register_rate("y" * 1025, 1.0, M), "register_rate.group"),
        (lambda: c.register_window("x", 1.0, 10.0, 20.0), "register_window.group"),
        (lambda: c.update_rate(999, M), "update_rate.flow"),
        (lambda: c.update_rate(f, -1.0), "update_rate.cc_rate_bps"),
        (lambda: c.update_rate(f, math.inf), "update_rate.cc_rate_bps"),
        (lambda: c.update_window(f, 10.0, 20.0, "slow_start"), "update_window.flow"),
        (lambda: c.set_priority(f, 0.0), "set_priority.priority"),
        (lambda: c.set_priority(999, 1.0), "set_priority.flow"),
        (lambda: c.refresh(999), "refresh.flow"),
        (lambda: c.leave(999), "leave.flow"),
        (lambda: c.subscribe(999), "subscribe.flow"),
        (lambda: c.query_flow(999), "query_flow.flow"),
        (lambda: c.query_group(999), "query_group.group"),
        # Another connection's flow and group are as unknown as ids never used.
        (lambda: other.leave(f), "leave.flow"),
        (lambda: other.update_rate(f, M), "update_rate.flow"),
        (lambda: other.query_group(g), "query_group.group"),
    ]
    for call, field in bad:
        with pytest.raises(FseError) as e:
            call()
        assert field_of(e) == field, (field, e.value)
        assert e.value.message and field in str(e.value)
        assert isinstance(e.value, mf.CouplingError) and isinstance(e.value, ValueError)
        assert snapshot() == before, f"{field} changed something"
    # A raised FseError pickles with its field and message.
    with pytest.raises(FseError) as e:
        c.leave(999)
    p = pickle.loads(pickle.dumps(e.value))
    assert type(p) is FseError and (p.field, p.message, str(p)) == (e.value.field, e.value.message, str(e.value))
    # The session goes on.
    assert c.update_rate(f, 3 * M) > 0


def test_bad_arguments_raise_value_error_before_anything_is_sent(start):
    c = FseClient(start())
    r = c.register_rate("x", 1.0, M)
    f, g = r["flow"], r["group"]
    before = c.query_group(g)
    five = {"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": 17, "src_port": 1, "dst_port": 2}
    bad = [
        (lambda: c.register_rate([1, 2], 1.0, M), "group"),
        (lambda: c.register_rate(1.5, 1.0, M), "group"),
        (lambda: c.register_rate(True, 1.0, M), "group"),
        (lambda: c.register_rate(-1, 1.0, M), "group"),
        (lambda: c.register_rate(2**64, 1.0, M), "group"),
        (lambda: c.register_rate({**five, "sport": 3}, 1.0, M), "sport"),
        (lambda: c.register_rate({k: v for k, v in five.items() if k != "dst"}, 1.0, M), "dst"),
        (lambda: c.register_rate({**five, "src": "10.0.0.300"}, 1.0, M), "src"),
        (lambda: c.register_rate({**five, "dst": 7}, 1.0, M), "dst"),
        (lambda: c.register_rate({**five, "protocol": 256}, 1.0, M), "protocol"),
        (lambda: c.register_rate({**five, "src_port": 65536}, 1.0, M), "src_port"),
        (lambda: c.register_rate({**five, "dst_port": -1}, 1.0, M), "dst_port"),
        (lambda: c.register_rate({**five, "dscp": 64}, 1.0, M), "dscp"),
        (lambda: c.register_rate("x", 1.0, M, algorithm="fast"), "algorithm"),
        (lambda: c.register_rate("x", 1.0, M, timeout_ms=-1), "timeout_ms"),
        (lambda: c.register_rate("x", 1.0, M, timeout_ms=2**32), "timeout_ms"),
        (lambda: c.register_window("x", 1.0, 1.0, 1.0, timeout_ms=1.5), "timeout_ms"),
        (lambda: c.update_rate(-1, M), "flow"),
        (lambda: c.update_rate(1.5, M), "flow"),
        (lambda: c.update_rate(f, M, rtt_us=-5), "rtt_us"),
        (lambda: c.update_window(f, 1.0, 1.0, "open"), "state"),
        (lambda: c.set_priority(-1, 1.0), "flow"),
        (lambda: c.leave("1"), "flow"),
        (lambda: c.query_group(-2), "group"),
        (lambda: c.wait_push(-1.0), "timeout_s"),
        (lambda: c.wait_push(math.nan), "timeout_s"),
        # Too large for a frame (16 KiB): the Rust client refuses it unsent.
        (lambda: c.register_rate("y" * 20_000, 1.0, M), "request"),
    ]
    for call, name in bad:
        with pytest.raises(ValueError) as e:
            call()
        assert not isinstance(e.value, FseError), f"{name}: reached the daemon: {e.value}"
        assert isinstance(e.value, mf.InvalidValueError), e.value
        assert name in str(e.value), (name, str(e.value))
    # The algorithm names are listed; nothing was sent, so the session is in step.
    with pytest.raises(ValueError, match="conservative_active"):
        c.register_rate("x", 1.0, M, algorithm="fast")
    assert c.query_group(g) == before
    assert c.update_rate(f, 2 * M, rtt_us=20_000) > 0


def test_bad_frames_get_an_error_and_change_nothing(start):
    """Garbage frames on a raw connection: an error naming the frame, the session goes on; an
    impossible length: an error, then that connection only is closed. The Python client's group
    is untouched."""
    path = start()
    c = FseClient(path)
    r = c.register_rate("x", 1.0, M)
    before = c.query_group(r["group"])
    s = raw(path)
    for payload in [b"\xff" * 7, bytes([5, 200, 1, 2, 3]), bytes([9, 1])]:
        s.sendall(struct.pack(">I", len(payload)) + payload)
        rid, body, field = read_reply(s)
        assert body == ERROR and field == "frame", (payload, rid, body, field)
    # A valid message (Leave) with a trailing byte is refused too, under its id.
    msg = varint(3) + varint(OP_LEAVE) + varint(r["flow"]) + b"\x00"
    s.sendall(struct.pack(">I", len(msg)) + msg)
    assert read_reply(s) == (3, ERROR, "frame")
    s.sendall(request(4, varint(OP_QUERY_FLOW) + varint(999)))
    assert read_reply(s) == (4, ERROR, "query_flow.flow")
    s.sendall(struct.pack(">I", 0xFFFFFFFF))
    assert read_reply(s)[1:] == (ERROR, "frame")
    assert s.recv(1) == b"", "closed"
    s.close()
    assert c.query_group(r["group"]) == before, "nothing changed"


def test_version_mismatch_and_requests_before_hello(start):
    path = start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5.0)
    s.connect(path)
    s.sendall(request(7, varint(OP_REFRESH) + varint(1)))
    assert read_reply(s) == (7, ERROR, "hello")
    s.sendall(request(8, varint(OP_HELLO) + varint(99)))
    assert read_reply(s) == (8, ERROR, "hello.version")
    assert s.recv(1) == b"", "closed"
    s.close()


def test_io_errors_are_os_errors(start):
    path = start()
    missing = os.path.join(os.path.dirname(path), "nobody.sock")
    with pytest.raises(FileNotFoundError) as e:
        FseClient(missing)
    assert e.value.filename == missing
    with pytest.raises(FileNotFoundError):
        FseClient.connect(missing)
    c = FseClient.connect(path)
    assert c.path == path and not c.closed
    c.close()
    c.close()  # again: nothing
    assert c.closed and "closed" in repr(c)
    with pytest.raises(OSError) as e:
        c.register_rate("x", 1.0, M)
    assert not isinstance(e.value, FseError) and "closed" in str(e.value)
    with pytest.raises(OSError):
        c.take_pushes()


def test_spawn_daemon_reports_what_went_wrong(start):
    path = start()
    with pytest.raises(FileExistsError):
        with spawn_daemon(path, binary=BINARY):
            pass
    assert FseClient(path).peer()[1] == os.getpid(), "the first daemon still serves"
    other = os.path.join(os.path.dirname(path), "other.sock")
    with pytest.raises(RuntimeError, match="colour"):
        with spawn_daemon(other, "colour = 1\n", binary=BINARY):
            pass
    assert not os.path.exists(other)
    with pytest.raises(FileNotFoundError, match="cargo build"):
        with spawn_daemon(other, binary=os.path.join(os.path.dirname(path), "no-such-binary")):
            pass


def test_a_daemon_that_stops_gives_connection_errors():
    if BINARY is None:
        print(SKIP_REASON)
        pytest.skip(SKIP_REASON)
    work = tempfile.mkdtemp(prefix="mfd-", dir="/tmp")
    path = os.path.join(work, "fse.sock")
    try:
        with spawn_daemon(path, binary=BINARY):
            c = FseClient(path)
            f = c.register_rate("x", 1.0, M)["flow"]
        assert not os.path.exists(path), "the daemon removed its socket"
        with pytest.raises(ConnectionError):
            c.update_rate(f, M)
        with pytest.raises(ConnectionError):
            c.refresh(f)
        c.close()
    finally:
        os.rmdir(work)


# --- pushes -----------------------------------------------------------------------------------


def test_subscribed_flows_get_pushes_and_daemon_errors_reach_the_client(start):
    path = start()
    a, b = FseClient(path), FseClient(path)
    fa = a.register_rate("x", 1.0, M, algorithm="active")
    a.subscribe(fa["flow"])
    fb = b.register_rate("x", 1.0, 3 * M)
    assert fb["group"] == fa["group"]
    rb = b.update_rate(fb["flow"], 6 * M)
    p = a.wait_push(5.0)
    assert p is not None, "a push"
    assert p["flow"] == fa["flow"]
    # The active FSE: S_CR = 1 + 3 + (6 - 3) = 7 split 1 : 1.
    assert bits(p["rate_bps"]) == bits(rb) and rb == 3.5 * M
    assert a.wait_push(0.05) is None
    assert a.take_pushes() == []
    # Pushes that arrive before a reply are kept, in order, for take_pushes.
    r1 = b.update_rate(fb["flow"], 8 * M)
    r2 = b.update_rate(fb["flow"], 2 * M)
    assert a.query_flow(fa["flow"])["rate_or_cwnd"] == r2
    assert a.take_pushes() == [{"flow": fa["flow"], "rate_bps": r1}, {"flow": fa["flow"], "rate_bps": r2}]
    assert a.take_pushes() == []
    # b never subscribed: nothing for it.
    assert b.wait_push(0.05) is None
    with pytest.raises(FseError) as e:
        a.update_rate(fb["flow"], M)
    assert field_of(e) == "update_rate.flow"


def test_wait_push_releases_the_gil(start):
    """A thread blocked in wait_push does not stop the others: the main thread's update (which
    causes the push) runs while it waits, and the push arrives long before the timeout."""
    path = start()
    a, b = FseClient(path), FseClient(path)
    fa = a.register_rate("x", 1.0, M, algorithm="active")["flow"]
    a.subscribe(fa)
    fb = b.register_rate("x", 1.0, M)["flow"]
    got = []
    # Under the daemon's 10 s soft-state timeout: a call that held the GIL would time out here,
    # the update would run only after it, and no push would be seen.
    t = threading.Thread(target=lambda: got.append(a.wait_push(4.0)))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.1)  # the thread is in wait_push now
    rb = b.update_rate(fb, 5 * M)
    t.join(15.0)
    assert got and got[0] is not None, got
    assert got[0]["rate_bps"] == rb
    assert time.monotonic() - t0 < 3.0


# --- who the daemon sees ------------------------------------------------------------------------


def test_peer_is_this_process(start):
    with FseClient(start()) as c:
        assert c.peer() == (os.getuid(), os.getpid())
        assert f"uid={os.getuid()}" in repr(c) and f"pid={os.getpid()}" in repr(c)


def test_multiplexed_groups_ipv4_is_ipv4_mapped(start):
    """The same five-tuple and DSCP is one group, whether IPv4 is given as such or IPv4-mapped
    IPv6; another DSCP or port is another group."""
    c = FseClient(start())
    t = {"src": "10.0.0.1", "dst": "192.0.2.7", "protocol": 17, "src_port": 5000, "dst_port": 443, "dscp": 46}
    g = c.register_rate(t, 1.0, M)["group"]
    assert c.register_rate({**t, "src": "::ffff:10.0.0.1", "dst": "::ffff:192.0.2.7"}, 1.0, M)["group"] == g
    import ipaddress

    assert c.register_rate({**t, "src": ipaddress.ip_address("10.0.0.1")}, 1.0, M)["group"] == g
    others = {
        c.register_rate({**t, "dscp": 0}, 1.0, M)["group"],
        c.register_rate({k: v for k, v in t.items() if k != "dscp"}, 1.0, M)["group"],
        c.register_rate({**t, "dst_port": 444}, 1.0, M)["group"],
        c.register_rate({**t, "src": "2001:db8::1"}, 1.0, M)["group"],
    }
    assert g not in others and len(others) == 3, others  # dscp 0 given or defaulted: one group
    assert c.query_group(g)["flow_count"] == 3
    assert c.register_rate(7, 1.0, M)["group"] != c.register_rate("7", 1.0, M)["group"]


# --- clients that go away lose their flows ------------------------------------------------------


def test_a_client_closed_mid_session_loses_its_flows_and_others_go_on(start):
    path = start()
    keeper = FseClient(path)
    k = keeper.register_rate("x", 1.0, M)
    g = k["group"]

    def count():
        return keeper.query_group(g)["flow_count"]

    victim = FseClient(path)
    v = victim.register_rate("x", 1.0, M)
    victim.register_rate("x", 2.0, M)
    assert v["group"] == g and count() == 3
    victim.close()
    wait_until(lambda: count() == 1, "the closed client's flows were not removed")
    # A client left by a with block, and one dropped without close.
    with FseClient(path) as w:
        w.register_rate("x", 1.0, M)
        assert count() == 2
    wait_until(lambda: count() == 1, "the with block's flows were not removed")
    d = FseClient(path)
    d.register_rate("x", 1.0, M)
    assert count() == 2
    del d
    wait_until(lambda: count() == 1, "the dropped client's flows were not removed")
    # Killed mid-message (half a frame on a raw connection, then gone).
    for cut in [1, 3, 4, 6]:
        s = raw(path)
        s.sendall(request(2, register_rate_op("x", 1.0, M)))
        rid, body, _ = read_reply(s)
        assert (rid, body) == (2, REGISTERED)
        assert count() == 2
        frame = request(3, varint(OP_REFRESH) + varint(1))
        s.sendall(frame[: min(cut, len(frame) - 1)])
        s.close()
        wait_until(lambda: count() == 1, f"cut at {cut}: the victim's flow was not removed")
    assert keeper.update_rate(k["flow"], 2 * M, rtt_us=20_000) > 0


def test_a_client_process_killed_loses_its_flows(start):
    path = start()
    keeper = FseClient(path)
    g = keeper.register_rate("x", 1.0, M)["group"]
    code = (
        "import sys, time\n"
        "from macroflow.fse_client import FseClient\n"
        "c = FseClient(sys.argv[1])\n"
        "r = c.register_rate('x', 1.0, 1e6)\n"
        "print(r['group'], flush=True)\n"
        "time.sleep(60)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert int(line) == g, "the same user's label: the same group"
        assert keeper.query_group(g)["flow_count"] == 2
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
    wait_until(lambda: keeper.query_group(g)["flow_count"] == 1, "the killed process's flow was not removed")


# --- the policy (RFC 8699 sec. 10) for this test's own uid -----------------------------------------


def test_policy_max_flows_and_groups_for_this_uid(start):
    """This process's uid may join only some groups and hold 3 flows. (The max_share limit needs a
    second uid in a shared group: crates/fsed/tests/daemon.rs covers it.)"""
    uid = os.getuid()
    path = start(
        f"[[user]]\nuid = {uid}\nmax_flows = 3\n"
        'groups = ["label:game*", "fgi:7", "5t:10.0.0.1,*", "5t:2001:db8::1,*"]\n'
    )
    c = FseClient(path)
    t = {"src": "10.0.0.1", "dst": "10.0.0.9", "protocol": 6, "src_port": 1, "dst_port": 2}
    refused = [
        lambda: c.register_rate("video", 1.0, M),
        lambda: c.register_rate(8, 1.0, M),
        lambda: c.register_rate({**t, "src": "10.0.0.2"}, 1.0, M),
        lambda: c.register_rate({**t, "src": "2001:db8::2"}, 1.0, M),
        lambda: c.register_window("video", 1.0, 10.0, 20.0),
    ]
    for call in refused:
        with pytest.raises(FseError) as e:
            call()
        assert field_of(e) in ("register_rate.group", "register_window.group"), e.value
        assert str(uid) in e.value.message and "may not join" in e.value.message
    a = c.register_rate(7, 1.0, M)
    b = c.register_rate("game 1", 1.0, M)
    m = c.register_rate(t, 1.0, M)
    snapshot = [c.query_flow(x["flow"]) for x in (a, b, m)]
    for call in [
        lambda: c.register_rate("game 2", 1.0, M),
        lambda: c.register_window("game 3", 1.0, 10.0, 20.0),
        lambda: FseClient(path).register_rate(7, 1.0, M),  # per user, not per connection
    ]:
        with pytest.raises(FseError) as e:
            call()
        assert field_of(e) in ("register_rate", "register_window") and "max_flows" in e.value.message, e.value
    assert [c.query_flow(x["flow"]) for x in (a, b, m)] == snapshot, "refusals changed nothing"
    assert c.query_group(a["group"])["flow_count"] == 1
    # A flow that leaves frees its place; IPv6 five-tuples match their prefix too.
    c.leave(m["flow"])
    six = c.register_rate({**t, "src": "2001:db8::1", "dst": "2001:db8::9"}, 1.0, M)
    assert six["group"] != m["group"]
    c.leave(six["flow"])
    # IPv4-mapped IPv6 is the IPv4 address the policy names.
    c.register_rate({**t, "src": "::ffff:10.0.0.1"}, 1.0, M)


# --- many clients ------------------------------------------------------------------------------------


def test_many_clients_in_threads(start):
    path = start("[default_user]\nmax_flows = 2000\n")
    errors = []

    def worker(i):
        try:
            cs = [FseClient(path) for _ in range(10)]
            flows = [c.register_rate(f"g{(i + j) % 7}", 1.0, M)["flow"] for j, c in enumerate(cs)]
            for rnd in range(10):
                for c, f in zip(cs, flows):
                    r = c.update_rate(f, M * (1 + rnd), rtt_us=20_000)
                    assert math.isfinite(r) and r >= 0
            for c in cs:
                c.close()
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    # One client shared by threads: calls take turns.
    shared = FseClient(path)
    f = shared.register_rate("shared", 1.0, M)["flow"]
    rates = []

    def hammer():
        try:
            rates.extend(shared.update_rate(f, M, rtt_us=20_000) for _ in range(50))
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    ts = [threading.Thread(target=hammer) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    assert len(rates) == 200 and all(r == M for r in rates), rates[:5]
    assert shared.query_flow(f)["rate_or_cwnd"] > 0
    # Every other client closed: every flow gone.
    g = shared.register_rate("g0", 1.0, M)["group"]
    wait_until(lambda: shared.query_group(g)["flow_count"] == 1, "flows of closed clients remain")


# --- the wire format by hand (postcard; crates/fsed/src/proto.rs), for the raw-socket tests ---------

OP_HELLO, OP_REGISTER_RATE, OP_REFRESH, OP_LEAVE, OP_QUERY_FLOW = 0, 1, 6, 7, 8
REGISTERED, ERROR = 1, 8  # ReplyBody variants
VERSION = 1


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf: bytes, i: int):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def request(rid: int, op: bytes) -> bytes:
    body = varint(rid) + op
    return struct.pack(">I", len(body)) + body


def register_rate_op(label: str, priority: float, initial_rate_bps: float) -> bytes:
    lb = label.encode()
    group = varint(2) + varint(len(lb)) + lb  # GroupSpec::Configured
    # Then desired_rate_bps, algorithm, timeout_ms: each None (Option tag 0).
    return varint(OP_REGISTER_RATE) + group + struct.pack("<dd", priority, initial_rate_bps) + b"\x00\x00\x00"


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the daemon closed the connection"
        buf += chunk
    return buf


def read_reply(s: socket.socket):
    """(id, ReplyBody variant, the error's field or None) of the next message, a Reply."""
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    buf = recv_exact(s, n)
    kind, i = read_varint(buf, 0)
    assert kind == 0, "a Reply"
    rid, i = read_varint(buf, i)
    body, i = read_varint(buf, i)
    field = None
    if body == ERROR:
        ln, i = read_varint(buf, i)
        field = buf[i : i + ln].decode()
    return rid, body, field


def raw(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5.0)
    s.connect(path)
    s.sendall(request(1, varint(OP_HELLO) + varint(VERSION)))
    assert read_reply(s)[:2] == (1, 0), "Hello"
    return s


def test_a_desired_rate_at_registration_holds_until_an_update_names_another(start):
    """RFC 8699 App. C's DR given at registration: updates naming none keep it (the passive
    FSE stores it as the flow's DR), one naming another replaces it."""
    sock = start()
    with FseClient(str(sock)) as c:
        r = c.register_rate("desired", 1.0, 1e6, algorithm="passive", desired_rate_bps=2e6)
        c.update_rate(r["flow"], 5e6)
        assert c.query_flow(r["flow"])["desired_rate_bps"] == 2e6
        c.update_rate(r["flow"], 5e6, desired_rate_bps=3e6)
        c.update_rate(r["flow"], 5e6)
        assert c.query_flow(r["flow"])["desired_rate_bps"] == 3e6
        with pytest.raises(FseError) as e:
            c.register_rate("desired", 1.0, 1e6, desired_rate_bps=-1.0)
        assert e.value.field == "register_rate.desired_rate_bps"
