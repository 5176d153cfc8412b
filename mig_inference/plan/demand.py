"""Services sized by demand: how many replicas of which of their pool's slices serve the
requests per second they must, and the Deployment each profile becomes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from msgspec import Struct

from mig_inference.errors import MigError
from mig_inference.plan.model import Offer, PoolPlan, ServicePlan
from mig_inference.spec import ServiceSpec, key_path


def unknown_profiles(pool: PoolPlan, service: ServiceSpec, index: int) -> list[MigError]:
    """Throughput points naming a profile the pool's GPU does not have (a typo, or another
    GPU's table), named at the key the table came from."""
    assert service.demand is not None
    known = {p.name for p in pool.gpu.profiles} | {o.profile for o in pool.offers}
    inline = service.demand.source == "the stack file"
    where = f"{key_path('services')}[{index}].{'throughput' if inline else 'throughputFile'}"
    unknown = sorted({p.profile for p in service.demand.points} - known)
    if not unknown:
        return []
    return [
        MigError(
            f"{', '.join(map(repr, unknown))} "
            + ("is not a profile" if len(unknown) == 1 else "are not profiles")
            + f" of {pool.gpu.name}"
            + ("" if inline else f" (in {service.demand.source})")
            + f"; it has {', '.join(sorted(known))}",
            where,
            value=unknown,
        )
    ]


def serving_offers(pool: PoolPlan, service: ServiceSpec) -> list[Offer]:
    """The pool's unshared slices that the throughput table rates and that hold the model."""
    assert service.demand is not None
    rated = {name for name, _ in service.demand.rates()}
    need = service.need_mib or 0.0
    return [
        o
        for o in pool.offers
        if o.profile in rated and o.shared_by == 1 and o.memory_per_replica_mib >= need
    ]


def demand_replicas(
    pool: PoolPlan, services: Sequence[tuple[int, ServiceSpec]], left: Mapping[str, int]
) -> dict[int, dict[str, int]]:
    """Replicas per profile of every service sized by demand on `pool` (by stack index) that
    together serve their demands from the slices `left` (by resource), handing out the least
    memory: one integer program for all of them. A pool packed for its services (`mig: auto`)
    already chose them."""
    if pool.pack_plan is not None:
        chosen: dict[int, dict[str, int]] = {}
        for index, service in services:
            replicas: dict[str, int] = {}
            for assignment in pool.pack_plan.assignments:
                if assignment.workload == service.name:
                    replicas[assignment.profile] = replicas.get(assignment.profile, 0) + 1
            chosen[index] = replicas
        return chosen
    from mig_inference.solving.milp import Milp  # the solver, only when a service is sized

    milp = Milp()
    counts: dict[tuple[int, str], int] = {}
    for index, service in services:
        demand = service.demand
        assert demand is not None
        rate = dict(demand.rates())
        for offer in serving_offers(pool, service):
            counts[(index, offer.profile)] = milp.variable(
                cost=float(offer.memory_mib),
                upper=min(
                    left.get(offer.resource, 0),
                    math.ceil(demand.requests_per_second / rate[offer.profile]),
                ),
            )
        # In units of the demand: a tiny demand stays above the solver's tolerances.
        milp.constrain(
            {
                var: rate[name] / demand.requests_per_second
                for (i, name), var in counts.items()
                if i == index
            },
            lower=1.0,
        )
    for offer in pool.offers:
        shared = [var for (_, name), var in counts.items() if name == offer.profile]
        if shared:
            milp.constrain(dict.fromkeys(shared, 1.0), upper=float(left.get(offer.resource, 0)))
    solution = milp.solve()
    if not solution.values:
        raise _too_much(pool, services, left)
    chosen = {index: {} for index, _ in services}
    for (index, name), var in counts.items():
        if round(solution.values[var]) > 0:
            chosen[index][name] = round(solution.values[var])
    for index, service in services:
        assert service.demand is not None
        served = sum(dict(service.demand.rates())[p] * n for p, n in chosen[index].items())
        if served < service.demand.requests_per_second * (1 - 1e-9):
            raise MigError(
                f"is served by {served:g} requests/s of the plan's replicas, short of "
                f"{service.demand.requests_per_second:g}",
                f"{key_path('services')}[{index}].requestsPerSecond",
            )
    return chosen


def _too_much(
    pool: PoolPlan, services: Sequence[tuple[int, ServiceSpec]], left: Mapping[str, int]
) -> MigError:
    """Why the demands on `pool` cannot all be served: each one's most, alone, from what is
    left; named at the first of them."""
    reasons = []
    for _, service in services:
        assert service.demand is not None
        rate = dict(service.demand.rates())
        offers = serving_offers(pool, service)
        most = sum(rate[o.profile] * left.get(o.resource, 0) for o in offers)
        offered = ", ".join(
            f"{left.get(o.resource, 0)} x {o.profile} at {rate[o.profile]:g}/s" for o in offers
        )
        reasons.append(
            f"needs {service.demand.requests_per_second:g} requests/s"
            + (f" ({service.name})" if len(services) > 1 else "")
            + f"; what pool {pool.name} has left serves at most {most:g} "
            f"({offered or 'no slice its throughput table rates'})"
        )
    together = "; together they do not fit" if len(services) > 1 else ""
    return MigError(
        "; ".join(reasons) + together,
        f"{key_path('services')}[{services[0][0]}].requestsPerSecond",
    )


class DemandPart(Struct, frozen=True):
    name: str
    """The Deployment."""
    profile: str
    replicas: int
    requests_per_second: float
    """What one replica serves on this profile."""
    measured: bool


class DemandServed(Struct, frozen=True):
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
