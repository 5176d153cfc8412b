"""EKS: a cluster for ephemeral stacks, and MIG GPU managed node groups on the AL2023 NVIDIA AMI."""

import json
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from mig_inference.clouds import Cloud, cloud_taint_effect
from mig_inference.clouds.addons import (
    FSX_CSI_ACCOUNT,
    FSX_CSI_ADDON,
    POD_IDENTITY_AGENT,
    S3_CSI_ACCOUNT,
    S3_CSI_ADDON,
    VPC_CNI,
)
from mig_inference.clouds.bootstrap import eks_user_data
from mig_inference.clouds.capacity import AWS_BLOCKS_USING, EKS_BLOCKS, RESERVED, Capacity
from mig_inference.clouds.system_pool import SYSTEM_POOLS
from mig_inference.names.digest import short_hash
from mig_inference.plan import PoolPlan
from mig_inference.plan.pools.autoscaling import node_template_tags
from mig_inference.spec import key_path

from ..clouds.kubeconfig import eks_kubeconfig
from ..planning import planned, planned_pool
from ..stack_args import Stack, cluster_input

GPU_AMI = "AL2023_x86_64_NVIDIA"
SYSTEM_AMI = "AL2023_x86_64_STANDARD"
SYSTEM_INSTANCE = SYSTEM_POOLS[Cloud.EKS].machine
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
"""The managed policies EKS worker nodes need, and no more."""
CLUSTER_POLICIES = ("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",)
CAPACITY_TYPES = {
    Capacity.ON_DEMAND: "ON_DEMAND",
    Capacity.SPOT: "SPOT",
    Capacity.RESERVATION: "ON_DEMAND",
    Capacity.CAPACITY_BLOCK: "CAPACITY_BLOCK",
}
"""The node group's capacity type per choice: an On-Demand Capacity Reservation is consumed by
on-demand instances the launch template targets at it (EKS "Capacity Blocks for ML with managed
node groups"; EC2 "On-Demand Capacity Reservations")."""
CAPACITY_BLOCK_MARKET = "capacity-block"
DEFAULT_HOP_LIMIT = 1
"""IMDSv2 answers only the node itself, not its pods (formats.IMDS_HOP_LIMIT has the source)."""
DRA_NOT_ON_AUTO_MODE = (
    'AWS: "DRA is not currently supported with EKS Auto Mode" (EKS User Guide, Manage hardware '
    "devices on Amazon EKS)"
)


def without_auto_mode(cluster_name: str, auto_mode: bool, dra_allocations: Sequence[str]) -> str:
    """The name of a joined cluster whose DRA pools can work: one without EKS Auto Mode.

    `dra_allocations` are the key paths of the pools that ask for DRA, named in the refusal."""
    if not auto_mode:
        return cluster_name
    raise pulumi.RunError(
        f"{', '.join(dra_allocations)}: cluster {cluster_name} runs EKS Auto Mode, which has no "
        f"DRA ({DRA_NOT_ON_AUTO_MODE}); give these pools allocation: device-plugin (the default), "
        "or join a cluster without Auto Mode"
    )


def auto_mode_enabled(compute_configs: Sequence[object] | None) -> bool:
    """Whether a cluster's `computeConfig`, as `aws.eks.get_cluster_output` resolves it (a
    mapping per entry, or the SDK's result class), turns EKS Auto Mode on."""
    for config in compute_configs or ():
        if isinstance(config, Mapping):
            enabled = config.get("enabled")
        else:
            enabled = getattr(config, "enabled", False)
        if enabled:
            return True
    return False


def block_subnets(
    pool_path: str,
    reservation: str,
    machine: str,
    max_nodes: int,
    block: Mapping[str, Any],
    in_zone: Sequence[str],
) -> list[str]:
    """The subnets of a Capacity Block pool's node group: those of `cluster.subnetIds` in the
    block's Availability Zone (`in_zone`), once the block (as EC2 describes it) is known to
    hold the pool's instance type and nodes; otherwise why not, at the key to change. (EC2
    always reports a block's type and size; an answer without them, from mocks, skips those.)"""
    zone = block.get("availability_zone")
    held = block.get("instance_type")
    if held and held != machine:
        raise pulumi.RunError(
            f"{pool_path}.reservation: Capacity Block {reservation} holds {held} instances, not "
            f"{machine}: the launch template's instance type must be the block's ({EKS_BLOCKS})"
        )
    count = int(block.get("instance_count") or 0)
    if count and max_nodes > count:
        raise pulumi.RunError(
            f"{pool_path}.nodes: Capacity Block {reservation} holds {count} instance(s), and the "
            f"pool asks for up to {max_nodes}: the others would never launch ({AWS_BLOCKS_USING})"
        )
    if not in_zone:
        raise pulumi.RunError(
            f"{pool_path}.reservation: Capacity Block {reservation} is in {zone}, and no subnet "
            f"of {key_path('cluster')}.subnetIds is: a block's instances launch only in its "
            f"Availability Zone ({AWS_BLOCKS_USING}); add a subnet of {zone}"
        )
    return sorted(in_zone)


TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")
"""What a launch template's tag specifications tag when an instance starts (EC2
`LaunchTemplateTagSpecificationRequest`)."""


def _autoscaling_group_names(
    resources: Sequence[aws.eks.outputs.NodeGroupResource] | None,
) -> list[str]:
    return [
        str(group.name)
        for resource in resources or []
        for group in resource.autoscaling_groups or []
        if group.name
    ]


def _autoscaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    [group] = resources[0].autoscaling_groups or []
    return str(group.name)


def _assume_role(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )


def pod_identity_trust() -> str:
    """The trust policy of a role EKS Pod Identity hands to a service account (EKS User Guide,
    "Create a Pod Identity association")."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )


MOUNTPOINT_READ = ["s3:GetObject"]
MOUNTPOINT_WRITE = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"]
"""What Mountpoint for Amazon S3 needs on a bucket's objects to read, and to read and write
(awslabs/mountpoint-s3 `doc/CONFIGURATION.md`, "IAM permissions"); both list the bucket."""
FSX_CSI_POLICY = "arn:aws:iam::aws:policy/AmazonFSxFullAccess"
"""The managed policy the EKS User Guide attaches to the FSx CSI driver's role."""


def network_policy_enabled(configuration_values: str | None) -> bool:
    """Whether a VPC CNI add-on's configuration values, as `aws.eks.get_addon` returns them (a
    JSON document), turn NetworkPolicy enforcement on."""
    try:
        values = json.loads(configuration_values or "{}")
    except ValueError:
        return False
    return isinstance(values, dict) and str(values.get("enableNetworkPolicy")).lower() == "true"


def bucket_policy(bucket: str, object_actions: Sequence[str]) -> str:
    """List the bucket and act on its objects, nothing else."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"],
                 "Resource": [f"arn:aws:s3:::{bucket}"]},
                {"Effect": "Allow", "Action": list(object_actions),
                 "Resource": [f"arn:aws:s3:::{bucket}/*"]},
            ],
        }
    )  # fmt: skip


def _role(
    name: str,
    service: str,
    policies: Sequence[str],
    parent: pulumi.Resource,
    tags: Mapping[str, str] | None,
    boundary: pulumi.Input[str] | None = None,
    trust: str | None = None,
) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """An IAM role for `service` (or of the assume-role policy `trust`) with `policies`, and the
    attachments: the cluster, node groups and add-ons using it depend on them, so EKS has its
    permissions from the first API call until the last one of a destroy (as the provider's
    documentation requires)."""
    role = aws.iam.Role(
        name,
        assume_role_policy=trust or _assume_role(service),
        description=f"mig-inference {name}",
        permissions_boundary=boundary,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{name}-{arn.rsplit('/', 1)[-1]}",
            role=role.name,
            policy_arn=arn,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for arn in policies
    ]
    return role, attachments


class EksClusterArgs(TypedDict):
    name: pulumi.Input[str]
    """Cluster name."""
    region: str
    """AWS region (the kubeconfig's `aws eks get-token` names it)."""
    version: pulumi.Input[str]
    """Kubernetes version, e.g. 1.33."""
    subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Subnets for the control plane ENIs and the system node group (private subnets)."""
    endpoint_public_access: NotRequired[bool]
    """Answer on the public endpoint too (true), so `pulumi up` from outside the VPC reaches the
    API (nodes use the private endpoint either way)."""
    public_access_cidrs: NotRequired[list[str]]
    """Networks allowed on the public endpoint (EKS's default: everywhere)."""
    protect: NotRequired[bool]
    """Protect the cluster from accidental deletion (true)."""
    tags: NotRequired[dict[str, str]]
    """Tags on every AWS resource of the cluster (beside the provider's default tags)."""
    permissions_boundary: NotRequired[pulumi.Input[str] | None]
    """The permissions boundary of the IAM roles it creates."""
    network_policy: NotRequired[bool]
    """Enforce NetworkPolicies: the VPC CNI add-on with `enableNetworkPolicy` (false)."""
    pod_identity_agent: NotRequired[bool]
    """Install the EKS Pod Identity agent add-on (false)."""
    s3_csi_bucket: NotRequired[str | None]
    """Install the Mountpoint for Amazon S3 CSI driver add-on, its role allowed to read and
    write this bucket (None: no driver)."""
    fsx_csi_driver: NotRequired[bool]
    """Install the FSx for Lustre CSI driver add-on with its role (false)."""
    pod_identity_agent_formerly: NotRequired[pulumi.Input[str]]
    """The URN the Pod Identity agent add-on had when another component installed it: an
    alias, so it is kept, not installed twice."""


class EksCluster(pulumi.ComponentResource):
    """A minimal private EKS cluster with its IAM role, a small CPU system node group and the
    add-ons the stack needs (clouds.addons): NetworkPolicy enforcement by the VPC CNI, the Pod
    Identity agent, and the CSI drivers of the model cache with their roles."""

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig reaching the cluster through `aws eks get-token` (a secret)."""
    cluster_outputs: pulumi.Output[dict[str, Any]]
    """What the rest of a team's program wires to: `name`, `arn`, `endpoint`,
    `certificateAuthority` (base64), `oidcIssuer` (for IRSA), `clusterSecurityGroupId` (the
    security group EKS made, which managed nodes without their own carry), `vpcId`."""

    def __init__(
        self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:EksCluster", name, None, opts)
        protect = args.get("protect", True)
        tags = args.get("tags") or None
        boundary = args.get("permissions_boundary")
        role, role_policies = _role(
            f"{name}-cluster", "eks.amazonaws.com", CLUSTER_POLICIES, self, tags, boundary
        )
        cluster = aws.eks.Cluster(
            name,
            name=args["name"],
            version=args["version"],
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=args["subnet_ids"],
                endpoint_private_access=True,
                endpoint_public_access=args.get("endpoint_public_access", True),
                public_access_cidrs=args.get("public_access_cidrs") or None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=True
            ),
            deletion_protection=protect,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, protect=protect, depends_on=role_policies),
        )
        node_role, node_policies = _role(
            f"{name}-system-node", "ec2.amazonaws.com", NODE_POLICIES, self, tags, boundary
        )
        system = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=cluster.name,
            node_role_arn=node_role.arn,
            subnet_ids=args["subnet_ids"],
            ami_type=SYSTEM_AMI,
            instance_types=[SYSTEM_INSTANCE],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=2, min_size=1, max_size=3
            ),
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=protect,
                depends_on=node_policies,
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        self._addons(name, args, cluster, [system], tags, boundary)
        self.cluster_name = cluster.name
        self.kubeconfig = pulumi.Output.secret(
            eks_kubeconfig(
                cluster.name, cluster.endpoint, cluster.certificate_authority.data, args["region"]
            )
        )
        self.cluster_outputs = pulumi.Output.all(
            name=cluster.name,
            arn=cluster.arn,
            endpoint=cluster.endpoint,
            certificateAuthority=cluster.certificate_authority.data,
            oidcIssuer=cluster.identities.apply(_oidc_issuer),
            clusterSecurityGroupId=cluster.vpc_config.cluster_security_group_id,
            vpcId=cluster.vpc_config.vpc_id,
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "cluster_outputs": self.cluster_outputs,
            }
        )

    def _addons(
        self, name: str, args: EksClusterArgs, cluster: aws.eks.Cluster,
        nodes: list[pulumi.Resource], tags: Mapping[str, str] | None,
        boundary: pulumi.Input[str] | None,
    ) -> None:  # fmt: skip
        """The add-ons, once the system nodes can run their pods (EKS waits for an add-on to be
        active)."""

        def addon(
            addon_name: str,
            after: Sequence[pulumi.Resource] = (),
            formerly: pulumi.Input[str] | None = None,
            **settings: Any,
        ) -> aws.eks.Addon:
            return aws.eks.Addon(
                f"{name}-{addon_name}",
                cluster_name=cluster.name,
                addon_name=addon_name,
                tags=tags,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[*nodes, *after],
                    aliases=[formerly] if formerly is not None else None,
                ),
                **settings,
            )

        if args.get("network_policy", False):
            # EKS installs the VPC CNI itself (self-managed); the add-on takes it over.
            addon(
                VPC_CNI,
                configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
            )
        if not args.get("pod_identity_agent", False):
            return
        agent = addon(POD_IDENTITY_AGENT, formerly=args.get("pod_identity_agent_formerly"))
        drivers: list[tuple[str, str, Sequence[str], str | None]] = []
        bucket = args.get("s3_csi_bucket")
        if bucket is not None:
            write = bucket_policy(bucket, MOUNTPOINT_WRITE)
            drivers.append((S3_CSI_ADDON, S3_CSI_ACCOUNT, (), write))
        if args.get("fsx_csi_driver", False):
            drivers.append((FSX_CSI_ADDON, FSX_CSI_ACCOUNT, (FSX_CSI_POLICY,), None))
        for addon_name, account, managed, inline in drivers:
            role, attached = _role(
                f"{name}-{addon_name}", "pods.eks.amazonaws.com", managed, self, tags, boundary,
                trust=pod_identity_trust(),
            )  # fmt: skip
            grants: list[pulumi.Resource] = list(attached)
            if inline is not None:
                grants.append(
                    aws.iam.RolePolicy(
                        f"{name}-{addon_name}-policy",
                        role=role.name,
                        policy=inline,
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                )
            addon(
                addon_name,
                pod_identity_associations=[
                    aws.eks.AddonPodIdentityAssociationArgs(
                        role_arn=role.arn, service_account=account.split("/", 1)[1]
                    )
                ],
                after=[agent, *grants],
            )


def _oidc_issuer(identities: Sequence[aws.eks.outputs.ClusterIdentity]) -> str | None:
    """The cluster's OIDC issuer URL (EKS makes one per cluster)."""
    for identity in identities or []:
        for oidc in identity.oidcs or []:
            if oidc.issuer:
                return oidc.issuer
    return None


class EksGpuNodeGroupArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner decides its layout, node labels, taints, max
    pods and generation from it (the nodes' subnets are `stack.cluster.subnetIds`)."""
    pool: str
    """Name of the pool in `stack.pools`."""
    cluster_name: pulumi.Input[str]
    """EKS cluster the node group joins."""


class EksGpuNodeGroup(pulumi.ComponentResource):
    """An EKS managed node group of MIG GPUs: AL2023 NVIDIA AMI (driver and toolkit included),
    the `nvidia.com/mig.config` label, taints, and max pods set through a launch template whose
    user data is a nodeadm NodeConfig."""

    node_group_name: pulumi.Output[str]
    """The managed node group's name: `<pool>-<generation>`."""
    role_arn: pulumi.Output[str]
    """ARN of the nodes' IAM role."""
    node_group_arn: pulumi.Output[str]
    """The managed node group's ARN."""
    autoscaling_group_names: pulumi.Output[list[str]]
    """The Auto Scaling groups EKS made for the node group."""
    capacity_block_ends: pulumi.Output[str]
    """When the Capacity Block of a `capacity-block` pool ends (EC2's end date; empty for other
    pools): EC2 begins terminating its instances 30 minutes before."""

    def __init__(
        self, name: str, args: EksGpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:EksGpuNodeGroup", name, None, opts)
        pool = planned_pool(args["stack"], args["pool"])
        cluster = planned(args["stack"]).spec.cluster
        assert pool.machine is not None
        tags = planned(args["stack"]).spec.cloud_tags.given()
        given_role = cluster_input(args["stack"], "node_role_arn", cluster.get("nodeRoleArn"))
        role_arn: pulumi.Input[str]
        role_policies: list[aws.iam.RolePolicyAttachment] = []
        if given_role is not None:
            # The team's own node role: it must carry NODE_POLICIES (EKS checks it).
            role_arn = given_role
        else:
            boundary = cluster_input(
                args["stack"], "permissions_boundary", cluster.get("permissionsBoundary")
            )
            role, role_policies = _role(
                f"{name}-node", "ec2.amazonaws.com", NODE_POLICIES, self, tags, boundary
            )
            role_arn = role.arn
        capacity = pool.spec.capacity
        reserved = capacity in RESERVED
        block = capacity is Capacity.CAPACITY_BLOCK
        subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] = cluster_input(
            args["stack"], "subnet_ids", list(cluster.get("subnetIds"))
        )
        ends: pulumi.Input[str] = ""
        if block:
            subnet_ids, ends = self._block_subnets(args["stack"], pool, subnet_ids)
        template = aws.ec2.LaunchTemplate(
            name,
            description=f"mig-inference GPU pool {pool.name}",
            user_data=eks_user_data(pool.max_pods, pool.spec.user_data, pool.boot_mig_gpus),
            # A reservation or Capacity Block: new instances go only to it.
            capacity_reservation_specification=aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=pool.spec.reservation
                )
            )
            if reserved
            else None,
            instance_market_options=aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(
                market_type=CAPACITY_BLOCK_MARKET
            )
            if block
            else None,
            # A Capacity Block's launch template names the block's instance type (EKS "Create a
            # managed node group with Capacity Blocks for ML"); the node group then names none.
            instance_type=pool.machine.name if block else None,
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=pool.spec.disk_size_gb,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=cluster.get("imdsHopLimit") or DEFAULT_HOP_LIMIT,
            ),
            update_default_version=True,
            tags=tags,
            # The instances and their volumes carry the tags too (the node group's own tags
            # reach neither): a change of tags is a new template version, rolled out node by node.
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in TAGGED_AT_LAUNCH
            ]
            if tags
            else None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        group = aws.eks.NodeGroup(
            name,
            # The generation in the name: a change that needs new nodes creates the new group
            # first; EKS drains the old one when Pulumi deletes it, after services moved.
            node_group_name=pool.physical_name,
            cluster_name=args["cluster_name"],
            node_role_arn=role_arn,
            subnet_ids=subnet_ids,
            ami_type=GPU_AMI,
            instance_types=None if block else [pool.machine.name],
            capacity_type=CAPACITY_TYPES[capacity],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                desired_size=pool.min_nodes, min_size=pool.min_nodes, max_size=pool.max_nodes
            ),
            labels=dict(pool.node_labels),
            taints=[
                aws.eks.NodeGroupTaintArgs(
                    key=key, value=value or None, effect=cloud_taint_effect(effect)
                )
                for key, value, effect in pool.cloud_taints
            ],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            # EKS node auto repair replaces a node NotReady for 30 minutes: the only cure of a
            # node whose kubelet a MIG mode change left unable to run pods
            # (NVIDIA/gpu-operator#2415), should the user data not have switched the mode on.
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
            tags=planned(args["stack"]).spec.cloud_tags.of_gpu_pool(cluster.protect),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=cluster.protect,
                # The name is set (it carries the generation), and a bridged provider replaces a
                # resource whose name the program sets delete-before-replace unless told otherwise:
                # the new generation must exist before the old one goes.
                delete_before_replace=False,
                depends_on=role_policies,
                # The Cluster Autoscaler owns the size of an autoscaled group.
                ignore_changes=["scalingConfig.desiredSize"] if pool.autoscaled else None,
            ),
        )
        if pool.autoscaled:
            # What a new node will offer, for the Cluster Autoscaler to grow the group from zero
            # (managed node groups do not copy their tags to the Auto Scaling group).
            asg = group.resources.apply(_autoscaling_group_name)
            for key, value in sorted(node_template_tags(pool).items()):
                aws.autoscaling.Tag(
                    f"{name}-template-{key.rsplit('/', 1)[-1]}-{short_hash(key, 6)}",
                    autoscaling_group_name=asg,
                    tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.node_group_name = group.node_group_name
        self.role_arn = pulumi.Output.from_input(role_arn)
        self.node_group_arn = group.arn
        self.autoscaling_group_names = group.resources.apply(_autoscaling_group_names)
        self.capacity_block_ends = pulumi.Output.from_input(ends)
        self.register_outputs(
            {
                "node_group_name": self.node_group_name,
                "role_arn": self.role_arn,
                "node_group_arn": self.node_group_arn,
                "autoscaling_group_names": self.autoscaling_group_names,
                "capacity_block_ends": self.capacity_block_ends,
            }
        )

    def _block_subnets(
        self,
        stack: Stack,
        pool: PoolPlan,
        subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]],
    ) -> tuple[pulumi.Output[list[str]], pulumi.Output[str]]:
        """The cluster's subnets in the Capacity Block's Availability Zone, and when the block
        ends, both looked up (EC2's DescribeCapacityReservations, DescribeSubnets) so that a
        block the pool cannot use stops the preview at its key before anything is created."""
        assert pool.machine is not None and pool.spec.reservation is not None
        index = [p.name for p in planned(stack).spec.pools].index(pool.name)
        invoke = pulumi.InvokeOutputOptions(parent=self)
        found = aws.ec2.get_capacity_block_reservation_output(id=pool.spec.reservation, opts=invoke)
        filters = pulumi.Output.all(subnet_ids, found.availability_zone).apply(
            lambda known: [
                aws.ec2.GetSubnetsFilterArgs(name="subnet-id", values=list(known[0])),
                aws.ec2.GetSubnetsFilterArgs(name="availability-zone", values=[str(known[1])]),
            ]
        )
        in_zone = aws.ec2.get_subnets_output(filters=filters, opts=invoke).ids
        machine, reservation = pool.machine.name, pool.spec.reservation
        path = f"{key_path('pools')}[{index}]"
        subnets = pulumi.Output.all(
            found.availability_zone, found.instance_type, found.instance_count, in_zone
        ).apply(
            lambda known: block_subnets(
                path,
                reservation,
                machine,
                pool.max_nodes,
                {"availability_zone": known[0], "instance_type": known[1],
                 "instance_count": known[2]},
                known[3] or [],
            )
        )  # fmt: skip
        return subnets, found.end_date
