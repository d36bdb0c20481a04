//! The plan of a run (issue 15): the configuration checked field by field, the congestion
//! controls tried on a socket, the qdisc devices looked up, the UDP sources built and the web
//! flows drawn, all before the agent says it is ready, so a configuration it cannot honour is an
//! error naming the field rather than a run that silently does something else.

use super::qdisc::{ifindex, Netlink};
use super::tcp::{socket_with_cc, TcpJob};
use super::udp::{UdpJob, MIN_IP_BYTES};
use super::{Config, QdiscReport, TcpFlowReport};
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
    pub media: Vec<super::media::MediaJob>,
    pub qdiscs: Vec<QdiscTarget>,
    pub netlink: Option<Netlink>,
    /// The qdiscs' counters when the plan was made (the kernel's are cumulative).
    pub qdiscs_at_start: Vec<QdiscReport>,
    pub web_flows_after_end: u64,
    /// Coupled flows' settings (when some flow is coupled) and their priority changes by time.
    pub seats: Option<std::sync::Arc<super::ccc::Seats>>,
    pub changes: Vec<super::ccc::Change>,
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
fn check_priority(field: &str, p: f64) -> Result<(), String> {
    if p.is_finite() && p > 0.0 && p <= ccc_bpf::MAX_PRIORITY {
        Ok(())
    } else {
        Err(err(
            field,
            format!("{p} is not a priority in (0, {}]", ccc_bpf::MAX_PRIORITY),
        ))
    }
}

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
    let mut settings = Vec::new();
    let mut changes = Vec::new();
    let mut seat_of = Vec::with_capacity(cfg.tcp.len());
    for (i, f) in cfg.tcp.iter().enumerate() {
        let name = format!("tcp[{i}]");
        let dst = ipv4(&format!("{name}.dst"), &f.dst, f.port)?;
        let start_ns = secs_ns(&format!("{name}.start_s"), f.start_s)?;
        dscp(&format!("{name}.dscp"), f.dscp)?;
        check_cc(&format!("{name}.cc"), &f.cc)?;
        let seat = match &f.ccc {
            None => None,
            Some(c) => {
                if cfg.ccc_map_id.is_none() {
                    return Err(err(
                        format!("{name}.ccc"),
                        "a coupled flow needs ccc_map_id",
                    ));
                }
                if f.cc != ccc_bpf::CC_NAME {
                    return Err(err(
                        format!("{name}.cc"),
                        format!("a coupled flow runs {:?}, not {:?}", ccc_bpf::CC_NAME, f.cc),
                    ));
                }
                if c.group == 0 {
                    return Err(err(format!("{name}.ccc.group"), "group numbers start at 1"));
                }
                let k = settings.len();
                for (j, ch) in c.changes.iter().enumerate() {
                    let at = secs_ns(&format!("{name}.ccc.changes[{j}].at_s"), ch.at_s)?;
                    check_priority(&format!("{name}.ccc.changes[{j}].priority"), ch.priority)?;
                    changes.push((at, k, ch.priority, format!("{name} (flow {})", f.flow)));
                }
                check_priority(&format!("{name}.ccc.priority"), c.priority)?;
                settings.push(ccc_bpf::SocketSetting {
                    priority: c.priority,
                    group: Some(c.group),
                    handover: Some(c.handover),
                });
                Some(k)
            }
        };
        seat_of.push(seat);
        file_jobs.push(TcpJob {
            name: format!("{name} (flow {})", f.flow),
            dst,
            cc: f.cc.clone(),
            dscp: f.dscp,
            seat: None,
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
    let seats = if settings.is_empty() {
        None
    } else {
        let id = cfg.ccc_map_id.expect("checked for each coupled flow");
        Some(std::sync::Arc::new(super::ccc::Seats::new(id, settings)?))
    };
    for (j, k) in file_jobs.iter_mut().zip(seat_of) {
        j.seat = k.map(|k| (std::sync::Arc::clone(seats.as_ref().unwrap()), k));
    }
    changes.sort_by_key(|c| c.0);
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
                seat: None,
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
        let end_ns = match u.end_s {
            Some(e) => {
                let e = secs_ns(&format!("{name}.end_s"), e)?;
                if e <= start_ns {
                    return Err(err(
                        format!("{name}.end_s"),
                        format!(
                            "{} s: not after its start_s, {} s",
                            e as f64 / 1e9,
                            u.start_s
                        ),
                    ));
                }
                Some(cfg.epoch_ns + e)
            }
            None => None,
        };
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
            end_ns,
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
    let media = media_jobs(cfg, interval_ns)?;
    let mut qdiscs_at_start = Vec::new();
    let netlink = if qdiscs.is_empty() {
        None
    } else {
        let mut nl = Netlink::open().map_err(|e| err("qdiscs", format!("rtnetlink: {e}")))?;
        let found = nl.root_qdiscs().map_err(|e| err("qdiscs", e))?;
        for q in &qdiscs {
            let Some(s) = found.get(&q.ifindex) else {
                return Err(err(
                    format!("{}.dev", q.name),
                    format!("{:?} has no root qdisc", q.dev),
                ));
            };
            qdiscs_at_start.push(s.report(q.link, &q.dev));
        }
        Some(nl)
    };

    Ok(Plan {
        epoch_ns: cfg.epoch_ns,
        end_ns,
        interval_ns,
        tcp,
        udp,
        media,
        qdiscs,
        netlink,
        qdiscs_at_start,
        web_flows_after_end,
        seats,
        changes,
    })
}

/// Media flows (issue 21): every field checked, each controller built, before ready.
fn media_jobs(cfg: &Config, interval_ns: u64) -> Result<Vec<super::media::MediaJob>, String> {
    use super::media::{MediaJob, DATA_HEADER_BYTES, IP_UDP_HEADER_BYTES};
    use fsed::proto::RateAlgorithm;
    use sim::media::{MediaSource, MediaState};
    let mut out = Vec::with_capacity(cfg.media.len());
    for (i, m) in cfg.media.iter().enumerate() {
        let name = format!("media[{i}]");
        let dst = ipv4(&format!("{name}.dst"), &m.dst, m.port)?;
        dscp(&format!("{name}.dscp"), m.dscp)?;
        let min = IP_UDP_HEADER_BYTES + DATA_HEADER_BYTES as u32;
        if !(min..=65_507).contains(&m.packet_bytes) {
            return Err(err(
                format!("{name}.packet_bytes"),
                format!(
                    "{}: expected {min} ..= 65507 (the headers, the agent's 28 bytes)",
                    m.packet_bytes
                ),
            ));
        }
        let (snd, rcv) = sim::transport::controllers::build(&m.controller, m.packet_bytes, &name)
            .map_err(|e| format!("agent: {e}"))?;
        let source = match (m.source.as_str(), m.rate_bps) {
            ("greedy", None) => MediaSource::Greedy,
            ("app_limited", Some(r)) => MediaSource::AppLimited { rate_bps: r },
            ("app_limited", None) => {
                return Err(err(
                    format!("{name}.rate_bps"),
                    "an app_limited source needs rate_bps",
                ))
            }
            ("greedy", Some(_)) => {
                return Err(err(
                    format!("{name}.rate_bps"),
                    "a greedy source has no rate_bps",
                ))
            }
            (other, _) => {
                return Err(err(
                    format!("{name}.source"),
                    format!("{other:?} is not \"greedy\" or \"app_limited\""),
                ))
            }
        };
        let start_ns = secs_ns(&format!("{name}.start_s"), m.start_s)?;
        let mut pauses = Vec::with_capacity(m.pauses.len());
        for (k, [a, b]) in m.pauses.iter().enumerate() {
            let f = format!("{name}.pauses[{k}]");
            let (a, b) = (secs_ns(&f, *a)?, secs_ns(&f, *b)?);
            pauses.push((Instant::from_nanos(a), Instant::from_nanos(b)));
        }
        let state = MediaState::new(source, Instant::from_nanos(start_ns), pauses, &name)
            .map_err(|e| format!("agent: {e}"))?;
        let feedback_delay_ns = secs_ns(&format!("{name}.feedback_delay_s"), m.feedback_delay_s)?;
        let base_rtt_ns = secs_ns(&format!("{name}.base_rtt_s"), m.base_rtt_s)?;
        let (algorithm, changes) = match &m.fse {
            None => (None, Vec::new()),
            Some(s) => {
                let a = RateAlgorithm::from_name(&s.algorithm).ok_or_else(|| {
                    err(
                        format!("{name}.fse.algorithm"),
                        format!(
                            "{:?}: expected active, conservative_active, simple_passive or passive",
                            s.algorithm
                        ),
                    )
                })?;
                check_priority(&format!("{name}.fse.priority"), s.priority)?;
                if s.group.is_empty() {
                    return Err(err(format!("{name}.fse.group"), "an empty label"));
                }
                let mut changes = Vec::with_capacity(s.changes.len());
                for (k, c) in s.changes.iter().enumerate() {
                    let f = format!("{name}.fse.changes[{k}]");
                    check_priority(&format!("{f}.priority"), c.priority)?;
                    changes.push((secs_ns(&format!("{f}.at_s"), c.at_s)?, c.priority));
                }
                changes.sort_by_key(|c| c.0);
                (Some(a), changes)
            }
        };
        out.push(MediaJob {
            cfg: m.clone(),
            name,
            dst,
            start_ns: cfg.epoch_ns + start_ns,
            epoch_ns: cfg.epoch_ns,
            interval_ns,
            snd,
            rcv,
            source: state,
            feedback_delay_ns,
            base_rtt: coupling::Duration::from_nanos(base_rtt_ns),
            algorithm,
            changes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::traffic::PacketSource;

    fn config(extra: serde_json::Value) -> Config {
        let mut v = serde_json::json!({
            "epoch_ns": 1_000_000_000u64,
            "duration_s": 10.0,
            "sample_interval_s": 0.1,
            "ready_path": "/nonexistent/ready",
            "report_path": "/nonexistent/report.json",
            "sink": null,
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn tcp(flow: u32, start_s: f64, cc: &str) -> serde_json::Value {
        serde_json::json!({"flow": flow, "dst": "10.0.0.2", "port": 5201, "cc": cc,
            "start_s": start_s, "size_bytes": null, "dscp": 0})
    }

    fn web(seed: u64, end_s: f64) -> serde_json::Value {
        serde_json::json!({"workload": 4, "dst": "10.0.0.2", "port": 5201, "load_bps": 2e6,
            "mean_size_bytes": 30e3, "pareto_shape": 1.2, "start_s": 1.0, "end_s": end_s,
            "cc": "reno", "seed": seed})
    }

    fn udp(kind: &str, seed: u64) -> serde_json::Value {
        serde_json::json!({"flow": 9, "dst": "10.0.0.2", "port": 5202, "start_s": 0.5,
            "kind": kind, "rate_bps": 1e6, "load_bps": 2e6, "dscp": 46, "seed": seed})
    }

    fn build_err(extra: serde_json::Value) -> String {
        match build(&config(extra)) {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        }
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (serde_json::json!({"duration_s": 0.0}), "duration_s"),
            (serde_json::json!({"duration_s": f64::MAX}), "duration_s"),
            (
                serde_json::json!({"sample_interval_s": 1e-5}),
                "sample_interval_s",
            ),
            (
                serde_json::json!({"sample_interval_s": -1.0}),
                "sample_interval_s",
            ),
            (
                serde_json::json!({"sink": {"tcp_port": 0, "udp_port": 5}}),
                "sink.tcp_port",
            ),
            (
                serde_json::json!({"tcp": [tcp(0, 1.0, "reno"), tcp(1, 1.0, "no-such-cc")]}),
                "tcp[1].cc",
            ),
            (
                serde_json::json!({"tcp": [tcp(0, -1.0, "reno")]}),
                "tcp[0].start_s",
            ),
            (serde_json::json!({"web": [web(1, 0.5)]}), "web[0].end_s"),
            (
                serde_json::json!({"udp": [udp("poisson", 1)]}),
                "udp[0].kind",
            ),
            (
                serde_json::json!({"qdiscs": [{"link": 3, "dev": "no-such-dev0", "sample": true}]}),
                "qdiscs[0].dev",
            ),
        ];
        for (extra, field) in cases {
            let e = build_err(extra.clone());
            assert!(e.starts_with(&format!("agent: {field}: ")), "{extra}: {e}");
        }
        let mut t = tcp(0, 1.0, "reno");
        t["dst"] = "10.0.0".into();
        assert!(build_err(serde_json::json!({"tcp": [t]})).contains("tcp[0].dst"));
        let mut t = tcp(0, 1.0, "reno");
        t["dscp"] = 64.into();
        assert!(build_err(serde_json::json!({"tcp": [t]})).contains("tcp[0].dscp"));
        let mut u = udp("cbr", 1);
        u["end_s"] = 0.5.into(); // udp() starts at 0.5 s
        assert!(build_err(serde_json::json!({"udp": [u]})).starts_with("agent: udp[0].end_s: "));
        let mut u = udp("cbr", 1);
        u["pkt_bytes"] = 39.into();
        assert!(build_err(serde_json::json!({"udp": [u]})).contains("udp[0].pkt_bytes"));
        let mut u = udp("cbr", 1);
        u["rate_bps"] = 0.0.into();
        assert!(build_err(serde_json::json!({"udp": [u]})).contains("udp[0].cbr.rate_bps"));
        let mut w = web(1, 5.0);
        w["mean_size_bytes"] = 0.5.into();
        assert!(build_err(serde_json::json!({"web": [w]})).contains("web[0].mean_size_bytes"));
    }

    /// The web flows are the simulator's draws for the same workload and seed; file flows come
    /// first in start order; flows starting after the end of the run are counted, not run.
    #[test]
    fn tcp_jobs_in_report_order_with_the_simulators_web_draws() {
        let p = build(&config(serde_json::json!({
            "tcp": [tcp(5, 2.0, "cubic"), tcp(6, 0.5, "reno")],
            "web": [web(11, 14.0)],
        })))
        .unwrap();
        let wl = WebWorkload {
            load_bps: 2e6,
            mean_size_bytes: 30e3,
            pareto_shape: 1.2,
            ..WebWorkload::default()
        };
        let drawn = wl.flows(
            &mut seeded(11),
            Instant::from_secs(1),
            Instant::from_secs(14),
        );
        let in_run: Vec<_> = drawn
            .iter()
            .filter(|f| f.start < Instant::from_secs(10))
            .collect();
        assert!(in_run.len() > 20 && in_run.len() < drawn.len());
        assert_eq!(p.web_flows_after_end as usize, drawn.len() - in_run.len());
        assert_eq!(p.tcp.len(), 2 + in_run.len());
        assert_eq!(p.tcp[0].report.flow, Some(6));
        assert_eq!(p.tcp[1].report.flow, Some(5));
        assert_eq!(p.tcp[1].start_ns, 3_000_000_000);
        for (k, (j, f)) in p.tcp[2..].iter().zip(&in_run).enumerate() {
            assert_eq!(j.report.workload, Some(4));
            assert_eq!(j.report.index, Some(k as u32));
            assert_eq!(j.report.flow, None);
            assert_eq!(j.report.size_bytes, Some(f.size_bytes));
            assert_eq!(j.start_ns, 1_000_000_000 + f.start.as_nanos());
            assert_eq!(j.report.start_s, f.start.as_nanos() as f64 / 1e9);
            assert_eq!(j.cc, "reno");
        }
    }

    /// A UDP flow's source is the simulator's, built as the engine builds it, with the flow's
    /// seed: the same packets in the same order.
    #[test]
    fn udp_sources_are_the_simulators() {
        for (kind, sk) in [
            (
                "cbr",
                SourceKind::Cbr(CbrConfig {
                    rate_bps: 1e6,
                    pkt_bytes: DEFAULT_CBR_PKT_BYTES,
                }),
            ),
            (
                "self_similar",
                SourceKind::SelfSimilar(SelfSimilarConfig::with_load(2e6)),
            ),
        ] {
            let mut p = build(&config(serde_json::json!({"udp": [udp(kind, 77)]}))).unwrap();
            let j = &mut p.udp[0];
            assert_eq!(j.start_ns, 1_500_000_000);
            let mut rng = seeded(77);
            let mut want = SourceConfig::new(sk).build("x", &mut rng).unwrap();
            for _ in 0..5000 {
                assert_eq!(j.source.next(&mut j.rng), want.next(&mut rng));
            }
        }
        // Without load_bps: the generator's default.
        let mut u = udp("self_similar", 3);
        u["load_bps"] = serde_json::Value::Null;
        let mut p = build(&config(serde_json::json!({"udp": [u]}))).unwrap();
        let mut rng = seeded(3);
        let mut want = SourceConfig::new(SourceKind::SelfSimilar(SelfSimilarConfig::default()))
            .build("x", &mut rng)
            .unwrap();
        let j = &mut p.udp[0];
        for _ in 0..1000 {
            assert_eq!(j.source.next(&mut j.rng), want.next(&mut rng));
        }
    }

    #[test]
    fn the_loopback_qdisc_is_found() {
        let p = build(&config(serde_json::json!({
            "qdiscs": [{"link": 3, "dev": "lo", "sample": true}]
        })))
        .unwrap();
        assert_eq!(p.qdiscs[0].ifindex, 1);
        assert_eq!(p.qdiscs_at_start[0].link, 3);
        assert_eq!(p.qdiscs_at_start[0].dev, "lo");
        assert!(p.netlink.is_some());
    }
}
