//! The traffic agent (issue 15): see the crate docs. HELPER B FILLS THIS IN.
//!
//! Contract with the orchestrator (python/macroflow/linux.py), fixed:
//! - `main(config_path)`: reads [`Config`] (JSON); starts the sinks (listening on all addresses)
//!   and creates `ready_path` (an empty file) once they listen; every flow starts at
//!   `epoch_ns + start_s` (CLOCK_MONOTONIC, shared by all namespaces); everything stops at
//!   `epoch_ns + duration_s`; then writes [`Report`] (JSON, atomically: a temporary file renamed)
//!   to `report_path` and returns Ok. SIGTERM/SIGINT stop it early (it still writes its report).
//!   A configuration it cannot honour (a congestion control the kernel refuses, a device that does
//!   not exist) is an Err naming the field, before `ready_path` is created.
//! - Times in the report are seconds since the epoch.

use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub epoch_ns: u64,
    pub duration_s: f64,
    /// 0: no time series.
    pub sample_interval_s: f64,
    pub ready_path: String,
    pub report_path: String,
    pub sink: Option<SinkConfig>,
    #[serde(default)]
    pub tcp: Vec<TcpFlowConfig>,
    #[serde(default)]
    pub udp: Vec<UdpFlowConfig>,
    #[serde(default)]
    pub web: Vec<WebConfig>,
    /// Root qdiscs of this namespace's interfaces: final statistics of each; sampled at every
    /// interval when `sample`.
    #[serde(default)]
    pub qdiscs: Vec<QdiscConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    pub tcp_port: u16,
    pub udp_port: u16,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpFlowConfig {
    pub flow: u32,
    /// IPv4 address of the receiver.
    pub dst: String,
    pub port: u16,
    /// Kernel congestion control name (TCP_CONGESTION), e.g. "reno", "cubic", "bbr".
    pub cc: String,
    pub start_s: f64,
    /// Bytes to send, then close; bulk until the end when absent.
    pub size_bytes: Option<u64>,
    pub dscp: u8,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpFlowConfig {
    pub flow: u32,
    pub dst: String,
    pub port: u16,
    pub start_s: f64,
    /// "cbr" (rate_bps) or "self_similar" (load_bps, or the generator's default load when
    /// absent): the simulator's generators (sim::traffic), seeded with `seed`.
    pub kind: String,
    pub rate_bps: Option<f64>,
    pub load_bps: Option<f64>,
    pub dscp: u8,
    pub seed: u64,
}

/// A web-like workload (sim::traffic::WebWorkload): flows drawn with `seed`, each a sized TCP
/// transfer to `dst`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    pub workload: u32,
    pub dst: String,
    pub port: u16,
    pub load_bps: f64,
    pub mean_size_bytes: f64,
    pub pareto_shape: f64,
    pub start_s: f64,
    pub end_s: f64,
    pub cc: String,
    pub seed: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QdiscConfig {
    pub link: u32,
    pub dev: String,
    pub sample: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// File flows and web flows, in start order within each.
    pub tcp: Vec<TcpFlowReport>,
    pub tcp_samples: TcpSamples,
    pub sink_tcp: Vec<SinkConnReport>,
    pub udp: Vec<UdpSentReport>,
    pub sink_udp: Vec<UdpRecvReport>,
    pub qdisc_samples: QdiscSamples,
    pub qdiscs: Vec<QdiscReport>,
    /// Sampling instants missed or taken more than half an interval late (host overloaded).
    pub late_samples: u64,
    /// What went wrong without stopping the agent (a connect refused, a write error), each once.
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TcpFlowReport {
    /// File flows: their `flow`; web flows: None (they have workload and index).
    pub flow: Option<u32>,
    pub workload: Option<u32>,
    pub index: Option<u32>,
    pub cc: String,
    pub local_port: u16,
    pub start_s: f64,
    pub size_bytes: Option<u64>,
    /// When connect() returned.
    pub connected_s: Option<f64>,
    pub bytes_written: u64,
    /// A sized flow: when the peer closed after receiving everything.
    pub finished_s: Option<f64>,
    pub error: Option<String>,
    /// TCP_INFO just before the socket was closed.
    pub info: Option<TcpInfo>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TcpInfo {
    pub ca_state: u8,
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: u32,
    pub total_retrans: u32,
    pub segs_out: u32,
    pub data_segs_out: u32,
    pub bytes_acked: u64,
    pub bytes_retrans: u64,
    pub delivered: u32,
    pub lost: u32,
    pub snd_mss: u32,
}

/// Column arrays, one row per connected flow per sampling instant.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TcpSamples {
    pub t_s: Vec<f64>,
    /// Index into `Report::tcp`.
    pub conn: Vec<u32>,
    pub cwnd_pkts: Vec<u32>,
    pub ssthresh_pkts: Vec<u32>,
    pub ca_state: Vec<u8>,
    pub bytes_acked: Vec<u64>,
    pub srtt_us: Vec<u32>,
    pub total_retrans: Vec<u32>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SinkConnReport {
    pub peer_addr: String,
    pub peer_port: u16,
    pub bytes: u64,
    pub first_s: Option<f64>,
    pub last_s: Option<f64>,
    /// The peer closed (a sized flow completed).
    pub eof: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UdpSentReport {
    pub flow: u32,
    pub pkts: u64,
    pub bytes: u64,
    pub send_errors: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UdpRecvReport {
    pub flow: u32,
    pub pkts: u64,
    pub bytes: u64,
    /// Packets that arrived with a sequence number below one already seen.
    pub reordered_pkts: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct QdiscSamples {
    pub t_s: Vec<f64>,
    pub link: Vec<u32>,
    pub qlen_pkts: Vec<u32>,
    pub backlog_bytes: Vec<u32>,
    pub drops: Vec<u32>,
    pub sent_pkts: Vec<u64>,
    pub sent_bytes: Vec<u64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct QdiscReport {
    pub link: u32,
    pub dev: String,
    /// The root qdisc's kind ("tbf", "htb", ...).
    pub kind: String,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub drops: u32,
    pub overlimits: u32,
    pub requeues: u32,
    pub qlen_pkts: u32,
    pub backlog_bytes: u32,
}

pub fn main(config_path: &Path) -> Result<(), String> {
    let _ = config_path;
    Err("agent: not built yet".into())
}
