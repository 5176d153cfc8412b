"""The nodes a cloud pool resource stands for, read from its rendered inputs: their labels,
taints, zones and count, per cloud (GKE node pool, EKS managed node group, OKE node pool)."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from msgspec import Struct

from mig_inference.clouds import Cloud, known_machine
from mig_inference.clouds.capacity import Arch
from mig_inference.names.labels import ARCH_LABEL
from mig_inference.rollout.model import Taint
from mig_inference.rollout.resources import Resource

GKE_POOL = "gcp:container/nodePool:NodePool"
EKS_GROUP = "aws:eks/nodeGroup:NodeGroup"
OKE_POOL = "oci:ContainerEngine/nodePool:NodePool"
EKS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
POOL_TYPES = (GKE_POOL, EKS_GROUP, OKE_POOL)


class PoolShape(Struct, frozen=True):
    """What nodes of one cloud pool look like, and how many there are."""

    type: str
    physical: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    zones: tuple[str, ...]
    nodes: int
    """Nodes it runs now (a fixed size, or the autoscaled minimum)."""
    min_nodes: int
    max_nodes: int
    launch_template: str | None = None
    """EKS: the launch template whose new version replaces the nodes."""

    @property
    def cloud(self) -> str:
        return {GKE_POOL: "gke", EKS_GROUP: "eks", OKE_POOL: "oke"}[self.type]


def _int(value: Any, default: int = 0) -> int:
    return int(value) if value is not None else default


def _oke_taints(user_data: str | None) -> tuple[Taint, ...]:
    """OKE has no taint field: the cloud-init passes `--register-with-taints` to the kubelet."""
    if not user_data:
        return ()
    script = base64.b64decode(user_data).decode()
    found = re.search(r"--register-with-taints=(\S+)", script)
    if found is None:
        return ()
    taints = []
    for item in found.group(1).strip("'\"").split(","):
        key_value, _, effect = item.rpartition(":")
        key, _, value = key_value.partition("=")
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def _gke_labels(name: str, config: Mapping[str, Any]) -> dict[str, str]:
    """Labels GKE puts on a node of the pool itself (its GPU, partition and sharing)."""
    labels = {"cloud.google.com/gke-nodepool": name}
    for accelerator in config.get("guestAccelerators") or []:
        labels["cloud.google.com/gke-accelerator"] = str(accelerator.get("type"))
        if accelerator.get("gpuPartitionSize"):
            labels["cloud.google.com/gke-gpu-partition-size"] = str(accelerator["gpuPartitionSize"])
        sharing = accelerator.get("gpuSharingConfig") or {}
        if sharing:
            labels["cloud.google.com/gke-gpu-sharing-strategy"] = (
                str(sharing.get("gpuSharingStrategy", "")).lower().replace("_", "-")
            )
            labels["cloud.google.com/gke-max-shared-clients-per-gpu"] = str(
                sharing.get("maxSharedClientsPerGpu", "")
            )
    return labels


GKE_GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
"""GKE taints every node of a GPU pool so (GKE docs, "GPUs": node taints)."""
GKE_ARM_TAINT = Taint(ARCH_LABEL, Arch.ARM64.value, "NoSchedule")
"""GKE taints every Arm node so (GKE "Prepare an Arm workload for deployment")."""


def pool_shape(resource: Resource) -> PoolShape:
    inputs = resource.inputs
    if resource.type == GKE_POOL:
        config = inputs.get("nodeConfig") or {}
        zones = tuple(inputs.get("nodeLocations") or (inputs.get("location", ""),))
        autoscaling = inputs.get("autoscaling") or {}
        per_zone = _int(inputs.get("nodeCount"), _int(inputs.get("initialNodeCount")))
        if autoscaling:
            low = _int(
                autoscaling.get("totalMinNodeCount"),
                _int(autoscaling.get("minNodeCount")) * len(zones),
            )
            high = _int(
                autoscaling.get("totalMaxNodeCount"),
                _int(autoscaling.get("maxNodeCount")) * len(zones),
            )
        else:
            low = high = per_zone * len(zones)
        name = str(inputs.get("name", resource.name))
        taints = [Taint.of(t) for t in config.get("taints") or []]
        if config.get("guestAccelerators") and GKE_GPU_TAINT not in taints:
            taints.append(GKE_GPU_TAINT)
        machine = known_machine(Cloud.GKE, str(config.get("machineType", "")))
        if machine is not None and machine.arch is Arch.ARM64:
            taints.append(GKE_ARM_TAINT)
        return PoolShape(
            resource.type, name, {**_gke_labels(name, config), **(config.get("labels") or {})},
            tuple(taints), zones, max(per_zone * len(zones), low), low, high,
        )  # fmt: skip
    if resource.type == EKS_GROUP:
        scaling = inputs.get("scalingConfig") or {}
        template = (inputs.get("launchTemplate") or {}).get("id")
        name = str(inputs.get("nodeGroupName", resource.name))
        types = inputs.get("instanceTypes") or [""]
        labels = {
            "eks.amazonaws.com/nodegroup": name,
            "node.kubernetes.io/instance-type": str(types[0]),
        }
        return PoolShape(
            resource.type, name, {**labels, **(inputs.get("labels") or {})},
            tuple(Taint.of(t) for t in inputs.get("taints") or []),
            tuple(inputs.get("subnetIds") or ()), _int(scaling.get("desiredSize")),
            _int(scaling.get("minSize")), _int(scaling.get("maxSize")),
            str(template).removesuffix("-id") if template else None,
        )  # fmt: skip
    if resource.type == OKE_POOL:
        details = inputs.get("nodeConfigDetails") or {}
        size = _int(details.get("size"))
        labels = {"node.kubernetes.io/instance-type": str(inputs.get("nodeShape", ""))}
        for label in inputs.get("initialNodeLabels") or []:
            labels[str(label["key"])] = str(label["value"])
        return PoolShape(
            resource.type, str(inputs.get("name", resource.name)), labels,
            _oke_taints((inputs.get("nodeMetadata") or {}).get("user_data")),
            tuple(p.get("availabilityDomain", "") for p in details.get("placementConfigs") or []),
            size, size, size,
        )  # fmt: skip
    raise ValueError(f"not a GPU pool resource: {resource.type}")
