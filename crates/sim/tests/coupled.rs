//! Coupled TCP flows in the simulator, through `crates/coupling` (seed 003 sec. 9.2-9.3).

use coupling::tcp::{CouplerKind, TcpState};
use coupling::{Duration, Instant};
use sim::net::topology::{dumbbell, Dumbbell, DumbbellConfig};
use sim::net::Network;
use sim::{Sim, TcpFlowConfig};

fn setup(pairs: usize) -> (Sim, Dumbbell) {
    let mut net = Network::default();
    let d = dumbbell(&mut net, &DumbbellConfig::dissertation(pairs)).unwrap();
    (Sim::new(net, 11).unwrap(), d)
}

/// Fig. 9.6: priorities 0.75 and 0.25; flow 2 joins later and leaves before the end. While both
/// run, flow 1 holds 3/4 of the aggregate window and the windows rise and fall together.
#[test]
fn fig_9_6_priorities_split_three_to_one_and_move_together() {
    let (mut sim, d) = setup(2);
    let g = sim.add_coupling_group(CouplerKind::ccc(false));
    let f1 = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    let mut c2 = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
    c2.start = Instant::from_secs(10);
    c2.size_bytes = Some(10_000_000); // ends well before the run does
    let f2 = sim.add_tcp_flow(c2).unwrap();
    sim.couple(f1, g, 0.75).unwrap();
    sim.couple(f2, g, 0.25).unwrap();
    sim.sample_every(Duration::from_millis(100), &[d.bottleneck])
        .unwrap();
    sim.run_until(Instant::from_secs(90));
    let r = sim.results();
    let end2 = r.flows[1].fct_s.expect("flow 2 completes") + 10.0;
    assert!(end2 < 80.0, "flow 2 ended at {end2}");
    let at = |flow: u32, t_ns: u64| {
        r.flow_samples
            .iter()
            .find(|s| s.flow == flow && s.t_ns == t_ns)
            .copied()
    };
    let (mut ratios, mut together, mut apart) = (Vec::new(), 0, 0);
    let mut prev: Option<(f64, f64)> = None;
    for s in r
        .flow_samples
        .iter()
        .filter(|s| s.flow == 1 && s.t_ns as f64 > 12e9 && (s.t_ns as f64) < end2 * 1e9 - 1e9)
    {
        let Some(s1) = at(0, s.t_ns) else { continue };
        if s1.state == TcpState::FastRecovery || s.state == TcpState::FastRecovery {
            prev = None;
            continue;
        }
        ratios.push(s1.cwnd_pkts / s.cwnd_pkts);
        if let Some((p1, p2)) = prev {
            let (d1, d2) = (s1.cwnd_pkts - p1, s.cwnd_pkts - p2);
            if d1.abs() > 1e-9 && d2.abs() > 1e-9 {
                if d1.signum() == d2.signum() {
                    together += 1;
                } else {
                    apart += 1;
                }
            }
        }
        prev = Some((s1.cwnd_pkts, s.cwnd_pkts));
    }
    ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = ratios[ratios.len() / 2];
    assert!((median - 3.0).abs() < 0.15, "median cwnd ratio {median}");
    assert!(
        together > 10 * apart.max(1),
        "windows moved together {together} times, apart {apart}"
    );
    // After flow 2 has left, flow 1 has the whole aggregate.
    let c = sim.coupler(g).unwrap();
    assert_eq!(c.len(), 1);
    // Packet conservation.
    let pc = sim.packet_counts();
    assert_eq!(pc.created, pc.delivered + pc.dropped + pc.in_flight);
}

/// Fig. 9.3: a flow joining a coupled aggregate with a large window. Without ack-clocking and
/// with no burst bound (Algorithm 5 as written: `max_burst_pkts` unlimited) it sends its share as
/// one burst and the bottleneck queue spikes and overflows; with the ack-clocked handover its
/// segments are clocked out by the other flow's ACKs, and with the default bound (issue 11) it
/// slow-starts to its share: no spike either way.
#[test]
fn fig_9_3_handover_joins_without_a_burst() {
    let spike = |handover: bool, max_burst: f64| {
        let (mut sim, d) = setup(2);
        let g = sim.add_coupling_group(CouplerKind::ccc(handover));
        sim.set_max_burst_pkts(g, max_burst).unwrap();
        let f1 = sim
            .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
            .unwrap();
        let mut c2 = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
        c2.start = Instant::from_secs(5);
        let f2 = sim.add_tcp_flow(c2).unwrap();
        sim.couple(f1, g, 1.0).unwrap();
        sim.couple(f2, g, 1.0).unwrap();
        sim.sample_every(Duration::from_millis(1), &[d.bottleneck])
            .unwrap();
        sim.run_until(Instant::from_millis(4_990));
        let before = sim.results().links[d.bottleneck.0 as usize].dropped_pkts;
        sim.run_until(Instant::from_secs(6));
        let r = sim.results();
        let max_q = |from: u64, to: u64| {
            r.queue_samples
                .iter()
                .filter(|q| q.t_ns >= from && q.t_ns < to)
                .map(|q| q.pkts)
                .max()
                .unwrap()
        };
        let before_join = max_q(4_000_000_000, 5_000_000_000);
        let after_join = max_q(5_000_000_000, 6_000_000_000);
        let drops = r.links[d.bottleneck.0 as usize].dropped_pkts - before;
        (before_join, after_join, drops)
    };
    let (pre_b, q_burst, drops_burst) = spike(false, 1e9);
    let (pre_c, q_clocked, drops_clocked) = spike(true, 0.0);
    let (pre_s, q_bounded, drops_bounded) = spike(false, 0.0);
    println!(
        "max bottleneck queue in the second before / after the join: without handover {pre_b} / {q_burst} \
         ({drops_burst} drops), with {pre_c} / {q_clocked} ({drops_clocked} drops)"
    );
    assert!(
        drops_burst > 0 && q_burst == 83,
        "the burst fills the 83-packet queue and overflows it"
    );
    assert_eq!(drops_clocked, 0, "the clocked join loses nothing");
    println!("bounded (default) join: {pre_s} / {q_bounded} ({drops_bounded} drops)");
    assert_eq!(drops_bounded, 0, "the bounded join loses nothing");
    assert!(
        q_bounded <= pre_s + 10 + 5,
        "no spike with the default bound: {pre_s} -> {q_bounded}"
    );
    // Algorithm 5 adds the joiner's initial window (10) to the aggregate, and flow 1 grows by about
    // half a segment per RTT: the queue may rise by that much, clocked out, not in a burst.
    assert!(
        q_clocked <= pre_c + 10 + 5,
        "no spike with the handover: {pre_c} -> {q_clocked}"
    );
}

/// Priorities change during the run (seed 003 Fig. 5.13 for the FSE, 9.12 for TCP): the split of
/// the aggregate window follows.
#[test]
fn priority_changes_during_the_run_move_the_split() {
    let (mut sim, d) = setup(2);
    let g = sim.add_coupling_group(CouplerKind::ccc(false));
    let f1 = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    let f2 = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[1], d.receivers[1]))
        .unwrap();
    sim.couple(f1, g, 1.0).unwrap();
    sim.couple(f2, g, 1.0).unwrap();
    sim.schedule_priority(Instant::from_secs(30), f1, 0.25)
        .unwrap();
    sim.sample_every(Duration::from_millis(100), &[]).unwrap();
    sim.run_until(Instant::from_secs(60));
    let r = sim.results();
    let median_ratio = |from: f64, to: f64| {
        let mut v: Vec<f64> = r
            .flow_samples
            .iter()
            .filter(|s| s.flow == 0 && (s.t_ns as f64) > from * 1e9 && (s.t_ns as f64) < to * 1e9)
            .filter_map(|s1| {
                let s2 = r
                    .flow_samples
                    .iter()
                    .find(|s| s.flow == 1 && s.t_ns == s1.t_ns)?;
                (s1.state != TcpState::FastRecovery && s2.state != TcpState::FastRecovery)
                    .then(|| s1.cwnd_pkts / s2.cwnd_pkts)
            })
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let before = median_ratio(5.0, 29.0);
    let after = median_ratio(32.0, 59.0);
    assert!((before - 1.0).abs() < 0.05, "equal priorities: {before}");
    assert!((after - 0.25).abs() < 0.02, "priority 0.25 vs 1: {after}");
    assert!(
        sim.schedule_priority(Instant::from_secs(70), 9, 1.0)
            .is_err(),
        "unknown flow"
    );
}

/// Review findings: CUBIC flows coupled under heavy random loss (repeated timeouts, shares of the
/// aggregate ssthresh below two segments) run without a rejected report; a flow with a tiny
/// priority still gets a segment and makes progress.
#[test]
fn coupled_cubic_under_heavy_loss_and_tiny_priorities_keep_going() {
    use sim::net::queue::QueueConfig;
    use sim::transport::cc::CcKind;
    for (p1, p2, loss) in [(0.5, 0.5, 0.1), (0.1, 0.9, 0.05), (0.98, 0.02, 0.0)] {
        let mut net = Network::default();
        let mut cfg = DumbbellConfig::dissertation(2);
        if loss > 0.0 {
            cfg.bottleneck.queue = QueueConfig::RandomDrop {
                p: loss,
                inner: Box::new(QueueConfig::drop_tail_pkts(83)),
            };
        }
        let d = dumbbell(&mut net, &cfg).unwrap();
        let mut sim = Sim::new(net, 1).unwrap();
        let g = sim.add_coupling_group(CouplerKind::ccc(false));
        for (i, p) in [(0, p1), (1, p2)] {
            let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
            f.cc = CcKind::named("cubic");
            let id = sim.add_tcp_flow(f).unwrap();
            sim.couple(id, g, p).unwrap();
        }
        sim.run_until(Instant::from_secs(60));
        assert_eq!(sim.coupling_errors(), 0, "{p1}/{p2} at {loss}");
        let r = sim.results();
        assert!(
            r.flows.iter().all(|f| f.delivered_bytes > 0),
            "every flow makes progress: {:?}",
            r.flows
        );
    }
}

/// Seed 003 ch. 8 (OpenTCP): a window-based LEDBAT flow and a NewReno flow coupled in one
/// TCP-CCC group share the aggregate by priority instead of LEDBAT yielding everything. The
/// uncoupled share is a mean over eight start times and seeds: one run is a sample of a wide
/// spread (0.32 to 0.83 for these eight), too wide for one run to decide.
#[test]
fn ledbat_and_tcp_coupled_share_by_priority() {
    use sim::transport::cc::CcKind;
    let run = |coupled: bool, k: u64| {
        let mut net = Network::default();
        let d = dumbbell(&mut net, &DumbbellConfig::dissertation(2)).unwrap();
        let mut sim = Sim::new(net, k + 1).unwrap();
        let g = sim.add_coupling_group(CouplerKind::ccc(false));
        let mut ids = Vec::new();
        for (i, cc, start_ms) in [
            (0, CcKind::named("ledbat"), 100 * k),
            (1, CcKind::named("newreno"), 50 * k),
        ] {
            let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
            f.cc = cc;
            f.start = Instant::from_millis(start_ms);
            ids.push(sim.add_tcp_flow(f).unwrap());
        }
        if coupled {
            sim.couple(ids[0], g, 1.0).unwrap();
            sim.couple(ids[1], g, 1.0).unwrap();
        }
        sim.run_until(Instant::from_secs(120));
        assert_eq!(sim.coupling_errors(), 0);
        let r = sim.results();
        r.flows[0].goodput_bps / r.flows[1].goodput_bps
    };
    let alone: Vec<f64> = (0..8).map(|k| run(false, k)).collect();
    let coupled: Vec<f64> = (0..4).map(|k| run(true, k)).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!("LEDBAT / NewReno goodput: uncoupled {alone:.3?}, coupled with equal priorities {coupled:.3?}");
    // With the 1-BDP (100 ms) queue LEDBAT's 100 ms target is the whole buffer, so it yields
    // partly; with a deeper buffer it yields almost entirely (transport::ledbat's tests).
    assert!(
        mean(&alone) < 0.7,
        "uncoupled, LEDBAT yields to TCP: {alone:?}"
    );
    // Coupled runs give 0.84 to 0.99 over these start times (the same before and after the
    // flightsize fix of issue 18); where the gap at equal windows comes from is not traced yet.
    assert!(
        (mean(&coupled) - 1.0).abs() < 0.15,
        "coupled, they share equally: {coupled:?}"
    );
}

/// Issue 18 (Figs. 8.3, 8.4): four coupled LEDBAT flows grow their aggregate like one flow. The
/// RFC 6817 cap `cwnd <= flightsize + 1` taken from the whole segments in flight held every
/// share of a fractional window below the next integer for good (ctrlTCP hands each flow 1/n
/// of the increase), so the aggregate stalled below the path's BDP in 69 of 90 runs.
#[test]
fn four_coupled_ledbat_flows_fill_the_path() {
    use sim::transport::cc::CcKind;
    let (mut sim, d) = setup(4);
    let g = sim.add_coupling_group(CouplerKind::ccc(false));
    for i in 0..4 {
        let mut f = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
        f.cc = CcKind::named("ledbat");
        f.start = Instant::from_millis(37 * i as u64);
        let id = sim.add_tcp_flow(f).unwrap();
        sim.couple(id, g, 1.0).unwrap();
    }
    sim.run_until(Instant::from_secs(60));
    let r = sim.results();
    let total: f64 = r.flows.iter().map(|f| f.goodput_bps).sum();
    // One LEDBAT flow alone fills 10 Mbit/s within seconds (its target queue is the whole buffer).
    assert!(total > 8.5e6, "the coupled aggregate stalled: {total}");
}

/// Issue 14: the integer window mode end to end. Four Linux-Reno flows (priorities 1, 2, 3, 4) in
/// one ctrlTCP group, run in each arithmetic: `newreno_abc` (Linux's rule in f64) with `ccc`, and
/// `reno_int` (whole packets, `snd_cwnd_cnt`) with `ccc_int`. Measured: aggregates 9.627 and
/// 9.634 Mbit/s, shares within 0.002 of each other; every window of the integer run is whole.
/// (A whole-packet sender under the float coupler drops the fraction of every window it is told,
/// and got 3.7 % less; the opposite mix, a fractional controller in an integer group, would never
/// grow and is refused: see the next test.)
#[test]
fn the_integer_mode_splits_as_the_float_mode_does() {
    let run = |int: bool| {
        let (mut sim, d) = setup(4);
        let g = sim.add_coupling_group(CouplerKind::Ccc {
            handover: false,
            int,
        });
        let mut flows = Vec::new();
        for i in 0..4 {
            let mut c = TcpFlowConfig::bulk(d.senders[i], d.receivers[i]);
            // Linux Reno in each arithmetic: whole packets with the integer coupler.
            c.cc = sim::transport::cc::CcKind::named(if int { "reno_int" } else { "newreno_abc" });
            let f = sim.add_tcp_flow(c).unwrap();
            sim.couple(f, g, (i + 1) as f64).unwrap();
            flows.push(f);
        }
        sim.sample_every(Duration::from_millis(100), &[d.bottleneck])
            .unwrap();
        sim.run_until(Instant::from_secs(120));
        let r = sim.results();
        assert_eq!(sim.coupling_errors(), 0);
        let whole = r
            .flow_samples
            .iter()
            .all(|s| s.cwnd_pkts.fract() == 0.0 && s.ssthresh_pkts.fract() == 0.0);
        let goodput: Vec<f64> = r.flows.iter().map(|f| f.goodput_bps).collect();
        (goodput, whole)
    };
    let (float, _) = run(false);
    let (int, whole) = run(true);
    assert!(whole, "the integer mode's windows are whole packets");
    let (sf, si): (f64, f64) = (float.iter().sum(), int.iter().sum());
    eprintln!("float {float:?} = {sf}; int {int:?} = {si}");
    assert!((si / sf - 1.0).abs() < 0.01, "aggregate {si} vs {sf}");
    for i in 0..4 {
        let (shf, shi) = (float[i] / sf, int[i] / si);
        assert!(
            (shi - shf).abs() < 0.01,
            "flow {i}: share {shi:.3} (int) vs {shf:.3} (float)"
        );
        // Priorities 1:2:3:4 of the aggregate, within a few percent of it.
        assert!(
            (shi - (i + 1) as f64 / 10.0).abs() < 0.04,
            "flow {i}: share {shi:.3}"
        );
    }
}

/// Review of issue 14: an integer-mode group's answers are whole packets, so a controller that
/// grows by fractions (NewReno's 1/cwnd) would have its growth dropped on every ACK and never
/// grow; such a flow, and a priority the integer mode cannot hold, are refused when coupled,
/// naming the field, and nothing changes.
#[test]
fn an_integer_group_refuses_fractional_controllers_and_tiny_priorities() {
    let (mut sim, d) = setup(2);
    let g = sim.add_coupling_group(CouplerKind::Ccc {
        handover: false,
        int: true,
    });
    let f = sim
        .add_tcp_flow(TcpFlowConfig::bulk(d.senders[0], d.receivers[0]))
        .unwrap();
    let e = sim.couple(f, g, 1.0).unwrap_err().to_string();
    assert!(
        e.contains("flow[0].cc") && e.contains("newreno") && e.contains("reno_int"),
        "{e}"
    );
    let mut c = TcpFlowConfig::bulk(d.senders[1], d.receivers[1]);
    c.cc = sim::transport::cc::CcKind::named("reno_int");
    let h = sim.add_tcp_flow(c).unwrap();
    let e = sim.couple(h, g, 1e-6).unwrap_err().to_string();
    assert!(e.contains("priority") && e.contains("1/65536"), "{e}");
    sim.couple(h, g, 1.0).unwrap();
    let e = sim
        .schedule_priority(Instant::from_secs(1), h, 1e-6)
        .unwrap_err()
        .to_string();
    assert!(e.contains("1/65536"), "{e}");
    // A float group takes either.
    let fg = sim.add_coupling_group(CouplerKind::ccc(false));
    sim.couple(f, fg, 1e-6).unwrap();
    sim.run_until(Instant::from_secs(5));
    assert_eq!(sim.coupling_errors(), 0);
}
