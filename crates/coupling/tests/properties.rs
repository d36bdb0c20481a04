//! Property tests over random sequences of register / update / leave / priority changes, valid
//! and invalid (issue 2, "What it must show").

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::tcp::{TcpCcc, TcpCoupler, TcpState, TcpUpdate};
use coupling::{Duration, Error, FlowId, Instant};
use proptest::prelude::*;

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        10 => 0.0..1e8f64,
        1 => Just(0.0),
        1 => Just(-1.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
    ]
}

fn priority() -> impl Strategy<Value = f64> {
    prop_oneof![10 => 0.05..10.0f64, 1 => Just(0.0), 1 => Just(-0.5), 1 => Just(f64::NAN)]
}

#[derive(Clone, Debug)]
enum FseOp {
    Register {
        flow: u64,
        p: f64,
        rate: f64,
    },
    Update {
        flow: u64,
        cc: f64,
        desired: Option<f64>,
        dt_ms: u64,
        rtt_ms: Option<u64>,
    },
    Leave {
        flow: u64,
    },
    SetPriority {
        flow: u64,
        p: f64,
    },
}

fn fse_op(with_desired: bool) -> impl Strategy<Value = FseOp> {
    let desired = if with_desired {
        prop_oneof![2 => Just(None), 1 => (0.0..1e8f64).prop_map(Some), 1 => Just(Some(f64::NAN))]
            .boxed()
    } else {
        Just(None).boxed()
    };
    prop_oneof![
        2 => (0..8u64, priority(), rate()).prop_map(|(flow, p, rate)| FseOp::Register { flow, p, rate }),
        6 => (0..8u64, rate(), desired, 0..500u64, prop_oneof![8 => (1..300u64).prop_map(Some), 1 => Just(None)])
            .prop_map(|(flow, cc, desired, dt_ms, rtt_ms)| FseOp::Update { flow, cc, desired, dt_ms, rtt_ms }),
        1 => (0..8u64).prop_map(|flow| FseOp::Leave { flow }),
        1 => (0..8u64, priority()).prop_map(|(flow, p)| FseOp::SetPriority { flow, p }),
    ]
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-6
}

/// Runs `ops` on a group and checks the invariants after every operation.
fn run_fse(algorithm: Algorithm, ops: &[FseOp]) -> Result<(), TestCaseError> {
    let mut g = FseGroup::new(algorithm);
    let mut now = Instant::ZERO;
    for op in ops {
        let before = format!("{g:?}");
        let result: Result<Vec<(FlowId, f64)>, Error> = match *op {
            FseOp::Register { flow, p, rate } => g
                .register(FlowId(flow), p, rate, now)
                .map(|r| vec![(FlowId(flow), r)]),
            FseOp::Update {
                flow,
                cc,
                desired,
                dt_ms,
                rtt_ms,
            } => {
                now = now + Duration::from_millis(dt_ms);
                let mut u = FseUpdate::new(cc, now);
                if let Some(d) = desired {
                    u = u.desired(d);
                }
                if let Some(r) = rtt_ms {
                    u = u.rtt(Duration::from_millis(r));
                }
                g.update(FlowId(flow), u).map(|o| {
                    let mut v = vec![(FlowId(flow), o.rate_bps)];
                    v.extend(o.assignments.iter().map(|a| (a.flow, a.rate_bps)));
                    v
                })
            }
            FseOp::Leave { flow } => g
                .leave(FlowId(flow))
                .map(|a| a.iter().map(|a| (a.flow, a.rate_bps)).collect()),
            FseOp::SetPriority { flow, p } => g
                .set_priority(FlowId(flow), p, now)
                .map(|a| a.iter().map(|a| (a.flow, a.rate_bps)).collect()),
        };
        let returned = match result {
            Err(_) => {
                prop_assert_eq!(
                    &before,
                    &format!("{g:?}"),
                    "a failed {:?} changed the group",
                    op
                );
                continue;
            }
            Ok(v) => v,
        };
        for (f, r) in &returned {
            prop_assert!(
                r.is_finite() && *r >= 0.0,
                "{:?}: rate {} for {:?}",
                op,
                r,
                f
            );
        }
        let flows = g.flows();
        for v in &flows {
            prop_assert!(
                v.fse_rate_bps.is_finite() && v.fse_rate_bps >= 0.0,
                "{:?}",
                v
            );
            prop_assert!(
                !v.desired_rate_bps.is_nan() && v.desired_rate_bps >= 0.0,
                "{:?}",
                v
            );
        }
        prop_assert!(g.sum_calculated_rate().is_finite() && g.sum_calculated_rate() >= 0.0);
        prop_assert!(g.leftover().is_finite() && g.leftover() >= 0.0);
        let s_p: f64 = flows.iter().map(|v| v.priority).sum();
        prop_assert!(
            close(g.sum_priority(), s_p),
            "S_P {} != {}",
            g.sum_priority(),
            s_p
        );
        if let FseOp::Leave { flow } = *op {
            prop_assert!(!g.contains(FlowId(flow)));
            prop_assert!(matches!(g.flow(FlowId(flow)), Err(Error::UnknownFlow(_))));
        }
        // Active algorithms with no desired-rate limit: the allocations sum to S_CR and are
        // proportional to priority.
        let uncapped = flows.iter().all(|v| v.desired_rate_bps.is_infinite());
        let delivered =
            returned.len() > 1 || matches!(op, FseOp::Leave { .. } | FseOp::SetPriority { .. });
        if algorithm.is_active() && uncapped && delivered && !flows.is_empty() {
            let sum: f64 = flows.iter().map(|v| v.fse_rate_bps).sum();
            prop_assert!(
                close(sum, g.sum_calculated_rate()),
                "sum {} != S_CR {}",
                sum,
                g.sum_calculated_rate()
            );
            for v in &flows {
                let expected = v.priority / g.sum_priority() * g.sum_calculated_rate();
                prop_assert!(close(v.fse_rate_bps, expected), "{:?} != {}", v, expected);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fse_active_invariants(ops in prop::collection::vec(fse_op(false), 1..80)) {
        run_fse(Algorithm::Active, &ops)?;
    }

    #[test]
    fn fse_conservative_invariants(ops in prop::collection::vec(fse_op(false), 1..80)) {
        run_fse(Algorithm::ConservativeActive, &ops)?;
    }

    #[test]
    fn fse_active_with_desired_rates_never_negative(ops in prop::collection::vec(fse_op(true), 1..80)) {
        run_fse(Algorithm::Active, &ops)?;
    }

    #[test]
    fn fse_simple_passive_invariants(ops in prop::collection::vec(fse_op(true), 1..80)) {
        run_fse(Algorithm::SimplePassive, &ops)?;
    }

    #[test]
    fn fse_passive_invariants(ops in prop::collection::vec(fse_op(true), 1..80)) {
        run_fse(Algorithm::Passive, &ops)?;
    }
}

#[derive(Clone, Debug)]
enum TcpOp {
    Register {
        conn: u64,
        p: f64,
        cwnd: f64,
        ssthresh: f64,
    },
    Update {
        conn: u64,
        cwnd: f64,
        ssthresh: f64,
        state: TcpState,
        timeout: bool,
    },
    Leave {
        conn: u64,
    },
    SetPriority {
        conn: u64,
        p: f64,
    },
    Ack {
        conn: u64,
    },
}

fn window() -> impl Strategy<Value = f64> {
    prop_oneof![10 => 0.0..500.0f64, 1 => Just(-1.0), 1 => Just(f64::NAN), 1 => Just(f64::INFINITY)]
}

fn tcp_op() -> impl Strategy<Value = TcpOp> {
    let state = prop_oneof![
        Just(TcpState::SlowStart),
        Just(TcpState::CongestionAvoidance),
        Just(TcpState::FastRecovery)
    ];
    prop_oneof![
        2 => (0..6u64, priority(), window(), window())
            .prop_map(|(conn, p, cwnd, ssthresh)| TcpOp::Register { conn, p, cwnd, ssthresh }),
        8 => (0..6u64, window(), window(), state, prop::bool::weighted(0.1))
            .prop_map(|(conn, cwnd, ssthresh, state, timeout)| TcpOp::Update { conn, cwnd, ssthresh, state, timeout }),
        1 => (0..6u64).prop_map(|conn| TcpOp::Leave { conn }),
        1 => (0..6u64, priority()).prop_map(|(conn, p)| TcpOp::SetPriority { conn, p }),
        3 => (0..6u64).prop_map(|conn| TcpOp::Ack { conn }),
    ]
}

fn run_ccc(handover: bool, ops: &[TcpOp]) -> Result<(), TestCaseError> {
    let mut g = TcpCcc::new(handover);
    for op in ops {
        let before = format!("{g:?}");
        let sum_before = g.sum_cwnd();
        let other_in_ca = |g: &TcpCcc, conn: u64| {
            g.conns()
                .iter()
                .any(|v| v.conn != FlowId(conn) && v.state == TcpState::CongestionAvoidance)
        };
        let ca_elsewhere = match op {
            TcpOp::Update { conn, .. } => other_in_ca(&g, *conn),
            _ => false,
        };
        let len_before = g.len();
        let result = match *op {
            TcpOp::Register {
                conn,
                p,
                cwnd,
                ssthresh,
            } => g.register(FlowId(conn), p, cwnd, ssthresh).map(Some),
            TcpOp::Update {
                conn,
                cwnd,
                ssthresh,
                state,
                timeout,
            } => g.update(
                FlowId(conn),
                TcpUpdate {
                    cwnd_pkts: cwnd,
                    ssthresh_pkts: ssthresh,
                    state,
                    timeout,
                },
            ),
            TcpOp::Leave { conn } => g.leave(FlowId(conn)).map(|_| None),
            TcpOp::SetPriority { conn, p } => g.set_priority(FlowId(conn), p).map(|_| None),
            TcpOp::Ack { conn } => {
                let mut out = Vec::new();
                let r = g.on_ack(FlowId(conn), &mut out);
                for rel in &out {
                    prop_assert!(
                        rel.cwnd_pkts.is_finite() && rel.cwnd_pkts >= 0.0,
                        "{:?}",
                        rel
                    );
                }
                r.map(|_| None)
            }
        };
        let resp = match result {
            Err(_) => {
                prop_assert_eq!(
                    &before,
                    &format!("{g:?}"),
                    "a failed {:?} changed the group",
                    op
                );
                continue;
            }
            Ok(r) => r,
        };
        if let Some(r) = resp {
            prop_assert!(r.cwnd_pkts.is_finite() && r.cwnd_pkts >= 0.0, "{:?}", r);
            prop_assert!(
                r.ssthresh_pkts.is_finite() && r.ssthresh_pkts >= 0.0,
                "{:?}",
                r
            );
        }
        prop_assert!(g.sum_cwnd().is_finite() && g.sum_cwnd() >= 0.0);
        let s_p: f64 = g.conns().iter().map(|v| v.priority).sum();
        prop_assert!(close(g.sum_priority(), s_p));
        if let TcpOp::Update {
            state: TcpState::SlowStart,
            ..
        } = op
        {
            if ca_elsewhere {
                prop_assert_eq!(
                    g.sum_cwnd(),
                    sum_before,
                    "{:?}: aggregate slow-started while a connection is in CA",
                    op
                );
            }
        }
        if let TcpOp::Leave { conn } = *op {
            prop_assert_eq!(g.len(), len_before - 1);
            prop_assert!(g.conn(FlowId(conn)).is_err());
            prop_assert!(g.coco() != Some(FlowId(conn)));
            prop_assert!(g.conns().iter().all(|v| v.conn != FlowId(conn)));
            if !g.is_empty() {
                prop_assert!(g.coco().is_some());
            }
        }
    }
    Ok(())
}

/// A loss event on `lossy` connections (a non-empty subset, in any order): all of them enter FR
/// before any leaves it, the others keep reporting increases in CA meanwhile, and each leaves FR
/// with half the window it was last given.
#[derive(Clone, Debug)]
struct LossEvent {
    priorities: Vec<f64>,
    lossy: Vec<usize>,
    exit_order: Vec<usize>,
    noise: Vec<(usize, usize)>,
}

fn loss_event() -> impl Strategy<Value = LossEvent> {
    prop::collection::vec(0.1..5.0f64, 2..8)
        .prop_flat_map(|priorities| {
            let n = priorities.len();
            let lossy = Just((0..n).collect::<Vec<_>>())
                .prop_shuffle()
                .prop_flat_map(move |perm| (1..=n).prop_map(move |k| perm[..k].to_vec()));
            (
                Just(priorities),
                lossy,
                prop::collection::vec((0..n, 0..2 * n + 2), 0..12),
            )
                .prop_flat_map(|(priorities, lossy, noise)| {
                    let exit = Just(lossy.clone()).prop_shuffle();
                    (Just(priorities), Just(lossy), exit, Just(noise))
                })
        })
        .prop_map(|(priorities, lossy, exit_order, noise)| LossEvent {
            priorities,
            lossy,
            exit_order,
            noise,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ccc_invariants(ops in prop::collection::vec(tcp_op(), 1..100)) {
        run_ccc(false, &ops)?;
    }

    #[test]
    fn ccc_handover_invariants(ops in prop::collection::vec(tcp_op(), 1..100)) {
        run_ccc(true, &ops)?;
    }

    #[test]
    fn ccc_reduces_once_per_loss_event(ev in loss_event()) {
        let mut g = TcpCcc::new(false);
        let n = ev.priorities.len();
        let mut told = vec![0.0; n];
        for (i, p) in ev.priorities.iter().enumerate() {
            told[i] = g.register(FlowId(i as u64), *p, 10.0, 1e9).unwrap().cwnd_pkts;
        }
        // Everyone reaches CA and takes its share.
        for _ in 0..3 {
            for (i, w) in told.iter_mut().enumerate() {
                let ss = *w + 1.0;
                *w = g.update(FlowId(i as u64), TcpUpdate::new(ss, ss, TcpState::CongestionAvoidance)).unwrap().unwrap().cwnd_pkts;
            }
        }
        let before = g.sum_cwnd();
        let mut decreases = 0;
        let mut last = before;
        let mut in_fr = vec![false; n];
        let mut step = |g: &mut TcpCcc, i: usize, u: TcpUpdate, told: &mut Vec<f64>| {
            if let Some(r) = g.update(FlowId(i as u64), u).unwrap() {
                told[i] = r.cwnd_pkts;
            }
            if g.sum_cwnd() < last - 1e-9 {
                decreases += 1;
            }
            last = g.sum_cwnd();
        };
        let mut noise = ev.noise.iter().peekable();
        let total_steps = 2 * ev.lossy.len();
        for k in 0..total_steps {
            while let Some(&&(conn, at)) = noise.peek() {
                if at != k { break; }
                noise.next();
                if !ev.lossy.contains(&conn) {
                    let w = told[conn] + 1.0;
                    step(&mut g, conn, TcpUpdate::new(w, w, TcpState::CongestionAvoidance), &mut told);
                }
            }
            if k < ev.lossy.len() {
                let i = ev.lossy[k];
                in_fr[i] = true;
                step(&mut g, i, TcpUpdate::new(told[i], told[i] / 2.0, TcpState::FastRecovery), &mut told);
                // A connection in FR reports again (e.g. on a partial ACK).
                step(&mut g, i, TcpUpdate::new(told[i], told[i] / 2.0, TcpState::FastRecovery), &mut told);
            } else {
                let i = ev.exit_order[k - ev.lossy.len()];
                in_fr[i] = false;
                let half = told[i] / 2.0;
                step(&mut g, i, TcpUpdate::new(half, half, TcpState::CongestionAvoidance), &mut told);
                // Connections still in FR keep reporting it after others have left FR.
                for j in 0..n {
                    if in_fr[j] {
                        step(&mut g, j, TcpUpdate::new(told[j], told[j] / 2.0, TcpState::FastRecovery), &mut told);
                    }
                }
            }
        }
        prop_assert_eq!(decreases, 1, "losses on {:?} reduced sum_cwnd {} times", ev.lossy, decreases);
        // Halved, give or take the CoCo's increases between the loss and its reduction.
        prop_assert!(g.sum_cwnd() <= before / 2.0 + 12.0 && g.sum_cwnd() >= before / 2.0 - 1e-9,
            "{} -> {}", before, g.sum_cwnd());
    }
}
