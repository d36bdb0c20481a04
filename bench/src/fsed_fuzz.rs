//! A deterministic (seeded) fuzzer of `macroflowd`'s wire parser and state machine, in process
//! (`src/bin/fsed_fuzz.rs` runs it from the command line, `tests/fsed_fuzz.rs` for 200,000
//! executions under `cargo test`).
//!
//! One **execution** is one byte string, as one connection would send it, built by one of these
//! strategies (seeded PCG64, so a run is replayed by its seed and count):
//!
//! - pure random bytes (mostly short, one in a thousand up to 17 KiB), half of them with a
//!   length prefix that fits;
//! - one to three valid frames (`proto::encode` of a [`Request`]) of any [`Op`] variant with random
//!   field values: mostly in range, else NaN, infinities, negative, zero, subnormal, huge, just past
//!   the limits; labels empty, over 1 KiB, random; flow and group ids of this client, of other
//!   clients, or made up;
//! - valid frames with 1-4 mutations (bit flips, bytes set to 0x00/0x7f/0x80/0xff, truncation,
//!   insertion, deletion, duplication), three in four with the length prefix fixed up afterwards so
//!   that the mutated payload reaches the decoder;
//! - a random length prefix (0, 1, off by one, the maximum, just past it, `u32::MAX`, random) before
//!   a valid or random payload.
//!
//! Slots 0-2 get only the valid and the mutated frames with fitting prefixes (so they keep their
//! connections and build up flows); slots 3 and 4 get every strategy.
//!
//! It is cut into frames as the server does (`proto::frame_len` on each 4-byte prefix: an invalid
//! length closes the connection, i.e. the client disconnects; a short tail waits forever, i.e.
//! ends the execution), each payload goes through `proto::decode::<Request>`, and each decoded
//! request goes to one [`Daemon`] through [`Daemon::handle`] as the execution's client, at an
//! explicit, increasing time. Five client slots (uids 1000-1003 and 0, under a configuration with
//! share limits, shared and fixed-algorithm groups, a restricted user and `max_clients = 6`) stay
//! connected across executions; between executions a client is now and then disconnected and
//! replaced, the daemon expires silent flows, time jumps past the timeouts, or two more clients try
//! to connect (the second must be refused). Every 100,000 executions the time jumps past the
//! longest timeout (every flow and group must be gone), every client disconnects (none left), and
//! a new daemon starts under the next configuration (the epochs go through each default algorithm
//! with each window coupler the configuration accepts).
//!
//! **Invariants**, checked on every execution (any failure is a [`Violation`]):
//!
//! - nothing panics (each execution runs under `catch_unwind`; after a panic the daemon is replaced);
//! - `frame_len` accepts exactly 1 ..= `MAX_FRAME_BYTES`, and its and `decode`'s errors say why;
//!   a decoded request re-encodes and decodes to itself (bit for bit, NaN included);
//! - every error reply names a field: non-empty, and `client`, `hello` or the request's own
//!   operation (`update_rate.cc_rate_bps`, `register_rate`, ...);
//! - an error reply changes nothing observable: the daemon's flow, group and client counts, and the
//!   encoded `QueryFlow` replies of all the requester's flows (and of the target flow through its
//!   owner when it is another client's) and `QueryGroup` replies of their groups (sums, leftover,
//!   member counts) are the same bytes before and after;
//! - requests before Hello get the `hello` error, a second Hello is refused;
//! - the daemon holds exactly the flows, groups and clients a model of the replies says it should
//!   (registrations add, Leave and disconnect remove, `expire` removes those whose owners can no
//!   longer query them), so memory is bounded: no user holds more than its `max_flows`, no more
//!   than `max_clients` clients connect, every group has a flow;
//! - rates, windows and pushes in replies are finite and not negative, pushes go to connected
//!   clients, a queried flow's effective priority is in (0, claimed].

use coupling::Instant;
use fsed::config::Config;
use fsed::daemon::{ClientId, Daemon};
use fsed::proto::{
    self, GroupSpec, Op, RateAlgorithm, ReplyBody, Request, WindowState, MAX_FRAME_BYTES, VERSION,
};
use rand::{Rng, RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

/// What to run.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    pub execs: u64,
    pub seed: u64,
    /// Executions per daemon (then the timeout jump, disconnects and the next configuration).
    pub epoch_execs: u64,
}

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig {
            execs: 10_000_000,
            seed: 1,
            epoch_execs: 100_000,
        }
    }
}

/// One broken invariant.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The execution (0-based) it happened in; replay with the same seed to reach it.
    pub exec: u64,
    pub kind: &'static str,
    pub detail: String,
    /// The execution's bytes in hex (the first 256).
    pub input_hex: String,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    pub execs: u64,
    pub seed: u64,
    pub requests: u64,
    pub elapsed_s: f64,
    /// Counts per outcome: `strategy.*`, `frame.*`, `ok.<op>`, `err.<field>`, `event.*`.
    pub outcomes: BTreeMap<String, u64>,
    pub violation_count: u64,
    /// Violations per kind.
    pub violation_kinds: BTreeMap<String, u64>,
    /// The first [`MAX_KEPT`] violations of each kind.
    pub violations: Vec<Violation>,
    pub panics: u64,
    pub epochs: u64,
    pub peak_flows: usize,
    pub peak_groups: usize,
    pub peak_clients: usize,
}

/// Violations of each kind kept in full.
pub const MAX_KEPT: u64 = 5;

const UIDS: [u32; 5] = [1000, 1001, 1002, 1003, 0];
/// Slots from this one on also get random bytes, random length prefixes and mutated prefixes.
const ROUGH_FROM: usize = 3;
const MAX_TIMEOUT_S: u64 = 30;
const ALGORITHMS: [&str; 4] = ["active", "conservative_active", "simple_passive", "passive"];
/// The window couplers the daemon's configuration accepts (`CouplerKind::names()` less those it
/// refuses, e.g. the handover variants, which need a call at every ACK).
fn window_couplers() -> Vec<&'static str> {
    coupling::tcp::CouplerKind::names()
        .filter(|n| Config::parse(&format!("window_coupler = \"{n}\"")).is_ok())
        .collect()
}

/// The configuration of epoch `e`: the epochs go through every default algorithm with every
/// window coupler.
pub fn config_text(e: u64) -> String {
    let alg = ALGORITHMS[(e % 4) as usize];
    let wcs = window_couplers();
    let wc = wcs[((e / 4) % wcs.len() as u64) as usize];
    format!(
        r#"default_algorithm = "{alg}"
window_coupler = "{wc}"
soft_state_timeout_s = 5.0
max_timeout_s = {MAX_TIMEOUT_S}.0
max_clients = 6

[[group]]
key = "label:shared"
shared_by = "all"

[[group]]
key = "label:fixed"
algorithm = "passive"
shared_by = [1000, 1001]

[[group]]
key = "fgi:7"
algorithm = "active"

[default_user]
max_flows = 12

[[user]]
uid = 1000
max_share = 0.25
max_flows = 8

[[user]]
uid = 1001
max_share = 0.5
max_flows = 16

[[user]]
uid = 1003
max_flows = 4
groups = ["label:s*", "fgi:*"]
"#
    )
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Hello { .. } => "hello",
        Op::RegisterRate { .. } => "register_rate",
        Op::RegisterWindow { .. } => "register_window",
        Op::UpdateRate { .. } => "update_rate",
        Op::UpdateWindow { .. } => "update_window",
        Op::SetPriority { .. } => "set_priority",
        Op::Refresh { .. } => "refresh",
        Op::Leave { .. } => "leave",
        Op::QueryFlow { .. } => "query_flow",
        Op::QueryGroup { .. } => "query_group",
        Op::Subscribe { .. } => "subscribe",
    }
}

/// The flow an op names, if any.
fn target_flow(op: &Op) -> Option<u64> {
    match op {
        Op::UpdateRate { flow, .. }
        | Op::UpdateWindow { flow, .. }
        | Op::SetPriority { flow, .. }
        | Op::Refresh { flow }
        | Op::Leave { flow }
        | Op::QueryFlow { flow }
        | Op::Subscribe { flow } => Some(*flow),
        _ => None,
    }
}

#[derive(Debug)]
struct Slot {
    id: ClientId,
    uid: u32,
    hello: bool,
    flows: BTreeSet<u64>,
}

/// The daemon and what its replies say it holds.
struct World {
    daemon: Daemon,
    slots: Vec<Slot>,
    /// flow -> (slot, group)
    flows: BTreeMap<u64, (usize, u64)>,
    /// group -> flows in it
    groups: BTreeMap<u64, u32>,
    per_uid: BTreeMap<u32, u32>,
    next_client: ClientId,
    now: u64,
    /// Flow ids handed out so far (for made-up ids near them).
    max_flow_seen: u64,
}

/// Why an execution stopped short of its end (the world is rebuilt).
struct Broken;

struct Ctx<'a> {
    exec: u64,
    input: &'a [u8],
    report: &'a mut FuzzReport,
}

impl Ctx<'_> {
    fn count(&mut self, key: &str) {
        if let Some(n) = self.report.outcomes.get_mut(key) {
            *n += 1;
        } else {
            self.report.outcomes.insert(key.to_string(), 1);
        }
    }

    fn violation(&mut self, kind: &'static str, detail: String) {
        self.report.violation_count += 1;
        let n = self
            .report
            .violation_kinds
            .entry(kind.to_string())
            .or_default();
        *n += 1;
        if *n <= MAX_KEPT {
            self.report.violations.push(Violation {
                exec: self.exec,
                kind,
                detail,
                input_hex: hex(&self.input[..self.input.len().min(256)]),
            });
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl World {
    fn new(epoch: u64) -> World {
        let config = Config::parse(&config_text(epoch)).expect("the fuzz configuration is valid");
        let mut w = World {
            daemon: Daemon::new(config).expect("valid"),
            slots: Vec::new(),
            flows: BTreeMap::new(),
            groups: BTreeMap::new(),
            per_uid: BTreeMap::new(),
            next_client: 1,
            now: 1_000_000,
            max_flow_seen: 0,
        };
        for (i, &uid) in UIDS.iter().enumerate() {
            let id = w.next_client;
            w.next_client += 1;
            w.daemon.connect(id, uid).expect("room for the slots");
            w.slots.push(Slot {
                id,
                uid,
                hello: false,
                flows: BTreeSet::new(),
            });
            debug_assert_eq!(w.slots.len(), i + 1);
        }
        w
    }

    fn t(&self) -> Instant {
        Instant::from_nanos(self.now)
    }

    fn max_flows(&self, uid: u32) -> u32 {
        self.daemon.config().user(uid).max_flows
    }

    fn forget_flow(&mut self, flow: u64) {
        if let Some((slot, group)) = self.flows.remove(&flow) {
            self.slots[slot].flows.remove(&flow);
            let uid = self.slots[slot].uid;
            if let Some(n) = self.per_uid.get_mut(&uid) {
                *n -= 1;
                if *n == 0 {
                    self.per_uid.remove(&uid);
                }
            }
            if let Some(n) = self.groups.get_mut(&group) {
                *n -= 1;
                if *n == 0 {
                    self.groups.remove(&group);
                }
            }
        }
    }

    /// Disconnects slot `s` and connects a new client with a random uid in its place.
    fn replace(&mut self, s: usize, uid: u32, ctx: &mut Ctx) -> Result<(), Broken> {
        let now = self.t();
        let pushes = self.daemon.disconnect(self.slots[s].id, now);
        let flows: Vec<u64> = self.slots[s].flows.iter().copied().collect();
        for f in flows {
            self.forget_flow(f);
        }
        for (c, p) in &pushes {
            if *c == self.slots[s].id {
                ctx.violation(
                    "push_to_gone",
                    format!("a push to the client being disconnected: {p:?}"),
                );
            }
        }
        self.check_pushes(&pushes, ctx);
        let id = self.next_client;
        self.next_client += 1;
        if let Err(e) = self.daemon.connect(id, uid) {
            ctx.violation(
                "connect_refused",
                format!("a slot's reconnect was refused: {e}"),
            );
            return Err(Broken);
        }
        self.slots[s] = Slot {
            id,
            uid,
            hello: false,
            flows: BTreeSet::new(),
        };
        ctx.count("event.reconnect");
        Ok(())
    }

    fn check_pushes(&self, pushes: &[(ClientId, proto::Push)], ctx: &mut Ctx) {
        for (c, p) in pushes {
            if !self.slots.iter().any(|s| s.id == *c) {
                ctx.violation(
                    "push_to_unknown_client",
                    format!("push {p:?} to client {c}"),
                );
            }
            if !(p.rate_bps.is_finite() && p.rate_bps >= 0.0) {
                ctx.violation("bad_push_rate", format!("push {p:?} to client {c}"));
            }
        }
    }

    /// Expires and sweeps the model: a flow is gone if its owner can no longer query it.
    fn expire(&mut self, ctx: &mut Ctx) {
        let now = self.t();
        let pushes = self.daemon.expire(now);
        self.check_pushes(&pushes, ctx);
        let known: Vec<(u64, usize)> = self.flows.iter().map(|(&f, &(s, _))| (f, s)).collect();
        for (f, s) in known {
            let r = self
                .daemon
                .handle(self.slots[s].id, Op::QueryFlow { flow: f }, now)
                .reply;
            match r {
                ReplyBody::Flow(_) => {}
                ReplyBody::Error { field, .. } if field == "query_flow.flow" => {
                    self.forget_flow(f);
                    ctx.count("event.expired_flow");
                }
                other => ctx.violation(
                    "query_after_expire",
                    format!("QueryFlow {f} after expire: {other:?}"),
                ),
            }
        }
    }

    /// The observable state around one request of slot `s` naming `target`.
    fn snapshot(&mut self, s: usize, target: Option<u64>, op: &Op) -> Vec<u8> {
        let now = self.t();
        let id = self.slots[s].id;
        let mut out = Vec::with_capacity(512);
        for n in [
            self.daemon.flow_count(),
            self.daemon.group_count(),
            self.daemon.client_count(),
        ] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        let mut groups = BTreeSet::new();
        for &f in &self.slots[s].flows {
            let r = self.daemon.handle(id, Op::QueryFlow { flow: f }, now).reply;
            out.extend_from_slice(&proto::encode(&r));
            groups.insert(self.flows[&f].1);
        }
        if let Some(f) = target {
            if let Some(&(o, g)) = self.flows.get(&f) {
                if o != s {
                    let r = self
                        .daemon
                        .handle(self.slots[o].id, Op::QueryFlow { flow: f }, now)
                        .reply;
                    out.extend_from_slice(&proto::encode(&r));
                    let r = self
                        .daemon
                        .handle(self.slots[o].id, Op::QueryGroup { group: g }, now)
                        .reply;
                    out.extend_from_slice(&proto::encode(&r));
                }
            }
        }
        if let Op::QueryGroup { group } = op {
            groups.insert(*group);
        }
        for g in groups {
            let r = self
                .daemon
                .handle(id, Op::QueryGroup { group: g }, now)
                .reply;
            out.extend_from_slice(&proto::encode(&r));
        }
        out
    }

    /// One decoded request of slot `s`.
    fn apply(&mut self, s: usize, op: Op, ctx: &mut Ctx) -> Result<bool, Broken> {
        let name = op_name(&op);
        let target = target_flow(&op);
        let before = self.snapshot(s, target, &op);
        let was_hello = self.slots[s].hello;
        let is_hello = matches!(op, Op::Hello { .. });
        let now = self.t();
        let id = self.slots[s].id;
        let out = self.daemon.handle(id, op.clone(), now);
        ctx.report.requests += 1;
        self.check_pushes(&out.pushes, ctx);
        let mut closed = false;
        match &out.reply {
            ReplyBody::Error { field, message } => {
                ctx.count(&format!("err.{field}"));
                let names_field = !field.is_empty()
                    && (field == "client"
                        || field == "hello"
                        || field == name
                        || field
                            .strip_prefix(name)
                            .is_some_and(|rest| rest.starts_with('.') && rest.len() > 1));
                if !names_field {
                    ctx.violation(
                        "error_field",
                        format!("{name}: error field {field:?} ({message}) for {op:?}"),
                    );
                }
                if message.is_empty() {
                    ctx.violation("error_message", format!("{name}: empty message for {op:?}"));
                }
                if !was_hello && !is_hello && field != "hello" {
                    ctx.violation(
                        "before_hello",
                        format!("{op:?} before Hello: error {field:?} instead of hello"),
                    );
                }
                let after = self.snapshot(s, target, &op);
                if after != before {
                    ctx.violation(
                        "error_changed_state",
                        format!(
                            "{op:?} got error {field:?} ({message}) but the state changed \
                             (counts/QueryFlow/QueryGroup replies differ)"
                        ),
                    );
                    return Err(Broken);
                }
                if !out.pushes.is_empty() {
                    ctx.violation(
                        "error_pushed",
                        format!("{op:?} got error {field:?} but pushed {:?}", out.pushes),
                    );
                }
                if out.close {
                    if !(is_hello && field == "hello.version") {
                        ctx.violation("close", format!("{op:?}: close with error {field:?}"));
                    }
                    closed = true;
                }
            }
            body => {
                ctx.count(&format!("ok.{name}"));
                if !was_hello && !is_hello {
                    ctx.violation("before_hello", format!("{op:?} before Hello: {body:?}"));
                }
                if out.close {
                    ctx.violation("close", format!("{op:?}: close with {body:?}"));
                    closed = true;
                }
                self.after_ok(s, &op, body, ctx)?;
            }
        }
        Ok(closed)
    }

    fn after_ok(
        &mut self,
        s: usize,
        op: &Op,
        body: &ReplyBody,
        ctx: &mut Ctx,
    ) -> Result<(), Broken> {
        let ok_num = |v: f64| v.is_finite() && v >= 0.0;
        match (op, body) {
            (Op::Hello { .. }, ReplyBody::Hello { version, uid, .. }) => {
                if *version != VERSION || *uid != self.slots[s].uid {
                    ctx.violation("hello", format!("{body:?} for uid {}", self.slots[s].uid));
                }
                self.slots[s].hello = true;
            }
            (
                Op::RegisterRate { .. },
                ReplyBody::Registered {
                    flow,
                    group,
                    rate_bps,
                },
            )
            | (
                Op::RegisterWindow { .. },
                ReplyBody::RegisteredWindow {
                    flow,
                    group,
                    cwnd_pkts: rate_bps,
                    ..
                },
            ) => {
                if !ok_num(*rate_bps) {
                    ctx.violation("bad_rate", format!("{op:?} -> {body:?}"));
                }
                if let ReplyBody::RegisteredWindow { ssthresh_pkts, .. } = body {
                    if !ok_num(*ssthresh_pkts) {
                        ctx.violation("bad_rate", format!("{op:?} -> {body:?}"));
                    }
                }
                if self.flows.contains_key(flow) {
                    ctx.violation("duplicate_flow_id", format!("{op:?} -> {body:?}"));
                    return Err(Broken);
                }
                self.max_flow_seen = self.max_flow_seen.max(*flow);
                self.flows.insert(*flow, (s, *group));
                self.slots[s].flows.insert(*flow);
                *self.groups.entry(*group).or_default() += 1;
                let uid = self.slots[s].uid;
                let held = {
                    let n = self.per_uid.entry(uid).or_default();
                    *n += 1;
                    *n
                };
                if held > self.max_flows(uid) {
                    ctx.violation(
                        "max_flows",
                        format!(
                            "user {uid} holds {held} flows, max_flows {}",
                            self.max_flows(uid)
                        ),
                    );
                }
            }
            (Op::UpdateRate { .. }, ReplyBody::Rate { rate_bps }) => {
                if !ok_num(*rate_bps) {
                    ctx.violation("bad_rate", format!("{op:?} -> {body:?}"));
                }
            }
            (
                Op::UpdateWindow { .. },
                ReplyBody::Window {
                    cwnd_pkts,
                    ssthresh_pkts,
                },
            ) => {
                if cwnd_pkts.is_some_and(|v| !ok_num(v))
                    || ssthresh_pkts.is_some_and(|v| !ok_num(v))
                {
                    ctx.violation("bad_window", format!("{op:?} -> {body:?}"));
                }
            }
            (Op::Leave { flow }, ReplyBody::Ok) => self.forget_flow(*flow),
            (Op::SetPriority { .. } | Op::Refresh { .. } | Op::Subscribe { .. }, ReplyBody::Ok) => {
            }
            (Op::QueryFlow { flow }, ReplyBody::Flow(info)) => {
                if info.flow != *flow || !ok_num(info.rate_or_cwnd) || !ok_num(info.priority) {
                    ctx.violation("query_flow", format!("{op:?} -> {info:?}"));
                }
                // The policy only ever lowers a claim (FlowInfo::effective_priority).
                if !(info.effective_priority > 0.0
                    && info.effective_priority <= info.priority * (1.0 + 1e-9))
                {
                    ctx.violation("effective_above_claimed", format!("{op:?} -> {info:?}"));
                }
                if self.flows.get(flow).map(|x| x.1) != Some(info.group) {
                    ctx.violation(
                        "query_flow_group",
                        format!("{op:?} -> {info:?}, model {:?}", self.flows.get(flow)),
                    );
                }
            }
            (Op::QueryGroup { group }, ReplyBody::Group(g)) => {
                let want = self.groups.get(group).copied().unwrap_or(0);
                if g.group != *group
                    || (g.flow_count as usize) < g.flows.len()
                    || want == 0
                    || !g.sum_calculated.is_finite()
                    || !g.leftover.is_finite()
                {
                    ctx.violation("query_group", format!("{op:?} -> {g:?}"));
                }
                if g.flow_count != want {
                    ctx.violation(
                        "query_group_count",
                        format!("{op:?}: {} members, the model {want}", g.flow_count),
                    );
                }
            }
            _ => ctx.violation("reply_kind", format!("{op:?} -> {body:?}")),
        }
        Ok(())
    }

    /// The daemon holds what the model says; memory is bounded.
    fn check_counts(&mut self, ctx: &mut Ctx) -> Result<(), Broken> {
        let (f, g, c) = (
            self.daemon.flow_count(),
            self.daemon.group_count(),
            self.daemon.client_count(),
        );
        let r = &mut ctx.report;
        r.peak_flows = r.peak_flows.max(f);
        r.peak_groups = r.peak_groups.max(g);
        r.peak_clients = r.peak_clients.max(c);
        let bound: u32 = self.slots.iter().map(|s| self.max_flows(s.uid)).sum();
        if f != self.flows.len() || g != self.groups.len() || c != self.slots.len() {
            ctx.violation(
                "state_count",
                format!(
                    "daemon holds {f} flows, {g} groups, {c} clients; the replies say {}, {}, {}",
                    self.flows.len(),
                    self.groups.len(),
                    self.slots.len()
                ),
            );
            return Err(Broken);
        }
        if f as u32 > bound || g > f || c > self.daemon.config().max_clients as usize {
            ctx.violation(
                "unbounded",
                format!("{f} flows (bound {bound}), {g} groups, {c} clients"),
            );
            return Err(Broken);
        }
        Ok(())
    }
}

/// Random values that are mostly in range.
struct Gen<'a> {
    rng: &'a mut Pcg64,
}

const ODD_F64: [f64; 18] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -1.0,
    -0.0,
    0.0,
    f64::MIN_POSITIVE,
    5e-324,
    1e-300,
    1e12,
    1e12 * (1.0 + f64::EPSILON),
    1e18,
    1e18 * (1.0 + 1e-15),
    1e300,
    f64::MAX,
    -f64::MAX,
    1.0,
    0.5,
];

impl Gen<'_> {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn odd_f64(&mut self) -> f64 {
        if self.chance(0.2) {
            f64::from_bits(self.rng.next_u64())
        } else {
            ODD_F64[self.rng.random_range(0..ODD_F64.len())]
        }
    }

    fn priority(&mut self) -> f64 {
        if self.chance(0.8) {
            self.rng.random_range(0.05..10.0)
        } else {
            self.odd_f64()
        }
    }

    fn rate(&mut self) -> f64 {
        if self.chance(0.8) {
            10f64.powf(self.rng.random_range(3.0..10.0))
        } else {
            self.odd_f64()
        }
    }

    fn pkts(&mut self) -> f64 {
        if self.chance(0.8) {
            self.rng.random_range(1.0..200.0f64).floor()
        } else {
            self.odd_f64()
        }
    }

    fn timeout_ms(&mut self) -> Option<u32> {
        match self.rng.random_range(0..10) {
            0..=5 => None,
            6 => Some([0, 1, 30_000, 30_001, u32::MAX][self.rng.random_range(0..5)]),
            _ => Some(self.rng.random_range(1..8_000)),
        }
    }

    fn group_spec(&mut self) -> GroupSpec {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 0, 0, 1]);
        if self.chance(0.85) {
            match self.rng.random_range(0..8) {
                0 => GroupSpec::Configured("shared".into()),
                1 => GroupSpec::Configured("fixed".into()),
                2 => GroupSpec::Configured("s1".into()),
                3 => GroupSpec::Configured("a".into()),
                4 => GroupSpec::Explicit(7),
                5 => GroupSpec::Explicit(1),
                6 => GroupSpec::Multiplexed {
                    src: v4,
                    dst: v4,
                    protocol: 17,
                    src_port: 5004,
                    dst_port: 5004,
                    dscp: 46,
                },
                _ => GroupSpec::Configured("win".into()),
            }
        } else {
            match self.rng.random_range(0..3) {
                0 => GroupSpec::Explicit(self.rng.next_u64()),
                1 => {
                    let n = match self.rng.random_range(0..4) {
                        0 => 0,
                        1 => self.rng.random_range(1020..1030),
                        _ => self.rng.random_range(1..24),
                    };
                    let s: String = (0..n)
                        .map(|_| {
                            if self.chance(0.9) {
                                self.rng.random_range(b' '..=b'~') as char
                            } else {
                                char::from_u32(self.rng.random_range(0x80..0x2_0000))
                                    .unwrap_or('\u{fffd}')
                            }
                        })
                        .collect();
                    GroupSpec::Configured(s)
                }
                _ => {
                    let mut src = [0u8; 16];
                    let mut dst = [0u8; 16];
                    self.rng.fill_bytes(&mut src);
                    self.rng.fill_bytes(&mut dst);
                    GroupSpec::Multiplexed {
                        src,
                        dst,
                        protocol: self.rng.random(),
                        src_port: self.rng.random(),
                        dst_port: self.rng.random(),
                        dscp: self.rng.random(),
                    }
                }
            }
        }
    }

    fn algorithm(&mut self) -> Option<RateAlgorithm> {
        match self.rng.random_range(0..8) {
            0 => Some(RateAlgorithm::Active),
            1 => Some(RateAlgorithm::ConservativeActive),
            2 => Some(RateAlgorithm::SimplePassive),
            3 => Some(RateAlgorithm::Passive),
            _ => None,
        }
    }

    fn rtt_us(&mut self) -> Option<u64> {
        match self.rng.random_range(0..20) {
            0..=3 => None,
            4 => Some(0),
            5 => Some(u64::MAX),
            _ => Some(self.rng.random_range(1..200_000)),
        }
    }
}

/// A flow id: mostly the client's own, else another's, else made up.
fn pick_flow(g: &mut Gen, w: &World, s: usize) -> u64 {
    let own = &w.slots[s].flows;
    let r = g.rng.random_range(0..10);
    if r < 6 && !own.is_empty() {
        return *own
            .iter()
            .nth(g.rng.random_range(0..own.len()))
            .expect("in range");
    }
    if r < 8 && !w.flows.is_empty() {
        return *w
            .flows
            .keys()
            .nth(g.rng.random_range(0..w.flows.len()))
            .expect("in range");
    }
    match g.rng.random_range(0..4) {
        0 => 0,
        1 => u64::MAX,
        2 => w.max_flow_seen + g.rng.random_range(0..3),
        _ => g.rng.next_u64(),
    }
}

fn pick_group(g: &mut Gen, w: &World) -> u64 {
    if g.chance(0.7) && !w.groups.is_empty() {
        return *w
            .groups
            .keys()
            .nth(g.rng.random_range(0..w.groups.len()))
            .expect("in range");
    }
    match g.rng.random_range(0..3) {
        0 => 0,
        1 => g.rng.random_range(0..64),
        _ => g.rng.next_u64(),
    }
}

/// A request of a random variant with random fields.
fn gen_op(g: &mut Gen, w: &World, s: usize) -> Op {
    if !w.slots[s].hello && g.chance(0.95) {
        let version = if g.chance(0.97) {
            VERSION
        } else {
            g.rng.random()
        };
        return Op::Hello { version };
    }
    let r = g.rng.random_range(0..100);
    match r {
        0..=1 => Op::Hello {
            version: if g.chance(0.5) {
                VERSION
            } else {
                g.rng.random()
            },
        },
        2..=19 => Op::RegisterRate {
            group: g.group_spec(),
            priority: g.priority(),
            initial_rate_bps: g.rate(),
            desired_rate_bps: if g.chance(0.5) { None } else { Some(g.rate()) },
            algorithm: g.algorithm(),
            timeout_ms: g.timeout_ms(),
        },
        20..=27 => Op::RegisterWindow {
            group: g.group_spec(),
            priority: g.priority(),
            cwnd_pkts: g.pkts(),
            ssthresh_pkts: g.pkts(),
            timeout_ms: g.timeout_ms(),
        },
        28..=52 => Op::UpdateRate {
            flow: pick_flow(g, w, s),
            cc_rate_bps: g.rate(),
            desired_rate_bps: if g.chance(0.5) { None } else { Some(g.rate()) },
            rtt_us: g.rtt_us(),
        },
        53..=64 => Op::UpdateWindow {
            flow: pick_flow(g, w, s),
            cwnd_pkts: g.pkts(),
            ssthresh_pkts: g.pkts(),
            state: match g.rng.random_range(0..3) {
                0 => WindowState::SlowStart,
                1 => WindowState::CongestionAvoidance,
                _ => WindowState::FastRecovery,
            },
            timeout: g.chance(0.05),
            in_flight_pkts: g.pkts(),
        },
        65..=71 => Op::SetPriority {
            flow: pick_flow(g, w, s),
            priority: g.priority(),
        },
        72..=77 => Op::Refresh {
            flow: pick_flow(g, w, s),
        },
        78..=84 => Op::Leave {
            flow: pick_flow(g, w, s),
        },
        85..=89 => Op::QueryFlow {
            flow: pick_flow(g, w, s),
        },
        90..=94 => Op::QueryGroup {
            group: pick_group(g, w),
        },
        _ => Op::Subscribe {
            flow: pick_flow(g, w, s),
        },
    }
}

fn frame_of(g: &mut Gen, w: &World, s: usize) -> Vec<u8> {
    let op = gen_op(g, w, s);
    proto::encode(&Request {
        id: g.rng.random(),
        op,
    })
}

fn mutate(g: &mut Gen, buf: &mut Vec<u8>, rough: bool) {
    let fix_prefix = !rough || g.chance(0.75);
    for _ in 0..g.rng.random_range(1..=4) {
        let n = buf.len();
        match g.rng.random_range(0..7) {
            0 if n > 0 => {
                let i = g.rng.random_range(0..n);
                buf[i] ^= 1 << g.rng.random_range(0..8);
            }
            1 if n > 0 => {
                let i = g.rng.random_range(0..n);
                buf[i] = [0x00, 0x7f, 0x80, 0xff, 0x01][g.rng.random_range(0..5)];
            }
            2 if n > 0 => buf.truncate(g.rng.random_range(0..n)),
            3 => {
                let i = g.rng.random_range(0..=n);
                let k = g.rng.random_range(1..=8);
                let mut extra = vec![0u8; k];
                g.rng.fill_bytes(&mut extra);
                buf.splice(i..i, extra);
            }
            4 if n > 1 => {
                let i = g.rng.random_range(0..n - 1);
                let j = g.rng.random_range(i + 1..=n.min(i + 8));
                buf.drain(i..j);
            }
            5 if n > 1 => {
                let i = g.rng.random_range(0..n - 1);
                let j = g.rng.random_range(i + 1..=n.min(i + 16));
                let dup: Vec<u8> = buf[i..j].to_vec();
                buf.splice(j..j, dup);
            }
            _ if n > 4 => {
                // A payload byte set to a varint's continuation bit.
                let i = g.rng.random_range(4..n);
                buf[i] |= 0x80;
            }
            _ => {}
        }
    }
    if fix_prefix && buf.len() >= 4 {
        let n = (buf.len() - 4) as u32;
        buf[..4].copy_from_slice(&n.to_be_bytes());
    }
}

/// An execution's bytes; the strategy's name is counted. Slots that are not `rough` get only
/// valid frames and mutated ones with a fitting length prefix, so they keep their connection (and
/// build up flows) for long.
fn gen_input(g: &mut Gen, w: &World, s: usize) -> (Vec<u8>, &'static str) {
    let rough = s >= ROUGH_FROM;
    let r = if rough {
        g.rng.random_range(0..100)
    } else {
        g.rng.random_range(10..95)
    };
    match r {
        0..=9 => {
            let n = if g.chance(0.001) {
                g.rng.random_range(0..17 * 1024)
            } else {
                g.rng.random_range(0..40)
            };
            let mut b = vec![0u8; n];
            g.rng.fill_bytes(&mut b);
            if n > 4 && g.chance(0.5) {
                // A fitting length prefix: the bytes reach the decoder.
                let len = (n - 4) as u32;
                b[..4].copy_from_slice(&len.to_be_bytes());
            }
            (b, "strategy.random_bytes")
        }
        10..=64 => {
            let mut b = Vec::new();
            for _ in 0..g.rng.random_range(1..=3) {
                b.extend(frame_of(g, w, s));
            }
            (b, "strategy.valid_frames")
        }
        65..=94 => {
            let mut b = frame_of(g, w, s);
            mutate(g, &mut b, rough);
            if g.chance(0.2) {
                b.extend(frame_of(g, w, s));
            }
            (b, "strategy.mutated_frame")
        }
        _ => {
            let mut payload = if g.chance(0.5) {
                frame_of(g, w, s)[4..].to_vec()
            } else {
                let mut p = vec![0u8; g.rng.random_range(0..64)];
                g.rng.fill_bytes(&mut p);
                p
            };
            let len = payload.len() as u32;
            let prefix = match g.rng.random_range(0..8) {
                0 => 0,
                1 => 1,
                2 => len.saturating_sub(1),
                3 => len + 1,
                4 => MAX_FRAME_BYTES,
                5 => MAX_FRAME_BYTES + 1,
                6 => u32::MAX,
                _ => g.rng.random(),
            };
            let mut b = prefix.to_be_bytes().to_vec();
            b.append(&mut payload);
            (b, "strategy.length_prefix")
        }
    }
}

/// Checks the decoded request round-trips through the encoder, bit for bit.
fn roundtrip_ok(req: &Request) -> bool {
    let frame = proto::encode(req);
    match proto::decode::<Request>(&frame[4..]) {
        Ok(again) => proto::encode(&again) == frame,
        Err(_) => false,
    }
}

/// One execution: events between executions, then the byte string through the parser and the
/// daemon as slot `s`.
fn execute(
    w: &mut World,
    g: &mut Gen,
    ctx: &mut Ctx,
    input: &[u8],
    s: usize,
) -> Result<(), Broken> {
    let mut pos = 0;
    loop {
        if input.len() - pos < 4 {
            if pos < input.len() {
                ctx.count("frame.incomplete_prefix");
            }
            break;
        }
        let prefix: [u8; 4] = input[pos..pos + 4].try_into().expect("4 bytes");
        pos += 4;
        let raw = u32::from_be_bytes(prefix);
        let n = match proto::frame_len(prefix) {
            Err(why) => {
                ctx.count("frame.bad_length");
                if raw != 0 && raw <= MAX_FRAME_BYTES {
                    ctx.violation("frame_len", format!("{raw} refused: {why}"));
                }
                if why.is_empty() {
                    ctx.violation("frame_len", format!("{raw}: refused without a reason"));
                }
                // The server replies with an error and closes the connection.
                let uid = UIDS[g.rng.random_range(0..UIDS.len())];
                w.replace(s, uid, ctx)?;
                ctx.count("event.closed_for_length");
                break;
            }
            Ok(n) => n,
        };
        if n == 0 || n > MAX_FRAME_BYTES as usize || n as u32 != raw {
            ctx.violation("frame_len", format!("{raw} accepted as {n}"));
        }
        if input.len() - pos < n {
            ctx.count("frame.incomplete_payload");
            break;
        }
        let payload = &input[pos..pos + n];
        pos += n;
        match proto::decode::<Request>(payload) {
            Err(why) => {
                ctx.count("frame.decode_error");
                if why.is_empty() {
                    ctx.violation("decode", "a decode error without a reason".into());
                }
            }
            Ok(req) => {
                ctx.count("frame.decoded");
                if !roundtrip_ok(&req) {
                    ctx.violation("roundtrip", format!("{req:?} does not re-encode to itself"));
                }
                let closed = w.apply(s, req.op, ctx)?;
                w.check_counts(ctx)?;
                if closed {
                    let uid = UIDS[g.rng.random_range(0..UIDS.len())];
                    w.replace(s, uid, ctx)?;
                    ctx.count("event.closed_for_hello");
                    break;
                }
            }
        }
    }
    w.check_counts(ctx)
}

/// Between executions: time passes; now and then an expiry, a reconnect or a refused client.
fn events(w: &mut World, g: &mut Gen, ctx: &mut Ctx) -> Result<(), Broken> {
    w.now += g.rng.random_range(0..10_000_000); // up to 10 ms
    if g.chance(0.0005) {
        w.now += g.rng.random_range(1..=MAX_TIMEOUT_S + 5) * 1_000_000_000;
        ctx.count("event.time_jump");
    }
    if g.chance(0.01) {
        w.expire(ctx);
        ctx.count("event.expire");
    }
    if g.chance(0.003) {
        let s = g.rng.random_range(0..w.slots.len());
        let uid = UIDS[g.rng.random_range(0..UIDS.len())];
        w.replace(s, uid, ctx)?;
    }
    if g.chance(0.001) {
        // max_clients = 6 and 5 slots: one more fits, the next is refused.
        let (a, b) = (w.next_client, w.next_client + 1);
        w.next_client += 2;
        let now = w.t();
        match (w.daemon.connect(a, 7), w.daemon.connect(b, 7)) {
            (Ok(()), Err(e)) if !e.is_empty() => ctx.count("event.refused_over_max_clients"),
            other => ctx.violation(
                "max_clients",
                format!("6th and 7th connects with 5 connected: {other:?}"),
            ),
        }
        if w.daemon.client_count() > w.daemon.config().max_clients as usize {
            ctx.violation(
                "max_clients",
                format!("{} clients", w.daemon.client_count()),
            );
        }
        w.daemon.disconnect(a, now);
        w.daemon.disconnect(b, now);
    }
    w.check_counts(ctx)
}

/// The end of an epoch: past every timeout nothing is left; without clients nobody is left.
fn end_epoch(w: &mut World, ctx: &mut Ctx) -> Result<(), Broken> {
    w.now += (MAX_TIMEOUT_S + 1) * 1_000_000_000;
    w.expire(ctx);
    if w.daemon.flow_count() != 0 || w.daemon.group_count() != 0 || !w.flows.is_empty() {
        ctx.violation(
            "epoch_leftovers",
            format!(
                "{} flows, {} groups left after every timeout (model {})",
                w.daemon.flow_count(),
                w.daemon.group_count(),
                w.flows.len()
            ),
        );
        return Err(Broken);
    }
    let now = w.t();
    for s in &w.slots {
        w.daemon.disconnect(s.id, now);
    }
    if w.daemon.client_count() != 0 {
        ctx.violation(
            "epoch_leftovers",
            format!("{} clients left", w.daemon.client_count()),
        );
    }
    Ok(())
}

thread_local! {
    /// Set while an execution runs on this thread: its panics are recorded, not printed.
    static IN_EXEC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static PANIC_MSG: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Installs (once per process) a panic hook that records the panics of executions and passes
/// every other panic to the hook that was there before.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_EXEC.with(|f| f.get()) {
                return prev(info);
            }
            let loc = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            PANIC_MSG.with(|m| *m.borrow_mut() = Some(format!("{msg} at {loc}")));
        }));
    });
}

/// Runs `f` under `catch_unwind`; a panic becomes its message.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    IN_EXEC.with(|x| x.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    IN_EXEC.with(|x| x.set(false));
    r.map_err(|_| {
        PANIC_MSG
            .with(|m| m.borrow_mut().take())
            .unwrap_or_else(|| "a panic".into())
    })
}

/// Runs the fuzzer; `progress` is called about every second with the report so far.
pub fn run(cfg: &FuzzConfig, mut progress: impl FnMut(&FuzzReport)) -> FuzzReport {
    let mut report = FuzzReport {
        seed: cfg.seed,
        ..FuzzReport::default()
    };
    let mut rng = Pcg64::seed_from_u64(cfg.seed);
    install_panic_hook();
    let start = std::time::Instant::now();
    let mut last_progress = start;
    let mut epoch = 0u64;
    let mut world = World::new(epoch);
    let mut in_epoch = 0u64;
    for exec in 0..cfg.execs {
        if in_epoch == cfg.epoch_execs {
            let mut ctx = Ctx {
                exec,
                input: &[],
                report: &mut report,
            };
            if let Err(msg) = guarded(|| end_epoch(&mut world, &mut ctx)) {
                ctx.report.panics += 1;
                ctx.violation("panic", msg);
            }
            epoch += 1;
            world = World::new(epoch);
            in_epoch = 0;
        }
        in_epoch += 1;
        let s = rng.random_range(0..world.slots.len());
        let (input, strategy) = {
            let mut g = Gen { rng: &mut rng };
            gen_input(&mut g, &world, s)
        };
        let mut ctx = Ctx {
            exec,
            input: &input,
            report: &mut report,
        };
        ctx.count(strategy);
        let result = guarded(|| {
            let mut g = Gen { rng: &mut rng };
            events(&mut world, &mut g, &mut ctx)?;
            execute(&mut world, &mut g, &mut ctx, &input, s)
        });
        let rebuild = match result {
            Ok(Ok(())) => false,
            Ok(Err(Broken)) => true,
            Err(msg) => {
                ctx.report.panics += 1;
                ctx.violation("panic", msg);
                true
            }
        };
        if rebuild {
            epoch += 1;
            world = World::new(epoch);
            in_epoch = 0;
        }
        report.execs = exec + 1;
        if exec % 4096 == 0 && last_progress.elapsed().as_secs_f64() >= 1.0 {
            last_progress = std::time::Instant::now();
            report.elapsed_s = start.elapsed().as_secs_f64();
            progress(&report);
        }
    }
    let mut ctx = Ctx {
        exec: cfg.execs,
        input: &[],
        report: &mut report,
    };
    if let Err(msg) = guarded(|| end_epoch(&mut world, &mut ctx)) {
        ctx.report.panics += 1;
        ctx.violation("panic", msg);
    }
    report.epochs = epoch + 1;
    report.elapsed_s = start.elapsed().as_secs_f64();
    report
}
