"""Large stack files are read in one pass: the duplicate-key check names the key yaml.v3 names
(a direct transcription of yaml.v3's pairwise loop is the reference) with work in proportion to
the keys, and a file with a 50,000-key mapping is read and refused at the key given twice.
No test here times anything (these machines are noisy): work is counted instead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from mig_inference.cli import main
from mig_inference.stackfile import yamlfile
from mig_inference.stackfile.yamlfile import first_repeated_key, parse_text
from tests.spec.test_all_errors import GKE
from tests.spec.test_api_formats import run_plan


def yaml_v3_first_repeat(pairs: list[tuple[Node, Node]]) -> Node | None:
    """yaml.v3 decode.go `mapping` (v3.0.1): every key against every later one, by kind and
    text; the first error it appends is the one reported. Scalar keys only: a list or mapping
    as a key is refused when it is decoded (yaml.v3 compares them too, by their empty text)."""
    scalars = [key for key, _value in pairs if isinstance(key, ScalarNode)]
    for i, key_i in enumerate(scalars):
        for key_j in scalars[i + 1 :]:
            if key_i.value == key_j.value:
                return key_j
    return None


def _key(text: str, kind: str = "scalar") -> Node:
    if kind == "scalar":
        return ScalarNode("tag:yaml.org,2002:str", text)
    return (SequenceNode if kind == "list" else MappingNode)("tag:yaml.org,2002:seq", [])


keys = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "1", "<<", ""]), st.sampled_from(["scalar"] * 4
                                                                                + ["list"])),
    max_size=12,
)  # fmt: skip


@given(keys)
def test_the_key_named_is_the_one_yaml_v3_names_first(written: list[tuple[str, str]]) -> None:
    pairs = [(_key(text, kind), _key("v")) for text, kind in written]
    assert first_repeated_key(pairs) is yaml_v3_first_repeat(pairs)


class _CountedKey(ScalarNode):
    """A key node that counts how often its text is read."""

    reads = 0

    def __getattribute__(self, name: str) -> Any:
        if name == "value":
            _CountedKey.reads += 1
        return super().__getattribute__(name)


@pytest.mark.parametrize("size", [1_000, 4_000])
def test_the_check_reads_each_key_a_bounded_number_of_times(size: int) -> None:
    """Linear: a mapping four times larger costs four times the reads, not sixteen."""
    pairs: list[tuple[Node, Node]] = [
        (_CountedKey("tag:yaml.org,2002:str", f"k{i}"), _key("v")) for i in range(size)
    ]
    pairs.append((_CountedKey("tag:yaml.org,2002:str", f"k{size - 1}"), _key("v")))
    _CountedKey.reads = 0
    assert first_repeated_key(pairs) is pairs[-1][0]
    assert _CountedKey.reads <= 2 * len(pairs), _CountedKey.reads


def _labels_file(size: int, twice: int | None = None) -> str:
    labels = "".join(f"        k{i:05d}: v\n" for i in range(size))
    if twice is not None:
        labels += f"        k{twice:05d}: again\n"
    return (
        "config:\n  mig-inference:cloud: gke\n  mig-inference:cluster:\n    name: c\n"
        "    project: my-gcp-project\n    location: us-central1-a\n  mig-inference:pools:\n"
        "    - name: h100\n      gpu: H100-80GB\n      machineType: a3-highgpu-8g\n"
        "      nodes: 1\n      mig: all-3g.40gb\n      labels:\n" + labels
    )


def test_a_50000_key_mapping_is_read_and_its_repeated_key_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _labels_file(50_000, twice=49_999)
    assert 0.7e6 < len(text.encode()) < 1.2e6
    compared = 0
    real: Callable[[list[tuple[Node, Node]]], ScalarNode | None] = yamlfile.first_repeated_key

    def counting(pairs: list[tuple[Node, Node]]) -> ScalarNode | None:
        nonlocal compared
        compared += len(pairs)
        return real(pairs)

    monkeypatch.setattr(yamlfile, "first_repeated_key", counting)
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["plan", "--stack-file", str(path)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: mig-inference:pools[0].labels.k49999: key 'k49999' is given twice (line 50014)\n"
    )
    assert compared < 50_100  # every mapping's keys once


def test_a_deep_file_is_refused_at_its_key_without_recursing() -> None:
    """The composer keeps its own stack: 100,000 levels are refused at the first too deep."""
    text = "config:\n  mig-inference:pools: " + "[" * 100_000 + "]" * 100_000 + "\n"
    with pytest.raises(Exception) as raised:
        parse_text(text, "Pulumi.deep.yaml", key_path=lambda where: f"at {where}")
    assert "nests lists and mappings more than 100 levels deep" in str(raised.value)
    assert getattr(raised.value, "path", "").startswith("at ('config', 'mig-inference:pools'")


def test_a_large_accepted_mapping_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = {**GKE, "pools": [{**GKE["pools"][0],
                                "labels": {f"k{i}": "v" for i in range(5_000)}}]}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 0, errors
