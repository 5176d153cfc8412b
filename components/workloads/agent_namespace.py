"""The namespace of a per-node GPU agent (the GPU Operator's operands, the DRA driver's kubelet
plugin): they run privileged on GPU nodes, so it admits privileged pods."""

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
