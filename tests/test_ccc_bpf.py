"""ctrlTCP in the running kernel (issue 16): the BPF struct_ops congestion control macroflow_ccc.

These tests load the program into this kernel (root, BTF, struct_ops; CI has them all) and run real
TCP connections over loopback and through network namespaces. Without the capability they skip,
saying what is missing; the bad-input tests that need no kernel run everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from typing import Iterator, List

import pytest

from macroflow import ccc
from macroflow.__main__ import app

WHY = "; ".join(ccc.missing())
needs_bpf = pytest.mark.skipif(bool(WHY), reason=f"macroflow_ccc cannot be loaded here: {WHY}")


# mf_init programs there before the fixture's load: an earlier load's, which sockets elsewhere still
# hold (a connection in a namespace being torn down keeps its congestion control until it is gone).
_OLDER_PROGRAMS: List[str] = []


@pytest.fixture
def loaded() -> Iterator[None]:
    if ccc.is_loaded():
        # Someone's experiment (or a Linux engine run, which leaves it loaded) may be using it:
        # these tests load and unload it machine-wide, so they do not run over it.
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the tests would unload it")
    _OLDER_PROGRAMS[:] = _mf_programs()
    ccc.load()
    try:
        yield
    finally:
        if ccc.is_loaded():
            ccc.unload()


class Sink:
    """A TCP server on loopback that reads and discards everything, counting the bytes each
    connection delivered by the client's port (its own sockets use the default congestion
    control: only the senders are coupled)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.srv = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind((host, 0))
        self.srv.listen(128)
        self.addr = self.srv.getsockname()[:2]
        self.conns: List[socket.socket] = []
        self.received: dict = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, peer = self.srv.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._drain, args=(c, peer[1]), daemon=True).start()

    def _drain(self, c: socket.socket, port: int) -> None:
        self.received[port] = 0
        try:
            while True:
                b = c.recv(1 << 16)
                if not b:
                    break
                self.received[port] += len(b)
        except OSError:
            pass
        # Closed at EOF: a long test opens tens of thousands of connections.
        try:
            self.conns.remove(c)
        except ValueError:
            pass
        c.close()

    def got(self, s: socket.socket) -> int:
        """Bytes the sink received from client socket `s`."""
        return self.received.get(s.getsockname()[1], 0)

    def close(self) -> None:
        self.srv.close()
        for c in self.conns:
            c.close()


def _connect(addr, coupled: bool = True, prio: float = 0.0) -> socket.socket:
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
    s.settimeout(10)  # a stalled connection fails the test instead of hanging it
    if coupled:
        ccc.use(s)
    if prio:
        ccc.set_socket_priority(s, prio)
    s.connect(addr)
    return s


def _pump(socks: List[socket.socket], seconds: float, sink: "Sink") -> List[int]:
    """Sends as fast as each socket takes for `seconds`; returns the bytes the sink received from
    each (what was delivered, not what a large send buffer took)."""
    before = [sink.got(s) for s in socks]
    end = time.monotonic() + seconds
    errors: List[str] = []

    def run(i: int) -> None:
        buf = b"x" * 65536
        try:
            while time.monotonic() < end:
                socks[i].send(buf)
        except OSError as e:
            errors.append(repr(e))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(socks))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    time.sleep(0.1)
    return [sink.got(s) - b for s, b in zip(socks, before)]


def _open_sockets(port: int) -> List[str]:
    """Client sockets to `port` the kernel still has (TIME-WAIT ones have left: no CC state)."""
    p = subprocess.run(["ss", "-tanH", "state", "all", "dport", "=", f":{port}"], capture_output=True, text=True)
    return [ln for ln in p.stdout.splitlines() if ln.strip() and not ln.startswith("TIME-WAIT")]


def _readline(pipe, timeout: float = 30.0) -> str:
    """A line from a child's pipe, or "" after `timeout` (a stuck child fails the test)."""
    import select

    r, _, _ = select.select([pipe], [], [], timeout)
    return pipe.readline() if r else ""


def _members() -> int:
    """Connections in any group now; and every group must be consistent."""
    gs = ccc.status()["groups"]
    assert all(not g["inconsistencies"] for g in gs), [g["inconsistencies"] for g in gs]
    return sum(len(g["members"]) for g in gs)


def _cc_of(s: socket.socket) -> str:
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()


def _wait(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


# ---- No kernel needed -------------------------------------------------------------------------


@pytest.mark.parametrize("kw, msg", [
    (dict(prefix="10.0.0.0/33"), "prefix length 33 > 32"),
    (dict(prefix="fd00::/129"), "prefix length"),
    (dict(prefix="ten/8"), "not an address"),
    (dict(ports=(10, 9)), "port range 10-9 is empty"),
    (dict(group=0), "group numbers start at 1"),
    (dict(priority=0), "priority must be in"),
    (dict(priority=300), "priority must be in"),
    (dict(priority=float("nan")), "priority must be in"),
])
def test_a_bad_rule_is_refused_before_the_maps_are_opened(kw, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        ccc.rule_add(**kw)


def test_a_bad_priority_for_a_socket_is_refused() -> None:
    with socket.socket() as s, pytest.raises(ValueError, match="priority must be in"):
        ccc.set_socket_priority(s, -1)


def test_unloading_when_not_loaded_says_so() -> None:
    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded by someone else on this machine")
    with pytest.raises(RuntimeError, match="not loaded"):
        ccc.unload()
    with pytest.raises(RuntimeError, match="not loaded"):
        ccc.status()


# ---- The kernel -------------------------------------------------------------------------------


@needs_bpf
def test_the_verifier_has_room_to_spare() -> None:
    """Each operation's verification stays well inside the kernel's 1M-instruction budget (a change
    that brings one near it fails here, before a kernel or compiler version tips it over)."""
    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the test would unload it")
    try:
        programs = dict(ccc.load()["programs"])
    finally:
        ccc.unload()
    assert set(programs) >= {"mf_init", "mf_release", "mf_cong_avoid", "mf_set_state", "mf_cwnd_event", "mf_pkts_acked"}
    assert max(programs.values()) < 700_000, programs
    assert min(programs.values()) > 0, programs


@needs_bpf
def test_load_status_unload(loaded: None) -> None:
    assert ccc.CC_NAME in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    with pytest.raises(RuntimeError, match="already loaded"):
        ccc.load()
    st = ccc.status()
    assert st["groups"] == [] and st["rules"] == []
    assert all(v == 0 for v in st["stats"].values())
    r = ccc.unload()
    assert r["coupled_connections"] == 0 and "link" in r["removed"]
    assert ccc.CC_NAME not in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    with pytest.raises(RuntimeError, match="not loaded"):
        ccc.unload()


@needs_bpf
def test_connections_between_two_addresses_form_one_group(loaded: None) -> None:
    sink = Sink()
    socks = [_connect(sink.addr) for _ in range(4)] + [_connect(sink.addr, prio=3)]
    try:
        sent = _pump(socks, 1.0, sink)
        assert all(b > 0 for b in sent), sent
        assert all(_cc_of(s) == ccc.CC_NAME for s in socks)
        st = ccc.status()
        (g,) = st["groups"]
        assert g["name"] == "pair 127.0.0.1 -> 127.0.0.1"
        assert len(g["members"]) == 5 and g["sum_priority"] == 7
        assert sorted(m["priority"] for m in g["members"]) == [1, 1, 1, 1, 3]
        assert sum(m["coordinating"] for m in g["members"]) == 1
        assert g["inconsistencies"] == [] and g["sum_cwnd_pkts"] > 0
        assert st["stats"]["connections_coupled"] == 5 and st["stats"]["updates"] > 0
    finally:
        for s in socks:
            s.close()
    # release always leaves; the emptied group stays, its sums zero, until gc deletes it idle.
    assert _wait(lambda: _members() == 0)
    (g,) = ccc.status()["groups"]
    assert g["members"] == [] and g["sum_cwnd_pkts"] == 0 and g["sum_priority"] == 0 and g["empty_for_s"] >= 0
    stats = ccc.status()["stats"]
    assert stats["connections_released"] == 5 and stats["groups_made"] == 1 and stats["groups_emptied"] == 1
    with pytest.raises(ValueError, match="at least 1 second"):
        ccc.gc(0)
    assert ccc.gc(60) == 0 and len(ccc.status()["groups"]) == 1
    time.sleep(1.1)
    assert ccc.gc(1) == 1 and ccc.status()["groups"] == []
    assert sum(v for k, v in stats.items() if k.startswith("errors_")) == 0, stats
    sink.close()


@needs_bpf
def test_rules_assign_group_and_priority_and_the_application_overrides(loaded: None) -> None:
    sink = Sink()
    port = sink.addr[1]
    assert ccc.rule_add(prefix="10.0.0.0/8", group=9) == 0  # matches nothing here
    assert ccc.rule_add(prefix="127.0.0.0/8", ports=(port, port), group=7, priority=2) == 1
    assert ccc.rule_add(ports=(1, 2), uncoupled=True) == 2
    assert [r["index"] for r in ccc.rules()] == [0, 1, 2]
    a = _connect(sink.addr)
    b = _connect(sink.addr, prio=0.5)
    try:
        _pump([a, b], 0.3, sink)
        (g,) = ccc.status()["groups"]
        assert g["name"] == "group 7"
        assert sorted(m["priority"] for m in g["members"]) == [0.5, 2]
        # A priority the application changes after connect applies at its next report.
        ccc.set_socket_priority(a, 4)
        _pump([a, b], 0.3, sink)
        (g,) = ccc.status()["groups"]
        assert sorted(m["priority"] for m in g["members"]) == [0.5, 4]
        assert ccc.status()["stats"]["priorities_set"] >= 1
    finally:
        a.close()
        b.close()
    # Deleting rule 0 moves the others up; a bad index changes nothing.
    with pytest.raises(ValueError, match="no rule 3"):
        ccc.rule_del(3)
    assert ccc.rule_del(0)["group"] == 9
    assert [(r["index"], r["group"]) for r in ccc.rules()] == [(0, 7), (1, None)]
    # A rule can leave connections uncoupled: they run plain NewReno, counted.
    ccc.rule_del(0)
    ccc.rule_del(0)
    ccc.rule_add(prefix="127.0.0.1/32", uncoupled=True)
    c = _connect(sink.addr)
    try:
        assert _pump([c], 0.3, sink)[0] > 0
        assert _members() == 0
        assert ccc.status()["stats"]["uncoupled_by_rule"] == 1
    finally:
        c.close()
        sink.close()


def _set_rules_seq(n: int) -> None:
    """Writes the rules' sequence count as a rule writer does (odd: a rewrite in progress)."""
    subprocess.run(["bpftool", "map", "update", "pinned", f"{ccc.PIN_DIR}/rules_seq", "key", "hex", "00", "00", "00",
                    "00", "value", "hex", *[f"{b:02x}" for b in struct.pack("=Q", n)]], check=True, capture_output=True)


@needs_bpf
@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool is not installed (make test installs it)")
def test_a_connection_that_met_a_rules_rewrite_is_classified_again_once_it_ends(loaded: None) -> None:
    """A connection that starts while user space rewrites the rules (the count odd on both reads)
    runs with no rule, counted as rules_busy; once the rules are still, its next ACK classifies
    it again and it moves to the group and priority its rule gives (counted as reclassified)."""
    sink = Sink()
    port = sink.addr[1]
    ccc.rule_add(prefix="127.0.0.0/8", ports=(port, port), group=7, priority=3)
    _set_rules_seq(1001)  # a writer between its two steps, for as long as this test says
    a = _connect(sink.addr)
    try:
        _pump([a], 0.3, sink)
        st = ccc.status()
        assert st["stats"]["rules_busy"] == 1 and st["stats"]["reclassified"] == 0, st["stats"]
        (g,) = [g for g in st["groups"] if g["members"]]
        assert g["name"].startswith("pair ") and [m["priority"] for m in g["members"]] == [1], g
        _pump([a], 0.3, sink)  # still being rewritten: each ACK tries again and finds it busy
        assert ccc.status()["stats"]["reclassified"] == 0
        _set_rules_seq(1002)
        assert _pump([a], 0.5, sink)[0] > 0
        st = ccc.status()
        assert st["stats"]["reclassified"] == 1 and st["stats"]["rules_busy"] == 1, st["stats"]
        live = [g for g in st["groups"] if g["members"]]
        assert [(g["name"], [m["priority"] for m in g["members"]]) for g in live] == [("group 7", [3])], live
        assert all(not g["inconsistencies"] for g in st["groups"])
    finally:
        a.close()
        sink.close()
    assert _wait(lambda: _members() == 0)


@needs_bpf
def test_status_shows_what_it_was_loaded_with() -> None:
    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the test would unload it")
    ccc.load(handover=False, max_burst_pkts=4, stale_s=7)
    try:
        st = ccc.status()
        assert st["config"] == {"handover": False, "stale_s": 7, "max_burst_pkts": 4}
        assert "loaded with: handover off by default, burst limit 4, stale after 7 s" in ccc.format_status(st)
    finally:
        ccc.unload()


@needs_bpf
def test_a_full_group_runs_the_next_connection_uncoupled_and_counts_it(loaded: None) -> None:
    sink = Sink()
    socks = [_connect(sink.addr) for _ in range(ccc_max() + 1)]
    try:
        sent = _pump(socks, 2.0, sink)
        assert all(b > 0 for b in sent), ("every connection delivers, the one that could not join too", sent)
        st = ccc.status()
        (g,) = st["groups"]
        assert len(g["members"]) == ccc_max() and g["inconsistencies"] == []
        assert st["stats"]["uncoupled_group_full"] == 1
        assert "uncoupled_group_full 1" in ccc.format_status(st)
    finally:
        for s in socks:
            s.close()
        sink.close()
    assert _wait(lambda: _members() == 0)


def ccc_max() -> int:
    return 64


@needs_bpf
def test_unloading_while_connections_use_it(loaded: None) -> None:
    """Unload unregisters the name at once; a connection using it keeps it and keeps sending;
    once it closes, the kernel frees the program."""
    before = set(_OLDER_PROGRAMS)  # not this test's
    sink = Sink()
    s = _connect(sink.addr)
    try:
        assert _pump([s], 0.2, sink)[0] > 0
        r = ccc.unload()
        assert r["coupled_connections"] == 1
        assert ccc.CC_NAME not in open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        with socket.socket() as t, pytest.raises(OSError) as e:
            t.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, ccc.CC_NAME.encode())
        assert e.value.errno == errno.ENOENT
        assert _cc_of(s) == ccc.CC_NAME
        assert _pump([s], 0.3, sink)[0] > 0
    finally:
        s.close()
        sink.close()
    # With its last user gone, the struct_ops map and its programs are freed: a new load works.
    assert _wait(lambda: not set(_mf_programs()) - before, timeout=10), (_mf_programs(), before)
    ccc.load()
    assert ccc.is_loaded()


def _mf_programs() -> List[str]:
    """IDs of loaded BPF programs named mf_init (bpftool; the kernel frees them asynchronously)."""
    p = subprocess.run(["bpftool", "prog", "show", "name", "mf_init"], capture_output=True, text=True)
    return [ln for ln in p.stdout.splitlines() if "mf_init" in ln]


def _ns(name: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, check=True)


@needs_bpf
def test_per_route_congctl_couples_connections_that_never_ask(loaded: None) -> None:
    """`ip route ... congctl macroflow_ccc` in a namespace: the client sets no option, and its
    connections are coupled."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"mfc{tag}a", f"mfc{tag}b"
    subprocess.run(["ip", "netns", "add", a], check=True)
    subprocess.run(["ip", "netns", "add", b], check=True)
    try:
        subprocess.run(["ip", "link", "add", "v0", "netns", a, "type", "veth", "peer", "name", "v1", "netns", b], check=True)
        _ns(a, "ip", "addr", "add", "10.9.0.1/24", "dev", "v0")
        _ns(b, "ip", "addr", "add", "10.9.0.2/24", "dev", "v1")
        for n, dev in ((a, "v0"), (b, "v1")):
            _ns(n, "ip", "link", "set", dev, "up")
            _ns(n, "ip", "link", "set", "lo", "up")
        _ns(a, "ip", "route", "replace", "10.9.0.2/32", "dev", "v0", "congctl", ccc.CC_NAME)
        server = subprocess.Popen(["ip", "netns", "exec", b, "python3", "-c",
                                   "import socket,threading\ns=socket.socket();s.bind(('10.9.0.2',5001));s.listen(8);print('up',flush=True)\n"
                                   "def drain(c):\n while c.recv(65536): pass\n"
                                   "while True:\n c,_=s.accept()\n threading.Thread(target=drain,args=(c,),daemon=True).start()"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert _readline(server.stdout).strip() == "up"
            client = ("import socket,time\nss=[socket.create_connection(('10.9.0.2',5001), timeout=10) for _ in range(3)]\n"
                      "end=time.time()+1.5\nwhile time.time()<end:\n for s in ss: s.send(b'x'*65536)\n"
                      "print(ss[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b'\\0').decode(), flush=True)\n"
                      "input()\n")
            c = subprocess.Popen(["ip", "netns", "exec", a, "python3", "-c", client], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            try:
                assert _readline(c.stdout).strip() == ccc.CC_NAME
                (g,) = ccc.status()["groups"]
                assert g["name"] == "pair 10.9.0.1 -> 10.9.0.2" and len(g["members"]) == 3
            finally:
                c.communicate("\n", timeout=10)
        finally:
            server.kill()
            server.wait()
        assert _wait(lambda: _members() == 0)
    finally:
        subprocess.run(["ip", "netns", "del", a])
        subprocess.run(["ip", "netns", "del", b])


@needs_bpf
def test_the_cli(loaded: None) -> None:
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["linux", "rule", "add", "--prefix", "192.0.2.0/24", "--ports", "80-90",
                                 "--group", "3", "--priority", "2.5"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["linux", "rule", "list"])
    assert "0: to 192.0.2.0/24 ports 80-90 -> group 3, priority 2.5" in r.output
    r = CliRunner().invoke(app, ["linux", "rule", "add", "--ports", "x-y"])
    assert r.exit_code == 2 and "--ports takes" in r.output
    r = CliRunner().invoke(app, ["linux", "status"])
    assert r.exit_code == 0 and "no coupled connection" in r.output and "group 3" in r.output
    r = CliRunner().invoke(app, ["linux", "load"])
    assert r.exit_code == 2 and "already loaded" in r.output
    r = CliRunner().invoke(app, ["linux", "rule", "del", "0"])
    assert r.exit_code == 0 and ccc.rules() == []
    r = CliRunner().invoke(app, ["linux", "unload"])
    assert r.exit_code == 0 and not ccc.is_loaded()


@needs_bpf
def test_a_member_silent_for_stale_s_is_taken_out_and_rejoins_when_it_sends_again() -> None:
    """A member whose connection has not reported for stale_s is taken out of its group by another
    member's ACK (what removes a connection the kernel destroyed without release); the connection,
    alive but idle here, joins again when it next sends."""
    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the test would unload it")
    ccc.load(stale_s=2)
    sink = Sink()
    socks: List[socket.socket] = []
    try:
        idle = _connect(sink.addr)
        idle.sendall(b"x" * 200_000)
        busy = _connect(sink.addr)
        socks += [idle, busy]
        assert _wait(lambda: _members() == 2, timeout=5)
        _pump([busy], 5.0, sink)  # idle says nothing for 5 s
        (g,) = ccc.status()["groups"]
        assert len(g["members"]) == 1, g
        assert g["members"][0]["idle_s"] <= 1, g
        stats = ccc.status()["stats"]
        assert stats["evicted_stale"] == 1 and stats["rejoined"] == 0, stats
        _pump([idle, busy], 2.0, sink)
        assert _members() == 2, ccc.status()["groups"]
        stats = ccc.status()["stats"]
        assert stats["rejoined"] == 1 and stats["connections_coupled"] == 3, stats
        with pytest.raises(ValueError, match="stale_s"):
            ccc.load(stale_s=-1)
    finally:
        for s in socks:
            s.close()
        sink.close()
        ccc.unload()


STALE_S = 3


@needs_bpf
def test_64_connections_opening_and_closing_at_random_keep_the_group_consistent(loaded: None) -> None:
    """Issue 16's concurrency check: 64 connections of one group open, send a random amount and
    close, at random, for 60 s. Every status snapshot taken meanwhile (each group read under its
    lock) must be consistent (sum of priorities, counts of members not in SS, timed out and in
    handover equal to the members', indices in range); afterwards the group is empty with its sums
    zero (the program keeps an emptied group), and every connection that started was released."""
    import random

    ccc.unload()
    ccc.load(stale_s=STALE_S)  # so that a member left by a connection without release goes soon
    sink = Sink()
    seconds, workers = 60.0, 64
    end = time.monotonic() + seconds
    opened = [0] * workers
    failures: List[str] = []

    def worker(k: int) -> None:
        rng = random.Random(1000 + k)
        while time.monotonic() < end:
            try:
                s = _connect(sink.addr, prio=rng.choice([0.5, 1, 2, 3]))
                s.settimeout(5)
                opened[k] += 1
                left = rng.randint(1, 300) * 1000
                while left > 0:
                    left -= s.send(b"x" * min(left, 65536))
                time.sleep(rng.random() * 0.05)
                if rng.random() < 0.5:  # half close with a reset: the socket goes at once
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError as e:  # counted: the test fails on any
                failures.append(f"worker {k}: {e!r}")
                return

    snapshots, seen_members, bad = 0, 0, []
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in ts:
        t.start()
    while any(t.is_alive() for t in ts):
        st = ccc.status()
        snapshots += 1
        for g in st["groups"]:
            seen_members = max(seen_members, len(g["members"]))
            if g["inconsistencies"] or len(g["members"]) > 64:
                bad.append((g["name"], g["inconsistencies"], len(g["members"])))
        time.sleep(0.02)
    for t in ts:
        t.join()
    sink.close()
    assert not failures, failures[:5]
    assert not bad, bad[:5]
    assert snapshots > 500 and seen_members > 32, (snapshots, seen_members)
    # A closed socket leaves its group when the kernel destroys it (release), which for a graceful
    # close with data in flight is after its FIN handshake: wait for the kernel's sockets first.
    assert _wait(lambda: not _open_sockets(sink.addr[1]), timeout=120), _open_sockets(sink.addr[1])
    # The kernel destroys a closed socket (and calls release) some time after ss stops listing it.
    _wait(lambda: _members() == 0, timeout=20)
    # On this VM about 1 connection in 50,000 is destroyed without release (traced: the kernel's
    # tcp_destroy_sock with no call of ours, in a softirq while PID 1 ran): its member stays until
    # it has been silent for stale_s and another member's ACK or a joiner takes it out.
    phantoms = _members()
    if phantoms:
        print(f"{phantoms} members left by connections destroyed without release; stats {ccc.status()['stats']}")
        late = Sink()  # same address pair, so the same group
        s = _connect(late.addr)
        _pump([s], STALE_S + 4.0, late)
        s.close()
        late.close()
        assert _wait(lambda: _members() == 0, timeout=20), ccc.status()["groups"]
    (g,) = ccc.status()["groups"]  # afterwards the group is empty and its sums are zero
    assert g["sum_cwnd_pkts"] == 0 and g["sum_ssthresh_pkts"] == 0 and g["sum_priority"] == 0
    stats = ccc.status()["stats"]
    assert stats["evicted_stale"] >= phantoms, (stats, phantoms)  # and live ones silent for 3 s rejoined
    # Every connection started: at init, or (when the kernel skipped init) at its first cwnd event.
    assert stats["connections_started"] + stats["late_starts"] == sum(opened) + (1 if phantoms else 0), (stats, sum(opened))
    assert stats["connections_coupled"] + stats["uncoupled_group_full"] + stats["uncoupled_group_deleting"] + \
        stats["never_joined"] == stats["connections_started"] + stats["late_starts"] + stats["rejoined"], stats
    assert sum(v for k, v in stats.items() if k.startswith("errors_")) == 0, stats
    assert stats["uncoupled_group_lost"] == 0 and stats["uncoupled_no_storage"] == 0, stats


def _coupled_dumbbell(kind: str, prios, duration: float = 30.0, starts=None, cc: str = "newreno_abc") -> str:
    starts = starts or [0.0] * len(prios)
    flows = "".join(f'[[flows]]\ntype = "tcp"\npair = 0\ncc = "{cc}"\ngroup = "g"\npriority = {p}\nstart_s = {s}\n'
                    for p, s in zip(prios, starts))
    return (f'name = "ccc-linux"\nseed = 3\nduration_s = {duration}\nsample_interval_s = 0\n'
            f'[topology]\nkind = "dumbbell"\npairs = 1\nbottleneck_rate_bps = 10e6\nbottleneck_delay_s = 0.01\n'
            f'queue_pkts = 50\n[[groups]]\nname = "g"\nkind = "{kind}"\n{flows}')


def _goodputs(tables) -> List[float]:
    f = tables["flows"].to_pylist()
    return [r["goodput_bps"] for r in sorted(f, key=lambda r: r["flow"])]


@needs_bpf
def test_the_linux_engine_runs_a_coupled_group_with_its_priorities(loaded: None) -> None:
    """A scenario's ccc group on real kernel TCP: two reno connections with priorities 1 and 3 on
    a 10 Mbit/s bottleneck share it 1:3 (ctrlTCP's shares), where uncoupled they share it
    about evenly."""
    from macroflow import linux
    from macroflow.scenario import parse

    if linux.capabilities().missing:
        pytest.skip(f"linux engine unavailable: {linux.capabilities().missing}")
    coupled = linux.run(parse(_coupled_dumbbell("ccc_int", [1, 3], cc="reno_int")))
    g0, g1 = _goodputs(coupled)
    assert g0 > 0 and g1 > 0
    assert 2.4 < g1 / g0 < 3.6, (g0, g1)
    assert 0.85 * 10e6 < g0 + g1 < 10e6, (g0, g1)
    uncoupled = linux.run(parse(_coupled_dumbbell("none", [1, 3], cc="reno_int")))
    u0, u1 = _goodputs(uncoupled)
    assert 0.6 < u1 / u0 < 1.6, (u0, u1)
    assert _wait(lambda: _members() == 0, timeout=20), ccc.status()["groups"]  # cut flows are reset
    st = ccc.status()
    assert st["stats"]["connections_coupled"] >= 2
    assert sum(v for k, v in st["stats"].items() if k.startswith("errors_")) == 0


@needs_bpf
def test_the_linux_engine_refuses_a_program_loaded_with_other_settings_than_the_scenario() -> None:
    """A macroflow_ccc loaded by hand with a burst limit would run another experiment than the
    scenario's (whose groups have none, as in the simulator): the run stops before it starts,
    saying so, and leaves the program loaded."""
    from macroflow import linux
    from macroflow.scenario import parse

    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the test would unload it")
    if linux.capabilities().missing:
        pytest.skip(f"linux engine unavailable: {linux.capabilities().missing}")
    ccc.load(max_burst_pkts=4)
    try:
        with pytest.raises(linux.LinuxEngineError, match="burst limit of 4 packets"):
            linux.run(parse(_coupled_dumbbell("ccc_int", [1, 3], cc="reno_int")))
        assert ccc.is_loaded() and ccc.status()["stats"]["connections_started"] == 0
    finally:
        ccc.unload()


@needs_bpf
def test_a_joiner_in_handover_takes_its_released_share_on_kernel_tcp(loaded: None) -> None:
    """Ack-clocked handover on real TCP: a connection joining a running one (equal priorities) is
    given segments by the other's ACKs (counted as handover_pulls when it takes them) and holds
    about half the aggregate window within a few round trips, instead of slow-starting alone."""
    from macroflow import linux
    from macroflow.scenario import parse

    if linux.capabilities().missing:
        pytest.skip(f"linux engine unavailable: {linux.capabilities().missing}")
    sc = parse(_coupled_dumbbell("ccc_handover_int", [1, 1], duration=12.0, starts=[0.0, 6.0], cc="reno_int")
               .replace("sample_interval_s = 0", "sample_interval_s = 0.05"))
    t = linux.run(sc)
    info = json.loads(t["flows"].schema.metadata[b"linux"])["info"]["ccc"]
    assert info["counters"]["handover_pulls"] > 0, info
    assert info["loaded_with"] == {"handover": True, "stale_s": 30, "max_burst_pkts": 0}, info
    assert info["counters"]["connections_coupled"] == 2 and not any(
        v for k, v in info["counters"].items() if k.startswith(("errors_", "uncoupled_"))), info
    s = t["flow_samples"].to_pydict()
    w = {0: {}, 1: {}}
    for ts, f, c in zip(s["t_s"], s["flow"], s["cwnd_pkts"]):
        if 8.0 <= ts <= 12.0 and c is not None:
            w[f][round(ts, 2)] = c
    common = sorted(set(w[0]) & set(w[1]))
    assert len(common) > 20
    share = sum(w[1][x] for x in common) / sum(w[0][x] + w[1][x] for x in common)
    assert 0.35 < share < 0.65, share
    assert _wait(lambda: _members() == 0, timeout=20)
