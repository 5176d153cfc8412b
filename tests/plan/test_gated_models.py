"""A service that downloads a gated model (the Hub serves its files only to an account that
accepted the owner's terms) without naming a token does not pass the plan silently: its pods
would fail at their first download. The shipped stacks name a token wherever they need one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.plan import plan_of
from mig_inference.plan.gated import gated
from mig_inference.spec.files import load_stack, load_stack_file
from tests.reference import ROOT

STACKS = sorted(p.stem.removeprefix("Pulumi.") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


def _stack(tmp_path: Path, **service: Any) -> Path:
    """gke-h100 with its one service changed by `service` (a key set to None is removed)."""
    body = yaml.safe_load((ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text())
    [spec] = body["config"]["mig-inference:services"]
    spec.update(service)
    body["config"]["mig-inference:services"] = [{k: v for k, v in spec.items() if v is not None}]
    path = tmp_path / "Pulumi.gated.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _gated_warnings(path: Path) -> list[str]:
    return [w for w in plan_of(lambda: load_stack_file(path)).warnings if "is gated" in w]


@pytest.mark.parametrize(
    ("service", "warned"),
    [({"model": "meta-llama/Llama-3.1-8B-Instruct", "hfTokenSecret": None}, True),
     ({"model": "mistralai/Mistral-Nemo-Instruct-2407", "hfTokenSecret": None}, True),
     ({"model": "mistralai/Mistral-Nemo-Instruct-2407", "engine": "tgi", "hfTokenSecret": None,
       "apiKeySecret": None}, True),
     ({"model": "mistralai/Mistral-Nemo-Instruct-2407"}, False),
     ({"model": "Qwen/Qwen2.5-7B-Instruct", "hfTokenSecret": None}, False),
     ({"model": "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "hfTokenSecret": None}, False)],
)  # fmt: skip
def test_a_gated_model_without_a_token_is_named(
    service: dict[str, Any], warned: bool, tmp_path: Path
) -> None:
    found = _gated_warnings(_stack(tmp_path, **service))
    assert bool(found) is warned, found
    if warned:
        [warning] = found
        assert warning.startswith(f"service mistral-nemo: {service['model']} is gated")
        assert "names no hfTokenSecret" in warning


def test_the_warning_reaches_the_command_line(tmp_path: Path) -> None:
    path = _stack(tmp_path, model="meta-llama/Llama-3.1-8B-Instruct", hfTokenSecret=None)
    run = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(path)],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0
    assert (
        "warning: service mistral-nemo: meta-llama/Llama-3.1-8B-Instruct is gated on the Hugging "
        "Face Hub"
    ) in run.stderr


def test_the_table_names_owners_by_their_repository_prefix() -> None:
    assert gated("meta-llama/Llama-2-7b-chat-hf") is not None
    assert gated("meta-llamas/x") is None and gated("Qwen/Qwen2.5-0.5B-Instruct") is None


@pytest.mark.parametrize("stack", STACKS)
def test_no_shipped_stack_downloads_a_gated_model_without_a_token(stack: str) -> None:
    assert [w for w in plan_of(lambda: load_stack(stack)).warnings if "is gated" in w] == []
