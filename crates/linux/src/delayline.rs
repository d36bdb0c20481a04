//! The userspace delay line (issue 15): see the crate docs. HELPER A FILLS THIS IN.
//!
//! Contract with the orchestrator (python/macroflow/linux.py), fixed:
//! - `main(config_path)`: reads [`Config`] (JSON), opens every wire, then creates
//!   `config.ready_path` (an empty file) once all sockets are bound and threads are running, and
//!   runs until SIGTERM or SIGINT; then writes [`Report`] (JSON) to `config.report_path`
//!   (atomically: a temporary file renamed) and returns Ok. Errors at start return Err with a
//!   message naming the wire and the interface.

use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub wires: Vec<WireConfig>,
    pub ready_path: String,
    pub report_path: String,
    /// A frame sent later than its due time by more than this counts as late.
    pub late_threshold_ns: u64,
}

/// One link: interfaces `a` and `b` of this namespace bridged both ways.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireConfig {
    pub name: String,
    pub a: String,
    pub b: String,
    pub delay_ab_ns: u64,
    pub delay_ba_ns: u64,
    /// Bernoulli loss probability per frame, each direction.
    pub loss_ab: f64,
    pub loss_ba: f64,
    pub seed: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub wires: Vec<WireReport>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WireReport {
    pub name: String,
    pub ab: DirectionStats,
    pub ba: DirectionStats,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DirectionStats {
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// Dropped on purpose (Bernoulli loss).
    pub lost_pkts: u64,
    /// Frames the delay line failed to carry: the socket's ring overflowed (PACKET_STATISTICS
    /// tp_drops), a send failed, a frame was truncated. Must be 0 in a healthy run.
    pub own_drops_pkts: u64,
    /// Frames sent out of arrival order (must be 0: checked, not assumed).
    pub reordered_pkts: u64,
    /// Sent more than late_threshold_ns after their due time.
    pub late_pkts: u64,
    pub max_late_ns: u64,
    pub mean_late_ns: f64,
    pub max_held_pkts: u64,
}

pub fn main(config_path: &Path) -> Result<(), String> {
    let _ = config_path;
    Err("delayline: not built yet".into())
}
