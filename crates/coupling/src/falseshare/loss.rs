//! The loss-correlation tests (seed 000 sec. 4.1.1): asymmetric (Rubenstein et al.'s, A as the
//! comparison flow) and symmetric (the seed's own, conditioned on either flow's losses).

use super::stats::{wilson_interval, z_two_sided, Estimate};
use super::{compare, Decision, DecisionHistory, Fate, LossCorrelationConfig, Ordered, Ring, Side};
use crate::units::{Duration, Instant};

/// Which of the two loss-correlation tests (sec. 4.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossTestKind {
    /// Conditions on the comparison flow A's losses only: "(1) Asymmetric loss auto-correlation:
    /// Conditional loss probability for packet on Flow A following a loss on Flow A. (2)
    /// Asymmetric loss cross-correlation: Conditional loss probability for packet on Flow B
    /// following a loss on Flow A." It "will not detect that Flow B traverses additional
    /// bottlenecks not faced by Flow A".
    Asymmetric,
    /// Conditions on the losses of either flow: "(1) Symmetric loss auto-correlation metric: The
    /// number of back-to-back losses on both flows divided by the number of loss events on both
    /// flows. (2) Symmetric loss cross-correlation metric: The conditional loss probability for
    /// packet on the alternate flow following a loss on either flow." (Read as a conditional
    /// probability per lost packet; see the module doc.)
    Symmetric,
}

/// One sub-sampled trial: after a loss on flow X, was X's next packet lost (auto), and was the
/// other flow's first packet after the loss, sent before X's next one, lost (cross)?
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Trial {
    auto_lost: bool,
    cross_lost: bool,
}

/// A loss on one flow, waiting for the packets that make its trial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Pending {
    #[default]
    None,
    /// The flow's last packet was lost; no packet of the other flow has been sent since.
    AwaitingOther,
    /// ... and the other flow's first packet since was (not) lost: the cross outcome.
    Crossed(bool),
}

/// Running totals of the test's inputs (over the whole run, not the window).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounters {
    /// Losses the test conditions on (A's for the asymmetric test, both flows' for the
    /// symmetric one).
    pub conditions: u64,
    /// Conditions whose flow sent its next packet before the other flow sent any: no interleaving,
    /// no sample (sec. 4.1.1, last paragraph).
    pub not_interleaved: u64,
    /// Conditions dropped because an unreported sequence number (flow unknown) followed.
    pub broken_by_gap: u64,
    /// Trials taken (interleaved conditions completed), including those that left the window.
    pub trials: u64,
}

/// A loss-correlation test's answer and the statistics behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossEvidence {
    pub kind: LossTestKind,
    pub decision: Decision,
    /// The auto metric (conditional loss probability on the same flow) with its Wilson interval;
    /// `None` without trials.
    pub auto: Option<Estimate>,
    /// The cross metric (conditional loss probability on the other flow) with its interval.
    pub cross: Option<Estimate>,
    /// Trials in the window.
    pub trials: u64,
    /// Trials in the window whose auto packet was lost.
    pub auto_lost: u64,
    /// Trials in the window whose cross packet was lost.
    pub cross_lost: u64,
    pub counters: LossCounters,
    pub history: DecisionHistory,
}

/// The asymmetric or symmetric loss-correlation test of sec. 4.1.1, over the last
/// `window_samples` trials.
#[derive(Clone, Debug, PartialEq)]
pub struct LossCorrelationTest {
    kind: LossTestKind,
    config: LossCorrelationConfig,
    /// z of the configured two-sided confidence.
    z: f64,
    ring: Ring<Trial>,
    /// Over the trials in the ring.
    auto_lost: u64,
    cross_lost: u64,
    /// Per flow (index A = 0, B = 1).
    pending: [Pending; 2],
    counters: LossCounters,
    history: DecisionHistory,
}

impl LossCorrelationTest {
    /// `config` has been checked by the detector.
    pub(super) fn new(kind: LossTestKind, config: LossCorrelationConfig, start: Instant) -> Self {
        LossCorrelationTest {
            kind,
            config,
            z: z_two_sided(config.confidence),
            ring: Ring::new(config.window_samples),
            auto_lost: 0,
            cross_lost: 0,
            pending: [Pending::None; 2],
            counters: LossCounters::default(),
            history: DecisionHistory::new(start),
        }
    }

    pub fn kind(&self) -> LossTestKind {
        self.kind
    }

    pub fn config(&self) -> &LossCorrelationConfig {
        &self.config
    }

    /// Whether the test conditions on this flow's losses.
    fn conditions_on(&self, side: Side) -> bool {
        match self.kind {
            LossTestKind::Asymmetric => side == Side::A,
            LossTestKind::Symmetric => true,
        }
    }

    /// The next packet in sending order (or a sequence number nobody reported).
    pub(super) fn on_ordered(&mut self, now: Instant, ev: Ordered) {
        let (side, fate) = match ev {
            Ordered::Gap => {
                // The gap may have been either flow's packet: no trial can be completed across it.
                for p in &mut self.pending {
                    if *p != Pending::None {
                        self.counters.broken_by_gap += 1;
                    }
                    *p = Pending::None;
                }
                return;
            }
            Ordered::Packet { side, fate, .. } => (side, fate),
        };
        let lost = fate == Fate::Lost;
        // The first packet of this flow after the other flow's loss: the cross outcome.
        let other = side.other().index();
        if self.pending[other] == Pending::AwaitingOther {
            self.pending[other] = Pending::Crossed(lost);
        }
        // This flow's next packet after its own loss: the auto outcome, a trial if the other flow
        // sent in between (the sub-sampling of sec. 4.1.1).
        match core::mem::take(&mut self.pending[side.index()]) {
            Pending::Crossed(cross_lost) => self.add_trial(
                now,
                Trial {
                    auto_lost: lost,
                    cross_lost,
                },
            ),
            Pending::AwaitingOther => self.counters.not_interleaved += 1,
            Pending::None => {}
        }
        if lost && self.conditions_on(side) {
            self.counters.conditions += 1;
            self.pending[side.index()] = Pending::AwaitingOther;
        }
    }

    fn add_trial(&mut self, now: Instant, t: Trial) {
        if let Some(old) = self.ring.push(t) {
            self.auto_lost -= u64::from(old.auto_lost);
            self.cross_lost -= u64::from(old.cross_lost);
        }
        self.auto_lost += u64::from(t.auto_lost);
        self.cross_lost += u64::from(t.cross_lost);
        self.counters.trials += 1;
        let d = self.evidence().decision;
        self.history.record(d, now);
    }

    /// The answer and the statistics behind it, from the trials in the window: both metrics with
    /// their Wilson intervals, compared as sec. 4.1.1 and 4.1.2 (last paragraph) say.
    pub fn evidence(&self) -> LossEvidence {
        let n = self.ring.len() as u64;
        let auto = wilson_interval(self.auto_lost, n, self.z);
        let cross = wilson_interval(self.cross_lost, n, self.z);
        LossEvidence {
            kind: self.kind,
            decision: compare(auto, cross, self.config.min_samples),
            auto,
            cross,
            trials: n,
            auto_lost: self.auto_lost,
            cross_lost: self.cross_lost,
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
