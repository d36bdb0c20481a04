//! Sender models iterated to a fixed point (seed 002 Fig. 6, §4.3 and §5).
//!
//! Every model starts from the fire-hose demands of Eq. 1, `d_i = c(u,v) / |S(u,v)|` for the
//! flows `S(u,v)` that start at `u` on link `(u,v)`; then "after computing the resulting per-flow
//! goodputs, we adjust each flow's demand according to the sender algorithm and iterate until a
//! fixed-point is reached ... when no flow's demand is adjusted by more than ε". A sender's own
//! link is a max-min router like every other (§5.2: "the sender itself implements a brickwall
//! max-min fairness policy on its outgoing link(s)").

use crate::brickwall::{Brickwall, FlowState};
use crate::network::{Error, Flows, Network};

/// How a sender sets its flows' demands from their goodputs `g_i`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SenderModel {
    /// Eq. 1 and nothing else: fill the access link, equal effort per flow (§4.3).
    NaiveFireHose,
    /// Eq. 2: `d_i / g_i` equal across the sender's flows, `Σ d_i = c(u,v)`.
    FullBalanced,
    /// Eq. 3: `d_i = g_i + slack / |S(u,v)|`, `slack = c(u,v) − Σ g_i`.
    FullShare,
    /// Eq. 4: `d_i = (1 + α) g_i`.
    NaiveRatio { alpha: f64 },
    /// Eq. 5: `d_i / g_i` equal, `Σ d_i <= c(u,v)`, `d_i <= (1 + α) g_i`, one of them tight:
    /// `d_i = g_i · min(1 + α, c(u,v) / Σ g_j)`.
    LimitedRatio { alpha: f64 },
}

impl SenderModel {
    pub fn name(&self) -> &'static str {
        match self {
            SenderModel::NaiveFireHose => "naive",
            SenderModel::FullBalanced => "full_balanced",
            SenderModel::FullShare => "full_share",
            SenderModel::NaiveRatio { .. } => "naive_ratio",
            SenderModel::LimitedRatio { .. } => "limited_ratio",
        }
    }

    fn check(&self) -> Result<(), Error> {
        match *self {
            SenderModel::NaiveRatio { alpha } | SenderModel::LimitedRatio { alpha }
                if !(alpha.is_finite() && alpha >= 0.0) =>
            {
                Err(Error::BadParameter {
                    name: "alpha",
                    value: alpha,
                    expected: "finite and >= 0",
                })
            }
            _ => Ok(()),
        }
    }
}

/// The result of [`fixed_point`].
#[derive(Debug, Clone, PartialEq)]
pub struct FixedPoint {
    pub demands: Vec<f64>,
    /// The flow through the network for `demands`.
    pub state: FlowState,
    pub iterations: usize,
    /// Whether the last change was at most ε (otherwise `max_iterations` ran out).
    pub converged: bool,
    /// The largest change of a demand in the last iteration, relative ([`relative_change`]).
    pub delta: f64,
}

/// The flows grouped by their first link: `S(u,v)` of Eq. 1, as (first link, flow indices).
pub fn sender_groups(flows: &Flows) -> Vec<(u32, Vec<usize>)> {
    let mut by_link: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for i in 0..flows.len() {
        by_link.entry(flows.route(i)[0]).or_default().push(i);
    }
    by_link.into_iter().collect()
}

/// Eq. 1: `d_i = c(u,v) / |S(u,v)|`.
pub fn initial_demands(net: &Network, flows: &Flows) -> Vec<f64> {
    let mut d = vec![0.0; flows.len()];
    for (l, group) in sender_groups(flows) {
        let c = net.links()[l as usize].capacity;
        for &i in &group {
            d[i] = c / group.len() as f64;
        }
    }
    d
}

/// One demand update of `model` from goodputs `g` (the update step of Fig. 6).
pub fn update(
    model: SenderModel,
    net: &Network,
    groups: &[(u32, Vec<usize>)],
    g: &[f64],
    d: &mut [f64],
) {
    for (l, group) in groups {
        let c = net.links()[*l as usize].capacity;
        let n = group.len() as f64;
        let sum_g: f64 = group.iter().map(|&i| g[i]).sum();
        match model {
            SenderModel::NaiveFireHose => {}
            SenderModel::FullBalanced => {
                for &i in group {
                    d[i] = if sum_g > 0.0 { c * g[i] / sum_g } else { c / n };
                }
            }
            SenderModel::FullShare => {
                let slack = (c - sum_g).max(0.0);
                for &i in group {
                    d[i] = g[i] + slack / n;
                }
            }
            SenderModel::NaiveRatio { alpha } => {
                for &i in group {
                    d[i] = (1.0 + alpha) * g[i];
                }
            }
            SenderModel::LimitedRatio { alpha } => {
                for &i in group {
                    d[i] = if sum_g > 0.0 {
                        g[i] * (1.0 + alpha).min(c / sum_g)
                    } else {
                        c / n
                    };
                }
            }
        }
    }
}

/// The floor of each flow's scale for [`relative_change`]: the smallest positive capacity on its
/// route (its goodput can be no larger; the network's largest capacity for a route of zero
/// capacities, 1 for a network with none).
pub(crate) fn demand_scales(net: &Network, flows: &Flows) -> Vec<f64> {
    let largest = net.links().iter().map(|l| l.capacity).fold(0.0, f64::max);
    (0..flows.len())
        .map(|i| {
            let c = flows
                .route(i)
                .iter()
                .map(|&l| net.links()[l as usize].capacity)
                .filter(|&c| c > 0.0)
                .fold(f64::INFINITY, f64::min);
            if c.is_finite() {
                c
            } else if largest > 0.0 {
                largest
            } else {
                1.0
            }
        })
        .collect()
}

/// The largest change of a demand, each relative to the larger of the demand before the step and
/// the flow's floor ([`demand_scales`]). So `epsilon` is relative: a fixed point is the same, scaled,
/// when every capacity is (issue 12: an absolute ε stopped a network of capacities 0.01 far from
/// its fixed point and never stopped one of capacities 1e9), and a flow whose access link is far
/// faster than its bottleneck is held to its own scale, not the access link's. Networks of unit
/// capacities, as the seed's, keep about the old absolute test.
pub(crate) fn relative_change(next: &[f64], before: &[f64], scale: &[f64]) -> f64 {
    next.iter()
        .zip(before)
        .zip(scale)
        .map(|((a, b), s)| (a - b).abs() / s.max(b.abs()))
        .fold(0.0, f64::max)
}

/// The tolerance and iteration cap of a fixed point: `epsilon` finite and > 0, at least one iteration.
pub(crate) fn check_iteration(epsilon: f64, max_iterations: usize) -> Result<(), Error> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(Error::BadParameter {
            name: "epsilon",
            value: epsilon,
            expected: "finite and > 0",
        });
    }
    if max_iterations == 0 {
        return Err(Error::BadParameter {
            name: "max_iterations",
            value: 0.0,
            expected: ">= 1",
        });
    }
    Ok(())
}

/// Fig. 6: start from Eq. 1, compute the flow through the network, update the demands, until no
/// demand changes by more than `epsilon` relative to its size ([`relative_change`]) or
/// `max_iterations` pass.
pub fn fixed_point(
    bw: &Brickwall<'_>,
    model: SenderModel,
    epsilon: f64,
    max_iterations: usize,
) -> Result<FixedPoint, Error> {
    model.check()?;
    check_iteration(epsilon, max_iterations)?;
    let groups = sender_groups(bw.flows);
    let scale = demand_scales(bw.net, bw.flows);
    let mut d = initial_demands(bw.net, bw.flows);
    let mut iterations = 0;
    let mut delta = f64::INFINITY;
    while delta > epsilon && iterations < max_iterations {
        let st = bw.solve(&d)?;
        let before = d.clone();
        update(model, bw.net, &groups, &st.goodput, &mut d);
        delta = relative_change(&d, &before, &scale);
        iterations += 1;
    }
    let state = bw.solve(&d)?;
    Ok(FixedPoint {
        demands: d,
        state,
        iterations,
        converged: delta <= epsilon,
        delta,
    })
}
