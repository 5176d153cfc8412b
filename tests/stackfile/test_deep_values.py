"""Values nested deeper than the stack file reader takes (yamlfile.MAX_DEPTH) are refused at
their key, with the line, whichever way they arrive: written in the stack file, built through
aliases, or handed to the program by Pulumi's engine (which takes 10,000 levels); never a
RecursionError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
from pulumi.runtime import config as runtime_config

from mig_inference.cli import main
from mig_inference.errors import MigError, shown
from mig_inference.spec.files import load_stack_file
from mig_inference.stackfile.pulumi_config import CONFIG_VALUE_DEPTH, project_values
from mig_inference.stackfile.yamlfile import MAX_DEPTH, parse_text
from tests.reference import ROOT

HEAD = "config:\n  mig-inference:cloud: gke\n"


def nested_lists(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def nested_mappings(depth: int, leaf: str = "1") -> str:
    return "{a: " * depth + leaf + "}" * depth


def stack_file(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "Pulumi.deep.yaml"
    path.write_text(f"{HEAD}  mig-inference:cluster: {value}\n")
    return path


def read_error(path: Path) -> MigError:
    with pytest.raises(MigError) as raised:
        load_stack_file(path)
    return raised.value


def test_the_bound_leaves_room_below_pythons_recursion_limit() -> None:
    assert sys.getrecursionlimit() > MAX_DEPTH * 3
    assert CONFIG_VALUE_DEPTH == MAX_DEPTH - 2


@pytest.mark.parametrize("nest", [nested_lists, nested_mappings])
def test_a_value_at_the_bound_is_read_and_one_deeper_is_refused_at_its_key(
    tmp_path: Path, nest: object
) -> None:
    assert callable(nest)
    # At the bound: read, and refused by the spec for what it is (not a cluster mapping).
    error = read_error(stack_file(tmp_path, nest(CONFIG_VALUE_DEPTH)))
    assert "levels deep" not in str(error)
    error = read_error(stack_file(tmp_path, nest(CONFIG_VALUE_DEPTH + 1)))
    [only] = error.errors
    assert only.message.startswith(f"nests lists and mappings more than {MAX_DEPTH} levels")
    assert only.message.endswith("(line 3)")
    step = "[0]" if nest is nested_lists else ".a"
    assert only.path == "mig-inference:cluster" + step * CONFIG_VALUE_DEPTH


@pytest.mark.parametrize("depth", [400, 1_000, 10_000, 100_000])
def test_what_recursed_out_before_is_refused(tmp_path: Path, depth: int) -> None:
    for nest in (nested_lists, nested_mappings):
        error = read_error(stack_file(tmp_path, nest(depth)))
        assert "levels deep" in str(error)


def test_aliases_that_nest_deeper_are_refused_where_they_are_used() -> None:
    text = f"x0: &x0 {nested_lists(40)}\n"
    for level in range(1, 4):
        text += f"x{level}: &x{level} {nested_lists(40, f'*x{level - 1}')}\n"
    with pytest.raises(MigError) as raised:
        parse_text(text, "f.yaml")
    assert raised.value.path == "f.yaml:x2" + "[0]" * (MAX_DEPTH - 1)
    assert "levels deep" in raised.value.message


@pytest.mark.parametrize("depth", [CONFIG_VALUE_DEPTH + 1, 1_000, 10_000])
def test_the_engines_json_is_refused_at_its_key_before_json_recurses(depth: int) -> None:
    """Pulumi's engine takes 10,000 levels (yaml.v3 and Go's encoding/json); the program's
    reading of them is refused at the key path, as deep as the bound."""
    text = '{"name": "c", "x": [{"b]\\"": ' + "[" * depth + "]" * depth + "}]}"
    with pytest.raises(MigError) as raised:
        project_values({"mig-inference:cluster": text}, lambda _key: False)
    prefix = 'mig-inference:cluster.x[0].b]"'
    assert raised.value.path == prefix + "[0]" * (CONFIG_VALUE_DEPTH - 3)
    shallow = '{"x": ' + "[" * (CONFIG_VALUE_DEPTH - 1) + "]" * (CONFIG_VALUE_DEPTH - 1) + "}"
    values, _ = project_values({"mig-inference:cluster": shallow}, lambda _key: False)
    assert "x" in values["cluster"]


def test_the_program_ends_with_the_error_not_a_traceback() -> None:
    from mig_inference.components import program

    runtime_config.set_all_config(
        {"mig-inference:cloud": "gke", "mig-inference:cluster": "[" * 5000 + "]" * 5000}, []
    )
    try:
        with pytest.raises(pulumi.RunError, match="levels deep"):
            program.stack_program()
    finally:
        runtime_config.set_all_config({}, [])


@pytest.mark.parametrize("verb", ["plan", "render"])
def test_the_command_exits_1_naming_the_key(verb: str, tmp_path: Path) -> None:
    path = stack_file(tmp_path, nested_mappings(3_000))
    argv = [sys.executable, "-m", "mig", verb, "--stack-file", str(path)]
    if verb == "render":
        argv += ["--out", str(tmp_path / "out")]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: mig-inference:cluster.a.a.a")


def test_json_errors_carry_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["plan", "--stack-file", str(stack_file(tmp_path, nested_lists(500))), "--json"])
    [error] = json.loads(capsys.readouterr().out)["errors"]
    assert error["key"].startswith("mig-inference:cluster[0][0]")


def test_long_values_are_quoted_short_in_messages(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.long.yaml"
    path.write_text(f"{HEAD}  mig-inference:cluster: {{name: {'x' * 100_000}}}\n")
    error = read_error(path)
    assert len(str(error)) < 2_000, str(error)[:300]
    assert "(100,002 characters)" in shown("x" * 100_000)
