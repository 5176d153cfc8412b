"""In-place re-partitioning: the POSIX shell script a Job runs to move a pool's nodes to a new
MIG config one batch (`maxUnavailable` nodes) at a time.

The MIG manager does not evict user pods: relabelling a node whose slices are still held leaves
it `pending` (or `failed`). So, per batch, the script cordons the nodes, evicts the pods that
hold GPU or MIG devices through the Eviction API (PodDisruptionBudgets are honoured: a refused
eviction is retried until the node's deadline), relabels `nvidia.com/mig.config` while clearing
the old state (so a stale `success` cannot pass), waits for `success` with the new config, and
uncordons. It stops at the first node that reports `failed`, stays `pending` past its limit,
or runs out of time, names the node and its state, and leaves the nodes after it untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from mig_inference.digest import short_hash
from mig_inference.gate import node_selector
from mig_inference.plan import PoolPlan, StackPlan
from mig_inference.scripts import load
from mig_inference.spec import Rollout

PENDING_LIMIT_SECONDS = 600
"""How long a node may sit in `pending` after its pods are gone before the Job stops: with no
GPU clients left, the MIG manager moves on within minutes (a reboot shows as `rebooting`)."""


@dataclass(frozen=True)
class RepartitionTarget:
    """One in-place pool: its nodes, the config they move to, and how many at once."""

    pool: str
    config: str
    selector: str | None
    """Label selector of the pool's nodes (cloud pools)."""
    node_names: tuple[str, ...]
    """The pool's nodes by name (existing clusters, whose pool label may not be set yet)."""
    max_unavailable: int
    max_nodes: int

    @property
    def fingerprint(self) -> str:
        text = f"{self.pool}|{self.config}|{self.selector}|{' '.join(self.node_names)}"
        return short_hash(text, 8)

    def env(self, node_timeout_seconds: int) -> dict[str, str]:
        return {
            "REPARTITION_SELECTOR": self.selector or "",
            "REPARTITION_NODES": " ".join(self.node_names),
            "TARGET_CONFIG": self.config,
            "MAX_UNAVAILABLE": str(self.max_unavailable),
            "NODE_TIMEOUT_SECONDS": str(node_timeout_seconds),
            "PENDING_LIMIT_SECONDS": str(PENDING_LIMIT_SECONDS),
        }

    def budget_seconds(self, node_timeout_seconds: int) -> int:
        """The whole Job's time: one node timeout per batch."""
        batches = -(-max(self.max_nodes, 1) // self.max_unavailable)
        return batches * node_timeout_seconds


def repartition_targets(plan: StackPlan) -> list[RepartitionTarget]:
    """Operator-managed pools whose layout changes in place."""
    return [_target(pool) for pool in plan.pools if _in_place(pool)]


def _in_place(pool: PoolPlan) -> bool:
    # GPUs without MIG have nothing to re-partition (and no MIG manager to report success).
    return pool.operator_managed and pool.gpu.mig_capable and pool.rollout is Rollout.IN_PLACE


def _target(pool: PoolPlan) -> RepartitionTarget:
    names = pool.spec.node_names
    return RepartitionTarget(
        pool=pool.name,
        config=pool.config_name,
        selector=None if names else node_selector(pool),
        node_names=names,
        max_unavailable=pool.max_unavailable,
        max_nodes=pool.max_nodes,
    )


def repartition_script() -> str:
    return load("repartition.sh")
