//! Coupling in the controller seam (issue 14): a TCP connection's congestion controller wrapped in
//! [`Coupled`], which calls the connection's coupling group from the controller's own hooks, with
//! the groups' shared state ([`CouplingGroups`]) passed in by reference. This is the shape of a
//! BPF struct_ops congestion control with a shared map: the kernel calls the hooks of one socket,
//! the program reads and writes the group's entry in a map every socket's program shares, and
//! writes only its own socket's cwnd and ssthresh.
//!
//! Where the coupler is called (seed 003 sec. 9.2.2: "they update their status each time they
//! change cwnd"; Fig. 9.1's register, UPDATE and leave):
//!
//! | hook | Linux | coupler call |
//! |---|---|---|
//! | [`Coupled::init`] | `.init` | register (P, cwnd, ssthresh); apply the answer |
//! | [`Coupled::ack_done`] | the end of `tcp_ack`, where `.cong_control` runs | UPDATE if (cwnd, ssthresh, state) changed since the last report; then, for an ACK of new data, the ack-clocked handover's releases (Algorithm 4) |
//! | [`Coupled::timeout`] | `.set_state(TCP_CA_Loss)`, every RTO | UPDATE with the timeout flag (state SS, cwnd the loss window) |
//! | [`Coupled::release`] | `.release` | leave (Algorithm 6) |
//!
//! The other hooks (ssthresh, cong_avoid, pkts_acked, cwnd_event, undo_cwnd) are the wrapped
//! controller's: the coupler sees their effect in the next report, once per ACK, after the
//! sender's own window rules (recovery entry and exit, NewReno inflation) have run, so a report
//! never carries a half-done change. Segments a handover releases to *other* connections go back
//! to the TCP agent ([`CouplingGroups::take_releases`]), which applies them to those connections
//! ([`Coupled::on_release`]).

use super::cc::{AckSample, CaState, CongestionControl, CwndEvent, TcpCc};
use super::measured::{MeasuredConfig, MeasuredCoupler};
use coupling::tcp::{CouplerKind, Release, TcpCoupler, TcpState, TcpUpdate};
use coupling::FlowId;

/// Coupler errors by the call that returned them. None is expected (tests assert so); each is
/// counted, never dropped, and reported in the results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CouplingErrors {
    /// A flow could not register; it then runs uncoupled.
    pub register: u64,
    /// An UPDATE was refused; the sender kept its own window.
    pub update: u64,
    /// An ACK's handover call was refused.
    pub on_ack: u64,
    pub leave: u64,
    pub set_priority: u64,
    /// FSE calls (register, update, leave) refused.
    pub fse: u64,
}

impl CouplingErrors {
    pub fn total(&self) -> u64 {
        self.register + self.update + self.on_ack + self.leave + self.set_priority + self.fse
    }
}

/// The TCP coupling groups of a simulation: the state every coupled connection's hooks share (a
/// BPF program's shared map), the segments a handover released for the TCP agent to apply, and
/// the errors the couplers returned.
#[derive(Debug, Default)]
pub struct CouplingGroups {
    groups: Vec<Slot>,
    /// Each group's kind (`None`: a coupler given directly, [`Self::add_coupler`]).
    kinds: Vec<Option<CouplerKind>>,
    /// Segments released to joining connections by the latest ACK (Algorithm 4).
    releases: Vec<Release>,
    pub errors: CouplingErrors,
}

/// A group's coupler: one of `crates/coupling`'s (or a wrapper), or a measured group, which the
/// engine also feeds observations and whose actions it applies.
#[derive(Debug)]
enum Slot {
    Plain(Box<dyn TcpCoupler>),
    Measured(Box<MeasuredCoupler>),
}

impl Slot {
    fn get(&self) -> &dyn TcpCoupler {
        match self {
            Slot::Plain(c) => c.as_ref(),
            Slot::Measured(m) => m.as_ref(),
        }
    }

    fn get_mut(&mut self) -> &mut dyn TcpCoupler {
        match self {
            Slot::Plain(c) => c.as_mut(),
            Slot::Measured(m) => m.as_mut(),
        }
    }
}

impl CouplingGroups {
    /// A measured group (`transport::measured`); its kind is its coupler's.
    pub fn add_measured(&mut self, config: MeasuredConfig) -> Result<usize, coupling::Error> {
        let m = MeasuredCoupler::new(config)?;
        self.groups.push(Slot::Measured(Box::new(m)));
        self.kinds.push(Some(config.coupler));
        Ok(self.groups.len() - 1)
    }

    /// The measured group `group`, if it is one.
    pub fn measured(&self, group: usize) -> Option<&MeasuredCoupler> {
        match self.groups.get(group) {
            Some(Slot::Measured(m)) => Some(m),
            _ => None,
        }
    }

    pub fn measured_mut(&mut self, group: usize) -> Option<&mut MeasuredCoupler> {
        match self.groups.get_mut(group) {
            Some(Slot::Measured(m)) => Some(m),
            _ => None,
        }
    }

    pub fn add_group(&mut self, kind: CouplerKind) -> usize {
        let g = self.add_coupler(kind.build());
        self.kinds[g] = Some(kind);
        g
    }

    /// A group run by any coupler (one of `crates/coupling`'s, or a wrapper around one).
    pub fn add_coupler(&mut self, coupler: Box<dyn TcpCoupler>) -> usize {
        self.groups.push(Slot::Plain(coupler));
        self.kinds.push(None);
        self.groups.len() - 1
    }

    /// The kind `group` was added with.
    pub fn kind(&self, group: usize) -> Option<CouplerKind> {
        self.kinds.get(group).copied().flatten()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn coupler(&self, group: usize) -> Option<&dyn TcpCoupler> {
        self.groups.get(group).map(Slot::get)
    }

    /// Sets a group's burst limit (`TcpCoupler::set_max_burst_pkts`); `None` for no such group.
    pub fn set_max_burst_pkts(
        &mut self,
        group: usize,
        pkts: f64,
    ) -> Option<Result<(), coupling::Error>> {
        self.groups
            .get_mut(group)
            .map(|g| g.get_mut().set_max_burst_pkts(pkts))
    }

    /// Moves the segments the latest ACK released into `out` (cleared first), for the TCP agent
    /// to apply to their connections.
    pub fn take_releases(&mut self, out: &mut Vec<Release>) {
        out.clear();
        out.append(&mut self.releases);
    }
}

/// A connection's place in a coupling group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seat {
    pub group: usize,
    pub priority: f64,
}

/// What the coupler was told last: `(cwnd, ssthresh, state)`.
type Report = (f64, f64, TcpState);

/// The state as a coupler sees it (seed 003 Table 9.1).
pub fn coupling_state(tp: &TcpCc) -> TcpState {
    if tp.ca_state == CaState::Recovery {
        TcpState::FastRecovery
    } else if tp.cwnd < tp.ssthresh {
        TcpState::SlowStart
    } else {
        TcpState::CongestionAvoidance
    }
}

/// A congestion controller and, when the connection is coupled, its seat in a group. Uncoupled,
/// every hook is the wrapped controller's and the groups are never touched.
#[derive(Debug)]
pub struct Coupled {
    inner: Box<dyn CongestionControl>,
    conn: FlowId,
    /// `None`: uncoupled, or its registration was refused.
    seat: Option<Seat>,
    /// What was last reported to the coupler or applied from it.
    reported: Option<Report>,
    /// Left its group (finished); nothing is reported after.
    left: bool,
}

impl Coupled {
    /// `controller` for connection `conn`, in `seat` if coupled.
    pub fn new(controller: Box<dyn CongestionControl>, conn: u32, seat: Option<Seat>) -> Self {
        Coupled {
            inner: controller,
            conn: FlowId(conn as u64),
            seat,
            reported: None,
            left: false,
        }
    }

    /// An uncoupled controller.
    pub fn uncoupled(controller: Box<dyn CongestionControl>) -> Self {
        Coupled::new(controller, 0, None)
    }

    pub fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// The group it is in: registered and not left.
    pub fn group(&self) -> Option<usize> {
        self.seat.filter(|_| !self.left).map(|s| s.group)
    }

    /// Whether the connection is coupled (its registration, if any, was accepted).
    pub fn is_coupled(&self) -> bool {
        self.seat.is_some()
    }

    /// `.init`: the controller's, then registration with the group; the answer is the window the
    /// connection starts with. A refused registration is counted and the connection runs
    /// uncoupled.
    pub fn init(&mut self, tp: &mut TcpCc, g: &mut CouplingGroups) {
        self.inner.init(tp);
        let Some(seat) = self.seat else { return };
        let Some(group) = g.groups.get_mut(seat.group).map(Slot::get_mut) else {
            g.errors.register += 1; // no such group: counted, and it runs uncoupled
            self.seat = None;
            return;
        };
        match group.register(self.conn, seat.priority, tp.cwnd, tp.ssthresh) {
            Ok(r) => {
                let state = coupling_state(tp);
                tp.cwnd = r.cwnd_pkts;
                tp.ssthresh = r.ssthresh_pkts;
                self.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, state));
            }
            Err(_) => {
                g.errors.register += 1;
                self.seat = None;
            }
        }
    }

    pub fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        self.inner.ssthresh(tp)
    }

    pub fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        self.inner.cong_avoid(tp, ack)
    }

    pub fn pkts_acked(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        self.inner.pkts_acked(tp, ack)
    }

    pub fn cwnd_event(&mut self, tp: &mut TcpCc, ev: CwndEvent) {
        self.inner.cwnd_event(tp, ev)
    }

    pub fn undo_cwnd(&mut self, tp: &TcpCc) -> f64 {
        self.inner.undo_cwnd(tp)
    }

    /// `.set_state`, on a change of state.
    pub fn set_state(&mut self, tp: &mut TcpCc, new: CaState) {
        self.inner.set_state(tp, new)
    }

    /// A retransmission timeout has put the connection in Loss: Linux's `tcp_enter_loss` calls
    /// `.set_state(TCP_CA_Loss)` on every RTO, after setting the loss window, and the kernel port
    /// reports there. The coupler is told with the timeout flag (seed 003 Table 9.1: a connection
    /// reports slow start right after a timeout, whatever its ssthresh says). `in_flight_pkts` is
    /// what the sender counts against the window it will be told.
    pub fn timeout(&mut self, tp: &mut TcpCc, in_flight_pkts: f64, g: &mut CouplingGroups) {
        self.report(tp, true, in_flight_pkts, g);
    }

    /// The end of an ACK's processing, every ACK: the report if the window changed, then, for an
    /// ACK of new data, the segments it releases to joining connections (left in `g` for the TCP
    /// agent).
    pub fn ack_done(
        &mut self,
        tp: &mut TcpCc,
        new_data: bool,
        in_flight_pkts: f64,
        g: &mut CouplingGroups,
    ) {
        self.report(tp, false, in_flight_pkts, g);
        if let (true, Some(group)) = (new_data, self.group()) {
            g.releases.clear();
            if g.groups[group]
                .get_mut()
                .on_ack(self.conn, &mut g.releases)
                .is_err()
            {
                g.errors.on_ack += 1;
            }
        }
    }

    /// `.release`: leaves the group (Algorithm 6). Once.
    pub fn release(&mut self, g: &mut CouplingGroups) {
        if let Some(group) = self.group() {
            self.left = true;
            if g.groups[group].get_mut().leave(self.conn).is_err() {
                g.errors.leave += 1;
            }
        }
    }

    /// A scheduled priority change; the coupler is told while the connection is in its group.
    pub fn set_priority(&mut self, priority: f64, g: &mut CouplingGroups) {
        if let Some(seat) = &mut self.seat {
            seat.priority = priority;
        }
        if let Some(group) = self.group() {
            if g.groups[group]
                .get_mut()
                .set_priority(self.conn, priority)
                .is_err()
            {
                g.errors.set_priority += 1;
            }
        }
    }

    /// Applies a measured group's move (`transport::measured`): the connection uses the window and
    /// threshold its new group answered, as the last thing the coupler knows of it.
    pub fn on_moved(&mut self, tp: &mut TcpCc, cwnd_pkts: f64, ssthresh_pkts: f64) {
        let state = coupling_state(tp);
        tp.cwnd = cwnd_pkts;
        tp.ssthresh = ssthresh_pkts;
        self.reported = Some((cwnd_pkts, ssthresh_pkts, state));
    }

    /// Applies a handover release: the connection may now use `cwnd_pkts` (its ssthresh stays).
    pub fn on_release(&mut self, tp: &mut TcpCc, cwnd_pkts: f64) {
        let state = coupling_state(tp);
        tp.cwnd = cwnd_pkts;
        self.reported = Some((cwnd_pkts, tp.ssthresh, state));
    }

    /// UPDATE when the window, threshold or state changed since the last report, or always after
    /// a timeout; applies the answer. A refused UPDATE is counted and the sender keeps its own
    /// window.
    fn report(
        &mut self,
        tp: &mut TcpCc,
        timeout: bool,
        in_flight_pkts: f64,
        g: &mut CouplingGroups,
    ) {
        let Some(group) = self.group() else { return };
        let state = if timeout {
            TcpState::SlowStart
        } else {
            coupling_state(tp)
        };
        let now = (tp.cwnd, tp.ssthresh, state);
        if !timeout && self.reported == Some(now) {
            return;
        }
        let u = TcpUpdate {
            cwnd_pkts: now.0,
            ssthresh_pkts: now.1,
            state,
            timeout,
            // What the sender counts against the window it is told: the answer's burst is the
            // difference.
            in_flight_pkts,
        };
        match g.groups[group].get_mut().update(self.conn, u) {
            Ok(Some(r)) => {
                tp.cwnd = r.cwnd_pkts;
                tp.ssthresh = r.ssthresh_pkts;
                // Remember the state that was reported: if the answer moves the sender to another
                // state, the next check reports that at once.
                self.reported = Some((r.cwnd_pkts, r.ssthresh_pkts, state));
            }
            Ok(None) => self.reported = Some(now),
            Err(_) => g.errors.update += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::cc::{CcKind, NewReno};
    use coupling::{Duration, Instant};
    use std::sync::atomic::{AtomicU64, Ordering};

    fn tp(cwnd: f64, ssthresh: f64) -> TcpCc {
        TcpCc {
            cwnd,
            ssthresh,
            ca_state: CaState::Open,
            in_flight: 0.0,
            srtt: None,
            min_rtt: None,
            snd_nxt: 0,
        }
    }

    fn ack() -> AckSample {
        AckSample {
            acked: 1,
            rtt: Some(Duration::from_millis(100)),
            one_way_delay: None,
            now: Instant::ZERO,
            ack_seq: 0,
        }
    }

    /// UPDATE calls made to any [`Counting`] coupler (one test uses it).
    static UPDATES: AtomicU64 = AtomicU64::new(0);

    /// TCP-CCC, counting the UPDATEs it is sent.
    #[derive(Debug)]
    struct Counting(coupling::tcp::TcpCcc);

    impl TcpCoupler for Counting {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn register(
            &mut self,
            conn: FlowId,
            p: f64,
            cwnd: f64,
            ssthresh: f64,
        ) -> Result<coupling::tcp::Response, coupling::Error> {
            self.0.register(conn, p, cwnd, ssthresh)
        }
        fn update(
            &mut self,
            conn: FlowId,
            u: TcpUpdate,
        ) -> Result<Option<coupling::tcp::Response>, coupling::Error> {
            UPDATES.fetch_add(1, Ordering::Relaxed);
            self.0.update(conn, u)
        }
        fn leave(&mut self, conn: FlowId) -> Result<(), coupling::Error> {
            self.0.leave(conn)
        }
        fn set_max_burst_pkts(&mut self, pkts: f64) -> Result<(), coupling::Error> {
            self.0.set_max_burst_pkts(pkts)
        }
        fn set_priority(&mut self, conn: FlowId, p: f64) -> Result<(), coupling::Error> {
            self.0.set_priority(conn, p)
        }
        fn on_ack(&mut self, conn: FlowId, r: &mut Vec<Release>) -> Result<(), coupling::Error> {
            self.0.on_ack(conn, r)
        }
        fn sum_cwnd(&self) -> f64 {
            self.0.sum_cwnd()
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn conn(&self, conn: FlowId) -> Result<coupling::tcp::ConnView, coupling::Error> {
            self.0.conn(conn)
        }
        fn conns(&self) -> Vec<coupling::tcp::ConnView> {
            self.0.conns()
        }
    }

    fn coupled(conn: u32, group: usize, priority: f64) -> Coupled {
        Coupled::new(Box::new(NewReno), conn, Some(Seat { group, priority }))
    }

    /// Init registers and applies the answer; the report at the end of an ACK goes out only
    /// when (cwnd, ssthresh, state) changed, and its answer is applied; a timeout always reports;
    /// release leaves once. Checked against the coupler's own view of the connection.
    #[test]
    fn the_hooks_register_report_changes_and_leave() {
        let mut g = CouplingGroups::default();
        let gid = g.add_coupler(Box::new(Counting(coupling::tcp::TcpCcc::new(false))));
        let (mut a, mut ta) = (coupled(0, gid, 1.0), tp(10.0, 1e9));
        let (mut b, mut tb) = (coupled(1, gid, 3.0), tp(10.0, 1e9));
        a.init(&mut ta, &mut g);
        b.init(&mut tb, &mut g);
        assert_eq!(g.coupler(gid).unwrap().len(), 2);
        assert!(a.is_coupled() && a.group() == Some(gid));

        // A grows its own window (NewReno slow start) and reports at the end of the ACK: the
        // group's aggregate follows, and A is told its window (never more than its own: no burst).
        a.cong_avoid(&mut ta, &ack());
        assert_eq!(ta.cwnd, 11.0);
        a.ack_done(&mut ta, true, 11.0, &mut g);
        let view = g.coupler(gid).unwrap().conn(FlowId(0)).unwrap();
        assert_eq!(view.cwnd_pkts, ta.cwnd);
        assert_eq!(view.ssthresh_pkts, ta.ssthresh);
        // Nothing changed since: no report.
        let updates = UPDATES.load(Ordering::Relaxed);
        a.ack_done(&mut ta, false, 11.0, &mut g);
        assert_eq!(UPDATES.load(Ordering::Relaxed), updates);
        ta.cwnd += 0.5;
        a.ack_done(&mut ta, false, 11.0, &mut g);
        assert_eq!(
            UPDATES.load(Ordering::Relaxed),
            updates + 1,
            "a change is reported"
        );

        // A timeout always reports, as slow start with the loss window.
        ta.ssthresh = a.ssthresh(&ta);
        ta.cwnd = 1.0;
        ta.ca_state = CaState::Loss;
        a.set_state(&mut ta, CaState::Loss);
        a.timeout(&mut ta, 0.0, &mut g);
        let view = g.coupler(gid).unwrap().conn(FlowId(0)).unwrap();
        assert_eq!(view.state, TcpState::SlowStart);
        assert_eq!((ta.cwnd, view.cwnd_pkts), (view.cwnd_pkts, ta.cwnd));

        a.release(&mut g);
        a.release(&mut g);
        assert_eq!(g.coupler(gid).unwrap().len(), 1, "left once");
        assert_eq!(a.group(), None);
        a.ack_done(&mut ta, true, 1.0, &mut g); // after leaving: nothing reported, no error
        assert_eq!(g.errors.total(), 0);
    }

    /// An ACK of new data from a connection not in handover releases a segment to a joiner
    /// (Algorithm 4); the segments go back to the TCP agent, which applies them.
    #[test]
    fn handover_releases_go_back_to_the_agent() {
        let mut g = CouplingGroups::default();
        let gid = g.add_group(CouplerKind::ccc(true));
        let (mut a, mut ta) = (coupled(0, gid, 1.0), tp(40.0, 1e9));
        a.init(&mut ta, &mut g);
        let (mut j, mut tj) = (coupled(1, gid, 1.0), tp(10.0, 1e9));
        j.init(&mut tj, &mut g);
        assert_eq!(tj.cwnd, 1.0, "a joiner in handover starts with one segment");
        let mut out = Vec::new();
        let w = ta.cwnd;
        a.ack_done(&mut ta, false, w, &mut g);
        g.take_releases(&mut out);
        assert!(out.is_empty(), "a duplicate ACK releases nothing");
        let mut released = 0;
        for _ in 0..8 {
            let w = ta.cwnd;
            a.ack_done(&mut ta, true, w, &mut g);
            g.take_releases(&mut out);
            for r in &out {
                assert_eq!(r.conn, FlowId(1));
                j.on_release(&mut tj, r.cwnd_pkts);
                released += 1;
            }
        }
        assert!(released > 0);
        assert_eq!(tj.cwnd, 1.0 + released as f64);
        // The joiner's next report starts from the released window: no change, no UPDATE.
        let before = g.coupler(gid).unwrap().conn(FlowId(1)).unwrap();
        let w = tj.cwnd;
        j.ack_done(&mut tj, false, w, &mut g);
        assert_eq!(g.coupler(gid).unwrap().conn(FlowId(1)).unwrap(), before);
        assert_eq!(g.errors.total(), 0);
    }

    /// Every call a coupler refuses is counted by kind, and changes nothing.
    #[test]
    fn refused_calls_are_counted_by_kind_and_change_nothing() {
        let mut g = CouplingGroups::default();
        let gid = g.add_group(CouplerKind::ccc(true));
        let (mut a, mut ta) = (coupled(0, gid, 1.0), tp(10.0, 1e9));
        a.init(&mut ta, &mut g);
        // A second connection with the same id: its registration is refused and it runs
        // uncoupled.
        let (mut dup, mut td) = (coupled(0, gid, 1.0), tp(10.0, 1e9));
        dup.init(&mut td, &mut g);
        assert!(!dup.is_coupled() && dup.group().is_none());
        assert_eq!(td.cwnd, 10.0, "its own window");
        // A connection that never registered (its seat given, init not called): every call about
        // it is refused, and counted.
        let (mut ghost, mut tg) = (coupled(7, gid, 1.0), tp(10.0, 1e9));
        ghost.ack_done(&mut tg, true, 10.0, &mut g);
        ghost.set_priority(2.0, &mut g);
        ghost.release(&mut g);
        let e = g.errors;
        assert_eq!(
            (e.register, e.update, e.on_ack, e.leave, e.set_priority),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(e.total(), 5);
        assert_eq!(g.coupler(gid).unwrap().len(), 1);
        assert_eq!(tg.cwnd, 10.0, "a refused UPDATE leaves the sender's window");
    }

    /// Uncoupled, the wrapper is the controller: same windows as the controller alone.
    #[test]
    fn uncoupled_it_is_the_controller() {
        let mut g = CouplingGroups::default();
        for kind in CcKind::names() {
            let mut w = Coupled::uncoupled(CcKind::named(kind).build());
            let mut alone = CcKind::named(kind).build();
            let (mut t1, mut t2) = (tp(10.0, 20.0), tp(10.0, 20.0));
            w.init(&mut t1, &mut g);
            alone.init(&mut t2);
            for i in 0..50 {
                let mut a = ack();
                a.now = Instant::from_nanos(i * 10_000_000);
                w.pkts_acked(&mut t1, &a);
                alone.pkts_acked(&mut t2, &a);
                w.cong_avoid(&mut t1, &a);
                alone.cong_avoid(&mut t2, &a);
                let flight = t1.cwnd;
                w.ack_done(&mut t1, true, flight, &mut g);
            }
            assert_eq!(t1, t2, "{kind}");
            assert!(g.is_empty());
        }
    }
}
