"""The gateway's Kubernetes objects and chart values, as plain data built from its plan: the
Gateway and the parameters of Istio's gateway pods, one HTTPRoute per namespace, the endpoint
picker chart's values per InferencePool, the body-based router's arguments and hooks, the
cert-manager Certificate, and istiod's values."""

from __future__ import annotations

import json
from typing import Any

import yaml

from mig_inference.clouds import Cloud
from mig_inference.plan.gateway import (
    ISTIO_GATEWAY_REPLICAS,
    MODEL_HEADER,
    PICKER_REPLICAS,
    ROUTED_PATH,
    GatewayPlan,
    ModelPool,
)
from mig_inference.spec.gateway import CertificateSource, GatewayAddress
from mig_inference.versions import ISTIO_HUB, ISTIO_VERSION, PICKER_IMAGE

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_API = f"{GATEWAY_GROUP}/v1"
INFERENCE_GROUP = "inference.networking.k8s.io"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
GATEWAY_POD_LABEL = "gateway.networking.k8s.io/gateway-name"
"""The label Istio gives the gateway's pods (its `kube-gateway.yaml` template, 1.30.3)."""
PICKER_POD_LABEL = "llm-d-router-gateway"
"""The label the chart's endpoint picker pods are selected by (`<release>-epp`;
`routerlib/templates/_helpers.tpl@v0.10.0`, selectorLabels)."""
EXT_PROC_PORT = 9002
PICKER_HEALTH_PORT = 9003
PICKER_METRICS_PORT = 9090
REQUEST_TIMEOUT = "300s"
"""The chart's HTTPRoute timeout (GKE: its GCPBackendPolicy's 300 s instead)."""
WAIT_FOR = "pulumi.com/waitFor"
"""pulumi-kubernetes' await annotation (`condition=...`, `jsonpath=...`, a JSON list of them)."""
BODY_ROUTER = "body-based-router"
BODY_ROUTER_PORT = 9004
BODY_ROUTER_HEALTH_PORT = 9005
ISTIO_NAMESPACE = "istio-system"
ISTIO_PARAMETERS = "inference-gateway-istio"
"""The ConfigMap Istio's deployment controller overlays the gateway's generated Deployment,
Service and PodDisruptionBudget with (`spec.infrastructure.parametersRef`; keys `deployment`,
`service`, `podDisruptionBudget`: `pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go`
@1.30.3, `applyOverlay`). A PodDisruptionBudget is rendered only when its overlay is given."""
GKE_CERT_MANAGER_CERTS = "networking.gke.io/cert-manager-certs"
"""GKE's listener TLS option naming Certificate Manager certificates (regional classes)."""
CERT_MANAGER_API = "cert-manager.io/v1"
AWS_NLB_ANNOTATIONS = {
    "service.beta.kubernetes.io/aws-load-balancer-type": "external",
    "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
    "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
}
"""The AWS Load Balancer Controller's Service annotations (`docs/guide/service/annotations.md`
@v3.5.0): `external` hands the Service to it (not the cloud provider's legacy controller), `ip`
targets the gateway pods directly, and the scheme it defaults to is `internal`."""
OCI_LB_SUBNET = "service.beta.kubernetes.io/oci-load-balancer-subnet1"
OCI_LB_ANNOTATIONS = {
    "service.beta.kubernetes.io/oci-load-balancer-shape": "flexible",
    "service.beta.kubernetes.io/oci-load-balancer-shape-flex-min": "10",
    "service.beta.kubernetes.io/oci-load-balancer-shape-flex-max": "100",
}
"""OKE's load balancer annotations (Oracle, "Summary of Annotations for Load Balancers"): a
flexible shape of 10 to 100 Mbps (a choice), in the subnet the stack names
(`OCI_LB_SUBNET`, oracle/oci-cloud-controller-manager `ServiceAnnotationLoadBalancerSubnet1`)."""
BASELINE_NAMESPACE_LABELS = {
    # For namespaces holding pods that meet `baseline`, not `restricted` (still warned and
    # audited): the endpoint picker chart's pods, which declare no security context (llm-d's
    # chart v0.10.0 has no value for one), and an FSx for Lustre cache's fill Job, whose first
    # step runs as root with CAP_CHOWN only (workloads.model_cache).
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
PICKER_FLAGS = {"ha-enable-leader-election": False}
"""Flags after the chart's own: with two replicas the chart passes `--ha-enable-leader-election`
(one Ready leader, the other never Ready, which no PodDisruptionBudget can protect without
blocking every drain of the leader's node); a later `=false` wins (pflag), so both pickers serve
(`cmd/epp/runner/health.go@v0.10.0`: without leader election every health service answers
SERVING once the pool is synced) and a budget of one unavailable always keeps one."""
PICKER_CONFIG_FILE = "active-active.yaml"
PICKER_CONFIG = {
    "apiVersion": "llm-d.ai/v1alpha1",
    "kind": "EndpointPickerConfig",
    "plugins": [
        {"type": "queue-scorer"},
        {"type": "kv-cache-utilization-scorer"},
        {
            "type": "metrics-data-source",
            "parameters": {"scheme": "http", "path": "/metrics", "insecureSkipVerify": True},
        },
        {"type": "core-metrics-extractor"},
    ],
    "schedulingProfiles": [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "queue-scorer", "weight": 2},
                {"pluginRef": "kv-cache-utilization-scorer", "weight": 2},
            ],
        }
    ],
}
"""The chart's default plugins less its prefix-cache scorer: llm-d's sizing guide warns that
"Active-Active mode should be avoided when using approximate prefix routing" (each replica sees
half the requests); queue depth and KV-cache use are scraped from every pod by each replica
alike (`routerlib/templates/_config.yaml@v0.10.0`)."""


def listener_spec(plan: GatewayPlan) -> dict[str, Any]:
    """One listener, HTTPS when the stack names a certificate, open to the routes of the
    namespaces the plan routes into only."""
    tls = plan.spec.tls
    listener: dict[str, Any] = {
        "name": "https" if tls is not None else "http",
        "port": plan.spec.port,
        "protocol": "HTTPS" if tls is not None else "HTTP",
        "allowedRoutes": {
            "namespaces": {
                "from": "Selector",
                "selector": {
                    "matchExpressions": [
                        {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": plan.namespaces}
                    ]
                },
            }
        },
    }
    if tls is not None:
        if tls.hostname is not None:
            listener["hostname"] = tls.hostname
        if tls.source is CertificateSource.GCP:
            listener["tls"] = {
                "mode": "Terminate",
                "options": {GKE_CERT_MANAGER_CERTS: ",".join(tls.gcp_certificates)},
            }
        else:
            listener["tls"] = {
                "mode": "Terminate",
                "certificateRefs": [{"group": "", "kind": "Secret", "name": tls.secret}],
            }
    return listener


def gateway_spec(plan: GatewayPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {"gatewayClassName": plan.class_name, "listeners": [listener_spec(plan)]}
    if not plan.spec.managed:
        spec["infrastructure"] = {
            "parametersRef": {"group": "", "kind": "ConfigMap", "name": ISTIO_PARAMETERS}
        }
    return spec


def gateway_annotations() -> dict[str, str]:
    """`pulumi up` waits until the Gateway's controller accepted and programmed it."""
    return {WAIT_FOR: json.dumps(["condition=Accepted", "condition=Programmed"])}


def load_balancer_annotations(plan: GatewayPlan) -> dict[str, str]:
    """What the cloud's load balancer controller reads on the Service of an external Istio
    gateway (an existing cluster's implementation takes none)."""
    spec = plan.spec
    if spec.managed or spec.address is not GatewayAddress.EXTERNAL:
        return {}
    if spec.cloud is Cloud.EKS:
        return dict(AWS_NLB_ANNOTATIONS)
    if spec.cloud is Cloud.OKE:
        subnet = {OCI_LB_SUBNET: spec.load_balancer_subnet} if spec.load_balancer_subnet else {}
        return {**OCI_LB_ANNOTATIONS, **subnet}
    return {}


def istio_parameters(plan: GatewayPlan) -> dict[str, str]:
    """The overlays of Istio's gateway objects: two replicas on different nodes where there are
    two, a budget that keeps one, and the Service's type (ClusterIP inside the cluster,
    LoadBalancer outside) with the cloud's load balancer annotations. The Service's type is set
    here, not by the `networking.istio.io/service-type` annotation, which istiod 1.30 marks the
    Gateway not Accepted for (DeprecatedField: `conversion.go`, extractGatewayServices)."""
    internal = plan.spec.address is GatewayAddress.INTERNAL
    service: dict[str, Any] = {"spec": {"type": "ClusterIP" if internal else "LoadBalancer"}}
    annotations = load_balancer_annotations(plan)
    if annotations:
        service["metadata"] = {"annotations": annotations}
    deployment = {
        "spec": {
            "replicas": ISTIO_GATEWAY_REPLICAS,
            "template": {"spec": {"affinity": spread(GATEWAY_POD_LABEL, plan.name)}},
        }
    }
    budget = {"spec": {"minAvailable": ISTIO_GATEWAY_REPLICAS - 1}}
    return {
        "deployment": yaml.safe_dump(deployment, sort_keys=True),
        "service": yaml.safe_dump(service, sort_keys=True),
        "podDisruptionBudget": yaml.safe_dump(budget, sort_keys=True),
    }


def spread(label: str, value: str) -> dict[str, Any]:
    """Prefer replicas on different nodes (preferred: a one-node system pool still runs both)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {label: value}},
                    },
                }
            ]
        }
    }


def _rule(plan: GatewayPlan, pool: ModelPool) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "matches": [
            {
                "path": {"type": "PathPrefix", "value": ROUTED_PATH},
                "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": pool.model}],
            }
        ],
        # One InferencePool, its own endpoint picker (istio/istio#61594: one picker per rule).
        "backendRefs": [{"group": INFERENCE_GROUP, "kind": "InferencePool", "name": pool.name}],
    }
    if not plan.spec.managed:
        rule["timeouts"] = {"request": REQUEST_TIMEOUT}
    return rule


def route_spec(plan: GatewayPlan, namespace: str) -> dict[str, Any]:
    """The HTTPRoute of one namespace: a rule per model, each to the model's InferencePool."""
    spec: dict[str, Any] = {
        "parentRefs": [
            {
                "group": GATEWAY_GROUP,
                "kind": "Gateway",
                "name": plan.name,
                "namespace": plan.namespace,
            }
        ],
        "rules": [_rule(plan, pool) for pool in plan.pools if pool.namespace == namespace],
    }
    if plan.hostname is not None:
        spec["hostnames"] = [plan.hostname]
    return spec


def route_annotations() -> dict[str, str]:
    """`pulumi up` waits until the Gateway accepted the route and resolved its pools: a route
    whose InferencePool or picker is missing is Accepted but not ResolvedRefs, and serves 500s."""
    conditions = [
        f'jsonpath={{.status.parents[0].conditions[?(@.type=="{kind}")].status}}=True'
        for kind in ("Accepted", "ResolvedRefs")
    ]
    return {WAIT_FOR: json.dumps(conditions)}


def picker_values(plan: GatewayPlan, pool: ModelPool) -> dict[str, Any]:
    """llm-d's `llm-d-router-gateway` chart's values for one model (v0.10.0 keys)."""
    size = pool.picker_size
    return {
        "router": {
            "modelServers": {
                "matchLabels": dict(pool.selector),
                "targetPorts": [{"number": pool.port}],
                "type": "vllm",
                "protocol": "http",
            },
            "inferencePool": {"create": True, "failureMode": "FailOpen"},
            "epp": {
                "replicas": PICKER_REPLICAS,
                "image": {**PICKER_IMAGE, "pullPolicy": "IfNotPresent"},
                "flags": dict(PICKER_FLAGS),
                "pluginsConfigFile": PICKER_CONFIG_FILE,
                "pluginsCustomConfig": {
                    PICKER_CONFIG_FILE: yaml.safe_dump(PICKER_CONFIG, sort_keys=False)
                },
                "resources": {
                    "requests": {"cpu": size.cpu_text, "memory": size.memory_text},
                    "limits": {"memory": size.memory_limit_text},
                },
                "affinity": spread(PICKER_POD_LABEL, pool.picker),
            },
            # The stack's own ServiceMonitor scrapes it; a NetworkPolicy admits only
            # Prometheus's namespace to the metrics port (as the engines' /metrics).
            "monitoring": {"prometheus": {"enabled": False, "auth": {"enabled": False}}},
        },
        "provider": {"name": plan.provider},
    }


def certificate_spec(plan: GatewayPlan) -> dict[str, Any] | None:
    """cert-manager: the listener's certificate for its hostname, written to the Secret the
    listener reads (cert-manager.io/v1 `Certificate`: `secretName`, `dnsNames`, `issuerRef`)."""
    tls = plan.spec.tls
    if tls is None or tls.source is not CertificateSource.CERT_MANAGER:
        return None
    return {
        "secretName": tls.secret,
        "dnsNames": [tls.hostname],
        "issuerRef": {
            "name": tls.issuer,
            "kind": tls.issuer_kind.value,
            "group": "cert-manager.io",
        },
        "privateKey": {"rotationPolicy": "Always"},
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


BODY_ROUTER_FAILS_OPEN = False
"""Whether the gateway passes a request on when the body-based router cannot be reached. It does
not: a request it did not read carries no model header (unless its client set one) and would
match no route, so failing open turns the outage into 404s while hiding it; with two replicas
under a budget, one eviction no longer reaches this point. (The chart's value as well.)"""


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
                            "failure_mode_allow": BODY_ROUTER_FAILS_OPEN,
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
    """Istio: the gateway speaks TLS to a self-signed extension server (the router's
    `--secure-serving`, default true)."""
    return {"host": host, "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}}}


def routing_extension_spec(plan: GatewayPlan) -> dict[str, Any]:
    """GKE: the router as the load balancer's routing extension (the chart's `gke.yaml`); a
    Service Extensions callout fails closed unless `failOpen` is set (Network Services API,
    `ExtensionChain.Extension.failOpen`, default false), like the Istio filter."""
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
