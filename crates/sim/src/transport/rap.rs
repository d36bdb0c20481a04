//! RAP, the Rate Adaptation Protocol (Rejaie, Handley, Estrin, "RAP: An End-to-end Rate-based
//! Congestion Control Mechanism for Realtime Streams in the Internet", IEEE INFOCOM 1999), behind
//! [`RateSender`] / [`RateReceiver`]. Section names below are the paper's headings in its
//! protocol description ("The RAP Protocol").
//!
//! - **State** ("Increase/Decrease Algorithm"): RAP is rate based; its one state variable is the
//!   inter-packet gap `IPG`, and the rate is `S = PacketSize / IPG`
//!   ([`RapConfig::packet_bytes`]).
//! - **Acknowledgements** (loss detection, "ACK-based"): the receiver acknowledges every data
//!   packet. A [`RapAck`] carries the sequence number acknowledged (`A_curr`), that of the last
//!   packet before it that was received (`A_last`, redundancy against a lost ACK) and the data
//!   packet's send timestamp, from which the sender takes one RTT sample per ACK.
//! - **Loss detection, ACK-based**: a packet not yet acknowledged is lost once a packet at least
//!   [`REORDER_THRESHOLD`] (3) sequence numbers beyond it is acknowledged, the paper's analogue of
//!   TCP's three duplicate ACKs (robust to reordering by up to two packets).
//! - **Loss detection, timeout-based**: a packet whose ACK has not arrived `TO` after it was sent
//!   is lost, `TO = MU * SRTT + DELTA * VAR` ([`MU`] = 1.2, [`DELTA`] = 4).
//! - **Decision function / frequency** ("Decision Function", "Decision Frequency"): without loss,
//!   the rate increases once per SRTT; on a detected loss it decreases at once.
//! - **Additive increase** ("Increase/Decrease Algorithm"): the rate grows by one packet per
//!   SRTT, `S_new = S + PacketSize / C` with `C = SRTT`, i.e. `IPG_new = IPG * C / (IPG + C)`.
//! - **Multiplicative decrease**: `S_new = BETA * S` with [`BETA`] = 0.5, i.e. the IPG doubles.
//! - **Clustered losses**: RAP reacts to the first loss of a cluster only. Every packet sent
//!   before a backoff belongs to that loss event (ns-2's RAP marks them inactive); only the loss
//!   of a packet sent after the last backoff causes the next one. So the rate halves at most once
//!   per loss event, and about once per RTT at most.
//! - **No slow start**: RAP starts at [`RapConfig::initial_rate_bps`] and probes additively.
//!   The paper's optional fine-grain rate adaptation (scaling the IPG by the ratio of short- to
//!   long-term RTT averages) is not implemented.
//!
//! Choices the paper leaves open, made here:
//!
//! - RTT estimation is Jacobson/Karels with the RFC 6298 gains (`SRTT += (r - SRTT) / 8`,
//!   `VAR += (|r - SRTT| - VAR) / 4`, first sample `SRTT = r`, `VAR = r / 2`). `MU` and `DELTA` are
//!   the defaults of the ns-2 RAP agent (`mu_ = 1.2`, `phi_ = 4`); that agent smooths with gain 1/2.
//! - Before the first RTT sample the timeout is [`INITIAL_TIMEOUT`] (1 s, as RFC 6298) and the
//!   rate does not increase (there is no SRTT to step by); the first increase comes one SRTT after
//!   the first sample. After a backoff the next increase is one SRTT later (as in ns-2).
//! - At the first RTT sample the rate is raised to one packet per RTT if it is below (ns-2's
//!   agent sets it to that: `ipg_ = srtt_`); a higher rate, e.g. one the FSE gave, is kept.
//! - The rate stays in `[min_rate_bps, max_rate_bps]`. The rate is the state (the IPG follows
//!   from it), so an FSE rate set and read back is the same number.
//! - Application-limited senders do not increase: a step happens only if, since the last
//!   decision, the sender sent at least half the packets its rate allowed (ns-2's `dpthresh_` =
//!   50 %), so a source that cannot fill the rate does not inflate it. Likewise a step needs
//!   feedback: at least half that many ACKs in the period. The paper increases whenever no loss
//!   was detected; without this rule a sender whose ACKs all stop (a dead path) would settle
//!   where one step per SRTT balances one timeout backoff per TO, instead of decaying to
//!   `min_rate_bps`.
//! - `A_last` is the highest sequence number below `A_curr` that the receiver has received (kept
//!   over the last [`RECEIVER_WINDOW`] received packets); the sender treats it as received. ACKs
//!   arriving for packets already declared lost give an RTT sample but undo nothing.
//! - Coupling (seed 003 sec. 5: "for TFRC and RAP the FSE rate becomes the sending rate"):
//!   [`RateSender::set_fse_rate_bps`] sets the IPG directly; since the IPG is RAP's whole state,
//!   [`RateSender::cc_rate_bps`] and [`RateSender::rate_bps`] are the same value, and the AIMD
//!   continues from the FSE's rate.

use crate::error::SimError;
use crate::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use coupling::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet};

/// Multiplicative decrease factor ("Increase/Decrease Algorithm": the rate halves).
pub const BETA: f64 = 0.5;
/// ACK-based loss detection: a packet is lost once one this many sequence numbers beyond it is
/// acknowledged.
pub const REORDER_THRESHOLD: u64 = 3;
/// `TO = MU * SRTT + DELTA * VAR` (ns-2 RAP `mu_`).
pub const MU: f64 = 1.2;
/// `TO = MU * SRTT + DELTA * VAR` (ns-2 RAP `phi_`).
pub const DELTA: f64 = 4.0;
/// SRTT gain (Jacobson/Karels, RFC 6298 alpha).
pub const SRTT_GAIN: f64 = 1.0 / 8.0;
/// VAR gain (Jacobson/Karels, RFC 6298 beta).
pub const VAR_GAIN: f64 = 1.0 / 4.0;
/// Timeout before the first RTT sample.
pub const INITIAL_TIMEOUT: Duration = Duration::from_secs(1);
/// Bytes of an ACK on the wire.
pub const ACK_BYTES: u32 = 40;
/// Additive increase only if at least this share of the packets the rate allowed since the last
/// decision were sent (ns-2 `dpthresh_` = 50 %), and as many acknowledged.
pub const APP_LIMITED_SHARE: f64 = 0.5;
/// Tolerance on "sent at the old IPG" (timer rounding).
pub const CLUSTER_SLACK: Duration = Duration::from_micros(1);
/// How many received sequence numbers the receiver remembers to find `A_last`.
pub const RECEIVER_WINDOW: usize = 1024;

/// RAP's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RapConfig {
    /// The rate at the start (RAP has no slow start).
    pub initial_rate_bps: f64,
    /// `PacketSize` of the IPG arithmetic: the additive step is one such packet per SRTT.
    pub packet_bytes: u32,
    pub min_rate_bps: f64,
    pub max_rate_bps: f64,
}

impl Default for RapConfig {
    fn default() -> Self {
        RapConfig {
            initial_rate_bps: 100e3,
            packet_bytes: 1000,
            min_rate_bps: 8e3,
            max_rate_bps: 1e9,
        }
    }
}

impl RapConfig {
    /// Checks every field; `name` is the parameter path used in errors (e.g. `flow[2].rap`).
    pub fn check(&self, name: &str) -> Result<(), SimError> {
        if self.packet_bytes == 0 {
            return Err(SimError::invalid(
                format!("{name}.packet_bytes"),
                0,
                "a packet size > 0 bytes",
            ));
        }
        let max = coupling::units::MAX_RATE_BPS;
        if !(self.min_rate_bps > 0.0 && self.min_rate_bps <= max) {
            return Err(SimError::invalid(
                format!("{name}.min_rate_bps"),
                self.min_rate_bps,
                "a rate > 0 and <= 1e18 bit/s",
            ));
        }
        if !(self.max_rate_bps >= self.min_rate_bps && self.max_rate_bps <= max) {
            return Err(SimError::invalid(
                format!("{name}.max_rate_bps"),
                self.max_rate_bps,
                "a rate >= min_rate_bps and <= 1e18 bit/s",
            ));
        }
        if !(self.initial_rate_bps >= self.min_rate_bps
            && self.initial_rate_bps <= self.max_rate_bps)
        {
            return Err(SimError::invalid(
                format!("{name}.initial_rate_bps"),
                self.initial_rate_bps,
                "a rate in min_rate_bps..=max_rate_bps",
            ));
        }
        Ok(())
    }

    fn packet_bits(&self) -> f64 {
        self.packet_bytes as f64 * 8.0
    }
}

/// RAP's ACK: one per data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RapAck {
    /// `A_curr`: the data packet acknowledged.
    pub acked_seq: u64,
    /// `A_last`: the highest sequence number below `acked_seq` received so far, if any.
    pub last_seq_before: Option<u64>,
    /// The acknowledged packet's send time (for the RTT sample).
    pub echo_send_ts: Instant,
}

/// Counters of a sender's reactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RapStats {
    /// Multiplicative decreases (one per loss event).
    pub backoffs: u64,
    /// Additive increase steps.
    pub increases: u64,
    /// Packets declared lost by ACK-based detection.
    pub gap_losses: u64,
    /// Packets declared lost by timeout.
    pub timeout_losses: u64,
    pub acks: u64,
}

/// The RAP source: the AIMD rate controller.
#[derive(Debug)]
pub struct RapSender {
    cfg: RapConfig,
    /// The sending rate `S`; the inter-packet gap is `packet_bits / S`. The rate, not the gap, is
    /// kept: an FSE rate set and read back must be the same number (through the gap it came
    /// back one rounding step lower for about 7 % of rates, which the conservative FSE,
    /// Algorithm 2, took for a decrease and answered with a 2-RTT hold: issue 18, Fig. 5.12).
    rate_bps: f64,
    srtt_s: Option<f64>,
    var_s: f64,
    /// The transmission history: packets sent and neither acknowledged nor declared lost, by
    /// sequence number, with their send times.
    history: BTreeMap<u64, Instant>,
    highest_acked: Option<u64>,
    /// One past the highest sequence number sent.
    next_seq: u64,
    /// Packets below this sequence number were sent before the last backoff: their losses belong
    /// to that loss event.
    cluster_end: u64,
    /// The pacer's next send after a backoff was scheduled with the old IPG: a packet sent by
    /// then still belongs to the loss event.
    cluster_until: Option<Instant>,
    last_send: Option<Instant>,
    next_increase: Option<Instant>,
    /// The last increase decision (or the first RTT sample) and the packets sent since.
    period_start: Instant,
    sent_in_period: u64,
    acks_in_period: u64,
    stats: RapStats,
}

impl RapSender {
    /// A sender at `cfg.initial_rate_bps`; checks `cfg` (errors name `{name}.field`).
    pub fn new(cfg: RapConfig, name: &str) -> Result<Self, SimError> {
        cfg.check(name)?;
        Ok(RapSender {
            cfg,
            rate_bps: cfg.initial_rate_bps,
            srtt_s: None,
            var_s: 0.0,
            history: BTreeMap::new(),
            highest_acked: None,
            next_seq: 0,
            cluster_end: 0,
            cluster_until: None,
            last_send: None,
            next_increase: None,
            period_start: Instant::ZERO,
            sent_in_period: 0,
            acks_in_period: 0,
            stats: RapStats::default(),
        })
    }

    pub fn config(&self) -> &RapConfig {
        &self.cfg
    }

    pub fn stats(&self) -> RapStats {
        self.stats
    }

    /// The inter-packet gap for [`RapConfig::packet_bytes`].
    pub fn ipg(&self) -> Duration {
        Duration::from_nanos((self.ipg_s() * 1e9) as u64)
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_s.map(|s| Duration::from_nanos((s * 1e9) as u64))
    }

    /// The loss-detection timeout `TO = MU * SRTT + DELTA * VAR` ([`INITIAL_TIMEOUT`] before the
    /// first RTT sample).
    pub fn timeout(&self) -> Duration {
        Duration::from_nanos((self.timeout_s() * 1e9) as u64)
    }

    /// Packets sent and neither acknowledged nor declared lost.
    pub fn outstanding(&self) -> usize {
        self.history.len()
    }

    fn timeout_s(&self) -> f64 {
        match self.srtt_s {
            Some(s) => MU * s + DELTA * self.var_s,
            None => INITIAL_TIMEOUT.as_secs_f64(),
        }
    }

    fn ipg_s(&self) -> f64 {
        self.cfg.packet_bits() / self.rate_bps
    }

    fn set_rate(&mut self, rate_bps: f64) {
        self.rate_bps = rate_bps.clamp(self.cfg.min_rate_bps, self.cfg.max_rate_bps);
    }

    fn rtt_sample(&mut self, r: f64, now: Instant) {
        match self.srtt_s {
            None => {
                self.srtt_s = Some(r);
                self.var_s = r / 2.0;
                // ns-2's RAP agent sets one packet per RTT at the first ACK (rap.cc, RecvAck:
                // `if (!anyack()) ipg_ = srtt_`). Without it a start below one packet per SRTT
                // never grows at short RTTs: a decision period of one SRTT holds no packet to
                // count (at 10 ms and 100 kbit/s, one packet every 80 ms; issue 18, Fig. 5.2).
                // Raised to it, never lowered: a rate the FSE gave a joining flow is kept.
                self.set_rate(self.rate_bps.max(self.cfg.packet_bits() / r));
                // "Decision Frequency": the first step one SRTT after RAP can measure one.
                self.next_increase = Some(now + secs(r));
                self.period_start = now;
                self.sent_in_period = 0;
                self.acks_in_period = 0;
            }
            Some(s) => {
                self.var_s += VAR_GAIN * ((r - s).abs() - self.var_s);
                self.srtt_s = Some(s + SRTT_GAIN * (r - s));
            }
        }
    }

    /// A packet was declared lost; backs off unless its loss event was already answered.
    fn on_loss(&mut self, seq: u64, now: Instant) {
        if seq < self.cluster_end {
            return;
        }
        self.cluster_end = self.next_seq;
        self.cluster_until = self
            .last_send
            .map(|t| t + secs(self.ipg_s()) + CLUSTER_SLACK);
        // "Increase/Decrease Algorithm": S = BETA * S, i.e. IPG = IPG / BETA.
        self.set_rate(self.rate_bps * BETA);
        self.stats.backoffs += 1;
        if let Some(s) = self.srtt_s {
            self.next_increase = Some(now + secs(s));
            self.period_start = now;
            self.sent_in_period = 0;
            self.acks_in_period = 0;
        }
    }

    /// The additive increase step, once per SRTT.
    fn increase(&mut self, now: Instant) {
        let Some(c) = self.srtt_s else { return };
        let elapsed = now.saturating_since(self.period_start).as_secs_f64();
        let allowed = elapsed / self.ipg_s();
        let need = APP_LIMITED_SHARE * allowed;
        if self.sent_in_period as f64 >= need && self.acks_in_period as f64 >= need {
            // IPG_new = IPG * C / (IPG + C), i.e. S_new = S + PacketSize / C: one more packet
            // per C = SRTT.
            self.set_rate(self.rate_bps + self.cfg.packet_bits() / c);
            self.stats.increases += 1;
        }
        self.period_start = now;
        self.sent_in_period = 0;
        self.acks_in_period = 0;
        self.next_increase = Some(now + secs(c));
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_nanos((s * 1e9).round() as u64)
}

impl RateSender for RapSender {
    fn name(&self) -> &'static str {
        "RAP"
    }

    fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// RAP's AIMD rate; the same as [`RateSender::rate_bps`], as the FSE's rate replaces RAP's
    /// state (see module docs).
    fn cc_rate_bps(&self) -> f64 {
        self.rate_bps()
    }

    /// Sets the sending rate (the IPG) to the FSE's rate, clamped to the configured bounds (a NaN
    /// becomes the minimum rate).
    fn set_fse_rate_bps(&mut self, rate_bps: f64, _now: Instant) {
        let r = rate_bps
            .max(self.cfg.min_rate_bps)
            .min(self.cfg.max_rate_bps);
        self.set_rate(r);
    }

    fn on_send(&mut self, seq: u64, size_bytes: u32, now: Instant) -> SendInfo {
        self.history.insert(seq, now);
        self.next_seq = self.next_seq.max(seq + 1);
        self.last_send = Some(now);
        if self.cluster_until.is_some_and(|t| now <= t) {
            // Paced at the IPG from before the backoff: part of the same loss event.
            self.cluster_end = self.cluster_end.max(seq + 1);
        } else {
            self.cluster_until = None;
        }
        self.sent_in_period += 1;
        SendInfo {
            seq,
            size_bytes,
            send_ts: now,
            rtt: self.srtt(),
        }
    }

    fn on_feedback(&mut self, fb: &Feedback, now: Instant) {
        let Some(ack) = fb.payload.downcast_ref::<RapAck>() else {
            return;
        };
        self.stats.acks += 1;
        self.acks_in_period += 1;
        self.rtt_sample(now.saturating_since(ack.echo_send_ts).as_secs_f64(), now);
        self.history.remove(&ack.acked_seq);
        if let Some(l) = ack.last_seq_before {
            self.history.remove(&l);
        }
        let highest = self
            .highest_acked
            .map_or(ack.acked_seq, |h| h.max(ack.acked_seq));
        self.highest_acked = Some(highest);
        // ACK-based detection: everything still outstanding REORDER_THRESHOLD or more below the
        // highest acknowledged packet is lost.
        while let Some((&seq, _)) = self.history.first_key_value() {
            if seq + REORDER_THRESHOLD > highest {
                break;
            }
            self.history.remove(&seq);
            self.stats.gap_losses += 1;
            self.on_loss(seq, now);
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        let to = self
            .history
            .first_key_value()
            .map(|(_, &sent)| sent + secs(self.timeout_s()));
        match (to, self.next_increase) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_timer(&mut self, now: Instant) {
        // Timeout-based detection (history is in send order, so the oldest comes first).
        let to = secs(self.timeout_s());
        while let Some((&seq, &sent)) = self.history.first_key_value() {
            if sent + to > now {
                break;
            }
            self.history.remove(&seq);
            self.stats.timeout_losses += 1;
            self.on_loss(seq, now);
        }
        if self.next_increase.is_some_and(|t| t <= now) {
            self.increase(now);
        }
    }

    fn rtt(&self) -> Option<Duration> {
        self.srtt()
    }
}

/// The RAP sink: acknowledges every data packet.
#[derive(Debug, Default)]
pub struct RapReceiver {
    /// The most recent [`RECEIVER_WINDOW`] received sequence numbers.
    received: BTreeSet<u64>,
}

impl RapReceiver {
    pub fn new() -> Self {
        RapReceiver::default()
    }
}

impl RateReceiver for RapReceiver {
    fn on_packet(&mut self, info: &SendInfo, _now: Instant) -> Option<Feedback> {
        let last_seq_before = self.received.range(..info.seq).next_back().copied();
        self.received.insert(info.seq);
        while self.received.len() > RECEIVER_WINDOW {
            self.received.pop_first();
        }
        Some(Feedback {
            size_bytes: ACK_BYTES,
            payload: Box::new(RapAck {
                acked_seq: info.seq,
                last_seq_before,
                echo_send_ts: info.send_ts,
            }),
        })
    }

    fn next_timer(&self) -> Option<Instant> {
        None
    }

    fn on_timer(&mut self, _now: Instant) -> Option<Feedback> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{seeded, SimRng};
    use crate::transport::rate::harness::{run, Path, Trace};
    use rand::RngExt;

    const PKT: u32 = 1000;
    const PKT_BITS: f64 = PKT as f64 * 8.0;

    fn cfg(initial: f64, max: f64) -> RapConfig {
        RapConfig {
            initial_rate_bps: initial,
            packet_bytes: PKT,
            min_rate_bps: 1e3,
            max_rate_bps: max,
        }
    }

    fn path(capacity_bps: f64, owd_ms: u64, queue_pkts: usize, loss: f64) -> Path {
        Path {
            capacity_bps,
            one_way_delay: Duration::from_millis(owd_ms),
            queue_pkts,
            loss,
        }
    }

    /// A rate change the sender made in `on_feedback` or `on_timer`.
    #[derive(Clone, Copy, Debug)]
    struct Change {
        t: f64,
        before: f64,
        after: f64,
        srtt: f64,
    }

    /// Wraps a sender and logs every rate change and the highest rate at any send.
    #[derive(Debug)]
    struct Probe {
        inner: RapSender,
        changes: Vec<Change>,
        max_send_rate: f64,
    }

    impl Probe {
        fn new(inner: RapSender) -> Self {
            Probe {
                inner,
                changes: Vec::new(),
                max_send_rate: 0.0,
            }
        }

        fn log(&mut self, before: f64, now: Instant) {
            let after = self.inner.rate_bps();
            if after != before {
                self.changes.push(Change {
                    t: now.as_secs_f64(),
                    before,
                    after,
                    srtt: self.inner.srtt().map_or(f64::NAN, |d| d.as_secs_f64()),
                });
            }
        }

        fn decreases(&self) -> Vec<Change> {
            self.changes
                .iter()
                .filter(|c| c.after < c.before)
                .copied()
                .collect()
        }

        fn increases(&self) -> Vec<Change> {
            self.changes
                .iter()
                .filter(|c| c.after > c.before)
                .copied()
                .collect()
        }
    }

    impl RateSender for Probe {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn rate_bps(&self) -> f64 {
            self.inner.rate_bps()
        }
        fn set_fse_rate_bps(&mut self, rate_bps: f64, now: Instant) {
            self.inner.set_fse_rate_bps(rate_bps, now)
        }
        fn on_send(&mut self, seq: u64, size_bytes: u32, now: Instant) -> SendInfo {
            self.max_send_rate = self.max_send_rate.max(self.inner.rate_bps());
            self.inner.on_send(seq, size_bytes, now)
        }
        fn on_feedback(&mut self, fb: &Feedback, now: Instant) {
            let before = self.inner.rate_bps();
            self.inner.on_feedback(fb, now);
            self.log(before, now);
        }
        fn next_timer(&self) -> Option<Instant> {
            self.inner.next_timer()
        }
        fn on_timer(&mut self, now: Instant) {
            let before = self.inner.rate_bps();
            self.inner.on_timer(now);
            self.log(before, now);
        }
    }

    /// Wraps a receiver and drops arriving packets: with probability `p` before `until`, and the
    /// sequence numbers in `drop`.
    #[derive(Debug)]
    struct Dropper {
        inner: RapReceiver,
        p: f64,
        until: Instant,
        drop: Vec<u64>,
        rng: SimRng,
    }

    impl Dropper {
        fn new(p: f64, until: Instant, drop: Vec<u64>, seed: u64) -> Self {
            Dropper {
                inner: RapReceiver::new(),
                p,
                until,
                drop,
                rng: seeded(seed),
            }
        }
    }

    impl RateReceiver for Dropper {
        fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback> {
            if self.drop.contains(&info.seq)
                || (now < self.until && self.rng.random::<f64>() < self.p)
            {
                return None;
            }
            self.inner.on_packet(info, now)
        }
        fn next_timer(&self) -> Option<Instant> {
            None
        }
        fn on_timer(&mut self, _now: Instant) -> Option<Feedback> {
            None
        }
    }

    fn mean_between(trace: &Trace, v: &[f64], from_s: f64, to_s: f64) -> f64 {
        let xs: Vec<f64> = trace
            .t_s
            .iter()
            .zip(v)
            .filter(|(t, _)| **t > from_s && **t <= to_s)
            .map(|(_, x)| *x)
            .collect();
        xs.iter().sum::<f64>() / xs.len() as f64
    }

    #[test]
    fn grows_from_below_one_packet_per_rtt_at_a_short_rtt() {
        // Seed 003 sec. 5.3's path: 10 Mbit/s, 10 ms RTT. From 100 kbit/s (a packet every 80 ms,
        // longer than the RTT) the rate must still grow: one packet per RTT at the first ACK (as
        // ns-2's agent), then a packet per SRTT per SRTT. Before, no decision period of one SRTT
        // ever held a packet and the rate stayed at 100 kbit/s.
        let mut snd = RapSender::new(cfg(100e3, 1e9), "rap").unwrap();
        let mut rcv = RapReceiver::new();
        run(
            &mut snd,
            &mut rcv,
            &path(10e6, 5, 1000, 0.0),
            PKT,
            Duration::from_secs(2),
            Duration::from_millis(100),
            &mut seeded(1),
        );
        assert!(snd.stats().increases >= 10, "{:?}", snd.stats());
        assert!(snd.rate_bps() > 3e6, "{}", snd.rate_bps());
    }

    #[test]
    fn an_fse_rate_reads_back_as_the_same_number() {
        // Through the inter-packet gap, 7 % of rates came back one rounding step lower, which the
        // conservative FSE (seed 003 Algorithm 2) takes for a decrease and answers with a hold.
        let mut snd = RapSender::new(cfg(100e3, 1e12), "rap").unwrap();
        let mut rng = seeded(3);
        for _ in 0..10_000 {
            let r: f64 = 10f64.powf(rng.random_range(3.5..9.0));
            snd.set_fse_rate_bps(r, Instant::ZERO);
            assert_eq!(snd.cc_rate_bps(), r);
            assert_eq!(snd.rate_bps(), r);
        }
    }

    #[test]
    fn sawtooth_on_a_one_bdp_queue() {
        // 1 Mbit/s, 100 ms RTT: BDP = 12.5 packets of 1000 bytes.
        let c = 1e6;
        let mut snd = Probe::new(RapSender::new(cfg(100e3, 1e9), "rap").unwrap());
        let mut rcv = RapReceiver::new();
        let trace = run(
            &mut snd,
            &mut rcv,
            &path(c, 50, 12, 0.0),
            PKT,
            Duration::from_secs(200),
            Duration::from_millis(500),
            &mut seeded(1),
        );
        if std::env::var("RAP_DEBUG").is_ok() {
            for c in snd.changes.iter().filter(|c| c.t > 50.0 && c.t < 56.0) {
                eprintln!(
                    "{:.4} {:.0} -> {:.0} srtt {:.4}",
                    c.t, c.before, c.after, c.srtt
                );
            }
        }
        let goodput = mean_between(&trace, &trace.goodput_bps, 20.0, 200.0);
        let dec = snd.decreases();
        let inc = snd.increases();
        let st = snd.inner.stats();
        eprintln!(
            "goodput {:.0} ({:.1}% of capacity), {} backoffs, {} increases, {:?}, sent {} lost {}",
            goodput,
            100.0 * goodput / c,
            dec.len(),
            inc.len(),
            st,
            trace.sent,
            trace.lost
        );
        assert!(goodput > 0.8 * c, "goodput {goodput}");
        assert!(dec.len() >= 30, "{} backoffs", dec.len());
        assert_eq!(dec.len() as u64, st.backoffs);
        for d in &dec {
            assert!((d.after / d.before - BETA).abs() < 1e-9, "{d:?}");
        }
        // Each step adds one packet per SRTT, and steps come once per SRTT.
        for w in inc.windows(2) {
            let step_pkts = (w[1].after - w[1].before) * w[1].srtt / PKT_BITS;
            assert!((step_pkts - 1.0).abs() < 1e-6, "{:?}", w[1]);
        }
        // Between consecutive backoffs, the rate in packets per RTT grows by about one per RTT.
        let mut growth = Vec::new();
        for w in dec.windows(2) {
            let steps: Vec<&Change> = inc
                .iter()
                .filter(|i| i.t > w[0].t && i.t < w[1].t)
                .collect();
            if steps.len() < 3 {
                continue;
            }
            let span = steps.last().unwrap().t - steps[0].t;
            let mean_srtt = steps.iter().map(|s| s.srtt).sum::<f64>() / steps.len() as f64;
            growth.push((steps.len() - 1) as f64 / (span / mean_srtt));
        }
        let g = growth.iter().sum::<f64>() / growth.len() as f64;
        eprintln!(
            "steps per SRTT between backoffs: {g:.3} over {} cycles",
            growth.len()
        );
        assert!(
            growth.iter().all(|&x| (0.9..=1.05).contains(&x)),
            "{growth:?}"
        );
        // Backoffs at most about once per RTT.
        for w in dec.windows(2) {
            assert!(w[1].t - w[0].t > 0.1, "{:?} {:?}", w[0], w[1]);
        }
    }

    /// Reno's long-run rate with one ACK per packet (a = 1): sqrt(3/2) * MSS / (RTT * sqrt(p)).
    fn reno_bps(mss_bits: f64, rtt_s: f64, p: f64) -> f64 {
        (1.5f64).sqrt() * mss_bits / (rtt_s * p.sqrt())
    }

    fn bernoulli_vs_reno(p: f64, secs: u64, seed: u64) -> (f64, f64) {
        // 100 Mbit/s and a huge queue: no queueing loss, only Bernoulli loss; RTT 100 ms.
        let mut snd = RapSender::new(cfg(100e3, 1e9), "rap").unwrap();
        let mut rcv = RapReceiver::new();
        let trace = run(
            &mut snd,
            &mut rcv,
            &path(100e6, 50, 100_000, p),
            PKT,
            Duration::from_secs(secs),
            Duration::from_secs(1),
            &mut seeded(seed),
        );
        let goodput = mean_between(&trace, &trace.goodput_bps, 20.0, secs as f64);
        let reno = reno_bps(PKT_BITS, 0.1 + PKT_BITS / 100e6, p);
        let st = snd.stats();
        eprintln!(
            "p = {p}: RAP {goodput:.0} bit/s, Reno {reno:.0} bit/s, ratio {:.3}, \
             measured loss {:.5}, {} backoffs, {} timeout losses",
            goodput / reno,
            trace.lost as f64 / trace.sent as f64,
            st.backoffs,
            st.timeout_losses
        );
        (goodput, reno)
    }

    #[test]
    fn bernoulli_loss_1e2_within_20_percent_of_reno() {
        let (rap, reno) = bernoulli_vs_reno(1e-2, 600, 2);
        assert!((rap / reno - 1.0).abs() < 0.2, "RAP {rap} Reno {reno}");
    }

    #[test]
    fn bernoulli_loss_1e3_within_20_percent_of_reno() {
        let (rap, reno) = bernoulli_vs_reno(1e-3, 1500, 3);
        assert!((rap / reno - 1.0).abs() < 0.2, "RAP {rap} Reno {reno}");
    }

    #[test]
    fn persistent_loss_drops_the_rate_and_it_recovers() {
        let c = 1e6;
        let mut snd = RapSender::new(cfg(500e3, 1e9), "rap").unwrap();
        // 10 % loss for the first 40 s, none after.
        let mut rcv = Dropper::new(0.1, Instant::from_secs(40), vec![], 4);
        let trace = run(
            &mut snd,
            &mut rcv,
            &path(c, 50, 12, 0.0),
            PKT,
            Duration::from_secs(80),
            Duration::from_millis(500),
            &mut seeded(5),
        );
        let lossy = mean_between(&trace, &trace.rate_bps, 10.0, 40.0);
        let after = mean_between(&trace, &trace.goodput_bps, 50.0, 80.0);
        let reno = reno_bps(PKT_BITS, 0.1, 0.1);
        eprintln!(
            "10% loss: mean rate {lossy:.0} ({:.1}% of capacity, Reno formula {reno:.0}); \
             after: goodput {after:.0} ({:.1}%)",
            100.0 * lossy / c,
            100.0 * after / c
        );
        assert!(lossy < 0.4 * c, "rate under 10 % loss {lossy}");
        assert!(after > 0.8 * c, "goodput after loss stops {after}");
        // Recovery is additive: from the lossy level to capacity within a few seconds.
        let back = trace
            .t_s
            .iter()
            .zip(&trace.rate_bps)
            .find(|(t, r)| **t > 40.0 && **r >= c)
            .map(|(t, _)| *t)
            .unwrap();
        eprintln!("rate back at capacity at t = {back:.1} s");
        assert!(back < 45.0, "{back}");
    }

    #[test]
    fn never_faster_than_max_rate() {
        let max = 300e3;
        let mut snd = Probe::new(RapSender::new(cfg(200e3, max), "rap").unwrap());
        let mut rcv = RapReceiver::new();
        let trace = run(
            &mut snd,
            &mut rcv,
            &path(10e6, 50, 100, 0.0),
            PKT,
            Duration::from_secs(30),
            Duration::from_millis(100),
            &mut seeded(6),
        );
        assert!(
            trace.rate_bps.iter().all(|&r| r <= max),
            "{:?}",
            trace.rate_bps
        );
        assert!(snd.max_send_rate <= max);
        assert_eq!(snd.rate_bps(), max, "reaches the cap without loss");
        let goodput = mean_between(&trace, &trace.goodput_bps, 5.0, 30.0);
        assert!(goodput <= max * 1.01, "{goodput}");
        // The FSE cannot push it past the bounds either.
        snd.set_fse_rate_bps(1e12, Instant::ZERO);
        assert_eq!(snd.rate_bps(), max);
        snd.set_fse_rate_bps(f64::INFINITY, Instant::ZERO);
        assert_eq!(snd.rate_bps(), max);
        snd.set_fse_rate_bps(f64::NAN, Instant::ZERO);
        assert_eq!(snd.rate_bps(), 1e3);
    }

    #[test]
    fn burst_of_three_losses_halves_once() {
        let mut snd = Probe::new(RapSender::new(cfg(400e3, 1e9), "rap").unwrap());
        // Three consecutive packets lost, then, much later, a single one.
        let mut rcv = Dropper::new(0.0, Instant::ZERO, vec![100, 101, 102, 400], 7);
        run(
            &mut snd,
            &mut rcv,
            &path(100e6, 50, 1000, 0.0),
            PKT,
            Duration::from_secs(8),
            Duration::from_millis(100),
            &mut seeded(8),
        );
        let st = snd.inner.stats();
        let dec = snd.decreases();
        eprintln!("{st:?} {dec:?}");
        assert_eq!(st.gap_losses, 4);
        assert_eq!(st.timeout_losses, 0);
        assert_eq!(st.backoffs, 2, "one for the burst, one for the later loss");
        assert_eq!(dec.len(), 2);
        for d in &dec {
            assert!((d.after / d.before - BETA).abs() < 1e-9, "{d:?}");
        }
    }

    #[test]
    fn losses_clustered_within_one_rtt_halve_once() {
        let mut snd = Probe::new(RapSender::new(cfg(400e3, 1e9), "rap").unwrap());
        // 50 packets/s: packets 100 and 104 are 80 ms apart, both sent before the backoff.
        let mut rcv = Dropper::new(0.0, Instant::ZERO, vec![100, 104], 9);
        run(
            &mut snd,
            &mut rcv,
            &path(100e6, 50, 1000, 0.0),
            PKT,
            Duration::from_secs(5),
            Duration::from_millis(100),
            &mut seeded(10),
        );
        assert_eq!(snd.inner.stats().gap_losses, 2);
        assert_eq!(snd.inner.stats().backoffs, 1);
    }

    #[test]
    fn timeout_detects_loss_without_later_acks() {
        let mut snd = RapSender::new(cfg(400e3, 1e9), "rap").unwrap();
        // Everything from packet 200 on is lost: no later ACK, only the timer can tell.
        let mut rcv = Dropper::new(0.0, Instant::ZERO, (200..100_000).collect(), 11);
        run(
            &mut snd,
            &mut rcv,
            &path(100e6, 50, 1000, 0.0),
            PKT,
            Duration::from_secs(6),
            Duration::from_millis(100),
            &mut seeded(12),
        );
        let st = snd.stats();
        let srtt = snd.srtt().unwrap().as_secs_f64();
        let to = snd.timeout().as_secs_f64();
        eprintln!(
            "{st:?} srtt {srtt:.4} timeout {to:.4} rate {:.0}",
            snd.rate_bps()
        );
        assert!((srtt - 0.1).abs() < 0.002, "srtt {srtt}");
        assert!((to - MU * srtt).abs() < 0.01, "timeout {to}");
        assert_eq!(st.gap_losses, 0);
        assert!(st.timeout_losses > 0);
        // One backoff per loss event: each halving needs a packet sent after the previous one,
        // so at most one per timeout.
        assert!(
            st.backoffs >= 2 && st.backoffs as f64 <= 5.0 / to + 1.0,
            "{st:?}"
        );
        assert!(snd.rate_bps() < 400e3 / 4.0);
        assert!(snd.outstanding() < 20, "history purged by timeouts");
    }

    #[test]
    fn increase_steps_one_packet_per_srtt_and_fse_rate_replaces_state() {
        let mut snd = RapSender::new(cfg(100e3, 1e9), "rap").unwrap();
        let mut rcv = RapReceiver::new();
        let t0 = Instant::ZERO;
        let rtt = Duration::from_millis(100);
        // Send one packet and ack it: the first RTT sample, no increase yet.
        let info = snd.on_send(0, PKT, t0);
        let fb = rcv
            .on_packet(&info, t0 + Duration::from_millis(50))
            .unwrap();
        assert_eq!(fb.size_bytes, ACK_BYTES);
        let ack = fb.payload.downcast_ref::<RapAck>().unwrap();
        assert_eq!(
            *ack,
            RapAck {
                acked_seq: 0,
                last_seq_before: None,
                echo_send_ts: t0
            }
        );
        snd.on_feedback(&fb, t0 + rtt);
        assert_eq!(snd.rate_bps(), 100e3);
        assert_eq!(snd.srtt(), Some(rtt));
        let t1 = snd.next_timer().unwrap();
        assert_eq!(t1, t0 + rtt + rtt);
        // The FSE's rate becomes the sending rate and RAP's own.
        snd.set_fse_rate_bps(240e3, t0 + rtt);
        assert_eq!(snd.rate_bps(), 240e3);
        assert_eq!(snd.cc_rate_bps(), 240e3);
        // Not app-limited and acknowledged: then one step of one packet per SRTT.
        let mut fbs = Vec::new();
        for s in 1..=3 {
            let info = snd.on_send(s, PKT, t0 + rtt);
            fbs.push(
                rcv.on_packet(&info, t0 + Duration::from_millis(150))
                    .unwrap(),
            );
        }
        for fb in &fbs {
            snd.on_feedback(fb, t1);
        }
        assert_eq!(snd.srtt(), Some(rtt));
        snd.on_timer(t1);
        let expected = 240e3 + PKT_BITS / 0.1;
        assert!(
            (snd.rate_bps() - expected).abs() < 1e-6,
            "{}",
            snd.rate_bps()
        );
        assert_eq!(snd.cc_rate_bps(), snd.rate_bps());
        // An app-limited period (nothing sent) does not increase the rate.
        let t2 = snd.next_timer().unwrap();
        let before = snd.rate_bps();
        snd.on_timer(t2);
        assert_eq!(snd.rate_bps(), before);
        assert_eq!(snd.stats().increases, 1);
    }

    #[test]
    fn receiver_reports_last_packet_before() {
        let mut rcv = RapReceiver::new();
        let info = |seq| SendInfo {
            seq,
            size_bytes: PKT,
            send_ts: Instant::ZERO,
            rtt: None,
        };
        let last = |rcv: &mut RapReceiver, seq| {
            let fb = rcv.on_packet(&info(seq), Instant::ZERO).unwrap();
            fb.payload.downcast_ref::<RapAck>().unwrap().last_seq_before
        };
        assert_eq!(last(&mut rcv, 0), None);
        assert_eq!(last(&mut rcv, 1), Some(0));
        assert_eq!(last(&mut rcv, 5), Some(1)); // 2..=4 missing
        assert_eq!(last(&mut rcv, 3), Some(1)); // late, reordered
        assert_eq!(last(&mut rcv, 6), Some(5));
    }

    #[test]
    fn bad_config_names_the_field() {
        let ok = cfg(100e3, 1e6);
        assert!(ok.check("rap").is_ok());
        assert!(RapConfig::default().check("rap").is_ok());
        let cases: [(RapConfig, &str); 7] = [
            (
                RapConfig {
                    packet_bytes: 0,
                    ..ok
                },
                "flow[1].rap.packet_bytes",
            ),
            (
                RapConfig {
                    min_rate_bps: 0.0,
                    ..ok
                },
                "flow[1].rap.min_rate_bps",
            ),
            (
                RapConfig {
                    min_rate_bps: f64::NAN,
                    ..ok
                },
                "flow[1].rap.min_rate_bps",
            ),
            (
                RapConfig {
                    max_rate_bps: 500.0,
                    ..ok
                },
                "flow[1].rap.max_rate_bps",
            ),
            (
                RapConfig {
                    max_rate_bps: f64::INFINITY,
                    ..ok
                },
                "flow[1].rap.max_rate_bps",
            ),
            (
                RapConfig {
                    initial_rate_bps: 2e6,
                    ..ok
                },
                "flow[1].rap.initial_rate_bps",
            ),
            (
                RapConfig {
                    initial_rate_bps: f64::NAN,
                    ..ok
                },
                "flow[1].rap.initial_rate_bps",
            ),
        ];
        for (c, field) in cases {
            let e = c.check("flow[1].rap").unwrap_err();
            match &e {
                SimError::InvalidParameter { name, .. } => assert_eq!(name, field, "{e}"),
                _ => panic!("{e}"),
            }
            assert!(RapSender::new(c, "flow[1].rap")
                .unwrap_err()
                .to_string()
                .contains(field));
        }
    }
}
