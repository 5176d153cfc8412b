"""Re-planning a stack from the load it served: each service's new figure, and why.

A service sized by demand gets the observed rate as its `requestsPerSecond`; one with a replica
count gets the replicas the observed rate needs, from what one replica serves on its profile
(`replan.throughput`), or is kept when the stack does not say; an autoscaled or `fill` service,
and any engine but vLLM, is kept. Guard rails, each one a reason in the answer and, where the
stack's author should hear of it, a warning:

- a figure is trusted only from `min_samples` one-minute rate samples or more;
- the stack's `replan` floor and ceiling bound it;
- a service that served nothing in the window is kept (or set to its floor): it is never
  shrunk to zero;
- a saturated service (its requests waited in vLLM's queue, on average, at least
  `saturated_queue_seconds`) served what its replicas could, not what was asked: it may grow,
  never shrink;
- a demand within `tolerance` of the stack's figure is left as it is, so a scheduled run does not
  propose a change for noise;
- two services of the stack that one (namespace, model name) pair stands for are both kept: the
  counters cannot tell them apart.

The new plan, and what applying it costs, are the caller's: this module only decides figures.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

from msgspec import Struct, field

from mig_inference.changes.observed import Key, Observation
from mig_inference.plan import ServicePlan, StackPlan
from mig_inference.plan.served import served_model
from mig_inference.spec import Engine, ServiceSpec
from mig_inference.spec.model import FILL

REQUESTS_PER_SECOND_DIGITS = 3
"""Significant digits a re-planned requestsPerSecond is written with."""
SMALLEST_REQUESTS_PER_SECOND = 1e-6
"""The least requestsPerSecond the stack file takes (`formats.REQUESTS_PER_SECOND`)."""


class ReplanRules(Struct, frozen=True):
    min_samples: int = 10
    tolerance: float = 0.10
    """A demand within this fraction of the stack's figure is left as it is."""
    saturated_queue_seconds: float = 0.5


class ServiceReplan(Struct, frozen=True):
    """One service: what was observed, its figure before and after, and why."""

    index: int
    """Its position in the stack's `services`."""
    name: str
    namespace: str
    model_name: str | None
    """The model name its engine reports in its metrics (None: not a vLLM service)."""
    key: str | None
    """The stack key replan sets: `requestsPerSecond` or `replicas` (None: kept as it is)."""
    before: float | None
    after: float | None
    reason: str
    observation: Observation | None = None

    @property
    def changed(self) -> bool:
        return self.key is not None and self.after is not None and self.after != self.before


class Replan(Struct, frozen=True):
    services: tuple[ServiceReplan, ...]
    warnings: tuple[str, ...] = field(default=())

    def changes(self) -> dict[int, tuple[str, int | float]]:
        """Per service index, the key and its new value (whole numbers written as integers)."""
        found: dict[int, tuple[str, int | float]] = {}
        for service in self.services:
            if service.changed and service.key is not None and service.after is not None:
                value = service.after
                found[service.index] = (service.key, int(value) if value == int(value) else value)
        return found


def rounded(rate: float) -> float:
    """`rate` to REQUESTS_PER_SECOND_DIGITS significant digits."""
    if rate <= 0:
        return 0.0
    digits = REQUESTS_PER_SECOND_DIGITS - 1 - math.floor(math.log10(rate))
    return round(rate, digits)


def _plans_of(plan: StackPlan, name: str) -> list[ServicePlan]:
    return [p for p in plan.services if p.service_name == name]


def _model_name(plans: Sequence[ServicePlan]) -> str | None:
    if not plans or plans[0].spec.engine is not Engine.VLLM:
        return None
    return served_model(plans[0])


def _bounded(value: float, low: float | None, high: float | None) -> float:
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return value


def _saturated(observation: Observation, rules: ReplanRules) -> bool:
    waited = observation.queue_seconds
    return waited is not None and waited >= rules.saturated_queue_seconds


def _demand(
    index: int, spec: ServiceSpec, seen: Observation, model: str, rules: ReplanRules
) -> ServiceReplan:
    assert spec.demand is not None
    before = spec.demand.requests_per_second
    bounds = spec.replan

    def result(after: float, reason: str) -> ServiceReplan:
        return ServiceReplan(
            index, spec.name, spec.namespace, model, "requestsPerSecond", before, after, reason,
            seen,
        )  # fmt: skip

    low, high = bounds.min_requests_per_second, bounds.max_requests_per_second
    observed = rounded(seen.requests_per_second)
    if observed < SMALLEST_REQUESTS_PER_SECOND:
        if low is not None:
            return result(low, "served no request in the window: replan.minRequestsPerSecond")
        return result(before, "served no request in the window: kept (never shrunk to zero)")
    target, why = observed, "the observed rate"
    held = _saturated(seen, rules) and target < before
    if held:
        target = before
        why = (
            f"saturated (requests waited {seen.queue_seconds:.2f} s in the queue on average): "
            "the observed rate is what its replicas could serve, so it is not shrunk"
        )
    bounded = _bounded(target, low, high)
    if bounded != target:
        which = "minRequestsPerSecond" if low is not None and bounded == low else (
            "maxRequestsPerSecond"
        )  # fmt: skip
        return result(bounded, f"{why}, bounded by replan.{which}")
    if held:
        return result(before, why)
    inside = (low is None or before >= low) and (high is None or before <= high)
    if inside and abs(target - before) <= rules.tolerance * before:
        return result(before, f"{why} is within {rules.tolerance:.0%} of the stack's: kept")
    return result(target, why)


def _replicas(
    index: int, plans: Sequence[ServicePlan], seen: Observation, model: str, rules: ReplanRules
) -> ServiceReplan:
    spec = plans[0].spec
    assert isinstance(spec.replicas, int)
    before, profile = float(spec.replicas), plans[0].profile
    bounds = spec.replan
    rates = [p.requests_per_second for p in bounds.throughput if p.profile == profile]

    def result(after: float | None, reason: str, key: str | None = "replicas") -> ServiceReplan:
        return ServiceReplan(
            index, spec.name, spec.namespace, model, key, before, after, reason, seen
        )

    if not bounds.throughput:
        return result(
            None, "kept: a replica count without replan.throughput (what one replica serves)", None
        )
    if not rates:
        return result(
            None,
            f"kept: replan.throughput ({bounds.throughput_source}) rates no {profile}, the "
            "profile it runs on",
            None,
        )
    per_replica = max(rates)
    if seen.requests_per_second < SMALLEST_REQUESTS_PER_SECOND:
        if bounds.min_replicas is not None:
            floor = bounds.min_replicas
            return result(floor, "served no request in the window: replan.minReplicas")
        return result(before, "served no request in the window: kept (never shrunk to zero)")
    needed = max(1, math.ceil(seen.requests_per_second / per_replica - 1e-9))
    why = f"{seen.requests_per_second:.3g} requests/s at {per_replica:g}/s per {profile} replica"
    if _saturated(seen, rules) and needed < before:
        needed, why = (
            int(before),
            (
                f"saturated (requests waited {seen.queue_seconds:.2f} s in the queue on average): "
                "not shrunk"
            ),
        )
    bounded = _bounded(needed, bounds.min_replicas, bounds.max_replicas)
    if bounded != needed:
        which = "minReplicas" if bounded == bounds.min_replicas else "maxReplicas"
        why = f"{why}, bounded by replan.{which}"
    return result(bounded, why)


def _kept(
    index: int,
    spec: ServiceSpec,
    model: str | None,
    reason: str,
    observation: Observation | None = None,
) -> ServiceReplan:
    return ServiceReplan(
        index, spec.name, spec.namespace, model, None, None, None, reason, observation
    )


def replan(
    plan: StackPlan, observed: Mapping[Key, Observation], rules: ReplanRules = ReplanRules()
) -> Replan:
    """Each service of `plan`'s stack, re-planned from what `observed` says it served."""
    warnings: list[str] = []
    models = {spec.name: _model_name(_plans_of(plan, spec.name)) for spec in plan.spec.services}
    shared = Counter((s.namespace, models[s.name]) for s in plan.spec.services if models[s.name])
    services = []
    for index, spec in enumerate(plan.spec.services):
        model = models[spec.name]
        if model is None:
            reason = f"kept: engine {spec.engine.value} (replan reads vLLM's counters)"
            services.append(_kept(index, spec, None, reason))
            continue
        key = (spec.namespace, model)
        if shared[key] > 1:
            others = [s.name for s in plan.spec.services if (s.namespace, models[s.name]) == key]
            warnings.append(
                f"service {spec.name}: kept: {', '.join(others)} serve model {model} in namespace "
                f"{spec.namespace}, and vLLM's counters (by namespace and model_name) cannot tell "
                "them apart; give one a --served-model-name of its own"
            )
            services.append(_kept(index, spec, model, "kept: shares its model and namespace"))
            continue
        seen = observed.get(key)
        if seen is None:
            warnings.append(
                f"service {spec.name}: kept: no {model} requests in namespace {spec.namespace} "
                "in the window"
            )
            services.append(_kept(index, spec, model, "kept: no samples in the window"))
            continue
        if seen.samples < rules.min_samples:
            warnings.append(
                f"service {spec.name}: kept: {seen.samples} one-minute rate sample(s) in the "
                f"window, fewer than the {rules.min_samples} (--min-samples) its figure needs"
            )
            reason = f"kept: {seen.samples} sample(s), too few to trust"
            services.append(_kept(index, spec, model, reason, seen))
            continue
        if spec.demand is not None:
            services.append(_demand(index, spec, seen, model, rules))
        elif spec.replicas == FILL or spec.autoscaled_max:
            reason = "kept: " + ("replicas: fill" if spec.replicas == FILL else "autoscaled")
            services.append(_kept(index, spec, model, reason, seen))
        else:
            services.append(_replicas(index, _plans_of(plan, spec.name), seen, model, rules))
        warnings.extend(_advice(spec, seen))
    return Replan(tuple(services), tuple(warnings))


def _advice(spec: ServiceSpec, seen: Observation) -> list[str]:
    """What the observed requests say about the figures the throughput table rests on."""
    advice = []
    profiling = spec.profiling
    for observed, assumed, what in (
        (seen.prompt_tokens_per_request, profiling and profiling.input_tokens, "prompt"),
        (seen.generation_tokens_per_request, profiling and profiling.output_tokens, "generated"),
    ):
        if observed and assumed and not 0.5 <= observed / assumed <= 2:
            advice.append(
                f"service {spec.name}: requests averaged {observed:,.0f} {what} tokens; its "
                f"profiling runs use {assumed:,}: what one replica serves may differ from its "
                "throughput table (profile again with the observed lengths)"
            )
    target = spec.demand.latency_ms if spec.demand else None
    first = seen.first_token_seconds
    if target is not None and first is not None and first * 1000 > target:
        advice.append(
            f"service {spec.name}: 5% of its requests waited more than {first * 1000:,.0f} ms "
            f"for their first token, beyond its latencyMs ({target:g} ms)"
        )
    return advice
