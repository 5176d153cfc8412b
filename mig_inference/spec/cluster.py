"""`mig-inference:cluster`: the cluster a stack creates or joins, per cloud, and how the program
reaches its Kubernetes API."""

from __future__ import annotations

import ipaddress
from typing import Any

from mig_inference.clouds import Cloud
from mig_inference.clouds.kubernetes_versions import offered_versions, version_problem
from mig_inference.names.digest import short_hash
from mig_inference.spec import formats
from mig_inference.spec.formats import Format
from mig_inference.spec.model import ClusterSpec
from mig_inference.spec.reader import ConfigNode, SecretNames, dns_label

ACCESS_KEYS = ("context", "kubeconfig")
"""On every cloud: reach the API through a named context of your kubeconfig file, or through a
kubeconfig stored as a secret config key, instead of the cluster's own endpoint."""
CLUSTER_KEYS: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location", "network", "subnetwork", "masterIpv4CidrBlock",
                "releaseChannel", "cloudNat", "authorizedNetworks", "nodeServiceAccount",
                "workloadIdentity"),
    Cloud.EKS: ("region", "subnetIds", "vpcId", "version", "endpointPublicAccess",
                "publicAccessCidrs", "nodeRoleArn", "permissionsBoundary", "imdsHopLimit"),
    Cloud.OKE: ("compartmentId", "clusterId", "vcnId", "subnetIds", "podSubnetIds",
                "endpointSubnetId", "availabilityDomains", "kubernetesVersion", "systemImageId",
                "endpointPublicAccess"),
    Cloud.EXISTING: (),
}  # fmt: skip
LIST_KEYS = (
    "subnetIds",
    "podSubnetIds",
    "availabilityDomains",
    "publicAccessCidrs",
    "authorizedNetworks",
)
BOOLEAN_KEYS = {"endpointPublicAccess": True, "cloudNat": True, "workloadIdentity": True}
INTEGER_KEYS = {"imdsHopLimit": (1, formats.IMDS_HOP_LIMIT)}
"""Whole-number keys, their defaults and bounds."""
"""Switches and their defaults: created clusters answer on a public endpoint (so `pulumi up`
from a laptop reaches the API it just created) and GKE's private nodes get a Cloud NAT."""
CLUSTER_REQUIRED: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location"),
    Cloud.EKS: ("region", "subnetIds"),
    Cloud.OKE: ("compartmentId", "subnetIds", "availabilityDomains"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_CREATING: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("network", "subnetwork", "authorizedNetworks"),
    Cloud.EKS: ("vpcId", "version"),
    Cloud.OKE: ("vcnId", "endpointSubnetId", "podSubnetIds", "kubernetesVersion", "systemImageId"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_JOINING: dict[Cloud, tuple[str, ...]] = {
    Cloud.OKE: ("clusterId",),
}
ONLY_WHEN_CREATING = ("network", "subnetwork", "masterIpv4CidrBlock", "releaseChannel",
                      "cloudNat", "authorizedNetworks", "vpcId", "version",
                      "endpointPublicAccess", "publicAccessCidrs",
                      "vcnId", "endpointSubnetId", "systemImageId")  # fmt: skip
KEY_FORMATS: dict[Cloud, dict[str, Format]] = {
    Cloud.GKE: {"project": formats.GCP_PROJECT, "location": formats.GCP_LOCATION,
                "network": formats.GCP_RESOURCE, "subnetwork": formats.GCP_RESOURCE,
                "masterIpv4CidrBlock": formats.IPV4_CIDR, "authorizedNetworks": formats.IPV4_CIDR,
                "releaseChannel": formats.GKE_RELEASE_CHANNEL,
                "nodeServiceAccount": formats.GCP_NODE_SERVICE_ACCOUNT},
    Cloud.EKS: {"region": formats.AWS_REGION, "subnetIds": formats.AWS_SUBNET,
                "vpcId": formats.AWS_VPC, "version": formats.EKS_VERSION,
                "publicAccessCidrs": formats.IPV4_CIDR, "nodeRoleArn": formats.IAM_ROLE_ARN,
                "permissionsBoundary": formats.IAM_POLICY_ARN},
    Cloud.OKE: {"compartmentId": formats.ocid("compartment"), "clusterId": formats.ocid("cluster"),
                "vcnId": formats.ocid("vcn"), "subnetIds": formats.ocid("subnet"),
                "podSubnetIds": formats.ocid("subnet"), "endpointSubnetId": formats.ocid("subnet"),
                "availabilityDomains": formats.AVAILABILITY_DOMAIN,
                "kubernetesVersion": formats.OKE_VERSION, "systemImageId": formats.ocid("image")},
    Cloud.EXISTING: {},
}  # fmt: skip
"""The format of every string key of the cluster, per cloud (see mig_inference.spec.formats)."""
GKE_MASTER_RANGE = (172, 16)
"""Control-plane /28 blocks of created GKE clusters are taken from 172.16.0.0/16 (4,096 blocks),
one per cluster name, so two ephemeral clusters in one VPC do not collide (unless two names
hash alike, or the VPC uses that range: then set masterIpv4CidrBlock)."""


def gke_master_cidr(cluster_name: str) -> str:
    """The control-plane block of a created GKE cluster that names none: a /28 of
    172.16.0.0/16 chosen by the cluster's name."""
    index = int(short_hash(cluster_name, 6), 16) % 4096
    first, second = GKE_MASTER_RANGE
    return f"{first}.{second}.{index // 16}.{index % 16 * 16}/28"


def cluster_spec(node: ConfigNode, cloud: Cloud, secrets: SecretNames) -> ClusterSpec:
    base = ("name", "create", "protect")
    raw = node.mapping(base + CLUSTER_KEYS[cloud] + ACCESS_KEYS)
    create = node.child("create").boolean(False)
    if create and cloud is Cloud.EXISTING:
        create = node.child("create").problem(
            "an `existing` cluster cannot be created; pick gke, eks or oke", False
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
            node.child(key).problem(
                f"is required for cloud {cloud.value}{'' if common else when}", None
            )
    if not create:
        for key in ONLY_WHEN_CREATING:
            if raw.get(key) is not None:
                node.child(key).problem(
                    "only applies when create is true (this stack joins a cluster it does not "
                    "create)",
                    None,
                )
    if raw.get("context") is not None and raw.get("kubeconfig") is not None:
        node.child("kubeconfig").problem("give context or kubeconfig, not both", None)
    if cloud is Cloud.EXISTING and raw.get("context") is None and raw.get("kubeconfig") is None:
        node.child("context").problem(
            "is required for cloud existing (a context of your kubeconfig file), or set "
            "kubeconfig to a secret config key holding one; the program never uses whatever "
            "context happens to be current",
            None,
        )
    settings: dict[str, Any] = {}
    key_formats = {**KEY_FORMATS[cloud], "context": formats.CONTEXT}
    for key in CLUSTER_KEYS[cloud] + ACCESS_KEYS:
        child = node.child(key)
        if key in LIST_KEYS:
            settings[key] = child.texts(key_formats[key])
        elif key in BOOLEAN_KEYS:
            settings[key] = child.boolean(BOOLEAN_KEYS[key])
        elif key in INTEGER_KEYS:
            default, bound = INTEGER_KEYS[key]
            settings[key] = child.integer(default, bound=bound)
        elif key in ("version", "kubernetesVersion") and child.unquoted_version():
            settings[key] = None
        elif key == "kubeconfig":
            # The name of a secret config key holding the kubeconfig, never the kubeconfig itself.
            settings[key] = child.secret_key_name(secrets)
        else:
            settings[key] = child.text(key_formats[key])
    _offered_version(node, cloud, settings)
    cidr = settings.get("masterIpv4CidrBlock")
    if cloud is Cloud.GKE and cidr and not cidr.endswith("/28"):
        node.child("masterIpv4CidrBlock").problem(
            "must be a /28 block: GKE gives the control plane exactly 16 addresses", None
        )
    _network_rules(node, cloud, settings)
    gke = "a GKE cluster (formats.GKE_CLUSTER)" if cloud is Cloud.GKE else None
    name = dns_label(node.child("name"), names=gke)
    if cloud is Cloud.GKE and create and not cidr:
        settings["masterIpv4CidrBlock"] = gke_master_cidr(name)
    if (
        cloud is Cloud.EKS
        and create
        and settings.get("endpointPublicAccess")
        and raw.get("publicAccessCidrs") in (None, [])
    ):
        node.child("publicAccessCidrs").problem(
            "is required when the created cluster's endpoint is public (endpointPublicAccess, "
            "true by default): the networks allowed to reach the API (EKS's default would be "
            "0.0.0.0/0, everywhere); or set endpointPublicAccess: false and run from the VPC",
            None,
        )
    return ClusterSpec(
        name=name,
        create=create,
        protect=node.child("protect").boolean(True),
        settings=settings,
    )


def _offered_version(node: ConfigNode, cloud: Cloud, settings: dict[str, Any]) -> None:
    """The cluster's Kubernetes version (EKS `version`, OKE `kubernetesVersion`, its node pools'
    too) must be one the cloud offers (mig_inference.clouds.kubernetes_versions)."""
    key = {Cloud.EKS: "version", Cloud.OKE: "kubernetesVersion"}.get(cloud)
    version = settings.get(key) if key else None
    problem = version_problem(cloud, version) if isinstance(version, str) else None
    if key is not None and problem is not None:
        node.child(key).problem(problem, None, offered_versions(cloud))


def _network_rules(node: ConfigNode, cloud: Cloud, settings: dict[str, Any]) -> None:
    """What the clouds refuse of lists and of values read together: EKS's 40 public access
    blocks, none of them reserved; GKE's 100 authorized networks; IAM ARNs of the region's
    partition (each rule's source is beside its bound in formats)."""
    if cloud is Cloud.EKS:
        blocks = settings.get("publicAccessCidrs") or ()
        if len(blocks) > formats.EKS_PUBLIC_ACCESS_CIDRS_MAX:
            node.child("publicAccessCidrs").problem(
                f"has {len(blocks)} blocks; EKS takes at most "
                f"{formats.EKS_PUBLIC_ACCESS_CIDRS_MAX} per cluster",
                None,
            )
        reserved = [ipaddress.IPv4Network(block) for block in formats.EKS_RESERVED_RANGES]
        listed = node.child("publicAccessCidrs").value
        for index, block in enumerate(listed if isinstance(listed, list) else []):
            if block not in blocks:
                continue  # refused for its format already
            network = ipaddress.IPv4Network(block, strict=False)
            inside = next((r for r in reserved if network.subnet_of(r)), None)
            if inside is not None:
                node.child("publicAccessCidrs").child(index).problem(
                    f"{block} is inside the reserved range {inside}: EKS refuses reserved "
                    "addresses for public endpoint access (reach a private range through the "
                    "private endpoint instead)",
                    None,
                )
        region = settings.get("region")
        for key in ("nodeRoleArn", "permissionsBoundary"):
            arn = settings.get(key)
            if isinstance(arn, str) and isinstance(region, str):
                partition, wanted = arn.split(":")[1], formats.aws_partition(region)
                if partition != wanted:
                    node.child(key).problem(
                        f"is in partition {partition}, and region {region} is in {wanted}: "
                        "IAM ARNs of another partition do not exist there",
                        None,
                    )
    if cloud is Cloud.GKE:
        networks = settings.get("authorizedNetworks") or ()
        if len(networks) > formats.GKE_AUTHORIZED_NETWORKS_MAX:
            node.child("authorizedNetworks").problem(
                f"has {len(networks)} networks; GKE takes at most "
                f"{formats.GKE_AUTHORIZED_NETWORKS_MAX} on a cluster with private nodes",
                None,
            )
