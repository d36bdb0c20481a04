//! The discrete-event engine and the simulation it runs.
//!
//! Time is an integer nanosecond [`Instant`]; events with equal times run in the order they were
//! scheduled (a sequence number breaks ties), and one seeded generator draws every random number,
//! so a run is bitwise reproducible. Per hop a packet costs at most two events: the end of its
//! serialization and its arrival, and a link keeps only its head packet's arrival scheduled (its
//! propagating packets wait in order in the link's pipe), so the event heap stays small.

use crate::error::SimError;
use crate::net::queue::QItem;
use crate::net::{LinkId, Network, NodeId};
use crate::packet::{Packet, PacketId, PacketKind, PacketPool};
use crate::pcap::{PcapWriter, DEFAULT_SNAPLEN};
use crate::rng::{seeded, SimRng};
use crate::stats::{
    FlowSample, FlowSummary, LinkSummary, PacketEvent, PacketEventKind, QueueSample, Results,
    UdpSummary,
};
use crate::traffic::{PacketSource, Source, SourceConfig, WebWorkload};
use crate::transport::cc::CcKind;
use crate::transport::tcp::{Endpoints, Outbox, TcpConfig, TcpReceiver, TcpSender};
use coupling::tcp::{CouplerKind, Release, TcpCoupler, TcpUpdate};
use coupling::{Duration, FlowId, Instant};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A link finished serializing its current packet.
    TxDone(u32),
    /// The head of a link's pipe reaches the far end.
    Arrive(u32),
    Start(u32),
    Rto(u32),
    DelAck(u32),
    Sample,
    /// A UDP source sends its next packet.
    UdpSend(u32),
    /// Index into `Sim::priority_changes`.
    SetPriority(u32),
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
            cc: CcKind::NewReno,
            tcp: TcpConfig::default(),
            dscp: 0,
        }
    }
}

#[derive(Debug)]
struct Flow {
    cfg: TcpFlowConfig,
    snd: TcpSender,
    rcv: TcpReceiver,
    started: bool,
    /// (group, priority) if the flow is coupled.
    coupling: Option<(usize, f64)>,
    /// The (cwnd, ssthresh, state) last reported to the coupler or applied from it.
    reported: Option<(f64, f64, coupling::tcp::TcpState)>,
    left_group: bool,
    rto_event: Option<Instant>,
    delack_event: Option<Instant>,
}

/// A UDP flow: packets from a traffic source, counted at the sink.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpFlowConfig {
    pub src: NodeId,
    pub dst: NodeId,
    pub start: Instant,
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

#[derive(Debug)]
struct Group {
    coupler: Box<dyn TcpCoupler>,
}

/// Totals for the packet-conservation check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketCounts {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

#[derive(Debug)]
pub struct Sim {
    pub net: Network,
    now: Instant,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    next_seq: u64,
    pool: PacketPool,
    rng: SimRng,
    flows: Vec<Flow>,
    groups: Vec<Group>,
    out: Outbox,
    releases: Vec<Release>,
    counts: PacketCounts,
    events_run: u64,
    sample_interval: Option<Duration>,
    monitored_links: Vec<LinkId>,
    flow_samples: Vec<FlowSample>,
    queue_samples: Vec<QueueSample>,
    priority_changes: Vec<(u32, f64)>,
    /// pcap captures of chosen links: packets as they start serialization on the link.
    captures: Vec<Capture>,
    trace: Option<Vec<PacketEvent>>,
    udp: Vec<UdpFlow>,
}

struct Capture {
    link: LinkId,
    writer: PcapWriter<Box<dyn Write + Send>>,
    /// The first write error; reported by `flush_captures`, so a full disk cannot change the run.
    error: Option<String>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("link", &self.link)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// A simulation over `net` (routes must be computed), with one generator seeded by `seed`.
    pub fn new(net: Network, seed: u64) -> Result<Self, SimError> {
        if !net.is_routed() {
            return Err(SimError::invalid(
                "network",
                "unrouted",
                "routes computed (Network::compute_routes)",
            ));
        }
        Ok(Sim {
            net,
            now: Instant::ZERO,
            events: BinaryHeap::new(),
            next_seq: 0,
            pool: PacketPool::default(),
            rng: seeded(seed),
            flows: Vec::new(),
            groups: Vec::new(),
            out: Outbox::default(),
            releases: Vec::new(),
            counts: PacketCounts::default(),
            events_run: 0,
            sample_interval: None,
            monitored_links: Vec::new(),
            flow_samples: Vec::new(),
            queue_samples: Vec::new(),
            priority_changes: Vec::new(),
            captures: Vec::new(),
            trace: None,
            udp: Vec::new(),
        })
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    fn schedule(&mut self, at: Instant, ev: Event) {
        self.next_seq += 1;
        self.events
            .push(Reverse((at.as_nanos(), self.next_seq, ev)));
    }

    /// Records every flow's window and every monitored link's queue each `interval`.
    pub fn sample_every(&mut self, interval: Duration, links: &[LinkId]) -> Result<(), SimError> {
        if interval == Duration::ZERO {
            return Err(SimError::invalid(
                "sample_interval",
                "0 s",
                "an interval > 0",
            ));
        }
        for (i, l) in links.iter().enumerate() {
            if l.0 as usize >= self.net.links.len() {
                return Err(SimError::invalid(
                    format!("monitored_links[{i}]"),
                    l.0,
                    "an existing link",
                ));
            }
        }
        if self.sample_interval.is_none() {
            self.schedule(self.now, Event::Sample);
        }
        self.sample_interval = Some(interval);
        self.monitored_links = links.to_vec();
        Ok(())
    }

    /// Captures every packet `link` transmits into a pcap file written to `out` (headers only,
    /// nanosecond timestamps, raw IPv4: `tshark -r` reads it).
    pub fn capture(&mut self, link: LinkId, out: Box<dyn Write + Send>) -> Result<(), SimError> {
        if link.0 as usize >= self.net.links.len() {
            return Err(SimError::invalid(
                "capture.link",
                link.0,
                "an existing link",
            ));
        }
        let writer = PcapWriter::new(out, DEFAULT_SNAPLEN)
            .map_err(|e| SimError::invalid("capture.file", e, "a writable file"))?;
        self.captures.push(Capture {
            link,
            writer,
            error: None,
        });
        Ok(())
    }

    /// Records every packet's enqueue, drop, transmission and delivery (memory grows with the run).
    pub fn trace_packets(&mut self, on: bool) {
        self.trace = on.then(Vec::new);
    }

    fn trace_event(&mut self, kind: PacketEventKind, link: u32, p: &Packet) {
        if let Some(t) = &mut self.trace {
            t.push(PacketEvent {
                t_ns: self.now.as_nanos(),
                kind,
                link,
                flow: p.flow,
                packet: p.kind,
                seq: p.seq,
                ack: p.ack,
                size_bytes: p.size_bytes,
            });
        }
    }

    /// Flushes the pcap captures.
    pub fn flush_captures(&mut self) -> Result<(), SimError> {
        for c in &mut self.captures {
            let name = format!("capture[link {}]", c.link.0);
            if let Some(e) = &c.error {
                return Err(SimError::invalid(name, e, "a writable file"));
            }
            c.writer
                .flush()
                .map_err(|e| SimError::invalid(name, e, "a writable file"))?;
        }
        Ok(())
    }

    /// Adds a TCP flow; returns its index. Errors name the parameter (`flow[i].…`).
    pub fn add_tcp_flow(&mut self, cfg: TcpFlowConfig) -> Result<u32, SimError> {
        let i = self.flows.len() as u32;
        let name = format!("flow[{i}]");
        for (field, node) in [("src", cfg.src), ("dst", cfg.dst)] {
            if node.0 as usize >= self.net.nodes.len() {
                return Err(SimError::UnknownNode {
                    name: format!("{name}.{field}"),
                    node: node.0.to_string(),
                });
            }
        }
        if cfg.src == cfg.dst {
            return Err(SimError::invalid(
                format!("{name}.dst"),
                cfg.dst.0,
                "a node other than the source",
            ));
        }
        if cfg.size_bytes == Some(0) {
            return Err(SimError::invalid(
                format!("{name}.size_bytes"),
                0,
                "a transfer of at least 1 byte",
            ));
        }
        if cfg.dscp > 63 {
            return Err(SimError::invalid(
                format!("{name}.dscp"),
                cfg.dscp,
                "a DSCP in 0..=63",
            ));
        }
        cfg.tcp.check(&format!("{name}.tcp"))?;
        let hash = five_tuple_hash(cfg.src, cfg.dst, 6, 10_000 + (i % 50_000) as u16, 80);
        self.net.path(cfg.src, cfg.dst, hash)?;
        self.net.path(cfg.dst, cfg.src, hash)?;
        let ep = Endpoints {
            flow: i,
            src: cfg.src,
            dst: cfg.dst,
            dscp: cfg.dscp,
            hash,
        };
        let snd = TcpSender::new(cfg.tcp, cfg.cc.build(), ep, cfg.size_bytes);
        let rcv = TcpReceiver::new(cfg.tcp, ep);
        self.schedule(cfg.start, Event::Start(i));
        self.flows.push(Flow {
            cfg,
            snd,
            rcv,
            started: false,
            coupling: None,
            reported: None,
            left_group: false,
            rto_event: None,
            delack_event: None,
        });
        Ok(i)
    }

    /// Adds a UDP flow driven by a traffic source (CBR, on/off, the self-similar cross traffic of
    /// seed 003 sec. 9.3); returns its index among UDP flows. Errors name the parameter
    /// (`udp_flow[i].…`).
    pub fn add_udp_flow(&mut self, cfg: UdpFlowConfig) -> Result<u32, SimError> {
        let i = self.udp.len() as u32;
        let name = format!("udp_flow[{i}]");
        for (field, node) in [("src", cfg.src), ("dst", cfg.dst)] {
            if node.0 as usize >= self.net.nodes.len() {
                return Err(SimError::UnknownNode {
                    name: format!("{name}.{field}"),
                    node: node.0.to_string(),
                });
            }
        }
        if cfg.src == cfg.dst {
            return Err(SimError::invalid(
                format!("{name}.dst"),
                cfg.dst.0,
                "a node other than the source",
            ));
        }
        if cfg.dscp > 63 {
            return Err(SimError::invalid(
                format!("{name}.dscp"),
                cfg.dscp,
                "a DSCP in 0..=63",
            ));
        }
        let hash = five_tuple_hash(cfg.src, cfg.dst, 17, 20_000 + (i % 40_000) as u16, 5004);
        self.net.path(cfg.src, cfg.dst, hash)?;
        let mut source = cfg.source.build(&format!("{name}.source"), &mut self.rng)?;
        let first = source.next(&mut self.rng);
        let start = cfg.start;
        self.udp.push(UdpFlow {
            cfg,
            source,
            hash,
            next_size: 0,
            sent_pkts: 0,
            sent_bytes: 0,
            received_pkts: 0,
            received_bytes: 0,
        });
        if let Some((gap, size)) = first {
            self.udp[i as usize].next_size = size;
            self.schedule(start + gap, Event::UdpSend(i));
        }
        Ok(i)
    }

    /// Adds the short TCP flows of a web-like workload (standing in for the TMIX traces of seed
    /// 003) between `pairs` of nodes from `start` to `end`; returns the flows' indices.
    pub fn add_web_workload(
        &mut self,
        workload: &WebWorkload,
        pairs: &[(NodeId, NodeId)],
        start: Instant,
        end: Instant,
        tcp: TcpFlowConfig,
    ) -> Result<Vec<u32>, SimError> {
        workload.check("web")?;
        if pairs.len() != workload.pairs {
            return Err(SimError::invalid(
                "web.pairs",
                pairs.len(),
                "as many node pairs as web.pairs says",
            ));
        }
        let flows = workload.flows(&mut self.rng, start, end);
        let mut ids = Vec::with_capacity(flows.len());
        for f in flows {
            let (src, dst) = pairs[f.pair];
            ids.push(self.add_tcp_flow(TcpFlowConfig {
                src,
                dst,
                start: f.start,
                size_bytes: Some(f.size_bytes),
                ..tcp.clone()
            })?);
        }
        Ok(ids)
    }

    fn udp_send(&mut self, i: u32) {
        let now = self.now;
        let u = &mut self.udp[i as usize];
        let mut p = Packet::new(i, PacketKind::Udp, u.cfg.src, u.cfg.dst, u.next_size);
        p.dscp = u.cfg.dscp;
        p.hash = u.hash;
        p.ts_ns = now.as_nanos();
        u.sent_pkts += 1;
        u.sent_bytes += u.next_size as u64;
        let next = u.source.next(&mut self.rng);
        self.out.packets.push(p);
        self.flush();
        if let Some((gap, size)) = next {
            self.udp[i as usize].next_size = size;
            self.schedule(now + gap, Event::UdpSend(i));
        }
    }

    /// A coupling group running `kind` (from `crates/coupling`, the code users ship).
    pub fn add_coupling_group(&mut self, kind: CouplerKind) -> usize {
        self.groups.push(Group {
            coupler: kind.build(),
        });
        self.groups.len() - 1
    }

    /// Puts `flow` into `group` with `priority`; it registers when it starts.
    pub fn couple(&mut self, flow: u32, group: usize, priority: f64) -> Result<(), SimError> {
        let name = format!("flow[{flow}].coupling");
        if group >= self.groups.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "an existing coupling group",
            ));
        }
        coupling::units::check_priority(priority).map_err(|_| {
            SimError::invalid(
                format!("{name}.priority"),
                priority,
                "a priority > 0 and <= 1e12",
            )
        })?;
        let f = self
            .flows
            .get_mut(flow as usize)
            .ok_or(SimError::UnknownFlow { name, flow })?;
        f.coupling = Some((group, priority));
        Ok(())
    }

    /// Changes a coupled flow's priority at `at` (seed 003 Fig. 5.13, 9.12).
    pub fn schedule_priority(
        &mut self,
        at: Instant,
        flow: u32,
        priority: f64,
    ) -> Result<(), SimError> {
        let name = format!("priority_change[flow {flow}]");
        let f = self.flows.get(flow as usize).ok_or(SimError::UnknownFlow {
            name: name.clone(),
            flow,
        })?;
        if f.coupling.is_none() {
            return Err(SimError::invalid(name, flow, "a coupled flow"));
        }
        coupling::units::check_priority(priority).map_err(|_| {
            SimError::invalid(
                format!("{name}.priority"),
                priority,
                "a priority > 0 and <= 1e12",
            )
        })?;
        self.priority_changes.push((flow, priority));
        self.schedule(
            at,
            Event::SetPriority(self.priority_changes.len() as u32 - 1),
        );
        Ok(())
    }

    /// Runs events until `end` (inclusive) or until none are left.
    pub fn run_until(&mut self, end: Instant) {
        while let Some(&Reverse((t, _, ev))) = self.events.peek() {
            if t > end.as_nanos() {
                break;
            }
            self.events.pop();
            self.now = Instant::from_nanos(t);
            self.events_run += 1;
            self.dispatch(ev);
        }
        self.now = self.now.max(end);
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::TxDone(l) => self.tx_done(LinkId(l)),
            Event::Arrive(l) => self.arrive(LinkId(l)),
            Event::Start(f) => self.start_flow(f),
            Event::Rto(f) => self.rto(f),
            Event::DelAck(f) => {
                let fl = &mut self.flows[f as usize];
                fl.delack_event = None;
                fl.rcv.on_delack_timer(self.now, &mut self.out);
                if let Some(d) = fl.rcv.delack_deadline() {
                    if d > self.now {
                        self.arm_delack(f);
                    }
                }
                self.flush();
            }
            Event::Sample => self.sample(),
            Event::UdpSend(i) => self.udp_send(i),
            Event::SetPriority(i) => {
                let (flow, p) = self.priority_changes[i as usize];
                if let Some((g, _)) = self.flows[flow as usize].coupling {
                    self.flows[flow as usize].coupling = Some((g, p));
                    if self.flows[flow as usize].started && !self.flows[flow as usize].left_group {
                        let _ = self.groups[g].coupler.set_priority(FlowId(flow as u64), p);
                    }
                }
            }
        }
    }

    // ----- network -----

    /// Sends every packet in the outbox from its source node.
    fn flush(&mut self) {
        // In the order they were sent; the buffer is handed back to keep its capacity.
        let mut buf = std::mem::take(&mut self.out.packets);
        for p in buf.drain(..) {
            self.counts.created += 1;
            let src = p.src;
            let id = self.pool.alloc(p);
            self.forward(src, id);
        }
        self.out.packets = buf;
    }

    fn forward(&mut self, at: NodeId, id: PacketId) {
        let p = self.pool.get(id);
        if p.dst == at {
            self.deliver(id);
            return;
        }
        let link = self
            .net
            .route(at, p.dst, p.hash)
            .expect("flows are checked for routes when added");
        self.enqueue(link, id);
    }

    /// Offers a packet to a link: every packet goes through the queue discipline (so RED's average,
    /// a marker's meter and random drop see all arrivals, as in ns-2), and an idle link takes it
    /// straight back out.
    fn enqueue(&mut self, link: LinkId, id: PacketId) {
        let p = *self.pool.get(id);
        let now = self.now;
        self.trace_event(PacketEventKind::Enqueue, link.0, &p);
        let l = &mut self.net.links[link.0 as usize];
        l.stats.offered_pkts += 1;
        l.account_queue(now);
        let item = QItem {
            id,
            size_bytes: p.size_bytes,
            flow: p.flow,
            dscp: p.dscp,
            color: p.color,
        };
        let dropped = l.queue.enqueue(item, now, &mut self.rng);
        if let Some(d) = dropped {
            if self.trace.is_some() {
                let dp = *self.pool.get(d.id);
                self.trace_event(PacketEventKind::Drop, link.0, &dp);
            }
            let l = &mut self.net.links[link.0 as usize];
            l.stats.dropped_pkts += 1;
            l.stats.dropped_bytes += d.size_bytes as u64;
            self.counts.dropped += 1;
            self.pool.free(d.id);
        }
        let l = &mut self.net.links[link.0 as usize];
        if l.transmitting.is_none() {
            if let Some(next) = l.queue.dequeue(now) {
                self.start_tx(link, next.id, next.size_bytes);
            }
        } else {
            l.note_queue_len();
        }
    }

    fn start_tx(&mut self, link: LinkId, id: PacketId, size: u32) {
        if self.trace.is_some() {
            let p = *self.pool.get(id);
            self.trace_event(PacketEventKind::Transmit, link.0, &p);
        }
        if !self.captures.is_empty() {
            let t = self.now.as_nanos();
            let p = *self.pool.get(id);
            for c in self
                .captures
                .iter_mut()
                .filter(|c| c.link == link && c.error.is_none())
            {
                if let Err(e) = c.writer.write(t, &p) {
                    c.error = Some(e.to_string());
                }
            }
        }
        let l = &mut self.net.links[link.0 as usize];
        l.transmitting = Some(id);
        let tx = l.tx_time(size);
        l.stats.busy_ns += tx.as_nanos();
        l.stats.tx_pkts += 1;
        l.stats.tx_bytes += size as u64;
        let at = self.now + tx;
        self.schedule(at, Event::TxDone(link.0));
    }

    fn tx_done(&mut self, link: LinkId) {
        let now = self.now;
        let l = &mut self.net.links[link.0 as usize];
        let id = l
            .transmitting
            .take()
            .expect("a link finishing a transmission has a packet");
        let arrive = now + l.delay;
        l.pipe.push_back((arrive, id));
        let first = l.pipe.len() == 1;
        l.account_queue(now);
        let next = l.queue.dequeue(now);
        if first {
            self.schedule(arrive, Event::Arrive(link.0));
        }
        if let Some(item) = next {
            self.start_tx(link, item.id, item.size_bytes);
        }
    }

    fn arrive(&mut self, link: LinkId) {
        let l = &mut self.net.links[link.0 as usize];
        let (_, id) = l.pipe.pop_front().expect("an arrival has a packet");
        let to = l.to;
        if let Some(&(t, _)) = l.pipe.front() {
            self.schedule(t, Event::Arrive(link.0));
        }
        self.forward(to, id);
    }

    fn deliver(&mut self, id: PacketId) {
        let p = self.pool.free(id);
        self.counts.delivered += 1;
        self.trace_event(PacketEventKind::Deliver, u32::MAX, &p);
        let f = p.flow;
        match p.kind {
            PacketKind::TcpData => {
                let fl = &mut self.flows[f as usize];
                fl.rcv.on_data(&p, self.now, &mut self.out);
                if fl.rcv.delack_deadline().is_some() && fl.delack_event.is_none() {
                    self.arm_delack(f);
                }
                self.flush();
            }
            PacketKind::TcpAck => self.on_ack(f, &p),
            PacketKind::Udp => {
                let u = &mut self.udp[f as usize];
                u.received_pkts += 1;
                u.received_bytes += p.size_bytes as u64;
            }
        }
    }

    // ----- transport -----

    fn arm_rto(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        if let Some(d) = fl.snd.rto_deadline() {
            if fl.rto_event.is_none_or(|e| e > d) {
                fl.rto_event = Some(d);
                self.schedule(d, Event::Rto(f));
            }
        }
    }

    fn arm_delack(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        if let Some(d) = fl.rcv.delack_deadline() {
            fl.delack_event = Some(d);
            self.schedule(d, Event::DelAck(f));
        }
    }

    fn start_flow(&mut self, f: u32) {
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        fl.started = true;
        if let Some((g, p)) = fl.coupling {
            let tp = fl.snd.tp;
            match self.groups[g]
                .coupler
                .register(FlowId(f as u64), p, tp.cwnd, tp.ssthresh)
            {
                Ok(r) => {
                    fl.snd.set_window(r.cwnd_pkts, r.ssthresh_pkts);
                    fl.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, fl.snd.coupling_state()));
                }
                Err(_) => fl.coupling = None,
            }
        }
        let fl = &mut self.flows[f as usize];
        fl.snd.start(now, &mut self.out);
        self.arm_rto(f);
        self.flush();
    }

    /// Reports the sender's window to its coupler when it changed, and applies the answer
    /// (seed 003 sec. 9.2.2: "they update their status each time they change cwnd").
    fn sync_coupling(&mut self, f: u32, timeout: bool) {
        let fl = &mut self.flows[f as usize];
        let Some((g, _)) = fl.coupling else { return };
        if fl.left_group {
            return;
        }
        let state = fl.snd.coupling_state();
        let now = (fl.snd.tp.cwnd, fl.snd.tp.ssthresh, state);
        if !timeout && fl.reported == Some(now) {
            return;
        }
        let u = TcpUpdate {
            cwnd_pkts: now.0,
            ssthresh_pkts: now.1,
            state,
            timeout,
        };
        match self.groups[g].coupler.update(FlowId(f as u64), u) {
            Ok(Some(r)) => {
                fl.snd.set_window(r.cwnd_pkts, r.ssthresh_pkts);
                fl.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, fl.snd.coupling_state()));
            }
            Ok(None) => fl.reported = Some(now),
            Err(e) => panic!("coupling rejected a report of flow {f}: {e}"),
        }
    }

    fn on_ack(&mut self, f: u32, p: &Packet) {
        let now = self.now;
        let new_data = self.flows[f as usize].snd.on_ack(p, now, &mut self.out);
        self.sync_coupling(f, false);
        // Ack-clocked handover: this ACK may release segments of joining flows.
        if new_data {
            if let Some((g, _)) = self.flows[f as usize].coupling {
                if !self.flows[f as usize].left_group {
                    self.releases.clear();
                    let _ = self.groups[g]
                        .coupler
                        .on_ack(FlowId(f as u64), &mut self.releases);
                    for i in 0..self.releases.len() {
                        let r = self.releases[i];
                        let j = r.conn.0 as u32;
                        let other = &mut self.flows[j as usize];
                        let ssthresh = other.snd.tp.ssthresh;
                        other.snd.set_window(r.cwnd_pkts, ssthresh);
                        other.reported = Some((r.cwnd_pkts, ssthresh, other.snd.coupling_state()));
                        other.snd.send_available(now, &mut self.out);
                        self.arm_rto(j);
                    }
                }
            }
        }
        let fl = &mut self.flows[f as usize];
        fl.snd.send_available(now, &mut self.out);
        if let (Some(_), Some((g, _)), false) = (fl.snd.finished_at, fl.coupling, fl.left_group) {
            // A finished transfer leaves its group (Algorithm 6).
            fl.left_group = true;
            let _ = self.groups[g].coupler.leave(FlowId(f as u64));
        }
        self.arm_rto(f);
        self.flush();
    }

    fn rto(&mut self, f: u32) {
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        fl.rto_event = None;
        match fl.snd.rto_deadline() {
            Some(d) if d <= now => {
                fl.snd.on_rto(now);
                self.sync_coupling(f, true);
                let fl = &mut self.flows[f as usize];
                fl.snd.send_available(now, &mut self.out);
                self.arm_rto(f);
                self.flush();
            }
            Some(_) => self.arm_rto(f),
            None => {}
        }
    }

    // ----- measurement -----

    fn sample(&mut self) {
        let Some(interval) = self.sample_interval else {
            return;
        };
        let t = self.now;
        for (i, fl) in self.flows.iter().enumerate() {
            if !fl.started {
                continue;
            }
            self.flow_samples.push(FlowSample {
                t_ns: t.as_nanos(),
                flow: i as u32,
                cwnd_pkts: fl.snd.tp.cwnd,
                ssthresh_pkts: fl.snd.tp.ssthresh,
                state: fl.snd.coupling_state(),
                delivered_bytes: fl.rcv.delivered_bytes(),
                srtt_s: fl.snd.srtt().map_or(f64::NAN, |d| d.as_secs_f64()),
            });
        }
        for &l in &self.monitored_links {
            let link = &self.net.links[l.0 as usize];
            self.queue_samples.push(QueueSample {
                t_ns: t.as_nanos(),
                link: l.0,
                pkts: link.queue_len_pkts() as u32,
                bytes: link.queue_len_bytes(),
            });
        }
        self.schedule(t + interval, Event::Sample);
    }

    /// Packets created, delivered, dropped and in flight so far: created = delivered + dropped +
    /// in flight always holds.
    pub fn packet_counts(&self) -> PacketCounts {
        PacketCounts {
            in_flight: self.pool.live() as u64,
            ..self.counts
        }
    }

    pub fn events_run(&self) -> u64 {
        self.events_run
    }

    /// The high-water mark of the packet pool (memory does not grow with simulated time).
    pub fn packet_pool_capacity(&self) -> usize {
        self.pool.capacity()
    }

    pub fn coupler(&self, group: usize) -> Option<&dyn TcpCoupler> {
        self.groups.get(group).map(|g| g.coupler.as_ref())
    }

    /// Summaries and time series of the run so far.
    pub fn results(&mut self) -> Results {
        let c = self.packet_counts();
        assert_eq!(
            c.created,
            c.delivered + c.dropped + c.in_flight,
            "packet conservation: {c:?}"
        );
        let now = self.now;
        for l in &mut self.net.links {
            l.account_queue(now);
        }
        let duration_s = now.as_secs_f64();
        let flows: Vec<FlowSummary> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, fl)| {
                let start = fl.cfg.start.as_secs_f64();
                let end = fl.snd.finished_at.map(|t| t.as_secs_f64());
                let active = end.unwrap_or(duration_s) - start;
                let delivered = fl.rcv.delivered_bytes();
                FlowSummary {
                    flow: i as u32,
                    src: self.net.node_name(fl.cfg.src).to_string(),
                    dst: self.net.node_name(fl.cfg.dst).to_string(),
                    cc: fl.snd.cc_name(),
                    start_s: start,
                    fct_s: end.map(|e| e - start),
                    delivered_bytes: delivered,
                    goodput_bps: if active > 0.0 {
                        delivered as f64 * 8.0 / active
                    } else {
                        0.0
                    },
                    data_pkts_sent: fl.snd.stats.data_pkts_sent,
                    retransmits: fl.snd.stats.retransmits,
                    timeouts: fl.snd.stats.timeouts,
                    fast_recoveries: fl.snd.stats.fast_recoveries,
                    mean_rtt_s: if fl.snd.stats.rtt_samples > 0 {
                        fl.snd.stats.rtt_sum_s / fl.snd.stats.rtt_samples as f64
                    } else {
                        f64::NAN
                    },
                    data_pkts_received: fl.rcv.stats.data_pkts,
                }
            })
            .collect();
        let links = self
            .net
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                LinkSummary::new(
                    i as u32,
                    self.net.node_name(l.from),
                    self.net.node_name(l.to),
                    l,
                    duration_s,
                )
            })
            .collect();
        let udp_flows = self
            .udp
            .iter()
            .enumerate()
            .map(|(i, u)| UdpSummary {
                flow: i as u32,
                src: self.net.node_name(u.cfg.src).to_string(),
                dst: self.net.node_name(u.cfg.dst).to_string(),
                sent_pkts: u.sent_pkts,
                sent_bytes: u.sent_bytes,
                received_pkts: u.received_pkts,
                received_bytes: u.received_bytes,
                throughput_bps: if duration_s > 0.0 {
                    u.received_bytes as f64 * 8.0
                        / (duration_s - u.cfg.start.as_secs_f64()).max(1e-9)
                } else {
                    0.0
                },
            })
            .collect();
        Results {
            duration_s,
            flows,
            udp_flows,
            links,
            flow_samples: self.flow_samples.clone(),
            queue_samples: self.queue_samples.clone(),
            packet_events: self.trace.clone().unwrap_or_default(),
            packets: self.packet_counts(),
            events: self.events_run,
        }
    }
}

/// A deterministic hash of a five-tuple (FNV-1a), for ECMP.
pub fn five_tuple_hash(src: NodeId, dst: NodeId, proto: u8, sport: u16, dport: u16) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |b: u8| {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    };
    for b in src.0.to_le_bytes().into_iter().chain(dst.0.to_le_bytes()) {
        eat(b);
    }
    eat(proto);
    for b in sport.to_le_bytes().into_iter().chain(dport.to_le_bytes()) {
        eat(b);
    }
    h
}
