//! macroflow's packet-level discrete-event simulator. Flows are coupled through `crates/coupling`,
//! the same code users ship.
//!
//! - [`engine`]: event loop, packets through links, TCP endpoints, FSE signalling, sampling.
//! - [`net`]: nodes, links, queues, routing (shortest paths, ECMP), topology builders.
//! - [`transport`]: TCP sender/receiver and congestion controllers (coupled ones call their group
//!   from their hooks: `transport::coupled`).
//! - [`stats`]: summaries and time series of a run.
//! - [`media`], [`traffic`]: what applications send (media sources; UDP and web workloads).
//! - [`pcap`]: captures of chosen links.

pub mod engine;
pub mod error;
pub mod media;
pub mod net;
pub mod packet;
pub mod pcap;
pub mod rng;
pub mod stats;
pub mod traffic;
pub mod transport;

pub use engine::{Sim, TcpFlowConfig};
pub use error::SimError;
