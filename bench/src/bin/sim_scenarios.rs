//! Runs the speed-benchmark dumbbells of issue 3 in macroflow's simulator and prints one JSON line
//! per run, with the same fields as the peer scripts in `bench/peers/`:
//!
//! - A: 2 NewReno bulk flows, 10 Mbit/s bottleneck with 48 ms one-way delay, 1 Gbit/s access links
//!   with 1 ms delay, 83-packet drop-tail queue, MSS 1448 bytes, 300 s.
//! - B: as A with 10 flows, 100 Mbit/s and an 833-packet queue, 100 s.
//! - C: 10 flows, 10 Gbit/s bottleneck, 20 us RTT (1 us access, 8 us bottleneck delay, 10 Gbit/s
//!   access), 1500-byte packets, 100-packet queue, 5 s.
//!
//! Flows start at random times in the first 100 ms (seeded). TCP: IW 10, delayed ACKs (every
//! second segment, 200 ms timer), SACK, minimum RTO 200 ms, no pacing.
//!
//! Usage: `sim_scenarios --scenario A [--duration SECONDS] [--seed N] [--starts S1,S2,...]`
//! (`--starts`: each flow's start time in seconds, so a peer can be given the same ones).

use coupling::{Duration, Instant};
use rand::RngExt;
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::{Sim, TcpFlowConfig};
use std::time::Instant as WallClock;

struct Scenario {
    name: &'static str,
    flows: usize,
    bottleneck_bps: u64,
    bottleneck_delay: Duration,
    access_bps: u64,
    access_delay: Duration,
    queue_pkts: usize,
    duration_s: f64,
}

fn scenario(name: &str) -> Option<Scenario> {
    Some(match name {
        "A" => Scenario {
            name: "A",
            flows: 2,
            bottleneck_bps: 10_000_000,
            bottleneck_delay: Duration::from_millis(48),
            access_bps: 1_000_000_000,
            access_delay: Duration::from_millis(1),
            queue_pkts: 83,
            duration_s: 300.0,
        },
        "B" => Scenario {
            name: "B",
            flows: 10,
            bottleneck_bps: 100_000_000,
            bottleneck_delay: Duration::from_millis(48),
            access_bps: 1_000_000_000,
            access_delay: Duration::from_millis(1),
            queue_pkts: 833,
            duration_s: 100.0,
        },
        "C" => Scenario {
            name: "C",
            flows: 10,
            bottleneck_bps: 10_000_000_000,
            bottleneck_delay: Duration::from_micros(8),
            access_bps: 10_000_000_000,
            access_delay: Duration::from_micros(1),
            queue_pkts: 100,
            duration_s: 5.0,
        },
        _ => return None,
    })
}

/// Peak resident memory of this process (VmHWM), in bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let name = arg("--scenario").unwrap_or_else(|| "A".into());
    let Some(mut sc) = scenario(&name) else {
        eprintln!("unknown scenario {name:?}: expected A, B or C");
        std::process::exit(2);
    };
    if let Some(d) = arg("--duration") {
        sc.duration_s = d.parse().unwrap_or_else(|_| {
            eprintln!("--duration: expected seconds, got {d:?}");
            std::process::exit(2)
        });
    }
    let seed: u64 = arg("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);

    let mut net = Network::default();
    let cfg = DumbbellConfig {
        pairs: sc.flows,
        bottleneck: LinkConfig {
            rate_bps: sc.bottleneck_bps,
            delay: sc.bottleneck_delay,
            queue: QueueConfig::drop_tail_pkts(sc.queue_pkts),
        },
        access_rate_bps: sc.access_bps,
        access_delays: vec![sc.access_delay; sc.flows],
        access_queue: QueueConfig::drop_tail_pkts(100_000),
    };
    let d = dumbbell(&mut net, &cfg).expect("valid scenario");
    let mut sim = Sim::new(net, seed).expect("routed");
    let starts: Option<Vec<f64>> = arg("--starts").map(|s| {
        let v: Vec<f64> = s
            .split(',')
            .map(|x| x.trim().parse().expect("--starts: seconds"))
            .collect();
        if v.len() != sc.flows {
            eprintln!("--starts: {} times for {} flows", v.len(), sc.flows);
            std::process::exit(2);
        }
        v
    });
    for i in 0..sc.flows {
        let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        f.start = match &starts {
            Some(v) => Instant::from_nanos((v[i] * 1e9).round() as u64),
            None => Instant::from_nanos(sim.rng().random_range(0..100_000_000)),
        };
        sim.add_tcp_flow(f).expect("valid flow");
    }
    let end = Instant::from_nanos((sc.duration_s * 1e9).round() as u64);
    let t0 = WallClock::now();
    sim.run_until(end);
    let wall = t0.elapsed().as_secs_f64();
    let r = sim.results();
    let delivered: u64 = r.flows.iter().map(|f| f.data_pkts_received).sum();
    let goodput: f64 = r
        .flows
        .iter()
        .map(|f| f.delivered_bytes as f64 * 8.0)
        .sum::<f64>()
        / sc.duration_s;
    let bn = &r.links[d.bottleneck.0 as usize];
    println!(
        "{{\"simulator\": \"macroflow\", \"version\": \"{}\", \"scenario\": \"{}\", \"sim_seconds\": {}, \"wall_seconds\": {:.6}, \
         \"delivered_data_pkts\": {}, \"delivered_pkts_per_wall_s\": {:.1}, \"events\": {}, \"events_per_wall_s\": {:.1}, \
         \"peak_memory_bytes\": {}, \"goodput_bps\": {:.1}, \"loss_ratio\": {:.6}, \"mean_queue_pkts\": {:.3}, \
         \"packet_pool_high_water\": {}}}",
        env!("CARGO_PKG_VERSION"),
        sc.name,
        sc.duration_s,
        wall,
        delivered,
        delivered as f64 / wall,
        r.events,
        r.events as f64 / wall,
        peak_rss_bytes().map_or("null".into(), |b| b.to_string()),
        goodput,
        bn.loss_ratio,
        bn.mean_queue_pkts,
        sim.packet_pool_capacity(),
    );
}
