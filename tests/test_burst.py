"""The burst instrument (issue 11) in the flows table: ``max_burst_pkts`` and ``burst_hist`` (bucket
k counts bursts of 2**k to 2**(k+1) - 1 packets, the last of 1024 or more), and the run summary's
``max_burst_pkts``."""

import math

import pyarrow as pa
import pytest

from macroflow.metrics import SUMMARY_FIELDS, summarize
from macroflow.sim import Simulation, tables

BUCKETS = 11


def bucket_range(k):
    """The burst sizes bucket k holds: [lo, hi] (hi None for the open last bucket)."""
    return 2**k, (2 ** (k + 1) - 1 if k < BUCKETS - 1 else None)


def run(delayed_ack=True, size_bytes=None, coupled=False, until=10.0):
    s = Simulation(seed=1)
    d = s.dumbbell(2)
    flows = [
        s.add_tcp_flow(d["senders"][i], d["receivers"][i], start_s=0.5 * i, delayed_ack=delayed_ack, size_bytes=size_bytes)
        for i in range(2)
    ]
    if coupled:
        g = s.add_coupling_group("ccc_handover")
        for f in flows:
            s.couple(f, g, 1.0)
    s.sample_every(0.1, [d["bottleneck"]])
    s.run(until)
    return tables(s.results())


@pytest.mark.parametrize("delayed_ack", [True, False])
@pytest.mark.parametrize("coupled", [False, True])
def test_flows_table_has_consistent_burst_columns(delayed_ack, coupled):
    t = run(delayed_ack=delayed_ack, coupled=coupled)
    flows = t["flows"]
    assert flows.schema.field("max_burst_pkts").type == pa.int64()
    assert flows.schema.field("burst_hist").type == pa.list_(pa.int64())
    for f in flows.to_pylist():
        hist, mx = f["burst_hist"], f["max_burst_pkts"]
        assert len(hist) == BUCKETS and all(c >= 0 for c in hist)
        bursts = sum(hist)
        # Every data packet is in exactly one burst: bursts <= packets <= bursts * max.
        assert 0 < bursts <= f["data_pkts_sent"] <= bursts * mx
        # The largest burst falls in the highest non-empty bucket.
        top = max(k for k, c in enumerate(hist) if c)
        lo, hi = bucket_range(top)
        assert lo <= mx and (hi is None or mx <= hi), (mx, hist)
        # Each bucket's bursts hold at least its lower bound of packets each.
        assert sum(c * bucket_range(k)[0] for k, c in enumerate(hist)) <= f["data_pkts_sent"]
        if not coupled:
            # The initial window of 10 packets leaves as one burst. (A coupled flow's first window
            # is the coupler's answer, which may be larger.)
            assert mx >= 10 and hist[3] >= 1


def test_initial_window_and_slow_start_without_delayed_acks():
    # 150 segments, alone on the path (the second flow starts later and also sends 150): the initial
    # window (10) and then two packets per ACK, 70 times. Nothing is lost.
    t = run(delayed_ack=False, size_bytes=150 * 1448)
    f0 = t["flows"].to_pylist()[0]
    assert f0["fct_s"] is not None and f0["retransmits"] == 0
    assert f0["max_burst_pkts"] == 10
    assert f0["burst_hist"] == [0, 70, 0, 1, 0, 0, 0, 0, 0, 0, 0]


def test_summary_has_the_largest_burst_of_any_tcp_flow():
    t = run(until=5.0)
    s = summarize(t)
    assert "max_burst_pkts" in SUMMARY_FIELDS
    assert s["max_burst_pkts"] == max(t["flows"].column("max_burst_pkts").to_pylist())
    assert set(s) == set(SUMMARY_FIELDS)


def test_summary_without_tcp_flows_has_no_burst():
    s = Simulation(seed=1)
    d = s.dumbbell(1)
    s.add_udp_flow(d["senders"][0], d["receivers"][0], rate_bps=1e6)
    s.run(1.0)
    assert math.isnan(summarize(tables(s.results()))["max_burst_pkts"])
