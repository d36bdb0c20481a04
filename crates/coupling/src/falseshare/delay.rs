//! The delay-correlation test (seed 000 sec. 4.1.2, after Rubenstein et al., the seed's ref. 20): "(i) the
//! correlation of a packet's delay to the previous packet on the same flow (delay
//! auto-correlation), and (ii) the correlation of a packet's delay to the previous packet on the
//! other flow (delay cross-correlation)... if the cross-correlation metric is equal to or less
//! than the auto-correlation metric, then it is likely that the two flows do not share a
//! bottleneck link."

use super::stats::{pooled_fisher, z_two_sided, CorrelationSums, Estimate};
use super::{
    compare, Decision, DecisionHistory, DelayCorrelationConfig, Fate, Ordered, Ring, Side,
};
use crate::units::{Duration, Instant};

/// One sub-sampled delay sample, taken at a packet p of flow `at`: the delays (re-based on each
/// flow's first) of p, of its flow's previous packet s and of the other flow's last packet o
/// before p, with s < o < p in sending order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct DelaySample {
    at: Side,
    prev_same: i64,
    prev_other: i64,
    owd: i64,
}

/// The correlation sums of the samples taken at one flow's packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct DirectionSums {
    /// Pairs (s, p): the auto-correlation.
    auto: CorrelationSums,
    /// Pairs (o, p): the cross-correlation.
    cross: CorrelationSums,
}

/// The last finalized packet of a flow: its sequence number and its delay if it arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Last {
    seq: u64,
    owd: Option<i64>,
}

/// Running totals of the test's inputs (over the whole run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayCounters {
    /// Packets (received or lost) seen in sending order.
    pub positions: u64,
    /// Positions where the other flow sent a packet between this packet and its flow's previous
    /// one: the only places a sample may be taken (sec. 4.1.1, last paragraph).
    pub interleaved: u64,
    /// Samples taken, including those that have left the window.
    pub samples: u64,
    /// Interleaved positions without a sample because one of the three packets was lost.
    pub missing_delay: u64,
    /// Unreported sequence numbers, after which the context starts afresh (a long run of them
    /// skipped at once counts once; the detector's counters have the exact number).
    pub gaps: u64,
}

/// The correlations of the samples taken at one flow's packets.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DirectionEvidence {
    /// Samples in the window taken at this flow's packets.
    pub samples: u64,
    /// Pearson's r of (previous packet of the same flow, packet); `None` while undefined (fewer
    /// than 2 samples, or delays that do not vary).
    pub auto_r: Option<f64>,
    /// Pearson's r of (previous packet of the other flow, packet).
    pub cross_r: Option<f64>,
}

/// The delay-correlation test's answer and the statistics behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayEvidence {
    pub decision: Decision,
    /// The auto-correlation pooled over both directions, with its Fisher interval.
    pub auto: Option<Estimate>,
    /// The cross-correlation pooled over both directions, with its Fisher interval.
    pub cross: Option<Estimate>,
    /// Index 0: samples taken at A's packets; 1: at B's.
    pub directions: [DirectionEvidence; 2],
    /// Samples in the window.
    pub samples: u64,
    pub counters: DelayCounters,
    pub history: DecisionHistory,
}

/// The delay-correlation test of sec. 4.1.2 over the last `window_samples` samples.
#[derive(Clone, Debug, PartialEq)]
pub struct DelayCorrelationTest {
    config: DelayCorrelationConfig,
    z: f64,
    ring: Ring<DelaySample>,
    /// Over the samples in the ring, per direction (index A = 0, B = 1).
    sums: [DirectionSums; 2],
    last: [Option<Last>; 2],
    counters: DelayCounters,
    history: DecisionHistory,
}

impl DelayCorrelationTest {
    /// `config` has been checked by the detector.
    pub(super) fn new(config: DelayCorrelationConfig, start: Instant) -> Self {
        DelayCorrelationTest {
            config,
            z: z_two_sided(config.confidence),
            ring: Ring::new(config.window_samples),
            sums: [DirectionSums::default(); 2],
            last: [None; 2],
            counters: DelayCounters::default(),
            history: DecisionHistory::new(start),
        }
    }

    pub fn config(&self) -> &DelayCorrelationConfig {
        &self.config
    }

    /// The next packet in sending order (or a sequence number nobody reported).
    pub(super) fn on_ordered(&mut self, now: Instant, ev: Ordered) {
        let (side, seq, fate) = match ev {
            Ordered::Gap => {
                // Whose packet the gap was is unknown, so "the previous packet" of either flow is.
                self.last = [None; 2];
                self.counters.gaps += 1;
                return;
            }
            Ordered::Packet { side, seq, fate } => (side, seq, fate),
        };
        self.counters.positions += 1;
        let owd = match fate {
            Fate::Received(d) => Some(d),
            Fate::Lost => None,
        };
        let same = self.last[side.index()];
        let other = self.last[side.other().index()];
        if let (Some(s), Some(o)) = (same, other) {
            // Interleaved: the other flow's packet o lies between s and this packet, so the cross
            // pair is closer in sending time than the auto pair.
            if o.seq > s.seq {
                self.counters.interleaved += 1;
                match (s.owd, o.owd, owd) {
                    (Some(prev_same), Some(prev_other), Some(owd)) => self.add_sample(
                        now,
                        DelaySample {
                            at: side,
                            prev_same,
                            prev_other,
                            owd,
                        },
                    ),
                    _ => self.counters.missing_delay += 1,
                }
            }
        }
        self.last[side.index()] = Some(Last { seq, owd });
    }

    fn add_sample(&mut self, now: Instant, s: DelaySample) {
        if let Some(old) = self.ring.push(s) {
            let d = &mut self.sums[old.at.index()];
            d.auto.remove(old.prev_same, old.owd);
            d.cross.remove(old.prev_other, old.owd);
        }
        let d = &mut self.sums[s.at.index()];
        d.auto.add(s.prev_same, s.owd);
        d.cross.add(s.prev_other, s.owd);
        self.counters.samples += 1;
        let decision = self.evidence().decision;
        self.history.record(decision, now);
    }

    /// The answer and the statistics behind it, from the samples in the window: each direction's
    /// correlations, pooled in Fisher's z into one auto and one cross estimate with intervals,
    /// compared as sec. 4.1.2 says.
    pub fn evidence(&self) -> DelayEvidence {
        let directions = self.sums.map(|d| DirectionEvidence {
            samples: d.auto.n,
            auto_r: d.auto.pearson(),
            cross_r: d.cross.pearson(),
        });
        // Only directions where both correlations are defined, so auto and cross are pooled over
        // the same samples.
        let mut auto_groups = [(f64::NAN, 0); 2];
        let mut cross_groups = [(f64::NAN, 0); 2];
        for (i, d) in directions.iter().enumerate() {
            if let (Some(a), Some(c)) = (d.auto_r, d.cross_r) {
                auto_groups[i] = (a, d.samples);
                cross_groups[i] = (c, d.samples);
            }
        }
        let auto = pooled_fisher(&auto_groups, self.z);
        let cross = pooled_fisher(&cross_groups, self.z);
        DelayEvidence {
            decision: compare(auto, cross, self.config.min_samples),
            auto,
            cross,
            directions,
            samples: self.ring.len() as u64,
            counters: self.counters,
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

    pub(super) fn window_len(&self) -> usize {
        self.ring.len()
    }

    pub(super) fn window_capacity(&self) -> usize {
        self.ring.capacity()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.ring.heap_bytes()
    }
}
