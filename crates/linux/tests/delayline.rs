//! The delay line (issue 15) on a real testbed of network namespaces: two hosts `A` and `B`, and
//! the wire namespace `W` in between (A's veth `x` <-> `a` in W, B's `y` <-> `b` in W). The delay
//! line runs as its own process in W (this test binary, re-run as the ignored test
//! `delayline_process`), as the orchestrator runs it.
//!
//! The one-way delay of the wire is measured exactly with kernel timestamps: a UDP probe from A
//! is stamped when A's veth takes it (SO_TIMESTAMPING, software transmit: after A's qdisc, so
//! the queueing at A's tbf is not counted) and when B's veth receives it (SO_TIMESTAMPNS); both
//! stamps are the kernel's CLOCK_REALTIME, so the difference is the wire's delay and nothing else.
//!
//! - `smoke` (root only; skips otherwise): delay both ways, never early and within 0.5 ms, the
//!   Bernoulli loss, the report's accounting. A few seconds.
//! - `bench` (ignored; root; needs ethtool, and ping for the ping figures): the issue's
//!   measurement at a rate: idle and loaded (a TCP bulk flow through A's tbf), probes, ping, the
//!   delay line's own statistics and CPU. `DL_RATE_MBIT` (default 100), `DL_DELAY_MS` (10),
//!   `DL_SECS` (10). Run: `cargo test --release -p macroflow-linux --test delayline bench --
//!   --ignored --nocapture`.
//!
//! Namespaces are named `hdl-<pid><tag>-{a,b,w}` and deleted when a test ends.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::mem::{size_of, zeroed};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ADDR_A: &str = "10.199.0.1";
const ADDR_B: &str = "10.199.0.2";
const CHILD_ENV: &str = "MACROFLOW_DELAYLINE_CONFIG";

/// The delay line process: the orchestrator's `_linux_main(["delayline", path])`, here the test
/// binary run again with this one test and the configuration in the environment.
#[test]
#[ignore = "the delay line process of the other tests"]
fn delayline_process() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        if let Err(e) = linux::delayline::main(std::path::Path::new(&path)) {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}

#[test]
fn missing_interface_is_an_error_naming_wire_and_interface() {
    let dir = tempdir("cfg");
    let cfg = dir.join("c.json");
    let conf = json!({
        "wires": [{"name": "w0", "a": "hdl-none-a", "b": "hdl-none-b", "delay_ab_ns": 1,
                   "delay_ba_ns": 1, "loss_ab": 0.0, "loss_ba": 0.0, "seed": 1}],
        "ready_path": dir.join("ready").to_str().unwrap(),
        "report_path": dir.join("report.json").to_str().unwrap(),
        "late_threshold_ns": 100000,
    });
    std::fs::write(&cfg, conf.to_string()).unwrap();
    let e = linux::delayline::main(&cfg).unwrap_err();
    assert!(e.contains("\"w0\"") && e.contains("\"hdl-none-a\""), "{e}");
    assert!(!dir.join("ready").exists());
    let _ = std::fs::remove_dir_all(dir);
}

fn can_run() -> bool {
    // SAFETY: plain call.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if !(root && ip) {
        println!("skipped: needs root and iproute2 (network namespaces)");
    }
    root && ip
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hdl-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ns_run(ns: &str, args: &[&str]) {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    run(&v);
}

struct BedConfig {
    rate_mbit: Option<u64>,
    offloads_off: bool,
}

struct Testbed {
    a: String,
    b: String,
    w: String,
    dir: PathBuf,
    dl: Option<Child>,
}

impl Testbed {
    fn new(tag: &str, c: &BedConfig) -> Testbed {
        let p = format!("hdl-{}{tag}", std::process::id());
        let bed = Testbed {
            a: format!("{p}-a"),
            b: format!("{p}-b"),
            w: format!("{p}-w"),
            dir: tempdir(tag),
            dl: None,
        };
        for ns in [&bed.a, &bed.b, &bed.w] {
            run(&["ip", "netns", "add", ns]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        // IPv6 off in the wire namespace before its interfaces exist: the kernel sends nothing of
        // its own on them.
        for k in ["all", "default"] {
            // Best effort (no IPv6 in the kernel, no shell): the test does not depend on it.
            let _ = Command::new("ip")
                .args(["netns", "exec", &bed.w, "sh", "-c"])
                .arg(format!("echo 1 > /proc/sys/net/ipv6/conf/{k}/disable_ipv6"))
                .status();
        }
        run(&[
            "ip", "-n", &bed.w, "link", "add", "name", "a", "type", "veth", "peer", "name", "x",
            "netns", &bed.a,
        ]);
        run(&[
            "ip", "-n", &bed.w, "link", "add", "name", "b", "type", "veth", "peer", "name", "y",
            "netns", &bed.b,
        ]);
        run(&[
            "ip",
            "-n",
            &bed.a,
            "addr",
            "add",
            &format!("{ADDR_A}/24"),
            "dev",
            "x",
        ]);
        run(&[
            "ip",
            "-n",
            &bed.b,
            "addr",
            "add",
            &format!("{ADDR_B}/24"),
            "dev",
            "y",
        ]);
        for (ns, dev) in [(&bed.a, "x"), (&bed.b, "y"), (&bed.w, "a"), (&bed.w, "b")] {
            if c.offloads_off {
                ns_run(
                    ns,
                    &[
                        "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    ],
                );
            }
            run(&["ip", "-n", ns, "link", "set", "dev", dev, "up"]);
        }
        if let Some(r) = c.rate_mbit {
            // The link's rate and queue before the wire, as the orchestrator sets them: a burst
            // of a few frames, a queue of 1000 frames.
            let burst = format!("{}", (r * 1_000_000 / 8 / 1000).max(15_000));
            for (ns, dev) in [(&bed.a, "x"), (&bed.b, "y")] {
                ns_run(
                    ns,
                    &[
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        dev,
                        "root",
                        "tbf",
                        "rate",
                        &format!("{r}mbit"),
                        "burst",
                        &burst,
                        "limit",
                        "1514000",
                    ],
                );
            }
        }
        bed
    }

    fn start_delayline(&mut self, delay_ab_ns: u64, delay_ba_ns: u64, loss_ab: f64, loss_ba: f64) {
        let cfg = self.dir.join("delayline.json");
        let ready = self.dir.join("ready");
        let _ = std::fs::remove_file(&ready);
        let conf = json!({
            "wires": [{"name": "w0", "a": "a", "b": "b", "delay_ab_ns": delay_ab_ns,
                       "delay_ba_ns": delay_ba_ns, "loss_ab": loss_ab, "loss_ba": loss_ba,
                       "seed": 7}],
            "ready_path": ready.to_str().unwrap(),
            "report_path": self.dir.join("report.json").to_str().unwrap(),
            "late_threshold_ns": 100_000,
        });
        std::fs::write(&cfg, conf.to_string()).unwrap();
        let exe = std::env::current_exe().unwrap();
        // DL_CHRT=N (bench): the delay line under SCHED_FIFO priority N, for comparison.
        let mut cmd = match std::env::var("DL_CHRT") {
            Ok(prio) => {
                let mut c = Command::new("chrt");
                c.args(["-f", &prio, "ip"]);
                c
            }
            Err(_) => Command::new("ip"),
        };
        let child = cmd
            .args(["netns", "exec", &self.w])
            .arg(exe)
            .args([
                "--exact",
                "delayline_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &cfg)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.dl = Some(child);
        let t0 = Instant::now();
        while !ready.exists() {
            if let Some(st) = self.dl.as_mut().unwrap().try_wait().unwrap() {
                panic!("the delay line exited at start: {st}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the delay line is not ready"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn dl_pid(&self) -> i32 {
        self.dl.as_ref().unwrap().id() as i32
    }

    /// SIGTERM, then the report.
    fn stop_delayline(&mut self) -> Value {
        let mut child = self.dl.take().unwrap();
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{}/stat", child.id())) {
            let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split_whitespace().collect();
            println!(
                "delay line process: {} minor, {} major page faults",
                f[7], f[9]
            );
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = child.wait().unwrap();
        assert!(st.success(), "delay line exit: {st}");
        let text = std::fs::read_to_string(self.dir.join("report.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(mut c) = self.dl.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.a, &self.b, &self.w] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `f` on a thread inside network namespace `ns` (setns is per thread).
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: a namespace descriptor we opened.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

fn realtime_ns() -> i64 {
    // SAFETY: one timespec.
    let mut ts: libc::timespec = unsafe { zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn setsockopt_int(fd: i32, level: i32, name: i32, v: i32) {
    // SAFETY: an int option.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const i32).cast(),
            size_of::<i32>() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "setsockopt {name}: {}",
        std::io::Error::last_os_error()
    );
}

const SO_TIMESTAMPNS_NEW: i32 = 64;
const SO_TIMESTAMPING_NEW: i32 = 65;
const SOF_TX_SOFTWARE: i32 = 1 << 1;
const SOF_SOFTWARE: i32 = 1 << 4;
const SOF_OPT_ID: i32 = 1 << 7;
const SOF_OPT_TSONLY: i32 = 1 << 11;

/// Walks the control messages of `h`: (level, type, data pointer).
fn cmsgs(h: &libc::msghdr) -> Vec<(i32, i32, *const u8)> {
    let mut v = Vec::new();
    // SAFETY: the CMSG macros walk the buffer the kernel filled.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            v.push((
                (*c).cmsg_level,
                (*c).cmsg_type,
                libc::CMSG_DATA(c) as *const u8,
            ));
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    v
}

fn read_ts(p: *const u8) -> i64 {
    // SAFETY: a __kernel_timespec (two i64) at p.
    unsafe {
        let q = p as *const i64;
        q.read_unaligned() * 1_000_000_000 + q.add(1).read_unaligned()
    }
}

#[derive(Default, Debug)]
struct Probe {
    sent: usize,
    received: usize,
    /// B's veth receive stamp minus A's veth transmit stamp: the wire's one-way delay.
    wire_ns: Vec<i64>,
    /// A's veth transmit stamp minus the time of the send call: queueing before the wire.
    queue_ns: Vec<i64>,
}

/// Sends `count` stamped UDP probes from A to B, one every `interval`, and returns the delays.
fn probe(bed: &Testbed, port: u16, count: usize, interval: Duration) -> Probe {
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let rx = in_netns(&bed.b, move || {
        let s = UdpSocket::bind(("0.0.0.0", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        setsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, SO_TIMESTAMPNS_NEW, 1);
        let mut got = vec![None; count];
        let mut quiet_since = None;
        loop {
            let mut buf = [0u8; 64];
            let mut ctrl = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: plain data.
            let mut h: libc::msghdr = unsafe { zeroed() };
            h.msg_iov = &mut iov;
            h.msg_iovlen = 1;
            h.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_controllen = size_of::<[u64; 16]>();
            // SAFETY: buffers live for the call.
            let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut h, 0) };
            if n < 16 {
                if done2.load(Ordering::Relaxed) {
                    let t = *quiet_since.get_or_insert_with(Instant::now);
                    if t.elapsed() > Duration::from_millis(500) {
                        break;
                    }
                }
                continue;
            }
            let seq = u64::from_le_bytes(buf[..8].try_into().unwrap()) as usize;
            for (lvl, ty, p) in cmsgs(&h) {
                if lvl == libc::SOL_SOCKET && ty == SO_TIMESTAMPNS_NEW && seq < count {
                    got[seq] = Some(read_ts(p));
                }
            }
        }
        got
    });
    std::thread::sleep(Duration::from_millis(50));
    let to = ADDR_B.to_string();
    let tx = in_netns(&bed.a, move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect((to.as_str(), port)).unwrap();
        let fd = s.as_raw_fd();
        let flags = SOF_TX_SOFTWARE | SOF_SOFTWARE | SOF_OPT_ID | SOF_OPT_TSONLY;
        setsockopt_int(fd, libc::SOL_SOCKET, SO_TIMESTAMPING_NEW, flags);
        let mut send_at = vec![0i64; count];
        let mut txs = vec![None; count];
        let drain = |txs: &mut Vec<Option<i64>>| loop {
            let mut ctrl = [0u64; 32];
            // SAFETY: plain data.
            let mut h: libc::msghdr = unsafe { zeroed() };
            h.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_controllen = size_of::<[u64; 32]>();
            // SAFETY: control buffer lives for the call.
            let n = unsafe { libc::recvmsg(fd, &mut h, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
            if n < 0 {
                break;
            }
            let (mut stamp, mut id) = (None, None);
            for (lvl, ty, p) in cmsgs(&h) {
                if lvl == libc::SOL_SOCKET && ty == SO_TIMESTAMPING_NEW {
                    stamp = Some(read_ts(p));
                } else if lvl == libc::SOL_IP && ty == libc::IP_RECVERR {
                    // SAFETY: a sock_extended_err.
                    let e = unsafe { (p as *const libc::sock_extended_err).read_unaligned() };
                    id = Some(e.ee_data as usize);
                }
            }
            if let (Some(t), Some(i)) = (stamp, id) {
                if i < txs.len() {
                    txs[i] = Some(t);
                }
            }
        };
        let t0 = Instant::now();
        for (seq, at) in send_at.iter_mut().enumerate() {
            let next = t0 + interval * seq as u32;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            let mut buf = [0u8; 64];
            buf[..8].copy_from_slice(&(seq as u64).to_le_bytes());
            *at = realtime_ns();
            let _ = s.send(&buf);
            drain(&mut txs);
        }
        std::thread::sleep(Duration::from_millis(100));
        drain(&mut txs);
        (send_at, txs)
    });
    let (send_at, txs) = tx.join().unwrap();
    done.store(true, Ordering::Relaxed);
    let rxs = rx.join().unwrap();
    let mut p = Probe {
        sent: count,
        ..Probe::default()
    };
    for i in 0..count {
        if let Some(r) = rxs[i] {
            p.received += 1;
            if let Some(t) = txs[i] {
                p.wire_ns.push(r - t);
                p.queue_ns.push(t - send_at[i]);
            }
        }
    }
    p
}

fn pct(v: &[i64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * q).round() as usize] as f64
}

fn summary_ms(v: &[i64], minus: i64) -> String {
    let d: Vec<i64> = v.iter().map(|x| x - minus).collect();
    let mean = d.iter().sum::<i64>() as f64 / d.len().max(1) as f64;
    format!(
        "n={} min={:.3} mean={:.3} p50={:.3} p99={:.3} p99.9={:.3} max={:.3} ms",
        d.len(),
        pct(&d, 0.0) / 1e6,
        mean / 1e6,
        pct(&d, 0.5) / 1e6,
        pct(&d, 0.99) / 1e6,
        pct(&d, 0.999) / 1e6,
        pct(&d, 1.0) / 1e6,
    )
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Every frame received is accounted for, and the delay line dropped or reordered none.
fn check_accounting(d: &Value) {
    assert_eq!(
        u(d, "rx_pkts"),
        u(d, "tx_pkts")
            + u(d, "lost_pkts")
            + u(d, "truncated_pkts")
            + u(d, "tx_errors_pkts")
            + u(d, "overflow_pkts")
            + u(d, "held_at_end_pkts"),
        "{d}"
    );
    assert_eq!(u(d, "own_drops_pkts"), 0, "{d}");
    assert_eq!(u(d, "reordered_pkts"), 0, "{d}");
}

#[test]
fn smoke() {
    if !can_run() {
        return;
    }
    let mut bed = Testbed::new(
        "s",
        &BedConfig {
            rate_mbit: Some(100),
            offloads_off: false,
        },
    );
    bed.start_delayline(5_000_000, 3_000_000, 0.0, 0.0);
    let p = probe(&bed, 9001, 300, Duration::from_millis(2));
    let report = bed.stop_delayline();
    println!(
        "smoke a->b wire delay minus 5 ms: {}",
        summary_ms(&p.wire_ns, 5_000_000)
    );
    println!(
        "smoke: {} of {} probes received; report {report}",
        p.received, p.sent
    );
    assert_eq!(p.received, p.sent);
    assert!(
        p.wire_ns.len() >= p.sent * 9 / 10,
        "{} tx stamps",
        p.wire_ns.len()
    );
    // Never early (the stamps are taken before and after the delay line's own), and on time.
    assert!(pct(&p.wire_ns, 0.0) >= 5_000_000.0, "{p:?}");
    assert!(pct(&p.wire_ns, 0.5) < 5_500_000.0, "{p:?}");
    let w = &report["wires"][0];
    for d in [&w["ab"], &w["ba"]] {
        check_accounting(d);
    }
    assert!(u(&w["ab"], "tx_pkts") >= 300);

    // Loss: 30 % a->b, seeded; every frame received is either sent or counted lost.
    bed.start_delayline(1_000_000, 1_000_000, 0.3, 0.0);
    let p = probe(&bed, 9002, 2000, Duration::from_micros(500));
    let report = bed.stop_delayline();
    let ab = &report["wires"][0]["ab"];
    check_accounting(ab);
    let (lost, rx) = (u(ab, "lost_pkts") as f64, u(ab, "rx_pkts") as f64);
    let sd = (rx * 0.3 * 0.7).sqrt();
    assert!((lost - 0.3 * rx).abs() < 5.0 * sd, "lost {lost} of {rx}");
    let probe_lost = (p.sent - p.received) as f64;
    assert!(
        probe_lost <= lost,
        "{probe_lost} probes lost, {lost} frames"
    );
}

fn proc_cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime): 12 and 13 after the command name.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Busy and total jiffies of the whole machine (/proc/stat).
fn machine_cpu() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap();
    let v: Vec<u64> = s
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let idle = v[3] + v[4];
    (v.iter().sum::<u64>() - idle, v.iter().sum())
}

fn ping(bed: &Testbed, secs: u64) -> Option<String> {
    let count = secs.to_string();
    let out = Command::new("ip")
        .args([
            "netns", "exec", &bed.a, "ping", "-q", "-i", "0.01", "-w", &count, ADDR_B,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .filter(|l| l.contains("rtt") || l.contains("packet loss"))
        .map(str::to_string)
        .reduce(|a, b| format!("{a}; {b}"))
}

fn env_u64(k: &str, d: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

/// A TCP bulk flow A -> B for `secs`: bytes B received.
fn bulk(bed: &Testbed, port: u16, secs: u64) -> (JoinHandle<u64>, JoinHandle<()>) {
    let sink = in_netns(&bed.b, move || {
        let l = TcpListener::bind(("0.0.0.0", port)).unwrap();
        let (mut c, _) = l.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        total
    });
    std::thread::sleep(Duration::from_millis(100));
    let src = in_netns(&bed.a, move || {
        let mut c = TcpStream::connect((ADDR_B, port)).unwrap();
        let buf = vec![7u8; 1 << 17];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            if c.write_all(&buf).is_err() {
                break;
            }
        }
    });
    (sink, src)
}

#[test]
#[ignore = "measurement (issue 15): run by hand with --ignored --nocapture, as root"]
fn bench() {
    if !can_run() {
        return;
    }
    let rate = env_u64("DL_RATE_MBIT", 100);
    let delay_ms = env_u64("DL_DELAY_MS", 10);
    let secs = env_u64("DL_SECS", 10);
    let delay = delay_ms * 1_000_000;
    let mut bed = Testbed::new(
        "b",
        &BedConfig {
            // 0: no tbf, the delay line's own limit.
            rate_mbit: (rate > 0).then_some(rate),
            offloads_off: true,
        },
    );
    println!("== rate {rate} Mbit/s, delay {delay_ms} ms each way, {secs} s phases");

    bed.start_delayline(delay, delay, 0.0, 0.0);
    let p = probe(&bed, 9100, (secs * 200) as usize, Duration::from_millis(5));
    println!(
        "idle probe: wire delay minus {delay_ms} ms: {}",
        summary_ms(&p.wire_ns, delay as i64)
    );
    if let Some(s) = ping(&bed, secs.min(5)) {
        println!("idle ping (configured RTT {} ms): {s}", 2 * delay_ms);
    }
    let r = bed.stop_delayline();
    println!("idle report a->b: {}", r["wires"][0]["ab"]);

    bed.start_delayline(delay, delay, 0.0, 0.0);
    let pid = bed.dl_pid();
    let (sink, src) = bulk(&bed, 9200, secs + 2);
    std::thread::sleep(Duration::from_secs(1)); // slow start
    let cpu0 = proc_cpu_ticks(pid);
    let m0 = machine_cpu();
    let t0 = Instant::now();
    let pinger = {
        let a = bed.a.clone();
        let count = secs.to_string();
        std::thread::spawn(move || {
            Command::new("ip")
                .args([
                    "netns", "exec", &a, "ping", "-q", "-i", "0.01", "-w", &count, ADDR_B,
                ])
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        })
    };
    let p = probe(&bed, 9101, (secs * 200) as usize, Duration::from_millis(5));
    let ping_loaded = pinger.join().unwrap();
    let cpu_s = (proc_cpu_ticks(pid) - cpu0) as f64 / 100.0;
    let wall = t0.elapsed().as_secs_f64();
    let m1 = machine_cpu();
    let machine_busy = (m1.0 - m0.0) as f64 / (m1.1 - m0.1) as f64;
    src.join().unwrap();
    let bytes = sink.join().unwrap();
    let r = bed.stop_delayline();
    let mbps = bytes as f64 * 8.0 / (secs + 2) as f64 / 1e6;
    println!("loaded: bulk A->B {mbps:.1} Mbit/s goodput (whole flow incl. slow start)");
    println!(
        "loaded probe: wire delay minus {delay_ms} ms: {}",
        summary_ms(&p.wire_ns, delay as i64)
    );
    println!(
        "loaded probe: queueing at A's tbf (before the wire): {}",
        summary_ms(&p.queue_ns, 0)
    );
    if let Some(s) = ping_loaded {
        let l: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("rtt") || l.contains("loss"))
            .collect();
        println!(
            "loaded ping (configured RTT {} ms): {}",
            2 * delay_ms,
            l.join("; ")
        );
    }
    println!(
        "delay line CPU over {wall:.1} s of load: {cpu_s:.2} s ({:.1} % of a core), {:.2} core-s per Gbit/s carried",
        100.0 * cpu_s / wall,
        cpu_s / wall / (mbps / 1000.0)
    );
    println!(
        "machine: {:.0} % of its 2 cores busy during the load",
        100.0 * machine_busy
    );
    for d in ["ab", "ba"] {
        println!("loaded report {d}: {}", r["wires"][0][d]);
        check_accounting(&r["wires"][0][d]);
    }
}
