"""The namespace of a per-node GPU agent (the GPU Operator's operands, the DRA driver's kubelet
plugin): they run privileged on GPU nodes, so it admits privileged pods; on GKE, a quota lets
them run at the system-critical priorities they ask for."""

import pulumi
import pulumi_kubernetes as k8s

PRIVILEGED_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "app.kubernetes.io/managed-by": "mig-inference",
}


def agent_namespace(name: str, namespace: str, parent: pulumi.Resource) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels=PRIVILEGED_NAMESPACE_LABELS),
        opts=pulumi.ResourceOptions(parent=parent),
    )


CRITICAL_PRIORITY_CLASSES = ["system-node-critical", "system-cluster-critical"]


def critical_pods_quota(
    name: str, quota: str, namespace: k8s.core.v1.Namespace, pods: int, parent: pulumi.Resource
) -> k8s.core.v1.ResourceQuota:
    """GKE admits system-node/cluster-critical pods outside kube-system only when a quota
    scoped to those priority classes exists in their namespace (NVIDIA's GPU Operator guide for
    GKE makes one in the operator's namespace; without one, a DaemonSet of the DRA driver
    reports `FailedCreate: insufficient quota to match these scopes`,
    shared/reference/dra/NOTES-0.5.md section 3)."""
    return k8s.core.v1.ResourceQuota(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=quota, namespace=namespace.metadata.name),
        spec=k8s.core.v1.ResourceQuotaSpecArgs(
            hard={"pods": str(pods)},
            scope_selector=k8s.core.v1.ScopeSelectorArgs(
                match_expressions=[
                    k8s.core.v1.ScopedResourceSelectorRequirementArgs(
                        scope_name="PriorityClass",
                        operator="In",
                        values=CRITICAL_PRIORITY_CLASSES,
                    )
                ]
            ),
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[namespace]),
    )
