//! Writes simulated packets to a classic libpcap file that Wireshark, tshark and tcpdump read.
//!
//! The file is the classic format (not pcapng): a 24-byte global header with the
//! nanosecond-resolution magic `0xa1b23c4d`, version 2.4 and link type `LINKTYPE_RAW` (101: each
//! record starts with an IPv4 header), then per packet a 16-byte record header (`ts_sec`,
//! `ts_nsec`, `incl_len`, `orig_len`) and the captured bytes. All fields are little-endian; readers
//! tell the byte order from the magic.
//!
//! The simulator does not materialize packets, so [`PcapWriter::write`] synthesizes plausible
//! headers from a [`Packet`] and captures only them (like `tcpdump -s` with a small snap length):
//!
//! - IPv4: addresses from the node ids ([`node_addr`]), TTL 64, DF set, identification 0, the
//!   DSCP in the upper six bits of the TOS byte, total length `size_bytes`, a correct header
//!   checksum, protocol 6 (TCP) or 17 (UDP).
//! - TCP: ports [`client_port`] on the data sender's side and [`SERVER_PORT`] on the receiver's
//!   side (swapped for ACKs), sequence number `seq as u32`, acknowledgement number `ack as u32`,
//!   the ACK flag on every segment, window 65535, then the options `NOP NOP TS` (TSval =
//!   `ts_ns / 1000`, TSecr = `ts_echo_ns / 1000`, both in microseconds, wrapping) and, when
//!   `n_sack > 0`, `NOP NOP SACK` with the blocks' edges as `u32` (Linux's layout: every option is
//!   aligned on 4 bytes, so the header length is a multiple of 4 without trailing padding).
//! - UDP: the same ports as TCP data, length `size_bytes - 20`.
//!
//! The TCP/UDP checksum is computed as if the payload (never materialized) were all zeros: zero
//! bytes add nothing to the Internet checksum, so it is the checksum of the pseudo-header (with the
//! full segment length), the header and an all-zero payload. Wireshark cannot verify it because the
//! payload is not captured, and does not try by default.
//!
//! `incl_len` is the header length (at most [`MAX_HEADERS_LEN`] = 80 bytes, cut to the snap
//! length) and `orig_len` is `size_bytes`. One exception: the simulator counts a fixed header size
//! (52 bytes for TCP with timestamps) while SACK blocks make the synthesized header longer, so when
//! `size_bytes` is smaller than the synthesized headers, the IP total length and `orig_len` are the
//! header length instead (a 52-byte ACK with two SACK blocks is written as a 72-byte packet). The IP
//! total length is also capped at 65535, the largest an IPv4 header can say.

use std::io::{self, Write};

use crate::net::NodeId;
use crate::packet::{Packet, PacketKind, MAX_SACK_BLOCKS};

/// Magic number of a classic pcap file with nanosecond timestamps.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// `LINKTYPE_RAW`: each record is a raw IPv4 (or IPv6) packet, no link-layer header.
pub const LINKTYPE_RAW: u32 = 101;
/// A snap length that captures every synthesized header whole.
pub const DEFAULT_SNAPLEN: u32 = 65535;
/// Length of the global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// The longest synthesized headers: IPv4 (20) + TCP (20) + `NOP NOP TS` (12) + `NOP NOP SACK`
/// with three blocks (28).
pub const MAX_HEADERS_LEN: usize = IPV4_LEN + TCP_LEN + TS_OPT_LEN + SACK_OPT_LEN_BASE + 8 * 3;
/// The port on the data receiver's side.
pub const SERVER_PORT: u16 = 80;

const IPV4_LEN: usize = 20;
const TCP_LEN: usize = 20;
const UDP_LEN: usize = 8;
const TS_OPT_LEN: usize = 12;
const SACK_OPT_LEN_BASE: usize = 4;
const TTL: u8 = 64;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const TCP_FLAG_ACK: u8 = 0x10;
const TCP_WINDOW: u16 = 65535;
const OPT_NOP: u8 = 1;
const OPT_SACK: u8 = 5;
const OPT_TS: u8 = 8;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The IPv4 address of a node: `10.0.0.0 + id + 1`, so node 0 is 10.0.0.1, node 257 is
/// 10.0.1.2. This is `10.(id >> 16).(id >> 8).(id & 255)` with 1 added to the last octet and a carry
/// into the others (node 255 is 10.0.1.0), so the first 2^24 - 1 nodes get distinct addresses;
/// larger ids wrap around.
pub fn node_addr(id: NodeId) -> [u8; 4] {
    let n = id.0.wrapping_add(1) & 0x00ff_ffff;
    [10, (n >> 16) as u8, (n >> 8) as u8, n as u8]
}

/// The port on the data sender's side of a flow: `10000 + flow % 50000`.
pub fn client_port(flow: u32) -> u16 {
    (10_000 + flow % 50_000) as u16
}

/// Writes a classic pcap file of simulated packets (see the module documentation).
///
/// Nothing is buffered here: each call writes once to `W`, so wrap a file in a
/// [`std::io::BufWriter`].
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
    snaplen: u32,
    packets: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header. `snaplen` bounds the bytes captured per packet (the synthesized
    /// headers are at most [`MAX_HEADERS_LEN`] bytes, so any value from 80 up keeps them whole);
    /// 0 is an `InvalidInput` error.
    pub fn new(mut w: W, snaplen: u32) -> io::Result<Self> {
        if snaplen == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "pcap snap length must be positive",
            ));
        }
        w.write_all(&global_header(snaplen))?;
        Ok(PcapWriter {
            w,
            snaplen,
            packets: 0,
        })
    }

    /// Writes one record: `pkt` seen at `t_ns` nanoseconds of simulated time (the timestamp
    /// reads as `t_ns` after the Unix epoch). Times past `u32::MAX` seconds (year 2106) are an
    /// `InvalidInput` error.
    pub fn write(&mut self, t_ns: u64, pkt: &Packet) -> io::Result<()> {
        let ts_sec = u32::try_from(t_ns / NANOS_PER_SEC).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "pcap timestamp past u32::MAX seconds",
            )
        })?;
        let ts_nsec = (t_ns % NANOS_PER_SEC) as u32;
        let mut rec = [0u8; RECORD_HEADER_LEN + MAX_HEADERS_LEN];
        let (hdr, body) = rec.split_at_mut(RECORD_HEADER_LEN);
        let (n, orig_len) = encode_headers(pkt, body.try_into().expect("sized above"));
        let incl_len = (n as u32).min(self.snaplen);
        hdr[0..4].copy_from_slice(&ts_sec.to_le_bytes());
        hdr[4..8].copy_from_slice(&ts_nsec.to_le_bytes());
        hdr[8..12].copy_from_slice(&incl_len.to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.w
            .write_all(&rec[..RECORD_HEADER_LEN + incl_len as usize])?;
        self.packets += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The underlying writer, not flushed: call [`PcapWriter::flush`] first if it buffers.
    pub fn into_inner(self) -> W {
        self.w
    }
}

/// The 24-byte global header: nanosecond magic, version 2.4, GMT offset 0, accuracy 0, `snaplen`,
/// `LINKTYPE_RAW`, all little-endian.
pub fn global_header(snaplen: u32) -> [u8; GLOBAL_HEADER_LEN] {
    let mut h = [0u8; GLOBAL_HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    // thiszone (8..12) and sigfigs (12..16) stay 0.
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
    h
}

/// Synthesizes the IPv4 and TCP/UDP headers of `pkt` into `out` (see the module documentation).
/// Returns the header length and the packet's length on the wire (`orig_len`).
pub fn encode_headers(pkt: &Packet, out: &mut [u8; MAX_HEADERS_LEN]) -> (usize, u32) {
    let (proto, l4_len) = match pkt.kind {
        PacketKind::TcpData | PacketKind::TcpAck => (PROTO_TCP, tcp_header_len(pkt)),
        PacketKind::Udp | PacketKind::Media | PacketKind::MediaFeedback => (PROTO_UDP, UDP_LEN),
    };
    let hdr_len = IPV4_LEN + l4_len;
    let orig_len = pkt.size_bytes.max(hdr_len as u32);
    let total_len = orig_len.min(u16::MAX as u32) as u16;
    let src = node_addr(pkt.src);
    let dst = node_addr(pkt.dst);

    let ip = &mut out[..IPV4_LEN];
    ip.fill(0);
    ip[0] = 0x45; // version 4, IHL 5 words
    ip[1] = (pkt.dscp & 0x3f) << 2; // DSCP, ECN 0
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    // identification (4..6) 0; flags DF, fragment offset 0
    ip[6] = 0x40;
    ip[8] = TTL;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let ck = checksum(0, ip);
    ip[10..12].copy_from_slice(&ck.to_be_bytes());

    let (sport, dport) = match pkt.kind {
        PacketKind::TcpAck | PacketKind::MediaFeedback => (SERVER_PORT, client_port(pkt.flow)),
        PacketKind::TcpData | PacketKind::Udp | PacketKind::Media => {
            (client_port(pkt.flow), SERVER_PORT)
        }
    };
    // The segment's length (header and uncaptured payload), as the pseudo-header counts it.
    let l4_total = total_len - IPV4_LEN as u16;
    let l4 = &mut out[IPV4_LEN..hdr_len];
    l4.fill(0);
    l4[0..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..4].copy_from_slice(&dport.to_be_bytes());
    let ck_at = if proto == PROTO_TCP {
        l4[4..8].copy_from_slice(&(pkt.seq as u32).to_be_bytes());
        l4[8..12].copy_from_slice(&(pkt.ack as u32).to_be_bytes());
        l4[12] = ((l4_len / 4) as u8) << 4;
        l4[13] = TCP_FLAG_ACK;
        l4[14..16].copy_from_slice(&TCP_WINDOW.to_be_bytes());
        // checksum (16..18) and urgent pointer (18..20) 0 for now
        let o = &mut l4[TCP_LEN..];
        o[0] = OPT_NOP;
        o[1] = OPT_NOP;
        o[2] = OPT_TS;
        o[3] = 10;
        o[4..8].copy_from_slice(&((pkt.ts_ns / 1000) as u32).to_be_bytes());
        o[8..12].copy_from_slice(&((pkt.ts_echo_ns / 1000) as u32).to_be_bytes());
        let n = n_sack(pkt);
        if n > 0 {
            let s = &mut o[TS_OPT_LEN..];
            s[0] = OPT_NOP;
            s[1] = OPT_NOP;
            s[2] = OPT_SACK;
            s[3] = (2 + 8 * n) as u8;
            for (i, b) in pkt.sack[..n].iter().enumerate() {
                let at = SACK_OPT_LEN_BASE + 8 * i;
                s[at..at + 4].copy_from_slice(&(b.start as u32).to_be_bytes());
                s[at + 4..at + 8].copy_from_slice(&(b.end as u32).to_be_bytes());
            }
        }
        16
    } else {
        l4[4..6].copy_from_slice(&l4_total.to_be_bytes());
        6
    };
    let mut sum = pseudo_header_sum(&src, &dst, proto, l4_total);
    sum = sum_words(sum, l4);
    let mut ck = fold(sum);
    if proto == PROTO_UDP && ck == 0 {
        ck = 0xffff; // 0 means "no checksum" in UDP
    }
    l4[ck_at..ck_at + 2].copy_from_slice(&ck.to_be_bytes());
    (hdr_len, orig_len)
}

fn n_sack(pkt: &Packet) -> usize {
    (pkt.n_sack as usize).min(MAX_SACK_BLOCKS)
}

fn tcp_header_len(pkt: &Packet) -> usize {
    let n = n_sack(pkt);
    TCP_LEN + TS_OPT_LEN + if n > 0 { SACK_OPT_LEN_BASE + 8 * n } else { 0 }
}

fn pseudo_header_sum(src: &[u8; 4], dst: &[u8; 4], proto: u8, len: u16) -> u32 {
    let mut ph = [0u8; 12];
    ph[0..4].copy_from_slice(src);
    ph[4..8].copy_from_slice(dst);
    ph[9] = proto;
    ph[10..12].copy_from_slice(&len.to_be_bytes());
    sum_words(0, &ph)
}

/// Adds the big-endian 16-bit words of `b` (even length) to `sum`.
fn sum_words(sum: u32, b: &[u8]) -> u32 {
    b.chunks_exact(2)
        .fold(sum, |s, w| s + u16::from_be_bytes([w[0], w[1]]) as u32)
}

/// The ones' complement of the ones' complement sum (RFC 1071).
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `b` (even length), starting from `sum`.
fn checksum(sum: u32, b: &[u8]) -> u16 {
    fold(sum_words(sum, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::SackBlock;
    use std::process::Command;

    /// RFC 1071 checksum written independently of the one above: 64-bit sum of the words, an odd
    /// trailing byte padded with zero, carries folded at the end.
    fn inet_checksum(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        let mut i = 0;
        while i < data.len() {
            let hi = data[i] as u64;
            let lo = if i + 1 < data.len() {
                data[i + 1] as u64
            } else {
                0
            };
            s += (hi << 8) | lo;
            i += 2;
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    fn data_packet() -> Packet {
        let mut p = Packet::new(7, PacketKind::TcpData, NodeId(0), NodeId(258), 1500);
        p.seq = (1u64 << 32) + 1000; // wraps to 1000 on the wire
        p.len = 1448;
        p.ts_ns = 2_000_123_456;
        p.dscp = 46;
        p
    }

    fn ack_packet() -> Packet {
        let mut p = Packet::new(7, PacketKind::TcpAck, NodeId(258), NodeId(0), 52);
        p.ack = 5000;
        p.sack[0] = SackBlock {
            start: 8000,
            end: 9448,
        };
        p.sack[1] = SackBlock {
            start: 11000,
            end: 12448,
        };
        p.n_sack = 2;
        p.ts_ns = 2_010_000_000;
        p.ts_echo_ns = 2_000_123_456;
        p
    }

    /// One record written after the global header.
    fn record(t_ns: u64, p: &Packet) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), DEFAULT_SNAPLEN).unwrap();
        w.write(t_ns, p).unwrap();
        assert_eq!(w.packets(), 1);
        w.into_inner()[GLOBAL_HEADER_LEN..].to_vec()
    }

    /// Fills in the IP checksum (bytes 10..12) and the TCP checksum of a record's packet with
    /// `inet_checksum`, materializing the all-zero payload to sum the whole segment.
    fn fill_checksums(rec: &mut [u8], orig_len: usize) {
        let ip = &mut rec[RECORD_HEADER_LEN..];
        let ck = inet_checksum(&ip[..20]);
        ip[10..12].copy_from_slice(&ck.to_be_bytes());
        let seg_len = orig_len - 20;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(seg_len as u16).to_be_bytes());
        pseudo.extend_from_slice(&ip[20..]);
        pseudo.resize(12 + seg_len, 0);
        let ck = inet_checksum(&pseudo);
        ip[36..38].copy_from_slice(&ck.to_be_bytes());
    }

    #[test]
    fn global_header_bytes_are_exact() {
        let w = PcapWriter::new(Vec::new(), 262_144).unwrap();
        assert_eq!(
            w.into_inner(),
            [
                0x4d, 0x3c, 0xb2, 0xa1, // magic, nanosecond timestamps
                0x02, 0x00, 0x04, 0x00, // version 2.4
                0x00, 0x00, 0x00, 0x00, // thiszone
                0x00, 0x00, 0x00, 0x00, // sigfigs
                0x00, 0x00, 0x04, 0x00, // snaplen 262144
                0x65, 0x00, 0x00, 0x00, // LINKTYPE_RAW
            ]
        );
        assert!(PcapWriter::new(Vec::new(), 0).is_err());
    }

    #[test]
    fn node_addresses_and_ports() {
        assert_eq!(node_addr(NodeId(0)), [10, 0, 0, 1]);
        assert_eq!(node_addr(NodeId(1)), [10, 0, 0, 2]);
        assert_eq!(node_addr(NodeId(254)), [10, 0, 0, 255]);
        assert_eq!(node_addr(NodeId(255)), [10, 0, 1, 0]);
        assert_eq!(node_addr(NodeId(258)), [10, 0, 1, 3]);
        assert_eq!(node_addr(NodeId(0x01_02_03)), [10, 1, 2, 4]);
        assert_eq!(client_port(0), 10_000);
        assert_eq!(client_port(49_999), 59_999);
        assert_eq!(client_port(50_007), 10_007);
    }

    #[test]
    fn data_record_bytes() {
        let rec = record(1_000_000_001, &data_packet());
        #[rustfmt::skip]
        let mut want = vec![
            // record header: ts_sec 1, ts_nsec 1, incl_len 52, orig_len 1500
            1, 0, 0, 0, 1, 0, 0, 0, 52, 0, 0, 0, 0xdc, 0x05, 0, 0,
            // IPv4: v4 IHL 5, TOS = DSCP 46 << 2, total length 1500, id 0, DF, TTL 64, TCP,
            // checksum (filled below), 10.0.0.1 -> 10.0.1.3
            0x45, 0xb8, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 1, 3,
            // TCP: 10007 -> 80, seq 1000, ack 0, offset 8 words, ACK, window 65535, checksum
            // (filled below), urgent 0
            0x27, 0x17, 0x00, 0x50, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x80, 0x10, 0xff, 0xff, 0, 0, 0, 0,
            // NOP NOP TS TSval 2000123 us TSecr 0
            1, 1, 8, 10, 0x00, 0x1e, 0x84, 0xfb, 0, 0, 0, 0,
        ];
        fill_checksums(&mut want, 1500);
        assert_eq!(
            &want[26..28],
            [0x1f, 0x61],
            "independent IP checksum (Python)"
        );
        assert_eq!(rec, want);
        let ip = &rec[RECORD_HEADER_LEN..RECORD_HEADER_LEN + 20];
        assert_eq!(inet_checksum(ip), 0, "a correct header sums to 0xffff");
    }

    #[test]
    fn ack_record_with_two_sack_blocks() {
        let rec = record(1_500_000_123, &ack_packet());
        #[rustfmt::skip]
        let mut want = vec![
            // ts_sec 1, ts_nsec 500000123, incl_len 72, orig_len 72 (the 52 bytes the simulator
            // counts do not hold the SACK option)
            1, 0, 0, 0, 0x7b, 0x65, 0xcd, 0x1d, 72, 0, 0, 0, 72, 0, 0, 0,
            // IPv4: TOS 0, total length 72, DF, TTL 64, TCP, 10.0.1.3 -> 10.0.0.1
            0x45, 0, 0, 72, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 1, 3, 10, 0, 0, 1,
            // TCP: 80 -> 10007, seq 0, ack 5000, offset 13 words, ACK, window 65535
            0x00, 0x50, 0x27, 0x17, 0, 0, 0, 0, 0, 0, 0x13, 0x88, 0xd0, 0x10, 0xff, 0xff, 0, 0, 0, 0,
            // NOP NOP TS TSval 2010000 TSecr 2000123
            1, 1, 8, 10, 0x00, 0x1e, 0xab, 0x90, 0x00, 0x1e, 0x84, 0xfb,
            // NOP NOP SACK len 18: 8000-9448, 11000-12448
            1, 1, 5, 18,
            0, 0, 0x1f, 0x40, 0, 0, 0x24, 0xe8,
            0, 0, 0x2a, 0xf8, 0, 0, 0x30, 0xa0,
        ];
        assert_eq!(1_500_000_123u32 - 1_000_000_000, 0x1dcd657b);
        fill_checksums(&mut want, 72);
        assert_eq!(
            &want[26..28],
            [0x25, 0xad],
            "independent IP checksum (Python)"
        );
        assert_eq!(rec, want);
    }

    #[test]
    fn udp_header_and_snaplen() {
        let mut p = Packet::new(3, PacketKind::Udp, NodeId(1), NodeId(2), 1200);
        p.dscp = 10;
        let rec = record(5, &p);
        assert_eq!(&rec[8..16], [28, 0, 0, 0, 0xb0, 0x04, 0, 0]);
        let ip = &rec[RECORD_HEADER_LEN..];
        assert_eq!(ip.len(), 28);
        assert_eq!((ip[1], ip[9]), (40, 17));
        assert_eq!(inet_checksum(&ip[..20]), 0);
        // ports 10003 -> 80, length 1180
        assert_eq!(&ip[20..26], [0x27, 0x13, 0x00, 0x50, 0x04, 0x9c]);
        let mut seg = vec![0u8; 12 + 1180];
        seg[0..8].copy_from_slice(&ip[12..20]);
        seg[9] = 17;
        seg[10..12].copy_from_slice(&1180u16.to_be_bytes());
        seg[12..20].copy_from_slice(&ip[20..28]);
        assert_eq!(inet_checksum(&seg), 0, "UDP checksum over the zero payload");

        // A snap length shorter than the headers cuts the record, not orig_len.
        let mut w = PcapWriter::new(Vec::new(), 24).unwrap();
        w.write(0, &data_packet()).unwrap();
        let out = w.into_inner();
        assert_eq!(out.len(), GLOBAL_HEADER_LEN + RECORD_HEADER_LEN + 24);
        assert_eq!(&out[32..40], [24, 0, 0, 0, 0xdc, 0x05, 0, 0]);

        let mut w = PcapWriter::new(Vec::new(), DEFAULT_SNAPLEN).unwrap();
        assert!(w.write((u32::MAX as u64 + 1) * 1_000_000_000, &p).is_err());
        assert!(w.write((u32::MAX as u64) * 1_000_000_000, &p).is_ok());
    }

    #[test]
    fn tshark_reads_the_file() {
        if Command::new("tshark").arg("--version").output().is_err() {
            println!("skipped: tshark not installed (apt-get install tshark)");
            return;
        }
        let path = std::env::temp_dir().join(format!("macroflow-pcap-{}.pcap", std::process::id()));
        // KEEP_PCAP=1 keeps the file for a look in Wireshark.
        let keep = std::env::var_os("KEEP_PCAP").is_some();
        let mut ack3 = ack_packet();
        ack3.sack[2] = SackBlock {
            start: 14000,
            end: 15448,
        };
        ack3.n_sack = 3;
        ack3.ack = (5u64 << 32) + 6000; // wraps to 6000
        let mut udp = Packet::new(9, PacketKind::Udp, NodeId(70_000), NodeId(3), 1000);
        udp.dscp = 8;
        let packets = [
            (1_000_000_001, data_packet()),
            (1_500_000_123, ack_packet()),
            (3_723_000_000_042, ack3),
            (3_723_999_999_999, udp),
        ];
        {
            let f = std::fs::File::create(&path).unwrap();
            let mut w = PcapWriter::new(io::BufWriter::new(f), DEFAULT_SNAPLEN).unwrap();
            for (t, p) in &packets {
                w.write(*t, p).unwrap();
            }
            w.flush().unwrap();
        }
        let fields = [
            "frame.time_epoch",
            "frame.len",
            "frame.cap_len",
            "frame.protocols",
            "ip.src",
            "ip.dst",
            "ip.len",
            "ip.dsfield.dscp",
            "ip.ttl",
            "ip.checksum.status",
            "tcp.srcport",
            "tcp.dstport",
            "tcp.seq_raw",
            "tcp.ack_raw",
            "tcp.hdr_len",
            "tcp.checksum.status",
            "tcp.options.timestamp.tsval",
            "tcp.options.timestamp.tsecr",
            "tcp.options.sack_le",
            "tcp.options.sack_re",
            "udp.srcport",
            "udp.length",
        ];
        let mut cmd = Command::new("tshark");
        cmd.arg("-n")
            .arg("-r")
            .arg(&path)
            .args(["-o", "ip.check_checksum:TRUE"])
            .args(["-o", "tcp.check_checksum:TRUE"])
            .args(["-o", "tcp.relative_sequence_numbers:FALSE"])
            .args(["-T", "fields", "-E", "separator=|"]);
        for f in fields {
            cmd.args(["-e", f]);
        }
        let out = cmd.output().unwrap();
        if !keep {
            std::fs::remove_file(&path).unwrap();
        }
        let stdout = String::from_utf8(out.stdout).unwrap();
        println!("tshark printed ({}):\n{stdout}", fields.join("|"));
        assert!(
            out.status.success(),
            "tshark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Vec<&str>> = stdout.lines().map(|l| l.split('|').collect()).collect();
        #[rustfmt::skip]
        let want: [[&str; 22]; 4] = [
            // checksum status: 1 good, 2 unverified (the data segment's payload is not captured)
            ["1.000000001", "1500", "52", "raw:ip:tcp", "10.0.0.1", "10.0.1.3", "1500", "46", "64",
             "1", "10007", "80", "1000", "0", "32", "2", "2000123", "0", "", "", "", ""],
            ["1.500000123", "72", "72", "raw:ip:tcp", "10.0.1.3", "10.0.0.1", "72", "0", "64",
             "1", "80", "10007", "0", "5000", "52", "1", "2010000", "2000123", "8000,11000",
             "9448,12448", "", ""],
            ["3723.000000042", "80", "80", "raw:ip:tcp", "10.0.1.3", "10.0.0.1", "80", "0", "64",
             "1", "80", "10007", "0", "6000", "60", "1", "2010000", "2000123", "8000,11000,14000",
             "9448,12448,15448", "", ""],
            ["3723.999999999", "1000", "28", "raw:ip:udp", "10.1.17.113", "10.0.0.4", "1000", "8",
             "64", "1", "", "", "", "", "", "", "", "", "", "", "10009", "980"],
        ];
        assert_eq!(rows, want);
    }
}
