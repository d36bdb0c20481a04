//! TCP Vegas as Linux implements it (`net/ipv4/tcp_vegas.c`; Brakmo and Peterson, "TCP Vegas: End
//! to end congestion avoidance on a global internet", IEEE JSAC 13(8), 1995).
//!
//! Once per RTT (when an ACK passes the `snd_nxt` noted at the start of the window) Vegas compares
//! the window it has with the window the base RTT would need: `diff = cwnd * (rtt - baseRTT) /
//! baseRTT`, the segments it keeps queued in the network, with `rtt` the smallest sample of the
//! last RTT. In congestion avoidance it adds a segment when `diff < alpha` (2), removes one when
//! `diff > beta` (4); in slow start it leaves slow start for the window the measured rate needs
//! when `diff > gamma` (1). With fewer than three RTT samples in the last RTT (delayed ACKs), and
//! outside the Open state, it behaves as Reno (`tcp_reno_cong_avoid`). Integer arithmetic as the
//! kernel's: RTTs in microseconds plus one, `diff` and the target window rounded down.

use super::cc::{slow_start, AckSample, CaState, CongestionControl, CwndEvent, TcpCc};

/// Linux's module parameters: bounds on the segments queued in the network, and the slow-start
/// exit threshold.
const ALPHA: u64 = 2;
const BETA: u64 = 4;
const GAMMA: u64 = 1;

#[derive(Clone, Debug)]
pub struct Vegas {
    /// Whether the once-per-RTT adjustment is on (off outside the Open state).
    doing_vegas_now: bool,
    /// `snd_nxt` at the start of the current window: an ACK beyond it ends the window.
    beg_snd_nxt: u64,
    /// RTT samples in the current window, and their minimum (us + 1).
    cnt_rtt: u32,
    min_rtt_us: u64,
    /// The smallest RTT seen (us + 1): the propagation delay.
    base_rtt_us: u64,
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas {
            doing_vegas_now: false,
            beg_snd_nxt: 0,
            cnt_rtt: 0,
            min_rtt_us: u64::from(u32::MAX >> 1),
            base_rtt_us: u64::from(u32::MAX >> 1),
        }
    }
}

impl Vegas {
    /// `vegas_enable`: sample from the next window on.
    fn enable(&mut self, tp: &TcpCc) {
        self.doing_vegas_now = true;
        self.beg_snd_nxt = tp.snd_nxt;
        self.cnt_rtt = 0;
        self.min_rtt_us = u64::from(u32::MAX >> 1);
    }

    /// `tcp_reno_cong_avoid` (as [`super::cc::NewRenoAbc`]).
    fn reno(tp: &mut TcpCc, acked: u32) {
        let mut acked = f64::from(acked);
        if tp.cwnd < tp.ssthresh {
            acked = slow_start(tp, acked);
            if acked <= 0.0 {
                return;
            }
        }
        tp.cwnd += acked / tp.cwnd;
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    /// `tcp_vegas_init`: forget the base RTT and start sampling.
    fn init(&mut self, tp: &mut TcpCc) {
        self.base_rtt_us = u64::from(u32::MAX >> 1);
        self.enable(tp);
    }

    /// `tcp_reno_ssthresh`: half the window, at least 2.
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (tp.cwnd / 2.0).floor().max(2.0)
    }

    /// `tcp_vegas_pkts_acked`: min-filter the RTT samples (over all time: the base RTT; over this
    /// window: the current RTT).
    fn pkts_acked(&mut self, _tp: &mut TcpCc, ack: &AckSample) {
        let Some(rtt) = ack.rtt else { return };
        let vrtt = rtt.as_nanos() / 1_000 + 1;
        self.base_rtt_us = self.base_rtt_us.min(vrtt);
        self.min_rtt_us = self.min_rtt_us.min(vrtt);
        self.cnt_rtt += 1;
    }

    /// `tcp_vegas_state`: Vegas only in the Open state.
    fn set_state(&mut self, tp: &mut TcpCc, new: CaState) {
        if new == CaState::Open {
            self.enable(tp);
        } else {
            self.doing_vegas_now = false;
        }
    }

    /// `tcp_vegas_cwnd_event`: restarting from idle starts over.
    fn cwnd_event(&mut self, tp: &mut TcpCc, ev: CwndEvent) {
        if ev == CwndEvent::TxStart {
            self.init(tp);
        }
    }

    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        if !self.doing_vegas_now {
            Vegas::reno(tp, ack.acked);
            return;
        }
        let in_slow_start = |tp: &TcpCc| tp.cwnd < tp.ssthresh;
        if ack.ack_seq > self.beg_snd_nxt {
            // The once-per-RTT adjustment.
            self.beg_snd_nxt = tp.snd_nxt;
            if self.cnt_rtt <= 2 {
                // Only delayed ACKs this RTT, most likely: behave as Reno.
                Vegas::reno(tp, ack.acked);
            } else {
                let (rtt, base) = (self.min_rtt_us, self.base_rtt_us);
                let cwnd = tp.cwnd.floor() as u64;
                let target = cwnd * base / rtt;
                let diff = cwnd * (rtt - base) / base;
                if diff > GAMMA && in_slow_start(tp) {
                    // Too fast: the window the measured rate needs, and congestion avoidance.
                    tp.cwnd = tp.cwnd.min((target + 1) as f64);
                    tp.ssthresh = tp.ssthresh.min(tp.cwnd);
                } else if in_slow_start(tp) {
                    slow_start(tp, f64::from(ack.acked));
                } else if diff > BETA {
                    tp.cwnd -= 1.0;
                    tp.ssthresh = tp.ssthresh.min(tp.cwnd);
                } else if diff < ALPHA {
                    tp.cwnd += 1.0;
                }
                tp.cwnd = tp.cwnd.max(2.0);
                // tcp_current_ssthresh in the Open state: at least 3/4 of the window.
                let c = tp.cwnd.floor() as u64;
                tp.ssthresh = tp.ssthresh.max(((c >> 1) + (c >> 2)) as f64);
            }
            self.cnt_rtt = 0;
            self.min_rtt_us = u64::from(u32::MAX >> 1);
        } else if in_slow_start(tp) {
            slow_start(tp, f64::from(ack.acked));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Sim;
    use crate::net::queue::QueueConfig;
    use crate::net::topology::{dumbbell, DumbbellConfig};
    use crate::net::Network;
    use crate::transport::cc::CcKind;
    use crate::TcpFlowConfig;
    use coupling::{Duration, Instant};

    /// Brakmo and Peterson's point: Vegas keeps between alpha and beta segments queued (here 2 to
    /// 4), so with a buffer far larger than that it fills the link with a queue of a few packets
    /// and no loss, where Reno fills the buffer until it drops (seed 003's dumbbell, 10 Mbit/s and
    /// 100 ms RTT, a 200-packet buffer). From 20 s on: Linux's Vegas grows every RTT in slow start
    /// ("just like Reno", tcp_vegas.c) and its once-per-RTT check sees the queue a round late, so
    /// from a cold start it overshoots the buffer once (36 drops here) and then comes down one
    /// segment per RTT to its target, by about 12 s.
    #[test]
    fn vegas_keeps_a_few_packets_queued_and_loses_none() {
        let run = |cc: &str| {
            let mut net = Network::default();
            let mut cfg = DumbbellConfig::dissertation(1);
            cfg.bottleneck.queue = QueueConfig::drop_tail_pkts(200);
            let d = dumbbell(&mut net, &cfg).unwrap();
            let mut sim = Sim::new(net, 1).unwrap();
            let mut f = TcpFlowConfig::bulk(d.senders[0], d.receivers[0]);
            f.cc = CcKind::named(cc);
            sim.add_tcp_flow(f).unwrap();
            sim.sample_every(Duration::from_millis(100), &[d.bottleneck])
                .unwrap();
            sim.run_until(Instant::from_secs(20));
            let (drops0, tx0) = {
                let l = &sim.results().links[d.bottleneck.0 as usize];
                (l.dropped_pkts, l.tx_pkts)
            };
            sim.run_until(Instant::from_secs(60));
            let r = sim.results();
            let l = &r.links[d.bottleneck.0 as usize];
            let q: Vec<f64> = r
                .queue_samples
                .iter()
                .filter(|s| s.t_ns >= 20_000_000_000)
                .map(|s| s.pkts as f64)
                .collect();
            let mean_q = q.iter().sum::<f64>() / q.len() as f64;
            // 1500-byte packets at 10 Mbit/s: 833.3 a second.
            let util = (l.tx_pkts - tx0) as f64 / (40.0 * 833.33);
            (mean_q, l.dropped_pkts - drops0, util)
        };
        let (vq, vdrops, vutil) = run("vegas");
        let (rq, rdrops, rutil) = run("newreno_abc");
        println!(
            "from 20 s to 60 s: vegas mean queue {vq:.2}, drops {vdrops}, utilization {vutil:.3}; \
             reno {rq:.1}, {rdrops}, {rutil:.3}"
        );
        assert_eq!(vdrops, 0);
        assert!(vutil > 0.95, "{vutil}");
        assert!((1.0..=6.0).contains(&vq), "queue {vq}");
        assert!(rdrops > 0 && rq > 5.0 * vq);
    }
}
