//! Queue disciplines. A link owns one [`Queue`]; the packet being transmitted is not in it (as in
//! ns-2 and ns-3), so "queue length" means packets waiting.
//!
//! A queue sees [`QItem`]s: the packet id with the few fields disciplines decide on, so no
//! discipline reaches into the packet pool. `enqueue` returns the item it dropped, if any: the
//! arriving one (drop-tail, RED) or another one (DRR drops from the longest flow queue).
//!
//! Disciplines, each in its own file with the specification it follows:
//!
//! | config                               | discipline                                   | file        |
//! |--------------------------------------|----------------------------------------------|-------------|
//! | [`QueueConfig::DropTail`]            | FIFO, packet or byte limit                   | here        |
//! | [`QueueConfig::RandomDrop`]          | Bernoulli loss in front of another queue     | here        |
//! | [`QueueConfig::Red`]                 | RED (Floyd & Jacobson 1993), gentle RED      | `red.rs`    |
//! | [`QueueConfig::Rio`]                 | RIO, RED with In/Out (Clark & Fang 1998)     | `rio.rs`    |
//! | [`QueueConfig::TokenBucketMarker`]   | single-rate token-bucket marker (RFC 2697)   | `marker.rs` |
//! | [`QueueConfig::Wrr`]                 | weighted round robin between DSCP classes    | `wrr.rs`    |
//! | [`QueueConfig::Drr`]                 | Deficit Round Robin per flow (Shreedhar & Varghese 1995) | `drr.rs` |
//!
//! A queue written down outside Rust (a scenario file, the Python API) is a [`QueueSpec`]
//! (`spec.rs`): one serde type with its JSON Schema, turned into a [`QueueConfig`] by
//! [`QueueSpec::to_config`].
//!
//! A caveat of the engine that every discipline inherits: a packet that finds its link idle is
//! transmitted at once and never offered to the queue (ns-2 offers it and dequeues it at once).
//! Queues therefore see only the packets that have to wait; see the notes in each file.

mod drr;
mod marker;
mod red;
mod rio;
mod spec;
mod wrr;

pub use drr::{Drr, DRR_DEFAULT_QUANTUM_BYTES};
pub use marker::TokenBucketMarker;
pub use red::{Red, RedConfig, RedThresholds};
pub use rio::{Rio, RioConfig};
pub use spec::{
    DropTailSpec, DrrSpec, LossPeriodSpec, QueueSpec, RandomDropSpec, RedSpec, RioSpec,
    TokenBucketSpec, WrrClassSpec, WrrSpec, MAX_QUEUE_NESTING,
};
pub use wrr::{Wrr, WrrClass};

use crate::error::SimError;
use crate::packet::PacketId;
use crate::rng::SimRng;
use coupling::Instant;
use rand::RngExt;
use std::collections::VecDeque;

/// What a queue discipline sees of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QItem {
    pub id: PacketId,
    pub size_bytes: u32,
    pub flow: u32,
    pub dscp: u8,
    /// Drop precedence (0 = in profile); a marker may change it.
    pub color: u8,
}

pub trait Queue: std::fmt::Debug + Send {
    /// Offers `item`; returns the item dropped (the arriving one or another), if any.
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem>;
    fn dequeue(&mut self, now: Instant) -> Option<QItem>;
    fn len_pkts(&self) -> usize;
    fn len_bytes(&self) -> u64;
    /// Both lengths, packets and bytes (one call where both are wanted).
    fn lens(&self) -> (usize, u64) {
        (self.len_pkts(), self.len_bytes())
    }
    /// An arrival at an idle link would go in and straight out again, with no other effect (a
    /// plain FIFO): the link may skip the queue. Disciplines with state (RED's average, a
    /// marker's bucket, random drop) must see every arrival and keep the default, false.
    fn bypass_when_idle(&self) -> bool {
        false
    }
}

/// The longest queue, in packets (about 150 MB of queued packets).
pub const MAX_QUEUE_PKTS: usize = 1_000_000;
/// The longest queue, in bytes: [`MAX_QUEUE_PKTS`] packets of 1500 bytes.
pub const MAX_QUEUE_BYTES: u64 = MAX_QUEUE_PKTS as u64 * 1500;

/// A queue's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    Packets(usize),
    Bytes(u64),
}

impl Limit {
    fn fits(&self, len_pkts: usize, len_bytes: u64, size: u32) -> bool {
        match *self {
            Limit::Packets(n) => len_pkts < n,
            Limit::Bytes(b) => len_bytes + size as u64 <= b,
        }
    }

    fn check(&self, name: &str) -> Result<(), SimError> {
        match *self {
            Limit::Packets(0) => Err(SimError::invalid(
                format!("{name}.limit_pkts"),
                0,
                "a queue of at least 1 packet",
            )),
            Limit::Bytes(0) => Err(SimError::invalid(
                format!("{name}.limit_bytes"),
                0,
                "a queue of at least 1 byte",
            )),
            // A queue that never drops could hold more packets than memory (issue 13: 1e9
            // packets at a 1 kbit/s link filled memory at 1 GB/s).
            Limit::Packets(n) if n > MAX_QUEUE_PKTS => Err(SimError::invalid(
                format!("{name}.limit_pkts"),
                n,
                "at most 1e6 packets (MAX_QUEUE_PKTS)",
            )),
            Limit::Bytes(b) if b > MAX_QUEUE_BYTES => Err(SimError::invalid(
                format!("{name}.limit_bytes"),
                b,
                "at most 1.5e9 bytes (MAX_QUEUE_PKTS of 1500 bytes)",
            )),
            _ => Ok(()),
        }
    }
}

/// How a queue is configured; [`QueueConfig::build`] validates and makes it.
#[derive(Clone, Debug, PartialEq)]
pub enum QueueConfig {
    DropTail(Limit),
    /// Drops each arriving packet with probability `p` (Bernoulli), then offers it to `inner`
    /// (the random-loss experiments of seed 001).
    RandomDrop {
        p: f64,
        inner: Box<QueueConfig>,
    },
    /// Like [`QueueConfig::RandomDrop`], but only for arrivals in `[start, end)`: a period of
    /// persistent loss that stops (the "backs off and recovers" checks of every controller).
    LossPeriod {
        p: f64,
        start: Instant,
        end: Instant,
        inner: Box<QueueConfig>,
    },
    /// Random Early Detection with gentle RED and ns-2's defaults ([`RedConfig::ns2_defaults`]).
    Red(RedConfig),
    /// RED with In/Out for a DiffServ AF class: color 0 is in profile, any other color out.
    Rio(RioConfig),
    /// Colors each arriving packet by a single-rate token bucket (color 0 if it conforms, 1 if
    /// not), then offers it to `inner`, typically [`QueueConfig::Rio`]. The bucket starts full.
    TokenBucketMarker {
        /// Committed rate (token refill), bit/s.
        rate_bps: u64,
        /// Bucket depth (committed burst size), bytes.
        bucket_bytes: u64,
        inner: Box<QueueConfig>,
    },
    /// Weighted round robin between classes chosen by DSCP; DSCPs no class lists go to
    /// `classes[default_class]`.
    Wrr {
        classes: Vec<WrrClass>,
        default_class: usize,
    },
    /// Deficit Round Robin between flows (`QItem::flow`) sharing `limit_pkts` of buffer; when it
    /// is full, the head packet of the flow with the most bytes queued is dropped.
    Drr {
        limit_pkts: usize,
        quantum_bytes: u32,
    },
}

impl QueueConfig {
    pub fn drop_tail_pkts(n: usize) -> Self {
        QueueConfig::DropTail(Limit::Packets(n))
    }

    /// DRR with the default quantum of [`DRR_DEFAULT_QUANTUM_BYTES`] (one Ethernet MTU).
    pub fn drr_pkts(limit_pkts: usize) -> Self {
        QueueConfig::Drr {
            limit_pkts,
            quantum_bytes: DRR_DEFAULT_QUANTUM_BYTES,
        }
    }

    /// `name` is the parameter path used in errors, e.g. `link[2].queue`.
    pub fn build(&self, name: &str) -> Result<Box<dyn Queue>, SimError> {
        match self {
            QueueConfig::DropTail(limit) => {
                limit.check(name)?;
                Ok(Box::new(DropTail::new(*limit)))
            }
            QueueConfig::RandomDrop { p, inner } => {
                if !(0.0..=1.0).contains(p) {
                    return Err(SimError::invalid(
                        format!("{name}.p"),
                        p,
                        "a probability in [0, 1]",
                    ));
                }
                Ok(Box::new(RandomDrop {
                    p: *p,
                    window: None,
                    inner: inner.build(&format!("{name}.inner"))?,
                }))
            }
            QueueConfig::LossPeriod {
                p,
                start,
                end,
                inner,
            } => {
                if !(0.0..=1.0).contains(p) {
                    return Err(SimError::invalid(
                        format!("{name}.p"),
                        p,
                        "a probability in [0, 1]",
                    ));
                }
                if end <= start {
                    return Err(SimError::invalid(
                        format!("{name}.end"),
                        end,
                        "an end after the start",
                    ));
                }
                Ok(Box::new(RandomDrop {
                    p: *p,
                    window: Some((*start, *end)),
                    inner: inner.build(&format!("{name}.inner"))?,
                }))
            }
            QueueConfig::Red(cfg) => Ok(Box::new(Red::new(cfg, name)?)),
            QueueConfig::Rio(cfg) => Ok(Box::new(Rio::new(cfg, name)?)),
            QueueConfig::TokenBucketMarker {
                rate_bps,
                bucket_bytes,
                inner,
            } => {
                let inner = inner.build(&format!("{name}.inner"))?;
                Ok(Box::new(TokenBucketMarker::new(
                    *rate_bps,
                    *bucket_bytes,
                    inner,
                    name,
                )?))
            }
            QueueConfig::Wrr {
                classes,
                default_class,
            } => Ok(Box::new(Wrr::new(classes, *default_class, name)?)),
            QueueConfig::Drr {
                limit_pkts,
                quantum_bytes,
            } => Ok(Box::new(Drr::new(*limit_pkts, *quantum_bytes, name)?)),
        }
    }
}

/// FIFO with a limit in packets or bytes; drops arrivals that do not fit.
#[derive(Debug)]
pub struct DropTail {
    limit: Limit,
    q: VecDeque<QItem>,
    bytes: u64,
}

impl DropTail {
    pub fn new(limit: Limit) -> Self {
        DropTail {
            limit,
            q: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl Queue for DropTail {
    fn bypass_when_idle(&self) -> bool {
        true
    }

    fn enqueue(&mut self, item: QItem, _now: Instant, _rng: &mut SimRng) -> Option<QItem> {
        if !self.limit.fits(self.q.len(), self.bytes, item.size_bytes) {
            return Some(item);
        }
        self.bytes += item.size_bytes as u64;
        self.q.push_back(item);
        None
    }

    fn dequeue(&mut self, _now: Instant) -> Option<QItem> {
        let item = self.q.pop_front()?;
        self.bytes -= item.size_bytes as u64;
        Some(item)
    }

    fn len_pkts(&self) -> usize {
        self.q.len()
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn lens(&self) -> (usize, u64) {
        (self.q.len(), self.bytes)
    }
}

/// Bernoulli random drop in front of another queue, always or only within a time window.
#[derive(Debug)]
pub struct RandomDrop {
    p: f64,
    window: Option<(Instant, Instant)>,
    inner: Box<dyn Queue>,
}

impl Queue for RandomDrop {
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        let active = self.window.is_none_or(|(a, b)| now >= a && now < b);
        if active && self.p > 0.0 && rng.random::<f64>() < self.p {
            return Some(item);
        }
        self.inner.enqueue(item, now, rng)
    }

    fn dequeue(&mut self, now: Instant) -> Option<QItem> {
        self.inner.dequeue(now)
    }

    fn len_pkts(&self) -> usize {
        self.inner.len_pkts()
    }

    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;

    fn item(i: u32, size: u32) -> QItem {
        QItem {
            id: PacketId(i),
            size_bytes: size,
            flow: 0,
            dscp: 0,
            color: 0,
        }
    }

    #[test]
    fn drop_tail_in_packets_and_bytes() {
        let mut rng = seeded(1);
        let mut q = QueueConfig::drop_tail_pkts(2).build("q").unwrap();
        assert_eq!(q.enqueue(item(1, 100), Instant::ZERO, &mut rng), None);
        assert_eq!(q.enqueue(item(2, 100), Instant::ZERO, &mut rng), None);
        assert_eq!(
            q.enqueue(item(3, 100), Instant::ZERO, &mut rng),
            Some(item(3, 100))
        );
        assert_eq!(q.dequeue(Instant::ZERO), Some(item(1, 100)));
        let mut q = QueueConfig::DropTail(Limit::Bytes(250)).build("q").unwrap();
        assert_eq!(q.enqueue(item(1, 100), Instant::ZERO, &mut rng), None);
        assert_eq!(q.enqueue(item(2, 100), Instant::ZERO, &mut rng), None);
        assert!(q.enqueue(item(3, 100), Instant::ZERO, &mut rng).is_some());
        assert_eq!(q.enqueue(item(4, 50), Instant::ZERO, &mut rng), None);
        assert_eq!(q.len_bytes(), 250);
    }

    #[test]
    fn random_drop_drops_about_p() {
        let mut rng = seeded(7);
        let cfg = QueueConfig::RandomDrop {
            p: 0.1,
            inner: Box::new(QueueConfig::drop_tail_pkts(1_000_000)),
        };
        let mut q = cfg.build("q").unwrap();
        let dropped = (0..100_000)
            .filter(|i| q.enqueue(item(*i, 1500), Instant::ZERO, &mut rng).is_some())
            .count();
        assert!((9_500..10_500).contains(&dropped), "{dropped}");
    }

    /// One of each discipline, nested the way scenarios nest them.
    fn every_discipline() -> Vec<(&'static str, QueueConfig)> {
        let rate = 10_000_000;
        let red = RedConfig::ns2_defaults(Limit::Packets(40), rate);
        let rio = RioConfig::new(
            Limit::Bytes(40_000),
            rate,
            RedThresholds {
                min_th_pkts: 10.0,
                max_th_pkts: 20.0,
                max_p: 0.02,
            },
            RedThresholds::NS2,
        );
        let marked_rio = QueueConfig::TokenBucketMarker {
            rate_bps: 2_000_000,
            bucket_bytes: 5_000,
            inner: Box::new(QueueConfig::Rio(rio.clone())),
        };
        vec![
            ("drop-tail pkts", QueueConfig::drop_tail_pkts(30)),
            (
                "drop-tail bytes",
                QueueConfig::DropTail(Limit::Bytes(20_000)),
            ),
            (
                "random drop",
                QueueConfig::RandomDrop {
                    p: 0.05,
                    inner: Box::new(QueueConfig::drop_tail_pkts(30)),
                },
            ),
            ("red", QueueConfig::Red(red.clone())),
            (
                "red bytes, not gentle",
                QueueConfig::Red(RedConfig {
                    limit: Limit::Bytes(30_000),
                    gentle: false,
                    q_weight: 0.05,
                    ..red.clone()
                }),
            ),
            ("rio", QueueConfig::Rio(rio)),
            ("marker + rio", marked_rio.clone()),
            ("drr", QueueConfig::drr_pkts(25)),
            (
                "wrr",
                QueueConfig::Wrr {
                    classes: vec![
                        WrrClass {
                            dscps: vec![46],
                            weight: 2,
                            queue: QueueConfig::Red(red),
                        },
                        WrrClass {
                            dscps: vec![10, 12],
                            weight: 3,
                            queue: marked_rio,
                        },
                        WrrClass {
                            dscps: vec![0],
                            weight: 1,
                            queue: QueueConfig::Drr {
                                limit_pkts: 15,
                                quantum_bytes: 700,
                            },
                        },
                    ],
                    default_class: 2,
                },
            ),
        ]
    }

    /// Behaviour every discipline shares: packets are conserved (each offered packet is queued,
    /// dropped once, or sent once; nothing else comes out) and `len_pkts`/`len_bytes` are exact
    /// after any mix of arrivals and departures, including drops of other packets than the
    /// arriving one.
    #[test]
    fn every_discipline_conserves_packets_and_counts_exactly() {
        use rand::RngExt;
        use std::collections::HashMap;
        for (label, cfg) in every_discipline() {
            for seed in 0..4 {
                let mut q = cfg.build("q").unwrap();
                let mut rng = seeded(seed);
                let mut traffic = seeded(1000 + seed);
                let mut queued: HashMap<PacketId, u32> = HashMap::new();
                let mut now = Instant::ZERO;
                let (mut offered, mut dropped, mut sent) = (0u32, 0u32, 0u32);
                for i in 0..20_000u32 {
                    now = now + coupling::Duration::from_micros(traffic.random_range(0..400));
                    // Bursty: arrivals outpace departures for a while, then the reverse.
                    let arrive_p = if (i / 2000) % 2 == 0 { 0.7 } else { 0.4 };
                    if traffic.random_bool(arrive_p) {
                        let it = QItem {
                            id: PacketId(i),
                            size_bytes: [40, 500, 1000, 1500][traffic.random_range(0..4)],
                            flow: traffic.random_range(0..6),
                            dscp: [0, 10, 12, 46, 63][traffic.random_range(0..5)],
                            color: traffic.random_range(0..2),
                        };
                        offered += 1;
                        queued.insert(it.id, it.size_bytes);
                        if let Some(d) = q.enqueue(it, now, &mut rng) {
                            assert_eq!(queued.remove(&d.id), Some(d.size_bytes), "{label}");
                            dropped += 1;
                        }
                    } else if let Some(d) = q.dequeue(now) {
                        assert_eq!(queued.remove(&d.id), Some(d.size_bytes), "{label}");
                        sent += 1;
                    } else {
                        assert!(queued.is_empty(), "{label}: dequeue gave nothing");
                    }
                    assert_eq!(q.len_pkts(), queued.len(), "{label}, step {i}");
                    let bytes: u64 = queued.values().map(|b| *b as u64).sum();
                    assert_eq!(q.len_bytes(), bytes, "{label}, step {i}");
                }
                while let Some(d) = q.dequeue(now) {
                    assert_eq!(queued.remove(&d.id), Some(d.size_bytes), "{label}");
                    sent += 1;
                }
                assert!(queued.is_empty(), "{label}");
                assert_eq!((q.len_pkts(), q.len_bytes()), (0, 0), "{label}");
                assert_eq!(offered, dropped + sent, "{label}");
                assert!(
                    dropped > 0 && sent > 0,
                    "{label}: {dropped} dropped, {sent} sent"
                );
            }
        }
    }

    #[test]
    fn invalid_queues_name_the_parameter() {
        let e = QueueConfig::drop_tail_pkts(0)
            .build("link[3].queue")
            .unwrap_err();
        assert!(e.to_string().contains("link[3].queue.limit_pkts"), "{e}");
        let e = QueueConfig::RandomDrop {
            p: 1.5,
            inner: Box::new(QueueConfig::drop_tail_pkts(5)),
        }
        .build("q")
        .unwrap_err();
        assert!(e.to_string().contains("q.p"), "{e}");
    }
}
