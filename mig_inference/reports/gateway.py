"""The gateway in `python -m mig plan`: its endpoint, and per model its InferencePool, the
capacity each slice size gives it, and what its endpoint pickers ask."""

from __future__ import annotations

from typing import Any

from mig_inference.plan.gateway import MODEL_HEADER, PICKER_REPLICAS, GatewayPlan
from mig_inference.spec.gateway import GatewayAddress


def endpoint_text(plan: GatewayPlan) -> str:
    """Where clients send their requests."""
    scheme, port = plan.spec.scheme, plan.spec.port
    if plan.hostname is not None:
        return f"{scheme}://{plan.hostname}:{port} (the listener's certificate's hostname)"
    if plan.in_cluster_url is not None:
        internal = plan.spec.address is GatewayAddress.INTERNAL
        exposed = "in-cluster Service" if internal else "LoadBalancer Service"
        return f"{plan.in_cluster_url} ({exposed} of Istio's gateway)"
    return (
        f"{scheme}://<the address GKE gives Gateway {plan.namespace}/{plan.name}>:{port} "
        f"({plan.class_name}: the stack output `gateway` holds it once programmed)"
    )


def gateway_routes(plan: GatewayPlan | None) -> list[dict[str, Any]]:
    """Per model, its InferencePool and what each slice size's replicas give it."""
    if plan is None:
        return []
    return [
        {
            "model": pool.model,
            "namespace": pool.namespace,
            "inference_pool": pool.name,
            "endpoint_picker": pool.picker,
            "service": pool.service,
            "capacity_in": pool.unit,
            "authenticated": pool.api_key,
            "slices": [
                {
                    "deployment": s.deployment,
                    "profile": s.profile,
                    "replicas": s.replicas,
                    "each": s.rate,
                    "share_of_capacity": round(s.share, 3),
                }
                for s in pool.slices
            ],
            "pickers": {
                "replicas": PICKER_REPLICAS,
                "cpu": pool.picker_size.cpu,
                "memory_gib": pool.picker_size.memory_gib,
                "sized_from": pool.picker_size.basis,
            },
        }
        for pool in plan.pools
    ]


def gateway_json(plan: GatewayPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    tls = plan.spec.tls
    return {
        "name": plan.name,
        "namespace": plan.namespace,
        "class": plan.class_name,
        "address": plan.spec.address.value,
        "port": plan.spec.port,
        "protocol": "HTTPS" if tls is not None else "HTTP",
        "hostname": plan.hostname,
        "certificate": tls.source.value if tls is not None else None,
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
        f"  routes by the request's model ({MODEL_HEADER}, set by the body-based router), one "
        "InferencePool per model; its pickers send each request to the ready replica with the "
        "shortest queue and emptiest KV cache:",
    ]
    for pool in plan.pools:
        parts = ", ".join(
            f"{s.replicas} x {s.profile} at {s.rate:g} {pool.unit} each ({s.share:.0%} of its "
            "capacity)"
            for s in pool.slices
        )
        key = "" if pool.api_key else " (no API key)"
        lines.append(f"    {pool.model} -> {pool.name}{key}: {parts}")
        size = pool.picker_size
        lines.append(
            f"      {PICKER_REPLICAS} endpoint pickers, {size.cpu:g} CPU and {size.memory_gib:g} "
            f"GiB each ({size.basis})"
        )
    for name, why in plan.unrouted:
        lines.append(f"  not behind it: {name} ({why})")
    lines.append("")
    return lines
