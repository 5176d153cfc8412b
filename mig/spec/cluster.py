"""`mig-inference:cluster`: the cluster a stack creates or joins, per cloud."""

from __future__ import annotations

from typing import Any

from mig.clouds import Cloud
from mig.spec.model import ClusterSpec
from mig.spec.reader import ConfigNode, dns_label

CLUSTER_KEYS: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location", "network", "subnetwork", "masterIpv4CidrBlock",
                "releaseChannel"),
    Cloud.EKS: ("region", "subnetIds", "vpcId", "version", "endpointPublicAccess"),
    Cloud.OKE: ("compartmentId", "clusterId", "vcnId", "subnetIds", "podSubnetIds",
                "endpointSubnetId", "availabilityDomains", "kubernetesVersion", "systemImageId"),
    Cloud.EXISTING: ("kubeconfig", "context"),
}  # fmt: skip
CLUSTER_REQUIRED: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location"),
    Cloud.EKS: ("region", "subnetIds"),
    Cloud.OKE: ("compartmentId", "subnetIds", "availabilityDomains"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_CREATING: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("network", "subnetwork"),
    Cloud.EKS: ("vpcId", "version"),
    Cloud.OKE: ("vcnId", "endpointSubnetId", "podSubnetIds", "kubernetesVersion", "systemImageId"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_EXISTING: dict[Cloud, tuple[str, ...]] = {
    Cloud.OKE: ("clusterId", "kubernetesVersion"),
}


def cluster_spec(node: ConfigNode, cloud: Cloud, secret_keys: frozenset[str]) -> ClusterSpec:
    base = ("name", "create", "protect")
    raw = node.mapping(base + CLUSTER_KEYS[cloud])
    create = node.child("create").boolean(False)
    if create and cloud is Cloud.EXISTING:
        raise node.child("create").error(
            "an `existing` cluster cannot be created; pick gke, eks or oke"
        )
    required = CLUSTER_REQUIRED[cloud] + (
        CLUSTER_REQUIRED_WHEN_CREATING[cloud]
        if create
        else CLUSTER_REQUIRED_WHEN_EXISTING.get(cloud, ())
    )
    for key in required:
        if raw.get(key) in (None, "", []):
            when = " when create is true" if key in CLUSTER_REQUIRED_WHEN_CREATING[cloud] else ""
            raise node.child(key).error(f"is required for cloud {cloud.value}{when}")
    settings: dict[str, Any] = {}
    for key in CLUSTER_KEYS[cloud]:
        child = node.child(key)
        if key in ("subnetIds", "podSubnetIds", "availabilityDomains"):
            settings[key] = child.strings()
        elif key == "endpointPublicAccess":
            settings[key] = child.boolean(False)
        elif key == "kubeconfig":
            # The name of a secret config key holding the kubeconfig, never the kubeconfig itself.
            settings[key] = child.secret_key_name(secret_keys)
        else:
            settings[key] = child.string()
    return ClusterSpec(
        name=dns_label(node.child("name")),
        create=create,
        protect=node.child("protect").boolean(True),
        settings=settings,
    )
