//! Builds bpf/macroflow_ccc.bpf.c into a skeleton (crates/bpf-build: vmlinux.h from this kernel's
//! BTF, clang through libbpf-cargo; without them the crate builds without the program and says
//! why at run time, `cfg(ccc_bpf_missing)`).

fn main() {
    bpf_build::skeleton(
        "macroflow_ccc",
        &["macroflow_ccc.h", "ccc_core.h"],
        "ccc_bpf_missing",
    );
}
