"""Cluster autoscaling of GPU pools: what each cloud's autoscaler can know about a pool, and
which replicas wait for it.

An autoscaler grows a pool for a pending pod only if the node it imagines offers what the pod
asks for. GKE's and OKE's build that node from the machine shape (whole GPUs as `nvidia.com/gpu`;
GKE also knows its own partitions), never from the GPU Operator's `nvidia.com/mig-*`, so those
pools cannot grow from zero there. On EKS the Cluster Autoscaler reads the node-template tags
the project puts on the node group's Auto Scaling group.
"""

from __future__ import annotations

from collections import defaultdict

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError, report
from mig_inference.plan.model import PoolPlan, ServicePlan
from mig_inference.spec import formats

NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def check_scale_from_zero(pool: PoolPlan, path: str) -> None:
    """Refuse `nodes.min: 0` where the cloud's autoscaler could never grow the pool, and
    autoscaled DRA pools."""
    if pool.dra and pool.autoscaled:
        raise MigError(
            f"{{min: {pool.min_nodes}, max: {pool.max_nodes}}} on a DRA pool: a pending pod "
            "waits for a ResourceClaim, not for an extended resource, and the autoscalers "
            "decide from a node's ResourceSlices, which a new node publishes only once the "
            "driver runs on it; this project does not model that yet: give a fixed count",
            f"{path}.nodes",
        )
    mig_resources = pool.mig_manager_applies and pool.mig_enabled
    if pool.min_nodes or not pool.max_nodes or not mig_resources:
        return
    if pool.cloud in (Cloud.GKE, Cloud.OKE):
        cloud = "GKE" if pool.cloud is Cloud.GKE else "OKE"
        ways = (
            "migManager: gke (GKE's own partitions, which its autoscaler knows)"
            if pool.cloud is Cloud.GKE
            else "a pool that keeps a node"
        )
        raise MigError(
            f"0 cannot grow: {cloud}'s autoscaler models a new node from its machine shape and "
            "does not know the nvidia.com/mig-* resources the GPU Operator advertises, so pending "
            f"MIG pods never trigger a scale-up from zero; keep nodes.min >= 1, or use {ways}",
            f"{path}.nodes.min",
            value=0,
        )


def check_node_template_tags(pool: PoolPlan, path: str, problems: list[MigError] | None) -> None:
    """EKS: the node-template tags of an autoscaled pool fit its Auto Scaling group, beside the
    tags EKS puts there: at most 50 in all. (Each key fits EC2 Auto Scaling's 128 characters:
    the spec holds node group label and taint keys to EKS's 63, and the longest prefix is 46.)"""
    if pool.cloud is not Cloud.EKS or not pool.autoscaled:
        return
    count = len(node_template_tags(pool)) + formats.EKS_AUTOSCALING_GROUP_TAGS
    if count > formats.AUTOSCALING_TAGS_MAX:
        report(problems, MigError(
            f"an autoscaled pool's Auto Scaling group carries a node-template tag per node "
            f"label, taint and MIG resource, and EKS's own {formats.EKS_AUTOSCALING_GROUP_TAGS}: "
            f"{count} here, and EC2 Auto Scaling takes at most {formats.AUTOSCALING_TAGS_MAX}; "
            "give fewer labels",
            f"{path}.labels",
        ))  # fmt: skip


def node_template_tags(pool: PoolPlan) -> dict[str, str]:
    """EKS Auto Scaling group tags telling the Cluster Autoscaler what a new node of the pool
    will offer (MIG resources per node, labels, taints), so it can grow the pool from zero."""
    tags = {
        f"{NODE_TEMPLATE}/resources/{offer.resource}": str(offer.per_node) for offer in pool.offers
    }
    tags |= {f"{NODE_TEMPLATE}/label/{key}": value for key, value in pool.node_labels.items()}
    tags |= {
        f"{NODE_TEMPLATE}/taint/{key}": f"{value}:{effect}" for key, value, effect in pool.taints
    }
    return tags


def waiting_for_scale_up(services: list[ServicePlan]) -> list[str]:
    """Where replicas do not all fit their pool's minimum size, once per pool and MIG resource,
    naming the services sharing it: the rest wait for the autoscaler (fixed replicas only; an
    HPA's maximum is capacity to grow into)."""
    sharing: dict[tuple[str, str], list[ServicePlan]] = defaultdict(list)
    for service in services:
        if service.pool.autoscaled:
            sharing[(service.pool.name, service.resource)].append(service)
    messages = []
    for (_pool, resource), group in sharing.items():
        pool = group[0].pool
        at_min = pool.min_nodes * pool.capacity_per_node()[resource]
        wanted = sum(service.replicas for service in group)
        if wanted > at_min:
            names = ", ".join(service.name for service in group)
            messages.append(
                f"service{'s' if len(group) > 1 else ''} {names}: {wanted - at_min} of the "
                f"{wanted} replicas on {resource} wait for pool {pool.name} to grow (at its "
                f"minimum of {pool.min_nodes} node(s) it offers {at_min})"
            )
    return messages
