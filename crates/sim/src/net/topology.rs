//! Topology builders: the dumbbell of the dissertation's experiments, a parking lot, and a
//! general graph given as nodes and links. Each builder adds to a [`Network`] and computes routes.

use super::queue::QueueConfig;
use super::{LinkConfig, LinkId, Network, NodeId};
use crate::error::SimError;
use coupling::Duration;

/// N sender/receiver pairs on each side of one bottleneck (seed 003 Fig. 6.5, 9.4).
#[derive(Clone, Debug, PartialEq)]
pub struct DumbbellConfig {
    pub pairs: usize,
    /// The bottleneck, configured in both directions alike (its queue matters in the data
    /// direction, left to right).
    pub bottleneck: LinkConfig,
    pub access_rate_bps: u64,
    /// One-way delay of the access links of each pair, on each side: pair i's RTT is
    /// 2 * (bottleneck delay + 2 * access_delays[i]) plus serialization, plus up to
    /// 2 * access_jitter (its mean: access_jitter; data and ACKs are each jittered once).
    pub access_delays: Vec<Duration>,
    pub access_queue: QueueConfig,
    /// The hosts' sending jitter ([`LinkConfig::jitter`]): on each host's link to its router
    /// (data from senders, ACKs from receivers), not on the routers' links to hosts.
    pub access_jitter: Duration,
}

impl DumbbellConfig {
    /// The dissertation's dumbbell (seed 003 sec. 7.3, 9.2.3): 10 Mbit/s bottleneck, RTT 100 ms,
    /// a one-BDP drop-tail queue of 83 packets of 1500 bytes; 1 Gbit/s access links of 1 ms.
    pub fn dissertation(pairs: usize) -> Self {
        DumbbellConfig {
            pairs,
            bottleneck: LinkConfig {
                rate_bps: 10_000_000,
                delay: Duration::from_millis(48),
                queue: QueueConfig::drop_tail_pkts(83),
                jitter: Duration::ZERO,
            },
            access_rate_bps: 1_000_000_000,
            access_delays: vec![Duration::from_millis(1); pairs],
            access_queue: QueueConfig::drop_tail_pkts(1000),
            access_jitter: Duration::ZERO,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Dumbbell {
    pub senders: Vec<NodeId>,
    pub receivers: Vec<NodeId>,
    pub left: NodeId,
    pub right: NodeId,
    /// Left router to right router: the data direction.
    pub bottleneck: LinkId,
    pub reverse: LinkId,
}

/// The most sender/receiver pairs of a dumbbell: 2 nodes each plus 2 routers within
/// [`MAX_NODES`](super::MAX_NODES).
pub const MAX_PAIRS: usize = (super::MAX_NODES - 2) / 2;
/// The most hops of a parking lot: a router and a host per hop plus one, within
/// [`MAX_NODES`](super::MAX_NODES).
pub const MAX_HOPS: usize = super::MAX_NODES / 2 - 1;
// The error messages state these bounds.
const _: () = assert!(MAX_PAIRS == 262_143 && MAX_HOPS == 262_143);
const _: () = assert!(super::MAX_NODES == 524_288 && super::MAX_LINKS == 2_097_152);

/// `pairs` is a dumbbell's size: 1 ..= [`MAX_PAIRS`] (callers check it before building per-pair
/// vectors).
pub fn check_pairs(pairs: usize) -> Result<(), SimError> {
    if pairs == 0 || pairs > MAX_PAIRS {
        return Err(SimError::invalid(
            "dumbbell.pairs",
            pairs,
            "1 ..= 262143 sender/receiver pairs (MAX_PAIRS: 2 nodes each and 2 routers within MAX_NODES)",
        ));
    }
    Ok(())
}

pub fn dumbbell(net: &mut Network, cfg: &DumbbellConfig) -> Result<Dumbbell, SimError> {
    check_pairs(cfg.pairs)?;
    if cfg.access_delays.len() != cfg.pairs {
        return Err(SimError::invalid(
            "dumbbell.access_delays",
            format!("{} delays", cfg.access_delays.len()),
            "one access delay per pair",
        ));
    }
    if cfg.access_jitter > super::MAX_JITTER {
        return Err(SimError::invalid(
            "dumbbell.access_jitter",
            format!("{} s", cfg.access_jitter.as_secs_f64()),
            "a jitter of 0 ..= 1 s",
        ));
    }
    let left = net.add_node("R1")?;
    let right = net.add_node("R2")?;
    let (bottleneck, reverse) = net.add_duplex(left, right, &cfg.bottleneck)?;
    let (mut senders, mut receivers) = (Vec::new(), Vec::new());
    for (i, d) in cfg.access_delays.iter().enumerate() {
        let access = LinkConfig {
            rate_bps: cfg.access_rate_bps,
            delay: *d,
            queue: cfg.access_queue.clone(),
            jitter: Duration::ZERO,
        };
        let host_out = LinkConfig {
            jitter: cfg.access_jitter,
            ..access.clone()
        };
        let s = net.add_node(&format!("S{}", i + 1))?;
        let r = net.add_node(&format!("D{}", i + 1))?;
        // In add_duplex's order (host to router first on the left, router to host on the right):
        // link ids are the same with or without jitter.
        net.add_link(s, left, &host_out)?;
        net.add_link(left, s, &access)?;
        net.add_link(right, r, &access)?;
        net.add_link(r, right, &host_out)?;
        senders.push(s);
        receivers.push(r);
    }
    net.compute_routes();
    Ok(Dumbbell {
        senders,
        receivers,
        left,
        right,
        bottleneck,
        reverse,
    })
}

/// A chain of `hops` bottleneck links between routers R0..R{hops}, with one host on each router:
/// the long flow goes from H0 to H{hops}, cross traffic over single hops H{i} -> H{i+1}.
#[derive(Clone, Debug, PartialEq)]
pub struct ParkingLot {
    pub routers: Vec<NodeId>,
    pub hosts: Vec<NodeId>,
    /// The bottleneck links in the forward direction, R{i} -> R{i+1}.
    pub hops: Vec<LinkId>,
}

/// `access.jitter` is the hosts' sending jitter: on each host's link to its router only.
pub fn parking_lot(
    net: &mut Network,
    hops: usize,
    link: &LinkConfig,
    access: &LinkConfig,
) -> Result<ParkingLot, SimError> {
    if hops == 0 || hops > MAX_HOPS {
        return Err(SimError::invalid(
            "parking_lot.hops",
            hops,
            "1 ..= 262143 hops (MAX_HOPS: 2 nodes per router within MAX_NODES)",
        ));
    }
    if access.jitter > super::MAX_JITTER {
        return Err(SimError::invalid(
            "parking_lot.access.jitter",
            format!("{} s", access.jitter.as_secs_f64()),
            "a jitter of 0 ..= 1 s",
        ));
    }
    let mut routers = Vec::new();
    let mut hosts = Vec::new();
    for i in 0..=hops {
        let r = net.add_node(&format!("R{i}"))?;
        let h = net.add_node(&format!("H{i}"))?;
        net.add_link(h, r, access)?;
        net.add_link(
            r,
            h,
            &LinkConfig {
                jitter: Duration::ZERO,
                ..access.clone()
            },
        )?;
        routers.push(r);
        hosts.push(h);
    }
    let mut fwd = Vec::new();
    for i in 0..hops {
        fwd.push(net.add_duplex(routers[i], routers[i + 1], link)?.0);
    }
    net.compute_routes();
    Ok(ParkingLot {
        routers,
        hosts,
        hops: fwd,
    })
}

/// A general graph: named nodes and duplex links between them.
pub fn graph(
    net: &mut Network,
    nodes: &[&str],
    links: &[(&str, &str, LinkConfig)],
) -> Result<Vec<NodeId>, SimError> {
    let ids = nodes
        .iter()
        .map(|n| net.add_node(n))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (a, b, cfg)) in links.iter().enumerate() {
        let na = net.node(a).map_err(|_| SimError::UnknownNode {
            name: format!("links[{i}].from"),
            node: a.to_string(),
        })?;
        let nb = net.node(b).map_err(|_| SimError::UnknownNode {
            name: format!("links[{i}].to"),
            node: b.to_string(),
        })?;
        net.add_duplex(na, nb, cfg)?;
    }
    net.compute_routes();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(ms: u64) -> LinkConfig {
        LinkConfig {
            rate_bps: 1_000_000,
            delay: Duration::from_millis(ms),
            queue: QueueConfig::drop_tail_pkts(10),
            jitter: Duration::ZERO,
        }
    }

    #[test]
    fn dumbbell_routes_through_the_bottleneck() {
        let mut net = Network::default();
        let d = dumbbell(&mut net, &DumbbellConfig::dissertation(3)).unwrap();
        let path = net.path(d.senders[2], d.receivers[2], 0).unwrap();
        assert_eq!(path.len(), 3);
        assert_eq!(path[1], d.bottleneck);
        let back = net.path(d.receivers[0], d.senders[0], 0).unwrap();
        assert_eq!(back[1], d.reverse);
    }

    #[test]
    fn ecmp_spreads_equal_cost_paths_by_hash() {
        // A diamond: two equal paths from a to d.
        let mut net = Network::default();
        graph(
            &mut net,
            &["a", "b", "c", "d"],
            &[
                ("a", "b", link(1)),
                ("a", "c", link(1)),
                ("b", "d", link(1)),
                ("c", "d", link(1)),
            ],
        )
        .unwrap();
        let (a, d) = (net.node("a").unwrap(), net.node("d").unwrap());
        assert_eq!(net.next_hops(a, d).unwrap().len(), 2);
        let p0 = net.path(a, d, 0).unwrap();
        let p1 = net.path(a, d, 1).unwrap();
        assert_ne!(p0[0], p1[0], "different hashes take different paths");
    }

    #[test]
    fn bad_topologies_name_the_parameter() {
        let mut net = Network::default();
        let e = graph(&mut net, &["a", "b"], &[("a", "z", link(1))]).unwrap_err();
        assert!(
            e.to_string().contains("links[0].to") && e.to_string().contains('z'),
            "{e}"
        );
        let mut net = Network::default();
        let mut cfg = DumbbellConfig::dissertation(2);
        cfg.bottleneck.queue = QueueConfig::drop_tail_pkts(0);
        let e = dumbbell(&mut net, &cfg).unwrap_err();
        assert!(e.to_string().contains("link[0].queue.limit_pkts"), "{e}");
        let mut net = Network::default();
        let mut cfg = DumbbellConfig::dissertation(2);
        cfg.bottleneck.rate_bps = 0;
        assert!(dumbbell(&mut net, &cfg)
            .unwrap_err()
            .to_string()
            .contains("link[0].rate_bps"));
        let mut net = Network::default();
        graph(&mut net, &["a", "b", "c"], &[("a", "b", link(1))]).unwrap();
        let (a, c) = (net.node("a").unwrap(), net.node("c").unwrap());
        assert!(matches!(net.path(a, c, 0), Err(SimError::NoRoute { .. })));
    }

    #[test]
    fn parking_lot_chain() {
        let mut net = Network::default();
        let p = parking_lot(&mut net, 3, &link(5), &link(1)).unwrap();
        let path = net.path(p.hosts[0], p.hosts[3], 0).unwrap();
        assert_eq!(path.len(), 5);
        assert_eq!(&path[1..4], &p.hops[..]);
    }
}
