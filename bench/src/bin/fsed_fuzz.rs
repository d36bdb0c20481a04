//! Fuzzes `macroflowd`'s parser and state machine in process (see `macroflow_bench::fsed_fuzz` for
//! the strategies and the invariants checked on every execution), prints executions per second and
//! the count of each outcome, writes the figures as JSON, and exits with status 1 on any violation.
//!
//! Usage: `fsed_fuzz [--execs N] [--seed S] [--epoch-execs N] [--json PATH]` (defaults: 10,000,000
//! executions, seed 1, a new daemon every 100,000, `bench/results/fsed_fuzz.json`).

use macroflow_bench::fsed_fuzz::{self, FuzzConfig, FuzzReport};
use macroflow_bench::machine;
use std::path::PathBuf;
use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: fsed_fuzz [--execs N] [--seed S] [--epoch-execs N] [--json PATH]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut cfg = FuzzConfig::default();
    let mut json_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/fsed_fuzz.json");
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1);
        let num = |v: Option<&String>| v.and_then(|v| v.replace('_', "").parse::<u64>().ok());
        match args[i].as_str() {
            "--execs" => match num(v) {
                Some(n) => cfg.execs = n,
                None => return usage(),
            },
            "--seed" => match num(v) {
                Some(n) => cfg.seed = n,
                None => return usage(),
            },
            "--epoch-execs" => match num(v) {
                Some(n) if n > 0 => cfg.epoch_execs = n,
                _ => return usage(),
            },
            "--json" => match v {
                Some(p) => json_path = PathBuf::from(p),
                None => return usage(),
            },
            _ => return usage(),
        }
        i += 2;
    }
    let load_before = machine::loadavg();
    let (busy0, total0) = machine::machine_jiffies();
    println!(
        "fsed_fuzz: {} executions, seed {}, {} CPUs, load average {:.2} {:.2} {:.2}",
        cfg.execs,
        cfg.seed,
        machine::nproc(),
        load_before[0],
        load_before[1],
        load_before[2]
    );
    let report = fsed_fuzz::run(&cfg, |r: &FuzzReport| {
        if (r.elapsed_s as u64) % 30 == 0 {
            println!(
                "  {:>10} executions, {:>9.0}/s, {} violations",
                r.execs,
                r.execs as f64 / r.elapsed_s,
                r.violation_count
            );
        }
    });
    let (busy1, total1) = machine::machine_jiffies();
    let load_after = machine::loadavg();
    let rate = report.execs as f64 / report.elapsed_s;
    println!(
        "{} executions ({} requests to the daemon) in {:.1} s: {:.0} executions/s, {} daemons",
        report.execs, report.requests, report.elapsed_s, rate, report.epochs
    );
    println!(
        "peak state: {} flows, {} groups, {} clients; process peak RSS {:.1} MiB",
        report.peak_flows,
        report.peak_groups,
        report.peak_clients,
        machine::peak_rss_bytes() as f64 / (1 << 20) as f64
    );
    println!("outcomes:");
    for (k, n) in &report.outcomes {
        println!("  {k:60} {n:>12}");
    }
    println!(
        "violations: {} (panics: {})",
        report.violation_count, report.panics
    );
    for (k, n) in &report.violation_kinds {
        println!("  {k:40} {n:>10}");
    }
    println!("the first {} of each kind:", fsed_fuzz::MAX_KEPT);
    for v in &report.violations {
        println!("  exec {} {}: {}", v.exec, v.kind, v.detail);
        println!("    input: {}", v.input_hex);
    }
    let machine_busy = if total1 > total0 {
        (busy1 - busy0) as f64 / (total1 - total0) as f64
    } else {
        f64::NAN
    };
    let mut json = machine::facts(
        &std::env::args().collect::<Vec<_>>().join(" "),
        load_before,
        load_after,
    );
    json.extend(
        serde_json::json!({
        "machine_busy_fraction": machine_busy,
        "execs": report.execs,
        "seed": report.seed,
        "epoch_execs": cfg.epoch_execs,
        "requests": report.requests,
        "elapsed_s": report.elapsed_s,
        "execs_per_s": rate,
        "daemons": report.epochs,
        "peak_flows": report.peak_flows,
        "peak_groups": report.peak_groups,
        "peak_clients": report.peak_clients,
        "peak_rss_bytes": machine::peak_rss_bytes(),
        "outcomes": report.outcomes,
        "violation_count": report.violation_count,
        "violation_kinds": report.violation_kinds,
        "panics": report.panics,
        "violations": report.violations.iter().map(|v| serde_json::json!({
            "exec": v.exec, "kind": v.kind, "detail": v.detail, "input_hex": v.input_hex,
        })).collect::<Vec<_>>(),
        })
        .as_object()
        .expect("an object literal")
        .clone(),
    );
    let json = serde_json::Value::Object(json);
    match serde_json::to_string_pretty(&json) {
        Ok(text) if machine::parent_exists(&json_path) => {
            if let Err(e) = std::fs::write(&json_path, text + "\n") {
                eprintln!("cannot write {}: {e}", json_path.display());
                return ExitCode::from(2);
            }
            println!("wrote {}", json_path.display());
        }
        _ => {
            eprintln!("cannot write {}", json_path.display());
            return ExitCode::from(2);
        }
    }
    if report.violation_count > 0 {
        eprintln!("FAIL: {} invariant violations", report.violation_count);
        ExitCode::FAILURE
    } else {
        println!("no violations");
        ExitCode::SUCCESS
    }
}
