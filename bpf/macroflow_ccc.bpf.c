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
 *   release              leave (ccc_leave); an emptied group stays, sums zero, for the next
 *                        connection of its key (`macroflow linux gc` deletes idle ones)
 *
 * Two places differ from the simulator's single report at the end of each ACK, because the kernel
 * writes the window after a hook there: leaving Recovery is reported at CA_EVENT_COMPLETE_CWR
 * (after tcp_end_cwnd_reduction's cwnd = ssthresh), not at set_state(Open); and a restart after
 * idle is not reported (tcp_cwnd_restart sets the window after its event).
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
#include "tiu_tc.h"

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
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* Set by the loader before load (macroflow linux load --no-handover / --max-burst). */
const volatile __u32 cfg_handover = 1;
/* A member not heard from (no report, no ACK of its data) for this long (s) is taken out of its
 * group by another member's ACK or a joiner (0: never). Its socket is gone if the kernel skipped its release (seen here,
 * see all_acked_after_close); if it is alive but was idle, it rejoins at its next report. */
const volatile __u32 cfg_stale_s = 30;
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

/* A new group is inserted from this buffer, never written (all zeros: gen 0 says "not yet
 * initialised", and the first joiner initialises it under its lock, so nothing another
 * connection on this CPU does to a shared buffer can reach a group). */
struct mf_group_zero {
	__u8 bytes[sizeof(struct mf_group_val)]; /* no bpf_spin_lock: a helper may read it */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mf_group_zero);
} zero_group SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MF_MAX_RULES);
	__type(key, __u32);
	__type(value, struct mf_rule);
} rules SEC(".maps");

/* The rules' sequence count: odd while user space rewrites them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rules_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mf_conn);
} conns SEC(".maps");

/* The application's own setting, by socket fd from user space. BPF_F_CLONE: a setting on a
 * listening socket is inherited by the connections it accepts. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct mf_sock_prio);
} sock_prio SEC(".maps");

/* TiU's connections: bpf/tiu_tc.bpf.c's `conns`, the same map. Whichever of the two loads first
 * makes it and the other reuses it (crates/ccc-bpf and crates/tiu-bpf each look for the other's
 * pin); without TiU it stays empty. Only read here. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TIU_MAX_CONNS);
	__type(key, struct tiu_conn_key);
	__type(value, struct tiu_conn_val);
} tiu_conns SEC(".maps");

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void count_n(int i, __u64 n)
{
	if (i >= 0 && i < MF_NSTATS)
		__sync_fetch_and_add(&stats[i], n);
}

static __always_inline void count(int i)
{
	count_n(i, 1);
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

/* One pass over the rules, as a bpf_loop callback: the verifier walks one rule, not 64 unrolled
 * copies in every program that classifies (init, cwnd_event's late start, pkts_acked's
 * reclassify), which had taken pkts_acked past 800k of its 1M instructions. */
struct rule_walk {
	__u8 daddr[16];
	__u64 cgid;
	__u32 family;
	__u32 dport;
	__u32 group;
	__u32 uncoupled;
	__u32 prio;
};

static long match_rule(__u32 i, struct rule_walk *w)
{
	__u32 k = i;
	struct mf_rule *rp = bpf_map_lookup_elem(&rules, &k);
	struct mf_rule r;

	if (!rp)
		return 1;
	__builtin_memcpy(&r, rp, sizeof(r));
	if (!r.used)
		return 1; /* the end of the list */
	if (r.family && r.family != w->family)
		return 0;
	if (r.prefix_len && !prefix_match(w->daddr, r.daddr, r.prefix_len > 128 ? 128 : r.prefix_len))
		return 0;
	if ((r.port_lo || r.port_hi) && (w->dport < r.port_lo || w->dport > r.port_hi))
		return 0;
	if (r.cgroup_id && r.cgroup_id != w->cgid)
		return 0;
	w->group = r.group;
	w->uncoupled = r.uncoupled;
	w->prio = r.prio_units;
	return 1; /* the first that matches decides */
}

/* The connection's key, priority and whether to couple it: the application's own setting, else
 * the first matching rule, else its address pair with priority 1. `*busy` is set when the rules
 * were being rewritten on both reads (no rule used: the caller classifies again later). */
static __always_inline int classify(struct sock *sk, struct mf_group_key *key, __u32 *prio,
				    __u8 *handover, int *busy)
{
	struct sock_common *c = &sk->__sk_common;
	struct rule_walk w = {};
	__u8 saddr[16] = {};
	struct mf_sock_prio *own;
	__u16 family = c->skc_family;
	__u32 group = 0, uncoupled = 0, rule_prio = 0;
	int attempt, consistent = 0;

	*prio = CCC_PRIORITY_SCALE;
	if (family == AF_INET) {
		__builtin_memcpy(w.daddr, &c->skc_daddr, 4);
		__builtin_memcpy(saddr, &c->skc_rcv_saddr, 4);
	} else {
		__builtin_memcpy(w.daddr, &c->skc_v6_daddr, 16);
		__builtin_memcpy(saddr, &c->skc_v6_rcv_saddr, 16);
	}
	w.family = family;
	w.dport = bpf_ntohs(c->skc_dport);
	w.cgid = sock_cgroup_id(sk);
	for (attempt = 0; attempt < 2; attempt++) {
		__u32 zero = 0;
		__u64 *seq = bpf_map_lookup_elem(&rules_seq, &zero), s1, s2;

		if (!seq)
			break;
		s1 = READ_ONCE(*seq);
		w.group = 0;
		w.uncoupled = 0;
		w.prio = 0;
		if (!(s1 & 1))
			bpf_loop(MF_MAX_RULES, match_rule, &w, 0);
		s2 = READ_ONCE(*seq);
		if (!(s1 & 1) && s1 == s2) {
			consistent = 1;
			group = w.group;
			uncoupled = w.uncoupled;
			rule_prio = w.prio;
			break;
		}
	}
	*busy = !consistent;
	if (rule_prio)
		*prio = rule_prio;
	own = bpf_sk_storage_get(&sock_prio, sk, 0, 0);
	if (own) {
		if (own->prio_units)
			*prio = own->prio_units;
		if (own->group) {
			group = own->group;
			uncoupled = 0;
		}
		if (own->handover == MF_HANDOVER_ON || own->handover == MF_HANDOVER_OFF)
			*handover = (__u8)own->handover;
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
		__builtin_memcpy(key->daddr, w.daddr, 16);
		key->netns = c->skc_net.net->net_cookie;
	}
	return uncoupled ? -1 : 0;
}

/*
 * The default grouping follows TiU (issue 17: "connections that TiU puts on one port pair form one
 * ctrlTCP group"): a connection TiU carries (its `conns` entry in any state but fallen back) goes
 * to its host pair's TiU group, which ECMP keeps on one path; the pair's plain TCP connections
 * (fallen back, a rule's `never`, the 33rd) stay in the address pair's group, which ECMP may
 * spread. Decided when it joins (established: its handshake has settled TiU or plain), again at
 * each rejoin and reclassify. A rule's or the application's group is left alone.
 */
static __always_inline void tiu_group(struct sock *sk, struct mf_group_key *key)
{
	struct sock_common *c = &sk->__sk_common;
	struct tiu_conn_key k = {};
	struct tiu_conn_val *v;

	if (key->kind != MF_GROUP_PAIR && key->kind != MF_GROUP_TIU)
		return;
	if (c->skc_family == AF_INET) {
		k.family = TIU_AF_INET;
		k.saddr[0] = c->skc_rcv_saddr;
		k.daddr[0] = c->skc_daddr;
	} else {
		__u32 *sa = c->skc_v6_rcv_saddr.in6_u.u6_addr32, *da = c->skc_v6_daddr.in6_u.u6_addr32;

		if (sa[0] == 0 && sa[1] == 0 && sa[2] == bpf_htonl(0xffff)) {
			/* IPv4 through an IPv6 socket: TiU keys it as the IPv4 connection. */
			k.family = TIU_AF_INET;
			k.saddr[0] = sa[3];
			k.daddr[0] = da[3];
		} else {
			k.family = TIU_AF_INET6;
			__builtin_memcpy(k.saddr, sa, 16);
			__builtin_memcpy(k.daddr, da, 16);
		}
	}
	k.sport = bpf_htons(c->skc_num);
	k.dport = c->skc_dport;
	k.netns = key->netns;
	v = bpf_map_lookup_elem(&tiu_conns, &k);
	/* An ID over 31 is a refused one (255): its segments go as plain TCP, as fallen back. */
	key->kind = v && READ_ONCE(v->state) != TIU_ST_PLAIN && v->conn_id <= 31 ? MF_GROUP_TIU
									      : MF_GROUP_PAIR;
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

static __always_inline int same_key(const struct mf_group_key *a, const struct mf_group_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	_Static_assert(sizeof(struct mf_group_key) == 48, "key of six words");
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4] &&
	       x[5] == y[5];
}

#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3

/* Makes (or finds) the group for `key` and registers the connection. Returns 0 when coupled,
 * 1 when it should retry at its next callback, or a negative MF_WHY_* when it runs uncoupled. */
static __always_inline __u32 now_s(void)
{
	return (__u32)(bpf_ktime_get_ns() / 1000000000ULL);
}

/* The next member to check for staleness, round robin (O(1) a call); CCC_NONE if none. Written
 * without the lock too: a lost cursor update only checks a member twice. */
static __always_inline __u32 reap_next(struct mf_group_val *gv)
{
	__u32 n = READ_ONCE(gv->g.n), c = READ_ONCE(gv->reap);

	if (cfg_stale_s == 0 || n == 0)
		return CCC_NONE;
	if (c >= n)
		c = 0;
	WRITE_ONCE(gv->reap, c + 1);
	return c & (CCC_MAX_CONNS - 1);
}

static __always_inline int is_stale(struct mf_group_val *gv, __u32 c, __u32 now)
{
	/* Signed: another CPU may have written a second later than this caller's `now`. */
	return (__s32)(now - READ_ONCE(gv->g.m[c & (CCC_MAX_CONNS - 1)].seen_s)) > (__s32)cfg_stale_s;
}

/* Under the group's lock: removes member c if it has not been heard from for cfg_stale_s and is
 * not `self` (the caller's id). */
static __always_inline void reap_one(struct mf_group_val *gv, __u32 c, __u64 self, __u32 now)
{
	if (c >= ccc_n(&gv->g))
		return;
	c &= CCC_MAX_CONNS - 1;
	if (gv->g.m[c].conn == self || !is_stale(gv, c, now))
		return;
	/* By id with the index as its hint, as release does (by index alone, clang folds the
	 * member shift into a pointer the verifier cannot bound). */
	if (ccc_leave_at(&gv->g, gv->g.m[c].conn, c) != 0) {
		count(MF_ST_ERR_LEAVE);
		return;
	}
	count(MF_ST_EVICTED);
	if (ccc_n(&gv->g) == 0) {
		gv->empty_since_ns = (__u64)now * 1000000000ULL;
		count(MF_ST_GROUPS_EMPTIED);
	}
}

static __always_inline int join(struct sock *sk, struct mf_conn *st)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mf_group_val *gv;
	__u64 cw = 0, ss = 0, gen = 0, newgen;
	__u32 now = now_s();
	int rc = 0, idx = -1, stale = 0, made = 0;

	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv) {
		__u32 zero = 0;
		struct mf_group_zero *z = bpf_map_lookup_elem(&zero_group, &zero);

		if (!z)
			return -MF_WHY_NO_STORAGE;
		rc = bpf_map_update_elem(&groups, &st->key, z, BPF_NOEXIST);
		if (rc && rc != -EEXIST)
			return -MF_WHY_GROUPS_FULL;
		made = rc == 0;
		/* Made here or by a connection that got there first: either way, it is there now. */
		gv = bpf_map_lookup_elem(&groups, &st->key);
		if (!gv)
			return 1;
	}
	newgen = __sync_fetch_and_add(&next_gen, 1);
	bpf_spin_lock(&gv->lock);
	if (gv->gen == 0) {
		/* The first joiner initialises the group. */
		ccc_init(&gv->g, 0);
		ccc_set_max_burst(&gv->g, cfg_max_burst_pkts);
		gv->key = st->key;
		gv->gen = newgen;
	}
	if (!same_key(&gv->key, &st->key)) {
		/* The element was deleted and its memory reused for another group since the lookup. */
		stale = 1;
	} else {
		gen = gv->gen;
		reap_one(gv, reap_next(gv), st->conn, now);
		if (ccc_n(&gv->g) == 0) {
			/* The connection that makes the group (or refills an emptied one) decides
			 * handover. */
			if (st->handover == MF_HANDOVER_ON)
				gv->g.handover_enabled = 1;
			else if (st->handover == MF_HANDOVER_OFF)
				gv->g.handover_enabled = 0;
			else
				gv->g.handover_enabled = cfg_handover ? 1 : 0;
		}
		rc = ccc_register(&gv->g, st->conn, st->prio_units, tp->snd_cwnd, tp->snd_ssthresh,
				  &cw, &ss);
		if (rc == 0) {
			gv->empty_since_ns = 0;
			idx = ccc_index(&gv->g, st->conn, ccc_n(&gv->g) - 1);
			if (idx >= 0)
				gv->g.m[idx & (CCC_MAX_CONNS - 1)].seen_s = now;
		}
	}
	bpf_spin_unlock(&gv->lock);
	if (made)
		count(MF_ST_GROUPS_MADE);
	if (stale)
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

/* Joins once the handshake is over (init runs in SYN_SENT when the option is set during a
 * non-blocking connect, and in SYN_RECV for an accepted connection; the kernel sets the initial
 * window at establishment, which would overwrite an answer given earlier). */
static __always_inline void try_join(struct sock *sk, struct mf_conn *st)
{
	int rc;

	if (sk->__sk_common.skc_state == TCP_SYN_SENT || sk->__sk_common.skc_state == TCP_SYN_RECV) {
		st->pending = 1;
		return;
	}
	tiu_group(sk, &st->key);
	rc = join(sk, st);
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

/* Leaves the group (release, close, or an init on a socket still in one); 1 if it left. A member
 * already taken out for staleness (and perhaps its group deleted since) has nothing to leave. */
static __always_inline int leave_group(struct mf_conn *st)
{
	struct mf_group_val *gv;
	__u64 now = bpf_ktime_get_ns();
	int rc = 0;

	if (st->pending) {
		/* Closed before its handshake ended (or while its group was being remade). */
		st->pending = 0;
		count(MF_ST_NEVER_JOINED);
	}
	if (!st->coupled)
		return 0;
	st->coupled = 0;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv)
		return 0;
	bpf_spin_lock(&gv->lock);
	if (gv->gen != st->gen) {
		rc = CCC_EUNKNOWN;
	} else {
		rc = ccc_leave_at(&gv->g, st->conn, st->hint);
		if (rc == 0 && ccc_n(&gv->g) == 0) {
			gv->empty_since_ns = now;
			count(MF_ST_GROUPS_EMPTIED);
		}
	}
	bpf_spin_unlock(&gv->lock);
	if (rc && rc != CCC_EUNKNOWN)
		count(MF_ST_ERR_LEAVE);
	return rc == 0;
}

/* A coupled connection its group no longer holds: taken out after cfg_stale_s without a report,
 * or its group deleted (and perhaps made anew). It joins again at its next callback. */
static __always_inline void rejoin(struct mf_conn *st)
{
	st->coupled = 0;
	st->have_rep = 0;
	st->tries = 0;
	st->pending = 1;
	count(MF_ST_REJOINS);
}

/* A connection's own state from scratch: its id and, from the rules and its own setting, its
 * group, priority and handover; 0 when it is to join, -1 when a rule keeps it uncoupled. */
static __always_inline int start(struct sock *sk, struct mf_conn *st)
{
	int busy = 0;

	__builtin_memset(st, 0, sizeof(*st));
	st->conn = __sync_fetch_and_add(&next_conn_id, 1);
	st->hint = CCC_NONE;
	if (classify(sk, &st->key, &st->prio_units, &st->handover, &busy) < 0) {
		uncouple(st, MF_WHY_RULE);
		return -1;
	}
	if (busy) {
		st->reclassify = 1;
		count(MF_ST_RULES_BUSY);
	}
	return 0;
}

/*
 * A connection classified while user space rewrote the rules ran with no rule; at its next ACK of
 * new data it is classified again (and again at each ACK while they are still being rewritten).
 * If that gives another group, priority or a rule to run uncoupled, it leaves the group it joined
 * and joins its own at its next report, as a connection its group lost does (rejoin).
 */
static __always_inline void reclassify(struct sock *sk, struct mf_conn *st)
{
	struct mf_group_key key;
	__u32 prio = 0;
	__u8 handover = MF_HANDOVER_DEFAULT;
	int busy = 0, rc;

	rc = classify(sk, &key, &prio, &handover, &busy);
	if (busy)
		return;
	tiu_group(sk, &key);
	st->reclassify = 0;
	count(MF_ST_RECLASSIFIED);
	if (rc == 0 && same_key(&key, &st->key) && prio == st->prio_units)
		return; /* the rule it would have had is the one it got */
	if (st->coupled)
		leave_group(st);
	st->key = key;
	st->prio_units = prio;
	st->handover = handover;
	st->have_rep = 0;
	st->tries = 0;
	if (rc < 0)
		uncouple(st, MF_WHY_RULE);
	else
		st->pending = 1;
}

/*
 * A callback of an established connection with no state of ours: the kernel never called init
 * for it. CI on 2 busy cores saw 5 of 115,361 connections established with no init (and more
 * releases than inits); tcp_init_transfer calls init only while icsk_ca_initialized is clear,
 * and we could not trace why it was set (no kprobes or fentry in this VM). Such a connection
 * starts here, at its first cwnd event (CA_EVENT_TX_START comes with its first data), and joins at
 * its next report (starting in cwnd_event only and joining elsewhere keeps each program's
 * verifier walk well under the limit).
 */
static __always_inline void late_start(struct sock *sk)
{
	struct mf_conn *st;

	if (sk->__sk_common.skc_state == TCP_SYN_SENT || sk->__sk_common.skc_state == TCP_SYN_RECV)
		return; /* init comes at the end of the handshake */
	st = bpf_sk_storage_get(&conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		count(MF_ST_NO_STORAGE);
		return;
	}
	count(MF_ST_LATE_START);
	if (start(sk, st) == 0)
		st->pending = 1;
}

/*
 * Tells the group about this connection when its (cwnd, ssthresh, state) changed since the last
 * report, or always after a timeout, and applies the answer (Coupled::report in the simulator).
 * A joiner in handover first takes the segments other connections' ACKs released to it since its
 * last answer (Coupled::on_release): its window is the released one plus whatever the kernel
 * changed since, and that is what it reports.
 */
static __always_inline void sync(struct sock *sk, int ca_state, int timeout)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mf_group_val *gv;
	struct mf_sock_prio *own;
	struct mf_conn *st;
	__u64 cw = 0, ss = 0, cwnd, base, mcwnd = 0;
	__u32 cwnd0, ssthresh, in_flight, prio = 0, hint;
	int state, rc = 2, idx = -1, lost = 0, prio_rc = 0, changed, pulled = 0;
	__u32 now = now_s();

	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!st)
		return; /* no init yet: late_start at its next cwnd event */
	if (st->pending) {
		/* Joining answers this callback (and keeps the verifier's paths apart). */
		try_join(sk, st);
		return;
	}
	if (!st->coupled)
		return;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv) {
		rejoin(st);
		return;
	}
	own = bpf_sk_storage_get(&sock_prio, sk, 0, 0);
	if (own && own->prio_units && own->prio_units != st->prio_units)
		prio = own->prio_units > CCC_MAX_PRIO_UNITS ? CCC_MAX_PRIO_UNITS : own->prio_units;
	cwnd0 = tp->snd_cwnd;
	ssthresh = tp->snd_ssthresh;
	in_flight = packets_in_flight(tp);
	state = timeout ? CCC_SS : coupling_state(tp, ca_state);
	hint = st->hint;

	bpf_spin_lock(&gv->lock);
	if (gv->gen != st->gen) {
		lost = 1;
	} else {
		idx = ccc_index(&gv->g, st->conn, hint);
		if (idx >= 0) {
			hint = (__u32)idx;
			gv->g.m[hint & (CCC_MAX_CONNS - 1)].seen_s = now;
			if (prio)
				prio_rc = ccc_set_priority_idx(&gv->g, idx, prio);
			mcwnd = gv->g.m[hint & (CCC_MAX_CONNS - 1)].cwnd;
		}
		cwnd = cwnd0;
		base = st->rep_cwnd;
		/* Not after a timeout: the loss window is the kernel's own, not a change on top of
		 * the old one (the simulator applied the releases, then the RTO set the window). */
		if (idx >= 0 && !timeout && st->have_rep && mcwnd != st->told_cwnd) {
			/* Released to it since its last answer: the kernel's own change on top. */
			__s64 e = (__s64)mcwnd + ((__s64)cwnd0 - (__s64)st->rep_cwnd);

			cwnd = e < 1 ? 1 : (__u64)e;
			base = mcwnd;
			pulled = 1;
		}
		changed = timeout || !st->have_rep || cwnd != base || ssthresh != st->rep_ssthresh ||
			  state != st->rep_state;
		if (idx < 0) {
			/* Not in its group: handled after the unlock. */
		} else if (changed) {
			rc = ccc_update_idx(&gv->g, idx, cwnd, ssthresh, state, timeout, in_flight,
					    &cw, &ss);
		} else if (pulled) {
			cw = mcwnd;
			rc = 3;
		}
	}
	bpf_spin_unlock(&gv->lock);

	if (lost || idx < 0) {
		rejoin(st);
		return;
	}
	st->hint = (__u32)idx;
	if (prio) {
		if (prio_rc)
			count(MF_ST_ERR_PRIO);
		else
			count(MF_ST_PRIO_SET);
		st->prio_units = prio;
	}
	if (pulled)
		count(MF_ST_PULLS);
	if (rc == 0) {
		count(MF_ST_UPDATES);
		apply(tp, st, cw, ss, state);
	} else if (rc == 1) {
		/* In FR: no answer (line 43). Segments released to it since its last callback are
		 * dropped, and counted: its recovery began (which ends its handover: a joiner with a
		 * loss of its own has its own loss reaction), and in recovery the kernel sets its window
		 * on every ACK (PRR), then ssthresh at the end, so a window written now would not last.
		 * The simulator's joiner had them in its window when the loss was seen; at most the
		 * releases of the others' ACKs between two of its own are dropped. */
		count(MF_ST_UPDATES);
		if (pulled && mcwnd > st->told_cwnd)
			count_n(MF_ST_RELEASES_DROPPED, mcwnd - st->told_cwnd);
		st->rep_cwnd = cwnd0;
		st->rep_ssthresh = ssthresh;
		st->rep_state = (__u8)state;
		st->have_rep = 1;
		st->told_cwnd = mcwnd > 0xffffffffULL ? 0xffffffffU : (__u32)mcwnd;
	} else if (rc == 3) {
		/* A handover release (Coupled::on_release): the window; the threshold stays. */
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

	count(MF_ST_INIT);
	st = bpf_sk_storage_get(&conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		count(MF_ST_NO_STORAGE);
		return;
	}
	/* An init without a release in between (never expected): leave first, nothing orphaned. */
	leave_group(st);
	if (start(sk, st) == 0)
		try_join(sk, st);
}

SEC("struct_ops")
void BPF_PROG(mf_release, struct sock *sk)
{
	struct mf_conn *st;

	count(MF_ST_RELEASE);
	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (st)
		leave_group(st);
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
	struct tcp_sock *tp = tcp_sk(sk);
	int timeout = 0;

	if (new_state == TCP_CA_Loss) {
		/* tcp_enter_loss sets the loss window (in flight + 1), then this, on every RTO;
		 * tcp_simple_retransmit (a path MTU drop) enters Loss with no timeout and its window. */
		timeout = tp->snd_cwnd == packets_in_flight(tp) + 1;
	} else if (inet_csk(sk)->icsk_ca_state == TCP_CA_Recovery &&
		   (new_state == TCP_CA_Open || new_state == TCP_CA_Disorder)) {
		/* Leaving Recovery: tcp_try_undo_recovery sets Open before tcp_end_cwnd_reduction
		 * sets cwnd = ssthresh, which would overwrite an answer given here; the report is
		 * made at CA_EVENT_COMPLETE_CWR (or at the next ACK after an undo). */
		return;
	}
	sync(sk, new_state, timeout);
}

SEC("struct_ops")
void BPF_PROG(mf_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	/* The end of a reduction: the kernel has set cwnd = ssthresh. (Not CA_EVENT_CWND_RESTART:
	 * tcp_cwnd_restart sets the window after the event, overwriting any answer.) */
	if (!bpf_sk_storage_get(&conns, sk, 0, 0))
		late_start(sk); /* CA_EVENT_TX_START comes with its first data */
	else if (ev == CA_EVENT_COMPLETE_CWR)
		sync(sk, inet_csk(sk)->icsk_ca_state, 0);
}

/*
 * Closed, with its FIN and everything before it acknowledged: it will send nothing more, so it
 * leaves its group now rather than at release. A half-closed socket can sit in FIN_WAIT2 for as
 * long as its peer keeps sending, holding a share it cannot use; and the kernel does not always
 * call release: on this VM 2 of 47,153 gracefully closed connections were destroyed
 * (tcp_destroy_sock traced) with no release (none of its recursion misses), both in softirq
 * while PID 1 ran, which left a member in its group for good.
 */
static __always_inline int all_acked_after_close(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	int s = sk->__sk_common.skc_state;

	return (s == TCP_FIN_WAIT1 || s == TCP_CLOSING || s == TCP_LAST_ACK) && tp->packets_out == 0 &&
	       tp->snd_nxt == tp->write_seq;
}

/* The ack clock of a handover (Algorithm 4): every ACK of new data of a connection outside
 * handover releases segments to the joiners. */
SEC("struct_ops")
void BPF_PROG(mf_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct mf_group_val *gv;
	struct mf_conn *st;
	__u32 c, now, hint;
	int rc = 0;

	if (sample->pkts_acked == 0)
		return;
	st = bpf_sk_storage_get(&conns, sk, 0, 0);
	if (!st)
		return;
	/* Then on with the same ACK: it may be the last (the close below), and it clocks joiners. */
	if (st->reclassify)
		reclassify(sk, st);
	if (!st->coupled && !st->pending)
		return;
	if (all_acked_after_close(sk)) {
		if (st->coupled) {
			if (leave_group(st))
				count(MF_ST_LEFT_AT_CLOSE);
		} else {
			/* Waiting to join again (moved by reclassify, or taken out as stale): it joins
			 * none now (not a never_joined: its handshake is long over). */
			st->pending = 0;
		}
		st->why = MF_WHY_CLOSED;
		return;
	}
	if (!st->coupled)
		return;
	gv = bpf_map_lookup_elem(&groups, &st->key);
	if (!gv)
		return;
	now = now_s();
	/* Heard from: an ACK of its data keeps it fresh, once a second, also while a window
	 * reduction (Recovery's PRR, CWR) keeps cong_avoid, and so its reports, from running. */
	hint = st->hint & (CCC_MAX_CONNS - 1);
	if (READ_ONCE(gv->g.m[hint].seen_s) != now) {
		bpf_spin_lock(&gv->lock);
		if (gv->gen == st->gen && hint < ccc_n(&gv->g) && gv->g.m[hint].conn == st->conn)
			gv->g.m[hint].seen_s = now;
		bpf_spin_unlock(&gv->lock);
	}
	/* One member checked for staleness an ACK, without the lock unless it looks stale. */
	c = reap_next(gv);
	if (c != CCC_NONE && is_stale(gv, c, now)) {
		bpf_spin_lock(&gv->lock);
		if (gv->gen == st->gen)
			reap_one(gv, c, st->conn, now);
		bpf_spin_unlock(&gv->lock);
	}
	/* Read without the lock first: most ACKs find no handover running. */
	if (READ_ONCE(gv->g.n_handovers) == 0)
		return;
	bpf_spin_lock(&gv->lock);
	if (gv->gen == st->gen)
		rc = ccc_on_ack_at(&gv->g, st->conn, st->hint, (struct ccc_release *)0, 0);
	bpf_spin_unlock(&gv->lock);
	if (rc < 0 && rc != CCC_EUNKNOWN) /* unknown: taken out, it rejoins at its next report */
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
