//! The response to false sharing: which group a flow joins, and how flows are moved between
//! groups when a detector finds that two of them do (not) share their bottlenecks (seed 000
//! sec. 5). Works for TCP-CCC groups ([`TcpGroups`]) and FSE groups ([`Fse`]) alike.
//!
//! The sources, followed here:
//! - **Share by default** (seed 000 sec. 5.1): "the right behavior for a congestion control
//!   system is to share congestion information whenever possible and detect incorrect sharing",
//!   because the detection tests "work best when packets are transmitted in a nice interleaved
//!   fashion", which "is only possible when the flows are placed in the same macroflow", and
//!   because they "detect false sharing much more quickly than genuine sharing". The granularity
//!   of a macroflow is the destination ([`Dest`]; seed 000 sec. 1: "the granularity of sharing is a
//!   common destination host"): every flow to a destination joins that destination's shared group
//!   (an FGI, RFC 8699 sec. 5.1 method 3, "from measurements") unless the destination is
//!   remembered as falsely shared.
//! - **Split on detection** (sec. 5.1): "Upon detecting false sharing, the congestion control
//!   system should stop sharing information across the affected flows. In the Congestion Manager
//!   this is done by associating the flows with separate macroflows." A [`Verdict::NoShare`] on two
//!   flows of the shared group gives an [`Action::Split`]: one of them leaves (seed 003
//!   Algorithm 6, RFC 8699 "deregister") and registers alone in a group of its own (Algorithm 5).
//! - **Reversible** (sec. 5.1): "This process is reversible. If at some later time, the end host
//!   identifies that a pair of flows did not have false sharing, it should share congestion
//!   information across the flows by re-assigning them to the same macroflow." A
//!   [`Verdict::Share`] gives an [`Action::Merge`]: the flow leaves its own group and joins the
//!   shared one through the coupler's normal join (Algorithm 5, with the ack-clocked handover of
//!   Algorithm 4 where the group runs it).
//! - **Memory per destination** (sec. 5.1): "once false-sharing has been detected to a particular
//!   destination, the default behavior for immediate future connections, short or long, to the
//!   destination should be to not share congestion state." Every NoShare records the destination
//!   at `now`; a flow opened within [`SharingConfig::memory_expiry`] of the latest detection starts
//!   in a group of its own.
//!
//! Where the sources are silent, or cannot be meant literally, and what we do (each has a test in
//! `tests/response.rs` or below):
//! 1. **Which flow of a NoShare pair leaves:** the younger (opened later). The older keeps the
//!    shared group, with whatever other flows were grouped with it; both flows being split would
//!    also separate the others from one of them without evidence.
//! 2. **Hysteresis:** a flow that was split (or started alone) comes back only on an explicit
//!    Share verdict involving it. [`Verdict::Inconclusive`] never regroups, nor does time: the
//!    memory's expiry only changes where *new* flows start. A NoShare on a pair already apart and a
//!    Share on a pair already together are no-ops, counted
//!    ([`SharingCounters::redundant_no_share`], [`SharingCounters::redundant_share`]).
//! 3. **A Share verdict** moves the flows of the pair that are outside the destination's shared
//!    group into it: both, if both are alone (two flows that started alone and are found to share
//!    are "re-assigned to the same macroflow"). The macroflow is per destination, not per pair: a
//!    Share between a split flow and a third flow puts it back with the flow it was split from;
//!    the latest verdict wins, and if the false sharing persists its detector says so again (sec.
//!    5.1: "the lack of significant penalty associated with making an incorrect decision").
//! 4. **The memory** is refreshed by every NoShare (also a redundant one) and is not erased by a
//!    Share verdict (a pair that shares does not show that the destination's other paths or
//!    classes do; [`SharingPolicy::forget`] erases it). Its default expiry, 10 minutes, is the
//!    crate's TCB cache expiry ([`crate::tcb::TcbConfig`]'s default): the RFC 2140bis draft
//!    (seed 003 ch. 12; RFC 9040) gives no number, only that cached path state "could also become
//!    invalid over time" (its sec. 8), and the false-sharing memory is per-destination path state
//!    of the same kind, so it lives as long as the rest of what is remembered about the
//!    destination. It is 60 to 120 times the 5-10 s the out-of-order test takes to detect false
//!    sharing (seed 000 sec. 5.2), so a flow to a destination with path diversity does not pay the
//!    detection time again and again. The memory holds at most
//!    [`SharingConfig::memory_capacity`] destinations; recording another evicts the oldest
//!    detection (the one closest to expiring), counted ([`SharingCounters::memory_evicted`]), as
//!    are expiries ([`SharingCounters::memory_expired`]). An entry is live while
//!    `now - detected <= memory_expiry` (the TCB cache's rule).
//! 5. **A split hands the flow its own state back** ("no burst, no reset to slow start"): it
//!    leaves its group and registers alone with the window and ssthresh it is using, then its
//!    current report is passed as an UPDATE so its coupler knows its state (a connection registers
//!    in slow start in Algorithm 5). Alone, every coupler tells it exactly that window and
//!    ssthresh back (in the integer mode rounded to whole packets, as the windows it told were):
//!    it goes on in congestion avoidance with the window it was using, so it can send no more at
//!    once than it could before. The remaining members see exactly what leave does (TCP-CCC keeps
//!    the aggregate and they slow-start up to the freed share on their own ACK clocks; an active
//!    FSE gives them the freed rate at once, returned in [`FseMoved::assignments`]; a passive FSE
//!    at their next UPDATE).
//! 6. **A merge is a normal join:** the flow registers in the shared group with its window (rate)
//!    and gets what a joining flow gets, no more: with ack-clocked handover it restarts at one
//!    segment and the others' ACKs release its share one segment at a time; without, it is told at
//!    most its own window ([`crate::tcp::allowance`]) and slow-starts up to a larger share. No
//!    UPDATE is made for it: the join's answer is what it uses, and its next report tells its state.
//! 7. **Not during fast recovery, nor with a timeout:** a connection whose report is in FR, or
//!    carries a timeout, is not moved (an error naming `state` or `timeout`; apply the action once
//!    it has left FR). Its loss belongs to its group's loss event: registered elsewhere in FR, its
//!    next report would begin a second loss event and reduce its new group for the same loss.
//! 8. **No partial changes:** every input is checked before anything changes, including a dry run
//!    of the join on a scratch coupler of the target group's kind when that group exists (the FSE's
//!    own registration check for an FSE group, which makes the FSE move exact); a TCP group that
//!    does not exist yet is probed with the host's default coupler, the one it will be created
//!    with. Should the join still fail after the leave (a coupler whose checks the probe does not
//!    reproduce),
//!    the leave is undone: the flow rejoins its old group, as the last member with its window and
//!    state, otherwise with an empty window, because leave handed its window to the others (seed
//!    003 Fig. 9.6) and joining with it again would grow the aggregate by it. It then gets a
//!    segment and slow-starts back to its share (or is handed it by ACKs): no burst, the aggregate
//!    and the others unchanged. Counted ([`SharingCounters::undone`]). To choose the coupler of a
//!    split flow's group, configure that group before applying the action.
//! 9. **Actions take effect when applied.** [`SharingPolicy::verdict`] does not move a flow; it
//!    returns the actions, and the placement changes when [`SharingPolicy::apply_tcp`],
//!    [`SharingPolicy::apply_fse`] or [`SharingPolicy::commit`] succeeds. An action not applied is
//!    returned again by the next verdict on the pair; an action applied twice, or after the flow
//!    moved, is rejected (the flow is no longer where the action takes it from).
//! 10. **Group ids** of the shared and own groups are allocated upwards from
//!     [`SharingConfig::first_group_id`] (2^63 by default, far from the ids `TcpGroups` and
//!     `Fse` assign automatically, which count up from 0). A destination keeps its shared group id
//!     while it has open flows; its bookkeeping is dropped with its last flow.
//!
//! Memory: O(open flows + remembered destinations), the latter at most `memory_capacity`; the
//! caller [`SharingPolicy::close`]s a flow when it ends. Deterministic: no clock, no randomness,
//! no decision depends on hash-map order. Every call that records something at `now` rejects time
//! going backwards.

use crate::error::Error;
use crate::fse::{Assignment, Fse};
use crate::group::{FlowId, GroupId, Grouping};
use crate::tcp::{CouplerKind, Response, TcpGroups, TcpState, TcpUpdate};
use crate::units::{check_not_before, check_rate, Duration, Instant};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// How long false sharing detected to a destination is remembered: the crate's TCB cache expiry
/// (see the module docs, item 4).
pub const DEFAULT_MEMORY_EXPIRY: Duration = Duration::from_secs(600);
/// How many destinations the memory holds by default (about 100 bytes each).
pub const DEFAULT_MEMORY_CAPACITY: usize = 4096;
/// The first group id the policy allocates by default.
pub const DEFAULT_FIRST_GROUP_ID: u64 = 1 << 63;

/// A destination: the granularity of a macroflow (seed 000 sec. 1, "a common destination host").
///
/// An opaque 128-bit key. `From<IpAddr>` gives the host's address, IPv4 as its IPv4-mapped IPv6
/// address (`::ffff:a.b.c.d`), so both families share one key space without collisions. A caller
/// that groups more finely (e.g. per destination port, as RFC 2140bis sec. 8 suggests against ECMP) or
/// more coarsely (a subnet) computes its own key, e.g. a hash of address and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dest(pub u128);

impl From<IpAddr> for Dest {
    fn from(addr: IpAddr) -> Dest {
        let v6 = match addr {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        Dest(u128::from(v6))
    }
}

/// Configuration of a [`SharingPolicy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharingConfig {
    /// How long after the latest detection of false sharing to a destination new flows to it start
    /// unshared. > 0.
    pub memory_expiry: Duration,
    /// The most destinations remembered; the oldest detection is evicted beyond it. > 0.
    pub memory_capacity: usize,
    /// Group ids are allocated upwards from here.
    pub first_group_id: u64,
}

impl Default for SharingConfig {
    fn default() -> Self {
        SharingConfig {
            memory_expiry: DEFAULT_MEMORY_EXPIRY,
            memory_capacity: DEFAULT_MEMORY_CAPACITY,
            first_group_id: DEFAULT_FIRST_GROUP_ID,
        }
    }
}

impl SharingConfig {
    /// Checks every field; the error names the first bad one.
    pub fn check(&self) -> Result<(), Error> {
        if self.memory_expiry == Duration::ZERO {
            return Err(Error::InvalidValue {
                field: "memory_expiry",
                value: 0.0,
                expected: "a duration of at least 1 ns",
            });
        }
        if self.memory_capacity == 0 {
            return Err(Error::InvalidValue {
                field: "memory_capacity",
                value: 0.0,
                expected: "room for at least one destination",
            });
        }
        Ok(())
    }
}

/// A detector's answer for a pair of flows, as the caller maps it (e.g. from
/// `falseshare::Decision`, or from an SBD grouping).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The flows share their bottleneck(s): they belong in one group.
    Share,
    /// False sharing: they do not share every bottleneck.
    NoShare,
    /// Not enough evidence: nothing changes.
    Inconclusive,
}

/// Where a flow is: its group, and whether that is its destination's shared group (or a group of
/// its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    pub group: GroupId,
    pub shared: bool,
}

impl Placement {
    /// The grouping to register the flow with (`TcpGroups::register`, `Fse::register`).
    pub fn grouping(&self) -> Grouping {
        Grouping::Explicit(self.group)
    }
}

/// A regrouping the policy decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `flow` leaves the shared group `from_group` and goes on alone in `to_group`.
    Split {
        flow: FlowId,
        from_group: GroupId,
        to_group: GroupId,
    },
    /// `flow` leaves its own group `from_group` and joins the shared group `into_group`.
    Merge {
        flow: FlowId,
        from_group: GroupId,
        into_group: GroupId,
    },
}

impl Action {
    pub fn flow(&self) -> FlowId {
        match *self {
            Action::Split { flow, .. } | Action::Merge { flow, .. } => flow,
        }
    }
    pub fn from_group(&self) -> GroupId {
        match *self {
            Action::Split { from_group, .. } | Action::Merge { from_group, .. } => from_group,
        }
    }
    /// The group the flow ends up in.
    pub fn to_group(&self) -> GroupId {
        match *self {
            Action::Split { to_group, .. } => to_group,
            Action::Merge { into_group, .. } => into_group,
        }
    }
}

/// What the policy has done, for tests and traces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharingCounters {
    /// Flows opened in their destination's shared group.
    pub opened_shared: u64,
    /// Flows opened alone because their destination was remembered.
    pub opened_alone: u64,
    pub closed: u64,
    /// Verdicts received, by kind.
    pub share: u64,
    pub no_share: u64,
    pub inconclusive: u64,
    /// Share verdicts on a pair already in the shared group: no-ops.
    pub redundant_share: u64,
    /// NoShare verdicts on a pair already apart: no-ops (the memory is still refreshed).
    pub redundant_no_share: u64,
    /// Actions applied (or committed).
    pub splits: u64,
    pub merges: u64,
    /// Moves whose join failed after the leave, undone (module docs item 8).
    pub undone: u64,
    /// Destinations newly remembered.
    pub memory_recorded: u64,
    /// Detections to a destination already remembered (its time moved to the new detection).
    pub memory_refreshed: u64,
    pub memory_expired: u64,
    /// Destinations dropped to stay within `memory_capacity`.
    pub memory_evicted: u64,
    /// Destinations erased by [`SharingPolicy::forget`].
    pub memory_forgotten: u64,
}

/// The outcome of moving a flow between FSE groups.
#[derive(Clone, Debug, PartialEq)]
pub struct FseMoved {
    /// The group the flow is in now.
    pub group: GroupId,
    /// The rate the flow uses from now on (its registration's answer: its current rate).
    pub rate_bps: f64,
    /// The new rates of the flows remaining in its old group (active algorithms: leave
    /// redistributes at once; empty for the passive ones). Deliver them.
    pub assignments: Vec<Assignment>,
}

/// Destinations to which false sharing was detected, with the time of the latest detection:
/// bounded, oldest detection evicted first.
#[derive(Clone, Debug)]
struct Memory {
    expiry: Duration,
    capacity: usize,
    by_dest: FxHashMap<Dest, (Instant, u64)>,
    /// (detected, sequence number) -> destination: oldest first.
    by_age: BTreeMap<(Instant, u64), Dest>,
    next_seq: u64,
}

impl Memory {
    fn new(expiry: Duration, capacity: usize) -> Self {
        Memory {
            expiry,
            capacity,
            by_dest: FxHashMap::default(),
            by_age: BTreeMap::new(),
            next_seq: 0,
        }
    }

    fn live(&self, detected: Instant, now: Instant) -> bool {
        now.saturating_since(detected) <= self.expiry
    }

    fn get(&self, dest: Dest, now: Instant) -> Option<Instant> {
        self.by_dest
            .get(&dest)
            .map(|&(t, _)| t)
            .filter(|&t| self.live(t, now))
    }

    /// Drops every expired entry; returns how many.
    fn purge(&mut self, now: Instant) -> u64 {
        let mut n = 0;
        while let Some((&(t, seq), &dest)) = self.by_age.first_key_value() {
            if self.live(t, now) {
                break;
            }
            self.by_age.remove(&(t, seq));
            self.by_dest.remove(&dest);
            n += 1;
        }
        n
    }

    fn record(&mut self, dest: Dest, now: Instant, counters: &mut SharingCounters) {
        counters.memory_expired += self.purge(now);
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.by_dest.insert(dest, (now, seq)) {
            self.by_age.remove(&old);
            counters.memory_refreshed += 1;
        } else {
            counters.memory_recorded += 1;
            if self.by_dest.len() > self.capacity {
                let (_, oldest) = self.by_age.pop_first().expect("more entries than capacity");
                self.by_dest.remove(&oldest);
                counters.memory_evicted += 1;
            }
        }
        self.by_age.insert((now, seq), dest);
    }

    fn forget(&mut self, dest: Dest) -> bool {
        match self.by_dest.remove(&dest) {
            Some(key) => {
                self.by_age.remove(&key);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.by_dest.len()
    }
}

#[derive(Clone, Debug)]
struct FlowEntry {
    dest: Dest,
    /// Opening order: "the younger flow" of a pair.
    seq: u64,
    group: GroupId,
    shared: bool,
}

#[derive(Clone, Debug)]
struct DestEntry {
    /// The destination's shared group.
    shared: GroupId,
    /// Open flows to it, shared or not.
    flows: usize,
}

/// What opening a flow will do, checked before anything changes.
struct OpenPlan {
    placement: Placement,
    new_dest: bool,
}

/// The response to false sharing for one host: where new flows go, which flows to split and merge
/// on detectors' verdicts, and the per-destination memory (see the module docs).
#[derive(Clone, Debug)]
pub struct SharingPolicy {
    config: SharingConfig,
    flows: FxHashMap<FlowId, FlowEntry>,
    dests: FxHashMap<Dest, DestEntry>,
    memory: Memory,
    /// The next group id to allocate, as an offset from `first_group_id`.
    next_group: u64,
    next_flow_seq: u64,
    last_now: Instant,
    counters: SharingCounters,
}

impl SharingPolicy {
    pub fn new(config: SharingConfig) -> Result<Self, Error> {
        config.check()?;
        Ok(SharingPolicy {
            config,
            flows: FxHashMap::default(),
            dests: FxHashMap::default(),
            memory: Memory::new(config.memory_expiry, config.memory_capacity),
            next_group: 0,
            next_flow_seq: 0,
            last_now: Instant::ZERO,
            counters: SharingCounters::default(),
        })
    }

    pub fn config(&self) -> SharingConfig {
        self.config
    }

    pub fn counters(&self) -> SharingCounters {
        self.counters
    }

    /// Open flows.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Destinations remembered (expired ones included until the next call that purges).
    pub fn memory_len(&self) -> usize {
        self.memory.len()
    }

    fn check_time(&self, now: Instant) -> Result<(), Error> {
        check_not_before(now, self.last_now)
    }

    /// The `k`-th group id from the next free one, if the id space has room for it.
    fn peek_group(&self, k: u64) -> Result<GroupId, Error> {
        self.next_group
            .checked_add(k)
            .and_then(|off| self.config.first_group_id.checked_add(off))
            .map(GroupId)
            .ok_or(Error::InvalidValue {
                field: "first_group_id",
                value: self.config.first_group_id as f64,
                expected: "room for another group id above first_group_id",
            })
    }

    fn take_group(&mut self) -> GroupId {
        let g = self.peek_group(0).expect("checked by the caller");
        self.next_group += 1;
        g
    }

    fn plan_open(&self, flow: FlowId, dest: Dest, now: Instant) -> Result<OpenPlan, Error> {
        self.check_time(now)?;
        if self.flows.contains_key(&flow) {
            return Err(Error::DuplicateFlow(flow));
        }
        let alone = self.memory.get(dest, now).is_some();
        let existing = self.dests.get(&dest).map(|d| d.shared);
        let mut k = 0;
        let shared = match existing {
            Some(g) => g,
            None => {
                k += 1;
                self.peek_group(0)?
            }
        };
        let group = if alone { self.peek_group(k)? } else { shared };
        Ok(OpenPlan {
            placement: Placement {
                group,
                shared: !alone,
            },
            new_dest: existing.is_none(),
        })
    }

    fn commit_open(&mut self, flow: FlowId, dest: Dest, now: Instant, plan: &OpenPlan) {
        self.last_now = now;
        self.counters.memory_expired += self.memory.purge(now);
        if plan.new_dest {
            let shared = self.take_group();
            self.dests.insert(dest, DestEntry { shared, flows: 0 });
        }
        self.dests.get_mut(&dest).expect("inserted above").flows += 1;
        if !plan.placement.shared {
            let own = self.take_group();
            debug_assert_eq!(own, plan.placement.group);
            self.counters.opened_alone += 1;
        } else {
            self.counters.opened_shared += 1;
        }
        let seq = self.next_flow_seq;
        self.next_flow_seq += 1;
        self.flows.insert(
            flow,
            FlowEntry {
                dest,
                seq,
                group: plan.placement.group,
                shared: plan.placement.shared,
            },
        );
    }

    /// A new flow to `dest`: returns the group it joins (register it with
    /// [`Placement::grouping`]): the destination's shared group, or a group of its own while false
    /// sharing to the destination is remembered (seed 000 sec. 5.1).
    pub fn open(&mut self, flow: FlowId, dest: Dest, now: Instant) -> Result<Placement, Error> {
        let plan = self.plan_open(flow, dest, now)?;
        self.commit_open(flow, dest, now, &plan);
        Ok(plan.placement)
    }

    /// [`Self::open`] and `TcpGroups::register` in one step: if either fails, neither changes.
    #[allow(clippy::too_many_arguments)]
    pub fn open_tcp(
        &mut self,
        groups: &mut TcpGroups,
        flow: FlowId,
        dest: Dest,
        now: Instant,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> Result<(Placement, Response), Error> {
        let plan = self.plan_open(flow, dest, now)?;
        let (_, r) = groups.register(
            flow,
            &plan.placement.grouping(),
            priority,
            cwnd_pkts,
            ssthresh_pkts,
        )?;
        self.commit_open(flow, dest, now, &plan);
        Ok((plan.placement, r))
    }

    /// [`Self::open`] and `Fse::register` in one step: if either fails, neither changes. Returns
    /// the placement and the rate the flow uses now.
    pub fn open_fse(
        &mut self,
        fse: &mut Fse,
        flow: FlowId,
        dest: Dest,
        now: Instant,
        priority: f64,
        initial_rate_bps: f64,
    ) -> Result<(Placement, f64), Error> {
        let plan = self.plan_open(flow, dest, now)?;
        let (_, rate) = fse.register(
            flow,
            &plan.placement.grouping(),
            priority,
            initial_rate_bps,
            now,
        )?;
        self.commit_open(flow, dest, now, &plan);
        Ok((plan.placement, rate))
    }

    /// The flow has ended (the caller leaves its coupler). Returns where it was.
    pub fn close(&mut self, flow: FlowId) -> Result<Placement, Error> {
        let e = self.flows.remove(&flow).ok_or(Error::UnknownFlow(flow))?;
        let d = self
            .dests
            .get_mut(&e.dest)
            .expect("an open flow's destination");
        d.flows -= 1;
        if d.flows == 0 {
            self.dests.remove(&e.dest);
        }
        self.counters.closed += 1;
        Ok(Placement {
            group: e.group,
            shared: e.shared,
        })
    }

    pub fn placement(&self, flow: FlowId) -> Result<Placement, Error> {
        self.flows
            .get(&flow)
            .map(|e| Placement {
                group: e.group,
                shared: e.shared,
            })
            .ok_or(Error::UnknownFlow(flow))
    }

    /// The shared group of a destination with open flows.
    pub fn shared_group(&self, dest: Dest) -> Option<GroupId> {
        self.dests.get(&dest).map(|d| d.shared)
    }

    /// A detector's verdict on flows `a` and `b` (to the same destination) at `now`. Returns the
    /// regrouping actions, at most two, which take effect when applied ([`Self::apply_tcp`],
    /// [`Self::apply_fse`], [`Self::commit`]); a NoShare also records the destination in the
    /// memory at once. See the module docs, items 1-4 and 9.
    pub fn verdict(
        &mut self,
        a: FlowId,
        b: FlowId,
        verdict: Verdict,
        now: Instant,
    ) -> Result<Vec<Action>, Error> {
        self.check_time(now)?;
        let ea = self.flows.get(&a).ok_or(Error::UnknownFlow(a))?;
        let eb = self.flows.get(&b).ok_or(Error::UnknownFlow(b))?;
        if a == b {
            return Err(Error::InvalidValue {
                field: "b",
                value: b.0 as f64,
                expected: "a flow other than a",
            });
        }
        if ea.dest != eb.dest {
            return Err(Error::InvalidValue {
                field: "b",
                value: b.0 as f64,
                expected: "a flow to the same destination as a (a macroflow is per destination)",
            });
        }
        let (older, younger) = if ea.seq < eb.seq {
            ((a, ea), (b, eb))
        } else {
            ((b, eb), (a, ea))
        };
        let dest = ea.dest;
        let shared = self.dests[&dest].shared;
        let mut actions = Vec::new();
        match verdict {
            Verdict::Inconclusive => {}
            Verdict::NoShare => {
                if older.1.shared && younger.1.shared {
                    actions.push(Action::Split {
                        flow: younger.0,
                        from_group: younger.1.group,
                        to_group: self.peek_group(0)?,
                    });
                }
            }
            Verdict::Share => {
                for (flow, e) in [older, younger] {
                    if !e.shared {
                        actions.push(Action::Merge {
                            flow,
                            from_group: e.group,
                            into_group: shared,
                        });
                    }
                }
            }
        }
        // Everything checked: record.
        self.last_now = now;
        match verdict {
            Verdict::Inconclusive => self.counters.inconclusive += 1,
            Verdict::NoShare => {
                self.counters.no_share += 1;
                self.memory.record(dest, now, &mut self.counters);
                if actions.is_empty() {
                    self.counters.redundant_no_share += 1;
                } else {
                    self.take_group();
                }
            }
            Verdict::Share => {
                self.counters.share += 1;
                if actions.is_empty() {
                    self.counters.redundant_share += 1;
                }
            }
        }
        Ok(actions)
    }

    /// Checks that `action` applies to the flow where the policy has it now.
    fn check_action(&self, action: &Action) -> Result<(), Error> {
        let flow = action.flow();
        let e = self.flows.get(&flow).ok_or(Error::UnknownFlow(flow))?;
        let shared = self.dests[&e.dest].shared;
        let (must_be_shared, expected_flow) = match action {
            Action::Split { .. } => (
                true,
                "a flow in its destination's shared group (only a sharing flow is split; \
                 was the action applied already?)",
            ),
            Action::Merge { .. } => (
                false,
                "a flow in a group of its own (only an unshared flow is merged; was the action \
                 applied already?)",
            ),
        };
        if e.shared != must_be_shared {
            return Err(Error::InvalidValue {
                field: "flow",
                value: flow.0 as f64,
                expected: expected_flow,
            });
        }
        if action.from_group() != e.group {
            return Err(Error::InvalidValue {
                field: "from_group",
                value: action.from_group().0 as f64,
                expected: "the group the policy has the flow in",
            });
        }
        match *action {
            Action::Split { to_group, .. } if to_group == shared => Err(Error::InvalidValue {
                field: "to_group",
                value: to_group.0 as f64,
                expected: "a group of the flow's own, not its destination's shared group",
            }),
            Action::Merge { into_group, .. } if into_group != shared => Err(Error::InvalidValue {
                field: "into_group",
                value: into_group.0 as f64,
                expected: "the flow's destination's shared group",
            }),
            _ => Ok(()),
        }
    }

    fn commit_checked(&mut self, action: &Action) {
        let e = self.flows.get_mut(&action.flow()).expect("checked action");
        e.group = action.to_group();
        match action {
            Action::Split { .. } => {
                e.shared = false;
                self.counters.splits += 1;
            }
            Action::Merge { .. } => {
                e.shared = true;
                self.counters.merges += 1;
            }
        }
    }

    /// Records that the caller applied `action` by other means (its own coupler).
    pub fn commit(&mut self, action: &Action) -> Result<(), Error> {
        self.check_action(action)?;
        self.commit_checked(action);
        Ok(())
    }

    /// Applies `action` to TCP-CCC (or other TCP coupler) groups: a split with [`split_tcp`], a
    /// merge with [`merge_tcp`]; `current` is what the connection would report now (its window,
    /// ssthresh, state and segments in flight). Returns the window and ssthresh it uses from now
    /// on. On error nothing changes (module docs item 8 for the one exception).
    pub fn apply_tcp(
        &mut self,
        groups: &mut TcpGroups,
        action: &Action,
        current: TcpUpdate,
    ) -> Result<Response, Error> {
        self.check_action(action)?;
        let join = match action {
            Action::Split { .. } => Join::Alone,
            Action::Merge { .. } => Join::Member,
        };
        let moved = move_tcp(
            groups,
            action.flow(),
            Some(action.from_group()),
            action.to_group(),
            &current,
            join,
            true,
        );
        self.finish(action, moved)
    }

    /// Applies `action` to FSE groups: the flow leaves its group and registers in the other with
    /// `rate_bps`, the rate it uses now. On error nothing changes.
    pub fn apply_fse(
        &mut self,
        fse: &mut Fse,
        action: &Action,
        rate_bps: f64,
        now: Instant,
    ) -> Result<FseMoved, Error> {
        self.check_action(action)?;
        let join = match action {
            Action::Split { .. } => Join::Alone,
            Action::Merge { .. } => Join::Member,
        };
        let moved = move_fse(
            fse,
            action.flow(),
            Some(action.from_group()),
            action.to_group(),
            rate_bps,
            now,
            join,
            true,
        );
        self.finish(action, moved)
    }

    fn finish<T>(&mut self, action: &Action, moved: Result<T, Failed>) -> Result<T, Error> {
        match moved {
            Ok(r) => {
                self.commit_checked(action);
                Ok(r)
            }
            Err(f) => {
                if f.undone {
                    self.counters.undone += 1;
                }
                Err(f.error)
            }
        }
    }

    /// Records false sharing detected to `dest` at `now` (a NoShare verdict does this itself).
    pub fn remember(&mut self, dest: Dest, now: Instant) -> Result<(), Error> {
        self.check_time(now)?;
        self.last_now = now;
        self.memory.record(dest, now, &mut self.counters);
        Ok(())
    }

    /// When false sharing to `dest` was last detected, if that is remembered at `now`.
    pub fn remembered(&self, dest: Dest, now: Instant) -> Option<Instant> {
        self.memory.get(dest, now)
    }

    /// Erases what is remembered about `dest`; returns whether there was anything.
    pub fn forget(&mut self, dest: Dest) -> bool {
        let found = self.memory.forget(dest);
        if found {
            self.counters.memory_forgotten += 1;
        }
        found
    }

    /// Drops the destinations whose memory has expired at `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> Result<u64, Error> {
        self.check_time(now)?;
        self.last_now = now;
        let n = self.memory.purge(now);
        self.counters.memory_expired += n;
        Ok(n)
    }
}

/// How a moved flow joins its new group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Join {
    /// A split: alone, with its own state (module docs item 5).
    Alone,
    /// A merge: the normal join (item 6).
    Member,
}

impl Join {
    fn target_field(self) -> &'static str {
        match self {
            Join::Alone => "to_group",
            Join::Member => "into_group",
        }
    }
}

/// A move that failed; `undone` when the failure came after the leave and the leave was undone.
struct Failed {
    error: Error,
    undone: bool,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Self {
        Failed {
            error,
            undone: false,
        }
    }
}

/// The checks on a move's source and target common to TCP and FSE.
fn check_move(
    from: GroupId,
    expected_from: Option<GroupId>,
    to: GroupId,
    join: Join,
) -> Result<(), Error> {
    if let Some(e) = expected_from.filter(|&e| e != from) {
        return Err(Error::InvalidValue {
            field: "from_group",
            value: e.0 as f64,
            expected: "the group the flow is registered in",
        });
    }
    if to == from {
        return Err(Error::InvalidValue {
            field: join.target_field(),
            value: to.0 as f64,
            expected: "a group other than the one the flow is in",
        });
    }
    Ok(())
}

fn target_not_empty(to: GroupId) -> Error {
    Error::InvalidValue {
        field: "to_group",
        value: to.0 as f64,
        expected: "a group without flows (a split flow goes on alone)",
    }
}

/// A connection's report as the state it is moved with (module docs item 7).
fn check_current(u: &TcpUpdate) -> Result<(), Error> {
    u.check()?;
    if u.timeout {
        return Err(Error::InvalidValue {
            field: "timeout",
            value: 1.0,
            expected: "a report without a timeout (report the timeout to the connection's group, \
                       then move it)",
        });
    }
    if u.state == TcpState::FastRecovery {
        return Err(Error::InvalidValue {
            field: "state",
            value: 2.0,
            expected: "slow start (0) or congestion avoidance (1): a connection in fast recovery \
                       is moved after it leaves it, as its loss belongs to its group",
        });
    }
    Ok(())
}

/// Splits connection `flow` out of its group into `to_group` (a group without connections,
/// created with the host's default coupler if it does not exist): it leaves its group (seed 003
/// Algorithm 6), registers alone with the window and ssthresh of `current`, and `current` is
/// reported, so it goes on with exactly the window, ssthresh and state it had (module docs item
/// 5). Returns the coupler's answer (that window and ssthresh). Nothing changes on error, except
/// as module docs item 8 describes.
pub fn split_tcp(
    groups: &mut TcpGroups,
    flow: FlowId,
    to_group: GroupId,
    current: TcpUpdate,
) -> Result<Response, Error> {
    move_tcp(groups, flow, None, to_group, &current, Join::Alone, true).map_err(|f| f.error)
}

/// Merges connection `flow` into `into_group`: it leaves its group and registers there through the
/// normal join (seed 003 Algorithm 5; ack-clocked handover, Algorithm 4, where the group runs it),
/// with the window and ssthresh of `current`. Returns the join's answer.
pub fn merge_tcp(
    groups: &mut TcpGroups,
    flow: FlowId,
    into_group: GroupId,
    current: TcpUpdate,
) -> Result<Response, Error> {
    move_tcp(groups, flow, None, into_group, &current, Join::Member, true).map_err(|f| f.error)
}

/// Splits FSE flow `flow` out of its group into `to_group` (a group without flows, created with
/// the FSE's default algorithm if it does not exist), registering it there with `rate_bps`.
pub fn split_fse(
    fse: &mut Fse,
    flow: FlowId,
    to_group: GroupId,
    rate_bps: f64,
    now: Instant,
) -> Result<FseMoved, Error> {
    move_fse(fse, flow, None, to_group, rate_bps, now, Join::Alone, true).map_err(|f| f.error)
}

/// Merges FSE flow `flow` into `into_group` with `rate_bps` (a normal registration).
pub fn merge_fse(
    fse: &mut Fse,
    flow: FlowId,
    into_group: GroupId,
    rate_bps: f64,
    now: Instant,
) -> Result<FseMoved, Error> {
    move_fse(
        fse,
        flow,
        None,
        into_group,
        rate_bps,
        now,
        Join::Member,
        true,
    )
    .map_err(|f| f.error)
}

/// Leave, then join `to` (module docs items 5-8). `dry_run` is off only in the tests of the undo.
fn move_tcp(
    groups: &mut TcpGroups,
    flow: FlowId,
    expected_from: Option<GroupId>,
    to: GroupId,
    current: &TcpUpdate,
    join: Join,
    dry_run: bool,
) -> Result<Response, Failed> {
    let from = groups.group_of(flow)?;
    check_move(from, expected_from, to, join)?;
    check_current(current)?;
    let origin = groups.group(from)?;
    let priority = origin.conn(flow)?.priority;
    let was_last = origin.len() == 1;
    let target = groups.group(to).ok();
    if join == Join::Alone && target.is_some_and(|g| !g.is_empty()) {
        return Err(target_not_empty(to).into());
    }
    if dry_run {
        // A group that does not exist yet is created with the host's default coupler.
        let kind = match target {
            Some(g) => CouplerKind::from_name(g.name()),
            None => Some(groups.default_kind()),
        };
        if let Some(kind) = kind {
            // The join's checks depend only on the coupler's kind and the inputs (the flow is in
            // no other group of this host), so a scratch coupler of that kind answers for it.
            let mut probe = kind.build();
            probe.set_max_burst_pkts(groups.max_burst_pkts())?;
            probe.register(flow, priority, current.cwnd_pkts, current.ssthresh_pkts)?;
            if join == Join::Alone {
                probe.update(flow, *current)?;
            }
        }
    }
    groups.leave(flow)?;
    let joined = match groups.register(
        flow,
        &Grouping::Explicit(to),
        priority,
        current.cwnd_pkts,
        current.ssthresh_pkts,
    ) {
        Ok((_, r)) if join == Join::Member => Ok(r),
        // Its own report: the coupler learns its state, so it is not taken for a slow-starter.
        Ok((_, r)) => groups.update(flow, *current).map(|u| u.unwrap_or(r)),
        Err(e) => Err(e),
    };
    joined.map_err(|error| {
        if groups.group_of(flow).is_ok() {
            groups.leave(flow).expect("just registered");
        }
        rejoin_tcp(groups, flow, from, priority, was_last, current);
        Failed {
            error,
            undone: true,
        }
    })
}

/// Undoes a leave (module docs item 8).
fn rejoin_tcp(
    groups: &mut TcpGroups,
    flow: FlowId,
    from: GroupId,
    priority: f64,
    was_last: bool,
    current: &TcpUpdate,
) {
    const TAKEN_BACK: &str = "the flow's group takes back what it accepted before";
    let grouping = Grouping::Explicit(from);
    if was_last {
        groups
            .register(
                flow,
                &grouping,
                priority,
                current.cwnd_pkts,
                current.ssthresh_pkts,
            )
            .expect(TAKEN_BACK);
        groups.update(flow, *current).expect(TAKEN_BACK);
    } else {
        groups
            .register(flow, &grouping, priority, 0.0, current.ssthresh_pkts)
            .expect(TAKEN_BACK);
    }
}

#[allow(clippy::too_many_arguments)]
fn move_fse(
    fse: &mut Fse,
    flow: FlowId,
    expected_from: Option<GroupId>,
    to: GroupId,
    rate_bps: f64,
    now: Instant,
    join: Join,
    dry_run: bool,
) -> Result<FseMoved, Failed> {
    let from = fse.group_of(flow)?;
    check_move(from, expected_from, to, join)?;
    let rate = check_rate("rate_bps", rate_bps)?;
    let origin = fse.group(from)?;
    let priority = origin.flow(flow)?.priority;
    let was_last = origin.len() == 1;
    let target = fse.group(to).ok();
    if join == Join::Alone && target.is_some_and(|g| !g.is_empty()) {
        return Err(target_not_empty(to).into());
    }
    if dry_run {
        // Exactly the checks `Fse::register` makes (a group it creates starts at time zero).
        if let Some(g) = target {
            g.check_register(flow, priority, rate, now)?;
        }
    }
    let assignments = fse.leave(flow)?;
    match fse.register(flow, &Grouping::Explicit(to), priority, rate, now) {
        Ok((group, rate_bps)) => Ok(FseMoved {
            group,
            rate_bps,
            assignments,
        }),
        Err(error) => {
            // Undo (module docs item 8): leave kept the flow's rate in S_CR for the others.
            let back = if was_last { rate } else { 0.0 };
            fse.register(flow, &Grouping::Explicit(from), priority, back, now)
                .expect("the flow's group takes back what it accepted before");
            Err(Failed {
                error,
                undone: true,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fse::{Algorithm, FseConfig, FseUpdate};

    /// The undo of a TCP move whose join fails, for a connection alone in its group: it is back
    /// with exactly its window, ssthresh and state.
    #[test]
    fn a_failed_join_of_a_last_member_restores_its_window() {
        let mut g = TcpGroups::new(CouplerKind::ccc(false));
        let from = Grouping::Explicit(GroupId(1));
        g.register(FlowId(1), &from, 1e-6, 30.0, 15.0).unwrap();
        let cur = TcpUpdate::new(30.0, 15.0, TcpState::CongestionAvoidance).with_in_flight(30.0);
        g.update(FlowId(1), cur).unwrap();
        g.configure_group(
            GroupId(2),
            CouplerKind::Ccc {
                handover: false,
                int: true,
            },
        )
        .unwrap();
        let before = g.group(GroupId(1)).unwrap().conn(FlowId(1)).unwrap();
        // With the dry run the failure is caught before any change...
        let dump = format!("{g:?}");
        let e = move_tcp(&mut g, FlowId(1), None, GroupId(2), &cur, Join::Alone, true)
            .err()
            .unwrap();
        assert!(!e.undone);
        assert_eq!(dump, format!("{g:?}"));
        // ...without it, after the leave, and undone.
        let e = move_tcp(
            &mut g,
            FlowId(1),
            None,
            GroupId(2),
            &cur,
            Join::Alone,
            false,
        )
        .err()
        .unwrap();
        assert!(e.undone);
        assert!(matches!(
            e.error,
            Error::InvalidValue {
                field: "priority",
                ..
            }
        ));
        assert_eq!(g.group_of(FlowId(1)).unwrap(), GroupId(1));
        let after = g.group(GroupId(1)).unwrap().conn(FlowId(1)).unwrap();
        assert_eq!(after, before);
        assert!(g.group(GroupId(2)).unwrap().is_empty());
    }

    /// The undo of an FSE move: the dry run is exact for the FSE, so only without it can the join
    /// fail after the leave. The flow is back in its group, S_CR unchanged.
    #[test]
    fn a_failed_fse_join_is_undone() {
        let mut fse = Fse::new(FseConfig {
            default_algorithm: Algorithm::SimplePassive,
            soft_state_timeout: None,
        });
        let home = Grouping::Explicit(GroupId(1));
        fse.register(FlowId(1), &home, 1.0, 2e6, Instant::ZERO)
            .unwrap();
        fse.register(FlowId(2), &home, 1.0, 2e6, Instant::ZERO)
            .unwrap();
        fse.register(
            FlowId(3),
            &Grouping::Explicit(GroupId(9)),
            1.0,
            1e6,
            Instant::ZERO,
        )
        .unwrap();
        fse.update(FlowId(3), FseUpdate::new(1e6, Instant::from_secs(5)))
            .unwrap();
        let s_cr = fse.group(GroupId(1)).unwrap().sum_calculated_rate();
        let now = Instant::from_secs(1);
        let e = move_fse(
            &mut fse,
            FlowId(2),
            None,
            GroupId(9),
            2e6,
            now,
            Join::Member,
            true,
        )
        .err()
        .unwrap();
        assert!(!e.undone, "the dry run saw it");
        let e = move_fse(
            &mut fse,
            FlowId(2),
            None,
            GroupId(9),
            2e6,
            now,
            Join::Member,
            false,
        )
        .err()
        .unwrap();
        assert!(e.undone);
        assert!(matches!(e.error, Error::TimeWentBackwards { .. }));
        assert_eq!(fse.group_of(FlowId(2)).unwrap(), GroupId(1));
        let home = fse.group(GroupId(1)).unwrap();
        assert_eq!(home.len(), 2);
        assert_eq!(home.sum_calculated_rate(), s_cr, "no rate counted twice");
    }

    #[test]
    fn memory_keeps_its_two_indexes_in_step() {
        let mut m = Memory::new(Duration::from_secs(1), 3);
        let mut c = SharingCounters::default();
        for (d, ms) in [(1, 0), (2, 100), (1, 200), (3, 300), (4, 400), (5, 1_250)] {
            m.record(Dest(d), Instant::from_millis(ms), &mut c);
            assert_eq!(m.by_dest.len(), m.by_age.len());
            assert!(m.len() <= 3);
        }
        // At 0.4 s the oldest detection, 2's (0.1 s), is evicted for 4; at 1.25 s 1's (0.2 s)
        // has expired.
        assert_eq!((c.memory_expired, c.memory_evicted), (1, 1));
        assert_eq!(m.get(Dest(1), Instant::from_millis(1_250)), None);
        assert_eq!(
            m.get(Dest(3), Instant::from_millis(1_250)),
            Some(Instant::from_millis(300))
        );
        assert!(m.forget(Dest(3)));
        assert_eq!(m.by_dest.len(), m.by_age.len());
    }
}
