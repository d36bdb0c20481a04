//! Detecting false sharing between two flows of a macroflow, as pure streaming logic (no I/O, no
//! clock; time is passed in): the four tests of seed 000 sec. 4.1 ("False sharing", a paper on
//! coupled congestion control whose flows may not share their bottleneck).
//!
//! Two flows A and B share congestion state; "two flows undergo false sharing if even one of their
//! bottlenecks is not common to them" (sec. 4.1, issue 1). The sender tags each packet with an
//! increasing sequence number and a timestamp (sec. 4.1.2, 4.1.3); the receiver (or whoever
//! detects) feeds every packet's arrival with its one-way delay and every loss to one
//! [`FalseSharingDetector`], which runs four tests side by side, each answering
//! [`Decision::Share`], [`Decision::NoShare`] or [`Decision::Inconclusive`] with its evidence:
//!
//! - [`LossCorrelationTest`] as the **asymmetric loss-correlation test** (sec. 4.1.1, after
//!   Rubenstein et al., the seed's ref. 20): A is the comparison flow; auto = P(A's next packet lost | A lost a
//!   packet), cross = P(B's next packet lost | A lost a packet). Share if cross > auto.
//! - [`LossCorrelationTest`] as the **symmetric loss-correlation test** (sec. 4.1.1): the same two
//!   conditional probabilities, conditioned on the losses of either flow ("the metrics are the same
//!   regardless of which flow is A and which is B"), so it also sees bottlenecks only B crosses.
//! - [`DelayCorrelationTest`] (sec. 4.1.2): the correlation of a packet's one-way delay with the
//!   previous packet's on the same flow (auto) and on the other flow (cross). Share if cross >
//!   auto, no share if cross <= auto.
//! - [`OutOfOrderTest`] (sec. 4.1.3): a packet of one flow is reordered when it arrives after a
//!   packet of the other flow whose sequence number is more than three higher; reordering on 10
//!   or more different occasions (events apart in time, within a horizon) means different paths:
//!   no share. It never says share.
//!
//! The three correlation tests decide by "the 90% confidence intervals around the cross and
//! auto-correlation metrics" (sec. 4.1.2, last paragraph; Fig. 5): a decision once the intervals
//! no longer overlap. The confidence level is configurable (sec. 5.1, Fig. 11: detection time
//! against the level of confidence; [`FalseSharingConfig::with_confidence`]). The time each test
//! first reached each answer is kept ([`DecisionHistory`]), so the detection time of sec. 4 / 4.2
//! ("the time until the test returns the correct answer") can be read off.
//!
//! # Sending order, interleaving and sub-sampling
//!
//! All correlation metrics compare a packet with packets sent just before it; they rest on the
//! assumption that "the transmission spacing between packets from different flows is smaller than
//! within the same flow" (sec. 4.1.1, last paragraph). The congestion-sharing scheduler
//! interleaves the flows, but a flow given a larger share "may send many packets in a row", so
//! "we only consider conditional loss probability samples in which the required interleaving of
//! packets occurs. This same sub-sampling technique, also applied to the delay-correlation tests,
//! ...". Here a sample is taken at a packet p of flow X only when the other flow sent a packet
//! after X's previous packet s and before p: then the cross pair is closer in sending time than
//! the auto pair. Everything else is counted ([`DelayCounters::positions`] against
//! [`DelayCounters::interleaved`], [`LossCounters::not_interleaved`]).
//!
//! Sending order is the **macroflow sequence number**: one counter at the source shared by A and
//! B ("each packet is marked with an increasing sequence number at the source", sec. 4.1.3).
//! Arrivals and loss reports come in any order; a fixed-size **reorder window** puts them back in
//! sending order before the loss and delay tests see them: a sequence number is *finalized*
//! (handed to those tests) as soon as it and every earlier one has been reported (received or
//! lost), or when it falls `reorder_window_pkts` behind the highest number reported (then
//! unreported, and counted). The out-of-order test looks at the arrivals themselves, in arrival
//! order (copies of packets already received excepted).
//!
//! # Memory
//!
//! Fixed at construction ([`FalseSharingDetector::memory`]): the reorder window
//! (`reorder_window_pkts` slots of 16 bytes) and the record of as many finalized sequence numbers
//! (3 bits each), the delay test's last `delay.window_samples` samples (32 bytes each), each loss
//! test's last `window_samples` trials (2 bytes each) and the out-of-order test's last
//! `min_occasions` occasion times (8 bytes each): about 72 KiB with the defaults. Nothing grows
//! with the run.
//!
//! # Where the text leaves a choice (each one tested in `tests/falseshare.rs`)
//!
//! - **Which numbers the tests run on.** Sequence numbers are macroflow-wide (above); the one-way
//!   delay is given per packet (receive time minus the source timestamp, sec. 4.1.2, or
//!   [`Packet::from_times`]) and may be off by a constant per flow: "all measurements for a single
//!   flow may be off by a fixed constant". Each flow's delays are re-based on its first one, and
//!   |delay - first delay| is limited to [`MAX_DELAY_SPREAD_NS`] (about 19.5 h) so every sum is an
//!   exact integer.
//! - **Sub-sampling** (above): a sample needs s < o < p in sending order (s: the same flow's
//!   previous packet, o: the other flow's). For loss, the condition is a loss at s; its cross
//!   trial is the *first* packet of the other flow after s ("packet on Flow B following a loss on
//!   Flow A") and its auto trial is X's next packet p, used only when the cross packet came first.
//!   For delay, the cross pair uses o, the *last* packet of the other flow before p ("the previous
//!   packet on the other flow"). With one packet of the other flow in between they are the same.
//! - **Missing packets.** A delay sample needs the delays of all three packets: a lost one gives
//!   no sample (counted, [`DelayCounters::missing_delay`]). A sequence number that is never
//!   reported (its flow unknown) breaks the context: the tests start afresh after it (counted,
//!   [`DetectorCounters::unreported_pkts`], [`DelayCounters::gaps`],
//!   [`LossCounters::broken_by_gap`]). A report arriving after its number was finalized is counted
//!   ([`DetectorCounters::after_finalized`]) and not used by the loss and delay tests. An arrival
//!   wins over a loss report for the same packet (the packet was not lost).
//! - **Reports after finalization.** For the last `reorder_window_pkts` finalized sequence
//!   numbers the detector keeps whether each was received, lost or never reported, and by which
//!   flow (3 bits each). A late arrival of a number finalized as received is a network duplicate:
//!   counted ([`DetectorCounters::finalized_duplicates`]) and not given to the out-of-order test,
//!   like a duplicate inside the window (a copy of an old packet says nothing about the paths, and
//!   copies on 10 occasions would otherwise say no share). A late arrival of a number finalized
//!   lost or unreported is a late packet: the out-of-order test sees it, and copies of it after
//!   that are duplicates. A report of the other flow for a finalized number is refused, as inside
//!   the window, so no packet is seen under the wrong flow. An arrival older than the record
//!   cannot be told from a duplicate: counted ([`DetectorCounters::beyond_record`]) and not used
//!   (`reorder_window_pkts` is meant to cover the reordering between the paths anyway).
//! - **Sequence numbers** run up to 2^64 - 2: 2^64 - 1 has no successor to finalize into and is
//!   refused.
//! - **The symmetric auto-correlation metric**, "the number of back-to-back losses on both flows
//!   divided by the number of loss events on both flows": read as a conditional probability,
//!   #(losses whose flow's next packet is also lost) / #(losses), over both flows. Sec. 3.4 calls
//!   a pile of back-to-back losses a "loss event"; dividing by piles would give a mean pile length
//!   minus one, not a probability, and could not be compared with the cross metric (a
//!   probability) nor given a binomial interval. It is sub-sampled like every other metric.
//! - **Intervals.** The seed does not say how its intervals are built. Loss metrics are binomial
//!   proportions: Wilson score intervals ([`stats::wilson_interval`]; the normal interval has zero
//!   width at p = 0 or 1, common on few trials). Delay metrics are correlation coefficients:
//!   Fisher z-intervals ([`stats::fisher_interval`]). Both assume independent samples; successive
//!   samples of a queue are not, so the intervals are narrower than they should be: the same
//!   simplification the seed's comparison of intervals makes.
//! - **Two directions of delay samples.** Samples taken at A's packets and at B's are correlated
//!   separately and pooled in Fisher's z with weights n - 3 ([`stats::pooled_fisher`]). Pooling the
//!   raw pairs would let the constant offset between the flows' delays (clocks, propagation) act
//!   as a correlation of its own, contradicting "the lack of synchronization has no affect on the
//!   values of these metrics" (sec. 4.1.2). A direction enters only when both its correlations
//!   are defined (at least 4 samples, delays that vary).
//! - **Deciding.** Share when the cross interval lies entirely above the auto interval, no share
//!   when entirely below, inconclusive otherwise (touching intervals overlap). The text's "less
//!   than or equal to" cannot be shown by intervals: equal metrics stay inconclusive. No decision
//!   on fewer than `min_samples` samples (default 10; the seed gives none, and the normal
//!   approximations behind both intervals need a few; 10 matches the out-of-order test's 10
//!   occasions).
//! - **A window, not the whole run.** Fig. 5 shows metrics over a whole transfer. To keep memory
//!   fixed, and because the separation is reversible (sec. 5.1) so a decision must be able to
//!   follow a path change, each correlation test keeps its last `window_samples` samples (delay
//!   2048, loss 1024; until the window fills the statistics are exactly the whole-run ones). Up to
//!   [`MAX_WINDOW_SAMPLES`] may be configured.
//! - **Out-of-order occasions.** "Reordering by more than three packets" is measured by sequence
//!   number: a packet is late when a packet of the *other* flow with a sequence number more than
//!   `extent_pkts` (3) higher arrived before it. The seed counts occasions on which flows
//!   "consistently arrive out of order" ("on 10 different occasions or more"), not late packets:
//!   one transient event (a delay spike on one path) makes many packets late at once, and counting
//!   each would say no share within milliseconds, where the seed's reordering test typically took
//!   "between 5-10s" (sec. 5.2). So a late arrival begins a new occasion only when it comes more
//!   than `occasion_gap` after the previous occasion began; the others belong to it. Default
//!   500 ms: under persistent reordering (different path delays, Fig. 1(d)) an occasion begins
//!   about every 500 ms and the 10th comes about 4.5 s after the first, the low end of the seed's
//!   5-10 s, while an event shorter than that (a queue building up and draining, about an RTT)
//!   counts once. Occasions count only within a `horizon` (default 10 s, the high end of that
//!   range): like the windowed correlation tests, the answer goes back to inconclusive when the
//!   reordering stops (the separation is reversible, sec. 5.1), and rare unrelated events spread
//!   over a long run do not add up to 10. The horizon must exceed (min_occasions - 1) times the
//!   gap, or 10 occasions could never fit in it. Lateness within one flow is counted apart and is
//!   not an occasion: it says nothing about the two flows' paths.
//! - **Decision times.** Each test re-decides after every sample it takes (after every accepted
//!   observation for the out-of-order test, whose occasions age out of the horizon), at the time
//!   of the observation that completed it; the detection time is
//!   the first time an answer was reached, from the `start` given to
//!   [`FalseSharingDetector::new`].
//!
//! Not implemented: the response (sec. 5: separating the flows' congestion state), and the RTT
//! fall-back the seed mentions for destinations behind a NAT (sec. 4.1.3).

mod delay;
mod loss;
mod reorder;
pub mod stats;

pub use delay::{DelayCorrelationTest, DelayCounters, DelayEvidence, DirectionEvidence};
pub use loss::{LossCorrelationTest, LossCounters, LossEvidence, LossTestKind};
pub use reorder::{OutOfOrderEvidence, OutOfOrderTest};

use crate::error::Error;
use crate::group::FlowId;
use crate::units::{check_not_before, Duration, Instant};
use core::fmt;
use stats::Estimate;

/// The largest distance accepted between a flow's one-way delay and its first one: 2^46 ns (about
/// 19.5 hours). With at most [`MAX_WINDOW_SAMPLES`] samples every correlation sum stays an exact
/// 128-bit integer.
pub const MAX_DELAY_SPREAD_NS: i64 = 1 << 46;

/// The largest sample window of a correlation test.
pub const MAX_WINDOW_SAMPLES: usize = 1 << 16;

/// The largest reorder window, in sequence numbers.
pub const MAX_REORDER_WINDOW_PKTS: usize = 1 << 20;

/// The largest `min_occasions` of the out-of-order test: the start times of that many occasions
/// are kept.
pub const MAX_MIN_OCCASIONS: u64 = 1 << 16;

/// A test's answer (sec. 4.1.3: "the previous tests answer that either a pair of flows share a
/// link, a pair of flows do not share a link, or remain inconclusive").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The flows share their bottleneck(s).
    Share,
    /// False sharing: the flows do not share every bottleneck (or, for the out-of-order test,
    /// their paths differ).
    NoShare,
    /// Not enough evidence either way.
    #[default]
    Inconclusive,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decision::Share => "Share",
            Decision::NoShare => "NoShare",
            Decision::Inconclusive => "Inconclusive",
        })
    }
}

/// Which flow of the pair. A is the comparison flow of the asymmetric loss test (sec. 4.1.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Side {
    #[default]
    A,
    B,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    /// 0 for A, 1 for B: the index of per-flow arrays.
    pub fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
}

/// When a test reached each answer: the detection time of sec. 4 ("the time it takes to detect
/// false sharing") and Fig. 6(a), 7, 9, 11 is `first_no_share_at - start` (or `first_share_at`
/// for a genuinely shared pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionHistory {
    /// The current answer.
    pub decision: Decision,
    /// When the current answer was reached (the start while never decided).
    pub since: Instant,
    pub first_share_at: Option<Instant>,
    pub first_no_share_at: Option<Instant>,
    /// How many times the answer changed.
    pub changes: u64,
    /// The detector's start, from which detection times are measured.
    pub start: Instant,
}

impl DecisionHistory {
    fn new(start: Instant) -> Self {
        DecisionHistory {
            decision: Decision::Inconclusive,
            since: start,
            first_share_at: None,
            first_no_share_at: None,
            changes: 0,
            start,
        }
    }

    fn record(&mut self, d: Decision, now: Instant) {
        if d == self.decision {
            return;
        }
        self.decision = d;
        self.since = now;
        self.changes += 1;
        match d {
            Decision::Share => {
                self.first_share_at.get_or_insert(now);
            }
            Decision::NoShare => {
                self.first_no_share_at.get_or_insert(now);
            }
            Decision::Inconclusive => {}
        }
    }

    /// The time from the start until the test first gave `decision` (None if it never did, or for
    /// [`Decision::Inconclusive`]).
    pub fn detection_time(&self, decision: Decision) -> Option<Duration> {
        let at = match decision {
            Decision::Share => self.first_share_at,
            Decision::NoShare => self.first_no_share_at,
            Decision::Inconclusive => None,
        };
        at.map(|t| t.saturating_since(self.start))
    }
}

/// The decision rule shared by the loss and delay tests (sec. 4.1.1, 4.1.2 and its last
/// paragraph: "we use the 90% confidence intervals around the cross and auto-correlation metrics
/// to decide which one is greater"): share when the cross interval lies above the auto interval,
/// no share when below, inconclusive when they overlap or either has fewer than `min_samples`.
fn compare(auto: Option<Estimate>, cross: Option<Estimate>, min_samples: u64) -> Decision {
    match (auto, cross) {
        (Some(a), Some(c)) if a.samples >= min_samples && c.samples >= min_samples => {
            if c.above(&a) {
                Decision::Share
            } else if c.below(&a) {
                Decision::NoShare
            } else {
                Decision::Inconclusive
            }
        }
        _ => Decision::Inconclusive,
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration

fn invalid(field: &'static str, value: f64, expected: &'static str) -> Error {
    Error::InvalidValue {
        field,
        value,
        expected,
    }
}

/// The field names a correlation test's config reports, plain or qualified by the test.
struct Names {
    confidence: &'static str,
    min_samples: &'static str,
    window_samples: &'static str,
}

const PLAIN: Names = Names {
    confidence: "confidence",
    min_samples: "min_samples",
    window_samples: "window_samples",
};

fn check_correlation_test(
    confidence: f64,
    min_samples: u64,
    window_samples: usize,
    names: &Names,
) -> Result<(), Error> {
    // The interval's two-sided level: 0 and 1 would give a zero or infinite z.
    if !(confidence.is_finite() && confidence > 0.0 && confidence < 1.0) {
        return Err(invalid(
            names.confidence,
            confidence,
            "a confidence level strictly between 0 and 1 (the seed uses 0.9)",
        ));
    }
    if !(1..=MAX_WINDOW_SAMPLES).contains(&window_samples) {
        return Err(invalid(
            names.window_samples,
            window_samples as f64,
            "a window of 1..=65536 samples",
        ));
    }
    // More than the window could never be reached: the test would never decide.
    if !(1..=window_samples as u64).contains(&min_samples) {
        return Err(invalid(
            names.min_samples,
            min_samples as f64,
            "a sample count in 1..=window_samples",
        ));
    }
    Ok(())
}

/// The asymmetric or symmetric loss-correlation test's parameters (sec. 4.1.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossCorrelationConfig {
    /// Two-sided confidence level of the intervals around both metrics. Default 0.9 (sec. 4.1.2,
    /// last paragraph: "for both the loss and delay correlation tests, we use the 90% confidence
    /// intervals"); Fig. 11 varies it.
    pub confidence: f64,
    /// No decision on fewer trials. Default 10 (our choice; see the module doc).
    pub min_samples: u64,
    /// The number of most recent trials kept. Default 1024 (our choice; see the module doc).
    pub window_samples: usize,
}

impl Default for LossCorrelationConfig {
    fn default() -> Self {
        LossCorrelationConfig {
            confidence: 0.9,
            min_samples: 10,
            window_samples: 1024,
        }
    }
}

impl LossCorrelationConfig {
    /// Validates every parameter; the first bad one is named in the error.
    pub fn check(&self) -> Result<(), Error> {
        self.check_as(&PLAIN)
    }

    fn check_as(&self, names: &Names) -> Result<(), Error> {
        check_correlation_test(
            self.confidence,
            self.min_samples,
            self.window_samples,
            names,
        )
    }
}

/// The delay-correlation test's parameters (sec. 4.1.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayCorrelationConfig {
    /// Two-sided confidence level of the intervals around both correlations. Default 0.9
    /// (sec. 4.1.2, Fig. 5: "the 90% confidence intervals for these metrics"); Fig. 11 varies it.
    pub confidence: f64,
    /// No decision on fewer delay samples (over both directions). Default 10 (our choice). Each
    /// direction also needs 4 samples for Fisher's interval.
    pub min_samples: u64,
    /// The number of most recent delay samples kept. Default 2048 (our choice).
    pub window_samples: usize,
}

impl Default for DelayCorrelationConfig {
    fn default() -> Self {
        DelayCorrelationConfig {
            confidence: 0.9,
            min_samples: 10,
            window_samples: 2048,
        }
    }
}

impl DelayCorrelationConfig {
    /// Validates every parameter; the first bad one is named in the error.
    pub fn check(&self) -> Result<(), Error> {
        self.check_as(&PLAIN)
    }

    fn check_as(&self, names: &Names) -> Result<(), Error> {
        check_correlation_test(
            self.confidence,
            self.min_samples,
            self.window_samples,
            names,
        )
    }
}

/// The out-of-order test's parameters (sec. 4.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrderConfig {
    /// A packet is reordered when a packet of the other flow with a sequence number more than
    /// this much higher arrived before it. Default 3 ("reordering by more than three packets is
    /// relatively rare on most of today's Internet").
    pub extent_pkts: u64,
    /// No share while reordering occurred on this many occasions within the `horizon`. Default 10
    /// ("when reordering occurs on 10 different occasions or more"). At most
    /// [`MAX_MIN_OCCASIONS`].
    pub min_occasions: u64,
    /// A reordered arrival begins a new occasion only when it comes more than this after the
    /// previous occasion began; earlier ones belong to that occasion. Default 500 ms (our choice,
    /// from the seed's 5-10 s detection times; see the module doc).
    pub occasion_gap: Duration,
    /// Occasions count for this long after they began. Default 10 s (our choice; see the module
    /// doc). Must exceed (min_occasions - 1) * occasion_gap.
    pub horizon: Duration,
}

impl Default for OutOfOrderConfig {
    fn default() -> Self {
        OutOfOrderConfig {
            extent_pkts: 3,
            min_occasions: 10,
            occasion_gap: Duration::from_millis(500),
            horizon: Duration::from_secs(10),
        }
    }
}

impl OutOfOrderConfig {
    /// Validates every parameter; the first bad one is named in the error.
    pub fn check(&self) -> Result<(), Error> {
        self.check_as("min_occasions", "horizon")
    }

    fn check_as(&self, min_occasions: &'static str, horizon: &'static str) -> Result<(), Error> {
        // Zero occasions would say "no share" before any packet arrived.
        if !(1..=MAX_MIN_OCCASIONS).contains(&self.min_occasions) {
            return Err(invalid(
                min_occasions,
                self.min_occasions as f64,
                "1..=65536 reordering occasions",
            ));
        }
        // Occasions begin more than occasion_gap apart: min_occasions of them span more than
        // (min_occasions - 1) gaps, and must fit in the horizon.
        if self.horizon <= self.occasion_gap.saturating_mul(self.min_occasions - 1) {
            return Err(invalid(
                horizon,
                self.horizon.as_secs_f64(),
                "a horizon longer than (min_occasions - 1) * occasion_gap",
            ));
        }
        Ok(())
    }
}

/// The whole detector's parameters: the reorder window and one config per test, each with the
/// seed's values as [`Default`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FalseSharingConfig {
    /// How far (in sequence numbers) reports may come out of sending order and still be used by
    /// the loss and delay tests: the reordering between the flows' paths plus the delay of loss
    /// reports, in packets. Default 256 (our choice).
    pub reorder_window_pkts: usize,
    pub asymmetric_loss: LossCorrelationConfig,
    pub symmetric_loss: LossCorrelationConfig,
    pub delay: DelayCorrelationConfig,
    pub out_of_order: OutOfOrderConfig,
}

impl Default for FalseSharingConfig {
    fn default() -> Self {
        FalseSharingConfig {
            reorder_window_pkts: 256,
            asymmetric_loss: LossCorrelationConfig::default(),
            symmetric_loss: LossCorrelationConfig::default(),
            delay: DelayCorrelationConfig::default(),
            out_of_order: OutOfOrderConfig::default(),
        }
    }
}

impl FalseSharingConfig {
    /// The same config with every correlation test's confidence level set to `confidence`
    /// (Fig. 11: "Detection time vs. level of confidence"). Checked by [`Self::check`].
    pub fn with_confidence(mut self, confidence: f64) -> Self {
        self.asymmetric_loss.confidence = confidence;
        self.symmetric_loss.confidence = confidence;
        self.delay.confidence = confidence;
        self
    }

    /// Validates every parameter; the first bad one is named in the error, qualified by its test
    /// (`delay.confidence`).
    pub fn check(&self) -> Result<(), Error> {
        if !(1..=MAX_REORDER_WINDOW_PKTS).contains(&self.reorder_window_pkts) {
            return Err(invalid(
                "reorder_window_pkts",
                self.reorder_window_pkts as f64,
                "a reorder window of 1..=2^20 sequence numbers",
            ));
        }
        self.asymmetric_loss.check_as(&Names {
            confidence: "asymmetric_loss.confidence",
            min_samples: "asymmetric_loss.min_samples",
            window_samples: "asymmetric_loss.window_samples",
        })?;
        self.symmetric_loss.check_as(&Names {
            confidence: "symmetric_loss.confidence",
            min_samples: "symmetric_loss.min_samples",
            window_samples: "symmetric_loss.window_samples",
        })?;
        self.delay.check_as(&Names {
            confidence: "delay.confidence",
            min_samples: "delay.min_samples",
            window_samples: "delay.window_samples",
        })?;
        self.out_of_order
            .check_as("out_of_order.min_occasions", "out_of_order.horizon")
    }
}

// ---------------------------------------------------------------------------------------------
// Observations

/// A packet that arrived: its flow, its macroflow sequence number (sec. 4.1.3) and its one-way
/// delay (sec. 4.1.2: "the difference between the source timestamp and current time"), relative:
/// any constant offset per flow is fine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub flow: FlowId,
    pub seq: u64,
    pub owd_ns: i64,
}

impl Packet {
    pub fn new(flow: FlowId, seq: u64, owd_ns: i64) -> Self {
        Packet { flow, seq, owd_ns }
    }

    /// A packet by its source timestamp `sent` and its arrival time `received` (each on its own
    /// host's clock: the offset between the clocks cancels, sec. 4.1.2). The difference must fit
    /// in an i64 (about 292 years).
    pub fn from_times(
        flow: FlowId,
        seq: u64,
        sent: Instant,
        received: Instant,
    ) -> Result<Self, Error> {
        let owd = i128::from(received.as_nanos()) - i128::from(sent.as_nanos());
        let owd_ns = i64::try_from(owd).map_err(|_| {
            invalid(
                "received",
                received.as_secs_f64(),
                "a receive time within 2^63 ns of the send time",
            )
        })?;
        Ok(Packet { flow, seq, owd_ns })
    }
}

/// A packet found lost: its flow and macroflow sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossReport {
    pub flow: FlowId,
    pub seq: u64,
}

impl LossReport {
    pub fn new(flow: FlowId, seq: u64) -> Self {
        LossReport { flow, seq }
    }
}

/// What became of a packet, as the loss and delay tests see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Arrived, with its one-way delay re-based on its flow's first one.
    Received(i64),
    Lost,
}

/// The reorder window's output: the packets in sending order, or a sequence number nobody
/// reported (its flow is unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ordered {
    Packet { side: Side, seq: u64, fate: Fate },
    Gap,
}

// ---------------------------------------------------------------------------------------------
// Fixed-size storage

/// A ring of the last `capacity` values, allocated once; pushing past it evicts the oldest.
#[derive(Clone, Debug, PartialEq)]
struct Ring<T> {
    buf: Box<[T]>,
    next: usize,
    len: usize,
}

impl<T: Copy + Default> Ring<T> {
    fn new(capacity: usize) -> Self {
        Ring {
            buf: vec![T::default(); capacity].into_boxed_slice(),
            next: 0,
            len: 0,
        }
    }

    /// Appends `v`; returns the value it evicted, if the ring was full.
    fn push(&mut self, v: T) -> Option<T> {
        let cap = self.buf.len();
        let evicted = (self.len == cap).then(|| self.buf[self.next]);
        self.buf[self.next] = v;
        self.next = (self.next + 1) % cap;
        self.len = (self.len + 1).min(cap);
        evicted
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The oldest value kept.
    fn oldest(&self) -> Option<T> {
        let cap = self.buf.len();
        (self.len > 0).then(|| self.buf[(self.next + cap - self.len) % cap])
    }

    /// The newest value kept.
    fn newest(&self) -> Option<T> {
        let cap = self.buf.len();
        (self.len > 0).then(|| self.buf[(self.next + cap - 1) % cap])
    }

    /// The values kept, in no particular order.
    fn iter(&self) -> impl Iterator<Item = T> + '_ {
        let cap = self.buf.len();
        (0..self.len).map(move |i| self.buf[(self.next + cap - 1 - i) % cap])
    }

    fn heap_bytes(&self) -> usize {
        self.buf.len() * core::mem::size_of::<T>()
    }
}

/// One sequence number's reports, while it waits in the reorder window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Slot {
    #[default]
    Empty,
    Received {
        side: Side,
        owd: i64,
    },
    Lost {
        side: Side,
    },
}

impl Slot {
    fn side(self) -> Option<Side> {
        match self {
            Slot::Empty => None,
            Slot::Received { side, .. } | Slot::Lost { side } => Some(side),
        }
    }
}

/// The reorder window: sequence numbers `base .. base + W`, one slot each (slot `seq % W`).
#[derive(Clone, Debug, PartialEq)]
struct ReorderWindow {
    slots: Box<[Slot]>,
    /// The lowest sequence number not yet finalized; set by the first report.
    base: Option<u64>,
    /// The highest sequence number reported.
    highest: Option<u64>,
    /// Reported sequence numbers not yet finalized.
    pending: u64,
}

impl ReorderWindow {
    fn new(w: usize) -> Self {
        ReorderWindow {
            slots: vec![Slot::Empty; w].into_boxed_slice(),
            base: None,
            highest: None,
            pending: 0,
        }
    }

    fn width(&self) -> u64 {
        self.slots.len() as u64
    }

    fn index(&self, seq: u64) -> usize {
        (seq % self.width()) as usize
    }

    /// The slot of `seq` if it lies inside the window.
    fn get(&self, seq: u64) -> Option<Slot> {
        let base = self.base?;
        (seq >= base && seq - base < self.width()).then(|| self.slots[self.index(seq)])
    }

    /// Whether `seq` was finalized already (lies below the window).
    fn is_finalized(&self, seq: u64) -> bool {
        self.base.is_some_and(|base| seq < base)
    }
}

/// What became of a finalized sequence number, as the record keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Final {
    Unreported,
    Lost(Side),
    Received(Side),
}

/// The fate and flow of the last W finalized sequence numbers (`base - W .. base`, bit `seq % W`),
/// 3 bits each: so a late arrival can be told from a duplicate, and a late report from the wrong
/// flow refused. Numbers below the first report count as unreported.
#[derive(Clone, Debug, PartialEq)]
struct FinalRecord {
    reported: Box<[u64]>,
    received: Box<[u64]>,
    side_b: Box<[u64]>,
    width: u64,
}

impl FinalRecord {
    fn new(w: usize) -> Self {
        let words = w.div_ceil(64);
        FinalRecord {
            reported: vec![0; words].into_boxed_slice(),
            received: vec![0; words].into_boxed_slice(),
            side_b: vec![0; words].into_boxed_slice(),
            width: w as u64,
        }
    }

    fn bit(&self, seq: u64) -> (usize, u64) {
        let i = seq % self.width;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn set(&mut self, seq: u64, f: Final) {
        let (w, m) = self.bit(seq);
        let (reported, received, b) = match f {
            Final::Unreported => (false, false, false),
            Final::Lost(side) => (true, false, side == Side::B),
            Final::Received(side) => (true, true, side == Side::B),
        };
        for (words, on) in [
            (&mut self.reported, reported),
            (&mut self.received, received),
            (&mut self.side_b, b),
        ] {
            if on {
                words[w] |= m;
            } else {
                words[w] &= !m;
            }
        }
    }

    fn get(&self, seq: u64) -> Final {
        let (w, m) = self.bit(seq);
        let side = if self.side_b[w] & m != 0 {
            Side::B
        } else {
            Side::A
        };
        match (self.reported[w] & m != 0, self.received[w] & m != 0) {
            (false, _) => Final::Unreported,
            (true, false) => Final::Lost(side),
            (true, true) => Final::Received(side),
        }
    }

    fn heap_bytes(&self) -> usize {
        3 * self.reported.len() * core::mem::size_of::<u64>()
    }
}

// ---------------------------------------------------------------------------------------------
// The detector

/// Refuses the one sequence number without a successor.
fn check_seq(seq: u64) -> Result<(), Error> {
    if seq == u64::MAX {
        return Err(invalid(
            "seq",
            seq as f64,
            "a sequence number below 2^64 - 1",
        ));
    }
    Ok(())
}

/// Running totals of the detector's inputs, so nothing is dropped unseen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetectorCounters {
    /// Packet arrivals accepted (every one, duplicates and late ones included).
    pub packets: u64,
    /// Loss reports accepted.
    pub loss_reports: u64,
    /// Arrivals of a packet already received (in the window): not used again.
    pub duplicate_packets: u64,
    /// Loss reports of a packet already reported lost.
    pub duplicate_loss_reports: u64,
    /// Packets reported lost and then received (before being finalized): counted as received.
    pub lost_then_received: u64,
    /// Loss reports of a packet already received: ignored, the arrival wins.
    pub loss_reports_for_received: u64,
    /// Reports of sequence numbers already finalized (late beyond the window, or after the
    /// number's turn came): not used by the loss and delay tests. Arrivals of numbers not
    /// received before still count for the out-of-order test.
    pub after_finalized: u64,
    /// Of `after_finalized`: arrivals of a number finalized as received (network duplicates):
    /// not given to the out-of-order test.
    pub finalized_duplicates: u64,
    /// Of `after_finalized`: reports older than the record of finalized numbers (more than
    /// `reorder_window_pkts` below the window): an arrival cannot be told from a duplicate, nor
    /// its flow checked; not used.
    pub beyond_record: u64,
    /// Sequence numbers finalized with a report (received or lost).
    pub finalized_pkts: u64,
    /// Sequence numbers finalized without any report.
    pub unreported_pkts: u64,
    /// Reported sequence numbers waiting in the window for an earlier one.
    pub pending_pkts: u64,
}

/// The detector's fixed memory: every window's fill and capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUse {
    pub reorder_window_slots: usize,
    /// Finalized sequence numbers whose fate is kept (`reorder_window_pkts`).
    pub finalized_record_pkts: usize,
    /// Occasion start times the out-of-order test keeps (`min_occasions`).
    pub occasion_slots: usize,
    pub delay_samples: usize,
    pub delay_capacity: usize,
    pub asymmetric_loss_trials: usize,
    pub asymmetric_loss_capacity: usize,
    pub symmetric_loss_trials: usize,
    pub symmetric_loss_capacity: usize,
    /// Bytes allocated on the heap, all at construction.
    pub heap_bytes: usize,
}

/// Every test's answer and evidence at one moment: what a caller prints over time.
#[derive(Clone, Debug, PartialEq)]
pub struct Decisions {
    pub asymmetric_loss: LossEvidence,
    pub symmetric_loss: LossEvidence,
    pub delay: DelayEvidence,
    pub out_of_order: OutOfOrderEvidence,
}

impl fmt::Display for Decisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "asymmetric_loss={} symmetric_loss={} delay={} out_of_order={}",
            self.asymmetric_loss.decision,
            self.symmetric_loss.decision,
            self.delay.decision,
            self.out_of_order.decision
        )
    }
}

/// The four tests of sec. 4.1 for one pair of flows (A, B), fed per packet in constant memory.
#[derive(Clone, Debug, PartialEq)]
pub struct FalseSharingDetector {
    config: FalseSharingConfig,
    flows: [FlowId; 2],
    last_now: Instant,
    /// Each flow's first one-way delay: the flow's delays are re-based on it.
    reference_owd_ns: [Option<i64>; 2],
    window: ReorderWindow,
    finalized: FinalRecord,
    asymmetric_loss: LossCorrelationTest,
    symmetric_loss: LossCorrelationTest,
    delay: DelayCorrelationTest,
    out_of_order: OutOfOrderTest,
    counters: DetectorCounters,
}

impl FalseSharingDetector {
    /// A detector for flows `a` and `b` (`a` is the asymmetric loss test's comparison flow),
    /// starting at `start`.
    pub fn new(
        config: FalseSharingConfig,
        a: FlowId,
        b: FlowId,
        start: Instant,
    ) -> Result<Self, Error> {
        config.check()?;
        if a == b {
            return Err(Error::DuplicateFlow(a));
        }
        Ok(FalseSharingDetector {
            config,
            flows: [a, b],
            last_now: start,
            reference_owd_ns: [None, None],
            window: ReorderWindow::new(config.reorder_window_pkts),
            finalized: FinalRecord::new(config.reorder_window_pkts),
            asymmetric_loss: LossCorrelationTest::new(
                LossTestKind::Asymmetric,
                config.asymmetric_loss,
                start,
            ),
            symmetric_loss: LossCorrelationTest::new(
                LossTestKind::Symmetric,
                config.symmetric_loss,
                start,
            ),
            delay: DelayCorrelationTest::new(config.delay, start),
            out_of_order: OutOfOrderTest::new(config.out_of_order, start),
            counters: DetectorCounters::default(),
        })
    }

    pub fn config(&self) -> &FalseSharingConfig {
        &self.config
    }

    /// The same detector, told that the pair's sequence numbers start at `first_seq`: the reorder
    /// window starts there, so the first numbers are used even when a later one is reported first
    /// (the flow whose packets take longer arrives second). Without it the window starts at the
    /// first number reported, and lower numbers reported after are counted as late
    /// ([`DetectorCounters::after_finalized`]). Reports below `first_seq` are late too. Only
    /// before the first report; after, an error naming `first_seq`.
    pub fn starting_at(mut self, first_seq: u64) -> Result<Self, Error> {
        check_seq(first_seq)?;
        if self.window.base.is_some() {
            return Err(invalid(
                "first_seq",
                first_seq as f64,
                "a detector given no report yet",
            ));
        }
        self.window.base = Some(first_seq);
        Ok(self)
    }

    /// The pair (A, B).
    pub fn flows(&self) -> (FlowId, FlowId) {
        (self.flows[0], self.flows[1])
    }

    /// A packet arrived at `now`. Arrivals are taken in the order of the calls (the out-of-order
    /// test's arrival order); the loss and delay tests see packets in sequence order.
    pub fn on_packet(&mut self, now: Instant, pkt: Packet) -> Result<(), Error> {
        let side = self.side_of(pkt.flow)?;
        self.check_time(now)?;
        check_seq(pkt.seq)?;
        let owd = match self.reference_owd_ns[side.index()] {
            Some(first) => {
                let d = i128::from(pkt.owd_ns) - i128::from(first);
                if d.abs() > i128::from(MAX_DELAY_SPREAD_NS) {
                    return Err(invalid(
                        "owd_ns",
                        pkt.owd_ns as f64,
                        "a one-way delay within 2^46 ns (19.5 h) of the flow's first",
                    ));
                }
                d as i64
            }
            None => 0,
        };
        self.check_owner(pkt.seq, side)?;

        // Accepted: from here on nothing fails.
        self.last_now = now;
        self.reference_owd_ns[side.index()].get_or_insert(pkt.owd_ns);
        self.counters.packets += 1;
        if self.window.is_finalized(pkt.seq) {
            self.counters.after_finalized += 1;
            match self.final_of(pkt.seq) {
                // A copy of a packet received before: not reordering (as inside the window).
                Some(Final::Received(_)) => {
                    self.counters.finalized_duplicates += 1;
                    self.out_of_order.advance(now);
                }
                // Not received before: a late packet. Later copies of it are duplicates.
                Some(Final::Lost(_) | Final::Unreported) => {
                    self.finalized.set(pkt.seq, Final::Received(side));
                    self.out_of_order.on_arrival(now, side, pkt.seq);
                }
                None => {
                    self.counters.beyond_record += 1;
                    self.out_of_order.advance(now);
                }
            }
            return Ok(());
        }
        self.admit(now, pkt.seq);
        let i = self.window.index(pkt.seq);
        match self.window.slots[i] {
            Slot::Empty => self.window.pending += 1,
            Slot::Lost { .. } => self.counters.lost_then_received += 1,
            Slot::Received { .. } => {
                // A second copy says nothing about order or delay the first did not.
                self.counters.duplicate_packets += 1;
                self.out_of_order.advance(now);
                return Ok(());
            }
        }
        self.window.slots[i] = Slot::Received { side, owd };
        self.out_of_order.on_arrival(now, side, pkt.seq);
        self.drain(now);
        Ok(())
    }

    /// A packet was found lost, reported at `now`.
    pub fn on_loss(&mut self, now: Instant, loss: LossReport) -> Result<(), Error> {
        let side = self.side_of(loss.flow)?;
        self.check_time(now)?;
        check_seq(loss.seq)?;
        self.check_owner(loss.seq, side)?;

        self.last_now = now;
        self.counters.loss_reports += 1;
        self.out_of_order.advance(now);
        if self.window.is_finalized(loss.seq) {
            self.counters.after_finalized += 1;
            match self.final_of(loss.seq) {
                // The number now belongs to this flow.
                Some(Final::Unreported) => self.finalized.set(loss.seq, Final::Lost(side)),
                Some(_) => {}
                None => self.counters.beyond_record += 1,
            }
            return Ok(());
        }
        self.admit(now, loss.seq);
        let i = self.window.index(loss.seq);
        match self.window.slots[i] {
            Slot::Empty => {
                self.window.pending += 1;
                self.window.slots[i] = Slot::Lost { side };
            }
            Slot::Lost { .. } => self.counters.duplicate_loss_reports += 1,
            // The packet arrived: it was not lost (a spurious loss detection).
            Slot::Received { .. } => self.counters.loss_reports_for_received += 1,
        }
        self.drain(now);
        Ok(())
    }

    /// Finalizes every sequence number up to the highest reported (e.g. at the end of a trace):
    /// the ones never reported are counted as unreported. Returns how many were finalized.
    /// Reports for them that come later are counted in [`DetectorCounters::after_finalized`].
    pub fn flush(&mut self, now: Instant) -> Result<u64, Error> {
        self.check_time(now)?;
        self.last_now = now;
        self.out_of_order.advance(now);
        let (Some(base), Some(highest)) = (self.window.base, self.window.highest) else {
            return Ok(0);
        };
        let n = (highest + 1).saturating_sub(base);
        for _ in 0..n {
            self.finalize_oldest(now);
        }
        Ok(n)
    }

    /// Every test's answer and evidence now.
    pub fn decisions(&self) -> Decisions {
        Decisions {
            asymmetric_loss: self.asymmetric_loss.evidence(),
            symmetric_loss: self.symmetric_loss.evidence(),
            delay: self.delay.evidence(),
            out_of_order: self.out_of_order.evidence(),
        }
    }

    pub fn asymmetric_loss(&self) -> &LossCorrelationTest {
        &self.asymmetric_loss
    }

    pub fn symmetric_loss(&self) -> &LossCorrelationTest {
        &self.symmetric_loss
    }

    pub fn delay(&self) -> &DelayCorrelationTest {
        &self.delay
    }

    pub fn out_of_order(&self) -> &OutOfOrderTest {
        &self.out_of_order
    }

    pub fn counters(&self) -> DetectorCounters {
        DetectorCounters {
            pending_pkts: self.window.pending,
            ..self.counters
        }
    }

    /// Every window's fill and capacity, and the heap bytes they hold (fixed at construction).
    pub fn memory(&self) -> MemoryUse {
        MemoryUse {
            reorder_window_slots: self.window.slots.len(),
            finalized_record_pkts: self.finalized.width as usize,
            occasion_slots: self.out_of_order.config().min_occasions as usize,
            delay_samples: self.delay.window_len(),
            delay_capacity: self.delay.window_capacity(),
            asymmetric_loss_trials: self.asymmetric_loss.window_len(),
            asymmetric_loss_capacity: self.asymmetric_loss.window_capacity(),
            symmetric_loss_trials: self.symmetric_loss.window_len(),
            symmetric_loss_capacity: self.symmetric_loss.window_capacity(),
            heap_bytes: self.window.slots.len() * core::mem::size_of::<Slot>()
                + self.finalized.heap_bytes()
                + self.out_of_order.heap_bytes()
                + self.delay.heap_bytes()
                + self.asymmetric_loss.heap_bytes()
                + self.symmetric_loss.heap_bytes(),
        }
    }

    fn side_of(&self, flow: FlowId) -> Result<Side, Error> {
        if flow == self.flows[0] {
            Ok(Side::A)
        } else if flow == self.flows[1] {
            Ok(Side::B)
        } else {
            Err(Error::UnknownFlow(flow))
        }
    }

    fn check_time(&self, now: Instant) -> Result<(), Error> {
        check_not_before(now, self.last_now)
    }

    /// The recorded fate of a finalized `seq`; None when it is older than the record.
    fn final_of(&self, seq: u64) -> Option<Final> {
        let base = self.window.base?;
        (seq < base && base - seq <= self.finalized.width).then(|| self.finalized.get(seq))
    }

    /// A sequence number belongs to the flow that reported it first, while it waits in the window
    /// and after it was finalized (as far as the record goes back).
    fn check_owner(&self, seq: u64, side: Side) -> Result<(), Error> {
        let owner = match self.final_of(seq) {
            Some(Final::Lost(s) | Final::Received(s)) => Some(s),
            Some(Final::Unreported) | None => self.window.get(seq).and_then(Slot::side),
        };
        match owner {
            Some(owner) if owner != side => Err(invalid(
                "seq",
                seq as f64,
                "a sequence number not already reported for the other flow",
            )),
            _ => Ok(()),
        }
    }

    /// Makes room in the window for `seq` (not finalized yet), finalizing what falls out of it.
    fn admit(&mut self, now: Instant, seq: u64) {
        let base = *self.window.base.get_or_insert(seq);
        debug_assert!(seq >= base);
        self.window.highest = Some(self.window.highest.map_or(seq, |h| h.max(seq)));
        let w = self.window.width();
        if seq - base < w {
            return;
        }
        // The new base is seq - W + 1. Past W finalizations every slot is empty, so the rest are
        // unreported numbers, counted at once: a jump of 10^9 costs O(W), not O(10^9).
        let need = seq - w + 1 - base;
        let one_by_one = need.min(w);
        for _ in 0..one_by_one {
            self.finalize_oldest(now);
        }
        let skipped = need - one_by_one;
        if skipped > 0 {
            self.counters.unreported_pkts += skipped;
            self.dispatch(now, Ordered::Gap);
            let new_base = seq - w + 1;
            // The record's last W numbers: the skipped ones among them are unreported.
            for k in new_base - skipped.min(w)..new_base {
                self.finalized.set(k, Final::Unreported);
            }
            self.window.base = Some(new_base);
        }
    }

    /// Finalizes the window's lowest sequence number, whatever its state.
    fn finalize_oldest(&mut self, now: Instant) {
        let Some(seq) = self.window.base else {
            return;
        };
        let i = self.window.index(seq);
        let slot = core::mem::take(&mut self.window.slots[i]);
        self.window.base = Some(seq + 1);
        self.finalized.set(
            seq,
            match slot {
                Slot::Empty => Final::Unreported,
                Slot::Received { side, .. } => Final::Received(side),
                Slot::Lost { side } => Final::Lost(side),
            },
        );
        let ev = match slot {
            Slot::Empty => {
                self.counters.unreported_pkts += 1;
                Ordered::Gap
            }
            Slot::Received { side, owd } => Ordered::Packet {
                side,
                seq,
                fate: Fate::Received(owd),
            },
            Slot::Lost { side } => Ordered::Packet {
                side,
                seq,
                fate: Fate::Lost,
            },
        };
        if slot != Slot::Empty {
            self.window.pending -= 1;
            self.counters.finalized_pkts += 1;
        }
        self.dispatch(now, ev);
    }

    /// Finalizes the reported prefix of the window: as soon as every earlier number is known.
    fn drain(&mut self, now: Instant) {
        while let Some(base) = self.window.base {
            if self.window.slots[self.window.index(base)] == Slot::Empty {
                break;
            }
            self.finalize_oldest(now);
        }
    }

    fn dispatch(&mut self, now: Instant, ev: Ordered) {
        self.asymmetric_loss.on_ordered(now, ev);
        self.symmetric_loss.on_ordered(now, ev);
        self.delay.on_ordered(now, ev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falseshare_ring_evicts_the_oldest() {
        let mut r: Ring<u32> = Ring::new(3);
        assert_eq!(r.push(1), None);
        assert_eq!(r.push(2), None);
        assert_eq!(r.push(3), None);
        assert_eq!(r.push(4), Some(1));
        assert_eq!(r.push(5), Some(2));
        assert_eq!((r.len(), r.capacity()), (3, 3));
    }

    #[test]
    fn falseshare_ring_reads_oldest_and_newest() {
        let mut r: Ring<u32> = Ring::new(3);
        assert_eq!((r.oldest(), r.newest(), r.iter().count()), (None, None, 0));
        r.push(1);
        assert_eq!((r.oldest(), r.newest()), (Some(1), Some(1)));
        for v in 2..=5 {
            r.push(v);
        }
        assert_eq!((r.oldest(), r.newest()), (Some(3), Some(5)));
        let mut all: Vec<u32> = r.iter().collect();
        all.sort();
        assert_eq!(all, vec![3, 4, 5]);
    }

    #[test]
    fn falseshare_final_record_keeps_fate_and_flow() {
        // 70 numbers: two words per bitset, and numbers W apart share a slot.
        let mut f = FinalRecord::new(70);
        assert_eq!(f.heap_bytes(), 3 * 2 * 8);
        assert_eq!(f.get(5), Final::Unreported);
        f.set(5, Final::Received(Side::B));
        f.set(69, Final::Lost(Side::A));
        f.set(64, Final::Lost(Side::B));
        assert_eq!(f.get(5), Final::Received(Side::B));
        assert_eq!(f.get(75), Final::Received(Side::B), "the same slot");
        assert_eq!(f.get(69), Final::Lost(Side::A));
        assert_eq!(f.get(64), Final::Lost(Side::B));
        f.set(75, Final::Received(Side::A));
        assert_eq!(f.get(5), Final::Received(Side::A));
        f.set(5, Final::Unreported);
        assert_eq!(f.get(5), Final::Unreported);
        assert_eq!(f.get(64), Final::Lost(Side::B), "neighbours untouched");
    }

    #[test]
    fn falseshare_compare_needs_disjoint_intervals() {
        let e = |lo, hi, n| {
            Some(Estimate {
                value: (lo + hi) / 2.0,
                lo,
                hi,
                samples: n,
            })
        };
        assert_eq!(
            compare(e(0.1, 0.3, 10), e(0.4, 0.6, 10), 10),
            Decision::Share
        );
        assert_eq!(
            compare(e(0.4, 0.6, 10), e(0.1, 0.3, 10), 10),
            Decision::NoShare
        );
        assert_eq!(
            compare(e(0.1, 0.4, 10), e(0.4, 0.6, 10), 10),
            Decision::Inconclusive
        );
        assert_eq!(
            compare(e(0.1, 0.3, 9), e(0.4, 0.6, 9), 10),
            Decision::Inconclusive
        );
        assert_eq!(compare(None, e(0.4, 0.6, 10), 1), Decision::Inconclusive);
    }

    #[test]
    fn falseshare_history_keeps_first_times() {
        let mut h = DecisionHistory::new(Instant::from_secs(1));
        h.record(Decision::Inconclusive, Instant::from_secs(2));
        assert_eq!(h.changes, 0);
        h.record(Decision::NoShare, Instant::from_secs(3));
        h.record(Decision::Inconclusive, Instant::from_secs(4));
        h.record(Decision::NoShare, Instant::from_secs(5));
        assert_eq!(h.first_no_share_at, Some(Instant::from_secs(3)));
        assert_eq!(h.since, Instant::from_secs(5));
        assert_eq!(h.changes, 3);
        assert_eq!(
            h.detection_time(Decision::NoShare),
            Some(Duration::from_secs(2))
        );
        assert_eq!(h.detection_time(Decision::Share), None);
    }
}
