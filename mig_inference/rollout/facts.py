"""What the simulator takes from the plans of both versions: per pool, GPUs per node and the
devices a node advertises with each layout either version gives it, keyed by the node labels that
decide them (so each version's layouts, device-plugin configs and GKE partitions stay apart)."""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct

from mig_inference.kube.operator_values import mig_parted_configs
from mig_inference.names.labels import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    GKE_PARTITION_LABEL,
    GKE_SHARED_CLIENTS_LABEL,
    MIG_CONFIG_LABEL,
)
from mig_inference.plan import PoolPlan, StackPlan
from mig_inference.plan.model_cache import fill_job_name
from mig_inference.rollout.mig_manager import NodeLayout, devices_of

WHOLE_GPU = "nvidia.com/gpu"
DEVICE_LABELS = (
    MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL, GKE_PARTITION_LABEL, GKE_SHARED_CLIENTS_LABEL,
)  # fmt: skip
"""The node labels that decide what a node advertises: the MIG config the MIG manager applies,
the device plugin's sharing config, GKE's partition size and shared clients per GPU."""
DeviceKey = tuple[str, ...]


def device_key(labels: Mapping[str, str], config: str | None = None) -> DeviceKey:
    """A node's device-deciding labels (`config`: the MIG config its GPUs have, when known)."""
    values = dict(labels)
    if config is not None:
        values[MIG_CONFIG_LABEL] = config
    return tuple(values.get(key, "") for key in DEVICE_LABELS)


class PoolFacts(Struct, frozen=True):
    """What the plans say about one pool: its GPUs per node and what a node offers per layout."""

    gpus_per_node: int
    devices: Mapping[DeviceKey, Mapping[str, int]]
    """Per device-deciding labels (`device_key`) of either version's nodes, what a node
    advertises."""
    layouts: Mapping[str, NodeLayout]
    """Per config name, the MIG instances of each GPU of a node (None: MIG disabled)."""

    def layout_of(self, config: str) -> NodeLayout | None:
        """The GPUs' layout a config gives a node (None: a config this pool never has)."""
        if config in self.layouts:
            return self.layouts[config]
        if config == "all-disabled":
            return (None,) * self.gpus_per_node
        return None

    def config_of(self, layout: NodeLayout) -> str | None:
        """The config whose layout the GPUs have."""
        if layout == (None,) * self.gpus_per_node:
            return "all-disabled"
        return next((c for c, known in self.layouts.items() if known == layout), None)

    def devices_with(self, config: str, labels: Mapping[str, str]) -> dict[str, int]:
        """What a node with these labels advertises with `config` applied (empty: no MIG
        manager): the plan's count for a version's nodes, else the layout's instances
        unshared, whole GPUs with MIG disabled."""
        key = device_key(labels, config)
        if key in self.devices:
            return dict(self.devices[key])
        if config and config in self.layouts:
            return devices_of(self.layouts[config])
        if config in ("all-disabled", ""):
            return {WHOLE_GPU: self.gpus_per_node} if self.gpus_per_node else {}
        return {}


def pool_facts(*plans: StackPlan) -> dict[str, PoolFacts]:
    devices: dict[str, dict[DeviceKey, dict[str, int]]] = {}
    layouts: dict[str, dict[str, NodeLayout]] = {}
    gpus: dict[str, int] = {}
    for plan in plans:
        for pool in plan.pools:
            config = pool.node_labels.get(MIG_CONFIG_LABEL, "")
            # GKE puts its partition and sharing labels on the node; the selector names them.
            labels = {**pool.node_labels, **pool.node_selector}
            devices.setdefault(pool.name, {})[device_key(labels)] = pool.capacity_per_node()
            layouts.setdefault(pool.name, {})[config] = _node_layout(pool)
            gpus[pool.name] = pool.gpus_per_node
    return {name: PoolFacts(gpus[name], devices[name], layouts[name]) for name in devices}


def _node_layout(pool: PoolPlan) -> NodeLayout:
    return tuple(
        None if layout is None else tuple(p for p, n in layout.counts for _ in range(n))
        for layout in pool.per_gpu_layouts
    )


def config_names(plan: StackPlan) -> frozenset[str]:
    """The configs the MIG manager finds in this version's mig-parted config."""
    return frozenset(mig_parted_configs(plan))


class LoadFacts(Struct, frozen=True):
    """How long the plans estimate replicas take to start and populate Jobs to fill the model
    cache (`mig_inference.plan.startup`): what the simulator waits instead of a flat guess."""

    start_seconds: Mapping[tuple[str, str], float]
    """(namespace, Deployment) -> one replica starting alone until Ready."""
    job_seconds: Mapping[str, float]
    """Populate Job name -> its download (and upload) time."""
    bytes_per_start: Mapping[tuple[str, str], int]
    """(namespace, Deployment) -> bytes one replica start downloads from the hub (0 cached)."""


def load_facts(*plans: StackPlan) -> LoadFacts:
    """The estimates of every version (the later one wins for a Deployment in both)."""
    starts: dict[tuple[str, str], float] = {}
    jobs: dict[str, float] = {}
    hub: dict[tuple[str, str], int] = {}
    for plan in plans:
        for service in plan.services:
            load = plan.load[service.name]
            key = (service.spec.namespace, service.name)
            starts[key] = load.replica_seconds
            hub[key] = load.hub_bytes_per_start
            cache = plan.model_cache
            model = cache.model_of(service.name) if cache is not None else None
            if cache is not None and model is not None:
                jobs[fill_job_name(cache, model)] = load.populate_seconds
    return LoadFacts(starts, jobs, hub)
