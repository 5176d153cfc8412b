"""The device plugin's config keys over a `pulumi up` (the rollout simulator's model,
`mig_inference/rollout/plugin_configs.py`): a key exists as long as a node's sharing label names
it, so no device plugin that restarts during the update waits for a key that is gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from msgspec.structs import replace

from mig_inference.plan import plan_stack
from mig_inference.rollout.cluster import TICK, Cluster, Timings
from mig_inference.rollout.facts import config_names, pool_facts
from mig_inference.rollout.mig_manager import Durations
from mig_inference.rollout.model import Node
from mig_inference.rollout.plugin_configs import (
    CONFIG_MAP,
    CONFIG_MAP_PATCH,
    RELEASE,
    PluginConfigs,
)
from mig_inference.rollout.rendered import program_of
from mig_inference.rollout.resources import Program, Resource
from mig_inference.rollout.simulator import simulate
from mig_inference.rollout.steps import Op
from mig_inference.spec.files import load_stack
from mig_inference.versions import GPU_OPERATOR_CHART
from tests import in_process
from tests.fake_apiserver import steps_of
from tests.mocked import stack_rendering
from tests.nvidia_node import (
    CONFIG_LABEL,
    OPERANDS,
    PAUSED,
    PLUGIN,
    PLUGIN_CONFIG_LABEL,
    STATE_LABEL,
    NvidiaNode,
)
from tests.rollout.test_node_models import CONFIGS, DURATIONS
from tests.rollout.test_rollout import stack, transition

SHARED = {"timeSlicing": {"replicas": 2, "profiles": ["1g.10gb"]}}


def _sliced(cloud: str = "eks", **pool: Any) -> dict[str, Any]:
    config = stack(cloud, replicas=8, **{"mig": "all-balanced", "sharing": SHARED, **pool})
    config["services"][0]["profile"] = "1g.10gb"
    config["services"][0]["memoryGiB"] = 3
    return config


def test_a_plugin_restarted_by_a_layout_change_finds_its_nodes_config() -> None:
    """An in-place re-partition pauses and restarts the device plugin while the node still names
    its old sharing key (the pool is relabelled after the Job): the old key is still there."""
    v1 = _sliced(rollout="in-place")
    v2 = _sliced(rollout="in-place", mig="all-3g.40gb")
    v2["pools"][0]["sharing"] = {"timeSlicing": {"replicas": 2, "profiles": ["3g.40gb"]}}
    v2["services"][0]["profile"] = "3g.40gb"
    outcome, _ = transition(v1, v2)
    assert outcome.failure is None
    [pool] = outcome.pools.values()
    # The MIG manager ran on the node (its device plugin paused and started again).
    assert any("mig.config.state=pending" in e for _, e in outcome.events)
    assert pool.config_missing == [] and pool.plugin_blocked == []
    assert not [e for _, e in outcome.events if "device plugin cannot start" in e]


@pytest.mark.parametrize("cloud", ["eks", "gke", "oke"])
def test_a_sharing_change_never_leaves_a_node_naming_a_missing_key(cloud: str) -> None:
    v1 = _sliced(cloud)
    v2 = _sliced(cloud, sharing={"timeSlicing": {"replicas": 3, "profiles": ["1g.10gb"]}})
    for version in (v1, v2):  # one memory share on both sides (changes/shared_memory.py)
        version["services"][0]["gpuMemoryUtilization"] = 0.3
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    assert [p.name for p in changes.pools] == ["h100"]
    for pool in outcome.pools.values():
        assert pool.config_missing == [] and pool.plugin_blocked == []


def _resource(type_token: str, name: str, inputs: dict[str, Any]) -> Resource:
    return Resource(type_token, name, inputs)


def test_the_model_reads_the_chart_and_the_patches() -> None:
    """The release names the ConfigMap; the chart's own keys (create: true) change with the
    release, a patch's keys come and go with the patch."""
    chart = {"chart": "gpu-operator", "namespace": "gpu-operator"}
    created = _resource(
        "kubernetes:helm.sh/v3:Release", "op",
        {**chart, "values": {"devicePlugin": {"config": {
            "name": "cm", "create": True, "data": {"a": "x"}}}}},
    )  # fmt: skip
    owned = _resource(
        "kubernetes:helm.sh/v3:Release",
        "op",
        {**chart, "values": {"devicePlugin": {"config": {"name": "own", "create": False}}}},
    )
    meta = {"name": "own", "namespace": "gpu-operator"}
    base = _resource("kubernetes:core/v1:ConfigMap", "base", {"metadata": meta, "data": {"d": ""}})
    patch = _resource(
        "kubernetes:core/v1:ConfigMapPatch", "b", {"metadata": meta, "data": {"b": ""}}
    )
    configs = PluginConfigs()
    assert configs.known() is None  # no config manager: any label goes
    configs.apply(created)
    assert configs.known() == frozenset({"a"})
    for resource in (base, patch, owned):
        configs.apply(resource)
    assert configs.known() == frozenset({"d", "b"})
    configs.remove(patch)
    assert configs.known() == frozenset({"d"})


def test_diff_reports_no_plugin_waiting_for_a_config(tmp_path: Path) -> None:
    """`diff --json` (the command, in this process), on the layout-and-sharing change above."""
    v1 = _sliced(rollout="in-place")
    v2 = _sliced(rollout="in-place", mig="all-3g.40gb")
    v2["pools"][0]["sharing"] = {"timeSlicing": {"replicas": 2, "profiles": ["3g.40gb"]}}
    v2["services"][0]["profile"] = "3g.40gb"
    files = []
    for name, config in (("deployed", v1), ("test", v2)):
        path = tmp_path / f"Pulumi.{name}.yaml"
        body = {f"mig-inference:{key}": value for key, value in config.items()}
        path.write_text(yaml.safe_dump({"config": body}))
        files.append(path)
    result = in_process.mig("diff", "--stack-file", str(files[1]), "--deployed", str(files[0]),
                            "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    [pool] = json.loads(result.stdout)["pools"]
    assert (pool["nodes_plugin_config_missing"], pool["nodes_plugin_blocked"]) == ([], [])


def test_the_simulators_plugin_agrees_with_nvidias_model() -> None:
    """The story of tests/rollout/test_node_models.py's config-manager test, told to the simulator's
    cluster and to the model written from NVIDIA's source: the old key leaves the ConfigMap, a
    running plugin keeps serving, one restarted by a MIG manager run (its deploy label paused,
    then back) advertises nothing until the node names a known key."""
    served = {"nvidia.com/mig-3g.40gb": 4}
    labels = {CONFIG_LABEL: "all-3g.40gb", STATE_LABEL: "success", PLUGIN_CONFIG_LABEL: "p-old",
              **dict.fromkeys(OPERANDS, "true")}  # fmt: skip
    cluster = Cluster(
        Timings(mig_manager=replace(Durations(), plugin_start=20.0)),
        lambda _node, config: dict(served) if config else {},
        lambda _node: {"all-3g.40gb": CONFIGS["all-3g.40gb"]},
        lambda _node, _layout: "all-3g.40gb",
        plugin_configs=frozenset({"p-old"}),
    )
    cluster.add_node(Node("n", dict(labels), [], gpus=2), applied="all-3g.40gb")
    nvidia = NvidiaNode(CONFIGS, CONFIGS["all-3g.40gb"], dict(labels), steps=steps_of(DURATIONS),
                        plugin_configs={"p-old"})  # fmt: skip

    def both(seconds: float) -> tuple[dict[str, int], dict[str, int]]:
        for _ in range(int(seconds // TICK)):
            cluster.tick()
        nvidia.advance(nvidia.now + seconds)
        return cluster.nodes["n"].devices, nvidia.advertised()

    def relabel(changes: dict[str, str]) -> None:
        cluster.set_labels("n", dict(changes))
        nvidia.observe({**nvidia.labels, **changes})

    assert both(30) == (served, served)
    cluster.plugin_configs = frozenset({"p-new"})
    nvidia.plugin_configs = {"p-new"}
    assert both(30) == (served, served)  # only the sidecar exits
    relabel({PLUGIN: PAUSED})  # a MIG manager run stops the plugin's pod
    both(30)
    relabel({PLUGIN: "true"})
    assert both(60) == ({}, {})  # stuck in config-manager-init
    relabel({PLUGIN_CONFIG_LABEL: "p-new"})
    assert both(60) == (served, served)


def _chart_owned(program: Program) -> Program:
    """The program as the chart-owned ConfigMap had it: the configs in the release's values
    (`create: true`), no ConfigMap or patches of the program's own."""
    old = Program()
    data = {}
    for resource in program:
        if resource.type in (CONFIG_MAP, CONFIG_MAP_PATCH) and "device-plugin" in resource.name:
            data.update({k: v for k, v in resource.inputs["data"].items() if k != "default"})
    for resource in program:
        if resource.type in (CONFIG_MAP, CONFIG_MAP_PATCH) and "device-plugin" in resource.name:
            continue
        if resource.type == RELEASE and resource.inputs.get("chart") == "gpu-operator":
            values = dict(resource.inputs["values"])
            values["devicePlugin"] = {
                "config": {
                    "name": "mig-inference-device-plugin-config",
                    "create": True,
                    "data": data,
                }
            }
            resource = replace(resource, inputs={**resource.inputs, "values": values})
        old.add(resource)
    return old


@pytest.mark.parametrize("name", ["eks-g6e-timeslice", "eks-h100-mig-timeslice"])
def test_the_upgrade_from_the_chart_owned_config_map_leaves_no_key_missing(name: str) -> None:
    """The first `pulumi up` after the upgrade: the program's ConfigMap and patches are created,
    then the release points the device plugin at them (the chart's ConfigMap goes with it)."""
    plan = plan_stack(load_stack(name))
    after = program_of(stack_rendering(name))
    before = _chart_owned(after)
    outcome = simulate(before, after, pool_facts(plan), stack=name, project="mig-inference",
                       configs=(config_names(plan), config_names(plan)))  # fmt: skip
    assert outcome.failure is None
    created = {s.key[0] for s in outcome.plan.forward if s.op is Op.CREATE}
    assert {CONFIG_MAP, CONFIG_MAP_PATCH} <= created
    updated = [s.key for s in outcome.plan.forward if s.op is Op.UPDATE]
    assert [key for key in updated if key[0] == RELEASE]
    for pool in outcome.pools.values():
        assert pool.config_missing == [] and pool.plugin_blocked == []


def _operator_release(create: bool, data: dict[str, str]) -> Resource:
    config = {"name": "plugin-config", "create": create, "data": data}
    return Resource(RELEASE, "gpu-operator", {"chart": GPU_OPERATOR_CHART,
                    "namespace": "gpu-operator", "values": {"devicePlugin": {"config": config}}})  # fmt: skip


def _config_map(kind: str, resource: str, namespace: str, name: str, *keys: str) -> Resource:
    metadata = {"namespace": namespace, "name": name}
    return Resource(kind, resource, {"metadata": metadata, "data": dict.fromkeys(keys, "{}")})


def test_the_plugin_finds_the_keys_of_the_config_map_it_reads_and_no_other() -> None:
    """With `create: false` the chart renders no key of its own (its `data` is ignored): the keys
    are those the program's ConfigMap and patches put in that ConfigMap, not in another one
    (another name, or the same name in another namespace)."""
    configs = PluginConfigs()
    configs.apply(_operator_release(create=False, data={"ignored-by-the-chart": "{}"}))
    configs.apply(_config_map(CONFIG_MAP, "base", "gpu-operator", "plugin-config", "default"))
    configs.apply(_config_map(CONFIG_MAP_PATCH, "sliced", "gpu-operator", "plugin-config", "ts-2"))
    configs.apply(_config_map(CONFIG_MAP, "other", "gpu-operator", "another-config", "elsewhere"))
    configs.apply(_config_map(CONFIG_MAP, "same-name", "default", "plugin-config", "other-ns"))
    assert configs.known() == frozenset({"default", "ts-2"})


def test_with_create_the_chart_puts_its_own_keys_in_the_config_map() -> None:
    configs = PluginConfigs()
    configs.apply(_operator_release(create=True, data={"default": "{}", "ts-4": "{}"}))
    assert configs.known() == frozenset({"default", "ts-4"})
