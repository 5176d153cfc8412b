"""The CPU system pool of a cluster this project creates, per cloud: its machine, how many nodes
it has, and what one node can give pods (its allocatable CPU and memory). The components create
the pools from it; the planner checks that every pod the stack runs there (the gateway's) fits
one node, and all of them the pool's nodes together, before anything is created.

Allocatable is the machine's capacity less what the kubelet reserves (kube-reserved,
system-reserved) and the hard eviction threshold. The cluster's own DaemonSets and system pods
(kube-proxy, the CNI, DNS, the GPU Operator's controller) take part of it, so fitting is
necessary, not sufficient: a node of a busier pool may still have no room, which only the
cluster shows."""

from __future__ import annotations

from msgspec import Struct

from mig_inference.clouds import Cloud


class SystemPool(Struct, frozen=True):
    machine: str
    """The machine type, instance type or shape."""
    vcpus: int
    memory_gib: int
    allocatable_cpu: float
    """CPUs one node gives pods."""
    allocatable_memory_gib: float
    """Memory one node gives pods."""
    min_nodes: int
    max_nodes: int
    source: str
    """How the allocatable figures are derived."""
    confirmed: bool = False
    """The reservation formula was read from the cloud's documentation."""


GKE_RESERVED = (
    'GKE "Standard cluster architecture", node allocatable: CPU 6% of the first core, 1% of '
    "the second, 0.5% of the third and fourth (4 vCPUs: 80m reserved); memory 25% of the first "
    "4 GiB, 20% of the next 4, 10% of the next 8 (16 GiB: 2.6 GiB), plus the 100 MiB eviction "
    "threshold"
)
EKS_RESERVED = (
    "EKS AL2023 nodeadm: CPU 6% of the first core and 1% of the second (2 vCPUs: 70m); memory "
    "11 MiB x max pods + 255 MiB (29 pods on m6i.large: 574 MiB) and the 100 MiB eviction "
    "threshold, from the ~7.6 GiB the kernel reports of 8 GiB (an estimate)"
)
OKE_RESERVED = (
    "CPU as GKE's formula (4 vCPUs: 3.92, the figure OKE nodes of this shape report); memory by "
    "GKE's formula too, an estimate: OKE's own reservation was not read here"
)

SYSTEM_POOLS: dict[Cloud, SystemPool] = {
    Cloud.GKE: SystemPool("e2-standard-4", 4, 16, 3.92, 13.3, 1, 3, GKE_RESERVED, True),
    Cloud.EKS: SystemPool("m6i.large", 2, 8, 1.93, 6.9, 1, 3, EKS_RESERVED),
    Cloud.OKE: SystemPool("VM.Standard.E5.Flex", 4, 16, 3.92, 13.3, 2, 2, OKE_RESERVED),
}
"""The system pool a created cluster gets: GKE autoscales it from 1 to 3 nodes in total, EKS's
node group runs 2 (1 to 3), OKE's pool 2 nodes of 2 OCPUs (4 vCPUs) and 16 GB."""
OKE_SYSTEM_OCPUS = 2
"""OCPUs of the OKE system shape (an OCPU is 2 vCPUs on E5)."""
