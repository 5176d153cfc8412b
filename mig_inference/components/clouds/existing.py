"""Existing clusters: a pool is a set of named nodes; only their labels and taints change.

The labels come first (the MIG manager reads the layout from them); the taints come after the
pool's services, so a replica always tolerates a taint before a node it runs on carries it."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.node_taints import TAINT_KEYS_ANNOTATION, merged_taints, own_taint_keys
from mig_inference.names.labels import GENERATION_LABEL, MIG_CONFIG_LABEL, POOL_LABEL

from ..planning import planned_pool
from ..stack_args import Stack

OWNED_LABELS = (POOL_LABEL, MIG_CONFIG_LABEL, GENERATION_LABEL)
"""Labels only this project sets on a node: applied with force, so a value another manager
wrote first (the GPU Operator writes `all-disabled` on unlabelled MIG nodes) is taken over."""
OWN_FIELD_MANAGER = "mig-inference"
LABELS_FIELD_MANAGER = "mig-inference-labels"
"""The user's labels: applied without force, so a label another manager holds with a different
value is reported as a conflict instead of overwritten."""
TAINTS_FIELD_MANAGER = "mig-inference-taints"
"""The node's taints: the list is replaced as a whole, so it is applied with force, but only
ever as the live list with this project's own taints changed (see `mig.node_taints`)."""


class ExistingNodePoolArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner decides the nodes' labels from it."""
    pool: str
    """Name of the pool in `stack.pools` (its `nodeNames` are the nodes labelled)."""


def _field(value: Any, name: str) -> Any:
    """A field of an object read back from the API: a typed output, or a mapping."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _live_taints(spec: Any) -> list[dict[str, Any]]:
    return [
        {key: _field(taint, key) for key in ("key", "value", "effect")}
        for taint in _field(spec, "taints") or []
    ]


class ExistingNodePool(pulumi.ComponentResource):
    """Labels on existing nodes through server-side apply (`NodePatch`), touching only what
    this project manages; removed again on destroy. Their taints are `ExistingNodeTaints`."""

    node_names: pulumi.Output[list[str]]
    """The nodes labelled."""

    def __init__(
        self, name: str, args: ExistingNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:ExistingNodePool", name, None, opts)
        self.resource_name = name
        pool = planned_pool(args["stack"], args["pool"])
        child = pulumi.ResourceOptions(parent=self)
        owned = {k: v for k, v in pool.node_labels.items() if k in OWNED_LABELS}
        shared = {k: v for k, v in pool.node_labels.items() if k not in OWNED_LABELS}
        for node in pool.spec.node_names:
            k8s.core.v1.NodePatch(
                f"{name}-{node}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node,
                    labels=owned,
                    annotations={
                        "pulumi.com/patchFieldManager": OWN_FIELD_MANAGER,
                        "pulumi.com/patchForce": "true",
                    },
                ),
                opts=child,
            )
            if shared:
                k8s.core.v1.NodePatch(
                    f"{name}-{node}-labels",
                    metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                        name=node,
                        labels=shared,
                        annotations={"pulumi.com/patchFieldManager": LABELS_FIELD_MANAGER},
                    ),
                    opts=child,
                )
        self.node_names = pulumi.Output.from_input(list(pool.spec.node_names))
        self.register_outputs({"node_names": self.node_names})


class ExistingNodeTaintsArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner decides the nodes' taints from it."""
    pool: str
    """Name of the pool in `stack.pools` (its `nodeNames` are the nodes tainted)."""


class ExistingNodeTaints(pulumi.ComponentResource):
    """The pool's taints on its existing nodes, applied after its services (whose replicas
    tolerate every taint key of the pool), so a new NoExecute taint never evicts a replica.
    The node's live taints are read and other owners' kept: a node's taint list is replaced as
    a whole when applied."""

    node_names: pulumi.Output[list[str]]
    """The nodes tainted."""

    def __init__(
        self,
        name: str,
        args: ExistingNodeTaintsArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        moved_from: ExistingNodePool | None = None,
    ) -> None:
        """`moved_from`: the `ExistingNodePool` that held the taint patches before version 0.3;
        they keep their names and, through an alias, stay the same resources (deleting one
        would strip the node's taints after the new one applied them)."""
        super().__init__("mig-inference:index:ExistingNodeTaints", name, None, opts)
        pool = planned_pool(args["stack"], args["pool"])
        taint_keys = ",".join(sorted({key for key, _value, _effect in pool.taints}))
        for node in pool.spec.node_names:
            patch = f"{moved_from.resource_name}-{node}-taints" if moved_from else f"{name}-{node}"
            live = k8s.core.v1.Node.get(
                f"{patch}-live", node, opts=pulumi.ResourceOptions(parent=self)
            )
            taints = pulumi.Output.all(live.spec, live.metadata).apply(
                lambda found: [
                    k8s.core.v1.TaintPatchArgs(**taint)
                    for taint in merged_taints(
                        _live_taints(found[0]),
                        pool.taints,
                        own_taint_keys(_field(found[1], "annotations")),
                    )
                ]
            )
            k8s.core.v1.NodePatch(
                patch,
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=node,
                    annotations={
                        "pulumi.com/patchFieldManager": TAINTS_FIELD_MANAGER,
                        "pulumi.com/patchForce": "true",
                        TAINT_KEYS_ANNOTATION: taint_keys,
                    },
                ),
                spec=k8s.core.v1.NodeSpecPatchArgs(taints=taints),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    aliases=[pulumi.Alias(parent=moved_from)] if moved_from else None,
                ),
            )
        self.node_names = pulumi.Output.from_input(list(pool.spec.node_names))
        self.register_outputs({"node_names": self.node_names})
