//! Both tc programs against `crates/tiu` on the same frames (BPF_PROG_TEST_RUN): thousands of random
//! TCP segments, IPv4 and IPv6, data and SYN/SYN-ACK, each encapsulated by `tiu_egress` into
//! exactly the datagram `tiu::translate::tcp_to_tiu` makes (and the IP header adjusted), and each
//! datagram decapsulated by `tiu_ingress` into exactly the segment `tiu_to_tcp` makes; then the
//! refusals. Needs root and a kernel with BTF; says why and passes when it cannot load programs.

use smoltcp::wire::{IpAddress, Ipv4Address, Ipv6Address};
use tiu::translate::{tcp_to_tiu, tiu_to_tcp, Addrs};
use tiu::wire::{with_setup_option, Setup};
use tiu_bpf::{ConnKey, ConnVal, IdKey, IdVal, TC_ACT_OK, TC_ACT_SHOT};

const TIU_PORT: u16 = 8899;
const CLIENT_UDP: u16 = 40999;

/// A small deterministic generator (xorshift64*): the vectors are the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet + IPv4 (20 bytes, checksum right) or IPv6 + the transport bytes.
fn frame(v6: bool, proto: u8, l4: &[u8]) -> Vec<u8> {
    frame_dir(v6, proto, l4, false)
}

/// As [`frame`], from the server to the client when `reverse`.
fn frame_dir(v6: bool, proto: u8, l4: &[u8], reverse: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        let (a, b) = (
            Ipv6Address::new(0xfd00, 0, 0, 1, 0, 0, 0, 2),
            Ipv6Address::new(0xfd00, 0, 0, 2, 0, 0, 0, 3),
        );
        let (a, b) = if reverse { (b, a) } else { (a, b) };
        f.extend_from_slice(&a.octets());
        f.extend_from_slice(&b.octets());
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
        let (a, b) = ([10u8, 0, 1, 2], [10u8, 0, 2, 3]);
        let (a, b) = if reverse { (b, a) } else { (a, b) };
        ip.extend_from_slice(&a);
        ip.extend_from_slice(&b);
        let c = ip_checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(l4);
    f
}

fn addrs(v6: bool) -> Addrs {
    if v6 {
        Addrs::new(
            IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 1, 0, 0, 0, 2)),
            IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 2, 0, 0, 0, 3)),
        )
        .unwrap()
    } else {
        Addrs::new(
            IpAddress::Ipv4(Ipv4Address::new(10, 0, 1, 2)),
            IpAddress::Ipv4(Ipv4Address::new(10, 0, 2, 3)),
        )
        .unwrap()
    }
}

fn addr_bytes(a: IpAddress) -> [u8; 16] {
    let mut out = [0u8; 16];
    match a {
        IpAddress::Ipv4(v) => out[..4].copy_from_slice(&v.octets()),
        IpAddress::Ipv6(v) => out.copy_from_slice(&v.octets()),
    }
    out
}

/// A random TCP segment TiU carries (no URG or reserved bits; a SYN carries the Setup option), as
/// `tests/roundtrip.rs` of crates/tiu draws them, and its Connection ID.
fn segment(r: &mut Rng, sport: u16, dport: u16, id: u8) -> Vec<u8> {
    let mut opts = Vec::new();
    for _ in 0..r.below(5) {
        let o = match r.below(5) {
            0 => vec![1],
            1 => vec![2, 4, r.next() as u8, r.next() as u8],
            2 => vec![4, 2],
            3 => [&[8u8, 10][..], &r.bytes(8)].concat(),
            _ => {
                let n = r.below(6) as usize;
                [&[30u8, n as u8 + 2][..], &r.bytes(n)].concat()
            }
        };
        if opts.len() + o.len() <= 32 {
            opts.extend_from_slice(&o);
        }
    }
    while opts.len() % 4 != 0 {
        opts.push(0);
    }
    let mut flags = (r.next() as u8) & !0x22;
    if r.below(4) == 0 {
        flags |= 0x02;
        let setup = if id == 255 {
            Setup::Refused
        } else {
            Setup::Id(id)
        };
        if id == 255 {
            flags |= 0x10;
        }
        opts = with_setup_option(&opts, setup)
            .unwrap_or_else(|_| with_setup_option(&[], setup).unwrap());
    }
    let hl = 20 + opts.len();
    let mut t = vec![0u8; hl];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..12].copy_from_slice(&r.bytes(8));
    t[12] = ((hl / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&r.bytes(2));
    // The stack's checksum (egress needs it complete); the urgent pointer, meaningless without URG.
    t[18..20].copy_from_slice(&r.bytes(2));
    t[20..hl].copy_from_slice(&opts);
    let n = r.below(400) as usize;
    let payload = r.bytes(n);
    t.extend_from_slice(&payload);
    t
}

/// Why the programs cannot be loaded here, if they cannot: not in this build, or not root
/// (BPF_PROG_LOAD of a tc program needs CAP_BPF and CAP_NET_ADMIN). If they can, the test's
/// thread is moved into a network namespace of its own first ([`private_netns`]).
fn cannot_load() -> Option<String> {
    if let Some(why) = tiu_bpf::missing() {
        return Some(format!("tiu_tc is not in this build: {why}"));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: loading tc programs needs CAP_BPF and CAP_NET_ADMIN".into());
    }
    private_netns();
    None
}

/// Moves this test's thread into a network namespace of its own (namespaces are per thread):
/// what the programs send with bpf_clone_redirect (the TiU copy of a handshake segment) leaves
/// through that namespace's loopback, and the sockets a server's learning looks up are the
/// test's own.
fn private_netns() {
    // SAFETY: unshare has no memory preconditions; it changes only this thread's namespace.
    assert_eq!(
        unsafe { libc::unshare(libc::CLONE_NEWNET) },
        0,
        "unshare(CLONE_NEWNET): {}",
        std::io::Error::last_os_error()
    );
}

/// The client's entry of an IPv4 connection from `sport` to port 5201 (as the client sends).
fn client_key(ad: Addrs, sport: u16) -> ConnKey {
    ConnKey {
        netns: tiu_bpf::netns_cookie().unwrap(),
        saddr: addr_bytes(ad.src),
        daddr: addr_bytes(ad.dst),
        sport: sport.to_be_bytes(),
        dport: 5201u16.to_be_bytes(),
        family: 4,
        pad: [0; 3],
    }
}

/// Its value: the TiU port pair from the client, Connection ID `id`.
fn client_val(id: u8) -> ConnVal {
    ConnVal {
        udp_sport: CLIENT_UDP.to_be_bytes(),
        udp_dport: TIU_PORT.to_be_bytes(),
        conn_id: id,
        pad: [0; 3],
        state: 0,
    }
}

/// A [`segment`] that is a SYN (or SYN-ACK) exactly when `syn`.
fn segment_kind(r: &mut Rng, sport: u16, dport: u16, id: u8, syn: bool) -> Vec<u8> {
    loop {
        let t = segment(r, sport, dport, id);
        if (t[13] & 0x02 != 0) == syn {
            return t;
        }
    }
}

fn tcp_checksum(addrs: Addrs, t: &mut [u8]) {
    t[16..18].copy_from_slice(&[0, 0]);
    smoltcp::wire::TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&addrs.src, &addrs.dst);
}

#[test]
fn both_programs_translate_as_crates_tiu_does() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    {
        let r = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            let mut rng = Rng(0x7469_755f_7463_0001);
            let (mut data, mut syn) = (0, 0);
            for v6 in [false, true] {
                let ad = addrs(v6);
                // Connection i: client port 50000 + i to server port 5201, ID i (255: a refusing SYN-ACK).
                for n in 0..2000u32 {
                    let id = if n % 97 == 96 { 255 } else { (n % 32) as u8 };
                    let sport = 50_000 + u16::from(id);
                    let mut t = segment(&mut rng, sport, 5201, id);
                    if id == 255 && t[13] & 0x02 == 0 {
                        continue; // 255 names no data connection
                    }
                    tcp_checksum(ad, &mut t);
                    let fam = if v6 { 6 } else { 4 };
                    let key = ConnKey {
                        netns: tiu_bpf::netns_cookie().unwrap(),
                        saddr: addr_bytes(ad.src),
                        daddr: addr_bytes(ad.dst),
                        sport: sport.to_be_bytes(),
                        dport: 5201u16.to_be_bytes(),
                        family: fam,
                        pad: [0; 3],
                    };
                    let val = client_val(id);
                    tc.add_conn(&key, &val).unwrap();
                    // Egress: the frame out is crates/tiu's datagram behind the adjusted IP header.
                    let want_udp = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), id).unwrap();
                    let (ret, out) = tc.egress(&frame(v6, 6, &t)).unwrap();
                    assert_eq!(ret, TC_ACT_OK);
                    assert_eq!(
                        out,
                        frame(v6, 17, &want_udp),
                        "egress v6={v6} n={n} id={id}"
                    );
                    // Ingress on the other side: the ID table knows the connection.
                    let ik = IdKey {
                        netns: tiu_bpf::netns_cookie().unwrap(),
                        saddr: addr_bytes(ad.src),
                        daddr: addr_bytes(ad.dst),
                        udp_sport: CLIENT_UDP.to_be_bytes(),
                        udp_dport: TIU_PORT.to_be_bytes(),
                        family: fam,
                        conn_id: id,
                        pad: [0; 2],
                    };
                    if id != 255 {
                        tc.add_id(
                            &ik,
                            &IdVal {
                                sport: sport.to_be_bytes(),
                                dport: 5201u16.to_be_bytes(),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    }
                    let asked = || {
                        if t[13] & 0x12 == 0x12 {
                            // A SYN-ACK teaches only the host that sent the SYN: its own entry
                            // (the reverse four-tuple, as it sends) with the ID it asked for.
                            tc.add_conn(
                                &ConnKey {
                                    netns: tiu_bpf::netns_cookie().unwrap(),
                                    saddr: addr_bytes(ad.dst),
                                    daddr: addr_bytes(ad.src),
                                    sport: 5201u16.to_be_bytes(),
                                    dport: sport.to_be_bytes(),
                                    family: fam,
                                    pad: [0; 3],
                                },
                                &ConnVal {
                                    udp_sport: TIU_PORT.to_be_bytes(),
                                    udp_dport: CLIENT_UDP.to_be_bytes(),
                                    conn_id: id,
                                    pad: [0; 3],
                                    state: 0,
                                },
                            )
                            .unwrap();
                        }
                    };
                    asked();
                    let back =
                        tiu_to_tcp(&want_udp, ad, |i| (i == id).then_some((sport, 5201))).unwrap();
                    let (ret, out) = tc.ingress(&frame(v6, 17, &want_udp)).unwrap();
                    assert_eq!(ret, TC_ACT_OK);
                    assert_eq!(
                        out,
                        frame(v6, 6, &back.tcp),
                        "ingress v6={v6} n={n} id={id}"
                    );
                    // As a NIC hands it over, with a checksum of the whole packet that must
                    // still describe it afterwards (the kernel checks). (A refusal took the
                    // asking host's entry away: it asks again.)
                    asked();
                    let (ret, out) = tc
                        .ingress_checksum_complete(&frame(v6, 17, &want_udp))
                        .unwrap();
                    assert_eq!(
                        (ret, out),
                        (TC_ACT_OK, frame(v6, 6, &back.tcp)),
                        "CHECKSUM_COMPLETE v6={v6} n={n}"
                    );
                    if t[13] & 0x02 != 0 {
                        syn += 1
                    } else {
                        data += 1
                    }
                }
            }
            let s = tc.stats().unwrap();
            (data, syn, s)
        })
        .unwrap();
        let (data, syn, s) = r;
        println!("{data} data and {syn} SYN vectors; counters {s:?}");
        assert!(data > 2000 && syn > 500, "{data} data, {syn} SYN");
        assert_eq!(s[0], data as u64, "eg_data");
        assert_eq!(s[1], syn as u64, "eg_syn");
        assert_eq!(
            s[5],
            2 * data as u64,
            "in_data (each twice: as it is and CHECKSUM_COMPLETE)"
        );
        assert_eq!(s[6], 2 * syn as u64, "in_syn");
        assert_eq!(
            s[2] + s[3] + s[4] + s[7] + s[8] + s[9] + s[10] + s[11] + s[12] + s[13] + s[14],
            0,
            "{s:?}"
        );
    }
}

#[test]
fn refusals_are_counted_and_never_translated_into_another_connection() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    tiu_bpf::with_loaded(TIU_PORT, |tc| {
        let ad = addrs(false);
        let mut rng = Rng(99);
        let key = client_key(ad, 50_007);
        tc.add_conn(&key, &client_val(7)).unwrap();
        let mut t = segment(&mut rng, 50_007, 5201, 7);
        t[13] &= !0x02;
        tcp_checksum(ad, &mut t);
        // Not in the table: untouched.
        let mut other = t.clone();
        other[0..2].copy_from_slice(&50_008u16.to_be_bytes());
        tcp_checksum(ad, &mut other);
        assert_eq!(
            tc.egress(&frame(false, 6, &other)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &other))
        );
        // URG: sent as plain TCP, counted.
        let mut urg = t.clone();
        urg[13] |= 0x20;
        assert_eq!(
            tc.egress(&frame(false, 6, &urg)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &urg))
        );
        // Ingress: ID 7 is not in the ID table: dropped; no checksum: dropped; STUN: passed on.
        let d = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), 7).unwrap();
        assert_eq!(tc.ingress(&frame(false, 17, &d)).unwrap().0, TC_ACT_SHOT);
        let mut nock = d.clone();
        nock[6..8].copy_from_slice(&[0, 0]);
        assert_eq!(tc.ingress(&frame(false, 17, &nock)).unwrap().0, TC_ACT_SHOT);
        let mut stun = d.clone();
        stun[8] = 0x00;
        assert_eq!(
            tc.ingress(&frame(false, 17, &stun)).unwrap(),
            (TC_ACT_OK, frame(false, 17, &stun))
        );
        // A datagram on another port: not TiU's business.
        let mut elsewhere = d.clone();
        elsewhere[2..4].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(
            tc.ingress(&frame(false, 17, &elsewhere)).unwrap(),
            (TC_ACT_OK, frame(false, 17, &elsewhere))
        );
        let s = tc.stats().unwrap();
        assert_eq!(
            (s[2], s[9], s[8], s[7]),
            (1, 1, 1, 1),
            "uncarried, unknown id, no checksum, not TiU: {s:?}"
        );
    })
    .unwrap();
}

/// An IPv4 header with one 4-byte option (Router Alert, RFC 2113): ihl 6.
fn frame_v4_options(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let mut ip = vec![0x46, 0];
    ip.extend_from_slice(&((24 + l4.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[
        0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 0, 1, 2, 10, 0, 2, 3, 0x94, 0x04, 0, 0,
    ]);
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

#[test]
fn ipv4_options_carry_data_but_not_a_syn() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    tiu_bpf::with_loaded(TIU_PORT, |tc| {
        let ad = addrs(false);
        let mut rng = Rng(7);
        let key = client_key(ad, 50_009);
        let val = client_val(9);
        tc.add_conn(&key, &val).unwrap();
        tc.add_id(
            &IdKey {
                netns: tiu_bpf::netns_cookie().unwrap(),
                saddr: addr_bytes(ad.src),
                daddr: addr_bytes(ad.dst),
                udp_sport: CLIENT_UDP.to_be_bytes(),
                udp_dport: TIU_PORT.to_be_bytes(),
                family: 4,
                conn_id: 9,
                pad: [0; 2],
            },
            &IdVal {
                sport: 50_009u16.to_be_bytes(),
                dport: 5201u16.to_be_bytes(),
                ..Default::default()
            },
        )
        .unwrap();
        // A data segment: translated in place behind the options.
        let mut t = segment_kind(&mut rng, 50_009, 5201, 9, false);
        tcp_checksum(ad, &mut t);
        let d = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), 9).unwrap();
        assert_eq!(
            tc.egress(&frame_v4_options(6, &t)).unwrap(),
            (TC_ACT_OK, frame_v4_options(17, &d))
        );
        let back = tiu_to_tcp(&d, ad, |_| Some((50_009, 5201))).unwrap();
        assert_eq!(
            tc.ingress(&frame_v4_options(17, &d)).unwrap(),
            (TC_ACT_OK, frame_v4_options(6, &back.tcp))
        );
        // A SYN: its 4 bytes of room would land inside the options; plain TCP out, dropped in.
        let mut syn = segment_kind(&mut rng, 50_009, 5201, 9, true);
        tcp_checksum(ad, &mut syn);
        assert_eq!(
            tc.egress(&frame_v4_options(6, &syn)).unwrap(),
            (TC_ACT_OK, frame_v4_options(6, &syn))
        );
        let ds = tcp_to_tiu(&syn, ad, (CLIENT_UDP, TIU_PORT), 9).unwrap();
        assert_eq!(
            tc.ingress(&frame_v4_options(17, &ds)).unwrap().0,
            TC_ACT_SHOT
        );
        let s = tc.stats().unwrap();
        assert_eq!(
            (s[0], s[2], s[5], s[10]),
            (1, 1, 1, 1),
            "eg_data, eg_uncarried, in_data, in_malformed: {s:?}"
        );
    })
    .unwrap();
}

#[test]
fn another_namespaces_entries_never_translate_this_ones_segments() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    tiu_bpf::with_loaded(TIU_PORT, |tc| {
        // A second namespace with the same addresses (containers): its cookie, from a thread
        // that moved into a namespace of its own.
        let here = tiu_bpf::netns_cookie().unwrap();
        let there = std::thread::spawn(|| {
            private_netns();
            tiu_bpf::netns_cookie().unwrap()
        })
        .join()
        .unwrap();
        assert_ne!(here, there);
        let ad = addrs(false);
        let mut rng = Rng(21);
        let id_key = |netns| IdKey {
            netns,
            saddr: addr_bytes(ad.src),
            daddr: addr_bytes(ad.dst),
            udp_sport: CLIENT_UDP.to_be_bytes(),
            udp_dport: TIU_PORT.to_be_bytes(),
            family: 4,
            conn_id: 4,
            pad: [0; 2],
        };
        let id_val = IdVal {
            sport: 50_004u16.to_be_bytes(),
            dport: 5201u16.to_be_bytes(),
            ..Default::default()
        };
        let mut t = segment_kind(&mut rng, 50_004, 5201, 4, false);
        tcp_checksum(ad, &mut t);
        let d = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), 4).unwrap();
        let back = tiu_to_tcp(&d, ad, |_| Some((50_004, 5201))).unwrap();
        // The other namespace's entries: this one's segment goes as it is, its datagram is an
        // unknown ID.
        tc.add_conn(
            &ConnKey {
                netns: there,
                ..client_key(ad, 50_004)
            },
            &client_val(4),
        )
        .unwrap();
        tc.add_id(&id_key(there), &id_val).unwrap();
        assert_eq!(
            tc.egress(&frame(false, 6, &t)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &t))
        );
        assert_eq!(tc.ingress(&frame(false, 17, &d)).unwrap().0, TC_ACT_SHOT);
        let s = tc.stats().unwrap();
        assert_eq!(
            (
                tiu_bpf::stat(&s, "eg_data"),
                tiu_bpf::stat(&s, "in_unknown_id")
            ),
            (Some(0), Some(1))
        );
        // This namespace's: translated both ways.
        tc.add_conn(&client_key(ad, 50_004), &client_val(4))
            .unwrap();
        tc.add_id(&id_key(here), &id_val).unwrap();
        assert_eq!(
            tc.egress(&frame(false, 6, &t)).unwrap(),
            (TC_ACT_OK, frame(false, 17, &d))
        );
        assert_eq!(
            tc.ingress(&frame(false, 17, &d)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &back.tcp))
        );
    })
    .unwrap();
}

#[test]
fn a_server_learns_ids_from_syns_and_refuses_a_collision() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    tiu_bpf::with_loaded(TIU_PORT, |tc| {
        // Frames from the client (ad) arrive at the server; the server answers the other way.
        let ad = addrs(false);
        let back_ad = Addrs::new(ad.dst, ad.src).unwrap();
        let mut rng = Rng(11);
        let syn_from = |rng: &mut Rng, sport: u16, id: u8, ack: bool| {
            let mut t = segment_kind(rng, sport, 5201, id, true);
            t[13] = if ack { 0x12 } else { 0x02 };
            t
        };
        // A server: the programs learn only SYNs something listens for.
        let _listener = std::net::TcpListener::bind("0.0.0.0:5201").unwrap();
        // A SYN with ID 5 for client port 50001: learned, and the SYN-ACK goes out as TiU with 5.
        let mut syn = syn_from(&mut rng, 50_001, 5, false);
        tcp_checksum(ad, &mut syn);
        let d = tcp_to_tiu(&syn, ad, (CLIENT_UDP, TIU_PORT), 5).unwrap();
        assert_eq!(tc.ingress(&frame(false, 17, &d)).unwrap().0, TC_ACT_OK);
        let mut synack = syn_from(&mut rng, 5201, 5, true);
        synack[0..4].copy_from_slice(&[0x14, 0x51, 0xc3, 0x51]); // 5201 -> 50001
        tcp_checksum(back_ad, &mut synack);
        let want = tcp_to_tiu(&synack, back_ad, (TIU_PORT, CLIENT_UDP), 5).unwrap();
        // Unconfirmed (happy eyeballs): the SYN-ACK's TiU copy is what crates/tiu makes, and the
        // segment itself goes on raw, unchanged (its copy was sent ahead: eg_raw_copy).
        assert_eq!(
            tc.egress_copy(&frame_dir(false, 6, &synack, true)).unwrap(),
            (TC_ACT_OK, frame_dir(false, 17, &want, true))
        );
        assert_eq!(
            tc.egress(&frame_dir(false, 6, &synack, true)).unwrap(),
            (TC_ACT_OK, frame_dir(false, 6, &synack, true))
        );
        // Its data segments are decapsulated with the learned ports.
        let mut data = segment_kind(&mut rng, 50_001, 5201, 5, false);
        tcp_checksum(ad, &mut data);
        let dd = tcp_to_tiu(&data, ad, (CLIENT_UDP, TIU_PORT), 5).unwrap();
        let backd = tiu_to_tcp(&dd, ad, |_| Some((50_001, 5201))).unwrap();
        assert_eq!(
            tc.ingress(&frame(false, 17, &dd)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &backd.tcp))
        );
        // The connection of ID 5 becomes real (a socket pair over this namespace's loopback
        // with the frames' addresses and ports): an ID held for a connection that never became
        // a socket would be taken over (a handshake that never completed leaves no close).
        for cmd in [
            &["ip", "link", "set", "lo", "up"][..],
            &["ip", "addr", "add", "10.0.1.2/32", "dev", "lo"],
            &["ip", "addr", "add", "10.0.2.3/32", "dev", "lo"],
        ] {
            assert!(
                std::process::Command::new(cmd[0])
                    .args(&cmd[1..])
                    .status()
                    .unwrap()
                    .success(),
                "{cmd:?}"
            );
        }
        let live =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        live.bind(
            &"10.0.1.2:50001"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        live.connect(
            &"10.0.2.3:5201"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        // Another SYN asking for ID 5 for client port 50002: a collision. The server's answer
        // carries 255, and its segments of that connection go as plain TCP.
        let mut syn2 = syn_from(&mut rng, 50_002, 5, false);
        tcp_checksum(ad, &mut syn2);
        let d2 = tcp_to_tiu(&syn2, ad, (CLIENT_UDP, TIU_PORT), 5).unwrap();
        assert_eq!(tc.ingress(&frame(false, 17, &d2)).unwrap().0, TC_ACT_OK);
        let mut refusal = syn_from(&mut rng, 5201, 255, true);
        refusal[0..4].copy_from_slice(&[0x14, 0x51, 0xc3, 0x52]); // 5201 -> 50002
        tcp_checksum(back_ad, &mut refusal);
        let want = tcp_to_tiu(&refusal, back_ad, (TIU_PORT, CLIENT_UDP), 255).unwrap();
        assert_eq!(
            tc.egress_copy(&frame_dir(false, 6, &refusal, true))
                .unwrap(),
            (TC_ACT_OK, frame_dir(false, 17, &want, true))
        );
        let mut later = segment_kind(&mut rng, 5201, 50_002, 0, false);
        tcp_checksum(back_ad, &mut later);
        assert_eq!(
            tc.egress(&frame_dir(false, 6, &later, true)).unwrap(),
            (TC_ACT_OK, frame_dir(false, 6, &later, true))
        );
        let s = tc.stats().unwrap();
        let named = tiu_bpf::named_stats(&s);
        let get = |n: &str| tiu_bpf::stat(&s, n).unwrap();
        assert_eq!(
            (
                get("in_syn"),
                get("eg_syn"),
                get("in_data"),
                get("in_collision"),
                get("eg_uncarried")
            ),
            (2, 2, 1, 1, 1),
            "{named:?}"
        );
        assert_eq!(get("eg_raw_copy"), 1, "{named:?}");
        // The client side: a refusing SYN-ACK ends its encapsulation.
        let ck = client_key(ad, 50_003);
        tc.add_conn(&ck, &client_val(6)).unwrap();
        let mut no = syn_from(&mut rng, 5201, 255, true);
        no[0..4].copy_from_slice(&[0x14, 0x51, 0xc3, 0x53]); // 5201 -> 50003
        tcp_checksum(back_ad, &mut no);
        let dn = tcp_to_tiu(&no, back_ad, (TIU_PORT, CLIENT_UDP), 255).unwrap();
        assert_eq!(
            tc.ingress(&frame_dir(false, 17, &dn, true)).unwrap().0,
            TC_ACT_OK
        );
        let mut after = segment_kind(&mut rng, 50_003, 5201, 6, false);
        tcp_checksum(ad, &mut after);
        assert_eq!(
            tc.egress(&frame(false, 6, &after)).unwrap(),
            (TC_ACT_OK, frame(false, 6, &after)),
            "plain TCP after a refusal"
        );
        // Happy eyeballs at a client whose ID came by rule (SYN_SENT): the server's raw SYN-ACK
        // offering TiU (its Setup option with this ID) is held once for its TiU copy, the
        // second (after a retransmission) falls back; one without the option falls back at once.
        use tiu_bpf::State;
        let held_before = tc.stats().unwrap();
        let ck7 = client_key(ad, 50_004);
        tc.add_conn(
            &ck7,
            &ConnVal {
                state: State::SynSent as u32,
                ..client_val(7)
            },
        )
        .unwrap();
        let mut offer = syn_from(&mut rng, 5201, 7, true);
        offer[0..4].copy_from_slice(&[0x14, 0x51, 0xc3, 0x54]); // 5201 -> 50004
        tcp_checksum(back_ad, &mut offer);
        let offer = frame_dir(false, 6, &offer, true);
        assert_eq!(tc.ingress(&offer).unwrap().0, TC_ACT_SHOT, "held once");
        assert_eq!(tc.conn(&ck7).unwrap().unwrap().state, State::Held as u32);
        assert_eq!(
            tc.ingress(&offer).unwrap(),
            (TC_ACT_OK, offer.clone()),
            "then passed"
        );
        assert_eq!(tc.conn(&ck7).unwrap().unwrap().state, State::Plain as u32);
        let ck8 = client_key(ad, 50_005);
        tc.add_conn(
            &ck8,
            &ConnVal {
                state: State::SynSent as u32,
                ..client_val(8)
            },
        )
        .unwrap();
        let mut bare = vec![0u8; 20];
        bare[0..4].copy_from_slice(&[0x14, 0x51, 0xc3, 0x55]); // 5201 -> 50005
        bare[12] = 5 << 4;
        bare[13] = 0x12;
        tcp_checksum(back_ad, &mut bare);
        let bare = frame_dir(false, 6, &bare, true);
        assert_eq!(tc.ingress(&bare).unwrap(), (TC_ACT_OK, bare.clone()));
        assert_eq!(tc.conn(&ck8).unwrap().unwrap().state, State::Plain as u32);
        let s = tc.stats().unwrap();
        let d = tiu_bpf::named_stats(&s);
        let got = |n: &str| tiu_bpf::stat(&s, n).unwrap() - tiu_bpf::stat(&held_before, n).unwrap();
        assert_eq!((got("in_raw_syn_held"), got("fallback")), (1, 2), "{d:?}");
        // A TiU SYN for a port nothing listens on: delivered (TCP resets it), nothing learned.
        let mut lone = syn_from(&mut rng, 50_006, 9, false);
        lone[2..4].copy_from_slice(&5999u16.to_be_bytes());
        tcp_checksum(ad, &mut lone);
        let dl = tcp_to_tiu(&lone, ad, (CLIENT_UDP, TIU_PORT), 9).unwrap();
        let entries = tc.entries();
        assert_eq!(tc.ingress(&frame(false, 17, &dl)).unwrap().0, TC_ACT_OK);
        assert_eq!(tc.entries(), entries, "nothing learned");
        let s = tc.stats().unwrap();
        assert_eq!(tiu_bpf::stat(&s, "in_no_listener"), Some(1));
    })
    .unwrap();
}

/// The family of `ad` as the maps' keys have it (4 or 6).
fn family(ad: Addrs) -> u8 {
    if matches!(ad.src, IpAddress::Ipv6(_)) {
        6
    } else {
        4
    }
}

/// The entry in `conns` of a connection from `sport` to `dport` as `ad.src` sends it.
fn conn_key(ad: Addrs, sport: u16, dport: u16) -> ConnKey {
    ConnKey {
        netns: tiu_bpf::netns_cookie().unwrap(),
        saddr: addr_bytes(ad.src),
        daddr: addr_bytes(ad.dst),
        sport: sport.to_be_bytes(),
        dport: dport.to_be_bytes(),
        family: family(ad),
        pad: [0; 3],
    }
}

/// The entry in `ids` for data datagrams from `ad.src` to `ad.dst` on the UDP port pair `udp`.
fn id_key(ad: Addrs, udp: (u16, u16), id: u8) -> IdKey {
    IdKey {
        netns: tiu_bpf::netns_cookie().unwrap(),
        saddr: addr_bytes(ad.src),
        daddr: addr_bytes(ad.dst),
        udp_sport: udp.0.to_be_bytes(),
        udp_dport: udp.1.to_be_bytes(),
        family: family(ad),
        conn_id: id,
        pad: [0; 2],
    }
}

/// Its value: the TCP ports as the datagrams' segments travel, open (or closed at `closed_s`).
fn id_val(sport: u16, dport: u16, closed_s: u32) -> IdVal {
    IdVal {
        sport: sport.to_be_bytes(),
        dport: dport.to_be_bytes(),
        closed_s,
        ..Default::default()
    }
}

/// A TCP listener on `port` of every address of the family (IPv6 only for IPv6, so the two
/// families' listeners can share the port): what a server's learning looks for.
fn listener(v6: bool, port: u16) -> socket2::Socket {
    let (domain, addr) = if v6 {
        (socket2::Domain::IPV6, format!("[::]:{port}"))
    } else {
        (socket2::Domain::IPV4, format!("0.0.0.0:{port}"))
    };
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, None).unwrap();
    if v6 {
        s.set_only_v6(true).unwrap();
    }
    s.bind(&addr.parse::<std::net::SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(16).unwrap();
    s
}

/// The check of a data header's packing against the figure itself (not only crates/tiu's bytes):
/// Data Offset in the first nibble, the ID's top four bits in the second, its lowest bit where URG
/// was, the other flags and the window as in TCP.
fn assert_data_header(tcp: &[u8], udp: &[u8], id: u8) {
    assert_eq!(udp[8] >> 4, tcp[12] >> 4, "data offset");
    assert_eq!(udp[8] & 0x0f, id >> 1, "the ID's top four bits");
    assert_eq!(
        (udp[9] >> 5) & 1,
        id & 1,
        "the ID's lowest bit (URG's place)"
    );
    assert_eq!(udp[9] & !0x20, tcp[13], "flags");
    assert_eq!(
        &udp[10..20],
        &tcp[14..16]
            .iter()
            .chain(&tcp[4..12])
            .copied()
            .collect::<Vec<_>>()[..]
    );
}

#[test]
fn the_highest_port_and_the_highest_id_translate_both_ways() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    {
        use tiu_bpf::State;
        // Where bit packing breaks: the ID's top bits beside the Data Offset, its lowest bit in
        // URG's place, ports whose bytes are all ones or end in a single one.
        const EDGES: [(u16, u16); 3] = [(65535, 65535), (65535, 1), (1, 65535)];
        // 31 and 0 (all ones, all zeros), 30 and 1 (only the bit in URG's place differs).
        const IDS: [u8; 4] = [31, 0, 30, 1];
        // The client's side: listed connections, then ones waiting for their SYN's answer.
        let (n_data, n_syn, s) = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            let mut rng = Rng(0x6564_6765_0001);
            let (mut n_data, mut n_syn) = (0u64, 0u64);
            for v6 in [false, true] {
                let ad = addrs(v6);
                let back_ad = Addrs::new(ad.dst, ad.src).unwrap();
                for (sport, dport) in EDGES {
                    for id in IDS {
                        let ctx = format!("v6={v6} {sport}->{dport} id={id}");
                        let key = conn_key(ad, sport, dport);
                        tc.add_conn(&key, &client_val(id)).unwrap();
                        tc.add_id(
                            &id_key(ad, (CLIENT_UDP, TIU_PORT), id),
                            &id_val(sport, dport, 0),
                        )
                        .unwrap();
                        for k in 0..24 {
                            let syn = k % 3 == 2;
                            let mut t = segment_kind(&mut rng, sport, dport, id, syn);
                            tcp_checksum(ad, &mut t);
                            let want = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), id).unwrap();
                            if syn {
                                assert_eq!(&want[20..22], &sport.to_be_bytes(), "{ctx}");
                                assert_eq!(&want[22..24], &dport.to_be_bytes(), "{ctx}");
                                assert_eq!((want[8] & 0x0f, want[9] & 0x20), (0, 0), "{ctx}");
                                n_syn += 1;
                            } else {
                                assert_data_header(&t, &want, id);
                                n_data += 1;
                            }
                            // Fixed: every segment, a SYN too, goes as TiU at once (no raw copy).
                            assert_eq!(
                                tc.egress(&frame(v6, 6, &t)).unwrap(),
                                (TC_ACT_OK, frame(v6, 17, &want)),
                                "egress {ctx} k={k} flags={:#04x}",
                                t[13]
                            );
                            // The other end: a SYN-ACK teaches only the host that asked (its own
                            // entry, the reverse four-tuple, with this ID).
                            if t[13] & 0x12 == 0x12 {
                                tc.add_conn(
                                    &conn_key(back_ad, dport, sport),
                                    &ConnVal {
                                        udp_sport: TIU_PORT.to_be_bytes(),
                                        udp_dport: CLIENT_UDP.to_be_bytes(),
                                        conn_id: id,
                                        pad: [0; 3],
                                        state: State::Fixed as u32,
                                    },
                                )
                                .unwrap();
                            }
                            let back =
                                tiu_to_tcp(&want, ad, |i| (i == id).then_some((sport, dport)))
                                    .unwrap();
                            assert_eq!(&back.tcp[..4], &t[..4], "{ctx}");
                            assert_eq!(
                                tc.ingress(&frame(v6, 17, &want)).unwrap(),
                                (TC_ACT_OK, frame(v6, 6, &back.tcp)),
                                "ingress {ctx} k={k} flags={:#04x}",
                                t[13]
                            );
                            assert_eq!(
                                tc.ingress_checksum_complete(&frame(v6, 17, &want)).unwrap(),
                                (TC_ACT_OK, frame(v6, 6, &back.tcp)),
                                "CHECKSUM_COMPLETE {ctx} k={k}"
                            );
                        }
                        // Waiting for its SYN's answer (a connection given its ID by rule): the
                        // SYN's TiU copy is crates/tiu's datagram, the SYN itself goes on raw.
                        tc.add_conn(
                            &key,
                            &ConnVal {
                                state: State::SynSent as u32,
                                ..client_val(id)
                            },
                        )
                        .unwrap();
                        let mut t = segment_kind(&mut rng, sport, dport, id, true);
                        t[13] = 0x02;
                        tcp_checksum(ad, &mut t);
                        let want = tcp_to_tiu(&t, ad, (CLIENT_UDP, TIU_PORT), id).unwrap();
                        assert_eq!(
                            tc.egress_copy(&frame(v6, 6, &t)).unwrap(),
                            (TC_ACT_OK, frame(v6, 17, &want)),
                            "SYN's TiU copy {ctx}"
                        );
                        assert_eq!(
                            tc.egress(&frame(v6, 6, &t)).unwrap(),
                            (TC_ACT_OK, frame(v6, 6, &t)),
                            "raw SYN {ctx}"
                        );
                        n_syn += 1;
                    }
                }
            }
            (n_data, n_syn, tc.stats().unwrap())
        })
        .unwrap();
        let named = tiu_bpf::named_stats(&s);
        println!("client side: {n_data} data and {n_syn} SYN segments; counters {named:?}");
        let get = |n: &str| tiu_bpf::stat(&s, n).unwrap();
        // Each SynSent SYN: one raw copy (its copy is counted once more as eg_syn).
        let raw = 2 * EDGES.len() as u64 * IDS.len() as u64;
        assert_eq!(
            (
                get("eg_data"),
                get("eg_syn"),
                get("eg_raw_copy"),
                get("in_data"),
                get("in_syn")
            ),
            (n_data, n_syn, raw, 2 * n_data, 2 * (n_syn - raw)),
            "{named:?}"
        );
        for bad in [
            "eg_uncarried",
            "eg_no_setup",
            "in_unknown_id",
            "in_malformed",
            "in_error",
            "in_collision",
            "in_refused_syn",
            "in_dup_handshake",
            "fallback",
        ] {
            assert_eq!(get(bad), 0, "{bad}: {named:?}");
        }

        // The server's side: TiU SYNs asking for the edge IDs to the edge ports are learned, the
        // SYN-ACK's TiU copy carries the ID, and data goes both ways with it.
        let s = tiu_bpf::with_loaded(TIU_PORT, |tc| {
            let mut rng = Rng(0x6564_6765_0002);
            let _listeners: Vec<_> = [false, true]
                .into_iter()
                .flat_map(|v6| [listener(v6, 65535), listener(v6, 1)])
                .collect();
            for v6 in [false, true] {
                let ad = addrs(v6);
                let back_ad = Addrs::new(ad.dst, ad.src).unwrap();
                for (sport, dport) in EDGES {
                    for id in IDS {
                        let ctx = format!("server v6={v6} {sport}->{dport} id={id}");
                        let mut syn = segment_kind(&mut rng, sport, dport, id, true);
                        syn[13] = 0x02;
                        tcp_checksum(ad, &mut syn);
                        let d = tcp_to_tiu(&syn, ad, (CLIENT_UDP, TIU_PORT), id).unwrap();
                        let back = tiu_to_tcp(&d, ad, |_| None).unwrap();
                        assert_eq!(
                            tc.ingress(&frame(v6, 17, &d)).unwrap(),
                            (TC_ACT_OK, frame(v6, 6, &back.tcp)),
                            "SYN in {ctx}"
                        );
                        let server = conn_key(back_ad, dport, sport);
                        assert_eq!(
                            tc.conn(&server).unwrap(),
                            Some(ConnVal {
                                udp_sport: TIU_PORT.to_be_bytes(),
                                udp_dport: CLIENT_UDP.to_be_bytes(),
                                conn_id: id,
                                pad: [0; 3],
                                state: State::Learned as u32,
                            }),
                            "learned {ctx}"
                        );
                        let mut synack = segment_kind(&mut rng, dport, sport, id, true);
                        synack[13] = 0x12;
                        tcp_checksum(back_ad, &mut synack);
                        let want =
                            tcp_to_tiu(&synack, back_ad, (TIU_PORT, CLIENT_UDP), id).unwrap();
                        assert_eq!(
                            tc.egress_copy(&frame_dir(v6, 6, &synack, true)).unwrap(),
                            (TC_ACT_OK, frame_dir(v6, 17, &want, true)),
                            "SYN-ACK's TiU copy {ctx}"
                        );
                        assert_eq!(
                            tc.egress(&frame_dir(v6, 6, &synack, true)).unwrap(),
                            (TC_ACT_OK, frame_dir(v6, 6, &synack, true)),
                            "raw SYN-ACK {ctx}"
                        );
                        // The client's data, with the learned ID: the ports come back.
                        let mut data = segment_kind(&mut rng, sport, dport, id, false);
                        tcp_checksum(ad, &mut data);
                        let dd = tcp_to_tiu(&data, ad, (CLIENT_UDP, TIU_PORT), id).unwrap();
                        assert_data_header(&data, &dd, id);
                        let backd =
                            tiu_to_tcp(&dd, ad, |i| (i == id).then_some((sport, dport))).unwrap();
                        assert_eq!(
                            tc.ingress(&frame(v6, 17, &dd)).unwrap(),
                            (TC_ACT_OK, frame(v6, 6, &backd.tcp)),
                            "data in {ctx}"
                        );
                        assert_eq!(
                            tc.conn(&server).unwrap().unwrap().state,
                            State::Confirmed as u32,
                            "{ctx}"
                        );
                        // The server's data, with the same ID the other way.
                        let mut out = segment_kind(&mut rng, dport, sport, id, false);
                        tcp_checksum(back_ad, &mut out);
                        let wo = tcp_to_tiu(&out, back_ad, (TIU_PORT, CLIENT_UDP), id).unwrap();
                        assert_data_header(&out, &wo, id);
                        assert_eq!(
                            tc.egress(&frame_dir(v6, 6, &out, true)).unwrap(),
                            (TC_ACT_OK, frame_dir(v6, 17, &wo, true)),
                            "data out {ctx}"
                        );
                    }
                }
            }
            tc.stats().unwrap()
        })
        .unwrap();
        let named = tiu_bpf::named_stats(&s);
        println!("server side: counters {named:?}");
        let get = |n: &str| tiu_bpf::stat(&s, n).unwrap();
        let n = 2 * EDGES.len() as u64 * IDS.len() as u64;
        assert_eq!(
            (
                get("in_syn"),
                get("eg_syn"),
                get("eg_raw_copy"),
                get("in_data"),
                get("eg_data")
            ),
            (n, n, n, n, n),
            "{named:?}"
        );
        for bad in [
            "in_no_listener",
            "in_collision",
            "in_refused_syn",
            "in_dup_handshake",
            "in_unknown_id",
            "in_malformed",
            "in_error",
            "eg_uncarried",
            "eg_no_setup",
        ] {
            assert_eq!(get(bad), 0, "{bad}: {named:?}");
        }
    }
}

/// `closed_s` as tiu_tc's close callback writes it now: 1 + the second of CLOCK_MONOTONIC (the
/// clock of bpf_ktime_get_ns).
fn closed_now() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: an out-parameter of the right type.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as u32 + 1
}

#[test]
fn a_reconnect_on_the_same_four_tuple_gets_its_id_again() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    for v6 in [false, true] {
        // The closed connection that left ID 7 lingering: this four-tuple's own (a reconnect),
        // or an earlier one of the peer's from another port.
        for old_sport in [50_007u16, 50_070] {
            tiu_bpf::with_loaded(TIU_PORT, |tc| {
                use tiu_bpf::State;
                let ctx = format!("v6={v6} lingering ID 7 of {old_sport}->5201");
                let ad = addrs(v6);
                let back_ad = Addrs::new(ad.dst, ad.src).unwrap();
                let mut rng = Rng(0x7265_636f_0000 + u64::from(old_sport));
                let _server = listener(v6, 5201);
                // The close callback took the connection's entry from `conns` and marked its ID
                // entry closed (it lingers for late segments).
                tc.add_id(
                    &id_key(ad, (CLIENT_UDP, TIU_PORT), 7),
                    &IdVal {
                        seen: 1,
                        ..id_val(old_sport, 5201, closed_now())
                    },
                )
                .unwrap();
                assert_eq!(tc.entries(), (0, 0), "no connection, no open ID: {ctx}");
                // A late segment of the closed connection still reaches its ports.
                let mut late = segment_kind(&mut rng, old_sport, 5201, 7, false);
                tcp_checksum(ad, &mut late);
                let dl = tcp_to_tiu(&late, ad, (CLIENT_UDP, TIU_PORT), 7).unwrap();
                let backl = tiu_to_tcp(&dl, ad, |_| Some((old_sport, 5201))).unwrap();
                assert_eq!(
                    tc.ingress(&frame(v6, 17, &dl)).unwrap(),
                    (TC_ACT_OK, frame(v6, 6, &backl.tcp)),
                    "late segment: {ctx}"
                );
                // The peer's new SYN from 50007 asks for ID 7 again: learned, not refused.
                let mut syn = segment_kind(&mut rng, 50_007, 5201, 7, true);
                syn[13] = 0x02;
                tcp_checksum(ad, &mut syn);
                let d = tcp_to_tiu(&syn, ad, (CLIENT_UDP, TIU_PORT), 7).unwrap();
                let back = tiu_to_tcp(&d, ad, |_| None).unwrap();
                assert_eq!(
                    tc.ingress(&frame(v6, 17, &d)).unwrap(),
                    (TC_ACT_OK, frame(v6, 6, &back.tcp)),
                    "SYN: {ctx}"
                );
                let server = conn_key(back_ad, 5201, 50_007);
                assert_eq!(
                    tc.conn(&server).unwrap(),
                    Some(ConnVal {
                        udp_sport: TIU_PORT.to_be_bytes(),
                        udp_dport: CLIENT_UDP.to_be_bytes(),
                        conn_id: 7,
                        pad: [0; 3],
                        state: State::Learned as u32,
                    }),
                    "the server's entry: {ctx}"
                );
                // The ID entry is open again (closed_s 0): the only one, and the only connection.
                assert_eq!(tc.entries(), (1, 1), "open again: {ctx}");
                // The SYN-ACK's TiU copy carries ID 7 (not 255), the SYN-ACK goes on raw too.
                let mut synack = segment_kind(&mut rng, 5201, 50_007, 7, true);
                synack[13] = 0x12;
                tcp_checksum(back_ad, &mut synack);
                let want = tcp_to_tiu(&synack, back_ad, (TIU_PORT, CLIENT_UDP), 7).unwrap();
                assert_eq!(
                    tc.egress_copy(&frame_dir(v6, 6, &synack, true)).unwrap(),
                    (TC_ACT_OK, frame_dir(v6, 17, &want, true)),
                    "SYN-ACK's TiU copy: {ctx}"
                );
                assert_eq!(
                    tc.egress(&frame_dir(v6, 6, &synack, true)).unwrap(),
                    (TC_ACT_OK, frame_dir(v6, 6, &synack, true)),
                    "raw SYN-ACK: {ctx}"
                );
                // Data with ID 7: the new connection's ports, never the old ones.
                let mut data = segment_kind(&mut rng, 50_007, 5201, 7, false);
                tcp_checksum(ad, &mut data);
                let dd = tcp_to_tiu(&data, ad, (CLIENT_UDP, TIU_PORT), 7).unwrap();
                let backd = tiu_to_tcp(&dd, ad, |_| Some((50_007, 5201))).unwrap();
                let (ret, got) = tc.ingress(&frame(v6, 17, &dd)).unwrap();
                assert_eq!(
                    (ret, &got),
                    (TC_ACT_OK, &frame(v6, 6, &backd.tcp)),
                    "data: {ctx}"
                );
                if old_sport != 50_007 {
                    let stale = tiu_to_tcp(&dd, ad, |_| Some((old_sport, 5201))).unwrap();
                    assert_ne!(got, frame(v6, 6, &stale.tcp), "the old ports: {ctx}");
                }
                // Its first TiU data segment confirmed the server's handshake.
                assert_eq!(
                    tc.conn(&server).unwrap().unwrap().state,
                    State::Confirmed as u32,
                    "{ctx}"
                );
                // And the server's data goes out with ID 7.
                let mut out = segment_kind(&mut rng, 5201, 50_007, 7, false);
                tcp_checksum(back_ad, &mut out);
                let wo = tcp_to_tiu(&out, back_ad, (TIU_PORT, CLIENT_UDP), 7).unwrap();
                assert_eq!(
                    tc.egress(&frame_dir(v6, 6, &out, true)).unwrap(),
                    (TC_ACT_OK, frame_dir(v6, 17, &wo, true)),
                    "data out: {ctx}"
                );
                let s = tc.stats().unwrap();
                let named = tiu_bpf::named_stats(&s);
                let get = |n: &str| tiu_bpf::stat(&s, n).unwrap();
                assert_eq!(
                    (
                        get("in_syn"),
                        get("in_data"),
                        get("eg_syn"),
                        get("eg_raw_copy"),
                        get("eg_data")
                    ),
                    (1, 2, 1, 1, 1),
                    "{ctx}: {named:?}"
                );
                for bad in [
                    "in_collision",
                    "in_refused_syn",
                    "in_dup_handshake",
                    "in_no_listener",
                    "in_unknown_id",
                    "in_error",
                ] {
                    assert_eq!(get(bad), 0, "{bad}, {ctx}: {named:?}");
                }
            })
            .unwrap();
        }
    }
}

#[test]
fn a_full_connections_map_evicts_idle_entries_and_never_mistranslates() {
    if let Some(why) = cannot_load() {
        println!("SKIP: {why}");
        return;
    }
    #[cfg(not(tiu_bpf_missing))]
    tiu_bpf::with_loaded(TIU_PORT, |tc| {
        use tiu_bpf::State;
        const FULL: usize = 4096; // TIU_MAX_CONNS: `tiu_conns`' size
        const MORE: usize = 1000;
        const LIVE: usize = 0; // the oldest entry: the first an LRU would take, were it idle
        let started = std::time::Instant::now();
        let ad = addrs(false);
        let mut rng = Rng(0x6c72_7500_0001);
        // Connection i: port 10000 + i to 5201 on the UDP port pair 20000 + i / 32 to the TiU
        // port, ID i % 32: every (port pair, ID) its own, so each connection has an `ids` entry.
        let conn = |i: usize| (10_000 + i as u16, 20_000 + (i / 32) as u16, (i % 32) as u8);
        let key = |i: usize| conn_key(ad, conn(i).0, 5201);
        // Each connection's data segment and the datagram crates/tiu makes of it.
        let segs: Vec<(Vec<u8>, Vec<u8>)> = (0..FULL + MORE)
            .map(|i| {
                let (sport, udp, id) = conn(i);
                let mut t = segment_kind(&mut rng, sport, 5201, id, false);
                tcp_checksum(ad, &mut t);
                let d = tcp_to_tiu(&t, ad, (udp, TIU_PORT), id).unwrap();
                (t, d)
            })
            .collect();
        let add = |i: usize| {
            let (sport, udp, id) = conn(i);
            tc.add_conn(
                &key(i),
                &ConnVal {
                    udp_sport: udp.to_be_bytes(),
                    udp_dport: TIU_PORT.to_be_bytes(),
                    conn_id: id,
                    pad: [0; 3],
                    state: State::Fixed as u32,
                },
            )
            .unwrap();
            tc.add_id(&id_key(ad, (udp, TIU_PORT), id), &id_val(sport, 5201, 0))
                .unwrap();
        };
        let mut live_runs = 0u64;
        let mut live = |when: &str| {
            let (t, d) = &segs[LIVE];
            live_runs += 1;
            assert_eq!(
                tc.egress(&frame(false, 6, t)).unwrap(),
                (TC_ACT_OK, frame(false, 17, d)),
                "the live connection {when}"
            );
        };
        // (User space's lookups, tc.conn, do not touch the LRU's reference bits; egress's do: one
        // use after the fill is enough to keep an entry through the next rotation, none is not.)
        let listed = |n: usize| {
            (0..n)
                .filter(|&i| tc.conn(&key(i)).unwrap().is_some())
                .count()
        };
        for i in 0..FULL {
            add(i);
        }
        let after_fill = listed(FULL);
        println!("after filling {FULL}: {after_fill} listed");
        live("after the fill");
        for i in FULL..FULL + MORE {
            add(i);
            if i % 8 == 0 {
                live(&format!("while adding connection {i}"));
            }
        }
        live("after 1000 more");
        // Every connection: its own datagram (listed) or its segment as it is (evicted: plain
        // TCP), never another's ID or port pair. And its datagram decapsulates to its own
        // ports (`ids` is 16 times larger: nothing should go from it).
        let mut evicted = Vec::new();
        for (i, (t, d)) in segs.iter().enumerate() {
            let (sport, _, id) = conn(i);
            let is_listed = tc.conn(&key(i)).unwrap().is_some();
            let (ret, out) = tc.egress(&frame(false, 6, t)).unwrap();
            assert_eq!(ret, TC_ACT_OK, "connection {i}");
            if out == frame(false, 17, d) {
                assert!(is_listed, "connection {i} translated without an entry");
            } else {
                assert_eq!(
                    out,
                    frame(false, 6, t),
                    "connection {i} (ID {id}): neither its own datagram nor plain TCP"
                );
                assert!(!is_listed, "connection {i} listed but not translated");
                evicted.push(i);
            }
            let back = tiu_to_tcp(d, ad, |j| (j == id).then_some((sport, 5201))).unwrap();
            assert_eq!(
                tc.ingress(&frame(false, 17, d)).unwrap(),
                (TC_ACT_OK, frame(false, 6, &back.tcp)),
                "connection {i}'s datagram"
            );
        }
        // The oldest idle ones should go first (the kernel's LRU is approximate: printed, not
        // required).
        let oldest = evicted
            .iter()
            .enumerate()
            .take_while(|(n, &i)| i == n + 1)
            .count();
        println!(
            "evicted {} of {} (the map holds {FULL}): connections {:?} to {:?}, the first {oldest} \
             of them the oldest idle ones in order; the live one {}; {:.1} s",
            evicted.len(),
            FULL + MORE,
            evicted.first(),
            evicted.last(),
            if evicted.contains(&LIVE) {
                "evicted"
            } else {
                "kept"
            },
            started.elapsed().as_secs_f64()
        );
        assert!(!evicted.contains(&LIVE), "the live connection was evicted");
        // Eviction reached the oldest entries: the live one stayed for its use, not its luck.
        assert!(
            evicted.contains(&(LIVE + 1)),
            "the idle connection after the live one was kept"
        );
        assert_eq!(
            tc.entries().0,
            FULL + MORE - evicted.len(),
            "entries listed"
        );
        assert!(
            evicted.len() >= MORE,
            "{} evicted: the map holds {FULL}",
            evicted.len()
        );
        let s = tc.stats().unwrap();
        let named = tiu_bpf::named_stats(&s);
        let get = |n: &str| tiu_bpf::stat(&s, n).unwrap();
        let kept = (FULL + MORE - evicted.len()) as u64;
        assert_eq!(
            (get("eg_data"), get("in_data")),
            (live_runs + kept, (FULL + MORE) as u64),
            "{named:?}"
        );
        for bad in ["eg_uncarried", "eg_error", "in_unknown_id", "in_error"] {
            assert_eq!(get(bad), 0, "{bad}: {named:?}");
        }
    })
    .unwrap();
}
