//! Coupling glue: the FSE groups media flows and TCP flows signal through (with a delay), running
//! the code in `crates/coupling`, the code users ship. A group couples flows of one kind: media
//! flows (`media_flows`) or TCP flows (`tcp_flows::fse`). TCP coupler groups (ctrlTCP, E-TCP,
//! EFCM) live in the controller seam (`transport::coupled`): the TCP agent passes the groups to its
//! senders' hooks. Every error a coupler returns is counted by kind (none is expected: tests
//! assert so) rather than dropped.

use super::{check_priority, FseCoupling, Slab};
use crate::error::SimError;
use crate::rng::SimRng;
use coupling::fse::{Algorithm, FseGroup};
use coupling::Duration;
use rand::RngExt;

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
    /// The application changes `flow`'s priority at the FSE (seed 003 Fig. 5.13): scheduled for
    /// its time, not delayed by the signalling (the application talks to the FSE, not the flow).
    SetPriority { flow: u32, priority: f64 },
    /// A message between a TCP flow and its FSE group (`tcp_flows::fse`).
    Tcp(TcpFseMsg),
}

/// A message between a TCP flow (its index among TCP flows) and its FSE group, on its way.
#[derive(Debug)]
pub(crate) enum TcpFseMsg {
    /// UPDATE(CC_R = cwnd * MSS / SRTT) from `flow` on its way to the FSE.
    Update {
        flow: u32,
        cc_rate_bps: f64,
        rtt: Duration,
    },
    /// FSE_R on its way to `flow`, which sets cwnd = FSE_R * SRTT / MSS.
    Apply { flow: u32, rate_bps: f64 },
    /// A scheduled priority change (not delayed: the application talks to the FSE).
    SetPriority { flow: u32, priority: f64 },
}

/// The kind of flows an FSE group couples: one kind per group (a TCP flow's rate is its window
/// over its RTT, a media flow's is paced; nothing in the sources mixes them in one group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Members {
    Media,
    Tcp,
}

impl Members {
    fn name(self) -> &'static str {
        match self {
            Members::Media => "media",
            Members::Tcp => "TCP",
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct FseSignalling {
    pub groups: Vec<FseGroup>,
    /// The kind of flows coupled to each group, set by the first one (`None`: none yet).
    members: Vec<Option<Members>>,
    /// Messages in flight, by the slot their event carries.
    msgs: Slab<FseMsg>,
    /// FSE calls (register, update, leave) refused: none expected.
    pub errors: u64,
}

impl FseSignalling {
    pub fn add_group(&mut self, algorithm: Algorithm) -> usize {
        self.groups.push(FseGroup::new(algorithm));
        self.members.push(None);
        self.groups.len() - 1
    }

    /// Checks a coupling of a flow of kind `kind` (group, priority, delays) without changing
    /// anything; `name` is the parameter path (e.g. `flow[2].fse`).
    pub fn check(&self, name: &str, c: &FseCoupling, kind: Members) -> Result<(), SimError> {
        if c.group >= self.groups.len() {
            return Err(SimError::invalid(
                format!("{name}.group"),
                c.group,
                "an existing FSE group",
            ));
        }
        if let Some(other) = self.members[c.group].filter(|&m| m != kind) {
            return Err(SimError::invalid(
                format!("{name}.group"),
                format!("{} (it couples {} flows)", c.group, other.name()),
                "an FSE group of flows of one kind: TCP flows or media flows, not both",
            ));
        }
        check_priority(name, c.priority)?;
        if c.delay_max < c.delay_min {
            return Err(SimError::invalid(
                format!("{name}.delay_max"),
                c.delay_max,
                "delay_max >= delay_min",
            ));
        }
        Ok(())
    }

    /// Records that `group` couples flows of kind `kind` (after [`Self::check`] passed).
    pub fn claim(&mut self, group: usize, kind: Members) {
        self.members[group] = Some(kind);
    }

    /// Keeps a message for its delivery event; returns the slot.
    pub fn hold(&mut self, msg: FseMsg) -> u32 {
        self.msgs.insert(msg)
    }

    pub fn take(&mut self, slot: u32) -> FseMsg {
        self.msgs.take(slot)
    }
}

/// Who learns a rate from an UPDATE's outcome: every flow of the group for the active
/// algorithms (their assignments), the updating flow alone for the passive ones.
pub(crate) fn fse_replies(flow: u32, out: &coupling::fse::Outcome<'_>) -> Vec<(u32, f64)> {
    if out.assignments.is_empty() {
        vec![(flow, out.rate_bps)]
    } else {
        out.assignments
            .iter()
            .map(|a| (a.flow.0 as u32, a.rate_bps))
            .collect()
    }
}

impl FseCoupling {
    /// The signalling delay of one message (drawn if it is a range).
    pub(crate) fn draw_delay(&self, rng: &mut SimRng) -> Duration {
        if self.delay_max == self.delay_min {
            return self.delay_min;
        }
        Duration::from_nanos(
            rng.random_range(self.delay_min.as_nanos()..=self.delay_max.as_nanos()),
        )
    }
}
