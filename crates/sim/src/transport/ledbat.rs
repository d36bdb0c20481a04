//! LEDBAT, Low Extra Delay Background Transport (RFC 6817), as a window-based controller behind
//! the Linux-shaped hooks of [`CongestionControl`].
//!
//! LEDBAT keeps the queueing delay it adds at the bottleneck near a target and yields to
//! loss-based TCP, which fills the buffer past that target (RFC 6817 sec. 4.2). Windows are in
//! segments, time comes from [`AckSample::now`]; the controller never reads a clock.
//!
//! - **Delay samples** (sec. 2.3, 2.4.2): the receiver measures the one-way delay of each data
//!   packet from the sender's timestamp and returns it in the ACK
//!   ([`AckSample::one_way_delay`]). Every ACK of new data, in recovery too, feeds the
//!   estimators through [`CongestionControl::pkts_acked`].
//! - **Base delay** (sec. 2.4.2 `update_base_delay`, sec. 3.1.1): the minimum over a history of
//!   per-minute minima, `base_history` = [`BASE_HISTORY`] = 10 buckets (sec. 2.5). A bucket
//!   covers one minute of the simulator's clock (`now / 60 s`, the RFC's `round_to_minute`); the
//!   first sample in a new minute opens a new bucket and drops the oldest. A lower base delay is
//!   thus adopted at once, a higher one (a route change) only once every bucket holding the old
//!   minimum has expired, after at most `base_history` minutes.
//! - **Current delay** (sec. 2.4.2 `update_current_delay`, sec. 2.5.1): the minimum of the last
//!   `current_filter` = [`CURRENT_FILTER`] = 4 samples (the MIN filter of sec. 2.5.1). Samples
//!   older than one RTT (the smoothed RTT, else the ACK's RTT sample) are dropped, the newest
//!   always kept: RFC 6817 says CURRENT_FILTER MUST be limited so that no sample in the list is
//!   older than an RTT.
//! - **Window** (sec. 2.4.2, 3.2.1): `queuing_delay = current - base`,
//!   `off_target = (TARGET - queuing_delay) / TARGET`, and per ACK of new data outside recovery
//!   `cwnd += GAIN * off_target * acked / cwnd` (segments: the RFC's
//!   `GAIN * off_target * bytes_newly_acked * MSS / cwnd` with cwnd in bytes). Since
//!   `queuing_delay >= 0`, `off_target <= 1`: with `GAIN = 1` the window grows by at most one
//!   segment per RTT, TCP Reno's congestion-avoidance rate with byte counting (sec. 2.5). Then
//!   `cwnd <= flightsize + ALLOWED_INCREASE` ([`ALLOWED_INCREASE`] = 1 segment, sec. 2.4.2, 2.5;
//!   flightsize is the flight before this ACK, or cwnd when that flight fills the window to its
//!   last whole segment: the cap limits a sender that does not use its window) and `cwnd >= MIN_CWND` ([`MIN_CWND`] = 2
//!   segments, sec. 2.5). The decrease is not capped (RFC 6817 has no cap; LEDBAT++ adds one).
//! - **Parameters** (sec. 2.5): `TARGET` = [`TARGET`] = 100 ms, the largest value allowed (TARGET
//!   MUST be 100 ms or less, sec. 2.5, explained in sec. 3.3); `GAIN` = [`GAIN`] = 1 (GAIN MUST
//!   be 1 or less). Both, and the others, are fields of [`LedbatConfig`], checked by
//!   [`LedbatConfig::check`] against the RFC's MUSTs.
//! - **Loss** (sec. 2.4.2 "on data loss", sec. 3.2.2): `cwnd = min(cwnd, max(cwnd / 2,
//!   MIN_CWND))`, returned by [`CongestionControl::ssthresh`]; the TCP then sets cwnd to it (SACK
//!   recovery). "At most once per RTT" is the TCP's: one reduction per recovery episode; a
//!   further call inside `Recovery` or `Loss` keeps ssthresh.
//! - **Timeout** (sec. 2.4.2, "no ACKs are received within a CTO"): the TCP sets cwnd = 1
//!   segment; nothing else changes here. The first later ACK raises the window to `MIN_CWND`
//!   (the pseudocode's `cwnd = max(cwnd, MIN_CWND * MSS)` on every ACK), and it then grows by
//!   the LEDBAT rule, not by slow start.
//!
//! Choices made here:
//!
//! - **No slow start.** [`CongestionControl::cong_avoid`] applies the LEDBAT rule to every ACK
//!   whatever ssthresh is (the sender algorithm of sec. 2.4.2 has no slow-start phase), so the
//!   window never grows faster than one segment per RTT, also from the start and after a
//!   timeout. [`CongestionControl::init`] also lowers ssthresh to the initial window, only so that
//!   the connection reports congestion avoidance rather than slow start to couplers.
//! - **Initial window**: the TCP's (`TcpConfig::initial_cwnd_pkts`, 10 by default); sec. 2.5
//!   says INIT_CWND SHOULD be 2 and MUST NOT exceed TCP's, so set the TCP's to 2 for the RFC's
//!   value.
//! - **Segments acked, not ACKs**: growth counts the segments an ACK covers, as the RFC's
//!   `bytes_newly_acked` does, so with delayed ACKs LEDBAT still gains one segment per RTT when
//!   below target, while this simulator's [`crate::transport::cc::NewReno`] (no byte counting)
//!   gains half a segment. One ACK counts at most a window's worth (`min(acked, cwnd)`), so it
//!   adds at most GAIN segments, as one ACK adds at most one segment in TCP's congestion
//!   avoidance with byte counting (RFC 3465): otherwise a cumulative ACK after a timeout (cwnd 1,
//!   go-back-N filling a hole behind many segments) could add dozens of segments at once, since
//!   the flight the TCP reports still counts the segments sent before the timeout and so barely
//!   limits the window there.
//! - **No delay samples** (the receiver does not return them): `off_target` is taken as 1, so the
//!   window grows like TCP's congestion avoidance and only loss limits it (ns-3's TcpLedbat
//!   likewise falls back to NewReno without timestamps).
//! - Clock offset and skew between sender and receiver (sec. 3.1.1) do not arise: the simulator
//!   has one clock.

use crate::error::SimError;
use crate::transport::cc::{AckSample, CaState, CongestionControl, TcpCc};
use coupling::{Duration, Instant};
use std::collections::VecDeque;

/// RFC 6817 sec. 2.5: TARGET, the queueing delay LEDBAT aims at; MUST be 100 ms or less (sec. 3.3
/// explains the value).
pub const TARGET: Duration = Duration::from_millis(100);
/// RFC 6817 sec. 2.5: GAIN; MUST be 1 or less. 1 limits the ramp-up to TCP Reno's.
pub const GAIN: f64 = 1.0;
/// RFC 6817 sec. 2.5: MIN_CWND SHOULD be 2 segments.
pub const MIN_CWND: f64 = 2.0;
/// RFC 6817 sec. 2.5: ALLOWED_INCREASE SHOULD be 1 segment and MUST be greater than 0.
pub const ALLOWED_INCREASE: f64 = 1.0;
/// RFC 6817 sec. 2.5: BASE_HISTORY, the number of per-minute minima; SHOULD be 10.
pub const BASE_HISTORY: usize = 10;
/// RFC 6817 sec. 2.5, 2.5.1: CURRENT_FILTER, the number of recent samples the MIN filter takes.
pub const CURRENT_FILTER: usize = 4;
/// RFC 6817 sec. 2.4.2: each base-delay minimum covers one minute.
pub const BASE_INTERVAL: Duration = Duration::from_secs(60);

/// LEDBAT's parameters (RFC 6817 sec. 2.5); the defaults are the RFC's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LedbatConfig {
    /// TARGET, the queueing delay aimed at: 100 ms by default, at most 100 ms.
    pub target: Duration,
    /// GAIN: 1 by default, in (0, 1].
    pub gain: f64,
    /// MIN_CWND in segments: 2 by default, at least 1 and at most 2 (TCP's minimum after a loss,
    /// RFC 5681 eq. (4)).
    pub min_cwnd_pkts: f64,
    /// ALLOWED_INCREASE in segments: 1 by default, greater than 0.
    pub allowed_increase_pkts: f64,
    /// BASE_HISTORY, per-minute minima kept: 10 by default, at least 1.
    pub base_history: usize,
    /// CURRENT_FILTER, recent samples under the MIN filter: 4 by default, at least 1.
    pub current_filter: usize,
}

impl Default for LedbatConfig {
    fn default() -> Self {
        LedbatConfig {
            target: TARGET,
            gain: GAIN,
            min_cwnd_pkts: MIN_CWND,
            allowed_increase_pkts: ALLOWED_INCREASE,
            base_history: BASE_HISTORY,
            current_filter: CURRENT_FILTER,
        }
    }
}

impl LedbatConfig {
    /// Checks every field against RFC 6817 sec. 2.5; `name` is the parameter path used in errors.
    pub fn check(&self, name: &str) -> Result<(), SimError> {
        if self.target == Duration::ZERO || self.target > TARGET {
            return Err(SimError::invalid(
                format!("{name}.target"),
                self.target,
                "a target queueing delay in (0, 100 ms] (RFC 6817 sec. 2.5)",
            ));
        }
        if !(self.gain > 0.0 && self.gain <= 1.0) {
            return Err(SimError::invalid(
                format!("{name}.gain"),
                self.gain,
                "a gain in (0, 1] (RFC 6817 sec. 2.5)",
            ));
        }
        if !(self.min_cwnd_pkts >= 1.0 && self.min_cwnd_pkts <= 2.0) {
            return Err(SimError::invalid(
                format!("{name}.min_cwnd_pkts"),
                self.min_cwnd_pkts,
                "a minimum window in [1, 2] segments, no larger than TCP's (RFC 6817 sec. 2.5)",
            ));
        }
        if !(self.allowed_increase_pkts > 0.0 && self.allowed_increase_pkts.is_finite()) {
            return Err(SimError::invalid(
                format!("{name}.allowed_increase_pkts"),
                self.allowed_increase_pkts,
                "a finite allowed increase > 0 segments (RFC 6817 sec. 2.5)",
            ));
        }
        if self.base_history == 0 {
            return Err(SimError::invalid(
                format!("{name}.base_history"),
                0,
                "at least one per-minute minimum",
            ));
        }
        if self.current_filter == 0 {
            return Err(SimError::invalid(
                format!("{name}.current_filter"),
                0,
                "at least one sample in the current-delay filter",
            ));
        }
        Ok(())
    }
}

/// LEDBAT (RFC 6817); see the module docs for the rules and the choices made.
#[derive(Clone, Debug, Default)]
pub struct Ledbat {
    cfg: LedbatConfig,
    /// Per-minute minima of the one-way delay, oldest first, at most `base_history` of them.
    base_delays: VecDeque<Duration>,
    /// The minute (`now / BASE_INTERVAL`) of the newest bucket in `base_delays`.
    last_rollover: Option<u64>,
    /// The last `current_filter` samples with their times, oldest first.
    current_delays: VecDeque<(Instant, Duration)>,
}

impl Ledbat {
    /// A controller with `cfg`, once [`LedbatConfig::check`] accepts it.
    pub fn new(cfg: LedbatConfig) -> Result<Self, SimError> {
        cfg.check("ledbat")?;
        Ok(Ledbat {
            cfg,
            ..Ledbat::default()
        })
    }

    pub fn config(&self) -> LedbatConfig {
        self.cfg
    }

    /// The base delay: the minimum of the per-minute minima (sec. 2.4.2 `BASE_DELAY()`).
    pub fn base_delay(&self) -> Option<Duration> {
        self.base_delays.iter().copied().min()
    }

    /// The current delay: the MIN filter over the recent samples (sec. 2.4.2 `FILTER()`).
    pub fn current_delay(&self) -> Option<Duration> {
        self.current_delays.iter().map(|&(_, d)| d).min()
    }

    /// `current_delay - base_delay`, once there is a sample.
    pub fn queuing_delay(&self) -> Option<Duration> {
        let (cur, base) = (self.current_delay()?, self.base_delay()?);
        Some(Duration::from_nanos(
            cur.as_nanos().saturating_sub(base.as_nanos()),
        ))
    }

    /// `(TARGET - queuing_delay) / TARGET`, once there is a sample; at most 1.
    pub fn off_target(&self) -> Option<f64> {
        let q = self.queuing_delay()?.as_secs_f64();
        let target = self.cfg.target.as_secs_f64();
        Some((target - q) / target)
    }

    /// Takes one one-way delay sample at `now` (sec. 2.4.2 `update_base_delay` and
    /// `update_current_delay`); samples older than `rtt` leave the current-delay filter.
    pub fn on_delay_sample(&mut self, delay: Duration, now: Instant, rtt: Option<Duration>) {
        // Base delay: one minimum per minute of the clock.
        let minute = now.as_nanos() / BASE_INTERVAL.as_nanos();
        match self.base_delays.back_mut() {
            Some(tail) if self.last_rollover == Some(minute) => *tail = (*tail).min(delay),
            _ => {
                self.last_rollover = Some(minute);
                self.base_delays.push_back(delay);
                while self.base_delays.len() > self.cfg.base_history {
                    self.base_delays.pop_front();
                }
            }
        }
        // Current delay: the last CURRENT_FILTER samples, none older than an RTT.
        self.current_delays.push_back((now, delay));
        while self.current_delays.len() > self.cfg.current_filter {
            self.current_delays.pop_front();
        }
        if let Some(rtt) = rtt {
            while self.current_delays.len() > 1
                && self
                    .current_delays
                    .front()
                    .is_some_and(|&(t, _)| now.saturating_since(t) > rtt)
            {
                self.current_delays.pop_front();
            }
        }
    }
}

impl CongestionControl for Ledbat {
    fn name(&self) -> &'static str {
        "ledbat"
    }

    /// No slow start: ssthresh starts at the initial window so the connection reports congestion
    /// avoidance; [`Self::cong_avoid`] ignores ssthresh anyway.
    fn init(&mut self, tp: &mut TcpCc) {
        tp.ssthresh = tp.ssthresh.min(tp.cwnd);
    }

    /// Sec. 2.4.2 "on data loss": `min(cwnd, max(cwnd / 2, MIN_CWND))`, once per episode.
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        if tp.ca_state != CaState::Open {
            return tp.ssthresh;
        }
        tp.cwnd.min((tp.cwnd / 2.0).max(self.cfg.min_cwnd_pkts))
    }

    /// Sec. 2.4.2 "on acknowledgment", the window part; the delay estimators were updated in
    /// [`Self::pkts_acked`].
    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        let acked = ack.acked as f64;
        let off_target = self.off_target().unwrap_or(1.0);
        // At most a window's worth counts, so one ACK adds at most GAIN segments.
        let counted = acked.min(tp.cwnd.max(1.0));
        let mut cwnd = tp.cwnd + self.cfg.gain * off_target * counted / tp.cwnd.max(1.0);
        // The flight before this ACK, plus ALLOWED_INCREASE. The cap is there for a sender that
        // does not use its window (sec. 2.4.2: application-limited); a flight that fills the
        // window to its last whole segment is the window, so the cap is taken from cwnd then.
        // Taken from the whole segments in flight, a window of 10.9 could never pass 11 when
        // its growth is split among coupled flows (ctrlTCP gives each of n flows 1/n of it, so
        // every share approaches 11 from below and stays there: issue 18, Figs. 8.3-8.6).
        let flight = tp.in_flight + acked;
        let flightsize = if flight + 1.0 > tp.cwnd {
            flight.max(tp.cwnd)
        } else {
            flight
        };
        let max_allowed = flightsize + self.cfg.allowed_increase_pkts;
        cwnd = cwnd.min(max_allowed);
        tp.cwnd = cwnd.max(self.cfg.min_cwnd_pkts);
    }

    /// Every ACK of new data carries a delay sample (sec. 2.4.2 "for each delay sample").
    fn pkts_acked(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        if let Some(delay) = ack.one_way_delay {
            self.on_delay_sample(delay, ack.now, tp.srtt.or(ack.rtt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::cc::CcKind;
    use crate::transport::test_sender::TestSender;

    const MS: f64 = 1e-3;

    /// A fluid path: one sender, a bottleneck of `cap_pps` packets/s with an unlimited buffer,
    /// base one-way delay `base_owd` each way. The queue is `max(0, cwnd - BDP)` packets and each
    /// ACK's one-way delay `base_owd + queue / cap_pps`; ACKs of `per_ack` segments arrive at the
    /// rate `cwnd / RTT` (the bottleneck rate once a queue exists).
    struct Fluid {
        /// The shared test sender: the connection, its clock and the hooks' order.
        s: TestSender<Ledbat>,
        base_owd: f64,
        /// A standing delay the flow does not cause (another flow's queue), seconds.
        extra: f64,
        cap_pps: f64,
    }

    impl std::ops::Deref for Fluid {
        type Target = TestSender<Ledbat>;
        fn deref(&self) -> &TestSender<Ledbat> {
            &self.s
        }
    }

    impl std::ops::DerefMut for Fluid {
        fn deref_mut(&mut self) -> &mut TestSender<Ledbat> {
            &mut self.s
        }
    }

    impl Fluid {
        /// 10 Mbit/s of 1500-byte packets (833 packets/s), RTT 100 ms: BDP 83.3 packets; ACKs of
        /// two segments.
        fn new(cfg: LedbatConfig, cwnd: f64) -> Fluid {
            let mut s = TestSender::new(
                Ledbat::new(cfg).unwrap(),
                cwnd,
                1e9,
                Duration::from_millis(100),
            );
            s.per_ack = 2;
            Fluid {
                s,
                base_owd: 0.050,
                extra: 0.0,
                cap_pps: 10e6 / (1500.0 * 8.0),
            }
        }

        fn bdp(&self) -> f64 {
            self.cap_pps * 2.0 * self.base_owd
        }

        fn queue_pkts(&self) -> f64 {
            (self.tp.cwnd - self.bdp()).max(0.0)
        }

        fn queue_delay(&self) -> f64 {
            self.queue_pkts() / self.cap_pps
        }

        fn rtt(&self) -> f64 {
            2.0 * self.base_owd + self.extra + self.queue_delay()
        }

        /// One ACK, its delays from the fluid queue; returns the time it advanced, seconds.
        fn ack(&mut self) -> f64 {
            let rtt = self.rtt();
            let owd = self.base_owd + self.extra + self.queue_delay();
            let dt = self.per_ack as f64 * rtt / self.tp.cwnd.max(1.0);
            self.s.rtt = Duration::from_nanos((rtt * 1e9) as u64);
            self.s.owd = Some(Duration::from_nanos((owd * 1e9) as u64));
            let in_flight = (self.tp.cwnd - self.per_ack as f64).max(0.0);
            self.s
                .deliver(Duration::from_nanos((dt * 1e9).round() as u64), in_flight);
            dt
        }

        /// ACKs for `secs`; returns the time-averaged queueing delay over them, seconds.
        fn run_for(&mut self, secs: f64) -> f64 {
            let (mut area, mut t) = (0.0, 0.0);
            while t < secs {
                let q = self.queue_delay();
                let dt = self.ack();
                area += q * dt;
                t += dt;
            }
            area / t
        }

        /// Learns the base delay below the BDP, then sets the window.
        fn primed(cfg: LedbatConfig, cwnd: f64) -> Fluid {
            let mut f = Fluid::new(cfg, 20.0);
            for _ in 0..10 {
                f.ack();
            }
            f.tp.cwnd = cwnd;
            f
        }
    }

    fn sample(acked: u32, owd_ms: u64, now: Instant) -> AckSample {
        AckSample {
            ack_seq: 0,
            acked,
            rtt: None,
            one_way_delay: Some(Duration::from_millis(owd_ms)),
            now,
        }
    }

    fn tp(cwnd: f64) -> TcpCc {
        TcpCc {
            snd_nxt: 0,
            cwnd,
            ssthresh: 1e9,
            ca_state: CaState::Open,
            in_flight: cwnd,
            srtt: None,
            min_rtt: None,
        }
    }

    #[test]
    fn holds_the_queueing_delay_at_target() {
        for target_ms in [100, 25] {
            let cfg = LedbatConfig {
                target: Duration::from_millis(target_ms),
                ..LedbatConfig::default()
            };
            let mut f = Fluid::new(cfg, 10.0);
            let t0 = f.now;
            f.run_for(60.0);
            let q = f.run_for(60.0);
            let want = f.bdp() + target_ms as f64 * MS * f.cap_pps;
            println!(
                "target {target_ms} ms: mean queueing delay {:.1} ms over 60-120 s ({:+.1}%), cwnd {:.1} \
                 (BDP + target = {want:.1}), after {:.0} s",
                q / MS,
                (q / MS - target_ms as f64) / target_ms as f64 * 100.0,
                f.tp.cwnd,
                f.now.saturating_since(t0).as_secs_f64()
            );
            let err = (q / MS - target_ms as f64) / target_ms as f64;
            assert!(err.abs() < 0.2, "{q} vs {target_ms} ms");
            assert!((f.tp.cwnd - want).abs() / want < 0.05);
        }
    }

    #[test]
    fn window_falls_above_target_and_rises_below() {
        // Queueing delay 200 ms: off_target = -1, so one segment less per RTT.
        let mut f = Fluid::primed(LedbatConfig::default(), 0.0);
        f.tp.cwnd = f.bdp() + 0.2 * f.cap_pps;
        for _ in 0..CURRENT_FILTER {
            f.ack();
        }
        assert!((f.cc.off_target().unwrap() + 1.0).abs() < 0.01);
        let (w0, t0) = (f.tp.cwnd, f.now);
        f.run_for(1.0);
        let rtts = f.now.saturating_since(t0).as_secs_f64() / f.rtt();
        let per_rtt = (f.tp.cwnd - w0) / rtts;
        println!("queueing delay 200 ms: {per_rtt:+.2} segments per RTT");
        assert!(f.tp.cwnd < w0);
        assert!((-1.1..-0.7).contains(&per_rtt), "{per_rtt}");

        // No queue: off_target = 1, one segment more per RTT, TCP's rate with byte counting.
        let mut f = Fluid::primed(LedbatConfig::default(), 40.0);
        let t0 = f.now;
        f.run_for(2.0);
        let rtts = f.now.saturating_since(t0).as_secs_f64() / f.rtt();
        let per_rtt = (f.tp.cwnd - 40.0) / rtts;
        println!("no queueing: {per_rtt:+.2} segments per RTT");
        assert!((per_rtt - 1.0).abs() < 0.05, "{per_rtt}");

        // Queueing delay 50 ms: half a segment per RTT.
        let mut f = Fluid::primed(LedbatConfig::default(), 0.0);
        f.tp.cwnd = f.bdp() + 0.05 * f.cap_pps;
        for _ in 0..CURRENT_FILTER {
            f.ack();
        }
        assert!((f.cc.off_target().unwrap() - 0.5).abs() < 0.01);
        let w0 = f.tp.cwnd;
        f.ack();
        assert!((f.tp.cwnd - w0 - 0.5 * 2.0 / w0).abs() < 1e-3);
    }

    #[test]
    fn never_faster_than_one_segment_per_rtt() {
        // One ACK with the whole window acked (per_ack = cwnd): at most one segment more, both by
        // the formula and by ALLOWED_INCREASE.
        let mut cc = Ledbat::default();
        let mut t = tp(10.0);
        cc.pkts_acked(&mut t, &sample(10, 50, Instant::from_secs(1)));
        t.in_flight = 0.0;
        cc.cong_avoid(&mut t, &sample(10, 50, Instant::from_secs(1)));
        assert_eq!(t.cwnd, 11.0);
        // Application-limited: 3 segments were in flight, so cwnd may not exceed 4.
        let mut t = tp(10.0);
        t.in_flight = 1.0;
        cc.pkts_acked(&mut t, &sample(2, 50, Instant::from_secs(1)));
        cc.cong_avoid(&mut t, &sample(2, 50, Instant::from_secs(1)));
        assert_eq!(t.cwnd, 4.0);
        // Window-limited with a fractional window (10.9, 10 whole segments out) whose growth a
        // coupler splits four ways, as ctrlTCP does: with the cap taken from the 10 segments the
        // window would approach 11 and never pass it; taken from the window, it grows.
        let mut t = tp(10.9);
        for _ in 0..2000 {
            t.in_flight = t.cwnd.floor() - 1.0; // the flight after this ACK of one segment
            let before = t.cwnd;
            cc.cong_avoid(&mut t, &sample(1, 50, Instant::from_secs(1)));
            t.cwnd = before + (t.cwnd - before) / 4.0;
        }
        assert!(t.cwnd > 12.0, "{}", t.cwnd);
        // Nothing ignores it, not even slow start below ssthresh.
        let mut t = tp(10.0);
        t.ssthresh = 1e9;
        t.in_flight = 8.0;
        cc.cong_avoid(&mut t, &sample(2, 50, Instant::from_secs(1)));
        assert!((t.cwnd - 10.2).abs() < 1e-12, "{}", t.cwnd);
    }

    #[test]
    fn base_delay_is_the_minimum_and_current_delay_the_filtered_recent() {
        let mut cc = Ledbat::default();
        let mut t = tp(10.0);
        let at = |s: u64| Instant::from_secs(s);
        for (s, owd) in [(1, 80), (2, 60), (3, 70), (4, 90), (5, 95)] {
            cc.pkts_acked(&mut t, &sample(1, owd, at(s)));
        }
        assert_eq!(cc.base_delay(), Some(Duration::from_millis(60)));
        // The last four samples: 60, 70, 90, 95.
        assert_eq!(cc.current_delay(), Some(Duration::from_millis(60)));
        cc.pkts_acked(&mut t, &sample(1, 100, at(6)));
        assert_eq!(cc.current_delay(), Some(Duration::from_millis(70)));
        assert_eq!(cc.queuing_delay(), Some(Duration::from_millis(10)));
        assert!((cc.off_target().unwrap() - 0.9).abs() < 1e-12);
        // A lower delay (a shorter route) is adopted at once.
        cc.pkts_acked(&mut t, &sample(1, 40, at(7)));
        assert_eq!(cc.base_delay(), Some(Duration::from_millis(40)));
        assert_eq!(cc.queuing_delay(), Some(Duration::ZERO));

        // Samples older than an RTT leave the filter (the newest stays).
        let mut t = tp(10.0);
        t.srtt = Some(Duration::from_millis(100));
        let mut cc = Ledbat::default();
        cc.pkts_acked(&mut t, &sample(1, 50, Instant::from_millis(1000)));
        cc.pkts_acked(&mut t, &sample(1, 90, Instant::from_millis(1050)));
        assert_eq!(cc.current_delay(), Some(Duration::from_millis(50)));
        cc.pkts_acked(&mut t, &sample(1, 80, Instant::from_millis(1200)));
        assert_eq!(cc.current_delay(), Some(Duration::from_millis(80)));
    }

    #[test]
    fn a_longer_route_is_adopted_once_the_history_expires() {
        let mut cc = Ledbat::default();
        let mut t = tp(10.0);
        // One sample a second: 50 ms for 2.5 minutes, then 80 ms (the route got longer).
        let change = 150;
        let mut adopted = None;
        for s in 0..30 * 60 {
            let owd = if s < change { 50 } else { 80 };
            cc.pkts_acked(&mut t, &sample(1, owd, Instant::from_secs(s)));
            if s >= change
                && adopted.is_none()
                && cc.base_delay().unwrap().as_nanos() == 80e6 as u64
            {
                adopted = Some(s);
            }
            assert!(cc.base_delays.len() <= BASE_HISTORY);
        }
        // The old minimum sits in the bucket of minute 2 (120-179 s); ten buckets later (minute
        // 12) it is gone.
        let adopted = adopted.unwrap();
        println!(
            "base delay 50 -> 80 ms at {change} s, adopted at {adopted} s ({:.1} min later)",
            (adopted - change) as f64 / 60.0
        );
        assert_eq!(adopted, 12 * 60);
        // Until then the extra 30 ms counted as queueing delay.
        let mut cc2 = Ledbat::default();
        for s in 0..(12 * 60 - 1) {
            let owd = if s < change { 50 } else { 80 };
            cc2.pkts_acked(&mut t, &sample(1, owd, Instant::from_secs(s)));
        }
        assert_eq!(cc2.queuing_delay(), Some(Duration::from_millis(30)));
        assert_eq!(cc.queuing_delay(), Some(Duration::ZERO));

        // With BASE_HISTORY = 2 the old minimum (minute 2) is gone at the start of minute 4.
        let cfg = LedbatConfig {
            base_history: 2,
            ..LedbatConfig::default()
        };
        let mut cc = Ledbat::new(cfg).unwrap();
        for s in 0..(4 * 60) {
            let owd = if s < change { 50 } else { 80 };
            cc.pkts_acked(&mut t, &sample(1, owd, Instant::from_secs(s)));
        }
        assert_eq!(cc.base_delay(), Some(Duration::from_millis(50)));
        cc.pkts_acked(&mut t, &sample(1, 80, Instant::from_secs(4 * 60)));
        assert_eq!(cc.base_delay(), Some(Duration::from_millis(80)));
    }

    #[test]
    fn loss_halves_and_the_window_stays_above_min_cwnd() {
        let mut cc = Ledbat::default();
        assert_eq!(cc.ssthresh(&tp(40.0)), 20.0);
        assert_eq!(cc.ssthresh(&tp(3.0)), 2.0);
        assert_eq!(cc.ssthresh(&tp(1.5)), 1.5, "never raised by a loss");
        // Inside a recovery episode, no second reduction.
        let mut t = tp(20.0);
        t.ssthresh = 20.0;
        t.ca_state = CaState::Recovery;
        assert_eq!(cc.ssthresh(&t), 20.0);

        // Far above target for a long time: the window sinks to MIN_CWND and stays there.
        // (Another flow's queue adds 450 ms: off_target = -3.5. Five minutes, so the base delay
        // keeps its minimum.)
        let mut f = Fluid::primed(LedbatConfig::default(), 100.0);
        f.extra = 0.45;
        let mut lowest = f64::INFINITY;
        let t0 = f.now;
        while f.now.saturating_since(t0) < Duration::from_secs(300) {
            f.ack();
            lowest = lowest.min(f.tp.cwnd);
        }
        println!("lowest cwnd under a standing 450 ms delay: {lowest}");
        assert_eq!(lowest, MIN_CWND);
        assert_eq!(f.tp.cwnd, MIN_CWND);

        // A configured MIN_CWND of 1 is honoured too.
        let cfg = LedbatConfig {
            min_cwnd_pkts: 1.0,
            ..LedbatConfig::default()
        };
        let mut f = Fluid::primed(cfg, 100.0);
        f.extra = 0.45;
        let t0 = f.now;
        while f.now.saturating_since(t0) < Duration::from_secs(300) {
            f.ack();
        }
        assert_eq!(f.tp.cwnd, 1.0);
    }

    #[test]
    fn timeout_restarts_from_one_segment_without_slow_start() {
        let mut f = Fluid::primed(LedbatConfig::default(), 40.0);
        f.rto(); // in the order TcpSender::on_rto calls the hooks
        assert_eq!(f.tp.ssthresh, 20.0);
        f.ack();
        assert_eq!(f.tp.cwnd, MIN_CWND, "MIN_CWND on the next ACK");
        // Below ssthresh, yet no faster than one segment per RTT.
        let t0 = f.now;
        f.run_for(2.0);
        let rtts = f.now.saturating_since(t0).as_secs_f64() / f.rtt();
        assert!(
            f.tp.cwnd - MIN_CWND <= rtts + 1.0,
            "{} in {rtts} RTTs",
            f.tp.cwnd
        );
    }

    #[test]
    fn without_delay_samples_it_grows_like_tcp_congestion_avoidance() {
        let mut cc = Ledbat::default();
        let mut t = tp(10.0);
        t.in_flight = 8.0;
        let ack = AckSample {
            ack_seq: 0,
            acked: 2,
            rtt: None,
            one_way_delay: None,
            now: Instant::from_secs(1),
        };
        cc.pkts_acked(&mut t, &ack);
        cc.cong_avoid(&mut t, &ack);
        assert_eq!(cc.off_target(), None);
        assert!((t.cwnd - 10.2).abs() < 1e-12);
    }

    #[test]
    fn config_is_checked_against_the_rfc() {
        assert!(LedbatConfig::default().check("ledbat").is_ok());
        let d = LedbatConfig::default();
        assert_eq!((d.target, d.gain), (Duration::from_millis(100), 1.0));
        let bad = [
            LedbatConfig {
                target: Duration::from_millis(101),
                ..d
            },
            LedbatConfig {
                target: Duration::ZERO,
                ..d
            },
            LedbatConfig { gain: 1.5, ..d },
            LedbatConfig { gain: 0.0, ..d },
            LedbatConfig {
                gain: f64::NAN,
                ..d
            },
            LedbatConfig {
                min_cwnd_pkts: 0.5,
                ..d
            },
            LedbatConfig {
                min_cwnd_pkts: 4.0,
                ..d
            },
            LedbatConfig {
                allowed_increase_pkts: 0.0,
                ..d
            },
            LedbatConfig {
                base_history: 0,
                ..d
            },
            LedbatConfig {
                current_filter: 0,
                ..d
            },
        ];
        for cfg in bad {
            let e = Ledbat::new(cfg).unwrap_err();
            assert!(matches!(e, SimError::InvalidParameter { .. }), "{e:?}");
        }
        let e = LedbatConfig { gain: 2.0, ..d }.check("flow[1].ledbat");
        match e {
            Err(SimError::InvalidParameter { name, .. }) => assert_eq!(name, "flow[1].ledbat.gain"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn built_by_name() {
        let kind = CcKind::from_name("ledbat").unwrap();
        assert_eq!(kind, CcKind::named("ledbat"));
        assert_eq!(kind.build().name(), "ledbat");
        let mut t = tp(10.0);
        kind.build().init(&mut t);
        assert_eq!(
            t.ssthresh, 10.0,
            "no slow start: reports congestion avoidance"
        );
    }

    /// The packet-level simulator: the dissertation's dumbbell (10 Mbit/s, RTT 100 ms) with a
    /// 300-packet drop-tail buffer (360 ms, far above LEDBAT's target).
    mod sim {
        use crate::net::queue::QueueConfig;
        use crate::net::topology::{dumbbell, Dumbbell, DumbbellConfig};
        use crate::net::Network;
        use crate::transport::cc::CcKind;
        use crate::{Sim, TcpFlowConfig};
        use coupling::Instant;

        const BUFFER_PKTS: usize = 300;

        fn setup(pairs: usize) -> (Sim, Dumbbell) {
            let mut cfg = DumbbellConfig::dissertation(pairs);
            cfg.bottleneck.queue = QueueConfig::drop_tail_pkts(BUFFER_PKTS);
            let mut net = Network::default();
            let d = dumbbell(&mut net, &cfg).unwrap();
            (Sim::new(net, 1).unwrap(), d)
        }

        /// Seconds to send one 1500-byte packet at the bottleneck.
        fn pkt_time(sim: &mut Sim, d: &Dumbbell) -> f64 {
            let l = &sim.results().links[d.bottleneck.0 as usize];
            1500.0 * 8.0 / l.rate_bps as f64
        }

        /// Runs from `from` to `to` seconds; the bottleneck's time-averaged queue over that span,
        /// packets (from the link's `mean_queue_pkts` at both ends).
        fn mean_queue_between(sim: &mut Sim, d: &Dumbbell, from: u64, to: u64) -> f64 {
            sim.run_until(Instant::from_secs(from));
            let q1 = sim.results().links[d.bottleneck.0 as usize].mean_queue_pkts;
            sim.run_until(Instant::from_secs(to));
            let r = sim.results();
            let q2 = r.links[d.bottleneck.0 as usize].mean_queue_pkts;
            (q2 * to as f64 - q1 * from as f64) / (to - from) as f64
        }

        #[test]
        fn single_flow_holds_the_bottleneck_queue_at_target() {
            let (mut sim, d) = setup(1);
            let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
            f.cc = CcKind::named("ledbat");
            sim.add_tcp_flow(f).unwrap();
            let tx = pkt_time(&mut sim, &d);
            let q = mean_queue_between(&mut sim, &d, 60, 180);
            let r = sim.results();
            let whole = r.links[d.bottleneck.0 as usize].mean_queue_pkts;
            let link = &r.links[d.bottleneck.0 as usize];
            let delay_ms = q * tx * 1e3;
            println!(
                "single LEDBAT flow: mean queue {q:.1} pkts = {delay_ms:.1} ms over 60-180 s \
                 (target 100 ms, {:+.1}%); over the whole run {whole:.1} pkts = {:.1} ms; \
                 max queue {} pkts, drops {}, utilization {:.3}, goodput {:.2} Mbit/s, mean RTT {:.1} ms",
                (delay_ms - 100.0),
                whole * tx * 1e3,
                link.max_queue_pkts,
                link.dropped_pkts,
                link.utilization,
                r.flows[0].goodput_bps / 1e6,
                r.flows[0].mean_rtt_s * 1e3,
            );
            assert!((delay_ms - 100.0).abs() < 20.0, "{delay_ms} ms");
            assert_eq!(link.dropped_pkts, 0, "LEDBAT alone never fills the buffer");
            assert!(link.utilization > 0.9, "{}", link.utilization);
        }

        /// One LEDBAT and one NewReno flow from t = 0 (seed 003 Fig. 8.5): NewReno keeps the queue
        /// far above TARGET, so LEDBAT sits at MIN_CWND (RFC 6817 sec. 4.2).
        #[test]
        fn yields_to_newreno() {
            let (mut sim, d) = setup(2);
            let mut ledbat = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
            ledbat.cc = CcKind::named("ledbat");
            sim.add_tcp_flow(ledbat).unwrap();
            let reno = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
            sim.add_tcp_flow(reno).unwrap();
            let tx = pkt_time(&mut sim, &d);
            let q = mean_queue_between(&mut sim, &d, 20, 200);
            let r = sim.results();
            let (l, t) = (&r.flows[0], &r.flows[1]);
            let share = l.goodput_bps / t.goodput_bps;
            println!(
                "LEDBAT vs NewReno: {:.3} vs {:.3} Mbit/s (LEDBAT/TCP = {:.3}), mean queue {q:.0} pkts \
                 = {:.0} ms over 20-200 s, LEDBAT losses {} (timeouts {}), TCP losses {}",
                l.goodput_bps / 1e6,
                t.goodput_bps / 1e6,
                share,
                q * tx * 1e3,
                l.fast_recoveries,
                l.timeouts,
                t.fast_recoveries,
            );
            assert_eq!((l.cc, t.cc), ("ledbat", "newreno"));
            assert!(share < 0.25, "{share}");
            assert!(
                q * tx > 0.1,
                "TCP keeps the queue above LEDBAT's target: {q} pkts"
            );
        }
    }
}
