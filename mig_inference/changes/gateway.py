"""The gateway in the plan a stack exports, and what `diff` says about a change of it: its class,
address and listener, per model its InferencePool and the capacity each slice size gives it,
and who may call each service.

Turning the gateway on changes who may call the services it fronts: their NetworkPolicy admits
only the gateway's proxies and the model's endpoint picker, so a pod that called the Service
directly is refused from then on. Turning it off gives the service its own callers back. `diff`
reports both per service, though no replica moves.
"""

from __future__ import annotations

from typing import Any

from mig_inference.plan.gateway import GKE_HEALTH_CHECK_RANGES, KEPT_CRDS, GatewayPlan

OWN_CALLERS = "the pods of its namespace (or the clients it names)"
"""Who may call a service the gateway does not front (`workloads.inference`)."""


def _proxies(plan: GatewayPlan) -> str:
    """Who the gateway's proxies are, as the model servers' NetworkPolicy admits them."""
    if plan.spec.managed:
        ranges = ", ".join((str(plan.spec.proxy_subnet), *GKE_HEALTH_CHECK_RANGES))
        return f"GKE's load balancer ({ranges})"
    return f"Istio's gateway pods in {plan.namespace}"


def _endpoint(plan: GatewayPlan) -> str:
    if plan.hostname is not None:
        return f"{plan.spec.scheme}://{plan.hostname}:{plan.spec.port}"
    if plan.in_cluster_url is not None:
        return plan.in_cluster_url
    return f"the address of Gateway {plan.namespace}/{plan.name}"


def _kept_crds(plan: GatewayPlan) -> str | None:
    """The CRDs Pulumi keeps in the cluster when the gateway goes (a joined cluster's)."""
    if plan.spec.managed or not plan.spec.install or plan.created_cluster:
        return None
    return KEPT_CRDS


def kept_crds_change(
    old: dict[str, Any] | None, new: dict[str, Any] | None
) -> tuple[str, str] | None:
    """(what, what becomes of it) when the CRDs a joined cluster's gateway applied are no
    longer the stack's (the gateway off, or no longer installed): they stay."""
    kept = (old or {}).get("kept_crds")
    if not kept or (new or {}).get("kept_crds"):
        return None
    return (
        f"{kept} (kept on delete)",
        "stay in the cluster with every object of them (retainOnDelete; Istio's own CRDs Helm "
        "keeps); delete them by hand once no Gateway, HTTPRoute or InferencePool uses them",
    )


def gateway_record(plan: GatewayPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    tls = plan.spec.tls
    return {
        "class": plan.class_name,
        "namespace": plan.namespace,
        "address": plan.spec.address.value,
        "port": plan.spec.port,
        "protocol": "HTTPS" if tls is not None else "HTTP",
        "hostname": plan.hostname,
        "certificate": tls.source.value if tls is not None else None,
        "endpoint": _endpoint(plan),
        "proxies": _proxies(plan),
        "kept_crds": _kept_crds(plan),
        "pools": {
            pool.model: {
                "pool": pool.name,
                "service": pool.service,
                "namespace": pool.namespace,
                "slices": {
                    s.profile: {"replicas": s.replicas, "share": round(s.share, 3)}
                    for s in pool.slices
                },
                "picker": {
                    "cpu": pool.picker_size.cpu,
                    "memory_gib": pool.picker_size.memory_gib,
                },
                "api_key": pool.api_key,
            }
            for pool in plan.pools
        },
    }


def _pool_text(pool: dict[str, Any]) -> str:
    slices = ", ".join(
        f"{s['replicas']} x {profile} ({s['share']:.0%} of its capacity)"
        for profile, s in pool["slices"].items()
    )
    return (
        f"InferencePool {pool['pool']} ({slices}), each request to the ready replica with the "
        f"shortest queue and emptiest KV cache; pickers {pool['picker']['cpu']:g} CPU, "
        f"{pool['picker']['memory_gib']:g} GiB each"
    )


def gateway_fields(record: dict[str, Any] | None) -> dict[str, str]:
    """The record as `key: value` lines (absent: no gateway). A record exported before one
    InferencePool per model (`routes`: a weight per Deployment) reads as its weighted split."""
    if not record:
        return {}
    listener = f"{record.get('protocol', 'HTTP')} :{record['port']}"
    if record.get("hostname"):
        listener += f" for {record['hostname']}"
    fields = {
        "gateway": f"{record['class']} {record['address']} {listener} in {record['namespace']}"
    }
    for model, pool in (record.get("pools") or {}).items():
        fields[f"gateway route {model}"] = _pool_text(pool)
    for model, weights in (record.get("routes") or {}).items():
        fields[f"gateway route {model}"] = "static split: " + ", ".join(
            f"{name} weight {weight}" for name, weight in weights.items()
        )
    return fields


def _routed(record: dict[str, Any] | None, services: dict[str, Any]) -> dict[str, str]:
    """Service name -> the model it is routed as, in one plan record's gateway."""
    if not record:
        return {}
    routed = {pool["service"]: model for model, pool in (record.get("pools") or {}).items()}
    for model, weights in (record.get("routes") or {}).items():
        for deployment in weights:
            service = (services.get(deployment) or {}).get("group") or deployment
            routed[service] = model
    return routed


def caller_changes(deployed: dict[str, Any], current: dict[str, Any]) -> dict[str, str]:
    """Per Deployment (a service's part, as the records key them) whose callers change with
    this gateway change, what changes: a service that goes behind the gateway refuses its
    direct callers; one that leaves it takes them back; one behind both sees new proxies."""
    old_gateway, new_gateway = deployed.get("gateway"), current.get("gateway")
    before = _routed(old_gateway, deployed["services"])
    after = _routed(new_gateway, current["services"])
    changes: dict[str, str] = {}
    for deployment, record in current["services"].items():
        service = record.get("group") or deployment
        if service in after and service not in before:
            assert new_gateway is not None
            changes[deployment] = (
                f"callers: {OWN_CALLERS} -> only {new_gateway['proxies']} and the model's "
                "endpoint picker (its NetworkPolicy); a pod that called its Service directly is "
                f"refused from now on and must call the gateway at {new_gateway['endpoint']}"
            )
        elif service in before and service not in after:
            changes[deployment] = (
                f"callers: only the gateway -> {OWN_CALLERS}; the gateway no longer routes "
                f"{before[service]!r} to it"
            )
        elif service in before and service in after and old_gateway and new_gateway:
            notes = _gateway_caller_notes(old_gateway, new_gateway, service)
            if notes:
                changes[deployment] = "callers: " + "; ".join(notes)
    return changes


def _pool_of(record: dict[str, Any], service: str) -> dict[str, Any]:
    pools = (record.get("pools") or {}).values()
    return next((pool for pool in pools if pool.get("service") == service), {})


def _gateway_caller_notes(old: dict[str, Any], new: dict[str, Any], service: str) -> list[str]:
    """What the callers of a service behind both gateways must change: who the proxies are, the
    address they call (internal -> external: the in-cluster URL on port 80 goes), the hostname
    the routes answer (only it, once the listener has one), and the API key each /v1 request
    must carry (a service newly keyed, as an external gateway requires)."""
    notes = []
    if old.get("proxies") and old.get("proxies") != new.get("proxies"):
        notes.append(f"{old['proxies']} -> {new['proxies']} (and the model's endpoint picker)")
    if old.get("endpoint") and old.get("endpoint") != new.get("endpoint"):
        notes.append(
            f"call the gateway at {new['endpoint']}, no longer at {old['endpoint']}"
            + (" (an address outside the cluster)" if new.get("address") == "external" else "")
        )
    hostname = new.get("hostname")
    if hostname and hostname != old.get("hostname"):
        notes.append(f"the routes answer requests for host {hostname} only")
    if _pool_of(new, service).get("api_key") and not _pool_of(old, service).get("api_key"):
        notes.append(
            "every /v1 request must carry `Authorization: Bearer <the service's API key>` "
            "(vLLM's --api-key)"
        )
    return notes
