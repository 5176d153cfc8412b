"""`diff` as a CI gate: `--min-serving` and `--max-extra-gpus` turn a change that works but costs
too much into exit 3 with one line per breach, run as a pipeline runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.changes.change_plan import (
    ChangePlan,
    PoolChange,
    PoolDiff,
    ServiceChange,
    ServiceDiff,
)
from mig_inference.changes.gate import MinServing, breaches, min_serving
from mig_inference.errors import MigError
from tests.reference import ROOT


def _plan(before: int, worst: int, extra_gpus: int = 0) -> ChangePlan:
    return ChangePlan(
        pools=[PoolDiff("p", PoolChange.NEW_NODES, extra_gpus=extra_gpus)],
        services=[ServiceDiff("s", ServiceChange.MOVED, serving_before=before, min_serving=worst)],
    )


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("1", MinServing(count=1)), ("50%", MinServing(percent=50.0)),
     ("budget", MinServing(budget=True))],
)  # fmt: skip
def test_thresholds_are_read(text: str, parsed: MinServing) -> None:
    assert min_serving(text) == parsed


@pytest.mark.parametrize("text", ["0", "-1", "0%", "101%", "half", ""])
def test_a_threshold_that_is_none_is_refused_at_its_option(text: str) -> None:
    with pytest.raises(MigError) as raised:
        min_serving(text)
    assert raised.value.path == "--min-serving"


@pytest.mark.parametrize(
    ("threshold", "worst", "budget", "breached"),
    [("1", 0, None, True), ("1", 1, None, False), ("50%", 7, None, True),
     ("50%", 8, None, False), ("budget", 14, 1, True), ("budget", 15, 1, False),
     ("budget", 0, 16, False)],
)  # fmt: skip
def test_a_service_below_the_threshold_breaches_it(
    threshold: str, worst: int, budget: int | None, breached: bool
) -> None:
    budgets = {"s": budget} if budget is not None else None
    found = breaches(_plan(16, worst), min_serving(threshold), None, budgets)
    assert bool(found) is breached, found


def test_extra_gpus_above_the_limit_breach_it() -> None:
    assert breaches(_plan(16, 16, extra_gpus=8), None, 8) == []
    [breach] = breaches(_plan(16, 16, extra_gpus=8), None, 7)
    assert "8 extra GPUs" in breach and "7 allowed" in breach


def _stack(tmp_path: Path, name: str, **pool: Any) -> Path:
    """gke-h100 with a small model (it fits a 1g slice too), room for every pod, and `pool`."""
    body = yaml.safe_load((ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text())
    config = body["config"]
    config["mig-inference:pools"][0].update({"maxPods": 110, **pool})
    config["mig-inference:services"][0]["memoryGiB"] = 9
    config["mig-inference:cluster"]["protect"] = False
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _diff(after: Path, before: Path, *gate: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mig", "diff", "--stack-file", str(after), "--deployed",
         str(before), *gate],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip


def test_a_service_down_during_an_in_place_change_stops_the_pipeline(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before", rollout="in-place")
    after = _stack(tmp_path, "after", rollout="in-place", mig="all-1g.10gb")
    assert _diff(after, before).returncode == 0
    gated = _diff(after, before, "--min-serving", "1")
    assert gated.returncode == 3, gated.stderr
    assert "error: gate: service mistral-nemo: 0 of 16 replicas serving" in gated.stderr
    as_json = _diff(after, before, "--min-serving", "1", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["gate_breaches"][0].startswith("service mistral-nemo")


def test_a_change_needing_more_gpus_than_allowed_stops_the_pipeline(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before")
    after = _stack(tmp_path, "after", mig="all-1g.10gb")
    assert _diff(after, before, "--max-extra-gpus", "8").returncode == 0
    gated = _diff(after, before, "--max-extra-gpus", "0")
    assert gated.returncode == 3
    assert "error: gate: 8 extra GPUs at the peak of the change, above the 0 allowed" in (
        gated.stderr
    )


def test_a_bad_threshold_is_bad_input(tmp_path: Path) -> None:
    stack = _stack(tmp_path, "same")
    run = _diff(stack, stack, "--min-serving", "0")
    assert run.returncode == 1 and "--min-serving" in run.stderr and "Traceback" not in run.stderr
