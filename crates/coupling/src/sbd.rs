//! Shared Bottleneck Detection (SBD) from one-way delay and loss: RFC 8382, as pure streaming
//! logic (no I/O, no clock; time is passed in).
//!
//! Two halves, as the RFC splits them (sec. 3.1.2: statistics at the receiver, grouping wherever
//! the decision is needed):
//!
//! - [`FlowStats`]: one per flow, fed every received packet's one-way delay (OWD) and every loss.
//!   At each base interval T it closes the interval's summary (E\[OWD\], skew_base_T, var_base_T,
//!   the significant mean crossing, received and lost counts) into a ring of the last N intervals
//!   and derives the summary statistics of sec. 3.2: `skew_est`, `var_est`, `freq_est`,
//!   `pkt_loss` ([`FlowSummary`]). Memory per flow is fixed at construction (N interval records).
//! - [`SbdGrouper`]: given the summaries of K flows at one instant, the grouping algorithm of
//!   sec. 3.3.1: congested or not (with the c_h hysteresis kept per flow), then divide by
//!   `freq_est`, `var_est`, and `skew_est` (or `pkt_loss` under high loss). [`SbdGrouping`] gives the
//!   groups and the statistics behind every decision.
//!
//! Provenance: only the RFC's front page could be read when this was written. The formulas,
//! defaults and section numbers below follow RFC 8382 as recalled, cross-checked against the
//! authors' published reference code (the MPTCP kernel SBD and its Python companion: c_s = -0.01,
//! c_h = 0.3, p_l = p_f = p_mad = p_d = 0.1, p_s = 0.15, p_v = 0.7, T = 350 ms, N = 50). Re-check
//! them against the RFC text before relying on them.
//!
//! # Where the text leaves a choice (each one tested in `tests/sbd.rs`)
//!
//! - Intervals are half-open, `[start + kT, start + (k+1)T)`, aligned to the `start` given to
//!   [`FlowStats::new`]; they close automatically when an observation (or [`FlowStats::advance`])
//!   reaches the boundary. A loss is counted in the interval in which it is reported.
//! - sec. 3.2.3 computes var_base_T from |OWD - E\[OWD\]| online; the current interval's E\[OWD\] is
//!   not known until it ends (keeping its samples would make memory grow with the send rate), so
//!   the reference is the *previous* interval's E\[OWD\]. The sum is divided by the
//!   samples that had a reference, and likewise skew_est by the samples that had a mean_delay to
//!   compare with (num_MT of sec. 3.2.2); the two differ from "all samples" only before the first
//!   E\[OWD\] exists (and after a silence that restarts the statistics, below), and the samples
//!   without a reference are counted ([`FlowCounters`]).
//! - Gaps: an interval without OWD samples has no E\[OWD\]. It still takes a slot of the ring (so
//!   freq_est = crossings / N keeps its time base and stale losses age out), mean_delay averages
//!   the E\[OWD\] that exist among the last M intervals, and the variability reference stays the
//!   last E\[OWD\] seen (until a silence restarts the statistics, below). Empty intervals are counted. A silence of more than N intervals is closed in
//!   O(N) (the ring is all empty after N of them), not one step per interval.
//! - A silence that leaves mean_delay undefined (M empty intervals in a row) restarts the
//!   statistics: the variability reference (the last E\[OWD\]), the side of the last significant
//!   excursion and the warm-up count are forgotten with it, so the first excursion after the
//!   restart only sets the side (it is not a crossing) and the first interval after it has no
//!   variability reference. A shorter gap keeps all three.
//! - A significant mean crossing (sec. 3.2.4): E\[OWD\] lies more than p_v * var_est above (below)
//!   mean_delay while the previous significant excursion was below (above) it; both mean_delay
//!   and var_est are the values from before the interval (mean_delay "does not include the mean
//!   of the current T interval", sec. 3.2.2). The first significant excursion only sets the side.
//! - pkt_loss = lost / (received + lost) over the last N intervals ("total packets", sec. 3.2.5).
//! - Grouping: a difference "greater than" the threshold splits (equal stays together); the
//!   relative thresholds p_mad and p_d are taken of the larger of the two consecutive values; a
//!   group is divided by pkt_loss instead of skew_est when any of its flows has pkt_loss > p_l.
//! - Warm-up: sec. 3.3.2 recommends no grouping decision before 2*M T intervals. Those are
//!   counted as intervals *with OWD samples* since the flow's mean_delay last became defined
//!   ([`FlowSummary::data_intervals`]): empty intervals before a flow's first packet, or during a
//!   silence, are no history (a flow created long before it sends would otherwise be grouped on
//!   one or two intervals of data), and a silence that undefines mean_delay restarts the count
//!   (above). Since freq_est and pkt_loss are taken over N intervals, the warm-up is
//!   max(2*M, N) such intervals ([`SbdConfig::warmup_intervals`]; 2*M = 60 with the defaults),
//!   so no decision uses a part-filled N window. Flows short of it, or without a single compared
//!   OWD sample in the M window, are reported in [`SbdGrouping::insufficient_data`]; no decision
//!   is made for them and their hysteresis state is left as it was. (Short gaps inside the
//!   warm-up still take slots of the N window, as above.)
//! - OWD need only be relative (sec. 4: clock offsets cancel). Samples are re-based internally
//!   on the flow's first sample, so the statistics are bit-identical under any clock offset and
//!   the f64 arithmetic works on small numbers; |OWD| is limited to [`MAX_ABS_OWD_NS`] so every
//!   difference is exact in f64 (sec. 3.2.2 asks that rounding not bias the comparisons).
//!
//! Not implemented: the noise filter of sec. 3.4.1 (marking var_base_T invalid for intervals in
//! which the flow is not congested), and the piecewise-linear weighting of sec. 3.5 (parameter
//! F). Both are optional refinements; the statistics here are the plain sums of sec. 3.2.

use crate::error::Error;
use crate::group::FlowId;
use crate::units::{check_not_before, Duration, Instant};
use std::collections::BTreeSet;

/// The largest |OWD| accepted, in nanoseconds: 2^52 ns (about 52 days). Differences of two
/// accepted samples stay within 2^53 and are exact in f64.
pub const MAX_ABS_OWD_NS: i64 = 1 << 52;

/// The largest N accepted: the ring of N interval records is allocated up front.
pub const MAX_N_INTERVALS: usize = 1 << 16;

/// The mechanism's parameters (RFC 8382 sec. 2.1) with the recommended values of sec. 2.2 as
/// [`Default`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SbdConfig {
    /// T: the base time interval over which measurements are made (sec. 2.1). Default 350 ms.
    pub t: Duration,
    /// N: the number of T intervals over which freq_est and pkt_loss are taken, and the length of
    /// the history ring (sec. 2.1, 3.2.4, 3.2.5). Default 50.
    pub n: usize,
    /// M (<= N): the number of T intervals over which mean_delay, skew_est and var_est are taken
    /// (sec. 2.1, 3.2.1-3.2.3). Default 30.
    pub m: usize,
    /// c_s: the skewness threshold below which a flow is congested (sec. 3.3.1 step 1).
    /// Default -0.01.
    pub c_s: f64,
    /// c_h: the hysteresis threshold: a flow found congested stays so while skew_est < c_h
    /// (sec. 3.3.1 step 1). Default 0.3.
    pub c_h: f64,
    /// p_l: the packet-loss fraction above which a flow is congested whatever its skew, and
    /// above which a group is divided by pkt_loss instead of skew_est (sec. 3.3.1). Default 0.1.
    pub p_l: f64,
    /// p_f: the absolute freq_est difference that divides groups (sec. 3.3.1 step 2). Default 0.1.
    pub p_f: f64,
    /// p_mad: the relative var_est difference that divides groups (sec. 3.3.1 step 3). Default 0.1.
    pub p_mad: f64,
    /// p_d: the relative pkt_loss difference that divides high-loss groups (sec. 3.3.1 step 4).
    /// Default 0.1.
    pub p_d: f64,
    /// p_s: the absolute skew_est difference that divides groups (sec. 3.3.1 step 4). Default 0.15.
    pub p_s: f64,
    /// p_v: a mean crossing is significant when E\[OWD\] leaves mean_delay by more than
    /// p_v * var_est (sec. 3.2.4). Default 0.7.
    pub p_v: f64,
}

impl Default for SbdConfig {
    fn default() -> Self {
        SbdConfig {
            t: Duration::from_millis(350),
            n: 50,
            m: 30,
            c_s: -0.01,
            c_h: 0.3,
            p_l: 0.1,
            p_f: 0.1,
            p_mad: 0.1,
            p_d: 0.1,
            p_s: 0.15,
            p_v: 0.7,
        }
    }
}

fn invalid(field: &'static str, value: f64, expected: &'static str) -> Error {
    Error::InvalidValue {
        field,
        value,
        expected,
    }
}

/// A finite value in `lo..=hi`.
fn check_range(
    field: &'static str,
    v: f64,
    lo: f64,
    hi: f64,
    expected: &'static str,
) -> Result<(), Error> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(invalid(field, v, expected))
    }
}

/// A finite value >= 0.
fn check_nonneg(field: &'static str, v: f64, expected: &'static str) -> Result<(), Error> {
    check_range(field, v, 0.0, f64::MAX, expected)
}

impl SbdConfig {
    /// Validates every parameter; the first bad one is named in the error.
    pub fn check(&self) -> Result<(), Error> {
        if self.t == Duration::ZERO {
            return Err(invalid("t", self.t.as_secs_f64(), "a base interval T > 0"));
        }
        if !(2..=MAX_N_INTERVALS).contains(&self.n) {
            return Err(invalid("n", self.n as f64, "N in 2..=65536 T intervals"));
        }
        if !(1..=self.n).contains(&self.m) {
            return Err(invalid("m", self.m as f64, "M in 1..=N T intervals"));
        }
        // skew_est lies in [-1, 1] (sec. 3.2.2), so thresholds outside it are meaningless.
        check_range("c_s", self.c_s, -1.0, 1.0, "a skewness threshold in -1..=1")?;
        // The hysteresis keeps a congested flow congested longer, so it must not lie below c_s.
        check_range(
            "c_h",
            self.c_h,
            self.c_s,
            1.0,
            "a hysteresis threshold in c_s..=1",
        )?;
        check_range("p_l", self.p_l, 0.0, 1.0, "a loss fraction in 0..=1")?;
        check_nonneg("p_f", self.p_f, "a finite freq_est difference >= 0")?;
        check_nonneg("p_mad", self.p_mad, "a finite relative difference >= 0")?;
        check_nonneg("p_d", self.p_d, "a finite relative difference >= 0")?;
        check_nonneg("p_s", self.p_s, "a finite skew_est difference >= 0")?;
        check_nonneg("p_v", self.p_v, "a finite multiple of var_est >= 0")?;
        Ok(())
    }

    /// The number of T intervals with OWD samples ([`FlowSummary::data_intervals`]) before
    /// grouping decisions are made: max(2*M, N). RFC 8382 sec. 3.3.2: "we recommend that grouping
    /// decisions are not made until 2*M T intervals"; until then mean_delay, and the comparisons
    /// made against it, are still filling. freq_est and pkt_loss are taken over N intervals, so
    /// with N > 2*M the warm-up also waits for the N window to fill (freq_est = crossings / N
    /// would otherwise be biased low). 60 with the defaults (2*M = 60 > N = 50).
    pub fn warmup_intervals(&self) -> u64 {
        (2 * self.m as u64).max(self.n as u64)
    }
}

/// The summary of one closed T interval, as kept in the history ring.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IntervalRecord {
    /// Packets received (OWD samples) in the interval.
    pub received_pkts: u64,
    /// Packets reported lost in the interval.
    pub lost_pkts: u64,
    /// E\[OWD\], the interval's mean OWD (sec. 3.2.1); `None` for an interval without samples.
    pub mean_owd_ns: Option<f64>,
    /// skew_base_T: samples below mean_delay minus samples above it (sec. 3.2.2).
    pub skew_base: i64,
    /// Samples compared with mean_delay (all but those before any mean_delay existed).
    pub skew_samples: u64,
    /// var_base_T: the sum of |OWD - E\[OWD\] of the previous interval| (sec. 3.2.3).
    pub var_base_ns: f64,
    /// Samples that had a previous E\[OWD\] to deviate from.
    pub var_samples: u64,
    /// Whether E\[OWD\] made a significant mean crossing (sec. 3.2.4).
    pub crossing: bool,
}

/// A flow's summary statistics after its last closed T interval (RFC 8382 sec. 3.2): the input of
/// the grouping. Fields are public so that summaries computed elsewhere (e.g. reported by a
/// receiver, sec. 3.1.2) can be grouped; [`SbdGrouper::group`] validates them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowSummary {
    /// skew_est = sum_MT(skew_base_T) / num_MT, in -1..=1 (sec. 3.2.2). Negative: most samples lie
    /// above the mean, the queue is mostly full; positive: mostly below, the queue mostly empty.
    pub skew_est: f64,
    /// var_est = sum_MT(var_base_T) / num_MT, the mean absolute deviation in ns (sec. 3.2.3).
    pub var_est_ns: f64,
    /// freq_est = number_of_crossings / N, significant mean crossings per T interval, in 0..=1
    /// (sec. 3.2.4).
    pub freq_est: f64,
    /// pkt_loss = sum_NT(lost) / sum_NT(total packets), in 0..=1 (sec. 3.2.5).
    pub pkt_loss: f64,
    /// mean_delay = the mean of E\[OWD\] over the last M intervals (sec. 3.2.1), in the caller's
    /// (relative) OWD time base; `None` while no interval of the M window has a sample.
    pub mean_delay_ns: Option<f64>,
    /// T intervals closed since the flow started (including empty ones).
    pub intervals_closed: u64,
    /// T intervals with OWD samples closed since mean_delay last became defined: reset to 0 when a
    /// silence leaves mean_delay undefined. The warm-up of [`SbdConfig::warmup_intervals`]
    /// counts these.
    pub data_intervals: u64,
    /// num_MT: the samples behind skew_est (compared with a mean_delay in the last M intervals).
    pub skew_samples: u64,
}

impl FlowSummary {
    /// Checks every statistic is a number in its domain.
    pub fn check(&self) -> Result<(), Error> {
        check_range("skew_est", self.skew_est, -1.0, 1.0, "a skewness in -1..=1")?;
        check_nonneg(
            "var_est_ns",
            self.var_est_ns,
            "a finite deviation in ns >= 0",
        )?;
        check_range(
            "freq_est",
            self.freq_est,
            0.0,
            1.0,
            "crossings per interval in 0..=1",
        )?;
        check_range(
            "pkt_loss",
            self.pkt_loss,
            0.0,
            1.0,
            "a loss fraction in 0..=1",
        )?;
        if let Some(md) = self.mean_delay_ns {
            check_range(
                "mean_delay_ns",
                md,
                f64::MIN,
                f64::MAX,
                "a finite delay in ns",
            )?;
        }
        Ok(())
    }
}

/// Running totals of a flow's inputs, so nothing is dropped unseen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCounters {
    pub received_pkts: u64,
    pub lost_pkts: u64,
    pub intervals_closed: u64,
    /// Closed intervals without a single OWD sample (gaps).
    pub empty_intervals: u64,
    /// Samples received while no mean_delay existed: not counted in any skew_base_T.
    pub samples_without_mean_delay: u64,
    /// Samples received while no previous E\[OWD\] existed (before the first, or after a silence
    /// that left mean_delay undefined): not counted in any var_base_T.
    pub samples_without_previous_mean: u64,
}

/// Which side of mean_delay the last significant excursion of E\[OWD\] went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Above,
    Below,
}

/// The open interval's running sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Accumulator {
    received_pkts: u64,
    lost_pkts: u64,
    /// Sum of re-based OWDs: exact (|x| < 2^53, so 2^75 samples would be needed to overflow).
    owd_sum_ns: i128,
    skew_base: i64,
    skew_samples: u64,
    var_base_ns: f64,
    var_samples: u64,
}

/// A fixed-size ring of the last N closed intervals: the RFC's "cyclic buffer" (sec. 3.2.1, 3.2.4).
/// Allocated once; pushing past N overwrites the oldest.
#[derive(Clone, Debug, PartialEq)]
struct Ring {
    buf: Box<[IntervalRecord]>,
    /// Where the next record goes.
    next: usize,
    len: usize,
}

impl Ring {
    fn new(n: usize) -> Self {
        Ring {
            buf: vec![IntervalRecord::default(); n].into_boxed_slice(),
            next: 0,
            len: 0,
        }
    }

    fn push(&mut self, r: IntervalRecord) {
        self.buf[self.next] = r;
        self.next = (self.next + 1) % self.buf.len();
        self.len = (self.len + 1).min(self.buf.len());
    }

    /// The last `k` records, newest first.
    fn recent(&self, k: usize) -> impl Iterator<Item = &IntervalRecord> {
        let cap = self.buf.len();
        (1..=k.min(self.len)).map(move |i| &self.buf[(self.next + cap - i) % cap])
    }
}

/// Per-flow receiver-side statistics of RFC 8382 sec. 3.2, fed per packet, in constant memory.
///
/// Statistics refer to the last *closed* interval; the open one only accumulates.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowStats {
    config: SbdConfig,
    /// End of the open interval.
    interval_end: Instant,
    /// The latest time passed in.
    last_now: Instant,
    /// The flow's first OWD: every sample is re-based on it (OWD is only relative, sec. 4).
    reference_owd_ns: Option<i64>,
    acc: Accumulator,
    ring: Ring,
    /// mean_delay over the last M closed intervals, re-based: what the open interval's samples are
    /// compared with (sec. 3.2.2).
    mean_delay: Option<f64>,
    /// E\[OWD\] of the last interval that had samples, re-based: the var_base_T reference.
    previous_mean: Option<f64>,
    last_side: Option<Side>,
    /// Intervals with samples since mean_delay last became defined (the warm-up count).
    data_intervals: u64,
    summary: FlowSummary,
    counters: FlowCounters,
}

impl FlowStats {
    /// A flow whose first interval starts at `start`.
    pub fn new(config: SbdConfig, start: Instant) -> Result<Self, Error> {
        config.check()?;
        Ok(FlowStats {
            config,
            interval_end: start + config.t,
            last_now: start,
            reference_owd_ns: None,
            acc: Accumulator::default(),
            ring: Ring::new(config.n),
            mean_delay: None,
            previous_mean: None,
            last_side: None,
            data_intervals: 0,
            summary: FlowSummary::default(),
            counters: FlowCounters::default(),
        })
    }

    pub fn config(&self) -> &SbdConfig {
        &self.config
    }

    /// A packet received at `now` with one-way delay `owd_ns` (relative: any clock offset, even a
    /// negative OWD, is fine). Closes the intervals that ended before `now` first.
    pub fn on_packet(&mut self, now: Instant, owd_ns: i64) -> Result<(), Error> {
        if !(-MAX_ABS_OWD_NS..=MAX_ABS_OWD_NS).contains(&owd_ns) {
            return Err(invalid(
                "owd_ns",
                owd_ns as f64,
                "a relative one-way delay in -2^52..=2^52 ns",
            ));
        }
        self.check_time(now)?;
        self.advance_unchecked(now);
        let reference = *self.reference_owd_ns.get_or_insert(owd_ns);
        // Both within 2^52 of zero, so the difference is exact in i64 and in f64.
        let x = owd_ns - reference;
        let xf = x as f64;
        let a = &mut self.acc;
        a.received_pkts += 1;
        a.owd_sum_ns += i128::from(x);
        self.counters.received_pkts += 1;
        // sec. 3.2.2: "if (OWD < mean_delay) skew_base_T++; if (OWD > mean_delay) skew_base_T--".
        match self.mean_delay {
            Some(md) => {
                if xf < md {
                    a.skew_base += 1;
                } else if xf > md {
                    a.skew_base -= 1;
                }
                a.skew_samples += 1;
            }
            None => self.counters.samples_without_mean_delay += 1,
        }
        // sec. 3.2.3: var_base_T = sum_T(|OWD - E[OWD]|), E[OWD] of the previous interval.
        match self.previous_mean {
            Some(e) => {
                a.var_base_ns += (xf - e).abs();
                a.var_samples += 1;
            }
            None => self.counters.samples_without_previous_mean += 1,
        }
        Ok(())
    }

    /// `lost_pkts` packets found lost at `now` (counted in the interval open at `now`).
    pub fn on_loss(&mut self, now: Instant, lost_pkts: u64) -> Result<(), Error> {
        self.check_time(now)?;
        self.advance_unchecked(now);
        self.acc.lost_pkts = self.acc.lost_pkts.saturating_add(lost_pkts);
        self.counters.lost_pkts = self.counters.lost_pkts.saturating_add(lost_pkts);
        Ok(())
    }

    /// Closes every interval that ended at or before `now`; returns how many were closed.
    pub fn advance(&mut self, now: Instant) -> Result<u64, Error> {
        self.check_time(now)?;
        Ok(self.advance_unchecked(now))
    }

    /// The summary statistics as of the last closed interval.
    pub fn summary(&self) -> FlowSummary {
        self.summary
    }

    /// The most recently closed interval, in the caller's OWD time base.
    pub fn last_interval(&self) -> Option<IntervalRecord> {
        self.ring.recent(1).next().map(|r| IntervalRecord {
            mean_owd_ns: r.mean_owd_ns.map(|e| self.absolute(e)),
            ..*r
        })
    }

    pub fn counters(&self) -> FlowCounters {
        self.counters
    }

    /// The end of the open interval.
    pub fn current_interval_end(&self) -> Instant {
        self.interval_end
    }

    /// Closed intervals held in the history ring (at most N).
    pub fn history_len(&self) -> usize {
        self.ring.len
    }

    /// The history ring's fixed capacity (N).
    pub fn history_capacity(&self) -> usize {
        self.ring.buf.len()
    }

    fn check_time(&self, now: Instant) -> Result<(), Error> {
        check_not_before(now, self.last_now)
    }

    fn absolute(&self, rebased: f64) -> f64 {
        rebased + self.reference_owd_ns.unwrap_or(0) as f64
    }

    fn advance_unchecked(&mut self, now: Instant) -> u64 {
        self.last_now = now;
        if now < self.interval_end {
            return 0;
        }
        let t_ns = self.config.t.as_nanos();
        let k = (now.as_nanos() - self.interval_end.as_nanos()) / t_ns + 1;
        let acc = std::mem::take(&mut self.acc);
        self.close_interval(acc);
        // The rest are empty. After N of them the ring holds nothing else, so further empty
        // intervals change no state but the counters.
        let empties = k - 1;
        for _ in 0..empties.min(self.config.n as u64) {
            self.close_interval(Accumulator::default());
        }
        let skipped = empties.saturating_sub(self.config.n as u64);
        self.counters.intervals_closed += skipped;
        self.counters.empty_intervals += skipped;
        self.summary.intervals_closed = self.counters.intervals_closed;
        self.interval_end = self.interval_end + self.config.t.saturating_mul(k);
        k
    }

    fn close_interval(&mut self, a: Accumulator) {
        // E[OWD] (sec. 3.2.1), as quotient plus exact remainder: the mean keeps more precision
        // than the samples, as sec. 3.2.2 asks, instead of rounding the sum to f64 first.
        let mean = (a.received_pkts > 0).then(|| {
            let n = i128::from(a.received_pkts);
            let (q, r) = (a.owd_sum_ns.div_euclid(n), a.owd_sum_ns.rem_euclid(n));
            q as f64 + r as f64 / n as f64
        });
        // sec. 3.2.4: a significant mean crossing, judged against the mean_delay and var_est from
        // before this interval.
        let mut crossing = false;
        if let (Some(e), Some(md)) = (mean, self.mean_delay) {
            let band = self.config.p_v * self.summary.var_est_ns;
            let side = if e > md + band {
                Some(Side::Above)
            } else if e < md - band {
                Some(Side::Below)
            } else {
                None
            };
            if let Some(s) = side {
                crossing = self.last_side.is_some_and(|last| last != s);
                self.last_side = Some(s);
            }
        }
        self.ring.push(IntervalRecord {
            received_pkts: a.received_pkts,
            lost_pkts: a.lost_pkts,
            mean_owd_ns: mean,
            skew_base: a.skew_base,
            skew_samples: a.skew_samples,
            var_base_ns: a.var_base_ns,
            var_samples: a.var_samples,
            crossing,
        });
        if mean.is_some() {
            self.previous_mean = mean;
            self.data_intervals += 1;
        } else {
            self.counters.empty_intervals += 1;
        }
        self.counters.intervals_closed += 1;
        self.recompute();
        if self.mean_delay.is_none() {
            // No E[OWD] in the last M intervals (only an empty interval gets here): the silence
            // restarts the statistics. The crossing side, the variability reference and the
            // warm-up start afresh with the next samples.
            self.last_side = None;
            self.previous_mean = None;
            self.data_intervals = 0;
            self.summary.data_intervals = 0;
        }
    }

    /// Recomputes mean_delay and the summary from the ring: O(N) once per interval, exact and free
    /// of the drift a running sum of f64 would accumulate.
    fn recompute(&mut self) {
        let (m, n) = (self.config.m, self.config.n);
        // sec. 3.2.1: mean_delay = sum_MT(E[OWD]) / M, over the intervals that have an E[OWD].
        let (mut e_sum, mut e_count) = (0.0, 0u32);
        let (mut skew_sum, mut skew_n) = (0i128, 0u64);
        let (mut var_sum, mut var_n) = (0.0, 0u64);
        for r in self.ring.recent(m) {
            if let Some(e) = r.mean_owd_ns {
                e_sum += e;
                e_count += 1;
            }
            skew_sum += i128::from(r.skew_base);
            skew_n += r.skew_samples;
            var_sum += r.var_base_ns;
            var_n += r.var_samples;
        }
        self.mean_delay = (e_count > 0).then(|| e_sum / f64::from(e_count));
        // sec. 3.2.4 and 3.2.5: over the last N intervals.
        let (mut crossings, mut lost, mut received) = (0u32, 0u128, 0u128);
        for r in self.ring.recent(n) {
            crossings += u32::from(r.crossing);
            lost += u128::from(r.lost_pkts);
            received += u128::from(r.received_pkts);
        }
        let total = lost + received;
        self.summary = FlowSummary {
            // sec. 3.2.2: skew_est = sum_MT(skew_base_T) / num_MT.
            skew_est: if skew_n > 0 {
                skew_sum as f64 / skew_n as f64
            } else {
                0.0
            },
            // sec. 3.2.3: var_est = sum_MT(var_base_T) / num_MT.
            var_est_ns: if var_n > 0 {
                var_sum / var_n as f64
            } else {
                0.0
            },
            // sec. 3.2.4: freq_est = number_of_crossings / N.
            freq_est: f64::from(crossings) / n as f64,
            // sec. 3.2.5: pkt_loss = sum_NT(lost packets) / sum_NT(total packets).
            pkt_loss: if total > 0 {
                lost as f64 / total as f64
            } else {
                0.0
            },
            mean_delay_ns: self.mean_delay.map(|md| self.absolute(md)),
            intervals_closed: self.counters.intervals_closed,
            data_intervals: self.data_intervals,
            skew_samples: skew_n,
        };
    }
}

/// Why step 1 of the grouping (RFC 8382 sec. 3.3.1) found a flow congested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionReason {
    /// skew_est < c_s.
    Skew,
    /// The flow was congested at the previous decision and c_s <= skew_est < c_h.
    Hysteresis,
    /// pkt_loss > p_l (with skew_est giving no congestion on its own).
    Loss,
}

/// The statistic a division was made on (RFC 8382 sec. 3.3.1 steps 2-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitStep {
    /// Step 2: |difference| > p_f.
    FreqEst,
    /// Step 3: |difference| > p_mad * the larger var_est.
    VarEst,
    /// Step 4: |difference| > p_s.
    SkewEst,
    /// Step 4 for a group with a flow above p_l: |difference| > p_d * the larger pkt_loss.
    PktLoss,
}

/// One division: the flows on either side of the cut in the sorted order, their values and the
/// threshold (in the statistic's units) their difference exceeded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    pub step: SplitStep,
    pub below: FlowId,
    pub above: FlowId,
    pub below_value: f64,
    pub above_value: f64,
    pub threshold: f64,
}

/// The grouping of one decision. Every flow given appears in exactly one of `groups`,
/// `not_congested` and `insufficient_data`. Flow lists are sorted by id, groups by their first id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SbdGrouping {
    /// Congested flows divided into groups that share a bottleneck.
    pub groups: Vec<Vec<FlowId>>,
    /// Flows not experiencing congestion (step 1): SBD says nothing about what they share.
    pub not_congested: Vec<FlowId>,
    /// Flows with too little history for a decision (see the module docs).
    pub insufficient_data: Vec<FlowId>,
    /// Why each congested flow was found congested.
    pub congested: Vec<(FlowId, CongestionReason)>,
    /// The divisions made, in the order steps 2-4 made them.
    pub splits: Vec<Split>,
}

impl SbdGrouping {
    /// The index in `groups` of the group holding `flow`.
    pub fn group_of(&self, flow: FlowId) -> Option<usize> {
        self.groups
            .iter()
            .position(|g| g.binary_search(&flow).is_ok())
    }

    /// Whether both flows are congested and in the same group.
    pub fn together(&self, a: FlowId, b: FlowId) -> bool {
        matches!((self.group_of(a), self.group_of(b)), (Some(x), Some(y)) if x == y)
    }
}

/// The grouping algorithm of RFC 8382 sec. 3.3.1, with the per-flow hysteresis state of step 1.
///
/// Memory grows with the number of distinct flows found congested, not with time: call
/// [`SbdGrouper::forget`] when a flow ends.
#[derive(Clone, Debug, PartialEq)]
pub struct SbdGrouper {
    config: SbdConfig,
    /// Flows found congested at their last decision (the "previously congested" of step 1).
    congested: BTreeSet<FlowId>,
}

type Entry = (FlowId, FlowSummary);

impl SbdGrouper {
    pub fn new(config: SbdConfig) -> Result<Self, Error> {
        config.check()?;
        Ok(SbdGrouper {
            config,
            congested: BTreeSet::new(),
        })
    }

    pub fn config(&self) -> &SbdConfig {
        &self.config
    }

    /// Whether the flow was found congested at its last decision.
    pub fn was_congested(&self, flow: FlowId) -> bool {
        self.congested.contains(&flow)
    }

    /// Drops the flow's hysteresis state; returns whether it had any.
    pub fn forget(&mut self, flow: FlowId) -> bool {
        self.congested.remove(&flow)
    }

    /// Groups the flows from their summaries taken at one instant. Every summary is validated,
    /// and ids must be distinct, before any state changes.
    pub fn group(&mut self, flows: &[Entry]) -> Result<SbdGrouping, Error> {
        let mut seen = BTreeSet::new();
        for (id, s) in flows {
            if !seen.insert(*id) {
                return Err(Error::DuplicateFlow(*id));
            }
            s.check()?;
        }
        let c = self.config;
        let mut sorted: Vec<Entry> = flows.to_vec();
        sorted.sort_by_key(|(id, _)| *id);

        let mut out = SbdGrouping::default();
        let mut candidates: Vec<Entry> = Vec::new();
        for (id, s) in sorted {
            if s.data_intervals < c.warmup_intervals() || s.skew_samples == 0 {
                out.insufficient_data.push(id);
                continue;
            }
            // Step 1: is the flow experiencing congestion? skew_est below c_s; or, with the
            // hysteresis, below c_h for a flow congested last time; or loss above p_l.
            let reason = if s.skew_est < c.c_s {
                Some(CongestionReason::Skew)
            } else if self.congested.contains(&id) && s.skew_est < c.c_h {
                Some(CongestionReason::Hysteresis)
            } else if s.pkt_loss > c.p_l {
                Some(CongestionReason::Loss)
            } else {
                None
            };
            match reason {
                Some(why) => {
                    out.congested.push((id, why));
                    candidates.push((id, s));
                }
                None => out.not_congested.push(id),
            }
        }
        // The decisions are made; only now record them for the next hysteresis test.
        for (id, _) in &out.congested {
            self.congested.insert(*id);
        }
        for id in &out.not_congested {
            self.congested.remove(id);
        }

        // Step 2: divide by freq_est; step 3: divide each group by var_est; step 4: divide each
        // group by skew_est, or by pkt_loss if the group has a flow with high loss.
        let mut groups = vec![candidates];
        groups = divide_all(groups, &mut out.splits, |_| SplitStep::FreqEst, &c);
        groups = divide_all(groups, &mut out.splits, |_| SplitStep::VarEst, &c);
        groups = divide_all(
            groups,
            &mut out.splits,
            |g| {
                if g.iter().any(|(_, s)| s.pkt_loss > c.p_l) {
                    SplitStep::PktLoss
                } else {
                    SplitStep::SkewEst
                }
            },
            &c,
        );
        out.groups = groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|g| {
                let mut ids: Vec<FlowId> = g.into_iter().map(|(id, _)| id).collect();
                ids.sort();
                ids
            })
            .collect();
        out.groups.sort();
        Ok(out)
    }
}

/// The statistic a step sorts on.
fn key(step: SplitStep, s: &FlowSummary) -> f64 {
    match step {
        SplitStep::FreqEst => s.freq_est,
        SplitStep::VarEst => s.var_est_ns,
        SplitStep::SkewEst => s.skew_est,
        SplitStep::PktLoss => s.pkt_loss,
    }
}

/// The difference two consecutive sorted values (`lo <= hi`) must exceed to be divided.
fn threshold(step: SplitStep, hi: f64, c: &SbdConfig) -> f64 {
    match step {
        SplitStep::FreqEst => c.p_f,
        SplitStep::VarEst => c.p_mad * hi,
        SplitStep::SkewEst => c.p_s,
        SplitStep::PktLoss => c.p_d * hi,
    }
}

/// Sorts each group by the step's statistic (ties by id, so the result does not depend on the
/// input order) and cuts it wherever consecutive values differ by more than the threshold.
fn divide_all(
    groups: Vec<Vec<Entry>>,
    splits: &mut Vec<Split>,
    step_of: impl Fn(&[Entry]) -> SplitStep,
    c: &SbdConfig,
) -> Vec<Vec<Entry>> {
    let mut out = Vec::new();
    for mut g in groups {
        if g.len() < 2 {
            out.push(g);
            continue;
        }
        let step = step_of(&g);
        g.sort_by(|(ia, a), (ib, b)| key(step, a).total_cmp(&key(step, b)).then(ia.cmp(ib)));
        let mut current = vec![g[0]];
        for pair in g.windows(2) {
            let ((lo_id, lo), (hi_id, hi)) = (pair[0], pair[1]);
            let (lo_v, hi_v) = (key(step, &lo), key(step, &hi));
            let thr = threshold(step, hi_v, c);
            if hi_v - lo_v > thr {
                splits.push(Split {
                    step,
                    below: lo_id,
                    above: hi_id,
                    below_value: lo_v,
                    above_value: hi_v,
                    threshold: thr,
                });
                out.push(std::mem::take(&mut current));
            }
            current.push(pair[1]);
        }
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbd_ring_keeps_the_newest_n() {
        let mut r = Ring::new(3);
        for i in 0..5u64 {
            r.push(IntervalRecord {
                received_pkts: i,
                ..IntervalRecord::default()
            });
        }
        let newest: Vec<u64> = r.recent(10).map(|x| x.received_pkts).collect();
        assert_eq!(newest, vec![4, 3, 2]);
        assert_eq!(r.recent(2).count(), 2);
        assert_eq!((r.len, r.buf.len()), (3, 3));
    }

    #[test]
    fn sbd_thresholds_are_strict() {
        let c = SbdConfig {
            p_s: 0.25,
            ..SbdConfig::default()
        };
        // 0.25 is exact in binary: a difference equal to p_s does not divide.
        let s = |skew| FlowSummary {
            skew_est: skew,
            ..FlowSummary::default()
        };
        let g = vec![
            (FlowId(1), s(-0.5)),
            (FlowId(2), s(-0.25)),
            (FlowId(3), s(0.25)),
        ];
        let mut splits = Vec::new();
        let out = divide_all(vec![g], &mut splits, |_| SplitStep::SkewEst, &c);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), 2);
        assert_eq!(splits.len(), 1);
        assert_eq!(splits[0].below, FlowId(2));
    }
}
