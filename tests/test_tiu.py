"""TiU on the running kernel (issue 17): `macroflow tiu enable | disable | status | rule`.

Two network namespaces joined by a veth pair; TiU enabled on both ends through the CLI (the
namespaces entered only for the attach), a rule for the server's address, real TCP connections
between them: status shows the host pair, its port pair and the counters; disable takes it all
off. Bad input: a clear error and nothing changed. Without root or the BPF build they skip, saying
why. (The data path itself is tested in crates/tiu-bpf: vectors.rs, wire.rs, fallback.rs.)
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
import uuid
from typing import Iterator, Tuple

import pytest
from typer.testing import CliRunner

from macroflow import tiu
from macroflow.__main__ import app

WHY = tiu.missing() or ("" if os.geteuid() == 0 else "not root: tc, cgroups and BPF need CAP_SYS_ADMIN and CAP_NET_ADMIN")
needs_root = pytest.mark.skipif(bool(WHY), reason=f"TiU cannot be enabled here: {WHY}")

SERVER = "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('10.84.0.2',5201));s.listen(16)\nfor _ in range(3):\n c,_=s.accept();d=c.recv(100);c.sendall(d);c.close()"
CLIENT = "import socket\nfor i in range(3):\n s=socket.create_connection(('10.84.0.2',5201),timeout=5);s.sendall(b'hello%d'%i);assert s.recv(100)==b'hello%d'%i;s.close()\nprint('ok')"


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def pair() -> Iterator[Tuple[str, str]]:
    if tiu.is_enabled():
        pytest.skip("TiU is enabled already (`macroflow tiu disable` first): these tests would disable it")
    tag = uuid.uuid4().hex[:6]
    a, b = f"tiuc-{tag}", f"tius-{tag}"
    subprocess.run(["ip", "netns", "add", a], check=True)
    subprocess.run(["ip", "netns", "add", b], check=True)
    try:
        subprocess.run(["ip", "link", "add", "v0", "netns", a, "type", "veth", "peer", "name", "v1", "netns", b], check=True)
        for ns, dev, addr in ((a, "v0", "10.84.0.1/24"), (b, "v1", "10.84.0.2/24")):
            subprocess.run(["ip", "-n", ns, "addr", "add", addr, "dev", dev], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        yield a, b
    finally:
        if tiu.is_enabled():
            tiu.disable()
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False)


@needs_root
def test_bad_input_changes_nothing(pair: Tuple[str, str]) -> None:
    a, b = pair
    r = cli("tiu", "enable", "--dev", f"{a}:v0", "--dev", f"{b}:nosuch")
    assert r.exit_code == 2 and "no device nosuch" in r.output, r.output
    assert not tiu.is_enabled()
    r = cli("tiu", "enable", "--dev", "lo", "--dev", f"nonamespace-{uuid.uuid4().hex[:6]}:v0")
    assert r.exit_code == 2 and "network namespace" in r.output, r.output
    r = cli("tiu", "enable", "--dev", f"{a}:v0", "--port", "0")
    assert r.exit_code == 2 and "port" in r.output, r.output
    assert not tiu.is_enabled()
    r = cli("tiu", "status")
    assert r.exit_code == 2 and "is TiU enabled?" in r.output, r.output
    r = cli("tiu", "disable")
    assert r.exit_code == 2 and "not enabled" in r.output, r.output
    # Rules need TiU enabled; malformed ones are refused before that is even asked.
    for args, why in ((["10.0.0.0/33"], "prefix length"), (["not-an-address"], "not an address"),
                      (["10.0.0.0/8", "--ports", "90-80"], "port"), (["10.0.0.0/8", "--ports", "x"], "--ports")):
        r = cli("tiu", "rule", "add", *args)
        assert r.exit_code == 2 and why in r.output, (args, r.output)
    with pytest.raises(ValueError):
        tiu.enable([("a", "b", "c")])  # type: ignore[list-item]


@needs_root
def test_enable_status_and_disable_through_the_cli(pair: Tuple[str, str]) -> None:
    a, b = pair
    r = cli("tiu", "enable", "--dev", f"{a}:v0", "--dev", f"{b}:v1", "--port", "8896")
    assert r.exit_code == 0, r.output
    assert tiu.is_enabled()
    # The offloads a TiU device needs were set.
    out = subprocess.run(["ip", "netns", "exec", a, "ethtool", "-k", "v0"], capture_output=True, text=True).stdout
    assert "tx-checksumming: off" in out and "generic-segmentation-offload: off" in out, out
    assert cli("tiu", "rule", "add", "10.84.0.2/32").exit_code == 0
    assert cli("tiu", "rule", "add", "10.84.1.0/24", "--ports", "22", "--never").exit_code == 0
    r = cli("tiu", "rule", "list")
    assert "10.84.0.2/32: TiU" in r.output and "10.84.1.0/24 ports 22-22: never TiU" in r.output, r.output
    # Three connections, one after another, echo intact.
    srv = subprocess.Popen(["ip", "netns", "exec", b, "python3", "-c", SERVER])
    # Until it listens (a connect() before would be refused, and counted).
    for _ in range(100):
        if subprocess.run(["ip", "netns", "exec", b, "ss", "-ltnH", "sport", "=", ":5201"],
                          capture_output=True, text=True).stdout.strip():
            break
        time.sleep(0.05)
    try:
        out = subprocess.run(["ip", "netns", "exec", a, "timeout", "20", "python3", "-c", CLIENT],
                             capture_output=True, text=True)
        assert out.stdout.strip() == "ok", out.stderr
    finally:
        srv.wait(timeout=10)
    st = tiu.status()
    c = st["counters"]
    # Each connection: an ID, SYN and SYN-ACK as TiU (their raw copies dropped as late), the echo.
    assert c["alloc"] == 3 and c["eg_syn"] == 6 and c["in_syn"] == 6 and c["fallback"] == 0, c
    assert c["in_data"] >= 9 and c["in_data"] == c["eg_data"], c
    assert st["port"] == 8896
    assert {(d["netns"], d["dev"]) for d in st["devices"]} == {(a, "v0"), (b, "v1")}
    text = cli("tiu", "status").output
    assert "TiU port 8896" in text and "fallen back: 0 connections" in text and "IDs: 3 allocated" in text, text
    assert cli("tiu", "rule", "del", "10.84.1.0/24").exit_code == 0
    r = cli("tiu", "rule", "del", "10.84.1.0/24")
    assert r.exit_code == 2 and "no rule" in r.output
    # Enabling again with another port is refused (both ends must agree); the same port adds.
    r = cli("tiu", "enable", "--dev", f"{a}:v0", "--port", "9999")
    assert r.exit_code == 2 and "enabled with port 8896" in r.output, r.output
    r = cli("tiu", "disable")
    assert r.exit_code == 0 and "disabled on 2 devices" in r.output, r.output
    assert not tiu.is_enabled()
    filters = subprocess.run(["tc", "-n", a, "filter", "show", "dev", "v0", "egress"], capture_output=True, text=True).stdout
    assert "tiu_egress" not in filters, filters


# Both ends send, with macroflow_ccc (the listeners' setting goes to the connections they accept):
# a connection joins its group at its first ACK of data, so the server's are grouped too, by the
# entries TiU learned from the client's SYNs.
GROUP_SERVER = """import socket, threading
def drain(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
def pump(c):
    try:
        while True:
            c.sendall(b'y' * 65536)
    except OSError:
        pass
ls = []
for port in (5201, 5202):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b'macroflow_ccc')
    s.bind(('10.84.0.2', port)); s.listen(16)
    ls.append(s)
def serve(s):
    while True:
        c, _ = s.accept()
        for f in (drain, pump):
            threading.Thread(target=f, args=(c,), daemon=True).start()
for s in ls:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print('listening', flush=True)
input()
"""

# Two connections to port 5201 (TiU by rule) and one to 5202 (plain), all with macroflow_ccc: they
# send until told to stop, after saying so once each has delivered some data.
GROUP_CLIENT = """import socket, sys, threading, time
stop = False
def pump(s):
    while not stop:
        s.sendall(b'x' * 65536)
def drain(s):
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
socks = []
for port in (5201, 5201, 5202):
    s = socket.socket(); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b'macroflow_ccc')
    s.connect(('10.84.0.2', port)); socks.append(s)
ts = [threading.Thread(target=pump, args=(s,)) for s in socks]
for t in ts:
    t.start()
for s in socks:
    threading.Thread(target=drain, args=(s,), daemon=True).start()
time.sleep(0.5)
print('sending', flush=True)
sys.stdin.readline()
stop = True
for t in ts:
    t.join()
for s in socks:
    s.shutdown(socket.SHUT_RDWR)
    s.close()
print('done', flush=True)
"""


def _readline(p: subprocess.Popen, timeout: float) -> str:
    """A line of a child's output, or "" after `timeout` (a stuck child fails the test)."""
    r, _, _ = select.select([p.stdout], [], [], timeout)
    return p.stdout.readline().strip() if r else ""


@needs_root
@pytest.mark.parametrize("first", ["ccc", "tiu"])
def test_grouping_follows_tiu_its_plain_connections_apart(pair: Tuple[str, str], first: str) -> None:
    """With TiU and macroflow_ccc both on (loaded in either order: whichever comes second shares
    the first's connections map), a host pair's connections that TiU carries form one group ("tiu
    pair"), and its plain TCP connections another ("pair"): ECMP keeps only the TiU ones on one
    path."""
    from macroflow import ccc

    if ccc.missing():
        pytest.skip(f"macroflow_ccc cannot be loaded here: {'; '.join(ccc.missing())}")
    if ccc.is_loaded():
        pytest.skip("macroflow_ccc is loaded already (`macroflow linux unload` first): the test would unload it")
    a, b = pair

    def enable_tiu() -> None:
        tiu.enable([f"{a}:v0", f"{b}:v1"], port=8896)
        tiu.rule_add("10.84.0.2/32", ports=(5201, 5201))

    try:
        if first == "ccc":
            ccc.load()
            enable_tiu()
        else:
            enable_tiu()
            ccc.load()
        # Each in a session of its own, killed as a group: `ip netns exec` execs the command.
        srv = subprocess.Popen(["ip", "netns", "exec", b, "python3", "-c", GROUP_SERVER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        cl = None
        try:
            assert srv.stdout.readline().strip() == "listening"
            cl = subprocess.Popen(["ip", "netns", "exec", a, "python3", "-c", GROUP_CLIENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
            assert _readline(cl, 30) == "sending"
            live = {g["name"]: g for g in ccc.status()["groups"] if g["members"]}
            cl.stdin.write("\n")
            cl.stdin.flush()
            assert _readline(cl, 30) == "done"
        finally:
            for p in (cl, srv):
                if p is not None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
        assert sorted((n, len(g["members"])) for n, g in live.items()) == [
            ("pair 10.84.0.1 -> 10.84.0.2", 1), ("pair 10.84.0.2 -> 10.84.0.1", 1),
            ("tiu pair 10.84.0.1 -> 10.84.0.2", 2), ("tiu pair 10.84.0.2 -> 10.84.0.1", 2)], live
        assert all(not g["inconsistencies"] for g in live.values())
        c = tiu.status()["counters"]
        assert c["alloc"] == 2 and c["fallback"] == 0 and c["eg_data"] > 0, c
    finally:
        if tiu.is_enabled():
            tiu.disable()
        if ccc.is_loaded():
            ccc.unload()


def _cgroup_root() -> str:
    with open("/proc/self/mounts") as f:
        for line in f:
            p = line.split()
            if len(p) > 2 and p[2] == "cgroup2":
                return p[1]
    pytest.skip("no cgroup v2 hierarchy is mounted")


def _offloads(ns: str, dev: str) -> dict:
    """The settings `tiu enable` changes, as they are now."""
    k = subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-k", dev], capture_output=True, text=True, check=True).stdout
    feats = ("tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")
    got = {f: line.split(":", 1)[1].split()[0] for line in k.splitlines() for f in feats if line.strip().startswith(f + ":")}
    link = subprocess.run(["ip", "-n", ns, "-d", "link", "show", "dev", dev], capture_output=True, text=True, check=True).stdout.split()
    got["gso_max_segs"] = link[link.index("gso_max_segs") + 1]
    return got


# Client and server in cgroups: run in the one named, a connection each; the server echoes.
ECHO_SERVER = "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('10.84.0.2',5201));s.listen(4)\nprint('listening',flush=True)\nwhile True:\n c,_=s.accept();c.sendall(c.recv(100));c.close()"
ECHO_CLIENT = "import socket\ns=socket.create_connection(('10.84.0.2',5201),timeout=5);s.sendall(b'hi');assert s.recv(100)==b'hi';print('ok')"


def _in_cgroup(cg: str):
    def enter() -> None:
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
    return enter


@needs_root
def test_a_second_cgroup_is_added_and_disable_puts_everything_back(pair: Tuple[str, str]) -> None:
    """`enable` with another cgroup serves that one too (a nested one is refused, nothing
    changed); `disable` puts each device's offloads and gso_max_segs back as they were, and says
    which rules and cgroups went."""
    a, b = pair
    root = _cgroup_root()
    tag = uuid.uuid4().hex[:6]
    cg1, cg2 = os.path.join(root, f"tiu-test-{tag}-1"), os.path.join(root, f"tiu-test-{tag}-2")
    sub = os.path.join(cg1, "inner")
    subprocess.run(["ip", "-n", a, "link", "set", "dev", "v0", "gso_max_segs", "100"], check=True)
    before = {(a, "v0"): _offloads(a, "v0"), (b, "v1"): _offloads(b, "v1")}
    srv = None
    try:
        for d in (cg1, cg2, sub):
            os.makedirs(d)
        r = cli("tiu", "enable", "--dev", f"{a}:v0", "--dev", f"{b}:v1", "--port", "8896", "--cgroup", cg1)
        assert r.exit_code == 0, r.output
        assert _offloads(a, "v0")["gso_max_segs"] == "1"
        assert cli("tiu", "rule", "add", "10.84.0.2/32").exit_code == 0
        srv = subprocess.Popen(["ip", "netns", "exec", b, "python3", "-c", ECHO_SERVER], stdout=subprocess.PIPE,
                               text=True, preexec_fn=_in_cgroup(cg1), start_new_session=True)
        assert _readline(srv, 10) == "listening"

        def connect_from(cg: str) -> None:
            out = subprocess.run(["ip", "netns", "exec", a, "timeout", "10", "python3", "-c", ECHO_CLIENT],
                                 capture_output=True, text=True, preexec_fn=_in_cgroup(cg))
            assert out.stdout.strip() == "ok", out.stderr

        # A client in cg2, which TiU does not serve yet: no ID, plain TCP.
        connect_from(cg2)
        assert tiu.status()["counters"]["alloc"] == 0
        # Enabling again with cg2 (a device already on is left as it is) serves it too.
        r = cli("tiu", "enable", "--dev", f"{a}:v0", "--port", "8896", "--cgroup", cg2)
        assert r.exit_code == 0, r.output
        assert tiu.status()["cgroups"] == [cg1, cg2]
        connect_from(cg2)
        c = tiu.status()["counters"]
        assert c["alloc"] == 1 and c["eg_syn"] == 2 and c["fallback"] == 0, c
        # Without --cgroup (a device added, named twice): the cgroups stay as they are, the device
        # is one.
        r = cli("tiu", "enable", "--dev", f"{a}:v0", "--dev", f"{a}:v0", "--port", "8896")
        assert r.exit_code == 0, r.output
        st = tiu.status()
        assert st["cgroups"] == [cg1, cg2] and len(st["devices"]) == 2, st
        # A cgroup inside one served already: refused, nothing changed.
        r = cli("tiu", "enable", "--dev", f"{a}:v0", "--port", "8896", "--cgroup", sub)
        assert r.exit_code == 2 and "inside or around" in r.output, r.output
        assert tiu.status()["cgroups"] == [cg1, cg2]
        r = cli("tiu", "disable")
        assert r.exit_code == 0, r.output
        assert f"detached from {cg1}, {cg2}" in r.output, r.output
        assert f"as before on v0 (netns {a}), v1 (netns {b})" in r.output, r.output
        assert "1 rules removed" in r.output and "10.84.0.2/32: TiU" in r.output, r.output
        assert {(a, "v0"): _offloads(a, "v0"), (b, "v1"): _offloads(b, "v1")} == before
        for cg in (cg1, cg2):
            links = subprocess.run(["bpftool", "cgroup", "show", cg], capture_output=True, text=True).stdout
            assert "sock_ops" not in links, links
    finally:
        if srv is not None:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait()
        if tiu.is_enabled():
            tiu.disable()
        for d in (sub, cg1, cg2):
            if os.path.isdir(d):
                os.rmdir(d)


@needs_root
def test_disable_after_a_partial_detach(pair: Tuple[str, str]) -> None:
    """Someone took a filter off one device and the whole clsact qdisc off the other: `disable`
    still takes TiU off, removes the pins and forgets the devices."""
    a, b = pair
    assert cli("tiu", "enable", "--dev", f"{a}:v0", "--dev", f"{b}:v1", "--port", "8896").exit_code == 0
    subprocess.run(["tc", "-n", a, "filter", "del", "dev", "v0", "egress"], check=True)
    subprocess.run(["tc", "-n", b, "qdisc", "del", "dev", "v1", "clsact"], check=True)
    r = cli("tiu", "disable")
    assert r.exit_code == 0 and "disabled on 2 devices" in r.output, r.output
    assert not tiu.is_enabled()
    filters = subprocess.run(["tc", "-n", a, "filter", "show", "dev", "v0", "ingress"], capture_output=True, text=True).stdout
    assert "tiu_ingress" not in filters, filters
    r = cli("tiu", "enable", "--dev", f"{a}:v0", "--port", "8896")
    assert r.exit_code == 0 and "runs on v0" in r.output and "v1" not in r.output, r.output
