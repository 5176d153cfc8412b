"""Finding a stack file: what `--stack` lists, and why one cannot be read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mig_inference.errors import MigError
from mig_inference.spec.files import load_stack, load_stack_file


def test_a_stack_file_that_cannot_be_looked_at_is_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as refused:
        load_stack_file("a" * 300 + ".yaml")
    assert refused.value.message == f"cannot read stack file: {os.strerror(36)}"


def test_a_stacks_folder_that_cannot_be_listed_lists_no_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stacks").mkdir()
    monkeypatch.chdir(tmp_path)

    def unlistable(path: str) -> list[str]:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "listdir", unlistable)
    with pytest.raises(MigError) as refused:
        load_stack("c")
    assert refused.value.path == str(tmp_path / "stacks" / "Pulumi.c.yaml")
    assert refused.value.message == "cannot read stack file: no such file (stacks: none)"


@pytest.mark.parametrize("spelling", ["Pulumi.s.yaml/", "./Pulumi.s.yaml", ".//Pulumi.s.yaml"])
def test_a_stack_file_is_read_and_named_as_pathlib_spells_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as missing:
        load_stack_file(spelling)
    assert missing.value.path == "Pulumi.s.yaml"
    assert missing.value.message == "cannot read stack file: no such file (stacks: none)"
    (tmp_path / "Pulumi.s.yaml").write_text("config:\n  cloud: nowhere\n", encoding="utf-8")
    with pytest.raises(MigError) as refused:
        load_stack_file(spelling)
    assert "nowhere" in str(refused.value)


@pytest.mark.parametrize("kind", ["below a file", "a link loop"])
def test_a_name_no_file_can_have_is_a_missing_stack_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """As `pathlib.Path.exists` has it: a name below a file, or through a loop of links, is no
    file, so the error lists the stacks there are."""
    (tmp_path / "fleet.yaml").write_text("{}\n", encoding="utf-8")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    name = {"below a file": "fleet.yaml/Pulumi.s.yaml", "a link loop": "loop"}[kind]
    with pytest.raises(MigError) as refused:
        load_stack_file(name)
    assert refused.value.message == "cannot read stack file: no such file (stacks: none)"


def test_a_missing_stack_is_listed_with_the_stacks_of_the_folder_it_was_looked_for_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Those of the folder given (as `ephemeral up --project-dir` gives its `stackConfigDir`),
    else those `--stack` finds here, whatever the name holds."""
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.here.yaml").write_text("config: {}\n", encoding="utf-8")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "Pulumi.there.yaml").write_text("config: {}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as given:
        load_stack_file("other/Pulumi.nope.yaml", "nope", stacks_in="other")
    assert given.value.message == "cannot read stack file: no such file (stacks: there)"
    for name, stack in [("other/Pulumi.nope.yaml", None), ("other/Pulumi.nope.yaml", "nope")]:
        with pytest.raises(MigError) as here:
            load_stack_file(name, stack)
        assert here.value.message == "cannot read stack file: no such file (stacks: here)"
    with pytest.raises(MigError) as slashed:
        load_stack("sub/x")
    assert slashed.value.message == "cannot read stack file: no such file (stacks: here)"
