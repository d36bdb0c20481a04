//! The interface of rate-based congestion controllers for media flows (RAP, TFRC, NADA, GCC):
//! a sender half that decides the sending rate and a receiver half that observes arriving packets
//! and produces feedback. The engine paces packets at [`RateSender::rate_bps`], carries each
//! packet's [`SendInfo`] to the receiver, and carries the receiver's [`Feedback`] back in a feedback
//! packet; neither half reads a clock or sends anything itself.
//!
//! Feedback content differs per controller, so it travels as `Box<dyn Any + Send>`: each
//! controller module defines its feedback type and downcasts it on arrival.
//!
//! Coupling (seed 003 sec. 6.3, RFC 8699 sec. 6): [`RateSender::cc_rate_bps`] is what the
//! controller computed (CC_R, given to the FSE's UPDATE) and [`RateSender::set_fse_rate_bps`] hands
//! back the FSE's rate, which replaces the controller's own state as its specification says (NADA:
//! r_ref; GCC: A_hat; TFRC and RAP: the sending rate).

use coupling::{Duration, Instant};
use std::any::Any;
use std::fmt::Debug;

/// What the sender stamps on each data packet, and the receiver sees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendInfo {
    pub seq: u64,
    pub size_bytes: u32,
    pub send_ts: Instant,
    /// The sender's current RTT estimate (TFRC puts it in every data packet, RFC 5348 sec. 3.2.1).
    pub rtt: Option<Duration>,
}

/// A feedback message from receiver to sender.
#[derive(Debug)]
pub struct Feedback {
    /// Bytes the feedback packet occupies on the wire.
    pub size_bytes: u32,
    pub payload: Box<dyn Any + Send>,
}

pub trait RateSender: Debug + Send {
    fn name(&self) -> &'static str;
    /// The rate the pacer sends at now (bit/s).
    fn rate_bps(&self) -> f64;
    /// The rate the controller itself computed (CC_R for the FSE).
    fn cc_rate_bps(&self) -> f64 {
        self.rate_bps()
    }
    /// The FSE's rate replaces the controller's (see module docs).
    fn set_fse_rate_bps(&mut self, rate_bps: f64, now: Instant);
    /// A data packet is being sent; returns what to stamp on it.
    fn on_send(&mut self, seq: u64, size_bytes: u32, now: Instant) -> SendInfo;
    /// Feedback from the receiver arrived.
    fn on_feedback(&mut self, fb: &Feedback, now: Instant);
    /// The next time [`Self::on_timer`] must run (RAP/TFRC timeouts, GCC's 25 ms update), if any.
    fn next_timer(&self) -> Option<Instant>;
    fn on_timer(&mut self, now: Instant);
    /// `limited = true`: the application has run out of data; `false`: it has data again. TFRC's
    /// application-limited rules depend on it.
    fn set_app_limited(&mut self, _limited: bool, _now: Instant) {}
    /// The controller's RTT estimate, if it keeps one (the conservative FSE's timer needs an RTT;
    /// the engine falls back to the path's propagation RTT).
    fn rtt(&self) -> Option<Duration> {
        None
    }
}

pub trait RateReceiver: Debug + Send {
    /// A data packet arrived; returns feedback to send now, if any (RAP acknowledges every packet).
    fn on_packet(&mut self, info: &SendInfo, now: Instant) -> Option<Feedback>;
    /// The next time [`Self::on_timer`] must run (NADA's 100 ms, GCC's 50 ms feedback), if any.
    fn next_timer(&self) -> Option<Instant>;
    fn on_timer(&mut self, now: Instant) -> Option<Feedback>;
}

/// A test harness for controllers: a fixed-delay, fixed-capacity bottleneck with a FIFO of
/// `queue_pkts`, and optional Bernoulli loss, stepping sender and receiver. Good enough to test a
/// controller's reaction to loss, delay and capacity without the full simulator.
pub mod harness {
    use super::*;
    use crate::rng::SimRng;
    use rand::RngExt;
    use std::collections::VecDeque;

    pub struct Path {
        pub capacity_bps: f64,
        pub one_way_delay: Duration,
        pub queue_pkts: usize,
        pub loss: f64,
    }

    /// Results of [`run`]: per-interval (time, sending rate, goodput, queueing delay).
    #[derive(Debug, Default)]
    pub struct Trace {
        pub t_s: Vec<f64>,
        pub rate_bps: Vec<f64>,
        pub goodput_bps: Vec<f64>,
        pub queue_delay_s: Vec<f64>,
        pub sent: u64,
        pub lost: u64,
    }

    /// Runs a sender/receiver pair over `path` for `duration`, with fixed-size packets, and
    /// samples every `interval`. Feedback travels back with `one_way_delay` and no loss.
    pub fn run(
        snd: &mut dyn RateSender,
        rcv: &mut dyn RateReceiver,
        path: &Path,
        pkt_bytes: u32,
        duration: Duration,
        interval: Duration,
        rng: &mut SimRng,
    ) -> Trace {
        let mut trace = Trace::default();
        let end = Instant::ZERO + duration;
        let mut now = Instant::ZERO;
        let mut next_send = Instant::ZERO;
        let mut link_free = Instant::ZERO;
        // Packets in the bottleneck: (departure time from the queue, info).
        let mut queue: VecDeque<(Instant, SendInfo)> = VecDeque::new();
        let mut feedback: VecDeque<(Instant, Feedback)> = VecDeque::new();
        let mut seq = 0u64;
        let mut next_sample = Instant::ZERO + interval;
        let mut bytes_in_interval = 0u64;
        let tick = Duration::from_micros(100);
        let tx = |bytes: u32| Duration::from_nanos((bytes as f64 * 8e9 / path.capacity_bps) as u64);
        while now < end {
            // Deliver packets whose departure + propagation has passed.
            while let Some(&(dep, info)) = queue.front() {
                if dep + path.one_way_delay > now {
                    break;
                }
                queue.pop_front();
                bytes_in_interval += info.size_bytes as u64;
                if let Some(fb) = rcv.on_packet(&info, dep + path.one_way_delay) {
                    feedback.push_back((dep + path.one_way_delay + path.one_way_delay, fb));
                }
            }
            if rcv.next_timer().is_some_and(|t| t <= now) {
                if let Some(fb) = rcv.on_timer(now) {
                    feedback.push_back((now + path.one_way_delay, fb));
                }
            }
            while feedback.front().is_some_and(|(t, _)| *t <= now) {
                let (_, fb) = feedback.pop_front().expect("checked");
                snd.on_feedback(&fb, now);
            }
            if snd.next_timer().is_some_and(|t| t <= now) {
                snd.on_timer(now);
            }
            // Send at the controller's rate.
            while next_send <= now {
                let rate = snd.rate_bps().max(1.0);
                let info = snd.on_send(seq, pkt_bytes, next_send);
                seq += 1;
                trace.sent += 1;
                let waiting = queue.iter().filter(|(d, _)| *d > next_send).count();
                if waiting >= path.queue_pkts
                    || (path.loss > 0.0 && rng.random::<f64>() < path.loss)
                {
                    trace.lost += 1;
                } else {
                    let start = link_free.max(next_send);
                    link_free = start + tx(pkt_bytes);
                    queue.push_back((link_free, info));
                }
                next_send =
                    next_send + Duration::from_nanos((pkt_bytes as f64 * 8e9 / rate) as u64);
            }
            if now >= next_sample {
                trace.t_s.push(now.as_secs_f64());
                trace.rate_bps.push(snd.rate_bps());
                trace
                    .goodput_bps
                    .push(bytes_in_interval as f64 * 8.0 / interval.as_secs_f64());
                trace
                    .queue_delay_s
                    .push(link_free.saturating_since(now).as_secs_f64());
                bytes_in_interval = 0;
                next_sample = next_sample + interval;
            }
            now = now + tick;
        }
        trace
    }
}
