//! TCP senders (issue 15): file flows (bulk or sized) and the flows of web workloads, each on its
//! own thread with the kernel congestion control it names. A flow's thread is spawned
//! [`SPAWN_LEAD_NS`] before its start and sleeps to it on the clock, so starts are on time and
//! no more threads exist than flows about to start or running.

use super::clock::{set_timer_slack, timespec, Run};
use super::{tcpinfo, TcpFlowReport, TcpInfo};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::ErrorKind;
use std::net::SocketAddrV4;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How long before its start a flow's thread is spawned.
pub(crate) const SPAWN_LEAD_NS: u64 = 50_000_000;
/// Bytes per write: large enough that a write is rarely the bottleneck.
const CHUNK: usize = 256 * 1024;

/// One planned TCP flow; `report` holds what is known up front (flow or workload and index, cc,
/// start, size), the rest is filled by the run.
#[derive(Clone, Debug)]
pub(crate) struct TcpJob {
    pub name: String,
    pub dst: SocketAddrV4,
    pub cc: String,
    pub dscp: u8,
    /// A coupled flow's seat: its socket gets the seat's setting before connect.
    pub seat: Option<(Arc<super::ccc::Seats>, usize)>,
    pub start_ns: u64,
    pub report: TcpFlowReport,
}

/// The sockets of the flows that are connected and not yet closed, by index into the report's
/// `tcp`: the sampler reads their TCP_INFO. A flow removes its socket before closing it; the
/// sampler's clone of the Arc keeps the descriptor valid while it reads.
pub(crate) type Registry = Arc<Mutex<Vec<Option<Arc<Socket>>>>>;

/// A TCP socket with congestion control `cc` (TCP_CONGESTION, set before connect so the
/// handshake already runs under it). Also how the plan checks that the kernel accepts `cc`.
pub(crate) fn socket_with_cc(cc: &str) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    s.set_tcp_congestion(cc.as_bytes())?;
    Ok(s)
}

/// Starts every job at its time (jobs sorted by start), then joins them; returns the reports in
/// job order. Runs on its own thread.
pub(crate) fn run_all(jobs: Vec<TcpJob>, registry: Registry, run: Run) -> Vec<TcpFlowReport> {
    set_timer_slack();
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].start_ns);
    let mut handles: Vec<Option<JoinHandle<TcpFlowReport>>> =
        (0..jobs.len()).map(|_| None).collect();
    let mut reports: Vec<Option<TcpFlowReport>> = vec![None; jobs.len()];
    for &i in &order {
        let job = &jobs[i];
        if job.start_ns >= run.end_ns {
            break;
        }
        if !run.sleep_until(job.start_ns.saturating_sub(SPAWN_LEAD_NS)) {
            break;
        }
        let (j, r, reg) = (job.clone(), run.clone(), Arc::clone(&registry));
        match std::thread::Builder::new()
            .name(format!("tcp-{i}"))
            .spawn(move || run_flow(i, j, reg, r))
        {
            Ok(h) => handles[i] = Some(h),
            Err(e) => {
                let mut rep = job.report.clone();
                rep.error = Some(format!("not started: no thread: {e}"));
                run.error(format!("{}: not started: no thread: {e}", job.name));
                reports[i] = Some(rep);
            }
        }
    }
    for (i, h) in handles.into_iter().enumerate() {
        if let Some(h) = h {
            reports[i] = Some(h.join().unwrap_or_else(|_| {
                run.error(format!("{}: its thread panicked", jobs[i].name));
                let mut rep = jobs[i].report.clone();
                rep.error = Some("the flow's thread panicked".into());
                rep
            }));
        }
    }
    reports
        .into_iter()
        .zip(&jobs)
        .map(|(r, job)| {
            r.unwrap_or_else(|| {
                // Not started: the run ended (a signal) before its start.
                let mut rep = job.report.clone();
                if job.start_ns < run.end_ns {
                    rep.error = Some("not started: the agent was stopped before its start".into());
                }
                rep
            })
        })
        .collect()
}

/// Waits until `fd` is ready for `events` or the end of the run; false when the run is over.
fn wait(fd: i32, events: i16, run: &Run) -> bool {
    loop {
        let ns = run.poll_ns();
        if ns == 0 {
            return false;
        }
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        let ts = timespec(ns);
        // SAFETY: one valid pollfd; a null signal mask.
        let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        if r > 0 {
            return true;
        }
    }
}

fn fail(rep: &mut TcpFlowReport, name: &str, run: &Run, what: &str, e: std::io::Error) {
    let msg = format!("{what} at {:.3} s: {e}", run.now_s());
    run.error(format!("{name}: {msg}"));
    rep.error = Some(msg);
}

fn run_flow(i: usize, job: TcpJob, registry: Registry, run: Run) -> TcpFlowReport {
    set_timer_slack();
    let mut rep = job.report.clone();
    if !run.sleep_until(job.start_ns) {
        if job.start_ns < run.end_ns && run.signalled() {
            rep.error = Some("not started: the agent was stopped before its start".into());
        }
        return rep;
    }
    let sock = match socket_with_cc(&job.cc)
        .and_then(|s| s.set_tos_v4((job.dscp as u32) << 2).map(|_| s))
        // Segments leave as soon as the window allows, as in the simulator (no Nagle delay on a
        // sized flow's last segment).
        .and_then(|s| s.set_tcp_nodelay(true).map(|_| s))
        .and_then(|s| s.set_nonblocking(true).map(|_| s))
    {
        Ok(s) => s,
        Err(e) => {
            fail(&mut rep, &job.name, &run, "socket", e);
            return rep;
        }
    };
    let fd = sock.as_raw_fd();
    let _attached = match &job.seat {
        None => None,
        Some((seats, k)) => match seats.attach(*k, fd) {
            Ok(()) => Some(super::ccc::Attached(seats, *k)),
            Err(e) => {
                fail(
                    &mut rep,
                    &job.name,
                    &run,
                    "coupling",
                    std::io::Error::other(e),
                );
                return rep;
            }
        },
    };
    match sock.connect(&SockAddr::from(job.dst)) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            if !wait(fd, libc::POLLOUT, &run) {
                rep.error = Some("not connected before the end".into());
                return rep;
            }
            match sock.take_error() {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    fail(&mut rep, &job.name, &run, "connect", e);
                    return rep;
                }
            }
        }
        Err(e) => {
            fail(&mut rep, &job.name, &run, "connect", e);
            return rep;
        }
    }
    rep.connected_s = Some(run.now_s());
    rep.local_port = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map_or(0, |a| a.port());
    let sock = Arc::new(sock);
    registry.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(Arc::clone(&sock));

    send(&sock, &job, &mut rep, &run);

    rep.info = match tcpinfo::get(&*sock) {
        Ok(k) => Some(TcpInfo::from(&k)),
        Err(e) => {
            run.error(format!("{}: final TCP_INFO: {e}", job.name));
            None
        }
    };
    if rep.finished_s.is_none() && run.over() {
        // Cut by the end of the run: reset, not FIN. The namespaces go right after, and an
        // orphaned socket would retransmit its FIN into a deleted link for minutes, keeping its
        // seat in a coupling group (and its namespace) all that time.
        let _ = sock.set_linger(Some(std::time::Duration::ZERO));
    }
    registry.lock().unwrap_or_else(|e| e.into_inner())[i] = None;
    // Before this function's Arc of the socket goes (it is declared after the guard).
    if let Some((seats, k)) = &job.seat {
        seats.detach(*k);
    }
    rep
}

/// Writes until the end (bulk) or `size_bytes` then FIN, and reads until the peer's FIN (sized).
fn send(sock: &Socket, job: &TcpJob, rep: &mut TcpFlowReport, run: &Run) {
    let fd = sock.as_raw_fd();
    let buf = vec![0u8; CHUNK];
    let mut left = job.report.size_bytes.unwrap_or(u64::MAX);
    while left > 0 {
        if run.over() {
            return;
        }
        let n = left.min(CHUNK as u64) as usize;
        match sock.send_with_flags(&buf[..n], libc::MSG_NOSIGNAL) {
            Ok(k) => {
                rep.bytes_written += k as u64;
                left -= k as u64;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if !wait(fd, libc::POLLOUT, run) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                fail(rep, &job.name, run, "write", e);
                return;
            }
        }
    }
    rep.all_written_s = Some(run.now_s());
    if let Err(e) = sock.shutdown(std::net::Shutdown::Write) {
        fail(rep, &job.name, run, "shutdown", e);
        return;
    }
    let mut sink = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    loop {
        match sock.recv(&mut sink) {
            Ok(0) => {
                // Like the sinks, nothing counts after the end.
                if !run.over() {
                    rep.finished_s = Some(run.now_s());
                }
                return;
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if !wait(fd, libc::POLLIN, run) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                fail(rep, &job.name, run, "read", e);
                return;
            }
        }
    }
}

/// TCP_INFO of every registered socket, for the sampler: (index, info) in index order.
pub(crate) fn sample(registry: &Registry) -> Vec<(u32, std::io::Result<tcpinfo::KernelTcpInfo>)> {
    let socks: Vec<(u32, Arc<Socket>)> = registry
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.as_ref().map(|s| (i as u32, Arc::clone(s))))
        .collect();
    socks
        .into_iter()
        .map(|(i, s)| (i, tcpinfo::get(&*s)))
        .collect()
}
