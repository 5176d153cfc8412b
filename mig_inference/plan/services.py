"""Service plans: which pool and slice each service gets, replicas, engine limits, requests."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from mig_inference.clouds import NODE_ALLOCATABLE_FRACTION
from mig_inference.errors import MigError, MigErrors, shown
from mig_inference.gpus.catalog import Profile
from mig_inference.gpus.sizing import MIB, profiles_holding
from mig_inference.plan.demand import (
    demand_replicas,
    serving_offers,
    unknown_profiles,
)
from mig_inference.plan.model import (
    WHOLE_GPU,
    EngineSizing,
    Offer,
    PoolPlan,
    ServicePlan,
    part_name,
)
from mig_inference.plan.sharing import utilization
from mig_inference.spec import AUTO, FILL, Engine, ServiceSpec, StackSpec, key_path
from mig_inference.spec.engine_args import chunked_prefill_off

MIN_CONTEXT = 512
"""Shortest max-model-len worth serving; a slice that holds less is refused."""


def _candidate_pools(pools: Sequence[PoolPlan], service: ServiceSpec, path: str) -> list[PoolPlan]:
    if service.pool is not None:
        match = [p for p in pools if p.name == service.pool]
        if not match:
            raise MigError(
                f"no pool named {shown(service.pool)}; pools: {', '.join(p.name for p in pools)}",
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
    if any(o.shared_by > 1 for o in pool.offers):
        # On a shared device a replica can count on its share of the memory only.
        holding = [o for o in pool.offers if o.memory_per_replica_mib >= service.need_mib]
        return min(holding, key=lambda o: (o.memory_per_replica_mib, o.compute), default=None)
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
    if service.need_mib is not None and offer.memory_per_replica_mib < service.need_mib:
        shared = (
            f" shared by {offer.shared_by} replicas without memory isolation: "
            f"{offer.memory_per_replica_mib:,} MiB each"
            if offer.shared_by > 1
            else ""
        )
        raise MigError(
            f"{offer.profile} has {offer.memory_mib:,} MiB{shared}; the model needs "
            f"{service.need_mib:,.0f} MiB per replica",
            f"{path}.memoryGiB" if offer.shared_by > 1 else f"{path}.profile",
            value=service.profile if offer.shared_by == 1 else None,
        )
    return pool, offer


def _place_demand(pools: Sequence[PoolPlan], service: ServiceSpec, path: str) -> PoolPlan:
    assert service.demand is not None
    candidates = _candidate_pools(pools, service, path)
    served = [pool for pool in candidates if serving_offers(pool, service)]
    if not served:
        rated = ", ".join(name for name, _ in service.demand.rates())
        need = f" that holds its {service.need_mib:,.0f} MiB" if service.need_mib else ""
        raise MigError(
            f"no pool offers a slice its throughput table rates ({rated}, unshared){need}; pools "
            f"offer {_offer_names(candidates)}",
            f"{path}.throughput"
            if service.demand.source == "the stack file"
            else f"{path}.throughputFile",
        )
    if len(served) > 1:
        names = ", ".join(pool.name for pool in served)
        raise MigError(
            f"several pools can serve it ({names}); set pool to one of them", f"{path}.pool"
        )
    return served[0]


def engine_sizing(
    service: ServiceSpec,
    offer: Offer,
    memory_utilization: float,
    path: str,
    profile_key: str | None = None,
) -> EngineSizing:
    """The engine's context and concurrency on `offer`; errors name the service's keys under
    `path`, and the profile at `profile_key` (default: the service's `profile`)."""
    if (
        service.engine is Engine.CUSTOM
        or service.shape is None
        or not service.shape.kv_bytes_per_token
    ):
        return EngineSizing(service.max_model_len, service.max_num_seqs, None)
    shape = service.shape
    budget = offer.memory_mib * MIB * memory_utilization
    kv_budget = budget - shape.weight_bytes * shape.overhead
    if kv_budget <= 0:
        raise MigError(
            f"the weights ({shape.weight_bytes * shape.overhead / 2**30:.1f} GiB with overhead) "
            "leave no room for a "
            f"KV cache in {memory_utilization:.0%} of {offer.profile}'s "
            f"{offer.memory_mib:,} MiB; pick a larger profile",
            profile_key or f"{path}.profile",
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


def check_batch_budget(service: ServiceSpec, sizing: EngineSizing, path: str) -> None:
    """vLLM refuses to start with fewer batched tokens than sequences in flight, or, with
    chunked prefill off, than max_model_len (vllm/config/scheduler.py `verify_max_model_len`,
    v0.33.0): say so at the key."""
    tokens, seqs = service.max_num_batched_tokens, sizing.max_num_seqs
    if service.engine is Engine.VLLM and chunked_prefill_off(service.args):
        context = sizing.max_model_len
        if context is None:
            raise MigError(
                "with chunked prefill off (--no-enable-chunked-prefill in args) vLLM refuses a "
                "step budget below the context, which the plan cannot size without it: give "
                "maxModelLen (or the model's shape)",
                f"{path}.maxModelLen",
            )
        if tokens is not None and tokens < context:
            raise MigError(
                f"{tokens:,} batched tokens with chunked prefill off (--no-enable-chunked-prefill "
                f"in args): vLLM refuses a step budget below max_model_len ({context:,}), a "
                f"whole prompt must fit one step; give at least {context:,}, lower maxModelLen, "
                "or leave chunked prefill on",
                f"{path}.maxNumBatchedTokens",
                value=tokens,
            )
    if tokens is not None and seqs is not None and tokens < seqs:
        raise MigError(
            f"{tokens:,} batched tokens for {seqs:,} sequences in flight: vLLM refuses a step "
            "budget below its sequences (each running one needs a token per step); give at "
            f"least {seqs:,}",
            f"{path}.maxNumBatchedTokens",
            value=tokens,
        )


def replica_requests(pool: PoolPlan, offer: Offer) -> tuple[int, int, int]:
    """CPU (millicores), memory (MiB) and /dev/shm (MiB) for one replica: the slice's share of
    the node's compute (divided among the pods sharing the slice), applied to the node's
    allocatable vCPUs and memory."""
    vcpus, gib = pool.node_vcpus_and_gib
    slots = pool.gpu.compute_slices * pool.gpus_per_node
    share = offer.compute / slots if offer.profile != WHOLE_GPU else 1 / pool.gpus_per_node
    share /= offer.shared_by
    cpu = max(500, int(vcpus * NODE_ALLOCATABLE_FRACTION * share * 1000) // 100 * 100)
    memory = max(2048, int(gib * 1024 * NODE_ALLOCATABLE_FRACTION * share) // 256 * 256)
    shm = max(1024, min(memory // 2, offer.memory_mib // 4) // 256 * 256)
    return cpu, memory, shm


def plan_services(spec: StackSpec, pools: Sequence[PoolPlan]) -> list[ServicePlan]:
    """Every service's pool, slice, replicas and engine limits; MigErrors names every service
    that cannot be placed, every over-subscribed resource and every slice too small."""
    problems: list[MigError] = []
    placed: list[tuple[int, ServiceSpec, PoolPlan, Offer]] = []
    demanded: list[tuple[int, ServiceSpec, PoolPlan]] = []
    for index, service in enumerate(spec.services):
        path = f"{key_path('services')}[{index}]"
        if service.demand is not None:
            try:
                demanded.append((index, service, _place_demand(pools, service, path)))
            except MigError as error:
                problems.append(error)
            continue
        try:
            pool, offer = _place_service(pools, service, path)
        except MigError as error:
            problems.append(error)
            continue
        placed.append((index, service, pool, offer))
    fixed: Counter[tuple[str, str]] = Counter()
    fills: dict[tuple[str, str], list[int]] = defaultdict(list)
    first_path: dict[tuple[str, str], str] = {}
    for index, service, pool, offer in placed:
        key = (pool.name, offer.resource)
        first_path.setdefault(key, f"{key_path('services')}[{index}].replicas")
        if service.replicas == FILL:
            fills[key].append(index)
        else:
            assert isinstance(service.replicas, int)
            # An autoscaled service may grow to its HPA maximum: count that, and name that key.
            fixed[key] += max(service.replicas, service.autoscaled_max)
            grows = service.autoscaled_max > service.replicas
            field = service.autoscale_key if grows else "replicas"
            if grows or key not in first_path:
                first_path[key] = f"{key_path('services')}[{index}].{field}"
    replicas: dict[int, int] = {}
    by_name = {p.name: p for p in pools}
    parts: list[tuple[int, ServiceSpec, PoolPlan, Offer, int, bool]] = []
    for pool in pools:
        # Served together from what the fixed replica counts leave; `fill` shares the rest.
        on_pool = [(index, service) for index, service, p in demanded if p is pool]
        if not on_pool:
            continue
        offered = pool.capacity()
        remaining = {r: offered[r] - fixed[(pool.name, r)] for r in offered}
        typos = [e for index, service in on_pool for e in unknown_profiles(pool, service, index)]
        if typos:
            problems.extend(typos)
            continue
        try:
            chosen = demand_replicas(pool, on_pool, remaining)
        except MigError as error:
            problems.append(error)
            continue
        offers = {o.profile: o for o in pool.offers}
        for index, service in on_pool:
            for rank, (profile, count) in enumerate(sorted(chosen[index].items())):
                offer = offers[profile]
                fixed[(pool.name, offer.resource)] += count
                first_path.setdefault(
                    (pool.name, offer.resource),
                    f"{key_path('services')}[{index}].requestsPerSecond",
                )
                parts.append((index, service, pool, offer, count, rank == 0))
    for key in sorted(set(fixed) | set(fills)):
        pool_name, resource = key
        capacity = by_name[pool_name].capacity()[resource]
        if fixed[key] > capacity:
            sharing = [s.name for _, s, p, o in placed if (p.name, o.resource) == key]
            problems.append(MigError(
                f"needs {fixed[key]} x {resource} on pool {pool_name} "
                f"({', '.join(sharing)}), pools offer {capacity}",
                first_path[key], value=fixed[key],
            ))  # fmt: skip
            continue
        left = capacity - fixed[key]
        if fills[key]:
            if left < len(fills[key]):
                problems.append(MigError(
                    f"`fill` has {left} x {resource} left on pool {pool_name} for "
                    f"{len(fills[key])} service(s)",
                    f"{key_path('services')}[{fills[key][0]}].replicas", value=FILL,
                ))  # fmt: skip
                continue
            share, extra = divmod(left, len(fills[key]))
            for rank, index in enumerate(fills[key]):
                replicas[index] = share + (1 if rank < extra else 0)
    everything = [
        (index, service, pool, offer, None, True) for index, service, pool, offer in placed
    ] + [(index, s, pool, offer, count, lead) for index, s, pool, offer, count, lead in parts]
    plans = []
    for index, service, pool, offer, demanded_count, lead in sorted(
        everything, key=lambda item: item[0]
    ):
        count = (
            demanded_count
            if demanded_count is not None
            else replicas.get(index, service.replicas if isinstance(service.replicas, int) else 0)
        )
        path = f"{key_path('services')}[{index}]"
        try:
            fraction = utilization(offer, service.gpu_memory_utilization, path)
            sizing = engine_sizing(service, offer, fraction, path)
            check_batch_budget(service, sizing, path)
        except MigError as error:
            problems.append(error)
            continue
        cpu, memory, shm = replica_requests(pool, offer)
        grouped = service.demand is not None
        plans.append(
            ServicePlan(
                part_name(service.name, offer.profile) if grouped else service.name,
                service, pool, offer, count, sizing, cpu, memory, shm, fraction,
                group=service.name if grouped else None,
                leads_group=lead,
            )
        )  # fmt: skip
    problems.extend(_name_clashes(spec, plans))
    if problems:
        raise MigErrors(problems)
    return plans


def _name_clashes(spec: StackSpec, plans: Sequence[ServicePlan]) -> list[MigError]:
    """A Deployment or Service name used twice in a namespace (a service sized by demand names
    one Deployment per profile `<service>-<profile>`)."""
    problems = []
    seen: dict[tuple[str, str, str], str] = {}
    for plan in plans:
        index = next(i for i, s in enumerate(spec.services) if s is plan.spec)
        names = [("Deployment", plan.name)]
        if plan.leads_group:
            names.append(("Service", plan.service_name))
        for kind, name in names:
            key = (plan.spec.namespace, kind, name)
            if key in seen and seen[key] != plan.spec.name:
                problems.append(MigError(
                    f"its {kind} {shown(name)} is also service {seen[key]}'s (a service sized by "
                    "demand runs a Deployment per profile, `<service>-<profile>`); rename one",
                    f"{key_path('services')}[{index}].name", value=plan.spec.name,
                ))  # fmt: skip
            seen.setdefault(key, plan.spec.name)
    return problems
