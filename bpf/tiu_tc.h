/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tiu_tc.h: the maps' keys and values and the counters of bpf/tiu_tc.bpf.c, shared with user space
 * (crates/tiu-bpf reads and writes them with the same layout). Addresses and ports are in network
 * byte order, as they stand in the packet; an IPv4 address is in addr[0], the rest zero.
 *
 * Every key of a connection, an ID or a peer starts with the network namespace's cookie (the
 * kernel's net_cookie: SO_NETNS_COOKIE in user space): two namespaces may use the same addresses
 * (containers), and one namespace's entries must never translate another's segments. The rules
 * are not per namespace: they hold in every namespace whose sockets tiu_sockops sees.
 */
#ifndef TIU_TC_H
#define TIU_TC_H

#define TIU_AF_INET 4
#define TIU_AF_INET6 6

/* The `conns` map's size. macroflow_ccc declares the same map and shares it: whichever of the
 * two loads first makes it, the other reuses it. Both name it `tiu_conns` (libbpf gives a reused
 * map the name it has in the kernel, and a skeleton finds its maps by name). */
#define TIU_MAX_CONNS 4096

/* Egress: a TCP connection that rides TiU, by its four-tuple as this host sends it. */
struct tiu_conn_key {
	__u64 netns; /* the network namespace's cookie */
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport;
	__u16 dport;
	__u8 family; /* TIU_AF_INET or TIU_AF_INET6 */
	__u8 pad[3];
};

/* Where a connection's handshake stands (`state` of struct tiu_conn_val). Happy eyeballs (seed
 * 003 Fig. 9.17): an unconfirmed TiU handshake segment also goes as raw TCP, after the TiU one;
 * the first answer decides. */
enum tiu_state {
	TIU_ST_FIXED,     /* put by user space: TiU, no raw copies, never falls back */
	TIU_ST_SYN_SENT,  /* client, ID allocated by rule: SYNs go twice; a raw SYN-ACK falls back */
	TIU_ST_LEARNED,   /* server, from a TiU SYN: SYN-ACKs go twice; raw SYNs are ignored, a raw
			   * segment of the client's falls back */
	TIU_ST_CONFIRMED, /* the peer answered in TiU: raw handshake copies are ignored */
	TIU_ST_PLAIN,     /* fell back: segments go as plain TCP (TiU ones are still received) */
	TIU_ST_HELD,      /* client: the server's raw SYN-ACK offering TiU came first and was held for
			   * its TiU copy; a second one (after a retransmission) falls back */
};

struct tiu_conn_val {
	__u16 udp_sport; /* the TiU port pair this connection's datagrams use */
	__u16 udp_dport;
	__u8 conn_id;    /* 0-31; on a SYN or SYN-ACK the Setup option's value (255: refused) */
	__u8 pad[3];
	__u32 state;     /* enum tiu_state; changed by compare-and-swap (both copies of a handshake
			  * segment can arrive at once on two CPUs) */
};

/* Ingress: a data header's Connection ID on a TiU port pair from a peer, to the TCP ports. */
struct tiu_id_key {
	__u64 netns;
	__u32 saddr[4]; /* the datagram's source (the peer) */
	__u32 daddr[4];
	__u16 udp_sport;
	__u16 udp_dport;
	__u8 family;
	__u8 conn_id;
	__u8 pad[2];
};

struct tiu_id_val {
	__u16 sport; /* the TCP ports as this segment travels */
	__u16 dport;
	__u8 seen;   /* a TiU data segment arrived (the handshake is confirmed) */
	__u8 pad[3];
	__u32 closed_s; /* 0: open; else 1 + the second (monotonic) its connection closed here: late
			 * segments (a FIN retransmitted into TIME_WAIT) still pass, and the ID is
			 * free again for this host after TIU_LINGER_S, for the peer's SYNs at once */
};

#define TIU_LINGER_S 3

/* Which connections ride TiU (the `rules` LPM trie, longest prefix first): a connect() to a
 * matching destination gets a Connection ID for its host pair. data[0] is the family (4 or 6),
 * data[1..] the address (network order); prefixlen counts the family's 8 bits. */
struct tiu_rule_key {
	__u32 prefixlen;
	__u8 data[20];
};

struct tiu_rule_val {
	__u16 port_lo;  /* destination ports (host order); 0-0: any */
	__u16 port_hi;
	__u32 mark;     /* only sockets with this SO_MARK; 0: any */
	__u8 tiu;       /* 1: ride TiU; 0: never (an exception inside a wider rule) */
	__u8 pad[3];
};

/* A peer whose TiU datagrams have arrived lately (the `peers` map): the UDP path works. */
struct tiu_peer_key {
	__u64 netns;
	__u32 saddr[4]; /* the peer */
	__u32 daddr[4]; /* this host */
	__u8 family;
	__u8 pad[7];
};

/* The mark a handshake segment's TiU copy carries through its second pass of tiu_egress. */
#define TIU_COPY_MARK 0x54695543 /* "TiUC" */

/* Counters (the `stats` array), one slot each. */
enum tiu_stat {
	TIU_EG_DATA,          /* data segments encapsulated */
	TIU_EG_SYN,           /* SYN/SYN-ACK segments encapsulated */
	TIU_EG_UNCARRIED,     /* a TiU connection's segment sent as plain TCP: URG, reserved bits */
	TIU_EG_NO_SETUP,      /* a TiU connection's SYN without its Setup option: sent as plain TCP */
	TIU_EG_ERROR,         /* a helper failed (room, store): sent as plain TCP */
	TIU_IN_DATA,          /* data datagrams decapsulated */
	TIU_IN_SYN,           /* SYN/SYN-ACK datagrams decapsulated */
	TIU_IN_NOT_TIU,       /* on a TiU port pair, not a TiU header (STUN, other): passed on */
	TIU_IN_NO_CHECKSUM,   /* UDP checksum 0: dropped */
	TIU_IN_UNKNOWN_ID,    /* a Connection ID the table does not hold: dropped */
	TIU_IN_MALFORMED,     /* lengths, reserved bits, options, Setup option: dropped */
	TIU_IN_ERROR,         /* a helper failed: dropped */
	TIU_IN_UNFINISHED,    /* checksum never completed (a veth/tap peer sending with tx csum on) */
	TIU_IN_COLLISION,     /* a SYN asked for an ID the peer uses for other ports: refused (255) */
	TIU_IN_REFUSED_SYN,   /* a SYN moving a known connection, or an unasked/disagreeing SYN-ACK */
	TIU_EG_RAW_COPY,      /* raw TCP copies of unconfirmed TiU SYNs and SYN-ACKs sent */
	TIU_EG_FALLEN_BACK,   /* segments of fallen-back connections sent as plain TCP */
	TIU_IN_DUP_HANDSHAKE, /* a handshake copy after the race was decided (raw or TiU): dropped */
	TIU_FALLBACK,         /* connections that fell back to plain TCP (a raw answer came first) */
	TIU_ALLOC,            /* Connection IDs allocated at connect() by rule */
	TIU_ALLOC_FULL,       /* connect()s a rule asked TiU for with all 32 IDs taken: plain TCP */
	TIU_IN_RAW_SYN_HELD,  /* a raw SYN (or SYN-ACK) offering TiU, dropped once for its TiU copy
			       * (queued behind others on its path) to win */
	TIU_IN_NO_LISTENER,   /* a TiU SYN for a port nothing listens on: not learned (TCP resets it) */
	TIU_NSTATS,
};

#endif
