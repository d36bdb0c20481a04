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
                   'kind = "self_similar"', 'cc = "cubic"', "duplex", "access", "sample_interval_s"):
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
