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
//!   are `X − c` (the drops are piecewise linear in `P`, so `P` is found exactly);
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
use crate::senders::{check_iteration, initial_demands, FixedPoint};

/// The loss-load dropping rule; records each link's price `P` and mean offered rate.
pub struct LossLoadRule {
    pub k: f64,
    pub price: Vec<f64>,
    pub mean: Vec<f64>,
    /// Scratch: (r_i, x_i) sorted by r descending, and suffix sums of r_i x_i.
    order: Vec<(f64, f64)>,
    suffix: Vec<f64>,
}

impl LossLoadRule {
    pub fn new(k: f64, links: usize) -> Self {
        LossLoadRule {
            k,
            price: vec![0.0; links],
            mean: vec![0.0; links],
            order: Vec::new(),
            suffix: Vec::new(),
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
        // Σ x_i min(1, P r_i), r_i = (x_i / x̄)^k, is piecewise linear in P: with the flows
        // sorted by r descending, the first j are dropped whole and the rest in proportion.
        let excess = total - capacity;
        self.order.clear();
        self.order
            .extend(offered.iter().map(|&x| ((x / mean).powf(self.k), x)));
        self.order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        // f(P) at the breakpoint P = 1/r_j is (whole of the flows before j) + suffix_j / r_j, with
        // suffix_j = Σ_{i>=j} r_i x_i summed from the end (no cancellation). The first breakpoint
        // where f reaches the excess brackets P.
        let n = self.order.len();
        self.suffix.clear();
        self.suffix.resize(n + 1, 0.0);
        for j in (0..n).rev() {
            self.suffix[j] = self.suffix[j + 1] + self.order[j].0 * self.order[j].1;
        }
        let mut whole = 0.0;
        let mut p = 0.0;
        for j in 0..n {
            let (r, x) = self.order[j];
            if r <= 0.0 {
                break;
            }
            if whole + self.suffix[j] / r >= excess {
                p = ((excess - whole) / self.suffix[j]).max(0.0);
                break;
            }
            whole += x;
        }
        self.price[l] = p;
        for (c, &x) in carried.iter_mut().zip(offered) {
            *c = x * (1.0 - (p * (x / mean).powf(self.k)).min(1.0));
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

/// How settled the rates on a cycle of links must be (relative) inside each loss-load
/// computation: the seed notes that loss-load's "numerical instability necessitated a higher error
/// tolerance"; some cycles hover about 1e-6 from their fixed point (the loss curve has kinks where
/// a flow is dropped whole), which is far below what the outer iteration resolves.
const INNER: f64 = 1e-5;

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
    check_iteration(epsilon, max_iterations)?;
    let mut rule = LossLoadRule::new(k, bw.caps.len());
    let mut d = initial_demands(bw.net, bw.flows);
    let (mut iterations, mut delta) = (0, f64::INFINITY);
    let mut a = Vec::new();
    while delta > epsilon && iterations < max_iterations {
        bw.solve_settled(&bw.caps, &d, &mut rule, INNER)?;
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
    let state = bw.solve_settled(&bw.caps, &d, &mut rule, INNER)?;
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

    /// The router drops exactly the excess, more (as a fraction) from flows above the mean.
    #[test]
    fn the_router_drops_exactly_the_excess() {
        let mut rule = LossLoadRule::new(3.0, 1);
        for offered in [
            vec![1.0, 2.0, 3.0, 10.0],
            vec![5.0, 5.0],
            vec![0.1, 0.1, 50.0],
            vec![1.0, 0.0, 4.0],
        ] {
            for cap in [0.5, 3.0, 7.0] {
                let total: f64 = offered.iter().sum();
                let mut carried = vec![0.0; offered.len()];
                rule.apply(0, cap, &offered, &mut carried);
                let lost = total - carried.iter().sum::<f64>();
                assert!(
                    (lost - (total - cap).max(0.0)).abs() < 1e-9,
                    "{offered:?} cap {cap}: lost {lost}"
                );
                let frac: Vec<f64> = offered
                    .iter()
                    .zip(&carried)
                    .map(|(o, c)| if *o > 0.0 { 1.0 - c / o } else { 0.0 })
                    .collect();
                for i in 0..offered.len() {
                    for j in 0..offered.len() {
                        if offered[i] > offered[j] && offered[j] > 0.0 {
                            assert!(
                                frac[i] >= frac[j] - 1e-12,
                                "{offered:?} cap {cap}: {frac:?}"
                            );
                        }
                    }
                }
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
