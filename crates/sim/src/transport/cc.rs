//! Congestion controllers behind a small table of hooks shaped like Linux `tcp_congestion_ops`
//! (ssthresh, cong_avoid, set_state, cwnd_event, pkts_acked, undo_cwnd, init), so a controller
//! here maps one-to-one onto an eBPF struct_ops program. Per-connection state a controller reads
//! and writes is [`TcpCc`]; measurements arrive as an [`AckSample`].

use coupling::{Duration, Instant};

/// Linux's congestion-avoidance states (`TCP_CA_*`), reduced to the ones the simulator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    Open,
    /// Fast recovery after duplicate ACKs.
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Events a controller may react to (Linux `tcp_ca_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwndEvent {
    /// First transmission after the connection was idle.
    TxStart,
    /// A retransmission timeout.
    Loss,
}

/// The connection state a controller sees (Linux `struct tcp_sock` fields it uses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpCc {
    /// Congestion window in segments (fractional, as ns-2 keeps it).
    pub cwnd: f64,
    pub ssthresh: f64,
    pub ca_state: CaState,
    /// Segments in flight when the hook is called.
    pub in_flight: f64,
    pub srtt: Option<Duration>,
    pub min_rtt: Option<Duration>,
}

/// One acknowledgement, as the controller's per-ACK hooks see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckSample {
    /// Segments newly acknowledged by this ACK.
    pub acked: u32,
    pub rtt: Option<Duration>,
    /// One-way delay of the data packet that triggered this ACK, measured by the receiver from the
    /// sender's timestamp (LEDBAT, RFC 6817 sec. 2.2).
    pub one_way_delay: Option<Duration>,
    pub now: Instant,
}

pub trait CongestionControl: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    fn init(&mut self, _tp: &mut TcpCc) {}
    /// The slow-start threshold after a loss (Linux `.ssthresh`).
    fn ssthresh(&mut self, tp: &TcpCc) -> f64;
    /// Window growth on an ACK outside recovery (Linux `.cong_avoid`).
    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample);
    fn set_state(&mut self, _tp: &mut TcpCc, _new: CaState) {}
    fn cwnd_event(&mut self, _tp: &mut TcpCc, _ev: CwndEvent) {}
    fn pkts_acked(&mut self, _tp: &mut TcpCc, _ack: &AckSample) {}
    /// The window to restore when a reduction turns out spurious (Linux `.undo_cwnd`).
    fn undo_cwnd(&mut self, tp: &TcpCc) -> f64 {
        tp.cwnd
    }
}

/// NewReno's window rules (RFC 5681): slow start adds one segment per ACK, congestion avoidance
/// 1/cwnd per ACK, with no byte counting, so with delayed ACKs (a = 2 segments per ACK) the window
/// grows by 1/a segment per RTT, exactly as seed 001 sec. 2.3 models it. Loss halves the flight.
#[derive(Clone, Debug, Default)]
pub struct NewReno;

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    /// RFC 5681 eq. (4): max(FlightSize / 2, 2 * SMSS).
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (tp.in_flight / 2.0).max(2.0)
    }

    fn cong_avoid(&mut self, tp: &mut TcpCc, _ack: &AckSample) {
        if tp.cwnd < tp.ssthresh {
            tp.cwnd += 1.0;
        } else {
            tp.cwnd += 1.0 / tp.cwnd;
        }
    }
}

/// The controllers the simulator can build by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcKind {
    NewReno,
    Cubic,
    /// LEDBAT (RFC 6817) with its default parameters.
    Ledbat,
}

impl CcKind {
    pub fn build(self) -> Box<dyn CongestionControl> {
        match self {
            CcKind::NewReno => Box::new(NewReno),
            CcKind::Cubic => Box::new(crate::transport::cubic::Cubic::default()),
            CcKind::Ledbat => Box::new(crate::transport::ledbat::Ledbat::default()),
        }
    }

    pub fn from_name(name: &str) -> Option<CcKind> {
        match name {
            "newreno" | "reno" => Some(CcKind::NewReno),
            "cubic" => Some(CcKind::Cubic),
            "ledbat" => Some(CcKind::Ledbat),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(cwnd: f64, ssthresh: f64) -> TcpCc {
        TcpCc {
            cwnd,
            ssthresh,
            ca_state: CaState::Open,
            in_flight: cwnd,
            srtt: None,
            min_rtt: None,
        }
    }

    #[test]
    fn newreno_grows_one_per_ack_in_slow_start_and_one_per_window_in_ca() {
        let ack = AckSample {
            acked: 2,
            rtt: None,
            one_way_delay: None,
            now: Instant::ZERO,
        };
        let mut cc = NewReno;
        let mut t = tp(10.0, 100.0);
        cc.cong_avoid(&mut t, &ack);
        assert_eq!(
            t.cwnd, 11.0,
            "one segment per ACK, not per acked segment (no ABC)"
        );
        let mut t = tp(10.0, 5.0);
        for _ in 0..10 {
            cc.cong_avoid(&mut t, &ack);
        }
        assert!((t.cwnd - 11.0).abs() < 0.05, "{}", t.cwnd);
    }

    #[test]
    fn newreno_halves_the_flight() {
        let mut cc = NewReno;
        assert_eq!(cc.ssthresh(&tp(40.0, 100.0)), 20.0);
        assert_eq!(cc.ssthresh(&tp(3.0, 100.0)), 2.0);
    }
}
