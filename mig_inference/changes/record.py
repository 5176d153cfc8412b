"""The plan a stack exports (`pulumi stack output plan`), and what `python -m mig diff` compares.

The record holds, per pool, everything a change plan needs: the generation and the inputs it
hashes (those needing new nodes), the inputs the cloud updates in place, the layout, capacity and
rollout; per service, its pool, generation, profile, replicas and a fingerprint of its pod.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mig_inference.changes.gateway import gateway_record
from mig_inference.kube.engines import engine_container
from mig_inference.names.digest import short_hash
from mig_inference.plan import PoolPlan, ServicePlan, StackPlan, layout_of
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.plan.sharing import sharing_text

RECORD_FORMAT = "mig-inference/plan/v2"
"""v2 adds the stack's own values, so `diff` can run the deployed version again."""


def _in_place_inputs(pool: PoolPlan) -> dict[str, str]:
    """Inputs of the pool that change without new nodes (when not a replacement input)."""
    spec = pool.spec
    values = {
        "nodes": f"{pool.min_nodes}"
        if not pool.autoscaled
        else f"{pool.min_nodes}-{pool.max_nodes}",
        "labels": ",".join(f"{k}={v}" for k, v in sorted(spec.labels.items())),
        "taints": ",".join(f"{key}={value}:{effect}" for key, value, effect in pool.taints),
        "zones": ",".join(sorted(pool.zones)),
        "mig": pool.config_name,
        "sharing": sharing_text(spec.sharing),
    }
    if spec.node_names:
        values["nodeNames"] = ",".join(spec.node_names)
    return {k: v for k, v in values.items() if k not in pool.replacement_inputs}


def pool_record(pool: PoolPlan, protect: bool) -> dict[str, Any]:
    return {
        "generation": pool.generation,
        "physical_name": pool.physical_name,
        "config": pool.config_name,
        "rollout": pool.rollout.value,
        "max_unavailable": pool.max_unavailable,
        "operator_managed": pool.operator_managed,
        "gpu": pool.gpu.name,
        "gpus_per_node": pool.gpus_per_node,
        "nodes": {"min": pool.min_nodes, "max": pool.max_nodes},
        "nodes_per_zone": pool.nodes_per_zone,
        "zones": list(pool.zones),
        "protect": protect,
        "capacity": str(pool.spec.capacity),
        "reservation": pool.spec.reservation,
        "replacement_inputs": dict(pool.replacement_inputs),
        "legacy_inputs": dict(pool.legacy_inputs),
        "in_place_inputs": _in_place_inputs(pool),
        "capacity_per_node": pool.capacity_per_node(),
        "layout": layout_of(pool),
    }


def pod_fingerprint(service: ServicePlan, cache: ModelCachePlan | None = None) -> str:
    """Changes whenever the service's pod template would: image, command line (where the
    weights come from), requests, placement. A change rolls the Deployment's replicas (one at a
    time)."""
    engine = engine_container(service, cache)
    parts = {
        "image": engine.image,
        "command": engine.command,
        "args": engine.args,
        "env": engine.env,
        "resource": service.resource,
        "requests": (service.cpu_millicores, service.memory_mib, service.shm_mib),
        "selector": sorted(service.node_selector.items()),
        "tolerations": [sorted(t.items()) for t in service.pool.tolerations],
        "port": service.spec.port,
    }
    text = json.dumps(parts, sort_keys=True, default=list)
    return short_hash(text, 12)


def weights_record(plan: StackPlan, service: ServicePlan) -> dict[str, Any]:
    """Where the service's weights come from, and how many bytes: what `diff` counts hub
    downloads from."""
    load = plan.load[service.name]
    cache = plan.model_cache
    model = cache.model_of(service.name) if cache is not None else None
    return {
        "model": service.spec.model,
        "revision": service.spec.revision,
        "bytes": load.bytes_per_replica,
        "source": load.source,
        "cached": None
        if model is None or cache is None
        else f"{cache.storage.value}:{model.model}@{model.revision}",
        "replica_seconds": round(load.replica_seconds),
    }


def service_record(service: ServicePlan, plan: StackPlan) -> dict[str, Any]:
    return {
        "pool": service.pool.name,
        "namespace": service.spec.namespace,
        "generation": service.pool.generation,
        "profile": service.profile,
        "resource": service.resource,
        "replicas": service.replicas,
        "max_replicas": max(service.replicas, service.spec.autoscaled_max),
        "pod": pod_fingerprint(service, plan.model_cache),
        "group": service.group,
        "weights": weights_record(plan, service),
    }


def plan_record(
    plan: StackPlan,
    values: Mapping[str, Any] | None = None,
    secret_keys: Iterable[str] = (),
) -> dict[str, Any]:
    """The JSON-ready record of a stack's plan, as the program exports it, with the stack-file
    values it was planned from (secret keys by name only: their values never leave Pulumi)."""
    return {
        "format": RECORD_FORMAT,
        "stack": plan.spec.stack,
        "cloud": plan.spec.cloud.value,
        "values": dict(values) if values is not None else None,
        "secret_keys": sorted(secret_keys),
        "pools": {pool.name: pool_record(pool, plan.spec.cluster.protect) for pool in plan.pools},
        "services": {service.name: service_record(service, plan) for service in plan.services},
        "gateway": gateway_record(plan.gateway),
    }
