"""The gateway in the plan a stack exports, and the fields `diff` compares: its class, address and
listener, and per model the InferencePools its requests go to with their weights. A change of
them moves no replica: the gateway's objects change in place."""

from __future__ import annotations

from typing import Any

from mig_inference.plan.gateway import GatewayPlan


def gateway_record(plan: GatewayPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "class": plan.class_name,
        "namespace": plan.namespace,
        "address": plan.spec.address.value,
        "port": plan.spec.port,
        "routes": {
            route.model: {pool.name: pool.weight for pool in route.pools} for route in plan.routes
        },
    }


def gateway_fields(record: dict[str, Any] | None) -> dict[str, str]:
    """The record as `key: value` lines (absent: no gateway)."""
    if not record:
        return {}
    fields = {
        "gateway": f"{record['class']} {record['address']} :{record['port']} in "
        f"{record['namespace']}"
    }
    for model, pools in record["routes"].items():
        fields[f"gateway route {model}"] = ", ".join(
            f"{name} weight {weight}" for name, weight in pools.items()
        )
    return fields
