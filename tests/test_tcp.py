"""The TCP coupling bindings: TcpCoupler (ccc, ccc_handover, etcp, efcm) and TcpGroups. Several
cases mirror the unit tests in crates/coupling/src/tcp/{ccc,baselines}.rs."""

import math

import pytest

import macroflow as mf


def snapshot(c):
    return (c.conns(), c.sum_cwnd, c.sum_ssthresh, c.coco, len(c), c.handovers_running)


def two_in_ca(p1=1.0, p2=1.0, kind="ccc"):
    """Two connections in CA at their shares: sum_cwnd 30, 15 segments each for equal priorities
    (as `two_in_ca` in ccc.rs). Connection 2 reports a window of 20, which covers its share, so it
    is told the share itself rather than its own window and a catch-up ssthresh (no burst)."""
    g = mf.TcpCoupler(kind)
    g.register(1, p1, 10.0, 1e9)
    g.register(2, p2, 10.0, 1e9)
    g.update(1, 20.0, 10.0, "CA")
    g.update(2, 20.0, 10.0, "CA")
    return g


# --- ccc -------------------------------------------------------------------------------------


def test_register_gives_a_priority_weighted_share():
    g = mf.TcpCoupler("ccc")
    assert g.name == "ccc"
    r = g.register(1, 1.0, 10.0, 100.0)
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (10.0, 100.0)
    r = g.register(2, 1.0, 10.0, 100.0)
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (10.0, 100.0), "sum_cwnd = 20 split in two"
    assert g.sum_cwnd == 20.0
    assert g.coco == 1
    assert g.all_in_slow_start
    assert [c.conn for c in g.conns()] == [1, 2]
    v = g.conn(1)
    assert (v.state, v.coordinating, v.handover) == ("SS", True, None)


def test_coco_increase_grows_the_aggregate_and_others_take_their_share():
    g = two_in_ca()
    assert g.sum_cwnd == 30.0
    assert not g.all_in_slow_start
    r = g.update(2, 40.0, 10.0, "CA")
    assert r.cwnd_pkts == 15.0, "a non-CoCo's own increase is replaced by its share"
    assert g.sum_cwnd == 30.0


def test_one_reduction_per_loss_event():
    g = two_in_ca()
    before = g.sum_cwnd
    # Connection 2 enters FR: the loss event begins, it becomes the CoCo and the aggregate is
    # halved at once (its own ssthresh / its window = 7.5 / 15), not when its FR ends.
    assert g.update(2, 15.0, 7.5, "FR") is None
    assert g.coco == 2
    assert (g.sum_cwnd, g.sum_ssthresh) == (before / 2, before / 2)
    # Connection 1 also enters FR within the same event: no second CoCo, no second reduction.
    assert g.update(1, 15.0, 7.5, "FR") is None
    assert g.coco == 2
    assert g.sum_cwnd == before / 2
    # Connection 2 leaves FR with cwnd = ssthresh: nothing more is reduced.
    r = g.update(2, 7.5, 7.5, "CA")
    assert g.sum_cwnd == before / 2
    assert r.cwnd_pkts == 7.5
    # Connection 1 is still in FR (same event): it must not become the CoCo.
    assert g.update(1, 15.0, 7.5, "FR") is None
    assert g.coco == 2
    # Connection 1 leaves FR: it gets its share of the event's sum_ssthresh, no second reduction.
    r = g.update(1, 7.5, 7.5, "CA")
    assert g.sum_cwnd == before / 2
    assert g.sum_ssthresh == before / 2
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (7.5, 7.5)


def test_timeout_on_one_connection_does_not_slow_start_the_aggregate():
    g = two_in_ca()
    before = g.sum_cwnd
    r = g.update(1, 1.0, 7.5, "SS", timeout=True)
    assert g.coco == 2, "the CoCo passes to a connection still in CA"
    # The timeout from CA begins a loss event: the aggregate is halved once (7.5 / 15), and not
    # restarted from the windows the connections have.
    assert (g.sum_cwnd, g.sum_ssthresh) == (before / 2, before / 2)
    assert not g.all_in_slow_start
    # The timed-out connection is told its loss window and its share as ssthresh, not its share
    # as cwnd (that would be a burst right after the RTO).
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (1.0, 7.5)
    assert g.conn(1).timed_out
    # The other connection stays in CA with its (reduced) share.
    r = g.update(2, 15.0, 10.0, "CA")
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (7.5, 7.5)
    v = g.conn(2)
    assert (v.state, v.timed_out, v.coordinating) == ("CA", False, True)
    # Its retransmission times out again (backoff): the same recovery, no further reduction.
    r = g.update(1, 1.0, 2.0, "SS", timeout=True)
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (1.0, 7.5)
    assert g.sum_cwnd == before / 2
    # Its slow start back to its share, on its own ACK clock, does not grow the aggregate.
    r = g.update(1, 2.0, 7.5, "SS")
    assert r.cwnd_pkts == 2.0, "never more than its own window"
    assert g.sum_cwnd == before / 2
    assert g.conn(1).timed_out, "still catching up"


def test_all_connections_timing_out_slow_starts_the_aggregate_once():
    g = two_in_ca()
    g.update(1, 1.0, 7.5, "SS", timeout=True)
    assert g.sum_cwnd == 15.0, "the first timeout halves the aggregate"
    # Connection 1 has not recovered yet (told 2, its share is 7.5): its timeout mark lasts, so
    # when connection 2 times out too, every connection carries one and the aggregate restarts.
    r = g.update(1, 2.0, 7.5, "SS")
    assert (r.cwnd_pkts, g.conn(1).timed_out) == (2.0, True)
    r = g.update(2, 1.0, 3.75, "SS", timeout=True)
    assert g.sum_cwnd == 3.0, "restarted from the windows they have: 2 + 1"
    assert g.sum_ssthresh == 15.0, "the event's sum_ssthresh, not halved again"
    assert (r.cwnd_pkts, r.ssthresh_pkts) == (1.0, 7.5)
    assert not any(c.timed_out for c in g.conns()), "the restart clears every mark"
    assert g.all_in_slow_start
    # Now every connection is in SS without a mark: the aggregate slow-starts.
    g.update(2, 2.0, 7.5, "SS")
    assert g.sum_cwnd == 4.0


def test_start_up_slow_start_doubles_the_aggregate():
    g = mf.TcpCoupler("ccc")
    g.register(1, 1.0, 2.0, 1e9)
    g.register(2, 1.0, 2.0, 1e9)
    assert g.sum_cwnd == 4.0
    # One RTT: each connection's two ACKs add two segments; every connection's increase counts
    # (no sum_P / P scale), so the aggregate doubles, 4 to 8, as one flow's would.
    g.update(1, 4.0, 1e9, "SS")
    g.update(2, 4.0, 1e9, "SS")
    assert g.sum_cwnd == 8.0
    assert g.conn(2).cwnd_pkts == 4.0
    r = g.update(1, 4.0, 1e9, "SS")
    assert r.cwnd_pkts == 4.0


def test_priorities_split_three_to_one():
    g = mf.TcpCoupler("ccc")
    g.register(1, 0.75, 10.0, 1e9)
    g.register(2, 0.25, 10.0, 1e9)
    g.update(1, 15.0, 10.0, "CA")
    g.update(2, 6.0, 10.0, "CA")
    assert (g.conn(1).cwnd_pkts, g.conn(2).cwnd_pkts) == (15.0, 5.0)
    r1 = g.update(1, 16.0, 10.0, "CA")
    r2 = g.update(2, 6.0, 10.0, "CA")
    assert g.sum_cwnd == 21.0
    assert r1.cwnd_pkts / r2.cwnd_pkts == pytest.approx(3.0, rel=1e-12)


def test_set_priority_applies_at_the_next_update():
    g = two_in_ca()
    g.set_priority(2, 3.0)
    assert g.conn(2).priority == 3.0
    assert g.conn(2).cwnd_pkts == 15.0, "nothing changes before its next update"
    # Its own window (30) covers the new share, so it is told the share itself.
    r = g.update(2, 30.0, 10.0, "CA")
    assert r.cwnd_pkts == pytest.approx(g.sum_cwnd * 3 / 4)
    # A share is taken away at once: connection 1 now gets a quarter.
    r = g.update(1, 15.0, 10.0, "CA")
    assert r.cwnd_pkts == pytest.approx(g.sum_cwnd / 4)


def test_tiny_priority_gives_a_finite_window_no_larger_than_reported():
    # Issue 11's reproducer: the old slow-start scale sum_P / P made this cwnd infinite.
    g = mf.TcpCoupler("ccc")
    g.register(1, 5e-324, 23.0, 1.0)
    g.register(2, 1.0, 70.0, 2.0)
    r = g.update(1, 99.0, 91.0, "SS")
    assert math.isfinite(r.cwnd_pkts) and r.cwnd_pkts <= 99.0, r
    assert math.isfinite(r.ssthresh_pkts), r
    assert math.isfinite(g.sum_cwnd)


def test_leave_passes_the_coco_and_keeps_the_aggregate():
    g = two_in_ca()
    total = g.sum_cwnd
    g.leave(1)
    assert g.coco == 2
    assert g.sum_cwnd == total
    assert 1 not in g
    with pytest.raises(mf.UnknownFlowError, match="unknown flow #1"):
        g.update(1, 1.0, 1.0, "CA")
    g.leave(2)
    assert len(g) == 0
    assert g.sum_cwnd == 0.0
    assert g.coco is None


# --- ccc_handover ----------------------------------------------------------------------------


def test_handover_releases_one_segment_per_n_acks():
    g = mf.TcpCoupler("ccc_handover")
    g.register(1, 1.0, 100.0, 1e9)
    g.update(1, 100.0, 50.0, "CA")
    r = g.register(2, 1.0, 0.0, 1e9)
    assert r.cwnd_pkts == 1.0, "a joiner sends one segment until ACKs release more"
    assert g.conn(2).handover == (1, 50.0)
    assert g.handovers_running == 1
    per_ack = []
    last = None
    for _ in range(200):
        out = g.on_ack(1)
        per_ack.append(len(out))
        if out:
            last = out[-1]
            assert last.conn == 2
            if last.done:
                break
    assert all(k <= 1 for k in per_ack), "never more than one segment per ACK"
    assert len(per_ack) == 97  # the 49 segments after the first, on ACKs 0, 2, ..., 96
    assert (last.cwnd_pkts, last.done) == (50.0, True)
    assert g.handovers_running == 0
    assert g.conn(2).handover is None


def test_handover_blocks_coco_growth_while_running():
    g = mf.TcpCoupler("ccc_handover")
    g.register(1, 1.0, 40.0, 1e9)
    g.update(1, 40.0, 20.0, "CA")
    g.register(2, 1.0, 0.0, 1e9)
    total = g.sum_cwnd
    r = g.update(1, 41.0, 20.0, "CA")
    assert g.sum_cwnd == total
    assert r.cwnd_pkts == 20.0
    g.update(1, 10.0, 20.0, "CA")
    assert g.sum_cwnd == total / 2


def test_acks_of_a_joiner_release_nothing():
    g = mf.TcpCoupler("ccc_handover")
    g.register(1, 1.0, 40.0, 1e9)
    g.register(2, 1.0, 0.0, 1e9)
    assert g.on_ack(2) == []
    with pytest.raises(mf.UnknownFlowError):
        g.on_ack(9)


# --- baselines -------------------------------------------------------------------------------


def test_etcp_timeout_forces_every_connection_into_slow_start():
    g = mf.TcpCoupler("etcp")
    g.register(1, 1.0, 50.0, 1e9)
    g.register(2, 1.0, 10.0, 1e9)
    assert g.sum_cwnd == 50.0, "the ensemble is one connection's window"
    assert g.conn(2).cwnd_pkts == 10.0, "its own window, not its share of 25: no burst"
    g.update(1, 1.0, 12.5, "SS", timeout=True)
    # Connection 2 reports the window it was told.
    r = g.update(2, 10.0, 1e9, "CA")
    assert r.cwnd_pkts == 1.0
    assert r.ssthresh_pkts > r.cwnd_pkts


def test_etcp_halves_once_per_connection_loss():
    g = mf.TcpCoupler("etcp")
    g.register(1, 1.0, 40.0, 1e9)
    g.register(2, 1.0, 40.0, 1e9)
    g.update(1, 20.0, 10.0, "FR")
    g.update(2, 20.0, 10.0, "FR")
    assert g.sum_cwnd == 10.0, "two losses in one event: halved twice"
    assert g.sum_ssthresh == 10.0


def test_efcm_does_not_halve_the_aggregate_on_one_drop():
    g = mf.TcpCoupler("efcm")
    g.register(1, 1.0, 50.0, 1e9)
    g.register(2, 1.0, 50.0, 1e9)
    g.update(1, 50.0, 1e9, "CA")
    g.update(1, 50.0, 25.0, "FR")
    g.update(1, 25.0, 25.0, "CA")
    assert g.sum_cwnd == 75.0


def test_efcm_joining_ssthresh_pushes_existing_flows_into_slow_start():
    g = mf.TcpCoupler("efcm")
    g.register(1, 1.0, 30.0, 20.0)
    g.register(2, 1.0, 30.0, 20.0)
    r = g.update(1, 30.0, 20.0, "CA")
    assert r.cwnd_pkts > r.ssthresh_pkts
    g.register(3, 1.0, 10.0, 1e6)
    r = g.update(1, 30.0, 20.0, "CA")
    assert r.ssthresh_pkts > r.cwnd_pkts


@pytest.mark.parametrize("kind", ["etcp", "efcm"])
def test_baselines_have_no_coco(kind):
    g = two_in_ca(kind=kind)
    assert g.coco is None
    assert g.handovers_running == 0
    assert not any(c.coordinating for c in g.conns())
    assert g.on_ack(1) == []
    with pytest.raises(mf.UnsupportedError, match=f"{kind} does not support all_in_slow_start"):
        g.all_in_slow_start


# --- shared behaviour and errors --------------------------------------------------------------


@pytest.mark.parametrize("kind", mf.TCP_COUPLER_KINDS)
def test_every_kind_answers_outside_fast_recovery_only(kind):
    g = mf.TcpCoupler(kind)
    assert g.name == kind
    r = g.register(1, 1.0, 10.0, 64.0)
    assert math.isfinite(r.cwnd_pkts) and r.cwnd_pkts >= 0
    g.register(2, 2.0, 10.0, 64.0)
    assert isinstance(g.update(1, 12.0, 64.0, "SS"), mf.Response)
    assert isinstance(g.update(1, 12.0, 64.0, "CA"), mf.Response)
    assert g.update(1, 6.0, 6.0, "FR") is None
    assert g.conn(1).state == "FR"
    g.leave(1)
    assert len(g) == 1 and 1 not in g and 2 in g


@pytest.mark.parametrize("kind", mf.TCP_COUPLER_KINDS)
def test_bad_input_leaves_state_unchanged(kind):
    g = two_in_ca(kind=kind)
    before = snapshot(g)
    cases = [
        (mf.DuplicateFlowError, "#1 is already registered", lambda: g.register(1, 1.0, 1.0, 1.0)),
        (mf.InvalidValueError, "invalid priority: got 0", lambda: g.register(3, 0.0, 1.0, 1.0)),
        (mf.InvalidValueError, "invalid cwnd_pkts: got NaN", lambda: g.register(3, 1.0, math.nan, 1.0)),
        (mf.InvalidValueError, "invalid ssthresh_pkts", lambda: g.register(3, 1.0, 1.0, -1.0)),
        (mf.InvalidValueError, "invalid cwnd_pkts: got -1", lambda: g.update(1, -1.0, 1.0, "CA")),
        (mf.InvalidValueError, "invalid ssthresh_pkts: got inf", lambda: g.update(1, 1.0, math.inf, "CA")),
        (mf.InvalidValueError, "timeout", lambda: g.update(1, 1.0, 1.0, "CA", timeout=True)),
        (mf.InvalidValueError, "invalid state: got 'ca'", lambda: g.update(1, 1.0, 1.0, "ca")),
        (mf.UnknownFlowError, "#9", lambda: g.update(9, 1.0, 1.0, "CA")),
        (mf.InvalidValueError, "priority", lambda: g.set_priority(1, -2.0)),
        (mf.UnknownFlowError, "#9", lambda: g.set_priority(9, 1.0)),
        (mf.UnknownFlowError, "#9", lambda: g.leave(9)),
        (mf.UnknownFlowError, "#9", lambda: g.on_ack(9)),
        (mf.UnknownFlowError, "#9", lambda: g.conn(9)),
    ]
    for exc, text, call in cases:
        with pytest.raises(exc, match=text):
            call()
        assert snapshot(g) == before


@pytest.mark.parametrize("kind", mf.TCP_COUPLER_KINDS)
def test_bad_burst_limit_and_in_flight_are_rejected(kind):
    with pytest.raises(mf.InvalidValueError, match="max_burst_pkts"):
        mf.TcpCoupler(kind, max_burst_pkts=-1)
    with pytest.raises(mf.InvalidValueError, match="max_burst_pkts"):
        mf.TcpCoupler(kind, max_burst_pkts=math.nan)
    g = two_in_ca(kind=kind)
    before = snapshot(g)
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(mf.InvalidValueError, match="in_flight_pkts"):
            g.update(1, 20.0, 10.0, "CA", in_flight_pkts=bad)
        assert snapshot(g) == before


def test_unknown_kind_lists_the_valid_names():
    with pytest.raises(mf.InvalidValueError) as e:
        mf.TcpCoupler("cubic")
    for k in mf.TCP_COUPLER_KINDS:
        assert f"'{k}'" in str(e.value)
    with pytest.raises(mf.InvalidValueError):
        mf.TcpGroups("cubic")


def test_reprs():
    g = two_in_ca()
    assert repr(g) == "TcpCoupler(kind='ccc', conns=2, sum_cwnd=30.0, coco=1)"
    assert repr(mf.TcpCoupler("efcm")) == "TcpCoupler(kind='efcm', conns=0, sum_cwnd=0.0)"
    assert repr(g.conn(2)) == (
        "ConnView(conn=2, priority=1.0, cwnd_pkts=15.0, ssthresh_pkts=10.0, state='CA', "
        "coordinating=False, handover=None, timed_out=False)"
    )
    t = two_in_ca()
    t.update(2, 1.0, 7.5, "SS", timeout=True)
    assert repr(t.conn(2)) == (
        "ConnView(conn=2, priority=1.0, cwnd_pkts=1.0, ssthresh_pkts=7.5, state='SS', "
        "coordinating=False, handover=None, timed_out=True)"
    )
    assert repr(g.update(2, 15.0, 10.0, "CA")) == "Response(cwnd_pkts=15.0, ssthresh_pkts=10.0)"
    h = mf.TcpCoupler("ccc_handover")
    h.register(1, 1.0, 10.0, 1e9)
    h.register(2, 1.0, 0.0, 1e9)
    assert repr(h.on_ack(1)) == "[Release(conn=2, cwnd_pkts=2.0, done=False)]"


# --- TcpGroups -------------------------------------------------------------------------------


def test_groups_couple_by_label_five_tuple_and_explicit_id():
    tg = mf.TcpGroups()
    assert tg.default_kind == "ccc"
    g1, r1 = tg.register(1, 1.0, 10.0, 1e9, label="path A")
    g2, r2 = tg.register(2, 1.0, 10.0, 1e9, label="path A")
    assert g1 == g2
    assert r2.cwnd_pkts == 10.0
    g3, _ = tg.register(3, 1.0, 10.0, 1e9, five_tuple=("10.0.0.1", "10.0.0.2", 6, 1, 80))
    g4, _ = tg.register(4, 1.0, 10.0, 1e9, group=100)
    assert len({g1, g3, g4}) == 3
    view = tg.group(g1)
    assert (view.gid, view.kind, view.sum_cwnd, len(view)) == (g1, "ccc", 20.0, 2)
    assert [c.conn for c in view.conns] == [1, 2]
    assert tg.group_of(4) == 100
    assert sorted(tg.group_ids()) == sorted([g1, g3, 100])
    assert 1 in tg and 9 not in tg
    r = tg.update(1, 20.0, 10.0, "CA")
    assert r is not None
    assert tg.update(1, 10.0, 5.0, "FR") is None
    tg.set_priority(2, 2.0)
    assert tg.on_ack(2) == []
    tg.leave(3)
    assert g3 not in tg.group_ids(), "an empty group is dropped"
    assert repr(tg).startswith("TcpGroups(default_kind='ccc'")


def test_groups_configure_and_errors_leave_state_unchanged():
    tg = mf.TcpGroups("etcp")
    tg.configure_group(5, "ccc_handover")
    tg.register(1, 1.0, 40.0, 1e9, group=5)
    tg.register(2, 1.0, 0.0, 1e9, group=5)
    assert tg.group(5).kind == "ccc_handover"
    assert [r.conn for r in tg.on_ack(1)] == [2]

    def snap():
        return [tg.group(g) for g in tg.group_ids()]

    before = snap()
    with pytest.raises(mf.GroupNotEmptyError):
        tg.configure_group(5, "ccc")
    with pytest.raises(mf.InvalidValueError, match="kind"):
        tg.configure_group(6, "reno")
    with pytest.raises(mf.DuplicateFlowError):
        tg.register(1, 1.0, 1.0, 1.0, group=6)
    with pytest.raises(mf.InvalidValueError, match="exactly one"):
        tg.register(3, 1.0, 1.0, 1.0)
    with pytest.raises(mf.InvalidValueError, match="priority"):
        tg.register(3, math.nan, 1.0, 1.0, label="x")
    with pytest.raises(mf.UnknownGroupError, match="FGI 6"):
        tg.group(6)
    with pytest.raises(mf.UnknownFlowError):
        tg.group_of(3)
    with pytest.raises(mf.InvalidValueError, match="state"):
        tg.update(1, 1.0, 1.0, "XX")
    with pytest.raises(mf.UnknownFlowError):
        tg.leave(3)
    assert snap() == before
    assert tg.group_ids() == [5]


def test_groups_burst_limit_reaches_every_group():
    tg = mf.TcpGroups(max_burst_pkts=4.0)
    assert tg.max_burst_pkts == 4.0
    with pytest.raises(mf.CouplingError, match="max_burst_pkts"):
        tg.set_max_burst_pkts(-1.0)
    assert tg.max_burst_pkts == 4.0, "a bad limit changes nothing"
    tg.configure_group(7, "efcm")
    tg.register(1, 1.0, 10.0, 1e9, group=7)
    tg.register(2, 1.0, 90.0, 1e9, group=7)
    # Its share (50) is far above its window: in flight + 4.
    assert tg.update(1, 10.0, 1e9, "CA", in_flight_pkts=10.0).cwnd_pkts == 14.0
    tg.set_max_burst_pkts(0.0)
    assert tg.update(1, 14.0, 1e9, "CA", in_flight_pkts=14.0).cwnd_pkts == 14.0


def test_the_integer_window_mode_keeps_whole_packets_and_refuses_tiny_priorities():
    """Issue 14: "ccc_int" is ctrlTCP in the kernel's arithmetic: windows are whole packets (a
    fraction given is dropped), priorities are kept in units of 2^-16 and a smaller one is refused
    with the object unchanged; the same split as "ccc" where no rounding is involved."""
    g = mf.TcpCoupler("ccc_int")
    f = mf.TcpCoupler("ccc")
    assert g.name == "ccc_int"
    with pytest.raises(mf.InvalidValueError, match="1/65536"):
        g.register(1, 1e-6, 10.0, 100.0)
    assert len(g) == 0
    for c in (g, f):
        c.register(1, 1.0, 10.7, 100.0)
        c.register(2, 3.0, 10.0, 100.0)
    assert g.sum_cwnd == 20.0 and f.sum_cwnd == 20.7
    r = g.update(2, 40.0, 100.0, "SS", in_flight_pkts=40.0)
    # The aggregate slow-starts (every increase counts): 20 + 30 = 50; 3/4 of it is 37.5, rounded to
    # the nearest packet (halves up).
    assert g.sum_cwnd == 50.0 and r.cwnd_pkts == 38.0
    assert g.conn(1).priority == 1.0 and g.conn(2).priority == 3.0
    h = mf.TcpCoupler("ccc_handover_int")
    h.register(1, 1.0, 10.0, 100.0)
    assert h.register(2, 1.0, 10.0, 100.0).cwnd_pkts == 1.0, "a joiner in handover starts with one"
