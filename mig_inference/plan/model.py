"""The stack plan's types: what every pool offers and which service lands where."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from msgspec import Struct, field

from mig_inference.clouds import UNKNOWN_NODE_SIZE, Cloud, MachineShape
from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout
from mig_inference.gpus.migparted import config_entries
from mig_inference.names.labels import STARTUP_TAINT
from mig_inference.spec import (
    MigManager,
    PoolSpec,
    ProfilingSpec,
    Rollout,
    ServiceSpec,
)

if TYPE_CHECKING:  # the planner is imported when a pool is packed, not to read a plan
    from mig_inference.solving.packing import PackPlan

WHOLE_GPU = "gpu"
"""The profile name services use for a whole GPU on a pool with MIG disabled."""
DEFAULT_PROFILING_CONCURRENCY = 16
"""Requests a profiling run keeps in flight when neither it nor the engine says."""


def part_name(service: str, profile: str) -> str:
    """The Deployment serving `service` on `profile`: `chat-1g-10gb`."""
    return f"{service}-{profile.replace('.', '-').replace('+', '-')}"


class Offer(Struct, frozen=True):
    """One kind of device a pool's nodes advertise."""

    profile: str
    """Profile name, or `gpu` for a whole GPU."""
    resource: str
    """Extended resource a pod requests, e.g. `nvidia.com/mig-1g.10gb` or `nvidia.com/gpu`."""
    memory_mib: int
    """Usable memory of one device (a slice or a whole GPU), whoever shares it."""
    compute: int
    per_node: int
    """Devices a node advertises: physical devices x `shared_by`."""
    shared_by: int = 1
    """Pods one device is shared by (time-slicing or MPS)."""

    @property
    def memory_per_replica_mib(self) -> int:
        """What one pod may count on: the device's memory divided among its sharers."""
        return self.memory_mib // self.shared_by


class PoolPlan(Struct, frozen=True):
    """The cloud-neutral description of one pool that the operator and services consume."""

    name: str
    cloud: Cloud
    gpu: GpuModel
    machine: MachineShape | None
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    mig_manager: MigManager
    config_name: str
    """Value of the `nvidia.com/mig.config` label (operator mode)."""
    per_gpu_layouts: tuple[Layout | None, ...]
    """Layout of each GPU index on a node (None: MIG disabled)."""
    builtin_config: bool
    """NVIDIA ships this config; no custom mig-parted ConfigMap entry is needed."""
    offers: tuple[Offer, ...]
    node_labels: Mapping[str, str]
    """Labels every node of the pool carries (set by the pool)."""
    node_selector: Mapping[str, str]
    """Labels a pod selects to land on this pool."""
    taints: tuple[tuple[str, str, str], ...]
    """(key, value, effect) in Kubernetes spelling."""
    tolerations: tuple[Mapping[str, str], ...]
    """Tolerations pods need on this pool, Kubernetes spelling (includes `nvidia.com/gpu`)."""
    max_pods: int
    max_pods_required: int
    max_pods_breakdown: str
    partition_size: str | None
    """GKE native MIG: the `gpu_partition_size`."""
    accelerator: str | None
    """GKE accelerator type."""
    spec: PoolSpec
    zones: tuple[str, ...] = ()
    """Zones (GKE) or availability domains (OKE) the nodes spread over; () for the cluster's."""
    nodes_per_zone: int = 0
    """GKE: the fixed count, or the autoscaled minimum, per zone (GKE counts nodes per zone)."""
    rollout: Rollout = Rollout.BLUE_GREEN
    """How a layout change reaches running nodes."""
    max_unavailable: int = 1
    """In-place re-partitioning: nodes taken out at once."""
    replacement_inputs: Mapping[str, str] = field(default_factory=dict)
    """Stack keys whose change needs new nodes (and so a new generation), with their values."""
    generation: str | None = None
    """Hash of `replacement_inputs`; part of the physical pool name (None: existing nodes)."""
    legacy_inputs: Mapping[str, str] = field(default_factory=dict)
    """Keys that need new nodes when they change but are left out of the hash while they hold
    the value pools had before the key existed (so those pools keep their generation), with that
    value: what a change is from."""
    pack_plan: PackPlan | None = None
    boot_disk: str | None = None
    """GKE: the boot disk type the machine boots from (per-machine facts); None elsewhere."""
    dynamic_mig: bool = False
    """A DRA pool under the driver's DynamicMIG (`dra.dynamicMig`)."""
    boot_mig_gpus: tuple[int, ...] = ()
    """The GPUs a node's user data switches MIG mode on for before the kubelet starts (EKS,
    OKE; `plan.pools.boot_mig_gpus`)."""
    """The planner's answer for `mig: auto` pools."""

    @property
    def physical_name(self) -> str:
        """The cloud's name of this generation of the pool."""
        return f"{self.name}-{self.generation}" if self.generation else self.name

    @property
    def autoscaled(self) -> bool:
        return self.min_nodes != self.max_nodes

    @property
    def startup_taint(self) -> tuple[str, str, str] | None:
        """The Cluster Autoscaler's startup taint its new nodes carry until they advertise the
        planned slices: autoscaled pools whose layout the MIG manager applies (a node is Ready
        minutes before that, and would pass for one without room for the pending pods)."""
        if self.autoscaled and self.mig_manager_applies and self.mig_enabled:
            return STARTUP_TAINT
        return None

    @property
    def cloud_taints(self) -> tuple[tuple[str, str, str], ...]:
        """The taints the cloud puts on a new node: the stack's, and the startup taint."""
        return self.taints + ((self.startup_taint,) if self.startup_taint else ())

    @property
    def mig_enabled(self) -> bool:
        return any(layout is not None for layout in self.per_gpu_layouts)

    @property
    def operator_managed(self) -> bool:
        return self.mig_manager is MigManager.OPERATOR

    @property
    def dra(self) -> bool:
        """NVIDIA's DRA driver, not a device plugin, hands the pool's devices to pods."""
        return self.spec.dra

    @property
    def mig_manager_applies(self) -> bool:
        """The GPU Operator's MIG manager applies the pool's layout (not on GKE-native pools,
        GPUs without MIG, or DynamicMIG pools, whose driver creates slices per claim)."""
        return self.operator_managed and self.gpu.mig_capable and not self.dynamic_mig

    def capacity_per_node(self) -> dict[str, int]:
        return {offer.resource: offer.per_node for offer in self.offers}

    def capacity(self) -> dict[str, int]:
        """Devices per resource across the pool at its largest size."""
        return {offer.resource: offer.per_node * self.max_nodes for offer in self.offers}

    def offer(self, profile: str) -> Offer | None:
        return next((o for o in self.offers if o.profile == profile), None)

    def mig_parted_entries(self) -> list[dict[str, object]]:
        return config_entries(self.gpu, list(self.per_gpu_layouts))

    @property
    def node_vcpus_and_gib(self) -> tuple[int, int]:
        if self.machine and self.machine.vcpus:
            return self.machine.vcpus, self.machine.memory_gib
        return UNKNOWN_NODE_SIZE


class EngineSizing(Struct, frozen=True):
    max_model_len: int | None
    max_num_seqs: int | None
    kv_cache_tokens: int | None


class ServicePlan(Struct, frozen=True):
    name: str
    spec: ServiceSpec
    pool: PoolPlan
    offer: Offer
    replicas: int
    sizing: EngineSizing
    cpu_millicores: int
    memory_mib: int
    shm_mib: int
    memory_utilization: float = 0.9
    """The engine's share of the device's memory (`--gpu-memory-utilization`)."""
    group: str | None = None
    """The service this plan is one profile of (services sized by demand: one Deployment per
    profile, behind one Service named after the service)."""
    leads_group: bool = True
    """This plan creates the group's Service (the first profile of the group)."""

    @property
    def service_name(self) -> str:
        """The Kubernetes Service clients call."""
        return self.group or self.name

    @property
    def profile(self) -> str:
        return self.offer.profile

    @property
    def disruption_budget(self) -> int:
        """Replicas a voluntary disruption (a drain, an eviction, a cloud's node upgrade) may take
        at once: one, on every pool. The re-partitioning Job of an in-place pool, which must evict
        every replica of a node, relaxes its pool's budgets only while it runs and restores them
        on every way out (`kube/scripts/repartition.sh`)."""
        return 1

    @property
    def resource(self) -> str:
        return self.offer.resource

    @property
    def node_selector(self) -> Mapping[str, str]:
        return self.pool.node_selector

    @property
    def endpoint(self) -> str:
        return (
            f"http://{self.service_name}.{self.spec.namespace}.svc.cluster.local:{self.spec.port}"
        )


class ProfilingRun(Struct, frozen=True):
    """One Job: the service's engine on one slice of `profile`, driven by vLLM's benchmark."""

    service: str
    profile: str
    engine: ServicePlan
    """The engine as it would serve on that slice (one replica, sized for the slice)."""
    settings: ProfilingSpec

    @property
    def name(self) -> str:
        return part_name(f"{self.service}-profile", self.profile)

    @property
    def max_concurrency(self) -> int:
        return (
            self.settings.max_concurrency
            or self.engine.sizing.max_num_seqs
            or DEFAULT_PROFILING_CONCURRENCY
        )
