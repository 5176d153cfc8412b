"""What the clouds answer the stack program offline, under Pulumi's mocks: the computed outputs
of the resources it creates and the fields of the data sources it reads (a joined cluster's
endpoint, CA, version and add-ons). `render` and `components.testing` answer from these tables;
tests change an entry to play a cluster that differs."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# Computed outputs the program reads from cloud resources; the mocks return plausible values.
FAKE_OUTPUTS: dict[str, dict[str, Any]] = {
    "gcp:container/cluster:Cluster": {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "Y2EtY2VydGlmaWNhdGU="},
    },
    "aws:eks/cluster:Cluster": {
        "endpoint": "https://example.eks.amazonaws.com",
        "certificateAuthority": {"data": "Y2EtY2VydGlmaWNhdGU="},
        "arn": "arn:aws:eks:us-east-1:123456789012:cluster/mock",
        "identities": [
            {"oidcs": [{"issuer": "https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"}]}
        ],
        "vpcConfig": {
            "clusterSecurityGroupId": "sg-0123456789abcdef0",
            "vpcId": "vpc-0a1b2c3d4e5f60718",
        },
    },
    "oci:ContainerEngine/cluster:Cluster": {
        "endpoints": [{"publicEndpoint": "203.0.113.40:6443", "privateEndpoint": "10.0.0.4:6443"}]
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1},
    "aws:iam/role:Role": {"arn": "arn:aws:iam::123456789012:role/mock"},
    # The address a GKE load balancer gets once the Gateway is programmed.
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": {
        "status": {"addresses": [{"type": "IPAddress", "value": "10.128.0.100"}]}
    },
    "aws:eks/nodeGroup:NodeGroup": {
        "arn": "arn:aws:eks:us-east-1:123456789012:nodegroup/mock/mock/mock",
        "resources": [{"autoscalingGroups": [{"name": "eks-mock-node-group-asg"}]}],
    },
}
_CA = "Y2EtY2VydGlmaWNhdGU="
CAPACITY_BLOCK_LOOKUP = "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation"
SUBNETS_LOOKUP = "aws:ec2/getSubnets:getSubnets"
GCP_SUBNETWORKS_LOOKUP = "gcp:compute/getSubnetworks:getSubnetworks"
OFFLINE_GCP_NETWORK = "default"
OFFLINE_GCP_NODE_SUBNETS = frozenset({"10.128.0.0/20"})
"""Offline, the ranges of the region's node subnets (purpose PRIVATE; the default network's
us-central1 range): no proxy-only subnet has them."""
"""The VPC network a GKE region's subnets are on offline (the shipped GKE stacks' network)."""
FAKE_BLOCK_END = "2030-01-07T11:30:00Z"
# Data sources the program calls to find the cluster a stack joins (its arguments are echoed).
FAKE_CALLS: dict[str, dict[str, Any]] = {
    "gcp:organizations/getProject:getProject": {"number": "123456789012"},
    # A joined cluster has the add-ons the stack needs (mig_inference/clouds/addons.py).
    "gcp:container/getCluster:getCluster": {
        "endpoint": "203.0.113.20",
        "masterAuths": [{"clusterCaCertificate": _CA}],
        "addonsConfigs": [
            {
                "gcePersistentDiskCsiDriverConfigs": [{"enabled": True}],
                "gcsFuseCsiDriverConfigs": [{"enabled": True}],
            }
        ],
        "datapathProvider": "ADVANCED_DATAPATH",
        # A joined cluster runs the Gateway API, on a GKE new enough for the InferencePool.
        "gatewayApiConfigs": [{"channel": "CHANNEL_STANDARD"}],
        "masterVersion": "1.35.2-gke.1842000",
    },
    "aws:eks/getAddon:getAddon": {
        "configurationValues": json.dumps({"enableNetworkPolicy": "true"})
    },
    "aws:eks/getCluster:getCluster": {
        "endpoint": "https://joined.example.eks.amazonaws.com",
        "certificateAuthorities": [{"data": _CA}],
        "version": "1.33",
    },
    "oci:ContainerEngine/getCluster:getCluster": {
        "kubernetesVersion": "v1.33.1",
        "type": "ENHANCED_CLUSTER",
        "endpoints": [{"publicEndpoint": "203.0.113.30:6443", "privateEndpoint": "10.0.0.3:6443"}],
    },
    "oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig": {
        "content": "apiVersion: v1\nkind: Config\n"
    },
    "gcp:compute/getSubnetwork:getSubnetwork": {
        "selfLink": "https://www.googleapis.com/compute/v1/projects/p/regions/r/subnetworks/s"
    },
    CAPACITY_BLOCK_LOOKUP: {"availabilityZone": "us-east-1a", "endDate": FAKE_BLOCK_END},
    SUBNETS_LOOKUP: {},
    GCP_SUBNETWORKS_LOOKUP: {},
}
# The version each cloud's lookup reports for a joined cluster, in its own form. Offline, the
# cluster a DRA stack joins runs the Kubernetes minor the stack names.
CLUSTER_VERSIONS: dict[str, tuple[str, str]] = {
    "aws:eks/getCluster:getCluster": ("version", "1.{minor}"),
    "oci:ContainerEngine/getCluster:getCluster": ("kubernetesVersion", "v1.{minor}.0"),
    "gcp:container/getCluster:getCluster": ("masterVersion", "1.{minor}.0-gke.0"),
}


def _subnets_in_zone(args: Mapping[str, Any]) -> dict[str, Any]:
    """Offline, every subnet a `getSubnets` lookup names is in the zone it asks for (the
    Capacity Block's)."""
    named = [f for f in args.get("filters") or [] if f.get("name") == "subnet-id"]
    return {"ids": list(named[0].get("values") or []) if named else []}


def offline_outputs(type_token: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A created resource's outputs offline: its inputs, and the computed outputs the program
    reads from resources of that type."""
    return {**inputs, **FAKE_OUTPUTS.get(type_token, {})}


def offline_answer(
    token: str, args: Mapping[str, Any], kubernetes_minor: int | None = None
) -> dict[str, Any]:
    """A data source's answer offline: its arguments echoed, with the fields the program reads
    (a joined cluster's endpoint, CA, version ...); with `kubernetes_minor`, the version the
    cluster reports is that minor."""
    derived = _subnets_in_zone(args) if token == SUBNETS_LOOKUP else {}
    if token == GCP_SUBNETWORKS_LOOKUP:
        derived = _subnetworks_filtered(args)
    answer = {**args, **derived, **FAKE_CALLS.get(token, {})}
    version = CLUSTER_VERSIONS.get(token)
    if kubernetes_minor is not None and version is not None:
        answer[version[0]] = version[1].format(minor=kubernetes_minor)
    return answer


def _subnetworks_filtered(args: Mapping[str, Any]) -> dict[str, Any]:
    """Offline, the region has the subnet an `ipCidrRange eq <range>` or `(ipCidrRange =
    "<range>") (purpose = "<purpose>")` filter asks for, on `OFFLINE_GCP_NETWORK`: a node subnet
    for a range of `OFFLINE_GCP_NODE_SUBNETS` (which a purpose other than PRIVATE excludes),
    else a proxy-only subnet (REGIONAL_MANAGED_PROXY)."""
    text = str(args.get("filter") or "")
    found = re.fullmatch(r"ipCidrRange eq (\S+)", text) or re.fullmatch(
        r'\(ipCidrRange = "([^"]+)"\)(?: \(purpose = "([A-Z_]+)"\))?', text
    )
    if found is None:
        return {"subnetworks": []}
    purpose = "PRIVATE" if found.group(1) in OFFLINE_GCP_NODE_SUBNETS else "REGIONAL_MANAGED_PROXY"
    asked = found.group(2) if found.re.groups > 1 else None
    if asked is not None and asked != purpose:
        return {"subnetworks": []}
    network = (
        f"https://www.googleapis.com/compute/v1/projects/p/global/networks/{OFFLINE_GCP_NETWORK}"
    )
    return {
        "subnetworks": [{"name": "proxy-only", "ipCidrRange": found.group(1), "network": network}]
    }


def answers_offline(token: str) -> bool:
    """Whether `offline_answer` knows the fields the program reads from this data source."""
    return token in FAKE_CALLS
