"""DRA pools in the re-partitioning Job and the MIG-ready gate: the real scripts, with /bin/sh and
the real kubectl, against the fake API server, whose DRA nodes run a kubelet plugin that publishes
the layout the GPUs had when it started (NVIDIA's driver in its static MIG mode)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mig_inference.kube.gate import GateTarget, gate_script, gate_targets_value
from mig_inference.kube.repartition import RepartitionTarget, repartition_script
from mig_inference.names.labels import (
    CLIENT_DEPLOY_LABEL,
    CORDONED_FOR_ANNOTATION,
    GENERATION_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from tests.fake_apiserver import AGENTS, DRA_NAMESPACE, FakeCluster, run_script

SEVEN = ("1g.10gb",) * 7
TWO = ("3g.40gb", "3g.40gb")
CONFIGS = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN), "all-disabled": (None, None)}
OLD, TARGET = "all-3g.40gb", "all-1g.10gb"
PLANNED = {"nvidia.com/mig-1g.10gb": 14}
PLUGIN_DELETE = f"delete {DRA_NAMESPACE}/dra-driver-nvidia-gpu-kubelet-plugin-"


def dra_pool(*names: str, config: str = OLD) -> FakeCluster:
    cluster = FakeCluster(CONFIGS)
    for name in names:
        cluster.add_node(name, config, labels={POOL_LABEL: "p"}, dra=True)
    return cluster


def claim_pod(cluster: FakeCluster, name: str, node: str) -> None:
    """A replica holding its slice through a ResourceClaim: no extended resource in its limits."""
    cluster.add_pod("inference", name, node, resource=None)
    cluster.pods[("inference", name)]["spec"]["resourceClaims"] = [
        {"name": "gpu-device", "resourceClaimName": f"{name}-gpu-device-x"}
    ]


@pytest.fixture(params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The scenarios of the MIG manager's pause against both models of a node's GPU agents."""
    monkeypatch.setattr("tests.fake_apiserver.default_agents", request.param)
    return str(request.param)


def bounced_pool(*names: str, config: str = OLD) -> FakeCluster:
    """GPU Operator v26.7.0: the plugin's DaemonSet selects `nvidia.com/gpu.deploy.client=true`,
    which the MIG manager (v0.15.0) pauses around a change."""
    cluster = dra_pool(*names, config=config)
    cluster.dra_client_selector = True
    return cluster


def repartition(
    cluster: FakeCluster, tmp_path: Path, advertise: int = 30, bounced: bool | None = None
) -> subprocess.CompletedProcess[str]:
    target = RepartitionTarget("p", TARGET, f"{POOL_LABEL}=p", (), 1, len(cluster.nodes), PLANNED,
                               dra=True, dra_namespace=DRA_NAMESPACE,
                               plugin_bounced=cluster.dra_client_selector if bounced is None else bounced)  # fmt: skip
    env = {**target.env(30, "gpu-operator"), "REPARTITION_POLL_SECONDS": "1",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "ADVERTISE_TIMEOUT_SECONDS": str(advertise)}  # fmt: skip
    return run_script(cluster, tmp_path, repartition_script(), env)


def repartition_two_claims(
    cluster: FakeCluster, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """A claim holder on each of n1 and n2, the Job run to success: both publish the planned
    slices and are back in service."""
    claim_pod(cluster, "llm-a", "n1")
    claim_pod(cluster, "llm-b", "n2")
    result = repartition(cluster, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for node in ("n1", "n2"):
        assert cluster.published[node] == PLANNED
        assert not cluster.cordoned(node)
    return result


def test_the_plugin_is_restarted_after_success_and_the_node_uncordoned_once_it_publishes(
    tmp_path: Path,
) -> None:
    cluster = dra_pool("n1", "n2")
    result = repartition_two_claims(cluster, tmp_path)
    for node in ("n1", "n2"):
        assert CORDONED_FOR_ANNOTATION not in cluster.annotations(node)
    # n1 cordoned and n2 held (cordoned until its turn); then per node: the claim holder
    # evicted, relabel, the plugin restarted, uncordon (n2 stays cordoned from the hold).
    kinds = [
        c.split(" ")[0] + (" plugin" if c.startswith(PLUGIN_DELETE) else "")
        for c in cluster.changes
    ]
    per_node = ["evict", "patch", "delete plugin", "patch"]
    assert kinds == ["patch", "patch", *per_node * 2], cluster.changes
    assert cluster.changes[1].startswith("patch n2 ") and cluster.changes[1].endswith(" cordon")
    assert cluster.changes[3].endswith(f"{MIG_CONFIG_LABEL}={TARGET} {MIG_STATE_LABEL}-")
    assert (
        "restarted its DRA kubelet plugin (dra-driver-nvidia-gpu-kubelet-plugin-" in result.stdout
    )
    # The node is uncordoned only after the new plugin published the target's slices.
    published = [e for e in cluster.events if "n1 DRA kubelet plugin published" in e]
    assert published and "1g.10gb" in published[0]


def test_with_the_mig_manager_s_pause_the_job_restarts_nothing_and_waits_for_the_new_slices(
    tmp_path: Path,
    agents: str,  # noqa: ARG001
) -> None:
    cluster = bounced_pool("n1", "n2")
    result = repartition_two_claims(cluster, tmp_path)
    for node in ("n1", "n2"):
        assert cluster.node_labels(node)[CLIENT_DEPLOY_LABEL] == "true"
    # n1 cordoned and n2 held; per node: the claim holder evicted, relabel, uncordon; no plugin
    # deleted by the Job.
    per_node = ["evict", "patch", "patch"]
    kinds = [c.split(" ")[0] for c in cluster.changes]
    assert kinds == ["patch", "patch", *per_node * 2], cluster.changes
    assert not [c for c in cluster.changes if c.startswith(PLUGIN_DELETE)]
    assert "restarted its DRA kubelet plugin" not in result.stdout
    # The MIG manager paused the label, the old plugin's slices went, a new plugin published
    # the target's slices after the label came back, before the node was uncordoned.
    n1 = [e for e in cluster.events if " n1 " in e]
    paused = next(
        i for i, e in enumerate(n1) if f"{CLIENT_DEPLOY_LABEL}=paused-for-mig-change" in e
    )
    withdrawn = next(i for i, e in enumerate(n1) if "DRA slices withdrawn" in e)
    back = next(i for i, e in enumerate(n1) if i > paused and f"{CLIENT_DEPLOY_LABEL}=true" in e)
    published = next(i for i, e in enumerate(n1) if "DRA kubelet plugin published" in e)
    assert paused < withdrawn < back < published, n1
    assert "1g.10gb" in n1[published]
    assert not cluster.offered_twice


def test_the_job_s_restart_is_kept_where_the_mig_manager_does_not_pause_the_plugin(
    tmp_path: Path,
    agents: str,  # noqa: ARG001
) -> None:
    """An older GPU Operator (MIG manager before v0.15.0: the plugin does not select the
    client label, or the node has none): the Job restarts the plugin itself."""
    cluster = dra_pool("n1")
    for node in cluster.nodes.values():
        node.labels.pop(CLIENT_DEPLOY_LABEL)
    result = repartition(cluster, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cluster.published["n1"] == PLANNED
    assert len([c for c in cluster.changes if c.startswith(PLUGIN_DELETE)]) == 1
    assert not [e for e in cluster.events if CLIENT_DEPLOY_LABEL in e]


def test_without_the_job_s_restart_or_the_pause_the_slices_stay_stale(tmp_path: Path) -> None:
    """The check can fail: the bounced Job restarts nothing, so on a node whose MIG manager does
    not pause the plugin (no client label), the old slices stay and the Job stops."""
    cluster = dra_pool("n1")
    result = repartition(cluster, tmp_path, advertise=5, bounced=True)
    assert result.returncode == 1
    assert "nvidia.com/mig-3g.40gb=4" in result.stdout and cluster.cordoned("n1")


def test_a_restart_that_fails_stops_and_keeps_the_node_cordoned(tmp_path: Path) -> None:
    cluster = dra_pool("n1")
    cluster.fail("DELETE", f"/api/v1/namespaces/{DRA_NAMESPACE}/pods/.*", times=-1)
    result = repartition(cluster, tmp_path)
    assert result.returncode == 1
    assert "STOPPED at node n1: restarting its DRA kubelet plugin failed" in result.stdout
    assert cluster.cordoned("n1")
    assert f"node n1 stays cordoned ({CORDONED_FOR_ANNOTATION}={TARGET})" in result.stdout


def test_stale_slices_never_count_and_the_advertise_deadline_names_them(tmp_path: Path) -> None:
    # The new plugin never comes back: the node's slices stay those of the old layout.
    cluster = dra_pool("n1")
    cluster.dra_plugins_start = False
    result = repartition(cluster, tmp_path, advertise=5)
    assert result.returncode == 1
    assert "in the ResourceSlices of the DRA driver" in result.stdout
    assert "nvidia.com/mig-3g.40gb=4" in result.stdout and cluster.cordoned("n1")


def test_a_claim_holder_without_extended_resources_is_evicted(tmp_path: Path) -> None:
    cluster = dra_pool("n1")
    claim_pod(cluster, "llm", "n1")
    cluster.add_pod("inference", "sidecar", "n1", resource=None)
    result = repartition(cluster, tmp_path)
    assert result.returncode == 0, result.stdout
    assert "evict inference/llm" in cluster.changes
    assert "evict inference/sidecar" not in cluster.changes


# --- the gate --------------------------------------------------------------------------------


def gate(
    cluster: FakeCluster, tmp_path: Path, timeout: int = 30
) -> subprocess.CompletedProcess[str]:
    selector = f"{GENERATION_LABEL}=g1,{POOL_LABEL}=p"
    target = GateTarget("p", selector, TARGET, len(cluster.nodes), PLANNED, dra=True)
    env = {"GATE_TARGETS": gate_targets_value([target]), "GATE_TIMEOUT_SECONDS": str(timeout),
           "GATE_POLL_SECONDS": "1", "KUBECTL_REQUEST_TIMEOUT": "1s", "DRA_NAMESPACE": DRA_NAMESPACE,
           **({"DRA_PLUGIN_BOUNCED": "1"} if cluster.dra_client_selector else {})}  # fmt: skip
    return run_script(cluster, tmp_path, gate_script(), env)


def new_node(cluster: FakeCluster, name: str, published: tuple[object, ...] | None) -> None:
    cluster.add_node(name, TARGET, labels={POOL_LABEL: "p", GENERATION_LABEL: "g1"}, dra=True,
                     published=published)  # type: ignore[arg-type]  # fmt: skip


def test_the_gate_restarts_a_plugin_that_published_before_the_layout(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    # n1's plugin started while its GPUs still had MIG off; n2's after the layout.
    new_node(cluster, "n1", (None, None))
    new_node(cluster, "n2", None)
    result = gate(cluster, tmp_path)
    assert result.returncode == 0, result.stdout
    assert "MIG ready: p:2/2" in result.stdout
    deleted = [c for c in cluster.changes if c.startswith(PLUGIN_DELETE)]
    assert len(deleted) == 1 and cluster.published["n1"] == PLANNED
    assert "node n1 (pool p): restarted its DRA kubelet plugin" in result.stdout
    assert "published 'nvidia.com/gpu=2', planned 'nvidia.com/mig-1g.10gb=14'" in result.stdout


def test_the_gate_times_out_on_slices_that_never_match(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    new_node(cluster, "n1", (None, None))
    cluster.dra_plugins_start = False
    result = gate(cluster, tmp_path, timeout=3)
    assert result.returncode == 1
    assert "p:0/1" in result.stdout
    assert "its restarted DRA kubelet plugin is not Ready yet" in result.stdout


def test_with_the_pause_the_gate_waits_for_the_plugin_the_mig_manager_brings_back(
    tmp_path: Path,
    agents: str,  # noqa: ARG001
) -> None:
    """A new node whose layout is applied while the gate runs: the MIG manager pauses the
    plugin and brings it back, and the gate restarts nothing."""
    cluster = FakeCluster(CONFIGS)
    cluster.dra_client_selector = True
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p", GENERATION_LABEL: "g1"}, dra=True)
    cluster.relabel("n1", {MIG_CONFIG_LABEL: TARGET, MIG_STATE_LABEL: None})
    result = gate(cluster, tmp_path)
    assert result.returncode == 0, result.stdout
    assert "MIG ready: p:1/1" in result.stdout
    assert not [c for c in cluster.changes if c.startswith(PLUGIN_DELETE)]
    assert cluster.published["n1"] == PLANNED


def test_with_the_pause_the_gate_still_restarts_a_plugin_that_started_before_the_layout(
    tmp_path: Path,
) -> None:
    """A node whose first layout was applied before the operator set the client label: no
    pause, and its Ready plugin keeps the slices it found. The gate's restart is kept for it."""
    cluster = FakeCluster(CONFIGS)
    cluster.dra_client_selector = True
    new_node(cluster, "n1", (None, None))
    result = gate(cluster, tmp_path)
    assert result.returncode == 0, result.stdout
    assert len([c for c in cluster.changes if c.startswith(PLUGIN_DELETE)]) == 1
    assert cluster.published["n1"] == PLANNED
