"""The egress a pod that downloads a model needs, and nothing more: DNS, and HTTPS outside the
cluster (the Hugging Face Hub and its CDN, or a bucket's API)."""

import pulumi_kubernetes as k8s


def dns_and_https_egress() -> list[k8s.networking.v1.NetworkPolicyEgressRuleArgs]:
    dns = [
        k8s.networking.v1.NetworkPolicyPortArgs(port=53, protocol=protocol)
        for protocol in ("UDP", "TCP")
    ]
    return [
        k8s.networking.v1.NetworkPolicyEgressRuleArgs(ports=dns),
        k8s.networking.v1.NetworkPolicyEgressRuleArgs(
            to=[
                k8s.networking.v1.NetworkPolicyPeerArgs(
                    ip_block=k8s.networking.v1.IPBlockArgs(cidr="0.0.0.0/0")
                )
            ],
            ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=443, protocol="TCP")],
        ),
    ]
