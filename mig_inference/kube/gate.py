"""The MIG-ready gate: which nodes to wait for, and the POSIX shell loop the gate Job runs.

The Job succeeds once every gated pool has at least its minimum number of nodes (of the current
generation) that carry the intended `nvidia.com/mig.config`, report
`nvidia.com/mig.config.state=success` and advertise the devices the plan gives a node (hardware
evidence: the state label names no config, so a `success` left from an older config, or written
by a run that applied an earlier value, never counts alone). It fails at once, naming the node,
when one carrying the intended config reports `failed` (a `failed` under an older config is
waited out), and when the deadline passes. A node carrying the intended config that stays
`pending` for `PENDING_LIMIT_SECONDS` gets its MIG manager pod restarted once (the recovery of
docs/troubleshooting.md for NVIDIA/gpu-operator#2833), said in the output, and so does one that
reports `success` with its operands left paused on two polls (a MIG manager process that
completed a reconfigure never restores them after a later failure: v0.15.0's globals). A node
that reports `success` but has been NotReady for as long (NVIDIA/gpu-operator#2415: the MIG
manager's kubelet restart around a mode change broke it) gets nothing restarted: it is reported
once with the cure, a new instance, and the gate keeps waiting (a replacement counts). API errors
count as "not ready yet".
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct, field

from mig_inference.kube.scripts import load
from mig_inference.names.digest import short_hash
from mig_inference.plan import PoolPlan, StackPlan

PENDING_LIMIT_SECONDS = 600
"""How long a node may sit in `pending` before its MIG manager pod is restarted (once): with no
GPU clients left, the MIG manager moves on within minutes (a reboot shows as `rebooting`), and
v0.15.0 waits at most 5 minutes for each operand to stop before it gives up without a state."""


class GateTarget(Struct, frozen=True):
    """One pool the gate waits for."""

    pool: str
    selector: str
    """Label selector of the pool's current nodes (pool, and generation on cloud pools)."""
    config: str
    """The `nvidia.com/mig.config` those nodes must carry."""
    nodes: int
    """How many of them must report success (the pool's minimum size)."""
    capacity: Mapping[str, int] = field(default_factory=dict)
    """The GPU devices a node advertises once the config is applied (`PoolPlan`'s
    `capacity_per_node`)."""
    dra: bool = False
    """The devices are published by NVIDIA's DRA driver (ResourceSlices), whose kubelet plugin
    the gate restarts once on a node that published them before its layout was applied."""


def gate_script() -> str:
    return load("gate.sh")


def node_selector(pool: PoolPlan) -> str:
    """The label selector of the pool's current nodes."""
    return ",".join(f"{key}={value}" for key, value in sorted(pool.node_selector.items()))


def devices_value(capacity: Mapping[str, int], separator: str = " ") -> str:
    """`resource=count` per resource, sorted by name as kubectl prints a node's allocatable map
    (what the scripts compare it with)."""
    return separator.join(f"{resource}={count}" for resource, count in sorted(capacity.items()))


def gate_targets(plan: StackPlan) -> list[GateTarget]:
    """Operator-managed pools with MIG enabled and at least one node (a pool scaled to zero has
    nothing to wait for)."""
    return [
        GateTarget(
            pool.name,
            node_selector(pool),
            pool.config_name,
            pool.min_nodes,
            pool.capacity_per_node(),
            pool.dra,
        )
        for pool in plan.pools
        if pool.mig_manager_applies and pool.mig_enabled and pool.min_nodes > 0
    ]


def gate_targets_value(targets: list[GateTarget]) -> str:
    """The gate's `GATE_TARGETS`: one `pool selector config nodes devices [dra]` line per pool,
    the devices `resource=count` joined by commas."""
    return "\n".join(
        f"{t.pool} {t.selector} {t.config} {t.nodes} {devices_value(t.capacity, ',')}"
        + (" dra" if t.dra else "")
        for t in targets
    )


def gate_fingerprint(targets: list[GateTarget]) -> str:
    """Changes whenever what the gate waits for does, so a new Job runs."""
    text = gate_targets_value(sorted(targets, key=lambda t: t.pool))
    return short_hash(text, 8)
