//! Reno under Bernoulli loss with no queueing against seed 001 Eq. 5 (a = 2 delayed ACKs):
//! E[b] = sqrt(3 / (2a)) * MSS / (sqrt(p) * RTT).

use coupling::{Duration, Instant};
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::{Sim, TcpFlowConfig};

fn reno_under_loss(p: f64, seconds: u64, seed: u64) -> (f64, f64) {
    let mut net = Network::default();
    // 1 Gbit/s everywhere: the window, not the link, limits the flow, so nothing queues.
    let cfg = DumbbellConfig {
        pairs: 1,
        bottleneck: LinkConfig {
            rate_bps: 1_000_000_000,
            delay: Duration::from_millis(48),
            queue: QueueConfig::RandomDrop {
                p,
                inner: Box::new(QueueConfig::drop_tail_pkts(100_000)),
            },
        },
        access_rate_bps: 1_000_000_000,
        access_delays: vec![Duration::from_millis(1)],
        access_queue: QueueConfig::drop_tail_pkts(100_000),
    };
    let d = dumbbell(&mut net, &cfg).unwrap();
    let mut sim = Sim::new(net, seed).unwrap();
    let f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
    let mss = f.tcp.mss as f64;
    sim.add_tcp_flow(f).unwrap();
    sim.run_until(Instant::from_secs(seconds));
    let r = sim.results();
    let rtt = r.flows[0].mean_rtt_s;
    let eq5 = (3.0f64 / 4.0).sqrt() * mss * 8.0 / (p.sqrt() * rtt);
    (r.flows[0].goodput_bps, eq5)
}

#[test]
fn reno_throughput_follows_eq5_under_random_loss() {
    for (p, secs) in [(1e-4, 3000), (1e-3, 1000), (1e-2, 1000)] {
        // Four seeds: the mean over several independent runs, as one long run has few loss events
        // at p = 1e-4 (one every ~12 s).
        let runs: Vec<(f64, f64)> = (1..=4).map(|seed| reno_under_loss(p, secs, seed)).collect();
        let got = runs.iter().map(|r| r.0).sum::<f64>() / 4.0;
        let eq5 = runs.iter().map(|r| r.1).sum::<f64>() / 4.0;
        let err = (got - eq5) / eq5;
        println!(
            "p = {p:e}: goodput {:.3} Mbit/s, Eq. 5 {:.3} Mbit/s, error {:+.1}%",
            got / 1e6,
            eq5 / 1e6,
            err * 100.0
        );
        assert!(
            err.abs() < 0.15,
            "p = {p}: {got} vs Eq. 5 {eq5} ({:+.1}%)",
            err * 100.0
        );
    }
}
