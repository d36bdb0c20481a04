//! TiU on real kernel TCP: two network namespaces joined by a veth pair, both tc programs on
//! both ends (clsact, attached from pins in a bpffs of the test's own), `tiu_sockops` on a cgroup
//! of the test's own that the client and the server run in (their SYN and SYN-ACK carry the
//! TiU-Setup option), and only the client's entry in the maps: the server learns the connection
//! from its SYN, the client the answer from the SYN-ACK. Transmit
//! checksumming off (a veth peer would otherwise get segments whose checksum is never finished),
//! receive checksumming off (so the receiving stacks check every checksum), gso_max_segs 1 (TCP
//! builds GSO super-segments regardless), GRO off. A 4 MB transfer over one connection, on IPv4
//! and then IPv6, written in random sizes with Nagle off (segments of every length, odd ones
//! too), must arrive intact, every segment from the SYN on must cross as TiU (the counters), and
//! neither stack may count a checksum error. Then injected datagrams: each refused and counted.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIU_PORT: u16 = 8899;
const CLIENT_UDP: u16 = 40999;
const CLIENT_TCP: u16 = 40003;

const CONN_ID: u8 = 3;

fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Namespaces and pins, removed on drop.
struct Cleanup {
    netns: Vec<String>,
    pins: std::path::PathBuf,
    /// A cgroup2 hierarchy mounted for the test, and the cgroup in it the sockets live in.
    cgroup: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for n in &self.netns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
        let _ = Command::new("umount").arg(&self.pins).status();
        let _ = std::fs::remove_dir(&self.pins);
        let _ = std::fs::remove_dir(self.cgroup.join("t"));
        let _ = Command::new("umount").arg(&self.cgroup).status();
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}

/// `Tcp: ... InCsumErrors` and `Udp: ... InCsumErrors` of a namespace (/proc/net/snmp).
fn csum_errors(ns: &str) -> (u64, u64) {
    let snmp = sh(&["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"]).unwrap();
    let field = |proto: &str| -> u64 {
        let lines: Vec<&str> = snmp.lines().filter(|l| l.starts_with(proto)).collect();
        let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
        names
            .zip(values)
            .find(|(n, _)| *n == "InCsumErrors")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    (field("Tcp:"), field("Udp:"))
}

#[test]
fn a_tcp_connection_crosses_as_tiu_and_arrives_intact() {
    if let Some(why) = tiu_bpf::missing() {
        println!("SKIP: tiu_tc is not in this build: {why}");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP: not root: namespaces and tc programs need CAP_SYS_ADMIN and CAP_NET_ADMIN");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    {
        use tiu_bpf::{ConnKey, ConnVal};
        let id = std::process::id();
        let (a, b) = (format!("tiu-{id}a"), format!("tiu-{id}b"));
        let (va, vb) = (format!("tiu{id}a"), format!("tiu{id}b"));
        // A bpffs of its own outside /sys: `ip netns exec` and `tc -n` remount /sys, which hides
        // /sys/fs/bpf from the tc that attaches the pins.
        let pins = std::path::PathBuf::from(format!("/run/tiu-test-{id}"));
        let cgroup = std::path::PathBuf::from(format!("/run/tiu-cg-{id}"));
        let _guard = Cleanup {
            netns: vec![a.clone(), b.clone()],
            pins: pins.clone(),
            cgroup: cgroup.clone(),
        };
        let stats = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            std::fs::create_dir_all(&pins).unwrap();
            sh(&["mount", "-t", "bpf", "bpf", pins.to_str().unwrap()]).unwrap();
            tc.pin_programs(&pins).unwrap();
            // The client and the server run in a cgroup of their own with tiu_sockops attached:
            // their SYN and SYN-ACK carry the TiU-Setup option, so the handshake rides TiU too.
            std::fs::create_dir_all(&cgroup).unwrap();
            sh(&["mount", "-t", "cgroup2", "none", cgroup.to_str().unwrap()]).unwrap();
            std::fs::create_dir_all(cgroup.join("t")).unwrap();
            let _link = tc.attach_sockops(&cgroup.join("t")).unwrap();
            let procs = cgroup.join("t").join("cgroup.procs");
            let in_cgroup = |args: &[&str]| {
                use std::os::unix::process::CommandExt;
                let mut c = Command::new(args[0]);
                c.args(&args[1..]);
                let procs = procs.clone();
                // SAFETY: only a write of the child's own pid before exec.
                unsafe {
                    c.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
                }
                c
            };
            let (eg, ing) = (pins.join("egress"), pins.join("ingress"));
            let (eg, ing) = (eg.to_str().unwrap(), ing.to_str().unwrap());
            for cmd in [
                vec!["ip", "netns", "add", &a],
                vec!["ip", "netns", "add", &b],
                vec!["ip", "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b],
                vec!["ip", "-n", &a, "addr", "add", "10.79.0.1/24", "dev", &va],
                vec!["ip", "-n", &b, "addr", "add", "10.79.0.2/24", "dev", &vb],
                vec!["ip", "-n", &a, "link", "set", &va, "up"],
                vec!["ip", "-n", &b, "link", "set", &vb, "up"],
                vec!["ip", "netns", "exec", &a, "ethtool", "-K", &va, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"],
                vec!["ip", "netns", "exec", &b, "ethtool", "-K", &vb, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"],
                // TCP always builds GSO super-segments now (segmented after tc, in
                // validate_xmit_skb, if the device cannot): one segment per skb.
                vec!["ip", "-n", &a, "link", "set", &va, "gso_max_segs", "1"],
                vec!["ip", "-n", &b, "link", "set", &vb, "gso_max_segs", "1"],
                vec!["tc", "-n", &a, "qdisc", "add", "dev", &va, "clsact"],
                vec!["tc", "-n", &b, "qdisc", "add", "dev", &vb, "clsact"],
                vec!["tc", "-n", &a, "filter", "add", "dev", &va, "egress", "bpf", "da", "object-pinned", eg],
                vec!["tc", "-n", &a, "filter", "add", "dev", &va, "ingress", "bpf", "da", "object-pinned", ing],
                vec!["tc", "-n", &b, "filter", "add", "dev", &vb, "egress", "bpf", "da", "object-pinned", eg],
                vec!["tc", "-n", &b, "filter", "add", "dev", &vb, "ingress", "bpf", "da", "object-pinned", ing],
            ] {
                sh(&cmd).unwrap();
            }
            // An IPv6 address each too (no duplicate detection: usable at once).
            sh(&["ip", "-n", &a, "addr", "add", "fd79::1/64", "dev", &va, "nodad"]).unwrap();
            sh(&["ip", "-n", &b, "addr", "add", "fd79::2/64", "dev", &vb, "nodad"]).unwrap();
            let mut runs = Vec::new();
            // The third connection takes ID 3 again from another port once the first has closed:
            // a closed connection's entries go (tiu_sockops at TCP_CLOSE), or it would be refused
            // as a collision.
            for (v6, ca, cb, fam, cport) in [
                (false, "10.79.0.1", "10.79.0.2", 4u8, CLIENT_TCP),
                (true, "fd79::1", "fd79::2", 6u8, CLIENT_TCP),
                (false, "10.79.0.1", "10.79.0.2", 4u8, CLIENT_TCP + 1),
            ] {
                let addr = |s: &str| -> [u8; 16] {
                    let mut o = [0u8; 16];
                    match s.parse::<std::net::IpAddr>().unwrap() {
                        std::net::IpAddr::V4(v) => o[..4].copy_from_slice(&v.octets()),
                        std::net::IpAddr::V6(v) => o.copy_from_slice(&v.octets()),
                    }
                    o
                };
                // Only the client's entry: it rides TiU with ID 3. The server learns the ID and
                // its answer from the SYN, the client the server's side from the SYN-ACK.
                tc.add_conn(
                    &ConnKey { saddr: addr(ca), daddr: addr(cb), sport: cport.to_be_bytes(), dport: 5201u16.to_be_bytes(), family: fam, pad: [0; 3] },
                    &ConnVal { udp_sport: CLIENT_UDP.to_be_bytes(), udp_dport: TIU_PORT.to_be_bytes(), conn_id: CONN_ID, pad: [0; 3] },
                )
                .unwrap();
                let before = tc.stats().unwrap();
                // b: receive everything, answer with its SHA-256; a: send 4 MB from a fixed port
                // in writes of random sizes with Nagle off, so segments of every length (odd ones
                // too) cross.
                let af = if v6 { "socket.AF_INET6" } else { "socket.AF_INET" };
                let server = format!("import socket,hashlib\ns=socket.socket({af});s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('{cb}',5201));s.listen(1)\nc,_=s.accept();h=hashlib.sha256()\nwhile True:\n d=c.recv(65536)\n if not d: break\n h.update(d)\nc.sendall(h.hexdigest().encode());c.close()");
                let mut srv = in_cgroup(&["ip", "netns", "exec", &b, "python3", "-c", &server])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap();
                let client = format!("import socket,hashlib,time,random\ndata=bytes((i*7+3)%251 for i in range(4<<20))\nfor _ in range(50):\n try:\n  s=socket.socket({af});s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('{ca}',{cport}));s.settimeout(20);s.connect(('{cb}',5201));break\n except OSError:\n  s.close();time.sleep(0.1)\ns.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\nr=random.Random(5);i=0\nwhile i<len(data):\n n=r.randint(1,3000);s.sendall(data[i:i+n]);i+=n\ns.shutdown(socket.SHUT_WR)\ngot=b''\nwhile True:\n d=s.recv(100)\n if not d: break\n got+=d\nprint(got.decode()==hashlib.sha256(data).hexdigest())");
                let t0 = Instant::now();
                let out = in_cgroup(&["ip", "netns", "exec", &a, "timeout", "60", "python3", "-c", &client])
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
                let delta: Vec<u64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
                runs.push((v6, out, t0.elapsed(), delta));
                // The closed connection's entries are gone on both ends before the next one.
                std::thread::sleep(Duration::from_millis(300));
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
            let injected: Vec<u64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
            (runs, errors, injected)
        })
        .unwrap();
        let (runs, errors, injected) = stats;
        for (v6, out, took, stats) in runs {
            let named = tiu_bpf::named_stats(&stats);
            println!(
                "IPv{}: counters {named:?}; {took:?}",
                if v6 { 6 } else { 4 }
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
