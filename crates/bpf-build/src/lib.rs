//! The build step of the crates that load a BPF program from `bpf/` (`crates/ccc-bpf`,
//! `crates/tiu-bpf`), called from their `build.rs`: `vmlinux.h` is generated with bpftool from the
//! running kernel's BTF (never committed), then libbpf-cargo compiles the program with clang and
//! writes the skeleton `OUT_DIR/<name>.skel.rs`. Where bpftool, clang or the kernel's BTF is
//! missing, the crate builds without the program: an empty skeleton, `cfg(<cfg>)` set, and the
//! reason in the environment variable `<CFG>` (upper case) for the crate to report at run time.
//! A program that does not compile fails the build: that is a bug, not a missing tool, and
//! building without it would turn every test of it into a SKIP.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Builds `bpf/<name>.bpf.c` (with `headers` beside it) into `OUT_DIR/<name>.skel.rs`; `cfg` is
/// the cfg a build without the program sets (e.g. `ccc_bpf_missing`).
pub fn skeleton(name: &str, headers: &[&str], cfg: &str) {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest
        .join("../../bpf")
        .canonicalize()
        .expect("bpf/ next to crates/");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let src = bpf_dir.join(format!("{name}.bpf.c"));
    let skel = out.join(format!("{name}.skel.rs"));
    println!("cargo:rustc-check-cfg=cfg({cfg})");
    println!("cargo:rerun-if-changed={}", src.display());
    for f in headers {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(f).display());
    }
    println!("cargo:rerun-if-changed={BTF}");
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    println!("cargo:rerun-if-env-changed=CLANG");

    if let Err(why) = build(&src, &bpf_dir, &out, &skel) {
        // One line: cargo reads its instructions line by line.
        let why = why.replace('\n', " ");
        println!("cargo:warning={name} is built without its BPF program: {why}");
        println!("cargo:rustc-cfg={cfg}");
        println!("cargo:rustc-env={}={why}", cfg.to_uppercase());
        // An empty skeleton keeps the include! valid.
        std::fs::write(&skel, "").unwrap();
    }
}

fn build(src: &Path, bpf_dir: &Path, out: &Path, skel: &Path) -> Result<(), String> {
    if !Path::new(BTF).exists() {
        return Err(format!("this kernel has no BTF ({BTF} is missing)"));
    }
    let bpftool = env::var("BPFTOOL").unwrap_or_else(|_| "bpftool".into());
    let dump = Command::new(&bpftool)
        .args(["btf", "dump", "file", BTF, "format", "c"])
        .output()
        .map_err(|e| format!("bpftool not found ({bpftool}: {e}); Debian package bpftool"))?;
    if !dump.status.success() {
        return Err(format!(
            "bpftool could not dump {BTF}: {}",
            String::from_utf8_lossy(&dump.stderr).trim()
        ));
    }
    std::fs::write(out.join("vmlinux.h"), &dump.stdout).map_err(|e| e.to_string())?;
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    if Command::new(&clang).arg("--version").output().is_err() {
        return Err(format!("clang not found ({clang}); Debian package clang"));
    }
    libbpf_cargo::SkeletonBuilder::new()
        .source(src)
        .clang(&clang)
        .clang_args([
            "-I".as_ref(),
            out.as_os_str(),
            "-I".as_ref(),
            bpf_dir.as_os_str(),
            // clang 14 defaults to v1; v3 (kernel 5.1+) has 32-bit jumps: fewer instructions.
            "-mcpu=v3".as_ref(),
            "-Wall".as_ref(),
            "-Werror".as_ref(),
        ])
        .build_and_generate(skel)
        .unwrap_or_else(|e| panic!("{} does not compile: {e:#}", src.display()));
    Ok(())
}
