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
    assert files, "scenarios/ ships examples"
    for f in files:
        sc = load(f)
        assert sc.duration_s > 0
    sc = load(ROOT / "scenarios" / "coupled_vs_uncoupled_dumbbell.toml").model_copy(update={"duration_s": 20.0})
    t = run(sc)
    flows = t["flows"].to_pylist()
    assert len(flows) == 2 and all(f["goodput_bps"] > 0 for f in flows)
    assert t["media_flows"].num_rows == 1 and t["udp_flows"].num_rows == 1
    assert t["queue_samples"].num_rows == 201


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


def test_tcp_flow_in_fse_group_is_rejected():
    text = BASE + '[[groups]]\nname = "f"\nkind = "passive"\n[[flows]]\ntype = "tcp"\npair = 1\ngroup = "f"\n'
    with pytest.raises(ScenarioError, match="is TCP but group 'f' is an FSE group"):
        parse(text, "x.toml")
