//! Time as integers, passed into every call (smoltcp style): the coupling logic never reads a clock.
//!
//! Rates and windows are plain `f64` with the unit in the name (`_bps`, `_pkts`); they are validated
//! at the API boundary by [`check_rate`] and friends, so the algorithms only ever see finite,
//! non-negative numbers.

use crate::error::Error;
use core::fmt;
use core::ops::{Add, Sub};

/// A point in time in integer nanoseconds since an epoch the caller chooses (the simulator's start,
/// or a monotonic clock read by the caller).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    nanos: u64,
}

/// A span of time in integer nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    nanos: u64,
}

impl Instant {
    pub const ZERO: Instant = Instant { nanos: 0 };
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant { nanos }
    }
    pub const fn from_millis(ms: u64) -> Self {
        Instant {
            nanos: ms * 1_000_000,
        }
    }
    pub const fn from_secs(s: u64) -> Self {
        Instant {
            nanos: s * 1_000_000_000,
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.nanos
    }
    pub fn as_secs_f64(self) -> f64 {
        self.nanos as f64 / 1e9
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration {
            nanos: self.nanos.saturating_sub(earlier.nanos),
        }
    }
}

impl Duration {
    pub const ZERO: Duration = Duration { nanos: 0 };
    pub const fn from_nanos(nanos: u64) -> Self {
        Duration { nanos }
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration { nanos: us * 1_000 }
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration {
            nanos: ms * 1_000_000,
        }
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration {
            nanos: s * 1_000_000_000,
        }
    }
    /// Converts seconds given as a float; rejects NaN, infinite and negative values.
    pub fn try_from_secs_f64(field: &'static str, secs: f64) -> Result<Self, Error> {
        if !secs.is_finite() || secs < 0.0 || secs * 1e9 > u64::MAX as f64 {
            return Err(Error::InvalidValue {
                field,
                value: secs,
                expected: "a finite number of seconds >= 0",
            });
        }
        Ok(Duration {
            nanos: (secs * 1e9).round() as u64,
        })
    }
    pub const fn as_nanos(self) -> u64 {
        self.nanos
    }
    pub fn as_secs_f64(self) -> f64 {
        self.nanos as f64 / 1e9
    }
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration {
            nanos: self.nanos.saturating_mul(k),
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant {
            nanos: self.nanos.saturating_add(d.nanos),
        }
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant {
            nanos: self.nanos.saturating_sub(d.nanos),
        }
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration {
            nanos: self.nanos.saturating_add(d.nanos),
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

/// The largest rate accepted (1 Ebit/s): sums over billions of flows stay finite.
pub const MAX_RATE_BPS: f64 = 1e18;
/// The largest window accepted, in packets.
pub const MAX_WINDOW_PKTS: f64 = 1e15;
/// The largest priority accepted; only ratios of priorities matter.
pub const MAX_PRIORITY: f64 = 1e12;

/// A rate in bit/s: 0 ..= [`MAX_RATE_BPS`].
/// Time passed in never goes back: `now` before `last` (the latest time seen) is an error.
pub(crate) fn check_not_before(now: Instant, last: Instant) -> Result<(), Error> {
    if now < last {
        return Err(Error::TimeWentBackwards {
            now_ns: now.as_nanos(),
            last_ns: last.as_nanos(),
        });
    }
    Ok(())
}

pub fn check_rate(field: &'static str, bps: f64) -> Result<f64, Error> {
    if (0.0..=MAX_RATE_BPS).contains(&bps) {
        Ok(bps)
    } else {
        Err(Error::InvalidValue {
            field,
            value: bps,
            expected: "a rate in bit/s in 0..=1e18",
        })
    }
}

/// A desired rate in bit/s: 0 ..= [`MAX_RATE_BPS`], or `f64::INFINITY` for "no application limit"
/// (RFC 8699 App. C: "new_DR to be 'infinity' in case of a bulk data transfer").
pub fn check_desired_rate(field: &'static str, bps: f64) -> Result<f64, Error> {
    if (0.0..=MAX_RATE_BPS).contains(&bps) || bps == f64::INFINITY {
        Ok(bps)
    } else {
        Err(Error::InvalidValue {
            field,
            value: bps,
            expected: "a rate in bit/s in 0..=1e18, or infinity (unlimited)",
        })
    }
}

/// A window in packets (segments): 0 ..= [`MAX_WINDOW_PKTS`]. Fractions are allowed (ns-2 style
/// double cwnd).
pub fn check_window(field: &'static str, pkts: f64) -> Result<f64, Error> {
    check_packets(field, pkts, "a window in packets in 0..=1e15")
}

/// A count of packets in `0..=MAX_WINDOW_PKTS` (windows, burst limits); `expected` says what the
/// field is in the error.
pub(crate) fn check_packets(
    field: &'static str,
    pkts: f64,
    expected: &'static str,
) -> Result<f64, Error> {
    if (0.0..=MAX_WINDOW_PKTS).contains(&pkts) {
        Ok(pkts)
    } else {
        Err(Error::InvalidValue {
            field,
            value: pkts,
            expected,
        })
    }
}

/// A priority-weighted share of a sum, `P * sum / sum_P` computed as `(P / sum_P) * sum` with the
/// fraction clamped to [0, 1], so priorities anywhere in the accepted range (down to the smallest
/// subnormal, up to [`MAX_PRIORITY`]) neither overflow nor give a share above the sum (issue 11).
/// Used by every coupler: the FSE's rates and the TCP couplers' windows.
pub(crate) fn share(p: f64, sum: f64, sum_p: f64) -> f64 {
    if sum_p > 0.0 {
        // A division per share, not a reciprocal once per sum: a flow alone gets exactly the sum
        // (p / p == 1), and a sum fed back from its own share does not creep by an ulp per report.
        (p / sum_p).clamp(0.0, 1.0) * sum
    } else {
        0.0
    }
}

/// A priority: > 0 and <= [`MAX_PRIORITY`]. Only its portion of the group's sum matters (RFC 8699
/// sec. 5.2).
pub fn check_priority(p: f64) -> Result<f64, Error> {
    if p > 0.0 && p <= MAX_PRIORITY {
        Ok(p)
    } else {
        Err(Error::InvalidValue {
            field: "priority",
            value: p,
            expected: "a priority > 0 and <= 1e12",
        })
    }
}

/// A running sum that values are added to and removed from (S_P, the sum of FSE_R), kept with
/// Neumaier's compensated summation so that adding and later removing values of very different
/// magnitude (priorities 1e12 and 1e-3) leaves the right total instead of rounding residue.
///
/// No fixed precision spans the whole priority range (1e12 down to 5e-324): after adding 1e12 and
/// 1e-75 and removing 1e12 the compensated value is 0. [`Self::is_reliable`] says when the value
/// has fallen below what the sum can resolve against everything that went through it, and
/// [`Self::settle`] then rebuilds it from the owner's values: O(n), but only after such a
/// cancellation (issue 11).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunningSum {
    sum: f64,
    comp: f64,
    /// The sum of |x| over everything added or removed since the sum was last built.
    magnitude: f64,
}

impl RunningSum {
    pub fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.comp += (self.sum - t) + x;
        } else {
            self.comp += (x - t) + self.sum;
        }
        self.sum = t;
        self.magnitude += x.abs();
    }

    pub fn sub(&mut self, x: f64) {
        self.add(-x);
    }

    pub fn value(&self) -> f64 {
        self.sum + self.comp
    }

    /// True while the value is well above the compensated sum's error bound (about 1e-32 of the
    /// magnitude per operation; 1e-16 leaves room for 1e16 operations) and not negative.
    pub fn is_reliable(&self) -> bool {
        self.magnitude == 0.0 || self.value() > self.magnitude * 1e-16
    }

    /// Rebuilds the sum from `values` (the owner's current terms) if it is not reliable.
    pub fn settle<I: IntoIterator<Item = f64>>(&mut self, values: impl FnOnce() -> I) {
        if !self.is_reliable() {
            *self = RunningSum::of(values());
        }
    }

    /// A sum that starts at `v`.
    pub fn from_value(v: f64) -> Self {
        RunningSum {
            sum: v,
            comp: 0.0,
            magnitude: v.abs(),
        }
    }

    /// The compensated sum of `values`, to restart from.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Self {
        let mut s = RunningSum::default();
        for v in values {
            s.add(v);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_sum_survives_cancellation() {
        let mut s = RunningSum::default();
        for x in [1e12, 1.0, 1.0, 1e-3] {
            s.add(x);
        }
        s.sub(1e12);
        s.sub(1.0);
        assert_eq!(s.value(), 1.0 + 1e-3);
        let mut plain = 0.0;
        for x in [1e17, 1.0, 1.0, -1e17, -1.0] {
            plain += x;
        }
        assert_eq!(plain, -1.0, "the plain sum is what went wrong");
        assert_eq!(RunningSum::of([1e17, 1.0, 1.0, -1e17, -1.0]).value(), 1.0);
    }

    /// Priorities 80 decades apart: removing the large one leaves a value no fixed-precision sum
    /// resolves; the sum says so and `settle` rebuilds it from the remaining terms.
    #[test]
    fn running_sum_knows_when_cancellation_ate_it() {
        let mut s = RunningSum::of([2e-14, 4.7e-75, 1e12]);
        s.sub(1e12);
        s.sub(2e-14);
        assert!(!s.is_reliable(), "{s:?}");
        s.settle(|| [4.7e-75]);
        assert_eq!(s.value(), 4.7e-75);
        assert!(s.is_reliable());
        let mut s = RunningSum::of([1e12, 1e-3]);
        s.sub(1e12);
        assert!(s.is_reliable(), "exact here: {s:?}");
        s.settle(|| -> [f64; 0] { panic!("no rebuild needed") });
        assert_eq!(s.value(), 1e-3);
        assert!(RunningSum::default().is_reliable());
    }

    #[test]
    fn instant_arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_millis(2)).as_nanos(), 7_000_000);
        assert_eq!((t - Duration::from_secs(1)).as_nanos(), 0);
        assert_eq!(t.saturating_since(Instant::from_secs(1)), Duration::ZERO);
        assert_eq!(
            Instant::from_secs(2).saturating_since(t),
            Duration::from_nanos(1_995_000_000)
        );
    }

    #[test]
    fn checks_reject_bad_numbers() {
        assert!(check_rate("r", f64::NAN).is_err());
        assert!(check_rate("r", -1.0).is_err());
        assert!(check_rate("r", f64::INFINITY).is_err());
        assert_eq!(check_rate("r", 0.0), Ok(0.0));
        assert_eq!(check_desired_rate("dr", f64::INFINITY), Ok(f64::INFINITY));
        assert!(check_desired_rate("dr", f64::NAN).is_err());
        assert!(check_window("w", -0.5).is_err());
        assert!(check_priority(0.0).is_err());
        assert!(check_priority(-1.0).is_err());
        assert!(check_priority(1e13).is_err());
        assert!(check_rate("r", 1e19).is_err());
        assert!(check_window("w", 1e16).is_err());
        assert!(Duration::try_from_secs_f64("rtt", -0.1).is_err());
        assert_eq!(
            Duration::try_from_secs_f64("rtt", 0.1).unwrap(),
            Duration::from_millis(100)
        );
    }
}
