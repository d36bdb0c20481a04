//! Facts about the machine and this process that results files record next to their figures.

use std::path::Path;

/// CPUs this process may run on.
pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The kernel release (`uname -r`).
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The CPU model as /proc/cpuinfo names it.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> [f64; 3] {
    let t = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = t.split_whitespace().map(|v| v.parse().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// This process's resident set (VmRSS), bytes.
pub fn rss_bytes() -> u64 {
    status_kib("/proc/self/status", "VmRSS:") * 1024
}

/// This process's peak resident set (VmHWM), bytes.
pub fn peak_rss_bytes() -> u64 {
    status_kib("/proc/self/status", "VmHWM:") * 1024
}

fn status_kib(path: &str, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Busy and total jiffies of the whole machine (/proc/stat's first line): busy is everything but
/// idle and iowait.
pub fn machine_jiffies() -> (u64, u64) {
    let t = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = t
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// Per thread of this process: (name, user + system jiffies, voluntary and involuntary context
/// switches).
pub fn threads() -> Vec<(String, u64, u64, u64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        // comm is in parentheses and may hold spaces: split after the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // Fields after comm start at 3 (state); utime is 14, stime 15.
        let jiffies = rest
            .get(11)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + rest
                .get(12)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        let status = p.join("status");
        let vol = status_kib(status.to_str().unwrap_or(""), "voluntary_ctxt_switches:");
        let invol = status_kib(status.to_str().unwrap_or(""), "nonvoluntary_ctxt_switches:");
        out.push((name, jiffies, vol, invol));
    }
    out
}

/// Clock ticks per second for /proc's jiffies (USER_HZ, 100 on Linux).
pub const USER_HZ: f64 = 100.0;

/// Whether `p` is writable as a results file (its folder exists).
pub fn parent_exists(p: &Path) -> bool {
    p.parent()
        .is_none_or(|d| d.as_os_str().is_empty() || d.is_dir())
}

/// The calling thread's user + system jiffies and its voluntary and involuntary context switches.
pub fn this_thread() -> (u64, u64, u64) {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let jiffies = stat.rfind(')').map_or(0, |close| {
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        rest.get(11)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + rest
                .get(12)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
    });
    (
        jiffies,
        status_kib("/proc/thread-self/status", "voluntary_ctxt_switches:"),
        status_kib("/proc/thread-self/status", "nonvoluntary_ctxt_switches:"),
    )
}

/// The head of every result file: the command that made it, when, and the machine's facts (its
/// load average before and after the run says how much else was running).
pub fn facts(
    command: &str,
    load_before: [f64; 3],
    load_after: [f64; 3],
) -> serde_json::Map<String, serde_json::Value> {
    let v = serde_json::json!({
        "command": command,
        "date_unix_s": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "nproc": nproc(),
        "kernel": kernel(),
        "cpu": cpu_model(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    });
    match v {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("an object literal"),
    }
}
