//! The wire protocol of `macroflowd`, version [`VERSION`].
//!
//! **Framing.** Every message, either way, is one frame: a 4-byte big-endian length `n`
//! (1 ..= [`MAX_FRAME_BYTES`]) followed by `n` bytes of payload. The payload is the message in
//! postcard's wire format (postcard 1.x, a frozen, documented serde encoding: varint integers,
//! little-endian IEEE floats, enums as a varint variant index then the fields in order; see
//! <https://postcard.jamesmunns.com/wire-format>). The types below are the schema: a variant's
//! index is its position in the enum. Postcard has no field tags and a frame is exactly one
//! message, so **any change to a message's fields is a new [`VERSION`]**; within a version only
//! new enum variants may be appended, and only to messages an older peer never receives (a new
//! `Op` is refused by an older daemon with an error naming the frame, and changes nothing).
//!
//! **Session.** The client sends [`Request`]s, each with an `id` of its choosing; the daemon
//! answers each with exactly one [`ServerMsg::Reply`] carrying the same `id`, in order. The first
//! request must be [`Op::Hello`] with the client's version; the daemon answers with its own and
//! closes the connection if they differ. Between replies the daemon may send
//! [`ServerMsg::Push`]: a new rate for a flow the client subscribed to ([`Op::Subscribe`]; the
//! active FSE algorithms recompute every member's rate when any member updates, joins or leaves).
//!
//! **Errors.** A frame that does not decode, or a request whose values are out of range, gets
//! [`ReplyBody::Error`] naming the field (`register.priority`, `frame`, ...) and changes nothing.
//! A frame longer than [`MAX_FRAME_BYTES`] or of length 0 cannot be skipped safely: the daemon
//! replies with an error (id 0) and closes the connection.

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks.
pub const VERSION: u16 = 1;

/// The largest frame payload accepted either way (a register with a 1 KiB label fits easily).
pub const MAX_FRAME_BYTES: u32 = 16 * 1024;

/// The longest configuration label a client may give.
pub const MAX_LABEL_BYTES: usize = 1024;

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Chosen by the client; the reply carries it back.
    pub id: u32,
    pub op: Op,
}

/// How a registering flow names its flow group (RFC 8699 sec. 5.1). The daemon scopes every
/// group to the caller's user unless its configuration shares the group between users.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GroupSpec {
    /// An explicit Flow Group Identifier chosen by the application (e.g. an SBD verdict).
    Explicit(u64),
    /// SBD by multiplexing: the same five-tuple and DSCP. Addresses are 16 bytes (IPv4 as
    /// IPv4-mapped IPv6, `::ffff:a.b.c.d`).
    Multiplexed {
        src: [u8; 16],
        dst: [u8; 16],
        protocol: u8,
        src_port: u16,
        dst_port: u16,
        dscp: u8,
    },
    /// SBD by configuration: flows given the same label (e.g. "wlan0 uplink").
    Configured(String),
}

/// The coupler a rate-based group runs (RFC 8699 sec. 5.3, seed 003 Algorithms 1-3 and App. C).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RateAlgorithm {
    Active,
    ConservativeActive,
    SimplePassive,
    Passive,
}

/// A TCP connection's state as TCP-CCC needs it (seed 003 Algorithm 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WindowState {
    SlowStart,
    CongestionAvoidance,
    FastRecovery,
}

/// An operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The first request of a session: the client's protocol version.
    Hello {
        version: u16,
    },
    /// Registers a rate-based flow (FSE) with its controller's initial rate. `desired_rate_bps`:
    /// the rate the application wants (DR; None: unlimited), used by every UPDATE that names
    /// none (an UPDATE that names one replaces it). `algorithm`: the group's, if this flow
    /// creates the group (else it must match or be None; the configuration may fix it).
    /// `timeout_ms`: soft state, the flow is removed when silent for longer (None: the
    /// configuration's default).
    RegisterRate {
        group: GroupSpec,
        priority: f64,
        initial_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        algorithm: Option<RateAlgorithm>,
        timeout_ms: Option<u32>,
    },
    /// Registers a window-based flow (TCP-CCC or the configured TCP coupler).
    RegisterWindow {
        group: GroupSpec,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        timeout_ms: Option<u32>,
    },
    /// UPDATE of a rate-based flow: the rate its controller computed (CC_R), what the application
    /// wants (None: the desired rate it registered or last updated with; unlimited if none), its
    /// RTT in microseconds (the conservative algorithm needs it).
    UpdateRate {
        flow: u64,
        cc_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        rtt_us: Option<u64>,
    },
    /// UPDATE of a window-based flow (seed 003 Algorithm 4's inputs).
    UpdateWindow {
        flow: u64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: WindowState,
        timeout: bool,
        in_flight_pkts: f64,
    },
    SetPriority {
        flow: u64,
        priority: f64,
    },
    /// Keeps a flow's soft state alive without an update.
    Refresh {
        flow: u64,
    },
    Leave {
        flow: u64,
    },
    QueryFlow {
        flow: u64,
    },
    QueryGroup {
        group: u64,
    },
    /// Pushes this flow's new rate whenever the group recomputes it (active algorithms).
    Subscribe {
        flow: u64,
    },
}

/// A message from the daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServerMsg {
    Reply(Reply),
    Push(Push),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub id: u32,
    pub body: ReplyBody,
}

/// A new rate for a subscribed flow.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Push {
    pub flow: u64,
    pub rate_bps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ReplyBody {
    Hello {
        version: u16,
        /// The caller as the kernel reports it (SO_PEERCRED).
        uid: u32,
        pid: i32,
    },
    /// A flow registered: its id, its group's id and the rate (or window) to use now.
    Registered {
        flow: u64,
        group: u64,
        rate_bps: f64,
    },
    RegisteredWindow {
        flow: u64,
        group: u64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    },
    /// The rate the flow should use now.
    Rate {
        rate_bps: f64,
    },
    /// The window the connection should use now (None: keep its own).
    Window {
        cwnd_pkts: Option<f64>,
        ssthresh_pkts: Option<f64>,
    },
    Ok,
    Flow(FlowInfo),
    Group(GroupInfo),
    Error {
        field: String,
        message: String,
    },
}

/// One flow as the daemon holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowInfo {
    pub flow: u64,
    pub group: u64,
    /// The priority the client asked for.
    pub priority: f64,
    /// The priority the coupler uses (lower if the user's share is limited by the policy).
    pub effective_priority: f64,
    /// FSE_R (rate flows) or the coupler's window for it (window flows, packets).
    pub rate_or_cwnd: f64,
    /// DR (rate flows; infinity: unlimited); 0 for window flows.
    pub desired_rate_bps: f64,
}

/// One group: the rows of RFC 8699 App. C's tables and the aggregate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupInfo {
    pub group: u64,
    /// "active", "conservative_active", "simple_passive", "passive", or the TCP coupler's name.
    pub coupler: String,
    /// The caller's own flows only (others' are counted, not shown).
    pub flows: Vec<FlowInfo>,
    pub flow_count: u32,
    /// S_CR (rate groups) or the aggregate window (window groups).
    pub sum_calculated: f64,
    /// TLO, the passive algorithm's leftover (0 otherwise).
    pub leftover: f64,
}

/// Encodes a message as one frame (length prefix and payload).
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = postcard::to_stdvec(msg).expect("the protocol's types always serialize");
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Checks a frame's length prefix: the payload length, or why the stream cannot go on.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, String> {
    let n = u32::from_be_bytes(prefix);
    if n == 0 || n > MAX_FRAME_BYTES {
        return Err(format!(
            "frame length {n}: expected 1 ..= {MAX_FRAME_BYTES} bytes"
        ));
    }
    Ok(n as usize)
}

/// Decodes a payload; trailing bytes are an error (a frame is exactly one message).
pub fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, String> {
    match postcard::take_from_bytes::<T>(payload) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(format!("{} bytes after the message", rest.len())),
        Err(e) => Err(format!("not a valid message: {e}")),
    }
}

impl RateAlgorithm {
    pub fn name(self) -> &'static str {
        self.to_fse().name()
    }

    pub fn to_fse(self) -> coupling::fse::Algorithm {
        use coupling::fse::Algorithm as A;
        match self {
            RateAlgorithm::Active => A::Active,
            RateAlgorithm::ConservativeActive => A::ConservativeActive,
            RateAlgorithm::SimplePassive => A::SimplePassive,
            RateAlgorithm::Passive => A::Passive,
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [
            RateAlgorithm::Active,
            RateAlgorithm::ConservativeActive,
            RateAlgorithm::SimplePassive,
            RateAlgorithm::Passive,
        ]
        .into_iter()
        .find(|a| a.name() == name)
    }
}

impl ReplyBody {
    pub fn error(field: impl Into<String>, message: impl Into<String>) -> Self {
        ReplyBody::Error {
            field: field.into(),
            message: message.into(),
        }
    }
}
