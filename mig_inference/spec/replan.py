"""`services[].replan`: the bounds `mig-inference replan` keeps a service within when it re-plans
the service from the load Prometheus observed.

A service sized by demand takes `minRequestsPerSecond` and `maxRequestsPerSecond` (its
`requestsPerSecond` is what replan sets); a service with a replica count takes `minReplicas`,
`maxReplicas` and what one replica serves (`throughput` or `throughputFile`, the demand's table
format), without which replan keeps its count. A service an autoscaler sizes, or that fills its
pool, takes none: replan keeps it as it is.
"""

from __future__ import annotations

from enum import Enum

from mig_inference.spec import formats
from mig_inference.spec.demand import throughput_file_points, throughput_points
from mig_inference.spec.model import ReplanSpec
from mig_inference.spec.reader import ConfigNode

DEMAND_BOUNDS = ("minRequestsPerSecond", "maxRequestsPerSecond")
REPLICA_BOUNDS = ("minReplicas", "maxReplicas", "throughput", "throughputFile")
REPLAN_KEYS = DEMAND_BOUNDS + REPLICA_BOUNDS


class Sizing(Enum):
    """How the stack sizes a service, which decides the replan keys it takes."""

    DEMAND = "sized by requestsPerSecond"
    REPLICAS = "with a replica count"
    AUTOSCALED = "sized by an autoscaler (hpaMaxReplicas, queueAutoscaling)"
    FILL = "with replicas: fill"


_ALLOWED = {Sizing.DEMAND: DEMAND_BOUNDS, Sizing.REPLICAS: REPLICA_BOUNDS}


def replan_spec(node: ConfigNode, sizing: Sizing) -> ReplanSpec:
    """The `replan` mapping at `node` of a service sized as `sizing`."""
    if node.value is None:
        return ReplanSpec()
    node.mapping(REPLAN_KEYS)
    allowed = _ALLOWED.get(sizing, ())
    for key in REPLAN_KEYS:
        if key not in allowed and node.child(key).value is not None:
            node.child(key).problem(
                f"does not apply to a service {sizing.value}"
                + (f"; it takes {', '.join(allowed)}" if allowed else "; replan keeps it as is"),
                None,
                list(allowed),
            )
    if sizing is Sizing.DEMAND:
        low = node.child("minRequestsPerSecond").number(bound=formats.REQUESTS_PER_SECOND)
        high = node.child("maxRequestsPerSecond").number(bound=formats.REQUESTS_PER_SECOND)
        _ordered(node, low, high, DEMAND_BOUNDS)
        return ReplanSpec(min_requests_per_second=low, max_requests_per_second=high)
    if sizing is not Sizing.REPLICAS:
        return ReplanSpec()
    fewest = node.child("minReplicas").integer(bound=formats.REPLICAS)
    most = node.child("maxReplicas").integer(bound=formats.REPLICAS)
    _ordered(node, fewest, most, ("minReplicas", "maxReplicas"))
    inline, named = node.child("throughput"), node.child("throughputFile")
    if inline.value is not None and named.value is not None:
        named.problem("give throughput or throughputFile, not both", None)
        return ReplanSpec(min_replicas=fewest, max_replicas=most)
    if inline.value is not None:
        points = throughput_points(inline)
    else:
        points = throughput_file_points(named)
    return ReplanSpec(
        min_replicas=fewest,
        max_replicas=most,
        throughput=tuple(p for p in points if p.requests_per_second > 0),
        throughput_source="the stack file" if named.value is None else str(named.value),
    )


def _ordered(
    node: ConfigNode, low: float | None, high: float | None, keys: tuple[str, str]
) -> None:
    if low is not None and high is not None and low > high:
        node.child(keys[0]).problem(f"must be <= {keys[1]} ({high:g}), got {low:g}", None)
