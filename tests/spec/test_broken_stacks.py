"""A corpus of broken stack files: each fails `plan` (and `render`) with exit 1 and one error
line naming the key path, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.cli import main
from mig_inference.render import run_program
from tests.reference import ROOT

CORPUS = sorted((Path(__file__).parent.parent / "broken_stacks").glob("*.yaml"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} has no `# expect:` line"
    return first.removeprefix("# expect: ")


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_plan_fails_with_the_key_path(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack-file", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("error: ")
    assert expected(path) in captured.err


@pytest.mark.parametrize("path", CORPUS[:3], ids=lambda p: p.stem)
def test_json_errors(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["plan", "--stack-file", str(path), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    [error] = payload["errors"]
    assert set(error) == {"key", "value", "message", "allowed"}
    assert expected(path) in f"{error['key']}: {error['message']}"
    assert error["value"] is not None


def test_the_pulumi_program_reports_the_same_error() -> None:
    path = next(p for p in CORPUS if "replicas-beyond-capacity" in p.name)
    rendering = run_program("broken", path)
    assert rendering.error is not None and expected(path) in rendering.error
    assert rendering.resources == []  # nothing is created half-way


@pytest.mark.parametrize("verb", ["plan", "render"])
def test_no_traceback_from_a_real_process(verb: str, tmp_path: Path) -> None:
    path = next(p for p in CORPUS if "bad-taint-effect" in p.name)
    argv = [sys.executable, "-m", "mig", verb, "--stack-file", str(path)]
    if verb == "render":
        argv += ["--out", str(tmp_path)]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert expected(path) in result.stderr


def test_a_missing_cluster_is_required_not_none(tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.s.yaml").write_text("config:\n  mig-inference:cloud: gke\n")
    result = subprocess.run([sys.executable, "-m", "mig_inference", "plan", "--stack", "s"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 1
    assert "error: mig-inference:cluster: is required: a mapping with keys name, " in result.stderr
    assert "None" not in result.stderr


def test_a_pool_that_is_not_a_mapping_names_every_pool_key(tmp_path: Path) -> None:
    """The keys come from the reader's one list of them, which is also what the component's
    typed `Pool` args declare: a key added to the pools (as `migPrefer` was) is named too."""
    from mig_inference.components.stack_args import Pool, stack_key

    stack_file = tmp_path / "Pulumi.s.yaml"
    stack_file.write_text(
        "config:\n  mig-inference:cloud: gke\n  mig-inference:pools:\n    - h100\n"
    )
    argv = [sys.executable, "-m", "mig", "plan", "--stack-file", str(stack_file)]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = [error for error in result.stderr.splitlines() if "pools[0]" in error]
    assert line.startswith("error: mig-inference:pools[0]: must be a mapping with keys ")
    named = line.split(" with keys ", 1)[1].rsplit("; got ", 1)[0].split(", ")
    assert sorted(named) == sorted(stack_key(field) for field in Pool.__annotations__)
    assert "migPrefer" in named
