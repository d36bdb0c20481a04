//! The arithmetic a TCP coupler computes windows in (issue 14: an integer window mode).
//!
//! - [`Float`]: windows are `f64` packets, priorities `f64`, their sum compensated
//!   ([`RunningSum`]); what ns-2's TCP keeps, and what the simulator's controllers grow by
//!   `1/cwnd` per ACK.
//! - [`Int`]: windows are whole packets (`u64`; Linux keeps `snd_cwnd` as a `u32` count and grows
//!   it by whole packets through its `snd_cwnd_cnt` counter), priorities are integers scaled by
//!   [`PRIORITY_SCALE`]. A share of the aggregate rounds to the nearest packet (halves up); every
//!   other division floors. This is the arithmetic a BPF struct_ops program can do (no floating
//!   point), so the kernel port's test vectors are cut from it. A window given as a fraction is
//!   floored: a sender can put only whole packets in flight.
//!
//! Why shares round and do not floor: a floored share loses half a packet on average, and that is
//! a larger part of a small share than of a large one. With priorities 5:1 on a 50-packet
//! aggregate the low-priority connection held 5.25 times less, not 5 (kernel TCP on the
//! thesis-9.3-linux testbed, where cwnd ratios 2.03, 3.04, 4.16, 5.25 matched
//! `(r S/(r+1) - 1/2) / (S/(r+1) - 1/2)`), and the floors of every member's reassignment took
//! packets out of the aggregate. The dissertation's FreeBSD ctrlTCP kept windows in bytes, where
//! this bias is negligible; rounding to the nearest packet is unbiased. The windows told to a
//! group's members may then add up to more than `sum_cwnd`, by at most half a packet each (two
//! equal connections of an aggregate of 15 are told 8 each); under flooring they added up to less.
//!
//! The coupling algorithm (`ccc.rs`) is written once, generic over [`Arith`]; tests run the two
//! against each other.
//!
//! The integer mode compares windows with the *rounded* share (whether a connection is behind its
//! share, holds more than half of it): what a kernel program that computes the share once can do
//! without 128-bit products. Against the float rule that is up to half a packet off when the
//! share is fractional, the main reason the two modes' decisions sometimes part
//! (`tests/properties.rs`).

use super::TcpUpdate;
use crate::error::Error;
use crate::units::{share, RunningSum};
use std::fmt::Debug;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// One priority in the integer mode is this many units: priorities are kept to 1/65,536.
pub const PRIORITY_SCALE: u64 = 1 << 16;
/// The smallest priority the integer mode represents (one unit); a smaller one is refused.
pub const MIN_INT_PRIORITY: f64 = 1.0 / PRIORITY_SCALE as f64;
/// The largest window the integer mode holds: the kernel's `u32` `snd_cwnd` (larger ones are
/// held at it).
pub const MAX_INT_WINDOW_PKTS: u64 = u32::MAX as u64;

/// How windows, priorities and their sums are represented and combined.
pub trait Arith: Copy + Debug + Default + Send + Sync + 'static {
    /// A window, or a sum of windows, in packets.
    type W: Copy
        + Debug
        + PartialOrd
        + Send
        + Sync
        + Add<Output = Self::W>
        + Sub<Output = Self::W>
        + AddAssign
        + SubAssign;
    /// A priority.
    type P: Copy + Debug + PartialEq + Send + Sync;
    /// A running sum of priorities.
    type PSum: Copy + Debug + Default + Send + Sync;
    /// Appended to a coupler's name: "" or "_int".
    const SUFFIX: &'static str;

    /// `n` packets.
    fn count(n: u64) -> Self::W;
    /// A window given in packets (checked: finite, in range).
    fn window(pkts: f64) -> Self::W;
    /// A window in packets, for answers and views.
    fn pkts(w: Self::W) -> f64;
    /// A priority given (checked: > 0, at most `MAX_PRIORITY`); the integer mode refuses one it
    /// cannot represent.
    fn priority(p: f64) -> Result<Self::P, Error>;
    fn priority_f64(p: Self::P) -> f64;

    fn psum_add(s: &mut Self::PSum, p: Self::P);
    fn psum_sub(s: &mut Self::PSum, p: Self::P);
    fn psum_f64(s: &Self::PSum) -> f64;
    /// Rebuilds the sum from the owner's priorities if it can no longer be trusted (the float
    /// mode's compensated sum after a cancellation; the integer sum is exact).
    fn psum_settle<I: IntoIterator<Item = Self::P>>(s: &mut Self::PSum, values: impl FnOnce() -> I);
    fn psum_of<I: IntoIterator<Item = Self::P>>(values: I) -> Self::PSum;

    /// `p`'s share of `sum`: `p * sum / sum_p` (the integer mode rounds it to the nearest packet),
    /// never above `sum`; 0 while `sum_p` is 0.
    fn share(p: Self::P, sum: Self::W, sum_p: &Self::PSum) -> Self::W;
    /// `w * num / den` (`den` > 0).
    fn scale(w: Self::W, num: Self::W, den: Self::W) -> Self::W;
    /// The aggregate after a loss event's reduction: `sum * beta`, `beta` the reporting
    /// connection's own reduction `ssthresh / told`, at least 1/2, and 1/2 where that ratio says
    /// nothing (a told window under 4 packets, or no reduction at all). See `ccc.rs`, item 1.
    fn reduce(sum: Self::W, ssthresh: Self::W, told: Self::W) -> Self::W;
    /// `2 * w`.
    fn double(w: Self::W) -> Self::W;
    /// `a + b`, saturating in the integer mode (an aggregate grown by reports of huge windows
    /// must not wrap).
    fn add(a: Self::W, b: Self::W) -> Self::W;
}

/// `f64` windows and priorities: the simulator's default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Float;

/// Whole-packet windows and scaled-integer priorities: the kernel's arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Int;

impl Arith for Float {
    type W = f64;
    type P = f64;
    type PSum = RunningSum;
    const SUFFIX: &'static str = "";

    fn count(n: u64) -> f64 {
        n as f64
    }
    fn window(pkts: f64) -> f64 {
        pkts
    }
    fn pkts(w: f64) -> f64 {
        w
    }
    fn priority(p: f64) -> Result<f64, Error> {
        Ok(p)
    }
    fn priority_f64(p: f64) -> f64 {
        p
    }
    fn psum_add(s: &mut RunningSum, p: f64) {
        s.add(p)
    }
    fn psum_sub(s: &mut RunningSum, p: f64) {
        s.sub(p)
    }
    fn psum_f64(s: &RunningSum) -> f64 {
        s.value()
    }
    fn psum_settle<I: IntoIterator<Item = f64>>(s: &mut RunningSum, values: impl FnOnce() -> I) {
        s.settle(values)
    }
    fn psum_of<I: IntoIterator<Item = f64>>(values: I) -> RunningSum {
        RunningSum::of(values)
    }
    fn share(p: f64, sum: f64, sum_p: &RunningSum) -> f64 {
        share(p, sum, sum_p.value())
    }
    fn scale(w: f64, num: f64, den: f64) -> f64 {
        w * (num / den)
    }
    fn reduce(sum: f64, ssthresh: f64, told: f64) -> f64 {
        let ratio = ssthresh / told;
        let beta = if told >= 4.0 && ratio > 0.0 && ratio < 1.0 {
            ratio.max(0.5)
        } else {
            0.5
        };
        sum * beta
    }
    fn double(w: f64) -> f64 {
        2.0 * w
    }
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
}

impl Arith for Int {
    type W = u64;
    type P = u64;
    /// Exact: priorities up to 1e12 scaled by 2^16 are below 2^56, and 2^72 of them fit.
    type PSum = u128;
    const SUFFIX: &'static str = "_int";

    fn count(n: u64) -> u64 {
        n
    }
    fn window(pkts: f64) -> u64 {
        // Checked finite and in 0..=1e15 by the caller; held to the kernel's u32 snd_cwnd, so an
        // aggregate of windows fits u64 and a share's product u128.
        (pkts.floor() as u64).min(MAX_INT_WINDOW_PKTS)
    }
    fn pkts(w: u64) -> f64 {
        w as f64
    }
    fn priority(p: f64) -> Result<u64, Error> {
        if p >= MIN_INT_PRIORITY {
            Ok((p * PRIORITY_SCALE as f64).round() as u64)
        } else {
            Err(Error::InvalidValue {
                field: "priority",
                value: p,
                expected: "a priority >= 1/65536 in the integer window mode (priorities are kept in units of 2^-16)",
            })
        }
    }
    fn priority_f64(p: u64) -> f64 {
        p as f64 / PRIORITY_SCALE as f64
    }
    fn psum_add(s: &mut u128, p: u64) {
        *s += u128::from(p);
    }
    fn psum_sub(s: &mut u128, p: u64) {
        *s -= u128::from(p);
    }
    fn psum_f64(s: &u128) -> f64 {
        *s as f64 / PRIORITY_SCALE as f64
    }
    fn psum_settle<I: IntoIterator<Item = u64>>(_: &mut u128, _: impl FnOnce() -> I) {}
    fn psum_of<I: IntoIterator<Item = u64>>(values: I) -> u128 {
        values.into_iter().map(u128::from).sum()
    }
    fn share(p: u64, sum: u64, sum_p: &u128) -> u64 {
        if *sum_p == 0 {
            return 0;
        }
        // Rounded to the nearest packet, halves up (see the module comment for why not floored).
        // p <= sum_p, so the quotient is at most sum; u128 holds the product (< 2^64 * 2^56).
        ((u128::from(sum) * u128::from(p) + *sum_p / 2) / *sum_p).min(u128::from(sum)) as u64
    }
    fn scale(w: u64, num: u64, den: u64) -> u64 {
        (u128::from(w) * u128::from(num) / u128::from(den)) as u64
    }
    fn reduce(sum: u64, ssthresh: u64, told: u64) -> u64 {
        // beta = ssthresh / told when that is in [1/2, 1): compared without dividing.
        let r = if told >= 4 && ssthresh > 0 && ssthresh < told && 2 * ssthresh >= told {
            Int::scale(sum, ssthresh, told)
        } else {
            sum / 2
        };
        // At least a packet: an aggregate ssthresh of 0 would read as "no loss yet" (ccc.rs),
        // where the float mode's halving never reaches 0.
        r.max(sum.min(1))
    }
    fn double(w: u64) -> u64 {
        w.saturating_mul(2)
    }
    fn add(a: u64, b: u64) -> u64 {
        a.saturating_add(b)
    }
}

pub(crate) fn max<W: PartialOrd>(a: W, b: W) -> W {
    if b > a {
        b
    } else {
        a
    }
}

pub(crate) fn min<W: PartialOrd>(a: W, b: W) -> W {
    if b < a {
        b
    } else {
        a
    }
}

/// The smallest window a coupler assigns (see [`super::MIN_CWND_PKTS`]).
pub(crate) fn min_cwnd<A: Arith>() -> A::W {
    A::count(1)
}

/// The smallest ssthresh a coupler assigns (see [`super::MIN_SSTHRESH_PKTS`]).
pub(crate) fn min_ssthresh<A: Arith>() -> A::W {
    A::count(2)
}

/// An UPDATE's inputs in the coupler's arithmetic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Report<A: Arith> {
    pub cwnd: A::W,
    pub ssthresh: A::W,
    pub in_flight: A::W,
}

impl<A: Arith> Report<A> {
    pub fn of(u: &TcpUpdate) -> Self {
        Report {
            cwnd: A::window(u.cwnd_pkts),
            ssthresh: A::window(u.ssthresh_pkts),
            in_flight: A::window(u.in_flight_pkts),
        }
    }
}

/// See [`super::allowance`].
pub(crate) fn allowance<A: Arith>(r: &Report<A>, max_burst: A::W) -> A::W {
    max(max(r.cwnd, r.in_flight + max_burst), min_cwnd::<A>())
}

/// See [`super::bounded`].
pub(crate) fn bounded<A: Arith>(target: A::W, ssthresh: A::W, allowed: A::W) -> (A::W, A::W, bool) {
    let target = max(target, min_cwnd::<A>());
    let cwnd = min(target, allowed);
    if is_behind::<A>(cwnd, target) {
        (cwnd, max(ssthresh, target), true)
    } else {
        (cwnd, ssthresh, false)
    }
}

/// See [`super::is_behind`].
pub(crate) fn is_behind<A: Arith>(cwnd: A::W, share: A::W) -> bool {
    // max(share, 1) - 1 >= 0: no underflow in the integer mode.
    cwnd < max(share, min_cwnd::<A>()) - min_cwnd::<A>()
}

/// A connection's share of the aggregate ssthresh, at least two packets.
pub(crate) fn ssthresh_share<A: Arith>(p: A::P, sum: A::W, sum_p: &A::PSum) -> A::W {
    max(A::share(p, sum, sum_p), min_ssthresh::<A>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_integer_mode_floors_windows_rounds_shares_and_scales_priorities() {
        assert_eq!(Int::window(10.9), 10);
        assert_eq!(Int::priority(1.0).unwrap(), 65536);
        assert_eq!(Int::priority(0.5).unwrap(), 32768);
        assert!(Int::priority(1e-6).is_err(), "below 2^-16");
        assert_eq!(Int::priority(1e12).unwrap(), 1e12 as u64 * 65536);
        let sum_p = Int::psum_of([65536, 131072]);
        assert_eq!(
            Int::share(65536, 31, &sum_p),
            10,
            "31 / 3 = 10.33, rounded down"
        );
        assert_eq!(
            Int::share(131072, 31, &sum_p),
            21,
            "62 / 3 = 20.67, rounded up"
        );
        assert_eq!(
            Int::share(65536, 3, &Int::psum_of([65536, 65536])),
            2,
            "1.5: halves up"
        );
        assert_eq!(
            Int::share(65536, 1, &Int::psum_of([65536, 65536, 65536])),
            0,
            "1/3 rounds to 0 (callers hold windows at 1)"
        );
        assert_eq!(
            Int::share(u64::MAX >> 8, u64::MAX >> 8, &u128::from(u64::MAX >> 8)),
            u64::MAX >> 8
        );
        // Reduction: NewReno's halving, CUBIC's 0.7, a flight-limited 0.27 taken as 1/2.
        assert_eq!(Int::reduce(100, 10, 20), 50);
        assert_eq!(Int::reduce(100, 14, 20), 70);
        assert_eq!(Int::reduce(100, 4, 15), 50);
        assert_eq!(Int::reduce(101, 1, 2), 50, "a window under 4: 1/2");
        assert_eq!(
            (Int::reduce(1, 1, 2), Int::reduce(0, 1, 2)),
            (1, 0),
            "never to 0 from 1"
        );
        assert!(Int::priority(1.0 / 65536.0).is_ok() && Int::priority(0.9 / 65536.0).is_err());
        assert_eq!(Int::window(1e15), u32::MAX as u64);
        assert_eq!(Int::add(u64::MAX - 1, 5), u64::MAX);
        assert_eq!(Float::reduce(100.0, 14.0, 20.0), 70.0);
        assert_eq!(Float::reduce(100.0, 4.0, 15.0), 50.0);
    }

    #[test]
    fn the_float_helpers_are_the_generic_ones() {
        let r = Report::<Float> {
            cwnd: 10.0,
            ssthresh: 20.0,
            in_flight: 12.0,
        };
        assert_eq!(allowance::<Float>(&r, 3.0), 15.0);
        assert_eq!(bounded::<Float>(30.0, 20.0, 15.0), (15.0, 30.0, true));
        assert_eq!(bounded::<Float>(15.5, 20.0, 15.0), (15.0, 20.0, false));
        assert!(!is_behind::<Int>(9, 10) && is_behind::<Int>(8, 10));
    }
}
