"""A change gate for CI: what a simulated `pulumi up` may cost before a pipeline stops it.

`diff --min-serving` and `--max-extra-gpus` turn the change plan into a pass or a list of
breaches: a service whose replicas serving at the worst moment of the change fall below the
threshold, or a change that needs more GPUs at its peak than the pipeline allows. Both measure
against what the new version wants: replicas it removes on purpose and GPUs it keeps are no
disruption, so a deliberate scale-down, a removed service or a new stack passes."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from msgspec import Struct

from mig_inference.changes.change_plan import ChangePlan
from mig_inference.errors import MigError
from mig_inference.plan import StackPlan

BUDGET = "budget"
"""`--min-serving budget`: no fewer than the service's PodDisruptionBudget keeps serving."""


class MinServing(Struct, frozen=True):
    """The fewest replicas a service may serve during the change: `count` replicas, `percent`
    of its replicas, or (`budget`) its replicas less what its disruption budget lets go at once.
    "Its replicas" are those both versions run: the smaller of those serving before and those the
    new version wants, so that a replica the change removes on purpose (a scale-down, a removed
    service) is not counted as lost."""

    count: int | None = None
    percent: float | None = None
    budget: bool = False

    def floor(self, before: int, wanted: int, disruption_budget: int | None) -> int:
        """The least that may serve: `before` serving now, `wanted` by the new version."""
        kept = min(before, wanted)
        if self.budget:
            return max(kept - (disruption_budget if disruption_budget is not None else 1), 0)
        if self.percent is not None:
            return math.ceil(kept * self.percent / 100)
        return min(self.count or 0, kept)

    def __str__(self) -> str:
        if self.budget:
            return "its disruption budget"
        if self.percent is not None:
            return f"{self.percent:g}% of its replicas"
        return f"{self.count} serving"


def min_serving(text: str) -> MinServing:
    """`--min-serving`: a count (`1`: never down), a percentage (`50%`) or `budget`."""
    if text == BUDGET:
        return MinServing(budget=True)
    percent = re.fullmatch(r"(\d+(?:\.\d+)?)%", text)
    if percent and 0 < float(percent.group(1)) <= 100:
        return MinServing(percent=float(percent.group(1)))
    if text.isdigit() and int(text) >= 1:
        return MinServing(count=int(text))
    raise MigError(
        f"{text!r} is not a threshold: give a count of replicas (1: never down), a percentage of "
        "each service's replicas (50%), or budget (what its PodDisruptionBudget keeps)",
        "--min-serving",
    )


def wanted_replicas(plan: StackPlan) -> dict[str, int]:
    """The replicas the new version runs, per service of its plan: the total of the Service it
    serves (a service sized by demand runs one Deployment per profile, and the simulation counts
    the replicas serving behind their one Service)."""
    totals: dict[str, int] = {}
    for service in plan.services:
        totals[service.service_name] = totals.get(service.service_name, 0) + service.replicas
    return {s.name: totals[s.service_name] for s in plan.services} | totals


def breaches(
    changes: ChangePlan,
    serving: MinServing | None,
    max_extra_gpus: int | None,
    wanted: Mapping[str, int],
    disruption_budgets: Mapping[str, int] | None = None,
) -> list[str]:
    """What the change does beyond the gate, one line each (empty: it passes). `wanted`: the
    replicas the new version runs for each service of the change plan (a service it no longer
    has: none)."""
    found = []
    for service in changes.services:
        before, worst = service.serving_before, service.min_serving
        if serving is None or not before or worst is None:
            continue
        target = wanted.get(service.name, 0)
        floor = serving.floor(before, target, (disruption_budgets or {}).get(service.name))
        if worst < floor:
            found.append(
                f"service {service.name}: {worst} of {before} replicas serving at the worst "
                f"moment"
                + (f" (the new version runs {target})" if target != before else "")
                + f", below {serving} ({floor})"
                + (f", fewer for {service.window_seconds:.0f} s" if service.window_seconds else "")
            )
    if max_extra_gpus is not None and changes.extra_gpus > max_extra_gpus:
        found.append(
            f"{changes.extra_gpus} extra GPUs at the peak of the change, above the "
            f"{max_extra_gpus} allowed"
        )
    return found
