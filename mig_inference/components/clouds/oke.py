"""OKE: a cluster for ephemeral stacks, and MIG GPU node pools with VCN-native pod networking."""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_oci as oci
from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.bootstrap import oke_user_data
from mig_inference.clouds.system_pool import OKE_SYSTEM_OCPUS, SYSTEM_POOLS

from ..clouds.kubeconfig import oke_endpoint_type, oke_kubeconfig
from ..planning import planned, planned_pool
from ..stack_args import Stack, cluster_input, nth

VCN_NATIVE_CNI = "OCI_VCN_IP_NATIVE"
EVICTION_GRACE = "PT60M"
"""The longest drain OKE allows before it terminates a node."""
SYSTEM_SHAPE = SYSTEM_POOLS[Cloud.OKE].machine


class OciTags(Struct, frozen=True):
    """Freeform and defined tags of an OCI resource (None: the resource gets none here)."""

    freeform: dict[str, str] | None
    defined: dict[str, str] | None


class OkeClusterArgs(TypedDict):
    name: str
    """Cluster name."""
    compartment_id: pulumi.Input[str]
    """Compartment OCID."""
    vcn_id: pulumi.Input[str]
    """VCN OCID."""
    endpoint_subnet_id: pulumi.Input[str]
    """Subnet of the Kubernetes API endpoint."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version, e.g. v1.33.1."""
    node_subnet_id: pulumi.Input[str]
    """Subnet of the system pool's nodes."""
    pod_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Subnets pods get VCN-native addresses from."""
    availability_domain: pulumi.Input[str]
    """Availability domain of the system pool."""
    system_image_id: pulumi.Input[str]
    """Node image OCID of the system pool (an Oracle Linux OKE image)."""
    endpoint_public_access: NotRequired[bool]
    """Give the API endpoint a public IP (true; its subnet must be public), so `pulumi up` from
    outside the VCN reaches the API; private otherwise (then run from a peered network)."""
    protect: NotRequired[bool]
    """Protect the cluster from accidental deletion (true)."""
    freeform_tags: NotRequired[dict[str, str]]
    """OCI freeform tags on the cluster, its system pool and that pool's nodes."""
    defined_tags: NotRequired[dict[str, str]]
    """OCI defined tags (`<namespace>.<key>`) on the same."""


class OkeCluster(pulumi.ComponentResource):
    """A minimal enhanced OKE cluster with VCN-native pod networking and a small CPU system
    pool; its kubeconfig targets the endpoint the stack chose."""

    cluster_id: pulumi.Output[str]
    """The cluster's OCID."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig reaching the chosen endpoint through `oci ce cluster generate-token` (a
    secret)."""
    cluster_outputs: pulumi.Output[dict[str, Any]]
    """What the rest of a team's program wires to: `name`, `id` (the OCID), `endpoint` (the one
    the kubeconfig targets), `kubernetesVersion`."""

    def __init__(
        self, name: str, args: OkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:OkeCluster", name, None, opts)
        protect = args.get("protect", True)
        public = args.get("endpoint_public_access", True)
        tagged = OciTags(args.get("freeform_tags") or None, args.get("defined_tags") or None)
        cluster = oci.containerengine.Cluster(
            name,
            name=args["name"],
            compartment_id=args["compartment_id"],
            vcn_id=args["vcn_id"],
            kubernetes_version=args["kubernetes_version"],
            type="ENHANCED_CLUSTER",
            cluster_pod_network_options=[
                oci.containerengine.ClusterClusterPodNetworkOptionArgs(cni_type=VCN_NATIVE_CNI)
            ],
            endpoint_config=oci.containerengine.ClusterEndpointConfigArgs(
                subnet_id=args["endpoint_subnet_id"],
                is_public_ip_enabled=public,
            ),
            freeform_tags=tagged.freeform,
            defined_tags=tagged.defined,
            opts=pulumi.ResourceOptions(parent=self, protect=protect),
        )
        oci.containerengine.NodePool(
            f"{name}-system",
            name=f"{args['name']}-system",
            cluster_id=cluster.id,
            compartment_id=args["compartment_id"],
            kubernetes_version=args["kubernetes_version"],
            node_shape=SYSTEM_SHAPE,
            node_shape_config=oci.containerengine.NodePoolNodeShapeConfigArgs(
                ocpus=OKE_SYSTEM_OCPUS, memory_in_gbs=SYSTEM_POOLS[Cloud.OKE].memory_gib
            ),
            node_source_details=oci.containerengine.NodePoolNodeSourceDetailsArgs(
                image_id=args["system_image_id"], source_type="IMAGE"
            ),
            freeform_tags=tagged.freeform,
            defined_tags=tagged.defined,
            node_config_details=oci.containerengine.NodePoolNodeConfigDetailsArgs(
                size=2,
                freeform_tags=tagged.freeform,
                defined_tags=tagged.defined,
                placement_configs=[
                    oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigArgs(
                        availability_domain=args["availability_domain"],
                        subnet_id=args["node_subnet_id"],
                    )
                ],
                node_pool_pod_network_option_details=oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                    cni_type=VCN_NATIVE_CNI, pod_subnet_ids=args["pod_subnet_ids"]
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=protect),
        )
        self.cluster_id = cluster.id
        self.kubeconfig = pulumi.Output.secret(
            oke_kubeconfig(
                cluster.id, oke_endpoint_type(public), pulumi.InvokeOutputOptions(parent=self)
            )
        )
        self.cluster_outputs = pulumi.Output.all(
            name=cluster.name,
            id=cluster.id,
            endpoint=cluster.endpoints.apply(
                lambda found: (
                    (found[0].public_endpoint if public else found[0].private_endpoint)
                    if found
                    else None
                )
            ),
            kubernetesVersion=cluster.kubernetes_version,
        )
        self.register_outputs(
            {
                "cluster_id": self.cluster_id,
                "kubeconfig": self.kubeconfig,
                "cluster_outputs": self.cluster_outputs,
            }
        )


class OkeGpuPoolArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner decides its layout, node labels, taints, max
    pods and generation from it (compartment, subnets and availability domains are the stack's
    cluster keys)."""
    pool: str
    """Name of the pool in `stack.pools`."""
    cluster_id: pulumi.Input[str]
    """OKE cluster OCID."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version of the nodes (the cluster's, looked up, unless the stack names one)."""


class OkeGpuPool(pulumi.ComponentResource):
    """An OKE node pool of MIG GPUs: labels through `initial_node_labels`, taints through
    cloud-init (OKE node pools have no taint field), VCN-native pods with `max_pods_per_node`."""

    pool_name: pulumi.Output[str]
    """The OKE node pool's name: `<pool>-<generation>`."""
    node_pool_id: pulumi.Output[str]
    """The OKE node pool's OCID."""

    def __init__(
        self, name: str, args: OkeGpuPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:OkeGpuPool", name, None, opts)
        pool = planned_pool(args["stack"], args["pool"])
        cluster = planned(args["stack"]).spec.cluster
        subnet_ids = cluster_input(args["stack"], "subnet_ids", list(cluster.get("subnetIds")))
        assert pool.machine is not None and pool.spec.image_id is not None
        cloud_tags = planned(args["stack"]).spec.cloud_tags
        tagged = OciTags(cloud_tags.given(), cloud_tags.oci_defined())
        domains = list(pool.spec.zones) or list(cluster.get("availabilityDomains"))
        placements = [
            oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigArgs(
                availability_domain=domain,
                subnet_id=nth(subnet_ids, index),
                # A capacity reservation is per availability domain; the pool names its domain.
                capacity_reservation_id=pool.spec.reservation,
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
            cluster_id=args["cluster_id"],
            compartment_id=cluster_input(
                args["stack"], "compartment_id", cluster.get("compartmentId")
            ),
            kubernetes_version=args["kubernetes_version"],
            node_shape=pool.machine.name,
            node_source_details=oci.containerengine.NodePoolNodeSourceDetailsArgs(
                image_id=pool.spec.image_id,
                source_type="IMAGE",
                boot_volume_size_in_gbs=str(pool.spec.disk_size_gb),
            ),
            freeform_tags=cloud_tags.of_gpu_pool(cluster.protect),
            defined_tags=tagged.defined,
            node_config_details=oci.containerengine.NodePoolNodeConfigDetailsArgs(
                freeform_tags=tagged.freeform,
                defined_tags=tagged.defined,
                # OKE pools do not autoscale by themselves: the Cluster Autoscaler add-on grows
                # a {min, max} pool; it starts at min.
                size=pool.min_nodes,
                placement_configs=placements,
                node_pool_pod_network_option_details=oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                    cni_type=VCN_NATIVE_CNI,
                    max_pods_per_node=pool.max_pods,
                    pod_subnet_ids=cluster_input(args["stack"], "pod_subnet_ids", None)
                    or subnet_ids,
                ),
            ),
            initial_node_labels=[
                oci.containerengine.NodePoolInitialNodeLabelArgs(key=key, value=value)
                for key, value in pool.node_labels.items()
            ],
            node_metadata={"user_data": oke_user_data(pool.cloud_taints, pool.boot_mig_gpus)},
            # OKE cordons and drains (honouring PodDisruptionBudgets) for up to an hour before
            # it terminates a node of a deleted or shrunk pool, then deletes it regardless.
            node_eviction_node_pool_settings=oci.containerengine.NodePoolNodeEvictionNodePoolSettingsArgs(
                eviction_grace_duration=EVICTION_GRACE,
                is_force_delete_after_grace_duration=True,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=cluster.protect,
                # The name is set (it carries the generation), and a bridged provider replaces a
                # resource whose name the program sets delete-before-replace unless told otherwise:
                # the new generation must exist before the old one goes.
                delete_before_replace=False,
                replace_on_changes=["name"],
                # The Cluster Autoscaler owns the size of an autoscaled pool.
                ignore_changes=["nodeConfigDetails.size"] if pool.autoscaled else None,
            ),
        )
        self.node_pool_id = node_pool.id
        self.pool_name = node_pool.name
        self.register_outputs({"node_pool_id": self.node_pool_id, "pool_name": self.pool_name})
