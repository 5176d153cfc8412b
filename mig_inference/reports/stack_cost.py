"""What a stack's plan costs per hour: per pool (whole nodes), per service (its slices) and per
slice, from the price table (`prices.py`, date and source per value)."""

from __future__ import annotations

from dataclasses import dataclass

from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.prices import MachinePrice, why_not_priced
from mig_inference.plan.model import WHOLE_GPU, Offer, PoolPlan, ServicePlan
from mig_inference.plan.stack_plan import StackPlan


@dataclass(frozen=True)
class PoolCost:
    pool: str
    machine: str
    spot: bool
    capacity: Capacity
    node_per_hour: float
    min_per_hour: float
    """At the pool's fewest nodes (its size when fixed)."""
    max_per_hour: float
    price: MachinePrice


@dataclass(frozen=True)
class StackCost:
    pools: tuple[PoolCost, ...]
    services: dict[str, float]
    """$/hour of each service's slices (at its replica count or autoscaling maximum)."""
    slices: dict[str, dict[str, float]]
    """Per pool, $/hour of one slice of each resource it offers."""
    unpriced: tuple[str, ...]
    """Why a pool has no price (no machine type, or none in the table for its kind)."""


def slice_per_hour(pool: PoolPlan, offer: Offer, node_per_hour: float) -> float:
    """One slice's share of its node's price: its GPU's share, split by compute slices (a 1g of
    a 7-slice GPU is a seventh), then among the replicas sharing it."""
    gpu = node_per_hour / pool.gpus_per_node
    share = 1.0 if offer.profile == WHOLE_GPU else offer.compute / pool.gpu.compute_slices
    return gpu * share / offer.shared_by


def stack_cost(plan: StackPlan, prices: dict[str, MachinePrice]) -> StackCost:
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
    return StackCost(tuple(pools), services, slices, tuple(unpriced))


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
    }
