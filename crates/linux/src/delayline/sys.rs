//! The Linux calls of the delay line (issue 15), each wrapped once: AF_PACKET sockets bound to one
//! interface, batched receive (recvmmsg, with the kernel's receive timestamps) and send
//! (sendmmsg), the wait (ppoll with a nanosecond timeout) and the clocks.
//!
//! Everything unsafe of the delay line is here; the caller sees slices, counts and errors.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Every protocol: the socket sees every frame the interface receives (linux/if_ether.h).
const ETH_P_ALL: u16 = 0x0003;
// linux/if_packet.h: not every libc release exports these for every target, and their values
// are fixed by the kernel's ABI.
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_STATISTICS: libc::c_int = 6;
/// Since Linux 4.20: the socket does not see the frames transmitted on its interface, neither
/// its own nor the other direction's, so the delay line never carries a frame back.
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Every frame read or written through the socket is preceded by a `virtio_net_hdr`, which says
/// whether its transport checksum is still to be filled in (CHECKSUM_PARTIAL: the sending
/// host's veth has tx checksum offload on) and where. Carried to the send side as it came, the
/// receiving host's kernel gets the same skb state, so such frames arrive intact instead of with
/// a checksum never computed (without it a UDP or TCP frame from a veth with offload on would be
/// dropped by the receiver as corrupt).
const PACKET_VNET_HDR: libc::c_int = 15;
/// Length of `struct virtio_net_hdr`, before each frame in the slots.
pub const VNET_HDR_LEN: usize = 10;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
// asm-generic/socket.h (x86_64, aarch64 and the other generic targets).
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;
/// The `_NEW` variant (Linux 5.1): the control message carries a 64-bit `__kernel_timespec` on
/// every target, so one layout is parsed.
const SO_TIMESTAMPNS_NEW: libc::c_int = 64;

#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [u8; 8],
}

#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T and the length passed is its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of due times (shared by every namespace).
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds: the clock of the kernel's receive timestamps.
pub fn real_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CPU time of the calling thread (user and system, including the softirq work the kernel does
/// in its context, such as the receiving host's stack when a frame is sent into a veth).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes one timespec.
    let mut ts: libc::timespec = unsafe { zeroed() };
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Timer slack of the calling thread: 1 ns, so that the kernel does not defer a due send by its
/// default 50 µs to batch timers.
pub fn set_timer_slack_1ns() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Locks the process's pages in memory as they are touched (MCL_ONFAULT: nothing is populated
/// ahead) and keeps them there: a page of the delay line's code or of its held frames that the
/// kernel reclaimed would stall a direction for the length of a disk read.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: plain call.
    cvt(unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE | libc::MCL_ONFAULT) })
        .map(drop)
}

/// Undoes [`lock_memory`] when the delay line returns to its caller.
pub fn unlock_memory() {
    // SAFETY: plain call.
    unsafe { libc::munlockall() };
}

/// Puts the calling thread in SCHED_FIFO at `priority`. Fails without CAP_SYS_NICE or where the
/// cgroup grants no real-time budget; the caller goes on under the normal scheduler.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; one sched_param.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) }).map(drop)
}

/// One AF_PACKET socket bound to one interface: it receives every frame arriving on it (never
/// those transmitted on it) and sends raw Ethernet frames out of it.
pub struct PacketSocket {
    fd: OwnedFd,
    pub mtu: u32,
}

impl PacketSocket {
    /// Opens and binds the socket. Errors say which call failed; the caller names the wire and
    /// the interface.
    pub fn open(ifname: &str, buf_bytes: usize) -> Result<PacketSocket, String> {
        let cname =
            CString::new(ifname).map_err(|_| "interface name has a NUL byte".to_string())?;
        // SAFETY: plain call on a C string.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(format!(
                "no such interface in this namespace ({})",
                io::Error::last_os_error()
            ));
        }
        // Protocol 0 at creation: the socket receives nothing until it is bound to the interface
        // (with ETH_P_ALL it would see every interface's frames in between).
        // SAFETY: socket() returns a new descriptor or -1.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
                .map_err(|e| format!("socket(AF_PACKET): {e} (the delay line needs CAP_NET_RAW)"))?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let (mtu, flags) = if_mtu_flags(fd.as_raw_fd(), ifname)?;
        if flags & libc::IFF_UP == 0 {
            return Err("interface is down (set it up before starting the delay line)".into());
        }
        let one: libc::c_int = 1;
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &one,
        )
        .map_err(|e| format!("PACKET_IGNORE_OUTGOING: {e} (needs Linux 4.20)"))?;
        setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_VNET_HDR, &one)
            .map_err(|e| format!("PACKET_VNET_HDR: {e}"))?;
        let bytes = buf_bytes.min(i32::MAX as usize) as libc::c_int;
        // The FORCE variants pass net.core.rmem_max/wmem_max (root, CAP_NET_ADMIN); the plain
        // ones are the fallback, capped by those sysctls.
        if setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_RCVBUFFORCE, &bytes).is_err() {
            setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &bytes)
                .map_err(|e| format!("SO_RCVBUF: {e}"))?;
        }
        if setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_SNDBUFFORCE, &bytes).is_err() {
            setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &bytes)
                .map_err(|e| format!("SO_SNDBUF: {e}"))?;
        }
        setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_TIMESTAMPNS_NEW, &one)
            .map_err(|e| format!("SO_TIMESTAMPNS_NEW: {e}"))?;
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: a sockaddr_ll of the size passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map_err(|e| format!("bind: {e}"))?;
        // Promiscuous for as long as the socket lives (reference-counted by the kernel): frames
        // for any destination address reach the socket, whatever the orchestrator set.
        let mreq = PacketMreq {
            mr_ifindex: ifindex,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_ADD_MEMBERSHIP,
            &mreq,
        )
        .map_err(|e| format!("PACKET_MR_PROMISC: {e}"))?;
        Ok(PacketSocket { fd, mtu })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames the kernel dropped because the socket's receive buffer was full, since the last
    /// call (reading PACKET_STATISTICS resets the kernel's counters; they are 32-bit).
    pub fn take_kernel_drops(&self) -> u64 {
        let mut st = TpacketStats::default();
        let mut len = size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `st`.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                (&mut st as *mut TpacketStats).cast(),
                &mut len,
            )
        };
        let _ = st.tp_packets;
        if r == 0 {
            st.tp_drops as u64
        } else {
            0
        }
    }
}

fn if_mtu_flags(fd: RawFd, ifname: &str) -> Result<(u32, libc::c_int), String> {
    // SAFETY: ifreq is plain data; the ioctls fill the union member they are named for.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(ifname.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) })
        .map_err(|e| format!("SIOCGIFMTU: {e}"))?;
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) })
        .map_err(|e| format!("SIOCGIFFLAGS: {e}"))?;
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    Ok((mtu, flags))
}

/// One received frame: its length with the vnet header before it (the frame's own is
/// `len - VNET_HDR_LEN`), whether it was longer than its slot, and the kernel's receive
/// timestamp (CLOCK_REALTIME; 0 when the kernel gave none).
#[derive(Clone, Copy, Debug, Default)]
pub struct RxFrame {
    pub len: usize,
    pub truncated: bool,
    pub stamp_real_ns: u64,
}

/// Room for one SCM_TIMESTAMPNS_NEW control message (cmsghdr 16 + timespec 16 bytes), aligned.
type Ctrl = [u64; 8];

/// The arrays recvmmsg fills, kept across calls (no allocation per batch).
pub struct RxBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<Ctrl>,
}

// SAFETY: the raw pointers in the arrays are rebuilt before every call and point only into
// memory the caller lends for that call.
unsafe impl Send for RxBatch {}

impl RxBatch {
    pub fn new(max: usize) -> RxBatch {
        // SAFETY: mmsghdr and iovec are plain data; null pointers are set before use.
        RxBatch {
            hdrs: (0..max).map(|_| unsafe { zeroed() }).collect(),
            iovs: (0..max).map(|_| unsafe { zeroed() }).collect(),
            ctrl: vec![[0; 8]; max],
        }
    }

    /// Receives up to `out.len()` frames without waiting into `slots` (consecutive slots of
    /// `slot` bytes each). Returns how many arrived (0: none waiting).
    pub fn recv(
        &mut self,
        fd: RawFd,
        slots: &mut [u8],
        slot: usize,
        out: &mut [RxFrame],
    ) -> io::Result<usize> {
        let n = out.len().min(self.hdrs.len()).min(slots.len() / slot);
        if n == 0 {
            return Ok(0);
        }
        let base = slots.as_mut_ptr();
        for i in 0..n {
            self.iovs[i] = libc::iovec {
                // SAFETY: slot i lies within `slots` (n * slot <= slots.len()).
                iov_base: unsafe { base.add(i * slot) }.cast(),
                iov_len: slot,
            };
            // SAFETY: plain data.
            let mut h: libc::msghdr = unsafe { zeroed() };
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.ctrl[i].as_mut_ptr().cast();
            h.msg_controllen = size_of::<Ctrl>() as _;
            self.hdrs[i] = libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            };
        }
        // MSG_TRUNC: msg_len is the real length (header and frame) even when it did not fit.
        // SAFETY: every header points into live buffers of the lengths given.
        let r = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let got = r as usize;
        for (i, o) in out.iter_mut().enumerate().take(got) {
            let h = &self.hdrs[i];
            let len = h.msg_len as usize;
            *o = RxFrame {
                len,
                truncated: len > slot || h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                stamp_real_ns: rx_stamp(&h.msg_hdr),
            };
        }
        Ok(got)
    }
}

fn rx_stamp(h: &libc::msghdr) -> u64 {
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS_NEW {
                let p = libc::CMSG_DATA(c) as *const i64;
                let sec = p.read_unaligned();
                let nsec = p.add(1).read_unaligned();
                return (sec as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(nsec as u64);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

/// The arrays sendmmsg reads, kept across calls.
pub struct TxBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    failed: Vec<bool>,
}

// SAFETY: as RxBatch.
unsafe impl Send for TxBatch {}

/// What one `TxBatch::send` did: frames the kernel took, and frames it refused with the error of
/// the last refusal (a veth drops a frame when the receiving CPU's backlog is full: ENOBUFS).
#[derive(Debug, Default)]
pub struct TxResult {
    pub sent: usize,
    pub failed: usize,
    pub last_error: Option<io::Error>,
}

impl TxBatch {
    pub fn new(max: usize) -> TxBatch {
        // SAFETY: plain data.
        TxBatch {
            hdrs: (0..max).map(|_| unsafe { zeroed() }).collect(),
            iovs: (0..max).map(|_| unsafe { zeroed() }).collect(),
            failed: vec![false; max],
        }
    }

    /// Whether the `k`-th frame of the last `send` was refused.
    pub fn failed(&self, k: usize) -> bool {
        self.failed[k]
    }

    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Sends `frames` in order, each once: a frame the kernel refuses is counted and skipped (it
    /// is never retried, which could reorder or delay the ones after it).
    pub fn send<'a>(&mut self, fd: RawFd, frames: impl Iterator<Item = &'a [u8]>) -> TxResult {
        let mut n = 0;
        for f in frames.take(self.hdrs.len()) {
            self.iovs[n] = libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            };
            n += 1;
        }
        for i in 0..n {
            // SAFETY: plain data.
            let mut h: libc::msghdr = unsafe { zeroed() };
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            self.hdrs[i] = libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            };
        }
        let mut res = TxResult::default();
        self.failed[..n].fill(false);
        let mut at = 0;
        while at < n {
            // SAFETY: headers `at..n` point to the frames borrowed for this call.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs[at..].as_mut_ptr(),
                    (n - at) as libc::c_uint,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first frame of the remaining ones was refused: count it, go on after it.
                res.failed += 1;
                res.last_error = Some(e);
                self.failed[at] = true;
                at += 1;
            } else {
                res.sent += r as usize;
                at += r as usize;
            }
        }
        res
    }
}

/// Waits until `rx` is readable, `stop` is readable, or `timeout_ns` passed (None: no timeout).
/// Returns (rx readable, stop readable).
pub fn wait(rx: RawFd, stop: RawFd, timeout_ns: Option<u64>) -> io::Result<(bool, bool)> {
    let mut fds = [
        libc::pollfd {
            fd: rx,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout_ns.map(|t| libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: two pollfds, an optional timespec, no signal mask change.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok((false, false));
        }
        return Err(e);
    }
    let rx_ready = fds[0].revents != 0;
    let stop_ready = fds[1].revents != 0;
    Ok((rx_ready, stop_ready))
}
