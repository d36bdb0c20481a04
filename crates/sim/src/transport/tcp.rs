//! TCP sender and receiver.
//!
//! Sender: SACK-based loss recovery (RFC 6675) when SACK is on, NewReno (RFC 5681, RFC 6582)
//! otherwise; RTO per RFC 6298 with a configurable minimum and exponential backoff, go-back-N after
//! a timeout (skipping SACKed segments); a congestion controller behind [`CongestionControl`],
//! wrapped in [`Coupled`], which calls the connection's coupling group (if any) from the
//! controller's hooks; the groups' shared state is passed to the calls that may reach it.
//! Receiver: cumulative ACKs with SACK blocks (RFC 2018), delayed ACKs (every
//! second full segment, or when the delayed-ACK timer fires; at once for out-of-order data or when
//! a hole is filled), timestamps echoed for RTT samples (RFC 7323).
//!
//! Sequence numbers are bytes; windows are segments. Neither side reads a clock or sends anything
//! itself: they are given `now` and append the packets to send to an [`Outbox`].

use super::cc::{AckSample, CaState, CongestionControl, CwndEvent, TcpCc};
use super::coupled::{coupling_state, Coupled, CouplingGroups};
use super::sack::{insert_range, Scoreboard};
use crate::error::SimError;
use crate::packet::{Packet, PacketKind, SackBlock, MAX_SACK_BLOCKS};
use crate::stats::BurstStats;
use coupling::tcp::TcpState;
use coupling::{Duration, Instant};
use std::collections::BTreeMap;

/// Per-connection TCP parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per segment.
    pub mss: u32,
    /// IP + TCP header bytes added to every packet (52 with timestamps: 1448 + 52 = 1500).
    pub header_bytes: u32,
    pub initial_cwnd_pkts: f64,
    pub initial_ssthresh_pkts: f64,
    /// Receiver window in segments.
    pub rwnd_pkts: f64,
    pub delayed_ack: bool,
    pub delack_timeout: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    pub initial_rto: Duration,
    pub sack: bool,
    pub dupthresh: u32,
    /// RFC 3042 Limited Transmit (on in Linux and ns-3).
    pub limited_transmit: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1448,
            header_bytes: 52,
            initial_cwnd_pkts: 10.0,
            initial_ssthresh_pkts: 1e9,
            rwnd_pkts: 1e9,
            delayed_ack: true,
            delack_timeout: Duration::from_millis(200),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            sack: true,
            dupthresh: 3,
            limited_transmit: true,
        }
    }
}

/// The largest initial window a flow may have (it is sent at once).
pub const MAX_INITIAL_CWND_PKTS: f64 = 1e6;

impl TcpConfig {
    /// Checks every field; `name` is the parameter path used in errors (e.g. `flow[2].tcp`).
    pub fn check(&self, name: &str) -> Result<(), SimError> {
        if self.mss == 0 {
            return Err(SimError::invalid(
                format!("{name}.mss"),
                0,
                "an MSS > 0 bytes",
            ));
        }
        let windows = [
            ("initial_cwnd_pkts", self.initial_cwnd_pkts),
            ("initial_ssthresh_pkts", self.initial_ssthresh_pkts),
            ("rwnd_pkts", self.rwnd_pkts),
        ];
        for (field, v) in windows {
            if !(v.is_finite() && v >= 1.0) {
                return Err(SimError::invalid(
                    format!("{name}.{field}"),
                    v,
                    "a finite window >= 1 segment",
                ));
            }
        }
        // The initial window leaves at once and every packet in flight lives in the packet pool:
        // 1e300 asked for 8 GB (issue 13). Later growth is paced by ACKs and bounded by queues.
        if self.initial_cwnd_pkts > MAX_INITIAL_CWND_PKTS {
            return Err(SimError::invalid(
                format!("{name}.initial_cwnd_pkts"),
                self.initial_cwnd_pkts,
                "an initial window of at most 1e6 segments (MAX_INITIAL_CWND_PKTS)",
            ));
        }
        if self.min_rto > self.max_rto {
            return Err(SimError::invalid(
                format!("{name}.min_rto"),
                self.min_rto,
                "min_rto <= max_rto",
            ));
        }
        if self.dupthresh == 0 {
            return Err(SimError::invalid(
                format!("{name}.dupthresh"),
                0,
                "a duplicate-ACK threshold >= 1",
            ));
        }
        Ok(())
    }
}

/// Packets a transport endpoint wants sent; the engine injects them.
#[derive(Debug, Default)]
pub struct Outbox {
    pub packets: Vec<Packet>,
}

/// Addressing shared by the packets of one connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Endpoints {
    pub flow: u32,
    pub src: crate::net::NodeId,
    pub dst: crate::net::NodeId,
    pub dscp: u8,
    pub hash: u32,
}

/// Sender-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SenderStats {
    pub data_pkts_sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub fast_recoveries: u64,
    pub rtt_samples: u64,
    pub rtt_sum_s: f64,
}

#[derive(Debug)]
pub struct TcpSender {
    pub cfg: TcpConfig,
    cc: Coupled,
    pub tp: TcpCc,
    ep: Endpoints,
    /// Bytes to send; `None`: a bulk transfer.
    size: Option<u64>,
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    /// RFC 6582's `recover`: the highest sequence sent when the last recovery began.
    recover: Option<u64>,
    dupacks: u32,
    sb: Scoreboard,
    /// RFC 6675 HighRxt: the end of the highest segment retransmitted in this recovery.
    high_rxt: u64,
    srtt: Option<f64>,
    rttvar: f64,
    rto: Duration,
    rto_deadline: Option<Instant>,
    pub finished_at: Option<Instant>,
    pub stats: SenderStats,
    /// Bursts closed so far (see [`BurstStats`]).
    bursts: BurstStats,
    /// The open burst: the instant of its packets and how many (0: none open).
    burst_at: Instant,
    burst_pkts: u64,
}

impl TcpSender {
    /// An uncoupled sender.
    pub fn new(
        cfg: TcpConfig,
        cc: Box<dyn CongestionControl>,
        ep: Endpoints,
        size: Option<u64>,
    ) -> Self {
        TcpSender::coupled(
            cfg,
            Coupled::uncoupled(cc),
            ep,
            size,
            &mut CouplingGroups::default(),
        )
    }

    /// A sender whose controller may be in a coupling group: `init` registers it.
    pub fn coupled(
        cfg: TcpConfig,
        mut cc: Coupled,
        ep: Endpoints,
        size: Option<u64>,
        g: &mut CouplingGroups,
    ) -> Self {
        let mut tp = TcpCc {
            cwnd: cfg.initial_cwnd_pkts,
            ssthresh: cfg.initial_ssthresh_pkts,
            ca_state: CaState::Open,
            in_flight: 0.0,
            srtt: None,
            min_rtt: None,
            snd_nxt: 0,
        };
        cc.init(&mut tp, g);
        TcpSender {
            cfg,
            cc,
            tp,
            ep,
            size,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            recover: None,
            dupacks: 0,
            sb: Scoreboard::default(),
            high_rxt: 0,
            srtt: None,
            rttvar: 0.0,
            rto: cfg.initial_rto,
            rto_deadline: None,
            finished_at: None,
            stats: SenderStats::default(),
            bursts: BurstStats::default(),
            burst_at: Instant::ZERO,
            burst_pkts: 0,
        }
    }

    /// The bursts so far, the open one (packets emitted at the latest instant) included; it stays
    /// open, so packets emitted later at that same instant still join it.
    pub fn bursts(&self) -> BurstStats {
        let mut b = self.bursts;
        b.record(self.burst_pkts);
        b
    }

    /// Counts one data packet emitted at `now` into the bursts: O(1), no allocation.
    fn count_burst(&mut self, now: Instant) {
        if self.burst_at != now {
            self.bursts.record(self.burst_pkts);
            self.burst_at = now;
            self.burst_pkts = 0;
        }
        self.burst_pkts += 1;
    }

    pub fn cc_name(&self) -> &'static str {
        self.cc.name()
    }

    /// Bytes acknowledged so far.
    pub fn acked_bytes(&self) -> u64 {
        self.snd_una
    }

    pub fn in_recovery(&self) -> bool {
        self.tp.ca_state == CaState::Recovery
    }

    /// The state as a coupler sees it (seed 003 Table 9.1).
    pub fn coupling_state(&self) -> TcpState {
        coupling_state(&self.tp)
    }

    /// Sets the window (tests: a coupler's answer, applied by hand).
    pub fn set_window(&mut self, cwnd_pkts: f64, ssthresh_pkts: f64) {
        self.tp.cwnd = cwnd_pkts;
        self.tp.ssthresh = ssthresh_pkts;
    }

    /// Sets the congestion window from outside the controller (an FSE's answer, seed 003 sec.
    /// 6.3); ssthresh and the controller's own state stay.
    pub fn set_cwnd(&mut self, cwnd_pkts: f64) {
        self.tp.cwnd = cwnd_pkts;
    }

    /// The end of the highest segment sent so far (Linux's `snd_nxt` outside a timeout's
    /// go-back-N): a round-trip marker, as TCP Vegas keeps `beg_snd_nxt`.
    pub fn highest_sent(&self) -> u64 {
        self.snd_max
    }

    /// The controller and its coupling seat.
    pub fn controller(&self) -> &Coupled {
        &self.cc
    }

    /// Applies a segment released to this connection by another's ACK (ack-clocked handover).
    pub fn on_release(&mut self, cwnd_pkts: f64) {
        self.cc.on_release(&mut self.tp, cwnd_pkts);
    }

    /// What the connection would report to its coupler now (a measured group's move takes it).
    pub fn current_update(&self) -> coupling::tcp::TcpUpdate {
        coupling::tcp::TcpUpdate::new(self.tp.cwnd, self.tp.ssthresh, self.coupling_state())
            .with_in_flight(self.pipe_pkts())
    }

    /// A measured group moved the connection: it uses the window and threshold its new group
    /// answered.
    pub fn on_moved(&mut self, cwnd_pkts: f64, ssthresh_pkts: f64) {
        self.cc.on_moved(&mut self.tp, cwnd_pkts, ssthresh_pkts);
    }

    /// A scheduled priority change, told to the group while the connection is in it.
    pub fn set_priority(&mut self, priority: f64, g: &mut CouplingGroups) {
        self.cc.set_priority(priority, g);
    }

    /// The transfer is over: the connection leaves its group (`.release`).
    pub fn release(&mut self, g: &mut CouplingGroups) {
        self.cc.release(g);
    }

    pub fn rto_deadline(&self) -> Option<Instant> {
        self.rto_deadline
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt.map(|s| Duration::from_nanos(s as u64))
    }

    /// Segments in flight as the sender counts them against cwnd when it sends (Linux
    /// `tcp_packets_in_flight`): the pipe in SACK recovery; after a timeout, what was resent
    /// since (go-back-N), less SACKed data; else what was sent and not acknowledged.
    pub fn pipe_pkts(&self) -> f64 {
        let mss = self.cfg.mss as u64;
        let bytes = if self.sack_recovery() {
            let lost = self.sb.lost_below(mss, self.cfg.dupthresh);
            self.sb.pipe(self.snd_una, self.snd_max, lost)
        } else if self.tp.ca_state == CaState::Loss {
            self.flight_bytes() - self.sb.sacked_within(self.snd_una, self.snd_nxt)
        } else {
            self.flight_bytes()
        };
        bytes as f64 / mss as f64
    }

    fn flight_bytes(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    fn flight_pkts(&self) -> f64 {
        (self.snd_max - self.snd_una) as f64 / self.cfg.mss as f64
    }

    fn done(&self) -> bool {
        self.size.is_some_and(|s| self.snd_una >= s)
    }

    /// The cumulative ACK covers more than `recover` (RFC 6582 sec. 3.2 step 2).
    fn past_recover(&self) -> bool {
        self.recover.is_none_or(|r| self.snd_una > r)
    }

    fn restart_rto(&mut self, now: Instant) {
        self.rto_deadline = if self.snd_max > self.snd_una {
            Some(now + self.rto)
        } else {
            None
        };
    }

    fn set_ca_state(&mut self, s: CaState) {
        if self.tp.ca_state != s {
            self.tp.ca_state = s;
            self.tp.snd_nxt = self.snd_max;
            self.cc.set_state(&mut self.tp, s);
        }
    }

    /// RFC 6298 sec. 2: SRTT, RTTVAR and RTO from a sample.
    fn rtt_sample(&mut self, r: Duration) {
        let r_ns = r.as_nanos() as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r_ns);
                self.rttvar = r_ns / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r_ns).abs();
                self.srtt = Some(0.875 * s + 0.125 * r_ns);
            }
        }
        let rto =
            Duration::from_nanos((self.srtt.unwrap_or(r_ns) + (4.0 * self.rttvar).max(1e6)) as u64);
        self.rto = rto.max(self.cfg.min_rto).min(self.cfg.max_rto);
        self.tp.srtt = self.srtt();
        self.tp.min_rtt = Some(self.tp.min_rtt.map_or(r, |m| m.min(r)));
        self.stats.rtt_samples += 1;
        self.stats.rtt_sum_s += r.as_secs_f64();
    }

    fn emit(&mut self, seq: u64, now: Instant, out: &mut Outbox) {
        let len = match self.size {
            Some(s) => (s - seq).min(self.cfg.mss as u64) as u32,
            None => self.cfg.mss,
        };
        let mut p = Packet::new(
            self.ep.flow,
            PacketKind::TcpData,
            self.ep.src,
            self.ep.dst,
            len + self.cfg.header_bytes,
        );
        p.seq = seq;
        p.len = len;
        p.ts_ns = now.as_nanos();
        p.dscp = self.ep.dscp;
        p.hash = self.ep.hash;
        p.retx = seq < self.snd_max;
        self.stats.data_pkts_sent += 1;
        if p.retx {
            self.stats.retransmits += 1;
        }
        self.count_burst(now);
        out.packets.push(p);
    }

    fn window_bytes(&self) -> u64 {
        self.tp.cwnd.min(self.cfg.rwnd_pkts).max(0.0).floor() as u64 * self.cfg.mss as u64
    }

    /// Limited Transmit (RFC 3042): on the first two duplicate ACKs outside recovery, one new
    /// segment each beyond cwnd, so a small window still gets its three duplicate ACKs.
    fn limited_transmit_bytes(&self) -> u64 {
        if self.cfg.limited_transmit
            && self.tp.ca_state == CaState::Open
            && self.dupacks < self.cfg.dupthresh
        {
            self.dupacks.min(2) as u64 * self.cfg.mss as u64
        } else {
            0
        }
    }

    fn seg_len(&self, seq: u64) -> u64 {
        self.size
            .map_or(self.cfg.mss as u64, |s| (s - seq).min(self.cfg.mss as u64))
    }

    fn has_new_data(&self) -> bool {
        self.size.is_none_or(|s| self.snd_max < s)
    }

    fn sack_recovery(&self) -> bool {
        self.cfg.sack && self.tp.ca_state == CaState::Recovery
    }

    /// Sends what the window allows: in SACK recovery by RFC 6675's rules, else new segments (and,
    /// after a timeout, the unSACKed ones below the highest sent).
    pub fn send_available(&mut self, now: Instant, out: &mut Outbox) {
        if self.sack_recovery() {
            self.send_in_sack_recovery(now, out);
            return;
        }
        let wnd = self.window_bytes();
        let extra = self.limited_transmit_bytes();
        // Data in flight. After a timeout, go-back-N passes over SACKed segments without sending
        // them, and they are not in flight (Linux's packets_in_flight); otherwise SACKed data
        // above a hole still counts, as in ns-2 and ns-3's NewReno, so the window is not exceeded
        // before recovery starts.
        let mut flight = self.flight_bytes();
        if self.tp.ca_state == CaState::Loss {
            flight -= self.sb.sacked_within(self.snd_una, self.snd_nxt);
        }
        loop {
            let new_data = self.snd_nxt >= self.snd_max;
            if flight >= wnd + if new_data { extra } else { 0 } {
                break;
            }
            if self.size.is_some_and(|s| self.snd_nxt >= s) {
                break;
            }
            let seq = self.snd_nxt;
            let len = self.seg_len(seq);
            if seq < self.snd_max && self.sb.is_sacked(seq, seq + len) {
                self.snd_nxt += len; // the receiver has it: do not resend after a timeout
                continue;
            }
            self.emit(seq, now, out);
            self.snd_nxt += len;
            flight += len;
            self.snd_max = self.snd_max.max(self.snd_nxt);
            if self.rto_deadline.is_none() {
                self.rto_deadline = Some(now + self.rto);
            }
        }
    }

    /// RFC 6675 sec. 5 step (C): while cwnd - pipe >= 1 SMSS, send NextSeg().
    fn send_in_sack_recovery(&mut self, now: Instant, out: &mut Outbox) {
        let mss = self.cfg.mss as u64;
        let lost = self.sb.lost_below(mss, self.cfg.dupthresh);
        let lost_below = lost.0;
        let mut pipe = self.sb.pipe(self.snd_una, self.snd_max, lost);
        let wnd = self.window_bytes();
        let high_sacked = self.sb.high_sacked();
        while pipe + mss <= wnd {
            let from = self.high_rxt.max(self.snd_una);
            let seq = if let Some(s) = self.sb.first_hole(from, lost_below.min(high_sacked)) {
                // Rule 1: the first lost hole above HighRxt, below the highest SACKed byte.
                s
            } else if self.has_new_data() {
                // Rule 2: new data.
                self.snd_max
            } else if let Some(s) = self.sb.first_hole(from, high_sacked.min(self.snd_max)) {
                // Rule 3: an unSACKed segment below the highest SACKed byte.
                s
            } else {
                break;
            };
            let len = self.seg_len(seq);
            self.emit(seq, now, out);
            if seq >= self.snd_max {
                self.snd_max = seq + len;
                self.snd_nxt = self.snd_max;
            } else {
                self.high_rxt = self.high_rxt.max(seq + len);
                self.sb.on_retransmit(seq, seq + len);
            }
            pipe += len;
        }
    }

    /// Enters fast recovery: RFC 6675 sec. 5 with SACK, RFC 6582 step 2 without.
    fn enter_recovery(&mut self, now: Instant, out: &mut Outbox) {
        self.tp.in_flight = self.flight_pkts();
        self.tp.snd_nxt = self.snd_max;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.recover = Some(self.snd_max.saturating_sub(1));
        self.stats.fast_recoveries += 1;
        self.set_ca_state(CaState::Recovery);
        self.rto_deadline = Some(now + self.rto);
        let first = self.snd_una;
        self.emit(first, now, out);
        if self.cfg.sack {
            self.tp.cwnd = self.tp.ssthresh;
            self.high_rxt = first + self.seg_len(first);
            self.sb.on_retransmit(first, self.high_rxt);
        } else {
            self.tp.cwnd = self.tp.ssthresh + self.cfg.dupthresh as f64;
        }
    }

    /// The connection starts (the controller is told transmission begins).
    pub fn start(&mut self, now: Instant, out: &mut Outbox) {
        self.cc.cwnd_event(&mut self.tp, CwndEvent::TxStart);
        self.send_available(now, out);
    }

    /// Processes an ACK; sends retransmissions it triggers but not new data (call
    /// [`Self::send_available`] after any handover has adjusted windows). At the end, a coupled
    /// controller reports a changed window to its group and applies the answer, and an ACK of new
    /// data may release segments to joining connections, left in `g` for the TCP agent
    /// ([`CouplingGroups::take_releases`]). Returns whether the ACK acknowledged new data.
    pub fn on_ack(
        &mut self,
        ack: &Packet,
        now: Instant,
        out: &mut Outbox,
        g: &mut CouplingGroups,
    ) -> bool {
        let new_data = self.process_ack(ack, now, out);
        if self.cc.group().is_some() {
            let in_flight = self.pipe_pkts();
            self.cc.ack_done(&mut self.tp, new_data, in_flight, g);
        }
        new_data
    }

    fn process_ack(&mut self, ack: &Packet, now: Instant, out: &mut Outbox) -> bool {
        let mss = self.cfg.mss as u64;
        let sacked_before = if self.cfg.sack {
            let before = self.sb.sacked_within(self.snd_una, self.snd_max);
            self.sb
                .update(ack.ack.max(self.snd_una), &ack.sack[..ack.n_sack as usize]);
            before
        } else {
            0
        };
        if ack.ack > self.snd_una {
            let acked_bytes = ack.ack - self.snd_una;
            let acked = acked_bytes.div_ceil(mss) as u32;
            // What this ACK newly delivered (Linux's `acked_sacked`, which it gives `cong_avoid`):
            // the cumulative advance less what was SACKed before, plus new SACKs. A retransmission
            // that fills a hole below many SACKed segments delivers one segment, not all of them.
            let delivered_bytes = if self.cfg.sack {
                (acked_bytes + self.sb.sacked_within(ack.ack, self.snd_max))
                    .saturating_sub(sacked_before)
            } else {
                acked_bytes
            };
            let delivered = delivered_bytes.div_ceil(mss) as u32;
            self.snd_una = ack.ack;
            self.snd_nxt = self.snd_nxt.max(self.snd_una);
            self.high_rxt = self.high_rxt.max(self.snd_una);
            let rtt = (ack.has_ts_echo && now.as_nanos() >= ack.ts_echo_ns)
                .then(|| Duration::from_nanos(now.as_nanos() - ack.ts_echo_ns));
            if let Some(r) = rtt {
                self.rtt_sample(r);
            }
            self.tp.in_flight = self.flight_pkts();
            self.tp.snd_nxt = self.snd_max;
            let one_way_delay = (ack.owd_ns > 0).then(|| Duration::from_nanos(ack.owd_ns));
            let sample = AckSample {
                ack_seq: ack.ack,
                acked: delivered,
                rtt,
                one_way_delay,
                now,
            };
            self.cc.pkts_acked(&mut self.tp, &sample);
            match self.tp.ca_state {
                CaState::Recovery if self.past_recover() => {
                    // Full ACK. RFC 6582 step 3: deflate to min(ssthresh, FlightSize + SMSS); with
                    // SACK the window already is ssthresh.
                    if !self.cfg.sack {
                        self.tp.cwnd = self.tp.ssthresh.min(self.flight_pkts() + 1.0);
                    }
                    self.dupacks = 0;
                    self.sb.clear_retransmissions();
                    self.set_ca_state(CaState::Open);
                }
                CaState::Recovery if self.cfg.sack => {
                    // Partial ACK in SACK recovery: NextSeg does the rest.
                    self.rto_deadline = Some(now + self.rto);
                }
                CaState::Recovery => {
                    // Partial ACK: retransmit the next hole, deflate by the amount acked, add one.
                    self.emit(self.snd_una, now, out);
                    self.tp.cwnd = (self.tp.cwnd - acked as f64 + 1.0).max(1.0);
                    self.rto_deadline = Some(now + self.rto);
                }
                CaState::Loss | CaState::Open => {
                    if self.tp.ca_state == CaState::Loss && self.past_recover() {
                        self.set_ca_state(CaState::Open);
                    }
                    self.dupacks = 0;
                    self.cc.cong_avoid(&mut self.tp, &sample);
                }
            }
            if self.tp.ca_state != CaState::Recovery {
                self.restart_rto(now);
                // RFC 6675: IsLost(HighACK + 1) also starts recovery.
                if self.cfg.sack
                    && self.tp.ca_state == CaState::Open
                    && !self.sb.is_empty()
                    && self.past_recover()
                    && self.sb.is_lost(self.snd_una, mss, self.cfg.dupthresh)
                {
                    self.enter_recovery(now, out);
                }
            }
            if self.done() && self.finished_at.is_none() {
                self.finished_at = Some(now);
                self.rto_deadline = None;
            }
            true
        } else {
            if ack.ack == self.snd_una && self.snd_max > self.snd_una {
                self.dupacks += 1;
                if self.tp.ca_state == CaState::Recovery {
                    if !self.cfg.sack {
                        self.tp.cwnd += 1.0; // NewReno inflation: a segment has left the network
                    }
                } else if self.past_recover()
                    && (self.dupacks >= self.cfg.dupthresh
                        || self.cfg.sack && self.sb.is_lost(self.snd_una, mss, self.cfg.dupthresh))
                {
                    self.enter_recovery(now, out);
                }
            }
            false
        }
    }

    /// The retransmission timer fired at `now` (the engine checks the deadline). A coupled
    /// controller tells its group of the timeout.
    pub fn on_rto(&mut self, now: Instant, g: &mut CouplingGroups) {
        if self.snd_max == self.snd_una {
            self.rto_deadline = None;
            return;
        }
        self.stats.timeouts += 1;
        self.tp.in_flight = self.flight_pkts();
        self.tp.snd_nxt = self.snd_max;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.cc.cwnd_event(&mut self.tp, CwndEvent::Loss);
        self.tp.cwnd = 1.0;
        self.recover = Some(self.snd_max.saturating_sub(1));
        self.snd_nxt = self.snd_una; // go-back-N
        self.sb.clear_retransmissions();
        self.dupacks = 0;
        self.set_ca_state(CaState::Loss);
        if self.cc.group().is_some() {
            let in_flight = self.pipe_pkts();
            self.cc.timeout(&mut self.tp, in_flight, g);
        }
        self.rto = self.rto.saturating_mul(2).min(self.cfg.max_rto);
        self.rto_deadline = Some(now + self.rto);
    }
}

/// Receiver-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReceiverStats {
    pub data_pkts: u64,
    pub acks_sent: u64,
    pub duplicate_pkts: u64,
}

#[derive(Debug)]
pub struct TcpReceiver {
    cfg: TcpConfig,
    ep: Endpoints,
    rcv_nxt: u64,
    /// Out-of-order ranges received: start -> end, disjoint.
    ooo: BTreeMap<u64, u64>,
    /// The most recently received out-of-order range start (reported first, RFC 2018).
    unacked_segments: u32,
    delack_deadline: Option<Instant>,
    ts_recent: Option<u64>,
    /// RFC 7323 Last.ACK.sent: the cumulative ACK last sent.
    last_ack_sent: u64,
    /// Starts of out-of-order ranges, most recently received or reported first (RFC 2018).
    sack_recency: Vec<u64>,
    /// One-way delay of the latest data packet (arrival - its send timestamp).
    last_owd_ns: u64,
    pub stats: ReceiverStats,
}

impl TcpReceiver {
    pub fn new(cfg: TcpConfig, ep: Endpoints) -> Self {
        TcpReceiver {
            cfg,
            ep,
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
            unacked_segments: 0,
            delack_deadline: None,
            ts_recent: None,
            last_ack_sent: 0,
            sack_recency: Vec::new(),
            last_owd_ns: 0,
            stats: ReceiverStats::default(),
        }
    }

    /// In-order bytes delivered to the application.
    pub fn delivered_bytes(&self) -> u64 {
        self.rcv_nxt
    }

    pub fn delack_deadline(&self) -> Option<Instant> {
        self.delack_deadline
    }

    fn insert_ooo(&mut self, start: u64, end: u64) {
        insert_range(&mut self.ooo, start, end);
        self.sack_recency.retain(|&x| x != start);
        self.sack_recency.insert(0, start);
    }

    fn send_ack(&mut self, now: Instant, out: &mut Outbox) {
        // ACKs travel back: swap the endpoints.
        let mut p = Packet::new(
            self.ep.flow,
            PacketKind::TcpAck,
            self.ep.dst,
            self.ep.src,
            self.cfg.header_bytes,
        );
        p.ack = self.rcv_nxt;
        p.ts_ns = now.as_nanos();
        if let Some(ts) = self.ts_recent {
            p.ts_echo_ns = ts;
            p.has_ts_echo = true;
        }
        p.owd_ns = self.last_owd_ns;
        self.last_ack_sent = self.rcv_nxt;
        p.dscp = self.ep.dscp;
        p.hash = self.ep.hash;
        if self.cfg.sack && !self.ooo.is_empty() {
            // RFC 2018 sec. 4: the block holding the most recently received segment first, then the
            // most recently reported other blocks, so each block is repeated in several ACKs.
            let mut n = 0;
            let mut kept = Vec::with_capacity(self.sack_recency.len());
            for &x in &self.sack_recency {
                let Some((&a, &b)) = self.ooo.range(..=x).next_back() else {
                    continue;
                };
                if b <= x || kept.contains(&a) {
                    continue; // acknowledged cumulatively, or merged into a block already listed
                }
                kept.push(a);
                if n < MAX_SACK_BLOCKS {
                    p.sack[n] = SackBlock { start: a, end: b };
                    n += 1;
                }
            }
            // Blocks not yet reported in recent ACKs (more holes than blocks) take their turn.
            for (&a, &b) in &self.ooo {
                if n == MAX_SACK_BLOCKS {
                    break;
                }
                if !kept.contains(&a) {
                    p.sack[n] = SackBlock { start: a, end: b };
                    kept.push(a);
                    n += 1;
                }
            }
            // The blocks just reported move to the front of the recency list, in report order.
            kept.truncate(16);
            self.sack_recency = kept;
            p.n_sack = n as u8;
        }
        self.unacked_segments = 0;
        self.delack_deadline = None;
        self.stats.acks_sent += 1;
        out.packets.push(p);
    }

    pub fn on_data(&mut self, pkt: &Packet, now: Instant, out: &mut Outbox) {
        self.stats.data_pkts += 1;
        self.last_owd_ns = now.as_nanos().saturating_sub(pkt.ts_ns).max(1);
        let (start, end) = (pkt.seq, pkt.seq + pkt.len as u64);
        // RFC 7323 sec. 4.3: TS.Recent is updated only by a segment that starts at or below the
        // last ACK sent, so a delayed ACK echoes the earlier of the two segments it covers.
        if start <= self.last_ack_sent {
            self.ts_recent = Some(pkt.ts_ns);
        }
        if end <= self.rcv_nxt {
            self.stats.duplicate_pkts += 1;
            self.send_ack(now, out);
            return;
        }
        if start > self.rcv_nxt {
            self.insert_ooo(start, end);
            self.send_ack(now, out);
            return;
        }
        // In order (possibly overlapping what we have).
        self.rcv_nxt = end;
        let filled_hole = !self.ooo.is_empty();
        while let Some((&a, &b)) = self.ooo.first_key_value() {
            if a > self.rcv_nxt {
                break;
            }
            self.rcv_nxt = self.rcv_nxt.max(b);
            self.ooo.remove(&a);
        }
        if filled_hole || !self.cfg.delayed_ack {
            self.send_ack(now, out);
            return;
        }
        self.unacked_segments += 1;
        if self.unacked_segments >= 2 {
            self.send_ack(now, out);
        } else if self.delack_deadline.is_none() {
            self.delack_deadline = Some(now + self.cfg.delack_timeout);
        }
    }

    /// The delayed-ACK timer fired.
    pub fn on_delack_timer(&mut self, now: Instant, out: &mut Outbox) {
        if self.delack_deadline.is_some_and(|d| now >= d) {
            self.send_ack(now, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::NodeId;
    use crate::transport::cc::CcKind;
    use crate::transport::coupled::Seat;
    use coupling::tcp::CouplerKind;

    const MSS: u64 = 1448;

    fn ep(flow: u32) -> Endpoints {
        Endpoints {
            flow,
            src: NodeId(0),
            dst: NodeId(1),
            dscp: 0,
            hash: 0,
        }
    }

    /// A cumulative ACK of `segs` segments, SACKing the segment ranges in `sacked`.
    fn ack(segs: u64, sacked: &[(u64, u64)]) -> Packet {
        let mut p = Packet::new(0, PacketKind::TcpAck, NodeId(1), NodeId(0), 52);
        p.ack = segs * MSS;
        for (i, &(a, b)) in sacked.iter().enumerate() {
            p.sack[i] = SackBlock {
                start: a * MSS,
                end: b * MSS,
            };
        }
        p.n_sack = sacked.len() as u8;
        p
    }

    fn seqs(out: &mut Outbox) -> Vec<u64> {
        std::mem::take(&mut out.packets)
            .iter()
            .map(|p| p.seq / MSS)
            .collect()
    }

    /// RFC 6675 with SACK: the third duplicate ACK (SACKing three segments above the hole)
    /// enters recovery, retransmits the hole at once, sets ssthresh to half the flight (NewReno's
    /// FlightSize / 2) and cwnd to ssthresh; the full ACK ends it.
    #[test]
    fn three_duplicate_acks_enter_sack_recovery_and_a_full_ack_ends_it() {
        let mut g = CouplingGroups::default();
        let mut s = TcpSender::new(TcpConfig::default(), CcKind::default().build(), ep(0), None);
        let mut out = Outbox::default();
        let t = Instant::from_millis(100);
        s.start(Instant::ZERO, &mut out);
        assert_eq!(seqs(&mut out), (0..10).collect::<Vec<_>>());
        for k in 1..=2 {
            assert!(!s.on_ack(&ack(0, &[(1, 1 + k)]), t, &mut out, &mut g));
            s.send_available(t, &mut out);
            // Limited Transmit: one new segment per duplicate ACK.
            assert_eq!(seqs(&mut out), vec![9 + k]);
            assert!(!s.in_recovery());
        }
        assert!(!s.on_ack(&ack(0, &[(1, 4)]), t, &mut out, &mut g));
        assert!(s.in_recovery());
        assert_eq!(seqs(&mut out), vec![0], "the hole, at once");
        assert_eq!((s.tp.ssthresh, s.tp.cwnd), (6.0, 6.0), "12 in flight / 2");
        assert_eq!(s.stats.fast_recoveries, 1);
        assert!(s.on_ack(&ack(12, &[]), t, &mut out, &mut g));
        assert!(!s.in_recovery());
        assert_eq!(s.tp.ca_state, CaState::Open);
    }

    /// RFC 6298: the timer fires, the window falls to one segment, go-back-N resends from the
    /// first unacknowledged segment, the timer backs off (1 s initial RTO, doubled).
    #[test]
    fn a_timeout_resends_from_snd_una_with_one_segment_and_backs_off() {
        let mut g = CouplingGroups::default();
        let mut s = TcpSender::new(TcpConfig::default(), CcKind::default().build(), ep(0), None);
        let mut out = Outbox::default();
        s.start(Instant::ZERO, &mut out);
        assert_eq!(seqs(&mut out).len(), 10);
        let t = s.rto_deadline().unwrap();
        assert_eq!(t, Instant::from_secs(1));
        s.on_rto(t, &mut g);
        assert_eq!(
            (s.tp.cwnd, s.tp.ssthresh, s.tp.ca_state),
            (1.0, 5.0, CaState::Loss)
        );
        assert_eq!(s.stats.timeouts, 1);
        s.send_available(t, &mut out);
        assert_eq!(seqs(&mut out), vec![0]);
        assert_eq!(s.rto_deadline(), Some(t + Duration::from_secs(2)));
    }

    /// The coupling seam through the real sender: `coupled` registers in the controller's init
    /// (the answer is the window it starts with), every ACK ends with a report of a changed
    /// window, a timeout is reported, and `release` leaves.
    #[test]
    fn a_coupled_sender_reports_from_its_hooks() {
        let mut g = CouplingGroups::default();
        let gid = g.add_group(CouplerKind::ccc(false));
        let seat = Some(Seat {
            group: gid,
            priority: 1.0,
        });
        let mut a = TcpSender::coupled(
            TcpConfig::default(),
            Coupled::new(CcKind::default().build(), 0, seat),
            ep(0),
            None,
            &mut g,
        );
        let mut b = TcpSender::coupled(
            TcpConfig::default(),
            Coupled::new(CcKind::default().build(), 1, seat),
            ep(1),
            None,
            &mut g,
        );
        assert_eq!(g.coupler(gid).unwrap().len(), 2);
        assert_eq!(g.coupler(gid).unwrap().sum_cwnd(), 20.0);
        let mut out = Outbox::default();
        a.start(Instant::ZERO, &mut out);
        b.start(Instant::ZERO, &mut out);
        // Slow start: A's ACK of 2 segments grows its own window to 11 (NewReno: +1); reported at
        // the end of the ACK, the aggregate grows by it and A is told its half of 21.
        assert!(a.on_ack(&ack(2, &[]), Instant::from_millis(100), &mut out, &mut g));
        assert_eq!(g.coupler(gid).unwrap().sum_cwnd(), 21.0);
        assert_eq!(a.tp.cwnd, 10.5);
        // B times out: reported with the timeout flag; the loss event halves the aggregate.
        b.on_rto(Instant::from_secs(1), &mut g);
        let c = g.coupler(gid).unwrap();
        assert!(c.conn(coupling::FlowId(1)).unwrap().timed_out);
        assert_eq!(c.sum_cwnd(), 10.5);
        a.release(&mut g);
        assert_eq!(g.coupler(gid).unwrap().len(), 1);
        assert_eq!(g.errors.total(), 0);
    }
}
