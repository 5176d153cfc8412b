"""OKE: a cluster for ephemeral stacks, and MIG GPU node pools with VCN-native pod networking."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_oci as oci

from components.kubeconfig import oke_endpoint_type, oke_kubeconfig
from mig.bootstrap import oke_user_data
from mig.plan import PoolPlan

VCN_NATIVE_CNI = "OCI_VCN_IP_NATIVE"
EVICTION_GRACE = "PT60M"
"""The longest drain OKE allows before it terminates a node."""
SYSTEM_SHAPE = "VM.Standard.E5.Flex"


@dataclass
class OkeClusterArgs:
    name: str
    """Cluster name."""
    compartment_id: str
    """Compartment OCID."""
    vcn_id: str
    """VCN OCID."""
    endpoint_subnet_id: str
    """Subnet of the private Kubernetes API endpoint."""
    kubernetes_version: str
    """Kubernetes version, e.g. v1.33.1."""
    node_subnet_id: str
    """Subnet of the system pool's nodes."""
    pod_subnet_ids: Sequence[str]
    """Subnets pods get VCN-native addresses from."""
    availability_domain: str
    """Availability domain of the system pool."""
    system_image_id: str
    """Node image OCID of the system pool (an Oracle Linux OKE image)."""
    endpoint_public_access: bool = True
    """Give the API endpoint a public IP (its subnet must be public), so `pulumi up` from
    outside the VCN reaches the API; private otherwise (then run from a peered network)."""
    protect: bool = True
    """Protect the cluster from accidental deletion."""


class OkeCluster(pulumi.ComponentResource):
    """A minimal enhanced OKE cluster with VCN-native pod networking and a small CPU system
    pool; its kubeconfig targets the endpoint the stack chose."""

    id: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]

    def __init__(
        self, name: str, args: OkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:OkeCluster", name, None, opts)
        cluster = oci.containerengine.Cluster(
            name,
            name=args.name,
            compartment_id=args.compartment_id,
            vcn_id=args.vcn_id,
            kubernetes_version=args.kubernetes_version,
            type="ENHANCED_CLUSTER",
            cluster_pod_network_options=[
                oci.containerengine.ClusterClusterPodNetworkOptionArgs(cni_type=VCN_NATIVE_CNI)
            ],
            endpoint_config=oci.containerengine.ClusterEndpointConfigArgs(
                subnet_id=args.endpoint_subnet_id,
                is_public_ip_enabled=args.endpoint_public_access,
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        oci.containerengine.NodePool(
            f"{name}-system",
            name=f"{args.name}-system",
            cluster_id=cluster.id,
            compartment_id=args.compartment_id,
            kubernetes_version=args.kubernetes_version,
            node_shape=SYSTEM_SHAPE,
            node_shape_config=oci.containerengine.NodePoolNodeShapeConfigArgs(
                ocpus=2, memory_in_gbs=16
            ),
            node_source_details=oci.containerengine.NodePoolNodeSourceDetailsArgs(
                image_id=args.system_image_id, source_type="IMAGE"
            ),
            node_config_details=oci.containerengine.NodePoolNodeConfigDetailsArgs(
                size=2,
                placement_configs=[
                    oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigArgs(
                        availability_domain=args.availability_domain, subnet_id=args.node_subnet_id
                    )
                ],
                node_pool_pod_network_option_details=oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                    cni_type=VCN_NATIVE_CNI, pod_subnet_ids=list(args.pod_subnet_ids)
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        self.id = cluster.id
        self.kubeconfig = pulumi.Output.secret(
            oke_kubeconfig(cluster.id, oke_endpoint_type(args.endpoint_public_access))
        )
        self.register_outputs({"id": self.id, "kubeconfig": self.kubeconfig})


@dataclass
class OkeGpuPoolArgs:
    pool: PoolPlan
    """The pool's cloud-neutral description from the stack plan."""
    cluster_id: pulumi.Input[str]
    """OKE cluster OCID."""
    compartment_id: str
    """Compartment OCID."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version of the nodes (the cluster's, looked up, unless the stack names one)."""
    subnet_ids: Sequence[str]
    """Node subnets; placements pair them with availability domains in order."""
    pod_subnet_ids: Sequence[str]
    """Subnets pods get VCN-native addresses from."""
    availability_domains: Sequence[str]
    """Availability domains to place nodes in."""
    protect: bool = True
    """Protect the pool from accidental deletion."""


class OkeGpuPool(pulumi.ComponentResource):
    """An OKE node pool of MIG GPUs: labels through `initial_node_labels`, taints through
    cloud-init (OKE node pools have no taint field), VCN-native pods with `max_pods_per_node`."""

    id: pulumi.Output[str]

    def __init__(
        self, name: str, args: OkeGpuPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:OkeGpuPool", name, None, opts)
        pool = args.pool
        assert pool.machine is not None and pool.spec.image_id is not None
        domains = list(pool.spec.zones) or list(args.availability_domains)
        placements = [
            oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigArgs(
                availability_domain=domain,
                subnet_id=args.subnet_ids[index % len(args.subnet_ids)],
                preemptible_node_config=oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigPreemptibleNodeConfigArgs(
                    preemption_action=oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigPreemptibleNodeConfigPreemptionActionArgs(
                        type="TERMINATE", is_preserve_boot_volume=False
                    )
                )
                if pool.spec.spot
                else None,
            )
            for index, domain in enumerate(domains)
        ]
        node_pool = oci.containerengine.NodePool(
            name,
            # The generation in the name. OKE would rename a pool in place and apply changes
            # only to nodes it creates later, so a new generation must be a new pool:
            # `replace_on_changes` makes it one, created before the old one is deleted.
            name=pool.physical_name,
            cluster_id=args.cluster_id,
            compartment_id=args.compartment_id,
            kubernetes_version=args.kubernetes_version,
            node_shape=pool.machine.name,
            node_source_details=oci.containerengine.NodePoolNodeSourceDetailsArgs(
                image_id=pool.spec.image_id,
                source_type="IMAGE",
                boot_volume_size_in_gbs=str(pool.spec.disk_size_gb),
            ),
            node_config_details=oci.containerengine.NodePoolNodeConfigDetailsArgs(
                # OKE pools do not autoscale by themselves: the Cluster Autoscaler add-on grows
                # a {min, max} pool; it starts at min.
                size=pool.min_nodes,
                placement_configs=placements,
                node_pool_pod_network_option_details=oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                    cni_type=VCN_NATIVE_CNI,
                    max_pods_per_node=pool.max_pods,
                    pod_subnet_ids=list(args.pod_subnet_ids),
                ),
            ),
            initial_node_labels=[
                oci.containerengine.NodePoolInitialNodeLabelArgs(key=key, value=value)
                for key, value in pool.node_labels.items()
            ],
            node_metadata={"user_data": oke_user_data(pool.taints)},
            # OKE cordons and drains (honouring PodDisruptionBudgets) for up to an hour before
            # it terminates a node of a deleted or shrunk pool, then deletes it regardless.
            node_eviction_node_pool_settings=oci.containerengine.NodePoolNodeEvictionNodePoolSettingsArgs(
                eviction_grace_duration=EVICTION_GRACE,
                is_force_delete_after_grace_duration=True,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect,
                replace_on_changes=["name"],
                # The Cluster Autoscaler owns the size of an autoscaled pool.
                ignore_changes=["nodeConfigDetails.size"] if pool.autoscaled else None,
            ),
        )
        self.id = node_pool.id
        self.register_outputs({"id": self.id})
