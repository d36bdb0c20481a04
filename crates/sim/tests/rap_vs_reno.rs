//! RAP's long-run throughput against a Reno flow's on the same path under Bernoulli loss (issue 4:
//! within 20 %). RAP acknowledges every packet, so the Reno flow runs without delayed ACKs (a = 1)
//! to be the same kind of AIMD.

use coupling::{Duration, Instant};
use sim::engine::MediaFlowConfig;
use sim::media::MediaSource;
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::transport::controllers;
use sim::{Sim, TcpFlowConfig};

fn path(p: f64, seed: u64) -> (Sim, sim::net::topology::Dumbbell) {
    let mut net = Network::default();
    let cfg = DumbbellConfig {
        pairs: 1,
        bottleneck: LinkConfig {
            rate_bps: 100_000_000,
            delay: Duration::from_millis(48),
            queue: QueueConfig::RandomDrop {
                p,
                inner: Box::new(QueueConfig::drop_tail_pkts(10_000)),
            },
            jitter: Duration::ZERO,
        },
        access_rate_bps: 1_000_000_000,
        access_delays: vec![Duration::from_millis(1)],
        access_queue: QueueConfig::drop_tail_pkts(10_000),
        access_jitter: Duration::ZERO,
    };
    let d = dumbbell(&mut net, &cfg).unwrap();
    (Sim::new(net, seed).unwrap(), d)
}

#[test]
fn rap_matches_reno_under_random_loss() {
    for (p, secs) in [(1e-2, 600u64), (1e-3, 1500)] {
        let (mut a, d) = path(p, 1);
        let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
        f.tcp.delayed_ack = false;
        f.tcp.mss = 1000 - 52;
        a.add_tcp_flow(f).unwrap();
        a.run_until(Instant::from_secs(secs));
        let reno = a.results().flows[0].goodput_bps;
        let (mut b, d) = path(p, 1);
        let (snd, rcv) = controllers::build("rap", 1000, "rap").unwrap();
        let m = MediaFlowConfig {
            src: d.senders[0],
            dst: d.receivers[0],
            start: Instant::ZERO,
            packet_bytes: 1000,
            source: MediaSource::Greedy,
            pauses: vec![],
            dscp: 0,
        };
        b.add_media_flow(m, snd, rcv).unwrap();
        b.run_until(Instant::from_secs(secs));
        // Compare payload rates: RAP's packets are 1000 bytes on the wire, TCP's carry 948 of 1000.
        let rap = b.results().media_flows[0].goodput_bps * 948.0 / 1000.0;
        let ratio = rap / reno;
        println!(
            "p = {p:e}: RAP {:.3} Mbit/s, Reno {:.3} Mbit/s, ratio {ratio:.3}",
            rap / 1e6,
            reno / 1e6
        );
        assert!((ratio - 1.0).abs() < 0.2, "p = {p}: ratio {ratio}");
    }
}
