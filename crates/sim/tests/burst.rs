//! The burst instrument (issue 11): per TCP flow, the data packets its sender emits at one
//! simulated instant form one burst; `max_burst_pkts` and a power-of-two histogram of burst sizes
//! (`sim::stats::burst_bucket`) are in the results.
//!
//! The expected bursts are derived by hand from what the sender does, and checked a second way
//! against the per-packet trace: the data packets of a flow entering its first link at the same
//! nanosecond.

use coupling::tcp::CouplerKind;
use coupling::{Duration, Instant};
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::{Network, NodeId};
use sim::packet::{Packet, PacketKind};
use sim::stats::{burst_bucket, BurstStats, FlowSummary, PacketEventKind, Results, BURST_BUCKETS};
use sim::transport::cc::CcKind;
use sim::transport::coupled::CouplingGroups;
use sim::transport::tcp::{Endpoints, Outbox, TcpConfig, TcpSender};
use sim::{Sim, TcpFlowConfig};

const MSS: u64 = 1448;

fn setup(pairs: usize, seed: u64) -> (Sim, sim::net::topology::Dumbbell) {
    let mut net = Network::default();
    let d = dumbbell(&mut net, &DumbbellConfig::dissertation(pairs)).unwrap();
    (Sim::new(net, seed).unwrap(), d)
}

/// The bursts of `flow` in emission order, from the packet trace: its data packets entering the
/// first link they take (the sender's access link) at the same nanosecond.
fn bursts_from_trace(r: &Results, flow: u32) -> Vec<u64> {
    let mut first_link = None;
    let mut last_t = None;
    let mut out: Vec<u64> = Vec::new();
    for e in &r.packet_events {
        if e.kind != PacketEventKind::Enqueue || e.packet != PacketKind::TcpData || e.flow != flow {
            continue;
        }
        if *first_link.get_or_insert(e.link) != e.link {
            continue;
        }
        if last_t == Some(e.t_ns) {
            *out.last_mut().unwrap() += 1;
        } else {
            out.push(1);
            last_t = Some(e.t_ns);
        }
    }
    out
}

fn hist_of(sizes: &[u64]) -> [u64; BURST_BUCKETS] {
    let mut h = [0; BURST_BUCKETS];
    for &s in sizes {
        h[burst_bucket(s)] += 1;
    }
    h
}

/// The instrument agrees with the trace, and the histogram with the packet count.
fn check_against_trace(r: &Results, f: &FlowSummary) -> Vec<u64> {
    let sizes = bursts_from_trace(r, f.flow);
    assert_eq!(f.burst_hist, hist_of(&sizes), "flow {}", f.flow);
    assert_eq!(f.max_burst_pkts, sizes.iter().copied().max().unwrap_or(0));
    assert_eq!(sizes.iter().sum::<u64>(), f.data_pkts_sent);
    sizes
}

/// One NewReno flow of `pkts` segments alone on the dissertation's dumbbell (10 Mbit/s, 100 ms
/// RTT, 83-packet queue): too short to fill the queue, so nothing is lost.
fn lone_transfer(pkts: u64, delayed_ack: bool) -> (Results, Vec<u64>) {
    let (mut sim, d) = setup(1, 1);
    sim.trace_packets(true);
    let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
    f.size_bytes = Some(pkts * MSS);
    f.tcp.initial_cwnd_pkts = 10.0;
    f.tcp.delayed_ack = delayed_ack;
    sim.add_tcp_flow(f).unwrap();
    sim.run_until(Instant::from_secs(10));
    let r = sim.results();
    let fl = &r.flows[0];
    assert!(fl.fct_s.is_some(), "{fl:?}");
    assert_eq!(fl.data_pkts_sent, pkts, "{fl:?}");
    assert_eq!(fl.retransmits, 0, "{fl:?}");
    assert_eq!(r.packets.dropped, 0);
    let sizes = check_against_trace(&r, fl);
    (r, sizes)
}

/// Without delayed ACKs: the initial window leaves as one burst of 10; then every ACK acknowledges
/// one segment, frees it and (slow start, cwnd += 1) adds one: a burst of exactly 2 per ACK. 150
/// segments = 10 + 70 * 2.
#[test]
fn initial_window_then_slow_start_bursts_of_two_per_ack() {
    let (r, sizes) = lone_transfer(150, false);
    let f = &r.flows[0];
    let mut want = vec![10];
    want.extend([2; 70]);
    assert_eq!(sizes, want);
    assert_eq!(f.max_burst_pkts, 10);
    let mut hist = [0; BURST_BUCKETS];
    hist[3] = 1; // 8..=15: the initial window
    hist[1] = 70; // 2..=3
    assert_eq!(f.burst_hist, hist);
}

/// With delayed ACKs: the receiver acknowledges every second segment (the odd one out of a round
/// waits less than an RTT, well under the 200 ms timer, for the first of the next round), so every
/// ACK frees two segments and NewReno's slow start (cwnd += 1 per ACK, no byte counting) adds one:
/// bursts of exactly 3 after the initial 10. 130 segments = 10 + 40 * 3.
#[test]
fn with_delayed_acks_every_ack_releases_three() {
    let (r, sizes) = lone_transfer(130, true);
    let f = &r.flows[0];
    let mut want = vec![10];
    want.extend([3; 40]);
    assert_eq!(sizes, want);
    assert_eq!(f.max_burst_pkts, 10);
    let mut hist = [0; BURST_BUCKETS];
    hist[3] = 1;
    hist[1] = 40;
    assert_eq!(f.burst_hist, hist);
    // The histogram cannot tell 2 from 3; the packet count can: 10 + 40 bursts of 2 or 3 = 130
    // only if all are 3.
    assert_eq!(
        f.data_pkts_sent,
        10 + 3 * (f.burst_hist.iter().sum::<u64>() - 1)
    );
}

fn ack(segs: u64) -> Packet {
    let mut p = Packet::new(0, PacketKind::TcpAck, NodeId(1), NodeId(0), 52);
    p.ack = segs * MSS;
    p
}

/// A window raised from outside between events (as a coupler's answer or handover does with
/// `set_window`) leaves at once, as one burst; packets emitted by several calls at one instant are
/// one burst; packets at different instants are different bursts; reading the bursts does not
/// close the open one.
#[test]
fn a_window_raised_from_outside_leaves_as_one_burst() {
    let ep = Endpoints {
        flow: 0,
        src: NodeId(0),
        dst: NodeId(1),
        dscp: 0,
        hash: 0,
    };
    // Uncoupled: the groups its hooks are given stay empty.
    let mut groups = CouplingGroups::default();
    let mut s = TcpSender::new(
        TcpConfig::default(),
        CcKind::named("newreno").build(),
        ep,
        None,
    );
    let mut out = Outbox::default();
    let sent = |out: &mut Outbox| std::mem::take(&mut out.packets).len() as u64;

    let t0 = Instant::ZERO;
    s.start(t0, &mut out);
    assert_eq!(sent(&mut out), 10, "the initial window");

    // An ACK of 2 segments: 8 in flight, cwnd 10 -> 11 (slow start): 3 leave.
    let t1 = Instant::from_millis(100);
    assert!(s.on_ack(&ack(2), t1, &mut out, &mut groups));
    s.send_available(t1, &mut out);
    assert_eq!(sent(&mut out), 3);

    // Between events, the window is raised to 60: 60 - 11 in flight leave at once.
    let t2 = t1 + Duration::from_millis(1);
    s.set_window(60.0, 1e9);
    s.send_available(t2, &mut out);
    assert_eq!(sent(&mut out), 49);
    let mid = s.bursts();
    assert_eq!(mid.max_pkts, 49);
    assert_eq!(mid.bursts(), 3);
    // Raised again at the same instant: the 10 more join the same burst.
    s.set_window(70.0, 1e9);
    s.send_available(t2, &mut out);
    assert_eq!(sent(&mut out), 10);

    // The next ACK (1 segment): 69 in flight, cwnd 71: 2 leave, a new burst.
    let t3 = t2 + Duration::from_millis(1);
    assert!(s.on_ack(&ack(3), t3, &mut out, &mut groups));
    s.send_available(t3, &mut out);
    assert_eq!(sent(&mut out), 2);

    let b = s.bursts();
    let mut hist = [0; BURST_BUCKETS];
    hist[3] = 1; // 10
    hist[1] = 2; // 3 and 2
    hist[5] = 1; // 59 (32..=63)
    assert_eq!(b, BurstStats { max_pkts: 59, hist });
    assert_eq!(s.stats.data_pkts_sent, 10 + 3 + 59 + 2);
}

/// Losses included (SACK recovery; without SACK, NewReno's partial-ACK retransmissions; timeouts
/// and go-back-N under heavy random loss), with and without delayed ACKs: a bulk flow alone on
/// the dumbbell for 60 s, checked against the trace.
#[test]
fn a_bulk_flow_with_losses_matches_the_trace() {
    for random_drop in [0.0, 0.05] {
        for sack in [true, false] {
            for delayed_ack in [true, false] {
                let mut net = Network::default();
                let mut cfg = DumbbellConfig::dissertation(1);
                if random_drop > 0.0 {
                    cfg.bottleneck.queue = QueueConfig::RandomDrop {
                        p: random_drop,
                        inner: Box::new(cfg.bottleneck.queue.clone()),
                    };
                }
                let d = dumbbell(&mut net, &cfg).unwrap();
                let mut sim = Sim::new(net, 1).unwrap();
                sim.trace_packets(true);
                let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
                f.tcp.delayed_ack = delayed_ack;
                f.tcp.sack = sack;
                sim.add_tcp_flow(f).unwrap();
                sim.run_until(Instant::from_secs(60));
                let r = sim.results();
                let fl = &r.flows[0];
                assert!(fl.fast_recoveries > 0, "{fl:?}");
                if random_drop > 0.0 {
                    assert!(fl.timeouts > 0, "{fl:?}");
                }
                let sizes = check_against_trace(&r, fl);
                assert_eq!(sizes[0], 10, "the initial window");
                eprintln!(
                    "drop {random_drop} sack {sack} delayed_ack {delayed_ack}: max burst {} pkts \
                     (after the first: {}), {} bursts, hist {:?}, {} retransmits, {} timeouts",
                    fl.max_burst_pkts,
                    sizes[1..].iter().max().unwrap(),
                    sizes.len(),
                    fl.burst_hist,
                    fl.retransmits,
                    fl.timeouts
                );
            }
        }
    }
}

/// Coupled flows (ctrlTCP with ack-clocked handover): a flow's packets released by another flow's
/// ACK count as that flow's bursts; the instrument still agrees with the trace for every flow.
#[test]
fn coupled_flows_with_handover_match_the_trace() {
    let (mut sim, d) = setup(3, 2);
    sim.trace_packets(true);
    let g = sim.add_coupling_group(CouplerKind::ccc(true));
    for i in 0..3 {
        let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        f.start = Instant::from_millis(2_000 * i as u64);
        let id = sim.add_tcp_flow(f).unwrap();
        sim.couple(id, g, 1.0).unwrap();
    }
    sim.run_until(Instant::from_secs(20));
    let r = sim.results();
    assert_eq!(sim.coupling_errors(), 0);
    for fl in &r.flows {
        let sizes = check_against_trace(&r, fl);
        eprintln!(
            "coupled flow {}: max burst {} pkts, hist {:?}",
            fl.flow,
            sizes.iter().max().unwrap(),
            fl.burst_hist
        );
    }
}
