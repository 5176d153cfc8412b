"""The startup-taint agent: which pools' nodes carry the Cluster Autoscaler's startup taint,
and the POSIX shell loop that takes it off a node once the node advertises its planned slices.

Why (kubernetes/autoscaler, cluster-autoscaler 1.35.2): a new node of a MIG pool turns Ready
minutes before its MIG manager applied the layout, advertising no `nvidia.com/mig-*`; the
autoscaler would see the pods that wait for it still unschedulable and grow the pool again. A
node with a taint prefixed `startup-taint.cluster-autoscaler.kubernetes.io/` is counted as not
ready but starting (`utils/taints/taints.go` `FilterOutNodesWithStartupTaints`, which
`clusterstate` counts as upcoming for `--max-node-startup-time`, 15 minutes by default), and the
taint is left out of the node templates it simulates scale-ups with (`SanitizeTaints`). The cloud
puts the taint on every new node of an autoscaled MIG pool (`PoolPlan.startup_taint`); nothing
but this agent removes it, and it removes nothing else.
"""

from __future__ import annotations

from msgspec import Struct, field

from mig_inference.kube.gate import devices_value, node_selector
from mig_inference.kube.scripts import load
from mig_inference.names.digest import short_hash
from mig_inference.plan import StackPlan

AGENT_POLL_SECONDS = 15
"""Seconds between two rounds of the agent (one node list per pool each)."""


class TaintedPool(Struct, frozen=True):
    """One pool whose new nodes carry the startup taint."""

    pool: str
    selector: str
    """Label selector of the pool's current nodes."""
    config: str
    """The `nvidia.com/mig.config` those nodes carry."""
    capacity: dict[str, int] = field(default_factory=dict)
    """The devices a node advertises once its layout is applied."""


def tainted_pools(plan: StackPlan) -> list[TaintedPool]:
    """The pools whose nodes get the startup taint (autoscaled, layout by the MIG manager)."""
    return [
        TaintedPool(pool.name, node_selector(pool), pool.config_name, pool.capacity_per_node())
        for pool in plan.pools
        if pool.startup_taint is not None
    ]


def agent_targets_value(pools: list[TaintedPool]) -> str:
    """`AGENT_TARGETS`: one `pool selector config devices` line per pool."""
    return "\n".join(
        f"{p.pool} {p.selector} {p.config} {devices_value(p.capacity, ',')}" for p in pools
    )


def agent_fingerprint(pools: list[TaintedPool]) -> str:
    return short_hash(agent_targets_value(pools), 8)


def startup_taint_script() -> str:
    return load("startup_taint.sh")
