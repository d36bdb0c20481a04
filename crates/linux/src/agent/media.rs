//! Rate-controlled media flows over real UDP (issue 21): the simulator's own controllers (NADA,
//! GCC, TFRC, RAP: `sim::transport::controllers`) driven by CLOCK_MONOTONIC, optionally coupled
//! through `macroflowd` (the FSE as a daemon), as the simulator's media flows are coupled by the
//! in-process FSE (`sim::engine::media_flows`, whose logic this follows step by step).
//!
//! **Feedback.** The receiver is a reflector (the sink's media port): for every data packet it
//! returns a report (sequence, send time, RTT stamp, size, receive time) to the sender at once,
//! like transport-wide congestion control feedback. The controller's receiver half runs in the
//! sender on those reports, on a clock `feedback_delay_s` behind the sender's (the reverse path's
//! propagation delay, which the report has just travelled): at sender time `t` it has seen what
//! the real receiver had seen at `t - d`, and the feedback it produces is delivered to the sender
//! half at `t`, as a receiver's feedback sent at `t - d` would arrive. Any controller works
//! unchanged; its feedback never needs a wire format. All namespaces share CLOCK_MONOTONIC, so
//! one-way delays are the path's.
//!
//! **Coupling** (RFC 8699 sec. 5.3 as the simulator does it): a flow registers when it starts
//! sending, calls UPDATE every time its controller computes a rate (after feedback and after a
//! controller timer) and uses the answer (`RateSender::set_fse_rate_bps`); it leaves during a
//! pause and registers again after; with an active algorithm it also takes the rates the daemon
//! pushes. A daemon error is recorded (`fse_errors`, the first in `errors`) and the flow goes on
//! with its own controller's rate.

use super::clock::{now_ns, set_timer_slack, timespec, Run, CHECK_NS};
use super::{MediaFlowConfig, MediaFlowReport, MediaRecvReport};
use coupling::{Duration, Instant};
use fsed::client::Client;
use fsed::proto::{GroupSpec, RateAlgorithm};
use sim::media::MediaState;
use sim::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;

/// IP and UDP headers: a media packet of `packet_bytes` on the wire carries this much less.
pub(crate) const IP_UDP_HEADER_BYTES: u32 = 28;
/// A data packet's header, big-endian: flow u32, seq u64, send time u64 (ns, CLOCK_MONOTONIC),
/// RTT stamp u64 (ns; 0: none).
pub(crate) const DATA_HEADER_BYTES: usize = 28;
/// A report: the data header, then the IP size u32 and the receive time u64.
pub(crate) const REPORT_BYTES: usize = DATA_HEADER_BYTES + 12;

/// One planned media flow: its controller built (so a bad name failed before ready).
pub(crate) struct MediaJob {
    pub cfg: MediaFlowConfig,
    pub name: String,
    pub dst: SocketAddrV4,
    pub start_ns: u64,
    pub epoch_ns: u64,
    pub interval_ns: u64,
    pub snd: Box<dyn RateSender>,
    pub rcv: Box<dyn RateReceiver>,
    pub source: MediaState,
    pub feedback_delay_ns: u64,
    pub base_rtt: Duration,
    pub algorithm: Option<RateAlgorithm>,
    /// Priority changes (ns since the epoch, priority), in time order.
    pub changes: Vec<(u64, f64)>,
}

pub(crate) fn open(dscp: u8) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_tos_v4((dscp as u32) << 2)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

fn put_header(buf: &mut [u8], flow: u32, info: &SendInfo, epoch_ns: u64) {
    buf[0..4].copy_from_slice(&flow.to_be_bytes());
    buf[4..12].copy_from_slice(&info.seq.to_be_bytes());
    buf[12..20].copy_from_slice(&(info.send_ts.as_nanos() + epoch_ns).to_be_bytes());
    buf[20..28].copy_from_slice(&info.rtt.map_or(0, |r| r.as_nanos()).to_be_bytes());
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Waits until `sock` is readable or `until_ns` (absolute) comes, at most [`CHECK_NS`].
fn wait_readable(sock: &Socket, until_ns: u64) {
    let now = now_ns();
    if until_ns <= now {
        return;
    }
    let ts = timespec((until_ns - now).min(CHECK_NS));
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
}

struct Flow {
    job: MediaJob,
    sock: Socket,
    rep: MediaFlowReport,
    fse: Option<Client>,
    fse_flow: Option<u64>,
    seq: u64,
    last_send: Option<(u64, u32)>,
    next_send_ns: u64,
    idle: bool,
    /// The priority it registers with now (priority changes move it).
    priority: f64,
    /// The latest time given to the receiver half: a report delayed on the reverse path past a
    /// receiver timer is given that timer's time, so the controller's clock never goes back.
    rcv_clock: u64,
    /// Reports waiting for the receiver half's clock to reach their receive time.
    pending: VecDeque<(u64, SendInfo)>,
    /// Bytes received by sampling bin (receive time), for the received_bytes series.
    received_bins: BTreeMap<u64, u64>,
}

impl Flow {
    fn inst(&self, ns: u64) -> Instant {
        Instant::from_nanos(ns.saturating_sub(self.job.epoch_ns))
    }

    fn fse_error(&mut self, r: &Run, e: fsed::client::ClientError) {
        self.rep.fse_errors += 1;
        if self.rep.fse_errors == 1 {
            r.error(format!("{}: macroflowd: {e}", self.job.name));
        }
    }

    /// RFC 8699's calls at the points the simulator makes them (see the module docs).
    fn fse_sync(&mut self, now_ns: u64, r: &Run) {
        let now = self.inst(now_ns);
        let Some(c) = self.fse.as_mut() else { return };
        let group = self
            .job
            .cfg
            .fse
            .as_ref()
            .expect("a client only with a seat")
            .group
            .clone();
        let paused = self.job.source.is_paused(now);
        if paused {
            if let Some(f) = self.fse_flow.take() {
                if let Err(e) = c.leave(f) {
                    self.fse_error(r, e);
                }
            }
            return;
        }
        match self.fse_flow {
            None => {
                let rate = self.job.snd.rate_bps();
                match c.register_rate(
                    GroupSpec::Configured(group),
                    self.priority,
                    rate,
                    None,
                    self.job.algorithm,
                    None,
                ) {
                    Ok(reg) => {
                        self.fse_flow = Some(reg.flow);
                        self.drop_stale_pushes();
                        self.job.snd.set_fse_rate_bps(reg.rate_bps, now);
                        if self.job.algorithm.is_some_and(|a| {
                            matches!(a, RateAlgorithm::Active | RateAlgorithm::ConservativeActive)
                        }) {
                            if let Err(e) = self.fse.as_mut().expect("checked").subscribe(reg.flow)
                            {
                                self.fse_error(r, e);
                            }
                        }
                    }
                    Err(e) => self.fse_error(r, e),
                }
            }
            Some(f) => {
                let cc = self
                    .job
                    .snd
                    .cc_rate_bps()
                    .clamp(0.0, coupling::units::MAX_RATE_BPS);
                let rtt = self
                    .job
                    .snd
                    .rtt()
                    .unwrap_or(self.job.base_rtt)
                    .max(Duration::from_micros(1));
                let desired = self.job.source.desired_rate_bps();
                match c.update_rate(
                    f,
                    cc,
                    desired.is_finite().then_some(desired),
                    Some(rtt.as_nanos() / 1000),
                ) {
                    Ok(rate) => {
                        self.rep.fse_updates += 1;
                        self.drop_stale_pushes();
                        self.job.snd.set_fse_rate_bps(rate, now);
                    }
                    Err(e) => {
                        // Forgotten by the daemon (its soft state expired it): register again at
                        // the next sync, as a flow that resumes does.
                        if matches!(&e, fsed::client::ClientError::Daemon { field, .. } if field == "update_rate.flow")
                        {
                            self.fse_flow = None;
                        }
                        self.fse_error(r, e)
                    }
                }
            }
        }
    }

    /// Pushes that arrived while a request of this flow waited for its reply are older than the
    /// reply: the reply's rate wins.
    fn drop_stale_pushes(&mut self) {
        if let Some(c) = self.fse.as_mut() {
            let stale = c.take_pushes().len() as u64;
            self.rep.fse_pushes_superseded += stale;
        }
    }

    /// Rates the daemon pushed (active algorithms), read without blocking: each replaces the
    /// controller's rate and re-paces the flow, as the simulator's FSE answer does.
    fn take_pushes(&mut self, now_ns: u64, r: &Run) {
        let now = self.inst(now_ns);
        let Some(c) = self.fse.as_mut() else { return };
        let mut got = c.take_pushes();
        while c.has_pending() {
            match c.wait_push(std::time::Duration::from_micros(1)) {
                Ok(Some(p)) => got.push(p),
                Ok(None) => break,
                Err(e) => {
                    self.fse_error(r, e);
                    return;
                }
            }
        }
        let mut applied = false;
        for p in got {
            if Some(p.flow) == self.fse_flow {
                self.job.snd.set_fse_rate_bps(p.rate_bps, now);
                self.rep.fse_pushes += 1;
                applied = true;
            }
        }
        if applied {
            self.pace(now_ns);
        }
    }

    /// The pacer: the next packet one packet time (at the current rate) after the last.
    fn pace(&mut self, now_ns: u64) {
        self.next_send_ns = match self.last_send {
            Some((t, size)) if !self.idle => {
                let rate = self.job.snd.rate_bps().max(1_000.0);
                (t + (size as f64 * 8e9 / rate).ceil() as u64).max(now_ns)
            }
            _ => now_ns,
        };
    }

    fn deliver(&mut self, fb: Feedback, now_ns: u64, r: &Run) {
        let before = self.job.snd.rate_bps();
        self.job.snd.on_feedback(&fb, self.inst(now_ns));
        self.fse_sync(now_ns, r);
        if self.job.snd.rate_bps() != before {
            self.pace(now_ns);
        }
    }

    fn send(&mut self, now_ns: u64, buf: &mut [u8], r: &Run) {
        let now = self.inst(now_ns);
        let ready = self.job.source.ready(now);
        if ready < 1.0 {
            let went_idle = !self.idle;
            if went_idle {
                self.idle = true;
                self.job.snd.set_app_limited(true, now);
            }
            let paused = self.job.source.is_paused(now);
            if went_idle || (self.fse.is_some() && paused == self.fse_flow.is_some()) {
                self.fse_sync(now_ns, r);
            }
            self.next_send_ns = self
                .job
                .source
                .next_data_at(now)
                .map_or(u64::MAX, |t| t.as_nanos() + self.job.epoch_ns);
            return;
        }
        if self.idle {
            self.idle = false;
            self.job.snd.set_app_limited(false, now);
        }
        let size = (self.job.cfg.packet_bytes as f64).min(ready).ceil() as u32;
        let size = size.max(IP_UDP_HEADER_BYTES + DATA_HEADER_BYTES as u32);
        let info = self.job.snd.on_send(self.seq, size, now);
        self.seq += 1;
        self.job.source.consume(size as f64);
        let payload = &mut buf[..(size - IP_UDP_HEADER_BYTES) as usize];
        put_header(payload, self.job.cfg.flow, &info, self.job.epoch_ns);
        match self.sock.send_to(payload, &SockAddr::from(self.job.dst)) {
            Ok(_) => {
                self.rep.sent_pkts += 1;
                self.rep.sent_bytes += size as u64;
            }
            Err(e) => {
                self.rep.send_errors += 1;
                if self.rep.send_errors == 1 {
                    r.error(format!("{}: send: {e}", self.job.name));
                }
            }
        }
        let rate = self.job.snd.rate_bps().max(1_000.0);
        let gap = (size as f64 * 8e9 / rate).ceil() as u64;
        // From the instant it was due (the simulator's pacer is never late), unless the wake-up
        // was later than a packet time: then from now, rather than a burst to catch up.
        let due = self.next_send_ns;
        let base = if now_ns.saturating_sub(due) < gap {
            due
        } else {
            now_ns
        };
        self.last_send = Some((base, size));
        self.next_send_ns = base + gap;
        if self.fse.is_some() && self.fse_flow.is_none() {
            self.fse_sync(now_ns, r);
        }
    }

    /// Reads every report waiting on the socket.
    fn read_reports(&mut self, buf: &mut [u8]) {
        loop {
            // SAFETY: recv into our buffer, non-blocking.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                return;
            }
            let b = &buf[..n as usize];
            if b.len() < REPORT_BYTES
                || u32::from_be_bytes(b[0..4].try_into().expect("4")) != self.job.cfg.flow
            {
                self.rep.bad_reports += 1;
                continue;
            }
            let sent = u64_at(b, 12);
            let rtt = u64_at(b, 20);
            let size = u32::from_be_bytes(b[28..32].try_into().expect("4"));
            let recv = u64_at(b, 32);
            let info = SendInfo {
                seq: u64_at(b, 4),
                size_bytes: size,
                send_ts: self.inst(sent),
                rtt: (rtt > 0).then(|| Duration::from_nanos(rtt)),
            };
            self.rep.received_pkts += 1;
            self.rep.received_bytes += size as u64;
            self.rep.owd_sum_s += recv.saturating_sub(sent) as f64 / 1e9;
            if let Some(bin) = recv
                .saturating_sub(self.job.epoch_ns)
                .checked_div(self.job.interval_ns)
            {
                *self.received_bins.entry(bin).or_default() += size as u64;
            }
            self.pending.push_back((recv, info));
        }
    }

    /// Runs the receiver half up to its clock (`now - feedback delay`): reports and its timers in
    /// time order, delivering the feedback they produce now.
    fn run_receiver(&mut self, now_ns: u64, r: &Run) {
        let rcv_now = now_ns.saturating_sub(self.job.feedback_delay_ns);
        loop {
            let timer = self
                .job
                .rcv
                .next_timer()
                .map(|t| t.as_nanos() + self.job.epoch_ns)
                .filter(|&t| t <= rcv_now);
            let report = self.pending.front().map(|p| p.0).filter(|&t| t <= rcv_now);
            let fb = match (timer, report) {
                (Some(t), Some(p)) if t <= p => {
                    self.rcv_clock = self.rcv_clock.max(t);
                    self.job.rcv.on_timer(self.inst(self.rcv_clock))
                }
                (Some(t), None) => {
                    self.rcv_clock = self.rcv_clock.max(t);
                    self.job.rcv.on_timer(self.inst(self.rcv_clock))
                }
                (_, Some(_)) => {
                    let (t, info) = self.pending.pop_front().expect("front");
                    self.rcv_clock = self.rcv_clock.max(t);
                    self.job.rcv.on_packet(&info, self.inst(self.rcv_clock))
                }
                (None, None) => break,
            };
            if let Some(fb) = fb {
                self.deliver(fb, now_ns, r);
            }
        }
    }
}

/// Runs one media flow until the end; returns its report (samples included).
pub(crate) fn run(job: MediaJob, sock: Socket, r: Run) -> MediaFlowReport {
    set_timer_slack();
    let mut rep = MediaFlowReport {
        flow: job.cfg.flow,
        ..Default::default()
    };
    if !r.sleep_until(job.start_ns) {
        return rep;
    }
    let fse = match &job.cfg.fse {
        None => None,
        Some(seat) => match Client::connect(&seat.socket) {
            Ok(c) => Some(c),
            Err(e) => {
                rep.fse_errors += 1;
                let msg = format!("{}: macroflowd at {}: {e}", job.name, seat.socket);
                r.error(msg.clone());
                rep.error = Some(msg);
                None
            }
        },
    };
    let start = job.start_ns;
    let mut f = Flow {
        sock,
        rep,
        fse,
        fse_flow: None,
        seq: 0,
        last_send: None,
        next_send_ns: start,
        idle: false,
        pending: VecDeque::new(),
        received_bins: BTreeMap::new(),
        priority: job.cfg.fse.as_ref().map_or(1.0, |s| s.priority),
        rcv_clock: 0,
        job,
    };
    let mut buf = vec![0u8; 65_536];
    let mut rbuf = vec![0u8; 2048];
    // The simulator samples every flow from t = 0 to the end inclusive: the instants before the
    // start show the controller's initial rate and nothing received.
    let mut next_sample = if f.job.interval_ns > 0 {
        f.job.epoch_ns
    } else {
        u64::MAX
    };
    while next_sample < start {
        f.rep.samples.push((
            r.t_s(next_sample),
            f.job.snd.rate_bps(),
            f.job.snd.cc_rate_bps(),
        ));
        next_sample += f.job.interval_ns;
    }
    let mut change = 0;
    // Start: as the simulator's Start event: FSE sync, then the pacer.
    f.fse_sync(start, &r);
    loop {
        let now = now_ns();
        if r.over() {
            break;
        }
        f.read_reports(&mut rbuf);
        f.run_receiver(now, &r);
        if let Some(t) = f.job.snd.next_timer() {
            if t.as_nanos() + f.job.epoch_ns <= now {
                let before = f.job.snd.rate_bps();
                f.job.snd.on_timer(f.inst(now));
                f.fse_sync(now, &r);
                if f.job.snd.rate_bps() != before {
                    f.pace(now);
                }
            }
        }
        while change < f.job.changes.len() && f.job.changes[change].0 + f.job.epoch_ns <= now {
            let p = f.job.changes[change].1;
            f.priority = p;
            if let (Some(c), Some(fl)) = (f.fse.as_mut(), f.fse_flow) {
                if let Err(e) = c.set_priority(fl, p) {
                    f.fse_error(&r, e);
                }
            }
            change += 1;
        }
        f.take_pushes(now, &r);
        if now >= f.next_send_ns {
            f.send(now, &mut buf, &r);
        }
        while now >= next_sample {
            f.rep.samples.push((
                r.t_s(next_sample),
                f.job.snd.rate_bps(),
                f.job.snd.cc_rate_bps(),
            ));
            next_sample += f.job.interval_ns;
        }
        // Sleep until the next thing to do, or a report arrives.
        let mut until = f.next_send_ns.min(next_sample).min(r.end_ns);
        if let Some(t) = f.job.snd.next_timer() {
            until = until.min(t.as_nanos() + f.job.epoch_ns);
        }
        if let Some(t) = f.job.rcv.next_timer() {
            until = until.min(t.as_nanos() + f.job.epoch_ns + f.job.feedback_delay_ns);
        }
        if let Some(&(t, _)) = f.pending.front() {
            until = until.min(t + f.job.feedback_delay_ns);
        }
        if let Some(&(t, _)) = f.job.changes.get(change) {
            until = until.min(t + f.job.epoch_ns);
        }
        wait_readable(&f.sock, until);
    }
    // The instants left up to the end (the last one at the end itself, as the simulator's).
    if !r.signalled() {
        while next_sample <= r.end_ns {
            f.rep.samples.push((
                r.t_s(next_sample),
                f.job.snd.rate_bps(),
                f.job.snd.cc_rate_bps(),
            ));
            next_sample += f.job.interval_ns;
        }
    }
    if let (Some(c), Some(fl)) = (f.fse.as_mut(), f.fse_flow) {
        let _ = c.leave(fl);
    }
    // Received bytes at each sampling instant, by receive time.
    let mut cum = 0u64;
    let mut bins = f.received_bins.into_iter().peekable();
    for s in &f.rep.samples {
        let bin_end = ((s.0 * 1e9).round() as u64) / f.job.interval_ns.max(1);
        while let Some((_, b)) = bins.next_if(|(k, _)| *k < bin_end) {
            cum += b;
        }
        f.rep.received_series.push(cum);
    }
    f.rep
}

/// The sink's reflector: returns a report for every media packet, counts them per flow.
pub(crate) fn run_reflector(s: Socket, run: Run) -> Vec<MediaRecvReport> {
    let mut flows: BTreeMap<u32, MediaRecvReport> = BTreeMap::new();
    let mut buf = vec![0u8; 65_536];
    let mut out = [0u8; REPORT_BYTES];
    let sock = std::net::UdpSocket::from(s);
    let _ = sock.set_read_timeout(Some(std::time::Duration::from_millis(20)));
    while !run.over() {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let now = now_ns();
        if n < DATA_HEADER_BYTES {
            continue;
        }
        let flow = u32::from_be_bytes(buf[0..4].try_into().expect("4"));
        let size = n as u32 + IP_UDP_HEADER_BYTES;
        let f = flows.entry(flow).or_insert_with(|| MediaRecvReport {
            flow,
            ..Default::default()
        });
        f.pkts += 1;
        f.bytes += size as u64;
        out[..DATA_HEADER_BYTES].copy_from_slice(&buf[..DATA_HEADER_BYTES]);
        out[28..32].copy_from_slice(&size.to_be_bytes());
        out[32..40].copy_from_slice(&now.to_be_bytes());
        if sock.send_to(&out, from).is_err() {
            f.report_errors += 1;
        }
    }
    flows.into_values().collect()
}
