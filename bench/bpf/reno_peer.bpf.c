// SPDX-License-Identifier: MIT OR GPL-2.0-only
/*
 * The peer of macroflow_ccc in bench/ccc_bpf_bench.py: the same NewReno through the same kernel
 * functions and the same struct_ops hooks, with no coupling, so the difference in per-callback
 * cost (bpf_stats run_time_ns) is what ctrlTCP's group state costs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
void BPF_PROG(rp_init, struct sock *sk)
{
}

SEC("struct_ops")
__u32 BPF_PROG(rp_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(rp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(rp_set_state, struct sock *sk, __u8 new_state)
{
}

SEC("struct_ops")
void BPF_PROG(rp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
}

SEC("struct_ops")
void BPF_PROG(rp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
}

SEC("struct_ops")
__u32 BPF_PROG(rp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops bpf_reno_peer = {
	.init = (void *)rp_init,
	.ssthresh = (void *)rp_ssthresh,
	.cong_avoid = (void *)rp_cong_avoid,
	.set_state = (void *)rp_set_state,
	.cwnd_event = (void *)rp_cwnd_event,
	.pkts_acked = (void *)rp_pkts_acked,
	.undo_cwnd = (void *)rp_undo_cwnd,
	.name = "bpf_reno_peer",
};
