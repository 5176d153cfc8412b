"""Services sized by demand: how many replicas of which of their pool's slices serve the
requests per second they must, and the Deployment each profile becomes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mig_inference.errors import MigError
from mig_inference.milp import Milp
from mig_inference.plan.model import Offer, PoolPlan, ServicePlan
from mig_inference.spec import Demand, ServiceSpec


def part_name(service: str, profile: str) -> str:
    """The Deployment serving `service` on `profile`: `chat-1g-10gb`."""
    return f"{service}-{profile.replace('.', '-').replace('+', '-')}"


def serving_offers(pool: PoolPlan, demand: Demand) -> list[Offer]:
    """The pool's unshared slices that the throughput table rates."""
    rated = {name for name, _ in demand.rates()}
    return [o for o in pool.offers if o.profile in rated and o.shared_by == 1]


def demand_replicas(
    pool: PoolPlan, service: ServiceSpec, left: Mapping[str, int], path: str
) -> dict[str, int]:
    """Replicas per profile that serve `service.demand` from the slices `left` (by resource),
    handing out the least memory: the pool's own plan when it was packed for its services
    (`mig: auto`), else the cheapest choice from what the layout leaves."""
    demand = service.demand
    assert demand is not None
    if pool.pack_plan is not None:
        chosen: dict[str, int] = {}
        for assignment in pool.pack_plan.assignments:
            if assignment.workload == service.name:
                chosen[assignment.profile] = chosen.get(assignment.profile, 0) + 1
        if chosen:
            return chosen
    offers = serving_offers(pool, demand)
    rate = dict(demand.rates())
    most = sum(rate[o.profile] * left.get(o.resource, 0) for o in offers)
    if most + 1e-9 < demand.requests_per_second:
        offered = ", ".join(
            f"{left.get(o.resource, 0)} x {o.profile} at {rate[o.profile]:g}/s" for o in offers
        )
        raise MigError(
            f"needs {demand.requests_per_second:g} requests/s; what pool {pool.name} has left "
            f"serves at most {most:g} ({offered or 'no slice its throughput table rates'})",
            f"{path}.requestsPerSecond",
            value=demand.requests_per_second,
        )
    milp = Milp()
    counts = {
        o.profile: milp.variable(
            cost=float(o.memory_mib),
            upper=min(
                left.get(o.resource, 0), math.ceil(demand.requests_per_second / rate[o.profile])
            ),
        )
        for o in offers
    }
    milp.constrain(
        {var: rate[name] for name, var in counts.items()}, lower=demand.requests_per_second
    )
    solution = milp.solve()
    return {
        name: round(solution.values[var])
        for name, var in counts.items()
        if round(solution.values[var]) > 0
    }


@dataclass(frozen=True)
class DemandPart:
    name: str
    """The Deployment."""
    profile: str
    replicas: int
    requests_per_second: float
    """What one replica serves on this profile."""
    measured: bool


@dataclass(frozen=True)
class DemandServed:
    """How a plan serves one service sized by demand."""

    service: str
    requests_per_second: float
    latency_ms: float | None
    served: float
    parts: tuple[DemandPart, ...]
    source: str


def demand_served(services: Sequence[ServicePlan]) -> list[DemandServed]:
    """Per service sized by demand, in stack order: its Deployments and what they serve."""
    groups: dict[str, list[ServicePlan]] = {}
    for plan in services:
        if plan.group is not None:
            groups.setdefault(plan.group, []).append(plan)
    served = []
    for name, plans in groups.items():
        demand = plans[0].spec.demand
        assert demand is not None
        parts = tuple(
            DemandPart(
                p.name,
                p.profile,
                p.replicas,
                demand.point(p.profile).requests_per_second,
                demand.point(p.profile).measured,
            )
            for p in plans
        )
        total = sum(part.replicas * part.requests_per_second for part in parts)
        served.append(
            DemandServed(
                name, demand.requests_per_second, demand.latency_ms, total, parts, demand.source
            )
        )
    return served
