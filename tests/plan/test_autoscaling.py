"""Cluster autoscaling of MIG pools per cloud: the EKS Cluster Autoscaler with its node-template
tags and Pod Identity, OKE's add-on, refusals where an autoscaler cannot grow a MIG pool from
zero, and the capacity at a pool's minimum and maximum."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.components.clouds.eks_autoscaler import READ_ACTIONS, SCALE_ACTIONS
from mig_inference.errors import MigError
from mig_inference.offline_answers import FAKE_CALLS
from mig_inference.plan import plan_stack
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack, stack_path
from mig_inference.versions import CLUSTER_AUTOSCALER_VERSION, GPU_OPERATOR_VERSION
from tests.mocked import named, one, render_config, stack_rendering

OKE_GET_CLUSTER = "oci:ContainerEngine/getCluster:getCluster"


def load_stack_config(name: str) -> dict[str, Any]:
    """A shipped stack file's keys without the project's namespace."""
    config = yaml.safe_load(Path(stack_path(name)).read_text())["config"]
    return {key.removeprefix("mig-inference:"): value for key, value in config.items()}


RELEASE = "kubernetes:helm.sh/v3:Release"
TAG = "aws:autoscaling/tag:Tag"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def _plan(config: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def test_eks_mig_pool_grows_from_zero_with_node_template_tags() -> None:
    rendering = stack_rendering("eks-p5-from-zero")
    plan = plan_stack(load_stack("eks-p5-from-zero"))
    pool = plan.pool("h100-burst")
    tags = {t.inputs["tag"]["key"]: t.inputs["tag"] for t in rendering.of_type(TAG)}
    assert {t.inputs["autoscalingGroupName"] for t in rendering.of_type(TAG)} == {
        "eks-mock-node-group-asg"
    }
    assert tags[f"{TEMPLATE}/resources/nvidia.com/mig-1g.10gb"]["value"] == "16"
    assert tags[f"{TEMPLATE}/resources/nvidia.com/mig-3g.40gb"]["value"] == "8"
    assert tags[f"{TEMPLATE}/label/nvidia.com/mig.config"]["value"] == "all-balanced"
    assert tags[f"{TEMPLATE}/label/mig-inference.io/generation"]["value"] == pool.generation
    assert tags[f"{TEMPLATE}/taint/nvidia.com/gpu"]["value"] == "present:NoSchedule"
    assert all(tag["propagateAtLaunch"] is False for tag in tags.values())
    group = named(rendering, "aws:eks/nodeGroup:NodeGroup", "h100-burst").inputs
    assert group["scalingConfig"] == {"desiredSize": 0, "minSize": 0, "maxSize": 2}


def test_eks_cluster_autoscaler_chart_and_its_permissions() -> None:
    rendering = stack_rendering("eks-p5-from-zero")
    [release] = [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] == "cluster-autoscaler"]
    inputs = release.inputs
    assert (inputs["version"], inputs["namespace"]) == (CLUSTER_AUTOSCALER_VERSION, "kube-system")
    assert inputs["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    values = inputs["values"]
    assert values["autoDiscovery"] == {"clusterName": "burst"}
    assert values["awsRegion"] == "us-east-2" and values["cloudProvider"] == "aws"
    assert values["rbac"]["serviceAccount"] == {"create": True, "name": "cluster-autoscaler"}
    association = one(rendering, "aws:eks/podIdentityAssociation:PodIdentityAssociation").inputs
    assert (association["namespace"], association["serviceAccount"]) == (
        "kube-system", "cluster-autoscaler"
    )  # fmt: skip
    role = named(rendering, "aws:iam/role:Role", "cluster-autoscaler-role").inputs
    trust = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    policy = json.loads(one(rendering, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    read, scale = policy["Statement"]
    assert read["Action"] == READ_ACTIONS and read["Resource"] == "*"
    assert scale["Action"] == SCALE_ACTIONS
    assert scale["Condition"] == {
        "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/burst": "owned"}
    }
    # The stack joins its cluster: the Pod Identity agent is expected there, not installed.
    assert not rendering.of_type("aws:eks/addon:Addon")


def test_oke_autoscaled_pools_get_the_addon(tmp_path: Path) -> None:
    config = {
        "cloud": "oke",
        "cluster": {"name": "c", "compartmentId": "ocid1.compartment.oc1..o", "clusterId": "ocid1.cluster.oc1..k",
                    "subnetIds": ["ocid1.subnet.oc1..s"], "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
        "pools": [{"name": "a10", "gpu": "a10", "machineType": "VM.GPU.A10.1",
                   "nodes": {"min": 0, "max": 3}, "imageId": "ocid1.image.oc1..gpuimage"}],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    addon = one(rendering, "oci:ContainerEngine/addon:Addon").inputs
    assert (
        addon["addonName"] == "ClusterAutoscaler" and addon["clusterId"] == "ocid1.cluster.oc1..k"
    )
    # The add-on authenticates as its own workload identity, which one policy in the cluster's
    # compartment lets manage node pools (Oracle, "Working with the Cluster Autoscaler as a
    # Cluster Add-on"): no node gets that permission.
    assert addon["configurations"] == [
        {"key": "nodes", "value": "0:3:a10-id"},
        {"key": "authType", "value": "workload"},
    ]
    policy = one(rendering, "oci:Identity/policy:Policy").inputs
    assert policy["compartmentId"] == "ocid1.compartment.oc1..o"
    principal = (
        "where ALL {request.principal.type = 'workload', request.principal.namespace = "
        "'kube-system', request.principal.service_account = 'cluster-autoscaler', "
        "request.principal.cluster_id = 'ocid1.cluster.oc1..k'}"
    )
    assert policy["statements"] == [
        f"Allow any-user to {permission} in compartment id ocid1.compartment.oc1..o {principal}"
        for permission in (
            "manage cluster-node-pools", "manage instance-family", "use subnets",
            "read virtual-network-family", "use vnics", "inspect compartments",
        )
    ]  # fmt: skip
    made = one(rendering, "oci:ContainerEngine/addon:Addon")
    assert rendering.options[(made.type, made.name)].dependencies == (
        ("oci:Identity/policy:Policy", one(rendering, "oci:Identity/policy:Policy").name),
    )


def test_oke_addon_only_on_an_enhanced_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {
        "cloud": "oke",
        "cluster": {"name": "c", "compartmentId": "ocid1.compartment.oc1..o", "clusterId": "ocid1.cluster.oc1..k",
                    "subnetIds": ["ocid1.subnet.oc1..s"], "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
        "pools": [{"name": "a10", "gpu": "a10", "machineType": "VM.GPU.A10.1",
                   "nodes": {"min": 0, "max": 3}, "imageId": "ocid1.image.oc1..gpuimage"}],
    }  # fmt: skip
    monkeypatch.setitem(FAKE_CALLS[OKE_GET_CLUSTER], "type", "BASIC_CLUSTER")
    rendering = render_config(tmp_path, config)
    assert rendering.error is not None
    assert "mig-inference:pools[0].nodes: OKE's Cluster Autoscaler add-on needs an enhanced " in (
        rendering.error
    )
    assert "ocid1.cluster.oc1..k is BASIC_CLUSTER" in rendering.error
    assert not rendering.of_type("oci:ContainerEngine/addon:Addon")


@pytest.mark.parametrize(("version", "tag"), [(None, "v1.33.0"), ("1.31", "v1.31.0")])
def test_eks_autoscaler_image_follows_the_cluster_minor(
    tmp_path: Path, version: str | None, tag: str
) -> None:
    if version is None:  # joined: the version EKS reports (the mocked data source says 1.33)
        rendering = stack_rendering("eks-p5-from-zero")
    else:
        config = load_stack_config("eks-p5-from-zero")
        config["cluster"].update(create=True, vpcId="vpc-0123456789abcdef0", version=version,
                                 publicAccessCidrs=["203.0.113.0/24"])  # fmt: skip
        rendering = render_config(tmp_path, config)
        assert rendering.error is None, rendering.error
    [chart] = [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] == "cluster-autoscaler"]
    assert chart.inputs["values"]["image"] == {"tag": tag}


def test_no_autoscaler_without_autoscaled_pools() -> None:
    for stack in ("eks-p4d", "oke-h100"):
        rendering = stack_rendering(stack)
        assert not [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] != "gpu-operator"]
        assert not rendering.of_type("oci:ContainerEngine/addon:Addon")


@pytest.mark.parametrize(
    ("cloud", "pool", "message"),
    [
        ("gke", {"machineType": "a3-highgpu-8g", "mig": "all-balanced"},
         "GKE's autoscaler models a new node from its machine shape"),
        ("oke", {"machineType": "BM.GPU.H100.8", "mig": "all-balanced", "imageId": "ocid1.image.oc1..gpuimage",
                 "maxPods": 90}, "OKE's autoscaler models a new node"),
    ],
)  # fmt: skip
def test_operator_mig_pools_cannot_grow_from_zero_on_gke_and_oke(
    cloud: str, pool: dict[str, Any], message: str
) -> None:
    clusters = {
        "gke": {"name": "c", "project": "my-project", "location": "us-central1-c"},
        "oke": {"name": "c", "compartmentId": "ocid1.compartment.oc1..o", "clusterId": "ocid1.cluster.oc1..k", "subnetIds": ["ocid1.subnet.oc1..s"],
                "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
    }  # fmt: skip
    config: dict[str, Any] = {"cloud": cloud, "cluster": clusters[cloud],
              "pools": [{"name": "p", "gpu": "h100", "nodes": {"min": 0, "max": 2}, **pool}]}  # fmt: skip
    with pytest.raises(MigError, match=message) as caught:
        _plan(config)
    assert "pools[0].nodes.min: 0 cannot grow" in str(caught.value)
    config["pools"][0]["nodes"] = {"min": 1, "max": 2}
    assert _plan(config).pools[0].autoscaled


def test_gke_native_mig_grows_from_zero() -> None:
    plan = plan_stack(load_stack("ephemeral-gke"))
    assert plan.pools[0].min_nodes == 0 and not plan.pools[0].operator_managed


def test_replicas_beyond_the_minimum_wait_for_a_scale_up() -> None:
    plan = plan_stack(load_stack("eks-p5-from-zero"))
    assert any(
        w.startswith("service chat: 8 of the 8 replicas on nvidia.com/mig-3g.40gb wait for pool "
                     "h100-burst to grow (at its minimum of 0 node(s) it offers 0)")
        for w in plan.warnings
    )  # fmt: skip
    config: dict[str, Any] = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge",
                   "nodes": {"min": 1, "max": 2}, "mig": "all-balanced"}],
        "services": [{"name": "s", "model": "m", "memoryGiB": 30, "replicas": 16}],
    }  # fmt: skip
    warnings = _plan(config).warnings
    assert any("8 of the 16 replicas" in w for w in warnings)
    config["services"][0]["replicas"] = 17  # beyond the maximum: refused, as before
    with pytest.raises(MigError, match=r"needs 17 x nvidia\.com/mig-3g\.40gb"):
        _plan(config)


def test_services_sharing_a_resource_wait_in_one_message() -> None:
    config: dict[str, Any] = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge",
                   "nodes": {"min": 1, "max": 2}, "mig": "all-balanced"}],
        "services": [{"name": "a", "model": "m", "memoryGiB": 30, "replicas": 6},
                     {"name": "b", "model": "m", "memoryGiB": 30, "replicas": 6}],
    }  # fmt: skip
    waiting = [w for w in _plan(config).warnings if "wait for pool" in w]
    assert waiting == [
        "services a, b: 4 of the 12 replicas on nvidia.com/mig-3g.40gb wait for pool p to grow "
        "(at its minimum of 1 node(s) it offers 8)"
    ]
