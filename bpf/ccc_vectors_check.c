/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * ccc_vectors_check: runs test vectors cut from the Rust `TcpCccInt` on the C core (ccc_core.h).
 *
 *   cc -O2 -Wall -Wextra -Werror -std=c11 -I bpf bpf/ccc_vectors_check.c -o /tmp/ccc_check
 *   /tmp/ccc_check < vectors.txt > out.txt && diff vectors.txt out.txt
 *
 * Reads the vector file on stdin and prints it back with every op line's result and snapshot
 * computed by the C core, so the output is identical to the input when the core agrees. Stops
 * with exit status 1 at the first op line that differs (with -k: reports every difference and
 * goes on), printing the vector id, the line number, the expected line and its own to stderr.
 * An op line without " = " (no expectation) is only computed and printed. Malformed input: exit
 * status 2.
 *
 * Format (one record per line, single spaces):
 *   # comment
 *   vector <id> handover <0|1>
 *   R <conn> <prio_units> <cwnd> <ssthresh> = <cwnd> <ssthresh> | <snapshot>      (or = ERR | ...)
 *   U <conn> <cwnd> <ssthresh> <SS|CA|FR> <timeout 0|1> <in_flight> = <cwnd> <ssthresh> | ...
 *                                                                    (or none, or ERR)
 *   L <conn> = ok | ...          P <conn> <prio_units> = ok | ...          B <pkts> = ok | ...
 *   A <conn> = <k> [<conn> <cwnd> <done>]*k | ...
 *   end
 * snapshot: <sum_cwnd> <sum_ssthresh> <coco|-> <event|-> <reductions> <n>
 *           then n times: <conn> <prio_units> <cwnd> <ssthresh> <SS|CA|FR> <released|-> <target|-> <ssbit>
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccc_core.h"

#define LINE_MAX_BYTES (16 * 1024)
#define OUT_MAX_BYTES (64 * 1024)
#define MAX_TOKENS 16

static struct ccc_group group;
static char line[LINE_MAX_BYTES + 2];
static char opbuf[LINE_MAX_BYTES + 2];
static char out[OUT_MAX_BYTES];
static size_t out_len;
static unsigned long line_no;
static char vector_id[256] = "-";

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ccc_check: line %lu (vector %s): ", line_no, vector_id);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void emit(const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(out + out_len, sizeof(out) - out_len, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof(out) - out_len)
		die("output line too long");
	out_len += (size_t)w;
}

static unsigned long long parse_u64(const char *tok)
{
	unsigned long long v;
	char *end;
	const char *s;

	if (tok == NULL || *tok == '\0')
		die("missing number");
	for (s = tok; *s; s++)
		if (*s < '0' || *s > '9')
			die("not a non-negative integer: '%s'", tok);
	errno = 0;
	v = strtoull(tok, &end, 10);
	if (errno != 0 || *end != '\0')
		die("number out of range: '%s'", tok);
	return v;
}

static int parse_state(const char *tok)
{
	if (tok == NULL)
		die("missing state");
	if (strcmp(tok, "SS") == 0)
		return CCC_SS;
	if (strcmp(tok, "CA") == 0)
		return CCC_CA;
	if (strcmp(tok, "FR") == 0)
		return CCC_FR;
	die("bad state '%s'", tok);
	return -1;
}

static const char *state_name(int s)
{
	switch (s) {
	case CCC_SS:
		return "SS";
	case CCC_CA:
		return "CA";
	case CCC_FR:
		return "FR";
	}
	return "?";
}

static void emit_snapshot(const struct ccc_group *g)
{
	struct ccc_view v;
	__u64 conn;
	__u32 i, n = ccc_len(g);

	emit("%llu %llu", (unsigned long long)ccc_sum_cwnd(g),
	     (unsigned long long)ccc_sum_ssthresh(g));
	if (ccc_coco(g, &conn))
		emit(" %llu", (unsigned long long)conn);
	else
		emit(" -");
	if (ccc_loss_event(g, &conn))
		emit(" %llu", (unsigned long long)conn);
	else
		emit(" -");
	emit(" %llu %u", (unsigned long long)ccc_reductions(g), n);
	for (i = 0; i < n; i++) {
		if (ccc_view(g, i, &v) != 0)
			die("internal: view %u of %u failed", i, n);
		emit(" %llu %llu %llu %llu %s", (unsigned long long)v.conn,
		     (unsigned long long)v.prio_units, (unsigned long long)v.cwnd,
		     (unsigned long long)v.ssthresh, state_name(v.state));
		if (v.in_handover)
			emit(" %llu %llu", (unsigned long long)v.released,
			     (unsigned long long)v.target);
		else
			emit(" - -");
		emit(" %u", v.ssbit ? 1U : 0U);
	}
}

/* The index hint passed with each op (the BPF program passes the index it saw last): in turn the
 * right index, no hint, and a pseudo-random one that is usually wrong, so the vectors check the
 * hint's fast path and its fallback give the same answers. */
static __u64 hint_state = 0x9e3779b97f4a7c15ULL;

static __u32 next_hint(__u64 conn)
{
	int idx;

	hint_state = hint_state * 6364136223846793005ULL + 1442695040888963407ULL;
	switch ((hint_state >> 33) % 3) {
	case 0:
		idx = ccc_index(&group, conn, CCC_NONE);
		return idx < 0 ? CCC_NONE : (__u32)idx;
	case 1:
		return CCC_NONE;
	default:
		return (__u32)((hint_state >> 40) % (CCC_MAX_CONNS + 8));
	}
}

/* Runs one op (tokens tok[0 .. ntok)) and appends its result to out. */
static void run_op(char **tok, int ntok)
{
	const char *op = tok[0];
	__u64 cw = 0, ss = 0;
	int rc;

	if (strcmp(op, "R") == 0) {
		if (ntok != 5)
			die("R takes 4 arguments");
		rc = ccc_register(&group, parse_u64(tok[1]), parse_u64(tok[2]), parse_u64(tok[3]),
				  parse_u64(tok[4]), &cw, &ss);
		if (rc == 0)
			emit("%llu %llu", (unsigned long long)cw, (unsigned long long)ss);
		else if (rc < 0)
			emit("ERR");
		else
			die("internal: register returned %d", rc);
	} else if (strcmp(op, "U") == 0) {
		__u64 conn, cwnd, ssthresh, in_flight, timeout;
		int state;

		if (ntok != 7)
			die("U takes 6 arguments");
		conn = parse_u64(tok[1]);
		cwnd = parse_u64(tok[2]);
		ssthresh = parse_u64(tok[3]);
		state = parse_state(tok[4]);
		timeout = parse_u64(tok[5]);
		if (timeout > 1)
			die("timeout must be 0 or 1");
		in_flight = parse_u64(tok[6]);
		rc = ccc_update_at(&group, conn, next_hint(conn), cwnd, ssthresh, state,
				   (int)timeout, in_flight, &cw, &ss);
		if (rc == 0)
			emit("%llu %llu", (unsigned long long)cw, (unsigned long long)ss);
		else if (rc == 1)
			emit("none");
		else
			emit("ERR");
	} else if (strcmp(op, "L") == 0) {
		if (ntok != 2)
			die("L takes 1 argument");
		rc = ccc_leave_at(&group, parse_u64(tok[1]), next_hint(parse_u64(tok[1])));
		emit(rc == 0 ? "ok" : "ERR");
	} else if (strcmp(op, "P") == 0) {
		if (ntok != 3)
			die("P takes 2 arguments");
		rc = ccc_set_priority_at(&group, parse_u64(tok[1]), next_hint(parse_u64(tok[1])),
					 parse_u64(tok[2]));
		emit(rc == 0 ? "ok" : "ERR");
	} else if (strcmp(op, "B") == 0) {
		if (ntok != 2)
			die("B takes 1 argument");
		rc = ccc_set_max_burst(&group, parse_u64(tok[1]));
		emit(rc == 0 ? "ok" : "ERR");
	} else if (strcmp(op, "A") == 0) {
		struct ccc_release rel[CCC_MAX_CONNS];
		int k;

		if (ntok != 2)
			die("A takes 1 argument");
		k = ccc_on_ack_at(&group, parse_u64(tok[1]), next_hint(parse_u64(tok[1])), rel,
				  CCC_MAX_CONNS);
		if (k < 0) {
			emit("ERR");
		} else {
			emit("%d", k);
			for (rc = 0; rc < k; rc++)
				emit(" %llu %llu %u", (unsigned long long)rel[rc].conn,
				     (unsigned long long)rel[rc].cwnd, rel[rc].done ? 1U : 0U);
		}
	} else {
		die("unknown op '%s'", op);
	}
}

/* `-m N`: ccc_muldiv_small against 128-bit arithmetic on N random cases spread over its three
 * paths (both factors below 2^32, or the 128-bit product divided by Knuth's algorithm D), divisors of
 * every width. Exit 1 on a mismatch. */
static int check_muldiv(unsigned long n)
{
	__u64 x = 0x2545f4914f6cdd1dULL;
	unsigned long i, bad = 0;

	for (i = 0; i < n; i++) {
		__u64 a, b, d, got, want;
		int bits_d;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		bits_d = 1 + (int)(x % 64); /* divisor width 1..64 bits */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		d = bits_d == 64 ? x : (x & ((1ULL << bits_d) - 1));
		if (d < 2)
			d = 2 + (x & 1);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		a = x % d;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b = x >> (x % 64 > 40 ? 0 : (x % 64));
		got = ccc_muldiv_small(a, b, d);
		want = (__u64)((unsigned __int128)a * b / d);
		if (got != want) {
			if (bad++ < 5)
				fprintf(stderr, "muldiv(%llu, %llu, %llu) = %llu, want %llu\n",
					(unsigned long long)a, (unsigned long long)b,
					(unsigned long long)d, (unsigned long long)got,
					(unsigned long long)want);
		}
	}
	/* Edges: every pair of these as (a mod d, b, d). */
	{
		static const __u64 e[] = {1, 2, 3, 0xffffffffULL, 0x100000000ULL, 0x100000001ULL,
					  (1ULL << 47) - 1, 1ULL << 47, (1ULL << 63) - 1, 1ULL << 63,
					  (1ULL << 63) + 1, 0xfffffffffffffffeULL,
					  0xffffffffffffffffULL};
		unsigned long ia, ib, id;
		const unsigned long ne = sizeof(e) / sizeof(e[0]);

		for (id = 0; id < ne; id++)
			for (ia = 0; ia < ne; ia++)
				for (ib = 0; ib < ne; ib++) {
					__u64 d = e[id] < 2 ? 2 : e[id], a = e[ia] >= d ? d - 1 : e[ia];
					__u64 b = e[ib], got = ccc_muldiv_small(a, b, d);
					__u64 want = (__u64)((unsigned __int128)a * b / d);

					n++;
					if (got != want && bad++ < 5)
						fprintf(stderr, "muldiv(%llu, %llu, %llu) = %llu, want %llu\n",
							(unsigned long long)a, (unsigned long long)b,
							(unsigned long long)d, (unsigned long long)got,
							(unsigned long long)want);
				}
	}
	fprintf(stderr, "ccc_check: muldiv %lu cases, %lu differ\n", n, bad);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned long vectors = 0, ops = 0, agree = 0, differ = 0, unchecked = 0;
	int keep_going = 0, in_vector = 0;

	if (argc == 3 && strcmp(argv[1], "-m") == 0)
		return check_muldiv(strtoul(argv[2], NULL, 10));
	if (argc == 2 && strcmp(argv[1], "-k") == 0) {
		keep_going = 1;
	} else if (argc != 1) {
		fprintf(stderr, "usage: %s [-k] < vectors.txt | %s -m N\n", argv[0], argv[0]);
		return 2;
	}

	while (fgets(line, sizeof(line), stdin) != NULL) {
		size_t len = strlen(line);
		char *tok[MAX_TOKENS], *save = NULL, *t, *eq;
		const char *expected;
		int ntok = 0;

		line_no++;
		if (len > 0 && line[len - 1] == '\n') {
			line[--len] = '\0';
		} else if (!feof(stdin)) {
			die("line longer than %d bytes", LINE_MAX_BYTES);
		}
		if (len > LINE_MAX_BYTES)
			die("line longer than %d bytes", LINE_MAX_BYTES);

		if (len == 0 || line[0] == '#') {
			puts(line);
			continue;
		}
		if (strncmp(line, "vector ", 7) == 0) {
			char id[sizeof(vector_id)];
			unsigned ho;
			char extra;

			if (sscanf(line, "vector %255s handover %u %c", id, &ho, &extra) != 2 ||
			    ho > 1)
				die("bad vector header '%s'", line);
			if (in_vector)
				die("vector %s starts before the previous one ends", id);
			memcpy(vector_id, id, sizeof(vector_id));
			ccc_init(&group, (int)ho);
			in_vector = 1;
			vectors++;
			puts(line);
			continue;
		}
		if (strcmp(line, "end") == 0) {
			if (!in_vector)
				die("'end' outside a vector");
			in_vector = 0;
			puts(line);
			continue;
		}
		if (!in_vector)
			die("op outside a vector");

		/* The op is what comes before " = ". */
		eq = strstr(line, " = ");
		if (eq != NULL) {
			memcpy(opbuf, line, (size_t)(eq - line));
			opbuf[eq - line] = '\0';
			expected = line;
		} else {
			memcpy(opbuf, line, len + 1);
			expected = NULL;
		}
		out_len = 0;
		emit("%s = ", opbuf);
		for (t = strtok_r(opbuf, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save)) {
			if (ntok == MAX_TOKENS)
				die("too many fields");
			tok[ntok++] = t;
		}
		if (ntok == 0)
			die("empty op");
		run_op(tok, ntok);
		emit(" | ");
		emit_snapshot(&group);
		puts(out);
		ops++;
		if (expected == NULL) {
			unchecked++;
		} else if (strcmp(expected, out) == 0) {
			agree++;
		} else {
			differ++;
			fflush(stdout);
			fprintf(stderr,
				"ccc_check: vector %s, line %lu differs\n  expected: %s\n  C core:   %s\n",
				vector_id, line_no, expected, out);
			if (!keep_going)
				return 1;
		}
	}
	if (ferror(stdin))
		die("read error");
	if (in_vector)
		die("vector %s has no 'end'", vector_id);
	fprintf(stderr, "ccc_check: %lu vectors, %lu ops: %lu agree, %lu differ, %lu unchecked\n",
		vectors, ops, agree, differ, unchecked);
	return differ ? 1 : 0;
}
