//! `macroflow tiu enable | disable | status | rule`: TiU on a running system. The programs and
//! maps are pinned under [`PIN_DIR`] (they outlive the command), `tiu_sockops` is attached to a
//! cgroup (its link pinned), and both tc programs to each named device (in its network namespace,
//! entered for the attach only) with the offloads a TiU device needs. The devices are recorded in
//! [`DEVICES_FILE`], with the settings they had before, so `disable` and `status` find them and
//! `disable` puts the settings back; the cgroups in [`CGROUPS_FILE`].

use crate::{ConnKey, ConnVal, Error, IdKey, Result, Rule, RuleKey, RuleVal, State, STAT_NAMES};
use libbpf_rs::MapCore;
use std::path::{Path, PathBuf};

pub const PIN_DIR: &str = "/sys/fs/bpf/macroflow_tiu";
/// macroflow_ccc's view of TiU's connections (crates/ccc-bpf pins it there): shared when present.
pub const CCC_TIU_CONNS_PIN: &str = "/sys/fs/bpf/macroflow_ccc/tiu_conns";
pub const DEVICES_FILE: &str = "/run/macroflow_tiu.devices";
/// The cgroups `tiu_sockops` is attached to: a line each, its link's pin name and the path.
pub const CGROUPS_FILE: &str = "/run/macroflow_tiu.cgroups";
/// The TiU UDP port when none is given: both ends must use the same.
pub const DEFAULT_PORT: u16 = 8899;

const MAPS: [&str; 5] = ["conns", "ids", "rules", "stats", "config"];
const PROGS: [&str; 4] = ["egress", "ingress", "listeners", "sockops_prog"];

fn err<T>(s: impl Into<String>) -> Result<T> {
    Err(Error(s.into()))
}

/// A device TiU runs on: its name and, if not this process's, its network namespace (a name
/// under /run/netns, as `ip netns` makes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub netns: Option<String>,
    pub dev: String,
}

/// The offload words `enable` changes, as `ethtool -K` names them, with the feature `ethtool -k`
/// shows for each.
const OFFLOADS: [(&str, &str); 4] = [
    ("tx", "tx-checksumming"),
    ("tso", "tcp-segmentation-offload"),
    ("gso", "generic-segmentation-offload"),
    ("gro", "generic-receive-offload"),
];

/// A device's settings before TiU changed them (`disable` puts them back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Before {
    /// (`ethtool -K` word, on) for each of [`OFFLOADS`].
    pub offloads: Vec<(String, bool)>,
    pub gso_max_segs: u32,
}

/// A device TiU runs on, as recorded: with its settings from before (None: recorded by an older
/// build, nothing to put back).
#[derive(Clone, Debug)]
struct Recorded {
    dev: Device,
    before: Option<Before>,
}

impl Recorded {
    fn line(&self) -> String {
        let mut l = format!(
            "{} {}",
            self.dev.netns.as_deref().unwrap_or("-"),
            self.dev.dev
        );
        if let Some(b) = &self.before {
            let o: Vec<String> = b
                .offloads
                .iter()
                .map(|(k, on)| format!("{k}={}", if *on { "on" } else { "off" }))
                .collect();
            l += &format!(" {} gso_max_segs={}", o.join(","), b.gso_max_segs);
        }
        l
    }

    fn parse(line: &str) -> Option<Recorded> {
        let mut f = line.split_whitespace();
        let (ns, dev) = (f.next()?, f.next()?);
        let before = match (f.next(), f.next()) {
            (Some(o), Some(g)) => Some(Before {
                offloads: o
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v == "on"))
                    .collect(),
                gso_max_segs: g.strip_prefix("gso_max_segs=")?.parse().ok()?,
            }),
            _ => None,
        };
        Some(Recorded {
            dev: Device {
                netns: (ns != "-").then(|| ns.to_string()),
                dev: dev.to_string(),
            },
            before,
        })
    }
}

/// `args` prefixed to run in `netns` (`ip netns exec`).
fn in_ns<'a>(netns: Option<&'a str>, args: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = match netns {
        Some(n) => vec!["ip", "netns", "exec", n],
        None => vec![],
    };
    v.extend_from_slice(args);
    v
}

/// What `dev` has now of the settings `enable` changes.
fn settings(d: &Device) -> Result<Before> {
    let ns = d.netns.as_deref();
    let k = output(&in_ns(ns, &["ethtool", "-k", &d.dev]))?;
    let mut offloads = Vec::new();
    for (word, feature) in OFFLOADS {
        let on = k
            .lines()
            .find_map(|l| l.trim().strip_prefix(feature)?.strip_prefix(':'))
            .map(|v| v.trim_start().starts_with("on"))
            .ok_or_else(|| Error(format!("ethtool -k {d}: no {feature}")))?;
        offloads.push((word.to_string(), on));
    }
    let link = output(&in_ns(ns, &["ip", "-d", "link", "show", "dev", &d.dev]))?;
    let mut words = link.split_whitespace();
    let gso_max_segs = words
        .by_ref()
        .find(|w| *w == "gso_max_segs")
        .and(words.next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error(format!("ip -d link show {d}: no gso_max_segs")))?;
    Ok(Before {
        offloads,
        gso_max_segs,
    })
}

/// Puts `b` back on `d`.
fn restore(d: &Device, b: &Before) -> Result<()> {
    let ns = d.netns.as_deref();
    let mut args = vec!["ethtool", "-K", d.dev.as_str()];
    for (k, on) in &b.offloads {
        args.push(k);
        args.push(if *on { "on" } else { "off" });
    }
    run(&in_ns(ns, &args))?;
    let segs = b.gso_max_segs.to_string();
    run(&in_ns(
        ns,
        &["ip", "link", "set", "dev", &d.dev, "gso_max_segs", &segs],
    ))
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.netns {
            Some(n) => write!(f, "{} (netns {n})", self.dev),
            None => f.write_str(&self.dev),
        }
    }
}

/// Runs `f` in a thread that has entered `netns` (the caller's own namespace is never left).
pub fn in_netns<R: Send>(netns: Option<&str>, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(n) = netns {
                use std::os::fd::AsRawFd;
                let p = format!("/run/netns/{n}");
                let fd = std::fs::File::open(&p)
                    .map_err(|e| Error(format!("network namespace {n}: {p}: {e}")))?;
                // SAFETY: a namespace file descriptor; only this thread changes namespace.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return err(format!(
                        "entering network namespace {n}: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| err("the namespace thread panicked"))
    })
}

fn ifindex(dev: &str) -> Result<i32> {
    let c = std::ffi::CString::new(dev).map_err(|_| Error(format!("bad device name {dev:?}")))?;
    // SAFETY: a C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return err(format!("no device {dev}"));
    }
    Ok(i as i32)
}

fn output(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| Error(format!("{}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run(args: &[&str]) -> Result<()> {
    output(args).map(|_| ())
}

/// Writes one of the state files in /run, a line each (no lines: the file goes).
fn write_lines(file: &str, lines: impl Iterator<Item = String>) -> Result<()> {
    let text: String = lines.map(|l| l + "\n").collect();
    if text.is_empty() {
        let _ = std::fs::remove_file(file);
        return Ok(());
    }
    std::fs::write(file, text).map_err(|e| Error(format!("{file}: {e}")))
}

/// One of the state files' lines (none if it is missing).
fn read_lines(file: &str) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_records(ds: &[Recorded]) -> Result<()> {
    write_lines(DEVICES_FILE, ds.iter().map(Recorded::line))
}

fn records() -> Vec<Recorded> {
    read_lines(DEVICES_FILE)
        .iter()
        .filter_map(|l| Recorded::parse(l))
        .collect()
}

fn devices() -> Vec<Device> {
    records().into_iter().map(|r| r.dev).collect()
}

/// The cgroups `tiu_sockops` is attached to: (its link's pin name, the path).
fn cgroups() -> Vec<(String, PathBuf)> {
    read_lines(CGROUPS_FILE)
        .iter()
        .filter_map(|l| {
            let (pin, path) = l.split_once(' ')?;
            Some((pin.to_string(), PathBuf::from(path)))
        })
        .collect()
}

/// The paths of [`cgroups`].
fn cgroup_paths() -> Vec<PathBuf> {
    cgroups().into_iter().map(|(_, c)| c).collect()
}

fn write_cgroups(cs: &[(String, PathBuf)]) -> Result<()> {
    write_lines(
        CGROUPS_FILE,
        cs.iter().map(|(p, c)| format!("{p} {}", c.display())),
    )
}

/// The cgroup v2 hierarchy's root (the first cgroup2 mount: /sys/fs/cgroup on a unified
/// system, /sys/fs/cgroup/unified on a hybrid one): every process's sockets are under it.
pub fn default_cgroup() -> Result<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| Error(format!("/proc/self/mounts: {e}")))?;
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
        })
        .ok_or_else(|| Error("no cgroup v2 hierarchy is mounted: mount one (mount -t cgroup2 none DIR) and give --cgroup DIR".into()))
}

/// Whether TiU is enabled (its programs pinned).
pub fn is_enabled(pin_dir: &Path) -> bool {
    pin_dir.join("sockops").exists()
}

/// What `enable` does.
#[derive(Clone, Debug)]
pub struct EnableOptions {
    pub devices: Vec<Device>,
    pub port: u16,
    /// The cgroup (v2 directory) whose sockets' SYNs and SYN-ACKs get the Setup option. None:
    /// the cgroup v2 root when TiU is loaded now, else the cgroups it serves already.
    pub cgroup: Option<PathBuf>,
    pub pin_dir: PathBuf,
}

/// Loads and pins the programs (unless already), attaches `tiu_sockops` to the cgroup and both tc
/// programs to each device (offloads set for TiU). Every device is checked before anything
/// changes. Returns the devices TiU now runs on.
pub fn enable(o: &EnableOptions) -> Result<Vec<Device>> {
    if o.port == 0 {
        return err("the TiU port must not be 0");
    }
    if o.devices.is_empty() {
        return err("name at least one device (--dev)");
    }
    for d in &o.devices {
        in_netns(d.netns.as_deref(), || ifindex(&d.dev).map(|_| ()))?;
    }
    // A device named twice is one device.
    let mut devs: Vec<Device> = Vec::new();
    for d in &o.devices {
        if !devs.contains(d) {
            devs.push(d.clone());
        }
    }
    let enabled = is_enabled(&o.pin_dir);
    let given = match (&o.cgroup, enabled) {
        (Some(c), _) => Some(c.clone()),
        (None, false) => Some(default_cgroup()?),
        (None, true) => None,
    };
    if let Some(given) = &given {
        const CGROUP2_SUPER_MAGIC: i64 = 0x63677270;
        let c = std::ffi::CString::new(given.as_os_str().as_encoded_bytes())
            .map_err(|_| Error("bad cgroup path".into()))?;
        // SAFETY: a zeroed statfs is a valid out-parameter; the path is a C string.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0
            || st.f_type as i64 != CGROUP2_SUPER_MAGIC
        {
            return err(format!("{} is not a cgroup v2 directory", given.display()));
        }
    }
    let cgroup = match &given {
        Some(g) => Some(
            g.canonicalize()
                .map_err(|e| Error(format!("{}: {e}", g.display())))?,
        ),
        None => None,
    };
    let mut known = records();
    // The settings of each device TiU is new on, read before anything changes (a second enable
    // must not record TiU's own settings as the device's).
    let mut before = Vec::new();
    for d in &devs {
        if !known.iter().any(|r| r.dev == *d) {
            before.push((d.clone(), settings(d)?));
        }
    }
    match (enabled, &cgroup) {
        (true, c) => {
            let port = configured_port(&o.pin_dir)?;
            if port != o.port {
                return err(format!(
                    "TiU is enabled with port {port}, not {}: `macroflow tiu disable` first",
                    o.port
                ));
            }
            if let Some(c) = c {
                attach_cgroup(&o.pin_dir, c)?;
            }
        }
        (false, Some(c)) => load_and_pin(o, c)?,
        (false, None) => unreachable!("a cgroup is chosen when TiU is not enabled"),
    }
    let (eg, ing) = (
        libbpf_rs::Program::fd_from_pinned_path(o.pin_dir.join("egress")),
        libbpf_rs::Program::fd_from_pinned_path(o.pin_dir.join("ingress")),
    );
    let (eg, ing) = (
        eg.map_err(|e| Error(format!("the pinned egress program: {e}")))?,
        ing.map_err(|e| Error(format!("the pinned ingress program: {e}")))?,
    );
    for d in &devs {
        let ns = d.netns.as_deref();
        // Recorded first: if anything below fails, `disable` still finds it and puts its
        // settings back.
        if let Some(i) = before.iter().position(|(b, _)| b == d) {
            known.push(Recorded {
                dev: d.clone(),
                before: Some(before.swap_remove(i).1),
            });
            write_records(&known)?;
        }
        // The offloads a TiU device needs (crates/tiu-bpf/README.md says why).
        let mut ethtool = vec!["ethtool", "-K", &d.dev];
        for (word, _) in OFFLOADS {
            ethtool.extend([word, "off"]);
        }
        run(&in_ns(ns, &ethtool))?;
        run(&in_ns(
            ns,
            &["ip", "link", "set", "dev", &d.dev, "gso_max_segs", "1"],
        ))?;
        in_netns(ns, || {
            use std::os::fd::AsFd;
            let idx = ifindex(&d.dev)?;
            for (fd, point) in [(&eg, libbpf_rs::TC_EGRESS), (&ing, libbpf_rs::TC_INGRESS)] {
                let mut b = libbpf_rs::TcHookBuilder::new(fd.as_fd());
                b.ifindex(idx).replace(true).handle(1).priority(1);
                let mut h = b.hook(point);
                // The clsact qdisc once (the egress hook makes it; both hooks share it).
                if point == libbpf_rs::TC_EGRESS {
                    h.create()
                        .map_err(|e| Error(format!("clsact on {d}: {e}")))?;
                }
                h.attach()
                    .map_err(|e| Error(format!("attaching to {d}: {e}")))?;
            }
            Ok(())
        })?;
    }
    // Listeners opened before TiU was enabled: their SYN-ACKs get the Setup option from now on.
    let it = libbpf_rs::Program::fd_from_pinned_path(o.pin_dir.join("listeners"))
        .map_err(|e| Error(format!("the pinned listener iterator: {e}")))?;
    let mut namespaces: Vec<Option<&str>> = devs.iter().map(|d| d.netns.as_deref()).collect();
    namespaces.sort();
    namespaces.dedup();
    for ns in namespaces {
        use std::os::fd::AsFd;
        crate::upgrade_listeners(it.as_fd(), ns)?;
    }
    Ok(known.into_iter().map(|r| r.dev).collect())
}

/// Attaches the pinned `tiu_sockops` to one more cgroup (nothing if it serves that one already),
/// its link pinned as `sockops_N`. A cgroup inside or around one it serves is refused: a socket
/// in both would run the program twice per callback (two Setup options reserved).
fn attach_cgroup(pin_dir: &Path, cgroup: &Path) -> Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut cs = cgroups();
    if cs.iter().any(|(_, c)| c == cgroup) {
        return Ok(());
    }
    if let Some((_, c)) = cs
        .iter()
        .find(|(_, c)| cgroup.starts_with(c) || c.starts_with(cgroup))
    {
        return err(format!(
            "{} is inside or around {}, which TiU serves already: its sockets would get the \
             Setup option twice; `macroflow tiu disable` first to change the cgroups",
            cgroup.display(),
            c.display()
        ));
    }
    let prog =
        libbpf_rs::Program::fd_from_pinned_path(pin_dir.join("sockops_prog")).map_err(|e| {
            Error(format!(
            "the pinned tiu_sockops (TiU enabled by an older build? disable and enable again): {e}"
        ))
        })?;
    let dir = std::fs::File::open(cgroup)
        .map_err(|e| Error(format!("opening the cgroup {}: {e}", cgroup.display())))?;
    // SAFETY: a program and a cgroup descriptor; no options.
    let link = unsafe {
        libbpf_sys::bpf_link_create(
            prog.as_raw_fd(),
            dir.as_raw_fd(),
            libbpf_sys::BPF_CGROUP_SOCK_OPS,
            std::ptr::null(),
        )
    };
    if link < 0 {
        return err(format!(
            "attaching tiu_sockops to {}: {}",
            cgroup.display(),
            std::io::Error::from_raw_os_error(-link)
        ));
    }
    // SAFETY: a new descriptor we own (the link goes when it is closed unless pinned).
    let link = unsafe { OwnedFd::from_raw_fd(link) };
    let name = (1..)
        .map(|n| format!("sockops_{n}"))
        .find(|n| !pin_dir.join(n).exists() && !cs.iter().any(|(p, _)| p == n))
        .expect("a free name");
    let path = std::ffi::CString::new(pin_dir.join(&name).as_os_str().as_encoded_bytes())
        .map_err(|_| Error("bad pin path".into()))?;
    // SAFETY: a link descriptor and a C string.
    let rc = unsafe { libbpf_sys::bpf_obj_pin(link.as_raw_fd(), path.as_ptr()) };
    if rc < 0 {
        return err(format!(
            "pinning {}: {}",
            pin_dir.join(&name).display(),
            std::io::Error::from_raw_os_error(-rc)
        ));
    }
    cs.push((name, cgroup.to_path_buf()));
    write_cgroups(&cs)
}

#[cfg(tiu_bpf_missing)]
fn load_and_pin(_o: &EnableOptions, _cgroup: &Path) -> Result<()> {
    err(format!(
        "TiU is not in this build: {}",
        env!("TIU_BPF_MISSING")
    ))
}

#[cfg(not(tiu_bpf_missing))]
fn load_and_pin(o: &EnableOptions, cgroup: &Path) -> Result<()> {
    bpf_rt::ensure_bpffs()?;
    let mut object = std::mem::MaybeUninit::uninit();
    // macroflow_ccc loaded first: TiU's connections go into the map it reads (its grouping
    // follows TiU), else it reuses this one when it loads (crates/ccc-bpf's TIU_CONNS_PIN).
    let ccc = std::path::Path::new(CCC_TIU_CONNS_PIN);
    let mut sk = crate::load(&mut object, o.port, ccc.exists().then_some(ccc))?;
    let cg = std::fs::File::open(cgroup)
        .map_err(|e| Error(format!("opening the cgroup {}: {e}", cgroup.display())))?;
    let pin = |sk: &mut crate::skel::TiuTcSkel<'_>| -> Result<()> {
        use std::os::fd::AsRawFd;
        let d = &o.pin_dir;
        std::fs::create_dir_all(d).map_err(|e| Error(format!("{}: {e}", d.display())))?;
        let p = |e: libbpf_rs::Error| Error(format!("pinning under {}: {e}", d.display()));
        sk.maps.tiu_conns.pin(d.join("conns")).map_err(p)?;
        sk.maps.ids.pin(d.join("ids")).map_err(p)?;
        sk.maps.rules.pin(d.join("rules")).map_err(p)?;
        sk.maps.stats.pin(d.join("stats")).map_err(p)?;
        sk.maps.rodata.pin(d.join("config")).map_err(p)?;
        sk.progs.tiu_egress.pin(d.join("egress")).map_err(p)?;
        sk.progs.tiu_ingress.pin(d.join("ingress")).map_err(p)?;
        sk.progs.tiu_listeners.pin(d.join("listeners")).map_err(p)?;
        // For `enable` with another cgroup later (attach_cgroup).
        sk.progs
            .tiu_sockops
            .pin(d.join("sockops_prog"))
            .map_err(p)?;
        let mut link = sk
            .progs
            .tiu_sockops
            .attach_cgroup(cg.as_raw_fd())
            .map_err(|e| {
                Error(format!(
                    "attaching tiu_sockops to {}: {e}",
                    cgroup.display()
                ))
            })?;
        link.pin(d.join("sockops")).map_err(p)?;
        write_cgroups(&[("sockops".to_string(), cgroup.to_path_buf())])
    };
    if let Err(e) = pin(&mut sk) {
        remove_pins(&o.pin_dir);
        return Err(e);
    }
    Ok(())
}

fn remove_pins(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    // The cgroup links: `sockops` and `sockops_N` (attach_cgroup).
    let links: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n == "sockops" || (n.starts_with("sockops_") && n != "sockops_prog"))
        .collect();
    for f in links.iter().map(String::as_str).chain(PROGS).chain(MAPS) {
        if std::fs::remove_file(dir.join(f)).is_ok() {
            removed.push(f.to_owned());
        }
    }
    let _ = std::fs::remove_dir(dir);
    let _ = write_cgroups(&[]);
    removed
}

/// What `disable` found and did.
#[derive(Clone, Debug)]
pub struct Disabled {
    pub devices: Vec<Device>,
    /// Connections that were riding TiU: their peers may still send TiU, which nothing here
    /// decapsulates any more (they stall unless the peer falls back).
    pub connections: usize,
    /// Recorded devices that were gone (with their namespace, or on their own): nothing to
    /// detach.
    pub gone: Vec<Device>,
    /// Devices whose offloads and gso_max_segs are as they were before `enable`.
    pub restored: Vec<Device>,
    /// Devices whose settings could not be put back, and why (TiU is off them all the same).
    pub not_restored: Vec<String>,
    /// The rules that were in force: gone with the pins (`enable` starts with none).
    pub rules: Vec<Rule>,
    /// The cgroups `tiu_sockops` was detached from.
    pub cgroups: Vec<PathBuf>,
}

/// Detaches both tc programs from every recorded device and `tiu_sockops` from its cgroup, and
/// removes the pins.
pub fn disable(pin_dir: &Path) -> Result<Disabled> {
    if !is_enabled(pin_dir) {
        return err(format!(
            "TiU is not enabled (nothing pinned at {})",
            pin_dir.display()
        ));
    }
    let conns = map(pin_dir, "conns")?;
    let connections = conns.keys().count();
    let rules = rules(pin_dir)?;
    let recs = records();
    let mut not_detached = Vec::new();
    let mut left = Vec::new();
    let mut gone = Vec::new();
    let (mut restored, mut not_restored) = (Vec::new(), Vec::new());
    for rec in &recs {
        let d = &rec.dev;
        let r = in_netns(d.netns.as_deref(), || {
            use std::os::fd::AsFd;
            let idx = ifindex(&d.dev)?;
            let eg = libbpf_rs::Program::fd_from_pinned_path(pin_dir.join("egress"))
                .map_err(|e| Error(format!("{e}")))?;
            // Both hooks, each on its own: one that is gone already is no reason to keep the
            // other.
            let mut errors = Vec::new();
            for (point, name) in [
                (libbpf_rs::TC_EGRESS, "egress"),
                (libbpf_rs::TC_INGRESS, "ingress"),
            ] {
                let mut b = libbpf_rs::TcHookBuilder::new(eg.as_fd());
                b.ifindex(idx).handle(1).priority(1);
                match b.hook(point).detach() {
                    // Not attached (any more): the filter (ENOENT) or the clsact qdisc
                    // (EINVAL) is gone already, say by an earlier, partial disable.
                    Err(e)
                        if matches!(
                            e.kind(),
                            libbpf_rs::ErrorKind::NotFound | libbpf_rs::ErrorKind::InvalidInput
                        ) => {}
                    Err(e) => errors.push(format!("{name}: {e}")),
                    Ok(()) => {}
                }
            }
            if errors.is_empty() {
                Ok(())
            } else {
                err(errors.join("; "))
            }
        });
        match r {
            // A device (or its namespace) that is gone took its tc programs with it.
            Err(e) if e.0.starts_with("no device") || e.0.starts_with("network namespace") => {
                gone.push(d.clone());
            }
            Err(e) => {
                not_detached.push(format!("{d}: {e}"));
                left.push(rec.clone());
            }
            Ok(()) => match &rec.before {
                Some(b) => match restore(d, b) {
                    Ok(()) => restored.push(d.clone()),
                    Err(e) => not_restored.push(format!("{d}: {e}")),
                },
                None => not_restored.push(format!(
                    "{d}: its settings from before were not recorded (enabled by an older build)"
                )),
            },
        }
    }
    write_records(&left)?;
    if !left.is_empty() {
        return err(format!(
            "could not take TiU off {}; the programs stay pinned at {} and the devices recorded: \
             run `macroflow tiu disable` again once that is fixed",
            not_detached.join(", "),
            pin_dir.display()
        ));
    }
    let mut cgroups = cgroup_paths();
    if cgroups.is_empty() {
        // Enabled by a build that did not record it: detached all the same (its pinned link).
        cgroups.push(PathBuf::from("its cgroup (not recorded)"));
    }
    remove_pins(pin_dir);
    // macroflow_ccc may hold the map (shared, `tiu_conns`) after the pins go: nothing here would
    // remove an entry any more, and its grouping would take them for connections TiU carries.
    crate::empty(&conns);
    Ok(Disabled {
        devices: recs.into_iter().map(|r| r.dev).collect(),
        connections,
        gone,
        restored,
        not_restored,
        rules,
        cgroups,
    })
}

fn map(pin_dir: &Path, name: &str) -> Result<libbpf_rs::MapHandle> {
    libbpf_rs::MapHandle::from_pinned_path(pin_dir.join(name)).map_err(|e| {
        Error(format!(
            "TiU's {name} map ({}): {e}; is TiU enabled?",
            pin_dir.display()
        ))
    })
}

fn read<T: Copy>(b: &[u8]) -> T {
    assert!(b.len() >= std::mem::size_of::<T>());
    // SAFETY: T is one of this crate's #[repr(C)] structs of plain bytes, read unaligned.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

fn configured_port(pin_dir: &Path) -> Result<u16> {
    let v = map(pin_dir, "config")?
        .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .map_err(|e| Error(format!("config map: {e}")))?
        .ok_or_else(|| Error("config map: empty".into()))?;
    Ok(u16::from_be_bytes([v[0], v[1]]))
}

/// The cookies of this namespace (named None) and of the recorded devices' namespaces (a
/// namespace that is gone is left out: its entries show by cookie).
fn netns_names(devs: &[Device]) -> Vec<(u64, Option<String>)> {
    let mut out = Vec::new();
    if let Ok(c) = crate::netns_cookie() {
        out.push((c, None));
    }
    for d in devs {
        if let Some(n) = &d.netns {
            if let Ok(c) = in_netns(Some(n), crate::netns_cookie) {
                if !out.iter().any(|(k, _)| *k == c) {
                    out.push((c, Some(n.clone())));
                }
            }
        }
    }
    out
}

fn ip(family: u8, a: &[u8; 16]) -> std::net::IpAddr {
    if family == 4 {
        std::net::IpAddr::from([a[0], a[1], a[2], a[3]])
    } else {
        std::net::IpAddr::from(*a)
    }
}

/// One connection riding TiU (or fallen back), as this host sends.
#[derive(Clone, Debug)]
pub struct ConnView {
    pub local_port: u16,
    pub peer_port: u16,
    /// 0-31, or 255 (refused: plain TCP).
    pub conn_id: u8,
    pub state: &'static str,
}

/// A host pair's TiU port pair and its connections.
#[derive(Clone, Debug)]
pub struct PairView {
    /// Its network namespace: None for the caller's own, else the name under /run/netns of a
    /// device TiU runs on, else "cookie N".
    pub netns: Option<String>,
    pub local: std::net::IpAddr,
    pub peer: std::net::IpAddr,
    pub udp_ports: (u16, u16),
    pub conns: Vec<ConnView>,
    /// IDs held for the peer's segments on this port pair (learned or allocated).
    pub ids_held: usize,
}

#[derive(Clone, Debug)]
pub struct Status {
    pub port: u16,
    pub devices: Vec<Device>,
    /// The cgroups whose sockets' handshakes carry the Setup option.
    pub cgroups: Vec<PathBuf>,
    pub rules: Vec<Rule>,
    pub pairs: Vec<PairView>,
    pub counters: Vec<(&'static str, u64)>,
}

pub fn status(pin_dir: &Path) -> Result<Status> {
    let port = configured_port(pin_dir)?;
    let conns = map(pin_dir, "conns")?;
    let ids = map(pin_dir, "ids")?;
    if conns.key_size() as usize != std::mem::size_of::<ConnKey>()
        || ids.key_size() as usize != std::mem::size_of::<IdKey>()
    {
        return err(format!(
            "the maps at {} are another build's (another key layout): `macroflow tiu disable` \
             and enable it again",
            pin_dir.display()
        ));
    }
    let mut pairs: Vec<PairView> = Vec::new();
    let devs = devices();
    let names = netns_names(&devs);
    let ns_name = |cookie: u64| -> Option<String> {
        match names.iter().find(|(c, _)| *c == cookie) {
            Some((_, n)) => n.clone(),
            None => Some(format!("cookie {cookie}")),
        }
    };
    for k in conns.keys() {
        let Ok(Some(v)) = conns.lookup(&k, libbpf_rs::MapFlags::ANY) else {
            continue;
        };
        let (k, v): (ConnKey, ConnVal) = (read(&k), read(&v));
        let (local, peer) = (ip(k.family, &k.saddr), ip(k.family, &k.daddr));
        let netns = ns_name(k.netns);
        let udp = (
            u16::from_be_bytes(v.udp_sport),
            u16::from_be_bytes(v.udp_dport),
        );
        let c = ConnView {
            local_port: u16::from_be_bytes(k.sport),
            peer_port: u16::from_be_bytes(k.dport),
            conn_id: v.conn_id,
            state: State::name(v.state),
        };
        match pairs
            .iter_mut()
            .find(|p| p.netns == netns && p.local == local && p.peer == peer && p.udp_ports == udp)
        {
            Some(p) => p.conns.push(c),
            None => pairs.push(PairView {
                netns,
                local,
                peer,
                udp_ports: udp,
                conns: vec![c],
                ids_held: 0,
            }),
        }
    }
    for k in ids.keys() {
        // Closed IDs (lingering for late segments) are not held.
        match ids.lookup(&k, libbpf_rs::MapFlags::ANY) {
            Ok(Some(v)) if read::<crate::IdVal>(&v).closed_s == 0 => {}
            _ => continue,
        }
        let k: IdKey = read(&k);
        let netns = ns_name(k.netns);
        let (peer, local) = (ip(k.family, &k.saddr), ip(k.family, &k.daddr));
        let udp = (
            u16::from_be_bytes(k.udp_dport),
            u16::from_be_bytes(k.udp_sport),
        );
        if let Some(p) = pairs
            .iter_mut()
            .find(|p| p.netns == netns && p.local == local && p.peer == peer && p.udp_ports == udp)
        {
            p.ids_held += 1;
        }
    }
    for p in &mut pairs {
        p.conns.sort_by_key(|c| (c.conn_id, c.local_port));
    }
    pairs.sort_by(|a, b| (&a.netns, a.local, a.peer).cmp(&(&b.netns, b.local, b.peer)));
    let stats = map(pin_dir, "stats")?;
    let mut counters = Vec::new();
    for (i, name) in STAT_NAMES.iter().enumerate() {
        let per_cpu = stats
            .lookup_percpu(&(i as u32).to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error(format!("stats map: {e}")))?
            .unwrap_or_default();
        counters.push((
            *name,
            per_cpu
                .iter()
                .map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap()))
                .sum(),
        ));
    }
    Ok(Status {
        port,
        devices: devs,
        cgroups: cgroup_paths(),
        rules: rules(pin_dir)?,
        pairs,
        counters,
    })
}

pub fn rules(pin_dir: &Path) -> Result<Vec<Rule>> {
    let m = map(pin_dir, "rules")?;
    let mut out = Vec::new();
    for k in m.keys() {
        let Ok(Some(v)) = m.lookup(&k, libbpf_rs::MapFlags::ANY) else {
            continue;
        };
        let (k, v): (RuleKey, RuleVal) = (read(&k), read(&v));
        let mut a = [0u8; 16];
        a.copy_from_slice(&k.data[1..17]);
        out.push(Rule {
            addr: ip(k.data[0], &a),
            prefix_len: (k.prefixlen - 8) as u8,
            ports: (v.port_lo != 0 || v.port_hi != 0).then_some((v.port_lo, v.port_hi)),
            mark: v.mark,
            tiu: v.tiu != 0,
        });
    }
    out.sort_by_key(|r| (r.addr, r.prefix_len));
    Ok(out)
}

/// Adds a rule, or replaces the one for the same prefix.
pub fn rule_add(pin_dir: &Path, r: &Rule) -> Result<()> {
    let (k, v) = r.to_entry()?;
    map(pin_dir, "rules")?
        .update(
            crate::bytes_of(&k),
            crate::bytes_of(&v),
            libbpf_rs::MapFlags::ANY,
        )
        .map_err(|e| Error(format!("rules map: {e}")))
}

/// Deletes the rule for a prefix (an error if there is none).
pub fn rule_del(pin_dir: &Path, addr: std::net::IpAddr, prefix_len: u8) -> Result<()> {
    let r = Rule {
        addr,
        prefix_len,
        ports: None,
        mark: 0,
        tiu: true,
    };
    let (k, _) = r.to_entry()?;
    map(pin_dir, "rules")?
        .delete(crate::bytes_of(&k))
        .map_err(|_| Error(format!("no rule for {addr}/{prefix_len}")))
}

/// Parses `ADDR/LEN` (or a bare address: the host).
pub fn parse_prefix(s: &str) -> Result<(std::net::IpAddr, u8)> {
    let (a, l) = s.split_once('/').unwrap_or((s, ""));
    let addr: std::net::IpAddr = a
        .parse()
        .map_err(|_| Error(format!("not an address: {a:?}")))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = if l.is_empty() && !s.contains('/') {
        max
    } else {
        l.parse::<u8>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| Error(format!("bad prefix length {l:?} for {a}")))?
    };
    Ok((addr, len))
}
