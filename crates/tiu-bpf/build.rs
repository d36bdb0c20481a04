//! Builds bpf/tiu_tc.bpf.c into a skeleton (crates/bpf-build: vmlinux.h from this kernel's BTF,
//! clang through libbpf-cargo; without them the crate builds without the program and says why at
//! run time, `cfg(tiu_bpf_missing)`).

fn main() {
    bpf_build::skeleton("tiu_tc", &["tiu_tc.h"], "tiu_bpf_missing");
}
