//! Memory per flow pair of the false-sharing detector (seed 000 sec. 4.1), and per flow of SBD's
//! statistics (RFC 8382 sec. 3.2), after 1e3, 1e5 and 1e7 observations (issue 20: "memory per flow
//! pair, constant in run length"). A counting global allocator measures the bytes allocated and
//! still live since just before each one was constructed, at each checkpoint; they are printed with
//! the detector's own `memory()` figure and the struct's inline size. Exits with status 1 if the
//! live bytes grow between 1e5 and 1e7 observations (for either), after printing.
//!
//! The detector is fed the stream of `benches/detect.rs` (`macroflow_bench::stream::trace`: two
//! flows behind one FIFO queue, about 1 % losses reported by `on_loss`, rare reordering between the
//! flows); SBD one flow (`stream::sbd_flow`) at 10,000 packets per second (T = 350 ms: 2,857
//! intervals closed by 1e7 packets), 1 % of them reported lost.
//!
//! Usage: `detect_memory [--json PATH]` (default `target/detect_memory.json`, read by
//! `bench/report_detect.py`).

use coupling::falseshare::{FalseSharingConfig, FalseSharingDetector};
use coupling::sbd::{FlowStats, IntervalRecord, SbdConfig};
use coupling::Instant;
use macroflow_bench::stream::{self, feed, Replay, A, B, SEED, TRACE_PKTS};
use std::alloc::{GlobalAlloc, Layout, System};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The system allocator, keeping the bytes live and the number of allocations made.
struct CountingAlloc;

static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only counters are kept.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as u64, Relaxed);
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as u64, Relaxed);
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size as u64, Relaxed);
            LIVE_BYTES.fetch_sub(layout.size() as u64, Relaxed);
            ALLOCATIONS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as u64, Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

fn live() -> u64 {
    LIVE_BYTES.load(Relaxed)
}

fn allocations() -> u64 {
    ALLOCATIONS.load(Relaxed)
}

const CHECKPOINTS: [u64; 3] = [1_000, 100_000, 10_000_000];

/// One checkpoint: observations so far, bytes live since just before construction, allocations
/// made since construction, and (detector only) its own heap figure and delay-window fill.
struct Row {
    observations: u64,
    live_bytes: u64,
    allocations_since_new: u64,
    reported_heap_bytes: Option<u64>,
    delay_samples: Option<u64>,
}

fn detector_rows() -> (Vec<Row>, u64, u64, u64) {
    let cfg = FalseSharingConfig::default();
    let mut replay = Replay::new(stream::trace(TRACE_PKTS, SEED));
    // Allocated before the baseline, so only the detector's bytes are counted.
    let mut rows = Vec::with_capacity(CHECKPOINTS.len());
    let base = live();
    let mut d = FalseSharingDetector::new(cfg, A, B, Instant::ZERO).unwrap();
    let constructed = live() - base;
    let allocs0 = allocations();
    let mut done = 0u64;
    for cp in CHECKPOINTS {
        for o in replay.by_ref().take((cp - done) as usize) {
            feed(&mut d, o);
        }
        done = cp;
        let m = d.memory();
        rows.push(Row {
            observations: done,
            live_bytes: live() - base,
            allocations_since_new: allocations() - allocs0,
            reported_heap_bytes: Some(m.heap_bytes as u64),
            delay_samples: Some(m.delay_samples as u64),
        });
    }
    let (decisions, c) = (d.decisions(), d.counters());
    drop(d);
    let after_drop = live() - base;
    println!(
        "detector after {done} observations: {decisions}; packets {}, loss reports {}, \
         unreported {}",
        c.packets, c.loss_reports, c.unreported_pkts
    );
    (
        rows,
        constructed,
        after_drop,
        std::mem::size_of::<FalseSharingDetector>() as u64,
    )
}

fn sbd_rows() -> (Vec<Row>, u64, u64, u64, u64) {
    let cfg = SbdConfig::default();
    let spacing_ns = 100_000; // 10,000 packets per second
    let mut flow = stream::sbd_flow(SEED);
    let mut rows = Vec::with_capacity(CHECKPOINTS.len());
    let base = live();
    let mut f = FlowStats::new(cfg, Instant::ZERO).unwrap();
    let constructed = live() - base;
    let allocs0 = allocations();
    let mut done = 0u64;
    for cp in CHECKPOINTS {
        for (i, owd) in (done..cp).zip(&mut flow) {
            let now = Instant::from_nanos(i * spacing_ns);
            match owd {
                Some(owd) => f.on_packet(now, owd),
                None => f.on_loss(now, 1),
            }
            .unwrap();
        }
        done = cp;
        rows.push(Row {
            observations: done,
            live_bytes: live() - base,
            allocations_since_new: allocations() - allocs0,
            reported_heap_bytes: None,
            delay_samples: None,
        });
    }
    let expected_heap = (f.history_capacity() * std::mem::size_of::<IntervalRecord>()) as u64;
    let (closed, history) = (f.counters().intervals_closed, f.history_len());
    drop(f);
    let after_drop = live() - base;
    println!(
        "SBD flow after {done} packets: {closed} intervals closed, history {history}/{}",
        cfg.n
    );
    (
        rows,
        constructed,
        after_drop,
        std::mem::size_of::<FlowStats>() as u64,
        expected_heap,
    )
}

fn rows_json(rows: &[Row]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
            format!(
                "{{\"observations\": {}, \"live_bytes\": {}, \"allocations_since_new\": {}, \
                 \"reported_heap_bytes\": {}, \"delay_samples\": {}}}",
                r.observations,
                r.live_bytes,
                r.allocations_since_new,
                opt(r.reported_heap_bytes),
                opt(r.delay_samples)
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn print_rows(rows: &[Row]) {
    println!(
        "  {:>12} {:>12} {:>13} {:>14} {:>14}",
        "observations", "live bytes", "allocations", "memory() heap", "delay samples"
    );
    for r in rows {
        let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "  {:>12} {:>12} {:>13} {:>14} {:>14}",
            r.observations,
            r.live_bytes,
            r.allocations_since_new,
            opt(r.reported_heap_bytes),
            opt(r.delay_samples)
        );
    }
}

/// Whether the live bytes grew between the 1e5 and the 1e7 checkpoint.
fn grew(rows: &[Row]) -> bool {
    rows[2].live_bytes > rows[1].live_bytes
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let json_path = match args.iter().position(|a| a == "--json") {
        Some(i) => match args.get(i + 1) {
            Some(p) => std::path::PathBuf::from(p),
            None => {
                eprintln!("usage: detect_memory [--json PATH]");
                return ExitCode::from(2);
            }
        },
        // The workspace's target directory, where bench/report_detect.py looks.
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("bench/ lies in the workspace")
            .join("target/detect_memory.json"),
    };

    let (det, det_new, det_after_drop, det_inline) = detector_rows();
    println!(
        "false-sharing detector (one flow pair, default config): {det_new} bytes allocated by new(), \
         {det_inline} bytes inline, {det_after_drop} bytes left after drop"
    );
    print_rows(&det);
    let (sbd, sbd_new, sbd_after_drop, sbd_inline, sbd_expected) = sbd_rows();
    println!(
        "SBD FlowStats (one flow, default config): {sbd_new} bytes allocated by new() (N x {} = \
         {sbd_expected}), {sbd_inline} bytes inline, {sbd_after_drop} bytes left after drop",
        std::mem::size_of::<IntervalRecord>()
    );
    print_rows(&sbd);

    let json = format!(
        "{{\"detector\": {{\"new_bytes\": {det_new}, \"inline_bytes\": {det_inline}, \
         \"after_drop_bytes\": {det_after_drop}, \"rows\": {}}}, \
         \"sbd_flow\": {{\"new_bytes\": {sbd_new}, \"inline_bytes\": {sbd_inline}, \
         \"expected_heap_bytes\": {sbd_expected}, \"after_drop_bytes\": {sbd_after_drop}, \
         \"rows\": {}}}}}\n",
        rows_json(&det),
        rows_json(&sbd)
    );
    if let Err(e) = std::fs::write(&json_path, json) {
        eprintln!("cannot write {}: {e}", json_path.display());
        return ExitCode::from(2);
    }
    println!("wrote {}", json_path.display());

    let mut failed = false;
    for (name, rows) in [("false-sharing detector", &det), ("SBD flow", &sbd)] {
        if grew(rows) {
            eprintln!(
                "FAIL: {name}'s live bytes grew from {} after 1e5 observations to {} after 1e7",
                rows[1].live_bytes, rows[2].live_bytes
            );
            failed = true;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        println!("memory constant from 1e5 to 1e7 observations: detector and SBD flow");
        ExitCode::SUCCESS
    }
}
