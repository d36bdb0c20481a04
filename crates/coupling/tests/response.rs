//! The response to false sharing (seed 000 sec. 5): share by default, split a flow out of its
//! destination's group on a NoShare verdict without a burst or a slow-start restart, merge it back
//! on a Share verdict through the coupler's normal join (ack-clocked handover), and start new flows
//! to a destination with detected false sharing unshared until the memory expires. TCP-CCC groups
//! ([`TcpGroups`]) and FSE groups ([`Fse`]) alike.

use coupling::fse::{Algorithm, Fse, FseConfig, FseUpdate};
use coupling::response::{
    merge_tcp, split_fse, split_tcp, Action, Dest, Placement, SharingConfig, SharingPolicy,
    Verdict, DEFAULT_MEMORY_EXPIRY,
};
use coupling::tcp::{allowance, CouplerKind, TcpGroups, TcpState, TcpUpdate};
use coupling::{Duration, Error, FlowId, GroupId, Instant};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const MBPS: f64 = 1e6;

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn policy() -> SharingPolicy {
    SharingPolicy::new(SharingConfig::default()).unwrap()
}

fn dest(last: u8) -> Dest {
    Dest::from(IpAddr::V4(Ipv4Addr::new(192, 0, 2, last)))
}

/// A Reno-like sender driven over a `TcpGroups` one RTT at a time (the style of
/// `tests/common`, which drives a single coupler): every change is reported with UPDATE, the answer
/// is applied, and every answer is checked against `allowance` (no burst).
#[derive(Clone, Debug)]
struct Sender {
    id: FlowId,
    cwnd: f64,
    ssthresh: f64,
    state: TcpState,
}

impl Sender {
    fn new(id: u64) -> Self {
        Sender {
            id: FlowId(id),
            cwnd: 10.0,
            // A finite initial ssthresh: EFCM sums the members' ssthresh (one of its faults, seed
            // 003 sec. 9.2), so with 1e9 its flows would never leave slow start.
            ssthresh: 64.0,
            state: TcpState::SlowStart,
        }
    }

    /// What the sender would report now, unchanged: its window, all of it in flight.
    fn current(&self) -> TcpUpdate {
        TcpUpdate::new(self.cwnd, self.ssthresh, self.state).with_in_flight(self.cwnd)
    }

    fn report(&mut self, g: &mut TcpGroups, u: TcpUpdate) {
        let r = g.update(self.id, u).unwrap();
        self.state = u.state;
        self.cwnd = u.cwnd_pkts;
        self.ssthresh = u.ssthresh_pkts;
        if let Some(r) = r {
            let allowed = allowance(&u, g.max_burst_pkts());
            assert!(
                r.cwnd_pkts <= allowed + 1e-9,
                "{:?}: told {} > allowance {allowed} for {u:?}",
                self.id,
                r.cwnd_pkts
            );
            self.cwnd = r.cwnd_pkts;
            self.ssthresh = r.ssthresh_pkts;
            self.state = if self.cwnd < self.ssthresh {
                TcpState::SlowStart
            } else {
                TcpState::CongestionAvoidance
            };
        }
    }

    /// One RTT: slow start doubles, congestion avoidance adds one segment, FR ends with
    /// cwnd = ssthresh.
    fn round(&mut self, g: &mut TcpGroups) {
        let in_flight = self.cwnd;
        let (cwnd, state) = match self.state {
            TcpState::SlowStart if self.cwnd * 2.0 >= self.ssthresh => (
                self.ssthresh.max(self.cwnd + 1.0),
                TcpState::CongestionAvoidance,
            ),
            TcpState::SlowStart => (self.cwnd * 2.0, TcpState::SlowStart),
            TcpState::CongestionAvoidance => (self.cwnd + 1.0, TcpState::CongestionAvoidance),
            TcpState::FastRecovery => (self.ssthresh, TcpState::CongestionAvoidance),
        };
        self.report(
            g,
            TcpUpdate::new(cwnd, self.ssthresh, state).with_in_flight(in_flight),
        );
    }

    /// A drop: ssthresh = cwnd / 2 and Fast Recovery (no answer in FR).
    fn drop_packet(&mut self, g: &mut TcpGroups) {
        let ssthresh = (self.cwnd / 2.0).max(2.0);
        self.report(
            g,
            TcpUpdate::new(self.cwnd, ssthresh, TcpState::FastRecovery).with_in_flight(self.cwnd),
        );
    }
}

/// Clocks a joiner's ack-clocked handover to its end with `clock`'s ACKs (nothing to do for
/// couplers without handover), applying each released window.
fn finish_handover(g: &mut TcpGroups, clock: &Sender, joiner: &mut Sender) {
    let mut out = Vec::new();
    for _ in 0..100_000 {
        let gid = g.group_of(joiner.id).unwrap();
        if g.group(gid)
            .unwrap()
            .conn(joiner.id)
            .unwrap()
            .handover
            .is_none()
        {
            return;
        }
        out.clear();
        g.on_ack(clock.id, &mut out).unwrap();
        for r in &out {
            assert_eq!(r.conn, joiner.id);
            joiner.cwnd = r.cwnd_pkts;
        }
    }
    panic!("the handover did not end");
}

/// Two Reno senders to one destination, registered in the group the policy chooses, brought into
/// congestion avoidance by a loss and a few rounds.
fn two_in_ca(kind: CouplerKind) -> (SharingPolicy, TcpGroups, Sender, Sender, GroupId) {
    let mut p = policy();
    let mut g = TcpGroups::new(kind);
    let mut a = Sender::new(1);
    let mut b = Sender::new(2);
    let mut shared = None;
    for s in [&mut a, &mut b] {
        let (_, r) = p
            .open_tcp(&mut g, s.id, dest(7), t(0), 1.0, s.cwnd, s.ssthresh)
            .unwrap();
        assert!(
            r.cwnd_pkts <= s.cwnd,
            "a joiner is told no more than its window"
        );
        s.cwnd = r.cwnd_pkts;
        s.ssthresh = r.ssthresh_pkts;
        shared = Some(p.placement(s.id).unwrap().group);
    }
    finish_handover(&mut g, &a, &mut b);
    for _ in 0..3 {
        a.round(&mut g);
        b.round(&mut g);
    }
    a.drop_packet(&mut g);
    for _ in 0..4 {
        a.round(&mut g);
        b.round(&mut g);
    }
    assert_eq!(
        a.state,
        TcpState::CongestionAvoidance,
        "{}: {a:?}",
        kind.name()
    );
    assert_eq!(b.state, TcpState::CongestionAvoidance, "{b:?}");
    (p, g, a, b, shared.unwrap())
}

// ---------------------------------------------------------------------------------------------
// Placement of new flows and the per-destination memory.
// ---------------------------------------------------------------------------------------------

/// Seed 000 sec. 5.1: share by default; "once false-sharing has been detected to a particular
/// destination, the default behavior for immediate future connections ... should be to not share
/// congestion state". The memory lasts `memory_expiry` (inclusive) from the detection.
#[test]
fn new_flows_share_by_default_and_start_alone_while_false_sharing_is_remembered() {
    let mut p = policy();
    let a = p.open(FlowId(1), dest(1), t(0)).unwrap();
    let b = p.open(FlowId(2), dest(1), t(0)).unwrap();
    assert!(a.shared && b.shared);
    assert_eq!(a.group, b.group, "flows to one destination share a group");
    assert_eq!(p.shared_group(dest(1)), Some(a.group));
    let other = p.open(FlowId(3), dest(2), t(0)).unwrap();
    assert!(other.shared);
    assert_ne!(other.group, a.group, "another destination, another group");

    let detected = t(5_000);
    let actions = p
        .verdict(FlowId(1), FlowId(2), Verdict::NoShare, detected)
        .unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(p.remembered(dest(1), detected), Some(detected));
    assert_eq!(p.remembered(dest(2), detected), None);

    // Other destinations are unaffected.
    assert!(p.open(FlowId(6), dest(2), detected).unwrap().shared);
    // Within the expiry (and at its last instant): a group of its own, distinct from every other.
    let expiry = p.config().memory_expiry;
    assert_eq!(expiry, DEFAULT_MEMORY_EXPIRY);
    let c = p.open(FlowId(4), dest(1), detected + expiry).unwrap();
    assert!(!c.shared);
    assert_ne!(c.group, a.group);
    let d = p.open(FlowId(5), dest(1), detected + expiry).unwrap();
    assert!(!d.shared);
    assert_ne!(d.group, c.group, "each unshared flow is alone");

    // After the expiry it shares again.
    let later = detected + expiry + Duration::from_nanos(1);
    let e = p.open(FlowId(7), dest(1), later).unwrap();
    assert_eq!(
        e,
        Placement {
            group: a.group,
            shared: true
        }
    );
    assert_eq!(p.remembered(dest(1), later), None);
    let n = p.counters();
    assert_eq!((n.opened_shared, n.opened_alone), (5, 2));
}

/// The default expiry is the crate's TCB cache expiry (tcb.rs, RFC 9040): 10 minutes.
#[test]
fn the_default_memory_expiry_is_the_tcb_cache_expiry() {
    assert_eq!(DEFAULT_MEMORY_EXPIRY, Duration::from_secs(600));
    assert_eq!(
        SharingConfig::default().memory_expiry,
        coupling::tcb::TcbConfig::default().expiry
    );
}

/// Every NoShare refreshes the memory; `expire` drops what has expired and counts it; `forget`
/// drops one destination.
#[test]
fn memory_is_refreshed_by_detection_and_expires_counted() {
    let mut p = SharingPolicy::new(SharingConfig {
        memory_expiry: Duration::from_secs(10),
        ..SharingConfig::default()
    })
    .unwrap();
    p.remember(dest(1), t(0)).unwrap();
    p.remember(dest(2), t(1_000)).unwrap();
    p.remember(dest(1), t(5_000)).unwrap(); // refreshed
    assert_eq!(p.memory_len(), 2);
    assert_eq!(p.expire(t(11_000)).unwrap(), 0, "dest 2 expires after 11 s");
    assert_eq!(p.expire(t(11_001)).unwrap(), 1);
    assert_eq!(p.remembered(dest(1), t(11_001)), Some(t(5_000)));
    assert_eq!(p.remembered(dest(2), t(11_001)), None);
    assert!(p.forget(dest(1)));
    assert!(!p.forget(dest(1)));
    assert_eq!(p.memory_len(), 0);
    let n = p.counters();
    assert_eq!(
        (n.memory_recorded, n.memory_refreshed, n.memory_expired),
        (2, 1, 1)
    );
}

/// Memory is bounded: 10^6 destinations recorded with capacity C keep at most C entries, the
/// oldest detections are evicted first, and every eviction is counted.
#[test]
fn memory_of_a_million_destinations_stays_within_capacity() {
    const C: usize = 1000;
    const N: u64 = 1_000_000;
    let mut p = SharingPolicy::new(SharingConfig {
        memory_capacity: C,
        ..SharingConfig::default()
    })
    .unwrap();
    let mut max_len = 0;
    for i in 0..N {
        p.remember(Dest(u128::from(i)), Instant::from_nanos(i))
            .unwrap();
        max_len = max_len.max(p.memory_len());
    }
    let now = Instant::from_nanos(N);
    assert_eq!(max_len, C);
    assert_eq!(p.memory_len(), C);
    let n = p.counters();
    assert_eq!(n.memory_evicted, N - C as u64);
    assert_eq!(n.memory_recorded, N);
    assert_eq!(n.memory_expired, 0);
    assert!(p.remembered(Dest(u128::from(N - 1)), now).is_some());
    assert!(p.remembered(Dest(u128::from(N - C as u64)), now).is_some());
    assert!(p
        .remembered(Dest(u128::from(N - C as u64 - 1)), now)
        .is_none());
    assert!(p.remembered(Dest(0), now).is_none());
}

/// IPv4 and IPv6 destinations map to distinct keys (IPv4 as IPv4-mapped IPv6).
#[test]
fn destinations_from_addresses() {
    let v4 = Dest::from(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    let mapped = Dest::from(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped()));
    assert_eq!(v4, mapped, "one host, one key");
    assert_ne!(v4, Dest::from(IpAddr::V6(Ipv6Addr::LOCALHOST)));
    assert_eq!(v4.0, 0xffff_0a00_0001);
}

// ---------------------------------------------------------------------------------------------
// Verdicts: the regrouping actions and their hysteresis.
// ---------------------------------------------------------------------------------------------

/// NoShare splits the younger flow of a shared pair into a group of its own; Share merges it
/// back; nothing else regroups.
#[test]
fn verdicts_give_split_and_merge_actions() {
    let mut p = policy();
    let shared = p.open(FlowId(1), dest(1), t(0)).unwrap().group;
    p.open(FlowId(2), dest(1), t(0)).unwrap();
    p.open(FlowId(3), dest(1), t(0)).unwrap();
    let actions = p
        .verdict(FlowId(2), FlowId(1), Verdict::NoShare, t(1))
        .unwrap();
    let [Action::Split {
        flow,
        from_group,
        to_group,
    }] = actions[..]
    else {
        panic!("{actions:?}")
    };
    assert_eq!(
        (flow, from_group),
        (FlowId(2), shared),
        "the younger of the pair leaves"
    );
    assert_ne!(to_group, shared);
    // Not applied yet: the placement has not changed, and the same verdict gives the same split.
    assert!(p.placement(FlowId(2)).unwrap().shared);
    p.commit(&actions[0]).unwrap();
    assert_eq!(
        p.placement(FlowId(2)).unwrap(),
        Placement {
            group: to_group,
            shared: false
        }
    );
    assert_eq!(p.placement(FlowId(3)).unwrap().group, shared, "3 stays");

    let back = p
        .verdict(FlowId(1), FlowId(2), Verdict::Share, t(2))
        .unwrap();
    assert_eq!(
        back,
        vec![Action::Merge {
            flow: FlowId(2),
            from_group: to_group,
            into_group: shared
        }]
    );
    p.commit(&back[0]).unwrap();
    assert_eq!(p.placement(FlowId(2)).unwrap().group, shared);
    let n = p.counters();
    assert_eq!((n.splits, n.merges), (1, 1));
}

/// Inconclusive changes nothing (only its counter); a NoShare on a pair already apart and a Share
/// on a pair already together are counted no-ops.
#[test]
fn inconclusive_and_repeated_verdicts_change_nothing() {
    let mut p = policy();
    p.open(FlowId(1), dest(1), t(0)).unwrap();
    p.open(FlowId(2), dest(1), t(0)).unwrap();
    let placements = |p: &SharingPolicy| [1, 2].map(|f| p.placement(FlowId(f)).unwrap());
    let before = placements(&p);
    for _ in 0..3 {
        assert!(p
            .verdict(FlowId(1), FlowId(2), Verdict::Inconclusive, t(1))
            .unwrap()
            .is_empty());
    }
    assert_eq!(placements(&p), before);
    assert_eq!(
        p.memory_len(),
        0,
        "an inconclusive verdict is not a detection"
    );
    assert_eq!(p.counters().inconclusive, 3);
    assert_eq!(p.counters().redundant_share, 0);
    assert!(p
        .verdict(FlowId(1), FlowId(2), Verdict::Share, t(1))
        .unwrap()
        .is_empty());
    assert_eq!(p.counters().redundant_share, 1, "already sharing");

    let split = p
        .verdict(FlowId(1), FlowId(2), Verdict::NoShare, t(2))
        .unwrap();
    p.commit(&split[0]).unwrap();
    let apart = placements(&p);
    for k in 0..4 {
        assert!(p
            .verdict(FlowId(2), FlowId(1), Verdict::NoShare, t(3 + k))
            .unwrap()
            .is_empty());
    }
    assert_eq!(placements(&p), apart);
    let n = p.counters();
    assert_eq!((n.no_share, n.redundant_no_share, n.splits), (5, 4, 1));
    assert_eq!(
        p.remembered(dest(1), t(10)),
        Some(t(6)),
        "every NoShare refreshes the memory"
    );
    // Hysteresis: neither time nor Inconclusive merges a split pair back.
    let much_later = t(6) + DEFAULT_MEMORY_EXPIRY.saturating_mul(10);
    assert!(p
        .verdict(FlowId(1), FlowId(2), Verdict::Inconclusive, much_later)
        .unwrap()
        .is_empty());
    assert_eq!(placements(&p), apart);
}

/// Two flows that both started alone (remembered destination) and are then found to share are
/// both merged into the destination's shared group.
#[test]
fn a_share_verdict_on_two_unshared_flows_merges_both() {
    let mut p = policy();
    p.remember(dest(1), t(0)).unwrap();
    let a = p.open(FlowId(1), dest(1), t(1)).unwrap();
    let b = p.open(FlowId(2), dest(1), t(1)).unwrap();
    assert!(!a.shared && !b.shared);
    let shared = p.shared_group(dest(1)).unwrap();
    let actions = p
        .verdict(FlowId(2), FlowId(1), Verdict::Share, t(2))
        .unwrap();
    assert_eq!(
        actions,
        vec![
            Action::Merge {
                flow: FlowId(1),
                from_group: a.group,
                into_group: shared
            },
            Action::Merge {
                flow: FlowId(2),
                from_group: b.group,
                into_group: shared
            },
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Applying the actions to TCP-CCC groups.
// ---------------------------------------------------------------------------------------------

/// A split on a TCP-CCC group of two Reno flows in congestion avoidance: the split flow keeps the
/// window it was using (its share) and its ssthresh and state (no slow-start restart), the other
/// member continues, and no answer allows a burst beyond `allowance` (checked in every report).
#[test]
fn a_split_keeps_the_window_and_state_and_allows_no_burst() {
    for kind in CouplerKind::ALL {
        let (mut p, mut g, mut a, mut b, shared) = two_in_ca(kind);
        let a_before = g.group(shared).unwrap().conn(a.id).unwrap();
        let sum_before = g.group(shared).unwrap().sum_cwnd();
        let actions = p.verdict(a.id, b.id, Verdict::NoShare, t(10)).unwrap();
        let [Action::Split { to_group, .. }] = actions[..] else {
            panic!("{actions:?}")
        };
        let current = b.current();
        let r = p.apply_tcp(&mut g, &actions[0], current).unwrap();
        let k = kind.name();
        assert_eq!(r.cwnd_pkts, current.cwnd_pkts, "{k}: the window it had");
        assert_eq!(r.ssthresh_pkts, current.ssthresh_pkts, "{k}: its ssthresh");
        assert!(r.ssthresh_pkts <= r.cwnd_pkts, "{k}: not in slow start");
        assert!(
            r.cwnd_pkts <= allowance(&current, g.max_burst_pkts()),
            "{k}"
        );
        let view = g.group(to_group).unwrap().conn(b.id).unwrap();
        assert_eq!(view.state, TcpState::CongestionAvoidance, "{k}");
        assert_eq!(view.cwnd_pkts, current.cwnd_pkts, "{k}");
        assert_eq!(g.group_of(b.id).unwrap(), to_group, "{k}");
        assert_eq!(g.group(to_group).unwrap().len(), 1, "{k}: alone");
        assert_eq!(p.placement(b.id).unwrap().group, to_group, "{k}");
        // The other member: only what leave does (Algorithm 6).
        let group = g.group(shared).unwrap();
        assert_eq!(group.len(), 1, "{k}");
        assert_eq!(
            group.conn(a.id).unwrap().cwnd_pkts,
            a_before.cwnd_pkts,
            "{k}"
        );
        if matches!(kind, CouplerKind::Ccc { .. }) {
            assert_eq!(
                group.sum_cwnd(),
                sum_before,
                "{k}: leave keeps the aggregate"
            );
        }
        // Both continue; the split flow grows by one segment per RTT in congestion avoidance.
        let before = b.cwnd;
        b.round(&mut g);
        assert_eq!(b.cwnd, before + 1.0, "{k}: congestion avoidance on its own");
        assert_eq!(b.state, TcpState::CongestionAvoidance, "{k}");
        let a_cwnd = a.cwnd;
        for _ in 0..20 {
            a.round(&mut g);
            b.round(&mut g);
        }
        assert!(a.cwnd >= a_cwnd, "{k}: the other member continues");
        // A loss of the split flow reduces only its own group.
        let a_sum = g.group(shared).unwrap().sum_cwnd();
        b.drop_packet(&mut g);
        b.round(&mut g);
        assert_eq!(g.group(shared).unwrap().sum_cwnd(), a_sum, "{k}");
    }
}

/// Merge back with ack-clocked handover: the flow joins the shared group with one segment and the
/// others' ACKs release its share one segment at a time (seed 003 Algorithm 4), never a burst.
#[test]
fn a_merge_joins_by_ack_clocked_handover() {
    for int in [false, true] {
        let kind = CouplerKind::Ccc {
            handover: true,
            int,
        };
        let (mut p, mut g, mut a, mut b, shared) = two_in_ca(kind);
        let split = p.verdict(a.id, b.id, Verdict::NoShare, t(10)).unwrap();
        p.apply_tcp(&mut g, &split[0], b.current()).unwrap();
        let solo = p.placement(b.id).unwrap().group;
        for _ in 0..5 {
            a.round(&mut g);
            b.round(&mut g);
        }
        let merge = p.verdict(a.id, b.id, Verdict::Share, t(20)).unwrap();
        assert_eq!(
            merge,
            vec![Action::Merge {
                flow: b.id,
                from_group: solo,
                into_group: shared
            }]
        );
        let current = b.current();
        let r = p.apply_tcp(&mut g, &merge[0], current).unwrap();
        assert_eq!(r.cwnd_pkts, 1.0, "a joiner starts with one segment");
        assert_eq!(g.group_of(b.id).unwrap(), shared);
        assert!(g.group(solo).is_err(), "its own group is gone");
        assert_eq!(p.placement(b.id).unwrap().group, shared);
        let (released, target) = g
            .group(shared)
            .unwrap()
            .conn(b.id)
            .unwrap()
            .handover
            .expect("in handover");
        assert_eq!(released, 1);
        assert!(target > 1.0);
        // a's ACKs release b's share one segment at a time.
        let mut out = Vec::new();
        let mut last = r.cwnd_pkts;
        let mut done = false;
        for _ in 0..10_000 {
            out.clear();
            g.on_ack(a.id, &mut out).unwrap();
            assert!(out.len() <= 1, "at most one release per ACK");
            if let Some(rel) = out.first() {
                assert_eq!(rel.conn, b.id);
                if rel.done {
                    assert!(rel.cwnd_pkts <= target + 1e-9);
                    done = true;
                    break;
                }
                assert_eq!(rel.cwnd_pkts, last + 1.0, "one segment per release");
                last = rel.cwnd_pkts;
            }
        }
        assert!(done, "the handover completes");
        assert_eq!(p.counters().merges, 1);
    }
}

/// Without handover, a merged flow is told at most its own window (its share if smaller) and
/// slow-starts to its share on its own ACK clock if that is larger.
#[test]
fn a_merge_without_handover_is_bounded_by_the_flows_window() {
    let (mut p, mut g, a, mut b, shared) = two_in_ca(CouplerKind::ccc(false));
    let split = p.verdict(a.id, b.id, Verdict::NoShare, t(10)).unwrap();
    p.apply_tcp(&mut g, &split[0], b.current()).unwrap();
    for _ in 0..10 {
        b.round(&mut g); // b alone grows past its old share
    }
    let merge = p.verdict(a.id, b.id, Verdict::Share, t(20)).unwrap();
    let current = b.current();
    let r = p.apply_tcp(&mut g, &merge[0], current).unwrap();
    assert!(r.cwnd_pkts <= allowance(&current, g.max_burst_pkts()));
    let group = g.group(shared).unwrap();
    let share = group.sum_cwnd() / 2.0;
    assert_eq!(r.cwnd_pkts, share.min(current.cwnd_pkts));
}

/// The free functions do the same without a policy.
#[test]
fn split_and_merge_functions_work_without_a_policy() {
    let (_, mut g, _, b, shared) = two_in_ca(CouplerKind::ccc(false));
    let current = b.current();
    let r = split_tcp(&mut g, b.id, GroupId(77), current).unwrap();
    assert_eq!(r.cwnd_pkts, current.cwnd_pkts);
    assert_eq!(g.group_of(b.id).unwrap(), GroupId(77));
    merge_tcp(&mut g, b.id, shared, current).unwrap();
    assert_eq!(g.group_of(b.id).unwrap(), shared);
    assert!(g.group(GroupId(77)).is_err());
}

/// A split into a group that does not exist yet is probed with the host's default coupler, the one
/// it would be created with: here the integer mode, which cannot hold the flow's priority. The
/// split is refused before the flow leaves: nothing changes, nothing needs undoing. (The undo
/// itself is tested in response.rs's unit tests, with the probe switched off.)
#[test]
fn a_split_the_new_group_cannot_take_is_refused_before_anything_changes() {
    let mut p = policy();
    let mut g = TcpGroups::new(CouplerKind::Ccc {
        handover: false,
        int: true,
    });
    let mut a = Sender::new(1);
    let mut b = Sender::new(2);
    // The host runs the integer mode by default; this destination's group is configured to the
    // float mode before its first flow registers.
    let placed = p.open(a.id, dest(1), t(0)).unwrap();
    let shared = placed.group;
    g.configure_group(shared, CouplerKind::ccc(false)).unwrap();
    g.register(a.id, &placed.grouping(), 1.0, a.cwnd, a.ssthresh)
        .unwrap();
    let (_, r) = p
        .open_tcp(&mut g, b.id, dest(1), t(0), 1e-6, b.cwnd, b.ssthresh)
        .unwrap();
    b.cwnd = r.cwnd_pkts;
    b.ssthresh = r.ssthresh_pkts;
    for _ in 0..3 {
        a.round(&mut g);
        b.round(&mut g);
    }
    let a_before = g.group(shared).unwrap().conn(a.id).unwrap();
    let sum_before = g.group(shared).unwrap().sum_cwnd();
    let groups_before = g.group_ids();
    let placement_before = p.placement(b.id).unwrap();
    let b_before = g.group(shared).unwrap().conn(b.id).unwrap();
    let split = p.verdict(a.id, b.id, Verdict::NoShare, t(10)).unwrap();
    let err = p.apply_tcp(&mut g, &split[0], b.current()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidValue {
                field: "priority",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(g.group_of(b.id).unwrap(), shared, "still in its group");
    assert_eq!(g.group_ids(), groups_before, "no group left behind");
    let group = g.group(shared).unwrap();
    assert_eq!(group.sum_cwnd(), sum_before, "the aggregate is unchanged");
    assert_eq!(
        group.conn(a.id).unwrap(),
        a_before,
        "the other member is untouched"
    );
    assert_eq!(group.conn(b.id).unwrap(), b_before, "the flow is untouched");
    assert_eq!(p.placement(b.id).unwrap(), placement_before);
    assert_eq!((p.counters().undone, p.counters().splits), (0, 0));
}

/// A merge the shared group's coupler cannot take is caught by the dry run before the flow leaves
/// its own group: nothing changes, nothing is undone, and the action stays applicable.
#[test]
fn a_merge_the_shared_group_cannot_take_changes_nothing() {
    let mut p = policy();
    let mut g = TcpGroups::new(CouplerKind::ccc(false));
    let placed = p.open(FlowId(1), dest(1), t(0)).unwrap();
    g.configure_group(
        placed.group,
        CouplerKind::Ccc {
            handover: false,
            int: true,
        },
    )
    .unwrap();
    g.register(FlowId(1), &placed.grouping(), 1.0, 10.0, 64.0)
        .unwrap();
    p.remember(dest(1), t(1)).unwrap();
    let (own, _) = p
        .open_tcp(&mut g, FlowId(2), dest(1), t(1), 1e-6, 10.0, 64.0)
        .unwrap();
    assert!(!own.shared);
    let merge = p
        .verdict(FlowId(1), FlowId(2), Verdict::Share, t(2))
        .unwrap();
    let (p_before, g_before) = (format!("{p:?}"), format!("{g:?}"));
    let current = TcpUpdate::new(10.0, 64.0, TcpState::SlowStart).with_in_flight(10.0);
    let e = p.apply_tcp(&mut g, &merge[0], current).unwrap_err();
    assert_eq!(invalid_field(&e), "priority");
    assert_eq!(p.counters().undone, 0);
    assert_eq!(p_before, format!("{p:?}"));
    assert_eq!(g_before, format!("{g:?}"));
    assert_eq!(g.group_of(FlowId(2)).unwrap(), own.group);
}

// ---------------------------------------------------------------------------------------------
// Applying the actions to FSE groups.
// ---------------------------------------------------------------------------------------------

/// The same split and merge on an FSE group, for every algorithm: the moved flow keeps its rate,
/// the rates leave gives the remaining flows are returned (not dropped), and it comes back through
/// a normal registration.
#[test]
fn split_and_merge_on_an_fse_group() {
    let rtt = Duration::from_millis(100);
    for algorithm in Algorithm::ALL {
        let name = algorithm.name();
        let mut p = policy();
        let mut fse = Fse::new(FseConfig {
            default_algorithm: algorithm,
            soft_state_timeout: None,
        });
        let (placed, _) = p
            .open_fse(&mut fse, FlowId(1), dest(1), t(0), 1.0, 4.0 * MBPS)
            .unwrap();
        let shared = placed.group;
        p.open_fse(&mut fse, FlowId(2), dest(1), t(0), 1.0, 6.0 * MBPS)
            .unwrap();
        assert_eq!(fse.group_of(FlowId(2)).unwrap(), shared);
        let mut rate = [4.0 * MBPS, 6.0 * MBPS];
        for (k, now) in [1_000, 2_000, 3_000].into_iter().enumerate() {
            for f in [1usize, 2] {
                let u = FseUpdate::new(rate[f - 1] + k as f64 * 1e5, t(now)).rtt(rtt);
                rate[f - 1] = fse.update(FlowId(f as u64), u).unwrap().rate_bps;
            }
        }
        let s_cr = fse.group(shared).unwrap().sum_calculated_rate();
        let split = p
            .verdict(FlowId(1), FlowId(2), Verdict::NoShare, t(4_000))
            .unwrap();
        let moved = p.apply_fse(&mut fse, &split[0], rate[1], t(4_000)).unwrap();
        let Action::Split { to_group, .. } = split[0] else {
            panic!()
        };
        assert_eq!(moved.group, to_group, "{name}");
        assert_eq!(moved.rate_bps, rate[1], "{name}: it keeps its rate");
        assert_eq!(fse.group_of(FlowId(2)).unwrap(), to_group, "{name}");
        let own = fse.group(to_group).unwrap();
        assert_eq!(own.sum_calculated_rate(), rate[1], "{name}");
        assert_eq!(own.algorithm(), algorithm, "{name}");
        let left = fse.group(shared).unwrap();
        assert_eq!(left.len(), 1, "{name}");
        assert_eq!(left.sum_calculated_rate(), s_cr, "{name}: leave keeps S_CR");
        if algorithm.is_active() {
            assert_eq!(moved.assignments.len(), 1, "{name}: delivered, not dropped");
            assert_eq!(moved.assignments[0].flow, FlowId(1));
            rate[0] = moved.assignments[0].rate_bps;
        } else {
            assert!(moved.assignments.is_empty(), "{name}");
        }
        // Alone, its rate is its controller's.
        let u = FseUpdate::new(rate[1] * 1.5, t(5_000)).rtt(rtt);
        let r = fse.update(FlowId(2), u).unwrap().rate_bps;
        assert!((r - rate[1] * 1.5).abs() <= 1e-9 * r, "{name}: {r}");
        rate[1] = r;

        let merge = p
            .verdict(FlowId(1), FlowId(2), Verdict::Share, t(6_000))
            .unwrap();
        let back = p.apply_fse(&mut fse, &merge[0], rate[1], t(6_000)).unwrap();
        assert_eq!(back.group, shared, "{name}");
        assert_eq!(back.rate_bps, rate[1], "{name}: no step on rejoining");
        assert!(back.assignments.is_empty(), "{name}: it was alone");
        assert!(
            fse.group(to_group).is_err(),
            "{name}: its own group is gone"
        );
        assert_eq!(fse.group(shared).unwrap().len(), 2, "{name}");
        assert_eq!(p.placement(FlowId(2)).unwrap().group, shared, "{name}");
        let n = p.counters();
        assert_eq!((n.splits, n.merges), (1, 1), "{name}");
    }
}

/// The free FSE function without a policy.
#[test]
fn split_fse_function_works_without_a_policy() {
    let mut fse = Fse::new(FseConfig {
        default_algorithm: Algorithm::Active,
        soft_state_timeout: None,
    });
    let g = coupling::Grouping::Explicit(GroupId(5));
    fse.register(FlowId(1), &g, 1.0, 4.0 * MBPS, t(0)).unwrap();
    fse.register(FlowId(2), &g, 1.0, 4.0 * MBPS, t(0)).unwrap();
    let moved = split_fse(&mut fse, FlowId(2), GroupId(6), 4.0 * MBPS, t(1)).unwrap();
    assert_eq!(moved.rate_bps, 4.0 * MBPS);
    assert_eq!(moved.assignments[0].rate_bps, 8.0 * MBPS);
    assert_eq!(fse.group_of(FlowId(2)).unwrap(), GroupId(6));
}

// ---------------------------------------------------------------------------------------------
// Bad input: clear errors naming the field, state unchanged.
// ---------------------------------------------------------------------------------------------

fn invalid_field(e: &Error) -> &'static str {
    match e {
        Error::InvalidValue { field, .. } => field,
        other => panic!("expected InvalidValue, got {other:?}"),
    }
}

#[test]
fn bad_configuration_is_rejected_naming_the_field() {
    for (config, field) in [
        (
            SharingConfig {
                memory_expiry: Duration::ZERO,
                ..SharingConfig::default()
            },
            "memory_expiry",
        ),
        (
            SharingConfig {
                memory_capacity: 0,
                ..SharingConfig::default()
            },
            "memory_capacity",
        ),
    ] {
        let e = SharingPolicy::new(config).unwrap_err();
        assert_eq!(invalid_field(&e), field);
        assert!(e.to_string().contains(field), "{e}");
    }
}

#[test]
fn bad_verdicts_are_rejected_and_change_nothing() {
    let mut p = policy();
    p.open(FlowId(1), dest(1), t(10)).unwrap();
    p.open(FlowId(2), dest(1), t(10)).unwrap();
    p.open(FlowId(3), dest(2), t(10)).unwrap();
    let before = format!("{p:?}");
    let e = p
        .verdict(FlowId(1), FlowId(9), Verdict::NoShare, t(11))
        .unwrap_err();
    assert_eq!(e, Error::UnknownFlow(FlowId(9)));
    let e = p
        .verdict(FlowId(9), FlowId(1), Verdict::Inconclusive, t(11))
        .unwrap_err();
    assert_eq!(e, Error::UnknownFlow(FlowId(9)));
    let e = p
        .verdict(FlowId(1), FlowId(1), Verdict::NoShare, t(11))
        .unwrap_err();
    assert_eq!(invalid_field(&e), "b");
    let e = p
        .verdict(FlowId(1), FlowId(3), Verdict::NoShare, t(11))
        .unwrap_err();
    assert_eq!(invalid_field(&e), "b", "different destinations: {e}");
    let e = p
        .verdict(FlowId(1), FlowId(2), Verdict::NoShare, t(9))
        .unwrap_err();
    assert!(matches!(e, Error::TimeWentBackwards { .. }), "{e}");
    assert!(matches!(
        p.open(FlowId(4), dest(1), t(9)),
        Err(Error::TimeWentBackwards { .. })
    ));
    assert_eq!(
        p.open(FlowId(1), dest(1), t(11)),
        Err(Error::DuplicateFlow(FlowId(1)))
    );
    assert!(matches!(
        p.remember(dest(1), t(9)),
        Err(Error::TimeWentBackwards { .. })
    ));
    assert_eq!(p.close(FlowId(9)), Err(Error::UnknownFlow(FlowId(9))));
    assert_eq!(p.placement(FlowId(9)), Err(Error::UnknownFlow(FlowId(9))));
    assert_eq!(before, format!("{p:?}"), "nothing changed");
}

#[test]
fn bad_actions_on_tcp_groups_are_rejected_and_change_nothing() {
    let (mut p, mut g, a, b, shared) = two_in_ca(CouplerKind::ccc(true));
    // A flow the policy knows but that was never registered with the coupler.
    p.open(FlowId(3), dest(7), t(10)).unwrap();
    let split = p.verdict(a.id, b.id, Verdict::NoShare, t(10)).unwrap();
    let Action::Split { to_group, .. } = split[0] else {
        panic!()
    };
    let p_before = format!("{p:?}");
    let g_before = format!("{g:?}");
    let check = |p: &SharingPolicy, g: &TcpGroups| {
        assert_eq!(p_before, format!("{p:?}"));
        assert_eq!(g_before, format!("{g:?}"));
    };

    let unknown = Action::Split {
        flow: FlowId(9),
        from_group: shared,
        to_group,
    };
    assert_eq!(
        p.apply_tcp(&mut g, &unknown, b.current()),
        Err(Error::UnknownFlow(FlowId(9)))
    );
    check(&p, &g);
    // Not in any group of the coupler.
    assert_eq!(
        split_tcp(&mut g, FlowId(9), to_group, b.current()),
        Err(Error::UnknownFlow(FlowId(9)))
    );
    let never_registered = Action::Split {
        flow: FlowId(3),
        from_group: shared,
        to_group,
    };
    assert_eq!(
        p.apply_tcp(&mut g, &never_registered, b.current()),
        Err(Error::UnknownFlow(FlowId(3)))
    );
    check(&p, &g);
    // The wrong origin group (a stale or forged action).
    let wrong_from = Action::Split {
        flow: b.id,
        from_group: GroupId(12345),
        to_group,
    };
    let e = p.apply_tcp(&mut g, &wrong_from, b.current()).unwrap_err();
    assert_eq!(invalid_field(&e), "from_group");
    check(&p, &g);
    // Splitting into the group it is in, or into a group with flows in it.
    let e = split_tcp(&mut g, b.id, shared, b.current()).unwrap_err();
    assert_eq!(invalid_field(&e), "to_group");
    // A merge of a flow that is in the shared group already.
    let merge_shared = Action::Merge {
        flow: b.id,
        from_group: shared,
        into_group: shared,
    };
    let e = p.apply_tcp(&mut g, &merge_shared, b.current()).unwrap_err();
    assert_eq!(invalid_field(&e), "flow");
    check(&p, &g);
    // The flow's current state: NaN window, FR, a timeout.
    let mut nan = b.current();
    nan.cwnd_pkts = f64::NAN;
    let e = p.apply_tcp(&mut g, &split[0], nan).unwrap_err();
    assert_eq!(invalid_field(&e), "cwnd_pkts");
    let fr = TcpUpdate::new(b.cwnd, b.ssthresh, TcpState::FastRecovery);
    let e = p.apply_tcp(&mut g, &split[0], fr).unwrap_err();
    assert_eq!(invalid_field(&e), "state");
    assert!(e.to_string().contains("fast recovery"), "{e}");
    let to = TcpUpdate::timeout(1.0, b.ssthresh);
    let e = p.apply_tcp(&mut g, &split[0], to).unwrap_err();
    assert_eq!(invalid_field(&e), "timeout");
    check(&p, &g);
    // A merge into a group whose coupler cannot take the flow: caught by the dry run, before any
    // change (the integer mode needs priorities of at least 2^-16).
    g.configure_group(
        GroupId(500),
        CouplerKind::Ccc {
            handover: false,
            int: true,
        },
    )
    .unwrap();
    p.open_tcp(&mut g, FlowId(4), dest(8), t(10), 1e-6, 10.0, 1e9)
        .unwrap();
    let g4 = format!("{g:?}");
    let e = merge_tcp(
        &mut g,
        FlowId(4),
        GroupId(500),
        TcpUpdate::new(10.0, 1e9, TcpState::SlowStart),
    )
    .unwrap_err();
    assert_eq!(invalid_field(&e), "priority");
    assert_eq!(g4, format!("{g:?}"));

    // The valid split still works, once, and then is stale.
    p.apply_tcp(&mut g, &split[0], b.current()).unwrap();
    let g_after = format!("{g:?}");
    let e = p.apply_tcp(&mut g, &split[0], b.current()).unwrap_err();
    assert_eq!(invalid_field(&e), "flow", "an action applied twice");
    assert_eq!(g_after, format!("{g:?}"));
}

#[test]
fn bad_actions_on_fse_groups_are_rejected_and_change_nothing() {
    let mut p = policy();
    let mut fse = Fse::new(FseConfig {
        default_algorithm: Algorithm::Passive,
        soft_state_timeout: None,
    });
    p.open_fse(&mut fse, FlowId(1), dest(1), t(0), 1.0, MBPS)
        .unwrap();
    p.open_fse(&mut fse, FlowId(2), dest(1), t(0), 1.0, MBPS)
        .unwrap();
    fse.update(FlowId(2), FseUpdate::new(MBPS, t(50))).unwrap();
    let split = p
        .verdict(FlowId(1), FlowId(2), Verdict::NoShare, t(60))
        .unwrap();
    let p_before = format!("{p:?}");
    let f_before = format!("{fse:?}");
    for rate in [f64::NAN, -1.0, f64::INFINITY] {
        let e = p.apply_fse(&mut fse, &split[0], rate, t(60)).unwrap_err();
        assert_eq!(invalid_field(&e), "rate_bps");
    }
    assert_eq!(
        split_fse(&mut fse, FlowId(9), GroupId(3), MBPS, t(60)),
        Err(Error::UnknownFlow(FlowId(9)))
    );
    let shared = p.shared_group(dest(1)).unwrap();
    let e = split_fse(&mut fse, FlowId(2), shared, MBPS, t(60)).unwrap_err();
    assert_eq!(invalid_field(&e), "to_group");
    assert_eq!(p_before, format!("{p:?}"));
    assert_eq!(f_before, format!("{fse:?}"));
    // A merge into a group whose time is ahead: caught before the flow leaves its group.
    fse.register(
        FlowId(7),
        &coupling::Grouping::Explicit(GroupId(40)),
        1.0,
        MBPS,
        t(0),
    )
    .unwrap();
    fse.update(FlowId(7), FseUpdate::new(MBPS, t(100))).unwrap();
    let f7 = format!("{fse:?}");
    let e =
        coupling::response::merge_fse(&mut fse, FlowId(2), GroupId(40), MBPS, t(60)).unwrap_err();
    assert!(matches!(e, Error::TimeWentBackwards { .. }), "{e}");
    assert_eq!(f7, format!("{fse:?}"));
}
