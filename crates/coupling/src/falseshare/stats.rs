//! The statistics behind the three correlation tests: the normal quantile that turns a confidence
//! level into a z value, the Wilson score interval of a conditional loss probability, Pearson's
//! correlation from exact integer sums, and Fisher's z-interval of a correlation (alone and pooled
//! over the two sampling directions).
//!
//! The seed (sec. 4.1.2, Fig. 5) puts "90% confidence intervals" around each metric and decides by
//! whether they overlap, but does not say how the intervals are built. The choices here (Wilson,
//! Fisher) are the textbook intervals for a binomial proportion and for a correlation coefficient;
//! the module doc of [`super`] says why each was taken.

/// A point estimate with its two-sided confidence interval and the number of samples behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The metric: a conditional loss probability or a correlation coefficient.
    pub value: f64,
    /// Lower end of the confidence interval.
    pub lo: f64,
    /// Upper end of the confidence interval.
    pub hi: f64,
    /// Samples (trials or delay pairs) the estimate is computed from.
    pub samples: u64,
}

impl Estimate {
    /// Whether this interval lies entirely above `other`'s (strictly: touching intervals overlap).
    pub fn above(&self, other: &Estimate) -> bool {
        self.lo > other.hi
    }

    /// Whether this interval lies entirely below `other`'s (strictly).
    pub fn below(&self, other: &Estimate) -> bool {
        self.hi < other.lo
    }
}

/// z such that a standard normal variable lies in `[-z, z]` with probability `confidence`:
/// Φ⁻¹((1 + c) / 2). Computed from the tail (1 - c) / 2, so a confidence of 1 - 1e-15 still gives
/// a finite z. `confidence` must be in (0, 1) (checked by the configs).
pub fn z_two_sided(confidence: f64) -> f64 {
    upper_normal_quantile((1.0 - confidence) / 2.0)
}

// AS 241's coefficients as published (ascending powers of r), for the central region
// |p - 0.5| <= 0.425 and the two tail regions r = sqrt(-ln(tail)) <= 5 and > 5.
// The digits are kept as published, more than an f64 holds, so they can be checked against the
// paper; the compiler rounds them.
#[allow(clippy::excessive_precision)]
mod as241 {
    pub(super) const CENTRAL_NUM: [f64; 8] = [
        3.3871328727963666080e+0,
        1.3314166789178437745e+2,
        1.9715909503065514427e+3,
        1.3731693765509461125e+4,
        4.5921953931549871457e+4,
        6.7265770927008700853e+4,
        3.3430575583588128105e+4,
        2.5090809287301226727e+3,
    ];
    pub(super) const CENTRAL_DEN: [f64; 8] = [
        1.0,
        4.2313330701600911252e+1,
        6.8718700749205790830e+2,
        5.3941960214247511077e+3,
        2.1213794301586595867e+4,
        3.9307895800092710610e+4,
        2.8729085735721942674e+4,
        5.2264952788528545610e+3,
    ];
    pub(super) const TAIL_NUM: [f64; 8] = [
        1.42343711074968357734e+0,
        4.63033784615654529590e+0,
        5.76949722146069140550e+0,
        3.64784832476320460504e+0,
        1.27045825245236838258e+0,
        2.41780725177450611770e-1,
        2.27238449892691845833e-2,
        7.74545014278341407640e-4,
    ];
    pub(super) const TAIL_DEN: [f64; 8] = [
        1.0,
        2.05319162663775882187e+0,
        1.67638483018380384940e+0,
        6.89767334985100004550e-1,
        1.48103976427480074590e-1,
        1.51986665636164571966e-2,
        5.47593808499534494600e-4,
        1.05075007164441684324e-9,
    ];
    pub(super) const FAR_NUM: [f64; 8] = [
        6.65790464350110377720e+0,
        5.46378491116411436990e+0,
        1.78482653991729133580e+0,
        2.96560571828504891230e-1,
        2.65321895265761230930e-2,
        1.24266094738807843860e-3,
        2.71155556874348757815e-5,
        2.01033439929228813265e-7,
    ];
    pub(super) const FAR_DEN: [f64; 8] = [
        1.0,
        5.99832206555887937690e-1,
        1.36929880922735805310e-1,
        1.48753612908506148525e-2,
        7.86869131145613259100e-4,
        1.84631831751005468180e-5,
        1.42151175831644588870e-7,
        2.04426310338993978564e-15,
    ];
}
use as241::*;

/// Horner's rule on coefficients in ascending powers.
fn poly(c: &[f64; 8], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

/// Φ⁻¹(1 - tail) for `tail` in (0, 0.5]: Wichura's algorithm AS 241 (PPND16, Applied Statistics
/// 37(3), 1988), relative accuracy about 1e-16; the same algorithm as Python's
/// `statistics.NormalDist.inv_cdf`.
pub fn upper_normal_quantile(tail: f64) -> f64 {
    let q = 0.5 - tail;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(&CENTRAL_NUM, r) / poly(&CENTRAL_DEN, r);
    }
    // The tail branches work on r = sqrt(-ln(tail)) directly, never on 1 - tail, so confidences
    // within 1e-16 of 1 still give the right z.
    let r = (-tail.min(1.0 - tail).ln()).sqrt();
    let v = if r <= 5.0 {
        let r = r - 1.6;
        poly(&TAIL_NUM, r) / poly(&TAIL_DEN, r)
    } else {
        let r = r - 5.0;
        poly(&FAR_NUM, r) / poly(&FAR_DEN, r)
    };
    if q < 0.0 {
        -v
    } else {
        v
    }
}

/// The Wilson score interval of a binomial proportion: `successes` of `trials`, at the z of the
/// chosen confidence (E. B. Wilson, JASA 22, 1927).
///
/// Why Wilson and not the normal ("Wald") interval p ± z·sqrt(p(1-p)/n): conditional loss
/// probabilities are often 0 or 1 on few trials, where the Wald interval has zero width and would
/// let three trials "prove" a difference; Wilson's interval stays wide there and inside [0, 1].
///
/// `None` for zero trials.
pub fn wilson_interval(successes: u64, trials: u64, z: f64) -> Option<Estimate> {
    if trials == 0 {
        return None;
    }
    let n = trials as f64;
    let p = successes.min(trials) as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // Analytically lo = 0 at p = 0 and hi = 1 at p = 1; pin them instead of keeping the rounding.
    let lo = if successes == 0 {
        0.0
    } else {
        (center - half).max(0.0)
    };
    let hi = if successes >= trials {
        1.0
    } else {
        (center + half).min(1.0)
    };
    Some(Estimate {
        value: p,
        lo,
        hi,
        samples: trials,
    })
}

/// The largest |r| passed to atanh: a sample correlation of exactly ±1 (a noiseless linear series)
/// has an infinite Fisher z; it is taken as ±(1 - 1e-12) instead, z ≈ ±14.2.
pub const MAX_ABS_R: f64 = 1.0 - 1e-12;

/// Fisher's interval for a correlation coefficient `r` from `n` pairs: z = atanh(r) is close to
/// normal with standard error 1 / sqrt(n - 3) (R. A. Fisher, Biometrika 10, 1915), so the interval
/// is tanh(atanh(r) ± z_c / sqrt(n - 3)). Why Fisher: the sampling distribution of r itself is
/// skewed and bounded near ±1, where delay correlations of a queue live; in z it is symmetric.
///
/// `None` for n < 4 (no standard error) or a non-finite r.
pub fn fisher_interval(r: f64, n: u64, z: f64) -> Option<Estimate> {
    pooled_fisher(&[(r, n)], z)
}

/// Fisher's interval pooled over independent groups `(r_i, n_i)`: the z_i = atanh(r_i) are
/// averaged with weights n_i - 3 (their inverse variances), the pooled standard error is
/// 1 / sqrt(sum(n_i - 3)), and both ends are mapped back with tanh (the fixed-effect combination
/// of correlations, Hedges & Olkin 1985). Groups with n_i < 4 or non-finite r_i are skipped.
/// With one group this is [`fisher_interval`]. `samples` is the sum of n_i over the groups used.
pub fn pooled_fisher(groups: &[(f64, u64)], z: f64) -> Option<Estimate> {
    let (mut wz, mut w, mut samples) = (0.0, 0.0, 0u64);
    for &(r, n) in groups {
        if n < 4 || !r.is_finite() {
            continue;
        }
        let weight = (n - 3) as f64;
        wz += weight * r.clamp(-MAX_ABS_R, MAX_ABS_R).atanh();
        w += weight;
        samples += n;
    }
    if w == 0.0 {
        return None;
    }
    let zbar = wz / w;
    let half = z / w.sqrt();
    Some(Estimate {
        value: zbar.tanh(),
        lo: (zbar - half).tanh(),
        hi: (zbar + half).tanh(),
        samples,
    })
}

/// Exact running sums of pairs (x, y) for Pearson's correlation, with samples added and removed
/// (a sliding window). All sums are integers, so removing a sample restores the sums bit for bit:
/// no drift however long the run.
///
/// Bounds: |x|, |y| <= 2^46 and at most 2^16 pairs, so every product below stays within 2^126.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorrelationSums {
    pub n: u64,
    pub sx: i128,
    pub sy: i128,
    pub sxx: i128,
    pub syy: i128,
    pub sxy: i128,
}

impl CorrelationSums {
    pub fn add(&mut self, x: i64, y: i64) {
        let (x, y) = (i128::from(x), i128::from(y));
        self.n += 1;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.syy += y * y;
        self.sxy += x * y;
    }

    pub fn remove(&mut self, x: i64, y: i64) {
        let (x, y) = (i128::from(x), i128::from(y));
        self.n -= 1;
        self.sx -= x;
        self.sy -= y;
        self.sxx -= x * x;
        self.syy -= y * y;
        self.sxy -= x * y;
    }

    /// Pearson's r = (n·Σxy - Σx·Σy) / sqrt((n·Σx² - (Σx)²)(n·Σy² - (Σy)²)). The three centred
    /// sums are exact integers; only the final division rounds. `None` with fewer than 2 pairs or
    /// when x or y does not vary (the correlation is undefined).
    pub fn pearson(&self) -> Option<f64> {
        if self.n < 2 {
            return None;
        }
        let n = i128::from(self.n);
        let cxx = n * self.sxx - self.sx * self.sx;
        let cyy = n * self.syy - self.sy * self.sy;
        let cxy = n * self.sxy - self.sx * self.sy;
        if cxx <= 0 || cyy <= 0 {
            return None;
        }
        let r = cxy as f64 / ((cxx as f64).sqrt() * (cyy as f64).sqrt());
        Some(r.clamp(-1.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_the_tables() {
        // Φ⁻¹(0.95), Φ⁻¹(0.975), Φ⁻¹(0.995) to 1e-15, and both branches of AS 241.
        assert!((z_two_sided(0.90) - 1.644_853_626_951_472_2).abs() < 1e-14);
        assert!((z_two_sided(0.95) - 1.959_963_984_540_054).abs() < 1e-14);
        assert!((z_two_sided(0.99) - 2.575_829_303_548_900_4).abs() < 1e-14);
        assert!((upper_normal_quantile(0.5)).abs() < 1e-16);
        assert!((upper_normal_quantile(0.8413447460685429) + 1.0).abs() < 1e-12);
        // Far tail (r > 5): Φ⁻¹(1 - 1e-15) = 7.941345326170997.
        assert!((upper_normal_quantile(1e-15) - 7.941_345_326_170_997).abs() < 1e-12);
        assert!(z_two_sided(1.0 - 1e-15).is_finite());
    }

    #[test]
    fn sums_remove_exactly() {
        let mut s = CorrelationSums::default();
        s.add(1, 2);
        let before = s;
        s.add(1 << 46, -(1 << 46));
        s.remove(1 << 46, -(1 << 46));
        assert_eq!(s, before);
    }
}
