//! The traffic agent (issue 15): one per host or router namespace of a Linux testbed run.
//!
//! Contract with the orchestrator (python/macroflow/linux.py), fixed:
//! - `main(config_path)`: reads [`Config`] (JSON); starts the sinks (listening on all addresses)
//!   and creates `ready_path` (an empty file) once they listen; every flow starts at
//!   `epoch_ns + start_s` (CLOCK_MONOTONIC, shared by all namespaces); everything stops at
//!   `epoch_ns + duration_s`; then writes [`Report`] (JSON, atomically: a temporary file renamed)
//!   to `report_path` and returns Ok. SIGTERM/SIGINT stop it early (it still writes its report).
//!   A configuration it cannot honour (a congestion control the kernel refuses, a device that does
//!   not exist, a port in use) is an Err naming the field, before `ready_path` is created.
//! - Times in the report are seconds since the epoch.
//!
//! How it runs (one thread each unless said): the TCP sink (plus one thread per connection), the
//! UDP sink, one thread per UDP flow, a starter that spawns each TCP flow's thread (file flows
//! and web flows alike) just before its start, and the sampler. Every thread sleeps on absolute
//! CLOCK_MONOTONIC instants and looks at the stop flag at least every 20 ms; all of them are
//! joined before the report is written, and whatever went wrong is in `errors` (and a flow's
//! `error`), never dropped.
//!
//! What the orchestrator should know:
//! - Start every sink agent and wait for its ready file before the epoch: a TCP flow whose sink
//!   is not listening fails at once (connect refused: the flow's `error` and a line in `errors`;
//!   no retry, since a retry would move the flow's start), and a UDP flow sends into the void
//!   (unconnected socket: nothing at the sender says so; the sink's counts show it).
//! - A TCP sink connection is matched to its flow by the sender's `local_port` (`peer_port` at
//!   the sink). Web flows are `tcp` entries with `workload` and `index` (the flow's position
//!   among the workload's draws) and `flow` None.
//! - The kernel caches TCP metrics (ssthresh, RTT) per destination within a namespace: set
//!   `net.ipv4.tcp_no_metrics_save=1` in every namespace, or the web flows (all to one
//!   destination) and repeated runs inherit each other's state, which the simulator has no
//!   notion of. The report's `sysctls` records this and the other settings that matter.
//! - Qdisc counters are the kernel's, cumulative since the qdisc was created: a qdisc made fresh
//!   for the run starts at 0, otherwise subtract `qdiscs_at_start`.
//! - Signals: SIGTERM stops the agent early, its report written and `_linux_main` returning
//!   normally; SIGINT does too, and then Python's own SIGINT handler, which the agent keeps,
//!   raises KeyboardInterrupt once `_linux_main` has returned. After the agent returns, SIGTERM
//!   terminates the process as by default.
//! - The sinks count what they read before the end; TCP_INFO's `bytes_acked` counts the SYN (and
//!   the FIN), so a completed sized flow of N bytes shows N at the sink and N + 2 acked.
//!
//! Fields added to the contract's types (the orchestrator may ignore them):
//! [`UdpFlowConfig::pkt_bytes`] and [`UdpFlowConfig::end_s`] (optional); in the report, [`Report::ready_s`],
//! [`Report::stopped_by_signal`], [`Report::web_flows_after_end`],
//! [`Report::sink_udp_short_pkts`], [`Report::sink_udp_socket_drops`], [`Report::sysctls`],
//! [`Report::qdiscs_at_start`], [`TcpFlowReport::all_written_s`], the [`TcpInfo`] fields after
//! `snd_mss`, the [`TcpSamples`] columns after `total_retrans`, [`SinkConnReport::accepted_s`]
//! and `eof_s`, the [`UdpSentReport`] fields after `send_errors`, the [`UdpRecvReport`] fields
//! after `reordered_pkts`, and the [`QdiscSamples`] columns `overlimits` and `requeues`.

mod ccc;
mod clock;
mod media;
mod plan;
mod qdisc;
mod sampler;
mod sink;
mod tcp;
mod tcpinfo;
mod udp;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

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
    /// Added (issue 21): rate-controlled media flows (`agent::media`).
    #[serde(default)]
    pub media: Vec<MediaFlowConfig>,
    /// Root qdiscs of this namespace's interfaces: final statistics of each; sampled at every
    /// interval when `sample`.
    #[serde(default)]
    pub qdiscs: Vec<QdiscConfig>,
    /// The id of macroflow_ccc's `sock_prio` map, when some flow is coupled.
    #[serde(default)]
    pub ccc_map_id: Option<u32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    pub tcp_port: u16,
    pub udp_port: u16,
    /// Added (issue 21): the media reflector's port (absent: none).
    #[serde(default)]
    pub media_port: Option<u16>,
}

/// A media flow (issue 21): the simulator's controller over real UDP to a sink's media port.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaFlowConfig {
    pub flow: u32,
    pub dst: String,
    pub port: u16,
    /// nada, gcc, tfrc or rap (`sim::transport::controllers`).
    pub controller: String,
    /// IP size of a full packet.
    pub packet_bytes: u32,
    /// "greedy" or "app_limited" (at `rate_bps`).
    pub source: String,
    pub rate_bps: Option<f64>,
    /// (start, end) seconds from the epoch in which the application sends nothing.
    #[serde(default)]
    pub pauses: Vec<[f64; 2]>,
    pub start_s: f64,
    pub dscp: u8,
    /// The reverse path's propagation delay: the receiver half's clock runs this far behind.
    pub feedback_delay_s: f64,
    /// The path's propagation RTT (the conservative FSE's timer when the controller has none).
    pub base_rtt_s: f64,
    /// Its seat in an FSE group served by macroflowd.
    #[serde(default)]
    pub fse: Option<FseSeatConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FseSeatConfig {
    /// macroflowd's socket.
    pub socket: String,
    /// The group's label (a configured group, RFC 8699 sec. 5.1).
    pub group: String,
    /// The group's algorithm: active, conservative_active, simple_passive, passive.
    pub algorithm: String,
    pub priority: f64,
    #[serde(default)]
    pub changes: Vec<PriorityChangeConfig>,
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
    /// Its seat in a coupling group (cc must then be "macroflow_ccc").
    #[serde(default)]
    pub ccc: Option<CccSeatConfig>,
}

/// A coupled flow's group, priority and handover setting, and its priority changes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CccSeatConfig {
    /// The group number (>= 1), the same for every flow of one scenario group.
    pub group: u32,
    pub priority: f64,
    /// Ack-clocked handover in the group (decided by the flow that creates it).
    pub handover: bool,
    #[serde(default)]
    pub changes: Vec<PriorityChangeConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityChangeConfig {
    pub at_s: f64,
    pub priority: f64,
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
    /// Added: a cbr flow's IP packet size in bytes (default 1000, the simulator's
    /// `add_udp_flow` default; at least 40). Self-similar flows draw their sizes.
    #[serde(default)]
    pub pkt_bytes: Option<u32>,
    /// Added: when the flow stops sending, seconds from the epoch (absent: the end of the run).
    #[serde(default)]
    pub end_s: Option<f64>,
}

/// A web-like workload (sim::traffic::WebWorkload): flows drawn with `seed`, each a sized TCP
/// transfer to `dst` (DSCP 0, as the simulator's web flows). Flows are drawn over
/// `[start_s, end_s)` as the simulator draws them; those starting at or after the end of the run
/// are not run (counted in [`Report::web_flows_after_end`]).
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
    /// Added (issue 21): media flows sent from here, and what this sink's reflector saw.
    pub media: Vec<MediaFlowReport>,
    pub sink_media: Vec<MediaRecvReport>,
    pub qdisc_samples: QdiscSamples,
    /// The qdiscs' counters at the end. The kernel's counters are cumulative since the qdisc was
    /// created: subtract `qdiscs_at_start` (or a qdisc sample) when the qdisc is older than the run.
    pub qdiscs: Vec<QdiscReport>,
    /// Added: every `qdiscs` entry's counters when the agent checked its configuration, before
    /// `ready_path` (each names its link and device, as in `qdiscs`).
    pub qdiscs_at_start: Vec<QdiscReport>,
    /// Sampling instants missed or taken more than half an interval late (host overloaded).
    pub late_samples: u64,
    /// What went wrong without stopping the agent (a connect refused, a write error), each once.
    pub errors: Vec<String>,
    /// Added: when `ready_path` was created (negative: before the epoch, as it should be).
    pub ready_s: f64,
    /// Added: a SIGTERM or SIGINT ended the run before `duration_s`.
    pub stopped_by_signal: bool,
    /// Added: web flows drawn (over the workload's `[start_s, end_s)`) that start at or after the
    /// end of the run, so are not in `tcp`.
    pub web_flows_after_end: u64,
    /// Added: datagrams at the UDP sink too short for the agent's header (not counted per flow).
    pub sink_udp_short_pkts: u64,
    /// Added: datagrams the kernel dropped at the UDP sink's socket (its receive buffer was full:
    /// the agent's fault, not the path's); None without a sink or when the kernel does not say.
    pub sink_udp_socket_drops: Option<u32>,
    /// Added: the namespace's TCP settings that change what a run measures (net.ipv4.tcp_*
    /// among them tcp_no_metrics_save, tcp_ecn, tcp_wmem/rmem), read at the start.
    pub sysctls: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TcpFlowReport {
    /// File flows: their `flow`; web flows: None (they have workload and index).
    pub flow: Option<u32>,
    /// Web flows: `WebConfig::workload`, and `index`, the flow's position among the flows the
    /// workload drew (in start order, from 0).
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
    /// Added: a sized flow: when its last byte was written (handed to the kernel) and the FIN
    /// requested.
    pub all_written_s: Option<f64>,
}

/// TCP_INFO (include/uapi/linux/tcp.h), in the kernel's units: windows in segments, times in
/// µs, rates in bytes/s. `snd_ssthresh` is 2147483647 while the flow is in its first slow start.
/// `bytes_acked` is the kernel's: it counts the SYN's sequence number, and the FIN's once that is
/// acknowledged, so a connection that delivered N data bytes shows N + 1 (N + 2 after its FIN).
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
    /// Added: the TCP state (1 ESTABLISHED, 4 FIN_WAIT1, 5 FIN_WAIT2, 7 CLOSE, 8 CLOSE_WAIT...).
    pub state: u8,
    /// Added: data bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Added: segments in flight (sent, not acknowledged).
    pub unacked: u32,
    /// Added: retransmitted segments in flight.
    pub retrans: u32,
    /// Added: bytes written but not yet sent.
    pub notsent_bytes: u32,
    pub pacing_rate_bytes_per_s: u64,
    pub delivery_rate_bytes_per_s: u64,
    /// Added: time busy sending, and the part of it limited by the receiver's window or by the
    /// sender's buffer (a sndbuf-limited flow is not measuring its congestion control).
    pub busy_time_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
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
    /// Added columns.
    pub rttvar_us: Vec<u32>,
    pub unacked_pkts: Vec<u32>,
    pub bytes_retrans: Vec<u64>,
    pub delivery_rate_bytes_per_s: Vec<u64>,
    pub pacing_rate_bytes_per_s: Vec<u64>,
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
    /// Added: when the connection was accepted, and when its EOF arrived.
    pub accepted_s: f64,
    pub eof_s: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UdpSentReport {
    pub flow: u32,
    /// Packets the socket accepted, and their IP sizes (payload + 28) summed.
    pub pkts: u64,
    pub bytes: u64,
    pub send_errors: u64,
    /// Added: packets sent more than 1 ms after their due time (the host was busy), and the
    /// largest and mean lateness.
    pub late_pkts: u64,
    pub max_late_s: f64,
    pub mean_late_s: f64,
    /// Added: packets the source drew smaller than 40 bytes, sent at 40 (the agent's header).
    pub enlarged_pkts: u64,
}

/// A media flow's sender side (`agent::media`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct MediaFlowReport {
    pub flow: u32,
    pub sent_pkts: u64,
    /// IP sizes.
    pub sent_bytes: u64,
    /// As the reflector's reports tell it.
    pub received_pkts: u64,
    pub received_bytes: u64,
    pub owd_sum_s: f64,
    pub send_errors: u64,
    /// Datagrams at the sender that were not its reports.
    pub bad_reports: u64,
    /// UPDATE calls answered by macroflowd, and calls that failed.
    pub fse_updates: u64,
    pub fse_errors: u64,
    /// Rates macroflowd pushed and the flow used; pushes older than a reply it was waiting for
    /// (superseded by the reply's rate).
    pub fse_pushes: u64,
    pub fse_pushes_superseded: u64,
    pub error: Option<String>,
    /// (t_s, rate_bps, cc_rate_bps) at every sampling instant.
    pub samples: Vec<(f64, f64, f64)>,
    /// Bytes received by each sampling instant (by receive time), one per sample.
    pub received_series: Vec<u64>,
}

/// A media flow at the sink's reflector.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MediaRecvReport {
    pub flow: u32,
    pub pkts: u64,
    pub bytes: u64,
    /// Reports that could not be sent back.
    pub report_errors: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct UdpRecvReport {
    pub flow: u32,
    pub pkts: u64,
    /// IP sizes (payload + 28), as the sender counts them.
    pub bytes: u64,
    /// Packets that arrived with a sequence number below one already seen.
    pub reordered_pkts: u64,
    /// Added: first and last arrival; the highest sequence number seen (the sender numbers its
    /// packets from 0, so `max_seq + 1 - pkts` were lost or are late, short of reordering).
    pub first_s: Option<f64>,
    pub last_s: Option<f64>,
    pub max_seq: Option<u64>,
    /// Added: one-way delay from the send time in the header (packets of at least 48 bytes).
    pub delay_mean_s: Option<f64>,
    pub delay_min_s: Option<f64>,
    pub delay_max_s: Option<f64>,
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
    /// Added columns.
    pub overlimits: Vec<u32>,
    pub requeues: Vec<u32>,
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

/// Reads the configuration, runs the agent, writes the report.
pub fn main(config_path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(config_path)
        .map_err(|e| format!("agent: reading {}: {e}", config_path.display()))?;
    let cfg: Config = serde_json::from_str(&text)
        .map_err(|e| format!("agent: {}: {e}", config_path.display()))?;
    run(&cfg).map(drop)
}

/// The namespace's settings that shape TCP's behaviour, as `net.ipv4.name` = value.
const SYSCTLS: &[&str] = &[
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_available_congestion_control",
    "net/ipv4/tcp_no_metrics_save",
    "net/ipv4/tcp_ecn",
    "net/ipv4/tcp_sack",
    "net/ipv4/tcp_timestamps",
    "net/ipv4/tcp_window_scaling",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_slow_start_after_idle",
    "net/ipv4/tcp_autocorking",
    "net/ipv4/tcp_limit_output_bytes",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/default_qdisc",
];

fn sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|p| {
            let v = std::fs::read_to_string(format!("/proc/sys/{p}")).ok()?;
            Some((
                p.replace('/', "."),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            ))
        })
        .collect()
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, renamed over it.
fn write_atomic(path: &str, bytes: &[u8]) -> Result<(), String> {
    let tmp = format!("{path}.tmp{}", std::process::id());
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("agent: writing the report {path}: {e}")
        })
}

/// Spawns a named thread; if the system has no thread for it, records the error and returns
/// None (the caller reports what the thread would have).
fn spawn<T: Send + 'static>(
    name: &str,
    r: &clock::Run,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<std::thread::JoinHandle<T>> {
    match std::thread::Builder::new().name(name.into()).spawn(f) {
        Ok(h) => Some(h),
        Err(e) => {
            r.error(format!("{name}: no thread: {e}"));
            None
        }
    }
}

/// Joins a thread spawned by [`spawn`]; a panic or a missing thread is recorded and gives None.
fn join<T>(name: &str, r: &clock::Run, h: Option<std::thread::JoinHandle<T>>) -> Option<T> {
    match h?.join() {
        Ok(v) => Some(v),
        Err(_) => {
            r.error(format!("{name}: the thread panicked"));
            None
        }
    }
}

/// Runs the agent as [`main`] does, from a configuration in memory; returns the report it wrote.
pub fn run(cfg: &Config) -> Result<Report, String> {
    // The handlers first: a SIGTERM from the moment the orchestrator may see the ready file on
    // must end the run with a report.
    let signals = clock::SignalGuard::new()?;
    let mut plan = plan::build(cfg)?;
    let sinks = match &cfg.sink {
        None => None,
        Some(s) => {
            let tcp = sink::listen_tcp(s.tcp_port).map_err(|e| {
                format!(
                    "agent: sink.tcp_port: cannot listen on 0.0.0.0:{}: {e}",
                    s.tcp_port
                )
            })?;
            let udp = sink::bind_udp(s.udp_port).map_err(|e| {
                format!(
                    "agent: sink.udp_port: cannot bind 0.0.0.0:{}: {e}",
                    s.udp_port
                )
            })?;
            let media = match s.media_port {
                None => None,
                Some(p) => Some(sink::bind_udp(p).map_err(|e| {
                    format!("agent: sink.media_port: cannot bind 0.0.0.0:{p}: {e}")
                })?),
            };
            Some((tcp, udp, media))
        }
    };
    // UDP senders' sockets too (a refused option is a configuration error, not a run error).
    let mut udp_socks = Vec::with_capacity(plan.udp.len());
    for (i, j) in plan.udp.iter().enumerate() {
        udp_socks.push(
            udp::open(j.cfg.dscp)
                .map_err(|e| format!("agent: udp[{i}]: cannot open a UDP socket: {e}"))?,
        );
    }
    let mut media_socks = Vec::with_capacity(plan.media.len());
    for (i, j) in plan.media.iter().enumerate() {
        media_socks.push(
            media::open(j.cfg.dscp)
                .map_err(|e| format!("agent: media[{i}]: cannot open a UDP socket: {e}"))?,
        );
    }
    let mut report = Report {
        sysctls: sysctls(),
        web_flows_after_end: plan.web_flows_after_end,
        qdiscs_at_start: std::mem::take(&mut plan.qdiscs_at_start),
        ..Default::default()
    };
    std::fs::File::create(&cfg.ready_path)
        .map_err(|e| format!("agent: ready_path: cannot create {}: {e}", cfg.ready_path))?;
    let r = clock::Run::new(plan.epoch_ns, plan.end_ns, signals.flag());
    report.ready_s = r.now_s();
    if report.ready_s > 0.0 {
        r.error(format!(
            "ready {:.3} s after the epoch: what was due before then starts late",
            report.ready_s
        ));
    }

    let plan::Plan {
        interval_ns,
        tcp: tcp_jobs,
        udp: udp_jobs,
        media: media_jobs,
        qdiscs,
        netlink,
        seats,
        changes,
        epoch_ns,
        ..
    } = plan;
    let changes_h = match seats {
        Some(seats) if !changes.is_empty() => {
            let r1 = r.clone();
            spawn("ccc-priorities", &r, move || {
                ccc::run_changes(seats, changes, epoch_ns, r1)
            })
        }
        _ => None,
    };
    let n_tcp = tcp_jobs.len();
    let registry: tcp::Registry = Arc::new(Mutex::new(vec![None; n_tcp]));

    let (sink_tcp_h, sink_udp_h, sink_media_h) = match sinks {
        Some((t, u, m)) => {
            let (r1, r2, r3) = (r.clone(), r.clone(), r.clone());
            (
                spawn("sink-tcp", &r, move || sink::run_tcp(t, r1)),
                spawn("sink-udp", &r, move || sink::run_udp(u, r2)),
                m.and_then(|m| spawn("sink-media", &r, move || media::run_reflector(m, r3))),
            )
        }
        None => (None, None, None),
    };
    let media_flows: Vec<u32> = media_jobs.iter().map(|j| j.cfg.flow).collect();
    let media_h: Vec<_> = media_jobs
        .into_iter()
        .zip(media_socks)
        .enumerate()
        .map(|(i, (j, s))| {
            let r1 = r.clone();
            spawn(&format!("media-{i}"), &r, move || media::run(j, s, r1))
        })
        .collect();
    let udp_flows: Vec<u32> = udp_jobs.iter().map(|j| j.cfg.flow).collect();
    let udp_h: Vec<_> = udp_jobs
        .into_iter()
        .zip(udp_socks)
        .enumerate()
        .map(|(i, (j, s))| {
            let r1 = r.clone();
            spawn(&format!("udp-{i}"), &r, move || udp::run(j, s, r1))
        })
        .collect();
    let tcp_templates: Vec<TcpFlowReport> = tcp_jobs.iter().map(|j| j.report.clone()).collect();
    let tcp_h = {
        let (r1, reg) = (r.clone(), Arc::clone(&registry));
        spawn("tcp-starter", &r, move || tcp::run_all(tcp_jobs, reg, r1))
    };
    // The qdisc targets are shared by the sampler and the final statistics.
    let targets: Vec<(u32, String, u32, String)> = qdiscs
        .iter()
        .map(|q| (q.link, q.dev.clone(), q.ifindex, q.name.clone()))
        .collect();
    let (sampler_h, mut netlink) = if interval_ns > 0 {
        let (r1, reg) = (r.clone(), Arc::clone(&registry));
        let h = spawn("sampler", &r, move || {
            sampler::run(interval_ns, reg, qdiscs, netlink, r1)
        });
        (h, None)
    } else {
        (None, netlink)
    };

    // Everything stops by itself at the end or on a signal; join in turn.
    report.tcp = join("tcp-starter", &r, tcp_h).unwrap_or_else(|| {
        tcp_templates
            .into_iter()
            .map(|mut t| {
                t.error = Some("not run: the starter thread failed".into());
                t
            })
            .collect()
    });
    for (i, (h, flow)) in udp_h.into_iter().zip(udp_flows).enumerate() {
        report
            .udp
            .push(join(&format!("udp-{i}"), &r, h).unwrap_or(UdpSentReport {
                flow,
                ..Default::default()
            }));
    }
    join("ccc-priorities", &r, changes_h);
    for (i, (h, flow)) in media_h.into_iter().zip(media_flows).enumerate() {
        report.media.push(
            join(&format!("media-{i}"), &r, h).unwrap_or(MediaFlowReport {
                flow,
                error: Some("not run: its thread failed".into()),
                ..Default::default()
            }),
        );
    }
    if let Some(v) = join("sink-media", &r, sink_media_h) {
        report.sink_media = v;
    }
    if let Some(v) = join("sink-tcp", &r, sink_tcp_h) {
        report.sink_tcp = v;
    }
    if let Some((v, short, drops)) = join("sink-udp", &r, sink_udp_h) {
        report.sink_udp = v;
        report.sink_udp_short_pkts = short;
        report.sink_udp_socket_drops = drops;
    }
    if let Some((s, nl)) = join("sampler", &r, sampler_h) {
        report.tcp_samples = s.tcp;
        report.qdisc_samples = s.qdisc;
        report.late_samples = s.late;
        netlink = nl;
    }
    if !targets.is_empty() {
        let found = match netlink.as_mut() {
            Some(nl) => nl.root_qdiscs(),
            None => qdisc::Netlink::open()
                .map_err(|e| format!("rtnetlink: {e}"))
                .and_then(|mut nl| nl.root_qdiscs()),
        };
        match found {
            Ok(found) => {
                for (link, dev, ifindex, name) in targets {
                    match found.get(&ifindex) {
                        Some(s) => report.qdiscs.push(s.report(link, &dev)),
                        None => r.error(format!(
                            "{name} ({dev}): no root qdisc at the end, no final statistics"
                        )),
                    }
                }
            }
            Err(e) => r.error(format!("final qdisc statistics: {e}")),
        }
    }
    report.stopped_by_signal = r.signalled();
    if report.stopped_by_signal {
        r.error(format!(
            "stopped by a signal before the end (the report ends at about {:.3} s)",
            r.now_s()
        ));
    }
    report.errors = r.take_errors();
    let json = serde_json::to_vec(&report).map_err(|e| format!("agent: the report: {e}"))?;
    write_atomic(&cfg.report_path, &json)?;
    drop(signals);
    Ok(report)
}
