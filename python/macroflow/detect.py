"""Grouping flows by measurement: shared-bottleneck detection (RFC 8382, :class:`SbdFlowStats` and
:class:`SbdGrouper`) and seed 000's four false-sharing tests (:class:`FalseSharingDetector`) run
over a packet capture. The ``macroflow detect`` command.

>>> from macroflow.detect import read_capture, select, detect
>>> cap = read_capture("bottleneck.pcap")     # pcap or pcapng: Ethernet, Linux cooked, raw IP
>>> for f in cap.flows: print(f.index, f.spec, f.data_packets)
>>> result = detect(cap, select(cap, ["0", "1"]))
>>> result["summary"]["pairs"]["0-1"]["delay"]["decision"]     # "share", "no_share" or "inconclusive"

What is read (:func:`read_capture`)
-----------------------------------
pcap (microsecond or nanosecond timestamps) and pcapng files, read with ``dpkt``, of link type
Ethernet (1, with 802.1Q tags), Linux cooked capture v1 (113) and v2 (276), and raw IP (101, 12,
14, 228 IPv4, 229 IPv6; the simulator's captures are raw IPv4 with nanosecond timestamps). A
pcapng file is read with its first interface's link type and timestamp resolution. A flow is one
direction of a 5-tuple. Of each TCP segment the reader takes the capture time (the *receive
time*), the sequence number, the payload length (from the IP header, so captures cut to the
headers, as the simulator's are, count the whole segment) and the TCP timestamp option's TSval;
UDP datagrams are counted. Records that are not IPv4/IPv6 TCP or UDP, later IP fragments and
headers cut short are skipped and counted. A file cut off inside its last record (a capture that
was killed) is read up to there, and said so.

One-way delays from TSval, and their limits
-------------------------------------------
Both detectors need each packet's one-way delay (OWD); a capture holds only receive times. The
send time used is the TCP timestamp option's TSval (RFC 7323), which ticks on the sender's clock
at a rate the option does not state: Linux ticks in milliseconds (1000 Hz; a random offset per
connection since 4.10, and microseconds only where a route asks for them), most other stacks in
milliseconds too, and the simulator in microseconds. The rate is estimated per flow by a
least-squares fit of TSval against capture time and snapped to the nearest of
:data:`TS_CLOCK_RATES_HZ` (refused when the fit is more than 10% from all of them, or the flow's
TSvals span less than :data:`MIN_TS_SPAN_S`); ``ts_hz=`` (``--ts-hz``) sets it instead. Then
``OWD = capture time - TSval / rate``, re-based on the flow's first packet. This OWD is

- *relative*: each flow's is off by an unknown constant (the clocks' offset, Linux's random TSval
  offset); both detectors are built for that (RFC 8382 sec. 4; seed 000 sec. 4.1.2);
- *coarse*: at 1000 Hz TSval is the send time rounded down to the millisecond, so each OWD carries
  up to 1 ms of error. Queueing variations of a few ms are invisible, and SBD's skewness and
  variability statistics are blurred by the rounding (the simulator's microsecond TSval does not
  have this problem);
- *up to the capture point*: the delay is the path from the sender to where the capture was taken
  (a capture at the receiver sees the whole path; one at the sender sees almost none of it).

Segments without a timestamp option give no OWD. A capture whose TCP data segments carry none
(and every UDP flow: UDP carries no send time) cannot be used: :func:`select` refuses it,
naming what is missing, rather than guess an OWD.

Losses, inferred from the sequence numbers
------------------------------------------
Per flow, in capture order, with the highest sequence number seen so far:

- a *gap*: a data segment beginning above it skipped bytes never captured; the skipped bytes,
  divided by the largest payload seen on the flow (rounded up), are segments lost before the
  capture point, reported lost when the gap is seen;
- a *repeat*: a data segment beginning below it whose first byte was captured already is a
  retransmission of captured data: a loss after the capture point (or a spurious
  retransmission), reported when the retransmission is seen;
- a *fill*: a data segment beginning inside an earlier gap fills it (the retransmission of a
  segment counted lost at the gap, or a segment reordered in the network): not counted again.

Losses = gaps + repeats; each flow's counts are in its listing. The heuristic counts reordering
by more than a segment as loss, cannot tell a spurious retransmission from a loss, and reports a
repeat's loss an RTT or more after the original was sent (SBD counts a loss in the T interval in
which it is reported, RFC 8382 sec. 3.2.5).

What is run (:func:`detect`)
----------------------------
Every selected flow gets an :class:`SbdFlowStats`, all on one interval grid starting at the
capture's first record (time 0); every ``interval_s`` (default T = 0.35 s) each is advanced to
the boundary and an :class:`SbdGrouper` groups them (the RFC's warm-up, max(2*M, N) = 60 intervals
with data = 21 s with the defaults, comes first: flows short of it are reported as
``insufficient_data``). Every pair of selected flows gets a :class:`FalseSharingDetector` (the
lower flow index is A, the asymmetric loss test's comparison flow). Its *shared sequence number*,
the macroflow-wide counter seed 000 sec. 4.1.3 puts in every packet at the source, does not exist
in a capture: it is the order of the pair's packets at capture (time order; records whose
timestamps go backwards are sorted, and counted), a gap's lost segments taking the places where
they would have been captured (spread evenly between their flow's segment before the gap and the
one that revealed it; they are reported lost when the gap is seen). Capture order stands in for
sending order, which holds only while both flows' paths to the capture point have about the same
delay: where they differ by more than the packets' spacing, the packet of the other flow captured
just before a packet was sent earlier than its own flow's previous one, the delay test's cross
correlation drops below its auto correlation and it leans to ``no_share`` for flows that do share
(``tests/test_detect.py`` pins both sides). Two more consequences: the out-of-order test can
never fire (arrivals come in the order of their numbers by construction, so it stays
inconclusive), and a repeat's loss is not given to the false-sharing detector (its original took
its place in the order as a packet received at the capture point); SBD counts it.
"""

from __future__ import annotations

import ipaddress
import math
import pathlib
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Tuple

from macroflow._native import FalseSharingDetector, SbdConfig, SbdFlowStats, SbdGrouper

__all__ = [
    "DetectError", "Flow", "Capture", "read_capture", "select", "detect", "format_flows", "format_result",
    "LINK_TYPES", "TS_CLOCK_RATES_HZ", "MIN_TS_SPAN_S", "TESTS",
]

#: The link types read, by their LINKTYPE_ number.
LINK_TYPES = {
    1: "Ethernet",
    12: "raw IP",
    14: "raw IP",
    101: "raw IP",
    113: "Linux cooked (SLL)",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked v2 (SLL2)",
}
#: The TSval clock rates a flow's estimate is snapped to: old Linux HZ values, milliseconds
#: (Linux since 4.13, the BSDs, macOS, Windows), microseconds (Linux's usec option, the simulator).
TS_CLOCK_RATES_HZ = (100, 250, 300, 1000, 1_000_000)
#: The estimate must lie within this ratio of a rate in TS_CLOCK_RATES_HZ.
TS_CLOCK_TOLERANCE = 0.10
#: A flow's TSval clock rate is estimated only over at least this span of capture time.
MIN_TS_SPAN_S = 1.0
#: The four false-sharing tests, in the order they are printed.
TESTS = ("asymmetric_loss", "symmetric_loss", "delay", "out_of_order")

_PCAP_MAGICS = {bytes.fromhex(m) for m in ("a1b2c3d4", "d4c3b2a1", "a1b23c4d", "4d3cb2a1")}
_PCAP_LE = {bytes.fromhex(m) for m in ("d4c3b2a1", "4d3cb2a1")}  # little-endian files
_PCAPNG_MAGIC = bytes.fromhex("0a0d0d0a")
_TCP, _UDP = 6, 17
_TCP_SYN, _TCP_FIN = 0x02, 0x01
_TS_OPTION = 8
_HOLES_KEPT = 1024  # per flow: older unfilled gaps are forgotten (a fill there counts as a repeat)


class DetectError(ValueError):
    """A capture or a flow selection the detectors cannot use; the message says what is missing."""


@dataclass
class Flow:
    """One direction of a 5-tuple found in a capture, with what the reader counted."""

    index: int
    proto: str  # "tcp" or "udp"
    src: str
    sport: int
    dst: str
    dport: int
    packets: int = 0
    #: TCP segments with payload (every UDP datagram).
    data_packets: int = 0
    #: Data segments carrying a TCP timestamp option.
    ts_packets: int = 0
    #: Segments lost before the capture point, inferred from sequence gaps.
    gaps: int = 0
    #: Retransmissions of data captured already (loss after the capture point, or spurious).
    repeats: int = 0
    #: Segments that filled an earlier gap (not counted as losses again).
    fills: int = 0
    first_s: float = 0.0
    last_s: float = 0.0
    #: The TSval clock rate used for OWD (None: unknown, the flow cannot be used).
    ts_hz: Optional[int] = None
    #: The least-squares estimate behind it (None when it could not be made).
    ts_hz_estimate: Optional[float] = None
    #: Why the rate is unknown, when it is.
    ts_note: str = ""

    @property
    def losses(self) -> int:
        return self.gaps + self.repeats

    @property
    def spec(self) -> str:
        """``src:sport-dst:dport`` (IPv6 addresses in brackets): what ``--flows`` takes."""
        return f"{_host(self.src)}:{self.sport}-{_host(self.dst)}:{self.dport}"

    def usable(self) -> Optional[str]:
        """None if the detectors can use the flow; else why not."""
        if self.proto != "tcp":
            return "UDP carries no send timestamp, so there is no one-way delay"
        if self.data_packets == 0:
            return "it carries no data segments (pure ACKs: the data go the other way)"
        if self.ts_packets == 0:
            return "its data segments carry no TCP timestamp option (TSval), so there is no one-way delay"
        if self.ts_hz is None:
            return f"{self.ts_note}; give the sender's TSval clock rate with --ts-hz"
        return None

    def as_dict(self) -> Dict[str, Any]:
        return {
            "index": self.index, "proto": self.proto, "src": self.src, "sport": self.sport, "dst": self.dst,
            "dport": self.dport, "spec": self.spec, "packets": self.packets, "data_packets": self.data_packets,
            "ts_packets": self.ts_packets, "gaps": self.gaps, "repeats": self.repeats, "fills": self.fills,
            "losses": self.losses, "first_s": self.first_s, "last_s": self.last_s, "ts_hz": self.ts_hz,
            "ts_hz_estimate": self.ts_hz_estimate, "usable": self.usable() is None, "why_not": self.usable(),
        }


@dataclass
class Capture:
    """What :func:`read_capture` found: the flows (by index) and, per TCP data segment in capture
    order, ``(time_ns since the first record, flow index, owd_ns or None, segments lost in a gap
    just before it, 1 if it is a repeat else 0)``."""

    path: str
    link_type: int
    records: int
    t0_ns: int
    flows: List[Flow]
    events: List[Tuple[int, int, Optional[int], int, int]] = field(repr=False, default_factory=list)
    #: Records skipped, by reason.
    skipped: Dict[str, int] = field(default_factory=dict)
    #: Records whose timestamp was earlier than the one before (sorted into time order).
    out_of_order_records: int = 0
    #: The file ended inside a record.
    truncated: bool = False

    @property
    def link_name(self) -> str:
        return LINK_TYPES.get(self.link_type, "?")

    @property
    def duration_s(self) -> float:
        return self.events[-1][0] / 1e9 if self.events else 0.0


def _host(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


def _check_file(p: pathlib.Path) -> bytes:
    if not p.exists():
        raise DetectError(f"{p}: no such file")
    if p.is_dir():
        raise DetectError(f"{p}: a directory, not a capture file")
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise DetectError(f"{p}: cannot be read ({e.strerror or e})") from None
    if not head:
        raise DetectError(f"{p}: empty file, not a pcap or pcapng capture")
    if head not in _PCAP_MAGICS and head != _PCAPNG_MAGIC:
        raise DetectError(f"{p}: not a pcap or pcapng file (it begins with bytes {head.hex(' ')})")
    return head


def _ns(ts: Any, divisor: float) -> int:
    """A dpkt timestamp to integer nanoseconds: exact for nanosecond pcap (a Decimal) and for
    microsecond resolution; within a float's rounding (about 0.2 us today) otherwise."""
    if isinstance(ts, Decimal):
        return int(ts * 1_000_000_000)
    if divisor <= 1e6 and 1e6 % divisor == 0:
        return int(round(ts * divisor)) * int(1e9 // divisor)
    return int(round(ts * 1e9))


def _ip_layer(dpkt: Any, link: int, buf: bytes) -> Any:
    if link == 1:
        ip = dpkt.ethernet.Ethernet(buf).data
    elif link == 113:
        ip = dpkt.sll.SLL(buf).data
    elif link == 276:
        ip = dpkt.sll2.SLL2(buf).data
    else:  # raw IP: the version nibble says which
        if not buf:
            return None
        v = buf[0] >> 4
        ip = dpkt.ip.IP(buf) if v == 4 else dpkt.ip6.IP6(buf) if v == 6 else None
    return ip if isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) else None


class _SeqTracker:
    """One TCP flow's sequence space in capture order: gaps, repeats and fills (module doc)."""

    def __init__(self) -> None:
        self.next: Optional[int] = None  # unwrapped: the highest sequence number seen + 1
        self.mss = 0
        self.holes: List[List[int]] = []  # unfilled gaps [start, end), oldest first

    def segment(self, seq: int, plen: int, syn: bool, fin: bool) -> Tuple[str, int]:
        """``(kind, lost segments)``: kind is "syn", "ack" (no data), "new", "repeat" or "fill"."""
        if self.next is None:
            self.next = seq
        d = (seq - self.next) % (1 << 32)
        s = self.next + (d - (1 << 32) if d >= 1 << 31 else d)
        if syn:
            self.next = s + 1
            return "syn", 0
        if plen == 0:
            if fin and s == self.next:
                self.next += 1
            return "ack", 0
        end = s + plen
        self.mss = max(self.mss, plen)
        kind, lost = "new", 0
        if s > self.next:
            lost = -(-(s - self.next) // self.mss)
            self.holes.append([self.next, s])
            del self.holes[:-_HOLES_KEPT]
        elif s < self.next:
            kind, lost = "repeat", 1
            for h in self.holes:
                if h[0] <= s < h[1]:
                    kind, lost = "fill", 0
                    break
            if kind == "fill":
                self._fill(s, end)
        self.next = max(self.next, end + (1 if fin else 0))
        return kind, lost

    def _fill(self, s: int, e: int) -> None:
        out = []
        for a, b in self.holes:
            if b <= s or a >= e:
                out.append([a, b])
                continue
            if a < s:
                out.append([a, s])
            if e < b:
                out.append([e, b])
        self.holes = out


def _unwrap32(values: Sequence[int]) -> List[int]:
    out: List[int] = []
    prev = None
    for v in values:
        if prev is None:
            prev = v
        else:
            d = (v - prev) % (1 << 32)
            prev += d - (1 << 32) if d >= 1 << 31 else d
        out.append(prev)
    return out


def _ts_rate(times_ns: Sequence[int], tsvals: Sequence[int]) -> Tuple[Optional[int], Optional[float], str]:
    """The TSval clock rate: a least-squares slope of TSval against time, snapped (module doc)."""
    span_s = (times_ns[-1] - times_ns[0]) / 1e9
    if len(times_ns) < 10 or span_s < MIN_TS_SPAN_S:
        return None, None, (f"its TSval clock rate cannot be estimated from {len(times_ns)} timestamped segments "
                            f"over {span_s:.3g} s (needs 10 over {MIN_TS_SPAN_S:g} s)")
    import numpy as np

    t = (np.asarray(times_ns, dtype=np.int64) - times_ns[0]).astype(np.float64) / 1e9
    v = (np.asarray(tsvals, dtype=np.int64) - tsvals[0]).astype(np.float64)
    tc = t - t.mean()
    est = float(np.dot(tc, v - v.mean()) / np.dot(tc, tc))
    if not est > 0:
        return None, est, f"its TSval does not advance with capture time (fit {est:.3g} Hz)"
    best = min(TS_CLOCK_RATES_HZ, key=lambda hz: abs(math.log(est / hz)))
    if abs(est / best - 1) > TS_CLOCK_TOLERANCE:
        rates = ", ".join(f"{hz:g}" for hz in TS_CLOCK_RATES_HZ)
        return None, est, f"its TSval clock runs at about {est:.4g} Hz, not within 10% of {rates} Hz"
    return best, est, ""


def read_capture(path: Any, ts_hz: Optional[int] = None) -> Capture:
    """Reads a pcap or pcapng file into flows and their data segments (module doc). ``ts_hz``
    sets every flow's TSval clock rate instead of estimating it. Raises :class:`DetectError` for
    a missing file, a file that is not a capture, or an unsupported link type."""
    import dpkt

    if ts_hz is not None and (isinstance(ts_hz, bool) or not isinstance(ts_hz, int) or ts_hz <= 0):
        raise DetectError(f"invalid ts_hz: got {ts_hz!r}, expected a TSval clock rate in Hz, an int > 0")
    p = pathlib.Path(path)
    head = _check_file(p)
    skipped: Dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    raw: List[Tuple[int, Tuple, Any]] = []
    with open(p, "rb") as f:
        try:
            reader = dpkt.pcap.Reader(f) if head in _PCAP_MAGICS else dpkt.pcapng.Reader(f)
        except (ValueError, dpkt.UnpackError, struct.error) as e:
            raise DetectError(f"{p}: not a readable pcap or pcapng file ({e})") from None
        link = reader.datalink()
        if link not in LINK_TYPES:
            known = ", ".join(f"{n} ({k})" for k, n in sorted(LINK_TYPES.items()))
            raise DetectError(f"{p}: link type {link} is not supported; supported: {known}")
        divisor = float(getattr(reader, "_divisor", 1e6))
        cut: List[bool] = []

        def records() -> Any:
            """The records; one cut short by the end of the file is dropped and noted in `cut`. A
            pcapng block or a pcap record header cut short makes dpkt raise; a pcap record's data
            cut short it hands out without a word, so the last record is checked against its
            header's caplen."""
            classic = head in _PCAP_MAGICS
            it = iter(reader)
            pending = None
            while True:
                at = f.tell() if classic else 0
                try:
                    ts, buf = next(it)
                except StopIteration:
                    break
                except (dpkt.UnpackError, struct.error, ValueError):
                    cut.append(True)
                    break
                if pending is not None:
                    yield pending[1:]
                pending = (at, ts, buf)
            if pending is None:
                return
            if classic and not cut:
                f.seek(pending[0] + 8)
                caplen = f.read(4)
                if len(caplen) < 4 or struct.unpack("<I" if head in _PCAP_LE else ">I", caplen)[0] > len(pending[2]):
                    cut.append(True)
                    return
            yield pending[1:]

        for ts, buf in records():
            t = _ns(ts, divisor)
            try:
                ip = _ip_layer(dpkt, link, buf)
            except (dpkt.UnpackError, struct.error, ValueError, IndexError):
                ip = None
            if ip is None:
                skip("not IPv4/IPv6")
                raw.append((t, (), None))
                continue
            if isinstance(ip, dpkt.ip.IP):
                if ip.offset:
                    skip("later IP fragment")
                    raw.append((t, (), None))
                    continue
                l4_len = ip.len - ip.hl * 4 if ip.len else len(ip.data)
            else:
                plen = ip.plen
                l4_len = plen - sum(h.length for h in ip.all_extension_headers) if plen else len(ip.data)
            proto, seg = ip.p, ip.data
            if proto == _TCP and isinstance(seg, dpkt.tcp.TCP):
                tsval = None
                for opt in dpkt.tcp.parse_opts(seg.opts):
                    if opt and opt[0] == _TS_OPTION and len(opt[1]) == 8:
                        tsval = struct.unpack(">I", opt[1][:4])[0]
                plen = max(0, l4_len - seg.off * 4)
                key = ("tcp", ip.src, seg.sport, ip.dst, seg.dport)
                raw.append((t, key, (seg.seq, plen, bool(seg.flags & _TCP_SYN), bool(seg.flags & _TCP_FIN), tsval)))
            elif proto == _UDP and isinstance(seg, dpkt.udp.UDP):
                raw.append((t, ("udp", ip.src, seg.sport, ip.dst, seg.dport), None))
            else:
                skip("not TCP or UDP, or headers cut short")
                raw.append((t, (), None))
        truncated = bool(cut)
    if not raw:
        raise DetectError(f"{p}: the capture holds no packets")
    out_of_order = sum(1 for a, b in zip(raw, raw[1:]) if b[0] < a[0])
    raw.sort(key=lambda r: r[0])  # stable: capture order among equal timestamps
    t0 = raw[0][0]

    flows: Dict[Tuple, Flow] = {}
    trackers: Dict[Tuple, _SeqTracker] = {}
    segs: List[Tuple[int, int, Optional[int], int, int]] = []  # (t, flow, tsval, gap losses before, repeat)
    names: Dict[bytes, str] = {}

    def name(a: bytes) -> str:
        if a not in names:
            names[a] = str(ipaddress.ip_address(a))
        return names[a]

    for t, key, info in raw:
        if not key:
            continue
        fl = flows.get(key)
        if fl is None:
            fl = flows[key] = Flow(len(flows), key[0], name(key[1]), key[2], name(key[3]), key[4], first_s=(t - t0) / 1e9)
            trackers[key] = _SeqTracker()
        fl.packets += 1
        fl.last_s = (t - t0) / 1e9
        if key[0] == "udp":
            fl.data_packets += 1
            continue
        seq, plen, syn, fin, tsval = info
        kind, lost = trackers[key].segment(seq, plen, syn, fin)
        if kind in ("syn", "ack"):
            continue
        fl.data_packets += 1
        fl.ts_packets += tsval is not None
        if kind == "repeat":
            fl.repeats += 1
            segs.append((t - t0, fl.index, tsval, 0, 1))
        else:
            fl.fills += kind == "fill"
            fl.gaps += lost
            segs.append((t - t0, fl.index, tsval, lost, 0))

    by_index = list(flows.values())
    # Each flow's TSval clock: unwrapped, its rate estimated (or given), OWD = time - TSval / rate.
    positions: Dict[int, List[int]] = {}
    for i, s in enumerate(segs):
        if s[2] is not None:
            positions.setdefault(s[1], []).append(i)
    owd: Dict[int, int] = {}  # by position in segs
    for fl in by_index:
        pos = positions.get(fl.index)
        if fl.proto != "tcp" or not pos:
            continue
        times = [segs[i][0] for i in pos]
        tsv = _unwrap32([segs[i][2] for i in pos])
        if ts_hz is None:
            fl.ts_hz, fl.ts_hz_estimate, fl.ts_note = _ts_rate(times, tsv)
        else:
            fl.ts_hz = ts_hz
            fl.ts_hz_estimate = _ts_rate(times, tsv)[1]
        if fl.ts_hz is None:
            continue
        hz, v0 = fl.ts_hz, tsv[0]
        first = None
        for i, t, v in zip(pos, times, tsv):
            o = t - ((v - v0) * 1_000_000_000 + hz // 2) // hz
            if first is None:
                first = o
            owd[i] = o - first
    events = [(t, f, owd.get(i), gaps, rep) for i, (t, f, _tsv, gaps, rep) in enumerate(segs)]
    return Capture(str(p), link, len(raw), t0, by_index, events, skipped, out_of_order, truncated)


def _parse_spec(spec: str) -> Tuple[str, int, str, int]:
    def side(s: str) -> Tuple[str, int]:
        s = s.strip()
        if s.startswith("["):
            addr, sep, port = s[1:].partition("]:")
        else:
            addr, sep, port = s.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError
        return str(ipaddress.ip_address(addr)), int(port)

    left, sep, right = spec.partition("-")
    if not sep:
        raise ValueError
    (src, sport), (dst, dport) = side(left), side(right)
    return src, sport, dst, dport


def select(capture: Capture, specs: Sequence[str] = ()) -> List[Flow]:
    """The flows the detectors run on. ``specs``: flow indices (as listed) or
    ``src:sport-dst:dport`` (``[addr]:port`` for IPv6), each string possibly a comma-separated
    list; none: every flow the detectors can use. Raises :class:`DetectError` for a spec that
    matches nothing, a chosen flow without one-way delays, or fewer than two usable flows."""
    where = capture.path
    given = [x.strip() for spec in specs for x in str(spec).split(",") if x.strip()]
    chosen: List[Flow] = []
    for s in given:
        if s.isdigit():
            i = int(s)
            if i >= len(capture.flows):
                raise DetectError(f"flow {s}: {where} has {len(capture.flows)} flows, indices 0-{len(capture.flows) - 1} "
                                  "(see --list)")
            f = capture.flows[i]
        else:
            try:
                key = _parse_spec(s)
            except ValueError:
                raise DetectError(f"flow {s!r}: expected an index or src:sport-dst:dport (IPv6 as [addr]:port)") from None
            # A TCP and a UDP flow may share the addresses and ports: prefer the one that can be used.
            matched = sorted((f for f in capture.flows if (f.src, f.sport, f.dst, f.dport) == key),
                             key=lambda f: f.usable() is not None)
            if not matched:
                raise DetectError(f"flow {s}: no such flow in {where} (see --list)")
            f = matched[0]
        why = f.usable()
        if why is not None:
            raise DetectError(f"flow {f.index} ({f.proto} {f.spec}): {why}")
        if f not in chosen:
            chosen.append(f)
    if not given:
        chosen = [f for f in capture.flows if f.usable() is None]
        if not chosen:
            tcp_data = [f for f in capture.flows if f.proto == "tcp" and f.data_packets]
            if not tcp_data:
                raise DetectError(f"{where}: no TCP data segments (the detectors need TCP with the timestamp option)")
            if not any(f.ts_packets for f in tcp_data):
                raise DetectError(f"{where}: no TCP data segment carries the timestamp option (TSval), so there are no "
                                  "one-way delays, which the detectors need")
            f = tcp_data[0]
            raise DetectError(f"{where}: no flow can be used; flow {f.index} ({f.spec}): {f.usable()}")
    if len(chosen) < 2:
        only = ", ".join(f"{f.index} ({f.spec})" for f in chosen)
        raise DetectError(f"{where}: the detectors compare two or more flows with one-way delays; "
                          f"{'given' if given else 'found'} only {only}")
    return chosen


def _pair_order(events: Sequence[Tuple[int, int, Optional[int], int, int]], pair: Tuple[int, int]
                ) -> Tuple[Dict[int, int], Dict[int, List[int]]]:
    """The pair's shared sequence numbers (module doc): its segments with a one-way delay in
    capture order, and each gap's lost segments where they would have been captured, spread
    evenly between their flow's segment before the gap and the one that revealed it. Returns
    {event index: number} and {event index: the numbers of the segments lost just before it}."""
    items: List[Tuple[int, int, int, int]] = []  # (time, 0 for a loss / 1 for a segment, event, k)
    prev: Dict[int, int] = {}
    for i, (t, f, owd, gaps, _repeat) in enumerate(events):
        if f not in pair:
            continue
        if gaps:
            t0 = prev.get(f, t)
            items.extend((t0 + (t - t0) * k // (gaps + 1), 0, i, k) for k in range(1, gaps + 1))
        if owd is not None:
            items.append((t, 1, i, 0))
        prev[f] = t
    items.sort()
    pkt: Dict[int, int] = {}
    lost: Dict[int, List[int]] = {}
    for n, (_t, kind, i, _k) in enumerate(items):
        if kind:
            pkt[i] = n
        else:
            lost.setdefault(i, []).append(n)
    return pkt, lost


def _pair_name(a: int, b: int) -> str:
    return f"{a}-{b}"


def detect(
    capture: Capture,
    flows: Optional[Sequence[Flow]] = None,
    interval_s: Optional[float] = None,
    confidence: float = 0.9,
    sbd_config: Optional[SbdConfig] = None,
) -> Dict[str, Any]:
    """Runs SBD and the false-sharing tests over the capture's events for ``flows`` (default:
    :func:`select` with no specs) and returns a JSON-able dict: ``flows``, ``config``,
    ``intervals`` (one row per grouping: ``t_s``, the SBD grouping as
    :meth:`SbdGrouper.group` returns it, and per pair ``"A-B"`` each test's decision), and
    ``summary`` (the last grouping, each flow's SBD statistics, each pair's full evidence and
    how often SBD put it together). Raises :class:`DetectError` or a :class:`CouplingError`
    naming a bad parameter."""
    config = sbd_config if sbd_config is not None else SbdConfig()
    if interval_s is None:
        interval_s = config.t_s
    if not (isinstance(interval_s, (int, float)) and math.isfinite(interval_s) and interval_s > 0):
        raise DetectError(f"invalid interval_s: got {interval_s!r}, expected seconds > 0")
    chosen = list(flows) if flows is not None else select(capture)
    if len(chosen) < 2:
        raise DetectError("the detectors compare flows: give two or more")
    for f in chosen:
        why = f.usable()
        if why is not None:
            raise DetectError(f"flow {f.index} ({f.proto} {f.spec}): {why}")
    ids = sorted(f.index for f in chosen)
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    detectors = {(a, b): FalseSharingDetector(a, b, 0.0, confidence=confidence) for a, b in pairs}
    stats = {i: SbdFlowStats(config, 0.0) for i in ids}
    grouper = SbdGrouper(config)
    of_flow: Dict[int, List[Tuple[int, int]]] = {i: [p for p in pairs if i in p] for i in ids}
    selected = set(ids)
    numbers = {p: _pair_order(capture.events, p) for p in pairs}
    rows: List[Dict[str, Any]] = []
    together = {p: {"together": 0, "apart": 0, "undecided": 0, "first_together_s": None, "first_apart_s": None}
                for p in pairs}

    def row(t: float, final: bool = False) -> None:
        for s in stats.values():
            s.advance(t)
        g = grouper.group(dict(stats))
        decided = {f for grp in g["groups"] for f in grp}
        for p in pairs:
            tally = together[p]
            if p[0] in decided and p[1] in decided:
                key = "together" if any(p[0] in grp and p[1] in grp for grp in g["groups"]) else "apart"
                tally[key] += 1
                if tally[f"first_{key}_s"] is None:
                    tally[f"first_{key}_s"] = t
            else:
                tally["undecided"] += 1
        ds = {p: detectors[p].decisions() for p in pairs}
        rows.append({
            "t_s": t, "final": final, "sbd": g,
            "pairs": {_pair_name(*p): {k: ds[p][k]["decision"] for k in TESTS} for p in pairs},
        })

    k = 1
    boundary = interval_s
    last_t = 0.0
    for i, (t_ns, f, owd_ns, gaps, repeat) in enumerate(capture.events):
        if f not in selected:
            continue
        t = t_ns / 1e9
        while t >= boundary:
            row(boundary)
            k += 1
            boundary = k * interval_s
        last_t = t
        if gaps or repeat:
            stats[f].on_loss(t, gaps + repeat)
        # A gap's segments are reported lost now, under their numbers in the pair's order (before
        # this segment's); a repeat's loss is not reported (its original was numbered as received).
        for p in of_flow[f]:
            pkt, lost_numbers = numbers[p]
            for n in lost_numbers.get(i, ()):
                detectors[p].on_loss(t, f, n)
            if owd_ns is not None:
                detectors[p].on_packet(t, f, pkt[i], owd_ns)
        if owd_ns is not None:  # a segment without TSval in a timestamped flow has no OWD
            stats[f].on_packet(t, owd_ns)
    for d in detectors.values():
        d.flush(last_t)
    row(max(last_t, rows[-1]["t_s"] if rows else 0.0), final=True)

    final = rows[-1]
    summary = {
        "t_s": final["t_s"],
        "sbd": final["sbd"],
        "flows": {str(i): {"summary": stats[i].summary(), "counters": stats[i].counters()} for i in ids},
        "pairs": {
            _pair_name(*p): {**detectors[p].decisions(), "counters": detectors[p].counters(), "sbd": together[p]}
            for p in pairs
        },
    }
    return {
        "capture": capture.path,
        "link_type": capture.link_type,
        "records": capture.records,
        "skipped": capture.skipped,
        "out_of_order_records": capture.out_of_order_records,
        "truncated": capture.truncated,
        "flows": [f.as_dict() for f in chosen],
        "config": {
            "interval_s": interval_s, "confidence": confidence,
            "sbd": {name: getattr(config, name) for name in ("t_s", "n", "m", "c_s", "c_h", "p_l", "p_f", "p_mad", "p_d", "p_s", "p_v")},
            "warmup_intervals": config.warmup_intervals,
        },
        "intervals": rows,
        "summary": summary,
    }


# ------------------------------------------------------------------------------------------------
# Text output (the CLI's)

_SHORT = {"share": "share", "no_share": "NO-SHARE", "inconclusive": "-"}


def format_flows(capture: Capture) -> List[str]:
    """The ``--list`` lines: each flow with its counts and whether the detectors can use it."""
    lines = [f"{capture.path}: {len(capture.flows)} flows in {capture.records} records "
             f"(link type {capture.link_type}, {capture.link_name}; {capture.duration_s:.3f} s of TCP data)"]
    for why, n in sorted(capture.skipped.items()):
        lines.append(f"  skipped {n} records: {why}")
    if capture.truncated:
        lines.append("  the file ends inside a record: read up to there")
    hdr = f"{'#':>4}  {'proto':5}  {'flow':<44} {'packets':>8} {'data':>8} {'TSval':>8} {'TS clock':>11} {'losses (gaps+repeats)':>22}  usable"
    lines.append(hdr)
    for f in capture.flows:
        clock = f"{f.ts_hz} Hz" if f.ts_hz else "-"
        why = f.usable()
        lines.append(f"{f.index:>4}  {f.proto:5}  {f.spec:<44} {f.packets:>8} {f.data_packets:>8} {f.ts_packets:>8} "
                     f"{clock:>11} {f'{f.losses} ({f.gaps}+{f.repeats})':>22}  {'yes' if why is None else 'no: ' + why}")
    return lines


def _groups(g: Dict[str, Any]) -> str:
    parts = ["{" + ",".join(map(str, grp)) + "}" for grp in g["groups"]]
    if g["not_congested"]:
        parts.append("not congested: " + ",".join(map(str, g["not_congested"])))
    if g["insufficient_data"]:
        parts.append("warm-up: " + ",".join(map(str, g["insufficient_data"])))
    return "  ".join(parts) or "-"


def format_result(r: Dict[str, Any]) -> List[str]:
    """One line per grouping (time, SBD's groups, each pair's four answers: asymmetric loss,
    symmetric loss, delay, out of order), then the summary."""
    flows = ", ".join(f"{f['index']}: {f['spec']} ({f['ts_hz']} Hz TSval)" for f in r["flows"])
    cfg = r["config"]
    lines = [f"{r['capture']}: flows {flows}",
             f"SBD (RFC 8382, T = {cfg['sbd']['t_s']:g} s, warm-up {cfg['warmup_intervals']} intervals with data) every "
             f"{cfg['interval_s']:g} s; false-sharing tests at {cfg['confidence']:g} confidence "
             "(per pair: asymmetric loss / symmetric loss / delay / out of order)"]
    notes = [f"skipped {n} records ({why})" for why, n in sorted(r["skipped"].items())]
    if r["out_of_order_records"]:
        notes.append(f"{r['out_of_order_records']} records whose timestamps went back were sorted into time order")
    if r["truncated"]:
        notes.append("the file ends inside a record: read up to there")
    if notes:
        lines.append("note: " + "; ".join(notes))
    for x in r["intervals"]:
        pairs = "  ".join(f"{name}: " + "/".join(_SHORT[d[k]] for k in TESTS) for name, d in x["pairs"].items())
        lines.append(f"{x['t_s']:9.3f}s{'*' if x['final'] else ' '} SBD {_groups(x['sbd']):<30}  {pairs}")
    s = r["summary"]
    lines.append(f"summary at {s['t_s']:.3f} s (* above: after the last packet, the tests flushed):")
    for f in r["flows"]:
        st = s["flows"][str(f["index"])]["summary"]
        lines.append(f"  flow {f['index']} {f['spec']}: {f['data_packets']} data segments, {f['losses']} losses "
                     f"({f['gaps']} gaps, {f['repeats']} repeats); skew_est {st['skew_est']:+.3f}, "
                     f"var_est {st['var_est_ns'] / 1e6:.3f} ms, freq_est {st['freq_est']:.3f}, pkt_loss {st['pkt_loss']:.4f}")
    lines.append(f"  SBD: {_groups(s['sbd'])}")
    for sp in s["sbd"]["splits"]:
        lines.append(f"    split by {sp['step']} between flows {sp['below']} and {sp['above']}: "
                     f"{sp['below_value']:.4g} vs {sp['above_value']:.4g} (threshold {sp['threshold']:.4g})")
    for name, p in s["pairs"].items():
        tally = p["sbd"]
        lines.append(f"  pair {name}: SBD together in {tally['together']}, apart in {tally['apart']}, "
                     f"undecided in {tally['undecided']} groupings")
        for k in TESTS:
            h = p[k]["history"]
            when = []
            if h["share_detection_time_s"] is not None:
                when.append(f"first share at {h['first_share_at_s']:.3f} s")
            if h["no_share_detection_time_s"] is not None:
                when.append(f"first no-share at {h['first_no_share_at_s']:.3f} s")
            lines.append(f"    {k}: {p[k]['decision']}" + (f" ({', '.join(when)})" if when else ""))
    return lines
