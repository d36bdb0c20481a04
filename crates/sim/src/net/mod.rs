//! The network: nodes, one-way links with a queue, and static shortest-path routing with ECMP.

pub mod queue;
pub mod topology;

use crate::error::SimError;
use crate::packet::PacketId;
use coupling::{Duration, Instant};
use queue::{Queue, QueueConfig};
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// A one-way link: serialization at `rate_bps`, then `delay` of propagation.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    pub rate_bps: u64,
    pub delay: Duration,
    pub queue: QueueConfig,
}

/// Counters of one link and its queue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkStats {
    /// Packets offered to the link (sent straight away or queued or dropped).
    pub offered_pkts: u64,
    pub dropped_pkts: u64,
    pub dropped_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// Time spent transmitting.
    pub busy_ns: u64,
    pub max_queue_pkts: usize,
    /// Time integral of the queue length in packets (packet-nanoseconds).
    pub queue_integral_pkt_ns: f64,
    pub queue_integral_byte_ns: f64,
}

#[derive(Debug)]
pub struct Link {
    pub from: NodeId,
    pub to: NodeId,
    pub rate_bps: u64,
    pub delay: Duration,
    pub(crate) queue: Box<dyn Queue>,
    /// The packet being serialized.
    pub(crate) transmitting: Option<PacketId>,
    /// Packets propagating, with their arrival times; in order, as delay is constant.
    pub(crate) pipe: VecDeque<(Instant, PacketId)>,
    pub stats: LinkStats,
    last_queue_change: Instant,
}

impl Link {
    /// Serialization time of `bytes`, rounded up to the nanosecond.
    pub fn tx_time(&self, bytes: u32) -> Duration {
        let bits = bytes as u128 * 8;
        Duration::from_nanos(((bits * 1_000_000_000).div_ceil(self.rate_bps as u128)) as u64)
    }

    pub fn queue_len_pkts(&self) -> usize {
        self.queue.len_pkts()
    }

    pub fn queue_len_bytes(&self) -> u64 {
        self.queue.len_bytes()
    }

    /// Call before every change of the queue's length: accumulates the time integral.
    pub(crate) fn account_queue(&mut self, now: Instant) {
        let dt = now.saturating_since(self.last_queue_change).as_nanos() as f64;
        self.stats.queue_integral_pkt_ns += self.queue.len_pkts() as f64 * dt;
        self.stats.queue_integral_byte_ns += self.queue.len_bytes() as f64 * dt;
        self.last_queue_change = now;
    }

    pub(crate) fn note_queue_len(&mut self) {
        self.stats.max_queue_pkts = self.stats.max_queue_pkts.max(self.queue.len_pkts());
    }
}

#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub out: Vec<LinkId>,
    /// Next-hop links towards each destination node (several: ECMP), by destination index.
    routes: Vec<Vec<LinkId>>,
}

/// The most nodes a network may have. Every node keeps a route to every other, so memory grows
/// with the square of the nodes (about 1 GB at this bound, measured with a dumbbell of 2047 pairs);
/// the bound turns a typo like `pairs=10**8` into an error before anything is allocated (issue 13).
pub const MAX_NODES: usize = 4096;
/// The most links a network may have: route tables keep every equal-cost next hop, so their
/// memory grows with links x nodes (200,000 parallel links between two nodes exhausted memory in
/// `compute_routes`, issue 13); 16,384 x 4,096 entries are about 270 MB.
pub const MAX_LINKS: usize = 16_384;

#[derive(Debug, Default)]
pub struct Network {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    by_name: HashMap<String, NodeId>,
    routed: bool,
}

impl Network {
    pub fn add_node(&mut self, name: &str) -> Result<NodeId, SimError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(SimError::invalid(
                "node",
                self.nodes.len() + 1,
                "at most 4096 nodes (MAX_NODES: every node keeps a route to every other)",
            ));
        }
        if self.by_name.contains_key(name) {
            return Err(SimError::invalid(
                "node.name",
                name,
                "a name not used by another node",
            ));
        }
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            name: name.to_string(),
            out: Vec::new(),
            routes: Vec::new(),
        });
        self.by_name.insert(name.to_string(), id);
        self.routed = false;
        Ok(id)
    }

    pub fn node(&self, name: &str) -> Result<NodeId, SimError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| SimError::UnknownNode {
                name: "node".into(),
                node: name.into(),
            })
    }

    pub fn node_name(&self, id: NodeId) -> &str {
        &self.nodes[id.0 as usize].name
    }

    fn check_node(&self, param: &str, id: NodeId) -> Result<(), SimError> {
        if (id.0 as usize) < self.nodes.len() {
            Ok(())
        } else {
            Err(SimError::UnknownNode {
                name: param.into(),
                node: id.0.to_string(),
            })
        }
    }

    /// Adds a one-way link. Errors name the parameter (`link[i].rate_bps`, ...).
    pub fn add_link(
        &mut self,
        from: NodeId,
        to: NodeId,
        cfg: &LinkConfig,
    ) -> Result<LinkId, SimError> {
        let i = self.links.len();
        let name = format!("link[{i}]");
        if i >= MAX_LINKS {
            return Err(SimError::invalid(
                "link",
                i + 1,
                "at most 16384 links (MAX_LINKS: routes keep every equal-cost link, so their memory grows with links x nodes)",
            ));
        }
        self.check_node(&format!("{name}.from"), from)?;
        self.check_node(&format!("{name}.to"), to)?;
        if from == to {
            return Err(SimError::invalid(
                format!("{name}.to"),
                self.node_name(to),
                "a node other than the link's source",
            ));
        }
        if cfg.rate_bps == 0 {
            return Err(SimError::invalid(
                format!("{name}.rate_bps"),
                0,
                "a rate > 0 bit/s",
            ));
        }
        let queue = cfg.queue.build(&format!("{name}.queue"))?;
        let id = LinkId(i as u32);
        self.links.push(Link {
            from,
            to,
            rate_bps: cfg.rate_bps,
            delay: cfg.delay,
            queue,
            transmitting: None,
            pipe: VecDeque::new(),
            stats: LinkStats::default(),
            last_queue_change: Instant::ZERO,
        });
        self.nodes[from.0 as usize].out.push(id);
        self.routed = false;
        Ok(id)
    }

    /// Adds a link in each direction with the same configuration.
    pub fn add_duplex(
        &mut self,
        a: NodeId,
        b: NodeId,
        cfg: &LinkConfig,
    ) -> Result<(LinkId, LinkId), SimError> {
        Ok((self.add_link(a, b, cfg)?, self.add_link(b, a, cfg)?))
    }

    /// Static shortest paths in hops, keeping every equal-cost next hop (ECMP).
    pub fn compute_routes(&mut self) {
        let n = self.nodes.len();
        // Incoming links per node, for the backward search from each destination.
        let mut incoming: Vec<Vec<LinkId>> = vec![Vec::new(); n];
        for (i, l) in self.links.iter().enumerate() {
            incoming[l.to.0 as usize].push(LinkId(i as u32));
        }
        for node in &mut self.nodes {
            node.routes = vec![Vec::new(); n];
        }
        let mut dist = vec![u32::MAX; n];
        let mut frontier = VecDeque::new();
        for dst in 0..n {
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[dst] = 0;
            frontier.clear();
            frontier.push_back(dst);
            while let Some(v) = frontier.pop_front() {
                for &l in &incoming[v] {
                    let u = self.links[l.0 as usize].from.0 as usize;
                    if dist[u] == u32::MAX {
                        dist[u] = dist[v] + 1;
                        frontier.push_back(u);
                    }
                }
            }
            for u in 0..n {
                if u == dst || dist[u] == u32::MAX {
                    continue;
                }
                let next: Vec<LinkId> = self.nodes[u]
                    .out
                    .iter()
                    .copied()
                    .filter(|l| dist[self.links[l.0 as usize].to.0 as usize] == dist[u] - 1)
                    .collect();
                self.nodes[u].routes[dst] = next;
            }
        }
        self.routed = true;
    }

    pub fn is_routed(&self) -> bool {
        self.routed
    }

    /// The next-hop links from `at` towards `dst` (empty: no route).
    pub fn next_hops(&self, at: NodeId, dst: NodeId) -> &[LinkId] {
        &self.nodes[at.0 as usize].routes[dst.0 as usize]
    }

    /// The link a packet with ECMP `hash` takes from `at` towards `dst`.
    pub fn route(&self, at: NodeId, dst: NodeId, hash: u32) -> Option<LinkId> {
        let hops = self.next_hops(at, dst);
        match hops.len() {
            0 => None,
            1 => Some(hops[0]),
            k => Some(hops[hash as usize % k]),
        }
    }

    /// The links a packet with `hash` crosses from `src` to `dst`.
    pub fn path(&self, src: NodeId, dst: NodeId, hash: u32) -> Result<Vec<LinkId>, SimError> {
        let mut path = Vec::new();
        let mut at = src;
        while at != dst {
            let l = self.route(at, dst, hash).ok_or_else(|| SimError::NoRoute {
                from: self.node_name(src).into(),
                to: self.node_name(dst).into(),
            })?;
            path.push(l);
            at = self.links[l.0 as usize].to;
        }
        Ok(path)
    }
}
