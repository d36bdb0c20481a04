//! The out-of-order test (seed 000 sec. 4.1.3): "Since recent studies have shown that reordering
//! by more than three packets is relatively rare on most of today's Internet, we assume that
//! significant degrees of reordering are caused by false sharing and check to see if packets
//! belonging to flows in the same macroflow consistently arrive out of order to detect false
//! sharing (when reordering occurs on 10 different occasions or more)." It catches what the
//! correlation tests cannot: a fully shared bottleneck with different path delays (Fig. 1(d),
//! Fig. 7(b)). It "produces either a decision that the flows do not share a bottleneck or an
//! inconclusive result", never share.
//!
//! An *occasion* is a reordering event, not a reordered packet: a reordered arrival more than
//! `occasion_gap` after the previous occasion began starts a new one; the others belong to it.
//! No share while at least `min_occasions` occasions began within the last `horizon`.

use super::{Decision, DecisionHistory, OutOfOrderConfig, Ring, Side};
use crate::units::{Duration, Instant};

/// The out-of-order test's answer and the counts behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrderEvidence {
    /// [`Decision::NoShare`] while `recent_occasions >= min_occasions`, else inconclusive.
    pub decision: Decision,
    /// Arrivals given to the test (duplicates, and arrivals too late to be told from duplicates,
    /// are not: see [`super::DetectorCounters`]).
    pub arrivals: u64,
    /// Arrivals after a packet of the other flow with a sequence number more than `extent_pkts`
    /// higher, over the whole run.
    pub reordered_pkts: u64,
    /// Reordering occasions over the whole run: reordered arrivals more than `occasion_gap` after
    /// the start of the previous occasion (the "different occasions" of sec. 4.1.3).
    pub occasions: u64,
    /// Occasions that began within the `horizon` before the latest observation, counted up to
    /// `min_occasions` (only that many are kept): what the decision rests on.
    pub recent_occasions: u64,
    /// When the latest occasion began.
    pub last_occasion_at: Option<Instant>,
    /// The largest sequence distance by which an arrival trailed the other flow's highest.
    pub max_extent_pkts: u64,
    /// Arrivals after a later packet of their own flow: counted, not occasions.
    pub within_flow_late_pkts: u64,
    pub history: DecisionHistory,
}

/// The out-of-order test of sec. 4.1.3. Keeps counters and the start times of its last
/// `min_occasions` occasions: constant memory.
#[derive(Clone, Debug, PartialEq)]
pub struct OutOfOrderTest {
    config: OutOfOrderConfig,
    /// The highest sequence number received per flow (index A = 0, B = 1).
    highest: [Option<u64>; 2],
    /// The start times (ns) of the last `min_occasions` occasions, oldest first out.
    recent: Ring<u64>,
    /// The latest time seen: occasions age against it.
    now: Instant,
    arrivals: u64,
    reordered_pkts: u64,
    occasions: u64,
    max_extent_pkts: u64,
    within_flow_late_pkts: u64,
    history: DecisionHistory,
}

impl OutOfOrderTest {
    pub(super) fn new(config: OutOfOrderConfig, start: Instant) -> Self {
        OutOfOrderTest {
            config,
            highest: [None; 2],
            // The config is checked: 1..=MAX_MIN_OCCASIONS.
            recent: Ring::new(config.min_occasions as usize),
            now: start,
            arrivals: 0,
            reordered_pkts: 0,
            occasions: 0,
            max_extent_pkts: 0,
            within_flow_late_pkts: 0,
            history: DecisionHistory::new(start),
        }
    }

    pub fn config(&self) -> &OutOfOrderConfig {
        &self.config
    }

    /// A packet of `side` with sequence number `seq` arrived at `now` (in arrival order).
    pub(super) fn on_arrival(&mut self, now: Instant, side: Side, seq: u64) {
        self.arrivals += 1;
        // How far the other flow has got ahead of this packet, in sequence numbers sent.
        let extent = self.highest[side.other().index()]
            .filter(|&h| h > seq)
            .map(|h| h - seq);
        if let Some(e) = extent {
            self.max_extent_pkts = self.max_extent_pkts.max(e);
        }
        // "Reordering by more than three packets".
        if extent.is_some_and(|e| e > self.config.extent_pkts) {
            self.reordered_pkts += 1;
            let new_occasion = self
                .last_occasion_at()
                .is_none_or(|last| now.saturating_since(last) > self.config.occasion_gap);
            if new_occasion {
                self.occasions += 1;
                self.recent.push(now.as_nanos());
            }
        }
        let own = &mut self.highest[side.index()];
        if own.is_some_and(|h| h > seq) {
            self.within_flow_late_pkts += 1;
        }
        *own = Some(own.map_or(seq, |h| h.max(seq)));
        self.advance(now);
    }

    /// Time moved on to `now` (any observation of the detector): occasions older than the
    /// horizon stop counting, and the test re-decides.
    pub(super) fn advance(&mut self, now: Instant) {
        self.now = self.now.max(now);
        let d = self.decision();
        self.history.record(d, self.now);
    }

    fn last_occasion_at(&self) -> Option<Instant> {
        self.recent.newest().map(Instant::from_nanos)
    }

    /// Whether an occasion that began at `t_ns` still counts.
    fn in_horizon(&self, t_ns: u64) -> bool {
        self.now.saturating_since(Instant::from_nanos(t_ns)) <= self.config.horizon
    }

    fn decision(&self) -> Decision {
        // The ring holds the last min_occasions occasions: all of them count when its oldest does.
        let full = self.recent.len() == self.recent.capacity();
        if full && self.recent.oldest().is_some_and(|t| self.in_horizon(t)) {
            Decision::NoShare
        } else {
            Decision::Inconclusive
        }
    }

    pub fn evidence(&self) -> OutOfOrderEvidence {
        OutOfOrderEvidence {
            decision: self.decision(),
            arrivals: self.arrivals,
            reordered_pkts: self.reordered_pkts,
            occasions: self.occasions,
            recent_occasions: self.recent.iter().filter(|&t| self.in_horizon(t)).count() as u64,
            last_occasion_at: self.last_occasion_at(),
            max_extent_pkts: self.max_extent_pkts,
            within_flow_late_pkts: self.within_flow_late_pkts,
            history: self.history,
        }
    }

    pub fn history(&self) -> DecisionHistory {
        self.history
    }

    /// The time from the start until the test first gave `decision`.
    pub fn detection_time(&self, decision: Decision) -> Option<Duration> {
        self.history.detection_time(decision)
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.recent.heap_bytes()
    }
}
