/*
 * macroflow_fse.h: the C client library of macroflowd (libmacroflow_fse).
 *
 * macroflowd runs the Flow State Exchange of RFC 8699 (rate-based flows) and TCP-CCC
 * (window-based flows) for the flows of many processes, which register with it over a Unix
 * domain socket. This library is a blocking client of that socket: one connection per
 * mf_fse_client, one request at a time. It wraps the Rust client (crates/fsed, fsed::client).
 *
 * Conventions
 * - Every function that does something returns an int status: MF_FSE_OK (0) or a negative
 *   MF_FSE_ERR_* code. Two return a non-negative count instead of 0 on success
 *   (mf_fse_query_group: the number of flows; mf_fse_wait_push: 1 got one, 0 timed out).
 * - On failure, mf_fse_last_error(), mf_fse_error_field() and mf_fse_error_message() say why.
 *   They describe the client's last call (or, for a NULL client, the calling thread's last
 *   mf_fse_connect or call with a NULL client), and their strings stay valid until the next
 *   call on that client (on that thread for NULL) other than these three accessors.
 * - A refusal by the daemon (MF_FSE_ERR_DAEMON) changed nothing; the field names the request's
 *   value it refused, e.g. "register_rate.priority" or "update_rate.flow".
 * - NULL pointers, out-of-range enum values and labels that are not valid UTF-8 give
 *   MF_FSE_ERR_BAD_ARGUMENT (the field names the argument) and send nothing. Out parameters are
 *   written only on success.
 * - After MF_FSE_ERR_IO, MF_FSE_ERR_PROTOCOL or MF_FSE_ERR_INTERNAL the connection may be out of
 *   step with the daemon: close the client and connect again (the daemon removes a closed
 *   connection's flows at once).
 * - A client is not thread-safe: use it from one thread at a time. Distinct clients are
 *   independent.
 * - Rates are in bit/s, times as named (ms or us), windows in packets.
 */
#ifndef MACROFLOW_FSE_H
#define MACROFLOW_FSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes ------------------------------------------------------------------------ */

/** Success. */
#define MF_FSE_OK 0
/** The socket failed (connect, read or write); the message says how. */
#define MF_FSE_ERR_IO (-1)
/** The daemon refused the request; mf_fse_error_field() names the value. Nothing changed. */
#define MF_FSE_ERR_DAEMON (-2)
/** The daemon sent something this library does not understand (e.g. another version). */
#define MF_FSE_ERR_PROTOCOL (-3)
/** A bad argument (NULL pointer, bad enum value, label not UTF-8 or too long); nothing was sent. */
#define MF_FSE_ERR_BAD_ARGUMENT (-4)
/** A bug inside the library (a Rust panic, caught at the boundary). */
#define MF_FSE_ERR_INTERNAL (-5)

/** The protocol version this library speaks (macroflowd refuses clients of another). */
#define MF_FSE_PROTOCOL_VERSION 1
/** The longest configuration label, in bytes (without the terminating NUL). */
#define MF_FSE_MAX_LABEL_BYTES 1024
/** The size of mf_fse_group_info.coupler, NUL included. */
#define MF_FSE_COUPLER_NAME_LEN 32

/* ---- Enumerations (passed as int) -------------------------------------------------------- */

/** mf_fse_group.kind: how a registering flow names its flow group (RFC 8699 sec. 5.1). */
enum mf_fse_group_kind {
    /** An explicit Flow Group Identifier chosen by the application (mf_fse_group.fgi). */
    MF_FSE_GROUP_FGI = 0,
    /** SBD by configuration: flows giving the same label (mf_fse_group.label). */
    MF_FSE_GROUP_LABEL = 1,
    /** SBD by multiplexing: the same five-tuple and DSCP (mf_fse_group.five_tuple). */
    MF_FSE_GROUP_FIVE_TUPLE = 2
};

/** The coupler a rate-based group runs (RFC 8699 sec. 5.3); -1 in calls: none chosen. */
enum mf_fse_algorithm {
    MF_FSE_ACTIVE = 0,
    MF_FSE_CONSERVATIVE_ACTIVE = 1,
    MF_FSE_SIMPLE_PASSIVE = 2,
    MF_FSE_PASSIVE = 3
};

/** A TCP connection's state as TCP-CCC needs it. */
enum mf_fse_window_state {
    MF_FSE_SLOW_START = 0,
    MF_FSE_CONGESTION_AVOIDANCE = 1,
    MF_FSE_FAST_RECOVERY = 2
};

/* ---- Types ------------------------------------------------------------------------------- */

/** A connection to macroflowd (opaque). */
typedef struct mf_fse_client mf_fse_client;

/** A five-tuple and DSCP. Addresses are 16 bytes in network order: IPv6, or IPv4 as
 *  IPv4-mapped IPv6 (::ffff:a.b.c.d). Ports are in host byte order. */
typedef struct mf_fse_five_tuple {
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t src_port;
    uint16_t dst_port;
    uint8_t protocol;
    uint8_t dscp;
} mf_fse_five_tuple;

/** A flow group, tagged by kind: only the member that kind names is read. */
typedef struct mf_fse_group {
    /** An enum mf_fse_group_kind value. */
    int kind;
    /** MF_FSE_GROUP_FGI: the Flow Group Identifier. */
    uint64_t fgi;
    /** MF_FSE_GROUP_LABEL: a NUL-terminated UTF-8 label of 1 ..= MF_FSE_MAX_LABEL_BYTES bytes
     *  (an empty one is refused by the daemon). The library reads at most
     *  MF_FSE_MAX_LABEL_BYTES + 1 bytes of it. */
    const char *label;
    /** MF_FSE_GROUP_FIVE_TUPLE: the five-tuple and DSCP. */
    mf_fse_five_tuple five_tuple;
} mf_fse_group;

/** A registered rate-based flow: its id, its group's id, and the rate to use now. */
typedef struct mf_fse_registered {
    uint64_t flow;
    uint64_t group;
    double rate_bps;
} mf_fse_registered;

/** A registered window-based flow: its id, its group's id, and the window to use now. */
typedef struct mf_fse_registered_window {
    uint64_t flow;
    uint64_t group;
    double cwnd_pkts;
    double ssthresh_pkts;
} mf_fse_registered_window;

/** The answer to a window UPDATE: if set is 1, use cwnd_pkts and ssthresh_pkts; if 0, keep
 *  the connection's own (both fields are then 0). */
typedef struct mf_fse_window {
    int set;
    double cwnd_pkts;
    double ssthresh_pkts;
} mf_fse_window;

/** One flow as the daemon holds it. */
typedef struct mf_fse_flow_info {
    uint64_t flow;
    uint64_t group;
    /** The priority the client asked for. */
    double priority;
    /** The priority the coupler uses (lower if the user's share is limited by the policy). */
    double effective_priority;
    /** FSE_R (rate flows, bit/s) or the coupler's window for it (window flows, packets). */
    double rate_or_cwnd;
    /** DR (rate flows; infinity: unlimited); 0 for window flows. */
    double desired_rate_bps;
} mf_fse_flow_info;

/** One group: the aggregate of RFC 8699 App. C's tables. */
typedef struct mf_fse_group_info {
    uint64_t group;
    /** S_CR (rate groups, bit/s) or the aggregate window (window groups, packets). */
    double sum_calculated;
    /** TLO, the passive algorithm's leftover (0 otherwise). */
    double leftover;
    /** All flows in the group, the other clients' included. */
    uint32_t flow_count;
    /** "active", "conservative_active", "simple_passive", "passive", or the TCP coupler's
     *  name; NUL-terminated (cut to MF_FSE_COUPLER_NAME_LEN - 1 bytes). */
    char coupler[MF_FSE_COUPLER_NAME_LEN];
} mf_fse_group_info;

/** A new rate for a subscribed flow. */
typedef struct mf_fse_push {
    uint64_t flow;
    double rate_bps;
} mf_fse_push;

/** An mf_fse_group naming an explicit Flow Group Identifier. */
static inline mf_fse_group mf_fse_group_fgi(uint64_t fgi) {
    mf_fse_group g = {MF_FSE_GROUP_FGI, fgi, 0, {{0}, {0}, 0, 0, 0, 0}};
    return g;
}

/** An mf_fse_group naming a configured label (the string is not copied). */
static inline mf_fse_group mf_fse_group_label(const char *label) {
    mf_fse_group g = {MF_FSE_GROUP_LABEL, 0, label, {{0}, {0}, 0, 0, 0, 0}};
    return g;
}

/* ---- Connection -------------------------------------------------------------------------- */

/** Connects to the daemon's socket at `path` and says Hello. On success *out is the new client
 *  (free it with mf_fse_close); on failure *out is set to NULL (if out is not NULL) and the
 *  error is the thread's: mf_fse_error_message(NULL).
 *  Errors: BAD_ARGUMENT (path or out NULL), IO (no daemon there), DAEMON (e.g. "connect":
 *  too many clients; "hello.version"), PROTOCOL. */
int mf_fse_connect(const char *path, mf_fse_client **out);

/** Closes the connection and frees the client; the daemon removes its flows at once.
 *  Errors: BAD_ARGUMENT (client NULL). */
int mf_fse_close(mf_fse_client *client);

/** The uid and pid the daemon sees this process as (SO_PEERCRED). Either out may be NULL if
 *  not wanted. Errors: BAD_ARGUMENT (client NULL). */
int mf_fse_peer(const mf_fse_client *client, uint32_t *uid_out, int32_t *pid_out);

/* ---- Registration ------------------------------------------------------------------------ */

/** Registers a rate-based flow (FSE) in `group` with its priority (> 0, <= 1e12) and its
 *  controller's initial rate. `algorithm`: an enum mf_fse_algorithm value for the group if
 *  this flow creates it (else it must match), or -1 for none (the daemon's default or the
 *  group's). `timeout_ms`: soft state, the flow is removed when silent for longer; -1 for the
 *  daemon's default. On success *out holds the flow, its group and the rate to use now.
 *  Errors: BAD_ARGUMENT (client, group or out NULL; bad group kind, label or algorithm;
 *  timeout_ms < -1), DAEMON (e.g. "register_rate.priority", "register_rate.group",
 *  "register_rate.algorithm", "register_rate.timeout_ms"), IO, PROTOCOL. */
int mf_fse_register_rate(mf_fse_client *client, const mf_fse_group *group, double priority,
                         double initial_rate_bps, int algorithm, int32_t timeout_ms,
                         mf_fse_registered *out);

/** As mf_fse_register_rate, with the application's desired rate (DR, bit/s; INFINITY: unlimited;
 *  any negative value: none): every mf_fse_update_rate that names no desired rate uses it, one
 *  that names one replaces it. A NaN is sent and refused by the daemon
 *  ("register_rate.desired_rate_bps"). */
int mf_fse_register_rate_desired(mf_fse_client *client, const mf_fse_group *group, double priority,
                                 double initial_rate_bps, double desired_rate_bps, int algorithm,
                                 int32_t timeout_ms, mf_fse_registered *out);

/** Registers a window-based flow (TCP-CCC or the daemon's configured TCP coupler) with its
 *  current cwnd and ssthresh in packets. `timeout_ms` as for mf_fse_register_rate. On success
 *  *out holds the flow, its group and the window to use now.
 *  Errors: as mf_fse_register_rate, fields "register_window.*". */
int mf_fse_register_window(mf_fse_client *client, const mf_fse_group *group, double priority,
                           double cwnd_pkts, double ssthresh_pkts, int32_t timeout_ms,
                           mf_fse_registered_window *out);

/* ---- Updates ----------------------------------------------------------------------------- */

/** UPDATE of a rate-based flow: the rate its controller computed (CC_R), what the application
 *  wants (desired_rate_bps < 0: none, unlimited), its RTT in microseconds (rtt_us < 0: none;
 *  the conservative algorithm needs it). On success *rate_out is the rate to use now.
 *  Errors: BAD_ARGUMENT (client or rate_out NULL), DAEMON (e.g. "update_rate.flow" for a flow
 *  that is not this client's, "update_rate.cc_rate_bps"), IO, PROTOCOL. */
int mf_fse_update_rate(mf_fse_client *client, uint64_t flow, double cc_rate_bps,
                       double desired_rate_bps, int64_t rtt_us, double *rate_out);

/** UPDATE of a window-based flow: cwnd and ssthresh (packets), `state` an enum
 *  mf_fse_window_state value, `timeout` nonzero if a retransmission timeout occurred, the
 *  packets in flight. On success *out says the window to use (or to keep the own).
 *  Errors: BAD_ARGUMENT (client or out NULL, bad state), DAEMON ("update_window.*"), IO,
 *  PROTOCOL. */
int mf_fse_update_window(mf_fse_client *client, uint64_t flow, double cwnd_pkts,
                         double ssthresh_pkts, int state, int timeout, double in_flight_pkts,
                         mf_fse_window *out);

/** Changes a flow's priority (> 0, <= 1e12).
 *  Errors: BAD_ARGUMENT (client NULL), DAEMON ("set_priority.flow", "set_priority.priority"),
 *  IO, PROTOCOL. */
int mf_fse_set_priority(mf_fse_client *client, uint64_t flow, double priority);

/** Keeps a flow's soft state alive without an update.
 *  Errors: BAD_ARGUMENT (client NULL), DAEMON ("refresh.flow"), IO, PROTOCOL. */
int mf_fse_refresh(mf_fse_client *client, uint64_t flow);

/** The flow leaves its group.
 *  Errors: BAD_ARGUMENT (client NULL), DAEMON ("leave.flow"), IO, PROTOCOL. */
int mf_fse_leave(mf_fse_client *client, uint64_t flow);

/** Asks for pushes of this flow's new rate whenever its group recomputes it (the active
 *  algorithms recompute every member's rate when any member updates, joins or leaves); read
 *  them with mf_fse_wait_push.
 *  Errors: BAD_ARGUMENT (client NULL), DAEMON ("subscribe.flow"), IO, PROTOCOL. */
int mf_fse_subscribe(mf_fse_client *client, uint64_t flow);

/* ---- Queries ----------------------------------------------------------------------------- */

/** One of this client's flows. On success *out holds it.
 *  Errors: BAD_ARGUMENT (client or out NULL), DAEMON ("query_flow.flow"), IO, PROTOCOL. */
int mf_fse_query_flow(mf_fse_client *client, uint64_t flow, mf_fse_flow_info *out);

/** A group this client has a flow in: *info gets the aggregate, and flows[0 .. min(n,
 *  capacity)) this client's own flows in it, by flow id (others' are counted in
 *  info->flow_count, not shown). Returns n >= 0, the number of this client's flows in the
 *  group (if n > capacity, call again with a larger array). `flows` may be NULL if capacity is 0.
 *  Errors: BAD_ARGUMENT (client or info NULL; flows NULL with capacity > 0), DAEMON
 *  ("query_group.group"), IO, PROTOCOL. */
int mf_fse_query_group(mf_fse_client *client, uint64_t group, mf_fse_group_info *info,
                       mf_fse_flow_info *flows, size_t capacity);

/* ---- Pushes ------------------------------------------------------------------------------ */

/** The next push for this client's subscribed flows, oldest first (pushes that arrived during
 *  other calls are kept). Waits up to timeout_ms (0: only what has arrived; < 0: until one
 *  comes). Returns 1 with *out set, or 0 if none came in time.
 *  Errors: BAD_ARGUMENT (client or out NULL), IO, PROTOCOL. */
int mf_fse_wait_push(mf_fse_client *client, int timeout_ms, mf_fse_push *out);

/* ---- Errors ------------------------------------------------------------------------------ */

/** The status of the client's last call (MF_FSE_OK if it succeeded). With client NULL: that of
 *  the calling thread's last mf_fse_connect or call with a NULL client. */
int mf_fse_last_error(const mf_fse_client *client);

/** The field the last call's error names: the daemon's (e.g. "register_rate.priority") for
 *  MF_FSE_ERR_DAEMON, the argument's (e.g. "group.label") for MF_FSE_ERR_BAD_ARGUMENT, "" for
 *  other errors and after success. Never NULL; client NULL as for mf_fse_last_error. Valid
 *  until the next call on the client (see the conventions at the top). */
const char *mf_fse_error_field(const mf_fse_client *client);

/** A human-readable message for the last call's error ("" after success). Never NULL; client
 *  NULL and lifetime as for mf_fse_error_field. */
const char *mf_fse_error_message(const mf_fse_client *client);

/** A static description of a status code ("ok", "i/o error", ...). Never NULL. */
const char *mf_fse_strerror(int status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MACROFLOW_FSE_H */
