//! UDP senders (issue 15): the simulator's own packet sources (sim::traffic) drive a real UDP
//! socket, so a UDP flow on the testbed is the same process as in the simulator given the same
//! parameters: the source is built as the engine builds it (crates/sim/src/engine/udp_flows.rs:
//! `SourceConfig::new(kind).build(name, rng)`, the first packet one gap after the start, each next
//! one a gap after the previous), with its own generator `sim::rng::seeded(seed)`.

use super::clock::{now_ns, set_timer_slack, Run};
use super::{UdpFlowConfig, UdpSentReport};
use sim::rng::SimRng;
use sim::traffic::{PacketSource, Source};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::SocketAddrV4;

/// IPv4 (20) and UDP (8) headers: a source's size is the IP packet's, the payload 28 bytes less.
pub(crate) const IP_UDP_HEADER_BYTES: u32 = 28;

/// The agent's header at the start of every UDP payload, big-endian:
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | flow id (`UdpFlowConfig::flow`), u32 |
/// | 4..12 | sequence number, u64, from 0, one per packet the socket accepted |
/// | 12..20 | send time, u64 ns since the epoch (CLOCK_MONOTONIC), only when the payload has room |
///
/// The first 12 bytes fit the smallest packet the simulator's sizes draw (40-byte IP packets:
/// 12 bytes of payload); the send time, when present, gives the sink the one-way delay (all
/// namespaces share the clock). The rest of the payload is zeros.
pub(crate) const HEADER_BYTES: usize = 12;
pub(crate) const HEADER_WITH_TIME_BYTES: usize = 20;
/// The smallest IP packet a flow sends: the headers and the agent's header.
pub(crate) const MIN_IP_BYTES: u32 = IP_UDP_HEADER_BYTES + HEADER_BYTES as u32;

/// A packet sent later than its due time by more than this counts in `late_pkts`.
pub(crate) const LATE_NS: u64 = 1_000_000;

/// Writes the header into `buf` (whose length is the payload's).
pub(crate) fn write_header(buf: &mut [u8], flow: u32, seq: u64, sent_ns: u64) {
    buf[0..4].copy_from_slice(&flow.to_be_bytes());
    buf[4..12].copy_from_slice(&seq.to_be_bytes());
    if buf.len() >= HEADER_WITH_TIME_BYTES {
        buf[12..20].copy_from_slice(&sent_ns.to_be_bytes());
    }
}

/// Reads (flow, sequence, send time if present) from a payload; None if it is too short.
pub(crate) fn read_header(buf: &[u8]) -> Option<(u32, u64, Option<u64>)> {
    if buf.len() < HEADER_BYTES {
        return None;
    }
    let flow = u32::from_be_bytes(buf[0..4].try_into().ok()?);
    let seq = u64::from_be_bytes(buf[4..12].try_into().ok()?);
    let sent = (buf.len() >= HEADER_WITH_TIME_BYTES)
        .then(|| u64::from_be_bytes(buf[12..20].try_into().unwrap()));
    Some((flow, seq, sent))
}

/// One planned UDP flow: its source already built (so a bad parameter failed before ready).
pub(crate) struct UdpJob {
    pub cfg: UdpFlowConfig,
    pub name: String,
    pub dst: SocketAddrV4,
    pub start_ns: u64,
    /// When it stops sending (the run's end if sooner), ns on the agent's clock.
    pub end_ns: Option<u64>,
    pub source: Source,
    pub rng: SimRng,
}

/// Opens the flow's socket: IP_TOS = dscp << 2, a send timeout so a full socket buffer cannot
/// hold the thread past the end.
pub(crate) fn open(dscp: u8) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_tos_v4((dscp as u32) << 2)?;
    s.set_write_timeout(Some(std::time::Duration::from_nanos(
        super::clock::CHECK_NS,
    )))?;
    Ok(s)
}

pub(crate) fn run(mut job: UdpJob, sock: Socket, run: Run) -> UdpSentReport {
    set_timer_slack();
    let mut rep = UdpSentReport {
        flow: job.cfg.flow,
        ..Default::default()
    };
    let dst = SockAddr::from(job.dst);
    let mut buf = vec![0u8; 65_536];
    let mut due = job.start_ns;
    let mut late_sum_ns = 0u128;
    let mut first_error = None;
    while let Some((gap, size)) = job.source.next(&mut job.rng) {
        due = due.saturating_add(gap.as_nanos());
        if due >= run.end_ns || job.end_ns.is_some_and(|e| due >= e) || !run.sleep_until(due) {
            break;
        }
        let ip_bytes = size.max(MIN_IP_BYTES);
        let payload = &mut buf[..(ip_bytes - IP_UDP_HEADER_BYTES) as usize];
        let now = now_ns();
        write_header(
            payload,
            job.cfg.flow,
            rep.pkts,
            now.saturating_sub(run.epoch_ns),
        );
        match sock.send_to(payload, &dst) {
            Ok(_) => {
                rep.pkts += 1;
                rep.bytes += ip_bytes as u64;
                let late = now.saturating_sub(due);
                late_sum_ns += late as u128;
                rep.max_late_s = rep.max_late_s.max(late as f64 * 1e-9);
                if late > LATE_NS {
                    rep.late_pkts += 1;
                }
                if ip_bytes != size {
                    rep.enlarged_pkts += 1;
                }
            }
            Err(e) => {
                rep.send_errors += 1;
                first_error.get_or_insert_with(|| (run.now_s(), e.to_string()));
            }
        }
    }
    if rep.pkts > 0 {
        rep.mean_late_s = late_sum_ns as f64 / rep.pkts as f64 * 1e-9;
    }
    if let Some((t, e)) = first_error {
        run.error(format!(
            "{} (flow {}): {} send errors, the first at {t:.3} s: {e}",
            job.name, job.cfg.flow, rep.send_errors
        ));
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut b = [0xffu8; 20];
        write_header(&mut b, 7, 1 << 40, 123_456_789);
        assert_eq!(read_header(&b), Some((7, 1 << 40, Some(123_456_789))));
        let mut b = [0u8; 12];
        write_header(&mut b, 3, 9, 5);
        assert_eq!(read_header(&b), Some((3, 9, None)));
        assert_eq!(read_header(&b[..11]), None);
        assert_eq!(&b[..4], &[0, 0, 0, 3]);
    }
}
