//! The daemon's configuration file (TOML) and its policy (RFC 8699 sec. 10: "a flow could claim a
//! higher priority than it should", starving others; the daemon knows the caller from
//! `SO_PEERCRED`, so the limits are per user).
//!
//! ```toml
//! default_algorithm = "conservative_active"   # a rate group created without one
//! window_coupler = "ccc"                      # window groups: ccc, ccc_handover, etcp, efcm, ...
//! soft_state_timeout_s = 10.0                 # a silent flow's lifetime when it names none
//! max_timeout_s = 300.0                       # the longest a client may ask for
//! max_clients = 10000
//!
//! [[group]]                      # a group key (see below) with a fixed algorithm or sharing
//! key = "label:wlan0 uplink"
//! algorithm = "passive"
//! shared_by = "all"              # or a list of uids; absent: each user's flows apart
//!
//! [default_user]                 # users without a [[user]] entry
//! max_share = 1.0                # the largest fraction of a group's priority its flows get
//! max_flows = 256
//! groups = ["*"]                 # the group keys it may join ("prefix*" matches a prefix)
//!
//! [[user]]
//! uid = 1001
//! max_share = 0.1
//! max_flows = 4
//! groups = ["label:game*"]
//! ```
//!
//! A group key is how a client names its group: `fgi:<n>` (explicit FGI), `label:<text>`
//! (configured), `5t:<src>,<dst>,<proto>,<sport>,<dport>,<dscp>` (multiplexed). Flows of
//! different users are never coupled unless a `[[group]]` entry shares its key between them.

use crate::proto::{GroupSpec, RateAlgorithm};
use coupling::tcp::CouplerKind;
use serde::Deserialize;
use std::net::Ipv6Addr;

/// Limits on one user's flows.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserPolicy {
    /// The largest fraction (0, 1] of a group's total priority this user's flows together get,
    /// whatever priorities they claim and however many flows they open.
    #[serde(default = "one")]
    pub max_share: f64,
    /// The most flows this user may hold at once.
    #[serde(default = "default_max_flows")]
    pub max_flows: u32,
    /// The group keys this user may join; `*` alone: any, `prefix*`: any key with the prefix.
    #[serde(default = "any_group")]
    pub groups: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    pub uid: u32,
    #[serde(flatten)]
    pub policy: UserPolicy,
}

/// Who may share a configured group.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SharedBy {
    All(AllTag),
    Uids(Vec<u32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllTag {
    All,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEntry {
    pub key: String,
    /// A rate group's algorithm (clients may not choose another).
    pub algorithm: Option<String>,
    pub shared_by: Option<SharedBy>,
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_algorithm")]
    pub default_algorithm: String,
    #[serde(default = "default_window_coupler")]
    pub window_coupler: String,
    #[serde(default = "default_timeout")]
    pub soft_state_timeout_s: f64,
    #[serde(default = "default_max_timeout")]
    pub max_timeout_s: f64,
    #[serde(default = "default_max_clients")]
    pub max_clients: u32,
    #[serde(default, rename = "group")]
    pub groups: Vec<GroupEntry>,
    #[serde(default = "UserPolicy::unlimited")]
    pub default_user: UserPolicy,
    #[serde(default, rename = "user")]
    pub users: Vec<UserEntry>,
}

fn one() -> f64 {
    1.0
}
fn default_max_flows() -> u32 {
    256
}
fn any_group() -> Vec<String> {
    vec!["*".into()]
}
fn default_algorithm() -> String {
    "conservative_active".into()
}
fn default_window_coupler() -> String {
    "ccc".into()
}
fn default_timeout() -> f64 {
    10.0
}
fn default_max_timeout() -> f64 {
    300.0
}
fn default_max_clients() -> u32 {
    10_000
}

impl UserPolicy {
    pub fn unlimited() -> Self {
        UserPolicy {
            max_share: 1.0,
            max_flows: default_max_flows(),
            groups: any_group(),
        }
    }

    /// Whether this user may join the group with key `key`.
    pub fn may_join(&self, key: &str) -> bool {
        self.groups.iter().any(|g| match g.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => g == key,
        })
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            default_algorithm: default_algorithm(),
            window_coupler: default_window_coupler(),
            soft_state_timeout_s: default_timeout(),
            max_timeout_s: default_max_timeout(),
            max_clients: default_max_clients(),
            groups: Vec::new(),
            default_user: UserPolicy::unlimited(),
            users: Vec::new(),
        }
    }
}

impl Config {
    /// Parses and checks a configuration file's text; errors name the field.
    pub fn parse(text: &str) -> Result<Config, String> {
        let c: Config = toml::from_str(text).map_err(|e| format!("config: {e}"))?;
        c.check()?;
        Ok(c)
    }

    /// Every value in range; errors name the field.
    pub fn check(&self) -> Result<(), String> {
        if RateAlgorithm::from_name(&self.default_algorithm).is_none() {
            return Err(format!(
                "config: default_algorithm = {:?}: expected active, conservative_active, simple_passive or passive",
                self.default_algorithm
            ));
        }
        // Ack-clocked handover releases segments at every ACK (`TcpCoupler::on_ack`); a client
        // of the daemon updates once per round trip, so only the couplers without it are served.
        let servable = |k: &CouplerKind| !matches!(k, CouplerKind::Ccc { handover: true, .. });
        if !CouplerKind::from_name(&self.window_coupler).is_some_and(|k| servable(&k)) {
            return Err(format!(
                "config: window_coupler = {:?}: expected one of {} (the handover variants need a call at every ACK)",
                self.window_coupler,
                CouplerKind::ALL
                    .iter()
                    .filter(|k| servable(k))
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (name, v) in [
            ("soft_state_timeout_s", self.soft_state_timeout_s),
            ("max_timeout_s", self.max_timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                return Err(format!(
                    "config: {name} = {v}: expected seconds in (0, 86400]"
                ));
            }
        }
        if self.soft_state_timeout_s > self.max_timeout_s {
            return Err("config: soft_state_timeout_s is above max_timeout_s".into());
        }
        if self.max_clients == 0 {
            return Err("config: max_clients = 0: expected at least 1".into());
        }
        let check_user = |name: &str, u: &UserPolicy| -> Result<(), String> {
            if !(u.max_share > 0.0 && u.max_share <= 1.0) {
                return Err(format!(
                    "config: {name}.max_share = {}: expected a fraction in (0, 1]",
                    u.max_share
                ));
            }
            Ok(())
        };
        check_user("default_user", &self.default_user)?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, u) in self.users.iter().enumerate() {
            check_user(&format!("user[{i}]"), &u.policy)?;
            if !seen.insert(u.uid) {
                return Err(format!("config: user[{i}].uid = {}: listed twice", u.uid));
            }
        }
        let mut keys = std::collections::BTreeSet::new();
        for (i, g) in self.groups.iter().enumerate() {
            if !keys.insert(g.key.as_str()) {
                return Err(format!(
                    "config: group[{i}].key = {:?}: listed twice",
                    g.key
                ));
            }
            if let Some(a) = &g.algorithm {
                if RateAlgorithm::from_name(a).is_none() {
                    return Err(format!(
                        "config: group[{i}].algorithm = {a:?}: expected active, conservative_active, simple_passive or passive"
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn user(&self, uid: u32) -> &UserPolicy {
        self.users
            .iter()
            .find(|u| u.uid == uid)
            .map_or(&self.default_user, |u| &u.policy)
    }

    pub fn group(&self, key: &str) -> Option<&GroupEntry> {
        self.groups.iter().find(|g| g.key == key)
    }

    /// Whether users' flows in the group `key` are coupled across users, and which users.
    pub fn shared_with(&self, key: &str, uid: u32) -> bool {
        match self.group(key).and_then(|g| g.shared_by.as_ref()) {
            Some(SharedBy::All(_)) => true,
            Some(SharedBy::Uids(u)) => u.contains(&uid),
            None => false,
        }
    }

    pub fn default_algorithm(&self) -> RateAlgorithm {
        RateAlgorithm::from_name(&self.default_algorithm).expect("checked")
    }

    pub fn window_coupler(&self) -> CouplerKind {
        CouplerKind::from_name(&self.window_coupler).expect("checked")
    }
}

/// The key a group spec names (see the module docs).
pub fn group_key(g: &GroupSpec) -> String {
    match g {
        GroupSpec::Explicit(n) => format!("fgi:{n}"),
        GroupSpec::Configured(l) => format!("label:{l}"),
        GroupSpec::Multiplexed {
            src,
            dst,
            protocol,
            src_port,
            dst_port,
            dscp,
        } => {
            let ip = |b: &[u8; 16]| {
                let a = Ipv6Addr::from(*b);
                a.to_ipv4_mapped()
                    .map_or_else(|| a.to_string(), |v4| v4.to_string())
            };
            format!(
                "5t:{},{},{protocol},{src_port},{dst_port},{dscp}",
                ip(src),
                ip(dst)
            )
        }
    }
}

/// Effective priorities under per-user share limits. Inputs: each user's claimed priority sum in
/// one group and its `max_share` (1: unlimited). Returns each user's scale factor (1: unchanged).
///
/// The effective sums are `E_i = min(c_i, L_i * T)` with `T = sum of E_i` (a user keeps its claim
/// unless that would give it more than its limit of the total). Such a `T > 0` exists exactly when
/// the limits sum to more than 1 (an unlimited user counts 1); it is found by water-filling: users
/// whose claim exceeds their limit of the current total are capped, which lowers the total,
/// until no uncapped user exceeds its limit (`T = uncapped claims / (1 - capped limits)`).
/// When the limits sum to 1 or less (every user limited, say two at 40 %), no allocation keeps
/// every user within its limit; shares then follow the limits (`E_i` proportional to `L_i`), so
/// no user's claim can take more than its limit's proportion. A user alone is never scaled.
pub fn share_scales(users: &[(f64, f64)]) -> Vec<f64> {
    let n = users.len();
    if n <= 1 {
        return vec![1.0; n];
    }
    let limits: f64 = users.iter().map(|u| u.1).sum();
    let proportional = || -> Vec<f64> {
        // E_i = L_i * K with K = min(c_i / L_i): every scale <= 1, so no user's effective
        // priority exceeds its claim (the fuzzer's invariant), and the shares follow the limits.
        let k = users
            .iter()
            .map(|&(c, l)| c / l)
            .fold(f64::INFINITY, f64::min);
        users
            .iter()
            .map(|&(c, l)| if c > 0.0 { (l * k / c).min(1.0) } else { 1.0 })
            .collect()
    };
    if limits <= 1.0 {
        return proportional();
    }
    let mut capped = vec![false; n];
    loop {
        let free: f64 = (0..n).filter(|&i| !capped[i]).map(|i| users[i].0).sum();
        let caps: f64 = (0..n).filter(|&i| capped[i]).map(|i| users[i].1).sum();
        if free <= 0.0 || caps >= 1.0 {
            // Not reached when the limits sum to more than 1 (see above); kept as a guard.
            return proportional();
        }
        let total = free / (1.0 - caps);
        let mut grew = false;
        for i in 0..n {
            let (claim, limit) = users[i];
            if !capped[i] && limit < 1.0 && claim > limit * total * (1.0 + 1e-12) {
                capped[i] = true;
                grew = true;
            }
        }
        if !grew {
            return (0..n)
                .map(|i| {
                    if capped[i] && users[i].0 > 0.0 {
                        users[i].1 * total / users[i].0
                    } else {
                        1.0
                    }
                })
                .collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limited_user_gets_its_share_and_no_more() {
        // Worked example: user A (limit 10 %) claims 1000, user B claims 1 + 1 = 2.
        // T = 2 / (1 - 0.1) = 2.222; A's effective sum 0.2222 = 10 % of T.
        let s = share_scales(&[(1000.0, 0.1), (2.0, 1.0)]);
        let a = 1000.0 * s[0];
        assert!((a / (a + 2.0) - 0.1).abs() < 1e-12, "{s:?}");
        assert_eq!(s[1], 1.0);
        // Under its limit: unchanged.
        assert_eq!(share_scales(&[(0.1, 0.5), (1.0, 1.0)]), vec![1.0, 1.0]);
        // Alone: nothing to protect.
        assert_eq!(share_scales(&[(5.0, 0.1)]), vec![1.0]);
        // Everyone limited, limits summing to 1 or less (review of issue 21): no allocation keeps
        // both within 40 %; shares follow the limits, 1000 claimed against 1 gives no more.
        let s = share_scales(&[(1000.0, 0.4), (1.0, 0.4)]);
        let (a, b) = (1000.0 * s[0], s[1]);
        assert!((a / (a + b) - 0.5).abs() < 1e-12, "{s:?}");
        assert!(s.iter().all(|&x| x <= 1.0), "never above the claim: {s:?}");
        let s = share_scales(&[(1000.0, 0.1), (1.0, 0.5)]);
        let (a, b) = (1000.0 * s[0], s[1]);
        assert!((a / (a + b) - 0.1 / 0.6).abs() < 1e-12, "{s:?}");
        // Everyone limited but the limits leave room (0.6 + 0.6): the claimer of 1000 is held to
        // 60 %, the other keeps its claim.
        let s = share_scales(&[(1000.0, 0.6), (1.0, 0.6)]);
        let (a, b) = (1000.0 * s[0], s[1]);
        assert!((a / (a + b) - 0.6).abs() < 1e-12 && s[1] == 1.0, "{s:?}");
        // Two limited users and one free: both capped at their limits of the same total.
        let s = share_scales(&[(100.0, 0.1), (100.0, 0.2), (1.0, 1.0)]);
        let (a, b) = (100.0 * s[0], 100.0 * s[1]);
        let t = a + b + 1.0;
        assert!(
            (a / t - 0.1).abs() < 1e-12 && (b / t - 0.2).abs() < 1e-12,
            "{s:?}"
        );
    }

    #[test]
    fn config_errors_name_the_field() {
        for (text, field) in [
            ("default_algorithm = \"fast\"", "default_algorithm"),
            ("window_coupler = \"x\"", "window_coupler"),
            ("soft_state_timeout_s = -1.0", "soft_state_timeout_s"),
            ("[default_user]\nmax_share = 0.0", "default_user.max_share"),
            ("[[user]]\nuid = 1\n[[user]]\nuid = 1", "user[1].uid"),
            (
                "[[group]]\nkey = \"a\"\nalgorithm = \"b\"",
                "group[0].algorithm",
            ),
            ("colour = 1", "colour"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(field), "{text}: {e}");
        }
        let c = Config::parse("[[group]]\nkey = \"label:x\"\nshared_by = \"all\"\n[[group]]\nkey = \"fgi:1\"\nshared_by = [5, 6]").unwrap();
        assert!(
            c.shared_with("label:x", 9) && c.shared_with("fgi:1", 6) && !c.shared_with("fgi:1", 7)
        );
        assert!(!c.shared_with("fgi:2", 6));
    }

    #[test]
    fn group_keys() {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 0, 0, 1]);
        let g = GroupSpec::Multiplexed {
            src: v4,
            dst: v4,
            protocol: 17,
            src_port: 1,
            dst_port: 2,
            dscp: 46,
        };
        assert_eq!(group_key(&g), "5t:10.0.0.1,10.0.0.1,17,1,2,46");
        assert_eq!(group_key(&GroupSpec::Explicit(7)), "fgi:7");
        let p = UserPolicy {
            groups: vec!["label:game*".into(), "fgi:3".into()],
            ..UserPolicy::unlimited()
        };
        assert!(p.may_join("label:game 1") && p.may_join("fgi:3") && !p.may_join("fgi:30"));
    }
}
