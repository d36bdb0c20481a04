"""Scenario files: validation with field paths, and running one."""

import pathlib

import pytest

from macroflow.scenario import ScenarioError, load, parse, run

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASE = """
name = "t"
duration_s = 5.0
[topology]
pairs = 2
[[flows]]
type = "tcp"
pair = 0
"""


def test_shipped_scenarios_validate_and_run():
    files = sorted((ROOT / "scenarios").glob("*.toml"))
    assert len(files) >= 8, "scenarios/ ships an example of every feature"
    for f in files:
        sc = load(f).model_copy(update={"duration_s": 5.0})
        t = run(sc)
        delivered = (
            sum(x["delivered_bytes"] for x in t["flows"].to_pylist())
            + sum(x["received_bytes"] for x in t["media_flows"].to_pylist())
            + sum(x["received_bytes"] for x in t["udp_flows"].to_pylist())
        )
        assert delivered > 0, f.name
    sc = load(ROOT / "scenarios" / "coupled_vs_uncoupled_dumbbell.toml").model_copy(update={"duration_s": 20.0})
    t = run(sc)
    flows = t["flows"].to_pylist()
    assert len(flows) == 2 and all(f["goodput_bps"] > 0 for f in flows)
    assert t["media_flows"].num_rows == 1 and t["udp_flows"].num_rows == 1
    assert t["queue_samples"].num_rows == 201


def test_every_scenario_feature_has_a_commented_example():
    text = "\n".join(f.read_text() for f in sorted((ROOT / "scenarios").glob("*.toml")))
    for needle in ('kind = "dumbbell"', 'kind = "parking_lot"', 'kind = "graph"', 'kind = "red"', 'kind = "rio"',
                   'kind = "token_bucket"', 'kind = "wrr"', 'kind = "drr"', 'kind = "loss_period"', 'kind = "random_drop"',
                   'type = "web"', 'type = "udp"', 'type = "media"', "size_bytes", "dscp", "measure_links",
                   "priority_changes", "pauses", "delay_max_s", 'kind = "none"', 'source = "video"', 'source = "app_limited"',
                   'kind = "self_similar"', 'cc = "cubic"', "duplex", "access", "sample_interval_s",
                   "max_burst_pkts", "delayed_ack", "fse_delay_min_s", "access_jitter_s"):
        assert needle in text, f"no example of {needle}"
    for f in sorted((ROOT / "scenarios").glob("*.toml")):
        assert f.read_text().startswith("#"), f"{f.name} starts with a comment saying what it shows"


@pytest.mark.parametrize(
    "extra, path, needle",
    [
        ("seed = -1", "seed", "greater than or equal to 0"),
        ("colour = 3", "colour", "Extra inputs are not permitted"),
        ('[[flows]]\ntype = "tcp"\npair = 5', "flows", "the dumbbell has 2 pairs"),
        ('[[flows]]\ntype = "quic"\npair = 0', "flows.1", "does not match any of the expected tags"),
        ('[[flows]]\ntype = "media"\npair = 1\ncontroller = "bbr"', "flows.1.controller", "Input should be"),
        ('[[flows]]\ntype = "tcp"\npair = 1\ngroup = "nope"', "(top level)", "is not one of the groups"),
        ('[[groups]]\nname = "g"\nkind = "fancy"', "groups.0", "neither a TCP coupler"),
    ],
)
def test_mistakes_name_the_file_and_field(extra, path, needle):
    # Top-level keys must come before the tables in TOML: put scalar extras first.
    text = (extra + "\n" + BASE) if "=" in extra.split("\n")[0] and not extra.startswith("[") else (BASE + extra)
    with pytest.raises(ScenarioError) as e:
        parse(text, "my.toml")
    msg = str(e.value)
    assert msg.startswith("my.toml: invalid scenario"), msg
    assert path in msg and needle in msg, msg


def test_not_toml_and_missing_file():
    with pytest.raises(ScenarioError, match="my.toml: not valid TOML"):
        parse("name = ", "my.toml")
    with pytest.raises(ScenarioError, match="cannot read"):
        load(ROOT / "scenarios" / "missing.toml")


def test_tcp_flow_in_fse_group_is_accepted_but_not_beside_media_flows():
    # TCP flows may join an FSE group (seed 003 Fig. 6.3; tests/test_tcp_fse.py), media flows
    # too, but not both in one group.
    text = BASE + '[[groups]]\nname = "f"\nkind = "passive"\n[[flows]]\ntype = "tcp"\npair = 1\ngroup = "f"\n'
    assert parse(text, "x.toml").flows[1].group == "f"
    with pytest.raises(ScenarioError, match="FSE group 'f' has both TCP and media flows"):
        parse(text + '[[flows]]\ntype = "media"\npair = 0\ngroup = "f"\n', "x.toml")


@pytest.mark.parametrize(
    "text, path, needle",
    [
        (BASE.replace("pair = 0", 'src = "a"\ndst = "b"'), "(top level)", "on a dumbbell give pair"),
        (BASE.replace("pairs = 2", 'pairs = 2\nqueue = {kind = "red"}'), "topology.queue", "give exactly one of limit_pkts and limit_bytes"),
        (BASE.replace("pairs = 2", 'pairs = 2\nqueue = {kind = "red", limit_pkts = 10, max_p = 3}'), "topology.queue", "max_p"),
        (BASE.replace("pairs = 2", 'pairs = 2\nqueue_pkts = 5\nqueue = {kind = "drr", limit_pkts = 10}'), "topology", "not both"),
        (BASE.replace("pairs = 2", 'pairs = 2\nqueue = {kind = "fifo"}'), "topology.queue", "unknown queue kind"),
        (BASE.replace('name = "t"', 'name = "t"\nmeasure_links = ["hop0"]'), "(top level)", "'hop0' is not a link of the dumbbell"),
        (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "parking_lot"\nhops = 2'), "(top level)", "give src and dst"),
        (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "parking_lot"\nhops = 2').replace("pair = 0", 'src = "H0"\ndst = "H9"'),
         "(top level)", "'H9' is not a node of the parking_lot"),
        (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "graph"\nnodes = ["a", "b"]\n[[topology.links]]\nfrom = "a"\nto = "c"\nrate_bps = 1e6\ndelay_s = 0.01'),
         "topology", "'c' is not one of the nodes"),
        (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "graph"\nnodes = ["a", "b"]\n[[topology.links]]\nfrom = "a"\nto = "a"\nrate_bps = 1e6\ndelay_s = 0.01'),
         "topology.links.0", "to itself"),
        (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "ring"'), "topology", "does not match any of the expected tags"),
        (BASE + '[[flows]]\ntype = "web"\npair = 1', "flows.1.load_bps", "Field required"),
    ],
)
def test_new_fields_name_their_path(text, path, needle):
    with pytest.raises(ScenarioError) as e:
        parse(text, "x.toml")
    msg = str(e.value)
    assert f"  {path}" in msg and needle in msg, msg


def test_group_none_runs_uncoupled_and_ignores_priorities():
    text = BASE.replace("pair = 0", 'pair = 0\ngroup = "g"\npriority = 3.0') + (
        '[[flows]]\ntype = "tcp"\npair = 1\ngroup = "g"\n[[groups]]\nname = "g"\nkind = "none"\n'
        "[[priority_changes]]\nat_s = 2.0\nflow = 1\npriority = 5.0\n"
    )
    coupled_none = run(parse(text))
    plain = run(parse(text.replace('group = "g"\n', "").split("[[groups]]")[0]))
    assert coupled_none["flows"].equals(plain["flows"])


def test_graph_routes_flows_by_name_and_measures_named_links():
    sc = load(ROOT / "scenarios" / "graph_two_bottlenecks.toml").model_copy(update={"duration_s": 20.0})
    t = run(sc)
    g = {f["flow"]: f["goodput_bps"] for f in t["flows"].to_pylist()}
    # s1 -> d1 is held to the 4 Mbit/s b->c link; s2 -> d2 takes the rest of a->b.
    assert 2.5e6 < g[0] < 4.1e6 and 5e6 < g[1] < 10e6 and g[0] + g[1] < 10.1e6
    assert len(set(t["queue_samples"].column("link").to_pylist())) == 2


def test_shipped_scenarios_are_found_by_name_and_only_by_name(tmp_path, monkeypatch):
    """Issue 14: outside a checkout, ``scenarios/NAME.toml``, ``NAME.toml`` and ``NAME`` find the
    shipped file; a missing file elsewhere (a mistyped path to an edited copy) stays an error
    rather than running the shipped original (the review of issue 14)."""
    from macroflow.scenario import SHIPPED, ScenarioError, find, load
    monkeypatch.chdir(tmp_path)  # no scenarios/ here
    for name in ("scenarios/red_queue.toml", "red_queue.toml", "red_queue"):
        assert find(name) == SHIPPED / "red_queue.toml"
    for missing in ("my_runs/red_queue.toml", str(tmp_path / "x" / "red_queue.toml")):
        with pytest.raises(ScenarioError, match="cannot read"):
            load(missing)
    with pytest.raises(ScenarioError, match="cannot read"):
        load("a" * 300 + ".toml")  # name too long: one line, not a traceback
    (tmp_path / "red_queue.toml").write_text((SHIPPED / "red_queue.toml").read_text().replace("red-queue", "mine"))
    assert load("red_queue.toml").name == "mine"  # a file of that path comes first


def _joiner(max_burst: str) -> str:
    return f"""
name = "j"
duration_s = 12.0
[topology]
pairs = 2
[[groups]]
name = "g"
kind = "ccc"
{max_burst}
[[flows]]
type = "tcp"
pair = 0
group = "g"
[[flows]]
type = "tcp"
pair = 1
start_s = 8.0
group = "g"
"""


def test_a_groups_burst_limit_lets_a_joiner_send_its_share_at_once():
    """Seed 003 Figs. 7.1(a), 9.3: the dissertation's ctrlTCP without ack-clocking handed a joiner
    its share as one burst; max_burst_pkts lets a scenario run that (0, the default, never)."""
    limited = run(parse(_joiner(""), "a.toml"))["flows"].to_pylist()
    unlimited = run(parse(_joiner("max_burst_pkts = 1e6"), "b.toml"))["flows"].to_pylist()
    assert limited[1]["max_burst_pkts"] <= 10, limited[1]
    assert unlimited[1]["max_burst_pkts"] >= 25, unlimited[1]


def test_delayed_acks_off_sends_an_ack_per_segment():
    def acks(extra: str) -> float:
        t = run(parse(BASE + extra, "d.toml"))
        links = {l["link"]: l for l in t["links"].to_pylist()}
        fwd = max(links.values(), key=lambda l: l["tx_bytes"])
        rev = [l for l in links.values() if l is not fwd and l["rate_bps"] == fwd["rate_bps"]][0]
        return rev["tx_pkts"] / fwd["tx_pkts"]

    assert acks("") == pytest.approx(0.5, abs=0.08)
    # Not exactly 1: the forward count includes segments the bottleneck then dropped.
    assert acks("delayed_ack = false\n") == pytest.approx(1.0, abs=0.1)


def test_a_flows_own_fse_delay_replaces_the_groups(monkeypatch):
    import macroflow.scenario as scen

    seen = []

    class Spy:
        def __init__(self, **kw):
            self._s = Real(**kw)

        def __getattr__(self, name):
            return getattr(self._s, name)

        def couple_media(self, flow, group, priority, delay_min_s=0.0, delay_max_s=0.0):
            seen.append((flow, delay_min_s, delay_max_s))
            return self._s.couple_media(flow, group, priority, delay_min_s=delay_min_s, delay_max_s=delay_max_s)

        def couple_tcp_fse(self, flow, group, priority, delay_min_s=0.0, delay_max_s=0.0):
            seen.append(("tcp", flow, delay_min_s, delay_max_s))
            return self._s.couple_tcp_fse(flow, group, priority, delay_min_s=delay_min_s, delay_max_s=delay_max_s)

    Real = scen.Simulation
    monkeypatch.setattr(scen, "Simulation", Spy)
    text = """
name = "f"
duration_s = 3.0
[topology]
pairs = 2
[[groups]]
name = "g"
kind = "simple_passive"
delay_min_s = 0.01
delay_max_s = 0.01
[[flows]]
type = "media"
pair = 0
group = "g"
fse_delay_min_s = 0.001
fse_delay_max_s = 0.1
[[flows]]
type = "media"
pair = 1
group = "g"
"""
    run(parse(text, "f.toml"))
    assert seen == [(0, 0.001, 0.1), (1, 0.01, 0.01)]
    seen.clear()
    tcp = text.replace('type = "media"', 'type = "tcp"')
    run(parse(tcp, "t.toml"))
    assert seen == [("tcp", 0, 0.001, 0.1), ("tcp", 1, 0.01, 0.01)]


@pytest.mark.parametrize("extra, needle", [
    ('[[flows]]\ntype = "tcp"\npair = 1\nfse_delay_min_s = 0.1', "together"),
    ('[[flows]]\ntype = "tcp"\npair = 1\nfse_delay_min_s = 0.1\nfse_delay_max_s = 0.1', "in an FSE group"),
    ('[[groups]]\nname = "g"\nkind = "ccc"\n[[flows]]\ntype = "tcp"\npair = 1\ngroup = "g"\nfse_delay_min_s = 0.1\n'
     'fse_delay_max_s = 0.1', "in an FSE group"),
    ('[[groups]]\nname = "g"\nkind = "passive"\n[[flows]]\ntype = "media"\npair = 1\ngroup = "g"\nfse_delay_min_s = 0.2\n'
     'fse_delay_max_s = 0.1', "must be >="),
    ('[[groups]]\nname = "g"\nkind = "passive"\nmax_burst_pkts = 4', "for TCP coupler groups"),
    ('[[groups]]\nname = "g"\nkind = "ccc"\nmax_burst_pkts = -1', "greater than or equal to 0"),
    ('[[groups]]\nname = "g"\nkind = "ccc"\ndelay_max_s = 0.1', "for FSE groups"),
])
def test_the_new_coupling_fields_refuse_misuse(extra, needle):
    with pytest.raises(ScenarioError, match=needle):
        parse(BASE + extra, "x.toml")


JITTERED = {
    "dumbbell": (BASE.replace("pairs = 2", "pairs = 2\naccess_jitter_s = {j}") + '[[flows]]\ntype = "tcp"\npair = 1\n'),
    "parking_lot": (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "parking_lot"\nhops = 2\naccess_jitter_s = {j}')
                    .replace("pair = 0", 'src = "H0"\ndst = "H2"') + '[[flows]]\ntype = "tcp"\nsrc = "H1"\ndst = "H2"\n'),
    "graph": (BASE.replace("[topology]\npairs = 2", '[topology]\nkind = "graph"\nnodes = ["a", "b", "c"]\n'
                           'links = [{{from = "a", to = "b", rate_bps = 1e9, delay_s = 0.001, jitter_s = {j}}}, '
                           '{{from = "c", to = "b", rate_bps = 1e9, delay_s = 0.001, jitter_s = {j}}}]')
              .replace("pair = 0", 'src = "a"\ndst = "c"') + '[[flows]]\ntype = "tcp"\nsrc = "c"\ndst = "a"\n'),
}


@pytest.mark.parametrize("kind", sorted(JITTERED))
def test_jitter_reaches_the_simulator_and_a_seed_repeats_it(kind):
    """The hosts' sending jitter (the graph: a link's): zero is the file without it, bit for bit;
    any other value moves the packets (tests in crates/sim/tests/jitter.rs check how), and one seed
    gives one run."""
    text = JITTERED[kind]
    plain = run(parse(text.format(j=0.0)))
    if kind != "graph":
        assert plain["flows"].equals(run(parse(text.replace("access_jitter_s = {j}\n", "").format(j=0.0)))["flows"])
    a, b = run(parse(text.format(j=0.0005))), run(parse(text.format(j=0.0005)))
    assert a["flows"].equals(b["flows"]) and a["flow_samples"].equals(b["flow_samples"])
    assert not a["flows"].equals(plain["flows"])


@pytest.mark.parametrize("value, needle", [(-1e-6, "greater than or equal to 0"), (1.5, "less than or equal to 1")])
def test_jitter_out_of_range_names_its_field(value, needle):
    for kind, path in (("dumbbell", "topology.access_jitter_s"), ("parking_lot", "topology.access_jitter_s"),
                       ("graph", "topology.links.0.jitter_s")):
        with pytest.raises(ScenarioError) as e:
            parse(JITTERED[kind].format(j=value), "x.toml")
        assert path in str(e.value) and needle in str(e.value), str(e.value)
