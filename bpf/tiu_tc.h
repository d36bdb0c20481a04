/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * tiu_tc.h: the maps' keys and values and the counters of bpf/tiu_tc.bpf.c, shared with user space
 * (crates/tiu-bpf reads and writes them with the same layout). Addresses and ports are in network
 * byte order, as they stand in the packet; an IPv4 address is in addr[0], the rest zero.
 */
#ifndef TIU_TC_H
#define TIU_TC_H

#define TIU_AF_INET 4
#define TIU_AF_INET6 6

/* Egress: a TCP connection that rides TiU, by its four-tuple as this host sends it. */
struct tiu_conn_key {
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport;
	__u16 dport;
	__u8 family; /* TIU_AF_INET or TIU_AF_INET6 */
	__u8 pad[3];
};

struct tiu_conn_val {
	__u16 udp_sport; /* the TiU port pair this connection's datagrams use */
	__u16 udp_dport;
	__u8 conn_id;    /* 0-31; on a SYN or SYN-ACK the Setup option's value (255: refused) */
	__u8 pad[3];
};

/* Ingress: a data header's Connection ID on a TiU port pair from a peer, to the TCP ports. */
struct tiu_id_key {
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
};

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
	TIU_NSTATS,
};

#endif
