//! What a run measures: per-flow and per-link summaries, and time series sampled at a fixed
//! interval. Everything is plain data (structs of numbers) so it crosses into Python as columns.

use crate::engine::PacketCounts;
use crate::net::Link;
use coupling::tcp::TcpState;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    pub t_ns: u64,
    pub flow: u32,
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
    pub state: TcpState,
    pub delivered_bytes: u64,
    pub srtt_s: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueSample {
    pub t_ns: u64,
    pub link: u32,
    pub pkts: u32,
    pub bytes: u64,
}

/// What happened to a packet (the optional per-packet trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEventKind {
    /// Queued at a link (or sent straight away if the link was idle).
    Enqueue,
    /// Dropped by the link's queue.
    Drop,
    /// Serialization onto the link started.
    Transmit,
    /// Reached its destination node.
    Deliver,
}

impl PacketEventKind {
    pub fn name(self) -> &'static str {
        match self {
            PacketEventKind::Enqueue => "enqueue",
            PacketEventKind::Drop => "drop",
            PacketEventKind::Transmit => "transmit",
            PacketEventKind::Deliver => "deliver",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PacketEvent {
    pub t_ns: u64,
    pub kind: PacketEventKind,
    /// The link (enqueue, drop, transmit) or `u32::MAX` (deliver).
    pub link: u32,
    pub flow: u32,
    pub packet: crate::packet::PacketKind,
    pub seq: u64,
    pub ack: u64,
    pub size_bytes: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlowSummary {
    pub flow: u32,
    pub src: String,
    pub dst: String,
    pub cc: &'static str,
    pub start_s: f64,
    /// Flow completion time, for finite flows that completed.
    pub fct_s: Option<f64>,
    pub delivered_bytes: u64,
    /// Delivered bytes over the time the flow was active.
    pub goodput_bps: f64,
    pub data_pkts_sent: u64,
    pub retransmits: u64,
    /// Data segments the network dropped (queues, random loss).
    pub lost_pkts: u64,
    pub timeouts: u64,
    /// The largest burst of the run: data packets (new or retransmitted) the sender emitted at
    /// one simulated instant (see [`BurstStats`]).
    pub max_burst_pkts: u64,
    /// Bursts by size: `burst_hist[k]` counts the bursts in bucket `k` of [`burst_bucket`].
    pub burst_hist: [u64; BURST_BUCKETS],
    pub fast_recoveries: u64,
    pub mean_rtt_s: f64,
    pub data_pkts_received: u64,
}

/// The number of burst-size buckets: bucket `k` holds bursts of `2^k ..= 2^(k+1) - 1` packets for
/// `k` in `0..=9`, and the last bucket (`k = 10`) every burst of 1024 packets or more.
///
/// | k | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 |
/// |---|---|---|---|---|---|---|---|---|---|---|---|
/// | burst (packets) | 1 | 2-3 | 4-7 | 8-15 | 16-31 | 32-63 | 64-127 | 128-255 | 256-511 | 512-1023 | >= 1024 |
pub const BURST_BUCKETS: usize = 11;

/// The bucket of a burst of `pkts` packets: `floor(log2(pkts))`, capped at `BURST_BUCKETS - 1`
/// (the open-ended last bucket). A burst has at least one packet; 0 counts as 1.
pub fn burst_bucket(pkts: u64) -> usize {
    (pkts.max(1).ilog2() as usize).min(BURST_BUCKETS - 1)
}

/// The smallest burst, in packets, that bucket `k` holds (`2^k`): 1, 2, 4, ..., 1024.
pub fn burst_bucket_floor(k: usize) -> u64 {
    1 << k.min(BURST_BUCKETS - 1)
}

/// A TCP sender's bursts: the data packets (new or retransmitted) one flow's sender emits back to
/// back at one simulated instant form one burst, however many calls emitted them (an ACK's
/// retransmission and the new data after it, a coupler's handover, a timeout's go-back-N); packets
/// at different instants are different bursts. Packets leave in bursts because every handler
/// hands all it sends at `now` to the network at once (the engine's outbox).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstStats {
    /// The largest burst, in packets (0: none yet).
    pub max_pkts: u64,
    /// Bursts by size bucket ([`burst_bucket`]).
    pub hist: [u64; BURST_BUCKETS],
}

impl BurstStats {
    /// Counts one burst of `pkts` packets (nothing for 0).
    pub fn record(&mut self, pkts: u64) {
        if pkts == 0 {
            return;
        }
        self.max_pkts = self.max_pkts.max(pkts);
        self.hist[burst_bucket(pkts)] += 1;
    }

    /// The number of bursts counted.
    pub fn bursts(&self) -> u64 {
        self.hist.iter().sum()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MediaSample {
    pub t_ns: u64,
    pub flow: u32,
    /// The rate the pacer uses (after coupling).
    pub rate_bps: f64,
    /// The rate the controller itself computed.
    pub cc_rate_bps: f64,
    pub received_bytes: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MediaSummary {
    pub flow: u32,
    pub controller: &'static str,
    pub src: String,
    pub dst: String,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub received_pkts: u64,
    pub received_bytes: u64,
    pub goodput_bps: f64,
    /// Mean one-way delay of delivered packets.
    pub mean_owd_s: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UdpSummary {
    pub flow: u32,
    pub src: String,
    pub dst: String,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub received_pkts: u64,
    pub received_bytes: u64,
    /// Received bytes over the time since the flow started.
    pub throughput_bps: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LinkSummary {
    pub link: u32,
    pub from: String,
    pub to: String,
    pub rate_bps: u64,
    pub offered_pkts: u64,
    pub dropped_pkts: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// Fraction of the run the link was transmitting.
    pub utilization: f64,
    /// Dropped over offered packets.
    pub loss_ratio: f64,
    /// Time-average queue length.
    pub mean_queue_pkts: f64,
    pub mean_queue_bytes: f64,
    pub max_queue_pkts: usize,
}

impl LinkSummary {
    pub(crate) fn new(link: u32, from: &str, to: &str, l: &Link, duration_s: f64) -> Self {
        let s = &l.stats;
        let dur_ns = duration_s * 1e9;
        LinkSummary {
            link,
            from: from.to_string(),
            to: to.to_string(),
            rate_bps: l.rate_bps,
            offered_pkts: s.offered_pkts,
            dropped_pkts: s.dropped_pkts,
            tx_pkts: s.tx_pkts,
            tx_bytes: s.tx_bytes,
            utilization: if dur_ns > 0.0 {
                (s.busy_ns as f64 / dur_ns).min(1.0)
            } else {
                0.0
            },
            loss_ratio: if s.offered_pkts > 0 {
                s.dropped_pkts as f64 / s.offered_pkts as f64
            } else {
                0.0
            },
            mean_queue_pkts: if dur_ns > 0.0 {
                s.queue_integral_pkt_ns / dur_ns
            } else {
                0.0
            },
            mean_queue_bytes: if dur_ns > 0.0 {
                s.queue_integral_byte_ns / dur_ns
            } else {
                0.0
            },
            max_queue_pkts: s.max_queue_pkts,
        }
    }
}

/// The time series of a run, borrowed from the simulation ([`crate::Sim::time_series`]).
#[derive(Clone, Copy, Debug)]
pub struct TimeSeries<'a> {
    pub flow_samples: &'a [FlowSample],
    pub queue_samples: &'a [QueueSample],
    pub media_samples: &'a [MediaSample],
    pub detector_samples: &'a [DetectorSample],
}

/// A false-sharing test's metrics for a pair of a measured group's flows at a sampling instant
/// (seed 000 Fig. 5: the auto- and cross-correlation metrics with their confidence intervals).
/// For the out-of-order test `auto` is NaN and `cross` the occasions within its horizon.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorSample {
    pub t_ns: u64,
    pub group: u32,
    pub flow_a: u32,
    pub flow_b: u32,
    pub test: &'static str,
    pub auto: f64,
    pub auto_lo: f64,
    pub auto_hi: f64,
    pub cross: f64,
    pub cross_lo: f64,
    pub cross_hi: f64,
    /// Samples (trials, delay pairs, arrivals) the metrics rest on.
    pub samples: u64,
    pub decision: &'static str,
}

/// A change of one false-sharing test's answer for a pair of a measured group's flows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectionRow {
    pub group: u32,
    pub t_s: f64,
    pub flow_a: u32,
    pub flow_b: u32,
    pub test: &'static str,
    pub decision: &'static str,
    /// When the pair's detector started: detection times are `t_s - start_s`.
    pub start_s: f64,
}

/// A measured group's totals over the run (`transport::measured::MeasuredCounters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasuredSummary {
    pub group: u32,
    /// The kind of flows it measures: "tcp", "media" (detection only), or "none" (no member).
    pub members: &'static str,
    pub sent_pkts: u64,
    pub arrived_pkts: u64,
    pub dropped_pkts: u64,
    pub splits: u64,
    pub merges: u64,
    pub deferred: u64,
    pub detector_errors: u64,
    pub action_errors: u64,
    pub events_dropped: u64,
    /// What the pair detectors could not use (`falseshare::DetectorCounters`): sequence numbers
    /// never reported, reports after their number was finalized, arrivals beyond the record.
    pub unreported_pkts: u64,
    pub after_finalized: u64,
    pub beyond_record: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Results {
    pub duration_s: f64,
    pub flows: Vec<FlowSummary>,
    pub media_flows: Vec<MediaSummary>,
    pub media_samples: Vec<MediaSample>,
    pub udp_flows: Vec<UdpSummary>,
    pub links: Vec<LinkSummary>,
    pub flow_samples: Vec<FlowSample>,
    pub queue_samples: Vec<QueueSample>,
    /// The per-packet trace, if it was turned on.
    pub packet_events: Vec<PacketEvent>,
    pub detector_samples: Vec<DetectorSample>,
    /// Every change of a false-sharing test's answer in the measured groups, by group then time.
    pub detections: Vec<DetectionRow>,
    pub measured_groups: Vec<MeasuredSummary>,
    pub packets: PacketCounts,
    pub events: u64,
    /// When the time series stopped at `engine::MAX_SAMPLE_ROWS` rows (None: they did not).
    pub sampling_stopped_at_s: Option<f64>,
    /// Calls the couplers refused, by call (none are expected; a refused registration leaves the
    /// flow uncoupled, a refused UPDATE leaves the sender's own window).
    pub coupling_errors: crate::engine::CouplingErrors,
}

/// Jain's fairness index of `xs`: (sum x)^2 / (n * sum x^2); 1 is perfectly fair, 1/n maximally
/// unfair.
pub fn jain_index(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if n == 0.0 || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n * sq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_buckets_are_powers_of_two_with_an_open_last_bucket() {
        assert_eq!(burst_bucket(0), 0);
        assert_eq!(burst_bucket(1), 0);
        assert_eq!(burst_bucket(2), 1);
        assert_eq!(burst_bucket(3), 1);
        assert_eq!(burst_bucket(4), 2);
        assert_eq!(burst_bucket(10), 3);
        assert_eq!(burst_bucket(1023), 9);
        assert_eq!(burst_bucket(1024), 10);
        assert_eq!(burst_bucket(u64::MAX), 10);
        for k in 0..BURST_BUCKETS {
            let lo = burst_bucket_floor(k);
            assert_eq!(burst_bucket(lo), k);
            if k > 0 {
                assert_eq!(burst_bucket(lo - 1), k - 1);
            }
        }
        let mut b = BurstStats::default();
        for n in [0, 1, 3, 10, 2000] {
            b.record(n);
        }
        assert_eq!(b.max_pkts, 2000);
        assert_eq!(b.bursts(), 4);
        assert_eq!(b.hist, [1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[3.0, 3.0, 3.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}
