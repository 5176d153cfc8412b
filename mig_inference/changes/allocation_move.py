"""A pool of an existing cluster moving between the device plugin and DRA, when its replicas
cannot follow the nodes.

An existing pool has no generation: its nodes stay, and the re-partitioning Job switches them one
by one, before the Deployments roll (pools come before services). That serves the replicas only
when their pods ask for the same thing on both sides: with the extended-resource bridge
(`dra.extendedResources`, Kubernetes 1.36+) a pod's `nvidia.com/mig-<profile>` request lands on
a node whichever plugin offers the slice. Without it the DRA side's pods claim their slice
through a ResourceClaimTemplate: each switched node takes its replicas out of service until
their Deployments roll after the last node (the simulation shows half of every service down for
hours on two nodes). With DynamicMIG no Job runs at all. `diff` and `plan --deployed`, which
know the deployed stack, refuse such a move before simulating anything, with the ways forward
that work on an existing cluster (the clouds bring a new generation instead:
`plan.pools.generation`). The program cannot read what it deployed; a `pulumi up` run without
them is refused by the re-partitioning Job itself, before it touches a node
(`mig_inference/kube/repartition.py`, `SWITCH_KEEPS_REQUESTS`).
"""

from __future__ import annotations

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError
from mig_inference.plan.pools.generation import allocation_moves_in_place
from mig_inference.plan.stack_plan import StackPlan
from mig_inference.spec import Allocation, PoolSpec, StackSpec
from mig_inference.spec.dra import EXTENDED_RESOURCE_MINOR
from mig_inference.spec.stack import key_path


def allocation_move_refusals(deployed: StackPlan, current: StackPlan) -> list[MigError]:
    """One error per pool of an existing cluster whose `allocation` changes from `deployed` to
    `current` while services run on it and their replicas cannot follow the nodes."""
    if current.spec.cloud is not Cloud.EXISTING:
        return []
    before = {pool.name: pool for pool in deployed.pools}
    refusals = []
    for index, pool in enumerate(current.spec.pools):
        old = before.get(pool.name)
        if old is None or old.spec.allocation is pool.allocation:
            continue
        # The DRA side decides: its pods keep the extended-resource requests only with the
        # bridge, and only its MIG manager lets the Job run.
        dra_spec, dra_pool = (current.spec, pool) if pool.dra else (deployed.spec, old.spec)
        if allocation_moves_in_place(dra_spec, dra_pool):
            continue
        serving = [
            f"{s.name} ({s.replicas} replicas)"
            for s in deployed.services
            if s.pool.name == pool.name
        ]
        if not serving:
            continue
        gpus = len(old.spec.node_names) * old.gpus_per_node
        refusals.append(
            MigError(
                _message(dra_spec, pool, ", ".join(serving), f"{gpus} {old.gpu.name}"),
                f"{key_path('pools')}[{index}].allocation",
                value=pool.allocation.value,
                allowed=[old.spec.allocation.value],
            )
        )
    return refusals


def _message(dra_spec: StackSpec, pool: PoolSpec, serving: str, gpus: str) -> str:
    to_dra = pool.dra
    old, new = (
        (Allocation.DEVICE_PLUGIN, Allocation.DRA)
        if to_dra
        else (Allocation.DRA, Allocation.DEVICE_PLUGIN)
    )
    dynamic = dra_spec.dra is not None and dra_spec.dra.dynamic_mig
    if dynamic:
        why = (
            "DynamicMIG nodes get no MIG manager and no re-partitioning Job, so every node of "
            "the pool would switch at once"
        )
    else:
        claims = "their pods claim" if to_dra else "their pods claimed"
        why = (
            f"without the extended-resource bridge ({key_path('dra')}.extendedResources) "
            f"{claims} their slice through a ResourceClaimTemplate, so their Deployments change, "
            "and they roll only after the re-partitioning Job has switched every node: the "
            "replicas of each switched node have nowhere to run until then"
        )
    other = f"another pool with allocation: {new.value}"
    ways = [] if dynamic else [bridge_way(to_dra)]
    ways.append(
        f"or give new nodes holding {gpus} GPUs (as many as this pool has) to {other}, move "
        "the services to it (services[].pool: they roll one replica at a time) and remove "
        "this pool in a later `pulumi up`"
    )
    ways.append(f"or keep allocation: {old.value}")
    return (
        f"pool {pool.name} cannot move from {old.value} to {new.value} on its nodes while "
        f"services run on it ({serving}): {why}. Ways forward: {'; '.join(ways)}"
    )


def bridge_way(to_dra: bool) -> str:
    """The way forward the extended-resource bridge opens for a pool that re-partitions in
    place (every `existing` pool): the Deployments keep (or first take) `nvidia.com/mig-*`
    requests, so the re-partitioning Job moves the nodes one by one."""
    bridge = (
        f"on Kubernetes 1.{EXTENDED_RESOURCE_MINOR} or later, turn the bridge on "
        f"({key_path('dra')}: kubernetesVersion 1.{EXTENDED_RESOURCE_MINOR}+, "
        "extendedResources: true)"
    )
    if to_dra:
        return (
            f"{bridge} with this change: the Deployments keep their nvidia.com/mig-* requests "
            "and the pool moves in place, node by node"
        )
    return (
        f"{bridge} in one `pulumi up` with allocation: dra kept (the Deployments roll onto "
        "nvidia.com/mig-* requests, one replica at a time), then move the pool back: it moves "
        "in place, node by node"
    )
