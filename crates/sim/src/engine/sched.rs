//! The scheduler: simulated time and the pending events.
//!
//! Time is an integer nanosecond [`Instant`]; events at the same instant run in the order they
//! were scheduled (a sequence number breaks ties), so a run is bitwise reproducible.

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

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    now: Instant,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    next_seq: u64,
    events_run: u64,
    /// Events run since the clock last moved.
    at_this_instant: u64,
}

impl Scheduler {
    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn schedule(&mut self, at: Instant, ev: Event) {
        self.next_seq += 1;
        self.heap.push(Reverse((at.as_nanos(), self.next_seq, ev)));
    }

    /// Whether an event is due at or before `end`.
    pub fn has_due(&self, end: Instant) -> bool {
        self.heap
            .peek()
            .is_some_and(|Reverse((t, _, _))| *t <= end.as_nanos())
    }

    /// The next event due at or before `end`, with the clock moved to it; `None` when none is.
    pub fn pop_due(&mut self, end: Instant) -> Option<Event> {
        let &Reverse((t, _, ev)) = self.heap.peek()?;
        if t > end.as_nanos() {
            return None;
        }
        self.heap.pop();
        if t == self.now.as_nanos() {
            self.at_this_instant += 1;
        } else {
            self.at_this_instant = 1;
        }
        self.now = Instant::from_nanos(t);
        self.events_run += 1;
        Some(ev)
    }

    /// Moves the clock to `end` if it is not past it already.
    pub fn advance_to(&mut self, end: Instant) {
        self.now = self.now.max(end);
    }

    /// Events run at the current instant without the clock moving: in the millions only when
    /// handlers keep scheduling each other at one instant (a spin, a bug; issue 14's FSE idle
    /// loop was one).
    pub fn events_at_this_instant(&self) -> u64 {
        self.at_this_instant
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    pub fn events_run(&self) -> u64 {
        self.events_run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
