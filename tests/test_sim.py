"""The simulator from Python: a run, its Arrow tables, coupling, and errors that name the parameter."""

import threading

import pyarrow as pa
import pytest

import macroflow as mf
from macroflow.sim import Simulation, SimulationError, tables


def dumbbell_run(seed=1, until=30.0, coupled=None):
    s = Simulation(seed=seed)
    d = s.dumbbell(2)
    flows = [s.add_tcp_flow(d["senders"][i], d["receivers"][i], start_s=0.01 * i) for i in range(2)]
    if coupled:
        g = s.add_coupling_group(coupled)
        s.couple(flows[0], g, 0.75)
        s.couple(flows[1], g, 0.25)
    s.sample_every(0.1, [d["bottleneck"]])
    s.run(until)
    return s, d


def test_a_run_fills_the_bottleneck_and_returns_arrow_tables():
    s, d = dumbbell_run()
    res = s.results()
    t = tables(res)
    assert set(t) == {"flows", "udp_flows", "media_flows", "links", "flow_samples", "queue_samples", "media_samples",
                      "detections", "detector_samples", "measured_groups"}
    assert all(isinstance(v, pa.Table) for v in t.values())
    links = t["links"].to_pylist()
    bn = links[d["bottleneck"]]
    assert bn["src"] == "R1" and bn["dst"] == "R2"
    assert bn["utilization"] > 0.9
    flows = t["flows"].to_pylist()
    assert sum(f["goodput_bps"] for f in flows) > 0.85 * 10e6
    p = res["packets"]
    assert p["created"] == p["delivered"] + p["dropped"] + p["in_flight"]
    assert t["queue_samples"].num_rows == 301
    assert t["flows"].schema.metadata[b"duration_s"] == b"30.0"


def test_same_seed_same_results():
    a = dumbbell_run(seed=3, until=10)[0].results()
    b = dumbbell_run(seed=3, until=10)[0].results()
    assert a == b


def test_coupled_flows_split_by_priority():
    s, _ = dumbbell_run(coupled="ccc", until=40)
    fs = tables(s.results())["flow_samples"].to_pylist()
    by_t = {}
    for r in fs:
        if r["t_s"] > 5 and r["state"] != "FR":
            by_t.setdefault(r["t_s"], {})[r["flow"]] = r["cwnd_pkts"]
    ratios = sorted(v[0] / v[1] for v in by_t.values() if len(v) == 2)
    assert ratios[len(ratios) // 2] == pytest.approx(3.0, rel=0.05)


def test_run_releases_the_gil():
    s = Simulation()
    d = s.dumbbell(1)
    s.add_tcp_flow(d["senders"][0], d["receivers"][0])
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    s.run(200.0)
    stop.set()
    t.join()
    assert len(ticks) > 5, "the other thread ran while the simulation did"


def test_invalid_parameters_name_the_parameter():
    s = Simulation()
    with pytest.raises(SimulationError, match=r"link\[0\]\.queue\.limit_pkts"):
        s.dumbbell(1, queue_pkts=0)
    with pytest.raises(SimulationError, match="bottleneck_rate_bps"):
        Simulation().dumbbell(1, bottleneck_rate_bps=-5)
    # Jitter: at most a second, not negative; a refused call leaves the topology as it was.
    s = Simulation()
    a, b = s.add_node("a"), s.add_node("b")
    with pytest.raises(SimulationError, match=r"link\[0\]\.jitter.*0 \.\.= 1 s"):
        s.add_link(a, b, 1e6, 0.01, jitter_s=1.5)
    with pytest.raises(SimulationError, match="jitter_s"):
        s.add_link(a, b, 1e6, 0.01, jitter_s=-1e-3)
    with pytest.raises(SimulationError, match="dumbbell.access_jitter"):
        s.dumbbell(2, access_jitter_s=2.0)
    with pytest.raises(SimulationError, match=r"parking_lot\.access\.jitter"):
        s.parking_lot(2, access_jitter_s=2.0)
    assert s.add_link(a, b, 1e6, 0.01, jitter_s=1.0) == 0
    s = Simulation()
    d = s.dumbbell(1)
    with pytest.raises(SimulationError, match=r"flow\[0\]\.src.*99"):
        s.add_tcp_flow(99, d["receivers"][0])
    with pytest.raises(mf.InvalidValueError, match="cc"):
        s.add_tcp_flow(d["senders"][0], d["receivers"][0], cc="bbr")
    with pytest.raises(SimulationError, match=r"flow\[0\]\.tcp\.mss"):
        s.add_tcp_flow(d["senders"][0], d["receivers"][0], mss=0)
    f = s.add_tcp_flow(d["senders"][0], d["receivers"][0])
    with pytest.raises(SimulationError, match="topology is fixed"):
        s.add_node("late")
    with pytest.raises(SimulationError, match="group"):
        s.couple(f, 7, 1.0)
    with pytest.raises(SimulationError, match="interval"):
        s.sample_every(0.0)


def test_pcap_capture_from_python(tmp_path):
    s = Simulation()
    d = s.dumbbell(1)
    s.add_tcp_flow(d["senders"][0], d["receivers"][0])
    path = tmp_path / "bn.pcap"
    s.capture(d["bottleneck"], path)
    s.run(1.0)
    s.flush_captures()
    data = path.read_bytes()
    assert data[:4] == bytes.fromhex("4d3cb2a1"), "nanosecond pcap magic, little-endian"
    sent = s.results()["links"]["tx_pkts"][d["bottleneck"]].as_py()
    assert sent > 100
    with pytest.raises(SimulationError, match="capture"):
        s.capture(d["bottleneck"], tmp_path / "no" / "such" / "dir.pcap")


def test_cross_traffic_and_web_workload_from_python():
    s = Simulation(seed=2)
    d = s.dumbbell(2)
    s.add_udp_flow(d["senders"][1], d["receivers"][1], kind="self_similar", load_bps=5e6)
    web = s.add_web_workload([(d["senders"][0], d["receivers"][0])], load_bps=2e6, end_s=30.0)
    assert len(web) > 50
    s.run(40.0)
    t = tables(s.results())
    udp = t["udp_flows"].to_pylist()[0]
    assert 2e6 < udp["throughput_bps"] < 8e6
    fcts = [f["fct_s"] for f in t["flows"].to_pylist() if f["fct_s"] is not None]
    assert len(fcts) > 0.95 * len(web)
    with pytest.raises(mf.InvalidValueError, match="kind"):
        s2 = Simulation()
        d2 = s2.dumbbell(1)
        s2.add_udp_flow(d2["senders"][0], d2["receivers"][0], kind="video")
    with pytest.raises(SimulationError, match="rate_bps"):
        s2.add_udp_flow(d2["senders"][0], d2["receivers"][0], kind="cbr")


def test_media_flows_and_fse_from_python():
    s = Simulation(seed=4)
    d = s.dumbbell(2)
    g = s.add_fse_group("conservative_active")
    ids = [s.add_media_flow(d["senders"][i], d["receivers"][i], controller="tfrc", packet_bytes=1000) for i in range(2)]
    s.couple_media(ids[0], g, 1.0)
    s.couple_media(ids[1], g, 0.5)
    s.sample_every(1.0)
    s.run(60.0)
    t = tables(s.results())
    m = t["media_flows"].to_pylist()
    assert m[0]["controller"] == "tfrc"
    got = {(r["flow"], r["t_s"]): r["received_bytes"] for r in t["media_samples"].to_pylist()}
    ratio = (got[(1, 60.0)] - got[(1, 20.0)]) / (got[(0, 60.0)] - got[(0, 20.0)])
    assert ratio == pytest.approx(0.5, abs=0.02), "after start-up the FSE splits 1 : 0.5"
    assert m[0]["mean_owd_s"] > 0.05
    assert t["media_samples"].num_rows == 2 * 61
    # Added after the run: it starts now at the earliest (a start in the past is refused).
    v = s.add_media_flow(d["senders"][0], d["receivers"][0], controller="nada", source="video", rate_bps=5e5, start_s=60.0)
    assert v == 2
    with pytest.raises(SimulationError, match="controller"):
        s.add_media_flow(d["senders"][0], d["receivers"][0], controller="bbr")
    with pytest.raises(SimulationError, match="rate_bps"):
        s.add_media_flow(d["senders"][0], d["receivers"][0], source="app_limited")
    with pytest.raises(mf.InvalidValueError, match="algorithm"):
        s.add_fse_group("fancy")
    with pytest.raises(SimulationError, match="delay_max"):
        s.couple_media(v, g, 1.0, delay_min_s=0.1, delay_max_s=0.05)
    # One FSE group per flow: a second coupling is refused (it left the first group claimed and
    # sent the flow's messages to a group it never registered with).
    g2 = s.add_fse_group("passive")
    with pytest.raises(SimulationError, match="one FSE group per flow"):
        s.couple_media(ids[0], g2, 1.0)
    t = s.add_tcp_flow(d["senders"][0], d["receivers"][0], start_s=61.0)
    s.couple_tcp_fse(t, g2, 1.0)  # g2 is not held for media flows by the refused coupling


def test_every_table_has_one_fixed_schema(tmp_path):
    """Issue 14: the tables' types were inferred from the values, so an empty table was all
    null-typed and a run whose flows never finish had a null-typed ``fct_s``: the Parquet schema
    changed from run to run. Each table's schema is now fixed in the bindings
    (crates/py/src/tables.rs): an empty simulation and a real run give identical schemas, with
    no null-typed column, on Arrow and through Parquet."""
    import pyarrow.parquet as pq
    from macroflow.sim import TABLES

    empty = tables(Simulation(seed=1).results())
    s = Simulation(seed=1)
    d = s.dumbbell(2, access_delays_s=[0.001, 0.04])
    # Bulk TCP flows (never finish) in a measured group (their paths' delays differ: detections),
    # a media flow and a UDP flow: every table gets rows.
    g = s.add_measured_group()
    for i in range(2):
        s.couple(s.add_tcp_flow(d["senders"][0], d["receivers"][i], start_s=0.1 * i), g, 1.0)
    s.add_media_flow(d["senders"][0], d["receivers"][0], controller="nada")
    s.add_udp_flow(d["senders"][1], d["receivers"][1], kind="cbr", rate_bps=1e6)
    s.sample_every(0.5, [d["bottleneck"]])
    s.run(10.0)
    full = tables(s.results())
    assert list(empty) == list(full) == list(TABLES)
    for name in TABLES:
        e, f = empty[name], full[name]
        assert e.num_rows == 0 and f.num_rows > 0, name
        assert e.schema.equals(f.schema), f"{name}: {e.schema} vs {f.schema}"
        assert not any(pa.types.is_null(c.type) for c in f.schema), name
        pq.write_table(e, tmp_path / f"{name}-empty.parquet")
        pq.write_table(f, tmp_path / f"{name}-full.parquet")
        read = [pq.read_schema(tmp_path / f"{name}-{k}.parquet").remove_metadata() for k in ("empty", "full")]
        assert read[0].equals(read[1]), name
    flows = full["flows"]
    assert flows.column("fct_s").null_count == flows.num_rows, "no flow finished"
    assert flows.schema.field("fct_s").type == pa.float64()
    # Null only where a value may be missing; an int is int64, a list of counts list<int64>.
    nullable = {(t, c.name) for t in TABLES for c in full[t].schema if c.nullable}
    assert nullable == {("flows", "fct_s"), ("flows", "mean_rtt_s"), ("media_flows", "mean_owd_s"), ("flow_samples", "srtt_s")} | {
        ("detector_samples", c) for c in ("auto", "auto_lo", "auto_hi", "cross", "cross_lo", "cross_hi")}
    assert flows.schema.field("flow").type == pa.int64()
    assert flows.schema.field("burst_hist").type == pa.list_(pa.int64())


def test_results_are_arrow_record_batches():
    """results() hands each table over as a pyarrow.RecordBatch (built in Rust, imported through
    the Arrow C data interface), beside the run-wide figures."""
    s, d = dumbbell_run(until=2.0)
    r = s.results()
    assert all(isinstance(r[name], pa.RecordBatch) for name in ("flows", "links", "flow_samples"))
    assert r["links"]["tx_pkts"][d["bottleneck"]].as_py() > 0
    assert isinstance(r["events"], int) and isinstance(r["duration_s"], float)


@pytest.mark.parametrize("algorithm", ["active", "conservative_active", "passive"])
def test_media_priority_change_moves_the_split(algorithm):
    """Seed 003 Fig. 5.13 / 6.6: lowering flow 0's priority to 0.25 at 30 s moves the FSE's split
    from 1 : 1 to 0.25 : 1 (active algorithms at once, passive ones at the flows' next UPDATE)."""
    s = Simulation(seed=7)
    d = s.dumbbell(2)
    g = s.add_fse_group(algorithm)
    ids = [s.add_media_flow(d["senders"][i], d["receivers"][i], controller="rap", packet_bytes=1000) for i in range(2)]
    for f in ids:
        s.couple_media(f, g, 1.0)
    s.set_media_priority_at(30.0, ids[0], 0.25)
    s.sample_every(1.0)
    s.run(70.0)
    got = {(r["flow"], r["t_s"]): r["received_bytes"] for r in tables(s.results())["media_samples"].to_pylist()}

    def ratio(a: float, b: float) -> float:
        return (got[(0, b)] - got[(0, a)]) / (got[(1, b)] - got[(1, a)])

    assert ratio(10.0, 29.0) == pytest.approx(1.0, abs=0.03), "equal priorities share equally"
    assert ratio(40.0, 70.0) == pytest.approx(0.25, abs=0.03), "after the change the split is 0.25 : 1"


def test_media_priority_change_refuses_bad_input():
    s = Simulation(seed=1)
    d = s.dumbbell(2)
    g = s.add_fse_group("active")
    a = s.add_media_flow(d["senders"][0], d["receivers"][0], controller="rap")
    b = s.add_media_flow(d["senders"][1], d["receivers"][1], controller="rap")
    s.couple_media(a, g, 1.0)
    with pytest.raises(SimulationError, match="FSE group"):
        s.set_media_priority_at(1.0, b, 0.5)  # b is not coupled
    with pytest.raises(SimulationError, match="flow"):
        s.set_media_priority_at(1.0, 99, 0.5)
    with pytest.raises(SimulationError, match="priority"):
        s.set_media_priority_at(1.0, a, 0.0)
    s.run(2.0)
    with pytest.raises(SimulationError, match="at"):
        s.set_media_priority_at(1.0, a, 0.5)  # in the past


def test_media_timer_events_grow_linearly_with_the_run():
    """Issue 18: a media flow's timer event superseded by an earlier one was served when it
    fired and re-armed the timer, so every superseded event started one more self-repeating
    chain (RAP's timeout moves earlier as its SRTT falls): five RAP flows under Algorithm 1 at a
    10 ms RTT took 5.8 s of CPU for 60 s and 59 s for 120 s. Events must grow with the run's
    length, not faster."""
    def events(t_s: float) -> int:
        s = Simulation(seed=1)
        d = s.dumbbell(5, bottleneck_delay_s=0.003, queue_pkts=13, access_delays_s=[0.001] * 5)
        g = s.add_fse_group("active")
        for i in range(5):
            f = s.add_media_flow(d["senders"][i], d["receivers"][i], controller="rap", packet_bytes=1000, start_s=0.01 * i)
            s.couple_media(f, g, 1.0)
        s.run(t_s)
        return s.results()["events"]

    a, b = events(20.0), events(60.0)
    assert b < 3.3 * a, (a, b)
