/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Compile check of ccc_core.h for BPF (not a program to load):
 *   clang -O2 -g -target bpf -c bpf/ccc_bpf_compile_test.c -o /tmp/ccc_bpf_test.o
 * A minimal type prelude stands in for vmlinux.h / bpf_helpers.h; every API function is called on
 * a group in a global (as it would be in a map value).
 */
typedef unsigned long long __u64;
typedef unsigned int __u32;
typedef unsigned short __u16;
typedef unsigned char __u8;
typedef long long __s64;
typedef int __s32;
#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))

#include "ccc_core.h"

struct ccc_group g SEC(".bss");
struct ccc_release rel[CCC_MAX_CONNS] SEC(".bss");
__u64 sink SEC(".bss");

SEC("tc")
int ccc_calls(void *ctx)
{
	__u64 cw = 0, ss = 0, conn = 0;
	struct ccc_view v;
	int rc = 0;

	(void)ctx;
	rc |= ccc_init(&g, 1);
	rc |= ccc_set_max_burst(&g, 4);
	rc |= ccc_register(&g, 1, 65536, 10, 1000000000, &cw, &ss);
	rc |= ccc_register(&g, 2, 32768, 10, 1000000000, &cw, &ss);
	rc |= ccc_update(&g, 1, 20, 10, CCC_CA, 0, 10, &cw, &ss);
	rc |= ccc_update(&g, 2, 1, 7, CCC_SS, 1, 0, &cw, &ss);
	rc |= ccc_set_priority(&g, 2, 65536);
	rc |= ccc_on_ack(&g, 1, rel, CCC_MAX_CONNS);
	rc |= ccc_leave(&g, 1);
	sink = ccc_sum_cwnd(&g) + ccc_sum_ssthresh(&g) + ccc_reductions(&g) + ccc_len(&g);
	if (ccc_coco(&g, &conn))
		sink += conn;
	if (ccc_loss_event(&g, &conn))
		sink += conn;
	if (ccc_view(&g, 0, &v) == 0)
		sink += v.cwnd + v.target + v.released + v.state;
	sink += cw + ss;
	return rc;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
