"""The Pulumi program: stack config -> spec -> plan -> cluster -> GPU Operator -> (in-place
re-partitioning) -> pools -> MIG-ready gate -> inference services. Everything that can fail on
bad input fails here, before any resource."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.cloud import cluster, cluster_autoscaler, gpu_pools
from components.cluster_access import kubernetes_provider
from components.gpu_operator import GpuOperator, GpuOperatorArgs
from components.inference import InferenceService, InferenceServiceArgs
from components.mig_gate import MigReadyGate, MigReadyGateArgs
from components.monitoring import Keda, Monitoring, MonitoringArgs
from components.repartition import InPlaceRepartition, InPlaceRepartitionArgs
from mig.errors import MigError
from mig.gate import gate_targets
from mig.operator_values import critical_pods_quota, gpu_operator_values, operator_needed
from mig.plan import StackPlan, layout_of, plan_stack
from mig.record import plan_record
from mig.repartition import repartition_targets
from mig.spec import NAMESPACE, TOP_KEYS, parse_stack
from mig.versions import GPU_OPERATOR_VERSION


def read_plan() -> StackPlan:
    config = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {}
    for key in TOP_KEYS:
        if config.get(key) is None:
            continue
        values[key] = config.get(key) if key == "cloud" else config.get_object(key)
    referenced = {
        str(service.get(field))
        for service in values.get("services") or []
        if isinstance(service, dict)
        for field in ("hfTokenSecret", "apiKeySecret")
        if service.get(field)
    }
    if isinstance(values.get("cluster"), dict) and values["cluster"].get("kubeconfig"):
        referenced.add(str(values["cluster"]["kubeconfig"]))
    secrets = frozenset(
        name for name in referenced if pulumi.runtime.is_config_secret(f"{NAMESPACE}:{name}")
    )
    try:
        spec = parse_stack(
            pulumi.get_stack(),
            values,
            secret_keys=secrets,
            pinned_operator_version=GPU_OPERATOR_VERSION,
        )
        return plan_stack(spec)
    except MigError as error:
        # RunError ends the program with just this message: no traceback, nothing created.
        raise pulumi.RunError(str(error)) from None


plan = read_plan()
for warning in plan.warnings:
    pulumi.log.warn(warning)
config = pulumi.Config(NAMESPACE)
operator_spec = plan.spec.gpu_operator
joined = cluster(plan)
kubernetes = kubernetes_provider(
    plan.spec.cloud,
    plan.spec.cluster,
    joined.kubeconfig,
    joined.cloud_provider,
    pulumi.ResourceOptions(depends_on=joined.created or None),
)
k8s_opts = pulumi.ResourceOptions(providers=[kubernetes])

# Pools come up after the operator, so a new node's MIG manager finds its config; a pool that
# changes its layout in place is relabelled only after its nodes were re-partitioned one by one.
pool_after: dict[str, list[pulumi.Resource]] = {}
operator: GpuOperator | None = None
if operator_needed(plan):
    operator = GpuOperator(
        "gpu-operator",
        GpuOperatorArgs(
            cloud=plan.spec.cloud,
            namespace=operator_spec.namespace,
            version=operator_spec.version,
            values=gpu_operator_values(plan),
            timeout_seconds=operator_spec.timeout_seconds,
            critical_pods_quota=critical_pods_quota(plan),
        ),
        pulumi.ResourceOptions(providers=[kubernetes], depends_on=joined.created or None),
    )
    for pool in plan.pools:
        if pool.operator_managed:
            pool_after[pool.name] = [operator]
    for target in repartition_targets(plan):
        pool_after[target.pool].append(
            InPlaceRepartition(
                f"repartition-{target.pool}",
                InPlaceRepartitionArgs(
                    stack=plan.spec.stack,
                    namespace=operator_spec.namespace,
                    target=target,
                    node_timeout_seconds=operator_spec.gate_timeout_seconds,
                ),
                pulumi.ResourceOptions(providers=[kubernetes], depends_on=[operator]),
            )
        )
pools = gpu_pools(plan, joined, kubernetes, pool_after)
cluster_autoscaler(plan, joined, kubernetes, pools)

ready: list[pulumi.Resource] = [*pools, *([operator] if operator else [])]
targets = gate_targets(plan)
if operator is not None and operator_spec.gate and targets:
    ready = [
        MigReadyGate(
            "mig-ready",
            MigReadyGateArgs(
                stack=plan.spec.stack,
                namespace=operator_spec.namespace,
                targets=targets,
                timeout_seconds=operator_spec.gate_timeout_seconds,
            ),
            pulumi.ResourceOptions(providers=[kubernetes], depends_on=ready),
        )
    ]

namespaces = {
    name: k8s.core.v1.Namespace(
        f"ns-{name}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=name,
            labels={
                # Inference pods meet the restricted Pod Security Standard.
                "pod-security.kubernetes.io/enforce": "restricted",
                "app.kubernetes.io/managed-by": "mig-inference",
            },
        ),
        opts=k8s_opts,
    )
    for name in sorted({service.spec.namespace for service in plan.services})
}
if plan.spec.monitoring.prometheus_operator:
    Monitoring(
        "monitoring",
        MonitoringArgs(plan=plan, namespace=plan.spec.monitoring.prometheus_namespace),
        pulumi.ResourceOptions(providers=[kubernetes], depends_on=[*ready, *namespaces.values()]),
    )
keda = (
    [Keda("keda", pulumi.ResourceOptions(providers=[kubernetes]))]
    if any(s.spec.queue_autoscaling for s in plan.services)
    else []
)

endpoints = {}
for service in plan.services:
    spec = service.spec
    deployed = InferenceService(
        service.name,
        InferenceServiceArgs(
            service=service,
            hf_token=config.require_secret(spec.hf_token_secret) if spec.hf_token_secret else None,
            api_key=config.require_secret(spec.api_key_secret) if spec.api_key_secret else None,
            prometheus_url=plan.spec.monitoring.prometheus_url,
            scrape_annotations=plan.spec.monitoring.scrape_annotations,
            prometheus_namespace=plan.spec.monitoring.prometheus_namespace
            if plan.spec.monitoring.scraped
            else None,
        ),
        pulumi.ResourceOptions(
            providers=[kubernetes], depends_on=[*ready, *keda, namespaces[spec.namespace]]
        ),
    )
    endpoints[service.name] = deployed.endpoint

if joined.kubeconfig is not None:
    pulumi.export("kubeconfig", joined.kubeconfig)
pulumi.export("plan", plan_record(plan))
pulumi.export(
    "pools",
    {
        pool.name: {
            "gpu": pool.gpu.name,
            "gpus_per_node": pool.gpus_per_node,
            "nodes": {"min": pool.min_nodes, "max": pool.max_nodes},
            "layout": layout_of(pool),
            "capacity_per_node": pool.capacity_per_node(),
            "capacity": pool.capacity(),
        }
        for pool in plan.pools
    },
)
pulumi.export(
    "services",
    {
        service.name: {
            "pool": service.pool.name,
            "profile": service.profile,
            "resource": service.resource,
            "replicas": service.replicas,
            "endpoint": endpoints[service.name],
        }
        for service in plan.services
    },
)
