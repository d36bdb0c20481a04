//! The out-of-order test (seed 000 sec. 4.1.3): "Since recent studies have shown that reordering
//! by more than three packets is relatively rare on most of today's Internet, we assume that
//! significant degrees of reordering are caused by false sharing and check to see if packets
//! belonging to flows in the same macroflow consistently arrive out of order to detect false
//! sharing (when reordering occurs on 10 different occasions or more)." It catches what the
//! correlation tests cannot: a fully shared bottleneck with different path delays (Fig. 1(d),
//! Fig. 7(b)). It "produces either a decision that the flows do not share a bottleneck or an
//! inconclusive result", never share.

use super::{Decision, DecisionHistory, OutOfOrderConfig, Side};
use crate::units::{Duration, Instant};

/// The out-of-order test's answer and the counts behind it (over the whole run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrderEvidence {
    /// [`Decision::NoShare`] once `occasions >= min_occasions`, else inconclusive.
    pub decision: Decision,
    /// Arrivals seen (duplicates found in the reorder window excluded).
    pub arrivals: u64,
    /// Arrivals after a packet of the other flow with a sequence number more than `extent_pkts`
    /// higher.
    pub reordered_pkts: u64,
    /// Runs of consecutive reordered arrivals of one flow: the "occasions" of sec. 4.1.3.
    pub occasions: u64,
    /// The largest sequence distance by which an arrival trailed the other flow's highest.
    pub max_extent_pkts: u64,
    /// Arrivals after a later packet of their own flow: counted, not occasions.
    pub within_flow_late_pkts: u64,
    pub history: DecisionHistory,
}

/// The out-of-order test of sec. 4.1.3. Keeps counters only: constant memory.
#[derive(Clone, Debug, PartialEq)]
pub struct OutOfOrderTest {
    config: OutOfOrderConfig,
    /// The highest sequence number received per flow (index A = 0, B = 1).
    highest: [Option<u64>; 2],
    /// The flow whose reordered arrivals form the current occasion, if the last arrival was one.
    run: Option<Side>,
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
            run: None,
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
        match extent {
            // "Reordering by more than three packets".
            Some(e) if e > self.config.extent_pkts => {
                self.reordered_pkts += 1;
                if self.run != Some(side) {
                    self.occasions += 1;
                    self.run = Some(side);
                }
            }
            _ => self.run = None,
        }
        let own = &mut self.highest[side.index()];
        if own.is_some_and(|h| h > seq) {
            self.within_flow_late_pkts += 1;
        }
        *own = Some(own.map_or(seq, |h| h.max(seq)));
        let d = self.decision();
        self.history.record(d, now);
    }

    fn decision(&self) -> Decision {
        if self.occasions >= self.config.min_occasions {
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
}
