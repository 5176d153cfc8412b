"""A pool moving between the device plugin and NVIDIA's DRA driver in place (`allocation` with
the extended-resource bridge): the re-partitioning Job's switch step, the real script with /bin/sh
and kubectl against the fake API server, whose nodes run both plugins as their labels say (the
GPU Operator's device plugin while `nvidia.com/gpu.deploy.device-plugin` is not `false`, the DRA
kubelet plugin while `mig-inference.io/allocation=dra`), and which records any moment a node's
devices were offered by both."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.repartition import RepartitionTarget, repartition_script
from mig_inference.names.labels import (
    CORDONED_FOR_ANNOTATION,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_NODE_LABEL,
    MIG_CONFIG_LABEL,
    POOL_LABEL,
)
from tests import in_process
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
    keeps_requests: bool = True,
    reconfigure: int = 60,
) -> subprocess.CompletedProcess[str]:
    """The Job of pool `p`; `keeps_requests`: the replicas' pods keep their requests across the
    switch (the program's Job with the extended-resource bridge); `reconfigure`: its deadline
    (real seconds) for a node's switch, which a test that expects it to pass keeps short."""
    target = RepartitionTarget(
        "p", config, f"{POOL_LABEL}=p", (), 1, len(cluster.nodes), planned or PLANNED,
        dra=to_dra, dra_namespace=DRA_NAMESPACE if to_dra else "",
        switch_keeps_requests=keeps_requests,
    )  # fmt: skip
    env = {**target.env(60, "gpu-operator"), "REPARTITION_POLL_SECONDS": "1",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "ADVERTISE_TIMEOUT_SECONDS": "30", "RECONFIGURE_TIMEOUT_SECONDS": str(reconfigure)}  # fmt: skip
    return run_script(cluster, tmp_path, repartition_script(), env)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def settled(cluster: FakeCluster) -> None:
    """The replicas the last node's drain sent away land and load (the Job does not wait for
    them after its last node)."""
    for _ in range(20):
        cluster.tick()


def one_node_away_then_all_back(cluster: FakeCluster) -> None:
    """`chat`'s 6 replicas on 2 x 4 slices: the moved node's away at the worst, no more, and all
    back once the cluster settles."""
    assert cluster.least_ready("chat") >= 6 - 4
    settled(cluster)
    assert cluster.ready_of("chat") == 6


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
    # One node at a time: n2, held cordoned from the start, is switched only after n1 is back in
    # service.
    first_uncordon = next(i for i, c in enumerate(cluster.changes) if c.startswith("patch n1")
                          and "uncordon" in c)  # fmt: skip
    n2_before = [c for c in cluster.changes[:first_uncordon] if c.startswith("patch n2")]
    assert len(n2_before) == 1 and n2_before[0].endswith(" cordon"), cluster.changes
    assert "device plugin turned off (allocation device-plugin -> dra)" in result.stdout
    # The replicas of the node being switched are away, no more: 6 replicas on 2 x 4 slices.
    one_node_away_then_all_back(cluster)


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
    one_node_away_then_all_back(cluster)


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
    result = move(cluster, tmp_path, to_dra=True, reconfigure=2)
    assert result.returncode == 1
    assert "the device plugin still offers its devices after 2s (nvidia.com/mig-3g.40gb=4)" in (
        result.stdout
    )
    assert DRA_NODE_LABEL not in cluster.node_labels("n1")
    assert cluster.cordoned("n1")
    assert cluster.offered_twice == []


# -- the plan: which moves are in place -------------------------------------------------------
BRIDGE = {"kubernetesVersion": "1.36", "extendedResources": True}


def versions(
    cloud: str, dra: dict[str, object] | None = None, **pool: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same pool on the device plugin, then on DRA (`dra`: its stack's section)."""
    from tests.rollout.test_rollout import stack

    plugin = stack(cloud, **pool)
    moved = stack(cloud, allocation="dra", **pool)
    moved["dra"] = dict(dra if dra is not None else BRIDGE)
    return plugin, moved


def physical(config: dict[str, Any]) -> str:
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
        # DynamicMIG (the explicit, alpha opt-in) runs no MIG manager, so no Job moves nodes.
        ({**BRIDGE, "dynamicMig": True}, {"rollout": "in-place"}),
    ],
)
def test_otherwise_the_move_is_a_new_generation(
    dra: dict[str, object], pool: dict[str, Any]
) -> None:
    plugin, moved = versions("gke", dra, **pool)
    assert physical(plugin) != physical(moved)


# -- the rollout simulator (`diff`) ----------------------------------------------------------
def cloud_versions(cloud: str, protect: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two nodes of one in-place pool, full (32 replicas on 2 x 16 slices); on DRA with the
    bridge."""
    from tests.rollout.test_rollout import stack

    if cloud == "existing":
        plugin: dict[str, Any] = {
            "cloud": "existing", "cluster": {"name": "lab", "context": "lab"},
            "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8,
                       "nodeNames": ["gpu-a", "gpu-b"], "mig": "all-3g.40gb", "maxPods": 110}],
            "services": [{"name": "chat", "model": "m", "memoryGiB": 8, "replicas": 32,
                          "pool": "h100"}],
        }  # fmt: skip
    else:
        plugin = stack(cloud, replicas=32, protect=protect, rollout="in-place", nodes=2)
    moved = copy.deepcopy(plugin)
    moved["pools"][0]["allocation"] = "dra"
    moved["dra"] = dict(BRIDGE)
    return plugin, moved


@pytest.mark.parametrize("cloud", ["gke", "eks", "existing"])
@pytest.mark.parametrize("reverse", [False, True], ids=["to-dra", "back"])
def test_diff_moves_the_pool_node_by_node_with_no_extra_gpus(cloud: str, reverse: bool) -> None:
    from mig_inference.changes.change_plan import PoolChange, change_warnings
    from tests.rollout.test_rollout import transition

    v1, v2 = cloud_versions(cloud, protect=cloud != "existing")
    if reverse:
        v1, v2 = v2, v1
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None and not outcome.refused, outcome.failure
    [pool] = changes.pools
    allocation = "device-plugin" if reverse else "dra"
    assert pool.change is PoolChange.SWITCHED, pool
    assert [str(f) for f in pool.fields] == [
        f"allocation: {'dra' if reverse else 'device-plugin'} -> {allocation}"
    ]
    assert len(pool.nodes_switched) == 2
    assert all(n.endswith(f"({allocation})") for n in pool.nodes_switched)
    assert pool.extra_gpus == 0 and pool.nodes_created == 0 and pool.nodes_replaced == 0
    assert pool.nodes_offered_twice == [] and pool.nodes_left_cordoned == []
    [chat] = changes.services
    # One node at a time (8 GPUs x 2 slices each): the other node's 16 replicas keep serving.
    assert chat.serving_before == chat.serving_after == 32
    assert chat.min_serving == 16
    assert chat.pending_at_end == 0
    events = [text for _, text in outcome.events]
    first, second = (n.split()[0] for n in pool.nodes_switched)
    on = "DRA kubelet plugin on" if not reverse else "device plugin on"
    # The first node is back in service before the second is cordoned.
    first_on = events.index(f"node {first}: {on}")
    second_off = next(i for i, e in enumerate(events) if e.startswith(f"node {second}: ") and
                      e.endswith(" off"))  # fmt: skip
    assert first_on < second_off, events
    assert any(f"allocation {pool.fields[0].old} -> {allocation} in place" in w
               for w in change_warnings(changes))  # fmt: skip
    # The GPU Operator's device plugin stays on every node until the Job has switched it: off
    # for the whole cluster only after the last node moved to DRA; back on before the first
    # node leaves DRA.
    assert pool.nodes_without_plugin == [], events
    turned = (
        "GPU Operator: its device plugin turned {} for every node (the stack's ClusterPolicy patch)"
    )
    plugin = [i for i, e in enumerate(events) if e.startswith("GPU Operator: its device plugin")]
    last_on = events.index(f"node {second}: {on}")
    if reverse:
        assert [events[i] for i in plugin] == [turned.format("on")], events
        assert plugin[0] < events.index(f"node {first}: DRA kubelet plugin off"), events
    else:
        assert [events[i] for i in plugin] == [turned.format("off")], events
        assert plugin[0] > last_on, events


def beside_a_device_plugin_pool(
    *versions: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    for config in versions:
        config["pools"].append({**config["pools"][0], "name": "plain", "nodes": 1})
        config["pools"][1].pop("allocation", None)
    return versions[0], versions[1]


def test_beside_a_device_plugin_pool_the_move_never_offers_a_slice_twice() -> None:
    from tests.rollout.test_rollout import transition

    outcome, changes = transition(*beside_a_device_plugin_pool(*cloud_versions("gke")))
    assert outcome.failure is None, outcome.failure
    pool = next(p for p in changes.pools if p.name == "h100")
    assert len(pool.nodes_switched) == 2 and pool.nodes_offered_twice == []
    assert pool.extra_gpus == 0


def test_without_the_switch_the_simulator_sees_devices_offered_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check can fail: a Job that turned the DRA kubelet plugin on with the device plugin
    still running would offer the node's slices twice, and `diff` says so. (Beside a pool that
    keeps the device plugin, so the GPU Operator keeps it on.)"""
    from mig_inference.rollout import jobs
    from tests.rollout.test_rollout import _simulated, transition

    def both_on(self: jobs.RepartitionRun, cluster: Any) -> None:
        self.switching = [n for n in self.batch if not self._on_plugin(cluster.nodes[n])]
        self.switched = []
        for name in self.switching:
            cluster.set_labels(name, {DRA_NODE_LABEL: "dra"})

    monkeypatch.setattr(jobs.RepartitionRun, "_switch_off", both_on)
    monkeypatch.setattr(jobs.RepartitionRun, "_unoffered", staticmethod(lambda _: True))
    versions = beside_a_device_plugin_pool(*cloud_versions("gke"))
    _simulated.cache_clear()
    try:
        _, changes = transition(*versions)
    finally:
        _simulated.cache_clear()
    pool = next(p for p in changes.pools if p.name == "h100")
    assert pool.nodes_offered_twice


MOVES = Path(__file__).resolve().parent.parent / "stacks" / "dra-move"


def mig_against_deployed(
    verb: str, current: Path, deployed: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`python -m mig VERB --stack-file CURRENT --deployed DEPLOYED ...`, the command users run,
    in this process (see tests/in_process.py)."""
    return in_process.mig(verb, "--stack-file", str(current), "--deployed", str(deployed), *extra)


@pytest.mark.parametrize("cloud", ["gke", "eks", "existing"])
@pytest.mark.parametrize("to", ["dra", "plugin"])
def test_the_diff_command_shows_the_move(cloud: str, to: str) -> None:
    """`python -m mig diff --json` (the command, in this process), on the stack files of the move (the shipped
    DRA stack's services on two full nodes): exit 0, each node switched in turn, half of every
    service serving at the worst moment, no extra GPUs."""
    deployed = MOVES / f"Pulumi.{cloud}-{'plugin' if to == 'dra' else 'dra'}.yaml"
    current = MOVES / f"Pulumi.{cloud}-{to}.yaml"
    result = mig_against_deployed("diff", current, deployed, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    [pool] = found["pools"]
    allocation = "dra" if to == "dra" else "device-plugin"
    assert pool["change"] == "moved between the device plugin and DRA node by node"
    assert [n.split()[1] for n in pool["nodes_switched"]] == [f"({allocation})"] * 2
    assert pool["nodes_offered_twice"] == [] and pool["nodes_created"] == 0
    assert found["cost"]["extra_gpus_at_peak"] == 0 and found["failure"] is None
    for service in found["services"]:
        assert service["min_serving"] == service["serving_before"] // 2, service
        assert service["serving_after"] == service["serving_before"]


@pytest.mark.parametrize("cloud", ["gke", "eks", "existing"])
def test_the_moved_stacks_render_valid_for_1_37(cloud: str, tmp_path: Path) -> None:
    """The bridge's DeviceClasses (and every other object) of the moved stacks, strict against
    the Kubernetes 1.37 schema, where KEP-5004 is GA."""
    import kubernetes_validate
    import yaml

    from tests.mocked import render_config
    from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS

    raw = yaml.safe_load((MOVES / f"Pulumi.{cloud}-dra.yaml").read_text())["config"]
    config = {key.removeprefix("mig-inference:"): value for key, value in raw.items()}
    config["dra"]["kubernetesVersion"] = "1.37"
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    classes = rendering.of_type("kubernetes:resource.k8s.io/v1:DeviceClass")
    assert {c.inputs["spec"]["extendedResourceName"] for c in classes} == {
        "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb",
    }  # fmt: skip
    for obj in rendering.kubernetes_objects():
        if obj["apiVersion"].split("/")[0] in CUSTOM_RESOURCE_GROUPS:
            continue  # the GPU Operator's ClusterPolicy: tests/rollout/test_dra_move_plugin_order.py
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
