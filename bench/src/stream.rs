//! The synthetic observation streams of the detector benchmarks (`benches/detect.rs` and
//! `src/bin/detect_memory.rs`), defined once here.
//!
//! [`trace`] models two flows of one macroflow behind ONE FIFO bottleneck, 20,000 packets per
//! second between them, the flow of each macroflow sequence number chosen by a scheduler that
//! mostly alternates (runs of the same flow 30 % of the time). The queue is an AR(1) process around
//! 5 ms (per-packet coefficient 0.999, standard deviation 2 ms) with FIFO departures at least one
//! service time (40 us) apart, plus up to 20 us of jitter after the bottleneck. About 1 % of
//! packets are lost, in bursts (0.8 % after a received packet, 20 % after a lost one), each
//! reported four packet times after it would have arrived. About one packet in 100,000 (one every
//! 5 s) is held back 5 to 8 packet times: reordering between the flows beyond the out-of-order
//! test's extent of 3, too rare for its 10 occasions in 10 s. [`Replay`] repeats the trace without
//! end, shifting sequence numbers and times by one trace length per lap, so a detector sees one
//! endless, valid stream. [`sbd_flow`] is one flow's one-way delay for SBD's statistics.
//!
//! Every stream is drawn from a PCG32 seeded from a fixed number, so it is the same on every
//! machine and in every run, and both contenders of a comparison see exactly the same
//! observations.

use coupling::falseshare::{FalseSharingDetector, LossReport, Packet};
use coupling::{FlowId, Instant};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg32;

/// The macroflow's two flows.
pub const A: FlowId = FlowId(1);
pub const B: FlowId = FlowId(2);
/// The macroflow's packet spacing at the sender: 20,000 packets per second.
pub const SPACING_NS: u64 = 50_000;
/// Sequence numbers per lap of the replay (about 13 s of traffic).
pub const TRACE_PKTS: u64 = 1 << 18;
/// The seed the benchmarks use.
pub const SEED: u64 = 20;

/// The generator every stream is drawn from.
pub fn rng(seed: u64) -> Pcg32 {
    Pcg32::seed_from_u64(seed)
}

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Arrival { owd_ns: i64 },
    Loss,
}

/// One observation, in the order a detector is given them.
#[derive(Clone, Copy, Debug)]
pub struct Obs {
    pub t_ns: u64,
    pub flow: FlowId,
    pub seq: u64,
    pub kind: Kind,
}

/// `pkts` sequence numbers of the two-flow stream described in the module doc, in observation
/// order.
pub fn trace(pkts: u64, seed: u64) -> Vec<Obs> {
    const PROP_NS: u64 = 20_000_000;
    const MEAN_MS: f64 = 5.0;
    const SD_MS: f64 = 2.0;
    const PHI: f64 = 0.999;
    /// The bottleneck's time to send one packet (25,000 packets per second: 80 % load).
    const SERVICE_NS: u64 = 40_000;
    let innovation = SD_MS * (1.0 - PHI * PHI).sqrt();
    let mut rng = rng(seed);
    let mut out = Vec::with_capacity(pkts as usize);
    let (mut flow, mut q_ms, mut lost_prev, mut last_departure) = (A, MEAN_MS, false, 0u64);
    for seq in 0..pkts {
        let send = seq * SPACING_NS;
        let same_flow = rng.random_bool(0.3);
        if !same_flow {
            flow = if flow == A { B } else { A };
        }
        let z: f64 = rng.sample(StandardNormal);
        q_ms = (MEAN_MS + PHI * (q_ms - MEAN_MS) + innovation * z).max(0.0);
        let queued = send + PROP_NS + (q_ms * 1e6) as u64;
        let lost = rng.random_bool(if lost_prev { 0.2 } else { 0.008 });
        lost_prev = lost;
        if lost {
            // Dropped at the queue; found lost when three later packets have arrived.
            out.push(Obs {
                t_ns: queued + 4 * SPACING_NS,
                flow,
                seq,
                kind: Kind::Loss,
            });
            continue;
        }
        // FIFO: a packet leaves the bottleneck one service time after the one ahead of it, at the
        // earliest, so the jitter behind it (under a service time) cannot reorder the flows.
        let departure = queued.max(last_departure + SERVICE_NS);
        last_departure = departure;
        let mut arrival = departure + rng.random_range(0..20_000u64);
        if rng.random_bool(1e-5) {
            arrival += rng.random_range(5..=8u64) * SPACING_NS;
        }
        out.push(Obs {
            t_ns: arrival,
            flow,
            seq,
            kind: Kind::Arrival {
                owd_ns: (arrival - send) as i64,
            },
        });
    }
    out.sort_by_key(|o| (o.t_ns, o.seq));
    out
}

/// A trace of [`TRACE_PKTS`] sequence numbers replayed without end: each lap's sequence numbers
/// follow the previous lap's, and its times start 1 s after the previous lap's last observation.
/// The iterator never ends.
#[derive(Clone)]
pub struct Replay {
    obs: Vec<Obs>,
    i: usize,
    seq_offset: u64,
    t_offset: u64,
    t_span: u64,
}

impl Replay {
    pub fn new(obs: Vec<Obs>) -> Self {
        assert!(!obs.is_empty(), "nothing to replay");
        let t_span = obs.last().map_or(0, |o| o.t_ns) + 1_000_000_000;
        Replay {
            obs,
            i: 0,
            seq_offset: 0,
            t_offset: 0,
            t_span,
        }
    }
}

impl Iterator for Replay {
    type Item = Obs;

    #[inline]
    fn next(&mut self) -> Option<Obs> {
        let o = self.obs[self.i];
        let out = Obs {
            t_ns: o.t_ns + self.t_offset,
            seq: o.seq + self.seq_offset,
            ..o
        };
        self.i += 1;
        if self.i == self.obs.len() {
            self.i = 0;
            self.seq_offset += TRACE_PKTS;
            self.t_offset += self.t_span;
        }
        Some(out)
    }
}

/// Gives `o` to the detector: `on_packet` for an arrival, `on_loss` for a loss report.
#[inline]
pub fn feed(d: &mut FalseSharingDetector, o: Obs) {
    let now = Instant::from_nanos(o.t_ns);
    match o.kind {
        Kind::Arrival { owd_ns } => d.on_packet(now, Packet::new(o.flow, o.seq, owd_ns)),
        Kind::Loss => d.on_loss(now, LossReport::new(o.flow, o.seq)),
    }
    .unwrap();
}

/// One flow's packets for SBD's statistics, without end: the one-way delay in ns behind an AR(1)
/// queue around 5 ms (per-packet coefficient 0.99, standard deviation 2 ms) after 15 ms of
/// propagation, or None for the 1 % of packets lost (independently).
pub fn sbd_flow(seed: u64) -> impl Iterator<Item = Option<i64>> {
    const MEAN_MS: f64 = 5.0;
    const SD_MS: f64 = 2.0;
    const PHI: f64 = 0.99;
    let innovation = SD_MS * (1.0 - PHI * PHI).sqrt();
    let mut rng = rng(seed);
    let mut q_ms = MEAN_MS;
    std::iter::repeat_with(move || {
        let z: f64 = rng.sample(StandardNormal);
        q_ms = (MEAN_MS + PHI * (q_ms - MEAN_MS) + innovation * z).max(0.0);
        let lost = rng.random_bool(0.01);
        (!lost).then(|| 15_000_000 + (q_ms * 1e6) as i64)
    })
}
