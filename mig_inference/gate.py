"""The MIG-ready gate: which nodes to wait for, and the POSIX shell loop the gate Job runs.

The Job succeeds once every gated pool has at least its minimum number of nodes (of the current
generation) that carry the intended `nvidia.com/mig.config` and report
`nvidia.com/mig.config.state=success`. A `success` left from an older config never counts. It
fails at once, naming the node, when one reports `failed`, and when the deadline passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mig_inference.digest import short_hash
from mig_inference.plan import PoolPlan, StackPlan
from mig_inference.scripts import load


@dataclass(frozen=True)
class GateTarget:
    """One pool the gate waits for."""

    pool: str
    selector: str
    """Label selector of the pool's current nodes (pool, and generation on cloud pools)."""
    config: str
    """The `nvidia.com/mig.config` those nodes must carry."""
    nodes: int
    """How many of them must report success (the pool's minimum size)."""


def gate_script() -> str:
    return load("gate.sh")


def node_selector(pool: PoolPlan) -> str:
    """The label selector of the pool's current nodes."""
    return ",".join(f"{key}={value}" for key, value in sorted(pool.node_selector.items()))


def gate_targets(plan: StackPlan) -> list[GateTarget]:
    """Operator-managed pools with MIG enabled and at least one node (a pool scaled to zero has
    nothing to wait for)."""
    return [
        GateTarget(pool.name, node_selector(pool), pool.config_name, pool.min_nodes)
        for pool in plan.pools
        if pool.operator_managed and pool.mig_enabled and pool.min_nodes > 0
    ]


def gate_targets_value(targets: list[GateTarget]) -> str:
    """The gate's `GATE_TARGETS`: one `pool selector config nodes` line per pool."""
    return "\n".join(f"{t.pool} {t.selector} {t.config} {t.nodes}" for t in targets)


def gate_fingerprint(targets: list[GateTarget]) -> str:
    """Changes whenever what the gate waits for does, so a new Job runs."""
    text = gate_targets_value(sorted(targets, key=lambda t: t.pool))
    return short_hash(text, 8)
