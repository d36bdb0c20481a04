//! A blocking client of `macroflowd` (the Python module `macroflow.fse_client` and the C library
//! `libmacroflow_fse` wrap it). One connection, one request at a time; pushes that arrive
//! between replies are kept in order until [`Client::take_pushes`] or [`Client::wait_push`].

use crate::proto::{
    self, FlowInfo, GroupInfo, GroupSpec, Op, Push, RateAlgorithm, ReplyBody, Request, ServerMsg,
    WindowState, VERSION,
};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// What can go wrong in a call.
#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    /// The daemon refused the request: the field it names and why (nothing changed).
    Daemon {
        field: String,
        message: String,
    },
    /// The daemon sent something this client does not understand, or an error that was not the
    /// answer to the request (a connection-level error before it closed).
    Protocol(String),
    /// The request cannot be sent (it would not fit in a frame): nothing was sent.
    Argument(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "macroflowd: {e}"),
            ClientError::Daemon { field, message } => write!(f, "macroflowd: {field}: {message}"),
            ClientError::Protocol(m) => write!(f, "macroflowd: protocol: {m}"),
            ClientError::Argument(m) => write!(f, "macroflowd: {m}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// A registered rate flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Registered {
    pub flow: u64,
    pub group: u64,
    pub rate_bps: f64,
}

/// A registered window flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegisteredWindow {
    pub flow: u64,
    pub group: u64,
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
}

/// See the module docs.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    /// The read timeout set on the socket now (set only when it changes: a system call).
    timeout: Option<Duration>,
    next_id: u32,
    pushes: VecDeque<Push>,
    uid: u32,
    pid: i32,
}

impl Client {
    /// Connects and says Hello.
    pub fn connect(path: impl AsRef<Path>) -> Result<Client> {
        let stream = UnixStream::connect(path)?;
        let mut c = Client {
            stream,
            timeout: None,
            next_id: 1,
            pushes: VecDeque::new(),
            uid: 0,
            pid: 0,
        };
        match c.request(Op::Hello { version: VERSION })? {
            ReplyBody::Hello { uid, pid, .. } => {
                c.uid = uid;
                c.pid = pid;
                Ok(c)
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Whether a message (a push) is waiting to be read, without blocking.
    pub fn has_pending(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLIN != 0 }
    }

    /// The uid and pid the daemon sees this process as.
    pub fn peer(&self) -> (u32, i32) {
        (self.uid, self.pid)
    }

    /// Sends one request and waits for its reply; a daemon error becomes [`ClientError::Daemon`].
    pub fn request(&mut self, op: Op) -> Result<ReplyBody> {
        let id = self.next_id;
        let frame = proto::encode(&Request { id, op });
        if frame.len() - 4 > proto::MAX_FRAME_BYTES as usize {
            // The daemon would have to close the connection (a frame it cannot skip).
            return Err(ClientError::Argument(format!(
                "a request of {} bytes: at most {} fit in a frame",
                frame.len() - 4,
                proto::MAX_FRAME_BYTES
            )));
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.stream.write_all(&frame)?;
        self.reply_to(id)
    }

    /// Waits for the reply to request `id`, keeping the pushes that come before it; a daemon
    /// refusal is [`ClientError::Daemon`], a reply to another request a protocol error.
    fn reply_to(&mut self, id: u32) -> Result<ReplyBody> {
        loop {
            match self.read_msg(None)? {
                Some(ServerMsg::Push(p)) => self.pushes.push_back(p),
                Some(ServerMsg::Reply(r)) if r.id != id => {
                    return Err(ClientError::Protocol(format!(
                        "reply {} to request {id}: {:?}",
                        r.id, r.body
                    )));
                }
                Some(ServerMsg::Reply(r)) => {
                    if let ReplyBody::Error { field, message } = r.body {
                        return Err(ClientError::Daemon { field, message });
                    }
                    return Ok(r.body);
                }
                None => unreachable!("no timeout"),
            }
        }
    }

    fn set_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if self.timeout != t {
            self.stream.set_read_timeout(t)?;
            self.timeout = t;
        }
        Ok(())
    }

    /// One message; None if `timeout` passed first.
    fn read_msg(&mut self, timeout: Option<Duration>) -> Result<Option<ServerMsg>> {
        // Only the frame's first byte waits under the timeout: once a frame has begun, the rest is
        // read whole (a timeout inside the length prefix would lose its bytes and misread the
        // stream from then on).
        self.set_timeout(timeout)?;
        let mut prefix = [0u8; 4];
        loop {
            match self.stream.read(&mut prefix[..1]) {
                Ok(0) => {
                    return Err(ClientError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the daemon closed the connection",
                    )))
                }
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if timeout.is_some()
                        && matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.set_timeout(None)?;
        self.stream.read_exact(&mut prefix[1..])?;
        let n = proto::frame_len(prefix).map_err(ClientError::Protocol)?;
        let mut buf = vec![0u8; n];
        self.stream.read_exact(&mut buf)?;
        proto::decode(&buf).map(Some).map_err(ClientError::Protocol)
    }

    /// Registers a rate flow; `desired_rate_bps` as in [`Op::RegisterRate`].
    pub fn register_rate(
        &mut self,
        group: GroupSpec,
        priority: f64,
        initial_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        algorithm: Option<RateAlgorithm>,
        timeout_ms: Option<u32>,
    ) -> Result<Registered> {
        match self.request(Op::RegisterRate {
            group,
            priority,
            initial_rate_bps,
            desired_rate_bps,
            algorithm,
            timeout_ms,
        })? {
            ReplyBody::Registered {
                flow,
                group,
                rate_bps,
            } => Ok(Registered {
                flow,
                group,
                rate_bps,
            }),
            other => Err(unexpected(&other)),
        }
    }

    pub fn register_window(
        &mut self,
        group: GroupSpec,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        timeout_ms: Option<u32>,
    ) -> Result<RegisteredWindow> {
        match self.request(Op::RegisterWindow {
            group,
            priority,
            cwnd_pkts,
            ssthresh_pkts,
            timeout_ms,
        })? {
            ReplyBody::RegisteredWindow {
                flow,
                group,
                cwnd_pkts,
                ssthresh_pkts,
            } => Ok(RegisteredWindow {
                flow,
                group,
                cwnd_pkts,
                ssthresh_pkts,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// UPDATE: the rate to use now.
    pub fn update_rate(
        &mut self,
        flow: u64,
        cc_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        rtt_us: Option<u64>,
    ) -> Result<f64> {
        match self.request(Op::UpdateRate {
            flow,
            cc_rate_bps,
            desired_rate_bps,
            rtt_us,
        })? {
            ReplyBody::Rate { rate_bps } => Ok(rate_bps),
            other => Err(unexpected(&other)),
        }
    }

    /// Many UPDATEs pipelined: all requests in one write, then the replies in order. An
    /// application with several flows reports them together at the cost of one round trip (the
    /// load benchmark's batched mode). Each update gets its own result; an I/O or protocol error
    /// ends the call (the connection is then unusable).
    pub fn update_rates(
        &mut self,
        updates: &[(u64, f64, Option<f64>, Option<u64>)],
    ) -> Result<Vec<std::result::Result<f64, ClientError>>> {
        let mut buf = Vec::with_capacity(updates.len() * 40);
        let first = self.next_id;
        for &(flow, cc_rate_bps, desired_rate_bps, rtt_us) in updates {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            buf.extend_from_slice(&proto::encode(&Request {
                id,
                op: Op::UpdateRate {
                    flow,
                    cc_rate_bps,
                    desired_rate_bps,
                    rtt_us,
                },
            }));
        }
        self.stream.write_all(&buf)?;
        let mut out = Vec::with_capacity(updates.len());
        let mut id = first;
        while out.len() < updates.len() {
            out.push(match self.reply_to(id) {
                Ok(ReplyBody::Rate { rate_bps }) => Ok(rate_bps),
                Ok(other) => Err(unexpected(&other)),
                Err(e @ ClientError::Daemon { .. }) => Err(e),
                Err(e) => return Err(e),
            });
            id = id.wrapping_add(1).max(1);
        }
        Ok(out)
    }

    /// UPDATE of a window flow: the (cwnd, ssthresh) to use, or None to keep its own.
    #[allow(clippy::too_many_arguments)]
    pub fn update_window(
        &mut self,
        flow: u64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: WindowState,
        timeout: bool,
        in_flight_pkts: f64,
    ) -> Result<Option<(f64, f64)>> {
        match self.request(Op::UpdateWindow {
            flow,
            cwnd_pkts,
            ssthresh_pkts,
            state,
            timeout,
            in_flight_pkts,
        })? {
            ReplyBody::Window {
                cwnd_pkts: Some(c),
                ssthresh_pkts: Some(s),
            } => Ok(Some((c, s))),
            ReplyBody::Window { .. } => Ok(None),
            other => Err(unexpected(&other)),
        }
    }

    pub fn set_priority(&mut self, flow: u64, priority: f64) -> Result<()> {
        self.ok(Op::SetPriority { flow, priority })
    }

    pub fn refresh(&mut self, flow: u64) -> Result<()> {
        self.ok(Op::Refresh { flow })
    }

    pub fn leave(&mut self, flow: u64) -> Result<()> {
        self.ok(Op::Leave { flow })
    }

    pub fn subscribe(&mut self, flow: u64) -> Result<()> {
        self.ok(Op::Subscribe { flow })
    }

    pub fn query_flow(&mut self, flow: u64) -> Result<FlowInfo> {
        match self.request(Op::QueryFlow { flow })? {
            ReplyBody::Flow(f) => Ok(f),
            other => Err(unexpected(&other)),
        }
    }

    pub fn query_group(&mut self, group: u64) -> Result<GroupInfo> {
        match self.request(Op::QueryGroup { group })? {
            ReplyBody::Group(g) => Ok(g),
            other => Err(unexpected(&other)),
        }
    }

    /// The pushes received so far, oldest first.
    pub fn take_pushes(&mut self) -> Vec<Push> {
        self.pushes.drain(..).collect()
    }

    /// The next push, waiting up to `timeout` for one.
    pub fn wait_push(&mut self, timeout: Duration) -> Result<Option<Push>> {
        if let Some(p) = self.pushes.pop_front() {
            return Ok(Some(p));
        }
        match self.read_msg(Some(timeout.max(Duration::from_micros(1))))? {
            None => Ok(None),
            Some(ServerMsg::Push(p)) => Ok(Some(p)),
            Some(ServerMsg::Reply(r)) => Err(ClientError::Protocol(format!(
                "a reply ({}) with no request outstanding",
                r.id
            ))),
        }
    }

    fn ok(&mut self, op: Op) -> Result<()> {
        match self.request(op)? {
            ReplyBody::Ok => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(body: &ReplyBody) -> ClientError {
    ClientError::Protocol(format!("unexpected reply {body:?}"))
}
