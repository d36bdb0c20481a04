//! Weighted round robin between DSCP classes.
//!
//! Each class has its own sub-queue (any [`QueueConfig`]: drop-tail, RED, RIO behind a marker,
//! DRR, ...) and a weight. Arrivals are classified by DSCP (RFC 2474: the six-bit field; a value
//! no class lists, or one above 63, goes to the default class). Dequeue visits the classes in
//! order, round after round, and serves up to `weight` packets from each class per round, skipping
//! empty classes; when a class runs empty or has had its `weight` packets, the next class's turn
//! begins. With all classes backlogged, class `i` gets `weight_i / sum(weight)` of the packets
//! (of the bytes only if packet sizes are equal: WRR counts packets; use DRR for bytes).
//!
//! Sub-queues see `dequeue` only when they have something to send, except when the whole
//! scheduler is empty: then each is told, so RED-like sub-queues learn the link went idle.

use super::{QItem, Queue, QueueConfig};
use crate::error::SimError;
use crate::rng::SimRng;
use coupling::Instant;

/// One WRR class.
#[derive(Clone, Debug, PartialEq)]
pub struct WrrClass {
    /// DSCP values (0..=63) classified into this class; none may appear in two classes.
    pub dscps: Vec<u8>,
    /// Packets served per round when backlogged, > 0.
    pub weight: u32,
    pub queue: QueueConfig,
}

/// WRR between DSCP classes; see the module docs.
#[derive(Debug)]
pub struct Wrr {
    weights: Vec<u32>,
    queues: Vec<Box<dyn Queue>>,
    by_dscp: [usize; 64],
    default_class: usize,
    /// The class whose turn it is and how many packets it has had in this turn.
    current: usize,
    served: u32,
}

impl Wrr {
    /// Validates and builds; errors name e.g. `link[0].queue.classes[1].weight`.
    pub fn new(classes: &[WrrClass], default_class: usize, name: &str) -> Result<Self, SimError> {
        if classes.is_empty() {
            return Err(SimError::invalid(
                format!("{name}.classes"),
                "[]",
                "at least one class",
            ));
        }
        if default_class >= classes.len() {
            return Err(SimError::invalid(
                format!("{name}.default_class"),
                default_class,
                "the index of one of the classes",
            ));
        }
        let mut by_dscp = [usize::MAX; 64];
        let mut queues = Vec::with_capacity(classes.len());
        for (i, c) in classes.iter().enumerate() {
            let cname = format!("{name}.classes[{i}]");
            if c.weight == 0 {
                return Err(SimError::invalid(
                    format!("{cname}.weight"),
                    0,
                    "a weight > 0 packets per round",
                ));
            }
            for &d in &c.dscps {
                let slot = by_dscp.get_mut(d as usize).ok_or_else(|| {
                    SimError::invalid(format!("{cname}.dscps"), d, "DSCP values in 0..=63")
                })?;
                if *slot != usize::MAX {
                    return Err(SimError::invalid(
                        format!("{cname}.dscps"),
                        d,
                        "DSCP values not listed by another class",
                    ));
                }
                *slot = i;
            }
            queues.push(c.queue.build(&format!("{cname}.queue"))?);
        }
        for slot in &mut by_dscp {
            if *slot == usize::MAX {
                *slot = default_class;
            }
        }
        Ok(Wrr {
            weights: classes.iter().map(|c| c.weight).collect(),
            queues,
            by_dscp,
            default_class,
            current: 0,
            served: 0,
        })
    }

    /// The class an arrival with `dscp` joins.
    pub fn class_of(&self, dscp: u8) -> usize {
        self.by_dscp
            .get(dscp as usize)
            .copied()
            .unwrap_or(self.default_class)
    }

    fn next_turn(&mut self) {
        self.current = (self.current + 1) % self.queues.len();
        self.served = 0;
    }
}

impl Queue for Wrr {
    fn enqueue(&mut self, item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        let c = self.class_of(item.dscp);
        self.queues[c].enqueue(item, now, rng)
    }

    fn dequeue(&mut self, now: Instant) -> Option<QItem> {
        if self.len_pkts() == 0 {
            for q in &mut self.queues {
                let none = q.dequeue(now);
                debug_assert!(none.is_none(), "an empty sub-queue gave a packet");
            }
            return None;
        }
        // At most one full pass after the current class: some class is backlogged.
        for _ in 0..=self.queues.len() {
            let c = self.current;
            if self.served < self.weights[c] && self.queues[c].len_pkts() > 0 {
                if let Some(item) = self.queues[c].dequeue(now) {
                    self.served += 1;
                    if self.served == self.weights[c] {
                        self.next_turn();
                    }
                    return Some(item);
                }
            }
            self.next_turn();
        }
        None
    }

    fn len_pkts(&self) -> usize {
        self.queues.iter().map(|q| q.len_pkts()).sum()
    }

    fn len_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.len_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketId;
    use crate::rng::seeded;

    const EF: u8 = 46;
    const AF11: u8 = 10;

    fn item(i: u32, dscp: u8, size: u32) -> QItem {
        QItem {
            id: PacketId(i),
            size_bytes: size,
            flow: dscp as u32,
            dscp,
            color: 0,
        }
    }

    fn class(dscps: &[u8], weight: u32, limit: usize) -> WrrClass {
        WrrClass {
            dscps: dscps.to_vec(),
            weight,
            queue: QueueConfig::drop_tail_pkts(limit),
        }
    }

    fn three_to_one() -> Box<dyn Queue> {
        QueueConfig::Wrr {
            classes: vec![class(&[EF], 3, 1000), class(&[0], 1, 1000)],
            default_class: 1,
        }
        .build("q")
        .unwrap()
    }

    #[test]
    fn weights_three_to_one_serve_three_to_one_when_backlogged() {
        let mut q = three_to_one();
        let mut rng = seeded(1);
        for i in 0..400 {
            assert_eq!(q.enqueue(item(i, EF, 1500), Instant::ZERO, &mut rng), None);
            assert_eq!(
                q.enqueue(item(1000 + i, 0, 500), Instant::ZERO, &mut rng),
                None
            );
        }
        let order: Vec<u8> = (0..400)
            .map(|_| q.dequeue(Instant::ZERO).unwrap().dscp)
            .collect();
        assert_eq!(order.iter().filter(|d| **d == EF).count(), 300);
        assert_eq!(&order[..8], &[EF, EF, EF, 0, EF, EF, EF, 0]);
        assert_eq!(q.len_pkts(), 400);
        assert_eq!(q.len_bytes(), 100 * 1500 + 300 * 500);
    }

    #[test]
    fn empty_classes_are_skipped_and_unlisted_dscps_go_to_the_default_class() {
        let mut q = three_to_one();
        let mut rng = seeded(1);
        // AF11 is not listed: default class (the weight-1 one). Only it is backlogged, so it
        // gets every turn: WRR is work-conserving.
        for i in 0..5 {
            q.enqueue(item(i, AF11, 100), Instant::ZERO, &mut rng);
        }
        let ids: Vec<u32> = (0..5)
            .map(|_| q.dequeue(Instant::ZERO).unwrap().id.0)
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
        assert_eq!(q.dequeue(Instant::ZERO), None);
        // A class that runs empty mid-turn hands the turn on.
        q.enqueue(item(10, EF, 100), Instant::ZERO, &mut rng);
        q.enqueue(item(11, 0, 100), Instant::ZERO, &mut rng);
        q.enqueue(item(12, 0, 100), Instant::ZERO, &mut rng);
        let ids: Vec<u32> = (0..3)
            .map(|_| q.dequeue(Instant::ZERO).unwrap().id.0)
            .collect();
        assert_eq!(ids, [10, 11, 12]);
        assert_eq!((q.len_pkts(), q.len_bytes()), (0, 0));
    }

    #[test]
    fn sub_queues_drop_on_their_own() {
        let mut q = QueueConfig::Wrr {
            classes: vec![class(&[EF], 1, 2), class(&[0], 1, 1000)],
            default_class: 1,
        }
        .build("q")
        .unwrap();
        let mut rng = seeded(1);
        let drops = (0..5)
            .filter(|i| {
                q.enqueue(item(*i, EF, 100), Instant::ZERO, &mut rng)
                    .is_some()
            })
            .count();
        assert_eq!(drops, 3);
        assert_eq!(q.enqueue(item(9, 0, 100), Instant::ZERO, &mut rng), None);
        assert_eq!((q.len_pkts(), q.len_bytes()), (3, 300));
    }

    #[test]
    fn invalid_wrr_parameters_name_the_parameter() {
        let bad = |classes: Vec<WrrClass>, default_class, want: &str| {
            let e = QueueConfig::Wrr {
                classes,
                default_class,
            }
            .build("link[2].queue")
            .unwrap_err();
            assert!(e.to_string().contains(&format!("invalid {want}:")), "{e}");
        };
        bad(vec![], 0, "link[2].queue.classes");
        bad(vec![class(&[0], 1, 5)], 1, "link[2].queue.default_class");
        bad(
            vec![class(&[0], 1, 5), class(&[EF], 0, 5)],
            0,
            "link[2].queue.classes[1].weight",
        );
        bad(
            vec![class(&[0], 1, 5), class(&[64], 1, 5)],
            0,
            "link[2].queue.classes[1].dscps",
        );
        bad(
            vec![class(&[0, EF], 1, 5), class(&[EF], 1, 5)],
            0,
            "link[2].queue.classes[1].dscps",
        );
        bad(
            vec![class(&[0], 1, 5), class(&[EF], 1, 0)],
            0,
            "link[2].queue.classes[1].queue.limit_pkts",
        );
    }
}
