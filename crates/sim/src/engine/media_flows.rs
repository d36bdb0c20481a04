//! Rate-controlled media flows (RAP, TFRC, NADA, GCC) carrying a media source, paced by their
//! controller's rate, with the receiver's feedback carried back as packets; and their coupling
//! through an FSE group (seed 003 ch. 6, RFC 8699), whose messages travel with a delay.

use super::coupling::{fse_replies, FseMsg, FseSignalling, Members};
use super::fabric::Fabric;
use super::sched::{Event, Scheduler};
use super::{check_dscp, check_endpoints, five_tuple_hash, Ctx, Slab};
use crate::error::SimError;
use crate::media::{MediaSource, MediaState};
use crate::net::NodeId;
use crate::packet::{Packet, PacketKind};
use crate::stats::{MediaSample, MediaSummary};
use crate::transport::rate::{Feedback, RateReceiver, RateSender, SendInfo};
use coupling::fse::FseUpdate;
use coupling::{Duration, FlowId, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MediaEvent {
    Start(u32),
    /// The pacer: (flow, generation; stale generations are ignored).
    Send(u32, u32),
    SndTimer(u32),
    RcvTimer(u32),
}

/// A rate-controlled media flow (RAP, TFRC, NADA, GCC) carrying a media source.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaFlowConfig {
    pub src: NodeId,
    pub dst: NodeId,
    pub start: Instant,
    pub packet_bytes: u32,
    pub source: MediaSource,
    /// Intervals without data (media pause and resume).
    pub pauses: Vec<(Instant, Instant)>,
    pub dscp: u8,
}

/// How a media flow is coupled: its FSE group, priority, and the delay of its signalling with the
/// FSE (seed 003 Fig. 6.11), fixed or uniform in `[min, max]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FseCoupling {
    pub group: usize,
    pub priority: f64,
    pub delay_min: Duration,
    pub delay_max: Duration,
}

#[derive(Debug)]
struct MediaFlow {
    cfg: MediaFlowConfig,
    /// Its Start event ran (a flow may join a measured group only before).
    started: bool,
    snd: Box<dyn RateSender>,
    rcv: Box<dyn RateReceiver>,
    source: MediaState,
    hash: u32,
    base_rtt: Duration,
    seq: u64,
    send_gen: u32,
    /// When the last packet left and its size: the pacer's reference.
    last_send: Option<(Instant, u32)>,
    idle: bool,
    snd_timer: Option<Instant>,
    rcv_timer: Option<Instant>,
    fse: Option<FseCoupling>,
    in_fse: bool,
    sent_pkts: u64,
    sent_bytes: u64,
    received_pkts: u64,
    received_bytes: u64,
    owd_sum_s: f64,
}

#[derive(Debug, Default)]
pub(crate) struct MediaFlows {
    flows: Vec<MediaFlow>,
    /// Feedback payloads in flight (their packets carry the slot in `seq`).
    feedback: Slab<Feedback>,
}

impl MediaFlows {
    pub fn add(
        &mut self,
        cfg: MediaFlowConfig,
        snd: Box<dyn RateSender>,
        rcv: Box<dyn RateReceiver>,
        fabric: &mut Fabric,
        sched: &mut Scheduler,
    ) -> Result<u32, SimError> {
        let i = self.flows.len() as u32;
        let name = format!("media_flow[{i}]");
        check_endpoints(&fabric.net, &name, cfg.src, cfg.dst)?;
        check_dscp(&name, cfg.dscp)?;
        if cfg.packet_bytes < 40 {
            return Err(SimError::invalid(
                format!("{name}.packet_bytes"),
                cfg.packet_bytes,
                "a packet of at least 40 bytes",
            ));
        }
        let hash = five_tuple_hash(cfg.src, cfg.dst, 17, 30_000 + (i % 30_000) as u16, 5006);
        let fwd = fabric.net.path(cfg.src, cfg.dst, hash)?;
        let back = fabric.net.path(cfg.dst, cfg.src, hash)?;
        let base_rtt = fwd.iter().chain(back.iter()).fold(Duration::ZERO, |a, l| {
            a + fabric.net.links[l.0 as usize].delay
        });
        let source = MediaState::new(
            cfg.source.clone(),
            cfg.start,
            cfg.pauses.clone(),
            &format!("{name}.source"),
        )?;
        sched.schedule(cfg.start, Event::Media(MediaEvent::Start(i)));
        self.flows.push(MediaFlow {
            cfg,
            started: false,
            snd,
            rcv,
            source,
            hash,
            base_rtt,
            seq: 0,
            send_gen: 0,
            last_send: None,
            idle: false,
            snd_timer: None,
            rcv_timer: None,
            fse: None,
            in_fse: false,
            sent_pkts: 0,
            sent_bytes: 0,
            received_pkts: 0,
            received_bytes: 0,
            owd_sum_s: 0.0,
        });
        Ok(i)
    }

    /// Couples a media flow to an FSE group (once); it registers when it starts.
    pub fn couple(
        &mut self,
        flow: u32,
        c: FseCoupling,
        fse: &mut FseSignalling,
    ) -> Result<(), SimError> {
        let name = format!("media_flow[{flow}].fse");
        fse.check(&name, &c, Members::Media)?;
        let m = self
            .flows
            .get_mut(flow as usize)
            .ok_or(SimError::UnknownFlow {
                name: name.clone(),
                flow,
            })?;
        // Coupled twice, it would leave the first group claimed for media flows with none in
        // it, and send its messages to a group it never registered with.
        if m.fse.is_some() {
            return Err(SimError::invalid(
                name,
                flow,
                "a media flow not coupled yet (one FSE group per flow)",
            ));
        }
        m.fse = Some(c);
        fse.claim(c.group, Members::Media);
        Ok(())
    }

    /// Whether media flow `flow` has started (its Start event ran; None: no such flow).
    pub fn started(&self, flow: u32) -> Option<bool> {
        self.flows.get(flow as usize).map(|m| m.started)
    }

    /// Checks that `flow` is a media flow coupled to an FSE group (for a priority change).
    pub fn check_coupled(&self, name: &str, flow: u32) -> Result<(), SimError> {
        let m = self.flows.get(flow as usize).ok_or(SimError::UnknownFlow {
            name: name.to_string(),
            flow,
        })?;
        if m.fse.is_none() {
            return Err(SimError::invalid(
                name,
                flow,
                "a media flow coupled to an FSE group",
            ));
        }
        Ok(())
    }

    pub fn handle(&mut self, ev: MediaEvent, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        match ev {
            MediaEvent::Start(i) => {
                self.flows[i as usize].started = true;
                self.fse_sync(i, cx, fse);
                self.pace(i, cx);
            }
            MediaEvent::Send(i, g) => self.send(i, g, cx, fse),
            MediaEvent::SndTimer(i) => {
                let m = &mut self.flows[i as usize];
                // An event for a timer since moved earlier (or already served) is stale: serving
                // it re-armed the timer, and every superseded event started one more
                // self-repeating chain (RAP's timeout moves earlier as SRTT falls: 59 s of CPU
                // for 120 s of five flows; issue 18, Figs. 5.1-5.6).
                if m.snd_timer.is_none_or(|t| t > now) {
                    return;
                }
                m.snd_timer = None;
                if m.snd.next_timer().is_some_and(|t| t <= now) {
                    let before = m.snd.rate_bps();
                    m.snd.on_timer(now);
                    let changed = m.snd.rate_bps() != before;
                    self.fse_sync(i, cx, fse);
                    if changed {
                        self.pace(i, cx);
                    }
                }
                self.arm_timers(i, cx);
            }
            MediaEvent::RcvTimer(i) => {
                let m = &mut self.flows[i as usize];
                if m.rcv_timer.is_none_or(|t| t > now) {
                    return; // stale, as above
                }
                m.rcv_timer = None;
                if m.rcv.next_timer().is_some_and(|t| t <= now) {
                    if let Some(fb) = m.rcv.on_timer(now) {
                        self.send_feedback(i, fb, cx);
                    }
                }
                self.arm_timers(i, cx);
            }
        }
    }

    /// The signalling delay of one message of `flow` (drawn if it is a range).
    fn fse_delay(&self, flow: u32, cx: &mut Ctx) -> Duration {
        let Some(c) = self.flows[flow as usize].fse else {
            return Duration::ZERO;
        };
        c.draw_delay(cx.rng)
    }

    fn post_fse(&mut self, msg: FseMsg, delay: Duration, cx: &mut Ctx, fse: &mut FseSignalling) {
        if delay == Duration::ZERO {
            self.fse_deliver(msg, cx, fse);
            return;
        }
        let slot = fse.hold(msg);
        cx.schedule(cx.now + delay, Event::Fse(slot));
    }

    /// An FSE message reaches the FSE (UPDATE) or its flow (a rate to apply).
    pub fn fse_deliver(&mut self, msg: FseMsg, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        match msg {
            FseMsg::Update {
                flow,
                cc_rate_bps,
                desired_rate_bps,
                rtt,
            } => {
                let Some(c) = self.flows[flow as usize].fse else {
                    return;
                };
                if !self.flows[flow as usize].in_fse {
                    return; // left while the message travelled
                }
                let u = FseUpdate {
                    cc_rate_bps,
                    desired_rate_bps,
                    rtt: Some(rtt),
                    now,
                };
                let Ok(out) = fse.groups[c.group].update(FlowId(flow as u64), u) else {
                    fse.errors += 1;
                    return;
                };
                let replies = fse_replies(flow, &out);
                for (f, r) in replies {
                    let d = self.fse_delay(f, cx);
                    self.post_fse(
                        FseMsg::Apply {
                            flow: f,
                            rate_bps: r,
                        },
                        d,
                        cx,
                        fse,
                    );
                }
            }
            FseMsg::Apply { flow, rate_bps } => {
                let m = &mut self.flows[flow as usize];
                if m.in_fse {
                    m.snd.set_fse_rate_bps(rate_bps, now);
                    self.pace(flow, cx);
                }
            }
            FseMsg::SetPriority { flow, priority } => {
                let m = &mut self.flows[flow as usize];
                let Some(c) = m.fse.as_mut() else { return };
                // Kept for a later registration (after a pause) too.
                c.priority = priority;
                let group = c.group;
                if !m.in_fse {
                    return;
                }
                let Ok(out) = fse.groups[group].set_priority(FlowId(flow as u64), priority, now)
                else {
                    fse.errors += 1;
                    return;
                };
                // Active algorithms answer with every flow's new rate; passive ones apply the
                // priority at the flow's next UPDATE.
                let replies: Vec<(u32, f64)> =
                    out.iter().map(|a| (a.flow.0 as u32, a.rate_bps)).collect();
                for (f, r) in replies {
                    let d = self.fse_delay(f, cx);
                    self.post_fse(
                        FseMsg::Apply {
                            flow: f,
                            rate_bps: r,
                        },
                        d,
                        cx,
                        fse,
                    );
                }
            }
            FseMsg::Tcp(_) => {
                unreachable!("the engine gives TCP flows' FSE messages to the TCP flows")
            }
        }
    }

    /// Reports a media flow's controller rate to its FSE group (UPDATE), through the signalling
    /// delay; registers a flow that starts or resumes, and removes one that pauses.
    fn fse_sync(&mut self, i: u32, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        let m = &mut self.flows[i as usize];
        let Some(c) = m.fse else { return };
        let paused = m.source.is_paused(now);
        if paused && m.in_fse {
            // RFC 8699 sec. 5.3: a flow that stops or pauses leaves the FSE.
            m.in_fse = false;
            if fse.groups[c.group].leave(FlowId(i as u64)).is_err() {
                fse.errors += 1;
            }
            return;
        }
        if paused {
            return;
        }
        if !m.in_fse {
            let r = m.snd.rate_bps();
            match fse.groups[c.group].register(FlowId(i as u64), c.priority, r, now) {
                Ok(rate) => {
                    m.in_fse = true;
                    m.snd.set_fse_rate_bps(rate, now);
                }
                Err(_) => fse.errors += 1,
            }
            return;
        }
        // Every time the controller computes a rate, the flow calls UPDATE (RFC 8699 sec. 5.3),
        // whether or not the rate changed.
        let cc = m.snd.cc_rate_bps();
        let msg = FseMsg::Update {
            flow: i,
            cc_rate_bps: cc.clamp(0.0, coupling::units::MAX_RATE_BPS),
            desired_rate_bps: m.source.desired_rate_bps(),
            rtt: m
                .snd
                .rtt()
                .unwrap_or(m.base_rtt)
                .max(Duration::from_micros(1)),
        };
        let d = self.fse_delay(i, cx);
        self.post_fse(msg, d, cx, fse);
    }

    fn arm_timers(&mut self, i: u32, cx: &mut Ctx) {
        let m = &mut self.flows[i as usize];
        if let Some(t) = m.snd.next_timer() {
            if m.snd_timer.is_none_or(|e| e > t) {
                m.snd_timer = Some(t);
                let t = t.max(cx.now);
                cx.schedule(t, Event::Media(MediaEvent::SndTimer(i)));
            }
        }
        let m = &mut self.flows[i as usize];
        if let Some(t) = m.rcv.next_timer() {
            if m.rcv_timer.is_none_or(|e| e > t) {
                m.rcv_timer = Some(t);
                let t = t.max(cx.now);
                cx.schedule(t, Event::Media(MediaEvent::RcvTimer(i)));
            }
        }
    }

    /// (Re)schedules the pacer at the current rate: the next packet leaves one packet time (at the
    /// new rate) after the last one, or now if that has passed.
    fn pace(&mut self, i: u32, cx: &mut Ctx) {
        let now = cx.now;
        let m = &mut self.flows[i as usize];
        m.send_gen = m.send_gen.wrapping_add(1);
        let g = m.send_gen;
        let at = match m.last_send {
            Some((t, size)) if !m.idle => {
                let rate = m.snd.rate_bps().max(1_000.0);
                (t + Duration::from_nanos((size as f64 * 8e9 / rate).ceil() as u64)).max(now)
            }
            _ => now,
        };
        cx.schedule(at, Event::Media(MediaEvent::Send(i, g)));
    }

    fn send(&mut self, i: u32, gen: u32, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        let m = &mut self.flows[i as usize];
        if gen != m.send_gen {
            return;
        }
        let ready = m.source.ready(now);
        if ready < 1.0 {
            let went_idle = !m.idle;
            if went_idle {
                m.idle = true;
                m.snd.set_app_limited(true, now);
            }
            let next = m.source.next_data_at(now);
            // Report going idle, and a pause starting or ending (leave or rejoin the FSE); not
            // every wake-up of an idle pacer: with instant signalling the FSE's answer re-paced
            // the flow to now, which woke it to report again, forever at one instant.
            let paused = m.source.is_paused(now);
            if went_idle || (m.fse.is_some() && paused == m.in_fse) {
                self.fse_sync(i, cx, fse);
            }
            if let Some(t) = next {
                let g = self.flows[i as usize].send_gen;
                cx.schedule(t, Event::Media(MediaEvent::Send(i, g)));
            }
            return;
        }
        if m.idle {
            m.idle = false;
            m.snd.set_app_limited(false, now);
        }
        let size = (m.cfg.packet_bytes as f64).min(ready).ceil() as u32;
        let info = m.snd.on_send(m.seq, size, now);
        m.seq += 1;
        m.source.consume(size as f64);
        m.sent_pkts += 1;
        m.sent_bytes += size as u64;
        m.last_send = Some((now, size));
        let mut p = Packet::new(i, PacketKind::Media, m.cfg.src, m.cfg.dst, size);
        p.seq = info.seq;
        p.ts_ns = info.send_ts.as_nanos();
        p.rtt_ns = info.rtt.map_or(0, |r| r.as_nanos());
        p.dscp = m.cfg.dscp;
        p.hash = m.hash;
        let rate = m.snd.rate_bps().max(1_000.0);
        let gap = Duration::from_nanos((size as f64 * 8e9 / rate).ceil() as u64);
        let g = m.send_gen;
        cx.out.packets.push(p);
        cx.flush();
        cx.schedule(now + gap, Event::Media(MediaEvent::Send(i, g)));
        let m = &self.flows[i as usize];
        if !m.in_fse && m.fse.is_some() {
            self.fse_sync(i, cx, fse);
        }
        self.arm_timers(i, cx);
    }

    fn send_feedback(&mut self, i: u32, fb: Feedback, cx: &mut Ctx) {
        let m = &self.flows[i as usize];
        let mut p = Packet::new(
            i,
            PacketKind::MediaFeedback,
            m.cfg.dst,
            m.cfg.src,
            fb.size_bytes.max(28),
        );
        p.dscp = m.cfg.dscp;
        p.hash = m.hash;
        p.ts_ns = cx.now.as_nanos();
        p.seq = self.feedback.insert(fb) as u64;
        cx.out.packets.push(p);
        cx.flush();
    }

    /// A media packet or a feedback packet reached its destination.
    pub fn deliver(&mut self, p: &Packet, cx: &mut Ctx, fse: &mut FseSignalling) {
        let now = cx.now;
        let i = p.flow;
        match p.kind {
            PacketKind::Media => {
                let m = &mut self.flows[i as usize];
                m.received_pkts += 1;
                m.received_bytes += p.size_bytes as u64;
                m.owd_sum_s += now
                    .saturating_since(Instant::from_nanos(p.ts_ns))
                    .as_secs_f64();
                let info = SendInfo {
                    seq: p.seq,
                    size_bytes: p.size_bytes,
                    send_ts: Instant::from_nanos(p.ts_ns),
                    rtt: (p.rtt_ns > 0).then(|| Duration::from_nanos(p.rtt_ns)),
                };
                if let Some(fb) = m.rcv.on_packet(&info, now) {
                    self.send_feedback(i, fb, cx);
                }
                self.arm_timers(i, cx);
            }
            PacketKind::MediaFeedback => {
                let fb = self.feedback.take(p.seq as u32);
                let m = &mut self.flows[i as usize];
                let before = m.snd.rate_bps();
                m.snd.on_feedback(&fb, now);
                let changed = m.snd.rate_bps() != before;
                self.fse_sync(i, cx, fse);
                if changed {
                    self.pace(i, cx);
                }
                self.arm_timers(i, cx);
            }
            _ => unreachable!("media packets only"),
        }
    }

    pub fn sample(&self, t: Instant, rows: &mut Vec<MediaSample>) {
        for (i, m) in self.flows.iter().enumerate() {
            rows.push(MediaSample {
                t_ns: t.as_nanos(),
                flow: i as u32,
                rate_bps: m.snd.rate_bps(),
                cc_rate_bps: m.snd.cc_rate_bps(),
                received_bytes: m.received_bytes,
            });
        }
    }

    pub fn summaries(&self, net: &crate::net::Network, duration_s: f64) -> Vec<MediaSummary> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let active = (duration_s - m.cfg.start.as_secs_f64()).max(1e-9);
                MediaSummary {
                    flow: i as u32,
                    controller: m.snd.name(),
                    src: net.node_name(m.cfg.src).to_string(),
                    dst: net.node_name(m.cfg.dst).to_string(),
                    sent_pkts: m.sent_pkts,
                    sent_bytes: m.sent_bytes,
                    received_pkts: m.received_pkts,
                    received_bytes: m.received_bytes,
                    goodput_bps: m.received_bytes as f64 * 8.0 / active,
                    mean_owd_s: if m.received_pkts > 0 {
                        m.owd_sum_s / m.received_pkts as f64
                    } else {
                        f64::NAN
                    },
                }
            })
            .collect()
    }
}
