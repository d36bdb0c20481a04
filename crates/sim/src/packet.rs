//! Packets and the pool they live in. A packet is allocated when a transport sends it and freed
//! when it is delivered or dropped; queues, links and events carry only its [`PacketId`], so the
//! steady state allocates nothing.

use crate::net::NodeId;

/// Index of a packet in the [`PacketPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    TcpData,
    TcpAck,
    Udp,
    /// Data of a rate-controlled media flow.
    Media,
    /// Feedback of a media flow's receiver (its payload waits in the engine's feedback store,
    /// `seq` is its index).
    MediaFeedback,
}

impl PacketKind {
    /// A packet of a TCP flow (its `flow` indexes the engine's TCP flows).
    pub fn is_tcp(self) -> bool {
        matches!(self, PacketKind::TcpData | PacketKind::TcpAck)
    }
}

/// A SACK block: bytes `start..end` received out of order (RFC 2018).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlock {
    pub start: u64,
    pub end: u64,
}

pub const MAX_SACK_BLOCKS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packet {
    /// The transport flow (index into the simulation's flows).
    pub flow: u32,
    pub kind: PacketKind,
    pub src: NodeId,
    pub dst: NodeId,
    /// Bytes on the wire (IP packet size).
    pub size_bytes: u32,
    /// Data: sequence number of the first payload byte.
    pub seq: u64,
    /// Data: payload bytes.
    pub len: u32,
    /// Ack: cumulative acknowledgement (next byte expected).
    pub ack: u64,
    pub sack: [SackBlock; MAX_SACK_BLOCKS],
    pub n_sack: u8,
    /// Time the packet was sent (ns), echoed by the receiver (RFC 7323 timestamps).
    pub ts_ns: u64,
    /// Ack: the echoed timestamp (valid only if `has_ts_echo`; 0 is a real time).
    pub ts_echo_ns: u64,
    pub has_ts_echo: bool,
    /// Ack: one-way delay of the data packet that triggered it (arrival - its `ts_ns`), for
    /// delay-based controllers (LEDBAT). 0: none.
    pub owd_ns: u64,
    pub dscp: u8,
    /// Drop precedence set by a marker (RIO: 0 = in profile, 1 = out of profile).
    pub color: u8,
    /// Hash of the five-tuple for ECMP.
    pub hash: u32,
    /// A retransmission.
    pub retx: bool,
    /// Media data: the sender's RTT estimate in ns (0: none), stamped for TFRC.
    pub rtt_ns: u64,
}

impl Packet {
    pub fn new(flow: u32, kind: PacketKind, src: NodeId, dst: NodeId, size_bytes: u32) -> Self {
        Packet {
            flow,
            kind,
            src,
            dst,
            size_bytes,
            seq: 0,
            len: 0,
            ack: 0,
            sack: [SackBlock::default(); MAX_SACK_BLOCKS],
            n_sack: 0,
            ts_ns: 0,
            ts_echo_ns: 0,
            has_ts_echo: false,
            owd_ns: 0,
            dscp: 0,
            color: 0,
            hash: 0,
            retx: false,
            rtt_ns: 0,
        }
    }
}

/// A slab of packets with a free list.
#[derive(Debug, Default)]
pub struct PacketPool {
    slots: Vec<Packet>,
    free: Vec<u32>,
    live: usize,
}

impl PacketPool {
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = p;
                PacketId(i)
            }
            None => {
                self.slots.push(p);
                PacketId(self.slots.len() as u32 - 1)
            }
        }
    }

    pub fn free(&mut self, id: PacketId) -> Packet {
        self.live -= 1;
        self.free.push(id.0);
        self.slots[id.0 as usize]
    }

    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.0 as usize]
    }

    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.0 as usize]
    }

    /// Packets allocated and not yet freed: the ones in flight.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Slots ever allocated: the pool's high-water mark.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
