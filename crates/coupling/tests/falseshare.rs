//! Detecting false sharing (seed 000 sec. 4): tests written from worked inputs with known answers.
//!
//! The statistics (Wilson and Fisher intervals, Pearson's r, the conditional loss probabilities,
//! the reordering occasions) are hand-computed for tiny series; each test's decision is checked on
//! synthetic traces whose answer is known by construction: two flows sampling ONE FIFO queue
//! (share) or two independent queues (no share), loss bursts hitting both flows or each alone, and
//! arrivals in send order through one FIFO or overtaking each other on different paths.

use coupling::falseshare::stats::{
    pooled_fisher, wilson_interval, z_two_sided, CorrelationSums, Estimate,
};
use coupling::falseshare::{
    Decision, Decisions, DelayCorrelationConfig, FalseSharingConfig, FalseSharingDetector,
    LossCorrelationConfig, LossReport, OutOfOrderConfig, Packet, MAX_DELAY_SPREAD_NS,
    MAX_MIN_OCCASIONS, MAX_REORDER_WINDOW_PKTS, MAX_WINDOW_SAMPLES,
};
use coupling::{Duration, Error, FlowId, Instant};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the allocations each thread makes: a test can check that the
/// detector allocates nothing after construction.
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    // Never fails while the thread lives; during its teardown there is nothing to count.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

/// Allocations made by this thread so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(|n| n.get())
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

const A: FlowId = FlowId(1);
const B: FlowId = FlowId(2);
const MS: u64 = 1_000_000;
/// z of a two-sided 90 % interval, Φ⁻¹(0.95).
const Z90: f64 = 1.644_853_626_951_472_2;

fn invalid_field(e: Error) -> &'static str {
    match e {
        Error::InvalidValue { field, .. } => field,
        other => panic!("expected InvalidValue, got {other:?}"),
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

fn detector(cfg: FalseSharingConfig) -> FalseSharingDetector {
    FalseSharingDetector::new(cfg, A, B, Instant::ZERO).unwrap()
}

/// A configuration whose correlation tests decide from a single sample: for hand-checked cases.
fn hand_config() -> FalseSharingConfig {
    let mut c = FalseSharingConfig::default();
    c.asymmetric_loss.min_samples = 1;
    c.symmetric_loss.min_samples = 1;
    c.delay.min_samples = 1;
    c
}

// ---------------------------------------------------------------------------------------------
// Configuration

/// The seed's values: 90 % confidence intervals for the loss and delay tests (sec. 4.1.2, last
/// paragraph), reordering by more than three packets on 10 or more occasions (sec. 4.1.3).
#[test]
fn default_config_is_the_seeds_and_is_valid() {
    let c = FalseSharingConfig::default();
    assert_eq!(c.asymmetric_loss.confidence, 0.9);
    assert_eq!(c.symmetric_loss.confidence, 0.9);
    assert_eq!(c.delay.confidence, 0.9);
    assert_eq!(c.out_of_order.extent_pkts, 3);
    assert_eq!(c.out_of_order.min_occasions, 10);
    // Our choices where the seed is silent (module doc).
    assert_eq!(c.out_of_order.occasion_gap, Duration::from_millis(500));
    assert_eq!(c.out_of_order.horizon, Duration::from_secs(10));
    assert_eq!(c.asymmetric_loss.min_samples, 10);
    assert_eq!(c.delay.min_samples, 10);
    assert_eq!(c.asymmetric_loss.window_samples, 1024);
    assert_eq!(c.delay.window_samples, 2048);
    assert_eq!(c.reorder_window_pkts, 256);
    assert_eq!(c.check(), Ok(()));
    assert_eq!(LossCorrelationConfig::default().check(), Ok(()));
    assert_eq!(DelayCorrelationConfig::default().check(), Ok(()));
    assert_eq!(OutOfOrderConfig::default().check(), Ok(()));
    // Fig. 11 varies one confidence level for every correlation test.
    let c99 = FalseSharingConfig::default().with_confidence(0.99);
    assert_eq!(
        (
            c99.asymmetric_loss.confidence,
            c99.symmetric_loss.confidence,
            c99.delay.confidence
        ),
        (0.99, 0.99, 0.99)
    );
}

/// Bad configurations are refused with the offending field named (qualified by the test it
/// belongs to in the combined config); the detector is not built.
#[test]
fn bad_configs_are_refused_naming_the_field() {
    let ok = FalseSharingConfig::default();
    let mut cases: Vec<(FalseSharingConfig, &str)> = Vec::new();
    for bad in [f64::NAN, 0.0, 1.0, -0.1, 1.5, f64::INFINITY] {
        let mut c = ok;
        c.delay.confidence = bad;
        cases.push((c, "delay.confidence"));
        let mut c = ok;
        c.asymmetric_loss.confidence = bad;
        cases.push((c, "asymmetric_loss.confidence"));
        let mut c = ok;
        c.symmetric_loss.confidence = bad;
        cases.push((c, "symmetric_loss.confidence"));
    }
    let mut c = ok;
    c.delay.window_samples = 0;
    cases.push((c, "delay.window_samples"));
    let mut c = ok;
    c.delay.window_samples = MAX_WINDOW_SAMPLES + 1;
    cases.push((c, "delay.window_samples"));
    let mut c = ok;
    c.symmetric_loss.window_samples = 0;
    cases.push((c, "symmetric_loss.window_samples"));
    let mut c = ok;
    c.asymmetric_loss.min_samples = 0;
    cases.push((c, "asymmetric_loss.min_samples"));
    let mut c = ok;
    c.delay.min_samples = 2049; // above the window: could never decide
    cases.push((c, "delay.min_samples"));
    let mut c = ok;
    c.reorder_window_pkts = 0;
    cases.push((c, "reorder_window_pkts"));
    let mut c = ok;
    c.reorder_window_pkts = MAX_REORDER_WINDOW_PKTS + 1;
    cases.push((c, "reorder_window_pkts"));
    let mut c = ok;
    c.out_of_order.min_occasions = 0;
    cases.push((c, "out_of_order.min_occasions"));
    let mut c = ok;
    c.out_of_order.min_occasions = MAX_MIN_OCCASIONS + 1;
    cases.push((c, "out_of_order.min_occasions"));
    // 10 occasions more than 500 ms apart span more than 4.5 s: a horizon of 4.5 s never fits them.
    let mut c = ok;
    c.out_of_order.horizon = Duration::from_millis(4_500);
    cases.push((c, "out_of_order.horizon"));
    let mut c = ok;
    c.out_of_order.min_occasions = 1;
    c.out_of_order.horizon = Duration::ZERO;
    cases.push((c, "out_of_order.horizon"));
    for (cfg, field) in cases {
        assert_eq!(invalid_field(cfg.check().unwrap_err()), field, "{cfg:?}");
        let e = FalseSharingDetector::new(cfg, A, B, Instant::ZERO).unwrap_err();
        assert_eq!(invalid_field(e), field);
    }
    // The sub-configs name their own fields unqualified.
    let bad = DelayCorrelationConfig {
        confidence: f64::NAN,
        ..DelayCorrelationConfig::default()
    };
    assert_eq!(invalid_field(bad.check().unwrap_err()), "confidence");
    let bad = OutOfOrderConfig {
        occasion_gap: Duration::from_secs(2),
        ..OutOfOrderConfig::default()
    };
    assert_eq!(invalid_field(bad.check().unwrap_err()), "horizon");
    // Just long enough is accepted.
    let edge = OutOfOrderConfig {
        horizon: Duration::from_millis(4_500) + Duration::from_nanos(1),
        ..OutOfOrderConfig::default()
    };
    assert_eq!(edge.check(), Ok(()));
    // One flow cannot be both halves of the pair.
    assert_eq!(
        FalseSharingDetector::new(ok, A, A, Instant::ZERO).unwrap_err(),
        Error::DuplicateFlow(A)
    );
}

// ---------------------------------------------------------------------------------------------
// The statistics, by hand

/// Wilson score interval, 3 losses in 10 trials at 90 %: p = 0.3, z² = 2.70554,
/// centre = (0.3 + z²/20) / (1 + z²/10) = 0.435277 / 1.270554 = 0.342587,
/// half = z / 1.270554 * sqrt(0.3*0.7/10 + z²/400) = 1.294594 * 0.166625 = 0.215711,
/// so [0.126877, 0.558300]. Zero successes pin the lower end at 0, all successes the upper at 1.
#[test]
fn wilson_interval_by_hand() {
    let z = z_two_sided(0.9);
    assert!(close(z, Z90, 1e-14), "{z}");
    let e = wilson_interval(3, 10, z).unwrap();
    assert_eq!((e.value, e.samples), (0.3, 10));
    assert!(close(e.lo, 0.126_876_583_903_197_9, 1e-12), "{e:?}");
    assert!(close(e.hi, 0.558_300_204_130_164_8, 1e-12), "{e:?}");
    let none = wilson_interval(0, 3, z).unwrap();
    assert_eq!(none.lo, 0.0);
    // Upper end z²/n / (1 + z²/n) = 0.901851 / 1.901851.
    assert!(close(none.hi, 0.474_195_574_157_512_6, 1e-12), "{none:?}");
    let all = wilson_interval(3, 3, z).unwrap();
    assert_eq!(all.hi, 1.0);
    assert!(close(all.lo, 1.0 - 0.474_195_574_157_512_6, 1e-12));
    assert_eq!(wilson_interval(0, 0, z), None);
}

/// Fisher's interval: r = 0.5 from n = 19 pairs at 90 %: atanh(0.5) = 0.549306,
/// se = 1/sqrt(16) = 0.25, z * se = 0.411213, tanh(0.138093) = 0.137222,
/// tanh(0.960520) = 0.744509. Pooled with r = 0.2 from n = 13 (weights 16 and 10):
/// zbar = (16 * 0.549306 + 10 * 0.202733) / 26 = 0.416011, se = 1/sqrt(26).
#[test]
fn fisher_interval_by_hand() {
    let e = pooled_fisher(&[(0.5, 19)], Z90).unwrap();
    assert!(close(e.value, 0.5, 1e-15));
    assert!(close(e.lo, 0.137_221_590_682_132_3, 1e-12), "{e:?}");
    assert!(close(e.hi, 0.744_508_524_527_527_4, 1e-12), "{e:?}");
    assert_eq!(e.samples, 19);
    let p = pooled_fisher(&[(0.5, 19), (0.2, 13)], Z90).unwrap();
    assert!(close(p.value, 0.393_562_582_396_773_8, 1e-12), "{p:?}");
    assert!(close(p.lo, 0.093_155_396_359_116_5, 1e-12), "{p:?}");
    assert!(close(p.hi, 0.628_293_089_368_548_4, 1e-12), "{p:?}");
    assert_eq!(p.samples, 32);
    // Groups with fewer than 4 pairs have no standard error and are skipped.
    assert_eq!(pooled_fisher(&[(0.5, 3)], Z90), None);
    assert_eq!(pooled_fisher(&[(0.5, 19), (0.9, 3)], Z90), Some(e));
}

/// Pearson's r from exact integer sums: x = 1..5, y = 2, 4, 5, 4, 5: centred sums Sxy = 6,
/// Sxx = 10, Syy = 6, r = 6 / sqrt(60) = 0.774597. Removing a pair restores the sums exactly.
#[test]
fn pearson_by_hand() {
    let mut s = CorrelationSums::default();
    for (x, y) in [(1, 2), (2, 4), (3, 5), (4, 4), (5, 5)] {
        s.add(x, y);
    }
    assert!(close(s.pearson().unwrap(), 6.0 / 60f64.sqrt(), 1e-15));
    let before = s;
    s.add(100, -100);
    s.remove(100, -100);
    assert_eq!(s, before);
    // A constant series has no correlation.
    let mut flat = CorrelationSums::default();
    for y in [1, 2, 3] {
        flat.add(7, y);
    }
    assert_eq!(flat.pearson(), None);
}

/// The delay-correlation test on a tiny interleaved series (seed sec. 4.1.2): A and B alternate,
/// a0 b0 a1 b1 ... a5 b5 (sequence numbers 0..11), OWD in ns:
/// A: 10, 12, 11, 15, 14, 18; B: 20, 21, 25, 24, 27, 26.
///
/// Samples at A's packets a1..a5 pair each with the previous A packet (auto) and the B packet
/// just before it (cross); samples at B's packets likewise:
/// - at A, auto (a_{k-1}, a_k): Sxy = 11, Sxx = 17.2, Syy = 30 -> r = 0.484248;
/// - at A, cross (b_{k-1}, a_k): Sxy = 30, Sxx = 33.2, Syy = 30 -> r = 0.950586;
/// - at B, auto (b_{k-1}, b_k): Sxy = 16.8, Sxx = 33.2, Syy = 21.2 -> r = 0.633246;
/// - at B, cross (a_k, b_k): Sxy = 11, Sxx = 30, Syy = 21.2 -> r = 0.436178.
///
/// Pooled over the two directions with Fisher weights n - 3 = 2 each: auto 0.563309
/// [-0.182685, 0.897671], cross 0.818635 [0.318735, 0.962225]: they overlap, inconclusive.
#[test]
fn delay_statistics_by_hand_through_the_detector() {
    let a = [10i64, 12, 11, 15, 14, 18];
    let b = [20i64, 21, 25, 24, 27, 26];
    let mut d = detector(hand_config());
    let mut seq = 0;
    for k in 0..6 {
        for (flow, owd) in [(A, a[k]), (B, b[k])] {
            d.on_packet(Instant::from_millis(seq), Packet::new(flow, seq, owd))
                .unwrap();
            seq += 1;
        }
    }
    let e = d.decisions().delay;
    let [at_a, at_b] = e.directions;
    assert_eq!((at_a.samples, at_b.samples), (5, 5));
    assert!(close(at_a.auto_r.unwrap(), 0.484_247_998_479_093_1, 1e-12));
    assert!(close(at_a.cross_r.unwrap(), 0.950_586_375_786_716_8, 1e-12));
    assert!(close(at_b.auto_r.unwrap(), 0.633_245_787_450_964_3, 1e-12));
    assert!(close(at_b.cross_r.unwrap(), 0.436_178_372_144_979_3, 1e-12));
    let (auto, cross) = (e.auto.unwrap(), e.cross.unwrap());
    assert!(
        close(auto.value, 0.563_309_319_214_412_2, 1e-12),
        "{auto:?}"
    );
    assert!(close(auto.lo, -0.182_685_268_942_749_06, 1e-12));
    assert!(close(auto.hi, 0.897_670_923_057_426, 1e-12));
    assert!(
        close(cross.value, 0.818_635_189_889_046_4, 1e-12),
        "{cross:?}"
    );
    assert!(close(cross.lo, 0.318_735_264_661_454_46, 1e-12));
    assert!(close(cross.hi, 0.962_224_922_076_572_6, 1e-12));
    assert_eq!((auto.samples, cross.samples), (10, 10));
    assert_eq!(e.decision, Decision::Inconclusive);
    // 12 positions: the first packet of each flow has no predecessor; the other 10 interleave.
    assert_eq!(e.counters.positions, 12);
    assert_eq!(e.counters.interleaved, 10);
    assert_eq!(e.counters.samples, 10);
}

/// The two loss-correlation tests on a hand-made sequence (seed sec. 4.1.1). In send order
/// (x = lost):
///
/// ```text
/// seq   0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
/// flow  A  B  A  B  A  B  A  A  B  A  B  A  B  A  B
/// lost        x  x           x  x        x  x  x
/// ```
///
/// Asymmetric (conditions on A's losses; auto = A's next packet, cross = the first B packet
/// after the loss, used only if it comes before A's next packet):
/// - A2: B3 lost, A4 not -> auto 0, cross 1;
/// - A6: A7 comes before any B -> not interleaved, no sample;
/// - A7: B8 not, A9 not -> auto 0, cross 0;
/// - A11: B12 lost, A13 not -> auto 0, cross 1.
///
/// So auto = 0/3, cross = 2/3. Symmetric adds the conditions on B's losses:
/// - B3: A4 not, B5 not -> auto 0, cross 0;
/// - B10: A11 lost, B12 lost -> auto 1, cross 1;
/// - B12: A13 not, B14 not -> auto 0, cross 0.
///
/// So auto = 1/6, cross = 3/6.
#[test]
fn loss_conditional_probabilities_by_hand() {
    let flows = [A, B, A, B, A, B, A, A, B, A, B, A, B, A, B];
    let lost = [2u64, 3, 6, 7, 10, 11, 12];
    let mut d = detector(hand_config());
    for (seq, flow) in flows.iter().enumerate() {
        let seq = seq as u64;
        let now = Instant::from_millis(seq);
        if lost.contains(&seq) {
            d.on_loss(now, LossReport::new(*flow, seq)).unwrap();
        } else {
            d.on_packet(now, Packet::new(*flow, seq, 1_000)).unwrap();
        }
    }
    let z = z_two_sided(0.9);
    let r = d.decisions();
    let asym = &r.asymmetric_loss;
    assert_eq!((asym.trials, asym.auto_lost, asym.cross_lost), (3, 0, 2));
    assert_eq!(asym.auto, wilson_interval(0, 3, z));
    assert_eq!(asym.cross, wilson_interval(2, 3, z));
    assert_eq!(asym.counters.conditions, 4);
    assert_eq!(asym.counters.not_interleaved, 1);
    let sym = &r.symmetric_loss;
    assert_eq!((sym.trials, sym.auto_lost, sym.cross_lost), (6, 1, 3));
    assert_eq!(sym.auto, wilson_interval(1, 6, z));
    assert_eq!(sym.cross, wilson_interval(3, 6, z));
    assert_eq!(sym.counters.conditions, 7);
    assert_eq!(sym.counters.not_interleaved, 1);
    // auto 0/3 is [0, 0.474], cross 2/3 is [0.254, 0.922]: they overlap, no decision yet.
    assert_eq!(asym.decision, Decision::Inconclusive);
    assert_eq!(sym.decision, Decision::Inconclusive);
}

/// The loss cross trial is the *first* packet of the other flow after the loss ("packet on Flow B
/// following a loss on Flow A", sec. 4.1.1), not the last one before the flow's next packet:
/// A lost, B received, B lost, A received gives cross 0 (B's first packet arrived), auto 0.
#[test]
fn loss_cross_trial_is_the_first_packet_after_the_loss() {
    let mut d = detector(hand_config());
    for (seq, (flow, lost)) in [(A, true), (B, false), (B, true), (A, false)]
        .into_iter()
        .enumerate()
    {
        let (seq, now) = (seq as u64, Instant::from_millis(seq as u64));
        if lost {
            d.on_loss(now, LossReport::new(flow, seq)).unwrap();
        } else {
            d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
        }
    }
    let e = d.decisions().asymmetric_loss;
    assert_eq!((e.trials, e.auto_lost, e.cross_lost), (1, 0, 0));
}

/// Losses reported late (after later packets arrived) give the same trials as losses reported in
/// order: the statistics follow the send order (sequence numbers), not the report order.
#[test]
fn late_loss_reports_give_the_same_trials() {
    let flows = [A, B, A, B, A, B, A, A, B, A, B, A, B, A, B];
    let lost = [2u64, 3, 6, 7, 10, 11, 12];
    let mut d = detector(hand_config());
    let mut t = 0;
    for (seq, flow) in flows.iter().enumerate() {
        let seq = seq as u64;
        t += 1;
        if !lost.contains(&seq) {
            d.on_packet(Instant::from_millis(t), Packet::new(*flow, seq, 1_000))
                .unwrap();
        }
    }
    // Losses detected afterwards, in reverse order.
    for &seq in lost.iter().rev() {
        t += 1;
        let flow = flows[seq as usize];
        d.on_loss(Instant::from_millis(t), LossReport::new(flow, seq))
            .unwrap();
    }
    let r = d.decisions();
    assert_eq!(
        (
            r.asymmetric_loss.trials,
            r.asymmetric_loss.auto_lost,
            r.asymmetric_loss.cross_lost
        ),
        (3, 0, 2)
    );
    assert_eq!(
        (
            r.symmetric_loss.trials,
            r.symmetric_loss.auto_lost,
            r.symmetric_loss.cross_lost
        ),
        (6, 1, 3)
    );
    assert_eq!(d.counters().finalized_pkts, 15);
    assert_eq!(d.counters().pending_pkts, 0);
}

// ---------------------------------------------------------------------------------------------
// Synthetic traces with known answers

/// A FIFO queue fed by random cross traffic, stepped once per 1 ms tick (Lindley's recursion):
/// q' = max(0, q + work - 1), work uniform in [0, 2 * load) ticks of service. q is the queueing
/// delay in ticks. It falls by at most one tick per tick, so packets leave in the order they
/// entered.
struct Queue {
    q: f64,
    load: f64,
    rng: Pcg64,
}

impl Queue {
    fn new(seed: u64, load: f64) -> Self {
        Queue {
            q: 0.0,
            load,
            rng: Pcg64::seed_from_u64(seed),
        }
    }
    fn step(&mut self) -> f64 {
        let work = self.rng.random_range(0.0..2.0 * self.load);
        self.q = (self.q + work - 1.0).max(0.0);
        self.q
    }
}

/// A loss process of short bursts, one state per tick: a burst starts with probability `p_start`
/// and, once started, goes on to the next tick with probability `p_continue`. Every packet sent
/// in a tick of a burst is lost.
struct Bursts {
    on: bool,
    p_start: f64,
    p_continue: f64,
    rng: Pcg64,
}

impl Bursts {
    fn new(seed: u64, p_start: f64, p_continue: f64) -> Self {
        Bursts {
            on: false,
            p_start,
            p_continue,
            rng: Pcg64::seed_from_u64(seed),
        }
    }
    fn step(&mut self) -> bool {
        let u: f64 = self.rng.random_range(0.0..1.0);
        self.on = if self.on {
            u < self.p_continue
        } else {
            u < self.p_start
        };
        self.on
    }
}

/// One observation of a trace, delivered in arrival order.
#[derive(Clone, Copy, Debug)]
enum Obs {
    Packet(Instant, Packet),
    Loss(Instant, LossReport),
}

#[derive(Clone, Copy, PartialEq)]
enum Paths {
    /// One FIFO queue for both flows, same propagation delay (shared bottleneck).
    Shared,
    /// One FIFO queue, but B's path adds `extra_ms` of propagation after it (seed Fig. 1(d)).
    SharedExtraDelay(u64),
    /// Two independent queues (no common bottleneck, seed Fig. 1(b)); B's path `extra_ms` longer.
    Independent(u64),
}

/// Losses: none, bursts shared by both flows, independent bursts per flow, or the semi-shared
/// case of seed Fig. 1(c): a shared burst process plus one that hits only B.
#[derive(Clone, Copy, PartialEq)]
enum Losses {
    None,
    Shared,
    Independent,
    SemiShared,
}

/// `ticks` ticks of 1 ms; A sends at even ticks and B at odd ones (the scheduler interleaves
/// them, seed sec. 4.1.1), so the packets' macroflow sequence number is the tick. OWD = path
/// propagation + queueing delay + measurement noise of +-50 us, with each flow's OWD off by its
/// own clock offset. Losses are reported 5 ms after the packet would have arrived.
fn trace(ticks: u64, paths: Paths, losses: Losses, seed: u64) -> Vec<Obs> {
    let tick = MS;
    let mut q1 = Queue::new(seed, 0.95);
    let mut q2 = Queue::new(seed + 1, 0.95);
    let mut shared = Bursts::new(seed + 2, 0.01, 0.6);
    let mut own_a = Bursts::new(seed + 3, 0.01, 0.6);
    let mut own_b = Bursts::new(seed + 4, 0.01, 0.6);
    let mut only_b = Bursts::new(seed + 5, 0.03, 0.85);
    let mut noise = Pcg64::seed_from_u64(seed + 6);
    let (offset_a, offset_b) = (3_000 * MS as i64, -70 * MS as i64);
    let mut out: Vec<(u64, Obs)> = Vec::new();
    for k in 0..ticks {
        let (qa, qb) = (q1.step(), q2.step());
        let (s, a_only, b_only, b_extra) =
            (shared.step(), own_a.step(), own_b.step(), only_b.step());
        let flow = if k % 2 == 0 { A } else { B };
        let is_a = flow == A;
        let (queue, extra_ms) = match paths {
            Paths::Shared => (qa, 0),
            Paths::SharedExtraDelay(x) => (qa, if is_a { 0 } else { x }),
            Paths::Independent(x) => {
                if is_a {
                    (qa, 0)
                } else {
                    (qb, x)
                }
            }
        };
        let lost = match losses {
            Losses::None => false,
            Losses::Shared => s,
            Losses::Independent => {
                if is_a {
                    a_only
                } else {
                    b_only
                }
            }
            Losses::SemiShared => s || (!is_a && b_extra),
        };
        let sent = k * tick;
        let true_owd = 10 * MS + extra_ms * MS + (queue * tick as f64) as u64;
        let arrival = sent + true_owd;
        let jitter = noise.random_range(-50_000i64..=50_000);
        if lost {
            let at = arrival + 5 * MS;
            out.push((
                at,
                Obs::Loss(Instant::from_nanos(at), LossReport::new(flow, k)),
            ));
        } else {
            let offset = if is_a { offset_a } else { offset_b };
            let owd = true_owd as i64 + jitter + offset;
            out.push((
                arrival,
                Obs::Packet(Instant::from_nanos(arrival), Packet::new(flow, k, owd)),
            ));
        }
    }
    // Deliver in arrival order; ties keep send order.
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, o)| o).collect()
}

fn feed(d: &mut FalseSharingDetector, obs: &[Obs]) {
    for o in obs {
        match *o {
            Obs::Packet(now, p) => d.on_packet(now, p).unwrap(),
            Obs::Loss(now, l) => d.on_loss(now, l).unwrap(),
        }
    }
}

fn run(cfg: FalseSharingConfig, obs: &[Obs]) -> FalseSharingDetector {
    let mut d = detector(cfg);
    feed(&mut d, obs);
    let end = match obs.last().unwrap() {
        Obs::Packet(t, _) | Obs::Loss(t, _) => *t,
    };
    d.flush(end).unwrap();
    d
}

/// Two flows through ONE FIFO queue: their delays are the same queue process sampled at
/// interleaved times, so a packet's delay correlates more with the other flow's packet sent just
/// before it (1 ms earlier) than with its own flow's previous packet (2 ms earlier): the
/// cross-correlation exceeds the auto-correlation and the test says share (seed sec. 4.1.2).
/// Arrivals keep send order, so the out-of-order test stays inconclusive (it never says share,
/// sec. 4.1.3).
#[test]
fn shared_fifo_queue_says_share() {
    let obs = trace(20_000, Paths::Shared, Losses::None, 1);
    let d = run(FalseSharingConfig::default(), &obs);
    let r = d.decisions();
    let (auto, cross) = (r.delay.auto.unwrap(), r.delay.cross.unwrap());
    assert!(cross.value > auto.value, "{:#?}", r.delay);
    assert_eq!(r.delay.decision, Decision::Share, "{:#?}", r.delay);
    assert!(r.delay.history.first_share_at.is_some());
    assert_eq!(
        r.delay.history.first_no_share_at, None,
        "never wrong on the way"
    );
    assert_eq!(r.out_of_order.decision, Decision::Inconclusive);
    assert_eq!(r.out_of_order.occasions, 0);
    assert_eq!(r.out_of_order.reordered_pkts, 0);
    // No losses: the loss tests have nothing to say.
    assert_eq!(r.asymmetric_loss.decision, Decision::Inconclusive);
    assert_eq!(r.symmetric_loss.trials, 0);
}

/// Two INDEPENDENT queues: a packet's delay correlates with its own flow's previous packet (the
/// same queue 2 ms earlier) but not with the other flow's: the cross-correlation falls below the
/// auto-correlation and the test says no share (seed sec. 4.1.2, Fig. 5(a)).
#[test]
fn independent_queues_say_no_share() {
    let obs = trace(20_000, Paths::Independent(0), Losses::None, 2);
    let d = run(FalseSharingConfig::default(), &obs);
    let r = d.decisions();
    assert_eq!(r.delay.decision, Decision::NoShare, "{:#?}", r.delay);
    let (auto, cross) = (r.delay.auto.unwrap(), r.delay.cross.unwrap());
    assert!(
        auto.value > 0.8 && cross.value < auto.value - 0.3,
        "{auto:?} {cross:?}"
    );
    assert!(r.delay.history.first_share_at.is_none());
    // Same propagation delay and a FIFO each: overtaking comes from the difference of the two
    // queues only. Each queue keeps its flow's order (it falls by at most 1 ms a tick, a flow
    // sends every 2 ms), so nothing is late within a flow; across the flows the queues at load
    // 0.95 differ by up to about 20 ms, and in this run packets are overtaken by up to 23 on
    // occasions enough for the out-of-order test to find the paths different too.
    let o = &r.out_of_order;
    assert_eq!(o.within_flow_late_pkts, 0, "{o:#?}");
    assert!(o.max_extent_pkts > 3 && o.reordered_pkts > 0, "{o:#?}");
    assert_eq!(o.decision, Decision::NoShare, "{o:#?}");
}

/// Loss bursts that hit both flows in the same short window: after a loss, the other flow's next
/// packet (1 ms later) is lost more often than the same flow's next packet (2 ms later), so both
/// loss tests find cross > auto and say share (seed sec. 4.1.1). Independent bursts per flow:
/// after a loss the other flow's next packet is lost only at the background rate, so cross < auto:
/// no share.
#[test]
fn shared_loss_bursts_say_share_independent_say_no_share() {
    let shared = run(
        FalseSharingConfig::default(),
        &trace(40_000, Paths::Shared, Losses::Shared, 3),
    )
    .decisions();
    for e in [&shared.asymmetric_loss, &shared.symmetric_loss] {
        let (auto, cross) = (e.auto.unwrap(), e.cross.unwrap());
        assert!(cross.value > auto.value, "{e:#?}");
        assert_eq!(e.decision, Decision::Share, "{e:#?}");
    }
    let independent = run(
        FalseSharingConfig::default(),
        &trace(40_000, Paths::Independent(0), Losses::Independent, 4),
    )
    .decisions();
    for e in [&independent.asymmetric_loss, &independent.symmetric_loss] {
        assert_eq!(e.decision, Decision::NoShare, "{e:#?}");
        assert!(e.cross.unwrap().value < 0.1, "{e:#?}");
    }
}

/// The semi-shared case (seed Fig. 1(c), Fig. 8): both flows cross a shared bottleneck, B also
/// crosses one of its own that drops only B's packets in longer bursts. Conditioning on A's
/// losses only, the asymmetric test sees just the shared bottleneck and says share; the symmetric
/// test also conditions on B's losses, where B's own bursts make the auto-correlation high and
/// the cross-correlation low, and says no share: "unlike the symmetric loss-correlation test,
/// which correctly identifies the false sharing, the asymmetric test can only identify the
/// single shared bottleneck" (sec. 4.2).
#[test]
fn semi_shared_losses_fool_only_the_asymmetric_test() {
    let r = run(
        FalseSharingConfig::default(),
        &trace(60_000, Paths::Shared, Losses::SemiShared, 5),
    )
    .decisions();
    assert_eq!(r.asymmetric_loss.decision, Decision::Share, "{r:#?}");
    assert_eq!(r.symmetric_loss.decision, Decision::NoShare, "{r:#?}");
    assert!(r.symmetric_loss.trials > r.asymmetric_loss.trials);
}

/// Different paths (seed sec. 4.1.3, Fig. 1(d)): B's path is 20 ms longer after the shared FIFO,
/// so every B packet is overtaken by the A packets sent in the 20 ms after it: the reordering is
/// persistent, and a new occasion begins at the first late arrival more than 500 ms after the
/// previous one began. Through one FIFO with equal propagation (the shared test above) nothing
/// is reordered.
///
/// What to expect follows from the trace's construction (queue q(k) after tick k's step grows by
/// less than 0.9 ms a tick and falls by at most 1): B's packet sent at s arrives at
/// s + 30 + q(s), after A's packet sent at s + 5 (at s + 15 + q(s + 5) < s + 19.5 + q(s)), so
/// each of B's 3000 packets is late but the last three (A sends nothing 5 ms after them). B's first (s = 1, q(1) < 1.8) arrives in [31, 32.8) ms
/// and begins occasion 1. B's packets are sent 2 ms apart, so B arrives at least every 3.8 ms and
/// each next occasion begins in (500, 503.8) ms after the previous: the 10th in
/// (31 + 9 * 500, 32.8 + 9 * 503.8) ms, the 12th before 5.58 s, a 13th not before 6.031 s (the
/// last B arrival is at 6.029 s plus its queue).
#[test]
fn overtaking_on_different_paths_says_no_share() {
    let obs = trace(6_000, Paths::SharedExtraDelay(20), Losses::None, 6);
    let d = run(FalseSharingConfig::default(), &obs);
    let r = d.decisions().out_of_order;
    assert_eq!(r.decision, Decision::NoShare, "{r:#?}");
    assert_eq!(r.reordered_pkts, 2_997, "{r:#?}");
    assert!(r.max_extent_pkts >= 19, "{r:#?}");
    assert!((12..=13).contains(&r.occasions), "{r:#?}");
    let t = d.out_of_order().detection_time(Decision::NoShare).unwrap();
    assert!(
        t > Duration::from_millis(4_531) && t < Duration::from_micros(4_567_000),
        "{t}"
    );
    // Two independent queues, B's path 20 ms longer (Fig. 1(b)): no share as well.
    let obs = trace(6_000, Paths::Independent(20), Losses::None, 6);
    let r = run(FalseSharingConfig::default(), &obs)
        .decisions()
        .out_of_order;
    assert_eq!(r.decision, Decision::NoShare, "{r:#?}");
}

/// Fully shared bottleneck, different RTTs (seed Fig. 1(d), Fig. 7(b)): one FIFO queue, B's path
/// 20 ms longer after it. The delay test sees the shared queue and says share; only the
/// out-of-order test reports the different delays, as no share.
#[test]
fn fully_shared_with_different_delays_only_the_order_test_objects() {
    let obs = trace(20_000, Paths::SharedExtraDelay(20), Losses::None, 7);
    let d = run(FalseSharingConfig::default(), &obs);
    let r = d.decisions();
    assert_eq!(r.delay.decision, Decision::Share, "{:#?}", r.delay);
    assert_eq!(r.out_of_order.decision, Decision::NoShare);
    assert_eq!(
        d.counters().after_finalized,
        0,
        "the reorder window held them all"
    );
}

// ---------------------------------------------------------------------------------------------
// The out-of-order test, by hand (sec. 4.1.3)

/// Reordering "by more than three packets": a packet counts when a packet of the other flow with
/// a sequence number more than 3 higher arrived before it. Late arrivals up to the occasion gap
/// (500 ms) after an occasion began belong to it, whatever arrived in between; the next late
/// arrival begins a new one. The test says no share at the 10th occasion within the horizon
/// (10 s), goes back to inconclusive when the first leaves it, and never says share.
#[test]
fn out_of_order_occasions_by_hand() {
    let mut d = detector(FalseSharingConfig::default());
    let arrive = |d: &mut FalseSharingDetector, ms: u64, flow: FlowId, seq: u64| {
        d.on_packet(Instant::from_millis(ms), Packet::new(flow, seq, 0))
            .unwrap();
    };
    for (ms, s) in [(0, 0), (1, 2), (2, 4)] {
        arrive(&mut d, ms, A, s);
    }
    arrive(&mut d, 3, B, 1); // A's 4 arrived first: extent 3, not more than 3
    assert_eq!(d.out_of_order().evidence().reordered_pkts, 0);
    arrive(&mut d, 4, A, 6);
    arrive(&mut d, 5, A, 8);
    arrive(&mut d, 6, B, 3); // extent 5: late, occasion 1 begins at 6 ms
    arrive(&mut d, 7, B, 5); // extent 3: on time
    arrive(&mut d, 8, B, 7); // extent 1
    let e = d.out_of_order().evidence();
    assert_eq!(
        (e.reordered_pkts, e.occasions, e.max_extent_pkts),
        (1, 1, 5)
    );
    assert_eq!(e.last_occasion_at, Some(Instant::from_millis(6)));
    // Late B arrivals up to 500 ms after 6 ms, with on-time arrivals in between, are occasion 1.
    for s in (10..=30).step_by(2) {
        arrive(&mut d, 100, A, s);
    }
    arrive(&mut d, 200, B, 9); // extent 21
    arrive(&mut d, 300, B, 11);
    arrive(&mut d, 506, B, 13); // exactly 500 ms after occasion 1 began: still occasion 1
    let e = d.out_of_order().evidence();
    assert_eq!(
        (e.reordered_pkts, e.occasions, e.max_extent_pkts),
        (4, 1, 21)
    );
    arrive(&mut d, 507, B, 15); // extent 15, 501 ms after: occasion 2
    assert_eq!(d.out_of_order().evidence().occasions, 2);
    // A packet late within its own flow is counted apart, not as an occasion.
    arrive(&mut d, 600, A, 36);
    arrive(&mut d, 601, A, 34);
    let e = d.out_of_order().evidence();
    assert_eq!((e.within_flow_late_pkts, e.occasions), (1, 2));
    // Occasions 3..9 a second apart: still inconclusive; the 10th (at 8.1 s) decides.
    let mut seq = 40;
    for occasion in 3..=10u64 {
        let ms = 1_000 * (occasion - 2) + 100;
        arrive(&mut d, ms, A, seq + 10); // A overtakes ...
        arrive(&mut d, ms, B, seq + 1); // ... B by 9 packets
        seq += 20;
        let want = if occasion < 10 {
            Decision::Inconclusive
        } else {
            Decision::NoShare
        };
        let e = d.out_of_order().evidence();
        assert_eq!((e.decision, e.occasions), (want, occasion));
    }
    let h = d.out_of_order().history();
    assert_eq!(h.first_no_share_at, Some(Instant::from_millis(8_100)));
    // Occasion 1 (6 ms) counts until 10.006 s; at 10.007 s only 9 are left.
    arrive(&mut d, 10_006, A, seq);
    assert_eq!(d.out_of_order().evidence().decision, Decision::NoShare);
    arrive(&mut d, 10_007, A, seq + 2);
    let e = d.out_of_order().evidence();
    assert_eq!(
        (e.decision, e.occasions, e.recent_occasions),
        (Decision::Inconclusive, 10, 9)
    );
    assert_eq!(e.history.first_share_at, None);
    assert_eq!(e.history.changes, 2);
    assert_eq!(e.arrivals, 44);
}

/// Arrivals of two interleaved flows (A at even milliseconds, B at odd ones; sequence number =
/// send time in ms), 10 ms one-way, except that B's packets sent during the 20 ms after each
/// `spikes_ms` start take 30 ms longer (a transient delay spike on B's path): the ten B packets
/// of a spike are overtaken by about 30 packets each. Returned in arrival order (ties in send
/// order), as (arrival, packet).
fn spiky_trace(total_ms: u64, spikes_ms: &[u64]) -> Vec<(Instant, Packet)> {
    let mut out: Vec<(u64, u64, Packet)> = (0..total_ms)
        .map(|k| {
            let flow = if k % 2 == 0 { A } else { B };
            let late = flow == B && spikes_ms.iter().any(|&s| (s..s + 20).contains(&k));
            let owd = 10 * MS + if late { 30 * MS } else { 0 };
            (k * MS + owd, k, Packet::new(flow, k, owd as i64))
        })
        .collect();
    out.sort_by_key(|&(at, k, _)| (at, k));
    out.into_iter()
        .map(|(at, _, p)| (Instant::from_nanos(at), p))
        .collect()
}

/// One transient event is one occasion (sec. 4.1.3: flows that "consistently arrive out of
/// order", "on 10 different occasions or more"): a single delay spike on one path makes ten B
/// packets late by about 30 packets, interleaved with A's on-time arrivals, all within 20 ms.
/// They are reordered packets of ONE occasion, not ten: the test stays inconclusive. (Ending an
/// occasion at any other arrival made each of them an occasion: no share within 20 ms.)
#[test]
fn one_transient_spike_is_one_occasion() {
    let mut d = detector(FalseSharingConfig::default());
    for (at, p) in spiky_trace(3_000, &[1_000]) {
        d.on_packet(at, p).unwrap();
    }
    let e = d.out_of_order().evidence();
    assert_eq!(e.reordered_pkts, 10, "{e:#?}");
    assert!(e.max_extent_pkts >= 29, "{e:#?}");
    assert_eq!(e.occasions, 1, "{e:#?}");
    assert_eq!(e.decision, Decision::Inconclusive, "{e:#?}");
    assert_eq!(e.history.first_no_share_at, None);
}

/// Ten spikes one second apart (more than the 500 ms occasion gap, all within the 10 s horizon)
/// are ten occasions: no share, decided at the tenth spike's first late arrival. Spike j starts
/// at j seconds; its first late packet (B, sent at j s + 1 ms) arrives at j s + 41 ms.
#[test]
fn ten_separate_spikes_say_no_share_at_the_tenth() {
    let spikes: Vec<u64> = (1..=10).map(|j| j * 1_000).collect();
    let mut d = detector(FalseSharingConfig::default());
    for (at, p) in spiky_trace(11_000, &spikes) {
        d.on_packet(at, p).unwrap();
    }
    let e = d.out_of_order().evidence();
    assert_eq!((e.reordered_pkts, e.occasions), (100, 10), "{e:#?}");
    assert_eq!(e.decision, Decision::NoShare, "{e:#?}");
    assert_eq!(
        d.out_of_order().detection_time(Decision::NoShare),
        Some(Duration::from_millis(10_041))
    );
}

/// Occasions count within a horizon (10 s by default), like the windowed correlation tests: the
/// answer follows the paths (sec. 5.1: the separation is reversible). Ten spikes one second apart
/// give no share at 10.041 s; with no reordering after them, the first occasion (at 1.041 s)
/// leaves the horizon after 11.041 s and the test is inconclusive again (the arrival at 11.042 s
/// re-decides); ten new spikes from 25 s decide again at 34.041 s.
#[test]
fn occasions_leave_the_horizon() {
    let mut spikes: Vec<u64> = (1..=10).map(|j| j * 1_000).collect();
    spikes.extend((25..=34).map(|j| j * 1_000));
    let mut d = detector(FalseSharingConfig::default());
    let (mut at_11_041, mut at_11_042) = (None, None);
    for (at, p) in spiky_trace(35_000, &spikes) {
        d.on_packet(at, p).unwrap();
        if at == Instant::from_millis(11_041) {
            at_11_041 = Some(d.out_of_order().evidence());
        }
        if at == Instant::from_millis(11_042) {
            at_11_042 = Some(d.out_of_order().evidence());
        }
    }
    let (e1, e2) = (at_11_041.unwrap(), at_11_042.unwrap());
    assert_eq!((e1.decision, e1.recent_occasions), (Decision::NoShare, 10));
    assert_eq!(
        (e2.decision, e2.recent_occasions),
        (Decision::Inconclusive, 9)
    );
    assert_eq!(e2.history.since, Instant::from_millis(11_042));
    let e = d.out_of_order().evidence();
    assert_eq!(e.decision, Decision::NoShare, "{e:#?}");
    assert_eq!((e.occasions, e.recent_occasions), (20, 10));
    assert_eq!(e.last_occasion_at, Some(Instant::from_millis(34_041)));
    let h = d.out_of_order().history();
    assert_eq!(h.first_no_share_at, Some(Instant::from_millis(10_041)));
    assert_eq!(h.since, Instant::from_millis(34_041));
    assert_eq!(h.changes, 3, "no share, inconclusive, no share: {h:?}");
}

/// A network duplicate of a packet already finalized is not reordering: A and B send in turn,
/// one packet a millisecond, arriving in order (each finalized at once); every 600 ms a copy of
/// the A packet sent 20 ms earlier arrives too. Each copy trails B's highest by 19 > 3, but the
/// packet was received already: the copies are counted as duplicates and never reach the
/// out-of-order test, as duplicates inside the reorder window never did. (Given to it, they were
/// ten occasions: no share.) A packet that was NOT received before (finalized as lost) and
/// arrives late is reordering and counts; a copy of it then is a duplicate.
#[test]
fn duplicates_of_finalized_packets_are_not_reordering() {
    let mut d = detector(FalseSharingConfig::default());
    let mut copies = 0;
    for seq in 0..6_100u64 {
        let flow = if seq % 2 == 0 { A } else { B };
        let now = Instant::from_millis(seq);
        d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
        if seq > 0 && seq % 600 == 0 {
            d.on_packet(now, Packet::new(A, seq - 20, 0)).unwrap();
            copies += 1;
        }
    }
    assert_eq!(copies, 10);
    let e = d.out_of_order().evidence();
    assert_eq!(
        (e.arrivals, e.reordered_pkts, e.occasions),
        (6_100, 0, 0),
        "{e:#?}"
    );
    assert_eq!(e.decision, Decision::Inconclusive);
    let c = d.counters();
    assert_eq!(
        (c.packets, c.after_finalized, c.finalized_pkts),
        (6_110, 10, 6_100)
    );
    assert_eq!(c.finalized_duplicates, 10);

    // A6100 reported lost and finalized (B6099 arrived before it), then A6100 arrives after
    // B6107: late by 7, a reordered packet; a copy of it later is a duplicate.
    d.on_loss(Instant::from_millis(6_100), LossReport::new(A, 6_100))
        .unwrap();
    for seq in 6_101..6_108u64 {
        let flow = if seq % 2 == 0 { A } else { B };
        d.on_packet(Instant::from_millis(seq), Packet::new(flow, seq, 0))
            .unwrap();
    }
    d.on_packet(Instant::from_millis(6_108), Packet::new(A, 6_100, 0))
        .unwrap();
    d.on_packet(Instant::from_millis(6_109), Packet::new(A, 6_100, 0))
        .unwrap();
    let e = d.out_of_order().evidence();
    assert_eq!(
        (e.arrivals, e.reordered_pkts, e.occasions, e.max_extent_pkts),
        (6_108, 1, 1, 7),
        "{e:#?}"
    );
    assert_eq!(d.counters().finalized_duplicates, 11);
}

/// A sequence number belongs to the flow that reported it, also after it was finalized: a report
/// of the other flow for it is refused (naming `seq`) and changes nothing, so the out-of-order
/// test never sees a packet under the wrong flow. A number finalized without any report may be
/// reported late by either flow (the first to do so owns it). The record reaches back as far as
/// the reorder window is wide; older numbers cannot be checked and are only counted.
#[test]
fn a_finalized_number_keeps_its_flow() {
    let mut d = detector(FalseSharingConfig {
        reorder_window_pkts: 4,
        ..FalseSharingConfig::default()
    });
    for seq in 0..4u64 {
        let flow = if seq % 2 == 0 { A } else { B };
        d.on_packet(Instant::from_millis(seq), Packet::new(flow, seq, 0))
            .unwrap();
    }
    d.on_loss(Instant::from_millis(4), LossReport::new(A, 4))
        .unwrap();
    // 5 and 6 are never reported; 10 pushes the window (4 wide, now 7..=10) past them. The
    // record holds 3 (B received), 4 (A lost), 5 and 6 (unreported).
    d.on_packet(Instant::from_millis(5), Packet::new(A, 10, 0))
        .unwrap();
    assert_eq!(d.counters().unreported_pkts, 2);
    let before = d.clone();
    for (seq, wrong) in [(3, A), (4, B)] {
        let e = d
            .on_packet(Instant::from_millis(6), Packet::new(wrong, seq, 0))
            .unwrap_err();
        assert_eq!(invalid_field(e), "seq", "seq {seq}");
        let e = d
            .on_loss(Instant::from_millis(6), LossReport::new(wrong, seq))
            .unwrap_err();
        assert_eq!(invalid_field(e), "seq", "seq {seq}");
        assert_eq!(d, before);
    }
    // The owners' own late reports are accepted: B3 again is a duplicate, A4 a late arrival.
    d.on_packet(Instant::from_millis(6), Packet::new(B, 3, 0))
        .unwrap();
    d.on_packet(Instant::from_millis(6), Packet::new(A, 4, 0))
        .unwrap();
    // Either flow may report the unreported 5 and 6; then they are theirs.
    d.on_packet(Instant::from_millis(6), Packet::new(B, 5, 0))
        .unwrap();
    d.on_loss(Instant::from_millis(6), LossReport::new(A, 6))
        .unwrap();
    for (seq, wrong) in [(5, A), (6, B)] {
        let e = d
            .on_packet(Instant::from_millis(7), Packet::new(wrong, seq, 0))
            .unwrap_err();
        assert_eq!(invalid_field(e), "seq", "seq {seq}");
    }
    let c = d.counters();
    assert_eq!(
        (c.after_finalized, c.finalized_duplicates, c.beyond_record),
        (4, 1, 0)
    );
    // The out-of-order test saw A0 .. B3 and A10, then A4 and B5 late; not B3's copy.
    assert_eq!(d.out_of_order().evidence().arrivals, 7);
    // 0 is older than the record: accepted from either flow, counted, not used.
    d.on_packet(Instant::from_millis(7), Packet::new(B, 0, 0))
        .unwrap();
    let c = d.counters();
    assert_eq!((c.after_finalized, c.beyond_record), (5, 1));
    assert_eq!(d.out_of_order().evidence().arrivals, 7);
}

/// The largest sequence number, 2^64 - 1, has no successor to finalize into: it is refused,
/// naming `seq`, and changes nothing. 2^64 - 2 is accepted and flushed.
#[test]
fn the_largest_sequence_number_is_refused() {
    let mut d = detector(FalseSharingConfig::default());
    d.on_packet(Instant::from_millis(1), Packet::new(A, u64::MAX - 3, 0))
        .unwrap();
    let before = d.clone();
    let e = d
        .on_packet(Instant::from_millis(2), Packet::new(B, u64::MAX, 0))
        .unwrap_err();
    assert_eq!(invalid_field(e), "seq");
    let e = d
        .on_loss(Instant::from_millis(2), LossReport::new(B, u64::MAX))
        .unwrap_err();
    assert_eq!(invalid_field(e), "seq");
    assert_eq!(d, before);
    d.on_packet(Instant::from_millis(3), Packet::new(B, u64::MAX - 1, 0))
        .unwrap();
    // 2^64 - 4 was finalized on arrival; 2^64 - 3 (unreported) and 2^64 - 2 remain.
    assert_eq!(d.flush(Instant::from_millis(4)).unwrap(), 2);
    assert_eq!(d.counters().finalized_pkts, 2);
    // A fresh detector refuses it as its first report too.
    let mut d = detector(FalseSharingConfig::default());
    let e = d
        .on_packet(Instant::from_millis(1), Packet::new(A, u64::MAX, 0))
        .unwrap_err();
    assert_eq!(invalid_field(e), "seq");
    assert_eq!(d.flush(Instant::from_millis(2)).unwrap(), 0);
}

// ---------------------------------------------------------------------------------------------
// Sub-sampling (sec. 4.1.1 last paragraph, applied to delay too)

/// One flow sends much faster than the other: A sends 9 packets for each of B's. Only the
/// samples where the packets of the two flows interleave are used: at each B packet (its
/// previous B packet is 10 back, an A packet lies in between) and at the first A packet after it
/// (its previous A packet lies before that B packet). The other 8 A packets of each cycle have
/// no B packet since their previous A packet and give no sample. Over 100 cycles of 10 packets
/// that is 2 samples per cycle, less the first cycle's B packet (no previous B) and the first
/// cycle's A packets (no B yet): 99 at B, 99 at A.
#[test]
fn only_interleaved_samples_are_used() {
    let mut d = detector(FalseSharingConfig::default());
    let mut rng = Pcg64::seed_from_u64(9);
    let mut q = Queue::new(10, 0.9);
    for seq in 0..1_000u64 {
        let flow = if seq % 10 == 9 { B } else { A };
        let owd = (q.step() * MS as f64) as i64 + rng.random_range(0..50_000);
        d.on_packet(Instant::from_millis(seq), Packet::new(flow, seq, owd))
            .unwrap();
    }
    let e = d.decisions().delay;
    assert_eq!(e.counters.positions, 1_000);
    assert_eq!(e.counters.interleaved, 198);
    assert_eq!(e.counters.samples, 198);
    assert_eq!(e.directions[0].samples, 99, "at A's packets");
    assert_eq!(e.directions[1].samples, 99, "at B's packets");

    // Losses likewise: a loss of A followed by another A packet before any B packet gives no
    // sample. A loses packets 1 and 3 of each cycle (0-based within the cycle); neither is
    // followed by B before A's next packet.
    let mut d = detector(FalseSharingConfig::default());
    for seq in 0..1_000u64 {
        let now = Instant::from_millis(seq);
        let (flow, lost) = match seq % 10 {
            9 => (B, false),
            1 | 3 => (A, true),
            _ => (A, false),
        };
        if lost {
            d.on_loss(now, LossReport::new(flow, seq)).unwrap();
        } else {
            d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
        }
    }
    let r = d.decisions();
    assert_eq!(r.asymmetric_loss.counters.conditions, 200);
    assert_eq!(r.asymmetric_loss.counters.not_interleaved, 200);
    assert_eq!(r.asymmetric_loss.trials, 0);
    // A loss of A's last packet before B is interleaved: one trial per cycle.
    let mut d = detector(FalseSharingConfig::default());
    for seq in 0..1_000u64 {
        let now = Instant::from_millis(seq);
        let (flow, lost) = match seq % 10 {
            9 => (B, false),
            8 => (A, true),
            _ => (A, false),
        };
        if lost {
            d.on_loss(now, LossReport::new(flow, seq)).unwrap();
        } else {
            d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
        }
    }
    let r = d.decisions();
    assert_eq!(r.asymmetric_loss.counters.conditions, 100);
    assert_eq!(r.asymmetric_loss.counters.not_interleaved, 0);
    // The last cycle's loss is still waiting for A's next packet.
    assert_eq!(r.asymmetric_loss.trials, 99);
    assert_eq!(
        (r.asymmetric_loss.auto_lost, r.asymmetric_loss.cross_lost),
        (0, 0)
    );
}

// ---------------------------------------------------------------------------------------------
// Confidence (sec. 4, Fig. 11)

/// A higher confidence widens every interval, so the same trace is decided later: the detection
/// time never decreases with the confidence and is strictly later at 99.9 % than at 50 %
/// (seed sec. 4: "the detection time is a function of the statistical confidence"; Fig. 11).
#[test]
fn higher_confidence_decides_later() {
    let independent = trace(20_000, Paths::Independent(0), Losses::Independent, 11);
    let shared = trace(20_000, Paths::Shared, Losses::Shared, 12);
    let levels = [0.5, 0.8, 0.9, 0.99, 0.999];
    let times = |obs: &[Obs], pick: &dyn Fn(&FalseSharingDetector) -> Option<Duration>| {
        levels
            .iter()
            .map(|&c| {
                let d = run(FalseSharingConfig::default().with_confidence(c), obs);
                pick(&d).unwrap_or_else(|| panic!("no decision at confidence {c}"))
            })
            .collect::<Vec<_>>()
    };
    let cases: Vec<(&str, Vec<Duration>)> = vec![
        (
            "delay no share",
            times(&independent, &|d| {
                d.delay().detection_time(Decision::NoShare)
            }),
        ),
        (
            "delay share",
            times(&shared, &|d| d.delay().detection_time(Decision::Share)),
        ),
        (
            "symmetric loss no share",
            times(&independent, &|d| {
                d.symmetric_loss().detection_time(Decision::NoShare)
            }),
        ),
        (
            "asymmetric loss share",
            times(&shared, &|d| {
                d.asymmetric_loss().detection_time(Decision::Share)
            }),
        ),
    ];
    for (name, t) in cases {
        assert!(t.windows(2).all(|w| w[0] <= w[1]), "{name}: {t:?}");
        assert!(t[0] < t[levels.len() - 1], "{name}: {t:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Where the text leaves a choice

/// "If the cross-correlation is less than or equal to the auto-correlation then it is likely that
/// the two flows do not share" (sec. 4.1.1): with confidence intervals, equal metrics never
/// separate, so equal metrics stay inconclusive however many samples there are; a decision needs
/// disjoint intervals (touching is not disjoint).
#[test]
fn equal_metrics_stay_inconclusive() {
    // Blocks of A B A B A B with the first three lost. A's first loss: B's next packet lost,
    // A's next lost (auto 1, cross 1); A's second loss: neither lost (auto 0, cross 0). So
    // auto = cross = 1/2 on every window, however long the run.
    let mut d = detector(hand_config());
    let mut seq = 0;
    for _ in 0..500 {
        for (flow, lost) in [
            (A, true),
            (B, true),
            (A, true),
            (B, false),
            (A, false),
            (B, false),
        ] {
            let now = Instant::from_millis(seq);
            if lost {
                d.on_loss(now, LossReport::new(flow, seq)).unwrap();
            } else {
                d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
            }
            seq += 1;
        }
    }
    let e = d.decisions().asymmetric_loss;
    assert!(e.trials > 900);
    assert_eq!(e.auto.unwrap().value, e.cross.unwrap().value);
    assert_eq!(e.decision, Decision::Inconclusive);
    let touching = Estimate {
        value: 0.5,
        lo: 0.4,
        hi: 0.6,
        samples: 10,
    };
    let above = Estimate {
        value: 0.7,
        lo: 0.6,
        hi: 0.8,
        samples: 10,
    };
    assert!(!above.above(&touching) && !touching.below(&above));
}

/// No decision on fewer than `min_samples` samples (the seed gives no minimum; the normal
/// approximations behind both intervals need a few): three interleaved trials with auto 0/3 and
/// cross 3/3 already have disjoint 90 % Wilson intervals ([0, 0.474] and [0.526, 1]), which
/// decides with min_samples = 3 but not with the default 10.
#[test]
fn min_samples_holds_back_a_decision() {
    let feed3 = |min: u64| {
        let mut c = FalseSharingConfig::default();
        c.asymmetric_loss.min_samples = min;
        let mut d = detector(c);
        let mut seq = 0;
        for _ in 0..3 {
            // A lost, then B lost, then A received: auto 0, cross 1.
            for (flow, lost) in [(A, true), (B, true), (A, false), (B, false)] {
                let now = Instant::from_millis(seq);
                if lost {
                    d.on_loss(now, LossReport::new(flow, seq)).unwrap();
                } else {
                    d.on_packet(now, Packet::new(flow, seq, 0)).unwrap();
                }
                seq += 1;
            }
        }
        d.decisions().asymmetric_loss
    };
    let e = feed3(3);
    assert_eq!((e.trials, e.auto_lost, e.cross_lost), (3, 0, 3));
    assert_eq!(e.decision, Decision::Share);
    assert_eq!(feed3(10).decision, Decision::Inconclusive);
}

/// One-way delays need only be relative (sec. 4.1.2: clocks are not synchronized, "all
/// measurements for a single flow may be off by a fixed constant"): a different offset per flow
/// changes no statistic. Samples at A and at B are correlated separately and pooled in Fisher's z,
/// so the offset between the flows cannot leak into a pooled correlation either.
#[test]
fn clock_offsets_per_flow_change_nothing() {
    let base = trace(4_000, Paths::Independent(0), Losses::None, 13);
    let shifted: Vec<Obs> = base
        .iter()
        .map(|o| match *o {
            Obs::Packet(t, mut p) => {
                p.owd_ns += if p.flow == A {
                    -9_000 * MS as i64
                } else {
                    123_456_789
                };
                Obs::Packet(t, p)
            }
            other => other,
        })
        .collect();
    let a = run(FalseSharingConfig::default(), &base).decisions();
    let b = run(FalseSharingConfig::default(), &shifted).decisions();
    assert_eq!(a.delay, b.delay);
    assert!(a.delay.auto.unwrap().value > 0.8);
}

/// Each flow's delays are re-based on its first one, so a first delay that is not representative
/// (here A's first packet waits 100 ms longer than the queue) leaves a constant offset between
/// the flows. Correlating the samples taken at A and at B separately keeps that offset out of
/// every correlation: the shared queue is still found shared. (Pooling the raw pairs of both
/// directions would pair A's delays, 100 ms low, with B's: auto near +1, cross near -1, and a
/// confident "no share".)
#[test]
fn an_offset_between_the_flows_does_not_leak_into_the_correlations() {
    let mut obs = trace(20_000, Paths::Shared, Losses::None, 1);
    let first_a = obs
        .iter_mut()
        .find_map(|o| match o {
            Obs::Packet(_, p) if p.flow == A => Some(p),
            _ => None,
        })
        .unwrap();
    first_a.owd_ns += 100 * MS as i64;
    let r = run(FalseSharingConfig::default(), &obs).decisions();
    assert_eq!(r.delay.decision, Decision::Share, "{:#?}", r.delay);
    assert_eq!(r.delay.history.first_no_share_at, None);
}

/// The tests keep the last `window_samples` samples (fixed memory), so after the paths change
/// the decision follows: shared for a while, then independent queues, and the delay test moves
/// from share to no share once the window has mostly refilled (sec. 5.1: the separation is
/// reversible, so the detector must be able to change its mind).
#[test]
fn the_window_lets_a_decision_change() {
    let mut c = FalseSharingConfig::default();
    c.delay.window_samples = 400;
    let mut d = detector(c);
    let first = trace(4_000, Paths::Shared, Losses::None, 14);
    feed(&mut d, &first);
    assert_eq!(d.delay().evidence().decision, Decision::Share);
    // The second part continues the sequence numbers and the clock.
    let second: Vec<Obs> = trace(4_000, Paths::Independent(0), Losses::None, 15)
        .into_iter()
        .map(|o| match o {
            Obs::Packet(t, mut p) => {
                p.seq += 4_000;
                Obs::Packet(t + Duration::from_secs(10), p)
            }
            other => other,
        })
        .collect();
    feed(&mut d, &second);
    let e = d.delay().evidence();
    assert_eq!(e.decision, Decision::NoShare, "{e:#?}");
    assert_eq!(e.samples, 400);
    let h = d.delay().history();
    assert!(h.first_share_at.unwrap() < h.first_no_share_at.unwrap());
    assert!(h.changes >= 2, "{h:?}");
}

// ---------------------------------------------------------------------------------------------
// Reports in any order, nothing dropped unseen

/// Packets arriving out of order within the reorder window are put back in send order before any
/// sequential statistic sees them; duplicates, reports for packets already finalized, arrivals
/// after a loss report and sequence numbers nobody reported are all counted.
#[test]
fn reports_are_finalized_in_send_order_and_counted() {
    let mut c = hand_config();
    c.reorder_window_pkts = 8;
    let mut d = detector(c);
    let mut t = 0;
    let mut at = || {
        t += 1;
        Instant::from_millis(t)
    };
    // 0 A, 1 B, 2 A arrive as 0, 2, 1: 2 waits until 1 arrives.
    d.on_packet(at(), Packet::new(A, 0, 100)).unwrap();
    d.on_packet(at(), Packet::new(A, 2, 100)).unwrap();
    assert_eq!(d.counters().pending_pkts, 1);
    assert_eq!(d.counters().finalized_pkts, 1);
    d.on_packet(at(), Packet::new(B, 1, 100)).unwrap();
    assert_eq!(d.counters().finalized_pkts, 3);
    assert_eq!(d.delay().evidence().counters.interleaved, 1, "A2 after B1");
    // A duplicate of a finalized packet; a duplicate inside the window.
    d.on_packet(at(), Packet::new(A, 2, 100)).unwrap();
    d.on_packet(at(), Packet::new(B, 5, 100)).unwrap();
    d.on_packet(at(), Packet::new(B, 5, 100)).unwrap();
    // 4 reported lost, then it arrives after all: the arrival wins while 3 is still missing.
    d.on_loss(at(), LossReport::new(A, 4)).unwrap();
    d.on_packet(at(), Packet::new(A, 4, 100)).unwrap();
    // 6 arrives, then a loss report for it: the arrival wins again.
    d.on_packet(at(), Packet::new(A, 6, 100)).unwrap();
    d.on_loss(at(), LossReport::new(A, 6)).unwrap();
    let c = d.counters();
    assert_eq!(c.after_finalized, 1);
    assert_eq!(c.duplicate_packets, 1);
    assert_eq!(c.lost_then_received, 1);
    assert_eq!(c.loss_reports_for_received, 1);
    assert_eq!((c.finalized_pkts, c.pending_pkts), (3, 3));
    // 3 is never reported. Sequence 11 pushes the window (8 wide) past it: 3 is finalized as
    // unreported, 4, 5 and 6 follow.
    d.on_packet(at(), Packet::new(B, 11, 100)).unwrap();
    let c = d.counters();
    assert_eq!(c.unreported_pkts, 1);
    assert_eq!(c.finalized_pkts, 6);
    // A jump of a billion sequence numbers is closed in O(window): 7 ..= 999_999_992 are
    // finalized, all but 11 unreported.
    d.on_packet(at(), Packet::new(A, 1_000_000_000, 100))
        .unwrap();
    let c = d.counters();
    assert_eq!(c.unreported_pkts, 1 + (999_999_993 - 7 - 1));
    assert_eq!((c.finalized_pkts, c.pending_pkts), (7, 1));
    // flush finalizes everything up to the highest reported: 999_999_993 ..= 1_000_000_000.
    assert_eq!(d.flush(at()).unwrap(), 8);
    let c = d.counters();
    assert_eq!((c.finalized_pkts, c.pending_pkts), (8, 0));
    assert_eq!(c.unreported_pkts, 1 + (999_999_993 - 7 - 1) + 7);
    assert_eq!(c.packets, 10);
    assert_eq!(d.counters().loss_reports, 2);
}

/// A sequence number nobody reported could have been either flow's packet, so no sample may
/// span it: with a reorder window of 2, A0 B1 [2 missing] A3 B4 gives no delay sample (without
/// the gap, A3 after B1 after A0 and B4 after A3 after B1 would both interleave) and the loss of
/// A0 is never completed into a trial.
#[test]
fn an_unreported_packet_breaks_the_context() {
    let mut c = hand_config();
    c.reorder_window_pkts = 2;
    let mut d = detector(c);
    d.on_packet(Instant::from_millis(1), Packet::new(A, 0, 10))
        .unwrap();
    d.on_packet(Instant::from_millis(2), Packet::new(B, 1, 10))
        .unwrap();
    d.on_packet(Instant::from_millis(3), Packet::new(A, 3, 10))
        .unwrap();
    d.on_packet(Instant::from_millis(4), Packet::new(B, 4, 10))
        .unwrap();
    let e = d.delay().evidence();
    assert_eq!(e.counters.positions, 4);
    assert_eq!((e.counters.interleaved, e.counters.gaps), (0, 1));
    assert_eq!(d.counters().unreported_pkts, 1);
    // The same with A0 lost: the condition is dropped at the gap, counted.
    let mut d = detector(c);
    d.on_loss(Instant::from_millis(1), LossReport::new(A, 0))
        .unwrap();
    d.on_packet(Instant::from_millis(2), Packet::new(B, 1, 10))
        .unwrap();
    d.on_packet(Instant::from_millis(3), Packet::new(A, 3, 10))
        .unwrap();
    d.on_packet(Instant::from_millis(4), Packet::new(B, 4, 10))
        .unwrap();
    let e = d.asymmetric_loss().evidence();
    assert_eq!(
        (e.counters.conditions, e.counters.broken_by_gap, e.trials),
        (1, 1, 0)
    );
}

/// Bad observations are refused with an error naming the field, and leave the detector
/// unchanged: an unknown flow, time going backwards, a one-way delay too far from the flow's
/// first one, a sequence number already reported for the other flow.
#[test]
fn bad_observations_are_refused_without_changing_state() {
    let mut d = detector(FalseSharingConfig::default());
    d.on_packet(Instant::from_millis(10), Packet::new(A, 0, 5 * MS as i64))
        .unwrap();
    d.on_packet(Instant::from_millis(11), Packet::new(B, 1, -5 * MS as i64))
        .unwrap();
    d.on_packet(Instant::from_millis(20), Packet::new(A, 3, 5 * MS as i64))
        .unwrap();
    let before = d.clone();

    let stranger = FlowId(99);
    assert_eq!(
        d.on_packet(Instant::from_millis(30), Packet::new(stranger, 4, 0))
            .unwrap_err(),
        Error::UnknownFlow(stranger)
    );
    assert_eq!(
        d.on_loss(Instant::from_millis(30), LossReport::new(stranger, 4))
            .unwrap_err(),
        Error::UnknownFlow(stranger)
    );
    assert_eq!(d, before);

    let back = Error::TimeWentBackwards {
        now_ns: 19 * MS,
        last_ns: 20 * MS,
    };
    assert_eq!(
        d.on_packet(Instant::from_millis(19), Packet::new(B, 4, 0))
            .unwrap_err(),
        back
    );
    assert_eq!(
        d.on_loss(Instant::from_millis(19), LossReport::new(B, 2))
            .unwrap_err(),
        back
    );
    assert_eq!(d.flush(Instant::from_millis(19)).unwrap_err(), back);
    assert_eq!(d, before);

    // A's first OWD was 5 ms; more than 2^46 ns away from it is refused.
    let far = 5 * MS as i64 + MAX_DELAY_SPREAD_NS + 1;
    let e = d
        .on_packet(Instant::from_millis(30), Packet::new(A, 4, far))
        .unwrap_err();
    assert_eq!(invalid_field(e), "owd_ns");
    assert_eq!(d, before);
    let e = Packet::from_times(A, 4, Instant::from_nanos(u64::MAX), Instant::ZERO).unwrap_err();
    assert_eq!(invalid_field(e), "received");

    // Sequence number 3 belongs to A (it waits in the window for 2): B can report neither an
    // arrival nor a loss for it.
    let e = d
        .on_packet(Instant::from_millis(30), Packet::new(B, 3, 0))
        .unwrap_err();
    assert_eq!(invalid_field(e), "seq");
    let e = d
        .on_loss(Instant::from_millis(30), LossReport::new(B, 3))
        .unwrap_err();
    assert_eq!(invalid_field(e), "seq");
    assert_eq!(d, before);

    // The boundary itself is accepted, and a packet given by its send and receive times is the
    // same as one given by its OWD.
    let edge = 5 * MS as i64 + MAX_DELAY_SPREAD_NS;
    d.on_packet(Instant::from_millis(40), Packet::new(A, 6, edge))
        .unwrap();
    let timed =
        Packet::from_times(B, 7, Instant::from_millis(40), Instant::from_millis(45)).unwrap();
    assert_eq!(timed, Packet::new(B, 7, 5 * MS as i64));
}

/// Memory is fixed at construction: a million observations (packets, losses, reordering,
/// duplicates, gaps) make no heap allocation at all and leave every window at or below its
/// configured capacity.
#[test]
fn a_million_observations_do_not_grow_memory() {
    let cfg = FalseSharingConfig::default();
    let mut d = detector(cfg);
    let m0 = d.memory();
    // The module doc's bound: 256 window slots of 16 bytes, the record of 256 finalized numbers
    // (3 bits each, in 64-bit words), 2048 delay samples of 32 bytes, two loss windows of 1024
    // trials of 2 bytes, 10 occasion times of 8 bytes: about 72 KiB.
    assert_eq!(
        m0.heap_bytes,
        256 * 16 + 3 * 4 * 8 + 2048 * 32 + 2 * 1024 * 2 + 10 * 8
    );
    assert_eq!(
        (m0.finalized_record_pkts, m0.occasion_slots),
        (cfg.reorder_window_pkts, 10)
    );
    assert_eq!(m0.reorder_window_slots, cfg.reorder_window_pkts);
    assert_eq!(m0.delay_capacity, cfg.delay.window_samples);
    assert_eq!(
        m0.asymmetric_loss_capacity,
        cfg.asymmetric_loss.window_samples
    );
    assert_eq!(
        m0.symmetric_loss_capacity,
        cfg.symmetric_loss.window_samples
    );
    let mut rng = Pcg64::seed_from_u64(17);
    let mut q = Queue::new(18, 0.9);
    let mut max = m0;
    let allocations_before = allocations();
    for i in 0..1_000_000u64 {
        // Pairs of packets swapped now and then, 1 % losses, an occasional duplicate and an
        // occasional sequence number nobody reports. A sequence number's flow is fixed by it.
        let seq = match i % 50 {
            7 => i + 1,
            8 => i - 1,
            _ => i,
        };
        let flow = if seq % 3 == 0 { B } else { A };
        let now = Instant::from_nanos(i * 100_000);
        let u: u32 = rng.random_range(0..1000);
        if u < 10 {
            d.on_loss(now, LossReport::new(flow, seq)).unwrap();
        } else if u >= 12 {
            let p = Packet::new(flow, seq, (q.step() * MS as f64) as i64);
            d.on_packet(now, p).unwrap();
            if u == 999 {
                d.on_packet(now, p).unwrap();
            }
        }
        let m = d.memory();
        max.delay_samples = max.delay_samples.max(m.delay_samples);
        max.asymmetric_loss_trials = max.asymmetric_loss_trials.max(m.asymmetric_loss_trials);
        max.symmetric_loss_trials = max.symmetric_loss_trials.max(m.symmetric_loss_trials);
    }
    assert_eq!(
        allocations(),
        allocations_before,
        "no allocation after construction"
    );
    assert_eq!(
        max.delay_samples, cfg.delay.window_samples,
        "the window filled"
    );
    assert!(max.asymmetric_loss_trials <= cfg.asymmetric_loss.window_samples);
    assert!(max.symmetric_loss_trials <= cfg.symmetric_loss.window_samples);
    let c = d.counters();
    assert!(c.packets > 980_000, "{c:?}");
    assert!(c.unreported_pkts > 1_000, "{c:?}");
    // Duplicates of packets already finalized count as after_finalized and finalized_duplicates.
    assert!(c.duplicate_packets + c.after_finalized > 800, "{c:?}");
    assert!(c.finalized_duplicates > 500, "{c:?}");
}

/// The same observations give the same decisions, bit for bit; the read-out prints one line.
#[test]
fn deterministic_and_printable() {
    let obs = trace(6_000, Paths::Independent(5), Losses::Independent, 19);
    let a: Decisions = run(FalseSharingConfig::default(), &obs).decisions();
    let b: Decisions = run(FalseSharingConfig::default(), &obs).decisions();
    assert_eq!(a, b);
    let line = a.to_string();
    assert!(line.starts_with("asymmetric_loss="), "{line}");
    for name in ["symmetric_loss=", "delay=", "out_of_order="] {
        assert!(line.contains(name), "{line}");
    }
}

/// A pair whose second flow's first packets arrive after the first flow's later ones: told where
/// the numbers start, the detector uses them; otherwise they are late (counted), as documented.
#[test]
fn a_detector_told_its_first_number_keeps_the_early_arrivals() {
    let run = |told: bool| {
        let mut d = pair_of_1_and_2();
        if told {
            d = d.starting_at(0).unwrap();
        }
        let t = Instant::from_millis(1);
        for seq in 10..20 {
            d.on_packet(t, Packet::new(FlowId(1), seq, 1_000)).unwrap();
        }
        for seq in 0..10 {
            d.on_packet(t, Packet::new(FlowId(2), seq, 50_000)).unwrap();
        }
        d.counters()
    };
    let late = run(false);
    assert_eq!(late.after_finalized, 10, "{late:?}");
    let told = run(true);
    assert_eq!(told.after_finalized, 0, "{told:?}");
    assert_eq!(told.finalized_pkts, 20, "{told:?}");
}

#[test]
fn the_first_number_is_refused_after_a_report() {
    let mut d = pair_of_1_and_2();
    d.on_packet(Instant::ZERO, Packet::new(FlowId(1), 5, 0))
        .unwrap();
    let e = d.clone().starting_at(0).unwrap_err().to_string();
    assert!(e.contains("first_seq"), "{e}");
}

fn pair_of_1_and_2() -> FalseSharingDetector {
    FalseSharingDetector::new(
        FalseSharingConfig::default(),
        FlowId(1),
        FlowId(2),
        Instant::ZERO,
    )
    .unwrap()
}
