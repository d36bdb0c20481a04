//! Property tests on thousands of random instances: clamp (progressive filling) equals the literal
//! Fig. 5 and passes the independent max-min check; brick-wall states are feasible.

use flowsim::senders::{self, SenderModel};
use flowsim::{account, check_max_min, clamp, clamp_oracle, Brickwall, Flows, Network};
use proptest::prelude::*;

/// A random network: `n` nodes, links `(a, b, capacity)` (self-loops and duplicates skipped),
/// flows `(s, t, demand)` (pairs without a path skipped). Capacities and demands are small
/// integers or halves so ties between links are common; a demand of 0 stands for infinity.
fn instance() -> impl Strategy<Value = (Network, Flows, Vec<f64>)> {
    (2usize..9)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec((0..n, 0..n, 0u32..21), 1..24),
                prop::collection::vec((0..n, 0..n, 0u32..13), 1..16),
            )
        })
        .prop_map(|(n, links, flows)| {
            let mut net = Network::new();
            for i in 0..n {
                net.add_node(&format!("n{i}")).unwrap();
            }
            for (a, b, c) in links {
                let _ = net.add_link(a as u32, b as u32, c as f64 / 2.0);
            }
            let mut pairs = Vec::new();
            let mut demands = Vec::new();
            for (s, t, d) in flows {
                if Flows::shortest(&net, &[(s as u32, t as u32)]).is_ok() {
                    pairs.push((s as u32, t as u32));
                    demands.push(if d == 0 {
                        f64::INFINITY
                    } else {
                        d as f64 / 2.0
                    });
                }
            }
            let flows = Flows::shortest(&net, &pairs).unwrap();
            (net, flows, demands)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn clamp_equals_the_literal_algorithm_and_is_max_min((net, flows, demands) in instance()) {
        let fast = clamp(&net, &flows, &demands).unwrap();
        let plain = clamp_oracle(&net, &flows, &demands).unwrap();
        for (a, b) in fast.iter().zip(&plain) {
            prop_assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "clamp {fast:?} oracle {plain:?}");
        }
        prop_assert_eq!(check_max_min(&net, &flows, &demands, &fast, 1e-9), Ok(()));
    }

    #[test]
    fn brickwall_states_are_feasible_and_zombies_bound_the_loss((net, flows, _d) in instance()) {
        let bw = Brickwall::new(&net, &flows);
        let inf = vec![f64::INFINITY; flows.len()];
        let mmf = clamp(&net, &flows, &inf).unwrap();
        for model in [SenderModel::NaiveFireHose, SenderModel::LimitedRatio { alpha: 0.2 }] {
            let fp = senders::fixed_point(&bw, model, 1e-9, 20_000).unwrap();
            let st = &fp.state;
            let mut load = vec![0.0; net.link_count()];
            for h in 0..flows.links.len() {
                prop_assert!(st.carried[h] <= st.offered[h] * (1.0 + 1e-9) + 1e-12);
                load[flows.links[h] as usize] += st.carried[h];
            }
            for (l, link) in net.links().iter().enumerate() {
                prop_assert!(load[l] <= link.capacity * (1.0 + 1e-9) + 1e-12);
            }
            // A flow ends below its fair share because it asked for less, or because of drops
            // below its share (zombies): the optimum's gain is at most the two together.
            let acc = account(&net, &flows, st, &mmf);
            let optimal: f64 = mmf.iter().sum();
            let unasked: f64 = mmf.iter().zip(&fp.demands).map(|(m, d)| (m - d).max(0.0)).sum();
            prop_assert!(optimal - acc.goodput <= acc.zombie + unasked + 1e-6 * (1.0 + optimal),
                "optimal {optimal} goodput {} zombies {} unasked {unasked}", acc.goodput, acc.zombie);
        }
    }
}

/// A flow that is not max-min fair is caught by the check (so the property above can fail).
#[test]
fn the_check_rejects_a_perturbed_assignment() {
    let mut net = Network::new();
    let a = net.add_node("a").unwrap();
    let b = net.add_node("b").unwrap();
    let c = net.add_node("c").unwrap();
    net.add_link(a, b, 4.0).unwrap();
    net.add_link(b, c, 1.0).unwrap();
    let flows = Flows::shortest(&net, &[(a, c), (a, b)]).unwrap();
    let inf = [f64::INFINITY; 2];
    let r = clamp(&net, &flows, &inf).unwrap();
    assert_eq!(r, vec![1.0, 3.0]);
    assert!(check_max_min(&net, &flows, &inf, &[1.0, 2.5], 1e-9).is_err());
    assert!(check_max_min(&net, &flows, &inf, &[0.5, 3.5], 1e-9).is_err());
}

/// `net` with every capacity multiplied by `s` (routes are by hop count, so the flows are the same).
fn scaled(net: &Network, s: f64) -> Network {
    let mut out = net.clone();
    for (l, link) in net.links().iter().enumerate() {
        out.set_capacity(l as u32, link.capacity * s).unwrap();
    }
    out
}

/// `a` is `s` times `b`, entry by entry, to `rel` of the larger magnitude (and of the instance's
/// scale `s`: rates that are rounding noise at one scale are at every scale).
fn same_scaled(a: &[f64], b: &[f64], s: f64, rel: f64) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let y = y * s;
            (x - y).abs() <= rel * (x.abs().max(y.abs()) + s)
        })
}

/// Scale factors 1e-9..1e9, log-uniform (issue 12: the model must give the same answer, scaled).
fn scale() -> impl Strategy<Value = f64> {
    (-9.0f64..9.0).prop_map(|u| 10f64.powf(u))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    /// Clamp, the literal Fig. 5 and the max-min check are scale-free: every capacity and demand
    /// times `s` gives the rates times `s`, and the check's verdict on a (possibly perturbed)
    /// assignment does not change with the scale.
    #[test]
    fn max_min_is_the_same_at_every_scale((net, flows, demands) in instance(), s in scale(),
                                          bump in 0usize..16, by in prop::sample::select(vec![0.0, 1e-3, -1e-3, 0.5])) {
        let big = scaled(&net, s);
        let d_big: Vec<f64> = demands.iter().map(|d| d * s).collect();
        let r = clamp(&net, &flows, &demands).unwrap();
        let r_big = clamp(&big, &flows, &d_big).unwrap();
        prop_assert!(same_scaled(&r_big, &r, s, 1e-12), "clamp at {s}: {r_big:?} vs {r:?}");
        let o_big = clamp_oracle(&big, &flows, &d_big).unwrap();
        prop_assert!(same_scaled(&o_big, &r, s, 1e-9), "oracle at {s}: {o_big:?} vs {r:?}");
        // A perturbed assignment (one flow moved by `by` of the largest capacity): same verdict.
        let cmax = net.links().iter().map(|l| l.capacity).fold(0.0, f64::max);
        let mut p = r.clone();
        if !p.is_empty() {
            let i = bump % p.len();
            p[i] += by * cmax;
        }
        let p_big: Vec<f64> = p.iter().map(|x| x * s).collect();
        let v = check_max_min(&net, &flows, &demands, &p, 1e-9).is_ok();
        let v_big = check_max_min(&big, &flows, &d_big, &p_big, 1e-9).is_ok();
        prop_assert_eq!(v, v_big, "verdict at scale 1 vs {}: {:?}", s, p);
        if by == 0.0 {
            prop_assert!(v, "the exact answer is refused: {p:?}");
        }
    }

    /// The brick-wall flow for fixed demands, and the sender models' fixed points, scale: the
    /// demands and goodputs at scale `s` are `s` times those at scale 1, after as many iterations.
    #[test]
    fn brickwall_and_senders_are_the_same_at_every_scale((net, flows, demands) in instance(), s in scale()) {
        let big = scaled(&net, s);
        let (bw, bw_big) = (Brickwall::new(&net, &flows), Brickwall::new(&big, &flows));
        let d: Vec<f64> = demands.iter().map(|d| if d.is_finite() { *d } else { 100.0 }).collect();
        let d_big: Vec<f64> = d.iter().map(|x| x * s).collect();
        let st = bw.solve(&d).unwrap();
        let st_big = bw_big.solve(&d_big).unwrap();
        prop_assert!(same_scaled(&st_big.goodput, &st.goodput, s, 1e-8),
            "goodput at {s}: {:?} vs {:?}", st_big.goodput, st.goodput);
        for model in [SenderModel::FullShare, SenderModel::LimitedRatio { alpha: 0.2 }] {
            let fp = senders::fixed_point(&bw, model, 1e-9, 20_000).unwrap();
            let fp_big = senders::fixed_point(&bw_big, model, 1e-9, 20_000).unwrap();
            prop_assert_eq!(fp.converged, fp_big.converged, "{:?} at {}", model, s);
            if fp.converged {
                prop_assert!(same_scaled(&fp_big.demands, &fp.demands, s, 1e-6),
                    "{model:?} at {s}: {:?} vs {:?}", fp_big.demands, fp.demands);
                prop_assert!(same_scaled(&fp_big.state.goodput, &fp.state.goodput, s, 1e-6));
            }
        }
    }
}

/// Loss-load (seed 002 §9) at penalties up to k = 300 (where `(x / x̄)^k` overflowed), on 10,000
/// random instances, each at scale 1 and at a scale in 1e-9..1e9: wherever both converge, the
/// fixed point at scale `s` is `s` times the one at scale 1. Loss-load's drops are not monotone in
/// the offered rates, so on some cycles of links (and at high k) the iteration wanders: there its
/// path depends on rounding, which differs between scales, and one run may settle where the other
/// does not (the seed's "numerical instability"). Those instances are counted, shown, and bounded.
#[test]
fn loss_load_is_the_same_at_every_scale() {
    use proptest::test_runner::{Config, TestRunner};
    use std::cell::Cell;
    let (same, wander, differ) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0usize));
    let ks = prop::sample::select(vec![1.0, 10.0, 80.0, 300.0]);
    let mut runner = TestRunner::new(Config {
        cases: 10_000,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(instance(), scale(), ks), |((net, flows, _d), s, k)| {
        // A link of capacity 0 drops every flow whole (tested in lossload.rs); the senders' best
        // rates through it then follow a price set by their own rates, so where their demands end
        // depends on the iteration's path, not on the instance: nothing unique to compare. Give
        // such links a capacity.
        let mut net = net;
        for l in 0..net.link_count() {
            if net.links()[l].capacity == 0.0 {
                net.set_capacity(l as u32, 0.25).unwrap();
            }
        }
        let big = scaled(&net, s);
        let (bw, bw_big) = (Brickwall::new(&net, &flows), Brickwall::new(&big, &flows));
        let one = flowsim::lossload::fixed_point(&bw, k, 1e-6, 20_000);
        let many = flowsim::lossload::fixed_point(&bw_big, k, 1e-6, 20_000);
        match (&one, &many) {
            (Ok(a), Ok(b)) if a.converged && b.converged => {
                prop_assert!(a
                    .demands
                    .iter()
                    .chain(&b.demands)
                    .all(|d| d.is_finite() && *d >= 0.0));
                if same_scaled(&b.demands, &a.demands, s, 1e-4) {
                    same.set(same.get() + 1);
                } else {
                    differ.set(differ.get() + 1);
                    eprintln!("k={k} at {s}: {:?} vs {:?}", b.demands, a.demands);
                }
            }
            _ => wander.set(wander.get() + 1),
        }
        Ok(())
    });
    result.unwrap();
    eprintln!(
        "loss-load at scale 1 and s: {} converged to the same point, {} differ, {} wandered in one or both",
        same.get(),
        differ.get(),
        wander.get()
    );
    assert_eq!(differ.get(), 0, "converged to different points");
    assert!(
        wander.get() * 100 <= 10_000,
        "{} of 10,000 wandered",
        wander.get()
    );
}
