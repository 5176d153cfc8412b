"""In-place re-partitioning, run for real with /bin/sh against a fake kubectl that simulates the
MIG manager, pods holding slices and PodDisruptionBudgets."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mig_inference.plan import plan_stack
from mig_inference.repartition import RepartitionTarget, repartition_script, repartition_targets
from mig_inference.stackfile import load_stack
from tests.scripts import run_script

POOL = "mig-inference.io/pool"
CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"
TARGET = "all-1g.10gb"


def gpu_node(after_relabel: list[str], config: str = "all-balanced") -> dict[str, Any]:
    return {"labels": {POOL: "p", CONFIG: config, STATE: "success"},
            "after_relabel": after_relabel}  # fmt: skip


def pod(name: str, node: str, resource: str = "nvidia.com/mig-3g.40gb", refusals: int = 0) -> Any:
    return {"namespace": "inference", "name": name, "node": node, "refusals": refusals,
            "limits": {"cpu": "4", "memory": "8Gi", resource: "1"}}  # fmt: skip


def run(
    tmp_path: Path,
    nodes: dict[str, Any],
    pods: list[dict[str, Any]],
    max_unavailable: int = 1,
    timeout: int = 30,
    pending_limit: int = 30,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    target = RepartitionTarget("p", TARGET, f"{POOL}=p", (), max_unavailable, len(nodes))
    env = {**target.env(timeout), "REPARTITION_POLL_SECONDS": "0",
           "PENDING_LIMIT_SECONDS": str(pending_limit)}  # fmt: skip
    return run_script(tmp_path, repartition_script(), {"nodes": nodes, "pods": pods}, env)


def test_one_node_at_a_time_evicting_only_pods_that_hold_slices(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["pending", "pending", "success"]),
             "n2": gpu_node(["rebooting", "pending", "success"])}  # fmt: skip
    pods = [pod("llm-a", "n1"), pod("llm-b", "n2"), pod("sidecar", "n1", resource="cpu"),
            pod("whole", "n2", resource="nvidia.com/gpu")]  # fmt: skip
    result, state = run(tmp_path, nodes, pods)
    assert result.returncode == 0, result.stdout + result.stderr
    assert state["log"] == [
        "cordon n1", "evict inference/llm-a",
        f"label n1 {CONFIG}={TARGET} {STATE}-", "uncordon n1",
        "cordon n2", "evict inference/llm-b", "evict inference/whole",
        f"label n2 {CONFIG}={TARGET} {STATE}-", "uncordon n2",
    ]  # fmt: skip
    assert [p["name"] for p in state["pods"]] == ["sidecar"]
    assert all(n["labels"][CONFIG] == TARGET for n in state["nodes"].values())
    assert f"re-partitioned to {TARGET}: n1 n2" in result.stdout


def test_max_unavailable_takes_nodes_in_batches(tmp_path: Path) -> None:
    nodes = {name: gpu_node(["pending", "success"]) for name in ("n1", "n2", "n3")}
    result, state = run(tmp_path, nodes, [], max_unavailable=2)
    assert result.returncode == 0, result.stdout
    cordons = [entry for entry in state["log"] if entry.startswith(("cordon", "uncordon"))]
    assert cordons == ["cordon n1", "cordon n2", "uncordon n1", "uncordon n2",
                       "cordon n3", "uncordon n3"]  # fmt: skip


def test_an_eviction_refused_by_a_pdb_is_retried(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["pending", "success"])}
    result, state = run(tmp_path, nodes, [pod("guarded", "n1", refusals=2)])
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("eviction of inference/guarded refused (retrying)") == 2
    assert "disruption budget" in result.stdout
    assert "evict inference/guarded" in state["log"]


def test_a_pdb_that_never_yields_stops_before_relabelling(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["success"]), "n2": gpu_node(["success"])}
    result, state = run(tmp_path, nodes, [pod("guarded", "n1", refusals=-1)], timeout=0)
    assert result.returncode == 1
    assert "STOPPED at node n1" in result.stdout and "inference/guarded" in result.stdout
    assert "left untouched (still on their old config): n2" in result.stdout
    assert state["nodes"]["n1"]["labels"][CONFIG] == "all-balanced"  # never relabelled
    assert state["nodes"]["n1"]["unschedulable"] is True
    assert not any("n2" in entry for entry in state["log"])


def test_failed_stops_naming_the_node_and_leaves_the_rest(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["pending", "failed"]), "n2": gpu_node(["success"]),
             "n3": gpu_node(["success"])}  # fmt: skip
    result, state = run(tmp_path, nodes, [pod("llm", "n2")])
    assert result.returncode == 1
    assert (
        f"STOPPED at node n1: nvidia.com/mig.config.state=failed (config {TARGET})" in result.stdout
    )
    assert "left untouched (still on their old config): n2 n3" in result.stdout
    assert not any("n2" in entry or "n3" in entry for entry in state["log"])
    assert [p["name"] for p in state["pods"]] == ["llm"]


def test_a_pending_that_does_not_move_stops(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["pending"] * 1000)}
    result, _ = run(tmp_path, nodes, [], pending_limit=0)
    assert result.returncode == 1
    assert "STOPPED at node n1: nvidia.com/mig.config.state=pending for 0s" in result.stdout


def test_times_out_while_rebooting(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["rebooting"] * 1000)}
    result, _ = run(tmp_path, nodes, [], timeout=0)
    assert result.returncode == 1
    assert (
        "STOPPED at node n1: timed out after 0s (nvidia.com/mig.config.state=rebooting)"
        in result.stdout
    )


def test_the_old_success_is_cleared_so_it_cannot_pass(tmp_path: Path) -> None:
    # The MIG manager has not reacted yet (no scripted state): the cleared state must not read
    # as success, so the Job waits and times out instead of uncordoning an unconfigured node.
    nodes = {"n1": gpu_node([])}
    result, state = run(tmp_path, nodes, [], timeout=0)
    assert result.returncode == 1 and "STATE_LABEL" not in result.stdout
    assert "(nvidia.com/mig.config.state=unset)" in result.stdout
    assert "uncordon n1" not in state["log"]


def test_a_node_that_joins_during_the_roll_out_is_repartitioned_too(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node(["pending", "success"]),
             "new": {**gpu_node(["pending", "success"]), "joins_after": "n1"}}  # fmt: skip
    result, state = run(tmp_path, nodes, [])
    assert result.returncode == 0, result.stdout
    assert state["nodes"]["new"]["labels"][CONFIG] == TARGET
    assert "re-partitioned to all-1g.10gb: n1 new" in result.stdout


def test_a_node_cordoned_before_stays_cordoned(tmp_path: Path) -> None:
    nodes = {"n1": {**gpu_node(["success"]), "unschedulable": True}}
    result, state = run(tmp_path, nodes, [])
    assert result.returncode == 0, result.stdout
    assert "left cordoned as it was" in result.stdout
    assert state["nodes"]["n1"]["unschedulable"] is True


def test_nodes_already_on_the_config_are_skipped(tmp_path: Path) -> None:
    nodes = {"n1": gpu_node([], config=TARGET), "n2": gpu_node(["success"])}
    result, state = run(tmp_path, nodes, [])
    assert result.returncode == 0, result.stdout
    assert f"node n1: already on {TARGET}" in result.stdout
    assert not any("n1" in entry for entry in state["log"])


@pytest.mark.parametrize("stack", ["existing"])
def test_existing_pools_repartition_by_node_name(stack: str) -> None:
    [target] = repartition_targets(plan_stack(load_stack(stack)))
    assert target.node_names == ("gpu-node-01", "gpu-node-02") and target.selector is None
    assert target.env(1800)["REPARTITION_NODES"] == "gpu-node-01 gpu-node-02"


def test_cloud_pools_in_blue_green_have_no_repartition_job() -> None:
    assert repartition_targets(plan_stack(load_stack("gke-h100"))) == []
