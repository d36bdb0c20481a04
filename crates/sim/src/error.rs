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
    /// A spec that could not be read (a queue spec's unknown kind or key, a value of the wrong
    /// type): `path` is where (e.g. `queue.inner.p`), `message` the problem.
    InvalidSpec {
        path: String,
        message: String,
    },
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

    pub fn spec(path: impl Into<String>, message: impl Into<String>) -> Self {
        SimError::InvalidSpec {
            path: path.into(),
            message: message.into(),
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
            SimError::InvalidSpec { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<coupling::Error> for SimError {
    fn from(e: coupling::Error) -> Self {
        SimError::Coupling(e)
    }
}
