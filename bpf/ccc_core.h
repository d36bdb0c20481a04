/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ccc_core.h: ctrlTCP / TCP-CCC in the integer window mode, as plain C.
 *
 * A port, operation for operation, of the Rust `Ccc<Int>` (`TcpCccInt`) of
 * crates/coupling/src/tcp/ccc.rs, with the helpers of tcp/mod.rs and tcp/arith.rs
 * (`allowance`, `bounded`, `is_behind`, `ssthresh_share`, `Int::share`, `Int::scale`,
 * `Int::reduce`, ...). The Rust is the reference: the long comment at the top of ccc.rs explains
 * the algorithm and its deviations from the dissertation's pseudo-code (items 1-9); the functions
 * below carry the Rust names in their comments so the two can be read side by side.
 *
 * The same source compiles into a BPF struct_ops program (clang -target bpf) and into a userspace
 * library: no libc, no allocation, no floating point, no recursion, no 128-bit integers, no
 * function pointers; every function is `static __always_inline`; every loop is bounded by
 * CCC_MAX_CONNS (64 iterations); the group lives in a caller's
 * `struct ccc_group` (about 5 KiB: a BPF map value, next to a bpf_spin_lock), never on the stack.
 *
 * Units and ranges (the range/rounding rule):
 *  - Windows are whole packets (__u64). Window inputs (cwnd, ssthresh, in_flight, the burst limit)
 *    above 1e15 packets are CCC_EINVAL, as the Rust's check_window / check_max_burst refuse them;
 *    accepted ones are held at 2^32 - 1 (the kernel's u32 snd_cwnd; Rust `Int::window`).
 *  - Priorities are integers in units of 2^-16 (65536 = priority 1). The core accepts
 *    1 ..= 2^24 units (1/65536 .. 256); 0 and more than 2^24 are CCC_EINVAL. (The Rust accepts up
 *    to 1e12, i.e. 2^56 units; its test vectors stay within 2^24.)
 *  - At most CCC_MAX_CONNS = 64 connections per group; a 65th registration is CCC_EFULL (the Rust
 *    has no limit; its vectors never ask for more than 64).
 *  Then the sum of priorities is below 2^30 and every product the core forms fits in 64 bits:
 *  shares are round(sum * p / sum_p) = q * p + round(r * p / sum_p) with q, r = sum / sum_p,
 *  sum % sum_p (r * p < 2^54), exactly what the Rust computes in 128 bits; `scale` is computed the
 *  same way. Shares round to the nearest packet (halves up); every other division floors, as in
 *  the Rust. Should a remainder product ever exceed 64 bits
 *  (a told window above 2^32 through a huge burst limit), ccc_muldiv_small forms the 128-bit
 *  product and divides it exactly (Knuth's algorithm D, branch-free), so the result is still the
 *  Rust's.
 *
 * For the BPF verifier (whose budget is 1M instructions walked over every path): search results
 * and the member count are read back through memory (ccc_launder, ccc_n) so the paths out of a
 * search merge, and the multiply-divide has no branch on the data. A caller may pass the index it
 * saw last (the `_at` variants' `hint`), which makes an UPDATE O(1) in the group size.
 *  Aggregates add with saturation at 2^64 - 1 (Rust `Int::add`, `Int::double`).
 *
 * Registration order: members are kept in m[0 .. n) in ascending `seq` (registration order), so
 * "the first connection in registration order after X, wrapping" is a scan of m[] from X's
 * position. The Rust's ordered sets (`not_ss`, `handovers`) are per-member flags plus counts.
 * The Rust's float-mode housekeeping (after_op, psum_settle, ops_since_resum) does nothing in the
 * integer mode (the sum of priorities is exact) and is left out.
 *
 * Errors (negative return values) leave the group unchanged: every check is made before anything
 * is written. The checks run in the Rust's order (for an update: the connection is known, then the
 * report is valid).
 */
#ifndef CCC_CORE_H
#define CCC_CORE_H

/* ---- Type prelude ---------------------------------------------------------------------------- */
#ifdef __bpf__
/* vmlinux.h (or linux/types.h) and bpf_helpers.h are included by the program before this file. */
#else
#if defined(__has_include)
#if __has_include(<linux/types.h>)
#include <linux/types.h>
#define CCC_HAVE_LINUX_TYPES 1
#endif
#endif
#ifndef CCC_HAVE_LINUX_TYPES
#include <stdint.h>
typedef uint64_t __u64;
typedef uint32_t __u32;
typedef uint16_t __u16;
typedef uint8_t __u8;
typedef int64_t __s64;
typedef int32_t __s32;
#endif
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* ---- Constants ------------------------------------------------------------------------------- */
#define CCC_MAX_CONNS 64
#define CCC_PRIORITY_SCALE 65536ULL            /* Rust PRIORITY_SCALE: units per priority 1 */
#define CCC_MAX_PRIO_UNITS (1ULL << 24)        /* this core's limit (priority 256) */
#define CCC_MAX_WINDOW 0xffffffffULL           /* Rust MAX_INT_WINDOW_PKTS (u32::MAX) */
#define CCC_MAX_INPUT_PKTS 1000000000000000ULL /* Rust MAX_WINDOW_PKTS (1e15) */
#define CCC_MIN_CWND 1ULL                      /* Rust MIN_CWND_PKTS */
#define CCC_MIN_SSTHRESH 2ULL                  /* Rust MIN_SSTHRESH_PKTS */
#define CCC_U64_MAX 0xffffffffffffffffULL

/* Error codes (all negative; 0 is success). */
#define CCC_EUNKNOWN (-1) /* the connection is not registered (Rust Error::UnknownFlow) */
#define CCC_EDUP (-2)     /* the connection is already registered (Error::DuplicateFlow) */
#define CCC_EFULL (-3)    /* the group already holds CCC_MAX_CONNS connections */
#define CCC_EINVAL (-4)   /* a value out of range (Error::InvalidValue) */

/* TCP states (Rust TcpState). */
#define CCC_SS 0 /* SlowStart */
#define CCC_CA 1 /* CongestionAvoidance */
#define CCC_FR 2 /* FastRecovery */

/* No member (coco / event index). */
#define CCC_NONE 0xffffffffU

_Static_assert((CCC_MAX_CONNS & (CCC_MAX_CONNS - 1)) == 0, "CCC_MAX_CONNS must be a power of two");

/* ---- State ----------------------------------------------------------------------------------- */

/* One connection (Rust `Conn<Int>` with its `Handover`). */
struct ccc_member {
	__u64 conn;        /* FlowId */
	__u64 seq;         /* registration sequence number */
	__u64 p;           /* priority, units of 2^-16 */
	__u64 cwnd;        /* ccc_cwnd: what the connection was last told */
	__u64 ssthresh;    /* ccc_ssthresh */
	__u64 fr_epoch;    /* `reductions` when it last entered FR */
	__u64 ho_target;   /* handover: its share at join time */
	__u64 ho_released; /* handover: segments released so far */
	__u64 ho_acks;     /* handover: ACKs counted */
	__u8 state;        /* CCC_SS / CCC_CA / CCC_FR */
	__u8 ssbit;        /* timed out and not yet back at its share */
	__u8 rto_pending;  /* timed out and not heard from since */
	__u8 handover;     /* in ack-clocked handover (the Rust's Some(Handover)) */
	__u32 seen_s;      /* the glue's, not the core's: when its connection was last heard from
			    * (a report or an ACK of its data, s); the core moves it with the member
			    * and never reads it */
};

/* One coupled group (Rust `Ccc<Int>`). Plain data: embed it in a map value. */
struct ccc_group {
	__u64 max_burst;    /* max_burst_pkts */
	__u64 next_seq;
	__u64 event_epoch;  /* `reductions` once the event's reduction was made */
	__u64 sum_p;        /* sum of priorities (units); < 2^30 */
	__u64 sum_cwnd;
	__u64 sum_ssthresh;
	__u64 reductions;
	__u32 n;            /* members m[0 .. n), ascending seq */
	__u32 coco;         /* index of the coordinating connection, or CCC_NONE */
	__u32 event;        /* index of the loss event's owner, or CCC_NONE */
	__u32 n_not_ss;     /* members whose state is not SS (the Rust's not_ss set) */
	__u32 n_ssbits;     /* members with ssbit */
	__u32 n_handovers;  /* members in handover (the Rust's handovers set) */
	__u32 handover_enabled;
	__u32 scratch;      /* see ccc_launder */
	struct ccc_member m[CCC_MAX_CONNS];
};

/* A segment released in ack-clocked handover (Rust `Release`). */
struct ccc_release {
	__u64 conn;
	__u64 cwnd;
	__u32 done;
	__u32 _pad;
};

/* A read-only view of one connection (Rust `ConnView`). */
struct ccc_view {
	__u64 conn;
	__u64 prio_units;
	__u64 cwnd;
	__u64 ssthresh;
	__u64 released;     /* valid if in_handover */
	__u64 target;       /* valid if in_handover: min(target at join, share now) */
	__u8 state;
	__u8 in_handover;
	__u8 ssbit;         /* timed_out */
	__u8 coordinating;
	__u8 _pad[4];
};

/* ---- Arithmetic (Rust arith.rs, `impl Arith for Int`) ---------------------------------------- */

static __always_inline __u64 ccc_min(__u64 a, __u64 b)
{
	return b < a ? b : a;
}

static __always_inline __u64 ccc_max(__u64 a, __u64 b)
{
	return b > a ? b : a;
}

/* Int::add: saturating. */
static __always_inline __u64 ccc_add(__u64 a, __u64 b)
{
	__u64 s = a + b;
	return s < a ? CCC_U64_MAX : s;
}

/* Int::double: saturating. */
static __always_inline __u64 ccc_double(__u64 w)
{
	return w > CCC_U64_MAX / 2 ? CCC_U64_MAX : 2 * w;
}

/* Int::window for an integer input: held at u32::MAX. */
static __always_inline __u64 ccc_window(__u64 x)
{
	return ccc_min(x, CCC_MAX_WINDOW);
}

/* Branch-free helpers: no conditional jump on the data, so the BPF verifier walks the
 * multiply-divide below once per call instead of forking at each comparison (forks multiply
 * across the ten calls an UPDATE can make, and the verifier's budget is 1M instructions). */

/* 1 if x != 0, else 0. */
static __always_inline __u64 ccc_nz(__u64 x)
{
	return (x | (0 - x)) >> 63;
}

/* 1 if x > y (the borrow of y - x), else 0. */
static __always_inline __u64 ccc_gt(__u64 x, __u64 y)
{
	return ((~y & x) | (~(y ^ x) & (y - x))) >> 63;
}

/* Leading zero bits of v (v != 0), by halving. */
static __always_inline __u64 ccc_nlz(__u64 v)
{
	__u64 n = 0, s;

	s = (((v >> 32) - 1) >> 63) << 5, n += s, v <<= s;
	s = (((v >> 48) - 1) >> 63) << 4, n += s, v <<= s;
	s = (((v >> 56) - 1) >> 63) << 3, n += s, v <<= s;
	s = (((v >> 60) - 1) >> 63) << 2, n += s, v <<= s;
	s = (((v >> 62) - 1) >> 63) << 1, n += s, v <<= s;
	s = ((v >> 63) - 1) >> 63, n += s;
	return n;
}

/* One quotient digit's correction of Knuth's algorithm D (at most two, Hacker's Delight divlu):
 * while q >= 2^32 or q * vn0 > 2^32 * rhat + un, q -= 1 and rhat += vn1 (while rhat < 2^32). */
static __always_inline __u64 ccc_divlu_fix(__u64 q, __u64 rhat, __u64 vn1, __u64 vn0, __u64 un)
{
	__u64 c;

	c = ccc_nz(q >> 32) | ccc_gt(q * vn0, (rhat << 32) + un);
	q -= c;
	rhat += vn1 & (0 - c);
	c &= 1 - ccc_nz(rhat >> 32);
	c &= ccc_nz(q >> 32) | ccc_gt(q * vn0, (rhat << 32) + un);
	return q - c;
}

/*
 * floor(a * b / d) for a < d (so the result is below b), exact for all 64-bit inputs (d > 0): the
 * 128-bit product in 32-bit limbs, divided by d with Knuth's algorithm D in two 32-bit digits
 * (Hacker's Delight, divlu), branch-free. The short product a * b / d is taken when both factors
 * are below 2^32 (every use within the documented ranges); both are computed and one selected.
 */
static __always_inline __u64 ccc_muldiv_small(__u64 a, __u64 b, __u64 d)
{
	const __u64 M = 0xffffffffULL;
	__u64 p00, p01, p10, mid, hi, lo, s, v, vn1, vn0, un32, un10, un1, un0, q1, q0, rhat;
	__u64 un21, small, fits;

	/* The 128-bit product hi:lo. */
	p00 = (a & M) * (b & M);
	p01 = (a & M) * (b >> 32);
	p10 = (a >> 32) * (b & M);
	mid = (p00 >> 32) + (p01 & M) + (p10 & M);
	lo = (mid << 32) | (p00 & M);
	hi = (a >> 32) * (b >> 32) + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
	/* hi < d since a < d: the quotient fits in 64 bits. Normalise d's top bit. */
	s = ccc_nlz(d);
	v = d << s;
	vn1 = v >> 32;
	vn0 = v & M;
	un32 = (hi << s) | ((lo >> 1) >> (63 - s)); /* lo >> (64 - s), 0 when s = 0 */
	un10 = lo << s;
	un1 = un10 >> 32;
	un0 = un10 & M;
	q1 = un32 / vn1;
	rhat = un32 - q1 * vn1;
	q1 = ccc_divlu_fix(q1, rhat, vn1, vn0, un1);
	un21 = (un32 << 32) + un1 - q1 * v;
	q0 = un21 / vn1;
	rhat = un21 - q0 * vn1;
	q0 = ccc_divlu_fix(q0, rhat, vn1, vn0, un0);
	/* Both factors below 2^32: the short product (d > 0). */
	small = (a * b) / d;
	fits = 1 - ccc_nz((a | b) >> 32);
	return (small & (0 - fits)) | (((q1 << 32) + q0) & (fits - 1));
}

/* Int::share: sum * p / sum_p rounded to the nearest packet (halves up), at most sum; 0 while
 * sum_p is 0. */
static __always_inline __u64 ccc_share(__u64 p, __u64 sum, __u64 sum_p)
{
	__u64 q, r, f, rem;

	if (sum_p == 0)
		return 0;
	if (p >= sum_p)
		return sum; /* sum * p / sum_p >= sum: the Rust's min(sum) */
	q = sum / sum_p;
	r = sum % sum_p;
	f = ccc_muldiv_small(r, p, sum_p);
	/* The remainder of r * p / sum_p, exact in wrapping 64-bit arithmetic (it is below sum_p). */
	rem = r * p - f * sum_p;
	/* Up by one iff rem >= sum_p - rem, compared without a branch (a branch here forks the
	 * verifier's walk of every caller). q * p < q * sum_p <= sum, and q * p + f + 1 <= q * p + r
	 * <= sum (r * p / sum_p < r): no overflow, never above sum. */
	return q * p + f + (1 - ccc_gt(sum_p - rem, rem));
}

/* Int::scale: floor(w * num / den), den > 0; truncated to 64 bits as the Rust's `as u64`. */
static __always_inline __u64 ccc_scale(__u64 w, __u64 num, __u64 den)
{
	__u64 q = w / den, r = w % den;

	return q * num + ccc_muldiv_small(r, num, den);
}

/* Int::reduce: sum * beta, beta = ssthresh / told when in [1/2, 1) and told >= 4, else 1/2; at
 * least one packet (unless sum is 0). */
static __always_inline __u64 ccc_reduce(__u64 sum, __u64 ssthresh, __u64 told)
{
	__u64 r;

	if (told >= 4 && ssthresh > 0 && ssthresh < told && ssthresh >= told - ssthresh)
		r = ccc_scale(sum, ssthresh, told);
	else
		r = sum / 2;
	return ccc_max(r, ccc_min(sum, 1));
}

/* is_behind: more than one segment below the share. */
static __always_inline int ccc_is_behind(__u64 cwnd, __u64 share)
{
	return cwnd < ccc_max(share, CCC_MIN_CWND) - CCC_MIN_CWND;
}

/* ssthresh_share: the share of an aggregate ssthresh, at least two packets. */
static __always_inline __u64 ccc_ssthresh_share(__u64 p, __u64 sum, __u64 sum_p)
{
	return ccc_max(ccc_share(p, sum, sum_p), CCC_MIN_SSTHRESH);
}

/* allowance: max(cwnd, in_flight + max_burst), at least one packet. */
static __always_inline __u64 ccc_allowance(__u64 cwnd, __u64 in_flight, __u64 max_burst)
{
	return ccc_max(ccc_max(cwnd, ccc_add(in_flight, max_burst)), CCC_MIN_CWND);
}

/* ---- Group helpers (private) ----------------------------------------------------------------- */

/* A member by index; the mask keeps every access inside m[] for the BPF verifier (indices are
 * always < n <= CCC_MAX_CONNS). */
static __always_inline struct ccc_member *ccc_m(struct ccc_group *g, __u32 i)
{
	return &g->m[i & (CCC_MAX_CONNS - 1)];
}

static __always_inline const struct ccc_member *ccc_mc(const struct ccc_group *g, __u32 i)
{
	return &g->m[i & (CCC_MAX_CONNS - 1)];
}

/* x, passed through memory the BPF verifier does not track. A search loop that can stop at any of
 * 64 slots leaves a different constant index on each exit path, and the verifier then checks all
 * the code after it once per path; an index read back from the group's scratch word is just a
 * number in [0, 2^32), the same on every path, so those paths merge. Costs two memory accesses. */
static __always_inline __u32 ccc_launder(const struct ccc_group *g, __u32 x)
{
	*(volatile __u32 *)&g->scratch = x;
	return *(volatile const __u32 *)&g->scratch;
}

/* The member count, read afresh from memory: comparing a loop counter with a count kept in a
 * register tells the verifier its exact value on each exit path (the same path splitting as
 * above); a fresh read each time keeps it unknown. */
static __always_inline __u32 ccc_n(const struct ccc_group *g)
{
	return *(volatile const __u32 *)&g->n;
}

/* The index of `conn`, or -1 (Rust `slot`). `hint` (the index the caller saw last, or CCC_NONE) is
 * tried first: a connection's index changes only when an earlier one leaves, so a caller that keeps
 * it (the BPF program keeps it in the socket's storage) finds its slot in O(1) on every ACK, and
 * scans only after a departure. A wrong hint costs the scan, never a wrong answer. */
static __always_inline int ccc_find_hint(const struct ccc_group *g, __u64 conn, __u32 hint)
{
	int i;

	__u32 found = CCC_NONE;

	if (hint < ccc_n(g) && hint < CCC_MAX_CONNS && g->m[hint & (CCC_MAX_CONNS - 1)].conn == conn) {
		found = hint;
	} else {
		for (i = 0; i < CCC_MAX_CONNS; i++) {
			if ((__u32)i >= ccc_n(g))
				break;
			if (g->m[i].conn == conn) {
				found = (__u32)i;
				break;
			}
		}
	}
	found = ccc_launder(g, found);
	if (found >= ccc_n(g) || found >= CCC_MAX_CONNS)
		return -1;
	return (int)found;
}

static __always_inline int ccc_find(const struct ccc_group *g, __u64 conn)
{
	return ccc_find_hint(g, conn, CCC_NONE);
}

/* The index of `conn` (for a caller's hint), or -1. */
static __always_inline int ccc_index(const struct ccc_group *g, __u64 conn, __u32 hint)
{
	return ccc_find_hint(g, conn, hint);
}

static __always_inline int ccc_valid_state(int state)
{
	return state == CCC_SS || state == CCC_CA || state == CCC_FR;
}

static __always_inline __u64 ccc_share_of(const struct ccc_group *g, __u32 i)
{
	return ccc_share(ccc_mc(g, i)->p, g->sum_cwnd, g->sum_p);
}

/* Rust `behind`. */
static __always_inline int ccc_behind(const struct ccc_group *g, __u32 i)
{
	return ccc_is_behind(ccc_mc(g, i)->cwnd, ccc_share_of(g, i));
}

/* Rust `ssthresh_for`: the aggregate's ssthresh share once it has one, else the own one. */
static __always_inline __u64 ccc_ssthresh_for(const struct ccc_group *g, __u64 p, __u64 own)
{
	if (g->sum_ssthresh > 0)
		return ccc_ssthresh_share(p, g->sum_ssthresh, g->sum_p);
	return own;
}

/* Rust `set_state`: records the state, returns the previous one. */
static __always_inline int ccc_set_state(struct ccc_group *g, __u32 i, int state)
{
	struct ccc_member *c = ccc_m(g, i);
	int old = c->state;

	if (old == state)
		return old;
	c->state = (__u8)state;
	if (state == CCC_SS)
		g->n_not_ss--;
	else if (old == CCC_SS)
		g->n_not_ss++;
	return old;
}

/* Rust `set_ssbit`. */
static __always_inline void ccc_set_ssbit(struct ccc_group *g, __u32 i, int bit)
{
	struct ccc_member *c = ccc_m(g, i);

	if (c->ssbit == (bit ? 1 : 0))
		return;
	c->ssbit = bit ? 1 : 0;
	if (bit) {
		g->n_ssbits++;
	} else {
		g->n_ssbits--;
		/* A timed-out owner back at its share ends its loss event (item 2). */
		if (g->event == i)
			g->event = CCC_NONE;
	}
}

/* Rust `end_handover`. */
static __always_inline void ccc_end_handover(struct ccc_group *g, __u32 i)
{
	struct ccc_member *c = ccc_m(g, i);

	if (c->handover) {
		c->handover = 0;
		g->n_handovers--;
	}
}

/* Rust `make_coco`. */
static __always_inline void ccc_make_coco(struct ccc_group *g, __u32 i)
{
	ccc_end_handover(g, i);
	g->coco = i;
}

/* Predicates of `first_from` (no function pointers in BPF). The _OTHER ones add the Rust's
 * `c.seq != seq`. */
#define CCC_P_NOSSBIT_NOTSS 0    /* !c.ssbit && c.state != SS */
#define CCC_P_NOSSBIT 1          /* !c.ssbit */
#define CCC_P_OTHER_NOTFR_NOSSBIT 2
#define CCC_P_OTHER_NOTFR 3
#define CCC_P_OTHER 4
#define CCC_P_OTHER_FR 5

static __always_inline int ccc_pred(const struct ccc_member *c, int pred, __u64 seq)
{
	switch (pred) {
	case CCC_P_NOSSBIT_NOTSS:
		return !c->ssbit && c->state != CCC_SS;
	case CCC_P_NOSSBIT:
		return !c->ssbit;
	case CCC_P_OTHER_NOTFR_NOSSBIT:
		return c->seq != seq && c->state != CCC_FR && !c->ssbit;
	case CCC_P_OTHER_NOTFR:
		return c->seq != seq && c->state != CCC_FR;
	case CCC_P_OTHER:
		return c->seq != seq;
	case CCC_P_OTHER_FR:
		return c->seq != seq && c->state == CCC_FR;
	}
	return 0;
}

/* Rust `first_from(seq of member pos, pred)`: the first member in registration order after pos,
 * wrapping (pos itself last), that satisfies pred; CCC_NONE if none. */
static __always_inline __u32 ccc_first_from(const struct ccc_group *g, __u32 pos, int pred)
{
	__u64 seq = ccc_mc(g, pos)->seq;
	__u32 k, j;

	for (k = 1; k <= CCC_MAX_CONNS; k++) {
		if (k > ccc_n(g))
			break;
		j = pos + k;
		if (j >= ccc_n(g))
			j -= ccc_n(g);
		if (ccc_pred(ccc_mc(g, j), pred, seq))
			return ccc_launder(g, j);
	}
	return CCC_NONE;
}

/* Rust `not_ss.first()`: the first member in registration order not in SS, or CCC_NONE. */
static __always_inline __u32 ccc_first_not_ss(const struct ccc_group *g)
{
	__u32 i;

	for (i = 0; i < CCC_MAX_CONNS; i++) {
		if (i >= ccc_n(g))
			break;
		if (g->m[i].state != CCC_SS)
			return ccc_launder(g, i);
	}
	return CCC_NONE;
}

/* Rust `begin_loss_event` (item 1): the aggregate is reduced when the event begins. */
static __always_inline void ccc_begin_loss_event(struct ccc_group *g, __u32 i, __u64 rep_ssthresh)
{
	__u64 told = ccc_m(g, i)->cwnd;

	g->sum_ssthresh = ccc_reduce(g->sum_cwnd, rep_ssthresh, told);
	g->sum_cwnd = g->sum_ssthresh;
	g->event = i;
	g->reductions++;
	g->event_epoch = g->reductions;
}

/* Rust `on_timeout` (lines 30-40, items 2-3). */
static __always_inline void ccc_on_timeout(struct ccc_group *g, __u32 i, int old, __u64 rep_cwnd,
					   __u64 rep_ssthresh)
{
	struct ccc_member *c = ccc_m(g, i);
	int repeated = c->rto_pending;
	__u32 j, next;
	__u64 sum;

	if (g->event == CCC_NONE && old != CCC_FR && !repeated)
		ccc_begin_loss_event(g, i, rep_ssthresh);
	c->rto_pending = 1;
	ccc_set_ssbit(g, i, 1);
	ccc_end_handover(g, i);
	c->cwnd = ccc_max(rep_cwnd, CCC_MIN_CWND);
	if (g->n_ssbits == ccc_n(g)) {
		/* Lines 33-37: restart from the windows the connections have. */
		sum = 0;
		for (j = 0; j < CCC_MAX_CONNS; j++) {
			if (j >= ccc_n(g))
				break;
			sum = ccc_add(sum, g->m[j].cwnd);
		}
		g->sum_cwnd = sum;
		if (g->sum_ssthresh == 0)
			g->sum_ssthresh = g->sum_cwnd;
		for (j = 0; j < CCC_MAX_CONNS; j++) {
			if (j >= ccc_n(g))
				break;
			g->m[j].ssbit = 0;
		}
		g->n_ssbits = 0;
		g->event = CCC_NONE;
		g->reductions++;
		c->ssthresh = ccc_ssthresh_share(c->p, g->sum_ssthresh, g->sum_p);
		return;
	}
	/* Item 3: its loss window now, its share as ssthresh. */
	c->ssthresh = ccc_ssthresh_share(c->p, g->sum_cwnd, g->sum_p);
	if (g->coco == i) {
		/* Line 39: ACKs still arrive on connections without a timeout mark. */
		next = ccc_first_from(g, i, CCC_P_NOSSBIT_NOTSS);
		if (next == CCC_NONE)
			next = ccc_first_from(g, i, CCC_P_NOSSBIT);
		if (next != CCC_NONE)
			ccc_make_coco(g, next);
	}
}

/* Rust `slow_start_increase` (item 5). */
static __always_inline void ccc_slow_start_increase(struct ccc_group *g, __u32 i, int state,
						    __u64 rep_cwnd)
{
	const struct ccc_member *c = ccc_mc(g, i);
	int slow_start = state == CCC_SS && g->n_not_ss == 0 && g->n_ssbits == 0 &&
			 g->n_handovers == 0 &&
			 (g->sum_ssthresh == 0 || g->sum_cwnd < g->sum_ssthresh);

	if (slow_start && rep_cwnd > c->cwnd && ccc_double(c->cwnd) > ccc_share_of(g, i))
		g->sum_cwnd = ccc_add(g->sum_cwnd, rep_cwnd - c->cwnd);
}

/* Rust `coco_report` (lines 16-41): the CoCo's increase or decrease changes the aggregate. */
static __always_inline void ccc_coco_report(struct ccc_group *g, __u32 i, int state, __u64 rep_cwnd)
{
	const struct ccc_member *c = ccc_mc(g, i);
	__u64 stored = c->cwnd;
	__u32 next;

	if (rep_cwnd < stored) {
		/* Line 20, for a decrease outside a loss event. */
		if (stored > 0)
			g->sum_cwnd = ccc_scale(g->sum_cwnd, rep_cwnd, stored);
		return;
	}
	if (state == CCC_CA) {
		/* Line 18, unless catching up (item 4) or clocking a joiner (item 8). */
		if (!ccc_behind(g, i) && g->n_handovers == 0)
			g->sum_cwnd = ccc_add(g->sum_cwnd, rep_cwnd - stored);
	} else if (state == CCC_SS) {
		next = ccc_first_not_ss(g);
		if (next != CCC_NONE) {
			/* Line 39: a connection that is not in SS dictates the aggregate. */
			ccc_make_coco(g, next);
		} else if (c->ssbit) {
			next = ccc_first_from(g, i, CCC_P_NOSSBIT);
			if (next != CCC_NONE)
				ccc_make_coco(g, next);
		} else {
			ccc_slow_start_increase(g, i, state, rep_cwnd);
		}
	}
}

/* Rust `assign`: the answer outside FR, bounded so it allows no burst (item 4). */
static __always_inline void ccc_assign(struct ccc_group *g, __u32 i, __u64 rep_cwnd,
				      __u64 rep_ssthresh, __u64 rep_in_flight)
{
	struct ccc_member *c = ccc_m(g, i);
	__u64 normal = ccc_ssthresh_for(g, c->p, rep_ssthresh);
	__u64 allowed = ccc_allowance(rep_cwnd, rep_in_flight, g->max_burst);
	__u64 target, cwnd;

	if (c->handover) {
		c->cwnd = ccc_min(c->cwnd, allowed);
		c->ssthresh = normal;
		return;
	}
	/* bounded(share, normal, allowed) */
	target = ccc_max(ccc_share_of(g, i), CCC_MIN_CWND);
	cwnd = ccc_min(target, allowed);
	c->cwnd = cwnd;
	if (ccc_is_behind(cwnd, target)) {
		c->ssthresh = ccc_max(normal, target);
	} else {
		c->ssthresh = normal;
		ccc_set_ssbit(g, i, 0);
	}
}

static __always_inline void ccc_answer(const struct ccc_group *g, __u32 i, __u64 *out_cwnd,
				       __u64 *out_ssthresh)
{
	const struct ccc_member *c = ccc_mc(g, i);

	if (out_cwnd)
		*out_cwnd = c->cwnd;
	if (out_ssthresh)
		*out_ssthresh = c->ssthresh;
}

/* ---- API ------------------------------------------------------------------------------------- */

/* Rust `Ccc::new(handover)`: an empty group, burst limit 0. */
static __always_inline int ccc_init(struct ccc_group *g, int handover)
{
	int i;

	g->max_burst = 0;
	g->next_seq = 0;
	g->event_epoch = 0;
	g->sum_p = 0;
	g->sum_cwnd = 0;
	g->sum_ssthresh = 0;
	g->reductions = 0;
	g->n = 0;
	g->coco = CCC_NONE;
	g->event = CCC_NONE;
	g->n_not_ss = 0;
	g->n_ssbits = 0;
	g->n_handovers = 0;
	g->handover_enabled = handover ? 1 : 0;
	g->scratch = 0;
	for (i = 0; i < CCC_MAX_CONNS; i++) {
		struct ccc_member *c = &g->m[i];

		c->conn = 0;
		c->seq = 0;
		c->p = 0;
		c->cwnd = 0;
		c->ssthresh = 0;
		c->fr_epoch = 0;
		c->ho_target = 0;
		c->ho_released = 0;
		c->ho_acks = 0;
		c->state = CCC_SS;
		c->ssbit = 0;
		c->rto_pending = 0;
		c->handover = 0;
	}
	return 0;
}

/* TcpCoupler::set_max_burst_pkts. */
static __always_inline int ccc_set_max_burst(struct ccc_group *g, __u64 pkts)
{
	if (pkts > CCC_MAX_INPUT_PKTS)
		return CCC_EINVAL;
	g->max_burst = ccc_window(pkts);
	return 0;
}

/* TcpCoupler::register (Algorithm 5, item 4; item 8 with handover). */
static __always_inline int ccc_register(struct ccc_group *g, __u64 conn, __u64 prio_units,
					__u64 cwnd, __u64 ssthresh, __u64 *out_cwnd,
					__u64 *out_ssthresh)
{
	__u64 rc, rs, seq, target, normal, allowed, t;
	struct ccc_member *c;
	__u32 i;
	int first;

	/* check_register: duplicate, priority, windows; then this core's limit. */
	if (ccc_find(g, conn) >= 0)
		return CCC_EDUP;
	if (prio_units == 0 || prio_units > CCC_MAX_PRIO_UNITS)
		return CCC_EINVAL;
	if (cwnd > CCC_MAX_INPUT_PKTS || ssthresh > CCC_MAX_INPUT_PKTS)
		return CCC_EINVAL;
	if (ccc_n(g) >= CCC_MAX_CONNS)
		return CCC_EFULL;

	rc = ccc_window(cwnd);
	rs = ccc_window(ssthresh);
	first = ccc_n(g) == 0;
	if (first) {
		/* Lines 3-8. */
		g->sum_p = 0;
		g->sum_cwnd = 0;
		g->sum_ssthresh = 0;
	}
	seq = g->next_seq;
	g->next_seq++;
	g->sum_p += prio_units;
	g->sum_cwnd = ccc_add(g->sum_cwnd, rc);
	target = ccc_share(prio_units, g->sum_cwnd, g->sum_p);
	normal = ccc_ssthresh_for(g, prio_units, rs);

	i = ccc_n(g);
	c = ccc_m(g, i);
	c->conn = conn;
	c->seq = seq;
	c->p = prio_units;
	c->state = CCC_SS;
	c->ssbit = 0;
	c->rto_pending = 0;
	c->fr_epoch = 0;
	c->ho_acks = 0;
	if (g->handover_enabled && !first) {
		/* A joiner in handover starts with one segment, counted as released. */
		c->handover = 1;
		c->ho_target = target;
		c->ho_released = 1;
		g->n_handovers++;
		c->cwnd = CCC_MIN_CWND;
		c->ssthresh = normal;
	} else {
		c->handover = 0;
		c->ho_target = 0;
		c->ho_released = 0;
		/* bounded(target, normal, allowance(cwnd, in flight 0)) */
		allowed = ccc_allowance(rc, 0, g->max_burst);
		t = ccc_max(target, CCC_MIN_CWND);
		c->cwnd = ccc_min(t, allowed);
		c->ssthresh = ccc_is_behind(c->cwnd, t) ? ccc_max(normal, t) : normal;
	}
	g->n = i + 1;
	if (first)
		g->coco = i;
	ccc_answer(g, i, out_cwnd, out_ssthresh);
	return 0;
}

/*
 * TcpCoupler::update (Algorithm 7 with items 1-6, 8). state: CCC_SS / CCC_CA / CCC_FR; timeout:
 * nonzero after a retransmission timeout (state must be SS). Returns 0 with the answer in
 * *out_cwnd / *out_ssthresh, 1 without an answer (in FR), or a negative error.
 */
static __always_inline int ccc_update_idx(struct ccc_group *g, int idx, __u64 cwnd, __u64 ssthresh,
					  int state, int timeout, __u64 in_flight, __u64 *out_cwnd,
					  __u64 *out_ssthresh)
{
	__u64 rc, rs, rin;
	struct ccc_member *c;
	int old, leaving_fr, recovered_during_event;
	__u32 i;

	if (idx < 0)
		return CCC_EUNKNOWN;
	/* TcpUpdate::check */
	if (cwnd > CCC_MAX_INPUT_PKTS || ssthresh > CCC_MAX_INPUT_PKTS ||
	    in_flight > CCC_MAX_INPUT_PKTS)
		return CCC_EINVAL;
	if (!ccc_valid_state(state))
		return CCC_EINVAL;
	if (timeout && state != CCC_SS)
		return CCC_EINVAL;

	i = (__u32)idx;
	c = ccc_m(g, i);
	rc = ccc_window(cwnd);
	rs = ccc_window(ssthresh);
	rin = ccc_window(in_flight);
	/* Line 3. */
	old = ccc_set_state(g, i, state);
	if (timeout) {
		ccc_on_timeout(g, i, old, rc, rs);
		ccc_answer(g, i, out_cwnd, out_ssthresh);
		return 0;
	}
	/* Heard from since any timeout: its next timeout is a new loss (item 2). */
	c->rto_pending = 0;
	if (state == CCC_FR) {
		/* Lines 5-6 with item 1. No answer in FR (line 43). */
		if (old != CCC_FR) {
			ccc_end_handover(g, i);
			if (g->event == CCC_NONE) {
				ccc_begin_loss_event(g, i, rs);
				ccc_make_coco(g, i);
			}
			c->fr_epoch = g->reductions;
		}
		return 1;
	}
	leaving_fr = old == CCC_FR;
	recovered_during_event = c->fr_epoch >= g->event_epoch;
	if (leaving_fr && g->event != CCC_NONE &&
	    (g->event == i || (ccc_mc(g, g->event)->state != CCC_FR && recovered_during_event)))
		g->event = CCC_NONE;
	/* Lines 12-14. */
	if (c->ssbit && state != CCC_SS)
		ccc_set_ssbit(g, i, 0);
	if (g->coco == i) {
		if (!leaving_fr)
			ccc_coco_report(g, i, state, rc);
	} else {
		ccc_slow_start_increase(g, i, state, rc);
	}
	/* Lines 8-9 and 22-26. */
	ccc_assign(g, i, rc, rs, rin);
	ccc_answer(g, i, out_cwnd, out_ssthresh);
	return 0;
}

/* `ccc_update` with the caller's index hint (see ccc_find_hint). */
static __always_inline int ccc_update_at(struct ccc_group *g, __u64 conn, __u32 hint, __u64 cwnd,
					 __u64 ssthresh, int state, int timeout, __u64 in_flight,
					 __u64 *out_cwnd, __u64 *out_ssthresh)
{
	return ccc_update_idx(g, ccc_find_hint(g, conn, hint), cwnd, ssthresh, state, timeout,
			      in_flight, out_cwnd, out_ssthresh);
}

static __always_inline int ccc_update(struct ccc_group *g, __u64 conn, __u64 cwnd, __u64 ssthresh,
				      int state, int timeout, __u64 in_flight, __u64 *out_cwnd,
				      __u64 *out_ssthresh)
{
	return ccc_update_at(g, conn, CCC_NONE, cwnd, ssthresh, state, timeout, in_flight, out_cwnd,
			     out_ssthresh);
}

/* An index after removing member `gone` (indices above it move down by one). */
static __always_inline __u32 ccc_index_after_removal(__u32 x, __u32 gone)
{
	if (x != CCC_NONE && x > gone)
		return x - 1;
	return x;
}

/* TcpCoupler::leave (Algorithm 6, item 7). */
static __always_inline int ccc_leave_idx(struct ccc_group *g, int idx)
{
	__u32 i, j, next_coco = CCC_NONE, next_event;
	int was_coco, owned_event, handover;
	__u64 max_burst, reductions, p;

	if (idx < 0)
		return CCC_EUNKNOWN;
	if (ccc_n(g) == 1) {
		/* Ccc::new, keeping the burst limit, the handover flag and the reductions count. */
		max_burst = g->max_burst;
		reductions = g->reductions;
		handover = (int)g->handover_enabled;
		ccc_init(g, handover);
		g->max_burst = max_burst;
		g->reductions = reductions;
		return 0;
	}
	i = (__u32)idx;
	was_coco = g->coco == i;
	owned_event = g->event == i;
	ccc_set_state(g, i, CCC_SS);
	ccc_set_ssbit(g, i, 0);
	ccc_end_handover(g, i);
	/* For the CoCo: the next one not in FR and without a timeout mark, if any (item 7). */
	if (was_coco) {
		next_coco = ccc_first_from(g, i, CCC_P_OTHER_NOTFR_NOSSBIT);
		if (next_coco == CCC_NONE)
			next_coco = ccc_first_from(g, i, CCC_P_OTHER_NOTFR);
		if (next_coco == CCC_NONE)
			next_coco = ccc_first_from(g, i, CCC_P_OTHER);
	}
	/* For the loss event: one still in FR (item 2). */
	if (owned_event)
		next_event = ccc_first_from(g, i, CCC_P_OTHER_FR);
	else
		next_event = g->event;

	/* Remove member i, keeping registration order. */
	p = ccc_m(g, i)->p;
	for (j = 0; j < CCC_MAX_CONNS - 1; j++) {
		__u32 k = i + j;

		if (k + 1 >= ccc_n(g) || k + 1 >= CCC_MAX_CONNS)
			break;
		/* Laundered so clang cannot fold the mask into m[k] + 1, an address the verifier
		 * cannot bound. */
		*ccc_m(g, k) = *ccc_m(g, ccc_launder(g, k + 1));
	}
	g->n--;
	g->sum_p -= p;
	next_coco = ccc_index_after_removal(next_coco, i);
	next_event = ccc_index_after_removal(next_event, i);
	if (!was_coco)
		g->coco = ccc_index_after_removal(g->coco, i);
	g->event = next_event;
	if (was_coco && next_coco != CCC_NONE)
		ccc_make_coco(g, next_coco);
	/* Without a connection outside handover, nothing clocks the joiners any more. */
	if (g->n_handovers == ccc_n(g)) {
		for (j = 0; j < CCC_MAX_CONNS; j++) {
			if (j >= ccc_n(g))
				break;
			ccc_end_handover(g, j);
		}
	}
	return 0;
}

static __always_inline int ccc_leave_at(struct ccc_group *g, __u64 conn, __u32 hint)
{
	return ccc_leave_idx(g, ccc_find_hint(g, conn, hint));
}

static __always_inline int ccc_leave(struct ccc_group *g, __u64 conn)
{
	return ccc_leave_at(g, conn, CCC_NONE);
}

/* TcpCoupler::set_priority: the new share applies from the connection's next update. */
static __always_inline int ccc_set_priority_idx(struct ccc_group *g, int idx, __u64 prio_units)
{
	struct ccc_member *c;

	if (idx < 0)
		return CCC_EUNKNOWN;
	if (prio_units == 0 || prio_units > CCC_MAX_PRIO_UNITS)
		return CCC_EINVAL;
	c = ccc_m(g, (__u32)idx);
	g->sum_p = g->sum_p - c->p + prio_units;
	c->p = prio_units;
	return 0;
}

static __always_inline int ccc_set_priority_at(struct ccc_group *g, __u64 conn, __u32 hint,
					       __u64 prio_units)
{
	return ccc_set_priority_idx(g, ccc_find_hint(g, conn, hint), prio_units);
}

static __always_inline int ccc_set_priority(struct ccc_group *g, __u64 conn, __u64 prio_units)
{
	return ccc_set_priority_at(g, conn, CCC_NONE, prio_units);
}

/*
 * TcpCoupler::on_ack (Algorithm 4, item 8): an ACK arrived for `conn`. Writes the releases (in
 * registration order of the joiners) to rel[0 .. k) and returns k, or a negative error. rel must
 * have room for every running handover (CCC_MAX_CONNS always suffices); with less, CCC_EINVAL and
 * nothing changes. With rel NULL nothing is written and 0 is returned: a joiner's released window
 * is its member's `cwnd`, which the BPF program's joiner reads in its own callback (a struct_ops
 * congestion control writes only its own socket). (Not counting there keeps a register that
 * differs on every path out of the verifier's way.)
 */
static __always_inline int ccc_on_ack_idx(struct ccc_group *g, int idx, struct ccc_release *rel,
					  int max_rel)
{
	__u64 n, sum_cwnd, sum_p, full, target;
	struct ccc_member *c;
	int k = 0, release, done;
	__u32 j;

	if (idx < 0)
		return CCC_EUNKNOWN;
	if (g->n_handovers == 0 || ccc_m(g, (__u32)idx)->handover)
		return 0;
	if (rel && (max_rel < 0 || (__u32)max_rel < g->n_handovers))
		return CCC_EINVAL;
	n = ccc_n(g);
	sum_cwnd = g->sum_cwnd;
	sum_p = g->sum_p;
	for (j = 0; j < CCC_MAX_CONNS; j++) {
		if (j >= ccc_n(g))
			break;
		c = &g->m[j];
		if (!c->handover)
			continue;
		full = ccc_share(c->p, sum_cwnd, sum_p);
		target = ccc_min(c->ho_target, full);
		release = 0;
		if (c->ho_released < target) {
			/* Lines 5-9: one more segment every n ACKs. */
			if (c->ho_acks % n == 0) {
				c->ho_released++;
				c->cwnd = ccc_add(c->cwnd, 1);
				release = 1;
			}
			c->ho_acks++;
		}
		done = c->ho_released >= target;
		if (release || done) {
			if (done)
				c->cwnd = ccc_max(ccc_min(full, c->cwnd), CCC_MIN_CWND);
			if (rel && k < max_rel && k < CCC_MAX_CONNS) {
				rel[k].conn = c->conn;
				rel[k].cwnd = c->cwnd;
				rel[k].done = done ? 1 : 0;
				rel[k]._pad = 0;
				k++;
			}
		}
		if (done) {
			c->handover = 0;
			g->n_handovers--;
		}
	}
	return k;
}

static __always_inline int ccc_on_ack_at(struct ccc_group *g, __u64 conn, __u32 hint,
					 struct ccc_release *rel, int max_rel)
{
	return ccc_on_ack_idx(g, ccc_find_hint(g, conn, hint), rel, max_rel);
}

static __always_inline int ccc_on_ack(struct ccc_group *g, __u64 conn, struct ccc_release *rel,
				      int max_rel)
{
	return ccc_on_ack_at(g, conn, CCC_NONE, rel, max_rel);
}

/* ---- Snapshot accessors ---------------------------------------------------------------------- */

static __always_inline __u64 ccc_sum_cwnd(const struct ccc_group *g)
{
	return g->sum_cwnd;
}

static __always_inline __u64 ccc_sum_ssthresh(const struct ccc_group *g)
{
	return g->sum_ssthresh;
}

static __always_inline __u64 ccc_reductions(const struct ccc_group *g)
{
	return g->reductions;
}

/* Connections registered. */
static __always_inline __u32 ccc_len(const struct ccc_group *g)
{
	return ccc_n(g);
}

/* The coordinating connection: 1 and *conn, or 0 if none. */
static __always_inline int ccc_coco(const struct ccc_group *g, __u64 *conn)
{
	if (g->coco == CCC_NONE || g->coco >= ccc_n(g))
		return 0;
	*conn = ccc_mc(g, g->coco)->conn;
	return 1;
}

/* The connection owning the loss event in progress (Rust `loss_event`): 1 and *conn, or 0. */
static __always_inline int ccc_loss_event(const struct ccc_group *g, __u64 *conn)
{
	if (g->event == CCC_NONE || g->event >= ccc_n(g))
		return 0;
	*conn = ccc_mc(g, g->event)->conn;
	return 1;
}

/* The view of the idx-th connection in registration order (0 <= idx < ccc_len), as the Rust's
 * `view`: the handover target is min(target at join, share now). */
static __always_inline int ccc_view(const struct ccc_group *g, __u32 idx, struct ccc_view *v)
{
	const struct ccc_member *c;

	if (idx >= ccc_n(g) || idx >= CCC_MAX_CONNS)
		return CCC_EINVAL;
	c = ccc_mc(g, idx);
	v->conn = c->conn;
	v->prio_units = c->p;
	v->cwnd = c->cwnd;
	v->ssthresh = c->ssthresh;
	v->state = c->state;
	v->ssbit = c->ssbit;
	v->coordinating = g->coco == idx;
	v->in_handover = c->handover;
	if (c->handover) {
		v->released = c->ho_released;
		v->target = ccc_min(c->ho_target, ccc_share_of(g, idx));
	} else {
		v->released = 0;
		v->target = 0;
	}
	return 0;
}

#endif /* CCC_CORE_H */
