"""A fixed sample of the mutation corpus (tests/stack_mutations.py: every shipped stack with each
key path deleted, retyped, nested too deep, duplicated or made huge): `plan` exits 0 or 1 with
JSON on stdout, never a traceback; a sample of it through the installed command as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.cli import main
from tests.reference import ROOT
from tests.stack_mutations import (
    KINDS,
    Mutation,
    corpus,
    cross_key_corpus,
    cross_key_text,
    mutated_text,
)

CORPUS = list(corpus())
SAMPLE = CORPUS[::23]
"""About 600 of the corpus' 13,500: every kind at many key paths of every stack (23 is prime
to the number of kinds, so the kinds rotate along the paths)."""


def test_the_sample_covers_every_kind_and_stack() -> None:
    assert {m.kind for m in SAMPLE} == set(KINDS)
    assert {m.stack for m in SAMPLE} == {m.stack for m in CORPUS}


def _write(tmp_path: Path, mutation: Mutation) -> Path | None:
    text = mutated_text(mutation)
    if text is None:
        return None
    path = tmp_path / "Pulumi.mutated.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("chunk", range(8))
def test_plan_exits_0_or_1_with_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chunk: int
) -> None:
    for mutation in SAMPLE[chunk::8]:
        path = _write(tmp_path, mutation)
        if path is None:
            continue
        code = main(["plan", "--stack-file", str(path), "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code in (0, 1), mutation.name
        assert (code == 1) == bool(out.get("errors")), mutation.name


@pytest.mark.parametrize(
    "kind", ["deepen-lists", "deepen-mappings", "huge-list", "duplicate", "word"]
)
def test_the_command_as_a_process(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, Mutation("gke-h100", ("pools", 0, "labels"), kind))
    assert path is not None
    done = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(path), "--json"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["errors"]


CROSS_KEY = list(cross_key_corpus())


def test_the_cross_key_corpus_covers_namespaces_and_versions_per_cloud() -> None:
    kinds = {m.kind.split("-")[0] for m in CROSS_KEY}
    assert kinds == {"existing", "namespace", "operator", "version"}
    keys = {m.key for m in CROSS_KEY if m.kind.startswith("version")}
    assert keys == {"mig-inference:cluster.version", "mig-inference:cluster.kubernetesVersion"}


@pytest.mark.parametrize("chunk", range(4))
def test_every_cross_key_mutation_is_refused_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], chunk: int
) -> None:
    path = tmp_path / "Pulumi.mutated.yaml"
    for mutation in CROSS_KEY[chunk::4]:
        path.write_text(cross_key_text(mutation), encoding="utf-8")
        code = main(["plan", "--stack-file", str(path), "--json"])
        keys = [error["key"] for error in json.loads(capsys.readouterr().out).get("errors", [])]
        assert code == 1 and mutation.key in keys, (mutation.name, keys)
