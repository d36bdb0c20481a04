//! Test vectors for the kernel port of ctrlTCP (issue 16): random sequences of register, update,
//! leave, priority changes and ACKs run on [`TcpCccInt`] (the integer window mode: whole packets as
//! the kernel keeps them), each op written with the answer and the group's whole state after it.
//! The C core in `bpf/ccc_core.h` runs the same ops and must print the same lines; `bpf/README.md`
//! has the format and `tests/test_bpf_core.py` the check.
//!
//! The sequences are plausible TCP lives, so every path of the algorithm is reached often: each
//! connection keeps a model of its own NewReno (slow start, congestion avoidance, a loss entering
//! fast recovery with half its window, recovery ending at ssthresh, timeouts to one segment) and
//! reports what that controller would do with the window it was last told; now and then a report
//! is random, and some ops are errors (unknown or duplicate connections, a timeout outside slow
//! start, priority 0) that must change nothing. Within the C core's range: priorities in
//! [1, 2^24] units of 2^-16, at most [`MAX_CONNS`] connections, windows below 2^31.
//!
//! Format (one record per line):
//! ```text
//! vector <id> handover <0|1>
//! R <conn> <prio_units> <cwnd> <ssthresh> = <cwnd> <ssthresh> | <snapshot>
//! U <conn> <cwnd> <ssthresh> <SS|CA|FR> <timeout 0|1> <in_flight> = <cwnd> <ssthresh>|none | <snapshot>
//! L <conn> = ok | <snapshot>          P <conn> <prio_units> = ok | <snapshot>
//! B <pkts> = ok | <snapshot>          A <conn> = <k> (<conn> <cwnd> <done 0|1>)*k | <snapshot>
//! end
//! ```
//! Any op's result may be `ERR`. The snapshot is `<sum_cwnd> <sum_ssthresh> <coco|-> <event|->
//! <reductions> <n>` and then, per connection in registration order, `<conn> <prio_units> <cwnd>
//! <ssthresh> <SS|CA|FR> <released|-> <target|-> <ssbit 0|1>`.

use super::{TcpCccInt, TcpCoupler, TcpState, TcpUpdate, PRIORITY_SCALE};
use crate::group::FlowId;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::fmt::Write;

/// The most connections a vector's group holds (the C core's `CCC_MAX_CONNS`).
pub const MAX_CONNS: usize = 64;
/// The largest priority in the vectors, in units of 2^-16 (the C core's limit: priority 256).
pub const MAX_PRIO_UNITS: u64 = 1 << 24;
/// Linux's initial ssthresh (TCP_INFINITE_SSTHRESH).
const INFINITE_SSTHRESH: u64 = 0x7fff_ffff;

/// What a connection's own NewReno would report next, from the window it was told.
#[derive(Clone, Copy, Debug)]
struct Model {
    conn: u64,
    cwnd: u64,
    ssthresh: u64,
    state: TcpState,
}

/// `count` vectors of `ops` operations each, from `seed`: the same text for the same arguments.
pub fn ccc_vectors(seed: u64, count: usize, ops: usize) -> String {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# macroflow ctrlTCP test vectors: crates/coupling TcpCccInt, seed {seed}, {count} vectors of {ops} ops"
    );
    for id in 0..count {
        let handover = rng.random_bool(0.5);
        // Small groups most of the time (where the interesting interleavings are), up to 64.
        let max_conns = match rng.random_range(0..10) {
            0 => MAX_CONNS,
            1..=3 => rng.random_range(5..=16),
            _ => rng.random_range(1..=4),
        };
        let _ = writeln!(out, "vector {id} handover {}", u8::from(handover));
        // Full groups need joins to come often.
        let join_pct = if max_conns == MAX_CONNS { 30 } else { 8 };
        one_vector(&mut rng, &mut out, handover, max_conns, join_pct, ops);
        out.push_str("end\n");
    }
    out
}

fn state_name(s: TcpState) -> &'static str {
    s.name()
}

fn prio_units(rng: &mut Pcg64) -> u64 {
    match rng.random_range(0..6) {
        0 | 1 => PRIORITY_SCALE,
        2 => PRIORITY_SCALE * rng.random_range(1..=5),
        3 => rng.random_range(1..=PRIORITY_SCALE),
        4 => rng.random_range(1..=MAX_PRIO_UNITS),
        _ => [
            1,
            2,
            PRIORITY_SCALE / 4,
            3 * PRIORITY_SCALE / 4,
            MAX_PRIO_UNITS,
        ][rng.random_range(0..5)],
    }
}

fn one_vector(
    rng: &mut Pcg64,
    out: &mut String,
    handover: bool,
    max_conns: usize,
    join_pct: u32,
    ops: usize,
) {
    let mut g = TcpCccInt::new(handover);
    let mut live: Vec<Model> = Vec::new();
    let mut next_conn = 1u64;
    for _ in 0..ops {
        let op = rng.random_range(0..100);
        let line = if live.is_empty() || (op < join_pct && live.len() < max_conns) {
            // Register: an initial window as Linux's (10) or small, ssthresh infinite or from a cache.
            let conn = next_conn;
            next_conn += 1;
            let p = prio_units(rng);
            // Now and then a huge one (windows are held below 2^32, as the kernel's u32 snd_cwnd).
            let cwnd = [
                1,
                2,
                4,
                10,
                rng.random_range(1..=50),
                rng.random_range(1..=u64::from(u32::MAX)),
            ][rng.random_range(0..6)];
            let ssthresh = if rng.random_bool(0.7) {
                INFINITE_SSTHRESH
            } else {
                rng.random_range(2..=200)
            };
            let res = g.register(
                FlowId(conn),
                p as f64 / PRIORITY_SCALE as f64,
                cwnd as f64,
                ssthresh as f64,
            );
            let r = match res {
                Ok(r) => {
                    live.push(Model {
                        conn,
                        cwnd: r.cwnd_pkts as u64,
                        ssthresh: r.ssthresh_pkts as u64,
                        state: TcpState::SlowStart,
                    });
                    format!("{} {}", r.cwnd_pkts as u64, r.ssthresh_pkts as u64)
                }
                Err(_) => "ERR".into(),
            };
            format!("R {conn} {p} {cwnd} {ssthresh} = {r}")
        } else if op < 70 {
            let k = rng.random_range(0..live.len());
            let (u, m) = next_report(rng, live[k]);
            let in_flight = rng.random_range(0..=u.cwnd_pkts as u64 + 2);
            let u = u.with_in_flight(in_flight as f64);
            let r = match g.update(FlowId(m.conn), u) {
                Ok(Some(r)) => {
                    live[k] = Model {
                        cwnd: r.cwnd_pkts as u64,
                        ssthresh: r.ssthresh_pkts as u64,
                        ..m
                    };
                    format!("{} {}", r.cwnd_pkts as u64, r.ssthresh_pkts as u64)
                }
                Ok(None) => {
                    live[k] = m;
                    "none".into()
                }
                Err(_) => "ERR".into(),
            };
            format!(
                "U {} {} {} {} {} {} = {r}",
                m.conn,
                u.cwnd_pkts as u64,
                u.ssthresh_pkts as u64,
                state_name(u.state),
                u8::from(u.timeout),
                in_flight
            )
        } else if op < 88 {
            let conn = live[rng.random_range(0..live.len())].conn;
            let mut rel = Vec::new();
            let r = match g.on_ack(FlowId(conn), &mut rel) {
                Ok(()) => {
                    let mut s = rel.len().to_string();
                    for x in &rel {
                        let _ = write!(
                            s,
                            " {} {} {}",
                            x.conn.0,
                            x.cwnd_pkts as u64,
                            u8::from(x.done)
                        );
                        if let Some(m) = live.iter_mut().find(|m| m.conn == x.conn.0) {
                            m.cwnd = x.cwnd_pkts as u64;
                        }
                    }
                    s
                }
                Err(_) => "ERR".into(),
            };
            format!("A {conn} = {r}")
        } else if op < 93 {
            let k = rng.random_range(0..live.len());
            let conn = live[k].conn;
            let r = if g.leave(FlowId(conn)).is_ok() {
                live.remove(k);
                "ok"
            } else {
                "ERR"
            };
            format!("L {conn} = {r}")
        } else if op < 96 {
            let conn = live[rng.random_range(0..live.len())].conn;
            let p = if rng.random_bool(0.1) {
                0
            } else {
                prio_units(rng)
            };
            let r = if g
                .set_priority(FlowId(conn), p as f64 / PRIORITY_SCALE as f64)
                .is_ok()
            {
                "ok"
            } else {
                "ERR"
            };
            format!("P {conn} {p} = {r}")
        } else if op < 97 {
            let b = [0, 0, 1, 2, 10][rng.random_range(0..5)];
            let r = if g.set_max_burst_pkts(b as f64).is_ok() {
                "ok"
            } else {
                "ERR"
            };
            format!("B {b} = {r}")
        } else {
            error_op(rng, &mut g, &live, next_conn)
        };
        out.push_str(&line);
        out.push_str(" | ");
        snapshot(&g, out);
        out.push('\n');
    }
}

/// What the connection's own NewReno reports next (and the model after it), from what it was told.
fn next_report(rng: &mut Pcg64, m: Model) -> (TcpUpdate, Model) {
    let cw = m.cwnd.max(1);
    let half = (cw / 2).max(2);
    let (cwnd, ssthresh, state, timeout) = match (m.state, rng.random_range(0..100)) {
        // A random report: exercises what no NewReno would say.
        (_, 0..=2) => {
            let s = [
                TcpState::SlowStart,
                TcpState::CongestionAvoidance,
                TcpState::FastRecovery,
            ][rng.random_range(0..3)];
            let top = if rng.random_bool(0.2) {
                u64::from(u32::MAX)
            } else {
                2 * cw + 5
            };
            (
                rng.random_range(0..=top),
                rng.random_range(0..=top),
                s,
                false,
            )
        }
        // A retransmission timeout: one segment, ssthresh half the window.
        (_, 3..=5) => (1, half, TcpState::SlowStart, true),
        // In recovery: stays a while, then leaves at ssthresh.
        (TcpState::FastRecovery, x) if x < 50 => (cw, m.ssthresh, TcpState::FastRecovery, false),
        (TcpState::FastRecovery, _) => (
            m.ssthresh.max(1),
            m.ssthresh,
            TcpState::CongestionAvoidance,
            false,
        ),
        // A loss: fast recovery with half the window.
        (_, 6..=12) => (half + 3, half, TcpState::FastRecovery, false),
        // An idle restart or a shrink (a decrease outside a loss event).
        (_, 13..=14) => (rng.random_range(1..=cw), m.ssthresh, m.state, false),
        (TcpState::SlowStart, _) => {
            let c = cw + rng.random_range(1..=cw.min(8));
            let s = if c >= m.ssthresh {
                TcpState::CongestionAvoidance
            } else {
                TcpState::SlowStart
            };
            (c, m.ssthresh, s, false)
        }
        (TcpState::CongestionAvoidance, x) => (
            cw + u64::from(x % 3 == 0),
            m.ssthresh,
            TcpState::CongestionAvoidance,
            false,
        ),
    };
    let u = if timeout {
        TcpUpdate::timeout(cwnd as f64, ssthresh as f64)
    } else {
        TcpUpdate::new(cwnd as f64, ssthresh as f64, state)
    };
    (
        u,
        Model {
            cwnd,
            ssthresh,
            state,
            ..m
        },
    )
}

/// An op the coupler must refuse, leaving its state as it was.
fn error_op(rng: &mut Pcg64, g: &mut TcpCccInt, live: &[Model], next_conn: u64) -> String {
    let unknown = next_conn + 1000;
    match rng.random_range(0..6) {
        0 => {
            let r = g.update(
                FlowId(unknown),
                TcpUpdate::new(5.0, 10.0, TcpState::CongestionAvoidance),
            );
            format!(
                "U {unknown} 5 10 CA 0 0 = {}",
                if r.is_err() { "ERR" } else { "unexpected" }
            )
        }
        1 => {
            let conn = live[rng.random_range(0..live.len())].conn;
            let r = g.register(FlowId(conn), 1.0, 10.0, INFINITE_SSTHRESH as f64);
            format!(
                "R {conn} {PRIORITY_SCALE} 10 {INFINITE_SSTHRESH} = {}",
                if r.is_err() { "ERR" } else { "unexpected" }
            )
        }
        2 => {
            let conn = live[rng.random_range(0..live.len())].conn;
            let u = TcpUpdate {
                timeout: true,
                ..TcpUpdate::new(1.0, 2.0, TcpState::CongestionAvoidance)
            };
            let r = g.update(FlowId(conn), u);
            format!(
                "U {conn} 1 2 CA 1 0 = {}",
                if r.is_err() { "ERR" } else { "unexpected" }
            )
        }
        3 => format!(
            "L {unknown} = {}",
            if g.leave(FlowId(unknown)).is_err() {
                "ERR"
            } else {
                "unexpected"
            }
        ),
        4 => {
            let r = g.register(FlowId(unknown), 0.0, 10.0, 20.0);
            format!(
                "R {unknown} 0 10 20 = {}",
                if r.is_err() { "ERR" } else { "unexpected" }
            )
        }
        _ => {
            let mut rel = Vec::new();
            format!(
                "A {unknown} = {}",
                if g.on_ack(FlowId(unknown), &mut rel).is_err() {
                    "ERR"
                } else {
                    "unexpected"
                }
            )
        }
    }
}

fn snapshot(g: &TcpCccInt, out: &mut String) {
    let id = |c: Option<FlowId>| c.map_or("-".to_string(), |c| c.0.to_string());
    let conns = g.conns();
    let _ = write!(
        out,
        "{} {} {} {} {} {}",
        g.sum_cwnd() as u64,
        g.sum_ssthresh() as u64,
        id(g.coco()),
        id(g.loss_event()),
        g.reductions(),
        conns.len()
    );
    for c in conns {
        let (rel, target) = c
            .handover
            .map_or(("-".to_string(), "-".to_string()), |(r, t)| {
                (r.to_string(), (t as u64).to_string())
            });
        let _ = write!(
            out,
            " {} {} {} {} {} {rel} {target} {}",
            c.conn.0,
            (c.priority * PRIORITY_SCALE as f64).round() as u64,
            c.cwnd_pkts as u64,
            c.ssthresh_pkts as u64,
            c.state.name(),
            u8::from(c.timed_out)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_deterministic_and_well_formed() {
        let a = ccc_vectors(7, 20, 200);
        assert_eq!(a, ccc_vectors(7, 20, 200));
        assert_ne!(a, ccc_vectors(8, 20, 200));
        assert!(!a.contains("unexpected"), "an error op was accepted");
        let ops: Vec<&str> = a.lines().filter(|l| l.contains(" = ")).collect();
        assert_eq!(ops.len(), 20 * 200);
        for l in &ops {
            let (op, rest) = l.split_once(" = ").unwrap();
            let (_, snap) = rest.split_once(" | ").unwrap();
            let f: Vec<&str> = snap.split(' ').collect();
            let n: usize = f[5].parse().unwrap();
            assert_eq!(f.len(), 6 + 8 * n, "{l}");
            assert!(matches!(&op[..1], "R" | "U" | "L" | "P" | "B" | "A"), "{l}");
        }
    }

    #[test]
    fn vectors_reach_every_path() {
        // Every op, answer and state the C core must agree on appears in a modest set.
        let a = ccc_vectors(1, 200, 300);
        for needle in [
            " = none ", " = ERR ", "\nA ", "\nL ", "\nP ", "\nB ", " FR ", " SS 1 ", " 1 | ",
        ] {
            assert!(a.contains(needle), "no {needle:?} in the vectors");
        }
        let snaps: Vec<Vec<&str>> = a
            .lines()
            .filter_map(|l| l.split_once(" | "))
            .map(|(_, s)| s.split(' ').collect())
            .collect();
        assert!(snaps.iter().any(|s| s[3] != "-"), "no loss event");
        assert!(
            snaps.iter().any(|s| s[6..].chunks(8).any(|c| c[5] != "-")),
            "no handover"
        );
        assert!(
            snaps
                .iter()
                .any(|s| s[5].parse::<usize>().unwrap() == MAX_CONNS),
            "no full group"
        );
        assert!(
            snaps
                .iter()
                .any(|s| s[0].parse::<u64>().unwrap() > u64::from(u32::MAX)),
            "no aggregate above 2^32"
        );
        let max_red: u64 = snaps.iter().map(|s| s[4].parse().unwrap()).max().unwrap();
        assert!(max_red >= 5, "few reductions: {max_red}");
    }
}
