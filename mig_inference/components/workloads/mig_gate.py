"""A Kubernetes Job that `pulumi up` waits on until the pools' MIG layouts are applied."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.dra import plugin_follows_mig_manager
from mig_inference.kube.gate import (
    PENDING_LIMIT_SECONDS,
    gate_fingerprint,
    gate_script,
    gate_targets,
    gate_targets_value,
)
from mig_inference.names.k8s_names import stack_scoped

from ..planning import planned, stack_name
from ..stack_args import Stack
from ..workloads.node_job import NodeJob, NodeJobArgs
from ..workloads.repartition import DRA_PLUGIN_RULES, DRA_SLICES

GATE_NAME = "mig-ready-gate"
READ_NODES = k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["get", "list"])
RESTART_MIG_MANAGERS = k8s.rbac.v1.PolicyRuleArgs(
    api_groups=[""], resources=["pods"], verbs=["list", "delete"]
)
"""In the operator's namespace only: restart the MIG manager of a node wedged in `pending`."""


class MigReadyGateArgs(TypedDict):
    stack: Stack
    """The stack whose pools are waited for: per pool with MIG and nodes, the selector of its
    current generation, its config and node count; the Job runs in the GPU Operator's
    namespace for `gpuOperator.gateTimeoutSeconds`."""


class MigReadyGate(pulumi.ComponentResource):
    """Waits until every gated pool's current nodes carry their intended MIG config, report
    `nvidia.com/mig.config.state=success` and advertise the planned devices; it may read nodes,
    and restart MIG manager pods in the operator's namespace (a node wedged in `pending`), and
    runs off the stack's GPU nodes. Inference services depend on this component."""

    job_name: pulumi.Output[str]
    """Name of the Job that waits."""

    def __init__(
        self, name: str, args: MigReadyGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:MigReadyGate", name, None, opts)
        plan = planned(args["stack"])
        targets = gate_targets(plan)
        timeout = plan.spec.gpu_operator.gate_timeout_seconds
        dra = plan.spec.dra
        dra_namespace = dra.namespace if dra is not None and any(t.dra for t in targets) else ""
        job = NodeJob(
            name,
            NodeJobArgs(
                app=GATE_NAME,
                job_name=f"{GATE_NAME}-{gate_fingerprint(targets)}",
                cluster_role_name=stack_scoped(stack_name(args["stack"]), GATE_NAME),
                namespace=plan.spec.gpu_operator.namespace,
                script=gate_script(),
                env={
                    "GATE_TARGETS": gate_targets_value(targets),
                    "GATE_TIMEOUT_SECONDS": str(timeout),
                    "GATE_PENDING_LIMIT_SECONDS": str(PENDING_LIMIT_SECONDS),
                    "OPERATOR_NAMESPACE": plan.spec.gpu_operator.namespace,
                    **({"DRA_NAMESPACE": dra_namespace} if dra_namespace else {}),
                    **(
                        {"DRA_PLUGIN_BOUNCED": "1"}
                        if dra_namespace and plugin_follows_mig_manager(plan)
                        else {}
                    ),
                },
                rules=[READ_NODES, *([DRA_SLICES] if dra_namespace else [])],
                namespace_rules=[RESTART_MIG_MANAGERS],
                other_namespace_rules={dra_namespace: DRA_PLUGIN_RULES} if dra_namespace else {},
                timeout_seconds=timeout,
                avoid_nodes=[node for pool in plan.pools for node in pool.spec.node_names],
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.job_name = job.job_name
        self.register_outputs({"job_name": self.job_name})
