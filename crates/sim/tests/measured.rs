//! Measured coupling groups (issue 20; `sim::transport::measured`): two TCP flows start in one
//! macroflow, false-sharing detectors watch them, and the response splits them when the
//! out-of-order test says their paths differ (seed 000 sec. 4.1.3, 5). Worked cases:
//! - **Fig. 1(d), fully shared with different RTTs:** one bottleneck, last hops of 2 and 60 ms.
//!   The flows' packets arrive tens of sequence numbers out of order all the time, so the test
//!   says "no share" within seconds (the seed: 5-10 s) and the younger flow is split out.
//! - **A truly shared path:** the same path and destination. Nothing is reordered: the
//!   out-of-order test never says "no share", and the flows stay in one group.

use coupling::falseshare::Decision;
use coupling::tcp::CouplerKind;
use coupling::{Duration, Instant};
use sim::engine::UdpFlowConfig;
use sim::net::queue::QueueConfig;
use sim::net::{LinkConfig, Network, NodeId};
use sim::traffic::{CbrConfig, SourceConfig, SourceKind};
use sim::transport::measured::{DetectorTest, MeasuredConfig};
use sim::{Sim, TcpFlowConfig};

const MBPS: u64 = 1_000_000;

fn link(rate_bps: u64, delay_ms: u64, queue_pkts: usize) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay: Duration::from_millis(delay_ms),
        queue: QueueConfig::drop_tail_pkts(queue_pkts),
        jitter: Duration::ZERO,
    }
}

/// S -> R1 -> R2 (the shared 10 Mbit/s bottleneck) -> D1 (2 ms) and D2 (`far_ms`); C -> R1 sends
/// CBR cross traffic to D1. Returns (sim, S, D1, D2).
fn fig1d(seed: u64, far_ms: u64) -> (Sim, NodeId, NodeId, NodeId) {
    let mut net = Network::default();
    let s = net.add_node("S").unwrap();
    let c = net.add_node("C").unwrap();
    let r1 = net.add_node("R1").unwrap();
    let r2 = net.add_node("R2").unwrap();
    let d1 = net.add_node("D1").unwrap();
    let d2 = net.add_node("D2").unwrap();
    for (a, b, rate, delay) in [
        (s, r1, 100 * MBPS, 1),
        (c, r1, 100 * MBPS, 1),
        (r1, r2, 10 * MBPS, 10),
        (r2, d1, 100 * MBPS, 2),
        (r2, d2, 100 * MBPS, far_ms),
    ] {
        net.add_link(a, b, &link(rate, delay, 100)).unwrap();
        net.add_link(b, a, &link(rate, delay, 100)).unwrap();
    }
    net.compute_routes();
    let mut sim = Sim::new(net, seed).unwrap();
    sim.add_udp_flow(UdpFlowConfig {
        src: c,
        dst: d1,
        start: Instant::ZERO,
        end: None,
        source: SourceConfig {
            kind: SourceKind::Cbr(CbrConfig {
                rate_bps: 2e6,
                pkt_bytes: 1000,
            }),
            duration: None,
            max_packets: None,
        },
        dscp: 0,
    })
    .unwrap();
    (sim, s, d1, d2)
}

fn two_flows(sim: &mut Sim, s: NodeId, d_a: NodeId, d_b: NodeId, cfg: MeasuredConfig) -> usize {
    let g = sim.add_measured_group(cfg).unwrap();
    for (i, d) in [d_a, d_b].into_iter().enumerate() {
        let mut f = TcpFlowConfig::bulk(s, d);
        f.start = Instant::from_millis(100 * i as u64);
        let id = sim.add_tcp_flow(f).unwrap();
        sim.couple(id, g, 1.0).unwrap();
    }
    g
}

#[test]
fn different_rtts_are_detected_by_reordering_and_the_younger_flow_is_split_out() {
    let (mut sim, s, d1, d2) = fig1d(1, 60);
    let g = two_flows(
        &mut sim,
        s,
        d1,
        d2,
        MeasuredConfig::new(CouplerKind::ccc(false)),
    );
    sim.run_until(Instant::from_secs(5));
    // Shared by default until detection (seed 000 sec. 5.1).
    let m = sim.measured_group(g).unwrap();
    let before = m.detector(0, 1).unwrap().out_of_order().history();
    sim.run_until(Instant::from_secs(60));
    let m = sim.measured_group(g).unwrap();
    let det = m.detector(0, 1).expect("both flows open");
    let h = det.out_of_order().history();
    let t = h
        .detection_time(Decision::NoShare)
        .expect("the out-of-order test says no share");
    assert!(
        t > Duration::from_secs(2) && t < Duration::from_secs(15),
        "detection after {t:?} (seed: 5-10 s); before 5 s: {before:?}"
    );
    // The response: the younger flow (1) left the shared group, the older stayed.
    assert_eq!(m.is_shared(0), Some(true));
    assert_eq!(m.is_shared(1), Some(false));
    let c = m.counters();
    assert_eq!((c.splits, c.merges), (1, 0), "{c:?}");
    assert_eq!(c.detector_errors + c.action_errors, 0, "{c:?}");
    assert_eq!(c.events_dropped, 0);
    // Every observed segment arrived, was dropped, or is in flight at the end (a window's worth).
    let in_flight = c.sent - c.arrived - c.dropped;
    assert!(in_flight < 300, "{c:?}");
    assert!(c.dropped > 0, "the run has losses: {c:?}");
    // Losses inferred at the connection's next arrival keep the detectors' input in order:
    // nothing reported after its number was finalized, nothing unreported.
    assert_eq!(
        c.detectors,
        Default::default(),
        "{c:?} {:?}",
        det.counters()
    );
    // The detection trace has the no-share event of the out-of-order test.
    assert!(m.events().iter().any(|e| e.test == DetectorTest::OutOfOrder
        && e.decision == Decision::NoShare
        && (e.flow_a, e.flow_b) == (0, 1)));
    let r = sim.results();
    assert_eq!(r.coupling_errors.total(), 0, "{:?}", r.coupling_errors);
    // Both flows go on (neither starved by the move).
    for f in &r.flows {
        assert!(f.goodput_bps > 1e6, "{f:?}");
    }
}

#[test]
fn a_truly_shared_path_is_never_split() {
    let (mut sim, s, d1, _) = fig1d(2, 60);
    let g = two_flows(
        &mut sim,
        s,
        d1,
        d1,
        MeasuredConfig::new(CouplerKind::ccc(false)),
    );
    sim.run_until(Instant::from_secs(60));
    let m = sim.measured_group(g).unwrap();
    let det = m.detector(0, 1).unwrap();
    assert_eq!(det.out_of_order().history().first_no_share_at, None);
    assert_eq!(det.out_of_order().evidence().occasions, 0);
    assert_eq!(m.is_shared(0), Some(true));
    assert_eq!(m.is_shared(1), Some(true));
    assert_eq!(m.counters().splits, 0);
    assert!(m.counters().arrived > 10_000, "{:?}", m.counters());
    let sbd = (
        first(&sim, g, DetectorTest::Sbd, Decision::Share),
        first(&sim, g, DetectorTest::Sbd, Decision::NoShare),
    );
    eprintln!("shared path: SBD (share, no share) at {sbd:?}");
}

#[test]
fn detection_only_watches_without_splitting() {
    let (mut sim, s, d1, d2) = fig1d(1, 60);
    let mut cfg = MeasuredConfig::new(CouplerKind::ccc(false));
    cfg.respond = false;
    let g = two_flows(&mut sim, s, d1, d2, cfg);
    sim.run_until(Instant::from_secs(30));
    let m = sim.measured_group(g).unwrap();
    assert!(m
        .detector(0, 1)
        .unwrap()
        .out_of_order()
        .history()
        .first_no_share_at
        .is_some());
    assert_eq!(m.is_shared(1), Some(true));
    assert_eq!(m.counters().splits, 0);
    assert_eq!(m.policy().counters().no_share, 0, "no verdict given");
}

/// Fig. 1(b), unshared bottlenecks: S -> R1, then 10 Mbit/s to D1 and 1 Mbit/s to D2.
fn fig1b(seed: u64) -> (Sim, NodeId, NodeId, NodeId) {
    let mut net = Network::default();
    let s = net.add_node("S").unwrap();
    let r1 = net.add_node("R1").unwrap();
    let d1 = net.add_node("D1").unwrap();
    let d2 = net.add_node("D2").unwrap();
    for (a, b, rate, q) in [
        (s, r1, 100 * MBPS, 1000),
        (r1, d1, 10 * MBPS, 50),
        (r1, d2, MBPS, 20),
    ] {
        net.add_link(a, b, &link(rate, 20, q)).unwrap();
        net.add_link(b, a, &link(rate, 20, q)).unwrap();
    }
    net.compute_routes();
    (Sim::new(net, seed).unwrap(), s, d1, d2)
}

#[test]
fn the_split_gives_the_fast_path_its_rate_back() {
    // Coupled, the aggregate's window is cut on every loss of either flow, so the flow on the fast
    // path is held near the slow one's rate (seed 000 sec. 3, Eq. 1); split, it fills its path.
    let run = |respond: bool| {
        let (mut sim, s, d1, d2) = fig1b(3);
        let mut cfg = MeasuredConfig::new(CouplerKind::ccc(false));
        cfg.respond = respond;
        let g = two_flows(&mut sim, s, d1, d2, cfg);
        sim.run_until(Instant::from_secs(120));
        let m = sim.measured_group(g).unwrap();
        let t = m
            .detector(0, 1)
            .unwrap()
            .out_of_order()
            .history()
            .detection_time(Decision::NoShare);
        let r = sim.results();
        (r.flows[0].goodput_bps, r.flows[1].goodput_bps, t)
    };
    let (shared_fast, shared_slow, t_shared) = run(false);
    let (split_fast, split_slow, t) = run(true);
    let t = t.expect("detected");
    assert_eq!(t_shared, Some(t), "the same run up to the detection");
    let msg = format!(
        "fast {split_fast:.0} split vs {shared_fast:.0} shared, slow {split_slow:.0} / \
         {shared_slow:.0}, detected after {t:?}"
    );
    assert!(split_fast > 2.0 * shared_fast, "{msg}");
    assert!(split_fast > 7e6, "{msg}");
    // The slow flow loses nothing by the split (seed 000 observation (1): it never gained).
    assert!(split_slow > 0.8 * shared_slow, "{msg}");
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        let (mut sim, s, d1, d2) = fig1d(7, 30);
        let g = two_flows(
            &mut sim,
            s,
            d1,
            d2,
            MeasuredConfig::new(CouplerKind::ccc(true)),
        );
        sim.run_until(Instant::from_secs(20));
        let m = sim.measured_group(g).unwrap();
        (
            format!("{:?}", m.events()),
            m.counters(),
            sim.results().flows,
        )
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_configurations_are_refused() {
    let (mut sim, ..) = fig1d(1, 60);
    let mut cfg = MeasuredConfig::new(CouplerKind::ccc(false));
    cfg.detector = cfg.detector.with_confidence(1.5);
    let e = sim.add_measured_group(cfg).unwrap_err().to_string();
    assert!(e.contains("confidence"), "{e}");
    assert!(sim.measured_group(0).is_none(), "nothing added");
}

/// The first time `test` gave `decision` for the pair (0, 1), from the pair's start.
fn first(sim: &Sim, g: usize, test: DetectorTest, decision: Decision) -> Option<f64> {
    sim.measured_group(g)
        .unwrap()
        .events()
        .iter()
        .find(|e| e.test == test && e.decision == decision)
        .map(|e| e.at.saturating_since(e.since).as_secs_f64())
}

#[test]
fn sbd_runs_beside_the_seeds_tests() {
    // Different bottlenecks, both congested (Fig. 1(b)): RFC 8382 keeps them apart.
    let (mut sim, s, d1, d2) = fig1b(4);
    let mut cfg = MeasuredConfig::new(CouplerKind::ccc(false));
    cfg.respond = false;
    let g = two_flows(&mut sim, s, d1, d2, cfg);
    sim.run_until(Instant::from_secs(120));
    let no = first(&sim, g, DetectorTest::Sbd, Decision::NoShare);
    let yes = first(&sim, g, DetectorTest::Sbd, Decision::Share);
    eprintln!("fig1b: SBD no share at {no:?}, share at {yes:?}");
    // Not before its warm-up of max(2M, N) = 60 intervals of 350 ms (21 s).
    let no = no.expect("SBD says no share");
    assert!(no >= 21.0, "{no}");
    let c = sim.measured_group(g).unwrap().counters();
    assert_eq!(c.detector_errors, 0, "{c:?}");
    assert!(c.dropped > 20, "{c:?}");
    assert_eq!(c.detectors, Default::default(), "{c:?}");
}

#[test]
fn a_flow_alone_is_still_observed_and_its_losses_are_inferred() {
    // One member only (its partner never starts): no pair, but every segment is accounted for.
    let (mut sim, s, d1, _) = fig1b(5);
    let g = sim
        .add_measured_group(MeasuredConfig::new(CouplerKind::ccc(false)))
        .unwrap();
    let id = sim.add_tcp_flow(TcpFlowConfig::bulk(s, d1)).unwrap();
    sim.couple(id, g, 1.0).unwrap();
    sim.run_until(Instant::from_secs(30));
    let m = sim.measured_group(g).unwrap();
    let c = m.counters();
    assert!(m.detectors().next().is_none());
    assert!(c.sent > 10_000 && c.dropped > 0, "{c:?}");
    assert!(c.sent - c.arrived - c.dropped < 300, "{c:?}");
    assert!(sim.results().flows[0].retransmits > 0);
}

/// A NADA media flow from `src` to `dst` starting at `start_ms`; its id among media flows.
fn media(sim: &mut Sim, src: NodeId, dst: NodeId, start_ms: u64) -> u32 {
    let (snd, rcv) = sim::transport::controllers::build("nada", 1200, "media").unwrap();
    sim.add_media_flow(
        sim::engine::MediaFlowConfig {
            src,
            dst,
            start: Instant::from_millis(start_ms),
            packet_bytes: 1200,
            source: sim::media::MediaSource::Greedy,
            pauses: Vec::new(),
            dscp: 0,
        },
        snd,
        rcv,
    )
    .unwrap()
}

fn watching(test: DetectorTest) -> MeasuredConfig {
    let mut cfg = MeasuredConfig::new(CouplerKind::ccc(false));
    cfg.respond = false;
    cfg.test = test;
    cfg
}

/// The fraction of [from_s, to_s] (run time) in which `test`'s answer for the pair was `decision`.
fn time_with(
    sim: &Sim,
    g: usize,
    test: DetectorTest,
    decision: Decision,
    from_s: f64,
    to_s: f64,
) -> f64 {
    let mut steps = vec![(0.0, Decision::Inconclusive)];
    steps.extend(
        sim.measured_group(g)
            .unwrap()
            .events()
            .iter()
            .filter(|e| e.test == test)
            .map(|e| (e.at.as_secs_f64(), e.decision)),
    );
    steps.push((f64::INFINITY, Decision::Inconclusive));
    let total: f64 = steps
        .windows(2)
        .filter(|w| w[0].1 == decision)
        .map(|w| (w[1].0.min(to_s) - w[0].0.max(from_s)).max(0.0))
        .sum();
    total / (to_s - from_s)
}

#[test]
fn media_flows_are_observed_behind_a_shared_bottleneck() {
    // Fig. 1(d)'s shared bottleneck (equal last hops) with two long TCP flows congesting it
    // and two NADA flows to D1 and D2 watched: SBD groups them, the delay test says share.
    let (mut sim, s, d1, d2) = fig1d(1, 2);
    for (i, d) in [d1, d2].into_iter().enumerate() {
        let mut f = TcpFlowConfig::bulk(s, d);
        f.start = Instant::from_millis(50 * i as u64);
        sim.add_tcp_flow(f).unwrap();
    }
    let g = sim.add_measured_group(watching(DetectorTest::Sbd)).unwrap();
    let (a, b) = (media(&mut sim, s, d1, 500), media(&mut sim, s, d2, 700));
    sim.measure_media(a, g).unwrap();
    sim.measure_media(b, g).unwrap();
    sim.run_until(Instant::from_secs(60));
    let m = sim.measured_group(g).unwrap();
    let c = m.counters();
    eprintln!("{c:?}");
    assert!(c.sent > 2_000 && c.arrived > 2_000, "{c:?}");
    assert_eq!(c.detector_errors, 0, "{c:?}");
    assert_eq!((c.splits, c.merges), (0, 0), "detection only");
    // The pair (0, 1) is the two media flows (media numbering): the events name them.
    assert!(m.events().iter().all(|e| (e.flow_a, e.flow_b) == (0, 1)));
    let sbd = first(&sim, g, DetectorTest::Sbd, Decision::Share).expect("SBD groups them");
    assert!(sbd >= 21.0, "not before SBD's warm-up: {sbd}");
    assert!(first(&sim, g, DetectorTest::Delay, Decision::Share).is_some());
    // SBD may flip for an interval (its grouping is redone every 350 ms), but after its
    // warm-up it says share most of the time.
    let share = time_with(&sim, g, DetectorTest::Sbd, Decision::Share, 25.0, 60.0);
    assert!(share > 0.5, "SBD share for {share:.2} of 25-60 s");
    let r = sim.results();
    let row = r
        .measured_groups
        .iter()
        .find(|s| s.group == g as u32)
        .unwrap();
    assert_eq!(row.members, "media");
}

#[test]
fn a_media_flow_in_a_measured_group_is_refused_where_it_cannot_be_watched() {
    let (mut sim, s, d1, d2) = fig1d(1, 2);
    let responds = sim
        .add_measured_group(MeasuredConfig::new(CouplerKind::ccc(false)))
        .unwrap();
    let watches = sim.add_measured_group(watching(DetectorTest::Sbd)).unwrap();
    let tcp_group = sim.add_measured_group(watching(DetectorTest::Sbd)).unwrap();
    let t = sim.add_tcp_flow(TcpFlowConfig::bulk(s, d1)).unwrap();
    sim.couple(t, tcp_group, 1.0).unwrap();
    let a = media(&mut sim, s, d1, 500);
    let b = media(&mut sim, s, d2, 500);
    let err = |r: Result<(), sim::SimError>| r.unwrap_err().to_string();
    // A group that responds regroups TCP windows: media flows may only be watched.
    assert!(err(sim.measure_media(a, responds)).contains("respond"));
    // Not a measured group; not a media flow.
    assert!(err(sim.measure_media(a, 99)).contains("measured group"));
    assert!(err(sim.measure_media(99, watches)).contains("99"));
    // One kind per group, either way round.
    assert!(err(sim.measure_media(a, tcp_group)).contains("one kind"));
    sim.measure_media(a, watches).unwrap();
    let t2 = sim.add_tcp_flow(TcpFlowConfig::bulk(s, d2)).unwrap();
    assert!(sim
        .couple(t2, watches, 1.0)
        .unwrap_err()
        .to_string()
        .contains("one kind"));
    // Once per flow.
    assert!(err(sim.measure_media(a, watches)).contains("not in a measured group yet"));
    sim.measure_media(b, watches).unwrap();
    // Started flows cannot join, even one started at the very instant the run stopped.
    let late = media(&mut sim, s, d2, 1_000);
    let exact = media(&mut sim, s, d2, 2_000);
    sim.run_until(Instant::from_secs(2));
    assert!(err(sim.measure_media(late, watches)).contains("not started"));
    assert!(err(sim.measure_media(exact, watches)).contains("not started"));
    let m = sim.measured_group(watches).unwrap();
    assert_eq!(m.detectors().count(), 1, "only a and b were opened");
}
