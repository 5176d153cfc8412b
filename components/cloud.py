"""Per-cloud wiring: the cloud provider, the cluster (created or existing), and its GPU pools."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pulumi_oci as oci

from components.eks import EksCluster, EksClusterArgs, EksGpuNodeGroup, EksGpuNodeGroupArgs
from components.existing import ExistingNodePool, ExistingNodePoolArgs
from components.gke import GkeCluster, GkeClusterArgs, GkeGpuPool, GkeGpuPoolArgs
from components.oke import OkeCluster, OkeClusterArgs, OkeGpuPool, OkeGpuPoolArgs
from mig.clouds import Cloud
from mig.plan import StackPlan
from mig.spec import NAMESPACE


@dataclass
class ClusterConnection:
    kubernetes: k8s.Provider
    """Provider every Kubernetes object is created with."""
    kubeconfig: pulumi.Output[str] | None
    """Kubeconfig of a created cluster (a secret), else None."""
    cluster: pulumi.Input[str]
    """Cluster name (GKE, EKS) or OCID (OKE) the pools join."""
    pools: list[pulumi.Resource]


def _cloud_provider(plan: StackPlan) -> pulumi.ProviderResource | None:
    settings = plan.spec.cluster
    if plan.spec.cloud is Cloud.GKE:
        return gcp.Provider("gcp", project=settings.get("project"))
    if plan.spec.cloud is Cloud.EKS:
        return aws.Provider("aws", region=settings.get("region"))
    if plan.spec.cloud is Cloud.OKE:
        return oci.Provider("oci")
    return None


def _opts(provider: pulumi.ProviderResource | None, **kwargs: object) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(providers=[provider] if provider else None, **kwargs)  # type: ignore[arg-type]


def connect(plan: StackPlan) -> ClusterConnection:
    """Create or reference the cluster, then its GPU pools."""
    spec = plan.spec
    cluster = spec.cluster
    provider = _cloud_provider(plan)
    kubeconfig: pulumi.Output[str] | None = None
    cluster_ref: pulumi.Input[str] = cluster.name
    created: list[pulumi.Resource] = []
    if cluster.create and spec.cloud is Cloud.GKE:
        gke = GkeCluster(
            cluster.name,
            GkeClusterArgs(
                name=cluster.name,
                location=cluster.get("location"),
                network=cluster.get("network"),
                subnetwork=cluster.get("subnetwork"),
                master_ipv4_cidr_block=cluster.get("masterIpv4CidrBlock") or "172.16.0.32/28",
                release_channel=cluster.get("releaseChannel") or "REGULAR",
                protect=cluster.protect,
            ),
            _opts(provider),
        )
        kubeconfig, cluster_ref, created = gke.kubeconfig, gke.name, [gke]
    elif cluster.create and spec.cloud is Cloud.EKS:
        eks = EksCluster(
            cluster.name,
            EksClusterArgs(
                name=cluster.name,
                version=cluster.get("version"),
                subnet_ids=cluster.get("subnetIds"),
                endpoint_public_access=cluster.get("endpointPublicAccess", False),
                protect=cluster.protect,
            ),
            region=cluster.get("region"),
            opts=_opts(provider),
        )
        kubeconfig, cluster_ref, created = eks.kubeconfig, eks.name, [eks]
    elif cluster.create and spec.cloud is Cloud.OKE:
        oke = OkeCluster(
            cluster.name,
            OkeClusterArgs(
                name=cluster.name,
                compartment_id=cluster.get("compartmentId"),
                vcn_id=cluster.get("vcnId"),
                endpoint_subnet_id=cluster.get("endpointSubnetId"),
                kubernetes_version=cluster.get("kubernetesVersion"),
                node_subnet_id=cluster.get("subnetIds")[0],
                pod_subnet_ids=cluster.get("podSubnetIds"),
                availability_domain=cluster.get("availabilityDomains")[0],
                system_image_id=cluster.get("systemImageId"),
                protect=cluster.protect,
            ),
            _opts(provider),
        )
        kubeconfig, cluster_ref, created = oke.kubeconfig, oke.id, [oke]
    elif spec.cloud is Cloud.OKE:
        cluster_ref = cluster.get("clusterId")

    if kubeconfig is not None:
        kubernetes = k8s.Provider("kubernetes", kubeconfig=kubeconfig)
    elif spec.cloud is Cloud.EXISTING and cluster.get("kubeconfig"):
        secret = pulumi.Config(NAMESPACE).require_secret(cluster.get("kubeconfig"))
        kubernetes = k8s.Provider("kubernetes", kubeconfig=secret)
    else:
        # The ambient kubeconfig (KUBECONFIG or ~/.kube/config), optionally a named context.
        kubernetes = k8s.Provider("kubernetes", context=cluster.get("context"))

    pools: list[pulumi.Resource] = []
    for pool in plan.pools:
        opts = _opts(provider, depends_on=created)
        if spec.cloud is Cloud.GKE:
            pools.append(
                GkeGpuPool(
                    pool.name,
                    GkeGpuPoolArgs(pool, cluster_ref, cluster.get("location"), cluster.protect),
                    opts,
                )
            )
        elif spec.cloud is Cloud.EKS:
            pools.append(
                EksGpuNodeGroup(
                    pool.name,
                    EksGpuNodeGroupArgs(
                        pool, cluster_ref, cluster.get("subnetIds"), cluster.protect
                    ),
                    opts,
                )
            )
        elif spec.cloud is Cloud.OKE:
            pools.append(
                OkeGpuPool(
                    pool.name,
                    OkeGpuPoolArgs(
                        pool=pool,
                        cluster_id=cluster_ref,
                        compartment_id=cluster.get("compartmentId"),
                        kubernetes_version=cluster.get("kubernetesVersion"),
                        subnet_ids=cluster.get("subnetIds"),
                        pod_subnet_ids=cluster.get("podSubnetIds") or cluster.get("subnetIds"),
                        availability_domains=cluster.get("availabilityDomains"),
                        protect=cluster.protect,
                    ),
                    opts,
                )
            )
        else:
            pools.append(
                ExistingNodePool(
                    pool.name,
                    ExistingNodePoolArgs(pool),
                    pulumi.ResourceOptions(providers=[kubernetes]),
                )
            )
    return ClusterConnection(kubernetes, kubeconfig, cluster_ref, pools)
