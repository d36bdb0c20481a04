"""Hypothesis property tests of the bindings over random operation sequences, valid and invalid.

Every operation is checked against a small model of which inputs are valid: a valid call must
succeed, an invalid one must raise the matching CouplingError subclass and change nothing.
Operations name their flow either as a reference to a live flow (resolved when the operation
runs, so most calls reach real flows) or as a raw id (which may be unknown or a duplicate).
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import macroflow as mf

SETTINGS = settings(max_examples=200, deadline=None)
REL = 1e-9
NAN, INF = math.nan, math.inf
MAX_ID = 5


# --- strategies -------------------------------------------------------------------------------


def weighted(*pairs):
    """One of the strategies, each drawn with about its weight. (`st.one_of(a, a, a, b)` is
    drawn about evenly inside lists, so repetition does not weight it.)"""
    table = [strategy for weight, strategy in pairs for _ in range(weight)]
    return st.sampled_from(range(len(table))).flatmap(lambda i: table[i])


def mostly(good, bad, n=7):
    """`good` about n times as often as `bad`: most calls are valid, some are not."""
    return weighted((n, good), (1, bad))


LIVE = st.integers(min_value=0, max_value=1000).map(lambda i: ("live", i))
RAW = st.integers(min_value=0, max_value=MAX_ID).map(lambda i: ("raw", i))
TARGET = mostly(LIVE, RAW, n=9)  # a flow to update / leave / ...
NEW = RAW  # a flow to register (may be a duplicate)

GOOD_PRIORITY = st.floats(min_value=0.01, max_value=100.0)
PRIORITY = mostly(GOOD_PRIORITY, st.sampled_from([0.0, -1.0, NAN, INF, -INF]))
GOOD_RATE = weighted((1, st.just(0.0)), (6, st.floats(min_value=0.0, max_value=1e10)))
RATE = mostly(GOOD_RATE, st.sampled_from([-1.0, NAN, INF, -INF]))
DESIRED = mostly(weighted((3, st.just(INF)), (2, GOOD_RATE)), st.sampled_from([NAN, -1.0]))
# Mostly forward in time; sometimes backwards (invalid once the group has seen a later time).
DT_NS = mostly(
    st.integers(min_value=0, max_value=200_000_000),
    st.integers(min_value=-50_000_000, max_value=-1),
)
RTT = mostly(
    st.floats(min_value=0.001, max_value=0.5), st.sampled_from([None, 0.0, -0.1, NAN, INF])
)


def sequence(first_register, ops, max_ops):
    """k valid registrations of flows 0..k-1, then random operations."""
    first = st.integers(min_value=1, max_value=4).flatmap(
        lambda k: st.tuples(*[first_register(("raw", i)) for i in range(k)])
    )
    return st.tuples(first, st.lists(ops, min_size=5, max_size=max_ops)).map(
        lambda t: list(t[0]) + t[1]
    )


def fse_ops(desired):
    update = st.tuples(st.just("update"), TARGET, RATE, DT_NS, desired, RTT)
    register = st.tuples(st.just("register"), NEW, PRIORITY, RATE, DT_NS)
    set_priority = st.tuples(st.just("set_priority"), TARGET, PRIORITY, DT_NS)
    leave = st.tuples(st.just("leave"), TARGET)
    ops = weighted((6, update), (1, register), (1, set_priority), (1, leave))

    def first(ref):
        return st.tuples(st.just("register"), st.just(ref), GOOD_PRIORITY, GOOD_RATE, st.just(0))

    return sequence(first, ops, 40)


def resolve(op, live):
    """The op with its flow reference replaced by a flow id."""
    kind, (how, i) = op[0], op[1]
    if how == "live" and live:
        flow = sorted(live)[i % len(live)]
    else:
        flow = i % (MAX_ID + 1)
    return (kind, flow) + tuple(op[2:])


# --- checks -----------------------------------------------------------------------------------


def good_priority(p):
    return math.isfinite(p) and p > 0


def good_rate(r):
    return math.isfinite(r) and r >= 0


def good_desired(r):
    return not math.isnan(r) and r >= 0


def good_secs(x):
    return x is None or (math.isfinite(x) and x >= 0)


def finite_nonneg(x):
    return math.isfinite(x) and x >= 0


# --- FSE --------------------------------------------------------------------------------------


class FseModel:
    """Which calls are valid: the registered flows, their priorities and the last time seen."""

    def __init__(self, algorithm):
        self.algorithm = algorithm
        self.priority = {}
        self.last_ns = 0  # the latest time a successful call passed in
        self.now_ns = 0  # the time the next op is relative to

    def time(self, dt):
        return max(0, self.now_ns + dt)

    def errors(self, op):
        """The exception classes the op may raise; empty if it must succeed."""
        kind, flow = op[0], op[1]
        errs = set()
        known = flow in self.priority
        if kind == "register":
            _, _, p, rate, dt = op
            if known:
                errs.add(mf.DuplicateFlowError)
            if not good_priority(p) or not good_rate(rate):
                errs.add(mf.InvalidValueError)
        elif not known:
            errs.add(mf.UnknownFlowError)
        if kind == "update":
            _, _, rate, dt, desired, rtt = op
            if not good_rate(rate) or not good_desired(desired) or not good_secs(rtt):
                errs.add(mf.InvalidValueError)
            if self.algorithm == "conservative_active":
                if rtt is None:
                    errs.add(mf.MissingInputError)
                elif rtt == 0.0:
                    errs.add(mf.InvalidValueError)
        if kind == "set_priority" and not good_priority(op[2]):
            errs.add(mf.InvalidValueError)
        if kind != "leave" and self.time(op[-1] if kind != "update" else op[3]) < self.last_ns:
            errs.add(mf.TimeWentBackwardsError)
        return errs

    def applied(self, op):
        kind, flow = op[0], op[1]
        if kind in ("register", "set_priority"):
            self.priority[flow] = op[2]
        elif kind == "leave":
            del self.priority[flow]
        if kind != "leave":
            self.now_ns = self.time(op[-1] if kind != "update" else op[3])
            self.last_ns = max(self.last_ns, self.now_ns)


def fse_call(g, model, op):
    kind, flow = op[0], op[1]
    if kind == "register":
        _, _, p, rate, dt = op
        return g.register(flow, p, rate, now_ns=model.time(dt))
    if kind == "update":
        _, _, rate, dt, desired, rtt = op
        return g.update(flow, rate, now_ns=model.time(dt), desired_rate_bps=desired, rtt_s=rtt)
    if kind == "set_priority":
        _, _, p, dt = op
        return g.set_priority(flow, p, now_ns=model.time(dt))
    return g.leave(flow)


def fse_snapshot(g):
    return (g.flows(), g.sum_calculated_rate, g.sum_priority, g.leftover, g.timer_ns, len(g))


def returned_rates(kind, result):
    if kind == "register":
        return [result]
    if kind == "update":
        return [result.rate_bps] + [r for _, r in result.assignments]
    return [r for _, r in result]


def check_fse_group(g, model):
    flows = g.flows()
    assert sorted(v.flow for v in flows) == sorted(model.priority)
    assert len(g) == len(model.priority)
    for v in flows:
        assert finite_nonneg(v.fse_rate_bps), v
        assert good_desired(v.desired_rate_bps), v
        assert v.priority == model.priority[v.flow]
        assert v.flow in g
    assert finite_nonneg(g.sum_calculated_rate)
    assert finite_nonneg(g.leftover)
    assert g.sum_priority == pytest.approx(sum(model.priority.values()), rel=REL, abs=1e-12)
    for gone in set(range(MAX_ID + 1)) - set(model.priority):
        assert gone not in g


def run_fse(algorithm, ops, after_success=None):
    g = mf.FseGroup(algorithm)
    model = FseModel(algorithm)
    for raw_op in ops:
        op = resolve(raw_op, model.priority)
        before = fse_snapshot(g)
        errs = model.errors(op)
        if errs:
            with pytest.raises(mf.CouplingError) as e:
                fse_call(g, model, op)
            assert type(e.value) in errs, (op, e.value)
            assert str(e.value), "the message is not empty"
            assert fse_snapshot(g) == before, op
            continue
        result = fse_call(g, model, op)
        model.applied(op)
        for r in returned_rates(op[0], result):
            assert finite_nonneg(r), (op, result)
        check_fse_group(g, model)
        if after_success is not None:
            after_success(g, op, result)


@SETTINGS
@given(ops=fse_ops(st.just(INF)))
def test_active_without_desired_limits_shares_s_cr_by_priority(ops):
    def check(g, op, result):
        if op[0] == "register":
            return  # registration does not redistribute (RFC 8699 step 1)
        pairs = result.assignments if op[0] == "update" else result
        if not pairs:
            assert op[0] == "leave" and len(g) == 0
            return
        s_cr = g.sum_calculated_rate
        prio = {v.flow: v.priority for v in g.flows()}
        assert sorted(f for f, _ in pairs) == sorted(prio)
        assert math.fsum(r for _, r in pairs) == pytest.approx(s_cr, rel=REL, abs=1e-6)
        unit = s_cr / math.fsum(prio.values())
        for f, r in pairs:
            assert r == pytest.approx(prio[f] * unit, rel=REL, abs=1e-6)
        if op[0] == "update":
            assert result.rate_bps == dict(pairs)[op[1]]

    run_fse("active", ops, after_success=check)


def check_leave(g, op, result):
    """After a leave the flow is unknown, and S_P is the sum over the remaining flows."""
    if op[0] != "leave":
        return
    flow = op[1]
    assert flow not in g
    assert all(f != flow for f, _ in result)
    before = fse_snapshot(g)
    with pytest.raises(mf.UnknownFlowError):
        g.flow(flow)
    with pytest.raises(mf.UnknownFlowError):
        g.update(flow, 1.0, now_ns=2**62, rtt_s=0.1)
    with pytest.raises(mf.UnknownFlowError):
        g.set_priority(flow, 1.0, now_ns=2**62)
    with pytest.raises(mf.UnknownFlowError):
        g.leave(flow)
    assert fse_snapshot(g) == before
    assert g.sum_priority == pytest.approx(
        math.fsum(v.priority for v in g.flows()), rel=REL, abs=1e-12
    )


@pytest.mark.parametrize("algorithm", mf.FSE_ALGORITHMS)
@SETTINGS
@given(ops=fse_ops(DESIRED))
def test_fse_rates_stay_finite_and_leave_removes_the_flow(algorithm, ops):
    """Every returned and stored rate is finite and >= 0 (checked in run_fse), invalid calls
    raise and change nothing, and a flow that left is gone."""
    run_fse(algorithm, ops, after_success=check_leave)


LABELS = st.sampled_from(["a", "b", "c"])


@SETTINGS
@given(
    ops=st.lists(
        weighted(
            (2, st.tuples(st.just("register"), NEW, PRIORITY, LABELS)),
            (2, st.tuples(st.just("update"), TARGET, RATE)),
            (1, st.tuples(st.just("leave"), TARGET)),
        ),
        min_size=5,
        max_size=40,
    )
)
def test_fse_groups_stay_consistent(ops):
    fse = mf.Fse("passive")
    label_of = {}
    for raw_op in ops:
        op = resolve(raw_op, label_of)
        kind, flow = op[0], op[1]
        before = [fse.group(g) for g in fse.group_ids()]
        try:
            if kind == "register":
                fse.register(flow, op[2], 1e6, label=op[3])
                label_of[flow] = op[3]
            elif kind == "update":
                assert finite_nonneg(fse.update(flow, op[2]).rate_bps)
            else:
                fse.leave(flow)
                del label_of[flow]
        except mf.CouplingError:
            assert [fse.group(g) for g in fse.group_ids()] == before
        assert len(fse) == len(label_of)
        by_label = {}
        for f, label in label_of.items():
            by_label.setdefault(label, set()).add(f)
        groups = {g: {v.flow for v in fse.group(g).flows} for g in fse.group_ids()}
        assert sorted(map(sorted, groups.values())) == sorted(map(sorted, by_label.values()))
        for f in label_of:
            assert f in groups[fse.group_of(f)]


# --- TCP couplers -----------------------------------------------------------------------------

GOOD_WIN = st.floats(min_value=0.0, max_value=1000.0)
BAD_WIN = st.sampled_from([-1.0, NAN, INF])
WIN = mostly(GOOD_WIN, BAD_WIN)
GOOD_SSTHRESH = weighted((3, GOOD_WIN), (1, st.just(1e9)))
SSTHRESH = mostly(GOOD_SSTHRESH, BAD_WIN)
STATE = mostly(weighted((2, st.just("SS")), (2, st.just("CA")), (1, st.just("FR"))), st.just("XX"))
TIMEOUT = mostly(st.just(False), st.just(True))


def tcp_ops(state=STATE):
    update = st.tuples(st.just("update"), TARGET, WIN, SSTHRESH, state, TIMEOUT)
    register = st.tuples(st.just("register"), NEW, PRIORITY, WIN, SSTHRESH)
    set_priority = st.tuples(st.just("set_priority"), TARGET, PRIORITY)
    leave = st.tuples(st.just("leave"), TARGET)
    on_ack = st.tuples(st.just("on_ack"), TARGET)
    ops = weighted((8, update), (1, register), (1, set_priority), (1, leave), (2, on_ack))

    def first(ref):
        return st.tuples(st.just("register"), st.just(ref), GOOD_PRIORITY, GOOD_WIN, GOOD_SSTHRESH)

    return sequence(first, ops, 50)


def tcp_errors(conns, op):
    kind, conn = op[0], op[1]
    errs = set()
    if kind == "register":
        if conn in conns:
            errs.add(mf.DuplicateFlowError)
        if not good_priority(op[2]) or not good_rate(op[3]) or not good_rate(op[4]):
            errs.add(mf.InvalidValueError)
        return errs
    if conn not in conns:
        errs.add(mf.UnknownFlowError)
    if kind == "update":
        _, _, cwnd, ssthresh, state, timeout = op
        if not good_rate(cwnd) or not good_rate(ssthresh) or state == "XX":
            errs.add(mf.InvalidValueError)
        if timeout and state != "SS":
            errs.add(mf.InvalidValueError)
    if kind == "set_priority" and not good_priority(op[2]):
        errs.add(mf.InvalidValueError)
    return errs


def tcp_snapshot(c):
    return (c.conns(), c.sum_cwnd, c.sum_ssthresh, c.coco, len(c), c.handovers_running)


def tcp_call(c, op):
    kind, conn = op[0], op[1]
    if kind == "register":
        return c.register(conn, op[2], op[3], op[4])
    if kind == "update":
        _, _, cwnd, ssthresh, state, timeout = op
        return c.update(conn, cwnd, ssthresh, state, timeout=timeout)
    if kind == "set_priority":
        return c.set_priority(conn, op[2])
    if kind == "leave":
        return c.leave(conn)
    return c.on_ack(conn)


def run_tcp(kind, ops, after_success=None):
    c = mf.TcpCoupler(kind)
    conns = set()
    for raw_op in ops:
        op = resolve(raw_op, conns)
        before = tcp_snapshot(c)
        errs = tcp_errors(conns, op)
        if errs:
            with pytest.raises(mf.CouplingError) as e:
                tcp_call(c, op)
            assert type(e.value) in errs, (op, e.value)
            assert tcp_snapshot(c) == before, op
            continue
        result = tcp_call(c, op)
        if op[0] == "register":
            conns.add(op[1])
        elif op[0] == "leave":
            conns.discard(op[1])
        if op[0] in ("register", "update") and result is not None:
            assert finite_nonneg(result.cwnd_pkts), (op, result)
            assert finite_nonneg(result.ssthresh_pkts), (op, result)
        if op[0] == "update":
            assert (result is None) == (op[4] == "FR"), "no answer in Fast Recovery only"
        if op[0] == "on_ack":
            for r in result:
                assert finite_nonneg(r.cwnd_pkts) and r.conn in conns and r.conn != op[1]
        views = c.conns()
        assert {v.conn for v in views} == conns and len(c) == len(conns)
        for v in views:
            assert finite_nonneg(v.cwnd_pkts) and finite_nonneg(v.ssthresh_pkts), v
            assert v.state in mf.TCP_STATES
        assert finite_nonneg(c.sum_cwnd) and finite_nonneg(c.sum_ssthresh)
        if kind.startswith("ccc"):
            assert sum(v.coordinating for v in views) == (1 if conns else 0)
            assert c.coco == next((v.conn for v in views if v.coordinating), None)
        if after_success is not None:
            after_success(c, op, before)


@pytest.mark.parametrize("kind", mf.TCP_COUPLER_KINDS)
@SETTINGS
@given(ops=tcp_ops())
def test_tcp_responses_are_finite_and_non_negative(kind, ops):
    run_tcp(kind, ops)


@SETTINGS
@given(ops=tcp_ops(weighted((3, st.just("SS")), (3, st.just("CA")), (1, st.just("FR")))))
def test_ccc_slow_start_report_never_grows_the_aggregate_while_another_is_in_ca(ops):
    def check(c, op, before):
        if op[0] != "update" or op[4] != "SS":
            return
        views_before, sum_before = before[0], before[1]
        if any(v.state == "CA" for v in views_before if v.conn != op[1]):
            assert c.sum_cwnd <= sum_before, (op, sum_before, c.sum_cwnd)

    run_tcp("ccc", ops, after_success=check)


# --- a known numerical weakness of the crate --------------------------------------------------


@pytest.mark.parametrize("algorithm", mf.FSE_ALGORITHMS)
def test_sum_priority_survives_widely_different_priorities(algorithm):
    g = mf.FseGroup(algorithm)
    g.register(1, 1e12, 1e6)
    g.register(2, 1e-3, 1e6)
    g.register(3, 1.0, 1e6)
    g.leave(1)
    g.leave(2)
    assert g.sum_priority == 1.0
    assert g.update(3, 1e6, now_ns=1, rtt_s=0.1).rate_bps >= 0
    with pytest.raises(mf.InvalidValueError, match="priority"):
        g.register(4, 1e17, 1e6)
