"""The kinds of facts each cloud states per GPU machine type, their sources, and the values
machine families share: the capacity choices a pool may take (on-demand, spot, reservation,
capacity block, flex-start), the CPU architecture, whether the cloud partitions the GPUs itself
(GKE's native MIG), the boot disk types the machine boots from, and the most pods its node
takes. The rows, one per machine type, are `mig_inference.clouds.MACHINES`: the spec and the
planner refuse from them, the components render from them, a test enumerates them.

Sources (documentation as cited; a value taken from a page that was not re-read here is marked
unconfirmed in `MachineFacts.unconfirmed`, and `plan` prints it so):
- Google Cloud "Accelerator-optimized machine family" (`GCP_MACHINES`): A3 High with 1, 2 or 4
  GPUs is created only as Spot or Flex-start VMs; A3 Ultra and A4 have no plain on-demand
  capacity (a reservation, Spot, Flex-start or a resize request) and no Persistent Disk (A4
  boots only from Hyperdisk Balanced). Google's "About reservation-bound instances" lists A3
  High with 8 GPUs (not fewer) among the reservation-bound machine types.
- Google AI Hypercomputer "Consumption options" (`GCP_CONSUMPTION`, read here): Flex-start and
  Spot take "any GPU machine except A4X"; A4X is sold through (future) reservations only.
- GKE "Prepare an Arm workload for deployment" (`GKE_ARM`, read here): GKE taints every Arm node
  `kubernetes.io/arch=arm64:NoSchedule`; a pod needs the toleration and an arm64 image.
- GKE "Running multi-instance GPUs" (`GKE_NATIVE_MIG`, read here): GKE partitions A100, H100,
  H200 and B200 GPUs itself; other GPUs take the GPU Operator's MIG manager.
- GKE "Flex-start" (`GKE_FLEX_START`): Dynamic Workload Scheduler's flex-start nodes run for at
  most seven days, in node pools that autoscale (`--flex-start --enable-autoscaling
  --location-policy=ANY --reservation-affinity=none --no-enable-autorepair`).
- GKE "Consuming reserved zonal resources" (`GKE_RESERVATIONS`): `reservation_affinity` with
  `SPECIFIC_RESERVATION`, key `compute.googleapis.com/reservation-name`, the reservation's name
  (a shared one as `projects/<project>/reservations/<name>`).
- GKE "Configure maximum Pods per node" (`GKE_MAX_PODS`): 8 to 256 on Standard clusters, default
  110, fixed when the pool is created; the node's pod range is sized from it.
- Amazon EC2 "On-Demand Capacity Reservations" (`AWS_RESERVATIONS`): a launch template's
  `CapacityReservationSpecification` targets a reservation.
- Amazon EC2 "Capacity Blocks for ML" and "Work with Capacity Blocks" (`AWS_BLOCKS`,
  `AWS_BLOCKS_USING`, read here in a copy that lists p4d, p5, p5e and p5en; p4de, p6-b200 and
  p6-b300 are on the current page by the project's reading of it, unconfirmed here): a block is
  a targeted Capacity Reservation in a single Availability Zone; EC2 begins terminating its
  instances 30 minutes before it ends (every block ends at 11:30 UTC).
- Amazon EKS "Create a managed node group with Capacity Blocks for ML" (`EKS_BLOCKS`, read
  here): a custom launch template with `InstanceMarketOptions.MarketType: capacity-block`, the
  block's `CapacityReservationId` and the `InstanceType`; the node group's `capacityType:
  CAPACITY_BLOCK`; set the desired size to 0 when upgrading such a node group.
- EKS max pods (`EKS_MAX_PODS`): awslabs/amazon-eks-ami at 81fec2e8,
  `nodeadm/internal/kubelet/instance-info.jsonl` and `eni_max_pods.go` (ENIs x (IPv4 addresses
  per ENI - 1) + 2), confirmed for every instance type here; managed node groups cap the value
  they compute at 250.
- Oracle Cloud "Capacity reservations" and OKE node pool placement (`OCI_RESERVATIONS`):
  `placementConfigs[].capacityReservationId`; "Preemptible instances" (`OCI_PREEMPTIBLE`, read
  here): preemptible capacity "does not support bare metal instances"; OKE "VCN-native pod
  networking" (`OKE_MAX_PODS`): `maxPodsPerNode` default 31, at most 110.
- NVIDIA GB200 and GB300 superchips (`NVIDIA_GRACE`): the host CPU is NVIDIA Grace (Arm Neoverse
  V2), so every GB200/GB300 machine is arm64; Google ships an A4X-only driver installer
  (`GKE_A4X_INSTALLER`) with a multi-arch pause image.
"""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct


class Capacity(StrEnum):
    """How a pool's nodes are bought (the `capacity` key of a pool)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVATION = "reservation"
    CAPACITY_BLOCK = "capacity-block"
    FLEX_START = "flex-start"


class Arch(StrEnum):
    """A node's CPU architecture, as Kubernetes labels it (`kubernetes.io/arch`)."""

    AMD64 = "amd64"
    ARM64 = "arm64"


RESERVED = (Capacity.RESERVATION, Capacity.CAPACITY_BLOCK)
"""Choices that consume a reservation the pool names (`reservation` key)."""

GCP_MACHINES = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
GCP_CONSUMPTION = "https://cloud.google.com/ai-hypercomputer/docs/consumption-models"
GCP_RESERVATION_BOUND = (
    "https://cloud.google.com/compute/docs/instances/about-reservation-bound-instances"
)
GKE_ARM = (
    "https://cloud.google.com/kubernetes-engine/docs/how-to/prepare-arm-workloads-for-deployment"
)
GKE_NATIVE_MIG = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi"
GKE_FLEX_START = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws"
GKE_RESERVATIONS = "https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations"
GKE_MAX_PODS = "https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr"
GKE_A4X_INSTALLER = (
    "GoogleCloudPlatform/container-engine-accelerators@6253173028d6 "
    "nvidia-driver-installer/cos/daemonset-preloaded-latest-a4x.yaml"
)
GCP_DISKS = "https://cloud.google.com/compute/docs/disks#disk-types"
AWS_RESERVATIONS = (
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-reservations.html"
)
AWS_BLOCKS = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html"
AWS_BLOCKS_USING = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html"
EKS_BLOCKS = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"
AWS_SPOT = "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html"
AWS_INSTANCES = "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
EKS_MAX_PODS = (
    "awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/kubelet/instance-info.jsonl, eni_max_pods.go"
)
EKS_MAX_PODS_LATER = "awslabs/amazon-eks-ami@0254c5b4 templates/shared/runtime/eni-max-pods.txt"
"""Instance types newer than EKS_MAX_PODS's file, from the AMI's later eni-max-pods.txt."""
AWS_EBS = "https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html"
OCI_RESERVATIONS = "https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/reserve-capacity.htm"
OCI_PREEMPTIBLE = "https://docs.oracle.com/en-us/iaas/Content/Compute/Concepts/preemptible.htm"
OCI_SHAPES = "https://docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm"
OKE_MAX_PODS = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Concepts/"
    "contengpodnetworking_topic-OCI_CNI_plugin.htm"
)
OCI_BOOT_VOLUMES = "https://docs.oracle.com/en-us/iaas/Content/Block/Concepts/bootvolumes.htm"
NO_NATIVE_MIG = (
    "EKS managed node groups (pulumi_aws eks.NodeGroup) and OKE node pools (pulumi_oci "
    "containerengine.NodePool) have no GPU partition setting"
)
NVIDIA_GRACE = "https://www.nvidia.com/en-us/data-center/grace-cpu/ (Arm Neoverse V2 cores)"

CAPACITY_BLOCK_END = (
    "a Capacity Block ends at its end time (11:30 UTC): EC2 begins terminating its instances 30 "
    "minutes before, and EKS scales the node group down ahead of that; the pool's replicas are "
    "evicted and stay Pending, so its services stop serving unless another pool serves them, "
    "until the stack names a new block"
)
"""What happens when a Capacity Block ends (`AWS_BLOCKS_USING`, `EKS_BLOCKS`)."""
CAPACITY_BLOCK_END_SOURCE = f"{AWS_BLOCKS_USING}; {EKS_BLOCKS}"


class MachineFacts(Struct, frozen=True):
    """What one GPU machine type offers, each fact with where it comes from."""

    capacity: tuple[Capacity, ...]
    """Capacity choices a pool of this machine may take."""
    capacity_source: str
    boot_disks: tuple[str, ...]
    """Boot disk types, the one pools use first (GKE `disk_type`; EKS EBS volume type; OCI
    boot volumes)."""
    boot_disk_source: str
    max_pods: int
    """The most pods the cloud lets this machine's node run (the `maxPods` ceiling)."""
    max_pods_source: str
    arch: Arch = Arch.AMD64
    """The node's CPU architecture: every pod scheduled on an arm64 node needs an arm64 image
    (and on GKE the toleration of its Arm taint)."""
    arch_source: str = ""
    native_mig: bool = False
    """The cloud partitions this machine's GPUs itself (GKE `gpu_partition_size`)."""
    native_mig_source: str = ""
    capacity_rule: str = ""
    """The cloud's rule behind `capacity`, quoted when a choice is refused."""
    unconfirmed: tuple[str, ...] = ()
    """Facts not confirmed against their source here: `capacity` (the whole list, what it
    leaves out too), one choice as `capacity:<choice>`, `boot_disks`, `max_pods`, `arch`,
    `native_mig`."""

    def is_unconfirmed(self, fact: str) -> bool:
        """Whether `fact` (a field name, or `capacity:<choice>`) was not confirmed here."""
        if fact.startswith("capacity:") and "capacity" in self.unconfirmed:
            return True
        return fact in self.unconfirmed

    def sources(self) -> dict[str, str]:
        """Each fact's source, by fact."""
        return {
            "capacity": self.capacity_source,
            "boot_disks": self.boot_disk_source,
            "max_pods": self.max_pods_source,
            "arch": self.arch_source,
            "native_mig": self.native_mig_source,
        }


# GKE -----------------------------------------------------------------------------------------

GKE_ALL = (Capacity.ON_DEMAND, Capacity.SPOT, Capacity.RESERVATION, Capacity.FLEX_START)
GKE_SPOT_OR_FLEX = (Capacity.SPOT, Capacity.FLEX_START)
"""A3 High with 1, 2 or 4 GPUs."""
GKE_NO_ON_DEMAND = (Capacity.RESERVATION, Capacity.SPOT, Capacity.FLEX_START)
"""A3 Ultra and A4."""
GKE_RESERVATION_ONLY = (Capacity.RESERVATION,)
"""A4X (`GCP_CONSUMPTION`: Flex-start and Spot take any GPU machine except A4X)."""
PD = ("pd-balanced", "pd-ssd", "pd-standard")
PD_AND_HYPERDISK = ("pd-balanced", "pd-ssd", "hyperdisk-balanced")
HYPERDISK = ("hyperdisk-balanced",)
GKE_MAX_PODS_CEILING = 256
GKE_CAPACITY_RULES: dict[tuple[Capacity, ...], str] = {
    GKE_SPOT_OR_FLEX: "Google creates A3 High VMs with 1, 2 or 4 GPUs only as Spot or Flex-start",
    GKE_NO_ON_DEMAND: "Google sells A3 Ultra and A4 through reservations, Spot or Flex-start, "
    "not as plain on-demand VMs",
    GKE_RESERVATION_ONLY: "Google sells A4X only through reservations (Flex-start and Spot take "
    "any GPU machine except A4X)",
}


def gke_facts(
    capacity: tuple[Capacity, ...],
    disks: tuple[str, ...],
    *,
    native_mig: bool,
    arch: Arch = Arch.AMD64,
    confirmed: tuple[str, ...] = (),
    unconfirmed: tuple[str, ...] = (),
) -> MachineFacts:
    """A GKE machine type's facts; every one unconfirmed unless named in `confirmed`."""
    capacity_source = f"{GCP_MACHINES}; {GKE_RESERVATIONS}; {GKE_FLEX_START}"
    if capacity == GKE_RESERVATION_ONLY:
        capacity_source = GCP_CONSUMPTION
    rule = GKE_CAPACITY_RULES.get(capacity, "")
    doubtful = ("capacity", "boot_disks", "max_pods", "arch", *unconfirmed)
    return MachineFacts(
        capacity,
        capacity_source,
        disks,
        f"{GCP_MACHINES}; {GCP_DISKS}",
        GKE_MAX_PODS_CEILING,
        GKE_MAX_PODS,
        arch,
        f"{NVIDIA_GRACE}; {GKE_ARM}; {GKE_A4X_INSTALLER}" if arch is Arch.ARM64 else GCP_MACHINES,
        native_mig,
        GKE_NATIVE_MIG,
        rule,
        tuple(fact for fact in doubtful if fact not in confirmed),
    )


# EKS -----------------------------------------------------------------------------------------

EKS_WITH_BLOCKS = (
    Capacity.ON_DEMAND,
    Capacity.SPOT,
    Capacity.RESERVATION,
    Capacity.CAPACITY_BLOCK,
)
EKS_WITHOUT_BLOCKS = (Capacity.ON_DEMAND, Capacity.SPOT, Capacity.RESERVATION)
CAPACITY_BLOCK_TYPES: dict[str, bool] = {
    "p4d.24xlarge": True,
    "p5.48xlarge": True,
    "p5e.48xlarge": True,
    "p5en.48xlarge": True,
    "p4de.24xlarge": False,
    "p6-b200.48xlarge": False,
    "p6-b300.48xlarge": False,
}
"""Instance types sold as Capacity Blocks for ML (`AWS_BLOCKS`), and whether the copy of the
page read here lists them (True) or only the current page does, by the project's reading of it
(False: unconfirmed here)."""
EBS = ("gp3", "gp2", "io2", "io1")


def eks_facts(name: str, max_pods: int, max_pods_source: str) -> MachineFacts:
    """An EKS instance type's facts: its max pods come from the EKS AMI (confirmed); the
    purchase options other than Capacity Blocks were not re-read here."""
    blocks = name in CAPACITY_BLOCK_TYPES
    unconfirmed = ["capacity:on-demand", "capacity:spot", "capacity:reservation", "boot_disks"]
    if blocks and not CAPACITY_BLOCK_TYPES[name]:
        unconfirmed.append("capacity:capacity-block")
    return MachineFacts(
        EKS_WITH_BLOCKS if blocks else EKS_WITHOUT_BLOCKS,
        f"{AWS_RESERVATIONS}; {AWS_BLOCKS}; {EKS_BLOCKS}; {AWS_SPOT}",
        EBS,
        AWS_EBS,
        max_pods,
        max_pods_source,
        Arch.AMD64,
        AWS_INSTANCES,
        native_mig_source=NO_NATIVE_MIG,
        capacity_rule="AWS sells Capacity Blocks for ML for "
        + ", ".join(sorted(CAPACITY_BLOCK_TYPES)),
        unconfirmed=(*unconfirmed, "arch"),
    )


# OKE -----------------------------------------------------------------------------------------

OKE_BARE_METAL_PREFIX = "BM."
OKE_MAX_PODS_CEILING = 110


def oke_facts(shape: str, arch: Arch = Arch.AMD64) -> MachineFacts:
    """An OKE shape's facts. OCI's preemptible capacity takes no bare-metal shape (confirmed);
    the other choices, the boot volume and the ceiling of max pods were not re-read here."""
    bare_metal = shape.startswith(OKE_BARE_METAL_PREFIX)
    capacity: tuple[Capacity, ...] = (Capacity.ON_DEMAND, Capacity.RESERVATION)
    unconfirmed = ["capacity:on-demand", "capacity:reservation", "boot_disks", "max_pods", "arch"]
    if not bare_metal:
        capacity = (*capacity, Capacity.SPOT)
        unconfirmed.append("capacity:spot")
    return MachineFacts(
        capacity,
        f"{OCI_RESERVATIONS}; {OCI_PREEMPTIBLE}",
        ("boot-volume",),
        OCI_BOOT_VOLUMES,
        OKE_MAX_PODS_CEILING,
        OKE_MAX_PODS,
        arch,
        f"{NVIDIA_GRACE}; {OCI_SHAPES}" if arch is Arch.ARM64 else OCI_SHAPES,
        native_mig_source=NO_NATIVE_MIG,
        capacity_rule="OCI's preemptible capacity does not support bare metal instances"
        if bare_metal
        else "",
        unconfirmed=tuple(unconfirmed),
    )


CLOUD_CAPACITY: dict[str, tuple[Capacity, ...]] = {
    "gke": GKE_ALL,
    "eks": EKS_WITH_BLOCKS,
    "oke": (Capacity.ON_DEMAND, Capacity.RESERVATION, Capacity.SPOT),
    "existing": (),
}
"""Every choice each cloud has a mechanism for (a machine type the project does not know may
take any of them)."""

MECHANISM: dict[str, dict[Capacity, str]] = {
    "gke": {
        Capacity.ON_DEMAND: "standard VMs",
        Capacity.SPOT: "node_config.spot",
        Capacity.RESERVATION: "node_config.reservation_affinity SPECIFIC_RESERVATION",
        Capacity.FLEX_START: "node_config.flex_start (Dynamic Workload Scheduler), autoscaled",
    },
    "eks": {
        Capacity.ON_DEMAND: "capacity_type ON_DEMAND",
        Capacity.SPOT: "capacity_type SPOT",
        Capacity.RESERVATION: "launch template capacity_reservation_target (On-Demand Capacity "
        "Reservation)",
        Capacity.CAPACITY_BLOCK: "capacity_type CAPACITY_BLOCK, launch template market type "
        "capacity-block, the block's reservation and instance type, subnets of its zone",
    },
    "oke": {
        Capacity.ON_DEMAND: "standard instances",
        Capacity.SPOT: "placement preemptible_node_config",
        Capacity.RESERVATION: "placement capacity_reservation_id",
    },
}
"""What each choice sets on each cloud (docs/capacity.md, "Capacity")."""
