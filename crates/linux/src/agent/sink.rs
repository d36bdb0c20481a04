//! Sinks (issue 15): a TCP listener that reads every connection to its end (one thread per
//! connection: dozens at once are cheap, and a blocking read with a short timeout keeps each one
//! simple) and a UDP socket that counts each flow's datagrams by the agent's header
//! ([`super::udp::write_header`]).

use super::clock::{now_ns, timespec, Run};
use super::udp::{read_header, IP_UDP_HEADER_BYTES};
use super::{SinkConnReport, UdpRecvReport};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::thread::JoinHandle;
use std::time::Duration;

/// The listener's accept queue: a web workload's connections may arrive in bursts.
const BACKLOG: i32 = 1024;
/// The UDP sink's receive buffer (SO_RCVBUFFORCE as root, else capped by net.core.rmem_max): a
/// burst of the self-similar source must not overflow it while the thread is descheduled.
const UDP_RCVBUF: usize = 8 << 20;

fn poll_timeout(run: &Run) -> Duration {
    Duration::from_nanos(run.poll_ns().max(1_000_000))
}

/// The TCP listener on 0.0.0.0:port. SO_REUSEADDR lets a new run reuse a port whose previous
/// connections are in TIME_WAIT; a port another socket listens on is still refused.
pub(crate) fn listen_tcp(port: u16) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddr::from(([0, 0, 0, 0], port))))?;
    s.listen(BACKLOG)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

pub(crate) fn bind_udp(port: u16) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.bind(&SockAddr::from(SocketAddr::from(([0, 0, 0, 0], port))))?;
    if set_rcvbuf_force(&s, UDP_RCVBUF).is_err() {
        s.set_recv_buffer_size(UDP_RCVBUF)?;
    }
    Ok(s)
}

fn set_rcvbuf_force(s: &Socket, bytes: usize) -> std::io::Result<()> {
    let v = bytes as libc::c_int;
    // SAFETY: an int option on our own socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Datagrams the kernel dropped at this socket (SO_MEMINFO, SK_MEMINFO_DROPS): a full receive
/// buffer, which would otherwise pass for loss on the path.
fn socket_drops(s: &Socket) -> Option<u32> {
    let mut v = [0u32; 16];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes of u32s.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SK_MEMINFO_DROPS is index 8 (include/uapi/linux/sock_diag.h).
    (r == 0 && len as usize > 8 * 4).then_some(v[8])
}

/// Accepts until the end; each connection is read by its own thread. Returns the connections
/// in accept order.
pub(crate) fn run_tcp(listener: Socket, run: Run) -> Vec<SinkConnReport> {
    let mut conns: Vec<JoinHandle<SinkConnReport>> = Vec::new();
    let mut peers = Vec::new();
    let fd = listener.as_raw_fd();
    while !run.over() {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = timespec(run.poll_ns());
        // SAFETY: one valid pollfd; a null signal mask.
        unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        loop {
            match listener.accept() {
                Ok((s, addr)) => {
                    let accepted_ns = now_ns();
                    let peer = addr
                        .as_socket()
                        .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
                    let r = run.clone();
                    let name = format!("sink-tcp-{}", conns.len());
                    match std::thread::Builder::new()
                        .name(name)
                        .spawn(move || read_conn(s, peer, accepted_ns, r))
                    {
                        Ok(h) => {
                            conns.push(h);
                            peers.push(peer);
                        }
                        Err(e) => run.error(format!(
                            "sink: no thread for the connection from {peer}: {e} (closed)"
                        )),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    run.error(format!("sink: accept: {e}"));
                    break;
                }
            }
        }
    }
    conns
        .into_iter()
        .zip(peers)
        .map(|(h, peer)| {
            h.join().unwrap_or_else(|_| {
                run.error(format!("sink: the thread reading {peer} panicked"));
                SinkConnReport {
                    peer_addr: peer.ip().to_string(),
                    peer_port: peer.port(),
                    ..Default::default()
                }
            })
        })
        .collect()
}

/// Reads one connection until EOF (then closes it) or the end of the run.
fn read_conn(s: Socket, peer: SocketAddr, accepted_ns: u64, run: Run) -> SinkConnReport {
    let mut rep = SinkConnReport {
        peer_addr: peer.ip().to_string(),
        peer_port: peer.port(),
        accepted_s: run.t_s(accepted_ns),
        ..Default::default()
    };
    let mut stream = std::net::TcpStream::from(s);
    let mut buf = vec![0u8; 256 * 1024];
    let set_timeout = |st: &std::net::TcpStream| st.set_read_timeout(Some(poll_timeout(&run)));
    if let Err(e) = stream
        .set_nonblocking(false)
        .and_then(|_| set_timeout(&stream))
    {
        run.error(format!("sink: connection from {peer}: {e}"));
        return rep;
    }
    while !run.over() {
        match stream.read(&mut buf) {
            Ok(0) => {
                let now = now_ns();
                if now < run.end_ns {
                    rep.eof = true;
                    rep.eof_s = Some(run.t_s(now));
                }
                break;
            }
            Ok(n) => {
                let now = now_ns();
                if now >= run.end_ns {
                    // The sinks count what they read before the end, as the run's other
                    // counters stop there (a read timeout in jiffies can overshoot it).
                    break;
                }
                let t = run.t_s(now);
                rep.bytes += n as u64;
                rep.first_s.get_or_insert(t);
                rep.last_s = Some(t);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                // Shorten the last wait to the end of the run.
                let _ = set_timeout(&stream);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                run.error(format!(
                    "sink: connection from {peer}: read at {:.3} s: {e}",
                    run.now_s()
                ));
                break;
            }
        }
    }
    rep
}

#[derive(Default)]
struct FlowCount {
    rep: UdpRecvReport,
    delay_sum_s: f64,
    delays: u64,
}

/// Counts datagrams per flow until the end. Returns the flows in id order, the datagrams too
/// short for the header, and the socket's own drops.
pub(crate) fn run_udp(s: Socket, run: Run) -> (Vec<UdpRecvReport>, u64, Option<u32>) {
    let mut flows: BTreeMap<u32, FlowCount> = BTreeMap::new();
    let mut short = 0u64;
    let mut buf = vec![0u8; 65_536];
    let sock = std::net::UdpSocket::from(s);
    let set_timeout = |sk: &std::net::UdpSocket| sk.set_read_timeout(Some(poll_timeout(&run)));
    if let Err(e) = set_timeout(&sock) {
        run.error(format!("sink: udp socket: {e}"));
    }
    while !run.over() {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = now_ns();
                if now >= run.end_ns {
                    break;
                }
                let Some((flow, seq, sent)) = read_header(&buf[..n]) else {
                    short += 1;
                    continue;
                };
                let f = flows.entry(flow).or_insert_with(|| FlowCount {
                    rep: UdpRecvReport {
                        flow,
                        ..Default::default()
                    },
                    ..Default::default()
                });
                let r = &mut f.rep;
                let t = run.t_s(now);
                r.pkts += 1;
                r.bytes += n as u64 + IP_UDP_HEADER_BYTES as u64;
                r.first_s.get_or_insert(t);
                r.last_s = Some(t);
                match r.max_seq {
                    Some(m) if seq < m => r.reordered_pkts += 1,
                    _ => r.max_seq = Some(seq),
                }
                if let Some(sent_ns) = sent {
                    let d = (now as i128 - (run.epoch_ns as i128 + sent_ns as i128)) as f64 * 1e-9;
                    f.delay_sum_s += d;
                    f.delays += 1;
                    r.delay_min_s = Some(r.delay_min_s.map_or(d, |m| m.min(d)));
                    r.delay_max_s = Some(r.delay_max_s.map_or(d, |m| m.max(d)));
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let _ = set_timeout(&sock);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                run.error(format!("sink: udp recv at {:.3} s: {e}", run.now_s()));
                // A persistent error would spin: pause as a timeout would.
                std::thread::sleep(poll_timeout(&run));
            }
        }
    }
    let drops = socket_drops(&Socket::from(sock));
    let reps = flows
        .into_values()
        .map(|mut f| {
            if f.delays > 0 {
                f.rep.delay_mean_s = Some(f.delay_sum_s / f.delays as f64);
            }
            f.rep
        })
        .collect();
    (reps, short, drops)
}
