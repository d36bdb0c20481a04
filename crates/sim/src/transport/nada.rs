//! NADA (Network-Assisted Dynamic Adaptation), RFC 8698, behind [`RateSender`]/[`RateReceiver`].
//!
//! **Receiver** (RFC 8698 sec. 4.2, sec. 5.1):
//!
//! - One-way delay `d_fwd = t_curr - t_sent` from [`SendInfo::send_ts`] and the arrival time;
//!   baseline `d_base = min(d_base, d_fwd)` over the whole flow (sec. 4.2, 5.1.1); queuing delay
//!   `d_queue = d_fwd - d_base`, filtered by the minimum over the last 15 samples (the "15-tap
//!   minimum filter" of sec. 5.1.1 / sec. 6.2, [`NadaConfig::min_filter_taps`]).
//! - Losses from gaps in [`SendInfo::seq`] (sec. 5.1.2). `p_inst` is lost / (lost + received)
//!   over the last `LOGWIN`, smoothed once per feedback report as
//!   `p_loss = ALPHA * p_inst + (1 - ALPHA) * p_loss`. No ECN exists in this simulator, so
//!   `p_mark = 0` and its `DMARK` term vanishes.
//! - Non-linear warping (sec. 4.2, eq. (1)): while the last loss lies within
//!   `loss_exp = MULTILOSS * loss_int` packets (`loss_int` the mean of the last 8 loss intervals,
//!   in packets), `d_tilde = QTH * exp(-LAMBDA * (d_queue - QTH) / QTH)` for `d_queue >= QTH`,
//!   else `d_tilde = d_queue`.
//! - Aggregate congestion signal (sec. 4.2, eq. (2)):
//!   `x_curr = d_tilde + DMARK * (p_mark / PMRREF)^2 + DLOSS * (p_loss / PLRREF)^2`.
//! - Receiving rate `r_recv`: bytes that arrived in the last `LOGWIN` over `LOGWIN` (sec. 5.1.3);
//!   in the first `LOGWIN` of the flow the span since the first arrival is used instead.
//! - `rmode` (sec. 4.2): accelerated ramp-up when no packet was lost within `LOGWIN` and every
//!   raw queuing-delay sample `d_fwd - d_base` within `LOGWIN` is below `QEPS`; else gradual.
//! - A report every `DELTA` = 100 ms (sec. 4.2 "t_curr - t_last > DELTA", sec. 5.3; seed 003
//!   sec. 6.3.3 "A NADA receiver sends an update to the sender every 100 ms"), carrying `rmode`,
//!   `x_curr`, `r_recv` ([`NadaFeedback`]), plus an echo of the latest packet's send time and
//!   how long it was held, from which the sender takes its RTT.
//!
//! **Sender** (RFC 8698 sec. 4.3), on every report, with `delta` the time since the previous
//! report (the first one: since the first packet was sent):
//!
//! - accelerated ramp-up (eqs. (3)-(4)): `gamma = min(GAMMA_MAX, QBOUND / (rtt + DELTA + DFILT))`,
//!   `r_ref = max(r_ref, (1 + gamma) * r_recv)`;
//! - gradual update (eqs. (5)-(7)): `x_offset = x_curr - PRIO * XREF * RMAX / r_ref`,
//!   `x_diff = x_curr - x_prev`,
//!   `r_ref = r_ref - KAPPA * (delta / TAU) * (x_offset / TAU) * r_ref
//!                  - KAPPA * ETA * (x_diff / TAU) * r_ref`;
//! - then `r_ref` is clipped to `[RMIN, RMAX]` and `x_prev = x_curr`. `x_prev` lives at the
//!   sender, as in the sec. 4.3 pseudo-code. In equilibrium `x_curr = PRIO * XREF * RMAX / r_ref`:
//!   one flow at 1 Mbit/s keeps `10 ms * 1.5` = 15 ms of queue.
//!
//! **Sending rate.** Sec. 5.2 shapes a video encoder's output through a rate-shaping buffer:
//! `r_vin = max(RMIN, r_ref - BETA_V * 8 * buffer_len * FPS)` and
//! `r_send = min(RMAX, r_ref + BETA_S * 8 * buffer_len * FPS)`. There is no encoder here: the
//! pacer sends whenever the rate allows, so the buffer stays empty (`buffer_len = 0`) and
//! `r_vin = r_send = r_ref`. [`RateSender::rate_bps`] and [`RateSender::cc_rate_bps`] both return
//! `r_ref`, and the sec. 5.2 parameters (`FPS`, `BETA_V`, `BETA_S`) are not modelled.
//!
//! **Coupling.** [`RateSender::set_fse_rate_bps`] replaces `r_ref` (RFC 8699 sec. 6.1: "updating
//! r_ref (r_vin and r_send) of flow i with the value of FSE_R(i)"; seed 003 sec. 6.3), clipped
//! to `[RMIN, RMAX]` like every other `r_ref` NADA holds.
//!
//! Choices the RFC leaves open, made here:
//!
//! - `delta` is not capped (a late report scales the offset term; the clip to `RMIN` bounds it).
//! - The RTT is the latest sample `now - echo_send_ts - echo_hold` (zero before the first one,
//!   as in the sec. 4.3 initialisation); it is also stamped on packets as [`SendInfo::rtt`].
//! - `d_base` never expires (a route change or a latecomer that never sees an empty queue would
//!   need a windowed minimum; not modelled).
//! - Out-of-order packets (never produced by the harness) are ignored after the gap that
//!   preceded them was already counted as loss, as sec. 5.1.2 counts them.
//! - No packet in the last `LOGWIN`: `r_recv = 0` and gradual mode (no evidence of an empty
//!   queue). No report is sent before the first packet arrives.
//!
//! Time comes in as arguments; nothing here reads a clock.

use crate::error::SimError;
use crate::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use coupling::{Duration, Instant};
use std::collections::VecDeque;

/// Bytes a feedback report occupies on the wire (IP/UDP/RTCP headers and the report fields).
pub const FEEDBACK_BYTES: u32 = 64;

/// Loss intervals averaged for `loss_int` (sec. 4.2; the count is this implementation's choice,
/// TFRC's 8 of RFC 5348 sec. 5.4).
pub const LOSS_INTERVALS: usize = 8;

/// NADA's parameters, RFC 8698 Figure 3 (core algorithm) and sec. 5.1 (receiver estimation).
/// Times are in seconds (`_s`), rates in bit/s (`_bps`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NadaConfig {
    /// PRIO, weight of priority of the flow: 1.0.
    pub prio: f64,
    /// RMIN, minimum allowed rate: 150 kbit/s.
    pub rmin_bps: f64,
    /// RMAX, maximum allowed rate: 1.5 Mbit/s.
    pub rmax_bps: f64,
    /// XREF, reference congestion level: 10 ms.
    pub xref_s: f64,
    /// KAPPA, scaling parameter for gradual rate update calculation: 0.5.
    pub kappa: f64,
    /// ETA, scaling parameter for gradual rate update calculation: 2.0.
    pub eta: f64,
    /// TAU, upper bound of RTT in gradual rate update calculation: 500 ms.
    pub tau_s: f64,
    /// DELTA, target feedback interval: 100 ms.
    pub delta_s: f64,
    /// LOGWIN, observation window for packet statistics at the receiver: 500 ms.
    pub logwin_s: f64,
    /// QEPS, threshold for determining queuing delay build-up at the receiver: 10 ms.
    pub qeps_s: f64,
    /// DFILT, bound on filtering delay: 120 ms.
    pub dfilt_s: f64,
    /// GAMMA_MAX, upper bound on the rate increase ratio for accelerated ramp-up: 10 %.
    pub gamma_max: f64,
    /// QBOUND, upper bound on self-inflicted queuing delay during ramp-up: 50 ms.
    pub qbound_s: f64,
    /// MULTILOSS, multiplier of the average loss interval giving the loss expiration
    /// `loss_exp`: 7.0.
    pub multiloss: f64,
    /// QTH, delay threshold for invoking non-linear warping: 50 ms.
    pub qth_s: f64,
    /// LAMBDA, scaling parameter in the exponent of non-linear warping: 0.5.
    pub lambda: f64,
    /// PLRREF, reference packet loss ratio: 0.01.
    pub plrref: f64,
    /// PMRREF, reference packet marking ratio: 0.01.
    pub pmrref: f64,
    /// DLOSS, reference delay penalty for loss when the loss ratio is at PLRREF: 10 ms.
    pub dloss_s: f64,
    /// DMARK, reference delay penalty for ECN marking when the marking ratio is at PMRREF: 2 ms.
    pub dmark_s: f64,
    /// ALPHA, smoothing factor of the loss (and marking) ratio, sec. 5.1.2: 0.1.
    pub alpha: f64,
    /// Taps of the minimum filter over queuing-delay samples, sec. 5.1.1 / sec. 6.2: 15.
    pub min_filter_taps: usize,
    /// Initial `r_ref`; sec. 4.3 initialises `r_ref = RMIN`.
    pub start_rate_bps: f64,
}

impl Default for NadaConfig {
    fn default() -> Self {
        NadaConfig {
            prio: 1.0,
            rmin_bps: 150e3,
            rmax_bps: 1.5e6,
            xref_s: 0.010,
            kappa: 0.5,
            eta: 2.0,
            tau_s: 0.500,
            delta_s: 0.100,
            logwin_s: 0.500,
            qeps_s: 0.010,
            dfilt_s: 0.120,
            gamma_max: 0.10,
            qbound_s: 0.050,
            multiloss: 7.0,
            qth_s: 0.050,
            lambda: 0.5,
            plrref: 0.01,
            pmrref: 0.01,
            dloss_s: 0.010,
            dmark_s: 0.002,
            alpha: 0.1,
            min_filter_taps: 15,
            start_rate_bps: 150e3,
        }
    }
}

/// The largest time parameter accepted (one day), so conversions to integer nanoseconds fit.
const MAX_TIME_S: f64 = 86_400.0;

impl NadaConfig {
    /// Checks every field; errors name `{name}.{field}`.
    pub fn check(&self, name: &str) -> Result<(), SimError> {
        let err = |field: &str, v: f64, expected: &'static str| {
            Err(SimError::invalid(format!("{name}.{field}"), v, expected))
        };
        let pos = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                err(field, v, "a finite number > 0")
            }
        };
        let nonneg = |field: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                err(field, v, "a finite number >= 0")
            }
        };
        let time = |field: &str, v: f64, zero_ok: bool| {
            if v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && v <= MAX_TIME_S {
                Ok(())
            } else if zero_ok {
                err(field, v, "a time in seconds in 0..=86400")
            } else {
                err(field, v, "a time in seconds in (0, 86400]")
            }
        };
        let ratio = |field: &str, v: f64| {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                err(field, v, "a ratio in (0, 1]")
            }
        };
        pos("prio", self.prio)?;
        if !(self.rmin_bps.is_finite() && self.rmin_bps > 0.0 && self.rmin_bps <= 1e18) {
            return err("rmin_bps", self.rmin_bps, "a rate in bit/s in (0, 1e18]");
        }
        if !(self.rmax_bps.is_finite() && self.rmax_bps >= self.rmin_bps && self.rmax_bps <= 1e18) {
            return err(
                "rmax_bps",
                self.rmax_bps,
                "a rate in bit/s in [rmin_bps, 1e18]",
            );
        }
        time("xref_s", self.xref_s, false)?;
        pos("kappa", self.kappa)?;
        nonneg("eta", self.eta)?;
        time("tau_s", self.tau_s, false)?;
        if !(self.delta_s.is_finite() && self.delta_s >= 1e-6 && self.delta_s <= MAX_TIME_S) {
            return err(
                "delta_s",
                self.delta_s,
                "a time in seconds in [1e-6, 86400]",
            );
        }
        time("logwin_s", self.logwin_s, false)?;
        time("qeps_s", self.qeps_s, true)?;
        time("dfilt_s", self.dfilt_s, true)?;
        nonneg("gamma_max", self.gamma_max)?;
        time("qbound_s", self.qbound_s, true)?;
        nonneg("multiloss", self.multiloss)?;
        time("qth_s", self.qth_s, false)?;
        nonneg("lambda", self.lambda)?;
        ratio("plrref", self.plrref)?;
        ratio("pmrref", self.pmrref)?;
        time("dloss_s", self.dloss_s, true)?;
        time("dmark_s", self.dmark_s, true)?;
        ratio("alpha", self.alpha)?;
        if self.min_filter_taps == 0 {
            return Err(SimError::invalid(
                format!("{name}.min_filter_taps"),
                self.min_filter_taps,
                "at least 1 tap",
            ));
        }
        if !(self.start_rate_bps >= self.rmin_bps && self.start_rate_bps <= self.rmax_bps) {
            return err(
                "start_rate_bps",
                self.start_rate_bps,
                "a rate in [rmin_bps, rmax_bps]",
            );
        }
        Ok(())
    }

    fn delta(&self) -> Duration {
        Duration::from_nanos((self.delta_s * 1e9).round() as u64)
    }

    fn logwin(&self) -> Duration {
        Duration::from_nanos((self.logwin_s * 1e9).round() as u64)
    }

    /// Non-linear warping of the queuing delay, RFC 8698 sec. 4.2 eq. (1).
    pub fn warp(&self, d_queue_s: f64) -> f64 {
        if d_queue_s < self.qth_s {
            d_queue_s
        } else {
            self.qth_s * (-self.lambda * (d_queue_s - self.qth_s) / self.qth_s).exp()
        }
    }

    /// The aggregate congestion signal, RFC 8698 sec. 4.2 eq. (2).
    pub fn x_curr(&self, d_tilde_s: f64, p_mark: f64, p_loss: f64) -> f64 {
        d_tilde_s
            + self.dmark_s * (p_mark / self.pmrref).powi(2)
            + self.dloss_s * (p_loss / self.plrref).powi(2)
    }

    /// Accelerated ramp-up, RFC 8698 sec. 4.3 eqs. (3)-(4) (before clipping).
    pub fn ramp_up(&self, r_ref: f64, r_recv: f64, rtt_s: f64) -> f64 {
        let gamma = self
            .gamma_max
            .min(self.qbound_s / (rtt_s + self.delta_s + self.dfilt_s));
        r_ref.max((1.0 + gamma) * r_recv)
    }

    /// Gradual rate update, RFC 8698 sec. 4.3 eqs. (5)-(7) (before clipping).
    pub fn gradual(&self, r_ref: f64, x_curr_s: f64, x_prev_s: f64, delta_s: f64) -> f64 {
        let x_offset = x_curr_s - self.prio * self.xref_s * self.rmax_bps / r_ref;
        let x_diff = x_curr_s - x_prev_s;
        r_ref
            - self.kappa * (delta_s / self.tau_s) * (x_offset / self.tau_s) * r_ref
            - self.kappa * self.eta * (x_diff / self.tau_s) * r_ref
    }

    fn clip(&self, r: f64) -> f64 {
        r.clamp(self.rmin_bps, self.rmax_bps)
    }
}

/// The sender's mode of rate adaptation, `rmode` of RFC 8698 sec. 4.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RampMode {
    /// `rmode = 0`: no loss and no queue build-up within `LOGWIN`.
    AcceleratedRampUp,
    /// `rmode = 1`.
    GradualUpdate,
}

/// NADA's feedback report (RFC 8698 sec. 4.2, sec. 5.3), carried in [`Feedback::payload`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NadaFeedback {
    pub rmode: RampMode,
    /// Aggregate congestion signal `x_curr`, seconds.
    pub x_curr_s: f64,
    /// Receiving rate `r_recv`, bit/s.
    pub recv_rate_bps: f64,
    /// For inspection: the filtered queuing delay `d_queue` and the smoothed loss ratio.
    pub d_queue_s: f64,
    pub p_loss: f64,
    /// Send time of the latest packet received, and how long the receiver held it before this
    /// report: the sender's RTT sample is `now - echo_send_ts - echo_hold`.
    pub echo_send_ts: Instant,
    pub echo_hold: Duration,
}

/// The NADA sender: the reference rate `r_ref` (RFC 8698 sec. 4.3).
#[derive(Clone, Debug)]
pub struct NadaSender {
    cfg: NadaConfig,
    r_ref: f64,
    x_prev_s: f64,
    /// Time of the previous report (or the first send, before any report).
    t_last: Option<Instant>,
    rtt: Option<Duration>,
    last_mode: Option<RampMode>,
    reports: u64,
}

impl NadaSender {
    /// A sender with `r_ref = start_rate_bps`; errors name `nada.{field}` (call
    /// [`NadaConfig::check`] with your own path first to get a better name).
    pub fn new(cfg: NadaConfig) -> Result<Self, SimError> {
        cfg.check("nada")?;
        Ok(NadaSender {
            cfg,
            r_ref: cfg.start_rate_bps,
            x_prev_s: 0.0,
            t_last: None,
            rtt: None,
            last_mode: None,
            reports: 0,
        })
    }

    pub fn config(&self) -> &NadaConfig {
        &self.cfg
    }

    /// The reference rate `r_ref`, bit/s.
    pub fn r_ref_bps(&self) -> f64 {
        self.r_ref
    }

    /// The latest RTT sample.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// The mode of the latest report.
    pub fn last_mode(&self) -> Option<RampMode> {
        self.last_mode
    }

    /// Reports processed.
    pub fn reports(&self) -> u64 {
        self.reports
    }
}

impl RateSender for NadaSender {
    fn name(&self) -> &'static str {
        "nada"
    }

    /// The controller's RTT estimate, for the conservative FSE's 2-RTT timer.
    fn rtt(&self) -> Option<Duration> {
        NadaSender::rtt(self)
    }

    /// `r_send = r_ref` (no rate-shaping buffer, see the module docs).
    fn rate_bps(&self) -> f64 {
        self.r_ref
    }

    fn cc_rate_bps(&self) -> f64 {
        self.r_ref
    }

    fn set_fse_rate_bps(&mut self, rate_bps: f64, _now: Instant) {
        if rate_bps.is_finite() {
            self.r_ref = self.cfg.clip(rate_bps);
        }
    }

    fn on_send(&mut self, seq: u64, size_bytes: u32, now: Instant) -> SendInfo {
        self.t_last.get_or_insert(now);
        SendInfo {
            seq,
            size_bytes,
            send_ts: now,
            rtt: self.rtt,
        }
    }

    fn on_feedback(&mut self, fb: &Feedback, now: Instant) {
        let Some(fb) = fb.payload.downcast_ref::<NadaFeedback>() else {
            return;
        };
        let rtt = now.saturating_since(fb.echo_send_ts + fb.echo_hold);
        self.rtt = Some(rtt);
        let delta_s = match self.t_last {
            Some(t) => now.saturating_since(t).as_secs_f64(),
            None => self.cfg.delta_s,
        };
        let x_curr = if fb.x_curr_s.is_finite() {
            fb.x_curr_s.max(0.0)
        } else {
            self.x_prev_s
        };
        let r_recv = if fb.recv_rate_bps.is_finite() {
            fb.recv_rate_bps.max(0.0)
        } else {
            0.0
        };
        let r = match fb.rmode {
            RampMode::AcceleratedRampUp => self.cfg.ramp_up(self.r_ref, r_recv, rtt.as_secs_f64()),
            RampMode::GradualUpdate => self.cfg.gradual(self.r_ref, x_curr, self.x_prev_s, delta_s),
        };
        // A NaN (impossible with checked parameters) keeps the old rate.
        if !r.is_nan() {
            self.r_ref = self.cfg.clip(r);
        }
        self.x_prev_s = x_curr;
        self.t_last = Some(now);
        self.last_mode = Some(fb.rmode);
        self.reports += 1;
    }

    fn next_timer(&self) -> Option<Instant> {
        None
    }

    fn on_timer(&mut self, _now: Instant) {}
}

/// One arrival in the `LOGWIN` window.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: Instant,
    bytes: u32,
    /// Packets found missing (a sequence gap) when this one arrived.
    lost: u64,
    d_fwd: Duration,
}

/// The NADA receiver (RFC 8698 sec. 4.2, sec. 5.1).
#[derive(Clone, Debug)]
pub struct NadaReceiver {
    cfg: NadaConfig,
    d_base: Option<Duration>,
    /// The last `min_filter_taps` one-way delays.
    taps: VecDeque<Duration>,
    window: VecDeque<Arrival>,
    highest_seq: Option<u64>,
    /// (send time, arrival time) of the packet with the highest sequence number.
    latest: Option<(Instant, Instant)>,
    first_arrival: Option<Instant>,
    next_report: Option<Instant>,
    p_loss: f64,
    p_mark: f64,
    pkts_since_loss: u64,
    loss_intervals: VecDeque<u64>,
    last_report: Option<NadaFeedback>,
}

impl NadaReceiver {
    /// Errors name `nada.{field}`.
    pub fn new(cfg: NadaConfig) -> Result<Self, SimError> {
        cfg.check("nada")?;
        Ok(NadaReceiver {
            cfg,
            d_base: None,
            taps: VecDeque::with_capacity(cfg.min_filter_taps),
            window: VecDeque::new(),
            highest_seq: None,
            latest: None,
            first_arrival: None,
            next_report: None,
            p_loss: 0.0,
            p_mark: 0.0,
            pkts_since_loss: 0,
            loss_intervals: VecDeque::with_capacity(LOSS_INTERVALS),
            last_report: None,
        })
    }

    /// The latest report sent.
    pub fn last_report(&self) -> Option<&NadaFeedback> {
        self.last_report.as_ref()
    }

    /// Baseline one-way delay `d_base`.
    pub fn d_base(&self) -> Option<Duration> {
        self.d_base
    }

    /// Filtered queuing delay `d_queue` (minimum over the last `min_filter_taps` samples).
    pub fn d_queue_s(&self) -> f64 {
        match (self.d_base, self.taps.iter().min()) {
            (Some(base), Some(&m)) => m.saturating_since_dur(base).as_secs_f64(),
            _ => 0.0,
        }
    }

    fn prune(&mut self, now: Instant) {
        let horizon = now - self.cfg.logwin();
        while self.window.front().is_some_and(|a| a.at <= horizon) {
            self.window.pop_front();
        }
    }

    fn report(&mut self, now: Instant) -> Option<Feedback> {
        let (echo_send_ts, arrived) = self.latest?;
        self.prune(now);
        let first = self.first_arrival.expect("set with latest");
        let logwin = self.cfg.logwin();
        // Rate over (now - span, now]: LOGWIN, or the time since the first arrival early on
        // (whose own bytes then sit on the boundary and are left out).
        let span = logwin.min(now.saturating_since(first));
        let horizon = now - span;
        let (mut bytes, mut recv, mut lost) = (0u64, 0u64, 0u64);
        let mut max_fwd = Duration::ZERO;
        for a in &self.window {
            recv += 1;
            lost += a.lost;
            max_fwd = max_fwd.max(a.d_fwd);
            if a.at > horizon {
                bytes += a.bytes as u64;
            }
        }
        let span_s = span.as_secs_f64();
        let recv_rate_bps = if span_s > 0.0 {
            bytes as f64 * 8.0 / span_s
        } else {
            0.0
        };
        // Sec. 5.1.2: instantaneous ratio over LOGWIN, exponentially smoothed.
        if recv + lost > 0 {
            let p_inst = lost as f64 / (recv + lost) as f64;
            self.p_loss += self.cfg.alpha * (p_inst - self.p_loss);
        }
        let d_base = self.d_base.expect("set with latest");
        let d_queue_s = self.d_queue_s();
        // Sec. 4.2: warp while the last loss is within loss_exp = MULTILOSS * loss_int.
        let d_tilde_s = if self.loss_intervals.is_empty() {
            d_queue_s
        } else {
            let loss_int =
                self.loss_intervals.iter().sum::<u64>() as f64 / self.loss_intervals.len() as f64;
            if (self.pkts_since_loss as f64) < self.cfg.multiloss * loss_int {
                self.cfg.warp(d_queue_s)
            } else {
                d_queue_s
            }
        };
        let x_curr_s = self.cfg.x_curr(d_tilde_s, self.p_mark, self.p_loss);
        let queue_built = max_fwd.saturating_since_dur(d_base).as_secs_f64() >= self.cfg.qeps_s;
        let rmode = if recv > 0 && lost == 0 && !queue_built {
            RampMode::AcceleratedRampUp
        } else {
            RampMode::GradualUpdate
        };
        let fb = NadaFeedback {
            rmode,
            x_curr_s,
            recv_rate_bps,
            d_queue_s,
            p_loss: self.p_loss,
            echo_send_ts,
            echo_hold: now.saturating_since(arrived),
        };
        self.last_report = Some(fb);
        Some(Feedback {
            size_bytes: FEEDBACK_BYTES,
            payload: Box::new(fb),
        })
    }
}

/// `Duration - Duration`, saturating at zero (the coupling crate has `Instant::saturating_since`
/// only).
trait DurationSub {
    fn saturating_since_dur(self, earlier: Duration) -> Duration;
}

impl DurationSub for Duration {
    fn saturating_since_dur(self, earlier: Duration) -> Duration {
        Duration::from_nanos(self.as_nanos().saturating_sub(earlier.as_nanos()))
    }
}

impl RateReceiver for NadaReceiver {
    fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback> {
        let lost = match self.highest_seq {
            // Out of order: discarded, its gap already counted as loss (sec. 5.1.2).
            Some(h) if info.seq <= h => return None,
            Some(h) => info.seq - h - 1,
            None => 0,
        };
        let d_fwd = now.saturating_since(info.send_ts);
        self.d_base = Some(self.d_base.map_or(d_fwd, |b| b.min(d_fwd)));
        if self.taps.len() == self.cfg.min_filter_taps {
            self.taps.pop_front();
        }
        self.taps.push_back(d_fwd);
        if lost > 0 {
            if self.loss_intervals.len() == LOSS_INTERVALS {
                self.loss_intervals.pop_front();
            }
            self.loss_intervals.push_back(self.pkts_since_loss);
            self.pkts_since_loss = 0;
        }
        self.pkts_since_loss += 1;
        self.highest_seq = Some(info.seq);
        self.latest = Some((info.send_ts, now));
        if self.first_arrival.is_none() {
            self.first_arrival = Some(now);
            self.next_report = Some(now + self.cfg.delta());
        }
        self.window.push_back(Arrival {
            at: now,
            bytes: info.size_bytes,
            lost,
            d_fwd,
        });
        self.prune(now);
        None
    }

    fn next_timer(&self) -> Option<Instant> {
        self.next_report
    }

    fn on_timer(&mut self, now: Instant) -> Option<Feedback> {
        match self.next_report {
            Some(t) if t <= now => {}
            _ => return None,
        }
        self.next_report = Some(now + self.cfg.delta());
        self.report(now)
    }
}

/// A sender/receiver pair with one configuration.
pub fn pair(cfg: NadaConfig) -> Result<(NadaSender, NadaReceiver), SimError> {
    Ok((NadaSender::new(cfg)?, NadaReceiver::new(cfg)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{seeded, SimRng};
    use crate::transport::rate::harness::{run, Path, Trace};
    use rand::RngExt;

    const PKT: u32 = 1200;

    fn path(capacity_bps: f64, queue_s: f64, loss: f64) -> Path {
        let tx_s = PKT as f64 * 8.0 / capacity_bps;
        Path {
            capacity_bps,
            one_way_delay: Duration::from_millis(50),
            queue_pkts: (queue_s / tx_s).floor() as usize,
            loss,
        }
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    fn std(v: &[f64]) -> f64 {
        let m = mean(v);
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
    }

    fn run_nada(cfg: NadaConfig, p: &Path, secs: u64, seed: u64) -> Trace {
        let (mut s, mut r) = pair(cfg).unwrap();
        run(
            &mut s,
            &mut r,
            p,
            PKT,
            Duration::from_secs(secs),
            Duration::from_millis(100),
            &mut seeded(seed),
        )
    }

    /// Index of the first sample at or after `t` seconds.
    fn at(trace: &Trace, t: f64) -> usize {
        trace.t_s.iter().position(|&x| x >= t).unwrap()
    }

    #[test]
    fn defaults_are_rfc_8698_figure_3() {
        let c = NadaConfig::default();
        assert_eq!(c.prio, 1.0);
        assert_eq!((c.rmin_bps, c.rmax_bps), (150e3, 1.5e6));
        assert_eq!((c.xref_s, c.kappa, c.eta, c.tau_s), (0.010, 0.5, 2.0, 0.5));
        assert_eq!(
            (c.delta_s, c.logwin_s, c.qeps_s, c.dfilt_s),
            (0.1, 0.5, 0.01, 0.12)
        );
        assert_eq!((c.gamma_max, c.qbound_s, c.multiloss), (0.1, 0.05, 7.0));
        assert_eq!(
            (c.qth_s, c.lambda, c.plrref, c.pmrref),
            (0.05, 0.5, 0.01, 0.01)
        );
        assert_eq!((c.dloss_s, c.dmark_s, c.alpha), (0.01, 0.002, 0.1));
        assert_eq!(c.min_filter_taps, 15);
        c.check("nada").unwrap();
    }

    #[test]
    fn bad_config_names_the_field() {
        let name_of = |c: NadaConfig| match c.check("flow[3].nada") {
            Err(SimError::InvalidParameter { name, .. }) => name,
            other => panic!("expected an error, got {other:?}"),
        };
        let d = NadaConfig::default();
        let cases: Vec<(NadaConfig, &str)> = vec![
            (NadaConfig { prio: 0.0, ..d }, "prio"),
            (
                NadaConfig {
                    rmin_bps: -1.0,
                    ..d
                },
                "rmin_bps",
            ),
            (NadaConfig { rmax_bps: 1e5, ..d }, "rmax_bps"),
            (
                NadaConfig {
                    xref_s: f64::NAN,
                    ..d
                },
                "xref_s",
            ),
            (NadaConfig { kappa: 0.0, ..d }, "kappa"),
            (NadaConfig { eta: -1.0, ..d }, "eta"),
            (NadaConfig { tau_s: 0.0, ..d }, "tau_s"),
            (NadaConfig { delta_s: 0.0, ..d }, "delta_s"),
            (
                NadaConfig {
                    logwin_s: f64::INFINITY,
                    ..d
                },
                "logwin_s",
            ),
            (NadaConfig { qeps_s: -0.1, ..d }, "qeps_s"),
            (NadaConfig { dfilt_s: -0.1, ..d }, "dfilt_s"),
            (
                NadaConfig {
                    gamma_max: -0.1,
                    ..d
                },
                "gamma_max",
            ),
            (
                NadaConfig {
                    qbound_s: f64::NAN,
                    ..d
                },
                "qbound_s",
            ),
            (
                NadaConfig {
                    multiloss: -1.0,
                    ..d
                },
                "multiloss",
            ),
            (NadaConfig { qth_s: 0.0, ..d }, "qth_s"),
            (NadaConfig { lambda: -0.5, ..d }, "lambda"),
            (NadaConfig { plrref: 0.0, ..d }, "plrref"),
            (NadaConfig { pmrref: 1.5, ..d }, "pmrref"),
            (
                NadaConfig {
                    dloss_s: -0.01,
                    ..d
                },
                "dloss_s",
            ),
            (
                NadaConfig {
                    dmark_s: f64::NAN,
                    ..d
                },
                "dmark_s",
            ),
            (NadaConfig { alpha: 0.0, ..d }, "alpha"),
            (
                NadaConfig {
                    min_filter_taps: 0,
                    ..d
                },
                "min_filter_taps",
            ),
            (
                NadaConfig {
                    start_rate_bps: 2e6,
                    ..d
                },
                "start_rate_bps",
            ),
        ];
        for (c, field) in cases {
            assert_eq!(name_of(c), format!("flow[3].nada.{field}"));
        }
        assert!(NadaSender::new(NadaConfig { kappa: -1.0, ..d }).is_err());
        assert!(NadaReceiver::new(NadaConfig { kappa: -1.0, ..d }).is_err());
    }

    #[test]
    fn formulas_match_rfc_8698() {
        let c = NadaConfig::default();
        // Eq. (1): no warping below QTH; QTH * exp(-LAMBDA * 1) at 2 * QTH.
        assert_eq!(c.warp(0.03), 0.03);
        assert!((c.warp(0.1) - 0.05 * (-0.5f64).exp()).abs() < 1e-12);
        // Eq. (2): 1 % loss costs DLOSS, 10 % costs 100 * DLOSS.
        assert!((c.x_curr(0.02, 0.0, 0.01) - 0.03).abs() < 1e-12);
        assert!((c.x_curr(0.0, 0.0, 0.1) - 1.0).abs() < 1e-12);
        assert!((c.x_curr(0.0, 0.01, 0.0) - 0.002).abs() < 1e-12);
        // Eqs. (3)-(4): gamma = min(0.1, 50 / (100 + 100 + 120)) = 0.1.
        assert!((c.ramp_up(100e3, 500e3, 0.1) - 550e3).abs() < 1e-6);
        assert_eq!(c.ramp_up(900e3, 500e3, 0.1), 900e3);
        let big_rtt = c.ramp_up(0.0, 1e6, 0.28); // 50 / 500 = 0.1
        assert!((big_rtt - 1.1e6).abs() < 1e-6);
        let c5 = NadaConfig {
            gamma_max: 0.5,
            ..c
        };
        let g = 0.05 / (0.18 + 0.1 + 0.12); // = 0.125 < GAMMA_MAX
        assert!((c5.ramp_up(0.0, 1e6, 0.18) - (1.0 + g) * 1e6).abs() < 1e-6);
        // Eqs. (5)-(7): the equilibrium x_curr = PRIO * XREF * RMAX / r_ref keeps the rate.
        let r = 1e6;
        let x_eq = 0.010 * 1.5e6 / r;
        assert!((c.gradual(r, x_eq, x_eq, 0.1) - r).abs() < 1e-6);
        // x_offset = 0.035 - 0.015 = 0.02, x_diff = 0.01:
        // r - 0.5 * 0.2 * 0.04 * r - 0.5 * 2 * 0.02 * r = r * (1 - 0.004 - 0.02).
        let got = c.gradual(r, 0.035, 0.025, 0.1);
        assert!((got - r * 0.976).abs() < 1e-6, "{got}");
    }

    fn info(seq: u64, send_ms: u64) -> SendInfo {
        SendInfo {
            seq,
            size_bytes: 1000,
            send_ts: Instant::from_millis(send_ms),
            rtt: None,
        }
    }

    fn nada_fb(fb: Option<Feedback>) -> NadaFeedback {
        *fb.expect("a report")
            .payload
            .downcast_ref::<NadaFeedback>()
            .unwrap()
    }

    #[test]
    fn receiver_measures_delay_loss_rate_and_mode() {
        let cfg = NadaConfig::default();
        let mut r = NadaReceiver::new(cfg).unwrap();
        assert_eq!(r.next_timer(), None);
        // 10 ms spacing, 50 ms one-way delay, no queue: 8 kbit every 10 ms = 800 kbit/s.
        for i in 0..20u64 {
            assert!(r
                .on_packet(&info(i, 10 * i), Instant::from_millis(10 * i + 50))
                .is_none());
        }
        assert_eq!(r.next_timer(), Some(Instant::from_millis(150)));
        let fb = nada_fb(r.on_timer(Instant::from_millis(250)));
        assert_eq!(fb.rmode, RampMode::AcceleratedRampUp);
        assert_eq!(fb.x_curr_s, 0.0);
        assert_eq!(fb.echo_send_ts, Instant::from_millis(190));
        assert_eq!(fb.echo_hold, Duration::from_millis(10));
        // Span 200 ms since the first arrival; 20 packets but the first on the boundary.
        assert!((fb.recv_rate_bps - 19.0 * 8000.0 / 0.2).abs() < 1e-6);
        assert_eq!(r.next_timer(), Some(Instant::from_millis(350)));
        // A 30 ms queue appears: raw samples exceed QEPS at once (gradual mode), the 15-tap
        // minimum filter follows after 15 samples.
        for i in 20..30u64 {
            r.on_packet(&info(i, 10 * i), Instant::from_millis(10 * i + 80));
        }
        let fb = nada_fb(r.on_timer(Instant::from_millis(380)));
        assert_eq!(fb.rmode, RampMode::GradualUpdate);
        assert_eq!(fb.d_queue_s, 0.0);
        for i in 30..40u64 {
            r.on_packet(&info(i, 10 * i), Instant::from_millis(10 * i + 80));
        }
        let fb = nada_fb(r.on_timer(Instant::from_millis(480)));
        assert!((fb.d_queue_s - 0.030).abs() < 1e-9);
        assert!((fb.x_curr_s - 0.030).abs() < 1e-9);
        assert_eq!(r.d_base(), Some(Duration::from_millis(50)));
        // Losses: every 5th packet missing -> p_inst = 20 % once the window holds only them.
        let mut seq = 40;
        for i in 40..140u64 {
            if i % 5 == 0 {
                seq += 1;
                continue;
            }
            r.on_packet(&info(seq, 10 * i), Instant::from_millis(10 * i + 50));
            seq += 1;
        }
        let fb = nada_fb(r.on_timer(Instant::from_millis(1450)));
        assert_eq!(fb.rmode, RampMode::GradualUpdate);
        // p_loss smoothed from 0 with ALPHA = 0.1 over a handful of reports.
        assert!(fb.p_loss > 0.0 && fb.p_loss < 0.2, "{}", fb.p_loss);
        let expect = cfg.x_curr(fb.d_queue_s, 0.0, fb.p_loss);
        assert!((fb.x_curr_s - expect).abs() < 1e-12);
        // A late (reordered) packet is ignored.
        assert!(r
            .on_packet(&info(5, 0), Instant::from_millis(1460))
            .is_none());
    }

    #[test]
    fn warping_applies_only_after_recent_loss() {
        let cfg = NadaConfig::default();
        let mut r = NadaReceiver::new(cfg).unwrap();
        // A 100 ms queue from the start of a steady stream (base from the first packet).
        r.on_packet(&info(0, 0), Instant::from_millis(50));
        for i in 1..60u64 {
            r.on_packet(&info(i, 10 * i), Instant::from_millis(10 * i + 150));
        }
        let fb = nada_fb(r.on_timer(Instant::from_millis(800)));
        assert!((fb.x_curr_s - 0.1).abs() < 1e-9, "no loss: no warping");
        // One loss, then 20 packets: loss_exp = 7 * 60 packets, still warped.
        for i in 61..81u64 {
            r.on_packet(&info(i, 10 * i), Instant::from_millis(10 * i + 150));
        }
        let fb = nada_fb(r.on_timer(Instant::from_millis(960)));
        let warped = cfg.warp(0.1);
        let expect = cfg.x_curr(warped, 0.0, fb.p_loss);
        assert!((fb.x_curr_s - expect).abs() < 1e-9, "{fb:?}");
    }

    #[test]
    fn sender_applies_modes_rtt_clip_and_fse() {
        let cfg = NadaConfig::default();
        let mut s = NadaSender::new(cfg).unwrap();
        assert_eq!(s.rate_bps(), 150e3);
        let i0 = s.on_send(0, 1200, Instant::ZERO);
        assert_eq!(i0.rtt, None);
        let fb = |rmode, x_curr_s, recv_rate_bps| Feedback {
            size_bytes: FEEDBACK_BYTES,
            payload: Box::new(NadaFeedback {
                rmode,
                x_curr_s,
                recv_rate_bps,
                d_queue_s: 0.0,
                p_loss: 0.0,
                echo_send_ts: Instant::from_millis(100),
                echo_hold: Duration::from_millis(20),
            }),
        };
        // RTT = 220 - 100 - 20 = 100 ms; ramp-up: 1.1 * 200k.
        s.on_feedback(
            &fb(RampMode::AcceleratedRampUp, 0.0, 200e3),
            Instant::from_millis(220),
        );
        assert_eq!(s.rtt(), Some(Duration::from_millis(100)));
        assert!((s.rate_bps() - 220e3).abs() < 1e-6);
        assert_eq!(s.on_send(1, 1200, Instant::from_millis(230)).rtt, s.rtt());
        // Gradual: delta = 100 ms.
        let before = s.rate_bps();
        s.on_feedback(
            &fb(RampMode::GradualUpdate, 0.05, 0.0),
            Instant::from_millis(320),
        );
        let expect = cfg.gradual(before, 0.05, 0.0, 0.1);
        assert!((s.rate_bps() - expect).abs() < 1e-6);
        // A huge congestion signal clips at RMIN; ramp-up clips at RMAX.
        s.on_feedback(
            &fb(RampMode::GradualUpdate, 5.0, 0.0),
            Instant::from_millis(420),
        );
        assert_eq!(s.rate_bps(), cfg.rmin_bps);
        s.on_feedback(
            &fb(RampMode::AcceleratedRampUp, 0.0, 1e9),
            Instant::from_millis(520),
        );
        assert_eq!(s.rate_bps(), cfg.rmax_bps);
        // The FSE's rate replaces r_ref; cc_rate_bps reports it.
        s.set_fse_rate_bps(400e3, Instant::from_millis(530));
        assert_eq!((s.rate_bps(), s.cc_rate_bps()), (400e3, 400e3));
        s.set_fse_rate_bps(1.0, Instant::from_millis(540));
        assert_eq!(s.cc_rate_bps(), cfg.rmin_bps);
        s.set_fse_rate_bps(f64::NAN, Instant::from_millis(550));
        assert_eq!(s.cc_rate_bps(), cfg.rmin_bps);
        // Foreign feedback is ignored.
        let n = s.reports();
        s.on_feedback(
            &Feedback {
                size_bytes: 40,
                payload: Box::new(7u32),
            },
            Instant::from_millis(600),
        );
        assert_eq!(s.reports(), n);
    }

    /// Seed 003 Fig. 6.4: one NADA flow over 1 Mbit/s, 50 ms one-way delay, builds a stable,
    /// bounded queue.
    #[test]
    fn single_flow_builds_a_stable_bounded_queue() {
        let p = path(1e6, 0.3, 0.0);
        let t = run_nada(NadaConfig::default(), &p, 60, 1);
        assert_eq!(t.lost, 0, "a 300 ms queue never overflows");
        let from = at(&t, 20.0);
        let mid = at(&t, 40.0);
        let rate = &t.rate_bps[from..];
        let good = &t.goodput_bps[from..];
        let q = &t.queue_delay_s[from..];
        let (q1, q2) = (&t.queue_delay_s[from..mid], &t.queue_delay_s[mid..]);
        eprintln!(
            "rate mean {:.0} std {:.0}, goodput mean {:.0}, queue mean {:.4} (20-40 s {:.4}, \
             40-60 s {:.4}) std {:.4} max {:.4}",
            mean(rate),
            std(rate),
            mean(good),
            mean(q),
            mean(q1),
            mean(q2),
            std(q),
            q.iter().cloned().fold(0.0, f64::max)
        );
        assert!(mean(good) > 0.8e6, "goodput {}", mean(good));
        assert!(
            mean(rate) > 0.8e6 && mean(rate) < 1.05e6,
            "rate {}",
            mean(rate)
        );
        assert!(std(rate) < 0.1e6, "rate oscillation {}", std(rate));
        // Bounded: well below the 300 ms limit, no growth over the second half.
        let qmax = q.iter().cloned().fold(0.0, f64::max);
        assert!(qmax < 0.1, "queue max {qmax}");
        assert!(
            mean(q2) < mean(q1) + 0.005,
            "queue grows: {} -> {}",
            mean(q1),
            mean(q2)
        );
        assert!(std(q) < 0.02, "queue oscillation {}", std(q));
        // Equilibrium x_curr = XREF * RMAX / r: about 15 ms at 1 Mbit/s.
        assert!(mean(q) > 0.005 && mean(q) < 0.04, "queue mean {}", mean(q));
    }

    #[test]
    fn accelerated_ramp_up_reaches_capacity() {
        let p = path(1e6, 0.3, 0.0);
        let t = run_nada(NadaConfig::default(), &p, 20, 2);
        let reach = |frac: f64| {
            t.t_s[t
                .rate_bps
                .iter()
                .position(|&r| r >= frac * 1e6)
                .expect("reached")]
        };
        let (t50, t80, t95) = (reach(0.5), reach(0.8), reach(0.95));
        eprintln!("ramp-up from 150 kbit/s: 50 % at {t50} s, 80 % at {t80} s, 95 % at {t95} s");
        assert!(t80 < 8.0, "80 % of capacity after {t80} s");
        // Ramp-up alone (QBOUND, GAMMA_MAX) overshoots the path by a bounded amount.
        let peak = t.rate_bps.iter().cloned().fold(0.0, f64::max);
        let qpeak = t.queue_delay_s.iter().cloned().fold(0.0, f64::max);
        eprintln!("peak rate {peak:.0}, peak queue {qpeak:.4}");
        assert!(peak < 1.3e6, "peak {peak}");
        assert_eq!(t.lost, 0);
        // Faster ramp-up than gradual mode alone would give (~30 kbit/s per s at x = 0).
        let slow = run_nada(
            NadaConfig {
                gamma_max: 0.0,
                ..NadaConfig::default()
            },
            &p,
            20,
            2,
        );
        let r5 = |tr: &Trace| tr.rate_bps[at(tr, 5.0)];
        eprintln!(
            "rate at 5 s: {:.0} (ramp-up) vs {:.0} (gamma 0)",
            r5(&t),
            r5(&slow)
        );
        assert!(r5(&t) > 2.0 * r5(&slow));
    }

    #[test]
    fn rate_stays_within_rmin_rmax() {
        for (cap, seed) in [(0.2e6, 3), (1e6, 4), (5e6, 5)] {
            let p = path(cap, 0.3, 0.0);
            let cfg = NadaConfig::default();
            let t = run_nada(cfg, &p, 30, seed);
            for &r in &t.rate_bps {
                assert!(r >= cfg.rmin_bps && r <= cfg.rmax_bps, "{r}");
            }
            let tail = &t.rate_bps[at(&t, 15.0)..];
            let m = mean(tail);
            eprintln!("capacity {cap}: mean rate {m:.0}, lost {}", t.lost);
            if cap > cfg.rmax_bps {
                // Capacity above RMAX: the rate sits at RMAX.
                assert!(m > 0.95 * cfg.rmax_bps, "{m}");
            } else {
                // The path is exceeded by a bounded amount only (the queue stays bounded).
                assert!(m < 1.05 * cap, "{m}");
                let q = &t.queue_delay_s[at(&t, 15.0)..];
                assert!(q.iter().all(|&d| d < 0.3), "queue hit its limit");
            }
        }
    }

    /// A receiver wrapper that drops packets with probability `loss` until `until`: a loss
    /// episode the harness's constant `Path::loss` cannot express.
    #[derive(Debug)]
    struct LossyUntil {
        inner: NadaReceiver,
        loss: f64,
        until: Instant,
        rng: SimRng,
    }

    impl RateReceiver for LossyUntil {
        fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback> {
            if now < self.until && self.rng.random::<f64>() < self.loss {
                return None;
            }
            self.inner.on_packet(info, now)
        }
        fn next_timer(&self) -> Option<Instant> {
            self.inner.next_timer()
        }
        fn on_timer(&mut self, now: Instant) -> Option<Feedback> {
            self.inner.on_timer(now)
        }
    }

    #[test]
    fn persistent_loss_lowers_the_rate_and_it_recovers() {
        let cfg = NadaConfig::default();
        let (mut s, r) = pair(cfg).unwrap();
        let mut r = LossyUntil {
            inner: r,
            loss: 0.1,
            until: Instant::from_secs(30),
            rng: seeded(77),
        };
        let p = path(1e6, 0.3, 0.0);
        let t = run(
            &mut s,
            &mut r,
            &p,
            PKT,
            Duration::from_secs(60),
            Duration::from_millis(100),
            &mut seeded(6),
        );
        let during = mean(&t.rate_bps[at(&t, 10.0)..at(&t, 30.0)]);
        let after = mean(&t.rate_bps[at(&t, 45.0)..]);
        let p_loss_max = r.inner.last_report().map(|f| f.p_loss).unwrap_or(0.0);
        let back = t.t_s[at(&t, 30.0)..]
            .iter()
            .zip(&t.rate_bps[at(&t, 30.0)..])
            .find(|(_, &r)| r >= 0.8e6)
            .map(|(t, _)| t - 30.0);
        eprintln!(
            "10 % loss: mean rate {during:.0}; after: {after:.0}, back at 80 % after {back:?} s \
             (final p_loss {p_loss_max:.4})"
        );
        // x_curr ~ DLOSS * (0.1 / 0.01)^2 = 1 s of equivalent delay: r_ref pinned near RMIN.
        assert!(during < 0.3e6, "rate under loss {during}");
        assert!(after > 0.8e6, "rate after loss {after}");
        assert!(back.is_some_and(|b| b < 12.0), "recovery {back:?}");
    }

    #[test]
    fn harness_loss_is_seen_as_loss() {
        // Constant 2 % random loss: x_curr ~ 4 * DLOSS = 40 ms pushes gradual updates down
        // (towards XREF * RMAX / x_curr = 375 kbit/s), while each loss-free LOGWIN (0.98^40 =
        // 45 % of them at ~80 packets/s) is accelerated ramp-up (sec. 4.2 rmode ignores p_loss):
        // the rate stays between the two, below capacity.
        let p = path(1e6, 0.3, 0.02);
        let t = run_nada(NadaConfig::default(), &p, 40, 8);
        let m = mean(&t.rate_bps[at(&t, 20.0)..]);
        eprintln!("2 % loss: mean rate {m:.0}, lost {} of {}", t.lost, t.sent);
        assert!(m < 0.9e6 && m > 0.15e6, "{m}");
    }

    /// Two NADA flows through one FIFO bottleneck (the harness carries one pair): the loop of
    /// `rate::harness::run`, per flow.
    fn run_two(
        cfgs: [NadaConfig; 2],
        starts_s: [u64; 2],
        capacity_bps: f64,
        queue_pkts: usize,
        secs: u64,
    ) -> (Vec<f64>, Vec<[f64; 2]>, Vec<f64>) {
        let owd = Duration::from_millis(50);
        let mut snd = [
            NadaSender::new(cfgs[0]).unwrap(),
            NadaSender::new(cfgs[1]).unwrap(),
        ];
        let mut rcv = [
            NadaReceiver::new(cfgs[0]).unwrap(),
            NadaReceiver::new(cfgs[1]).unwrap(),
        ];
        let tx = Duration::from_nanos((PKT as f64 * 8e9 / capacity_bps) as u64);
        let mut queue: VecDeque<(Instant, usize, SendInfo)> = VecDeque::new();
        let mut fbq: VecDeque<(Instant, usize, Feedback)> = VecDeque::new();
        let mut next_send = [
            Instant::from_secs(starts_s[0]),
            Instant::from_secs(starts_s[1]),
        ];
        let mut seq = [0u64; 2];
        let mut link_free = Instant::ZERO;
        let (mut ts, mut rates, mut qd) = (Vec::new(), Vec::new(), Vec::new());
        let mut next_sample = Instant::from_millis(100);
        let end = Instant::from_secs(secs);
        let mut now = Instant::ZERO;
        while now < end {
            while let Some(&(dep, f, info)) = queue.front() {
                if dep + owd > now {
                    break;
                }
                queue.pop_front();
                assert!(rcv[f].on_packet(&info, dep + owd).is_none());
            }
            for (f, r) in rcv.iter_mut().enumerate() {
                if r.next_timer().is_some_and(|t| t <= now) {
                    if let Some(fb) = r.on_timer(now) {
                        fbq.push_back((now + owd, f, fb));
                    }
                }
            }
            while fbq.front().is_some_and(|(t, _, _)| *t <= now) {
                let (_, f, fb) = fbq.pop_front().unwrap();
                snd[f].on_feedback(&fb, now);
            }
            for f in 0..2 {
                while next_send[f] <= now {
                    let t = next_send[f];
                    let info = snd[f].on_send(seq[f], PKT, t);
                    seq[f] += 1;
                    let waiting = queue.iter().filter(|(d, _, _)| *d > t).count();
                    if waiting < queue_pkts {
                        link_free = link_free.max(t) + tx;
                        queue.push_back((link_free, f, info));
                    }
                    let gap = PKT as f64 * 8e9 / snd[f].rate_bps();
                    next_send[f] = t + Duration::from_nanos(gap as u64);
                }
            }
            if now >= next_sample {
                ts.push(now.as_secs_f64());
                rates.push([snd[0].rate_bps(), snd[1].rate_bps()]);
                qd.push(link_free.saturating_since(now).as_secs_f64());
                next_sample = next_sample + Duration::from_millis(100);
            }
            now = now + Duration::from_micros(100);
        }
        (ts, rates, qd)
    }

    #[test]
    fn two_flows_share_the_bottleneck() {
        let d = NadaConfig::default();
        let tail = |ts: &[f64], rates: &[[f64; 2]], qd: &[f64]| {
            let from = ts.iter().position(|&t| t >= 50.0).unwrap();
            let m = |i: usize| mean(&rates[from..].iter().map(|r| r[i]).collect::<Vec<_>>());
            (m(0), m(1), mean(&qd[from..]))
        };
        // Equal PRIO, same start: both see the same queue, so the equilibrium
        // x_curr = PRIO * XREF * RMAX / r gives equal rates (and 30 ms of queue).
        let (ts, rates, qd) = run_two([d, d], [0, 0], 1e6, 31, 80);
        let (m0, m1, q) = tail(&ts, &rates, &qd);
        eprintln!("two flows, same start: {m0:.0} + {m1:.0} bit/s, queue {q:.4} s");
        assert!((m0 + m1) > 0.9e6 && (m0 + m1) < 1.05e6, "{m0} + {m1}");
        assert!((m0 / m1 - 1.0).abs() < 0.15, "unfair: {m0} vs {m1}");
        assert!(q > 0.02 && q < 0.05, "queue {q}");
        // PRIO 2 : 1 gives about twice the rate.
        let hi = NadaConfig { prio: 2.0, ..d };
        let (ts, rates, qd) = run_two([hi, d], [0, 0], 1e6, 31, 80);
        let (m0, m1, q) = tail(&ts, &rates, &qd);
        eprintln!("PRIO 2 vs 1: {m0:.0} vs {m1:.0} bit/s, queue {q:.4} s");
        assert!(m0 / m1 > 1.6 && m0 / m1 < 2.4, "{m0} vs {m1}");
        // A latecomer (joins at 10 s) takes the standing queue as part of its d_base, sees less
        // queuing delay than the first flow and gets more (the delay-based latecomer effect;
        // d_base never expires here). Utilisation and the queue stay bounded.
        let (ts, rates, qd) = run_two([d, d], [0, 10], 1e6, 31, 80);
        let (m0, m1, q) = tail(&ts, &rates, &qd);
        eprintln!("latecomer: first {m0:.0}, late {m1:.0} bit/s, queue {q:.4} s");
        assert!((m0 + m1) > 0.9e6 && (m0 + m1) < 1.05e6, "{m0} + {m1}");
        assert!(m1 >= m0 && q < 0.1, "{m0} vs {m1}, queue {q}");
    }

    #[test]
    fn deterministic() {
        let p = path(1e6, 0.3, 0.01);
        let a = run_nada(NadaConfig::default(), &p, 10, 9);
        let b = run_nada(NadaConfig::default(), &p, 10, 9);
        assert_eq!(a.rate_bps, b.rate_bps);
        assert_eq!(a.queue_delay_s, b.queue_delay_s);
    }
}
