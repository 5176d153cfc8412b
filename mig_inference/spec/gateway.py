"""`mig-inference:gateway`: one address for every model of the stack, through the Gateway API
Inference Extension (an InferencePool and endpoint picker per Deployment, routed by model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError
from mig_inference.spec import formats
from mig_inference.spec.model import Engine, ServiceSpec
from mig_inference.spec.reader import ConfigNode, dns_label

GATEWAY_KEYS = ("enabled", "address", "namespace", "port", "install", "proxySubnet",
                "endpointPicker")  # fmt: skip
PICKER_KEYS = ("cpu", "memoryGiB")
ROUTED_ENGINES = frozenset({Engine.VLLM})
"""Engines the gateway fronts: an OpenAI API whose requests carry the model, and the metrics the
endpoint picker scores by (vLLM's queue and KV-cache gauges)."""
LISTENER_PORT = formats.Bound(1, 65535, "a TCP port")
PICKER_CPU = formats.Bound(0, 64, "sanity: the chart asks 4", exclusive_minimum=True)
PICKER_MEMORY_GIB = formats.Bound(0, 256, "sanity: the chart asks 8", exclusive_minimum=True)
DEFAULT_NAMESPACE = "inference-gateway"


class GatewayAddress(StrEnum):
    INTERNAL = "internal"
    """GKE: a regional internal Application Load Balancer (`gke-l7-rilb`); elsewhere a
    ClusterIP Service in front of Istio's gateway pods."""
    EXTERNAL = "external"
    """GKE: a regional external Application Load Balancer; elsewhere a LoadBalancer Service."""


@dataclass(frozen=True)
class GatewaySpec:
    address: GatewayAddress = GatewayAddress.INTERNAL
    namespace: str = DEFAULT_NAMESPACE
    """The Gateway's namespace, with the body-based router (and Istio's gateway pods)."""
    port: int = 80
    """The HTTP listener's port."""
    install: bool = True
    """EKS, OKE, existing: install Istio and the Gateway API and InferencePool CRDs (false: the
    cluster runs them already)."""
    proxy_subnet: str | None = None
    """GKE: the range of the region's proxy-only subnet, where the load balancer's proxies
    connect from (the model servers' NetworkPolicy admits it)."""
    picker_cpu: float = 4.0
    """CPU each endpoint picker requests (the chart's default, sized for high request rates)."""
    picker_memory_gib: float = 8.0
    """Memory each endpoint picker requests; its limit is twice that (as the chart's)."""
    managed: bool = False
    """GKE: the cloud runs the Gateway controller and its CRDs (its managed gateway classes)."""


def gateway_spec(node: ConfigNode, cloud: Cloud) -> GatewaySpec | None:
    """The stack's gateway; None when the section is absent or `enabled: false`."""
    if node.value is None:
        return None
    node.mapping(GATEWAY_KEYS)
    if not node.child("enabled").boolean(True):
        return None
    gke = cloud is Cloud.GKE
    install = node.child("install")
    if gke and install.value is not None:
        install.problem(
            "GKE runs the Gateway controller and its CRDs itself (its managed gateway classes); "
            "install applies to eks, oke and existing clusters",
            None,
        )
    subnet = node.child("proxySubnet")
    proxy_subnet = subnet.text(formats.IPV4_CIDR)
    if gke and proxy_subnet is None and subnet.value is None:
        proxy_subnet = subnet.problem(
            "is required on GKE: the range of the region's proxy-only subnet (the regional "
            "load balancers' proxies connect to the model servers from it)",
            "0.0.0.0/32",
        )
    if not gke and subnet.value is not None:
        proxy_subnet = subnet.problem(
            "applies to GKE only: elsewhere Istio's gateway pods reach the model servers", None
        )
    picker = node.child("endpointPicker")
    if picker.value is not None:
        picker.mapping(PICKER_KEYS)
    cpu = picker.child("cpu").number(4.0, bound=PICKER_CPU)
    memory = picker.child("memoryGiB").number(8.0, bound=PICKER_MEMORY_GIB)
    port = node.child("port").integer(80, bound=LISTENER_PORT)
    assert cpu is not None and memory is not None and port is not None
    return GatewaySpec(
        address=node.child("address").choice(GatewayAddress, GatewayAddress.INTERNAL),
        namespace=dns_label(node.child("namespace"), 63)
        if node.child("namespace").value is not None
        else DEFAULT_NAMESPACE,
        port=port,
        install=False if gke else install.boolean(True),
        proxy_subnet=proxy_subnet if gke else None,
        picker_cpu=cpu,
        picker_memory_gib=memory,
        managed=gke,
    )


def routed(service: ServiceSpec) -> bool:
    """Whether the gateway fronts the service."""
    return service.engine in ROUTED_ENGINES


def gateway_service_problems(
    gateway_path: str,
    services: Sequence[tuple[int, ServiceSpec]],
    services_path: str,
    every_service_read: bool = True,
) -> list[MigError]:
    """What the gateway cannot front: no service it routes, and routed services that name their
    own clients (only the gateway and the endpoint picker reach the model servers). Whether any
    service is routed is said only when `every_service_read`: an entry refused at its own key may
    be the one the gateway fronts."""
    problems = [
        MigError(
            "the gateway fronts only the model servers, whose clients call it: remove clients, "
            "or turn the gateway off (gateway.enabled: false)",
            f"{services_path}[{index}].clients",
        )
        for index, service in services
        if routed(service) and service.clients
    ]
    if every_service_read and services and not any(routed(s) for _, s in services):
        engines = ", ".join(sorted(engine.value for engine in ROUTED_ENGINES))
        problems.append(
            MigError(
                f"fronts {engines} services (an OpenAI API whose requests name the model, and the "
                "metrics the endpoint picker scores replicas by); this stack has none",
                gateway_path,
            )
        )
    return problems
