"""The whole plan of a stack: its pools, services, profiling runs, model cache and load
estimates, as `plan_stack` assembles them."""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct, field

from mig_inference.plan.gateway import GatewayPlan
from mig_inference.plan.model import PoolPlan, ProfilingRun, ServicePlan
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.plan.startup import LoadEstimate
from mig_inference.spec import StackSpec


class StackPlan(Struct):
    spec: StackSpec
    pools: list[PoolPlan]
    services: list[ServicePlan]
    warnings: list[str] = field(default_factory=list)
    profiling: list[ProfilingRun] = field(default_factory=list)
    """Profiling Jobs the stack asks for (opt-in, per service)."""
    model_cache: ModelCachePlan | None = None
    """The model cache (None: every replica downloads from the hub)."""
    load: Mapping[str, LoadEstimate] = field(default_factory=dict)
    """Per service plan (Deployment): bytes read, from where, time to Ready, hub bytes."""
    gateway: GatewayPlan | None = None
    """The gateway's routes (None: no gateway)."""

    def pool(self, name: str) -> PoolPlan:
        return next(p for p in self.pools if p.name == name)

    def pool_of(self, service: str) -> str:
        """The pool a service's replicas land on."""
        return next(s.pool.name for s in self.services if s.name == service)
