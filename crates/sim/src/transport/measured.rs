//! A **measured** coupling group (issue 20): TCP connections coupled by measurement, not by
//! configuration. The group stands for one macroflow's destination (seed 000 sec. 5.1: "the
//! granularity of sharing is a common destination host"; its test flows are placed in one
//! macroflow, sec. 3.2 and 5.2): every connection starts in the shared group ("share by
//! default"), false-sharing detectors watch every pair of connections, and the response policy
//! splits a pair's younger connection out on "no share" and merges it back on "share"
//! (`coupling::response`, the code users ship). Inside, the macroflow's groups are a
//! `coupling::tcp::TcpGroups` of the configured coupler, and [`MeasuredCoupler`] is itself a
//! [`TcpCoupler`], so a connection's hooks call it exactly as they call any other group
//! (`transport::coupled`).
//!
//! What the detectors are fed (the engine routes the fabric's observations here, `Sim::observe`):
//! - **Sending order.** Each pair of connections has its own macroflow sequence counter, and
//!   every data segment a member sends takes the next number of every pair it belongs to (sec.
//!   4.1.3: "each packet is marked with an increasing sequence number at the source"; with two
//!   flows, the seed's case, that is one counter per macroflow). Retransmissions are new packets
//!   with new numbers.
//! - **Arrivals** at the connection's destination with their one-way delay (sec. 4.1.2: receive
//!   time minus the source timestamp; the simulator's clocks agree, which the tests do not need).
//! - **Losses** as the receiver infers them: a dropped segment is reported when a segment the
//!   same connection sent after it arrives (the gap in its sequence numbers; a path does not
//!   reorder one connection's packets here), at that arrival's time. Reporting at the drop itself would hand
//!   the detector a number ahead of every earlier packet still queued, which can exceed its
//!   reorder window.
//!
//! - **SBD** (RFC 8382) runs beside them as a fifth test: each member's statistics are fed the
//!   same arrivals and losses, and every base interval T the members are grouped; a pair's answer
//!   is share when both are congested and grouped together, no share when both are congested and
//!   apart, inconclusive otherwise.
//!
//! A pair's detector starts when its second connection starts and is dropped when either
//! leaves. The response acts on one test's answer ([`MeasuredConfig::test`]; the seed's
//! response experiment uses the out-of-order test, sec. 5.2): whenever that answer changes to
//! share or no share the policy is given the verdict, and the actions it returns wait in
//! [`MeasuredCoupler::pending_actions`] for the engine to apply with the connection's current window
//! (a connection in fast recovery is moved once it has left it, `coupling::response` item 7).
//! With `respond` off the detectors only watch: the connections stay in the shared group (the
//! seed's detection experiments, sec. 4.2).
//!
//! **Media flows** can be watched too (`Sim::measure_media`, a group with `respond` off and no
//! TCP member): the same detectors are fed their media packets (sending order, one-way delay,
//! drops inferred the same way); flow ids are then media-flow numbers, and the macroflow's
//! `TcpGroups` stays empty. RFC 8382 was evaluated on RTP media flows.

use coupling::falseshare::{
    Decision, FalseSharingConfig, FalseSharingDetector, LossReport, Packet,
};
use coupling::response::{Action, Dest, SharingConfig, SharingPolicy, Verdict};
use coupling::sbd::{FlowStats, SbdConfig, SbdGrouper};
use coupling::tcp::{ConnView, CouplerKind, Release, Response, TcpCoupler, TcpGroups, TcpUpdate};
use coupling::{Duration, Error, FlowId, Instant};

/// The four tests of seed 000 sec. 4.1, and RFC 8382's shared-bottleneck detection (SBD, the
/// measurement-based grouping RFC 8699 cites), in the order every listing shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DetectorTest {
    AsymmetricLoss,
    SymmetricLoss,
    Delay,
    OutOfOrder,
    /// RFC 8382 over the group's members, every base interval T: share when both flows are
    /// congested and grouped together, no share when both are congested and apart, else
    /// inconclusive (a flow not congested, or in its warm-up, says nothing: sec. 3.3.1 step 1).
    Sbd,
}

impl DetectorTest {
    pub const ALL: [DetectorTest; 5] = [
        DetectorTest::AsymmetricLoss,
        DetectorTest::SymmetricLoss,
        DetectorTest::Delay,
        DetectorTest::OutOfOrder,
        DetectorTest::Sbd,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DetectorTest::AsymmetricLoss => "asymmetric_loss",
            DetectorTest::SymmetricLoss => "symmetric_loss",
            DetectorTest::Delay => "delay",
            DetectorTest::OutOfOrder => "out_of_order",
            DetectorTest::Sbd => "sbd",
        }
    }

    pub fn from_name(name: &str) -> Option<DetectorTest> {
        DetectorTest::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The current answer of one of the seed's tests.
    fn decision(self, d: &FalseSharingDetector) -> Decision {
        match self {
            DetectorTest::AsymmetricLoss => d.asymmetric_loss().history().decision,
            DetectorTest::SymmetricLoss => d.symmetric_loss().history().decision,
            DetectorTest::Delay => d.delay().history().decision,
            DetectorTest::OutOfOrder => d.out_of_order().history().decision,
            DetectorTest::Sbd => unreachable!("SBD is not one of the pair detector's tests"),
        }
    }
}

/// The pair detectors' reorder window: a loss is inferred when the connection's next segment
/// arrives, up to a retransmission timeout later (a connection that lost the tail of its window),
/// and the window must still hold its number then. 4096 covers about 5 s of the pair's segments at
/// 10 Mbit/s (with the detector's own default, 256, 8 of 41,000 segments of a 10 and a 1 Mbit/s
/// connection were inferred lost after their numbers had been finalized). 64 KiB per pair.
pub const REORDER_WINDOW_PKTS: usize = 4096;

/// How a measured group couples, detects and responds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredConfig {
    /// The coupler each of the macroflow's groups runs.
    pub coupler: CouplerKind,
    /// The detectors' configuration (confidence, windows, the out-of-order occasions).
    pub detector: FalseSharingConfig,
    /// The test whose answer the response acts on.
    pub test: DetectorTest,
    /// Split and merge on the test's answers; off: detect only, every connection stays shared.
    pub respond: bool,
    /// The response's per-destination memory.
    pub sharing: SharingConfig,
    /// RFC 8382's parameters for the SBD test.
    pub sbd: SbdConfig,
}

impl MeasuredConfig {
    /// Share by default, the out-of-order test driving the response (seed 000 sec. 5.2), the
    /// seed's 90 % intervals, a reorder window of [`REORDER_WINDOW_PKTS`], memory as
    /// `coupling::response`'s defaults.
    pub fn new(coupler: CouplerKind) -> Self {
        MeasuredConfig {
            coupler,
            detector: FalseSharingConfig {
                reorder_window_pkts: REORDER_WINDOW_PKTS,
                ..FalseSharingConfig::default()
            },
            test: DetectorTest::OutOfOrder,
            respond: true,
            sharing: SharingConfig::default(),
            sbd: SbdConfig::default(),
        }
    }

    pub fn check(&self) -> Result<(), Error> {
        self.detector.check()?;
        self.sharing.check()?;
        self.sbd.check()
    }
}

/// A change of one test's answer for one pair: the detection trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectionEvent {
    pub at: Instant,
    pub flow_a: u32,
    pub flow_b: u32,
    pub test: DetectorTest,
    pub decision: Decision,
    /// When the pair's detector started (detection times are measured from it).
    pub since: Instant,
}

/// What the group has done, for the results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasuredCounters {
    /// Data segments of members seen sent, arrived, dropped.
    pub sent: u64,
    pub arrived: u64,
    pub dropped: u64,
    /// Detector calls refused (none expected; each is counted).
    pub detector_errors: u64,
    /// Actions applied, and attempts that failed (a connection in fast recovery waits: counted
    /// in `deferred`, tried again later).
    pub splits: u64,
    pub merges: u64,
    pub deferred: u64,
    pub action_errors: u64,
    /// Detection events not kept beyond [`MAX_DETECTION_EVENTS`].
    pub events_dropped: u64,
    /// What the detectors could not use (none expected).
    pub detectors: DetectorTotals,
}

/// What the pair detectors could not use, summed over every pair (`falseshare::DetectorCounters`):
/// none is expected in the simulator, whose paths keep each connection's order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetectorTotals {
    pub unreported_pkts: u64,
    pub after_finalized: u64,
    pub beyond_record: u64,
}

impl DetectorTotals {
    fn add(&mut self, d: &FalseSharingDetector) {
        let c = d.counters();
        self.unreported_pkts += c.unreported_pkts;
        self.after_finalized += c.after_finalized;
        self.beyond_record += c.beyond_record;
    }
}

/// The most detection events a group keeps (a correlation test can change its answer often).
pub const MAX_DETECTION_EVENTS: usize = 1_000_000;

#[derive(Debug)]
struct Pair {
    a: FlowId,
    b: FlowId,
    det: FalseSharingDetector,
    next_seq: u64,
    /// SBD's answer at its latest grouping.
    sbd: Decision,
    /// Each test's answer as last seen (`DetectorTest::ALL` order).
    seen: [Decision; 5],
    start: Instant,
}

/// A data segment in flight: its connection, send time, and its number in each pair.
#[derive(Debug)]
struct Probe {
    flow: FlowId,
    /// The connection's own send order among its observed segments (what its TCP sequence
    /// numbers tell a receiver).
    nth: u64,
    sent: Instant,
    /// (pair id, sequence number).
    seqs: Vec<(u64, u64)>,
}

/// See the module docs.
#[derive(Debug)]
pub struct MeasuredCoupler {
    config: MeasuredConfig,
    groups: TcpGroups,
    policy: SharingPolicy,
    /// Open pairs, by id (ids count up; a closed pair's id is not reused).
    pairs: Vec<(u64, Pair)>,
    next_pair: u64,
    /// Members' segments in flight, by packet slot.
    probes: Vec<Option<Probe>>,
    /// Actions returned by the policy and not yet applied, each with whether it was deferred
    /// already (counted once).
    actions: Vec<(Action, bool)>,
    /// Dropped segments of each member not yet inferred lost (no later segment of it arrived).
    lost: Vec<(FlowId, Probe)>,
    /// The counters of the pair detectors that have closed.
    closed_counters: DetectorTotals,
    events: Vec<DetectionEvent>,
    /// Connections opened in the policy and not yet closed, in opening order.
    members: Vec<FlowId>,
    /// RFC 8382's per-flow statistics of each member, and the grouping with its hysteresis.
    sbd_flows: Vec<(FlowId, FlowStats)>,
    /// Each member's segments sent so far (numbers their probes).
    sent_by: Vec<(FlowId, u64)>,
    sbd: SbdGrouper,
    /// When SBD groups next: every base interval T from the group's first member.
    next_sbd: Option<Instant>,
    counters: MeasuredCounters,
}

/// The macroflow's destination key: the group is the destination.
const DEST: Dest = Dest(0);

impl MeasuredCoupler {
    pub fn new(config: MeasuredConfig) -> Result<Self, Error> {
        config.check()?;
        Ok(MeasuredCoupler {
            groups: TcpGroups::new(config.coupler),
            policy: SharingPolicy::new(config.sharing)?,
            config,
            pairs: Vec::new(),
            next_pair: 0,
            probes: Vec::new(),
            actions: Vec::new(),
            lost: Vec::new(),
            closed_counters: DetectorTotals::default(),
            events: Vec::new(),
            members: Vec::new(),
            sbd_flows: Vec::new(),
            sent_by: Vec::new(),
            sbd: SbdGrouper::new(config.sbd)?,
            next_sbd: None,
            counters: MeasuredCounters::default(),
        })
    }

    pub fn config(&self) -> &MeasuredConfig {
        &self.config
    }

    pub fn counters(&self) -> MeasuredCounters {
        let mut detectors = self.closed_counters;
        for (_, p) in &self.pairs {
            detectors.add(&p.det);
        }
        MeasuredCounters {
            splits: self.policy.counters().splits,
            merges: self.policy.counters().merges,
            detectors,
            ..self.counters
        }
    }

    pub fn policy(&self) -> &SharingPolicy {
        &self.policy
    }

    pub fn events(&self) -> &[DetectionEvent] {
        &self.events
    }

    /// The detector of the pair (a, b), in either order, while both are open.
    pub fn detector(&self, a: u32, b: u32) -> Option<&FalseSharingDetector> {
        let (a, b) = (FlowId(a as u64), FlowId(b as u64));
        self.pairs
            .iter()
            .find(|(_, p)| (p.a, p.b) == (a, b) || (p.a, p.b) == (b, a))
            .map(|(_, p)| &p.det)
    }

    /// Every open pair's detector.
    pub fn detectors(&self) -> impl Iterator<Item = &FalseSharingDetector> {
        self.pairs.iter().map(|(_, p)| &p.det)
    }

    /// The totals the results report.
    pub fn summary(&self, group: u32) -> crate::stats::MeasuredSummary {
        let c = self.counters();
        crate::stats::MeasuredSummary {
            group,
            members: "none", // the engine knows its members' kind
            sent_pkts: c.sent,
            arrived_pkts: c.arrived,
            dropped_pkts: c.dropped,
            splits: c.splits,
            merges: c.merges,
            deferred: c.deferred,
            detector_errors: c.detector_errors,
            action_errors: c.action_errors,
            events_dropped: c.events_dropped,
            unreported_pkts: c.detectors.unreported_pkts,
            after_finalized: c.detectors.after_finalized,
            beyond_record: c.detectors.beyond_record,
        }
    }

    /// Appends every open pair's metrics per test at `now` (the recorder's sampling).
    pub fn sample(&self, group: u32, now: Instant, out: &mut Vec<crate::stats::DetectorSample>) {
        use crate::engine::decision_name;
        use coupling::falseshare::stats::Estimate;
        let nan = Estimate {
            value: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
            samples: 0,
        };
        for (_, p) in &self.pairs {
            let d = p.det.decisions();
            let mut row = |test: DetectorTest,
                           auto: Option<Estimate>,
                           cross: Option<Estimate>,
                           samples: u64,
                           decision: Decision| {
                let (a, c) = (auto.unwrap_or(nan), cross.unwrap_or(nan));
                out.push(crate::stats::DetectorSample {
                    t_ns: now.as_nanos(),
                    group,
                    flow_a: p.a.0 as u32,
                    flow_b: p.b.0 as u32,
                    test: test.name(),
                    auto: a.value,
                    auto_lo: a.lo,
                    auto_hi: a.hi,
                    cross: c.value,
                    cross_lo: c.lo,
                    cross_hi: c.hi,
                    samples,
                    decision: decision_name(decision),
                });
            };
            for (t, e) in [
                (DetectorTest::AsymmetricLoss, &d.asymmetric_loss),
                (DetectorTest::SymmetricLoss, &d.symmetric_loss),
            ] {
                row(t, e.auto, e.cross, e.trials, e.decision);
            }
            row(
                DetectorTest::Delay,
                d.delay.auto,
                d.delay.cross,
                d.delay.samples,
                d.delay.decision,
            );
            let occ = d.out_of_order.recent_occasions as f64;
            row(
                DetectorTest::OutOfOrder,
                None,
                Some(Estimate {
                    value: occ,
                    lo: occ,
                    hi: occ,
                    samples: d.out_of_order.arrivals,
                }),
                d.out_of_order.arrivals,
                d.out_of_order.decision,
            );
        }
    }

    /// Whether connection `flow` is in the macroflow's shared group now.
    pub fn is_shared(&self, flow: u32) -> Option<bool> {
        self.policy
            .placement(FlowId(flow as u64))
            .ok()
            .map(|p| p.shared)
    }

    /// Connection `flow` starts at `now`: the policy places it (the shared group, or its own while
    /// false sharing is remembered). Its registration follows from the connection's `init` hook.
    pub fn open(&mut self, flow: u32, now: Instant) -> Result<(), Error> {
        let f = FlowId(flow as u64);
        self.policy.open(f, DEST, now)?;
        // Detectors for the new pairs, from now.
        let others: Vec<FlowId> = self.members.iter().copied().filter(|&o| o != f).collect();
        self.sbd_flows
            .push((f, FlowStats::new(self.config.sbd, now)?));
        self.next_sbd.get_or_insert(now + self.config.sbd.t);
        self.members.push(f);
        for o in others {
            // The pair's numbers start at 0 (the newer flow's first packets may arrive last).
            let det = FalseSharingDetector::new(self.config.detector, o, f, now)?.starting_at(0)?;
            self.pairs.push((
                self.next_pair,
                Pair {
                    a: o,
                    b: f,
                    det,
                    next_seq: 0,
                    sbd: Decision::Inconclusive,
                    seen: [Decision::Inconclusive; 5],
                    start: now,
                },
            ));
            self.next_pair += 1;
        }
        Ok(())
    }

    /// A data segment of member `flow` left its source at `now` in packet slot `slot`.
    pub fn on_sent(&mut self, slot: u32, flow: u32, now: Instant) {
        let f = FlowId(flow as u64);
        let seqs: Vec<(u64, u64)> = self
            .pairs
            .iter_mut()
            .filter(|(_, p)| p.a == f || p.b == f)
            .map(|(id, p)| {
                let s = p.next_seq;
                p.next_seq += 1;
                (*id, s)
            })
            .collect();
        self.counters.sent += 1;
        // A departed flow's late resends are only counted: nothing is inferred from them.
        let nth = match self.sent_by.iter_mut().find(|(m, _)| *m == f) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None if self.members.contains(&f) => {
                self.sent_by.push((f, 0));
                0
            }
            None => 0,
        };
        // Stored even without a pair: SBD and the counters see every member's segments.
        let i = slot as usize;
        if i >= self.probes.len() {
            self.probes.resize_with(i + 1, || None);
        }
        self.probes[i] = Some(Probe {
            flow: f,
            nth,
            sent: now,
            seqs,
        });
    }

    /// The segment in `slot` reached its destination (`arrived`) or was dropped, at `now`. A drop
    /// is reported when a segment its connection sent later arrives (see the module docs).
    pub fn on_fate(&mut self, slot: u32, arrived: bool, now: Instant) {
        let Some(probe) = self.probes.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        if !arrived {
            self.counters.dropped += 1;
            // A member's drop waits for a later segment of it; a departed flow's is only counted.
            if self.members.contains(&probe.flow) {
                self.lost.push((probe.flow, probe));
            }
            return;
        }
        self.counters.arrived += 1;
        let (flow, nth) = (probe.flow, probe.nth);
        // The receiver sees the gap when a segment sent after the lost one arrives: only drops
        // of segments sent before this one are inferred now.
        if self.lost.iter().any(|(f, p)| *f == flow && p.nth < nth) {
            let mut i = 0;
            while i < self.lost.len() {
                if self.lost[i].0 == flow && self.lost[i].1.nth < nth {
                    let (_, p) = self.lost.remove(i);
                    self.report(p, false, now);
                } else {
                    i += 1;
                }
            }
        }
        self.report(probe, true, now);
    }

    /// Gives one segment's fate to SBD and to the detectors of its pairs.
    fn report(&mut self, probe: Probe, arrived: bool, now: Instant) {
        if let Some((_, st)) = self.sbd_flows.iter_mut().find(|(f, _)| *f == probe.flow) {
            let owd = now.saturating_since(probe.sent).as_nanos() as i64;
            let r = if arrived {
                st.on_packet(now, owd)
            } else {
                st.on_loss(now, 1)
            };
            if r.is_err() {
                self.counters.detector_errors += 1;
            }
        }
        self.sbd_decide(now);
        for (id, seq) in probe.seqs {
            // Pairs are kept in id order (ids count up; closing keeps the order).
            let Ok(k) = self.pairs.binary_search_by_key(&id, |(pid, _)| *pid) else {
                continue; // the pair closed meanwhile
            };
            let pair = &mut self.pairs[k].1;
            let r = if arrived {
                Packet::from_times(probe.flow, seq, probe.sent, now)
                    .and_then(|p| pair.det.on_packet(now, p))
            } else {
                pair.det.on_loss(now, LossReport::new(probe.flow, seq))
            };
            if r.is_err() {
                self.counters.detector_errors += 1;
                continue;
            }
            self.note_decisions(k, now);
        }
    }

    /// Every base interval T: RFC 8382's grouping of the members, and each pair's SBD answer.
    fn sbd_decide(&mut self, now: Instant) {
        let Some(at) = self.next_sbd.filter(|&t| now >= t) else {
            return;
        };
        let t = self.config.sbd.t;
        let behind = now.saturating_since(at).as_nanos() / t.as_nanos();
        self.next_sbd = Some(at + Duration::from_nanos((behind + 1) * t.as_nanos()));
        let mut entries = Vec::with_capacity(self.sbd_flows.len());
        for (f, st) in &mut self.sbd_flows {
            if st.advance(now).is_err() {
                self.counters.detector_errors += 1;
            }
            entries.push((*f, st.summary()));
        }
        let Ok(g) = self.sbd.group(&entries) else {
            self.counters.detector_errors += 1;
            return;
        };
        for k in 0..self.pairs.len() {
            let (a, b) = (self.pairs[k].1.a, self.pairs[k].1.b);
            let d = match (g.group_of(a), g.group_of(b)) {
                (Some(x), Some(y)) if x == y => Decision::Share,
                (Some(_), Some(_)) => Decision::NoShare,
                _ => Decision::Inconclusive,
            };
            self.pairs[k].1.sbd = d;
            self.note_decisions(k, now);
        }
    }

    /// Records the pair's changed answers and gives the policy the driving test's.
    fn note_decisions(&mut self, k: usize, now: Instant) {
        let pair = &mut self.pairs[k].1;
        let mut verdict = None;
        for (i, t) in DetectorTest::ALL.into_iter().enumerate() {
            let d = match t {
                DetectorTest::Sbd => pair.sbd,
                _ => t.decision(&pair.det),
            };
            if d == pair.seen[i] {
                continue;
            }
            pair.seen[i] = d;
            if self.events.len() < MAX_DETECTION_EVENTS {
                self.events.push(DetectionEvent {
                    at: now,
                    flow_a: pair.a.0 as u32,
                    flow_b: pair.b.0 as u32,
                    test: t,
                    decision: d,
                    since: pair.start,
                });
            } else {
                self.counters.events_dropped += 1;
            }
            if t == self.config.test && d != Decision::Inconclusive {
                verdict = Some(if d == Decision::Share {
                    Verdict::Share
                } else {
                    Verdict::NoShare
                });
            }
        }
        let (a, b) = (pair.a, pair.b);
        if let (Some(v), true) = (verdict, self.config.respond) {
            match self.policy.verdict(a, b, v, now) {
                Ok(actions) => {
                    // The latest verdict on the pair wins: actions still pending for its flows
                    // (a connection in fast recovery waits) go, whether or not it brings new ones
                    // (a share verdict on a pair the policy still has together brings none, and
                    // must cancel a split waiting for one of them).
                    self.actions.retain(|(x, _)| x.flow() != a && x.flow() != b);
                    self.actions
                        .extend(actions.into_iter().map(|act| (act, false)));
                }
                Err(_) => self.counters.action_errors += 1,
            }
        }
    }

    /// Counts a member the engine could not open (a refusal of [`Self::open`]; none expected).
    pub(crate) fn count_open_error(&mut self) {
        self.counters.detector_errors += 1;
    }

    /// The actions waiting to be applied (the engine applies them with [`Self::apply`]).
    pub fn pending_actions(&self) -> Vec<Action> {
        self.actions.iter().map(|(a, _)| *a).collect()
    }

    pub fn has_pending_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// Applies a pending action with the connection's current state `current`: its coupler state
    /// moves (no burst, no slow start: `coupling::response` items 5 and 6) and the answer is what
    /// the connection uses from now on. `None` when nothing moved: the action is not pending, or
    /// the connection is in fast recovery (kept, tried again at the next observation; counted once
    /// in `deferred`), or the move was refused (dropped, counted in `action_errors`). A
    /// connection recovering from a timeout (Linux's Loss state) is moved: it reports slow start
    /// or congestion avoidance, and its window is what it would report.
    pub fn apply(&mut self, action: &Action, current: TcpUpdate) -> Option<Response> {
        let i = self.actions.iter().position(|(a, _)| a == action)?;
        if current.state == coupling::tcp::TcpState::FastRecovery || current.timeout {
            if !self.actions[i].1 {
                self.actions[i].1 = true;
                self.counters.deferred += 1;
            }
            return None;
        }
        let (act, _) = self.actions.remove(i);
        match self.policy.apply_tcp(&mut self.groups, &act, current) {
            Ok(r) => Some(r),
            Err(_) => {
                self.counters.action_errors += 1;
                None
            }
        }
    }

    /// Drops the pairs of `flow` (keeping their counters), its SBD state, pending actions and
    /// losses not yet inferred (it left). Its segments still in the network resolve when they
    /// arrive or are dropped, and find no pair.
    fn close_pairs(&mut self, flow: FlowId) {
        for (_, p) in self
            .pairs
            .iter()
            .filter(|(_, p)| p.a == flow || p.b == flow)
        {
            self.closed_counters.add(&p.det);
        }
        self.pairs.retain(|(_, p)| p.a != flow && p.b != flow);
        self.lost.retain(|(f, _)| *f != flow);
        self.sent_by.retain(|(f, _)| *f != flow);
        self.sbd_flows.retain(|(f, _)| *f != flow);
        self.sbd.forget(flow);
        self.actions.retain(|(a, _)| a.flow() != flow);
        self.members.retain(|&o| o != flow);
    }
}

impl TcpCoupler for MeasuredCoupler {
    fn name(&self) -> &'static str {
        "measured"
    }

    /// Registers the connection where the policy placed it at [`MeasuredCoupler::open`] (a
    /// connection not opened first is refused).
    fn register(
        &mut self,
        conn: FlowId,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> Result<Response, Error> {
        let placement = self.policy.placement(conn)?;
        match self.groups.register(
            conn,
            &placement.grouping(),
            priority,
            cwnd_pkts,
            ssthresh_pkts,
        ) {
            Ok((_, r)) => Ok(r),
            Err(e) => {
                // It runs uncoupled: out of the policy and the detectors.
                let _ = self.policy.close(conn);
                self.close_pairs(conn);
                Err(e)
            }
        }
    }

    fn update(&mut self, conn: FlowId, update: TcpUpdate) -> Result<Option<Response>, Error> {
        self.groups.update(conn, update)
    }

    /// Leaves its group; its policy entry, pairs and SBD state close even if the group refused.
    fn leave(&mut self, conn: FlowId) -> Result<(), Error> {
        let left = self.groups.leave(conn);
        let closed = self.policy.close(conn);
        self.close_pairs(conn);
        left.and(closed.map(|_| ()))
    }

    fn set_max_burst_pkts(&mut self, pkts: f64) -> Result<(), Error> {
        self.groups.set_max_burst_pkts(pkts)
    }

    fn set_priority(&mut self, conn: FlowId, priority: f64) -> Result<(), Error> {
        self.groups.set_priority(conn, priority)
    }

    fn on_ack(&mut self, conn: FlowId, released: &mut Vec<Release>) -> Result<(), Error> {
        self.groups.on_ack(conn, released)
    }

    /// The aggregate over the macroflow's groups.
    fn sum_cwnd(&self) -> f64 {
        self.groups.couplers().map(|c| c.sum_cwnd()).sum()
    }

    fn len(&self) -> usize {
        self.groups.couplers().map(|c| c.len()).sum()
    }

    fn conn(&self, conn: FlowId) -> Result<ConnView, Error> {
        self.groups.group(self.groups.group_of(conn)?)?.conn(conn)
    }

    fn conns(&self) -> Vec<ConnView> {
        let mut all: Vec<ConnView> = self.groups.couplers().flat_map(|c| c.conns()).collect();
        all.sort_by_key(|v| v.conn);
        all
    }
}
