//! Builds bpf/tiu_tc.bpf.c into a skeleton, as crates/ccc-bpf/build.rs builds macroflow_ccc: vmlinux.h
//! from the running kernel's BTF with bpftool (never committed), clang through libbpf-cargo.
//! Where bpftool, clang or the BTF is missing the crate builds without the program and says so at
//! run time (`cfg(tiu_bpf_missing)`).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest
        .join("../../bpf")
        .canonicalize()
        .expect("bpf/ next to crates/");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let src = bpf_dir.join("tiu_tc.bpf.c");
    println!("cargo:rustc-check-cfg=cfg(tiu_bpf_missing)");
    for f in ["tiu_tc.bpf.c", "tiu_tc.h"] {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(f).display());
    }
    println!("cargo:rerun-if-changed={BTF}");
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    println!("cargo:rerun-if-env-changed=CLANG");

    if let Err(why) = build(&src, &bpf_dir, &out) {
        println!("cargo:warning=tiu_tc is built without its BPF program: {why}");
        println!("cargo:rustc-cfg=tiu_bpf_missing");
        println!("cargo:rustc-env=TIU_BPF_MISSING={why}");
        // An empty skeleton keeps the include! valid.
        std::fs::write(out.join("tiu_tc.skel.rs"), "").unwrap();
    }
}

fn build(src: &Path, bpf_dir: &Path, out: &Path) -> Result<(), String> {
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
        .build_and_generate(out.join("tiu_tc.skel.rs"))
        .map_err(|e| format!("building the BPF program failed: {e:#}"))
}
