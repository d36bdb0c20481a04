//! The TiU headers, as the TCP-CCC draft (seed 003 ch. 11, sec. 3.1.1.2) draws them: the data
//! header (its Fig. 1; dissertation Fig. 9.14), the SYN/SYN-ACK header (Fig. 2; Fig. 9.15) and the
//! TiU-Setup TCP option (Fig. 3; Fig. 9.16). Everything here is the UDP payload: the 8-byte UDP
//! header in front of it is smoltcp's (`crate::translate` writes it).
//!
//! ```text
//! data (Fig. 1)                              SYN and SYN-ACK (Fig. 2)
//!  0      4      8                 16    31   0      4      8                 16    31
//! +------+------+-+-+-+-+-+-+-+-+--------+   +------+------+-+-+-+-+-+-+-+-+--------+
//! |  DO  | CID  |C|E|c|A|P|R|S|F| Window |   |  DO  | Rsvd |C|E|0|A|P|R|S|F| Window |
//! +------+------+-+-+-+-+-+-+-+-+--------+   +------+------+-+-+-+-+-+-+-+-+--------+
//! |           Sequence Number            |   |           Sequence Number            |
//! |        Acknowledgment Number         |   |        Acknowledgment Number         |
//! |         Options (DO*4 - 20)          |   | Encap. Src Port  | Encap. Dst Port   |
//! +--------------------------------------+   |         Options (DO*4 - 20)          |
//! ```
//!
//! Where the draft is silent, and what we do:
//! - **The Connection ID's bit order.** Fig. 1 spreads the 5-bit ID over the first octet's low
//!   nibble and the bit that was URG ("c" above). Read left to right, most significant first, as
//!   every other field of the figure: `id = nibble << 1 | c`.
//! - **Data Offset** keeps its TCP meaning (the TCP header's length in 32-bit words, at least 5:
//!   "for TCP, the Data Offset must be at least 5"), so the options are `DO * 4 - 20` bytes in
//!   both headers, and a TiU data segment is exactly as long as the TCP segment (the 8 bytes of
//!   ports, checksum and urgent pointer it drops are the UDP header's 8).
//! - **Reserved bits** of the SYN header (the low nibble and the bit where URG was) must be 0;
//!   a SYN header with any of them set is refused (`Error::Reserved`), never guessed at. (TCP
//!   ignores reserved bits on receipt; refusing them is what keeps `parse` exactly the inverse of
//!   `emit`, so no two datagrams decapsulate to one segment.)
//! - **The ExID** of the TiU-Setup option is "TBD" in the draft (sec. 6): no value is assigned.
//!   We use [`SETUP_EXID`] = 0x524A, the value of the TiU dissector in github.com/kristahi/dpkt
//!   (`dpkt/tcpinudp.py`, `TIU_SETUPOPT = fd 05 52 4a`), apparently written alongside the
//!   dissertation's FreeBSD implementation. An experimental option (Kind 253) with another ExID
//!   is someone else's and is passed over. That dissector also marks a SYN header with Data
//!   Offset 4 and takes its length from the datagram; we follow the draft (Data Offset >= 5 in
//!   both headers, as the STUN distinction needs), so the two do not interoperate on SYNs.
//! - **Setup option length** is 5 (Fig. 3); one with our ExID and another length, a Connection ID
//!   of 32-254, or two Setup options in one segment are refused. A SYN header without one is
//!   refused: "every TiU SYN or TiU SYN-ACK packet also carries at least the TiU-Setup option".
//!   255 (refused) is a SYN-ACK's answer only: on a SYN without ACK it is refused too.
//! - **The urgent pointer** is not carried: TiU has no URG flag, and without URG the pointer
//!   means nothing (RFC 9293 sec. 3.1); decapsulated segments carry 0.
//! - **What else the UDP port carries** (sec. 3.1.1.2): a first nibble of 5-15 is a TiU TCP
//!   header; 0-3 (the top two bits zero) is STUN's; 4 is neither ([`classify`]).

use crate::Error;
use core::ops::Range;

/// The UDP header in front of every TiU header.
pub const UDP_HEADER_LEN: usize = 8;
/// A TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;
/// The TiU data header without options (Fig. 1 after the UDP header).
pub const DATA_HEADER_LEN: usize = 12;
/// The TiU SYN/SYN-ACK header without options (Fig. 2 after the UDP header).
pub const SYN_HEADER_LEN: usize = 16;
/// The largest Connection ID: five bits, 32 connections per UDP port pair.
pub const MAX_CONN_ID: u8 = 31;
/// The Setup option's value that refuses TiU for this connection ("a special value of 255 is used
/// to signify an error, upon which TiU will no longer be used").
pub const CONN_ID_REFUSED: u8 = 255;
/// RFC 6994 experimental TCP option kind.
pub const SETUP_KIND: u8 = 253;
/// The Setup option's length in bytes (kind, length, ExID, Connection ID).
pub const SETUP_LEN: usize = 5;
/// Our 16-bit ExID for the Setup option (the draft leaves it TBD).
pub const SETUP_EXID: u16 = 0x524a;

/// The TCP flags TiU carries. The URG flag has no place (its bit is the Connection ID's lowest
/// one), so a segment with URG set cannot be carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    /// TCP's URG bit: the Connection ID's lowest bit in a data header, 0 in a SYN header.
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
    /// The flags TiU carries.
    pub const CARRIED: u8 = !Self::URG;

    /// Flags from TCP's flags octet; `Err(Error::Urgent)` if URG is set.
    pub fn new(bits: u8) -> Result<Self, Error> {
        if bits & Self::URG != 0 {
            return Err(Error::Urgent);
        }
        Ok(Flags(bits))
    }
    pub fn bits(self) -> u8 {
        self.0
    }
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
}

/// What a datagram on the TiU port carries, from its first octet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// A TiU header (Data Offset 5-15).
    Tiu,
    /// The top two bits zero: STUN's first octet (RFC 5389), passed on untouched.
    Stun,
    /// Neither (first nibble 4), or an empty payload.
    Other,
}

/// Sorts a UDP payload on the TiU port (sec. 3.1.1.2).
pub fn classify(udp_payload: &[u8]) -> Content {
    match udp_payload.first().map(|b| b >> 4) {
        Some(5..=15) => Content::Tiu,
        Some(0..=3) => Content::Stun,
        _ => Content::Other,
    }
}

mod field {
    use core::ops::Range;
    pub const DO_CID: usize = 0;
    pub const FLAGS: usize = 1;
    pub const WINDOW: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const ENC_SRC: Range<usize> = 12..14;
    pub const ENC_DST: Range<usize> = 14..16;
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A read/write view of a TiU header and its payload (the UDP payload), smoltcp style:
/// `new_unchecked` wraps any buffer, `new_checked` (or `check_len`) makes every accessor safe.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it: accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer that [`Packet::check_len`] accepts.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The buffer holds a whole TiU header: a first nibble of 5-15 (else `NotTiu`), and the
    /// header its Data Offset and SYN flag call for (else `Truncated`).
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if !b.is_empty() && classify(b) != Content::Tiu {
            return Err(Error::NotTiu);
        }
        if b.len() < 2 || b.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The Data Offset: the TCP header's length in 32-bit words (5-15).
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::DO_CID] >> 4
    }
    /// The SYN flag: this is a SYN/SYN-ACK header (Fig. 2), else a data header (Fig. 1).
    pub fn is_syn(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & Flags::SYN != 0
    }
    /// The Connection ID of a data header (`nibble << 1 | c`); the reserved bits of a SYN header.
    pub fn conn_id(&self) -> u8 {
        let b = self.buffer.as_ref();
        ((b[field::DO_CID] & 0x0f) << 1) | ((b[field::FLAGS] & Flags::URG) >> 5)
    }
    /// The flags, without the Connection ID's bit.
    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::FLAGS] & Flags::CARRIED)
    }
    pub fn window(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::WINDOW])
    }
    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ])
    }
    pub fn ack_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ACK])
    }
    /// The encapsulated TCP ports of a SYN header (source, destination); `None` on a data header.
    pub fn encap_ports(&self) -> Option<(u16, u16)> {
        let b = self.buffer.as_ref();
        self.is_syn()
            .then(|| (be16(&b[field::ENC_SRC]), be16(&b[field::ENC_DST])))
    }
    /// The length of the TCP options: `DO * 4 - 20`.
    pub fn options_len(&self) -> usize {
        (self.data_offset() as usize * 4).saturating_sub(TCP_HEADER_LEN)
    }
    /// The header's length: 12 (data) or 16 (SYN) bytes and the options.
    pub fn header_len(&self) -> usize {
        let fixed = if self.is_syn() {
            SYN_HEADER_LEN
        } else {
            DATA_HEADER_LEN
        };
        fixed + self.options_len()
    }
    fn options_range(&self) -> Range<usize> {
        let start = if self.is_syn() {
            SYN_HEADER_LEN
        } else {
            DATA_HEADER_LEN
        };
        start..start + self.options_len()
    }
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[self.options_range()]
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the first two octets: Data Offset, Connection ID (or 0 in a SYN header), flags.
    fn set_do_cid_flags(&mut self, data_offset: u8, conn_id: u8, flags: Flags) {
        let b = self.buffer.as_mut();
        b[field::DO_CID] = (data_offset << 4) | ((conn_id >> 1) & 0x0f);
        b[field::FLAGS] = (flags.bits() & Flags::CARRIED) | ((conn_id & 1) << 5);
    }
    pub fn set_window(&mut self, v: u16) {
        self.buffer.as_mut()[field::WINDOW].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_seq_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_ack_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::ACK].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes the encapsulated ports of a SYN header (set the SYN flag first: a data header has
    /// none, and this panics on one).
    pub fn set_encap_ports(&mut self, src: u16, dst: u16) {
        assert!(self.is_syn(), "encapsulated ports belong to a SYN header");
        let b = self.buffer.as_mut();
        b[field::ENC_SRC].copy_from_slice(&src.to_be_bytes());
        b[field::ENC_DST].copy_from_slice(&dst.to_be_bytes());
    }
    pub fn options_mut(&mut self) -> &mut [u8] {
        let r = self.options_range();
        &mut self.buffer.as_mut()[r]
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// Which of the two headers, with what identifies the connection in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Fig. 1: the connection by its ID (0-31).
    Data { conn_id: u8 },
    /// Fig. 2: the connection's TCP ports; its ID is in the Setup option among the options.
    Syn { src_port: u16, dst_port: u16 },
}

/// A TiU header and payload, parsed and checked (smoltcp's `Repr`): `parse` accepts only what
/// `emit` writes back byte for byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr<'a> {
    pub kind: Kind,
    /// Never URG; SYN exactly when `kind` is `Syn`.
    pub flags: Flags,
    pub window: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    /// The TCP options as carried (a multiple of 4 bytes, at most 40; a SYN's hold its Setup
    /// option).
    pub options: &'a [u8],
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Parses and checks a TiU header: lengths, reserved bits, the options' structure and, on a
    /// SYN header, exactly one valid Setup option.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>, Error> {
        packet.check_len()?;
        let b: &'a [u8] = packet.buffer.as_ref();
        let p = Packet::new_unchecked(b);
        let (options, payload) = (&b[p.options_range()], &b[p.header_len()..]);
        let kind = match p.encap_ports() {
            Some((src_port, dst_port)) => {
                if p.conn_id() != 0 {
                    return Err(Error::Reserved);
                }
                Kind::Syn { src_port, dst_port }
            }
            None => Kind::Data {
                conn_id: p.conn_id(),
            },
        };
        setup_rule(kind, p.flags(), options)?;
        Ok(Repr {
            kind,
            flags: p.flags(),
            window: p.window(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            options,
            payload,
        })
    }

    /// The Setup option of a SYN header.
    pub fn setup(&self) -> Option<Setup> {
        setup_option(self.options).ok().flatten()
    }

    /// The bytes [`Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    pub fn header_len(&self) -> usize {
        let fixed = match self.kind {
            Kind::Data { .. } => DATA_HEADER_LEN,
            Kind::Syn { .. } => SYN_HEADER_LEN,
        };
        fixed + self.options.len()
    }

    /// Checks that `emit` writes a header `parse` reads back as this Repr: options a multiple of
    /// 4 and at most 40 bytes (else `BadOptions`), a Connection ID of at most 31 (`BadConnId`), SYN
    /// set exactly on a SYN kind (`BadFlags`), URG never (`Urgent`), and the Setup option rules
    /// ([`setup_rule`]).
    pub fn check(&self) -> Result<(), Error> {
        if self.options.len() % 4 != 0 || self.options.len() > 40 {
            return Err(Error::BadOptions);
        }
        if self.flags.bits() & Flags::URG != 0 {
            return Err(Error::Urgent);
        }
        match self.kind {
            Kind::Data { conn_id } if conn_id > MAX_CONN_ID => {
                return Err(Error::BadConnId(conn_id))
            }
            Kind::Data { .. } if self.flags.syn() => return Err(Error::BadFlags),
            Kind::Syn { .. } if !self.flags.syn() => return Err(Error::BadFlags),
            _ => {}
        }
        setup_rule(self.kind, self.flags, self.options)
    }

    /// Writes the header and payload into `packet`'s buffer, which must be at least
    /// [`Repr::buffer_len`] long. Panics if [`Repr::check`] refuses the Repr or the buffer is
    /// short (a caller's bug, as in smoltcp).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        self.check()
            .expect("Repr::emit of a Repr that Repr::check refuses");
        assert!(
            packet.buffer.as_ref().len() >= self.buffer_len(),
            "Repr::emit: buffer too short"
        );
        let data_offset = ((TCP_HEADER_LEN + self.options.len()) / 4) as u8;
        let conn_id = match self.kind {
            Kind::Data { conn_id } => conn_id,
            Kind::Syn { .. } => 0,
        };
        // The flags first: the SYN bit decides where the options and payload are.
        packet.set_do_cid_flags(data_offset, conn_id, self.flags);
        packet.set_window(self.window);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        if let Kind::Syn { src_port, dst_port } = self.kind {
            packet.set_encap_ports(src_port, dst_port);
        }
        packet.options_mut().copy_from_slice(self.options);
        packet.payload_mut()[..self.payload.len()].copy_from_slice(self.payload);
    }
}

/// The Connection ID a Setup option carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setup {
    /// On a SYN: the ID the sender will use; on a SYN-ACK: accepted.
    Id(u8),
    /// 255: TiU refused; the next segment is plain TCP.
    Refused,
}

impl Setup {
    /// The option's Connection ID octet.
    pub fn value(self) -> u8 {
        match self {
            Setup::Id(id) => id,
            Setup::Refused => CONN_ID_REFUSED,
        }
    }
    /// From the Connection ID octet: 0-31 or 255 (else `BadSetupOption`).
    pub fn from_value(v: u8) -> Result<Self, Error> {
        match v {
            0..=MAX_CONN_ID => Ok(Setup::Id(v)),
            CONN_ID_REFUSED => Ok(Setup::Refused),
            _ => Err(Error::BadSetupOption),
        }
    }
    /// The option's five bytes (Fig. 3).
    pub fn to_bytes(self) -> [u8; SETUP_LEN] {
        let e = SETUP_EXID.to_be_bytes();
        [SETUP_KIND, SETUP_LEN as u8, e[0], e[1], self.value()]
    }
    /// Parses one option starting at its kind octet: ours (`Some`), or another experimental
    /// option (`None`, Kind 253 with another ExID). Errors: not Kind 253, or our ExID with a bad
    /// length or value (`BadSetupOption`), or `bytes` shorter than its length (`Truncated`).
    pub fn parse(bytes: &[u8]) -> Result<Option<Self>, Error> {
        if bytes.first() != Some(&SETUP_KIND) {
            return Err(Error::BadSetupOption);
        }
        let len = *bytes.get(1).ok_or(Error::Truncated)? as usize;
        if len < 4 {
            // An RFC 6994 option holds at least its 16-bit ExID.
            return Err(Error::BadOptions);
        }
        if bytes.len() < len {
            return Err(Error::Truncated);
        }
        if be16(&bytes[2..4]) != SETUP_EXID {
            return Ok(None);
        }
        if len != SETUP_LEN {
            return Err(Error::BadSetupOption);
        }
        Setup::from_value(bytes[4]).map(Some)
    }
}

/// Where the Setup option may stand, for `Repr::parse` and `Repr::check` alike: exactly one on a
/// SYN header (`NoSetupOption`), 255 only with ACK (a SYN-ACK's refusal; `BadSetupOption` on a
/// SYN), none on a data header (`BadSetupOption`); and the option list well formed (`BadOptions`).
pub fn setup_rule(kind: Kind, flags: Flags, options: &[u8]) -> Result<(), Error> {
    match (kind, setup_option(options)?) {
        (Kind::Syn { .. }, None) => Err(Error::NoSetupOption),
        (Kind::Syn { .. }, Some(Setup::Refused)) if flags.bits() & Flags::ACK == 0 => {
            Err(Error::BadSetupOption)
        }
        (Kind::Data { .. }, Some(_)) => Err(Error::BadSetupOption),
        _ => Ok(()),
    }
}

/// Walks TCP options (RFC 9293 sec. 3.1: EOL ends them, NOP is one octet, every other option
/// carries its length, at least 2) and returns the Setup option if there is one. Errors: a
/// malformed list (`BadOptions`), a bad Setup option or two of them (`BadSetupOption`).
pub fn setup_option(options: &[u8]) -> Result<Option<Setup>, Error> {
    let mut found = None;
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let len = *options.get(i + 1).ok_or(Error::BadOptions)? as usize;
                if len < 2 || i + len > options.len() {
                    return Err(Error::BadOptions);
                }
                if kind == SETUP_KIND {
                    let s = Setup::parse(&options[i..i + len]).map_err(|e| match e {
                        Error::Truncated => Error::BadOptions,
                        e => e,
                    })?;
                    if s.is_some() && found.replace(s).is_some() {
                        return Err(Error::BadSetupOption);
                    }
                }
                i += len;
            }
        }
    }
    Ok(found.flatten())
}

/// TCP options with the Setup option appended (and NOP-padded to a multiple of 4 before it):
/// what a SYN carries when the tc program rather than the stack adds the option. Errors:
/// `BadOptions` if the result would exceed 40 bytes, or the options already hold a Setup option.
pub fn with_setup_option(options: &[u8], setup: Setup) -> Result<Vec<u8>, Error> {
    if setup_option(options)?.is_some() {
        return Err(Error::BadOptions);
    }
    // Keep everything up to the end of the last real option: the EOL and NOPs after it are
    // padding (walked, not scanned backwards: a 0x01 may be the last byte of an option's data).
    let end = last_option_end(options);
    let mut out = options[..end].to_vec();
    while (out.len() + SETUP_LEN) % 4 != 0 {
        out.push(1);
    }
    out.extend_from_slice(&setup.to_bytes());
    if out.len() > 40 {
        return Err(Error::BadOptions);
    }
    Ok(out)
}

/// Where the last option other than NOP ends, before any EOL; `options` is well formed (checked
/// by `setup_option` before).
fn last_option_end(options: &[u8]) -> usize {
    let (mut i, mut end) = (0, 0);
    while i < options.len() {
        match options[i] {
            0 => break,
            1 => i += 1,
            _ => {
                i += options[i + 1] as usize;
                end = i;
            }
        }
    }
    end
}
