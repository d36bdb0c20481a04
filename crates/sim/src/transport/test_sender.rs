//! The test sender every window controller's unit tests drive (as quiche's
//! `recovery::congestion::test_sender` serves its controllers): one connection's [`TcpCc`], a
//! clock, and the controller's hooks called in the order [`super::tcp::TcpSender`] calls them,
//! without packets or a network. A test states the path (RTT, ACK size, one-way delay) and the
//! events (ACKs, a loss found by duplicate ACKs, a timeout); the sender does the bookkeeping the
//! real one does around the hooks (in-flight count, recovery entry and exit, the loss window).

use super::cc::{AckSample, CaState, CongestionControl, CwndEvent, TcpCc};
use coupling::{Duration, Instant};

pub(crate) struct TestSender<C: CongestionControl> {
    pub cc: C,
    pub tp: TcpCc,
    pub now: Instant,
    /// The path's round-trip time: ACKs of a window arrive spread over one RTT.
    pub rtt: Duration,
    /// Segments each ACK acknowledges (2 with delayed ACKs).
    pub per_ack: u32,
    /// The one-way delay each ACK reports (LEDBAT's input), if any.
    pub owd: Option<Duration>,
}

impl<C: CongestionControl> TestSender<C> {
    /// A connection at `cwnd` and `ssthresh` on a path of `rtt`, at t = 1 s, after `init` and
    /// the first transmission (`TxStart`), one segment per ACK.
    pub fn new(cc: C, cwnd: f64, ssthresh: f64, rtt: Duration) -> Self {
        let mut s = TestSender {
            cc,
            tp: TcpCc {
                snd_nxt: 0,
                cwnd,
                ssthresh,
                ca_state: CaState::Open,
                in_flight: cwnd,
                srtt: Some(rtt),
                min_rtt: Some(rtt),
            },
            now: Instant::from_secs(1),
            rtt,
            per_ack: 1,
            owd: None,
        };
        s.cc.init(&mut s.tp);
        s.cc.cwnd_event(&mut s.tp, CwndEvent::TxStart);
        s
    }

    /// Changes state, telling the controller (as `TcpSender::set_ca_state`: only a change).
    pub fn set_state(&mut self, s: CaState) {
        if self.tp.ca_state != s {
            self.tp.ca_state = s;
            self.cc.set_state(&mut self.tp, s);
        }
    }

    /// The next ACK, `per_ack` segments, arriving `per_ack * RTT / cwnd` after the last (a full
    /// window per RTT, the window full when it left). Returns the time it advanced.
    pub fn ack(&mut self) -> Duration {
        let dt = self.per_ack as f64 * self.rtt.as_nanos() as f64 / self.tp.cwnd.max(1.0);
        let dt = Duration::from_nanos(dt.round() as u64);
        let in_flight = self.tp.cwnd;
        self.deliver(dt, in_flight);
        dt
    }

    /// An ACK `dt` after the last, with `in_flight` segments outstanding when the hooks run:
    /// `pkts_acked`, leaving Loss once the window is back at ssthresh, then `cong_avoid` (a test
    /// with its own path model computes `dt` and `in_flight` itself).
    pub fn deliver(&mut self, dt: Duration, in_flight: f64) {
        self.now = self.now + dt;
        self.tp.in_flight = in_flight;
        // The sender's smoothed RTT: the path's, which is fixed unless the test moves it.
        self.tp.srtt = Some(self.rtt);
        let ack = AckSample {
            ack_seq: 0,
            acked: self.per_ack,
            rtt: Some(self.rtt),
            one_way_delay: self.owd,
            now: self.now,
        };
        self.cc.pkts_acked(&mut self.tp, &ack);
        if self.tp.ca_state == CaState::Loss && self.tp.cwnd >= self.tp.ssthresh {
            self.set_state(CaState::Open);
        }
        self.cc.cong_avoid(&mut self.tp, &ack);
    }

    /// ACKs until `secs` have passed.
    pub fn run_for(&mut self, secs: f64) {
        let end = self.now + Duration::from_nanos((secs * 1e9) as u64);
        while self.now < end {
            self.ack();
        }
    }

    /// A loss found by duplicate ACKs, with a SACK recovery that ends at once: `ssthresh` with
    /// the window in flight, Recovery, cwnd = ssthresh, Open.
    pub fn loss(&mut self) {
        self.tp.in_flight = self.tp.cwnd;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.set_state(CaState::Recovery);
        self.tp.cwnd = self.tp.ssthresh;
        self.set_state(CaState::Open);
    }

    /// A retransmission timeout, in the order `TcpSender::on_rto` calls the hooks.
    pub fn rto(&mut self) {
        self.tp.in_flight = self.tp.cwnd;
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        self.cc.cwnd_event(&mut self.tp, CwndEvent::Loss);
        self.tp.cwnd = 1.0;
        self.set_state(CaState::Loss);
    }

    pub fn secs_since(&self, t: Instant) -> f64 {
        self.now.saturating_since(t).as_secs_f64()
    }
}
