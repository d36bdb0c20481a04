//! Any bytes through both translations, on IPv4 and IPv6: no panic, and a round trip gives back
//! what went in wherever one is defined. The first octet chooses the case: bit 0 IPv6, bit 1 the
//! input is a TCP segment (else a UDP datagram), bit 2 fix the datagram's UDP length and checksum
//! first (random bytes almost never carry a right checksum, and the TiU parser is behind it); the
//! second octet is the Connection ID to encapsulate with.
#![no_main]
use libfuzzer_sys::fuzz_target;
use smoltcp::wire::{
    checksum, IpAddress, IpProtocol, Ipv4Address, Ipv6Address, TcpPacket, UdpPacket,
};
use tiu::translate::{tcp_to_tiu, tiu_to_tcp, Addrs, Id};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (mode, id, rest) = (data[0], data[1], &data[2..]);
    let addrs = if mode & 1 != 0 {
        Addrs::new(
            IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddress::Ipv6(Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        Addrs::new(
            IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 1)),
            IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 2)),
        )
    }
    .unwrap();
    let ports = |i: u8| (i % 4 != 3).then_some((40000 + u16::from(i), 5201));
    if mode & 2 != 0 {
        if let Ok(d) = tcp_to_tiu(rest, addrs, (8888, 8889), id) {
            let back = tiu_to_tcp(&d, addrs, |_| {
                Some((
                    u16::from_be_bytes([rest[0], rest[1]]),
                    u16::from_be_bytes([rest[2], rest[3]]),
                ))
            })
            .expect("a datagram tcp_to_tiu made does not decapsulate");
            let mut want = rest.to_vec();
            want[16..20].copy_from_slice(&[0, 0, 0, 0]);
            TcpPacket::new_unchecked(&mut want[..]).fill_checksum(&addrs.src, &addrs.dst);
            assert_eq!(back.tcp, want, "tcp -> tiu -> tcp changed the segment");
        }
    } else {
        let mut d = rest.to_vec();
        if mode & 4 != 0 && d.len() >= 8 && d.len() <= 65535 {
            let len = d.len() as u16;
            let mut u = UdpPacket::new_unchecked(&mut d[..]);
            u.set_len(len);
            u.fill_checksum(&addrs.src, &addrs.dst);
        }
        if let Ok(back) = tiu_to_tcp(&d, addrs, ports) {
            // The segment handed to the stack checksums right (computed here: smoltcp's own
            // verify passes everything when built for fuzzing).
            let sum = checksum::combine(&[
                checksum::pseudo_header(
                    &addrs.src,
                    &addrs.dst,
                    IpProtocol::Tcp,
                    back.tcp.len() as u32,
                ),
                checksum::data(&back.tcp),
            ]);
            assert_eq!(sum, !0, "decapsulated segment with a wrong TCP checksum");
            let cid = match back.id {
                Id::Data(i) => i,
                Id::Syn(s) => s.value(),
            };
            let udp_ports = back.udp_ports;
            let again = tcp_to_tiu(&back.tcp, addrs, udp_ports, cid)
                .expect("a decapsulated segment does not encapsulate");
            let ulen = u16::from_be_bytes([d[4], d[5]]) as usize;
            assert_eq!(
                again,
                d[..ulen].to_vec(),
                "tiu -> tcp -> tiu changed the datagram"
            );
        }
    }
});
