//! The traffic agent run for real (issue 15): agents in threads of this process, each a sink,
//! a sender or both, checked against each other's reports.
//!
//! - On loopback (any user): TCP bulk and sized flows, a CBR and a self-similar UDP flow, a web
//!   workload, the samplers, and SIGTERM.
//! - Across two network namespaces `hag-<pid>a` and `hag-<pid>b` joined by a veth with a small
//!   tbf on one side (root only; skipped with the reason printed otherwise): the qdisc's drops and
//!   backlog, a lossless reverse direction. A thread enters a namespace with setns(2) and runs the
//!   agent there; the agent's threads inherit it.
//!
//! The tests share the process's signal handling and ports, so they take turns (one lock).

use linux::agent::{self, Config, Report};
use std::collections::HashMap;
use std::process::Command;
use std::sync::Mutex;

static TURN: Mutex<()> = Mutex::new(());

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A port free now on all addresses (TCP and UDP both).
fn free_port() -> u16 {
    loop {
        let t = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let p = t.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("0.0.0.0", p)).is_ok() {
            return p;
        }
    }
}

fn base(dir: &std::path::Path, name: &str, epoch_ns: u64, duration_s: f64) -> serde_json::Value {
    serde_json::json!({
        "epoch_ns": epoch_ns,
        "duration_s": duration_s,
        "sample_interval_s": 0.1,
        "ready_path": dir.join(format!("{name}.ready")).to_str().unwrap(),
        "report_path": dir.join(format!("{name}.json")).to_str().unwrap(),
        "sink": null,
    })
}

/// Runs the agents, each in its own thread (in network namespace `netns` when given), and
/// returns their reports; checks each report file equals what `run` returned.
fn run_agents(agents: Vec<(Option<String>, serde_json::Value)>) -> Vec<Report> {
    let handles: Vec<_> = agents
        .into_iter()
        .map(|(netns, v)| {
            std::thread::spawn(move || {
                if let Some(ns) = netns {
                    let f = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
                    use std::os::fd::AsRawFd;
                    // SAFETY: a namespace file descriptor; affects this thread only.
                    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
                    assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
                }
                let cfg: Config = serde_json::from_value(v.clone()).unwrap();
                let rep = agent::run(&cfg).unwrap();
                let path = v["report_path"].as_str().unwrap();
                // Byte for byte (serde_json's float parsing does not round-trip every f64).
                let written = std::fs::read(path).unwrap();
                assert!(
                    written == serde_json::to_vec(&rep).unwrap(),
                    "{path} differs"
                );
                assert!(std::fs::metadata(v["ready_path"].as_str().unwrap()).is_ok());
                rep
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn tcp(
    flow: u32,
    dst: &str,
    port: u16,
    cc: &str,
    start_s: f64,
    size: Option<u64>,
) -> serde_json::Value {
    serde_json::json!({"flow": flow, "dst": dst, "port": port, "cc": cc, "start_s": start_s,
        "size_bytes": size, "dscp": 10})
}

fn udp(flow: u32, dst: &str, port: u16, kind: &str, bps: f64, seed: u64) -> serde_json::Value {
    serde_json::json!({"flow": flow, "dst": dst, "port": port, "start_s": 0.2, "kind": kind,
        "rate_bps": bps, "load_bps": bps, "dscp": 46, "seed": seed, "pkt_bytes": 300})
}

fn web(dst: &str, port: u16, start_s: f64, end_s: f64) -> serde_json::Value {
    serde_json::json!({"workload": 2, "dst": dst, "port": port, "load_bps": 1e6,
        "mean_size_bytes": 10e3, "pareto_shape": 1.2, "start_s": start_s, "end_s": end_s,
        "cc": "reno", "seed": 5})
}

/// Checks a sender's TCP flows against the sink that received them.
fn check_tcp(snd: &Report, sink: &Report, duration_s: f64, interval_s: f64) {
    let conns: HashMap<u16, &agent::SinkConnReport> =
        sink.sink_tcp.iter().map(|c| (c.peer_port, c)).collect();
    for (i, t) in snd.tcp.iter().enumerate() {
        assert!(t.error.is_none(), "flow {i}: {:?}", t.error);
        let Some(connected) = t.connected_s else {
            panic!("flow {i} did not connect: {t:?}");
        };
        let c = conns[&t.local_port];
        let info = t.info.as_ref().unwrap();
        // On time, unless the bottleneck's queue dropped the SYN (retransmitted after 1 s). Half
        // a second, not a few RTTs: the delay line is a user-space process, and a CI run on two
        // busy cores once took 109 ms to connect with nothing lost.
        assert!(connected >= t.start_s, "{t:?}");
        assert!(
            connected < t.start_s + 0.5 || info.total_retrans > 0,
            "{t:?}"
        );
        match t.size_bytes {
            Some(size) => {
                // A sized flow is over when the sink has read everything and closed.
                if let Some(fin) = t.finished_s {
                    assert_eq!(t.bytes_written, size);
                    assert_eq!(c.bytes, size);
                    assert!(c.eof);
                    assert!(fin > c.eof_s.unwrap() && fin < duration_s, "{t:?} {c:?}");
                    // SYN and FIN count in the kernel's bytes_acked.
                    assert_eq!(info.bytes_acked, size + 2, "{t:?}");
                } else {
                    // Still going at the end (a large one, or one that started late).
                    assert!(c.bytes < size && !c.eof, "{t:?} {c:?}");
                }
            }
            None => {
                // Bulk: the sink read what was acknowledged (less the SYN), give or take what
                // was in flight or unread at the end (on loopback, a millisecond is megabytes);
                // the rest was still in the send buffer.
                let acked = info.bytes_acked - 1;
                assert!(c.bytes <= t.bytes_written, "{t:?} {c:?}");
                assert!(
                    c.bytes.abs_diff(acked) < 200_000 + c.bytes / 100,
                    "{t:?} {c:?}"
                );
                assert!(c.bytes > 100_000, "{c:?}");
                assert!(!c.eof);
                // One TCP_INFO row per sampling instant while connected.
                let rows = snd
                    .tcp_samples
                    .conn
                    .iter()
                    .filter(|&&k| k as usize == i)
                    .count() as f64;
                let want = ((duration_s - connected) / interval_s).floor();
                assert!(
                    (rows - want).abs() <= 1.0,
                    "flow {i}: {rows} rows, {want} instants"
                );
            }
        }
    }
    assert!(snd.tcp_samples.t_s.windows(2).all(|w| w[0] <= w[1]));
}

/// A UDP flow that crossed no bottleneck: every packet counted on both sides.
fn check_udp_lossless(snd: &Report, sink: &Report, flow: u32) {
    let s = snd.udp.iter().find(|u| u.flow == flow).unwrap();
    let r = sink.sink_udp.iter().find(|u| u.flow == flow).unwrap();
    assert!(s.pkts > 100, "{s:?}");
    assert_eq!(s.send_errors, 0);
    // The last packets may be in flight at the end: the sink stops counting there.
    assert!(s.pkts - r.pkts <= 2, "{s:?} {r:?}");
    assert_eq!(r.max_seq.unwrap() + 1, r.pkts, "{r:?}");
    assert_eq!(r.reordered_pkts, 0);
    assert!(
        r.delay_min_s.unwrap() > 0.0 && r.delay_max_s.unwrap() < 0.05,
        "{r:?}"
    );
}

#[test]
fn loopback_flows_sinks_and_samples() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("agent-test-lo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tp, up) = (free_port(), free_port());
    let epoch = mono_ns() + 300_000_000;
    let duration = 2.5;
    let mut sink = base(&dir, "sink", epoch, duration);
    sink["sink"] = serde_json::json!({"tcp_port": tp, "udp_port": up});
    let mut snd = base(&dir, "snd", epoch, duration);
    snd["tcp"] = serde_json::json!([
        tcp(0, "127.0.0.1", tp, "cubic", 0.3, None),
        tcp(1, "127.0.0.1", tp, "reno", 0.1, Some(300_000)),
    ]);
    snd["udp"] = serde_json::json!([
        udp(7, "127.0.0.1", up, "cbr", 1e6, 0),
        udp(8, "127.0.0.1", up, "self_similar", 2e6, 1),
    ]);
    snd["web"] = serde_json::json!([web("127.0.0.1", tp, 0.5, 2.0)]);
    snd["qdiscs"] = serde_json::json!([{"link": 9, "dev": "lo", "sample": true}]);
    let reps = run_agents(vec![(None, sink), (None, snd)]);
    let (sink, snd) = (&reps[0], &reps[1]);
    assert!(
        sink.errors.is_empty() && snd.errors.is_empty(),
        "{:?} {:?}",
        sink.errors,
        snd.errors
    );
    assert!(sink.ready_s < 0.0 && !snd.stopped_by_signal);
    assert_eq!(snd.tcp[0].flow, Some(1), "file flows in start order");
    let web: Vec<_> = snd.tcp.iter().filter(|t| t.workload == Some(2)).collect();
    assert!(web.len() >= 5, "{} web flows", web.len());
    assert!(web
        .iter()
        .enumerate()
        .all(|(k, t)| t.index == Some(k as u32) && t.flow.is_none()));
    assert_eq!(sink.sink_tcp.len(), snd.tcp.len());
    check_tcp(snd, sink, duration, 0.1);
    check_udp_lossless(snd, sink, 7);
    check_udp_lossless(snd, sink, 8);
    // CBR at 1 Mbit/s in 300-byte packets from 0.2 s: one every 2.4 ms.
    let cbr = snd.udp.iter().find(|u| u.flow == 7).unwrap();
    assert!(cbr.pkts.abs_diff(958) <= 1, "{cbr:?}");
    assert_eq!(cbr.bytes, cbr.pkts * 300);
    // The loopback device's qdisc, sampled at every instant.
    assert_eq!(snd.qdisc_samples.t_s.len(), 24);
    assert_eq!(snd.qdisc_samples.t_s[0], 0.1);
    assert_eq!(snd.qdiscs[0].link, 9);
    assert_eq!(snd.qdiscs[0].kind, snd.qdiscs_at_start[0].kind);
    // The bulk flow on loopback keeps both cores busy: a few late instants are tolerated.
    assert!(snd.late_samples <= 5, "{}", snd.late_samples);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_ends_the_run_with_a_report() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("agent-test-sig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tp, up) = (free_port(), free_port());
    let epoch = mono_ns() + 100_000_000;
    let mut v = base(&dir, "a", epoch, 60.0);
    v["sink"] = serde_json::json!({"tcp_port": tp, "udp_port": up});
    v["tcp"] = serde_json::json!([tcp(0, "127.0.0.1", tp, "reno", 0.2, None)]);
    v["web"] = serde_json::json!([web("127.0.0.1", tp, 0.0, 60.0)]);
    let ready = dir.join("a.ready");
    let h = std::thread::spawn(move || run_agents(vec![(None, v)]));
    while !ready.exists() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(700));
    let t0 = mono_ns();
    // SAFETY: the agent's handler is installed (it created its ready file).
    unsafe { libc::raise(libc::SIGTERM) };
    let rep = h.join().unwrap().pop().unwrap();
    let took_s = (mono_ns() - t0) as f64 / 1e9;
    assert!(took_s < 1.0, "{took_s} s to stop");
    assert!(rep.stopped_by_signal);
    assert!(
        rep.errors
            .iter()
            .any(|e| e.starts_with("stopped by a signal")),
        "{:?}",
        rep.errors
    );
    let bulk = &rep.tcp[0];
    assert!(bulk.connected_s.is_some() && bulk.bytes_written > 0 && bulk.info.is_some());
    // Web flows due after the signal never started, and say so.
    let unstarted = rep.tcp.iter().filter(|t| t.connected_s.is_none()).count();
    assert!(unstarted > 50, "{unstarted}");
    assert!(rep
        .tcp
        .iter()
        .filter(|t| t.connected_s.is_none())
        .all(|t| t.error.as_deref().is_some_and(|e| e.contains("stopped"))));
    assert!(!rep.tcp_samples.t_s.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Namespaces `hag-<pid>a` and `hag-<pid>b`, deleted on drop.
struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// a (10.78.0.1, veth with tbf 10 Mbit/s + pfifo of 20 packets) <-> b (10.78.0.2, no qdisc).
fn make_netns() -> Result<(Netns, String, String), String> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Err("not root".into());
    }
    let id = std::process::id();
    let (a, b) = (format!("hag-{id}a"), format!("hag-{id}b"));
    let (va, vb) = (format!("hag{id}a"), format!("hag{id}b"));
    // Deleting a namespace that was never made is harmless: the guard comes first.
    let guard = Netns(vec![a.clone(), b.clone()]);
    sh(&["ip", "netns", "add", &a])?;
    sh(&["ip", "netns", "add", &b])?;
    let cmds: Vec<Vec<&str>> = vec![
        vec![
            "ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
        ],
        vec!["ip", "-n", &a, "addr", "add", "10.78.0.1/24", "dev", &va],
        vec!["ip", "-n", &b, "addr", "add", "10.78.0.2/24", "dev", &vb],
        vec!["ip", "-n", &a, "link", "set", &va, "up"],
        vec!["ip", "-n", &b, "link", "set", &vb, "up"],
        vec!["ip", "-n", &a, "link", "set", "lo", "up"],
        vec!["ip", "-n", &b, "link", "set", "lo", "up"],
        vec![
            "tc", "-n", &a, "qdisc", "add", "dev", &va, "root", "handle", "1:", "tbf", "rate",
            "10mbit", "burst", "5kb", "latency", "100ms",
        ],
        vec![
            "tc", "-n", &a, "qdisc", "add", "dev", &va, "parent", "1:1", "handle", "10:", "pfifo",
            "limit", "20",
        ],
    ];
    for c in cmds {
        sh(&c)?;
    }
    // Segmentation offloads off, so the tbf sees wire-sized packets (best effort).
    for (ns, dev) in [(&a, &va), (&b, &vb)] {
        let _ = sh(&[
            "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
        ]);
    }
    Ok((guard, va, vb))
}

#[test]
fn namespaces_with_a_bottleneck() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let (ns, va, vb) = match make_netns() {
        Ok(x) => x,
        Err(e) => {
            println!("skipped: cannot make the test's network namespaces: {e}");
            return;
        }
    };
    let (a, b) = (ns.0[0].clone(), ns.0[1].clone());
    let dir = std::env::temp_dir().join(format!("agent-test-ns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (tp, up) = (5201, 5202);
    let epoch = mono_ns() + 300_000_000;
    let duration = 5.0;
    // a: TCP and UDP into the bottleneck, a sink for b's UDP.
    let mut ca = base(&dir, "a", epoch, duration);
    ca["sink"] = serde_json::json!({"tcp_port": tp, "udp_port": up});
    ca["tcp"] = serde_json::json!([
        tcp(0, "10.78.0.2", tp, "reno", 0.2, None),
        tcp(1, "10.78.0.2", tp, "cubic", 0.4, None),
        tcp(2, "10.78.0.2", tp, "cubic", 1.0, Some(400_000)),
    ]);
    ca["udp"] = serde_json::json!([udp(3, "10.78.0.2", up, "self_similar", 2e6, 9)]);
    ca["web"] = serde_json::json!([web("10.78.0.2", tp, 0.5, 4.0)]);
    ca["qdiscs"] = serde_json::json!([{"link": 0, "dev": va, "sample": true}]);
    // b: the sink, and UDP back to a, through no bottleneck.
    let mut cb = base(&dir, "b", epoch, duration);
    cb["sink"] = serde_json::json!({"tcp_port": tp, "udp_port": up});
    cb["udp"] = serde_json::json!([
        udp(4, "10.78.0.1", up, "self_similar", 2e6, 10),
        udp(5, "10.78.0.1", up, "cbr", 5e5, 0),
    ]);
    cb["qdiscs"] = serde_json::json!([{"link": 1, "dev": vb, "sample": false}]);
    let reps = run_agents(vec![(Some(b), cb), (Some(a), ca)]);
    let (rb, ra) = (&reps[0], &reps[1]);
    assert!(
        ra.errors.is_empty() && rb.errors.is_empty(),
        "{:?} {:?}",
        ra.errors,
        rb.errors
    );
    check_tcp(ra, rb, duration, 0.1);
    let sized = ra.tcp.iter().find(|t| t.flow == Some(2)).unwrap();
    let fct = sized.finished_s.unwrap() - sized.start_s;
    // 400 kB through a 10 Mbit/s bottleneck shared with two bulk flows and 2 Mbit/s of UDP.
    assert!(fct > 0.4 && fct < 3.5, "FCT {fct}");
    check_udp_lossless(rb, ra, 4);
    check_udp_lossless(rb, ra, 5);
    // Into the bottleneck: the tbf dropped and queued.
    let q = &ra.qdiscs[0];
    let q0 = &ra.qdiscs_at_start[0];
    assert_eq!(q.kind, "tbf");
    assert!(q.drops > q0.drops, "{q:?}");
    assert!(q.sent_bytes - q0.sent_bytes > 4_000_000, "{q:?}");
    let qs = &ra.qdisc_samples;
    assert_eq!(qs.t_s.len(), 49);
    assert!(
        qs.backlog_bytes.iter().any(|&b| b > 10_000),
        "{:?}",
        qs.backlog_bytes
    );
    assert!(qs.qlen_pkts.iter().all(|&n| n <= 20));
    assert!(qs.drops.windows(2).all(|w| w[0] <= w[1]));
    let u = ra.udp.iter().find(|u| u.flow == 3).unwrap();
    let r = rb.sink_udp.iter().find(|x| x.flow == 3).unwrap();
    assert!(r.pkts <= u.pkts && r.pkts > u.pkts / 2, "{u:?} {r:?}");
    assert_eq!(rb.qdiscs[0].kind, "noqueue");
    assert!(ra.sysctls.contains_key("net.ipv4.tcp_no_metrics_save"));
    std::fs::remove_dir_all(&dir).unwrap();
    drop(ns);
}
