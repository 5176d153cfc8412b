"""The command line reads stack files as Pulumi does: checked against what Go's yaml.v3 and
Pulumi's config code give (tests/pulumi_config/expected.json), and against what the program
itself reads through `pulumi.Config` from the engine's config."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime import config as runtime_config

from mig_inference.errors import MigError
from mig_inference.spec.files import load_stack, load_stack_file, stack_path
from mig_inference.stackfile.pulumi_config import engine_config, project_name, project_values
from mig_inference.stackfile.yamlfile import parse_text
from tests.pulumi_config_cases import CASES

GO = json.loads((Path(__file__).parent.parent / "pulumi_config" / "expected.json").read_text())
DIVERGES = {
    # Pulumi keeps one of the two in no fixed order (a Go map); refused here.
    "same_key_bare_and_namespaced",
}


# The kinds of refusal Go's yaml.v3 and Pulumi give, each with what its text says and what ours
# must say for it: (kind, Go's text, ours). The named groups must agree between the two texts.
REFUSALS = [
    ("duplicate key", r'line (?P<line>\d+): mapping key "(?P<key>[^"]+)" already defined',
     r"key '(?P<key>[^']+)' is given twice(?: \(written differently\))? \(line (?P<line>\d+)\)"),
    ("not a number JSON can carry", r"json: unsupported value: (?P<value>[+-]?(?:Inf|NaN))",
     r": (?P<value>[+-]?(?:inf|nan)) cannot be passed to the program: Pulumi refuses"),
    ("bad configuration key", r"could not parse (?P<key>\S+) as a configuration key",
     r"(?P<key>\S+): is not a configuration key"),
    ("config is not a mapping", r"cannot unmarshal !!seq into map", r"`config:` must be a mapping"),
    ("file is not a mapping", r"expected project to be an object", r"a stack file is a mapping"),
]  # fmt: skip


def assert_same_refusal(go: str, ours: str) -> None:
    """Our refusal is of the kind Go's is, about the same key, line or value."""
    kinds = [(kind, re.search(theirs, go), re.search(mine, ours))
             for kind, theirs, mine in REFUSALS]  # fmt: skip
    [(kind, go_found, ours_found)] = [k for k in kinds if k[1] is not None]
    assert go_found is not None
    assert ours_found is not None, f"Go refuses with {kind!r} ({go!r}), we say {ours!r}"
    for group, value in go_found.groupdict().items():
        found = ours_found[group]
        assert found.lower() == value.lower().lstrip("+"), (group, go, ours)


def engine(text: str) -> Any:
    return engine_config(parse_text(text, "Pulumi.test.yaml", go_times=True), "Pulumi.test.yaml")


def test_the_go_results_are_for_these_cases() -> None:
    assert sorted(GO) == sorted(CASES)
    assert all(GO[name]["input"] == text for name, text in CASES.items())


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_config_is_what_pulumi_passes(name: str) -> None:
    expected = GO[name]
    if name in DIVERGES:
        with pytest.raises(MigError, match="given twice"):
            engine(CASES[name])
        return
    if "error" in expected:
        with pytest.raises(MigError) as caught:
            engine(CASES[name])
        assert_same_refusal(expected["error"], str(caught.value))
        return
    found = engine(CASES[name])
    want = expected.get("config", {})
    secret = set(expected.get("secret_keys", []))
    assert set(found.values) == set(want)
    assert found.secret_keys == secret
    for key, text in want.items():
        if key in secret:
            continue  # the engine decrypts; the command line never sees a secret's value
        assert found.values[key] == text, key
    for key in expected.get("empty_keys", []):
        assert any(key in warning for warning in found.warnings)


@pytest.mark.parametrize("name", sorted(n for n in CASES if "error" not in GO[n]))
def test_the_program_reads_the_same_values_as_the_command_line(name: str) -> None:
    """The program's path: the engine's strings (from Go) in the SDK's runtime config, read by
    `components.program` as `pulumi up` runs it; the command line's: the stack file."""
    from mig_inference.components import program

    expected = GO[name]
    if name in DIVERGES:
        return
    found = engine(CASES[name])
    cli_values, cli_secrets = project_values(found.values, found.secret_keys.__contains__)
    runtime_config.set_all_config(expected.get("config", {}), expected.get("secret_keys", []))
    try:
        passed = program.engine_config()
        values, secrets = project_values(passed, runtime_config.is_config_secret)
    finally:
        runtime_config.set_all_config({}, [])
    assert (values, secrets) == (cli_values, cli_secrets)


def test_pulumis_traps_reach_the_spec_as_pulumi_gives_them(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.traps.yaml"
    path.write_text(
        "config:\n"
        "  mig-inference:cloud: gke\n"
        "  mig-inference:cluster: {name: c, project: my-project, location: us-central1}\n"
        "  mig-inference:pools:\n"
        "    - {name: h100, gpu: h100, machineType: a3-highgpu-8g, nodes: 1, mig: all-3g.40gb,\n"
        "       maxPods: 0o100, spot: false, diskSizeGb: 2e2}\n"
        "  mig-inference:services:\n"
        "    - {name: chat, model: m/m, memoryGiB: 2.0e1, replicas: 0x4}\n"
    )
    spec = load_stack_file(path)
    pool, service = spec.pools[0], spec.services[0]
    assert (pool.max_pods, pool.disk_size_gb, service.replicas) == (64, 200, 4)


@pytest.mark.parametrize(
    ("pool_keys", "message"),
    [
        ("spot: yes", "pools[0].spot: must be true or false, got 'yes'"),
        ("nodes: 1e1", ""),
        ("labels: {team: 2024-01-02}", "2024-01-02 00:00:00 +0000 UTC"),
    ],
)
def test_the_program_under_mocks_refuses_what_plan_refuses(
    tmp_path: Path, pool_keys: str, message: str
) -> None:
    from mig_inference.render import run_program

    path = tmp_path / "Pulumi.traps.yaml"
    path.write_text(
        "config:\n"
        "  mig-inference:cloud: eks\n"
        "  mig-inference:cluster: {name: c, region: us-east-1, subnetIds: [subnet-0123456789abcdef0]}\n"
        "  mig-inference:pools:\n"
        "    - name: a100\n      gpu: a100-40gb\n      machineType: p4d.24xlarge\n"
        "      mig: all-balanced\n      maxPods: 0o156\n"
        f"      {pool_keys}\n"
    )
    try:
        load_stack_file(path)
        cli = None
    except MigError as error:
        cli = str(error)
    rendering = run_program("traps", path)
    assert rendering.error == cli
    if message:
        assert cli is not None and message in cli


@pytest.mark.parametrize("where", ["beside", "one level up", "none"])
@pytest.mark.parametrize("given", ["relative name", "absolute Path"])
def test_the_project_file_beside_or_above_the_stack_file_names_its_bare_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, given: str
) -> None:
    """`Pulumi.yaml` beside the stack file, else one level up (`stackConfigDir`), else this
    project's namespace; the stack file named relative to the working directory (`stacks/...`)
    or by an absolute Path."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "Pulumi.s.yaml").write_text("config: {}\n", encoding="utf-8")
    folder = {"beside": stacks, "one level up": tmp_path}.get(where)
    if folder is not None:
        (folder / "Pulumi.yaml").write_text("name: platform\nruntime: python\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    stack_file = "stacks/Pulumi.s.yaml" if given == "relative name" else stacks / "Pulumi.s.yaml"
    assert project_name(stack_file) == ("mig-inference" if folder is None else "platform")
    if given == "relative name":
        monkeypatch.chdir(stacks)
        assert project_name("Pulumi.s.yaml") == ("mig-inference" if folder is None else "platform")


def test_a_stack_that_is_not_there_is_named_with_the_stacks_that_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("Pulumi.b.yaml", "Pulumi.a.yaml", "Pulumi.yaml", "notes.yaml"):
        (stacks / name).write_text("config: {}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as refused:
        load_stack("c")
    assert refused.value.path == str(stacks / "Pulumi.c.yaml")
    assert refused.value.message == "cannot read stack file: no such file (stacks: a, b)"


def test_the_folders_of_a_stack_file_are_those_its_name_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside and above a stack file are the folders its name names from the working directory,
    a linked one or not (`stacks/` linked elsewhere still belongs to the project it is in, as
    `pulumi` run there takes it); `..` in the name goes up where the system takes it."""
    shared = tmp_path / "shared"
    (shared / "stacks" / "sub").mkdir(parents=True)
    (shared / "stacks" / "Pulumi.s.yaml").write_text("config: {}\n", encoding="utf-8")
    (shared / "Pulumi.yaml").write_text("name: shared\nruntime: python\n", "utf-8")
    project = tmp_path / "platform"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: platform\nruntime: python\n", "utf-8")
    (project / "stacks").symlink_to(shared / "stacks")
    monkeypatch.chdir(project)
    assert project_name(stack_path("s")) == "platform"
    assert project_name("stacks/Pulumi.s.yaml") == "platform"
    assert project_name("stacks/../stacks/Pulumi.s.yaml") == "shared"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert project_name("../platform/stacks/Pulumi.s.yaml") == "platform"
    assert project_name("../platform/stacks/../stacks/Pulumi.s.yaml") == "shared"
    assert project_name("../shared/stacks/Pulumi.s.yaml") == "shared"
    monkeypatch.chdir(shared / "stacks" / "sub")
    assert project_name("../Pulumi.s.yaml") == "shared"
    assert project_name(".././Pulumi.s.yaml/") == "shared"
    monkeypatch.chdir(shared / "stacks")
    assert project_name("Pulumi.s.yaml") == "shared"
    assert project_name("sub/../Pulumi.s.yaml") == "shared"
