//! The two draft-ietf-rmcat-eval-test cases seed 003 ch. 6 uses, run for every rate-based
//! controller: "round-trip time fairness" (five flows with one-way delays 10, 25, 50, 100, 150 ms,
//! 4 Mbit/s) and "media pause and resume" (three flows on 3.5 Mbit/s, one paused for 20 s at 40 s).
//! The bottleneck queue holds 300 ms at the link rate (seed 003 sec. 6.4).

use coupling::{Duration, Instant};
use sim::engine::MediaFlowConfig;
use sim::media::MediaSource;
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::transport::controllers;
use sim::Sim;

const PKT: u32 = 1200;

fn bottleneck(rate_bps: u64) -> LinkConfig {
    let queue = (rate_bps as f64 * 0.3 / 8.0 / PKT as f64).round() as usize;
    LinkConfig {
        rate_bps,
        delay: Duration::from_millis(1),
        queue: QueueConfig::drop_tail_pkts(queue),
        jitter: Duration::ZERO,
    }
}

fn run(
    controller: &str,
    rate_bps: u64,
    one_way_ms: &[u64],
    pauses: &[Vec<(Instant, Instant)>],
    secs: u64,
) -> sim::stats::Results {
    let mut net = Network::default();
    // One-way delay = access + 1 ms bottleneck + access.
    let access = one_way_ms
        .iter()
        .map(|d| Duration::from_micros((d * 1000 - 1000) / 2))
        .collect();
    let cfg = DumbbellConfig {
        pairs: one_way_ms.len(),
        bottleneck: bottleneck(rate_bps),
        access_rate_bps: 1_000_000_000,
        access_delays: access,
        access_queue: QueueConfig::drop_tail_pkts(10_000),
        access_jitter: Duration::ZERO,
    };
    let d = dumbbell(&mut net, &cfg).unwrap();
    let mut sim = Sim::new(net, 11).unwrap();
    for i in 0..one_way_ms.len() {
        let (snd, rcv) = controllers::build(controller, PKT, "media").unwrap();
        let cfg = MediaFlowConfig {
            src: d.senders[i],
            dst: d.receivers[i],
            start: Instant::from_millis(100 * i as u64),
            packet_bytes: PKT,
            source: MediaSource::Greedy,
            pauses: pauses.get(i).cloned().unwrap_or_default(),
            dscp: 0,
        };
        sim.add_media_flow(cfg, snd, rcv).unwrap();
    }
    sim.sample_every(Duration::from_secs(1), &[d.bottleneck])
        .unwrap();
    sim.run_until(Instant::from_secs(secs));
    sim.results()
}

fn rate(r: &sim::stats::Results, flow: u32, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.media_samples
            .iter()
            .find(|s| s.flow == flow && s.t_ns == t * 1_000_000_000)
            .unwrap()
            .received_bytes as f64
    };
    (at(to) - at(from)) * 8.0 / (to - from) as f64
}

/// The controllers the RMCAT cases are meant for (and TFRC); RAP's AIMD per RTT is as
/// RTT-unfair as TCP by design (its 150 ms flow gets under 2 % of the 10 ms flow's rate).
const RTT_FAIR: &[&str] = &["nada", "gcc", "tfrc"];

#[test]
fn rtt_fairness_five_flows() {
    for c in controllers::names().filter(|c| RTT_FAIR.contains(c)) {
        let r = run(c, 4_000_000, &[10, 25, 50, 100, 150], &[], 120);
        let rates: Vec<f64> = (0..5).map(|f| rate(&r, f, 60, 120)).collect();
        let total: f64 = rates.iter().sum();
        println!(
            "{c}: RTT fairness rates (Mbit/s) {:?}, total {:.2}",
            rates
                .iter()
                .map(|x| (x / 1e4).round() / 100.0)
                .collect::<Vec<_>>(),
            total / 1e6
        );
        assert!(
            total > 0.6 * 4e6 && total < 4e6 * 1.01,
            "{c}: total {total}"
        );
        assert!(
            rates.iter().all(|&x| x > 0.05 * 4e6),
            "{c}: every flow gets a share: {rates:?}"
        );
        let q = r.queue_samples.iter().map(|q| q.pkts).max().unwrap();
        assert!(
            (q as f64) < 4e6 * 0.3 / 8.0 / PKT as f64 + 1.0,
            "{c}: queue bounded by its 300 ms limit: {q}"
        );
    }
}

/// Every controller's paused flow must get going again. (GCC once ended near 0.05 Mbit/s here: the
/// flows that kept sending held the drop-tail queue full with loss in its 2-10 % hold band; since
/// transport::gcc caps its loss-based estimate at 0.95 x the receive rate in that band, the resumed
/// flow gets ~0.66 of its ~1.14 Mbit/s back.)
#[test]
fn media_pause_and_resume() {
    for c in controllers::names() {
        let pause = vec![(Instant::from_secs(40), Instant::from_secs(60))];
        let r = run(c, 3_500_000, &[50, 50, 50], &[vec![], pause], 100);
        let before: Vec<f64> = (0..3).map(|f| rate(&r, f, 20, 40)).collect();
        let during: Vec<f64> = (0..3).map(|f| rate(&r, f, 45, 60)).collect();
        let after: Vec<f64> = (0..3).map(|f| rate(&r, f, 80, 100)).collect();
        let mbps = |v: &[f64]| {
            v.iter()
                .map(|x| (x / 1e4).round() / 100.0)
                .collect::<Vec<_>>()
        };
        println!(
            "{c}: pause/resume Mbit/s before {:?} during {:?} after {:?}",
            mbps(&before),
            mbps(&during),
            mbps(&after)
        );
        assert!(
            during[1] < 1e3,
            "{c}: the paused flow sends nothing: {}",
            during[1]
        );
        assert!(
            during[0] + during[2] > before[0] + before[2],
            "{c}: the others take the freed capacity"
        );
        assert!(
            after[1] > 0.3 * before[1],
            "{c}: the resumed flow gets going again: {} vs {}",
            after[1],
            before[1]
        );
    }
}
