"""Pool plans: layouts per GPU, offers, max pods, labels and tolerations of each pool."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from mig_inference.clouds import (
    DEFAULT_MAX_PODS,
    EKS_MANAGED_NODE_GROUP_MAX_PODS,
    GKE_ACCELERATORS,
    GKE_COMPUTECLASS_ONLY_PARTITIONS,
    GKE_PARTITION_SIZES,
    GPU_OPERATOR_PODS_PER_NODE,
    MACHINES,
    MAX_PODS_RANGE,
    SYSTEM_PODS_PER_NODE,
    Cloud,
    MachineShape,
)
from mig_inference.clouds.capacity import GKE_NATIVE_MIG
from mig_inference.errors import MigError, record, report, shown
from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout
from mig_inference.gpus.migparted import ALL_DISABLED, resolve_config
from mig_inference.names.labels import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_NODE_LABEL,
    GENERATION_LABEL,
    GKE_NO_DEVICE_PLUGIN_LABEL,
    GKE_PARTITION_LABEL,
    GKE_SHARED_CLIENTS_LABEL,
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    MIG_CONFIG_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    OKE_NO_DEVICE_PLUGIN_LABEL,
    OPERATOR_OPERANDS_LABEL,
    POOL_LABEL,
)
from mig_inference.plan.arch import arch_tolerations
from mig_inference.plan.model import WHOLE_GPU, Offer, PoolPlan
from mig_inference.plan.pools.autoscaling import check_node_template_tags, check_scale_from_zero
from mig_inference.plan.pools.capacity import PoolCapacity, check_capacity, check_oke_domains
from mig_inference.plan.pools.generation import generation_of, legacy_inputs, replacement_inputs
from mig_inference.plan.pools.zones import per_zone, pool_zones
from mig_inference.plan.sharing import device_plugin_config_key, shared_offers
from mig_inference.spec import (
    AUTO,
    FILL,
    Allocation,
    MigManager,
    NodeCount,
    PoolSpec,
    StackSpec,
    key_path,
)

if TYPE_CHECKING:  # the planner is imported when a pool is packed (`mig: auto`)
    from mig_inference.solving.packing import PackPlan, Workload


def _machine(spec: StackSpec, pool: PoolSpec, path: str) -> MachineShape | None:
    if spec.cloud is Cloud.EXISTING:
        return None
    known = MACHINES[spec.cloud]
    assert pool.machine_type is not None
    machine = known.get(pool.machine_type)
    if machine is None:
        if pool.gpus_per_node is None:
            raise MigError(
                f"unknown {spec.cloud.value} machine type {shown(pool.machine_type)}; known: "
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
    from mig_inference.solving.packing import Workload

    workloads: list[Workload] = []
    indexes: list[int] = []
    for index, service in enumerate(spec.services):
        target = service.pool or (spec.pools[0].name if len(spec.pools) == 1 else None)
        if target != pool.name:
            continue
        where = f"{key_path('services')}[{index}]"
        if service.demand is not None:
            for name, _ in service.demand.rates():
                if not pool.gpu.has_profile(name):
                    raise MigError(
                        f"{shown(name)} is not a MIG profile of {pool.gpu.name}",
                        f"{where}.throughput",
                        value=name,
                        allowed=[p.name for p in pool.gpu.profiles],
                    )
            holding = tuple(
                (name, rate)
                for name, rate in service.demand.rates()
                if pool.gpu.profile(name).memory_mib >= (service.need_mib or 0.0)
            )
            if not holding:
                raise MigError(
                    f"no profile of its throughput table holds its {service.need_mib or 0:,.0f} "
                    f"MiB on {pool.gpu.name}",
                    f"{where}.throughput",
                )
            workloads.append(
                Workload(
                    service.name,
                    0,
                    requests_per_second=service.demand.requests_per_second,
                    throughput=holding,
                )
            )
            indexes.append(index)
            continue
        if service.replicas == FILL:
            raise MigError(
                "`fill` needs a pool with a fixed layout, not mig: auto", f"{where}.replicas"
            )
        assert isinstance(service.replicas, int)
        if service.profile != AUTO:
            try:
                pool.gpu.profile(service.profile)
            except MigError as error:
                raise MigError(
                    error.message, f"{where}.profile", value=service.profile, allowed=error.allowed
                ) from None
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
        from mig_inference.solving.packing import pack

        if pool.mig_manager is MigManager.GKE:
            raise MigError("mig: auto needs migManager operator (GKE's native MIG is one profile)",
                           f"{path}.mig")  # fmt: skip
        workloads, indexes = _auto_workloads(spec, pool, path)
        if pool.mig_prefer and len(pool.mig_prefer) != gpus_per_node:
            raise MigError(
                f"lists {len(pool.mig_prefer)} GPU layout(s); a node of this pool has "
                f"{gpus_per_node} GPUs (one layout per GPU, in device order)",
                f"{path}.migPrefer",
            )
        try:
            planned = pack(
                pool.gpu, workloads, gpus_per_node=gpus_per_node, uniform_nodes=True,
                single_profile=True, baselines=False, deployed=pool.mig_prefer,
            )  # fmt: skip
        except MigError as error:
            where = error.path or ""
            if where.startswith("workloads["):
                number = int(where[len("workloads[") : where.index("]")])
                field_name = where.rsplit(".", 1)[-1] if "." in where else "profile"
                keys = {"memory_gib": "memoryGiB", "requests_per_second": "requestsPerSecond"}
                key = keys.get(field_name, field_name)
                raise MigError(
                    error.message, f"{key_path('services')}[{indexes[number]}].{key}"
                ) from None
            raise MigError(error.message, f"{path}.mig", value=pool.mig) from None
        per_gpu = tuple(planned.node_layouts()[0])
        return planned.node_config_names()[0], per_gpu, False, planned
    try:
        resolved = resolve_config(pool.gpu, pool.mig)
    except MigError as error:
        raise MigError(
            error.message, f"{path}.mig", value=pool.mig, allowed=error.allowed
        ) from None
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
        offers.append(Offer(WHOLE_GPU, GPU_RESOURCE, gpu.whole_gpu_mib, gpu.compute_slices, whole))
    return offers


def _max_pods(
    spec: StackSpec,
    pool: PoolSpec,
    machine: MachineShape | None,
    devices: int,
    path: str,
    problems: list[MigError] | None,
) -> tuple[int, int, str]:
    """The pool's max pods, the pods each node needs, and what they are; a max pods out of the
    cloud's range or below the need is recorded (raised when not collecting)."""
    cloud = spec.cloud
    operator_pods = GPU_OPERATOR_PODS_PER_NODE if pool.mig_manager is MigManager.OPERATOR else 0
    system = pool.system_pods if pool.system_pods is not None else SYSTEM_PODS_PER_NODE[cloud]
    required = devices + operator_pods + system
    # On a DRA pool the driver's kubelet plugin takes the place of the operator's device plugin.
    operands = "GPU Operator and DRA driver" if pool.dra else "GPU Operator"
    breakdown = f"{devices} GPU devices + {operator_pods} {operands} pods + {system} system pods"
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
        found = MigError(f"{effective} is out of range; {limit}", where, value=effective)
    elif effective < required:
        source = "" if pool.max_pods is not None else f" (the {cloud.value} default)"
        found = MigError(
            f"{effective}{source} is below the {required} this pool needs per node ({breakdown})",
            where,
            value=effective,
        )
    else:
        return effective, required, breakdown
    report(problems, found)
    return effective, required, breakdown


def _tolerations(pool: PoolSpec, machine: MachineShape | None) -> tuple[Mapping[str, str], ...]:
    """A replica tolerates every taint key of its pool whatever the value and effect, so a
    change of a taint's value or effect never evicts replicas from running nodes (a new
    NoExecute key brings new nodes instead: see plan.generation), and the taint the cloud puts
    on the machine's architecture (GKE's on Arm nodes)."""
    # Sorted: the order means nothing to Kubernetes, so the stack file's is no change (a new
    # order of the same list would roll every replica).
    keys = sorted({taint.key for taint in pool.taints})
    if GPU_TAINT_KEY not in keys:
        # GKE taints GPU nodes with nvidia.com/gpu; pods requesting nvidia.com/mig-* are not
        # tolerated for it automatically, so every GPU pod carries the toleration.
        keys.append(GPU_TAINT_KEY)
    exists = tuple({"key": key, "operator": "Exists"} for key in keys)
    return exists + arch_tolerations(machine)


def plan_pool(spec: StackSpec, index: int, problems: list[MigError] | None = None) -> PoolPlan:
    """The pool's plan. Raises MigError when the pool cannot be planned (its machine, layout or
    zones); with `problems`, errors that leave it plannable (max pods, capacity, availability
    domains, scale from zero) are recorded there and the plan made all the same."""
    pool = spec.pools[index]
    path = f"{key_path('pools')}[{index}]"
    machine = _machine(spec, pool, path)
    gpus_per_node = machine.gpus if machine else (pool.gpus_per_node or 0)
    if spec.cloud is Cloud.EXISTING and not gpus_per_node:
        raise MigError("is required for existing nodes: GPUs on each node", f"{path}.gpusPerNode")
    if not pool.gpu.mig_capable and pool.mig != ALL_DISABLED:
        raise MigError(
            f"{pool.gpu.name} has no MIG: leave mig out (whole GPUs), and share them with "
            "`sharing` if pods should",
            f"{path}.mig",
            value=pool.mig,
            allowed=[ALL_DISABLED],
        )
    config_name, layouts, builtin, planned = _layouts(spec, pool, gpus_per_node, path)
    zones = pool_zones(spec, pool, path)
    record(problems, lambda: check_oke_domains(spec, pool, machine, path), None)
    bought = record(
        problems,
        lambda: check_capacity(spec, pool, machine, path),
        PoolCapacity(pool.capacity, pool.reservation, pool.boot_disk_type, None),
    )
    min_nodes, max_nodes = pool.nodes.min, pool.nodes.max
    if planned is not None:
        needed = planned.node_count
        if not pool.nodes_given:
            # Sized by the planner: whole nodes per zone where the cloud counts per zone.
            spread = len(zones) if spec.cloud is Cloud.GKE else 1
            min_nodes = max_nodes = -(-needed // spread) * spread
        elif max_nodes < needed:
            raise MigError(
                f"the services on this pool need {needed} node(s) of {gpus_per_node} "
                f"{pool.gpu.name} with layout {config_name}; nodes allows at most {max_nodes}",
                f"{path}.nodes",
            )
    partition = None
    if pool.mig_manager is MigManager.GKE and any(layout is not None for layout in layouts):
        partition = _gke_partition(pool, layouts, path)
    offers = shared_offers(pool, _offers(pool.gpu, layouts, pool.mig_manager), path)
    devices = sum(o.per_node for o in offers)
    max_pods, required, breakdown = _max_pods(spec, pool, machine, devices, path, problems)
    labels = dict(pool.labels)
    labels[POOL_LABEL] = pool.name
    dynamic_mig = pool.dra and spec.dra is not None and spec.dra.dynamic_mig
    if pool.dra:
        # The DRA driver's kubelet plugin owns the node's devices; the operator's device plugin
        # stays off so no slice is offered twice.
        labels[DRA_NODE_LABEL] = Allocation.DRA.value
        labels[DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
        if dynamic_mig:
            labels[MIG_MANAGER_DEPLOY_LABEL] = "false"
    if pool.mig_manager is MigManager.OPERATOR:
        if pool.gpu.mig_capable and not dynamic_mig:
            labels[MIG_CONFIG_LABEL] = config_name
        if pool.sharing is not None:
            # The device plugin reads this pool's sharing from its config ConfigMap, by this key.
            labels[DEVICE_PLUGIN_CONFIG_LABEL] = device_plugin_config_key(pool, offers)
        if spec.cloud is Cloud.GKE:
            labels[GKE_NO_DEVICE_PLUGIN_LABEL] = "true"
    elif any(p.mig_manager is MigManager.OPERATOR for p in spec.pools):
        # GKE's device plugin serves this pool; keep the operator's operands (its device
        # plugin above all) off these nodes so the two never meet.
        if labels.get(OPERATOR_OPERANDS_LABEL, "false") != "false":
            report(problems, MigError(
                f"{OPERATOR_OPERANDS_LABEL} must stay false on a GKE-native pool in a stack that "
                "also runs the GPU Operator",
                f"{path}.labels",
            ))  # fmt: skip
        labels[OPERATOR_OPERANDS_LABEL] = "false"
    if spec.cloud is Cloud.OKE and pool.mig_manager is MigManager.OPERATOR:
        # OKE's own device plugin would advertise the same GPUs next to the operator's.
        labels[OKE_NO_DEVICE_PLUGIN_LABEL] = "true"
    nodes_per_zone = (
        per_zone(NodeCount(min_nodes, max_nodes), zones, path)
        if spec.cloud is Cloud.GKE
        else min_nodes
    )
    default_disk = bought.facts.boot_disks[0] if bought.facts and spec.cloud is Cloud.GKE else None
    boot_mig = boot_mig_gpus(spec.cloud, pool, layouts, dynamic_mig)
    inputs = replacement_inputs(
        spec, pool, gpus_per_node, max_pods, config_name, default_disk, boot_mig
    )
    generation = generation_of(inputs)
    selector = {POOL_LABEL: pool.name}
    if generation:
        labels[GENERATION_LABEL] = generation
        selector[GENERATION_LABEL] = generation
    if partition:
        selector[GKE_PARTITION_LABEL] = partition
    if pool.mig_manager is MigManager.GKE and pool.sharing is not None:
        selector[GKE_SHARED_CLIENTS_LABEL] = str(pool.sharing.replicas)
    planned_pool = PoolPlan(
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
        # Sorted like the tolerations: a node's taints are a set to Kubernetes.
        taints=tuple(sorted((t.key, t.value, t.effect) for t in pool.taints)),
        tolerations=_tolerations(pool, machine),
        max_pods=max_pods,
        max_pods_required=required,
        max_pods_breakdown=breakdown,
        partition_size=partition,
        accelerator=machine.accelerator if machine else None,
        spec=pool,
        zones=zones,
        nodes_per_zone=nodes_per_zone,
        rollout=pool.rollout,
        max_unavailable=pool.max_unavailable,
        replacement_inputs=inputs,
        generation=generation,
        legacy_inputs={
            k: v for k, v in legacy_inputs(spec, default_disk).items() if k not in inputs
        },
        pack_plan=planned,
        boot_disk=bought.boot_disk,
        dynamic_mig=dynamic_mig,
        boot_mig_gpus=boot_mig,
    )
    record(problems, lambda: check_scale_from_zero(planned_pool, path), None)
    check_node_template_tags(planned_pool, path, problems)
    return planned_pool


def boot_mig_gpus(
    cloud: Cloud, pool: PoolSpec, layouts: Sequence[Layout | None], dynamic_mig: bool
) -> tuple[int, ...]:
    """The GPUs whose MIG mode a node switches on at boot, from its user data, so the MIG
    manager's first run changes no mode (NVIDIA/gpu-operator#2415; `clouds/bootstrap.py`): on
    EKS and OKE, whose user data runs before the kubelet, for the GPUs the layout partitions."""
    applies = pool.mig_manager is MigManager.OPERATOR and pool.gpu.mig_capable and not dynamic_mig
    if cloud not in (Cloud.EKS, Cloud.OKE) or not applies:
        return ()
    return tuple(index for index, layout in enumerate(layouts) if layout is not None)


def _gke_partition(pool: PoolSpec, layouts: Sequence[Layout | None], path: str) -> str:
    allowed = GKE_PARTITION_SIZES.get(pool.gpu.name, ())
    if not allowed:
        documented = ", ".join(GKE_PARTITION_SIZES)
        class_only = GKE_COMPUTECLASS_ONLY_PARTITIONS.get(pool.gpu.name)
        also = (
            f"; its ComputeClass reference lists {', '.join(class_only)} for {pool.gpu.name} "
            "only as a ComputeClass's gpuSharing.gpuPartitionSize (GKE 1.35.2-gke.1485000+), "
            "and the stack creates node pools, not ComputeClasses"
            if class_only
            else ""
        )
        raise MigError(
            f"GKE documents native MIG node pools for {documented} only, not {pool.gpu.name} "
            f"({GKE_NATIVE_MIG}){also}; use migManager: operator (the GPU Operator partitions "
            "it)",
            f"{path}.migManager",
            value=MigManager.GKE.value,
            allowed=[MigManager.OPERATOR.value],
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
