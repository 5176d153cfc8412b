"""The gateway's Kubernetes objects and chart values, as plain data built from its plan: the
Gateway, one HTTPRoute per namespace, the endpoint picker chart's values per InferencePool, the
body-based router's arguments and istiod's values."""

from __future__ import annotations

import json
from typing import Any

from mig_inference.plan.gateway import (
    MODEL_HEADER,
    ROUTED_PATH,
    GatewayPlan,
    ModelRoute,
    PoolRoute,
)
from mig_inference.spec.gateway import GatewayAddress
from mig_inference.versions import ISTIO_HUB, ISTIO_VERSION

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_API = f"{GATEWAY_GROUP}/v1"
INFERENCE_GROUP = "inference.networking.k8s.io"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ISTIO_SERVICE_TYPE = "networking.istio.io/service-type"
"""The Gateway annotation Istio reads for its gateway Service's type (LoadBalancer by default)."""
GATEWAY_POD_LABEL = "gateway.networking.k8s.io/gateway-name"
"""The label Istio gives the gateway's pods (its `kube-gateway.yaml` template, 1.30.3)."""
PICKER_POD_LABEL = "inferencepool"
"""The label the chart's endpoint picker pods are selected by (`<release>-epp`)."""
EXT_PROC_PORT = 9002
PICKER_METRICS_PORT = 9090
REQUEST_TIMEOUT = "300s"
"""The chart's HTTPRoute timeout (GKE: its GCPBackendPolicy's 300 s instead)."""
WAIT_FOR = "pulumi.com/waitFor"
"""pulumi-kubernetes' await annotation (`condition=...`, `jsonpath=...`, a JSON list of them)."""
BODY_ROUTER = "body-based-router"
BODY_ROUTER_PORT = 9004
BODY_ROUTER_HEALTH_PORT = 9005
ISTIO_NAMESPACE = "istio-system"
BASELINE_NAMESPACE_LABELS = {
    # For namespaces holding pods that meet `baseline`, not `restricted` (still warned and
    # audited): the endpoint picker chart's pods, which declare no security context (v1.5.0 and
    # its successor have no value for one), and an FSx for Lustre cache's fill Job, whose first
    # step runs as root with CAP_CHOWN only (workloads.model_cache).
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}


def gateway_spec(plan: GatewayPlan) -> dict[str, Any]:
    """One HTTP listener, open to the routes of the namespaces the plan routes into."""
    return {
        "gatewayClassName": plan.class_name,
        "listeners": [
            {
                "name": "http",
                "port": plan.spec.port,
                "protocol": "HTTP",
                "allowedRoutes": {
                    "namespaces": {
                        "from": "Selector",
                        "selector": {
                            "matchExpressions": [
                                {
                                    "key": NAMESPACE_NAME_LABEL,
                                    "operator": "In",
                                    "values": plan.namespaces,
                                }
                            ]
                        },
                    }
                },
            }
        ],
    }


def gateway_annotations(plan: GatewayPlan) -> dict[str, str]:
    annotations = {WAIT_FOR: "condition=Programmed"}
    if not plan.spec.managed:
        internal = plan.spec.address is GatewayAddress.INTERNAL
        annotations[ISTIO_SERVICE_TYPE] = "ClusterIP" if internal else "LoadBalancer"
    return annotations


def _backend(pool: PoolRoute) -> dict[str, Any]:
    return {
        "group": INFERENCE_GROUP,
        "kind": "InferencePool",
        "name": pool.name,
        "weight": pool.weight,
    }


def _rule(plan: GatewayPlan, route: ModelRoute) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "matches": [
            {
                "path": {"type": "PathPrefix", "value": ROUTED_PATH},
                "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": route.model}],
            }
        ],
        "backendRefs": [_backend(pool) for pool in route.pools],
    }
    if not plan.spec.managed:
        rule["timeouts"] = {"request": REQUEST_TIMEOUT}
    return rule


def route_spec(plan: GatewayPlan, namespace: str) -> dict[str, Any]:
    """The HTTPRoute of one namespace: a rule per model, its pools weighted."""
    return {
        "parentRefs": [
            {
                "group": GATEWAY_GROUP,
                "kind": "Gateway",
                "name": plan.name,
                "namespace": plan.namespace,
            }
        ],
        "rules": [_rule(plan, route) for route in plan.routes if route.namespace == namespace],
    }


def route_annotations() -> dict[str, str]:
    """`pulumi up` waits until the Gateway accepted the route and resolved its pools."""
    conditions = [
        f'jsonpath={{.status.parents[0].conditions[?(@.type=="{kind}")].status}}=True'
        for kind in ("Accepted", "ResolvedRefs")
    ]
    return {WAIT_FOR: json.dumps(conditions)}


def picker_values(plan: GatewayPlan, pool: PoolRoute) -> dict[str, Any]:
    """The `inferencepool` chart's values for one pool (v1.5.0 keys)."""
    memory = plan.spec.picker_memory_gib
    return {
        "inferencePool": {
            "modelServers": {"matchLabels": dict(pool.selector)},
            "targetPorts": [{"number": pool.port}],
            "modelServerType": "vllm",
        },
        "inferenceExtension": {
            "image": {"pullPolicy": "IfNotPresent"},
            "resources": {
                "requests": {"cpu": f"{plan.spec.picker_cpu:g}", "memory": f"{memory:g}Gi"},
                "limits": {"memory": f"{2 * memory:g}Gi"},
            },
            # The stack's own ServiceMonitor scrapes it; a NetworkPolicy admits only
            # Prometheus's namespace to the metrics port (as the engines' /metrics).
            "monitoring": {"prometheus": {"enabled": False, "auth": {"enabled": False}}},
        },
        "provider": {"name": plan.provider},
    }


def body_router_args() -> list[str]:
    """The router's flags: only the `model` field copied into the header the routes match (the
    chart's second plugin maps LoRA adapters to base models, which this project does not
    serve)."""
    plugin = {"fieldName": "model", "headerName": MODEL_HEADER}
    return [
        "--streaming",
        "--v",
        "3",
        "--plugin",
        f"body-field-to-header:model-extractor:{json.dumps(plugin, separators=(',', ':'))}",
        "--tracing=false",
    ]


def envoy_filter_spec(plan: GatewayPlan, namespace: str) -> dict[str, Any]:
    """Istio: the router as the gateway's first ext_proc filter (the chart's `istio.yaml`)."""
    host = f"{BODY_ROUTER}.{namespace}.svc.cluster.local"
    return {
        "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": plan.name}],
        "configPatches": [
            {
                "applyTo": "HTTP_FILTER",
                "match": {
                    "context": "GATEWAY",
                    "listener": {
                        "filterChain": {
                            "filter": {"name": "envoy.filters.network.http_connection_manager"}
                        }
                    },
                },
                "patch": {
                    "operation": "INSERT_FIRST",
                    "value": {
                        "name": "envoy.filters.http.ext_proc.bbr",
                        "typed_config": {
                            "@type": "type.googleapis.com/"
                            "envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
                            "failure_mode_allow": False,
                            "allow_mode_override": True,
                            "processing_mode": {
                                "request_header_mode": "SEND",
                                "response_header_mode": "SEND",
                                "request_body_mode": "FULL_DUPLEX_STREAMED",
                                "response_body_mode": "FULL_DUPLEX_STREAMED",
                                "request_trailer_mode": "SEND",
                                "response_trailer_mode": "SEND",
                            },
                            "grpc_service": {
                                "envoy_grpc": {
                                    "cluster_name": f"outbound|{BODY_ROUTER_PORT}||{host}"
                                }
                            },
                        },
                    },
                },
            }
        ],
    }


def tls_destination_rule(host: str) -> dict[str, Any]:
    """Istio: the gateway speaks TLS to a self-signed extension server (the router's and the
    endpoint picker's `--secure-serving`, default true)."""
    return {"host": host, "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}}}


def routing_extension_spec(plan: GatewayPlan) -> dict[str, Any]:
    """GKE: the router as the load balancer's routing extension (the chart's `gke.yaml`)."""
    return {
        "targetRefs": [{"group": GATEWAY_GROUP, "kind": "Gateway", "name": plan.name}],
        "extensionChains": [
            {
                "name": "chain1",
                "extensions": [
                    {
                        "name": "ext1",
                        "authority": "myext.com",
                        "timeout": "1s",
                        "supportedEvents": ["RequestHeaders", "RequestBody", "RequestTrailers"],
                        "requestBodySendMode": "FullDuplexStreamed",
                        "backendRef": {
                            "group": "",
                            "kind": "Service",
                            "name": BODY_ROUTER,
                            "port": BODY_ROUTER_PORT,
                        },
                    }
                ],
            }
        ],
    }


def router_health_check_spec(namespace: str) -> dict[str, Any]:
    """GKE: the router's gRPC health port as its health check (the chart's `gke.yaml`)."""
    return {
        "default": {
            "logConfig": {"enabled": True},
            "config": {
                "type": "GRPC",
                "grpcHealthCheck": {
                    "portSpecification": "USE_FIXED_PORT",
                    "port": BODY_ROUTER_HEALTH_PORT,
                },
            },
        },
        "targetRef": {"group": "", "kind": "Service", "name": BODY_ROUTER, "namespace": namespace},
    }


def istiod_values() -> dict[str, Any]:
    """istiod with the inference extension on (`pilot/pkg/features/experimental.go@1.30.3`,
    default false), its images pinned."""
    return {
        "global": {"hub": ISTIO_HUB, "tag": ISTIO_VERSION},
        "env": {"ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "true"},
    }
