"""Every queue discipline reachable from Python does what it is for, as the results show it."""

import pytest

from macroflow import Simulation, SimulationError
from macroflow.sim import tables


def _dumbbell(queue, pairs=2, seed=1, delays=None, rate=10e6):
    s = Simulation(seed=seed)
    d = s.dumbbell(pairs, bottleneck_rate_bps=rate, queue=queue, access_delays_s=delays)
    return s, d


def _bottleneck(s, d):
    return next(l for l in tables(s.results())["links"].to_pylist() if l["link"] == d["bottleneck"])


def _tcp(queue, n=4, duration=40.0, delays=None):
    s, d = _dumbbell(queue, pairs=max(n, 2), delays=delays)
    for i in range(n):
        s.add_tcp_flow(d["senders"][i], d["receivers"][i], start_s=0.1 * i)
    s.run(duration)
    return s, d


def test_red_keeps_the_average_queue_well_below_drop_tail():
    s, d = _tcp({"kind": "drop_tail", "limit_pkts": 83})
    s2, d2 = _tcp({"kind": "red", "limit_pkts": 83})
    tail, red = _bottleneck(s, d), _bottleneck(s2, d2)
    assert red["mean_queue_pkts"] < 0.5 * tail["mean_queue_pkts"], (red, tail)
    assert red["utilization"] > 0.85


def test_drr_shares_equally_where_drop_tail_favours_the_short_rtt():
    # RTT about 100 ms against 150 ms, and a buffer of about two BDPs: DRR equalizes service
    # only while both flows are backlogged, which a long-RTT flow cannot keep up with a buffer
    # much smaller than its BDP (then it gets more than under drop-tail, but not half).
    delays = [0.001, 0.025]
    res = {}
    for name, q in (("tail", {"kind": "drop_tail", "limit_pkts": 300}), ("drr", {"kind": "drr", "limit_pkts": 300})):
        s, d = _tcp(q, n=2, duration=60.0, delays=delays)
        g = [f["goodput_bps"] for f in tables(s.results())["flows"].to_pylist()]
        res[name] = g[0] / g[1]
    assert res["tail"] > 1.5, res
    assert 0.8 < res["drr"] < 1.25, res


def test_loss_period_drops_only_inside_its_window():
    s, d = _dumbbell({"kind": "loss_period", "p": 0.5, "start_s": 5.0, "end_s": 10.0,
                      "inner": {"kind": "drop_tail", "limit_pkts": 1000}})
    s.add_udp_flow(d["senders"][0], d["receivers"][0], rate_bps=1e6, pkt_bytes=1000)  # 125 packets/s
    s.run(15.0)
    link = _bottleneck(s, d)
    in_window = 5.0 * 125
    assert link["offered_pkts"] == pytest.approx(15 * 125, abs=2)
    assert link["dropped_pkts"] == pytest.approx(0.5 * in_window, abs=4 * (in_window * 0.25) ** 0.5)
    s2, d2 = _dumbbell({"kind": "loss_period", "p": 0.5, "start_s": 20.0, "end_s": 30.0,
                        "inner": {"kind": "drop_tail", "limit_pkts": 1000}})
    s2.add_udp_flow(d2["senders"][0], d2["receivers"][0], rate_bps=1e6, pkt_bytes=1000)
    s2.run(15.0)
    assert _bottleneck(s2, d2)["dropped_pkts"] == 0


def test_token_bucket_colours_and_rio_treats_out_of_profile_harder():
    def rio_behind_marker(rate_bps):
        return {"kind": "token_bucket", "rate_bps": rate_bps, "bucket_bytes": 15000, "inner": {
            "kind": "rio", "limit_pkts": 200, "in_min_th_pkts": 40, "in_max_th_pkts": 120, "in_max_p": 0.02,
            "out_min_th_pkts": 5, "out_max_th_pkts": 15, "out_max_p": 0.5}}

    all_in, d1 = _tcp(rio_behind_marker(1e12), duration=30.0)   # every packet conforms: In curve
    all_out, d2 = _tcp(rio_behind_marker(1e3), duration=30.0)   # nothing conforms: Out curve
    q_in, q_out = _bottleneck(all_in, d1)["mean_queue_pkts"], _bottleneck(all_out, d2)["mean_queue_pkts"]
    assert q_out < 20 < q_in, (q_in, q_out)


def test_wrr_serves_dscp_classes_by_weight():
    q = {"kind": "wrr", "default_class": 1, "classes": [
        {"dscps": [46], "weight": 3, "queue": {"kind": "drop_tail", "limit_pkts": 100}},
        {"dscps": [0], "weight": 1, "queue": {"kind": "drop_tail", "limit_pkts": 100}}]}
    s, d = _dumbbell(q)
    s.add_udp_flow(d["senders"][0], d["receivers"][0], rate_bps=8e6, pkt_bytes=1000, dscp=46)
    s.add_udp_flow(d["senders"][1], d["receivers"][1], rate_bps=8e6, pkt_bytes=1000, dscp=0)
    s.run(20.0)
    u = [f["throughput_bps"] for f in tables(s.results())["udp_flows"].to_pylist()]
    assert u[0] == pytest.approx(7.5e6, rel=0.05) and u[1] == pytest.approx(2.5e6, rel=0.08), u


@pytest.mark.parametrize("spec, needle", [
    ({"kind": "wrr", "classes": [{"dscps": [0], "weight": 1}]}, "queue.classes[0]: missing field `queue`"),
    ({"kind": "wrr", "classes": [{"dscps": [0], "weight": 1, "queue": {"kind": "drop_tail", "limit_pkts": 5}, "x": 1}]},
     "queue.classes[0].x: unknown field `x`"),
    ({"kind": "token_bucket", "rate_bps": 1e6, "bucket_bytes": 100}, "queue: missing field `inner`"),
    ({"kind": "rio", "limit_pkts": 10, "in_min_th_pkts": 1, "in_max_th_pkts": 2, "in_max_p": 0.1}, "queue: missing field `out_min_th_pkts`"),
    ({"kind": "drr"}, "queue: missing field `limit_pkts`"),
    ({"kind": "red", "limit_pkts": 10, "gentle": "yes"}, 'queue.gentle: invalid type: string "yes", expected a boolean'),
    ({"limit_pkts": 10}, "queue: missing field `kind`"),
])
def test_bad_specs_name_the_key_and_change_nothing(spec, needle):
    s = Simulation()
    a, b = s.add_node("a"), s.add_node("b")
    with pytest.raises(SimulationError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        s.add_link(a, b, 1e6, 0.01, queue=spec)
    # Nothing was added: the next link and node get the ids they would have had.
    assert s.add_link(a, b, 1e6, 0.01) == 0 and s.add_node("c") == 2


def test_parking_lot_chain_and_a_failed_builder_leaves_the_topology_unchanged():
    s = Simulation()
    with pytest.raises(SimulationError, match="max_p"):
        s.parking_lot(2, queue={"kind": "red", "limit_pkts": 10, "max_p": 2.0})
    p = s.parking_lot(2)
    assert len(p["hosts"]) == 3 and len(p["routers"]) == 3 and len(p["hops"]) == 2
    assert p["hosts"][0] == 1  # R0 is node 0, as in a fresh simulation
    f = s.add_tcp_flow(p["hosts"][0], p["hosts"][2])
    s.sample_every(0.1, p["hops"])
    s.run(5.0)
    t = tables(s.results())
    assert t["flows"].to_pylist()[f]["delivered_bytes"] > 0
    assert sorted(set(t["queue_samples"].column("link").to_pylist())) == sorted(p["hops"])
