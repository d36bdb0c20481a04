//! ctrlTCP in the kernel: loads the BPF struct_ops congestion control `macroflow_ccc`
//! (bpf/macroflow_ccc.bpf.c, issue 16) and reads and writes its maps.
//!
//! - [`load`] opens the skeleton, sets the load-time options, loads it (the verifier runs here),
//!   registers the congestion control through a struct_ops link, and pins the link and the maps
//!   under [`PIN_DIR`] so it stays registered after this process exits and `status` can read it.
//! - [`unload`] removes the pins. The kernel then unregisters `macroflow_ccc`: no new socket can
//!   choose it, while sockets already using it keep it (and the maps) until they close.
//! - [`status`] reads every group under its lock (`BPF_F_LOCK`: a consistent snapshot) and the
//!   program's counters.
//! - [`rule_add`], [`rules`], [`rule_del`]: which connections join which group, with which
//!   priority (read by the program when a connection starts).
//! - [`set_socket`]: an application's own priority (and group) for one of its sockets, by fd.
//!
//! The map layouts are `bpf/macroflow_ccc.h`, mirrored here with `#[repr(C)]`; every map's value
//! size is checked against the mirror when it is opened.

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::mem::size_of;
use std::path::{Path, PathBuf};

#[cfg(not(ccc_bpf_missing))]
mod skel {
    #![allow(
        clippy::all,
        clippy::pedantic,
        dead_code,
        non_camel_case_types,
        unused_imports
    )]
    include!(concat!(env!("OUT_DIR"), "/macroflow_ccc.skel.rs"));
}

/// The congestion control's name (`setsockopt(TCP_CONGESTION)`, `ip route ... congctl`).
pub const CC_NAME: &str = "macroflow_ccc";
/// Where the link and the maps are pinned.
pub const PIN_DIR: &str = "/sys/fs/bpf/macroflow_ccc";
/// TiU's connections map as `macroflow tiu enable` pins it (crates/tiu-bpf's `PIN_DIR`/conns):
/// `load` reuses it when it is there, so that the default grouping follows TiU (see `tiu_group`
/// in bpf/macroflow_ccc.bpf.c); otherwise TiU reuses this program's (pinned as `tiu_conns`).
pub const TIU_CONNS_PIN: &str = "/sys/fs/bpf/macroflow_tiu/conns";
/// Priority units: 65536 is priority 1 (the C core's CCC_PRIORITY_SCALE).
pub const PRIORITY_SCALE: f64 = 65536.0;
/// The largest priority the core takes (2^24 units).
pub const MAX_PRIORITY: f64 = 256.0;
/// Connections per group (CCC_MAX_CONNS).
pub const MAX_CONNS: usize = 64;
/// Rules (MF_MAX_RULES).
pub const MAX_RULES: usize = 64;
/// Groups (MF_MAX_GROUPS).
pub const MAX_GROUPS: usize = 4096;

const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;

/// What went wrong, in words a user can act on (shared with crates/tiu-bpf).
pub use bpf_rt::Error;

type Result<T> = std::result::Result<T, Error>;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

fn bpf_err(what: &str, e: libbpf_rs::Error) -> Error {
    Error(format!("{what}: {e:#}"))
}

// ---- Map layouts (bpf/macroflow_ccc.h, bpf/ccc_core.h) ----------------------------------------

/// `struct mf_group_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupKey {
    pub kind: u8,
    pub family: u8,
    pub _pad: u16,
    pub id: u32,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    /// A pair's network namespace cookie (SO_NETNS_COOKIE); 0 for a numbered group.
    pub netns: u64,
}

/// `struct ccc_member`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Member {
    pub conn: u64,
    pub seq: u64,
    pub p: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub fr_epoch: u64,
    pub ho_target: u64,
    pub ho_released: u64,
    pub ho_acks: u64,
    pub state: u8,
    pub ssbit: u8,
    pub rto_pending: u8,
    pub handover: u8,
    /// The program's (not the core's): when the connection was last heard from (a report or an ACK), s of CLOCK_MONOTONIC.
    pub seen_s: u32,
}

/// `struct ccc_group`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Group {
    pub max_burst: u64,
    pub next_seq: u64,
    pub event_epoch: u64,
    pub sum_p: u64,
    pub sum_cwnd: u64,
    pub sum_ssthresh: u64,
    pub reductions: u64,
    pub n: u32,
    pub coco: u32,
    pub event: u32,
    pub n_not_ss: u32,
    pub n_ssbits: u32,
    pub n_handovers: u32,
    pub handover_enabled: u32,
    pub scratch: u32,
    pub m: [Member; MAX_CONNS],
}

/// `struct mf_group_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GroupVal {
    pub lock: u32,
    /// The next member the program checks for staleness.
    pub reap: u32,
    pub key: GroupKey,
    /// 0 until its first connection initialises it.
    pub gen: u64,
    /// CLOCK_MONOTONIC ns when its last member left; 0 while in use.
    pub empty_since_ns: u64,
    pub g: Group,
}

/// `struct mf_rule`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawRule {
    pub used: u32,
    pub family: u32,
    pub daddr: [u8; 16],
    pub prefix_len: u32,
    pub port_lo: u16,
    pub port_hi: u16,
    pub cgroup_id: u64,
    pub group: u32,
    pub prio_units: u32,
    pub uncoupled: u32,
    pub _pad: u32,
}

/// `struct mf_sock_prio`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SockPrio {
    prio_units: u32,
    group: u32,
    handover: u32,
    _pad: u32,
}

/// `struct mf_conn` (only its size is checked here: user space never writes it).
const CONN_SIZE: usize = 96;
/// `cfg_stale_s` unless told otherwise: long past any RTO, so an idle connection's window has been
/// restarted by the kernel anyway (tcp_slow_start_after_idle) when it is taken out.
pub const DEFAULT_STALE_S: u32 = 30;

/// The counters in .bss (MF_NSTATS).
const NSTATS: usize = 29;

/// The program's read-only settings (its `.rodata`: `cfg_handover`, `cfg_stale_s`,
/// `cfg_max_burst_pkts`), pinned as `config` so that `status` and the Linux engine can tell what
/// a loaded program was loaded with.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawConfig {
    handover: u32,
    stale_s: u32,
    max_burst_pkts: u64,
}

/// What the loaded program was loaded with (see [`LoadOptions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub handover: bool,
    pub stale_s: u32,
    pub max_burst_pkts: u64,
}

/// The counters' names, by index (MF_ST_* in bpf/macroflow_ccc.h).
pub const STAT_NAMES: [&str; NSTATS] = [
    "connections_started",
    "connections_coupled",
    "connections_released",
    "uncoupled_groups_map_full",
    "uncoupled_group_full",
    "uncoupled_no_storage",
    "uncoupled_group_deleting",
    "uncoupled_group_lost",
    "uncoupled_by_rule",
    "errors_register",
    "errors_update",
    "errors_leave",
    "errors_on_ack",
    "errors_priority",
    "updates",
    "handover_pulls",
    "answers_clamped",
    "groups_made",
    "groups_emptied",
    "registration_retries",
    "priorities_set",
    "rules_busy",
    "never_joined",
    "late_starts",
    "left_at_close",
    "evicted_stale",
    "rejoined",
    "reclassified",
    "handover_segments_dropped",
];

fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a plain #[repr(C)] struct of integers with every padding byte an explicit field.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

fn from_bytes<T: Copy>(b: &[u8]) -> Result<T> {
    if b.len() != size_of::<T>() {
        return err(format!(
            "a map value of {} bytes where {} were expected: the program and this build disagree",
            b.len(),
            size_of::<T>()
        ));
    }
    // SAFETY: the length is checked; every bit pattern is a valid value of these integer structs.
    Ok(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}

// ---- Capabilities -----------------------------------------------------------------------------

/// What this machine lacks to load the program (empty: nothing).
pub fn missing() -> Vec<String> {
    let mut m = Vec::new();
    if let Some(why) = built_without() {
        m.push(format!("this build has no BPF program: {why}"));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        m.push("not root (loading a congestion control needs CAP_BPF and CAP_NET_ADMIN)".into());
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        m.push("the kernel has no BTF (/sys/kernel/btf/vmlinux)".into());
    }
    m
}

/// Why this build has no BPF program, if it has none.
pub fn built_without() -> Option<&'static str> {
    #[cfg(ccc_bpf_missing)]
    {
        Some(env!("CCC_BPF_MISSING"))
    }
    #[cfg(not(ccc_bpf_missing))]
    {
        None
    }
}

/// Congestion controls the kernel offers now.
pub fn available() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

use bpf_rt::ensure_bpffs;

// ---- Load and unload --------------------------------------------------------------------------

/// Load-time options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Ack-clocked handover for joining connections (Algorithm 4).
    pub handover: bool,
    /// The coupler's burst limit (`set_max_burst_pkts`), packets.
    pub max_burst_pkts: u64,
    /// A member not heard from (no report, no ACK of its data) for this long is taken out of its
    /// group (0: never); a live one rejoins at its next report. Covers connections the kernel
    /// destroyed without `release`.
    pub stale_s: u32,
    pub pin_dir: PathBuf,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            handover: true,
            max_burst_pkts: 0,
            stale_s: DEFAULT_STALE_S,
            pin_dir: PathBuf::from(PIN_DIR),
        }
    }
}

/// What [`load`] did.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub pin_dir: PathBuf,
    /// Instructions the verifier walked, by operation (0 where the kernel does not say).
    pub programs: Vec<(String, usize)>,
}

const MAP_PINS: [&str; 8] = [
    "config",
    "tiu_conns",
    "groups",
    "rules",
    "rules_seq",
    "conns",
    "sock_prio",
    "stats",
];

/// Loads and registers `macroflow_ccc`; see the module comment.
pub fn load(opts: &LoadOptions) -> Result<Loaded> {
    let missing = missing();
    if !missing.is_empty() {
        return err(format!("cannot load {CC_NAME}: {}", missing.join("; ")));
    }
    if opts.max_burst_pkts > 1_000_000_000_000_000 {
        return err("max_burst_pkts must be at most 1e15 (the coupler's limit)");
    }
    ensure_bpffs()?;
    let _lock = writer_lock()?;
    if opts.pin_dir.join("link").exists() {
        return err(format!(
            "{CC_NAME} is already loaded (pinned at {}); `macroflow linux unload` first",
            opts.pin_dir.display()
        ));
    }
    // Pins without a link: a load or unload that was interrupted; they would block this one.
    if opts.pin_dir.exists() {
        remove_pins(&opts.pin_dir);
    }
    if available().iter().any(|c| c == CC_NAME) {
        return err(format!(
            "a congestion control named {CC_NAME} is already registered, not by this loader \
             (nothing pinned at {}); unregister it first (bpftool struct_ops unregister name {CC_NAME})",
            opts.pin_dir.display()
        ));
    }
    load_impl(opts)
}

#[cfg(ccc_bpf_missing)]
fn load_impl(_opts: &LoadOptions) -> Result<Loaded> {
    err("unreachable: missing() reports a build without the program")
}

#[cfg(not(ccc_bpf_missing))]
fn load_impl(opts: &LoadOptions) -> Result<Loaded> {
    use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
    use std::mem::MaybeUninit;

    let mut object = MaybeUninit::uninit();
    let mut open = skel::MacroflowCccSkelBuilder::default()
        .open(&mut object)
        .map_err(|e| bpf_err("opening the BPF object", e))?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .ok_or_else(|| Error("the program's read-only data is not mapped".into()))?;
        ro.cfg_handover = u32::from(opts.handover);
        ro.cfg_max_burst_pkts = opts.max_burst_pkts;
        ro.cfg_stale_s = opts.stale_s;
    }
    let tiu = Path::new(TIU_CONNS_PIN);
    if tiu.exists() {
        // TiU is enabled: share its connections map (checked first: an older TiU's has
        // another name or key).
        bpf_rt::reuse_pinned(
            &mut open.maps.tiu_conns,
            tiu,
            "`macroflow tiu disable` and enable TiU again",
        )?;
    }
    let mut sk = open
        .load()
        .map_err(|e| bpf_err("loading (the verifier's log is above)", e))?;
    const _: () = {
        use std::mem::offset_of;
        type Ro = skel::types::rodata;
        assert!(size_of::<Ro>() == size_of::<RawConfig>());
        assert!(offset_of!(Ro, cfg_handover) == offset_of!(RawConfig, handover));
        assert!(offset_of!(Ro, cfg_stale_s) == offset_of!(RawConfig, stale_s));
        assert!(offset_of!(Ro, cfg_max_burst_pkts) == offset_of!(RawConfig, max_burst_pkts));
    };
    let sizes: [(&dyn MapCore, usize, &str); 5] = [
        (&sk.maps.groups, size_of::<GroupVal>(), "groups"),
        (&sk.maps.rules, size_of::<RawRule>(), "rules"),
        (&sk.maps.rules_seq, 8, "rules_seq"),
        (&sk.maps.conns, CONN_SIZE, "conns"),
        (&sk.maps.sock_prio, size_of::<SockPrio>(), "sock_prio"),
    ];
    for (m, want, name) in sizes {
        if m.value_size() as usize != want {
            return err(format!(
                "map {name}: value of {} bytes, this build expects {want}",
                m.value_size()
            ));
        }
    }
    // The instructions the verifier walked for each (its budget is 1M per program): read from
    // the program's fdinfo.
    let programs = sk
        .object()
        .progs()
        .map(|p| {
            use std::os::fd::{AsFd, AsRawFd};
            let n = p.name().to_string_lossy().into_owned();
            let fd = p.as_fd().as_raw_fd();
            let walked = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("verified_insns:"))
                        .and_then(|v| v.trim().parse().ok())
                })
                .unwrap_or(0);
            (n, walked)
        })
        .collect();
    let mut link = sk
        .maps
        .macroflow_ccc
        .attach_struct_ops()
        .map_err(|e| bpf_err("registering the congestion control", e))?;
    std::fs::create_dir_all(&opts.pin_dir)
        .map_err(|e| Error(format!("creating {}: {e}", opts.pin_dir.display())))?;
    let pin = |sk: &mut skel::MacroflowCccSkel<'_>, link: &mut libbpf_rs::Link| -> Result<()> {
        let d = &opts.pin_dir;
        let p = |e| bpf_err("pinning", e);
        sk.maps.groups.pin(d.join("groups")).map_err(p)?;
        sk.maps.rules.pin(d.join("rules")).map_err(p)?;
        sk.maps.rules_seq.pin(d.join("rules_seq")).map_err(p)?;
        sk.maps.conns.pin(d.join("conns")).map_err(p)?;
        sk.maps.sock_prio.pin(d.join("sock_prio")).map_err(p)?;
        sk.maps.bss.pin(d.join("stats")).map_err(p)?;
        sk.maps.rodata.pin(d.join("config")).map_err(p)?;
        sk.maps.tiu_conns.pin(d.join("tiu_conns")).map_err(p)?;
        link.pin(d.join("link")).map_err(p)?;
        Ok(())
    };
    if let Err(e) = pin(&mut sk, &mut link) {
        remove_pins(&opts.pin_dir);
        return Err(e);
    }
    Ok(Loaded {
        pin_dir: opts.pin_dir.clone(),
        programs,
    })
}

fn remove_pins(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    for f in std::iter::once("link").chain(MAP_PINS) {
        if std::fs::remove_file(dir.join(f)).is_ok() {
            removed.push(f.to_owned());
        }
    }
    let _ = std::fs::remove_dir(dir);
    removed
}

/// What [`unload`] found and did.
#[derive(Clone, Debug)]
pub struct Unloaded {
    /// Connections still using `macroflow_ccc`'s groups when it was unloaded: they keep it until
    /// they close.
    pub coupled_connections: u64,
    pub removed: Vec<String>,
}

/// Unregisters `macroflow_ccc` (see the module comment for what happens to sockets using it).
pub fn unload(pin_dir: &Path) -> Result<Unloaded> {
    let _lock = writer_lock()?;
    if !pin_dir.join("link").exists() {
        return err(format!(
            "{CC_NAME} is not loaded (nothing pinned at {})",
            pin_dir.display()
        ));
    }
    let coupled = status(pin_dir)
        .map(|s| s.groups.iter().map(|g| g.members.len() as u64).sum())
        .unwrap_or(0);
    let removed = remove_pins(pin_dir);
    // The kernel drops the link (and with it the name) after an RCU grace period, not at unlink:
    // wait for it, so a load right after an unload finds the name free.
    let t0 = std::time::Instant::now();
    while available().iter().any(|c| c == CC_NAME) {
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            return err(format!(
                "unpinned {removed:?}, but the kernel still lists {CC_NAME} after 10 s"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(Unloaded {
        coupled_connections: coupled,
        removed,
    })
}

/// Whether `macroflow_ccc` is loaded by this loader (its link is pinned).
pub fn is_loaded(pin_dir: &Path) -> bool {
    pin_dir.join("link").exists()
}

// ---- Status -----------------------------------------------------------------------------------

/// One member of a group, as `status` shows it.
#[derive(Clone, Debug)]
pub struct MemberView {
    pub conn: u64,
    pub priority: f64,
    pub cwnd_pkts: u64,
    pub ssthresh_pkts: u64,
    /// SS, CA or FR.
    pub state: &'static str,
    pub coordinating: bool,
    pub in_handover: bool,
    pub timed_out: bool,
    /// Seconds since it was last heard from.
    pub idle_s: u64,
}

/// One group.
#[derive(Clone, Debug)]
pub struct GroupView {
    pub key: GroupKey,
    /// "pair 10.0.0.1 -> 10.0.0.2", "tiu pair 10.0.0.1 -> 10.0.0.2" (its TiU connections) or "group 7".
    pub name: String,
    pub sum_cwnd_pkts: u64,
    pub sum_ssthresh_pkts: u64,
    pub sum_priority_units: u64,
    /// The coordinating connection's id.
    pub coco: Option<u64>,
    pub loss_event: Option<u64>,
    pub reductions: u64,
    pub handovers: u32,
    pub members: Vec<MemberView>,
    /// The group's own counts checked against its members (empty: consistent).
    pub inconsistencies: Vec<String>,
    /// Seconds since its last member left (None while it has members).
    pub empty_for_s: Option<f64>,
    pub raw: GroupVal,
}

/// Everything `status` shows.
#[derive(Clone, Debug)]
pub struct Status {
    /// None when the program was loaded by a build that did not pin its settings.
    pub config: Option<Config>,
    pub groups: Vec<GroupView>,
    pub stats: Vec<(&'static str, u64)>,
    pub rules: Vec<Rule>,
}

fn open_pinned(pin_dir: &Path, name: &str, value_size: usize) -> Result<MapHandle> {
    let path = pin_dir.join(name);
    if !path.exists() {
        return err(format!(
            "{CC_NAME} is not loaded ({} is missing); `macroflow linux load` first",
            path.display()
        ));
    }
    let m = MapHandle::from_pinned_path(&path)
        .map_err(|e| bpf_err(&format!("opening {}", path.display()), e))?;
    if m.value_size() as usize != value_size {
        return err(format!(
            "{}: value of {} bytes, this build expects {value_size} (loaded by another build?)",
            path.display(),
            m.value_size()
        ));
    }
    Ok(m)
}

fn addr(family: u8, a: &[u8; 16]) -> String {
    if u32::from(family) == AF_INET {
        std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
    } else {
        std::net::Ipv6Addr::from(*a).to_string()
    }
}

/// Checks a group's counts against its members: the invariants every snapshot taken under the
/// lock must meet. (The aggregate `sum_cwnd` is the coupler's own and is not the sum of the
/// windows the members were last told: those follow it one report behind.)
pub fn check_group(g: &Group) -> Vec<String> {
    let mut bad = Vec::new();
    let n = g.n as usize;
    if n > MAX_CONNS {
        bad.push(format!("n = {n} > {MAX_CONNS}"));
        return bad;
    }
    let m = &g.m[..n];
    let sum_p: u64 = m.iter().map(|c| c.p).sum();
    if sum_p != g.sum_p {
        bad.push(format!("sum of priorities {} != members' {sum_p}", g.sum_p));
    }
    let count = |f: &dyn Fn(&Member) -> bool| m.iter().filter(|c| f(c)).count() as u32;
    for (name, have, want) in [
        ("not in SS", g.n_not_ss, count(&|c| c.state != 0)),
        ("timed out", g.n_ssbits, count(&|c| c.ssbit != 0)),
        ("in handover", g.n_handovers, count(&|c| c.handover != 0)),
    ] {
        if have != want {
            bad.push(format!("{name}: group counts {have}, members {want}"));
        }
    }
    if n > 0 && g.coco as usize >= n {
        bad.push(format!("coordinator index {} outside {n} members", g.coco));
    }
    if g.event != u32::MAX && g.event as usize >= n {
        bad.push(format!("loss-event index {} outside {n} members", g.event));
    }
    if m.windows(2).any(|w| w[0].seq >= w[1].seq) {
        bad.push("members out of registration order".into());
    }
    if n == 0 && (g.sum_p != 0 || g.sum_cwnd != 0 || g.sum_ssthresh != 0) {
        bad.push(format!(
            "empty group with sums p {} cwnd {} ssthresh {}",
            g.sum_p, g.sum_cwnd, g.sum_ssthresh
        ));
    }
    bad
}

fn view(key: GroupKey, v: GroupVal, now_ns: u64) -> GroupView {
    let g = &v.g;
    let n = (g.n as usize).min(MAX_CONNS);
    let name = if key.kind == 1 {
        format!("group {}", key.id)
    } else {
        format!(
            "{}pair {} -> {}",
            if key.kind == 2 { "tiu " } else { "" },
            addr(key.family, &key.saddr),
            addr(key.family, &key.daddr)
        )
    };
    let members = g.m[..n]
        .iter()
        .enumerate()
        .map(|(i, c)| MemberView {
            conn: c.conn,
            priority: c.p as f64 / PRIORITY_SCALE,
            cwnd_pkts: c.cwnd,
            ssthresh_pkts: c.ssthresh,
            state: ["SS", "CA", "FR"]
                .get(c.state as usize)
                .copied()
                .unwrap_or("?"),
            coordinating: g.coco as usize == i,
            in_handover: c.handover != 0,
            timed_out: c.ssbit != 0,
            idle_s: (now_ns / 1_000_000_000).saturating_sub(u64::from(c.seen_s)),
        })
        .collect();
    let idx = |i: u32| {
        g.m.get(i as usize)
            .filter(|_| (i as usize) < n)
            .map(|c| c.conn)
    };
    GroupView {
        key,
        name,
        sum_cwnd_pkts: g.sum_cwnd,
        sum_ssthresh_pkts: g.sum_ssthresh,
        sum_priority_units: g.sum_p,
        coco: idx(g.coco),
        loss_event: idx(g.event),
        reductions: g.reductions,
        handovers: g.n_handovers,
        members,
        inconsistencies: check_group(g),
        empty_for_s: (g.n == 0 && v.empty_since_ns != 0)
            .then(|| now_ns.saturating_sub(v.empty_since_ns) as f64 / 1e9),
        raw: v,
    }
}

/// Every initialised group with its value, each read under its lock, once per key (a key listed
/// twice by a walk that restarted after a deletion is shown once).
fn read_groups(m: &MapHandle) -> Result<Vec<(GroupKey, GroupVal)>> {
    let mut out: Vec<(GroupKey, GroupVal)> = Vec::new();
    for k in m.keys() {
        // A group deleted since the key was listed is skipped.
        let Some(v) = m
            .lookup(&k, MapFlags::LOCK)
            .map_err(|e| bpf_err("reading a group", e))?
        else {
            continue;
        };
        let key: GroupKey = from_bytes(&k)?;
        let v: GroupVal = from_bytes(&v)?;
        if v.gen == 0 || out.iter().any(|(k2, _)| *k2 == key) {
            continue; // not yet initialised by its first connection, or seen already
        }
        out.push((key, v));
    }
    Ok(out)
}

/// CLOCK_MONOTONIC in ns: the clock of the program's bpf_ktime_get_ns().
fn monotonic_ns() -> u64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The groups (each read under its lock; empty ones included), the counters and the rules.
pub fn status(pin_dir: &Path) -> Result<Status> {
    let groups_map = open_pinned(pin_dir, "groups", size_of::<GroupVal>())?;
    let stats_map = MapHandle::from_pinned_path(pin_dir.join("stats"))
        .map_err(|e| bpf_err("opening the counters", e))?;
    let now = monotonic_ns();
    let mut groups: Vec<GroupView> = read_groups(&groups_map)?
        .into_iter()
        .map(|(k, v)| view(k, v, now))
        .collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    let raw = stats_map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| bpf_err("reading the counters", e))?
        .unwrap_or_default();
    // A program loaded by an older build has fewer counters: those it has are shown.
    let present = (raw.len() / 8).min(NSTATS);
    let stats = STAT_NAMES[..present]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let b: [u8; 8] = raw[i * 8..i * 8 + 8].try_into().unwrap();
            (*n, u64::from_ne_bytes(b))
        })
        .collect();
    Ok(Status {
        config: config(pin_dir)?,
        groups,
        stats,
        rules: rules(pin_dir)?,
    })
}

/// The settings the loaded program was loaded with; None if it was loaded by a build that did not
/// pin them.
pub fn config(pin_dir: &Path) -> Result<Option<Config>> {
    if !pin_dir.join("config").exists() {
        if !is_loaded(pin_dir) {
            return err(format!(
                "{CC_NAME} is not loaded (nothing pinned at {}); `macroflow linux load` first",
                pin_dir.display()
            ));
        }
        return Ok(None);
    }
    let m = open_pinned(pin_dir, "config", size_of::<RawConfig>())?;
    let raw = m
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| bpf_err("reading the settings", e))?
        .ok_or_else(|| Error("the settings map is empty".into()))?;
    let c: RawConfig = from_bytes(&raw)?;
    Ok(Some(Config {
        handover: c.handover != 0,
        stale_s: c.stale_s,
        max_burst_pkts: c.max_burst_pkts,
    }))
}

/// Deletes the groups that have been empty for at least `min_idle_s` seconds; returns how many.
/// The program never deletes a group (a deleted element's memory may be reused at once, under a
/// connection that has just looked it up); a group idle for seconds has no such connection.
pub fn gc(pin_dir: &Path, min_idle_s: f64) -> Result<usize> {
    if !(min_idle_s.is_finite() && min_idle_s >= 1.0) {
        return err(format!(
            "min_idle_s must be at least 1 second, got {min_idle_s}"
        ));
    }
    let m = open_pinned(pin_dir, "groups", size_of::<GroupVal>())?;
    let now = monotonic_ns();
    let idle_ns = (min_idle_s * 1e9) as u64;
    let mut deleted = 0;
    let idle = |v: &GroupVal, now: u64| {
        v.g.n == 0 && v.empty_since_ns != 0 && now.saturating_sub(v.empty_since_ns) >= idle_ns
    };
    for (key, v) in read_groups(&m)? {
        if !idle(&v, now) {
            continue;
        }
        // Read again just before deleting: a connection may have joined since the walk. What
        // remains is a join between this read and the delete (user space cannot delete on a
        // condition under the group's lock). Such a connection has registered in the element
        // being deleted, alone: its first answer is its own window; every later callback looks
        // its group up by key, finds none (or a new group of that key, of another generation),
        // and it joins again (counted as `rejoined`). Nothing is left inconsistent: `status`
        // never sees the deleted element, and the connection's leave checks the generation.
        let again = m
            .lookup(as_bytes(&key), MapFlags::LOCK)
            .map_err(|e| bpf_err("reading a group", e))?;
        let Some(again) = again else { continue };
        let again: GroupVal = from_bytes(&again)?;
        if idle(&again, monotonic_ns()) {
            match m.delete(as_bytes(&key)) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
                Err(e) => return Err(bpf_err("deleting an idle group", e)),
            }
        }
    }
    Ok(deleted)
}

// ---- Rules ------------------------------------------------------------------------------------

/// A rule (see `struct mf_rule`): connections whose remote address is in `prefix`, whose remote
/// port is in `ports`, and whose socket is in cgroup `cgroup_id` go to `group` (None: their
/// address pair's group) with `priority`, or run uncoupled.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The remote address's prefix, e.g. 10.0.0.0/8 or fd00::/8; None matches any.
    pub prefix: Option<(std::net::IpAddr, u8)>,
    /// The remote port's range, inclusive.
    pub ports: Option<(u16, u16)>,
    /// The socket's cgroup (v2) id: the inode number of its directory.
    pub cgroup_id: Option<u64>,
    pub group: Option<u32>,
    pub priority: f64,
    pub uncoupled: bool,
}

fn prio_units(p: f64) -> Result<u32> {
    if !p.is_finite() || p <= 0.0 || p > MAX_PRIORITY {
        return err(format!("priority must be in (0, {MAX_PRIORITY}], got {p}"));
    }
    let u = (p * PRIORITY_SCALE).round();
    if u < 1.0 {
        return err(format!("priority {p} is below the smallest step (1/65536)"));
    }
    Ok(u as u32)
}

impl Rule {
    fn to_raw(&self) -> Result<RawRule> {
        let mut r = RawRule {
            used: 1,
            prio_units: prio_units(self.priority)?,
            uncoupled: u32::from(self.uncoupled),
            ..RawRule::default()
        };
        if let Some((a, len)) = self.prefix {
            match a {
                std::net::IpAddr::V4(v4) => {
                    if len > 32 {
                        return err(format!("prefix length {len} > 32 for {v4}"));
                    }
                    r.family = AF_INET;
                    r.daddr[..4].copy_from_slice(&v4.octets());
                }
                std::net::IpAddr::V6(v6) => {
                    if len > 128 {
                        return err(format!("prefix length {len} > 128 for {v6}"));
                    }
                    r.family = AF_INET6;
                    r.daddr = v6.octets();
                }
            }
            r.prefix_len = u32::from(len);
        }
        if let Some((lo, hi)) = self.ports {
            if lo > hi || hi == 0 {
                return err(format!("port range {lo}-{hi} is empty"));
            }
            r.port_lo = lo;
            r.port_hi = hi;
        }
        if let Some(c) = self.cgroup_id {
            if c == 0 {
                return err("cgroup id 0 is no cgroup");
            }
            r.cgroup_id = c;
        }
        if let Some(g) = self.group {
            if g == 0 {
                return err("group numbers start at 1 (no group: the address pair's)");
            }
            r.group = g;
        }
        Ok(r)
    }

    fn from_raw(r: &RawRule) -> Rule {
        let prefix = match r.family {
            AF_INET => {
                let o = [r.daddr[0], r.daddr[1], r.daddr[2], r.daddr[3]];
                Some((std::net::IpAddr::from(o), r.prefix_len as u8))
            }
            AF_INET6 => Some((std::net::IpAddr::from(r.daddr), r.prefix_len as u8)),
            _ => None,
        };
        Rule {
            prefix,
            ports: (r.port_lo != 0 || r.port_hi != 0).then_some((r.port_lo, r.port_hi)),
            cgroup_id: (r.cgroup_id != 0).then_some(r.cgroup_id),
            group: (r.group != 0).then_some(r.group),
            priority: f64::from(r.prio_units.max(1)) / PRIORITY_SCALE,
            uncoupled: r.uncoupled != 0,
        }
    }
}

fn raw_rules(m: &MapHandle) -> Result<Vec<RawRule>> {
    let mut out = Vec::new();
    for i in 0..MAX_RULES as u32 {
        let v = m
            .lookup(&i.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| bpf_err("reading a rule", e))?
            .unwrap_or_default();
        let r: RawRule = from_bytes(&v)?;
        if r.used == 0 {
            break;
        }
        out.push(r);
    }
    Ok(out)
}

/// An exclusive lock between this loader's writers (load, unload, rule changes) across
/// processes: flock on /run/lock/macroflow_ccc.lock (the temporary directory without /run/lock).
fn writer_lock() -> Result<std::fs::File> {
    let dir = Path::new("/run/lock");
    let path = if dir.is_dir() {
        dir.join("macroflow_ccc.lock")
    } else {
        std::env::temp_dir().join("macroflow_ccc.lock")
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error(format!("opening {}: {e}", path.display())))?;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor; blocks until the other writer is done.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return err(format!(
            "locking {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(f)
}

/// The rules map, its sequence count, and an exclusive lock between writers (flock on a file next
/// to the pins' directory: two `rule add` at once must not write the same slot).
struct RulesWriter {
    rules: MapHandle,
    seq: MapHandle,
    _lock: std::fs::File,
}

impl RulesWriter {
    fn open(pin_dir: &Path) -> Result<RulesWriter> {
        let rules = open_pinned(pin_dir, "rules", size_of::<RawRule>())?;
        let seq = open_pinned(pin_dir, "rules_seq", 8)?;
        let w = RulesWriter {
            rules,
            seq,
            _lock: writer_lock()?,
        };
        // A writer that died between its two steps left the count odd: make it even again.
        let n = w.count()?;
        if n % 2 == 1 {
            w.set(n + 1)?;
        }
        Ok(w)
    }

    fn count(&self) -> Result<u64> {
        let v = self
            .seq
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| bpf_err("reading the rules' sequence count", e))?
            .unwrap_or_else(|| vec![0; 8]);
        Ok(u64::from_ne_bytes(v[..8].try_into().unwrap()))
    }

    fn set(&self, n: u64) -> Result<()> {
        self.seq
            .update(&0u32.to_ne_bytes(), &n.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| bpf_err("writing the rules' sequence count", e))
    }

    /// Rewrites slots `from..` with `list[from..]` and clears the rest up to `old_len`, between
    /// two increments of the sequence count (odd meanwhile: connections starting then retry).
    fn write(&self, list: &[RawRule], from: usize, old_len: usize) -> Result<()> {
        let n = self.count()? | 1; // odd: being rewritten
        self.set(n)?;
        let mut r = Ok(());
        for i in from..list.len().max(old_len) {
            let v = list.get(i).copied().unwrap_or_default();
            r = self
                .rules
                .update(&(i as u32).to_ne_bytes(), as_bytes(&v), MapFlags::ANY)
                .map_err(|e| bpf_err("writing a rule", e));
            if r.is_err() {
                break;
            }
        }
        self.set(n + 1)?;
        r
    }
}

/// The rules, in the order they are tried.
pub fn rules(pin_dir: &Path) -> Result<Vec<Rule>> {
    let m = open_pinned(pin_dir, "rules", size_of::<RawRule>())?;
    Ok(raw_rules(&m)?.iter().map(Rule::from_raw).collect())
}

/// Appends a rule (tried after the existing ones); returns its index.
pub fn rule_add(pin_dir: &Path, rule: &Rule) -> Result<usize> {
    let raw = rule.to_raw()?;
    let w = RulesWriter::open(pin_dir)?;
    let mut list = raw_rules(&w.rules)?;
    let n = list.len();
    if n >= MAX_RULES {
        return err(format!("the rules map is full ({MAX_RULES} rules)"));
    }
    list.push(raw);
    w.write(&list, n, n)?;
    Ok(n)
}

/// Deletes rule `index`; the ones after it move up (connections starting meanwhile see the old
/// list or the new one: the sequence count).
pub fn rule_del(pin_dir: &Path, index: usize) -> Result<Rule> {
    let w = RulesWriter::open(pin_dir)?;
    let mut list = raw_rules(&w.rules)?;
    let old_len = list.len();
    if index >= old_len {
        return err(format!(
            "no rule {index} (there are {old_len}: 0..{old_len})"
        ));
    }
    let gone = list.remove(index);
    w.write(&list, index, old_len)?;
    Ok(Rule::from_raw(&gone))
}

// ---- A socket's own setting -------------------------------------------------------------------

/// A socket's own setting (`struct mf_sock_prio`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SocketSetting {
    pub priority: f64,
    /// Its group (read when the connection starts): None for the rules' or the address pair's.
    pub group: Option<u32>,
    /// Handover for a group this connection creates: None for the load-time setting.
    pub handover: Option<bool>,
}

impl SocketSetting {
    fn to_raw(self) -> Result<SockPrio> {
        Ok(SockPrio {
            prio_units: prio_units(self.priority)?,
            group: match self.group {
                Some(0) => return err("group numbers start at 1"),
                Some(g) => g,
                None => 0,
            },
            handover: match self.handover {
                None => 0,
                Some(true) => 1,
                Some(false) => 2,
            },
            _pad: 0,
        })
    }
}

/// Sets the priority (and, before connect, the group) of the caller's socket `fd`: written to
/// the socket's storage in the `sock_prio` map, which the program reads when the connection
/// starts and at each of its reports (a priority change applies from the next one). No
/// `bpf_setsockopt` and no privilege beyond access to the pinned map.
pub fn set_socket(pin_dir: &Path, fd: i32, setting: SocketSetting) -> Result<()> {
    let v = setting.to_raw()?;
    check_tcp(fd)?;
    let m = open_pinned(pin_dir, "sock_prio", size_of::<SockPrio>())?;
    set_socket_in(&m, fd, &v)
}

fn set_socket_in(m: &MapHandle, fd: i32, v: &SockPrio) -> Result<()> {
    m.update(&fd.to_ne_bytes(), as_bytes(v), MapFlags::ANY)
        .map_err(|e| bpf_err(&format!("setting the priority of socket fd {fd}"), e))
}

/// The `sock_prio` map by id, for a process that cannot see /sys/fs/bpf (`ip netns exec`
/// remounts /sys): the Linux engine's agents get the id from the orchestrator.
pub struct SocketMap(MapHandle);

impl SocketMap {
    /// The id of the loaded program's `sock_prio` map.
    pub fn id(pin_dir: &Path) -> Result<u32> {
        let m = open_pinned(pin_dir, "sock_prio", size_of::<SockPrio>())?;
        let info = m
            .info()
            .map_err(|e| bpf_err("reading the sock_prio map's id", e))?;
        Ok(info.info.id)
    }

    pub fn open(id: u32) -> Result<SocketMap> {
        let m = MapHandle::from_map_id(id)
            .map_err(|e| bpf_err(&format!("opening BPF map id {id}"), e))?;
        if m.value_size() as usize != size_of::<SockPrio>() {
            return err(format!(
                "BPF map id {id} is not macroflow_ccc's sock_prio map (value of {} bytes)",
                m.value_size()
            ));
        }
        Ok(SocketMap(m))
    }

    pub fn set(&self, fd: i32, setting: SocketSetting) -> Result<()> {
        let v = setting.to_raw()?;
        check_tcp(fd)?;
        set_socket_in(&self.0, fd, &v)
    }
}

/// A setting is for a TCP socket (the map would take any socket, and nothing would read it).
fn check_tcp(fd: i32) -> Result<()> {
    let mut proto: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int out-parameter with its length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            (&mut proto as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return err(format!(
            "fd {fd} is not a socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    if proto != libc::IPPROTO_TCP {
        return err(format!("fd {fd} is not a TCP socket (protocol {proto})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_c_headers() {
        // bpf/macroflow_ccc.h's sizes (the loader checks the maps' value sizes against them too).
        assert_eq!(size_of::<GroupKey>(), 48);
        assert_eq!(size_of::<Member>(), 80);
        assert_eq!(size_of::<Group>(), 88 + 64 * 80);
        assert_eq!(size_of::<GroupVal>(), 5280);
        assert_eq!(size_of::<RawRule>(), 56);
        assert_eq!(size_of::<SockPrio>(), 16);
    }

    #[test]
    fn rules_are_checked_before_anything_is_written() {
        let base = Rule {
            prefix: None,
            ports: None,
            cgroup_id: None,
            group: None,
            priority: 1.0,
            uncoupled: false,
        };
        assert!(base.to_raw().is_ok());
        let v4 = "10.0.0.0".parse().unwrap();
        for bad in [
            Rule {
                prefix: Some((v4, 33)),
                ..base.clone()
            },
            Rule {
                ports: Some((10, 9)),
                ..base.clone()
            },
            Rule {
                group: Some(0),
                ..base.clone()
            },
            Rule {
                priority: 0.0,
                ..base.clone()
            },
            Rule {
                priority: 257.0,
                ..base.clone()
            },
            Rule {
                priority: f64::NAN,
                ..base.clone()
            },
            Rule {
                cgroup_id: Some(0),
                ..base.clone()
            },
        ] {
            assert!(bad.to_raw().is_err(), "{bad:?}");
        }
        let r = Rule {
            prefix: Some((v4, 8)),
            ports: Some((5000, 5010)),
            cgroup_id: Some(42),
            group: Some(3),
            priority: 0.25,
            uncoupled: false,
        };
        assert_eq!(Rule::from_raw(&r.to_raw().unwrap()), r);
    }

    #[test]
    fn group_checks_find_a_wrong_count() {
        let mut v: GroupVal = from_bytes(&vec![0u8; size_of::<GroupVal>()]).unwrap();
        v.g.coco = u32::MAX;
        v.g.event = u32::MAX;
        assert!(check_group(&v.g).is_empty());
        v.g.n = 2;
        v.g.coco = 0;
        v.g.m[0] = Member {
            p: 65536,
            seq: 0,
            ..Member::default()
        };
        v.g.m[1] = Member {
            p: 65536,
            seq: 1,
            state: 1,
            ..Member::default()
        };
        v.g.sum_p = 131072;
        v.g.n_not_ss = 1;
        assert!(check_group(&v.g).is_empty(), "{:?}", check_group(&v.g));
        v.g.sum_p = 65536;
        v.g.n_not_ss = 0;
        assert_eq!(check_group(&v.g).len(), 2);
    }
}
