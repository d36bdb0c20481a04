//! Queue disciplines. A link owns one [`Queue`]; the packet being transmitted is not in it (as in
//! ns-2 and ns-3), so "queue length" means packets waiting.
//!
//! A queue sees [`QItem`]s: the packet id with the few fields disciplines decide on, so no
//! discipline reaches into the packet pool. `enqueue` returns the item it dropped, if any: the
//! arriving one (drop-tail, RED) or another one (DRR drops from the longest flow queue).

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
}

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
}

impl QueueConfig {
    pub fn drop_tail_pkts(n: usize) -> Self {
        QueueConfig::DropTail(Limit::Packets(n))
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
                    inner: inner.build(&format!("{name}.inner"))?,
                }))
            }
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
}

/// Bernoulli random drop in front of another queue.
#[derive(Debug)]
pub struct RandomDrop {
    p: f64,
    inner: Box<dyn Queue>,
}

impl Queue for RandomDrop {
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        if self.p > 0.0 && rng.random::<f64>() < self.p {
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
