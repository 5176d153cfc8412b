"""Per-cloud facts: machine shapes, GKE's accepted partition sizes, max-pods limits, taint
spellings, and the pod counts a MIG node must have room for. Every number lives here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Cloud(StrEnum):
    GKE = "gke"
    EKS = "eks"
    OKE = "oke"
    EXISTING = "existing"


@dataclass(frozen=True)
class MachineShape:
    """A machine type / instance type / shape that carries GPUs."""

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


def _gke(
    prefix: str, gpu: str, accelerator: str, per_gpu: tuple[int, int], counts: tuple[int, ...]
) -> list[MachineShape]:
    """GKE machine families scale vCPUs and memory with the GPU count."""
    vcpus, memory = per_gpu
    return [
        MachineShape(f"{prefix}-{n}g", gpu, n, accelerator, None, vcpus * n, memory * n)
        for n in counts
    ]


GKE_MACHINES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        *_gke("a2-highgpu", "A100-40GB", "nvidia-tesla-a100", (12, 79), (1, 2, 4, 8)),
        MachineShape("a2-megagpu-16g", "A100-40GB", 16, "nvidia-tesla-a100", None, 96, 1266),
        *_gke("a2-ultragpu", "A100-80GB", "nvidia-a100-80gb", (12, 158), (1, 2, 4, 8)),
        *_gke("a3-highgpu", "H100-80GB", "nvidia-h100-80gb", (26, 217), (1, 2, 4, 8)),
        MachineShape("a3-edgegpu-8g", "H100-80GB", 8, "nvidia-h100-80gb", None, 208, 1743),
        MachineShape("a3-megagpu-8g", "H100-80GB", 8, "nvidia-h100-mega-80gb", None, 208, 1743),
        MachineShape("a3-ultragpu-8g", "H200-141GB", 8, "nvidia-h200-141gb", None, 224, 2749),
        MachineShape("a4-highgpu-8g", "B200-180GB", 8, "nvidia-b200", None, 224, 3695),
        # Blackwell: GPU and count from Google's cluster-toolkit `pkg/config/machine_mappings.json`
        # (@1047080375af: "gb200-4" -> a4x-highgpu-4g; "g4-standard" -> nvidia-rtx-pro-6000 with
        # rtx-6000-1/2/4/8 -> 48/96/192/384). vCPUs and memory unconfirmed here (0: unknown).
        # g4-standard-6/12/24 are fractional (vGPU) shapes, not MIG: left out.
        MachineShape("a4x-highgpu-4g", "GB200", 4, "nvidia-gb200"),
        *(
            MachineShape(f"g4-standard-{vcpus}", "RTX-PRO-6000-96GB", gpus, "nvidia-rtx-pro-6000")
            for vcpus, gpus in ((48, 1), (96, 2), (192, 4), (384, 8))
        ),
        # G2 (L4), no MIG; counts from Google's cluster-toolkit gpu-definition, memory 4 GB/vCPU.
        *(
            MachineShape(
                f"g2-standard-{vcpus}", "L4-24GB", gpus, "nvidia-l4", None, vcpus, vcpus * 4
            )
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
}
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

GKE_PARTITION_SIZES: dict[str, tuple[str, ...]] = {
    "A100-40GB": ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    # Blackwell: the sizes GKE's partitioner lists for nvidia-b200, nvidia-gb200 and
    # nvidia-rtx-pro-6000 (shared/reference/dra/nvidia/blackwell-mig-profiles.md, "GKE"); GKE's
    # docs confirm B200 partitioning, the other two only through GKE's own code (unconfirmed).
    "B200-180GB": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "GB200": ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
    "RTX-PRO-6000-96GB": ("1g.24gb", "2g.48gb", "4g.96gb"),
}
"""`gpu_partition_size` values GKE accepts per GPU (GKE's native MIG)."""

EKS_INSTANCES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        MachineShape("p4d.24xlarge", "A100-40GB", 8, None, 737, 96, 1152),
        MachineShape("p4de.24xlarge", "A100-80GB", 8, None, 737, 96, 1152),
        MachineShape("p5.48xlarge", "H100-80GB", 8, None, 100, 192, 2048),
        MachineShape("p5e.48xlarge", "H200-141GB", 8, None, 100, 192, 2048),
        MachineShape("p5en.48xlarge", "H200-141GB", 8, None, 198, 192, 2048),
        # Blackwell: GPUs from aws/karpenter-provider-aws `instance-types.md` (@1d927085dd81,
        # v1.14.0), max pods from awslabs/amazon-eks-ami `eni-max-pods.txt` (@0254c5b4); vCPUs
        # and memory unconfirmed here (0: unknown). g7e (RTX PRO 6000) is not in that
        # eni-max-pods.txt, so its max pods are unsourced: give gpusPerNode with its name.
        MachineShape("p6-b200.48xlarge", "B200-180GB", 8, None, 198),
        MachineShape("p6-b300.48xlarge", "B300-269GB", 8, None, 198),
        # G instances, no MIG: GPUs, vCPUs, GiB and ENI-based max pods (eni-max-pods.txt).
        MachineShape("g4dn.xlarge", "T4-16GB", 1, None, 29, 4, 16),
        MachineShape("g4dn.12xlarge", "T4-16GB", 4, None, 234, 48, 192),
        MachineShape("g5.xlarge", "A10G-24GB", 1, None, 58, 4, 16),
        MachineShape("g5.12xlarge", "A10G-24GB", 4, None, 737, 48, 192),
        MachineShape("g5.48xlarge", "A10G-24GB", 8, None, 345, 192, 768),
        MachineShape("g6.xlarge", "L4-24GB", 1, None, 58, 4, 16),
        MachineShape("g6.12xlarge", "L4-24GB", 4, None, 234, 48, 192),
        MachineShape("g6.48xlarge", "L4-24GB", 8, None, 737, 192, 768),
        MachineShape("g6e.xlarge", "L40S-48GB", 1, None, 58, 4, 32),
        MachineShape("g6e.12xlarge", "L40S-48GB", 4, None, 292, 48, 384),
        MachineShape("g6e.48xlarge", "L40S-48GB", 8, None, 492, 192, 1536),
    ]
}
EKS_MANAGED_NODE_GROUP_MAX_PODS = 250
"""EKS managed node groups cap the max pods they compute at 250; above that, and above the
instance's ENI-based default, pods would not get addresses, so configured values are refused."""

OKE_SHAPES: dict[str, MachineShape] = {
    m.name: m
    for m in [
        MachineShape("BM.GPU.H100.8", "H100-80GB", 8, None, 31, 224, 1907),
        MachineShape("BM.GPU.H200.8", "H200-141GB", 8, None, 31, 224, 2861),
        MachineShape("BM.GPU.B200.8", "B200-180GB", 8, None, 31, 256, 3815),
        # GPU counts from oracle-quickstart/oci-hpc-oke (@61d210acc37f) `manifests/nccl-tests/
        # kueue/<shape>.yaml` (`nvidia.com/gpu`); the GPU model is in the shape's name. vCPUs
        # and memory unconfirmed here (0: unknown). BM.GPU.RTXPRO.8's GPU model is not stated
        # there: left out.
        MachineShape("BM.GPU.B300.8", "B300-269GB", 8, None, 31),
        MachineShape("BM.GPU.GB200.4", "GB200", 4, None, 31),
        MachineShape("BM.GPU.GB300.4", "GB300", 4, None, 31),
        MachineShape("BM.GPU.A100-v2.8", "A100-80GB", 8, None, 31, 256, 1907),
        MachineShape("BM.GPU4.8", "A100-40GB", 8, None, 31, 128, 1907),
        # A10 shapes, no MIG (OCPU and memory unconfirmed: vCPUs are 2 x OCPUs).
        MachineShape("VM.GPU.A10.1", "A10-24GB", 1, None, 31, 30, 240),
        MachineShape("VM.GPU.A10.2", "A10-24GB", 2, None, 31, 60, 480),
        MachineShape("BM.GPU.A10.4", "A10-24GB", 4, None, 31, 128, 1024),
    ]
}

MACHINES: dict[Cloud, dict[str, MachineShape]] = {
    Cloud.GKE: GKE_MACHINES,
    Cloud.EKS: EKS_INSTANCES,
    Cloud.OKE: OKE_SHAPES,
}

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
