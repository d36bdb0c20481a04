//! Flow groups: which flows are coupled together.
//!
//! RFC 8699 sec. 5.1 names three ways for SBD to put flows into one Flow Group (FG, identified by its
//! FGI): by multiplexing (same five-tuple and DSCP: "SBD MAY consider all flows that use the same
//! five-tuple and DSCP to belong to the same FG"), by configuration (e.g. a common wireless uplink),
//! and by measurement (later issues: shared-bottleneck and false-sharing detectors). [`Grouping`]
//! covers the first two and an explicit FGI chosen by the caller (how measurement-based SBD hands
//! its verdict in). [`FlowGroups`] is the registry every coupler uses: FGI -> group state, flow ->
//! FGI, and the classifier that turns a [`Grouping`] into an FGI.

use crate::error::Error;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;

/// A flow (or TCP connection, "cid") identifier, unique within one coupler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u64);

/// A Flow Group Identifier (FGI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u64);

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FGI {}", self.0)
    }
}

/// IP source and destination address, protocol and transport port pair (RFC 8699 sec. 5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FiveTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

/// How a registering flow finds its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// The caller names the FGI (e.g. the verdict of a measurement-based SBD).
    Explicit(GroupId),
    /// SBD method 1, multiplexing: flows with the same five-tuple and DSCP share a group.
    Multiplexed { tuple: FiveTuple, dscp: u8 },
    /// SBD method 2, configuration: flows given the same label (e.g. "wlan0 uplink") share a group.
    Configured(String),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Multiplexed(FiveTuple, u8),
    Configured(String),
}

/// Maps grouping keys to FGIs. Automatically assigned FGIs never collide with explicit ones in use,
/// and a key's FGI is forgotten when its group empties, so memory follows the live groups.
#[derive(Debug, Default)]
struct Classifier {
    by_key: BTreeMap<Key, GroupId>,
    key_of: HashMap<GroupId, Key>,
    next_auto: u64,
}

/// The state of one coupled group, as the registry needs to see it.
pub trait GroupState {
    /// No flow is registered in the group.
    fn is_empty(&self) -> bool;
}

/// The registry shared by the couplers: group state `G` per FGI, and the FGI of every flow.
#[derive(Debug)]
pub struct FlowGroups<G> {
    groups: BTreeMap<GroupId, G>,
    /// Groups configured explicitly: kept (empty) when their last flow leaves, so their
    /// configuration survives.
    pinned: BTreeSet<GroupId>,
    flow_group: HashMap<FlowId, GroupId>,
    classifier: Classifier,
}

impl<G> Default for FlowGroups<G> {
    fn default() -> Self {
        FlowGroups {
            groups: BTreeMap::new(),
            pinned: BTreeSet::new(),
            flow_group: HashMap::new(),
            classifier: Classifier::default(),
        }
    }
}

impl<G> FlowGroups<G> {
    /// Validates a grouping without changing anything.
    pub fn check(grouping: &Grouping) -> Result<(), Error> {
        if let Grouping::Multiplexed { dscp, .. } = grouping {
            if *dscp > 63 {
                return Err(Error::InvalidValue {
                    field: "dscp",
                    value: *dscp as f64,
                    expected: "a DSCP in 0..=63",
                });
            }
        }
        Ok(())
    }

    /// The FGI this grouping resolves to, creating the group with `make` if it does not exist.
    /// Call only after every other input of the registration has been validated.
    pub fn resolve(
        &mut self,
        grouping: &Grouping,
        make: impl FnOnce(GroupId) -> G,
    ) -> Result<GroupId, Error> {
        Self::check(grouping)?;
        let key = match grouping {
            Grouping::Explicit(gid) => {
                self.groups.entry(*gid).or_insert_with(|| make(*gid));
                return Ok(*gid);
            }
            Grouping::Multiplexed { tuple, dscp } => Key::Multiplexed(*tuple, *dscp),
            Grouping::Configured(label) => Key::Configured(label.clone()),
        };
        if let Some(gid) = self.classifier.by_key.get(&key) {
            return Ok(*gid);
        }
        let mut candidate = self.classifier.next_auto;
        while self.groups.contains_key(&GroupId(candidate)) {
            candidate += 1;
        }
        let gid = GroupId(candidate);
        self.classifier.next_auto = candidate + 1;
        self.classifier.by_key.insert(key.clone(), gid);
        self.classifier.key_of.insert(gid, key);
        self.groups.insert(gid, make(gid));
        Ok(gid)
    }

    pub fn contains_flow(&self, flow: FlowId) -> bool {
        self.flow_group.contains_key(&flow)
    }

    pub fn group_of(&self, flow: FlowId) -> Result<GroupId, Error> {
        self.flow_group
            .get(&flow)
            .copied()
            .ok_or(Error::UnknownFlow(flow))
    }

    pub fn bind(&mut self, flow: FlowId, gid: GroupId) {
        self.flow_group.insert(flow, gid);
    }

    pub fn unbind(&mut self, flow: FlowId) {
        self.flow_group.remove(&flow);
    }

    pub fn group(&self, gid: GroupId) -> Result<&G, Error> {
        self.groups.get(&gid).ok_or(Error::UnknownGroup(gid))
    }

    pub fn group_mut(&mut self, gid: GroupId) -> Result<&mut G, Error> {
        self.groups.get_mut(&gid).ok_or(Error::UnknownGroup(gid))
    }

    /// The group of a registered flow.
    pub fn group_of_flow_mut(&mut self, flow: FlowId) -> Result<(GroupId, &mut G), Error> {
        let gid = self.group_of(flow)?;
        Ok((
            gid,
            self.groups
                .get_mut(&gid)
                .expect("a bound flow's group exists"),
        ))
    }

    /// Creates group `gid` with state `g`, or replaces the state of an existing empty group; a
    /// configured group is kept (empty) when its last flow leaves.
    pub fn configure(&mut self, gid: GroupId, g: G) -> Result<(), Error>
    where
        G: GroupState,
    {
        if self.groups.get(&gid).is_some_and(|g| !g.is_empty()) {
            return Err(Error::GroupNotEmpty(gid));
        }
        self.groups.insert(gid, g);
        self.pinned.insert(gid);
        Ok(())
    }

    /// Removes an empty group, configured or not.
    pub fn remove_empty_group(&mut self, gid: GroupId) -> Result<(), Error>
    where
        G: GroupState,
    {
        if !self.group(gid)?.is_empty() {
            return Err(Error::GroupNotEmpty(gid));
        }
        self.remove_group(gid);
        Ok(())
    }

    /// Call when a group's last flow has left: drops it unless it was configured.
    pub fn release_empty(&mut self, gid: GroupId) {
        if !self.pinned.contains(&gid) {
            self.remove_group(gid);
        }
    }

    /// Drops a group, configured or not, and forgets its classifier key.
    pub fn remove_group(&mut self, gid: GroupId) {
        self.groups.remove(&gid);
        self.pinned.remove(&gid);
        if let Some(key) = self.classifier.key_of.remove(&gid) {
            self.classifier.by_key.remove(&key);
        }
    }

    /// Group ids in ascending order.
    pub fn group_ids(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.groups.keys().copied()
    }

    /// The groups in ascending id order.
    pub fn groups(&self) -> impl Iterator<Item = (GroupId, &G)> + '_ {
        self.groups.iter().map(|(k, v)| (*k, v))
    }

    pub fn groups_mut(&mut self) -> impl Iterator<Item = (GroupId, &mut G)> + '_ {
        self.groups.iter_mut().map(|(k, v)| (*k, v))
    }

    pub fn flow_count(&self) -> usize {
        self.flow_group.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn tuple(port: u16) -> FiveTuple {
        FiveTuple {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            protocol: 17,
            src_port: port,
            dst_port: 5004,
        }
    }

    #[test]
    fn same_five_tuple_and_dscp_share_a_group() {
        let mut g: FlowGroups<()> = FlowGroups::default();
        let a = g
            .resolve(
                &Grouping::Multiplexed {
                    tuple: tuple(1),
                    dscp: 0,
                },
                |_| (),
            )
            .unwrap();
        let b = g
            .resolve(
                &Grouping::Multiplexed {
                    tuple: tuple(1),
                    dscp: 0,
                },
                |_| (),
            )
            .unwrap();
        let c = g
            .resolve(
                &Grouping::Multiplexed {
                    tuple: tuple(1),
                    dscp: 46,
                },
                |_| (),
            )
            .unwrap();
        let d = g
            .resolve(
                &Grouping::Multiplexed {
                    tuple: tuple(2),
                    dscp: 0,
                },
                |_| (),
            )
            .unwrap();
        assert_eq!(a, b);
        assert_ne!(
            a, c,
            "a different DSCP may be treated differently on the path"
        );
        assert_ne!(a, d);
    }

    #[test]
    fn automatic_ids_avoid_explicit_ones() {
        let mut g: FlowGroups<()> = FlowGroups::default();
        g.resolve(&Grouping::Explicit(GroupId(0)), |_| ()).unwrap();
        let c = g
            .resolve(&Grouping::Configured("wlan0".into()), |_| ())
            .unwrap();
        assert_ne!(c, GroupId(0));
        assert_eq!(
            c,
            g.resolve(&Grouping::Configured("wlan0".into()), |_| ())
                .unwrap()
        );
        g.remove_group(c);
        assert!(g.group(c).is_err());
    }

    #[test]
    fn bad_dscp_is_rejected_without_creating_a_group() {
        let mut g: FlowGroups<()> = FlowGroups::default();
        let err = g
            .resolve(
                &Grouping::Multiplexed {
                    tuple: tuple(1),
                    dscp: 64,
                },
                |_| (),
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidValue { field: "dscp", .. }));
        assert_eq!(g.group_ids().count(), 0);
    }
}
