"""The names files are read and reported by: text and Paths alike, as pathlib spells them."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from mig_inference.errors import MigError
from mig_inference.stackfile.yamlfile import file_name, load_yaml, read_text

SPELLINGS = [
    "a.yaml", "dir/a.yaml", "/abs/a.yaml", "a.yaml/", "dir//a.yaml", "./a.yaml", ".//a.yaml",
    "dir/./a.yaml", "a.yaml/.", "", ".", "/", "//a", "///a", "/a/", "../a.yaml", "dir/../a.yaml",
]  # fmt: skip


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_name_is_spelled_as_pathlib_spells_it(spelling: str) -> None:
    assert file_name(spelling) == str(PurePath(spelling))
    assert file_name(Path(spelling)) == str(Path(spelling))


@pytest.mark.parametrize("spelling", ["f.yaml/", "./f.yaml", ".//f.yaml", "sub/../f.yaml"])
def test_a_name_given_as_text_reads_the_file_a_path_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    (tmp_path / "f.yaml").write_text("a: 1\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert load_yaml(spelling, "fleet file") == load_yaml(Path(spelling), "fleet file") == {"a": 1}


@pytest.mark.parametrize("spelling", ["./nope.yaml", "nope.yaml/", "", "dir//nope.yaml"])
def test_a_file_that_cannot_be_read_is_named_alike_as_text_and_as_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as as_text:
        read_text(spelling, "fleet file")
    with pytest.raises(MigError) as as_path:
        read_text(Path(spelling), "fleet file")
    assert as_text.value.path == as_path.value.path == str(PurePath(spelling))
    assert as_text.value.message == as_path.value.message
    assert as_text.value.message.startswith("cannot read fleet file: ")


def test_a_name_holding_nul_is_refused_by_name() -> None:
    with pytest.raises(MigError) as refused:
        read_text("t\0.yaml", "throughput file")
    assert refused.value.path == "t\\0.yaml"
    assert refused.value.message == "cannot read throughput file: a file name cannot hold NUL"
