//! The discrete-event engine and the simulation it runs.
//!
//! Time is an integer nanosecond [`Instant`]; events with equal times run in the order they were
//! scheduled (a sequence number breaks ties), and one seeded generator draws every random number,
//! so a run is bitwise reproducible. Per hop a packet costs at most two events: the end of its
//! serialization and its arrival, and a link keeps only its head packet's arrival scheduled (its
//! propagating packets wait in order in the link's pipe), so the event heap stays small.

use crate::error::SimError;
use crate::media::{MediaSource, MediaState};
use crate::net::queue::QItem;
use crate::net::{LinkId, Network, NodeId};
use crate::packet::{Packet, PacketId, PacketKind, PacketPool};
use crate::pcap::{PcapWriter, DEFAULT_SNAPLEN};
use crate::rng::{seeded, SimRng};
use crate::stats::{
    BurstStats, FlowSample, FlowSummary, LinkSummary, MediaSample, MediaSummary, PacketEvent,
    PacketEventKind, QueueSample, Results, UdpSummary,
};
use crate::traffic::{PacketSource, Source, SourceConfig, WebWorkload};
use crate::transport::cc::CcKind;
use crate::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use crate::transport::tcp::{
    Endpoints, Outbox, ReceiverStats, SenderStats, TcpConfig, TcpReceiver, TcpSender,
};
use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::tcp::{CouplerKind, Release, TcpCoupler, TcpUpdate};
use coupling::{Duration, FlowId, Instant};
use rand::RngExt;
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
    MediaStart(u32),
    /// A media flow's pacer: (flow, generation; stale generations are ignored).
    MediaSend(u32, u32),
    MediaSndTimer(u32),
    MediaRcvTimer(u32),
    /// A delayed FSE message reaches the FSE or a flow (index into `Sim::fse_msgs`).
    FseMsg(u32),
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

/// A TCP flow as the engine keeps it. Its connection (sender, receiver, timers) exists only from
/// the flow's start until it has finished and none of its packets is left in the network; then a
/// summary replaces it (issue 13: a web workload drew about 1.2 kB per flow up front and kept it
/// to the end, 62 MB for an hour at 5 Mbit/s).
#[derive(Debug)]
struct Flow {
    src: NodeId,
    dst: NodeId,
    start: Instant,
    size_bytes: Option<u64>,
    cc: CcKind,
    dscp: u8,
    hash: u32,
    /// Index into `Sim::tcp_configs`: the flows of a web workload share one.
    tcp: u32,
    /// (group, priority) if the flow is coupled.
    coupling: Option<(usize, f64)>,
    /// This flow's packets (data and ACKs) in the network: the connection is kept until none is.
    in_network: u32,
    state: FlowState,
}

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
    /// The (cwnd, ssthresh, state) last reported to the coupler or applied from it.
    reported: Option<(f64, f64, coupling::tcp::TcpState)>,
    left_group: bool,
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

/// A rate-controlled media flow (RAP, TFRC, NADA, GCC) carrying a media source.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaFlowConfig {
    pub src: NodeId,
    pub dst: NodeId,
    pub start: Instant,
    pub packet_bytes: u32,
    pub source: MediaSource,
    /// Intervals without data (media pause and resume).
    pub pauses: Vec<(Instant, Instant)>,
    pub dscp: u8,
}

/// How a media flow is coupled: its FSE group, priority, and the delay of its signalling with the
/// FSE (seed 003 Fig. 6.11), fixed or uniform in `[min, max]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FseCoupling {
    pub group: usize,
    pub priority: f64,
    pub delay_min: Duration,
    pub delay_max: Duration,
}

#[derive(Debug)]
struct MediaFlow {
    cfg: MediaFlowConfig,
    snd: Box<dyn RateSender>,
    rcv: Box<dyn RateReceiver>,
    source: MediaState,
    hash: u32,
    base_rtt: Duration,
    seq: u64,
    send_gen: u32,
    /// When the last packet left and its size: the pacer's reference.
    last_send: Option<(Instant, u32)>,
    idle: bool,
    snd_timer: Option<Instant>,
    rcv_timer: Option<Instant>,
    fse: Option<FseCoupling>,
    in_fse: bool,
    sent_pkts: u64,
    sent_bytes: u64,
    received_pkts: u64,
    received_bytes: u64,
    owd_sum_s: f64,
}

#[derive(Debug)]
enum FseMsg {
    /// UPDATE(cc_rate) from `flow` on its way to the FSE.
    Update {
        flow: u32,
        cc_rate_bps: f64,
        desired_rate_bps: f64,
        rtt: Duration,
    },
    /// A rate from the FSE on its way to `flow`.
    Apply { flow: u32, rate_bps: f64 },
}

#[derive(Debug)]
struct Group {
    coupler: Box<dyn TcpCoupler>,
}

/// Values waiting for an event that carries only their index (feedback payloads in flight, delayed
/// FSE messages): slots are reused, so memory follows what is pending.
#[derive(Debug)]
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(s) => {
                self.items[s as usize] = Some(v);
                s
            }
            None => {
                self.items.push(Some(v));
                self.items.len() as u32 - 1
            }
        }
    }

    fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.items[slot as usize]
            .take()
            .expect("a pending slot holds its value")
    }
}

/// Totals for the packet-conservation check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketCounts {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

/// The shortest sampling interval (the time series of a run are for looking at).
pub const MIN_SAMPLE_INTERVAL: Duration = Duration::from_micros(1);
/// The most time-series rows a run keeps (flows, media and queues together: about 60 bytes each here,
/// and a few hundred as the Python lists `results()` returns);
/// sampling stops there and `Results::sampling_stopped_at_s` says when.
pub const MAX_SAMPLE_ROWS: usize = 2_000_000;

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
    /// When the time series stopped at MAX_SAMPLE_ROWS rows, if they did.
    sampling_stopped_at: Option<Instant>,
    /// The flows the sampler still visits (started, not finished an interval ago), in id order:
    /// with web traffic most flows are finished, and visiting them all every interval made the
    /// run's time grow with the square of its duration (issue 13).
    sampled_flows: Vec<u32>,
    /// Scratch for the flows leaving `sampled_flows` at a sample (kept for its capacity).
    sampling_left: Vec<u32>,
    /// The TCP configurations flows use (see `Flow::tcp`).
    tcp_configs: Vec<TcpConfig>,
    queue_samples: Vec<QueueSample>,
    priority_changes: Vec<(u32, f64)>,
    /// pcap captures of chosen links: packets as they start serialization on the link.
    captures: Vec<Capture>,
    trace: Option<Vec<PacketEvent>>,
    coupling_errors: u64,
    udp: Vec<UdpFlow>,
    media: Vec<MediaFlow>,
    fse_groups: Vec<FseGroup>,
    fse_msgs: Slab<FseMsg>,
    feedback: Slab<Feedback>,
    media_samples: Vec<MediaSample>,
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
            sampled_flows: Vec::new(),
            sampling_left: Vec::new(),
            tcp_configs: Vec::new(),
            sampling_stopped_at: None,
            queue_samples: Vec::new(),
            priority_changes: Vec::new(),
            captures: Vec::new(),
            trace: None,
            coupling_errors: 0,
            udp: Vec::new(),
            media: Vec::new(),
            fse_groups: Vec::new(),
            fse_msgs: Slab::default(),
            feedback: Slab::default(),
            media_samples: Vec::new(),
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
        if interval < MIN_SAMPLE_INTERVAL {
            return Err(SimError::invalid(
                "sample_interval",
                format!("{} s", interval.as_secs_f64()),
                "an interval of at least 1 us (MIN_SAMPLE_INTERVAL)",
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
            // Flows that started before sampling was turned on (retired ones have no state left).
            self.sampled_flows = (0..self.flows.len() as u32)
                .filter(|&i| self.flows[i as usize].live().is_some())
                .collect();
        }
        self.sample_interval = Some(interval);
        // Each link once: a link listed a thousand times was sampled a thousand times (issue 13).
        self.monitored_links = links.to_vec();
        self.monitored_links.sort_unstable();
        self.monitored_links.dedup();
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

    /// The source and destination of a flow exist and differ.
    fn check_endpoints(&self, name: &str, src: NodeId, dst: NodeId) -> Result<(), SimError> {
        for (field, node) in [("src", src), ("dst", dst)] {
            if node.0 as usize >= self.net.nodes.len() {
                return Err(SimError::UnknownNode {
                    name: format!("{name}.{field}"),
                    node: node.0.to_string(),
                });
            }
        }
        if src == dst {
            return Err(SimError::invalid(
                format!("{name}.dst"),
                dst.0,
                "a node other than the source",
            ));
        }
        Ok(())
    }

    /// Adds a TCP flow; returns its index. Errors name the parameter (`flow[i].…`).
    pub fn add_tcp_flow(&mut self, cfg: TcpFlowConfig) -> Result<u32, SimError> {
        let i = self.flows.len() as u32;
        let name = format!("flow[{i}]");
        self.check_endpoints(&name, cfg.src, cfg.dst)?;
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
        self.net.path(cfg.src, cfg.dst, hash)?;
        self.net.path(cfg.dst, cfg.src, hash)?;
        // The flows of a web workload share their configuration: look at the latest one only.
        if self.tcp_configs.last() != Some(&cfg.tcp) {
            self.tcp_configs.push(cfg.tcp);
        }
        self.schedule(cfg.start, Event::Start(i));
        self.flows.push(Flow {
            src: cfg.src,
            dst: cfg.dst,
            start: cfg.start,
            size_bytes: cfg.size_bytes,
            cc: cfg.cc,
            dscp: cfg.dscp,
            hash,
            tcp: self.tcp_configs.len() as u32 - 1,
            coupling: None,
            in_network: 0,
            state: FlowState::Pending,
        });
        Ok(i)
    }

    /// Adds a UDP flow driven by a traffic source (CBR, on/off, the self-similar cross traffic of
    /// seed 003 sec. 9.3); returns its index among UDP flows. Errors name the parameter
    /// (`udp_flow[i].…`).
    pub fn add_udp_flow(&mut self, cfg: UdpFlowConfig) -> Result<u32, SimError> {
        let i = self.udp.len() as u32;
        let name = format!("udp_flow[{i}]");
        self.check_endpoints(&name, cfg.src, cfg.dst)?;
        check_dscp(&name, cfg.dscp)?;
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
        if end < start {
            return Err(SimError::invalid(
                "web.end_s",
                end.as_secs_f64(),
                "an end at or after start_s (a web workload that ends before it starts sends nothing)",
            ));
        }
        // Every flow is drawn up front: bound their number, over all the simulation's flows,
        // before allocating (issue 13; about 1 kB each).
        let expected = workload.load_bps * end.saturating_since(start).as_secs_f64()
            / (8.0 * workload.mean_size_bytes);
        if expected + self.flows.len() as f64 > crate::traffic::MAX_WEB_FLOWS as f64 {
            return Err(SimError::invalid(
                "web.load_bps",
                workload.load_bps,
                "a load and duration that keep the simulation at most 1e6 flows (MAX_WEB_FLOWS)",
            ));
        }
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

    /// Adds a media flow driven by the given controller halves; returns its index among media
    /// flows. Errors name the parameter (`media_flow[i].…`).
    pub fn add_media_flow(
        &mut self,
        cfg: MediaFlowConfig,
        snd: Box<dyn RateSender>,
        rcv: Box<dyn RateReceiver>,
    ) -> Result<u32, SimError> {
        let i = self.media.len() as u32;
        let name = format!("media_flow[{i}]");
        self.check_endpoints(&name, cfg.src, cfg.dst)?;
        check_dscp(&name, cfg.dscp)?;
        if cfg.packet_bytes < 40 {
            return Err(SimError::invalid(
                format!("{name}.packet_bytes"),
                cfg.packet_bytes,
                "a packet of at least 40 bytes",
            ));
        }
        let hash = five_tuple_hash(cfg.src, cfg.dst, 17, 30_000 + (i % 30_000) as u16, 5006);
        let fwd = self.net.path(cfg.src, cfg.dst, hash)?;
        let back = self.net.path(cfg.dst, cfg.src, hash)?;
        let base_rtt = fwd.iter().chain(back.iter()).fold(Duration::ZERO, |a, l| {
            a + self.net.links[l.0 as usize].delay
        });
        let source = MediaState::new(
            cfg.source.clone(),
            cfg.start,
            cfg.pauses.clone(),
            &format!("{name}.source"),
        )?;
        self.schedule(cfg.start, Event::MediaStart(i));
        self.media.push(MediaFlow {
            cfg,
            snd,
            rcv,
            source,
            hash,
            base_rtt,
            seq: 0,
            send_gen: 0,
            last_send: None,
            idle: false,
            snd_timer: None,
            rcv_timer: None,
            fse: None,
            in_fse: false,
            sent_pkts: 0,
            sent_bytes: 0,
            received_pkts: 0,
            received_bytes: 0,
            owd_sum_s: 0.0,
        });
        Ok(i)
    }

    /// An FSE flow group running `algorithm` (from `crates/coupling`); returns its index.
    pub fn add_fse_group(&mut self, algorithm: Algorithm) -> usize {
        self.fse_groups.push(FseGroup::new(algorithm));
        self.fse_groups.len() - 1
    }

    /// Couples a media flow to an FSE group; it registers when it starts.
    pub fn couple_media(&mut self, flow: u32, c: FseCoupling) -> Result<(), SimError> {
        let name = format!("media_flow[{flow}].fse");
        if c.group >= self.fse_groups.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                c.group,
                "an existing FSE group",
            ));
        }
        coupling::units::check_priority(c.priority).map_err(|_| {
            SimError::invalid(
                format!("{name}.priority"),
                c.priority,
                "a priority > 0 and <= 1e12",
            )
        })?;
        if c.delay_max < c.delay_min {
            return Err(SimError::invalid(
                format!("{name}.delay_max"),
                c.delay_max,
                "delay_max >= delay_min",
            ));
        }
        let m = self
            .media
            .get_mut(flow as usize)
            .ok_or(SimError::UnknownFlow { name, flow })?;
        m.fse = Some(c);
        Ok(())
    }

    fn fse_delay(&mut self, flow: u32) -> Duration {
        let Some(c) = self.media[flow as usize].fse else {
            return Duration::ZERO;
        };
        if c.delay_max == c.delay_min {
            return c.delay_min;
        }
        Duration::from_nanos(
            self.rng
                .random_range(c.delay_min.as_nanos()..=c.delay_max.as_nanos()),
        )
    }

    fn post_fse(&mut self, msg: FseMsg, delay: Duration) {
        if delay == Duration::ZERO {
            self.fse_deliver(msg);
            return;
        }
        let slot = self.fse_msgs.insert(msg);
        let at = self.now + delay;
        self.schedule(at, Event::FseMsg(slot));
    }

    fn fse_deliver(&mut self, msg: FseMsg) {
        let now = self.now;
        match msg {
            FseMsg::Update {
                flow,
                cc_rate_bps,
                desired_rate_bps,
                rtt,
            } => {
                let Some(c) = self.media[flow as usize].fse else {
                    return;
                };
                if !self.media[flow as usize].in_fse {
                    return; // left while the message travelled
                }
                let u = FseUpdate {
                    cc_rate_bps,
                    desired_rate_bps,
                    rtt: Some(rtt),
                    now,
                };
                let Ok(out) = self.fse_groups[c.group].update(FlowId(flow as u64), u) else {
                    return;
                };
                let replies: Vec<(u32, f64)> = if out.assignments.is_empty() {
                    vec![(flow, out.rate_bps)]
                } else {
                    out.assignments
                        .iter()
                        .map(|a| (a.flow.0 as u32, a.rate_bps))
                        .collect()
                };
                for (f, r) in replies {
                    let d = self.fse_delay(f);
                    self.post_fse(
                        FseMsg::Apply {
                            flow: f,
                            rate_bps: r,
                        },
                        d,
                    );
                }
            }
            FseMsg::Apply { flow, rate_bps } => {
                let m = &mut self.media[flow as usize];
                if m.in_fse {
                    m.snd.set_fse_rate_bps(rate_bps, now);
                    self.media_pace(flow);
                }
            }
        }
    }

    /// Reports a media flow's controller rate to its FSE group (UPDATE), through the signalling
    /// delay; registers a flow that starts or resumes, and removes one that pauses.
    fn media_fse_sync(&mut self, i: u32) {
        let now = self.now;
        let m = &mut self.media[i as usize];
        let Some(c) = m.fse else { return };
        let paused = m.source.is_paused(now);
        if paused && m.in_fse {
            // RFC 8699 sec. 5.3: a flow that stops or pauses leaves the FSE.
            m.in_fse = false;
            let _ = self.fse_groups[c.group].leave(FlowId(i as u64));
            return;
        }
        if paused {
            return;
        }
        if !m.in_fse {
            let r = m.snd.rate_bps();
            if let Ok(rate) =
                self.fse_groups[c.group].register(FlowId(i as u64), c.priority, r, now)
            {
                let m = &mut self.media[i as usize];
                m.in_fse = true;
                m.snd.set_fse_rate_bps(rate, now);
            }
            return;
        }
        // Every time the controller computes a rate, the flow calls UPDATE (RFC 8699 sec. 5.3),
        // whether or not the rate changed.
        let cc = m.snd.cc_rate_bps();
        let msg = FseMsg::Update {
            flow: i,
            cc_rate_bps: cc.clamp(0.0, coupling::units::MAX_RATE_BPS),
            desired_rate_bps: m.source.desired_rate_bps(),
            rtt: m
                .snd
                .rtt()
                .unwrap_or(m.base_rtt)
                .max(Duration::from_micros(1)),
        };
        let d = self.fse_delay(i);
        self.post_fse(msg, d);
    }

    fn arm_media_timers(&mut self, i: u32) {
        let m = &mut self.media[i as usize];
        if let Some(t) = m.snd.next_timer() {
            if m.snd_timer.is_none_or(|e| e > t) {
                m.snd_timer = Some(t);
                let t = t.max(self.now);
                self.schedule(t, Event::MediaSndTimer(i));
            }
        }
        let m = &mut self.media[i as usize];
        if let Some(t) = m.rcv.next_timer() {
            if m.rcv_timer.is_none_or(|e| e > t) {
                m.rcv_timer = Some(t);
                let t = t.max(self.now);
                self.schedule(t, Event::MediaRcvTimer(i));
            }
        }
    }

    /// (Re)schedules the pacer at the current rate: the next packet leaves one packet time (at the
    /// new rate) after the last one, or now if that has passed.
    fn media_pace(&mut self, i: u32) {
        let now = self.now;
        let m = &mut self.media[i as usize];
        m.send_gen = m.send_gen.wrapping_add(1);
        let g = m.send_gen;
        let at = match m.last_send {
            Some((t, size)) if !m.idle => {
                let rate = m.snd.rate_bps().max(1_000.0);
                (t + Duration::from_nanos((size as f64 * 8e9 / rate).ceil() as u64)).max(now)
            }
            _ => now,
        };
        self.schedule(at, Event::MediaSend(i, g));
    }

    fn media_send(&mut self, i: u32, gen: u32) {
        let now = self.now;
        let m = &mut self.media[i as usize];
        if gen != m.send_gen {
            return;
        }
        let ready = m.source.ready(now);
        if ready < 1.0 {
            if !m.idle {
                m.idle = true;
                m.snd.set_app_limited(true, now);
            }
            let next = m.source.next_data_at(now);
            self.media_fse_sync(i);
            if let Some(t) = next {
                let m = &mut self.media[i as usize];
                let g = m.send_gen;
                self.schedule(t, Event::MediaSend(i, g));
            }
            return;
        }
        if m.idle {
            m.idle = false;
            m.snd.set_app_limited(false, now);
        }
        let size = (m.cfg.packet_bytes as f64).min(ready).ceil() as u32;
        let info = m.snd.on_send(m.seq, size, now);
        m.seq += 1;
        m.source.consume(size as f64);
        m.sent_pkts += 1;
        m.sent_bytes += size as u64;
        m.last_send = Some((now, size));
        let mut p = Packet::new(i, PacketKind::Media, m.cfg.src, m.cfg.dst, size);
        p.seq = info.seq;
        p.ts_ns = info.send_ts.as_nanos();
        p.rtt_ns = info.rtt.map_or(0, |r| r.as_nanos());
        p.dscp = m.cfg.dscp;
        p.hash = m.hash;
        let rate = m.snd.rate_bps().max(1_000.0);
        let gap = Duration::from_nanos((size as f64 * 8e9 / rate).ceil() as u64);
        let g = m.send_gen;
        self.out.packets.push(p);
        self.flush();
        self.schedule(now + gap, Event::MediaSend(i, g));
        if !self.media[i as usize].in_fse && self.media[i as usize].fse.is_some() {
            self.media_fse_sync(i);
        }
        self.arm_media_timers(i);
    }

    fn send_feedback(&mut self, i: u32, fb: Feedback) {
        let m = &self.media[i as usize];
        let mut p = Packet::new(
            i,
            PacketKind::MediaFeedback,
            m.cfg.dst,
            m.cfg.src,
            fb.size_bytes.max(28),
        );
        p.dscp = m.cfg.dscp;
        p.hash = m.hash;
        p.ts_ns = self.now.as_nanos();
        p.seq = self.feedback.insert(fb) as u64;
        self.out.packets.push(p);
        self.flush();
    }

    fn media_deliver(&mut self, p: &Packet) {
        let now = self.now;
        let i = p.flow;
        match p.kind {
            PacketKind::Media => {
                let m = &mut self.media[i as usize];
                m.received_pkts += 1;
                m.received_bytes += p.size_bytes as u64;
                m.owd_sum_s += now
                    .saturating_since(Instant::from_nanos(p.ts_ns))
                    .as_secs_f64();
                let info = SendInfo {
                    seq: p.seq,
                    size_bytes: p.size_bytes,
                    send_ts: Instant::from_nanos(p.ts_ns),
                    rtt: (p.rtt_ns > 0).then(|| Duration::from_nanos(p.rtt_ns)),
                };
                if let Some(fb) = m.rcv.on_packet(&info, now) {
                    self.send_feedback(i, fb);
                }
                self.arm_media_timers(i);
            }
            PacketKind::MediaFeedback => {
                let fb = self.feedback.take(p.seq as u32);
                let m = &mut self.media[i as usize];
                let before = m.snd.rate_bps();
                m.snd.on_feedback(&fb, now);
                let changed = m.snd.rate_bps() != before;
                self.media_fse_sync(i);
                if changed {
                    self.media_pace(i);
                }
                self.arm_media_timers(i);
            }
            _ => unreachable!("media packets only"),
        }
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
    /// Sets a coupling group's burst limit (`TcpCoupler::set_max_burst_pkts`; 0 by default).
    pub fn set_max_burst_pkts(&mut self, group: usize, pkts: f64) -> Result<(), SimError> {
        let name = format!("group[{group}].max_burst_pkts");
        let g = self.groups.get_mut(group).ok_or_else(|| {
            SimError::invalid(name.clone(), group as f64, "an existing coupling group")
        })?;
        g.coupler
            .set_max_burst_pkts(pkts)
            .map_err(|_| SimError::invalid(name, pkts, "a finite number of segments >= 0"))
    }

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
        while !self.run_some(end, u64::MAX) {}
    }

    /// Runs at most `max_events` events up to `end`; returns whether the run reached `end` (the
    /// clock is then `end`). A caller that must stay responsive (Ctrl-C from Python) runs a long
    /// stretch of simulated time in bounded chunks of work this way.
    pub fn run_some(&mut self, end: Instant, max_events: u64) -> bool {
        let mut n = 0u64;
        while let Some(&Reverse((t, _, ev))) = self.events.peek() {
            if t > end.as_nanos() {
                break;
            }
            if n == max_events {
                return false;
            }
            n += 1;
            self.events.pop();
            self.now = Instant::from_nanos(t);
            self.events_run += 1;
            self.dispatch(ev);
        }
        self.now = self.now.max(end);
        true
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::TxDone(l) => self.tx_done(LinkId(l)),
            Event::Arrive(l) => self.arrive(LinkId(l)),
            Event::Start(f) => self.start_flow(f),
            Event::Rto(f) => self.rto(f),
            Event::DelAck(f) => {
                let c = self.flows[f as usize].conn();
                c.delack_event = None;
                c.rcv.on_delack_timer(self.now, &mut self.out);
                if let Some(d) = c.rcv.delack_deadline() {
                    if d > self.now {
                        self.arm_delack(f);
                    }
                }
                self.flush();
                self.retire_if_done(f);
            }
            Event::Sample => self.sample(),
            Event::UdpSend(i) => self.udp_send(i),
            Event::MediaStart(i) => {
                self.media_fse_sync(i);
                self.media_pace(i);
            }
            Event::MediaSend(i, g) => self.media_send(i, g),
            Event::MediaSndTimer(i) => {
                let now = self.now;
                let m = &mut self.media[i as usize];
                m.snd_timer = None;
                if m.snd.next_timer().is_some_and(|t| t <= now) {
                    let before = m.snd.rate_bps();
                    m.snd.on_timer(now);
                    let changed = m.snd.rate_bps() != before;
                    self.media_fse_sync(i);
                    if changed {
                        self.media_pace(i);
                    }
                }
                self.arm_media_timers(i);
            }
            Event::MediaRcvTimer(i) => {
                let now = self.now;
                let m = &mut self.media[i as usize];
                m.rcv_timer = None;
                if m.rcv.next_timer().is_some_and(|t| t <= now) {
                    if let Some(fb) = m.rcv.on_timer(now) {
                        self.send_feedback(i, fb);
                    }
                }
                self.arm_media_timers(i);
            }
            Event::FseMsg(k) => {
                let msg = self.fse_msgs.take(k);
                self.fse_deliver(msg);
            }
            Event::SetPriority(i) => {
                let (flow, p) = self.priority_changes[i as usize];
                let fl = &mut self.flows[flow as usize];
                if let Some((g, _)) = fl.coupling {
                    fl.coupling = Some((g, p));
                    if fl.live().is_some_and(|c| !c.left_group) {
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
            if p.kind.is_tcp() {
                self.flows[p.flow as usize].in_network += 1;
            }
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
        if l.transmitting.is_none() && l.queue.bypass_when_idle() {
            // A plain FIFO at an idle link: in and straight out again (see Queue::bypass_when_idle).
            self.start_tx(link, id, p.size_bytes);
            return;
        }
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
            let dp = self.pool.free(d.id);
            if dp.kind.is_tcp() {
                self.flows[dp.flow as usize].in_network -= 1;
                self.retire_if_done(dp.flow);
            }
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
                fl.in_network -= 1;
                let c = fl.conn();
                c.rcv.on_data(&p, self.now, &mut self.out);
                if c.rcv.delack_deadline().is_some() && c.delack_event.is_none() {
                    self.arm_delack(f);
                }
                self.flush();
                self.retire_if_done(f);
            }
            PacketKind::TcpAck => {
                self.flows[f as usize].in_network -= 1;
                self.on_ack(f, &p);
                self.retire_if_done(f);
            }
            PacketKind::Media | PacketKind::MediaFeedback => self.media_deliver(&p),
            PacketKind::Udp => {
                let u = &mut self.udp[f as usize];
                u.received_pkts += 1;
                u.received_bytes += p.size_bytes as u64;
            }
        }
    }

    // ----- transport -----

    fn arm_rto(&mut self, f: u32) {
        let c = self.flows[f as usize].conn();
        if let Some(d) = c.snd.rto_deadline() {
            if c.rto_event.is_none_or(|e| e > d) {
                c.rto_event = Some(d);
                self.schedule(d, Event::Rto(f));
            }
        }
    }

    fn arm_delack(&mut self, f: u32) {
        let c = self.flows[f as usize].conn();
        if let Some(d) = c.rcv.delack_deadline() {
            c.delack_event = Some(d);
            self.schedule(d, Event::DelAck(f));
        }
    }

    fn start_flow(&mut self, f: u32) {
        let now = self.now;
        let fl = &mut self.flows[f as usize];
        let cfg = self.tcp_configs[fl.tcp as usize];
        let ep = Endpoints {
            flow: f,
            src: fl.src,
            dst: fl.dst,
            dscp: fl.dscp,
            hash: fl.hash,
        };
        let mut c = Box::new(Conn {
            snd: TcpSender::new(cfg, fl.cc.build(), ep, fl.size_bytes),
            rcv: TcpReceiver::new(cfg, ep),
            reported: None,
            left_group: false,
            rto_event: None,
            delack_event: None,
        });
        if let Some((g, p)) = fl.coupling {
            let tp = c.snd.tp;
            match self.groups[g]
                .coupler
                .register(FlowId(f as u64), p, tp.cwnd, tp.ssthresh)
            {
                Ok(r) => {
                    let state = c.snd.coupling_state();
                    c.snd.set_window(r.cwnd_pkts, r.ssthresh_pkts);
                    c.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, state));
                }
                Err(_) => fl.coupling = None,
            }
        }
        c.snd.start(now, &mut self.out);
        fl.state = FlowState::Live(c);
        if self.sample_interval.is_some() {
            // Kept in id order (flows start in any order): the samples at one instant are by flow.
            let at = self.sampled_flows.partition_point(|&g| g < f);
            self.sampled_flows.insert(at, f);
        }
        self.arm_rto(f);
        self.flush();
    }

    /// Frees a finished flow's connection, keeping its summary, once nothing can reach it any
    /// more: none of its packets is in the network, no delayed ACK is pending, and the sampler has
    /// taken the one sample it takes after a flow ends.
    fn retire_if_done(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        let FlowState::Live(c) = &fl.state else {
            return;
        };
        let Some(finished_at) = c.snd.finished_at else {
            return;
        };
        if fl.in_network > 0
            || c.delack_event.is_some()
            || self.sampled_flows.binary_search(&f).is_ok()
        {
            return;
        }
        let done = DoneFlow {
            finished_at,
            delivered_bytes: c.rcv.delivered_bytes(),
            cc: c.snd.cc_name(),
            snd: c.snd.stats,
            rcv: c.rcv.stats,
            bursts: c.snd.bursts(),
        };
        fl.state = FlowState::Done(done);
    }

    /// Reports the sender's window to its coupler when it changed, and applies the answer
    /// (seed 003 sec. 9.2.2: "they update their status each time they change cwnd").
    fn sync_coupling(&mut self, f: u32, timeout: bool) {
        let fl = &mut self.flows[f as usize];
        let Some((g, _)) = fl.coupling else { return };
        let c = fl.conn();
        if c.left_group {
            return;
        }
        // A connection reports slow start right after a timeout (seed 003 Table 9.1), whatever its
        // ssthresh says.
        let state = if timeout {
            coupling::tcp::TcpState::SlowStart
        } else {
            c.snd.coupling_state()
        };
        let now = (c.snd.tp.cwnd, c.snd.tp.ssthresh, state);
        if !timeout && c.reported == Some(now) {
            return;
        }
        let u = TcpUpdate {
            cwnd_pkts: now.0,
            ssthresh_pkts: now.1,
            state,
            timeout,
            // What the sender counts against the window it is told: the answer's burst is the
            // difference.
            in_flight_pkts: c.snd.pipe_pkts(),
        };
        match self.groups[g].coupler.update(FlowId(f as u64), u) {
            Ok(Some(r)) => {
                c.snd.set_window(r.cwnd_pkts, r.ssthresh_pkts);
                // Remember the state that was reported: if the answer moves the sender to another
                // state, the next check reports that at once.
                c.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, state));
            }
            Ok(None) => c.reported = Some(now),
            Err(_) => {
                // Not expected for reports the sender makes; keep the sender's own window rather
                // than stop the run, and count it (tests assert there are none).
                self.coupling_errors += 1;
            }
        }
    }

    fn on_ack(&mut self, f: u32, p: &Packet) {
        let now = self.now;
        let new_data = self.flows[f as usize]
            .conn()
            .snd
            .on_ack(p, now, &mut self.out);
        self.sync_coupling(f, false);
        // Ack-clocked handover: this ACK may release segments of joining flows.
        let fl = &mut self.flows[f as usize];
        if let (true, Some((g, _))) = (new_data, fl.coupling) {
            if !fl.conn().left_group {
                self.releases.clear();
                let _ = self.groups[g]
                    .coupler
                    .on_ack(FlowId(f as u64), &mut self.releases);
                for i in 0..self.releases.len() {
                    let r = self.releases[i];
                    let j = r.conn.0 as u32;
                    // A group releases only to its members, which are live.
                    let other = self.flows[j as usize].conn();
                    let ssthresh = other.snd.tp.ssthresh;
                    let state = other.snd.coupling_state();
                    other.snd.set_window(r.cwnd_pkts, ssthresh);
                    other.reported = Some((r.cwnd_pkts, ssthresh, state));
                    other.snd.send_available(now, &mut self.out);
                    self.arm_rto(j);
                }
            }
        }
        let fl = &mut self.flows[f as usize];
        let coupling = fl.coupling;
        let c = fl.conn();
        c.snd.send_available(now, &mut self.out);
        if let (Some(_), Some((g, _)), false) = (c.snd.finished_at, coupling, c.left_group) {
            // A finished transfer leaves its group (Algorithm 6).
            c.left_group = true;
            let _ = self.groups[g].coupler.leave(FlowId(f as u64));
        }
        self.arm_rto(f);
        self.flush();
    }

    fn rto(&mut self, f: u32) {
        let now = self.now;
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
                c.snd.on_rto(now);
                self.sync_coupling(f, true);
                let c = self.flows[f as usize].conn();
                c.snd.send_available(now, &mut self.out);
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
        let rows = self.flow_samples.len() + self.media_samples.len() + self.queue_samples.len();
        if rows >= MAX_SAMPLE_ROWS {
            // The time series stop here (results say when): many flows sampled every microsecond
            // filled memory within one chunk of events (issue 13). Counted, not silent.
            self.sampling_stopped_at.get_or_insert(self.now);
            return;
        }
        let t = self.now;
        // A finished flow gets one sample after it ends, then leaves the list: with web traffic
        // the finished flows outnumber the live ones, and re-sampling them made memory grow with
        // the square of the duration (issue 13: 4.68 M rows and 2 GB at 600 s).
        let flows = &mut self.flows;
        let mut left = std::mem::take(&mut self.sampling_left);
        self.sampled_flows.retain(|&i| {
            let keep = flows[i as usize]
                .conn()
                .snd
                .finished_at
                .is_none_or(|f| f + interval > t);
            if !keep {
                left.push(i);
            }
            keep
        });
        for &i in &self.sampled_flows {
            let c = self.flows[i as usize].conn();
            self.flow_samples.push(FlowSample {
                t_ns: t.as_nanos(),
                flow: i,
                cwnd_pkts: c.snd.tp.cwnd,
                ssthresh_pkts: c.snd.tp.ssthresh,
                state: c.snd.coupling_state(),
                delivered_bytes: c.rcv.delivered_bytes(),
                srtt_s: c.snd.srtt().map_or(f64::NAN, |d| d.as_secs_f64()),
            });
        }
        for i in left.drain(..) {
            self.retire_if_done(i);
        }
        self.sampling_left = left;
        for (i, m) in self.media.iter().enumerate() {
            self.media_samples.push(MediaSample {
                t_ns: t.as_nanos(),
                flow: i as u32,
                rate_bps: m.snd.rate_bps(),
                cc_rate_bps: m.snd.cc_rate_bps(),
                received_bytes: m.received_bytes,
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

    /// Reports a coupler rejected (none are expected; see `sync_coupling`).
    pub fn coupling_errors(&self) -> u64 {
        self.coupling_errors
    }

    /// TCP flows whose connection state is held: started, and not yet finished with nothing of
    /// them left in the network (finished ones keep only a summary, issue 13).
    pub fn live_tcp_flows(&self) -> usize {
        self.flows
            .iter()
            .filter(|f| matches!(f.state, FlowState::Live(_)))
            .count()
    }

    /// Events scheduled and not yet run (a long run's heap must stay bounded, issue 12).
    pub fn pending_events(&self) -> usize {
        self.events.len()
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
                // What each flow has to report, whatever its state.
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
                    src: self.net.node_name(fl.src).to_string(),
                    dst: self.net.node_name(fl.dst).to_string(),
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
        let media_flows = self
            .media
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let active = (duration_s - m.cfg.start.as_secs_f64()).max(1e-9);
                MediaSummary {
                    flow: i as u32,
                    controller: m.snd.name(),
                    src: self.net.node_name(m.cfg.src).to_string(),
                    dst: self.net.node_name(m.cfg.dst).to_string(),
                    sent_pkts: m.sent_pkts,
                    sent_bytes: m.sent_bytes,
                    received_pkts: m.received_pkts,
                    received_bytes: m.received_bytes,
                    goodput_bps: m.received_bytes as f64 * 8.0 / active,
                    mean_owd_s: if m.received_pkts > 0 {
                        m.owd_sum_s / m.received_pkts as f64
                    } else {
                        f64::NAN
                    },
                }
            })
            .collect();
        Results {
            duration_s,
            flows,
            media_flows,
            media_samples: self.media_samples.clone(),
            udp_flows,
            links,
            flow_samples: self.flow_samples.clone(),
            queue_samples: self.queue_samples.clone(),
            packet_events: self.trace.clone().unwrap_or_default(),
            packets: self.packet_counts(),
            events: self.events_run,
            sampling_stopped_at_s: self.sampling_stopped_at.map(|t| t.as_secs_f64()),
        }
    }
}

fn check_dscp(name: &str, dscp: u8) -> Result<(), SimError> {
    if dscp > 63 {
        return Err(SimError::invalid(
            format!("{name}.dscp"),
            dscp,
            "a DSCP in 0..=63",
        ));
    }
    Ok(())
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
