"""The cost guard of an ephemeral stack: what the plan costs per hour with every pool at its
largest, times the TTL, against the stack's `ephemeral.maxCost`."""

from __future__ import annotations

from msgspec import Struct

from mig_inference.errors import MigError
from mig_inference.reports.stack_cost import StackCost
from mig_inference.spec import key_path

NOT_PRICED = (
    "the cluster's control plane and system nodes, disks, load balancers and network traffic "
    "are not priced: only the GPU pools are"
)


class Budget(Struct, frozen=True):
    per_hour: float
    """$/hour of every priced pool at its largest size."""
    hours: float
    max_cost: float
    pools: tuple[str, ...]
    """One line per priced pool: nodes, machine, price."""
    sources: tuple[str, ...]
    """Where each priced pool's price comes from."""
    unpriced: tuple[str, ...]
    """Why a pool has no price."""

    @property
    def total(self) -> float:
        return self.per_hour * self.hours


def budget(cost: StackCost, ttl_minutes: int, max_cost: float) -> Budget:
    pools = tuple(
        f"{p.pool}: {round(p.max_per_hour / p.node_per_hour) if p.node_per_hour else 0} x "
        f"{p.machine} {'spot' if p.spot else 'on-demand'} at ${p.node_per_hour:,.2f}/h "
        f"= ${p.max_per_hour:,.2f}/h"
        for p in cost.pools
    )
    sources = tuple(
        f"{p.pool}: {p.machine} priced by {p.price.source}"
        + ("" if p.price.date in p.price.source else f", {p.price.date}")
        + (" (your file)" if p.price.overridden else "")
        for p in cost.pools
    )
    return Budget(
        per_hour=sum(p.max_per_hour for p in cost.pools),
        hours=ttl_minutes / 60,
        max_cost=max_cost,
        pools=pools,
        sources=sources,
        unpriced=cost.unpriced,
    )


def budget_text(b: Budget) -> str:
    lines = [
        f"budget: up to ${b.per_hour:,.2f}/h x {b.hours:g} h = ${b.total:,.2f} "
        f"(maxCost ${b.max_cost:,.2f})"
    ]
    lines += [f"  {line}" for line in b.pools]
    lines += [f"  {line}" for line in b.sources]
    lines += [f"  not priced: {why}" for why in b.unpriced]
    lines.append(f"  {NOT_PRICED}")
    return "\n".join(lines)


def budget_problem(b: Budget, allow_unpriced: bool) -> MigError | None:
    """Why `ephemeral up` refuses the stack, or None when it is within its budget."""
    where = f"{key_path('ephemeral')}.maxCost"
    if b.unpriced and not allow_unpriced:
        return MigError(
            f"cannot hold the stack to its budget: {'; '.join(b.unpriced)}; give the prices "
            "with --prices FILE, or go ahead without them with --allow-unpriced",
            where,
            value=b.max_cost,
        )
    if b.total > b.max_cost:
        return MigError(
            f"the plan costs up to ${b.per_hour:,.2f}/h with every pool at its largest "
            f"({'; '.join(b.pools)}), ${b.total:,.2f} over {b.hours:g} h: more than maxCost "
            f"${b.max_cost:,.2f}; lower the pools' node counts, shorten the TTL (--ttl) or "
            "raise maxCost",
            where,
            value=b.max_cost,
        )
    return None
