"""The Linux engine (issue 15): real kernel TCP in network namespaces.

These tests need root and network namespaces (CI has both). Without them they skip, saying which
is missing; the bad-input tests that need no privilege run everywhere.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from macroflow import linux
from macroflow.linux import LinuxEngineError
from macroflow.scenario import parse


def _privileged() -> str:
    """Why the namespace tests cannot run here ("" when they can)."""
    if os.geteuid() != 0:
        return "not root: the linux engine needs CAP_NET_ADMIN and CAP_SYS_ADMIN"
    caps = linux.capabilities()
    return "; ".join(caps.missing)


WHY = _privileged()
needs_netns = pytest.mark.skipif(bool(WHY), reason=f"linux engine unavailable: {WHY}")


def _ours() -> list:
    return linux.live_namespaces(own_only=True)


def _toml(v: object) -> str:
    """A value as TOML (inline tables for dicts)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def _dumbbell(pairs: int = 2, duration: float = 20.0, extra: str = "", flows: str = "", **topo: object) -> str:
    t = "".join(f"{k} = {_toml(v)}\n" for k, v in topo.items())
    f = flows or "".join(f'[[flows]]\ntype = "tcp"\npair = {i}\ncc = "newreno"\n' for i in range(pairs))
    return f'name = "lx"\nduration_s = {duration}\n{extra}\n[topology]\nkind = "dumbbell"\npairs = {pairs}\n{t}\n{f}'


# ------------------------------------------------------------------------------------------
# Bad input: refused before anything is created, naming the field and the reason.

BAD = [
    ("a video media source", _dumbbell(1, flows='[[flows]]\ntype = "media"\npair = 0\nsource = "video"\n'),
     r"flows\.0\.source = 'video'"),
    ("TCP flows in an FSE group", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "passive"\n[[flows]]\ntype = "tcp"\npair = 0\n'
                                            'group = "g"\n'), r"flows\.0: TCP flows in FSE group 'g'"),
    ("an FSE signalling delay", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "passive"\ndelay_max_s = 0.1\n[[flows]]\n'
                                          'type = "media"\npair = 0\ngroup = "g"\n'), r"flows\.0: an FSE signalling delay"),
    ("a measured group", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "measured"\n[[flows]]\ntype = "tcp"\npair = 0\n'
                                     'group = "g"\n'), r"flows\.0: measured groups run in the simulator only"),
    ("simulator-only coupler", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "etcp"\n[[flows]]\ntype = "tcp"\npair = 0\ngroup = "g"\n'),
     r"groups\.0\.kind = 'etcp': the kernel couples connections with ctrlTCP \(macroflow_ccc"),
    ("coupled cubic", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "ccc"\n[[flows]]\ntype = "tcp"\npair = 0\ngroup = "g"\ncc = "cubic"\n'),
     r"flows\.0\.cc: a flow of coupled group 'g' runs macroflow_ccc"),
    ("coupled with linux_cc", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "ccc"\n[[flows]]\ntype = "tcp"\npair = 0\ngroup = "g"\nlinux_cc = "bbr"\n'),
     r"flows\.0\.linux_cc: a flow of coupled group 'g' runs macroflow_ccc"),
    ("red queue", _dumbbell(1, queue={"kind": "red", "limit_pkts": 83}), r"topology\.queue\.kind = 'red'.*no red"),
    ("wrr queue", _dumbbell(1, queue={"kind": "random_drop", "p": 0.01, "inner": {"kind": "drr", "quantum_bytes": 1500, "limit_pkts": 100}}),
     r"topology\.queue\.inner\.kind = 'drr'"),
    ("no kernel counterpart", _dumbbell(1, flows='[[flows]]\ntype = "tcp"\npair = 0\ncc = "ledbat"\n'), r"flows\.0\.cc = 'ledbat'.*linux_cc"),
    ("sampling too fast", _dumbbell(1, extra="sample_interval_s = 0.001"), r"sample_interval_s = 0\.001"),
    ("no route", 'name = "x"\nduration_s = 5\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n'
     'links = [{from = "a", to = "b", rate_bps = 1e7, delay_s = 0.01, duplex = false}]\n[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\n',
     r"flows\.0: no route back from b to a"),
    ("rate too low", _dumbbell(1, bottleneck_rate_bps=10.0), r"at 10 bit/s"),
    ("an ack per segment", _dumbbell(1, flows='[[flows]]\ntype = "tcp"\npair = 0\ndelayed_ack = false\n'),
     r"flows\.0\.delayed_ack = false"),
    ("a group's burst limit", _dumbbell(1, flows='[[groups]]\nname = "g"\nkind = "ccc"\nmax_burst_pkts = 1e6\n[[flows]]\ntype = "tcp"\n'
                                          'pair = 0\ngroup = "g"\n'), r"groups\.0\.max_burst_pkts = 1e\+06"),
    ("too many nodes", _dumbbell(40), r"82 nodes"),
    ("the hosts' sending jitter", _dumbbell(2, access_jitter_s=0.0006), r"topology\.access_jitter_s = 0\.0006: the sending jitter"),
    ("a graph link's jitter", 'name = "x"\nduration_s = 5\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n'
     'links = [{from = "a", to = "b", rate_bps = 1e7, delay_s = 0.01}, {from = "b", to = "a", rate_bps = 1e7, delay_s = 0.01, '
     'duplex = false, jitter_s = 1e-4}]\n[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\n',
     r"topology\.links\.1\.jitter_s = 0\.0001"),
]


@pytest.mark.parametrize("what,text,message", BAD, ids=[b[0] for b in BAD])
def test_refused_by_the_plan(what: str, text: str, message: str) -> None:
    before = linux.live_namespaces()
    with pytest.raises(LinuxEngineError, match=message):
        linux.plan(parse(text))
    assert linux.live_namespaces() == before


@needs_netns
def test_a_congestion_control_the_kernel_lacks_is_refused_before_anything_is_created() -> None:
    sc = parse(_dumbbell(1, flows='[[flows]]\ntype = "tcp"\npair = 0\nlinux_cc = "nosuchcc"\n'))
    with pytest.raises(LinuxEngineError, match=r"flows\.0\.linux_cc: this kernel has no congestion control 'nosuchcc'"):
        linux.run(sc)
    assert _ours() == []


@needs_netns
def test_the_cli_refuses_with_the_field_and_creates_nothing(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "red.toml"
    f.write_text(_dumbbell(1, queue={"kind": "red", "limit_pkts": 83}))
    p = subprocess.run([sys.executable, "-m", "macroflow", "run", "--engine", "linux", str(f), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "topology.queue.kind = 'red'" in p.stderr
    assert not (tmp_path / "o").exists()
    assert linux.live_namespaces() == [n for n in linux.live_namespaces() if not n.startswith(f"{linux.PREFIX}{p.pid}r")]


def test_nested_random_drops_combine_and_notes_say_where_linux_differs() -> None:
    q = {"kind": "random_drop", "p": 0.1, "inner": {"kind": "random_drop", "p": 0.2, "inner": {"kind": "drop_tail", "limit_pkts": 50}}}
    p = linux.plan(parse(_dumbbell(1, queue=q)))
    assert p.links[0].queue.loss == pytest.approx(1 - 0.9 * 0.8) and p.links[0].queue.limit_pkts == 50
    assert any("newreno grows by a/cwnd" in n for n in p.notes)
    diamond = ('name = "d"\nduration_s = 5\n[topology]\nkind = "graph"\nnodes = ["a", "b", "c", "d"]\nlinks = ['
               + ", ".join(f'{{from = "{x}", to = "{y}", rate_bps = 1e7, delay_s = 0.01}}' for x, y in ("ab", "ac", "bd", "cd"))
               + ']\n[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "d"\ncc = "newreno_abc"\n')
    notes = linux.plan(parse(diamond)).notes
    assert any("equal-cost next hops towards d" in n for n in notes), notes
    assert not any("newreno grows" in n for n in notes)


def test_capabilities_name_what_this_kernel_lacks() -> None:
    caps = linux.capabilities()
    text = caps.describe()
    assert caps.kernel in text
    if caps.root and not caps.missing:
        assert caps.qdiscs["tbf"] and caps.qdiscs["pfifo"] and caps.qdiscs["bfifo"]
        assert ("absent: " in text) and (("netem" in text.split("absent:")[1]) != caps.qdiscs["netem"])


# ------------------------------------------------------------------------------------------
# netem, when the kernel has it: chosen automatically, commands checked here (this machine's
# kernel has no netem, so the qdisc itself is exercised only where it exists; the bridge wiring
# around it is run below with a pfifo in its place).


def _caps(netem: bool, bridge: bool = True) -> "linux.Capabilities":
    q = {k: k in ("tbf", "pfifo", "bfifo") or (k == "netem" and netem) for k in linux.PROBED_QDISCS}
    return linux.Capabilities(True, {}, q, ["reno"], "test", bridge=bridge)


def test_netem_is_used_when_present_and_the_delay_line_when_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(linux.DELAY_ENV, raising=False)
    assert linux.delay_method(_caps(netem=True)) == "netem"
    assert linux.delay_method(_caps(netem=False)) == "delay line"
    assert linux.delay_method(_caps(netem=True, bridge=False)) == "delay line"
    monkeypatch.setenv(linux.DELAY_ENV, "delayline")
    assert linux.delay_method(_caps(netem=True)) == "delay line"
    monkeypatch.setenv(linux.DELAY_ENV, "netem")
    assert linux.delay_method(_caps(netem=True)) == "netem"
    with pytest.raises(LinuxEngineError, match=r"MACROFLOW_LINUX_DELAY=netem: this kernel has no netem qdisc"):
        linux.delay_method(_caps(netem=False))
    monkeypatch.setenv(linux.DELAY_ENV, "fast")
    with pytest.raises(LinuxEngineError, match=r"MACROFLOW_LINUX_DELAY='fast': expected 'netem' or 'delayline'"):
        linux.delay_method(_caps(netem=True))


def test_netem_commands_give_each_direction_its_delay_loss_and_room() -> None:
    # A dumbbell: access links with 5 ms, the bottleneck (10 Mbit/s, 30 ms) with 1 % loss only a -> b.
    text = ('name = "n"\nduration_s = 5\n[topology]\nkind = "graph"\nnodes = ["a", "b", "c"]\nlinks = ['
            '{from = "a", to = "b", rate_bps = 1e9, delay_s = 0.005}, '
            '{from = "b", to = "c", rate_bps = 1e7, delay_s = 0.03, queue = {kind = "random_drop", p = 0.01, '
            'inner = {kind = "drop_tail", limit_pkts = 50}}, duplex = false}, '
            '{from = "c", to = "b", rate_bps = 1e7, delay_s = 0.03, duplex = false}, '
            '{from = "b", to = "a", rate_bps = 1e9, delay_s = 0.0, duplex = false}, '
            '{from = "a", to = "c", rate_bps = 1e6, delay_s = 0.0}]\n'
            '[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "c"\n')
    p = linux.plan(parse(text))
    ip, tc = linux.netem_commands(p)
    wired = [pr for pr in p.pairs if pr.wired]
    # a-b (5 ms), b->c (30 ms, loss), c->b (30 ms); the simplex b->a and the a-c link have neither
    # delay nor loss: plain veth pairs, no bridge, no netem.
    assert [pr.index for pr in wired] == [0, 1, 2] and len(p.pairs) == 5
    for pr in wired:
        assert f"link add b{pr.index} type bridge stp_state 0 forward_delay 0" in ip
        assert f"link set w{pr.index}a master b{pr.index}" in ip and f"link set w{pr.index}b master b{pr.index}" in ip
    by_dev = {line.split()[3]: line for line in tc}
    for pr in wired:
        for l, side in ((pr.ab, "b"), (pr.ba, "a")):
            dev = f"w{pr.index}{side}"
            if l is None or (l.delay_s == 0 and l.queue.loss == 0):
                assert dev not in by_dev
                continue
            line = by_dev[dev]
            assert f" netem delay {round(l.delay_s * 1e6)}us " in line, line
            limit = int(re.search(r"limit (\d+)", line).group(1))
            # Room for everything the link's rate can put in flight over the delay, in the smallest packets.
            assert limit >= l.rate_bps * l.delay_s / (8 * 28), line
            assert ("loss random 1%" in line) == (l.queue.loss > 0), line
    assert sum("loss random" in line for line in tc) == 1


def test_netem_gives_way_to_the_delay_line_where_it_cannot_express_a_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    far = ('name = "far"\nduration_s = 5\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n'
           'links = [{from = "a", to = "b", rate_bps = 1e7, delay_s = 300.0}]\n[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\n')
    p = linux.plan(parse(far))
    monkeypatch.delenv(linux.DELAY_ENV, raising=False)
    assert linux.delay_method(_caps(netem=True), p) == "delay line"  # 300 s is beyond netem's 274 s
    monkeypatch.setenv(linux.DELAY_ENV, "netem")
    with pytest.raises(LinuxEngineError, match=r"link 0 \(a -> b\): netem holds at most 274 s"):
        linux.delay_method(_caps(netem=True), p)


def test_netem_losses_are_the_links_drops() -> None:
    """netem's random loss counts as the link's drops, as the delay line's does."""
    p = linux.plan(parse(_pair(1e7, 0.01, 5.0, '[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\n')))
    rep = {"method": "netem", "wires": [{"name": "pair0", "ab": {"shaped": True, "lost_pkts": 7}, "ba": {"shaped": False}}]}
    assert linux._delay_line_losses(p, rep) == {p.pairs[0].ab.id: 7, p.pairs[0].ba.id: 0}


@needs_netns
def test_the_netem_wiring_carries_traffic_with_a_stand_in_qdisc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The netem path end to end (bridges in the wire namespace, the qdisc on each half, its
    counters in the run's facts), with pfifo standing in for netem where the kernel has none."""
    if linux.capabilities().qdiscs["netem"]:
        monkeypatch.setenv(linux.DELAY_ENV, "netem")
    else:
        monkeypatch.setattr(linux, "delay_method", lambda caps, p=None: "netem")
        monkeypatch.setattr(linux, "_netem_qdisc", lambda l: f"pfifo limit {linux._netem_limit_pkts(l)}")
    sc = parse(_pair(1e7, 0.010, 4.0, '[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\ncc = "cubic"\n'))
    tables = linux.run(sc)
    facts = json.loads({k.decode(): v.decode() for k, v in tables["flows"].schema.metadata.items()}["linux"])
    assert facts["info"]["wires"] == "netem" and facts["delay_line"] == {}
    (wire,) = facts["netem"]["wires"]
    # Data a -> b, ACKs b -> a (about one per two segments, 52 bytes against 1500): not swapped.
    assert wire["ab"]["tx_pkts"] > 1000 and wire["ba"]["tx_pkts"] > 100, wire
    assert wire["ab"]["tx_bytes"] > 10 * wire["ba"]["tx_bytes"], wire
    assert wire["ab"]["rx_pkts"] == wire["ab"]["tx_pkts"] + wire["ab"]["held_at_end_pkts"], wire
    assert wire["ab"]["own_drops_pkts"] == wire["ba"]["own_drops_pkts"] == 0, wire
    assert tables["links"].column("utilization").to_pylist()[0] > 0.7
    if not linux.capabilities().qdiscs["netem"]:
        assert wire["ab"]["qdisc"] == "pfifo"
    else:
        srtt = [s for s in tables["flow_samples"].column("srtt_s").to_pylist() if s is not None]
        assert wire["ab"]["qdisc"] == "netem" and min(srtt) >= 0.0195, min(srtt)
    assert _ours() == []


# ------------------------------------------------------------------------------------------
# The delay line.


#: A bare sleeper: N wake-ups STEP seconds apart; prints the fraction later than TOLERANCE seconds.
_SLEEPER = """
import json, sys, time
n, step, tol = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
late = []
t = time.monotonic() + step
for _ in range(n):
    time.sleep(max(0.0, t - time.monotonic()))
    late.append(time.monotonic() - t)
    t += step
print(json.dumps({"late_fraction": sum(x > tol for x in late) / n, "max_late_s": max(late), "median_late_s": sorted(late)[n // 2]}))
"""


def _idle_window(sc: object, p: object, workdir: pathlib.Path, bar_s: float, exact: bool, edge_us: float) -> dict:
    """One idle second: 100 pings through the wire with a peer sleeper beside them; the delay
    line's lateness each way against the bar, beyond the peer's (see the test)."""
    workdir.mkdir()
    with linux.Testbed(sc, p, workdir) as tb:
        tb.build()
        # The agents' epoch is far away: no flow starts while ping measures the idle wire.
        tb.start(time.monotonic_ns() + 600 * 10**9)
        tb.wait_ready(time.monotonic_ns() + 10 * 10**9)
        # The peer, in the same second: a bare SCHED_FIFO sleeper measures how late this machine
        # wakes anything up. Above the delay line's priority (10): a delay line that hogged the CPU
        # cannot make its own excuse; the sleeper's wake-ups take microseconds.
        peer_proc = subprocess.Popen(["chrt", "-f", "11", sys.executable, "-c", _SLEEPER, "200", "0.005", str(bar_s)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out = subprocess.run(["ip", "netns", "exec", tb.ns[0], "chrt", "-f", "1", "ping", "-n", "-c", "100", "-i", "0.01",
                                  p.node_addr(1)], capture_output=True, text=True, timeout=60).stdout
            peer_out, peer_err = peer_proc.communicate(timeout=60)
        finally:
            peer_proc.kill()
        assert peer_proc.returncode == 0, f"the peer sleeper failed ({peer_proc.returncode}): {peer_err}"
        peer = json.loads(peer_out)
        idle = tb.stop_delay_line()
    (wire,) = idle["wires"]
    # At 0.5 ms the report's own count; at 1 ms its histogram's buckets from 1024 us on (bucket
    # k >= 1 holds [2^(k-1), 2^k) us).
    late = {}
    for d in ("ab", "ba"):
        w = wire[d]
        late[d] = w["late_pkts"] if exact else sum(n for k, n in enumerate(w["late_hist_log2_us"]) if k >= 1 and 2 ** (k - 1) >= edge_us)
    ok = all(wire[d]["tx_pkts"] >= 100 and late[d] / wire[d]["tx_pkts"] <= 0.05 + peer["late_fraction"] for d in ("ab", "ba"))
    assert _ours() == []
    return {"ok": ok, "late": late, "peer": peer, "wire": wire, "ping": out}


def _pair(rate_bps: float, delay_s: float, duration: float, flows: str) -> str:
    return (f'name = "dl"\nduration_s = {duration}\nsample_interval_s = 0.1\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n'
            f'links = [{{from = "a", to = "b", rate_bps = {rate_bps}, delay_s = {delay_s}, queue_pkts = 1000}}]\n{flows}')


@needs_netns
@pytest.mark.parametrize("rate_bps,tolerance_s", [(10e6, 0.5e-3), (1e9, 1e-3)], ids=["10Mbit", "1Gbit"])
def test_delay_line_holds_the_delay_idle_and_carries_the_rate(rate_bps: float, tolerance_s: float, tmp_path: pathlib.Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle ping RTT through a 10 ms one-way wire, then a bulk TCP flow through it: the rate is
    carried, and the delay line neither drops nor reorders a frame.

    Idle, two instruments: the delay line's own lateness (each frame's send against its due time,
    from the kernel's receive stamp: exactly the wire's part) must be within the tolerance for
    95 % of the frames each way, and ping's median RTT within two tolerances of 20 ms (end to end: the
    configured delay is what the path shows). The machine's own wake-up lateness, measured in the
    same second by a bare SCHED_FIFO sleeper, is allowed on top, and the best of up to three idle
    windows counts. Ping's 95th percentile is shown, not held: it adds
    both hosts' stacks and ping's own send stamp (taken in userspace before the send) to the
    wire, and on CI (stop 32, 2 cores) 9 of 100 pings came back 0.9-4.2 ms late where this
    machine, loaded or not, shows none; ping runs under SCHED_FIFO below the delay line to keep
    its own scheduling out."""
    monkeypatch.setenv(linux.DELAY_ENV, "delayline")  # the delay line even where netem exists
    # The lateness bar both sides use: the report's own 0.5 ms, or the histogram's bucket edge at or
    # above the tolerance (bucket k >= 1 holds [2^(k-1), 2^k) us): 1.024 ms for 1 ms.
    exact = round(tolerance_s * 1e9) == linux.LATE_THRESHOLD_NS
    edge_us = 2 ** math.ceil(math.log2(tolerance_s * 1e6))
    bar_s = tolerance_s if exact else edge_us * 1e-6
    sc = parse(_pair(rate_bps, 0.010, 6.0, '[[flows]]\ntype = "tcp"\nsrc = "a"\ndst = "b"\ncc = "cubic"\n'))
    p = linux.check(sc)
    # This VM's scheduling noise comes and goes by the minute (a bare SCHED_FIFO sleeper late by
    # more than 0.5 ms on 0-16 % of its wake-ups, 2026-11-29): up to three idle windows, each on a
    # fresh testbed with its own peer, and the claim is that the delay line holds the delay in one.
    # A delay line that is late by itself fails all three.
    tries = []
    for attempt in range(3):
        r = _idle_window(sc, p, tmp_path / f"idle{attempt}", bar_s, exact, edge_us)
        tries.append(r)
        if r["ok"]:
            break
    assert any(r["ok"] for r in tries), [{k: v for k, v in r.items() if k != "ping"} for r in tries]
    r = next(r for r in tries if r["ok"])
    out, wire, peer = r["ping"], r["wire"], r["peer"]
    assert " 0% packet loss" in out, out
    rtts = sorted(float(x) / 1e3 for x in re.findall(r"time=([\d.]+) ms", out))
    assert len(rtts) == 100, out
    median, p95 = rtts[50], rtts[95]
    for d in ("ab", "ba"):
        assert wire[d]["own_drops_pkts"] == 0 and wire[d]["reordered_pkts"] == 0, wire
    # Two directions of 10 ms, each held within the tolerance (serialization of a ping at 10 Mbit/s
    # adds 0.07 ms each way).
    assert 0.020 <= median < 0.020 + 2 * tolerance_s, out
    print(f"idle ping RTT (window {len(tries)}): median {median * 1e3:.2f} ms, 95th percentile {p95 * 1e3:.2f} ms; peer sleeper "
          f"{peer}; delay line late (> {linux.LATE_THRESHOLD_NS / 1e6:g} ms): {wire['ab']['late_pkts']} + {wire['ba']['late_pkts']} "
          f"frames, max {max(wire['ab']['max_late_ns'], wire['ba']['max_late_ns']) / 1e6:.2f} ms, sched_fifo {wire['ab']['sched_fifo']}")
    assert _ours() == []

    tables = linux.run(sc)
    meta = {k.decode(): v.decode() for k, v in tables["flows"].schema.metadata.items()}
    dl = json.loads(meta["linux"])["delay_line"]
    (wire,) = dl["wires"]
    for d in ("ab", "ba"):
        assert wire[d]["own_drops_pkts"] == 0 and wire[d]["reordered_pkts"] == 0 and wire[d]["lost_pkts"] == 0, wire
        assert wire[d]["rx_pkts"] == wire[d]["tx_pkts"] + wire[d]["held_at_end_pkts"], wire
    assert wire["ab"]["tx_pkts"] > 1000
    # The rate carried once the flow has filled the path (from 2 s on). At 10 Mbit/s it is the
    # link's. At 1 Gbit/s a 2-core machine is CPU-bound (the delay line takes most of a core, both
    # TCP stacks the rest): 0.84 to 0.93 of the payload rate on an idle machine, 0.67 with a build
    # running beside it (CI on 7ceb42f). How fast is a benchmark's question (bench/linux_bench.py,
    # against the same link without the delay line); here only that the line carries hundreds of
    # Mbit/s without a drop: 0.5.
    s = [(r["t_s"], r["delivered_bytes"]) for r in tables["flow_samples"].to_pylist() if r["t_s"] >= 2.0]
    rate = (s[-1][1] - s[0][1]) * 8 / (s[-1][0] - s[0][0])
    assert rate > (0.9 if rate_bps < 1e8 else 0.5) * rate_bps * 1448 / 1500, (rate, s[:3], s[-3:])
    srtt = [s for s in tables["flow_samples"].column("srtt_s").to_pylist() if s is not None]
    assert min(srtt) >= 0.020 - tolerance_s, min(srtt)
    assert _ours() == []


# ------------------------------------------------------------------------------------------
# A whole run, and cleanup.


@needs_netns
def test_two_reno_flows_fill_the_dumbbell_and_leave_nothing_behind() -> None:
    # A third flow starts after the end: it never runs, and has a row of zeros (as the
    # simulator's pending flow has).
    sc = parse(_dumbbell(2, 20.0, flows='[[flows]]\ntype = "tcp"\npair = 0\n[[flows]]\ntype = "tcp"\npair = 1\nstart_s = 0.5\n'
                                        '[[flows]]\ntype = "tcp"\npair = 1\nstart_s = 30\n'))
    t = linux.run(sc)
    links = {l["link"]: l for l in t["links"].to_pylist()}
    assert links[0]["src"] == "R1" and links[0]["dst"] == "R2"
    assert links[0]["utilization"] > 0.9, links[0]
    flows = t["flows"].to_pylist()
    assert [f["cc"] for f in flows] == ["reno", "reno", "reno"]
    assert all(f["delivered_bytes"] > 1e6 for f in flows[:2]), flows
    assert flows[2]["delivered_bytes"] == 0 and flows[2]["goodput_bps"] == 0 and flows[2]["start_s"] == 30
    q = t["queue_samples"].to_pylist()
    assert len(q) >= 190 and {s["link"] for s in q} == {0}
    assert max(s["pkts"] for s in q) > 10  # reno fills the 83-packet queue
    assert t["flow_samples"].num_rows >= 2 * 190
    assert set(t["flow_samples"].column("state").to_pylist()) <= {"SS", "CA", "FR"}
    # Same columns as the simulator's tables.
    from macroflow.sim import Simulation, tables

    sim = tables(Simulation().results())
    for name, table in t.items():
        assert table.schema.names == sim[name].schema.names, name
    assert _ours() == []


@needs_netns
def test_media_flows_coupled_by_macroflowd_follow_their_priorities() -> None:
    """Seed 003 Fig. 6.6(a) cut to 24 s: three NADA flows over real UDP, coupled by the passive
    FSE of macroflowd (issue 21); at 12 s the priorities of flows 2 and 3 fall to 0.66 and 0.33,
    and their rates follow: 1.5 : 1 : 0.5 Mbit/s of the 3 Mbit/s (NADA's RMAX caps flow 1)."""
    text = (pathlib.Path(__file__).parent.parent / "scenarios" / "thesis_6_6_priorities.toml").read_text()
    text = text.replace("duration_s = 100.0", "duration_s = 24.0").replace("at_s = 50.0", "at_s = 12.0")
    t = linux.run(parse(text))
    flows = t["media_flows"].to_pylist()
    assert [f["controller"] for f in flows] == ["nada"] * 3
    assert all(f["received_bytes"] > 0.5e6 and f["mean_owd_s"] > 0.05 for f in flows), flows
    s = [r for r in t["media_samples"].to_pylist() if r["t_s"] >= 18.0]
    mean = [sum(r["rate_bps"] for r in s if r["flow"] == k) / sum(1 for r in s if r["flow"] == k) for k in range(3)]
    assert abs(mean[1] / mean[0] - 0.66) < 0.1 and abs(mean[2] / mean[0] - 0.33) < 0.1, mean
    at: dict = {}
    for r in t["media_samples"].to_pylist():
        if 8.0 <= r["t_s"] < 12.0:
            at.setdefault(r["t_s"], []).append(r["rate_bps"])
    assert at and all(max(v) / min(v) < 1.2 for v in at.values()), "equal shares before the change"
    meta = json.loads(t["flows"].schema.metadata[b"linux"])
    assert not any("macroflowd" in w for w in meta["warnings"]), meta["warnings"]
    from macroflow.sim import Simulation, tables

    sim = tables(Simulation().results())
    for name in ("media_flows", "media_samples"):
        assert t[name].schema.names == sim[name].schema.names, name
    assert _ours() == []


@needs_netns
def test_sized_web_and_udp_traffic_and_random_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sized transfer completes with its FCT, web flows run and complete, the self-similar UDP
    flow sends exactly the simulator's packets, and the bottleneck's random loss (in the delay
    line) drops about its share of frames."""
    monkeypatch.setenv(linux.DELAY_ENV, "delayline")  # its random loss drawn from the seed
    flows = ('[[flows]]\ntype = "tcp"\npair = 0\nsize_bytes = 500000\nstart_s = 0.2\ncc = "cubic"\n'
             '[[flows]]\ntype = "udp"\npair = 1\nkind = "self_similar"\nload_bps = 2e6\n'
             '[[flows]]\ntype = "web"\npair = 1\nload_bps = 1e6\nend_s = 6\n')
    text = _dumbbell(2, 10.0, flows=flows, random_drop=0.01)
    sc = parse(text)
    t = linux.run(sc)
    tcp = t["flows"].to_pylist()
    sized, web = tcp[0], tcp[1:]
    assert sized["delivered_bytes"] == 500000 and sized["fct_s"] is not None and 0.3 < sized["fct_s"] < 9, sized
    assert len(web) >= 5, web  # 1 Mbit/s of 50 kB flows over 6 s: about 15
    done = [f for f in web if f["fct_s"] is not None]
    assert len(done) >= len(web) - 2, web  # the last ones may still run at the end
    (udp,) = t["udp_flows"].to_pylist()
    assert 0 < udp["received_pkts"] < udp["sent_pkts"]
    meta = {k.decode(): v.decode() for k, v in t["flows"].schema.metadata.items()}
    (wire,) = [w for w in json.loads(meta["linux"])["delay_line"]["wires"] if w["name"] == "pair0"]  # the bottleneck
    rx = wire["ab"]["rx_pkts"]
    assert rx > 1000 and abs(wire["ab"]["lost_pkts"] / rx - 0.01) < 0.005, wire["ab"]
    links = {l["link"]: l for l in t["links"].to_pylist()}
    assert links[0]["dropped_pkts"] >= wire["ab"]["lost_pkts"]
    assert _ours() == []


@needs_netns
def test_the_cross_traffic_is_the_simulators_packet_for_packet() -> None:
    """With a UDP flow as the scenario's only random source, the Linux sender draws exactly the
    simulator's packets (the engines are compared on the same cross traffic)."""
    flows = '[[flows]]\ntype = "tcp"\npair = 0\n[[flows]]\ntype = "udp"\npair = 1\nkind = "self_similar"\nload_bps = 5e6\n'
    sc = parse(_dumbbell(2, 5.0, flows=flows))
    from macroflow.scenario import run as sim_run

    (lx,), (sim,) = linux.run(sc)["udp_flows"].to_pylist(), sim_run(sc)["udp_flows"].to_pylist()
    assert (lx["sent_pkts"], lx["sent_bytes"]) == (sim["sent_pkts"], sim["sent_bytes"]) and lx["sent_pkts"] > 1000


@needs_netns
def test_sigterm_mid_run_removes_every_namespace_and_process(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "long.toml"
    f.write_text(_dumbbell(2, 60.0))
    # With the progress bar (its refresh thread is the case where a signal reaches another
    # thread first), and two SIGTERMs: the second arrives during the cleanup and must not cut it.
    p = subprocess.Popen([sys.executable, "-m", "macroflow", "run", "--engine", "linux", str(f), "--out", str(tmp_path / "o")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mine = f"{linux.PREFIX}{p.pid}r"
    deadline = time.monotonic() + 60
    while not any(n.startswith(mine) for n in linux.live_namespaces()):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the run created no namespace in 60 s"
        time.sleep(0.05)
    time.sleep(4.0)  # agents and the delay line are up and traffic flows
    agents = subprocess.run(["pgrep", "-f", "linux_main"], capture_output=True, text=True).stdout.split()
    assert agents
    p.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err[-2000:])
    assert not any(n.startswith(mine) for n in linux.live_namespaces())
    left = [a for a in agents if pathlib.Path(f"/proc/{a}").exists()]
    assert left == [], left
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").glob("*/manifest.json"))


@needs_netns
def test_a_run_removes_namespaces_a_killed_run_left() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    # A dead process's, and one named with this process's pid that it did not make (a process
    # that had this pid before, in another container's life).
    names = [f"{linux.PREFIX}{dead.pid}r1-n0", f"{linux.PREFIX}{os.getpid()}r999-n0"]
    for name in names:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert set(names) <= set(linux.live_namespaces())
        assert linux.remove_stale() >= 2
        assert not set(names) & set(linux.live_namespaces())
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
