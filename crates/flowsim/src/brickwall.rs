//! The steady state of a network of fairness-enforcing routers (seed 002 §4.2): "At each link, we
//! derive the output flow allocation using a max-min apportionment of the input flows", the rate of
//! a flow entering a link being what the previous link let through, iterated "until flow
//! utilization has been calculated for each edge".
//!
//! Links are visited in the order of the link-dependency graph (an edge `a -> b` when some flow
//! crosses `a` then `b`). Where that graph has no cycle, one pass in topological order is exact.
//! Links on a cycle (strongly connected component) are iterated together until no rate changes.

use crate::network::{Error, Flows, LinkId, Network};

/// Rates of one computation, per hop (see [`Flows`]) and per flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowState {
    /// Rate of the flow arriving at the hop's link (the first hop: the flow's demand).
    pub offered: Vec<f64>,
    /// Rate the hop's link carries (offered minus what the router at its tail dropped).
    pub carried: Vec<f64>,
    /// Rate delivered at the sink: the last hop's carried rate.
    pub goodput: Vec<f64>,
}

impl FlowState {
    /// Dropped at the hop: `L_i(u, v)` of §4.1.1.
    pub fn dropped(&self, hop: usize) -> f64 {
        (self.offered[hop] - self.carried[hop]).max(0.0)
    }
}

/// The brick-wall max-min level of a link (§3.1.2): every flow gets `min(offered, level)`;
/// infinite when the link is not overloaded. `sorted` must be ascending.
pub fn water_level(capacity: f64, sorted: &[f64]) -> f64 {
    let mut rem = capacity;
    let n = sorted.len();
    for (k, &x) in sorted.iter().enumerate() {
        let share = rem / (n - k) as f64;
        if x > share {
            return share.max(0.0);
        }
        rem -= x;
    }
    f64::INFINITY
}

/// How a router divides a link among the rates offered to it. `carried` has the length of `offered`.
pub trait LinkRule {
    fn apply(&mut self, link: LinkId, capacity: f64, offered: &[f64], carried: &mut [f64]);
}

/// Link-local max-min fair dropping: the brick-wall policy of §3.1.2.
#[derive(Default)]
pub struct MaxMinRule {
    sorted: Vec<f64>,
}

impl LinkRule for MaxMinRule {
    fn apply(&mut self, _link: LinkId, capacity: f64, offered: &[f64], carried: &mut [f64]) {
        let total: f64 = offered.iter().sum();
        if total <= capacity {
            carried.copy_from_slice(offered);
            return;
        }
        self.sorted.clear();
        self.sorted.extend_from_slice(offered);
        self.sorted.sort_unstable_by(f64::total_cmp);
        let level = water_level(capacity, &self.sorted);
        for (c, &o) in carried.iter_mut().zip(offered) {
            *c = o.min(level);
        }
    }
}

/// The routing structure of a set of flows on a network, computed once and reused for every
/// demand vector (the sender models of §5 recompute the network many times).
pub struct Brickwall<'a> {
    pub net: &'a Network,
    pub flows: &'a Flows,
    /// Hops crossing each link (CSR, see [`Flows::hops_by_link`]).
    pub link_starts: Vec<usize>,
    pub link_hops: Vec<usize>,
    /// Links that carry flows, grouped into strongly connected components in topological order.
    components: Vec<Vec<LinkId>>,
    /// Whether hop `h` is its flow's last.
    is_last: Vec<bool>,
    /// Per link: the index of its component.
    component_of: Vec<u32>,
    /// The network's link capacities, for [`Brickwall::solve`] (read once, not per solve).
    pub caps: Vec<f64>,
}

/// Sweeps over a cyclic component before giving up.
const MAX_SWEEPS: usize = 10_000;
/// A cyclic component is settled when no carried rate changes by more than this, relative: far
/// below any figure reported, and above the rounding noise of the loss-load rule.
const SETTLED: f64 = 1e-10;
/// Sweeps of a cyclic component before its updates are damped.
const DAMP_AFTER: usize = 100;

impl<'a> Brickwall<'a> {
    pub fn new(net: &'a Network, flows: &'a Flows) -> Self {
        let nl = net.link_count();
        let (link_starts, link_hops) = flows.hops_by_link(nl);
        let mut is_last = vec![false; flows.links.len()];
        for i in 0..flows.len() {
            let r = flows.hops(i);
            if !r.is_empty() {
                is_last[r.end - 1] = true;
            }
        }
        // Link-dependency graph (CSR of successors).
        let mut succ_starts = vec![0usize; nl + 1];
        for h in 0..flows.links.len() {
            if !is_last[h] {
                succ_starts[flows.links[h] as usize + 1] += 1;
            }
        }
        for i in 0..nl {
            succ_starts[i + 1] += succ_starts[i];
        }
        let mut fill = succ_starts.clone();
        let mut succ = vec![0 as LinkId; succ_starts[nl]];
        for h in 0..flows.links.len() {
            if !is_last[h] {
                let l = flows.links[h] as usize;
                succ[fill[l]] = flows.links[h + 1];
                fill[l] += 1;
            }
        }
        let used: Vec<bool> = (0..nl)
            .map(|l| link_starts[l + 1] > link_starts[l])
            .collect();
        let mut components = tarjan(nl, &succ_starts, &succ, &used);
        components.reverse();
        // Inside a cycle, visit links in the order flows reach them (mean hop position), so each
        // sweep carries most rates downstream at once and the sweeps settle sooner.
        let mut pos_sum = vec![0.0f64; nl];
        for i in 0..flows.len() {
            let r = flows.hops(i);
            for h in r.clone() {
                pos_sum[flows.links[h] as usize] += (h - r.start) as f64;
            }
        }
        for comp in components.iter_mut().filter(|c| c.len() > 1) {
            let mean = |l: LinkId| {
                let l = l as usize;
                pos_sum[l] / (link_starts[l + 1] - link_starts[l]) as f64
            };
            comp.sort_by(|&a, &b| mean(a).total_cmp(&mean(b)).then(a.cmp(&b)));
        }
        let mut component_of = vec![u32::MAX; nl];
        for (ci, comp) in components.iter().enumerate() {
            for &l in comp {
                component_of[l as usize] = ci as u32;
            }
        }
        Brickwall {
            net,
            flows,
            link_starts,
            link_hops,
            components,
            is_last,
            component_of,
            caps: net.links().iter().map(|l| l.capacity).collect(),
        }
    }

    /// The flow through the network for the given demands with the network's capacities and
    /// max-min routers.
    pub fn solve(&self, demands: &[f64]) -> Result<FlowState, Error> {
        self.solve_with(&self.caps, demands, &mut MaxMinRule::default())
    }

    /// The flow through the network for `demands` (one per flow, >= 0, may be infinite) on link
    /// capacities `caps`, with `rule` at every link.
    pub fn solve_with(
        &self,
        caps: &[f64],
        demands: &[f64],
        rule: &mut impl LinkRule,
    ) -> Result<FlowState, Error> {
        self.solve_settled(caps, demands, rule, SETTLED)
    }

    /// [`Brickwall::solve_with`], with a link on a cycle recomputed until no rate offered to it
    /// moves by more than `settled` (relative).
    pub fn solve_settled(
        &self,
        caps: &[f64],
        demands: &[f64],
        rule: &mut impl LinkRule,
        settled: f64,
    ) -> Result<FlowState, Error> {
        let flows = self.flows;
        check_demands(demands, flows.len())?;
        let nh = flows.links.len();
        let mut st = FlowState {
            offered: vec![0.0; nh],
            carried: vec![0.0; nh],
            goodput: vec![0.0; flows.len()],
        };
        // Every hop starts offered the flow's demand: exact for first hops, an upper bound elsewhere
        // until its predecessor is computed.
        for i in 0..flows.len() {
            for h in flows.hops(i) {
                st.offered[h] = demands[i];
            }
        }
        let mut off = Vec::new();
        let mut car = Vec::new();
        // A link is (re)computed when it is first reached and, inside a cycle, whenever a rate
        // offered to it changed by more than `settled`: a worklist, so settled links cost nothing.
        let mut queued = vec![false; self.net.link_count()];
        let mut work: std::collections::VecDeque<LinkId> = Default::default();
        for (ci, comp) in self.components.iter().enumerate() {
            let cyclic = comp.len() > 1;
            let budget = MAX_SWEEPS * comp.len();
            let damp_after = DAMP_AFTER * comp.len();
            // Changes are relative (floored by the component's largest capacity), not against 1:
            // the test is then the same at every scale of the instance (issue 12: with capacities
            // of 1e-11 the old `d / (1 + |c|)` called a cycle settled after its first sweep).
            let scale = comp
                .iter()
                .map(|&l| caps[l as usize])
                .filter(|c| c.is_finite())
                .fold(0.0f64, f64::max);
            work.extend(comp.iter().copied());
            for &l in comp {
                queued[l as usize] = true;
            }
            let mut pops = 0usize;
            let mut last_delta = 0.0f64;
            while let Some(l) = work.pop_front() {
                queued[l as usize] = false;
                pops += 1;
                let hops =
                    &self.link_hops[self.link_starts[l as usize]..self.link_starts[l as usize + 1]];
                off.clear();
                off.extend(hops.iter().map(|&h| st.offered[h]));
                car.clear();
                car.resize(hops.len(), 0.0);
                rule.apply(l, caps[l as usize], &off, &mut car);
                // A cycle that has not settled after `DAMP_AFTER` visits per link moves half-way
                // to each new value (a fixed point of the damped map is one of the plain map):
                // routers whose output is not monotone in their input (loss-load) can oscillate.
                let omega = if pops > damp_after { 0.5 } else { 1.0 };
                for (&h, &c) in hops.iter().zip(&car) {
                    let c = if omega < 1.0 && st.carried[h].is_finite() {
                        st.carried[h] + omega * (c - st.carried[h])
                    } else {
                        c
                    };
                    st.carried[h] = c;
                    if !self.is_last[h] {
                        // What the next link sees: requeue it if that moved (its first visit may
                        // have used the upper bound, the demand).
                        let old = st.offered[h + 1];
                        let d = (old - c).abs();
                        let changed = if d.is_finite() {
                            // Relative to the rate itself, floored at a millionth of the
                            // component's largest capacity so that rates tending to 0 settle.
                            let base = c.abs().max(old.abs()).max(1e-6 * scale);
                            if base > 0.0 {
                                d / base
                            } else {
                                0.0
                            }
                        } else if old != c {
                            f64::INFINITY
                        } else {
                            0.0
                        };
                        st.offered[h + 1] = c;
                        let next = flows.links[h + 1];
                        if cyclic
                            && changed > settled
                            && !queued[next as usize]
                            && self.component_of[next as usize] == ci as u32
                        {
                            queued[next as usize] = true;
                            work.push_back(next);
                        }
                        last_delta = last_delta.max(changed);
                    }
                }
                if pops >= budget && !work.is_empty() {
                    for &l in &work {
                        queued[l as usize] = false;
                    }
                    return Err(Error::NoFixedPoint {
                        iterations: pops / comp.len(),
                        delta: last_delta,
                    });
                }
            }
        }
        for i in 0..flows.len() {
            let r = flows.hops(i);
            st.goodput[i] = st.carried[r.end - 1];
        }
        Ok(st)
    }
}

pub(crate) fn check_demands(demands: &[f64], n: usize) -> Result<(), Error> {
    if demands.len() != n {
        return Err(Error::Length {
            what: "demands",
            expected: n,
            got: demands.len(),
        });
    }
    for (i, &d) in demands.iter().enumerate() {
        if d.is_nan() || d < 0.0 {
            return Err(Error::BadDemand { flow: i, demand: d });
        }
    }
    Ok(())
}

/// Strongly connected components (Tarjan, iterative) of the links marked `used`, in reverse
/// topological order (a component comes after every component it reaches).
fn tarjan(n: usize, starts: &[usize], succ: &[LinkId], used: &[bool]) -> Vec<Vec<LinkId>> {
    const NONE: usize = usize::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    let mut next = 0usize;
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if !used[root] || index[root] != NONE {
            continue;
        }
        call.push((root, starts[root]));
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = call.last_mut() {
            if *pos < starts[v + 1] {
                let w = succ[*pos] as usize;
                *pos += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, starts[w]));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("tarjan stack");
                        on_stack[w] = false;
                        comp.push(w as LinkId);
                        if w == v {
                            break;
                        }
                    }
                    out.push(comp);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_level_is_the_max_min_share() {
        assert_eq!(water_level(10.0, &[1.0, 2.0, 3.0]), f64::INFINITY);
        assert_eq!(water_level(6.0, &[1.0, 10.0, 10.0]), 2.5);
        assert_eq!(water_level(20.0, &[20.0, 20.0]), 10.0);
        assert_eq!(water_level(20.0, &[f64::INFINITY, f64::INFINITY]), 10.0);
        assert_eq!(water_level(0.0, &[1.0]), 0.0);
    }

    /// Two flows that cross two links in opposite orders make a cycle in the link-dependency graph;
    /// the fixed point is still found.
    #[test]
    fn a_cycle_between_links_is_iterated_to_its_fixed_point() {
        let mut net = Network::new();
        let n: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|s| net.add_node(s).unwrap())
            .collect();
        let ab = net.add_link(n[0], n[1], 10.0).unwrap();
        let bc = net.add_link(n[1], n[2], 4.0).unwrap();
        let cd = net.add_link(n[2], n[3], 10.0).unwrap();
        let da = net.add_link(n[3], n[0], 3.0).unwrap();
        // Flow 0: a->b->c->d (ab, bc, cd); flow 1: c->d->a->b (cd, da, ab).
        let flows = Flows::with_routes(
            &net,
            &[
                (n[0], n[3], vec![ab, bc, cd]),
                (n[2], n[1], vec![cd, da, ab]),
            ],
        )
        .unwrap();
        let bw = Brickwall::new(&net, &flows);
        let st = bw.solve(&[10.0, 10.0]).unwrap();
        // Flow 1 is cut to 3 by d->a, so flow 0 gets 7 of a->b and 4 of b->c;
        // then c->d carries 4 + min(10, level) = 4 + 6 -> flow 1 offered 10 -> 6 then 3.
        assert!((st.goodput[0] - 4.0).abs() < 1e-9, "{:?}", st.goodput);
        assert!((st.goodput[1] - 3.0).abs() < 1e-9, "{:?}", st.goodput);
        assert!(bw.components.iter().any(|c| c.len() > 1));
    }

    /// Issue 12: the settle test was absolute for rates far below 1 (`d / (1 + |c|)`), so the
    /// cycle above scaled by s <= 1e-11 stopped early at [4s, 5s], above d->a's capacity 3s. The
    /// answer must scale with the instance.
    #[test]
    fn a_cycle_settles_at_every_scale() {
        for e in [-15i32, -12, -11, -9, -7, -4, 0, 4, 9] {
            let s = 10f64.powi(e);
            let mut net = Network::new();
            let n: Vec<_> = ["a", "b", "c", "d"]
                .iter()
                .map(|x| net.add_node(x).unwrap())
                .collect();
            let ab = net.add_link(n[0], n[1], 10.0 * s).unwrap();
            let bc = net.add_link(n[1], n[2], 4.0 * s).unwrap();
            let cd = net.add_link(n[2], n[3], 10.0 * s).unwrap();
            let da = net.add_link(n[3], n[0], 3.0 * s).unwrap();
            let flows = Flows::with_routes(
                &net,
                &[
                    (n[0], n[3], vec![ab, bc, cd]),
                    (n[2], n[1], vec![cd, da, ab]),
                ],
            )
            .unwrap();
            let st = Brickwall::new(&net, &flows)
                .solve(&[10.0 * s, 10.0 * s])
                .unwrap();
            let got = [st.goodput[0] / s, st.goodput[1] / s];
            assert!(
                (got[0] - 4.0).abs() < 1e-9 && (got[1] - 3.0).abs() < 1e-9,
                "scale 1e{e}: {got:?} x s"
            );
        }
    }

    #[test]
    fn bad_demands_are_refused() {
        let mut net = Network::new();
        let a = net.add_node("a").unwrap();
        let b = net.add_node("b").unwrap();
        net.add_link(a, b, 1.0).unwrap();
        let flows = Flows::shortest(&net, &[(a, b)]).unwrap();
        let bw = Brickwall::new(&net, &flows);
        assert_eq!(
            bw.solve(&[-1.0]),
            Err(Error::BadDemand {
                flow: 0,
                demand: -1.0
            })
        );
        assert!(matches!(
            bw.solve(&[f64::NAN]),
            Err(Error::BadDemand { .. })
        ));
        assert!(matches!(bw.solve(&[1.0, 2.0]), Err(Error::Length { .. })));
        assert_eq!(bw.solve(&[f64::INFINITY]).unwrap().goodput, vec![1.0]);
    }
}
