//! Coupling of TCP congestion windows (seed 003 ch. 7 and 9; the TCP-CCC draft in ch. 11).
//!
//! Every coupler implements [`TcpCoupler`]: a connection registers (cid, P, cwnd, ssthresh),
//! calls UPDATE (cwnd, ssthresh, state, timeout) every time its controller changes cwnd, and leaves
//! (seed 003 Fig. 9.1). The answer is the cwnd and ssthresh the connection uses from then on; no
//! answer while the connection is in Fast Recovery. The couplers ([`CouplerKind::ALL`]):
//!
//! - [`TcpCcc`]: ctrlTCP / TCP-CCC (seed 003 Algorithms 5, 6, 7), optionally with the ack-clocked
//!   handover of a joining connection's share (Algorithm 4); [`TcpCccInt`] is the same algorithm
//!   in the integer window mode.
//! - [`ETcp`] and [`Efcm`]: the baselines of seed 003 sec. 9.2, with the faults the dissertation
//!   describes, so experiments can show the difference.
//!
//! Windows are in packets (segments) as `f64`, as ns-2's TCP keeps them, except in ctrlTCP's
//! integer window mode ([`TcpCccInt`], [`arith`]): whole packets and scaled-integer priorities, the
//! kernel's arithmetic (its senders must keep whole windows too, as Linux does). A connection must
//! use the window it was given exactly, because the coordinating connection's next report is
//! compared with it to tell an increase from a decrease.
//!
//! **No coupler answer may cause a burst** (issue 11): a coupler never tells a connection a window
//! larger than `max(its own cwnd, its packets in flight + max_burst_pkts)` (see [`allowance`]; by
//! default `max_burst_pkts` is 0, so the connection can send no more at once than its own, uncoupled
//! controller would). Where a connection's share is larger, it is told its own window and an
//! ssthresh of at least the share, so its own controller slow-starts up to the share on its own ACK
//! clock. A share is only ever taken away at once. The one exception is by design: ack-clocked
//! handover ([`TcpCoupler::on_ack`]) releases one segment on top of the joiner's window per
//! release, as Algorithm 4 does, and a joiner starts with one segment.

pub mod arith;
mod baselines;
mod ccc;
pub mod vectors;

pub use arith::{Arith, Float, Int, PRIORITY_SCALE};
pub use baselines::{ETcp, Efcm};
pub use ccc::{Ccc, TcpCcc, TcpCccInt};

use crate::error::Error;
use crate::group::{FlowGroups, FlowId, GroupId, GroupState, Grouping};
pub(crate) use crate::units::share;
use crate::units::{check_packets, check_priority, check_window};
use std::fmt::Debug;

/// The TCP state machine state a connection reports (seed 003 Table 9.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcpState {
    SlowStart,
    CongestionAvoidance,
    FastRecovery,
}

impl TcpState {
    pub fn name(self) -> &'static str {
        match self {
            TcpState::SlowStart => "SS",
            TcpState::CongestionAvoidance => "CA",
            TcpState::FastRecovery => "FR",
        }
    }
    pub fn from_name(s: &str) -> Option<TcpState> {
        match s {
            "SS" => Some(TcpState::SlowStart),
            "CA" => Some(TcpState::CongestionAvoidance),
            "FR" => Some(TcpState::FastRecovery),
            _ => None,
        }
    }
}

/// The inputs of one UPDATE call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpUpdate {
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
    pub state: TcpState,
    /// The connection has just had a retransmission timeout (it reports SS with cwnd = loss window).
    pub timeout: bool,
    /// Segments the connection has in flight (Linux `tcp_packets_in_flight`); bounds the burst an
    /// answer may allow (see [`allowance`]). 0 when unknown, which is the most conservative.
    pub in_flight_pkts: f64,
}

impl TcpUpdate {
    pub fn new(cwnd_pkts: f64, ssthresh_pkts: f64, state: TcpState) -> Self {
        TcpUpdate {
            cwnd_pkts,
            ssthresh_pkts,
            state,
            timeout: false,
            in_flight_pkts: 0.0,
        }
    }
    /// The same report with the connection's segments in flight.
    pub fn with_in_flight(self, in_flight_pkts: f64) -> Self {
        TcpUpdate {
            in_flight_pkts,
            ..self
        }
    }
    /// A report right after a retransmission timeout.
    pub fn timeout(cwnd_pkts: f64, ssthresh_pkts: f64) -> Self {
        TcpUpdate {
            cwnd_pkts,
            ssthresh_pkts,
            state: TcpState::SlowStart,
            timeout: true,
            in_flight_pkts: 0.0,
        }
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        check_window("cwnd_pkts", self.cwnd_pkts)?;
        check_window("ssthresh_pkts", self.ssthresh_pkts)?;
        check_window("in_flight_pkts", self.in_flight_pkts)?;
        if self.timeout && self.state != TcpState::SlowStart {
            return Err(Error::InvalidValue {
                field: "timeout",
                value: 1.0,
                expected:
                    "a timeout to be reported with state SS (TCP enters slow start after an RTO)",
            });
        }
        Ok(())
    }
}

/// The cwnd and ssthresh the coupler assigns ("send ccc_cwnd(cid) and ccc_ssthresh(cid) to cid").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Response {
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
}

/// A segment released to a connection in ack-clocked handover (seed 003 Algorithm 4, line 6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Release {
    pub conn: FlowId,
    /// The window the connection may now use: the segments released so far, or its full share
    /// once the handover is done.
    pub cwnd_pkts: f64,
    /// The handover of this connection has ended.
    pub done: bool,
}

/// A read-only view of a connection's coupled state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnView {
    pub conn: FlowId,
    pub priority: f64,
    /// ccc_cwnd: the window last assigned to the connection.
    pub cwnd_pkts: f64,
    /// ccc_ssthresh.
    pub ssthresh_pkts: f64,
    pub state: TcpState,
    /// The connection is the coordinating connection (CoCo); always false for the baselines.
    pub coordinating: bool,
    /// `(released, target)` segments while in ack-clocked handover.
    pub handover: Option<(u64, f64)>,
    /// Timed out and not yet back at its share (ctrlTCP's ssbit); always false for the baselines.
    pub timed_out: bool,
}

/// The interface every TCP coupler offers (seed 003 Fig. 9.1). Errors leave the state unchanged.
pub trait TcpCoupler: Debug + Send {
    fn name(&self) -> &'static str;
    /// Registers a connection with its priority and the cwnd and ssthresh it starts with.
    fn register(
        &mut self,
        conn: FlowId,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> Result<Response, Error>;
    /// UPDATE; `None` while the connection is in Fast Recovery.
    fn update(&mut self, conn: FlowId, update: TcpUpdate) -> Result<Option<Response>, Error>;
    fn leave(&mut self, conn: FlowId) -> Result<(), Error>;
    /// Sets how many segments beyond its flight an answer may let a connection send at once, when
    /// that is more than its own window allows (see [`allowance`]); 0 by default.
    fn set_max_burst_pkts(&mut self, pkts: f64) -> Result<(), Error>;
    /// Changes a connection's priority; the new share applies from its next UPDATE.
    fn set_priority(&mut self, conn: FlowId, priority: f64) -> Result<(), Error>;
    /// A new acknowledgement arrived for `conn`. Couplers with ack-clocked handover append the
    /// segments this releases; the others only check `conn`.
    fn on_ack(&mut self, conn: FlowId, released: &mut Vec<Release>) -> Result<(), Error>;
    /// The aggregate congestion window the coupler maintains.
    fn sum_cwnd(&self) -> f64;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn conn(&self, conn: FlowId) -> Result<ConnView, Error>;
    /// All connections in registration order.
    fn conns(&self) -> Vec<ConnView>;
}

/// Which TCP coupler a group runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CouplerKind {
    /// ctrlTCP / TCP-CCC; `handover` turns on the ack-clocked handover of Algorithm 4; `int`
    /// computes in the integer window mode (whole packets, priorities in units of 2^-16: the
    /// kernel's arithmetic, [`arith::Int`]).
    Ccc {
        handover: bool,
        int: bool,
    },
    ETcp,
    Efcm,
}

impl CouplerKind {
    /// Every coupler, in the order listings show them: the one list the bindings, scenario
    /// validation and the CLI read.
    pub const ALL: [CouplerKind; 6] = [
        CouplerKind::Ccc {
            handover: false,
            int: false,
        },
        CouplerKind::Ccc {
            handover: true,
            int: false,
        },
        CouplerKind::Ccc {
            handover: false,
            int: true,
        },
        CouplerKind::Ccc {
            handover: true,
            int: true,
        },
        CouplerKind::ETcp,
        CouplerKind::Efcm,
    ];

    /// ctrlTCP with `f64` windows.
    pub const fn ccc(handover: bool) -> CouplerKind {
        CouplerKind::Ccc {
            handover,
            int: false,
        }
    }

    pub fn build(self) -> Box<dyn TcpCoupler> {
        match self {
            CouplerKind::Ccc {
                handover,
                int: false,
            } => Box::new(TcpCcc::new(handover)),
            CouplerKind::Ccc {
                handover,
                int: true,
            } => Box::new(TcpCccInt::new(handover)),
            CouplerKind::ETcp => Box::new(ETcp::default()),
            CouplerKind::Efcm => Box::new(Efcm::default()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CouplerKind::Ccc {
                handover: false,
                int: false,
            } => "ccc",
            CouplerKind::Ccc {
                handover: true,
                int: false,
            } => "ccc_handover",
            CouplerKind::Ccc {
                handover: false,
                int: true,
            } => "ccc_int",
            CouplerKind::Ccc {
                handover: true,
                int: true,
            } => "ccc_handover_int",
            CouplerKind::ETcp => "etcp",
            CouplerKind::Efcm => "efcm",
        }
    }

    pub fn from_name(name: &str) -> Option<CouplerKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.into_iter().map(|k| k.name())
    }
}

/// Many coupled TCP groups with flow grouping: the CCC entity of seed 003 Fig. 9.1 for a host.
#[derive(Debug)]
pub struct TcpGroups {
    default_kind: CouplerKind,
    /// The burst limit of every group, those created later included (see [`allowance`]).
    max_burst_pkts: f64,
    groups: FlowGroups<Box<dyn TcpCoupler>>,
}

impl TcpGroups {
    pub fn new(default_kind: CouplerKind) -> Self {
        TcpGroups {
            default_kind,
            max_burst_pkts: 0.0,
            groups: FlowGroups::default(),
        }
    }

    /// The coupler a group gets when it is created by a registration (not configured first).
    pub fn default_kind(&self) -> CouplerKind {
        self.default_kind
    }

    /// A coupler of `kind` with this host's burst limit.
    fn build(kind: CouplerKind, max_burst_pkts: f64) -> Box<dyn TcpCoupler> {
        let mut c = kind.build();
        c.set_max_burst_pkts(max_burst_pkts)
            .expect("limit checked when set");
        c
    }

    /// Sets the burst limit (`TcpCoupler::set_max_burst_pkts`) of every group, now and for groups
    /// created later. An invalid limit is an error and changes nothing.
    pub fn set_max_burst_pkts(&mut self, pkts: f64) -> Result<(), Error> {
        let pkts = check_max_burst(pkts)?;
        self.max_burst_pkts = pkts;
        for gid in self.group_ids() {
            // Neither can fail: the ids are the registry's own and the limit is checked.
            self.groups
                .group_mut(gid)
                .expect("listed group")
                .set_max_burst_pkts(pkts)
                .expect("limit checked above");
        }
        Ok(())
    }

    pub fn max_burst_pkts(&self) -> f64 {
        self.max_burst_pkts
    }

    /// Creates group `gid` with `kind`, or changes the coupler of an existing empty group.
    /// A configured group keeps its coupler kind when its last connection leaves.
    pub fn configure_group(&mut self, gid: GroupId, kind: CouplerKind) -> Result<(), Error> {
        self.groups
            .configure(gid, Self::build(kind, self.max_burst_pkts))
    }

    /// Removes an empty group, configured or not.
    pub fn remove_group(&mut self, gid: GroupId) -> Result<(), Error> {
        self.groups.remove_empty_group(gid)
    }

    pub fn register(
        &mut self,
        conn: FlowId,
        grouping: &Grouping,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> Result<(GroupId, Response), Error> {
        check_register(
            self.groups.contains_flow(conn),
            conn,
            priority,
            cwnd_pkts,
            ssthresh_pkts,
        )?;
        FlowGroups::<Box<dyn TcpCoupler>>::check(grouping)?;
        let (kind, burst) = (self.default_kind, self.max_burst_pkts);
        let gid = self
            .groups
            .resolve(grouping, |_| Self::build(kind, burst))?;
        let group = self.groups.group_mut(gid)?;
        match group.register(conn, priority, cwnd_pkts, ssthresh_pkts) {
            Ok(r) => {
                self.groups.bind(conn, gid);
                Ok((gid, r))
            }
            Err(e) => {
                if group.is_empty() {
                    self.groups.release_empty(gid);
                }
                Err(e)
            }
        }
    }

    pub fn update(&mut self, conn: FlowId, update: TcpUpdate) -> Result<Option<Response>, Error> {
        self.groups.group_of_flow_mut(conn)?.1.update(conn, update)
    }

    pub fn on_ack(&mut self, conn: FlowId, released: &mut Vec<Release>) -> Result<(), Error> {
        self.groups
            .group_of_flow_mut(conn)?
            .1
            .on_ack(conn, released)
    }

    pub fn set_priority(&mut self, conn: FlowId, priority: f64) -> Result<(), Error> {
        self.groups
            .group_of_flow_mut(conn)?
            .1
            .set_priority(conn, priority)
    }

    pub fn leave(&mut self, conn: FlowId) -> Result<(), Error> {
        let (gid, group) = self.groups.group_of_flow_mut(conn)?;
        group.leave(conn)?;
        let empty = group.is_empty();
        self.groups.unbind(conn);
        if empty {
            self.groups.release_empty(gid);
        }
        Ok(())
    }

    pub fn group_of(&self, conn: FlowId) -> Result<GroupId, Error> {
        self.groups.group_of(conn)
    }

    pub fn group(&self, gid: GroupId) -> Result<&dyn TcpCoupler, Error> {
        self.groups.group(gid).map(|g| g.as_ref())
    }

    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.group_ids().collect()
    }

    /// Every group's coupler, in ascending group id order.
    pub fn couplers(&self) -> impl Iterator<Item = &dyn TcpCoupler> + '_ {
        self.groups.groups().map(|(_, g)| g.as_ref())
    }
}

impl GroupState for Box<dyn TcpCoupler> {
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The checks of every registration (Algorithm 5's inputs), before anything changes.
pub(crate) fn check_register(
    registered: bool,
    conn: FlowId,
    priority: f64,
    cwnd_pkts: f64,
    ssthresh_pkts: f64,
) -> Result<(), Error> {
    if registered {
        return Err(Error::DuplicateFlow(conn));
    }
    check_priority(priority)?;
    check_window("cwnd_pkts", cwnd_pkts)?;
    check_window("ssthresh_pkts", ssthresh_pkts)?;
    Ok(())
}

/// The smallest window a coupler assigns: a window-based sender cannot use less than one
/// segment, and a share below it would stall the connection for good (nothing to send, so no ACK
/// to trigger the next update). The windows told may then add up to slightly more than the
/// aggregate.
pub const MIN_CWND_PKTS: f64 = 1.0;
/// The smallest ssthresh a coupler assigns (RFC 5681: 2 * SMSS).
pub const MIN_SSTHRESH_PKTS: f64 = 2.0;

/// A connection's share of the aggregate ssthresh, at least [`MIN_SSTHRESH_PKTS`].
pub(crate) fn ssthresh_share(p: f64, sum: f64, sum_p: f64) -> f64 {
    share(p, sum, sum_p).max(MIN_SSTHRESH_PKTS)
}

/// The largest window an answer to `u` may tell the connection: its own controller's window, or
/// its packets in flight plus `max_burst_pkts` if that is more, and never less than
/// [`MIN_CWND_PKTS`]. A window up to this lets the connection send no larger burst than its own
/// (uncoupled) controller would at this moment, plus `max_burst_pkts`.
pub fn allowance(u: &TcpUpdate, max_burst_pkts: f64) -> f64 {
    u.cwnd_pkts
        .max(u.in_flight_pkts + max_burst_pkts)
        .max(MIN_CWND_PKTS)
}

/// Checks a burst limit: finite and >= 0 segments.
pub(crate) fn check_max_burst(pkts: f64) -> Result<f64, Error> {
    check_packets(
        "max_burst_pkts",
        pkts,
        "a burst limit in packets in 0..=1e15",
    )
}

/// What a connection is told when its target window (its share) may be above what it may send at
/// once: `(cwnd, ssthresh, behind)`. It is told at most `allowed`; if that is more than a segment
/// below the target it is `behind` and told an ssthresh of at least the target, so its own
/// controller slow-starts up to its share on its own ACK clock. (A lag of less than a segment is
/// what the others' increases between two of its ACKs make; it is not worth a slow start.)
pub(crate) fn bounded(target: f64, ssthresh: f64, allowed: f64) -> (f64, f64, bool) {
    let target = target.max(MIN_CWND_PKTS);
    let cwnd = target.min(allowed);
    if is_behind(cwnd, target) {
        (cwnd, ssthresh.max(target), true)
    } else {
        (cwnd, ssthresh, false)
    }
}

/// A window more than one segment below its share.
pub(crate) fn is_behind(cwnd: f64, share: f64) -> bool {
    cwnd < share.max(MIN_CWND_PKTS) - MIN_CWND_PKTS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's burst limit reaches every group, those created before and after it is set.
    #[test]
    fn the_burst_limit_reaches_every_group() {
        let mut g = TcpGroups::new(CouplerKind::ccc(false));
        g.configure_group(GroupId(1), CouplerKind::Efcm).unwrap();
        assert!(g.set_max_burst_pkts(-1.0).is_err());
        assert!(g.set_max_burst_pkts(f64::NAN).is_err());
        assert_eq!(g.max_burst_pkts(), 0.0, "a bad limit changes nothing");
        g.set_max_burst_pkts(4.0).unwrap();
        let (implicit, _) = g
            .register(FlowId(1), &Grouping::Configured("a".into()), 1.0, 10.0, 1e9)
            .unwrap();
        // A joiner whose share is far above its window: told in flight + 4 (the old default, 0,
        // would tell it its own 10).
        let (_, r) = g
            .register(FlowId(2), &Grouping::Explicit(GroupId(1)), 1.0, 10.0, 1e9)
            .unwrap();
        assert_eq!(r.cwnd_pkts, 10.0);
        g.register(FlowId(3), &Grouping::Explicit(GroupId(1)), 1.0, 90.0, 1e9)
            .unwrap();
        let r = g
            .update(
                FlowId(2),
                TcpUpdate::new(10.0, 1e9, TcpState::CongestionAvoidance).with_in_flight(10.0),
            )
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 14.0);
        let r = g
            .update(
                FlowId(1),
                TcpUpdate::new(10.0, 1e9, TcpState::SlowStart).with_in_flight(10.0),
            )
            .unwrap()
            .unwrap();
        assert_eq!(r.cwnd_pkts, 10.0, "alone in {implicit:?}: its own window");
    }

    #[test]
    fn groups_by_grouping_and_keeps_configured_couplers() {
        let mut g = TcpGroups::new(CouplerKind::ccc(false));
        g.configure_group(GroupId(9), CouplerKind::Efcm).unwrap();
        let (gid, _) = g
            .register(FlowId(1), &Grouping::Explicit(GroupId(9)), 1.0, 10.0, 100.0)
            .unwrap();
        assert_eq!(g.group(gid).unwrap().name(), "efcm");
        let (other, _) = g
            .register(
                FlowId(2),
                &Grouping::Configured("vpn".into()),
                1.0,
                10.0,
                100.0,
            )
            .unwrap();
        assert_eq!(g.group(other).unwrap().name(), "ccc");
        g.leave(FlowId(1)).unwrap();
        g.leave(FlowId(2)).unwrap();
        assert_eq!(
            g.group(GroupId(9)).unwrap().name(),
            "efcm",
            "configured group survives emptying"
        );
        assert!(
            g.group(other).is_err(),
            "an automatic group is dropped when empty"
        );
        g.remove_group(GroupId(9)).unwrap();
        assert!(g.group_ids().is_empty());
    }

    #[test]
    fn priorities_of_very_different_magnitude_leave_no_residue() {
        for kind in [
            CouplerKind::ccc(false),
            CouplerKind::ETcp,
            CouplerKind::Efcm,
        ] {
            let mut c = kind.build();
            // No burst bound here: the test is about rounding residue in the sums.
            c.set_max_burst_pkts(1e6).unwrap();
            c.register(FlowId(1), 1e12, 10.0, 100.0).unwrap();
            c.register(FlowId(2), 1e-3, 10.0, 100.0).unwrap();
            c.register(FlowId(3), 1.0, 10.0, 100.0).unwrap();
            c.leave(FlowId(1)).unwrap();
            c.leave(FlowId(2)).unwrap();
            let r = c
                .update(
                    FlowId(3),
                    TcpUpdate::new(10.0, 100.0, TcpState::CongestionAvoidance),
                )
                .unwrap();
            let r = r.unwrap();
            assert!(
                r.cwnd_pkts > 0.0 && r.cwnd_pkts.is_finite(),
                "{}: {r:?}",
                c.name()
            );
            assert_eq!(
                r.cwnd_pkts,
                c.sum_cwnd(),
                "{}: the last connection has the whole aggregate",
                c.name()
            );
        }
    }
}
