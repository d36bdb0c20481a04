//! RFC 8382 Shared Bottleneck Detection: tests written from worked inputs with known answers.
//!
//! The per-interval quantities (E[OWD], skew_base_T, var_base_T, crossings) are hand-computed for
//! tiny traces; the summary statistics and the grouping are checked on synthetic bottleneck traces
//! whose answer is known by construction (same queue -> same group, different queue frequency ->
//! different groups, flat delay -> not congested).

use coupling::sbd::{CongestionReason, FlowStats, FlowSummary, SbdConfig, SbdGrouper, SplitStep};
use coupling::{Duration, Error, FlowId, Instant};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

const MS: u64 = 1_000_000;

/// A small configuration for hand computation: T = 1 s, N = 8, M = 4, the RFC's thresholds.
fn tiny(n: usize, m: usize) -> SbdConfig {
    SbdConfig {
        t: Duration::from_secs(1),
        n,
        m,
        ..SbdConfig::default()
    }
}

/// Feeds one T = 1 s interval `k` (starting at k seconds) with the given OWD samples, evenly
/// spaced inside the interval.
fn feed_interval(s: &mut FlowStats, k: u64, owds_ns: &[i64]) {
    let step = 1_000 * MS / (owds_ns.len() as u64 + 1);
    for (i, owd) in owds_ns.iter().enumerate() {
        let now = Instant::from_nanos(k * 1_000 * MS + (i as u64 + 1) * step);
        s.on_packet(now, *owd).unwrap();
    }
}

fn close_through(s: &mut FlowStats, k: u64) {
    s.advance(Instant::from_nanos((k + 1) * 1_000 * MS))
        .unwrap();
}

fn invalid_field(e: Error) -> &'static str {
    match e {
        Error::InvalidValue { field, .. } => field,
        other => panic!("expected InvalidValue, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration (RFC 8382 sec. 2)

#[test]
fn default_config_is_the_rfc_table_and_is_valid() {
    let c = SbdConfig::default();
    assert_eq!(c.t, Duration::from_millis(350));
    assert_eq!((c.n, c.m), (50, 30));
    assert_eq!(c.c_s, -0.01);
    assert_eq!(c.c_h, 0.3);
    assert_eq!((c.p_l, c.p_f, c.p_mad, c.p_d), (0.1, 0.1, 0.1, 0.1));
    assert_eq!(c.p_s, 0.15);
    assert_eq!(c.p_v, 0.7);
    assert_eq!(c.check(), Ok(()));
    assert_eq!(
        c.warmup_intervals(),
        60,
        "max(2*M, N) = 2*M (RFC 8382 sec. 3.3.2)"
    );
}

/// (f) Bad configurations are refused with the offending field named.
#[test]
fn bad_configs_are_refused_naming_the_field() {
    let ok = SbdConfig::default();
    let cases: Vec<(SbdConfig, &str)> = vec![
        (
            SbdConfig {
                t: Duration::ZERO,
                ..ok
            },
            "t",
        ),
        (SbdConfig { n: 1, ..ok }, "n"),
        (SbdConfig { n: 0, m: 0, ..ok }, "n"),
        (SbdConfig { m: 0, ..ok }, "m"),
        (SbdConfig { n: 10, m: 11, ..ok }, "m"),
        (
            SbdConfig {
                c_s: f64::NAN,
                ..ok
            },
            "c_s",
        ),
        (SbdConfig { c_s: -1.5, ..ok }, "c_s"),
        (SbdConfig { c_h: -0.5, ..ok }, "c_h"),
        (
            SbdConfig {
                c_h: f64::INFINITY,
                ..ok
            },
            "c_h",
        ),
        (SbdConfig { p_l: -0.1, ..ok }, "p_l"),
        (SbdConfig { p_l: 1.5, ..ok }, "p_l"),
        (SbdConfig { p_f: -0.1, ..ok }, "p_f"),
        (
            SbdConfig {
                p_mad: f64::NAN,
                ..ok
            },
            "p_mad",
        ),
        (SbdConfig { p_d: -1e-9, ..ok }, "p_d"),
        (SbdConfig { p_s: -0.15, ..ok }, "p_s"),
        (
            SbdConfig {
                p_v: f64::NEG_INFINITY,
                ..ok
            },
            "p_v",
        ),
    ];
    for (cfg, field) in cases {
        assert_eq!(invalid_field(cfg.check().unwrap_err()), field, "{cfg:?}");
        assert_eq!(
            invalid_field(FlowStats::new(cfg, Instant::ZERO).unwrap_err()),
            field
        );
        assert_eq!(invalid_field(SbdGrouper::new(cfg).unwrap_err()), field);
    }
}

// ---------------------------------------------------------------------------------------------
// Per-flow statistics (RFC 8382 sec. 3.2)

/// (a) A constant delay: every sample equals the mean, so skew_base_T = 0, var_base_T = 0, no
/// crossing, no loss; the flow is not congested.
#[test]
fn constant_delay_gives_zero_statistics_and_no_congestion() {
    let cfg = SbdConfig::default();
    let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
    for i in 0..30_000u64 {
        s.on_packet(Instant::from_nanos(i * 5 * MS), 42 * MS as i64)
            .unwrap();
    }
    let sum = s.summary();
    assert!(sum.intervals_closed >= 400, "{sum:?}");
    assert_eq!(sum.skew_est, 0.0);
    assert_eq!(sum.var_est_ns, 0.0);
    assert_eq!(sum.freq_est, 0.0);
    assert_eq!(sum.pkt_loss, 0.0);
    assert_eq!(sum.mean_delay_ns, Some(42e6));
    assert!(sum.skew_samples > 0);

    let mut g = SbdGrouper::new(cfg).unwrap();
    let r = g.group(&[(FlowId(7), sum)]).unwrap();
    assert_eq!(r.not_congested, vec![FlowId(7)]);
    assert!(r.groups.is_empty() && r.congested.is_empty());
}

/// (b) Hand-computed skew_base_T and var_base_T for one tiny interval; skew_est and var_est over
/// M intervals divide by the number of samples compared (RFC 8382 sec. 3.2.2, 3.2.3).
#[test]
fn hand_computed_skew_and_variability_for_a_tiny_interval() {
    let mut s = FlowStats::new(tiny(8, 1), Instant::ZERO).unwrap();
    // Interval 0: E[OWD] = 10. Nothing to compare against yet (no mean_delay, no previous E).
    feed_interval(&mut s, 0, &[10, 10, 10, 10]);
    close_through(&mut s, 0);
    let r0 = s.last_interval().unwrap();
    assert_eq!(r0.mean_owd_ns, Some(10.0));
    assert_eq!((r0.skew_base, r0.skew_samples), (0, 0));
    assert_eq!((r0.var_base_ns, r0.var_samples), (0.0, 0));
    assert_eq!(s.counters().samples_without_mean_delay, 4);

    // Interval 1: mean_delay = 10 (M = 1). 4 < 10, three 12 > 10, 10 == 10:
    // skew_base_T = 1 - 3 = -2 over 5 samples; var_base_T = 6 + 2 + 2 + 2 + 0 = 12.
    feed_interval(&mut s, 1, &[4, 12, 12, 12, 10]);
    close_through(&mut s, 1);
    let r1 = s.last_interval().unwrap();
    assert_eq!(r1.mean_owd_ns, Some(10.0));
    assert_eq!((r1.skew_base, r1.skew_samples), (-2, 5));
    assert_eq!((r1.var_base_ns, r1.var_samples), (12.0, 5));
    let sum = s.summary();
    assert_eq!(sum.skew_est, -2.0 / 5.0);
    assert_eq!(sum.var_est_ns, 12.0 / 5.0);

    // Interval 2: mean_delay = E_1 = 10, previous E = 10. 9, 9, 9 < 10 and 13 > 10:
    // skew_base_T = 3 - 1 = +2; var_base_T = 1 + 1 + 1 + 3 = 6. E_2 = 40 / 4 = 10.
    feed_interval(&mut s, 2, &[9, 9, 9, 13]);
    close_through(&mut s, 2);
    let r2 = s.last_interval().unwrap();
    assert_eq!((r2.skew_base, r2.skew_samples), (2, 4));
    assert_eq!(r2.var_base_ns, 6.0);
    // M = 1: only interval 2 counts now.
    assert_eq!(s.summary().skew_est, 0.5);
    assert_eq!(s.summary().var_est_ns, 1.5);

    // The same trace with M = 2 sums the last two intervals: (-2 + 2) / (5 + 4), (12 + 6) / 9.
    let mut s2 = FlowStats::new(tiny(8, 2), Instant::ZERO).unwrap();
    feed_interval(&mut s2, 0, &[10, 10, 10, 10]);
    feed_interval(&mut s2, 1, &[4, 12, 12, 12, 10]);
    feed_interval(&mut s2, 2, &[9, 9, 9, 13]);
    close_through(&mut s2, 2);
    assert_eq!(s2.summary().skew_est, 0.0);
    assert_eq!(s2.summary().var_est_ns, 2.0);
}

/// (c) The mean absolute deviation is taken from the previous interval's E[OWD], not from the
/// current one: a sequence whose own mean differs from the reference shows the difference.
#[test]
fn hand_computed_mad_uses_the_previous_interval_mean() {
    let mut s = FlowStats::new(tiny(8, 1), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[100, 200, 300]); // E_0 = 200
    feed_interval(&mut s, 1, &[150, 250, 400, 0, 500]); // E_1 = 260
    close_through(&mut s, 1);
    let r1 = s.last_interval().unwrap();
    assert_eq!(r1.mean_owd_ns, Some(260.0));
    // |150-200| + |250-200| + |400-200| + |0-200| + |500-200| = 50 + 50 + 200 + 200 + 300 = 800.
    // (Around its own mean 260 it would be 110 + 10 + 140 + 260 + 240 = 760.)
    assert_eq!((r1.var_base_ns, r1.var_samples), (800.0, 5));
    assert_eq!(s.summary().var_est_ns, 160.0);

    // With M = 2 mean_delay is no longer the previous E[OWD], and the three candidate references
    // give three answers for interval 2 = [250, 290, 330]: the previous E_1 = 260 gives
    // 10 + 30 + 70 = 110 (the one used); its own mean 290 would give 80; mean_delay
    // (200 + 260) / 2 = 230 would give 180.
    let mut s = FlowStats::new(tiny(8, 2), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[100, 200, 300]);
    feed_interval(&mut s, 1, &[150, 250, 400, 0, 500]);
    feed_interval(&mut s, 2, &[250, 290, 330]);
    close_through(&mut s, 2);
    let r2 = s.last_interval().unwrap();
    assert_eq!((r2.var_base_ns, r2.var_samples), (110.0, 3));
    // var_est over the last M = 2 intervals: (800 + 110) / (5 + 3).
    assert_eq!(s.summary().var_est_ns, 113.75);
    // skew against mean_delay 230: all three above -> -3; over M: interval 1 against 200:
    // 150 < 200, 0 < 200 (+2), 250, 400, 500 > 200 (-3) -> -1. (-3 - 1) / 8.
    assert_eq!(r2.skew_base, -3);
    assert_eq!(s.summary().skew_est, -0.5);
}

/// OWD need only be relative (RFC 8382 sec. 4): a clock offset, even one making every OWD
/// negative, changes no statistic but mean_delay.
#[test]
fn clock_offset_changes_nothing_but_the_mean() {
    let cfg = tiny(8, 4);
    let trace = |offset: i64| {
        let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
        let mut rng = Pcg64::seed_from_u64(11);
        for k in 0..40u64 {
            let owds: Vec<i64> = (0..20)
                .map(|_| offset + rng.random_range(0..1_000_000i64) + ((k % 5) as i64) * 300_000)
                .collect();
            feed_interval(&mut s, k, &owds);
        }
        close_through(&mut s, 39);
        s.summary()
    };
    let a = trace(20 * MS as i64);
    let b = trace(-7_000 * MS as i64);
    assert_eq!(a.skew_est, b.skew_est);
    assert_eq!(a.var_est_ns, b.var_est_ns);
    assert_eq!(a.freq_est, b.freq_est);
    assert!(a.freq_est > 0.0, "the trace does oscillate: {a:?}");
    let shift = a.mean_delay_ns.unwrap() - b.mean_delay_ns.unwrap();
    assert!((shift - 7_020.0 * MS as f64).abs() < 1e-3, "{shift}");
}

/// (b) A queue that is mostly full with short drains skews OWD to the left (negative skew_est:
/// most samples above the mean, RFC 8382 sec. 3.2.2 counts below minus above); one mostly empty
/// with short peaks skews it to the right (positive).
#[test]
fn sawtooth_sign_follows_the_queue_shape() {
    let run = |mostly_full: bool| {
        let mut s = FlowStats::new(SbdConfig::default(), Instant::ZERO).unwrap();
        for i in 0..20_000u64 {
            let t_ms = i * 5;
            let x = (t_ms % 3_000) as f64 / 3_000.0; // 3 s period
            let q_ms = if mostly_full {
                if x < 0.8 {
                    40.0 + 10.0 * x
                } else {
                    5.0
                }
            } else if x < 0.2 {
                40.0
            } else {
                5.0 + 2.0 * x
            };
            let owd = ((20.0 + q_ms) * 1e6) as i64;
            s.on_packet(Instant::from_millis(t_ms), owd).unwrap();
        }
        s.summary()
    };
    let full = run(true);
    let empty = run(false);
    assert!(full.skew_est < -0.3, "{full:?}");
    assert!(empty.skew_est > 0.3, "{empty:?}");
    assert!(full.skew_est >= -1.0 && empty.skew_est <= 1.0);
}

/// (d) freq_est for a square wave of E[OWD]: every level change is a significant mean crossing
/// (it leaves mean_delay by more than p_v * var_est), and freq_est = crossings / N
/// (RFC 8382 sec. 3.2.4). Period 4 intervals -> 2 crossings per 4 intervals -> 0.5; period 8 -> 0.25.
#[test]
fn square_wave_crossing_frequency() {
    for (period, expected) in [(4u64, 0.5), (8, 0.25), (16, 0.125)] {
        let mut s = FlowStats::new(tiny(8, 4), Instant::ZERO).unwrap();
        for k in 0..64u64 {
            let level = if (k % period) < period / 2 { 200 } else { 100 };
            feed_interval(&mut s, k, &[level; 5]);
        }
        close_through(&mut s, 63);
        let sum = s.summary();
        assert_eq!(sum.freq_est, expected, "period {period}: {sum:?}");
    }
    // Hand-check the band for period 4 (pattern H H L L): over any 4 intervals two change level,
    // each with var_base_T = 5 * 100, so var_est = 1000 / 20 = 50; mean_delay = 150.
    let mut s = FlowStats::new(tiny(8, 4), Instant::ZERO).unwrap();
    for k in 0..32u64 {
        let level = if (k % 4) < 2 { 200 } else { 100 };
        feed_interval(&mut s, k, &[level; 5]);
    }
    close_through(&mut s, 31);
    assert_eq!(s.summary().var_est_ns, 50.0);
    assert_eq!(s.summary().mean_delay_ns, Some(150.0));
}

/// A small oscillation inside the p_v * var_est band is not a significant crossing: jitter
/// around a flat mean gives freq_est = 0 even though E[OWD] crosses mean_delay every interval.
#[test]
fn insignificant_crossings_are_not_counted() {
    let mut s = FlowStats::new(tiny(8, 4), Instant::ZERO).unwrap();
    for k in 0..40u64 {
        // Within the interval the samples spread +-100 around the level; the level itself
        // alternates by only +-5, well inside 0.7 * var_est (about 70).
        let level = if k % 2 == 0 { 1_005 } else { 995 };
        feed_interval(
            &mut s,
            k,
            &[level - 100, level + 100, level - 100, level + 100],
        );
    }
    close_through(&mut s, 39);
    let sum = s.summary();
    assert!(sum.var_est_ns > 90.0, "{sum:?}");
    assert_eq!(sum.freq_est, 0.0, "{sum:?}");
}

/// pkt_loss = lost / (received + lost) over the last N intervals (RFC 8382 sec. 3.2.5); losses
/// older than N intervals drop out.
#[test]
fn packet_loss_over_n_intervals() {
    let mut s = FlowStats::new(tiny(4, 2), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[10; 8]);
    s.on_loss(Instant::from_millis(900), 2).unwrap();
    close_through(&mut s, 0);
    assert_eq!(s.summary().pkt_loss, 0.2);
    assert_eq!(s.last_interval().unwrap().lost_pkts, 2);
    for k in 1..4 {
        feed_interval(&mut s, k, &[10; 10]);
    }
    close_through(&mut s, 3);
    assert_eq!(s.summary().pkt_loss, 2.0 / 40.0);
    feed_interval(&mut s, 4, &[10; 10]);
    close_through(&mut s, 4);
    assert_eq!(s.summary().pkt_loss, 0.0, "interval 0 left the N window");
    assert_eq!(s.counters().lost_pkts, 2);
    assert_eq!(s.counters().received_pkts, 48);
}

/// Intervals are half-open [start + kT, start + (k+1)T): a packet at the boundary belongs to the
/// next interval, and an observation past the boundary closes the interval.
#[test]
fn interval_boundaries_are_half_open_and_close_automatically() {
    let start = Instant::from_secs(100);
    let mut s = FlowStats::new(tiny(8, 4), start).unwrap();
    s.on_packet(start, 1).unwrap();
    s.on_packet(start + Duration::from_nanos(999_999_999), 3)
        .unwrap();
    assert_eq!(s.summary().intervals_closed, 0);
    s.on_packet(start + Duration::from_secs(1), 100).unwrap();
    assert_eq!(s.summary().intervals_closed, 1);
    let r = s.last_interval().unwrap();
    assert_eq!((r.received_pkts, r.mean_owd_ns), (2, Some(2.0)));
    assert_eq!(s.current_interval_end(), start + Duration::from_secs(2));
}

/// Gaps (intervals without OWD samples) are recorded as empty intervals and counted; a long
/// silence is closed in O(N), not one step per interval.
#[test]
fn gaps_are_counted_and_long_silences_are_cheap() {
    let mut s = FlowStats::new(tiny(8, 4), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[10, 20]);
    feed_interval(&mut s, 3, &[30]);
    close_through(&mut s, 3);
    let c = s.counters();
    assert_eq!((c.intervals_closed, c.empty_intervals), (4, 2));
    // mean_delay averages the E[OWD] that exist among the last M intervals: (15 + 30) / 2.
    assert_eq!(s.summary().mean_delay_ns, Some(22.5));

    // A silence of 10^9 intervals (~32 years at T = 1 s).
    s.advance(Instant::from_secs(1_000_000_000)).unwrap();
    let c = s.counters();
    assert_eq!(c.intervals_closed, 1_000_000_000);
    assert_eq!(c.empty_intervals, 1_000_000_000 - 2);
    assert_eq!(s.history_len(), 8);
    assert_eq!(
        s.summary().mean_delay_ns,
        None,
        "no E[OWD] in the last M intervals"
    );
    // Statistics restart from the samples after the silence.
    feed_interval(&mut s, 1_000_000_000, &[50, 50]);
    close_through(&mut s, 1_000_000_000);
    assert_eq!(s.summary().mean_delay_ns, Some(50.0));
}

/// (f) Bad observations are refused and leave the state unchanged.
#[test]
fn bad_observations_are_refused_without_changing_state() {
    let mut s = FlowStats::new(tiny(8, 4), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[10, 20, 30]);
    s.on_packet(Instant::from_millis(1_500), 12).unwrap();
    let before = s.clone();
    let e = s.on_packet(Instant::from_millis(1_400), 10).unwrap_err();
    assert_eq!(
        e,
        Error::TimeWentBackwards {
            now_ns: 1_400 * MS,
            last_ns: 1_500 * MS
        }
    );
    assert_eq!(s, before);
    assert!(s.on_loss(Instant::from_millis(1_000), 1).is_err());
    assert!(s.advance(Instant::from_millis(1_499)).is_err());
    assert_eq!(s, before);
    for owd in [i64::MAX, i64::MIN, (1i64 << 52) + 1, -(1i64 << 52) - 1] {
        let e = s.on_packet(Instant::from_secs(5), owd).unwrap_err();
        assert_eq!(invalid_field(e), "owd_ns");
        assert_eq!(s, before, "a refused sample must not even advance time");
    }
    // The limits themselves are accepted.
    s.on_packet(Instant::from_secs(5), 1i64 << 52).unwrap();
    s.on_packet(Instant::from_secs(5), -(1i64 << 52)).unwrap();
}

/// (g) Memory per flow is constant: 10^6 packets over ~2900 intervals leave the history at N
/// records with its capacity unchanged.
#[test]
fn a_million_packets_do_not_grow_the_history() {
    let cfg = SbdConfig::default();
    let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
    assert_eq!(s.history_capacity(), cfg.n);
    let mut rng = Pcg64::seed_from_u64(3);
    let mut max_len = 0;
    for i in 0..1_000_000u64 {
        let owd = 30 * MS as i64 + rng.random_range(0..5 * MS as i64);
        s.on_packet(Instant::from_millis(i), owd).unwrap();
        if i % 997 == 0 {
            s.on_loss(Instant::from_millis(i), 1).unwrap();
        }
        max_len = max_len.max(s.history_len());
    }
    assert_eq!(s.counters().received_pkts, 1_000_000);
    assert!(s.summary().intervals_closed > 2_800);
    assert_eq!(max_len, cfg.n);
    assert_eq!(s.history_capacity(), cfg.n);
}

// ---------------------------------------------------------------------------------------------
// Grouping (RFC 8382 sec. 3.3.1)

fn ready(skew: f64, var_ns: f64, freq: f64, loss: f64) -> FlowSummary {
    FlowSummary {
        skew_est: skew,
        var_est_ns: var_ns,
        freq_est: freq,
        pkt_loss: loss,
        mean_delay_ns: Some(50e6),
        intervals_closed: 1_000,
        data_intervals: 1_000,
        skew_samples: 1_000,
    }
}

/// Step 1 with hysteresis: congested when skew_est < c_s; once congested, it stays so while
/// skew_est < c_h; high loss alone makes a flow congested.
#[test]
fn congestion_test_has_hysteresis_and_loss() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    let f = FlowId(1);
    let step = |g: &mut SbdGrouper, skew: f64, loss: f64| {
        let r = g.group(&[(f, ready(skew, 1e6, 0.2, loss))]).unwrap();
        r.congested
            .iter()
            .find(|(id, _)| *id == f)
            .map(|(_, why)| *why)
    };
    assert_eq!(
        step(&mut g, 0.2, 0.0),
        None,
        "not previously congested, 0.2 >= c_s"
    );
    assert_eq!(step(&mut g, -0.05, 0.0), Some(CongestionReason::Skew));
    assert_eq!(step(&mut g, 0.2, 0.0), Some(CongestionReason::Hysteresis));
    assert_eq!(step(&mut g, 0.29, 0.0), Some(CongestionReason::Hysteresis));
    assert_eq!(
        step(&mut g, 0.35, 0.0),
        None,
        "skew_est above c_h releases it"
    );
    assert_eq!(step(&mut g, 0.2, 0.0), None, "and the hysteresis is gone");
    assert_eq!(step(&mut g, 0.5, 0.15), Some(CongestionReason::Loss));
    assert!(g.was_congested(f));
    assert!(g.forget(f));
    assert!(!g.was_congested(f));
}

/// Steps 2-4 split only where *consecutive* sorted values differ by more than the threshold:
/// freq_est 0.00, 0.08, 0.16 chain into one group though the ends differ by 0.16 > p_f.
#[test]
fn splits_use_consecutive_differences() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    let flows = [
        (FlowId(3), ready(-0.3, 1e6, 0.16, 0.0)),
        (FlowId(1), ready(-0.3, 1e6, 0.00, 0.0)),
        (FlowId(2), ready(-0.3, 1e6, 0.08, 0.0)),
        (FlowId(4), ready(-0.3, 1e6, 0.30, 0.0)),
    ];
    let r = g.group(&flows).unwrap();
    assert_eq!(
        r.groups,
        vec![vec![FlowId(1), FlowId(2), FlowId(3)], vec![FlowId(4)]]
    );
    assert_eq!(r.splits.len(), 1);
    let s = r.splits[0];
    assert_eq!(s.step, SplitStep::FreqEst);
    assert_eq!((s.below, s.above), (FlowId(3), FlowId(4)));
    assert_eq!(
        (s.below_value, s.above_value, s.threshold),
        (0.16, 0.30, 0.1)
    );
}

/// Step 3: var_est splits on a difference relative to the larger value (p_mad = 0.1):
/// 100 vs 109 stays together (9 <= 10.9), 109 vs 125 splits (16 > 12.5).
#[test]
fn variability_split_is_relative() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    let flows = [
        (FlowId(1), ready(-0.3, 100.0, 0.2, 0.0)),
        (FlowId(2), ready(-0.3, 109.0, 0.2, 0.0)),
        (FlowId(3), ready(-0.3, 125.0, 0.2, 0.0)),
        (FlowId(4), ready(-0.3, 1.25e9, 0.2, 0.0)),
        (FlowId(5), ready(-0.3, 1.3e9, 0.2, 0.0)),
    ];
    let r = g.group(&flows).unwrap();
    assert_eq!(
        r.groups,
        vec![
            vec![FlowId(1), FlowId(2)],
            vec![FlowId(3)],
            vec![FlowId(4), FlowId(5)]
        ]
    );
    assert!(r.splits.iter().all(|s| s.step == SplitStep::VarEst));
    assert_eq!(r.splits[0].threshold, 12.5);
}

/// Step 4: skew_est splits on an absolute difference > p_s, unless a flow of the group has high
/// loss, when pkt_loss (relative, p_d) is used instead.
#[test]
fn skew_split_and_the_loss_alternative() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    let r = g
        .group(&[
            (FlowId(1), ready(-0.6, 1e6, 0.2, 0.0)),
            (FlowId(2), ready(-0.5, 1e6, 0.2, 0.0)),
            (FlowId(3), ready(-0.2, 1e6, 0.2, 0.0)),
        ])
        .unwrap();
    assert_eq!(r.groups, vec![vec![FlowId(1), FlowId(2)], vec![FlowId(3)]]);
    assert_eq!(r.splits[0].step, SplitStep::SkewEst);

    // Same skews, all with high loss: skew is no longer used; 0.20 vs 0.21 is within 10 %.
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    let r = g
        .group(&[
            (FlowId(1), ready(-0.6, 1e6, 0.2, 0.20)),
            (FlowId(2), ready(-0.5, 1e6, 0.2, 0.21)),
            (FlowId(3), ready(-0.2, 1e6, 0.2, 0.205)),
        ])
        .unwrap();
    assert_eq!(r.groups, vec![vec![FlowId(1), FlowId(2), FlowId(3)]]);
    assert!(r.splits.is_empty());
    // 0.2 vs 0.4 differs by more than 10 % of 0.4.
    let r = g
        .group(&[
            (FlowId(1), ready(-0.6, 1e6, 0.2, 0.2)),
            (FlowId(2), ready(-0.6, 1e6, 0.2, 0.4)),
        ])
        .unwrap();
    assert_eq!(r.groups, vec![vec![FlowId(1)], vec![FlowId(2)]]);
    assert_eq!(r.splits[0].step, SplitStep::PktLoss);
}

/// Flows without 2*M intervals of data, or without any compared sample, are reported apart and
/// their hysteresis state is left as it was. Closed intervals without data do not count.
#[test]
fn flows_without_enough_history_are_reported_not_grouped() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    g.group(&[(FlowId(1), ready(-0.5, 1e6, 0.2, 0.0))]).unwrap();
    let young = FlowSummary {
        intervals_closed: 1_000,
        data_intervals: 59,
        ..ready(-0.5, 1e6, 0.2, 0.0)
    };
    let idle = FlowSummary {
        skew_samples: 0,
        ..ready(0.0, 0.0, 0.0, 0.0)
    };
    let r = g.group(&[(FlowId(2), young), (FlowId(1), idle)]).unwrap();
    assert_eq!(r.insufficient_data, vec![FlowId(1), FlowId(2)]);
    assert!(r.groups.is_empty() && r.not_congested.is_empty());
    assert!(g.was_congested(FlowId(1)));
    assert!(!g.was_congested(FlowId(2)));
}

/// The result does not depend on the order flows are given in, and repeats exactly.
#[test]
fn grouping_is_deterministic_and_order_independent() {
    let flows: Vec<(FlowId, FlowSummary)> = (0..12u64)
        .map(|i| {
            let f = i as f64;
            (
                FlowId(100 - i),
                ready(-0.05 * f, 1e6 * (1 + i % 3) as f64, 0.03 * f, 0.0),
            )
        })
        .collect();
    let mut reversed = flows.clone();
    reversed.reverse();
    let a = SbdGrouper::new(SbdConfig::default())
        .unwrap()
        .group(&flows)
        .unwrap();
    let b = SbdGrouper::new(SbdConfig::default())
        .unwrap()
        .group(&reversed)
        .unwrap();
    assert_eq!(a, b);
    assert!(a.groups.len() > 1, "{a:?}");
    for grp in &a.groups {
        assert!(grp.windows(2).all(|w| w[0] < w[1]));
    }
    assert!(a.groups.windows(2).all(|w| w[0][0] < w[1][0]));
}

/// (f) Bad summaries and duplicate flows are refused; the hysteresis state is unchanged.
#[test]
fn bad_summaries_are_refused_without_changing_state() {
    let mut g = SbdGrouper::new(SbdConfig::default()).unwrap();
    g.group(&[(FlowId(1), ready(-0.5, 1e6, 0.2, 0.0))]).unwrap();
    let before = g.clone();
    let good = ready(0.5, 1e6, 0.2, 0.0); // would release flow 1 ... if accepted
    let cases = [
        (ready(f64::NAN, 1e6, 0.2, 0.0), "skew_est"),
        (ready(-1.5, 1e6, 0.2, 0.0), "skew_est"),
        (ready(-0.5, -1.0, 0.2, 0.0), "var_est_ns"),
        (ready(-0.5, f64::INFINITY, 0.2, 0.0), "var_est_ns"),
        (ready(-0.5, 1e6, 1.5, 0.0), "freq_est"),
        (ready(-0.5, 1e6, 0.2, -0.1), "pkt_loss"),
        (
            FlowSummary {
                mean_delay_ns: Some(f64::NAN),
                ..ready(-0.5, 1e6, 0.2, 0.0)
            },
            "mean_delay_ns",
        ),
    ];
    for (bad, field) in cases {
        let e = g.group(&[(FlowId(1), good), (FlowId(2), bad)]).unwrap_err();
        assert_eq!(invalid_field(e), field);
        assert_eq!(g, before);
    }
    let e = g
        .group(&[(FlowId(1), good), (FlowId(1), good)])
        .unwrap_err();
    assert_eq!(e, Error::DuplicateFlow(FlowId(1)));
    assert_eq!(g, before);
}

// ---------------------------------------------------------------------------------------------
// End to end (e): synthetic bottleneck traces through FlowStats and the grouping.

/// Queueing delay in ms of a bottleneck whose queue oscillates with `period_ms`: high (and
/// slowly rising) for the fraction `full` of the period, nearly empty for the rest.
fn queue_ms(t_ms: u64, period_ms: u64, full: f64, q_max_ms: f64) -> f64 {
    let x = (t_ms % period_ms) as f64 / period_ms as f64;
    if x < full {
        q_max_ms * (0.7 + 0.3 * x / full)
    } else {
        q_max_ms * 0.1
    }
}

#[test]
fn end_to_end_shared_separate_and_uncongested_flows() {
    let cfg = SbdConfig::default();
    let mut flows: Vec<FlowStats> = (0..4)
        .map(|_| FlowStats::new(cfg, Instant::ZERO).unwrap())
        .collect();
    let mut rng = Pcg64::seed_from_u64(2018);
    let noise = |rng: &mut Pcg64| rng.random_range(-500_000i64..=500_000);
    let end_ms = 70_000; // 200 intervals of 350 ms
    for tick in 0..end_ms / 10 {
        let t = tick * 10;
        // A and B share bottleneck X (period 4 s); their sample times differ by 3 ms, their
        // paths' fixed delays and clock offsets differ (B's OWD is negative).
        let qa = queue_ms(t, 4_000, 0.75, 50.0);
        let qb = queue_ms(t + 3, 4_000, 0.75, 50.0);
        let a = (20.0 + qa) * 1e6;
        let b = (-5_000.0 + 12.0 + qb) * 1e6;
        flows[0]
            .on_packet(Instant::from_millis(t), a as i64 + noise(&mut rng))
            .unwrap();
        flows[1]
            .on_packet(Instant::from_millis(t + 3), b as i64 + noise(&mut rng))
            .unwrap();
        // C sits behind bottleneck Y, oscillating with a 2 s period.
        let qc = queue_ms(t + 5, 2_000, 0.6, 40.0);
        flows[2]
            .on_packet(
                Instant::from_millis(t + 5),
                ((30.0 + qc) * 1e6) as i64 + noise(&mut rng),
            )
            .unwrap();
        // D has no bottleneck: flat delay with an occasional positive spike.
        let spike = if tick % 20 == 0 { 5.0 } else { 0.0 };
        flows[3]
            .on_packet(Instant::from_millis(t + 7), ((15.0 + spike) * 1e6) as i64)
            .unwrap();
    }
    let summaries: Vec<(FlowId, FlowSummary)> = flows
        .iter_mut()
        .enumerate()
        .map(|(i, f)| {
            f.advance(Instant::from_millis(end_ms)).unwrap();
            (FlowId(i as u64 + 1), f.summary())
        })
        .collect();
    for (id, s) in &summaries {
        assert!(s.data_intervals >= cfg.warmup_intervals(), "{id}: {s:?}");
    }
    let (a, b, c, d) = (
        summaries[0].1,
        summaries[1].1,
        summaries[2].1,
        summaries[3].1,
    );
    assert!(
        a.skew_est < -0.2 && b.skew_est < -0.2 && c.skew_est < -0.05,
        "{a:?} {b:?} {c:?}"
    );
    assert!(d.skew_est > 0.5, "{d:?}");
    assert!((a.freq_est - b.freq_est).abs() <= 0.04, "{a:?} {b:?}");
    assert!(c.freq_est - a.freq_est > 0.1, "{a:?} {c:?}");

    let mut g = SbdGrouper::new(cfg).unwrap();
    let r = g.group(&summaries).unwrap();
    assert_eq!(r.not_congested, vec![FlowId(4)], "{r:#?}");
    assert!(r.together(FlowId(1), FlowId(2)), "{r:#?}");
    assert!(!r.together(FlowId(1), FlowId(3)), "{r:#?}");
    assert_eq!(r.groups.len(), 2, "{r:#?}");
    assert!(r
        .splits
        .iter()
        .any(|s| s.step == SplitStep::FreqEst && s.above == FlowId(3)));
}

// ---------------------------------------------------------------------------------------------
// The warm-up counts intervals with data (RFC 8382 sec. 3.3.2), and a silence restarts it.

/// A queue-like OWD pattern for one interval: mostly high with one low sample, so skew_base_T is
/// negative once a mean_delay exists (a congested-looking flow that would be grouped).
fn busy(k: u64) -> [i64; 5] {
    let b = 1_000 + (k % 3) as i64 * 10;
    [b + 50, b + 50, b + 50, b + 50, b - 200]
}

/// Whether the grouping made a decision (congested or not) for the flow's summary.
fn decided(cfg: SbdConfig, s: FlowSummary) -> bool {
    let r = SbdGrouper::new(cfg)
        .unwrap()
        .group(&[(FlowId(1), s)])
        .unwrap();
    assert_eq!(
        r.insufficient_data.len() + r.not_congested.len() + r.congested.len(),
        1
    );
    r.insufficient_data.is_empty()
}

/// A flow created long before it sends: the empty intervals before its first packet are no
/// history. With N = M * 2 = 8, the flow first sends at interval 90; after 1, 2, ..., 7 intervals
/// of data it is still warming up (its mean_delay rests on at most 7 E[OWD]), after 8 it is
/// grouped. Counting closed intervals, as before, it was grouped after one interval of data.
#[test]
fn warmup_counts_intervals_with_data_not_empty_ones() {
    let cfg = tiny(8, 4);
    assert_eq!(cfg.warmup_intervals(), 8);
    let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
    for k in 90..98u64 {
        feed_interval(&mut s, k, &busy(k));
        close_through(&mut s, k);
        let sum = s.summary();
        let data = k - 89;
        assert_eq!(sum.intervals_closed, k + 1);
        assert_eq!(sum.data_intervals, data, "{sum:?}");
        assert_eq!(
            decided(cfg, sum),
            data >= 8,
            "after {data} intervals of data: {sum:?}"
        );
    }
}

/// A silence long enough to leave mean_delay undefined (more than M empty intervals) restarts the
/// warm-up: the statistics after it rest on the new samples only. A shorter gap does not.
#[test]
fn a_silence_that_undefines_mean_delay_restarts_the_warmup() {
    let cfg = tiny(8, 4);
    let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
    for k in 0..20u64 {
        feed_interval(&mut s, k, &busy(k));
    }
    close_through(&mut s, 19);
    assert!(decided(cfg, s.summary()));
    // A gap of 3 empty intervals (20, 21, 22; fewer than M = 4): mean_delay survives, so does the
    // warm-up, and the flow is decided on at once.
    feed_interval(&mut s, 23, &busy(23));
    close_through(&mut s, 23);
    let sum = s.summary();
    assert!(sum.mean_delay_ns.is_some());
    assert_eq!(sum.data_intervals, 21);
    assert!(decided(cfg, sum), "{sum:?}");
    // 10 empty intervals (24..=33): mean_delay is undefined, the warm-up starts again.
    close_through(&mut s, 33);
    assert_eq!(s.summary().mean_delay_ns, None);
    assert_eq!(s.summary().data_intervals, 0);
    for k in 34..42u64 {
        feed_interval(&mut s, k, &busy(k));
        close_through(&mut s, k);
        let sum = s.summary();
        let data = k - 33;
        assert_eq!(sum.data_intervals, data);
        assert_eq!(
            decided(cfg, sum),
            data >= 8,
            "after {data} intervals of data: {sum:?}"
        );
    }
}

/// freq_est = crossings / N and pkt_loss are taken over N intervals, so with N > 2*M the warm-up
/// is N intervals of data: before that freq_est divides crossings of fewer than N intervals by N
/// (biased low). N = 8, M = 2: warm-up 8, not 4.
#[test]
fn warmup_covers_the_n_window_when_n_exceeds_2m() {
    let cfg = tiny(8, 2);
    assert_eq!(cfg.warmup_intervals(), 8);
    assert_eq!(tiny(8, 4).warmup_intervals(), 8);
    assert_eq!(tiny(8, 3).warmup_intervals(), 8);
    assert_eq!(tiny(10, 8).warmup_intervals(), 16);
    let mut s = FlowStats::new(cfg, Instant::ZERO).unwrap();
    for k in 0..8u64 {
        feed_interval(&mut s, k, &busy(k));
        close_through(&mut s, k);
        assert_eq!(
            decided(cfg, s.summary()),
            k + 1 >= 8,
            "after {} intervals",
            k + 1
        );
    }
}

/// After a silence that leaves mean_delay undefined, the side of the last significant excursion
/// and the variability reference are forgotten with it: the first excursion after the restart
/// only sets the side, it is not a crossing. M = 2, N = 8. Interval 2 goes below (side = below);
/// intervals 3, 4 are empty (mean_delay undefined); interval 5 at 200 has no mean_delay to
/// compare with and no previous E[OWD] (var_est stays 0); interval 6 at 400 lies above
/// mean_delay = 200: the first excursion after the restart, no crossing. (Keeping the old side
/// and the old reference 50 would have given var_est = |200 - 50| = 150, a band of 105, and a
/// crossing below -> above: freq_est 1/8.)
#[test]
fn a_silence_forgets_the_crossing_side_and_the_reference() {
    let mut s = FlowStats::new(tiny(8, 2), Instant::ZERO).unwrap();
    feed_interval(&mut s, 0, &[100; 5]);
    feed_interval(&mut s, 1, &[100; 5]);
    feed_interval(&mut s, 2, &[50; 5]);
    close_through(&mut s, 4);
    assert_eq!(s.summary().mean_delay_ns, None);
    assert_eq!(s.summary().freq_est, 0.0);
    feed_interval(&mut s, 5, &[200; 5]);
    close_through(&mut s, 5);
    let r5 = s.last_interval().unwrap();
    assert_eq!((r5.var_samples, r5.skew_samples), (0, 0));
    assert_eq!(s.summary().var_est_ns, 0.0);
    feed_interval(&mut s, 6, &[400; 5]);
    close_through(&mut s, 6);
    assert!(!s.last_interval().unwrap().crossing);
    assert_eq!(s.summary().freq_est, 0.0);
    // The side is set: going back below is the first crossing after the restart.
    feed_interval(&mut s, 7, &[100; 5]);
    close_through(&mut s, 7);
    assert!(s.last_interval().unwrap().crossing);
    assert_eq!(s.summary().freq_est, 1.0 / 8.0);
}
