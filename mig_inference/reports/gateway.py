"""The gateway in `python -m mig plan`: its endpoint, and which pools each model's requests go
to, in what shares."""

from __future__ import annotations

from typing import Any

from mig_inference.plan.gateway import MODEL_HEADER, GatewayPlan
from mig_inference.spec.gateway import GatewayAddress


def endpoint_text(plan: GatewayPlan) -> str:
    """Where clients send their requests."""
    if plan.in_cluster_url is not None:
        internal = plan.spec.address is GatewayAddress.INTERNAL
        exposed = "in-cluster Service" if internal else "LoadBalancer Service"
        return f"{plan.in_cluster_url} ({exposed} of Istio's gateway)"
    return (
        f"http://<the address GKE gives Gateway {plan.namespace}/{plan.name}>:{plan.spec.port} "
        f"({plan.class_name}: the stack output `gateway` holds it once programmed)"
    )


def gateway_routes(plan: GatewayPlan | None) -> list[dict[str, Any]]:
    """Per model, the InferencePools its requests go to and their weights."""
    if plan is None:
        return []
    return [
        {
            "model": route.model,
            "namespace": route.namespace,
            "weighted_by": route.unit,
            "pools": [
                {
                    "inference_pool": pool.name,
                    "endpoint_picker": pool.picker,
                    "service": pool.service,
                    "profile": pool.profile,
                    "replicas": pool.replicas,
                    "each": pool.rate,
                    "weight": pool.weight,
                }
                for pool in route.pools
            ],
        }
        for route in plan.routes
    ]


def gateway_json(plan: GatewayPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "name": plan.name,
        "namespace": plan.namespace,
        "class": plan.class_name,
        "address": plan.spec.address.value,
        "port": plan.spec.port,
        "endpoint": plan.in_cluster_url,
        "installs": plan.spec.install,
        "routes": gateway_routes(plan),
        "not_routed": [{"service": name, "why": why} for name, why in plan.unrouted],
    }


def gateway_text(plan: GatewayPlan | None) -> list[str]:
    if plan is None:
        return []
    install = (
        "; installs Istio and the CRDs"
        if plan.spec.install
        else ("" if plan.spec.managed else "; uses the cluster's Istio and CRDs")
    )
    lines = [
        f"gateway ({plan.class_name}, Gateway {plan.namespace}/{plan.name}{install}):",
        f"  endpoint: {endpoint_text(plan)}",
        f"  routes by the request's model ({MODEL_HEADER}, set by the body-based router):",
    ]
    for route in plan.routes:
        total = sum(p.weight for p in route.pools) or 1
        parts = ", ".join(
            f"{p.name} {p.weight / total:.0%} ({p.replicas} x {p.profile} at {p.rate:g} "
            f"{route.unit} each)"
            for p in route.pools
        )
        lines.append(f"    {route.model} -> {parts}")
    for name, why in plan.unrouted:
        lines.append(f"  not behind it: {name} ({why})")
    lines.append("")
    return lines
