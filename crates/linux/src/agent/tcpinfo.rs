//! TCP_INFO (issue 15). The libc crate's `tcp_info` for glibc stops at `tcpi_total_retrans`
//! (the glibc header's old layout), without the counters the testbed compares with the simulator
//! (bytes acked and retransmitted, data segments, delivered), so the kernel's structure is
//! defined here once.

use super::TcpInfo;
use std::os::fd::AsRawFd;

/// `struct tcp_info` of the Linux UAPI, include/uapi/linux/tcp.h, up to `tcpi_snd_wnd` (Linux
/// 5.4 and later; newer kernels append fields, which getsockopt leaves out when the buffer is
/// shorter). The two bit-field bytes after `tcpi_options` are kept as plain bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KernelTcpInfo {
    pub tcpi_state: u8,
    pub tcpi_ca_state: u8,
    pub tcpi_retransmits: u8,
    pub tcpi_probes: u8,
    pub tcpi_backoff: u8,
    pub tcpi_options: u8,
    /// `tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4`.
    pub tcpi_wscale: u8,
    /// `tcpi_delivery_rate_app_limited : 1, tcpi_fastopen_client_fail : 2`.
    pub tcpi_app_limited_bits: u8,

    pub tcpi_rto: u32,
    pub tcpi_ato: u32,
    pub tcpi_snd_mss: u32,
    pub tcpi_rcv_mss: u32,

    pub tcpi_unacked: u32,
    pub tcpi_sacked: u32,
    pub tcpi_lost: u32,
    pub tcpi_retrans: u32,
    pub tcpi_fackets: u32,

    pub tcpi_last_data_sent: u32,
    pub tcpi_last_ack_sent: u32,
    pub tcpi_last_data_recv: u32,
    pub tcpi_last_ack_recv: u32,

    pub tcpi_pmtu: u32,
    pub tcpi_rcv_ssthresh: u32,
    pub tcpi_rtt: u32,
    pub tcpi_rttvar: u32,
    pub tcpi_snd_ssthresh: u32,
    pub tcpi_snd_cwnd: u32,
    pub tcpi_advmss: u32,
    pub tcpi_reordering: u32,

    pub tcpi_rcv_rtt: u32,
    pub tcpi_rcv_space: u32,

    pub tcpi_total_retrans: u32,

    pub tcpi_pacing_rate: u64,
    pub tcpi_max_pacing_rate: u64,
    pub tcpi_bytes_acked: u64,
    pub tcpi_bytes_received: u64,
    pub tcpi_segs_out: u32,
    pub tcpi_segs_in: u32,

    pub tcpi_notsent_bytes: u32,
    pub tcpi_min_rtt: u32,
    pub tcpi_data_segs_in: u32,
    pub tcpi_data_segs_out: u32,

    pub tcpi_delivery_rate: u64,

    pub tcpi_busy_time: u64,
    pub tcpi_rwnd_limited: u64,
    pub tcpi_sndbuf_limited: u64,

    pub tcpi_delivered: u32,
    pub tcpi_delivered_ce: u32,

    pub tcpi_bytes_sent: u64,
    pub tcpi_bytes_retrans: u64,
    pub tcpi_dsack_dups: u32,
    pub tcpi_reord_seen: u32,

    pub tcpi_rcv_ooopack: u32,

    pub tcpi_snd_wnd: u32,
}

/// The shortest answer accepted: through `tcpi_bytes_retrans` (Linux 4.19), the last counter
/// [`TcpInfo`] reports that older kernels lack.
const MIN_LEN: usize = std::mem::offset_of!(KernelTcpInfo, tcpi_dsack_dups);

/// getsockopt(TCP_INFO). Fields the kernel did not fill (an older kernel) stay 0.
pub(crate) fn get(sock: &impl AsRawFd) -> std::io::Result<KernelTcpInfo> {
    let mut info = KernelTcpInfo::default();
    let mut len = std::mem::size_of::<KernelTcpInfo>() as libc::socklen_t;
    // SAFETY: `info` is a plain repr(C) struct of integers, `len` its size: the kernel writes at
    // most `len` bytes into it and sets `len` to what it wrote.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut KernelTcpInfo).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if (len as usize) < MIN_LEN {
        return Err(std::io::Error::other(format!(
            "TCP_INFO of {len} bytes: this kernel is older than 4.19 (the agent needs {MIN_LEN})"
        )));
    }
    Ok(info)
}

impl From<&KernelTcpInfo> for TcpInfo {
    fn from(k: &KernelTcpInfo) -> Self {
        TcpInfo {
            ca_state: k.tcpi_ca_state,
            snd_cwnd: k.tcpi_snd_cwnd,
            snd_ssthresh: k.tcpi_snd_ssthresh,
            rtt_us: k.tcpi_rtt,
            rttvar_us: k.tcpi_rttvar,
            min_rtt_us: k.tcpi_min_rtt,
            total_retrans: k.tcpi_total_retrans,
            segs_out: k.tcpi_segs_out,
            data_segs_out: k.tcpi_data_segs_out,
            bytes_acked: k.tcpi_bytes_acked,
            bytes_retrans: k.tcpi_bytes_retrans,
            delivered: k.tcpi_delivered,
            lost: k.tcpi_lost,
            snd_mss: k.tcpi_snd_mss,
            state: k.tcpi_state,
            bytes_sent: k.tcpi_bytes_sent,
            unacked: k.tcpi_unacked,
            retrans: k.tcpi_retrans,
            notsent_bytes: k.tcpi_notsent_bytes,
            pacing_rate_bytes_per_s: k.tcpi_pacing_rate,
            delivery_rate_bytes_per_s: k.tcpi_delivery_rate,
            busy_time_us: k.tcpi_busy_time,
            rwnd_limited_us: k.tcpi_rwnd_limited,
            sndbuf_limited_us: k.tcpi_sndbuf_limited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Offsets as the C compiler lays out include/uapi/linux/tcp.h on Linux (any 64-bit or
    /// 32-bit target: the u64 fields sit at multiples of 8 either way).
    #[test]
    fn layout_matches_the_uapi_header() {
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_rto), 8);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_rtt), 68);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_snd_cwnd), 80);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_total_retrans), 100);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_pacing_rate), 104);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_bytes_acked), 120);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_segs_out), 136);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_data_segs_out), 156);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_delivery_rate), 160);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_delivered), 192);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_bytes_sent), 200);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_bytes_retrans), 208);
        assert_eq!(offset_of!(KernelTcpInfo, tcpi_snd_wnd), 228);
        assert_eq!(size_of::<KernelTcpInfo>(), 232);
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        use std::io::{Read, Write};
        (&c).write_all(&[7u8; 10_000]).unwrap();
        let mut buf = [0u8; 10_000];
        s.read_exact(&mut buf).unwrap();
        // Wait for the ACKs to come back (loopback: microseconds).
        let mut k = get(&c).unwrap();
        for _ in 0..100 {
            if k.tcpi_bytes_acked > 10_000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            k = get(&c).unwrap();
        }
        assert_eq!(k.tcpi_state, 1, "ESTABLISHED");
        // The kernel's bytes_acked counts the SYN's sequence number (and the FIN's once acked).
        assert_eq!(k.tcpi_bytes_acked, 10_001);
        assert_eq!(k.tcpi_bytes_sent, 10_000);
        assert!(k.tcpi_snd_cwnd >= 10 && k.tcpi_snd_mss > 0);
        assert!(k.tcpi_data_segs_out >= 1);
        let info = TcpInfo::from(&k);
        assert_eq!(info.bytes_acked, 10_001);
    }
}
