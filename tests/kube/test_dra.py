"""MIG through DRA: `allocation: dra` pools and the `dra` section, read, planned and rendered.

The stack `gke-h100-dra` and variants of it run under Pulumi's mocks; every Kubernetes object is
validated (strict) against the schema of the version the stack targets, every CEL expression is
parsed and evaluated with a CEL library against devices shaped as NVIDIA's driver publishes them,
and the driver's chart (v0.4.1, ../shared/reference/dra) renders with the values the program
gives it."""

from __future__ import annotations

import copy
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError

from mig_inference.errors import MigErrors
from mig_inference.kube.dra import (
    driver_values,
    plugin_follows_mig_manager,
    profile_classes,
    slice_selector,
)
from mig_inference.kube.gate import gate_targets
from mig_inference.kube.repartition import repartition_targets
from mig_inference.names.labels import (
    CLIENT_DEPLOY_LABEL,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_DRIVER,
    DRA_NODE_LABEL,
    MIG_CONFIG_LABEL,
    MIG_DEVICE_CLASS,
    MIG_MANAGER_DEPLOY_LABEL,
)
from mig_inference.offline_answers import CLUSTER_VERSIONS, FAKE_CALLS
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.rendering import Rendering
from mig_inference.spec import parse_stack
from mig_inference.spec.dra import DYNAMIC_MIG_WARNING, joined_version_problem
from mig_inference.spec.files import stack_path
from mig_inference.versions import DRA_DRIVER_CHART, DRA_DRIVER_VERSION, GPU_OPERATOR_VERSION
from tests.mocked import render_config, stack_rendering
from tests.reference import helm_binary, reference_dir, reference_file

STACK = "gke-h100-dra"
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
EKS_GET_CLUSTER = "aws:eks/getCluster:getCluster"
GKE_GET_CLUSTER = "gcp:container/getCluster:getCluster"
OKE_GET_CLUSTER = "oci:ContainerEngine/getCluster:getCluster"
CHART_DIR = "dra/charts/dra-driver-nvidia-gpu-0.4.1"
SUPPORTED = ("1.34", "1.35", "1.36", "1.37")


def base() -> dict[str, Any]:
    """The DRA stack's config, keys without the namespace (secrets left out)."""
    config = yaml.safe_load(Path(stack_path(STACK)).read_text())["config"]
    return {
        key.removeprefix("mig-inference:"): value
        for key, value in config.items()
        if not isinstance(value, dict) or "secure" not in value
    }


def variant(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(base())
    for key, value in changes.items():
        if key.startswith("pool_"):
            config["pools"][0][key.removeprefix("pool_")] = value
        else:
            config[key] = value
    for service in config["services"]:
        service.pop("hfTokenSecret", None)
    return config


def plan_of(config: dict[str, Any]) -> StackPlan:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def refusal(config: dict[str, Any]) -> str:
    with pytest.raises(MigErrors) as raised:
        plan_of(config)
    return str(raised.value)


# --- reading and refusing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "path", "words"),
    [
        ({"pool_migManager": "gke", "pool_rollout": "blue-green", "pool_mig": "all-3g.40gb"},
         "pools[0].allocation", "GKE's native MIG (and its time-sharing)"),
        ({"pool_sharing": {"timeSlicing": {"replicas": 2}}}, "pools[0].sharing",
         "each claimed by one pod"),
        ({"dra": {"kubernetesVersion": "1.33"}}, "dra.kubernetesVersion", "needs 1.34 or later"),
        ({"dra": {"kubernetesVersion": "1.38"}}, "dra.kubernetesVersion", "newer than this"),
        ({"dra": {"kubernetesVersion": "latest"}}, "dra.kubernetesVersion", "not a Kubernetes version"),
        ({"dra": None}, "pools[0].allocation", "needs the section mig-inference:dra"),
        ({"dra": {"kubernetesVersion": "1.35", "extendedResources": True}},
         "dra.extendedResources", "beta from Kubernetes 1.36"),
        ({"dra": {"kubernetesVersion": "1.35", "dynamicMig": True}}, "dra.dynamicMig",
         "beta from Kubernetes 1.36"),
        ({"dra": {"kubernetesVersion": "1.35", "namespace": "default"}}, "dra.namespace",
         "refuses the default namespace"),
        ({"pool_allocation": "device-plugin"}, "dra", "applies when a pool has allocation: dra"),
        ({"pool_allocation": "claims"}, "pools[0].allocation", "allowed: device-plugin, dra"),
        ({"pool_nodes": {"min": 1, "max": 2}, "pool_rollout": "blue-green"}, "pools[0].nodes",
         "give a fixed count"),
    ],
)  # fmt: skip
def test_refusals_name_the_key_and_the_reason(
    changes: dict[str, Any], path: str, words: str
) -> None:
    message = refusal(variant(**changes))
    assert f"mig-inference:{path}:" in message and words in message, message


def test_eks_and_oke_take_the_version_from_the_cluster_and_refuse_a_contradiction() -> None:
    eks = yaml.safe_load(Path(stack_path("eks-p4d")).read_text())["config"]
    config = {k.removeprefix("mig-inference:"): v for k, v in eks.items()
              if not isinstance(v, dict) or "secure" not in v}  # fmt: skip
    config["cluster"] = {**config["cluster"], "create": True, "vpcId": "vpc-0123456789abcdef0",
                         "version": "1.34", "endpointPublicAccess": False}  # fmt: skip
    config["pools"] = [{**config["pools"][0], "allocation": "dra"}]
    for service in config["services"]:
        service.pop("hfTokenSecret", None)
        service.pop("apiKeySecret", None)
    plan = plan_of(config)
    assert plan.spec.dra is not None and plan.spec.dra.kubernetes_version == "1.34"
    config["dra"] = {"kubernetesVersion": "1.36"}
    assert "cluster.version says 1.34" in refusal(config)


def joined_eks_dra() -> dict[str, Any]:
    """eks-p4d (which joins its cluster) with its pool on DRA, for Kubernetes 1.34."""
    eks = yaml.safe_load(Path(stack_path("eks-p4d")).read_text())["config"]
    config = {k.removeprefix("mig-inference:"): v for k, v in eks.items()
              if not isinstance(v, dict) or "secure" not in v}  # fmt: skip
    config["pools"] = [{**config["pools"][0], "allocation": "dra"}]
    config["dra"] = {"kubernetesVersion": "1.34"}
    for service in config["services"]:
        service.pop("hfTokenSecret", None)
        service.pop("apiKeySecret", None)
    return config


@pytest.mark.parametrize(
    "compute_configs", [None, [{"enabled": False, "nodePools": [], "nodeRoleArn": ""}]]
)
def test_a_joined_eks_cluster_without_auto_mode_takes_dra_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compute_configs: list[Any] | None
) -> None:
    if compute_configs is not None:
        monkeypatch.setitem(FAKE_CALLS[EKS_GET_CLUSTER], "computeConfigs", compute_configs)
    rendering = render_config(tmp_path, joined_eks_dra())
    assert rendering.error is None, rendering.error
    [group] = rendering.of_type("aws:eks/nodeGroup:NodeGroup")
    assert group.inputs["clusterName"] == "p4d-cluster"
    looked_up = [args for token, args in rendering.calls if token == EKS_GET_CLUSTER]
    assert {"name": "p4d-cluster"} in looked_up


def test_a_joined_eks_cluster_in_auto_mode_refuses_dra_pools_before_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auto_mode = [{"enabled": True, "nodePools": ["general-purpose"], "nodeRoleArn": "arn:r"}]
    monkeypatch.setitem(FAKE_CALLS[EKS_GET_CLUSTER], "computeConfigs", auto_mode)
    rendering = render_config(tmp_path, joined_eks_dra())
    assert rendering.error is not None
    assert "mig-inference:pools[0].allocation: cluster p4d-cluster runs EKS Auto Mode" in (
        rendering.error
    )
    assert "DRA is not currently supported with EKS Auto Mode" in rendering.error
    assert not rendering.of_type("aws:eks/nodeGroup:NodeGroup")
    # The same cluster takes device-plugin pools: only DRA pools look it up.
    config = joined_eks_dra()
    config["pools"][0].pop("allocation")
    config.pop("dra")
    plain = render_config(tmp_path, config)
    assert plain.error is None, plain.error
    assert plain.of_type("aws:eks/nodeGroup:NodeGroup")


def joined_oke_dra() -> dict[str, Any]:
    """oke-h100 (which joins its cluster) with its pools on DRA, at Kubernetes 1.35."""
    oke = yaml.safe_load(Path(stack_path("oke-h100")).read_text())["config"]
    config = {k.removeprefix("mig-inference:"): v for k, v in oke.items()
              if not isinstance(v, dict) or "secure" not in v}  # fmt: skip
    config["cluster"] = {**config["cluster"], "kubernetesVersion": "v1.35.1"}
    config["pools"] = [{**pool, "allocation": "dra"} for pool in config["pools"]]
    config["dra"] = {"kubernetesVersion": "1.35"}
    for service in config["services"]:
        service.pop("hfTokenSecret", None)
        service.pop("apiKeySecret", None)
    return config


JOINED: dict[str, tuple[Callable[[], dict[str, Any]], str, str, str, str]] = {
    "gke": (lambda: variant(dra={"kubernetesVersion": "1.36"}), GKE_GET_CLUSTER, "masterVersion",
            "1.35.2-gke.1200", "1.36"),
    "eks": (joined_eks_dra, EKS_GET_CLUSTER, "version", "1.33", "1.34"),
    "oke": (joined_oke_dra, OKE_GET_CLUSTER, "kubernetesVersion", "v1.34.2", "1.35"),
}  # fmt: skip


@pytest.mark.parametrize("cloud", sorted(JOINED))
def test_a_joined_cluster_older_than_the_dra_objects_stops_the_preview(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cloud: str
) -> None:
    config, token, field, served, declared = JOINED[cloud]
    # Offline the joined cluster runs what the stack names: the DRA stack renders as it is.
    assert render_config(tmp_path, config()).error is None
    # A cluster that reports an older version refuses it, before anything is created.
    monkeypatch.delitem(CLUSTER_VERSIONS, token)
    monkeypatch.setitem(FAKE_CALLS, token, {**FAKE_CALLS.get(token, {}), field: served})
    rendering = render_config(tmp_path, config())
    assert rendering.error is not None
    assert (
        f"mig-inference:dra.kubernetesVersion: says {declared}, and the cluster runs {served}"
        in rendering.error
    )
    assert not [r for r in rendering.resources if r.type.startswith("kubernetes:")]


@pytest.mark.parametrize(
    ("served", "words"),
    [("1.36", None), ("v1.37.0", None), ("1.36.1-gke.1000", None), ("unknown", None),
     ("1.35", "name the version the cluster runs"), ("1.33", "has no GA DRA")],
)  # fmt: skip
def test_the_version_a_joined_cluster_reports(served: str, words: str | None) -> None:
    settings = plan_of(variant(dra={"kubernetesVersion": "1.36"})).spec.dra
    assert settings is not None
    problem = joined_version_problem(settings, served)
    assert (problem is None) if words is None else (problem is not None and words in problem)


# --- the plan -------------------------------------------------------------------------------


def test_dra_nodes_keep_the_device_plugin_off_and_carry_the_driver_label() -> None:
    plan = plan_of(variant())
    [pool] = plan.pools
    assert pool.node_labels[DEVICE_PLUGIN_DEPLOY_LABEL] == "false"
    assert pool.node_labels[DRA_NODE_LABEL] == "dra"
    assert pool.node_labels[MIG_CONFIG_LABEL] == "all-balanced"
    assert "allocation" in pool.replacement_inputs
    values = driver_values(plan)
    assert values["kubeletPlugin"]["nodeSelector"] == {
        DRA_NODE_LABEL: "dra",
        CLIENT_DEPLOY_LABEL: "true",
    }
    # A device-plugin pool of the same stack carries neither label.
    plain = plan_of(variant(pool_allocation="device-plugin", dra=None))
    assert DEVICE_PLUGIN_DEPLOY_LABEL not in plain.pools[0].node_labels
    assert DRA_NODE_LABEL not in plain.pools[0].node_labels
    assert "allocation" not in plain.pools[0].replacement_inputs


def test_the_layout_is_applied_by_the_mig_manager_and_gated_as_before() -> None:
    plan = plan_of(variant())
    assert [t.pool for t in gate_targets(plan)] == ["h100-dra"]
    assert [t.pool for t in repartition_targets(plan)] == ["h100-dra"]
    assert repartition_targets(plan)[0].dra and gate_targets(plan)[0].dra


def test_the_plugin_follows_the_mig_manager_only_with_an_operator_that_pauses_it() -> None:
    """GPU Operator v26.7.0+ (mig-manager v0.15.0) sets `nvidia.com/gpu.deploy.client` and pauses
    it around a MIG change: the plugin selects it and the Jobs do not restart the plugin. An
    older operator sets no such label (a plugin selecting it would never run), and DynamicMIG
    runs no MIG manager: the plugin keeps the DRA label alone and the Jobs restart it."""
    current = plan_of(variant())
    assert plugin_follows_mig_manager(current)
    assert repartition_targets(current)[0].plugin_bounced
    assert repartition_targets(current)[0].env(60, "gpu-operator")["DRA_PLUGIN_BOUNCED"] == "1"
    newer = plan_of(variant(gpuOperator={"version": "v26.10.1"}))
    assert plugin_follows_mig_manager(newer)
    for older in (
        variant(gpuOperator={"version": "v25.10.1"}),
        variant(dra={"kubernetesVersion": "1.36", "dynamicMig": True}),
    ):
        plan = plan_of(older)
        assert not plugin_follows_mig_manager(plan)
        assert driver_values(plan)["kubeletPlugin"]["nodeSelector"] == {DRA_NODE_LABEL: "dra"}
        for target in repartition_targets(plan):
            assert "DRA_PLUGIN_BOUNCED" not in target.env(60, "gpu-operator")
    plain = plan_of(variant(pool_allocation="device-plugin", dra=None))
    assert all("DRA_PLUGIN_BOUNCED" not in t.env(60, "x") for t in repartition_targets(plain))


def test_dynamic_mig_is_an_opt_in_with_a_loud_warning() -> None:
    plan = plan_of(variant(dra={"kubernetesVersion": "1.36", "dynamicMig": True}))
    assert DYNAMIC_MIG_WARNING in plan.warnings
    [pool] = plan.pools
    assert pool.node_labels[MIG_MANAGER_DEPLOY_LABEL] == "false"
    assert MIG_CONFIG_LABEL not in pool.node_labels
    assert not gate_targets(plan) and not repartition_targets(plan)
    assert driver_values(plan)["featureGates"] == {"DynamicMIG": True}
    assert "featureGates" not in driver_values(plan_of(variant()))
    assert DYNAMIC_MIG_WARNING not in plan_of(variant()).warnings


# --- rendering and schema -------------------------------------------------------------------


def rendered(tmp_path: Path, version: str, extended: bool = False) -> Rendering:
    dra: dict[str, Any] = {"kubernetesVersion": version}
    if extended:
        dra["extendedResources"] = True
    rendering = render_config(tmp_path, variant(dra=dra))
    assert rendering.error is None, rendering.error
    return rendering


def validate_all(rendering: Rendering, version: str) -> int:
    from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS

    objects = rendering.kubernetes_objects()
    for obj in objects:
        if obj["apiVersion"].split("/")[0] in CUSTOM_RESOURCE_GROUPS:
            continue  # the GPU Operator's ClusterPolicy: tests/rollout/test_dra_move_plugin_order.py
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    return len(objects)


@pytest.mark.parametrize("version", SUPPORTED)
def test_claims_render_schema_valid_for_each_version(tmp_path: Path, version: str) -> None:
    rendering = rendered(tmp_path, version)
    assert validate_all(rendering, version) > 0
    templates = {t.inputs["metadata"]["name"]: t.inputs for t in rendering.of_type(CLAIM_TEMPLATE)}
    assert set(templates) == {"mistral-nemo-gpu-device", "qwen-small-gpu-device"}
    for deployment in rendering.of_type("kubernetes:apps/v1:Deployment"):
        pod = deployment.inputs["spec"]["template"]["spec"]
        [claim] = pod["resourceClaims"]
        assert claim["resourceClaimTemplateName"] in templates
        for container in [*pod["containers"], *pod.get("initContainers", [])]:
            resources = container["resources"]
            assert resources["claims"] == [{"name": claim["name"]}]
            assert not [k for k in resources.get("limits", {}) if k.startswith("nvidia.com/")]
    assert not rendering.of_type(DEVICE_CLASS)


@pytest.mark.parametrize("version", ("1.36", "1.37"))
def test_the_bridge_renders_a_device_class_per_profile(tmp_path: Path, version: str) -> None:
    rendering = rendered(tmp_path, version, extended=True)
    validate_all(rendering, version)
    assert not rendering.of_type(CLAIM_TEMPLATE)
    classes = {
        c.inputs["spec"]["extendedResourceName"]: c.inputs for c in rendering.of_type(DEVICE_CLASS)
    }
    assert set(classes) == {
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-2g.20gb",
        "nvidia.com/mig-3g.40gb",
    }
    limits = {
        d.inputs["metadata"]["name"]: d.inputs["spec"]["template"]["spec"]["containers"][0][
            "resources"
        ]["limits"]
        for d in rendering.of_type("kubernetes:apps/v1:Deployment")
    }
    assert limits["mistral-nemo"]["nvidia.com/mig-3g.40gb"] == "1"
    assert limits["qwen-small"]["nvidia.com/mig-1g.10gb"] == "1"


def test_the_driver_is_installed_from_the_pinned_chart(tmp_path: Path) -> None:
    [release] = [
        r for r in stack_rendering(STACK).of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == DRA_DRIVER_CHART
    ]  # fmt: skip
    assert release.inputs["version"] == DRA_DRIVER_VERSION
    assert release.inputs["namespace"] == "nvidia-dra-driver-gpu"
    assert release.inputs["values"]["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    # The device plugin is kept off DRA nodes, so the chart's guard may be overridden.
    assert release.inputs["values"]["gpuResourcesEnabledOverride"] is True
    # Pools without DRA install no driver.
    plain = render_config(tmp_path, variant(pool_allocation="device-plugin", dra=None))
    assert plain.error is None, plain.error
    assert not [r for r in plain.of_type("kubernetes:helm.sh/v3:Release")
                if r.inputs["chart"] == DRA_DRIVER_CHART]  # fmt: skip


# --- CEL ------------------------------------------------------------------------------------

MIB = 2**20


def cel_quantity(text: celtypes.StringType) -> celtypes.IntType:
    """Kubernetes' `quantity()` for the binary suffixes these expressions use."""
    found = re.fullmatch(r"(\d+)(Mi|Gi)?", str(text))
    assert found, f"quantity {text!r} not in the forms this project writes"
    factor = {"Mi": MIB, "Gi": 1024 * MIB, None: 1}[found.group(2)]
    return celtypes.IntType(int(found.group(1)) * factor)


def cel_compare(left: celtypes.IntType, right: celtypes.IntType) -> celtypes.IntType:
    return celtypes.IntType((left > right) - (left < right))


def cel_matches(expression: str, device: dict[str, Any]) -> bool:
    environment = celpy.Environment()
    program = environment.program(
        environment.compile(expression),
        functions={"quantity": cel_quantity, "compareTo": cel_compare},
    )
    return bool(program.evaluate({"device": json_to_cel(device)}))


def published(profile: str, memory_mib: int, kind: str = "mig") -> dict[str, Any]:
    """A device as the driver's ResourceSlice has it, seen from CEL (NOTES.md section 1)."""
    return {
        "driver": DRA_DRIVER,
        "attributes": {
            DRA_DRIVER: {"type": kind, "profile": profile, "productName": "NVIDIA H100 80GB HBM3"}
        },
        "capacity": {DRA_DRIVER: {"memory": memory_mib * MIB}},
    }


def test_every_cel_expression_parses() -> None:
    environment = celpy.Environment()
    expressions = [
        selector["cel"]["expression"]
        for template in stack_rendering(STACK).of_type(CLAIM_TEMPLATE)
        for request in template.inputs["spec"]["spec"]["devices"]["requests"]
        for selector in request["exactly"]["selectors"]
    ]
    expressions += [
        c.expression
        for c in profile_classes(
            plan_of(variant(dra={"kubernetesVersion": "1.36", "extendedResources": True}))
        )
    ]
    assert len(expressions) == 5
    for expression in expressions:
        environment.compile(expression)
    with pytest.raises(CELParseError):
        environment.compile("device.attributes['gpu.nvidia.com'].profile == '1g.10gb' &&")


def test_a_claim_takes_its_profile_with_room_for_the_model_and_nothing_else() -> None:
    plan = plan_of(variant())
    for service in plan.services:
        expression = slice_selector(service.offer, service.spec.need_mib)
        own = published(service.profile, service.offer.memory_mib)
        assert cel_matches(expression, own)
        other = next(o for o in service.pool.offers if o.profile != service.profile)
        assert not cel_matches(expression, published(other.profile, other.memory_mib))
        # A slice NVML sizes below the model's need is not taken, whatever its name.
        assert service.spec.need_mib is not None
        short = int(service.spec.need_mib) - 1
        assert not cel_matches(expression, published(service.profile, short))


def test_a_bridge_class_selects_only_its_profile_of_this_driver() -> None:
    plan = plan_of(variant(dra={"kubernetesVersion": "1.36", "extendedResources": True}))
    for device_class in profile_classes(plan):
        assert cel_matches(device_class.expression, published(device_class.profile, 9_984))
        assert not cel_matches(device_class.expression, published("7g.80gb", 80_000))
        assert not cel_matches(
            device_class.expression, published(device_class.profile, 9_984, "gpu")
        )
        assert not cel_matches(
            device_class.expression,
            {**published(device_class.profile, 9_984), "driver": "other.example.com"},
        )


# --- the driver's chart ---------------------------------------------------------------------


def helm_template(
    values: dict[str, Any], namespace: str, version: str, tmp_path: Path
) -> list[dict[str, Any]]:
    chart = reference_dir(CHART_DIR)
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = subprocess.run(
        [helm_binary(), "template", "dra-driver-nvidia-gpu", str(chart), "--namespace", namespace,
         "--values", str(path), "--kube-version", f"{version}.0", "--api-versions", "resource.k8s.io/v1"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


CLIENT_LABEL_RENDERING = (
    "dra/charts/rendered/v0.5.0-dev-95932046_static-mig_gpu-operator-client-label_k8s1.34.yaml"
)


def client_label_reference() -> dict[str, str]:
    """The kubelet plugin's nodeSelector in the driver chart rendered with
    `kubeletPlugin.nodeSelector."nvidia.com/gpu.deploy.client"=true` (NOTES-0.5.md section 4)."""
    documents = yaml.safe_load_all(reference_file(CLIENT_LABEL_RENDERING).read_text())
    [plugin] = [d for d in documents if d and d["kind"] == "DaemonSet"]
    selector: dict[str, str] = plugin["spec"]["template"]["spec"]["nodeSelector"]
    return selector


def test_the_chart_renders_with_each_stack_s_values(tmp_path: Path) -> None:
    chart = reference_dir(CHART_DIR)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert DRA_DRIVER_CHART.endswith("/" + meta["name"]) and meta["version"] == DRA_DRIVER_VERSION
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    for version in SUPPORTED:
        plan = plan_of(variant(dra={"kubernetesVersion": version}))
        values = driver_values(plan)
        for key, value in values.items():
            assert key in defaults, f"{key} is not a chart value"
            if isinstance(value, dict):
                assert set(value) <= set(defaults[key]), f"{key}: {set(value) - set(defaults[key])}"
        documents = helm_template(values, "nvidia-dra-driver-gpu", version, tmp_path)
        kinds = {(d["kind"], d["metadata"]["name"]) for d in documents}
        assert ("DeviceClass", MIG_DEVICE_CLASS) in kinds
        classes = {name for kind, name in kinds if kind == "DeviceClass"}
        assert classes == {MIG_DEVICE_CLASS, "gpu.nvidia.com", "vfio.gpu.nvidia.com"}, classes
        [plugin] = [d for d in documents if d["kind"] == "DaemonSet"]
        pod = plugin["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {DRA_NODE_LABEL: "dra", CLIENT_DEPLOY_LABEL: "true"}
        # The label NVIDIA's rendering with the GPU Operator's client label selects on.
        assert {CLIENT_DEPLOY_LABEL: "true"}.items() <= client_label_reference().items()
        assert {"operator": "Exists"} in pod["tolerations"]
        roots = {
            e["value"]
            for c in pod["containers"]
            for e in c.get("env", [])
            if e["name"] == "NVIDIA_DRIVER_ROOT"
        }
        assert roots == {"/home/kubernetes/bin/nvidia"}
        for document in documents:
            kubernetes_validate.validate(document, f"{version}.0", strict=True)


def test_the_chart_refuses_what_the_values_avoid(tmp_path: Path) -> None:
    """The check can fail: the chart's own guards, which the values are written to pass."""
    values = driver_values(plan_of(variant()))
    with pytest.raises(AssertionError, match="standard GPU device plugin"):
        helm_template(
            {**values, "gpuResourcesEnabledOverride": False},
            "nvidia-dra-driver-gpu",
            "1.35",
            tmp_path,
        )
    with pytest.raises(AssertionError, match="default"):
        helm_template(values, "default", "1.35", tmp_path)


# --- the rollout simulator (diff) -----------------------------------------------------------


def dra_stack(**pool: Any) -> dict[str, Any]:
    from tests.rollout.test_rollout import stack

    config = stack(rollout="in-place", allocation="dra", **pool)
    config["dra"] = {"kubernetesVersion": "1.35"}
    return config


def test_a_claim_is_a_slice_in_the_simulator() -> None:
    from mig_inference.rollout.model import CLAIM_TEMPLATE, claimed_device, pod_template
    from mig_inference.rollout.rendered import program_of

    program = program_of(stack_rendering(STACK))
    claims = {
        t.inputs["metadata"]["name"]: claimed_device(t) for t in program.of_type(CLAIM_TEMPLATE)
    }
    assert claims == {
        "mistral-nemo-gpu-device": "nvidia.com/mig-3g.40gb",
        "qwen-small-gpu-device": "nvidia.com/mig-1g.10gb",
    }
    [deployment] = [d for d in program.of_type("kubernetes:apps/v1:Deployment")
                    if d.inputs["metadata"]["name"] == "qwen-small"]  # fmt: skip
    template = pod_template(deployment.inputs["spec"]["template"]["spec"])
    # The device is the claim's, made from the template when a pod is created.
    assert template.claims == ("qwen-small-gpu-device",) and template.resource is None


OLDER_OPERATOR = {"version": "v25.10.1"}
"""A GPU Operator before v26.7.0: its MIG manager (before v0.15.0) leaves the plugin running."""


@pytest.mark.parametrize("operator", [None, OLDER_OPERATOR], ids=["v26.7.0", "older"])
def test_an_in_place_change_of_a_dra_pool_restarts_the_plugin_and_serves_again(
    operator: dict[str, str] | None,
) -> None:
    """With GPU Operator v26.7.0 the MIG manager's pause of `nvidia.com/gpu.deploy.client`
    stops the plugin and starts it again (the Job restarts nothing); with an older one the Job
    restarts it."""
    from tests.rollout.test_rollout import transition

    v1 = dra_stack()
    v2 = dra_stack(mig="all-1g.10gb")
    v2["services"][0]["profile"] = "1g.10gb"
    if operator is not None:
        v1["gpuOperator"] = v2["gpuOperator"] = operator
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    texts = [text for _, text in outcome.events]
    restarted = [t for t in texts if "DRA kubelet plugin restarted; it publishes" in t]
    bounced = [
        t
        for t in texts
        if "DRA kubelet plugin started again after the MIG manager's pause; it publishes "
        "all-1g.10gb" in t
    ]
    if operator is None:
        assert bounced and not restarted, texts
        assert any("DRA kubelet plugin stopped by the MIG manager's pause" in t for t in texts)
    else:
        assert not bounced and any("all-1g.10gb" in t for t in restarted), texts
    [service] = changes.services
    assert service.serving_after == 4 and service.pending_at_end == 0
    assert changes.pools[0].nodes_left_cordoned == []


def test_without_the_restart_the_simulated_replicas_would_stay_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check can fail: where no kubelet plugin restarts (neither the Job's nor the gate's,
    and, with an older GPU Operator, not the MIG manager's pause), the new slices are never
    published and the replicas that need them stay pending."""
    from mig_inference.rollout.cluster import Cluster
    from tests.rollout.test_rollout import _simulated, transition

    v1 = dra_stack()
    v2 = dra_stack(mig="all-1g.10gb")
    v2["services"][0]["profile"] = "1g.10gb"
    v1["gpuOperator"] = v2["gpuOperator"] = OLDER_OPERATOR

    def never(cluster: Cluster, name: str) -> None:
        del cluster, name

    monkeypatch.setattr(Cluster, "restart_dra_plugin", never)
    _simulated.cache_clear()
    try:
        outcome, changes = transition(v1, v2)
    finally:
        _simulated.cache_clear()
    assert outcome.failure is not None or changes.services[0].pending_at_end == 4


# --- GKE's critical-pods quota, and the operator on DRA nodes -------------------------------


def test_on_gke_the_driver_namespace_admits_its_node_critical_plugin(tmp_path: Path) -> None:
    """The kubelet plugin runs at system-node-critical (the chart's default, kept); GKE admits
    such pods outside kube-system only under a quota for those classes in their namespace."""
    chart = yaml.safe_load((reference_dir(CHART_DIR) / "values.yaml").read_text())
    assert chart["kubeletPlugin"]["priorityClassName"] == "system-node-critical"
    assert "priorityClassName" not in driver_values(plan_of(variant())).get("kubeletPlugin", {})
    rendering = stack_rendering(STACK)
    quotas = {
        q.inputs["metadata"]["namespace"]: q.inputs
        for q in rendering.of_type("kubernetes:core/v1:ResourceQuota")
    }
    dra_namespace = plan_of(variant()).spec.dra.namespace  # type: ignore[union-attr]
    quota = quotas[dra_namespace]
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In",
         "values": ["system-node-critical", "system-cluster-critical"]}
    ]  # fmt: skip
    nodes = sum(pool.max_nodes for pool in plan_of(variant()).pools if pool.dra)
    assert int(quota["spec"]["hard"]["pods"]) >= 2 * nodes  # both generations' plugins
    release = next(
        r for r in rendering.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["chart"] == DRA_DRIVER_CHART
    )  # fmt: skip
    assert any(
        "critical-pods" in name
        for name in rendering.options[(release.type, release.name)].depends_on
    )
    # Other clouds ask for no quota.
    eks = render_config(tmp_path, joined_eks_dra())
    assert eks.error is None, eks.error
    assert not eks.of_type("kubernetes:core/v1:ResourceQuota")


def test_the_operator_drops_its_device_plugin_when_every_pool_is_a_dra_pool() -> None:
    """Through the stack's ClusterPolicy patch (`kube.device_plugin_switch`); the release keeps
    the chart's default either way."""
    from mig_inference.kube.device_plugin_switch import device_plugin_on
    from mig_inference.kube.operator_values import gpu_operator_values

    assert not device_plugin_on(plan_of(variant()))
    assert "enabled" not in gpu_operator_values(plan_of(variant())).get("devicePlugin", {})
    assert not any("validator" in w for w in plan_of(variant()).warnings)
    plain = plan_of(variant(pool_allocation="device-plugin", dra=None))
    assert device_plugin_on(plain)
    assert "enabled" not in gpu_operator_values(plain).get("devicePlugin", {})
    # Beside a device-plugin pool the plugin stays, and the plan says what the validator does
    # on the DRA pool's nodes.
    mixed = variant()
    mixed["pools"].append({**mixed["pools"][0], "name": "plugin", "allocation": "device-plugin"})
    for service in mixed["services"]:
        service["pool"] = mixed["pools"][0]["name"]
    plan = plan_of(mixed)
    assert "enabled" not in gpu_operator_values(plan).get("devicePlugin", {})
    assert device_plugin_on(plan)
    [warning] = [w for w in plan.warnings if "validator" in w]
    assert warning.startswith(f"pools {mixed['pools'][0]['name']}: the GPU Operator's validator")


def mixed_stack() -> dict[str, Any]:
    """The DRA stack with a second pool that keeps the device plugin, one service on each."""
    config = variant()
    config["pools"].append({**config["pools"][0], "name": "plugin", "allocation": "device-plugin"})
    config["services"][0]["pool"] = config["pools"][0]["name"]
    config["services"][1]["pool"] = "plugin"
    return config


def operator_chart(values: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The ClusterPolicy NVIDIA's chart renders from `values`."""
    from tests.kube.test_operator_chart import _template

    path = tmp_path / "operator-values.yaml"
    path.write_text(yaml.safe_dump(values))
    [policy] = [d for d in _template(path) if d["kind"] == "ClusterPolicy"]
    spec: dict[str, Any] = policy["spec"]
    return spec


def test_a_mixed_stack_runs_both_kinds_of_pool(tmp_path: Path) -> None:
    """Beside a device-plugin pool the operator keeps its device plugin (and with it the
    validator's plugin step, which nothing per node can skip); the DRA pool's nodes carry the
    label that keeps that plugin off them and the one the DRA kubelet plugin selects, the other
    pool's nodes neither."""
    from tests.mocked import release

    rendering = render_config(tmp_path, mixed_stack())
    assert rendering.error is None, rendering.error
    labels = {
        pool.inputs["name"].rsplit("-", 1)[0]: pool.inputs["nodeConfig"]["labels"]
        for pool in rendering.of_type("gcp:container/nodePool:NodePool")
    }
    assert labels["h100-dra"][DEVICE_PLUGIN_DEPLOY_LABEL] == "false"
    assert labels["h100-dra"][DRA_NODE_LABEL] == "dra"
    assert DEVICE_PLUGIN_DEPLOY_LABEL not in labels["plugin"]
    assert DRA_NODE_LABEL not in labels["plugin"]
    mixed = operator_chart(release(rendering).inputs["values"], tmp_path)
    assert mixed["devicePlugin"]["enabled"] is True
    assert mixed["validator"]["plugin"] is not None
    everything_dra = render_config(tmp_path, variant())
    # The chart's ClusterPolicy keeps its device plugin; the stack's patch of it decides.
    assert (
        operator_chart(release(everything_dra).inputs["values"], tmp_path)["devicePlugin"][
            "enabled"
        ]
        is True
    )
    for found, on in ((rendering, True), (everything_dra, False)):
        [patch] = found.of_type("kubernetes:nvidia.com/v1:ClusterPolicyPatch")
        assert patch.inputs["metadata"]["name"] == "cluster-policy"
        assert patch.inputs["spec"] == {"devicePlugin": {"enabled": on}}
    driver = release(rendering, DRA_DRIVER_CHART).inputs["values"]
    [plugin] = [
        d for d in helm_template(driver, "nvidia-dra-driver-gpu", "1.35", tmp_path)
        if d["kind"] == "DaemonSet"
    ]  # fmt: skip
    assert plugin["spec"]["template"]["spec"]["nodeSelector"] == {
        DRA_NODE_LABEL: "dra",
        CLIENT_DEPLOY_LABEL: "true",
    }
    [warning] = [w for w in plan_of(mixed_stack()).warnings if "validator" in w]
    assert "Init:CrashLoopBackOff" in warning and "main.go:199-201,1447-1466" in warning
