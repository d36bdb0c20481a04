//! Random Early Detection.
//!
//! Specification: S. Floyd and V. Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", IEEE/ACM ToN 1(4), 1993 ("F&J" below; Fig. 2 is the algorithm, sec. 4 the average
//! and the idle correction, sec. 7 the `count` uniformisation), with the gentle variant of
//! S. Floyd, "Recommendation on using the gentle_ variant of RED", 2000. Where the paper leaves a
//! choice open we follow ns-2's `queue/red.cc`, whose defaults are also ours
//! ([`RedConfig::ns2_defaults`]).
//!
//! Packet mode only: the average and the thresholds count packets, and every packet has the same
//! drop probability whatever its size (ns-2's `bytes_ false`, `queue_in_bytes_ false`).
//!
//! The pieces RIO reuses ([`RedThresholds`], `AvgQueue`, `EarlyDrop`, `PacketClock`) live here.

use super::{Limit, QItem, Queue};
use crate::error::SimError;
use crate::rng::SimRng;
use coupling::{Duration, Instant};
use rand::RngExt;
use std::collections::VecDeque;

/// One RED drop curve (F&J sec. 4): no early drop while the average queue is below `min_th_pkts`;
/// between the thresholds the drop probability `p_b` rises linearly from 0 to `max_p`; above
/// `max_th_pkts` every arrival is dropped, or, with gentle RED, `p_b` rises on linearly from
/// `max_p` to 1 at `2 * max_th_pkts` (Floyd 2000).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedThresholds {
    pub min_th_pkts: f64,
    pub max_th_pkts: f64,
    /// Drop probability at `max_th_pkts`, in (0, 1] (ns-2: `1 / linterm_`).
    pub max_p: f64,
}

impl RedThresholds {
    /// ns-2's defaults: `thresh_ 5`, `maxthresh_ 15`, `linterm_ 10`.
    pub const NS2: RedThresholds = RedThresholds {
        min_th_pkts: 5.0,
        max_th_pkts: 15.0,
        max_p: 0.1,
    };

    /// `name` is the path of the struct holding the fields (`link[0].queue`,
    /// `link[0].queue.in_profile`).
    pub(super) fn check(&self, name: &str) -> Result<(), SimError> {
        if !(self.min_th_pkts.is_finite() && self.min_th_pkts >= 0.0) {
            return Err(SimError::invalid(
                format!("{name}.min_th_pkts"),
                self.min_th_pkts,
                "a finite threshold >= 0 packets",
            ));
        }
        if !(self.max_th_pkts.is_finite() && self.max_th_pkts > self.min_th_pkts) {
            return Err(SimError::invalid(
                format!("{name}.max_th_pkts"),
                self.max_th_pkts,
                "a finite threshold greater than min_th_pkts",
            ));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(SimError::invalid(
                format!("{name}.max_p"),
                self.max_p,
                "a probability in (0, 1]",
            ));
        }
        Ok(())
    }

    /// The drop probability before the `count` correction, `p_b`, at average queue `avg`
    /// (F&J Fig. 2; gentle: Floyd 2000; ns-2 `calculate_p_new`).
    pub fn p_b(&self, avg: f64, gentle: bool) -> f64 {
        let (min, max, max_p) = (self.min_th_pkts, self.max_th_pkts, self.max_p);
        if avg < min {
            0.0
        } else if avg < max {
            max_p * (avg - min) / (max - min)
        } else if gentle && avg < 2.0 * max {
            max_p + (1.0 - max_p) * (avg - max) / max
        } else {
            1.0
        }
    }

    /// The average queue at and above which every arrival is dropped ("forced" drops).
    fn forced_above(&self, gentle: bool) -> f64 {
        if gentle {
            2.0 * self.max_th_pkts
        } else {
            self.max_th_pkts
        }
    }
}

/// How RED is configured; [`QueueConfig::Red`](super::QueueConfig::Red).
#[derive(Clone, Debug, PartialEq)]
pub struct RedConfig {
    /// Hard limit: an arrival that does not fit is dropped (drop-tail) whatever the average.
    pub limit: Limit,
    pub min_th_pkts: f64,
    pub max_th_pkts: f64,
    /// Drop probability at `max_th_pkts`, in (0, 1].
    pub max_p: f64,
    /// Weight of the EWMA of the queue length, `w_q` of F&J sec. 4, in (0, 1].
    pub q_weight: f64,
    /// Gentle RED: between `max_th` and `2 * max_th` the drop probability rises from `max_p` to 1
    /// instead of jumping to 1 at `max_th`.
    pub gentle: bool,
    /// Mean packet size `s` of the idle correction (F&J sec. 4): after the link was idle for `t`,
    /// the average decays as if `m = t / (s * 8 / link_rate_bps)` packets had found the queue empty.
    pub mean_pkt_bytes: u32,
    /// The rate of the link the queue feeds, bit/s. The queue cannot see its link, so the caller
    /// copies the link's `rate_bps` here; it is used only for the idle correction.
    pub link_rate_bps: u64,
}

impl RedConfig {
    /// Default mean packet size: 1000 bytes, ns-2's default TCP segment (`Agent/TCP packetSize_`).
    /// ns-2's RED itself defaults `mean_pktsize_` to 500 bytes.
    pub const DEFAULT_MEAN_PKT_BYTES: u32 = 1000;
    /// ns-2's `q_weight_ 0.002`.
    pub const DEFAULT_Q_WEIGHT: f64 = 0.002;

    /// ns-2's defaults: `min_th` 5 and `max_th` 15 packets, `max_p` 0.1, `q_weight` 0.002,
    /// gentle, packet mode, and a mean packet of 1000 bytes for the idle correction.
    pub fn ns2_defaults(limit: Limit, link_rate_bps: u64) -> Self {
        let t = RedThresholds::NS2;
        RedConfig {
            limit,
            min_th_pkts: t.min_th_pkts,
            max_th_pkts: t.max_th_pkts,
            max_p: t.max_p,
            q_weight: Self::DEFAULT_Q_WEIGHT,
            gentle: true,
            mean_pkt_bytes: Self::DEFAULT_MEAN_PKT_BYTES,
            link_rate_bps,
        }
    }

    fn thresholds(&self) -> RedThresholds {
        RedThresholds {
            min_th_pkts: self.min_th_pkts,
            max_th_pkts: self.max_th_pkts,
            max_p: self.max_p,
        }
    }
}

/// Checks the parameters RED and RIO share: `q_weight`, `mean_pkt_bytes`, `link_rate_bps`.
pub(super) fn check_common(
    name: &str,
    q_weight: f64,
    mean_pkt_bytes: u32,
    link_rate_bps: u64,
) -> Result<(), SimError> {
    if !(q_weight > 0.0 && q_weight <= 1.0) {
        return Err(SimError::invalid(
            format!("{name}.q_weight"),
            q_weight,
            "an EWMA weight in (0, 1]",
        ));
    }
    if mean_pkt_bytes == 0 {
        return Err(SimError::invalid(
            format!("{name}.mean_pkt_bytes"),
            0,
            "a mean packet size > 0 bytes",
        ));
    }
    if link_rate_bps == 0 {
        return Err(SimError::invalid(
            format!("{name}.link_rate_bps"),
            0,
            "the rate of the queue's link, > 0 bit/s",
        ));
    }
    Ok(())
}

/// The "typical transmission time" `s` of F&J sec. 4, as packets per span of time.
#[derive(Clone, Copy, Debug)]
pub(super) struct PacketClock {
    pub link_rate_bps: u64,
    pub mean_pkt_bytes: u32,
}

impl PacketClock {
    /// `m`: how many mean-sized packets the link could have sent in `d` (rounded down, as
    /// ns-2's `int(ptc * (now - idletime_))`).
    pub fn pkts_in(&self, d: Duration) -> u64 {
        let bits = d.as_nanos() as u128 * self.link_rate_bps as u128;
        let per_pkt = 8 * self.mean_pkt_bytes as u128 * 1_000_000_000;
        u64::try_from(bits / per_pkt).unwrap_or(u64::MAX)
    }
}

/// The average queue size of F&J sec. 4: an EWMA sampled at arrivals, with the idle correction.
#[derive(Clone, Copy, Debug)]
pub(super) struct AvgQueue {
    pub avg: f64,
    /// When the link went idle, if no arrival has updated the average since (ns-2's `idle_` and
    /// `idletime_`). A new queue counts as idle since time zero, as in ns-2.
    pub idle_since: Option<Instant>,
}

impl AvgQueue {
    pub fn new() -> Self {
        AvgQueue {
            avg: 0.0,
            idle_since: Some(Instant::ZERO),
        }
    }

    /// Updates the average at an arrival that finds `q_pkts` waiting. After an idle period the
    /// average first decays as if `m` packets had arrived to an empty queue, `avg *= (1 - w)^m`
    /// (F&J Fig. 2), then takes the regular step `avg = (1 - w) avg + w q` (as ns-2's
    /// `estimator(q, m + 1, ..)`).
    pub fn on_arrival(&mut self, q_pkts: usize, now: Instant, w: f64, clock: &PacketClock) {
        if let Some(since) = self.idle_since.take() {
            let m = clock.pkts_in(now.saturating_since(since));
            if m > 0 {
                self.avg *= (1.0 - w).powf(m as f64);
            }
        }
        self.avg = (1.0 - w) * self.avg + w * q_pkts as f64;
    }
}

/// RED's early-drop test with the `count` uniformisation of F&J sec. 7.
#[derive(Clone, Copy, Debug)]
pub(super) struct EarlyDrop {
    pub curve: RedThresholds,
    pub gentle: bool,
    /// Packets accepted since the last drop while the average was at or above `min_th` (F&J's
    /// `count`, in the sense of sec. 7: "the number of unmarked packets that have arrived since
    /// the last marked packet").
    pub count: u64,
}

impl EarlyDrop {
    pub fn new(curve: RedThresholds, gentle: bool) -> Self {
        EarlyDrop {
            curve,
            gentle,
            count: 0,
        }
    }

    /// Whether to drop an arrival, given the average `avg` and the `q_pkts` waiting before it.
    ///
    /// `p_a = p_b / (1 - count * p_b)` (F&J sec. 7), so that with a steady average the number of
    /// packets between drops is uniform on `{1, .., 1/p_b}`. As in ns-2, no early drop happens
    /// while at most one packet waits (`qlen > 1` in `REDQueue::enque`), and the count also
    /// applies in the gentle region.
    ///
    /// Two departures from ns-2, both towards the paper: `count` is sec. 7's (0 for the first
    /// packet after a drop; Fig. 2 and ns-2 increment it before the test, which makes gaps uniform
    /// on `{1, .., 1/p_b - 1}`), and ns-2's default `wait_ true` (no drop until
    /// `count * p_b >= 1`) is not offered.
    pub fn test(&mut self, avg: f64, q_pkts: usize, rng: &mut SimRng) -> bool {
        if avg < self.curve.min_th_pkts || q_pkts <= 1 {
            self.count = 0;
            return false;
        }
        if avg >= self.curve.forced_above(self.gentle) {
            self.count = 0;
            return true;
        }
        let p_b = self.curve.p_b(avg, self.gentle);
        let c = self.count as f64;
        let p_a = if c * p_b < 1.0 {
            p_b / (1.0 - c * p_b)
        } else {
            1.0
        };
        if rng.random::<f64>() < p_a {
            self.count = 0;
            true
        } else {
            self.count += 1;
            false
        }
    }
}

/// RED (F&J Fig. 2) with gentle RED, a hard limit, and the idle correction.
///
/// The link is idle from a `dequeue` that finds the queue empty until the next arrival (ns-2's
/// `idle_`). Because the engine sends a packet that finds the link idle without offering it to
/// the queue, that arrival does not update the average; the next arrival the queue sees does, with
/// an idle time that ends at it instead (at most about one transmission time longer).
#[derive(Debug)]
pub struct Red {
    limit: Limit,
    q_weight: f64,
    clock: PacketClock,
    avg: AvgQueue,
    early: EarlyDrop,
    q: VecDeque<QItem>,
    bytes: u64,
}

impl Red {
    /// Validates `cfg`; `name` is the parameter path used in errors, e.g. `link[2].queue`.
    pub fn new(cfg: &RedConfig, name: &str) -> Result<Self, SimError> {
        cfg.limit.check(name)?;
        cfg.thresholds().check(name)?;
        check_common(name, cfg.q_weight, cfg.mean_pkt_bytes, cfg.link_rate_bps)?;
        Ok(Red {
            limit: cfg.limit,
            q_weight: cfg.q_weight,
            clock: PacketClock {
                link_rate_bps: cfg.link_rate_bps,
                mean_pkt_bytes: cfg.mean_pkt_bytes,
            },
            avg: AvgQueue::new(),
            early: EarlyDrop::new(cfg.thresholds(), cfg.gentle),
            q: VecDeque::new(),
            bytes: 0,
        })
    }

    /// The average queue size in packets, as of the last arrival.
    pub fn avg_pkts(&self) -> f64 {
        self.avg.avg
    }
}

impl Queue for Red {
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        let qlen = self.q.len();
        self.avg.on_arrival(qlen, now, self.q_weight, &self.clock);
        let early = self.early.test(self.avg.avg, qlen, rng);
        if !self.limit.fits(qlen, self.bytes, item.size_bytes) {
            // A forced drop; ns-2 restarts the count after it.
            self.early.count = 0;
            return Some(item);
        }
        if early {
            return Some(item);
        }
        self.bytes += item.size_bytes as u64;
        self.q.push_back(item);
        None
    }

    fn dequeue(&mut self, now: Instant) -> Option<QItem> {
        match self.q.pop_front() {
            Some(item) => {
                self.bytes -= item.size_bytes as u64;
                Some(item)
            }
            None => {
                self.avg.idle_since = Some(now);
                None
            }
        }
    }

    fn len_pkts(&self) -> usize {
        self.q.len()
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::super::QueueConfig;
    use super::*;
    use crate::packet::PacketId;
    use crate::rng::seeded;

    const RATE: u64 = 10_000_000;

    fn item(i: u32) -> QItem {
        QItem {
            id: PacketId(i),
            size_bytes: 1000,
            flow: 0,
            dscp: 0,
            color: 0,
        }
    }

    fn red(cfg: &RedConfig) -> Red {
        Red::new(cfg, "q").unwrap()
    }

    /// The expected fraction of arrivals dropped at a steady average with drop probability
    /// `p_b`: one over the mean gap between drops, where the gap's distribution follows from
    /// `p_a(count) = p_b / (1 - count p_b)` (F&J sec. 7).
    fn expected_drop_fraction(p_b: f64) -> f64 {
        let mut survive = 1.0;
        let mut mean_gap = 0.0;
        for count in 0.. {
            mean_gap += survive;
            let c = count as f64;
            let p_a = if c * p_b < 1.0 {
                p_b / (1.0 - c * p_b)
            } else {
                1.0
            };
            survive *= 1.0 - p_a.min(1.0);
            if survive <= 0.0 {
                break;
            }
        }
        1.0 / mean_gap
    }

    /// Offers `n` arrivals to a queue holding `hold` packets with its average pinned at `avg`
    /// (a negligible `q_weight` and a queue length equal to the average keep it there); returns
    /// the drop indicator of each arrival.
    fn drops_at_avg(cfg: &RedConfig, avg: f64, hold: usize, n: u32, seed: u64) -> Vec<bool> {
        let mut rng = seeded(seed);
        let mut q = red(&RedConfig {
            q_weight: 1e-12,
            ..cfg.clone()
        });
        for i in 0..hold as u32 {
            assert_eq!(q.enqueue(item(i), Instant::ZERO, &mut rng), None);
        }
        q.avg.avg = avg;
        (0..n)
            .map(|i| {
                let dropped = q.enqueue(item(1000 + i), Instant::ZERO, &mut rng).is_some();
                if !dropped {
                    q.dequeue(Instant::ZERO).unwrap();
                }
                assert_eq!(q.len_pkts(), hold);
                dropped
            })
            .collect()
    }

    #[test]
    fn average_follows_the_ewma_and_no_drops_below_min_th() {
        let cfg = RedConfig::ns2_defaults(Limit::Packets(100), RATE);
        let mut q = red(&cfg);
        let mut rng = seeded(1);
        let w = cfg.q_weight;
        let mut expected = 0.0;
        let mut id = 0;
        // Four bursts of 30 back to back, far above min_th = 5, each drained before the next:
        // the instantaneous queue is large but the average stays low, so RED absorbs the bursts.
        for burst in 0..4 {
            for _ in 0..30 {
                expected = (1.0 - w) * expected + w * q.len_pkts() as f64;
                assert_eq!(q.enqueue(item(id), Instant::ZERO, &mut rng), None);
                id += 1;
                assert!((q.avg_pkts() - expected).abs() < 1e-12);
            }
            let keep = if burst == 3 { 4 } else { 0 };
            while q.len_pkts() > keep {
                q.dequeue(Instant::ZERO).unwrap();
            }
        }
        assert!(q.avg_pkts() < cfg.min_th_pkts, "{}", q.avg_pkts());
        assert_eq!(q.len_pkts(), 4);
        assert_eq!(q.len_bytes(), 4000);
    }

    #[test]
    fn p_b_is_linear_between_the_thresholds_and_gentle_above() {
        let t = RedThresholds::NS2;
        assert_eq!(t.p_b(4.9, true), 0.0);
        assert_eq!(t.p_b(5.0, true), 0.0);
        assert!((t.p_b(10.0, true) - 0.05).abs() < 1e-12);
        assert!((t.p_b(15.0, true) - 0.1).abs() < 1e-12);
        assert!((t.p_b(22.5, true) - 0.55).abs() < 1e-12);
        assert_eq!(t.p_b(30.0, true), 1.0);
        assert_eq!(t.p_b(15.0, false), 1.0);
    }

    #[test]
    fn drop_fraction_between_the_thresholds_follows_p_b_with_count() {
        let cfg = RedConfig::ns2_defaults(Limit::Packets(100), RATE);
        let n = 200_000;
        let mut last = 0.0;
        for (avg, seed) in [(7.5, 1), (10.0, 2), (12.5, 3)] {
            let drops = drops_at_avg(&cfg, avg, 10, n, seed);
            let frac = drops.iter().filter(|d| **d).count() as f64 / n as f64;
            let p_b = RedThresholds::NS2.p_b(avg, true);
            let want = expected_drop_fraction(p_b);
            // F&J sec. 7: with the count, the drop rate is about 2 p_b / (1 + p_b).
            assert!((want - 2.0 * p_b / (1.0 + p_b)).abs() < 0.01 * want);
            assert!(
                (frac - want).abs() < 0.04 * want,
                "avg {avg}: {frac} vs {want}"
            );
            assert!(frac > last);
            last = frac;
            // Uniform gaps: never more than 1/p_b packets between drops.
            let mut gap = 0;
            for d in drops.iter().skip_while(|d| !**d).skip(1) {
                gap += 1;
                if *d {
                    assert!(gap as f64 <= (1.0 / p_b).ceil(), "gap {gap}");
                    gap = 0;
                }
            }
        }
    }

    #[test]
    fn gentle_region_drops_with_rising_probability_and_everything_above_twice_max_th() {
        let cfg = RedConfig::ns2_defaults(Limit::Packets(100), RATE);
        let n = 50_000;
        let frac_at = |avg: f64, seed| {
            let d = drops_at_avg(&cfg, avg, 10, n, seed);
            d.iter().filter(|d| **d).count() as f64 / n as f64
        };
        let mut last = expected_drop_fraction(0.1);
        for (avg, seed) in [(17.0, 4), (20.0, 5), (25.0, 6)] {
            let frac = frac_at(avg, seed);
            let want = expected_drop_fraction(RedThresholds::NS2.p_b(avg, true));
            assert!((frac - want).abs() < 0.03, "avg {avg}: {frac} vs {want}");
            assert!(frac > last && frac < 1.0, "avg {avg}: {frac}");
            last = frac;
        }
        // Forced drops from 2 * max_th on.
        assert_eq!(frac_at(30.0, 7), 1.0);
        assert_eq!(frac_at(45.0, 8), 1.0);
        // Without gentle, from max_th on.
        let hard = RedConfig {
            gentle: false,
            ..cfg.clone()
        };
        assert!(drops_at_avg(&hard, 15.01, 10, 1000, 9).iter().all(|d| *d));
        assert!(!drops_at_avg(&hard, 14.9, 10, 1000, 9).iter().all(|d| *d));
    }

    #[test]
    fn no_early_drop_while_at_most_one_packet_waits() {
        let cfg = RedConfig::ns2_defaults(Limit::Packets(100), RATE);
        assert!(drops_at_avg(&cfg, 40.0, 1, 1000, 1).iter().all(|d| !*d));
        assert!(drops_at_avg(&cfg, 40.0, 2, 1000, 1).iter().all(|d| *d));
    }

    #[test]
    fn hard_limit_drops_the_arrival() {
        let mut cfg = RedConfig::ns2_defaults(Limit::Packets(3), RATE);
        cfg.q_weight = 1e-9;
        let mut q = red(&cfg);
        let mut rng = seeded(3);
        for i in 0..3 {
            assert_eq!(q.enqueue(item(i), Instant::ZERO, &mut rng), None);
        }
        assert_eq!(q.enqueue(item(3), Instant::ZERO, &mut rng), Some(item(3)));
        assert_eq!((q.len_pkts(), q.len_bytes()), (3, 3000));
        assert_eq!(q.dequeue(Instant::ZERO), Some(item(0)));
        assert_eq!((q.len_pkts(), q.len_bytes()), (2, 2000));
    }

    #[test]
    fn idle_time_lowers_the_average() {
        let cfg = RedConfig::ns2_defaults(Limit::Packets(100), RATE);
        let w = cfg.q_weight;
        let mut rng = seeded(1);
        let t0 = Instant::from_millis(1000);
        let after = Instant::from_millis(1100);

        // Busy link: an arrival at the same instant takes one ordinary step.
        let mut busy = red(&cfg);
        busy.avg.idle_since = None;
        busy.avg.avg = 10.0;
        busy.enqueue(item(0), after, &mut rng);
        assert!((busy.avg_pkts() - 10.0 * (1.0 - w)).abs() < 1e-12);

        // The link went idle at t0 (a dequeue found nothing): 100 ms at 10 Mb/s is
        // m = 125 packets of 1000 bytes, so avg = 10 (1 - w)^125 (1 - w).
        let mut idle = red(&cfg);
        idle.avg.avg = 10.0;
        assert_eq!(idle.dequeue(t0), None);
        idle.enqueue(item(0), after, &mut rng);
        let want = 10.0 * (1.0 - w).powi(126);
        assert!((idle.avg_pkts() - want).abs() < 1e-9, "{}", idle.avg_pkts());
        assert!(idle.avg_pkts() < 7.8);
        // Only the first arrival after the idle period is corrected.
        idle.enqueue(item(1), after, &mut rng);
        assert!((idle.avg_pkts() - (want * (1.0 - w) + w)).abs() < 1e-9);
    }

    #[test]
    fn invalid_red_parameters_name_the_parameter() {
        let ok = RedConfig::ns2_defaults(Limit::Packets(50), RATE);
        let cases: Vec<(RedConfig, &str)> = vec![
            (
                RedConfig {
                    limit: Limit::Packets(0),
                    ..ok.clone()
                },
                "link[1].queue.limit_pkts",
            ),
            (
                RedConfig {
                    min_th_pkts: -1.0,
                    ..ok.clone()
                },
                "link[1].queue.min_th_pkts",
            ),
            (
                RedConfig {
                    min_th_pkts: f64::NAN,
                    ..ok.clone()
                },
                "link[1].queue.min_th_pkts",
            ),
            (
                RedConfig {
                    min_th_pkts: 20.0,
                    ..ok.clone()
                },
                "link[1].queue.max_th_pkts",
            ),
            (
                RedConfig {
                    max_th_pkts: f64::INFINITY,
                    ..ok.clone()
                },
                "link[1].queue.max_th_pkts",
            ),
            (
                RedConfig {
                    max_p: 0.0,
                    ..ok.clone()
                },
                "link[1].queue.max_p",
            ),
            (
                RedConfig {
                    max_p: 1.5,
                    ..ok.clone()
                },
                "link[1].queue.max_p",
            ),
            (
                RedConfig {
                    max_p: f64::NAN,
                    ..ok.clone()
                },
                "link[1].queue.max_p",
            ),
            (
                RedConfig {
                    q_weight: 0.0,
                    ..ok.clone()
                },
                "link[1].queue.q_weight",
            ),
            (
                RedConfig {
                    q_weight: -0.1,
                    ..ok.clone()
                },
                "link[1].queue.q_weight",
            ),
            (
                RedConfig {
                    mean_pkt_bytes: 0,
                    ..ok.clone()
                },
                "link[1].queue.mean_pkt_bytes",
            ),
            (
                RedConfig {
                    link_rate_bps: 0,
                    ..ok.clone()
                },
                "link[1].queue.link_rate_bps",
            ),
        ];
        for (cfg, want) in cases {
            let e = QueueConfig::Red(cfg).build("link[1].queue").unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("invalid {want}:")),
                "{msg} (want {want})"
            );
        }
        assert!(QueueConfig::Red(ok).build("link[1].queue").is_ok());
    }
}
