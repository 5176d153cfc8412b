"""A small Deployment that takes the Cluster Autoscaler's startup taint off the new nodes of
autoscaled MIG pools once they advertise their planned slices (`kube/startup_taints.py`)."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.startup_taints import (
    AGENT_POLL_SECONDS,
    agent_fingerprint,
    agent_targets_value,
    startup_taint_script,
    tainted_pools,
)
from mig_inference.names.k8s_names import stack_scoped

from ..planning import planned, stack_name
from ..stack_args import Stack
from .node_job import MANAGED_BY, script_pod

AGENT_NAME = "mig-startup-taints"
NODE_TAINTS = k8s.rbac.v1.PolicyRuleArgs(
    api_groups=[""], resources=["nodes"], verbs=["get", "list", "patch"]
)
"""Read the pools' nodes, and patch one's taints (`kubectl taint`: a GET, then a PATCH)."""


class StartupTaintAgentArgs(TypedDict):
    stack: Stack
    """The stack whose autoscaled MIG pools' nodes carry the startup taint: per pool, the
    selector of its current generation, its config and the devices a node advertises once
    configured. The agent runs in the GPU Operator's namespace, off the stack's GPU nodes."""


class StartupTaintAgent(pulumi.ComponentResource):
    """ServiceAccount + ClusterRole (nodes: get, list, patch) + binding + a one-replica
    Deployment running the agent's loop with the pinned kubectl image, and a NetworkPolicy that
    lets no pod connect to it."""

    deployment_name: pulumi.Output[str]
    """Name of the agent's Deployment."""

    def __init__(
        self, name: str, args: StartupTaintAgentArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:StartupTaintAgent", name, None, opts)
        plan = planned(args["stack"])
        namespace = plan.spec.gpu_operator.namespace
        pools = tainted_pools(plan)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app.kubernetes.io/name": AGENT_NAME, **MANAGED_BY}
        role_name = stack_scoped(stack_name(args["stack"]), AGENT_NAME)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=AGENT_NAME, namespace=namespace, labels=labels
            ),
            automount_service_account_token=False,
            opts=child,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=role_name, labels=labels),
            rules=[NODE_TAINTS],
            opts=child,
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=role_name, labels=labels),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(
                    kind="ServiceAccount", name=account.metadata.name, namespace=namespace
                )
            ],
            opts=child,
        )
        env = {
            "AGENT_TARGETS": agent_targets_value(pools),
            "AGENT_POLL_SECONDS": str(AGENT_POLL_SECONDS),
        }
        avoid = [node for pool in plan.pools for node in pool.spec.node_names]
        deployment = k8s.apps.v1.Deployment(
            f"{name}-agent",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=AGENT_NAME,
                namespace=namespace,
                labels=labels,
                annotations={"mig-inference.io/targets": agent_fingerprint(pools)},
            ),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=1,
                # Never two agents at once: the old one stops before the new one starts.
                strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
                selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/name": AGENT_NAME}
                ),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=script_pod(
                        startup_taint_script(), env, account.metadata.name, avoid, "Always"
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding]),
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-deny-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=AGENT_NAME, namespace=namespace, labels=labels
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/name": AGENT_NAME}
                ),
                policy_types=["Ingress"],
            ),
            opts=child,
        )
        self.deployment_name = deployment.metadata.name
        self.register_outputs({"deployment_name": self.deployment_name})
