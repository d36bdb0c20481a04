//! The SACK scoreboard of RFC 6675: which bytes above the cumulative ACK the receiver has reported
//! (RFC 2018), which segments are deemed lost, the sender's estimate of data in flight (SetPipe),
//! and the next segment to send in loss recovery (NextSeg).

use crate::packet::SackBlock;

#[derive(Clone, Debug, Default)]
pub struct Scoreboard {
    /// SACKed byte ranges above the cumulative ACK, sorted and disjoint.
    ranges: Vec<(u64, u64)>,
}

impl Scoreboard {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// Adds reported blocks and forgets everything below `snd_una`.
    pub fn update(&mut self, snd_una: u64, blocks: &[SackBlock]) {
        for b in blocks {
            if b.end > b.start && b.end > snd_una {
                self.insert(b.start.max(snd_una), b.end);
            }
        }
        self.ranges.retain_mut(|r| {
            r.0 = r.0.max(snd_una);
            r.1 > snd_una
        });
    }

    fn insert(&mut self, start: u64, end: u64) {
        let (mut s, mut e) = (start, end);
        self.ranges.retain(|&(a, b)| {
            if b < s || a > e {
                true
            } else {
                s = s.min(a);
                e = e.max(b);
                false
            }
        });
        let pos = self.ranges.partition_point(|&(a, _)| a < s);
        self.ranges.insert(pos, (s, e));
    }

    /// The whole of `start..end` has been SACKed.
    pub fn is_sacked(&self, start: u64, end: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, b)| b <= start);
        self.ranges
            .get(i)
            .is_some_and(|&(a, b)| a <= start && b >= end)
    }

    /// The highest SACKed byte + 1 (0 if none).
    pub fn high_sacked(&self) -> u64 {
        self.ranges.last().map_or(0, |r| r.1)
    }

    /// SACKed bytes above `seq`.
    pub fn sacked_above(&self, seq: u64) -> u64 {
        self.ranges
            .iter()
            .filter(|r| r.1 > seq)
            .map(|r| r.1 - r.0.max(seq))
            .sum()
    }

    /// RFC 6675 IsLost for the segment starting at `seq`: more than (DupThresh - 1) * SMSS bytes
    /// SACKed above it.
    pub fn is_lost(&self, seq: u64, mss: u64, dupthresh: u32) -> bool {
        self.sacked_above(seq) > (dupthresh as u64 - 1) * mss
    }

    /// RFC 6675 SetPipe over `[snd_una, snd_max)` cut into `mss` segments: each segment neither
    /// SACKed nor lost counts once, and once more if it was retransmitted (below `high_rxt`).
    /// Returns the pipe in bytes and fills `lost` with the lost, unSACKed segments' starts.
    pub fn set_pipe(
        &self,
        snd_una: u64,
        snd_max: u64,
        high_rxt: u64,
        mss: u64,
        dupthresh: u32,
        lost: &mut Vec<u64>,
    ) -> u64 {
        lost.clear();
        let threshold = (dupthresh as u64 - 1) * mss;
        let mut pipe = 0;
        // One pass from the top segment down: `above` is the SACKed bytes above the segment, and
        // `ri` bounds the ranges that can still overlap it or the segments below.
        let (mut above, mut ri) = (0u64, self.ranges.len());
        let mut prev: Option<(u64, u64)> = None;
        for k in (0..(snd_max - snd_una).div_ceil(mss)).rev() {
            let start = snd_una + k * mss;
            let end = (start + mss).min(snd_max);
            if let Some((ps, pe)) = prev {
                above += self.sacked_within(ps, pe, &mut ri);
            }
            let sacked = self.is_sacked(start, end);
            let is_lost = !sacked && above > threshold;
            if !sacked && !is_lost {
                pipe += end - start;
            }
            if start < high_rxt {
                pipe += end - start;
            }
            if is_lost {
                lost.push(start);
            }
            prev = Some((start, end));
        }
        lost.reverse();
        pipe
    }

    /// SACKed bytes in `start..end`, for a caller walking down: ranges wholly at or above `start`
    /// are not needed again, so `ri` moves below them.
    fn sacked_within(&self, start: u64, end: u64, ri: &mut usize) -> u64 {
        let mut sum = 0;
        let mut j = *ri;
        while j > 0 && self.ranges[j - 1].1 > start {
            let (a, b) = self.ranges[j - 1];
            sum += b.min(end).saturating_sub(a.max(start));
            if a >= start {
                *ri = j - 1;
            }
            j -= 1;
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(start: u64, end: u64) -> SackBlock {
        SackBlock { start, end }
    }

    #[test]
    fn update_merges_and_trims() {
        let mut s = Scoreboard::default();
        s.update(0, &[b(300, 400), b(100, 200)]);
        s.update(0, &[b(200, 300)]);
        assert_eq!(s.ranges, vec![(100, 400)]);
        s.update(150, &[]);
        assert_eq!(s.ranges, vec![(150, 400)]);
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
    }

    #[test]
    fn set_pipe_counts_outstanding_unsacked_unlost_and_retransmitted() {
        // Segments of 100 bytes 0..1000; 0 and 2 lost, 1 and 3..6 SACKed, 7..9 outstanding.
        let mut s = Scoreboard::default();
        s.update(0, &[b(100, 200), b(300, 700)]);
        let mut lost = Vec::new();
        let pipe = s.set_pipe(0, 1000, 0, 100, 3, &mut lost);
        assert_eq!(lost, vec![0, 200]);
        assert_eq!(pipe, 300, "segments 7, 8, 9");
        let pipe = s.set_pipe(0, 1000, 100, 100, 3, &mut lost);
        assert_eq!(pipe, 400, "segment 0 was retransmitted");
    }

    #[test]
    fn set_pipe_agrees_with_is_lost_everywhere() {
        // Cross-check the single backward pass against IsLost per segment.
        let patterns: [&[(u64, u64)]; 4] = [
            &[(150, 250), (420, 777)],
            &[(0, 50), (300, 1000)],
            &[(980, 1000)],
            &[],
        ];
        for p in patterns {
            let mut s = Scoreboard::default();
            s.update(0, &p.iter().map(|&(a, c)| b(a, c)).collect::<Vec<_>>());
            let mut lost = Vec::new();
            let pipe = s.set_pipe(0, 1000, 0, 100, 3, &mut lost);
            let mut want_lost = Vec::new();
            let mut want_pipe = 0;
            for k in 0..10 {
                let (st, en) = (k * 100, k * 100 + 100);
                let sacked = s.is_sacked(st, en);
                let l = !sacked && s.sacked_above(en) > 200;
                if l {
                    want_lost.push(st);
                }
                if !sacked && !l {
                    want_pipe += 100;
                }
            }
            assert_eq!(lost, want_lost, "{p:?}");
            assert_eq!(pipe, want_pipe, "{p:?}");
        }
    }
}
