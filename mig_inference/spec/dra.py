"""`mig-inference:dra`: NVIDIA's DRA driver, for pools with `allocation: dra`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mig_inference.clouds import Cloud
from mig_inference.errors import shown
from mig_inference.spec.model import DRA_NAMESPACE, ClusterSpec, DraSpec, PoolSpec
from mig_inference.spec.reader import ConfigNode, dns_label
from mig_inference.stackfile.pulumi_config import NAMESPACE

DRA_KEYS = ("kubernetesVersion", "extendedResources", "dynamicMig", "namespace")
DRA_GA_MINOR = 34
"""`resource.k8s.io/v1` is GA from Kubernetes 1.34 (KEP-4381); NVIDIA's driver asks for v1.34.2+
(dra-driver-nvidia-gpu docs/prerequisites.md @ v0.4.1)."""
EXTENDED_RESOURCE_MINOR = 36
"""KEP-5004 (DeviceClass `extendedResourceName`, gate DRAExtendedResource): alpha in 1.34 and
1.35, beta in 1.36, GA planned for 1.37 (kubernetes/enhancements @ 64765b4b)."""
PARTITIONABLE_MINOR = 36
"""KEP-4815 (partitionable devices, gate DRAPartitionableDevices), which DynamicMIG publishes
its devices with: alpha 1.33-1.35, beta in 1.36."""
NEWEST_MINOR = 37
"""The newest Kubernetes whose schema the tests validate the DRA objects against."""
VERSION = re.compile(r"v?1\.(\d{1,2})(\.\d{1,3})?")
CLUSTER_VERSION_KEY = {Cloud.EKS: "version", Cloud.OKE: "kubernetesVersion"}
"""Cluster keys that give the cluster's version (GKE's comes from its release channel)."""
DYNAMIC_MIG_WARNING = (
    "dra.dynamicMig is on: NVIDIA's DRA driver runs its ALPHA DynamicMIG feature on the DRA "
    "pools. It creates a MIG slice when a claim is prepared and deletes it when the claim is "
    "released, and it deletes MIG partitions it did not create; the GPU Operator's MIG manager "
    "is kept off those nodes, and nothing else may partition their GPUs. Alpha: not for "
    "production."
)

VALIDATOR_ON_DRA_NODES = (
    "the GPU Operator's validator checks on every node it runs on that the node's allocatable "
    "holds nvidia.com/gpu or nvidia.com/mig-* (its plugin-validation step: 30 tries 5 s apart, "
    "gpu-operator v26.7.0 cmd/nvidia-validator/main.go:199-201,1447-1466), which a DRA node never "
    "advertises, and nothing per node skips it: the operator drops that step only for the whole "
    "cluster, with its device plugin (controllers/object_controls.go:2464-2469), and the only "
    "per-node switch, nvidia.com/gpu.deploy.operator-validator=false "
    "(assets/state-operator-validation/0500_daemonset.yaml:20-21), would also drop the toolkit "
    "check whose toolkit-ready file the MIG manager waits for before it starts "
    "(assets/state-mig-manager/0600_daemonset.yaml:28-31). NVIDIA documents DRA with the "
    "operator's device plugin off (devicePlugin.enabled=false), which only a stack whose "
    "operator-managed pools are all DRA pools can have; no operand waits for the plugin step "
    "(nothing reads its plugin-ready file)"
)


SERVED_VERSION = re.compile(r"v?1\.(\d{1,2})\b")
"""The minor of a version a cloud reports for a cluster: EKS `1.34`, OKE `v1.34.1`, GKE
`1.34.1-gke.1000`."""


def joined_version_problem(settings: DraSpec, served: str | None) -> str | None:
    """Why a cluster the stack joins, which reports running `served`, cannot take the DRA
    objects written for `settings.kubernetes_version`; None when it can, or when the version
    it reports is not one this can read."""
    found = SERVED_VERSION.match(served or "")
    if found is None:
        return None
    minor = int(found.group(1))
    if minor >= settings.kubernetes_minor:
        return None
    if minor < DRA_GA_MINOR:
        return (
            f"says {settings.kubernetes_version}, and the cluster runs {served}, which has no GA "
            f"DRA (resource.k8s.io/v1 is GA from 1.{DRA_GA_MINOR}): upgrade the cluster first, "
            "or keep the pools on allocation: device-plugin"
        )
    return (
        f"says {settings.kubernetes_version}, and the cluster runs {served}: the DRA objects are "
        "written, and checked, for the version named here; name the version the cluster runs, "
        "or upgrade the cluster first"
    )


def _minor(node: ConfigNode) -> int | None:
    if node.unquoted_version():
        return None
    value = node.string()
    if value is None:
        return None
    found = VERSION.fullmatch(value)
    if found is None:
        return node.problem(f"{shown(value)} is not a Kubernetes version like 1.34", None)
    return int(found.group(1))


def _cluster_minor(cluster: ClusterSpec | None, cloud: Cloud) -> int | None:
    key = CLUSTER_VERSION_KEY.get(cloud)
    value = cluster.get(key) if cluster is not None and key else None
    found = VERSION.fullmatch(value) if isinstance(value, str) else None
    return int(found.group(1)) if found else None


def dra_spec(
    node: ConfigNode,
    cloud: Cloud,
    cluster: ClusterSpec | None,
    pools: Sequence[PoolSpec],
    first_dra: ConfigNode | None = None,
) -> DraSpec | None:
    """The driver's settings when a pool asks for DRA (`first_dra`: the first such pool's
    `allocation`, where a missing section is reported); the section alone is refused."""
    uses_dra = any(pool.dra for pool in pools)
    if node.value is None and not uses_dra:
        return None
    absent = node.value is None
    node.value = node.value if node.value is not None else {}
    node.mapping(DRA_KEYS)
    if not uses_dra:
        return node.problem(
            "applies when a pool has allocation: dra, and none has (leave the section out)", None
        )
    version_node = node.child("kubernetesVersion")
    given = _minor(version_node)
    from_cluster = _cluster_minor(cluster, cloud)
    key = CLUSTER_VERSION_KEY.get(cloud)
    if given is not None and from_cluster is not None and given != from_cluster:
        return version_node.problem(
            f"says 1.{given}, cluster.{key} says 1.{from_cluster}: leave it out (the cluster's "
            "version counts)",
            None,
        )
    minor = given if given is not None else from_cluster
    if minor is None:
        where = f" (or cluster.{key})" if key else ""
        if absent and first_dra is not None:
            return first_dra.problem(
                f"dra needs the section mig-inference:dra with kubernetesVersion{where}: the "
                "cluster's Kubernetes version, 1.34 to 1.37, which the DRA objects are written for",
                None,
            )
        return version_node.problem(
            f"is required with allocation: dra{where}: the cluster's Kubernetes version, "
            "1.34 to 1.37, which the DRA objects are written for",
            None,
        )
    # A version read from the cluster is refused at the cluster key that gives it, and every
    # check that compares with it names that key.
    source = version_node
    version_key = "dra.kubernetesVersion"
    if given is None and key is not None and cluster is not None:
        version_key = f"cluster.{key}"
        source = ConfigNode(cluster.get(key), f"{NAMESPACE}:{version_key}", node.problems)
    if minor < DRA_GA_MINOR:
        return source.problem(
            f"Kubernetes 1.{minor} has no GA DRA: allocation: dra needs 1.{DRA_GA_MINOR} or "
            f"later (resource.k8s.io/v1; NVIDIA's driver asks for v1.34.2+)",
            None,
            [f"1.{m}" for m in range(DRA_GA_MINOR, NEWEST_MINOR + 1)],
        )
    if minor > NEWEST_MINOR:
        return source.problem(
            f"Kubernetes 1.{minor} is newer than this release knows (1.{NEWEST_MINOR}): its DRA "
            "schema is unchecked",
            None,
            [f"1.{m}" for m in range(DRA_GA_MINOR, NEWEST_MINOR + 1)],
        )
    extended = node.child("extendedResources").boolean(False)
    if extended and minor < EXTENDED_RESOURCE_MINOR:
        node.child("extendedResources").problem(
            f"maps MIG profiles to nvidia.com/mig-<profile> through DeviceClass "
            f"extendedResourceName (KEP-5004), beta from Kubernetes 1.{EXTENDED_RESOURCE_MINOR} "
            f"(alpha and off before); the cluster is 1.{minor} ({version_key}): leave it out "
            "(pods then claim their slice through a ResourceClaimTemplate)",
            None,
        )
        extended = False
    dynamic = node.child("dynamicMig").boolean(False)
    if dynamic and minor < PARTITIONABLE_MINOR:
        node.child("dynamicMig").problem(
            f"the driver's DynamicMIG publishes partitionable devices (KEP-4815), beta from "
            f"Kubernetes 1.{PARTITIONABLE_MINOR}; the cluster is 1.{minor} ({version_key})",
            None,
        )
        dynamic = False
    namespace = (
        dns_label(node.child("namespace"), 63) if node.child("namespace").value else DRA_NAMESPACE
    )
    if namespace == "default":
        node.child("namespace").problem(
            "the driver's chart refuses the default namespace: pick one of its own", None
        )
    return DraSpec(
        kubernetes_minor=minor,
        extended_resources=extended,
        dynamic_mig=dynamic,
        namespace=namespace,
        version_key=version_key,
    )
