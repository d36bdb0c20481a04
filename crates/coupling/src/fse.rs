//! The Flow State Exchange (FSE) for rate-based flows: RFC 8699 and seed 003 chapters 5-6.
//!
//! Every time a flow's congestion controller computes a new rate CC_R, the flow calls UPDATE and
//! uses the rate the FSE returns instead (RFC 8699 sec. 4, Fig. 2). Four algorithms, chosen per
//! flow group ([`Algorithm`]):
//!
//! | algorithm | source | returns |
//! |---|---|---|
//! | [`Algorithm::Active`] | RFC 8699 sec. 5.3.1; seed 003 Algorithm 1 (desired-rate cap, line 8) | rates for all flows |
//! | [`Algorithm::ConservativeActive`] | RFC 8699 sec. 5.3.2; seed 003 Algorithm 2 and sec. 5.3 (I/N increase) | rates for all flows |
//! | [`Algorithm::SimplePassive`] | seed 003 Algorithm 3 (sec. 6.3.5) | the updating flow's rate |
//! | [`Algorithm::Passive`] | RFC 8699 draft Appendix C (desired rate DR, leftover TLO) | the updating flow's rate |
//!
//! Decisions where the sources are silent or their pseudo-code cannot be right, each tested:
//! - The desired-rate cap of Algorithm 1 line 8 reads `min(new_DR, P(i)*S_CR/S_P)` for every flow i,
//!   which would let one application-limited flow cap all others; each flow is capped by its *own*
//!   most recent desired rate DR(i) instead (unlimited until it reports one).
//! - Algorithm 2's increase "limited to I/N" (seed 003 sec. 5.3) is applied as `S_CR += DELTA / N`:
//!   N flows each adding their controller's increase I would grow the aggregate N times as fast as
//!   one flow. Its decrease is RFC 8699 sec. 5.3.2's `S_CR = S_CR * CC_R / FSE_R(f)` (the
//!   dissertation's line 4-6 first adds DELTA and then scales, which reduces twice).
//! - A flow that leaves hands its share to the rest: S_CR is not reduced (RFC 8699 App. C's last step
//!   gives the whole S_CR, including the departed flow's rate, to the remaining flow; seed 003
//!   Fig. 9.6 does the same for TCP). The active variants redistribute at once and return the rates.
//! - The passive algorithm deletes a stopped flow (P = -1) during the next UPDATE, after new_S_CR has
//!   summed its FSE_R. We remove the flow at once and carry its FSE_R into that next new_S_CR, which
//!   gives the same numbers and leaves no entry behind.
//! - S_CR never goes below 0 (Algorithm 3 can drive it negative when flows update with rates below
//!   their shares) and a TLO increment never below 0 (App. C's `(P(f)/S_P)*S_CR - DR(f)` is negative
//!   when DR exceeds the share, and a negative leftover would take rate away from the next flow).
//! - Shares are computed as `(P(i)/S_P) * S_CR` with the fraction clamped to [0, 1]
//!   (`units::share`), not `P(i) * S_CR / S_P`: with priorities down to 5e-324 the latter
//!   overflowed (two flows of priority 5e-324 got rate = inf). S_P is rebuilt from the flows when a
//!   removal cancels it below what a running sum can resolve (priorities 1e12 and 1e-75, the larger
//!   leaving, otherwise left S_P = 0 and every rate 0) (issue 11).
//! - Rate steps (issue 11's audit): no rate told exceeds S_CR (passive: S_CR plus the leftover TLO),
//!   property-tested over priorities spanning the whole accepted range. A told rate can be far above
//!   the flow's own CC_R (a high-priority joiner gets its share at once); rate-based senders pace, so
//!   this is a step in rate, not a burst of packets, and the active algorithms lower the other
//!   flows' rates in the same call. The passive algorithms change only the updating flow's rate, so
//!   the rates in use can sum to more than S_CR until the others update.
//!
//! Passive updates and registration are O(1): S_P and the sum of FSE_R are kept incrementally (and
//! recomputed exactly every `len + 64` operations so floating-point drift stays bounded). Active
//! updates are O(N) by nature: they compute every flow's rate.

use crate::error::Error;
use crate::group::{FlowGroups, FlowId, GroupId, GroupState, Grouping};
use crate::units::{
    check_desired_rate, check_not_before, check_priority, check_rate, share, Duration, Instant,
    RunningSum,
};
use rustc_hash::FxHashMap;

/// The FSE algorithm a flow group runs. The same algorithm applies to all flows of a group
/// (RFC 8699 sec. 5.3: "the same algorithm must be applied to all flows").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// RFC 8699 sec. 5.3.1, seed 003 Algorithm 1.
    Active,
    /// RFC 8699 sec. 5.3.2, seed 003 Algorithm 2: proportional decrease, 2-RTT timer, I/N increase.
    ConservativeActive,
    /// Seed 003 Algorithm 3.
    SimplePassive,
    /// RFC 8699 (draft) Appendix C: passive with desired rate and leftover rate TLO.
    Passive,
}

impl Algorithm {
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Active,
        Algorithm::ConservativeActive,
        Algorithm::SimplePassive,
        Algorithm::Passive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Active => "active",
            Algorithm::ConservativeActive => "conservative_active",
            Algorithm::SimplePassive => "simple_passive",
            Algorithm::Passive => "passive",
        }
    }

    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Active algorithms compute and deliver rates for every flow of the group.
    pub fn is_active(self) -> bool {
        matches!(self, Algorithm::Active | Algorithm::ConservativeActive)
    }
}

/// A rate the FSE assigns to a flow ("send FSE_R(i) to the flow i").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Assignment {
    pub flow: FlowId,
    pub rate_bps: f64,
}

/// The inputs of one UPDATE call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FseUpdate {
    /// CC_R: the rate the flow's congestion controller computed.
    pub cc_rate_bps: f64,
    /// new_DR: the rate the application wants; `f64::INFINITY` for a bulk transfer.
    pub desired_rate_bps: f64,
    /// The flow's RTT; needed by the conservative algorithm's 2-RTT timer.
    pub rtt: Option<Duration>,
    pub now: Instant,
}

impl FseUpdate {
    /// A bulk-transfer update with no RTT.
    pub fn new(cc_rate_bps: f64, now: Instant) -> Self {
        FseUpdate {
            cc_rate_bps,
            desired_rate_bps: f64::INFINITY,
            rtt: None,
            now,
        }
    }
    pub fn desired(mut self, desired_rate_bps: f64) -> Self {
        self.desired_rate_bps = desired_rate_bps;
        self
    }
    pub fn rtt(mut self, rtt: Duration) -> Self {
        self.rtt = Some(rtt);
        self
    }
}

/// What UPDATE returns: the updating flow's new rate and, for the active algorithms, the rates of
/// all flows of the group (including the updating one). Empty for the passive algorithms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome<'a> {
    pub rate_bps: f64,
    pub assignments: &'a [Assignment],
}

/// A read-only view of one flow's FSE entry (the rows of the tables in RFC 8699 App. C).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowView {
    pub flow: FlowId,
    pub priority: f64,
    /// FSE_R: the rate most recently calculated for (or, passive, used by) the flow.
    pub fse_rate_bps: f64,
    /// DR: the flow's desired rate as the FSE stores it.
    pub desired_rate_bps: f64,
}

#[derive(Clone, Debug)]
struct Entry {
    id: FlowId,
    priority: f64,
    fse_rate: f64,
    desired: f64,
    last_seen: Instant,
}

/// The state of one flow group under one FSE algorithm.
#[derive(Clone, Debug)]
pub struct FseGroup {
    algorithm: Algorithm,
    flows: Vec<Entry>,
    index: FxHashMap<FlowId, usize>,
    /// S_CR.
    s_cr: f64,
    /// S_P, kept incrementally.
    s_p: RunningSum,
    /// Sum of FSE_R over registered flows, kept incrementally (new_S_CR of App. C step 3a).
    sum_fse_r: RunningSum,
    /// TLO, the total leftover rate (passive).
    tlo: f64,
    /// FSE_R of flows that left since the last passive UPDATE (see module docs).
    departed: f64,
    /// The conservative algorithm's timer: rate changes are held until this instant.
    timer: Option<Instant>,
    last_now: Instant,
    ops_since_resum: usize,
    out: Vec<Assignment>,
}

impl FseGroup {
    pub fn new(algorithm: Algorithm) -> Self {
        FseGroup {
            algorithm,
            flows: Vec::new(),
            index: FxHashMap::default(),
            s_cr: 0.0,
            s_p: RunningSum::default(),
            sum_fse_r: RunningSum::default(),
            tlo: 0.0,
            departed: 0.0,
            timer: None,
            last_now: Instant::ZERO,
            ops_since_resum: 0,
            out: Vec::new(),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
    pub fn len(&self) -> usize {
        self.flows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
    /// S_CR, the sum of the calculated rates of the group.
    pub fn sum_calculated_rate(&self) -> f64 {
        self.s_cr
    }
    /// S_P, the sum of the priorities.
    pub fn sum_priority(&self) -> f64 {
        self.s_p.value()
    }
    /// TLO, the total leftover rate (always 0 for the algorithms other than [`Algorithm::Passive`]).
    pub fn leftover(&self) -> f64 {
        self.tlo
    }
    /// The instant until which the conservative algorithm holds rates after a decrease.
    pub fn timer(&self) -> Option<Instant> {
        self.timer
    }
    pub fn contains(&self, flow: FlowId) -> bool {
        self.index.contains_key(&flow)
    }

    /// The entries in the group's internal order (stable between leaves).
    pub fn flows(&self) -> Vec<FlowView> {
        self.flows.iter().map(Self::view).collect()
    }

    pub fn flow(&self, flow: FlowId) -> Result<FlowView, Error> {
        let i = *self.index.get(&flow).ok_or(Error::UnknownFlow(flow))?;
        Ok(Self::view(&self.flows[i]))
    }

    fn view(e: &Entry) -> FlowView {
        FlowView {
            flow: e.id,
            priority: e.priority,
            fse_rate_bps: e.fse_rate,
            desired_rate_bps: e.desired,
        }
    }

    fn check_time(&self, now: Instant) -> Result<(), Error> {
        check_not_before(now, self.last_now)
    }

    /// Validates a registration without changing anything.
    pub fn check_register(
        &self,
        flow: FlowId,
        priority: f64,
        initial_rate_bps: f64,
        now: Instant,
    ) -> Result<(), Error> {
        if self.index.contains_key(&flow) {
            return Err(Error::DuplicateFlow(flow));
        }
        check_priority(priority)?;
        check_rate("initial_rate_bps", initial_rate_bps)?;
        self.check_time(now)
    }

    /// Step (1) of every algorithm: FSE_R (and, passive, DR) start at the controller's initial rate,
    /// which is added to S_CR. Returns the rate the flow should use now.
    pub fn register(
        &mut self,
        flow: FlowId,
        priority: f64,
        initial_rate_bps: f64,
        now: Instant,
    ) -> Result<f64, Error> {
        self.check_register(flow, priority, initial_rate_bps, now)?;
        // Active algorithms cap by DR(i); a flow is unlimited until it reports a desired rate.
        let desired = if self.algorithm.is_active() {
            f64::INFINITY
        } else {
            initial_rate_bps
        };
        self.index.insert(flow, self.flows.len());
        self.flows.push(Entry {
            id: flow,
            priority,
            fse_rate: initial_rate_bps,
            desired,
            last_seen: now,
        });
        self.s_cr += initial_rate_bps;
        self.s_p.add(priority);
        self.sum_fse_r.add(initial_rate_bps);
        self.last_now = now;
        self.after_op();
        Ok(initial_rate_bps)
    }

    /// UPDATE (step 3 of each algorithm). Errors leave the group unchanged.
    pub fn update(&mut self, flow: FlowId, input: FseUpdate) -> Result<Outcome<'_>, Error> {
        let i = *self.index.get(&flow).ok_or(Error::UnknownFlow(flow))?;
        let cc_r = check_rate("cc_rate_bps", input.cc_rate_bps)?;
        let new_dr = check_desired_rate("desired_rate_bps", input.desired_rate_bps)?;
        self.check_time(input.now)?;
        let rtt = match (self.algorithm, input.rtt) {
            (Algorithm::ConservativeActive, None) => {
                return Err(Error::MissingInput {
                    field: "rtt",
                    algorithm: "the conservative active FSE",
                })
            }
            (Algorithm::ConservativeActive, Some(r)) if r == Duration::ZERO => {
                return Err(Error::InvalidValue {
                    field: "rtt",
                    value: 0.0,
                    expected: "an RTT of at least 1 ns",
                })
            }
            (_, r) => r.unwrap_or(Duration::ZERO),
        };
        let now = input.now;
        self.last_now = now;
        self.flows[i].last_seen = now;
        let rate = match self.algorithm {
            Algorithm::Active => {
                // Algorithm 1 lines 2-3.
                self.s_cr = (self.s_cr + cc_r - self.flows[i].fse_rate).max(0.0);
                self.flows[i].desired = new_dr;
                self.distribute();
                self.flows[i].fse_rate
            }
            Algorithm::ConservativeActive => {
                // RFC 8699 sec. 5.3.2 step (a), with the I/N increase of seed 003 sec. 5.3.
                if self.timer.is_none_or(|t| now >= t) {
                    self.timer = None;
                    let fse_r = self.flows[i].fse_rate;
                    let delta = cc_r - fse_r;
                    if delta < 0.0 {
                        self.s_cr *= cc_r / fse_r;
                        self.timer = Some(now + rtt.saturating_mul(2));
                    } else {
                        self.s_cr += delta / self.flows.len() as f64;
                    }
                }
                self.flows[i].desired = new_dr;
                self.distribute();
                self.flows[i].fse_rate
            }
            Algorithm::SimplePassive => {
                // Algorithm 3 lines 2-6.
                self.out.clear();
                self.s_cr = (self.s_cr + cc_r - self.flows[i].fse_rate).max(0.0);
                let rate = share(self.flows[i].priority, self.s_cr, self.s_p.value());
                self.set_fse_rate(i, rate);
                rate
            }
            Algorithm::Passive => {
                self.out.clear();
                self.passive_update(i, cc_r, new_dr)
            }
        };
        self.after_op();
        Ok(Outcome {
            rate_bps: rate,
            assignments: &self.out,
        })
    }

    /// RFC 8699 (draft) Appendix C, step 3 (a)-(e).
    fn passive_update(&mut self, i: usize, cc_r: f64, new_dr: f64) -> f64 {
        // (a) new_S_CR sums FSE_R over the group, including flows that stopped since the last UPDATE.
        let new_s_cr = self.sum_fse_r.value() + self.departed;
        let delta = cc_r - self.flows[i].fse_rate;
        // (b)
        self.set_fse_rate(i, cc_r);
        if delta > 0.0 {
            self.s_cr += delta;
        } else if delta < 0.0 {
            self.s_cr = (new_s_cr + delta).max(0.0);
        }
        self.flows[i].desired = new_dr.min(cc_r);
        // (c) stopped flows are deleted here; S_P is already their sum.
        self.departed = 0.0;
        let p = self.flows[i].priority;
        let own = share(p, self.s_cr, self.s_p.value());
        if self.flows[i].desired < self.flows[i].fse_rate {
            self.tlo += (own - self.flows[i].desired).max(0.0);
        }
        // (d)
        let rate = new_dr.min(own + self.tlo);
        if rate != new_dr && self.tlo > 0.0 {
            self.tlo = 0.0; // f has 'taken' TLO
        }
        // (e)
        if rate > self.flows[i].desired {
            self.flows[i].desired = rate;
        }
        self.set_fse_rate(i, rate);
        rate
    }

    /// Step (c) of the active algorithms: FSE_R(i) = min(DR(i), P(i) * S_CR / S_P) for all i.
    fn distribute(&mut self) {
        self.out.clear();
        // (P / S_P) * S_CR, not P * (S_CR / S_P): the latter overflows for tiny priorities.
        let (s_cr, s_p) = (self.s_cr, self.s_p.value());
        // A fresh sum of non-negative terms: plain addition is accurate here.
        let mut sum = 0.0;
        for e in &mut self.flows {
            e.fse_rate = e.desired.min(share(e.priority, s_cr, s_p));
            sum += e.fse_rate;
            self.out.push(Assignment {
                flow: e.id,
                rate_bps: e.fse_rate,
            });
        }
        self.sum_fse_r = RunningSum::from_value(sum);
    }

    fn set_fse_rate(&mut self, i: usize, rate: f64) {
        self.sum_fse_r.sub(self.flows[i].fse_rate);
        self.sum_fse_r.add(rate);
        self.flows[i].fse_rate = rate;
        self.sum_fse_r
            .settle(|| self.flows.iter().map(|e| e.fse_rate));
    }

    /// Changes a flow's priority (seed 003 Fig. 5.13, 6.6). Active algorithms redistribute at once
    /// and return every flow's new rate; passive ones apply it at the flow's next UPDATE.
    pub fn set_priority(
        &mut self,
        flow: FlowId,
        priority: f64,
        now: Instant,
    ) -> Result<&[Assignment], Error> {
        let i = *self.index.get(&flow).ok_or(Error::UnknownFlow(flow))?;
        check_priority(priority)?;
        self.check_time(now)?;
        self.last_now = now;
        self.flows[i].last_seen = now;
        self.s_p.sub(self.flows[i].priority);
        self.s_p.add(priority);
        self.flows[i].priority = priority;
        self.s_p.settle(|| self.flows.iter().map(|e| e.priority));
        self.out.clear();
        if self.algorithm.is_active() {
            self.distribute();
        }
        self.after_op();
        Ok(&self.out)
    }

    /// Step (2): a flow that stops or pauses leaves. Its share stays in S_CR for the others; the
    /// active algorithms redistribute it at once and return the new rates.
    pub fn leave(&mut self, flow: FlowId) -> Result<&[Assignment], Error> {
        let i = *self.index.get(&flow).ok_or(Error::UnknownFlow(flow))?;
        let e = self.flows.swap_remove(i);
        self.index.remove(&flow);
        if i < self.flows.len() {
            self.index.insert(self.flows[i].id, i);
        }
        self.s_p.sub(e.priority);
        self.sum_fse_r.sub(e.fse_rate);
        self.s_p.settle(|| self.flows.iter().map(|e| e.priority));
        self.sum_fse_r
            .settle(|| self.flows.iter().map(|e| e.fse_rate));
        self.out.clear();
        if self.flows.is_empty() {
            // The group is gone; whoever owns it drops it. Reset so a reused group starts clean.
            let algorithm = self.algorithm;
            let last_now = self.last_now;
            *self = FseGroup::new(algorithm);
            self.last_now = last_now;
            return Ok(&self.out);
        }
        match self.algorithm {
            Algorithm::Active | Algorithm::ConservativeActive => self.distribute(),
            Algorithm::Passive => self.departed += e.fse_rate,
            Algorithm::SimplePassive => {}
        }
        self.after_op();
        Ok(&self.out)
    }

    /// Soft state (RFC 8699 sec. 4): removes flows silent for longer than `timeout`, in ascending id
    /// order, as if each had left. Returns them; for the active algorithms, [`Self::assignments`]
    /// then holds the remaining flows' new rates.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Vec<FlowId> {
        let mut stale: Vec<FlowId> = self
            .flows
            .iter()
            .filter(|e| now.saturating_since(e.last_seen) > timeout)
            .map(|e| e.id)
            .collect();
        stale.sort();
        for f in &stale {
            self.leave(*f).expect("stale flow is registered");
        }
        stale
    }

    /// The rates the last operation delivered (empty for the passive algorithms).
    pub fn assignments(&self) -> &[Assignment] {
        &self.out
    }

    /// Bounds floating-point drift of the incremental sums at O(1) amortized cost.
    fn after_op(&mut self) {
        self.ops_since_resum += 1;
        if self.ops_since_resum > self.flows.len() + 64 {
            self.ops_since_resum = 0;
            self.s_p = RunningSum::of(self.flows.iter().map(|e| e.priority));
            self.sum_fse_r = RunningSum::of(self.flows.iter().map(|e| e.fse_rate));
        }
    }
}

/// What soft state removed from one group ([`Fse::expire`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Expired {
    pub group: GroupId,
    pub flows: Vec<FlowId>,
    /// The remaining flows' new rates (active algorithms; empty otherwise).
    pub assignments: Vec<Assignment>,
}

impl GroupState for FseGroup {
    fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
}

/// Configuration of an [`Fse`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FseConfig {
    /// The algorithm of groups created implicitly by a registration.
    pub default_algorithm: Algorithm,
    /// Soft state: flows silent for longer than this are removed by [`Fse::expire`]. `None`: never.
    pub soft_state_timeout: Option<Duration>,
}

impl Default for FseConfig {
    fn default() -> Self {
        FseConfig {
            default_algorithm: Algorithm::ConservativeActive,
            soft_state_timeout: None,
        }
    }
}

/// A Flow State Exchange: many flow groups, each with its own algorithm, and the flow grouping.
#[derive(Debug)]
pub struct Fse {
    config: FseConfig,
    groups: FlowGroups<FseGroup>,
}

impl Fse {
    pub fn new(config: FseConfig) -> Self {
        Fse {
            config,
            groups: FlowGroups::default(),
        }
    }

    pub fn config(&self) -> FseConfig {
        self.config
    }

    /// Creates group `gid` with `algorithm`, or changes the algorithm of an existing empty group.
    /// A configured group keeps its algorithm when its last flow leaves.
    pub fn configure_group(&mut self, gid: GroupId, algorithm: Algorithm) -> Result<(), Error> {
        self.groups.configure(gid, FseGroup::new(algorithm))
    }

    /// Removes an empty group, configured or not.
    pub fn remove_group(&mut self, gid: GroupId) -> Result<(), Error> {
        self.groups.remove_empty_group(gid)
    }

    /// Registers a flow in the group its grouping resolves to (creating that group with the default
    /// algorithm if needed). Returns the FGI and the rate the flow should use now.
    pub fn register(
        &mut self,
        flow: FlowId,
        grouping: &Grouping,
        priority: f64,
        initial_rate_bps: f64,
        now: Instant,
    ) -> Result<(GroupId, f64), Error> {
        if self.groups.contains_flow(flow) {
            return Err(Error::DuplicateFlow(flow));
        }
        FlowGroups::<FseGroup>::check(grouping)?;
        check_priority(priority)?;
        check_rate("initial_rate_bps", initial_rate_bps)?;
        if let Grouping::Explicit(gid) = grouping {
            if let Ok(g) = self.groups.group(*gid) {
                g.check_register(flow, priority, initial_rate_bps, now)?;
            }
        }
        let algorithm = self.config.default_algorithm;
        let gid = self
            .groups
            .resolve(grouping, |_| FseGroup::new(algorithm))?;
        let group = self.groups.group_mut(gid)?;
        if let Err(e) = group.check_register(flow, priority, initial_rate_bps, now) {
            if group.is_empty() {
                self.groups.release_empty(gid);
            }
            return Err(e);
        }
        let rate = group.register(flow, priority, initial_rate_bps, now)?;
        self.groups.bind(flow, gid);
        Ok((gid, rate))
    }

    pub fn update(&mut self, flow: FlowId, input: FseUpdate) -> Result<Outcome<'_>, Error> {
        let (_, group) = self.groups.group_of_flow_mut(flow)?;
        group.update(flow, input)
    }

    pub fn set_priority(
        &mut self,
        flow: FlowId,
        priority: f64,
        now: Instant,
    ) -> Result<&[Assignment], Error> {
        let (_, group) = self.groups.group_of_flow_mut(flow)?;
        group.set_priority(flow, priority, now)
    }

    /// A flow leaves; returns the new rates of the remaining flows for the active algorithms.
    pub fn leave(&mut self, flow: FlowId) -> Result<Vec<Assignment>, Error> {
        let (gid, group) = self.groups.group_of_flow_mut(flow)?;
        let out = group.leave(flow)?.to_vec();
        let empty = group.is_empty();
        self.groups.unbind(flow);
        if empty {
            self.groups.release_empty(gid);
        }
        Ok(out)
    }

    /// Removes flows silent for longer than the soft-state timeout. Returns, per group that lost
    /// flows, the flows removed and (active algorithms) the remaining flows' new rates.
    pub fn expire(&mut self, now: Instant) -> Vec<Expired> {
        let Some(timeout) = self.config.soft_state_timeout else {
            return Vec::new();
        };
        let mut expired = Vec::new();
        for (group, g) in self.groups.groups_mut() {
            let flows = g.expire(now, timeout);
            if !flows.is_empty() {
                expired.push(Expired {
                    group,
                    flows,
                    assignments: g.assignments().to_vec(),
                });
            }
        }
        for e in &expired {
            for f in &e.flows {
                self.groups.unbind(*f);
            }
            if self.groups.group(e.group).is_ok_and(|g| g.is_empty()) {
                self.groups.release_empty(e.group);
            }
        }
        expired
    }

    pub fn group_of(&self, flow: FlowId) -> Result<GroupId, Error> {
        self.groups.group_of(flow)
    }

    pub fn group(&self, gid: GroupId) -> Result<&FseGroup, Error> {
        self.groups.group(gid)
    }

    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.group_ids().collect()
    }

    pub fn flow_count(&self) -> usize {
        self.groups.flow_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBPS: f64 = 1e6;

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn rates(out: &[Assignment]) -> Vec<f64> {
        out.iter().map(|a| a.rate_bps / MBPS).collect()
    }

    /// Issue 11's reproducer: two flows of priority 5e-324 made the active FSE return rate = inf
    /// (`S_CR / S_P` overflows). Every algorithm must give each flow half of S_CR, and priorities
    /// at the two ends of the accepted range must split S_CR by their ratio without overflow.
    #[test]
    fn priorities_at_the_ends_of_the_range_stay_finite() {
        for a in Algorithm::ALL {
            let mut g = FseGroup::new(a);
            g.register(FlowId(1), 5e-324, 2.0 * MBPS, t(0)).unwrap();
            g.register(FlowId(2), 5e-324, 2.0 * MBPS, t(0)).unwrap();
            let u = FseUpdate::new(2.0 * MBPS, t(10)).rtt(Duration::from_millis(50));
            let r = g.update(FlowId(1), u).unwrap().rate_bps;
            assert_eq!(r, 2.0 * MBPS, "{}", a.name());

            let mut g = FseGroup::new(a);
            g.register(FlowId(1), 5e-324, 1.0 * MBPS, t(0)).unwrap();
            g.register(FlowId(2), crate::units::MAX_PRIORITY, 1.0 * MBPS, t(0))
                .unwrap();
            // Each flow reports the rate it uses, so S_CR stays 2 Mbit/s and goes to flow 2.
            for (f, expected) in [(1, 0.0), (2, 2.0 * MBPS)] {
                let cc = g.flow(FlowId(f)).unwrap().fse_rate_bps;
                let u = FseUpdate::new(cc, t(10)).rtt(Duration::from_millis(50));
                let r = g.update(FlowId(f), u).unwrap().rate_bps;
                assert!(
                    r.is_finite() && r <= g.sum_calculated_rate(),
                    "{}: {r}",
                    a.name()
                );
                if a != Algorithm::Passive {
                    // Passive gives a flow the leftover as well; its own tests cover that.
                    assert!((r - expected).abs() < 1.0, "{}: flow {f} {r}", a.name());
                }
            }
        }
    }

    #[test]
    fn active_shares_s_cr_by_priority() {
        let mut g = FseGroup::new(Algorithm::Active);
        g.register(FlowId(1), 1.0, 1.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 0.5, 1.0 * MBPS, t(0)).unwrap();
        let out = g
            .update(FlowId(1), FseUpdate::new(4.0 * MBPS, t(1)))
            .unwrap();
        // S_CR = 2 + 4 - 1 = 5, split 2:1.
        assert!((out.rate_bps - 5.0 / 1.5 * MBPS).abs() < 1e-6);
        let r = rates(out.assignments);
        assert!((r[0] - 10.0 / 3.0).abs() < 1e-9 && (r[1] - 5.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn active_caps_each_flow_by_its_own_desired_rate() {
        let mut g = FseGroup::new(Algorithm::Active);
        g.register(FlowId(1), 1.0, 5.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 1.0, 5.0 * MBPS, t(0)).unwrap();
        let out = g
            .update(
                FlowId(1),
                FseUpdate::new(5.0 * MBPS, t(1)).desired(2.0 * MBPS),
            )
            .unwrap();
        assert_eq!(
            rates(out.assignments),
            vec![2.0, 5.0],
            "flow 2 is not capped by flow 1's desired rate"
        );
    }

    #[test]
    fn conservative_reduces_proportionally_and_holds_for_two_rtts() {
        let mut g = FseGroup::new(Algorithm::ConservativeActive);
        let rtt = Duration::from_millis(100);
        g.register(FlowId(1), 1.0, 5.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 1.0, 5.0 * MBPS, t(0)).unwrap();
        // Flow 1 halves: S_CR = 10 * 2.5/5 = 5 (the aggregate halves, like one flow).
        let out = g
            .update(FlowId(1), FseUpdate::new(2.5 * MBPS, t(1000)).rtt(rtt))
            .unwrap();
        assert_eq!(rates(out.assignments), vec![2.5, 2.5]);
        assert_eq!(g.timer(), Some(t(1200)));
        // Within 2 RTTs, flow 2's own decrease (same loss event) is ignored.
        let out = g
            .update(FlowId(2), FseUpdate::new(1.25 * MBPS, t(1150)).rtt(rtt))
            .unwrap();
        assert_eq!(rates(out.assignments), vec![2.5, 2.5]);
        // After the timer, an increase of I by one of N = 2 flows grows S_CR by I/2.
        let out = g
            .update(FlowId(2), FseUpdate::new(3.5 * MBPS, t(1200)).rtt(rtt))
            .unwrap();
        assert_eq!(rates(out.assignments), vec![2.75, 2.75]);
        assert_eq!(g.timer(), None);
    }

    #[test]
    fn conservative_needs_an_rtt() {
        let mut g = FseGroup::new(Algorithm::ConservativeActive);
        g.register(FlowId(1), 1.0, MBPS, t(0)).unwrap();
        assert!(matches!(
            g.update(FlowId(1), FseUpdate::new(MBPS, t(1))),
            Err(Error::MissingInput { .. })
        ));
        assert!(matches!(
            g.update(FlowId(1), FseUpdate::new(MBPS, t(1)).rtt(Duration::ZERO)),
            Err(Error::InvalidValue { field: "rtt", .. })
        ));
    }

    #[test]
    fn simple_passive_returns_the_updating_flows_share_only() {
        let mut g = FseGroup::new(Algorithm::SimplePassive);
        g.register(FlowId(1), 1.0, 4.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 3.0, 4.0 * MBPS, t(0)).unwrap();
        let out = g
            .update(FlowId(2), FseUpdate::new(4.0 * MBPS, t(1)))
            .unwrap();
        assert!(out.assignments.is_empty());
        assert_eq!(out.rate_bps, 6.0 * MBPS);
        assert_eq!(
            g.flow(FlowId(1)).unwrap().fse_rate_bps,
            4.0 * MBPS,
            "flow 1 unchanged until it updates"
        );
    }

    #[test]
    fn simple_passive_s_cr_never_negative() {
        let mut g = FseGroup::new(Algorithm::SimplePassive);
        g.register(FlowId(1), 1.0, 10.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 1.0, 1.0 * MBPS, t(0)).unwrap();
        g.update(FlowId(2), FseUpdate::new(MBPS, t(1))).unwrap();
        g.update(FlowId(1), FseUpdate::new(0.0, t(2))).unwrap();
        g.update(FlowId(2), FseUpdate::new(0.0, t(3))).unwrap();
        let r = g
            .update(FlowId(1), FseUpdate::new(0.0, t(4)))
            .unwrap()
            .rate_bps;
        assert!(r >= 0.0 && g.sum_calculated_rate() >= 0.0);
    }

    #[test]
    fn priorities_of_very_different_magnitude_leave_no_residue() {
        for a in Algorithm::ALL {
            let mut g = FseGroup::new(a);
            g.register(FlowId(1), 1e12, MBPS, t(0)).unwrap();
            g.register(FlowId(2), 1e-3, MBPS, t(0)).unwrap();
            g.register(FlowId(3), 1.0, MBPS, t(0)).unwrap();
            g.leave(FlowId(1)).unwrap();
            g.leave(FlowId(2)).unwrap();
            assert_eq!(g.sum_priority(), 1.0, "{}", a.name());
            let u = FseUpdate::new(MBPS, t(1)).rtt(Duration::from_millis(10));
            assert!(g.update(FlowId(3), u).unwrap().rate_bps >= 0.0);
        }
    }

    #[test]
    fn leave_hands_the_share_to_the_others() {
        let mut g = FseGroup::new(Algorithm::Active);
        g.register(FlowId(1), 1.0, 5.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 1.0, 5.0 * MBPS, t(0)).unwrap();
        let out = g.leave(FlowId(2)).unwrap();
        assert_eq!(rates(out), vec![10.0]);
        assert!(!g.contains(FlowId(2)));
        assert_eq!(g.sum_priority(), 1.0);
    }

    #[test]
    fn priority_change_redistributes_for_active() {
        let mut g = FseGroup::new(Algorithm::Active);
        g.register(FlowId(1), 1.0, 5.0 * MBPS, t(0)).unwrap();
        g.register(FlowId(2), 1.0, 5.0 * MBPS, t(0)).unwrap();
        let out = g.set_priority(FlowId(1), 0.25, t(1)).unwrap();
        assert_eq!(rates(out), vec![2.0, 8.0]);
    }

    #[test]
    fn soft_state_removes_silent_flows() {
        let mut fse = Fse::new(FseConfig {
            default_algorithm: Algorithm::Passive,
            soft_state_timeout: Some(Duration::from_secs(2)),
        });
        let g = Grouping::Explicit(GroupId(7));
        fse.register(FlowId(1), &g, 1.0, MBPS, t(0)).unwrap();
        fse.register(FlowId(2), &g, 1.0, MBPS, t(0)).unwrap();
        fse.update(FlowId(2), FseUpdate::new(MBPS, t(1500)))
            .unwrap();
        let e = fse.expire(t(2001));
        assert_eq!(
            (e.len(), e[0].group, e[0].flows.clone()),
            (1, GroupId(7), vec![FlowId(1)])
        );
        assert!(e[0].assignments.is_empty(), "passive: no rates delivered");
        assert!(fse.group_of(FlowId(1)).is_err());
        assert_eq!(fse.expire(t(3501))[0].flows, vec![FlowId(2)]);
        assert!(fse.group_ids().is_empty(), "an empty group is dropped");
    }

    #[test]
    fn soft_state_under_active_delivers_the_new_rates() {
        let mut fse = Fse::new(FseConfig {
            default_algorithm: Algorithm::Active,
            soft_state_timeout: Some(Duration::from_secs(2)),
        });
        let g = Grouping::Configured("uplink".into());
        fse.register(FlowId(1), &g, 1.0, 4.0 * MBPS, t(0)).unwrap();
        fse.register(FlowId(2), &g, 1.0, 4.0 * MBPS, t(1000))
            .unwrap();
        let e = fse.expire(t(2500));
        assert_eq!(e[0].flows, vec![FlowId(1)]);
        assert_eq!(
            e[0].assignments,
            vec![Assignment {
                flow: FlowId(2),
                rate_bps: 8.0 * MBPS
            }]
        );
    }

    #[test]
    fn a_configured_group_keeps_its_algorithm_when_it_empties() {
        let mut fse = Fse::new(FseConfig::default());
        fse.configure_group(GroupId(5), Algorithm::Passive).unwrap();
        let g = Grouping::Explicit(GroupId(5));
        fse.register(FlowId(1), &g, 1.0, MBPS, t(0)).unwrap();
        fse.leave(FlowId(1)).unwrap();
        assert_eq!(
            fse.group(GroupId(5)).unwrap().algorithm(),
            Algorithm::Passive
        );
        fse.register(FlowId(2), &g, 1.0, MBPS, t(0)).unwrap();
        assert_eq!(
            fse.group(GroupId(5)).unwrap().algorithm(),
            Algorithm::Passive
        );
        assert!(matches!(
            fse.remove_group(GroupId(5)),
            Err(Error::GroupNotEmpty(_))
        ));
        fse.leave(FlowId(2)).unwrap();
        fse.remove_group(GroupId(5)).unwrap();
        assert!(fse.group(GroupId(5)).is_err());
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut g = FseGroup::new(Algorithm::Passive);
        g.register(FlowId(1), 1.0, MBPS, t(10)).unwrap();
        let before = format!("{g:?}");
        assert!(g.register(FlowId(1), 1.0, MBPS, t(10)).is_err());
        assert!(g.register(FlowId(2), 0.0, MBPS, t(10)).is_err());
        assert!(g.register(FlowId(2), 1.0, f64::NAN, t(10)).is_err());
        assert!(g.update(FlowId(1), FseUpdate::new(-1.0, t(11))).is_err());
        assert!(g
            .update(FlowId(1), FseUpdate::new(f64::INFINITY, t(11)))
            .is_err());
        assert!(g
            .update(FlowId(1), FseUpdate::new(1.0, t(11)).desired(f64::NAN))
            .is_err());
        assert!(g.update(FlowId(1), FseUpdate::new(1.0, t(9))).is_err());
        assert!(g.update(FlowId(9), FseUpdate::new(1.0, t(11))).is_err());
        assert!(g.set_priority(FlowId(1), f64::NAN, t(11)).is_err());
        assert!(g.leave(FlowId(9)).is_err());
        assert_eq!(before, format!("{g:?}"));
    }

    #[test]
    fn fse_register_failure_does_not_create_a_group() {
        let mut fse = Fse::new(FseConfig::default());
        let err = fse.register(
            FlowId(1),
            &Grouping::Configured("uplink".into()),
            -1.0,
            MBPS,
            t(0),
        );
        assert!(err.is_err());
        assert!(fse.group_ids().is_empty());
        fse.register(FlowId(1), &Grouping::Explicit(GroupId(3)), 1.0, MBPS, t(0))
            .unwrap();
        assert!(matches!(
            fse.configure_group(GroupId(3), Algorithm::Passive),
            Err(Error::GroupNotEmpty(_))
        ));
        assert!(matches!(
            fse.register(FlowId(1), &Grouping::Explicit(GroupId(4)), 1.0, MBPS, t(0)),
            Err(Error::DuplicateFlow(_))
        ));
        assert_eq!(fse.group_ids(), vec![GroupId(3)]);
    }
}
