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
