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
//! - a sender, told `a_e = P_e / x̄_e^k` of each overloaded link on its path (as `ln a_e`, see
//!   [`LossLoadRule`]), maximizes its goodput `x Π_e (1 − a_e x^k)`. With `t = x^k` the optimum
//!   solves `h(t) = 1 − k Σ_e a_e t / (1 − a_e t) = 0` (for one link: `1 − (k+1) a x^k = 0`, the
//!   degree-k polynomial); `h` is concave and decreasing, so [`best_rate`] uses Newton's method
//!   kept inside a bracket of the root (a plain Newton step from 0 overshoots). One link with `n`
//!   equal flows gives `p = 1/(k+1)` and `x = (1 + 1/k) c / n`, as the seed says (tested below).
//!
//! Feedback is ideal (instantaneous) as in the seed. A sender with no overloaded link on its path
//! doubles its demand. Updates are damped (half-way to the target): undamped, the best responses
//! oscillate, which is the "numerical instability" the seed reports.

use crate::brickwall::{Brickwall, LinkRule};
use crate::network::{Error, LinkId};
use crate::senders::{
    check_iteration, demand_scales, initial_demands, relative_change, FixedPoint,
};

/// The loss-load dropping rule; records each overloaded link's `ln a_e` for the senders.
///
/// Everything is computed in log space (issue 12): `(x_i / x̄)^k` and `x̄^k` overflow `f64` at
/// modest sizes (k = 80 at capacity 1e4, k = 300 with ten flows on one link) and underflow at small
/// ones (capacity 0.01, k = 200), which made the price infinite or NaN. Ratios are taken against
/// the largest offered rate `x_max`, so `r_i = (x_i / x_max)^k` lies in `[0, 1]`, and the price is
/// kept as a logarithm.
pub struct LossLoadRule {
    pub k: f64,
    /// `ln a_e` per link, `a_e = P_e / x̄_e^k`: flow `i` on link `e` loses the fraction
    /// `min(1, a_e x_i^k)`. `-inf` when the link drops nothing.
    pub log_a: Vec<f64>,
    /// Scratch: (ln r_i, x_i) sorted by r descending, and the scaled suffix sums of r_i x_i.
    order: Vec<(f64, f64)>,
    suffix: Vec<f64>,
}

impl LossLoadRule {
    pub fn new(k: f64, links: usize) -> Self {
        LossLoadRule {
            k,
            log_a: vec![f64::NEG_INFINITY; links],
            order: Vec::new(),
            suffix: Vec::new(),
        }
    }
}

impl LinkRule for LossLoadRule {
    fn apply(&mut self, link: LinkId, capacity: f64, offered: &[f64], carried: &mut [f64]) {
        let l = link as usize;
        let total: f64 = offered.iter().sum();
        let xmax = offered.iter().copied().fold(0.0, f64::max);
        self.log_a[l] = f64::NEG_INFINITY;
        carried.copy_from_slice(offered);
        if total <= capacity || xmax <= 0.0 {
            return;
        }
        // The dropped amount Σ x_i min(1, P' r_i), r_i = (x_i / x_max)^k, is piecewise linear in
        // P': with the flows sorted by r descending, the first j are dropped whole and the rest in
        // proportion. (P' = P (x_max / x̄)^k; the mean's price P cancels out of every drop.)
        let k = self.k;
        let excess = total - capacity;
        self.order.clear();
        self.order
            .extend(offered.iter().map(|&x| (k * (x / xmax).ln(), x)));
        self.order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        // f(P') at the breakpoint P' = 1/r_j is (whole of the flows before j) + S_j with
        // S_j = Σ_{i>=j} x_i r_i / r_j, summed from the end as S_j = x_j + S_{j+1} r_{j+1} / r_j
        // (each factor <= 1: no overflow, no cancellation). The first breakpoint where f reaches
        // the excess brackets P': there P' r_j = (excess - whole) / S_j.
        let n = self.order.len();
        self.suffix.clear();
        self.suffix.resize(n + 1, 0.0);
        for j in (0..n).rev() {
            let (lr, x) = self.order[j];
            let next = if j + 1 < n && self.order[j + 1].0 > f64::NEG_INFINITY {
                self.suffix[j + 1] * (self.order[j + 1].0 - lr).exp()
            } else {
                0.0
            };
            self.suffix[j] = if lr > f64::NEG_INFINITY {
                x + next
            } else {
                0.0
            };
        }
        let mut whole = 0.0;
        let mut log_p = f64::NEG_INFINITY; // ln P'
        let mut smallest = f64::NEG_INFINITY; // ln r of the last flow with any rate
        for j in 0..n {
            let (lr, x) = self.order[j];
            if lr == f64::NEG_INFINITY {
                break;
            }
            smallest = lr;
            if whole + self.suffix[j] >= excess {
                log_p = ((excess - whole) / self.suffix[j]).ln() - lr;
                break;
            }
            whole += x;
        }
        if log_p == f64::NEG_INFINITY {
            if smallest == f64::NEG_INFINITY {
                return;
            }
            // No breakpoint reached the excess: every flow is dropped whole (capacity 0), or
            // rounding put the last sum a hair below a total summed in another order. The price
            // where the smallest flow is dropped whole: P' r_min = 1.
            log_p = -smallest;
        }
        // a_e = P' / x_max^k.
        self.log_a[l] = log_p - k * xmax.ln();
        for (c, &x) in carried.iter_mut().zip(offered) {
            let drop = (log_p + k * (x / xmax).ln()).exp().min(1.0);
            *c = x * (1.0 - drop);
        }
    }
}

/// The sender's best rate given `ln a_e` of the overloaded links on its path (see the module doc).
///
/// With `L = max ln a_e`, `b_e = exp(ln a_e - L)` in `(0, 1]` and `τ = e^L t`, the optimum solves
/// `h(τ) = 1 - k Σ_e b_e τ / (1 - b_e τ) = 0`, and `x = exp((ln τ - L) / k)`: the same equation as
/// `h(t)` without ever forming `a_e` or `t = x^k`, which overflow (issue 12). The root lies in
/// `[0, 1/(k+1)]` (the top link alone puts it at `1/(k+1)`, the others only lower `h`), well away
/// from the pole at `τ = 1`: with the pole in the bracket, Newton's tiny steps beside it looked
/// like convergence (a second link overloaded by rounding doubled the answer). Newton's method,
/// bisecting whenever a step leaves the bracket; done when `h` is zero to rounding or the bracket
/// has closed.
pub fn best_rate(k: f64, log_a: &[f64]) -> Option<f64> {
    let top = log_a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if log_a.is_empty() || top == f64::NEG_INFINITY {
        return None;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0 / (k + 1.0));
    let mut t = 0.0f64;
    for _ in 0..200 {
        let (mut h, mut dh) = (1.0, 0.0);
        for &la in log_a {
            let b = (la - top).exp();
            let u = 1.0 - b * t;
            h -= k * b * t / u;
            dh -= k * b / (u * u);
        }
        if h.abs() <= 1e-14 {
            break;
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
        t = next;
        if hi - lo <= 1e-15 * hi {
            break;
        }
    }
    Some(((t.ln() - top) / k).exp())
}

/// How settled the rates on a cycle of links must be (relative) inside each loss-load
/// computation: the seed notes that loss-load's "numerical instability necessitated a higher error
/// tolerance"; some cycles hover about 1e-6 from their fixed point (the loss curve has kinks where
/// a flow is dropped whole), which is far below what the outer iteration resolves.
const INNER: f64 = 1e-5;

/// The fixed point of loss-load senders on loss-load routers with penalty `k`, from the demands
/// of Eq. 1, until no demand changes by more than `epsilon` relative to its size
/// ([`crate::senders::relative_change`]).
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
    let scale = demand_scales(bw.net, bw.flows);
    let (mut iterations, mut delta) = (0, f64::INFINITY);
    let mut a = Vec::new();
    while delta > epsilon && iterations < max_iterations {
        bw.solve_settled(&bw.caps, &d, &mut rule, INNER)?;
        delta = 0.0;
        for (i, di) in d.iter_mut().enumerate() {
            a.clear();
            for &l in bw.flows.route(i) {
                let la = rule.log_a[l as usize];
                if la > f64::NEG_INFINITY {
                    a.push(la);
                }
            }
            let target = best_rate(k, &a).unwrap_or(2.0 * *di);
            let next = *di + 0.5 * (target - *di);
            delta = delta.max(relative_change(&[next], &[*di], &scale[i..=i]));
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

    /// `n` senders, each on its own access link of capacity `access`, into one bottleneck of
    /// capacity `bottleneck`.
    fn star(n: usize, bottleneck: f64, access: f64) -> (Network, Flows) {
        let mut net = Network::new();
        let hub = net.add_node("hub").unwrap();
        let dst = net.add_node("dst").unwrap();
        net.add_link(hub, dst, bottleneck).unwrap();
        let mut pairs = Vec::new();
        for s in 0..n {
            let v = net.add_node(&format!("s{s}")).unwrap();
            net.add_link(v, hub, access).unwrap();
            pairs.push((v, dst));
        }
        let flows = Flows::shortest(&net, &pairs).unwrap();
        (net, flows)
    }

    /// §9: "in steady state, flows converge to (1 + 1/k) times their bottleneck rate with an
    /// expected loss rate of 1/(k + 1)".
    #[test]
    fn one_bottleneck_converges_to_one_plus_one_over_k_and_loss_one_over_k_plus_one() {
        for k in [1.0, 2.0, 5.0, 10.0] {
            let (net, flows) = star(3, 3.0, 10.0);
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

    /// The review of issue 12: a stop test relative to the access link's capacity stopped far from
    /// the answer when the access link is much faster than the bottleneck (demand 239 instead of 2
    /// with access links of 1e6 and a bottleneck of 3, reported converged). With the Python
    /// default epsilon of 1e-4 the answer must be right to about that.
    #[test]
    fn a_fast_access_link_does_not_loosen_the_stop_test() {
        for k in [1.0, 10.0] {
            for access in [10.0, 1e3, 1e6] {
                let (net, flows) = star(3, 3.0, access);
                let bw = Brickwall::new(&net, &flows);
                let fp = fixed_point(&bw, k, 1e-4, 100_000).unwrap();
                assert!(fp.converged);
                let want = 1.0 + 1.0 / k;
                for d in &fp.demands {
                    assert!(
                        (d - want).abs() < 1e-3 * want,
                        "k={k} access={access}: {d} vs {want}"
                    );
                }
            }
        }
    }

    /// Issue 12: `(x / x̄)^k` and `x̄^k` overflowed (k = 80 at capacity 1e4: "demand must be >= 0,
    /// got NaN") or underflowed (capacity 0.01, k = 200: unconverged). In log space the answer is
    /// the seed's at every scale and every k.
    #[test]
    fn any_scale_and_any_k_gives_the_seeds_steady_state() {
        for n in [3usize, 10] {
            for k in [1.0, 80.0, 200.0, 300.0, 1000.0] {
                for s in [1e-9, 0.01, 1.0, 1e4, 1e9] {
                    let (net, flows) = star(n, n as f64 * s, 10.0 * s);
                    let bw = Brickwall::new(&net, &flows);
                    let fp = fixed_point(&bw, k, 1e-10, 100_000).unwrap();
                    assert!(fp.converged, "n={n} k={k} s={s}: delta {}", fp.delta);
                    for i in 0..n {
                        let want = (1.0 + 1.0 / k) * s;
                        assert!(
                            (fp.demands[i] - want).abs() < 1e-6 * s,
                            "n={n} k={k} s={s}: demand {} want {want}",
                            fp.demands[i]
                        );
                        let loss = 1.0 - fp.state.goodput[i] / fp.demands[i];
                        assert!(
                            (loss - 1.0 / (k + 1.0)).abs() < 1e-6,
                            "n={n} k={k} s={s}: loss {loss}"
                        );
                    }
                }
            }
        }
    }

    /// The router at k = 300 with one flow 10x the others (`(x / x̄)^k` was 1e300 and more).
    #[test]
    fn a_steep_router_drops_the_excess_from_the_largest_flow() {
        let mut rule = LossLoadRule::new(300.0, 1);
        let offered = [1.0, 1.0, 1.0, 10.0];
        let mut carried = [0.0; 4];
        rule.apply(0, 11.0, &offered, &mut carried);
        assert_eq!(carried[..3], [1.0, 1.0, 1.0]);
        assert!((carried[3] - 8.0).abs() < 1e-12, "{carried:?}");
        assert!(rule.log_a[0].is_finite());
    }

    /// A second link overloaded by rounding (a tiny `a_e`) must not move the best rate: with the
    /// pole of `h` inside the bracket, Newton crept along it and stopped there, doubling the rate.
    #[test]
    fn a_negligible_second_link_does_not_change_the_best_rate() {
        for k in [1.0, 2.0, 10.0, 300.0] {
            let one = best_rate(k, &[-4.4]).unwrap();
            let two = best_rate(k, &[-4.4, -39.0]).unwrap();
            let want = (-(k + 1.0).ln() + 4.4) / k; // x = (1 / ((k+1) a))^(1/k)
            assert!((one.ln() - want).abs() < 1e-12, "k={k}: {one}");
            assert!((two / one - 1.0).abs() < 1e-12, "k={k}: {two} vs {one}");
        }
    }

    /// A link of capacity 0 carries nothing: every flow is dropped whole, also when the sums in two
    /// orders round apart (0.5 + 0.1 < 0.1 + 0.2 + 0.3 in floating point: the review of issue 12
    /// found [0.1, 0.2, 0.3] carried whole through capacity 0).
    #[test]
    fn a_link_of_capacity_zero_carries_nothing() {
        for offered in [vec![0.1, 0.2, 0.3], vec![1.0, 2.0, 3.0], vec![0.0, 0.7]] {
            for k in [1.0, 2.0, 300.0] {
                let mut rule = LossLoadRule::new(k, 1);
                let mut carried = vec![1.0; offered.len()];
                rule.apply(0, 0.0, &offered, &mut carried);
                assert!(
                    carried.iter().all(|&c| c == 0.0),
                    "{offered:?} k={k}: {carried:?}"
                );
                assert!(rule.log_a[0].is_finite(), "{offered:?} k={k}");
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
