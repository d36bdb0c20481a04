// SPDX-License-Identifier: MIT OR GPL-2.0-only
/*
 * macroflow_ccc: ctrlTCP (TCP-CCC with the corrections of crates/coupling/src/tcp/ccc.rs) as a
 * BPF struct_ops TCP congestion control. Connections that share a group act as one aggregate:
 * one window shared by priority, one reduction per loss event, ack-clocked handover for joiners.
 *
 * Each connection runs NewReno through the kernel's own functions (kfuncs tcp_reno_cong_avoid,
 * tcp_reno_ssthresh, tcp_reno_undo_cwnd) and reports to its group whenever its (cwnd, ssthresh,
 * state) changed, exactly where the simulator's glue does (crates/sim/src/transport/coupled.rs):
 *
 *   init                 register (ccc_register) and apply the answer
 *   cong_avoid           Reno's increase, then UPDATE if anything changed
 *   set_state(new)       UPDATE with the new state; set_state(Loss) on every RTO: the timeout UPDATE
 *   cwnd_event           UPDATE if anything changed (the end of a reduction: cwnd = ssthresh)
 *   pkts_acked           for an ACK of new data, the handover's ack clock (ccc_on_ack)
 *   release              leave (ccc_leave); the last one out deletes the group
 *
 * A struct_ops congestion control may write only its own socket's cwnd and ssthresh, so the
 * coupler answers only the connection that reports, as in the simulator, and a joiner in handover
 * takes the segments released by other connections' ACKs from its own member slot in its next
 * callback (a release reaches it at its next ACK, not at once as in the simulator).
 *
 * The group's state is one hash-map value (struct mf_group_val: a bpf_spin_lock and the core's
 * struct ccc_group); every coupler call runs under the lock, with no helper call inside. A
 * connection's slot index is kept in its socket storage as a hint, so an UPDATE finds its slot in
 * O(1) (ccc_find_hint).
 *
 * Safety: answers are held inside [1, snd_cwnd_clamp] (counted); a connection that cannot join
 * (groups map full, group full, no storage) runs plain NewReno, counted in `stats` and shown by
 * `macroflow linux status`; release always leaves.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "macroflow_ccc.h"

/* The struct_ops verifier requires a GPL-compatible license; the C core is MIT OR Apache-2.0. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define AF_INET 2
#define AF_INET6 10
#define TCP_CA_Open 0
#define TCP_CA_Disorder 1
#define TCP_CA_CWR 2
#define TCP_CA_Recovery 3
#define TCP_CA_Loss 4
#define BPF_NOEXIST 1
#define EEXIST 17
#define MF_MAX_TRIES 8
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* Set by the loader before load (macroflow linux load --no-handover / --max-burst). */
const volatile __u32 cfg_handover = 1;
const volatile __u64 cfg_max_burst_pkts = 0;

/* Counters (MF_ST_*), read by `status`. */
__u64 stats[MF_NSTATS];
/* Connection ids and group generations: unique per load. */
__u64 next_conn_id = 1;
__u64 next_gen = 1;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MF_MAX_GROUPS);
	__type(key, struct mf_group_key);
	__type(value, struct mf_group_val);
} groups SEC(".maps");

/* A new group's first value is built here (a 5 KiB value cannot be on the stack). */
struct mf_group_tmpl {
	__u32 lock;
	__u32 dead;
	struct mf_group_key key;
	__u64 gen;
	struct ccc_group g;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mf_group_tmpl);
} tmpl SEC(".maps");

/* Rules, in order; each read under its lock so a rule being rewritten is never seen torn. */
struct mf_rule_val {
	struct bpf_spin_lock lock;
	__u32 _pad;
	struct mf_rule r;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MF_MAX_RULES);
	__type(key, __u32);
	__type(value, struct mf_rule_val);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mf_conn);
} conns SEC(".maps");

/* The application's own setting, by socket fd from user space. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mf_sock_prio);
} sock_prio SEC(".maps");

_Static_assert(sizeof(struct mf_group_tmpl) == sizeof(struct mf_group_val), "template layout");

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void count(int i)
{
	if (i >= 0 && i < MF_NSTATS)
		__sync_fetch_and_add(&stats[i], 1);
}

/* ---- Grouping ------------------------------------------------------------------------------ */

static __always_inline int prefix_match(const __u8 *a, const __u8 *p, __u32 bits)
{
	__u32 i, full = bits / 8, rest = bits % 8;

	for (i = 0; i < 16; i++) {
		if (i >= full)
			break;
		if (a[i] != p[i])
			return 0;
	}
	if (rest && full < 16) {
		__u8 mask = (__u8)(0xff << (8 - rest));

		if ((a[full & 15] & mask) != (p[full & 15] & mask))
			return 0;
	}
	return 1;
}

static __always_inline __u64 sock_cgroup_id(struct sock *sk)
{
	struct cgroup *cg = BPF_CORE_READ(sk, sk_cgrp_data.cgroup);

	if (!cg)
		return 0;
	return BPF_CORE_READ(cg, kn, id);
}

/* The connection's key, priority and whether to couple it: the application's own setting, else
 * the first matching rule, else its address pair with priority 1. */
static __always_inline int classify(struct sock *sk, struct mf_group_key *key, __u32 *prio)
{
	struct sock_common *c = &sk->__sk_common;
	__u8 daddr[16] = {}, saddr[16] = {};
	struct mf_sock_prio *own;
	__u16 family = c->skc_family;
	__u16 dport = bpf_ntohs(c->skc_dport);
	__u64 cgid = 0;
	__u32 group = 0, uncoupled = 0, i;
	int got_cgid = 0;

	*prio = CCC_PRIORITY_SCALE;
	if (family == AF_INET) {
		__builtin_memcpy(daddr, &c->skc_daddr, 4);
		__builtin_memcpy(saddr, &c->skc_rcv_saddr, 4);
	} else {
		__builtin_memcpy(daddr, &c->skc_v6_daddr, 16);
		__builtin_memcpy(saddr, &c->skc_v6_rcv_saddr, 16);
	}
	for (i = 0; i < MF_MAX_RULES; i++) {
		__u32 k = i;
		struct mf_rule_val *rv = bpf_map_lookup_elem(&rules, &k);
		struct mf_rule r;

		if (!rv)
			break;
		bpf_spin_lock(&rv->lock);
		r = rv->r;
		bpf_spin_unlock(&rv->lock);
		if (!r.used)
			break;
		if (r.family && r.family != family)
			continue;
		if (r.prefix_len && !prefix_match(daddr, r.daddr, r.prefix_len > 128 ? 128 : r.prefix_len))
			continue;
		if ((r.port_lo || r.port_hi) && (dport < r.port_lo || dport > r.port_hi))
			continue;
		if (r.cgroup_id) {
			if (!got_cgid) {
				cgid = sock_cgroup_id(sk);
				got_cgid = 1;
			}
			if (cgid != r.cgroup_id)
				continue;
		}
		group = r.group;
		uncoupled = r.uncoupled;
		if (r.prio_units)
			*prio = r.prio_units;
		break;
	}
	own = bpf_sk_storage_get(&sock_prio, sk, 0, 0);
	if (own) {
		if (own->prio_units)
			*prio = own->prio_units;
		if (own->group) {
			group = own->group;
			uncoupled = 0;
		}
	}
	if (*prio > CCC_MAX_PRIO_UNITS)
		*prio = CCC_MAX_PRIO_UNITS;
	__builtin_memset(key, 0, sizeof(*key));
	if (group) {
		key->kind = MF_GROUP_ID;
		key->id = group;
	} else {
		key->kind = MF_GROUP_PAIR;
		key->family = (__u8)family;
		__builtin_memcpy(key->saddr, saddr, 16);
		__builtin_memcpy(key->daddr, daddr, 16);
	}
	return uncoupled ? -1 : 0;
}

/* ---- The coupling glue --------------------------------------------------------------------- */

/* The state a coupler sees (seed 003 Table 9.1, as coupling_state in the simulator): a window
 * reduction in progress (Recovery, or CWR after an ECN echo) is FR; otherwise slow start below
 * ssthresh. */
static __always_inline int coupling_state(struct tcp_sock *tp, int ca_state)
{
	if (ca_state == TCP_CA_Recovery || ca_state == TCP_CA_CWR)
		return CCC_FR;
	return tp->snd_cwnd < tp->snd_ssthresh ? CCC_SS : CCC_CA;
}

static __always_inline __u32 packets_in_flight(struct tcp_sock *tp)
{
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 out = tp->packets_out;

	return (out > left ? out - left : 0) + tp->retrans_out;
}

/* Writes the coupler's answer to this socket, inside [1, snd_cwnd_clamp] and ssthresh >= 2. */
static __always_inline void apply(struct tcp_sock *tp, struct mf_conn *st, __u64 cwnd,
				  __u64 ssthresh, int state)
{
	__u64 clamp = tp->snd_cwnd_clamp;
	__u64 c = cwnd, s = ssthresh;

	if (clamp < 1)
		clamp = 1;
	if (c < 1 || c > clamp) {
		c = c < 1 ? 1 : clamp;
		count(MF_ST_CLAMPED);
	}
	if (s < 2)
		s = 2;
	if (s > 0x7fffffff)
		s = 0x7fffffff;
	tp->snd_cwnd = (__u32)c;
	tp->snd_ssthresh = (__u32)s;
	st->told_cwnd = cwnd > 0xffffffffULL ? 0xffffffffU : (__u32)cwnd;
	st->rep_cwnd = (__u32)c;
	st->rep_ssthresh = (__u32)s;
	st->rep_state = (__u8)state;
	st->have_rep = 1;
}

/* Makes (or finds) the group for `key` and registers the connection. Returns 0 when coupled,
 * 1 when it should retry at its next callback, or a negative MF_WHY_* when it runs uncoupled. */
static __always_inline int join(struct sock *sk, struct mf_conn *st)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mf_group_val *gv;
	__u64 cw = 0, ss = 0, gen = 0;
	int rc, idx = -1, dead = 0;

	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv) {
		__u32 zero = 0;
		struct mf_group_tmpl *t = bpf_map_lookup_elem(&tmpl, &zero);

		if (!t)
			return -MF_WHY_NO_STORAGE;
		t->lock = 0;
		t->dead = 0;
		t->key = st->key;
		t->gen = __sync_fetch_and_add(&next_gen, 1);
		ccc_init(&t->g, cfg_handover ? 1 : 0);
		ccc_set_max_burst(&t->g, cfg_max_burst_pkts);
		rc = bpf_map_update_elem(&groups, &st->key, t, BPF_NOEXIST);
		if (rc == -EEXIST)
			return 1; /* another connection made it, or an old one is being deleted */
		if (rc)
			return -MF_WHY_GROUPS_FULL;
		count(MF_ST_GROUPS_MADE);
		gv = bpf_map_lookup_elem(&groups, &st->key);
		if (!gv)
			return 1; /* deleted at once by a last leaver: try again */
	}
	bpf_spin_lock(&gv->lock);
	if (gv->dead) {
		dead = 1;
	} else {
		gen = gv->gen;
		rc = ccc_register(&gv->g, st->conn, st->prio_units, tp->snd_cwnd, tp->snd_ssthresh,
				  &cw, &ss);
		if (rc == 0)
			idx = ccc_index(&gv->g, st->conn, gv->g.n - 1);
	}
	bpf_spin_unlock(&gv->lock);
	if (dead)
		return 1;
	if (rc == CCC_EFULL)
		return -MF_WHY_GROUP_FULL;
	if (rc) {
		count(MF_ST_ERR_REGISTER);
		return -MF_WHY_LOST;
	}
	st->gen = gen;
	st->hint = idx < 0 ? CCC_NONE : (__u32)idx;
	apply(tp, st, cw, ss, CCC_SS);
	return 0;
}

static __always_inline void uncouple(struct mf_conn *st, int why)
{
	st->coupled = 0;
	st->pending = 0;
	st->why = (__u8)why;
	switch (why) {
	case MF_WHY_GROUPS_FULL:
		count(MF_ST_GROUPS_FULL);
		break;
	case MF_WHY_GROUP_FULL:
		count(MF_ST_GROUP_FULL);
		break;
	case MF_WHY_RACE:
		count(MF_ST_RACE);
		break;
	case MF_WHY_LOST:
		count(MF_ST_LOST);
		break;
	case MF_WHY_RULE:
		count(MF_ST_RULE_UNCOUPLED);
		break;
	}
}

static __always_inline void try_join(struct sock *sk, struct mf_conn *st)
{
	int rc = join(sk, st);

	if (rc == 0) {
		st->coupled = 1;
		st->pending = 0;
		st->why = MF_WHY_COUPLED;
		count(MF_ST_COUPLED);
	} else if (rc > 0) {
		st->tries++;
		count(MF_ST_RETRIES);
		if (st->tries >= MF_MAX_TRIES)
			uncouple(st, MF_WHY_RACE);
		else
			st->pending = 1;
	} else {
		uncouple(st, -rc);
	}
}

/*
 * Tells the group about this connection when its (cwnd, ssthresh, state) changed since the last
 * report, or always after a timeout, and applies the answer (Coupled::report in the simulator).
 * With nothing changed, a joiner takes the segments other connections' ACKs released to it.
 */
static __always_inline void sync(struct sock *sk, int ca_state, int timeout)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mf_group_val *gv;
	struct mf_sock_prio *own;
	struct mf_conn *st;
	__u64 cw = 0, ss = 0;
	__u32 cwnd, ssthresh, prio = 0, hint;
	int state, rc = 2, idx = -1, lost = 0, prio_rc = 0, changed;

	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!st)
		return;
	if (st->pending)
		try_join(sk, st);
	if (!st->coupled)
		return;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv) {
		uncouple(st, MF_WHY_LOST);
		return;
	}
	own = bpf_sk_storage_get(&sock_prio, sk, 0, 0);
	if (own && own->prio_units && own->prio_units != st->prio_units)
		prio = own->prio_units > CCC_MAX_PRIO_UNITS ? CCC_MAX_PRIO_UNITS : own->prio_units;
	cwnd = tp->snd_cwnd;
	ssthresh = tp->snd_ssthresh;
	state = timeout ? CCC_SS : coupling_state(tp, ca_state);
	changed = timeout || !st->have_rep || cwnd != st->rep_cwnd || ssthresh != st->rep_ssthresh ||
		  state != st->rep_state;
	hint = st->hint;

	bpf_spin_lock(&gv->lock);
	if (gv->gen != st->gen) {
		lost = 1;
	} else {
		if (prio)
			prio_rc = ccc_set_priority_at(&gv->g, st->conn, hint, prio);
		if (changed) {
			rc = ccc_update_at(&gv->g, st->conn, hint, cwnd, ssthresh, state, timeout,
					   packets_in_flight(tp), &cw, &ss);
		} else {
			idx = ccc_index(&gv->g, st->conn, hint);
			if (idx >= 0 && gv->g.m[idx & (CCC_MAX_CONNS - 1)].cwnd != st->told_cwnd) {
				cw = gv->g.m[idx & (CCC_MAX_CONNS - 1)].cwnd;
				rc = 3;
			}
		}
		if (idx < 0)
			idx = ccc_index(&gv->g, st->conn, hint);
	}
	bpf_spin_unlock(&gv->lock);

	if (lost) {
		uncouple(st, MF_WHY_LOST);
		return;
	}
	if (idx >= 0)
		st->hint = (__u32)idx;
	if (prio) {
		if (prio_rc)
			count(MF_ST_ERR_PRIO);
		else
			count(MF_ST_PRIO_SET);
		st->prio_units = prio;
	}
	if (rc == 0) {
		count(MF_ST_UPDATES);
		apply(tp, st, cw, ss, state);
	} else if (rc == 1) {
		/* In FR: no answer (line 43). */
		count(MF_ST_UPDATES);
		st->rep_cwnd = cwnd;
		st->rep_ssthresh = ssthresh;
		st->rep_state = (__u8)state;
		st->have_rep = 1;
	} else if (rc == 3) {
		/* A handover release (Coupled::on_release): the window, the threshold stays. */
		count(MF_ST_PULLS);
		apply(tp, st, cw, ssthresh, state);
	} else if (rc < 0) {
		count(MF_ST_ERR_UPDATE);
	}
}

/* ---- The congestion control's operations ----------------------------------------------------- */

SEC("struct_ops")
void BPF_PROG(mf_init, struct sock *sk)
{
	struct mf_conn *st;
	int r;

	count(MF_ST_INIT);
	st = bpf_sk_storage_get(&conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		count(MF_ST_NO_STORAGE);
		return;
	}
	__builtin_memset(st, 0, sizeof(*st));
	st->conn = __sync_fetch_and_add(&next_conn_id, 1);
	st->hint = CCC_NONE;
	r = classify(sk, &st->key, &st->prio_units);
	if (r < 0) {
		uncouple(st, MF_WHY_RULE);
		return;
	}
	try_join(sk, st);
}

SEC("struct_ops")
void BPF_PROG(mf_release, struct sock *sk)
{
	struct mf_group_val *gv;
	struct mf_conn *st;
	int rc = 0, empty = 0, lost = 0;

	count(MF_ST_RELEASE);
	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!st || !st->coupled)
		return;
	st->coupled = 0;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv) {
		count(MF_ST_LOST);
		return;
	}
	bpf_spin_lock(&gv->lock);
	if (gv->gen != st->gen) {
		lost = 1;
	} else {
		rc = ccc_leave_at(&gv->g, st->conn, st->hint);
		if (gv->g.n == 0) {
			gv->dead = 1;
			empty = 1;
		}
	}
	bpf_spin_unlock(&gv->lock);
	if (lost)
		count(MF_ST_LOST);
	if (rc)
		count(MF_ST_ERR_LEAVE);
	if (empty && bpf_map_delete_elem(&groups, &st->key) == 0)
		count(MF_ST_GROUPS_FREED);
}

SEC("struct_ops")
__u32 BPF_PROG(mf_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(mf_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
	sync(sk, inet_csk(sk)->icsk_ca_state, 0);
}

SEC("struct_ops")
void BPF_PROG(mf_set_state, struct sock *sk, __u8 new_state)
{
	/* tcp_enter_loss sets the loss window, then this, on every RTO. */
	sync(sk, new_state, new_state == TCP_CA_Loss);
}

SEC("struct_ops")
void BPF_PROG(mf_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_COMPLETE_CWR || ev == CA_EVENT_CWND_RESTART)
		sync(sk, inet_csk(sk)->icsk_ca_state, 0);
}

/* The ack clock of a handover (Algorithm 4): every ACK of new data of a connection outside
 * handover releases segments to the joiners. */
SEC("struct_ops")
void BPF_PROG(mf_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct mf_group_val *gv;
	struct mf_conn *st;
	int rc = 0;

	if (sample->pkts_acked == 0)
		return;
	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!st || !st->coupled)
		return;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv)
		return;
	/* Read without the lock first: most ACKs find no handover running. */
	if (READ_ONCE(gv->g.n_handovers) == 0)
		return;
	bpf_spin_lock(&gv->lock);
	if (gv->gen == st->gen)
		rc = ccc_on_ack_at(&gv->g, st->conn, st->hint, (struct ccc_release *)0, 0);
	bpf_spin_unlock(&gv->lock);
	if (rc < 0)
		count(MF_ST_ERR_ON_ACK);
}

SEC("struct_ops")
__u32 BPF_PROG(mf_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops macroflow_ccc = {
	.init = (void *)mf_init,
	.release = (void *)mf_release,
	.ssthresh = (void *)mf_ssthresh,
	.cong_avoid = (void *)mf_cong_avoid,
	.set_state = (void *)mf_set_state,
	.cwnd_event = (void *)mf_cwnd_event,
	.pkts_acked = (void *)mf_pkts_acked,
	.undo_cwnd = (void *)mf_undo_cwnd,
	.name = MF_CC_NAME,
};
