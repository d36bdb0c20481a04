// SPDX-License-Identifier: MIT OR GPL-2.0-only
/*
 * tiu_tc: TCP-in-UDP (seed 003 sec. 9.4.1; the TCP-CCC draft sec. 3.1.1, Figs. 1-3) on the tc
 * hooks, in place, for the connections user space puts in the maps. The reference is
 * crates/tiu (wire.rs says what the draft leaves open and what we chose); crates/tiu-bpf runs both
 * programs with BPF_PROG_TEST_RUN on frames cut from it and requires the same bytes.
 *
 *   tiu_egress   a TCP segment of a connection in `conns` becomes a TiU datagram: a data
 *                segment in place (20 bytes of TCP header become UDP's 8 and TiU's 12, options
 *                and payload stay where they are), a SYN/SYN-ACK 4 bytes longer (the encapsulated
 *                ports; bpf_skb_adjust_room). A segment TiU cannot carry (URG, reserved bits, a
 *                SYN without its Setup option) goes out as plain TCP, counted.
 *   tiu_ingress  a UDP datagram to or from the TiU port becomes the TCP segment it carries; a data
 *                header's Connection ID is looked up in `ids` (with the peer and the port pair). A
 *                datagram without a UDP checksum, with an unknown ID or a malformed header is
 *                dropped, counted; STUN and other content on the port is passed on, counted.
 *
 * Checksums, without reading the payload: a translation only moves 16-bit words and changes a
 * few, so the new checksum is the old one plus the words added minus the words taken away
 * (bpf_csum_diff, RFC 1624), the pseudo-header's protocol and length included. The sums are
 * taken on the words as they lie in memory (a one's-complement sum does not care about byte
 * order as long as every word is taken the same way), so checksums are stored as computed.
 * Ingress derives the TCP checksum from the UDP one, so a corrupted datagram becomes a segment
 * whose checksum TCP refuses. Egress carries a complete TCP checksum over the same way
 * (forwarded segments, BPF_PROG_TEST_RUN); but every segment the local stack sends leaves its
 * checksum to be finished after tc (CHECKSUM_PARTIAL), which egress_partial() handles. Found on
 * real kernel TCP (tests/wire.rs of crates/tiu-bpf), not by the test vectors.
 *
 * TCP builds GSO super-segments whatever the device's offloads (software GSO cuts them after tc):
 * a TiU device needs gso_max_segs 1, and a GSO skb that slips by goes as plain TCP, counted.
 *
 * IPv4 without fragments and IPv6 without extension headers; anything else passes untouched. A
 * datagram whose UDP length is shorter than the IP payload is dropped as malformed (crates/tiu,
 * which sees only the datagram, ignores bytes after the UDP length).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "tiu_tc.h"

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define BPF_ADJ_ROOM_NET 0

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_ACK 0x10
#define TCP_URG 0x20
#define SETUP_KIND 253
#define SETUP_LEN 5
#define SETUP_EXID 0x524a
#define SETUP_REFUSED 255
#define MAX_CONN_ID 31
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_F_NO_PREALLOC 1
#define CHECKSUM_PARTIAL 3
/* Payload summed in chunks of this many bytes, at most this many chunks (6 KiB: a 1500-byte MTU
 * with room to spare; larger segments are sent as plain TCP, counted). */
#define SUM_CHUNK 256
#define SUM_CHUNKS 24

/* The TiU UDP port (network byte order), set by user space before the programs load. */
const volatile __u16 cfg_tiu_port = 0;

/* `conns` (pinned so): the connections TiU carries; named as macroflow_ccc's copy (tiu_tc.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* handshakes that never complete age out */
	__uint(max_entries, TIU_MAX_CONNS);
	__type(key, struct tiu_conn_key);
	__type(value, struct tiu_conn_val);
} tiu_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* handshakes that never complete age out */
	__uint(max_entries, 65536); /* closed IDs linger here: evicted first (least used) */
	__type(key, struct tiu_id_key);
	__type(value, struct tiu_id_val);
} ids SEC(".maps");

/* Which connect()s ride TiU (struct tiu_rule_key): user space's rules. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tiu_rule_key);
	__type(value, struct tiu_rule_val);
} rules SEC(".maps");

/* When each peer's last TiU datagram arrived (bpf_ktime_get_ns), refreshed at most every
 * PEER_REFRESH_NS: what raw_segment() takes as evidence that the UDP path from it works. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct tiu_peer_key);
	__type(value, __u64);
} peers SEC(".maps");

/* Where the next Connection-ID search for a host pair starts (the ID after the last one
 * allocated): IDs go round, so an ID is not reused the moment its connection closes here, while
 * the peer may still hold it for a few more packets (its LAST_ACK), which would be a collision. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct tiu_peer_key);
	__type(value, __u32);
} next_id SEC(".maps");

/* Raw SYNs held once (the four-tuple as received -> the SYN's sequence number): a connection's
 * retransmitted raw SYN passes, whatever the peer's freshness (its TiU copy did not come). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct tiu_conn_key);
	__type(value, __u32);
} held_syns SEC(".maps");

#define PEER_REFRESH_NS 50000000ULL /* 50 ms */
#define PEER_FRESH_NS 1000000000ULL /* 1 s: a SYN retransmission's wait */

/* A handshake segment's own mark while its TiU copy passes through tiu_egress again (inside
 * bpf_clone_redirect, on this CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} copy_mark SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TIU_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* Scratch for summing a payload (too large for the 512-byte BPF stack). */
struct scratch {
	__u8 buf[SUM_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

/* A state change that happens only from `from` (two copies of a handshake segment can be
 * handled at once on two CPUs; the first decides). */
static __always_inline int move(struct tiu_conn_val *c, __u32 from, __u32 to)
{
	return __sync_val_compare_and_swap(&c->state, from, to) == from;
}

static __always_inline __u32 now_s(void)
{
	return (__u32)(bpf_ktime_get_ns() / 1000000000ULL);
}

/* Takes a closed ID entry for a new connection (compare-and-swap on closed_s: of two takers one
 * wins); 1 if taken. */
static __always_inline int reuse(struct tiu_id_val *e, struct tiu_id_val *nv)
{
	__u32 old = READ_ONCE(e->closed_s);

	if (!old || __sync_val_compare_and_swap(&e->closed_s, old, 0) != old)
		return 0;
	e->sport = nv->sport;
	e->dport = nv->dport;
	e->seen = 0;
	return 1;
}

static __always_inline void count(__u32 what)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &what);

	if (c)
		*c += 1;
}

/* Where the IP header and the transport header are, and the addresses as a map key wants them. */
struct where {
	__u32 l3;     /* offset of the IP header */
	__u32 l4;     /* offset of the TCP or UDP header */
	__u32 l4_len; /* bytes from l4 to the end of the IP packet */
	__u32 saddr[4];
	__u32 daddr[4];
	__u64 netns;  /* the network namespace's cookie (every map key starts with it) */
	__u8 family;
	__u8 proto;
};

/* The network namespace the packet is in: its device's, on egress and ingress alike
 * (BPF_PROG_TEST_RUN gives a frame the runner's loopback device). */
static __always_inline __u64 skb_netns(struct __sk_buff *skb)
{
	struct sk_buff *k = bpf_cast_to_kern_ctx(skb);
	struct net_device *dev = k->dev;

	/* Direct loads (the verifier makes them fault-safe), not three probe reads per packet. */
	return dev ? dev->nd_net.net->net_cookie : 0;
}

/* Parses Ethernet and IPv4 (no fragment) or IPv6 (no extension header). 0 on success. */
static __always_inline int locate(struct __sk_buff *skb, struct where *w)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return -1;
	w->l3 = ETH_HLEN;
	w->netns = skb_netns(skb);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + ETH_HLEN;
		__u32 ihl, tot;

		if ((void *)(ip + 1) > end)
			return -1;
		ihl = ip->ihl * 4;
		tot = bpf_ntohs(ip->tot_len);
		if (ihl < 20 || tot < ihl || (ip->frag_off & bpf_htons(0x3fff)))
			return -1;
		w->family = TIU_AF_INET;
		w->proto = ip->protocol;
		w->l4 = ETH_HLEN + ihl;
		w->l4_len = tot - ihl;
		w->saddr[0] = ip->saddr;
		w->daddr[0] = ip->daddr;
		return 0;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + ETH_HLEN;

		if ((void *)(ip6 + 1) > end)
			return -1;
		w->family = TIU_AF_INET6;
		w->proto = ip6->nexthdr;
		w->l4 = ETH_HLEN + 40;
		w->l4_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(w->saddr, &ip6->saddr, 16);
		__builtin_memcpy(w->daddr, &ip6->daddr, 16);
		return 0;
	}
	return -1;
}

/* One's-complement fold of a 32-bit partial sum to 16 bits. */
static __always_inline __u16 fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* The one's-complement sum (memory order, unfolded) of packet bytes [off, off + len); -1 if the
 * bytes cannot be read or are more than SUM_CHUNKS * SUM_CHUNK. */
static __always_inline __s64 sum_bytes(struct __sk_buff *skb, __u32 off, __u32 len)
{
	__u32 k, n, zero = 0;
	struct scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	__u8 *buf;
	__s64 acc = 0;

	if (!sc || len > SUM_CHUNK * SUM_CHUNKS)
		return -1;
	buf = sc->buf;
	for (k = 0; k < SUM_CHUNKS; k++) {
		if (len == 0)
			break;
		n = len > SUM_CHUNK ? SUM_CHUNK : len;
		__builtin_memset(buf, 0, SUM_CHUNK);
		asm volatile("" : "+r"(n));
		if (n == 0 || n > SUM_CHUNK)
			return -1;
		if (bpf_skb_load_bytes(skb, off, buf, n) < 0)
			return -1;
		/* An odd last byte is the high byte of a word whose low byte is 0: the zeroed tail. */
		n = (n + 3) & ~3u;
		asm volatile("" : "+r"(n));
		if (n == 0 || n > SUM_CHUNK)
			return -1;
		acc = bpf_csum_diff(0, 0, (void *)buf, n, (__u32)fold(acc));
		if (acc < 0)
			return -1;
		off += SUM_CHUNK;
		len -= n < len ? n : len;
	}
	return len ? -1 : acc;
}

/*
 * The IP header after the protocol (and, for a SYN, the length) changed: IPv4's protocol, total
 * length and header checksum; IPv6's next header and payload length. `grow` is +4 or -4 or 0.
 */
static __always_inline int set_ip(struct __sk_buff *skb, struct where *w, __u8 proto, int grow)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;

	if (w->family == TIU_AF_INET) {
		struct iphdr *ip = data + ETH_HLEN;
		__u16 old_word, new_word, old_len, new_len;
		__u32 sum;

		if ((void *)(ip + 1) > end)
			return -1;
		/* ttl and protocol share a 16-bit word of the header checksum. */
		old_word = bpf_ntohs(*(__u16 *)&ip->ttl);
		ip->protocol = proto;
		new_word = bpf_ntohs(*(__u16 *)&ip->ttl);
		old_len = bpf_ntohs(ip->tot_len);
		new_len = old_len + grow;
		ip->tot_len = bpf_htons(new_len);
		/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'). */
		sum = (__u16)~bpf_ntohs(ip->check);
		sum += (__u16)~old_word + new_word + (__u16)~old_len + new_len;
		ip->check = bpf_htons(~fold(sum));
	} else {
		struct ipv6hdr *ip6 = data + ETH_HLEN;
		__u32 old_w, new_w;

		if ((void *)(ip6 + 1) > end)
			return -1;
		/* Payload length and next header share the header's second word; the receive
		 * checksum of a CHECKSUM_COMPLETE packet follows it (an IPv4 header sums to zero
		 * with its checksum, so IPv4 needs no such update). */
		old_w = *(__u32 *)((void *)ip6 + 4);
		ip6->nexthdr = proto;
		ip6->payload_len = bpf_htons(bpf_ntohs(ip6->payload_len) + grow);
		new_w = *(__u32 *)((void *)ip6 + 4);
		bpf_csum_update(skb, bpf_csum_diff(&old_w, 4, &new_w, 4, 0));
	}
	w->l4_len += grow;
	return 0;
}

/* The option walk's state, for bpf_loop (one verified callback instead of 40 unrolled steps,
 * whose paths exceeded the verifier's budget). */
struct walk {
	__u8 o[44]; /* 4 bytes of slack: o[i + 4] is in bounds for every i < 40 */
	__u32 i;
	__u32 len;
	int found; /* -1: none yet; -2: malformed */
};

static long walk_step(__u64 n, void *arg)
{
	struct walk *w = arg;
	__u32 i = w->i, len = w->len;
	__u8 kind, olen;

	if (i >= len || i >= 40)
		return 1;
	kind = w->o[i];
	if (kind == 0)
		return 1;
	if (kind == 1) {
		w->i = i + 1;
		return 0;
	}
	olen = w->o[i + 1];
	if (i + 1 >= len || olen < 2 || i + olen > len) {
		w->found = -2;
		return 1;
	}
	if (kind == SETUP_KIND) {
		if (olen < 4) {
			w->found = -2;
			return 1;
		}
		if (((w->o[i + 2] << 8) | w->o[i + 3]) == SETUP_EXID) {
			__u8 v = w->o[i + 4];

			if (olen != SETUP_LEN || w->found >= 0 || (v > MAX_CONN_ID && v != SETUP_REFUSED)) {
				w->found = -2;
				return 1;
			}
			w->found = v;
		}
	}
	w->i = i + olen;
	return 0;
}

/*
 * The Setup option's value in TCP options (-1: none; -2: a malformed list or Setup option), by the
 * rules crates/tiu applies: at most one of ours, length 5, 0-31 or 255; Kind 253 with another
 * ExID is someone else's.
 */
static __always_inline int find_setup(struct __sk_buff *skb, __u32 off, __u32 len)
{
	struct walk w = { .found = -1 };

	/* Through a register the compiler cannot see into, so the bound below is an unsigned
	 * comparison the verifier can use for the load's length. */
	asm volatile("" : "+r"(len));
	if (len > 40)
		return -2;
	if (len && bpf_skb_load_bytes(skb, off, w.o, len) < 0)
		return -2;
	w.len = len;
	bpf_loop(40, walk_step, &w, 0);
	return w.found;
}

/*
 * An IPv6 datagram's flow label goes to 0: the stack set it from the TCP socket's hash, and an
 * ECMP hash over addresses and flow label (Linux's default for IPv6, RFC 6438 routers) would
 * spread one host pair's TiU datagrams over paths as it spread its connections. (No checksum
 * covers it; egress only.)
 */
static __always_inline void flat_flow_label(struct __sk_buff *skb, struct where *w)
{
	__u32 w0;

	if (w->family != TIU_AF_INET6 || bpf_skb_load_bytes(skb, w->l3, &w0, 4) < 0)
		return;
	w0 &= bpf_htonl(0xfff00000);
	bpf_skb_store_bytes(skb, w->l3, &w0, 4, 0);
}

/* A segment rewritten into a TiU datagram leaves: its flow label flat (IPv6) and its flow hash
 * dropped. The socket's hash (sk_txhash, marked as an L4 hash) would go with the datagram and be
 * taken for its five-tuple's: by the next hop's ECMP when a veth carries it into a router
 * namespace (fib_multipath_hash uses an skb's L4 hash as is), by queue selection, RPS. It
 * described the TCP ports: computed anew from the UDP header. */
static __always_inline int sent_as_tiu(struct __sk_buff *skb, struct where *w, int syn)
{
	flat_flow_label(skb, w);
	bpf_set_hash_invalid(skb);
	count(syn ? TIU_EG_SYN : TIU_EG_DATA);
	return TC_ACT_OK;
}

/*
 * Egress of a segment whose TCP checksum the stack has left for later (CHECKSUM_PARTIAL: every
 * locally sent TCP segment; the device or validate_xmit_skb finishes it after tc). The field holds
 * only the pseudo-header's sum, so nothing can be carried over: the UDP checksum is summed here
 * over the whole datagram. And the stack will still finish "its" checksum: it sums
 * [csum_start, end) and writes the result at csum_start + 16, which in TiU's layout is the ACK
 * number's top half (a SYN: the encapsulated source port). So that word is written as the value
 * that makes the stack's write produce the right one: ~(the final bytes' sum from csum_start).
 * A word that must end as 0 or 0xffff cannot be made so reliably (the stack writes 0xffff for 0;
 * a device may not): such a data segment goes as plain TCP, counted (two ACK values in 65,536).
 * The completion must happen before the datagram is delivered: on a veth or tap device with
 * transmit checksumming on, the peer gets the datagram unfinished, which tiu_ingress refuses
 * (`in_unfinished`); TiU devices of that kind need transmit checksumming off.
 */
static __always_inline int egress_partial(struct __sk_buff *skb, struct sk_buff *kskb, struct where *w,
					  __u32 *u, int syn, __u16 ulen)
{
	__u32 hl = syn ? 24 : 20, pz[10] = {}, pos, rel, np;
	__u64 s_l4, total;
	__s64 sp;
	__u16 check, d, x;

	/* A SYN: the room first, then the stack's checksum position is read where it now is. */
	if (syn && bpf_skb_adjust_room(skb, 4, BPF_ADJ_ROOM_NET, 0) < 0) {
		count(TIU_EG_ERROR);
		return TC_ACT_OK;
	}
	/* Options and payload: unchanged bytes after TCP's 20, wherever TCP's header now starts. */
	sp = sum_bytes(skb, w->l4 + (syn ? 4 : 0) + 20, ulen - hl);
	/* Both offsets from skb->head: csum_start and the IP header's. */
	rel = kskb->csum_start - kskb->network_header - (w->l4 - w->l3);
	pos = rel + kskb->csum_offset;
	if (sp < 0 || rel != (syn ? 4 : 0) || kskb->csum_offset != 16 || pos + 2 > hl) {
		count(syn ? TIU_EG_ERROR : TIU_EG_UNCARRIED);
		/* A SYN already has its room: it can go neither way. */
		return syn ? TC_ACT_SHOT : TC_ACT_OK;
	}
	/* pos is 16 (data) or 20 (SYN) here: constant indexes for the verifier. */
	d = syn ? ((__u16 *)u)[10] : ((__u16 *)u)[8];
	/* 0 cannot be produced (the stack writes 0xffff for 0), and 0xffff would come out 0 from a
	 * device that does not do that. */
	if (d == 0 || d == 0xffff) {
		count(syn ? TIU_EG_ERROR : TIU_EG_UNCARRIED);
		return syn ? TC_ACT_SHOT : TC_ACT_OK;
	}
	/* The pseudo-header (IPv6's length and next header sum as IPv4's protocol and length). */
	if (w->family == TIU_AF_INET) {
		pz[0] = w->saddr[0];
		pz[1] = w->daddr[0];
		np = 12;
	} else {
		__builtin_memcpy(pz, w->saddr, 16);
		__builtin_memcpy(&pz[4], w->daddr, 16);
		np = 36;
	}
	((__u16 *)pz)[np / 2 - 2] = bpf_htons(IPPROTO_UDP);
	((__u16 *)pz)[np / 2 - 1] = bpf_htons(ulen);
	u[1] &= 0xffff;
	s_l4 = bpf_csum_diff(0, 0, u, hl, fold(sp));
	total = np == 12 ? bpf_csum_diff(0, 0, pz, 12, fold(s_l4)) : bpf_csum_diff(0, 0, pz, 36, fold(s_l4));
	check = ~fold(total);
	if (check == 0)
		check = 0xffff;
	u[1] |= (__u32)check << 16;
	/* The final L4 bytes' sum, from csum_start: with the checksum, without a SYN's first word. */
	s_l4 = fold(s_l4) + check;
	if (syn)
		s_l4 = bpf_csum_diff(u, 4, 0, 0, fold(s_l4));
	x = ~fold(s_l4);
	if (syn)
		((__u16 *)u)[10] = x;
	else
		((__u16 *)u)[8] = x;
	if (bpf_skb_store_bytes(skb, w->l4, u, hl, 0) < 0 || set_ip(skb, w, IPPROTO_UDP, syn ? 4 : 0) < 0) {
		count(TIU_EG_ERROR);
		return TC_ACT_SHOT;
	}
	return sent_as_tiu(skb, w, syn);
}

SEC("tc")
int tiu_egress(struct __sk_buff *skb)
{
	struct where w = {};
	struct tiu_conn_key key = {};
	struct tiu_conn_val *conn;
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	__u32 t[5], u[6], from[3], to[4];
	__u8 b12, flags, doff;
	__u16 urg, ulen, check, usport, udport;
	int syn, setup;
	__u64 sum;
	__u32 st0;
	__u8 id;

	if (locate(skb, &w) < 0 || w.proto != IPPROTO_TCP)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, w.l4, t, 20) < 0)
		return TC_ACT_OK;
	__builtin_memcpy(key.saddr, w.saddr, 16);
	__builtin_memcpy(key.daddr, w.daddr, 16);
	key.sport = t[0] & 0xffff;
	key.dport = t[0] >> 16;
	key.family = w.family;
	key.netns = w.netns;
	conn = bpf_map_lookup_elem(&tiu_conns, &key);
	if (!conn)
		return TC_ACT_OK;
	/* The ID and port pair read once, at the lookup: a preallocated LRU element can be deleted
	 * and recycled for another connection while this program runs (the helper calls below take
	 * a while), and reading it later could give this segment another connection's ID. Only the
	 * state is read and changed in place (compare-and-swap from an expected state). */
	id = conn->conn_id;
	usport = conn->udp_sport;
	udport = conn->udp_dport;
	st0 = READ_ONCE(conn->state);
	if (st0 == TIU_ST_PLAIN) {
		count(TIU_EG_FALLEN_BACK);
		return TC_ACT_OK;
	}

	b12 = ((__u8 *)t)[12];
	flags = ((__u8 *)t)[13];
	doff = b12 >> 4;
	/* A GSO super-segment would be cut into TCP segments after us: one TiU header cannot
	 * become many (user space sets gso_max_segs 1 on TiU devices; this counts what slips by). */
	if (doff < 5 || doff * 4 > w.l4_len || (b12 & 0x0f) || (flags & TCP_URG) || skb->gso_size ||
	    /* bpf_skb_adjust_room(BPF_ADJ_ROOM_NET) makes room 20 bytes after the IP header's
	     * start, not after its options: a SYN behind IPv4 options goes as plain TCP. */
	    ((flags & TCP_SYN) && w.l4 != w.l3 + (w.family == TIU_AF_INET ? 20 : 40))) {
		count(TIU_EG_UNCARRIED);
		return TC_ACT_OK;
	}
	syn = flags & TCP_SYN;
	setup = find_setup(skb, w.l4 + 20, doff * 4 - 20);
	if (syn ? (setup != id || (setup == SETUP_REFUSED && !(flags & TCP_ACK)))
		: (setup != -1 || id > MAX_CONN_ID)) {
		count(syn ? TIU_EG_NO_SETUP : TIU_EG_UNCARRIED);
		/* A SYN that goes without its Setup option leaves its connection plain TCP for good:
		 * the peer could not know its ID. (A server's SYN-ACK built before the TiU SYN taught
		 * it the connection: the raw SYN came first.) The entries stay until the connection
		 * closes, so TiU segments the peer may still send are decapsulated and the ID is
		 * freed with the connection, not leaked. */
		if (syn)
			move(conn, st0, TIU_ST_PLAIN);
		return TC_ACT_OK;
	}
	/*
	 * Happy eyeballs (seed 003 Fig. 9.17): an unconfirmed handshake (the client's SYN, the
	 * server's SYN-ACK) goes as TiU and then as raw TCP, so a peer without TiU or a path that
	 * drops the UDP port still gets a SYN it can answer at once. The TiU copy is a clone sent
	 * ahead through this program again (marked; bpf_clone_redirect transmits it before
	 * returning), this skb goes on as the raw one.
	 */
	if (syn) {
		__u32 zero = 0, *stash = bpf_map_lookup_elem(&copy_mark, &zero);

		if (!stash) {
			count(TIU_EG_ERROR);
		} else if (skb->mark == TIU_COPY_MARK) {
			skb->mark = *stash; /* the TiU copy: translated below */
		} else {
			__u32 st = READ_ONCE(conn->state);

			if (((st == TIU_ST_SYN_SENT || st == TIU_ST_HELD) && !(flags & TCP_ACK)) ||
			    (st == TIU_ST_LEARNED && (flags & TCP_ACK))) {
				long err;

				*stash = skb->mark;
				skb->mark = TIU_COPY_MARK;
				err = bpf_clone_redirect(skb, skb->ifindex, 0);
				skb->mark = *stash;
				/* The copy's transmit status: 0, or NET_XMIT_CN (queued, congestion). */
				if (err != 0 && err != 2)
					count(TIU_EG_ERROR);
				/* This skb goes raw even if the copy failed: raw is the safety net. */
				count(TIU_EG_RAW_COPY);
				return TC_ACT_OK;
			}
		}
	}
	urg = ((__u16 *)t)[9];
	ulen = w.l4_len + (syn ? 4 : 0);

	/* The new words: UDP ports, UDP length (checksum last), then Fig. 1 or Fig. 2. */
	u[0] = ((__u32)udport << 16) | usport;
	u[1] = bpf_htons(ulen); /* the checksum half stays 0 until it is known */
	if (syn) {
		u[2] = t[3]; /* Data Offset, reserved 0, flags, window: as in TCP */
		u[3] = t[1];
		u[4] = t[2];
		u[5] = t[0]; /* the encapsulated ports */
	} else {
		__u8 *w3 = (__u8 *)&u[2];

		u[2] = t[3];
		w3[0] = (doff << 4) | (id >> 1);
		w3[1] = flags | ((id & 1) << 5);
		u[3] = t[1];
		u[4] = t[2];
	}

	if (BPF_CORE_READ_BITFIELD(kskb, ip_summed) == CHECKSUM_PARTIAL)
		return egress_partial(skb, kskb, &w, u, syn, ulen);

	/* Checksum: ~TCP check + added - removed, the pseudo-header's protocol (and length) too. */
	if (syn) {
		from[0] = t[3];
		((__u16 *)from)[2] = urg;
		((__u16 *)from)[3] = bpf_htons(IPPROTO_TCP);
		((__u16 *)from)[4] = bpf_htons(w.l4_len);
		((__u16 *)from)[5] = 0;
		to[0] = u[0];
		to[1] = u[2];
		((__u16 *)to)[4] = bpf_htons(ulen);
		((__u16 *)to)[5] = bpf_htons(IPPROTO_UDP);
		((__u16 *)to)[6] = bpf_htons(ulen);
		((__u16 *)to)[7] = 0;
		sum = bpf_csum_diff(from, 12, to, 16, (__u16)~((__u16 *)t)[8]);
	} else {
		from[0] = t[0];
		from[1] = t[3];
		((__u16 *)from)[4] = urg;
		((__u16 *)from)[5] = bpf_htons(IPPROTO_TCP);
		to[0] = u[0];
		to[1] = u[2];
		((__u16 *)to)[4] = bpf_htons(ulen);
		((__u16 *)to)[5] = bpf_htons(IPPROTO_UDP);
		sum = bpf_csum_diff(from, 12, to, 12, (__u16)~((__u16 *)t)[8]);
	}
	check = ~fold(sum);
	if (check == 0)
		check = 0xffff; /* RFC 768: 0 means no checksum */
	u[1] |= (__u32)check << 16;

	if (syn && bpf_skb_adjust_room(skb, 4, BPF_ADJ_ROOM_NET, 0) < 0) {
		count(TIU_EG_ERROR);
		return TC_ACT_OK;
	}
	if (bpf_skb_store_bytes(skb, w.l4, u, syn ? 24 : 20, 0) < 0 ||
	    set_ip(skb, &w, IPPROTO_UDP, syn ? 4 : 0) < 0) {
		/* The packet is half rewritten: it cannot go out as either. */
		count(TIU_EG_ERROR);
		return TC_ACT_SHOT;
	}
	return sent_as_tiu(skb, &w, syn);
}

/*
 * The state of the socket this host has for a segment from the peer (w's addresses as they
 * arrive) with TCP ports `sport` -> `dport` (network order): the connection's, else a listener's;
 * -1 if there is none.
 */
static __always_inline int sock_state(struct __sk_buff *skb, struct where *w, __u16 sport, __u16 dport)
{
	struct bpf_sock_tuple tup = {};
	struct bpf_sock *sk;
	__u32 sz, st;

	if (w->family == TIU_AF_INET) {
		tup.ipv4.saddr = w->saddr[0];
		tup.ipv4.daddr = w->daddr[0];
		tup.ipv4.sport = sport;
		tup.ipv4.dport = dport;
		sz = sizeof(tup.ipv4);
	} else {
		__builtin_memcpy(tup.ipv6.saddr, w->saddr, 16);
		__builtin_memcpy(tup.ipv6.daddr, w->daddr, 16);
		tup.ipv6.sport = sport;
		tup.ipv6.dport = dport;
		sz = sizeof(tup.ipv6);
	}
	sk = bpf_skc_lookup_tcp(skb, &tup, sz, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return -1;
	st = sk->state;
	bpf_sk_release(sk);
	return st;
}

/*
 * An open ID entry (`e`, at `k`) held for ports that have no connection here (a handshake that
 * never completed: no close callback removed it) is taken over for `nv`; 1 if it was. Written by
 * key, not through `e`: the socket lookup is a long window in which a preallocated LRU element
 * can be deleted and recycled for another key, and a write through the old pointer would give
 * that key these ports.
 */
static __always_inline int orphaned(struct __sk_buff *skb, struct where *w, struct tiu_id_key *k,
				    struct tiu_id_val *e, struct tiu_id_val *nv)
{
	int st = sock_state(skb, w, e->sport, e->dport);

	if (st >= 0 && st != BPF_TCP_LISTEN)
		return 0; /* a live connection (or its request, or TIME_WAIT) */
	/* Gone meanwhile: the ID is free, made anew. */
	return bpf_map_update_elem(&ids, k, nv, BPF_EXIST) == 0 ||
	       bpf_map_update_elem(&ids, k, nv, BPF_NOEXIST) == 0;
}

/*
 * What a TiU SYN or SYN-ACK teaches (draft sec. 3.1.1.3): the sender will use Connection ID `id`
 * for the TCP ports in the SYN header on this port pair.
 *  - A SYN: this host, the server, records the ID for the peer (`ids`) and answers through
 *    `conns` (the reverse four-tuple, the port pair swapped), so tiu_sockops writes the Setup
 *    option into the SYN-ACK and tiu_egress carries it. An ID the peer already uses on this port
 *    pair for other ports is a collision: the answer is 255 (`conns` with ID 255: the SYN-ACK
 *    says refused and the connection's later segments, whose ID is over 31, go as plain TCP).
 *  - A SYN-ACK with an ID: the client records it for the peer's segments (`ids`).
 *  - A SYN-ACK with 255: the client stops encapsulating (its `conns` entry goes).
 * A SYN for a port nothing listens on, or for a connection that exists already (the raw copy
 * won), teaches nothing: no socket would ever remove what it left (-4: delivered, TCP resets
 * it; -3: a duplicate, dropped). The SYN header's ports are (u[5]): the peer's, then this
 * host's.
 */
static __always_inline int learn(struct __sk_buff *skb, struct where *w, __u32 *u, int id, int ack)
{
	struct tiu_id_key ik = {};
	struct tiu_id_val iv = {}, *had;
	struct tiu_conn_key ck = {};
	struct tiu_conn_val cv = {}, *mine;

	__builtin_memcpy(ik.saddr, w->saddr, 16);
	__builtin_memcpy(ik.daddr, w->daddr, 16);
	ik.udp_sport = u[0] & 0xffff;
	ik.udp_dport = u[0] >> 16;
	ik.family = w->family;
	ik.netns = w->netns;
	ik.conn_id = id;
	iv.sport = u[5] & 0xffff;
	iv.dport = u[5] >> 16;
	/* This host's four-tuple of the connection, as it sends. */
	__builtin_memcpy(ck.saddr, w->daddr, 16);
	__builtin_memcpy(ck.daddr, w->saddr, 16);
	ck.sport = iv.dport;
	ck.dport = iv.sport;
	ck.family = w->family;
	ck.netns = w->netns;
	mine = bpf_map_lookup_elem(&tiu_conns, &ck);
	if (ack) {
		/* Only the answer to a SYN this host sent as TiU, with its ID or a refusal: an
		 * unsolicited or disagreeing SYN-ACK teaches nothing (and is dropped). */
		if (!mine || (id != mine->conn_id && id != SETUP_REFUSED))
			return -2;
		/* The raw answer came first and the connection went on as plain TCP. */
		if (READ_ONCE(mine->state) == TIU_ST_PLAIN)
			return -3;
		if (id == SETUP_REFUSED) {
			/* The ID this host held for the answer's segments goes too. */
			ik.conn_id = mine->conn_id;
			bpf_map_delete_elem(&ids, &ik);
			bpf_map_delete_elem(&tiu_conns, &ck);
			return 0;
		}
		/* The ID entry first, then the state: written by key (not through a looked-up
		 * pointer, which could be a recycled LRU element by now), made if it is gone (an
		 * allocated ID is this host's to write). If that fails, the connection goes on as
		 * plain TCP rather than hang confirmed. */
		if (bpf_map_update_elem(&ids, &ik, &iv, BPF_ANY) < 0) {
			if (!move(mine, TIU_ST_SYN_SENT, TIU_ST_PLAIN))
				move(mine, TIU_ST_HELD, TIU_ST_PLAIN);
			count(TIU_IN_ERROR);
			return 0;
		}
		if (!move(mine, TIU_ST_SYN_SENT, TIU_ST_CONFIRMED) &&
		    !move(mine, TIU_ST_HELD, TIU_ST_CONFIRMED) &&
		    READ_ONCE(mine->state) == TIU_ST_PLAIN)
			return -3; /* fell back meanwhile, on the other CPU */
		return 0;
	}
	/*
	 * A SYN for a port nothing listens on teaches nothing (TCP answers it with a reset, raw);
	 * one for a connection that is established (a late TiU copy: the raw one won) is a
	 * duplicate. Learning either would leave entries no socket ever removes. A SYN meeting
	 * only the listener (or a TIME_WAIT socket, which TCP lets a new SYN replace) while an
	 * entry exists for its four-tuple: that entry is stale (a handshake that never
	 * completed gets no close callback), and goes.
	 */
	{
		int st = sock_state(skb, w, iv.sport, iv.dport);

		if (st < 0)
			return -4;
		if (st != BPF_TCP_LISTEN && st != BPF_TCP_NEW_SYN_RECV && st != BPF_TCP_TIME_WAIT)
			return -3;
		if (mine && st != BPF_TCP_NEW_SYN_RECV) {
			struct tiu_id_key old = ik;

			old.conn_id = mine->conn_id;
			had = bpf_map_lookup_elem(&ids, &old);
			if (had && had->sport == iv.sport && had->dport == iv.dport)
				WRITE_ONCE(had->closed_s, now_s() + 1);
			bpf_map_delete_elem(&tiu_conns, &ck);
			mine = 0;
		}
	}
	cv.udp_sport = u[0] >> 16;
	cv.udp_dport = u[0] & 0xffff;
	cv.conn_id = id;
	cv.state = TIU_ST_LEARNED;
	if (mine) {
		/* This handshake is known: a retransmitted SYN changes nothing, and a SYN that would
		 * move it to another port pair or ID (spoofed) is dropped. */
		return mine->udp_sport == cv.udp_sport && mine->udp_dport == cv.udp_dport &&
		       mine->conn_id == cv.conn_id ? 0 : -2;
	}
	/* Looked up first (a failing BPF_NOEXIST update of an LRU map still takes a node); of two
	 * SYNs asking for one free ID at once, BPF_NOEXIST lets one win, the other collides. */
	had = bpf_map_lookup_elem(&ids, &ik);
	if (had) {
		if (had->sport == iv.sport && had->dport == iv.dport) {
			/* This four-tuple's own ID again (a reconnect): open once more. */
			if (READ_ONCE(had->closed_s))
				reuse(had, &iv);
		} else if (!reuse(had, &iv) && !orphaned(skb, w, &ik, had, &iv)) {
			/* Held for other ports: a collision, unless that connection closed here (the
			 * peer closed it too, or it would not ask) or never became a socket. */
			cv.conn_id = SETUP_REFUSED;
			count(TIU_IN_COLLISION);
		}
	} else if (bpf_map_update_elem(&ids, &ik, &iv, BPF_NOEXIST) < 0) {
		cv.conn_id = SETUP_REFUSED;
		count(TIU_IN_COLLISION);
	}
	return bpf_map_update_elem(&tiu_conns, &ck, &cv, BPF_ANY);
}

/*
 * A raw TCP segment of a connection that rides TiU (happy eyeballs, seed 003 Fig. 9.17: the
 * first completed handshake wins):
 *  - a raw SYN-ACK while this client's TiU SYN is unanswered: without the Setup option the
 *    peer has no TiU or the path drops the port, and the connection falls back to plain TCP
 *    (its TiU answer, if one comes, is ignored); with it, it is held once for its TiU copy.
 *    After a TiU SYN-ACK, raw copies are ignored.
 *  - a raw SYN after this server learned the connection from a TiU SYN: ignored (answered).
 *  - any other raw segment from a client whose handshake this server has not seen confirmed in
 *    TiU: the client fell back; so does this end. (Segments TiU cannot carry go raw in a
 *    confirmed connection: those pass.)
 */
static __always_inline int raw_segment(struct __sk_buff *skb, struct where *w)
{
	struct tiu_conn_key ck = {};
	struct tiu_conn_val *c;
	__u32 t[4], st;
	__u8 flags;

	if (bpf_skb_load_bytes(skb, w->l4, t, 16) < 0)
		return TC_ACT_OK;
	__builtin_memcpy(ck.saddr, w->daddr, 16);
	__builtin_memcpy(ck.daddr, w->saddr, 16);
	ck.sport = t[0] >> 16;
	ck.dport = t[0] & 0xffff;
	ck.family = w->family;
	ck.netns = w->netns;
	c = bpf_map_lookup_elem(&tiu_conns, &ck);
	flags = ((__u8 *)t)[13];
	if (!c) {
		/*
		 * A raw SYN that offers TiU (its Setup option) from a peer whose TiU datagrams have
		 * arrived within the last second: its TiU copy is on the way, queued behind others on
		 * the TiU path (over ECMP the raw copy takes another path, and a burst of SYNs queues
		 * on the TiU one; answering the raw SYN would turn the connection plain). Dropped, so
		 * the TiU copy wins. Once per connection: if its TiU copy never comes (the UDP path
		 * broke just now, a lost datagram, a SYN TiU cannot carry), the SYN retransmitted a
		 * second later passes and the connection runs plain.
		 */
		struct tiu_peer_key pk = {};
		struct tiu_conn_key hk = {};
		__u64 *last;
		__u32 *seq;
		int setup;

		if ((flags & (TCP_SYN | TCP_ACK)) != TCP_SYN)
			return TC_ACT_OK;
		__builtin_memcpy(pk.saddr, w->saddr, 16);
		__builtin_memcpy(pk.daddr, w->daddr, 16);
		pk.family = w->family;
		pk.netns = w->netns;
		last = bpf_map_lookup_elem(&peers, &pk);
		if (!last || bpf_ktime_get_ns() - *last > PEER_FRESH_NS)
			return TC_ACT_OK;
		setup = find_setup(skb, w->l4 + 20, (((__u8 *)t)[12] >> 4) * 4 - 20);
		if (setup < 0 || setup > MAX_CONN_ID)
			return TC_ACT_OK;
		__builtin_memcpy(hk.saddr, w->saddr, 16);
		__builtin_memcpy(hk.daddr, w->daddr, 16);
		hk.sport = t[0] & 0xffff;
		hk.dport = t[0] >> 16;
		hk.family = w->family;
		hk.netns = w->netns;
		seq = bpf_map_lookup_elem(&held_syns, &hk);
		if (seq && *seq == t[1]) {
			bpf_map_delete_elem(&held_syns, &hk);
			return TC_ACT_OK;
		}
		bpf_map_update_elem(&held_syns, &hk, &t[1], BPF_ANY);
		count(TIU_IN_RAW_SYN_HELD);
		return TC_ACT_SHOT;
	}
	st = READ_ONCE(c->state);
	if ((flags & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK)) {
		if (st == TIU_ST_SYN_SENT || st == TIU_ST_HELD) {
			/* The server's raw copy of a TiU answer carries the Setup option with this
			 * connection's ID: the server learned the connection from the TiU SYN, and its
			 * TiU copy is on the way (over ECMP, queued on another path): held once. It
			 * does not confirm TiU by itself (the way back may drop the UDP port); the
			 * second one, after a retransmission, falls back. Without the option, the
			 * server answered the raw SYN: plain TCP at once. */
			int setup = find_setup(skb, w->l4 + 20, (((__u8 *)t)[12] >> 4) * 4 - 20);

			if (setup == c->conn_id && move(c, TIU_ST_SYN_SENT, TIU_ST_HELD)) {
				count(TIU_IN_RAW_SYN_HELD);
				return TC_ACT_SHOT;
			}
			if (move(c, TIU_ST_SYN_SENT, TIU_ST_PLAIN) || move(c, TIU_ST_HELD, TIU_ST_PLAIN)) {
				count(TIU_FALLBACK);
			} else if (READ_ONCE(c->state) == TIU_ST_CONFIRMED) {
				/* The TiU answer won meanwhile, on the other CPU. */
				count(TIU_IN_DUP_HANDSHAKE);
				return TC_ACT_SHOT;
			}
		} else if (st == TIU_ST_CONFIRMED) {
			count(TIU_IN_DUP_HANDSHAKE);
			return TC_ACT_SHOT;
		}
	} else if (flags & TCP_SYN) {
		if (st == TIU_ST_LEARNED || st == TIU_ST_CONFIRMED) {
			count(TIU_IN_DUP_HANDSHAKE);
			return TC_ACT_SHOT;
		}
	} else if (st == TIU_ST_LEARNED && move(c, TIU_ST_LEARNED, TIU_ST_PLAIN)) {
		count(TIU_FALLBACK);
	}
	return TC_ACT_OK;
}

SEC("tc")
int tiu_ingress(struct __sk_buff *skb)
{
	struct where w = {};
	struct tiu_id_key key = {};
	struct tiu_id_val *ports;
	__u16 psport, pdport;
	__u32 u[6], t[5], from[4], to[3];
	__u16 ulen, ucheck;
	__u8 b0, flags, doff;
	int syn, setup;
	__u64 sum;

	if (locate(skb, &w) < 0)
		return TC_ACT_OK;
	if (w.proto == IPPROTO_TCP)
		return raw_segment(skb, &w);
	if (w.proto != IPPROTO_UDP)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, w.l4, u, 8) < 0)
		return TC_ACT_OK;
	if (cfg_tiu_port == 0 || ((u[0] & 0xffff) != cfg_tiu_port && (u[0] >> 16) != cfg_tiu_port))
		return TC_ACT_OK;
	ulen = bpf_ntohs(u[1] & 0xffff);
	ucheck = bpf_ntohs(u[1] >> 16);
	if (ulen < 8 || ulen > w.l4_len) {
		count(TIU_IN_MALFORMED);
		return TC_ACT_SHOT;
	}
	if (ulen < 10 || bpf_skb_load_bytes(skb, w.l4 + 8, &u[2], 2) < 0) {
		count(TIU_IN_NOT_TIU);
		return TC_ACT_OK;
	}
	b0 = ((__u8 *)u)[8];
	flags = ((__u8 *)u)[9];
	doff = b0 >> 4;
	if (doff < 5) {
		count(TIU_IN_NOT_TIU); /* STUN (0-3) or other (4) */
		return TC_ACT_OK;
	}
	if (ucheck == 0) {
		count(TIU_IN_NO_CHECKSUM);
		return TC_ACT_SHOT;
	}
	/* Sent by tiu_egress through a veth or tap whose transmit checksumming is on: the word at
	 * the stack's checksum position still waits for a completion that will not come. */
	if (BPF_CORE_READ_BITFIELD((struct sk_buff *)bpf_cast_to_kern_ctx(skb), ip_summed) == CHECKSUM_PARTIAL) {
		count(TIU_IN_UNFINISHED);
		return TC_ACT_SHOT;
	}
	syn = flags & TCP_SYN;
	if (8 + (syn ? 16 : 12) + doff * 4 - 20 > ulen || ulen != w.l4_len ||
	    bpf_skb_load_bytes(skb, w.l4, u, syn ? 24 : 20) < 0) {
		count(TIU_IN_MALFORMED);
		return TC_ACT_SHOT;
	}
	setup = find_setup(skb, w.l4 + (syn ? 24 : 20), doff * 4 - 20);
	if (syn) {
		/* The 4 bytes go at the IP header's start + 20 (BPF_ADJ_ROOM_NET): not behind options. */
		if ((b0 & 0x0f) || (flags & TCP_URG) || setup < 0 || w.l4 != w.l3 + (w.family == TIU_AF_INET ? 20 : 40) ||
		    (setup == SETUP_REFUSED && !(flags & TCP_ACK))) {
			count(TIU_IN_MALFORMED);
			return TC_ACT_SHOT;
		}
		t[0] = u[5];
		t[3] = u[2];
		switch (learn(skb, &w, u, setup, flags & TCP_ACK)) {
		case 0:
			break;
		case -4:
			count(TIU_IN_NO_LISTENER);
			break;
		case -2:
			count(TIU_IN_REFUSED_SYN);
			return TC_ACT_SHOT;
		case -3:
			count(TIU_IN_DUP_HANDSHAKE);
			return TC_ACT_SHOT;
		default:
			count(TIU_IN_ERROR);
			return TC_ACT_SHOT;
		}
	} else {
		if (setup != -1) {
			count(TIU_IN_MALFORMED);
			return TC_ACT_SHOT;
		}
		__builtin_memcpy(key.saddr, w.saddr, 16);
		__builtin_memcpy(key.daddr, w.daddr, 16);
		key.udp_sport = u[0] & 0xffff;
		key.udp_dport = u[0] >> 16;
		key.family = w.family;
		key.netns = w.netns;
		key.conn_id = ((b0 & 0x0f) << 1) | ((flags & TCP_URG) >> 5);
		ports = bpf_map_lookup_elem(&ids, &key);
		if (!ports) {
			count(TIU_IN_UNKNOWN_ID);
			return TC_ACT_SHOT;
		}
		/* Read once, at the lookup (a recycled LRU element must not lend its ports later). */
		psport = ports->sport;
		pdport = ports->dport;
		if (!ports->seen) {
			/* The first TiU data segment of a connection: a server's handshake is
			 * confirmed (raw copies of the client's are ignored from now on). */
			struct tiu_conn_key ck = {};
			struct tiu_conn_val *c;

			ports->seen = 1;
			__builtin_memcpy(ck.saddr, w.daddr, 16);
			__builtin_memcpy(ck.daddr, w.saddr, 16);
			ck.sport = pdport;
			ck.dport = psport;
			ck.family = w.family;
			ck.netns = w.netns;
			c = bpf_map_lookup_elem(&tiu_conns, &ck);
			if (c)
				move(c, TIU_ST_LEARNED, TIU_ST_CONFIRMED);
		}
		t[0] = ((__u32)pdport << 16) | psport;
		t[3] = u[2];
		((__u8 *)t)[12] = doff << 4;
		((__u8 *)t)[13] = flags & ~TCP_URG;
	}
	t[1] = u[3];
	t[2] = u[4];
	t[4] = 0; /* checksum (below) and urgent pointer 0 */

	/* The TCP checksum from the UDP one: the egress sums run backwards. */
	if (syn) {
		from[0] = u[0];
		from[1] = u[2];
		((__u16 *)from)[4] = bpf_htons(ulen);
		((__u16 *)from)[5] = bpf_htons(IPPROTO_UDP);
		((__u16 *)from)[6] = bpf_htons(ulen);
		((__u16 *)from)[7] = 0;
		to[0] = t[3];
		((__u16 *)to)[2] = 0;
		((__u16 *)to)[3] = bpf_htons(IPPROTO_TCP);
		((__u16 *)to)[4] = bpf_htons(ulen - 4);
		((__u16 *)to)[5] = 0;
		sum = bpf_csum_diff(from, 16, to, 12, (__u16)~(u[1] >> 16));
	} else {
		from[0] = u[0];
		from[1] = u[2];
		((__u16 *)from)[4] = bpf_htons(ulen);
		((__u16 *)from)[5] = bpf_htons(IPPROTO_UDP);
		to[0] = t[0];
		to[1] = t[3];
		((__u16 *)to)[4] = 0;
		((__u16 *)to)[5] = bpf_htons(IPPROTO_TCP);
		sum = bpf_csum_diff(from, 12, to, 12, (__u16)~(u[1] >> 16));
	}
	((__u16 *)t)[8] = (__u16)~fold(sum);

	/* A SYN: the TCP header goes 4 bytes in, then the 4 bytes in front of it go. */
	/* BPF_F_RECOMPUTE_CSUM: a receive checksum over the whole packet (CHECKSUM_COMPLETE, real
	 * NICs) must describe the new bytes, or TCP finds it wrong, checks in software and reports a
	 * hardware checksum failure for every segment. */
	if (bpf_skb_store_bytes(skb, w.l4 + (syn ? 4 : 0), t, 20, BPF_F_RECOMPUTE_CSUM) < 0) {
		count(TIU_IN_ERROR);
		return TC_ACT_SHOT;
	}
	if (syn && bpf_skb_adjust_room(skb, -4, BPF_ADJ_ROOM_NET, 0) < 0) {
		count(TIU_IN_ERROR);
		return TC_ACT_SHOT;
	}
	if (set_ip(skb, &w, IPPROTO_TCP, syn ? -4 : 0) < 0) {
		count(TIU_IN_ERROR);
		return TC_ACT_SHOT;
	}
	bpf_set_hash_invalid(skb); /* it hashed the UDP datagram (RPS, the device) */
	{
		struct tiu_peer_key pk = {};
		__u64 now = bpf_ktime_get_ns(), *last;

		__builtin_memcpy(pk.saddr, w.saddr, 16);
		__builtin_memcpy(pk.daddr, w.daddr, 16);
		pk.family = w.family;
		pk.netns = w.netns;
		last = bpf_map_lookup_elem(&peers, &pk);
		if (!last || now - *last > PEER_REFRESH_NS)
			bpf_map_update_elem(&peers, &pk, &now, BPF_ANY);
	}
	count(syn ? TIU_IN_SYN : TIU_IN_DATA);
	return TC_ACT_OK;
}

/*
 * tiu_sockops (a cgroup sock_ops program): writes the TiU-Setup option (draft Fig. 3) into the
 * SYN of a connection listed in `conns`, and into the SYN-ACK a listener answers it with, through
 * the kernel's header-option callbacks, so the stack accounts for its bytes; tiu_egress then
 * carries the SYN in the SYN header (Fig. 2). The option's value is the connection's ID in
 * `conns` (as this host sends). Sockets of the cgroup that are not listed get no option.
 */
#define AF_INET 2
#define AF_INET6 10
#define TCPHDR_SYN 0x02

struct setup_opt {
	__u8 kind;
	__u8 len;
	__u16 exid;
	__u8 id;
} __attribute__((packed));

/* The connection as this host sends it, from a sock_ops context. */
static __always_inline struct tiu_conn_val *sockops_conn(struct bpf_sock_ops *skops,
							struct tiu_conn_key *out)
{
	struct tiu_conn_key key = {};

	if (skops->family == AF_INET ||
	    /* IPv4 through an IPv6 socket: v4-mapped addresses, the IPv4 connection's key. */
	    (skops->family == AF_INET6 && skops->local_ip6[0] == 0 && skops->local_ip6[1] == 0 &&
	     skops->local_ip6[2] == bpf_htonl(0xffff))) {
		key.family = TIU_AF_INET;
		/* Each context field read on its own path: the verifier refuses a computed offset. */
		if (skops->family == AF_INET) {
			key.saddr[0] = skops->local_ip4;
			key.daddr[0] = skops->remote_ip4;
		} else {
			key.saddr[0] = skops->local_ip6[3];
			key.daddr[0] = skops->remote_ip6[3];
		}
	} else if (skops->family == AF_INET6) {
		key.family = TIU_AF_INET6;
		key.saddr[0] = skops->local_ip6[0];
		key.saddr[1] = skops->local_ip6[1];
		key.saddr[2] = skops->local_ip6[2];
		key.saddr[3] = skops->local_ip6[3];
		key.daddr[0] = skops->remote_ip6[0];
		key.daddr[1] = skops->remote_ip6[1];
		key.daddr[2] = skops->remote_ip6[2];
		key.daddr[3] = skops->remote_ip6[3];
	} else {
		return 0;
	}
	/* local_port is in host order; remote_port holds the network-order port in its top half. */
	key.sport = bpf_htons((__u16)skops->local_port);
	key.dport = (__u16)(skops->remote_port >> 16);
	key.netns = bpf_get_netns_cookie(skops);
	if (out)
		*out = key;
	return bpf_map_lookup_elem(&tiu_conns, &key);
}

/* A TiU connection closed: its `conns` entry goes, its ID entry is marked closed (free again
 * for this host after TIU_LINGER_S, for the peer's SYNs at once; maps do not fill). The ID entry
 * is the peer's segments' (peer, this host, the port pair swapped, the ID). */
static __always_inline void forget(struct bpf_sock_ops *skops)
{
	struct tiu_conn_key ck;
	struct tiu_conn_val *cv = sockops_conn(skops, &ck);
	struct tiu_id_key ik = {};
	struct tiu_id_val *iv;

	if (!cv)
		return;
	__builtin_memcpy(ik.saddr, ck.daddr, 16);
	__builtin_memcpy(ik.daddr, ck.saddr, 16);
	ik.udp_sport = cv->udp_dport;
	ik.udp_dport = cv->udp_sport;
	ik.family = ck.family;
	ik.netns = ck.netns;
	ik.conn_id = cv->conn_id;
	/* The ID entry lingers (closed): the peer's last segments (a FIN retransmitted because
	 * this end's final ACK was lost) still reach the TIME_WAIT socket, whose answers go raw. */
	iv = bpf_map_lookup_elem(&ids, &ik);
	if (iv && iv->sport == (ck.dport) && iv->dport == (ck.sport))
		WRITE_ONCE(iv->closed_s, now_s() + 1);
	bpf_map_delete_elem(&tiu_conns, &ck);
}

/*
 * A connect() a rule asks TiU for gets a Connection ID for its host pair (one port pair per host
 * pair: the TiU port at both ends): the next ID free on that port pair (round from the last one
 * given, see next_id), taken in `ids` with
 * BPF_NOEXIST, where the peer's IDs learned from its SYNs live too (one ID space per host pair
 * and port pair, both directions; a SYN of the peer's asking for an ID taken here is refused).
 * With all 32 taken the connection stays plain TCP (counted). 1: the connection rides TiU.
 */
static __always_inline int allocate(struct bpf_sock_ops *skops)
{
	struct tiu_conn_key ck = {};
	struct tiu_conn_val cv = {};
	struct tiu_rule_key rk = {};
	struct tiu_rule_val *r;
	struct tiu_id_key ik = {};
	struct tiu_id_val iv = {}, *e;
	struct tiu_peer_key pk = {};
	__u32 *hint, start = 0, id = 0, i, spare = MAX_CONN_ID + 1;
	__u16 port;

	if (sockops_conn(skops, &ck))
		return 1; /* listed by user space */
	if (!ck.family || cfg_tiu_port == 0)
		return 0;
	rk.data[0] = ck.family;
	if (ck.family == TIU_AF_INET) {
		rk.prefixlen = 8 + 32;
		__builtin_memcpy(&rk.data[1], ck.daddr, 4);
	} else {
		rk.prefixlen = 8 + 128;
		__builtin_memcpy(&rk.data[1], ck.daddr, 16);
	}
	/* The longest matching prefix decides: its ports and mark narrow it (a connection they do
	 * not match runs plain; shorter prefixes are not tried), then TiU or never. */
	r = bpf_map_lookup_elem(&rules, &rk);
	if (!r)
		return 0;
	port = bpf_ntohs(ck.dport);
	if ((r->port_lo || r->port_hi) && (port < r->port_lo || port > r->port_hi))
		return 0;
	if (r->mark) {
		struct bpf_sock *sk = skops->sk;

		if (!sk || sk->mark != r->mark)
			return 0;
	}
	if (!r->tiu)
		return 0;
	/* The peer's segments' key: from the peer, to this host, the port pair as the peer sends. */
	__builtin_memcpy(ik.saddr, ck.daddr, 16);
	__builtin_memcpy(ik.daddr, ck.saddr, 16);
	ik.udp_sport = cfg_tiu_port;
	ik.udp_dport = cfg_tiu_port;
	ik.family = ck.family;
	ik.netns = ck.netns;
	iv.sport = ck.dport;
	iv.dport = ck.sport;
	__builtin_memcpy(pk.saddr, ck.daddr, 16);
	__builtin_memcpy(pk.daddr, ck.saddr, 16);
	pk.family = ck.family;
	pk.netns = ck.netns;
	hint = bpf_map_lookup_elem(&next_id, &pk);
	if (hint)
		start = *hint;
	for (i = 0; i <= MAX_CONN_ID; i++) {
		id = (start + i) & MAX_CONN_ID;
		ik.conn_id = id;
		/* Looked up first: a failing BPF_NOEXIST update of an LRU map still takes a free
		 * node, evicting some live entry when none is left. An ID whose connection closed
		 * TIU_LINGER_S ago or more is free again; one closed more lately is the spare. */
		e = bpf_map_lookup_elem(&ids, &ik);
		if (e) {
			__u32 closed = READ_ONCE(e->closed_s);

			if (closed && now_s() + 1 - closed >= TIU_LINGER_S && reuse(e, &iv))
				break;
			if (closed && spare > MAX_CONN_ID)
				spare = id;
			continue;
		}
		if (bpf_map_update_elem(&ids, &ik, &iv, BPF_NOEXIST) == 0)
			break;
	}
	if (i > MAX_CONN_ID) {
		/* No ID free for long: one that closed lately, rather than plain TCP (lingering is
		 * for late segments, and must not cap new connections at 32 per TIU_LINGER_S). */
		e = 0;
		if (spare <= MAX_CONN_ID) {
			ik.conn_id = spare;
			e = bpf_map_lookup_elem(&ids, &ik);
		}
		if (!e || !reuse(e, &iv)) {
			count(TIU_ALLOC_FULL);
			return 0;
		}
		id = spare;
	}
	start = (id + 1) & MAX_CONN_ID;
	bpf_map_update_elem(&next_id, &pk, &start, BPF_ANY);
	cv.udp_sport = cfg_tiu_port;
	cv.udp_dport = cfg_tiu_port;
	cv.conn_id = id;
	cv.state = TIU_ST_SYN_SENT;
	if (bpf_map_update_elem(&tiu_conns, &ck, &cv, BPF_NOEXIST) < 0) {
		bpf_map_delete_elem(&ids, &ik);
		count(TIU_EG_ERROR);
		return 0;
	}
	count(TIU_ALLOC);
	return 1;
}

SEC("sockops")
int tiu_sockops(struct bpf_sock_ops *skops)
{
	struct tiu_conn_val *conn;
	struct setup_opt opt;

	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		/* An active open: listed by user space, or given an ID by rule; then it asks for the
		 * header-option callbacks. */
		if (allocate(skops))
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
						  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG |
						  BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		/* A listener: its SYN-ACKs come through the callbacks (each looked up). */
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
					  BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		if (!(skops->skb_tcp_flags & TCPHDR_SYN))
			break;
		/* Not for a connection that fell back: its SYN-ACK retransmission goes raw, and an
		 * option in it would tell the client TiU is on. */
		conn = sockops_conn(skops, 0);
		if (conn && READ_ONCE(conn->state) != TIU_ST_PLAIN)
			bpf_reserve_hdr_opt(skops, sizeof(opt), 0);
		break;
	case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
		if (!(skops->skb_tcp_flags & TCPHDR_SYN))
			break;
		conn = sockops_conn(skops, 0);
		if (!conn || READ_ONCE(conn->state) == TIU_ST_PLAIN)
			break;
		opt.kind = SETUP_KIND;
		opt.len = SETUP_LEN;
		opt.exid = bpf_htons(SETUP_EXID);
		opt.id = conn->conn_id;
		bpf_store_hdr_opt(skops, &opt, sizeof(opt), 0);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		/* Only SYNs carry the option: no more header callbacks. Every connection's end is
		 * watched, not only those in `conns` now (cheap: a lookup at each state change). */
		bpf_sock_ops_cb_flags_set(skops, (skops->bpf_sock_ops_cb_flags &
						  ~BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG) |
					  BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		/* args[1] is the new state; TCP_CLOSE also when the socket hands over to TIME_WAIT
		 * (whose late segments the lingering ID entry still lets in). */
		if (skops->args[1] == BPF_TCP_CLOSE)
			forget(skops);
		break;
	}
	return 1;
}

/*
 * tiu_listeners (iter/tcp): a listener opened before tiu_sockops was attached never had
 * BPF_SOCK_OPS_TCP_LISTEN_CB, so its SYN-ACKs get no header-option callbacks and go without the
 * Setup option (every TiU connection to it falls back, counted as eg_no_setup). Run once in each
 * network namespace when TiU is enabled (iterators walk the reader's namespace): every listener
 * gets the flag, and one line per listener is printed.
 */
#define SOL_TCP 6
#define TCP_LISTEN 10

SEC("iter/tcp")
int tiu_listeners(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	int flags;

	if (!skc || skc->skc_state != TCP_LISTEN)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	flags = tp->bpf_sock_ops_cb_flags;
	if (flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG)
		return 0;
	flags |= BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG;
	if (bpf_setsockopt(tp, SOL_TCP, TCP_BPF_SOCK_OPS_CB_FLAGS, &flags, sizeof(flags)) == 0)
		BPF_SEQ_PRINTF(ctx->meta->seq, "%u\n", (__u32)skc->skc_num);
	return 0;
}
