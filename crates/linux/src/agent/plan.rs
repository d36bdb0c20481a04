//! The plan of a run (issue 15): the configuration checked field by field, the congestion
//! controls tried on a socket, the qdisc devices looked up, the UDP sources built and the web
//! flows drawn, all before the agent says it is ready, so a configuration it cannot honour is an
//! error naming the field rather than a run that silently does something else.

use super::qdisc::{ifindex, Netlink};
use super::tcp::{socket_with_cc, TcpJob};
use super::udp::{UdpJob, MIN_IP_BYTES};
use super::{Config, TcpFlowReport};
use coupling::Instant;
use sim::rng::seeded;
use sim::traffic::{
    CbrConfig, SelfSimilarConfig, SourceConfig, SourceKind, WebWorkload, MAX_WEB_FLOWS,
};
use std::net::{Ipv4Addr, SocketAddrV4};

/// The longest run the agent accepts (a day): beyond it a time is surely a unit mistake.
pub(crate) const MAX_DURATION_S: f64 = 86_400.0;
/// The shortest sampling interval: TCP_INFO of dozens of sockets and a qdisc dump take tens of
/// microseconds, so 1 ms leaves the host room.
pub(crate) const MIN_SAMPLE_INTERVAL_S: f64 = 1e-3;
/// The most sampling instants in a run (the report's memory).
pub(crate) const MAX_SAMPLE_INSTANTS: f64 = 1e7;
/// A CBR flow's packet size when the configuration gives none: the simulator's (the bindings'
/// `add_udp_flow(pkt_bytes=1000)`).
pub(crate) const DEFAULT_CBR_PKT_BYTES: u32 = 1000;

pub(crate) struct QdiscTarget {
    /// `qdiscs[i]`, for messages.
    pub name: String,
    pub link: u32,
    pub dev: String,
    pub ifindex: u32,
    pub sample: bool,
}

pub(crate) struct Plan {
    pub epoch_ns: u64,
    pub end_ns: u64,
    /// 0: no sampling.
    pub interval_ns: u64,
    /// File flows in start order, then web flows in start order: the report's `tcp` order.
    pub tcp: Vec<TcpJob>,
    pub udp: Vec<UdpJob>,
    pub qdiscs: Vec<QdiscTarget>,
    pub netlink: Option<Netlink>,
    pub web_flows_after_end: u64,
}

fn err(field: impl std::fmt::Display, msg: impl std::fmt::Display) -> String {
    format!("agent: {field}: {msg}")
}

/// Seconds since the epoch as nanoseconds: finite, >= 0, at most [`MAX_DURATION_S`].
pub(crate) fn secs_ns(field: &str, s: f64) -> Result<u64, String> {
    if !(s.is_finite() && (0.0..=MAX_DURATION_S).contains(&s)) {
        return Err(err(
            field,
            format!("{s} is not a time in seconds in [0, {MAX_DURATION_S}]"),
        ));
    }
    Ok((s * 1e9).round() as u64)
}

fn ipv4(field: &str, dst: &str, port: u16) -> Result<SocketAddrV4, String> {
    let ip: Ipv4Addr = dst
        .parse()
        .map_err(|_| err(field, format!("{dst:?} is not an IPv4 address")))?;
    if port == 0 {
        return Err(err(field, "port 0: the sink's port is needed"));
    }
    Ok(SocketAddrV4::new(ip, port))
}

fn dscp(field: &str, d: u8) -> Result<u8, String> {
    if d > 63 {
        return Err(err(field, format!("{d} is not a DSCP (0..=63)")));
    }
    Ok(d)
}

/// The kernel accepts `cc` (TCP_CONGESTION on a fresh socket: the test the flows' sockets pass).
fn check_cc(field: &str, cc: &str) -> Result<(), String> {
    socket_with_cc(cc).map(drop).map_err(|e| {
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into());
        err(
            field,
            format!(
                "the kernel refuses congestion control {cc:?} ({e}); available here: {avail} \
                 (a module such as tcp_bbr may need loading on the host)"
            ),
        )
    })
}

pub(crate) fn build(cfg: &Config) -> Result<Plan, String> {
    if !(cfg.duration_s.is_finite() && cfg.duration_s > 0.0 && cfg.duration_s <= MAX_DURATION_S) {
        return Err(err(
            "duration_s",
            format!(
                "{} is not a duration in (0, {MAX_DURATION_S}] s",
                cfg.duration_s
            ),
        ));
    }
    let duration_ns = secs_ns("duration_s", cfg.duration_s)?;
    let end_ns = cfg
        .epoch_ns
        .checked_add(duration_ns)
        .ok_or_else(|| err("epoch_ns", "epoch_ns + duration_s overflows"))?;
    let si = cfg.sample_interval_s;
    let interval_ns = if si == 0.0 {
        0
    } else if si.is_finite()
        && si >= MIN_SAMPLE_INTERVAL_S
        && cfg.duration_s / si <= MAX_SAMPLE_INSTANTS
    {
        (si * 1e9).round() as u64
    } else {
        return Err(err(
            "sample_interval_s",
            format!(
                "{si} is neither 0 (no samples) nor an interval >= {MIN_SAMPLE_INTERVAL_S} s \
                 giving at most {MAX_SAMPLE_INSTANTS} instants"
            ),
        ));
    };
    for (field, p) in [
        ("ready_path", &cfg.ready_path),
        ("report_path", &cfg.report_path),
    ] {
        if p.is_empty() {
            return Err(err(field, "empty path"));
        }
    }
    if let Some(s) = &cfg.sink {
        if s.tcp_port == 0 {
            return Err(err("sink.tcp_port", "port 0: senders need a known port"));
        }
        if s.udp_port == 0 {
            return Err(err("sink.udp_port", "port 0: senders need a known port"));
        }
    }

    // File flows.
    let mut file_jobs = Vec::with_capacity(cfg.tcp.len());
    for (i, f) in cfg.tcp.iter().enumerate() {
        let name = format!("tcp[{i}]");
        let dst = ipv4(&format!("{name}.dst"), &f.dst, f.port)?;
        let start_ns = secs_ns(&format!("{name}.start_s"), f.start_s)?;
        dscp(&format!("{name}.dscp"), f.dscp)?;
        check_cc(&format!("{name}.cc"), &f.cc)?;
        file_jobs.push(TcpJob {
            name: format!("{name} (flow {})", f.flow),
            dst,
            cc: f.cc.clone(),
            dscp: f.dscp,
            start_ns: cfg.epoch_ns + start_ns,
            report: TcpFlowReport {
                flow: Some(f.flow),
                cc: f.cc.clone(),
                start_s: f.start_s,
                size_bytes: f.size_bytes,
                ..Default::default()
            },
        });
    }
    file_jobs.sort_by_key(|j| j.start_ns);

    // Web workloads: drawn as the simulator's add_web_workload draws them
    // (`WebWorkload::flows(rng, start, end)`), here with the workload's own generator.
    let mut web_jobs = Vec::new();
    let mut web_flows_after_end = 0u64;
    for (w, c) in cfg.web.iter().enumerate() {
        let name = format!("web[{w}]");
        let dst = ipv4(&format!("{name}.dst"), &c.dst, c.port)?;
        let start_ns = secs_ns(&format!("{name}.start_s"), c.start_s)?;
        let stop_ns = secs_ns(&format!("{name}.end_s"), c.end_s)?;
        if stop_ns < start_ns {
            return Err(err(
                format!("{name}.end_s"),
                format!("{} is before start_s {}", c.end_s, c.start_s),
            ));
        }
        check_cc(&format!("{name}.cc"), &c.cc)?;
        let wl = WebWorkload {
            load_bps: c.load_bps,
            mean_size_bytes: c.mean_size_bytes,
            pareto_shape: c.pareto_shape,
            pairs: 1,
            ..WebWorkload::default()
        };
        wl.check(&name).map_err(|e| format!("agent: {e}"))?;
        let expected = c.load_bps * (c.end_s - c.start_s) / (8.0 * c.mean_size_bytes);
        if expected > MAX_WEB_FLOWS as f64 {
            return Err(err(
                format!("{name}.load_bps"),
                format!(
                    "about {expected:.0} flows, more than the {MAX_WEB_FLOWS} a workload may \
                     draw (MAX_WEB_FLOWS)"
                ),
            ));
        }
        let flows = wl.flows(
            &mut seeded(c.seed),
            Instant::from_nanos(start_ns),
            Instant::from_nanos(stop_ns),
        );
        for (k, f) in flows.iter().enumerate() {
            let t_ns = f.start.as_nanos();
            if t_ns >= duration_ns {
                web_flows_after_end += 1;
                continue;
            }
            web_jobs.push(TcpJob {
                name: format!("{name} flow {k}"),
                dst,
                cc: c.cc.clone(),
                dscp: 0,
                start_ns: cfg.epoch_ns + t_ns,
                report: TcpFlowReport {
                    flow: None,
                    workload: Some(c.workload),
                    index: Some(k as u32),
                    cc: c.cc.clone(),
                    start_s: t_ns as f64 / 1e9,
                    size_bytes: Some(f.size_bytes),
                    ..Default::default()
                },
            });
        }
    }
    web_jobs.sort_by_key(|j| j.start_ns);
    let mut tcp = file_jobs;
    tcp.extend(web_jobs);

    // UDP flows: the source built as the engine builds it, so its errors name the field.
    let mut udp = Vec::with_capacity(cfg.udp.len());
    for (i, u) in cfg.udp.iter().enumerate() {
        let name = format!("udp[{i}]");
        let dst = ipv4(&format!("{name}.dst"), &u.dst, u.port)?;
        let start_ns = secs_ns(&format!("{name}.start_s"), u.start_s)?;
        dscp(&format!("{name}.dscp"), u.dscp)?;
        let kind = match u.kind.as_str() {
            "cbr" => {
                let rate_bps = u
                    .rate_bps
                    .ok_or_else(|| err(format!("{name}.rate_bps"), "a cbr flow needs rate_bps"))?;
                let pkt_bytes = u.pkt_bytes.unwrap_or(DEFAULT_CBR_PKT_BYTES);
                if pkt_bytes < MIN_IP_BYTES {
                    return Err(err(
                        format!("{name}.pkt_bytes"),
                        format!(
                            "{pkt_bytes} bytes: the IP packet needs at least {MIN_IP_BYTES} (IP \
                             and UDP headers, then the agent's 12-byte flow and sequence header)"
                        ),
                    ));
                }
                SourceKind::Cbr(CbrConfig {
                    rate_bps,
                    pkt_bytes,
                })
            }
            "self_similar" => SourceKind::SelfSimilar(match u.load_bps {
                Some(l) => SelfSimilarConfig::with_load(l),
                None => SelfSimilarConfig::default(),
            }),
            other => {
                return Err(err(
                    format!("{name}.kind"),
                    format!("{other:?} is not \"cbr\" or \"self_similar\""),
                ))
            }
        };
        let mut rng = seeded(u.seed);
        let source = SourceConfig::new(kind)
            .build(&name, &mut rng)
            .map_err(|e| format!("agent: {e}"))?;
        udp.push(UdpJob {
            cfg: u.clone(),
            name,
            dst,
            start_ns: cfg.epoch_ns + start_ns,
            source,
            rng,
        });
    }

    // Qdiscs: every device exists and has a root qdisc now.
    let mut qdiscs = Vec::with_capacity(cfg.qdiscs.len());
    for (i, q) in cfg.qdiscs.iter().enumerate() {
        let name = format!("qdiscs[{i}]");
        let ifindex = ifindex(&q.dev).ok_or_else(|| {
            err(
                format!("{name}.dev"),
                format!("no device {:?} in this network namespace", q.dev),
            )
        })?;
        qdiscs.push(QdiscTarget {
            name,
            link: q.link,
            dev: q.dev.clone(),
            ifindex,
            sample: q.sample,
        });
    }
    let netlink = if qdiscs.is_empty() {
        None
    } else {
        let mut nl = Netlink::open().map_err(|e| err("qdiscs", format!("rtnetlink: {e}")))?;
        let found = nl.root_qdiscs().map_err(|e| err("qdiscs", e))?;
        for q in &qdiscs {
            if !found.contains_key(&q.ifindex) {
                return Err(err(
                    format!("{}.dev", q.name),
                    format!("{:?} has no root qdisc", q.dev),
                ));
            }
        }
        Some(nl)
    };

    Ok(Plan {
        epoch_ns: cfg.epoch_ns,
        end_ns,
        interval_ns,
        tcp,
        udp,
        qdiscs,
        netlink,
        web_flows_after_end,
    })
}
