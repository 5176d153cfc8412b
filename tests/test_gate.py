"""The gate Job's wait loop, run for real with /bin/sh against a fake kubectl."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from mig_inference.gate import GateTarget, gate_script, gate_targets_value
from tests.scripts import run_script

POOL = "mig-inference.io/pool"
GEN = "mig-inference.io/generation"
CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


def node(pool: str, config: str, state: str, generation: str = "g1") -> dict[str, Any]:
    return {"labels": {POOL: pool, GEN: generation, CONFIG: config, STATE: state}}


def run_gate(
    tmp_path: Path, nodes: dict[str, Any], targets: list[GateTarget], timeout: int = 30
) -> subprocess.CompletedProcess[str]:
    env = {"GATE_TARGETS": gate_targets_value(targets), "GATE_TIMEOUT_SECONDS": str(timeout),
           "GATE_POLL_SECONDS": "0"}  # fmt: skip
    result, _ = run_script(tmp_path, gate_script(), {"nodes": nodes}, env)
    return result


def target(pool: str, config: str, count: int, generation: str = "g1") -> GateTarget:
    return GateTarget(pool, f"{POOL}={pool},{GEN}={generation}", config, count)


def test_succeeds_when_every_pool_reports_success(tmp_path: Path) -> None:
    nodes = {"n1": node("a", "all-balanced", "success"), "n2": node("a", "all-balanced", "success"),
             "n3": node("b", "all-1g.10gb", "success")}  # fmt: skip
    result = run_gate(
        tmp_path, nodes, [target("a", "all-balanced", 2), target("b", "all-1g.10gb", 1)]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MIG ready: a:2/2 b:1/1" in result.stdout


def test_fails_fast_naming_the_failed_node(tmp_path: Path) -> None:
    nodes = {"n1": node("a", "all-balanced", "success"), "n2": node("a", "all-balanced", "failed")}
    result = run_gate(tmp_path, nodes, [target("a", "all-balanced", 2)])
    assert result.returncode == 1
    assert (
        "MIG config failed on node n2 (config all-balanced) (pool a): "
        "nvidia.com/mig.config.state=failed" in result.stdout
    )


def test_a_stale_success_of_the_old_config_never_passes(tmp_path: Path) -> None:
    nodes = {"n1": node("a", "all-1g.10gb", "success")}
    result = run_gate(tmp_path, nodes, [target("a", "all-balanced", 1)], timeout=0)
    assert result.returncode == 1
    assert "a:0/1(1 not yet all-balanced)" in result.stdout


def test_only_nodes_of_the_current_generation_count(tmp_path: Path) -> None:
    nodes = {"old": node("a", "all-balanced", "success", generation="g0")}
    result = run_gate(tmp_path, nodes, [target("a", "all-balanced", 1)], timeout=0)
    assert result.returncode == 1 and "a:0/1" in result.stdout


def test_times_out_when_nodes_stay_pending(tmp_path: Path) -> None:
    nodes = {"n1": node("a", "all-balanced", "pending")}
    result = run_gate(tmp_path, nodes, [target("a", "all-balanced", 1)], timeout=0)
    assert result.returncode == 1
    assert (
        "timed out waiting for nvidia.com/mig.config and nvidia.com/mig.config.state=success: "
        "a:0/1" in result.stdout
    )


def test_keeps_waiting_while_no_node_exists_yet(tmp_path: Path) -> None:
    result = run_gate(tmp_path, {}, [target("a", "all-balanced", 1)], timeout=0)
    assert result.returncode == 1 and "a:0/1" in result.stdout
