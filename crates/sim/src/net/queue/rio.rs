//! RIO, RED with In and Out, for one DiffServ AF class.
//!
//! Specification: D. D. Clark and W. Fang, "Explicit Allocation of Best-Effort Packet Delivery
//! Service", IEEE/ACM ToN 6(4), 1998, sec. III-B ("C&F"): one FIFO queue and two RED drop curves.
//! For each arrival the router computes `avg_total`, the average of the whole queue; for an In
//! arrival also `avg_in`, the average number of In packets queued. An In packet is tested against
//! the In curve with `avg_in`, an Out packet against the Out curve with `avg_total`, so Out
//! packets are dropped well before In packets whenever the Out curve is the more aggressive one.
//!
//! The RED machinery (EWMA, idle correction, `count`, gentle RED, the `qlen > 1` guard) is that of
//! [`super::red`]; each curve keeps its own `count`. Color 0 is In (in profile); any other color
//! is Out. Where the paper is silent:
//! - both averages use the same `q_weight`, `mean_pkt_bytes` and idle correction; `avg_total`
//!   is corrected for the time since the link went idle (as RED), `avg_in` for the time since the
//!   link first went idle after the last In arrival, because it is only updated at In arrivals and
//!   no In packet was queued in between;
//! - gentle RED applies to both curves (the paper predates it); ns-2's `gentle_` does the same;
//! - the hard limit counts all packets, and a forced drop restarts the arriving color's count.

use super::red::{check_common, AvgQueue, EarlyDrop, PacketClock, RedConfig, RedThresholds};
use super::{Limit, QItem, Queue};
use crate::error::SimError;
use crate::rng::SimRng;
use coupling::Instant;
use std::collections::VecDeque;

/// How RIO is configured; [`QueueConfig::Rio`](super::QueueConfig::Rio).
#[derive(Clone, Debug, PartialEq)]
pub struct RioConfig {
    /// Hard limit on the whole queue; an arrival that does not fit is dropped.
    pub limit: Limit,
    /// Curve for In packets (color 0), applied to the average number of In packets queued.
    pub in_profile: RedThresholds,
    /// Curve for Out packets (color != 0), applied to the average of the whole queue.
    pub out_profile: RedThresholds,
    /// EWMA weight of both averages, in (0, 1].
    pub q_weight: f64,
    /// Gentle RED on both curves.
    pub gentle: bool,
    /// Mean packet size of the idle correction, bytes (see [`RedConfig::mean_pkt_bytes`]).
    pub mean_pkt_bytes: u32,
    /// Rate of the queue's link, bit/s, copied from the link by the caller (idle correction).
    pub link_rate_bps: u64,
}

impl RioConfig {
    /// RIO with the given curves and RED's ns-2 defaults for the rest: `q_weight` 0.002, gentle,
    /// 1000-byte mean packets.
    pub fn new(
        limit: Limit,
        link_rate_bps: u64,
        in_profile: RedThresholds,
        out_profile: RedThresholds,
    ) -> Self {
        RioConfig {
            limit,
            in_profile,
            out_profile,
            q_weight: RedConfig::DEFAULT_Q_WEIGHT,
            gentle: true,
            mean_pkt_bytes: RedConfig::DEFAULT_MEAN_PKT_BYTES,
            link_rate_bps,
        }
    }
}

/// RIO (C&F sec. III-B); see the module docs.
#[derive(Debug)]
pub struct Rio {
    limit: Limit,
    q_weight: f64,
    clock: PacketClock,
    avg_in: AvgQueue,
    avg_total: AvgQueue,
    in_drop: EarlyDrop,
    out_drop: EarlyDrop,
    q: VecDeque<QItem>,
    bytes: u64,
    in_pkts: usize,
}

impl Rio {
    /// Validates `cfg`; errors name e.g. `link[2].queue.in_profile.max_p`.
    pub fn new(cfg: &RioConfig, name: &str) -> Result<Self, SimError> {
        cfg.limit.check(name)?;
        cfg.in_profile.check(&format!("{name}.in_profile"))?;
        cfg.out_profile.check(&format!("{name}.out_profile"))?;
        check_common(name, cfg.q_weight, cfg.mean_pkt_bytes, cfg.link_rate_bps)?;
        Ok(Rio {
            limit: cfg.limit,
            q_weight: cfg.q_weight,
            clock: PacketClock {
                link_rate_bps: cfg.link_rate_bps,
                mean_pkt_bytes: cfg.mean_pkt_bytes,
            },
            avg_in: AvgQueue::new(),
            avg_total: AvgQueue::new(),
            in_drop: EarlyDrop::new(cfg.in_profile, cfg.gentle),
            out_drop: EarlyDrop::new(cfg.out_profile, cfg.gentle),
            q: VecDeque::new(),
            bytes: 0,
            in_pkts: 0,
        })
    }

    /// The average number of In packets queued, as of the last In arrival.
    pub fn avg_in_pkts(&self) -> f64 {
        self.avg_in.avg
    }

    /// The average queue size in packets, as of the last arrival.
    pub fn avg_total_pkts(&self) -> f64 {
        self.avg_total.avg
    }

    /// In packets queued.
    pub fn in_pkts(&self) -> usize {
        self.in_pkts
    }
}

impl Queue for Rio {
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        let qlen = self.q.len();
        let is_in = item.color == 0;
        self.avg_total
            .on_arrival(qlen, now, self.q_weight, &self.clock);
        let early = if is_in {
            self.avg_in
                .on_arrival(self.in_pkts, now, self.q_weight, &self.clock);
            self.in_drop.test(self.avg_in.avg, self.in_pkts, rng)
        } else {
            self.out_drop.test(self.avg_total.avg, qlen, rng)
        };
        if !self.limit.fits(qlen, self.bytes, item.size_bytes) {
            if is_in {
                self.in_drop.count = 0;
            } else {
                self.out_drop.count = 0;
            }
            return Some(item);
        }
        if early {
            return Some(item);
        }
        self.bytes += item.size_bytes as u64;
        self.in_pkts += is_in as usize;
        self.q.push_back(item);
        None
    }

    fn dequeue(&mut self, now: Instant) -> Option<QItem> {
        match self.q.pop_front() {
            Some(item) => {
                self.bytes -= item.size_bytes as u64;
                self.in_pkts -= (item.color == 0) as usize;
                Some(item)
            }
            None => {
                self.avg_total.idle_since = Some(now);
                self.avg_in.idle_since.get_or_insert(now);
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
    use coupling::Duration;

    const RATE: u64 = 10_000_000;

    fn item(i: u32, color: u8) -> QItem {
        QItem {
            id: PacketId(i),
            size_bytes: 1000,
            flow: color as u32,
            dscp: 10,
            color,
        }
    }

    fn cfg() -> RioConfig {
        RioConfig::new(
            Limit::Packets(100),
            RATE,
            RedThresholds {
                min_th_pkts: 20.0,
                max_th_pkts: 40.0,
                max_p: 0.02,
            },
            RedThresholds {
                min_th_pkts: 5.0,
                max_th_pkts: 15.0,
                max_p: 0.1,
            },
        )
    }

    #[test]
    fn out_packets_are_dropped_before_in_packets_under_the_same_load() {
        // Arrivals at 1.25 times the service rate, half In and half Out, interleaved at random:
        // a fifth of all arrivals must go, and RIO takes them from the Out packets.
        let mut q = Rio::new(&cfg(), "q").unwrap();
        let mut rng = seeded(11);
        let mut coin = seeded(12);
        let (mut offered, mut dropped) = ([0u32; 2], [0u32; 2]);
        let mut now = Instant::ZERO;
        for i in 0..120_000u32 {
            let color = rand::RngExt::random_bool(&mut coin, 0.5) as u8;
            let d = q.enqueue(item(i, color), now, &mut rng).is_some();
            // Measure after the averages have settled.
            if i >= 20_000 {
                offered[color as usize] += 1;
                dropped[color as usize] += d as u32;
            }
            if i % 5 != 4 {
                q.dequeue(now);
            }
            now = now + Duration::from_micros(640);
        }
        let frac = |c: usize| dropped[c] as f64 / offered[c] as f64;
        assert!(frac(0) < 0.01, "In drop fraction {}", frac(0));
        assert!(
            (0.3..0.5).contains(&frac(1)),
            "Out drop fraction {}",
            frac(1)
        );
        assert!(q.avg_in_pkts() < 20.0, "{}", q.avg_in_pkts());
        assert!(q.avg_total_pkts() > 5.0, "{}", q.avg_total_pkts());

        // The same load all In sees only the In curve, and the In average then reaches it.
        let mut q = Rio::new(&cfg(), "q").unwrap();
        let mut in_dropped = 0;
        for i in 0..100_000u32 {
            in_dropped += q.enqueue(item(i, 0), now, &mut rng).is_some() as u32;
            if i % 5 != 4 {
                q.dequeue(now);
            }
        }
        assert!(in_dropped > 15_000, "{in_dropped}");
        assert!(q.avg_in_pkts() > 20.0);
    }

    #[test]
    fn the_in_average_counts_only_in_packets() {
        let mut c = cfg();
        c.q_weight = 1.0; // the average is the last sample
        let mut q = Rio::new(&c, "q").unwrap();
        let mut rng = seeded(1);
        for i in 0..6 {
            assert_eq!(q.enqueue(item(i, 1), Instant::ZERO, &mut rng), None);
        }
        for i in 6..9 {
            assert_eq!(q.enqueue(item(i, 0), Instant::ZERO, &mut rng), None);
        }
        // The last In arrival found 8 packets waiting, 2 of them In.
        assert_eq!(q.avg_total_pkts(), 8.0);
        assert_eq!(q.avg_in_pkts(), 2.0);
        assert_eq!((q.len_pkts(), q.in_pkts(), q.len_bytes()), (9, 3, 9000));
        for _ in 0..7 {
            q.dequeue(Instant::ZERO).unwrap();
        }
        assert_eq!((q.len_pkts(), q.in_pkts(), q.len_bytes()), (2, 2, 2000));
    }

    #[test]
    fn idle_time_lowers_both_averages() {
        let mut q = Rio::new(&cfg(), "q").unwrap();
        let mut rng = seeded(1);
        // As if arrivals of both colors had built the averages up to 30.
        q.avg_in = AvgQueue {
            avg: 30.0,
            idle_since: None,
        };
        q.avg_total = q.avg_in;
        assert_eq!(q.dequeue(Instant::from_millis(100)), None);
        // An Out arrival 100 ms later corrects only the total average (m = 125).
        q.enqueue(item(0, 1), Instant::from_millis(200), &mut rng);
        let w: f64 = 0.002;
        assert!((q.avg_total_pkts() - 30.0 * (1.0 - w).powi(126)).abs() < 1e-9);
        assert_eq!(q.avg_in_pkts(), 30.0);
        // The first In arrival, 200 ms after the idle start, corrects the In average (m = 250).
        q.enqueue(item(1, 0), Instant::from_millis(300), &mut rng);
        assert!((q.avg_in_pkts() - 30.0 * (1.0 - w).powi(251)).abs() < 1e-9);
    }

    #[test]
    fn invalid_rio_parameters_name_the_parameter() {
        let bad = |f: fn(&mut RioConfig), want: &str| {
            let mut c = cfg();
            f(&mut c);
            let e = QueueConfig::Rio(c).build("link[0].queue").unwrap_err();
            assert!(e.to_string().contains(&format!("invalid {want}:")), "{e}");
        };
        bad(|c| c.limit = Limit::Bytes(0), "link[0].queue.limit_bytes");
        bad(
            |c| c.in_profile.min_th_pkts = 50.0,
            "link[0].queue.in_profile.max_th_pkts",
        );
        bad(
            |c| c.out_profile.max_p = -0.5,
            "link[0].queue.out_profile.max_p",
        );
        bad(
            |c| c.out_profile.min_th_pkts = f64::NAN,
            "link[0].queue.out_profile.min_th_pkts",
        );
        bad(|c| c.q_weight = f64::NAN, "link[0].queue.q_weight");
        bad(|c| c.link_rate_bps = 0, "link[0].queue.link_rate_bps");
        assert!(QueueConfig::Rio(cfg()).build("link[0].queue").is_ok());
    }
}
