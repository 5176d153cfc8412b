"""A Kubernetes Job that `pulumi up` waits on until the pools' MIG layouts are applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.node_job import NodeJob, NodeJobArgs
from mig.gate import GateTarget, gate_fingerprint, gate_script, gate_targets_value
from mig.k8s_names import stack_scoped

GATE_NAME = "mig-ready-gate"
READ_NODES = k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["nodes"], verbs=["get", "list"])


@dataclass
class MigReadyGateArgs:
    stack: str
    """Stack name, part of the gate's cluster-scoped RBAC names."""
    namespace: str
    """Namespace for the Job and its ServiceAccount (the GPU Operator's)."""
    targets: Sequence[GateTarget]
    """Per gated pool: the selector of its current nodes, their config and how many."""
    timeout_seconds: int
    """How long to wait before failing."""


class MigReadyGate(pulumi.ComponentResource):
    """Waits until every gated pool's current nodes carry their intended MIG config and report
    `nvidia.com/mig.config.state=success`; it may read nodes and nothing else. Inference
    services depend on this component."""

    job_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: MigReadyGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:MigReadyGate", name, None, opts)
        job = NodeJob(
            name,
            NodeJobArgs(
                app=GATE_NAME,
                job_name=f"{GATE_NAME}-{gate_fingerprint(list(args.targets))}",
                cluster_role_name=stack_scoped(args.stack, GATE_NAME),
                namespace=args.namespace,
                script=gate_script(),
                env={
                    "GATE_TARGETS": gate_targets_value(list(args.targets)),
                    "GATE_TIMEOUT_SECONDS": str(args.timeout_seconds),
                },
                rules=[READ_NODES],
                timeout_seconds=args.timeout_seconds,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.job_name = job.job_name
        self.register_outputs({"job_name": self.job_name})
