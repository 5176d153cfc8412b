"""The GPU Operator's device plugin during a move between the device plugin and DRA, in the order
the program applies it: the program run under Pulumi's mocks gives the re-partitioning Job (its
script and environment as rendered) and what turns the operator's device plugin on or off for
every node (the operator's Helm release, the stack's ClusterPolicy patch) with the dependencies
that order them; the Job's real script then runs against the fake API server, whose GPU Operator
deletes the device plugin from every node when its ClusterPolicy says `devicePlugin.enabled:
false`, as NVIDIA's controller does. What the program orders before the Job is applied before
it, what it orders after only once the Job succeeded (Pulumi stops at a failed Job)."""

from __future__ import annotations

import copy
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.repartition import repartition_script
from mig_inference.names.labels import DEVICE_PLUGIN_DEPLOY_LABEL, DRA_NODE_LABEL, POOL_LABEL
from mig_inference.rollout.jobs import job_env
from mig_inference.rollout.rendered import program_of
from mig_inference.rollout.resources import Key, Program, Resource
from tests.fake_apiserver import AGENTS, FakeCluster, run_script
from tests.mocked import render_config

TWO = ("3g.40gb", "3g.40gb")
CONFIGS = {"all-3g.40gb": (TWO,) * 8, "all-disabled": (None,) * 8}
RESOURCE = "nvidia.com/mig-3g.40gb"
RELEASE = "kubernetes:helm.sh/v3:Release"
PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
JOB = "kubernetes:batch/v1:Job"
BRIDGE = {"kubernetesVersion": "1.36", "extendedResources": True}
NODES = ("gpu-a", "gpu-b")


@pytest.fixture(params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("tests.fake_apiserver.default_agents", request.param)
    return str(request.param)


def versions(bridge: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """An existing cluster's pool of two 8-GPU nodes, on the device plugin, then on DRA with the
    extended-resource bridge (or without: the replicas cannot follow, the Job refuses); the
    stack's only pool, so no device-plugin pool is left."""
    plugin: dict[str, Any] = {
        "cloud": "existing", "cluster": {"name": "lab", "context": "lab"},
        "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "nodeNames": list(NODES),
                   "mig": "all-3g.40gb", "maxPods": 110}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 8, "replicas": 4,
                      "pool": "h100"}],
    }  # fmt: skip
    dra = copy.deepcopy(plugin)
    dra["pools"][0]["allocation"] = "dra"
    dra["dra"] = dict(BRIDGE) if bridge else {"kubernetesVersion": "1.36"}
    return plugin, dra


@dataclass(frozen=True)
class Switch:
    """A change of the operator's device plugin for every node, at its place in the program."""

    resource: str
    on: bool
    before_job: bool


def _closure(program: Program, key: Key) -> set[Key]:
    """Everything `key` waits for, directly or through what it waits for."""
    found: set[Key] = set()
    todo = [key]
    while todo:
        for dependency in program.waits_for(todo.pop()):
            if dependency not in found:
                found.add(dependency)
                todo.append(dependency)
    return found


def _rendered_on(resource: Resource) -> bool | None:
    if resource.type == RELEASE:
        plugin = (resource.inputs.get("values") or {}).get("devicePlugin") or {}
        return plugin.get("enabled", True) is not False
    enabled = ((resource.inputs.get("spec") or {}).get("devicePlugin") or {}).get("enabled")
    return enabled if isinstance(enabled, bool) else None


def _operator(program: Program) -> list[Resource]:
    return [
        r
        for r in program
        if (r.type == RELEASE and r.inputs.get("chart") == "gpu-operator") or r.type == PATCH
    ]


def deployed_plugin(program: Program) -> bool:
    """The device plugin as the deployed version left it: its patch, else its release."""
    switches = _operator(program)
    patched = [on for r in switches if r.type == PATCH and (on := _rendered_on(r)) is not None]
    return patched[0] if patched else all(_rendered_on(r) for r in switches)


def switches(program: Program, deployed: Program, job: Resource) -> list[Switch]:
    """What changes the device plugin in `program`, relative to the Job. The release changes it
    only when its rendered value changes (Helm patches a custom resource with what changed
    between the two manifests); the patch sets its value whenever it is applied."""
    before = _closure(program, job.key)
    found = []
    for resource in _operator(program):
        on = _rendered_on(resource)
        if on is None:
            continue
        if resource.type == RELEASE:
            was = [_rendered_on(r) for r in _operator(deployed) if r.type == RELEASE]
            if was == [on]:
                continue
        in_front = resource.key in before
        assert in_front or job.key in _closure(program, resource.key), (
            f"{resource.name} is not ordered against the Job: Pulumi may run it first or last"
        )
        found.append(Switch(resource.name, bool(on), in_front))
    return found


def rendered(tmp_path: Path, config: dict[str, Any], name: str) -> Program:
    directory = tmp_path / name
    directory.mkdir()
    rendering = render_config(directory, config)
    assert rendering.error is None, rendering.error
    return program_of(rendering)


def move(
    tmp_path: Path, cluster: FakeCluster, deployed: dict[str, Any], current: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], list[Switch]]:
    """`pulumi up` from `deployed` to `current`, as far as the operator's device plugin and the
    re-partitioning Job go."""
    old, new = rendered(tmp_path, deployed, "deployed"), rendered(tmp_path, current, "current")
    [job] = [r for r in new.of_type(JOB) if r.name.startswith("repartition-")]
    cluster.set_device_plugin(deployed_plugin(old))
    found = switches(new, old, job)
    for switch in found:
        if switch.before_job:
            cluster.set_device_plugin(switch.on)
    env = {**job_env(job.inputs), "REPARTITION_POLL_SECONDS": "1", "KUBECTL_RETRY_SECONDS": "0",
           "KUBECTL_REQUEST_TIMEOUT": "1s", "ADVERTISE_TIMEOUT_SECONDS": "30",
           "DRAIN_TIMEOUT_SECONDS": "60", "RECONFIGURE_TIMEOUT_SECONDS": "40"}  # fmt: skip
    result = run_script(cluster, tmp_path, repartition_script(), env)
    if result.returncode == 0:
        for switch in found:
            if not switch.before_job:
                cluster.set_device_plugin(switch.on)
    return result, found


def pool(*, dra: bool, start: float) -> FakeCluster:
    cluster = FakeCluster(CONFIGS)
    cluster.dra_client_selector = True  # GPU Operator v26.7.0: the MIG manager pauses it
    for name in NODES:
        cluster.add_node(name, "all-3g.40gb", labels={POOL_LABEL: "h100"}, dra=dra)
    cluster.add_service("inference", "chat", 4, RESOURCE, pool="h100",
                        on={"gpu-a": 2, "gpu-b": 2}, start=start)  # fmt: skip
    return cluster


@pytest.mark.usefixtures("agents")
def test_a_job_that_stops_leaves_the_device_plugin_on_the_nodes_it_did_not_switch(
    tmp_path: Path,
) -> None:
    """The move leaves no device-plugin pool. gpu-a's replicas never turn Ready on its switched
    slices, so the Job stops before gpu-b: gpu-b, still on the device plugin, keeps it (its
    replicas serve, one recreated there could start)."""
    cluster = pool(dra=False, start=10_000)
    result, found = move(tmp_path, cluster, *versions())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "STOPPED at the pool's services" in result.stdout
    assert cluster.node_labels("gpu-a").get(DRA_NODE_LABEL) == "dra"
    assert DRA_NODE_LABEL not in cluster.node_labels("gpu-b")
    assert cluster.unplugged == [], (cluster.unplugged, found, cluster.events)
    assert cluster.device_plugin
    view = cluster.node_view(cluster.nodes["gpu-b"])
    assert view["status"]["allocatable"].get(RESOURCE) == "16", view["status"]
    assert cluster.ready_of("chat") == 2  # gpu-b's, never evicted


@pytest.mark.usefixtures("agents")
def test_a_job_that_refuses_the_move_leaves_the_device_plugin_on_every_node(
    tmp_path: Path,
) -> None:
    """Without the bridge (a `pulumi up` run without `diff`, which refuses it first), the Job
    refuses before it touches a node: every node keeps the device plugin it serves through."""
    cluster = pool(dra=False, start=3)
    result, _ = move(tmp_path, cluster, *versions(bridge=False))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Nothing was cordoned, labelled or evicted" in result.stdout
    assert cluster.unplugged == [] and cluster.device_plugin, cluster.events
    for name in NODES:
        view = cluster.node_view(cluster.nodes[name])
        assert view["status"]["allocatable"].get(RESOURCE) == "16", view["status"]


@pytest.mark.usefixtures("agents")
def test_the_device_plugin_goes_off_for_every_node_only_after_the_job_switched_them(
    tmp_path: Path,
) -> None:
    cluster = pool(dra=False, start=3)
    result, found = move(tmp_path, cluster, *versions())
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(s.on, s.before_job) for s in found] == [(False, False)], found
    for name in NODES:
        assert cluster.node_labels(name)[DEVICE_PLUGIN_DEPLOY_LABEL] == "false"
        assert cluster.node_labels(name)[DRA_NODE_LABEL] == "dra"
    assert cluster.unplugged == [], (cluster.unplugged, cluster.events)
    assert not cluster.device_plugin  # NVIDIA's setup for DRA, once nothing needs the plugin


@pytest.mark.usefixtures("agents")
def test_back_to_the_device_plugin_it_is_on_before_the_job(tmp_path: Path) -> None:
    """From a stack all on DRA (the operator's device plugin off), back: the device plugin is on
    before the Job turns it on node by node, so each switched node advertises its slices."""
    plugin, dra = versions()
    cluster = pool(dra=True, start=3)
    result, found = move(tmp_path, cluster, dra, plugin)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(s.on, s.before_job) for s in found] == [(True, True)], found
    for name in NODES:
        assert DRA_NODE_LABEL not in cluster.node_labels(name)
        view = cluster.node_view(cluster.nodes[name])
        assert view["status"]["allocatable"].get(RESOURCE) == "16", view["status"]
    assert cluster.offered_twice == []


def test_the_patch_is_what_nvidias_cluster_policy_schema_takes() -> None:
    """The patch's object against the ClusterPolicy CRD of the pinned chart: the kind and
    version it serves, cluster-scoped, `spec.devicePlugin.enabled` a boolean (the chart's own
    `templates/clusterpolicy.yaml` renders the same field and the same name)."""
    import jsonschema
    import yaml

    from mig_inference.kube.device_plugin_switch import (
        API_VERSION,
        CLUSTER_POLICY,
        KIND,
        switch_patch,
    )
    from tests.reference import GPU_OPERATOR_CHART, reference_dir

    chart = reference_dir(GPU_OPERATOR_CHART)
    crd = yaml.safe_load((chart / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    group, version = API_VERSION.split("/")
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (group, KIND)
    assert crd["spec"]["scope"] == "Cluster"
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    spec_schema = served["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for on in (True, False):
        patch = switch_patch(on)
        for key, value in patch["spec"].items():
            jsonschema.validate(value, spec_schema[key])
    template = (chart / "templates" / "clusterpolicy.yaml").read_text()
    assert f"name: {CLUSTER_POLICY}\n" in template
    assert "enabled: {{ .Values.devicePlugin.enabled }}" in template
