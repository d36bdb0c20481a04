"""The TCB interdependence cache bindings (RFC 9040). Cases mirror crates/coupling/src/tcb.rs."""

import ipaddress
import math

import pytest

import macroflow as mf

PEER = "192.0.2.1"
S = 1_000_000_000  # ns


def none_init(init):
    return all(
        getattr(init, f) is None
        for f in ("mss", "pmtu", "srtt_s", "rttvar_s", "rto_s", "cwnd_pkts", "ssthresh_pkts")
    )


def test_defaults():
    c = mf.TcbCache()
    assert (c.share_congestion, c.expiry_s, c.min_mss, c.min_rto_s) == (False, 600.0, 536, 1.0)
    assert (c.min_ssthresh_pkts, c.initial_window_pkts) == (2.0, 10.0)
    assert len(c) == 0
    assert none_init(c.lookup(PEER, 0))
    assert repr(c) == (
        "TcbCache(share_congestion=False, expiry_s=600.0, min_mss=536, min_rto_s=1.0, "
        "min_ssthresh_pkts=2.0, initial_window_pkts=10.0, entries=0)"
    )


def test_temporal_sharing_merges_rtt_by_mean_and_hides_congestion_state_by_default():
    c = mf.TcbCache()
    assert none_init(c.open(PEER, 1, 0))
    c.close(PEER, 1, 0, srtt_s=0.1, rttvar_s=0.02, cwnd_pkts=40.0, ssthresh_pkts=30.0)
    c.open(PEER, 2, 0)
    c.close(PEER, 2, 0, srtt_s=0.2, rttvar_s=0.04, cwnd_pkts=40.0, ssthresh_pkts=30.0)
    init = c.lookup(PEER, 0)
    assert init.srtt_s == pytest.approx(0.15)
    assert init.rttvar_s == pytest.approx(0.03)
    assert init.rto_s == 1.0, "150 + 4*30 ms is below the 1 s minimum"
    assert (init.cwnd_pkts, init.ssthresh_pkts) == (None, None), "cwnd/ssthresh are opt-in"


def test_opt_in_congestion_sharing_temporal_and_ensemble():
    c = mf.TcbCache(share_congestion=True)
    c.open(PEER, 1, 0)
    c.close(PEER, 1, 0, cwnd_pkts=40.0, ssthresh_pkts=30.0)
    init = c.open(PEER, 2, 0)
    assert (init.cwnd_pkts, init.ssthresh_pkts) == (40.0, 30.0)
    c.on_cwnd(PEER, 2, 60.0, 0)
    assert c.open(PEER, 3, 0).cwnd_pkts == 30.0, "fair share 60 / 2"
    c.on_cwnd(PEER, 3, 4.0, 0)
    c.on_cwnd(PEER, 2, 4.0, 0)
    assert c.open(PEER, 4, 0).cwnd_pkts is None, "(4 + 4) / 3 < IW = 10: not used"


def test_ensemble_rtt_follows_rfc6298():
    c = mf.TcbCache()
    c.on_rtt_sample(PEER, 0.1, 0)
    c.on_rtt_sample(PEER, 0.2, 0)
    init = c.lookup(PEER, 0)
    assert init.srtt_s == pytest.approx(0.1125, abs=1e-12)
    assert init.rttvar_s == pytest.approx(0.0625, abs=1e-12)
    assert init.rto_s == 1.0


def test_values_below_minimum_defaults_are_not_used():
    c = mf.TcbCache(share_congestion=True)
    c.on_mss_option(PEER, 200, 0)
    c.on_pmtu(PEER, 300, 0)
    c.open(PEER, 1, 0)
    c.close(PEER, 1, 0, cwnd_pkts=3.0, ssthresh_pkts=1.0)
    assert none_init(c.lookup(PEER, 0))
    c.on_mss_option(PEER, 1460, 0)
    c.on_pmtu(PEER, 1500, 0)
    init = c.lookup(PEER, 0)
    assert (init.mss, init.pmtu) == (1460, 1500)


def test_config_minimums_apply():
    c = mf.TcbCache(min_mss=1000, min_rto_s=0.2)
    c.on_mss_option(PEER, 900, 0)
    c.on_rtt_sample(PEER, 0.1, 0)
    init = c.lookup(PEER, 0)
    assert init.mss is None
    assert init.rto_s == pytest.approx(0.3), "SRTT + 4 * RTTVAR = 100 + 4 * 50 ms"


def test_entries_expire_unless_connections_are_open():
    c = mf.TcbCache(expiry_s=10.0)
    c.on_mss_option(PEER, 1460, 0)
    assert c.lookup(PEER, 10 * S).mss == 1460
    assert c.lookup(PEER, 11 * S).mss is None
    c.open(PEER, 1, 11 * S)
    assert c.expire(100 * S) == 0, "an entry with an open connection stays"
    c.close(PEER, 1, 100 * S)
    assert c.expire(111 * S) == 1
    assert len(c) == 0


def test_ports_and_address_forms_select_peers():
    c = mf.TcbCache()
    c.on_mss_option(PEER, 1400, 0, port=443)
    c.on_mss_option(ipaddress.ip_address(PEER), 1300, 0)
    assert c.lookup(PEER, 0, port=443).mss == 1400
    assert c.lookup(PEER, 0).mss == 1300
    assert c.lookup(PEER, 0, port=80).mss is None
    assert len(c) == 2
    c.on_mss_option("2001:db8::1", 1220, 0)
    assert c.lookup("2001:db8::1", 0).mss == 1220


def test_bad_input_is_rejected_without_change():
    c = mf.TcbCache()
    with pytest.raises(mf.InvalidValueError, match="rtt sample"):
        c.on_rtt_sample(PEER, 0.0, 0)
    with pytest.raises(mf.InvalidValueError, match="rtt_s"):
        c.on_rtt_sample(PEER, -0.1, 0)
    with pytest.raises(mf.InvalidValueError, match="rtt_s"):
        c.on_rtt_sample(PEER, math.nan, 0)
    with pytest.raises(mf.InvalidValueError, match="invalid mss: got 0"):
        c.on_mss_option(PEER, 0, 0)
    with pytest.raises(mf.InvalidValueError, match="pmtu"):
        c.on_pmtu(PEER, 0, 0)
    with pytest.raises(mf.UnknownFlowError):
        c.close(PEER, 1, 0)
    assert len(c) == 0
    c.open(PEER, 1, 0)
    with pytest.raises(mf.DuplicateFlowError):
        c.open(PEER, 1, 0)
    with pytest.raises(mf.InvalidValueError, match="cwnd_pkts"):
        c.on_cwnd(PEER, 1, math.nan, 0)
    with pytest.raises(mf.UnknownFlowError):
        c.on_cwnd(PEER, 2, 10.0, 0)
    with pytest.raises(mf.InvalidValueError, match="cwnd_pkts"):
        c.close(PEER, 1, 0, cwnd_pkts=-1.0)
    with pytest.raises(mf.InvalidValueError, match="srtt_s"):
        c.close(PEER, 1, 0, srtt_s=-1.0)
    with pytest.raises(mf.InvalidValueError, match="invalid addr: got '192.0.2'"):
        c.open("192.0.2", 3, 0)
    with pytest.raises(mf.InvalidValueError, match="port: got 70000"):
        c.open(PEER, 3, 0, port=70000)
    assert none_init(c.lookup(PEER, 0))
    c.close(PEER, 1, 0)  # still open after the bad close
    with pytest.raises(mf.UnknownFlowError):
        c.close(PEER, 1, 0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"expiry_s": -1.0}, "expiry_s"),
        ({"min_rto_s": math.inf}, "min_rto_s"),
        ({"min_ssthresh_pkts": math.nan}, "min_ssthresh_pkts"),
        ({"initial_window_pkts": -1.0}, "initial_window_pkts"),
    ],
)
def test_bad_config_is_rejected(kwargs, field):
    with pytest.raises(mf.InvalidValueError, match=field):
        mf.TcbCache(**kwargs)


def test_tcb_init_repr():
    c = mf.TcbCache()
    c.on_mss_option(PEER, 1460, 0)
    assert repr(c.lookup(PEER, 0)) == (
        "TcbInit(mss=1460, pmtu=None, srtt_s=None, rttvar_s=None, rto_s=None, "
        "cwnd_pkts=None, ssthresh_pkts=None)"
    )
