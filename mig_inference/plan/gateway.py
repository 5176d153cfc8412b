"""The gateway's routes: which InferencePool serves each model, and what share of the model's
requests each one takes.

Every Deployment the gateway fronts becomes one InferencePool (its pods, one slice size), with
its own endpoint picker choosing among them by load. A model served from several slice sizes (a
service sized by demand runs one Deployment per profile; two services may serve one model) is
one route whose InferencePools are weighted by what their replicas serve together: the
throughput table's requests per second of each profile when every pool of the model has one,
else each slice's compute slices (at saturation a slice serves roughly in proportion to its
compute: DESIGN.md, "Inference on MIG"). The split is static; each endpoint picker balances load
within its own pool only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mig_inference.errors import MigError, MigErrors
from mig_inference.plan.model import ServicePlan
from mig_inference.plan.served import served_model
from mig_inference.spec import StackSpec, key_path
from mig_inference.spec.gateway import ROUTED_ENGINES, GatewayAddress, GatewaySpec, routed

GATEWAY_NAME = "inference-gateway"
MODEL_HEADER = "X-Gateway-Model-Name"
"""The header the body-based router sets from the request body's `model` (v1.5.0,
`pkg/bbr/plugins/bodyfieldtoheader`), which the routes match."""
ROUTED_PATH = "/v1/"
"""What the gateway forwards: vLLM's OpenAI API, the only paths its API key guards (vLLM's
security guide: `--api-key` covers /v1, /v2, /inference and /cohere; /metrics, /tokenize,
/pause and the like stay open, so they are not routed)."""
WEIGHT_SCALE = 1000
"""Route weights are shares of the model's capacity in thousandths."""
GKE_CLASSES = {
    GatewayAddress.INTERNAL: "gke-l7-rilb",
    GatewayAddress.EXTERNAL: "gke-l7-regional-external-managed",
}
"""GKE's gateway classes for the inference extension: regional internal and external
Application Load Balancers (llm-d.ai, "GKE" gateway guide; the extension's GKE manifest)."""
ISTIO_CLASS = "istio"
GKE_HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
"""Where Google's health checks of regional Application Load Balancers come from (Cloud Load
Balancing, "Firewall rules"); the traffic itself comes from the proxy-only subnet."""


@dataclass(frozen=True)
class PoolRoute:
    """One InferencePool: the pods of one Deployment, and its share of the model's requests."""

    name: str
    """The InferencePool (and its chart release); the Deployment's name."""
    namespace: str
    service: str
    """The stack service it serves (a service sized by demand: several pools)."""
    profile: str
    resource: str
    node_pool: str
    replicas: int
    port: int
    selector: tuple[tuple[str, str], ...]
    """The labels of the Deployment's serving pods."""
    rate: float
    """What one replica serves, in the route's unit."""
    weight: int

    @property
    def picker(self) -> str:
        """The endpoint picker's name (the chart's `<release, 40 characters>-epp`)."""
        return f"{self.name[:40]}-epp"


@dataclass(frozen=True)
class ModelRoute:
    """The requests naming one model, split over the pools that serve it."""

    model: str
    namespace: str
    pools: tuple[PoolRoute, ...]
    unit: str
    """What the weights count: `requests/s` (throughput tables) or `compute slices`."""


@dataclass(frozen=True)
class GatewayPlan:
    spec: GatewaySpec
    routes: tuple[ModelRoute, ...]
    unrouted: tuple[tuple[str, str], ...]
    """(service, why) of the services the gateway does not front."""

    name: str = GATEWAY_NAME

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def class_name(self) -> str:
        return GKE_CLASSES[self.spec.address] if self.spec.managed else ISTIO_CLASS

    @property
    def provider(self) -> str:
        """The EPP chart's `provider.name`: the Gateway implementation it adds objects for."""
        return "gke" if self.spec.managed else "istio"

    @property
    def in_cluster_url(self) -> str | None:
        """Istio: the Service in front of the gateway's pods (`<gateway>-<class>`, Istio's
        naming). GKE's load balancer has no in-cluster name: its address is known once it is
        programmed."""
        if self.spec.managed:
            return None
        host = f"{self.name}-{ISTIO_CLASS}.{self.namespace}.svc.cluster.local"
        return f"http://{host}:{self.spec.port}"

    @property
    def pools(self) -> list[PoolRoute]:
        return [pool for route in self.routes for pool in route.pools]

    @property
    def namespaces(self) -> list[str]:
        """Namespaces holding routed pools (one HTTPRoute each)."""
        return sorted({route.namespace for route in self.routes})

    def pool_of(self, deployment: str) -> PoolRoute | None:
        return next((p for p in self.pools if p.name == deployment), None)

    def route_of(self, service: str) -> ModelRoute | None:
        return next((r for r in self.routes if any(p.service == service for p in r.pools)), None)


def _rate(service: ServicePlan) -> float | None:
    """What one replica serves, from the service's throughput table (None without one)."""
    demand = service.spec.demand
    if demand is None:
        return None
    return next((p.requests_per_second for p in demand.points if p.profile == service.profile),
                None)  # fmt: skip


def _weights(capacities: Sequence[float]) -> list[int]:
    total = sum(capacities)
    if total <= 0:
        return [0 for _ in capacities]
    return [max(1, round(WEIGHT_SCALE * c / total)) if c > 0 else 0 for c in capacities]


def _route(model: str, namespace: str, services: Sequence[ServicePlan]) -> ModelRoute:
    rates = [_rate(s) for s in services]
    if all(rate is not None for rate in rates):
        unit = "requests/s"
        each = [float(rate or 0.0) for rate in rates]
    else:
        unit = "compute slices"
        each = [s.offer.compute / s.offer.shared_by for s in services]
    weights = _weights([s.replicas * rate for s, rate in zip(services, each, strict=True)])
    pools = tuple(
        PoolRoute(
            name=s.name,
            namespace=s.spec.namespace,
            service=s.service_name,
            profile=s.profile,
            resource=s.resource,
            node_pool=s.pool.name,
            replicas=s.replicas,
            port=s.spec.port,
            selector=(
                ("app.kubernetes.io/name", s.name),
                ("app.kubernetes.io/component", "inference"),
            ),
            rate=rate,
            weight=weight,
        )
        for s, rate, weight in zip(services, each, weights, strict=True)
    )
    return ModelRoute(model, namespace, pools, unit)


def plan_gateway(spec: StackSpec, services: Sequence[ServicePlan]) -> GatewayPlan | None:
    """The gateway's routes, or None without a gateway. A model served in two namespaces is
    refused: each namespace's HTTPRoute would claim its requests, and the Gateway API gives
    them to the older route alone instead of splitting them."""
    if spec.gateway is None:
        return None
    by_model: dict[str, list[ServicePlan]] = {}
    unrouted: list[tuple[str, str]] = []
    for service in services:
        if routed(service.spec):
            by_model.setdefault(served_model(service), []).append(service)
        elif service.service_name not in dict(unrouted):
            engines = ", ".join(sorted(e.value for e in ROUTED_ENGINES))
            unrouted.append(
                (
                    service.service_name,
                    f"engine {service.spec.engine.value}: the gateway fronts {engines} only; "
                    "its own Service still serves it",
                )
            )
    problems = []
    for model, serving in by_model.items():
        first = serving[0].spec.namespace
        for service in serving:
            if service.spec.namespace != first:
                index = next(i for i, s in enumerate(spec.services) if s is service.spec)
                problems.append(
                    MigError(
                        f"serves {model!r} like service {serving[0].service_name} in namespace "
                        f"{first}: the gateway splits one model's requests only between pools of "
                        "one namespace; put them in one namespace",
                        f"{key_path('services')}[{index}].namespace",
                        value=service.spec.namespace,
                    )
                )
                break
    if problems:
        raise MigErrors(problems)
    routes = tuple(
        _route(model, serving[0].spec.namespace, serving) for model, serving in by_model.items()
    )
    return GatewayPlan(spec.gateway, routes, tuple(unrouted))


def gateway_warnings(plan: GatewayPlan | None) -> list[str]:
    """Services the gateway leaves out: clients reach them at their own Service only."""
    if plan is None:
        return []
    return [f"service {service}: not behind the gateway ({why})" for service, why in plan.unrouted]
