/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * macroflow_ccc.h: the layout of the maps the struct_ops program `macroflow_ccc` shares with user
 * space (crates/ccc-bpf mirrors each struct with #[repr(C)] and checks the sizes against the
 * object's BTF when it loads). Plain fixed-width fields only, no padding left implicit.
 */
#ifndef MACROFLOW_CCC_H
#define MACROFLOW_CCC_H

#include "ccc_core.h"

#define MF_CC_NAME "macroflow_ccc"
#define MF_MAX_GROUPS 4096 /* groups map entries (allocated on use) */
#define MF_MAX_RULES 64

/* Group kinds. */
#define MF_GROUP_PAIR 0 /* the default: connections between the same two addresses */
#define MF_GROUP_ID 1   /* an explicit group number from a rule or the socket's own setting */
#define MF_GROUP_TIU 2  /* the default for connections TiU carries: one port pair per host pair,
			 * so one path under ECMP; the pair's plain TCP connections stay MF_GROUP_PAIR */

/* Why a connection runs uncoupled (plain NewReno), in its socket's storage; counted in stats. */
#define MF_WHY_COUPLED 0
#define MF_WHY_GROUPS_FULL 1 /* no room for a new group in the groups map */
#define MF_WHY_GROUP_FULL 2  /* its group already holds CCC_MAX_CONNS connections */
#define MF_WHY_NO_STORAGE 3  /* no socket storage could be made */
#define MF_WHY_RACE 4        /* its group was being made or deleted on every attempt */
#define MF_WHY_LOST 5        /* its group vanished (never expected; counted) */
#define MF_WHY_RULE 6        /* a rule says: do not couple */
#define MF_WHY_CLOSED 7      /* left when everything it sent after closing was acknowledged */

/* Counters (the `stats` array in .bss). */
#define MF_ST_INIT 0           /* connections that started with macroflow_ccc */
#define MF_ST_COUPLED 1        /* ... and registered with a group */
#define MF_ST_RELEASE 2        /* connections released (left their group or never joined) */
#define MF_ST_GROUPS_FULL 3
#define MF_ST_GROUP_FULL 4
#define MF_ST_NO_STORAGE 5     /* attempts: one without storage tries again at each cwnd event */
#define MF_ST_RACE 6
#define MF_ST_LOST 7
#define MF_ST_RULE_UNCOUPLED 8
#define MF_ST_ERR_REGISTER 9   /* coupler errors by call: none is expected */
#define MF_ST_ERR_UPDATE 10
#define MF_ST_ERR_LEAVE 11
#define MF_ST_ERR_ON_ACK 12
#define MF_ST_ERR_PRIO 13
#define MF_ST_UPDATES 14       /* UPDATE calls */
#define MF_ST_PULLS 15         /* handover releases a joiner applied to itself */
#define MF_ST_CLAMPED 16       /* answers held inside [1, snd_cwnd_clamp] */
#define MF_ST_GROUPS_MADE 17
#define MF_ST_GROUPS_EMPTIED 18 /* groups whose last member left */
#define MF_ST_RETRIES 19       /* registration retried after meeting a group being deleted */
#define MF_ST_PRIO_SET 20      /* priority changes applied from the application's setting */
#define MF_ST_RULES_BUSY 21    /* connections that found the rules being rewritten (no rule used) */
#define MF_ST_NEVER_JOINED 22  /* released while still waiting to join (handshake not over) */
#define MF_ST_LATE_START 23    /* established connections the kernel never called init for */
#define MF_ST_LEFT_AT_CLOSE 24 /* left once its FIN and all its data were acknowledged */
#define MF_ST_EVICTED 25       /* members removed after cfg_stale_s not heard from */
#define MF_ST_REJOINS 26       /* connections that found themselves gone from their group and rejoined */
#define MF_ST_RECLASSIFIED 27  /* rules_busy connections classified again once the rules were still */
#define MF_ST_RELEASES_DROPPED 28 /* handover segments a joiner had not taken when its own loss
				   * recovery began (the kernel's recovery sets its window) */
#define MF_NSTATS 29

/* The key of a group. */
struct mf_group_key {
	__u8 kind;   /* MF_GROUP_PAIR / MF_GROUP_ID / MF_GROUP_TIU */
	__u8 family; /* AF_INET / AF_INET6 for a pair; 0 for an id */
	__u16 _pad;
	__u32 id;    /* MF_GROUP_ID: the group number */
	__u8 saddr[16];
	__u8 daddr[16];
	__u64 netns; /* a pair's network namespace (its cookie): the same addresses in two namespaces
		      * are two paths; 0 for an id (a group the user named spans namespaces) */
};

/* A rule: which connections go to which group with which priority. Rules are tried in order
 * (index 0 first) up to the first unused one; the first that matches decides. Every field that is
 * zero matches anything. The list is guarded by a sequence count (`rules_seq`, odd while user
 * space rewrites it): a reader that sees it change retries once, then uses no rule for now
 * (counted as rules_busy) and classifies the connection again at its next ACK (reclassified). */
struct mf_rule {
	__u32 used;        /* 0 ends the list */
	__u32 family;      /* AF_INET, AF_INET6, or 0 */
	__u8 daddr[16];    /* the remote address's prefix (network order) */
	__u32 prefix_len;  /* bits of daddr that must match */
	__u16 port_lo;     /* the remote port's range, host order; 0..0 matches any */
	__u16 port_hi;
	__u64 cgroup_id;   /* the socket's cgroup v2 id, or 0 */
	__u32 group;       /* 0: group by address pair; n > 0: group n */
	__u32 prio_units;  /* 0: priority 1 (65536 units) */
	__u32 uncoupled;   /* 1: matching connections are not coupled */
	__u32 _pad;
};

/* What an application sets on its own socket (a socket-storage map, updated by fd from user
 * space before or after connect): a priority, and optionally a group. */
struct mf_sock_prio {
	__u32 prio_units; /* 0: keep the rule's or the default */
	__u32 group;      /* 0: keep the rule's or the default; n > 0: group n (before connect only) */
	__u32 handover;   /* MF_HANDOVER_*: for a group this connection creates (before connect only) */
	__u32 _pad;
};

#define MF_HANDOVER_DEFAULT 0 /* the load-time setting */
#define MF_HANDOVER_ON 1
#define MF_HANDOVER_OFF 2

/* A connection's own state (socket storage). */
struct mf_conn {
	struct mf_group_key key;
	__u64 conn;        /* its id in the group (unique per load) */
	__u64 gen;         /* the generation of the group it registered with */
	__u32 prio_units;
	__u32 hint;        /* its index in the group when last seen */
	__u32 rep_cwnd;    /* last reported or applied (cwnd, ssthresh, state) */
	__u32 rep_ssthresh;
	__u32 told_cwnd;   /* the coupler's last answer before clamping */
	__u8 rep_state;
	__u8 have_rep;
	__u8 coupled;
	__u8 why;          /* MF_WHY_* */
	__u8 pending;      /* registration to retry (its group was being deleted) */
	__u8 tries;
	__u8 handover;     /* MF_HANDOVER_*, for a group it creates */
	__u8 reclassify;   /* classified while the rules were being rewritten: again at its next ACK */
	__u8 _pad[4];
};

/* A group in the groups map: the lock, the core's state, and what status shows. The program never
 * deletes a group: an emptied one stays (its sums zero) for the next connection of its key, and
 * `macroflow linux gc` deletes those empty for a while (a deleted element's memory can be reused
 * at once, so a deletion racing a joiner must be rare: idle groups only). */
struct mf_group_val {
	struct bpf_spin_lock lock;
	__u32 reap;              /* the next member to check for staleness (round robin) */
	struct mf_group_key key; /* written under the lock by the first joiner (checked by joiners) */
	__u64 gen;               /* 0 until the first joiner initialises the group under the lock */
	__u64 empty_since_ns;    /* bpf_ktime_get_ns() when its last member left; 0 while in use */
	struct ccc_group g;
};

#endif /* MACROFLOW_CCC_H */
