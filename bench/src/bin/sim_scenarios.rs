//! Runs one dumbbell of the simulator-vs-peers benchmark in macroflow's simulator and prints one
//! JSON line with the same fields as the peer scripts in `bench/peers/`. The scenarios themselves
//! (speed: A, B, C; fidelity: D to N) are defined once, in `bench/peers/common.py`;
//! `bench/sim_vs_peers.py` passes every parameter on the command line.
//!
//! N senders -> R1 -> bottleneck -> R2 -> N receivers, one bulk TCP flow per pair. TCP: IW 10,
//! SACK, minimum RTO 200 ms, no pacing, MSS 1448 (1500-byte packets); delayed ACKs (every second
//! segment, 200 ms timer) unless `--delack 0`. `--loss P` drops each packet entering the
//! bottleneck queue with probability P (data direction only: ACKs use the other direction).
//! `--rwnd-pkts R`: the receiver window (the peers' 8 MiB socket buffers are 5793 segments; without
//! it a flow alone on a link as fast as the bottleneck grows its window, and its own access queue,
//! without bound).
//! `--warmup-s W` (W > 0) also reports the figures over [W, end] alone (`after_warmup`), so a
//! start-up transient can be told apart from the steady state.
//!
//! Usage: `sim_scenarios --scenario NAME --flows N --bottleneck-bps B --bottleneck-delay-s D
//! --access-bps A --access-delays-s D1,D2,... --queue-pkts Q --duration S --cc newreno|cubic
//! --delack 1|0 --loss P --rwnd-pkts R --starts S1,S2,... [--warmup-s W] [--seed N]`

use coupling::{Duration, Instant};
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::transport::cc::CcKind;
use sim::{Sim, TcpFlowConfig};
use std::time::Instant as WallClock;

/// Peak resident memory of this process (VmHWM), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn die(msg: &str) -> ! {
    eprintln!("sim_scenarios: {msg}");
    std::process::exit(2)
}

struct Args(Vec<String>);

impl Args {
    fn raw(&self, flag: &str) -> String {
        let i = self
            .0
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| die(&format!("{flag} is required")));
        self.0
            .get(i + 1)
            .cloned()
            .unwrap_or_else(|| die(&format!("{flag} needs a value")))
    }
    fn num<T: std::str::FromStr>(&self, flag: &str) -> T {
        let v = self.raw(flag);
        v.parse()
            .unwrap_or_else(|_| die(&format!("{flag}: not a number: {v:?}")))
    }
    fn list(&self, flag: &str) -> Vec<f64> {
        self.raw(flag)
            .split(',')
            .map(|x| {
                x.trim()
                    .parse()
                    .unwrap_or_else(|_| die(&format!("{flag}: not a number: {x:?}")))
            })
            .collect()
    }
}

fn secs(s: f64, what: &str) -> Duration {
    if !(s.is_finite() && s >= 0.0) {
        die(&format!("{what}: {s} is not a time >= 0"));
    }
    Duration::from_nanos((s * 1e9).round() as u64)
}

fn main() {
    let args = Args(std::env::args().collect());
    let name = args.raw("--scenario");
    let flows: usize = args.num("--flows");
    let duration_s: f64 = args.num("--duration");
    let has = |flag: &str| args.0.iter().any(|a| a == flag);
    let seed: u64 = if has("--seed") { args.num("--seed") } else { 1 };
    let warmup_s: f64 = if has("--warmup-s") {
        args.num("--warmup-s")
    } else {
        0.0
    };
    if !(0.0..duration_s).contains(&warmup_s) {
        die("--warmup-s: a time in [0, --duration)");
    }
    let delays = args.list("--access-delays-s");
    let starts = args.list("--starts");
    if flows == 0 || delays.len() != flows || starts.len() != flows {
        die(&format!(
            "{flows} flows need {flows} access delays and start times (got {} and {})",
            delays.len(),
            starts.len()
        ));
    }
    let cc = CcKind::from_name(&args.raw("--cc")).unwrap_or_else(|| die("--cc: unknown"));
    let delack = match args.raw("--delack").as_str() {
        "1" => true,
        "0" => false,
        v => die(&format!("--delack: 1 or 0, got {v:?}")),
    };
    let rwnd: f64 = args.num("--rwnd-pkts");
    if !(rwnd.is_finite() && rwnd >= 1.0) {
        die("--rwnd-pkts: a window of at least one segment");
    }
    let loss: f64 = args.num("--loss");
    if !(0.0..1.0).contains(&loss) {
        die("--loss: a probability in [0, 1)");
    }
    let tail = QueueConfig::drop_tail_pkts(args.num("--queue-pkts"));
    let queue = if loss > 0.0 {
        QueueConfig::RandomDrop {
            p: loss,
            inner: Box::new(tail),
        }
    } else {
        tail
    };

    let mut net = Network::default();
    let cfg = DumbbellConfig {
        pairs: flows,
        bottleneck: LinkConfig {
            rate_bps: args.num("--bottleneck-bps"),
            delay: secs(args.num("--bottleneck-delay-s"), "--bottleneck-delay-s"),
            queue,
            jitter: Duration::ZERO,
        },
        access_rate_bps: args.num("--access-bps"),
        access_delays: delays
            .iter()
            .map(|&d| secs(d, "--access-delays-s"))
            .collect(),
        access_queue: QueueConfig::drop_tail_pkts(100_000),
        access_jitter: Duration::ZERO,
    };
    let d = dumbbell(&mut net, &cfg).unwrap_or_else(|e| die(&format!("topology: {e}")));
    let mut sim = Sim::new(net, seed).expect("routed");
    for (i, &start) in starts.iter().enumerate() {
        let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        f.cc = cc;
        f.tcp.delayed_ack = delack;
        f.tcp.rwnd_pkts = rwnd;
        f.start = Instant::ZERO + secs(start, "--starts");
        sim.add_tcp_flow(f)
            .unwrap_or_else(|e| die(&format!("flow: {e}")));
    }
    let end = Instant::ZERO + secs(duration_s, "--duration");
    let t0 = WallClock::now();
    // At the end of the warm-up: (offered, dropped, queue integral in packet-seconds, delivered
    // bytes, retransmissions), to subtract from the end's.
    let mut at_warmup = None;
    if warmup_s > 0.0 {
        sim.run_until(Instant::ZERO + secs(warmup_s, "--warmup-s"));
        let w = sim.results();
        let l = &w.links[d.bottleneck.0 as usize];
        at_warmup = Some((
            l.offered_pkts,
            l.dropped_pkts,
            l.mean_queue_pkts * warmup_s,
            w.flows.iter().map(|f| f.delivered_bytes).sum::<u64>(),
            w.flows.iter().map(|f| f.retransmits).sum::<u64>(),
        ));
    }
    sim.run_until(end);
    let wall = t0.elapsed().as_secs_f64();
    let r = sim.results();
    let delivered: u64 = r.flows.iter().map(|f| f.data_pkts_received).sum();
    let per_flow: Vec<f64> = r
        .flows
        .iter()
        .map(|f| f.delivered_bytes as f64 * 8.0 / duration_s)
        .collect();
    let goodput: f64 = per_flow.iter().sum();
    let bn = &r.links[d.bottleneck.0 as usize];
    let sum = |f: fn(&sim::stats::FlowSummary) -> u64| r.flows.iter().map(f).sum::<u64>();
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let after = match at_warmup {
        None => "null".to_string(),
        Some((offered, dropped, qint, bytes, retx)) => {
            let span = duration_s - warmup_s;
            let (o, dr) = (bn.offered_pkts - offered, bn.dropped_pkts - dropped);
            format!(
                "{{\"warmup_s\": {warmup_s}, \"loss_ratio\": {:.6}, \"mean_queue_pkts\": {:.3}, \"goodput_bps\": {:.1}, \"rexmit_pkts\": {}}}",
                if o > 0 { dr as f64 / o as f64 } else { 0.0 },
                (bn.mean_queue_pkts * duration_s - qint) / span,
                (r.flows.iter().map(|f| f.delivered_bytes).sum::<u64>() - bytes) as f64 * 8.0 / span,
                r.flows.iter().map(|f| f.retransmits).sum::<u64>() - retx,
            )
        }
    };
    println!(
        "{{\"simulator\": \"macroflow\", \"version\": \"{}\", \"scenario\": \"{}\", \"sim_seconds\": {}, \"wall_seconds\": {:.6}, \
         \"delivered_data_pkts\": {}, \"delivered_pkts_per_wall_s\": {:.1}, \"events\": {}, \"events_per_wall_s\": {:.1}, \
         \"peak_memory_bytes\": {}, \"goodput_bps\": {:.1}, \"flow_goodput_bps\": [{}], \"loss_ratio\": {:.6}, \
         \"mean_queue_pkts\": {:.3}, \"sender_data_pkts\": {}, \"sender_rexmit_pkts\": {}, \"sender_rtos\": {}, \
         \"packet_pool_high_water\": {}, \"after_warmup\": {}}}",
        env!("CARGO_PKG_VERSION"),
        name,
        duration_s,
        wall,
        delivered,
        delivered as f64 / wall,
        r.events,
        r.events as f64 / wall,
        peak_rss_bytes().map_or("null".into(), |b| b.to_string()),
        goodput,
        list(&per_flow),
        bn.loss_ratio,
        bn.mean_queue_pkts,
        sum(|f| f.data_pkts_sent),
        sum(|f| f.retransmits),
        sum(|f| f.timeouts),
        sim.packet_pool_capacity(),
        after,
    );
}
