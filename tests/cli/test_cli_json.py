"""Every `--json` answer as users get it: the command line run as a subprocess, and its whole
standard output one JSON document. In-process tests capture Python's `sys.stdout` only; what a
native library writes to the file descriptor (HiGHS's banner, since highspy 1.16) shows here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.scripts import THROUGHPUT_MARKER

ROOT = Path(__file__).resolve().parent.parent.parent
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))  # fmt: skip


def answer(*argv: str, exit_code: int = 0, cwd: Path = ROOT) -> Any:
    """The parsed stdout of `python -m mig ARGV --json`: `json.loads` refuses any text before or
    after the document, so a stray line fails the test."""
    result = subprocess.run(
        [sys.executable, "-m", "mig", *argv, "--json"],
        capture_output=True, text=True, cwd=cwd, check=False, timeout=600,
    )  # fmt: skip
    assert result.returncode == exit_code, result.stderr
    assert "Traceback" not in result.stderr
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as error:
        pytest.fail(f"stdout is not one JSON document ({error}): {result.stdout[:400]!r}")


@pytest.mark.parametrize("stack", STACKS)
def test_plan(stack: str) -> None:
    found = answer("plan", "--stack", stack)
    assert found["stack"] == stack and found["errors"] == []


@pytest.mark.parametrize("stack", STACKS)
def test_diff_of_a_stack_with_itself(stack: str) -> None:
    path = str(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    found = answer("diff", "--stack", stack, "--deployed", path)
    assert found["refusals"] == []
    assert {pool["change"] for pool in found["pools"]} == {"unchanged"}


@pytest.mark.parametrize("stack", STACKS)
def test_render(stack: str, tmp_path: Path) -> None:
    found = answer("render", "--stack", stack, "--out", str(tmp_path / "out"))
    assert found["stack"] == stack and found["files"]["kubernetes"] > 0


def test_pack_solves_quietly(tmp_path: Path) -> None:
    """`pack` creates a solver on every run: free GPUs, identical nodes, a demand, a cloud."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "workloads:\n"
        "  - {name: chat, replicas: 5, memory_gib: 24.5}\n"
        "  - {name: embed, replicas: 3, profile: 1g.10gb}\n"
        "  - {name: bert, requests_per_second: 69, throughput: {1g.10gb: 135.1, 3g.40gb: 243.3}}\n"
    )
    assert answer("pack", str(fleet), "--gpu", "h100")["gpus"] >= 2
    assert answer("pack", str(fleet), "--gpu", "h100", "--gpus-per-node", "8", "--uniform-nodes")["nodes"] == 1  # fmt: skip
    assert answer("pack", str(fleet), "--cloud", "eks")["choice"].endswith("xlarge")


@pytest.mark.parametrize("per_node", [[], ["--gpus-per-node", "8"]], ids=["free GPUs", "nodes"])
def test_pack_reports_each_preference_stage(per_node: list[str], tmp_path: Path) -> None:
    """Among the plans with the fewest GPUs, the planner's preference stages (fewest distinct
    layouts, least memory beyond need): each one's value and the bound it proved, as the
    planner found them."""
    from mig_inference.cli.common import mig_gpu
    from mig_inference.solving.fleet import load_fleet
    from mig_inference.solving.packing import pack

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "workloads:\n"
        "  - {name: chat, replicas: 5, memory_gib: 24.5}\n"
        "  - {name: embed, replicas: 3, profile: 1g.10gb}\n"
        "  - {name: small, replicas: 7, memory_gib: 4}\n"
    )
    found = answer("pack", str(fleet), "--gpu", "h100", *per_node)
    planned = pack(
        mig_gpu("h100"),
        load_fleet(fleet),
        gpus_per_node=int(per_node[1]) if per_node else None,
    )
    assert planned.preferences
    assert found["preferences"] == [
        {"stage": s.name, "value": s.value, "bound": s.bound, "proven": s.proven}
        for s in planned.preferences
    ]
    assert found["preferences_proven"] == planned.refined_optimal


def test_bench() -> None:
    found = answer("bench", "--quick")
    assert found["scenarios"] and found["demand"] and found["cost"]


@pytest.mark.parametrize(
    "argv",
    [
        ["gpus"],
        ["profiles", "--gpu", "h100"],
        ["config", "--gpu", "a100-40gb", "1g.5gb=2,2g.10gb=1,3g.20gb=1"],
        ["fit", "--gpu", "h100", "--params", "8B"],
        ["validate", "--gpu", "h100", "3g.40gb", "2g.20gb"],
    ],
)  # fmt: skip
def test_catalog_verbs(argv: list[str]) -> None:
    assert answer(*argv)


def test_throughput(tmp_path: Path) -> None:
    point = {"profile": "1g.10gb", "requestsPerSecond": 8.5, "latencyMs": 900, "measured": True}
    (tmp_path / "run.log").write_text(f"loading\n{THROUGHPUT_MARKER} {json.dumps(point)}\n")
    found = answer("throughput", str(tmp_path / "run.log"))
    assert found["throughput"][0]["requestsPerSecond"] == 8.5


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--stack-file", "tests/broken_stacks/02-impossible-layout.yaml"],
        ["validate", "--gpu", "h100", "3g.40gb=3"],
        ["pack", "missing-fleet.yaml", "--gpu", "h100"],
    ],
)  # fmt: skip
def test_errors_are_json_too(argv: list[str]) -> None:
    found = answer(*argv, exit_code=1)
    assert found["errors"] and all(error["message"] for error in found["errors"])
