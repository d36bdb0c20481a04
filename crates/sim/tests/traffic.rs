//! Traffic in the simulator: UDP sources and the web-like workload on the dissertation's dumbbell.

use coupling::{Duration, Instant};
use sim::engine::UdpFlowConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::Network;
use sim::traffic::{CbrConfig, SelfSimilarConfig, SourceConfig, SourceKind, WebWorkload};
use sim::{Sim, TcpFlowConfig};

fn setup(pairs: usize) -> (Sim, sim::net::topology::Dumbbell) {
    let mut net = Network::default();
    let d = dumbbell(&mut net, &DumbbellConfig::dissertation(pairs)).unwrap();
    (Sim::new(net, 5).unwrap(), d)
}

#[test]
fn cbr_below_capacity_arrives_whole() {
    let (mut sim, d) = setup(1);
    let src = SourceConfig::new(SourceKind::Cbr(CbrConfig {
        rate_bps: 2e6,
        pkt_bytes: 1000,
    }));
    let cfg = UdpFlowConfig {
        src: d.senders[0],
        dst: d.receivers[0],
        start: Instant::ZERO,
        end: None,
        source: src,
        dscp: 0,
    };
    sim.add_udp_flow(cfg).unwrap();
    sim.run_until(Instant::from_secs(20));
    let r = sim.results();
    let u = &r.udp_flows[0];
    // One packet every 4 ms from t = 0 to t = 20 s inclusive.
    assert_eq!(u.sent_pkts, 5001, "2 Mbit/s of 1000-byte packets for 20 s");
    // Nothing is dropped; the last 50 ms (one-way delay) of packets are still on their way.
    assert_eq!(r.links[d.bottleneck.0 as usize].dropped_pkts, 0);
    assert!(u.received_pkts >= u.sent_pkts - 14, "{u:?}");
    assert!((u.throughput_bps - 2e6).abs() < 1e4, "{u:?}");
}

/// Seed 003 sec. 9.3: self-similar cross traffic at 50% of the bottleneck next to a TCP flow.
#[test]
fn self_similar_cross_traffic_takes_its_load_and_tcp_the_rest() {
    let (mut sim, d) = setup(2);
    let src = SourceConfig::new(SourceKind::SelfSimilar(SelfSimilarConfig::with_load(5e6)));
    let cfg = UdpFlowConfig {
        src: d.senders[1],
        dst: d.receivers[1],
        start: Instant::ZERO,
        end: None,
        source: src,
        dscp: 0,
    };
    sim.add_udp_flow(cfg).unwrap();
    sim.add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    sim.run_until(Instant::from_secs(600));
    let r = sim.results();
    let udp = r.udp_flows[0].received_bytes as f64 * 8.0 / 600.0;
    let tcp = r.flows[0].goodput_bps;
    assert!(udp > 3e6 && udp < 7e6, "cross traffic {udp}");
    // One Reno flow against bursty cross traffic through an 83-packet drop-tail queue keeps the
    // link busy most, not all, of the time.
    let util = r.links[d.bottleneck.0 as usize].utilization;
    assert!(util > 0.85, "utilization {util}, tcp {tcp}, udp {udp}");
    assert!(
        tcp > 3e6,
        "TCP takes most of what the cross traffic leaves: {tcp}"
    );
    let c = sim.packet_counts();
    assert_eq!(c.created, c.delivered + c.dropped + c.in_flight);
}

/// Two pairs of the dumbbell with web traffic of 5 Mbit/s (50 kB mean) for 200 s; the flows' ids.
fn web_for_200_s() -> (Sim, sim::net::topology::Dumbbell, Vec<u32>) {
    let (mut sim, d) = setup(2);
    let web = WebWorkload {
        load_bps: 5e6,
        mean_size_bytes: 50e3,
        pairs: 2,
        ..WebWorkload::default()
    };
    let pairs = [
        (d.senders[0], d.receivers[0]),
        (d.senders[1], d.receivers[1]),
    ];
    let tcp = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
    let ids = sim
        .add_web_workload(&web, &pairs, Instant::ZERO, Instant::from_secs(200), tcp)
        .unwrap();
    (sim, d, ids)
}

#[test]
fn web_workload_flows_complete_with_heavy_tailed_fcts() {
    let (mut sim, d, ids) = web_for_200_s();
    assert!(
        ids.len() > 1500 && ids.len() < 3500,
        "{} flows at 12.5 flows/s",
        ids.len()
    );
    sim.run_until(Instant::from_secs(260));
    let r = sim.results();
    let fcts: Vec<f64> = r.flows.iter().filter_map(|f| f.fct_s).collect();
    assert!(
        fcts.len() as f64 > 0.98 * ids.len() as f64,
        "{} of {} completed",
        fcts.len(),
        ids.len()
    );
    let delivered: f64 = r.flows.iter().map(|f| f.delivered_bytes as f64 * 8.0).sum();
    assert!(
        (delivered / 200.0 - 5e6).abs() < 1.5e6,
        "offered about 5 Mbit/s: {}",
        delivered / 200.0
    );
    let mut sorted = fcts.clone();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (median, p99, max) = (
        sorted[sorted.len() / 2],
        sorted[sorted.len() * 99 / 100],
        sorted[sorted.len() - 1],
    );
    println!("FCT median {median:.3} s, p99 {p99:.3} s, max {max:.3} s");
    assert!(
        p99 > 3.0 * median && max > 20.0 * median,
        "heavy-tailed sizes give a long FCT tail"
    );
    let bad = WebWorkload {
        load_bps: -1.0,
        pairs: 2,
        ..WebWorkload::default()
    };
    let e = sim.add_web_workload(
        &bad,
        &[
            (d.senders[0], d.receivers[0]),
            (d.senders[1], d.receivers[1]),
        ],
        Instant::ZERO,
        Instant::from_secs(1),
        TcpFlowConfig::bulk(d.senders[0], d.receivers[0]),
    );
    assert!(e.unwrap_err().to_string().contains("web.load_bps"));
    let _ = Duration::ZERO;
}

/// Issue 13: the sampler kept sampling finished web flows, so samples (and memory) grew with the
/// square of the duration. A finished flow gets one sample after it ends, then none: the rows are
/// bounded by each flow's own lifetime in intervals.
#[test]
fn finished_flows_are_not_sampled_again() {
    let (mut sim, _, ids) = web_for_200_s();
    let interval = 0.1;
    sim.sample_every(coupling::Duration::from_millis(100), &[])
        .unwrap();
    sim.run_until(Instant::from_secs(260));
    let r = sim.results();
    let bound: f64 = r
        .flows
        .iter()
        .map(|f| {
            let end = f.fct_s.map_or(260.0, |fct| f.start_s + fct);
            (end - f.start_s) / interval + 2.0
        })
        .sum();
    let rows = r.flow_samples.len() as f64;
    println!(
        "{} flows, {rows} flow samples, lifetimes allow {bound:.0}",
        ids.len()
    );
    assert!(
        rows <= bound,
        "{rows} rows for lifetimes of {bound:.0} intervals"
    );
    // Sampling every flow at every interval to the end would be about flows x 2600 / 2.
    assert!(rows < 0.05 * ids.len() as f64 * 2600.0 / 2.0);
}

/// Issue 13: a finished flow's connection (sender, receiver, controller: about 1.2 kB) is freed
/// once nothing of it is left in the network, and a summary is kept; so the connections held
/// follow the flows in progress, not the flows so far. Freeing must not change any result: the
/// sampler holds a finished flow until its last sample, so the same run with and without
/// sampling frees flows at different times and must report the same flows.
#[test]
fn finished_flows_are_freed_without_changing_results() {
    let (mut plain, _, ids) = web_for_200_s();
    let (mut sampled, _, _) = web_for_200_s();
    sampled
        .sample_every(coupling::Duration::from_millis(100), &[])
        .unwrap();
    let mut most_live = 0;
    for t in (5..=260).step_by(5) {
        plain.run_until(Instant::from_secs(t));
        sampled.run_until(Instant::from_secs(t));
        most_live = most_live.max(plain.live_tcp_flows());
    }
    println!(
        "{} flows; at most {most_live} held at once (checked every 5 s)",
        ids.len()
    );
    // 12.5 arrivals/s with sub-second median FCTs: a few tens in progress, never thousands.
    assert!(most_live < 200, "{most_live} connections held");
    assert_eq!(plain.live_tcp_flows(), 0, "all finished and freed by 260 s");
    assert_eq!(sampled.live_tcp_flows(), 0);
    let (a, b) = (plain.results(), sampled.results());
    assert_eq!(a.flows, b.flows);
    assert!(b.flow_samples.len() > 1000);
}

/// The review of issue 13: when the time series stop at MAX_SAMPLE_ROWS, the flows the sampler
/// held are freed and later flows are not held (at 1 us intervals the bound is reached within the
/// first second; every connection used to stay allocated to the end).
#[test]
fn flows_are_freed_after_the_time_series_stop_at_their_bound() {
    let (mut sim, _, ids) = web_for_200_s();
    sim.sample_every(coupling::Duration::from_micros(1), &[])
        .unwrap();
    sim.run_until(Instant::from_secs(260));
    let r = sim.results();
    assert!(r.sampling_stopped_at_s.is_some_and(|t| t < 5.0));
    assert_eq!(sim.live_tcp_flows(), 0, "{} flows", ids.len());
}

/// The review of issue 13: sampling turned on mid-run still takes the one sample after a flow's
/// end that a flow finished less than an interval ago gets, even when its connection is freed.
#[test]
fn sampling_turned_on_mid_run_samples_a_flow_that_just_finished() {
    let (mut sim, d) = setup(1);
    let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
    f.size_bytes = Some(10_000);
    sim.add_tcp_flow(f).unwrap();
    sim.run_until(Instant::from_secs(1));
    assert_eq!(sim.live_tcp_flows(), 0, "finished and freed");
    sim.sample_every(coupling::Duration::from_secs(1), &[])
        .unwrap();
    sim.run_until(Instant::from_secs(3));
    let r = sim.results();
    let fct = r.flows[0].fct_s.unwrap();
    assert!(fct < 1.0, "{fct}");
    assert_eq!(r.flow_samples.len(), 1, "one sample, at 1 s");
    let s = &r.flow_samples[0];
    assert_eq!(
        (s.t_ns, s.flow, s.delivered_bytes),
        (1_000_000_000, 0, 10_000)
    );
    assert!(s.cwnd_pkts >= 2.0 && s.srtt_s > 0.0);
}

#[test]
fn a_udp_flow_stops_at_its_end() {
    // 1 Mbit/s of 1000-byte packets (125 a second) from 2 s to 6 s: 500 packets, then none.
    let (mut sim, d) = setup(1);
    let cbr = |rate_bps| {
        SourceConfig::new(SourceKind::Cbr(CbrConfig {
            rate_bps,
            pkt_bytes: 1000,
        }))
    };
    let mut cfg = UdpFlowConfig {
        src: d.senders[0],
        dst: d.receivers[0],
        start: Instant::from_secs(2),
        end: Some(Instant::from_secs(6)),
        source: cbr(1e6),
        dscp: 0,
    };
    sim.add_udp_flow(cfg.clone()).unwrap();
    sim.run_until(Instant::from_secs(20));
    let u = &sim.results().udp_flows[0];
    assert!((499..=501).contains(&u.sent_pkts), "{u:?}");
    assert_eq!(u.received_pkts, u.sent_pkts);
    // Over the 4 s it sent, not the run's 18.
    assert!((u.throughput_bps - 1e6).abs() < 0.01e6, "{u:?}");
    // An end at or before the start is refused, and adds nothing.
    let (mut sim, _) = setup(1);
    cfg.end = Some(Instant::from_secs(2));
    let e = sim.add_udp_flow(cfg).unwrap_err().to_string();
    assert!(e.contains("end"), "{e}");
    assert!(sim.results().udp_flows.is_empty());
}
