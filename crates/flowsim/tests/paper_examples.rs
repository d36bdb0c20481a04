//! The worked examples of seed 002 with their numbers: Figs. 1, 2, 3 (§4.1) and Fig. 17 (§6.3).

use flowsim::senders::{self, SenderModel};
use flowsim::{account, clamp, clamp_oracle, Brickwall, Flows, Network};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Builds a network from `(from, to, capacity)` links and flows on shortest routes.
fn build(links: &[(&str, &str, f64)], pairs: &[(&str, &str)]) -> (Network, Flows) {
    let mut net = Network::new();
    for (a, b, c) in links {
        let a = net.node(a).or_else(|_| net.add_node(a)).unwrap();
        let b = net.node(b).or_else(|_| net.add_node(b)).unwrap();
        net.add_link(a, b, *c).unwrap();
    }
    let pairs: Vec<_> = pairs
        .iter()
        .map(|(s, t)| (net.node(s).unwrap(), net.node(t).unwrap()))
        .collect();
    let flows = Flows::shortest(&net, &pairs).unwrap();
    (net, flows)
}

fn link(net: &Network, a: &str, b: &str) -> usize {
    net.link_between(net.node(a).unwrap(), net.node(b).unwrap())
        .unwrap() as usize
}

fn fig1(r2_d1: f64) -> (Network, Flows) {
    build(
        &[
            ("S1", "R1", 20.0),
            ("S2", "R1", 20.0),
            ("R1", "R2", 20.0),
            ("R2", "D1", r2_d1),
            ("R2", "D2", 2.0),
        ],
        &[("S1", "D1"), ("S2", "D2")],
    )
}

/// Fig. 1: "the throughput of the S1 ⇝ D1 flow is five, while the throughput of S2 ⇝ D2 is two
/// ... Twenty packets are dropped at R1, ten from each flow, but none are dead ... At R2 ... eight
/// more packets are dropped from the S2 ⇝ D2 flow. These eight are dead packets". No zombies: the
/// fire-hose goodputs are the max-min fair ones. (S1 ⇝ D1 also loses five at R2, dead as well; the
/// text does not mention them.)
#[test]
fn figure_1_dropped_and_dead_packets() {
    let (net, flows) = fig1(5.0);
    let bw = Brickwall::new(&net, &flows);
    let d = senders::initial_demands(&net, &flows);
    assert_eq!(d, vec![20.0, 20.0]);
    let st = bw.solve(&d).unwrap();
    assert_eq!(st.goodput, vec![5.0, 2.0]);
    let mmf = clamp(&net, &flows, &[f64::INFINITY; 2]).unwrap();
    assert_eq!(mmf, vec![5.0, 2.0]);
    let acc = account(&net, &flows, &st, &mmf);
    let r1r2 = link(&net, "R1", "R2");
    assert_eq!(
        acc.link_dropped[r1r2], 20.0,
        "twenty dropped at the access router R1"
    );
    assert_eq!(
        acc.link_dropped[link(&net, "R2", "D2")],
        8.0,
        "eight of S2 ⇝ D2 dropped at R2"
    );
    assert_eq!(acc.link_dropped[link(&net, "R2", "D1")], 5.0);
    assert_eq!(
        acc.flow_dead,
        vec![5.0, 8.0],
        "dead: crossed R1 -> R2, then dropped at R2"
    );
    assert_eq!(acc.link_dead[r1r2], 13.0);
    assert_eq!(acc.zombie, 0.0);
}

/// Fig. 2: R2 -> D1 raised to 20: "S2 ⇝ D2 continues to receive a goodput of two, but S1 ⇝ D1
/// only increases to 10—not 18, as would be the case in an optimal flow assignment ... the eight
/// dead packets in flow S2 ⇝ D2 being dropped at R2 are not only dead, but also zombie packets".
#[test]
fn figure_2_zombies() {
    let (net, flows) = fig1(20.0);
    let bw = Brickwall::new(&net, &flows);
    let st = bw.solve(&senders::initial_demands(&net, &flows)).unwrap();
    assert_eq!(st.goodput, vec![10.0, 2.0]);
    let mmf = clamp(&net, &flows, &[f64::INFINITY; 2]).unwrap();
    assert_eq!(mmf, vec![18.0, 2.0]);
    let acc = account(&net, &flows, &st, &mmf);
    assert_eq!(acc.flow_dead, vec![0.0, 8.0]);
    assert_eq!(acc.zombie, 8.0);
    assert_eq!(acc.link_zombie[link(&net, "R1", "R2")], 8.0);
    assert_eq!(acc.flow_zombie, vec![0.0, 8.0], "the zombies are S2 ⇝ D2's");
    assert_eq!(
        acc.flow_zombie_suffered,
        vec![8.0, 0.0],
        "and S1 ⇝ D1 suffers them"
    );
    // Zombies are "the only cause of inefficiency": optimal minus fire-hose goodput.
    assert_eq!(mmf.iter().sum::<f64>() - acc.goodput, acc.zombie);

    // Limited ratio (Eq. 5, alpha = 0.2) recovers almost all of it: S2 sends 2.4, S1 gets 17.6.
    let fp =
        senders::fixed_point(&bw, SenderModel::LimitedRatio { alpha: 0.2 }, 1e-9, 1000).unwrap();
    assert!(fp.converged);
    assert!(
        close(fp.state.goodput[0], 17.6) && close(fp.state.goodput[1], 2.0),
        "{:?}",
        fp.state.goodput
    );
}

/// Fig. 3 (the figure is not in the text; this topology is consistent with every number the text
/// gives): S1 ⇝ D1 and S2 ⇝ D2 share R1 -> R2 (12) as before, D2 is behind R2 -> D2 (2), and a
/// third flow S3 ⇝ D3 joins S1 ⇝ D1 on R2 -> R3 (20). "In the optimal max-min fair flow
/// assignment, S2 ⇝ D2 continues to have a goodput of two, S1 ⇝ D1 achieves ten, and S3 ⇝ D3
/// also obtains a throughput of ten, for a total network goodput of 22 (and Jain's fairness index
/// of 0.79). When senders drive their access links to capacity, however, S1 ⇝ D1 achieves a
/// goodput of only six ... but S3 ⇝ D3 increases to fourteen, leaving the network goodput
/// unchanged (but decreasing Jain's index to 0.68)."
#[test]
fn figure_3_zombies_that_do_not_hurt_total_goodput() {
    let (net, flows) = build(
        &[
            ("S1", "R1", 20.0),
            ("S2", "R1", 20.0),
            ("R1", "R2", 12.0),
            ("R2", "D2", 2.0),
            ("S3", "R2", 20.0),
            ("R2", "R3", 20.0),
            ("R3", "D1", 20.0),
            ("R3", "D3", 20.0),
        ],
        &[("S1", "D1"), ("S2", "D2"), ("S3", "D3")],
    );
    let mmf = clamp(&net, &flows, &[f64::INFINITY; 3]).unwrap();
    assert_eq!(mmf, vec![10.0, 2.0, 10.0]);
    assert_eq!(mmf.iter().sum::<f64>(), 22.0);
    assert_eq!(format!("{:.2}", flowsim::jain(&mmf)), "0.79");
    let bw = Brickwall::new(&net, &flows);
    let st = bw.solve(&senders::initial_demands(&net, &flows)).unwrap();
    assert_eq!(st.goodput, vec![6.0, 2.0, 14.0]);
    let acc = account(&net, &flows, &st, &mmf);
    assert_eq!(acc.goodput, 22.0);
    assert_eq!(format!("{:.2}", acc.jain), "0.68");
    assert_eq!(
        acc.zombie, 4.0,
        "S1 ⇝ D1 is held 4 below its share by S2 ⇝ D2's dead packets"
    );
}

/// Fig. 17: a star of links of capacity two. Three flows around it get six in total "regardless of
/// sending strategy"; adding S2 ⇝ S1 brings the total down to five.
#[test]
fn figure_17_adding_a_flow_can_lower_total_goodput() {
    let mut links = Vec::new();
    for s in ["S1", "S2", "S3"] {
        links.push((s, "H", 2.0));
        links.push(("H", s, 2.0));
    }
    let three = [("S1", "S2"), ("S2", "S3"), ("S3", "S1")];
    let four = [("S1", "S2"), ("S2", "S3"), ("S3", "S1"), ("S2", "S1")];
    for (pairs, total) in [(&three[..], 6.0), (&four[..], 5.0)] {
        let (net, flows) = build(&links, pairs);
        let bw = Brickwall::new(&net, &flows);
        let inf = vec![f64::INFINITY; flows.len()];
        assert_eq!(
            clamp(&net, &flows, &inf).unwrap().iter().sum::<f64>(),
            total
        );
        for model in [
            SenderModel::NaiveFireHose,
            SenderModel::FullBalanced,
            SenderModel::FullShare,
            SenderModel::NaiveRatio { alpha: 0.2 },
            SenderModel::LimitedRatio { alpha: 0.2 },
        ] {
            let fp = senders::fixed_point(&bw, model, 1e-9, 10_000).unwrap();
            assert!(fp.converged, "{model:?}");
            let g: f64 = fp.state.goodput.iter().sum();
            assert!(close(g, total), "{model:?}: {g} != {total}");
        }
    }
}

/// Every example: the literal Fig. 5 gives what progressive filling gives.
#[test]
fn the_examples_agree_with_the_literal_clamp() {
    for cap in [5.0, 20.0] {
        let (net, flows) = fig1(cap);
        let inf = [f64::INFINITY; 2];
        assert_eq!(
            clamp(&net, &flows, &inf).unwrap(),
            clamp_oracle(&net, &flows, &inf).unwrap()
        );
    }
}

/// §5.1: full-balanced "behaves identically to the naïve fire-hose sender in the case which there
/// ... is a single flow at a sender".
#[test]
fn full_balanced_is_naive_with_one_flow_per_sender() {
    let (net, flows) = fig1(20.0);
    let bw = Brickwall::new(&net, &flows);
    let naive = senders::fixed_point(&bw, SenderModel::NaiveFireHose, 1e-9, 100).unwrap();
    let balanced = senders::fixed_point(&bw, SenderModel::FullBalanced, 1e-9, 100).unwrap();
    assert_eq!(naive.state.goodput, balanced.state.goodput);
    assert!(matches!(
        senders::fixed_point(&bw, SenderModel::LimitedRatio { alpha: -0.1 }, 1e-9, 100),
        Err(flowsim::Error::BadParameter { name: "alpha", .. })
    ));
    assert!(matches!(
        senders::fixed_point(&bw, SenderModel::NaiveFireHose, 0.0, 100),
        Err(flowsim::Error::BadParameter {
            name: "epsilon",
            ..
        })
    ));
}
