//! The C library from C: `tests/c/test_client.c` compiled with the system C compiler (`$CC`, else
//! `cc`) against `include/macroflow_fse.h` and the staticlib, run against a daemon started
//! in-process on a temporary socket. The C program checks the scenarios of
//! crates/fsed/tests/server.rs itself; this side checks its exit status, that the header's
//! struct layouts are the Rust ones, and RFC 8699 App. C's tables as the C program printed them
//! against an in-process `coupling::fse::FseGroup` run of the same steps, bit for bit.
//!
//! (The `cc` crate is not used: it compiles libraries from build scripts, has no executable
//! mode, and wants the TARGET/HOST variables Cargo gives build scripts but not tests.)

use coupling::fse::{Algorithm, FseGroup, FseUpdate};
use coupling::{FlowId, Instant};
use fsed::config::Config;
use macroflow_fse::*;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

const M: f64 = 1e6;

/// A daemon on a socket in a temporary directory, stopped when dropped.
struct Daemon {
    path: PathBuf,
    _bg: fsed::server::Background,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(config: &str) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fse.sock");
        let bg =
            fsed::server::Background::start(&path, 0o600, Config::parse(config).unwrap()).unwrap();
        Daemon {
            path,
            _bg: bg,
            _dir: dir,
        }
    }
}

/// The staticlib Cargo built with this test (target/<profile>/libmacroflow_fse.a; the test is
/// target/<profile>/deps/c_client-<hash>).
fn staticlib() -> PathBuf {
    // `cargo test` builds every crate type of the library into `deps/` beside this test (it
    // copies them up into the profile directory only for `cargo build`, so that copy may be
    // stale or missing).
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libmacroflow_fse.a");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// Compiles and links `tests/c/test_client.c` into `out`.
fn compile(out: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(compiler())
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-g",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/test_client.c"))
        .arg(staticlib())
        // What `rustc --print native-static-libs` lists for the staticlib on Linux.
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .arg("-o")
        .arg(out)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "compiling test_client.c: {status}");
}

/// One printed line, its numbers as f64 bits (%.17g round-trips a double exactly).
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(u64),
}

type Line = Vec<Tok>;

fn parse(line: &str) -> Line {
    line.split_whitespace()
        .map(|w| match w.parse::<f64>() {
            Ok(x) => Tok::Num(x.to_bits()),
            Err(_) => Tok::Word(w.to_string()),
        })
        .collect()
}

fn word(s: &str) -> Tok {
    Tok::Word(s.into())
}

fn num(x: f64) -> Tok {
    Tok::Num(x.to_bits())
}

fn as_u64(t: &Tok) -> u64 {
    match t {
        Tok::Num(b) => f64::from_bits(*b) as u64,
        other => panic!("not a number: {other:?}"),
    }
}

/// RFC 8699 App. C on an in-process FseGroup, printed as test_client.c prints it through the
/// daemon. `flows`: the ids the daemon gave flows 1 and 2.
fn appendix_c_expected(f1: u64, f2: u64) -> Vec<Line> {
    let mut g = FseGroup::new(Algorithm::Passive);
    let mut out: Vec<Line> = Vec::new();
    let mut now = 0u64;
    let mut tick = || {
        now += 100;
        Instant::from_millis(now)
    };
    let table = |g: &FseGroup, out: &mut Vec<Line>, step: &str| {
        let mut rows = g.flows();
        rows.sort_by_key(|v| v.flow);
        out.push(vec![
            word("table"),
            word(step),
            word(g.algorithm().name()),
            num(g.sum_calculated_rate()),
            num(g.leftover()),
            num(rows.len() as f64),
        ]);
        for v in rows {
            out.push(vec![
                word("row"),
                num(v.flow.0 as f64),
                num(v.priority),
                num(v.fse_rate_bps),
                num(v.desired_rate_bps),
            ]);
        }
    };
    let register = |g: &mut FseGroup, out: &mut Vec<Line>, f: u64, p: f64, now: Instant| {
        let r = g.register(FlowId(f), p, M, now).unwrap();
        out.push(vec![
            word("register"),
            num(f as f64),
            num(p),
            num(M),
            num(r),
        ]);
    };
    let update = |g: &mut FseGroup, out: &mut Vec<Line>, f: u64, cc: f64, dr: f64, now: Instant| {
        let mut u = FseUpdate::new(cc, now);
        if dr >= 0.0 {
            u = u.desired(dr);
        }
        let r = g.update(FlowId(f), u).unwrap().rate_bps;
        out.push(vec![
            word("update"),
            num(f as f64),
            num(cc),
            num(dr),
            num(r),
        ]);
    };
    let fse_r = |g: &FseGroup, f: u64| g.flow(FlowId(f)).unwrap().fse_rate_bps;

    register(&mut g, &mut out, f1, 1.0, tick());
    table(&g, &mut out, "flow-1-registers");
    for cc in 2..=10 {
        update(&mut g, &mut out, f1, cc as f64 * M, -1.0, tick());
        table(&g, &mut out, &format!("flow-1-at-{cc}"));
    }
    register(&mut g, &mut out, f2, 0.5, tick());
    table(&g, &mut out, "flow-2-joins");
    update(&mut g, &mut out, f1, 8.0 * M, -1.0, tick());
    table(&g, &mut out, "flow-1-to-8");
    update(&mut g, &mut out, f2, 2.0 * M, -1.0, tick());
    table(&g, &mut out, "flow-2-to-2");
    let cc = fse_r(&g, f1) + M;
    update(&mut g, &mut out, f1, cc, 2.0 * M, tick());
    table(&g, &mut out, "flow-1-application-limited");
    let cc = fse_r(&g, f2) + M;
    update(&mut g, &mut out, f2, cc, -1.0, tick());
    table(&g, &mut out, "flow-2-takes-the-leftover");
    g.leave(FlowId(f1)).unwrap();
    out.push(vec![word("leave"), num(f1 as f64)]);
    let cc = fse_r(&g, f2) - 2.0 * M;
    update(&mut g, &mut out, f2, cc, -1.0, tick());
    table(&g, &mut out, "flow-1-left");
    // The draft's last table: flow 2 alone at 9.33.
    assert!((fse_r(&g, f2) / M - 9.33).abs() < 0.006);
    out
}

/// The header's layouts, as test_client.c prints them, against the Rust mirrors.
fn rust_layout() -> Line {
    let mut l = vec![word("layout")];
    for n in [
        size_of::<mf_fse_group>(),
        offset_of!(mf_fse_group, label),
        offset_of!(mf_fse_group, five_tuple),
        size_of::<mf_fse_five_tuple>(),
        offset_of!(mf_fse_five_tuple, dscp),
        size_of::<mf_fse_registered>(),
        size_of::<mf_fse_registered_window>(),
        size_of::<mf_fse_window>(),
        size_of::<mf_fse_flow_info>(),
        size_of::<mf_fse_group_info>(),
        offset_of!(mf_fse_group_info, coupler),
        size_of::<mf_fse_push>(),
    ] {
        l.push(num(n as f64));
    }
    l
}

#[test]
fn the_c_client_against_a_live_daemon() {
    let d = Daemon::start("");
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("test_client");
    compile(&exe);
    let out = Command::new(&exe).arg(&d.path).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "test_client: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let lines: Vec<Line> = stdout.lines().map(parse).collect();
    assert_eq!(lines.last(), Some(&vec![word("done")]), "{stdout}");
    assert_eq!(lines[0], rust_layout(), "the header's layouts");

    // App. C: from the first register to the last table.
    let registers: Vec<u64> = lines
        .iter()
        .filter(|l| l[0] == word("register"))
        .map(|l| as_u64(&l[1]))
        .collect();
    let want = appendix_c_expected(registers[0], registers[1]);
    let got = &lines[1..1 + want.len()];
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "line {}: {:?}", i + 2, stdout.lines().nth(i + 1));
    }
    assert_eq!(got.len(), want.len());

    // Bad requests: refused by the daemon naming the field (the C side checked nothing changed).
    let refused: Vec<Tok> = lines
        .iter()
        .filter(|l| l[0] == word("refused"))
        .map(|l| l[1].clone())
        .collect();
    let want_refused = [
        "register_rate.priority",
        "register_rate.priority",
        "register_rate.algorithm",
        "register_rate.timeout_ms",
        "register_rate.group",
        "register_rate.desired_rate_bps",
        "update_rate.flow",
        "set_priority.priority",
        "set_priority.flow",
        "refresh.flow",
        "leave.flow",
        "subscribe.flow",
        "query_flow.flow",
        "query_group.group",
        "update_rate.flow",
        "update_rate.flow",
    ];
    assert_eq!(refused, want_refused.map(word));
    // NULL pointers and bad values: the bad-argument code, every one printed.
    let bad = lines
        .iter()
        .filter(|l| l[0] == word("bad_argument"))
        .count();
    assert_eq!(bad, 34, "{stdout}");
    // A push, with the rate the other flow's update got (checked in C).
    assert_eq!(lines.iter().filter(|l| l[0] == word("push")).count(), 1);
}

/// The C++ compiler accepts the header (its `extern "C"` block and inline helpers), if there is
/// one.
#[test]
fn the_header_compiles_as_cpp() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("h.cpp");
    std::fs::write(
        &src,
        "#include \"macroflow_fse.h\"\nint main() { mf_fse_group g = mf_fse_group_label(\"x\"); \
         return g.kind == MF_FSE_GROUP_LABEL ? 0 : 1; }\n",
    )
    .unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    match Command::new(&cxx)
        .args(["-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I"])
        .arg(include)
        .arg(&src)
        .status()
    {
        Ok(s) => assert!(s.success(), "{cxx} on the header: {s}"),
        Err(e) => eprintln!("skipped: no C++ compiler ({cxx}: {e})"),
    }
}
