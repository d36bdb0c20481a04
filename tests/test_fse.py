"""The FSE bindings: FseGroup and Fse. Several cases mirror the unit tests in
crates/coupling/src/fse.rs, so a Python user sees the same numbers as the Rust crate."""

import math

import pytest

import macroflow as mf

MBPS = 1e6
MS = 1_000_000  # ns


def mbps(pairs):
    return [r / MBPS for _, r in pairs]


def snapshot(g):
    """Everything observable about an FseGroup."""
    return (
        g.flows(),
        g.sum_calculated_rate,
        g.sum_priority,
        g.leftover,
        g.timer_ns,
        len(g),
        g.algorithm,
    )


def fse_snapshot(fse):
    return (fse.group_ids(), [fse.group(gid) for gid in fse.group_ids()], len(fse))


# --- FseGroup, one algorithm at a time ---------------------------------------------------------


def test_active_shares_s_cr_by_priority():
    g = mf.FseGroup("active")
    assert g.register(1, 1.0, 1 * MBPS) == 1 * MBPS
    g.register(2, 0.5, 1 * MBPS)
    out = g.update(1, 4 * MBPS, now_ns=1 * MS)
    # S_CR = 2 + 4 - 1 = 5, split 2:1.
    assert out.rate_bps == pytest.approx(5 / 1.5 * MBPS)
    assert [f for f, _ in out.assignments] == [1, 2]
    assert mbps(out.assignments) == pytest.approx([10 / 3, 5 / 3], rel=1e-12)
    assert g.sum_calculated_rate == pytest.approx(5 * MBPS)
    assert g.sum_priority == 1.5


@pytest.mark.parametrize("algorithm", ["active", "conservative_active", "simple_passive", "passive"])
def test_tiny_priorities_give_finite_rates(algorithm):
    # Issue 11's reproducer: two flows of priority 5e-324 made the active FSE return rate = inf.
    g = mf.FseGroup(algorithm)
    g.register(1, 5e-324, 2 * MBPS)
    g.register(2, 5e-324, 2 * MBPS)
    out = g.update(1, 2 * MBPS, now_ns=10 * MS, rtt_s=0.05)
    assert out.rate_bps == 2 * MBPS
    assert all(r == 2 * MBPS for _, r in out.assignments), out.assignments
    # 1e12 joins; the tiny flow leaves: S_P is the remaining flow's, not cancelled to 0.
    g.register(3, 1e12, 1 * MBPS, now_ns=10 * MS)
    g.leave(2)
    g.leave(3)
    assert g.sum_priority == 5e-324
    assert g.update(1, 1 * MBPS, now_ns=20 * MS, rtt_s=0.05).rate_bps > 0


def test_active_caps_each_flow_by_its_own_desired_rate():
    g = mf.FseGroup("active")
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    out = g.update(1, 5 * MBPS, now_ns=1 * MS, desired_rate_bps=2 * MBPS)
    assert mbps(out.assignments) == [2.0, 5.0], "flow 2 is not capped by flow 1's desired rate"
    assert g.flow(1).desired_rate_bps == 2 * MBPS
    assert g.flow(2).desired_rate_bps == math.inf


def test_conservative_reduces_proportionally_and_holds_for_two_rtts():
    g = mf.FseGroup("conservative_active")
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    out = g.update(1, 2.5 * MBPS, now_ns=1000 * MS, rtt_s=0.1)
    assert mbps(out.assignments) == [2.5, 2.5]
    assert g.timer_ns == 1200 * MS
    # Within 2 RTTs, flow 2's own decrease (same loss event) is ignored.
    out = g.update(2, 1.25 * MBPS, now_ns=1150 * MS, rtt_s=0.1)
    assert mbps(out.assignments) == [2.5, 2.5]
    # After the timer, an increase of I by one of N = 2 flows grows S_CR by I/2.
    out = g.update(2, 3.5 * MBPS, now_ns=1200 * MS, rtt_s=0.1)
    assert mbps(out.assignments) == [2.75, 2.75]
    assert g.timer_ns is None


def test_conservative_needs_an_rtt():
    g = mf.FseGroup("conservative_active")
    g.register(1, 1.0, MBPS)
    before = snapshot(g)
    with pytest.raises(mf.MissingInputError, match="rtt"):
        g.update(1, MBPS, now_ns=1)
    with pytest.raises(mf.InvalidValueError, match="invalid rtt: got 0"):
        g.update(1, MBPS, now_ns=1, rtt_s=0.0)
    with pytest.raises(mf.InvalidValueError, match="rtt_s"):
        g.update(1, MBPS, now_ns=1, rtt_s=-0.1)
    with pytest.raises(mf.InvalidValueError, match="rtt_s"):
        g.update(1, MBPS, now_ns=1, rtt_s=math.nan)
    assert snapshot(g) == before


def test_simple_passive_returns_the_updating_flows_share_only():
    g = mf.FseGroup("simple_passive")
    g.register(1, 1.0, 4 * MBPS)
    g.register(2, 3.0, 4 * MBPS)
    out = g.update(2, 4 * MBPS, now_ns=1)
    assert out.assignments == []
    assert out.rate_bps == 6 * MBPS
    assert g.flow(1).fse_rate_bps == 4 * MBPS, "flow 1 unchanged until it updates"


def test_simple_passive_s_cr_never_negative():
    g = mf.FseGroup("simple_passive")
    g.register(1, 1.0, 10 * MBPS)
    g.register(2, 1.0, 1 * MBPS)
    g.update(2, MBPS, now_ns=1)
    g.update(1, 0.0, now_ns=2)
    g.update(2, 0.0, now_ns=3)
    r = g.update(1, 0.0, now_ns=4).rate_bps
    assert r >= 0 and g.sum_calculated_rate >= 0


def test_passive_tracks_leftover_of_an_application_limited_flow():
    g = mf.FseGroup("passive")
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    # Flow 1 only wants 1 Mbit/s: it leaves most of its share unused (TLO).
    out = g.update(1, 5 * MBPS, now_ns=1, desired_rate_bps=1 * MBPS)
    assert out.rate_bps == 1 * MBPS
    assert out.assignments == []
    assert g.leftover > 0
    # Flow 2 takes its share plus the leftover.
    r2 = g.update(2, 5 * MBPS, now_ns=2).rate_bps
    assert r2 > 5 * MBPS
    assert g.leftover == 0.0


def test_leave_hands_the_share_to_the_others():
    g = mf.FseGroup("active")
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    assert mbps(g.leave(2)) == [10.0]
    assert 2 not in g
    assert g.sum_priority == 1.0
    with pytest.raises(mf.UnknownFlowError):
        g.flow(2)


def test_priority_change_redistributes_for_active():
    g = mf.FseGroup("active")
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    assert mbps(g.set_priority(1, 0.25, now_ns=1)) == [2.0, 8.0]


@pytest.mark.parametrize("algorithm", ["simple_passive", "passive"])
def test_priority_change_is_deferred_for_passive(algorithm):
    g = mf.FseGroup(algorithm)
    g.register(1, 1.0, 5 * MBPS)
    g.register(2, 1.0, 5 * MBPS)
    assert g.set_priority(1, 0.25, now_ns=1) == []
    assert g.flow(1).priority == 0.25
    assert g.sum_priority == 1.25


def test_group_expire_removes_silent_flows():
    g = mf.FseGroup("passive")
    g.register(1, 1.0, MBPS, now_ns=0)
    g.register(2, 1.0, MBPS, now_ns=0)
    g.update(2, MBPS, now_ns=1500 * MS)
    assert g.expire(2001 * MS, 2.0) == ([1], [])
    assert 1 not in g and 2 in g
    with pytest.raises(mf.InvalidValueError, match="timeout_s"):
        g.expire(0, -1.0)


@pytest.mark.parametrize("algorithm", mf.FSE_ALGORITHMS)
def test_every_algorithm_registers_updates_and_leaves(algorithm):
    g = mf.FseGroup(algorithm)
    assert g.algorithm == algorithm
    for f in range(1, 4):
        assert g.register(f, float(f), 2 * MBPS, now_ns=0) == 2 * MBPS
    assert len(g) == 3
    assert g.sum_calculated_rate == 6 * MBPS
    for t, f in enumerate([1, 2, 3, 1, 2, 3], start=1):
        out = g.update(f, 3 * MBPS, now_ns=t * MS, rtt_s=0.05)
        assert math.isfinite(out.rate_bps) and out.rate_bps >= 0
        assert out.rate_bps == g.flow(f).fse_rate_bps
        if algorithm in ("active", "conservative_active"):
            assert dict(out.assignments) == {v.flow: v.fse_rate_bps for v in g.flows()}
        else:
            assert out.assignments == []
    g.leave(2)
    assert sorted(v.flow for v in g.flows()) == [1, 3]
    assert g.sum_priority == pytest.approx(4.0)
    g.leave(1)
    g.leave(3)
    assert len(g) == 0
    assert g.sum_calculated_rate == 0.0 and g.sum_priority == 0.0


# --- errors ------------------------------------------------------------------------------------


def test_unknown_algorithm_lists_the_valid_names():
    with pytest.raises(mf.InvalidValueError) as e:
        mf.FseGroup("aggressive")
    msg = str(e.value)
    assert "'aggressive'" in msg
    for name in mf.FSE_ALGORITHMS:
        assert f"'{name}'" in msg
    with pytest.raises(mf.InvalidValueError):
        mf.Fse("aggressive")


@pytest.mark.parametrize("algorithm", mf.FSE_ALGORITHMS)
def test_errors_leave_state_unchanged(algorithm):
    g = mf.FseGroup(algorithm)
    g.register(1, 1.0, MBPS, now_ns=10)
    g.register(2, 2.0, 3 * MBPS, now_ns=10)
    g.update(1, 2 * MBPS, now_ns=10, rtt_s=0.1)
    before = snapshot(g)
    cases = [
        (mf.DuplicateFlowError, "already registered", lambda: g.register(1, 1.0, MBPS, now_ns=10)),
        (mf.InvalidValueError, "invalid priority: got 0", lambda: g.register(3, 0.0, MBPS, now_ns=10)),
        (mf.InvalidValueError, "invalid priority", lambda: g.register(3, -1.0, MBPS, now_ns=10)),
        (mf.InvalidValueError, "invalid initial_rate_bps: got NaN", lambda: g.register(3, 1.0, math.nan, now_ns=10)),
        (mf.InvalidValueError, "invalid initial_rate_bps: got inf", lambda: g.register(3, 1.0, math.inf, now_ns=10)),
        (mf.TimeWentBackwardsError, "time went backwards", lambda: g.register(3, 1.0, MBPS, now_ns=9)),
        (mf.InvalidValueError, "invalid cc_rate_bps: got -1", lambda: g.update(1, -1.0, now_ns=11, rtt_s=0.1)),
        (mf.InvalidValueError, "cc_rate_bps", lambda: g.update(1, math.inf, now_ns=11, rtt_s=0.1)),
        (mf.InvalidValueError, "desired_rate_bps", lambda: g.update(1, 1.0, now_ns=11, desired_rate_bps=math.nan, rtt_s=0.1)),
        (mf.InvalidValueError, "desired_rate_bps", lambda: g.update(1, 1.0, now_ns=11, desired_rate_bps=-5.0, rtt_s=0.1)),
        (mf.TimeWentBackwardsError, "now = 9 ns", lambda: g.update(1, 1.0, now_ns=9, rtt_s=0.1)),
        (mf.UnknownFlowError, "unknown flow #9", lambda: g.update(9, 1.0, now_ns=11, rtt_s=0.1)),
        (mf.InvalidValueError, "invalid priority: got NaN", lambda: g.set_priority(1, math.nan, now_ns=11)),
        (mf.UnknownFlowError, "#9", lambda: g.set_priority(9, 1.0, now_ns=11)),
        (mf.TimeWentBackwardsError, "backwards", lambda: g.set_priority(1, 1.0, now_ns=0)),
        (mf.UnknownFlowError, "#9", lambda: g.leave(9)),
        (mf.UnknownFlowError, "#9", lambda: g.flow(9)),
    ]
    for exc, text, call in cases:
        with pytest.raises(exc, match=text):
            call()
        assert snapshot(g) == before


def test_exception_hierarchy():
    for exc in [
        mf.InvalidValueError,
        mf.UnknownFlowError,
        mf.DuplicateFlowError,
        mf.UnknownGroupError,
        mf.GroupNotEmptyError,
        mf.MissingInputError,
        mf.TimeWentBackwardsError,
        mf.UnsupportedError,
    ]:
        assert issubclass(exc, mf.CouplingError)
        assert exc.__module__ == "macroflow"
    assert issubclass(mf.CouplingError, ValueError)
    assert issubclass(mf.UnknownFlowError, KeyError)
    assert issubclass(mf.UnknownGroupError, KeyError)
    g = mf.FseGroup("active")
    with pytest.raises(KeyError) as e:
        g.flow(42)
    # Not KeyError's quoted repr: the plain Rust message.
    assert str(e.value) == "unknown flow #42"


def test_ids_must_be_non_negative_ints():
    g = mf.FseGroup("active")
    with pytest.raises(OverflowError):
        g.register(-1, 1.0, MBPS)
    with pytest.raises(TypeError):
        g.register("1", 1.0, MBPS)
    assert len(g) == 0
    assert -1 not in g and "x" not in g and None not in g


# --- Fse: many groups and the grouping ---------------------------------------------------------


def test_fse_defaults():
    fse = mf.Fse()
    assert fse.default_algorithm == "conservative_active"
    assert fse.soft_state_timeout_s is None
    assert fse.expire(10**12) == []
    assert len(fse) == 0 and fse.group_ids() == []


def test_fse_explicit_groups_and_configuration():
    fse = mf.Fse("active")
    fse.configure_group(3, "passive")
    assert fse.group(3).algorithm == "passive"
    assert fse.register(1, 1.0, MBPS, group=3) == (3, MBPS)
    assert fse.register(2, 1.0, MBPS, group=4) == (4, MBPS)
    assert fse.group(4).algorithm == "active"
    assert fse.group_of(1) == 3 and fse.group_of(2) == 4
    assert fse.group_ids() == [3, 4]
    assert len(fse) == 2 and 1 in fse and 5 not in fse
    before = fse_snapshot(fse)
    with pytest.raises(mf.GroupNotEmptyError, match="FGI 3"):
        fse.configure_group(3, "active")
    with pytest.raises(mf.InvalidValueError, match="algorithm"):
        fse.configure_group(9, "nope")
    with pytest.raises(mf.DuplicateFlowError):
        fse.register(1, 1.0, MBPS, group=4)
    with pytest.raises(mf.UnknownGroupError, match="FGI 9"):
        fse.group(9)
    with pytest.raises(mf.UnknownFlowError):
        fse.group_of(9)
    assert fse_snapshot(fse) == before


def test_fse_multiplexed_flows_share_a_group():
    fse = mf.Fse("active")
    tup = ("10.0.0.1", "10.0.0.2", 17, 4000, 5004)
    ga, _ = fse.register(1, 1.0, MBPS, five_tuple=tup)
    gb, _ = fse.register(2, 1.0, MBPS, five_tuple=tup)
    gc, _ = fse.register(3, 1.0, MBPS, five_tuple=tup, dscp=46)
    gd, _ = fse.register(4, 1.0, MBPS, five_tuple=("2001:db8::1", "2001:db8::2", 17, 4000, 5004))
    assert ga == gb
    assert gc != ga, "a different DSCP may be treated differently on the path"
    assert gd not in (ga, gc)
    out = fse.update(1, 3 * MBPS, now_ns=1)
    assert sorted(f for f, _ in out.assignments) == [1, 2]


def test_fse_configured_labels_share_a_group_and_avoid_explicit_ids():
    fse = mf.Fse("simple_passive")
    fse.register(1, 1.0, MBPS, group=0)
    g1, _ = fse.register(2, 1.0, MBPS, label="wlan0 uplink")
    g2, _ = fse.register(3, 1.0, MBPS, label="wlan0 uplink")
    assert g1 == g2 != 0
    view = fse.group(g1)
    assert view.gid == g1 and len(view) == 2
    assert [f.flow for f in view.flows] == [2, 3]
    assert view.sum_calculated_rate == 2 * MBPS and view.sum_priority == 2.0


def test_fse_leave_drops_empty_groups():
    fse = mf.Fse("active")
    fse.register(1, 1.0, 5 * MBPS, group=7)
    fse.register(2, 1.0, 5 * MBPS, group=7)
    assert mbps(fse.leave(2)) == [10.0]
    assert fse.leave(1) == []
    assert fse.group_ids() == []
    with pytest.raises(mf.UnknownFlowError):
        fse.leave(1)


def test_fse_soft_state_removes_silent_flows():
    fse = mf.Fse("passive", soft_state_timeout_s=2.0)
    assert fse.soft_state_timeout_s == 2.0
    fse.register(1, 1.0, MBPS, group=7)
    fse.register(2, 1.0, MBPS, group=7)
    fse.update(2, MBPS, now_ns=1500 * MS)
    assert fse.expire(2001 * MS) == [(7, [1], [])]
    with pytest.raises(mf.UnknownFlowError):
        fse.group_of(1)
    assert fse.expire(3501 * MS) == [(7, [2], [])]
    assert fse.group_ids() == [], "an empty group is dropped"


def test_fse_soft_state_under_active_returns_the_new_rates():
    fse = mf.Fse("active", soft_state_timeout_s=2.0)
    fse.register(1, 1.0, 4 * MBPS, label="uplink")
    fse.register(2, 1.0, 4 * MBPS, now_ns=1000 * MS, label="uplink")
    [(gid, flows, rates)] = fse.expire(2500 * MS)
    assert flows == [1]
    assert rates == [(2, 8 * MBPS)]


def test_configured_group_survives_emptying():
    fse = mf.Fse()
    fse.configure_group(5, "passive")
    fse.register(1, 1.0, MBPS, group=5)
    fse.leave(1)
    assert fse.group(5).algorithm == "passive"
    fse.remove_group(5)
    with pytest.raises(mf.UnknownGroupError):
        fse.group(5)


def test_fse_register_failure_does_not_create_a_group():
    fse = mf.Fse()
    with pytest.raises(mf.InvalidValueError, match="priority"):
        fse.register(1, -1.0, MBPS, label="uplink")
    assert fse.group_ids() == []
    with pytest.raises(mf.InvalidValueError, match="dscp"):
        fse.register(1, 1.0, MBPS, five_tuple=("10.0.0.1", "10.0.0.2", 6, 1, 2), dscp=64)
    assert fse.group_ids() == []


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({}, "exactly one"),
        ({"group": 1, "label": "x"}, "exactly one"),
        ({"group": 1, "five_tuple": ("10.0.0.1", "10.0.0.2", 6, 1, 2)}, "exactly one"),
        ({"label": "x", "dscp": 3}, "dscp"),
        ({"five_tuple": ("10.0.0.300", "10.0.0.2", 6, 1, 2)}, "src_ip: got '10.0.0.300'"),
        ({"five_tuple": ("10.0.0.1", "not an ip", 6, 1, 2)}, "dst_ip"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 256, 1, 2)}, "protocol: got 256"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 6, -1, 2)}, "src_port: got -1"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 6, 1, 65536)}, "dst_port: got 65536"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 6, 1, 2), "dscp": -1}, "dscp: got -1"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 6, 1, 2), "dscp": 1000}, "dscp: got 1000"),
        ({"five_tuple": ("10.0.0.1", "10.0.0.2", 6)}, "five_tuple"),
    ],
)
def test_fse_bad_grouping_is_rejected_without_change(kwargs, text):
    fse = mf.Fse()
    fse.register(1, 1.0, MBPS, group=0)
    before = fse_snapshot(fse)
    with pytest.raises(mf.InvalidValueError, match=text):
        fse.register(2, 1.0, MBPS, **kwargs)
    assert fse_snapshot(fse) == before


def test_fse_accepts_ipaddress_objects():
    import ipaddress

    fse = mf.Fse("active")
    a = ipaddress.ip_address("192.0.2.1")
    b = ipaddress.ip_address("192.0.2.2")
    g1, _ = fse.register(1, 1.0, MBPS, five_tuple=(a, b, 6, 1, 2))
    g2, _ = fse.register(2, 1.0, MBPS, five_tuple=("192.0.2.1", "192.0.2.2", 6, 1, 2))
    assert g1 == g2


def test_fse_bad_soft_state_timeout():
    with pytest.raises(mf.InvalidValueError, match="soft_state_timeout_s"):
        mf.Fse(soft_state_timeout_s=-1.0)
    with pytest.raises(mf.InvalidValueError, match="soft_state_timeout_s"):
        mf.Fse(soft_state_timeout_s=math.inf)


def test_reprs():
    g = mf.FseGroup("active")
    g.register(1, 1.0, MBPS)
    assert repr(g).startswith("FseGroup(algorithm='active', flows=1")
    assert repr(g.flow(1)) == (
        "FlowView(flow=1, priority=1.0, fse_rate_bps=1000000.0, desired_rate_bps=inf)"
    )
    assert repr(g.update(1, 2 * MBPS, now_ns=1)) == (
        "Outcome(rate_bps=2000000.0, assignments=[(1, 2000000.0)])"
    )
    fse = mf.Fse("passive", soft_state_timeout_s=1.5)
    fse.register(1, 1.0, MBPS, group=2)
    assert repr(fse) == "Fse(default_algorithm='passive', soft_state_timeout_s=1.5, groups=1, flows=1)"
    assert repr(fse.group(2)).startswith("FseGroupView(gid=2, algorithm='passive', flows=1")


def test_views_are_frozen_values():
    g = mf.FseGroup("active")
    g.register(1, 1.0, MBPS)
    v = g.flow(1)
    assert v == g.flows()[0]
    with pytest.raises(AttributeError):
        v.priority = 2.0  # type: ignore[misc]
