"""What a real `pulumi up` would trip on: the Kubernetes objects reach the cluster the stack
names, on every cloud; per-cloud wiring (OKE versions and device plugin, EKS IAM ordering,
reachable created clusters, GKE quota); existing nodes; names unique per stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.errors import MigError
from mig_inference.kube.node_taints import merged_taints
from mig_inference.render import run_program
from mig_inference.spec import parse_stack
from mig_inference.spec.files import stack_path
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import named, one, render_config, stack_rendering

PROVIDER = "pulumi:providers:kubernetes"
NODE_POOL_OKE = "oci:ContainerEngine/nodePool:NodePool"


def _kubeconfig(rendering: Any) -> dict[str, Any]:
    provider = one(rendering, PROVIDER).inputs
    assert "context" not in provider, "the ambient kubeconfig's context must never be used"
    config: dict[str, Any] = yaml.safe_load(provider["kubeconfig"])
    return config


@pytest.mark.parametrize(
    ("stack", "server", "command"),
    [
        ("gke-h100", "https://203.0.113.20", "gke-gcloud-auth-plugin"),
        ("gke-native", "https://203.0.113.20", "gke-gcloud-auth-plugin"),
        ("eks-p4d", "https://joined.example.eks.amazonaws.com", "aws"),
        ("eks-p5-auto", "https://joined.example.eks.amazonaws.com", "aws"),
    ],
)
def test_joined_clusters_are_reached_through_their_own_endpoint(
    stack: str, server: str, command: str
) -> None:
    rendering = stack_rendering(stack)
    config = _kubeconfig(rendering)
    assert config["clusters"][0]["cluster"]["server"] == server
    assert config["users"][0]["user"]["exec"]["command"] == command
    looked_up = [args for token, args in rendering.calls if token.endswith("getCluster")]
    assert looked_up and looked_up[0]["name"] in config["clusters"][0]["name"]


def test_joined_oke_cluster_kubeconfig_targets_its_public_endpoint_explicitly() -> None:
    rendering = stack_rendering("oke-h100")
    calls = dict(rendering.calls)
    generated = calls["oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig"]
    assert generated["endpoint"] == "PUBLIC_ENDPOINT" and generated["tokenVersion"] == "2.0.0"
    assert generated["clusterId"] == "ocid1.cluster.oc1.us-chicago-1.aaaaaaaaexamplecluster"
    assert "kubeconfig" in one(rendering, PROVIDER).inputs


def _gke_config(**cluster: Any) -> dict[str, Any]:
    return {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-c", **cluster},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                   "mig": "all-balanced"}],
    }  # fmt: skip


def test_context_and_kubeconfig_overrides_work_on_cloud_stacks(tmp_path: Path) -> None:
    rendering = render_config(tmp_path, _gke_config(context="prod-admin"))
    assert one(rendering, PROVIDER).inputs["context"] == "prod-admin"
    # Nothing looked up for credentials: the one lookup checks the cluster's add-ons.
    assert [token for token, _ in rendering.calls] == ["gcp:container/getCluster:getCluster"]
    secret = "apiVersion: v1\nkind: Config\nclusters: []\n"
    rendering = render_config(tmp_path, _gke_config(kubeconfig="clusterKubeconfig"),
                              clusterKubeconfig=secret)  # fmt: skip
    assert one(rendering, PROVIDER).inputs["kubeconfig"] == secret
    assert secret in rendering.secrets  # redacted wherever it is written


def test_an_existing_stack_must_name_its_cluster() -> None:
    values = {"cloud": "existing", "cluster": {"name": "lab"},
              "pools": [{"name": "p", "gpu": "h100", "gpusPerNode": 8, "nodeNames": ["n1"]}]}  # fmt: skip
    with pytest.raises(MigError, match=r"cluster.context: is required for cloud existing"):
        parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION)


def _oke_config(**cluster: Any) -> dict[str, Any]:
    return {
        "cloud": "oke",
        "cluster": {"name": "c", "compartmentId": "ocid1.compartment.oc1..c", "subnetIds": ["ocid1.subnet.oc1..s"],
                    "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"], **cluster},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "BM.GPU.H100.8", "nodes": 1,
                   "mig": "all-1g.20gb", "maxPods": 90, "imageId": "ocid1.image.oc1..x"}],
    }  # fmt: skip


def test_oke_joined_pool_runs_the_clusters_version(tmp_path: Path) -> None:
    rendering = render_config(tmp_path, _oke_config(clusterId="ocid1.cluster.oc1..k"))
    assert rendering.error is None
    pool = one(rendering, NODE_POOL_OKE).inputs
    assert pool["kubernetesVersion"] == "v1.33.1"  # looked up from the cluster
    named_version = render_config(
        tmp_path, _oke_config(clusterId="ocid1.cluster.oc1..k", kubernetesVersion="v1.35.1")
    )
    assert one(named_version, NODE_POOL_OKE).inputs["kubernetesVersion"] == "v1.35.1"


def test_oke_message_names_the_join_case() -> None:
    with pytest.raises(MigError) as caught:
        parse_stack("t", _oke_config(), pinned_operator_version=GPU_OPERATOR_VERSION)
    message = str(caught.value)
    assert "cluster.clusterId: is required for cloud oke when create is false" in message
    assert "when create is true" not in message


def test_oke_operator_pools_keep_okes_device_plugin_off() -> None:
    pool = one(stack_rendering("oke-h100"), NODE_POOL_OKE).inputs
    assert {"key": "oci.oraclecloud.com/disable-gpu-device-plugin", "value": "true"} in pool[
        "initialNodeLabels"
    ]


def test_eks_cluster_and_node_groups_wait_for_their_iam_policies(tmp_path: Path) -> None:
    config = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"], "create": True,
                    "vpcId": "vpc-0123456789abcdef0", "version": "1.33", "publicAccessCidrs": ["203.0.113.0/24"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge", "nodes": 1,
                   "mig": "all-balanced"}],
    }  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    options = rendering.options
    cluster = options[("aws:eks/cluster:Cluster", "c")]
    assert cluster.depends_on == ("c-cluster-AmazonEKSClusterPolicy",)
    for group, role in (("c-system", "c-system-node"), ("p", "p-node")):
        depends = set(options[("aws:eks/nodeGroup:NodeGroup", group)].depends_on)
        assert depends == {
            f"{role}-AmazonEKSWorkerNodePolicy",
            f"{role}-AmazonEKS_CNI_Policy",
            f"{role}-AmazonEC2ContainerRegistryReadOnly",
        }


def test_created_gke_cluster_has_nat_for_its_private_nodes() -> None:
    rendering = stack_rendering("ephemeral-gke")
    nat = one(rendering, "gcp:compute/routerNat:RouterNat").inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"][0]["sourceIpRangesToNats"] == ["ALL_IP_RANGES"]
    assert nat["natIpAllocateOption"] == "AUTO_ONLY"
    router = one(rendering, "gcp:compute/router:Router").inputs
    assert router["region"] == "us-central1" and router["network"] == "default"
    cluster = one(rendering, "gcp:container/cluster:Cluster").inputs
    assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is False


def test_created_oke_cluster_is_reachable_from_outside_its_vcn(tmp_path: Path) -> None:
    config = _oke_config(create=True, vcnId="ocid1.vcn.oc1..v", endpointSubnetId="ocid1.subnet.oc1..api",
                         podSubnetIds=["ocid1.subnet.oc1..pods"], kubernetesVersion="v1.34.2",
                         systemImageId="ocid1.image.oc1..sys")  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    cluster = one(rendering, "oci:ContainerEngine/cluster:Cluster").inputs
    assert cluster["endpointConfig"]["isPublicIpEnabled"] is True
    calls = dict(rendering.calls)
    assert calls["oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig"]["endpoint"] == (
        "PUBLIC_ENDPOINT"
    )
    config["cluster"]["endpointPublicAccess"] = False
    private = render_config(tmp_path, config)
    assert (
        one(private, "oci:ContainerEngine/cluster:Cluster").inputs["endpointConfig"][
            "isPublicIpEnabled"
        ]
        is False
    )
    assert (
        dict(private.calls)["oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig"][
            "endpoint"
        ]
        == "PRIVATE_ENDPOINT"
    )


def test_gke_critical_pods_quota_grows_with_the_pools(tmp_path: Path) -> None:
    small = one(stack_rendering("gke-h100"), "kubernetes:core/v1:ResourceQuota").inputs
    assert small["spec"]["hard"]["pods"] == str(2 * 1 * 11 + 100 + 10)
    config = _gke_config()
    config["pools"][0]["nodes"] = 40
    config["pools"][0]["maxPods"] = 110
    large = one(render_config(tmp_path, config), "kubernetes:core/v1:ResourceQuota").inputs
    assert int(large["spec"]["hard"]["pods"]) == 2 * 40 * 11 + 110 > 100


def test_existing_node_taints_of_other_owners_are_kept() -> None:
    live = {
        ("kubernetes:core/v1:Node", "gpu-node-01"): {
            "metadata": {"name": "gpu-node-01",
                         "annotations": {"mig-inference.io/taint-keys": "old-key,nvidia.com/gpu"}},
            "spec": {"taints": [
                {"key": "dedicated", "value": "lab", "effect": "NoSchedule"},
                {"key": "old-key", "value": "x", "effect": "NoSchedule"},
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            ]},
        }
    }  # fmt: skip
    rendering = run_program("existing", Path(stack_path("existing")), live=live)
    assert rendering.error is None
    assert {r.inputs["id"] for r in rendering.reads} == {"gpu-node-01", "gpu-node-02"}
    patch = named(rendering, "kubernetes:core/v1:NodePatch", "lab-h100-gpu-node-01-taints")
    assert patch.inputs["spec"]["taints"] == [
        {"key": "dedicated", "value": "lab", "effect": "NoSchedule"},  # another owner's: kept
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},  # ours
    ]  # old-key was ours and left the stack file: removed


def test_merged_taints_replace_ours_by_key_and_effect() -> None:
    live = [{"key": "k", "value": "theirs", "effect": "NoSchedule"},
            {"key": "k", "value": "x", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}]  # fmt: skip
    assert merged_taints(live, [("k", "ours", "NoSchedule")], set()) == [
        {"key": "k", "value": "x", "effect": "NoExecute"},
        {"key": "k", "value": "ours", "effect": "NoSchedule"},
    ]


def test_cluster_scoped_objects_are_named_per_stack() -> None:
    names = set()
    for stack in ("gke-h100", "eks-p4d"):
        rendering = stack_rendering(stack)
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            for found in rendering.of_type(f"kubernetes:rbac.authorization.k8s.io/v1:{kind}"):
                name = found.inputs["metadata"]["name"]
                assert stack in name, name
                names.add((kind, name))
    assert len(names) == 4


def test_repartition_and_gate_roles_allow_only_what_they_need() -> None:
    roles = {
        r.inputs["metadata"]["name"]: r.inputs["rules"]
        for r in stack_rendering("existing").of_type(
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
        )
    }
    assert roles["mig-inference-existing-mig-ready-gate"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}
    ]
    assert roles["mig-inference-existing-mig-repartition-lab-h100"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        # The pool's own budgets, relaxed while the Job runs and restored after (cluster-wide:
        # the services' namespaces may not exist when the role is made).
        {
            "apiGroups": ["policy"],
            "resources": ["poddisruptionbudgets"],
            "verbs": ["list", "patch"],
        },
        # Read-only: a pool moving back from DRA to the device plugin waits until the driver's
        # ResourceSlices no longer name a node (the pool cannot know its nodes ran DRA before).
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]},
    ]
