"""Existing clusters: a pool is a set of named nodes; only their labels and taints change."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from mig.plan import PoolPlan

FIELD_MANAGER = "mig-inference"


@dataclass
class ExistingNodePoolArgs:
    pool: PoolPlan
    """The pool's cloud-neutral description from the stack plan (nodeNames, labels, taints)."""


class ExistingNodePool(pulumi.ComponentResource):
    """Labels and taints on existing nodes through server-side apply (`NodePatch`): only the
    fields this project manages are touched, and they are removed again on destroy."""

    node_names: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: ExistingNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:ExistingNodePool", name, None, opts)
        pool = args.pool
        taints = [
            k8s.core.v1.TaintPatchArgs(key=key, value=value or None, effect=effect)
            for key, value, effect in pool.taints
        ]
        for node in pool.spec.node_names:
            k8s.core.v1.NodePatch(
                f"{name}-{node}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node,
                    labels=dict(pool.node_labels),
                    annotations={"pulumi.com/patchFieldManager": FIELD_MANAGER},
                ),
                spec=k8s.core.v1.NodeSpecPatchArgs(taints=taints) if taints else None,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.node_names = pulumi.Output.from_input(list(pool.spec.node_names))
        self.register_outputs({"node_names": self.node_names})
