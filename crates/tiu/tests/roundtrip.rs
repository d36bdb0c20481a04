//! Round trips over random segments (proptest): every TCP segment TiU can carry comes back as the
//! same segment (checksum recomputed, urgent pointer 0), every TiU header `parse` accepts is
//! written back byte for byte by `emit`, and every datagram `tiu_to_tcp` accepts is what
//! `tcp_to_tiu` makes of its result, also after a few bytes of a valid header are changed (the fuzz
//! targets in `fuzz/` run the same properties on arbitrary bytes for millions of inputs).

use proptest::prelude::*;
use smoltcp::wire::{IpAddress, Ipv4Address, Ipv6Address};
use tiu::translate::{tcp_to_tiu, tiu_to_tcp, Addrs, Id};
use tiu::wire::{with_setup_option, Packet, Repr, Setup, SETUP_EXID, SETUP_KIND};

fn addrs(v6: bool, a: u32, b: u32) -> Addrs {
    if v6 {
        let x = |v: u32| {
            IpAddress::Ipv6(Ipv6Address::new(
                0xfd00,
                0,
                0,
                0,
                0,
                0,
                (v >> 16) as u16,
                v as u16,
            ))
        };
        Addrs::new(x(a), x(b)).unwrap()
    } else {
        let x = |v: u32| IpAddress::Ipv4(Ipv4Address::from_bits(v));
        Addrs::new(x(a), x(b)).unwrap()
    }
}

/// One well-formed TCP option other than ours: NOP, MSS, window scale, SACK-permitted, timestamps,
/// or an unknown kind (including Kind 253 with another ExID) with random contents.
fn option() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![1u8]),
        any::<u16>().prop_map(|m| vec![2, 4, (m >> 8) as u8, m as u8]),
        any::<u8>().prop_map(|s| vec![3, 3, s]),
        Just(vec![4, 2]),
        (any::<u32>(), any::<u32>()).prop_map(|(v, e)| [
            &[8u8, 10][..],
            &v.to_be_bytes(),
            &e.to_be_bytes()
        ]
        .concat()),
        (
            prop_oneof![5u8..=252, 254u8..=255],
            prop::collection::vec(any::<u8>(), 0..8)
        )
            .prop_map(|(k, d)| [&[k, d.len() as u8 + 2][..], &d].concat()),
        (
            any::<u16>().prop_filter("not ours", |e| *e != SETUP_EXID),
            prop::collection::vec(any::<u8>(), 0..4)
        )
            .prop_map(|(e, d)| [
                &[SETUP_KIND, d.len() as u8 + 4][..],
                &e.to_be_bytes(),
                &d
            ]
            .concat()),
    ]
}

/// Options as a sender lays them out: well-formed options, then EOL and zero padding to a
/// multiple of 4, at most `max` bytes.
fn options(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(option(), 0..6).prop_map(move |os| {
        let mut out = Vec::new();
        for o in os {
            if out.len() + o.len() <= max {
                out.extend_from_slice(&o);
            }
        }
        if out.len() % 4 != 0 {
            out.push(0);
        }
        while out.len() % 4 != 0 {
            out.push(0);
        }
        out
    })
}

#[derive(Debug, Clone)]
struct Seg {
    tcp: Vec<u8>,
    id: u8,
}

/// A TCP segment TiU can carry: no URG, no reserved bits; a SYN (or SYN-ACK) carries the Setup
/// option with its ID (0-31, or 255 on a SYN-ACK).
fn segment() -> impl Strategy<Value = Seg> {
    (
        (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>()),
        (any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>()),
        (any::<bool>(), 0u8..=31, any::<bool>()),
        options(40),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(
            |((sp, dp, seq, ack), (fl, win, csum, urg), (syn, id, refuse), opts, payload)| {
                let mut flags = fl & !0x20 & !0x02;
                let (opts, id) = if syn {
                    flags |= 0x02;
                    let setup = if refuse && flags & 0x10 != 0 {
                        Setup::Refused
                    } else {
                        Setup::Id(id)
                    };
                    match with_setup_option(&opts, setup) {
                        Ok(o) => (o, setup.value()),
                        // No room: a SYN with no other options.
                        Err(_) => (with_setup_option(&[], setup).unwrap(), setup.value()),
                    }
                } else {
                    (opts, id)
                };
                let hl = 20 + opts.len();
                let mut t = vec![0u8; hl];
                t[0..2].copy_from_slice(&sp.to_be_bytes());
                t[2..4].copy_from_slice(&dp.to_be_bytes());
                t[4..8].copy_from_slice(&seq.to_be_bytes());
                t[8..12].copy_from_slice(&ack.to_be_bytes());
                t[12] = ((hl / 4) as u8) << 4;
                t[13] = flags;
                t[14..16].copy_from_slice(&win.to_be_bytes());
                t[16..18].copy_from_slice(&csum.to_be_bytes());
                t[18..20].copy_from_slice(&urg.to_be_bytes());
                t[20..hl].copy_from_slice(&opts);
                t.extend_from_slice(&payload);
                Seg { tcp: t, id }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    #[test]
    fn every_carried_tcp_segment_comes_back(s in segment(), v6 in any::<bool>(), a in any::<u32>(), b in any::<u32>(),
                                           ports in (any::<u16>(), any::<u16>())) {
        let ad = addrs(v6, a, b);
        let d = tcp_to_tiu(&s.tcp, ad, ports, s.id).unwrap();
        let syn = s.tcp[13] & 0x02 != 0;
        prop_assert_eq!(d.len(), s.tcp.len() + if syn { 4 } else { 0 });
        let (sp, dp) = (u16::from_be_bytes([s.tcp[0], s.tcp[1]]), u16::from_be_bytes([s.tcp[2], s.tcp[3]]));
        let back = tiu_to_tcp(&d, ad, |id| (id == s.id).then_some((sp, dp))).unwrap();
        let mut want = s.tcp.clone();
        want[16..20].copy_from_slice(&[0, 0, 0, 0]);
        {
            let mut p = smoltcp::wire::TcpPacket::new_unchecked(&mut want[..]);
            p.fill_checksum(&ad.src, &ad.dst);
        }
        prop_assert_eq!(&back.tcp, &want);
        prop_assert_eq!(back.id, if syn { Id::Syn(Setup::from_value(s.id).unwrap()) } else { Id::Data(s.id) });
        // And the decapsulated segment encapsulates to the same datagram.
        prop_assert_eq!(tcp_to_tiu(&back.tcp, ad, ports, s.id).unwrap(), d);
    }

    /// TiU headers as encapsulation writes them (data and SYN alike), then up to three bytes
    /// changed: whatever `parse` accepts, `emit` writes back byte for byte.
    #[test]
    fn parse_then_emit_is_the_identity(s in segment(), edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let d = tcp_to_tiu(&s.tcp, addrs(false, 1, 2), (0x22b8, 0x22b9), s.id).unwrap();
        let mut bytes = d[8..].to_vec();
        for (at, v) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *v;
        }
        match Packet::new_checked(&bytes[..]).and_then(|p| Repr::parse(&p)) {
            Ok(r) => {
                prop_assert_eq!(r.buffer_len(), bytes.len());
                let mut out = vec![0u8; r.buffer_len()];
                r.emit(&mut Packet::new_unchecked(&mut out[..]));
                prop_assert_eq!(out, bytes);
            }
            Err(e) => prop_assert!(!edits.is_empty(), "an unedited header refused: {}", e),
        }
    }

    /// Encapsulated segments in correct datagrams (the UDP checksum refilled), up to three bytes of
    /// the TiU header and payload changed first: whatever decapsulates re-encapsulates to the same
    /// datagram, in the connection `ports` names; nothing panics.
    #[test]
    fn every_accepted_datagram_is_what_encapsulation_makes(s in segment(), v6 in any::<bool>(),
                                                          edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let ad = addrs(v6, 1, 2);
        let mut d = tcp_to_tiu(&s.tcp, ad, (0x22b8, 0x22b9), s.id).unwrap();
        for (at, v) in &edits {
            let i = 8 + at.index(d.len() - 8);
            d[i] = *v;
        }
        smoltcp::wire::UdpPacket::new_unchecked(&mut d[..]).fill_checksum(&ad.src, &ad.dst);
        match tiu_to_tcp(&d, ad, |id| Some((1000 + u16::from(id), 80))) {
            Ok(back) => {
                let id = match back.id {
                    Id::Data(i) => {
                        prop_assert_eq!(&back.tcp[..4], &[(1000 + u16::from(i)).to_be_bytes(), 80u16.to_be_bytes()].concat()[..]);
                        i
                    }
                    Id::Syn(s) => s.value(),
                };
                prop_assert_eq!(back.udp_ports, (0x22b8, 0x22b9));
                prop_assert_eq!(tcp_to_tiu(&back.tcp, ad, back.udp_ports, id).unwrap(), d);
            }
            Err(e) => prop_assert!(!edits.is_empty(), "an unedited datagram refused: {}", e),
        }
    }
}
