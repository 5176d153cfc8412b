"""The GPU Operator release and its values per cloud, the MIG-ready gate, and mode mixing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.gpus.layout import Layout, place
from mig_inference.plan import plan_stack
from mig_inference.spec.files import load_stack
from mig_inference.versions import GATE_IMAGE, GPU_OPERATOR_REPO, GPU_OPERATOR_VERSION
from tests.mocked import named, one, release, render_config, stack_rendering
from tests.reference import ROOT, reference_file

RELEASE = "kubernetes:helm.sh/v3:Release"
OPERATOR_STACKS = ["gke-h100", "eks-p4d", "eks-p5-auto", "oke-h100", "existing"]


def values(stack: str) -> dict[str, Any]:
    inputs = release(stack_rendering(stack)).inputs
    result: dict[str, Any] = inputs["values"]
    return result


def _leaf_paths(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(tree, dict) and tree:
        return [p for key, value in tree.items() for p in _leaf_paths(value, (*prefix, key))]
    return [prefix]


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_release_inputs(stack: str) -> None:
    inputs = release(stack_rendering(stack)).inputs
    assert inputs["chart"] == "gpu-operator"
    assert inputs["repositoryOpts"] == {"repo": GPU_OPERATOR_REPO}
    assert inputs["version"] == GPU_OPERATOR_VERSION == "v26.7.0"
    assert inputs["namespace"] == "gpu-operator" and inputs["timeout"] == 1200
    assert values(stack)["mig"] == {"strategy": "mixed"}


@pytest.mark.parametrize("stack", OPERATOR_STACKS)
def test_every_value_path_exists_in_the_pinned_chart(stack: str) -> None:
    chart = yaml.safe_load(reference_file("nvidia/gpu-operator_helm-chart_values.yaml").read_text())
    for path in _leaf_paths(values(stack)):
        node: Any = chart
        for key in path:
            if node == {}:
                break  # a free-form map value (e.g. migManager.config.data): its keys are data
            assert isinstance(node, dict) and key in node, f"{'.'.join(path)} is not a chart value"
            node = node[key]
    flat = {".".join(p) for p in _leaf_paths(values(stack))}
    assert "operator.defaultRuntime" not in flat and "cdi.default" not in flat


def test_per_cloud_values() -> None:
    eks, oke, gke, existing = (
        values("eks-p4d"),
        values("oke-h100"),
        values("gke-h100"),
        values("existing"),
    )
    assert eks["driver"] == {"enabled": False} and eks["toolkit"] == {"enabled": False}
    assert oke["driver"] == {"enabled": False} and "toolkit" not in oke
    assert gke["driver"] == {"enabled": False}
    assert gke["hostPaths"] == {"driverInstallDir": "/home/kubernetes/bin/nvidia"}
    assert gke["toolkit"] == {
        "installDir": "/home/kubernetes/bin/nvidia",
        "env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}],
    }
    assert "driver" not in existing and "toolkit" not in existing
    assert eks["migManager"]["env"] == [{"name": "WITH_REBOOT", "value": "true"}]
    assert existing["migManager"]["env"] == []  # withReboot: false in that stack
    assert eks["dcgmExporter"] == {"serviceMonitor": {"enabled": False}}


def test_gke_prerequisites_only_on_gke() -> None:
    gke = stack_rendering("gke-h100")
    quota = one(gke, "kubernetes:core/v1:ResourceQuota").inputs
    expression = quota["spec"]["scopeSelector"]["matchExpressions"][0]
    assert expression == {
        "scopeName": "PriorityClass",
        "operator": "In",
        "values": ["system-node-critical", "system-cluster-critical"],
    }
    installer = one(gke, "kubernetes:apps/v1:DaemonSet").inputs
    pod = installer["spec"]["template"]["spec"]
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {
        "key": "gke-no-default-nvidia-gpu-device-plugin",
        "operator": "In",
        "values": ["true"],
    } in term["matchExpressions"]
    assert pod["initContainers"][0]["image"] == "cos-nvidia-installer:fixed"
    for stack in ("eks-p4d", "oke-h100", "existing"):
        assert not stack_rendering(stack).of_type("kubernetes:apps/v1:DaemonSet")
        assert not stack_rendering(stack).of_type("kubernetes:core/v1:ResourceQuota")


def test_operands_and_nfd_tolerate_every_taint_so_a_taint_edit_leaves_them_alone(
    tmp_path: Path,
) -> None:
    gke = values("gke-h100")
    for tolerations in (
        gke["daemonsets"]["tolerations"],
        gke["node-feature-discovery"]["worker"]["tolerations"],
    ):
        assert tolerations == [{"operator": "Exists"}]
    # A pool's taint edit does not change the operator's values (no operand restarts).
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text())["config"]
    stack = {key.split(":", 1)[1]: value for key, value in config.items()}
    stack["pools"][0]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]
    edited = release(render_config(tmp_path, stack)).inputs["values"]
    assert edited == gke


def test_named_and_custom_layouts_in_one_stack_share_one_config(tmp_path: Path) -> None:
    """The MIG manager reads only the given ConfigMap: a custom layout next to a named one must
    not leave the named one's nodes without their config."""
    base = {"gpu": "H100-80GB", "machineType": "p5.48xlarge", "nodes": 1}
    config = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"]},
        "pools": [
            {**base, "name": "named", "mig": "all-balanced"},
            {**base, "name": "custom", "mig": {"3g.40gb": 1, "1g.10gb": 4}},
            {"name": "a100", "gpu": "A100-40GB", "machineType": "p4d.24xlarge", "nodes": 1,
             "mig": "all-balanced"},
        ],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    manager = release(rendering).inputs["values"]["migManager"]["config"]
    assert manager["name"] == "mig-inference-mig-parted-config" and manager["create"] is True
    configs = yaml.safe_load(manager["data"]["config.yaml"])["mig-configs"]
    h100, a100 = resolve_gpu("h100"), resolve_gpu("a100-40gb")
    balanced = {tuple(e["device-filter"]): e["mig-devices"] for e in configs["all-balanced"]}
    assert balanced == {
        tuple(h100.pci_device_ids): {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2},
        tuple(a100.pci_device_ids): {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},
    }
    [custom] = configs["custom-1x3g.40gb-4x1g.10gb"]
    assert custom["mig-devices"] == {"3g.40gb": 1, "1g.10gb": 4}
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert {"all-1g.10gb", "all-7g.80gb", "all-1g.5gb", "all-7g.40gb"} <= set(configs)


def test_every_operator_stack_ships_its_mig_parted_config() -> None:
    for stack in ("gke-h100", "eks-p4d", "oke-h100", "existing"):
        config = values(stack)["migManager"]["config"]
        labels = {p.config_name for p in plan_stack(load_stack(stack)).pools}
        document = yaml.safe_load(config["data"]["config.yaml"])
        assert labels <= set(document["mig-configs"]), stack


def test_auto_layout_gets_a_custom_config_naming_the_pool_label() -> None:
    config = values("eks-p5-auto")["migManager"]["config"]
    assert config["name"] == "mig-inference-mig-parted-config" and config["create"] is True
    document = yaml.safe_load(config["data"]["config.yaml"])
    assert document["version"] == "v1"
    plan = plan_stack(load_stack("eks-p5-auto"))
    label = plan.pool("h100-auto").node_labels["nvidia.com/mig.config"]
    entries = document["mig-configs"][label]
    gpu = plan.pool("h100-auto").gpu
    covered = [entry["devices"] for entry in entries]
    assert covered == ["all"] or sorted(i for d in covered for i in d) == list(range(8))
    for entry in entries:
        assert entry["mig-enabled"] is True
        place(gpu, Layout.of(gpu, entry["mig-devices"]))  # every layout is valid
        assert set(entry["device-filter"]) == set(gpu.pci_device_ids)


def test_service_monitor_switch(tmp_path: Path) -> None:
    config = yaml.safe_load(Path("stacks/Pulumi.eks-p4d.yaml").read_text())["config"]
    stripped = {k.split(":", 1)[1]: v for k, v in config.items() if "hfToken" not in k}
    stripped["gpuOperator"] = {"serviceMonitor": True}
    for service in stripped["services"]:
        service.pop("hfTokenSecret", None)
    rendering = render_config(tmp_path, stripped)
    assert rendering.error is None
    assert release(rendering).inputs["values"]["dcgmExporter"] == {
        "serviceMonitor": {"enabled": True}
    }


def test_gate_objects() -> None:
    rendering = stack_rendering("gke-h100")
    job = one(rendering, "kubernetes:batch/v1:Job").inputs
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == GATE_IMAGE
    env = {e["name"]: e["value"] for e in container["env"]}
    generation = plan_stack(load_stack("gke-h100")).pool("h100-mig").generation
    assert env["GATE_TARGETS"] == (
        f"h100-mig mig-inference.io/generation={generation},mig-inference.io/pool=h100-mig "
        "all-3g.40gb 1 nvidia.com/mig-3g.40gb=16"  # 8 H100s x 2
    )
    assert job["spec"]["backoffLimit"] == 0
    role = one(rendering, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").inputs
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    deny = named(
        rendering, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "mig-ready-deny-ingress"
    ).inputs
    assert deny["spec"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mig-ready-gate"}},
        "policyTypes": ["Ingress"],
    }
    binding = one(rendering, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").inputs
    assert binding["subjects"][0]["namespace"] == "gpu-operator"
    options = rendering.options[("kubernetes:batch/v1:Job", "mig-ready-job")]
    assert options.custom_timeouts == ("1920s", "1920s")
    service = rendering.options[("mig-inference:index:InferenceService", "mistral-nemo")]
    assert "mig-ready" in service.depends_on


def test_gate_is_skipped_without_mig(tmp_path: Path) -> None:
    config = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"]},
        "pools": [{"name": "whole", "gpu": "h100", "machineType": "p5.48xlarge", "nodes": 1, "mig": "all-disabled"}],
        "services": [{"name": "big", "model": "m", "memoryGiB": 60, "replicas": 8}],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    assert not rendering.of_type("kubernetes:batch/v1:Job")
    deployment = one(rendering, "kubernetes:apps/v1:Deployment").inputs
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"


def test_gke_native_and_operator_pools_are_kept_apart(tmp_path: Path) -> None:
    base = {"gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1}
    config = {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-c"},
        "pools": [
            {**base, "name": "native", "mig": "all-1g.10gb", "migManager": "gke"},
            {**base, "name": "operator", "mig": "all-balanced"},
        ],
    }
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    native = named(rendering, "gcp:container/nodePool:NodePool", "native").inputs["nodeConfig"][
        "labels"
    ]
    managed = named(rendering, "gcp:container/nodePool:NodePool", "operator").inputs["nodeConfig"][
        "labels"
    ]
    assert native["nvidia.com/gpu.deploy.operands"] == "false"
    assert "nvidia.com/gpu.deploy.operands" not in managed
    assert managed["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    job = one(rendering, "kubernetes:batch/v1:Job").inputs
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["GATE_TARGETS"].startswith("operator ")
    config["pools"][0]["labels"] = {"nvidia.com/gpu.deploy.operands": "true"}  # type: ignore[index]
    refused = render_config(tmp_path, config)
    assert (
        refused.error
        and "pools[0].labels: nvidia.com/gpu.deploy.operands must stay false" in refused.error
    )
