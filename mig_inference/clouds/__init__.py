"""Per-cloud facts: one table of the GPU machine types each cloud sells (`MACHINES`: GPUs,
vCPUs, memory and, per row, what `capacity.MachineFacts` holds: capacity choices, CPU
architecture, native MIG, boot disks, max pods, each with its source), GKE's accepted partition
sizes, max-pods limits, taint spellings, and the pod counts a MIG node must have room for. Every
number lives here."""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct

from mig_inference.clouds.capacity import (
    EKS_MAX_PODS,
    EKS_MAX_PODS_LATER,
    GKE_ALL,
    GKE_NO_ON_DEMAND,
    GKE_RESERVATION_ONLY,
    GKE_SPOT_OR_FLEX,
    HYPERDISK,
    PD,
    PD_AND_HYPERDISK,
    Arch,
    Capacity,
    MachineFacts,
    eks_facts,
    gke_facts,
    oke_facts,
)


class Cloud(StrEnum):
    GKE = "gke"
    EKS = "eks"
    OKE = "oke"
    EXISTING = "existing"


class MachineShape(Struct, frozen=True):
    """A machine type / instance type / shape that carries GPUs: one row of `MACHINES`."""

    name: str
    gpu: str
    """Catalog GPU model."""
    gpus: int
    """GPUs per node."""
    accelerator: str | None = None
    """GKE accelerator type for `guest_accelerators`."""
    default_max_pods: int | None = None
    """The cloud's max pods for this shape when nothing is set."""
    vcpus: int = 0
    """vCPUs of the node as published by the cloud (0 = unknown)."""
    memory_gib: int = 0
    """Memory of the node in GiB as published by the cloud (0 = unknown)."""
    facts: MachineFacts | None = None
    """What the cloud sells this machine as and what its node is, with sources (None for a
    machine type the project does not know, given with `gpusPerNode`)."""

    @property
    def arch(self) -> Arch:
        """The node's CPU architecture (a machine type the project does not know is taken as
        amd64: the clouds' GPU node images the project uses are x86 ones)."""
        return self.facts.arch if self.facts else Arch.AMD64


GKE_PARTITION_SIZES: dict[str, tuple[str, ...]] = {
    "A100-40GB": ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    # B200: the sizes GKE's partitioner lists for nvidia-b200
    # (shared/reference/dra/nvidia/blackwell-mig-profiles.md, "GKE").
    "B200-180GB": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
}
"""`gpu_partition_size` values GKE accepts per GPU: the GPUs GKE documents native MIG node pools
for ("Running multi-instance GPUs": A100, H100, H200, B200). GKE's partitioner code also lists
GB200 and RTX PRO 6000 sizes, which GKE does not document for node pools: those GPUs take the
GPU Operator (see GKE_COMPUTECLASS_ONLY_PARTITIONS)."""
GKE_COMPUTECLASS_ONLY_PARTITIONS: dict[str, tuple[str, ...]] = {
    "RTX-PRO-6000-96GB": ("1g.24gb", "2g.48gb", "4g.96gb"),
}
"""MIG partition sizes GKE documents only for ComputeClasses: the ComputeClass reference
(https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass,
`spec.priorities[].gpu.gpuSharing.gpuPartitionSize`, GKE 1.35.2-gke.1485000 and later; its
example values for nvidia-rtx-pro-6000, as transcribed by kcl-lang/modules#358, 2026-04-26).
The stack creates node pools, whose `gpu_partition_size` GKE documents for the GPUs of
GKE_PARTITION_SIZES only ("Running multi-instance GPUs", the copy of 2026 listing A100, H100,
H200 and B200), and no ComputeClass: these GPUs stay with the GPU Operator."""


def _gke_row(
    name: str,
    gpu: str,
    accelerator: str,
    gpus: int,
    size: tuple[int, int],
    capacity: tuple[Capacity, ...],
    disks: tuple[str, ...],
    arch: Arch = Arch.AMD64,
    confirmed: tuple[str, ...] = (),
    unconfirmed: tuple[str, ...] = (),
) -> MachineShape:
    vcpus, memory = size
    facts = gke_facts(
        capacity,
        disks,
        native_mig=gpu in GKE_PARTITION_SIZES,
        arch=arch,
        confirmed=confirmed,
        unconfirmed=unconfirmed,
    )
    return MachineShape(name, gpu, gpus, accelerator, None, vcpus, memory, facts)


def _gke(
    prefix: str,
    gpu: str,
    accelerator: str,
    per_gpu: tuple[int, int],
    counts: tuple[int, ...],
    capacity: tuple[Capacity, ...],
    disks: tuple[str, ...],
) -> list[MachineShape]:
    """GKE machine families scale vCPUs and memory with the GPU count."""
    vcpus, memory = per_gpu
    return [
        _gke_row(f"{prefix}-{n}g", gpu, accelerator, n, (vcpus * n, memory * n), capacity, disks)
        for n in counts
    ]


GKE_MACHINES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        *_gke("a2-highgpu", "A100-40GB", "nvidia-tesla-a100", (12, 79), (1, 2, 4, 8), GKE_ALL, PD),
        _gke_row("a2-megagpu-16g", "A100-40GB", "nvidia-tesla-a100", 16, (96, 1266), GKE_ALL, PD),
        *_gke("a2-ultragpu", "A100-80GB", "nvidia-a100-80gb", (12, 158), (1, 2, 4, 8), GKE_ALL,
              PD),
        # Google: A3 High with 1, 2 or 4 GPUs only as Spot or Flex-start VMs.
        *_gke("a3-highgpu", "H100-80GB", "nvidia-h100-80gb", (26, 217), (1, 2, 4),
              GKE_SPOT_OR_FLEX, PD_AND_HYPERDISK),
        *_gke("a3-highgpu", "H100-80GB", "nvidia-h100-80gb", (26, 217), (8,), GKE_ALL,
              PD_AND_HYPERDISK),
        _gke_row("a3-edgegpu-8g", "H100-80GB", "nvidia-h100-80gb", 8, (208, 1743), GKE_ALL,
                 PD_AND_HYPERDISK),
        _gke_row("a3-megagpu-8g", "H100-80GB", "nvidia-h100-mega-80gb", 8, (208, 1743), GKE_ALL,
                 PD_AND_HYPERDISK),
        # A3 Ultra and A4: no plain on-demand capacity, Hyperdisk only (A4 boots from Balanced).
        _gke_row("a3-ultragpu-8g", "H200-141GB", "nvidia-h200-141gb", 8, (224, 2749),
                 GKE_NO_ON_DEMAND, HYPERDISK),
        _gke_row("a4-highgpu-8g", "B200-180GB", "nvidia-b200", 8, (224, 3695), GKE_NO_ON_DEMAND,
                 HYPERDISK),
        # Blackwell: GPU and count from Google's cluster-toolkit `pkg/config/machine_mappings.json`
        # (@1047080375af: "gb200-4" -> a4x-highgpu-4g; "g4-standard" -> nvidia-rtx-pro-6000 with
        # rtx-6000-1/2/4/8 -> 48/96/192/384). vCPUs and memory unconfirmed here (0: unknown).
        # g4-standard-6/12/24 are fractional (vGPU) shapes, not MIG: left out. A4X is Arm (a
        # Grace host CPU) and sold through reservations only (confirmed: GCP_CONSUMPTION).
        _gke_row("a4x-highgpu-4g", "GB200", "nvidia-gb200", 4, (0, 0), GKE_RESERVATION_ONLY,
                 HYPERDISK, arch=Arch.ARM64, confirmed=("capacity",)),
        *(
            _gke_row(f"g4-standard-{vcpus}", "RTX-PRO-6000-96GB", "nvidia-rtx-pro-6000", gpus,
                     (0, 0), GKE_ALL, HYPERDISK)
            for vcpus, gpus in ((48, 1), (96, 2), (192, 4), (384, 8))
        ),
        # G2 (L4), no MIG; counts from Google's cluster-toolkit gpu-definition, memory 4 GB/vCPU.
        *(
            _gke_row(f"g2-standard-{vcpus}", "L4-24GB", "nvidia-l4", gpus, (vcpus, vcpus * 4),
                     GKE_ALL, PD, unconfirmed=("capacity:flex-start",))
            for vcpus, gpus in (
                (4, 1),
                (8, 1),
                (12, 1),
                (16, 1),
                (24, 2),
                (32, 1),
                (48, 4),
                (96, 8),
            )
        ),
    ]
}  # fmt: skip
GKE_ACCELERATORS: dict[str, str] = {
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100-80GB": "nvidia-h100-80gb",
    "H200-141GB": "nvidia-h200-141gb",
    "B200-180GB": "nvidia-b200",
    "GB200": "nvidia-gb200",
    "RTX-PRO-6000-96GB": "nvidia-rtx-pro-6000",
    "L4-24GB": "nvidia-l4",
    "T4-16GB": "nvidia-tesla-t4",
}
"""Accelerator type per GPU, for machine types given with an explicit `gpusPerNode`."""


def _eks(
    name: str,
    gpu: str,
    gpus: int,
    max_pods: int,
    size: tuple[int, int] = (0, 0),
    source: str = EKS_MAX_PODS,
) -> MachineShape:
    vcpus, memory = size
    return MachineShape(
        name, gpu, gpus, None, max_pods, vcpus, memory, eks_facts(name, max_pods, source)
    )


EKS_INSTANCES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        _eks("p4d.24xlarge", "A100-40GB", 8, 737, (96, 1152)),
        _eks("p4de.24xlarge", "A100-80GB", 8, 737, (96, 1152)),
        _eks("p5.48xlarge", "H100-80GB", 8, 100, (192, 2048)),
        _eks("p5e.48xlarge", "H200-141GB", 8, 100, (192, 2048)),
        _eks("p5en.48xlarge", "H200-141GB", 8, 198, (192, 2048)),
        # Blackwell: GPUs from aws/karpenter-provider-aws `instance-types.md` (@1d927085dd81,
        # v1.14.0), max pods from awslabs/amazon-eks-ami `eni-max-pods.txt` (@0254c5b4); vCPUs
        # and memory unconfirmed here (0: unknown). g7e (RTX PRO 6000) is not in that
        # eni-max-pods.txt, so its max pods are unsourced: give gpusPerNode with its name.
        _eks("p6-b200.48xlarge", "B200-180GB", 8, 198, source=EKS_MAX_PODS_LATER),
        _eks("p6-b300.48xlarge", "B300-269GB", 8, 198, source=EKS_MAX_PODS_LATER),
        # G instances, no MIG: GPUs, vCPUs, GiB and ENI-based max pods (eni-max-pods.txt).
        _eks("g4dn.xlarge", "T4-16GB", 1, 29, (4, 16)),
        _eks("g4dn.12xlarge", "T4-16GB", 4, 234, (48, 192)),
        _eks("g5.xlarge", "A10G-24GB", 1, 58, (4, 16)),
        _eks("g5.12xlarge", "A10G-24GB", 4, 737, (48, 192)),
        _eks("g5.48xlarge", "A10G-24GB", 8, 345, (192, 768)),
        _eks("g6.xlarge", "L4-24GB", 1, 58, (4, 16)),
        _eks("g6.12xlarge", "L4-24GB", 4, 234, (48, 192)),
        _eks("g6.48xlarge", "L4-24GB", 8, 737, (192, 768)),
        _eks("g6e.xlarge", "L40S-48GB", 1, 58, (4, 32)),
        _eks("g6e.12xlarge", "L40S-48GB", 4, 292, (48, 384)),
        _eks("g6e.48xlarge", "L40S-48GB", 8, 492, (192, 1536)),
    ]
}
EKS_MANAGED_NODE_GROUP_MAX_PODS = 250
"""EKS managed node groups cap the max pods they compute at 250; above that, and above the
instance's ENI-based default, pods would not get addresses, so configured values are refused."""


def _oke(
    name: str, gpu: str, gpus: int, size: tuple[int, int] = (0, 0), arch: Arch = Arch.AMD64
) -> MachineShape:
    vcpus, memory = size
    return MachineShape(name, gpu, gpus, None, 31, vcpus, memory, oke_facts(name, arch))


OKE_SHAPES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        _oke("BM.GPU.H100.8", "H100-80GB", 8, (224, 1907)),
        _oke("BM.GPU.H200.8", "H200-141GB", 8, (224, 2861)),
        _oke("BM.GPU.B200.8", "B200-180GB", 8, (256, 3815)),
        # GPU counts from oracle-quickstart/oci-hpc-oke (@61d210acc37f) `manifests/nccl-tests/
        # kueue/<shape>.yaml` (`nvidia.com/gpu`); the GPU model is in the shape's name. vCPUs
        # and memory unconfirmed here (0: unknown). BM.GPU.RTXPRO.8's GPU model is not stated
        # there: left out. GB200 and GB300 shapes are Arm (a Grace host CPU).
        _oke("BM.GPU.B300.8", "B300-269GB", 8),
        _oke("BM.GPU.GB200.4", "GB200", 4, arch=Arch.ARM64),
        _oke("BM.GPU.GB300.4", "GB300", 4, arch=Arch.ARM64),
        _oke("BM.GPU.A100-v2.8", "A100-80GB", 8, (256, 1907)),
        _oke("BM.GPU4.8", "A100-40GB", 8, (128, 1907)),
        # A10 shapes, no MIG (OCPU and memory unconfirmed: vCPUs are 2 x OCPUs).
        _oke("VM.GPU.A10.1", "A10-24GB", 1, (30, 240)),
        _oke("VM.GPU.A10.2", "A10-24GB", 2, (60, 480)),
        _oke("BM.GPU.A10.4", "A10-24GB", 4, (128, 1024)),
    ]
}

MACHINES: dict[Cloud, dict[str, MachineShape]] = {
    Cloud.GKE: GKE_MACHINES,
    Cloud.EKS: EKS_INSTANCES,
    Cloud.OKE: OKE_SHAPES,
}
"""The table: every GPU machine type each cloud sells that the project knows."""


def known_machine(cloud: Cloud | str, name: str) -> MachineShape | None:
    """The row of a machine type the project knows (None for others)."""
    return MACHINES.get(Cloud(cloud), {}).get(name)


NODE_ALLOCATABLE_FRACTION = 0.85
"""Share of a node's vCPUs and memory handed to inference pods; the rest stays for the kubelet,
system and GPU Operator pods."""
UNKNOWN_NODE_SIZE = (32, 256)
"""vCPUs and GiB assumed per node when the shape is unknown (existing clusters)."""

MAX_PODS_RANGE: dict[Cloud, tuple[int, int]] = {
    Cloud.GKE: (8, 256),
    Cloud.EKS: (1, EKS_MANAGED_NODE_GROUP_MAX_PODS),
    Cloud.OKE: (1, 110),
    Cloud.EXISTING: (1, 1024),
}
"""Allowed `maxPods` per cloud (EKS is further capped by the instance's default)."""

DEFAULT_MAX_PODS: dict[Cloud, int] = {Cloud.GKE: 110, Cloud.EKS: 250, Cloud.OKE: 31}
"""What a node gets when `maxPods` is not set (EKS: min of this and the instance default)."""

GPU_OPERATOR_PODS_PER_NODE = 10
"""GPU Operator pods on every GPU node: driver, container toolkit, device plugin, GPU feature
discovery, MIG manager, DCGM exporter, operator validator, CUDA and plugin validators, NFD
worker."""

SYSTEM_PODS_PER_NODE: dict[Cloud, int] = {
    # kube-proxy, fluentbit, metrics agent, pd-csi, netd, ip-masq, driver installer, spare
    Cloud.GKE: 8,
    Cloud.EKS: 5,  # aws-node, kube-proxy, pod-identity agent, ebs-csi node, spare
    Cloud.OKE: 6,  # kube-proxy, proxymux, VCN-native CNI, csi node, kube-dns autoscaler, spare
    Cloud.EXISTING: 8,
}
"""Cloud system DaemonSet pods per node (estimates with one spare; `systemPods` overrides)."""

K8S_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_UPPER_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE",
                  "NoExecute": "NO_EXECUTE"}  # fmt: skip


def cloud_taint_effect(effect: str) -> str:
    """GKE and EKS spell taint effects `NO_SCHEDULE`; Kubernetes spells them `NoSchedule`."""
    return _UPPER_EFFECTS[effect]
