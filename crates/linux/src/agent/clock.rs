//! Time and stopping (issue 15): every namespace shares CLOCK_MONOTONIC, so one epoch given by
//! the orchestrator lines up the agents and the delay line; absolute sleeps on that clock keep
//! senders and samplers on their nominal instants without drift.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The longest a sleeping or polling thread goes without looking at the stop flag: a signal ends
/// the run within about this long.
pub(crate) const CHECK_NS: u64 = 20_000_000;

/// CLOCK_MONOTONIC in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps until the absolute CLOCK_MONOTONIC instant `t_ns` (TIMER_ABSTIME: no drift from the
/// time spent between computing the instant and sleeping).
fn sleep_abs(t_ns: u64) {
    let ts = timespec(t_ns);
    loop {
        // SAFETY: `ts` is valid; a null remainder is allowed with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

/// The calling thread's timer slack to 1 ns (the default 50 µs would make every absolute sleep
/// up to 50 µs late). It is per thread: every thread that sleeps to an instant calls it.
pub(crate) fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// What every thread of a run shares: the epoch, the end, the stop flag and the error log.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub epoch_ns: u64,
    pub end_ns: u64,
    stop: Arc<AtomicBool>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Run {
    pub fn new(epoch_ns: u64, end_ns: u64, stop: Arc<AtomicBool>) -> Self {
        Run {
            epoch_ns,
            end_ns,
            stop,
            errors: Arc::default(),
        }
    }

    /// Seconds since the epoch (negative before it). A division, not a product with 1e-9, so
    /// the nominal sampling instants come out as the decimal numbers they are (0.3, not
    /// 0.30000000000000004).
    pub fn t_s(&self, ns: u64) -> f64 {
        ns.wrapping_sub(self.epoch_ns) as i64 as f64 / 1e9
    }

    /// Seconds since the epoch, now.
    pub fn now_s(&self) -> f64 {
        self.t_s(now_ns())
    }

    /// A signal asked the agent to stop.
    pub fn signalled(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The run is over: its end has come or a signal stopped it.
    pub fn over(&self) -> bool {
        self.signalled() || now_ns() >= self.end_ns
    }

    /// Sleeps until `t_ns` (absolute, CLOCK_MONOTONIC); true if that instant came while the run
    /// was still on (late or not), false if the run ended first (then it returns at the end or
    /// within [`CHECK_NS`] of a signal).
    pub fn sleep_until(&self, t_ns: u64) -> bool {
        loop {
            if self.signalled() {
                return false;
            }
            let now = now_ns();
            if now >= self.end_ns {
                return false;
            }
            if now >= t_ns {
                return true;
            }
            sleep_abs(t_ns.min(now + CHECK_NS).min(self.end_ns));
        }
    }

    /// Nanoseconds left until the end, at most [`CHECK_NS`] (a poll timeout); 0 when over.
    pub fn poll_ns(&self) -> u64 {
        if self.signalled() {
            return 0;
        }
        self.end_ns.saturating_sub(now_ns()).min(CHECK_NS)
    }

    /// Records what went wrong without stopping the agent.
    pub fn error(&self, msg: String) {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(msg);
    }

    /// The errors so far, duplicates removed (first occurrence kept, in order).
    pub fn take_errors(&self) -> Vec<String> {
        let mut v = std::mem::take(&mut *self.errors.lock().unwrap_or_else(|e| e.into_inner()));
        let mut seen = std::collections::HashSet::new();
        v.retain(|m| seen.insert(m.clone()));
        v
    }
}

/// The process's SIGTERM/SIGINT handling: installed once per process (signal handlers are
/// process-wide, and signal-hook cannot give back the previous handler), shared by the agents the
/// process runs. While at least one agent runs, either signal sets the stop flag; while none runs,
/// SIGTERM does its default (terminates the process), so a bare interpreter that has returned
/// from the agent can still be killed. SIGINT keeps any previous handler too (Python's, which
/// raises KeyboardInterrupt once the agent has returned).
struct Signals {
    stop: Arc<AtomicBool>,
    idle: Arc<AtomicBool>,
    running: Mutex<usize>,
}

static SIGNALS: OnceLock<Result<Signals, String>> = OnceLock::new();

fn signals() -> Result<&'static Signals, String> {
    SIGNALS
        .get_or_init(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let idle = Arc::new(AtomicBool::new(true));
            let err = |e: std::io::Error| format!("agent: installing the signal handlers: {e}");
            signal_hook::flag::register_conditional_default(libc::SIGTERM, Arc::clone(&idle))
                .map_err(err)?;
            for sig in [libc::SIGTERM, libc::SIGINT] {
                signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(err)?;
            }
            Ok(Signals {
                stop,
                idle,
                running: Mutex::new(0),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Marks an agent as running while it lives (see [`Signals`]).
pub(crate) struct SignalGuard(&'static Signals);

impl SignalGuard {
    /// Installs the handlers if needed. The first agent to start clears a stop flag left by an
    /// earlier run in the same process.
    pub fn new() -> Result<Self, String> {
        let s = signals()?;
        let mut n = s.running.lock().unwrap_or_else(|e| e.into_inner());
        if *n == 0 {
            s.stop.store(false, Ordering::SeqCst);
        }
        *n += 1;
        s.idle.store(false, Ordering::SeqCst);
        Ok(SignalGuard(s))
    }

    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0.stop)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let mut n = self.0.running.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            self.0.idle.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_since_epoch_before_and_after() {
        let r = Run::new(5_000_000_000, 10_000_000_000, Arc::default());
        assert_eq!(r.t_s(6_500_000_000), 1.5);
        assert_eq!(r.t_s(4_000_000_000), -1.0);
    }

    #[test]
    fn sleep_until_an_instant_and_to_the_end() {
        set_timer_slack();
        let now = now_ns();
        let r = Run::new(now, now + 30_000_000, Arc::default());
        assert!(r.sleep_until(now + 5_000_000));
        let woke = now_ns();
        assert!(
            woke >= now + 5_000_000 && woke < now + 15_000_000,
            "{}",
            woke - now
        );
        // An instant past the end: returns false at the end.
        assert!(!r.sleep_until(now + 1_000_000_000));
        assert!(now_ns() >= now + 30_000_000);
        assert!(r.over());
        assert_eq!(r.poll_ns(), 0);
    }

    #[test]
    fn a_stop_flag_ends_sleeps() {
        let flag = Arc::new(AtomicBool::new(true));
        let now = now_ns();
        let r = Run::new(now, now + 10_000_000_000, flag);
        assert!(!r.sleep_until(now + 5_000_000_000));
        assert!(now_ns() < now + 1_000_000_000);
    }

    #[test]
    fn errors_are_listed_once() {
        let r = Run::new(0, 1, Arc::default());
        for m in ["a", "b", "a", "c", "b"] {
            r.error(m.into());
        }
        assert_eq!(r.take_errors(), ["a", "b", "c"]);
    }
}
