//! A link's jitter (`LinkConfig::jitter`): each packet's propagation longer by a uniform draw in
//! [0, jitter], its order kept; the hosts' sending jitter of a dumbbell on their links to the
//! routers only. Checked against the per-packet trace, packet by packet.

use coupling::{Duration, Instant};
use sim::engine::UdpFlowConfig;
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, parking_lot, DumbbellConfig};
use sim::net::{LinkConfig, Network};
use sim::packet::PacketKind;
use sim::stats::{PacketEventKind, Results};
use sim::traffic::{CbrConfig, SourceConfig, SourceKind};
use sim::{Sim, TcpFlowConfig};
use std::collections::HashMap;

const DELAY_MS: u64 = 10;

/// One TCP transfer of `segments` from A to B over one link each way: A->B at `rate_bps` with
/// `jitter`, B->A without. Returns the run's results with its packet trace.
fn transfer(rate_bps: u64, jitter: Duration, segments: u64, seed: u64) -> Results {
    let mut net = Network::default();
    let a = net.add_node("A").unwrap();
    let b = net.add_node("B").unwrap();
    let link = |jitter| LinkConfig {
        rate_bps,
        delay: Duration::from_millis(DELAY_MS),
        queue: QueueConfig::drop_tail_pkts(100_000),
        jitter,
    };
    net.add_link(a, b, &link(jitter)).unwrap();
    net.add_link(b, a, &link(Duration::ZERO)).unwrap();
    net.compute_routes();
    let mut sim = Sim::new(net, seed).unwrap();
    sim.trace_packets(true);
    let mut f = TcpFlowConfig::bulk(a, b);
    f.size_bytes = Some(segments * 1448);
    sim.add_tcp_flow(f).unwrap();
    sim.run_until(Instant::from_secs(120));
    let r = sim.results();
    assert!(r.flows[0].fct_s.is_some(), "the transfer finishes");
    assert_eq!(r.packets.dropped, 0);
    assert_eq!(r.flows[0].retransmits, 0);
    r
}

/// Per data segment (by sequence number, in delivery order): the time it took beyond its
/// serialization and the link's delay, in ns.
fn extra_ns(r: &Results, rate_bps: u64) -> Vec<(u64, u64)> {
    let mut sent: HashMap<u64, (u64, u32)> = HashMap::new();
    let mut out = Vec::new();
    for e in &r.packet_events {
        if e.packet != PacketKind::TcpData {
            continue;
        }
        match e.kind {
            PacketEventKind::Transmit => {
                assert!(
                    sent.insert(e.seq, (e.t_ns, e.size_bytes)).is_none(),
                    "sent once"
                );
            }
            PacketEventKind::Deliver => {
                let (t, size) = sent[&e.seq];
                let tx = (size as u64 * 8 * 1_000_000_000).div_ceil(rate_bps);
                let base = t + tx + DELAY_MS * 1_000_000;
                assert!(
                    e.t_ns >= base,
                    "seq {} arrives {} ns early",
                    e.seq,
                    base - e.t_ns
                );
                out.push((e.seq, e.t_ns - base));
            }
            _ => {}
        }
    }
    out
}

/// Packets 1.2 ms apart (10 Mbit/s) and 1 ms of jitter: no packet is ever held behind the one
/// before, so each one's extra delay is its own uniform draw in [0, 1 ms].
#[test]
fn each_packet_is_late_by_a_uniform_draw_up_to_the_jitter() {
    let jitter = Duration::from_millis(1);
    let r = transfer(10_000_000, jitter, 3000, 7);
    let x = extra_ns(&r, 10_000_000);
    assert_eq!(x.len(), 3000);
    let j = jitter.as_nanos() as f64;
    let mut v: Vec<f64> = x.iter().map(|&(_, e)| e as f64 / j).collect();
    assert!(v.iter().all(|&e| (0.0..=1.0).contains(&e)));
    // Uniform on [0, 1]: mean 1/2 (sd of the mean 0.29 / sqrt(3000) = 0.0053), quartiles 1/4, 3/4.
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    assert!((mean - 0.5).abs() < 0.03, "mean extra {mean} of the jitter");
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[(p * (v.len() - 1) as f64) as usize];
    assert!(
        (q(0.25) - 0.25).abs() < 0.04 && (q(0.75) - 0.75).abs() < 0.04,
        "{} {}",
        q(0.25),
        q(0.75)
    );
    assert!(
        q(0.0) < 0.01 && q(1.0) > 0.99,
        "the draws span [0, 1]: {} .. {}",
        q(0.0),
        q(1.0)
    );
}

/// Packets 12 us apart (1 Gbit/s) and 1 ms of jitter: a packet whose draw would land it before
/// the one ahead waits for it. Delivery stays in order, and no packet is late by more than the
/// jitter (the one ahead of it left earlier, with a draw of at most the jitter).
#[test]
fn jitter_never_reorders_and_never_exceeds_itself() {
    let jitter = Duration::from_millis(1);
    let r = transfer(1_000_000_000, jitter, 3000, 7);
    let x = extra_ns(&r, 1_000_000_000);
    assert_eq!(x.len(), 3000);
    assert!(
        x.windows(2).all(|w| w[0].0 < w[1].0),
        "delivered in sequence order"
    );
    assert!(x.iter().all(|&(_, e)| e <= jitter.as_nanos()));
    // Held behind the packet ahead, the extra delays are larger than uniform draws on average.
    let mean = x.iter().map(|&(_, e)| e as f64).sum::<f64>() / x.len() as f64;
    assert!(
        mean > 0.55 * jitter.as_nanos() as f64,
        "mean extra {mean} ns"
    );
}

/// No jitter: every packet exactly on time, and no random number drawn (the same seed gives the
/// same run as before jitter existed: `tests/test_snapshot.py` pins that for every scenario).
#[test]
fn zero_jitter_is_exact_and_a_seed_repeats_a_jittered_run() {
    let r = transfer(10_000_000, Duration::ZERO, 500, 7);
    assert!(extra_ns(&r, 10_000_000).iter().all(|&(_, e)| e == 0));
    let j = Duration::from_micros(300);
    let (a, b, c) = (
        transfer(10_000_000, j, 500, 7),
        transfer(10_000_000, j, 500, 7),
        transfer(10_000_000, j, 500, 8),
    );
    assert_eq!(a.packet_events, b.packet_events);
    assert_ne!(a.packet_events, c.packet_events);
}

/// A dumbbell's access jitter is on the hosts' links to the routers (data from senders, ACKs from
/// receivers) and on no other link; the link ids are those of a dumbbell without it.
#[test]
fn dumbbell_access_jitter_is_on_the_hosts_sending_links_only() {
    let mut plain = Network::default();
    let d0 = dumbbell(&mut plain, &DumbbellConfig::dissertation(3)).unwrap();
    let mut net = Network::default();
    let cfg = DumbbellConfig {
        access_jitter: Duration::from_micros(600),
        ..DumbbellConfig::dissertation(3)
    };
    let d = dumbbell(&mut net, &cfg).unwrap();
    assert_eq!(d, d0);
    let mut jittered = 0;
    for (l, p) in net.links.iter().zip(&plain.links) {
        assert_eq!((l.from, l.to, l.delay), (p.from, p.to, p.delay));
        let host = net.node_name(l.from);
        if host.starts_with('S') || host.starts_with('D') {
            assert_eq!(l.jitter, Duration::from_micros(600), "{host}");
            jittered += 1;
        } else {
            assert_eq!(
                l.jitter,
                Duration::ZERO,
                "{} -> {}",
                host,
                net.node_name(l.to)
            );
        }
    }
    assert_eq!(jittered, 6);
}

#[test]
fn jitter_over_a_second_is_refused_and_adds_nothing() {
    let mut net = Network::default();
    let a = net.add_node("A").unwrap();
    let b = net.add_node("B").unwrap();
    let cfg = LinkConfig {
        rate_bps: 1_000_000,
        delay: Duration::ZERO,
        queue: QueueConfig::drop_tail_pkts(10),
        jitter: Duration::from_millis(1001),
    };
    let e = net.add_link(a, b, &cfg).unwrap_err().to_string();
    assert!(
        e.contains("link[0].jitter") && e.contains("0 ..= 1 s"),
        "{e}"
    );
    assert!(net.links.is_empty());
    let mut net = Network::default();
    let cfg = DumbbellConfig {
        access_jitter: Duration::from_secs(2),
        ..DumbbellConfig::dissertation(2)
    };
    let e = dumbbell(&mut net, &cfg).unwrap_err().to_string();
    assert!(e.contains("dumbbell.access_jitter"), "{e}");
    assert!(net.nodes.is_empty() && net.links.is_empty());
}

/// A parking lot's access jitter is on each host's link to its router only.
#[test]
fn parking_lot_access_jitter_is_on_the_hosts_sending_links_only() {
    let link = LinkConfig {
        rate_bps: 10_000_000,
        delay: Duration::from_millis(10),
        queue: QueueConfig::drop_tail_pkts(100),
        jitter: Duration::ZERO,
    };
    let access = LinkConfig {
        rate_bps: 1_000_000_000,
        delay: Duration::from_millis(1),
        queue: QueueConfig::drop_tail_pkts(1000),
        jitter: Duration::from_micros(250),
    };
    let mut net = Network::default();
    let p = parking_lot(&mut net, 3, &link, &access).unwrap();
    let mut jittered = 0;
    for l in &net.links {
        let from_host = p.hosts.contains(&l.from);
        assert_eq!(
            l.jitter,
            if from_host {
                access.jitter
            } else {
                Duration::ZERO
            }
        );
        jittered += from_host as usize;
    }
    assert_eq!(jittered, 4);
    let mut net = Network::default();
    let big = LinkConfig {
        jitter: Duration::from_secs(3),
        ..access
    };
    let e = parking_lot(&mut net, 3, &link, &big)
        .unwrap_err()
        .to_string();
    assert!(e.contains("parking_lot.access.jitter"), "{e}");
    assert!(net.nodes.is_empty());
}

/// Jitter draws from a stream of its own: a random drop before the jittered link drops the same
/// packets with and without it (one shared generator would interleave the draws).
#[test]
fn jitter_leaves_the_other_random_processes_alone() {
    let dropped = |jitter| {
        let mut net = Network::default();
        let (a, b, c) = (
            net.add_node("A").unwrap(),
            net.add_node("B").unwrap(),
            net.add_node("C").unwrap(),
        );
        let lossy = LinkConfig {
            rate_bps: 100_000_000,
            delay: Duration::from_millis(1),
            queue: QueueConfig::RandomDrop {
                p: 0.1,
                inner: Box::new(QueueConfig::drop_tail_pkts(1000)),
            },
            jitter: Duration::ZERO,
        };
        net.add_link(a, b, &lossy).unwrap();
        let next = LinkConfig {
            queue: QueueConfig::drop_tail_pkts(1000),
            jitter,
            ..lossy
        };
        net.add_link(b, c, &next).unwrap();
        net.compute_routes();
        let mut sim = Sim::new(net, 5).unwrap();
        let cbr = SourceKind::Cbr(CbrConfig {
            rate_bps: 10_000_000.0,
            pkt_bytes: 1000,
        });
        sim.add_udp_flow(UdpFlowConfig {
            src: a,
            dst: c,
            start: Instant::ZERO,
            end: None,
            source: SourceConfig::new(cbr),
            dscp: 0,
        })
        .unwrap();
        sim.run_until(Instant::from_secs(2));
        let r = sim.results();
        (r.packets.dropped, r.packets.delivered)
    };
    let (plain, jittered) = (dropped(Duration::ZERO), dropped(Duration::from_micros(700)));
    assert!(plain.0 > 100, "{plain:?}");
    assert_eq!(plain.0, jittered.0);
}
