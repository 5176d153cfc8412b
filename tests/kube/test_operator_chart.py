"""The GPU Operator values of every stack, rendered with NVIDIA's real chart (v26.7.0, with its
CRDs and the NFD subchart, in ../shared): `helm template` and `helm lint` succeed, the rendered
ClusterPolicy validates against the chart's own CRD schema, and every `nvidia.com/mig.config`
label a pool carries names a config of the mig-parted ConfigMap the MIG manager will read, with
NVIDIA's content for that GPU."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mig_inference.gpus.catalog import GpuModel
from mig_inference.kube.operator_values import (
    DEVICE_PLUGIN_CONFIG_MAP,
    DEVICE_PLUGIN_DEFAULT_CONFIG,
    operator_needed,
)
from mig_inference.names.labels import MIG_CONFIG_LABEL
from mig_inference.plan import plan_stack
from mig_inference.spec.files import load_stack, stack_names
from tests.mocked import plugin_configs, release, stack_rendering
from tests.reference import (
    GPU_OPERATOR_CHART,
    helm_binary,
    nvidia_mig_parted_configs,
    reference_dir,
    strict_schema,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
OPERATOR_STACKS = [name for name in stack_names() if operator_needed(plan_stack(load_stack(name)))]


def _values(stack: str) -> dict[str, Any]:
    values: dict[str, Any] = release(stack_rendering(stack)).inputs["values"]
    return values


def _template(values_file: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [helm_binary(), "template", "gpu-operator", str(reference_dir(GPU_OPERATOR_CHART)),
         "--namespace", "gpu-operator", "--values", str(values_file)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("values")
    documents = {}
    for stack in OPERATOR_STACKS:
        values_file = folder / f"{stack}.yaml"
        values_file.write_text(yaml.safe_dump(_values(stack)))
        documents[stack] = _template(values_file)
    return documents


def _cluster_policy_schema() -> dict[str, Any]:
    crd = yaml.safe_load(
        (reference_dir(GPU_OPERATOR_CHART) / "crds" / "nvidia.com_clusterpolicies.yaml").read_text()
    )
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = strict_schema(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return schema


def test_there_are_operator_stacks() -> None:
    assert {"gke-h100", "eks-p4d", "eks-p5-auto", "oke-h100", "existing"} <= set(OPERATOR_STACKS)


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_helm_lint_passes(stack: str, tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(_values(stack)))
    result = subprocess.run(
        [helm_binary(), "lint", str(reference_dir(GPU_OPERATOR_CHART)),
         "--namespace", "gpu-operator", "--values", str(values_file)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ERROR]" not in result.stdout


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_cluster_policy_matches_the_crd_schema(
    stack: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    [policy] = [doc for doc in rendered[stack] if doc["kind"] == "ClusterPolicy"]
    jsonschema.validate(policy, _cluster_policy_schema())
    assert policy["spec"]["mig"] == {"strategy": "mixed"}


def test_the_strict_schema_catches_a_misspelled_value() -> None:
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
              "metadata": {"name": "p"}, "spec": {"mig": {"stratgy": "mixed"}}}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError, match="stratgy"):
        jsonschema.validate(policy, _cluster_policy_schema())


def _mig_parted_config(documents: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    [policy] = [doc for doc in documents if doc["kind"] == "ClusterPolicy"]
    name = policy["spec"]["migManager"]["config"]["name"]
    [configmap] = [
        doc for doc in documents if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == name
    ]
    configs: dict[str, list[dict[str, Any]]] = yaml.safe_load(configmap["data"]["config.yaml"])[
        "mig-configs"
    ]
    return configs


def _entries_for(entries: list[dict[str, Any]], gpu: GpuModel) -> list[dict[str, Any]]:
    """The entries mig-parted would apply on a GPU of this model (by device filter)."""
    return [
        entry
        for entry in entries
        if "device-filter" not in entry or set(gpu.pci_device_ids) & set(entry["device-filter"])
    ]


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_every_pool_label_names_a_config_the_mig_manager_reads(
    stack: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    configs = _mig_parted_config(rendered[stack])
    for pool in plan_stack(load_stack(stack)).pools:
        if not pool.operator_managed or not pool.gpu.mig_capable:
            continue
        label = pool.node_labels[MIG_CONFIG_LABEL]
        assert label in configs, f"{stack}: pool {pool.name} is labelled {label}, not in the config"
        entries = _entries_for(configs[label], pool.gpu)
        assert entries, f"{label} has no entry for {pool.gpu.name}"
        if pool.mig_enabled:
            covered = [e["devices"] for e in entries]
            assert covered == ["all"] or sorted(i for d in covered for i in d) == list(
                range(pool.gpus_per_node)
            )


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_named_configs_carry_nvidias_content(
    stack: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    shipped = nvidia_mig_parted_configs()
    configs = _mig_parted_config(rendered[stack])
    gpus = {
        p.gpu
        for p in plan_stack(load_stack(stack)).pools
        if p.operator_managed and p.gpu.mig_capable
    }
    compared = 0
    for name, entries in configs.items():
        if name.startswith("custom-"):
            continue
        for gpu in gpus:
            mine = _entries_for(entries, gpu)
            theirs = [
                e
                for e in _entries_for(shipped[name], gpu)
                if "device-filter" in e or all(gpu.has_profile(p) for p in e.get("mig-devices", {}))
            ]
            if not mine:
                continue
            strip = ("devices", "mig-enabled", "mig-devices")
            assert [{k: e.get(k) for k in strip} for e in mine] == [
                {k: theirs[0].get(k) for k in strip}
            ], (stack, name, gpu.name)
            compared += 1
    assert compared >= len(gpus) * 3
    assert gpus or stack == "eks-g6e-timeslice"  # the only stack without a MIG GPU


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_every_sharing_label_names_a_device_plugin_config(
    stack: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """The chart points the ClusterPolicy at the program's ConfigMap, with its default key, and
    renders no ConfigMap of that name (Helm would own it and delete it with the release's next
    change); every sharing label names a key of it."""
    shared = [
        p for p in plan_stack(load_stack(stack)).pools if p.operator_managed and p.spec.sharing
    ]
    [policy] = [doc for doc in rendered[stack] if doc["kind"] == "ClusterPolicy"]
    if not shared:
        assert "config" not in policy["spec"]["devicePlugin"] or not policy["spec"]["devicePlugin"][
            "config"
        ].get("name")
        return
    config = policy["spec"]["devicePlugin"]["config"]
    assert config == {"name": DEVICE_PLUGIN_CONFIG_MAP, "default": DEVICE_PLUGIN_DEFAULT_CONFIG}
    assert not [
        doc
        for doc in rendered[stack]
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == config["name"]
    ]
    data = plugin_configs(stack_rendering(stack))
    assert config["default"] in data
    for pool in shared:
        key = pool.node_labels["nvidia.com/device-plugin.config"]
        document = yaml.safe_load(data[key])
        assert document["version"] == "v1"
        resources = document["sharing"]["timeSlicing"]["resources"]
        assert all(r["replicas"] >= 2 for r in resources)
