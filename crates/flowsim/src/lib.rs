//! Flow-level, steady-state model of networks whose routers enforce link-local max-min fairness
//! by dropping (seed 002: fire-hose senders, dead and zombie packets).
//!
//! - [`network`]: a directed graph with capacities, flows on shortest or given routes.
//! - [`brickwall`]: the flow through the network for given demands (§4.2).
//! - [`maxmin`]: `clamp`, the optimal max-min assignment (Fig. 5), its literal oracle, a check.
//! - [`accounting`]: dead and zombie flow per edge and per flow (§4.1.1).
//! - [`senders`]: sender models iterated to a fixed point (Fig. 6, Eqs. 1–5).
//! - [`lossload`]: Williamson and Cheriton's loss-load routers and senders (§9).
//!
//! Rates and capacities are unit-less flow units, as in the paper. No I/O, no clock.

// Parallel per-hop, per-link and per-flow arrays are indexed together throughout.
#![allow(clippy::needless_range_loop)]

pub mod accounting;
pub mod brickwall;
pub mod lossload;
pub mod maxmin;
pub mod network;
pub mod senders;

pub use accounting::{account, Accounting};
pub use brickwall::{Brickwall, FlowState};
pub use maxmin::{check_max_min, clamp, clamp_oracle, jain, NotMaxMin};
pub use network::{Error, Flows, Link, LinkId, Network, NodeId};
pub use senders::{fixed_point, FixedPoint, SenderModel};
