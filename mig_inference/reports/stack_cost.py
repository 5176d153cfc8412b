"""What a stack's plan costs per hour: per pool (whole nodes), per service (its slices) and per
slice, and the model cache's storage beside them, from the price table (`prices.py`, date and
source per value)."""

from __future__ import annotations

from msgspec import Struct

from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.prices import (
    MachinePrice,
    StoragePrice,
    shipped_storage_prices,
    why_not_priced,
)
from mig_inference.gpus.sizing import GIB
from mig_inference.plan.model import WHOLE_GPU, Offer, PoolPlan, ServicePlan
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.plan.stack_plan import StackPlan
from mig_inference.spec import CacheStorage

HOURS_PER_MONTH = 730
"""The month the clouds' monthly prices are turned into hours with (AWS's and Google's pricing
pages count 730 hours)."""


class PoolCost(Struct, frozen=True):
    pool: str
    machine: str
    spot: bool
    capacity: Capacity
    node_per_hour: float
    min_per_hour: float
    """At the pool's fewest nodes (its size when fixed)."""
    max_per_hour: float
    price: MachinePrice


class CacheCost(Struct, frozen=True):
    """What the model cache's storage bills, and what that costs."""

    storage: str
    billed: str
    """What is billed, in words."""
    gib: float
    """GiB billed."""
    per_month: float | None
    """$ per month (None: no sourced price)."""
    price: StoragePrice | None
    why_not: str | None = None

    @property
    def per_hour(self) -> float | None:
        return None if self.per_month is None else self.per_month / HOURS_PER_MONTH


class StackCost(Struct, frozen=True):
    pools: tuple[PoolCost, ...]
    services: dict[str, float]
    """$/hour of each service's slices (at its replica count or autoscaling maximum)."""
    slices: dict[str, dict[str, float]]
    """Per pool, $/hour of one slice of each resource it offers."""
    unpriced: tuple[str, ...]
    """Why a pool has no price (no machine type, or none in the table for its kind)."""
    cache: CacheCost | None = None
    """The model cache's storage (None: no cache)."""


def slice_per_hour(pool: PoolPlan, offer: Offer, node_per_hour: float) -> float:
    """One slice's share of its node's price: its GPU's share, split by compute slices (a 1g of
    a 7-slice GPU is a seventh), then among the replicas sharing it."""
    gpu = node_per_hour / pool.gpus_per_node
    share = 1.0 if offer.profile == WHOLE_GPU else offer.compute / pool.gpu.compute_slices
    return gpu * share / offer.shared_by


def _billed(cache: ModelCachePlan) -> tuple[float, str]:
    """GiB the storage bills, and what they are."""
    storage = cache.storage
    if storage is CacheStorage.HYPERDISK_ML:
        volumes = sum(2 * len(m.namespaces) for m in cache.models)
        gib: float = sum(2 * len(m.namespaces) * cache.size_of(m) for m in cache.models)
        return gib, (
            f"{volumes} volume(s), {gib:,.0f} GiB: per model revision and namespace the fill "
            f"volume and its read-only clone, each provisioned with {cache.throughput:,} MiB/s "
            "(billed too, not priced here)"
        )
    namespaces = sorted({ns for m in cache.models for ns in m.namespaces})
    if storage is CacheStorage.FSX_LUSTRE:
        gib = float(cache.size_gib * len(namespaces))
        return gib, (
            f"{len(namespaces)} file system(s) of {cache.size_gib:,} GiB, one per namespace, at "
            f"{cache.throughput} MB/s per TiB"
        )
    if storage.object_storage:
        gib = sum(m.weights.bytes for m in cache.models) / GIB
        return gib, f"{gib:,.1f} GiB of weights, stored once in bucket {cache.bucket}"
    gib = sum(m.weights.bytes * len(m.namespaces) for m in cache.models) / GIB
    return gib, f"{gib:,.1f} GiB of weights in {len(namespaces)} namespace(s)"


def cache_cost(cache: ModelCachePlan, prices: dict[str, StoragePrice]) -> CacheCost:
    gib, billed = _billed(cache)
    storage = cache.storage.value
    if cache.storage is CacheStorage.STORAGE_CLASS:
        return CacheCost(storage, billed, gib, None, None, "your StorageClass's own price")
    price = prices.get(storage)
    throughput = cache.throughput if cache.storage is CacheStorage.FSX_LUSTRE else None
    per_gb = price.price(throughput) if price is not None else None
    if per_gb is None:
        tier = f" at {throughput} MB/s per TiB" if throughput is not None else ""
        source = f" ({price.source})" if price is not None else ""
        return CacheCost(
            storage, billed, gib, None, price,
            f"no sourced price for {storage}{tier}{source}; give one with --prices FILE "
            f"(storage: {storage}: per_gb_month:)",
        )  # fmt: skip
    return CacheCost(storage, billed, gib, per_gb * gib, price)


def stack_cost(
    plan: StackPlan,
    prices: dict[str, MachinePrice],
    storage_prices: dict[str, StoragePrice] | None = None,
) -> StackCost:
    pools: list[PoolCost] = []
    slices: dict[str, dict[str, float]] = {}
    unpriced: list[str] = []
    for pool in plan.pools:
        machine = pool.machine.name if pool.machine is not None else None
        price = prices.get(machine) if machine else None
        capacity = pool.spec.capacity
        per_node = price.price_of(capacity) if price else None
        if machine is None or per_node is None:
            why = "existing nodes have no machine type to price" if machine is None else (
                why_not_priced(machine, capacity, price)
            )  # fmt: skip
            unpriced.append(f"{pool.name}: {why}")
            continue
        assert price is not None
        pools.append(
            PoolCost(pool.name, machine, pool.spec.spot, capacity, per_node,
                     per_node * pool.min_nodes, per_node * pool.max_nodes, price)
        )  # fmt: skip
        slices[pool.name] = {o.resource: slice_per_hour(pool, o, per_node) for o in pool.offers}
    services: dict[str, float] = {}
    for service in plan.services:
        per_slice = slices.get(service.pool.name, {}).get(service.resource)
        if per_slice is not None:
            # A service sized by demand: the sum of its Deployments.
            services[service.service_name] = services.get(
                service.service_name, 0.0
            ) + per_slice * _replicas_at_most(service)
    cache = None
    if plan.model_cache is not None:
        cache = cache_cost(
            plan.model_cache,
            shipped_storage_prices() if storage_prices is None else storage_prices,
        )
    return StackCost(tuple(pools), services, slices, tuple(unpriced), cache)


def _replicas_at_most(service: ServicePlan) -> int:
    return max(service.replicas, service.spec.autoscaled_max)


def _money(value: float) -> str:
    return f"${value:,.2f}"


def cost_text(cost: StackCost) -> str:
    lines = ["cost per hour (whole nodes; a slice is its share of its GPU's compute):"]
    for pool in cost.pools:
        kind = str(pool.capacity)
        size = (
            _money(pool.min_per_hour)
            if pool.min_per_hour == pool.max_per_hour
            else f"{_money(pool.min_per_hour)} to {_money(pool.max_per_hour)}"
        )
        dated = "" if pool.price.date in pool.price.source else f", {pool.price.date}"
        marks = ", weak" if pool.price.weak else ""
        marks += ", your file" if pool.price.overridden else ""
        lines.append(
            f"  pool {pool.pool}: {size} ({pool.machine} {kind} at {_money(pool.node_per_hour)}/h "
            f"per node; {pool.price.source}{dated}{marks})"
        )
        for resource, per_hour in sorted(cost.slices[pool.pool].items()):
            lines.append(f"    one {resource}: {_money(per_hour)}")
    for name, per_hour in cost.services.items():
        lines.append(f"  service {name}: {_money(per_hour)}")
    for why in cost.unpriced:
        lines.append(f"  not priced: {why}")
    cache = cost.cache
    if cache is not None:
        if cache.per_month is None or cache.price is None or cache.per_hour is None:
            lines.append(
                f"  not priced: model cache ({cache.storage}): {cache.billed}; {cache.why_not}"
            )
        else:
            price = cache.price
            marks = ", weak" if price.weak else ""
            marks += ", your file" if price.overridden else ""
            lines.append(
                f"  model cache ({cache.storage}): {_money(cache.per_hour)}/h, "
                f"{_money(cache.per_month)}/month: {cache.billed}; {price.source}, "
                f"{price.date}{marks}"
            )
    return "\n".join(lines)


def cost_json(cost: StackCost) -> dict[str, object]:
    return {
        "pools": [
            {
                "pool": p.pool,
                "machine": p.machine,
                "spot": p.spot,
                "capacity": str(p.capacity),
                "node_per_hour": p.node_per_hour,
                "min_per_hour": p.min_per_hour,
                "max_per_hour": p.max_per_hour,
                "price_date": p.price.date,
                "price_source": p.price.source,
                "price_weak": p.price.weak,
            }
            for p in cost.pools
        ],
        "slices": cost.slices,
        "services": cost.services,
        "unpriced": list(cost.unpriced),
        "model_cache": None
        if cost.cache is None
        else {
            "storage": cost.cache.storage,
            "billed": cost.cache.billed,
            "gib": cost.cache.gib,
            "per_month": cost.cache.per_month,
            "per_hour": cost.cache.per_hour,
            "price_date": cost.cache.price.date if cost.cache.price else None,
            "price_source": cost.cache.price.source if cost.cache.price else None,
            "price_weak": cost.cache.price.weak if cost.cache.price else None,
            "why_not_priced": cost.cache.why_not,
        },
    }
