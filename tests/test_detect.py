"""Grouping by measurement (macroflow.detect, `macroflow detect`): captures built here with dpkt
whose answers are known by construction, a capture written by the simulator, bad inputs, and the
bindings of the SBD and false-sharing detectors."""

import bisect
import json
import math
import random
import struct
import subprocess
import sys

import dpkt
import pytest

import macroflow as mf
from macroflow import detect as det
from macroflow._native import FalseSharingDetector, SbdConfig, SbdFlowStats, SbdGrouper


def cli(*args):
    return subprocess.run([sys.executable, "-m", "macroflow", "detect", *map(str, args)], capture_output=True, text=True)


# ------------------------------------------------------------------------------------------------
# Captures with known answers

A = ("10.1.0.1", 40000, "10.2.0.1", 5001)
B = ("10.1.0.2", 40001, "10.2.0.2", 5001)
MSS = 1000
SPACING_S = 0.005  # each flow sends every 5 ms; B half a spacing after A


def ou_queue(rng, seconds, amplitude_s, tau_s=0.2, qmax_s=0.060, dt=0.001):
    """A queueing delay sampled every ms: qmax - amplitude * |X|, X an Ornstein-Uhlenbeck process
    of unit variance and time constant tau. Mostly near full with dips (|X| is half-normal), so
    most samples lie above the mean: a congested queue by RFC 8382's skewness (about -0.15)."""
    a = math.exp(-dt / tau_s)
    b = math.sqrt(1 - a * a)
    x, out = rng.gauss(0, 1), []
    for _ in range(int(seconds / dt) + 2):
        out.append(max(0.0, qmax_s - amplitude_s * abs(x)))
        x = a * x + b * rng.gauss(0, 1)
    return out


def at(q, t, dt=0.001):
    i = int(t / dt)
    f = t / dt - i
    return q[i] * (1 - f) + q[i + 1] * f


def episodes(rng, q, rate_per_ms=0.01, length_s=0.008, dt=0.001):
    """Overflow episodes of a queue: while it is near full (above 57 ms), an episode of
    `length_s` begins in a ms with probability `rate_per_ms`; every packet sent into the queue
    during one is lost, whichever flow it belongs to (drop-tail drops in bursts)."""
    starts, until = [], -1.0
    for i, x in enumerate(q):
        t = i * dt
        if t >= until and x > 0.057 and rng.random() < rate_per_ms:
            starts.append(t)
            until = t + length_s
    return starts, length_s


def in_episode(ep, s):
    starts, length = ep
    i = bisect.bisect_right(starts, s) - 1
    return i >= 0 and s < starts[i] + length


def traffic(shared, seconds=30.0, seed=1, hz=1000, base_b=0.030, repeats=3):
    """Segments (capture time s, flow, seq, payload, tsval, send time s) of flows A and B, each sending an MSS
    every 5 ms (B half a spacing after A) with a TSval ticking at `hz` from a random offset per
    flow (as Linux's). OWD = a propagation delay (30 ms for A, `base_b` for B) + the queueing
    delay at the send time: one queue process for both flows (`shared`), or two independent ones
    of different amplitude and time constant. A flow's packets leave in the order they came (a
    FIFO: at least 0.1 ms apart). Packets sent during an overflow episode of their queue are lost
    (never captured; retransmitted 200 ms later, with a new TSval); `repeats` of A's segments are
    captured twice. Returns (segments, gaps per flow, fills per flow, repeats of A)."""
    rng = random.Random(seed)
    qa = ou_queue(rng, seconds + 1, 0.010)
    qb = qa if shared else ou_queue(rng, seconds + 1, 0.020, tau_s=0.3)
    ea = episodes(rng, qa)
    eb = ea if shared else episodes(rng, qb)
    segs, gaps, fills, reps = [], [0, 0], [0, 0], 0
    for fi, (q, ep, base, off) in enumerate(((qa, ea, 0.030, 0.0), (qb, eb, base_b, SPACING_S / 2))):
        ts_off = rng.randrange(1 << 32)
        isn = rng.randrange(1 << 32)
        n = int((seconds - 1.0) / SPACING_S)
        last = 0.0
        for k in range(n):
            s = off + k * SPACING_S
            seq = (isn + k * MSS) % (1 << 32)
            if in_episode(ep, s) and k < n - 100:
                gaps[fi] += 1
                fills[fi] += 1
                s = s + 0.2  # the retransmission
                segs.append((s + base + at(q, s), fi, seq, MSS, (ts_off + int(s * hz)) % (1 << 32), s))
                continue
            last = max(s + base + at(q, s), last + 0.0001)
            segs.append((last, fi, seq, MSS, (ts_off + int(s * hz)) % (1 << 32), s))
            if fi == 0 and k % 1500 == 700 and reps < repeats:  # a copy of a segment captured already
                reps += 1
                s2 = s + 0.05
                segs.append((s2 + base + at(q, s2), fi, seq, MSS, (ts_off + int(s2 * hz)) % (1 << 32), s2))
    segs.sort()
    return segs, gaps, fills, reps


def ip_packet(flow, seq, plen, tsval, headers_only=False, v6=False):
    src, sport, dst, dport = flow
    opts = b"\x01\x01\x08\x0a" + struct.pack(">II", tsval, 0) if tsval is not None else b""
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=1, flags=dpkt.tcp.TH_ACK, opts=opts,
                       data=b"" if headers_only else b"\x00" * plen)
    tcp.off = (20 + len(opts)) // 4
    if v6:
        import ipaddress

        s6 = ipaddress.IPv6Address("fd00::" + src.replace(".", ":")).packed
        d6 = ipaddress.IPv6Address("fd00::" + dst.replace(".", ":")).packed
        pkt = dpkt.ip6.IP6(src=s6, dst=d6, nxt=6, hlim=64, data=tcp, plen=len(tcp))
        return bytes(pkt)
    import socket

    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=6, ttl=64, data=tcp)
    b = bytearray(bytes(ip))
    if headers_only:  # as the simulator writes: the IP total length counts the payload not captured
        b[2:4] = struct.pack(">H", 20 + len(tcp) + plen)
    return bytes(b)


def write_capture(path, segs, link="ethernet", tsval=True):
    """`segs` as a capture: "ethernet" (pcap, microseconds, whole packets), "raw" (pcap,
    nanoseconds, raw IPv4 headers only, as the simulator writes), "sll" (Linux cooked v1, pcap),
    "sll2-v6" (pcapng, Linux cooked v2, IPv6)."""
    flows = (A, B)
    with open(path, "wb") as f:
        if link == "ethernet":
            w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
        elif link == "raw":
            w = dpkt.pcap.Writer(f, linktype=101, nano=True, snaplen=65535)  # LINKTYPE_RAW, as the simulator
        elif link == "sll":
            w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_LINUX_SLL, snaplen=65535)
        else:
            w = dpkt.pcapng.Writer(f, linktype=dpkt.pcap.DLT_LINUX_SLL2, snaplen=65535)
        for t, fi, seq, plen, tv, _sent in segs:
            p = ip_packet(flows[fi], seq, plen, tv if tsval else None, headers_only=(link == "raw"), v6=(link == "sll2-v6"))
            if link == "ethernet":
                p = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=0x0800, data=p))
            elif link == "sll":
                p = bytes(dpkt.sll.SLL(type=0, hrd=1, hlen=6, hdr=b"\x02" * 6 + b"\0\0", ethtype=0x0800)) + p
            elif link == "sll2-v6":
                p = bytes(dpkt.sll2.SLL2(ethtype=0x86DD, intindex=1, hrd=1, type=0, hlen=6, hdr=b"\x02" * 6 + b"\0\0")) + p
            w.writepkt(p, ts=t)


@pytest.fixture(scope="module")
def shared_capture(tmp_path_factory):
    """30 s of A and B through one queue, as Ethernet (pcap, microseconds, whole packets)."""
    segs, gaps, fills, reps = traffic(shared=True, seed=1)
    path = tmp_path_factory.mktemp("detect") / "shared.pcap"
    write_capture(path, segs, "ethernet")
    return path, segs, gaps, fills, reps


@pytest.fixture(scope="module")
def independent_capture(tmp_path_factory):
    """30 s of A and B through two independent queues, as raw IPv4 headers with nanosecond
    timestamps (the simulator's format)."""
    segs, gaps, fills, reps = traffic(shared=False, seed=2)
    path = tmp_path_factory.mktemp("detect") / "independent.pcap"
    write_capture(path, segs, "raw")
    return path, segs, gaps, fills, reps


def by_port(cap):
    return {f.sport: f for f in cap.flows}


@pytest.mark.parametrize("link", ["ethernet", "raw", "sll", "sll2-v6"])
def test_every_link_type_reads_the_same_flows_losses_and_delays(tmp_path, link):
    segs, gaps, fills, reps = traffic(shared=True, seconds=6.0, seed=3)
    path = tmp_path / f"{link}.pcap"
    write_capture(path, segs, link)
    cap = det.read_capture(path)
    assert cap.link_type == {"ethernet": 1, "raw": 101, "sll": 113, "sll2-v6": 276}[link]
    assert len(cap.flows) == 2 and not cap.skipped and not cap.truncated
    fa, fb = by_port(cap)[40000], by_port(cap)[40001]
    v6 = link == "sll2-v6"
    assert fa.spec == ("[fd00::10:1:0:1]:40000-[fd00::10:2:0:1]:5001" if v6 else "10.1.0.1:40000-10.2.0.1:5001")
    for f, fi in ((fa, 0), (fb, 1)):
        mine = [s for s in segs if s[1] == fi]
        assert f.proto == "tcp" and f.packets == f.data_packets == f.ts_packets == len(mine)
        assert (f.gaps, f.fills) == (gaps[fi], fills[fi]), "every loss is a gap later filled by its retransmission"
        assert f.repeats == (reps if fi == 0 else 0)
        assert f.ts_hz == 1000 and abs(f.ts_hz_estimate / 1000 - 1) < 0.01
        assert f.usable() is None
        # OWD = capture time - TSval / 1000 Hz, re-based on the flow's first: the true OWD (capture
        # time - send time) re-based the same way, within TSval's 1 ms rounding (and the
        # capture's microsecond timestamps).
        got = [e[2] for e in cap.events if e[1] == f.index]
        true = [round((t - sent) * 1e9) for t, _fi, _seq, _plen, _tv, sent in mine]
        # TSval = offset + floor(send time * 1000): measured - true = (frac_i - frac_0) ms, frac the
        # part of a ms TSval drops; adding the first's back leaves frac_i in [0, 1 ms).
        frac0_ns = (mine[0][5] * 1000 - int(mine[0][5] * 1000)) * 1e6
        err = [g - (x - true[0]) + frac0_ns for g, x in zip(got, true)]
        assert all(-2_000 <= e < 1_002_000 for e in err), (min(err), max(err))
    # Selection by spec (IPv6 in brackets) and by index, in one comma-separated string.
    assert det.select(cap, [f"{fa.spec},{fb.index}"]) == [fa, fb]
    # A gap's segments are lost at the segment that revealed the gap; repeats carry a loss too.
    assert sum(e[3] for e in cap.events) == sum(gaps) and sum(e[4] for e in cap.events) == reps


def test_shared_queue_is_grouped_and_shares(shared_capture):
    """One queue process for both flows (same statistics, correlated delays, losses in the same
    overflow episodes): SBD puts them in one group at every grouping after its warm-up and never
    apart; the three correlation tests say share and never no share; the out-of-order test
    cannot fire on capture order."""
    path, segs, gaps, fills, reps = shared_capture
    cap = det.read_capture(path)
    r = det.detect(cap, det.select(cap))
    s = r["summary"]
    assert s["sbd"]["groups"] == [[0, 1]] and s["sbd"]["congested"] == {0: "skew", 1: "skew"}
    tally = s["pairs"]["0-1"]["sbd"]
    assert tally["apart"] == 0 and tally["together"] >= 20
    warm = r["config"]["warmup_intervals"] * r["config"]["sbd"]["t_s"]
    assert warm == pytest.approx(21.0) and tally["first_together_s"] == pytest.approx(warm)
    for x in r["intervals"]:
        if x["t_s"] < warm - 1e-9:
            assert x["sbd"]["insufficient_data"] == [0, 1], "no decision during the warm-up"
        else:
            assert x["sbd"]["groups"] == [[0, 1]]
    pair = s["pairs"]["0-1"]
    for test in ("asymmetric_loss", "symmetric_loss", "delay"):
        assert pair[test]["decision"] == "share", test
        assert pair[test]["history"]["first_no_share_at_s"] is None, test
        assert pair[test]["history"]["share_detection_time_s"] < 15.0
    assert pair["delay"]["cross"]["lo"] > pair["delay"]["auto"]["hi"]
    assert pair["out_of_order"]["decision"] == "inconclusive" and pair["out_of_order"]["reordered_pkts"] == 0
    # Every segment took its place once: as an arrival, or as a loss reported at its gap.
    c = pair["counters"]
    assert c["packets"] == len(segs) and c["loss_reports"] == sum(gaps)
    assert c["after_finalized"] == 0 and c["unreported_pkts"] == 0 and c["pending_pkts"] == 0
    st = s["flows"]["0"]["counters"]
    assert st["lost_pkts"] == gaps[0] + reps and st["received_pkts"] == len([x for x in segs if x[1] == 0])


def test_independent_queues_are_split_and_do_not_share(independent_capture):
    """Two independent queue processes, one twice the other's amplitude: SBD splits the flows by
    var_est at every grouping after the warm-up and never puts them together; the three
    correlation tests say no share and never share."""
    path, segs, gaps, fills, reps = independent_capture
    cap = det.read_capture(path)
    assert cap.link_type == 101
    a, b = by_port(cap)[40000].index, by_port(cap)[40001].index
    r = det.detect(cap, det.select(cap))
    s = r["summary"]
    assert s["sbd"]["groups"] == [[0], [1]]
    (split,) = s["sbd"]["splits"]
    assert split["step"] == "var_est" and (split["below"], split["above"]) == (a, b)
    assert split["above_value"] > 1.5 * split["below_value"] and split["threshold"] == pytest.approx(0.1 * split["above_value"])
    tally = s["pairs"]["0-1"]["sbd"]
    assert tally["together"] == 0 and tally["apart"] >= 20
    pair = s["pairs"]["0-1"]
    for test in ("asymmetric_loss", "symmetric_loss", "delay"):
        assert pair[test]["decision"] == "no_share", test
        assert pair[test]["history"]["first_share_at_s"] is None, test
    assert pair["delay"]["cross"]["hi"] < pair["delay"]["auto"]["lo"]


def test_different_path_delays_mislead_the_correlation_tests_not_sbd(tmp_path):
    """The documented limit of capture order as the shared sequence number: one queue, but B's
    path to the capture point 15 ms longer (three packet spacings). SBD, on each flow's own
    statistics, still groups them; the correlation tests compare each packet with the other flow's
    packet captured before it, sent 15 ms earlier, and say no share."""
    segs, *_ = traffic(shared=True, seed=1, base_b=0.045)
    path = tmp_path / "offset.pcap"
    write_capture(path, segs, "ethernet")
    cap = det.read_capture(path)
    r = det.detect(cap, det.select(cap))
    assert r["summary"]["sbd"]["groups"] == [[0, 1]] and r["summary"]["pairs"]["0-1"]["sbd"]["apart"] == 0
    assert r["summary"]["pairs"]["0-1"]["delay"]["decision"] == "no_share"


def test_cli_prints_a_line_per_interval_and_a_summary(shared_capture):
    path = shared_capture[0]
    r = cli(path, "--interval-s", "5")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    rows = [x for x in lines if x.lstrip()[:1].isdigit()]
    end = f"{det.read_capture(path).duration_s:.3f}"  # the last packet
    assert [x.split("s")[0].strip() for x in rows] == ["5.000", "10.000", "15.000", "20.000", "25.000", end]
    assert "warm-up: 0,1" in rows[0] and "0-1: share/share/share/-" in rows[-1] and "SBD {0,1}" in rows[-1]
    assert "SBD {0,1}" in rows[-2]  # 25 s: past the 21 s warm-up
    assert "  SBD: {0,1}" in lines and any(x.strip().startswith("delay: share (first share at") for x in lines)
    # --json: the same run as a document, and the flows selected by spec or by index.
    r = cli(path, "--json", "--flows", "10.1.0.1:40000-10.2.0.1:5001", "--flows", "1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [f["index"] for f in doc["flows"]] == [0, 1] and doc["config"]["interval_s"] == pytest.approx(0.35)
    assert doc["summary"]["sbd"]["groups"] == [[0, 1]]
    assert {k: v["decision"] for k, v in doc["summary"]["pairs"]["0-1"].items() if k in det.TESTS} == {
        "asymmetric_loss": "share", "symmetric_loss": "share", "delay": "share", "out_of_order": "inconclusive"}
    # A row every T up to the last packet, and the final one at it.
    assert len(doc["intervals"]) == math.floor(float(end) / 0.35) + 1 and doc["intervals"][-1]["final"]
    r = cli(path, "--flows", "0,1", "--confidence", "0.99", "--interval-s", "10", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["config"]["confidence"] == 0.99


def test_cli_lists_flows(shared_capture, tmp_path):
    path, segs, gaps, fills, reps = shared_capture
    r = cli(path, "--list")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "2 flows" in out[0] and "link type 1, Ethernet" in out[0]
    row = next(x for x in out if "10.1.0.1:40000-10.2.0.1:5001" in x)
    n = len([s for s in segs if s[1] == 0])
    assert row.split()[:6] == ["0", "tcp", "10.1.0.1:40000-10.2.0.1:5001", str(n), str(n), str(n)]
    assert f"{gaps[0] + reps} ({gaps[0]}+{reps})" in row and "1000 Hz" in row and row.endswith("yes")
    doc = json.loads(cli(path, "--list", "--json").stdout)
    assert [(f["sport"], f["gaps"], f["repeats"], f["fills"], f["ts_hz"]) for f in doc] == [
        (40000, gaps[0], reps, fills[0], 1000), (40001, gaps[1], 0, fills[1], 1000)]


# ------------------------------------------------------------------------------------------------
# A capture written by the simulator

def test_simulator_capture_is_read_with_microsecond_tsval(tmp_path):
    """The simulator's pcap (raw IPv4 headers, nanosecond timestamps, TSval in microseconds of
    the send time): two Reno flows through the dissertation's dumbbell, captured as they start
    serialization on the bottleneck. Known: every bottleneck drop is a gap of its flow, each
    retransmitted once (filled); the OWD up to the capture point is the bottleneck queue's wait,
    spanning at most its 83 packets of 1.2 ms; the flows share that queue, and the delay test
    says so."""
    from macroflow.sim import Simulation, tables

    s = Simulation(seed=1)
    d = s.dumbbell(2)
    s.add_tcp_flow(d["senders"][0], d["receivers"][0])
    s.add_tcp_flow(d["senders"][1], d["receivers"][1], start_s=0.5)
    path = tmp_path / "bottleneck.pcap"
    s.capture(d["bottleneck"], path)
    s.run(40.0)
    s.flush_captures()
    t = tables(s.results())
    flows = t["flows"].to_pylist()
    link = t["links"].to_pylist()[d["bottleneck"]]

    cap = det.read_capture(path)
    assert cap.link_type == 101 and cap.records == link["tx_pkts"] and not cap.skipped
    assert [f.spec for f in cap.flows] == ["10.0.0.3:10000-10.0.0.4:80", "10.0.0.5:10001-10.0.0.6:80"]
    for f, sim in zip(cap.flows, flows):
        assert f.ts_hz == 1_000_000 and f.ts_packets == f.data_packets == f.packets
        assert f.gaps == f.fills == sim["retransmits"] and f.repeats == 0
    assert sum(f.gaps for f in cap.flows) == link["dropped_pkts"]
    for f in cap.flows:
        owd = [e[2] for e in cap.events if e[1] == f.index]
        span_ms = (max(owd) - min(owd)) / 1e6
        assert 90.0 < span_ms <= 83 * 1.2 + 0.01, span_ms
    r = det.detect(cap, det.select(cap))
    pair = r["summary"]["pairs"]["0-1"]
    assert pair["delay"]["decision"] == "share" and pair["delay"]["history"]["first_no_share_at_s"] is None
    assert pair["out_of_order"]["decision"] == "inconclusive"
    assert all(x["sbd"]["insufficient_data"] == [0, 1] for x in r["intervals"] if x["t_s"] < 21.0)


def test_simulator_udp_capture_is_refused(tmp_path):
    """UDP carries no send time: the simulator's UDP flows are listed but refused."""
    from macroflow.sim import Simulation

    s = Simulation(seed=1)
    d = s.dumbbell(2)
    s.add_udp_flow(d["senders"][0], d["receivers"][0], rate_bps=2e6)
    s.add_udp_flow(d["senders"][1], d["receivers"][1], rate_bps=2e6)
    path = tmp_path / "udp.pcap"
    s.capture(d["bottleneck"], path)
    s.run(2.0)
    s.flush_captures()
    r = cli(path, "--list")
    assert r.returncode == 0 and "udp" in r.stdout and "no: UDP carries no send timestamp" in r.stdout
    r = cli(path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"{path}: no TCP data segments (the detectors need TCP with the timestamp option)"
    r = cli(path, "--flows", "0")
    assert r.returncode == 2 and "UDP carries no send timestamp" in r.stderr


# ------------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit code 2, nothing on stdout

def refused(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


def test_bad_inputs_are_refused_in_one_line(tmp_path):
    segs, *_ = traffic(shared=True, seconds=4.0)
    good = tmp_path / "good.pcap"
    write_capture(good, segs, "ethernet")
    assert cli(good, "--flows", "0", "--flows", "1").returncode == 0
    refused(cli(tmp_path / "missing.pcap"), "missing.pcap: no such file")
    refused(cli(tmp_path), "a directory")
    (tmp_path / "empty.pcap").write_bytes(b"")
    refused(cli(tmp_path / "empty.pcap"), "empty file")
    (tmp_path / "text.pcap").write_text("not a capture at all\n")
    refused(cli(tmp_path / "text.pcap"), "not a pcap or pcapng file")
    (tmp_path / "header.pcap").write_bytes(bytes.fromhex("d4c3b2a1") + b"\x02\x00")
    refused(cli(tmp_path / "header.pcap"), "not a readable pcap")
    with open(tmp_path / "wifi.pcap", "wb") as f:
        dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_IEEE802_11).writepkt(b"\x00" * 30, ts=1.0)
    refused(cli(tmp_path / "wifi.pcap"), "link type 105 is not supported", "Ethernet")
    refused(cli(good, "--flows", "10.9.9.9:1-10.2.0.1:5001"), "no such flow", "--list")
    refused(cli(good, "--flows", "7"), "flow 7", "2 flows")
    refused(cli(good, "--flows", "a.b.c"), "expected an index or src:sport-dst:dport")
    refused(cli(good, "--flows", "0"), "two or more flows")
    refused(cli(good, "--interval-s", "0"), "interval_s")
    refused(cli(good, "--confidence", "1.5"), "invalid confidence: got 1.5")
    refused(cli(good, "--ts-hz", "0"), "ts_hz")
    # A capture whose TCP segments carry no timestamp option: listed, but refused for detection.
    segs, *_ = traffic(shared=True, seconds=3.0)
    write_capture(tmp_path / "nots.pcap", segs, "ethernet", tsval=False)
    r = cli(tmp_path / "nots.pcap", "--list")
    assert r.returncode == 0 and r.stdout.count("no: its data segments carry no TCP timestamp option") == 2
    refused(cli(tmp_path / "nots.pcap"), "no TCP data segment carries the timestamp option (TSval)")
    refused(cli(tmp_path / "nots.pcap", "--flows", "0,1"), "flow 0", "no TCP timestamp option")
    # Too short to tell the TSval clock rate: refused, unless --ts-hz says it.
    segs, *_ = traffic(shared=True, seconds=1.5)
    write_capture(tmp_path / "short.pcap", segs, "ethernet")
    refused(cli(tmp_path / "short.pcap"), "TSval clock rate cannot be estimated", "--ts-hz")
    assert cli(tmp_path / "short.pcap", "--ts-hz", "1000").returncode == 0


def test_truncated_capture_is_read_up_to_the_cut(tmp_path, shared_capture):
    data = shared_capture[0].read_bytes()
    (tmp_path / "cut.pcap").write_bytes(data[: len(data) // 2 + 7])
    cap = det.read_capture(tmp_path / "cut.pcap")
    assert cap.truncated and 0 < cap.records < len(shared_capture[1])
    assert "ends inside a record" in cli(tmp_path / "cut.pcap", "--list").stdout


def test_seq_tracker_counts_gaps_repeats_and_fills_across_the_wrap():
    t = det._SeqTracker()
    top = (1 << 32) - 1500
    assert t.segment(top - 1, 0, True, False) == ("syn", 0)
    assert t.segment(top, 1000, False, False) == ("new", 0)
    assert t.segment((top + 3000) % (1 << 32), 1000, False, False) == ("new", 2)  # 2 missing, across 2**32
    assert t.segment((top + 1000) % (1 << 32), 1000, False, False) == ("fill", 0)
    assert t.segment(top, 1000, False, False) == ("repeat", 1)
    assert t.segment((top + 2000) % (1 << 32), 1000, False, False) == ("fill", 0)
    assert t.segment((top + 2000) % (1 << 32), 1000, False, False) == ("repeat", 1), "the hole is filled now"
    assert t.segment((top + 4000) % (1 << 32), 0, False, True) == ("ack", 0)


# ------------------------------------------------------------------------------------------------
# The bindings

def test_sbd_config_defaults_are_rfc_8382s_and_bad_values_are_named():
    c = SbdConfig()
    assert (c.t_s, c.n, c.m, c.c_s, c.c_h, c.p_l, c.p_f, c.p_mad, c.p_d, c.p_s, c.p_v) == (
        0.35, 50, 30, -0.01, 0.3, 0.1, 0.1, 0.1, 0.1, 0.15, 0.7)
    assert c.warmup_intervals == 60 and SbdConfig(n=100).warmup_intervals == 100
    assert SbdConfig(t_s=0.5) == SbdConfig(t_s=0.5) != c and "t_s=0.35" in repr(c)
    with pytest.raises(TypeError):
        SbdConfig(0.35)  # keyword arguments only
    for kw, field in [({"t_s": 0.0}, "t_s"), ({"t_s": float("nan")}, "t_s"), ({"n": 1}, "n"), ({"m": 0}, "m"),
                      ({"m": 51}, "m"), ({"c_s": -2.0}, "c_s"), ({"c_h": -0.5}, "c_h"), ({"p_l": 1.5}, "p_l"),
                      ({"p_f": -0.1}, "p_f"), ({"p_mad": float("inf")}, "p_mad"), ({"p_d": -1.0}, "p_d"),
                      ({"p_s": float("nan")}, "p_s"), ({"p_v": -0.7}, "p_v")]:
        with pytest.raises(mf.InvalidValueError, match=f"invalid {field}: "):
            SbdConfig(**kw)
    with pytest.raises(OverflowError):
        SbdConfig(n=-1)


def test_sbd_flow_stats_by_hand():
    c = SbdConfig(t_s=1.0, n=4, m=2)
    s = SbdFlowStats(c, 10.0)
    assert s.config == c and s.current_interval_end_s == 11.0 and s.last_interval() is None
    for t, owd in ((10.1, 10_000_000), (10.5, 20_000_000), (10.9, 30_000_000)):
        s.on_packet(t, owd)
    s.on_loss(10.95, 2)
    assert s.advance(11.0) == 1 and s.current_interval_end_s == 12.0 and s.history_len == 1
    last = s.last_interval()
    assert (last["received_pkts"], last["lost_pkts"], last["mean_owd_ns"]) == (3, 2, 20_000_000.0)
    assert last["skew_samples"] == 0 and last["var_samples"] == 0, "no mean_delay or previous E[OWD] yet"
    # Interval 2: samples compared with mean_delay = 20 ms and deviating from E[OWD] = 20 ms.
    s.on_packet(11.2, 25_000_000)
    s.on_packet(11.4, 5_000_000)
    assert s.advance(13.5) == 2  # interval 2, and interval 3 empty
    sm = s.summary()
    # Over M = 2 intervals (2, and 3 empty): 25 ms above and 5 ms below mean_delay = 20 ms; their
    # deviations from interval 1's E[OWD] = 20 ms, 5 and 15 ms, average 10 ms.
    assert (sm["skew_est"], sm["skew_samples"], sm["var_est_ns"]) == (0.0, 2, 10_000_000.0)
    assert sm["mean_delay_ns"] == 15_000_000.0 and sm["freq_est"] == 0.0
    assert sm["pkt_loss"] == pytest.approx(2 / 7) and sm["intervals_closed"] == 3
    assert s.counters() == {"received_pkts": 5, "lost_pkts": 2, "intervals_closed": 3, "empty_intervals": 1,
                            "samples_without_mean_delay": 3, "samples_without_previous_mean": 3}
    s2 = SbdFlowStats(c, 10.0)
    s2.on_packet(10.1, 1)
    s2.on_packet(11.2, 25_000_000)
    s2.on_packet(11.4, 5_000_000)
    s2.advance(12.0)
    last = s2.last_interval()
    assert (last["skew_base"], last["skew_samples"]) == (-2, 2)  # both above mean_delay = 1 ns
    assert last["var_base_ns"] == pytest.approx(25_000_000 - 1 + 5_000_000 - 1) and last["var_samples"] == 2
    assert "received_pkts=3" in repr(s2)


def test_sbd_flow_stats_refuse_bad_input_and_stay_unchanged():
    s = SbdFlowStats()
    s.on_packet(1.0, 5)
    before = s.counters()
    with pytest.raises(mf.TimeWentBackwardsError):
        s.on_packet(0.5, 5)
    with pytest.raises(mf.InvalidValueError, match="invalid now_s"):
        s.on_packet(float("nan"), 5)
    with pytest.raises(mf.InvalidValueError, match="invalid now_s"):
        s.on_loss(-1.0)
    with pytest.raises(mf.InvalidValueError, match="invalid owd_ns"):
        s.on_packet(2.0, 1 << 53)
    with pytest.raises(OverflowError):
        s.on_packet(2.0, 1 << 63)
    with pytest.raises(mf.InvalidValueError, match="invalid start_s"):
        SbdFlowStats(None, -0.1)
    with pytest.raises(TypeError):
        SbdFlowStats({"t_s": 1.0})
    assert s.counters() == before


def summary(**kw):
    base = {"skew_est": -0.5, "var_est_ns": 1e6, "freq_est": 0.1, "pkt_loss": 0.0, "data_intervals": 60, "skew_samples": 100}
    return {**base, **kw}


def test_sbd_grouper_by_hand():
    g = SbdGrouper()
    out = g.group({
        1: summary(), 2: summary(var_est_ns=1.05e6), 3: summary(var_est_ns=5e6),
        4: summary(skew_est=0.5), 5: summary(data_intervals=59), 6: summary(skew_est=0.5, pkt_loss=0.2),
    })
    # 4 not congested; 5 in its warm-up; 6 congested by loss alone. Step 3 (var_est, sorted 1, 6,
    # 2, 3): 3 is five times 2, cut; 1, 6 and 2 lie within p_mad = 10%. Step 4: that group has a
    # flow above p_l, so it is divided by pkt_loss (0, 0, 0.2): 6 is cut off.
    assert out["groups"] == [[1, 2], [3], [6]]
    assert out["not_congested"] == [4] and out["insufficient_data"] == [5]
    assert out["congested"] == {1: "skew", 2: "skew", 3: "skew", 6: "loss"}
    assert [(x["step"], x["below"], x["above"]) for x in out["splits"]] == [("var_est", 2, 3), ("pkt_loss", 2, 6)]
    split = next(x for x in out["splits"] if x["above"] == 3)
    assert (split["below_value"], split["above_value"], split["threshold"]) == (1.05e6, 5e6, pytest.approx(5e5))
    # Hysteresis: 1 was congested, so skew_est 0.2 < c_h keeps it so; 4 was not, so it is not.
    assert g.was_congested(1) and not g.was_congested(4)
    out = g.group({1: summary(skew_est=0.2), 4: summary(skew_est=0.2)})
    assert out["congested"] == {1: "hysteresis"} and out["not_congested"] == [4]
    assert g.forget(1) and not g.forget(1)
    # SbdFlowStats objects are grouped on their summary (here: still warming up).
    s = SbdFlowStats()
    assert g.group({7: s, 8: summary()})["insufficient_data"] == [7]


def test_sbd_grouper_refuses_bad_summaries_and_stays_unchanged():
    g = SbdGrouper(SbdConfig(t_s=1.0))
    assert g.config.t_s == 1.0
    g.group({1: summary()})
    for flows, match in [
        ([(1, summary())], "expected a dict"),
        ({-1: summary()}, "expected a dict"),
        ({1: 3.0}, r"flows\[1\]"),
        ({1: {**summary(), "extra": 1}}, "unknown key 'extra'"),
        ({1: {k: v for k, v in summary().items() if k != "freq_est"}}, "'freq_est' is missing"),
        ({1: summary(skew_est="x")}, "'skew_est' must be a float"),
        ({1: summary(skew_est=2.0)}, "invalid skew_est"),
        ({1: summary(pkt_loss=float("nan"))}, "invalid pkt_loss"),
        ({1: summary(data_intervals=-1)}, "'data_intervals' must be an int"),
        ({2: summary(skew_est=0.9), 1: summary(var_est_ns=-1.0)}, "invalid var_est_ns"),
    ]:
        with pytest.raises(mf.InvalidValueError, match=match):
            g.group(flows)
    assert g.was_congested(1) and not g.was_congested(2), "a refused call changes nothing"
    assert g.group({1: summary(mean_delay_ns=None, intervals_closed=80)})["groups"] == [[1]]


def test_false_sharing_detector_validates_every_keyword():
    d = FalseSharingDetector(3, 4)
    assert d.flows == (3, 4) and "delay=inconclusive" in repr(d)
    with pytest.raises(mf.DuplicateFlowError):
        FalseSharingDetector(1, 1)
    for kw, field in [({"confidence": 0.0}, "confidence"), ({"confidence": 1.0}, "confidence"),
                      ({"confidence": float("nan")}, "confidence"), ({"reorder_window_pkts": 0}, "reorder_window_pkts"),
                      ({"loss_min_samples": 2000}, "loss_min_samples"), ({"loss_window_samples": 0}, "loss_window_samples"),
                      ({"delay_min_samples": 0}, "delay_min_samples"), ({"delay_window_samples": 1 << 17}, "delay_window_samples"),
                      ({"min_occasions": 0}, "min_occasions"), ({"horizon_s": 4.5}, "horizon_s"),
                      ({"occasion_gap_s": -0.5}, "occasion_gap_s"), ({"horizon_s": float("inf")}, "horizon_s"),
                      ({"start_s": -1.0}, "start_s")]:
        with pytest.raises(mf.InvalidValueError, match=f"invalid {field}: "):
            FalseSharingDetector(1, 2, **kw)
    with pytest.raises(TypeError):
        FalseSharingDetector(1, 2, 0.0, 0.9)  # the tests' parameters are keyword-only
    d = FalseSharingDetector(1, 2, 5.0)
    d.on_packet(5.0, 1, 0, 100)
    before = d.counters()
    with pytest.raises(mf.UnknownFlowError):
        d.on_packet(5.1, 9, 1, 100)
    with pytest.raises(KeyError):
        d.on_loss(5.1, 9, 1)
    with pytest.raises(mf.TimeWentBackwardsError):
        d.on_packet(4.0, 2, 1, 100)
    with pytest.raises(mf.InvalidValueError, match="invalid seq"):
        d.on_packet(5.1, 2, (1 << 64) - 1, 100)
    with pytest.raises(mf.InvalidValueError, match="invalid seq"):
        d.on_loss(5.1, 2, 0)  # number 0 is flow 1's
    with pytest.raises(mf.InvalidValueError, match="invalid owd_ns"):
        d.on_packet(5.1, 1, 1, 100 + (1 << 47))
    with pytest.raises(mf.InvalidValueError, match="invalid now_s"):
        d.flush(float("inf"))
    assert d.counters() == before


def test_false_sharing_detector_by_hand():
    """Ten reordering occasions 0.6 s apart (each: B's packet 10 numbers ahead arrives before A's
    block): the out-of-order test says no share at the tenth, 5.4 s after the start."""
    d = FalseSharingDetector(1, 2, 1.0)
    for k in range(10):
        t, base = 1.0 + 0.6 * k, 20 * k
        d.on_packet(t, 2, base + 10, 0)
        for i in range(10):
            d.on_packet(t, 1, base + i, 0)
        for i in range(11, 20):
            d.on_packet(t, 2, base + i, 0)
        if k < 9:
            assert d.decisions()["out_of_order"]["decision"] == "inconclusive"
    e = d.decisions()
    ooo = e["out_of_order"]
    assert ooo["decision"] == "no_share" and ooo["occasions"] == 10 and ooo["recent_occasions"] == 10
    assert ooo["reordered_pkts"] == 70 and ooo["max_extent_pkts"] == 10 and ooo["last_occasion_at_s"] == pytest.approx(6.4)
    h = ooo["history"]
    assert h["first_no_share_at_s"] == pytest.approx(6.4) and h["no_share_detection_time_s"] == pytest.approx(5.4)
    assert h["start_s"] == 1.0 and h["first_share_at_s"] is None and h["changes"] == 1
    assert set(e) == set(det.TESTS)
    assert e["asymmetric_loss"]["kind"] == "asymmetric" and e["symmetric_loss"]["kind"] == "symmetric"
    assert e["delay"]["decision"] == "inconclusive" and e["delay"]["auto"] is None  # delays never vary
    d.on_loss(6.5, 1, 201)  # 200 never reported: 201 waits for it
    assert d.counters()["pending_pkts"] == 1 and d.flush(6.5) == 2
    c = d.counters()
    assert (c["loss_reports"], c["packets"], c["unreported_pkts"], c["pending_pkts"]) == (1, 200, 1, 0)
