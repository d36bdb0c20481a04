//! TCP flows coupled through an FSE group (seed 003 sec. 6.3.1, Fig. 6.2 and 6.3): "two TCP flows
//! are coupled using a passive FSE in ns-2 simulations [...]. Because TCP updates its rate as a
//! function of the RTT, large RTT differences also delay the feedback from the FSE."
//!
//! A TCP flow's rate is its window over its RTT. The flow takes part in the FSE as a rate-based
//! flow does (Fig. 6.2: register, UPDATE with CC_R, apply FSE_R, leave), with the conversions
//! CC_R = cwnd * MSS / SRTT (cwnd at most the receive window: what the flow can send) and
//! cwnd = FSE_R * SRTT / MSS:
//!
//! | when | what |
//! |---|---|
//! | its first ACK with an RTT sample | registers with CC_R of its window over that RTT (the initial window goes out as an uncoupled flow's would) |
//! | once per round trip: the first ACK beyond the highest byte sent at the previous UPDATE, in the Open state | UPDATE(CC_R); the answer FSE_R, when it arrives, sets cwnd = max(1, FSE_R * SRTT / MSS); ssthresh stays |
//! | the transfer is acknowledged | leaves the group |
//!
//! When a flow updates. Fig. 6.2(b) has flows synchronise "whenever they change their sending
//! rate or congestion window", and sec. 6.3.1 says TCP "updates its rate as a function of the
//! RTT" (and l. 736-739: "most congestion control algorithms operate on RTT timescales"). A TCP
//! sender's rate, cwnd / RTT, changes once per round trip: congestion avoidance adds one segment
//! per window of ACKs and slow start doubles the window per round; the fraction of a segment a
//! single ACK adds (NewReno's 1/cwnd) is bookkeeping towards that step. Updating on every ACK
//! would have each flow update at its packet rate, which the FSE makes equal, and take away the
//! dependence on the RTT that sec. 6.3.1 names as the cause of Fig. 6.3. So a flow updates once
//! per window of ACKs, with the round-trip marker TCP Vegas uses for its once-per-RTT decision
//! (`transport::vegas`, Linux `beg_snd_nxt`): the first ACK beyond the highest byte sent at the
//! previous UPDATE. The rounds are the flow's own RTT, queueing included, so a long-RTT flow
//! updates (and learns the FSE's answer) less often.
//!
//! Why not register at the start. A rate needs an RTT, and before the first sample the only one
//! is the path's propagation delay, without serialisation or queueing: an initial window over it
//! can be many times the bottleneck (10 segments over a 0.4 ms path: 290 Mbit/s). Added to S_CR,
//! that rate went to the flows already running as their share, which they turned into windows
//! with their own, queue-inflated RTTs: a 17-segment window jumped to 38 on a join in Fig. 6.3's
//! setting, to thousands on a short path (issue 18's review). Every algorithm answers a
//! registration with the rate it was given, so registering later changes nothing for the joiner.
//!
//! Loss recovery. The window is the controller's only in the Open state (in fast recovery and
//! after a timeout the sender's recovery rules set it). A flow does not update in recovery, and
//! a round that ends there ends at the ACK that completes the recovery: the reduced window is
//! reported once it is the controller's again. An answer that reaches a flow in recovery (after
//! a signalling delay, or an active FSE's answer to another flow's UPDATE) is dropped: the
//! flow's own reduction is newer, and its next UPDATE reconciles the FSE.
//!
//! Which flows are answered is the group's algorithm's: the passive ones (seed 003 Algorithm 3,
//! RFC 8699 App. C) answer the updating flow only, the active ones (Algorithms 1-2) every flow of
//! the group, as for media flows; each message takes the coupling's signalling delay (Fig. 6.11).

use super::{Flow, TcpFlows};
use crate::engine::coupling::{fse_replies, FseMsg, FseSignalling, Members, TcpFseMsg};
use crate::engine::sched::Event;
use crate::engine::{Ctx, FseCoupling};
use crate::error::SimError;
use crate::transport::cc::CaState;
use crate::transport::tcp::MAX_INITIAL_CWND_PKTS;
use coupling::fse::FseUpdate;
use coupling::units::MAX_RATE_BPS;
use coupling::{Duration, FlowId};

/// A TCP flow's place in an FSE group.
#[derive(Debug)]
pub(super) struct FseSeat {
    c: FseCoupling,
    /// Registered with the group and not left.
    in_fse: bool,
    /// Registered once (a flow that left does not register again).
    registered: bool,
    /// The round-trip marker: the highest byte sent at the last UPDATE (0 before the first).
    round_end: u64,
    /// The path's RTT without queueing: the RTT before the flow has a sample.
    base_rtt: Duration,
}

/// The smallest RTT a rate is computed with (a path of zero-delay links).
const MIN_RTT: Duration = Duration::from_micros(1);

/// CC_R = cwnd * MSS / RTT, in bit/s.
fn window_rate(cwnd_pkts: f64, mss: u32, rtt: Duration) -> f64 {
    (cwnd_pkts * f64::from(mss) * 8.0 / rtt.max(MIN_RTT).as_secs_f64()).clamp(0.0, MAX_RATE_BPS)
}

/// cwnd = FSE_R * RTT / MSS, in segments: at least one; at most what a flow may send at once
/// ([`MAX_INITIAL_CWND_PKTS`]: every packet in flight is simulated).
fn rate_window(rate_bps: f64, mss: u32, rtt: Duration) -> f64 {
    (rate_bps * rtt.max(MIN_RTT).as_secs_f64() / (8.0 * f64::from(mss)))
        .clamp(1.0, MAX_INITIAL_CWND_PKTS)
}

impl TcpFlows {
    /// Couples a TCP flow that has not started yet to FSE group `c.group`; it registers when it
    /// starts. Errors leave everything unchanged: an unknown flow, one that has started, one
    /// already coupled (to an FSE group or a TCP coupler group), an unknown group, a group of
    /// media flows, a bad priority or delay range.
    pub fn couple_fse(
        &mut self,
        flow: u32,
        c: FseCoupling,
        fse: &mut FseSignalling,
    ) -> Result<(), SimError> {
        let name = format!("flow[{flow}].fse");
        let f = self.flows.get(flow as usize).ok_or(SimError::UnknownFlow {
            name: name.clone(),
            flow,
        })?;
        if !matches!(f.state, super::FlowState::Pending) {
            return Err(SimError::invalid(
                name,
                flow,
                "a flow that has not started yet",
            ));
        }
        if f.coupling.is_some() || self.fse.contains_key(&flow) {
            return Err(SimError::invalid(
                name,
                flow,
                "a flow not coupled yet (a TCP flow is in one group: a TCP coupler's or an FSE's)",
            ));
        }
        fse.check(&name, &c, Members::Tcp)?;
        fse.claim(c.group, Members::Tcp);
        self.fse.insert(
            flow,
            FseSeat {
                c,
                in_fse: false,
                registered: false,
                round_end: 0,
                base_rtt: Duration::ZERO,
            },
        );
        Ok(())
    }

    /// Whether `flow` is coupled to an FSE group (`None`: no such flow).
    pub fn is_fse_coupled(&self, flow: u32) -> Option<bool> {
        ((flow as usize) < self.flows.len()).then(|| self.fse.contains_key(&flow))
    }

    /// A starting flow notes its path's RTT without queueing (the RTT of an UPDATE before the
    /// flow has a sample: after a timeout cleared it). It registers at its first RTT sample
    /// ([`Self::fse_round`]).
    pub(super) fn fse_start(&mut self, f: u32, cx: &mut Ctx) {
        let Some(seat) = self.fse.get_mut(&f) else {
            return;
        };
        let fl = &mut self.flows[f as usize];
        let net = &mut cx.fabric.net;
        let mut rtt = Duration::ZERO;
        for (a, b) in [(fl.src, fl.dst), (fl.dst, fl.src)] {
            // Both paths were found when the flow was added.
            for l in net.path(a, b, fl.hash).unwrap_or_default() {
                rtt = rtt + net.links[l.0 as usize].delay;
            }
        }
        seat.base_rtt = rtt.max(MIN_RTT);
    }

    /// Registers `f` with its group at CC_R of its window over its first RTT sample, and applies
    /// the answer (every algorithm answers the rate it was given; applied in case one does not).
    fn fse_register(&mut self, f: u32, cx: &mut Ctx, fse: &mut FseSignalling) {
        let Some(seat) = self.fse.get_mut(&f) else {
            return;
        };
        let c = self.flows[f as usize].conn();
        let Some(rtt) = c.snd.srtt() else { return };
        seat.registered = true;
        seat.round_end = c.snd.highest_sent();
        let rtt = rtt.max(MIN_RTT);
        let mss = c.snd.cfg.mss;
        let rate = window_rate(c.snd.tp.cwnd.min(c.snd.cfg.rwnd_pkts), mss, rtt);
        match fse.groups[seat.c.group].register(FlowId(u64::from(f)), seat.c.priority, rate, cx.now)
        {
            Ok(r) => {
                seat.in_fse = true;
                if r != rate {
                    c.snd.set_cwnd(rate_window(r, mss, rtt));
                }
            }
            Err(_) => fse.errors += 1, // counted; it runs uncoupled
        }
    }

    /// At the end of an ACK's processing (before the sender sends what it allows): UPDATE once
    /// per round trip (see the module docs).
    pub(super) fn fse_round(&mut self, f: u32, cx: &mut Ctx, fse: &mut FseSignalling) {
        let Some(seat) = self.fse.get_mut(&f) else {
            return;
        };
        let c = self.flows[f as usize].conn();
        if !seat.in_fse && !seat.registered && c.snd.finished_at.is_none() && c.snd.srtt().is_some()
        {
            self.fse_register(f, cx, fse);
            return;
        }
        if !seat.in_fse
            || c.snd.finished_at.is_some()
            || c.snd.tp.ca_state != CaState::Open
            || c.snd.acked_bytes() <= seat.round_end
        {
            return;
        }
        seat.round_end = c.snd.highest_sent();
        let rtt = c.snd.srtt().unwrap_or(seat.base_rtt).max(MIN_RTT);
        let msg = TcpFseMsg::Update {
            flow: f,
            cc_rate_bps: window_rate(c.snd.tp.cwnd.min(c.snd.cfg.rwnd_pkts), c.snd.cfg.mss, rtt),
            rtt,
        };
        let d = seat.c.draw_delay(cx.rng);
        self.fse_post(msg, d, cx, fse);
    }

    /// A finished transfer leaves its group (once); an active FSE hands its share to the others
    /// at once and tells them.
    pub(super) fn fse_leave(&mut self, f: u32, cx: &mut Ctx, fse: &mut FseSignalling) {
        let Some(seat) = self.fse.get_mut(&f).filter(|s| s.in_fse) else {
            return;
        };
        seat.in_fse = false;
        let group = seat.c.group;
        let Ok(out) = fse.groups[group].leave(FlowId(u64::from(f))) else {
            fse.errors += 1;
            return;
        };
        let replies: Vec<(u32, f64)> = out.iter().map(|a| (a.flow.0 as u32, a.rate_bps)).collect();
        self.fse_answer(&replies, cx, fse);
    }

    /// Posts FSE_R to each flow, each after its own signalling delay.
    fn fse_answer(&mut self, replies: &[(u32, f64)], cx: &mut Ctx, fse: &mut FseSignalling) {
        for &(f, rate_bps) in replies {
            let d = self.fse[&f].c.draw_delay(cx.rng);
            self.fse_post(TcpFseMsg::Apply { flow: f, rate_bps }, d, cx, fse);
        }
    }

    fn fse_post(&mut self, msg: TcpFseMsg, delay: Duration, cx: &mut Ctx, fse: &mut FseSignalling) {
        if delay == Duration::ZERO {
            self.fse_deliver(msg, cx, fse);
            return;
        }
        let slot = fse.hold(FseMsg::Tcp(msg));
        cx.schedule(cx.now + delay, Event::Fse(slot));
    }

    /// A message reaches the FSE (UPDATE, a priority change) or its flow (FSE_R to apply).
    pub fn fse_deliver(&mut self, msg: TcpFseMsg, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        match msg {
            TcpFseMsg::Update {
                flow,
                cc_rate_bps,
                rtt,
            } => {
                let seat = &self.fse[&flow];
                if !seat.in_fse {
                    return; // left while the message travelled
                }
                let u = FseUpdate {
                    cc_rate_bps,
                    // TCP flows are greedy while they have data (RFC 8699 App. C: "infinity" for
                    // a bulk transfer).
                    desired_rate_bps: f64::INFINITY,
                    rtt: Some(rtt),
                    now,
                };
                let Ok(out) = fse.groups[seat.c.group].update(FlowId(u64::from(flow)), u) else {
                    fse.errors += 1;
                    return;
                };
                let replies = fse_replies(flow, &out);
                self.fse_answer(&replies, cx, fse);
            }
            TcpFseMsg::Apply { flow, rate_bps } => self.fse_apply(flow, rate_bps, cx),
            TcpFseMsg::SetPriority { flow, priority } => {
                let Some(seat) = self.fse.get_mut(&flow) else {
                    return;
                };
                seat.c.priority = priority;
                if !seat.in_fse {
                    return; // not started (it registers with the new priority), or finished
                }
                let group = seat.c.group;
                let Ok(out) =
                    fse.groups[group].set_priority(FlowId(u64::from(flow)), priority, now)
                else {
                    fse.errors += 1;
                    return;
                };
                // Active algorithms answer with every flow's new rate; passive ones apply the
                // priority at the flow's next UPDATE.
                let replies: Vec<(u32, f64)> =
                    out.iter().map(|a| (a.flow.0 as u32, a.rate_bps)).collect();
                self.fse_answer(&replies, cx, fse);
            }
        }
    }

    /// FSE_R reaches `flow`: cwnd = FSE_R * SRTT / MSS, in the Open state; it sends what the new
    /// window allows.
    fn fse_apply(&mut self, flow: u32, rate_bps: f64, cx: &mut Ctx) {
        let seat = &self.fse[&flow];
        if !seat.in_fse {
            return;
        }
        let base_rtt = seat.base_rtt;
        let fl: &mut Flow = &mut self.flows[flow as usize];
        let Some(c) = fl.live() else { return };
        if c.snd.tp.ca_state != CaState::Open || c.snd.finished_at.is_some() {
            return;
        }
        let rtt = c.snd.srtt().unwrap_or(base_rtt);
        let cwnd = rate_window(rate_bps, c.snd.cfg.mss, rtt);
        // The answer to a flow's own rate is its own window back, up to rounding: keep the window
        // (a window of 9.999999 segments sends 9).
        if (cwnd - c.snd.tp.cwnd).abs() > 1e-9 * c.snd.tp.cwnd {
            c.snd.set_cwnd(cwnd);
        }
        c.snd.send_available(cx.now, cx.out);
        self.arm_rto(flow, cx);
        cx.flush();
    }
}
