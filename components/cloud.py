"""Per-cloud wiring: the cloud provider, the cluster (created or joined) and its GPU pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pulumi_oci as oci

from components.cluster_autoscaler import (
    EksClusterAutoscaler,
    EksClusterAutoscalerArgs,
    OkeClusterAutoscaler,
    OkeClusterAutoscalerArgs,
)
from components.eks import EksCluster, EksClusterArgs, EksGpuNodeGroup, EksGpuNodeGroupArgs
from components.existing import ExistingNodePool, ExistingNodePoolArgs
from components.gke import GkeCluster, GkeClusterArgs, GkeGpuPool, GkeGpuPoolArgs
from components.oke import OkeCluster, OkeClusterArgs, OkeGpuPool, OkeGpuPoolArgs
from mig.clouds import Cloud
from mig.plan import PoolPlan, StackPlan

GKE_MASTER_CIDR = "172.16.0.32/28"
GKE_RELEASE_CHANNEL = "REGULAR"


@dataclass
class Cluster:
    """The cluster a stack's pools join."""

    cloud_provider: pulumi.ProviderResource | None
    """The cloud's provider, configured from the stack (None for `existing`)."""
    ref: pulumi.Input[str]
    """Cluster name (GKE, EKS) or OCID (OKE) the pools join."""
    kubeconfig: pulumi.Output[str] | None = None
    """Kubeconfig of a cluster this stack created (a secret)."""
    kubernetes_version: pulumi.Input[str] | None = None
    """OKE: the version node pools run (the cluster's unless the stack names one)."""
    created: list[pulumi.Resource] = field(default_factory=list)
    """The cluster component when this stack created it."""


def _cloud_provider(plan: StackPlan) -> pulumi.ProviderResource | None:
    settings = plan.spec.cluster
    if plan.spec.cloud is Cloud.GKE:
        return gcp.Provider("gcp", project=settings.get("project"))
    if plan.spec.cloud is Cloud.EKS:
        return aws.Provider("aws", region=settings.get("region"))
    if plan.spec.cloud is Cloud.OKE:
        return oci.Provider("oci")
    return None


def _opts(
    provider: pulumi.ProviderResource | None, depends_on: Sequence[pulumi.Resource] = ()
) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(
        providers=[provider] if provider else None, depends_on=list(depends_on) or None
    )


def cluster(plan: StackPlan) -> Cluster:
    """Create the cluster (ephemeral stacks) or refer to the one the stack names."""
    spec = plan.spec
    settings = spec.cluster
    provider = _cloud_provider(plan)
    if settings.create and spec.cloud is Cloud.GKE:
        gke = GkeCluster(
            settings.name,
            GkeClusterArgs(
                name=settings.name,
                location=settings.get("location"),
                network=settings.get("network"),
                subnetwork=settings.get("subnetwork"),
                master_ipv4_cidr_block=settings.get("masterIpv4CidrBlock") or GKE_MASTER_CIDR,
                release_channel=settings.get("releaseChannel") or GKE_RELEASE_CHANNEL,
                protect=settings.protect,
                cloud_nat=settings.get("cloudNat"),
                project=settings.get("project"),
            ),
            _opts(provider),
        )
        return Cluster(provider, gke.name, gke.kubeconfig, created=[gke])
    if settings.create and spec.cloud is Cloud.EKS:
        eks = EksCluster(
            settings.name,
            EksClusterArgs(
                name=settings.name,
                version=settings.get("version"),
                subnet_ids=settings.get("subnetIds"),
                endpoint_public_access=settings.get("endpointPublicAccess"),
                public_access_cidrs=settings.get("publicAccessCidrs"),
                protect=settings.protect,
            ),
            region=settings.get("region"),
            opts=_opts(provider),
        )
        return Cluster(provider, eks.name, eks.kubeconfig, created=[eks])
    if settings.create and spec.cloud is Cloud.OKE:
        oke = OkeCluster(
            settings.name,
            OkeClusterArgs(
                name=settings.name,
                compartment_id=settings.get("compartmentId"),
                vcn_id=settings.get("vcnId"),
                endpoint_subnet_id=settings.get("endpointSubnetId"),
                kubernetes_version=settings.get("kubernetesVersion"),
                node_subnet_id=settings.get("subnetIds")[0],
                pod_subnet_ids=settings.get("podSubnetIds"),
                availability_domain=settings.get("availabilityDomains")[0],
                system_image_id=settings.get("systemImageId"),
                endpoint_public_access=settings.get("endpointPublicAccess"),
                protect=settings.protect,
            ),
            _opts(provider),
        )
        return Cluster(
            provider, oke.id, oke.kubeconfig, settings.get("kubernetesVersion"), created=[oke]
        )
    if spec.cloud is Cloud.OKE:
        cluster_id = settings.get("clusterId")
        version = settings.get("kubernetesVersion") or (
            oci.containerengine.get_cluster_output(
                cluster_id=cluster_id, opts=pulumi.InvokeOutputOptions(provider=provider)
            ).kubernetes_version
        )
        return Cluster(provider, cluster_id, kubernetes_version=version)
    return Cluster(provider, settings.name)


def gpu_pools(
    plan: StackPlan,
    joined: Cluster,
    kubernetes: k8s.Provider,
    depends_on: Mapping[str, Sequence[pulumi.Resource]],
) -> list[pulumi.Resource]:
    """Every pool of the stack, each after the resources named for it in `depends_on` (the GPU
    Operator, and the re-partitioning Job of a pool that changes its layout in place)."""
    return [
        _pool(plan, pool, joined, kubernetes, depends_on.get(pool.name, ())) for pool in plan.pools
    ]


def _pool(
    plan: StackPlan,
    pool: PoolPlan,
    joined: Cluster,
    kubernetes: k8s.Provider,
    after: Sequence[pulumi.Resource],
) -> pulumi.Resource:
    spec = plan.spec
    settings = spec.cluster
    opts = _opts(joined.cloud_provider, [*joined.created, *after])
    if spec.cloud is Cloud.GKE:
        return GkeGpuPool(
            pool.name,
            GkeGpuPoolArgs(pool, joined.ref, settings.get("location"), settings.protect),
            opts,
        )
    if spec.cloud is Cloud.EKS:
        return EksGpuNodeGroup(
            pool.name,
            EksGpuNodeGroupArgs(pool, joined.ref, settings.get("subnetIds"), settings.protect),
            opts,
        )
    if spec.cloud is Cloud.OKE:
        assert joined.kubernetes_version is not None
        return OkeGpuPool(
            pool.name,
            OkeGpuPoolArgs(
                pool=pool,
                cluster_id=joined.ref,
                compartment_id=settings.get("compartmentId"),
                kubernetes_version=joined.kubernetes_version,
                subnet_ids=settings.get("subnetIds"),
                pod_subnet_ids=settings.get("podSubnetIds") or settings.get("subnetIds"),
                availability_domains=settings.get("availabilityDomains"),
                protect=settings.protect,
            ),
            opts,
        )
    return ExistingNodePool(
        pool.name,
        ExistingNodePoolArgs(pool),
        pulumi.ResourceOptions(providers=[kubernetes], depends_on=list(after) or None),
    )


def cluster_autoscaler(
    plan: StackPlan,
    joined: Cluster,
    kubernetes: k8s.Provider,
    pools: Sequence[pulumi.Resource],
) -> pulumi.Resource | None:
    """The cloud's Cluster Autoscaler when a pool autoscales (GKE's is built in)."""
    spec = plan.spec
    autoscaled = [
        (pool, made) for pool, made in zip(plan.pools, pools, strict=True) if pool.autoscaled
    ]
    if not autoscaled:
        return None
    if spec.cloud is Cloud.EKS:
        return EksClusterAutoscaler(
            "cluster-autoscaler",
            EksClusterAutoscalerArgs(
                cluster_name=spec.cluster.name,
                region=spec.cluster.get("region"),
                install_pod_identity_agent=spec.cluster.create,
            ),
            kubernetes,
            _opts(joined.cloud_provider, [*joined.created, *pools]),
        )
    if spec.cloud is Cloud.OKE:
        return OkeClusterAutoscaler(
            "cluster-autoscaler",
            OkeClusterAutoscalerArgs(
                cluster_id=joined.ref,
                pools=[
                    (pool.min_nodes, pool.max_nodes, made.id)  # type: ignore[attr-defined]
                    for pool, made in autoscaled
                ],
            ),
            _opts(joined.cloud_provider, [*joined.created, *pools]),
        )
    return None
