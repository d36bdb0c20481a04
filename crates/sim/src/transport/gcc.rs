//! Google Congestion Control (GCC), draft-ietf-rmcat-gcc-02 ("the draft"), in the split the draft
//! calls its second version (sec. 3): the **delay-based controller runs at the receiver** and
//! sends its rate `A_r` back in a REMB-like message; the **loss-based controller runs at the
//! sender** and sends at `min(As_hat, A_r)` (sec. 6). This is the GCC of seed 003 sec. 6.3.4
//! (Chromium 47), whose sender "updates the sending rate every 25 ms and whenever a feedback
//! message arrives" and whose receiver sends feedback "every 50 ms ... or if there is rate drop of
//! at least 3%".
//!
//! Receiver ([`GccReceiver`]), per arriving packet and per group of packets:
//!
//! - **Pre-filtering** (sec. 5.2, [`PreFilter`]): packets sent within `burst_time` (5 ms) of the
//!   group's first packet form one group; so does a packet that arrives less than `burst_time`
//!   after the group's last one with a negative delay variation (a burst after an outage). A group
//!   has departure time `T(i)` and arrival time `t(i)` of its last packet (sec. 5.1); packets
//!   received out of order are ignored.
//! - **Arrival-time model** (sec. 5.1): `d(i) = t(i) - t(i-1) - (T(i) - T(i-1))`, in ms.
//! - **Arrival-time filter** (sec. 5.3, [`ArrivalFilter`]): the scalar Kalman filter
//!   `z(i) = d(i) - m_hat(i-1)`, `k(i) = (e(i-1) + q) / (var_v_hat(i) + e(i-1) + q)`,
//!   `m_hat(i) = m_hat(i-1) + z(i) k(i)`, `e(i) = (1 - k(i)) (e(i-1) + q)`, with
//!   `var_v_hat(i) = max(alpha var_v_hat(i-1) + (1 - alpha) z(i)^2, 1)`,
//!   `alpha = (1 - chi)^(30 / (1000 f_max))` and the 3-sigma outlier clip of `z(i)`.
//!   `q = 1e-3`, `e(0) = 0.1` (Table 1), `chi = 0.01` (inside the draft's `[0.001, 0.1]`).
//! - **Over-use detector** (sec. 5.4, [`OveruseDetector`]): over-use when the estimate exceeds
//!   `del_var_th(i)` for at least `overuse_time_th = 10 ms` and `m(i) >= m(i-1)`; under-use when
//!   it is below `-del_var_th(i)`; normal otherwise. The threshold adapts as
//!   `del_var_th(i) = del_var_th(i-1) + (t(i) - t(i-1)) K(i) (|m(i)| - del_var_th(i-1))`,
//!   `K = K_d = 0.00018` when `|m(i)| < del_var_th(i-1)`, else `K_u = 0.01`; no update when
//!   `|m(i)| - del_var_th > 15`; clamped to `[6, 600]` ms; `del_var_th(0) = 12.5` ms.
//! - **Rate control** (sec. 5.5, [`RateController`]): states Increase / Decrease / Hold with the
//!   draft's transition table. Increase is multiplicative (`eta = 1.08^min(dt / 1 s, 1)`) far from
//!   convergence and additive (`max(1000, alpha * expected_packet_size_bits)` per update with
//!   `alpha = 0.5 min(dt / response_time, 1)`, `response_time = 100 ms + RTT`) when the incoming
//!   rate `R_hat` is within three standard deviations of the average incoming rate at earlier
//!   decreases (exponential averages with smoothing factor 0.95); `A_hat < 1.5 R_hat`. Decrease
//!   sets `A_hat = beta R_hat`, `beta = 0.85`; `R_hat` is measured over a `T = 1 s` window.
//! - **Feedback**: every 50 ms a [`GccFeedback`] with `A_r` (REMB) and the packets received and
//!   expected since the last report (an RTCP receiver report); and at once, with `A_r` only, when
//!   over-use makes `A_r` drop by at least 3% below the last value sent (sec. 3: "RECOMMENDED to
//!   send the REMB message as soon as congestion is detected"; seed 003 sec. 6.3.4).
//!
//! Sender ([`GccSender`]): on each loss report (sec. 6), `As_hat(i) = As_hat(i-1) (1 - 0.5 p)`
//! if `p > 0.1`, `1.05 As_hat(i-1)` if `p < 0.02`, unchanged otherwise; the rate
//! `A_hat = min(As_hat, A_r)` is recomputed on every feedback and every 25 ms.
//! [`RateSender::cc_rate_bps`] is this `A_hat`; [`RateSender::set_fse_rate_bps`] replaces it (RFC
//! 8699 App. A: "updating A_hat of flow i with the value of FSE_R(i)"), and the loss-based
//! controller continues from the FSE's value.
//!
//! Choices the draft leaves open or gets wrong, made here (each a [`GccConfig`] field where it is
//! a number):
//!
//! - **Trend gain** ([`GccConfig::detector_gain_groups`], default 60). The draft compares the
//!   per-group estimate `m(i)` itself with `del_var_th >= 6 ms`. Paced packets form groups a few
//!   ms apart, so `m(i)` is the queue growth per group: at 1 Mbit/s with 1200-byte packets (one
//!   group per 9.6 ms) it reaches 6 ms only when sending at 1.6 times the capacity, above the
//!   `A_hat < 1.5 R_hat` cap, so the literal detector never fires and the queue fills until the
//!   loss controller acts (measured by the `literal_draft_detector_*` test). WebRTC's
//!   implementation the draft was written from (and the Chromium of seed 003) compares
//!   `min(n, 60) * m(i)` instead (`n` the number of deltas so far), i.e. the queue growth over
//!   about 60 groups. The default follows WebRTC; `1` gives the literal draft.
//! - **Trend per unit time** ([`GccConfig::detector_slope_gain`], default `Some(4)`). With the
//!   per-group trend, a flow whose (paced) groups are further apart sees a larger trend for the
//!   same queue growth rate and backs off more often. WebRTC's later `TrendlineEstimator`
//!   compares `min(n, 60) * 4 * slope` (slope of the delay over arrival time, ms/ms,
//!   `kDefaultTrendlineThresholdGain = 4`) with the same threshold; here the Kalman estimate is
//!   kept (the draft's structure) and divided by the mean of the last `K` inter-departure times:
//!   `min(n, 60) * 4 * m(i) / mean(T(i) - T(i-1))`. `None` gives the per-group trend above
//!   (with `detector_gain_groups = 1` the literal draft).
//! - **`f_max`** over the last `K = 60` inter-departure times (WebRTC's history length). The
//!   draft's `30 / (1000 f_max)` is read with `f_max` in 1/ms (as WebRTC computes it): the
//!   exponent is the shortest inter-group time in units of a 30 fps frame.
//! - The initial `var_v_hat` (not given) is 1 ms^2, the filter's floor.
//! - Over-use duration is measured in group arrival times since the first group above the
//!   threshold. The threshold update uses `t(i) - t(i-1)` capped at 100 ms (WebRTC), so that a
//!   pause in the flow does not make one update overshoot; the "`> 15`" guard and the choice of
//!   `K` use `del_var_th(i-1)`, detection uses the updated `del_var_th(i)`.
//! - The rate controller runs every feedback interval (50 ms; the draft asks for "at least once
//!   every response_time interval") and when the detector switches to over-use. A decrease
//!   never raises the estimate: `A_hat = min(A_hat, beta R_hat)` (WebRTC), and `beta A_hat` while
//!   `R_hat` is not yet measured (first half window). The convergence statistics are sampled on
//!   entering Decrease; their standard deviation is at least
//!   [`GccConfig::near_max_min_std_frac`] of the average (an exponential variance starts at 0,
//!   and WebRTC floors it likewise). The `1.5 R_hat` bound stops increases but does not cut the
//!   estimate (WebRTC).
//! - The receiver starts with `A_r = initial_rate_bps` (WebRTC waits 5 s for a first estimate);
//!   the RTT for `response_time` is the one the sender stamps on its packets, 200 ms until known.
//! - The sender keeps `As_hat <= A_r` (WebRTC caps the loss-based estimate at the REMB value;
//!   otherwise `1.05` per report grows it without bound while the delay-based controller limits
//!   the rate), and runs the loss rule once at least `loss_min_packets = 20` packets are expected
//!   since its last run (WebRTC's `kLimitNumPackets`; a 50 ms report at 1 Mbit/s covers about 5
//!   packets, too few for 2% and 10% thresholds). Rates stay in
//!   `[min_rate_bps, max_rate_bps]`.
//! - **Time-based loss increase** ([`GccConfig::loss_increase_per_sec`], default `Some(1.08)`).
//!   The draft's `1.05` per loss fraction is 5% per 20 packets: about 5% per 3 s at 60 kbit/s
//!   but several per second at 2 Mbit/s. As WebRTC's `SendSideBandwidthEstimation`, while the
//!   last loss fraction is below `loss_low`, every rate update (25 ms timer and feedback) sets
//!   `As_hat = max(As_hat, 1.08 * min(As_hat over the last 1 s) + 1 kbit/s)`, i.e. 8% per second
//!   at any packet rate. Decreases (`p > loss_high`) stay once per loss fraction as in the draft
//!   (WebRTC also spaces them at least 300 ms + RTT apart; selectable, off by default, below).
//!   `None` gives the draft's per-report `loss_increase`.
//! - **Loss hold band caps at the incoming rate** ([`GccConfig::loss_hold_cap_factor`], default
//!   `Some(0.95)`). Several GCC flows can hold a drop-tail queue full: a standing queue gives the
//!   delay-gradient detector no variation, so `A_r` does not fall, and the loss they see stays in
//!   the draft's 2-10 % "hold" band, so `As_hat` does not fall either. A flow that starts (or
//!   resumes, "media pause and resume") then sees 15-48 % loss and is driven to the minimum
//!   (measured: 0.05 Mbit/s against 1.14 before the pause). Periodic feedback therefore carries
//!   the receiver's `R_hat` ([`GccFeedback::incoming_bps`]), and on a loss fraction in
//!   `[loss_low, loss_high]` the sender sets `As_hat = min(As_hat, 0.95 R_hat)`. This follows
//!   WebRTC's bounding of the estimate by the acknowledged rate (`AimdRateControl` keeps its
//!   estimate below `1.5 * acked + 10 kbit/s`; the delay-based decrease is `0.85 * acked`), made
//!   tighter here: `1.5 R_hat` never binds at a few % loss, and `1.0 R_hat` leaves the queue
//!   standing (resumed flow 0.33 Mbit/s); 5 % below the incoming rate drains it (0.66 Mbit/s).
//!   `None` gives the draft's hold.
//! - **WebRTC's loss-decrease spacing and short windows** ([`GccConfig::loss_decrease_interval`],
//!   [`GccConfig::loss_window_max`], both default `None`): decrease at most once per
//!   300 ms + RTT and once per loss fraction (`has_decreased_since_last_fraction_loss_`), on any
//!   rate update; and take a loss fraction after 1 s even with fewer than `loss_min_packets`
//!   expected. Available but off: with them the resumed flow of "media pause and resume" ends
//!   lower (0.03 Mbit/s without the hold-band cap, 0.50 with it, against 0.05 and 0.66).
//! - The sender's RTT comes from an echo in the feedback (send time of the last packet received
//!   and how long the receiver held it, as RTCP's LSR/DLSR).
//! - **Pauses** (the application has nothing to send; draft-ietf-rmcat-eval-test "media pause
//!   and resume"). The estimate is kept over a pause, as in WebRTC, and only over-use relative to
//!   a measured `R_hat` lowers it:
//!   - the delay-based controller runs on the feedback timer only if a packet arrived since its
//!     last run (WebRTC updates on arrivals), so `R_hat` draining to 0 over an idle window does
//!     not drive `A_r` (in Decrease, `beta R_hat` would take it to `min_rate_bps`);
//!   - the first packet after a gap in arrivals longer than [`GccConfig::stream_timeout`] (2 s,
//!     WebRTC's stream timeout) restarts the pre-filter (the gap is not fed to the filter as a
//!     delay variation: its `d(i)` is the queue change over the pause, caused by other flows),
//!     the arrival-time filter and the detector's episode state (not its threshold), and
//!     measures `R_hat` from that packet on (`None` for `T / 2`, as at the start), so the first
//!     decrease after the resume is relative to the rate arriving since, not to a few packets
//!     spread over an idle 1 s window (which set `A_r` to a few kbit/s);
//!   - without a measured `R_hat`, Decrease takes `beta A_hat` once per over-use episode instead
//!     of compounding it on every update.
//!
//!   The sender needs no application-limited rule: nothing is expected while it is paused, so
//!   the loss controller sees no loss, and `A_r` is held.
//!
//! Units: delays and the threshold in ms (as the draft's constants), rates in bit/s, time passed in.

use crate::error::SimError;
use crate::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use coupling::{Duration, Instant};
use std::collections::VecDeque;

/// The initial measurement-noise variance (ms^2), not given by the draft: the filter's floor.
pub const VAR_V_INIT: f64 = 1.0;

/// Bytes of a periodic feedback packet: RTCP REMB with one SSRC (24) + receiver report with one
/// report block (32) + IPv4/UDP headers (28).
pub const FEEDBACK_BYTES: u32 = 24 + 32 + 28;
/// Bytes of an immediate REMB-only feedback packet: REMB (24) + IPv4/UDP (28).
pub const REMB_BYTES: u32 = 24 + 28;

/// Every constant of GCC, defaults from draft-ietf-rmcat-gcc-02 (Table 1 and sec. 5.5, 6), seed
/// 003 sec. 6.3.4 (timers), or WebRTC where the draft is silent (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct GccConfig {
    // --- Pre-filtering, sec. 4 and 5.2 ---
    /// `burst_time`: packets sent within it form a group (5 ms).
    pub burst_time: Duration,
    // --- Arrival-time filter, sec. 5.3 ---
    /// `q`: state noise variance (1e-3 ms^2).
    pub q: f64,
    /// `e(0)`: initial error variance (0.1).
    pub e0: f64,
    /// `chi`: noise-variance filter coefficient, draft range [0.001, 0.1] (0.01).
    pub chi: f64,
    /// `K`: how many recent groups `f_max` is taken over (60, WebRTC).
    pub fmax_groups: usize,
    // --- Over-use detector, sec. 5.4 ---
    /// `del_var_th(0)` in ms (12.5).
    pub del_var_th_init_ms: f64,
    /// Lower clamp of `del_var_th` in ms (6).
    pub del_var_th_min_ms: f64,
    /// Upper clamp of `del_var_th` in ms (600).
    pub del_var_th_max_ms: f64,
    /// No threshold update when `|m(i)| - del_var_th` exceeds this, ms (15).
    pub del_var_th_max_excess_ms: f64,
    /// `overuse_time_th` (10 ms).
    pub overuse_time_th: Duration,
    /// `K_u` (0.01 per ms).
    pub k_u: f64,
    /// `K_d` (0.00018 per ms).
    pub k_d: f64,
    /// Cap on `t(i) - t(i-1)` in the threshold update (100 ms, WebRTC).
    pub threshold_max_dt: Duration,
    /// The detector compares `min(n, detector_gain_groups) * m(i)` with the threshold (60,
    /// WebRTC; 1 = the draft's literal `m(i)`). See the module docs.
    pub detector_gain_groups: u32,
    /// `Some(g)`: the trend is per millisecond, `min(n, detector_gain_groups) * g * m(i) /
    /// mean(T(i) - T(i-1))` over the last `fmax_groups` groups (WebRTC's trendline: slope of the
    /// delay over time, gain `g = 4`, `kDefaultTrendlineThresholdGain`). `None`: per group,
    /// `min(n, detector_gain_groups) * m(i)`. See the module docs.
    pub detector_slope_gain: Option<f64>,
    // --- Rate control, sec. 5.5 ---
    /// `T`: window of the incoming-rate measurement `R_hat`, draft range [0.5, 1] s (1 s).
    pub rate_window: Duration,
    /// A gap in arrivals longer than this (the sender paused) restarts the delay-based pipeline:
    /// pre-filter, arrival-time filter and detector state (2 s, WebRTC's `kStreamTimeOutMs`).
    pub stream_timeout: Duration,
    /// `beta`: decrease factor, draft range [0.8, 0.95] (0.85).
    pub beta: f64,
    /// `eta` per second of multiplicative increase (1.08).
    pub eta: f64,
    /// Smoothing factor of the average and variance of the incoming rate at decreases (0.95).
    pub near_max_smoothing: f64,
    /// "Close" to convergence: within this many standard deviations (3).
    pub near_max_std_devs: f64,
    /// Floor of that standard deviation as a fraction of the average (0.03; not in the draft).
    pub near_max_min_std_frac: f64,
    /// Added to the RTT for `response_time` (100 ms).
    pub response_time_offset: Duration,
    /// RTT assumed until the sender reports one (200 ms, WebRTC's default).
    pub default_rtt: Duration,
    /// Smallest additive increase per update, bit/s (1000).
    pub additive_min_bps: f64,
    /// Frame rate assumed for `expected_packet_size_bits` (30 /s).
    pub frame_rate: f64,
    /// Largest packet assumed for `expected_packet_size_bits`, bytes (1200).
    pub max_packet_bytes: u32,
    /// `A_hat < max_rate_factor * R_hat` (1.5).
    pub max_rate_factor: f64,
    // --- Feedback ---
    /// Periodic feedback (REMB + loss report) interval (50 ms, seed 003 sec. 6.3.4).
    pub feedback_interval: Duration,
    /// Immediate REMB when `A_r` falls at least this fraction below the last value sent (0.03).
    pub remb_drop_fraction: f64,
    // --- Loss-based control, sec. 6 ---
    /// Sender rate update timer (25 ms, seed 003 sec. 6.3.4).
    pub sender_update_interval: Duration,
    /// Decrease above this loss fraction (0.10).
    pub loss_high: f64,
    /// Increase below this loss fraction (0.02).
    pub loss_low: f64,
    /// `As_hat *= 1 - loss_decrease_gain * p` above `loss_high` (0.5).
    pub loss_decrease_gain: f64,
    /// `As_hat *= loss_increase` below `loss_low` (1.05).
    pub loss_increase: f64,
    /// Loss reports are accumulated until this many packets are expected (20, WebRTC).
    pub loss_min_packets: u64,
    /// `Some(f)`: while the last loss fraction is below `loss_low`, `As_hat` rises on every rate
    /// update to `f * min(As_hat over the last second) + loss_increase_extra_bps` (WebRTC's
    /// `SendSideBandwidthEstimation`, `f = 1.08`), i.e. by `f` per second whatever the packet
    /// rate. `None`: `As_hat *= loss_increase` once per loss fraction (the draft). See the module
    /// docs.
    pub loss_increase_per_sec: Option<f64>,
    /// Added on a time-based increase, bit/s (1000, WebRTC: "so that we do not get stuck").
    pub loss_increase_extra_bps: f64,
    /// `Some(d)`: a loss decrease happens at most once per `d + RTT` and at most once per loss
    /// fraction, on any rate update (WebRTC's `kBweDecreaseIntervalMs = 300` and
    /// `has_decreased_since_last_fraction_loss_`). `None`: on each loss fraction (the draft).
    /// Only with [`GccConfig::loss_increase_per_sec`] set.
    pub loss_decrease_interval: Option<Duration>,
    /// `Some(w)`: a loss fraction is also taken once `w` has passed since the window started
    /// with fewer than `loss_min_packets` expected (1 s). `None`: only at `loss_min_packets`.
    pub loss_window_max: Option<Duration>,
    /// `Some(k)`: on a loss fraction in the hold band `[loss_low, loss_high]`, `As_hat` is capped
    /// at `k * R_hat` (the receiver's incoming rate); see the module docs. `None`: the draft.
    pub loss_hold_cap_factor: Option<f64>,
    // --- Rates ---
    /// Starting rate of the sender and of the receiver's `A_r`, bit/s (300 kbit/s, WebRTC).
    pub initial_rate_bps: f64,
    /// Lower bound of every rate, bit/s (10 kbit/s, WebRTC).
    pub min_rate_bps: f64,
    /// Upper bound of every rate, bit/s (1 Gbit/s).
    pub max_rate_bps: f64,
}

impl Default for GccConfig {
    fn default() -> Self {
        GccConfig {
            burst_time: Duration::from_millis(5),
            q: 1e-3,
            e0: 0.1,
            chi: 0.01,
            fmax_groups: 60,
            del_var_th_init_ms: 12.5,
            del_var_th_min_ms: 6.0,
            del_var_th_max_ms: 600.0,
            del_var_th_max_excess_ms: 15.0,
            overuse_time_th: Duration::from_millis(10),
            k_u: 0.01,
            k_d: 0.00018,
            threshold_max_dt: Duration::from_millis(100),
            detector_gain_groups: 60,
            detector_slope_gain: Some(4.0),
            rate_window: Duration::from_secs(1),
            stream_timeout: Duration::from_secs(2),
            beta: 0.85,
            eta: 1.08,
            near_max_smoothing: 0.95,
            near_max_std_devs: 3.0,
            near_max_min_std_frac: 0.03,
            response_time_offset: Duration::from_millis(100),
            default_rtt: Duration::from_millis(200),
            additive_min_bps: 1000.0,
            frame_rate: 30.0,
            max_packet_bytes: 1200,
            max_rate_factor: 1.5,
            feedback_interval: Duration::from_millis(50),
            remb_drop_fraction: 0.03,
            sender_update_interval: Duration::from_millis(25),
            loss_high: 0.10,
            loss_low: 0.02,
            loss_decrease_gain: 0.5,
            loss_increase: 1.05,
            loss_min_packets: 20,
            loss_increase_per_sec: Some(1.08),
            loss_increase_extra_bps: 1000.0,
            loss_decrease_interval: None,
            loss_window_max: None,
            loss_hold_cap_factor: Some(0.95),
            initial_rate_bps: 300_000.0,
            min_rate_bps: 10_000.0,
            max_rate_bps: 1e9,
        }
    }
}

impl GccConfig {
    /// Checks every field; `name` is the parameter path used in errors (e.g. `flow[2].gcc`).
    pub fn check(&self, name: &str) -> Result<(), SimError> {
        let bad = |field: &str, value: &dyn std::fmt::Display, expected: &'static str| {
            Err(SimError::invalid(
                format!("{name}.{field}"),
                value,
                expected,
            ))
        };
        let durations = [
            ("burst_time", self.burst_time),
            ("overuse_time_th", self.overuse_time_th),
            ("threshold_max_dt", self.threshold_max_dt),
            ("rate_window", self.rate_window),
            ("stream_timeout", self.stream_timeout),
            ("feedback_interval", self.feedback_interval),
            ("sender_update_interval", self.sender_update_interval),
        ];
        for (field, d) in durations {
            if d == Duration::ZERO {
                return bad(field, &d, "a duration > 0");
            }
        }
        let positive = [
            ("q", self.q),
            ("k_u", self.k_u),
            ("k_d", self.k_d),
            ("near_max_std_devs", self.near_max_std_devs),
            ("frame_rate", self.frame_rate),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return bad(field, &v, "a finite number > 0");
            }
        }
        let non_negative = [
            ("e0", self.e0),
            ("near_max_min_std_frac", self.near_max_min_std_frac),
            ("additive_min_bps", self.additive_min_bps),
            ("loss_increase_extra_bps", self.loss_increase_extra_bps),
            ("del_var_th_max_excess_ms", self.del_var_th_max_excess_ms),
        ];
        for (field, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, &v, "a finite number >= 0");
            }
        }
        let open_unit = [("chi", self.chi), ("beta", self.beta)];
        for (field, v) in open_unit {
            if !(v > 0.0 && v < 1.0) {
                return bad(field, &v, "a number in (0, 1)");
            }
        }
        if !(self.near_max_smoothing >= 0.0 && self.near_max_smoothing < 1.0) {
            return bad(
                "near_max_smoothing",
                &self.near_max_smoothing,
                "a number in [0, 1)",
            );
        }
        let fractions = [
            ("remb_drop_fraction", self.remb_drop_fraction),
            ("loss_low", self.loss_low),
            ("loss_high", self.loss_high),
            ("loss_decrease_gain", self.loss_decrease_gain),
        ];
        for (field, v) in fractions {
            if !(0.0..=1.0).contains(&v) {
                return bad(field, &v, "a number in [0, 1]");
            }
        }
        if self.loss_low > self.loss_high {
            return bad("loss_low", &self.loss_low, "loss_low <= loss_high");
        }
        let factors = [
            ("eta", self.eta),
            ("loss_increase", self.loss_increase),
            ("max_rate_factor", self.max_rate_factor),
        ];
        for (field, v) in factors {
            if !(v.is_finite() && v >= 1.0) {
                return bad(field, &v, "a finite factor >= 1");
            }
        }
        if !(self.del_var_th_min_ms.is_finite() && self.del_var_th_min_ms > 0.0) {
            return bad(
                "del_var_th_min_ms",
                &self.del_var_th_min_ms,
                "a finite threshold > 0 ms",
            );
        }
        if !(self.del_var_th_max_ms.is_finite() && self.del_var_th_max_ms >= self.del_var_th_min_ms)
        {
            return bad(
                "del_var_th_max_ms",
                &self.del_var_th_max_ms,
                "a finite threshold >= del_var_th_min_ms",
            );
        }
        if !(self.del_var_th_init_ms >= self.del_var_th_min_ms
            && self.del_var_th_init_ms <= self.del_var_th_max_ms)
        {
            return bad(
                "del_var_th_init_ms",
                &self.del_var_th_init_ms,
                "a threshold in [del_var_th_min_ms, del_var_th_max_ms]",
            );
        }
        if self.fmax_groups == 0 {
            return bad("fmax_groups", &0, "at least 1 group");
        }
        if self.detector_gain_groups == 0 {
            return bad(
                "detector_gain_groups",
                &0,
                "at least 1 (1 = the draft's m(i))",
            );
        }
        if let Some(g) = self.detector_slope_gain {
            if !(g.is_finite() && g > 0.0) {
                return bad("detector_slope_gain", &g, "a finite number > 0 (or None)");
            }
        }
        if let Some(f) = self.loss_increase_per_sec {
            if !(f.is_finite() && f >= 1.0) {
                return bad(
                    "loss_increase_per_sec",
                    &f,
                    "a finite factor >= 1 (or None)",
                );
            }
        }
        if let Some(k) = self.loss_hold_cap_factor {
            if !(k.is_finite() && k > 0.0) {
                return bad("loss_hold_cap_factor", &k, "a finite factor > 0 (or None)");
            }
        }
        if self.max_packet_bytes == 0 {
            return bad("max_packet_bytes", &0, "a packet size >= 1 byte");
        }
        if self.loss_min_packets == 0 {
            return bad("loss_min_packets", &0, "at least 1 packet");
        }
        if !(self.min_rate_bps.is_finite() && self.min_rate_bps > 0.0) {
            return bad("min_rate_bps", &self.min_rate_bps, "a rate > 0 bit/s");
        }
        if !(self.max_rate_bps >= self.min_rate_bps
            && self.max_rate_bps <= coupling::units::MAX_RATE_BPS)
        {
            return bad(
                "max_rate_bps",
                &self.max_rate_bps,
                "a rate in [min_rate_bps, 1e18] bit/s",
            );
        }
        if !(self.initial_rate_bps >= self.min_rate_bps
            && self.initial_rate_bps <= self.max_rate_bps)
        {
            return bad(
                "initial_rate_bps",
                &self.initial_rate_bps,
                "a rate in [min_rate_bps, max_rate_bps]",
            );
        }
        Ok(())
    }
}

/// `a - b` in milliseconds, signed.
fn ms_between(a: Instant, b: Instant) -> f64 {
    (a.as_nanos() as i128 - b.as_nanos() as i128) as f64 / 1e6
}

fn dur_ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

// ---------------------------------------------------------------------------------------------
// Pre-filtering and arrival-time model (sec. 5.1, 5.2)

/// One completed group compared with its predecessor (sec. 5.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupDelta {
    /// `d(i) = t(i) - t(i-1) - (T(i) - T(i-1))`, ms.
    pub d_ms: f64,
    /// `T(i) - T(i-1)`, ms.
    pub inter_departure_ms: f64,
    /// `t(i)`: arrival time of the group's last packet.
    pub arrival: Instant,
}

#[derive(Clone, Copy, Debug)]
struct Group {
    first_send: Instant,
    last_send: Instant,
    last_arrival: Instant,
}

/// Groups packets (sec. 5.2) and yields `d(i)` when a group is complete, i.e. when the first
/// packet of the next group arrives.
#[derive(Clone, Debug)]
pub struct PreFilter {
    burst_time: Duration,
    current: Option<Group>,
    prev: Option<Group>,
    highest_seq: Option<u64>,
}

impl PreFilter {
    pub fn new(burst_time: Duration) -> Self {
        PreFilter {
            burst_time,
            current: None,
            prev: None,
            highest_seq: None,
        }
    }

    /// Forgets the groups (not the highest sequence number seen): the next packet starts a group
    /// without a predecessor, so no `d(i)` spans the gap before it.
    pub fn reset(&mut self) {
        self.current = None;
        self.prev = None;
    }

    /// A packet with sequence number `seq`, sent at `send` (abs-send-time) and arriving at
    /// `arrival`.
    pub fn on_packet(&mut self, seq: u64, send: Instant, arrival: Instant) -> Option<GroupDelta> {
        // "Any packets received out of order are ignored by the arrival-time model."
        if self.highest_seq.is_some_and(|h| seq <= h) {
            return None;
        }
        self.highest_seq = Some(seq);
        let Some(cur) = self.current.as_mut() else {
            self.current = Some(Group {
                first_send: send,
                last_send: send,
                last_arrival: arrival,
            });
            return None;
        };
        let in_burst_interval = send.saturating_since(cur.first_send) <= self.burst_time;
        let inter_arrival = ms_between(arrival, cur.last_arrival);
        let burst_after_outage = inter_arrival < dur_ms(self.burst_time)
            && inter_arrival - ms_between(send, cur.last_send) < 0.0;
        if in_burst_interval || burst_after_outage {
            cur.last_send = cur.last_send.max(send);
            cur.last_arrival = arrival;
            return None;
        }
        let done = *cur;
        let out = self.prev.map(|prev| {
            let inter_departure_ms = ms_between(done.last_send, prev.last_send);
            GroupDelta {
                d_ms: ms_between(done.last_arrival, prev.last_arrival) - inter_departure_ms,
                inter_departure_ms,
                arrival: done.last_arrival,
            }
        });
        self.prev = Some(done);
        self.current = Some(Group {
            first_send: send,
            last_send: send,
            last_arrival: arrival,
        });
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Arrival-time filter (sec. 5.3)

/// The scalar Kalman filter of sec. 5.3 estimating `m(i)` from `d(i)` (ms).
#[derive(Clone, Debug)]
pub struct ArrivalFilter {
    q: f64,
    chi: f64,
    fmax_groups: usize,
    m_hat: f64,
    e: f64,
    var_v_hat: f64,
    recent_inter_departure_ms: VecDeque<f64>,
    n: u64,
}

impl ArrivalFilter {
    pub fn new(cfg: &GccConfig) -> Self {
        ArrivalFilter {
            q: cfg.q,
            chi: cfg.chi,
            fmax_groups: cfg.fmax_groups,
            m_hat: 0.0,
            e: cfg.e0,
            var_v_hat: VAR_V_INIT,
            recent_inter_departure_ms: VecDeque::new(),
            n: 0,
        }
    }

    /// Feeds `d(i)` and `T(i) - T(i-1)` (ms); returns `m_hat(i)`.
    pub fn update(&mut self, d_ms: f64, inter_departure_ms: f64) -> f64 {
        if self.recent_inter_departure_ms.len() == self.fmax_groups {
            self.recent_inter_departure_ms.pop_front();
        }
        self.recent_inter_departure_ms
            .push_back(inter_departure_ms.max(1e-3));
        // 1 / f_max: the shortest of the last K inter-departure times (ms).
        let min_dep_ms = self
            .recent_inter_departure_ms
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let alpha = (1.0 - self.chi).powf(30.0 * min_dep_ms / 1000.0);
        let z = d_ms - self.m_hat;
        let limit = 3.0 * self.var_v_hat.sqrt();
        let z_clipped = z.abs().min(limit);
        self.var_v_hat = (alpha * self.var_v_hat + (1.0 - alpha) * z_clipped * z_clipped).max(1.0);
        let k = (self.e + self.q) / (self.var_v_hat + self.e + self.q);
        self.m_hat += z * k;
        self.e = (1.0 - k) * (self.e + self.q);
        self.n += 1;
        self.m_hat
    }

    /// `m_hat(i)`, ms.
    pub fn m_hat(&self) -> f64 {
        self.m_hat
    }

    /// `var_v_hat(i)`, ms^2.
    pub fn var_v_hat(&self) -> f64 {
        self.var_v_hat
    }

    /// `e(i)`.
    pub fn e(&self) -> f64 {
        self.e
    }

    /// How many `d(i)` were fed.
    pub fn num_deltas(&self) -> u64 {
        self.n
    }

    /// The mean of the last `K` inter-departure times `T(i) - T(i-1)`, ms (`None` before the
    /// first delta).
    pub fn mean_inter_departure_ms(&self) -> Option<f64> {
        let n = self.recent_inter_departure_ms.len();
        (n > 0).then(|| self.recent_inter_departure_ms.iter().sum::<f64>() / n as f64)
    }
}

// ---------------------------------------------------------------------------------------------
// Over-use detector (sec. 5.4)

/// What the over-use detector signals to the rate controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwSignal {
    Normal,
    Overuse,
    Underuse,
}

/// The over-use detector with the adaptive threshold `del_var_th` of sec. 5.4.
#[derive(Clone, Debug)]
pub struct OveruseDetector {
    th_ms: f64,
    th_min: f64,
    th_max: f64,
    max_excess: f64,
    k_u: f64,
    k_d: f64,
    max_dt_ms: f64,
    overuse_time_th: Duration,
    gain_groups: u32,
    slope_gain: Option<f64>,
    last_t: Option<Instant>,
    overuse_since: Option<Instant>,
    prev_m: Option<f64>,
    signal: BwSignal,
}

impl OveruseDetector {
    pub fn new(cfg: &GccConfig) -> Self {
        OveruseDetector {
            th_ms: cfg.del_var_th_init_ms,
            th_min: cfg.del_var_th_min_ms,
            th_max: cfg.del_var_th_max_ms,
            max_excess: cfg.del_var_th_max_excess_ms,
            k_u: cfg.k_u,
            k_d: cfg.k_d,
            max_dt_ms: dur_ms(cfg.threshold_max_dt),
            overuse_time_th: cfg.overuse_time_th,
            gain_groups: cfg.detector_gain_groups,
            slope_gain: cfg.detector_slope_gain,
            last_t: None,
            overuse_since: None,
            prev_m: None,
            signal: BwSignal::Normal,
        }
    }

    /// The current `del_var_th`, ms.
    pub fn threshold_ms(&self) -> f64 {
        self.th_ms
    }

    /// The last signal.
    pub fn signal(&self) -> BwSignal {
        self.signal
    }

    /// Forgets the over-use episode and the previous group (after a pause in the flow); keeps the
    /// adapted threshold.
    pub fn reset(&mut self) {
        self.last_t = None;
        self.overuse_since = None;
        self.prev_m = None;
        self.signal = BwSignal::Normal;
    }

    /// The estimate compared with the threshold: `min(n, gain_groups) * m_hat` per group, or
    /// `min(n, gain_groups) * slope_gain * m_hat / group_interval_ms` per millisecond when
    /// `detector_slope_gain` is set (see the module docs; `m_hat` itself with
    /// `detector_gain_groups = 1` and no slope gain).
    pub fn trend(&self, m_hat: f64, num_deltas: u64, group_interval_ms: f64) -> f64 {
        let n = num_deltas.min(self.gain_groups as u64) as f64;
        match self.slope_gain {
            Some(g) => n * g * m_hat / group_interval_ms.max(1e-3),
            None => n * m_hat,
        }
    }

    /// Feeds `m_hat(i)` (after `num_deltas` deltas, groups `group_interval_ms` apart on average)
    /// for the group that arrived at `t`.
    pub fn update(
        &mut self,
        m_hat: f64,
        num_deltas: u64,
        group_interval_ms: f64,
        t: Instant,
    ) -> BwSignal {
        let m = self.trend(m_hat, num_deltas, group_interval_ms);
        // Threshold adaptation with del_var_th(i-1).
        let dt_ms = self
            .last_t
            .map_or(0.0, |l| ms_between(t, l).clamp(0.0, self.max_dt_ms));
        if m.abs() - self.th_ms <= self.max_excess {
            let k = if m.abs() < self.th_ms {
                self.k_d
            } else {
                self.k_u
            };
            self.th_ms += dt_ms * k * (m.abs() - self.th_ms);
            self.th_ms = self.th_ms.clamp(self.th_min, self.th_max);
        }
        self.last_t = Some(t);
        // Detection with del_var_th(i).
        self.signal = if m > self.th_ms {
            let since = *self.overuse_since.get_or_insert(t);
            let rising = self.prev_m.is_none_or(|p| m_hat >= p);
            if t.saturating_since(since) >= self.overuse_time_th && rising {
                BwSignal::Overuse
            } else {
                BwSignal::Normal
            }
        } else {
            self.overuse_since = None;
            if m < -self.th_ms {
                BwSignal::Underuse
            } else {
                BwSignal::Normal
            }
        };
        self.prev_m = Some(m_hat);
        self.signal
    }
}

// ---------------------------------------------------------------------------------------------
// Rate control (sec. 5.5)

/// The delay-based rate controller's state (sec. 5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateState {
    Increase,
    Decrease,
    Hold,
}

/// The delay-based rate controller of sec. 5.5, producing `A_r`.
#[derive(Clone, Debug)]
pub struct RateController {
    cfg: GccConfig,
    state: RateState,
    a_hat: f64,
    last_update: Option<Instant>,
    /// Average and variance of `R_hat` at decreases (bit/s, (bit/s)^2).
    avg_max: Option<f64>,
    var_max: f64,
    near_max: bool,
}

impl RateController {
    pub fn new(cfg: &GccConfig) -> Self {
        RateController {
            cfg: cfg.clone(),
            state: RateState::Increase,
            a_hat: cfg.initial_rate_bps,
            last_update: None,
            avg_max: None,
            var_max: 0.0,
            near_max: false,
        }
    }

    pub fn state(&self) -> RateState {
        self.state
    }

    /// The delay-based estimate `A_hat` (the `A_r` the receiver reports), bit/s.
    pub fn a_hat_bps(&self) -> f64 {
        self.a_hat
    }

    /// Whether the last increase was additive (close to convergence).
    pub fn near_max(&self) -> bool {
        self.near_max
    }

    /// The flow paused: the next update measures no time since the last one (an increase covers
    /// only time with packets flowing). `A_hat` and the state are kept.
    pub fn pause(&mut self) {
        self.last_update = None;
    }

    /// Runs the controller at `now` with the detector's `signal`, the incoming rate `r_hat`
    /// (None until measured) and the RTT; returns `A_hat(i)`.
    pub fn update(
        &mut self,
        signal: BwSignal,
        now: Instant,
        r_hat: Option<f64>,
        rtt: Duration,
    ) -> f64 {
        use BwSignal as S;
        use RateState as R;
        let prev_state = self.state;
        self.state = match (signal, self.state) {
            (S::Overuse, _) => R::Decrease,
            (S::Normal, R::Hold) => R::Increase,
            (S::Normal, R::Decrease) => R::Hold,
            (S::Normal, R::Increase) => R::Increase,
            (S::Underuse, _) => R::Hold,
        };
        let dt_ms = self
            .last_update
            .map_or(0.0, |l| ms_between(now, l).max(0.0));
        self.last_update = Some(now);
        match self.state {
            R::Hold => {}
            R::Decrease => {
                if prev_state != R::Decrease {
                    if let Some(r) = r_hat {
                        self.sample_max(r);
                    }
                }
                // A_hat = beta R_hat; without a measured R_hat, beta A_hat once per
                // over-use episode (repeated updates in Decrease must not compound).
                let target = match r_hat {
                    Some(r) => self.cfg.beta * r,
                    None if prev_state != R::Decrease => self.cfg.beta * self.a_hat,
                    None => self.a_hat,
                };
                self.a_hat = self.a_hat.min(target);
            }
            R::Increase if dt_ms > 0.0 => {
                self.near_max = self.close_to_convergence(r_hat);
                let old = self.a_hat;
                let mut new = if self.near_max {
                    let response_ms = dur_ms(self.cfg.response_time_offset) + dur_ms(rtt);
                    let alpha = 0.5 * (dt_ms / response_ms).min(1.0);
                    let bits_per_frame = old / self.cfg.frame_rate;
                    let packets_per_frame = (bits_per_frame
                        / (self.cfg.max_packet_bytes as f64 * 8.0))
                        .ceil()
                        .max(1.0);
                    let avg_packet_size_bits = bits_per_frame / packets_per_frame;
                    old + self.cfg.additive_min_bps.max(alpha * avg_packet_size_bits)
                } else {
                    old * self.cfg.eta.powf((dt_ms / 1000.0).min(1.0))
                };
                if let Some(r) = r_hat {
                    // A_hat(i) < 1.5 R_hat(i): no increase beyond the bound.
                    let cap = self.cfg.max_rate_factor * r;
                    if new > cap {
                        new = old.max(cap);
                    }
                }
                self.a_hat = new;
            }
            R::Increase => {}
        }
        self.a_hat = self
            .a_hat
            .clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
        self.a_hat
    }

    fn std_max(&self, avg: f64) -> f64 {
        self.var_max
            .sqrt()
            .max(self.cfg.near_max_min_std_frac * avg)
    }

    fn close_to_convergence(&mut self, r_hat: Option<f64>) -> bool {
        let (Some(avg), Some(r)) = (self.avg_max, r_hat) else {
            return false;
        };
        let band = self.cfg.near_max_std_devs * self.std_max(avg);
        if r > avg + band {
            // The congestion level changed: reset the average max bitrate.
            self.avg_max = None;
            self.var_max = 0.0;
            return false;
        }
        r >= avg - band
    }

    fn sample_max(&mut self, r: f64) {
        let s = self.cfg.near_max_smoothing;
        let avg = match self.avg_max {
            None => {
                self.var_max = 0.0;
                r
            }
            Some(a) => s * a + (1.0 - s) * r,
        };
        self.var_max = s * self.var_max + (1.0 - s) * (r - avg) * (r - avg);
        self.avg_max = Some(avg);
    }
}

// ---------------------------------------------------------------------------------------------
// Feedback

/// Packets received and expected since the previous report (an RTCP receiver report).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossReport {
    pub received: u64,
    pub expected: u64,
}

impl LossReport {
    /// The loss fraction `p` (0 when nothing was expected).
    pub fn fraction(&self) -> f64 {
        if self.expected == 0 {
            0.0
        } else {
            (1.0 - self.received as f64 / self.expected as f64).clamp(0.0, 1.0)
        }
    }
}

/// GCC's feedback payload (in [`Feedback::payload`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GccFeedback {
    /// `A_r`, the delay-based estimate (REMB), bit/s.
    pub remb_bps: f64,
    /// The loss report; only in periodic feedback.
    pub loss: Option<LossReport>,
    /// The receiver's `R_hat`, bit/s, when measured; only in periodic feedback.
    pub incoming_bps: Option<f64>,
    /// For the sender's RTT: send time of the last packet received, and the time from its arrival
    /// to this feedback.
    pub echo: Option<(Instant, Duration)>,
}

// ---------------------------------------------------------------------------------------------
// Receiver

/// GCC's receive side: pre-filter, arrival-time filter, over-use detector and delay-based rate
/// controller; sends `A_r` and loss reports back.
#[derive(Debug)]
pub struct GccReceiver {
    cfg: GccConfig,
    prefilter: PreFilter,
    filter: ArrivalFilter,
    detector: OveruseDetector,
    rate: RateController,
    signal: BwSignal,
    window: VecDeque<(Instant, u32)>,
    window_bytes: u64,
    first_arrival: Option<Instant>,
    highest_seq: Option<u64>,
    report_base: Option<u64>,
    received_since_report: u64,
    last_packet: Option<(Instant, Instant)>,
    rtt: Option<Duration>,
    next_feedback: Option<Instant>,
    last_sent_bps: f64,
    overuse_events: u64,
    /// A packet arrived since the rate controller last ran.
    fresh_arrivals: bool,
    idle_restarts: u64,
}

impl GccReceiver {
    pub fn new(cfg: &GccConfig, name: &str) -> Result<Self, SimError> {
        cfg.check(name)?;
        Ok(GccReceiver {
            cfg: cfg.clone(),
            prefilter: PreFilter::new(cfg.burst_time),
            filter: ArrivalFilter::new(cfg),
            detector: OveruseDetector::new(cfg),
            rate: RateController::new(cfg),
            signal: BwSignal::Normal,
            window: VecDeque::new(),
            window_bytes: 0,
            first_arrival: None,
            highest_seq: None,
            report_base: None,
            received_since_report: 0,
            last_packet: None,
            rtt: None,
            next_feedback: None,
            last_sent_bps: cfg.initial_rate_bps,
            overuse_events: 0,
            fresh_arrivals: false,
            idle_restarts: 0,
        })
    }

    /// `A_r`, bit/s.
    pub fn remb_bps(&self) -> f64 {
        self.rate.a_hat_bps()
    }
    /// `del_var_th`, ms.
    pub fn threshold_ms(&self) -> f64 {
        self.detector.threshold_ms()
    }
    /// `m_hat`, ms.
    pub fn m_hat_ms(&self) -> f64 {
        self.filter.m_hat()
    }
    pub fn signal(&self) -> BwSignal {
        self.signal
    }
    pub fn rate_state(&self) -> RateState {
        self.rate.state()
    }
    /// How many times the detector switched to over-use.
    pub fn overuse_events(&self) -> u64 {
        self.overuse_events
    }
    /// How many times a gap in arrivals longer than [`GccConfig::stream_timeout`] restarted the
    /// delay-based pipeline.
    pub fn idle_restarts(&self) -> u64 {
        self.idle_restarts
    }

    /// `R_hat` over the window `T` (over the time since the first packet while that is shorter,
    /// and None during the first `T / 2`).
    pub fn incoming_rate_bps(&self, now: Instant) -> Option<f64> {
        let elapsed = now.saturating_since(self.first_arrival?);
        if elapsed.as_nanos() * 2 < self.cfg.rate_window.as_nanos() {
            return None;
        }
        let span = elapsed.min(self.cfg.rate_window).as_secs_f64();
        let expired: u64 = self
            .window
            .iter()
            .take_while(|(t, _)| *t + self.cfg.rate_window <= now)
            .map(|(_, b)| *b as u64)
            .sum();
        Some((self.window_bytes - expired) as f64 * 8.0 / span)
    }

    fn expire_window(&mut self, now: Instant) {
        while let Some(&(t, b)) = self.window.front() {
            if t + self.cfg.rate_window > now {
                break;
            }
            self.window.pop_front();
            self.window_bytes -= b as u64;
        }
    }

    fn rtt(&self) -> Duration {
        self.rtt.unwrap_or(self.cfg.default_rtt)
    }

    /// The first packet after a gap in arrivals longer than `stream_timeout` (the sender paused):
    /// restarts what measures the path from arrivals, as at the start of the flow (WebRTC resets
    /// its inter-arrival and estimator state when every stream timed out), and keeps `A_r`.
    /// - The pre-filter forgets its groups: the gap is not a delay variation `d(i)` (its
    ///   `T(i) - T(i-1)` spans the pause, and `d(i)` the queue change over it, caused by others).
    /// - The arrival-time filter starts again (`m_hat = 0`, `e(0)`, `var_v_hat(0)`), the detector
    ///   forgets its over-use episode (its threshold stays) and the signal is normal.
    /// - `R_hat` is measured from this packet on (nothing in the window during the gap is a
    ///   measurement of the path), so the first decrease after the pause is relative to the rate
    ///   actually arriving, not to bytes spread over a window that was mostly idle.
    fn restart_after_idle(&mut self, now: Instant) {
        self.idle_restarts += 1;
        self.prefilter.reset();
        self.filter = ArrivalFilter::new(&self.cfg);
        self.detector.reset();
        self.signal = BwSignal::Normal;
        self.window.clear();
        self.window_bytes = 0;
        self.first_arrival = Some(now);
        self.rate.pause();
    }

    fn run_rate_control(&mut self, now: Instant) -> f64 {
        self.fresh_arrivals = false;
        self.expire_window(now);
        let r_hat = self.incoming_rate_bps(now);
        let rtt = self.rtt();
        self.rate.update(self.signal, now, r_hat, rtt)
    }

    fn echo(&self, now: Instant) -> Option<(Instant, Duration)> {
        self.last_packet
            .map(|(send, arrival)| (send, now.saturating_since(arrival)))
    }
}

impl RateReceiver for GccReceiver {
    fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback> {
        if self
            .last_packet
            .is_some_and(|(_, arrival)| now.saturating_since(arrival) > self.cfg.stream_timeout)
        {
            self.restart_after_idle(now);
        }
        self.fresh_arrivals = true;
        self.first_arrival.get_or_insert(now);
        self.next_feedback
            .get_or_insert(now + self.cfg.feedback_interval);
        self.window.push_back((now, info.size_bytes));
        self.window_bytes += info.size_bytes as u64;
        self.expire_window(now);
        self.report_base.get_or_insert(info.seq);
        self.highest_seq = Some(self.highest_seq.map_or(info.seq, |h| h.max(info.seq)));
        self.received_since_report += 1;
        self.last_packet = Some((info.send_ts, now));
        if let Some(rtt) = info.rtt {
            self.rtt = Some(rtt);
        }
        let delta = self.prefilter.on_packet(info.seq, info.send_ts, now)?;
        let m_hat = self.filter.update(delta.d_ms, delta.inter_departure_ms);
        let prev = self.signal;
        let interval = self
            .filter
            .mean_inter_departure_ms()
            .unwrap_or(delta.inter_departure_ms);
        self.signal =
            self.detector
                .update(m_hat, self.filter.num_deltas(), interval, delta.arrival);
        if self.signal == BwSignal::Overuse && prev != BwSignal::Overuse {
            self.overuse_events += 1;
            let a_r = self.run_rate_control(now);
            if a_r <= (1.0 - self.cfg.remb_drop_fraction) * self.last_sent_bps {
                self.last_sent_bps = a_r;
                return Some(Feedback {
                    size_bytes: REMB_BYTES,
                    payload: Box::new(GccFeedback {
                        remb_bps: a_r,
                        loss: None,
                        incoming_bps: None,
                        echo: self.echo(now),
                    }),
                });
            }
        }
        None
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next_feedback
    }

    fn on_timer(&mut self, now: Instant) -> Option<Feedback> {
        let due = self.next_feedback?;
        if now < due {
            return None;
        }
        let mut next = due + self.cfg.feedback_interval;
        if next <= now {
            next = now + self.cfg.feedback_interval;
        }
        self.next_feedback = Some(next);
        // The controller runs on arrivals (WebRTC updates its estimate only when packets come):
        // while the sender is paused there is no measurement, and `R_hat` draining towards 0
        // must not drive `A_r` (in Decrease, `beta R_hat` would take it to the minimum).
        let a_r = if self.fresh_arrivals {
            self.run_rate_control(now)
        } else {
            self.rate.a_hat_bps()
        };
        let loss = match (self.report_base, self.highest_seq) {
            (Some(base), Some(high)) => {
                let expected = (high + 1).saturating_sub(base);
                let report = LossReport {
                    received: self.received_since_report,
                    expected,
                };
                self.report_base = Some(base.max(high + 1));
                self.received_since_report = 0;
                Some(report)
            }
            _ => None,
        };
        self.last_sent_bps = a_r;
        Some(Feedback {
            size_bytes: FEEDBACK_BYTES,
            payload: Box::new(GccFeedback {
                remb_bps: a_r,
                loss,
                incoming_bps: self.incoming_rate_bps(now),
                echo: self.echo(now),
            }),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Sender

/// The loss-based controller of sec. 6: the new `As_hat` for loss fraction `p`, as the draft
/// writes it (once per loss fraction; with [`GccConfig::loss_increase_per_sec`] set, the sender
/// uses this only for decreases and increases by time instead).
pub fn loss_based_update(cfg: &GccConfig, as_hat: f64, p: f64) -> f64 {
    if p > cfg.loss_high {
        as_hat * (1.0 - cfg.loss_decrease_gain * p)
    } else if p < cfg.loss_low {
        as_hat * cfg.loss_increase
    } else {
        as_hat
    }
}

/// How far back the time-based loss increase looks for its base rate (1 s, WebRTC's
/// `kBweIncreaseIntervalMs`).
const LOSS_INCREASE_WINDOW: Duration = Duration::from_secs(1);

/// GCC's send side: the loss-based controller and the final rate `min(As_hat, A_r)`.
#[derive(Debug)]
pub struct GccSender {
    cfg: GccConfig,
    as_hat: f64,
    a_r: Option<f64>,
    a_hat: f64,
    srtt: Option<Duration>,
    acc_received: u64,
    acc_expected: u64,
    last_loss_fraction: Option<f64>,
    /// When the current loss window started (first report accumulated into it).
    window_start: Option<Instant>,
    /// Whether a loss decrease happened since the last loss fraction (WebRTC).
    decreased_since_fraction: bool,
    last_decrease: Option<Instant>,
    next_update: Option<Instant>,
    /// `(time, As_hat)` over the last [`LOSS_INCREASE_WINDOW`], increasing in `As_hat` (a
    /// monotone deque: the front is the minimum), for the time-based increase.
    min_history: VecDeque<(Instant, f64)>,
}

impl GccSender {
    pub fn new(cfg: &GccConfig, name: &str) -> Result<Self, SimError> {
        cfg.check(name)?;
        Ok(GccSender {
            cfg: cfg.clone(),
            as_hat: cfg.initial_rate_bps,
            a_r: None,
            a_hat: cfg.initial_rate_bps,
            srtt: None,
            acc_received: 0,
            acc_expected: 0,
            last_loss_fraction: None,
            window_start: None,
            decreased_since_fraction: false,
            last_decrease: None,
            next_update: None,
            min_history: VecDeque::new(),
        })
    }

    /// The loss-based estimate `As_hat`, bit/s.
    pub fn as_hat_bps(&self) -> f64 {
        self.as_hat
    }
    /// The last `A_r` received, bit/s.
    pub fn remb_bps(&self) -> Option<f64> {
        self.a_r
    }
    /// The loss fraction the loss controller last acted on.
    pub fn last_loss_fraction(&self) -> Option<f64> {
        self.last_loss_fraction
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// The rate update: the time-based loss increase (if configured and the last loss fraction
    /// is below `loss_low`), then `A_hat = min(As_hat, A_r)`, with `As_hat` kept at most `A_r`.
    fn update_rate(&mut self, now: Instant) {
        self.cap_rate();
        if let Some(f) = self.cfg.loss_increase_per_sec {
            // WebRTC's UpdateMinHistory: the rate before this update joins the history first, so
            // the base is the smallest rate of the last second and the increase does not
            // compound between updates.
            while self
                .min_history
                .front()
                .is_some_and(|&(t, _)| now.saturating_since(t) > LOSS_INCREASE_WINDOW)
            {
                self.min_history.pop_front();
            }
            while self
                .min_history
                .back()
                .is_some_and(|&(_, r)| r >= self.as_hat)
            {
                self.min_history.pop_back();
            }
            self.min_history.push_back((now, self.as_hat));
            if let (Some(d), Some(p)) = (self.cfg.loss_decrease_interval, self.last_loss_fraction) {
                let gap = d + self.srtt.unwrap_or(Duration::ZERO);
                if p > self.cfg.loss_high
                    && !self.decreased_since_fraction
                    && self
                        .last_decrease
                        .is_none_or(|t| now.saturating_since(t) >= gap)
                {
                    self.as_hat = loss_based_update(&self.cfg, self.as_hat, p);
                    self.decreased_since_fraction = true;
                    self.last_decrease = Some(now);
                    self.cap_rate();
                }
            }
            if self
                .last_loss_fraction
                .is_some_and(|p| p < self.cfg.loss_low)
            {
                let base = self.min_history.front().map_or(self.as_hat, |&(_, r)| r);
                let target = base * f + self.cfg.loss_increase_extra_bps;
                self.as_hat = self.as_hat.max(target);
                self.cap_rate();
            }
        }
    }

    /// `As_hat` kept at most `A_r` and within the rate bounds; `A_hat = As_hat`.
    fn cap_rate(&mut self) {
        let cap = self.a_r.unwrap_or(f64::INFINITY);
        self.as_hat = self
            .as_hat
            .min(cap)
            .clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
        self.a_hat = self.as_hat;
    }
}

impl RateSender for GccSender {
    fn name(&self) -> &'static str {
        "gcc"
    }

    fn rate_bps(&self) -> f64 {
        self.a_hat
    }

    fn cc_rate_bps(&self) -> f64 {
        self.a_hat
    }

    fn set_fse_rate_bps(&mut self, rate_bps: f64, _now: Instant) {
        if !rate_bps.is_finite() {
            return;
        }
        let r = rate_bps.clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
        self.as_hat = r;
        self.a_hat = r;
    }

    fn on_send(&mut self, seq: u64, size_bytes: u32, now: Instant) -> SendInfo {
        self.next_update
            .get_or_insert(now + self.cfg.sender_update_interval);
        SendInfo {
            seq,
            size_bytes,
            send_ts: now,
            rtt: self.srtt,
        }
    }

    fn on_feedback(&mut self, fb: &Feedback, now: Instant) {
        let Some(fb) = fb.payload.downcast_ref::<GccFeedback>() else {
            debug_assert!(false, "GCC sender got foreign feedback");
            return;
        };
        if let Some((send_ts, held)) = fb.echo {
            let sample = now
                .saturating_since(send_ts)
                .as_nanos()
                .saturating_sub(held.as_nanos());
            let sample = Duration::from_nanos(sample);
            self.srtt = Some(match self.srtt {
                None => sample,
                Some(s) => Duration::from_nanos((s.as_nanos() * 7 + sample.as_nanos()) / 8),
            });
        }
        if fb.remb_bps.is_finite() && fb.remb_bps > 0.0 {
            self.a_r = Some(fb.remb_bps);
        }
        if let Some(loss) = fb.loss {
            self.acc_received += loss.received;
            self.acc_expected += loss.expected;
            let start = *self.window_start.get_or_insert(now);
            let timed_out = self.acc_expected > 0
                && self
                    .cfg
                    .loss_window_max
                    .is_some_and(|w| now.saturating_since(start) >= w);
            if self.acc_expected >= self.cfg.loss_min_packets || timed_out {
                let p = LossReport {
                    received: self.acc_received,
                    expected: self.acc_expected,
                }
                .fraction();
                self.acc_received = 0;
                self.acc_expected = 0;
                self.window_start = None;
                self.last_loss_fraction = Some(p);
                self.decreased_since_fraction = false;
                let spaced = self.cfg.loss_increase_per_sec.is_some()
                    && self.cfg.loss_decrease_interval.is_some();
                if let (Some(k), Some(r)) = (self.cfg.loss_hold_cap_factor, fb.incoming_bps) {
                    if p >= self.cfg.loss_low && p <= self.cfg.loss_high {
                        self.as_hat = self.as_hat.min(k * r);
                    }
                }
                if !spaced && (self.cfg.loss_increase_per_sec.is_none() || p > self.cfg.loss_high) {
                    self.as_hat = loss_based_update(&self.cfg, self.as_hat, p);
                }
            }
        }
        self.update_rate(now);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next_update
    }

    fn on_timer(&mut self, now: Instant) {
        let Some(due) = self.next_update else {
            return;
        };
        if now < due {
            return;
        }
        let mut next = due + self.cfg.sender_update_interval;
        if next <= now {
            next = now + self.cfg.sender_update_interval;
        }
        self.next_update = Some(next);
        self.update_rate(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;
    use crate::transport::rate::harness::{run, Path, Trace};

    const PKT: u32 = 1200;

    fn path(capacity_bps: f64, queue_ms: f64, loss: f64) -> Path {
        Path {
            capacity_bps,
            one_way_delay: Duration::from_millis(50),
            queue_pkts: (queue_ms / 1000.0 * capacity_bps / 8.0 / PKT as f64).round() as usize,
            loss,
        }
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    /// Shifts the time a sender/receiver sees by `offset` (and the sender's sequence numbers by
    /// `seq_offset`), so that one pair can run through several [`run`] calls (each starts at time
    /// zero and sequence number zero) with its clock and numbering continuing.
    #[derive(Debug)]
    struct Shifted<T> {
        inner: T,
        offset: Duration,
        seq_offset: u64,
    }

    impl<T: RateSender> RateSender for Shifted<T> {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn rate_bps(&self) -> f64 {
            self.inner.rate_bps()
        }
        fn set_fse_rate_bps(&mut self, r: f64, now: Instant) {
            self.inner.set_fse_rate_bps(r, now + self.offset)
        }
        fn on_send(&mut self, seq: u64, size: u32, now: Instant) -> SendInfo {
            self.inner
                .on_send(seq + self.seq_offset, size, now + self.offset)
        }
        fn on_feedback(&mut self, fb: &Feedback, now: Instant) {
            self.inner.on_feedback(fb, now + self.offset)
        }
        fn next_timer(&self) -> Option<Instant> {
            self.inner.next_timer().map(|t| t - self.offset)
        }
        fn on_timer(&mut self, now: Instant) {
            self.inner.on_timer(now + self.offset)
        }
    }

    impl<T: RateReceiver> RateReceiver for Shifted<T> {
        fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback> {
            self.inner.on_packet(info, now + self.offset)
        }
        fn next_timer(&self) -> Option<Instant> {
            self.inner.next_timer().map(|t| t - self.offset)
        }
        fn on_timer(&mut self, now: Instant) -> Option<Feedback> {
            self.inner.on_timer(now + self.offset)
        }
    }

    fn pair(cfg: &GccConfig) -> (GccSender, GccReceiver) {
        (
            GccSender::new(cfg, "gcc").unwrap(),
            GccReceiver::new(cfg, "gcc").unwrap(),
        )
    }

    fn single_flow(cfg: &GccConfig, secs: u64) -> (Trace, GccSender, GccReceiver) {
        let (mut snd, mut rcv) = pair(cfg);
        let trace = run(
            &mut snd,
            &mut rcv,
            &path(1e6, 300.0, 0.0),
            PKT,
            Duration::from_secs(secs),
            Duration::from_millis(100),
            &mut seeded(1),
        );
        (trace, snd, rcv)
    }

    /// Runs one pair over the 1 Mbit/s, 50 ms, 300 ms-queue path through consecutive phases of
    /// `(seconds, loss)`; returns each phase's trace (times from the phase's start).
    fn phases(
        cfg: &GccConfig,
        spec: &[(u64, f64)],
        seed: u64,
    ) -> (Vec<Trace>, GccSender, GccReceiver) {
        let (s, r) = pair(cfg);
        let mut snd = Shifted {
            inner: s,
            offset: Duration::ZERO,
            seq_offset: 0,
        };
        let mut rcv = Shifted {
            inner: r,
            offset: Duration::ZERO,
            seq_offset: 0,
        };
        let mut rng = seeded(seed);
        let mut traces = Vec::new();
        let mut t0 = Duration::ZERO;
        for &(secs, loss) in spec {
            snd.offset = t0;
            rcv.offset = t0;
            let tr = run(
                &mut snd,
                &mut rcv,
                &path(1e6, 300.0, loss),
                PKT,
                Duration::from_secs(secs),
                Duration::from_millis(100),
                &mut rng,
            );
            snd.seq_offset += tr.sent;
            t0 = t0 + Duration::from_secs(secs);
            traces.push(tr);
        }
        (traces, snd.inner, rcv.inner)
    }

    /// Mean of `v` over samples with `t_s` in `[from, to)`.
    fn mean_between(tr: &Trace, v: &[f64], from: f64, to: f64) -> f64 {
        let xs: Vec<f64> = tr
            .t_s
            .iter()
            .zip(v)
            .filter(|(t, _)| **t >= from && **t < to)
            .map(|(_, x)| *x)
            .collect();
        mean(&xs)
    }

    #[test]
    fn single_flow_builds_a_stable_bounded_queue() {
        // Seed 003 Fig. 6.4: one GCC flow, 1 Mbit/s, 50 ms one-way delay, 300 ms queue.
        let (tr, snd, rcv) = single_flow(&GccConfig::default(), 100);
        let rate = mean_between(&tr, &tr.rate_bps, 50.0, 100.0);
        let good = mean_between(&tr, &tr.goodput_bps, 50.0, 100.0);
        let q3 = mean_between(&tr, &tr.queue_delay_s, 50.0, 75.0);
        let q4 = mean_between(&tr, &tr.queue_delay_s, 75.0, 100.0);
        let half = tr.t_s.len() / 2;
        let q_max = tr.queue_delay_s[half..].iter().copied().fold(0.0, f64::max);
        let first_near = tr.t_s[tr.rate_bps.iter().position(|r| *r > 0.9e6).unwrap()];
        eprintln!(
            "single flow: rate {:.0} goodput {:.0} bit/s, queue mean {:.1}/{:.1} ms max {:.1} ms, \
             lost {}, over-use events {}, del_var_th {:.2} ms, srtt {:?}, 90% of C at {first_near} s",
            rate,
            good,
            q3 * 1e3,
            q4 * 1e3,
            q_max * 1e3,
            tr.lost,
            rcv.overuse_events(),
            rcv.threshold_ms(),
            snd.srtt()
        );
        assert!(rate > 0.7e6 && good > 0.7e6, "rate {rate} goodput {good}");
        assert!(rate < 1.05e6, "rate {rate}");
        // Bounded, far below the 300 ms queue limit, and not growing over the second half.
        assert!(q_max < 0.1, "max queueing delay {q_max}");
        assert!(q4 <= q3 + 0.005, "queue grows: {q3} -> {q4}");
        assert_eq!(tr.lost, 0);
        // The delay signal, not loss, keeps the queue bounded.
        assert!(rcv.overuse_events() >= 5, "{}", rcv.overuse_events());
        // RTT = 100 ms propagation + queueing, echoed through the feedback.
        let srtt = snd.srtt().unwrap().as_secs_f64();
        assert!((0.1..0.15).contains(&srtt), "srtt {srtt}");
    }

    #[test]
    fn literal_draft_detector_misses_slow_queue_growth() {
        // Comparing m(i) itself with del_var_th >= 6 ms (the draft's words): with one 1200-byte
        // packet per 9.6 ms group, m(i) stays below 6 ms up to 1.6x the capacity, above the
        // A_hat < 1.5 R_hat cap. The detector never fires; the queue fills and loss rules.
        let cfg = GccConfig {
            detector_gain_groups: 1,
            detector_slope_gain: None,
            ..GccConfig::default()
        };
        let (tr, _, rcv) = single_flow(&cfg, 100);
        let half = tr.t_s.len() / 2;
        let q_max = tr.queue_delay_s[half..].iter().copied().fold(0.0, f64::max);
        let q_mean = mean_between(&tr, &tr.queue_delay_s, 50.0, 100.0);
        eprintln!(
            "literal draft detector: over-use events {}, queue mean {:.1} max {:.1} ms, lost {} of {}",
            rcv.overuse_events(),
            q_mean * 1e3,
            q_max * 1e3,
            tr.lost,
            tr.sent
        );
        assert_eq!(rcv.overuse_events(), 0);
        assert!(q_max > 0.25, "{q_max}");
        assert!(tr.lost > 0);
    }

    /// Packets of 1200 bytes sent every 10 ms; `extra(k)` is packet k's queueing delay (ms).
    fn feed(
        rcv: &mut GccReceiver,
        from: u64,
        to: u64,
        extra: impl Fn(u64) -> f64,
        mut on_fb: impl FnMut(u64, Feedback),
    ) {
        for k in from..to {
            let send = Instant::from_millis(10 * k);
            let arrival = send
                + Duration::from_millis(50)
                + Duration::from_nanos((extra(k) * 1e6).round() as u64);
            while rcv.next_timer().is_some_and(|t| t <= arrival) {
                let t = rcv.next_timer().unwrap();
                rcv.on_timer(t);
            }
            let info = SendInfo {
                seq: k,
                size_bytes: 1200,
                send_ts: send,
                rtt: Some(Duration::from_millis(100)),
            };
            if let Some(fb) = rcv.on_packet(&info, arrival) {
                on_fb(k, fb);
            }
        }
    }

    #[test]
    fn detector_fires_when_the_queue_grows() {
        // A_r starts above the 0.96 Mbit/s the synthetic flow sends, so that a decrease shows.
        let cfg = GccConfig {
            initial_rate_bps: 1.2e6,
            ..GccConfig::default()
        };
        let mut rcv = GccReceiver::new(&cfg, "gcc").unwrap();
        // 10 s of a constant delay: never over-use.
        feed(&mut rcv, 0, 1000, |_| 0.0, |_, _| {});
        assert_eq!(rcv.overuse_events(), 0);
        assert_eq!(rcv.signal(), BwSignal::Normal);
        let remb_before = rcv.remb_bps();
        // Then the queue grows by 1 ms per 10 ms packet (sending at 1.1x the capacity).
        let mut first_fb = None;
        feed(
            &mut rcv,
            1000,
            1100,
            |k| (k - 999) as f64,
            |k, fb| {
                first_fb.get_or_insert((k, fb));
            },
        );
        assert!(rcv.overuse_events() >= 1);
        // Signalled at once with a REMB-only message, A_r = 0.85 R_hat (R_hat = 0.96 Mbit/s).
        let (k, fb) = first_fb.expect("immediate REMB on over-use");
        let fb = fb.payload.downcast_ref::<GccFeedback>().unwrap();
        eprintln!(
            "over-use after {} ms of queue growth (queue {} ms), A_r {:.0} -> {:.0}",
            (k - 999) * 10,
            k - 999,
            remb_before,
            fb.remb_bps
        );
        assert!(k - 999 <= 40, "over-use only after {} packets", k - 999);
        assert!(fb.loss.is_none());
        assert!(
            (fb.remb_bps - 0.85 * 960_000.0).abs() < 20_000.0,
            "{}",
            fb.remb_bps
        );
        assert_eq!(rcv.rate_state(), RateState::Decrease);
        // The threshold rose with the over-use (K_u) ...
        assert!(rcv.threshold_ms() > 12.5, "{}", rcv.threshold_ms());
        // ... and the queue drains at 2 ms per packet: under-use, and the rate controller holds.
        let mut underuse = false;
        for k in 1100..1150 {
            feed(
                &mut rcv,
                k,
                k + 1,
                |k| 100.0 - 2.0 * (k - 1099) as f64,
                |_, _| {},
            );
            underuse |= rcv.signal() == BwSignal::Underuse;
        }
        assert!(underuse);
        assert_eq!(rcv.rate_state(), RateState::Hold);
    }

    #[test]
    fn literal_draft_detector_needs_a_steep_ramp() {
        let cfg = GccConfig {
            detector_gain_groups: 1,
            detector_slope_gain: None,
            ..GccConfig::default()
        };
        let mut rcv = GccReceiver::new(&cfg, "gcc").unwrap();
        feed(&mut rcv, 0, 200, |_| 0.0, |_, _| {});
        // 1 ms per group: m(i) -> 1 ms, far below del_var_th.
        feed(&mut rcv, 200, 400, |k| (k - 199) as f64, |_, _| {});
        assert_eq!(rcv.overuse_events(), 0);
        assert!((rcv.m_hat_ms() - 1.0).abs() < 0.2, "{}", rcv.m_hat_ms());
        // 20 ms per group: m(i) passes del_var_th.
        feed(
            &mut rcv,
            400,
            500,
            |k| 200.0 + 20.0 * (k - 399) as f64,
            |_, _| {},
        );
        assert!(rcv.overuse_events() >= 1);
    }

    #[test]
    fn overuse_needs_time_and_a_rising_estimate() {
        let cfg = GccConfig {
            detector_gain_groups: 1,
            detector_slope_gain: None,
            ..GccConfig::default()
        };
        let mut det = OveruseDetector::new(&cfg);
        let t = Instant::from_millis;
        assert_eq!(det.update(20.0, 1, 10.0, t(0)), BwSignal::Normal); // above, 0 ms so far
        assert_eq!(det.update(21.0, 2, 10.0, t(5)), BwSignal::Normal); // 5 ms < overuse_time_th
        assert_eq!(det.update(22.0, 3, 10.0, t(10)), BwSignal::Overuse); // 10 ms, rising
        assert_eq!(det.update(21.5, 4, 10.0, t(15)), BwSignal::Normal); // above but m(i) < m(i-1)
        assert_eq!(det.update(23.0, 5, 10.0, t(20)), BwSignal::Overuse);
        assert_eq!(det.update(0.0, 6, 10.0, t(25)), BwSignal::Normal);
        assert_eq!(det.update(-30.0, 7, 10.0, t(30)), BwSignal::Underuse);
        // After dropping below, the 10 ms start again.
        assert_eq!(det.update(30.0, 8, 10.0, t(35)), BwSignal::Normal);
    }

    #[test]
    fn adaptive_threshold_follows_the_draft() {
        let cfg = GccConfig {
            detector_gain_groups: 1,
            detector_slope_gain: None,
            ..GccConfig::default()
        };
        let mut det = OveruseDetector::new(&cfg);
        let t = Instant::from_millis;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        det.update(0.0, 1, 10.0, t(0)); // no previous t: no update
        assert!(close(det.threshold_ms(), 12.5));
        // |m| < del_var_th: K_d. 12.5 + 10 * 0.00018 * (0 - 12.5).
        det.update(0.0, 2, 10.0, t(10));
        let th = 12.5 - 10.0 * 0.00018 * 12.5;
        assert!(close(det.threshold_ms(), th), "{}", det.threshold_ms());
        // |m| >= del_var_th: K_u, for either sign of m.
        det.update(-20.0, 3, 10.0, t(20));
        let th = th + 10.0 * 0.01 * (20.0 - th);
        assert!(close(det.threshold_ms(), th), "{}", det.threshold_ms());
        // |m| - del_var_th > 15: no update.
        det.update(th + 15.5, 4, 10.0, t(30));
        assert!(close(det.threshold_ms(), th));
        // t(i) - t(i-1) is capped at 100 ms.
        det.update(th + 10.0, 5, 10.0, t(10_000));
        let th = th + 100.0 * 0.01 * 10.0;
        assert!(close(det.threshold_ms(), th), "{}", det.threshold_ms());
        // Clamped to [6, 600] ms.
        let mut now = 10_000;
        for _ in 0..10_000 {
            now += 10;
            det.update(det.threshold_ms() + 14.0, 6, 10.0, t(now));
        }
        assert!(close(det.threshold_ms(), 600.0));
        for _ in 0..100_000 {
            now += 100;
            det.update(0.0, 7, 10.0, t(now));
        }
        assert!(close(det.threshold_ms(), 6.0));
        // K_u > K_d: raising is 55 times faster than lowering.
        assert!(cfg.k_u / cfg.k_d > 50.0);
    }

    #[test]
    fn kalman_filter_follows_sec_5_3() {
        let cfg = GccConfig::default();
        let mut f = ArrivalFilter::new(&cfg);
        // First step by hand: z = 2, alpha = 0.99^(30 * 10 / 1000), var clipped at 3 sigma.
        let m = f.update(2.0, 10.0);
        let alpha = 0.99f64.powf(0.3);
        let var = (alpha * 1.0 + (1.0 - alpha) * 4.0).max(1.0);
        let k = (0.1 + 1e-3) / (var + 0.1 + 1e-3);
        assert!((m - 2.0 * k).abs() < 1e-12);
        assert!((f.e() - (1.0 - k) * (0.1 + 1e-3)).abs() < 1e-12);
        assert!((f.var_v_hat() - var).abs() < 1e-12);
        // Converges to a constant d(i).
        for _ in 0..2000 {
            f.update(2.0, 10.0);
        }
        assert!((f.m_hat() - 2.0).abs() < 1e-3, "{}", f.m_hat());
        // An outlier moves var_v_hat by at most (1 - alpha) * 9 var_v_hat.
        let before = f.var_v_hat();
        f.update(1000.0, 10.0);
        assert!(f.var_v_hat() <= before * (alpha + (1.0 - alpha) * 9.0) + 1e-9);
        // var_v_hat never falls below 1.
        for _ in 0..10_000 {
            f.update(f.m_hat(), 10.0);
        }
        assert!(f.var_v_hat() >= 1.0);
    }

    #[test]
    fn prefilter_groups_bursts() {
        let mut p = PreFilter::new(Duration::from_millis(5));
        let ms = Instant::from_millis;
        // Group 1: sent at 0..=4 ms; group 2 starts at 10 ms.
        for k in 0..5 {
            assert_eq!(p.on_packet(k, ms(k), ms(50 + k)), None);
        }
        assert_eq!(p.on_packet(5, ms(10), ms(60)), None); // group 1 complete, no predecessor
        assert_eq!(p.on_packet(6, ms(12), ms(63)), None); // same group (sent within 5 ms)
                                                          // Group 3 starts: group 2 (last sent 12, arrived 63) vs group 1 (4, 54): d = 9 - 8 = 1.
        let d = p.on_packet(7, ms(20), ms(70)).unwrap();
        assert!((d.d_ms - 1.0).abs() < 1e-9 && (d.inter_departure_ms - 8.0).abs() < 1e-9);
        assert_eq!(d.arrival, ms(63));
        // After an outage, packets sent 10 ms apart arrive 1 ms apart: one group.
        // Group 3 ({20}) vs group 2: d = (70 - 63) - (20 - 12) = -1.
        let d = p.on_packet(8, ms(30), ms(200)).unwrap();
        assert!((d.d_ms + 1.0).abs() < 1e-9, "{}", d.d_ms);
        assert_eq!(p.on_packet(9, ms(40), ms(201)), None);
        assert_eq!(p.on_packet(10, ms(50), ms(202)), None);
        // Out-of-order packets are ignored.
        assert_eq!(p.on_packet(9, ms(40), ms(203)), None);
        let d = p.on_packet(11, ms(60), ms(210)).unwrap();
        // Group {30, 40, 50} (last sent 50, arrived 202) vs group {20} (20, 70).
        assert!((d.d_ms - (132.0 - 30.0)).abs() < 1e-9, "{}", d.d_ms);
    }

    #[test]
    fn rate_controller_follows_sec_5_5() {
        let cfg = GccConfig::default();
        let mut rc = RateController::new(&cfg);
        let rtt = Duration::from_millis(100);
        let t = Instant::from_millis;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        assert_eq!(rc.state(), RateState::Increase);
        rc.update(BwSignal::Normal, t(0), None, rtt);
        // Multiplicative: 8% per second, at most one second at a time.
        assert!(close(
            rc.update(BwSignal::Normal, t(1000), None, rtt),
            300_000.0 * 1.08
        ));
        assert!(close(
            rc.update(BwSignal::Normal, t(1500), None, rtt),
            300_000.0 * 1.08 * 1.08f64.sqrt()
        ));
        let a = rc.a_hat_bps();
        assert!(close(
            rc.update(BwSignal::Normal, t(5000), None, rtt),
            a * 1.08
        ));
        // Bounded by 1.5 R_hat: no increase past it, and no cut to it either.
        let a = rc.a_hat_bps();
        assert!(close(
            rc.update(BwSignal::Normal, t(6000), Some(a / 1.5), rtt),
            a
        ));
        // Over-use: Decrease to beta * R_hat.
        assert!(close(
            rc.update(BwSignal::Overuse, t(6050), Some(300_000.0), rtt),
            255_000.0
        ));
        assert_eq!(rc.state(), RateState::Decrease);
        // Under-use: Hold.
        assert!(close(
            rc.update(BwSignal::Underuse, t(6100), Some(300_000.0), rtt),
            255_000.0
        ));
        assert_eq!(rc.state(), RateState::Hold);
        // Normal in Hold: Increase, now additive near the incoming rate of the last decrease:
        // + max(1000, 0.5 * min(dt / (100 ms + RTT), 1) * expected packet size).
        let r = rc.update(BwSignal::Normal, t(6150), Some(300_000.0), rtt);
        assert_eq!(rc.state(), RateState::Increase);
        assert!(rc.near_max());
        // alpha = 0.5 * 50 / 200; bits_per_frame = 255000 / 30 = 8500 (one packet per frame).
        assert!(close(r, 255_000.0 + 0.125 * 8500.0), "{r}");
        let r = rc.update(BwSignal::Normal, t(6350), Some(300_000.0), rtt);
        assert!(close(r, 256_062.5 + 0.5 * 256_062.5 / 30.0), "{r}");
        // Far below the 1000 bit/s floor.
        let mut low = RateController::new(&GccConfig {
            initial_rate_bps: 20_000.0,
            ..cfg.clone()
        });
        low.update(BwSignal::Normal, t(0), Some(20_000.0), rtt);
        low.update(BwSignal::Overuse, t(50), Some(20_000.0), rtt);
        low.update(BwSignal::Normal, t(100), Some(20_000.0), rtt);
        let r = low.update(BwSignal::Normal, t(150), Some(20_000.0), rtt);
        assert!(low.near_max());
        assert!(close(r, 17_000.0 + 1000.0), "{r}");
        // An incoming rate far above the average max: back to multiplicative.
        let a = rc.a_hat_bps();
        let r = rc.update(BwSignal::Normal, t(7350), Some(400_000.0), rtt);
        assert!(!rc.near_max());
        assert!(close(r, a * 1.08));
        // The table: Decrease + Normal -> Hold; Increase + Under-use -> Hold.
        rc.update(BwSignal::Overuse, t(7400), Some(400_000.0), rtt);
        rc.update(BwSignal::Normal, t(7450), Some(400_000.0), rtt);
        assert_eq!(rc.state(), RateState::Hold);
        rc.update(BwSignal::Normal, t(7500), Some(400_000.0), rtt);
        rc.update(BwSignal::Underuse, t(7550), Some(400_000.0), rtt);
        assert_eq!(rc.state(), RateState::Hold);
    }

    #[test]
    fn loss_controller_follows_sec_6() {
        let cfg = GccConfig::default();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b;
        assert!(close(loss_based_update(&cfg, 1e6, 0.2), 0.9e6));
        assert!(close(loss_based_update(&cfg, 1e6, 0.5), 0.75e6));
        assert!(close(loss_based_update(&cfg, 1e6, 0.01), 1.05e6));
        assert!(close(loss_based_update(&cfg, 1e6, 0.0), 1.05e6));
        for p in [0.02, 0.05, 0.1] {
            assert!(close(loss_based_update(&cfg, 1e6, p), 1e6), "{p}");
        }
        // At the sender, the draft's per-report increase (`loss_increase_per_sec: None`; the
        // default increases by time, below): reports accumulate to 20 expected packets;
        // rate = min(As_hat, A_r).
        let draft = GccConfig {
            loss_increase_per_sec: None,
            ..GccConfig::default()
        };
        let mut snd = GccSender::new(&draft, "gcc").unwrap();
        let fb = |remb_bps: f64, received, expected| Feedback {
            size_bytes: FEEDBACK_BYTES,
            payload: Box::new(GccFeedback {
                remb_bps,
                loss: Some(LossReport { received, expected }),
                incoming_bps: None,
                echo: None,
            }),
        };
        let t = Instant::from_millis(100);
        snd.on_feedback(&fb(1e6, 5, 10), t);
        assert!(close(snd.rate_bps(), 300_000.0), "not enough packets yet");
        snd.on_feedback(&fb(1e6, 10, 10), t); // 15 of 20: p = 0.25
        assert!(close(snd.rate_bps(), 300_000.0 * (1.0 - 0.125)));
        assert_eq!(snd.last_loss_fraction(), Some(0.25));
        snd.on_feedback(&fb(1e6, 20, 20), t);
        assert!(close(snd.rate_bps(), 300_000.0 * 0.875 * 1.05));
        snd.on_feedback(&fb(1e6, 19, 20), t); // 5%: unchanged
        assert!(close(snd.rate_bps(), 300_000.0 * 0.875 * 1.05));
        // A_r below As_hat limits the rate (and As_hat).
        snd.on_feedback(&fb(200_000.0, 20, 20), t);
        assert!(close(snd.rate_bps(), 200_000.0));
        assert!(close(snd.as_hat_bps(), 200_000.0));

        // The default, WebRTC's time-based increase: 1.08 x the smallest As_hat of the last
        // second + 1 kbit/s on every update while the last loss fraction is below 2%, whatever
        // the packet rate; decreases stay once per loss fraction.
        let mut snd = GccSender::new(&cfg, "gcc").unwrap();
        let ms = Instant::from_millis;
        snd.on_feedback(&fb(1e7, 5, 10), ms(100));
        assert!(close(snd.rate_bps(), 300_000.0), "no loss fraction yet");
        snd.on_feedback(&fb(1e7, 10, 10), ms(100)); // p = 0.25
        let r0 = 300_000.0 * 0.875;
        assert!(close(snd.rate_bps(), r0));
        snd.on_timer(ms(125)); // Timer set only by on_send; nothing happens.
        assert!(close(snd.rate_bps(), r0), "{}", snd.rate_bps());
        snd.on_feedback(&fb(1e7, 20, 20), ms(200)); // p = 0: up 8% at once
        let r1 = r0 * 1.08 + 1000.0;
        assert!(close(snd.rate_bps(), r1), "{}", snd.rate_bps());
        // Further updates within the second do not compound.
        for k in 1..10 {
            snd.on_feedback(&fb(1e7, 0, 0), ms(200 + 50 * k));
            assert!(close(snd.rate_bps(), r1), "{k}: {}", snd.rate_bps());
        }
        // r0, last recorded at 200 ms (before the increase), leaves the 1 s history after
        // 1200 ms; then the base is r1.
        snd.on_feedback(&fb(1e7, 0, 0), ms(1150));
        assert!(close(snd.rate_bps(), r1), "{}", snd.rate_bps());
        snd.on_feedback(&fb(1e7, 0, 0), ms(1250));
        assert!(
            close(snd.rate_bps(), r1 * 1.08 + 1000.0),
            "{}",
            snd.rate_bps()
        );
        // About 8% per second over 10 s, capped by A_r.
        for k in 0..200 {
            snd.on_feedback(&fb(1e7, 0, 0), ms(1300 + 50 * k));
        }
        let g = snd.rate_bps() / r1;
        assert!(g > 1.08f64.powi(9) && g < 1.09f64.powi(12), "{g}");
        snd.on_feedback(&fb(300_000.0, 0, 0), ms(11_300));
        assert!(close(snd.rate_bps(), 300_000.0));
    }

    #[test]
    fn persistent_loss_lowers_the_rate_until_it_stops() {
        let (trs, _, _) = phases(
            &GccConfig::default(),
            &[(40, 0.0), (20, 0.15), (60, 0.0)],
            7,
        );
        let before = mean_between(&trs[0], &trs[0].rate_bps, 30.0, 40.0);
        let lossy = mean_between(&trs[1], &trs[1].rate_bps, 15.0, 20.0);
        let after = mean_between(&trs[2], &trs[2].rate_bps, 50.0, 60.0);
        let recovered_at = trs[2].t_s[trs[2].rate_bps.iter().position(|r| *r > 0.8e6).unwrap()];
        eprintln!(
            "15% loss: rate {before:.0} before, {lossy:.0} in the last 5 s of 20 s of loss, \
             {after:.0} 50-60 s after; back to 0.8 Mbit/s after {recovered_at} s; lost {} of {}",
            trs[1].lost, trs[1].sent
        );
        assert!(before > 0.8e6, "{before}");
        assert!(lossy < 0.3 * before, "{lossy}");
        assert!(after > 0.8e6, "{after}");
    }

    #[test]
    fn fse_rate_replaces_a_hat() {
        let cfg = GccConfig::default();
        let mut snd = GccSender::new(&cfg, "gcc").unwrap();
        let t = Instant::from_millis;
        snd.on_send(0, 1200, t(0));
        let fb = Feedback {
            size_bytes: FEEDBACK_BYTES,
            payload: Box::new(GccFeedback {
                remb_bps: 800_000.0,
                loss: None,
                incoming_bps: None,
                echo: Some((t(0), Duration::from_millis(10))),
            }),
        };
        snd.on_feedback(&fb, t(110));
        assert_eq!(snd.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(snd.cc_rate_bps(), 300_000.0);
        snd.set_fse_rate_bps(500_000.0, t(110));
        assert_eq!((snd.rate_bps(), snd.cc_rate_bps()), (500_000.0, 500_000.0));
        assert_eq!(snd.as_hat_bps(), 500_000.0);
        // GCC continues from the FSE's value: the 25 ms update keeps it (below A_r) ...
        assert_eq!(snd.next_timer(), Some(t(25)));
        snd.on_timer(t(125));
        assert_eq!(snd.cc_rate_bps(), 500_000.0);
        assert_eq!(snd.next_timer(), Some(t(150)));
        // ... and caps it at A_r.
        snd.set_fse_rate_bps(900_000.0, t(130));
        snd.on_timer(t(150));
        assert_eq!(snd.cc_rate_bps(), 800_000.0);
    }

    /// One flow over the 1 Mbit/s, 50 ms, 300 ms-queue path, paused (nothing to send; the sender
    /// told it is application-limited) over `pause` (s), sharing the bottleneck FIFO with
    /// constant-rate cross traffic of `cross_bps` from the pause's start on (the others taking the
    /// freed capacity). Returns the flow's goodput and the sender's rate, one sample per second.
    fn paused_flow(pause: (u64, u64), cross_bps: f64, secs: u64) -> (Vec<f64>, Vec<f64>) {
        let (mut snd, mut rcv) = pair(&GccConfig::default());
        let p = path(1e6, 300.0, 0.0);
        let owd = p.one_way_delay;
        let tx = |bytes: u32| Duration::from_nanos((bytes as f64 * 8e9 / p.capacity_bps) as u64);
        let (p0, p1) = (Instant::from_secs(pause.0), Instant::from_secs(pause.1));
        let mut queue: VecDeque<(Instant, Option<SendInfo>)> = VecDeque::new();
        let mut feedback: VecDeque<(Instant, Feedback)> = VecDeque::new();
        let (mut link_free, mut next_send, mut next_cross) = (Instant::ZERO, Instant::ZERO, p0);
        let (mut seq, mut idle) = (0u64, false);
        let mut goodput = vec![0.0; secs as usize];
        let mut rate = Vec::new();
        let mut enqueue = |queue: &mut VecDeque<_>, t: Instant, item: Option<SendInfo>| {
            if queue.iter().filter(|(d, _)| *d > t).count() < p.queue_pkts {
                link_free = link_free.max(t) + tx(PKT);
                queue.push_back((link_free, item));
            }
        };
        let end = Instant::from_secs(secs);
        let mut now = Instant::ZERO;
        while now < end {
            while let Some(&(dep, item)) = queue.front() {
                if dep + owd > now {
                    break;
                }
                queue.pop_front();
                if let Some(info) = item {
                    goodput[(dep + owd).as_secs_f64() as usize] += PKT as f64 * 8.0;
                    if let Some(fb) = rcv.on_packet(&info, dep + owd) {
                        feedback.push_back((dep + owd + owd, fb));
                    }
                }
            }
            if rcv.next_timer().is_some_and(|t| t <= now) {
                if let Some(fb) = rcv.on_timer(now) {
                    feedback.push_back((now + owd, fb));
                }
            }
            while feedback.front().is_some_and(|(t, _)| *t <= now) {
                let (_, fb) = feedback.pop_front().expect("checked");
                snd.on_feedback(&fb, now);
            }
            if snd.next_timer().is_some_and(|t| t <= now) {
                snd.on_timer(now);
            }
            while next_cross <= now {
                enqueue(&mut queue, next_cross, None);
                next_cross =
                    next_cross + Duration::from_nanos((PKT as f64 * 8e9 / cross_bps) as u64);
            }
            if now >= p0 && now < p1 {
                if !idle {
                    idle = true;
                    snd.set_app_limited(true, now);
                }
                next_send = now;
            } else {
                if idle {
                    idle = false;
                    snd.set_app_limited(false, now);
                }
                while next_send <= now {
                    let info = snd.on_send(seq, PKT, next_send);
                    seq += 1;
                    enqueue(&mut queue, next_send, Some(info));
                    let gap = PKT as f64 * 8e9 / snd.rate_bps().max(1.0);
                    next_send = next_send + Duration::from_nanos(gap as u64);
                }
            }
            if now.as_nanos() % 1_000_000_000 == 0 {
                rate.push(snd.rate_bps());
            }
            now = now + Duration::from_micros(100);
        }
        (goodput, rate)
    }

    /// draft-ietf-rmcat-eval-test "media pause and resume", reduced to one GCC flow and
    /// constant-rate cross traffic that takes half the link while the flow pauses and stays. The
    /// flow keeps its estimate over the 20 s pause and gets its share (500 kbit/s) again after;
    /// it used to fall to ~20 kbit/s: the first over-use after the resume set
    /// `A_r = 0.85 R_hat` with `R_hat` the few packets since the resume over a 1 s window.
    #[test]
    fn pause_keeps_the_estimate_and_the_flow_recovers() {
        let (goodput, rate) = paused_flow((40, 60), 500e3, 90);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let before = mean(&goodput[30..40]);
        let held = rate[41..60].iter().copied().fold(f64::INFINITY, f64::min);
        let after = mean(&goodput[70..90]);
        eprintln!(
            "pause: goodput before {before:.0}, sender rate at the pause's start {:.0}, \
             lowest during it {held:.0}, goodput 10-30 s after {after:.0}",
            rate[40]
        );
        assert!(before > 0.8e6, "{before}");
        assert!(mean(&goodput[45..60]) == 0.0, "nothing sent while paused");
        assert!(
            held >= 0.95 * rate[40],
            "estimate kept: {held} vs {}",
            rate[40]
        );
        assert!(after > 0.3e6, "the resumed flow gets its share: {after}");
    }

    /// The first group after a pause has no predecessor: the pause is not a delay variation, even
    /// when the queue (others' traffic) grew meanwhile. The filter and detector start again, and
    /// `R_hat` is measured from the resume on.
    #[test]
    fn gap_after_pause_is_not_a_delay_variation() {
        let cfg = GccConfig::default();
        let mut rcv = GccReceiver::new(&cfg, "gcc").unwrap();
        let ms = Instant::from_millis;
        let mut seq = 0;
        let mut feed = |rcv: &mut GccReceiver, from_ms: u64, to_ms: u64, delay_ms: u64| {
            // 100 packets/s (960 kbit/s), each its own group, constant delay.
            for t in (from_ms..to_ms).step_by(10) {
                let info = SendInfo {
                    seq,
                    size_bytes: PKT,
                    send_ts: ms(t),
                    rtt: None,
                };
                seq += 1;
                rcv.on_packet(&info, ms(t + delay_ms));
                if rcv.next_timer().is_some_and(|d| d <= ms(t + delay_ms)) {
                    rcv.on_timer(ms(t + delay_ms));
                }
            }
        };
        feed(&mut rcv, 0, 40_000, 50);
        let a_r = rcv.remb_bps();
        assert!(rcv.m_hat_ms().abs() < 0.01);
        // The pause: feedback timers run, nothing arrives; A_r stays.
        for t in (40_100..60_000).step_by(50) {
            rcv.on_timer(ms(t));
        }
        assert_eq!(rcv.remb_bps(), a_r);
        assert_eq!(rcv.incoming_rate_bps(ms(60_000)), Some(0.0));
        // Resume with 150 ms more queueing delay than before the pause.
        feed(&mut rcv, 60_000, 60_100, 200);
        assert_eq!(rcv.idle_restarts(), 1);
        assert!(rcv.m_hat_ms().abs() < 0.01, "m_hat {}", rcv.m_hat_ms());
        assert_ne!(rcv.signal(), BwSignal::Overuse);
        assert!(rcv.remb_bps() >= a_r, "{} vs {a_r}", rcv.remb_bps());
        // R_hat: unknown for T / 2 after the resume, then the rate arriving since.
        assert_eq!(rcv.incoming_rate_bps(ms(60_250)), None);
        feed(&mut rcv, 60_100, 61_000, 200);
        let r = rcv.incoming_rate_bps(ms(61_200)).unwrap();
        assert!((r - 960e3).abs() < 0.02 * 960e3, "{r}");
    }

    #[test]
    fn runs_are_deterministic() {
        let a = phases(&GccConfig::default(), &[(20, 0.05)], 3).0;
        let b = phases(&GccConfig::default(), &[(20, 0.05)], 3).0;
        assert_eq!(a[0].rate_bps, b[0].rate_bps);
        assert_eq!(a[0].queue_delay_s, b[0].queue_delay_s);
        assert_eq!(a[0].lost, b[0].lost);
    }

    #[test]
    fn bad_config_names_the_field() {
        let name_of = |cfg: GccConfig| match cfg.check("flow[1].gcc") {
            Err(SimError::InvalidParameter { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        let d = GccConfig::default;
        assert!(d().check("gcc").is_ok());
        let cases: Vec<(GccConfig, &str)> = vec![
            (
                GccConfig {
                    burst_time: Duration::ZERO,
                    ..d()
                },
                "burst_time",
            ),
            (GccConfig { q: 0.0, ..d() }, "q"),
            (GccConfig { e0: -1.0, ..d() }, "e0"),
            (GccConfig { chi: 1.0, ..d() }, "chi"),
            (
                GccConfig {
                    k_u: f64::NAN,
                    ..d()
                },
                "k_u",
            ),
            (GccConfig { k_d: -0.1, ..d() }, "k_d"),
            (
                GccConfig {
                    del_var_th_init_ms: 5.0,
                    ..d()
                },
                "del_var_th_init_ms",
            ),
            (
                GccConfig {
                    del_var_th_max_ms: 1.0,
                    ..d()
                },
                "del_var_th_max_ms",
            ),
            (GccConfig { beta: 1.5, ..d() }, "beta"),
            (GccConfig { eta: 0.9, ..d() }, "eta"),
            (
                GccConfig {
                    loss_low: 0.2,
                    ..d()
                },
                "loss_low",
            ),
            (
                GccConfig {
                    loss_high: 2.0,
                    ..d()
                },
                "loss_high",
            ),
            (
                GccConfig {
                    loss_increase: f64::INFINITY,
                    ..d()
                },
                "loss_increase",
            ),
            (
                GccConfig {
                    feedback_interval: Duration::ZERO,
                    ..d()
                },
                "feedback_interval",
            ),
            (
                GccConfig {
                    detector_gain_groups: 0,
                    ..d()
                },
                "detector_gain_groups",
            ),
            (
                GccConfig {
                    min_rate_bps: 0.0,
                    ..d()
                },
                "min_rate_bps",
            ),
            (
                GccConfig {
                    initial_rate_bps: 2e9,
                    ..d()
                },
                "initial_rate_bps",
            ),
            (
                GccConfig {
                    rate_window: Duration::ZERO,
                    ..d()
                },
                "rate_window",
            ),
            (
                GccConfig {
                    loss_min_packets: 0,
                    ..d()
                },
                "loss_min_packets",
            ),
        ];
        for (cfg, field) in cases {
            assert_eq!(name_of(cfg), format!("flow[1].gcc.{field}"));
        }
        assert!(GccSender::new(&GccConfig { q: -1.0, ..d() }, "x").is_err());
        assert!(GccReceiver::new(&GccConfig { q: -1.0, ..d() }, "x").is_err());
    }
}
