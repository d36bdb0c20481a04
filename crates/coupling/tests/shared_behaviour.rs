//! Behaviour every coupler must share, tested across all of them (quiche style).

mod common;

use common::Harness;
use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::tcp::{CouplerKind, TcpUpdate};
use coupling::{FlowId, Instant};

const KINDS: [CouplerKind; 4] = [
    CouplerKind::ccc(false),
    CouplerKind::ccc(true),
    CouplerKind::ETcp,
    CouplerKind::Efcm,
];

/// A flow alone in its group is not changed by any FSE algorithm: it gets its controller's rate,
/// exactly, whatever its priority (a share computed through a rounded reciprocal of S_P was off
/// by an ulp at priority 49).
#[test]
fn every_fse_algorithm_is_transparent_for_a_single_flow() {
    for a in Algorithm::ALL {
        for p in [0.3, 49.0, 5e-324, 1e12] {
            let mut g = FseGroup::new(a);
            g.register(FlowId(1), p, 1e6, Instant::ZERO).unwrap();
            for (k, cc) in [2e6, 3e6, 1.5e6, 0.75e6, 5e6].into_iter().enumerate() {
                let now = Instant::from_secs(10 * (k as u64 + 1)); // past any conservative timer
                let u = FseUpdate::new(cc, now).rtt(coupling::Duration::from_millis(100));
                let r = g.update(FlowId(1), u).unwrap().rate_bps;
                assert_eq!(r, cc, "{} at priority {p}", a.name());
            }
        }
    }
}

/// A connection alone in a TCP group is told its own window back, exactly, at any priority, and
/// reports of an unchanged window leave the aggregate unchanged.
#[test]
fn every_tcp_coupler_is_transparent_for_a_single_connection() {
    for kind in KINDS {
        for p in [0.3, 49.0, 5e-324, 1e12] {
            let mut c = kind.build();
            c.register(FlowId(1), p, 10.0, 1e9).unwrap();
            let before = c.sum_cwnd();
            for _ in 0..100 {
                let u = TcpUpdate::new(10.0, 1e9, coupling::tcp::TcpState::SlowStart)
                    .with_in_flight(10.0);
                let r = c.update(FlowId(1), u).unwrap().unwrap();
                assert_eq!(r.cwnd_pkts, 10.0, "{} at priority {p}", c.name());
            }
            assert_eq!(c.sum_cwnd(), before, "{} at priority {p}", c.name());
        }
    }
}

/// Every TCP coupler answers with finite windows and splits the aggregate by priority once the
/// connections have settled.
#[test]
fn every_tcp_coupler_splits_by_priority() {
    for kind in KINDS {
        let mut h = Harness::new(Some(kind));
        h.capacity_pkts = Some(120.0);
        h.join(1, 3.0, 10.0, 1e9);
        h.join(2, 1.0, 10.0, 1e9);
        if kind == (CouplerKind::ccc(true)) {
            // Nothing but ACKs clock a joiner in: deliver the first RTT's worth.
            let c = h.coupler.as_mut().unwrap();
            let mut out = Vec::new();
            for _ in 0..40 {
                c.on_ack(FlowId(1), &mut out).unwrap();
            }
            assert!(out.last().is_some_and(|r| r.done), "{out:?}");
        }
        h.rounds(300);
        let c = h.coupler.as_ref().unwrap();
        let (v1, v2) = (c.conn(FlowId(1)).unwrap(), c.conn(FlowId(2)).unwrap());
        let ratio = v1.cwnd_pkts / v2.cwnd_pkts;
        assert!(
            (ratio - 3.0).abs() < 0.2,
            "{}: {ratio} ({v1:?} {v2:?})",
            c.name()
        );
        assert!(c.sum_cwnd().is_finite() && c.sum_cwnd() > 0.0);
    }
}

/// Every TCP coupler rejects bad input with an error and no change, and forgets a connection that
/// leaves.
#[test]
fn every_tcp_coupler_rejects_bad_input_and_forgets_leavers() {
    for kind in KINDS {
        let mut c = kind.build();
        c.register(FlowId(1), 1.0, 10.0, 100.0).unwrap();
        c.register(FlowId(2), 2.0, 10.0, 100.0).unwrap();
        let before = format!("{c:?}");
        assert!(
            c.register(FlowId(2), 1.0, 10.0, 100.0).is_err(),
            "{}: duplicate id",
            c.name()
        );
        for p in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(
                c.register(FlowId(3), p, 10.0, 100.0).is_err(),
                "{}: priority {p}",
                c.name()
            );
            assert!(
                c.set_priority(FlowId(1), p).is_err(),
                "{}: priority {p}",
                c.name()
            );
        }
        for w in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(c.register(FlowId(3), 1.0, w, 100.0).is_err());
            assert!(c
                .update(
                    FlowId(1),
                    TcpUpdate::new(w, 10.0, coupling::tcp::TcpState::CongestionAvoidance)
                )
                .is_err());
            assert!(c
                .update(
                    FlowId(1),
                    TcpUpdate::new(10.0, w, coupling::tcp::TcpState::CongestionAvoidance)
                )
                .is_err());
        }
        assert!(c
            .update(
                FlowId(9),
                TcpUpdate::new(1.0, 1.0, coupling::tcp::TcpState::SlowStart)
            )
            .is_err());
        assert!(c.leave(FlowId(9)).is_err());
        assert!(c.on_ack(FlowId(9), &mut Vec::new()).is_err());
        assert_eq!(
            before,
            format!("{c:?}"),
            "{}: a failed call changed state",
            c.name()
        );
        c.leave(FlowId(1)).unwrap();
        assert!(c.conn(FlowId(1)).is_err());
        assert_eq!(c.conns().len(), 1);
        c.register(FlowId(1), 1.0, 10.0, 100.0).unwrap();
        c.leave(FlowId(1)).unwrap();
        c.leave(FlowId(2)).unwrap();
        assert!(c.is_empty());
    }
}
