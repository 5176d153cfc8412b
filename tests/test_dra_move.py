"""A pool moving between the device plugin and NVIDIA's DRA driver in place (`allocation` with
the extended-resource bridge): the re-partitioning Job's switch step, the real script with /bin/sh
and kubectl against the fake API server, whose nodes run both plugins as their labels say (the
GPU Operator's device plugin while `nvidia.com/gpu.deploy.device-plugin` is not `false`, the DRA
kubelet plugin while `mig-inference.io/allocation=dra`), and which records any moment a node's
devices were offered by both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mig_inference.kube.repartition import RepartitionTarget, repartition_script
from mig_inference.names.labels import (
    CORDONED_FOR_ANNOTATION,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_NODE_LABEL,
    MIG_CONFIG_LABEL,
    POOL_LABEL,
)
from tests.fake_apiserver import AGENTS, DRA_NAMESPACE, FakeCluster, run_script

TWO = ("3g.40gb", "3g.40gb")
SEVEN = ("1g.10gb",) * 7
CONFIGS = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN), "all-disabled": (None, None)}
LAYOUT = "all-3g.40gb"
RESOURCE = "nvidia.com/mig-3g.40gb"
PLANNED = {RESOURCE: 4}


@pytest.fixture(params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every scenario against both models of a node's GPU agents."""
    monkeypatch.setattr("tests.fake_apiserver.default_agents", request.param)
    return str(request.param)


def pool(*names: str, dra: bool) -> FakeCluster:
    cluster = FakeCluster(CONFIGS)
    for name in names:
        cluster.add_node(name, LAYOUT, labels={POOL_LABEL: "p"}, dra=dra)
    return cluster


def move(
    cluster: FakeCluster,
    tmp_path: Path,
    *,
    to_dra: bool,
    config: str = LAYOUT,
    planned: dict[str, int] | None = None,
) -> subprocess.CompletedProcess[str]:
    target = RepartitionTarget(
        "p", config, f"{POOL_LABEL}=p", (), 1, len(cluster.nodes), planned or PLANNED,
        dra=to_dra, dra_namespace=DRA_NAMESPACE if to_dra else "",
    )  # fmt: skip
    env = {**target.env(60, "gpu-operator"), "REPARTITION_POLL_SECONDS": "0",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "ADVERTISE_TIMEOUT_SECONDS": "30"}  # fmt: skip
    return run_script(cluster, tmp_path, repartition_script(), env)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def settled(cluster: FakeCluster) -> None:
    """The replicas the last node's drain sent away land and load (the Job does not wait for
    them after its last node)."""
    for _ in range(20):
        cluster.tick()


def allocation_of(cluster: FakeCluster, node: str) -> tuple[str | None, str | None]:
    labels = cluster.node_labels(node)
    return labels.get(DRA_NODE_LABEL), labels.get(DEVICE_PLUGIN_DEPLOY_LABEL)


@pytest.mark.usefixtures("agents")
def test_the_detector_sees_a_node_offered_twice() -> None:
    """The check the scenarios rely on can fail: a node relabelled for DRA with its device plugin
    left on offers its slices twice once the kubelet plugin publishes."""
    cluster = pool("n1", dra=False)
    cluster.relabel("n1", {DRA_NODE_LABEL: "dra"})
    for _ in range(10):
        cluster.tick()
    assert cluster.offered_twice


@pytest.mark.usefixtures("agents")
def test_a_pool_moves_to_dra_node_by_node_and_keeps_serving(tmp_path: Path) -> None:
    cluster = pool("n1", "n2", dra=False)
    cluster.add_service("inference", "chat", 6, RESOURCE, pool="p", on={"n1": 3, "n2": 3}, start=3)
    result = move(cluster, tmp_path, to_dra=True)
    assert result.returncode == 0, output(result)
    for node in ("n1", "n2"):
        assert allocation_of(cluster, node) == ("dra", "false")
        assert cluster.published[node] == PLANNED
        assert not cluster.cordoned(node)
        assert CORDONED_FOR_ANNOTATION not in cluster.annotations(node)
        assert cluster.node_labels(node)[MIG_CONFIG_LABEL] == LAYOUT
    assert cluster.offered_twice == []
    # Only the plugins changed: no MIG manager run, no restart of the new kubelet plugin.
    assert not any("mig.config=" in c for c in cluster.changes), cluster.changes
    assert not any("mig-manager pod restarted" in e for e in cluster.events)
    assert not any(c.startswith(f"delete {DRA_NAMESPACE}/") for c in cluster.changes)
    # One node at a time: n2 is cordoned only after n1 is back in service.
    first_uncordon = next(i for i, c in enumerate(cluster.changes) if c.startswith("patch n1")
                          and "uncordon" in c)  # fmt: skip
    n2_cordon = next(i for i, c in enumerate(cluster.changes) if c.startswith("patch n2")
                     and " cordon" in c)  # fmt: skip
    assert first_uncordon < n2_cordon, cluster.changes
    assert "device plugin turned off (allocation device-plugin -> dra)" in result.stdout
    # The replicas of the node being switched are away, no more: 6 replicas on 2 x 4 slices.
    assert cluster.least_ready("chat") >= 6 - 4
    settled(cluster)
    assert cluster.ready_of("chat") == 6


@pytest.mark.usefixtures("agents")
def test_the_device_plugin_is_off_before_the_kubelet_plugin_is_on(tmp_path: Path) -> None:
    cluster = pool("n1", dra=False)
    result = move(cluster, tmp_path, to_dra=True)
    assert result.returncode == 0, output(result)
    patches = [c for c in cluster.changes if c.startswith("patch n1")]
    off = next(i for i, c in enumerate(patches) if f"{DEVICE_PLUGIN_DEPLOY_LABEL}=false" in c)
    on = next(i for i, c in enumerate(patches) if f"{DRA_NODE_LABEL}=dra" in c)
    assert off < on, patches


@pytest.mark.usefixtures("agents")
def test_a_pool_moves_back_to_the_device_plugin(tmp_path: Path) -> None:
    cluster = pool("n1", "n2", dra=True)
    cluster.add_service("inference", "chat", 6, RESOURCE, pool="p", on={"n1": 3, "n2": 3}, start=3)
    result = move(cluster, tmp_path, to_dra=False)
    assert result.returncode == 0, output(result)
    for node in ("n1", "n2"):
        assert allocation_of(cluster, node) == (None, "true")
        assert node not in cluster.published
        assert not cluster.cordoned(node)
    assert cluster.offered_twice == []
    assert not any("mig.config=" in c for c in cluster.changes), cluster.changes
    assert "DRA kubelet plugin turned off (allocation dra -> device-plugin)" in result.stdout
    assert cluster.least_ready("chat") >= 6 - 4
    settled(cluster)
    assert cluster.ready_of("chat") == 6


@pytest.mark.usefixtures("agents")
def test_a_move_and_a_new_layout_in_one_run(tmp_path: Path) -> None:
    """The switch comes first; the kubelet plugin that starts then finds the old layout, so it is
    restarted once the MIG manager reports success, and the node counts once it publishes the
    new one."""
    cluster = pool("n1", dra=False)
    result = move(cluster, tmp_path, to_dra=True, config="all-1g.10gb",
                  planned={"nvidia.com/mig-1g.10gb": 14})  # fmt: skip
    assert result.returncode == 0, output(result)
    assert allocation_of(cluster, "n1") == ("dra", "false")
    assert cluster.published["n1"] == {"nvidia.com/mig-1g.10gb": 14}
    assert "restarted its DRA kubelet plugin" in result.stdout
    assert cluster.offered_twice == []


@pytest.mark.usefixtures("agents")
def test_a_device_plugin_that_does_not_stop_stops_the_job_with_the_node_cordoned(
    tmp_path: Path,
) -> None:
    """The kubelet keeps reporting the old allocatable: the DRA plugin is never turned on."""
    cluster = pool("n1", dra=False)
    cluster.freeze_status("n1")
    result = move(cluster, tmp_path, to_dra=True)
    assert result.returncode == 1
    assert "the device plugin still offers its devices" in result.stdout
    assert DRA_NODE_LABEL not in cluster.node_labels("n1")
    assert cluster.cordoned("n1")
    assert cluster.offered_twice == []


# -- the plan: which moves are in place -------------------------------------------------------
BRIDGE = {"kubernetesVersion": "1.36", "extendedResources": True}


def versions(
    cloud: str, dra: dict[str, object] | None = None, **pool: object
) -> tuple[dict[str, object], dict[str, object]]:
    """The same pool on the device plugin, then on DRA (`dra`: its stack's section)."""
    from tests.test_rollout import stack

    plugin = stack(cloud, **pool)
    moved = stack(cloud, allocation="dra", **pool)
    moved["dra"] = dict(dra if dra is not None else BRIDGE)
    return plugin, moved


def physical(config: dict[str, object]) -> str:
    from mig_inference.plan import plan_stack
    from mig_inference.spec import parse_stack
    from mig_inference.versions import GPU_OPERATOR_VERSION

    plan = plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))
    [found] = plan.pools
    return found.physical_name


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_with_the_bridge_an_in_place_pool_keeps_its_generation(cloud: str) -> None:
    plugin, moved = versions(cloud, rollout="in-place")
    assert physical(plugin) == physical(moved)


@pytest.mark.parametrize(
    ("dra", "pool"),
    [
        # Claims in the pod spec: the replicas change with the nodes.
        ({"kubernetesVersion": "1.36"}, {"rollout": "in-place"}),
        # A blue/green pool brings new nodes for every change of its devices.
        (BRIDGE, {}),
    ],
)
def test_otherwise_the_move_is_a_new_generation(
    dra: dict[str, object], pool: dict[str, object]
) -> None:
    plugin, moved = versions("gke", dra, **pool)
    assert physical(plugin) != physical(moved)
