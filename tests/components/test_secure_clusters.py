"""Clusters the stack creates are secure by default (issue 27, items 6 and 7): GKE with Workload
Identity, its public endpoint open to the authorized networks only, a control-plane range of its
own and Cloud NAT ports for busy GPU nodes; EKS's public endpoint only for the listed networks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mig_inference.components.clouds.gke import NAT_MAX_PORTS, NAT_MIN_PORTS
from mig_inference.errors import MigError
from mig_inference.spec import parse_stack
from mig_inference.spec.cluster import gke_master_cidr
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import named, one, render_config, stack_rendering
from tests.rollout.test_rollout import stack

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"


def _gke_created(**cluster: Any) -> dict[str, Any]:
    config = stack("gke", replicas=1)
    config["cluster"].update(create=True, network="gpu-vpc", subnetwork="gpu-subnet", **cluster)
    return config


def _errors(config: dict[str, Any]) -> list[MigError]:
    with pytest.raises(MigError) as caught:
        parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
    return list(caught.value.errors)


def test_the_ephemeral_gke_cluster_is_closed_and_uses_workload_identity() -> None:
    rendering = stack_rendering("ephemeral-gke")
    cluster = one(rendering, CLUSTER).inputs
    assert cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [
        {"cidrBlock": "203.0.113.0/24", "displayName": "mig-inference 0"}
    ]
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "my-gcp-project.svc.id.goog"}
    assert cluster["privateClusterConfig"]["masterIpv4CidrBlock"] == gke_master_cidr(
        "mig-ephemeral"
    )
    for pool in rendering.of_type(NODE_POOL):
        assert pool.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    nat = one(rendering, "gcp:compute/routerNat:RouterNat").inputs
    assert nat["enableDynamicPortAllocation"] is True
    assert nat["enableEndpointIndependentMapping"] is False
    assert (nat["minPortsPerVm"], nat["maxPortsPerVm"]) == (NAT_MIN_PORTS, NAT_MAX_PORTS)


def test_a_joined_gke_cluster_pool_runs_the_gke_metadata_server_unless_told_not_to() -> None:
    pool = named(stack_rendering("gke-h100"), NODE_POOL, "h100-mig").inputs
    assert pool["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}


def test_gke_authorized_networks_are_required_when_creating() -> None:
    [error] = _errors(_gke_created())
    assert error.path == "mig-inference:cluster.authorizedNetworks"
    assert "is required for cloud gke when create is true" in error.message
    [error] = _errors(_gke_created(authorizedNetworks=["10.0.0.0/33"]))
    assert error.path == "mig-inference:cluster.authorizedNetworks[0]"


def test_two_ephemeral_clusters_get_their_own_control_plane_range(tmp_path: Path) -> None:
    ranges = {gke_master_cidr(f"ci-{n}") for n in range(50)}
    assert len(ranges) > 45  # 4,096 blocks: names rarely meet
    for block in ranges:
        first, second, third, last = block.removesuffix("/28").split(".")
        assert (first, second) == ("172", "16") and int(last) % 16 == 0 and int(third) < 256
    config = _gke_created(authorizedNetworks=["203.0.113.0/24"])
    config["cluster"]["name"] = "ci-7"
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    private = one(rendering, CLUSTER).inputs["privateClusterConfig"]
    assert private["masterIpv4CidrBlock"] == gke_master_cidr("ci-7")
    config["cluster"]["masterIpv4CidrBlock"] = "10.10.0.0/28"
    spec = parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
    assert spec.cluster.get("masterIpv4CidrBlock") == "10.10.0.0/28"


def test_eks_public_endpoint_needs_its_networks() -> None:
    config = stack("eks")
    config["cluster"].update(create=True, vpcId="vpc-0123456789abcdef0", version="1.33")
    [error] = _errors(config)
    assert error.path == "mig-inference:cluster.publicAccessCidrs"
    assert "0.0.0.0/0" in error.message
    config["cluster"]["endpointPublicAccess"] = False
    assert parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
    config["cluster"].update(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])
    assert parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
