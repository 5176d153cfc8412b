"""GKE: a private cluster for ephemeral stacks, and MIG GPU node pools (native or operator)."""

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_gcp as gcp

from mig_inference.clouds import Cloud, cloud_taint_effect
from mig_inference.clouds.addons import Feature
from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.kubernetes_versions import GKE_DEFAULT_CHANNEL
from mig_inference.clouds.system_pool import SYSTEM_POOLS
from mig_inference.plan.pools.zones import gke_region
from mig_inference.spec import MigManager, SharingStrategy
from mig_inference.spec.cluster import gke_master_cidr

from ..clouds.kubeconfig import gke_kubeconfig
from ..planning import planned, planned_pool
from ..stack_args import Stack

SYSTEM_MACHINE = SYSTEM_POOLS[Cloud.GKE].machine
GKE_MANAGED_DRIVER = "LATEST"
DRIVER_LEFT_TO_OPERATOR = "INSTALLATION_DISABLED"
GKE_RELEASE_CHANNEL = GKE_DEFAULT_CHANNEL
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
NAT_MIN_PORTS = 1024
NAT_MAX_PORTS = 65536
"""Cloud NAT ports per VM ("Ports and addresses": 64 by default; with dynamic port allocation a
power of two from 32 to 65,536, endpoint-independent mapping off). The minimum is a choice for
nodes with many pods downloading at once, not a documented figure."""
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
"""GKE's key of a specific reservation (GKE "Consuming reserved zonal resources")."""
GKE_METADATA = "GKE_METADATA"
"""Pods reach the GKE metadata server (Workload Identity), not the node's."""
GKE_SHARING = {SharingStrategy.TIME_SLICING: "TIME_SHARING", SharingStrategy.MPS: "MPS"}
"""GKE's names for the sharing strategies (`gpu_sharing_config.gpu_sharing_strategy`)."""


class GkeClusterArgs(TypedDict):
    name: pulumi.Input[str]
    """Cluster name."""
    location: str
    """Region or zone."""
    network: pulumi.Input[str]
    """VPC network (name or self link)."""
    subnetwork: pulumi.Input[str]
    """Subnetwork for nodes; pod and service ranges are allocated automatically (VPC-native)."""
    master_ipv4_cidr_block: NotRequired[str]
    """Control plane range of the private cluster (a /28; default: one of 172.16.0.0/16 chosen
    by the cluster's name, so two clusters in one VPC do not collide)."""
    authorized_networks: list[str]
    """CIDR blocks allowed to reach the public control-plane endpoint (master authorized
    networks); nothing else reaches it."""
    release_channel: NotRequired[str]
    """GKE release channel (REGULAR)."""
    min_master_version: NotRequired[str]
    """The minor the control plane (and the node pools, which take its version) starts at, e.g.
    `1.35` (the latest patch of it the channel offers): the DRA objects' version. GKE refuses a
    minor its channel does not offer; later upgrades follow the channel."""
    protect: NotRequired[bool]
    """Protect the cluster from deletion (Pulumi `protect` and GKE deletion protection; true)."""
    cloud_nat: NotRequired[bool]
    """Create a Cloud Router and NAT for the subnetwork (true): private nodes have no external
    address and could not pull images from registries outside Google (vLLM's, NVIDIA's)."""
    project: NotRequired[pulumi.Input[str]]
    """Project of the subnetwork (the provider's when not given)."""
    labels: NotRequired[dict[str, str]]
    """Google Cloud labels on the cluster and its system nodes (beside the provider's)."""
    network_policy: NotRequired[bool]
    """Enforce NetworkPolicies with GKE Dataplane V2 (false; fixed when the cluster is
    created)."""
    gcs_fuse_csi_driver: NotRequired[bool]
    """Enable the Cloud Storage FUSE CSI driver add-on (false)."""
    pd_csi_driver: NotRequired[bool]
    """Keep the Compute Engine Persistent Disk CSI driver add-on on (GKE's default; false
    leaves the setting to GKE)."""

    gateway_api: NotRequired[bool]
    """Enable GKE's Gateway API (standard channel), for the stack's inference gateway
    (false)."""
    services: NotRequired[list[str]]
    """Google APIs to enable in the project (the gateway's Network Services API, ...); left
    enabled when the stack is destroyed, as other stacks of the project may use them."""


ADVANCED_DATAPATH = "ADVANCED_DATAPATH"
"""GKE Dataplane V2, which enforces NetworkPolicy itself (clouds.addons has the source)."""


def _addons_config(args: GkeClusterArgs) -> gcp.container.ClusterAddonsConfigArgs | None:
    """The add-ons the stack's features need (clouds.addons), or None for GKE's defaults."""
    fuse = args.get("gcs_fuse_csi_driver", False)
    disk = args.get("pd_csi_driver", False)
    if not (fuse or disk):
        return None
    return gcp.container.ClusterAddonsConfigArgs(
        gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
            enabled=True
        )
        if fuse
        else None,
        gce_persistent_disk_csi_driver_config=gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs(
            enabled=True
        )
        if disk
        else None,
    )


def _field(value: Any, name: str) -> Any:
    """A field of a lookup's result, whether the SDK gave its output class or a mapping."""
    if isinstance(value, Mapping):
        camel = name.split("_")[0] + "".join(part.title() for part in name.split("_")[1:])
        return value.get(name, value.get(camel))
    return getattr(value, name, None)


def _first(values: Any) -> Any:
    return values[0] if values else None


def _enabled(config: Any) -> bool:
    return bool(config is not None and _field(config, "enabled"))


def lacking_addons(
    addons_configs: Any, datapath_provider: str | None, network_policies: Any
) -> dict[Feature, str]:
    """What a joined cluster, as `gcp.container.get_cluster` shows it, lacks of the add-ons the
    stack's features may need (clouds.addons)."""
    addons = _first(addons_configs)
    lacking: dict[Feature, str] = {}
    if not _enabled(_first(_field(addons, "gce_persistent_disk_csi_driver_configs"))):
        lacking[Feature.HYPERDISK_ML] = (
            "has the Compute Engine Persistent Disk CSI driver off "
            "(addonsConfig.gcePersistentDiskCsiDriverConfig)"
        )
    if not _enabled(_first(_field(addons, "gcs_fuse_csi_driver_configs"))):
        lacking[Feature.GCS_FUSE] = (
            "has the Cloud Storage FUSE CSI driver off (addonsConfig.gcsFuseCsiDriverConfig)"
        )
    if datapath_provider != ADVANCED_DATAPATH and not _enabled(_first(network_policies)):
        lacking[Feature.NETWORK_POLICY] = (
            "enforces no NetworkPolicy (neither Dataplane V2 nor the network policy add-on)"
        )
    return lacking


def _workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


class GkeCluster(pulumi.ComponentResource):
    """A minimal private, VPC-native GKE cluster with Workload Identity, a small CPU system
    pool, and Cloud NAT so its private nodes reach the registries their images come from. The
    API endpoint stays public for the authorized networks only, so `pulumi up` from a listed
    network reaches it."""

    kubeconfig: pulumi.Output[str]
    """Kubeconfig reaching the cluster's public endpoint through gke-gcloud-auth-plugin (a
    secret)."""
    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    cluster_outputs: pulumi.Output[dict[str, Any]]
    """What the rest of a team's program wires to: `name`, `location`, `endpoint`,
    `certificateAuthority` (base64), `workloadIdentityPool`."""

    def __init__(
        self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:GkeCluster", name, None, opts)
        protect_cluster = args.get("protect", True)
        labels = args.get("labels") or None
        protect = pulumi.ResourceOptions(parent=self, protect=protect_cluster)
        project: pulumi.Output[str] = pulumi.Output.from_input(
            args.get("project")
            or gcp.organizations.get_client_config_output(
                opts=pulumi.InvokeOutputOptions(parent=self)
            ).project
        )
        cluster = gcp.container.Cluster(
            name,
            name=args["name"],
            location=args["location"],
            network=args["network"],
            subnetwork=args["subnetwork"],
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=False,
                master_ipv4_cidr_block=args.get("master_ipv4_cidr_block")
                or pulumi.Output.from_input(args["name"]).apply(gke_master_cidr),
            ),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=block, display_name=f"mig-inference {index}"
                    )
                    for index, block in enumerate(args["authorized_networks"])
                ],
            ),
            # Workload Identity: pods get Google credentials only through their Kubernetes
            # service account, never the node's.
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=project.apply(_workload_pool)
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(
                channel=args.get("release_channel", GKE_RELEASE_CHANNEL)
            ),
            min_master_version=args.get("min_master_version"),
            addons_config=_addons_config(args),
            datapath_provider=ADVANCED_DATAPATH if args.get("network_policy", False) else None,
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=protect_cluster,
            resource_labels=labels,
            gateway_api_config=gcp.container.ClusterGatewayApiConfigArgs(channel="CHANNEL_STANDARD")
            if args.get("gateway_api")
            else None,
            opts=protect,
        )
        gcp.container.NodePool(
            f"{name}-system",
            cluster=cluster.id,
            location=args["location"],
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=1, total_max_node_count=3
            ),
            initial_node_count=1,
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=SYSTEM_MACHINE,
                resource_labels=labels,
                image_type="COS_CONTAINERD",
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode=GKE_METADATA
                ),
            ),
            opts=protect,
        )
        for api in args.get("services") or []:
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=project,
                service=api,
                disable_on_destroy=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
        if args.get("cloud_nat", True):
            self._cloud_nat(name, args, protect)
        self.cluster_name = cluster.name
        self.kubeconfig = pulumi.Output.secret(
            gke_kubeconfig(
                cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate
            )
        )
        self.cluster_outputs = pulumi.Output.all(
            name=cluster.name,
            location=cluster.location,
            endpoint=cluster.endpoint,
            certificateAuthority=cluster.master_auth.cluster_ca_certificate,
            workloadIdentityPool=cluster.workload_identity_config.apply(
                lambda config: config.workload_pool if config else None
            ),
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "cluster_outputs": self.cluster_outputs,
            }
        )

    def _cloud_nat(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions) -> None:
        region = gke_region(args["location"])
        # A name, or a self link (the form another resource's Output usually takes).
        given = pulumi.Output.from_input(args["subnetwork"])
        subnetwork = gcp.compute.get_subnetwork_output(
            name=given.apply(lambda value: None if "/" in (value or "/") else value),
            self_link=given.apply(lambda value: value if "/" in (value or "") else None),
            region=region,
            project=args.get("project"),
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        router = gcp.compute.Router(
            f"{name}-router", network=args["network"], region=region, opts=opts
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            router=router.name,
            region=region,
            nat_ip_allocate_option="AUTO_ONLY",
            # Cloud NAT's default keeps 64 source ports per VM, shared by every pod of the node
            # (up to 256 on GPU pools) pulling images and weights at once; dynamic allocation
            # starts each VM at NAT_MIN_PORTS and grows it to NAT_MAX_PORTS under load.
            enable_dynamic_port_allocation=True,
            enable_endpoint_independent_mapping=False,
            min_ports_per_vm=NAT_MIN_PORTS,
            max_ports_per_vm=NAT_MAX_PORTS,
            # Only the cluster's subnetwork (nodes and pods), so a NAT the network already has
            # for other subnetworks is left alone.
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(
                    name=subnetwork.self_link, source_ip_ranges_to_nats=["ALL_IP_RANGES"]
                )
            ],
            opts=opts,
        )


def _reservation_affinity(
    capacity: Capacity, reservation: str | None
) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs | None:
    """A named reservation's nodes; flex-start consumes none (GKE requires it so)."""
    if capacity is Capacity.RESERVATION:
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key=RESERVATION_KEY,
            values=[reservation] if reservation else None,
        )
    if capacity is Capacity.FLEX_START:
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="NO_RESERVATION"
        )
    return None


NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
"""What GPU nodes need: GKE's minimum for a node service account (GKE "Configure node service
accounts": Kubernetes Engine Default Node Service Account, for logging, monitoring and node
operations) and pulling images from Artifact Registry. The nodes keep the cloud-platform scope;
IAM does the limiting, as Google recommends."""


class GkeNodeServiceAccountArgs(TypedDict):
    account_id: str
    """The service account's ID (6-30 characters)."""
    project: pulumi.Input[str]
    """The project the account and its role bindings live in."""


class GkeNodeServiceAccount(pulumi.ComponentResource):
    """A service account for GPU nodes with only the roles nodes need."""

    email: pulumi.Output[str]
    """The account's email, for the node pools' `service_account`."""

    def __init__(
        self,
        name: str,
        args: GkeNodeServiceAccountArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mig-inference:index:GkeNodeServiceAccount", name, None, opts)
        account = gcp.serviceaccount.Account(
            name,
            account_id=args["account_id"],
            display_name="mig-inference GPU nodes",
            project=args["project"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        # A user-managed account's email is `<id>@<project>.iam.gserviceaccount.com` (IAM
        # "Service accounts"): known from the inputs, so a preview shows it.
        email = pulumi.Output.concat(
            account.account_id, "@", args["project"], ".iam.gserviceaccount.com"
        )
        member = pulumi.Output.concat("serviceAccount:", email)
        grants = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('.', 1)[-1]}",
                project=args["project"],
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in NODE_ROLES
        ]
        # The pools use the email only once its roles are granted.
        self.email = pulumi.Output.all(email, *[g.id for g in grants]).apply(
            lambda found: str(found[0])
        )
        self.register_outputs({"email": self.email})


class GkeGpuPoolArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner decides its layout, node labels, taints, max
    pods and generation from it."""
    pool: str
    """Name of the pool in `stack.pools`."""
    cluster: pulumi.Input[str]
    """Cluster name or ID the pool joins."""
    node_service_account: NotRequired[pulumi.Input[str] | None]
    """The nodes' service account email (default: the Compute Engine default account)."""


class GkeGpuPool(pulumi.ComponentResource):
    """A GKE node pool of MIG GPUs.

    `migManager: gke` sets `gpu_partition_size` and lets GKE install the driver;
    `migManager: operator` disables GKE's driver and device plugin and labels the nodes
    `nvidia.com/mig.config` for the GPU Operator's MIG manager."""

    pool_name: pulumi.Output[str]
    """The GKE node pool's name: `<pool>-<generation>`."""
    pool_id: pulumi.Output[str]
    """The node pool's ID (`projects/<project>/locations/<location>/clusters/<cluster>/
    nodePools/<name>`)."""
    service_account: pulumi.Output[str]
    """The nodes' service account email (empty: the Compute Engine default account)."""

    def __init__(
        self, name: str, args: GkeGpuPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:GkeGpuPool", name, None, opts)
        pool = planned_pool(args["stack"], args["pool"])
        cluster = planned(args["stack"]).spec.cluster
        assert pool.machine is not None and pool.accelerator is not None
        native = pool.mig_manager is MigManager.GKE
        sharing = pool.spec.sharing
        accelerator = gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=pool.accelerator,
            count=pool.gpus_per_node,
            gpu_partition_size=pool.partition_size if native else None,
            gpu_sharing_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
                gpu_sharing_strategy=GKE_SHARING[sharing.strategy],
                max_shared_clients_per_gpu=sharing.replicas,
            )
            if native and sharing is not None
            else None,
            gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version=GKE_MANAGED_DRIVER if native else DRIVER_LEFT_TO_OPERATOR
            ),
        )
        capacity = pool.spec.capacity
        flex_start = capacity is Capacity.FLEX_START
        node_pool = gcp.container.NodePool(
            name,
            # The generation in the name: a change that needs new nodes creates the new pool
            # first (its nodes, then services, move over) and deletes the old one last.
            name=pool.physical_name,
            cluster=args["cluster"],
            location=cluster.get("location"),
            node_locations=sorted(pool.zones),  # a set to GKE: the order is no change
            # GKE counts per zone; the plan converted the stack file's totals.
            node_count=None if pool.autoscaled else pool.nodes_per_zone,
            initial_node_count=pool.nodes_per_zone if pool.autoscaled else None,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=pool.min_nodes,
                total_max_node_count=pool.max_nodes,
                # Flex-start: the autoscaler takes capacity in whichever zone has it.
                location_policy="ANY" if flex_start else None,
            )
            if pool.autoscaled
            else None,
            # GKE ignores PodDisruptionBudgets when it deletes a pool unless told otherwise.
            node_drain_configs=[
                gcp.container.NodePoolNodeDrainConfigArgs(
                    respect_pdb_during_node_pool_deletion=True
                )
            ],
            max_pods_per_node=pool.max_pods,
            # Flex-start nodes are not repaired (GKE's flex-start pools turn auto-repair off).
            management=gcp.container.NodePoolManagementArgs(
                auto_repair=not flex_start, auto_upgrade=True
            ),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=pool.machine.name,
                image_type="COS_CONTAINERD",
                disk_size_gb=pool.spec.disk_size_gb,
                # The boot disk type the machine boots from (A3 Ultra and A4: Hyperdisk only).
                disk_type=pool.boot_disk,
                spot=capacity is Capacity.SPOT,
                flex_start=True if flex_start else None,
                reservation_affinity=_reservation_affinity(capacity, pool.spec.reservation),
                # Workload Identity on the clusters this stack creates (enabled there).
                # Workload Identity: pods get Google credentials only through their Kubernetes
                # service account, never the node's (the cluster must have it enabled).
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode=GKE_METADATA
                )
                if cluster.get("workloadIdentity", True)
                else None,
                service_account=args.get("node_service_account"),
                labels=dict(pool.node_labels),
                resource_labels=planned(args["stack"]).spec.cloud_tags.of_gpu_pool(cluster.protect),
                taints=[
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=key, value=value, effect=cloud_taint_effect(effect)
                    )
                    for key, value, effect in pool.cloud_taints
                ],
                guest_accelerators=[accelerator],
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=cluster.protect,
                # The name is set (it carries the generation), and a bridged provider replaces a
                # resource whose name the program sets delete-before-replace unless told otherwise:
                # the new generation must exist before the old one goes.
                delete_before_replace=False,
                # initial_node_count forces a new pool when it changes; the autoscaler owns the
                # size of an autoscaled one. Neither may replace or resize a running pool.
                ignore_changes=["initialNodeCount", *(["nodeCount"] if pool.autoscaled else [])],
            ),
        )
        self.pool_name = node_pool.name
        self.pool_id = node_pool.id
        self.service_account = pulumi.Output.from_input(args.get("node_service_account") or "")
        self.register_outputs(
            {
                "pool_name": self.pool_name,
                "pool_id": self.pool_id,
                "service_account": self.service_account,
            }
        )
