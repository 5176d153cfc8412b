"""What needs new nodes when it changes, per cloud, and the short generation it hashes to.

A cloud pool's physical name is `<pool>-<generation>`: when any of these inputs changes, the new
name makes Pulumi bring up the new pool next to the old one (create before delete) instead of
deleting the running pool first, and services follow the new generation's label. Inputs the
cloud updates in place on running nodes are left out, so they never cost a new pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from mig_inference.clouds import Cloud
from mig_inference.clouds.capacity import Capacity
from mig_inference.names.digest import short_hash
from mig_inference.plan.sharing import sharing_text
from mig_inference.spec import MigManager, PoolSpec, Rollout, StackSpec

GENERATION_LENGTH = 6
LEGACY_HOP_LIMIT = 2
"""The IMDS hop limit EKS GPU pools had before `imdsHopLimit` (now 1 by default)."""

# Sources (README "Changing a stack"): GKE applies label and taint changes to running nodes and
# resizes in place, while accelerators, spot, max pods (ForceNew) and machine type or disk (a
# node-recreating upgrade) need new nodes. EKS updates labels, taints and scaling in place;
# instance types, capacity type, disk and subnets force a new node group, and max pods lives in
# the launch template's user data, read only when a node boots. OKE applies node pool changes
# (labels, image, user data with the taints, max pods, placement: availability domains and
# subnets) only to nodes created later.
# A NoExecute taint key new on running nodes would evict the replicas already there before their
# Deployment tolerates it (pools come before services), so a change of those keys brings new nodes
# on GKE and EKS too; replicas tolerate any value and effect of their pool's keys (plan.pools).
# Capacity: GKE's reservation affinity and flex-start are fixed when a pool is created
# (ForceNew, like spot); EKS's capacity type forces a new node group, and a reservation or
# Capacity Block lives in the launch template, read only when a node boots; OKE applies a
# placement's capacity reservation only to nodes it creates later. So a capacity change needs
# new nodes everywhere. `spot` keeps carrying on-demand <-> spot, and `capacity` joins the
# inputs only for the other choices, so pools deployed before it existed keep their generation.
# GKE's node locations: a zone that leaves the pool takes its nodes with it, and nodes are counted
# per zone, so a change of zones replaces nodes either way: a new generation does it before the
# old nodes go, and the gate waits for them.
_COMMON = ("gpu", "machineType", "gpusPerNode", "maxPods", "migManager", "spot", "diskSizeGb")
_PER_CLOUD: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: (*_COMMON, "zones", "noExecuteTaintKeys"),
    Cloud.EKS: (*_COMMON, "cluster.subnetIds", "noExecuteTaintKeys"),
    Cloud.OKE: (
        *_COMMON,
        "imageId",
        "labels",
        "taints",
        "zones",
        "sharing",  # the device plugin's config label, like every label, reaches new nodes only
        "cluster.subnetIds",
        "cluster.podSubnetIds",
        "cluster.availabilityDomains",
    ),
    Cloud.EXISTING: (),
}


def _text(value: object) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def replacement_inputs(
    spec: StackSpec,
    pool: PoolSpec,
    gpus_per_node: int,
    max_pods: int,
    config_name: str,
    default_boot_disk: str | None = None,
    boot_mig_gpus: tuple[int, ...] = (),
) -> dict[str, str]:
    """Stack keys of `pool` whose change needs new nodes on its cloud, with their values.

    The layout (`mig`) is one of them unless the pool re-partitions in place; GKE's native MIG
    always partitions at node creation. `default_boot_disk`: the disk GKE pools of the machine
    boot from when `bootDiskType` is not given (writing it changes nothing the cloud gets).
    `boot_mig_gpus`: the GPUs a node's user data switches MIG mode on for."""
    values: dict[str, object] = {
        "gpu": pool.gpu.name,
        "machineType": pool.machine_type,
        "gpusPerNode": gpus_per_node,
        "maxPods": max_pods,
        "migManager": pool.mig_manager.value,
        "spot": pool.spot,
        "diskSizeGb": pool.disk_size_gb,
        "imageId": pool.image_id,
        "labels": pool.labels,
        "taints": [f"{t.key}={t.value}:{t.effect}" for t in pool.taints],
        "zones": sorted(pool.zones),  # a set to the clouds: the order changes nothing
        "noExecuteTaintKeys": sorted({t.key for t in pool.taints if t.effect == "NoExecute"}),
        "sharing": sharing_text(pool.sharing),
        # Sets, not lists, to the clouds: the order they are given in changes nothing.
        "cluster.subnetIds": sorted(spec.cluster.get("subnetIds", ())),
        "cluster.podSubnetIds": sorted(spec.cluster.get("podSubnetIds", ())),
        "cluster.availabilityDomains": sorted(spec.cluster.get("availabilityDomains", ())),
    }
    keys = list(_PER_CLOUD[spec.cloud])
    if keys and pool.capacity not in (Capacity.ON_DEMAND, Capacity.SPOT):
        keys.append("capacity")
        values["capacity"] = f"{pool.capacity}:{pool.reservation or ''}"
    keys += _node_identity(spec, values)
    # Read when a node boots (GKE's disk type recreates nodes; EKS's user data is in the launch
    # template): only when given, so pools deployed before these keys keep their generation.
    if spec.cloud is Cloud.GKE and pool.boot_disk_type not in (None, default_boot_disk):
        keys.append("bootDiskType")
        values["bootDiskType"] = pool.boot_disk_type
    if spec.cloud is Cloud.EKS and pool.user_data is not None:
        keys.append("userData")
        values["userData"] = short_hash(pool.user_data, 12)
    if spec.cloud is Cloud.EKS and boot_mig_gpus:
        # The user data switches MIG mode on for these GPUs at boot (clouds/bootstrap.py): in
        # the launch template too, so a new value comes with new nodes, as `userData` does.
        keys.append("migModeAtBoot")
        values["migModeAtBoot"] = ",".join(str(gpu) for gpu in boot_mig_gpus)
    if keys and pool.dra and not allocation_moves_in_place(spec, pool):
        # A node moves from the device plugin to the DRA driver (or back) as it starts: the
        # replicas already there hold devices of the other kind. Only when given, so pools
        # deployed before the key existed keep their generation.
        keys.append("allocation")
        values["allocation"] = pool.allocation.value
    if spec.cloud is Cloud.GKE and pool.mig_manager is MigManager.GKE:
        keys.append("sharing")  # gpu_sharing_config is fixed when GKE creates the pool
    if keys and (pool.rollout is Rollout.BLUE_GREEN or pool.mig_manager is MigManager.GKE):
        keys.append("mig")
        values["mig"] = config_name
    return {key: _text(values[key]) for key in keys}


def allocation_moves_in_place(spec: StackSpec, pool: PoolSpec) -> bool:
    """`allocation` (device-plugin <-> dra) changes on the running nodes, one by one, through
    the re-partitioning Job: the pool changes in place, and with the extended-resource bridge
    (Kubernetes 1.36+, `dra.extendedResources`) the replicas keep their `nvidia.com/mig-*`
    requests, so a node's devices reach the same pods whichever plugin advertises them.
    DynamicMIG pools have no MIG manager, and so no Job."""
    dra = spec.dra
    return (
        pool.rollout is Rollout.IN_PLACE
        and pool.mig_manager is MigManager.OPERATOR
        and dra is not None
        and dra.extended_resources
        and not dra.dynamic_mig
    )


def legacy_inputs(spec: StackSpec, default_boot_disk: str | None = None) -> dict[str, str]:
    """The generation keys `replacement_inputs` leaves out because they hold what pools had
    before the key existed, with that value."""
    values: dict[str, object] = {}
    hashed = _node_identity(spec, values)
    legacy: dict[str, str] = {}
    if spec.cloud is Cloud.EKS and not hashed:
        legacy["cluster.imdsHopLimit"] = str(LEGACY_HOP_LIMIT)
    if spec.cloud is Cloud.GKE and not hashed:
        settings = spec.cluster
        legacy["cluster.nodeIdentity"] = (
            f"default,workloadIdentity={bool(settings.get('workloadIdentity', True))}"
        )
    if spec.cloud is Cloud.GKE and default_boot_disk is not None:
        legacy["bootDiskType"] = default_boot_disk
    return legacy


def _node_identity(spec: StackSpec, values: dict[str, object]) -> list[str]:
    """The nodes' identity, where changing it needs new nodes: GKE's node service account
    (ForceNew) and metadata server mode (a node-recreating update); EKS's IMDS hop limit, in
    the launch template. Only when it differs from what pools deployed before these keys
    existed had (the Compute Engine default account, GKE_METADATA only on created clusters, hop
    limit 2), so those keep their generation when the stack says so."""
    settings = spec.cluster
    if spec.cloud is Cloud.GKE:
        account = settings.get("nodeServiceAccount") or "dedicated"
        workload_identity = bool(settings.get("workloadIdentity", True))
        if account == "default" and workload_identity == settings.create:
            return []
        values["cluster.nodeIdentity"] = f"{account},workloadIdentity={workload_identity}"
        return ["cluster.nodeIdentity"]
    if spec.cloud is Cloud.EKS:
        hop_limit = settings.get("imdsHopLimit") or LEGACY_HOP_LIMIT
        if hop_limit == LEGACY_HOP_LIMIT:
            return []
        values["cluster.imdsHopLimit"] = hop_limit
        return ["cluster.imdsHopLimit"]
    return []


def generation_of(inputs: Mapping[str, str]) -> str | None:
    """A short, stable hash of the replacement inputs (None for pools of existing nodes)."""
    if not inputs:
        return None
    text = "\n".join(f"{key}={value}" for key, value in sorted(inputs.items()))
    return short_hash(text, GENERATION_LENGTH)
