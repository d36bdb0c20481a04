//! The discrete-event engine and the simulation it runs.
//!
//! `Sim` is wiring: each concern is a module owning its state, and an event goes to the module
//! that handles it.
//!
//! | module | owns |
//! |---|---|
//! | [`sched`] | simulated time and the pending events |
//! | [`fabric`] | the network: links, the packet pool, forwarding; packet taps |
//! | [`tcp_flows`] | TCP flows: connections, timers; their controllers call their coupling group (`transport::coupled`), or they signal their FSE group |
//! | [`udp_flows`] | UDP flows and their traffic sources |
//! | [`media_flows`] | rate-controlled media flows, their feedback, their FSE signalling |
//! | [`coupling`] | the FSE groups (of media or TCP flows) and their signalling, and the errors they return |
//! | [`record`] | time series (flows, media, queues), packet trace, pcap captures |
//!
//! Adding a transport: a module with its flows and events, an `Event` variant, and its lines in
//! `dispatch` and `deliver`. One seeded generator draws every random number, so a run is bitwise
//! reproducible.

mod coupling;
mod fabric;
mod media_flows;
mod record;
mod sched;
mod tcp_flows;
mod udp_flows;

pub use crate::transport::coupled::CouplingErrors;
pub use media_flows::{FseCoupling, MediaFlowConfig};
pub use record::{MAX_SAMPLE_ROWS, MIN_SAMPLE_INTERVAL};
pub use tcp_flows::TcpFlowConfig;
pub use udp_flows::UdpFlowConfig;

use self::coupling::{FseMsg, FseSignalling, Members, TcpFseMsg};
use crate::error::SimError;
use crate::net::{LinkId, Network, NodeId};
use crate::packet::{Packet, PacketKind};
use crate::pcap::{PcapWriter, DEFAULT_SNAPLEN};
use crate::rng::{seeded, SimRng};
use crate::stats::{LinkSummary, Results, TimeSeries};
use crate::traffic::WebWorkload;
use crate::transport::coupled::CouplingGroups;
use crate::transport::measured::{MeasuredConfig, MeasuredCoupler};
use crate::transport::rate::{RateReceiver, RateSender};
use crate::transport::tcp::Outbox;
use ::coupling::fse::Algorithm;
use ::coupling::tcp::{CouplerKind, TcpCoupler};
use ::coupling::{Duration, Instant};
use fabric::Fabric;
use media_flows::MediaFlows;
use record::Recorder;
use sched::{Event, Scheduler};
use std::io::Write;
use tcp_flows::TcpFlows;
use udp_flows::UdpFlows;

/// Events at one instant beyond which the simulation is taken to spin (see [`Sim::spinning_at`]):
/// ten million, where a real burst at one nanosecond is a few thousand events.
pub const MAX_EVENTS_AT_ONE_INSTANT: u64 = 10_000_000;

/// Totals for the packet-conservation check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketCounts {
    pub created: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub in_flight: u64,
}

/// What a module's handler works with: the clock, the scheduler, the generator, and the fabric
/// its packets leave through (written to `out`, sent by `flush` at the point the handler says,
/// so the order of events is that of the code).
pub(crate) struct Ctx<'a> {
    pub now: Instant,
    pub sched: &'a mut Scheduler,
    pub rng: &'a mut SimRng,
    pub fabric: &'a mut Fabric,
    pub out: &'a mut Outbox,
}

impl Ctx<'_> {
    pub fn schedule(&mut self, at: Instant, ev: Event) {
        self.sched.schedule(at, ev);
    }

    /// Sends the packets written to `out` so far.
    pub fn flush(&mut self) {
        self.fabric
            .send_all(self.out, self.now, self.sched, self.rng);
    }
}

#[derive(Debug)]
pub struct Sim {
    sched: Scheduler,
    fabric: Fabric,
    rng: SimRng,
    out: Outbox,
    tcp: TcpFlows,
    tcp_coupling: CouplingGroups,
    udp: UdpFlows,
    media: MediaFlows,
    fse: FseSignalling,
    rec: Recorder,
    /// Scratch: TCP flows whose last packet a queue dropped.
    emptied: Vec<u32>,
    /// The measured coupling groups (`transport::measured`), by group index.
    measured: Vec<usize>,
    /// The kind of flows each measured group measures, set by its first member (by group).
    measured_members: Vec<(usize, Members)>,
    /// The measured group each media flow is observed by, by media flow.
    media_measured: Vec<Option<usize>>,
    /// Scratch for the fabric's observations (kept for its capacity).
    observations: Vec<fabric::Observation>,
}

/// Splits `Sim` into a handler context and the modules (disjoint borrows).
macro_rules! ctx {
    ($s:expr) => {
        Ctx {
            now: $s.sched.now(),
            sched: &mut $s.sched,
            rng: &mut $s.rng,
            fabric: &mut $s.fabric,
            out: &mut $s.out,
        }
    };
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
            sched: Scheduler::default(),
            fabric: Fabric::new(net, seed),
            rng: seeded(seed),
            out: Outbox::default(),
            tcp: TcpFlows::default(),
            tcp_coupling: CouplingGroups::default(),
            udp: UdpFlows::default(),
            media: MediaFlows::default(),
            fse: FseSignalling::default(),
            rec: Recorder::default(),
            emptied: Vec::new(),
            measured: Vec::new(),
            measured_members: Vec::new(),
            media_measured: Vec::new(),
            observations: Vec::new(),
        })
    }

    pub fn now(&self) -> Instant {
        self.sched.now()
    }

    pub fn net(&self) -> &Network {
        &self.fabric.net
    }

    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Records every flow's window and every monitored link's queue each `interval`.
    pub fn sample_every(&mut self, interval: Duration, links: &[LinkId]) -> Result<(), SimError> {
        if self
            .rec
            .sample_every(interval, links, &self.fabric, &mut self.sched)?
        {
            self.tcp.start_sampling(self.sched.now(), interval);
        }
        Ok(())
    }

    /// Captures every packet `link` transmits into a pcap file written to `out` (headers only,
    /// nanosecond timestamps, raw IPv4: `tshark -r` reads it).
    pub fn capture(&mut self, link: LinkId, out: Box<dyn Write + Send>) -> Result<(), SimError> {
        if link.0 as usize >= self.fabric.net.links.len() {
            return Err(SimError::invalid(
                "capture.link",
                link.0,
                "an existing link",
            ));
        }
        let writer = PcapWriter::new(out, DEFAULT_SNAPLEN)
            .map_err(|e| SimError::invalid("capture.file", e, "a writable file"))?;
        self.fabric.taps.add_capture(link, writer);
        Ok(())
    }

    /// Records every packet's enqueue, drop, transmission and delivery (memory grows with the run).
    pub fn trace_packets(&mut self, on: bool) {
        self.fabric.taps.trace = on.then(Vec::new);
    }

    /// Flushes the pcap captures.
    pub fn flush_captures(&mut self) -> Result<(), SimError> {
        self.fabric.taps.flush_captures()
    }

    pub fn add_tcp_flow(&mut self, cfg: TcpFlowConfig) -> Result<u32, SimError> {
        self.not_past(|| format!("flow[{}].start", self.tcp.len()), cfg.start)?;
        self.tcp.add(cfg, &mut self.fabric, &mut self.sched)
    }

    /// Refuses a time before the clock: an event there would run the clock backwards (a flow
    /// added after `run` with an earlier start reported a completion time from the past).
    fn not_past(&self, name: impl FnOnce() -> String, at: Instant) -> Result<(), SimError> {
        if at < self.sched.now() {
            return Err(SimError::invalid(
                name(),
                format!("{} s", at.as_secs_f64()),
                "a time at or after the simulation's current time (now_s)",
            ));
        }
        Ok(())
    }

    /// Adds a UDP flow driven by a traffic source (CBR, on/off, the self-similar cross traffic of
    /// seed 003 sec. 9.3); returns its index among UDP flows. Errors name the parameter
    /// (`udp_flow[i].…`).
    pub fn add_udp_flow(&mut self, cfg: UdpFlowConfig) -> Result<u32, SimError> {
        self.not_past(|| "udp_flow.start".into(), cfg.start)?;
        self.udp
            .add(cfg, &mut self.fabric, &mut self.sched, &mut self.rng)
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
        self.not_past(|| "web.start_s".into(), start)?;
        if end < start {
            return Err(SimError::invalid(
                "web.end_s",
                end.as_secs_f64(),
                "an end at or after start_s (a web workload that ends before it starts sends nothing)",
            ));
        }
        // Every flow is drawn up front: bound their number, over all the simulation's flows,
        // before allocating (issue 13; about 300 bytes each).
        let expected = workload.load_bps * end.saturating_since(start).as_secs_f64()
            / (8.0 * workload.mean_size_bytes);
        if expected + self.tcp.len() as f64 > crate::traffic::MAX_WEB_FLOWS as f64 {
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
        self.not_past(|| "media_flow.start".into(), cfg.start)?;
        self.media
            .add(cfg, snd, rcv, &mut self.fabric, &mut self.sched)
    }

    /// An FSE flow group running `algorithm` (from `crates/coupling`); returns its index.
    pub fn add_fse_group(&mut self, algorithm: Algorithm) -> usize {
        self.fse.add_group(algorithm)
    }

    /// Couples a media flow to an FSE group; it registers when it starts.
    pub fn couple_media(&mut self, flow: u32, c: FseCoupling) -> Result<(), SimError> {
        self.media.couple(flow, c, &mut self.fse)
    }

    /// Couples TCP flow `flow`, not started yet, to an FSE group (seed 003 sec. 6.3.1, Fig. 6.3):
    /// it registers when it starts, reports CC_R = cwnd * MSS / SRTT once per round trip and sets
    /// cwnd = FSE_R * SRTT / MSS from the answer (see `tcp_flows::fse`). A group couples TCP flows
    /// or media flows, not both; a TCP flow is in one group, an FSE's or a TCP coupler's. Errors
    /// name the parameter (`flow[i].fse…`) and change nothing.
    pub fn couple_tcp_fse(&mut self, flow: u32, c: FseCoupling) -> Result<(), SimError> {
        self.tcp.couple_fse(flow, c, &mut self.fse)
    }

    /// A coupling group running `kind` (from `crates/coupling`, the code users ship).
    pub fn add_coupling_group(&mut self, kind: CouplerKind) -> usize {
        self.tcp_coupling.add_group(kind)
    }

    /// A measured coupling group (`transport::measured`, issue 20): its connections start in one
    /// macroflow running `config.coupler`, false-sharing detectors watch every pair, and the
    /// response splits and merges them. Errors name the bad field.
    pub fn add_measured_group(&mut self, config: MeasuredConfig) -> Result<usize, SimError> {
        let g = self.tcp_coupling.add_measured(config).map_err(|e| {
            SimError::invalid(
                "measured_group",
                e,
                "a valid detector and memory configuration",
            )
        })?;
        self.measured.push(g);
        Ok(g)
    }

    /// Every measured group's detection events, by group then time.
    fn detections(&self) -> Vec<crate::stats::DetectionRow> {
        self.measured
            .iter()
            .filter_map(|&g| self.tcp_coupling.measured(g).map(|m| (g, m)))
            .flat_map(|(g, m)| {
                m.events().iter().map(move |e| crate::stats::DetectionRow {
                    group: g as u32,
                    t_s: e.at.as_secs_f64(),
                    flow_a: e.flow_a,
                    flow_b: e.flow_b,
                    test: e.test.name(),
                    decision: decision_name(e.decision),
                    start_s: e.since.as_secs_f64(),
                })
            })
            .collect()
    }

    /// Measured group `group`'s state: its detectors, placements, detection events and counters.
    pub fn measured_group(&self, group: usize) -> Option<&MeasuredCoupler> {
        self.tcp_coupling.measured(group)
    }

    /// The kind of flows measured group `group` measures (None: no member yet, or not one).
    fn measured_kind(&self, group: usize) -> Option<Members> {
        self.measured_members
            .iter()
            .find(|(g, _)| *g == group)
            .map(|&(_, k)| k)
    }

    /// Checks that measured group `group` may take a flow of kind `kind` (`name`: the parameter).
    fn check_measured_kind(&self, name: &str, group: usize, kind: Members) -> Result<(), SimError> {
        match self.measured_kind(group) {
            Some(k) if k != kind => Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "a measured group of flows of one kind (TCP flows or media flows, not both)",
            )),
            _ => Ok(()),
        }
    }

    /// Observes media flow `flow`, not started yet, with measured group `group`'s detectors
    /// (issue 20: RFC 8382 was evaluated on RTP media flows). Detection only: the group must
    /// not respond (`MeasuredConfig::respond` false), since the response regroups TCP
    /// connections' windows; the flow runs its own controller (or its FSE group's rate, if it is
    /// coupled to one as well). Its media packets are the observations: send time, arrival or
    /// drop, in the order it sends them. A group measures flows of one kind.
    pub fn measure_media(&mut self, flow: u32, group: usize) -> Result<(), SimError> {
        let name = format!("media_flow[{flow}].measured");
        let Some(m) = self.tcp_coupling.measured(group) else {
            return Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "an existing measured group",
            ));
        };
        if m.config().respond {
            return Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "a measured group that only detects (respond = false): the response regroups \
                 TCP connections, and media flows are observed only",
            ));
        }
        self.check_measured_kind(&name, group, Members::Media)?;
        let started = self.media.started(flow).ok_or(SimError::UnknownFlow {
            name: name.clone(),
            flow,
        })?;
        // Its Start event, not its start time: a run to exactly its start has run the event.
        if started {
            return Err(SimError::invalid(
                name,
                flow,
                "a media flow that has not started (it joins its group when it starts)",
            ));
        }
        let f = flow as usize;
        if self.media_measured.get(f).copied().flatten().is_some() {
            return Err(SimError::invalid(
                name,
                flow,
                "a media flow not in a measured group yet (one per flow)",
            ));
        }
        if f >= self.media_measured.len() {
            self.media_measured.resize(f + 1, None);
        }
        self.media_measured[f] = Some(group);
        if self.measured_kind(group).is_none() {
            self.measured_members.push((group, Members::Media));
        }
        self.fabric.observe_media(flow);
        Ok(())
    }

    /// Sets a coupling group's burst limit (`TcpCoupler::set_max_burst_pkts`; 0 by default).
    pub fn set_max_burst_pkts(&mut self, group: usize, pkts: f64) -> Result<(), SimError> {
        let name = format!("group[{group}].max_burst_pkts");
        match self.tcp_coupling.set_max_burst_pkts(group, pkts) {
            None => Err(SimError::invalid(
                name,
                group as f64,
                "an existing coupling group",
            )),
            Some(r) => {
                r.map_err(|_| SimError::invalid(name, pkts, "a finite number of segments >= 0"))
            }
        }
    }

    /// Puts `flow` into `group` with `priority`; it registers when it starts.
    pub fn couple(&mut self, flow: u32, group: usize, priority: f64) -> Result<(), SimError> {
        let name = format!("flow[{flow}].coupling");
        if group >= self.tcp_coupling.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "an existing coupling group",
            ));
        }
        check_priority(&name, priority)?;
        if let (Some(CouplerKind::Ccc { int: true, .. }), Some((cc, _))) =
            (self.tcp_coupling.kind(group), self.tcp.cc_and_group(flow))
        {
            // The integer window mode's answers are whole packets: a controller growing by
            // fractions of a packet would never grow (issue 14 review).
            if !cc.whole_packets() {
                return Err(SimError::invalid(
                    format!("flow[{flow}].cc"),
                    cc.name(),
                    "a controller that keeps whole-packet windows, such as reno_int, in an \
                     integer-mode group (ccc_int, ccc_handover_int)",
                ));
            }
            check_int_priority(&name, priority)?;
        }
        if self.tcp_coupling.measured(group).is_some() {
            self.check_measured_kind(&name, group, Members::Tcp)?;
        }
        self.tcp.couple(flow, group, priority)?;
        if self.tcp_coupling.measured(group).is_some() {
            if self.measured_kind(group).is_none() {
                self.measured_members.push((group, Members::Tcp));
            }
            self.fabric.observe(flow);
        }
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
        self.not_past(|| format!("{name}.at"), at)?;
        if self.tcp.is_fse_coupled(flow) == Some(true) {
            // The application tells the FSE (as for media flows): not delayed.
            check_priority(&name, priority)?;
            let slot = self
                .fse
                .hold(FseMsg::Tcp(TcpFseMsg::SetPriority { flow, priority }));
            self.sched.schedule(at, Event::Fse(slot));
            return Ok(());
        }
        let coupled = self.tcp.is_coupled(flow).ok_or(SimError::UnknownFlow {
            name: name.clone(),
            flow,
        })?;
        if !coupled {
            return Err(SimError::invalid(name, flow, "a coupled flow"));
        }
        check_priority(&name, priority)?;
        if let Some((_, Some(g))) = self.tcp.cc_and_group(flow) {
            if let Some(CouplerKind::Ccc { int: true, .. }) = self.tcp_coupling.kind(g) {
                check_int_priority(&name, priority)?;
            }
        }
        let i = self.tcp.push_change(flow, priority);
        self.sched.schedule(at, Event::SetPriority(i));
        Ok(())
    }

    /// Changes media flow `flow`'s priority in its FSE group at `at` (seed 003 Fig. 5.13).
    pub fn schedule_media_priority(
        &mut self,
        at: Instant,
        flow: u32,
        priority: f64,
    ) -> Result<(), SimError> {
        let name = format!("media_priority_change[flow {flow}]");
        self.not_past(|| format!("{name}.at"), at)?;
        self.media.check_coupled(&name, flow)?;
        check_priority(&name, priority)?;
        let slot = self.fse.hold(FseMsg::SetPriority { flow, priority });
        self.sched.schedule(at, Event::Fse(slot));
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
        for _ in 0..max_events {
            let Some(ev) = self.sched.pop_due(end) else {
                self.sched.advance_to(end);
                return true;
            };
            self.dispatch(ev);
        }
        if self.sched.has_due(end) {
            return false;
        }
        self.sched.advance_to(end);
        true
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::Net(e) => {
                let now = self.sched.now();
                if let Some(p) = self.fabric.handle(e, now, &mut self.sched, &mut self.rng) {
                    self.deliver(&p);
                }
            }
            Event::Tcp(e) => {
                if let sched::Event::Tcp(tcp_flows::TcpEvent::Start(f)) = ev {
                    self.open_measured(f);
                }
                let mut cx = ctx!(self);
                self.tcp.handle(e, &mut cx, &mut self.tcp_coupling);
            }
            Event::Udp(i) => {
                let mut cx = ctx!(self);
                self.udp.send(i, &mut cx);
            }
            Event::Media(e) => {
                if let media_flows::MediaEvent::Start(i) = e {
                    self.open_measured_media(i);
                }
                let mut cx = ctx!(self);
                self.media.handle(e, &mut cx, &mut self.fse);
            }
            Event::Fse(slot) => {
                let msg = self.fse.take(slot);
                let mut cx = ctx!(self);
                match msg {
                    FseMsg::Tcp(m) => self.tcp.fse_deliver(m, &mut cx, &mut self.fse),
                    m => self.media.fse_deliver(m, &mut cx, &mut self.fse),
                }
            }
            Event::SetPriority(i) => {
                self.tcp.set_priority(i, &mut self.tcp_coupling);
            }
            Event::Sample => self.rec.sample(
                &mut self.sched,
                &mut self.tcp,
                &self.media,
                &self.fabric,
                &self.tcp_coupling,
                &self.measured,
            ),
        }
        if !self.fabric.observations.is_empty() {
            self.observe();
        }
        // A TCP flow whose last packet was dropped may be finished: free it now.
        self.fabric.take_tcp_emptied(&mut self.emptied);
        for f in self.emptied.drain(..) {
            self.tcp.retire_if_done(f, &self.fabric);
        }
    }

    /// A member of a measured group starts: its group places it before it registers.
    fn open_measured(&mut self, f: u32) {
        let now = self.sched.now();
        if let Some((_, Some(g))) = self.tcp.cc_and_group(f) {
            if let Some(m) = self.tcp_coupling.measured_mut(g) {
                // Should the policy refuse it, its registration is refused too (counted in
                // `CouplingErrors::register`) and it runs uncoupled.
                let _ = m.open(f, now);
            }
        }
    }

    /// A media flow observed by a measured group starts: its detectors start with it.
    fn open_measured_media(&mut self, f: u32) {
        let now = self.sched.now();
        if let Some(g) = self.media_measured.get(f as usize).copied().flatten() {
            if let Some(m) = self.tcp_coupling.measured_mut(g) {
                // The group does not respond, so the policy's placement is only bookkeeping; a
                // refusal (none expected) leaves the flow unobserved, counted.
                if m.open(f, now).is_err() {
                    m.count_open_error();
                }
            }
        }
    }

    /// Feeds the segments observed during the last event to their measured groups' detectors,
    /// then applies the regroupings the detectors' verdicts brought.
    fn observe(&mut self) {
        let now = self.sched.now();
        // Applying a regrouping may send segments, observed at this instant too.
        while !self.fabric.observations.is_empty() {
            self.observe_once(now);
        }
    }

    fn observe_once(&mut self, now: Instant) {
        std::mem::swap(&mut self.observations, &mut self.fabric.observations);
        for i in 0..self.observations.len() {
            match self.observations[i] {
                fabric::Observation::Sent { slot, flow, media } => {
                    let g = if media {
                        self.media_measured.get(flow as usize).copied().flatten()
                    } else {
                        self.tcp.cc_and_group(flow).and_then(|(_, g)| g)
                    };
                    if let Some(m) = g.and_then(|g| self.tcp_coupling.measured_mut(g)) {
                        m.on_sent(slot, flow, now);
                    }
                }
                fabric::Observation::Arrived { slot } | fabric::Observation::Dropped { slot } => {
                    let arrived =
                        matches!(self.observations[i], fabric::Observation::Arrived { .. });
                    for &g in &self.measured {
                        if let Some(m) = self.tcp_coupling.measured_mut(g) {
                            m.on_fate(slot, arrived, now);
                        }
                    }
                }
            }
        }
        self.observations.clear();
        for k in 0..self.measured.len() {
            let g = self.measured[k];
            let mut cx = ctx!(self);
            self.tcp.apply_measured(g, &mut cx, &mut self.tcp_coupling);
        }
    }

    /// A packet reached its destination: to the module of its kind.
    fn deliver(&mut self, p: &Packet) {
        let mut cx = ctx!(self);
        match p.kind {
            PacketKind::TcpData | PacketKind::TcpAck => {
                self.tcp
                    .deliver(p, &mut cx, &mut self.tcp_coupling, &mut self.fse)
            }
            PacketKind::Media | PacketKind::MediaFeedback => {
                self.media.deliver(p, &mut cx, &mut self.fse)
            }
            PacketKind::Udp => self.udp.deliver(p),
        }
    }

    /// Packets created, delivered, dropped and in flight so far: created = delivered + dropped +
    /// in flight always holds.
    pub fn packet_counts(&self) -> PacketCounts {
        self.fabric.packet_counts()
    }

    /// Errors the couplers returned, by call (none are expected).
    pub fn coupling_errors_by_kind(&self) -> CouplingErrors {
        CouplingErrors {
            fse: self.fse.errors,
            ..self.tcp_coupling.errors
        }
    }

    /// Errors the couplers returned (none are expected; see [`Sim::coupling_errors_by_kind`]).
    pub fn coupling_errors(&self) -> u64 {
        self.coupling_errors_by_kind().total()
    }

    /// TCP flows whose connection state is held: started, and not yet finished with nothing of
    /// them left in the network (finished ones keep only a summary, issue 13).
    pub fn live_tcp_flows(&self) -> usize {
        self.tcp.live()
    }

    /// Events scheduled and not yet run (a long run's heap must stay bounded, issue 12).
    pub fn pending_events(&self) -> usize {
        self.sched.pending()
    }

    pub fn events_run(&self) -> u64 {
        self.sched.events_run()
    }

    /// `Some(now)` when the clock has stood still for [`MAX_EVENTS_AT_ONE_INSTANT`] events: the
    /// simulation spins (a bug). Callers that run in chunks check it between them.
    pub fn spinning_at(&self) -> Option<Instant> {
        (self.sched.events_at_this_instant() >= MAX_EVENTS_AT_ONE_INSTANT).then(|| self.sched.now())
    }

    /// The high-water mark of the packet pool (memory does not grow with simulated time).
    pub fn packet_pool_capacity(&self) -> usize {
        self.fabric.pool_capacity()
    }

    pub fn coupler(&self, group: usize) -> Option<&dyn TcpCoupler> {
        self.tcp_coupling.coupler(group)
    }

    /// FSE group `group`'s state (the flows registered now, S_CR, ...).
    pub fn fse_group(&self, group: usize) -> Option<&::coupling::fse::FseGroup> {
        self.fse.groups.get(group)
    }

    /// Summaries and time series of the run so far (a copy: see [`Sim::summaries`] and
    /// [`Sim::time_series`] to read the series in place).
    pub fn results(&mut self) -> Results {
        let mut r = self.summaries();
        let ts = self.time_series();
        r.flow_samples = ts.flow_samples.to_vec();
        r.queue_samples = ts.queue_samples.to_vec();
        r.media_samples = ts.media_samples.to_vec();
        r.detector_samples = ts.detector_samples.to_vec();
        r.packet_events = self.fabric.taps.trace.clone().unwrap_or_default();
        r
    }

    /// The time series recorded so far, lent rather than copied: the bindings build their
    /// columns from them, so a big result is not held twice.
    pub fn time_series(&self) -> TimeSeries<'_> {
        TimeSeries {
            flow_samples: &self.rec.flow_samples,
            queue_samples: &self.rec.queue_samples,
            media_samples: &self.rec.media_samples,
            detector_samples: &self.rec.detector_samples,
        }
    }

    /// [`Sim::results`] without the time series and the packet trace (left empty).
    pub fn summaries(&mut self) -> Results {
        // Holds by construction (the fabric counts every packet once); tests check it on every
        // run they make, and a release build does not stop a user's run over it.
        let c = self.packet_counts();
        debug_assert_eq!(
            c.created,
            c.delivered + c.dropped + c.in_flight,
            "packet conservation: {c:?}"
        );
        let now = self.sched.now();
        for l in &mut self.fabric.net.links {
            l.account_queue(now);
        }
        let duration_s = now.as_secs_f64();
        let net = &self.fabric.net;
        let links = net
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                LinkSummary::new(
                    i as u32,
                    net.node_name(l.from),
                    net.node_name(l.to),
                    l,
                    duration_s,
                )
            })
            .collect();
        Results {
            duration_s,
            flows: self
                .tcp
                .summaries(net, &self.fabric.tcp_data_dropped, duration_s),
            media_flows: self.media.summaries(net, duration_s),
            media_samples: Vec::new(),
            udp_flows: self.udp.summaries(net, duration_s),
            links,
            flow_samples: Vec::new(),
            queue_samples: Vec::new(),
            packet_events: Vec::new(),
            detector_samples: Vec::new(),
            detections: self.detections(),
            measured_groups: self
                .measured
                .iter()
                .filter_map(|&g| {
                    let mut s = self.tcp_coupling.measured(g)?.summary(g as u32);
                    s.members = match self.measured_kind(g) {
                        Some(Members::Tcp) => "tcp",
                        Some(Members::Media) => "media",
                        None => "none",
                    };
                    Some(s)
                })
                .collect(),
            packets: self.packet_counts(),
            events: self.sched.events_run(),
            sampling_stopped_at_s: self.rec.stopped_at.map(|t| t.as_secs_f64()),
            coupling_errors: self.coupling_errors_by_kind(),
        }
    }
}

/// Values waiting for an event that carries only their index (feedback payloads in flight, delayed
/// FSE messages): slots are reused, so memory follows what is pending.
#[derive(Debug)]
pub(crate) struct Slab<T> {
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
    pub fn insert(&mut self, v: T) -> u32 {
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

    pub fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.items[slot as usize]
            .take()
            .expect("a pending slot holds its value")
    }
}

/// A false-sharing decision as the results name it.
pub(crate) fn decision_name(d: ::coupling::falseshare::Decision) -> &'static str {
    match d {
        ::coupling::falseshare::Decision::Share => "share",
        ::coupling::falseshare::Decision::NoShare => "no_share",
        ::coupling::falseshare::Decision::Inconclusive => "inconclusive",
    }
}

/// The source and destination of a flow exist and differ.
pub(crate) fn check_endpoints(
    net: &Network,
    name: &str,
    src: NodeId,
    dst: NodeId,
) -> Result<(), SimError> {
    for (field, node) in [("src", src), ("dst", dst)] {
        if node.0 as usize >= net.nodes.len() {
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

/// A coupling priority in (0, 1e12], as the couplers take it; the error names `{name}.priority`.
/// A priority an integer-mode group can hold (at least 2^-16).
fn check_int_priority(name: &str, priority: f64) -> Result<(), SimError> {
    if priority < ::coupling::tcp::arith::MIN_INT_PRIORITY {
        return Err(SimError::invalid(
            format!("{name}.priority"),
            priority,
            "a priority >= 1/65536 in an integer-mode group (kept in units of 2^-16)",
        ));
    }
    Ok(())
}

pub(crate) fn check_priority(name: &str, priority: f64) -> Result<(), SimError> {
    ::coupling::units::check_priority(priority)
        .map(|_| ())
        .map_err(|_| {
            SimError::invalid(
                format!("{name}.priority"),
                priority,
                "a priority > 0 and <= 1e12",
            )
        })
}

pub(crate) fn check_dscp(name: &str, dscp: u8) -> Result<(), SimError> {
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
