"""Who may connect to what behind the gateway: its proxies (Istio's gateway pods, or on GKE the
load balancer's proxy-only subnet and Google's health checks) and each model's endpoint picker."""

import pulumi_kubernetes as k8s

from mig_inference.kube.gateway import GATEWAY_POD_LABEL, NAMESPACE_NAME_LABEL, PICKER_POD_LABEL
from mig_inference.plan.gateway import GKE_HEALTH_CHECK_RANGES, GatewayPlan, ModelPool


def proxy_peers(plan: GatewayPlan) -> list[k8s.networking.v1.NetworkPolicyPeerArgs]:
    """The gateway's proxies, as a NetworkPolicy peer list."""
    if plan.spec.managed:
        assert plan.spec.proxy_subnet is not None
        return [
            k8s.networking.v1.NetworkPolicyPeerArgs(
                ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr)
            )
            for cidr in (plan.spec.proxy_subnet, *GKE_HEALTH_CHECK_RANGES)
        ]
    return [
        k8s.networking.v1.NetworkPolicyPeerArgs(
            namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                match_labels={NAMESPACE_NAME_LABEL: plan.namespace}
            ),
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={GATEWAY_POD_LABEL: plan.name}),
        )
    ]


def picker_peer(pool: ModelPool) -> k8s.networking.v1.NetworkPolicyPeerArgs:
    """The model's endpoint picker, which reads each replica's /metrics on the serving port."""
    return k8s.networking.v1.NetworkPolicyPeerArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels={PICKER_POD_LABEL: pool.picker})
    )
