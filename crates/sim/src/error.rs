//! Errors of building and running a simulation. Each names the parameter at fault.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum SimError {
    /// A parameter outside its domain: `name` is its path (e.g. `link[3].rate_bps`).
    InvalidParameter {
        name: String,
        value: String,
        expected: &'static str,
    },
    UnknownNode {
        name: String,
        node: String,
    },
    UnknownFlow {
        name: String,
        flow: u32,
    },
    NoRoute {
        from: String,
        to: String,
    },
    Coupling(coupling::Error),
}

impl SimError {
    pub fn invalid(
        name: impl Into<String>,
        value: impl fmt::Display,
        expected: &'static str,
    ) -> Self {
        SimError::InvalidParameter {
            name: name.into(),
            value: value.to_string(),
            expected,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::InvalidParameter {
                name,
                value,
                expected,
            } => {
                write!(f, "invalid {name}: got {value}, expected {expected}")
            }
            SimError::UnknownNode { name, node } => write!(f, "{name}: unknown node {node}"),
            SimError::UnknownFlow { name, flow } => write!(f, "{name}: unknown flow {flow}"),
            SimError::NoRoute { from, to } => write!(f, "no route from node {from} to node {to}"),
            SimError::Coupling(e) => write!(f, "coupling: {e}"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<coupling::Error> for SimError {
    fn from(e: coupling::Error) -> Self {
        SimError::Coupling(e)
    }
}
