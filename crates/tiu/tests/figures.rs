//! The draft's Figs. 1-3 (seed 003 ch. 11 sec. 3.1.1.2) as byte arrays written by hand, and every
//! refusal. Checksums are checked with an RFC 1071 sum written here, not smoltcp's.

use smoltcp::wire::{IpAddress, Ipv4Address, Ipv6Address};
use tiu::translate::{tcp_to_tiu, tiu_to_tcp, Addrs, Decapsulated, Id};
use tiu::wire::{classify, setup_option, with_setup_option, Content, Kind, Packet, Repr, Setup};
use tiu::Error;

fn v4() -> Addrs {
    Addrs::new(
        IpAddress::Ipv4(Ipv4Address::new(10, 0, 1, 2)),
        IpAddress::Ipv4(Ipv4Address::new(10, 0, 2, 3)),
    )
    .unwrap()
}

fn v6() -> Addrs {
    Addrs::new(
        IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 1, 0, 0, 0, 2)),
        IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 2, 0, 0, 0, 3)),
    )
    .unwrap()
}

/// RFC 1071 one's-complement sum over the pseudo-header (RFC 793 / RFC 8200 sec. 8.1) and data.
fn rfc1071(addrs: Addrs, proto: u8, data: &[u8]) -> u16 {
    let mut bytes = Vec::new();
    match (addrs.src, addrs.dst) {
        (IpAddress::Ipv4(s), IpAddress::Ipv4(d)) => {
            bytes.extend_from_slice(&s.octets());
            bytes.extend_from_slice(&d.octets());
            bytes.extend_from_slice(&[0, proto]);
            bytes.extend_from_slice(&(data.len() as u16).to_be_bytes());
        }
        (IpAddress::Ipv6(s), IpAddress::Ipv6(d)) => {
            bytes.extend_from_slice(&s.octets());
            bytes.extend_from_slice(&d.octets());
            bytes.extend_from_slice(&(data.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&[0, 0, 0, proto]);
        }
        _ => unreachable!(),
    }
    bytes.extend_from_slice(data);
    if bytes.len() % 2 == 1 {
        bytes.push(0);
    }
    let mut sum: u32 = 0;
    for w in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// A segment whose checksum field is right sums to 0xffff with its pseudo-header.
fn checksum_ok(addrs: Addrs, proto: u8, data: &[u8]) -> bool {
    rfc1071(addrs, proto, data) == 0xffff
}

const UDP_PORTS: (u16, u16) = (0x22b8, 0x22b9);

/// A TCP data segment: ports 40000 -> 5201, seq 0x01020304, ack 0x05060708, Data Offset 8, ACK|PSH,
/// window 0x01f5, checksum 0xabcd (not checked, dropped), urgent pointer 0, NOP NOP TS(42, 43),
/// payload "hi".
const TCP_DATA: [u8; 34] = [
    0x9c, 0x40, 0x14, 0x51, // ports
    0x01, 0x02, 0x03, 0x04, // seq
    0x05, 0x06, 0x07, 0x08, // ack
    0x80, 0x18, 0x01, 0xf5, // DO 8, ACK|PSH, window
    0xab, 0xcd, 0x00, 0x00, // checksum, urgent pointer
    0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x2b, // options
    b'h', b'i',
];

/// Fig. 1 for Connection ID 22 = 0b1011_0: the nibble 0xB beside the Data Offset, 0 in URG's bit.
const TIU_DATA_22: [u8; 26] = [
    0x8b, 0x18, 0x01, 0xf5, // DO 8 | ID 1011, CWR ECE c=0 ACK PSH RST SYN FIN = 0x18, window
    0x01, 0x02, 0x03, 0x04, // seq
    0x05, 0x06, 0x07, 0x08, // ack
    0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x2b, // options
    b'h', b'i',
];

/// A TCP SYN: ports 40000 -> 5201, seq 0xdeadbeef, DO 8, SYN, window 0xfaf0, options MSS 1460,
/// three NOPs and the Setup option for ID 7 (Fig. 3: Kind 253, Length 5, ExID 0x524a, 7).
const TCP_SYN: [u8; 32] = [
    0x9c, 0x40, 0x14, 0x51, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, 0x80, 0x02, 0xfa, 0xf0,
    0x12, 0x34, 0x00, 0x00, // checksum (dropped), urgent pointer
    0x02, 0x04, 0x05, 0xb4, 0x01, 0x01, 0x01, 0xfd, 0x05, 0x52, 0x4a, 0x07,
];

/// Fig. 2: the Data Offset/flags/window word first, seq, ack, then the encapsulated ports.
const TIU_SYN: [u8; 28] = [
    0x80, 0x02, 0xfa, 0xf0, // DO 8 | reserved 0, SYN, window
    0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, // seq, ack
    0x9c, 0x40, 0x14, 0x51, // encapsulated source and destination ports
    0x02, 0x04, 0x05, 0xb4, 0x01, 0x01, 0x01, 0xfd, 0x05, 0x52, 0x4a, 0x07,
];

fn udp(addrs: Addrs, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut d = [
        &UDP_PORTS.0.to_be_bytes()[..],
        &UDP_PORTS.1.to_be_bytes(),
        &len.to_be_bytes(),
        &[0, 0],
        payload,
    ]
    .concat();
    let c = !rfc1071(addrs, 17, &d);
    d[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    d
}

/// The TCP segment the stack gets back: the same, urgent pointer 0, checksum right.
fn expect_tcp(addrs: Addrs, tcp: &[u8]) -> Vec<u8> {
    let mut t = tcp.to_vec();
    t[16..20].copy_from_slice(&[0, 0, 0, 0]);
    let c = !rfc1071(addrs, 6, &t);
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

fn table(id: u8) -> Option<(u16, u16)> {
    (id == 22 || id == 23).then_some((40000, 5201))
}

#[test]
fn a_data_segment_becomes_fig_1_and_back_on_ipv4_and_ipv6() {
    for addrs in [v4(), v6()] {
        let d = tcp_to_tiu(&TCP_DATA, addrs, UDP_PORTS, 22).unwrap();
        assert_eq!(d.len(), TCP_DATA.len(), "no bytes added to a data segment");
        assert_eq!(d, udp(addrs, &TIU_DATA_22));
        assert!(checksum_ok(addrs, 17, &d));
        let back = tiu_to_tcp(&d, addrs, table).unwrap();
        assert_eq!(back.id, Id::Data(22));
        assert_eq!(back.tcp, expect_tcp(addrs, &TCP_DATA));
        assert!(checksum_ok(addrs, 6, &back.tcp));
    }
}

#[test]
fn the_connection_ids_lowest_bit_takes_urgs_place() {
    let d = tcp_to_tiu(&TCP_DATA, v4(), UDP_PORTS, 23).unwrap();
    assert_eq!(&d[8..10], &[0x8b, 0x38], "23 = 0b1011_1: URG's bit set");
    for (id, b0, b1) in [
        (0u8, 0x80u8, 0x18u8),
        (1, 0x80, 0x38),
        (30, 0x8f, 0x18),
        (31, 0x8f, 0x38),
    ] {
        let d = tcp_to_tiu(&TCP_DATA, v4(), UDP_PORTS, id).unwrap();
        assert_eq!(&d[8..10], &[b0, b1], "id {id}");
        let p = Packet::new_checked(&d[8..]).unwrap();
        assert_eq!(p.conn_id(), id);
        assert_eq!(p.flags().bits(), 0x18, "the ID's bit is not a flag");
    }
}

#[test]
fn a_syn_becomes_fig_2_four_bytes_longer_and_back() {
    for addrs in [v4(), v6()] {
        let d = tcp_to_tiu(&TCP_SYN, addrs, UDP_PORTS, 7).unwrap();
        assert_eq!(d.len(), TCP_SYN.len() + 4);
        assert_eq!(d, udp(addrs, &TIU_SYN));
        let back = tiu_to_tcp(&d, addrs, |_| None).unwrap();
        assert_eq!(
            back,
            Decapsulated {
                tcp: expect_tcp(addrs, &TCP_SYN),
                udp_ports: UDP_PORTS,
                id: Id::Syn(Setup::Id(7))
            }
        );
    }
    let r = Repr::parse(&Packet::new_checked(&TIU_SYN[..]).unwrap()).unwrap();
    assert_eq!(
        r.kind,
        Kind::Syn {
            src_port: 40000,
            dst_port: 5201
        }
    );
    assert_eq!(r.setup(), Some(Setup::Id(7)));
}

#[test]
fn the_setup_option_is_fig_3_and_a_refusal_is_255() {
    assert_eq!(Setup::Id(7).to_bytes(), [253, 5, 0x52, 0x4a, 7]);
    assert_eq!(Setup::Refused.to_bytes(), [253, 5, 0x52, 0x4a, 255]);
    assert_eq!(
        Setup::parse(&[253, 5, 0x52, 0x4a, 31]),
        Ok(Some(Setup::Id(31)))
    );
    assert_eq!(
        Setup::parse(&[253, 5, 0x52, 0x4a, 255]),
        Ok(Some(Setup::Refused))
    );
    assert_eq!(
        Setup::parse(&[253, 5, 0x52, 0x4a, 32]),
        Err(Error::BadSetupOption)
    );
    assert_eq!(
        Setup::parse(&[253, 5, 0x52, 0x4a, 254]),
        Err(Error::BadSetupOption)
    );
    assert_eq!(
        Setup::parse(&[253, 6, 0x52, 0x4a, 7, 0]),
        Err(Error::BadSetupOption)
    );
    assert_eq!(
        Setup::parse(&[253, 4, 0x12, 0x34]),
        Ok(None),
        "someone else's ExID"
    );
    assert_eq!(Setup::parse(&[253, 5, 0x52, 0x4a]), Err(Error::Truncated));
    assert_eq!(Setup::parse(&[253, 3, 0x54]), Err(Error::BadOptions));
    // A refusing SYN-ACK carries 255 and is encapsulated (the sender learns TiU is off).
    let mut synack = TCP_SYN;
    synack[13] = 0x12;
    synack[31] = 255;
    let d = tcp_to_tiu(&synack, v4(), UDP_PORTS, 255).unwrap();
    assert_eq!(
        tiu_to_tcp(&d, v4(), |_| None).unwrap().id,
        Id::Syn(Setup::Refused)
    );
}

#[test]
fn the_setup_option_is_appended_on_a_four_byte_boundary() {
    let mss = [0x02, 0x04, 0x05, 0xb4];
    assert_eq!(
        with_setup_option(&mss, Setup::Id(7)).unwrap(),
        TCP_SYN[20..].to_vec()
    );
    // Linux's SYN options (MSS, SACK-permitted, timestamps, NOP, window scale: 20 bytes) + 8.
    let linux = [
        2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    let o = with_setup_option(&linux, Setup::Id(3)).unwrap();
    assert_eq!(o.len(), 28);
    assert_eq!(&o[20..], &[1, 1, 1, 253, 5, 0x52, 0x4a, 3]);
    assert_eq!(setup_option(&o), Ok(Some(Setup::Id(3))));
    assert_eq!(
        with_setup_option(&o, Setup::Id(3)),
        Err(Error::BadOptions),
        "already there"
    );
    assert_eq!(
        with_setup_option(&[1; 36], Setup::Id(3)).unwrap().len(),
        8,
        "padding dropped"
    );
    assert_eq!(
        with_setup_option(
            &[
                8, 36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0
            ],
            Setup::Id(3)
        ),
        Err(Error::BadOptions),
        "no room"
    );
}

#[test]
fn stun_and_other_content_on_the_port_is_not_tiu() {
    // A STUN Binding Request starts 0x00 0x01 (RFC 5389 sec. 6).
    assert_eq!(classify(&[0x00, 0x01, 0x00, 0x00]), Content::Stun);
    assert_eq!(classify(&[0x3f]), Content::Stun);
    assert_eq!(classify(&[0x4f]), Content::Other);
    assert_eq!(classify(&[]), Content::Other);
    assert_eq!(classify(&[0x50]), Content::Tiu);
    assert_eq!(classify(&[0xff]), Content::Tiu);
    let stun = udp(
        v4(),
        &[
            0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
        ],
    );
    assert_eq!(tiu_to_tcp(&stun, v4(), table), Err(Error::NotTiu));
}

#[test]
fn every_bad_datagram_is_refused_with_its_reason() {
    let good = udp(v4(), &TIU_DATA_22);
    let bad = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut d = good.clone();
        f(&mut d);
        tiu_to_tcp(&d, v4(), table)
    };
    assert_eq!(
        bad(&|d| d[6..8].copy_from_slice(&[0, 0])),
        Err(Error::NoChecksum)
    );
    assert_eq!(bad(&|d| d[30] ^= 1), Err(Error::Checksum));
    assert_eq!(bad(&|d| d.truncate(7)), Err(Error::BadUdp));
    assert_eq!(
        bad(&|d| d[4..6].copy_from_slice(&100u16.to_be_bytes())),
        Err(Error::BadUdp),
        "UDP length past the buffer"
    );
    // Unknown connection: ID 5 is in no table.
    let d = tcp_to_tiu(&TCP_DATA, v4(), UDP_PORTS, 5).unwrap();
    assert_eq!(tiu_to_tcp(&d, v4(), table), Err(Error::UnknownConnId(5)));
    // Lengths that disagree: a Data Offset of 15 (40 bytes of options) in 26 bytes.
    let mut h = TIU_DATA_22;
    h[0] = 0xfb;
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table),
        Err(Error::Truncated)
    );
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h[..1]), v4(), table),
        Err(Error::Truncated)
    );
    // Options that do not parse: a length running past the end.
    let mut h = TIU_DATA_22;
    h[14] = 8;
    h[15] = 30;
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table),
        Err(Error::BadOptions)
    );
    // A Setup option on a data segment.
    let mut h = TIU_DATA_22;
    h[12..20].copy_from_slice(&[1, 1, 1, 253, 5, 0x52, 0x4a, 7]);
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table),
        Err(Error::BadSetupOption)
    );
    // SYN headers: reserved bits, no Setup option, a bad one, two of them.
    let syn = |f: &dyn Fn(&mut [u8; 28])| {
        let mut h = TIU_SYN;
        f(&mut h);
        tiu_to_tcp(&udp(v4(), &h), v4(), table)
    };
    assert_eq!(syn(&|h| h[0] |= 0x01), Err(Error::Reserved));
    assert_eq!(syn(&|h| h[1] |= 0x20), Err(Error::Reserved));
    assert_eq!(
        syn(&|h| h[23..28].copy_from_slice(&[1, 1, 1, 1, 1])),
        Err(Error::NoSetupOption)
    );
    assert_eq!(
        syn(&|h| h[24] = 6),
        Err(Error::BadOptions),
        "length past the end"
    );
    assert_eq!(syn(&|h| h[27] = 40), Err(Error::BadSetupOption));
    assert_eq!(
        syn(&|h| h[25..27].copy_from_slice(&[0x12, 0x34])),
        Err(Error::NoSetupOption),
        "another ExID"
    );
    // DO 10 (20 bytes of options) holding two Setup options.
    let mut h = [0u8; 36];
    h[..16].copy_from_slice(&[
        0xa0, 0x02, 0xfa, 0xf0, 0, 0, 0, 1, 0, 0, 0, 0, 0x9c, 0x40, 0x14, 0x51,
    ]);
    h[16..36].copy_from_slice(&[
        1, 1, 1, 253, 5, 0x52, 0x4a, 7, 1, 1, 1, 253, 5, 0x52, 0x4a, 8, 0, 0, 0, 0,
    ]);
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table),
        Err(Error::BadSetupOption),
        "two Setup options"
    );
}

#[test]
fn every_untranslatable_tcp_segment_is_refused_with_its_reason() {
    let bad = |f: &dyn Fn(&mut Vec<u8>), id: u8| {
        let mut t = TCP_DATA.to_vec();
        f(&mut t);
        tcp_to_tiu(&t, v4(), UDP_PORTS, id)
    };
    assert_eq!(bad(&|_| {}, 32), Err(Error::BadConnId(32)));
    assert_eq!(bad(&|t| t[13] |= 0x20, 22), Err(Error::Urgent));
    assert_eq!(
        bad(&|t| t[12] |= 0x01, 22),
        Err(Error::Reserved),
        "AE (ex-NS)"
    );
    assert_eq!(bad(&|t| t[12] |= 0x0e, 22), Err(Error::Reserved));
    assert_eq!(bad(&|t| t.truncate(19), 22), Err(Error::BadTcp));
    assert_eq!(
        bad(&|t| t[12] = 0x40, 22),
        Err(Error::BadTcp),
        "Data Offset 4"
    );
    assert_eq!(
        bad(&|t| t[12] = 0xf0, 22),
        Err(Error::BadTcp),
        "options past the end"
    );
    assert_eq!(
        bad(
            &|t| t[20..28].copy_from_slice(&[1, 1, 1, 253, 5, 0x52, 0x4a, 7]),
            22
        ),
        Err(Error::BadSetupOption)
    );
    let syn = |f: &dyn Fn(&mut Vec<u8>), id: u8| {
        let mut t = TCP_SYN.to_vec();
        f(&mut t);
        tcp_to_tiu(&t, v4(), UDP_PORTS, id)
    };
    assert_eq!(syn(&|_| {}, 8), Err(Error::SetupMismatch));
    assert_eq!(
        syn(&|t| t[27..32].copy_from_slice(&[1, 1, 1, 1, 1]), 7),
        Err(Error::NoSetupOption)
    );
    let too_long = vec![0u8; 70_000];
    let mut t = TCP_DATA.to_vec();
    t.extend_from_slice(&too_long);
    assert_eq!(tcp_to_tiu(&t, v4(), UDP_PORTS, 1), Err(Error::TooLong));
    assert_eq!(Addrs::new(v4().src, v6().dst), Err(Error::MixedFamilies));
}

#[test]
fn repr_emit_writes_what_parse_read() {
    for bytes in [&TIU_DATA_22[..], &TIU_SYN[..]] {
        let r = Repr::parse(&Packet::new_checked(bytes).unwrap()).unwrap();
        assert_eq!(r.buffer_len(), bytes.len());
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }
    let r = Repr::parse(&Packet::new_checked(&TIU_DATA_22[..]).unwrap()).unwrap();
    assert_eq!(r.kind, Kind::Data { conn_id: 22 });
    assert_eq!(
        (r.seq_number, r.ack_number, r.window),
        (0x01020304, 0x05060708, 0x01f5)
    );
    assert_eq!(r.payload, b"hi");
}

#[test]
fn bytes_after_the_udp_length_are_not_the_datagrams() {
    // An IP packet padded past its UDP datagram (Ethernet's minimum frame, say): the checksum and
    // the segment cover the UDP length only.
    for addrs in [v4(), v6()] {
        let mut d = udp(addrs, &TIU_DATA_22);
        d.extend_from_slice(&[0xee; 9]);
        let back = tiu_to_tcp(&d, addrs, table).unwrap();
        assert_eq!(back.tcp, expect_tcp(addrs, &TCP_DATA));
    }
}

#[test]
fn a_checksum_that_computes_to_zero_goes_out_as_ffff() {
    for addrs in [v4(), v6()] {
        // Two payload bytes chosen so that the UDP checksum computes to 0 (RFC 768: sent as 0xffff).
        let found = (0..=u16::MAX).find_map(|x| {
            let mut t = TCP_DATA;
            t[32..34].copy_from_slice(&x.to_be_bytes());
            let d = tcp_to_tiu(&t, addrs, UDP_PORTS, 22).unwrap();
            (d[6..8] == [0xff, 0xff]).then_some((t, d))
        });
        let (t, d) = found.expect("some payload sums to a zero checksum");
        assert!(checksum_ok(addrs, 17, &d));
        assert_eq!(
            tiu_to_tcp(&d, addrs, table).unwrap().tcp,
            expect_tcp(addrs, &t)
        );
    }
}

#[test]
fn a_refusal_is_a_syn_acks_answer_only() {
    let mut syn = TCP_SYN;
    syn[31] = 255;
    assert_eq!(
        tcp_to_tiu(&syn, v4(), UDP_PORTS, 255),
        Err(Error::BadSetupOption)
    );
    let mut h = TIU_SYN;
    h[27] = 255;
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table),
        Err(Error::BadSetupOption)
    );
    h[1] |= 0x10; // SYN-ACK
    assert_eq!(
        tiu_to_tcp(&udp(v4(), &h), v4(), table).unwrap().id,
        Id::Syn(Setup::Refused)
    );
}

#[test]
fn views_and_reprs_refuse_what_they_cannot_hold() {
    let p = Packet::new_checked(&TIU_DATA_22[..]).unwrap();
    assert_eq!(
        p.encap_ports(),
        None,
        "a data header has no encapsulated ports"
    );
    assert_eq!(
        Packet::new_checked(&TIU_SYN[..]).unwrap().encap_ports(),
        Some((40000, 5201))
    );
    assert_eq!(
        Packet::new_checked(&[0x00u8][..]).err(),
        Some(Error::NotTiu)
    );
    assert_eq!(
        Packet::new_checked(&[0x80u8][..]).err(),
        Some(Error::Truncated)
    );
    assert_eq!(
        Packet::new_checked(&[][..] as &[u8]).err(),
        Some(Error::Truncated)
    );
    // A Repr `check` accepts is one `parse` reads back.
    let syn = Repr::parse(&Packet::new_checked(&TIU_SYN[..]).unwrap()).unwrap();
    let no_setup = Repr {
        options: &[2, 4, 5, 0xb4],
        ..syn
    };
    assert_eq!(no_setup.check(), Err(Error::NoSetupOption));
    let data = Repr::parse(&Packet::new_checked(&TIU_DATA_22[..]).unwrap()).unwrap();
    let with_setup = Repr {
        options: &[1, 1, 1, 253, 5, 0x52, 0x4a, 7],
        ..data
    };
    assert_eq!(with_setup.check(), Err(Error::BadSetupOption));
    let bad_list = Repr {
        options: &[8, 30, 0, 0],
        ..data
    };
    assert_eq!(bad_list.check(), Err(Error::BadOptions));
}
