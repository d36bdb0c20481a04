//! A single-rate token-bucket marker in front of another queue.
//!
//! Specification: RFC 2697 (srTCM), color-blind mode, with the committed bucket only (an excess
//! burst size of zero, so a packet is green or red, never yellow): the bucket holds up to
//! `bucket_bytes` (CBS) tokens, starts full (RFC 2697 sec. 3: `Tc(0) = CBS`), and fills at
//! `rate_bps / 8` tokens per second (CIR). A packet of `B` bytes arriving when `Tc >= B` is green
//! and takes `B` tokens; otherwise it is red and takes none. Green is color 0 (in profile) and red
//! color 1 (out of profile), the colors RIO expects (Clark & Fang 1998 use the same "profile
//! meter" to tag In and Out packets).
//!
//! Tokens are kept exactly, in integer bit-nanoseconds, so marking is deterministic and free of
//! rounding drift. The marker meters every packet the queue is offered; a packet the engine sends
//! straight away because its link was idle is never offered to the queue, so it neither takes
//! tokens nor gets a color (its color stays what the packet carries).

use super::{QItem, Queue};
use crate::error::SimError;
use crate::rng::SimRng;
use coupling::Instant;

const NANOS: u128 = 1_000_000_000;

/// Colors arrivals by a token bucket, then offers them to `inner` (RFC 2697, see module docs).
#[derive(Debug)]
pub struct TokenBucketMarker {
    rate_bps: u64,
    /// Bucket depth, bit-nanoseconds (bytes * 8 * 1e9).
    capacity: u128,
    /// Tokens, bit-nanoseconds.
    tokens: u128,
    last: Instant,
    inner: Box<dyn Queue>,
}

impl TokenBucketMarker {
    /// `name` is the parameter path used in errors (`link[0].queue.rate_bps`).
    pub fn new(
        rate_bps: u64,
        bucket_bytes: u64,
        inner: Box<dyn Queue>,
        name: &str,
    ) -> Result<Self, SimError> {
        if rate_bps == 0 {
            return Err(SimError::invalid(
                format!("{name}.rate_bps"),
                0,
                "a committed rate > 0 bit/s",
            ));
        }
        if bucket_bytes == 0 {
            return Err(SimError::invalid(
                format!("{name}.bucket_bytes"),
                0,
                "a bucket depth > 0 bytes",
            ));
        }
        let capacity = bucket_bytes as u128 * 8 * NANOS;
        Ok(TokenBucketMarker {
            rate_bps,
            capacity,
            tokens: capacity,
            last: Instant::ZERO,
            inner,
        })
    }

    /// Tokens in the bucket at the last arrival, bytes (rounded down).
    pub fn tokens_bytes(&self) -> u64 {
        (self.tokens / (8 * NANOS)) as u64
    }

    /// Meters a packet of `size_bytes` arriving at `now`: 0 if it conforms, 1 if not.
    pub fn color(&mut self, size_bytes: u32, now: Instant) -> u8 {
        if now > self.last {
            let dt = now.saturating_since(self.last).as_nanos() as u128;
            self.tokens = (self.tokens + dt * self.rate_bps as u128).min(self.capacity);
            self.last = now;
        }
        let cost = size_bytes as u128 * 8 * NANOS;
        if self.tokens >= cost {
            self.tokens -= cost;
            0
        } else {
            1
        }
    }
}

impl Queue for TokenBucketMarker {
    fn enqueue(&mut self, mut item: QItem, now: Instant, rng: &mut SimRng) -> Option<QItem> {
        item.color = self.color(item.size_bytes, now);
        self.inner.enqueue(item, now, rng)
    }

    fn dequeue(&mut self, now: Instant) -> Option<QItem> {
        self.inner.dequeue(now)
    }

    fn len_pkts(&self) -> usize {
        self.inner.len_pkts()
    }

    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::QueueConfig;
    use super::*;
    use crate::packet::PacketId;
    use crate::rng::seeded;
    use coupling::Duration;

    fn item(i: u32, size: u32) -> QItem {
        QItem {
            id: PacketId(i),
            size_bytes: size,
            flow: 0,
            dscp: 10,
            // The marker overwrites whatever color the packet came with.
            color: 7,
        }
    }

    fn marker(rate_bps: u64, bucket_bytes: u64) -> Box<dyn Queue> {
        QueueConfig::TokenBucketMarker {
            rate_bps,
            bucket_bytes,
            inner: Box::new(QueueConfig::drop_tail_pkts(1_000_000)),
        }
        .build("q")
        .unwrap()
    }

    /// Offers `n` packets of `size` bytes every `gap`, returns the bytes colored 0 and 1.
    fn offer(q: &mut dyn Queue, n: u32, size: u32, gap: Duration) -> [u64; 2] {
        let mut rng = seeded(1);
        let mut now = Instant::ZERO;
        let mut bytes = [0u64; 2];
        for i in 0..n {
            assert_eq!(q.enqueue(item(i, size), now, &mut rng), None);
            let out = q.dequeue(now).unwrap();
            assert_eq!(out.id, PacketId(i));
            bytes[out.color as usize] += size as u64;
            now = now + gap;
        }
        bytes
    }

    #[test]
    fn conforming_traffic_is_all_green() {
        // 1000-byte packets every 10 ms are 0.8 Mb/s, under the committed 1 Mb/s.
        let mut q = marker(1_000_000, 1500);
        let bytes = offer(q.as_mut(), 1000, 1000, Duration::from_millis(10));
        assert_eq!(bytes, [1_000_000, 0]);
    }

    #[test]
    fn excess_is_red_at_the_committed_rate() {
        // 2 Mb/s offered for 10 s against 1 Mb/s committed and a 3000-byte bucket: green is the
        // full bucket plus 10 s of tokens, 3000 + 1_250_000 bytes, the rest red.
        let mut q = marker(1_000_000, 3000);
        let bytes = offer(q.as_mut(), 2500, 1000, Duration::from_millis(4));
        let green_max = 3000 + 125_000 * 10;
        assert!(
            (green_max - 1000..=green_max).contains(&bytes[0]),
            "{bytes:?}"
        );
        assert_eq!(bytes[0] + bytes[1], 2_500_000);
        // In the long run green is the committed rate, so about half the bytes.
        assert!((bytes[0] as f64 / 2_500_000.0 - 0.5).abs() < 0.01);
    }

    #[test]
    fn a_burst_gets_the_bucket_and_no_more() {
        let mut m = TokenBucketMarker::new(
            8_000, // 1000 bytes per second
            3000,
            QueueConfig::drop_tail_pkts(10).build("q").unwrap(),
            "q",
        )
        .unwrap();
        let t = Instant::from_secs(5); // a full bucket does not grow
        assert_eq!([0, 0, 0, 1].map(|_| m.color(1000, t)), [0, 0, 0, 1]);
        assert_eq!(m.tokens_bytes(), 0);
        // 0.5 s later: 500 bytes of tokens, not enough for 1000; 1 s later: enough.
        assert_eq!(m.color(1000, Instant::from_millis(5500)), 1);
        assert_eq!(m.color(1000, Instant::from_millis(6000)), 0);
        assert_eq!(m.color(400, Instant::from_millis(6400)), 0);
    }

    #[test]
    fn the_marker_feeds_rio_which_drops_red_first() {
        use super::super::{RedThresholds, RioConfig};
        use crate::net::queue::Limit;
        let rio = RioConfig::new(
            Limit::Packets(200),
            10_000_000,
            RedThresholds {
                min_th_pkts: 20.0,
                max_th_pkts: 40.0,
                max_p: 0.02,
            },
            RedThresholds::NS2,
        );
        let mut q = QueueConfig::TokenBucketMarker {
            rate_bps: 4_000_000,
            bucket_bytes: 10_000,
            inner: Box::new(QueueConfig::Rio(rio)),
        }
        .build("q")
        .unwrap();
        // 10 Mb/s offered into a 8 Mb/s link (4 of 5 served), 4 Mb/s committed.
        let mut rng = seeded(3);
        let mut now = Instant::ZERO;
        let (mut sent, mut dropped) = ([0u32; 2], [0u32; 2]);
        for i in 0..50_000u32 {
            if let Some(d) = q.enqueue(item(i, 1000), now, &mut rng) {
                // The dropped item carries the color the marker gave it.
                dropped[d.color as usize] += 1;
            }
            if i % 5 != 4 {
                if let Some(out) = q.dequeue(now) {
                    sent[out.color as usize] += 1;
                }
            }
            now = now + Duration::from_micros(800);
        }
        // 40% of the offered packets are green, and RIO takes the fifth that must go from the
        // red ones only.
        while let Some(out) = q.dequeue(now) {
            sent[out.color as usize] += 1;
        }
        let green = sent[0] + dropped[0];
        assert!((20_000..=20_010).contains(&green), "{sent:?} {dropped:?}");
        assert_eq!(dropped[0], 0, "{sent:?} {dropped:?}");
        assert!(dropped[1] > 9_000, "{sent:?} {dropped:?}");
    }

    #[test]
    fn invalid_marker_parameters_name_the_parameter() {
        let bad = |rate_bps, bucket_bytes, inner: QueueConfig, want: &str| {
            let e = QueueConfig::TokenBucketMarker {
                rate_bps,
                bucket_bytes,
                inner: Box::new(inner),
            }
            .build("link[4].queue")
            .unwrap_err();
            assert!(e.to_string().contains(&format!("invalid {want}:")), "{e}");
        };
        let ok = QueueConfig::drop_tail_pkts(10);
        bad(0, 1500, ok.clone(), "link[4].queue.rate_bps");
        bad(1_000, 0, ok.clone(), "link[4].queue.bucket_bytes");
        bad(
            1_000,
            1500,
            QueueConfig::drop_tail_pkts(0),
            "link[4].queue.inner.limit_pkts",
        );
    }
}
