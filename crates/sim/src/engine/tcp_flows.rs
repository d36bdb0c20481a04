//! TCP flows: their connections (sender, receiver, timers), driven by events and by the packets
//! the fabric delivers. A coupled flow's controller calls its coupling group from its own hooks
//! (`transport::coupled`); this agent passes the groups in, applies the segments a handover
//! releases to other flows, and has a finished flow leave its group.
//!
//! A TCP flow may instead be coupled through an FSE group (`fse`): it reports its rate,
//! cwnd / SRTT, once per round trip and applies the rate the FSE answers (seed 003 sec. 6.3.1).
//!
//! A flow's connection exists only from the flow's start until it has finished and none of its
//! packets is left in the network; then a summary replaces it (issue 13: a web workload drew about
//! 1.2 kB per flow up front and kept it to the end, 62 MB for an hour at 5 Mbit/s).

mod fse;

use super::coupling::FseSignalling;
use super::fabric::Fabric;
use super::sched::{Event, Scheduler};
use super::{check_dscp, check_endpoints, five_tuple_hash, Ctx};
use crate::error::SimError;
use crate::net::NodeId;
use crate::packet::{Packet, PacketKind};
use crate::stats::{BurstStats, FlowSample, FlowSummary};
use crate::transport::cc::CcKind;
use crate::transport::coupled::{Coupled, CouplingGroups, Seat};
use crate::transport::tcp::{
    Endpoints, ReceiverStats, SenderStats, TcpConfig, TcpReceiver, TcpSender,
};
use coupling::tcp::TcpState;
use coupling::{Duration, Instant};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TcpEvent {
    Start(u32),
    Rto(u32),
    DelAck(u32),
}

/// A TCP flow to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpFlowConfig {
    pub src: NodeId,
    pub dst: NodeId,
    pub start: Instant,
    /// Bytes to transfer; `None`: bulk, for the whole run.
    pub size_bytes: Option<u64>,
    pub cc: CcKind,
    pub tcp: TcpConfig,
    pub dscp: u8,
}

impl TcpFlowConfig {
    pub fn bulk(src: NodeId, dst: NodeId) -> Self {
        TcpFlowConfig {
            src,
            dst,
            start: Instant::ZERO,
            size_bytes: None,
            cc: CcKind::named("newreno"),
            tcp: TcpConfig::default(),
            dscp: 0,
        }
    }
}

/// A TCP flow as the engine keeps it.
#[derive(Debug)]
struct Flow {
    src: NodeId,
    dst: NodeId,
    start: Instant,
    size_bytes: Option<u64>,
    cc: CcKind,
    dscp: u8,
    hash: u32,
    /// Index into `TcpFlows::configs`: the flows of a web workload share one.
    tcp: u32,
    /// (group, priority) if the flow is coupled (and, once started, its registration was
    /// accepted).
    coupling: Option<(usize, f64)>,
    /// Whether the sampler still visits it (it takes one sample after the flow ends).
    sampled: bool,
    state: FlowState,
}

// `Done` is large on purpose: held inline (see below), every flow's record has one size.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum FlowState {
    /// Not started yet.
    Pending,
    Live(Box<Conn>),
    /// Finished and freed. Held inline: a boxed summary per flow, allocated among the
    /// connections being freed, fragmented the heap (RSS grew twice the summaries' size).
    Done(DoneFlow),
}

/// A started TCP flow's endpoints and the engine's state for it.
#[derive(Debug)]
struct Conn {
    snd: TcpSender,
    rcv: TcpReceiver,
    rto_event: Option<Instant>,
    delack_event: Option<Instant>,
}

/// What the results need of a finished flow whose connection was freed.
#[derive(Debug)]
struct DoneFlow {
    finished_at: Instant,
    delivered_bytes: u64,
    cc: &'static str,
    snd: SenderStats,
    rcv: ReceiverStats,
    bursts: BurstStats,
    /// The window, threshold, state and smoothed RTT it was freed with (nothing changes them
    /// afterwards): the row of a sample taken after, if sampling is turned on mid-run.
    last: (f64, f64, TcpState, Option<Duration>),
}

impl Flow {
    /// The live connection of a flow the caller knows is live (started, not retired).
    fn conn(&mut self) -> &mut Conn {
        match &mut self.state {
            FlowState::Live(c) => c,
            _ => unreachable!("a live flow's connection"),
        }
    }

    fn live(&mut self) -> Option<&mut Conn> {
        match &mut self.state {
            FlowState::Live(c) => Some(c),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct TcpFlows {
    flows: Vec<Flow>,
    /// The TCP configurations flows use (see `Flow::tcp`).
    configs: Vec<TcpConfig>,
    /// The flows the sampler visits (started, not finished an interval ago), in id order: with
    /// web traffic most flows are finished, and visiting them all every interval made the run's
    /// time grow with the square of its duration (issue 13).
    sampled: Vec<u32>,
    /// Scratch for the flows leaving `sampled` at a sample (kept for its capacity).
    sampling_left: Vec<u32>,
    /// Whether the recorder samples flows (a starting flow then joins `sampled`).
    sampled_on: bool,
    /// Scheduled priority changes: (flow, priority), by the index their event carries.
    changes: Vec<(u32, f64)>,
    /// Scratch for the segments an ACK releases to joining flows (kept for its capacity).
    releases: Vec<coupling::tcp::Release>,
    /// The flows coupled to an FSE group, by flow (few: kept apart from the flows' records).
    fse: BTreeMap<u32, fse::FseSeat>,
}

impl TcpFlows {
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn add(
        &mut self,
        cfg: TcpFlowConfig,
        fabric: &mut Fabric,
        sched: &mut Scheduler,
    ) -> Result<u32, SimError> {
        let i = self.flows.len() as u32;
        let name = format!("flow[{i}]");
        check_endpoints(&fabric.net, &name, cfg.src, cfg.dst)?;
        if cfg.size_bytes == Some(0) {
            return Err(SimError::invalid(
                format!("{name}.size_bytes"),
                0,
                "a transfer of at least 1 byte",
            ));
        }
        check_dscp(&name, cfg.dscp)?;
        cfg.tcp.check(&format!("{name}.tcp"))?;
        let hash = five_tuple_hash(cfg.src, cfg.dst, 6, 10_000 + (i % 50_000) as u16, 80);
        fabric.net.path(cfg.src, cfg.dst, hash)?;
        fabric.net.path(cfg.dst, cfg.src, hash)?;
        // The flows of a web workload share their configuration: look at the latest one only.
        if self.configs.last() != Some(&cfg.tcp) {
            self.configs.push(cfg.tcp);
        }
        sched.schedule(cfg.start, Event::Tcp(TcpEvent::Start(i)));
        self.flows.push(Flow {
            src: cfg.src,
            dst: cfg.dst,
            start: cfg.start,
            size_bytes: cfg.size_bytes,
            cc: cfg.cc,
            dscp: cfg.dscp,
            hash,
            tcp: self.configs.len() as u32 - 1,
            coupling: None,
            sampled: false,
            state: FlowState::Pending,
        });
        Ok(i)
    }

    /// Puts a flow that has not started yet into a coupling group; it registers when it starts.
    pub fn couple(&mut self, flow: u32, group: usize, priority: f64) -> Result<(), SimError> {
        let name = format!("flow[{flow}].coupling");
        let f = self
            .flows
            .get_mut(flow as usize)
            .ok_or(SimError::UnknownFlow {
                name: name.clone(),
                flow,
            })?;
        if !matches!(f.state, FlowState::Pending) {
            // It registers when it starts; coupling a running flow is not supported.
            return Err(SimError::invalid(
                name,
                flow,
                "a flow that has not started yet",
            ));
        }
        if self.fse.contains_key(&flow) {
            return Err(SimError::invalid(
                name,
                flow,
                "a flow not coupled to an FSE group (a TCP flow is in one group)",
            ));
        }
        f.coupling = Some((group, priority));
        Ok(())
    }

    pub fn is_coupled(&self, flow: u32) -> Option<bool> {
        self.flows.get(flow as usize).map(|f| f.coupling.is_some())
    }

    /// The flow's congestion control and, if coupled, its group.
    pub fn cc_and_group(&self, flow: u32) -> Option<(CcKind, Option<usize>)> {
        self.flows
            .get(flow as usize)
            .map(|f| (f.cc, f.coupling.map(|(g, _)| g)))
    }

    /// Keeps a priority change for its event; returns the event's index.
    pub fn push_change(&mut self, flow: u32, priority: f64) -> u32 {
        self.changes.push((flow, priority));
        self.changes.len() as u32 - 1
    }

    /// A scheduled priority change (the event's index): the coupler is told if the flow is in its
    /// group now; a flow that has not started registers with it.
    pub fn set_priority(&mut self, change: u32, coupling: &mut CouplingGroups) {
        let (flow, priority) = self.changes[change as usize];
        let fl = &mut self.flows[flow as usize];
        if let Some((g, _)) = fl.coupling {
            fl.coupling = Some((g, priority));
            if let Some(c) = fl.live() {
                c.snd.set_priority(priority, coupling);
            }
        }
    }

    pub fn handle(&mut self, ev: TcpEvent, cx: &mut Ctx, coupling: &mut CouplingGroups) {
        match ev {
            TcpEvent::Start(f) => self.start(f, cx, coupling),
            TcpEvent::Rto(f) => self.rto(f, cx, coupling),
            TcpEvent::DelAck(f) => {
                let c = self.flows[f as usize].conn();
                c.delack_event = None;
                c.rcv.on_delack_timer(cx.now, cx.out);
                if let Some(d) = c.rcv.delack_deadline() {
                    if d > cx.now {
                        self.arm_delack(f, cx);
                    }
                }
                cx.flush();
                self.retire_if_done(f, cx.fabric);
            }
        }
    }

    /// A packet of flow `p.flow` reached its destination.
    pub fn deliver(
        &mut self,
        p: &Packet,
        cx: &mut Ctx,
        coupling: &mut CouplingGroups,
        fse: &mut FseSignalling,
    ) {
        let f = p.flow;
        match p.kind {
            PacketKind::TcpData => {
                let c = self.flows[f as usize].conn();
                c.rcv.on_data(p, cx.now, cx.out);
                if c.rcv.delack_deadline().is_some() && c.delack_event.is_none() {
                    self.arm_delack(f, cx);
                }
                cx.flush();
            }
            PacketKind::TcpAck => self.on_ack(f, p, cx, coupling, fse),
            _ => unreachable!("TCP packets only"),
        }
        self.retire_if_done(f, cx.fabric);
    }

    /// Applies measured group `group`'s pending regroupings to its live connections (a connection
    /// in fast recovery waits: `transport::measured`).
    pub fn apply_measured(&mut self, group: usize, cx: &mut Ctx, coupling: &mut CouplingGroups) {
        let Some(m) = coupling.measured(group) else {
            return;
        };
        if !m.has_pending_actions() {
            return;
        }
        let actions = m.pending_actions();
        for a in actions {
            let f = a.flow().0 as u32;
            let Some(c) = self.flows.get_mut(f as usize).and_then(Flow::live) else {
                continue;
            };
            let current = c.snd.current_update();
            let m = coupling.measured_mut(group).expect("checked above");
            if let Some(r) = m.apply(&a, current) {
                c.snd.on_moved(r.cwnd_pkts, r.ssthresh_pkts);
                c.snd.send_available(cx.now, cx.out);
                self.arm_rto(f, cx);
                cx.flush();
            }
        }
    }

    fn arm_rto(&mut self, f: u32, cx: &mut Ctx) {
        let c = self.flows[f as usize].conn();
        if let Some(d) = c.snd.rto_deadline() {
            if c.rto_event.is_none_or(|e| e > d) {
                c.rto_event = Some(d);
                cx.schedule(d, Event::Tcp(TcpEvent::Rto(f)));
            }
        }
    }

    fn arm_delack(&mut self, f: u32, cx: &mut Ctx) {
        let c = self.flows[f as usize].conn();
        if let Some(d) = c.rcv.delack_deadline() {
            c.delack_event = Some(d);
            cx.schedule(d, Event::Tcp(TcpEvent::DelAck(f)));
        }
    }

    fn start(&mut self, f: u32, cx: &mut Ctx, coupling: &mut CouplingGroups) {
        let fl = &mut self.flows[f as usize];
        let cfg = self.configs[fl.tcp as usize];
        let ep = Endpoints {
            flow: f,
            src: fl.src,
            dst: fl.dst,
            dscp: fl.dscp,
            hash: fl.hash,
        };
        let seat = fl
            .coupling
            .map(|(group, priority)| Seat { group, priority });
        let cc = Coupled::new(fl.cc.build(), f, seat);
        let c = Box::new(Conn {
            // The controller's init registers a coupled flow with its group.
            snd: TcpSender::coupled(cfg, cc, ep, fl.size_bytes, coupling),
            rcv: TcpReceiver::new(cfg, ep),
            rto_event: None,
            delack_event: None,
        });
        if !c.snd.controller().is_coupled() {
            fl.coupling = None; // refused (counted): it runs uncoupled
        }
        fl.state = FlowState::Live(c);
        // An FSE-coupled flow notes its path's RTT; it registers at its first RTT sample.
        self.fse_start(f, cx);
        let fl = &mut self.flows[f as usize];
        fl.conn().snd.start(cx.now, cx.out);
        if self.sampled_on {
            // Kept in id order (flows start in any order): the samples at one instant are by flow.
            let at = self.sampled.partition_point(|&g| g < f);
            self.sampled.insert(at, f);
            fl.sampled = true;
        }
        self.arm_rto(f, cx);
        cx.flush();
    }

    /// Frees a finished flow's connection, keeping its summary, once nothing can reach it any
    /// more: none of its packets is in the network, no delayed ACK is pending, and the sampler has
    /// taken the one sample it takes after a flow ends.
    pub fn retire_if_done(&mut self, f: u32, fabric: &Fabric) {
        let fl = &mut self.flows[f as usize];
        let FlowState::Live(c) = &fl.state else {
            return;
        };
        let Some(finished_at) = c.snd.finished_at else {
            return;
        };
        if fabric.tcp_in_network(f) > 0 || c.delack_event.is_some() || fl.sampled {
            return;
        }
        let done = DoneFlow {
            finished_at,
            delivered_bytes: c.rcv.delivered_bytes(),
            cc: c.snd.cc_name(),
            snd: c.snd.stats,
            rcv: c.rcv.stats,
            bursts: c.snd.bursts(),
            last: (
                c.snd.tp.cwnd,
                c.snd.tp.ssthresh,
                c.snd.coupling_state(),
                c.snd.srtt(),
            ),
        };
        fl.state = FlowState::Done(done);
    }

    fn on_ack(
        &mut self,
        f: u32,
        p: &Packet,
        cx: &mut Ctx,
        coupling: &mut CouplingGroups,
        fse: &mut FseSignalling,
    ) {
        let now = cx.now;
        // The sender's controller reports to its group at the end of the ACK.
        self.flows[f as usize]
            .conn()
            .snd
            .on_ack(p, now, cx.out, coupling);
        // Ack-clocked handover: this ACK may have released segments of joining flows.
        coupling.take_releases(&mut self.releases);
        for i in 0..self.releases.len() {
            let r = self.releases[i];
            let j = r.conn.0 as u32;
            // A group releases only to its members, which are live.
            let other = self.flows[j as usize].conn();
            other.snd.on_release(r.cwnd_pkts);
            other.snd.send_available(now, cx.out);
            self.arm_rto(j, cx);
        }
        // An FSE-coupled flow's UPDATE, once per round trip; an answer without signalling delay
        // sets its window before it sends.
        self.fse_round(f, cx, fse);
        let c = self.flows[f as usize].conn();
        c.snd.send_available(now, cx.out);
        if c.snd.finished_at.is_some() {
            // A finished transfer leaves its group (Algorithm 6; once).
            c.snd.release(coupling);
            self.fse_leave(f, cx, fse);
        }
        self.arm_rto(f, cx);
        cx.flush();
    }

    fn rto(&mut self, f: u32, cx: &mut Ctx, coupling: &mut CouplingGroups) {
        let now = cx.now;
        // A retired flow's timer event may still be in the heap: it has nothing to do.
        let Some(c) = self.flows[f as usize].live() else {
            return;
        };
        // Only the armed event acts. `arm_rto` schedules an earlier event when the deadline moves
        // earlier and leaves the later one in the heap; that superseded event must not clear the
        // armed timer and re-arm, or every one of them breeds another (issue 12).
        if c.rto_event != Some(now) {
            return;
        }
        c.rto_event = None;
        match c.snd.rto_deadline() {
            Some(d) if d <= now => {
                c.snd.on_rto(now, coupling);
                c.snd.send_available(now, cx.out);
                self.arm_rto(f, cx);
                cx.flush();
            }
            Some(_) => self.arm_rto(f, cx),
            None => {}
        }
    }

    /// Sampling turned on at `now` every `interval`: the flows that have started and not
    /// finished an interval ago are sampled from now on (a retired one from its summary), and
    /// flows that start later join.
    pub fn start_sampling(&mut self, now: Instant, interval: Duration) {
        self.sampled_on = true;
        self.sampled.clear();
        for (i, fl) in self.flows.iter_mut().enumerate() {
            fl.sampled = match &fl.state {
                FlowState::Pending => false,
                FlowState::Live(_) => true,
                FlowState::Done(d) => d.finished_at + interval > now,
            };
            if fl.sampled {
                self.sampled.push(i as u32);
            }
        }
    }

    /// Sampling has stopped for good (the row bound): no flow is held for the sampler any more.
    pub fn stop_sampling(&mut self, fabric: &Fabric) {
        self.sampled_on = false;
        for i in std::mem::take(&mut self.sampled) {
            self.flows[i as usize].sampled = false;
            self.retire_if_done(i, fabric);
        }
    }

    /// One sample of every flow the sampler visits. A finished flow gets one sample after it
    /// ends, then leaves the list (and may be freed): with web traffic the finished flows
    /// outnumber the live ones, and re-sampling them made memory grow with the square of the
    /// duration (issue 13: 4.68 M rows and 2 GB at 600 s).
    pub fn sample(
        &mut self,
        t: Instant,
        interval: Duration,
        rows: &mut Vec<FlowSample>,
        fabric: &Fabric,
    ) {
        let flows = &self.flows;
        let mut left = std::mem::take(&mut self.sampling_left);
        self.sampled.retain(|&i| {
            let finished = match &flows[i as usize].state {
                FlowState::Live(c) => c.snd.finished_at,
                FlowState::Done(d) => Some(d.finished_at),
                FlowState::Pending => unreachable!("a sampled flow has started"),
            };
            let keep = finished.is_none_or(|f| f + interval > t);
            if !keep {
                left.push(i);
            }
            keep
        });
        for &i in &self.sampled {
            let ((cwnd, ssthresh, state, srtt), delivered) = match &self.flows[i as usize].state {
                FlowState::Live(c) => (
                    (
                        c.snd.tp.cwnd,
                        c.snd.tp.ssthresh,
                        c.snd.coupling_state(),
                        c.snd.srtt(),
                    ),
                    c.rcv.delivered_bytes(),
                ),
                FlowState::Done(d) => (d.last, d.delivered_bytes),
                FlowState::Pending => unreachable!("a sampled flow has started"),
            };
            rows.push(FlowSample {
                t_ns: t.as_nanos(),
                flow: i,
                cwnd_pkts: cwnd,
                ssthresh_pkts: ssthresh,
                state,
                delivered_bytes: delivered,
                srtt_s: srtt.map_or(f64::NAN, |d| d.as_secs_f64()),
            });
        }
        for i in left.drain(..) {
            self.flows[i as usize].sampled = false;
            self.retire_if_done(i, fabric);
        }
        self.sampling_left = left;
    }

    /// Flows whose connection state is held (see [`super::Sim::live_tcp_flows`]).
    pub fn live(&self) -> usize {
        self.flows
            .iter()
            .filter(|f| matches!(f.state, FlowState::Live(_)))
            .count()
    }

    /// A row per flow, whatever its state, for a run that has reached `duration_s`.
    /// `dropped`: each flow's data segments the network dropped (by flow; shorter when the last
    /// flows lost none).
    pub fn summaries(
        &self,
        net: &crate::net::Network,
        dropped: &[u64],
        duration_s: f64,
    ) -> Vec<FlowSummary> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, fl)| {
                let (finished_at, delivered, cc, snd, rcv, bursts) = match &fl.state {
                    FlowState::Pending => (
                        None,
                        0,
                        fl.cc.build().name(),
                        SenderStats::default(),
                        ReceiverStats::default(),
                        BurstStats::default(),
                    ),
                    FlowState::Live(c) => (
                        c.snd.finished_at,
                        c.rcv.delivered_bytes(),
                        c.snd.cc_name(),
                        c.snd.stats,
                        c.rcv.stats,
                        // Includes the open burst without closing it: results mid-run change
                        // nothing.
                        c.snd.bursts(),
                    ),
                    FlowState::Done(d) => (
                        Some(d.finished_at),
                        d.delivered_bytes,
                        d.cc,
                        d.snd,
                        d.rcv,
                        d.bursts,
                    ),
                };
                let start = fl.start.as_secs_f64();
                let end = finished_at.map(|t| t.as_secs_f64());
                let active = end.unwrap_or(duration_s) - start;
                FlowSummary {
                    flow: i as u32,
                    src: net.node_name(fl.src).to_string(),
                    dst: net.node_name(fl.dst).to_string(),
                    cc,
                    start_s: start,
                    fct_s: end.map(|e| e - start),
                    delivered_bytes: delivered,
                    goodput_bps: if active > 0.0 {
                        delivered as f64 * 8.0 / active
                    } else {
                        0.0
                    },
                    data_pkts_sent: snd.data_pkts_sent,
                    retransmits: snd.retransmits,
                    lost_pkts: dropped.get(i).copied().unwrap_or(0),
                    timeouts: snd.timeouts,
                    max_burst_pkts: bursts.max_pkts,
                    burst_hist: bursts.hist,
                    fast_recoveries: snd.fast_recoveries,
                    mean_rtt_s: if snd.rtt_samples > 0 {
                        snd.rtt_sum_s / snd.rtt_samples as f64
                    } else {
                        f64::NAN
                    },
                    data_pkts_received: rcv.data_pkts,
                }
            })
            .collect()
    }
}
