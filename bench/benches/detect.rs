//! Cost of the pair-wise detectors (issue 20, "Detector cost"): ns per observation of the
//! false-sharing detector (seed 000 sec. 4.1) in steady state, against a naive peer measured in the
//! same run on the same stream; ns per packet of SBD's per-flow statistics (RFC 8382 sec. 3.2) and
//! ns per grouping call (sec. 3.3.1) for 2 to 1,000 flows. `make bench-detect` runs this, then
//! `src/bin/detect_memory.rs` (memory per flow pair after 1e3, 1e5 and 1e7 observations), then
//! `bench/report_detect.py`.
//!
//! The stream (`macroflow_bench::stream`, shared with `detect_memory`): two flows of one macroflow
//! behind one FIFO bottleneck, AR(1) queueing delay, about 1 % bursty losses reported late by
//! `on_loss`, rare reordering between the flows; generated once from a seeded PCG32, then replayed
//! lap after lap, so the detector sees one endless, valid stream; the replay costs both contenders
//! the same few ns.
//!
//! The peer (`NaiveDetector`) is what a reader would write without the streaming design: reports
//! wait in a `BTreeMap` until every earlier sequence number is known; the delay test keeps its last
//! `window_samples` samples in a `VecDeque` and recomputes both directions' auto- and
//! cross-correlations from scratch (two-pass Pearson) on every sample; each loss test keeps its
//! trials in a `VecDeque` and recounts them on every trial; the out-of-order test keeps its
//! occasion times in a `VecDeque`. The interval arithmetic (Wilson, Fisher, the pooled z) is the
//! library's own (`falseshare::stats`), so the ratio measures the streaming design only. Before
//! measuring, the peer's correlations, trial counts and all four decisions are checked against the
//! detector's on the same prefix of the stream.

use coupling::falseshare::stats::{pooled_fisher, wilson_interval, z_two_sided, Estimate};
use coupling::falseshare::{Decision, FalseSharingConfig, FalseSharingDetector};
use coupling::sbd::{FlowStats, FlowSummary, SbdConfig, SbdGrouper};
use coupling::{FlowId, Instant};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use macroflow_bench::stream::{self, feed, Kind, Obs, Replay, A, B, SEED, TRACE_PKTS};
use rand::RngExt;
use std::collections::{BTreeMap, VecDeque};
use std::hint::black_box;

// ---------------------------------------------------------------------------------------------
// The peer: the same four tests without the streaming design

/// A packet in sending order (`owd` None: lost), or a sequence number nobody reported.
#[derive(Clone, Copy, Debug)]
enum NaiveOrdered {
    Packet {
        side: usize,
        seq: u64,
        owd: Option<i64>,
    },
    Gap,
}

#[derive(Clone, Copy, Debug)]
struct NaiveDelaySample {
    at: usize,
    prev_same: i64,
    prev_other: i64,
    owd: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NaivePending {
    None,
    AwaitingOther,
    Crossed(bool),
}

/// The detector's decision rule (disjoint intervals, `min_samples`).
fn naive_compare(auto: Option<Estimate>, cross: Option<Estimate>, min_samples: u64) -> Decision {
    match (auto, cross) {
        (Some(a), Some(c)) if a.samples >= min_samples && c.samples >= min_samples => {
            if c.above(&a) {
                Decision::Share
            } else if c.below(&a) {
                Decision::NoShare
            } else {
                Decision::Inconclusive
            }
        }
        _ => Decision::Inconclusive,
    }
}

/// A loss-correlation test whose window is a `VecDeque` of trials, recounted on every trial.
struct NaiveLossTest {
    symmetric: bool,
    z: f64,
    min_samples: u64,
    window: usize,
    pending: [NaivePending; 2],
    /// (auto lost, cross lost) per trial, oldest first.
    trials: VecDeque<(bool, bool)>,
    decision: Decision,
}

impl NaiveLossTest {
    fn on_ordered(&mut self, ev: NaiveOrdered) {
        let (side, lost) = match ev {
            NaiveOrdered::Gap => {
                self.pending = [NaivePending::None; 2];
                return;
            }
            NaiveOrdered::Packet { side, owd, .. } => (side, owd.is_none()),
        };
        if self.pending[1 - side] == NaivePending::AwaitingOther {
            self.pending[1 - side] = NaivePending::Crossed(lost);
        }
        if let NaivePending::Crossed(cross_lost) =
            std::mem::replace(&mut self.pending[side], NaivePending::None)
        {
            if self.trials.len() == self.window {
                self.trials.pop_front();
            }
            self.trials.push_back((lost, cross_lost));
            let n = self.trials.len() as u64;
            let auto_lost = self.trials.iter().filter(|t| t.0).count() as u64;
            let cross_lost = self.trials.iter().filter(|t| t.1).count() as u64;
            self.decision = naive_compare(
                wilson_interval(auto_lost, n, self.z),
                wilson_interval(cross_lost, n, self.z),
                self.min_samples,
            );
        }
        if lost && (self.symmetric || side == 0) {
            self.pending[side] = NaivePending::AwaitingOther;
        }
    }

    fn counts(&self) -> (u64, u64, u64) {
        (
            self.trials.len() as u64,
            self.trials.iter().filter(|t| t.0).count() as u64,
            self.trials.iter().filter(|t| t.1).count() as u64,
        )
    }
}

/// One direction's correlations: (samples, auto r, cross r).
type NaiveDirection = (u64, Option<f64>, Option<f64>);

struct NaiveDetector {
    flows: [FlowId; 2],
    reorder_window: u64,
    /// Reports waiting for every earlier sequence number: side and delay (None: lost).
    waiting: BTreeMap<u64, (usize, Option<i64>)>,
    /// The lowest sequence number not yet handed on.
    next_seq: Option<u64>,
    // The delay test.
    delay_z: f64,
    delay_min_samples: u64,
    delay_window: usize,
    last: [Option<(u64, Option<i64>)>; 2],
    samples: VecDeque<NaiveDelaySample>,
    delay_decision: Decision,
    // The asymmetric and symmetric loss tests.
    loss: [NaiveLossTest; 2],
    // The out-of-order test.
    extent_pkts: u64,
    occasion_gap_ns: u64,
    horizon_ns: u64,
    min_occasions: usize,
    now_ns: u64,
    highest: [Option<u64>; 2],
    occasions: VecDeque<u64>,
    ooo_decision: Decision,
}

impl NaiveDetector {
    fn new(cfg: &FalseSharingConfig, a: FlowId, b: FlowId) -> Self {
        let loss = |symmetric: bool| {
            let c = if symmetric {
                cfg.symmetric_loss
            } else {
                cfg.asymmetric_loss
            };
            NaiveLossTest {
                symmetric,
                z: z_two_sided(c.confidence),
                min_samples: c.min_samples,
                window: c.window_samples,
                pending: [NaivePending::None; 2],
                trials: VecDeque::new(),
                decision: Decision::Inconclusive,
            }
        };
        NaiveDetector {
            flows: [a, b],
            reorder_window: cfg.reorder_window_pkts as u64,
            waiting: BTreeMap::new(),
            next_seq: None,
            delay_z: z_two_sided(cfg.delay.confidence),
            delay_min_samples: cfg.delay.min_samples,
            delay_window: cfg.delay.window_samples,
            last: [None; 2],
            samples: VecDeque::new(),
            delay_decision: Decision::Inconclusive,
            loss: [loss(false), loss(true)],
            extent_pkts: cfg.out_of_order.extent_pkts,
            occasion_gap_ns: cfg.out_of_order.occasion_gap.as_nanos(),
            horizon_ns: cfg.out_of_order.horizon.as_nanos(),
            min_occasions: cfg.out_of_order.min_occasions as usize,
            now_ns: 0,
            highest: [None; 2],
            occasions: VecDeque::new(),
            ooo_decision: Decision::Inconclusive,
        }
    }

    #[inline(never)]
    fn observe(&mut self, o: Obs) {
        let side = usize::from(o.flow == self.flows[1]);
        match o.kind {
            Kind::Arrival { owd_ns } => {
                if self.next_seq.is_some_and(|next| o.seq < next) {
                    // Already handed on: only the out-of-order test sees a late arrival.
                    self.arrival(o.t_ns, side, o.seq);
                    return;
                }
                self.admit(o.seq);
                if let Some((_, Some(_))) = self.waiting.get(&o.seq) {
                    // A copy of a packet already received.
                    self.advance(o.t_ns);
                    return;
                }
                self.waiting.insert(o.seq, (side, Some(owd_ns)));
                self.arrival(o.t_ns, side, o.seq);
            }
            Kind::Loss => {
                self.advance(o.t_ns);
                if self.next_seq.is_some_and(|next| o.seq < next) {
                    return;
                }
                self.admit(o.seq);
                // An arrival wins over a loss report.
                self.waiting.entry(o.seq).or_insert((side, None));
            }
        }
        self.drain();
    }

    /// Hands on the numbers that fall more than the reorder window behind `seq`.
    fn admit(&mut self, seq: u64) {
        let mut next_seq = *self.next_seq.get_or_insert(seq);
        while seq - next_seq >= self.reorder_window {
            let ev = match self.waiting.remove(&next_seq) {
                Some((side, owd)) => NaiveOrdered::Packet {
                    side,
                    seq: next_seq,
                    owd,
                },
                None => NaiveOrdered::Gap,
            };
            next_seq += 1;
            self.dispatch(ev);
        }
        self.next_seq = Some(next_seq);
    }

    /// Hands on every report whose earlier numbers are all known.
    fn drain(&mut self) {
        let Some(mut next) = self.next_seq else {
            return;
        };
        while let Some((side, owd)) = self.waiting.remove(&next) {
            self.dispatch(NaiveOrdered::Packet {
                side,
                seq: next,
                owd,
            });
            next += 1;
        }
        self.next_seq = Some(next);
    }

    fn dispatch(&mut self, ev: NaiveOrdered) {
        for t in &mut self.loss {
            t.on_ordered(ev);
        }
        let (side, seq, owd) = match ev {
            NaiveOrdered::Gap => {
                self.last = [None; 2];
                return;
            }
            NaiveOrdered::Packet { side, seq, owd } => (side, seq, owd),
        };
        if let (Some((s_seq, s_owd)), Some((o_seq, o_owd))) = (self.last[side], self.last[1 - side])
        {
            if o_seq > s_seq {
                if let (Some(prev_same), Some(prev_other), Some(owd)) = (s_owd, o_owd, owd) {
                    if self.samples.len() == self.delay_window {
                        self.samples.pop_front();
                    }
                    self.samples.push_back(NaiveDelaySample {
                        at: side,
                        prev_same,
                        prev_other,
                        owd,
                    });
                    self.delay_decision = self.delay_decision_from_scratch();
                }
            }
        }
        self.last[side] = Some((seq, owd));
    }

    /// Both directions' auto and cross Pearson correlations over the whole window, two-pass.
    fn correlations(&self) -> [NaiveDirection; 2] {
        let mut n = [0u64; 2];
        let mut sum = [[0.0f64; 3]; 2];
        for s in &self.samples {
            n[s.at] += 1;
            sum[s.at][0] += s.prev_same as f64;
            sum[s.at][1] += s.prev_other as f64;
            sum[s.at][2] += s.owd as f64;
        }
        let mean = [0, 1].map(|d| sum[d].map(|x| x / n[d].max(1) as f64));
        // [sxx auto, sxx cross, syy, sxy auto, sxy cross]
        let mut c = [[0.0f64; 5]; 2];
        for s in &self.samples {
            let m = &mean[s.at];
            let (xa, xc, y) = (
                s.prev_same as f64 - m[0],
                s.prev_other as f64 - m[1],
                s.owd as f64 - m[2],
            );
            let c = &mut c[s.at];
            c[0] += xa * xa;
            c[1] += xc * xc;
            c[2] += y * y;
            c[3] += xa * y;
            c[4] += xc * y;
        }
        [0, 1].map(|d| {
            let r = |sxy: f64, sxx: f64| {
                (n[d] >= 2 && sxx > 0.0 && c[d][2] > 0.0)
                    .then(|| (sxy / (sxx.sqrt() * c[d][2].sqrt())).clamp(-1.0, 1.0))
            };
            (n[d], r(c[d][3], c[d][0]), r(c[d][4], c[d][1]))
        })
    }

    fn delay_decision_from_scratch(&self) -> Decision {
        let dirs = self.correlations();
        let mut auto = [(f64::NAN, 0); 2];
        let mut cross = [(f64::NAN, 0); 2];
        for (i, &(n, a, c)) in dirs.iter().enumerate() {
            if let (Some(a), Some(c)) = (a, c) {
                auto[i] = (a, n);
                cross[i] = (c, n);
            }
        }
        naive_compare(
            pooled_fisher(&auto, self.delay_z),
            pooled_fisher(&cross, self.delay_z),
            self.delay_min_samples,
        )
    }

    /// The out-of-order test: an arrival, in arrival order.
    fn arrival(&mut self, t_ns: u64, side: usize, seq: u64) {
        self.now_ns = self.now_ns.max(t_ns);
        if self.highest[1 - side].is_some_and(|h| h > seq && h - seq > self.extent_pkts) {
            let new_occasion = self
                .occasions
                .back()
                .is_none_or(|&last| t_ns.saturating_sub(last) > self.occasion_gap_ns);
            if new_occasion {
                self.occasions.push_back(t_ns);
            }
        }
        let h = &mut self.highest[side];
        *h = Some(h.map_or(seq, |h| h.max(seq)));
        self.advance(t_ns);
    }

    fn advance(&mut self, t_ns: u64) {
        self.now_ns = self.now_ns.max(t_ns);
        while self
            .occasions
            .front()
            .is_some_and(|&t| self.now_ns.saturating_sub(t) > self.horizon_ns)
        {
            self.occasions.pop_front();
        }
        self.ooo_decision = if self.occasions.len() >= self.min_occasions {
            Decision::NoShare
        } else {
            Decision::Inconclusive
        };
    }
}

/// Panics unless the peer computed what the detector did on the same stream prefix.
fn check_peer_agrees(d: &FalseSharingDetector, p: &NaiveDetector) {
    let ev = d.decisions();
    for (i, (dir, naive)) in ev.delay.directions.iter().zip(p.correlations()).enumerate() {
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-9,
            (None, None) => true,
            _ => false,
        };
        assert!(
            dir.samples == naive.0 && close(dir.auto_r, naive.1) && close(dir.cross_r, naive.2),
            "delay direction {i}: detector {dir:?}, peer {naive:?}"
        );
    }
    assert_eq!(ev.delay.decision, p.delay_decision, "delay decision");
    for (e, t) in [&ev.asymmetric_loss, &ev.symmetric_loss]
        .into_iter()
        .zip(&p.loss)
    {
        assert_eq!(
            (e.trials, e.auto_lost, e.cross_lost),
            t.counts(),
            "{:?} loss trials",
            e.kind
        );
        assert_eq!(e.decision, t.decision, "{:?} loss decision", e.kind);
    }
    assert_eq!(ev.out_of_order.decision, p.ooo_decision, "out-of-order");
}

// ---------------------------------------------------------------------------------------------
// The benchmarks

/// Observations fed before measuring: enough to fill the delay window (2048 samples) and both
/// loss windows (1024 trials, about 0.35 % of packets for the asymmetric test).
const WARMUP_OBS: u64 = 600_000;

fn falseshare(c: &mut Criterion) {
    let cfg = FalseSharingConfig::default();
    let mut det = FalseSharingDetector::new(cfg, A, B, Instant::ZERO).unwrap();
    let mut peer = NaiveDetector::new(&cfg, A, B);
    let mut det_feed = Replay::new(stream::trace(TRACE_PKTS, SEED));
    for (i, o) in (1..=WARMUP_OBS).zip(&mut det_feed) {
        feed(&mut det, o);
        peer.observe(o);
        if i % 100_000 == 0 {
            check_peer_agrees(&det, &peer);
        }
    }
    // The peer goes on from the same place in the stream.
    let mut peer_feed = det_feed.clone();
    let m = det.memory();
    assert_eq!(m.delay_samples, m.delay_capacity, "steady state: {m:?}");
    assert_eq!(m.asymmetric_loss_trials, m.asymmetric_loss_capacity);
    assert_eq!(m.symmetric_loss_trials, m.symmetric_loss_capacity);
    let ev = det.decisions();
    println!(
        "falseshare stream after {WARMUP_OBS} observations: {ev}; delay samples taken at {} of {} \
         positions; reordered packets {} on {} occasions; {:?}",
        ev.delay.counters.samples,
        ev.delay.counters.positions,
        ev.out_of_order.reordered_pkts,
        ev.out_of_order.occasions,
        det.counters()
    );

    let mut group = c.benchmark_group("falseshare_on_packet");
    group.throughput(Throughput::Elements(1));
    group.bench_function("detector", |b| {
        b.iter(|| feed(black_box(&mut det), det_feed.next().unwrap()))
    });
    group.bench_function("naive_peer", |b| {
        b.iter(|| black_box(&mut peer).observe(peer_feed.next().unwrap()))
    });
    group.finish();
}

/// Per packet of one flow's RFC 8382 statistics, at 35 and 3,500 packets per T interval (100 and
/// 10,000 packets per second with T = 350 ms): the O(N) work when an interval closes is shared by
/// fewer packets at the low rate.
fn sbd_on_packet(c: &mut Criterion) {
    let cfg = SbdConfig::default();
    let tr: &Vec<Option<i64>> = &stream::sbd_flow(SEED).take(1 << 16).collect();
    let mut group = c.benchmark_group("sbd_on_packet");
    group.throughput(Throughput::Elements(1));
    for ppi in [35u64, 3_500] {
        let spacing = cfg.t.as_nanos() / ppi;
        let mut f = FlowStats::new(cfg, Instant::ZERO).unwrap();
        let mut i = 0u64;
        let mut step = move |f: &mut FlowStats| {
            let now = Instant::from_nanos(i * spacing);
            match tr[(i % tr.len() as u64) as usize] {
                Some(owd) => f.on_packet(now, owd),
                None => f.on_loss(now, 1),
            }
            .unwrap();
            i += 1;
        };
        // 100 intervals: the history ring (N = 50) is full.
        for _ in 0..100 * ppi {
            step(&mut f);
        }
        assert_eq!(f.history_len(), f.history_capacity());
        group.bench_with_input(BenchmarkId::from_parameter(ppi), &ppi, |b, _| {
            b.iter(|| step(black_box(&mut f)))
        });
    }
    group.finish();
}

/// Queueing delay in ms of a bottleneck whose queue is high (and slowly rising) for the fraction
/// `full` of its period and nearly empty for the rest (as in tests/sbd.rs): congested flows.
fn queue_ms(t_ms: u64, period_ms: u64, full: f64, q_max_ms: f64) -> f64 {
    let x = (t_ms % period_ms) as f64 / period_ms as f64;
    if x < full {
        q_max_ms * (0.7 + 0.3 * x / full)
    } else {
        q_max_ms * 0.1
    }
}

/// The summaries of `n` flows after 220 T intervals: five flows per bottleneck (each bottleneck's
/// period, fill and depth drawn from a PCG32), every tenth flow behind no bottleneck.
fn sbd_summaries(n: usize) -> Vec<(FlowId, FlowSummary)> {
    let cfg = SbdConfig::default();
    let bottlenecks = n.div_ceil(5);
    let mut rng = stream::rng(SEED);
    let params: Vec<(u64, f64, f64)> = (0..bottlenecks)
        .map(|_| {
            (
                rng.random_range(1_000..5_000u64),
                rng.random_range(0.55..0.85),
                rng.random_range(10.0..60.0),
            )
        })
        .collect();
    let end_ms = 220 * cfg.t.as_nanos() / 1_000_000;
    (0..n)
        .map(|i| {
            let mut f = FlowStats::new(cfg, Instant::ZERO).unwrap();
            let (period, full, q_max) = params[i / 5];
            let prop_ms = 10.0 + (i % 13) as f64;
            let offset = (i % 10) as u64;
            for tick in 0..end_ms / 10 {
                let t = tick * 10 + offset;
                let q = if i % 10 == 9 {
                    if tick % 20 == 0 {
                        5.0
                    } else {
                        0.0
                    }
                } else {
                    queue_ms(t, period, full, q_max)
                };
                let noise = rng.random_range(-500_000..=500_000i64);
                f.on_packet(
                    Instant::from_millis(t),
                    ((prop_ms + q) * 1e6) as i64 + noise,
                )
                .unwrap();
            }
            f.advance(Instant::from_millis(end_ms + 10)).unwrap();
            (FlowId(i as u64), f.summary())
        })
        .collect()
}

/// One grouping call (RFC 8382 sec. 3.3.1) for 2 to 1,000 flows: sorts, so O(N log N).
fn sbd_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("sbd_group");
    for n in [2usize, 10, 100, 1_000] {
        let entries = sbd_summaries(n);
        let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
        let r = g.group(&entries).unwrap();
        assert!(r.insufficient_data.is_empty(), "{r:?}");
        println!(
            "sbd_group {n} flows: {} groups, {} congested, {} not congested",
            r.groups.len(),
            r.congested.len(),
            r.not_congested.len()
        );
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(g.group(black_box(&entries)).unwrap()))
        });
    }
    group.finish();
}

fn detect(c: &mut Criterion) {
    falseshare(c);
    sbd_on_packet(c);
    sbd_group(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = detect
}
criterion_main!(benches);
