"""The stack plan: what every pool offers and which service lands where, decided offline.

`plan_stack(spec)` turns a validated StackSpec into pool descriptions (GPU model, layout per GPU,
capacity per MIG resource, node labels, tolerations, max pods) and service placements (profile,
resource, replicas, engine sizing), or raises MigError naming the key path. Pulumi components
consume these descriptions and decide nothing themselves.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mig.catalog import GpuModel, Profile
from mig.clouds import (
    DEFAULT_MAX_PODS,
    EKS_MANAGED_NODE_GROUP_MAX_PODS,
    GKE_ACCELERATORS,
    GKE_PARTITION_SIZES,
    GPU_OPERATOR_PODS_PER_NODE,
    MACHINES,
    MAX_PODS_RANGE,
    NODE_ALLOCATABLE_FRACTION,
    SYSTEM_PODS_PER_NODE,
    UNKNOWN_NODE_SIZE,
    Cloud,
    MachineShape,
)
from mig.errors import MigError
from mig.layout import Layout, place
from mig.migparted import config_entries, resolve_config
from mig.packing import PackPlan, Workload, pack
from mig.sizing import MIB, profiles_holding
from mig.spec import AUTO, FILL, NAMESPACE, Engine, MigManager, PoolSpec, ServiceSpec, StackSpec

POOL_LABEL = "mig-inference.io/pool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
GKE_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
GKE_NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
OPERATOR_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
"""`false` on a node keeps every GPU Operator operand off it (GKE-native MIG pools)."""
WHOLE_GPU = "gpu"
"""The profile name services use for a whole GPU on a pool with MIG disabled."""
MIN_CONTEXT = 512
"""Shortest max-model-len worth serving; a slice that holds less is refused."""


def _root(key: str) -> str:
    return f"{NAMESPACE}:{key}"


@dataclass(frozen=True)
class Offer:
    """One kind of device a pool's nodes advertise."""

    profile: str
    """Profile name, or `gpu` for a whole GPU."""
    resource: str
    """Extended resource a pod requests, e.g. `nvidia.com/mig-1g.10gb` or `nvidia.com/gpu`."""
    memory_mib: int
    compute: int
    per_node: int


@dataclass(frozen=True)
class PoolPlan:
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
    pack_plan: PackPlan | None = None
    """The planner's answer for `mig: auto` pools."""

    @property
    def mig_enabled(self) -> bool:
        return any(layout is not None for layout in self.per_gpu_layouts)

    @property
    def operator_managed(self) -> bool:
        return self.mig_manager is MigManager.OPERATOR

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


@dataclass(frozen=True)
class EngineSizing:
    max_model_len: int | None
    max_num_seqs: int | None
    kv_cache_tokens: int | None


@dataclass(frozen=True)
class ServicePlan:
    name: str
    spec: ServiceSpec
    pool: PoolPlan
    offer: Offer
    replicas: int
    sizing: EngineSizing
    cpu_millicores: int
    memory_mib: int
    shm_mib: int

    @property
    def profile(self) -> str:
        return self.offer.profile

    @property
    def resource(self) -> str:
        return self.offer.resource

    @property
    def node_selector(self) -> Mapping[str, str]:
        return self.pool.node_selector

    @property
    def endpoint(self) -> str:
        return f"http://{self.name}.{self.spec.namespace}.svc.cluster.local:{self.spec.port}"


@dataclass
class StackPlan:
    spec: StackSpec
    pools: list[PoolPlan]
    services: list[ServicePlan]
    warnings: list[str] = field(default_factory=list)

    def pool(self, name: str) -> PoolPlan:
        return next(p for p in self.pools if p.name == name)

    def custom_mig_configs(self) -> dict[str, list[dict[str, object]]]:
        """mig-parted configs the operator must be given (pools whose layout NVIDIA does not
        ship), keyed by the label value the pool's nodes carry."""
        configs: dict[str, list[dict[str, object]]] = {}
        for pool in self.pools:
            if pool.operator_managed and not pool.builtin_config:
                configs[pool.config_name] = pool.mig_parted_entries()
        return configs


# --- pools ---------------------------------------------------------------------------------


def _machine(spec: StackSpec, pool: PoolSpec, path: str) -> MachineShape | None:
    if spec.cloud is Cloud.EXISTING:
        return None
    known = MACHINES[spec.cloud]
    assert pool.machine_type is not None
    machine = known.get(pool.machine_type)
    if machine is None:
        if pool.gpus_per_node is None:
            raise MigError(
                f"unknown {spec.cloud.value} machine type {pool.machine_type!r}; known: "
                f"{', '.join(known)} (or set gpusPerNode for another type)",
                f"{path}.machineType",
            )
        accelerator = GKE_ACCELERATORS.get(pool.gpu.name) if spec.cloud is Cloud.GKE else None
        if spec.cloud is Cloud.GKE and accelerator is None:
            raise MigError(
                f"GKE has no accelerator type for {pool.gpu.name}; GKE offers: "
                f"{', '.join(GKE_ACCELERATORS)}",
                f"{path}.gpu",
            )
        return MachineShape(pool.machine_type, pool.gpu.name, pool.gpus_per_node, accelerator)
    if machine.gpu != pool.gpu.name:
        raise MigError(
            f"{pool.machine_type} carries {machine.gpu}, not {pool.gpu.name}",
            f"{path}.gpu",
        )
    if pool.gpus_per_node is not None and pool.gpus_per_node != machine.gpus:
        raise MigError(
            f"{pool.machine_type} has {machine.gpus} GPUs, not {pool.gpus_per_node}",
            f"{path}.gpusPerNode",
        )
    return machine


def _auto_workloads(spec: StackSpec, pool: PoolSpec, path: str) -> tuple[list[Workload], list[int]]:
    workloads: list[Workload] = []
    indexes: list[int] = []
    for index, service in enumerate(spec.services):
        target = service.pool or (spec.pools[0].name if len(spec.pools) == 1 else None)
        if target != pool.name:
            continue
        where = f"{_root('services')}[{index}]"
        if service.replicas == FILL:
            raise MigError(
                "`fill` needs a pool with a fixed layout, not mig: auto", f"{where}.replicas"
            )
        assert isinstance(service.replicas, int)
        if service.profile != AUTO:
            try:
                pool.gpu.profile(service.profile)
            except MigError as error:
                raise MigError(error.message, f"{where}.profile") from None
            workloads.append(Workload(service.name, service.replicas, profile=service.profile))
        else:
            workloads.append(Workload(service.name, service.replicas, memory_mib=service.need_mib))
        indexes.append(index)
    if not workloads:
        raise MigError(
            "mig: auto sizes the pool for the services that target it, and none does "
            "(set services[].pool)",
            f"{path}.mig",
        )
    return workloads, indexes


def _layouts(
    spec: StackSpec, pool: PoolSpec, gpus_per_node: int, path: str
) -> tuple[str, tuple[Layout | None, ...], bool, PackPlan | None]:
    if pool.mig == AUTO:
        if pool.mig_manager is MigManager.GKE:
            raise MigError("mig: auto needs migManager operator (GKE's native MIG is one profile)",
                           f"{path}.mig")  # fmt: skip
        workloads, indexes = _auto_workloads(spec, pool, path)
        try:
            planned = pack(
                pool.gpu, workloads, gpus_per_node=gpus_per_node, uniform_nodes=True,
                single_profile=True, baselines=False,
            )  # fmt: skip
        except MigError as error:
            where = error.path or ""
            if where.startswith("workloads["):
                number = int(where[len("workloads[") : where.index("]")])
                field_name = where.rsplit(".", 1)[-1] if "." in where else "profile"
                key = {"memory_gib": "memoryGiB"}.get(field_name, field_name)
                raise MigError(
                    error.message, f"{_root('services')}[{indexes[number]}].{key}"
                ) from None
            raise MigError(error.message, f"{path}.mig") from None
        per_gpu = tuple(planned.node_layouts()[0])
        return planned.node_config_names()[0], per_gpu, False, planned
    try:
        resolved = resolve_config(pool.gpu, pool.mig)
    except MigError as error:
        raise MigError(error.message, f"{path}.mig") from None
    return resolved.name, (resolved.layout,) * gpus_per_node, resolved.named, None


def _offers(
    gpu: GpuModel, layouts: Sequence[Layout | None], mig_manager: MigManager
) -> list[Offer]:
    counts: Counter[str] = Counter()
    whole = 0
    for layout in layouts:
        if layout is None:
            whole += 1
        else:
            counts.update(layout.as_dict())
    offers = []
    for profile in gpu.profiles:
        if counts[profile.name]:
            resource = GPU_RESOURCE if mig_manager is MigManager.GKE else profile.resource
            offers.append(
                Offer(
                    profile.name,
                    resource,
                    profile.memory_mib,
                    profile.compute,
                    counts[profile.name],
                )
            )
    if whole:
        full = gpu.full_profile
        offers.append(Offer(WHOLE_GPU, GPU_RESOURCE, full.memory_mib, full.compute, whole))
    return offers


def _max_pods(
    spec: StackSpec, pool: PoolSpec, machine: MachineShape | None, devices: int, path: str
) -> tuple[int, int, str]:
    cloud = spec.cloud
    operator_pods = GPU_OPERATOR_PODS_PER_NODE if pool.mig_manager is MigManager.OPERATOR else 0
    system = pool.system_pods if pool.system_pods is not None else SYSTEM_PODS_PER_NODE[cloud]
    required = devices + operator_pods + system
    breakdown = f"{devices} GPU devices + {operator_pods} GPU Operator pods + {system} system pods"
    low, high = MAX_PODS_RANGE[cloud]
    if cloud is Cloud.EKS and machine is not None and machine.default_max_pods:
        high = min(high, machine.default_max_pods)
    default = DEFAULT_MAX_PODS.get(cloud, high)
    if cloud is Cloud.EKS:
        default = min(default, high)
    effective = pool.max_pods if pool.max_pods is not None else default
    where = f"{path}.maxPods"
    if effective > high or effective < low:
        limit = f"{spec.cloud.value} allows {low}-{high}"
        if cloud is Cloud.EKS:
            limit += (
                f" ({machine.name if machine else 'this instance'}: min of its ENI-based default "
                f"and the {EKS_MANAGED_NODE_GROUP_MAX_PODS} managed node groups allow)"
            )
        raise MigError(f"{effective} is out of range; {limit}", where)
    if effective < required:
        source = "" if pool.max_pods is not None else f" (the {cloud.value} default)"
        raise MigError(
            f"{effective}{source} is below the {required} this pool needs per node ({breakdown})",
            where,
        )
    return effective, required, breakdown


def _tolerations(pool: PoolSpec) -> tuple[dict[str, str], ...]:
    tolerations: list[dict[str, str]] = []
    for taint in pool.taints:
        entry = {
            "key": taint.key,
            "operator": "Equal",
            "value": taint.value,
            "effect": taint.effect,
        }
        if not taint.value:
            entry = {"key": taint.key, "operator": "Exists", "effect": taint.effect}
        tolerations.append(entry)
    if not any(t["key"] == GPU_TAINT_KEY for t in tolerations):
        # GKE taints GPU nodes with nvidia.com/gpu; pods requesting nvidia.com/mig-* are not
        # tolerated for it automatically, so every GPU pod carries the toleration.
        tolerations.append({"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"})
    return tuple(tolerations)


def plan_pool(spec: StackSpec, index: int) -> PoolPlan:
    pool = spec.pools[index]
    path = f"{_root('pools')}[{index}]"
    machine = _machine(spec, pool, path)
    gpus_per_node = machine.gpus if machine else (pool.gpus_per_node or 0)
    if spec.cloud is Cloud.EXISTING and not gpus_per_node:
        raise MigError("is required for existing nodes: GPUs on each node", f"{path}.gpusPerNode")
    config_name, layouts, builtin, planned = _layouts(spec, pool, gpus_per_node, path)
    min_nodes, max_nodes = pool.nodes.min, pool.nodes.max
    if planned is not None:
        needed = planned.node_count
        if not pool.nodes_given:
            min_nodes = max_nodes = needed
        elif max_nodes < needed:
            raise MigError(
                f"the services on this pool need {needed} node(s) of {gpus_per_node} "
                f"{pool.gpu.name} with layout {config_name}; nodes allows at most {max_nodes}",
                f"{path}.nodes",
            )
    partition = None
    if pool.mig_manager is MigManager.GKE:
        partition = _gke_partition(pool, layouts, path)
    offers = _offers(pool.gpu, layouts, pool.mig_manager)
    devices = sum(o.per_node for o in offers)
    max_pods, required, breakdown = _max_pods(spec, pool, machine, devices, path)
    labels = dict(pool.labels)
    labels[POOL_LABEL] = pool.name
    if pool.mig_manager is MigManager.OPERATOR:
        labels[MIG_CONFIG_LABEL] = config_name
        if spec.cloud is Cloud.GKE:
            labels[GKE_NO_DEVICE_PLUGIN_LABEL] = "true"
    elif any(p.mig_manager is MigManager.OPERATOR for p in spec.pools):
        # GKE's device plugin serves this pool; keep the operator's operands (its device
        # plugin above all) off these nodes so the two never meet.
        if labels.get(OPERATOR_OPERANDS_LABEL, "false") != "false":
            raise MigError(
                f"{OPERATOR_OPERANDS_LABEL} must stay false on a GKE-native pool in a stack that "
                "also runs the GPU Operator",
                f"{path}.labels",
            )
        labels[OPERATOR_OPERANDS_LABEL] = "false"
    selector = {POOL_LABEL: pool.name}
    if partition:
        selector[GKE_PARTITION_LABEL] = partition
    return PoolPlan(
        name=pool.name,
        cloud=spec.cloud,
        gpu=pool.gpu,
        machine=machine,
        gpus_per_node=gpus_per_node,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        mig_manager=pool.mig_manager,
        config_name=config_name,
        per_gpu_layouts=layouts,
        builtin_config=builtin,
        offers=tuple(offers),
        node_labels=labels,
        node_selector=selector,
        taints=tuple((t.key, t.value, t.effect) for t in pool.taints),
        tolerations=_tolerations(pool),
        max_pods=max_pods,
        max_pods_required=required,
        max_pods_breakdown=breakdown,
        partition_size=partition,
        accelerator=machine.accelerator if machine else None,
        spec=pool,
        pack_plan=planned,
    )


def _gke_partition(pool: PoolSpec, layouts: Sequence[Layout | None], path: str) -> str:
    allowed = GKE_PARTITION_SIZES.get(pool.gpu.name, ())
    if not allowed:
        raise MigError(
            f"GKE's native MIG does not support {pool.gpu.name}; use migManager: operator",
            f"{path}.migManager",
        )
    layout = layouts[0]
    named = [f"all-{size}" for size in allowed]
    if layout is None or len(layout.counts) != 1:
        raise MigError(
            f"GKE's native MIG partitions every GPU into one profile; allowed for "
            f"{pool.gpu.name}: {', '.join(named)}",
            f"{path}.mig",
        )
    [(profile, count)] = layout.counts
    if profile not in allowed or count != pool.gpu.profile(profile).max_instances:
        raise MigError(
            f"GKE does not accept partition size {profile} on {pool.gpu.name}; allowed: "
            f"{', '.join(named)}",
            f"{path}.mig",
        )
    return profile


# --- services ------------------------------------------------------------------------------


def _candidate_pools(pools: Sequence[PoolPlan], service: ServiceSpec, path: str) -> list[PoolPlan]:
    if service.pool is not None:
        match = [p for p in pools if p.name == service.pool]
        if not match:
            raise MigError(
                f"no pool named {service.pool!r}; pools: {', '.join(p.name for p in pools)}",
                f"{path}.pool",
            )
        return match
    return list(pools)


def _choose_offer(pool: PoolPlan, service: ServiceSpec) -> Offer | None:
    """The offer of `pool` that serves `service`, or None when it has none."""
    if pool.pack_plan is not None:
        names = {a.profile for a in pool.pack_plan.assignments if a.workload == service.name}
        if names:
            return pool.offer(names.pop())
    if service.profile != AUTO:
        return pool.offer(service.profile)
    assert service.need_mib is not None
    by_name = {o.profile: o for o in pool.offers}
    mig_profiles = [pool.gpu.profile(n) for n in by_name if n != WHOLE_GPU]
    fitting: list[Profile] = profiles_holding(pool.gpu, service.need_mib, mig_profiles)
    if fitting:
        return by_name[fitting[0].name]
    whole = by_name.get(WHOLE_GPU)
    if whole and whole.memory_mib >= service.need_mib:
        return whole
    return None


def _offer_names(pools: Sequence[PoolPlan]) -> str:
    return "; ".join(
        f"{p.name}: {', '.join(o.resource for o in p.offers) or 'nothing'}" for p in pools
    )


def _place_service(
    pools: Sequence[PoolPlan], service: ServiceSpec, path: str
) -> tuple[PoolPlan, Offer]:
    candidates = _candidate_pools(pools, service, path)
    served = [(pool, offer) for pool in candidates if (offer := _choose_offer(pool, service))]
    if not served:
        if service.profile != AUTO:
            resource = (
                candidates[0].gpu.profile(service.profile).resource
                if candidates[0].gpu.has_profile(service.profile)
                else service.profile
            )
            raise MigError(
                f"no pool offers {resource}; pools offer {_offer_names(candidates)}",
                f"{path}.profile",
            )
        assert service.need_mib is not None
        raise MigError(
            f"needs {service.need_mib:,.0f} MiB per replica and no slice the pools offer holds it "
            f"({_offer_names(candidates)})",
            f"{path}.memoryGiB" if service.shape is None else f"{path}.params",
        )
    if len(served) > 1:
        names = ", ".join(pool.name for pool, _ in served)
        raise MigError(
            f"several pools can serve it ({names}); set pool to one of them", f"{path}.pool"
        )
    pool, offer = served[0]
    if service.need_mib is not None and offer.memory_mib < service.need_mib:
        raise MigError(
            f"{offer.profile} has {offer.memory_mib:,} MiB, the model needs "
            f"{service.need_mib:,.0f} MiB per replica",
            f"{path}.profile",
        )
    return pool, offer


def _engine_sizing(service: ServiceSpec, offer: Offer, path: str) -> EngineSizing:
    if (
        service.engine is Engine.CUSTOM
        or service.shape is None
        or not service.shape.kv_bytes_per_token
    ):
        return EngineSizing(service.max_model_len, service.max_num_seqs, None)
    shape = service.shape
    budget = offer.memory_mib * MIB * service.gpu_memory_utilization
    kv_budget = budget - shape.weight_bytes * shape.overhead
    if kv_budget <= 0:
        raise MigError(
            f"the weights ({shape.weight_bytes * shape.overhead / 2**30:.1f} GiB with overhead) "
            "leave no room for a "
            f"KV cache in {service.gpu_memory_utilization:.0%} of {offer.profile}'s "
            f"{offer.memory_mib:,} MiB; pick a larger profile",
            f"{path}.profile",
        )
    tokens = int(kv_budget // shape.kv_bytes_per_token)
    seqs = service.max_num_seqs or shape.concurrency
    length = service.max_model_len or min(shape.context, tokens // seqs)
    if length * seqs > tokens or length < MIN_CONTEXT:
        raise MigError(
            f"the KV cache that fits {offer.profile} holds {tokens:,} tokens; {seqs} sequences of "
            f"{max(length, MIN_CONTEXT):,} tokens need {seqs * max(length, MIN_CONTEXT):,}: lower "
            "concurrency or context, or pick a larger profile",
            f"{path}.maxModelLen" if service.max_model_len else f"{path}.concurrency",
        )
    return EngineSizing(length, seqs, tokens)


def _requests(pool: PoolPlan, offer: Offer) -> tuple[int, int, int]:
    """CPU (millicores), memory (MiB) and /dev/shm (MiB) for one replica: the slice's share of
    the node's compute, applied to the node's allocatable vCPUs and memory."""
    vcpus, gib = pool.node_vcpus_and_gib
    slots = pool.gpu.compute_slices * pool.gpus_per_node
    share = offer.compute / slots if offer.profile != WHOLE_GPU else 1 / pool.gpus_per_node
    cpu = max(500, int(vcpus * NODE_ALLOCATABLE_FRACTION * share * 1000) // 100 * 100)
    memory = max(2048, int(gib * 1024 * NODE_ALLOCATABLE_FRACTION * share) // 256 * 256)
    shm = max(1024, min(memory // 2, offer.memory_mib // 4) // 256 * 256)
    return cpu, memory, shm


def plan_services(spec: StackSpec, pools: Sequence[PoolPlan]) -> list[ServicePlan]:
    placed: list[tuple[int, ServiceSpec, PoolPlan, Offer]] = []
    for index, service in enumerate(spec.services):
        path = f"{_root('services')}[{index}]"
        pool, offer = _place_service(pools, service, path)
        placed.append((index, service, pool, offer))
    fixed: Counter[tuple[str, str]] = Counter()
    fills: dict[tuple[str, str], list[int]] = defaultdict(list)
    first_path: dict[tuple[str, str], str] = {}
    for index, service, pool, offer in placed:
        key = (pool.name, offer.resource)
        first_path.setdefault(key, f"{_root('services')}[{index}].replicas")
        if service.replicas == FILL:
            fills[key].append(index)
        else:
            assert isinstance(service.replicas, int)
            # An autoscaled service may grow to its HPA maximum: count that.
            fixed[key] += max(service.replicas, service.hpa_max_replicas or 0)
            first_path[key] = f"{_root('services')}[{index}].replicas"
    replicas: dict[int, int] = {}
    by_name = {p.name: p for p in pools}
    for key in set(fixed) | set(fills):
        pool_name, resource = key
        capacity = by_name[pool_name].capacity()[resource]
        if fixed[key] > capacity:
            sharing = [s.name for _, s, p, o in placed if (p.name, o.resource) == key]
            raise MigError(
                f"needs {fixed[key]} x {resource} on pool {pool_name} "
                f"({', '.join(sharing)}), pools offer {capacity}",
                first_path[key],
            )
        left = capacity - fixed[key]
        if fills[key]:
            if left < len(fills[key]):
                raise MigError(
                    f"`fill` has {left} x {resource} left on pool {pool_name} for "
                    f"{len(fills[key])} service(s)",
                    f"{_root('services')}[{fills[key][0]}].replicas",
                )
            share, extra = divmod(left, len(fills[key]))
            for rank, index in enumerate(fills[key]):
                replicas[index] = share + (1 if rank < extra else 0)
    plans = []
    for index, service, pool, offer in placed:
        count = replicas.get(index, service.replicas if isinstance(service.replicas, int) else 0)
        sizing = _engine_sizing(service, offer, f"{_root('services')}[{index}]")
        cpu, memory, shm = _requests(pool, offer)
        plans.append(
            ServicePlan(service.name, service, pool, offer, count, sizing, cpu, memory, shm)
        )
    return plans


def _check_gke_modes(pools: Sequence[PoolPlan]) -> None:
    """GKE's device plugin and the operator's must never run on the same node. Operator pools
    always carry the opt-out label (set in `plan_pool`); a native pool must not."""
    for index, pool in enumerate(pools):
        if pool.cloud is not Cloud.GKE:
            continue
        has_flag = pool.node_labels.get(GKE_NO_DEVICE_PLUGIN_LABEL) == "true"
        if not pool.operator_managed and has_flag:
            raise MigError(
                "a GKE-native MIG pool cannot carry gke-no-default-nvidia-gpu-device-plugin=true: "
                "GKE's device plugin must serve it",
                f"{_root('pools')}[{index}].labels",
            )


def _warnings(pools: Sequence[PoolPlan], services: Sequence[ServicePlan]) -> list[str]:
    warnings = []
    for pool in pools:
        if pool.operator_managed and pool.mig_enabled and pool.min_nodes == 0:
            warnings.append(
                f"pool {pool.name}: autoscaling from zero cannot see nvidia.com/mig-* resources "
                "before a node exists; keep min >= 1 or use GKE's native MIG for scale-from-zero"
            )
        used = sum(s.replicas for s in services if s.pool is pool)
        offered = sum(o.per_node for o in pool.offers) * pool.max_nodes
        if offered and used == 0:
            warnings.append(f"pool {pool.name}: no service uses its {offered} devices")
    for service in services:
        if (
            service.spec.engine is Engine.VLLM
            and service.sizing.max_model_len is None
            and service.spec.shape is None
        ):
            warnings.append(
                f"service {service.name}: no model shape (params, layers, kvHeads, headDim), so "
                "--max-model-len is not derived; vLLM sizes its KV cache at start and fails if "
                "the model's full context does not fit the slice"
            )
    return warnings


def plan_stack(spec: StackSpec) -> StackPlan:
    """Everything decided offline for a stack, or MigError naming the key path."""
    pools = [plan_pool(spec, index) for index in range(len(spec.pools))]
    _check_gke_modes(pools)
    services = plan_services(spec, pools)
    return StackPlan(spec, pools, services, _warnings(pools, services))


def utilization(plan: StackPlan) -> dict[str, tuple[int, int]]:
    """Per pool: (devices used by services, devices offered at the pool's largest size)."""
    result = {}
    for pool in plan.pools:
        offered = sum(o.per_node for o in pool.offers) * pool.max_nodes
        used = sum(s.replicas for s in plan.services if s.pool is pool)
        result[pool.name] = (used, offered)
    return result


def layout_of(pool: PoolPlan) -> dict[str, object]:
    """A JSON-friendly description of a pool's per-GPU layouts."""
    distinct = list(dict.fromkeys(pool.per_gpu_layouts))
    return {
        "config": pool.config_name if pool.operator_managed else f"gke:{pool.partition_size}",
        "per_gpu": [
            {
                "gpus": sum(1 for each in pool.per_gpu_layouts if each == layout),
                "profiles": layout.names() if layout else [],
                "mig_enabled": layout is not None,
                "placements": [
                    {"profile": p.profile, "start": p.start, "size": p.size}
                    for p in (place(pool.gpu, layout) if layout else [])
                ],
            }
            for layout in distinct
        ],
    }
