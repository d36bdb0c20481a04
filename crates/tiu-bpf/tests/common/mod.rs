//! What the namespace tests (wire.rs, fallback.rs) share: running commands, a bpffs and a
//! cgroup2 hierarchy of the test's own, TiU devices, and cleaning up.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why this test cannot run here (printed as SKIP), or `None`.
pub fn skip_reason(tools: &[&str]) -> Option<String> {
    if let Some(why) = tiu_bpf::missing() {
        return Some(format!("tiu_tc is not in this build: {why}"));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "not root: namespaces and tc programs need CAP_SYS_ADMIN and CAP_NET_ADMIN".into(),
        );
    }
    for t in tools {
        if sh(&["sh", "-c", &format!("command -v {t}")]).is_err() {
            return Some(format!("{t} is not installed (make deps installs it)"));
        }
    }
    None
}

/// Namespaces, a bpffs and a cgroup2 mount of the test's own; removed on drop.
pub struct Bed {
    pub netns: Vec<String>,
    /// A bpffs outside /sys: `ip netns exec` and `tc -n` remount /sys, which hides /sys/fs/bpf
    /// from the tc that attaches the pins.
    pub pins: PathBuf,
    /// A cgroup2 hierarchy mounted for the test; the sockets live in its `t`.
    pub cgroup: PathBuf,
}

impl Bed {
    pub fn new(tag: &str) -> Bed {
        let id = std::process::id();
        Bed {
            netns: Vec::new(),
            pins: PathBuf::from(format!("/run/tiu-{tag}-pins-{id}")),
            cgroup: PathBuf::from(format!("/run/tiu-{tag}-cg-{id}")),
        }
    }

    /// Mounts the bpffs (pinning both tc programs in it) and the cgroup2 hierarchy, and attaches
    /// `tiu_sockops` to the cgroup `t` the client and server run in.
    #[cfg(not(tiu_bpf_missing))]
    pub fn mount(&self, tc: &tiu_bpf::Loaded<'_>) -> libbpf_rs::Link {
        std::fs::create_dir_all(&self.pins).unwrap();
        sh(&["mount", "-t", "bpf", "bpf", self.pins.to_str().unwrap()]).unwrap();
        tc.pin_programs(&self.pins).unwrap();
        std::fs::create_dir_all(&self.cgroup).unwrap();
        sh(&[
            "mount",
            "-t",
            "cgroup2",
            "none",
            self.cgroup.to_str().unwrap(),
        ])
        .unwrap();
        std::fs::create_dir_all(self.cgroup.join("t")).unwrap();
        tc.attach_sockops(&self.cgroup.join("t")).unwrap()
    }

    pub fn add_netns(&mut self, name: &str) {
        sh(&["ip", "netns", "add", name]).unwrap();
        self.netns.push(name.to_string());
        sh(&["ip", "-n", name, "link", "set", "lo", "up"]).unwrap();
    }

    /// A command run in the test's cgroup (so tiu_sockops sees its sockets).
    pub fn in_cgroup(&self, args: &[&str]) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(args[0]);
        c.args(&args[1..]);
        let procs = self.cgroup.join("t").join("cgroup.procs");
        // SAFETY: only a write of the child's own pid before exec.
        unsafe {
            c.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
        }
        c
    }

    /// Makes `dev` in `ns` a TiU device: transmit checksumming off (a veth peer would otherwise
    /// get datagrams whose checksum is never finished), receive checksumming off (so the stack
    /// checks every checksum), gso_max_segs 1 (TCP builds GSO super-segments regardless), GRO
    /// off; clsact with both pinned programs.
    pub fn tiu_dev(&self, ns: &str, dev: &str) {
        let (eg, ing) = (self.pins.join("egress"), self.pins.join("ingress"));
        let (eg, ing) = (eg.to_str().unwrap(), ing.to_str().unwrap());
        for cmd in [
            vec![
                "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso",
                "off", "gso", "off", "gro", "off",
            ],
            vec!["ip", "-n", ns, "link", "set", dev, "gso_max_segs", "1"],
            vec!["tc", "-n", ns, "qdisc", "add", "dev", dev, "clsact"],
        ] {
            sh(&cmd).unwrap();
        }
        self.attach(ns, dev, eg, ing);
    }

    pub fn attach(&self, ns: &str, dev: &str, eg: &str, ing: &str) {
        for (point, prog) in [("egress", eg), ("ingress", ing)] {
            sh(&[
                "tc",
                "-n",
                ns,
                "filter",
                "add",
                "dev",
                dev,
                point,
                "bpf",
                "da",
                "object-pinned",
                prog,
            ])
            .unwrap();
        }
    }

    /// Takes both programs off `dev` (a host without TiU).
    pub fn detach(&self, ns: &str, dev: &str) {
        sh(&["tc", "-n", ns, "filter", "del", "dev", dev, "egress"]).unwrap();
        sh(&["tc", "-n", ns, "filter", "del", "dev", dev, "ingress"]).unwrap();
    }

    /// Attaches both programs to `dev` again.
    pub fn reattach(&self, ns: &str, dev: &str) {
        let (eg, ing) = (self.pins.join("egress"), self.pins.join("ingress"));
        self.attach(ns, dev, eg.to_str().unwrap(), ing.to_str().unwrap());
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for n in &self.netns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
        let _ = Command::new("umount").arg(&self.pins).status();
        let _ = std::fs::remove_dir(&self.pins);
        let _ = std::fs::remove_dir(self.cgroup.join("t"));
        let _ = Command::new("umount").arg(&self.cgroup).status();
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}

/// `Tcp: ... InCsumErrors` and `Udp: ... InCsumErrors` of a namespace (/proc/net/snmp).
pub fn csum_errors(ns: &str) -> (u64, u64) {
    let snmp = sh(&["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"]).unwrap();
    let field = |proto: &str| -> u64 {
        let lines: Vec<&str> = snmp.lines().filter(|l| l.starts_with(proto)).collect();
        let (names, values) = (lines[0].split_whitespace(), lines[1].split_whitespace());
        names
            .zip(values)
            .find(|(n, _)| *n == "InCsumErrors")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    (field("Tcp:"), field("Udp:"))
}

/// An address as the maps hold it (IPv4 in the first four bytes).
pub fn addr(s: &str) -> [u8; 16] {
    let mut o = [0u8; 16];
    match s.parse::<std::net::IpAddr>().unwrap() {
        std::net::IpAddr::V4(v) => o[..4].copy_from_slice(&v.octets()),
        std::net::IpAddr::V6(v) => o.copy_from_slice(&v.octets()),
    }
    o
}

/// Counter differences, after minus before.
pub fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(x, y)| x - y).collect()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
