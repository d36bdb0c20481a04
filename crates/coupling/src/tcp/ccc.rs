//! ctrlTCP / TCP-CCC: seed 003 Algorithms 5 (register), 6 (leave) and 7 (update), sec. 9.2 and the
//! appendix text of ch. 9; the same algorithm as the TCP-CCC draft (seed 003 ch. 11, sec. 2). With
//! `handover`, a joining connection's share is released by the ACKs of the others (Algorithm 4,
//! ch. 7, and sec. 9.2.4).
//!
//! One connection, the coordinating connection (CoCo), dictates the increase of the aggregate
//! window `sum_cwnd` in congestion avoidance; the others get their priority-weighted share. There
//! is exactly one aggregate reduction per loss event, and the aggregate slow-starts only when every
//! connection is in slow start.
//!
//! ## Deviations from the pseudo-code (issue 11), and why
//! Read literally, Algorithm 7 reduces the aggregate only when the CoCo *leaves* FR (line 20) and
//! gives a timed-out connection its full share back on its next report (lines 8, 12-13). Measured
//! in the simulator (10 Mbit/s, 100 ms, 83 packets, 2-10 NewReno flows with cross traffic), that
//! gives loss storms: (1) while the CoCo is in FR the others keep their unreduced shares, so their
//! retransmissions are lost too; (2) if the CoCo's FR ends in a timeout it never reports leaving
//! FR, the reduction never happens, and the timed-out connection, just reset to resend from
//! snd_una, is told its whole share (over 100 segments) and sends it back to back into a full
//! queue; (3) lines 12-13 clear its timeout mark at once, so the "all connections timed out"
//! restart (lines 33-37) can never fire. The dissertation expects a timed-out flow to "recover the
//! lost packets when it enters Fast Recovery", but RFC 6582/6675 forbid a new FR after a timeout
//! until the recovery point is passed, so any real TCP applying the told window after an RTO bursts
//! the same way. Hence:
//! 1. **The reduction happens when the loss event begins** (a connection enters FR, or times out
//!    from CA/SS, while no event is in progress): `sum_ssthresh = sum_cwnd * beta` and `sum_cwnd =
//!    sum_ssthresh` at once (as one SACK TCP sets cwnd = ssthresh on entering recovery), so every
//!    other connection gets its reduced share at its next ACK. `beta` is the reporting connection's
//!    own reduction, ssthresh / (window it was told), but at least 1/2 (RFC 5681), and 1/2 where
//!    that ratio says nothing (a window under 4 segments, whose ssthresh is floored at 2). A ratio
//!    below 1/2 comes from a flight size below the window (RFC 5681 sets ssthresh from
//!    FlightSize / 2), not from the controller's factor: an application-limited connection with 4
//!    of its 15 segments in flight would otherwise cut the whole aggregate by 87 %. That
//!    connection owns the event and becomes the CoCo (line 6). Leaving FR reduces nothing (line 20
//!    applies only to a decrease the CoCo reports outside a loss event).
//! 2. **One reduction per loss event, always.** The event lasts until its owner leaves FR or, if
//!    it began with (or its FR ended in) a timeout, until the owner is back at its share or a
//!    connection completes a recovery that began during the event: a timed-out owner may stay
//!    silent through RTO backoff, and losses after such a recovery are new congestion. A connection entering FR
//!    during the event belongs to it (line 5's purpose: "one reduction only for the full duration
//!    of one flow's FR phase"). A timeout starts no event if the connection was in FR (that FR
//!    already counted, as the event's start or as part of one) or has not reported since its last
//!    timeout (a repeated RTO: RFC 5681 sec. 3.1 holds ssthresh for a segment the timer already
//!    retransmitted). An owner that leaves passes the event to a connection still in FR, if any.
//! 3. **A timed-out connection is not given its share back at once.** It is told its loss window
//!    and an ssthresh of its current share, and its own controller slow-starts back to the share on
//!    its own ACK clock; its timeout mark (ssbit) lasts until it is back within a segment of its
//!    share (or reports CA). The CoCo role passes to a connection that still receives ACKs (line 39). When every
//!    connection carries the mark, nothing is delivered on the path: the aggregate restarts from
//!    the windows the connections actually have (lines 33-37), with the event's `sum_ssthresh`.
//! 4. **No answer allows a burst** (module docs of `tcp`): a connection whose share is above what
//!    it may send at once is told that and slow-starts up to the share. This applies to joiners
//!    (Algorithm 5 would hand a joiner its share as one burst), to the connections that take over a
//!    leaving connection's share (Algorithm 6), and to the timed-out ones (item 3). In congestion
//!    avoidance a connection below its share does not grow the aggregate while it catches up; in
//!    the aggregate's slow start it does once it holds more than half its share (item 5).
//! 5. **Start-up** (lines 16-41 never grow `sum_cwnd` for a CoCo in SS without a timeout, so the
//!    first connection could never grow beyond its initial window). The aggregate slow-starts while
//!    every connection is in SS, none carries a timeout mark, no handover runs and `sum_cwnd` is
//!    below `sum_ssthresh` (or no loss has set one): RFC 5681's condition for one flow. Then every
//!    connection's increase adds to `sum_cwnd`, since the aggregate's ACKs are all connections'
//!    ACKs and one flow adds a segment per segment acked; so it doubles per RTT as one flow would.
//!    As Linux grows cwnd in slow start only while `tcp_is_cwnd_limited` (cwnd < 2 * packets out),
//!    an increase counts only from a connection holding more than half its share. (An earlier
//!    version scaled the CoCo's increase by `sum_P / P`; with priorities 5e-324 and 1 that is
//!    infinite.) In CA only the CoCo's increase counts, `+ (cwnd - ccc_cwnd)` as line 18: +1 segment
//!    per RTT for the aggregate, and only while the CoCo holds its whole share.
//! 6. **Line 9** gives a non-CoCo `P * sum_ssthresh / sum_P` even while `sum_ssthresh` is 0 (no loss
//!    yet), which would put it into CA with ssthresh 0; as lines 23-25 do for the CoCo, it keeps its
//!    own ssthresh until the aggregate has one.
//! 7. **Leave** (Algorithm 6) keeps `sum_cwnd`: the aggregate's window is the group's, and the
//!    others take over the leaving connection's share (Fig. 9.6: "flow 1 gets all of the cwnd"),
//!    by slow start (item 4). The CoCo passes to the next connection in registration order that is
//!    not in FR and has no timeout mark, if any.
//! 8. **Handover** (Algorithm 4; the dissertation leaves concurrent joins open, sec. 7.4). A joiner's
//!    target is its share at join time; ACKs of connections that are not themselves in handover
//!    release one segment to each joiner every N ACKs (N = connections in the group now), each
//!    joiner with its own ACK counter. When another connection joins, every running handover's
//!    target shrinks to its new, smaller share (`min(target, share now)`, also applied after a
//!    decrease of the aggregate), so releases never exceed what the joiners are entitled to. While
//!    any handover runs, increases do not grow the aggregate (the ACKs that clock a joiner replace
//!    the others' cwnd increase); decreases apply as usual. A joiner that becomes the CoCo, or that
//!    has no other connection left to clock it, ends its handover and slow-starts to its share. A
//!    joiner starts with one segment, counted as released, so it is never left at 0 when its
//!    handover ends without a release (a timeout made it the CoCo; Linux allows no cwnd of 0).
//!    While its handover runs it still grows only by the others' ACKs: if they go idle without
//!    leaving or timing out, it stays at the segments released so far (a limit of Algorithm 4,
//!    which has no clock of its own).
//! 9. **Floors and priorities:** a connection is never told less than one segment of cwnd
//!    ([`super::MIN_CWND_PKTS`]: a smaller share would stall it for good) nor less than two of
//!    ssthresh (RFC 5681). In the float mode shares are `(P / sum_P) * sum`, so every accepted
//!    priority (down to 5e-324, up to 1e12) gives a finite share no larger than the aggregate; the
//!    integer mode ([`super::arith::Int`]) computes `round(P * sum / sum_P)` exactly in 128 bits,
//!    with priorities of at least 2^-16.

use super::arith::{
    self, allowance, bounded, max, min, min_cwnd, ssthresh_share, Arith, Float, Int, Report,
};
use super::{
    check_max_burst, check_register, ConnView, Release, Response, TcpCoupler, TcpState, TcpUpdate,
};
use crate::error::Error;
use crate::group::FlowId;
use crate::units::check_priority;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
struct Handover<A: Arith> {
    target: A::W,
    released: u64,
    acks: u64,
}

#[derive(Clone, Debug)]
struct Conn<A: Arith> {
    id: FlowId,
    /// Registration sequence number: "the next connection" and "the first connection where ..."
    /// follow registration order.
    seq: u64,
    p: A::P,
    /// ccc_cwnd: always what the connection was last told.
    cwnd: A::W,
    ssthresh: A::W,
    state: TcpState,
    /// Timed out and not yet back at its share (module docs item 3).
    ssbit: bool,
    /// Timed out and not heard from since: another timeout now is a repeated RTO of the same loss
    /// (RFC 5681 sec. 3.1: ssthresh is held for a segment already retransmitted by the timer).
    rto_pending: bool,
    /// `reductions` when it last entered FR: a recovery that began before a timeout's loss event
    /// does not end that event (item 2).
    fr_epoch: u64,
    handover: Option<Handover<A>>,
}

/// ctrlTCP with `f64` windows and priorities.
pub type TcpCcc = Ccc<Float>;
/// ctrlTCP in the integer window mode (whole packets, priorities in units of 2^-16): the
/// kernel's arithmetic (see [`super::arith`]).
pub type TcpCccInt = Ccc<Int>;

/// One coupled group of TCP connections under ctrlTCP, computing in `A` ([`TcpCcc`] or
/// [`TcpCccInt`]).
///
/// Connections live in a slab (O(1) access on the update path); the ordered sets are touched only
/// when a connection changes state, joins, leaves or is in handover.
#[derive(Clone, Debug)]
pub struct Ccc<A: Arith> {
    handover_enabled: bool,
    max_burst_pkts: A::W,
    slots: Vec<Option<Conn<A>>>,
    free: Vec<usize>,
    index: FxHashMap<FlowId, usize>,
    /// Registration order: seq -> slot.
    order: BTreeMap<u64, usize>,
    next_seq: u64,
    coco: Option<usize>,
    /// The connection whose FR or timeout began the loss event in progress (module docs item 2).
    event: Option<usize>,
    /// `reductions` once that event's reduction was made.
    event_epoch: u64,
    sum_p: A::PSum,
    sum_cwnd: A::W,
    sum_ssthresh: A::W,
    /// Sequence numbers of connections whose state is not SS (candidates for CoCo, line 39).
    not_ss: BTreeSet<u64>,
    n_ssbits: usize,
    /// Sequence numbers of connections in ack-clocked handover.
    handovers: BTreeSet<u64>,
    /// Reductions of the aggregate so far (loss events and timeout restarts), for tests and traces.
    reductions: u64,
    ops_since_resum: usize,
}

impl<A: Arith> Ccc<A> {
    pub fn new(handover: bool) -> Self {
        Ccc {
            handover_enabled: handover,
            max_burst_pkts: A::count(0),
            slots: Vec::new(),
            free: Vec::new(),
            index: FxHashMap::default(),
            order: BTreeMap::new(),
            next_seq: 0,
            coco: None,
            event: None,
            event_epoch: 0,
            sum_p: A::PSum::default(),
            sum_cwnd: A::count(0),
            sum_ssthresh: A::count(0),
            not_ss: BTreeSet::new(),
            n_ssbits: 0,
            handovers: BTreeSet::new(),
            reductions: 0,
            ops_since_resum: 0,
        }
    }

    pub fn handover_enabled(&self) -> bool {
        self.handover_enabled
    }
    pub fn sum_ssthresh(&self) -> f64 {
        A::pkts(self.sum_ssthresh)
    }
    pub fn sum_priority(&self) -> f64 {
        A::psum_f64(&self.sum_p)
    }
    /// The coordinating connection.
    pub fn coco(&self) -> Option<FlowId> {
        self.coco.map(|s| self.c(s).id)
    }
    /// The connection whose loss event is in progress, if any.
    pub fn loss_event(&self) -> Option<FlowId> {
        self.event.map(|s| self.c(s).id)
    }
    /// How many times the aggregate was reduced: one per loss event, plus one per restart after
    /// every connection timed out.
    pub fn reductions(&self) -> u64 {
        self.reductions
    }
    /// Every connection is in slow start: the only time the aggregate may slow-start.
    pub fn all_in_slow_start(&self) -> bool {
        self.not_ss.is_empty()
    }
    pub fn handovers_running(&self) -> usize {
        self.handovers.len()
    }

    fn c(&self, slot: usize) -> &Conn<A> {
        self.slots[slot].as_ref().expect("live slot")
    }

    fn c_mut(&mut self, slot: usize) -> &mut Conn<A> {
        self.slots[slot].as_mut().expect("live slot")
    }

    fn slot(&self, conn: FlowId) -> Result<usize, Error> {
        self.index
            .get(&conn)
            .copied()
            .ok_or(Error::UnknownFlow(conn))
    }

    fn in_fr(&self, slot: usize) -> bool {
        self.c(slot).state == TcpState::FastRecovery
    }

    fn share_of(&self, slot: usize) -> A::W {
        A::share(self.c(slot).p, self.sum_cwnd, &self.sum_p)
    }

    /// The connection was told more than a segment less than its share (it is catching up by
    /// slow start).
    fn behind(&self, slot: usize) -> bool {
        arith::is_behind::<A>(self.c(slot).cwnd, self.share_of(slot))
    }

    /// Lines 23-25 (and 13-16 of Algorithm 5): the aggregate's ssthresh share once it has one,
    /// else the connection's own.
    fn ssthresh_for(&self, p: A::P, own: A::W) -> A::W {
        if self.sum_ssthresh > A::count(0) {
            ssthresh_share::<A>(p, self.sum_ssthresh, &self.sum_p)
        } else {
            own
        }
    }

    /// Records the state and returns the previous one.
    fn set_state(&mut self, slot: usize, state: TcpState) -> TcpState {
        let c = self.c_mut(slot);
        let (old, seq) = (c.state, c.seq);
        if old == state {
            return old;
        }
        c.state = state;
        if state == TcpState::SlowStart {
            self.not_ss.remove(&seq);
        } else {
            self.not_ss.insert(seq);
        }
        old
    }

    fn set_ssbit(&mut self, slot: usize, bit: bool) {
        let c = self.c_mut(slot);
        if c.ssbit != bit {
            c.ssbit = bit;
            if bit {
                self.n_ssbits += 1;
            } else {
                self.n_ssbits -= 1;
                // A timed-out owner back at its share ends its loss event (module docs item 2).
                if self.event == Some(slot) {
                    self.event = None;
                }
            }
        }
    }

    fn end_handover(&mut self, slot: usize) {
        let c = self.c_mut(slot);
        if c.handover.take().is_some() {
            let seq = c.seq;
            self.handovers.remove(&seq);
        }
    }

    fn make_coco(&mut self, slot: usize) {
        self.end_handover(slot);
        self.coco = Some(slot);
    }

    /// The first connection in registration order, starting after `after` (wrapping), that
    /// satisfies `ok`.
    fn first_from(&self, after: u64, ok: impl Fn(&Conn<A>) -> bool) -> Option<usize> {
        self.order
            .range(after + 1..)
            .chain(self.order.range(..=after))
            .map(|(_, s)| *s)
            .find(|s| ok(self.c(*s)))
    }

    /// Module docs item 1: a loss event begins with `slot`'s report; the aggregate is reduced now.
    fn begin_loss_event(&mut self, slot: usize, r: &Report<A>) {
        let told = self.c(slot).cwnd;
        self.sum_ssthresh = A::reduce(self.sum_cwnd, r.ssthresh, told);
        self.sum_cwnd = self.sum_ssthresh;
        self.event = Some(slot);
        self.reductions += 1;
        self.event_epoch = self.reductions;
    }

    /// Lines 30-40 with module docs items 2-3: `slot` has had a retransmission timeout.
    fn on_timeout(&mut self, slot: usize, old: TcpState, r: &Report<A>) {
        let repeated = self.c(slot).rto_pending;
        if self.event.is_none() && old != TcpState::FastRecovery && !repeated {
            self.begin_loss_event(slot, r);
        }
        self.c_mut(slot).rto_pending = true;
        self.set_ssbit(slot, true);
        self.end_handover(slot);
        self.c_mut(slot).cwnd = max(r.cwnd, min_cwnd::<A>());
        if self.n_ssbits == self.index.len() {
            // Lines 33-37: nothing is delivered on the path any more; the aggregate restarts from
            // the windows the connections actually have, towards the event's sum_ssthresh.
            self.sum_cwnd = self
                .slots
                .iter()
                .flatten()
                .fold(A::count(0), |s, c| A::add(s, c.cwnd));
            if self.sum_ssthresh <= A::count(0) {
                self.sum_ssthresh = self.sum_cwnd;
            }
            for c in self.slots.iter_mut().flatten() {
                c.ssbit = false;
            }
            self.n_ssbits = 0;
            self.event = None;
            self.reductions += 1;
            let c = self.c(slot);
            let ssthresh = ssthresh_share::<A>(c.p, self.sum_ssthresh, &self.sum_p);
            self.c_mut(slot).ssthresh = ssthresh;
            return;
        }
        // Item 3: its loss window now, its share as ssthresh, slow start on its own ACK clock.
        let target = ssthresh_share::<A>(self.c(slot).p, self.sum_cwnd, &self.sum_p);
        self.c_mut(slot).ssthresh = target;
        if self.coco == Some(slot) {
            // Line 39: ACKs still arrive on connections without a timeout mark.
            let seq = self.c(slot).seq;
            let next = self
                .first_from(seq, |c| !c.ssbit && c.state != TcpState::SlowStart)
                .or_else(|| self.first_from(seq, |c| !c.ssbit));
            if let Some(next) = next {
                self.make_coco(next);
            }
        }
    }

    /// Lines 16-41 for the CoCo's report in CA or SS (no timeout, not leaving FR): its increase or
    /// decrease changes the aggregate.
    fn coco_report(&mut self, slot: usize, u: &TcpUpdate, r: &Report<A>) {
        let stored = self.c(slot).cwnd;
        if r.cwnd < stored {
            // Line 20, for a decrease outside a loss event (e.g. an idle restart).
            if stored > A::count(0) {
                self.sum_cwnd = A::scale(self.sum_cwnd, r.cwnd, stored);
            }
            return;
        }
        match u.state {
            TcpState::CongestionAvoidance => {
                // Line 18, unless the increase only brings the CoCo back towards its share (item 4)
                // or clocks a joiner (item 8).
                if !self.behind(slot) && self.handovers.is_empty() {
                    self.sum_cwnd = A::add(self.sum_cwnd, r.cwnd - stored);
                }
            }
            TcpState::SlowStart => {
                if let Some(seq) = self.not_ss.first() {
                    // Line 39: a connection that is not in SS dictates the aggregate.
                    let next = self.order[seq];
                    self.make_coco(next);
                } else if self.c(slot).ssbit {
                    let seq = self.c(slot).seq;
                    if let Some(next) = self.first_from(seq, |c| !c.ssbit) {
                        self.make_coco(next);
                    }
                } else {
                    self.slow_start_increase(slot, u, r);
                }
            }
            TcpState::FastRecovery => {}
        }
    }

    /// Module docs item 5: while the aggregate slow-starts, every connection's increase grows it.
    fn slow_start_increase(&mut self, slot: usize, u: &TcpUpdate, r: &Report<A>) {
        let c = self.c(slot);
        let slow_start = u.state == TcpState::SlowStart
            && self.not_ss.is_empty()
            && self.n_ssbits == 0
            && self.handovers.is_empty()
            && (self.sum_ssthresh <= A::count(0) || self.sum_cwnd < self.sum_ssthresh);
        if slow_start && r.cwnd > c.cwnd && A::double(c.cwnd) > self.share_of(slot) {
            self.sum_cwnd = A::add(self.sum_cwnd, r.cwnd - c.cwnd);
        }
    }

    /// The answer outside FR: the connection's share, bounded so it allows no burst (item 4). A
    /// connection in handover keeps the segments released to it.
    fn assign(&mut self, slot: usize, r: &Report<A>) {
        let normal = self.ssthresh_for(self.c(slot).p, r.ssthresh);
        let allowed = allowance::<A>(r, self.max_burst_pkts);
        let c = self.c_mut(slot);
        if c.handover.is_some() {
            // The segments released so far, or less if its own window has shrunk.
            c.cwnd = min(c.cwnd, allowed);
            c.ssthresh = normal;
            return;
        }
        let (cwnd, ssthresh, behind) = bounded::<A>(self.share_of(slot), normal, allowed);
        let c = self.c_mut(slot);
        c.cwnd = cwnd;
        c.ssthresh = ssthresh;
        if !behind {
            self.set_ssbit(slot, false);
        }
    }

    fn response(&self, slot: usize) -> Response {
        let c = self.c(slot);
        Response {
            cwnd_pkts: A::pkts(c.cwnd),
            ssthresh_pkts: A::pkts(c.ssthresh),
        }
    }

    fn view(&self, slot: usize) -> ConnView {
        let c = self.c(slot);
        ConnView {
            conn: c.id,
            priority: A::priority_f64(c.p),
            cwnd_pkts: A::pkts(c.cwnd),
            ssthresh_pkts: A::pkts(c.ssthresh),
            state: c.state,
            coordinating: self.coco == Some(slot),
            handover: c
                .handover
                .as_ref()
                .map(|h| (h.released, A::pkts(min(h.target, self.share_of(slot))))),
            timed_out: c.ssbit,
        }
    }

    fn after_op(&mut self) {
        self.ops_since_resum += 1;
        if self.ops_since_resum > self.index.len() + 64 {
            self.ops_since_resum = 0;
            self.sum_p = A::psum_of(self.slots.iter().flatten().map(|c| c.p));
        }
    }
}

impl<A: Arith> TcpCoupler for Ccc<A> {
    fn name(&self) -> &'static str {
        match (self.handover_enabled, A::SUFFIX.is_empty()) {
            (false, true) => "ccc",
            (true, true) => "ccc_handover",
            (false, false) => "ccc_int",
            (true, false) => "ccc_handover_int",
        }
    }

    /// Algorithm 5, with the joiner's share bounded by what it may send at once (item 4).
    fn register(
        &mut self,
        conn: FlowId,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> Result<Response, Error> {
        check_register(
            self.index.contains_key(&conn),
            conn,
            priority,
            cwnd_pkts,
            ssthresh_pkts,
        )?;
        let priority = A::priority(priority)?;
        let told = TcpUpdate::new(cwnd_pkts, ssthresh_pkts, TcpState::SlowStart);
        let r = Report::<A>::of(&told);
        let first = self.index.is_empty();
        if first {
            // Lines 3-8.
            self.sum_p = A::PSum::default();
            self.sum_cwnd = A::count(0);
            self.sum_ssthresh = A::count(0);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        A::psum_add(&mut self.sum_p, priority);
        self.sum_cwnd = A::add(self.sum_cwnd, r.cwnd);
        let target = A::share(priority, self.sum_cwnd, &self.sum_p);
        let normal = self.ssthresh_for(priority, r.ssthresh);
        // A joiner in handover starts with one segment (counted as released): with none it would
        // depend on the others' ACKs for good, and could be left at 0 if they stop (a timeout, a
        // leave); Linux does not allow a cwnd of 0 either.
        let handover = (self.handover_enabled && !first).then_some(Handover {
            target,
            released: 1,
            acks: 0,
        });
        let (cwnd, ssthresh) = if handover.is_some() {
            self.handovers.insert(seq);
            (min_cwnd::<A>(), normal)
        } else {
            let (cwnd, ssthresh, _) =
                bounded::<A>(target, normal, allowance::<A>(&r, self.max_burst_pkts));
            (cwnd, ssthresh)
        };
        let c = Conn {
            id: conn,
            seq,
            p: priority,
            cwnd,
            ssthresh,
            state: TcpState::SlowStart,
            ssbit: false,
            rto_pending: false,
            fr_epoch: 0,
            handover,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(c);
                s
            }
            None => {
                self.slots.push(Some(c));
                self.slots.len() - 1
            }
        };
        self.index.insert(conn, slot);
        self.order.insert(seq, slot);
        if first {
            self.coco = Some(slot);
        }
        self.after_op();
        Ok(self.response(slot))
    }

    /// Algorithm 7 with the deviations of the module docs.
    fn update(&mut self, conn: FlowId, u: TcpUpdate) -> Result<Option<Response>, Error> {
        let slot = self.slot(conn)?;
        u.check()?;
        let r = Report::<A>::of(&u);
        // Line 3.
        let old = self.set_state(slot, u.state);
        if u.timeout {
            self.on_timeout(slot, old, &r);
            self.after_op();
            return Ok(Some(self.response(slot)));
        }
        // Heard from since any timeout: its next timeout is a new loss (item 2).
        self.c_mut(slot).rto_pending = false;
        if u.state == TcpState::FastRecovery {
            // Lines 5-6 with item 1: the first FR of a loss event reduces the aggregate now; an FR
            // during the event belongs to it. No answer in FR (line 43).
            if old != TcpState::FastRecovery {
                // A joiner with a loss of its own has its own loss reaction: no more handover.
                self.end_handover(slot);
                if self.event.is_none() {
                    self.begin_loss_event(slot, &r);
                    self.make_coco(slot);
                }
                let epoch = self.reductions;
                self.c_mut(slot).fr_epoch = epoch;
            }
            self.after_op();
            return Ok(None);
        }
        let leaving_fr = old == TcpState::FastRecovery;
        let recovered_during_event = self.c(slot).fr_epoch >= self.event_epoch;
        if leaving_fr
            && self
                .event
                .is_some_and(|e| e == slot || (!self.in_fr(e) && recovered_during_event))
        {
            // The event's one reduction was made when it began (item 1). An event begun by a
            // timeout also ends when a connection completes a recovery that began during it (item
            // 2): the owner may stay silent through RTO backoff, and later losses are new
            // congestion; a recovery older than the event is part of the congestion before it.
            self.event = None;
        }
        // Lines 12-14.
        if self.c(slot).ssbit && u.state != TcpState::SlowStart {
            self.set_ssbit(slot, false);
        }
        if self.coco == Some(slot) {
            if !leaving_fr {
                self.coco_report(slot, &u, &r);
            }
        } else {
            self.slow_start_increase(slot, &u, &r);
        }
        // Lines 8-9 and 22-26.
        self.assign(slot, &r);
        self.after_op();
        Ok(Some(self.response(slot)))
    }

    /// Algorithm 6.
    fn leave(&mut self, conn: FlowId) -> Result<(), Error> {
        let slot = self.slot(conn)?;
        if self.index.len() == 1 {
            *self = Ccc {
                max_burst_pkts: self.max_burst_pkts,
                reductions: self.reductions,
                ..Ccc::new(self.handover_enabled)
            };
            return Ok(());
        }
        let seq = self.c(slot).seq;
        let was_coco = self.coco == Some(slot);
        let owned_event = self.event == Some(slot);
        self.set_state(slot, TcpState::SlowStart);
        self.set_ssbit(slot, false);
        self.end_handover(slot);
        // The next connection in registration order: for the CoCo, one not in FR and without a
        // timeout mark if any (item 7); for the loss event, one still in FR (item 2).
        let next_coco = was_coco.then(|| {
            self.first_from(seq, |c| {
                c.seq != seq && c.state != TcpState::FastRecovery && !c.ssbit
            })
            .or_else(|| self.first_from(seq, |c| c.seq != seq && c.state != TcpState::FastRecovery))
            .or_else(|| self.first_from(seq, |c| c.seq != seq))
            .expect("another connection remains")
        });
        let next_event = if owned_event {
            self.first_from(seq, |c| c.seq != seq && c.state == TcpState::FastRecovery)
        } else {
            self.event
        };
        let c = self.slots[slot].take().expect("live slot");
        self.free.push(slot);
        self.index.remove(&conn);
        self.order.remove(&c.seq);
        A::psum_sub(&mut self.sum_p, c.p);
        A::psum_settle(&mut self.sum_p, || self.slots.iter().flatten().map(|c| c.p));
        self.event = next_event;
        if let Some(next) = next_coco {
            self.make_coco(next);
        }
        // Without a connection outside handover, nothing clocks the joiners any more.
        if self.handovers.len() == self.index.len() {
            let slots: Vec<usize> = self.handovers.iter().map(|seq| self.order[seq]).collect();
            for s in slots {
                self.end_handover(s);
            }
        }
        self.after_op();
        Ok(())
    }

    fn set_max_burst_pkts(&mut self, pkts: f64) -> Result<(), Error> {
        self.max_burst_pkts = A::window(check_max_burst(pkts)?);
        Ok(())
    }

    fn set_priority(&mut self, conn: FlowId, priority: f64) -> Result<(), Error> {
        let slot = self.slot(conn)?;
        check_priority(priority)?;
        let priority = A::priority(priority)?;
        let c = self.c_mut(slot);
        let old = std::mem::replace(&mut c.p, priority);
        A::psum_sub(&mut self.sum_p, old);
        A::psum_add(&mut self.sum_p, priority);
        A::psum_settle(&mut self.sum_p, || self.slots.iter().flatten().map(|c| c.p));
        self.after_op();
        Ok(())
    }

    /// Algorithm 4, run for every joiner on each ACK of a connection that is not in handover.
    fn on_ack(&mut self, conn: FlowId, released: &mut Vec<Release>) -> Result<(), Error> {
        let slot = self.slot(conn)?;
        if self.handovers.is_empty() || self.c(slot).handover.is_some() {
            return Ok(());
        }
        let n = self.index.len() as u64;
        let (sum_cwnd, sum_p) = (self.sum_cwnd, self.sum_p);
        let (slots, order) = (&mut self.slots, &self.order);
        self.handovers.retain(|seq| {
            let c = slots[order[seq]].as_mut().expect("live slot");
            let full = A::share(c.p, sum_cwnd, &sum_p);
            let h = c.handover.as_mut().expect("in handover");
            let target = min(h.target, full);
            let mut release = false;
            if A::count(h.released) < target {
                // Lines 5-9: one more segment for the joiner (on top of what it has: never a burst).
                if h.acks % n == 0 {
                    h.released += 1;
                    c.cwnd = A::add(c.cwnd, A::count(1));
                    release = true;
                }
                h.acks += 1;
            }
            let done = A::count(h.released) >= target;
            if release || done {
                if done {
                    // What it has, or its share if that has shrunk below; if its window lags the
                    // segments released, it slow-starts the rest of the way.
                    c.cwnd = max(min(full, c.cwnd), min_cwnd::<A>());
                }
                released.push(Release {
                    conn: c.id,
                    cwnd_pkts: A::pkts(c.cwnd),
                    done,
                });
            }
            if done {
                c.handover = None;
            }
            !done
        });
        Ok(())
    }

    fn sum_cwnd(&self) -> f64 {
        A::pkts(self.sum_cwnd)
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn conn(&self, conn: FlowId) -> Result<ConnView, Error> {
        Ok(self.view(self.slot(conn)?))
    }

    fn conns(&self) -> Vec<ConnView> {
        self.order.values().map(|s| self.view(*s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TcpState::*;

    fn ca(cwnd: f64, ssthresh: f64) -> TcpUpdate {
        TcpUpdate::new(cwnd, ssthresh, CongestionAvoidance)
    }
    fn ss(cwnd: f64, ssthresh: f64) -> TcpUpdate {
        TcpUpdate::new(cwnd, ssthresh, SlowStart)
    }
    fn fr(cwnd: f64, ssthresh: f64) -> TcpUpdate {
        TcpUpdate::new(cwnd, ssthresh, FastRecovery)
    }
    fn told(g: &TcpCcc, conn: u64) -> f64 {
        g.conn(FlowId(conn)).unwrap().cwnd_pkts
    }

    /// Two connections in CA at their shares: sum_cwnd 30, 15 segments each (for equal priorities).
    fn two_in_ca(p1: f64, p2: f64) -> TcpCcc {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), p1, 10.0, 1e9).unwrap();
        g.register(FlowId(2), p2, 10.0, 1e9).unwrap();
        g.update(FlowId(1), ca(20.0, 10.0)).unwrap();
        g.update(FlowId(2), ca(20.0, 10.0)).unwrap();
        g
    }

    #[test]
    fn register_gives_a_priority_weighted_share_but_no_burst() {
        let mut g = TcpCcc::new(false);
        let r = g.register(FlowId(1), 1.0, 10.0, 100.0).unwrap();
        assert_eq!(
            r,
            Response {
                cwnd_pkts: 10.0,
                ssthresh_pkts: 100.0
            }
        );
        let r = g.register(FlowId(2), 1.0, 10.0, 100.0).unwrap();
        assert_eq!(r.cwnd_pkts, 10.0, "sum_cwnd = 20 split in two");
        assert_eq!(g.sum_cwnd(), 20.0);
        assert_eq!(g.coco(), Some(FlowId(1)));
        // Algorithm 5 would tell a joiner of a 100-segment aggregate 55 segments: one burst. It is
        // told its own initial window and slow-starts to its share (module docs item 4).
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 1.0, 100.0, 1e9).unwrap();
        g.update(FlowId(1), ca(100.0, 50.0)).unwrap();
        let r = g.register(FlowId(2), 1.0, 10.0, 1e9).unwrap();
        assert_eq!(g.sum_cwnd(), 110.0);
        assert_eq!(r.cwnd_pkts, 10.0);
        assert_eq!(
            r.ssthresh_pkts, 1e9,
            "its own ssthresh until the aggregate has one"
        );
        // With a burst limit of 8 segments and nothing in flight, up to 10 (its own window).
        let mut g = TcpCcc::new(false);
        g.set_max_burst_pkts(30.0).unwrap();
        g.register(FlowId(1), 1.0, 100.0, 1e9).unwrap();
        assert_eq!(
            g.register(FlowId(2), 1.0, 10.0, 1e9).unwrap().cwnd_pkts,
            30.0
        );
    }

    #[test]
    fn coco_increase_grows_the_aggregate_and_others_take_their_share() {
        let mut g = two_in_ca(1.0, 1.0);
        // The CoCo's +10 (from 10 to 20) grew the aggregate from 20 to 30.
        assert_eq!(g.sum_cwnd(), 30.0);
        assert_eq!((told(&g, 1), told(&g, 2)), (15.0, 15.0));
        let r = g.update(FlowId(2), ca(40.0, 10.0)).unwrap().unwrap();
        assert_eq!(
            r.cwnd_pkts, 15.0,
            "a non-CoCo's own increase is replaced by its share"
        );
        assert_eq!(g.sum_cwnd(), 30.0);
    }

    #[test]
    fn the_aggregate_is_reduced_when_the_loss_event_begins() {
        let mut g = two_in_ca(1.0, 1.0);
        // Connection 2 (not the CoCo) enters FR: the event begins, it becomes the CoCo and the
        // aggregate is halved at once (its own ssthresh / its window = 7.5 / 15).
        assert_eq!(g.update(FlowId(2), fr(15.0, 7.5)).unwrap(), None);
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.loss_event(), Some(FlowId(2)));
        assert_eq!((g.sum_cwnd(), g.sum_ssthresh()), (15.0, 15.0));
        // Connection 1's next ACK already gets the reduced share: its retransmissions and new
        // segments no longer overfill the queue while connection 2 recovers (issue 11, point 1).
        let r = g
            .update(FlowId(1), ca(15.0 + 1.0 / 15.0, 10.0))
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 7.5);
        assert_eq!(r.ssthresh_pkts, 7.5);
    }

    #[test]
    fn one_reduction_per_loss_event() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = g.sum_cwnd();
        g.update(FlowId(2), fr(15.0, 7.5)).unwrap();
        // Connection 1 also enters FR within the same event: no second CoCo, no second reduction.
        assert_eq!(g.update(FlowId(1), fr(15.0, 7.5)).unwrap(), None);
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.sum_cwnd(), before / 2.0);
        // Connection 2 leaves FR with cwnd = ssthresh: nothing more is reduced.
        let r = g.update(FlowId(2), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(g.sum_cwnd(), before / 2.0);
        assert_eq!(r.cwnd_pkts, 7.5);
        assert_eq!(g.loss_event(), None);
        // Connection 1 is still in FR (same event) and reports again: it must not become the CoCo.
        assert_eq!(g.update(FlowId(1), fr(15.0, 7.5)).unwrap(), None);
        assert_eq!(g.coco(), Some(FlowId(2)));
        let r = g.update(FlowId(1), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(g.sum_cwnd(), before / 2.0);
        assert_eq!(r.cwnd_pkts, 7.5);
        assert_eq!(
            r.ssthresh_pkts, 7.5,
            "sum_ssthresh taken at the event's start, shared"
        );
        assert_eq!(g.reductions(), 1);
    }

    #[test]
    fn loss_on_a_non_coco_is_not_ignored_while_another_connection_slow_starts() {
        let mut g = two_in_ca(1.0, 1.0);
        g.register(FlowId(3), 1.0, 10.0, 1e9).unwrap(); // joins in SS
        let before = g.sum_cwnd();
        g.update(FlowId(2), fr(15.0, 7.5)).unwrap();
        assert_eq!(g.coco(), Some(FlowId(2)), "module docs item 2");
        assert!((g.sum_cwnd() - before / 2.0).abs() < 1e-9);
        g.update(FlowId(2), ca(7.5, 7.5)).unwrap();
        assert!((g.sum_cwnd() - before / 2.0).abs() < 1e-9);
    }

    /// Issue 11, points 2-3: the CoCo's FR ends in a timeout. The reduction was made when the event
    /// began and is not repeated; the timed-out connection is told its loss window and its share as
    /// ssthresh (not the share as cwnd: that was the 108-segment burst), slow-starts back on its own
    /// ACKs without growing the aggregate, and keeps its timeout mark until it is back.
    #[test]
    fn a_timeout_in_fr_gets_the_loss_window_and_slow_starts_to_its_share() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(1), fr(15.0, 7.5)).unwrap();
        assert_eq!(g.sum_cwnd(), 15.0);
        let r = g
            .update(FlowId(1), TcpUpdate::timeout(1.0, 7.5))
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 1.0, "its loss window, not its share");
        assert_eq!(r.ssthresh_pkts, 7.5, "its share as ssthresh");
        assert_eq!(g.sum_cwnd(), 15.0, "no second reduction");
        assert_eq!(g.reductions(), 1);
        assert_eq!(
            g.coco(),
            Some(FlowId(2)),
            "ACKs still arrive on connection 2"
        );
        assert_eq!(
            g.loss_event(),
            Some(FlowId(1)),
            "the event lasts until it is back"
        );
        // Connection 2 takes its reduced share and grows the aggregate in CA.
        g.update(FlowId(2), ca(15.0, 10.0)).unwrap();
        assert_eq!(told(&g, 2), 7.5);
        g.update(FlowId(2), ca(8.5, 7.5)).unwrap();
        assert_eq!(g.sum_cwnd(), 16.0);
        // Connection 1 slow-starts on its own ACK clock: told its own window each time.
        let mut w = 1.0;
        while w < 8.0 {
            w *= 2.0;
            let r = g.update(FlowId(1), ss(w, 8.0)).unwrap().unwrap();
            assert!(r.cwnd_pkts <= w, "never more than its own window");
        }
        assert_eq!(told(&g, 1), 8.0, "back at its share of 16");
        assert_eq!(
            g.sum_cwnd(),
            16.0,
            "its catch-up did not grow the aggregate"
        );
        assert_eq!(g.loss_event(), None);
        assert_eq!(g.reductions(), 1);
    }

    #[test]
    fn a_timeout_from_ca_is_one_loss_event_and_repeated_timeouts_add_none() {
        let mut g = two_in_ca(1.0, 1.0);
        let r = g
            .update(FlowId(2), TcpUpdate::timeout(1.0, 7.5))
            .unwrap()
            .unwrap();
        assert_eq!(g.sum_cwnd(), 15.0, "halved once (7.5 / 15)");
        assert_eq!((r.cwnd_pkts, r.ssthresh_pkts), (1.0, 7.5));
        assert_eq!(
            g.coco(),
            Some(FlowId(1)),
            "the CoCo was not the one that timed out"
        );
        // Its retransmission times out again (backoff): the same recovery, nothing more.
        g.update(FlowId(2), TcpUpdate::timeout(1.0, 2.0)).unwrap();
        g.update(FlowId(2), TcpUpdate::timeout(1.0, 2.0)).unwrap();
        assert_eq!(g.sum_cwnd(), 15.0);
        assert_eq!(g.reductions(), 1);
        // A connection in FR of the event times out: still the same event.
        g.update(FlowId(1), fr(7.5, 3.75)).unwrap();
        g.update(FlowId(1), TcpUpdate::timeout(1.0, 3.75)).unwrap();
        assert_eq!(
            g.reductions(),
            2,
            "every connection has timed out: the restart"
        );
    }

    #[test]
    fn a_timeout_of_a_shadow_fr_starts_no_new_event() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(1), fr(15.0, 7.5)).unwrap();
        g.update(FlowId(2), fr(15.0, 7.5)).unwrap(); // same event
        g.update(FlowId(1), ca(7.5, 7.5)).unwrap(); // the event ends
        assert_eq!(g.loss_event(), None);
        // Connection 2's FR began inside the event; its timeout belongs to it too.
        g.update(FlowId(2), TcpUpdate::timeout(1.0, 7.5)).unwrap();
        assert_eq!(g.sum_cwnd(), 15.0);
        assert_eq!(g.reductions(), 1);
    }

    #[test]
    fn all_connections_timing_out_restarts_the_aggregate_from_its_windows() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(1), TcpUpdate::timeout(1.0, 7.5)).unwrap();
        assert_eq!(g.sum_cwnd(), 15.0);
        // Connection 1 has not recovered yet: its mark lasts (lines 12-13 no longer clear it at
        // once), so when connection 2 times out too, lines 33-37 fire.
        g.update(FlowId(1), ss(2.0, 7.5)).unwrap();
        let r = g
            .update(FlowId(2), TcpUpdate::timeout(1.0, 3.75))
            .unwrap()
            .unwrap();
        assert_eq!(g.sum_cwnd(), 3.0, "the windows they have: 2 + 1");
        assert_eq!(g.sum_ssthresh(), 15.0, "the event's sum_ssthresh");
        assert_eq!(r.cwnd_pkts, 1.0);
        assert_eq!(r.ssthresh_pkts, 7.5);
        assert_eq!(g.reductions(), 2);
        // Now every connection is in SS without a mark: the aggregate slow-starts.
        g.update(FlowId(2), ss(2.0, 7.5)).unwrap();
        assert_eq!(g.sum_cwnd(), 4.0);
    }

    #[test]
    fn start_up_slow_start_doubles_the_aggregate() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 1.0, 2.0, 1e9).unwrap();
        g.register(FlowId(2), 1.0, 2.0, 1e9).unwrap();
        // One RTT: each connection's two ACKs add two segments; the aggregate doubles, 4 to 8.
        g.update(FlowId(1), ss(4.0, 1e9)).unwrap();
        g.update(FlowId(2), ss(4.0, 1e9)).unwrap();
        assert_eq!(g.sum_cwnd(), 8.0);
        assert_eq!(told(&g, 2), 4.0);
        let r = g.update(FlowId(1), ss(4.0, 1e9)).unwrap().unwrap();
        assert_eq!(r.cwnd_pkts, 4.0);
    }

    #[test]
    fn priorities_split_three_to_one() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 0.75, 10.0, 1e9).unwrap();
        g.register(FlowId(2), 0.25, 10.0, 1e9).unwrap();
        g.update(FlowId(1), ca(15.0, 10.0)).unwrap();
        g.update(FlowId(2), ca(6.0, 10.0)).unwrap();
        assert_eq!((told(&g, 1), told(&g, 2)), (15.0, 5.0));
        let r1 = g.update(FlowId(1), ca(16.0, 10.0)).unwrap().unwrap();
        let r2 = g.update(FlowId(2), ca(6.0, 10.0)).unwrap().unwrap();
        assert_eq!(g.sum_cwnd(), 21.0);
        assert!((r1.cwnd_pkts / r2.cwnd_pkts - 3.0).abs() < 1e-12);
    }

    /// Issue 11: `register(1, 5e-324, 23, 1)`, `register(2, 1.0, 70, 2)`, `update(1, 99, 91, SS)`
    /// returned cwnd = inf (the old slow-start scale sum_P / P), and priority 1e-6 drove sum_cwnd to
    /// 7.6e7. Every accepted priority now gives finite shares no larger than the aggregate.
    #[test]
    fn priorities_over_many_decades_stay_finite() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 5e-324, 23.0, 1.0).unwrap();
        g.register(FlowId(2), 1.0, 70.0, 2.0).unwrap();
        let r = g.update(FlowId(1), ss(99.0, 91.0)).unwrap().unwrap();
        assert!(r.cwnd_pkts.is_finite() && r.cwnd_pkts <= 99.0, "{r:?}");
        assert!(g.sum_cwnd().is_finite() && g.sum_cwnd() <= 93.0 + 76.0);
        for p in [1e-6, 5e-324, 1e12] {
            let mut g = TcpCcc::new(false);
            g.register(FlowId(1), p, 10.0, 1e9).unwrap();
            g.register(FlowId(2), 1.0, 10.0, 1e9).unwrap();
            let mut w = [10.0, 10.0];
            for _ in 0..20 {
                for (i, w) in w.iter_mut().enumerate() {
                    *w = g
                        .update(FlowId(i as u64 + 1), ss(*w * 2.0, 1e9))
                        .unwrap()
                        .unwrap()
                        .cwnd_pkts;
                }
            }
            // 20 doublings of 20 segments, as one flow would slow-start.
            assert!(
                g.sum_cwnd() <= 20.0 * 2f64.powi(20) + 1e-6,
                "{p}: {}",
                g.sum_cwnd()
            );
            assert!(w.iter().all(|x| x.is_finite()), "{p}: {w:?}");
        }
    }

    #[test]
    fn leave_passes_the_coco_and_keeps_the_aggregate_for_the_others_to_slow_start_into() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(1), fr(15.0, 7.5)).unwrap();
        g.update(FlowId(1), ca(7.5, 7.5)).unwrap();
        g.update(FlowId(2), ca(16.0, 7.5)).unwrap();
        g.update(FlowId(1), ca(8.0, 7.5)).unwrap();
        g.update(FlowId(1), ca(8.5, 7.5)).unwrap();
        g.update(FlowId(2), ca(20.0, 7.5)).unwrap();
        let sum = g.sum_cwnd();
        assert_eq!((told(&g, 1), told(&g, 2)), (sum / 2.0, sum / 2.0));
        g.leave(FlowId(1)).unwrap();
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.sum_cwnd(), sum);
        assert_eq!(g.sum_priority(), 1.0);
        assert!(matches!(
            g.update(FlowId(1), ca(1.0, 1.0)),
            Err(Error::UnknownFlow(_))
        ));
        // Connection 2 is told its own window and an ssthresh of the whole aggregate.
        let r = g.update(FlowId(2), ca(sum / 2.0, 7.5)).unwrap().unwrap();
        assert_eq!((r.cwnd_pkts, r.ssthresh_pkts), (sum / 2.0, sum));
        // It slow-starts, an ACK at a time, to the whole aggregate.
        let mut w = r.cwnd_pkts;
        while w < sum {
            let r = g.update(FlowId(2), ss(w + 1.0, sum)).unwrap().unwrap();
            assert_eq!(r.cwnd_pkts, (w + 1.0).min(sum));
            w = r.cwnd_pkts;
        }
        assert_eq!(g.sum_cwnd(), sum, "catching up did not grow the aggregate");
        g.leave(FlowId(2)).unwrap();
        assert!(g.is_empty());
        assert_eq!(g.sum_cwnd(), 0.0);
    }

    #[test]
    fn handover_releases_one_segment_per_n_acks_and_suppresses_growth() {
        let mut g = TcpCcc::new(true);
        g.register(FlowId(1), 1.0, 100.0, 1e9).unwrap();
        g.update(FlowId(1), ca(100.0, 50.0)).unwrap();
        let r = g.register(FlowId(2), 1.0, 0.0, 1e9).unwrap();
        assert_eq!(
            r.cwnd_pkts, 1.0,
            "a joiner sends one segment until ACKs release more"
        );
        let mut out = Vec::new();
        let mut per_ack = Vec::new();
        for _ in 0..200 {
            out.clear();
            g.on_ack(FlowId(1), &mut out).unwrap();
            per_ack.push(out.len());
            if out.last().is_some_and(|r| r.done) {
                break;
            }
        }
        assert!(
            per_ack.iter().all(|&k| k <= 1),
            "never more than one segment per ACK: no burst"
        );
        // Algorithm 4 releases on ACKs 0, 2, 4, ...: the 49 segments after the first take 97 ACKs
        // with N = 2.
        assert_eq!(per_ack.len(), 97);
        assert_eq!(out.last().unwrap().cwnd_pkts, 50.0);
        assert_eq!(g.handovers_running(), 0);
    }

    #[test]
    fn handover_blocks_coco_growth_while_running() {
        let mut g = TcpCcc::new(true);
        g.register(FlowId(1), 1.0, 40.0, 1e9).unwrap();
        g.update(FlowId(1), ca(40.0, 20.0)).unwrap();
        g.register(FlowId(2), 1.0, 0.0, 1e9).unwrap();
        let sum = g.sum_cwnd();
        // The CoCo was last told 40; it reports 41 after an ACK.
        let r = g.update(FlowId(1), ca(41.0, 20.0)).unwrap().unwrap();
        assert_eq!(
            g.sum_cwnd(),
            sum,
            "increase replaced by the joiner's clocking"
        );
        assert_eq!(r.cwnd_pkts, 20.0);
        g.update(FlowId(1), ca(10.0, 20.0)).unwrap();
        assert_eq!(g.sum_cwnd(), sum / 2.0, "decreases still apply");
    }

    #[test]
    fn concurrent_joins_share_the_ack_clock_without_exceeding_shares() {
        let mut g = TcpCcc::new(true);
        g.register(FlowId(1), 1.0, 90.0, 1e9).unwrap();
        g.update(FlowId(1), ca(90.0, 45.0)).unwrap();
        g.register(FlowId(2), 1.0, 0.0, 1e9).unwrap(); // target 45
        let mut out = Vec::new();
        for _ in 0..20 {
            g.on_ack(FlowId(1), &mut out).unwrap();
        }
        assert_eq!(out.len(), 10);
        g.register(FlowId(3), 1.0, 0.0, 1e9).unwrap(); // shares now 30 each
        out.clear();
        let mut max_per_ack = 0;
        for _ in 0..200 {
            let before = out.len();
            g.on_ack(FlowId(1), &mut out).unwrap();
            max_per_ack = max_per_ack.max(out.len() - before);
        }
        assert!(max_per_ack <= 2, "at most one segment per joiner per ACK");
        assert_eq!(g.handovers_running(), 0);
        let last2 = out.iter().rev().find(|r| r.conn == FlowId(2)).unwrap();
        let last3 = out.iter().rev().find(|r| r.conn == FlowId(3)).unwrap();
        assert!(last2.done && last3.done);
        assert_eq!(last2.cwnd_pkts, 30.0);
        assert_eq!(last3.cwnd_pkts, 30.0);
        let released2 = 10
            + out
                .iter()
                .filter(|r| r.conn == FlowId(2) && !r.done)
                .count();
        assert!(
            released2 as f64 <= 30.0,
            "joiner 2 released {released2} > its new share"
        );
    }

    #[test]
    fn handover_ends_when_no_connection_can_clock_it() {
        let mut g = TcpCcc::new(true);
        g.register(FlowId(1), 1.0, 40.0, 1e9).unwrap();
        g.register(FlowId(2), 1.0, 0.0, 1e9).unwrap();
        assert_eq!(g.handovers_running(), 1);
        g.leave(FlowId(1)).unwrap();
        assert_eq!(g.handovers_running(), 0);
        // Connection 2 was told 0 segments and reports that; it is now the CoCo and slow-starts
        // from one segment to the whole aggregate.
        let r = g.update(FlowId(2), ss(0.0, 1e9)).unwrap().unwrap();
        assert_eq!(r.cwnd_pkts, 1.0);
        assert!(r.ssthresh_pkts >= 40.0);
    }

    /// Review of issue 11: a loss event begun by a timeout whose owner then stays silent (RTO
    /// backoff) used to absorb every later loss of the others; one completed recovery ends it.
    #[test]
    fn a_silent_timed_out_owner_does_not_absorb_later_losses() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(2), TcpUpdate::timeout(1.0, 7.5)).unwrap();
        assert_eq!((g.sum_cwnd(), g.reductions()), (15.0, 1));
        // Connection 1's FR right after the timeout is the same congestion: no new reduction.
        g.update(FlowId(1), fr(15.0, 7.5)).unwrap();
        assert_eq!((g.sum_cwnd(), g.reductions()), (15.0, 1));
        g.update(FlowId(1), ca(7.5, 7.5)).unwrap();
        assert_eq!(
            g.loss_event(),
            None,
            "its recovery ended the timeout's event"
        );
        // Connection 2 is still backing off (a repeated RTO starts nothing); the next loss of
        // connection 1 is a new event.
        g.update(FlowId(2), TcpUpdate::timeout(1.0, 2.0)).unwrap();
        assert_eq!(g.reductions(), 1, "a repeated RTO is not a new loss event");
        g.update(FlowId(1), fr(7.5, 3.75)).unwrap();
        assert_eq!((g.sum_cwnd(), g.reductions()), (7.5, 2));
    }

    /// Review of issue 11: an application-limited connection (4 of its 15 segments in flight)
    /// reports ssthresh 2 on a loss; the ratio 2/15 is its flight size, not its controller's
    /// factor, and cut the aggregate from 30 to 4. A CUBIC-like 0.7 is kept.
    #[test]
    fn beta_is_at_least_a_half() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(2), fr(15.0, 2.0).with_in_flight(4.0))
            .unwrap();
        assert_eq!(g.sum_cwnd(), 15.0);
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(2), fr(15.0, 10.5)).unwrap();
        assert!((g.sum_cwnd() - 21.0).abs() < 1e-9, "{}", g.sum_cwnd());
    }

    /// Second review of issue 11: a recovery that began before a timeout's event is part of the
    /// congestion before it; its end does not close the event (which would reduce the same
    /// episode twice).
    #[test]
    fn a_recovery_older_than_a_timeouts_event_does_not_close_it() {
        let mut g = two_in_ca(1.0, 1.0);
        g.register(FlowId(3), 1.0, 10.0, 1e9).unwrap();
        g.update(FlowId(3), ca(10.0, 10.0)).unwrap();
        g.update(FlowId(1), fr(10.0, 5.0)).unwrap();
        g.update(FlowId(2), fr(10.0, 5.0)).unwrap();
        assert_eq!(g.reductions(), 1);
        g.update(FlowId(1), ca(5.0, 5.0)).unwrap(); // ends the event; 2 is still recovering
        g.update(FlowId(3), TcpUpdate::timeout(1.0, 2.0)).unwrap();
        assert_eq!((g.reductions(), g.loss_event()), (2, Some(FlowId(3))));
        g.update(FlowId(2), ca(5.0, 5.0)).unwrap(); // the older recovery ends
        assert_eq!(
            g.loss_event(),
            Some(FlowId(3)),
            "not closed by an older recovery"
        );
        let sum = g.sum_cwnd();
        g.update(FlowId(1), fr(5.0, 2.5)).unwrap();
        assert_eq!(
            (g.reductions(), g.sum_cwnd()),
            (2, sum),
            "part of 3's event"
        );
        g.update(FlowId(1), ca(2.5, 2.5)).unwrap(); // a recovery begun during it ends it
        assert_eq!(g.loss_event(), None);
    }

    /// Review of issue 11: after every connection timed out (any one-connection group) the
    /// restart cleared the marks, and each repeated RTO reduced again. RFC 5681 holds ssthresh for
    /// a segment the timer already retransmitted.
    #[test]
    fn repeated_rtos_hold_the_aggregate_ssthresh() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 1.0, 10.0, 1e9).unwrap();
        g.update(FlowId(1), ca(40.0, 20.0)).unwrap();
        let first = g
            .update(FlowId(1), TcpUpdate::timeout(1.0, 20.0))
            .unwrap()
            .unwrap();
        let sum_ssthresh = g.sum_ssthresh();
        assert_eq!(sum_ssthresh, 20.0);
        for _ in 0..3 {
            let r = g
                .update(FlowId(1), TcpUpdate::timeout(1.0, 2.0))
                .unwrap()
                .unwrap();
            assert_eq!(r, first);
            assert_eq!(g.sum_ssthresh(), sum_ssthresh);
        }
        // Heard from again, a later timeout is a new loss.
        g.update(FlowId(1), ss(2.0, 20.0)).unwrap();
        g.update(FlowId(1), TcpUpdate::timeout(1.0, 1.0)).unwrap();
        assert!(g.sum_ssthresh() < sum_ssthresh);
    }

    /// Review of issue 11: a joiner told 0 segments and made CoCo when the only other connection
    /// timed out ended its handover with no release and stayed at 0 for good. A joiner starts
    /// with one segment, so its own ACKs always bring it back.
    #[test]
    fn a_joiner_is_never_left_without_a_segment() {
        let mut g = TcpCcc::new(true);
        g.register(FlowId(1), 1.0, 40.0, 1e9).unwrap();
        g.update(FlowId(1), ca(40.0, 20.0)).unwrap();
        let r = g.register(FlowId(2), 1.0, 10.0, 1e9).unwrap();
        assert_eq!(r.cwnd_pkts, 1.0);
        g.update(FlowId(1), TcpUpdate::timeout(1.0, 20.0)).unwrap();
        let v = g.conn(FlowId(2)).unwrap();
        assert_eq!((v.coordinating, v.handover, v.cwnd_pkts), (true, None, 1.0));
        // Its one segment is acknowledged: it reports and slow-starts towards its share.
        let r = g
            .update(FlowId(2), ss(2.0, 1e9).with_in_flight(1.0))
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 2.0);
        assert!(r.ssthresh_pkts >= g.sum_cwnd() / 2.0, "{r:?}");
    }

    #[test]
    fn a_coco_leaving_mid_event_does_not_cause_a_second_reduction() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = g.sum_cwnd();
        g.update(FlowId(1), fr(15.0, 7.5)).unwrap(); // CoCo enters FR: the one reduction
        g.update(FlowId(2), fr(15.0, 7.5)).unwrap(); // same event
        assert_eq!(g.sum_cwnd(), before / 2.0);
        g.leave(FlowId(1)).unwrap(); // during its FR: connection 2, still in FR, takes the event
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.loss_event(), Some(FlowId(2)));
        let r = g.update(FlowId(2), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(
            g.sum_cwnd(),
            before / 2.0,
            "no second reduction for the same loss event"
        );
        assert_eq!(
            r.cwnd_pkts, 7.5,
            "its own window; it slow-starts to the whole aggregate"
        );
        assert_eq!(r.ssthresh_pkts, before / 2.0);
        assert_eq!(g.reductions(), 1);
    }

    #[test]
    fn the_coco_role_skips_connections_in_fr() {
        let mut g = two_in_ca(1.0, 1.0);
        g.register(FlowId(3), 1.0, 10.0, 1e9).unwrap();
        g.update(FlowId(3), ca(10.0, 10.0)).unwrap();
        g.update(FlowId(1), fr(10.0, 5.0)).unwrap();
        g.update(FlowId(2), fr(10.0, 5.0)).unwrap();
        g.leave(FlowId(1)).unwrap();
        assert_eq!(g.coco(), Some(FlowId(3)), "connection 2 is in FR; 3 is not");
        assert_eq!(
            g.loss_event(),
            Some(FlowId(2)),
            "the event passes to one still in FR"
        );
        g.register(FlowId(4), 1.0, 10.0, 1e9).unwrap();
        g.update(FlowId(4), fr(10.0, 5.0)).unwrap();
        assert_eq!(
            g.reductions(),
            1,
            "a joiner's FR during the event belongs to it"
        );
    }

    #[test]
    fn tiny_priorities_still_get_a_segment_and_ssthresh_two() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 0.98, 20.0, 1e9).unwrap();
        let r = g.register(FlowId(2), 0.02, 10.0, 1e9).unwrap();
        assert_eq!(
            r.cwnd_pkts, 1.0,
            "0.6 segments rounds up to one, or the flow would stall"
        );
        g.update(FlowId(1), ca(29.4, 10.0)).unwrap();
        g.update(FlowId(1), fr(29.4, 14.7)).unwrap();
        g.update(FlowId(1), ca(14.7, 14.7)).unwrap();
        let r = g.update(FlowId(2), ca(1.0, 1.0)).unwrap().unwrap();
        assert_eq!(
            r.ssthresh_pkts, 2.0,
            "ssthresh share below 2 segments is raised to 2"
        );
        assert_eq!(r.cwnd_pkts, 1.0);
        // A floored CoCo's loss still halves the aggregate: its own ssthresh (2, the floor) over
        // its window (1) says nothing, so RFC 5681's 1/2 applies.
        let before = g.sum_cwnd();
        g.update(FlowId(2), fr(1.0, 2.0)).unwrap();
        assert_eq!(g.sum_cwnd(), before / 2.0);
    }

    #[test]
    fn bad_input_leaves_state_unchanged() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = format!("{g:?}");
        assert!(g.register(FlowId(1), 1.0, 1.0, 1.0).is_err());
        assert!(g.register(FlowId(3), 0.0, 1.0, 1.0).is_err());
        assert!(g.register(FlowId(3), 1.0, f64::NAN, 1.0).is_err());
        assert!(g.update(FlowId(1), ca(-1.0, 1.0)).is_err());
        assert!(g.update(FlowId(1), ca(1.0, f64::INFINITY)).is_err());
        assert!(g
            .update(FlowId(1), ca(1.0, 1.0).with_in_flight(f64::NAN))
            .is_err());
        assert!(g
            .update(FlowId(1), ca(1.0, 1.0).with_in_flight(-1.0))
            .is_err());
        assert!(g
            .update(
                FlowId(1),
                TcpUpdate {
                    timeout: true,
                    ..ca(1.0, 1.0)
                }
            )
            .is_err());
        assert!(g.update(FlowId(9), ca(1.0, 1.0)).is_err());
        assert!(g.set_priority(FlowId(1), -2.0).is_err());
        assert!(g.set_max_burst_pkts(-2.0).is_err());
        assert!(g.set_max_burst_pkts(f64::NAN).is_err());
        assert!(g.leave(FlowId(9)).is_err());
        assert!(g.on_ack(FlowId(9), &mut Vec::new()).is_err());
        assert_eq!(before, format!("{g:?}"));
    }
}
