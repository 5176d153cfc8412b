"""In-place re-partitioning of one pool: a Job that moves its nodes to the new MIG config one
batch at a time, evicting the pods that hold slices first (see `mig.repartition`)."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.repartition import repartition_script, repartition_targets
from mig_inference.names.k8s_names import stack_scoped

from ..planning import planned, stack_name
from ..stack_args import Stack
from ..workloads.node_job import NodeJob, NodeJobArgs

RULES = [
    k8s.rbac.v1.PolicyRuleArgs(
        api_groups=[""], resources=["nodes"], verbs=["get", "list", "patch"]
    ),  # cordon, relabel, uncordon
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list"]),
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods/eviction"], verbs=["create"]),
    # Relax the pool's services' budgets while it runs, and restore them (the script touches only
    # budgets labelled with the pool and managed by the project; they live in the services'
    # namespaces, some of which may not exist yet when the Job's Roles would be made).
    k8s.rbac.v1.PolicyRuleArgs(
        api_groups=["policy"], resources=["poddisruptionbudgets"], verbs=["list", "patch"]
    ),
]
OPERATOR_NAMESPACE_RULES = [
    # Restart a node's MIG manager (NVIDIA's re-trigger for a label that already names the
    # target): its pods live in the operator's namespace, the Job's own.
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["delete"]),
]


DRA_SLICES = k8s.rbac.v1.PolicyRuleArgs(
    api_groups=["resource.k8s.io"], resources=["resourceslices"], verbs=["list"]
)
"""What NVIDIA's DRA driver publishes for a node: the slices it counts on a DRA pool, and those
it waits to see withdrawn when a node moves back to the device plugin (any pool: the plan of a
device-plugin pool does not know whether its nodes ran DRA before)."""
DRA_PLUGIN_RULES = [
    # Restart a node's DRA kubelet plugin once its layout is applied (it discovers slices only
    # when it starts), and see the new one Ready.
    k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list", "delete"]),
]


class InPlaceRepartitionArgs(TypedDict):
    stack: Stack
    """The stack the pool belongs to: the planner gives the pool's nodes, the config they move
    to, the devices a node then advertises and how many nodes at once; a batch's drain and its
    reconfiguration may take `gpuOperator.gateTimeoutSeconds` each."""
    pool: str
    """Name of the pool in `stack.pools` (one whose layout changes in place)."""


class InPlaceRepartition(pulumi.ComponentResource):
    """Cordon (marked as its own), evict GPU pods (PodDisruptionBudgets honoured), relabel (or
    restart the MIG manager when the label is the target already), wait for `success` with the
    new config and the planned devices, uncordon: batch by batch. Stops at the first node that
    does not get there; a run after a stop resumes it."""

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
        timeout = plan.spec.gpu_operator.gate_timeout_seconds
        namespace = plan.spec.gpu_operator.namespace
        app = f"mig-repartition-{target.pool}"
        job = NodeJob(
            name,
            NodeJobArgs(
                app=app,
                job_name=f"{app}-{target.fingerprint}",
                cluster_role_name=stack_scoped(stack_name(args["stack"]), app),
                namespace=namespace,
                script=repartition_script(),
                env=target.env(timeout, namespace),
                rules=[*RULES, DRA_SLICES],
                timeout_seconds=target.budget_seconds(timeout),
                namespace_rules=OPERATOR_NAMESPACE_RULES,
                other_namespace_rules={target.dra_namespace: DRA_PLUGIN_RULES}
                if target.dra
                else {},
                avoid_nodes=[node for pool in plan.pools for node in pool.spec.node_names],
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.job_name = job.job_name
        self.register_outputs({"job_name": self.job_name})
