"""In-place re-partitioning of one pool: a Job that moves its nodes to the new MIG config one
batch at a time, evicting the pods that hold slices first (see `mig.repartition`)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.node_job import NodeJob, NodeJobArgs
from mig.k8s_names import stack_scoped
from mig.repartition import RepartitionTarget, repartition_script

RULES = [
    k8s.rbac.v1.PolicyRuleArgs(
        api_groups=[""], resources=["nodes"], verbs=["get", "list", "patch"]
    ),  # cordon, relabel, uncordon
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list"]),
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods/eviction"], verbs=["create"]),
]


@dataclass
class InPlaceRepartitionArgs:
    stack: str
    """Stack name, part of the Job's cluster-scoped RBAC names."""
    namespace: str
    """Namespace for the Job (the GPU Operator's)."""
    target: RepartitionTarget
    """The pool's nodes, the config they move to and how many at once."""
    node_timeout_seconds: int
    """How long one batch may take: evictions, reconfiguration (and reboot)."""


class InPlaceRepartition(pulumi.ComponentResource):
    """Cordon, evict GPU pods (PodDisruptionBudgets honoured), relabel, wait for `success` with
    the new config, uncordon: node by node. Stops at the first node that does not get there."""

    job_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: InPlaceRepartitionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:InPlaceRepartition", name, None, opts)
        target = args.target
        app = f"mig-repartition-{target.pool}"
        job = NodeJob(
            name,
            NodeJobArgs(
                app=app,
                job_name=f"{app}-{target.fingerprint}",
                cluster_role_name=stack_scoped(args.stack, app),
                namespace=args.namespace,
                script=repartition_script(),
                env=target.env(args.node_timeout_seconds),
                rules=RULES,
                timeout_seconds=target.budget_seconds(args.node_timeout_seconds),
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.job_name = job.job_name
        self.register_outputs({"job_name": self.job_name})
