//! TCP-in-UDP (TiU): the wire format and the TCP <-> TiU translation of seed 003 (sec. 9.4.1 and
//! the TCP-CCC draft in ch. 11, sec. 3.1.1, Figs. 1-3). Several TCP connections between two
//! hosts ride one UDP port pair, so ECMP and LAG, which hash on the five-tuple, put them on one
//! path and ctrlTCP may couple them.
//!
//! - [`wire`]: zero-copy [`wire::Packet`] views and checked [`wire::Repr`]s (`parse`, `emit`,
//!   `buffer_len`) of the TiU data header and the SYN/SYN-ACK header, the TiU-Setup option
//!   ([`wire::Setup`]), and [`wire::classify`] (TiU, STUN or other on the TiU port). What the
//!   draft leaves open, and what we chose, is listed at the top of `wire.rs`.
//! - [`translate`]: [`translate::tcp_to_tiu`] and [`translate::tiu_to_tcp`], checksums included
//!   (the UDP checksum is mandatory on IPv4 and IPv6 alike: it is the segment's only one).
//!
//! This crate is the reference the kernel's tc programs are checked against (issue 17): pure
//! functions, no I/O, no clock.

pub mod translate;
pub mod wire;

use std::fmt;

/// Why a header or a translation was refused. Every refusal leaves the input untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends inside the header its first octets call for.
    Truncated,
    /// The UDP payload is not a TiU header (first nibble 0-4: STUN or other content).
    NotTiu,
    /// Reserved bits set: a TiU SYN header's, or a TCP segment's reserved/AE bits (TiU's data
    /// header has no room for them).
    Reserved,
    /// TCP's URG flag: its bit carries the Connection ID in TiU.
    Urgent,
    /// A Connection ID above 31 where a data segment needs one.
    BadConnId(u8),
    /// A data segment's Connection ID the table does not hold.
    UnknownConnId(u8),
    /// A TCP option list that does not parse, or options not a multiple of 4 / over 40 bytes.
    BadOptions,
    /// A Setup option (our ExID) of a bad length or value (32-254), two of them, or one on a data
    /// segment.
    BadSetupOption,
    /// A SYN or SYN-ACK without the Setup option.
    NoSetupOption,
    /// A SYN whose Setup option names another Connection ID than the caller's.
    SetupMismatch,
    /// SYN set on a data header's Repr, or missing on a SYN header's.
    BadFlags,
    /// A malformed TCP header (smoltcp refused it).
    BadTcp,
    /// A malformed UDP header (smoltcp refused it).
    BadUdp,
    /// A datagram without a UDP checksum (0).
    NoChecksum,
    /// A wrong UDP checksum.
    Checksum,
    /// A datagram over 65,535 bytes.
    TooLong,
    /// Source and destination addresses of different IP versions.
    MixedFamilies,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated header".to_string(),
            Error::NotTiu => {
                "not a TiU header (first nibble 0-4: STUN or other content)".to_string()
            }
            Error::Reserved => "reserved bits set".to_string(),
            Error::Urgent => "URG set: TiU has no urgent flag".to_string(),
            Error::BadConnId(id) => format!("connection ID {id} is not 0-31"),
            Error::UnknownConnId(id) => format!("unknown connection ID {id}"),
            Error::BadOptions => "malformed TCP options".to_string(),
            Error::BadSetupOption => {
                "malformed, duplicate or misplaced TiU-Setup option".to_string()
            }
            Error::NoSetupOption => "SYN without a TiU-Setup option".to_string(),
            Error::SetupMismatch => "TiU-Setup option names another connection ID".to_string(),
            Error::BadFlags => "SYN flag does not match the header kind".to_string(),
            Error::BadTcp => "malformed TCP header".to_string(),
            Error::BadUdp => "malformed UDP header".to_string(),
            Error::NoChecksum => "no UDP checksum (TiU requires one)".to_string(),
            Error::Checksum => "wrong UDP checksum".to_string(),
            Error::TooLong => "datagram over 65,535 bytes".to_string(),
            Error::MixedFamilies => "source and destination of different IP versions".to_string(),
        };
        f.write_str(&s)
    }
}

impl std::error::Error for Error {}
