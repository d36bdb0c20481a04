//! A seeded run's summary, pinned with `insta` (issue 14): a refactoring of the engine must leave
//! it unchanged to the last bit; a change of behaviour updates the snapshot in its own commit,
//! saying why (`INSTA_UPDATE=always cargo test -p macroflow-sim --test snapshot`, then review
//! `tests/snapshots/`). The Python test `tests/test_snapshot.py` pins every shipped scenario.
//!
//! The run mixes what the engine does: coupled NewReno flows with ack-clocked handover and a
//! priority change, a CUBIC flow, a web workload (flows freed as they finish), self-similar UDP
//! cross traffic, a NADA media flow in an FSE group with signalling delay, RED at the bottleneck.

use coupling::fse::Algorithm;
use coupling::tcp::CouplerKind;
use coupling::{Duration, Instant};
use sim::engine::{FseCoupling, MediaFlowConfig, UdpFlowConfig};
use sim::media::MediaSource;
use sim::net::queue::{Limit, QueueConfig, RedConfig};
use sim::net::topology::{dumbbell, DumbbellConfig};
use sim::net::Network;
use sim::traffic::{SelfSimilarConfig, SourceConfig, SourceKind, WebWorkload};
use sim::transport::cc::CcKind;
use sim::transport::controllers;
use sim::{Sim, TcpFlowConfig};
use std::fmt::Write;

fn run() -> String {
    let mut net = Network::default();
    let mut cfg = DumbbellConfig::dissertation(5);
    cfg.bottleneck.queue =
        QueueConfig::Red(RedConfig::ns2_defaults(Limit::Packets(83), 10_000_000));
    let d = dumbbell(&mut net, &cfg).unwrap();
    let mut sim = Sim::new(net, 7).unwrap();
    let g = sim.add_coupling_group(CouplerKind::ccc(true));
    let f0 = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    let mut c1 = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
    c1.start = Instant::from_secs(3);
    c1.size_bytes = Some(4_000_000);
    let f1 = sim.add_tcp_flow(c1).unwrap();
    sim.couple(f0, g, 1.0).unwrap();
    sim.couple(f1, g, 2.0).unwrap();
    sim.schedule_priority(Instant::from_secs(8), f0, 3.0)
        .unwrap();
    let mut cubic = TcpFlowConfig::bulk(d.senders[2], d.receivers[2]);
    cubic.cc = CcKind::named("cubic");
    sim.add_tcp_flow(cubic).unwrap();
    let web = WebWorkload {
        load_bps: 2e6,
        ..WebWorkload::default()
    };
    sim.add_web_workload(
        &web,
        &[(d.senders[3], d.receivers[3])],
        Instant::from_secs(1),
        Instant::from_secs(25),
        TcpFlowConfig::bulk(d.senders[3], d.receivers[3]),
    )
    .unwrap();
    sim.add_udp_flow(UdpFlowConfig {
        src: d.senders[4],
        dst: d.receivers[4],
        start: Instant::ZERO,
        end: None,
        source: SourceConfig::new(SourceKind::SelfSimilar(SelfSimilarConfig {
            load_bps: Some(1e6),
            ..SelfSimilarConfig::default()
        })),
        dscp: 0,
    })
    .unwrap();
    let fse = sim.add_fse_group(Algorithm::ConservativeActive);
    let (snd, rcv) = controllers::build("nada", 1200, "media").unwrap();
    let m = sim
        .add_media_flow(
            MediaFlowConfig {
                src: d.senders[4],
                dst: d.receivers[4],
                start: Instant::from_secs(2),
                packet_bytes: 1200,
                source: MediaSource::Greedy,
                pauses: vec![],
                dscp: 0,
            },
            snd,
            rcv,
        )
        .unwrap();
    sim.couple_media(
        m,
        FseCoupling {
            group: fse,
            priority: 1.0,
            delay_min: Duration::from_millis(5),
            delay_max: Duration::from_millis(20),
        },
    )
    .unwrap();
    sim.sample_every(Duration::from_millis(500), &[d.bottleneck])
        .unwrap();
    sim.run_until(Instant::from_secs(30));
    let r = sim.results();
    let mut out = String::new();
    let p = r.packets;
    writeln!(
        out,
        "events {} packets created {} delivered {} dropped {} in flight {}",
        r.events, p.created, p.delivered, p.dropped, p.in_flight
    )
    .unwrap();
    writeln!(out, "coupling errors {:?}", r.coupling_errors).unwrap();
    let web_flows = r.flows.len() - 3;
    let done = r.flows.iter().filter(|f| f.fct_s.is_some()).count();
    writeln!(
        out,
        "tcp flows {} (web {web_flows}), completed {done}",
        r.flows.len()
    )
    .unwrap();
    // The long flows in full; the web flows as sums (exact: integers, and floats summed in order).
    for f in r.flows.iter().take(3) {
        writeln!(
            out,
            "flow {} {} delivered {} goodput {:?} sent {} retx {} rto {} fr {} max burst {} rtt {:?} fct {:?}",
            f.flow, f.cc, f.delivered_bytes, f.goodput_bps, f.data_pkts_sent, f.retransmits, f.timeouts,
            f.fast_recoveries, f.max_burst_pkts, f.mean_rtt_s, f.fct_s
        )
        .unwrap();
    }
    let web = &r.flows[3..];
    writeln!(
        out,
        "web delivered {} sent {} retx {} rto {} fct sum {:?}",
        web.iter().map(|f| f.delivered_bytes).sum::<u64>(),
        web.iter().map(|f| f.data_pkts_sent).sum::<u64>(),
        web.iter().map(|f| f.retransmits).sum::<u64>(),
        web.iter().map(|f| f.timeouts).sum::<u64>(),
        web.iter().filter_map(|f| f.fct_s).sum::<f64>()
    )
    .unwrap();
    for u in &r.udp_flows {
        writeln!(
            out,
            "udp {} sent {} received {}",
            u.flow, u.sent_pkts, u.received_pkts
        )
        .unwrap();
    }
    for m in &r.media_flows {
        writeln!(
            out,
            "media {} {} sent {} received {} goodput {:?} owd {:?}",
            m.flow, m.controller, m.sent_pkts, m.received_pkts, m.goodput_bps, m.mean_owd_s
        )
        .unwrap();
    }
    for l in r.links.iter().filter(|l| l.dropped_pkts > 0 || l.link < 2) {
        writeln!(
            out,
            "link {} tx {} dropped {} utilization {:?} mean queue {:?}",
            l.link, l.tx_pkts, l.dropped_pkts, l.utilization, l.mean_queue_pkts
        )
        .unwrap();
    }
    writeln!(
        out,
        "samples: flows {} queues {} media {}; cwnd sum {:?}",
        r.flow_samples.len(),
        r.queue_samples.len(),
        r.media_samples.len(),
        r.flow_samples.iter().map(|s| s.cwnd_pkts).sum::<f64>()
    )
    .unwrap();
    out
}

#[test]
fn a_seeded_mixed_run_is_unchanged() {
    let a = run();
    assert_eq!(a, run(), "deterministic");
    insta::assert_snapshot!(a);
}
