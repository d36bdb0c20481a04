//! The queue spec: a queue discipline written down outside Rust, as a scenario's
//! `[topology.queue]` table or the `queue=` dict of the Python API, e.g.
//! `{"kind": "red", "limit_pkts": 83}` or
//! `{"kind": "random_drop", "p": 0.01, "inner": {"kind": "drop_tail", "limit_pkts": 100}}`.
//!
//! [`QueueSpec`] is the one description of that language: serde reads it (from a Python dict in
//! the bindings, or JSON), [`QueueSpec::json_schema`] is its JSON Schema, generated from the same
//! types with `schemars` (Python: `macroflow._native.QUEUE_SPEC_SCHEMA`), [`QueueSpec::KINDS`] is
//! the registry of kinds (`macroflow list` prints it), and [`QueueSpec::to_config`] turns a spec
//! into the [`QueueConfig`] the simulator builds, filling in ns-2's RED defaults. Keys, types and
//! defaults are the fields below; their doc comments are the schema's descriptions.
//!
//! Reading ([`QueueSpec::read`]) refuses unknown kinds and keys, missing keys and values of the
//! wrong type, each error naming its path (`queue.inner.kind: unknown queue kind "fifo"; ...`).
//! Specs may nest [`MAX_QUEUE_NESTING`] levels deep; the bound is checked as each level is
//! entered, before the next one is read, so a spec that contains itself, or thousands of levels,
//! is an error rather than a stack overflow (issue 13: a segfault). Values (probabilities,
//! limits, NaN and infinities) are checked by [`QueueSpec::to_config`] and when the queue is
//! built ([`QueueConfig::build`]), with the same paths.
//!
//! `kind` is the tag, as in `#[serde(tag = "kind")]`, and the serialisation is derived that way;
//! reading is written out below only to keep error paths: serde's derived reader of a tagged
//! enum buffers the whole table before it looks at `kind`, and an error inside the buffered part
//! no longer knows where it was. Here `kind` is read first (a reader may offer it first: the
//! bindings do) and the rest of the table goes straight to the kind's derived reader.

use super::red::{RedConfig, RedThresholds};
use super::rio::RioConfig;
use super::{
    Limit, QueueConfig, WrrClass, DRR_DEFAULT_QUANTUM_BYTES, MAX_QUEUE_BYTES, MAX_QUEUE_PKTS,
};
use crate::error::SimError;
use coupling::{Duration, Instant};
use schemars::JsonSchema;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::cell::Cell;
use std::fmt;

/// How deeply queue specs may nest (`inner`, WRR classes' `queue`). Real disciplines nest two or
/// three deep; the bound stops a spec that contains itself, or thousands of levels, before the
/// recursion overflows the stack (issue 13: a segfault).
pub const MAX_QUEUE_NESTING: usize = 16;

/// The token bucket's committed rate, like every link rate: 1 bit/s to 1 Pbit/s.
const MAX_RATE_BPS: f64 = 1e15;

/// Declares the kinds once: the enum (serialisation and schema), [`QueueSpec::KINDS`], and the
/// reader's dispatch from a kind's name to its table.
macro_rules! queue_kinds {
    ($($(#[doc = $doc:literal])* $name:literal => $variant:ident($spec:ident),)+) => {
        /// A queue discipline: a table with `kind` and that kind's keys. Omitted optional keys
        /// take the defaults shown (for RED and RIO, ns-2's).
        #[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
        #[serde(tag = "kind")]
        pub enum QueueSpec {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant($spec),)+
        }

        impl QueueSpec {
            /// Every queue kind: the registry the schema, the bindings (`QUEUE_KINDS`) and
            /// `macroflow list` read.
            pub const KINDS: &'static [&'static str] = &[$($name),+];

            /// This spec's kind, one of [`QueueSpec::KINDS`].
            pub fn kind(&self) -> &'static str {
                match self {
                    $(QueueSpec::$variant(_) => $name,)+
                }
            }
        }

        /// Reads the rest of a table whose `kind` was `kind` (one of `KINDS`).
        fn read_kind<'de, M: MapAccess<'de>>(kind: &str, rest: M) -> Result<QueueSpec, M::Error> {
            let rest = MapAccessDeserializer::new(rest);
            match kind {
                $($name => $spec::deserialize(rest).map(QueueSpec::$variant),)+
                other => Err(de::Error::custom(unknown_kind(other))),
            }
        }
    };
}

queue_kinds! {
    /// FIFO: arrivals that do not fit are dropped.
    "drop_tail" => DropTail(DropTailSpec),
    /// Drops each arrival with probability `p` (Bernoulli), then offers it to `inner`.
    "random_drop" => RandomDrop(RandomDropSpec),
    /// Like random_drop, but only for arrivals in [start_s, end_s): a period of loss that stops.
    "loss_period" => LossPeriod(LossPeriodSpec),
    /// Random Early Detection, gentle by default (Floyd & Jacobson 1993; ns-2's defaults).
    "red" => Red(RedSpec),
    /// RED with In/Out for a DiffServ AF class (Clark & Fang 1998): color 0 is in profile. Put a
    /// token_bucket in front of it to color packets.
    "rio" => Rio(RioSpec),
    /// Colors arrivals by a single-rate token bucket (RFC 2697: 0 if they conform, 1 if not),
    /// then offers them to `inner` (typically rio). The bucket starts full.
    "token_bucket" => TokenBucket(TokenBucketSpec),
    /// Weighted round robin between classes chosen by DSCP.
    "wrr" => Wrr(WrrSpec),
    /// Deficit Round Robin between flows sharing one buffer (Shreedhar & Varghese 1995); when it
    /// is full, the head packet of the flow with the most bytes queued is dropped.
    "drr" => Drr(DrrSpec),
}

/// `Some` of a key that is present: an optional key has no `null` value (None in Python is
/// refused, as a value of the wrong type).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["limit_pkts"]}, {"required": ["limit_bytes"]}]))]
pub struct DropTailSpec {
    /// Capacity in packets (give this or limit_bytes).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "usize", range(min = 1, max = MAX_QUEUE_PKTS))]
    pub limit_pkts: Option<usize>,
    /// Capacity in bytes (give this or limit_pkts).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "u64", range(min = 1, max = MAX_QUEUE_BYTES))]
    pub limit_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RandomDropSpec {
    /// Drop probability of each arrival.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub p: f64,
    /// The queue behind the random drop.
    pub inner: Box<QueueSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LossPeriodSpec {
    /// Drop probability of each arrival within the period.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub p: f64,
    /// Start of the period, seconds of simulated time.
    #[schemars(range(min = 0.0))]
    pub start_s: f64,
    /// End of the period (exclusive), seconds; after start_s.
    #[schemars(range(min = 0.0))]
    pub end_s: f64,
    /// The queue behind the random drop.
    pub inner: Box<QueueSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["limit_pkts"]}, {"required": ["limit_bytes"]}]))]
pub struct RedSpec {
    /// Hard limit in packets (give this or limit_bytes).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "usize", range(min = 1, max = MAX_QUEUE_PKTS))]
    pub limit_pkts: Option<usize>,
    /// Hard limit in bytes (give this or limit_pkts).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "u64", range(min = 1, max = MAX_QUEUE_BYTES))]
    pub limit_bytes: Option<u64>,
    /// No early drop while the average queue is below this (packets; ns-2's thresh_).
    #[serde(default = "ns2::min_th_pkts")]
    #[schemars(range(min = 0.0))]
    pub min_th_pkts: f64,
    /// Early-drop probability reaches max_p here (packets, above min_th_pkts; ns-2's maxthresh_).
    #[serde(default = "ns2::max_th_pkts")]
    #[schemars(range(min = 0.0))]
    pub max_th_pkts: f64,
    /// Drop probability at max_th_pkts, in (0, 1] (ns-2: 1 / linterm_).
    #[serde(default = "ns2::max_p")]
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub max_p: f64,
    /// Weight of the average queue's EWMA, in (0, 1] (ns-2's q_weight_).
    #[serde(default = "ns2::q_weight")]
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub q_weight: f64,
    /// Gentle RED: above max_th_pkts the drop probability rises to 1 at twice it.
    #[serde(default = "ns2::gentle")]
    pub gentle: bool,
    /// Mean packet size of the idle correction, bytes.
    #[serde(default = "ns2::mean_pkt_bytes")]
    #[schemars(range(min = 1))]
    pub mean_pkt_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{"required": ["limit_pkts"]}, {"required": ["limit_bytes"]}]))]
pub struct RioSpec {
    /// Hard limit on the whole queue in packets (give this or limit_bytes).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "usize", range(min = 1, max = MAX_QUEUE_PKTS))]
    pub limit_pkts: Option<usize>,
    /// Hard limit in bytes (give this or limit_pkts).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "u64", range(min = 1, max = MAX_QUEUE_BYTES))]
    pub limit_bytes: Option<u64>,
    /// The In curve (color 0, on the average of In packets queued): min threshold, packets.
    #[schemars(range(min = 0.0))]
    pub in_min_th_pkts: f64,
    /// The In curve's max threshold, packets (above in_min_th_pkts).
    #[schemars(range(min = 0.0))]
    pub in_max_th_pkts: f64,
    /// The In curve's drop probability at its max threshold, in (0, 1].
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub in_max_p: f64,
    /// The Out curve (other colors, on the average of the whole queue): min threshold, packets.
    #[schemars(range(min = 0.0))]
    pub out_min_th_pkts: f64,
    /// The Out curve's max threshold, packets (above out_min_th_pkts).
    #[schemars(range(min = 0.0))]
    pub out_max_th_pkts: f64,
    /// The Out curve's drop probability at its max threshold, in (0, 1].
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub out_max_p: f64,
    /// Weight of both averages' EWMA, in (0, 1].
    #[serde(default = "ns2::q_weight")]
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0.0))]
    pub q_weight: f64,
    /// Gentle RED on both curves.
    #[serde(default = "ns2::gentle")]
    pub gentle: bool,
    /// Mean packet size of the idle correction, bytes.
    #[serde(default = "ns2::mean_pkt_bytes")]
    #[schemars(range(min = 1))]
    pub mean_pkt_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBucketSpec {
    /// Committed rate (token refill), bit/s; rounded to a whole bit/s.
    #[schemars(range(min = 1.0, max = MAX_RATE_BPS))]
    pub rate_bps: f64,
    /// Bucket depth (committed burst size), bytes.
    #[schemars(range(min = 1))]
    pub bucket_bytes: u64,
    /// The queue the colored packets go to.
    pub inner: Box<QueueSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WrrSpec {
    /// The classes, served in turn.
    #[schemars(length(min = 1))]
    pub classes: Vec<WrrClassSpec>,
    /// The class (an index into classes) of DSCPs no class lists.
    #[serde(default)]
    pub default_class: usize,
}

/// One WRR class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WrrClassSpec {
    /// DSCP values classified into this class; none may appear in two classes.
    #[schemars(inner(range(max = 63)))]
    pub dscps: Vec<u8>,
    /// Packets served per round while the class is backlogged.
    #[schemars(range(min = 1))]
    pub weight: u32,
    /// The class's own queue.
    pub queue: QueueSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DrrSpec {
    /// The buffer all flows share, packets.
    #[schemars(range(min = 1, max = MAX_QUEUE_PKTS))]
    pub limit_pkts: usize,
    /// Bytes each backlogged flow may send per round.
    #[serde(default = "ns2::quantum_bytes")]
    #[schemars(range(min = 1))]
    pub quantum_bytes: u32,
}

/// The defaults of omitted keys (serde calls these by name): RED's are ns-2's.
mod ns2 {
    use super::*;

    pub fn min_th_pkts() -> f64 {
        RedThresholds::NS2.min_th_pkts
    }
    pub fn max_th_pkts() -> f64 {
        RedThresholds::NS2.max_th_pkts
    }
    pub fn max_p() -> f64 {
        RedThresholds::NS2.max_p
    }
    pub fn q_weight() -> f64 {
        RedConfig::DEFAULT_Q_WEIGHT
    }
    pub fn gentle() -> bool {
        true
    }
    pub fn mean_pkt_bytes() -> u32 {
        RedConfig::DEFAULT_MEAN_PKT_BYTES
    }
    pub fn quantum_bytes() -> u32 {
        DRR_DEFAULT_QUANTUM_BYTES
    }
}

/// One spec of each kind, valid on any link: the schema's `examples`, and what tests build.
const EXAMPLES: &[&str] = &[
    r#"{"kind": "drop_tail", "limit_pkts": 83}"#,
    r#"{"kind": "random_drop", "p": 0.01, "inner": {"kind": "drop_tail", "limit_bytes": 120000}}"#,
    r#"{"kind": "loss_period", "p": 0.05, "start_s": 10.0, "end_s": 20.0,
        "inner": {"kind": "drop_tail", "limit_pkts": 100}}"#,
    r#"{"kind": "red", "limit_pkts": 83}"#,
    r#"{"kind": "rio", "limit_pkts": 83, "in_min_th_pkts": 20, "in_max_th_pkts": 60, "in_max_p": 0.02,
        "out_min_th_pkts": 5, "out_max_th_pkts": 20, "out_max_p": 0.5}"#,
    r#"{"kind": "token_bucket", "rate_bps": 4e6, "bucket_bytes": 30000, "inner": {"kind": "rio",
        "limit_pkts": 83, "in_min_th_pkts": 20, "in_max_th_pkts": 60, "in_max_p": 0.02,
        "out_min_th_pkts": 5, "out_max_th_pkts": 20, "out_max_p": 0.5}}"#,
    r#"{"kind": "wrr", "default_class": 1, "classes": [
        {"dscps": [46], "weight": 3, "queue": {"kind": "drop_tail", "limit_pkts": 100}},
        {"dscps": [0], "weight": 1, "queue": {"kind": "red", "limit_pkts": 100}}]}"#,
    r#"{"kind": "drr", "limit_pkts": 100}"#,
];

fn unknown_kind(kind: &str) -> String {
    let (last, rest) = QueueSpec::KINDS.split_last().expect("kinds");
    format!(
        "unknown queue kind {kind:?}; expected {} or {last}",
        rest.join(", ")
    )
}

thread_local! {
    /// Specs being read on this thread, outermost first: the nesting bound's counter.
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// One level of nesting entered; leaving it (also by an error or a panic) counts it out.
struct Level;

impl Level {
    fn enter() -> Option<Level> {
        NESTING.with(|n| {
            (n.get() < MAX_QUEUE_NESTING).then(|| {
                n.set(n.get() + 1);
                Level
            })
        })
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        NESTING.with(|n| n.set(n.get() - 1));
    }
}

fn too_deep() -> String {
    format!("queue specs nest deeper than {MAX_QUEUE_NESTING} levels (does a spec contain itself?)")
}

impl<'de> Deserialize<'de> for QueueSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _level = Level::enter().ok_or_else(|| de::Error::custom(too_deep()))?;
        // A struct whose first field is `kind`: a reader that can (the bindings') offers it first.
        d.deserialize_struct("QueueSpec", &["kind"], SpecVisitor)
    }
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = QueueSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a queue spec (a table with a kind)")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<QueueSpec, M::Error> {
        // Keys before `kind` are kept until it comes (JSON written in another order).
        let mut before = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "kind" {
                let kind = map.next_value_seed(KindSeed)?;
                let rest = Rest {
                    before: before.into_iter(),
                    value: None,
                    map,
                };
                return read_kind(kind, rest);
            }
            before.push((key, map.next_value::<serde_json::Value>()?));
        }
        Err(de::Error::missing_field("kind"))
    }
}

/// Reads `kind`: one of [`QueueSpec::KINDS`].
struct KindSeed;

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KindSeed {
    type Value = &'static str;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a queue kind ({})", QueueSpec::KINDS.join(", "))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<&'static str, E> {
        QueueSpec::KINDS
            .iter()
            .find(|k| **k == s)
            .copied()
            .ok_or_else(|| E::custom(unknown_kind(s)))
    }
}

/// The rest of a spec's table after `kind`: the keys read before it, then the others.
struct Rest<M> {
    before: std::vec::IntoIter<(String, serde_json::Value)>,
    value: Option<(String, serde_json::Value)>,
    map: M,
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for Rest<M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, M::Error> {
        match self.before.next() {
            Some((key, value)) => {
                let k =
                    seed.deserialize(IntoDeserializer::<M::Error>::into_deserializer(key.clone()))?;
                self.value = Some((key, value));
                Ok(Some(k))
            }
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, M::Error> {
        match self.value.take() {
            // Read before `kind`, so outside the path the caller tracks: the key says where.
            Some((key, value)) => seed
                .deserialize(value)
                .map_err(|e| de::Error::custom(format_args!("{key}: {e}"))),
            None => self.map.next_value_seed(seed),
        }
    }
}

/// `base` and the path within the spec, as `queue.classes[1].queue.max_p`; cut short if long.
fn path_at(base: &str, path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut s = base.to_string();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => s.push_str(&format!("[{index}]")),
            Segment::Map { key } => s.push_str(&format!(".{key}")),
            Segment::Enum { variant } => s.push_str(&format!(".{variant}")),
            Segment::Unknown => s.push_str(".?"),
        }
    }
    const MAX: usize = 200;
    if s.chars().count() > MAX {
        s = s.chars().take(MAX).collect::<String>() + "...";
    }
    s
}

impl QueueSpec {
    /// Reads a spec from any serde input (the bindings hand over a Python dict this way);
    /// `path` names it in errors (`queue`, `topology.queue`).
    pub fn read<'de, D>(path: &str, d: D) -> Result<QueueSpec, SimError>
    where
        D: Deserializer<'de>,
        D::Error: fmt::Display,
    {
        serde_path_to_error::deserialize(d)
            .map_err(|e| SimError::spec(path_at(path, e.path()), e.inner().to_string()))
    }

    /// Reads a spec from JSON text.
    pub fn from_json(path: &str, json: &str) -> Result<QueueSpec, SimError> {
        let mut d = serde_json::Deserializer::from_str(json);
        let spec = Self::read(path, &mut d)?;
        d.end().map_err(|e| SimError::spec(path, e.to_string()))?;
        Ok(spec)
    }

    /// One valid spec of each kind (the schema's `examples`).
    pub fn examples() -> Vec<QueueSpec> {
        EXAMPLES
            .iter()
            .map(|j| Self::from_json("example", j).expect("the examples are valid"))
            .collect()
    }

    /// The JSON Schema (draft 2020-12) of a spec: `$defs/QueueSpec` is one object schema per
    /// kind (`oneOf`, told apart by `kind`), with its keys' types, bounds, defaults and
    /// descriptions; `examples` holds one spec of each kind. Relations between keys (a max
    /// threshold above the min, distinct DSCPs) are not in it: [`QueueSpec::to_config`] and
    /// [`QueueConfig::build`] check them.
    pub fn json_schema() -> serde_json::Value {
        let mut gen = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        let root = gen.subschema_for::<QueueSpec>();
        let defs = gen.take_definitions(true);
        let examples: Vec<serde_json::Value> = EXAMPLES
            .iter()
            .map(|j| serde_json::from_str(j).expect("the examples are JSON"))
            .collect();
        serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:macroflow:queue-spec",
            "title": "queue spec",
            "description": "A queue discipline of the macroflow simulator: a table with `kind` and \
                that kind's keys (crates/sim/src/net/queue/spec.rs).",
            "$ref": root.as_value()["$ref"],
            "$defs": defs,
            "examples": examples,
        })
    }

    /// The queue this spec describes on a link of `link_rate_bps` (RED's idle correction needs
    /// it), with defaults filled in; `path` names the spec in errors. Checks what the types do
    /// not: exactly one limit, times and rates; the rest is checked when the queue is built.
    pub fn to_config(&self, path: &str, link_rate_bps: u64) -> Result<QueueConfig, SimError> {
        self.config_at(path, link_rate_bps, 0)
    }

    fn config_at(&self, path: &str, rate: u64, depth: usize) -> Result<QueueConfig, SimError> {
        // Specs read by `read` are within the bound already; one built in Rust may not be.
        if depth >= MAX_QUEUE_NESTING {
            return Err(SimError::spec(path, too_deep()));
        }
        let inner = |q: &QueueSpec| -> Result<Box<QueueConfig>, SimError> {
            q.config_at(&format!("{path}.inner"), rate, depth + 1)
                .map(Box::new)
        };
        Ok(match self {
            QueueSpec::DropTail(s) => {
                QueueConfig::DropTail(limit(path, s.limit_pkts, s.limit_bytes)?)
            }
            QueueSpec::RandomDrop(s) => QueueConfig::RandomDrop {
                p: s.p,
                inner: inner(&s.inner)?,
            },
            QueueSpec::LossPeriod(s) => QueueConfig::LossPeriod {
                p: s.p,
                start: instant(&format!("{path}.start_s"), s.start_s)?,
                end: instant(&format!("{path}.end_s"), s.end_s)?,
                inner: inner(&s.inner)?,
            },
            QueueSpec::Red(s) => QueueConfig::Red(RedConfig {
                limit: limit(path, s.limit_pkts, s.limit_bytes)?,
                min_th_pkts: s.min_th_pkts,
                max_th_pkts: s.max_th_pkts,
                max_p: s.max_p,
                q_weight: s.q_weight,
                gentle: s.gentle,
                mean_pkt_bytes: s.mean_pkt_bytes,
                link_rate_bps: rate,
            }),
            QueueSpec::Rio(s) => QueueConfig::Rio(RioConfig {
                q_weight: s.q_weight,
                gentle: s.gentle,
                mean_pkt_bytes: s.mean_pkt_bytes,
                ..RioConfig::new(
                    limit(path, s.limit_pkts, s.limit_bytes)?,
                    rate,
                    RedThresholds {
                        min_th_pkts: s.in_min_th_pkts,
                        max_th_pkts: s.in_max_th_pkts,
                        max_p: s.in_max_p,
                    },
                    RedThresholds {
                        min_th_pkts: s.out_min_th_pkts,
                        max_th_pkts: s.out_max_th_pkts,
                        max_p: s.out_max_p,
                    },
                )
            }),
            QueueSpec::TokenBucket(s) => QueueConfig::TokenBucketMarker {
                rate_bps: rate_bps(&format!("{path}.rate_bps"), s.rate_bps)?,
                bucket_bytes: s.bucket_bytes,
                inner: inner(&s.inner)?,
            },
            QueueSpec::Wrr(s) => QueueConfig::Wrr {
                classes: s
                    .classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        Ok(WrrClass {
                            dscps: c.dscps.clone(),
                            weight: c.weight,
                            queue: c.queue.config_at(
                                &format!("{path}.classes[{i}].queue"),
                                rate,
                                depth + 1,
                            )?,
                        })
                    })
                    .collect::<Result<_, SimError>>()?,
                default_class: s.default_class,
            },
            QueueSpec::Drr(s) => QueueConfig::Drr {
                limit_pkts: s.limit_pkts,
                quantum_bytes: s.quantum_bytes,
            },
        })
    }
}

fn limit(path: &str, pkts: Option<usize>, bytes: Option<u64>) -> Result<Limit, SimError> {
    match (pkts, bytes) {
        (Some(p), None) => Ok(Limit::Packets(p)),
        (None, Some(b)) => Ok(Limit::Bytes(b)),
        _ => Err(SimError::spec(
            path,
            "give exactly one of limit_pkts and limit_bytes",
        )),
    }
}

fn instant(name: &str, secs: f64) -> Result<Instant, SimError> {
    Duration::try_from_secs_f64("time", secs)
        .map(|d| Instant::from_nanos(d.as_nanos()))
        .map_err(|_| SimError::invalid(name, secs, "seconds >= 0"))
}

fn rate_bps(name: &str, bps: f64) -> Result<u64, SimError> {
    if (1.0..=MAX_RATE_BPS).contains(&bps) {
        Ok(bps.round() as u64)
    } else {
        Err(SimError::invalid(name, bps, "a rate in bit/s in 1..=1e15"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        match QueueSpec::from_json("queue", json).and_then(|s| s.to_config("queue", 10_000_000)) {
            Ok(c) => panic!("{json} was accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn nested(levels: usize) -> String {
        let mut j = r#"{"kind": "drop_tail", "limit_pkts": 5}"#.to_string();
        for _ in 1..levels {
            j = format!(r#"{{"kind": "random_drop", "p": 0.0, "inner": {j}}}"#);
        }
        j
    }

    #[test]
    fn every_kind_has_an_example_that_builds_and_round_trips() {
        let examples = QueueSpec::examples();
        let kinds: Vec<&str> = examples.iter().map(|s| s.kind()).collect();
        assert_eq!(kinds, QueueSpec::KINDS);
        for spec in examples {
            let cfg = spec.to_config("q", 10_000_000).unwrap();
            cfg.build("q").unwrap();
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(QueueSpec::from_json("q", &json).unwrap(), spec, "{json}");
        }
    }

    #[test]
    fn the_schema_lists_every_kind_and_its_keys() {
        let schema = QueueSpec::json_schema();
        assert_eq!(schema["$ref"], "#/$defs/QueueSpec");
        let kinds: Vec<&str> = schema["$defs"]["QueueSpec"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["properties"]["kind"]["const"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, QueueSpec::KINDS);
        let red = &schema["$defs"]["QueueSpec"]["oneOf"][3];
        assert_eq!(red["additionalProperties"], false);
        assert_eq!(red["properties"]["max_p"]["default"], 0.1);
        assert_eq!(red["properties"]["gentle"]["default"], true);
        assert_eq!(red["properties"]["limit_pkts"]["type"], "integer");
        assert_eq!(red["properties"]["limit_pkts"]["maximum"], 1_000_000);
        assert_eq!(
            schema["examples"].as_array().unwrap().len(),
            QueueSpec::KINDS.len()
        );
    }

    #[test]
    fn omitted_red_and_rio_keys_take_ns2_defaults() {
        let red = QueueSpec::from_json("q", r#"{"kind": "red", "limit_pkts": 83}"#).unwrap();
        assert_eq!(
            red.to_config("q", 10_000_000).unwrap(),
            QueueConfig::Red(RedConfig::ns2_defaults(Limit::Packets(83), 10_000_000))
        );
        let t = r#""in_min_th_pkts": 1, "in_max_th_pkts": 2, "in_max_p": 0.1,
                   "out_min_th_pkts": 3, "out_max_th_pkts": 4, "out_max_p": 0.2"#;
        let rio = QueueSpec::from_json(
            "q",
            &format!(r#"{{"kind": "rio", "limit_bytes": 9000, {t}}}"#),
        )
        .unwrap();
        let want = RioConfig::new(
            Limit::Bytes(9000),
            5,
            RedThresholds {
                min_th_pkts: 1.0,
                max_th_pkts: 2.0,
                max_p: 0.1,
            },
            RedThresholds {
                min_th_pkts: 3.0,
                max_th_pkts: 4.0,
                max_p: 0.2,
            },
        );
        assert_eq!(rio.to_config("q", 5).unwrap(), QueueConfig::Rio(want));
        let drr = QueueSpec::from_json("q", r#"{"limit_pkts": 7, "kind": "drr"}"#).unwrap();
        assert_eq!(drr.to_config("q", 1).unwrap(), QueueConfig::drr_pkts(7));
    }

    #[test]
    fn errors_name_the_path_and_the_problem() {
        for (json, want) in [
            (r#"{"limit_pkts": 3}"#, "queue: missing field `kind`"),
            (r#"{"kind": "fifo"}"#, "queue.kind: unknown queue kind \"fifo\"; expected drop_tail, random_drop, loss_period, red, rio, token_bucket, wrr or drr"),
            (r#"{"kind": 3}"#, "queue.kind: invalid type: integer `3`, expected a queue kind"),
            (r#"{"kind": "red"}"#, "queue: give exactly one of limit_pkts and limit_bytes"),
            (r#"{"kind": "red", "limit_pkts": 1, "limit_bytes": 1}"#, "queue: give exactly one of"),
            (r#"{"kind": "red", "limit_pkts": 10, "gentle": "yes"}"#, "queue.gentle: invalid type: string \"yes\", expected a boolean"),
            (r#"{"kind": "red", "limit_pkts": null}"#, "queue.limit_pkts: invalid type: null, expected usize"),
            (r#"{"kind": "red", "limit_pkts": -1}"#, "queue.limit_pkts: invalid value: integer `-1`"),
            (r#"{"kind": "red", "limit_pkts": 8.5}"#, "queue.limit_pkts: invalid type: floating point"),
            (r#"{"kind": "drop_tail", "limit_pkts": 1, "x": 1}"#, "queue.x: unknown field `x`, expected `limit_pkts` or `limit_bytes`"),
            (r#"{"kind": "drr"}"#, "queue: missing field `limit_pkts`"),
            (r#"{"kind": "token_bucket", "rate_bps": 1e6, "bucket_bytes": 100}"#, "queue: missing field `inner`"),
            (r#"{"kind": "token_bucket", "rate_bps": 0.5, "bucket_bytes": 100, "inner": {"kind": "drr", "limit_pkts": 1}}"#,
             "invalid queue.rate_bps: got 0.5, expected a rate in bit/s in 1..=1e15"),
            (r#"{"kind": "random_drop", "p": 0.1, "inner": {"kind": "fifo"}}"#, "queue.inner.kind: unknown queue kind \"fifo\""),
            (r#"{"kind": "loss_period", "p": 0.1, "start_s": -1, "end_s": 2, "inner": {"kind": "drr", "limit_pkts": 1}}"#,
             "invalid queue.start_s: got -1, expected seconds >= 0"),
            (r#"{"kind": "wrr", "classes": [{"dscps": [0], "weight": 1}]}"#, "queue.classes[0]: missing field `queue`"),
            (r#"{"kind": "wrr", "classes": [{"dscps": [300], "weight": 1, "queue": {"kind": "drr", "limit_pkts": 1}}]}"#,
             "queue.classes[0].dscps[0]: invalid value: integer `300`, expected u8"),
            (r#"{"kind": "wrr", "classes": [{"dscps": [0], "weight": 1, "queue": {"kind": "red", "limit_pkts": 1, "max_p": "x"}}]}"#,
             "queue.classes[0].queue.max_p: invalid type: string"),
            // Keys before `kind` are read before its table is known: the key still says where.
            (r#"{"gentle": "yes", "kind": "red", "limit_pkts": 10}"#, "queue: gentle: invalid type: string \"yes\", expected a boolean"),
            (r#"{"kind": "drr", "limit_pkts": 1} x"#, "queue: trailing characters"),
        ] {
            let got = err(json);
            assert!(got.starts_with(want), "{json}\n got: {got}\nwant: {want}");
        }
    }

    #[test]
    fn nesting_is_bounded_before_it_can_overflow_and_the_bound_resets() {
        let ok = nested(MAX_QUEUE_NESTING);
        QueueSpec::from_json("q", &ok).unwrap();
        for levels in [MAX_QUEUE_NESTING + 1, 100, 5000] {
            let e = err(&nested(levels));
            assert!(
                e.contains("queue specs nest deeper than 16 levels"),
                "{levels}: {e}"
            );
            assert!(e.starts_with("queue.inner.inner."), "{e}");
        }
        // Through WRR classes too.
        let mut j = r#"{"kind": "drop_tail", "limit_pkts": 5}"#.to_string();
        for _ in 0..40 {
            j = format!(
                r#"{{"kind": "wrr", "classes": [{{"dscps": [], "weight": 1, "queue": {j}}}]}}"#
            );
        }
        let e = err(&j);
        assert!(
            e.contains("nest deeper than 16") && e.starts_with("queue.classes[0].queue."),
            "{e}"
        );
        // The counter is per reading: a failed one leaves nothing behind.
        QueueSpec::from_json("q", &ok).unwrap();
        // A spec built in Rust is bounded by to_config too.
        let mut s = QueueSpec::from_json("q", r#"{"kind": "drr", "limit_pkts": 1}"#).unwrap();
        for _ in 0..MAX_QUEUE_NESTING {
            s = QueueSpec::RandomDrop(RandomDropSpec {
                p: 0.0,
                inner: Box::new(s),
            });
        }
        let e = s.to_config("q", 1).unwrap_err().to_string();
        assert!(e.contains("nest deeper than 16"), "{e}");
    }

    #[test]
    fn values_are_checked_when_the_queue_is_built() {
        for (json, want) in [
            (
                r#"{"kind": "random_drop", "p": 1.5, "inner": {"kind": "drr", "limit_pkts": 1}}"#,
                "invalid q.p: got 1.5",
            ),
            (
                r#"{"kind": "red", "limit_pkts": 10, "max_p": 2}"#,
                "invalid q.max_p",
            ),
            (
                r#"{"kind": "drop_tail", "limit_pkts": 2000000}"#,
                "invalid q.limit_pkts",
            ),
            (
                r#"{"kind": "wrr", "default_class": 3, "classes": [{"dscps": [1], "weight": 1, "queue": {"kind": "drr", "limit_pkts": 1}}]}"#,
                "invalid q.default_class",
            ),
        ] {
            let cfg = QueueSpec::from_json("q", json)
                .unwrap()
                .to_config("q", 1000)
                .unwrap();
            let e = cfg.build("q").unwrap_err().to_string();
            assert!(e.starts_with(want), "{json}: {e}");
        }
    }
}
