"""`mig-inference:cluster`: the cluster a stack creates or joins, per cloud, and how the program
reaches its Kubernetes API."""

from __future__ import annotations

import re
from typing import Any

from mig_inference.clouds import Cloud
from mig_inference.spec.model import ClusterSpec
from mig_inference.spec.reader import ConfigNode, dns_label

ACCESS_KEYS = ("context", "kubeconfig")
"""On every cloud: reach the API through a named context of your kubeconfig file, or through a
kubeconfig stored as a secret config key, instead of the cluster's own endpoint."""
CLUSTER_KEYS: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location", "network", "subnetwork", "masterIpv4CidrBlock",
                "releaseChannel", "cloudNat"),
    Cloud.EKS: ("region", "subnetIds", "vpcId", "version", "endpointPublicAccess",
                "publicAccessCidrs"),
    Cloud.OKE: ("compartmentId", "clusterId", "vcnId", "subnetIds", "podSubnetIds",
                "endpointSubnetId", "availabilityDomains", "kubernetesVersion", "systemImageId",
                "endpointPublicAccess"),
    Cloud.EXISTING: (),
}  # fmt: skip
LIST_KEYS = ("subnetIds", "podSubnetIds", "availabilityDomains", "publicAccessCidrs")
BOOLEAN_KEYS = {"endpointPublicAccess": True, "cloudNat": True}
"""Switches and their defaults: created clusters answer on a public endpoint (so `pulumi up`
from a laptop reaches the API it just created) and GKE's private nodes get a Cloud NAT."""
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
CLUSTER_REQUIRED_WHEN_JOINING: dict[Cloud, tuple[str, ...]] = {
    Cloud.OKE: ("clusterId",),
}
ONLY_WHEN_CREATING = ("network", "subnetwork", "masterIpv4CidrBlock", "releaseChannel",
                      "cloudNat", "vpcId", "version", "endpointPublicAccess", "publicAccessCidrs",
                      "vcnId", "endpointSubnetId", "systemImageId")  # fmt: skip
_CIDR = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$")


def cluster_spec(node: ConfigNode, cloud: Cloud, secret_keys: frozenset[str]) -> ClusterSpec:
    base = ("name", "create", "protect")
    raw = node.mapping(base + CLUSTER_KEYS[cloud] + ACCESS_KEYS)
    create = node.child("create").boolean(False)
    if create and cloud is Cloud.EXISTING:
        raise node.child("create").error(
            "an `existing` cluster cannot be created; pick gke, eks or oke"
        )
    if create:
        required = CLUSTER_REQUIRED[cloud] + CLUSTER_REQUIRED_WHEN_CREATING[cloud]
        when = " when create is true"
    else:
        required = CLUSTER_REQUIRED[cloud] + CLUSTER_REQUIRED_WHEN_JOINING.get(cloud, ())
        when = " when create is false (the cluster to join)"
    for key in required:
        if raw.get(key) in (None, "", []):
            common = key in CLUSTER_REQUIRED[cloud]
            raise node.child(key).error(
                f"is required for cloud {cloud.value}{'' if common else when}"
            )
    if not create:
        for key in ONLY_WHEN_CREATING:
            if raw.get(key) is not None:
                raise node.child(key).error(
                    "only applies when create is true (this stack joins a cluster it does not "
                    "create)"
                )
    if raw.get("context") is not None and raw.get("kubeconfig") is not None:
        raise node.child("kubeconfig").error("give context or kubeconfig, not both")
    if cloud is Cloud.EXISTING and raw.get("context") is None and raw.get("kubeconfig") is None:
        raise node.child("context").error(
            "is required for cloud existing (a context of your kubeconfig file), or set "
            "kubeconfig to a secret config key holding one; the program never uses whatever "
            "context happens to be current"
        )
    settings: dict[str, Any] = {}
    for key in CLUSTER_KEYS[cloud] + ACCESS_KEYS:
        child = node.child(key)
        if key in LIST_KEYS:
            settings[key] = child.strings()
        elif key in BOOLEAN_KEYS:
            settings[key] = child.boolean(BOOLEAN_KEYS[key])
        elif key == "kubeconfig":
            # The name of a secret config key holding the kubeconfig, never the kubeconfig itself.
            settings[key] = child.secret_key_name(secret_keys)
        else:
            settings[key] = child.string()
    for index, cidr in enumerate(settings.get("publicAccessCidrs", ())):
        if not _CIDR.match(cidr):
            raise (
                node.child("publicAccessCidrs")
                .child(index)
                .error(f"{cidr!r} is not an IPv4 CIDR block like 203.0.113.0/24")
            )
    return ClusterSpec(
        name=dns_label(node.child("name")),
        create=create,
        protect=node.child("protect").boolean(True),
        settings=settings,
    )
