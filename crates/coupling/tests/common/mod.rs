//! A small test harness that drives TCP couplers the way a Reno sender would, one RTT ("round")
//! at a time: slow start doubles cwnd, congestion avoidance adds one segment, a drop takes a round
//! in Fast Recovery and leaves with cwnd = ssthresh = cwnd / 2, a timeout restarts at one segment.
//! Every change is reported with UPDATE and the coupler's answer is applied, as the dissertation's
//! ns-2 and FreeBSD versions do (seed 003 sec. 9.2.2). `coupler = None` runs the same senders
//! uncoupled, for reference.
#![allow(dead_code)]

use coupling::tcp::{CouplerKind, TcpCoupler, TcpState, TcpUpdate};
use coupling::FlowId;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pending {
    None,
    Drop,
    Timeout,
}

#[derive(Clone, Debug)]
pub struct Sender {
    pub id: FlowId,
    pub cwnd: f64,
    pub ssthresh: f64,
    pub state: TcpState,
    pending: Pending,
}

#[derive(Debug)]
pub struct Harness {
    pub coupler: Option<Box<dyn TcpCoupler>>,
    pub senders: Vec<Sender>,
    /// A bottleneck holding this many packets (BDP + queue): when the aggregate exceeds it at the
    /// end of a round, one sender (round-robin) sees a drop. `None`: losses only when induced.
    pub capacity_pkts: Option<f64>,
    next_victim: usize,
}

impl Harness {
    pub fn new(kind: Option<CouplerKind>) -> Self {
        Harness {
            coupler: kind.map(|k| k.build()),
            senders: Vec::new(),
            capacity_pkts: None,
            next_victim: 0,
        }
    }

    pub fn join(&mut self, id: u64, priority: f64, iw: f64, ssthresh: f64) {
        let mut s = Sender {
            id: FlowId(id),
            cwnd: iw,
            ssthresh,
            state: TcpState::SlowStart,
            pending: Pending::None,
        };
        if let Some(c) = self.coupler.as_mut() {
            let r = c.register(s.id, priority, iw, ssthresh).unwrap();
            s.cwnd = r.cwnd_pkts;
            s.ssthresh = r.ssthresh_pkts;
        }
        self.senders.push(s);
    }

    pub fn leave(&mut self, id: u64) {
        self.senders.retain(|s| s.id != FlowId(id));
        if let Some(c) = self.coupler.as_mut() {
            c.leave(FlowId(id)).unwrap();
        }
    }

    pub fn drop_packet(&mut self, id: u64) {
        self.sender_mut(id).pending = Pending::Drop;
    }

    pub fn timeout(&mut self, id: u64) {
        self.sender_mut(id).pending = Pending::Timeout;
    }

    pub fn sender(&self, id: u64) -> &Sender {
        self.senders.iter().find(|s| s.id == FlowId(id)).unwrap()
    }

    fn sender_mut(&mut self, id: u64) -> &mut Sender {
        self.senders
            .iter_mut()
            .find(|s| s.id == FlowId(id))
            .unwrap()
    }

    /// The sum of the windows the senders use.
    pub fn aggregate(&self) -> f64 {
        self.senders.iter().map(|s| s.cwnd).sum()
    }

    /// One RTT: every sender, in join order, takes one step and reports it.
    pub fn round(&mut self) {
        for i in 0..self.senders.len() {
            let s = &mut self.senders[i];
            let update = match (s.pending, s.state) {
                (Pending::Drop, st) if st != TcpState::FastRecovery => {
                    s.pending = Pending::None;
                    s.ssthresh = (s.cwnd / 2.0).max(2.0);
                    s.state = TcpState::FastRecovery;
                    TcpUpdate::new(s.cwnd, s.ssthresh, s.state)
                }
                (Pending::Timeout, _) => {
                    s.pending = Pending::None;
                    s.ssthresh = (s.cwnd / 2.0).max(2.0);
                    s.cwnd = 1.0;
                    s.state = TcpState::SlowStart;
                    TcpUpdate::timeout(s.cwnd, s.ssthresh)
                }
                (_, TcpState::FastRecovery) => {
                    s.cwnd = s.ssthresh;
                    s.state = TcpState::CongestionAvoidance;
                    TcpUpdate::new(s.cwnd, s.ssthresh, s.state)
                }
                (_, TcpState::SlowStart) => {
                    // One RTT of ACKs doubles cwnd; crossing ssthresh it stops there, but an ACK
                    // always adds at least one whole segment.
                    if s.cwnd * 2.0 >= s.ssthresh {
                        s.cwnd = s.ssthresh.max(s.cwnd + 1.0);
                        s.state = TcpState::CongestionAvoidance;
                    } else {
                        s.cwnd = (s.cwnd * 2.0).max(1.0);
                    }
                    TcpUpdate::new(s.cwnd, s.ssthresh, s.state)
                }
                (_, TcpState::CongestionAvoidance) => {
                    s.cwnd += 1.0;
                    TcpUpdate::new(s.cwnd, s.ssthresh, s.state)
                }
            };
            let Some(c) = self.coupler.as_mut() else {
                continue;
            };
            if let Some(r) = c.update(s.id, update).unwrap() {
                assert!(r.cwnd_pkts.is_finite() && r.cwnd_pkts >= 0.0, "{r:?}");
                s.cwnd = r.cwnd_pkts;
                s.ssthresh = r.ssthresh_pkts;
                s.state = if s.cwnd < s.ssthresh {
                    TcpState::SlowStart
                } else {
                    TcpState::CongestionAvoidance
                };
            }
        }
        self.congestion();
    }

    /// Packets delivered in the last round: the aggregate, limited by the bottleneck.
    pub fn delivered(&self) -> f64 {
        self.capacity_pkts
            .map_or(self.aggregate(), |c| self.aggregate().min(c))
    }

    fn congestion(&mut self) {
        let Some(cap) = self.capacity_pkts else {
            return;
        };
        if self.aggregate() <= cap
            || self
                .senders
                .iter()
                .any(|s| s.state == TcpState::FastRecovery)
        {
            return;
        }
        let n = self.senders.len();
        for k in 0..n {
            let i = (self.next_victim + k) % n;
            if self.senders[i].pending == Pending::None {
                self.senders[i].pending = Pending::Drop;
                self.next_victim = i + 1;
                return;
            }
        }
    }

    pub fn rounds(&mut self, n: usize) {
        for _ in 0..n {
            self.round();
        }
    }
}
