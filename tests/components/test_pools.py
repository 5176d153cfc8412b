"""GPU node pools on every cloud, under Pulumi mocks: the exact inputs that reach the providers,
and the cloud-neutral pool description the operator and services consume."""

from __future__ import annotations

import email
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.components.clouds.eks import NODE_POLICIES
from mig_inference.errors import MigError
from mig_inference.plan import plan_stack
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import b64, named, one, render_config, stack_rendering

NODE_POOL = "gcp:container/nodePool:NodePool"


def _plan(values: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))


def test_parent_is_set_on_every_child() -> None:
    for stack in ("gke-h100", "eks-p4d", "oke-h100", "existing", "ephemeral-gke"):
        for (type_token, name), options in stack_rendering(stack).options.items():
            if type_token.startswith(("mig-inference:", "pulumi:providers:")):
                continue
            if type_token == "kubernetes:core/v1:Namespace" and name.startswith("ns-"):
                continue  # the program's own service namespaces
            assert options.parent_type is not None, f"{stack}: {type_token} {name} has no parent"


def test_gke_operator_pool_seed_004() -> None:
    pool = named(stack_rendering("gke-h100"), NODE_POOL, "h100-mig").inputs
    config = pool["nodeConfig"]
    [accelerator] = config["guestAccelerators"]
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-h100-80gb", 8)
    assert accelerator["gpuDriverInstallationConfig"] == {
        "gpuDriverVersion": "INSTALLATION_DISABLED"
    }
    assert "gpuPartitionSize" not in accelerator
    assert pool["maxPodsPerNode"] == 64 and pool["nodeCount"] == 1
    assert config["machineType"] == "a3-highgpu-8g" and config["spot"] is True
    assert config["taints"] == [
        {"key": "nvidia/share", "value": "nvidia-mig", "effect": "NO_SCHEDULE"}
    ]
    description = plan_stack(load_stack("gke-h100")).pool("h100-mig")
    assert config["labels"] == {
        "role": "h100-standard",
        "mig-inference.io/pool": "h100-mig",
        "mig-inference.io/generation": description.generation,
        "nvidia.com/mig.config": "all-3g.40gb",
        "gke-no-default-nvidia-gpu-device-plugin": "true",
    }
    assert pool["name"] == f"h100-mig-{description.generation}"
    assert pool["nodeLocations"] == ["us-central1-c"]
    assert description.capacity_per_node() == {"nvidia.com/mig-3g.40gb": 16}
    assert description.node_selector == {
        "mig-inference.io/pool": "h100-mig",
        "mig-inference.io/generation": description.generation,
    }
    # Every value and effect of the pool's taint keys: a taint edit never evicts a replica.
    assert description.tolerations == (
        {"key": "nvidia/share", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists"},
    )


def test_gke_native_pool() -> None:
    pool = named(stack_rendering("gke-native"), NODE_POOL, "h100-partition-3g").inputs
    [accelerator] = pool["nodeConfig"]["guestAccelerators"]
    assert accelerator["gpuPartitionSize"] == "3g.40gb"
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    labels = pool["nodeConfig"]["labels"]
    assert "nvidia.com/mig.config" not in labels
    assert "gke-no-default-nvidia-gpu-device-plugin" not in labels
    description = plan_stack(load_stack("gke-native")).pool("h100-partition-3g")
    assert description.capacity_per_node() == {"nvidia.com/gpu": 16}
    assert description.node_selector["cloud.google.com/gke-gpu-partition-size"] == "3g.40gb"


def _gke(pool: dict[str, Any]) -> dict[str, Any]:
    base = {"name": "p", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1}
    return {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-c"},
        "pools": [{**base, **pool}],
    }


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({"migManager": "gke", "mig": "all-balanced"}, "one profile; allowed for H100-80GB: all-1g.10gb, all-1g.20gb"),
        ({"migManager": "gke", "mig": "all-1g.10gb.me"}, r"does not accept partition size 1g.10gb\+me"),
        ({"machineType": "n1-standard-8"}, "unknown gke machine type 'n1-standard-8'; known: a2-highgpu-1g"),
        ({"machineType": "a2-highgpu-8g"}, "a2-highgpu-8g carries A100-40GB, not H100-80GB"),
        ({"maxPods": 300, "mig": "all-1g.10gb"}, r"300 is out of range; gke allows 8-256"),
        ({"maxPods": 8, "mig": "all-1g.10gb"}, r"8 is below the 74 this pool needs per node \(56 GPU devices"),
        ({"taints": [{"key": "a", "value": "b", "effect": "NO_SCHEDULE"}]}, "'NO_SCHEDULE' is not a taint effect"),
    ],
)  # fmt: skip
def test_gke_bad_pools(pool: dict[str, Any], message: str) -> None:
    with pytest.raises(MigError, match=message) as caught:
        _plan(_gke(pool))
    assert str(caught.value).startswith("mig-inference:pools[0]")


def test_gke_explicit_gpus_per_node_for_other_machine_types() -> None:
    plan = _plan(
        _gke({"machineType": "a3-highgpu-8g-custom", "gpusPerNode": 8, "mig": "all-3g.40gb"})
    )
    assert plan.pools[0].accelerator == "nvidia-h100-80gb" and plan.pools[0].gpus_per_node == 8


def test_gke_autoscaling_and_cluster_creation() -> None:
    rendering = stack_rendering("ephemeral-gke")
    pool = named(rendering, NODE_POOL, "a100-spot").inputs
    assert pool["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2}
    assert "nodeCount" not in pool and pool["nodeConfig"]["spot"] is True
    cluster = one(rendering, "gcp:container/cluster:Cluster").inputs
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["removeDefaultNodePool"] is True and cluster["deletionProtection"] is False
    assert cluster["networkingMode"] == "VPC_NATIVE"
    system = named(rendering, NODE_POOL, "mig-ephemeral-system").inputs
    assert "guestAccelerators" not in system["nodeConfig"]
    kubeconfig = yaml.safe_load(rendering.outputs["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
    provider = one(rendering, "pulumi:providers:kubernetes").inputs
    assert "kubeconfig" in provider
    assert not any(o.protect for o in rendering.options.values())


def test_protect_reaches_cluster_and_pools(tmp_path: Path) -> None:
    config = _gke({"mig": "all-3g.40gb"})
    config["cluster"].update(
        {
            "create": True,
            "protect": True,
            "network": "gpu-vpc",
            "subnetwork": "gpu-subnet",
            "authorizedNetworks": ["203.0.113.0/24"],
        }
    )
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    protected = {
        name for (t, name), o in rendering.options.items() if o.protect and ":container/" in t
    }
    assert protected == {"c", "c-system", "p"}


def test_eks_node_group_seed_003() -> None:
    rendering = stack_rendering("eks-p4d")
    group = one(rendering, "aws:eks/nodeGroup:NodeGroup").inputs
    assert group["amiType"] == "AL2023_x86_64_NVIDIA"
    assert group["instanceTypes"] == ["p4d.24xlarge"] and group["capacityType"] == "ON_DEMAND"
    assert group["scalingConfig"] == {"desiredSize": 1, "minSize": 1, "maxSize": 1}
    assert group["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert "diskSize" not in group  # set in the launch template
    template = one(rendering, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    message = email.message_from_string(b64(template["userData"]))
    assert message.is_multipart()
    part, drop_in, mig_mode = list(message.walk())[1:]
    assert part.get_content_type() == "application/node.eks.aws"
    assert drop_in.get_content_type() == "text/cloud-config"  # tests/clouds/test_max_pods.py
    assert (
        mig_mode.get_content_type() == "text/x-shellscript"
    )  # tests/clouds/test_mig_mode_at_boot.py
    assert part["Content-Transfer-Encoding"] == "7bit"
    node_config = yaml.safe_load(str(part.get_payload()))
    assert node_config == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"kubelet": {"config": {"maxPods": 110}}},
    }
    assert template["metadataOptions"]["httpTokens"] == "required"
    policies = {
        a.inputs["policyArn"]
        for a in rendering.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    }
    assert policies == set(NODE_POLICIES)
    role = one(rendering, "aws:iam/role:Role").inputs
    statement = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert statement["Principal"] == {"Service": "ec2.amazonaws.com"}
    description = plan_stack(load_stack("eks-p4d")).pool("demo-gpu-workers")
    assert description.capacity_per_node() == {
        "nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-2g.10gb": 8, "nvidia.com/mig-3g.20gb": 8,
    }  # fmt: skip


def test_eks_taints_and_spot(tmp_path: Path) -> None:
    group = one(stack_rendering("eks-p5-auto"), "aws:eks/nodeGroup:NodeGroup").inputs
    assert group["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    ]
    config = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"], "create": True,
                    "vpcId": "vpc-0123456789abcdef0", "version": "1.33", "publicAccessCidrs": ["203.0.113.0/24"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge", "nodes": {"min": 0, "max": 3},
                   "mig": "all-balanced", "spot": True}],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    group = named(rendering, "aws:eks/nodeGroup:NodeGroup", "p").inputs
    assert group["capacityType"] == "SPOT"
    assert group["scalingConfig"] == {"desiredSize": 0, "minSize": 0, "maxSize": 3}
    cluster = one(rendering, "aws:eks/cluster:Cluster").inputs
    # Created clusters answer on the public endpoint too, so `pulumi up` from a laptop reaches
    # the API it just created; nodes use the private one.
    assert cluster["vpcConfig"]["endpointPublicAccess"] is True
    assert cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert {"arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"} <= {
        a.inputs["policyArn"]
        for a in rendering.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    }
    kubeconfig = yaml.safe_load(rendering.outputs["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["args"][:2] == ["eks", "get-token"]


@pytest.mark.parametrize(
    ("max_pods", "message"),
    [
        (300, "out of range; eks allows 1-100"),
        (40, r"below the 47 this pool needs per node \(32 GPU devices"),
    ],
)
def test_eks_max_pods_limits(max_pods: int, message: str) -> None:
    config = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge", "nodes": 1,
                   "mig": "all-balanced", "maxPods": max_pods}],
    }  # fmt: skip
    with pytest.raises(MigError, match=message):
        _plan(config)


def test_oke_pool_seed_000() -> None:
    rendering = stack_rendering("oke-h100")
    pool = one(rendering, "oci:ContainerEngine/nodePool:NodePool").inputs
    assert pool["nodeShape"] == "BM.GPU.H100.8"
    details = pool["nodeConfigDetails"]
    assert details["nodePoolPodNetworkOptionDetails"]["cniType"] == "OCI_VCN_IP_NATIVE"
    assert details["nodePoolPodNetworkOptionDetails"]["maxPodsPerNode"] == 90
    assert {"key": "nvidia.com/mig.config", "value": "all-1g.20gb"} in pool["initialNodeLabels"]
    script = b64(pool["nodeMetadata"]["user_data"])
    assert (
        "oke-init.sh --kubelet-extra-args --register-with-taints=nvidia.com/gpu=present:NoSchedule"
        in script
    )
    assert "taints" not in pool


def _oke(mig: str, max_pods: int | None) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "p", "gpu": "h100", "machineType": "BM.GPU.H100.8", "nodes": 1,
                            "mig": mig, "imageId": "ocid1.image.oc1..x"}  # fmt: skip
    if max_pods is not None:
        pool["maxPods"] = max_pods
    return {
        "cloud": "oke",
        "cluster": {"name": "c", "compartmentId": "ocid1.compartment.oc1..c", "clusterId": "ocid1.cluster.oc1..k", "subnetIds": ["ocid1.subnet.oc1..s"],
                    "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"], "kubernetesVersion": "v1.34.2"},
        "pools": [pool],
    }  # fmt: skip


def test_oke_all_1g_10gb_needs_more_than_31_pods_and_is_accepted_at_90() -> None:
    with pytest.raises(MigError, match=r"31 \(the oke default\) is below the 72 this pool needs"):
        _plan(_oke("all-1g.10gb", None))
    plan = _plan(_oke("all-1g.10gb", 90))
    assert plan.pools[0].capacity_per_node() == {"nvidia.com/mig-1g.10gb": 56}
    with pytest.raises(MigError, match="111 is out of range; oke allows 1-110"):
        _plan(_oke("all-1g.10gb", 111))


def test_existing_nodes_get_labels_and_taints_only() -> None:
    patches = stack_rendering("existing").of_type("kubernetes:core/v1:NodePatch")
    assert sorted(p.name for p in patches) == [
        "lab-h100-gpu-node-01",
        "lab-h100-gpu-node-01-taints",
        "lab-h100-gpu-node-02",
        "lab-h100-gpu-node-02-taints",
    ]  # fmt: skip (no user labels in this stack: no label patch)
    for patch in patches:
        annotations = patch.inputs["metadata"]["annotations"]
        if patch.name.endswith("-taints"):
            assert set(patch.inputs["spec"]) == {"taints"}
            assert patch.inputs["spec"]["taints"] == [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
            ]
            assert "labels" not in patch.inputs["metadata"]
            assert annotations["pulumi.com/patchFieldManager"] == "mig-inference-taints"
            assert annotations["mig-inference.io/taint-keys"] == "nvidia.com/gpu"
        else:
            assert "spec" not in patch.inputs
            assert patch.inputs["metadata"]["labels"] == {
                "mig-inference.io/pool": "lab-h100",
                "nvidia.com/mig.config": "all-balanced",
            }
            assert annotations["pulumi.com/patchFieldManager"] == "mig-inference"
        # Ours only: the project's labels, and a taint list merged from the live node.
        assert annotations["pulumi.com/patchForce"] == "true"


def test_existing_user_labels_are_applied_without_force(tmp_path: Path) -> None:
    config = {
        "cloud": "existing",
        "cluster": {"name": "lab", "context": "lab"},
        "pools": [{"name": "p", "gpu": "h100", "gpusPerNode": 8, "nodeNames": ["n1"],
                   "mig": "all-balanced", "labels": {"team": "ml"}}],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    patch = named(rendering, "kubernetes:core/v1:NodePatch", "p-n1-labels").inputs
    assert patch["metadata"]["labels"] == {"team": "ml"}
    assert "pulumi.com/patchForce" not in patch["metadata"]["annotations"]


def test_auto_pools_say_whether_their_gpu_count_is_proven() -> None:
    from mig_inference.plan import plan_stack
    from mig_inference.reports.stack import plan_json, plan_text
    from mig_inference.spec.files import load_stack

    plan = plan_stack(load_stack("eks-p5-auto"))
    [pool] = plan.pools
    assert pool.pack_plan is not None and pool.pack_plan.optimal
    assert (
        "  mig: auto chose it: 1 identical node(s), proven the fewest (lower bound 1)"
        in plan_text(plan)
    )
    assert plan_json(plan)["pools"][0]["auto"] == {
        "gpus": 8, "lower_bound": 6, "optimal": True, "preferences_proven": True,
        "mig_prefer": ["3g.40gb+2x1g.20gb"] * 8, "kept_gpus_per_node": None,
    }  # fmt: skip


def test_gke_native_mig_on_b200() -> None:
    plan = _plan(_gke({"gpu": "B200-180GB", "machineType": "a4-highgpu-8g", "migManager": "gke",
                       "mig": "all-1g.23gb", "spot": True}))  # fmt: skip
    assert plan.pools[0].partition_size == "1g.23gb"


@pytest.mark.parametrize(
    ("gpu", "machine", "mig", "capacity"),
    [("GB200", "a4x-highgpu-4g", "all-3g.93gb", "reservation"),
     ("RTX-PRO-6000-96GB", "g4-standard-96", "all-2g.48gb", "spot")],
)  # fmt: skip
def test_gke_native_mig_only_on_the_gpus_google_documents(
    gpu: str, machine: str, mig: str, capacity: str
) -> None:
    pool = {"gpu": gpu, "machineType": machine, "mig": mig, "capacity": capacity}
    if capacity == "reservation":
        pool["reservation"] = "gb200-block"
    with pytest.raises(MigError) as caught:
        _plan(_gke({**pool, "migManager": "gke"}))
    [error] = caught.value.errors
    assert error.path == "mig-inference:pools[0].migManager"
    assert (
        f"GKE documents native MIG node pools for A100-40GB, A100-80GB, H100-80GB, H200-141GB, "
        f"B200-180GB only, not {gpu}" in error.message
    )
    assert "kubernetes-engine/docs/how-to/gpus-multi" in error.message
    assert error.allowed == ["operator"]
    # Google lists RTX PRO 6000 partitions for ComputeClasses only, which the stack does not make.
    assert ("ComputeClass" in error.message) is (gpu == "RTX-PRO-6000-96GB")
    if gpu == "RTX-PRO-6000-96GB":
        assert "lists 1g.24gb, 2g.48gb, 4g.96gb" in error.message
    # The GPU Operator partitions it instead.
    assert _plan(_gke(pool)).pools[0].config_name == mig
