//! TCP on the dissertation's dumbbell (10 Mbit/s, RTT 100 ms, 1-BDP drop-tail queue).

use coupling::{Duration, Instant};
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::Network;
use sim::stats::jain_index;
use sim::{Sim, TcpFlowConfig};

fn setup(pairs: usize, seed: u64) -> (Sim, sim::net::topology::Dumbbell) {
    let mut net = Network::default();
    let d = dumbbell(&mut net, &DumbbellConfig::dissertation(pairs)).unwrap();
    (Sim::new(net, seed).unwrap(), d)
}

fn conserved(sim: &Sim) {
    let c = sim.packet_counts();
    assert_eq!(c.created, c.delivered + c.dropped + c.in_flight, "{c:?}");
}

#[test]
fn one_newreno_flow_fills_the_bottleneck_with_a_sawtooth() {
    let (mut sim, d) = setup(1, 1);
    sim.add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    sim.sample_every(Duration::from_millis(10), &[d.bottleneck])
        .unwrap();
    sim.run_until(Instant::from_secs(10));
    let warm = sim.results();
    sim.run_until(Instant::from_secs(120));
    let r = sim.results();
    conserved(&sim);
    let bn = &r.links[d.bottleneck.0 as usize];
    let busy_after_warmup = (bn.utilization * r.duration_s
        - warm.links[d.bottleneck.0 as usize].utilization * warm.duration_s)
        / (r.duration_s - warm.duration_s);
    assert!(
        busy_after_warmup > 0.95,
        "utilization after slow start {busy_after_warmup}"
    );
    // The sawtooth: losses recovered by fast recovery, cwnd oscillating between W/2 and W.
    let f = &r.flows[0];
    assert!(f.fast_recoveries >= 3, "{f:?}");
    assert_eq!(f.timeouts, 0, "{f:?}");
    let cw: Vec<f64> = r
        .flow_samples
        .iter()
        .filter(|s| s.t_ns > 20_000_000_000)
        .map(|s| s.cwnd_pkts)
        .collect();
    let (lo, hi) = cw
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    // BDP 83 + queue 83: the window peaks near 166 segments and halves.
    assert!(hi > 140.0 && hi < 200.0, "peak cwnd {hi}");
    assert!(lo > 0.4 * hi && lo < 0.65 * hi, "trough {lo} vs peak {hi}");
}

#[test]
fn identical_long_flows_share_fairly() {
    let (mut sim, d) = setup(4, 3);
    for i in 0..4 {
        let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        f.start = Instant::from_millis(37 * i as u64);
        sim.add_tcp_flow(f).unwrap();
    }
    sim.run_until(Instant::from_secs(300));
    let r = sim.results();
    conserved(&sim);
    let goodputs: Vec<f64> = r.flows.iter().map(|f| f.goodput_bps).collect();
    let j = jain_index(&goodputs);
    assert!(j > 0.95, "Jain {j}: {goodputs:?}");
    let total: f64 = goodputs.iter().sum();
    assert!(total > 0.9 * 10e6, "aggregate goodput {total}");
}

#[test]
fn same_seed_same_results_bit_for_bit() {
    let run = |seed| {
        let (mut sim, d) = setup(3, seed);
        for i in 0..3 {
            let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
            f.start = Instant::from_millis(10 * i as u64);
            sim.add_tcp_flow(f).unwrap();
        }
        sim.sample_every(Duration::from_millis(50), &[d.bottleneck])
            .unwrap();
        sim.run_until(Instant::from_secs(30));
        format!("{:?}", sim.results())
    };
    assert_eq!(run(5), run(5));
}

#[test]
fn finite_flow_completes_with_an_fct() {
    let (mut sim, d) = setup(1, 1);
    let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
    f.size_bytes = Some(200_000 / 8 * 8);
    sim.add_tcp_flow(f).unwrap();
    sim.run_until(Instant::from_secs(10));
    let r = sim.results();
    let fct = r.flows[0].fct_s.expect("completed");
    // 25 kB... 200 kB at IW 10 over RTT 100 ms: a handful of RTTs.
    assert!(fct > 0.2 && fct < 1.0, "fct {fct}");
    assert_eq!(r.flows[0].delivered_bytes, 200_000);
    assert_eq!(sim.packet_counts().in_flight, 0);
    conserved(&sim);
}

#[test]
fn memory_is_flat_in_simulated_time() {
    let (mut sim, d) = setup(4, 9);
    for i in 0..4 {
        sim.add_tcp_flow(TcpFlowConfig::bulk(d.senders[i], d.receivers[i]))
            .unwrap();
    }
    // The pool's high-water mark is the most packets ever in flight at once: bounded by the
    // windows (BDP + queue + ACKs), not by how long the run is.
    let mut marks = Vec::new();
    for t in [60, 300, 600, 1200] {
        sim.run_until(Instant::from_secs(t));
        marks.push(sim.packet_pool_capacity());
    }
    assert!(
        marks[3] <= marks[0] + 20,
        "pool high-water marks at 60/300/600/1200 s: {marks:?}"
    );
    assert!(marks[3] < 83 + 83 + 2 * 83, "{marks:?}");
    conserved(&sim);
}

/// A capture of the bottleneck that tshark reads: as many TCP packets as the link sent.
#[test]
fn pcap_capture_of_the_bottleneck_reads_in_tshark() {
    let (mut sim, d) = setup(2, 1);
    for i in 0..2 {
        sim.add_tcp_flow(TcpFlowConfig::bulk(d.senders[i], d.receivers[i]))
            .unwrap();
    }
    let path =
        std::env::temp_dir().join(format!("macroflow-bottleneck-{}.pcap", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    sim.capture(d.bottleneck, Box::new(std::io::BufWriter::new(file)))
        .unwrap();
    sim.run_until(Instant::from_secs(2));
    sim.flush_captures().unwrap();
    let sent = sim.results().links[d.bottleneck.0 as usize].tx_pkts;
    if std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: tshark not installed (apt-get install tshark)");
        let _ = std::fs::remove_file(&path);
        return;
    }
    let out = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args(["-T", "fields", "-e", "ip.src", "-e", "tcp.seq_raw"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len() as u64,
        sent,
        "tshark read every packet the bottleneck sent"
    );
    let senders: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(senders.len(), 2, "both senders' packets: {senders:?}");
}

/// ECMP: flows between the same two hosts, with different five-tuples, take different paths.
#[test]
fn ecmp_spreads_flows_between_the_same_hosts() {
    use sim::net::queue::QueueConfig;
    use sim::net::topology::graph;
    use sim::net::LinkConfig;
    let link = LinkConfig {
        rate_bps: 10_000_000,
        delay: Duration::from_millis(5),
        queue: QueueConfig::drop_tail_pkts(50),
        jitter: Duration::ZERO,
    };
    let mut net = Network::default();
    graph(
        &mut net,
        &["h1", "a", "b", "c", "h2"],
        &[
            ("h1", "a", link.clone()),
            ("a", "b", link.clone()),
            ("a", "c", link.clone()),
            ("b", "h2", link.clone()),
            ("c", "h2", link),
        ],
    )
    .unwrap();
    let (h1, h2, a, b, c) = (
        net.node("h1").unwrap(),
        net.node("h2").unwrap(),
        net.node("a").unwrap(),
        net.node("b").unwrap(),
        net.node("c").unwrap(),
    );
    let ab = net.nodes[a.0 as usize]
        .out
        .iter()
        .copied()
        .find(|l| net.links[l.0 as usize].to == b)
        .unwrap();
    let ac = net.nodes[a.0 as usize]
        .out
        .iter()
        .copied()
        .find(|l| net.links[l.0 as usize].to == c)
        .unwrap();
    let mut sim = Sim::new(net, 1).unwrap();
    for _ in 0..8 {
        let mut f = TcpFlowConfig::bulk(h1, h2);
        f.size_bytes = Some(100_000);
        sim.add_tcp_flow(f).unwrap();
    }
    sim.run_until(Instant::from_secs(5));
    let r = sim.results();
    let (via_b, via_c) = (
        r.links[ab.0 as usize].tx_pkts,
        r.links[ac.0 as usize].tx_pkts,
    );
    assert!(
        via_b > 100 && via_c > 100,
        "both equal-cost paths carry flows: {via_b} / {via_c}"
    );
    assert!(r.flows.iter().all(|f| f.fct_s.is_some()));
}
