//! TiU on real kernel TCP: two network namespaces joined by a veth pair, both tc programs on
//! both ends (clsact, attached from pins in a bpffs of the test's own), `tiu_sockops` on a cgroup
//! of the test's own that the client and the server run in. The first two connections ride TiU
//! by rule (the client's connect() gets an ID, its SYN goes as TiU and then raw, happy eyeballs),
//! the third by an entry user space puts in the map; the server learns each from its SYN, the
//! client the answer from the SYN-ACK. Devices as `common::Bed::tiu_dev` sets them. A 4 MB
//! transfer over one connection, on IPv4, IPv6 and IPv4 again, written in random sizes with Nagle
//! off (segments of every length, odd ones too), must arrive intact, every segment from the SYN
//! on must cross as TiU (the counters), neither stack may count a checksum error, and a closed
//! connection's entries must be gone. Then injected datagrams: each refused and counted.

mod common;

use common::{addr, csum_errors, delta, sh, Bed};
use std::process::Stdio;
use std::time::{Duration, Instant};

const TIU_PORT: u16 = 8899;
const CLIENT_UDP: u16 = 40999;
const CLIENT_TCP: u16 = 40003;

const CONN_ID: u8 = 3;

#[test]
fn a_tcp_connection_crosses_as_tiu_and_arrives_intact() {
    if let Some(why) = common::skip_reason(&[]) {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    {
        use tiu_bpf::{ConnKey, ConnVal, Rule};
        let id = std::process::id();
        let (a, b) = (format!("tiu-{id}a"), format!("tiu-{id}b"));
        let (va, vb) = (format!("tiu{id}a"), format!("tiu{id}b"));
        let mut bed = Bed::new("wire");
        let stats = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            let _link = bed.mount(tc);
            bed.add_netns(&a);
            bed.add_netns(&b);
            for cmd in [
                vec!["ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b],
                vec!["ip", "-n", &a, "addr", "add", "10.79.0.1/24", "dev", &va],
                vec!["ip", "-n", &b, "addr", "add", "10.79.0.2/24", "dev", &vb],
                vec!["ip", "-n", &a, "link", "set", &va, "up"],
                vec!["ip", "-n", &b, "link", "set", &vb, "up"],
            ] {
                sh(&cmd).unwrap();
            }
            bed.tiu_dev(&a, &va);
            bed.tiu_dev(&b, &vb);
            // The rules: the client's connections to b's networks ride TiU.
            for (net, len) in [("10.79.0.0", 24), ("fd79::", 64)] {
                tc.add_rule(&Rule { addr: net.parse().unwrap(), prefix_len: len, ports: None, mark: 0, tiu: true }).unwrap();
            }
            // An IPv6 address each too (no duplicate detection: usable at once).
            sh(&["ip", "-n", &a, "addr", "add", "fd79::1/64", "dev", &va, "nodad"]).unwrap();
            sh(&["ip", "-n", &b, "addr", "add", "fd79::2/64", "dev", &vb, "nodad"]).unwrap();
            let mut runs = Vec::new();
            // Two connections by rule (IPv4, IPv6), then one whose entry user space puts in
            // the map (ID 3, its own port pair; no happy eyeballs for it), from another port.
            for (v6, ca, cb, fam, cport, listed) in [
                (false, "10.79.0.1", "10.79.0.2", 4u8, CLIENT_TCP, false),
                (true, "fd79::1", "fd79::2", 6u8, CLIENT_TCP, false),
                (false, "10.79.0.1", "10.79.0.2", 4u8, CLIENT_TCP + 1, true),
            ] {
                if listed {
                    // Only the client's entry: the server learns the ID and its answer from
                    // the SYN, the client the server's side from the SYN-ACK.
                    tc.add_conn(
                        &ConnKey { netns: tiu_bpf::admin::in_netns(Some(&a), tiu_bpf::netns_cookie).unwrap(), saddr: addr(ca), daddr: addr(cb), sport: cport.to_be_bytes(), dport: 5201u16.to_be_bytes(), family: fam, pad: [0; 3] },
                        &ConnVal { udp_sport: CLIENT_UDP.to_be_bytes(), udp_dport: TIU_PORT.to_be_bytes(), conn_id: CONN_ID, pad: [0; 3], state: 0 },
                    )
                    .unwrap();
                }
                let before = tc.stats().unwrap();
                // b: receive everything, answer with its SHA-256; a: send 4 MB from a fixed port
                // in writes of random sizes with Nagle off, so segments of every length (odd ones
                // too) cross.
                let af = if v6 { "socket.AF_INET6" } else { "socket.AF_INET" };
                let server = format!("import socket,hashlib\ns=socket.socket({af});s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('{cb}',5201));s.listen(1)\nc,_=s.accept();h=hashlib.sha256()\nwhile True:\n d=c.recv(65536)\n if not d: break\n h.update(d)\nc.sendall(h.hexdigest().encode());c.close()");
                let mut srv = bed.in_cgroup(&["ip", "netns", "exec", &b, "python3", "-c", &server])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap();
                let client = format!("import socket,hashlib,time,random\ndata=bytes((i*7+3)%251 for i in range(4<<20))\nfor _ in range(50):\n try:\n  s=socket.socket({af});s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('{ca}',{cport}));s.settimeout(20);s.connect(('{cb}',5201));break\n except OSError:\n  s.close();time.sleep(0.1)\ns.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\nr=random.Random(5);i=0\nwhile i<len(data):\n n=r.randint(1,3000);s.sendall(data[i:i+n]);i+=n\ns.shutdown(socket.SHUT_WR)\ngot=b''\nwhile True:\n d=s.recv(100)\n if not d: break\n got+=d\nprint(got.decode()==hashlib.sha256(data).hexdigest())");
                let t0 = Instant::now();
                let out = bed.in_cgroup(&["ip", "netns", "exec", &a, "timeout", "60", "python3", "-c", &client])
                    .output()
                    .map_err(|e| e.to_string())
                    .and_then(|o| {
                        if o.status.success() {
                            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
                        } else {
                            Err(String::from_utf8_lossy(&o.stderr).into_owned())
                        }
                    });
                let _ = srv.kill();
                let _ = srv.wait();
                let after = tc.stats().unwrap();
                // The closed connection's entries are gone on both ends before the next one.
                std::thread::sleep(Duration::from_millis(300));
                runs.push((v6, listed, out, t0.elapsed(), delta(&after, &before), tc.entries()));
            }
            let errors = [csum_errors(&a), csum_errors(&b)];
            // Injected datagrams on the TiU port pair, from a to b (a's egress passes UDP on):
            // no checksum (SO_NO_CHECK), a Connection ID b does not know, a Data Offset longer
            // than the datagram, a STUN Binding Request. Each is counted, none reaches TCP.
            let before = tc.stats().unwrap();
            let inject = format!("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(('10.79.0.1',{CLIENT_UDP}))\nfor p in [bytes([0x50|1,0x10,0,100])+bytes(8), bytes([0xf0|1,0x30,0,100])+bytes(8), bytes([0,1,0,0,0x21,0x12,0xa4,0x42])+bytes(12)]:\n s.sendto(p,('10.79.0.2',{TIU_PORT}))\ns.setsockopt(socket.SOL_SOCKET,11,1)\ns.sendto(bytes([0x50|1,0x10,0,100])+bytes(8),('10.79.0.2',{TIU_PORT}))");
            sh(&["ip", "netns", "exec", &a, "python3", "-c", &inject]).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let after = tc.stats().unwrap();
            let injected = delta(&after, &before);
            (runs, errors, injected)
        })
        .unwrap();
        let (runs, errors, injected) = stats;
        for (v6, listed, out, took, stats, left) in runs {
            let named = tiu_bpf::named_stats(&stats);
            println!(
                "IPv{}{}: counters {named:?}; {took:?}; entries left {left:?}",
                if v6 { 6 } else { 4 },
                if listed { " (listed)" } else { " (by rule)" }
            );
            let out = out.unwrap_or_else(|e| {
                panic!("the client failed: {e}; counters {named:?}; checksum errors {errors:?}")
            });
            assert_eq!(out.trim(), "True", "the data arrived changed: {out}");
            assert!(took < Duration::from_secs(60));
            let get = |n: &str| tiu_bpf::stat(&stats, n).unwrap();
            // 4 MB is at least 2,900 segments, and ACKs come back: every one crosses as TiU,
            // but for the few whose rewritten word would have to be 0 or 0xffff.
            assert!(get("eg_data") > 2900, "{named:?}");
            assert!(get("eg_uncarried") <= 3, "{named:?}");
            assert_eq!(
                get("in_data"),
                get("eg_data"),
                "every datagram sent was decapsulated: {named:?}"
            );
            assert_eq!(
                (get("eg_syn"), get("in_syn"), get("eg_no_setup")),
                (2, 2, 0),
                "SYN and SYN-ACK crossed as TiU SYN headers with their Setup option: {named:?}"
            );
            // Happy eyeballs: the client's SYN (by rule) and the server's SYN-ACK (learned) also
            // went raw, after the TiU copy; each end had its TiU answer first and dropped the raw
            // copy. A listed connection sends no raw SYN and takes a raw SYN-ACK as TCP does.
            assert_eq!(
                (
                    get("eg_raw_copy"),
                    get("in_dup_handshake"),
                    get("fallback"),
                    get("alloc")
                ),
                if listed { (1, 0, 0, 0) } else { (2, 2, 0, 1) },
                "{named:?}"
            );
            assert_eq!(
                left,
                (0, 0),
                "a closed connection leaves no conns entry and no open ID on either end"
            );
            for n in [
                "eg_error",
                "in_not_tiu",
                "in_no_checksum",
                "in_unknown_id",
                "in_malformed",
                "in_error",
                "in_unfinished",
                "in_collision",
                "in_refused_syn",
                "eg_fallen_back",
                "alloc_full",
            ] {
                assert_eq!(get(n), 0, "{n}: {named:?}");
            }
        }
        println!("checksum errors (TCP, UDP) in a, b: {errors:?}");
        assert_eq!(
            errors,
            [(0, 0), (0, 0)],
            "checksum errors (TCP, UDP) in a, b"
        );
        let named = tiu_bpf::named_stats(&injected);
        println!("injected: {named:?}");
        let get = |n: &str| tiu_bpf::stat(&injected, n).unwrap();
        // The first datagram names ID 2 (0x51, c = 0), which b does not know; the second ID 3,
        // the connection's, with Data Offset 15 (longer than the datagram): malformed; the STUN
        // request is passed on; the last, ID 3, has no checksum. None is decapsulated.
        assert_eq!(
            (
                get("in_unknown_id"),
                get("in_malformed"),
                get("in_not_tiu"),
                get("in_no_checksum"),
                get("in_data")
            ),
            (1, 1, 1, 1, 0),
            "{named:?}"
        );
    }
}
