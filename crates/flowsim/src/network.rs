//! Directed graph with link capacities, and the flows routed over it (seed 002 §4.2: "a topology
//! annotated with link capacities and a set of flow demands. Each flow is routed via its shortest
//! path (or actual route ...)").
//!
//! Capacities are unit-less flow units, as in the paper (§4.2): access links are usually 1.

use std::collections::{HashMap, VecDeque};
use std::fmt;

/// Index of a node in a [`Network`].
pub type NodeId = u32;
/// Index of a directed link in a [`Network`].
pub type LinkId = u32;

/// Errors of building a network or routing flows over it. Each names what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    DuplicateNode(String),
    UnknownNode(String),
    NodeIndex(NodeId),
    LinkIndex(LinkId),
    SelfLoop(String),
    DuplicateLink(String, String),
    /// Negative, NaN or infinite capacity.
    BadCapacity {
        from: String,
        to: String,
        capacity: f64,
    },
    /// A flow whose source is its sink.
    ReflexiveFlow(String),
    NoPath {
        from: String,
        to: String,
    },
    /// The nodes do not form one (weakly) connected graph; `unreached` is a node not reached from the first.
    Disconnected {
        first: String,
        unreached: String,
    },
    /// A given route that is not a path from the flow's source to its sink.
    BadRoute {
        flow: usize,
        why: String,
    },
    /// Demand negative or NaN (infinite is allowed: a fire-hose sender).
    BadDemand {
        flow: usize,
        demand: f64,
    },
    /// A parameter outside its range (name, value, what it must be).
    BadParameter {
        name: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// The per-link fixed point of a routing loop between links did not settle.
    NoFixedPoint {
        iterations: usize,
        delta: f64,
    },
    /// A vector whose length does not match the number of flows.
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::DuplicateNode(n) => write!(f, "node {n:?} already exists"),
            Error::UnknownNode(n) => write!(f, "unknown node {n:?}"),
            Error::NodeIndex(i) => write!(f, "no node with index {i}"),
            Error::LinkIndex(i) => write!(f, "no link with index {i}"),
            Error::SelfLoop(n) => write!(f, "self-loop at node {n:?}: a link must join two nodes"),
            Error::DuplicateLink(a, b) => write!(f, "link {a:?} -> {b:?} already exists"),
            Error::BadCapacity { from, to, capacity } => write!(
                f,
                "link {from:?} -> {to:?}: capacity must be finite and >= 0, got {capacity}"
            ),
            Error::ReflexiveFlow(n) => write!(f, "flow from {n:?} to itself"),
            Error::NoPath { from, to } => write!(f, "no path from {from:?} to {to:?}"),
            Error::Disconnected { first, unreached } => write!(
                f,
                "disconnected graph: node {unreached:?} cannot be reached from {first:?}"
            ),
            Error::BadRoute { flow, why } => write!(f, "flow {flow}: bad route: {why}"),
            Error::BadDemand { flow, demand } => {
                write!(
                    f,
                    "flow {flow}: demand must be >= 0 (or infinite), got {demand}"
                )
            }
            Error::BadParameter {
                name,
                value,
                expected,
            } => {
                write!(f, "{name} must be {expected}, got {value}")
            }
            Error::NoFixedPoint { iterations, delta } => write!(
                f,
                "no fixed point after {iterations} iterations (last change {delta:e})"
            ),
            Error::Length {
                what,
                expected,
                got,
            } => {
                write!(
                    f,
                    "{what}: expected {expected} values (one per flow), got {got}"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// A directed link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub from: NodeId,
    pub to: NodeId,
    pub capacity: f64,
}

/// Named nodes joined by directed, capacitated links. An undirected edge is two links.
#[derive(Debug, Clone, Default)]
pub struct Network {
    names: Vec<String>,
    index: HashMap<String, NodeId>,
    links: Vec<Link>,
    out: Vec<Vec<LinkId>>,
    pairs: HashMap<(NodeId, NodeId), LinkId>,
}

impl Network {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_node(&mut self, name: &str) -> Result<NodeId, Error> {
        if self.index.contains_key(name) {
            return Err(Error::DuplicateNode(name.to_string()));
        }
        let id = self.names.len() as NodeId;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        self.out.push(Vec::new());
        Ok(id)
    }

    /// Adds the link `from -> to`. Errors (and no change) on a self-loop, a second link between the
    /// same ordered pair, or a capacity that is negative, NaN or infinite.
    pub fn add_link(&mut self, from: NodeId, to: NodeId, capacity: f64) -> Result<LinkId, Error> {
        self.check_node(from)?;
        self.check_node(to)?;
        if from == to {
            return Err(Error::SelfLoop(self.name(from).to_string()));
        }
        if !(capacity.is_finite() && capacity >= 0.0) {
            return Err(Error::BadCapacity {
                from: self.name(from).to_string(),
                to: self.name(to).to_string(),
                capacity,
            });
        }
        if self.pairs.contains_key(&(from, to)) {
            return Err(Error::DuplicateLink(
                self.name(from).to_string(),
                self.name(to).to_string(),
            ));
        }
        let id = self.links.len() as LinkId;
        self.links.push(Link { from, to, capacity });
        self.out[from as usize].push(id);
        self.pairs.insert((from, to), id);
        Ok(id)
    }

    /// Both directions of an undirected edge, each with `capacity`. All or nothing.
    pub fn add_edge(
        &mut self,
        a: NodeId,
        b: NodeId,
        capacity: f64,
    ) -> Result<(LinkId, LinkId), Error> {
        self.check_node(a)?;
        self.check_node(b)?;
        if self.pairs.contains_key(&(b, a)) {
            return Err(Error::DuplicateLink(
                self.name(b).to_string(),
                self.name(a).to_string(),
            ));
        }
        let ab = self.add_link(a, b, capacity)?;
        let ba = self.add_link(b, a, capacity).expect("checked above");
        Ok((ab, ba))
    }

    /// Sets a link's capacity (same checks as [`Network::add_link`]).
    pub fn set_capacity(&mut self, link: LinkId, capacity: f64) -> Result<(), Error> {
        let l = *self.link(link)?;
        if !(capacity.is_finite() && capacity >= 0.0) {
            return Err(Error::BadCapacity {
                from: self.name(l.from).to_string(),
                to: self.name(l.to).to_string(),
                capacity,
            });
        }
        self.links[link as usize].capacity = capacity;
        Ok(())
    }

    fn check_node(&self, n: NodeId) -> Result<(), Error> {
        if (n as usize) < self.names.len() {
            Ok(())
        } else {
            Err(Error::NodeIndex(n))
        }
    }

    pub fn node(&self, name: &str) -> Result<NodeId, Error> {
        self.index
            .get(name)
            .copied()
            .ok_or_else(|| Error::UnknownNode(name.to_string()))
    }

    /// The name of a node (panics on a bad index: use ids this network returned).
    pub fn name(&self, n: NodeId) -> &str {
        &self.names[n as usize]
    }

    pub fn link(&self, l: LinkId) -> Result<&Link, Error> {
        self.links.get(l as usize).ok_or(Error::LinkIndex(l))
    }

    pub fn link_between(&self, from: NodeId, to: NodeId) -> Option<LinkId> {
        self.pairs.get(&(from, to)).copied()
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    pub fn node_count(&self) -> usize {
        self.names.len()
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    pub fn out_links(&self, n: NodeId) -> &[LinkId] {
        &self.out[n as usize]
    }

    /// Errors unless every node can be reached from node 0 ignoring link direction.
    pub fn check_connected(&self) -> Result<(), Error> {
        let n = self.names.len();
        if n == 0 {
            return Ok(());
        }
        let mut und: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for l in &self.links {
            und[l.from as usize].push(l.to);
            und[l.to as usize].push(l.from);
        }
        let mut seen = vec![false; n];
        let mut stack = vec![0 as NodeId];
        seen[0] = true;
        while let Some(u) = stack.pop() {
            for &v in &und[u as usize] {
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    stack.push(v);
                }
            }
        }
        match seen.iter().position(|s| !s) {
            None => Ok(()),
            Some(i) => Err(Error::Disconnected {
                first: self.names[0].clone(),
                unreached: self.names[i].clone(),
            }),
        }
    }

    /// Breadth-first shortest-hop tree from `src`: for each node the link that reached it. Ties go
    /// to the link added first, so routes are deterministic.
    fn bfs_parents(&self, src: NodeId) -> Vec<Option<LinkId>> {
        let mut parent = vec![None; self.names.len()];
        let mut seen = vec![false; self.names.len()];
        seen[src as usize] = true;
        let mut queue = VecDeque::from([src]);
        while let Some(u) = queue.pop_front() {
            for &l in &self.out[u as usize] {
                let v = self.links[l as usize].to;
                if !seen[v as usize] {
                    seen[v as usize] = true;
                    parent[v as usize] = Some(l);
                    queue.push_back(v);
                }
            }
        }
        parent
    }
}

/// Flows (source, sink) with their routes, stored flat: flow `i` uses
/// `links[offsets[i]..offsets[i+1]]` in order. A position in `links` is a *hop*; per-hop rates in
/// this crate are indexed the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flows {
    pub src: Vec<NodeId>,
    pub dst: Vec<NodeId>,
    pub offsets: Vec<usize>,
    pub links: Vec<LinkId>,
}

impl Flows {
    /// Routes each (source, sink) pair on a shortest-hop path (BFS, ties to the first-added link).
    /// One BFS per distinct source.
    pub fn shortest(net: &Network, pairs: &[(NodeId, NodeId)]) -> Result<Flows, Error> {
        let mut trees: HashMap<NodeId, Vec<Option<LinkId>>> = HashMap::new();
        let mut flows = Flows {
            offsets: vec![0],
            ..Default::default()
        };
        let mut rev = Vec::new();
        for &(s, t) in pairs {
            net.check_node(s)?;
            net.check_node(t)?;
            if s == t {
                return Err(Error::ReflexiveFlow(net.name(s).to_string()));
            }
            let tree = trees.entry(s).or_insert_with(|| net.bfs_parents(s));
            rev.clear();
            let mut v = t;
            while v != s {
                match tree[v as usize] {
                    Some(l) => {
                        rev.push(l);
                        v = net.links[l as usize].from;
                    }
                    None => {
                        return Err(Error::NoPath {
                            from: net.name(s).to_string(),
                            to: net.name(t).to_string(),
                        })
                    }
                }
            }
            flows.src.push(s);
            flows.dst.push(t);
            flows.links.extend(rev.iter().rev());
            flows.offsets.push(flows.links.len());
        }
        Ok(flows)
    }

    /// Flows on given routes (lists of links). Each route must be a loop-free path from the
    /// flow's source to its sink.
    pub fn with_routes(
        net: &Network,
        routes: &[(NodeId, NodeId, Vec<LinkId>)],
    ) -> Result<Flows, Error> {
        let mut flows = Flows {
            offsets: vec![0],
            ..Default::default()
        };
        for (i, (s, t, route)) in routes.iter().enumerate() {
            net.check_node(*s)?;
            net.check_node(*t)?;
            if s == t {
                return Err(Error::ReflexiveFlow(net.name(*s).to_string()));
            }
            let bad = |why: String| Error::BadRoute { flow: i, why };
            if route.is_empty() {
                return Err(bad("empty route".into()));
            }
            let mut at = *s;
            let mut visited = std::collections::HashSet::from([at]);
            for &l in route {
                let link = net.link(l)?;
                if link.from != at {
                    return Err(bad(format!(
                        "link {l} starts at {:?}, not at {:?}",
                        net.name(link.from),
                        net.name(at)
                    )));
                }
                at = link.to;
                if !visited.insert(at) {
                    return Err(bad(format!("visits {:?} twice", net.name(at))));
                }
            }
            if at != *t {
                return Err(bad(format!(
                    "ends at {:?}, not at the sink {:?}",
                    net.name(at),
                    net.name(*t)
                )));
            }
            flows.src.push(*s);
            flows.dst.push(*t);
            flows.links.extend_from_slice(route);
            flows.offsets.push(flows.links.len());
        }
        Ok(flows)
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// The links of flow `i`, in order.
    pub fn route(&self, i: usize) -> &[LinkId] {
        &self.links[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The hop range of flow `i` (indices into per-hop vectors).
    pub fn hops(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// For each link, the hops that cross it (CSR: `(starts, hops)`, link `l` has
    /// `hops[starts[l]..starts[l+1]]`), in flow order.
    pub fn hops_by_link(&self, link_count: usize) -> (Vec<usize>, Vec<usize>) {
        self.by_link(link_count, |hop, _| hop)
    }

    /// For each link, the flows that cross it (CSR like [`Flows::hops_by_link`], flow indices).
    pub fn flows_by_link(&self, link_count: usize) -> (Vec<usize>, Vec<u32>) {
        self.by_link(link_count, |_, flow| flow as u32)
    }

    /// Per link, `item(hop, flow)` of every hop that crosses it, in flow order (CSR).
    fn by_link<T: Copy + Default>(
        &self,
        link_count: usize,
        item: impl Fn(usize, usize) -> T,
    ) -> (Vec<usize>, Vec<T>) {
        let mut starts = vec![0usize; link_count + 1];
        for &l in &self.links {
            starts[l as usize + 1] += 1;
        }
        for i in 0..link_count {
            starts[i + 1] += starts[i];
        }
        let mut fill = starts.clone();
        let mut out = vec![T::default(); self.links.len()];
        for i in 0..self.len() {
            for h in self.hops(i) {
                let l = self.links[h] as usize;
                out[fill[l]] = item(h, i);
                fill[l] += 1;
            }
        }
        (starts, out)
    }

    /// The flow each hop belongs to.
    pub fn flow_of_hop(&self) -> Vec<u32> {
        let mut out = vec![0u32; self.links.len()];
        for i in 0..self.len() {
            for h in self.hops(i) {
                out[h] = i as u32;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> (Network, Vec<NodeId>) {
        let mut net = Network::new();
        let ids: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|n| net.add_node(n).unwrap())
            .collect();
        net.add_edge(ids[0], ids[1], 1.0).unwrap();
        net.add_edge(ids[1], ids[2], 2.0).unwrap();
        (net, ids)
    }

    #[test]
    fn bad_links_are_refused_and_change_nothing() {
        let (mut net, n) = line();
        let before = net.link_count();
        assert_eq!(
            net.add_link(n[0], n[0], 1.0),
            Err(Error::SelfLoop("a".into()))
        );
        assert!(matches!(
            net.add_link(n[0], n[2], -1.0),
            Err(Error::BadCapacity { .. })
        ));
        assert!(matches!(
            net.add_link(n[0], n[2], f64::NAN),
            Err(Error::BadCapacity { .. })
        ));
        assert!(matches!(
            net.add_link(n[0], n[2], f64::INFINITY),
            Err(Error::BadCapacity { .. })
        ));
        assert_eq!(
            net.add_link(n[0], n[1], 1.0),
            Err(Error::DuplicateLink("a".into(), "b".into()))
        );
        assert_eq!(
            net.add_edge(n[2], n[1], 1.0),
            Err(Error::DuplicateLink("b".into(), "c".into()))
        );
        assert_eq!(net.add_link(n[0], 9, 1.0), Err(Error::NodeIndex(9)));
        assert_eq!(net.add_node("a"), Err(Error::DuplicateNode("a".into())));
        assert_eq!(net.link_count(), before);
        assert_eq!(net.node_count(), 3);
    }

    #[test]
    fn routes_are_shortest_and_checked() {
        let (mut net, n) = line();
        let f = Flows::shortest(&net, &[(n[0], n[2]), (n[2], n[0])]).unwrap();
        assert_eq!(f.route(0).len(), 2);
        assert_eq!(net.link(f.route(0)[0]).unwrap().from, n[0]);
        assert_eq!(
            Flows::shortest(&net, &[(n[1], n[1])]),
            Err(Error::ReflexiveFlow("b".into()))
        );
        let d = net.add_node("d").unwrap();
        assert_eq!(
            Flows::shortest(&net, &[(n[0], d)]),
            Err(Error::NoPath {
                from: "a".into(),
                to: "d".into()
            })
        );
        assert!(matches!(
            net.check_connected(),
            Err(Error::Disconnected { .. })
        ));
        let ab = net.link_between(n[0], n[1]).unwrap();
        let bc = net.link_between(n[1], n[2]).unwrap();
        let ba = net.link_between(n[1], n[0]).unwrap();
        assert!(Flows::with_routes(&net, &[(n[0], n[2], vec![ab, bc])]).is_ok());
        assert!(matches!(
            Flows::with_routes(&net, &[(n[0], n[2], vec![bc])]),
            Err(Error::BadRoute { flow: 0, .. })
        ));
        assert!(matches!(
            Flows::with_routes(&net, &[(n[0], n[1], vec![ab, ba, ab])]),
            Err(Error::BadRoute { .. })
        ));
        assert!(matches!(
            Flows::with_routes(&net, &[(n[0], n[2], vec![ab])]),
            Err(Error::BadRoute { .. })
        ));
    }

    #[test]
    fn hops_by_link_lists_every_hop_once() {
        let (net, n) = line();
        let f = Flows::shortest(&net, &[(n[0], n[2]), (n[1], n[2]), (n[2], n[0])]).unwrap();
        let (starts, hops) = f.hops_by_link(net.link_count());
        assert_eq!(hops.len(), f.links.len());
        for l in 0..net.link_count() {
            for &h in &hops[starts[l]..starts[l + 1]] {
                assert_eq!(f.links[h] as usize, l);
            }
        }
    }
}
