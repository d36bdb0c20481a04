//! Coupled flows (issue 16): a flow of a coupling group runs `macroflow_ccc` (ctrlTCP in the
//! kernel, bpf/macroflow_ccc.bpf.c). Before its connect, its socket gets its group, priority and
//! handover setting in the program's `sock_prio` map (opened by id: inside `ip netns exec`,
//! /sys/fs/bpf is not visible); scheduled priority changes are written to the same map at their
//! times, and the program applies each at the connection's next report.

use super::clock::Run;
use ccc_bpf::{SocketMap, SocketSetting};
use std::sync::Mutex;

struct SeatState {
    setting: SocketSetting,
    /// The flow's socket while it is open (written under the lock, so a change never reaches a
    /// descriptor number reused after the flow closed).
    fd: Option<i32>,
}

/// The settings of the coupled flows, by seat.
pub(crate) struct Seats {
    map: SocketMap,
    state: Mutex<Vec<SeatState>>,
}

impl std::fmt::Debug for Seats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Seats({} flows)", self.lock().len())
    }
}

impl Seats {
    pub fn new(map_id: u32, settings: Vec<SocketSetting>) -> Result<Seats, String> {
        let map = SocketMap::open(map_id).map_err(|e| format!("agent: ccc_map_id: {e}"))?;
        let state = settings
            .into_iter()
            .map(|setting| SeatState { setting, fd: None })
            .collect();
        Ok(Seats {
            map,
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SeatState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives socket `fd` its seat's current setting (before connect).
    pub fn attach(&self, seat: usize, fd: i32) -> Result<(), String> {
        let mut st = self.lock();
        let s = &mut st[seat];
        self.map.set(fd, s.setting).map_err(|e| e.0)?;
        s.fd = Some(fd);
        Ok(())
    }

    /// The flow is about to close its socket.
    pub fn detach(&self, seat: usize) {
        self.lock()[seat].fd = None;
    }

    /// A priority change: kept for a flow not yet started, written for an open one.
    pub fn change(&self, seat: usize, priority: f64) -> Result<(), String> {
        let mut st = self.lock();
        let s = &mut st[seat];
        s.setting.priority = priority;
        match s.fd {
            Some(fd) => self.map.set(fd, s.setting).map_err(|e| e.0),
            None => Ok(()),
        }
    }
}

/// Detaches a seat when dropped: declared after the socket, so every early return detaches
/// before the socket closes.
pub(crate) struct Attached<'a>(pub &'a Seats, pub usize);

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        self.0.detach(self.1);
    }
}

/// One scheduled change: (time since the epoch, seat, priority, the flow's name).
pub(crate) type Change = (u64, usize, f64, String);

/// Applies the changes (sorted by time) at their times; each failure is an error line.
pub(crate) fn run_changes(
    seats: std::sync::Arc<Seats>,
    changes: Vec<Change>,
    epoch_ns: u64,
    run: Run,
) {
    for (t_ns, seat, p, name) in changes {
        if !run.sleep_until(epoch_ns + t_ns) {
            return;
        }
        if let Err(e) = seats.change(seat, p) {
            run.error(format!(
                "{name}: priority change to {p} at {:.3} s: {e}",
                run.now_s()
            ));
        }
    }
}
