//! Root qdisc statistics over rtnetlink (issue 15): one RTM_GETQDISC dump per sampling instant,
//! parsed with netlink-packet-route (no hand-parsed attributes), the root qdisc of each device
//! picked by its parent handle (TC_H_ROOT).

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::collections::HashMap;
use std::os::fd::AsRawFd;

/// TCA_STATS_PKT64 (include/uapi/linux/gen_stats.h, Linux 5.5): the packet count in 64 bits
/// (TCA_STATS_BASIC's is 32); netlink-packet-route leaves it as an unknown attribute.
const TCA_STATS_PKT64: u16 = 8;

/// What the kernel says about a root qdisc (TCA_KIND, TCA_STATS2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct QdiscStats {
    pub kind: String,
    pub sent_bytes: u64,
    pub sent_pkts: u64,
    pub drops: u32,
    pub overlimits: u32,
    pub requeues: u32,
    pub qlen_pkts: u32,
    pub backlog_bytes: u32,
}

impl QdiscStats {
    pub fn report(&self, link: u32, dev: &str) -> super::QdiscReport {
        super::QdiscReport {
            link,
            dev: dev.to_string(),
            kind: self.kind.clone(),
            sent_pkts: self.sent_pkts,
            sent_bytes: self.sent_bytes,
            drops: self.drops,
            overlimits: self.overlimits,
            requeues: self.requeues,
            qlen_pkts: self.qlen_pkts,
            backlog_bytes: self.backlog_bytes,
        }
    }
}

/// The interface index of `dev` in this network namespace.
pub(crate) fn ifindex(dev: &str) -> Option<u32> {
    let name = std::ffi::CString::new(dev).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

/// An rtnetlink socket for qdisc dumps.
pub(crate) struct Netlink {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    pub fn open() -> std::io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        // A lost answer must not hang the sampler: the kernel answers a dump in microseconds.
        let tv = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: a valid timeval for SO_RCVTIMEO on our own socket.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Netlink {
            sock,
            seq: 0,
            // The kernel's dump messages are at most 32 KiB (netlink_recvmsg's cap).
            buf: vec![0; 128 * 1024],
        })
    }

    /// The root qdisc of every device of the namespace, by interface index.
    pub fn root_qdiscs(&mut self) -> Result<HashMap<u32, QdiscStats>, String> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut req = NetlinkMessage::new(
            NetlinkHeader::default(),
            NetlinkPayload::from(RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default())),
        );
        req.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
        req.header.sequence_number = seq;
        req.finalize();
        let mut out = vec![0u8; req.buffer_len()];
        req.serialize(&mut out);
        self.sock
            .send(&out, 0)
            .map_err(|e| format!("RTM_GETQDISC: send: {e}"))?;
        let mut found = HashMap::new();
        loop {
            let n = self
                .sock
                .recv(&mut &mut self.buf[..], libc::MSG_TRUNC)
                .map_err(|e| format!("RTM_GETQDISC: recv: {e}"))?;
            if n > self.buf.len() {
                return Err(format!(
                    "RTM_GETQDISC: a {n}-byte answer does not fit the agent's buffer"
                ));
            }
            let mut off = 0;
            while off < n {
                let msg: NetlinkMessage<RouteNetlinkMessage> =
                    NetlinkMessage::deserialize(&self.buf[off..n])
                        .map_err(|e| format!("RTM_GETQDISC: decoding the answer: {e}"))?;
                let len = msg.header.length as usize;
                let stale = msg.header.sequence_number != seq;
                match msg.payload {
                    _ if stale => {}
                    NetlinkPayload::Done(_) => return Ok(found),
                    NetlinkPayload::Error(e) => {
                        return Err(format!("RTM_GETQDISC: {}", e.to_io()));
                    }
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(m))
                        if m.header.parent == TcHandle::ROOT =>
                    {
                        found.insert(m.header.index as u32, stats_of(&m));
                    }
                    _ => {}
                }
                if len == 0 {
                    break;
                }
                off += (len + 3) & !3;
            }
        }
    }
}

/// TCA_KIND and TCA_STATS2 (TCA_STATS, the old structure, when a kernel gives no TCA_STATS2).
fn stats_of(m: &TcMessage) -> QdiscStats {
    let mut s = QdiscStats::default();
    let mut pkt64 = None;
    let mut have_stats2 = false;
    for a in &m.attributes {
        match a {
            TcAttribute::Kind(k) => s.kind = k.clone(),
            TcAttribute::Stats2(v) => {
                have_stats2 = true;
                for x in v {
                    match x {
                        TcStats2::Basic(b) => {
                            s.sent_bytes = b.bytes;
                            s.sent_pkts = b.packets as u64;
                        }
                        TcStats2::Queue(q) => {
                            s.qlen_pkts = q.qlen;
                            s.backlog_bytes = q.backlog;
                            s.drops = q.drops;
                            s.requeues = q.requeues;
                            s.overlimits = q.overlimits;
                        }
                        TcStats2::Other(nla)
                            if nla.kind() == TCA_STATS_PKT64 && nla.value_len() == 8 =>
                        {
                            let mut b = [0u8; 8];
                            nla.emit_value(&mut b);
                            pkt64 = Some(u64::from_ne_bytes(b));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if !have_stats2 {
        for a in &m.attributes {
            if let TcAttribute::Stats(o) = a {
                s.sent_bytes = o.bytes;
                s.sent_pkts = o.packets as u64;
                s.drops = o.drops;
                s.overlimits = o.overlimits;
                s.qlen_pkts = o.qlen;
                s.backlog_bytes = o.backlog;
            }
        }
    }
    if let Some(p) = pkt64 {
        s.sent_pkts = p;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every namespace has a loopback device with a root qdisc (noqueue), so a dump always finds
    /// one for index 1.
    #[test]
    fn the_loopback_device_has_a_root_qdisc() {
        assert_eq!(ifindex("lo"), Some(1));
        assert_eq!(ifindex("no-such-dev0"), None);
        let mut nl = Netlink::open().unwrap();
        for _ in 0..3 {
            let q = nl.root_qdiscs().unwrap();
            let lo = q.get(&1).expect("lo's root qdisc");
            assert!(!lo.kind.is_empty(), "{lo:?}");
        }
    }
}
