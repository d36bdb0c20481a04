//! Property tests over random sequences of register / update / leave / priority changes, valid
//! and invalid (issue 2, "What it must show").

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::tcp::{
    allowance, Arith, Ccc, CouplerKind, Float, Int, TcpCcc, TcpCoupler, TcpState, TcpUpdate,
};
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

/// Valid priorities over the whole accepted range (issue 11), and invalid ones.
fn priority() -> impl Strategy<Value = f64> {
    prop_oneof![
        10 => any_priority(),
        1 => Just(0.0),
        1 => Just(-0.5),
        1 => Just(f64::NAN),
        1 => Just(1.5e12),
    ]
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

/// Relative closeness only: priorities go down to 5e-324, where any absolute slack hides a sum
/// that cancellation turned into 0.
fn close_rel(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Runs `ops` on a group and checks the invariants after every operation.
fn run_fse(algorithm: Algorithm, ops: &[FseOp]) -> Result<(), TestCaseError> {
    let mut g = FseGroup::new(algorithm);
    let mut now = Instant::ZERO;
    for op in ops {
        let before = format!("{g:?}");
        let leftover_before = g.leftover();
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
        // No told rate jumps above the group's aggregate (issue 11's audit): at most S_CR, or
        // for a registration the flow's own initial rate. The passive algorithm may add the
        // leftover TLO, which grows by at most the updating flow's share (<= S_CR) in step (c).
        let s_cr = g.sum_calculated_rate();
        let bound = match (op, algorithm) {
            (FseOp::Register { rate, .. }, _) => *rate,
            (_, Algorithm::Passive) => 2.0 * s_cr + leftover_before,
            _ => s_cr,
        };
        for (f, r) in &returned {
            prop_assert!(
                r.is_finite() && *r >= 0.0,
                "{:?}: rate {} for {:?}",
                op,
                r,
                f
            );
            prop_assert!(
                *r <= bound * (1.0 + 1e-12),
                "{:?}: rate {} for {:?} above {} (S_CR {})",
                op,
                r,
                f,
                bound,
                s_cr
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
            close_rel(g.sum_priority(), s_p),
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
    #![proptest_config(ProptestConfig::with_cases(10000))]

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
                    in_flight_pkts: 0.0,
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
        prop_assert!(close_rel(g.sum_priority(), s_p));
        if let TcpOp::Update {
            state: TcpState::SlowStart,
            ..
        } = op
        {
            if ca_elsewhere {
                prop_assert!(
                    g.sum_cwnd() <= sum_before,
                    "{:?}: aggregate slow-started while a connection is in CA ({} -> {})",
                    op,
                    sum_before,
                    g.sum_cwnd()
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
    #![proptest_config(ProptestConfig::with_cases(10000))]

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

// --- issue 11: no burst, one reduction per loss event, priorities over the whole range ---------

/// Priorities over the whole accepted range (0, 1e12], log-uniform, with the extremes.
fn any_priority() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => (-323.0..12.0f64).prop_map(|e| 10f64.powf(e).clamp(5e-324, 1e12)),
        1 => Just(5e-324),
        1 => Just(f64::MIN_POSITIVE),
        1 => Just(1e12),
        2 => 0.1..10.0f64,
    ]
}

/// What happens to one sender next.
#[derive(Clone, Debug)]
enum RenoOp {
    Join {
        p: f64,
        iw: f64,
    },
    /// `acked` segments are acknowledged (and the handover clock ticks).
    Ack {
        acked: u8,
    },
    Loss,
    ExitFr,
    Timeout,
    Leave,
    SetPriority {
        p: f64,
    },
}

fn reno_op() -> impl Strategy<Value = (usize, RenoOp)> {
    let op = prop_oneof![
        2 => (any_priority(), 1.0..40.0f64).prop_map(|(p, iw)| RenoOp::Join { p, iw }),
        12 => (1..3u8).prop_map(|acked| RenoOp::Ack { acked }),
        2 => Just(RenoOp::Loss),
        2 => Just(RenoOp::ExitFr),
        2 => Just(RenoOp::Timeout),
        1 => Just(RenoOp::Leave),
        1 => any_priority().prop_map(|p| RenoOp::SetPriority { p }),
    ];
    (0..6usize, op)
}

/// A NewReno sender as the coupler sees it: the window it was told, its ssthresh, its state
/// (`Loss` is after a timeout, reported as SS) and what it has in flight. With `int` it keeps
/// whole packets as Linux does: congestion avoidance counts acknowledged packets in `cnt` and adds
/// a packet per window of them (`tcp_cong_avoid_ai`), and ssthresh is floored.
#[derive(Clone, Debug)]
struct Reno {
    int: bool,
    cnt: f64,
    cwnd: f64,
    ssthresh: f64,
    fr: bool,
    in_flight: f64,
    /// Timed out and has not reported since: another timeout is a repeated RTO.
    rto_pending: bool,
    /// The coupler's `reductions()` right after this sender last entered FR.
    fr_epoch: u64,
}

impl Reno {
    /// A sender joining a group, before it is told its window (whole packets with `int`).
    fn joining(int: bool) -> Self {
        Reno {
            int,
            cnt: 0.0,
            cwnd: 0.0,
            ssthresh: 1e9,
            fr: false,
            in_flight: 0.0,
            rto_pending: false,
            fr_epoch: 0,
        }
    }

    fn state(&self) -> TcpState {
        if self.fr {
            TcpState::FastRecovery
        } else if self.cwnd < self.ssthresh {
            TcpState::SlowStart
        } else {
            TcpState::CongestionAvoidance
        }
    }
    /// The window after `acked` packets are acknowledged outside FR.
    fn grow(&mut self, acked: f64) -> f64 {
        if self.state() == TcpState::SlowStart {
            self.cwnd + acked
        } else if self.int {
            self.cnt += acked;
            let w = self.cwnd.max(1.0);
            let inc = (self.cnt / w).floor();
            self.cnt -= inc * w;
            self.cwnd + inc
        } else {
            self.cwnd + acked / self.cwnd.max(1.0)
        }
    }
    /// ssthresh after a loss: half the flight, at least 2 (floored with `int`).
    fn loss_ssthresh(&self) -> f64 {
        let h = (self.in_flight / 2.0).max(2.0);
        if self.int {
            h.floor()
        } else {
            h
        }
    }
    fn apply(&mut self, cwnd: f64, ssthresh: f64) {
        self.cwnd = cwnd;
        self.ssthresh = ssthresh;
        // It sends what the window allows.
        self.in_flight = self.in_flight.max(cwnd.floor());
    }
}

const EPS: f64 = 1e-9;

/// Drives `kind` with `ops`, checking after every call: every answer allows no burst beyond
/// `max_burst` (told cwnd <= max(own cwnd, in flight + max_burst, 1)); a release adds at most one
/// segment; everything stays finite. For ctrlTCP also: the aggregate decreases only when a loss
/// event begins (an FR entry, or a timeout of a connection not in FR and not a repeated RTO,
/// while no event is in progress) or when every connection has timed out, and always does when
/// one begins; and `reductions()` counts exactly those. A timeout is a repeated RTO (no event) if
/// the connection has not reported since its last one.
fn run_reno<A: Arith>(
    kind: CouplerKind,
    max_burst: f64,
    ops: &[(usize, RenoOp)],
) -> Result<(), TestCaseError> {
    let int = !A::SUFFIX.is_empty();
    let mut ccc = match kind {
        CouplerKind::Ccc { handover, int: i } => {
            assert_eq!(i, int, "the kind's arithmetic is A");
            Some(Ccc::<A>::new(handover))
        }
        _ => None,
    };
    // The integer mode keeps priorities to 2^-16: smaller ones are refused (a test of its own).
    let prio = |p: f64| if int { p.max(1.0 / 65536.0) } else { p };
    let mut other = (ccc.is_none()).then(|| kind.build());
    macro_rules! g {
        () => {
            match ccc.as_mut() {
                Some(c) => c as &mut dyn TcpCoupler,
                None => other.as_mut().unwrap().as_mut(),
            }
        };
    }
    g!().set_max_burst_pkts(max_burst).unwrap();
    let mut senders: Vec<Option<Reno>> = vec![None; 6];
    let mut released = Vec::new();
    // The coupler's `reductions()` once the current loss event's reduction was made.
    let mut event_epoch = 0u64;
    for (i, op) in ops {
        let i = *i;
        let id = FlowId(i as u64);
        let sum_before = g!().sum_cwnd();
        let reductions_before = ccc.as_ref().map(|c| c.reductions());
        let quiet = ccc.as_ref().is_some_and(|c| c.loss_event().is_none());
        let view = g!().conn(id).ok();
        // What the op is for the aggregate: a loss event must begin / may not / a restart may.
        let mut must_reduce = false;
        let mut may_reduce = false;
        let Some(s) = senders[i].as_mut() else {
            if let RenoOp::Join { p, iw } = *op {
                let iw = if int { iw.floor().max(1.0) } else { iw };
                let r = g!().register(id, prio(p), iw, 1e9).unwrap();
                prop_assert!(
                    r.cwnd_pkts <= iw.max(max_burst).max(1.0) + EPS,
                    "join {:?} -> {:?}",
                    op,
                    r
                );
                let mut s = Reno::joining(int);
                s.apply(r.cwnd_pkts, r.ssthresh_pkts);
                senders[i] = Some(s);
                prop_assert!(g!().sum_cwnd() >= sum_before - EPS);
            }
            continue;
        };
        let update;
        match *op {
            RenoOp::Join { .. } => continue,
            RenoOp::Ack { acked } => {
                if !s.fr {
                    s.in_flight = (s.in_flight - acked as f64).max(0.0);
                    let grown = s.grow(acked as f64);
                    let u =
                        TcpUpdate::new(grown, s.ssthresh, s.state()).with_in_flight(s.in_flight);
                    update = Some(TcpUpdate {
                        state: if u.cwnd_pkts < u.ssthresh_pkts {
                            TcpState::SlowStart
                        } else {
                            TcpState::CongestionAvoidance
                        },
                        ..u
                    });
                } else {
                    update = Some(
                        TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::FastRecovery)
                            .with_in_flight(s.in_flight),
                    );
                }
            }
            RenoOp::Loss => {
                if s.fr {
                    continue;
                }
                s.fr = true;
                s.ssthresh = s.loss_ssthresh();
                must_reduce = quiet;
                update = Some(
                    TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::FastRecovery)
                        .with_in_flight(s.in_flight),
                );
            }
            RenoOp::ExitFr => {
                if !s.fr {
                    continue;
                }
                s.fr = false;
                s.cwnd = s.ssthresh;
                update = Some(
                    TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::CongestionAvoidance)
                        .with_in_flight(s.in_flight.min(s.cwnd)),
                );
            }
            RenoOp::Timeout => {
                let v = view.unwrap();
                let all_others_timed_out = g!().conns().iter().all(|c| c.conn == id || c.timed_out);
                must_reduce = quiet && !s.fr && !s.rto_pending && v.state != TcpState::FastRecovery;
                may_reduce = all_others_timed_out;
                s.ssthresh = s.loss_ssthresh();
                s.cwnd = 1.0;
                s.fr = false;
                s.in_flight = 0.0;
                update = Some(TcpUpdate::timeout(1.0, s.ssthresh));
            }
            RenoOp::Leave => {
                g!().leave(id).unwrap();
                senders[i] = None;
                if let Some(c) = ccc.as_ref() {
                    // ctrlTCP keeps the aggregate (Algorithm 6); EFCM takes the leaver's part away.
                    prop_assert!(c.sum_cwnd() >= sum_before - EPS || c.is_empty());
                    prop_assert_eq!(Some(c.reductions()), reductions_before);
                }
                continue;
            }
            RenoOp::SetPriority { p } => {
                g!().set_priority(id, prio(p)).unwrap();
                prop_assert_eq!(g!().sum_cwnd(), sum_before);
                continue;
            }
        }
        let u = update.unwrap();
        let r = g!().update(id, u).unwrap();
        let s = senders[i].as_mut().unwrap();
        s.rto_pending = u.timeout;
        if let Some(r) = r {
            prop_assert!(
                r.cwnd_pkts.is_finite() && r.ssthresh_pkts.is_finite(),
                "{:?}",
                r
            );
            if !u.timeout {
                prop_assert!(
                    r.cwnd_pkts <= allowance(&u, max_burst) + EPS,
                    "{:?} after {:?}: told {} > allowance {}",
                    kind,
                    u,
                    r.cwnd_pkts,
                    allowance(&u, max_burst)
                );
            } else if ccc.is_some() {
                prop_assert!(
                    r.cwnd_pkts <= 1.0 + EPS,
                    "a timed-out connection keeps its loss window: {:?}",
                    r
                );
            }
            s.apply(r.cwnd_pkts, r.ssthresh_pkts);
        }
        if matches!(op, RenoOp::Ack { .. }) {
            released.clear();
            g!().on_ack(id, &mut released).unwrap();
            for rel in &released {
                let j = rel.conn.0 as usize;
                let sj = senders[j].as_mut().unwrap();
                prop_assert!(
                    rel.cwnd_pkts <= sj.cwnd + 1.0 + EPS,
                    "release {:?} over {}",
                    rel,
                    sj.cwnd
                );
                let ss = sj.ssthresh;
                sj.apply(rel.cwnd_pkts, ss);
            }
        }
        let sum = g!().sum_cwnd();
        prop_assert!(sum.is_finite() && sum >= 0.0, "sum_cwnd {}", sum);
        if let Some(c) = ccc.as_ref() {
            let reduced = c.reductions() - reductions_before.unwrap();
            if must_reduce {
                // (When every connection has now timed out, the restart sets the aggregate to the
                // windows they have, which may be no smaller.)
                // An aggregate of one packet in the integer mode has nothing left to reduce (its
                // reduction stops at one packet: 0 would read as "no loss yet"); the reduction
                // is still counted.
                prop_assert!(
                    reduced >= 1 && (sum < sum_before || may_reduce || (int && sum_before <= 1.0)),
                    "{:?} began a loss event but {} -> {}",
                    op,
                    sum_before,
                    sum
                );
            }
            if !must_reduce && !may_reduce {
                prop_assert_eq!(
                    reduced,
                    0,
                    "{:?}: a reduction outside a loss event's start",
                    op
                );
                prop_assert!(
                    sum >= sum_before - EPS * sum_before.max(1.0),
                    "{:?}: {} -> {}",
                    op,
                    sum_before,
                    sum
                );
            }
            if must_reduce && c.loss_event().is_some() {
                event_epoch = c.reductions();
            }
            if matches!(op, RenoOp::Loss) {
                senders[i].as_mut().unwrap().fr_epoch = c.reductions();
            }
            // An event is owned by a connection in FR or timed out; a completed recovery that
            // began during an event begun by a timeout ends it (its owner may be silent through
            // RTO backoff); an older recovery does not.
            if let Some(e) = c.loss_event() {
                let v = c.conn(e).unwrap();
                prop_assert!(
                    v.state == TcpState::FastRecovery || v.timed_out,
                    "{:?} owns the event",
                    v
                );
                let began_during = senders[i]
                    .as_ref()
                    .is_some_and(|s| s.fr_epoch >= event_epoch);
                if matches!(op, RenoOp::ExitFr) && began_during {
                    prop_assert_eq!(
                        v.state,
                        TcpState::FastRecovery,
                        "an FR exit left {:?}'s event open",
                        v
                    );
                }
            }
            let most = if must_reduce && may_reduce { 2 } else { 1 };
            prop_assert!(reduced <= most, "{:?}: {} reductions", op, reduced);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn ccc_no_burst_and_one_reduction_per_loss_event(ops in prop::collection::vec(reno_op(), 1..120), burst in prop_oneof![3 => Just(0.0), 1 => 0.0..20.0f64]) {
        run_reno::<Float>(CouplerKind::ccc(false), burst, &ops)?;
    }

    #[test]
    fn ccc_handover_no_burst_and_one_reduction_per_loss_event(ops in prop::collection::vec(reno_op(), 1..120), burst in prop_oneof![3 => Just(0.0), 1 => 0.0..20.0f64]) {
        run_reno::<Float>(CouplerKind::ccc(true), burst, &ops)?;
    }

    #[test]
    fn baselines_never_allow_a_burst(ops in prop::collection::vec(reno_op(), 1..120), burst in prop_oneof![3 => Just(0.0), 1 => 0.0..20.0f64], efcm in any::<bool>()) {
        run_reno::<Float>(if efcm { CouplerKind::Efcm } else { CouplerKind::ETcp }, burst, &ops)?;
    }

    #[test]
    fn ccc_int_no_burst_and_one_reduction_per_loss_event(ops in prop::collection::vec(reno_op(), 1..120), burst in prop_oneof![3 => Just(0.0), 1 => 0.0..20.0f64]) {
        run_reno::<Int>(CouplerKind::Ccc { handover: false, int: true }, burst, &ops)?;
    }

    #[test]
    fn ccc_handover_int_no_burst_and_one_reduction_per_loss_event(ops in prop::collection::vec(reno_op(), 1..120), burst in prop_oneof![3 => Just(0.0), 1 => 0.0..20.0f64]) {
        run_reno::<Int>(CouplerKind::Ccc { handover: true, int: true }, burst, &ops)?;
    }
}

// --- issue 14: the integer window mode against the float mode ---------------------------------

/// One side of [`run_both`]: a coupler and its senders (whole-packet NewReno, as Linux keeps
/// them), driven by the ops.
struct Side<A: Arith> {
    g: Ccc<A>,
    senders: Vec<Option<Reno>>,
    released: Vec<coupling::tcp::Release>,
}

impl<A: Arith> Side<A> {
    fn new(handover: bool) -> Self {
        Side {
            g: Ccc::new(handover),
            senders: vec![None; 6],
            released: Vec::new(),
        }
    }

    /// Applies one op; returns whether the coupler answered (`None` for ops without an UPDATE).
    fn step(&mut self, i: usize, op: &RenoOp) -> Option<bool> {
        let id = FlowId(i as u64);
        let Some(s) = self.senders[i].as_mut() else {
            if let RenoOp::Join { p, iw } = *op {
                let r = self.g.register(id, p, iw.floor().max(1.0), 1e9).unwrap();
                let mut s = Reno::joining(true);
                s.apply(r.cwnd_pkts, r.ssthresh_pkts);
                self.senders[i] = Some(s);
            }
            return None;
        };
        let u = match *op {
            RenoOp::Join { .. } => return None,
            RenoOp::Ack { acked } if !s.fr => {
                s.in_flight = (s.in_flight - acked as f64).max(0.0);
                let grown = s.grow(acked as f64);
                let state = if grown < s.ssthresh {
                    TcpState::SlowStart
                } else {
                    TcpState::CongestionAvoidance
                };
                TcpUpdate::new(grown, s.ssthresh, state).with_in_flight(s.in_flight)
            }
            RenoOp::Ack { .. } => TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::FastRecovery)
                .with_in_flight(s.in_flight),
            RenoOp::Loss if !s.fr => {
                s.fr = true;
                s.ssthresh = s.loss_ssthresh();
                TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::FastRecovery)
                    .with_in_flight(s.in_flight)
            }
            RenoOp::ExitFr if s.fr => {
                s.fr = false;
                s.cwnd = s.ssthresh;
                TcpUpdate::new(s.cwnd, s.ssthresh, TcpState::CongestionAvoidance)
                    .with_in_flight(s.in_flight.min(s.cwnd))
            }
            RenoOp::Timeout => {
                s.ssthresh = s.loss_ssthresh();
                s.cwnd = 1.0;
                s.fr = false;
                s.in_flight = 0.0;
                TcpUpdate::timeout(1.0, s.ssthresh)
            }
            RenoOp::Leave => {
                self.g.leave(id).unwrap();
                self.senders[i] = None;
                return None;
            }
            RenoOp::SetPriority { p } => {
                self.g.set_priority(id, p).unwrap();
                return None;
            }
            RenoOp::Loss | RenoOp::ExitFr => return None,
        };
        let r = self.g.update(id, u).unwrap();
        let s = self.senders[i].as_mut().unwrap();
        if let Some(r) = r {
            s.apply(r.cwnd_pkts, r.ssthresh_pkts);
        }
        if matches!(op, RenoOp::Ack { .. }) {
            self.released.clear();
            self.g.on_ack(id, &mut self.released).unwrap();
            for rel in &self.released {
                let sj = self.senders[rel.conn.0 as usize].as_mut().unwrap();
                let ss = sj.ssthresh;
                sj.apply(rel.cwnd_pkts, ss);
            }
        }
        Some(r.is_some())
    }
}

/// Priorities the integer mode represents exactly (multiples of 2^-16), so both modes are given
/// the same numbers.
fn exact_priority() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => (1u32..=8).prop_map(f64::from),
        1 => (1u32..=65536 * 4).prop_map(|k| f64::from(k) / 65536.0),
    ]
}

fn both_op() -> impl Strategy<Value = (usize, RenoOp)> {
    let op = prop_oneof![
        2 => (exact_priority(), 1.0..40.0f64).prop_map(|(p, iw)| RenoOp::Join { p, iw }),
        12 => (1..3u8).prop_map(|acked| RenoOp::Ack { acked }),
        2 => Just(RenoOp::Loss),
        2 => Just(RenoOp::ExitFr),
        2 => Just(RenoOp::Timeout),
        1 => Just(RenoOp::Leave),
        1 => exact_priority().prop_map(|p| RenoOp::SetPriority { p }),
    ];
    (0..6usize, op)
}

/// What [`run_both`] saw of one sequence.
#[derive(Debug, Default)]
struct Agreement {
    ops: usize,
    /// Ops after which the CoCo, the loss event, the reduction count or a connection's state
    /// differed between the modes.
    decisions_differ: usize,
    /// The largest |float - int| aggregate seen, in packets, and relative to the float one.
    max_gap_pkts: f64,
    max_gap_rel: f64,
}

/// The float and the integer mode, each with its own whole-packet senders, given the same ops.
/// Both accept every op (no error, no panic), and hold the same connections with the same
/// priorities (exactly representable here); whether an UPDATE is answered is checked too, though
/// it follows from the ops (no answer in FR). Equal until rounding moves a threshold (a timed-out
/// connection counts as back at its share when within a packet of it, the aggregate's slow start
/// ends at its ssthresh): the CoCo, the loss events and the connections' states; the returned
/// [`Agreement`] counts the ops after which they differ, for the test to bound.
fn run_both(handover: bool, ops: &[(usize, RenoOp)]) -> Result<Agreement, TestCaseError> {
    let mut f = Side::<Float>::new(handover);
    let mut n = Side::<Int>::new(handover);
    let mut agree = Agreement::default();
    for (k, (i, op)) in ops.iter().enumerate() {
        let a = f.step(*i, op);
        let b = n.step(*i, op);
        prop_assert_eq!(a, b, "op {} {:?}: answered", k, op);
        let (vf, vn) = (f.g.conns(), n.g.conns());
        prop_assert_eq!(vf.len(), vn.len());
        let mut same = f.g.coco() == n.g.coco()
            && f.g.loss_event() == n.g.loss_event()
            && f.g.reductions() == n.g.reductions();
        for (x, y) in vf.iter().zip(&vn) {
            prop_assert_eq!(x.conn, y.conn);
            prop_assert_eq!(x.priority, y.priority, "exact priorities");
            same &= x.state == y.state;
        }
        agree.ops += 1;
        agree.decisions_differ += usize::from(!same);
        let (sf, sn) = (f.g.sum_cwnd(), n.g.sum_cwnd());
        agree.max_gap_pkts = agree.max_gap_pkts.max((sf - sn).abs());
        agree.max_gap_rel = agree.max_gap_rel.max((sf - sn).abs() / sf.max(1.0));
    }
    Ok(agree)
}

/// Both modes over 2,000 seeded random sequences: the share of ops after which their decisions
/// differ, and how far their aggregates drift apart (printed). Measured (seed [14; 32]): 2.9 % of
/// ops without handover, 3.7 % with (4.4 % and 6.0 % when integer shares were floored, not
/// rounded); the largest gap of a sequence is 0 at the median and 9 % of the aggregate at the
/// 90th percentile. Once a threshold decision differs (a timed-out
/// connection back within a packet of its rounded share, say) the two are different, equally
/// valid executions, and their windows part: so the bounds are on how often, not on how far.
fn compare_modes(handover: bool) {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[14; 32]),
    );
    let strategy = prop::collection::vec(both_op(), 1..120);
    let (mut ops, mut differ, mut seqs_differ) = (0, 0, 0);
    let mut gaps = Vec::new();
    for _ in 0..2000 {
        let seq = proptest::strategy::ValueTree::current(&strategy.new_tree(&mut runner).unwrap());
        let a = run_both(handover, &seq).unwrap();
        ops += a.ops;
        differ += a.decisions_differ;
        seqs_differ += usize::from(a.decisions_differ > 0);
        gaps.push(a.max_gap_rel);
    }
    gaps.sort_by(f64::total_cmp);
    let p = |q: f64| gaps[((gaps.len() - 1) as f64 * q) as usize];
    eprintln!(
        "handover={handover}: {ops} ops, decisions differ after {differ} ({:.2} %), in {seqs_differ} of 2000 sequences; max aggregate gap relative to the float one: median {:.3}, p90 {:.3}, max {:.3}",
        100.0 * differ as f64 / ops as f64,
        p(0.5),
        p(0.9),
        p(1.0)
    );
    assert!(
        differ * 10 < ops,
        "decisions differ after more than 10 % of ops"
    );
    assert_eq!(p(0.5), 0.0, "most sequences end with equal aggregates");
    assert!(
        p(0.9) <= 0.15,
        "90 % of sequences stay within 15 % of each other"
    );
}

proptest! {
    /// The integer arithmetic is the float one, shares rounded to the nearest packet (within half
    /// a packet, never above the aggregate) and the loss reduction and scaling of whole-packet
    /// windows floored (less than one packet below), plus the float rounding.
    #[test]
    fn integer_arithmetic_is_the_float_one_rounded_or_floored(
        sum in 0u64..=1 << 32,
        ps in prop::collection::vec(1u64..=1 << 32, 1..8),
        ssthresh in 0u64..=1 << 20,
        told in 0u64..=1 << 20,
        num in 0u64..=1 << 20,
        den in 1u64..=1 << 20,
    ) {
        let isum = Int::psum_of(ps.iter().copied());
        let fsum = Float::psum_of(ps.iter().map(|&p| Int::priority_f64(p)));
        let tol = |x: f64| 1.0 + x * 1e-12;
        for &p in &ps {
            let (i, f) = (Int::share(p, sum, &isum) as f64, Float::share(Int::priority_f64(p), sum as f64, &fsum));
            prop_assert!((i - f).abs() <= 0.5 + f * 1e-12 && i <= sum as f64, "share {} vs {}", i, f);
        }
        let (i, f) = (Int::reduce(sum, ssthresh, told) as f64, Float::reduce(sum as f64, ssthresh as f64, told as f64));
        prop_assert!(i <= f + f * 1e-12 && f - i < tol(f), "reduce {} vs {}", i, f);
        let (i, f) = (Int::scale(sum, num, den) as f64, Float::scale(sum as f64, num as f64, den as f64));
        prop_assert!(i <= f + f * 1e-12 && f - i < tol(f), "scale {} vs {}", i, f);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn ccc_int_runs_every_sequence_ccc_runs(ops in prop::collection::vec(both_op(), 1..120), handover in any::<bool>()) {
        run_both(handover, &ops)?;
    }
}

#[test]
fn ccc_int_and_ccc_agree() {
    compare_modes(false);
    compare_modes(true);
}
