"""What the simulator takes from the plans of both versions: per pool, GPUs per node and the
devices a node advertises with each layout either version gives it."""

from __future__ import annotations

from mig_inference.labels import MIG_CONFIG_LABEL
from mig_inference.operator_values import mig_parted_configs
from mig_inference.plan import StackPlan
from mig_inference.rollout.simulator import PoolFacts


def pool_facts(*plans: StackPlan) -> dict[str, PoolFacts]:
    devices: dict[str, dict[str, dict[str, int]]] = {}
    gpus: dict[str, int] = {}
    for plan in plans:
        for pool in plan.pools:
            config = pool.node_labels.get(MIG_CONFIG_LABEL, "")
            devices.setdefault(pool.name, {})[config] = pool.capacity_per_node()
            gpus[pool.name] = pool.gpus_per_node
    return {name: PoolFacts(gpus[name], devices[name]) for name in devices}


def config_names(plan: StackPlan) -> frozenset[str]:
    """The configs the MIG manager finds in this version's mig-parted config."""
    return frozenset(mig_parted_configs(plan))
