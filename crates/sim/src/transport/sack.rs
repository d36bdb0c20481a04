//! The SACK scoreboard of RFC 6675: the byte ranges above the cumulative ACK the receiver has
//! reported (RFC 2018), which bytes are deemed lost (IsLost), the sender's estimate of the data in
//! flight (SetPipe), and the next hole to retransmit (NextSeg rule 1).
//!
//! IsLost is monotone (more SACKed bytes lie above a lower sequence number), so "lost" is every
//! unSACKed byte below one boundary, [`Scoreboard::lost_below`], found from the top few ranges.
//! Retransmitted segments not yet SACKed or acknowledged are kept as a set (Linux's
//! `retrans_out`), so SetPipe is O(1) after `lost_below` and no query walks the window: a run with
//! thousands of holes stays fast.
//!
//! SetPipe differs from RFC 6675's octet loop in one respect: the second count is of octets that
//! were retransmitted and are still neither SACKed nor acknowledged, not of every unSACKed octet
//! below HighRxt. The two agree when retransmissions walk the holes in order, as NextSeg does; the
//! set is also right when they do not.

use crate::packet::SackBlock;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    /// SACKed byte ranges above the cumulative ACK: start -> end, disjoint, not adjacent.
    ranges: BTreeMap<u64, u64>,
    /// Bytes in `ranges`.
    total: u64,
    /// Retransmitted segments (start -> end) neither SACKed nor acknowledged since.
    retx: BTreeMap<u64, u64>,
    retx_bytes: u64,
}

impl Scoreboard {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Forgets the retransmissions (after a timeout or at the end of recovery); SACK information is
    /// kept.
    pub fn clear_retransmissions(&mut self) {
        self.retx.clear();
        self.retx_bytes = 0;
    }

    /// Records a retransmission of `start..end`.
    pub fn on_retransmit(&mut self, start: u64, end: u64) {
        if let Some(old) = self.retx.insert(start, end) {
            self.retx_bytes -= old - start;
        }
        self.retx_bytes += end - start;
    }

    /// Bytes retransmitted and neither SACKed nor acknowledged since.
    pub fn retransmitted_in_flight(&self) -> u64 {
        self.retx_bytes
    }

    /// Adds reported blocks and forgets everything below `snd_una`.
    pub fn update(&mut self, snd_una: u64, blocks: &[SackBlock]) {
        for b in blocks {
            if b.end > b.start && b.end > snd_una {
                let (start, end) = (b.start.max(snd_una), b.end);
                self.total += insert_range(&mut self.ranges, start, end);
                // Retransmitted segments now SACKed have left the network.
                let gone: Vec<u64> = self
                    .retx
                    .range(start..end)
                    .filter(|(_, &e)| e <= end)
                    .map(|(&s, _)| s)
                    .collect();
                for s in gone {
                    let e = self.retx.remove(&s).expect("present");
                    self.retx_bytes -= e - s;
                }
            }
        }
        while let Some((&a, &b)) = self.ranges.first_key_value() {
            if a >= snd_una {
                break;
            }
            self.ranges.remove(&a);
            if b > snd_una {
                self.total -= snd_una - a;
                self.ranges.insert(snd_una, b);
                break;
            }
            self.total -= b - a;
        }
        while let Some((&s, &e)) = self.retx.first_key_value() {
            if s >= snd_una {
                break;
            }
            self.retx.remove(&s);
            self.retx_bytes -= e - s;
            if e > snd_una {
                self.retx.insert(snd_una, e);
                self.retx_bytes += e - snd_una;
                break;
            }
        }
    }

    /// The whole of `start..end` has been SACKed.
    pub fn is_sacked(&self, start: u64, end: u64) -> bool {
        self.ranges
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &b)| b >= end)
    }

    /// The highest SACKed byte + 1 (0 if none).
    pub fn high_sacked(&self) -> u64 {
        self.ranges.last_key_value().map_or(0, |(_, &b)| b)
    }

    /// SACKed bytes in `start..end`.
    pub fn sacked_within(&self, start: u64, end: u64) -> u64 {
        if end <= start {
            return 0;
        }
        let first = self
            .ranges
            .range(..=start)
            .next_back()
            .map_or(start, |(&a, _)| a);
        self.ranges
            .range(first..end)
            .map(|(&a, &b)| b.min(end).saturating_sub(a.max(start)))
            .sum()
    }

    /// SACKed bytes above `seq`.
    pub fn sacked_above(&self, seq: u64) -> u64 {
        self.sacked_within(seq, u64::MAX)
    }

    /// RFC 6675 IsLost for the segment starting at `seq`: more than (DupThresh - 1) * SMSS bytes
    /// SACKed above it.
    pub fn is_lost(&self, seq: u64, mss: u64, dupthresh: u32) -> bool {
        seq < self.lost_below(mss, dupthresh).0
    }

    /// `(x, sacked)`: every unSACKed byte below `x` is lost (IsLost), none above it, and `sacked`
    /// bytes are SACKed above `x`. `x` is 0 when nothing is lost.
    pub fn lost_below(&self, mss: u64, dupthresh: u32) -> (u64, u64) {
        let threshold = (dupthresh as u64 - 1) * mss;
        let mut cum = 0;
        for (&a, &b) in self.ranges.iter().rev() {
            // For x in a..b, the bytes SACKed above x are cum + (b - x).
            if cum + (b - a) > threshold {
                return (b - (threshold - cum), threshold);
            }
            cum += b - a;
        }
        (0, self.total)
    }

    /// SetPipe (RFC 6675 sec. 4, see the module docs): unSACKed bytes of `snd_una..snd_max` not
    /// deemed lost, plus retransmitted bytes still in flight.
    pub fn pipe(&self, snd_una: u64, snd_max: u64, lost: (u64, u64)) -> u64 {
        let (x, sacked_above_x) = lost;
        let from = x.clamp(snd_una, snd_max);
        (snd_max - from).saturating_sub(sacked_above_x) + self.retx_bytes
    }

    /// The first unSACKed byte at or after `from` and below `below`.
    pub fn first_hole(&self, from: u64, below: u64) -> Option<u64> {
        let mut x = from;
        // A range covering `from` pushes it to the range's end (ranges are not adjacent).
        if let Some((_, &b)) = self.ranges.range(..=x).next_back() {
            if b > x {
                x = b;
            }
        }
        (x < below).then_some(x)
    }
}

/// Inserts `start..end` into disjoint ranges, merging overlapping and adjacent ones; returns the
/// number of bytes newly covered.
pub fn insert_range(ranges: &mut BTreeMap<u64, u64>, start: u64, end: u64) -> u64 {
    let (mut s, mut e) = (start, end);
    let mut merged = 0;
    if let Some((&a, &b)) = ranges.range(..=s).next_back() {
        if b >= s {
            s = a;
            e = e.max(b);
            merged += b - a;
            ranges.remove(&a);
        }
    }
    while let Some((&a, &b)) = ranges.range(s..).next() {
        if a > e {
            break;
        }
        e = e.max(b);
        merged += b - a;
        ranges.remove(&a);
    }
    ranges.insert(s, e);
    (e - s) - merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(start: u64, end: u64) -> SackBlock {
        SackBlock { start, end }
    }

    fn ranges(s: &Scoreboard) -> Vec<(u64, u64)> {
        s.ranges.iter().map(|(&a, &b)| (a, b)).collect()
    }

    #[test]
    fn update_merges_and_trims() {
        let mut s = Scoreboard::default();
        s.update(0, &[b(300, 400), b(100, 200)]);
        s.update(0, &[b(200, 300)]);
        assert_eq!(ranges(&s), vec![(100, 400)]);
        s.update(150, &[]);
        assert_eq!(ranges(&s), vec![(150, 400)]);
        assert!(s.is_sacked(200, 300) && !s.is_sacked(100, 200));
        assert_eq!(s.high_sacked(), 400);
    }

    #[test]
    fn is_lost_needs_three_segments_sacked_above() {
        let mut s = Scoreboard::default();
        s.update(0, &[b(100, 300)]);
        assert!(!s.is_lost(0, 100, 3));
        s.update(0, &[b(300, 400)]);
        assert!(s.is_lost(0, 100, 3));
        assert!(!s.is_lost(400, 100, 3), "nothing is SACKed above 400");
    }

    #[test]
    fn pipe_counts_outstanding_unsacked_unlost_and_retransmitted() {
        // Segments of 100 bytes 0..1000; 0 and 2 lost, 1 and 3..6 SACKed, 7..9 outstanding.
        let mut s = Scoreboard::default();
        s.update(0, &[b(100, 200), b(300, 700)]);
        let lost = s.lost_below(100, 3);
        assert!(s.is_lost(0, 100, 3) && s.is_lost(200, 100, 3) && !s.is_lost(700, 100, 3));
        assert_eq!(s.pipe(0, 1000, lost), 300, "segments 7, 8, 9");
        assert_eq!(s.first_hole(0, s.high_sacked()), Some(0));
        assert_eq!(s.first_hole(100, s.high_sacked()), Some(200));
        assert_eq!(s.first_hole(300, s.high_sacked()), None);
        s.on_retransmit(0, 100);
        assert_eq!(s.pipe(0, 1000, lost), 400, "segment 0 was retransmitted");
        s.on_retransmit(200, 300);
        s.update(0, &[b(200, 300)]);
        assert_eq!(
            s.pipe(0, 1000, s.lost_below(100, 3)),
            400,
            "a retransmitted then SACKed segment left the pipe"
        );
        s.update(100, &[]);
        assert_eq!(s.retransmitted_in_flight(), 0, "acknowledged");
    }

    proptest! {
        /// The B-tree answers agree with a byte-by-byte reading of RFC 6675's definitions.
        #[test]
        fn agrees_with_the_rfc_definitions(blocks in prop::collection::vec((0u64..40, 1u64..6), 0..12), high_rxt in 0u64..40) {
            let mss = 10;
            let mut s = Scoreboard::default();
            let mut sacked = [false; 400];
            for (seg, len) in blocks {
                let (a, e) = (seg * mss, ((seg + len) * mss).min(400));
                s.update(0, &[b(a, e)]);
                for x in a..e { sacked[x as usize] = true; }
            }
            let lost = s.lost_below(mss, 3);
            for seg in 0..high_rxt {
                let (a, e) = (seg * mss, seg * mss + mss);
                if !s.is_sacked(a, e) {
                    s.on_retransmit(a, e);
                }
            }
            let mut pipe = 0;
            for x in 0..400u64 {
                let seg_start = x - x % mss;
                let seg_above = sacked[(seg_start as usize)..].iter().filter(|&&v| v).count() as u64;
                if sacked[x as usize] { continue; }
                prop_assert_eq!(s.is_lost(seg_start, mss, 3), seg_above > 2 * mss, "x {}", x);
                if seg_start >= lost.0 { pipe += 1; }
                if x < high_rxt * mss { pipe += 1; }
            }
            prop_assert_eq!(s.pipe(0, 400, lost), pipe);
            let total: u64 = s.ranges.iter().map(|(&a, &b)| b - a).sum();
            prop_assert_eq!(s.total, total);
        }
    }
}
