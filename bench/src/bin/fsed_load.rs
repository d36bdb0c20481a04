//! Load on `macroflowd`: the daemon in process (its own thread and tokio runtime, current-thread as
//! `macroflowd` runs it, on a socket in a temporary folder), C clients (`fsed::client::Client`, the
//! blocking client the Python module and the C library wrap) spread over T threads, each client
//! one rate flow in one of G groups (`label:load-g<i mod G>`, the daemon's default algorithm unless
//! `--algorithm` says otherwise), sending UpdateRate (its controller's rate, a seeded random walk
//! of +-5 % per update within 0.1-1000 Mbit/s; RTT 20 ms) at a target aggregate rate, open loop:
//! each thread sends its share on a fixed schedule, one request outstanding per thread, round
//! robin over its clients (`--rate 0`: closed loop, as fast as the replies come).
//!
//! Every `--report-s` seconds it prints the updates per second achieved, the latency of one
//! update (request written to reply read, an HDR histogram in ns) at p50, p99 and p99.9, the same
//! counted from when the schedule wanted the request sent (what a sender that must not fall behind
//! sees), the process's RSS (`VmRSS`; it must stay flat), and the CPU of the daemon's thread, of the
//! client threads and of the whole machine (other jobs' share is the rest).
//!
//! At the end, the peers in the same run: the same workload (the same groups, flows, rates and
//! per-thread order, simulated time advancing at the target rate) as in-process calls of
//! `coupling::fse::FseGroup::update` (the library the daemon runs), and as in-process calls of
//! `fsed::daemon::Daemon::handle` (the daemon's state machine without the socket), each for as many
//! updates as the daemon served (at least 1e6, at most 2e7). Ratios: the CPU the machine spent per
//! update through the daemon (its thread plus the client threads) and the median latency, each
//! over the library's ns per update. And the floor of any blocking request and reply here: two
//! threads echoing frames of an UpdateRate's size over a Unix socket pair (µs and CPU µs per round
//! trip).
//!
//! Exits with status 1 (after writing the JSON) if any request failed, the achieved rate is below
//! 99 % of the target, or the RSS at the end exceeds the first interval's by more than 5 % + 2 MiB.
//!
//! Usage: `fsed_load [--rate N] [--duration-s S] [--clients C] [--threads T] [--groups G]
//! [--algorithm A] [--report-s S] [--seed S] [--json PATH]` (defaults: 100,000 updates/s, 600 s,
//! 1,000 clients, 16 threads, 10 groups, the daemon's default algorithm, 10 s, seed 1,
//! `bench/results/fsed_load.json`).

use coupling::fse::{FseGroup, FseUpdate};
use coupling::{Duration as CDuration, FlowId, Instant as CInstant};
use fsed::client::Client;
use fsed::config::Config;
use fsed::daemon::Daemon;
use fsed::proto::{GroupSpec, Op, RateAlgorithm, ReplyBody, VERSION};
use hdrhistogram::Histogram;
use macroflow_bench::machine;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg32;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

const RTT_US: u64 = 20_000;
const DAEMON_THREAD: &str = "fsed-daemon";
const LOAD_THREAD: &str = "fsed-load";

#[derive(Clone, Debug)]
struct Args {
    rate: u64,
    /// Flows per client; above 1 a client reports all its flows in one pipelined write
    /// (`Client::update_rates`), as an application with several flows would.
    flows_per_client: usize,
    duration_s: f64,
    clients: usize,
    threads: usize,
    groups: usize,
    algorithm: Option<RateAlgorithm>,
    report_s: f64,
    seed: u64,
    json: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rate: 100_000,
        flows_per_client: 1,
        duration_s: 600.0,
        clients: 1000,
        threads: 16,
        groups: 10,
        algorithm: None,
        report_s: 10.0,
        seed: 1,
        json: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/fsed_load.json"),
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args
            .get(i + 1)
            .ok_or_else(|| format!("{}: a value is missing", args[i]))?
            .replace('_', "");
        let bad = |what: &str| format!("{} {v}: expected {what}", args[i]);
        match args[i].as_str() {
            "--rate" => a.rate = v.parse().map_err(|_| bad("updates per second"))?,
            "--duration-s" => a.duration_s = v.parse().map_err(|_| bad("seconds"))?,
            "--clients" => a.clients = v.parse().map_err(|_| bad("a count"))?,
            "--flows-per-client" => a.flows_per_client = v.parse().map_err(|_| bad("a count"))?,
            "--threads" => a.threads = v.parse().map_err(|_| bad("a count"))?,
            "--groups" => a.groups = v.parse().map_err(|_| bad("a count"))?,
            "--algorithm" => {
                a.algorithm =
                    Some(RateAlgorithm::from_name(&v).ok_or_else(|| {
                        bad("active, conservative_active, simple_passive or passive")
                    })?)
            }
            "--report-s" => a.report_s = v.parse().map_err(|_| bad("seconds"))?,
            "--seed" => a.seed = v.parse().map_err(|_| bad("a number"))?,
            "--json" => a.json = PathBuf::from(&args[i + 1]),
            other => return Err(format!("unknown option {other}")),
        }
        i += 2;
    }
    if a.clients == 0 || a.threads == 0 || a.groups == 0 || a.threads > a.clients {
        return Err("need 1 <= threads <= clients and groups >= 1".into());
    }
    if a.flows_per_client == 0 {
        return Err("--flows-per-client: at least 1".into());
    }
    if !(a.duration_s > 0.0 && a.report_s > 0.0) {
        return Err("durations must be positive".into());
    }
    Ok(a)
}

/// The configuration the daemon runs: its defaults, with room for every client's flow.
fn config_text(a: &Args) -> String {
    let alg = a.algorithm.map_or_else(
        || Config::default().default_algorithm,
        |x| x.name().to_string(),
    );
    format!(
        "default_algorithm = \"{alg}\"\nmax_clients = {}\n\n[default_user]\nmax_flows = {}\n",
        a.clients + 16,
        a.clients * a.flows_per_client
    )
}

/// The clients of load thread `k` (global indices) and the group of client `i`.
fn clients_of(a: &Args, k: usize) -> Vec<usize> {
    (k..a.clients).step_by(a.threads).collect()
}

fn group_label(a: &Args, i: usize) -> String {
    format!("load-g{}", i % a.groups)
}

/// One thread's stream of (client position, cc rate): a random walk per client.
struct Walk {
    rng: Pcg32,
    rates: Vec<f64>,
    n: usize,
}

impl Walk {
    fn new(seed: u64, k: usize, clients: usize) -> Walk {
        let mut rng = Pcg32::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(k as u64));
        let rates = (0..clients)
            .map(|_| 10f64.powf(rng.random_range(6.0..8.0)))
            .collect();
        Walk { rng, rates, n: 0 }
    }

    fn next(&mut self) -> (usize, f64) {
        let j = self.n % self.rates.len();
        self.n += 1;
        let r = &mut self.rates[j];
        *r = (*r * (1.0 + self.rng.random_range(-0.05..0.05))).clamp(1e5, 1e9);
        (j, *r)
    }
}

/// Latencies in ns, 1 ns to 2 hours (a sender falling behind its schedule for the whole run).
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 7_200_000_000_000, 3).expect("valid bounds")
}

/// What a load thread shares with the reporter.
struct Shared {
    updates: AtomicU64,
    errors: AtomicU64,
    /// Per thread: (request-to-reply, schedule-to-reply) of the current interval.
    hists: Vec<Mutex<(Histogram<u64>, Histogram<u64>)>>,
    first_error: Mutex<Option<String>>,
    stop: AtomicBool,
}

fn pct(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

/// CPU jiffies of threads whose name starts with `prefix`, and their context switches.
fn cpu_of(prefix: &str) -> (u64, u64, u64) {
    machine::threads()
        .into_iter()
        .filter(|t| t.0.starts_with(prefix))
        .fold((0, 0, 0), |acc, t| (acc.0 + t.1, acc.1 + t.2, acc.2 + t.3))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// The same workload on in-process `FseGroup`s: ns per update.
fn peer_library(a: &Args, updates: u64, dt_ns: f64) -> (f64, f64) {
    let alg = a
        .algorithm
        .unwrap_or_else(|| Config::default().default_algorithm())
        .to_fse();
    let mut groups: Vec<FseGroup> = (0..a.groups).map(|_| FseGroup::new(alg)).collect();
    for i in 0..a.clients {
        groups[i % a.groups]
            .register(FlowId(i as u64 + 1), 1.0, 1e6, CInstant::ZERO)
            .expect("registers");
    }
    let lists: Vec<Vec<usize>> = (0..a.threads).map(|k| clients_of(a, k)).collect();
    let mut walks: Vec<Walk> = (0..a.threads)
        .map(|k| Walk::new(a.seed, k, lists[k].len()))
        .collect();
    let rtt = CDuration::from_micros(RTT_US);
    let mut checksum = 0.0;
    let t0 = Instant::now();
    let mut n = 0u64;
    'outer: loop {
        for k in 0..a.threads {
            if n == updates {
                break 'outer;
            }
            let (j, cc) = walks[k].next();
            let i = lists[k][j];
            let now = CInstant::from_nanos(1 + (n as f64 * dt_ns) as u64);
            let out = groups[i % a.groups]
                .update(FlowId(i as u64 + 1), FseUpdate::new(cc, now).rtt(rtt))
                .expect("valid update");
            checksum += out.rate_bps;
            n += 1;
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / updates as f64;
    (ns, checksum)
}

/// The same workload through `Daemon::handle` in process (no socket): ns per update.
fn peer_daemon_logic(a: &Args, updates: u64, dt_ns: f64) -> (f64, f64) {
    let mut d = Daemon::new(Config::parse(&config_text(a)).expect("valid")).expect("valid");
    let mut flows = vec![0u64; a.clients];
    for (i, f) in flows.iter_mut().enumerate() {
        let c = i as u64 + 1;
        d.connect(c, 0).expect("room");
        d.handle(c, Op::Hello { version: VERSION }, CInstant::ZERO);
        match d
            .handle(
                c,
                Op::RegisterRate {
                    group: GroupSpec::Configured(group_label(a, i)),
                    priority: 1.0,
                    initial_rate_bps: 1e6,
                    desired_rate_bps: None,
                    algorithm: None,
                    timeout_ms: None,
                },
                CInstant::ZERO,
            )
            .reply
        {
            ReplyBody::Registered { flow, .. } => *f = flow,
            other => panic!("register: {other:?}"),
        }
    }
    let lists: Vec<Vec<usize>> = (0..a.threads).map(|k| clients_of(a, k)).collect();
    let mut walks: Vec<Walk> = (0..a.threads)
        .map(|k| Walk::new(a.seed, k, lists[k].len()))
        .collect();
    let mut checksum = 0.0;
    let t0 = Instant::now();
    let mut n = 0u64;
    'outer: loop {
        for k in 0..a.threads {
            if n == updates {
                break 'outer;
            }
            let (j, cc) = walks[k].next();
            let i = lists[k][j];
            // The soft state: at most 1 s of simulated time between two updates of a flow.
            let now = CInstant::from_nanos(1 + (n as f64 * dt_ns) as u64);
            match d
                .handle(
                    i as u64 + 1,
                    Op::UpdateRate {
                        flow: flows[i],
                        cc_rate_bps: cc,
                        desired_rate_bps: None,
                        rtt_us: Some(RTT_US),
                    },
                    now,
                )
                .reply
            {
                ReplyBody::Rate { rate_bps } => checksum += rate_bps,
                other => panic!("update: {other:?}"),
            }
            n += 1;
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / updates as f64;
    (ns, checksum)
}

/// The floor of a blocking request and reply on this machine: one thread echoing frames of an
/// UpdateRate's size over a Unix socket pair to another, closed loop, `n` round trips. Returns (us
/// per round trip, CPU us per round trip of both threads together).
fn peer_pingpong(n: u64) -> (f64, f64) {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let (mut a, mut b) = UnixStream::pair().expect("a socket pair");
    let echo = std::thread::Builder::new()
        .name("fsed-pingpong".into())
        .spawn(move || {
            let t0 = machine::this_thread();
            let mut buf = [0u8; 64];
            loop {
                let mut prefix = [0u8; 4];
                if b.read_exact(&mut prefix).is_err() {
                    break;
                }
                let len = u32::from_be_bytes(prefix) as usize;
                if b.read_exact(&mut buf[..len]).is_err() {
                    break;
                }
                // A reply of a Rate's size.
                let mut out = [0u8; 4 + 10];
                out[..4].copy_from_slice(&10u32.to_be_bytes());
                if b.write_all(&out).is_err() {
                    break;
                }
            }
            machine::this_thread().0 - t0.0
        })
        .expect("a thread");
    let req = fsed::proto::encode(&fsed::proto::Request {
        id: 7,
        op: Op::UpdateRate {
            flow: 123,
            cc_rate_bps: 12_345_678.9,
            desired_rate_bps: None,
            rtt_us: Some(RTT_US),
        },
    });
    let c0 = machine::this_thread();
    let t0 = Instant::now();
    let mut reply = [0u8; 14];
    for _ in 0..n {
        a.write_all(&req).expect("write");
        a.read_exact(&mut reply[..4]).expect("read");
        a.read_exact(&mut reply[4..]).expect("read");
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let mine = machine::this_thread().0 - c0.0;
    drop(a);
    let theirs = echo.join().expect("the echo thread");
    let cpu_us = (mine + theirs) as f64 / machine::USER_HZ * 1e6 / n as f64;
    (us, cpu_us)
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fsed_load: {e}");
            return ExitCode::from(2);
        }
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let load_before = machine::loadavg();
    println!(
        "fsed_load: {} clients over {} threads in {} groups, target {} updates/s{}, {} s; {} CPUs, \
         kernel {}, load average {:.2} {:.2} {:.2}",
        a.clients,
        a.threads,
        a.groups,
        a.rate,
        if a.rate == 0 { " (closed loop)" } else { "" },
        a.duration_s,
        machine::nproc(),
        machine::kernel(),
        load_before[0],
        load_before[1],
        load_before[2]
    );
    let rss_before_daemon = machine::rss_bytes();

    // The daemon.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("fsed.sock");
    let config = Config::parse(&config_text(&a)).expect("a valid configuration");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let p = path.clone();
    let daemon = std::thread::Builder::new()
        .name(DAEMON_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            rt.block_on(async move {
                let socket = fsed::server::bind(&p, 0o600).expect("bind");
                ready_tx.send(()).expect("main waits");
                fsed::server::serve(socket, config, async {
                    let _ = stop_rx.await;
                })
                .await
                .expect("serve")
            })
        })
        .expect("a thread");
    ready_rx.recv().expect("the daemon starts");

    // The clients: connect and register, then wait for the start.
    let shared = Arc::new(Shared {
        updates: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        hists: (0..a.threads)
            .map(|_| Mutex::new((histogram(), histogram())))
            .collect(),
        first_error: Mutex::new(None),
        stop: AtomicBool::new(false),
    });
    let barrier = Arc::new(Barrier::new(a.threads + 1));
    let start_at: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let setup_t0 = Instant::now();
    let workers: Vec<_> = (0..a.threads)
        .map(|k| {
            let (a, shared, barrier, start_at, path) = (
                a.clone(),
                shared.clone(),
                barrier.clone(),
                start_at.clone(),
                path.clone(),
            );
            std::thread::Builder::new()
                .name(format!("{LOAD_THREAD}-{k}"))
                .spawn(move || {
                    let mine = clients_of(&a, k);
                    let mut conns = Vec::with_capacity(mine.len());
                    for &i in &mine {
                        let mut c = Client::connect(&path).expect("connect");
                        let mut flows = Vec::with_capacity(a.flows_per_client);
                        for _ in 0..a.flows_per_client {
                            let r = c
                                .register_rate(
                                    GroupSpec::Configured(group_label(&a, i)),
                                    1.0,
                                    1e6,
                                    None,
                                    None,
                                    None,
                                )
                                .expect("register");
                            flows.push(r.flow);
                        }
                        conns.push((c, flows));
                    }
                    let mut walk = Walk::new(a.seed, k, mine.len());
                    // Every client is registered; then the start is set.
                    barrier.wait();
                    barrier.wait();
                    let start = *start_at.get().expect("set before the barrier");
                    let end = start + Duration::from_secs_f64(a.duration_s);
                    // One step updates one client's flows (one update, or a pipelined batch).
                    let per_thread = a.rate as f64 / a.threads as f64 / a.flows_per_client as f64;
                    let interval = if a.rate == 0 { 0.0 } else { 1e9 / per_thread };
                    let mut n = 0u64;
                    loop {
                        let now = Instant::now();
                        let sched = if a.rate == 0 {
                            now
                        } else {
                            let s = start + Duration::from_nanos((n as f64 * interval) as u64);
                            if s > now {
                                std::thread::sleep(s - now);
                            }
                            s
                        };
                        if shared.stop.load(Relaxed) {
                            break;
                        }
                        if sched >= end {
                            // Alive (and counted in /proc) until the last report is taken.
                            std::thread::sleep(Duration::from_millis(1));
                            continue;
                        }
                        let (j, cc) = walk.next();
                        let (c, flows) = &mut conns[j];
                        let t0 = Instant::now();
                        let results: Vec<Result<f64, String>> = if flows.len() == 1 {
                            vec![c
                                .update_rate(flows[0], cc, None, Some(RTT_US))
                                .map_err(|e| e.to_string())]
                        } else {
                            let ups: Vec<_> = flows
                                .iter()
                                .enumerate()
                                .map(|(q, &f)| {
                                    (f, cc * (1.0 + 0.01 * q as f64), None, Some(RTT_US))
                                })
                                .collect();
                            match c.update_rates(&ups) {
                                Ok(rs) => rs
                                    .into_iter()
                                    .map(|r| r.map_err(|e| e.to_string()))
                                    .collect(),
                                Err(e) => vec![Err(e.to_string())],
                            }
                        };
                        let t1 = Instant::now();
                        for r in results {
                            match r {
                                Ok(_) => {
                                    let mut h = shared.hists[k].lock().expect("not poisoned");
                                    h.0.saturating_record((t1 - t0).as_nanos() as u64);
                                    h.1.saturating_record((t1 - sched).as_nanos() as u64);
                                    drop(h);
                                    shared.updates.fetch_add(1, Relaxed);
                                }
                                Err(e) => {
                                    shared.errors.fetch_add(1, Relaxed);
                                    let mut f = shared.first_error.lock().expect("not poisoned");
                                    if f.is_none() {
                                        *f = Some(format!("client {}: {e}", mine[j]));
                                    }
                                }
                            }
                        }
                        n += 1;
                    }
                    drop(conns);
                })
                .expect("a thread")
        })
        .collect();
    // The start is set once every client registered (the first barrier waits for them).
    barrier.wait();
    let start = Instant::now() + Duration::from_millis(20);
    let _ = start_at.set(start);
    barrier.wait();
    let setup_s = setup_t0.elapsed().as_secs_f64();
    let rss_after_setup = machine::rss_bytes();
    println!(
        "{} clients connected and registered in {setup_s:.1} s; RSS {:.1} MiB before the daemon, \
         {:.1} MiB now",
        a.clients,
        mib(rss_before_daemon),
        mib(rss_after_setup)
    );

    // The reports.
    let mut total = (histogram(), histogram());
    let mut intervals = Vec::new();
    let mut last_updates = 0u64;
    let (mut last_d, mut last_l) = (cpu_of(DAEMON_THREAD), cpu_of(LOAD_THREAD));
    let cpu0 = (last_d, last_l);
    let (busy0, total0) = machine::machine_jiffies();
    let (mut last_busy, mut last_total) = (busy0, total0);
    let mut last_t = start;
    let mut k = 1u64;
    println!(
        "{:>6} {:>10} {:>9} {:>9} {:>9} {:>11} {:>11} {:>9} {:>8} {:>8} {:>8}",
        "t s",
        "updates/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "sched p99",
        "sched p99.9",
        "RSS MiB",
        "daemon%",
        "clients%",
        "machine%"
    );
    loop {
        let due = start + Duration::from_secs_f64((k as f64 * a.report_s).min(a.duration_s));
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let t = Instant::now();
        let updates = shared.updates.load(Relaxed);
        let mut iv = (histogram(), histogram());
        for h in &shared.hists {
            let mut h = h.lock().expect("not poisoned");
            iv.0.add(&h.0).expect("same bounds");
            iv.1.add(&h.1).expect("same bounds");
            h.0.reset();
            h.1.reset();
        }
        total.0.add(&iv.0).expect("same bounds");
        total.1.add(&iv.1).expect("same bounds");
        let (d, l) = (cpu_of(DAEMON_THREAD), cpu_of(LOAD_THREAD));
        let (busy, tot) = machine::machine_jiffies();
        let secs = (t - last_t).as_secs_f64();
        let rate = (updates - last_updates) as f64 / secs;
        let cores = |j: u64| j as f64 / machine::USER_HZ / secs * 100.0;
        let machine_pct = if tot > last_total {
            (busy - last_busy) as f64 / (tot - last_total) as f64 * machine::nproc() as f64 * 100.0
        } else {
            f64::NAN
        };
        let rss = machine::rss_bytes();
        let elapsed = (t - start).as_secs_f64();
        println!(
            "{:>6.0} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>11.1} {:>9.1} {:>8.0} {:>8.0} {:>8.0}",
            elapsed,
            rate,
            pct(&iv.0, 0.5),
            pct(&iv.0, 0.99),
            pct(&iv.0, 0.999),
            pct(&iv.1, 0.99),
            pct(&iv.1, 0.999),
            mib(rss),
            cores(d.0 - last_d.0),
            cores(l.0 - last_l.0),
            machine_pct
        );
        intervals.push(serde_json::json!({
            "t_s": elapsed,
            "updates_per_s": rate,
            "p50_us": pct(&iv.0, 0.5),
            "p99_us": pct(&iv.0, 0.99),
            "p999_us": pct(&iv.0, 0.999),
            "max_us": iv.0.max() as f64 / 1e3,
            "sched_p50_us": pct(&iv.1, 0.5),
            "sched_p99_us": pct(&iv.1, 0.99),
            "sched_p999_us": pct(&iv.1, 0.999),
            "rss_bytes": rss,
            "daemon_thread_cpu_pct": cores(d.0 - last_d.0),
            "client_threads_cpu_pct": cores(l.0 - last_l.0),
            "machine_busy_pct_of_one_cpu": machine_pct,
        }));
        last_updates = updates;
        last_t = t;
        last_d = d;
        last_l = l;
        last_busy = busy;
        last_total = tot;
        if elapsed >= a.duration_s - 1e-3 {
            break;
        }
        k += 1;
    }
    shared.stop.store(true, Relaxed);
    for w in workers {
        w.join().expect("a load thread");
    }
    let elapsed = (last_t - start).as_secs_f64();
    let updates = shared.updates.load(Relaxed);
    let errors = shared.errors.load(Relaxed);
    let (busy1, total1) = machine::machine_jiffies();
    let (d1, l1) = (last_d, last_l);
    let rss_end = machine::rss_bytes();
    let load_after = machine::loadavg();
    // Give the daemon a moment to see the connections close, then stop it.
    std::thread::sleep(Duration::from_millis(200));
    let _ = stop_tx.send(());
    let stats = daemon.join().expect("the daemon thread");

    let achieved = updates as f64 / elapsed;
    let daemon_cpu_s = (d1.0 - cpu0.0 .0) as f64 / machine::USER_HZ;
    let client_cpu_s = (l1.0 - cpu0.1 .0) as f64 / machine::USER_HZ;
    let us_per = |s: f64| s * 1e6 / updates.max(1) as f64;
    let machine_busy_cpu_s = (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64
        * machine::nproc() as f64
        * elapsed;
    let others_cpu_s = (machine_busy_cpu_s - daemon_cpu_s - client_cpu_s).max(0.0);
    let ctx_d = (d1.1 - cpu0.0 .1, d1.2 - cpu0.0 .2);
    let ctx_l = (l1.1 - cpu0.1 .1, l1.2 - cpu0.1 .2);
    println!(
        "{updates} updates in {elapsed:.1} s: {achieved:.0} updates/s (target {}), {errors} errors",
        a.rate
    );
    println!(
        "latency, request to reply: p50 {:.1} us, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
        pct(&total.0, 0.5),
        pct(&total.0, 0.9),
        pct(&total.0, 0.99),
        pct(&total.0, 0.999),
        total.0.max() as f64 / 1e3
    );
    println!(
        "latency from the schedule: p50 {:.1} us, p99 {:.1}, p99.9 {:.1}",
        pct(&total.1, 0.5),
        pct(&total.1, 0.99),
        pct(&total.1, 0.999)
    );
    let first_rss = intervals
        .first()
        .and_then(|v| v["rss_bytes"].as_u64())
        .unwrap_or(rss_after_setup);
    println!(
        "RSS: {:.1} MiB before the daemon, {:.1} after setup, {:.1} after the first interval, {:.1} at the end",
        mib(rss_before_daemon),
        mib(rss_after_setup),
        mib(first_rss),
        mib(rss_end)
    );
    println!(
        "CPU per update: daemon thread {:.2} us, client threads {:.2} us; other processes used \
         {others_cpu_s:.0} CPU s of {:.0} ({:.0} %); context switches per update: daemon {:.2} \
         voluntary {:.2} involuntary, clients {:.2} {:.2}",
        us_per(daemon_cpu_s),
        us_per(client_cpu_s),
        machine::nproc() as f64 * elapsed,
        others_cpu_s / (machine::nproc() as f64 * elapsed) * 100.0,
        ctx_d.0 as f64 / updates.max(1) as f64,
        ctx_d.1 as f64 / updates.max(1) as f64,
        ctx_l.0 as f64 / updates.max(1) as f64,
        ctx_l.1 as f64 / updates.max(1) as f64,
    );
    println!("daemon: {stats:?}");

    // The peers, in this run.
    let peer_n = updates.clamp(1_000_000, 20_000_000);
    let dt_ns = 1e9 / if a.rate == 0 { achieved } else { a.rate as f64 };
    let (lib_ns, lib_sum) = peer_library(&a, peer_n, dt_ns);
    let (logic_ns, logic_sum) = peer_daemon_logic(&a, peer_n, dt_ns);
    let (pp_us, pp_cpu_us) = peer_pingpong(200_000);
    println!(
        "the floor, a blocking request and reply over a Unix socket pair between two threads: \
         {pp_us:.1} us per round trip, {pp_cpu_us:.1} CPU us"
    );
    let cpu_us = us_per(daemon_cpu_s + client_cpu_s);
    let p50_us = pct(&total.0, 0.5);
    println!(
        "in process, {peer_n} updates of the same workload: FseGroup::update {lib_ns:.0} ns, \
         Daemon::handle {logic_ns:.0} ns per update (checksums {lib_sum:.3e}, {logic_sum:.3e})"
    );
    let ratio_cpu = cpu_us * 1e3 / lib_ns;
    let ratio_daemon_cpu = us_per(daemon_cpu_s) * 1e3 / lib_ns;
    let ratio_p50 = p50_us * 1e3 / lib_ns;
    println!(
        "ratio, through the daemon over in-process FseGroup::update: CPU per update {ratio_cpu:.0}x \
         ({cpu_us:.2} us / {:.3} us; the daemon's thread alone {ratio_daemon_cpu:.0}x), median \
         latency {ratio_p50:.0}x ({p50_us:.1} us / {:.3} us)",
        lib_ns / 1e3,
        lib_ns / 1e3
    );

    let target_met = a.rate == 0 || achieved >= 0.99 * a.rate as f64;
    let rss_flat = (rss_end as f64) <= first_rss as f64 * 1.05 + 2.0 * (1u64 << 20) as f64;
    let first_error = shared.first_error.lock().expect("not poisoned").clone();
    let mut json = machine::facts(&command, load_before, load_after);
    json.extend(
        serde_json::json!({
        "config": {
            "rate": a.rate, "duration_s": a.duration_s, "clients": a.clients,
            "flows_per_client": a.flows_per_client,
            "threads": a.threads, "groups": a.groups,
            "algorithm": a.algorithm.map_or_else(|| Config::default().default_algorithm, |x| x.name().to_string()),
            "rtt_us": RTT_US, "seed": a.seed, "daemon_config": config_text(&a),
        },
        "setup_s": setup_s,
        "elapsed_s": elapsed,
        "updates": updates,
        "errors": errors,
        "first_error": first_error,
        "updates_per_s": achieved,
        "target_met": target_met,
        "latency_us": {
            "p50": pct(&total.0, 0.5), "p90": pct(&total.0, 0.9), "p99": pct(&total.0, 0.99),
            "p999": pct(&total.0, 0.999), "max": total.0.max() as f64 / 1e3, "mean": total.0.mean() / 1e3,
        },
        "latency_from_schedule_us": {
            "p50": pct(&total.1, 0.5), "p99": pct(&total.1, 0.99), "p999": pct(&total.1, 0.999),
            "max": total.1.max() as f64 / 1e3,
        },
        "rss_bytes": {
            "before_daemon": rss_before_daemon, "after_setup": rss_after_setup,
            "first_interval": first_rss, "end": rss_end, "peak": machine::peak_rss_bytes(),
            "flat": rss_flat,
        },
        "cpu": {
            "daemon_thread_s": daemon_cpu_s, "client_threads_s": client_cpu_s,
            "other_processes_s": others_cpu_s, "machine_cpu_s_available": machine::nproc() as f64 * elapsed,
            "daemon_us_per_update": us_per(daemon_cpu_s), "clients_us_per_update": us_per(client_cpu_s),
            "daemon_voluntary_ctxsw_per_update": ctx_d.0 as f64 / updates.max(1) as f64,
            "daemon_involuntary_ctxsw_per_update": ctx_d.1 as f64 / updates.max(1) as f64,
            "clients_voluntary_ctxsw_per_update": ctx_l.0 as f64 / updates.max(1) as f64,
            "clients_involuntary_ctxsw_per_update": ctx_l.1 as f64 / updates.max(1) as f64,
        },
        "daemon_stats": {
            "connections": stats.connections.load(Relaxed),
            "refused_connections": stats.refused_connections.load(Relaxed),
            "requests": stats.requests.load(Relaxed),
            "error_replies": stats.error_replies.load(Relaxed),
            "pushes": stats.pushes.load(Relaxed),
            "pushes_dropped": stats.pushes_dropped.load(Relaxed),
            "closed_for_errors": stats.closed_for_errors.load(Relaxed),
        },
        "peer": {
            "updates": peer_n,
            "fsegroup_update_ns": lib_ns,
            "daemon_handle_in_process_ns": logic_ns,
            "socket_pingpong_us": pp_us,
            "socket_pingpong_cpu_us": pp_cpu_us,
            "ratio_cpu_per_update": ratio_cpu,
            "ratio_daemon_thread_cpu_per_update": ratio_daemon_cpu,
            "ratio_p50_latency": ratio_p50,
        },
        "intervals": intervals,
        })
        .as_object()
        .expect("an object literal")
        .clone(),
    );
    let json = serde_json::Value::Object(json);
    match serde_json::to_string_pretty(&json) {
        Ok(text) if machine::parent_exists(&a.json) => {
            if let Err(e) = std::fs::write(&a.json, text + "\n") {
                eprintln!("cannot write {}: {e}", a.json.display());
                return ExitCode::from(2);
            }
            println!("wrote {}", a.json.display());
        }
        _ => {
            eprintln!("cannot write {}", a.json.display());
            return ExitCode::from(2);
        }
    }
    let mut ok = true;
    if errors > 0 {
        eprintln!("FAIL: {errors} requests failed; the first: {first_error:?}");
        ok = false;
    }
    if !target_met {
        eprintln!(
            "FAIL: {achieved:.0} updates/s achieved, below the target {} (99 %)",
            a.rate
        );
        ok = false;
    }
    if !rss_flat {
        eprintln!(
            "FAIL: RSS grew from {:.1} MiB after the first interval to {:.1} MiB",
            mib(first_rss),
            mib(rss_end)
        );
        ok = false;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
