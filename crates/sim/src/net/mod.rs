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

/// A one-way link: serialization at `rate_bps`, then `delay` of propagation, plus `jitter`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    pub rate_bps: u64,
    pub delay: Duration,
    pub queue: QueueConfig,
    /// Each packet's propagation is longer by a uniform draw in [0, jitter], its order kept (a
    /// packet never overtakes the one before it), drawn from a stream of its own. On a host's link
    /// to its router it is the host's sending jitter, in the spirit of ns-2's TCP `overhead_` (a
    /// random delay before each send at the data sender; here a host's ACKs are jittered too):
    /// the random processing time with which Floyd and Jacobson ("On Traffic Phase Effects in
    /// Packet-Switched Gateways", 1992) break the phase effects of a deterministic simulation,
    /// up to one bottleneck service time. Zero (every builder's default) draws nothing, so runs
    /// without it are bitwise what they were.
    pub jitter: Duration,
}

/// The most jitter a link may have: a second (more is a mistake for a per-packet host delay).
pub const MAX_JITTER: Duration = Duration::from_secs(1);

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
    /// See [`LinkConfig::jitter`].
    pub jitter: Duration,
    pub(crate) queue: Box<dyn Queue>,
    /// The packet being serialized.
    pub(crate) transmitting: Option<PacketId>,
    /// Packets propagating, with their arrival times; in order (delay is constant, and jitter
    /// never lets a packet arrive before the one ahead of it).
    pub(crate) pipe: VecDeque<(Instant, PacketId)>,
    pub stats: LinkStats,
    last_queue_change: Instant,
    /// The last serialization time computed: (bytes, rate, time), as a link carries packets of
    /// one or two sizes (a division per packet saved).
    last_tx: (u32, u64, Duration),
}

impl Link {
    /// Serialization time of `bytes`, rounded up to the nanosecond.
    pub fn tx_time(&self, bytes: u32) -> Duration {
        let bits = bytes as u128 * 8;
        Duration::from_nanos(((bits * 1_000_000_000).div_ceil(self.rate_bps as u128)) as u64)
    }

    /// [`Link::tx_time`], remembered for the last size.
    pub(crate) fn tx_time_memo(&mut self, bytes: u32) -> Duration {
        if (bytes, self.rate_bps) != (self.last_tx.0, self.last_tx.1) {
            self.last_tx = (bytes, self.rate_bps, self.tx_time(bytes));
        }
        self.last_tx.2
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
        let (pkts, bytes) = self.queue.lens();
        self.stats.queue_integral_pkt_ns += pkts as f64 * dt;
        self.stats.queue_integral_byte_ns += bytes as f64 * dt;
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
    /// The links into this node (routing searches backwards from a destination along them).
    incoming: Vec<LinkId>,
}

/// The next hops of every node towards one destination (several per node: ECMP), in compressed
/// rows: node `u`'s hops are `hops[first[u]..first[u + 1]]`.
#[derive(Debug)]
struct DestRoutes {
    first: Vec<u32>,
    hops: Vec<LinkId>,
}

/// The most nodes a network may have: a typo like `pairs=10**8` is an error before anything is
/// allocated (issue 13). A node and its links take a few hundred bytes; routes are kept only
/// towards the destinations flows use (see [`MAX_ROUTE_ENTRIES`]).
pub const MAX_NODES: usize = 1 << 19;
/// The most links a network may have.
pub const MAX_LINKS: usize = 1 << 21;
/// The most route-table entries (4 bytes each) a network keeps over all destinations: 1 GiB.
/// A table towards one destination has an entry per node and per equal-cost next hop; tables are
/// built when a flow first needs them (issue 13: a table at every node towards every node took
/// 2.1 GB for a dumbbell of 3,000 pairs).
pub const MAX_ROUTE_ENTRIES: usize = 1 << 28;

#[derive(Debug, Default)]
pub struct Network {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    by_name: HashMap<String, NodeId>,
    routed: bool,
    /// Route tables by destination node, built on first use.
    routes: Vec<Option<DestRoutes>>,
    /// Entries in `routes`, against [`MAX_ROUTE_ENTRIES`].
    route_entries: usize,
}

impl Network {
    pub fn add_node(&mut self, name: &str) -> Result<NodeId, SimError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(SimError::invalid(
                "node",
                self.nodes.len() + 1,
                "at most 524288 nodes (MAX_NODES)",
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
            incoming: Vec::new(),
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
                "at most 2097152 links (MAX_LINKS)",
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
        if cfg.jitter > MAX_JITTER {
            return Err(SimError::invalid(
                format!("{name}.jitter"),
                format!("{} s", cfg.jitter.as_secs_f64()),
                "a jitter of 0 ..= 1 s",
            ));
        }
        let queue = cfg.queue.build(&format!("{name}.queue"))?;
        let id = LinkId(i as u32);
        self.links.push(Link {
            from,
            to,
            rate_bps: cfg.rate_bps,
            delay: cfg.delay,
            jitter: cfg.jitter,
            queue,
            transmitting: None,
            pipe: VecDeque::new(),
            stats: LinkStats::default(),
            last_queue_change: Instant::ZERO,
            // No link has rate 0: computed at the first packet.
            last_tx: (0, 0, Duration::ZERO),
        });
        self.nodes[from.0 as usize].out.push(id);
        self.nodes[to.0 as usize].incoming.push(id);
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

    /// Fixes the topology for routing: static shortest paths in hops, keeping every equal-cost
    /// next hop (ECMP). The table towards a destination is built when a path to it is first asked
    /// for ([`Network::path`], [`Network::next_hops`]); adding a node or link afterwards needs
    /// this call again.
    pub fn compute_routes(&mut self) {
        self.routes.clear();
        self.routes.resize_with(self.nodes.len(), || None);
        self.route_entries = 0;
        self.routed = true;
    }

    pub fn is_routed(&self) -> bool {
        self.routed
    }

    /// Builds the route table towards `dst` if it is not built yet: a breadth-first search
    /// backwards from `dst`, then each node's outgoing links one hop closer.
    fn routes_to(&mut self, dst: NodeId) -> Result<&DestRoutes, SimError> {
        assert!(self.routed, "Network::compute_routes first");
        let d = dst.0 as usize;
        if self.routes[d].is_none() {
            let n = self.nodes.len();
            // At most an entry per node plus one per link: refuse before allocating.
            if self.route_entries + n + 1 + self.links.len() > MAX_ROUTE_ENTRIES {
                return Err(SimError::invalid(
                    "routes",
                    format!("a table towards {} (the {}th)", self.node_name(dst), self.routes.iter().flatten().count() + 1),
                    "route tables within 1 GiB (MAX_ROUTE_ENTRIES: a table per destination flows use, an entry per node and next hop)",
                ));
            }
            let mut dist = vec![u32::MAX; n];
            let mut frontier = VecDeque::new();
            dist[d] = 0;
            frontier.push_back(d);
            while let Some(v) = frontier.pop_front() {
                for &l in &self.nodes[v].incoming {
                    let u = self.links[l.0 as usize].from.0 as usize;
                    if dist[u] == u32::MAX {
                        dist[u] = dist[v] + 1;
                        frontier.push_back(u);
                    }
                }
            }
            let mut first = Vec::with_capacity(n + 1);
            let mut hops = Vec::new();
            for u in 0..n {
                first.push(hops.len() as u32);
                if u == d || dist[u] == u32::MAX {
                    continue;
                }
                hops.extend(
                    self.nodes[u]
                        .out
                        .iter()
                        .copied()
                        .filter(|l| dist[self.links[l.0 as usize].to.0 as usize] == dist[u] - 1),
                );
            }
            first.push(hops.len() as u32);
            // Counted as allocated: `extend` may leave up to twice the length.
            hops.shrink_to_fit();
            self.route_entries += first.capacity() + hops.capacity();
            self.routes[d] = Some(DestRoutes { first, hops });
        }
        Ok(self.routes[d].as_ref().expect("built above"))
    }

    /// The next-hop links from `at` towards `dst` (empty: no route), building the table towards
    /// `dst` if needed.
    pub fn next_hops(&mut self, at: NodeId, dst: NodeId) -> Result<&[LinkId], SimError> {
        let r = self.routes_to(dst)?;
        let u = at.0 as usize;
        Ok(&r.hops[r.first[u] as usize..r.first[u + 1] as usize])
    }

    /// The link a packet with ECMP `hash` takes from `at` towards `dst`. The table towards `dst`
    /// must have been built (by [`Network::path`] when the flow was added).
    pub fn route(&self, at: NodeId, dst: NodeId, hash: u32) -> Option<LinkId> {
        let r = self.routes[dst.0 as usize]
            .as_ref()
            .expect("the route table towards a flow's endpoints is built when the flow is added");
        let u = at.0 as usize;
        let hops = &r.hops[r.first[u] as usize..r.first[u + 1] as usize];
        match hops.len() {
            0 => None,
            1 => Some(hops[0]),
            k => Some(hops[hash as usize % k]),
        }
    }

    /// The links a packet with `hash` crosses from `src` to `dst`.
    pub fn path(&mut self, src: NodeId, dst: NodeId, hash: u32) -> Result<Vec<LinkId>, SimError> {
        self.routes_to(dst)?;
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
