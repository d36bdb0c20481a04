//! The daemon's state: pure logic, time passed in (the server reads the clock). Clients, their
//! flows, and the flow groups, each running one `crates/coupling` coupler (an `FseGroup` for
//! rate-based flows, a `TcpCoupler` for window-based ones): the code the simulator runs.
//!
//! Every request either succeeds or changes nothing and says why, naming the field. A client
//! sees and touches only its own flows: another client's flow id is "unknown" to it.
//!
//! - **Grouping** (RFC 8699 sec. 5.1): a group key from the client's [`GroupSpec`], scoped to the
//!   caller's user unless the configuration shares the key between users, so different users'
//!   flows are never coupled by accident (RFC 8699 sec. 10).
//! - **Soft state** (RFC 8699 sec. 4: "flows that have not sent an UPDATE for a certain time"
//!   are removed): each flow has a timeout (its own, capped by the configuration); [`Daemon::expire`]
//!   removes silent flows, and a client that disconnects loses its flows at once.
//! - **Policy** (RFC 8699 sec. 10: a flow claiming a high priority could starve others): a user's
//!   flows in a group together get at most the user's `max_share` of the group's priority
//!   ([`crate::config::share_scales`]): the coupler is given the claimed priorities scaled down,
//!   recomputed whenever the group's membership or priorities change. Opening more flows gives no
//!   more, and `max_flows` bounds them.

use crate::config::{group_key, share_scales, Config};
use crate::proto::{
    FlowInfo, GroupInfo, GroupSpec, Op, Push, RateAlgorithm, ReplyBody, WindowState,
    MAX_LABEL_BYTES, VERSION,
};
use coupling::fse::{Assignment, FseGroup, FseUpdate};
use coupling::tcp::{CouplerKind, TcpCoupler, TcpState, TcpUpdate};
use coupling::units::check_priority;
use coupling::{Duration, FlowId, Instant};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A connection, numbered by the server.
pub type ClientId = u64;

/// What a request brought: the reply, rates pushed to subscribed flows' clients, and whether
/// the connection must close (a Hello of another version).
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub reply: ReplyBody,
    pub pushes: Vec<(ClientId, Push)>,
    pub close: bool,
}

#[derive(Debug)]
struct Client {
    uid: u32,
    hello: bool,
    flows: BTreeSet<u64>,
}

#[derive(Debug)]
struct Flow {
    client: ClientId,
    uid: u32,
    group: u64,
    claimed: f64,
    effective: f64,
    timeout: Duration,
    last_seen: Instant,
    subscribed: bool,
    /// The application's desired rate for UPDATEs that name none (rate flows).
    desired_rate_bps: Option<f64>,
}

enum Coupler {
    Rate(FseGroup),
    Window(Box<dyn TcpCoupler>, CouplerKind),
}

impl std::fmt::Debug for Coupler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Coupler::Rate(g) => write!(f, "Rate({})", g.algorithm().name()),
            Coupler::Window(_, k) => write!(f, "Window({})", k.name()),
        }
    }
}

/// Who a group belongs to: shared between users by the configuration, or one user's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Scope {
    Shared,
    User(u32),
}

#[derive(Debug)]
struct Group {
    key: (Scope, String),
    coupler: Coupler,
    members: BTreeSet<u64>,
    /// Members subscribed to pushes: with none, an UPDATE's assignments are not looked at
    /// (the load benchmark found that lookup a tenth of the daemon's time).
    subscribers: u32,
}

/// See the module docs.
#[derive(Debug)]
pub struct Daemon {
    config: Config,
    clients: HashMap<ClientId, Client>,
    flows: HashMap<u64, Flow>,
    groups: BTreeMap<u64, Group>,
    by_key: HashMap<(Scope, String), u64>,
    /// Flows held per user (max_flows).
    per_user: HashMap<u32, u32>,
    next_flow: u64,
    next_group: u64,
}

/// The smallest priority a coupler takes: the integer window mode keeps priorities in units of
/// 2^-16 (`coupling::tcp::arith`); the others any positive number. Effective priorities scaled
/// down by the policy are held at it (never above the flow's own claim), so a scaled priority is
/// never refused.
fn priority_floor(c: &Coupler) -> f64 {
    match c {
        Coupler::Window(_, CouplerKind::Ccc { int: true, .. }) => 1.0 / 65536.0,
        _ => f64::MIN_POSITIVE,
    }
}

/// An error reply for `op.field`.
fn err(field: impl Into<String>, message: impl Into<String>) -> ReplyBody {
    ReplyBody::error(field, message)
}

/// A coupler's refusal, named after the operation.
fn coupling_err(op: &str, e: coupling::Error) -> ReplyBody {
    let field = match &e {
        coupling::Error::InvalidValue { field, .. } => format!("{op}.{field}"),
        coupling::Error::MissingInput { field, .. } => format!("{op}.{field}"),
        coupling::Error::UnknownFlow(_) | coupling::Error::DuplicateFlow(_) => {
            format!("{op}.flow")
        }
        _ => op.to_string(),
    };
    err(field, e.to_string())
}

fn check_timeout(op: &str, config: &Config, ms: Option<u32>) -> Result<Duration, ReplyBody> {
    let s = ms.map_or(config.soft_state_timeout_s, |m| m as f64 / 1000.0);
    if ms == Some(0) || s > config.max_timeout_s {
        return Err(err(
            format!("{op}.timeout_ms"),
            format!(
                "{} ms: expected 1 ms ..= the configured maximum, {} s",
                ms.unwrap_or_default(),
                config.max_timeout_s
            ),
        ));
    }
    Ok(Duration::from_nanos((s * 1e9) as u64))
}

impl Daemon {
    pub fn new(config: Config) -> Result<Self, String> {
        config.check()?;
        Ok(Daemon {
            config,
            clients: HashMap::new(),
            flows: HashMap::new(),
            groups: BTreeMap::new(),
            by_key: HashMap::new(),
            per_user: HashMap::new(),
            next_flow: 1,
            next_group: 1,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// A client connected as `uid` (SO_PEERCRED); refused beyond `max_clients`.
    pub fn connect(&mut self, client: ClientId, uid: u32) -> Result<(), String> {
        if self.clients.len() >= self.config.max_clients as usize {
            return Err(format!(
                "{} clients connected: max_clients reached",
                self.clients.len()
            ));
        }
        if self.clients.contains_key(&client) {
            return Err(format!("client {client} is already connected"));
        }
        self.clients.insert(
            client,
            Client {
                uid,
                hello: false,
                flows: BTreeSet::new(),
            },
        );
        Ok(())
    }

    /// A client went away: its flows leave at once (RFC 8699 sec. 4's soft state, without the wait).
    pub fn disconnect(&mut self, client: ClientId, now: Instant) -> Vec<(ClientId, Push)> {
        let Some(c) = self.clients.remove(&client) else {
            return Vec::new();
        };
        let mut pushes = Vec::new();
        for f in c.flows {
            self.remove_flow(f, now, &mut pushes);
        }
        // Its own remaining flows' new rates have no one to go to.
        pushes.retain(|(c, _)| *c != client);
        pushes
    }

    /// Removes flows silent for longer than their timeouts; returns the rates pushed.
    pub fn expire(&mut self, now: Instant) -> Vec<(ClientId, Push)> {
        let mut silent: Vec<u64> = self
            .flows
            .iter()
            .filter(|(_, f)| now.saturating_since(f.last_seen) > f.timeout)
            .map(|(&id, _)| id)
            .collect();
        // In id order: the same removals in the same order whatever the map's.
        silent.sort_unstable();
        let mut pushes = Vec::new();
        for id in silent {
            if let Some(c) = self.flows.get(&id).map(|f| f.client) {
                if let Some(c) = self.clients.get_mut(&c) {
                    c.flows.remove(&id);
                }
            }
            self.remove_flow(id, now, &mut pushes);
        }
        pushes
    }

    /// Handles one request of `client` at `now`.
    pub fn handle(&mut self, client: ClientId, op: Op, now: Instant) -> Outcome {
        let mut pushes = Vec::new();
        let mut close = false;
        let reply = match self.clients.get(&client) {
            None => err("client", "not connected"),
            Some(c) if !c.hello && !matches!(op, Op::Hello { .. }) => err(
                "hello",
                "the first request of a session must be Hello with the protocol version",
            ),
            Some(_) => match self.dispatch(client, op, now, &mut pushes, &mut close) {
                Ok(r) => r,
                Err(e) => e,
            },
        };
        Outcome {
            reply,
            pushes,
            close,
        }
    }

    fn dispatch(
        &mut self,
        client: ClientId,
        op: Op,
        now: Instant,
        pushes: &mut Vec<(ClientId, Push)>,
        close: &mut bool,
    ) -> Result<ReplyBody, ReplyBody> {
        match op {
            Op::Hello { version } => {
                let c = self.clients.get_mut(&client).expect("checked");
                if c.hello {
                    return Err(err("hello", "Hello was already sent"));
                }
                if version != VERSION {
                    *close = true;
                    return Err(err(
                        "hello.version",
                        format!("client speaks version {version}, the daemon {VERSION}"),
                    ));
                }
                c.hello = true;
                Ok(ReplyBody::Hello {
                    version: VERSION,
                    uid: c.uid,
                    pid: 0, // the server fills in the peer's pid
                })
            }
            Op::RegisterRate {
                group,
                priority,
                initial_rate_bps,
                desired_rate_bps,
                algorithm,
                timeout_ms,
            } => self.register(
                client,
                "register_rate",
                &group,
                priority,
                timeout_ms,
                Kind::Rate {
                    initial_rate_bps,
                    desired_rate_bps,
                    algorithm,
                },
                now,
                pushes,
            ),
            Op::RegisterWindow {
                group,
                priority,
                cwnd_pkts,
                ssthresh_pkts,
                timeout_ms,
            } => self.register(
                client,
                "register_window",
                &group,
                priority,
                timeout_ms,
                Kind::Window {
                    cwnd_pkts,
                    ssthresh_pkts,
                },
                now,
                pushes,
            ),
            Op::UpdateRate {
                flow,
                cc_rate_bps,
                desired_rate_bps,
                rtt_us,
            } => {
                let op = "update_rate";
                let gid = self.own(client, op, flow)?;
                let desired = desired_rate_bps.or(self.flows[&flow].desired_rate_bps);
                let mut u = FseUpdate::new(cc_rate_bps, now);
                if let Some(d) = desired {
                    u = u.desired(d);
                }
                if let Some(r) = rtt_us {
                    u = u.rtt(Duration::from_nanos(r.saturating_mul(1000)));
                }
                let group = self.groups.get_mut(&gid).expect("bound");
                let watched = group.subscribers > 0;
                let Coupler::Rate(g) = &mut group.coupler else {
                    return Err(err(
                        format!("{op}.flow"),
                        "a window flow: update it with UpdateWindow",
                    ));
                };
                let out = g.update(FlowId(flow), u).map_err(|e| coupling_err(op, e))?;
                let rate = out.rate_bps;
                let assignments = if watched {
                    out.assignments.to_vec()
                } else {
                    Vec::new()
                };
                let f = self.flows.get_mut(&flow).expect("owned");
                f.last_seen = now;
                f.desired_rate_bps = desired;
                self.push(&assignments, Some(flow), pushes);
                Ok(ReplyBody::Rate { rate_bps: rate })
            }
            Op::UpdateWindow {
                flow,
                cwnd_pkts,
                ssthresh_pkts,
                state,
                timeout,
                in_flight_pkts,
            } => {
                let op = "update_window";
                let gid = self.own(client, op, flow)?;
                let Coupler::Window(g, _) = &mut self.groups.get_mut(&gid).expect("bound").coupler
                else {
                    return Err(err(
                        format!("{op}.flow"),
                        "a rate flow: update it with UpdateRate",
                    ));
                };
                let mut u = TcpUpdate::new(
                    cwnd_pkts,
                    ssthresh_pkts,
                    match state {
                        WindowState::SlowStart => TcpState::SlowStart,
                        WindowState::CongestionAvoidance => TcpState::CongestionAvoidance,
                        WindowState::FastRecovery => TcpState::FastRecovery,
                    },
                );
                u.timeout = timeout;
                u.in_flight_pkts = in_flight_pkts;
                let r = g.update(FlowId(flow), u).map_err(|e| coupling_err(op, e))?;
                self.flows.get_mut(&flow).expect("owned").last_seen = now;
                Ok(ReplyBody::Window {
                    cwnd_pkts: r.map(|r| r.cwnd_pkts),
                    ssthresh_pkts: r.map(|r| r.ssthresh_pkts),
                })
            }
            Op::SetPriority { flow, priority } => {
                let op = "set_priority";
                let gid = self.own(client, op, flow)?;
                check_priority(priority).map_err(|e| coupling_err(op, e))?;
                if let Coupler::Window(_, CouplerKind::Ccc { int: true, .. }) =
                    self.groups[&gid].coupler
                {
                    if priority < 1.0 / 65536.0 {
                        return Err(err(
                            format!("{op}.priority"),
                            format!("{priority}: the group's integer coupler takes priorities >= 1/65536"),
                        ));
                    }
                }
                let f = self.flows.get_mut(&flow).expect("owned");
                f.claimed = priority;
                f.last_seen = now;
                self.rebalance(gid, now, pushes);
                Ok(ReplyBody::Ok)
            }
            Op::Refresh { flow } => {
                self.own(client, "refresh", flow)?;
                self.flows.get_mut(&flow).expect("owned").last_seen = now;
                Ok(ReplyBody::Ok)
            }
            Op::Leave { flow } => {
                self.own(client, "leave", flow)?;
                self.clients
                    .get_mut(&client)
                    .expect("checked")
                    .flows
                    .remove(&flow);
                self.remove_flow(flow, now, pushes);
                Ok(ReplyBody::Ok)
            }
            Op::QueryFlow { flow } => {
                self.own(client, "query_flow", flow)?;
                Ok(ReplyBody::Flow(self.flow_info(flow)))
            }
            Op::QueryGroup { group } => {
                let mine: Vec<u64> = self.clients[&client]
                    .flows
                    .iter()
                    .copied()
                    .filter(|f| self.flows[f].group == group)
                    .collect();
                // A group is visible to a client with a flow in it (ids of others' groups are
                // as unknown as ids that were never used).
                let Some(g) = self.groups.get(&group).filter(|_| !mine.is_empty()) else {
                    return Err(err(
                        "query_group.group",
                        format!("unknown group {group} (or none of your flows is in it)"),
                    ));
                };
                let (coupler, sum, leftover) = match &g.coupler {
                    Coupler::Rate(r) => (
                        r.algorithm().name().to_string(),
                        r.sum_calculated_rate(),
                        r.leftover(),
                    ),
                    Coupler::Window(w, k) => (k.name().to_string(), w.sum_cwnd(), 0.0),
                };
                Ok(ReplyBody::Group(GroupInfo {
                    group,
                    coupler,
                    flows: mine.iter().map(|&f| self.flow_info(f)).collect(),
                    flow_count: g.members.len() as u32,
                    sum_calculated: sum,
                    leftover,
                }))
            }
            Op::Subscribe { flow } => {
                let gid = self.own(client, "subscribe", flow)?;
                let f = self.flows.get_mut(&flow).expect("owned");
                if !f.subscribed {
                    f.subscribed = true;
                    self.groups.get_mut(&gid).expect("bound").subscribers += 1;
                }
                Ok(ReplyBody::Ok)
            }
        }
    }

    /// The group of `flow` if `client` owns it.
    fn own(&self, client: ClientId, op: &str, flow: u64) -> Result<u64, ReplyBody> {
        match self.flows.get(&flow) {
            Some(f) if f.client == client => Ok(f.group),
            _ => Err(err(
                format!("{op}.flow"),
                format!("unknown flow {flow} (not one of this connection's)"),
            )),
        }
    }

    fn flow_info(&self, flow: u64) -> FlowInfo {
        let f = &self.flows[&flow];
        let (rate_or_cwnd, desired) = match &self.groups[&f.group].coupler {
            Coupler::Rate(g) => g.flow(FlowId(flow)).map_or((f64::NAN, f64::NAN), |v| {
                (v.fse_rate_bps, v.desired_rate_bps)
            }),
            Coupler::Window(g, _) => (g.conn(FlowId(flow)).map_or(f64::NAN, |v| v.cwnd_pkts), 0.0),
        };
        FlowInfo {
            flow,
            group: f.group,
            priority: f.claimed,
            effective_priority: f.effective,
            rate_or_cwnd,
            desired_rate_bps: desired,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        client: ClientId,
        op: &str,
        spec: &GroupSpec,
        priority: f64,
        timeout_ms: Option<u32>,
        kind: Kind,
        now: Instant,
        pushes: &mut Vec<(ClientId, Push)>,
    ) -> Result<ReplyBody, ReplyBody> {
        let uid = self.clients[&client].uid;
        if let GroupSpec::Configured(l) = spec {
            if l.is_empty() || l.len() > MAX_LABEL_BYTES {
                return Err(err(
                    format!("{op}.group"),
                    format!(
                        "a label of {} bytes: expected 1 ..= {MAX_LABEL_BYTES}",
                        l.len()
                    ),
                ));
            }
        }
        check_priority(priority).map_err(|e| coupling_err(op, e))?;
        let timeout = check_timeout(op, &self.config, timeout_ms)?;
        if let Kind::Rate {
            desired_rate_bps: Some(d),
            ..
        } = &kind
        {
            coupling::units::check_desired_rate("desired_rate_bps", *d)
                .map_err(|e| coupling_err(op, e))?;
        }
        let key = group_key(spec);
        let policy = self.config.user(uid).clone();
        if !policy.may_join(&key) {
            return Err(err(
                format!("{op}.group"),
                format!(
                    "user {uid} may not join group {key:?} (the configuration's groups for it)"
                ),
            ));
        }
        let held = self.per_user.get(&uid).copied().unwrap_or(0);
        if held >= policy.max_flows {
            return Err(err(
                op,
                format!("user {uid} holds {held} flows: its max_flows"),
            ));
        }
        let scope = if self.config.shared_with(&key, uid) {
            Scope::Shared
        } else {
            Scope::User(uid)
        };
        let fixed = self
            .config
            .group(&key)
            .and_then(|g| g.algorithm.as_deref())
            .and_then(RateAlgorithm::from_name);
        let existing = self.by_key.get(&(scope.clone(), key.clone())).copied();
        // The coupler it joins, checked against what the flow asks for, before anything changes.
        if let Some(gid) = existing {
            match (&self.groups[&gid].coupler, &kind) {
                (Coupler::Rate(g), Kind::Rate { algorithm, .. }) => {
                    if let Some(a) = algorithm.filter(|a| a.to_fse() != g.algorithm()) {
                        return Err(err(
                            format!("{op}.algorithm"),
                            format!("{}: the group runs {}", a.name(), g.algorithm().name()),
                        ));
                    }
                }
                (Coupler::Window(..), Kind::Window { .. }) => {}
                (Coupler::Rate(_), _) => {
                    return Err(err(format!("{op}.group"), "a group of rate-based flows"))
                }
                (Coupler::Window(..), _) => {
                    return Err(err(format!("{op}.group"), "a group of window-based flows"))
                }
            }
        } else if let (
            Some(f),
            Kind::Rate {
                algorithm: Some(a), ..
            },
        ) = (fixed, &kind)
        {
            if *a != f {
                return Err(err(
                    format!("{op}.algorithm"),
                    format!(
                        "{}: the configuration fixes {} for {key:?}",
                        a.name(),
                        f.name()
                    ),
                ));
            }
        }
        // The newcomer's effective priority under its user's share limit.
        let members: Vec<u64> = existing.map_or_else(Vec::new, |g| {
            self.groups[&g].members.iter().copied().collect()
        });
        let effective = {
            let mut users = self.claims(&members);
            match users.iter_mut().find(|(u, _)| *u == uid) {
                Some((_, c)) => *c += priority,
                None => users.push((uid, priority)),
            }
            let limits: Vec<(f64, f64)> = users
                .iter()
                .map(|(u, c)| (*c, self.config.user(*u).max_share))
                .collect();
            let scales = share_scales(&limits);
            let i = users.iter().position(|(u, _)| *u == uid).expect("pushed");
            let floor = match (existing, &kind) {
                (Some(g), _) => priority_floor(&self.groups[&g].coupler),
                (None, Kind::Window { .. })
                    if matches!(
                        self.config.window_coupler(),
                        CouplerKind::Ccc { int: true, .. }
                    ) =>
                {
                    1.0 / 65536.0
                }
                _ => f64::MIN_POSITIVE,
            };
            (priority * scales[i])
                .max(floor.min(priority))
                .min(coupling::units::MAX_PRIORITY)
        };
        let id = self.next_flow;
        let fid = FlowId(id);
        // Build or find the group, register (the coupler checks before it changes anything).
        let (gid, reply) = match existing {
            Some(gid) => {
                let c = &mut self.groups.get_mut(&gid).expect("exists").coupler;
                let reply = register_into(c, fid, effective, &kind, now)
                    .map_err(|e| coupling_err(op, e))?;
                (gid, reply)
            }
            None => {
                let mut coupler = match &kind {
                    Kind::Rate { algorithm, .. } => {
                        let a = fixed
                            .or(*algorithm)
                            .unwrap_or(self.config.default_algorithm());
                        Coupler::Rate(FseGroup::new(a.to_fse()))
                    }
                    Kind::Window { .. } => {
                        let k = self.config.window_coupler();
                        Coupler::Window(k.build(), k)
                    }
                };
                let reply = register_into(&mut coupler, fid, effective, &kind, now)
                    .map_err(|e| coupling_err(op, e))?;
                let gid = self.next_group;
                self.next_group += 1;
                self.by_key.insert((scope.clone(), key.clone()), gid);
                self.groups.insert(
                    gid,
                    Group {
                        key: (scope, key),
                        coupler,
                        members: BTreeSet::new(),
                        subscribers: 0,
                    },
                );
                (gid, reply)
            }
        };
        self.next_flow += 1;
        *self.per_user.entry(uid).or_default() += 1;
        self.groups
            .get_mut(&gid)
            .expect("exists")
            .members
            .insert(id);
        self.flows.insert(
            id,
            Flow {
                client,
                uid,
                group: gid,
                claimed: priority,
                effective,
                timeout,
                last_seen: now,
                subscribed: false,
                desired_rate_bps: match kind {
                    Kind::Rate {
                        desired_rate_bps, ..
                    } => desired_rate_bps,
                    Kind::Window { .. } => None,
                },
            },
        );
        self.clients
            .get_mut(&client)
            .expect("checked")
            .flows
            .insert(id);
        let (a, b, assignments) = reply;
        self.push(&assignments, Some(id), pushes);
        // The others' shares under the limits with the newcomer in.
        self.rebalance(gid, now, pushes);
        Ok(match kind {
            Kind::Rate { .. } => ReplyBody::Registered {
                flow: id,
                group: gid,
                rate_bps: a,
            },
            Kind::Window { .. } => ReplyBody::RegisteredWindow {
                flow: id,
                group: gid,
                cwnd_pkts: a,
                ssthresh_pkts: b,
            },
        })
    }

    /// Each user's claimed priority sum over `members`, in first-seen order.
    fn claims(&self, members: &[u64]) -> Vec<(u32, f64)> {
        let mut users: Vec<(u32, f64)> = Vec::new();
        for f in members {
            let f = &self.flows[f];
            match users.iter_mut().find(|(u, _)| *u == f.uid) {
                Some((_, c)) => *c += f.claimed,
                None => users.push((f.uid, f.claimed)),
            }
        }
        users
    }

    /// Recomputes the group's effective priorities under the users' share limits and gives the
    /// changed ones to the coupler.
    /// Every value handed over is a valid priority (held between the coupler's floor and
    /// `MAX_PRIORITY`), so the couplers accept them all; a refusal would be a bug in a coupler's
    /// checks, and leaves that flow's effective priority as it was.
    fn rebalance(&mut self, gid: u64, now: Instant, pushes: &mut Vec<(ClientId, Push)>) {
        let members: Vec<u64> = self.groups[&gid].members.iter().copied().collect();
        let users = self.claims(&members);
        let limits: Vec<(f64, f64)> = users
            .iter()
            .map(|(u, c)| (*c, self.config.user(*u).max_share))
            .collect();
        let scales = share_scales(&limits);
        let floor = priority_floor(&self.groups[&gid].coupler);
        for f in members {
            let (uid, claimed, old) = {
                let e = &self.flows[&f];
                (e.uid, e.claimed, e.effective)
            };
            let i = users.iter().position(|(u, _)| *u == uid).expect("member");
            let eff = (claimed * scales[i])
                .max(floor.min(claimed))
                .min(coupling::units::MAX_PRIORITY);
            if eff == old {
                continue;
            }
            let assignments = match &mut self.groups.get_mut(&gid).expect("exists").coupler {
                Coupler::Rate(g) => g.set_priority(FlowId(f), eff, now).map(|a| a.to_vec()),
                Coupler::Window(g, _) => g.set_priority(FlowId(f), eff).map(|()| Vec::new()),
            };
            if let Ok(assignments) = assignments {
                self.flows.get_mut(&f).expect("member").effective = eff;
                self.push(&assignments, None, pushes);
            }
        }
    }

    /// Rates for subscribed flows' clients (not for `except`, whose rate is in the reply).
    fn push(
        &self,
        assignments: &[Assignment],
        except: Option<u64>,
        out: &mut Vec<(ClientId, Push)>,
    ) {
        for a in assignments {
            if Some(a.flow.0) == except {
                continue;
            }
            if let Some(f) = self.flows.get(&a.flow.0).filter(|f| f.subscribed) {
                out.push((
                    f.client,
                    Push {
                        flow: a.flow.0,
                        rate_bps: a.rate_bps,
                    },
                ));
            }
        }
    }

    /// Removes a flow from its group (the client's own list is the caller's to update).
    fn remove_flow(&mut self, flow: u64, now: Instant, pushes: &mut Vec<(ClientId, Push)>) {
        let Some(f) = self.flows.remove(&flow) else {
            return;
        };
        if let Some(n) = self.per_user.get_mut(&f.uid) {
            *n -= 1;
            if *n == 0 {
                self.per_user.remove(&f.uid);
            }
        }
        let gid = f.group;
        let g = self.groups.get_mut(&gid).expect("a flow's group exists");
        g.members.remove(&flow);
        if f.subscribed {
            g.subscribers -= 1;
        }
        let assignments = match &mut g.coupler {
            Coupler::Rate(r) => r
                .leave(FlowId(flow))
                .map(|a| a.to_vec())
                .unwrap_or_default(),
            Coupler::Window(w, _) => {
                let _ = w.leave(FlowId(flow));
                Vec::new()
            }
        };
        if g.members.is_empty() {
            let key = g.key.clone();
            self.groups.remove(&gid);
            self.by_key.remove(&key);
            return;
        }
        self.push(&assignments, None, pushes);
        self.rebalance(gid, now, pushes);
    }
}

/// What a registering flow brings.
enum Kind {
    Rate {
        initial_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        algorithm: Option<RateAlgorithm>,
    },
    Window {
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    },
}

/// Registers a flow of `kind` with `coupler` (of the same kind: checked by the caller); returns
/// (rate or cwnd, 0 or ssthresh, the assignments to push).
fn register_into(
    coupler: &mut Coupler,
    flow: FlowId,
    priority: f64,
    kind: &Kind,
    now: Instant,
) -> Result<(f64, f64, Vec<Assignment>), coupling::Error> {
    match (coupler, kind) {
        (
            Coupler::Rate(g),
            Kind::Rate {
                initial_rate_bps, ..
            },
        ) => register_rate(g, flow, priority, *initial_rate_bps, now),
        (
            Coupler::Window(g, _),
            Kind::Window {
                cwnd_pkts,
                ssthresh_pkts,
            },
        ) => g
            .register(flow, priority, *cwnd_pkts, *ssthresh_pkts)
            .map(|r| (r.cwnd_pkts, r.ssthresh_pkts, Vec::new())),
        _ => unreachable!("the group's kind is checked before registering"),
    }
}

/// Registers a rate flow; returns (rate, 0, no assignments): registration recomputes no other
/// flow's rate (step 1 of every algorithm: the others' shares change at the next UPDATE; the
/// group's `assignments()` still hold the previous operation's, which must not be pushed again).
fn register_rate(
    g: &mut FseGroup,
    flow: FlowId,
    priority: f64,
    initial_rate_bps: f64,
    now: Instant,
) -> Result<(f64, f64, Vec<Assignment>), coupling::Error> {
    let rate = g.register(flow, priority, initial_rate_bps, now)?;
    Ok((rate, 0.0, Vec::new()))
}
