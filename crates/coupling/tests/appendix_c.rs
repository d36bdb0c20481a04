//! RFC 8699 (draft, seed 003 ch. 10) Appendix C.1, "Example operation (passive)", step by step.
//!
//! The toy controller "starts out with 1 Mbit/s, increases its rate by 1 Mbit/s in the absence of
//! congestion and decreases it by 2 Mbit/s in the presence of congestion": every CC_R below is the
//! flow's previous FSE_R plus 1 or minus 2, as in the draft. Each table is compared with the
//! draft's, which prints two decimals.

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::{FlowId, Instant};

const M: f64 = 1e6;

/// One row of the draft's tables: flow, P, FSE_R, DR, Rate (Mbit/s).
type Row = (u64, f64, f64, f64, f64);

fn check(g: &FseGroup, step: &str, rate: Option<(u64, f64)>, rows: &[Row], s_cr: f64, tlo: f64) {
    let close = |a: f64, b: f64| (a - b).abs() < 0.006;
    let mut got = g.flows();
    got.sort_by_key(|v| v.flow);
    assert_eq!(got.len(), rows.len(), "{step}: number of flows");
    for (v, &(id, p, fse_r, dr, sending)) in got.iter().zip(rows) {
        assert_eq!(v.flow, FlowId(id), "{step}");
        assert_eq!(v.priority, p, "{step}: P of #{id}");
        assert!(
            close(v.fse_rate_bps / M, fse_r),
            "{step}: FSE_R of #{id} = {} != {fse_r}",
            v.fse_rate_bps / M
        );
        assert!(
            close(v.desired_rate_bps / M, dr),
            "{step}: DR of #{id} = {} != {dr}",
            v.desired_rate_bps / M
        );
        // The Rate column is what the flow sends: the rate the FSE last gave it, i.e. FSE_R.
        assert!(close(v.fse_rate_bps / M, sending), "{step}: Rate of #{id}");
    }
    if let Some((id, r)) = rate {
        assert!(
            close(r / M, g.flow(FlowId(id)).unwrap().fse_rate_bps / M),
            "{step}: returned rate"
        );
    }
    assert!(
        close(g.sum_calculated_rate() / M, s_cr),
        "{step}: S_CR = {} != {s_cr}",
        g.sum_calculated_rate() / M
    );
    assert!(
        close(g.leftover() / M, tlo),
        "{step}: TLO = {} != {tlo}",
        g.leftover() / M
    );
}

#[test]
fn rfc8699_appendix_c_example_operation() {
    let mut g = FseGroup::new(Algorithm::Passive);
    let mut now = 0;
    let mut tick = || {
        now += 100;
        Instant::from_millis(now)
    };
    let (f1, f2) = (FlowId(1), FlowId(2));

    // Flow #1 begins: a bulk transfer with top priority.
    g.register(f1, 1.0, 1.0 * M, tick()).unwrap();
    check(
        &g,
        "flow 1 registers",
        None,
        &[(1, 1.0, 1.0, 1.0, 1.0)],
        1.0,
        0.0,
    );

    // "Its congestion controller gradually increases its rate."
    for cc in 2..=10 {
        let r = g
            .update(f1, FseUpdate::new(cc as f64 * M, tick()))
            .unwrap()
            .rate_bps;
        assert_eq!(
            r,
            cc as f64 * M,
            "alone, flow 1 gets what its controller asks for"
        );
    }
    check(
        &g,
        "flow 1 at 10",
        None,
        &[(1, 1.0, 10.0, 10.0, 10.0)],
        10.0,
        0.0,
    );

    // Flow #2 joins with priority 0.5.
    g.register(f2, 0.5, 1.0 * M, tick()).unwrap();
    check(
        &g,
        "flow 2 joins",
        None,
        &[(1, 1.0, 10.0, 10.0, 10.0), (2, 0.5, 1.0, 1.0, 1.0)],
        11.0,
        0.0,
    );

    // Flow #1 updates to 8 (10 - 2): S_CR = 9, rate = 1/1.5 * 9 = 6, DR stays 8.
    let r = g
        .update(f1, FseUpdate::new(8.0 * M, tick()))
        .unwrap()
        .rate_bps;
    check(
        &g,
        "flow 1 to 8",
        Some((1, r)),
        &[(1, 1.0, 6.0, 8.0, 6.0), (2, 0.5, 1.0, 1.0, 1.0)],
        9.0,
        0.0,
    );
    assert!((r / M - 6.0).abs() < 1e-9);

    // Flow #2 increases to 2 (1 + 1): S_CR = 10, rate = 0.5/1.5 * 10 = 3.33.
    let r = g
        .update(f2, FseUpdate::new(2.0 * M, tick()))
        .unwrap()
        .rate_bps;
    check(
        &g,
        "flow 2 to 2",
        Some((2, r)),
        &[(1, 1.0, 6.0, 8.0, 6.0), (2, 0.5, 3.33, 3.33, 3.33)],
        10.0,
        0.0,
    );

    // Flow #1 increases to 7 (6 + 1) but its application limits it to 2: TLO = 7.33 - 2 = 5.33.
    let cc = g.flow(f1).unwrap().fse_rate_bps + M;
    let r = g
        .update(f1, FseUpdate::new(cc, tick()).desired(2.0 * M))
        .unwrap()
        .rate_bps;
    check(
        &g,
        "flow 1 limited to 2",
        Some((1, r)),
        &[(1, 1.0, 2.0, 2.0, 2.0), (2, 0.5, 3.33, 3.33, 3.33)],
        11.0,
        5.33,
    );

    // Flow #2 increases to 4.33 (3.33 + 1): S_CR = 12, rate = 4 + 5.33 = 9.33, TLO taken.
    let cc = g.flow(f2).unwrap().fse_rate_bps + M;
    assert!((cc / M - 4.33).abs() < 0.006);
    let r = g.update(f2, FseUpdate::new(cc, tick())).unwrap().rate_bps;
    check(
        &g,
        "flow 2 takes TLO",
        Some((2, r)),
        &[(1, 1.0, 2.0, 2.0, 2.0), (2, 0.5, 9.33, 9.33, 9.33)],
        12.0,
        0.0,
    );

    // Flow #1 terminates; flow #2 decreases to 7.33 (9.33 - 2): new_S_CR = 11.33 includes flow 1's
    // 2, S_CR = 9.33, flow 1 is deleted, S_P = 0.5, rate = 9.33.
    g.leave(f1).unwrap();
    let cc = g.flow(f2).unwrap().fse_rate_bps - 2.0 * M;
    let r = g.update(f2, FseUpdate::new(cc, tick())).unwrap().rate_bps;
    check(
        &g,
        "flow 1 terminated",
        Some((2, r)),
        &[(2, 0.5, 9.33, 9.33, 9.33)],
        9.33,
        0.0,
    );
    assert_eq!(g.sum_priority(), 0.5);
}
