//! The optimal (global) max-min fair assignment: `clamp` of seed 002 Fig. 5, computed by
//! progressive filling, with the paper's literal iterative description kept as a test oracle and an
//! independent check of the max-min property (Bertsekas and Gallager, *Data Networks* §6.5.2).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::brickwall::{check_demands, Brickwall, MaxMinRule};
use crate::network::{Error, Flows, Network};

/// Max-min fair rates of `flows` on `net`, each capped by its demand (`f64::INFINITY` for the
/// fire-hose senders that Fig. 5 starts from: "∀i ∈ K, d_i = ∞").
///
/// Progressive filling (water-filling): all unfrozen flows rise together; a link saturates when
/// `(capacity - frozen rate on it) / unfrozen flows on it` is the smallest such level, and its
/// unfrozen flows freeze at that level; a flow also freezes at its demand. Fig. 5 freezes the
/// flow of least fire-hose goodput one at a time; that goodput is exactly this level (every flow
/// gets at least the least fair share of any link on its path, and the flows of the link that
/// attains it get exactly that), so both give the same assignment. Links wait in a heap keyed by
/// a lower bound of their level and are re-queued when popped stale, so a freeze costs O(hops)
/// and the heap holds one entry per link.
pub fn clamp(net: &Network, flows: &Flows, demands: &[f64]) -> Result<Vec<f64>, Error> {
    check_demands(demands, flows.len())?;
    let nl = net.link_count();
    let (starts, link_flows) = flows.flows_by_link(nl);
    let mut fill = Filling {
        caps: net.links().iter().map(|l| l.capacity).collect(),
        frozen_sum: vec![0.0f64; nl],
        active: (0..nl)
            .map(|l| (starts[l + 1] - starts[l]) as u32)
            .collect(),
        rate: vec![f64::NAN; flows.len()],
        heap: BinaryHeap::with_capacity(nl + flows.len()),
    };
    for l in 0..nl {
        if fill.active[l] > 0 {
            let level = fill.caps[l] / fill.active[l] as f64;
            fill.heap.push(Event {
                level,
                kind: Kind::Link(l as u32),
            });
        }
    }
    for (i, &d) in demands.iter().enumerate() {
        if d.is_finite() {
            fill.heap.push(Event {
                level: d,
                kind: Kind::Demand(i as u32),
            });
        }
    }
    let mut remaining = flows.len();
    let mut floor = 0.0f64;
    while remaining > 0 {
        let Some(ev) = fill.heap.pop() else { break };
        match ev.kind {
            Kind::Demand(i) => {
                if fill.rate[i as usize].is_nan() {
                    floor = floor.max(ev.level);
                    fill.freeze(flows, i as usize, floor);
                    remaining -= 1;
                }
            }
            Kind::Link(l) => {
                let l = l as usize;
                if fill.active[l] == 0 {
                    continue;
                }
                // A link's level only rises as flows freeze (they freeze at the least level, at
                // most its own), so its key is a lower bound: re-queue it at its current level.
                let level = (fill.caps[l] - fill.frozen_sum[l]) / fill.active[l] as f64;
                if level > ev.level {
                    fill.heap.push(Event {
                        level,
                        kind: Kind::Link(l as u32),
                    });
                    continue;
                }
                floor = floor.max(level);
                for k in starts[l]..starts[l + 1] {
                    let i = link_flows[k] as usize;
                    if fill.rate[i].is_nan() {
                        fill.freeze(flows, i, floor);
                        remaining -= 1;
                    }
                }
            }
        }
    }
    let rate = fill.rate;
    debug_assert!(rate.iter().all(|r| !r.is_nan()));
    Ok(rate)
}

/// State of the progressive filling.
struct Filling {
    caps: Vec<f64>,
    /// Per link: the sum of the rates of its frozen flows.
    frozen_sum: Vec<f64>,
    /// Per link: how many of its flows still rise.
    active: Vec<u32>,
    /// Per flow: its rate once frozen, NaN before.
    rate: Vec<f64>,
    heap: BinaryHeap<Event>,
}

impl Filling {
    fn freeze(&mut self, flows: &Flows, i: usize, level: f64) {
        self.rate[i] = level;
        for &l in flows.route(i) {
            let l = l as usize;
            self.frozen_sum[l] += level;
            self.active[l] -= 1;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Link(u32),
    Demand(u32),
}

#[derive(Clone, Copy, Debug)]
struct Event {
    level: f64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// A min-heap on level; demands before links at equal levels; then by index, so the order is
    /// deterministic.
    fn cmp(&self, o: &Self) -> Ordering {
        let key = |e: &Event| match e.kind {
            Kind::Demand(i) => (0u8, i),
            Kind::Link(l) => (1u8, l),
        };
        o.level
            .total_cmp(&self.level)
            .then_with(|| key(o).cmp(&key(self)))
    }
}

/// Fig. 5 as written, for tests: "compute flow through network for demand J; î = argmin g_i;
/// d_î = g_î; R = R ∪ î; J = J − î; ∀(u,v) ∈ s_î ⇝ d_î: c(u,v) = c(u,v) − f_î(u,v)". One
/// brick-wall computation per flow. Ties go to the lowest index. Flow î then carries d_î = g_î on
/// every link of its path, so that is what leaves each capacity (the fire-hose `f_î` upstream of
/// its bottleneck is larger, but is not part of the assignment). Demands other than infinity cap
/// a flow as a link of that capacity would.
pub fn clamp_oracle(net: &Network, flows: &Flows, demands: &[f64]) -> Result<Vec<f64>, Error> {
    check_demands(demands, flows.len())?;
    let bw = Brickwall::new(net, flows);
    let mut caps: Vec<f64> = net.links().iter().map(|l| l.capacity).collect();
    let mut in_j = vec![true; flows.len()];
    let mut rate = vec![0.0; flows.len()];
    let mut rule = MaxMinRule::default();
    for _ in 0..flows.len() {
        let d: Vec<f64> = (0..flows.len())
            .map(|i| if in_j[i] { demands[i] } else { 0.0 })
            .collect();
        let st = bw.solve_with(&caps, &d, &mut rule)?;
        let mut best = None::<usize>;
        for i in (0..flows.len()).filter(|&i| in_j[i]) {
            if best.is_none_or(|b| st.goodput[i] < st.goodput[b]) {
                best = Some(i);
            }
        }
        let i = best.expect("J is not empty");
        rate[i] = st.goodput[i];
        in_j[i] = false;
        for &l in flows.route(i) {
            caps[l as usize] = (caps[l as usize] - rate[i]).max(0.0);
        }
    }
    Ok(rate)
}

/// Why a rate vector is not the max-min fair assignment.
#[derive(Debug, Clone, PartialEq)]
pub enum NotMaxMin {
    /// The tolerance is not a number in [0, 1): nothing can be checked with it.
    BadTolerance { tol: f64 },
    /// A link carries more than its capacity.
    Overloaded { link: u32, load: f64, capacity: f64 },
    /// A flow above its demand, or negative.
    Infeasible { flow: usize, rate: f64 },
    /// A flow below its demand with no bottleneck: no link on its path is both saturated and
    /// gives it at least as much as every other flow on it, so it could gain without taking from a
    /// flow of smaller or equal rate.
    NoBottleneck { flow: usize, rate: f64 },
}

/// Checks the max-min property independently of how `rates` were computed: feasible, and every
/// flow is at its demand or has a bottleneck link (saturated, and no flow on it has a larger
/// rate). This characterizes the max-min fair vector (Bertsekas and Gallager, Proposition in
/// §6.5.2). `tol` (in [0, 1)) is relative: to each quantity compared, plus `tol` times the
/// network's largest capacity, so the verdict is the same at every scale of the instance (issue
/// 12: an absolute `tol * (1 + cap)` accepted [0, 1e-9] on one link of capacity 1e-9 shared by
/// two flows).
pub fn check_max_min(
    net: &Network,
    flows: &Flows,
    demands: &[f64],
    rates: &[f64],
    tol: f64,
) -> Result<(), NotMaxMin> {
    if !(0.0..1.0).contains(&tol) {
        return Err(NotMaxMin::BadTolerance { tol });
    }
    let nl = net.link_count();
    // The instance's scale: slack below it is rounding, whatever the units.
    let s = net
        .links()
        .iter()
        .map(|l| l.capacity)
        .filter(|c| c.is_finite())
        .fold(0.0f64, f64::max);
    let mut load = vec![0.0f64; nl];
    let mut max_rate = vec![0.0f64; nl];
    for i in 0..flows.len() {
        if rates[i] < -tol * s || rates[i] > demands[i] * (1.0 + tol) + tol * s {
            return Err(NotMaxMin::Infeasible {
                flow: i,
                rate: rates[i],
            });
        }
        for &l in flows.route(i) {
            load[l as usize] += rates[i];
            max_rate[l as usize] = max_rate[l as usize].max(rates[i]);
        }
    }
    for (l, link) in net.links().iter().enumerate() {
        if load[l] > link.capacity * (1.0 + tol) + tol * s {
            return Err(NotMaxMin::Overloaded {
                link: l as u32,
                load: load[l],
                capacity: link.capacity,
            });
        }
    }
    // A comparison's slack: `tol` of the larger side, at least `tol` of a millionth of the scale.
    let slack = |x: f64| tol * (x.abs().min(1e300) + 1e-6 * s);
    for i in 0..flows.len() {
        if rates[i] >= demands[i] - slack(demands[i]) {
            continue;
        }
        let ok = flows.route(i).iter().any(|&l| {
            let l = l as usize;
            let cap = net.links()[l].capacity;
            load[l] >= cap - slack(cap) && rates[i] >= max_rate[l] - slack(max_rate[l])
        });
        if !ok {
            return Err(NotMaxMin::NoBottleneck {
                flow: i,
                rate: rates[i],
            });
        }
    }
    Ok(())
}

/// Jain's fairness index (Jain, Chiu and Hawe 1984): `(Σx)² / (n Σx²)`; 1 for no flows or all zero.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || s2 == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_of_equal_and_unequal() {
        assert_eq!(jain(&[3.0, 3.0, 3.0]), 1.0);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }

    /// Issue 12: one link of capacity 1e-9 shared by two flows; [0, 1e-9] is not max-min fair at
    /// any scale, and [5e-10, 5e-10] is. A tolerance outside [0, 1) is refused.
    #[test]
    fn the_check_is_the_same_at_every_scale() {
        for e in [-12i32, -9, -3, 0, 3, 9] {
            let c = 10f64.powi(e);
            let mut net = Network::new();
            let a = net.add_node("a").unwrap();
            let b = net.add_node("b").unwrap();
            net.add_link(a, b, c).unwrap();
            let flows = Flows::shortest(&net, &[(a, b), (a, b)]).unwrap();
            let inf = [f64::INFINITY; 2];
            assert!(
                check_max_min(&net, &flows, &inf, &[0.0, c], 1e-9).is_err(),
                "1e{e}"
            );
            assert_eq!(
                check_max_min(&net, &flows, &inf, &[c / 2.0, c / 2.0], 1e-9),
                Ok(())
            );
            for tol in [f64::NAN, -1e-9, 1.0, 1e9] {
                assert!(matches!(
                    check_max_min(&net, &flows, &inf, &[c / 2.0, c / 2.0], tol),
                    Err(NotMaxMin::BadTolerance { .. })
                ));
            }
        }
    }

    #[test]
    fn demands_cap_the_progressive_filling() {
        let mut net = Network::new();
        let a = net.add_node("a").unwrap();
        let b = net.add_node("b").unwrap();
        net.add_link(a, b, 10.0).unwrap();
        let flows = Flows::shortest(&net, &[(a, b), (a, b), (a, b)]).unwrap();
        let d = [1.0, f64::INFINITY, 20.0];
        let r = clamp(&net, &flows, &d).unwrap();
        assert_eq!(r, vec![1.0, 4.5, 4.5]);
        assert_eq!(clamp_oracle(&net, &flows, &d).unwrap(), r);
        check_max_min(&net, &flows, &d, &r, 1e-9).unwrap();
        assert!(matches!(
            check_max_min(&net, &flows, &d, &[1.0, 4.0, 4.0], 1e-9),
            Err(NotMaxMin::NoBottleneck { flow: 1, .. })
        ));
        assert!(matches!(
            check_max_min(&net, &flows, &d, &[1.0, 5.0, 5.0], 1e-9),
            Err(NotMaxMin::Overloaded { .. })
        ));
    }
}
