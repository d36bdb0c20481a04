//! TCP segment <-> TiU datagram (the draft's sec. 3.1.1.3, "Encapsulation and decapsulation").
//!
//! **Checksums.** TiU drops the TCP checksum: the UDP checksum, over the UDP pseudo-header and
//! the whole datagram, is the TiU segment's only integrity check. So, on IPv4 and IPv6 alike:
//! - [`tcp_to_tiu`] always writes a UDP checksum (a computed 0 goes out as 0xffff, RFC 768), and
//!   does not check the TCP checksum it drops (on egress that field may hold only the
//!   pseudo-header sum the NIC would finish, CHECKSUM_PARTIAL);
//! - [`tiu_to_tcp`] refuses a datagram with no UDP checksum (0: allowed by IPv4, but it would leave
//!   the TCP segment unchecked; never allowed for IPv6 outside RFC 6935 tunnels) or a wrong one,
//!   and writes a correct TCP checksum for the stack to check.
//!
//! Lengths: a data segment's datagram is exactly as long as the TCP segment; a SYN's is 4 bytes
//! longer (the encapsulated ports). Datagrams over 65,535 bytes (IPv6 jumbograms) are refused.

use crate::wire::{
    self, classify, Content, Flags, Kind, Packet, Repr, Setup, TCP_HEADER_LEN, UDP_HEADER_LEN,
};
use crate::Error;
use smoltcp::wire::{IpAddress, TcpPacket, UdpPacket};

/// The IP addresses a segment travels between (both IPv4 or both IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addrs {
    pub src: IpAddress,
    pub dst: IpAddress,
}

impl Addrs {
    /// Both of one family, else `MixedFamilies`.
    pub fn new(src: IpAddress, dst: IpAddress) -> Result<Self, Error> {
        match (src, dst) {
            (IpAddress::Ipv4(_), IpAddress::Ipv4(_)) | (IpAddress::Ipv6(_), IpAddress::Ipv6(_)) => {
                Ok(Addrs { src, dst })
            }
            _ => Err(Error::MixedFamilies),
        }
    }
}

/// Reserved bits of TCP's 13th octet (the three below the Data Offset, and AE/NS): TiU's data
/// header has no room for them (the Connection ID takes that nibble).
const TCP_RESERVED_MASK: u8 = 0x0f;

/// Encapsulates one TCP segment (header and payload) into a UDP datagram (header and TiU
/// header and payload) from `udp_ports.0` to `udp_ports.1`.
///
/// `conn_id` is the ID the connection's data segments carry (0-31). A SYN or SYN-ACK goes out
/// in the SYN header with its TCP ports; its options must hold the Setup option (the stack, or
/// [`wire::with_setup_option`], put it there), and `conn_id` must be the option's value (255 on a
/// refusing SYN-ACK), else `SetupMismatch`.
///
/// Refused: a malformed TCP header (`BadTcp`), URG set (`Urgent`: its bit is the ID's), reserved
/// or AE bits set (`Reserved`), an ID over 31 on a data segment (`BadConnId`), a datagram over
/// 65,535 bytes (`TooLong`).
pub fn tcp_to_tiu(
    tcp: &[u8],
    addrs: Addrs,
    udp_ports: (u16, u16),
    conn_id: u8,
) -> Result<Vec<u8>, Error> {
    let seg = TcpPacket::new_checked(tcp).map_err(|_| Error::BadTcp)?;
    let octet12 = tcp[12];
    if octet12 & TCP_RESERVED_MASK != 0 {
        return Err(Error::Reserved);
    }
    let flags = Flags::new(tcp[13])?;
    let options = seg.options();
    let kind = if flags.syn() {
        match wire::setup_option(options)? {
            Some(s) if s.value() == conn_id => {}
            Some(_) => return Err(Error::SetupMismatch),
            None => return Err(Error::NoSetupOption),
        }
        Kind::Syn {
            src_port: seg.src_port(),
            dst_port: seg.dst_port(),
        }
    } else {
        Kind::Data { conn_id }
    };
    let repr = Repr {
        kind,
        flags,
        window: seg.window_len(),
        seq_number: tcp_u32(tcp, 4),
        ack_number: tcp_u32(tcp, 8),
        options,
        payload: seg.payload(),
    };
    // The Connection ID's range and the Setup option's rules (none on data, 255 only on a
    // SYN-ACK), as `Repr::parse` applies them on the way back.
    repr.check()?;
    let total = UDP_HEADER_LEN + repr.buffer_len();
    let udp_len = u16::try_from(total).map_err(|_| Error::TooLong)?;
    let mut out = vec![0u8; total];
    repr.emit(&mut Packet::new_unchecked(&mut out[UDP_HEADER_LEN..]));
    let mut udp = UdpPacket::new_unchecked(&mut out[..]);
    udp.set_src_port(udp_ports.0);
    udp.set_dst_port(udp_ports.1);
    udp.set_len(udp_len);
    udp.fill_checksum(&addrs.src, &addrs.dst);
    Ok(out)
}

fn tcp_u32(tcp: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([tcp[at], tcp[at + 1], tcp[at + 2], tcp[at + 3]])
}

/// A decapsulated segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decapsulated {
    /// The TCP segment, with a correct checksum and urgent pointer 0.
    pub tcp: Vec<u8>,
    /// The datagram's UDP (source, destination) ports: with the addresses, which TiU port pair
    /// (and so which Connection ID table) it came on.
    pub udp_ports: (u16, u16),
    /// The Connection ID of a data segment, or the Setup option of a SYN/SYN-ACK.
    pub id: Id,
}

/// How the decapsulated segment named its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Id {
    Data(u8),
    Syn(Setup),
}

/// Decapsulates one UDP datagram (header and payload, trailing bytes after the UDP length
/// ignored) into the TCP segment it carries.
///
/// `ports(id)` gives the TCP (source, destination) ports, as this segment travels, of the
/// connection whose data segments carry Connection ID `id`; a SYN header names its ports itself.
///
/// Refused: a malformed UDP header (`BadUdp`), no UDP checksum (`NoChecksum`) or a wrong one
/// (`Checksum`), a payload that is not a TiU header (`NotTiu`: STUN or other, which the caller
/// passes on), a malformed TiU header (the errors of [`Repr::parse`]), an ID `ports` does not
/// know (`UnknownConnId`).
pub fn tiu_to_tcp(
    udp: &[u8],
    addrs: Addrs,
    ports: impl Fn(u8) -> Option<(u16, u16)>,
) -> Result<Decapsulated, Error> {
    let d = UdpPacket::new_checked(udp).map_err(|_| Error::BadUdp)?;
    if d.checksum() == 0 {
        return Err(Error::NoChecksum);
    }
    if !verify_udp(udp, d.len() as usize, &addrs) {
        return Err(Error::Checksum);
    }
    let payload = d.payload();
    if classify(payload) != Content::Tiu {
        return Err(Error::NotTiu);
    }
    let repr = Repr::parse(&Packet::new_checked(payload)?)?;
    let ((src_port, dst_port), id) = match repr.kind {
        Kind::Data { conn_id } => (
            ports(conn_id).ok_or(Error::UnknownConnId(conn_id))?,
            Id::Data(conn_id),
        ),
        Kind::Syn { src_port, dst_port } => (
            (src_port, dst_port),
            Id::Syn(repr.setup().ok_or(Error::NoSetupOption)?),
        ),
    };
    let header_len = TCP_HEADER_LEN + repr.options.len();
    let mut tcp = vec![0u8; header_len + repr.payload.len()];
    {
        let mut seg = TcpPacket::new_unchecked(&mut tcp[..]);
        seg.set_src_port(src_port);
        seg.set_dst_port(dst_port);
        seg.set_seq_number(smoltcp::wire::TcpSeqNumber(repr.seq_number as i32));
        seg.set_ack_number(smoltcp::wire::TcpSeqNumber(repr.ack_number as i32));
        seg.set_window_len(repr.window);
        seg.set_urgent_at(0);
    }
    // Data Offset and flags written as octets: smoltcp's flag setters know no AE bit and would
    // leave the byte as we want anyway, but this says exactly what goes on the wire.
    tcp[12] = ((header_len / 4) as u8) << 4;
    tcp[13] = repr.flags.bits();
    tcp[TCP_HEADER_LEN..header_len].copy_from_slice(repr.options);
    tcp[header_len..].copy_from_slice(repr.payload);
    TcpPacket::new_unchecked(&mut tcp[..]).fill_checksum(&addrs.src, &addrs.dst);
    Ok(Decapsulated {
        tcp,
        udp_ports: (d.src_port(), d.dst_port()),
        id,
    })
}

/// The UDP checksum over the pseudo-header and the datagram. (smoltcp's `verify_checksum` takes 0
/// as "no checksum", which TiU refuses before this, and passes everything when built for
/// fuzzing; this one always checks.)
fn verify_udp(udp: &[u8], len: usize, addrs: &Addrs) -> bool {
    use smoltcp::wire::checksum;
    use smoltcp::wire::IpProtocol;
    checksum::combine(&[
        checksum::pseudo_header(&addrs.src, &addrs.dst, IpProtocol::Udp, len as u32),
        checksum::data(&udp[..len]),
    ]) == !0
}
