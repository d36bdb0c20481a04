//! One error type for the crate: every bad input is rejected before any state changes.

use crate::group::{FlowId, GroupId};
use core::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A number outside its domain (NaN, infinite, negative, zero priority, ...).
    InvalidValue {
        field: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// The flow (or connection) id is not registered.
    UnknownFlow(FlowId),
    /// The flow (or connection) id is already registered.
    DuplicateFlow(FlowId),
    /// The group id does not exist.
    UnknownGroup(GroupId),
    /// The group's algorithm cannot be changed while flows are registered in it.
    GroupNotEmpty(GroupId),
    /// An input the chosen algorithm needs was not given (e.g. the RTT for the conservative FSE).
    MissingInput {
        field: &'static str,
        algorithm: &'static str,
    },
    /// Time passed in went backwards relative to what the group has already seen.
    TimeWentBackwards { now_ns: u64, last_ns: u64 },
    /// The operation is not meaningful for this coupler (e.g. ack-clocked handover on EFCM).
    Unsupported {
        operation: &'static str,
        coupler: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidValue {
                field,
                value,
                expected,
            } => {
                write!(f, "invalid {field}: got {value}, expected {expected}")
            }
            Error::UnknownFlow(id) => write!(f, "unknown flow {id}"),
            Error::DuplicateFlow(id) => write!(f, "flow {id} is already registered"),
            Error::UnknownGroup(id) => write!(f, "unknown flow group {id}"),
            Error::GroupNotEmpty(id) => {
                write!(f, "flow group {id} has registered flows; its algorithm can only be set while it is empty")
            }
            Error::MissingInput { field, algorithm } => {
                write!(f, "{algorithm} needs {field}, which was not given")
            }
            Error::TimeWentBackwards { now_ns, last_ns } => {
                write!(f, "time went backwards: now = {now_ns} ns is before the last time seen, {last_ns} ns")
            }
            Error::Unsupported { operation, coupler } => {
                write!(f, "{coupler} does not support {operation}")
            }
        }
    }
}

impl std::error::Error for Error {}
