//! TiU's fallback (happy eyeballs, seed 003 Fig. 9.17) and Connection-ID allocation on real
//! kernel TCP: client `a`, router `r`, server `b`, three network namespaces; TiU on a's and b's
//! devices, a rule on the client for b's network. Each scenario opens 20 connections one after
//! another (1,000 bytes echoed over each) and times connect():
//!
//! - plain: no rule (the baseline);
//! - TiU: every connection rides TiU, no fallback;
//! - a server without TiU (b's programs taken off): every connection falls back to plain TCP at
//!   the raw SYN-ACK, without waiting for anything;
//! - a path that drops the TiU port (nft on the router): the same;
//! - 33 connections open at once: 32 get an ID, the 33rd runs plain TCP, all 33 carry their data;
//! - a path that breaks right after TiU worked on it: the server holds a raw SYN offering TiU
//!   from a peer whose TiU datagrams arrived within the last second (its TiU copy is expected),
//!   so the connection pays one SYN retransmission (1 s) before it falls back.
//!
//! The extra connection time of a fallback over plain TCP is printed (medians); it must stay far
//! below a SYN retransmission (1 s): the raw SYN went with the TiU one.

mod common;

use common::{delta, sh, Bed};
use std::process::{Child, Stdio};
use std::time::Duration;

const TIU_PORT: u16 = 8898;

const SERVER: &str = "import socket,threading\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('10.79.2.2',5201));s.listen(128)\ndef h(c):\n d=b''\n while len(d)<1000:\n  x=c.recv(1000-len(d))\n  if not x: break\n  d+=x\n c.sendall(d);c.recv(1);c.close()\nwhile True:\n c,_=s.accept();threading.Thread(target=h,args=(c,),daemon=True).start()";

/// `n` connections, one after another or (`together`) all held open until the last has its
/// echo: prints {"times": connect() durations in s, "ok": connections whose echo was right}.
const CLIENT: &str = "import socket,time,json,sys,os\nn=int(sys.argv[1]);together=sys.argv[2]=='1'\ntimes=[];socks=[];ok=0\nfor i in range(n):\n s=socket.socket();s.settimeout(10)\n t0=time.perf_counter();s.connect(('10.79.2.2',5201));times.append(time.perf_counter()-t0)\n m=os.urandom(1000);s.sendall(m);g=b''\n while len(g)<1000:\n  x=s.recv(1000-len(g))\n  if not x: break\n  g+=x\n ok+=g==m\n if together: socks.append(s)\n else: s.close()\nfor s in socks: s.close()\nprint(json.dumps({'times':times,'ok':ok}))";

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn connections_fall_back_to_plain_tcp_at_once_and_the_33rd_runs_plain() {
    if let Some(why) = common::skip_reason(&["nft"]) {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    {
        use tiu_bpf::Rule;
        let id = std::process::id();
        let (a, r, b) = (
            format!("tiuf-{id}a"),
            format!("tiuf-{id}r"),
            format!("tiuf-{id}b"),
        );
        let (va, ra, rb, vb) = (
            format!("tf{id}a"),
            format!("tf{id}ra"),
            format!("tf{id}rb"),
            format!("tf{id}b"),
        );
        let mut bed = Bed::new("fallback");
        let results = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            let link = bed.mount(tc);
            for n in [&a, &r, &b] {
                bed.add_netns(n);
            }
            for cmd in [
                vec![
                    "ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &ra,
                    "netns", &r,
                ],
                vec![
                    "ip", "link", "add", &rb, "netns", &r, "type", "veth", "peer", "name", &vb,
                    "netns", &b,
                ],
                vec!["ip", "-n", &a, "addr", "add", "10.79.1.1/24", "dev", &va],
                vec!["ip", "-n", &r, "addr", "add", "10.79.1.2/24", "dev", &ra],
                vec!["ip", "-n", &r, "addr", "add", "10.79.2.1/24", "dev", &rb],
                vec!["ip", "-n", &b, "addr", "add", "10.79.2.2/24", "dev", &vb],
                vec!["ip", "-n", &a, "link", "set", &va, "up"],
                vec!["ip", "-n", &r, "link", "set", &ra, "up"],
                vec!["ip", "-n", &r, "link", "set", &rb, "up"],
                vec!["ip", "-n", &b, "link", "set", &vb, "up"],
                vec![
                    "ip",
                    "-n",
                    &a,
                    "route",
                    "add",
                    "default",
                    "via",
                    "10.79.1.2",
                ],
                vec![
                    "ip",
                    "-n",
                    &b,
                    "route",
                    "add",
                    "default",
                    "via",
                    "10.79.2.1",
                ],
                vec![
                    "ip",
                    "netns",
                    "exec",
                    &r,
                    "sysctl",
                    "-qw",
                    "net.ipv4.ip_forward=1",
                ],
            ] {
                sh(&cmd).unwrap();
            }
            bed.tiu_dev(&a, &va);
            bed.tiu_dev(&b, &vb);
            let _server = Server(
                bed.in_cgroup(&["ip", "netns", "exec", &b, "python3", "-c", SERVER])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            std::thread::sleep(Duration::from_millis(300));
            let run_to = |port: u16,
                          n: usize,
                          together: bool|
             -> (Vec<f64>, u64, Vec<u64>, (usize, usize)) {
                let client = CLIENT.replace("5201", &port.to_string());
                let before = tc.stats().unwrap();
                let out = bed
                    .in_cgroup(&[
                        "ip",
                        "netns",
                        "exec",
                        &a,
                        "timeout",
                        "60",
                        "python3",
                        "-c",
                        &client,
                        &n.to_string(),
                        if together { "1" } else { "0" },
                    ])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "client: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                let times = v["times"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_f64().unwrap())
                    .collect();
                (
                    times,
                    v["ok"].as_u64().unwrap(),
                    delta(&tc.stats().unwrap(), &before),
                    tc.entries(),
                )
            };
            let run = |n: usize, together: bool| run_to(5201, n, together);
            let mut out = Vec::new();
            out.push(("plain", run(20, false)));
            tc.add_rule(&Rule {
                addr: "10.79.2.0".parse().unwrap(),
                prefix_len: 24,
                ports: None,
                mark: 0,
                tiu: true,
            })
            .unwrap();
            out.push(("tiu", run(20, false)));
            bed.detach(&b, &vb);
            out.push(("server without TiU", run(20, false)));
            bed.reattach(&b, &vb);
            let block = || {
                for cmd in [
                    "add table inet fw",
                    "add chain inet fw through { type filter hook forward priority 0 ; }",
                    &format!("add rule inet fw through udp dport {TIU_PORT} counter drop"),
                ] {
                    let mut args = vec!["ip", "netns", "exec", &r, "nft"];
                    args.extend(cmd.split(' '));
                    sh(&args).unwrap();
                }
            };
            let unblock = || {
                sh(&[
                    "ip", "netns", "exec", &r, "nft", "delete", "table", "inet", "fw",
                ])
                .unwrap();
            };
            block();
            // A peer whose TiU datagrams arrived within the last second is trusted to have a
            // working UDP path: its raw SYNs offering TiU are held for their TiU copies (which
            // the router now drops: one SYN retransmission, 1 s). A path that broke a second ago
            // is not what this scenario is about: wait for the evidence to go stale.
            std::thread::sleep(Duration::from_millis(1100));
            out.push(("path drops the TiU port", run(20, false)));
            let nft = sh(&["ip", "netns", "exec", &r, "nft", "list", "ruleset"]).unwrap();
            unblock();
            out.push(("33 at once", run(33, true)));
            // A listener opened while tiu_sockops was not attached (a server started before
            // `macroflow tiu enable`): its SYN-ACKs carry no Setup option, so every connection
            // falls back, until the listener iterator gives it the header-option callbacks.
            drop(link);
            let _late = Server(
                bed.in_cgroup(&[
                    "ip",
                    "netns",
                    "exec",
                    &b,
                    "python3",
                    "-c",
                    &SERVER.replace("5201", "5202"),
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
            );
            std::thread::sleep(Duration::from_millis(300));
            let _link = tc.attach_sockops(&bed.cgroup.join("t")).unwrap();
            let run_late = || run_to(5202, 5, false);
            out.push(("listener older than TiU", run_late()));
            let upgraded = tc.upgrade_listeners(Some(&b)).unwrap();
            out.push(("the same, after the listener iterator", run_late()));
            // The path breaks right after TiU worked: the first raw SYN is held for a TiU copy
            // that never comes; the SYN retransmitted a second later falls back.
            block();
            out.push(("path broke a moment ago", run(1, false)));
            unblock();
            (out, nft, upgraded)
        })
        .unwrap();
        let (out, nft, upgraded) = results;
        println!("listeners given the header-option callbacks: ports {upgraded:?}");
        let base = median(&out[0].1 .0);
        for (name, (times, ok, stats, left)) in &out {
            let named: Vec<_> = tiu_bpf::named_stats(stats)
                .into_iter()
                .filter(|(_, v)| *v != 0)
                .collect();
            println!(
                "{name}: connect() median {:.0} us (+{:.0} us over plain), max {:.0} us; {ok}/{} echoed; counters {named:?}; entries left {left:?}",
                median(times) * 1e6,
                (median(times) - base) * 1e6,
                times.iter().cloned().fold(0.0, f64::max) * 1e6,
                times.len()
            );
        }
        println!("router's nft: {}", nft.trim());
        let get = |i: usize, n: &str| tiu_bpf::stat(&out[i].1 .2, n).unwrap();
        let at = |name: &str| out.iter().position(|(n, _)| *n == name).unwrap();
        for (i, (name, (times, ok, _, left))) in out.iter().enumerate() {
            assert_eq!(
                *ok as usize,
                times.len(),
                "{name}: every echo arrived intact"
            );
            assert_eq!(*left, (0, 0), "{name}: closed connections leave no entries");
            assert_eq!(
                get(i, "in_error") + get(i, "eg_error") + get(i, "in_malformed"),
                0,
                "{name}"
            );
            // A fallback costs no timer: far less than the 1 s a lost SYN would.
            if *name != "path broke a moment ago" {
                assert!(median(times) < base + 0.1, "{name}: {:?}", times);
            }
        }
        // Plain: nothing touched.
        assert_eq!(out[0].1 .2.iter().sum::<u64>(), 0, "plain");
        // TiU: 20 IDs, every handshake raced and TiU won, the echo crossed as TiU. No collision:
        // IDs go round, so a new connection does not take the ID of one that just closed here
        // and that the server may still hold for a moment (it was 1 in 20 with lowest-free).
        assert_eq!(
            (
                get(1, "alloc"),
                get(1, "fallback"),
                get(1, "in_dup_handshake"),
                get(1, "eg_fallen_back"),
                get(1, "in_collision")
            ),
            (20, 0, 40, 0, 0)
        );
        assert!(get(1, "in_data") >= 40);
        // No TiU at the server: the raw SYN-ACK decides, every time; nothing decapsulated.
        assert_eq!(
            (
                get(2, "alloc"),
                get(2, "fallback"),
                get(2, "in_data"),
                get(2, "in_syn")
            ),
            (20, 20, 0, 0)
        );
        assert!(get(2, "eg_fallen_back") >= 40);
        // The path drops the port: the same, and the router counted the TiU SYNs it dropped.
        assert_eq!(
            (
                get(3, "alloc"),
                get(3, "fallback"),
                get(3, "in_data"),
                get(3, "in_syn"),
                get(3, "in_raw_syn_held")
            ),
            (20, 20, 0, 0, 0)
        );
        assert!(nft.contains("packets 20 "), "{nft}");
        // The path that broke a moment ago: one SYN retransmission (1 s), then plain TCP.
        assert_eq!(
            (
                get(at("path broke a moment ago"), "in_raw_syn_held"),
                get(at("path broke a moment ago"), "fallback")
            ),
            (1, 1)
        );
        assert!(
            (0.9..3.0).contains(&out[at("path broke a moment ago")].1 .0[0]),
            "{:?}",
            out[at("path broke a moment ago")].1 .0
        );
        // The listener older than TiU: every connection fell back (its SYN-ACKs had no Setup
        // option); after the iterator (which changed only that listener), none.
        assert_eq!(
            (
                get(at("listener older than TiU"), "alloc"),
                get(at("listener older than TiU"), "fallback"),
                get(at("listener older than TiU"), "eg_no_setup")
            ),
            (5, 5, 5)
        );
        assert_eq!(upgraded, vec![5202]);
        assert_eq!(
            (
                get(at("the same, after the listener iterator"), "alloc"),
                get(at("the same, after the listener iterator"), "fallback"),
                get(at("the same, after the listener iterator"), "eg_no_setup")
            ),
            (5, 0, 0)
        );
        // 33 at once: 32 IDs, the 33rd plain.
        assert_eq!(
            (get(4, "alloc"), get(4, "alloc_full"), get(4, "fallback")),
            (32, 1, 0)
        );
    }
}
