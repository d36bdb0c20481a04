//! `macroflowd` over its socket with the Rust client: RFC 8699 App. C through the daemon equal to
//! the library's, bit for bit; bad frames answered without a crash or a change; clients that
//! vanish mid-message lose their flows; pushes; many clients at once.

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::{FlowId, Instant};
use fsed::client::{Client, ClientError};
use fsed::config::Config;
use fsed::proto::{self, GroupSpec, Op, RateAlgorithm, Reply, ReplyBody, Request, ServerMsg};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

const M: f64 = 1e6;

/// A daemon on a socket in a temporary directory, stopped when dropped.
struct Daemon {
    path: PathBuf,
    _bg: fsed::server::Background,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(config: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fse.sock");
        let bg =
            fsed::server::Background::start(&path, 0o600, Config::parse(config).unwrap()).unwrap();
        Daemon {
            path,
            _bg: bg,
            _dir: dir,
        }
    }

    fn client(&self) -> Client {
        Client::connect(&self.path).unwrap()
    }
}

fn label(s: &str) -> GroupSpec {
    GroupSpec::Configured(s.into())
}

/// RFC 8699 App. C's steps (crates/coupling/tests/appendix_c.rs): each step through the daemon and
/// on an in-process FseGroup, the whole table compared bit for bit after every step.
#[test]
fn appendix_c_through_the_daemon_equals_the_library() {
    let d = Daemon::start("");
    let mut c = d.client();
    let mut lib = FseGroup::new(Algorithm::Passive);
    let mut now = 0u64;
    let mut tick = || {
        now += 100;
        Instant::from_millis(now)
    };
    let r1 = c
        .register_rate(
            label("app-c"),
            1.0,
            M,
            None,
            Some(RateAlgorithm::Passive),
            None,
        )
        .unwrap();
    let (f1, g) = (r1.flow, r1.group);
    assert_eq!(
        r1.rate_bps,
        lib.register(FlowId(f1), 1.0, M, tick()).unwrap()
    );
    let same = |c: &mut Client, lib: &FseGroup, step: &str| {
        let info = c.query_group(g).unwrap();
        assert_eq!(info.coupler, "passive");
        assert_eq!(
            info.sum_calculated.to_bits(),
            lib.sum_calculated_rate().to_bits(),
            "{step}: S_CR"
        );
        assert_eq!(
            info.leftover.to_bits(),
            lib.leftover().to_bits(),
            "{step}: TLO"
        );
        let mut want = lib.flows();
        want.sort_by_key(|v| v.flow);
        assert_eq!(info.flows.len(), want.len(), "{step}");
        for (got, w) in info.flows.iter().zip(&want) {
            assert_eq!(got.flow, w.flow.0, "{step}");
            assert_eq!(got.priority.to_bits(), w.priority.to_bits(), "{step}: P");
            assert_eq!(
                got.rate_or_cwnd.to_bits(),
                w.fse_rate_bps.to_bits(),
                "{step}: FSE_R"
            );
            assert_eq!(
                got.desired_rate_bps.to_bits(),
                w.desired_rate_bps.to_bits(),
                "{step}: DR"
            );
        }
    };
    same(&mut c, &lib, "flow 1 registers");
    for cc in 2..=10 {
        let got = c.update_rate(f1, cc as f64 * M, None, None).unwrap();
        let want = lib
            .update(FlowId(f1), FseUpdate::new(cc as f64 * M, tick()))
            .unwrap()
            .rate_bps;
        assert_eq!(got.to_bits(), want.to_bits());
        same(&mut c, &lib, &format!("flow 1 at {cc}"));
    }
    let r2 = c
        .register_rate(label("app-c"), 0.5, M, None, None, None)
        .unwrap();
    let f2 = r2.flow;
    assert_eq!(r2.group, g);
    lib.register(FlowId(f2), 0.5, M, tick()).unwrap();
    same(&mut c, &lib, "flow 2 joins");
    let steps: [(u64, f64, Option<f64>); 2] = [(f1, 8.0 * M, None), (f2, 2.0 * M, None)];
    for (f, cc, dr) in steps {
        let got = c.update_rate(f, cc, dr, None).unwrap();
        let want = lib
            .update(FlowId(f), FseUpdate::new(cc, tick()))
            .unwrap()
            .rate_bps;
        assert_eq!(got.to_bits(), want.to_bits());
        same(&mut c, &lib, "update");
    }
    // Flow 1 increases by 1 but its application wants 2: the leftover TLO.
    let cc = lib.flow(FlowId(f1)).unwrap().fse_rate_bps + M;
    let got = c.update_rate(f1, cc, Some(2.0 * M), None).unwrap();
    let want = lib
        .update(FlowId(f1), FseUpdate::new(cc, tick()).desired(2.0 * M))
        .unwrap()
        .rate_bps;
    assert_eq!(got.to_bits(), want.to_bits());
    same(&mut c, &lib, "flow 1 application-limited");
    let cc = lib.flow(FlowId(f2)).unwrap().fse_rate_bps + M;
    let got = c.update_rate(f2, cc, None, None).unwrap();
    assert_eq!(
        got.to_bits(),
        lib.update(FlowId(f2), FseUpdate::new(cc, tick()))
            .unwrap()
            .rate_bps
            .to_bits()
    );
    same(&mut c, &lib, "flow 2 takes the leftover");
    c.leave(f1).unwrap();
    lib.leave(FlowId(f1)).unwrap();
    let cc = lib.flow(FlowId(f2)).unwrap().fse_rate_bps - 2.0 * M;
    let got = c.update_rate(f2, cc, None, None).unwrap();
    assert_eq!(
        got.to_bits(),
        lib.update(FlowId(f2), FseUpdate::new(cc, tick()))
            .unwrap()
            .rate_bps
            .to_bits()
    );
    same(&mut c, &lib, "flow 1 left");
    // The draft's last table: flow 2 alone at 9.33 with priority 0.5.
    let last = c.query_group(g).unwrap();
    assert!(
        (last.flows[0].rate_or_cwnd / M - 9.33).abs() < 0.006,
        "{last:?}"
    );
}

fn raw(d: &Daemon) -> UnixStream {
    let mut s = UnixStream::connect(&d.path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&proto::encode(&Request {
        id: 1,
        op: Op::Hello {
            version: proto::VERSION,
        },
    }))
    .unwrap();
    assert!(matches!(read_reply(&mut s).body, ReplyBody::Hello { .. }));
    s
}

fn read_reply(s: &mut UnixStream) -> Reply {
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).unwrap();
    let mut buf = vec![0u8; proto::frame_len(prefix).unwrap()];
    s.read_exact(&mut buf).unwrap();
    match proto::decode::<ServerMsg>(&buf).unwrap() {
        ServerMsg::Reply(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_frames_get_an_error_and_change_nothing() {
    let d = Daemon::start("");
    let mut c = d.client();
    let r = c
        .register_rate(label("x"), 1.0, M, None, None, None)
        .unwrap();
    let before = c.query_group(r.group).unwrap();
    let mut s = raw(&d);
    // Garbage payloads: an error naming the frame; the session goes on.
    for payload in [vec![0xff; 7], vec![5, 200, 1, 2, 3], vec![9, 1]] {
        let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&payload);
        s.write_all(&frame).unwrap();
        let reply = read_reply(&mut s);
        assert!(
            matches!(&reply.body, ReplyBody::Error { field, .. } if field == "frame"),
            "{reply:?}"
        );
    }
    // A valid message with a trailing byte is refused too.
    let mut body = proto::encode(&Request {
        id: 3,
        op: Op::Leave { flow: r.flow },
    });
    body.push(0);
    let n = (body.len() - 4) as u32;
    body[..4].copy_from_slice(&n.to_be_bytes());
    s.write_all(&body).unwrap();
    let reply = read_reply(&mut s);
    assert_eq!(reply.id, 3);
    assert!(
        matches!(&reply.body, ReplyBody::Error { field, .. } if field == "frame"),
        "{reply:?}"
    );
    s.write_all(&proto::encode(&Request {
        id: 4,
        op: Op::QueryFlow { flow: 999 },
    }))
    .unwrap();
    assert!(matches!(read_reply(&mut s).body, ReplyBody::Error { .. }));
    // A length that cannot be: an error, then the daemon closes this connection only.
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let reply = read_reply(&mut s);
    assert!(
        matches!(&reply.body, ReplyBody::Error { field, .. } if field == "frame"),
        "{reply:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0, "closed");
    assert_eq!(c.query_group(r.group).unwrap(), before, "nothing changed");
}

#[test]
fn a_client_killed_mid_message_loses_its_flows_and_others_go_on() {
    let d = Daemon::start("");
    let mut keeper = d.client();
    let k = keeper
        .register_rate(label("x"), 1.0, M, None, None, None)
        .unwrap();
    for cut in [1usize, 3, 4, 6] {
        let mut victim = raw(&d);
        victim
            .write_all(&proto::encode(&Request {
                id: 2,
                op: Op::RegisterRate {
                    group: label("x"),
                    priority: 1.0,
                    initial_rate_bps: M,
                    desired_rate_bps: None,
                    algorithm: None,
                    timeout_ms: None,
                },
            }))
            .unwrap();
        assert!(matches!(
            read_reply(&mut victim).body,
            ReplyBody::Registered { .. }
        ));
        assert_eq!(keeper.query_group(k.group).unwrap().flow_count, 2);
        // Half a frame, then gone.
        let frame = proto::encode(&Request {
            id: 3,
            op: Op::Refresh { flow: 1 },
        });
        victim
            .write_all(&frame[..cut.min(frame.len() - 1)])
            .unwrap();
        drop(victim);
        let mut n = 0;
        while keeper.query_group(k.group).unwrap().flow_count != 1 {
            n += 1;
            assert!(n < 200, "the victim's flow was not removed");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn version_mismatch_and_requests_before_hello() {
    let d = Daemon::start("");
    let mut s = UnixStream::connect(&d.path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&proto::encode(&Request {
        id: 7,
        op: Op::Refresh { flow: 1 },
    }))
    .unwrap();
    let r = read_reply(&mut s);
    assert!(
        matches!(&r.body, ReplyBody::Error { field, .. } if field == "hello"),
        "{r:?}"
    );
    s.write_all(&proto::encode(&Request {
        id: 8,
        op: Op::Hello { version: 99 },
    }))
    .unwrap();
    let r = read_reply(&mut s);
    assert!(
        matches!(&r.body, ReplyBody::Error { field, .. } if field == "hello.version"),
        "{r:?}"
    );
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0, "closed");
    // The client sees its own uid and pid.
    let c = d.client();
    assert_eq!(c.peer().1, std::process::id() as i32);
}

#[test]
fn subscribed_flows_get_pushes_and_daemon_errors_reach_the_client() {
    let d = Daemon::start("");
    let mut a = d.client();
    let mut b = d.client();
    let fa = a
        .register_rate(label("x"), 1.0, M, None, Some(RateAlgorithm::Active), None)
        .unwrap();
    a.subscribe(fa.flow).unwrap();
    let fb = b
        .register_rate(label("x"), 1.0, 3.0 * M, None, None, None)
        .unwrap();
    let rb = b.update_rate(fb.flow, 6.0 * M, None, None).unwrap();
    let p = a
        .wait_push(Duration::from_secs(5))
        .unwrap()
        .expect("a push");
    assert_eq!(p.flow, fa.flow);
    // The active FSE: S_CR = 1 + 3 + (6 - 3) = 7 split 1 : 1.
    assert_eq!(p.rate_bps, rb);
    assert!(a.wait_push(Duration::from_millis(50)).unwrap().is_none());
    match a.update_rate(fb.flow, M, None, None) {
        Err(ClientError::Daemon { field, .. }) => assert_eq!(field, "update_rate.flow"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_thousand_clients_at_once() {
    let d = Daemon::start("[default_user]\nmax_flows = 2000\n");
    let path = d.path.clone();
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut cs: Vec<Client> =
                    (0..20).map(|_| Client::connect(&path).unwrap()).collect();
                let mut flows = Vec::new();
                for (j, c) in cs.iter_mut().enumerate() {
                    let r = c
                        .register_rate(
                            label(&format!("g{}", (i + j) % 7)),
                            1.0,
                            M,
                            None,
                            None,
                            None,
                        )
                        .unwrap();
                    flows.push(r.flow);
                }
                for round in 0..20 {
                    for (c, &f) in cs.iter_mut().zip(&flows) {
                        let r = c
                            .update_rate(f, M * (1.0 + round as f64), None, Some(20_000))
                            .unwrap();
                        assert!(r.is_finite() && r >= 0.0);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Every client closed: every flow gone.
    let mut c = d.client();
    let r = c
        .register_rate(label("g0"), 1.0, M, None, None, None)
        .unwrap();
    let mut n = 0;
    while c.query_group(r.group).unwrap().flow_count != 1 {
        n += 1;
        assert!(n < 400, "flows of closed clients remain");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_client_that_stops_reading_and_half_closes_is_let_go() {
    // Review of issue 21: such a client held its writer task, and its fd, for ever.
    let d = Daemon::start("");
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    for _ in 0..5 {
        let mut s = UnixStream::connect(&d.path).unwrap();
        let hello = proto::encode(&Request {
            id: 1,
            op: Op::Hello {
                version: proto::VERSION,
            },
        });
        s.write_all(&hello).unwrap();
        let q = proto::encode(&Request {
            id: 2,
            op: Op::QueryFlow { flow: 1 },
        });
        s.set_write_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        for _ in 0..20_000 {
            if s.write_all(&q).is_err() {
                break; // the daemon's replies fill our receive buffer: it stops reading us
            }
        }
        s.shutdown(std::net::Shutdown::Write).unwrap();
        std::mem::forget(s); // never read, never closed from this side
    }
    let mut n = 0;
    // The daemon's end of each goes within FLUSH_TIMEOUT; ours stay (forgotten), 5 of them.
    while fds() > before + 5 {
        n += 1;
        assert!(n < 100, "{} fds open, {} before", fds(), before);
        std::thread::sleep(Duration::from_millis(100));
    }
    // And the daemon still serves.
    let mut c = d.client();
    c.register_rate(label("x"), 1.0, M, None, None, None)
        .unwrap();
}

#[test]
fn pipelined_updates_equal_one_by_one() {
    // `Client::update_rates`: many UPDATEs in one write give what the same UPDATEs one by one
    // give (two daemons, the same calls).
    let (d1, d2) = (Daemon::start(""), Daemon::start(""));
    let (mut a, mut b) = (d1.client(), d2.client());
    let mut fa = Vec::new();
    let mut fb = Vec::new();
    for p in [1.0, 0.5, 2.0] {
        fa.push(
            a.register_rate(label("g"), p, M, None, Some(RateAlgorithm::Passive), None)
                .unwrap()
                .flow,
        );
        fb.push(
            b.register_rate(label("g"), p, M, None, Some(RateAlgorithm::Passive), None)
                .unwrap()
                .flow,
        );
    }
    for round in 0..20 {
        let ups: Vec<_> = (0..3)
            .map(|k| (fa[k], M * (1.0 + ((round * 7 + k) % 5) as f64), None, None))
            .collect();
        let got = a.update_rates(&ups).unwrap();
        for (k, g) in got.into_iter().enumerate() {
            let want = b.update_rate(fb[k], ups[k].1, None, None).unwrap();
            assert_eq!(
                g.unwrap().to_bits(),
                want.to_bits(),
                "round {round} flow {k}"
            );
        }
    }
    // A refused one among them is refused alone.
    let r = a
        .update_rates(&[
            (fa[0], M, None, None),
            (999, M, None, None),
            (fa[1], M, None, None),
        ])
        .unwrap();
    assert!(r[0].is_ok() && r[2].is_ok());
    assert!(matches!(&r[1], Err(ClientError::Daemon { field, .. }) if field == "update_rate.flow"));
}
