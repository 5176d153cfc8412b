"""The gate Job's wait loop: the real script, run with /bin/sh and the real kubectl against the
fake API server (tests/fake_apiserver.py), whose nodes run the model of NVIDIA's MIG manager."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.gate import GateTarget, gate_script, gate_targets_value
from mig_inference.names.labels import GENERATION_LABEL, MIG_CONFIG_LABEL, POOL_LABEL
from mig_inference.rollout.mig_manager import DEVICE_PLUGIN_LABEL, PAUSED
from tests import fake_apiserver
from tests.fake_apiserver import AGENTS, FakeCluster, run_script

SEVEN = ("1g.10gb",) * 7
TWO = ("3g.40gb", "3g.40gb")
CONFIGS = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN), "all-disabled": (None, None)}
DEVICES = {"all-3g.40gb": {"nvidia.com/mig-3g.40gb": 4},
           "all-1g.10gb": {"nvidia.com/mig-1g.10gb": 14}}  # fmt: skip


@pytest.fixture(autouse=True, params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs against both models of NVIDIA's node agents."""
    monkeypatch.setattr(fake_apiserver, "default_agents", request.param)
    return str(request.param)


def node(cluster: FakeCluster, name: str, pool: str, config: str, state: str = "success",
         generation: str = "g1", **options: Any) -> None:  # fmt: skip
    labels = {POOL_LABEL: pool, GENERATION_LABEL: generation}
    cluster.add_node(name, config, state=state, labels=labels, **options)


def target(pool: str, config: str, count: int, generation: str = "g1") -> GateTarget:
    selector = f"{GENERATION_LABEL}={generation},{POOL_LABEL}={pool}"
    return GateTarget(pool, selector, config, count, DEVICES[config])


def run_gate(
    cluster: FakeCluster, tmp_path: Path, targets: list[GateTarget], timeout: int = 30,
    pending: int = 600, notready: int | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {"GATE_TARGETS": gate_targets_value(targets), "GATE_TIMEOUT_SECONDS": str(timeout),
           "GATE_POLL_SECONDS": "1", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "GATE_PENDING_LIMIT_SECONDS": str(pending), "OPERATOR_NAMESPACE": "gpu-operator",
           "KUBECTL_RETRY_SECONDS": "0"}  # fmt: skip
    if notready is not None:
        env["GATE_NOTREADY_LIMIT_SECONDS"] = str(notready)
    return run_script(cluster, tmp_path, gate_script(), env)


def test_succeeds_when_every_pool_reports_success_with_its_devices(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    node(cluster, "n2", "a", "all-3g.40gb")
    node(cluster, "n3", "b", "all-1g.10gb")
    result = run_gate(
        cluster, tmp_path, [target("a", "all-3g.40gb", 2), target("b", "all-1g.10gb", 1)]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MIG ready: a:2/2 b:1/1" in result.stdout


def test_fails_fast_naming_a_failed_node_that_carries_the_config(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    node(cluster, "n2", "a", "all-3g.40gb", state="failed")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 2)], timeout=5)
    assert result.returncode == 1
    assert (
        "MIG config all-3g.40gb failed on node n2 (pool a): nvidia.com/mig.config.state=failed "
        "with nvidia.com/mig.config=all-3g.40gb" in result.stdout
    )
    # Fast: the first look at the pool ends it, before any wait or time-out.
    assert cluster.requests == ["GET /api/v1/nodes"]
    assert "waiting for" not in result.stdout and "timed out" not in result.stdout


def test_holds_with_a_kubectl_that_asks_the_server_version_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Google Cloud SDK's kubectl (a dispatcher, first on the PATH of many GKE users) asks
    # `GET /version` before every command to pick the client release it runs.
    dispatcher = tmp_path / "dispatcher"
    dispatcher.write_text(
        f"#!/bin/sh\n{fake_apiserver.kubectl_binary()} version --output=json >/dev/null || exit 1\n"
        f'exec {fake_apiserver.kubectl_binary()} "$@"\n'
    )
    dispatcher.chmod(0o755)
    monkeypatch.setenv("KUBECTL", str(dispatcher))
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb", state="failed")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=5)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "MIG config all-3g.40gb failed on node n1" in result.stdout
    assert "/version" in cluster.discovered
    assert cluster.requests == ["GET /api/v1/nodes"]


def test_a_failed_left_by_an_older_layout_does_not_fail_the_gate(tmp_path: Path) -> None:
    # Today's gate failed at once on any `failed`, whatever config the node carried.
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-1g.10gb", state="failed")
    node(cluster, "n2", "a", "all-3g.40gb")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)])
    assert result.returncode == 0, result.stdout
    assert "MIG ready: a:1/1" in result.stdout


def test_a_stale_success_of_the_old_config_never_passes(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-1g.10gb")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert "a:0/1" in result.stdout
    assert "node n1 (pool a): nvidia.com/mig.config=all-1g.10gb" in result.stdout


def test_success_counts_only_with_the_planned_devices(tmp_path: Path) -> None:
    # The label names the config, the state says success, but the GPUs still have the old layout
    # (a success written for an earlier value): today's gate counted it.
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb", hardware=CONFIGS["all-1g.10gb"])
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert (
        "node n1 (pool a): nvidia.com/mig.config.state=success, advertises "
        "'nvidia.com/mig-1g.10gb=14' (planned: 'nvidia.com/mig-3g.40gb=4')" in result.stdout
    )


def test_success_with_paused_operands_does_not_count(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    cluster.relabel("n1", {DEVICE_PLUGIN_LABEL: PAUSED})
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert "advertises 'no GPU devices'" in result.stdout
    assert f"operands paused: {DEVICE_PLUGIN_LABEL}" in result.stdout


def test_operands_left_paused_after_success_get_the_mig_manager_restarted_once(
    tmp_path: Path,
) -> None:
    # v0.15.0: a MIG manager process that completed a reconfigure never restores the operands
    # a later failed run paused; `success` for the same layout then leaves them paused. A new
    # process, finding the layout applied, restores them (reconfigure.go setState).
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    cluster.relabel("n1", {DEVICE_PLUGIN_LABEL: PAUSED})
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "node n1 (pool a): nvidia.com/mig.config.state=success with its operands left paused "
        f"({DEVICE_PLUGIN_LABEL}): the MIG manager's wedge of NVIDIA/gpu-operator#2833; "
        "restarted its MIG manager pod" in result.stdout
    )
    assert [c for c in cluster.changes if c.startswith("delete")] == [
        "delete gpu-operator/nvidia-mig-manager-00001"
    ]
    assert "MIG ready: a:1/1" in result.stdout


def test_paused_operands_do_not_count_while_the_kubelet_still_shows_the_old_devices(
    tmp_path: Path,
) -> None:
    # The device plugin stopped, but the kubelet has not reported since: the node object still
    # shows the planned devices. Only the paused operands tell the node is not serving.
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    cluster.freeze_status("n1")
    cluster.relabel("n1", {DEVICE_PLUGIN_LABEL: PAUSED})
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert (
        "advertises 'nvidia.com/mig-3g.40gb=4' (planned: 'nvidia.com/mig-3g.40gb=4'), operands "
        f"paused: {DEVICE_PLUGIN_LABEL}" in result.stdout
    )


def test_waits_for_a_node_that_is_being_reconfigured(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-1g.10gb")
    cluster.relabel("n1", {MIG_CONFIG_LABEL: "all-3g.40gb"})
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)])
    assert result.returncode == 0, result.stdout
    assert "nvidia.com/mig.config.state=pending" in result.stdout


def test_only_nodes_of_the_current_generation_count(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "old", "a", "all-3g.40gb", generation="g0")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1 and "a:0/1" in result.stdout


def test_times_out_when_nodes_stay_pending(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb", state="pending")
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert (
        "timed out waiting for nvidia.com/mig.config, nvidia.com/mig.config.state=success and the "
        "planned devices: a:0/1" in result.stdout
    )


def test_api_errors_are_retried_until_the_deadline_never_read_as_nodes(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    cluster.fail("GET", "/api/v1/nodes", times=2)
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)])
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("reading its nodes failed (retried until the deadline)") == 2
    assert "MIG ready: a:1/1" in result.stdout


def test_an_api_that_never_answers_times_the_gate_out(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-3g.40gb")
    cluster.fail("GET", "/api/v1/nodes", times=-1)
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1
    assert "a:?/1" in result.stdout and "injected API error" in result.stdout


def test_keeps_waiting_while_no_node_exists_yet(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0)
    assert result.returncode == 1 and "a:0/1" in result.stdout


def test_a_node_wedged_in_pending_gets_its_mig_manager_restarted_once(tmp_path: Path) -> None:
    # NVIDIA/gpu-operator#2833: an operand outlived the MIG manager's wait; its run ended with no
    # state. The operand has gone since, but only a new MIG manager process applies the label.
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-1g.10gb", operands_stuck=True)
    cluster.relabel("n1", {MIG_CONFIG_LABEL: "all-3g.40gb"})
    cluster.settle(20)
    manager = cluster.nodes["n1"].manager
    assert manager is not None and cluster.node_labels("n1")["nvidia.com/mig.config.state"] == (
        "pending"
    )
    manager.operands_stuck = False
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], pending=1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "node n1 (pool a): nvidia.com/mig.config.state=pending for 1s without moving: the MIG "
        "manager's known wedge (NVIDIA/gpu-operator#2833); restarted its MIG manager pod "
        "(nvidia-mig-manager-00001)" in result.stdout
    )
    assert "MIG ready: a:1/1" in result.stdout
    assert [c for c in cluster.changes if c.startswith("delete")] == [
        "delete gpu-operator/nvidia-mig-manager-00001"
    ]


def test_a_node_its_mode_change_left_notready_is_reported_with_the_way_forward(
    tmp_path: Path,
) -> None:
    # NVIDIA/gpu-operator#2415: the MIG manager, with the host's driver, stops and restarts the
    # host's kubelet around a MIG mode change; on AL2023 the node stays NotReady with `success`
    # written and nothing advertised. No restart of a pod cures it: the gate restarts nothing,
    # says what cures it (a new instance, which EKS's node auto repair brings) and keeps waiting.
    cluster = FakeCluster(CONFIGS)
    node(cluster, "n1", "a", "all-disabled", host_gpu_clients=True, kubelet_restart_breaks=True)
    cluster.relabel("n1", {MIG_CONFIG_LABEL: "all-3g.40gb"})
    cluster.settle(200)
    assert cluster.node_labels("n1")["nvidia.com/mig.config.state"] == "success"
    result = run_gate(cluster, tmp_path, [target("a", "all-3g.40gb", 1)], timeout=0, notready=0)
    assert result.returncode == 1
    assert (
        "node n1 is NotReady since its MIG manager ended its run: the known fault of a MIG mode "
        "change with the host's driver, whose kubelet restart leaves containerd's state corrupt "
        "(NVIDIA/gpu-operator#2415; docs/troubleshooting.md). Only a new instance clears it: EKS "
        "node auto repair replaces a node NotReady for 30 minutes" in result.stdout
    ), result.stdout
    assert result.stdout.count("(NVIDIA/gpu-operator#2415;") == 1
    assert (
        "node n1 (pool a): nvidia.com/mig.config.state=success, but the node is NotReady "
        "(NVIDIA/gpu-operator#2415: waiting for its replacement)" in result.stdout
    )
    assert not [c for c in cluster.changes if c.startswith("delete")]
