/*
 * The C client against a live macroflowd (run by tests/c_client.rs with the socket path as the
 * only argument). The scenarios of crates/fsed/tests/server.rs:
 *
 *   - RFC 8699 App. C's steps (crates/coupling/tests/appendix_c.rs) through the library, every
 *     table printed with %.17g for the Rust side to compare with an in-process FseGroup, bit
 *     for bit;
 *   - bad requests refused by the daemon with the right field, changing nothing;
 *   - NULL pointers, bad enum values and bad labels refused with MF_FSE_ERR_BAD_ARGUMENT;
 *   - a push for a subscribed flow of an active group.
 *
 * Output: one record a line, space-separated (parsed by tests/c_client.rs):
 *   layout <sizeof and offsetof values>
 *   register <flow> <priority> <initial_rate> <rate>
 *   update <flow> <cc_rate> <desired_rate or -1> <rate>
 *   leave <flow>
 *   table <step> <coupler> <S_CR> <TLO> <flows>      followed by <flows> lines:
 *   row <flow> <P> <FSE_R> <DR>
 *   refused <field>
 *   bad_argument <field>
 *   push <flow> <rate>
 *   done
 * A failed check prints "FAIL ..." on stderr and exits 1.
 */
#include "macroflow_fse.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 1e6

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* A call that must succeed (status >= 0); prints the library's error otherwise. */
#define OK(c, call)                                                                          \
    do {                                                                                     \
        int st_ = (call);                                                                    \
        if (st_ < 0) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s = %d (%s): %s: %s\n", __FILE__, __LINE__, #call, \
                    st_, mf_fse_strerror(st_), mf_fse_error_field(c),                        \
                    mf_fse_error_message(c));                                                \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static double fse_r(mf_fse_client *c, uint64_t flow) {
    mf_fse_flow_info f;
    OK(c, mf_fse_query_flow(c, flow, &f));
    CHECK(f.flow == flow);
    return f.rate_or_cwnd;
}

/* Prints the group's table. */
static void table(mf_fse_client *c, uint64_t group, const char *step) {
    mf_fse_group_info info;
    mf_fse_flow_info flows[8];
    int n = mf_fse_query_group(c, group, &info, flows, 8);
    OK(c, n);
    CHECK(n <= 8);
    CHECK(info.group == group);
    CHECK(info.flow_count == (uint32_t)n);
    printf("table %s %s %.17g %.17g %d\n", step, info.coupler, info.sum_calculated,
           info.leftover, n);
    for (int i = 0; i < n; i++) {
        CHECK(flows[i].group == group);
        printf("row %llu %.17g %.17g %.17g\n", (unsigned long long)flows[i].flow,
               flows[i].priority, flows[i].rate_or_cwnd, flows[i].desired_rate_bps);
    }
}

static mf_fse_registered reg(mf_fse_client *c, const char *label, double p, double initial,
                             int algorithm) {
    mf_fse_group g = mf_fse_group_label(label);
    mf_fse_registered r;
    OK(c, mf_fse_register_rate(c, &g, p, initial, algorithm, -1, &r));
    printf("register %llu %.17g %.17g %.17g\n", (unsigned long long)r.flow, p, initial,
           r.rate_bps);
    return r;
}

static double update(mf_fse_client *c, uint64_t flow, double cc, double dr) {
    double rate = -1;
    OK(c, mf_fse_update_rate(c, flow, cc, dr, -1, &rate));
    printf("update %llu %.17g %.17g %.17g\n", (unsigned long long)flow, cc, dr < 0 ? -1.0 : dr,
           rate);
    return rate;
}

/* RFC 8699 App. C.1, "Example operation (passive)". */
static void appendix_c(mf_fse_client *c) {
    mf_fse_registered r1 = reg(c, "app-c", 1.0, 1 * M, MF_FSE_PASSIVE);
    uint64_t f1 = r1.flow, g = r1.group;
    table(c, g, "flow-1-registers");
    for (int cc = 2; cc <= 10; cc++) {
        double rate = update(c, f1, cc * M, -1);
        CHECK(rate == cc * M); /* alone, flow 1 gets what its controller asks for */
        char step[32];
        snprintf(step, sizeof step, "flow-1-at-%d", cc);
        table(c, g, step);
    }
    mf_fse_registered r2 = reg(c, "app-c", 0.5, 1 * M, -1);
    uint64_t f2 = r2.flow;
    CHECK(r2.group == g);
    table(c, g, "flow-2-joins");
    double r = update(c, f1, 8 * M, -1);
    CHECK(fabs(r / M - 6.0) < 1e-9);
    table(c, g, "flow-1-to-8");
    update(c, f2, 2 * M, -1);
    table(c, g, "flow-2-to-2");
    /* Flow 1 increases by 1 but its application wants 2: the leftover TLO. */
    update(c, f1, fse_r(c, f1) + M, 2 * M);
    table(c, g, "flow-1-application-limited");
    update(c, f2, fse_r(c, f2) + M, -1);
    table(c, g, "flow-2-takes-the-leftover");
    OK(c, mf_fse_leave(c, f1));
    printf("leave %llu\n", (unsigned long long)f1);
    update(c, f2, fse_r(c, f2) - 2 * M, -1);
    table(c, g, "flow-1-left");
    /* The draft's last table: flow 2 alone at 9.33 with priority 0.5. */
    CHECK(fabs(fse_r(c, f2) / M - 9.33) < 0.006);
}

/* Compares what a group holds, value for value. */
static int same_group(mf_fse_client *c, uint64_t group, const mf_fse_group_info *info,
                      const mf_fse_flow_info *flows, int n) {
    mf_fse_group_info now;
    mf_fse_flow_info now_flows[8];
    int m = mf_fse_query_group(c, group, &now, now_flows, 8);
    OK(c, m);
    /* Field by field (memcmp would compare the structs' padding too). */
    if (m != n || now.group != info->group || now.flow_count != info->flow_count ||
        memcmp(&now.sum_calculated, &info->sum_calculated, sizeof(double)) != 0 ||
        memcmp(&now.leftover, &info->leftover, sizeof(double)) != 0 ||
        strcmp(now.coupler, info->coupler) != 0)
        return 0;
    for (int i = 0; i < n; i++) {
        const mf_fse_flow_info *a = &now_flows[i], *b = &flows[i];
        /* Doubles bit for bit: mf_fse_flow_info has no padding. */
        if (memcmp(a, b, sizeof *a) != 0)
            return 0;
    }
    return 1;
}

/* The call just made was refused by the daemon, naming `field`. */
static void refused(mf_fse_client *c, int status, const char *field) {
    CHECK(status == MF_FSE_ERR_DAEMON);
    CHECK(mf_fse_last_error(c) == MF_FSE_ERR_DAEMON);
    if (strcmp(mf_fse_error_field(c), field) != 0) {
        fprintf(stderr, "FAIL refused: field %s (%s), expected %s\n", mf_fse_error_field(c),
                mf_fse_error_message(c), field);
        exit(1);
    }
    CHECK(strlen(mf_fse_error_message(c)) > 0);
    printf("refused %s\n", mf_fse_error_field(c));
}

/* Bad requests: refused with the right field, nothing changed, the session goes on. */
static void bad_requests(mf_fse_client *c) {
    mf_fse_registered r = reg(c, "bad", 1.0, M, MF_FSE_PASSIVE);
    double rate;
    OK(c, mf_fse_update_rate(c, r.flow, 3 * M, -1, -1, &rate));
    mf_fse_group_info before;
    mf_fse_flow_info flows[8];
    int n = mf_fse_query_group(c, r.group, &before, flows, 8);
    OK(c, n);
    CHECK(n == 1);

    mf_fse_group g = mf_fse_group_label("bad");
    mf_fse_registered out;
    memset(&out, 0xab, sizeof out);
    refused(c, mf_fse_register_rate(c, &g, 0.0, M, -1, -1, &out), "register_rate.priority");
    CHECK(out.flow == 0xababababababababULL); /* not written */
    CHECK(same_group(c, r.group, &before, flows, n));
    refused(c, mf_fse_register_rate(c, &g, -1.0, M, -1, -1, &out), "register_rate.priority");
    refused(c, mf_fse_register_rate(c, &g, 1.0, M, MF_FSE_ACTIVE, -1, &out),
            "register_rate.algorithm");
    refused(c, mf_fse_register_rate(c, &g, 1.0, M, -1, 0, &out), "register_rate.timeout_ms");
    mf_fse_group empty = mf_fse_group_label("");
    refused(c, mf_fse_register_rate(c, &empty, 1.0, M, -1, -1, &out), "register_rate.group");
    refused(c, mf_fse_register_rate_desired(c, &g, 1.0, M, NAN, -1, -1, &out),
            "register_rate.desired_rate_bps");
    CHECK(same_group(c, r.group, &before, flows, n));

    /* A desired rate given at registration holds for updates that name none (passive DR). */
    mf_fse_group dg = mf_fse_group_label("desired");
    mf_fse_registered d;
    OK(c, mf_fse_register_rate_desired(c, &dg, 1.0, M, 2 * M, MF_FSE_PASSIVE, -1, &d));
    double dr_rate;
    OK(c, mf_fse_update_rate(c, d.flow, 5 * M, -1, -1, &dr_rate));
    mf_fse_flow_info di;
    OK(c, mf_fse_query_flow(c, d.flow, &di));
    CHECK(di.desired_rate_bps == 2 * M);
    OK(c, mf_fse_leave(c, d.flow));

    rate = -7;
    refused(c, mf_fse_update_rate(c, 999, 2 * M, -1, -1, &rate), "update_rate.flow");
    CHECK(rate == -7);
    refused(c, mf_fse_set_priority(c, r.flow, 0.0), "set_priority.priority");
    refused(c, mf_fse_set_priority(c, 999, 1.0), "set_priority.flow");
    refused(c, mf_fse_refresh(c, 999), "refresh.flow");
    refused(c, mf_fse_leave(c, 999), "leave.flow");
    refused(c, mf_fse_subscribe(c, 999), "subscribe.flow");
    mf_fse_flow_info f;
    refused(c, mf_fse_query_flow(c, 999, &f), "query_flow.flow");
    mf_fse_group_info gi;
    refused(c, mf_fse_query_group(c, 999, &gi, NULL, 0), "query_group.group");
    CHECK(same_group(c, r.group, &before, flows, n));

    /* The session goes on, and a success clears the error. */
    OK(c, mf_fse_refresh(c, r.flow));
    CHECK(mf_fse_last_error(c) == MF_FSE_OK);
    CHECK(strcmp(mf_fse_error_field(c), "") == 0);
    CHECK(strcmp(mf_fse_error_message(c), "") == 0);
    /* Capacity smaller than the flows: the count, no more written. */
    mf_fse_registered r2 = reg(c, "bad", 1.0, M, -1);
    mf_fse_flow_info one[2];
    memset(one, 0, sizeof one);
    CHECK(mf_fse_query_group(c, r.group, &gi, one, 1) == 2);
    CHECK(one[0].flow == r.flow && one[1].flow == 0);
    CHECK(mf_fse_query_group(c, r.group, &gi, NULL, 0) == 2);
    CHECK(gi.flow_count == 2 && strcmp(gi.coupler, "passive") == 0);
    OK(c, mf_fse_leave(c, r2.flow));
    OK(c, mf_fse_leave(c, r.flow));
}

/* The call just made was refused here as a bad argument naming `field`. */
static void bad_argument(const mf_fse_client *c, int status, const char *field) {
    CHECK(status == MF_FSE_ERR_BAD_ARGUMENT);
    CHECK(mf_fse_last_error(c) == MF_FSE_ERR_BAD_ARGUMENT);
    if (strcmp(mf_fse_error_field(c), field) != 0) {
        fprintf(stderr, "FAIL bad_argument: field %s (%s), expected %s\n",
                mf_fse_error_field(c), mf_fse_error_message(c), field);
        exit(1);
    }
    printf("bad_argument %s\n", field);
}

/* NULL pointers, bad enum values and bad labels: MF_FSE_ERR_BAD_ARGUMENT, nothing sent. */
static void null_pointers(mf_fse_client *c, const char *path) {
    mf_fse_client *none = (mf_fse_client *)0x1;
    bad_argument(NULL, mf_fse_connect(NULL, &none), "path");
    CHECK(none == NULL);
    bad_argument(NULL, mf_fse_connect(path, NULL), "out");
    bad_argument(NULL, mf_fse_close(NULL), "client");

    mf_fse_group g = mf_fse_group_label("nulls");
    mf_fse_registered r;
    mf_fse_registered_window rw;
    mf_fse_window w;
    mf_fse_flow_info f;
    mf_fse_group_info gi;
    mf_fse_push p;
    double rate;
    uint32_t uid;
    int32_t pid;

    bad_argument(NULL, mf_fse_register_rate(NULL, &g, 1, M, -1, -1, &r), "client");
    bad_argument(c, mf_fse_register_rate(c, NULL, 1, M, -1, -1, &r), "group");
    bad_argument(c, mf_fse_register_rate(c, &g, 1, M, -1, -1, NULL), "out");
    bad_argument(c, mf_fse_register_rate(c, &g, 1, M, 4, -1, &r), "algorithm");
    bad_argument(c, mf_fse_register_rate(c, &g, 1, M, -2, -1, &r), "algorithm");
    bad_argument(c, mf_fse_register_rate(c, &g, 1, M, -1, -5, &r), "timeout_ms");
    mf_fse_group nolabel = mf_fse_group_label(NULL);
    bad_argument(c, mf_fse_register_rate(c, &nolabel, 1, M, -1, -1, &r), "group.label");
    mf_fse_group notutf8 = mf_fse_group_label("\xff\xfe bad");
    bad_argument(c, mf_fse_register_rate(c, &notutf8, 1, M, -1, -1, &r), "group.label");
    bad_argument(c, mf_fse_register_window(c, &notutf8, 1, 10, 20, -1, &rw), "group.label");
    static char long_label[MF_FSE_MAX_LABEL_BYTES + 2];
    memset(long_label, 'x', MF_FSE_MAX_LABEL_BYTES + 1);
    mf_fse_group toolong = mf_fse_group_label(long_label);
    bad_argument(c, mf_fse_register_rate(c, &toolong, 1, M, -1, -1, &r), "group.label");
    mf_fse_group badkind = mf_fse_group_fgi(1);
    badkind.kind = 9;
    bad_argument(c, mf_fse_register_rate(c, &badkind, 1, M, -1, -1, &r), "group.kind");

    bad_argument(NULL, mf_fse_register_window(NULL, &g, 1, 10, 20, -1, &rw), "client");
    bad_argument(c, mf_fse_register_window(c, NULL, 1, 10, 20, -1, &rw), "group");
    bad_argument(c, mf_fse_register_window(c, &g, 1, 10, 20, -1, NULL), "out");
    bad_argument(NULL, mf_fse_update_rate(NULL, 1, M, -1, -1, &rate), "client");
    bad_argument(c, mf_fse_update_rate(c, 1, M, -1, -1, NULL), "rate_out");
    bad_argument(NULL, mf_fse_update_window(NULL, 1, 10, 20, MF_FSE_SLOW_START, 0, 5, &w),
                 "client");
    bad_argument(c, mf_fse_update_window(c, 1, 10, 20, MF_FSE_SLOW_START, 0, 5, NULL), "out");
    bad_argument(c, mf_fse_update_window(c, 1, 10, 20, 3, 0, 5, &w), "state");
    bad_argument(NULL, mf_fse_set_priority(NULL, 1, 1.0), "client");
    bad_argument(NULL, mf_fse_refresh(NULL, 1), "client");
    bad_argument(NULL, mf_fse_leave(NULL, 1), "client");
    bad_argument(NULL, mf_fse_subscribe(NULL, 1), "client");
    bad_argument(NULL, mf_fse_query_flow(NULL, 1, &f), "client");
    bad_argument(c, mf_fse_query_flow(c, 1, NULL), "out");
    bad_argument(NULL, mf_fse_query_group(NULL, 1, &gi, &f, 1), "client");
    bad_argument(c, mf_fse_query_group(c, 1, NULL, &f, 1), "info");
    bad_argument(c, mf_fse_query_group(c, 1, &gi, NULL, 1), "flows");
    bad_argument(NULL, mf_fse_wait_push(NULL, 0, &p), "client");
    bad_argument(c, mf_fse_wait_push(c, 0, NULL), "out");
    bad_argument(NULL, mf_fse_peer(NULL, &uid, &pid), "client");
    /* The accessors take NULL too, and never return NULL. */
    CHECK(mf_fse_error_message(NULL) != NULL && strlen(mf_fse_error_message(NULL)) > 0);
    CHECK(mf_fse_strerror(-100) != NULL);

    /* Nothing was registered by any of these: the session goes on. */
    mf_fse_registered ok;
    OK(c, mf_fse_register_rate(c, &g, 1, M, -1, -1, &ok));
    CHECK(mf_fse_query_group(c, ok.group, &gi, NULL, 0) == 1);
    CHECK(gi.flow_count == 1);
    OK(c, mf_fse_leave(c, ok.flow));

    /* No daemon at a path: an I/O error, for the thread. */
    mf_fse_client *nowhere = (mf_fse_client *)0x1;
    CHECK(mf_fse_connect("/nonexistent/macroflowd.sock", &nowhere) == MF_FSE_ERR_IO);
    CHECK(nowhere == NULL && mf_fse_last_error(NULL) == MF_FSE_ERR_IO);
}

/* A subscribed flow of an active group gets a push when another flow updates. */
static void pushes(const char *path) {
    mf_fse_client *a, *b;
    OK(NULL, mf_fse_connect(path, &a));
    OK(NULL, mf_fse_connect(path, &b));
    mf_fse_group g = mf_fse_group_label("push");
    mf_fse_registered fa, fb;
    OK(a, mf_fse_register_rate(a, &g, 1.0, M, MF_FSE_ACTIVE, -1, &fa));
    OK(a, mf_fse_subscribe(a, fa.flow));
    OK(b, mf_fse_register_rate(b, &g, 1.0, 3 * M, -1, -1, &fb));
    CHECK(fb.group == fa.group);
    double rb;
    OK(b, mf_fse_update_rate(b, fb.flow, 6 * M, -1, -1, &rb));
    mf_fse_push p;
    int got = mf_fse_wait_push(a, 5000, &p);
    OK(a, got);
    CHECK(got == 1);
    CHECK(p.flow == fa.flow);
    /* The active FSE: S_CR = 1 + 3 + (6 - 3) = 7 split 1 : 1. */
    CHECK(p.rate_bps == rb);
    printf("push %llu %.17g\n", (unsigned long long)p.flow, p.rate_bps);
    CHECK(mf_fse_wait_push(a, 50, &p) == 0);
    CHECK(mf_fse_wait_push(a, 0, &p) == 0);
    /* Another connection's flow is unknown to this one. */
    double r;
    refused(a, mf_fse_update_rate(a, fb.flow, M, -1, -1, &r), "update_rate.flow");
    uint32_t uid;
    int32_t pid;
    OK(a, mf_fse_peer(a, &uid, &pid));
    CHECK(pid > 0);
    OK(NULL, mf_fse_close(b));
    OK(NULL, mf_fse_close(a));
}

/* Window flows: register, update, query. */
static void windows(mf_fse_client *c) {
    mf_fse_group g = mf_fse_group_fgi(77);
    mf_fse_registered_window r1, r2;
    OK(c, mf_fse_register_window(c, &g, 1.0, 10, 64, -1, &r1));
    OK(c, mf_fse_register_window(c, &g, 1.0, 10, 64, 60000, &r2));
    CHECK(r1.group == r2.group && r1.flow != r2.flow);
    mf_fse_window w;
    OK(c, mf_fse_update_window(c, r1.flow, 20, 64, MF_FSE_CONGESTION_AVOIDANCE, 0, 18, &w));
    CHECK(w.set == 0 || w.set == 1);
    mf_fse_flow_info f;
    OK(c, mf_fse_query_flow(c, r1.flow, &f));
    CHECK(f.group == r1.group && f.desired_rate_bps == 0);
    double rate;
    refused(c, mf_fse_update_rate(c, r1.flow, M, -1, -1, &rate), "update_rate.flow");
    mf_fse_group_info gi;
    CHECK(mf_fse_query_group(c, r1.group, &gi, NULL, 0) == 2);
    /* Five-tuple groups: IPv4 as IPv4-mapped IPv6. */
    mf_fse_group t;
    memset(&t, 0, sizeof t);
    t.kind = MF_FSE_GROUP_FIVE_TUPLE;
    t.five_tuple.src[10] = t.five_tuple.src[11] = 0xff;
    t.five_tuple.src[12] = 127;
    t.five_tuple.src[15] = 1;
    memcpy(t.five_tuple.dst, t.five_tuple.src, 16);
    t.five_tuple.protocol = 6;
    t.five_tuple.src_port = 40000;
    t.five_tuple.dst_port = 443;
    mf_fse_registered r3, r4;
    OK(c, mf_fse_register_rate(c, &t, 1.0, M, -1, -1, &r3));
    OK(c, mf_fse_register_rate(c, &t, 1.0, M, -1, -1, &r4));
    CHECK(r3.group == r4.group);
    t.five_tuple.dscp = 46;
    OK(c, mf_fse_register_rate(c, &t, 1.0, M, -1, -1, &r4));
    CHECK(r3.group != r4.group);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
        return 2;
    }
    printf("layout %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(mf_fse_group),
           offsetof(mf_fse_group, label), offsetof(mf_fse_group, five_tuple),
           sizeof(mf_fse_five_tuple), offsetof(mf_fse_five_tuple, dscp),
           sizeof(mf_fse_registered), sizeof(mf_fse_registered_window),
           sizeof(mf_fse_window), sizeof(mf_fse_flow_info), sizeof(mf_fse_group_info),
           offsetof(mf_fse_group_info, coupler), sizeof(mf_fse_push));
    mf_fse_client *c = NULL;
    OK(NULL, mf_fse_connect(argv[1], &c));
    CHECK(c != NULL && mf_fse_last_error(NULL) == MF_FSE_OK);
    appendix_c(c);
    bad_requests(c);
    null_pointers(c, argv[1]);
    pushes(argv[1]);
    windows(c);
    OK(NULL, mf_fse_close(c));
    printf("done\n");
    return 0;
}
