//! The programs the Linux engine (`python/macroflow/linux.py`) starts inside the network
//! namespaces of a run, as `macroflow._native._linux_main([...])` in a bare interpreter:
//!
//! - [`delayline`]: the userspace delay line. This kernel has no `netem`; a wire is two
//!   interfaces of the run's wire namespace bridged at layer 2 through AF_PACKET sockets, each
//!   frame held for the link's one-way delay (monotonic clock) and dropped with the link's
//!   Bernoulli loss probability. It never reorders, and it counts every frame it could not carry.
//! - [`agent`]: one per host or router namespace: TCP senders with a kernel congestion control per
//!   flow, sinks, UDP senders driven by the simulator's own generators, web-like flows, and the
//!   samplers (TCP_INFO of its senders, qdisc statistics of its interfaces).
//!
//! - [`fse`]: `macroflowd`'s server for the FSE groups of the run's media flows (issue 21).
//!
//! All read a JSON configuration file and write a JSON result file (formats: the `Config` and
//! `Report` types of each module). Time is CLOCK_MONOTONIC, which every namespace shares, so the
//! orchestrator passes one epoch to all of them.

pub mod agent;
pub mod delayline;
pub mod fse;

/// `_linux_main(["delayline", CONFIG])` or `_linux_main(["agent", CONFIG])`.
pub fn main(args: &[String]) -> Result<(), String> {
    // The orchestrator starts these programs; if it dies without stopping them (SIGKILL, a pool
    // worker's os._exit), SIGTERM makes them write their report and exit instead of running on.
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and changes nothing else.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    match args {
        [cmd, cfg] if cmd == "delayline" => delayline::main(std::path::Path::new(cfg)),
        [cmd, cfg] if cmd == "agent" => agent::main(std::path::Path::new(cfg)),
        [cmd, cfg] if cmd == "fsed" => fse::main(std::path::Path::new(cfg)),
        _ => Err(format!(
            "usage: delayline CONFIG.json | agent CONFIG.json | fsed CONFIG.json (got {args:?})"
        )),
    }
}
