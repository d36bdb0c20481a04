//! ctrlTCP / TCP-CCC: seed 003 Algorithms 5 (register), 6 (leave) and 7 (update), sec. 9.2 and the
//! appendix text of ch. 9; the same algorithm as the TCP-CCC draft (seed 003 ch. 11, sec. 2). With
//! `handover`, a joining connection's share is released by the ACKs of the others (Algorithm 4,
//! ch. 7, and sec. 9.2.4).
//!
//! One connection, the coordinating connection (CoCo), dictates increase and decrease of the
//! aggregate window `sum_cwnd`; the others get their priority-weighted share. There is one
//! aggregate reduction per loss event: only one connection can be the CoCo in Fast Recovery, and
//! the aggregate slow-starts only when every connection is in slow start.
//!
//! Where the pseudo-code is silent or cannot be meant literally (each case has a test):
//! 1. **Line 5** makes a non-CoCo in FR the CoCo only if every other connection is in CA. Read
//!    literally, a loss is ignored whenever any connection is in SS (for instance one that has just
//!    joined), so the aggregate would not back off at all. The rule's purpose, stated in the
//!    appendix, is to prevent double reactions ("one reduction only for the full duration of one
//!    flow's FR phase"); we use exactly that: a connection entering FR becomes the CoCo if no
//!    other connection is in FR. One whose FR began inside another's FR phase never becomes the
//!    CoCo during that phase, even after the other has left FR.
//! 2. **Lines 16-41 at start-up**: a CoCo in SS without a timeout never changes `sum_cwnd`, so the
//!    first connection could never grow beyond its initial window. When every connection is in SS
//!    the aggregate is legitimately slow-starting; the CoCo's increase then grows `sum_cwnd` by
//!    the increase times `sum_P / P(CoCo)`, so the aggregate doubles per RTT as one flow would
//!    (CA keeps the algorithm's `+ (cwnd - ccc_cwnd)`, which is +1 segment per RTT for the
//!    aggregate). If the CoCo has timed out while the others are in SS without a timeout, the
//!    first of those becomes the CoCo (ACKs still arrive on it).
//! 3. **Lines 35-37** set `sum_ssthresh = sum_cwnd / 2` after `sum_cwnd` has already been cut to
//!    the loss window; a single TCP sets ssthresh from the window before the timeout, so we use the
//!    aggregate before the cut, and give the CoCo its share of it.
//! 4. **Line 9** gives a non-CoCo `P * sum_ssthresh / sum_P` even while `sum_ssthresh` is 0 (no loss
//!    yet), which would put it into CA with ssthresh 0; as lines 23-25 do for the CoCo, it keeps its
//!    own ssthresh until the aggregate has one.
//! 5. **Leave** (Algorithm 6) keeps `sum_cwnd`: the aggregate's window is the group's, and the
//!    others take over the leaving connection's share at their next update (Fig. 9.6: "flow 1 gets
//!    all of the cwnd"). The CoCo passes to the next connection in registration order (item 7).
//! 6. **Handover** (Algorithm 4; the dissertation leaves concurrent joins open, sec. 7.4). A joiner's
//!    target is its share at join time; ACKs of connections that are not themselves in handover
//!    release one segment to each joiner every N ACKs (N = connections in the group now), each
//!    joiner with its own ACK counter. When another connection joins, every running handover's
//!    target shrinks to its new, smaller share (`min(target, share now)`, also applied after a
//!    decrease of the aggregate), so releases never exceed what the joiners are entitled to. While
//!    any handover runs, the CoCo's increases do not grow the aggregate (the ACKs that clock a
//!    joiner replace the others' cwnd increase); decreases apply as usual. A joiner that becomes the
//!    CoCo, or that has no other connection left to clock it, ends its handover and uses its share.
//! 7. **A CoCo that leaves** passes the role to the next connection not in FR, if any. A connection
//!    whose FR began inside another's FR (same loss event) does not reduce the aggregate when it
//!    leaves FR, even if it has become the CoCo meanwhile, so one loss event still gives one
//!    reduction.
//! 8. **Floors:** a connection is never told less than one segment of cwnd
//!    ([`super::MIN_CWND_PKTS`]: a smaller share would stall it for good) nor less than two of
//!    ssthresh (RFC 5681).

use super::{
    check_register, share, ssthresh_share, window_share, ConnView, Release, Response, TcpCoupler,
    TcpState, TcpUpdate,
};
use crate::error::Error;
use crate::group::FlowId;
use crate::units::{check_priority, RunningSum};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
struct Handover {
    target: f64,
    released: u64,
    acks: u64,
}

#[derive(Clone, Debug)]
struct Conn {
    id: FlowId,
    /// Registration sequence number: "the next connection" and "the first connection where ..."
    /// follow registration order.
    seq: u64,
    p: f64,
    /// ccc_cwnd: always what the connection was last told.
    cwnd: f64,
    ssthresh: f64,
    state: TcpState,
    ssbit: bool,
    /// Entered FR during another connection's FR: part of that loss event, already reacted to.
    fr_shadow: bool,
    handover: Option<Handover>,
}

/// One coupled group of TCP connections under ctrlTCP.
///
/// Connections live in a slab (O(1) access on the update path); the ordered sets are touched only
/// when a connection changes state, joins, leaves or is in handover.
#[derive(Clone, Debug)]
pub struct TcpCcc {
    handover_enabled: bool,
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    index: FxHashMap<FlowId, usize>,
    /// Registration order: seq -> slot.
    order: BTreeMap<u64, usize>,
    next_seq: u64,
    coco: Option<usize>,
    sum_p: RunningSum,
    sum_cwnd: f64,
    sum_ssthresh: f64,
    /// Sequence numbers of connections whose state is not SS (candidates for CoCo, line 39).
    not_ss: BTreeSet<u64>,
    n_fr: usize,
    n_ssbits: usize,
    /// Sequence numbers of connections in ack-clocked handover.
    handovers: BTreeSet<u64>,
    ops_since_resum: usize,
}

impl TcpCcc {
    pub fn new(handover: bool) -> Self {
        TcpCcc {
            handover_enabled: handover,
            slots: Vec::new(),
            free: Vec::new(),
            index: FxHashMap::default(),
            order: BTreeMap::new(),
            next_seq: 0,
            coco: None,
            sum_p: RunningSum::default(),
            sum_cwnd: 0.0,
            sum_ssthresh: 0.0,
            not_ss: BTreeSet::new(),
            n_fr: 0,
            n_ssbits: 0,
            handovers: BTreeSet::new(),
            ops_since_resum: 0,
        }
    }

    pub fn handover_enabled(&self) -> bool {
        self.handover_enabled
    }
    pub fn sum_ssthresh(&self) -> f64 {
        self.sum_ssthresh
    }
    pub fn sum_priority(&self) -> f64 {
        self.sum_p.value()
    }
    /// The coordinating connection.
    pub fn coco(&self) -> Option<FlowId> {
        self.coco.map(|s| self.c(s).id)
    }
    /// Every connection is in slow start: the only time the aggregate may slow-start.
    pub fn all_in_slow_start(&self) -> bool {
        self.not_ss.is_empty()
    }
    pub fn handovers_running(&self) -> usize {
        self.handovers.len()
    }

    fn c(&self, slot: usize) -> &Conn {
        self.slots[slot].as_ref().expect("live slot")
    }

    fn c_mut(&mut self, slot: usize) -> &mut Conn {
        self.slots[slot].as_mut().expect("live slot")
    }

    fn slot(&self, conn: FlowId) -> Result<usize, Error> {
        self.index
            .get(&conn)
            .copied()
            .ok_or(Error::UnknownFlow(conn))
    }

    fn share_of(&self, slot: usize) -> f64 {
        share(self.c(slot).p, self.sum_cwnd, self.sum_p.value())
    }

    /// Lines 23-25 (and 13-16 of Algorithm 5): the aggregate's ssthresh share once it has one,
    /// else the connection's own.
    fn ssthresh_for(&self, p: f64, own: f64) -> f64 {
        if self.sum_ssthresh > 0.0 {
            ssthresh_share(p, self.sum_ssthresh, self.sum_p.value())
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
        if old == TcpState::FastRecovery {
            self.n_fr -= 1;
        }
        if state == TcpState::FastRecovery {
            self.n_fr += 1;
        }
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

    /// Algorithm 7 lines 17-26: the CoCo's report changes the aggregate. `scale` multiplies an
    /// increase (1 in CA; sum_P / P during an all-SS start-up, see module docs item 2).
    fn coco_adjust(&mut self, slot: usize, u: &TcpUpdate, scale: f64, may_decrease: bool) {
        let stored = self.c(slot).cwnd;
        if u.cwnd_pkts < stored && !may_decrease {
            // Leaving an FR that belonged to a loss event the aggregate already reacted to.
        } else if u.cwnd_pkts >= stored {
            // While a handover runs, the ACKs that would grow the window clock the joiner instead.
            if self.handovers.is_empty() {
                self.sum_cwnd += (u.cwnd_pkts - stored) * scale;
            }
        } else {
            self.sum_cwnd *= u.cwnd_pkts / stored;
        }
        let p = self.c(slot).p;
        let cwnd = window_share(p, self.sum_cwnd, self.sum_p.value());
        let ssthresh = self.ssthresh_for(p, u.ssthresh_pkts);
        let c = self.c_mut(slot);
        c.cwnd = cwnd;
        c.ssthresh = ssthresh;
    }

    /// Lines 33-37: every connection has timed out, so the aggregate restarts from the loss window.
    fn aggregate_timeout(&mut self, slot: usize, u: &TcpUpdate) {
        let before = self.sum_cwnd;
        let stored = self.c(slot).cwnd;
        if stored > 0.0 {
            self.sum_cwnd *= u.cwnd_pkts / stored;
        }
        self.sum_ssthresh = before / 2.0;
        for c in self.slots.iter_mut().flatten() {
            c.ssbit = false;
        }
        self.n_ssbits = 0;
        let p = self.c(slot).p;
        let cwnd = window_share(p, self.sum_cwnd, self.sum_p.value());
        let ssthresh = ssthresh_share(p, self.sum_ssthresh, self.sum_p.value());
        let c = self.c_mut(slot);
        c.cwnd = cwnd;
        c.ssthresh = ssthresh;
    }

    fn response(&self, slot: usize) -> Response {
        let c = self.c(slot);
        Response {
            cwnd_pkts: c.cwnd,
            ssthresh_pkts: c.ssthresh,
        }
    }

    fn view(&self, slot: usize) -> ConnView {
        let c = self.c(slot);
        ConnView {
            conn: c.id,
            priority: c.p,
            cwnd_pkts: c.cwnd,
            ssthresh_pkts: c.ssthresh,
            state: c.state,
            coordinating: self.coco == Some(slot),
            handover: c
                .handover
                .as_ref()
                .map(|h| (h.released, h.target.min(self.share_of(slot)))),
        }
    }

    fn after_op(&mut self) {
        self.ops_since_resum += 1;
        if self.ops_since_resum > self.index.len() + 64 {
            self.ops_since_resum = 0;
            self.sum_p = RunningSum::of(self.slots.iter().flatten().map(|c| c.p));
        }
    }
}

impl TcpCoupler for TcpCcc {
    fn name(&self) -> &'static str {
        if self.handover_enabled {
            "ccc_handover"
        } else {
            "ccc"
        }
    }

    /// Algorithm 5.
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
        let first = self.index.is_empty();
        if first {
            // Lines 3-8.
            self.sum_p = RunningSum::default();
            self.sum_cwnd = 0.0;
            self.sum_ssthresh = 0.0;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sum_p.add(priority);
        self.sum_cwnd += cwnd_pkts;
        let cwnd = share(priority, self.sum_cwnd, self.sum_p.value());
        let ssthresh = self.ssthresh_for(priority, ssthresh_pkts);
        let handover = (self.handover_enabled && !first).then_some(Handover {
            target: cwnd,
            released: 0,
            acks: 0,
        });
        // A joiner in handover has been told 0 segments so far.
        let told = if handover.is_some() {
            0.0
        } else {
            cwnd.max(super::MIN_CWND_PKTS)
        };
        if handover.is_some() {
            self.handovers.insert(seq);
        }
        let c = Conn {
            id: conn,
            seq,
            p: priority,
            cwnd: told,
            ssthresh,
            state: TcpState::SlowStart,
            ssbit: false,
            fr_shadow: false,
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

    /// Algorithm 7.
    fn update(&mut self, conn: FlowId, u: TcpUpdate) -> Result<Option<Response>, Error> {
        let slot = self.slot(conn)?;
        u.check()?;
        let state = u.state;
        // Line 3.
        let old = self.set_state(slot, state);
        // Module docs item 7: leaving an FR that was part of another connection's loss event.
        let shadow_exit = old == TcpState::FastRecovery
            && state != TcpState::FastRecovery
            && self.c(slot).fr_shadow;
        if state != TcpState::FastRecovery {
            self.c_mut(slot).fr_shadow = false;
        }
        // Lines 4-11.
        if self.coco != Some(slot) {
            if state == TcpState::FastRecovery && old != TcpState::FastRecovery && self.n_fr == 1 {
                // Module docs item 1: no other connection is handling a loss event. Only on entering
                // FR: a connection whose FR overlapped the CoCo's belongs to the same loss event.
                self.make_coco(slot);
            } else if state == TcpState::FastRecovery && old != TcpState::FastRecovery {
                self.c_mut(slot).fr_shadow = true;
            } else if state != TcpState::FastRecovery {
                let p = self.c(slot).p;
                let cwnd = window_share(p, self.sum_cwnd, self.sum_p.value());
                let ssthresh = self.ssthresh_for(p, u.ssthresh_pkts);
                let c = self.c_mut(slot);
                if c.handover.is_none() {
                    c.cwnd = cwnd;
                }
                c.ssthresh = ssthresh;
            }
        }
        // Lines 12-14.
        if self.c(slot).ssbit && state != TcpState::SlowStart {
            self.set_ssbit(slot, false);
        }
        // Lines 15-42.
        if self.coco == Some(slot) {
            match state {
                TcpState::CongestionAvoidance => self.coco_adjust(slot, &u, 1.0, !shadow_exit),
                TcpState::FastRecovery => self.sum_ssthresh = self.sum_cwnd / 2.0,
                TcpState::SlowStart => {
                    if u.timeout {
                        self.set_ssbit(slot, true);
                    }
                    if self.n_ssbits == self.index.len() {
                        self.aggregate_timeout(slot, &u);
                    } else if let Some(seq) = self.not_ss.first() {
                        // Line 39: ACKs still arrive on a connection that is not in SS.
                        self.make_coco(self.order[seq]);
                    } else if !self.c(slot).ssbit {
                        // Module docs item 2: all in SS, the aggregate slow-starts.
                        let scale = self.sum_p.value() / self.c(slot).p;
                        self.coco_adjust(slot, &u, scale, true);
                    } else if let Some(&other) = self.order.values().find(|s| !self.c(**s).ssbit) {
                        self.make_coco(other);
                    }
                }
            }
        }
        // Lines 43-45.
        let resp = (state != TcpState::FastRecovery).then(|| self.response(slot));
        self.after_op();
        Ok(resp)
    }

    /// Algorithm 6.
    fn leave(&mut self, conn: FlowId) -> Result<(), Error> {
        let slot = self.slot(conn)?;
        if self.index.len() == 1 {
            *self = TcpCcc::new(self.handover_enabled);
            return Ok(());
        }
        self.set_state(slot, TcpState::SlowStart);
        self.set_ssbit(slot, false);
        self.end_handover(slot);
        let c = self.slots[slot].take().expect("live slot");
        self.free.push(slot);
        self.index.remove(&conn);
        self.order.remove(&c.seq);
        self.sum_p.sub(c.p);
        if self.coco == Some(slot) {
            // The next connection in registration order, preferring one not in FR (a connection in
            // FR belongs to a loss event already being handled; module docs item 7).
            let after: Vec<usize> = self
                .order
                .range(c.seq + 1..)
                .chain(self.order.range(..c.seq))
                .map(|(_, s)| *s)
                .collect();
            let next = after
                .iter()
                .copied()
                .find(|s| self.c(*s).state != TcpState::FastRecovery)
                .or(after.first().copied());
            self.make_coco(next.expect("another connection remains"));
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

    fn set_priority(&mut self, conn: FlowId, priority: f64) -> Result<(), Error> {
        let slot = self.slot(conn)?;
        check_priority(priority)?;
        let c = self.c_mut(slot);
        let old = std::mem::replace(&mut c.p, priority);
        self.sum_p.sub(old);
        self.sum_p.add(priority);
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
        let (sum_cwnd, sum_p) = (self.sum_cwnd, self.sum_p.value());
        let (slots, order) = (&mut self.slots, &self.order);
        self.handovers.retain(|seq| {
            let c = slots[order[seq]].as_mut().expect("live slot");
            let full = share(c.p, sum_cwnd, sum_p);
            let h = c.handover.as_mut().expect("in handover");
            let target = h.target.min(full);
            let mut release = false;
            if (h.released as f64) < target {
                // Lines 5-9.
                if h.acks % n == 0 {
                    h.released += 1;
                    release = true;
                }
                h.acks += 1;
            }
            let done = h.released as f64 >= target;
            if release || done {
                c.cwnd = if done {
                    full.max(super::MIN_CWND_PKTS)
                } else {
                    h.released as f64
                };
                released.push(Release {
                    conn: c.id,
                    cwnd_pkts: c.cwnd,
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
        self.sum_cwnd
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

    fn two_in_ca(p1: f64, p2: f64) -> TcpCcc {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), p1, 10.0, 1e9).unwrap();
        g.register(FlowId(2), p2, 10.0, 1e9).unwrap();
        g.update(FlowId(1), ca(20.0, 10.0)).unwrap();
        g.update(FlowId(2), ca(10.0, 10.0)).unwrap();
        g
    }

    #[test]
    fn register_gives_a_priority_weighted_share() {
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
    }

    #[test]
    fn coco_increase_grows_the_aggregate_and_others_take_their_share() {
        let mut g = two_in_ca(1.0, 1.0);
        // sum_cwnd was 20, CoCo's stored cwnd 10; CoCo reports 20 -> +10.
        assert_eq!(g.sum_cwnd(), 30.0);
        let r = g.update(FlowId(2), ca(40.0, 10.0)).unwrap().unwrap();
        assert_eq!(
            r.cwnd_pkts, 15.0,
            "a non-CoCo's own increase is replaced by its share"
        );
        assert_eq!(g.sum_cwnd(), 30.0);
    }

    #[test]
    fn one_reduction_per_loss_event() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = g.sum_cwnd();
        // Connection 2 (not the CoCo) enters FR while all others are in CA: it becomes the CoCo.
        assert_eq!(
            g.update(FlowId(2), TcpUpdate::new(15.0, 7.5, FastRecovery))
                .unwrap(),
            None
        );
        assert_eq!(g.coco(), Some(FlowId(2)));
        // Connection 1 also enters FR within the same event: no second CoCo, no reduction yet.
        assert_eq!(
            g.update(FlowId(1), TcpUpdate::new(15.0, 7.5, FastRecovery))
                .unwrap(),
            None
        );
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.sum_cwnd(), before);
        // Connection 2 leaves FR with cwnd = ssthresh = half its window: the aggregate halves.
        let r = g.update(FlowId(2), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(g.sum_cwnd(), before / 2.0);
        assert_eq!(r.cwnd_pkts, 7.5);
        // Connection 1 is still in FR (same event) and reports again: it must not become the CoCo.
        assert_eq!(
            g.update(FlowId(1), TcpUpdate::new(15.0, 7.5, FastRecovery))
                .unwrap(),
            None
        );
        assert_eq!(g.coco(), Some(FlowId(2)));
        // Connection 1 leaves FR: it gets its share, no second reduction.
        let r = g.update(FlowId(1), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(g.sum_cwnd(), before / 2.0);
        assert_eq!(r.cwnd_pkts, 7.5);
        assert_eq!(
            r.ssthresh_pkts, 7.5,
            "sum_ssthresh = sum_cwnd / 2 taken in FR, shared"
        );
    }

    #[test]
    fn loss_on_a_non_coco_is_not_ignored_while_another_connection_slow_starts() {
        let mut g = two_in_ca(1.0, 1.0);
        g.register(FlowId(3), 1.0, 10.0, 1e9).unwrap(); // joins in SS
        let before = g.sum_cwnd();
        g.update(FlowId(2), TcpUpdate::new(13.0, 6.5, FastRecovery))
            .unwrap();
        assert_eq!(g.coco(), Some(FlowId(2)), "module docs item 1");
        // Connection 2 was last told 15 and halves that on leaving FR.
        g.update(FlowId(2), ca(7.5, 6.5)).unwrap();
        assert!((g.sum_cwnd() - before / 2.0).abs() < 1e-9);
    }

    #[test]
    fn timeout_on_one_connection_does_not_slow_start_the_aggregate() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = g.sum_cwnd();
        let r = g
            .update(FlowId(1), TcpUpdate::timeout(1.0, 7.5))
            .unwrap()
            .unwrap();
        assert_eq!(
            g.coco(),
            Some(FlowId(2)),
            "the CoCo passes to a connection still in CA"
        );
        assert_eq!(g.sum_cwnd(), before);
        assert_eq!(
            r.cwnd_pkts, 15.0,
            "the timed-out connection keeps its share"
        );
    }

    #[test]
    fn all_connections_timing_out_slow_starts_the_aggregate_once() {
        let mut g = two_in_ca(1.0, 1.0);
        g.update(FlowId(1), TcpUpdate::timeout(1.0, 7.5)).unwrap();
        let before = g.sum_cwnd();
        let r = g
            .update(FlowId(2), TcpUpdate::timeout(1.0, 7.5))
            .unwrap()
            .unwrap();
        assert_eq!(
            g.sum_cwnd(),
            before / 15.0,
            "scaled by cwnd / ccc_cwnd = 1 / 15"
        );
        assert_eq!(g.sum_ssthresh(), before / 2.0, "module docs item 3");
        assert_eq!(r.cwnd_pkts, 1.0);
        assert_eq!(r.ssthresh_pkts, 7.5);
    }

    #[test]
    fn start_up_slow_start_doubles_the_aggregate() {
        let mut g = TcpCcc::new(false);
        g.register(FlowId(1), 1.0, 2.0, 1e9).unwrap();
        g.register(FlowId(2), 1.0, 2.0, 1e9).unwrap();
        // CoCo's share is 2; it doubles to 4 in one RTT: the aggregate doubles from 4 to 8.
        let r = g
            .update(FlowId(1), TcpUpdate::new(4.0, 1e9, SlowStart))
            .unwrap()
            .unwrap();
        assert_eq!(g.sum_cwnd(), 8.0);
        assert_eq!(r.cwnd_pkts, 4.0);
    }

    #[test]
    fn priorities_split_three_to_one() {
        let mut g = two_in_ca(0.75, 0.25);
        let r1 = g
            .update(
                FlowId(1),
                ca(g.conn(FlowId(1)).unwrap().cwnd_pkts + 1.0, 10.0),
            )
            .unwrap()
            .unwrap();
        let r2 = g.update(FlowId(2), ca(5.0, 10.0)).unwrap().unwrap();
        assert!((r1.cwnd_pkts / r2.cwnd_pkts - 3.0).abs() < 1e-12);
    }

    #[test]
    fn leave_passes_the_coco_and_keeps_the_aggregate() {
        let mut g = two_in_ca(1.0, 1.0);
        let sum = g.sum_cwnd();
        g.leave(FlowId(1)).unwrap();
        assert_eq!(g.coco(), Some(FlowId(2)));
        assert_eq!(g.sum_cwnd(), sum);
        assert_eq!(g.sum_priority(), 1.0);
        assert!(matches!(
            g.update(FlowId(1), ca(1.0, 1.0)),
            Err(Error::UnknownFlow(_))
        ));
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
            r.cwnd_pkts, 0.0,
            "a joiner sends nothing until ACKs release segments"
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
        // Algorithm 4 releases on ACKs 0, 2, 4, ...: 50 segments take 99 ACKs with N = 2.
        assert_eq!(per_ack.len(), 99);
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
        // Connection 2 was told 0 segments and reports that; it is now the CoCo and gets the share.
        let r = g
            .update(FlowId(2), TcpUpdate::new(0.0, 1e9, SlowStart))
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 40.0);
    }

    #[test]
    fn a_coco_leaving_mid_event_does_not_cause_a_second_reduction() {
        let mut g = two_in_ca(1.0, 1.0);
        let before = g.sum_cwnd();
        g.update(FlowId(1), TcpUpdate::new(15.0, 7.5, FastRecovery))
            .unwrap(); // CoCo enters FR
        g.update(FlowId(2), TcpUpdate::new(15.0, 7.5, FastRecovery))
            .unwrap(); // same event
        g.update(FlowId(1), ca(7.5, 7.5)).unwrap(); // the one reduction
        assert_eq!(g.sum_cwnd(), before / 2.0);
        g.leave(FlowId(1)).unwrap(); // connection 2, still in FR, becomes the CoCo
        assert_eq!(g.coco(), Some(FlowId(2)));
        let r = g.update(FlowId(2), ca(7.5, 7.5)).unwrap().unwrap();
        assert_eq!(
            g.sum_cwnd(),
            before / 2.0,
            "no second reduction for the same loss event"
        );
        assert_eq!(
            r.cwnd_pkts,
            before / 2.0,
            "the remaining connection has the whole aggregate"
        );
    }

    #[test]
    fn the_coco_role_skips_connections_in_fr() {
        let mut g = two_in_ca(1.0, 1.0);
        g.register(FlowId(3), 1.0, 10.0, 1e9).unwrap();
        g.update(FlowId(3), ca(10.0, 10.0)).unwrap();
        g.update(FlowId(1), TcpUpdate::new(10.0, 5.0, FastRecovery))
            .unwrap();
        g.update(FlowId(2), TcpUpdate::new(10.0, 5.0, FastRecovery))
            .unwrap();
        g.leave(FlowId(1)).unwrap();
        assert_eq!(g.coco(), Some(FlowId(3)), "connection 2 is in FR; 3 is not");
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
        g.update(FlowId(1), TcpUpdate::new(29.4, 14.7, FastRecovery))
            .unwrap();
        g.update(FlowId(1), ca(14.7, 14.7)).unwrap();
        let r = g.update(FlowId(2), ca(1.0, 1.0)).unwrap().unwrap();
        assert_eq!(
            r.ssthresh_pkts, 2.0,
            "ssthresh share below 2 segments is raised to 2"
        );
        assert_eq!(r.cwnd_pkts, 1.0);
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
        assert!(g.leave(FlowId(9)).is_err());
        assert!(g.on_ack(FlowId(9), &mut Vec::new()).is_err());
        assert_eq!(before, format!("{g:?}"));
    }
}
