//! The network fabric: links, the packet pool and forwarding. Per hop a packet costs at most two
//! events: the end of its serialization and its arrival; a link keeps only its head packet's
//! arrival scheduled (its propagating packets wait in order in the link's pipe), so the event
//! heap stays small.

use super::record::PacketTaps;
use super::sched::{Event, Scheduler};
use super::PacketCounts;
use crate::net::queue::QItem;
use crate::net::{LinkId, Network, NodeId};
use crate::packet::{Packet, PacketId, PacketKind, PacketPool};
use crate::rng::{seeded, SimRng};
use crate::stats::PacketEventKind;
use crate::transport::tcp::Outbox;
use coupling::{Duration, Instant};
use rand::RngExt;

/// Mixed into the run's seed for the jitter stream ("jitter" in ASCII).
const JITTER_STREAM: u64 = 0x6a69_7474_6572;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NetEvent {
    /// A link finished serializing its current packet.
    TxDone(u32),
    /// The head of a link's pipe reaches the far end.
    Arrive(u32),
}

/// What became of an observed data segment (a measured group's member's), by its packet slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Observation {
    /// `flow` numbers TCP flows, or media flows when `media`.
    Sent {
        slot: u32,
        flow: u32,
        media: bool,
    },
    Arrived {
        slot: u32,
    },
    Dropped {
        slot: u32,
    },
}

#[derive(Debug)]
pub(crate) struct Fabric {
    pub net: Network,
    pool: PacketPool,
    counts: PacketCounts,
    /// Packet traces and pcap captures: packets as the fabric moves them.
    pub taps: PacketTaps,
    /// Packets of each TCP flow in the network (data and ACKs): its agent keeps a finished flow's
    /// connection until none is left.
    tcp_in_network: Vec<u32>,
    /// TCP flows whose last packet in the network a queue dropped (their agent may free them).
    tcp_emptied_by_drop: Vec<u32>,
    /// Data segments of each TCP flow the network dropped (a flow's own loss rate, seed 000
    /// Fig. 2(b); its retransmissions also count a timeout's go-back-N resends).
    pub tcp_data_dropped: Vec<u64>,
    /// Links' jitter draws, a stream of their own (seeded from the run's seed): turning jitter on
    /// changes no other random process (random drop, RED, sources, FSE delays draw as before).
    jitter_rng: SimRng,
    /// TCP flows whose data segments are observed (measured groups' members), by flow.
    observed: Vec<bool>,
    /// Media flows whose packets are observed, by media flow.
    observed_media: Vec<bool>,
    /// Observed segments sent, arrived or dropped since the engine last took them (at this
    /// instant: the engine takes them after every event).
    pub observations: Vec<Observation>,
}

impl Fabric {
    pub fn new(net: Network, seed: u64) -> Self {
        Fabric {
            jitter_rng: seeded(seed ^ JITTER_STREAM),
            net,
            pool: PacketPool::default(),
            counts: PacketCounts::default(),
            taps: PacketTaps::default(),
            tcp_in_network: Vec::new(),
            tcp_emptied_by_drop: Vec::new(),
            tcp_data_dropped: Vec::new(),
            observed: Vec::new(),
            observed_media: Vec::new(),
            observations: Vec::new(),
        }
    }

    /// Observes TCP flow `f`'s data segments from now on.
    pub fn observe(&mut self, f: u32) {
        let f = f as usize;
        if f >= self.observed.len() {
            self.observed.resize(f + 1, false);
        }
        self.observed[f] = true;
    }

    /// Observes media flow `f`'s media packets from now on.
    pub fn observe_media(&mut self, f: u32) {
        let f = f as usize;
        if f >= self.observed_media.len() {
            self.observed_media.resize(f + 1, false);
        }
        self.observed_media[f] = true;
    }

    fn is_observed(&self, p: &Packet) -> bool {
        let of = match p.kind {
            PacketKind::TcpData => &self.observed,
            PacketKind::Media => &self.observed_media,
            _ => return false,
        };
        of.get(p.flow as usize) == Some(&true)
    }

    /// Sends every packet in the outbox from its source node, in the order they were written.
    pub fn send_all(
        &mut self,
        out: &mut Outbox,
        now: Instant,
        sched: &mut Scheduler,
        rng: &mut SimRng,
    ) {
        // The buffer is handed back to keep its capacity.
        let mut buf = std::mem::take(&mut out.packets);
        for p in buf.drain(..) {
            self.counts.created += 1;
            if p.kind.is_tcp() {
                let f = p.flow as usize;
                if f >= self.tcp_in_network.len() {
                    self.tcp_in_network.resize(f + 1, 0);
                }
                self.tcp_in_network[f] += 1;
            }
            let src = p.src;
            let observed = self.is_observed(&p);
            let id = self.pool.alloc(p);
            if observed {
                self.observations.push(Observation::Sent {
                    slot: id.0,
                    flow: p.flow,
                    media: p.kind == PacketKind::Media,
                });
            }
            // Flows have distinct endpoints, so nothing is delivered where it is sent.
            let delivered = self.forward(src, id, now, sched, rng);
            debug_assert!(delivered.is_none(), "a packet sent to its own source");
        }
        out.packets = buf;
    }

    /// Packets of TCP flow `f` in the network.
    pub fn tcp_in_network(&self, f: u32) -> u32 {
        self.tcp_in_network.get(f as usize).copied().unwrap_or(0)
    }

    /// The TCP flows whose last packet in the network was dropped since the last call.
    pub fn take_tcp_emptied(&mut self, into: &mut Vec<u32>) {
        into.append(&mut self.tcp_emptied_by_drop);
    }

    /// Runs a link event; returns the packet it delivered to its destination, if any.
    pub fn handle(
        &mut self,
        ev: NetEvent,
        now: Instant,
        sched: &mut Scheduler,
        rng: &mut SimRng,
    ) -> Option<Packet> {
        match ev {
            NetEvent::TxDone(l) => {
                self.tx_done(LinkId(l), now, sched);
                None
            }
            NetEvent::Arrive(l) => {
                let link = &mut self.net.links[l as usize];
                let (_, id) = link.pipe.pop_front().expect("an arrival has a packet");
                let to = link.to;
                if let Some(&(t, _)) = link.pipe.front() {
                    sched.schedule(t, Event::Net(NetEvent::Arrive(l)));
                }
                self.forward(to, id, now, sched, rng)
            }
        }
    }

    /// Forwards a packet at node `at`: delivered (freed from the pool and returned) if it is
    /// its destination, queued on the next link otherwise.
    fn forward(
        &mut self,
        at: NodeId,
        id: PacketId,
        now: Instant,
        sched: &mut Scheduler,
        rng: &mut SimRng,
    ) -> Option<Packet> {
        let p = self.pool.get(id);
        if p.dst == at {
            if self.is_observed(p) {
                self.observations.push(Observation::Arrived { slot: id.0 });
            }
            let p = self.pool.free(id);
            self.counts.delivered += 1;
            if p.kind.is_tcp() {
                self.tcp_in_network[p.flow as usize] -= 1;
            }
            self.taps.trace(now, PacketEventKind::Deliver, u32::MAX, &p);
            return Some(p);
        }
        let link = self
            .net
            .route(at, p.dst, p.hash)
            .expect("flows are checked for routes when added");
        self.enqueue(link, id, now, sched, rng);
        None
    }

    /// Offers a packet to a link: every packet goes through the queue discipline (so RED's
    /// average, a marker's meter and random drop see all arrivals, as in ns-2), and an idle link
    /// takes it straight back out.
    fn enqueue(
        &mut self,
        link: LinkId,
        id: PacketId,
        now: Instant,
        sched: &mut Scheduler,
        rng: &mut SimRng,
    ) {
        let p = self.pool.get(id);
        self.taps.trace(now, PacketEventKind::Enqueue, link.0, p);
        // The fields the queue sees (not a copy of the whole packet).
        let item = QItem {
            id,
            size_bytes: p.size_bytes,
            flow: p.flow,
            dscp: p.dscp,
            color: p.color,
        };
        let l = &mut self.net.links[link.0 as usize];
        l.stats.offered_pkts += 1;
        if l.transmitting.is_none() && l.queue.bypass_when_idle() {
            // A plain FIFO at an idle link: in and straight out again (see Queue::bypass_when_idle).
            self.start_tx(link, id, item.size_bytes, now, sched);
            return;
        }
        l.account_queue(now);
        let dropped = l.queue.enqueue(item, now, rng);
        if let Some(d) = dropped {
            let l = &mut self.net.links[link.0 as usize];
            l.stats.dropped_pkts += 1;
            l.stats.dropped_bytes += d.size_bytes as u64;
            self.counts.dropped += 1;
            if self.is_observed(self.pool.get(d.id)) {
                self.observations
                    .push(Observation::Dropped { slot: d.id.0 });
            }
            let dp = self.pool.free(d.id);
            self.taps.trace(now, PacketEventKind::Drop, link.0, &dp);
            if dp.kind == PacketKind::TcpData {
                let f = dp.flow as usize;
                if f >= self.tcp_data_dropped.len() {
                    self.tcp_data_dropped.resize(f + 1, 0);
                }
                self.tcp_data_dropped[f] += 1;
            }
            if dp.kind.is_tcp() {
                let n = &mut self.tcp_in_network[dp.flow as usize];
                *n -= 1;
                if *n == 0 {
                    self.tcp_emptied_by_drop.push(dp.flow);
                }
            }
        }
        let l = &mut self.net.links[link.0 as usize];
        if l.transmitting.is_none() {
            if let Some(next) = l.queue.dequeue(now) {
                self.start_tx(link, next.id, next.size_bytes, now, sched);
            }
        } else {
            l.note_queue_len();
        }
    }

    fn start_tx(
        &mut self,
        link: LinkId,
        id: PacketId,
        size: u32,
        now: Instant,
        sched: &mut Scheduler,
    ) {
        if self.taps.active() {
            let p = *self.pool.get(id);
            self.taps.transmit(now, link.0, &p);
        }
        let l = &mut self.net.links[link.0 as usize];
        l.transmitting = Some(id);
        let tx = l.tx_time_memo(size);
        l.stats.busy_ns += tx.as_nanos();
        l.stats.tx_pkts += 1;
        l.stats.tx_bytes += size as u64;
        sched.schedule(now + tx, Event::Net(NetEvent::TxDone(link.0)));
    }

    fn tx_done(&mut self, link: LinkId, now: Instant, sched: &mut Scheduler) {
        let l = &mut self.net.links[link.0 as usize];
        let id = l
            .transmitting
            .take()
            .expect("a link finishing a transmission has a packet");
        let mut arrive = now + l.delay;
        if l.jitter > Duration::ZERO {
            // Uniform in [0, jitter], to the nanosecond; never before the packet ahead.
            let extra = self.jitter_rng.random_range(0..=l.jitter.as_nanos());
            arrive = arrive + Duration::from_nanos(extra);
            if let Some(&(last, _)) = l.pipe.back() {
                arrive = arrive.max(last);
            }
        }
        l.pipe.push_back((arrive, id));
        let first = l.pipe.len() == 1;
        l.account_queue(now);
        let next = l.queue.dequeue(now);
        if first {
            sched.schedule(arrive, Event::Net(NetEvent::Arrive(link.0)));
        }
        if let Some(item) = next {
            self.start_tx(link, item.id, item.size_bytes, now, sched);
        }
    }

    /// Packets created, delivered, dropped and in flight so far: created = delivered + dropped +
    /// in flight always holds.
    pub fn packet_counts(&self) -> PacketCounts {
        PacketCounts {
            in_flight: self.pool.live() as u64,
            ..self.counts
        }
    }

    /// The high-water mark of the packet pool.
    pub fn pool_capacity(&self) -> usize {
        self.pool.capacity()
    }
}
