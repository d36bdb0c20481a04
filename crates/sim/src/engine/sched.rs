//! The scheduler: simulated time and the pending events.
//!
//! Time is an integer nanosecond [`Instant`]; events at the same instant run in the order they
//! were scheduled, so a run is bitwise reproducible.
//!
//! The pending events are kept in a calendar queue (R. Brown, "Calendar queues: a fast O(1)
//! priority queue implementation for the simulation event set problem", CACM 31(10), 1988) with a
//! binary heap for the far future:
//!
//! - the *ring*: [`BUCKETS`] buckets `2^shift` ns wide, for the events of the near future (time
//!   `t` with `t >> shift` less than [`BUCKETS`] past `base >> shift`, `base` being the clock),
//!   `t` in bucket `(t >> shift) % BUCKETS`. A bucket is a list sorted by time, the events at one
//!   time in the order they were scheduled (a new event goes after those at its time: ties need
//!   no sequence number). One bitmap word of the non-empty buckets, rotated to the clock's
//!   bucket, finds the next event's bucket; the lists' nodes live in one slab, reused most
//!   recently freed first, so the few live ones stay in the cache;
//! - the *far heap*: the events beyond the ring's span, ordered by (time, sequence number).
//!
//! The next event is the earlier of the ring's first and the heap's first; at equal times the
//! heap's runs first: an event goes to the heap only if its time was beyond the ring's span when it
//! was scheduled, and the span's end only moves forward (at a change of width every pending event
//! is placed again, all those at one time alike), so every event at that time in the ring was
//! scheduled after it.
//!
//! The width adapts to the run: every [`RETUNE_EVERY`] events run, it narrows if the sorted
//! insertions passed many events (crowded buckets), widens if more than one event in fifty went to
//! the far heap, and narrows if fewer than one in four hundred did (undoing that narrowing bars
//! another for a while). The order events run in depends on their times and the order they were
//! scheduled alone, never on the width. In scenario C (10 Gbit/s links: the next events 50 ns to
//! 4 us ahead, some 20 pending) the buckets settle at 64 ns, and the whole run takes a fifth less
//! time than with one binary heap of all the events (issue 14); in A and B (10 and 100 Mbit/s)
//! they settle at 32-64 us and 4 us.

use super::fabric::NetEvent;
use super::media_flows::MediaEvent;
use super::tcp_flows::TcpEvent;
use coupling::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Every event, by the module that handles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Event {
    Net(NetEvent),
    Tcp(TcpEvent),
    /// A UDP source sends its next packet.
    Udp(u32),
    Media(MediaEvent),
    /// A delayed FSE message reaches the FSE or a flow (a slot of `FseSignalling`).
    Fse(u32),
    /// A scheduled priority change of a coupled TCP flow (index into `TcpFlows::changes`).
    SetPriority(u32),
    /// The recorder samples flows and queues.
    Sample,
}

/// Buckets in the ring: one bitmap word.
const BUCKETS: u32 = 64;
/// Events run between two choices of the bucket width (at least; see `retune`).
const RETUNE_EVERY: u64 = 4096;
/// Nodes a sorted insertion passes, on average over a tuning period, beyond which the buckets
/// count as crowded and the width is narrowed.
const CROWDED: u64 = 4;
/// Choices the buckets are not narrowed for after a narrowing was undone: 64 the first time,
/// twice as many each time after, up to 65536 (some 270 M events).
const MIN_HOLD: u32 = 64;
const MAX_HOLD: u32 = 1 << 16;
/// The bucket width to start with: 256 ns (a 16 us span).
const INITIAL_SHIFT: u32 = 8;
/// The widest buckets: 2^57 ns, so that a span (64 buckets) is 2^63 ns.
const MAX_SHIFT: u32 = 57;
/// No entry (the end of a bucket's list).
const NIL: u32 = u32::MAX;

/// A pending event in the ring, linked to the next one in its bucket.
#[derive(Clone, Copy, Debug)]
struct Node {
    t: u64,
    ev: Event,
    next: u32,
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    now: Instant,
    /// log2 of the bucket width in ns.
    shift: u32,
    /// The time the ring is placed from: the clock, or the latest time the clock was at if it
    /// went back (an event scheduled in the past, which `Sim` refuses, runs next at its own time,
    /// as it did with a heap of all events, while the ring stays in order).
    base: u64,
    /// Bit `b`: bucket `b` is not empty.
    occupied: u64,
    /// Each bucket's first and last node in `nodes` (`NIL` when empty): a list sorted by time,
    /// in the order the events were scheduled at one time.
    first: [u32; BUCKETS as usize],
    last: [u32; BUCKETS as usize],
    /// The ring's events and free nodes (the free ones linked from `free`, most recently freed
    /// first, so the few live nodes stay in the cache).
    nodes: Vec<Node>,
    free: u32,
    in_ring: usize,
    far: BinaryHeap<Reverse<(u64, u64, Event)>>,
    far_seq: u64,
    /// The far heap's first time (`u64::MAX` when it is empty), kept apart from the heap for the
    /// comparison every event makes.
    far_first: u64,
    tuning: Tuning,
    events_run: u64,
    /// Events run since the clock last moved.
    at_this_instant: u64,
}

/// What the width is chosen from: counts since the last choice.
#[derive(Debug, Default)]
struct Tuning {
    /// `events_run` and `far_seq` at the last choice.
    run: u64,
    far: u64,
    /// Nodes passed by sorted insertions into the ring.
    passed: u64,
    /// The last choice narrowed the buckets.
    narrowed: bool,
    /// Choices left before the buckets may be narrowed again without crowding (after a
    /// narrowing sent too many events to the far heap and was undone).
    hold: u32,
    /// The last `hold` set.
    backoff: u32,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler {
            now: Instant::ZERO,
            shift: INITIAL_SHIFT,
            base: 0,
            occupied: 0,
            first: [NIL; BUCKETS as usize],
            last: [NIL; BUCKETS as usize],
            nodes: Vec::new(),
            free: NIL,
            in_ring: 0,
            far: BinaryHeap::new(),
            far_seq: 0,
            far_first: u64::MAX,
            tuning: Tuning::default(),
            events_run: 0,
            at_this_instant: 0,
        }
    }
}

impl Scheduler {
    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn schedule(&mut self, at: Instant, ev: Event) {
        let t = at.as_nanos();
        self.place(t, ev);
    }

    /// Puts an event in the ring if its time is within the ring's span, in the far heap otherwise.
    #[inline(always)]
    fn place(&mut self, t: u64, ev: Event) {
        let (slot, base_slot) = (t >> self.shift, self.base >> self.shift);
        // An event before the clock's bucket goes to the far heap, which runs it next; so does
        // one beyond the ring's span. (Said outright, not by wrapping: near u64::MAX a past
        // event's difference wrapped into the ring; review of issue 14.)
        if slot < base_slot || slot - base_slot >= u64::from(BUCKETS) {
            self.far_seq += 1;
            self.far.push(Reverse((t, self.far_seq, ev)));
            self.far_first = self.far_first.min(t);
            return;
        }
        let b = (slot % u64::from(BUCKETS)) as usize;
        let node = Node { t, ev, next: NIL };
        let n = if self.free == NIL {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let n = self.free;
            self.free = self.nodes[n as usize].next;
            self.nodes[n as usize] = node;
            n
        };
        self.in_ring += 1;
        let last = self.last[b];
        if last == NIL {
            self.first[b] = n;
            self.last[b] = n;
            self.occupied |= 1 << b;
        } else if self.nodes[last as usize].t <= t {
            self.nodes[last as usize].next = n;
            self.last[b] = n;
        } else {
            // Before the first node later than `t` (the last one is).
            let mut prev = NIL;
            let mut cur = self.first[b];
            while self.nodes[cur as usize].t <= t {
                prev = cur;
                cur = self.nodes[cur as usize].next;
                self.tuning.passed += 1;
            }
            self.nodes[n as usize].next = cur;
            if prev == NIL {
                self.first[b] = n;
            } else {
                self.nodes[prev as usize].next = n;
            }
        }
    }

    /// The first non-empty bucket from the clock's on (cyclically: the ring's order is time
    /// order from there).
    #[inline(always)]
    fn first_bucket(&self) -> Option<usize> {
        if self.occupied == 0 {
            return None;
        }
        let start = ((self.base >> self.shift) % u64::from(BUCKETS)) as u32;
        let d = self.occupied.rotate_right(start).trailing_zeros();
        Some(((start + d) % BUCKETS) as usize)
    }

    /// The next event's time and where it is: `Some(bucket)` in the ring, `None` in the far heap.
    #[inline(always)]
    fn next(&self) -> Option<(u64, Option<usize>)> {
        if let Some(b) = self.first_bucket() {
            let t = self.nodes[self.first[b] as usize].t;
            if t < self.far_first || self.far.is_empty() {
                return Some((t, Some(b)));
            }
        }
        (!self.far.is_empty()).then_some((self.far_first, None))
    }

    /// Removes the next event (known to be in `bucket`, or in the far heap if `None`).
    #[inline(always)]
    fn take(&mut self, bucket: Option<usize>) -> (u64, Event) {
        match bucket {
            Some(b) => {
                let n = self.first[b];
                let node = self.nodes[n as usize];
                self.first[b] = node.next;
                if node.next == NIL {
                    self.last[b] = NIL;
                    self.occupied &= !(1 << b);
                }
                self.nodes[n as usize].next = self.free;
                self.free = n;
                self.in_ring -= 1;
                (node.t, node.ev)
            }
            None => {
                let Reverse((t, _, ev)) = self.far.pop().expect("the far heap has the event");
                self.far_first = self.far.peek().map_or(u64::MAX, |&Reverse((t, _, _))| t);
                (t, ev)
            }
        }
    }

    /// Chooses the bucket width from what the events scheduled since the last choice did, and
    /// places the pending events again if it changed: narrower if sorted insertions passed more
    /// than [`CROWDED`] nodes per event, else wider if more than one event in fifty went to the
    /// far heap (two steps if one in two did) and insertions passed fewer than one node per
    /// event, else narrower if fewer than one in four hundred did (unless barred).
    #[cold]
    #[inline(never)]
    fn retune(&mut self) {
        let run = self.events_run - self.tuning.run;
        // A period at least twice the pending events: redistributing them costs little per event.
        if run < 2 * self.pending() as u64 {
            return;
        }
        let far = self.far_seq - self.tuning.far;
        let tu = &mut self.tuning;
        let passed = tu.passed;
        let mut narrowed = false;
        let shift = if passed > CROWDED * run {
            narrowed = true;
            self.shift.saturating_sub(1)
        } else if passed < run && far * 50 > run {
            if tu.narrowed {
                // Undoing a narrowing: not again for a while, twice as long each time.
                tu.backoff = (tu.backoff * 2).clamp(MIN_HOLD, MAX_HOLD);
                tu.hold = tu.backoff;
            }
            (self.shift + 1 + u32::from(far * 2 > run)).min(MAX_SHIFT)
        } else if far * 400 < run && tu.hold == 0 {
            narrowed = true;
            self.shift.saturating_sub(1)
        } else {
            self.shift
        };
        tu.narrowed = narrowed;
        tu.hold = tu.hold.saturating_sub(1);
        if shift != self.shift {
            self.redistribute(shift);
        }
        self.tuning.run = self.events_run;
        self.tuning.far = self.far_seq;
        self.tuning.passed = 0;
    }

    /// Sets the bucket width to `2^shift` ns: every pending event is taken out in order and
    /// placed again (events at one time keep their order).
    #[cold]
    #[inline(never)]
    fn redistribute(&mut self, shift: u32) {
        let mut all = Vec::with_capacity(self.pending());
        while let Some((_, at)) = self.next() {
            all.push(self.take(at));
        }
        self.shift = shift;
        for (t, ev) in all {
            self.place(t, ev);
        }
    }

    /// Whether an event is due at or before `end`.
    pub fn has_due(&self, end: Instant) -> bool {
        self.next().is_some_and(|(t, _)| t <= end.as_nanos())
    }

    /// The next event due at or before `end`, with the clock moved to it; `None` when none is.
    #[inline]
    pub fn pop_due(&mut self, end: Instant) -> Option<Event> {
        let (t, at) = self.next()?;
        if t > end.as_nanos() {
            return None;
        }
        let (_, ev) = self.take(at);
        if t == self.now.as_nanos() {
            self.at_this_instant += 1;
        } else {
            self.at_this_instant = 1;
        }
        self.now = Instant::from_nanos(t);
        self.base = self.base.max(t);
        self.events_run += 1;
        if self.events_run % RETUNE_EVERY == 0 {
            self.retune();
        }
        Some(ev)
    }

    /// Moves the clock to `end` if it is not past it already.
    pub fn advance_to(&mut self, end: Instant) {
        // Every pending event is after `end` (none was due): each stays within the ring's span
        // from the new clock, in the same bucket.
        self.now = self.now.max(end);
        self.base = self.base.max(end.as_nanos());
    }

    /// Events run at the current instant without the clock moving: in the millions only when
    /// handlers keep scheduling each other at one instant (a spin, a bug; issue 14's FSE idle
    /// loop was one).
    pub fn events_at_this_instant(&self) -> u64 {
        self.at_this_instant
    }

    pub fn pending(&self) -> usize {
        self.in_ring + self.far.len()
    }

    pub fn events_run(&self) -> u64 {
        self.events_run
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;
    use rand::RngExt;

    /// The reference: one binary heap of (time, sequence number, event), as the scheduler was.
    #[derive(Default)]
    struct Model {
        heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
        seq: u64,
    }

    impl Model {
        fn schedule(&mut self, t: u64, id: u32) {
            self.seq += 1;
            self.heap.push(Reverse((t, self.seq, id)));
        }
        fn pop_due(&mut self, end: u64) -> Option<(u64, u32)> {
            let &Reverse((t, _, id)) = self.heap.peek()?;
            (t <= end).then(|| {
                self.heap.pop();
                (t, id)
            })
        }
    }

    fn id(ev: Event) -> u32 {
        match ev {
            Event::Udp(i) => i,
            e => panic!("not a test event: {e:?}"),
        }
    }

    fn pop(s: &mut Scheduler, end: u64) -> Option<(u64, u32)> {
        s.pop_due(Instant::from_nanos(end))
            .map(|ev| (s.now().as_nanos(), id(ev)))
    }

    fn drain(s: &mut Scheduler) -> Vec<(u64, u32)> {
        std::iter::from_fn(|| pop(s, u64::MAX)).collect()
    }

    #[test]
    fn events_at_one_instant_are_counted_until_the_clock_moves() {
        let mut s = Scheduler::default();
        for _ in 0..5 {
            s.schedule(Instant::from_nanos(7), Event::Sample);
        }
        s.schedule(Instant::from_nanos(9), Event::Sample);
        let end = Instant::from_nanos(100);
        for n in 1..=5 {
            assert!(s.pop_due(end).is_some());
            assert_eq!(s.events_at_this_instant(), n);
        }
        assert!(s.pop_due(end).is_some());
        assert_eq!(
            (s.now(), s.events_at_this_instant()),
            (Instant::from_nanos(9), 1)
        );
        assert!(s.pop_due(end).is_none());
    }

    #[test]
    fn events_at_one_time_run_in_the_order_they_were_scheduled() {
        let mut s = Scheduler::default();
        // Times given out of order, each several times, in one bucket and across buckets.
        let times = [300u64, 100, 300, 5, 100, 300, 5, 70_000, 100, 5, 70_000, 0];
        for (i, &t) in times.iter().enumerate() {
            s.schedule(Instant::from_nanos(t), Event::Udp(i as u32));
        }
        assert_eq!(s.pending(), times.len());
        let mut want: Vec<(u64, u32)> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i as u32))
            .collect();
        // A stable sort by time alone: scheduling order within a time.
        want.sort_by_key(|&(t, _)| t);
        assert_eq!(drain(&mut s), want);
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn far_future_events_run_in_time_and_before_later_scheduled_ties() {
        let mut s = Scheduler::default();
        let span = u64::from(BUCKETS) << s.shift;
        // Beyond the ring's span: to the far heap.
        let far = 10 * span + 3;
        s.schedule(Instant::from_nanos(far), Event::Udp(0));
        s.schedule(Instant::from_nanos(u64::MAX), Event::Udp(1));
        s.schedule(Instant::from_nanos(u64::MAX - 1), Event::Udp(2));
        s.schedule(Instant::from_nanos(far), Event::Udp(3));
        assert_eq!(s.far.len(), 4);
        // Near events walk the clock up to the far ones.
        let mut n = 100;
        let mut t = 0;
        while t + span / 2 < far {
            t += span / 2;
            s.schedule(Instant::from_nanos(t), Event::Udp(n));
            assert_eq!(pop(&mut s, u64::MAX), Some((t, n)));
            n += 1;
        }
        // `far` is within the span now: the same time again goes to the ring, and runs after
        // the two scheduled before it, which are in the heap.
        s.schedule(Instant::from_nanos(far), Event::Udp(4));
        assert!(!s.has_due(Instant::from_nanos(far - 1)));
        assert_eq!(pop(&mut s, far - 1), None);
        assert!(s.has_due(Instant::from_nanos(far)));
        assert_eq!(
            drain(&mut s),
            [
                (far, 0),
                (far, 3),
                (far, 4),
                (u64::MAX - 1, 2),
                (u64::MAX, 1)
            ]
        );
    }

    #[test]
    fn advancing_the_clock_keeps_the_ring_in_order() {
        let mut s = Scheduler::default();
        let span = u64::from(BUCKETS) << s.shift;
        s.schedule(Instant::from_nanos(span - 1), Event::Udp(0));
        s.schedule(Instant::from_nanos(span / 2), Event::Udp(1));
        s.advance_to(Instant::from_nanos(span / 2 - 1));
        // From the new clock the ring reaches further: these come after both pending events.
        s.schedule(Instant::from_nanos(span + span / 4), Event::Udp(2));
        s.schedule(Instant::from_nanos(span / 2), Event::Udp(3));
        assert_eq!(
            drain(&mut s),
            [
                (span / 2, 1),
                (span / 2, 3),
                (span - 1, 0),
                (span + span / 4, 2)
            ]
        );
    }

    #[test]
    fn an_event_scheduled_in_the_past_runs_next_as_with_one_heap() {
        // `Sim` refuses past times; should one slip through, it runs next at its own time (the
        // clock going back), as with a heap of all events, and the rest keep their order.
        let mut s = Scheduler::default();
        for (i, t) in [1_000_000u64, 1_000_050, 1_020_000].into_iter().enumerate() {
            s.schedule(Instant::from_nanos(t), Event::Udp(i as u32));
        }
        assert_eq!(pop(&mut s, u64::MAX), Some((1_000_000, 0)));
        s.schedule(Instant::from_nanos(999_999), Event::Udp(3));
        s.schedule(Instant::from_nanos(10), Event::Udp(4));
        assert_eq!(
            drain(&mut s),
            [(10, 4), (999_999, 3), (1_000_050, 1), (1_020_000, 2)]
        );
    }

    /// The reviewer's case: with the finest buckets and the clock near u64::MAX, a past event's
    /// bucket difference wrapped into the ring and ran after a later event.
    #[test]
    fn a_past_event_near_the_end_of_time_still_runs_first() {
        let mut s = Scheduler {
            shift: 0,
            ..Scheduler::default()
        };
        s.schedule(Instant::from_nanos(u64::MAX), Event::Udp(0));
        assert_eq!(pop(&mut s, u64::MAX), Some((u64::MAX, 0)));
        s.schedule(Instant::from_nanos(u64::MAX), Event::Udp(1));
        s.schedule(Instant::from_nanos(100), Event::Udp(2));
        s.schedule(Instant::from_nanos(10), Event::Udp(3));
        assert_eq!(drain(&mut s), [(10, 3), (100, 2), (u64::MAX, 1)]);
    }

    /// Random runs against the model through phases that move the bucket width both ways:
    /// events every few ns to every few ms, bursts at one instant, far timers, and a crowd of
    /// pending events.
    #[test]
    fn runs_as_one_heap_of_all_events_would() {
        let mut rng = seeded(14);
        let mut s = Scheduler::default();
        let mut m = Model::default();
        let mut next_id = 0u32;
        let mut shifts = std::collections::BTreeSet::new();
        // (largest step ahead in ns, events to run, pending to keep, one in how many is a timer
        // up to 1 s ahead)
        let phases: [(u64, u32, usize, u32); 8] = [
            (60, 30_000, 20, 0),
            (4_000, 30_000, 30, 20),
            (2_000_000, 30_000, 10, 0),
            (0, 5_000, 50, 20),
            (1_000, 40_000, 5_000, 0),
            (200, 30_000, 20, 500),
            (100_000_000, 20_000, 200, 20),
            (30, 40_000, 20, 0),
        ];
        for (max_ahead, events, keep, timers) in phases {
            for _ in 0..events {
                while s.pending() < keep || rng.random_range(0..3) == 0 {
                    let now = s.now().as_nanos();
                    let ahead = if timers > 0 && rng.random_range(0..timers) == 0 {
                        rng.random_range(0..1_000_000_000)
                    } else if rng.random_range(0..10) == 0 {
                        // At the clock: a tie with what runs now.
                        0
                    } else {
                        rng.random_range(0..=max_ahead)
                    };
                    let t = now + ahead;
                    s.schedule(Instant::from_nanos(t), Event::Udp(next_id));
                    m.schedule(t, next_id);
                    next_id += 1;
                }
                assert_eq!(s.pending(), m.heap.len());
                // Sometimes only up to a nearer end, as `Sim::run_until` does.
                let end = match rng.random_range(0..8) {
                    0 => s.now().as_nanos() + rng.random_range(0..=max_ahead),
                    _ => u64::MAX,
                };
                let got = pop(&mut s, end);
                assert_eq!(got, m.pop_due(end));
                if got.is_none() {
                    s.advance_to(Instant::from_nanos(end));
                }
                shifts.insert(s.shift);
            }
        }
        let (narrowest, widest) = (shifts.first().unwrap(), shifts.last().unwrap());
        assert!(
            *narrowest < 4 && *widest > 16,
            "the width moved through {shifts:?}"
        );
        let mut rest = Vec::new();
        while let Some(e) = m.pop_due(u64::MAX) {
            rest.push(e);
        }
        assert_eq!(drain(&mut s), rest);
    }
}
