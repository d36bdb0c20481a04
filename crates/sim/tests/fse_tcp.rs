//! TCP flows coupled through an FSE group (seed 003 sec. 6.3.1, Fig. 6.3): two TCP flows on a
//! dumbbell with a 3 Mbit/s bottleneck and a 13-packet queue.

use coupling::fse::Algorithm;
use coupling::{Duration, Instant};
use sim::engine::FseCoupling;
use sim::net::queue::QueueConfig;
use sim::net::topology::{dumbbell, Dumbbell, DumbbellConfig};
use sim::net::Network;
use sim::{Sim, TcpFlowConfig};

/// Fig. 6.3's dumbbell: 3 Mbit/s, 13 packets of queue, 1 ms of bottleneck delay; pair i's RTT
/// (without queueing) is `rtts_ms[i]`.
fn setup(rtts_ms: &[f64], seed: u64) -> (Sim, Dumbbell) {
    let mut net = Network::default();
    let mut cfg = DumbbellConfig::dissertation(rtts_ms.len());
    cfg.bottleneck.rate_bps = 3_000_000;
    cfg.bottleneck.delay = Duration::from_millis(1);
    cfg.bottleneck.queue = QueueConfig::drop_tail_pkts(13);
    // RTT = 2 * (bottleneck delay + 2 * access delay).
    cfg.access_delays = rtts_ms
        .iter()
        .map(|r| Duration::from_nanos(((r / 2.0 - 1.0) / 2.0 * 1e6) as u64))
        .collect();
    let d = dumbbell(&mut net, &cfg).unwrap();
    (Sim::new(net, seed).unwrap(), d)
}

fn fse(group: usize, priority: f64) -> FseCoupling {
    FseCoupling {
        group,
        priority,
        delay_min: Duration::ZERO,
        delay_max: Duration::ZERO,
    }
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

/// Two bulk NewReno flows with RTTs `rtts_ms`, the second starting 0.5 s after the first, in one
/// FSE group running `algorithm` (uncoupled for `None`) with `priorities`, for `secs`; their
/// goodputs.
fn goodputs(
    rtts_ms: [f64; 2],
    algorithm: Option<Algorithm>,
    priorities: [f64; 2],
    seed: u64,
    secs: u64,
) -> [f64; 2] {
    let (mut sim, d) = setup(&rtts_ms, seed);
    let g = algorithm.map(|a| sim.add_fse_group(a));
    for (i, p) in priorities.into_iter().enumerate() {
        let mut c = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        // Start times over the first second (seed 003's runs), fixed by the seed.
        c.start = Instant::from_millis((seed * 7919 + i as u64 * 331) % 1000);
        let f = sim.add_tcp_flow(c).unwrap();
        if let Some(g) = g {
            sim.couple_tcp_fse(f, fse(g, p)).unwrap();
        }
    }
    sim.run_until(Instant::from_secs(secs));
    let r = sim.results();
    assert_eq!(
        sim.coupling_errors(),
        0,
        "{:?}",
        sim.coupling_errors_by_kind()
    );
    let pc = sim.packet_counts();
    assert_eq!(pc.created, pc.delivered + pc.dropped + pc.in_flight);
    [r.flows[0].goodput_bps, r.flows[1].goodput_bps]
}

/// Sec. 6.3.1 and Fig. 6.3: with equal RTTs the flows update equally often and a passive FSE
/// shares fairly; with unequal RTTs the long-RTT flow learns the FSE's answer less often and the
/// fairness deteriorates as the RTT ratio grows. In this model the deterioration starts past an
/// RTT ratio of 10: at 10 and 100 ms the 13-packet queue (52 ms at 3 Mbit/s) brings the RTTs the
/// flows see to about 60 and 150 ms, and the passive FSE keeps Jain's index at 0.998 (see
/// `measure_jain_over_rtt_ratios`); the claim is checked at 10 : 200 and 10 : 300 ms.
/// Equal RTTs share within 10%, not exactly: which flow a drop-tail queue drops from depends on
/// the flows' phase (the same flows uncoupled differ by 5%), and a flow recovering from a loss
/// runs below its share until its next UPDATE.
#[test]
fn fig_6_3_a_passive_fse_is_fair_at_equal_rtts_and_less_so_as_the_rtt_ratio_grows() {
    for algorithm in [Algorithm::SimplePassive, Algorithm::Passive] {
        let name = algorithm.name();
        let equal = goodputs([10.0, 10.0], Some(algorithm), [1.0, 1.0], 1, 60);
        let ratio = equal[1] / equal[0];
        assert!((ratio - 1.0).abs() < 0.1, "{name}: {equal:?}");
        assert!(
            equal[0] + equal[1] > 2.5e6,
            "{name}: the bottleneck is used: {equal:?}"
        );
        let jain_at = |long_ms: f64| {
            jain(&goodputs(
                [10.0, long_ms],
                Some(algorithm),
                [1.0, 1.0],
                1,
                60,
            ))
        };
        let (je, j20, j30) = (jain(&equal), jain_at(200.0), jain_at(300.0));
        let alone = jain(&goodputs([10.0, 200.0], None, [1.0, 1.0], 1, 60));
        println!(
            "{name}: goodput ratio {ratio:.3} at equal RTTs; Jain {je:.3} at RTT ratio 1, \
             {j20:.3} at 20 (uncoupled {alone:.3}), {j30:.3} at 30"
        );
        assert!(je > 0.99, "{name}: Jain {je} at equal RTTs");
        assert!(
            j20 < je && j30 < j20 - 0.05,
            "{name}: Jain {je}, {j20}, {j30}"
        );
        // Still fairer than the same flows uncoupled (TCP's RTT unfairness).
        assert!(j20 > alone + 0.1, "{name}: Jain {j20} vs {alone} uncoupled");
    }
}

/// The mechanism sec. 6.3.1 names: "TCP updates its rate as a function of the RTT". Each flow
/// sends one UPDATE per round trip of its own (one new FSE_R per UPDATE, under Algorithm 3), so
/// the long-RTT flow hears from the FSE about as many times fewer as its RTT is longer.
#[test]
fn a_flow_updates_once_per_round_trip() {
    let (mut sim, d) = setup(&[10.0, 100.0], 2);
    let g = sim.add_fse_group(Algorithm::SimplePassive);
    for i in 0..2 {
        let f = sim
            .add_tcp_flow(TcpFlowConfig::bulk(d.senders[i], d.receivers[i]))
            .unwrap();
        sim.couple_tcp_fse(f, fse(g, 1.0)).unwrap();
    }
    sim.run_until(Instant::from_secs(5));
    let rate = |sim: &Sim, f: u64| {
        sim.fse_group(g)
            .unwrap()
            .flow(coupling::FlowId(f))
            .unwrap()
            .fse_rate_bps
    };
    let mut last = [rate(&sim, 0), rate(&sim, 1)];
    let mut updates = [0u32; 2];
    for ms in 5_001..=25_000 {
        sim.run_until(Instant::from_millis(ms));
        for f in 0..2 {
            let r = rate(&sim, f as u64);
            if r != last[f] {
                updates[f] += 1;
                last[f] = r;
            }
        }
    }
    let r = sim.results();
    for (f, &n) in updates.iter().enumerate() {
        let rounds = 20.0 / r.flows[f].mean_rtt_s;
        let n = f64::from(n);
        println!("flow {f}: {n} updates in 20 s, {rounds:.0} mean RTTs");
        // A round lasts one RTT, longer when the window shrinks or the flow recovers from a loss.
        assert!(
            n > 0.6 * rounds && n < 1.05 * rounds,
            "flow {f}: {n} vs {rounds}"
        );
    }
    assert!(updates[0] > 2 * updates[1], "{updates:?}");
}

/// The FSE shares by priority (seed 003 Algorithm 3 line 6: FSE_R(f) = P(f) * S_CR / S_P), for
/// every algorithm, and a scheduled priority change moves the split (active algorithms at once,
/// passive ones at the flow's next UPDATE, one round trip later).
#[test]
fn priorities_split_the_rate_and_a_change_moves_the_split() {
    for algorithm in Algorithm::ALL {
        let name = algorithm.name();
        let (mut sim, d) = setup(&[40.0, 40.0], 3);
        let g = sim.add_fse_group(algorithm);
        for (i, p) in [(0, 1.0), (1, 0.5)] {
            let mut c = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
            c.start = Instant::from_millis(100 * i as u64);
            let f = sim.add_tcp_flow(c).unwrap();
            sim.couple_tcp_fse(f, fse(g, p)).unwrap();
        }
        sim.schedule_priority(Instant::from_secs(60), 1, 1.0)
            .unwrap();
        sim.sample_every(Duration::from_secs(1), &[]).unwrap();
        sim.run_until(Instant::from_secs(120));
        let r = sim.results();
        assert_eq!(sim.coupling_errors(), 0, "{name}");
        let bytes = |f: u32, t: u64| {
            r.flow_samples
                .iter()
                .find(|s| s.flow == f && s.t_ns == t * 1_000_000_000)
                .unwrap()
                .delivered_bytes as f64
        };
        let split = |a: u64, b: u64| (bytes(1, b) - bytes(1, a)) / (bytes(0, b) - bytes(0, a));
        let (before, after) = (split(10, 60), split(70, 120));
        println!("{name}: goodput ratio {before:.3} at priorities 1 : 0.5, {after:.3} at 1 : 1");
        // Within 10%, as equal priorities share (see the test above); 15% for the passive
        // algorithms, which answer a flow only at its own UPDATE (simple_passive gave 0.555 once
        // flows registered at their first RTT sample, 0.5 +- 0.05 before).
        let tol = if algorithm.is_active() { 0.1 } else { 0.15 };
        assert!((before / 0.5 - 1.0).abs() < tol, "{name}: {before}");
        assert!((after - 1.0).abs() < 0.1, "{name}: {after}");
        let v = sim.fse_group(g).unwrap().flows();
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|f| f.priority == 1.0), "{name}: {v:?}");
    }
}

/// A flow registers at its first RTT sample and leaves when its transfer is acknowledged; the other flow
/// then has the bottleneck. With signalling delays (seed 003 Fig. 6.11) every message arrives
/// later, and nothing is refused.
#[test]
fn flows_register_and_leave_with_and_without_signalling_delays() {
    for delay_ms in [(0, 0), (50, 50), (1, 100)] {
        for algorithm in Algorithm::ALL {
            let name = format!("{}/{delay_ms:?}", algorithm.name());
            let (mut sim, d) = setup(&[20.0, 60.0], 9);
            let g = sim.add_fse_group(algorithm);
            let mut short = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
            short.start = Instant::from_secs(1);
            short.size_bytes = Some(2_000_000);
            let bulk = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
            for (i, c) in [bulk, short].into_iter().enumerate() {
                let f = sim.add_tcp_flow(c).unwrap();
                assert_eq!(f, i as u32);
                let c = FseCoupling {
                    delay_min: Duration::from_millis(delay_ms.0),
                    delay_max: Duration::from_millis(delay_ms.1),
                    ..fse(g, 1.0)
                };
                sim.couple_tcp_fse(f, c).unwrap();
            }
            assert!(
                sim.fse_group(g).unwrap().is_empty(),
                "{name}: none registered yet"
            );
            // Each registers at its first RTT sample (the short flow's first ACK waits behind
            // the bulk flow's queue).
            sim.run_until(Instant::from_millis(3000));
            assert_eq!(sim.fse_group(g).unwrap().len(), 2, "{name}");
            sim.run_until(Instant::from_secs(40));
            let r = sim.results();
            let fct = r.flows[1].fct_s.expect("the short flow completes");
            assert_eq!(sim.fse_group(g).unwrap().len(), 1, "{name}: it left");
            assert_eq!(sim.coupling_errors(), 0, "{name}");
            // While both ran they shared (2 MB in about twice the time 3 Mbit/s takes), and the
            // remaining flow used the whole bottleneck afterwards.
            assert!(fct > 8.0 && fct < 16.0, "{name}: completed in {fct} s");
            assert!(
                r.flows[0].goodput_bps > 0.6 * 3e6,
                "{name}: {}",
                r.flows[0].goodput_bps
            );
            let pc = sim.packet_counts();
            assert_eq!(pc.created, pc.delivered + pc.dropped + pc.in_flight);
        }
    }
}

/// Every mistake the API can be given is refused with an error naming the parameter, and
/// changes nothing: the flow can still be coupled correctly afterwards, and a group refused to
/// one kind of flow is still free for the other.
#[test]
fn bad_couplings_are_refused_and_change_nothing() {
    use sim::engine::MediaFlowConfig;
    use sim::media::MediaSource;
    use sim::transport::controllers;
    use sim::SimError;

    let (mut sim, d) = setup(&[20.0, 20.0, 20.0], 1);
    let g = sim.add_fse_group(Algorithm::SimplePassive);
    let media_group = sim.add_fse_group(Algorithm::Active);
    let coupler = sim.add_coupling_group(coupling::tcp::CouplerKind::ccc(false));
    let a = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    let b = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[1], d.receivers[1]))
        .unwrap();
    let (snd, rcv) = controllers::build("rap", 1000, "media").unwrap();
    let m = sim
        .add_media_flow(
            MediaFlowConfig {
                src: d.senders[2],
                dst: d.receivers[2],
                start: Instant::ZERO,
                packet_bytes: 1000,
                source: MediaSource::Greedy,
                pauses: vec![],
                dscp: 0,
            },
            snd,
            rcv,
        )
        .unwrap();
    sim.couple_media(m, fse(media_group, 1.0)).unwrap();

    let msg = |e: SimError| e.to_string();
    let err = |r: Result<(), SimError>| msg(r.expect_err("refused"));
    assert!(err(sim.couple_tcp_fse(7, fse(g, 1.0))).contains("unknown flow 7"));
    assert!(err(sim.couple_tcp_fse(a, fse(9, 1.0))).contains("flow[0].fse.group"));
    assert!(err(sim.couple_tcp_fse(a, fse(g, 0.0))).contains("flow[0].fse.priority"));
    assert!(err(sim.couple_tcp_fse(a, fse(g, f64::NAN))).contains("priority"));
    let backwards = FseCoupling {
        delay_min: Duration::from_millis(20),
        delay_max: Duration::from_millis(10),
        ..fse(g, 1.0)
    };
    assert!(err(sim.couple_tcp_fse(a, backwards)).contains("flow[0].fse.delay_max"));
    // A group of media flows takes no TCP flow, and a group of TCP flows no media flow.
    let e = err(sim.couple_tcp_fse(a, fse(media_group, 1.0)));
    assert!(
        e.contains("flow[0].fse.group") && e.contains("media"),
        "{e}"
    );
    // None of that changed anything: a is not coupled, g takes either kind yet.
    assert!(sim.fse_group(g).unwrap().is_empty());
    sim.couple_tcp_fse(a, fse(g, 1.0)).unwrap();
    let e = err(sim.couple_media(m, fse(g, 1.0)));
    assert!(
        e.contains("media_flow[0].fse.group") && e.contains("TCP"),
        "{e}"
    );
    // A TCP flow is in one group: FSE twice, FSE then a TCP coupler, a TCP coupler then FSE.
    assert!(err(sim.couple_tcp_fse(a, fse(g, 1.0))).contains("not coupled yet"));
    assert!(err(sim.couple(a, coupler, 1.0)).contains("FSE group"));
    sim.couple(b, coupler, 1.0).unwrap();
    assert!(err(sim.couple_tcp_fse(b, fse(g, 1.0))).contains("not coupled yet"));
    // Priority changes: a bad priority is refused for an FSE-coupled flow too.
    assert!(msg(sim
        .schedule_priority(Instant::from_secs(1), a, -1.0)
        .unwrap_err())
    .contains("priority"));
    // A flow that has started cannot be coupled.
    let c = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[2], d.receivers[2]))
        .unwrap();
    sim.run_until(Instant::from_secs(2));
    assert!(err(sim.couple_tcp_fse(c, fse(g, 1.0))).contains("not started yet"));
    // The run went on with a in g (alone: b is in the TCP coupler's group), nothing refused.
    assert_eq!(sim.fse_group(g).unwrap().len(), 1);
    assert_eq!(sim.coupler(coupler).unwrap().len(), 1);
    assert_eq!(sim.coupling_errors(), 0);
}

/// Jain's index of the two flows' goodputs over RTT ratios (short flow 10 ms), uncoupled and
/// under each FSE algorithm, mean of 10 runs with start times over the first second. Prints;
/// not a check (`cargo test --release -p macroflow-sim --test fse_tcp -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn measure_jain_over_rtt_ratios() {
    for ratio in [1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 50.0] {
        let mut line = format!("RTT ratio {ratio:>2}:");
        let mut arms = vec![None];
        arms.extend(Algorithm::ALL.map(Some));
        for a in arms {
            let js: Vec<f64> = (1..=10)
                .map(|seed| jain(&goodputs([10.0, 10.0 * ratio], a, [1.0, 1.0], seed, 200)))
                .collect();
            let mean = js.iter().sum::<f64>() / js.len() as f64;
            line += &format!("  {} {mean:.3}", a.map_or("uncoupled", |a| a.name()));
        }
        println!("{line}");
    }
}

/// A flow joining a running one must not hand it an oversized window (issue 18's review): the
/// joiner registered at its initial window over the path's propagation RTT, many times the
/// bottleneck on a short path, and the running flow got a share of that, turned into a window
/// with its own queue-inflated RTT (17 -> 38 segments here; thousands on a 0.4 ms path). It now
/// registers at its first RTT sample, with its window over that RTT.
#[test]
fn a_joining_flow_does_not_inflate_the_running_flows_window() {
    for (bn_us, acc_us, queue) in [(1000u64, 2000u64, 13usize), (100, 50, 100), (0, 0, 100)] {
        for alg in [
            Algorithm::Active,
            Algorithm::SimplePassive,
            Algorithm::Passive,
            Algorithm::ConservativeActive,
        ] {
            let mut net = Network::default();
            let mut cfg = DumbbellConfig::dissertation(2);
            cfg.bottleneck.rate_bps = 3_000_000;
            cfg.bottleneck.delay = Duration::from_micros(bn_us);
            cfg.bottleneck.queue = QueueConfig::drop_tail_pkts(queue);
            cfg.access_delays = vec![Duration::from_micros(acc_us); 2];
            let d = dumbbell(&mut net, &cfg).unwrap();
            let mut sim = Sim::new(net, 1).unwrap();
            let g = sim.add_fse_group(alg);
            for i in 0..2 {
                let mut c = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
                c.start = Instant::from_secs(5 * i as u64);
                let f = sim.add_tcp_flow(c).unwrap();
                sim.couple_tcp_fse(f, fse(g, 1.0)).unwrap();
            }
            sim.sample_every(Duration::from_millis(5), &[]).unwrap();
            sim.run_until(Instant::from_secs(10));
            let r = sim.results();
            let max_cwnd = |a: u64, b: u64| {
                r.flow_samples
                    .iter()
                    .filter(|s| s.flow == 0 && s.t_ns >= a * 1_000_000 && s.t_ns < b * 1_000_000)
                    .map(|s| s.cwnd_pkts)
                    .fold(0.0, f64::max)
            };
            let (before, after) = (max_cwnd(3000, 5000), max_cwnd(5000, 8000));
            assert!(
                after <= 1.25 * before + 2.0,
                "{alg:?}, base RTT {} us: the running flow's window went from {before:.1} to {after:.1} at the join",
                2 * (bn_us + 2 * acc_us)
            );
            assert_eq!(sim.coupling_errors(), 0);
        }
    }
}
