"""How each cloud sells GPU capacity, per machine type: the capacity choices a pool may take
(on-demand, spot, reservation, capacity block, flex-start), the boot disk types the machine
boots from, and the most pods its node takes, each with its source.

Sources (documentation as cited; the pages were not re-read online when this was written, so
values taken from them are marked unconfirmed in `MachineFacts.unconfirmed` unless a source file
at a commit confirms them):
- Google Cloud "Accelerator-optimized machine family" (`GCP_MACHINES`): A3 High with 1, 2 or 4
  GPUs is created only as Spot or Flex-start VMs; A3 Ultra and A4 have no plain on-demand
  capacity (a reservation, Spot, Flex-start or a resize request) and no Persistent Disk (A4
  boots only from Hyperdisk Balanced). Google's "About reservation-bound instances" lists A3
  High with 8 GPUs (not fewer) among the reservation-bound machine types.
- GKE "Flex-start" (`GKE_FLEX_START`): Dynamic Workload Scheduler's flex-start nodes run for at
  most seven days, in node pools that autoscale (`--flex-start --enable-autoscaling
  --location-policy=ANY --reservation-affinity=none --no-enable-autorepair`).
- GKE "Consuming reserved zonal resources" (`GKE_RESERVATIONS`): `reservation_affinity` with
  `SPECIFIC_RESERVATION`, key `compute.googleapis.com/reservation-name`, the reservation's name
  (a shared one as `projects/<project>/reservations/<name>`).
- GKE "Configure maximum Pods per node" (`GKE_MAX_PODS`): 8 to 256 on Standard clusters, default
  110, fixed when the pool is created; the node's pod range is sized from it.
- Amazon EC2 "On-Demand Capacity Reservations" and "Capacity Blocks for ML", Amazon EKS
  "Capacity Blocks for ML with managed node groups" (`AWS_RESERVATIONS`, `AWS_CAPACITY_BLOCKS`):
  a launch template's `CapacityReservationSpecification` targets a reservation; a Capacity
  Block also needs `InstanceMarketOptions.MarketType: capacity-block` and the node group's
  `capacityType: CAPACITY_BLOCK`.
- EKS max pods (`EKS_MAX_PODS`): awslabs/amazon-eks-ami at 81fec2e8,
  `nodeadm/internal/kubelet/instance-info.jsonl` and `eni_max_pods.go` (ENIs x (IPv4 addresses
  per ENI - 1) + 2), confirmed for every instance type here; managed node groups cap the value
  they compute at 250.
- Oracle Cloud "Capacity reservations" and OKE node pool placement (`OCI_RESERVATIONS`):
  `placementConfigs[].capacityReservationId`; "Preemptible instances" (`OCI_PREEMPTIBLE`);
  OKE "VCN-native pod networking" (`OKE_MAX_PODS`): `maxPodsPerNode` default 31, at most 110.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Capacity(StrEnum):
    """How a pool's nodes are bought (the `capacity` key of a pool)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVATION = "reservation"
    CAPACITY_BLOCK = "capacity-block"
    FLEX_START = "flex-start"


RESERVED = (Capacity.RESERVATION, Capacity.CAPACITY_BLOCK)
"""Choices that consume a reservation the pool names (`reservation` key)."""

GCP_MACHINES = "https://cloud.google.com/compute/docs/accelerator-optimized-machines"
GCP_RESERVATION_BOUND = (
    "https://cloud.google.com/compute/docs/instances/about-reservation-bound-instances"
)
GKE_FLEX_START = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws"
GKE_RESERVATIONS = "https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations"
GKE_MAX_PODS = "https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr"
GCP_DISKS = "https://cloud.google.com/compute/docs/disks#disk-types"
AWS_RESERVATIONS = (
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-reservations.html"
)
AWS_CAPACITY_BLOCKS = "https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html"
AWS_SPOT = "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html"
EKS_MAX_PODS = (
    "awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/kubelet/instance-info.jsonl, eni_max_pods.go"
)
AWS_EBS = "https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html"
OCI_RESERVATIONS = "https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/reserve-capacity.htm"
OCI_PREEMPTIBLE = "https://docs.oracle.com/en-us/iaas/Content/Compute/Concepts/preemptible.htm"
OKE_MAX_PODS = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Concepts/"
    "contengpodnetworking_topic-OCI_CNI_plugin.htm"
)
OCI_BOOT_VOLUMES = "https://docs.oracle.com/en-us/iaas/Content/Block/Concepts/bootvolumes.htm"


@dataclass(frozen=True)
class MachineFacts:
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
    unconfirmed: tuple[str, ...] = ()
    """Facts not confirmed against their source here: `capacity`, `boot_disks`, `max_pods`, or
    one choice as `capacity:<choice>`."""

    def is_unconfirmed(self, capacity: Capacity) -> bool:
        return "capacity" in self.unconfirmed or f"capacity:{capacity}" in self.unconfirmed


_GKE_ALL = (Capacity.ON_DEMAND, Capacity.SPOT, Capacity.RESERVATION, Capacity.FLEX_START)
_GKE_NO_ON_DEMAND = (Capacity.RESERVATION, Capacity.SPOT, Capacity.FLEX_START)
_PD = ("pd-balanced", "pd-ssd", "pd-standard")
_PD_AND_HYPERDISK = ("pd-balanced", "pd-ssd", "hyperdisk-balanced")
_GKE_MAX_PODS = 256


def _gke(capacity: tuple[Capacity, ...], disks: tuple[str, ...], *unconfirmed: str) -> MachineFacts:
    return MachineFacts(
        capacity,
        f"{GCP_MACHINES}; {GKE_RESERVATIONS}; {GKE_FLEX_START}",
        disks,
        f"{GCP_MACHINES}; {GCP_DISKS}",
        _GKE_MAX_PODS,
        GKE_MAX_PODS,
        ("capacity", "boot_disks", "max_pods", *unconfirmed),
    )


GKE_FACTS: dict[str, MachineFacts] = {
    **{f"a2-highgpu-{n}g": _gke(_GKE_ALL, _PD) for n in (1, 2, 4, 8)},
    "a2-megagpu-16g": _gke(_GKE_ALL, _PD),
    **{f"a2-ultragpu-{n}g": _gke(_GKE_ALL, _PD) for n in (1, 2, 4, 8)},
    # Google: A3 High with 1, 2 or 4 GPUs only as Spot or Flex-start VMs.
    **{
        f"a3-highgpu-{n}g": _gke((Capacity.SPOT, Capacity.FLEX_START), _PD_AND_HYPERDISK)
        for n in (1, 2, 4)
    },
    "a3-highgpu-8g": _gke(_GKE_ALL, _PD_AND_HYPERDISK),
    "a3-edgegpu-8g": _gke(_GKE_ALL, _PD_AND_HYPERDISK),
    "a3-megagpu-8g": _gke(_GKE_ALL, _PD_AND_HYPERDISK),
    # A3 Ultra and A4: no plain on-demand capacity, Hyperdisk only (A4 boots from Balanced).
    "a3-ultragpu-8g": _gke(_GKE_NO_ON_DEMAND, ("hyperdisk-balanced",)),
    "a4-highgpu-8g": _gke(_GKE_NO_ON_DEMAND, ("hyperdisk-balanced",)),
    # A4X (GB200) and G4 (RTX PRO 6000): taken to follow A4's rules, unconfirmed like every GKE
    # fact here; G4's capacity choices and disks were not read.
    "a4x-highgpu-4g": _gke(_GKE_NO_ON_DEMAND, ("hyperdisk-balanced",)),
    **{
        f"g4-standard-{vcpus}": _gke(_GKE_ALL, ("hyperdisk-balanced",))
        for vcpus in (48, 96, 192, 384)
    },
    **{
        f"g2-standard-{vcpus}": _gke(_GKE_ALL, _PD, "capacity:flex-start")
        for vcpus in (4, 8, 12, 16, 24, 32, 48, 96)
    },
}

_EKS_P = (Capacity.ON_DEMAND, Capacity.SPOT, Capacity.RESERVATION, Capacity.CAPACITY_BLOCK)
_EKS_G = (Capacity.ON_DEMAND, Capacity.SPOT, Capacity.RESERVATION)
_EBS = ("gp3", "gp2", "io2", "io1")
_EKS_MAX_PODS: dict[str, int] = {
    "p4d.24xlarge": 737, "p4de.24xlarge": 737, "p5.48xlarge": 100, "p5e.48xlarge": 100,
    "p5en.48xlarge": 198, "g4dn.xlarge": 29, "g4dn.12xlarge": 234, "g5.xlarge": 58,
    "g5.12xlarge": 737, "g5.48xlarge": 345, "g6.xlarge": 58, "g6.12xlarge": 234,
    "g6.48xlarge": 737, "g6e.xlarge": 58, "g6e.12xlarge": 292, "g6e.48xlarge": 492,
}  # fmt: skip
"""ENI-based max pods, confirmed against `instance-info.jsonl` (see EKS_MAX_PODS)."""
_EKS_MAX_PODS_LATER: dict[str, int] = {"p6-b200.48xlarge": 198, "p6-b300.48xlarge": 198}
EKS_MAX_PODS_LATER = "awslabs/amazon-eks-ami@0254c5b4 templates/shared/runtime/eni-max-pods.txt"
"""Instance types newer than that file, from the AMI's later eni-max-pods.txt (same formula)."""
_CAPACITY_BLOCK_TYPES = ("p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge")
"""Instance types sold as Capacity Blocks for ML (AWS's list; unconfirmed here)."""


def _eks(name: str, max_pods: int, max_pods_source: str) -> MachineFacts:
    capacity = _EKS_P if name in _CAPACITY_BLOCK_TYPES else _EKS_G
    return MachineFacts(
        capacity,
        f"{AWS_RESERVATIONS}; {AWS_CAPACITY_BLOCKS}; {AWS_SPOT}",
        _EBS,
        AWS_EBS,
        max_pods,
        max_pods_source,
        ("capacity", "boot_disks"),
    )


EKS_FACTS: dict[str, MachineFacts] = {
    **{name: _eks(name, pods, EKS_MAX_PODS) for name, pods in _EKS_MAX_PODS.items()},
    **{name: _eks(name, pods, EKS_MAX_PODS_LATER) for name, pods in _EKS_MAX_PODS_LATER.items()},
}

_OKE = MachineFacts(
    (Capacity.ON_DEMAND, Capacity.RESERVATION, Capacity.SPOT),
    f"{OCI_RESERVATIONS}; {OCI_PREEMPTIBLE}",
    ("boot-volume",),
    OCI_BOOT_VOLUMES,
    110,
    OKE_MAX_PODS,
    # OCI's preemptible shapes were not re-read here, nor whether bare-metal GPU shapes are
    # among them (the price sources list no preemptible price for them).
    ("capacity", "boot_disks", "max_pods", "capacity:spot"),
)
OKE_FACTS: dict[str, MachineFacts] = {
    shape: _OKE
    for shape in (
        "BM.GPU.H100.8", "BM.GPU.H200.8", "BM.GPU.B200.8", "BM.GPU.A100-v2.8", "BM.GPU4.8",
        "BM.GPU.B300.8", "BM.GPU.GB200.4", "BM.GPU.GB300.4",
        "VM.GPU.A10.1", "VM.GPU.A10.2", "BM.GPU.A10.4",
    )
}  # fmt: skip

CLOUD_CAPACITY: dict[str, tuple[Capacity, ...]] = {
    "gke": _GKE_ALL,
    "eks": _EKS_P,
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
        "capacity-block and its reservation",
    },
    "oke": {
        Capacity.ON_DEMAND: "standard instances",
        Capacity.SPOT: "placement preemptible_node_config",
        Capacity.RESERVATION: "placement capacity_reservation_id",
    },
}
"""What each choice sets on each cloud (README, "Capacity")."""

FACTS: dict[str, dict[str, MachineFacts]] = {"gke": GKE_FACTS, "eks": EKS_FACTS, "oke": OKE_FACTS}


def machine_facts(cloud: str, machine: str) -> MachineFacts | None:
    """The facts of a machine type the project knows (None for others)."""
    return FACTS.get(cloud, {}).get(machine)
