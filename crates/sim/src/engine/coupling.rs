//! Coupling glue: the FSE groups media flows signal through (with a delay), running the code in
//! `crates/coupling`, the code users ship. TCP coupling lives in the controller seam
//! (`transport::coupled`): the TCP agent passes the groups to its senders' hooks. Every error a
//! coupler returns is counted by kind (none is expected: tests assert so) rather than dropped.

use super::{FseCoupling, Slab};
use crate::error::SimError;
use coupling::fse::{Algorithm, FseGroup};
use coupling::Duration;

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
