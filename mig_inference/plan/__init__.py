"""The stack plan: what every pool offers and which service lands where, decided offline.

`plan_stack(spec)` turns a validated StackSpec into pool descriptions (GPU model, layout per GPU,
capacity per MIG resource, node labels, tolerations, max pods) and service placements (profile,
resource, replicas, engine sizing), or raises MigError naming the key path. Pulumi components
consume these descriptions and decide nothing themselves.
"""

from mig_inference.plan.model import (
    WHOLE_GPU,
    EngineSizing,
    Offer,
    PoolPlan,
    ServicePlan,
)
from mig_inference.plan.stack import layout_of, plan_of, plan_stack, utilization
from mig_inference.plan.stack_plan import StackPlan

__all__ = [
    "WHOLE_GPU",
    "EngineSizing",
    "Offer",
    "PoolPlan",
    "ServicePlan",
    "StackPlan",
    "layout_of",
    "plan_of",
    "plan_stack",
    "utilization",
]
