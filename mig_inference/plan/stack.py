"""The whole stack's plan, its consistency checks, warnings and summaries."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError, MigErrors, collected
from mig_inference.gpus.layout import place
from mig_inference.names.labels import GKE_NO_DEVICE_PLUGIN_LABEL
from mig_inference.plan.addons import addon_warnings
from mig_inference.plan.arch import check_arm_images
from mig_inference.plan.gated import gated_without_token
from mig_inference.plan.gateway import gateway_warnings, plan_gateway
from mig_inference.plan.model import PoolPlan, ProfilingRun, ServicePlan
from mig_inference.plan.model_cache import ModelCachePlan, plan_model_cache
from mig_inference.plan.partial import cut
from mig_inference.plan.pools import plan_pool
from mig_inference.plan.pools.autoscaling import waiting_for_scale_up
from mig_inference.plan.profiling import profiling_runs
from mig_inference.plan.services import plan_services
from mig_inference.plan.stack_plan import StackPlan
from mig_inference.plan.startup import estimates
from mig_inference.spec import Engine, SharingStrategy, StackSpec, key_path
from mig_inference.spec.dra import DYNAMIC_MIG_WARNING, VALIDATOR_ON_DRA_NODES
from mig_inference.spec.stack import StackErrors


def _gke_modes(pools: Sequence[PoolPlan]) -> Iterator[MigError]:
    """GKE's device plugin and the operator's must never run on the same node. Operator pools
    always carry the opt-out label (set in `plan_pool`); a native pool must not."""
    for index, pool in enumerate(pools):
        if pool.cloud is not Cloud.GKE:
            continue
        has_flag = pool.node_labels.get(GKE_NO_DEVICE_PLUGIN_LABEL) == "true"
        if not pool.operator_managed and has_flag:
            yield MigError(
                "a GKE-native MIG pool cannot carry gke-no-default-nvidia-gpu-device-plugin=true: "
                "GKE's device plugin must serve it",
                f"{key_path('pools')}[{index}].labels",
            )


def _warnings(pools: Sequence[PoolPlan], services: Sequence[ServicePlan]) -> list[str]:
    warnings = []
    for pool in pools:
        used = sum(s.replicas for s in services if s.pool is pool)
        offered = sum(o.per_node for o in pool.offers) * pool.max_nodes
        if offered and used == 0:
            warnings.append(f"pool {pool.name}: no service uses its {offered} devices")
    for pool in pools:
        sharing = pool.spec.sharing
        if sharing is not None and sharing.strategy is SharingStrategy.TIME_SLICING:
            warnings.append(
                f"pool {pool.name}: time-slicing shares each device among {sharing.replicas} pods "
                "without memory isolation; a replica that outgrows its share (vLLM: "
                "--gpu-memory-utilization) can make the others fail"
            )
    warnings.extend(waiting_for_scale_up(list(services)))
    warnings.extend(gated_without_token(services))
    managed = [pool for pool in pools if pool.operator_managed]
    dra = [pool.name for pool in managed if pool.dra]
    if dra and len(dra) < len(managed):
        warnings.append(
            f"pools {', '.join(dra)}: the GPU Operator's validator pod restarts for ever on their "
            "nodes (Init:CrashLoopBackOff at plugin-validation), beside pools that keep the "
            f"device plugin: {VALIDATOR_ON_DRA_NODES} (the "
            "MIG manager and the other operands still start: they wait only for the driver and "
            "toolkit checks before it)"
        )
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
        shape, length = service.spec.shape, service.sizing.max_model_len
        if shape is not None and length is not None and length < shape.context:
            warnings.append(
                f"service {service.name}: context cut from {shape.context:,} to {length:,} "
                f"tokens so {service.sizing.max_num_seqs} sequences' KV cache fits its share of "
                f"{service.profile} (--max-model-len {length})"
            )
    return warnings


def plan_of(read: Callable[[], StackSpec]) -> StackPlan:
    """The plan of the stack `read` returns. When the stack file has errors, what of it reads
    cleanly is planned all the same, and the plan's errors join the file's (none that follows
    from a value the file gives wrongly), so that one run names every error."""
    try:
        spec = read()
    except StackErrors as errors:
        partial = errors.partial
        if partial is None:
            raise
        positions = (partial.pool_positions, partial.service_positions)
        part = cut(partial.spec, partial.left_out, positions=positions)
        try:
            plan_stack(part.spec)
        except MigError as planned:
            found = [part.placed(error) for error in planned.errors]
            raise StackErrors([*errors.errors, *found], partial) from None
        raise
    return plan_stack(spec)


def plan_stack(spec: StackSpec) -> StackPlan:
    """Everything decided offline for a stack, or MigErrors naming every bad key path: the
    errors of each pool, and those of the services on the pools that could be planned."""
    problems: list[MigError] = []
    planned: dict[int, PoolPlan] = {}
    for index in range(len(spec.pools)):
        try:
            planned[index] = plan_pool(spec, index, problems)
        except MigError as error:
            problems.append(error)
    unplanned = [index for index in range(len(spec.pools)) if index not in planned]
    part = cut(spec, pools_out=unplanned)
    pools = [planned[index] for index in part.pool_positions]
    problems.extend(part.placed(error) for error in _gke_modes(pools))
    services: list[ServicePlan] = []
    try:
        services = plan_services(part.spec, pools) if pools else []
    except MigError as error:
        problems.extend(part.placed(found) for found in error.errors)
    if problems:
        raise collected(problems)
    image_problems, image_warnings = check_arm_images(spec, services)
    if image_problems:
        raise MigErrors(image_problems)
    gateway = plan_gateway(spec, services, autoscaler=any(p.autoscaled for p in pools))
    runs = profiling_runs(spec, services)
    cache = plan_model_cache(spec, services)
    hub = spec.model_cache.hub_mb_per_s if spec.model_cache else None
    warnings = [
        *spec.warnings,
        *_warnings(pools, services),
        *_profiling_warnings(runs, services),
        *_cache_warnings(cache),
        *image_warnings,
        *gateway_warnings(gateway),
        *([DYNAMIC_MIG_WARNING] if spec.dra is not None and spec.dra.dynamic_mig else []),
    ]
    plan = StackPlan(
        spec, pools, services, warnings, runs, cache, estimates(services, cache, hub), gateway
    )
    plan.warnings.extend(addon_warnings(plan))
    return plan


def _cache_warnings(cache: ModelCachePlan | None) -> list[str]:
    if cache is None:
        return []
    warnings = [
        f"service {name}: not cached ({why}); its replicas download from the hub"
        for name, why in cache.uncached.items()
    ]
    for model in cache.models:
        if model.revision == "main":
            warnings.append(
                f"model {model.model}: revision main is read into the cache once and not followed "
                "afterwards; pin a commit hash with `revision` so a new one is a deliberate change"
            )
    return warnings


def _profiling_warnings(runs: Sequence[ProfilingRun], services: Sequence[ServicePlan]) -> list[str]:
    """A profiling Job needs a slice of its own while it runs."""
    warnings = []
    for run in runs:
        pool = run.engine.pool
        taken = sum(
            s.replicas for s in services if s.pool is pool and s.resource == run.engine.resource
        )
        if pool.capacity()[run.engine.resource] - taken < 1:
            warnings.append(
                f"profiling {run.service} on {run.profile}: pool {pool.name} has no free "
                f"{run.engine.resource} at its size; the Job waits until one is free"
            )
    return warnings


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
                "devices": [i for i, each in enumerate(pool.per_gpu_layouts) if each == layout],
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
