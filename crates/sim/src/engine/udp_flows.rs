//! UDP flows: packets from a traffic source (CBR, on/off, the self-similar cross traffic of seed
//! 003 sec. 9.3), counted at the sink.

use super::fabric::Fabric;
use super::sched::{Event, Scheduler};
use super::{check_dscp, check_endpoints, five_tuple_hash, Ctx};
use crate::error::SimError;
use crate::net::NodeId;
use crate::packet::{Packet, PacketKind};
use crate::rng::SimRng;
use crate::stats::UdpSummary;
use crate::traffic::{PacketSource, Source, SourceConfig};
use coupling::Instant;

/// A UDP flow: packets from a traffic source, counted at the sink.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpFlowConfig {
    pub src: NodeId,
    pub dst: NodeId,
    pub start: Instant,
    /// When it stops sending (none: at the end of the run): cross traffic that comes and goes
    /// moves a bottleneck (the shared-bottleneck detection cases, issue 20).
    pub end: Option<Instant>,
    pub source: SourceConfig,
    pub dscp: u8,
}

#[derive(Debug)]
struct UdpFlow {
    cfg: UdpFlowConfig,
    source: Source,
    hash: u32,
    next_size: u32,
    sent_pkts: u64,
    sent_bytes: u64,
    received_pkts: u64,
    received_bytes: u64,
}

#[derive(Debug, Default)]
pub(crate) struct UdpFlows {
    flows: Vec<UdpFlow>,
}

impl UdpFlows {
    pub fn add(
        &mut self,
        cfg: UdpFlowConfig,
        fabric: &mut Fabric,
        sched: &mut Scheduler,
        rng: &mut SimRng,
    ) -> Result<u32, SimError> {
        let i = self.flows.len() as u32;
        let name = format!("udp_flow[{i}]");
        check_endpoints(&fabric.net, &name, cfg.src, cfg.dst)?;
        check_dscp(&name, cfg.dscp)?;
        if let Some(end) = cfg.end.filter(|&e| e <= cfg.start) {
            return Err(SimError::invalid(
                format!("{name}.end"),
                format!("{} s", end.as_secs_f64()),
                "an end after the flow's start",
            ));
        }
        let hash = five_tuple_hash(cfg.src, cfg.dst, 17, 20_000 + (i % 40_000) as u16, 5004);
        fabric.net.path(cfg.src, cfg.dst, hash)?;
        let mut source = cfg.source.build(&format!("{name}.source"), rng)?;
        let first = source.next(rng);
        let (start, end) = (cfg.start, cfg.end);
        self.flows.push(UdpFlow {
            cfg,
            source,
            hash,
            next_size: 0,
            sent_pkts: 0,
            sent_bytes: 0,
            received_pkts: 0,
            received_bytes: 0,
        });
        if let Some((gap, size)) = first.filter(|(gap, _)| before_end(end, start + *gap)) {
            self.flows[i as usize].next_size = size;
            sched.schedule(start + gap, Event::Udp(i));
        }
        Ok(i)
    }

    /// Flow `i` sends its next packet and draws the one after.
    pub fn send(&mut self, i: u32, cx: &mut Ctx) {
        let now = cx.now;
        let u = &mut self.flows[i as usize];
        let mut p = Packet::new(i, PacketKind::Udp, u.cfg.src, u.cfg.dst, u.next_size);
        p.dscp = u.cfg.dscp;
        p.hash = u.hash;
        p.ts_ns = now.as_nanos();
        u.sent_pkts += 1;
        u.sent_bytes += u.next_size as u64;
        let next = u.source.next(cx.rng);
        let end = u.cfg.end;
        cx.out.packets.push(p);
        cx.flush();
        if let Some((gap, size)) = next.filter(|(gap, _)| before_end(end, now + *gap)) {
            self.flows[i as usize].next_size = size;
            cx.schedule(now + gap, Event::Udp(i));
        }
    }

    pub fn deliver(&mut self, p: &Packet) {
        let u = &mut self.flows[p.flow as usize];
        u.received_pkts += 1;
        u.received_bytes += p.size_bytes as u64;
    }

    pub fn summaries(&self, net: &crate::net::Network, duration_s: f64) -> Vec<UdpSummary> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, u)| UdpSummary {
                flow: i as u32,
                src: net.node_name(u.cfg.src).to_string(),
                dst: net.node_name(u.cfg.dst).to_string(),
                sent_pkts: u.sent_pkts,
                sent_bytes: u.sent_bytes,
                received_pkts: u.received_pkts,
                received_bytes: u.received_bytes,
                // Over the time it sent (to its end, if it stopped before the run's).
                throughput_bps: if duration_s > 0.0 {
                    let until = u
                        .cfg
                        .end
                        .map_or(duration_s, |e| e.as_secs_f64().min(duration_s));
                    u.received_bytes as f64 * 8.0 / (until - u.cfg.start.as_secs_f64()).max(1e-9)
                } else {
                    0.0
                },
            })
            .collect()
    }
}

/// Whether a packet due at `due` is sent: before the flow's end, if it has one.
fn before_end(end: Option<Instant>, due: Instant) -> bool {
    end.is_none_or(|e| due < e)
}
