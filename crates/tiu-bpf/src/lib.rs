//! TiU on the tc hooks (issue 17): loads `bpf/tiu_tc.bpf.c` (`tiu_egress`, `tiu_ingress`), fills
//! its maps (`conns`: the TCP connections that ride TiU, by four-tuple; `ids`: a data header's
//! Connection ID on a port pair from a peer, to the TCP ports) and runs the programs on frames
//! with `BPF_PROG_TEST_RUN`, which is how `tests/vectors.rs` holds them to `crates/tiu`.
//!
//! [`admin`] is `macroflow tiu enable | disable | status | rule` (pinned programs and maps, tc
//! attached to devices).

pub mod admin;

#[cfg(not(tiu_bpf_missing))]
mod skel {
    #![allow(
        clippy::all,
        clippy::pedantic,
        dead_code,
        non_camel_case_types,
        unused_imports
    )]
    include!(concat!(env!("OUT_DIR"), "/tiu_tc.skel.rs"));
}

/// `tiu_tc.h`'s `struct tiu_conn_key`: addresses and ports in network byte order (as bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnKey {
    /// The network namespace's cookie ([`netns_cookie`]): the same addresses in two namespaces
    /// are two connections.
    pub netns: u64,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub sport: [u8; 2],
    pub dport: [u8; 2],
    /// 4 or 6.
    pub family: u8,
    pub pad: [u8; 3],
}

/// `struct tiu_conn_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnVal {
    pub udp_sport: [u8; 2],
    pub udp_dport: [u8; 2],
    pub conn_id: u8,
    pub pad: [u8; 3],
    /// `enum tiu_state` ([`State`]).
    pub state: u32,
}

/// `enum tiu_state`: where a connection's handshake stands (happy eyeballs, seed 003 Fig. 9.17).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Put by user space: TiU, no raw copies, never falls back.
    Fixed = 0,
    /// A client's connection given an ID by rule: its SYNs go as TiU and raw.
    SynSent = 1,
    /// A server's, learned from a TiU SYN: its SYN-ACKs go as TiU and raw.
    Learned = 2,
    /// The peer answered in TiU.
    Confirmed = 3,
    /// Fell back to plain TCP.
    Plain = 4,
    /// A client's, after the server's raw SYN-ACK offering TiU came first and was held once.
    Held = 5,
}

impl State {
    pub fn name(v: u32) -> &'static str {
        match v {
            0 => "fixed",
            1 => "syn_sent",
            2 => "learned",
            3 => "confirmed",
            4 => "plain",
            5 => "held",
            _ => "unknown",
        }
    }
}

/// `struct tiu_id_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdKey {
    pub netns: u64,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub udp_sport: [u8; 2],
    pub udp_dport: [u8; 2],
    pub family: u8,
    pub conn_id: u8,
    pub pad: [u8; 2],
}

/// `struct tiu_id_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdVal {
    pub sport: [u8; 2],
    pub dport: [u8; 2],
    /// 1 once a TiU data segment arrived.
    pub seen: u8,
    pub pad: [u8; 3],
    /// 0: open; else 1 + the second its connection closed here (`TIU_LINGER_S`).
    pub closed_s: u32,
}

// tiu_tc.h's sizes (the maps refuse a key or value of another size at run time anyway).
const _: () = assert!(std::mem::size_of::<ConnKey>() == 48 && std::mem::size_of::<ConnVal>() == 12);
const _: () = assert!(std::mem::size_of::<IdKey>() == 48 && std::mem::size_of::<IdVal>() == 12);

/// `struct tiu_rule_key`: an LPM-trie key; `data[0]` the family (4 or 6), `data[1..]` the
/// address; `prefixlen` counts the family's 8 bits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleKey {
    pub prefixlen: u32,
    pub data: [u8; 20],
}

/// `struct tiu_rule_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleVal {
    /// Destination ports, host order; 0-0: any.
    pub port_lo: u16,
    pub port_hi: u16,
    /// Only sockets with this SO_MARK; 0: any.
    pub mark: u32,
    /// 1: ride TiU; 0: never (an exception inside a wider rule).
    pub tiu: u8,
    pub pad: [u8; 3],
}

/// A rule: connect()s to `net` (and, if set, a destination port in `ports`, a socket mark)
/// ride TiU, or never do (`tiu: false`). The longest matching prefix decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub addr: std::net::IpAddr,
    pub prefix_len: u8,
    pub ports: Option<(u16, u16)>,
    pub mark: u32,
    pub tiu: bool,
}

impl Rule {
    /// The map entry, or why the rule is not one (a prefix longer than the address, an empty
    /// port range).
    pub fn to_entry(&self) -> Result<(RuleKey, RuleVal)> {
        let (fam, bits, bytes): (u8, u8, Vec<u8>) = match self.addr {
            std::net::IpAddr::V4(a) => (4, 32, a.octets().to_vec()),
            std::net::IpAddr::V6(a) => (6, 128, a.octets().to_vec()),
        };
        if self.prefix_len > bits {
            return Err(Error(format!(
                "prefix length {} is longer than the address ({bits} bits)",
                self.prefix_len
            )));
        }
        if let Some((lo, hi)) = self.ports {
            if lo == 0 || lo > hi {
                return Err(Error(format!(
                    "port range {lo}-{hi} is empty or starts at 0"
                )));
            }
        }
        let mut data = [0u8; 20];
        data[0] = fam;
        // Bits past the prefix are zeroed: the trie keys the network, not the host.
        for (i, b) in bytes.iter().enumerate() {
            let keep = (self.prefix_len as usize).saturating_sub(i * 8).min(8);
            data[1 + i] = if keep == 0 {
                0
            } else {
                b & (0xffu8 << (8 - keep))
            };
        }
        let (lo, hi) = self.ports.unwrap_or((0, 0));
        Ok((
            RuleKey {
                prefixlen: 8 + self.prefix_len as u32,
                data,
            },
            RuleVal {
                port_lo: lo,
                port_hi: hi,
                mark: self.mark,
                tiu: self.tiu as u8,
                pad: [0; 3],
            },
        ))
    }
}

/// The counters' names, in `enum tiu_stat` order.
pub const STAT_NAMES: [&str; 23] = [
    "eg_data",
    "eg_syn",
    "eg_uncarried",
    "eg_no_setup",
    "eg_error",
    "in_data",
    "in_syn",
    "in_not_tiu",
    "in_no_checksum",
    "in_unknown_id",
    "in_malformed",
    "in_error",
    "in_unfinished",
    "in_collision",
    "in_refused_syn",
    "eg_raw_copy",
    "eg_fallen_back",
    "in_dup_handshake",
    "fallback",
    "alloc",
    "alloc_full",
    "in_raw_syn_held",
    "in_no_listener",
];

/// `TIU_COPY_MARK`: the mark of a handshake segment's TiU copy on its second pass of
/// `tiu_egress` (what [`Loaded::egress_copy`] gives a frame).
pub const TIU_COPY_MARK: u32 = 0x5469_5543;

/// Counters as (name, value) pairs, in [`STAT_NAMES`] order.
pub fn named_stats(stats: &[u64]) -> Vec<(&'static str, u64)> {
    STAT_NAMES
        .iter()
        .copied()
        .zip(stats.iter().copied())
        .collect()
}

/// One counter by its name in [`STAT_NAMES`] (`None` for a name that is not one).
pub fn stat(stats: &[u64], name: &str) -> Option<u64> {
    let i = STAT_NAMES.iter().position(|n| *n == name)?;
    stats.get(i).copied()
}

/// TC_ACT_OK and TC_ACT_SHOT, as the programs return them.
pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;

/// What went wrong, in words a user can act on (shared with crates/ccc-bpf).
pub use bpf_rt::Error;

pub type Result<T> = std::result::Result<T, Error>;

/// The cookie of the calling thread's network namespace (SO_NETNS_COOKIE), which the programs
/// put first in every key (the kernel's `net_cookie`).
pub fn netns_cookie() -> Result<u64> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // SAFETY: plain socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(Error(format!(
            "a socket to read the network namespace's cookie: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut cookie = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: an 8-byte out-parameter and its length.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error(format!(
            "SO_NETNS_COOKIE (Linux 5.14 or later): {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(cookie)
}

fn bytes_of<T: Copy>(v: &T) -> &[u8] {
    // Plain #[repr(C)] structs of byte arrays: no padding, every byte initialised.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Runs the `tiu_listeners` iterator (program `prog`) in `netns` (None: this one): every TCP
/// listener there that predates `tiu_sockops` gets the header-option callbacks, so its SYN-ACKs
/// carry the Setup option. Returns the local ports of the listeners it changed.
pub fn upgrade_listeners(
    prog: std::os::fd::BorrowedFd<'_>,
    netns: Option<&str>,
) -> Result<Vec<u16>> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: a program descriptor; no options (an iterator without parameters).
    let link = unsafe {
        libbpf_sys::bpf_link_create(
            prog.as_raw_fd(),
            0,
            libbpf_sys::BPF_TRACE_ITER,
            std::ptr::null(),
        )
    };
    if link < 0 {
        return Err(Error(format!(
            "attaching the listener iterator: {}",
            std::io::Error::from_raw_os_error(-link)
        )));
    }
    // SAFETY: a new descriptor we own.
    let link = unsafe { OwnedFd::from_raw_fd(link) };
    let text = admin::in_netns(netns, || {
        // The iterator walks the namespace of the thread that creates it.
        // SAFETY: a link descriptor.
        let it = unsafe { libbpf_sys::bpf_iter_create(link.as_raw_fd()) };
        if it < 0 {
            return Err(Error(format!(
                "creating the listener iterator: {}",
                std::io::Error::from_raw_os_error(-it)
            )));
        }
        // SAFETY: a new descriptor we own.
        let mut f = unsafe { std::fs::File::from_raw_fd(it) };
        let mut text = String::new();
        f.read_to_string(&mut text)
            .map_err(|e| Error(format!("reading the listener iterator: {e}")))?;
        Ok(text)
    })?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Why the programs are not in this build (bpftool, clang or the kernel's BTF was missing), or
/// `None`.
pub fn missing() -> Option<&'static str> {
    #[cfg(tiu_bpf_missing)]
    return Some(env!("TIU_BPF_MISSING"));
    #[cfg(not(tiu_bpf_missing))]
    None
}

/// The loaded programs and their maps, for as long as `with_loaded`'s closure runs.
#[cfg(not(tiu_bpf_missing))]
pub struct Loaded<'a> {
    skel: std::cell::RefCell<skel::TiuTcSkel<'a>>,
}

#[cfg(not(tiu_bpf_missing))]
impl Loaded<'_> {
    pub fn add_conn(&self, k: &ConnKey, v: &ConnVal) -> Result<()> {
        use libbpf_rs::MapCore;
        self.skel
            .borrow()
            .maps
            .tiu_conns
            .update(bytes_of(k), bytes_of(v), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error(format!("conns map: {e}")))
    }

    pub fn add_id(&self, k: &IdKey, v: &IdVal) -> Result<()> {
        use libbpf_rs::MapCore;
        self.skel
            .borrow()
            .maps
            .ids
            .update(bytes_of(k), bytes_of(v), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error(format!("ids map: {e}")))
    }

    /// Adds (or replaces) a rule in the `rules` trie.
    pub fn add_rule(&self, rule: &Rule) -> Result<()> {
        use libbpf_rs::MapCore;
        let (k, v) = rule.to_entry()?;
        self.skel
            .borrow()
            .maps
            .rules
            .update(bytes_of(&k), bytes_of(&v), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error(format!("rules map: {e}")))
    }

    /// A connection's entry in `conns`, if it has one.
    pub fn conn(&self, k: &ConnKey) -> Result<Option<ConnVal>> {
        use libbpf_rs::MapCore;
        let v = self
            .skel
            .borrow()
            .maps
            .tiu_conns
            .lookup(bytes_of(k), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error(format!("conns map: {e}")))?;
        Ok(v.map(|b| {
            // SAFETY: the map's value is a struct tiu_conn_val, byte for byte.
            unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<ConnVal>()) }
        }))
    }

    /// How many entries `conns` holds, and how many of `ids` are open (not closed, lingering).
    pub fn entries(&self) -> (usize, usize) {
        use libbpf_rs::MapCore;
        let sk = self.skel.borrow();
        let open = sk
            .maps
            .ids
            .keys()
            .filter(|k| {
                matches!(sk.maps.ids.lookup(k, libbpf_rs::MapFlags::ANY),
                    Ok(Some(v)) if u32::from_ne_bytes(v[8..12].try_into().unwrap()) == 0)
            })
            .count();
        (sk.maps.tiu_conns.keys().count(), open)
    }

    fn run(prog: &libbpf_rs::ProgramMut<'_>, frame: &[u8], flags: u32) -> Result<(u32, Vec<u8>)> {
        Self::run_marked(prog, frame, flags, 0)
    }

    fn run_marked(
        prog: &libbpf_rs::ProgramMut<'_>,
        frame: &[u8],
        flags: u32,
        mark: u32,
    ) -> Result<(u32, Vec<u8>)> {
        let mut out = vec![0u8; frame.len() + 64];
        // The start of a struct __sk_buff (len, pkt_type, mark): the kernel takes the mark
        // from here and requires the other fields zero.
        let mut ctx = [0u8; 12];
        ctx[8..].copy_from_slice(&mark.to_ne_bytes());
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out[..]),
            context_in: if mark != 0 { Some(&mut ctx[..]) } else { None },
            flags,
            ..Default::default()
        };
        let o = prog
            .test_run(input)
            .map_err(|e| Error(format!("BPF_PROG_TEST_RUN: {e}")))?;
        let (ret, n) = (o.return_value, o.data.map(|d| d.len()).unwrap_or(0));
        out.truncate(n);
        Ok((ret, out))
    }

    /// Runs `tiu_egress` on an Ethernet frame: (the program's verdict, the frame after it).
    pub fn egress(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        Self::run(&self.skel.borrow_mut().progs.tiu_egress, frame, 0)
    }

    /// Runs `tiu_egress` on a frame as the TiU copy of an unconfirmed handshake segment (its
    /// second pass, marked [`TIU_COPY_MARK`]); [`Loaded::egress`] on such a segment sends the
    /// copy ahead with bpf_clone_redirect and returns the raw one.
    pub fn egress_copy(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        Self::run_marked(
            &self.skel.borrow_mut().progs.tiu_egress,
            frame,
            0,
            TIU_COPY_MARK,
        )
    }

    /// Runs `tiu_ingress` on an Ethernet frame.
    pub fn ingress(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        Self::run(&self.skel.borrow_mut().progs.tiu_ingress, frame, 0)
    }

    /// Runs `tiu_ingress` on a frame received with a checksum over the whole packet
    /// (CHECKSUM_COMPLETE, as real NICs hand it over); the kernel then requires that checksum to
    /// still describe the packet after the program (BPF_F_TEST_SKB_CHECKSUM_COMPLETE), and
    /// refuses the run (EBADMSG) if not.
    pub fn ingress_checksum_complete(&self, frame: &[u8]) -> Result<(u32, Vec<u8>)> {
        const BPF_F_TEST_SKB_CHECKSUM_COMPLETE: u32 = 1 << 2;
        Self::run(
            &self.skel.borrow_mut().progs.tiu_ingress,
            frame,
            BPF_F_TEST_SKB_CHECKSUM_COMPLETE,
        )
    }

    /// Pins both programs at `dir/egress` and `dir/ingress`, for `tc filter add ... bpf da
    /// object-pinned` (the pins go when the files are removed and the programs detached).
    pub fn pin_programs(&self, dir: &std::path::Path) -> Result<()> {
        let mut sk = self.skel.borrow_mut();
        sk.progs
            .tiu_egress
            .pin(dir.join("egress"))
            .and_then(|_| sk.progs.tiu_ingress.pin(dir.join("ingress")))
            .map_err(|e| Error(format!("pinning under {}: {e}", dir.display())))
    }

    /// Attaches `tiu_sockops` (which writes the TiU-Setup option into a listed connection's SYN
    /// and SYN-ACK) to the cgroup v2 directory `cgroup`; detached when the link is dropped.
    pub fn attach_sockops(&self, cgroup: &std::path::Path) -> Result<libbpf_rs::Link> {
        use std::os::fd::AsRawFd;
        let dir = std::fs::File::open(cgroup)
            .map_err(|e| Error(format!("opening the cgroup {}: {e}", cgroup.display())))?;
        self.skel
            .borrow_mut()
            .progs
            .tiu_sockops
            .attach_cgroup(dir.as_raw_fd())
            .map_err(|e| {
                Error(format!(
                    "attaching tiu_sockops to {}: {e}",
                    cgroup.display()
                ))
            })
    }

    /// [`upgrade_listeners`] with this load's iterator.
    pub fn upgrade_listeners(&self, netns: Option<&str>) -> Result<Vec<u16>> {
        use std::os::fd::AsFd;
        let sk = self.skel.borrow();
        upgrade_listeners(sk.progs.tiu_listeners.as_fd(), netns)
    }

    /// The counters, summed over CPUs, by [`STAT_NAMES`].
    pub fn stats(&self) -> Result<Vec<u64>> {
        use libbpf_rs::MapCore;
        (0..STAT_NAMES.len() as u32)
            .map(|i| {
                let per_cpu = self
                    .skel
                    .borrow()
                    .maps
                    .stats
                    .lookup_percpu(&i.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                    .map_err(|e| Error(format!("stats map: {e}")))?
                    .unwrap_or_default();
                Ok(per_cpu
                    .iter()
                    .map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap()))
                    .sum())
            })
            .collect()
    }
}

/// Opens and loads the object with `tiu_port` (host byte order) as the TiU UDP port; with
/// `share_conns`, its `conns` map is that pinned map (macroflow_ccc's `tiu_conns`), emptied.
#[cfg(not(tiu_bpf_missing))]
pub(crate) fn load<'o>(
    object: &'o mut std::mem::MaybeUninit<libbpf_rs::OpenObject>,
    tiu_port: u16,
    share_conns: Option<&std::path::Path>,
) -> Result<skel::TiuTcSkel<'o>> {
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    let mut open = skel::TiuTcSkelBuilder::default()
        .open(object)
        .map_err(|e| Error(format!("opening the BPF object: {e}")))?;
    open.maps
        .rodata_data
        .as_deref_mut()
        .ok_or_else(|| Error("the program's read-only data is not mapped".into()))?
        .cfg_tiu_port = tiu_port.to_be();
    let shared = match share_conns {
        None => None,
        Some(path) => Some(bpf_rt::reuse_pinned(
            &mut open.maps.tiu_conns,
            path,
            "`macroflow linux unload` and load macroflow_ccc again",
        )?),
    };
    let sk = open
        .load()
        .map_err(|e| Error(format!("loading (the verifier's log is above): {e}")))?;
    if let Some(m) = shared {
        // Entries an earlier TiU left (connections that closed after it was disabled): nothing
        // removes them but TiU's close callback, and they would be taken for live ones.
        empty(&m);
    }
    Ok(sk)
}

/// Deletes every entry of `m` (one gone meanwhile, evicted from an LRU map, is as good).
pub(crate) fn empty(m: &libbpf_rs::MapHandle) {
    use libbpf_rs::MapCore;
    let keys: Vec<Vec<u8>> = m.keys().collect();
    for k in keys {
        let _ = m.delete(&k);
    }
}

/// Loads both programs with `tiu_port` (host byte order) as the TiU UDP port, not attached to any
/// device, and runs `f` with them; they are unloaded when it returns.
#[cfg(not(tiu_bpf_missing))]
pub fn with_loaded<R>(tiu_port: u16, f: impl FnOnce(&Loaded<'_>) -> R) -> Result<R> {
    let mut object = std::mem::MaybeUninit::uninit();
    let skel = load(&mut object, tiu_port, None)?;
    let loaded = Loaded {
        skel: std::cell::RefCell::new(skel),
    };
    let r = f(&loaded);
    drop(loaded);
    Ok(r)
}
