"""In-place re-partitioning of one pool: a Job that moves its nodes to the new MIG config one
batch at a time, evicting the pods that hold slices first (see `mig.repartition`)."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.k8s_names import stack_scoped
from mig_inference.repartition import repartition_script, repartition_targets

from .node_job import NodeJob, NodeJobArgs
from .planning import planned, stack_name
from .stack_args import Stack

RULES = [
    k8s.rbac.v1.PolicyRuleArgs(
        api_groups=[""], resources=["nodes"], verbs=["get", "list", "patch"]
    ),  # cordon, relabel, uncordon
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list"]),
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods/eviction"], verbs=["create"]),
]


class InPlaceRepartitionArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner gives the pool's nodes, the config they move
    to and how many at once; one batch may take `gpuOperator.gateTimeoutSeconds`."""
    pool: str
    """Name of the pool in `stack.pools` (one whose layout changes in place)."""


class InPlaceRepartition(pulumi.ComponentResource):
    """Cordon, evict GPU pods (PodDisruptionBudgets honoured), relabel, wait for `success` with
    the new config, uncordon: node by node. Stops at the first node that does not get there."""

    job_name: pulumi.Output[str]
    """Name of the re-partitioning Job."""

    def __init__(
        self, name: str, args: InPlaceRepartitionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:InPlaceRepartition", name, None, opts)
        plan = planned(args["stack"])
        found = [t for t in repartition_targets(plan) if t.pool == args["pool"]]
        if not found:
            raise pulumi.RunError(f"pool {args['pool']!r} does not change its layout in place")
        target = found[0]
        node_timeout = plan.spec.gpu_operator.gate_timeout_seconds
        app = f"mig-repartition-{target.pool}"
        job = NodeJob(
            name,
            NodeJobArgs(
                app=app,
                job_name=f"{app}-{target.fingerprint}",
                cluster_role_name=stack_scoped(stack_name(args["stack"]), app),
                namespace=plan.spec.gpu_operator.namespace,
                script=repartition_script(),
                env=target.env(node_timeout),
                rules=RULES,
                timeout_seconds=target.budget_seconds(node_timeout),
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.job_name = job.job_name
        self.register_outputs({"job_name": self.job_name})
