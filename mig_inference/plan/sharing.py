"""Sharing a pool's devices between pods: time-slicing (the GPU Operator's device plugin, or
GKE) and MPS (GKE). A shared device is advertised `replicas` times; its memory is not divided
by time-slicing (no isolation), so the plan checks the replicas fit it together."""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec.structs import replace

from mig_inference.errors import MigError, shown
from mig_inference.names.digest import short_hash
from mig_inference.plan.model import WHOLE_GPU, Offer
from mig_inference.spec import AUTO, MigManager, PoolSpec, SharingSpec, SharingStrategy

GKE_TIME_SHARING = "https://cloud.google.com/kubernetes-engine/docs/how-to/timesharing-gpus"
GKE_MPS = "https://cloud.google.com/kubernetes-engine/docs/how-to/nvidia-mps-gpus"
SHARED_SUFFIX = ".shared"
"""What the device plugin appends to a resource's name with `renameByDefault`."""
DEFAULT_UTILIZATION = 0.9
"""vLLM's share of a device it has alone; shared by N, each replica takes this / N."""


def shared_offers(pool: PoolSpec, offers: Sequence[Offer], path: str) -> list[Offer]:
    """The pool's offers once its sharing is applied (unchanged without sharing)."""
    sharing = pool.sharing
    if sharing is None:
        return list(offers)
    where = f"{path}.sharing"
    strategy = sharing.strategy.value
    if pool.mig == AUTO:
        raise MigError(
            "the planner sizes `mig: auto` pools one replica per slice; give the pool's layout "
            "to share its devices",
            where,
        )
    if sharing.strategy is SharingStrategy.MPS and pool.mig_manager is MigManager.OPERATOR:
        raise MigError(
            "MPS is not available on GPU Operator pools here: the operator runs the device "
            "plugin with the `mixed` MIG strategy, under which NVIDIA's plugin refuses MPS (and "
            "MPS does not work on MIG devices); use timeSlicing, or GKE's MPS (migManager: gke)",
            f"{where}.{strategy}",
            allowed=[SharingStrategy.TIME_SLICING.value],
        )
    if (
        sharing.strategy is SharingStrategy.MPS
        and pool.mig_manager is MigManager.GKE
        and any(o.profile != WHOLE_GPU for o in offers)
    ):
        raise MigError(
            'GKE documents sharing MIG partitions by time-sharing only (GKE "Share GPUs with '
            f'multiple workloads using time-sharing", with multi-instance GPUs: {GKE_TIME_SHARING}'
            f"); its MPS page ({GKE_MPS}) documents MPS on whole GPUs, not on partitions. Use "
            "timeSlicing, or whole GPUs (leave mig out) for MPS",
            f"{where}.{strategy}",
            allowed=[SharingStrategy.TIME_SLICING.value],
        )
    if pool.mig_manager is MigManager.GKE and (sharing.rename or sharing.profiles):
        key = "rename" if sharing.rename else "profiles"
        raise MigError(
            "GKE shares every device of the pool and advertises it as nvidia.com/gpu; "
            f"{key} is for GPU Operator pools",
            f"{where}.{strategy}.{key}",
        )
    offered = [o.profile for o in offers]
    for index, profile in enumerate(sharing.profiles):
        if profile not in offered:
            raise MigError(
                f"{shown(profile)} is not a slice of this pool's layout; it offers "
                f"{', '.join(offered)}",
                f"{where}.{strategy}.profiles[{index}]",
                value=profile,
                allowed=offered,
            )
    chosen = set(sharing.profiles) or set(offered)
    return [
        replace(
            offer,
            resource=offer.resource + SHARED_SUFFIX if sharing.rename else offer.resource,
            per_node=offer.per_node * sharing.replicas,
            shared_by=sharing.replicas,
        )
        if offer.profile in chosen
        else offer
        for offer in offers
    ]


def utilization(offer: Offer, requested: float | None, path: str) -> float:
    """The engine's share of the device's memory: what the service asks, or the default; on a
    shared device the default divided among its replicas, and no more than that may be asked."""
    if offer.shared_by == 1:
        return requested if requested is not None else DEFAULT_UTILIZATION
    most = 1 / offer.shared_by
    if requested is not None:
        if requested > most:
            raise MigError(
                f"{requested:g} of a device shared by {offer.shared_by} replicas: each replica "
                f"may take at most {most:.2f} of its memory",
                f"{path}.gpuMemoryUtilization",
                value=requested,
            )
        return requested
    return math.floor(DEFAULT_UTILIZATION / offer.shared_by * 100) / 100


def sharing_text(sharing: SharingSpec | None) -> str:
    """Everything about a pool's sharing that changes what its nodes advertise."""
    if sharing is None:
        return "none"
    text = f"{sharing.strategy.value}x{sharing.replicas}"
    if sharing.rename:
        text += ",renamed"
    if sharing.profiles:
        text += ",only " + "+".join(sharing.profiles)
    return text


def device_plugin_config_key(pool: PoolSpec, offers: Sequence[Offer]) -> str:
    """The key of a pool's entry in the device plugin's config, changing with its content: the
    plugin reloads its config when a node's `nvidia.com/device-plugin.config` label changes, not
    when the ConfigMap does, so a new content must come with a new label value."""
    shared = sorted(f"{o.resource}x{o.shared_by}" for o in offers if o.shared_by > 1)
    text = f"{sharing_text(pool.sharing)}|{'|'.join(shared)}"
    return f"{pool.name}-{short_hash(text, 8)}"
