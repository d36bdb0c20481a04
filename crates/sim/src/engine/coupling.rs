//! Coupling glue: the TCP coupling groups the TCP flows report to, and the FSE groups media flows
//! signal through (with a delay). Both run the code in `crates/coupling`, the code users ship.
//! Every error a coupler returns is counted by kind (none is expected: tests assert so) rather
//! than dropped.

use super::{FseCoupling, Slab};
use crate::error::SimError;
use coupling::fse::{Algorithm, FseGroup};
use coupling::tcp::{CouplerKind, Release, Response, TcpCoupler, TcpState, TcpUpdate};
use coupling::{Duration, FlowId};

/// Coupler errors by the call that returned them.
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

#[derive(Debug)]
pub(crate) struct TcpCoupling {
    groups: Vec<Box<dyn TcpCoupler>>,
    /// Scratch for the segments an ACK releases (kept for its capacity).
    releases: Vec<Release>,
    /// Scheduled priority changes: (flow, priority).
    changes: Vec<(u32, f64)>,
    pub errors: CouplingErrors,
}

impl TcpCoupling {
    pub fn new() -> Self {
        TcpCoupling {
            groups: Vec::new(),
            releases: Vec::new(),
            changes: Vec::new(),
            errors: CouplingErrors::default(),
        }
    }

    pub fn add_group(&mut self, kind: CouplerKind) -> usize {
        self.groups.push(kind.build());
        self.groups.len() - 1
    }

    pub fn coupler(&self, group: usize) -> Option<&dyn TcpCoupler> {
        self.groups.get(group).map(|g| g.as_ref())
    }

    pub fn check_group(&self, name: &str, group: usize) -> Result<(), SimError> {
        if group >= self.groups.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                group,
                "an existing coupling group",
            ));
        }
        Ok(())
    }

    pub fn set_max_burst_pkts(&mut self, group: usize, pkts: f64) -> Result<(), SimError> {
        let name = format!("group[{group}].max_burst_pkts");
        let g = self.groups.get_mut(group).ok_or_else(|| {
            SimError::invalid(name.clone(), group as f64, "an existing coupling group")
        })?;
        g.set_max_burst_pkts(pkts)
            .map_err(|_| SimError::invalid(name, pkts, "a finite number of segments >= 0"))
    }

    /// Registers `flow`; `None` (counted) if the coupler refused.
    pub fn register(
        &mut self,
        group: usize,
        flow: u32,
        priority: f64,
        cwnd: f64,
        ssthresh: f64,
    ) -> Option<Response> {
        let r = self.groups[group].register(FlowId(flow as u64), priority, cwnd, ssthresh);
        r.map_err(|_| self.errors.register += 1).ok()
    }

    /// UPDATE; `None` (counted) if the coupler refused.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        group: usize,
        flow: u32,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: TcpState,
        timeout: bool,
        in_flight_pkts: f64,
    ) -> Option<Option<Response>> {
        let u = TcpUpdate {
            cwnd_pkts,
            ssthresh_pkts,
            state,
            timeout,
            // What the sender counts against the window it is told: the answer's burst is the
            // difference.
            in_flight_pkts,
        };
        let r = self.groups[group].update(FlowId(flow as u64), u);
        r.map_err(|_| self.errors.update += 1).ok()
    }

    /// The segments of joining flows an ACK of `flow` releases (ack-clocked handover).
    pub fn handover(&mut self, group: usize, flow: u32) -> &[Release] {
        self.releases.clear();
        if self.groups[group]
            .on_ack(FlowId(flow as u64), &mut self.releases)
            .is_err()
        {
            self.errors.on_ack += 1;
        }
        &self.releases
    }

    pub fn leave(&mut self, group: usize, flow: u32) {
        if self.groups[group].leave(FlowId(flow as u64)).is_err() {
            self.errors.leave += 1;
        }
    }

    pub fn set_priority(&mut self, group: usize, flow: u32, priority: f64) {
        if self.groups[group]
            .set_priority(FlowId(flow as u64), priority)
            .is_err()
        {
            self.errors.set_priority += 1;
        }
    }

    /// Keeps a priority change for its event; returns the event's index.
    pub fn push_change(&mut self, flow: u32, priority: f64) -> u32 {
        self.changes.push((flow, priority));
        self.changes.len() as u32 - 1
    }

    pub fn change(&self, i: u32) -> (u32, f64) {
        self.changes[i as usize]
    }
}

/// A message between a media flow and its FSE, on its way.
#[derive(Debug)]
pub(crate) enum FseMsg {
    /// UPDATE(cc_rate) from `flow` on its way to the FSE.
    Update {
        flow: u32,
        cc_rate_bps: f64,
        desired_rate_bps: f64,
        rtt: Duration,
    },
    /// A rate from the FSE on its way to `flow`.
    Apply { flow: u32, rate_bps: f64 },
}

#[derive(Debug, Default)]
pub(crate) struct FseSignalling {
    pub groups: Vec<FseGroup>,
    /// Messages in flight, by the slot their event carries.
    msgs: Slab<FseMsg>,
    /// FSE calls (register, update, leave) refused: none expected.
    pub errors: u64,
}

impl FseSignalling {
    pub fn add_group(&mut self, algorithm: Algorithm) -> usize {
        self.groups.push(FseGroup::new(algorithm));
        self.groups.len() - 1
    }

    pub fn check(&self, name: &str, c: &FseCoupling) -> Result<(), SimError> {
        if c.group >= self.groups.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                c.group,
                "an existing FSE group",
            ));
        }
        Ok(())
    }

    /// Keeps a message for its delivery event; returns the slot.
    pub fn hold(&mut self, msg: FseMsg) -> u32 {
        self.msgs.insert(msg)
    }

    pub fn take(&mut self, slot: u32) -> FseMsg {
        self.msgs.take(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_calls_are_counted_by_kind_and_change_nothing() {
        let mut c = TcpCoupling::new();
        let g = c.add_group(CouplerKind::Ccc { handover: true });
        assert!(c.register(g, 0, 1.0, 10.0, 1e9).is_some());
        // Flow 1 never registered: every call about it is refused, and counted.
        assert_eq!(
            c.update(g, 1, 10.0, 1e9, TcpState::CongestionAvoidance, false, 10.0),
            None
        );
        assert!(c.handover(g, 1).is_empty());
        c.leave(g, 1);
        c.set_priority(g, 1, 2.0);
        assert!(
            c.register(g, 0, 1.0, 10.0, 1e9).is_none(),
            "a second registration"
        );
        let e = c.errors;
        assert_eq!(
            (e.register, e.update, e.on_ack, e.leave, e.set_priority),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(e.total(), 5);
        assert_eq!(c.coupler(g).unwrap().len(), 1);
    }
}
