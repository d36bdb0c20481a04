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
    /// A scheduled priority change of a coupled TCP flow (index into `TcpCoupling`).
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
        self.now = Instant::from_nanos(t);
        self.events_run += 1;
        Some(ev)
    }

    /// Moves the clock to `end` if it is not past it already.
    pub fn advance_to(&mut self, end: Instant) {
        self.now = self.now.max(end);
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    pub fn events_run(&self) -> u64 {
        self.events_run
    }
}
