//! Loss-load routers and senders (seed 002 §9, after Williamson and Cheriton, SIGCOMM 1991).
//!
//! The seed gives the model's properties, not its equations: routers drop "each flow ... in
//! proportion to its deviation from the average" with a network-wide penalty `k`; senders, given
//! the routers' aggregate statistics, "numerically solve a degree-k polynomial" to maximize their
//! goodput; in steady state flows send `(1 + 1/k)` times their bottleneck rate and lose `1/(k+1)`.
//! We use the curve that has exactly these properties:
//!
//! - a router whose link of capacity `c` is offered rates `x_i` (mean `x̄`, total `X > c`) drops
//!   the fraction `p_i = min(1, P (x_i / x̄)^k)` of flow `i`, with the price `P` set so the drops
//!   are `X − c` (found by bisection; the drops grow with `P`);
//! - a sender, told `P_e` and `x̄_e` of each overloaded link on its path, maximizes its goodput
//!   `x Π_e (1 − a_e x^k)`, `a_e = P_e / x̄_e^k`. With `t = x^k` the optimum solves
//!   `h(t) = 1 − k Σ_e a_e t / (1 − a_e t) = 0` (for one link: `1 − (k+1) a x^k = 0`, the degree-k
//!   polynomial); `h` is concave and decreasing, so Newton's method from `t = 0` rises
//!   monotonically to the root. One link with `n` equal flows gives `p = 1/(k+1)` and
//!   `x = (1 + 1/k) c / n`, as the seed says (tested below).
//!
//! Feedback is ideal (instantaneous) as in the seed. A sender with no overloaded link on its path
//! doubles its demand. Updates are damped (half-way to the target): undamped, the best responses
//! oscillate, which is the "numerical instability" the seed reports.

use crate::brickwall::{Brickwall, LinkRule};
use crate::network::{Error, LinkId};
use crate::senders::{initial_demands, FixedPoint};

/// The loss-load dropping rule; records each link's price `P` and mean offered rate.
pub struct LossLoadRule {
    pub k: f64,
    pub price: Vec<f64>,
    pub mean: Vec<f64>,
}

impl LossLoadRule {
    pub fn new(k: f64, links: usize) -> Self {
        LossLoadRule {
            k,
            price: vec![0.0; links],
            mean: vec![0.0; links],
        }
    }
}

impl LinkRule for LossLoadRule {
    fn apply(&mut self, link: LinkId, capacity: f64, offered: &[f64], carried: &mut [f64]) {
        let l = link as usize;
        let total: f64 = offered.iter().sum();
        let mean = total / offered.len() as f64;
        self.mean[l] = mean;
        if total <= capacity || mean <= 0.0 {
            self.price[l] = 0.0;
            carried.copy_from_slice(offered);
            return;
        }
        let k = self.k;
        let excess = total - capacity;
        let lost = |p: f64| -> f64 {
            offered
                .iter()
                .map(|&x| x * (p * (x / mean).powf(k)).min(1.0))
                .sum()
        };
        let mut hi = 1.0;
        while lost(hi) < excess {
            hi *= 2.0;
        }
        let mut lo = 0.0;
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if lost(mid) < excess {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-15 * hi {
                break;
            }
        }
        let p = 0.5 * (lo + hi);
        self.price[l] = p;
        for (c, &x) in carried.iter_mut().zip(offered) {
            *c = x * (1.0 - (p * (x / mean).powf(k)).min(1.0));
        }
    }
}

/// The sender's best rate given `a_e` of the overloaded links on its path (see the module doc):
/// Newton's method on `h(t)`, `x = t^(1/k)`, kept inside the bracket `[0, 1 / max a_e)` where `h`
/// falls from 1 to minus infinity (a concave `h` makes a plain Newton step overshoot; a step that
/// leaves the bracket bisects instead).
pub fn best_rate(k: f64, a: &[f64]) -> Option<f64> {
    if a.is_empty() {
        return None;
    }
    let amax = a.iter().copied().fold(0.0, f64::max);
    let (mut lo, mut hi) = (0.0f64, 1.0 / amax);
    let mut t = 0.0f64;
    for _ in 0..200 {
        let (mut h, mut dh) = (1.0, 0.0);
        for &ae in a {
            let u = 1.0 - ae * t;
            h -= k * ae * t / u;
            dh -= k * ae / (u * u);
        }
        if h > 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        let mut next = t - h / dh;
        if !(next > lo && next < hi) {
            next = 0.5 * (lo + hi);
        }
        let done = (next - t).abs() <= 1e-15 * next.max(1e-300);
        t = next;
        if done || hi - lo <= 1e-15 * hi {
            break;
        }
    }
    Some(t.powf(1.0 / k))
}

/// The fixed point of loss-load senders on loss-load routers with penalty `k`, from the demands
/// of Eq. 1, until no demand changes by more than `epsilon`.
pub fn fixed_point(
    bw: &Brickwall<'_>,
    k: f64,
    epsilon: f64,
    max_iterations: usize,
) -> Result<FixedPoint, Error> {
    if !(k.is_finite() && k >= 1.0) {
        return Err(Error::BadParameter {
            name: "k",
            value: k,
            expected: "finite and >= 1",
        });
    }
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(Error::BadParameter {
            name: "epsilon",
            value: epsilon,
            expected: "finite and > 0",
        });
    }
    let caps: Vec<f64> = bw.net.links().iter().map(|l| l.capacity).collect();
    let mut rule = LossLoadRule::new(k, caps.len());
    let mut d = initial_demands(bw.net, bw.flows);
    let (mut iterations, mut delta) = (0, f64::INFINITY);
    let mut a = Vec::new();
    while delta > epsilon && iterations < max_iterations {
        bw.solve_with(&caps, &d, &mut rule)?;
        delta = 0.0;
        for (i, di) in d.iter_mut().enumerate() {
            a.clear();
            for &l in bw.flows.route(i) {
                let (p, m) = (rule.price[l as usize], rule.mean[l as usize]);
                if p > 0.0 {
                    a.push(p / m.powf(k));
                }
            }
            let target = best_rate(k, &a).unwrap_or(2.0 * *di);
            let next = *di + 0.5 * (target - *di);
            delta = delta.max((next - *di).abs());
            *di = next;
        }
        iterations += 1;
    }
    let state = bw.solve_with(&caps, &d, &mut rule)?;
    Ok(FixedPoint {
        demands: d,
        state,
        iterations,
        converged: delta <= epsilon,
        delta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{Flows, Network};

    /// §9: "in steady state, flows converge to (1 + 1/k) times their bottleneck rate with an
    /// expected loss rate of 1/(k + 1)".
    #[test]
    fn one_bottleneck_converges_to_one_plus_one_over_k_and_loss_one_over_k_plus_one() {
        for k in [1.0, 2.0, 5.0, 10.0] {
            let mut net = Network::new();
            let hub = net.add_node("hub").unwrap();
            let dst = net.add_node("dst").unwrap();
            net.add_link(hub, dst, 3.0).unwrap();
            let mut pairs = Vec::new();
            for s in 0..3 {
                let n = net.add_node(&format!("s{s}")).unwrap();
                net.add_link(n, hub, 10.0).unwrap();
                pairs.push((n, dst));
            }
            let flows = Flows::shortest(&net, &pairs).unwrap();
            let bw = Brickwall::new(&net, &flows);
            let fp = fixed_point(&bw, k, 1e-10, 10_000).unwrap();
            assert!(fp.converged, "k={k}: delta {}", fp.delta);
            for i in 0..3 {
                let want = (1.0 + 1.0 / k) * 1.0;
                assert!(
                    (fp.demands[i] - want).abs() < 1e-6,
                    "k={k}: demand {} want {want}",
                    fp.demands[i]
                );
                let loss = 1.0 - fp.state.goodput[i] / fp.demands[i];
                assert!((loss - 1.0 / (k + 1.0)).abs() < 1e-6, "k={k}: loss {loss}");
            }
        }
    }

    #[test]
    fn bad_k_is_refused() {
        let mut net = Network::new();
        let a = net.add_node("a").unwrap();
        let b = net.add_node("b").unwrap();
        net.add_link(a, b, 1.0).unwrap();
        let flows = Flows::shortest(&net, &[(a, b)]).unwrap();
        let bw = Brickwall::new(&net, &flows);
        assert!(matches!(
            fixed_point(&bw, 0.5, 1e-6, 10),
            Err(Error::BadParameter { name: "k", .. })
        ));
        assert!(matches!(
            fixed_point(&bw, f64::NAN, 1e-6, 10),
            Err(Error::BadParameter { .. })
        ));
    }
}
