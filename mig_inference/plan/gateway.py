"""The gateway's routes: one InferencePool per model, its endpoint picker sized from what it does,
and whether the nodes it may run on have room for it.

A model is served by one service (a service sized by demand runs one Deployment per profile);
its InferencePool selects the service's serving pods across every slice size, so one endpoint
picker chooses among all of them by queue depth and KV-cache use. No weight splits a model's
requests between slice sizes: a slice size with no ready replica (during a rollout or a
re-partition) simply gets no requests, because the picker only picks ready pods
(`pkg/epp/controller/pod_reconciler.go@llm-d-router v0.10.0`). What each slice size's replicas
serve together (the throughput table's requests per second, else their compute slices: DESIGN.md
"Inference on MIG") is still reported: it is the capacity the picker has to spread the load over.
One route rule then has one InferencePool backend, which Istio 1.30 serves with that pool's own
picker (istio/istio#61594 attaches one picker per rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.system_pool import SYSTEM_POOLS, SystemPool
from mig_inference.errors import MigError, MigErrors
from mig_inference.plan.model import ServicePlan
from mig_inference.plan.served import served_model
from mig_inference.spec import StackSpec, key_path
from mig_inference.spec.gateway import (
    ROUTED_ENGINES,
    CertificateSource,
    GatewayAddress,
    GatewaySpec,
    routed,
)
from mig_inference.versions import ISTIO_MIN_INSTALLED

GATEWAY_NAME = "inference-gateway"
MODEL_HEADER = "X-Gateway-Model-Name"
"""The header the body-based router sets from the request body's `model` (v1.5.0,
`pkg/bbr/plugins/bodyfieldtoheader`), which the routes match."""
ROUTED_PATH = "/v1/"
"""What the gateway forwards: vLLM's OpenAI API, the only paths its API key guards (vLLM's
security guide: `--api-key` covers /v1, /v2, /inference and /cohere; /metrics, /tokenize,
/pause and the like stay open, so they are not routed)."""
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
GKE_MIN_VERSION = (1, 34, 0, 1626000)
GKE_MIN_VERSION_TEXT = "1.34.0-gke.1626000"
"""The first GKE version that installs the InferencePool v1 CRD itself (llm-d.ai, "GKE" guide:
"For GKE versions 1.34.0-gke.1626000 or later, the InferencePool CRD is automatically
installed"); the stack applies no CRD on GKE."""
GKE_NETWORK_SERVICES_API = "networkservices.googleapis.com"
"""The Network Services API: GKE's routing extension (the body-based router's hook) is a
Service Extensions resource of it."""
GKE_CERTIFICATE_MANAGER_API = "certificatemanager.googleapis.com"

PICKER_REPLICAS = 2
"""Endpoint pickers per model, both active (no leader election): either serves alone when the
other is evicted or restarting."""
PICKER_CPU_BASE = 0.1
"""The picker process itself, idle with no endpoint (an assumption: the guide gives no figure)."""
PICKER_CPU_PER_ENDPOINT = 0.075
"""Scraping one model server's metrics every 50 ms: llm-d-router `docs/operations.md@v0.10.0`,
"in a cluster with 100 model-serving pods, the idle CPU usage of the EPP container grows to
approximately 7.5 cores"."""
PICKER_CPU_PER_REQUEST = 0.28
"""Cores per request/s of 100k input and 1k output tokens, the streamed request and response
passing the picker: the same guide's 98.7 requests/s row (35.17 peak cores over 100 pods, less
their 7.5 idle cores), scaled here by the tokens a request may carry."""
PICKER_GUIDE_TOKENS = 101_000
PICKER_MEMORY_BASE_GIB = 0.5
PICKER_MEMORY_PER_REQUEST_GIB = 0.05
"""GiB per request/s of 100k-token requests in flight: the guide's "50 to 100 requests/second
with 1k output tokens, EPP requires between 4 GiB and 6 GiB"."""
ASSUMED_CONTEXT_TOKENS = 4096
"""Tokens a request may carry when the service sets no context (`maxModelLen`): an assumption."""
ASSUMED_REQUEST_SECONDS = 1.0
"""Without a throughput table, a replica is taken to finish each of its concurrent sequences
in this long (an assumption, generous: it sizes the picker, not the fleet)."""
ASSUMED_CONCURRENCY = 16

BODY_ROUTER_REPLICAS = 2
BODY_ROUTER_CPU = 0.1
BODY_ROUTER_MEMORY_GIB = 0.125
"""The body-based router's replicas and what each requests (`components.workloads
.gateway_router` gives its container these)."""
ISTIO_GATEWAY_REPLICAS = 2
ISTIO_PROXY_CPU = 0.1
ISTIO_PROXY_MEMORY_GIB = 0.125
"""Each of Istio's gateway pods: istiod's `global.proxy.resources` requests (istiod chart
`values.yaml`@1.30.3, 100m and 128Mi), which its `kube-gateway.yaml` template gives the proxy."""
ISTIOD_CPU = 0.5
ISTIOD_MEMORY_GIB = 2.0
"""istiod's requests (istiod chart `values.yaml`@1.30.3, 500m and 2048Mi; its autoscaler's
minimum, `autoscaleMin`, is one replica)."""


class SliceShare(Struct, frozen=True):
    """The replicas of one slice size (one Deployment) in a model's InferencePool."""

    deployment: str
    profile: str
    resource: str
    node_pool: str
    replicas: int
    rate: float
    """What one replica serves, in the pool's unit."""
    share: float
    """This slice size's part of the pool's capacity (0 to 1)."""


class PickerSize(Struct, frozen=True):
    """What each endpoint picker requests, and from what."""

    cpu: float
    memory_gib: float
    basis: str
    """How it was sized (or `given` by the stack file)."""

    @property
    def cpu_text(self) -> str:
        return f"{math.ceil(self.cpu * 1000)}m"

    @property
    def memory_text(self) -> str:
        return f"{math.ceil(self.memory_gib * 1024)}Mi"

    @property
    def memory_limit_text(self) -> str:
        return f"{math.ceil(2 * self.memory_gib * 1024)}Mi"


class ModelPool(Struct, frozen=True):
    """One model's InferencePool: the serving pods of its service across every slice size, and
    the endpoint picker that chooses among them."""

    name: str
    """The InferencePool (and its chart release): the service's name."""
    model: str
    """The model the route matches (the engine's served name)."""
    namespace: str
    service: str
    port: int
    slices: tuple[SliceShare, ...]
    unit: str
    """What the slices' rates count: `requests/s` (throughput tables) or `compute slices`."""
    picker_size: PickerSize
    api_key: bool
    """The model server checks an API key on every routed request."""

    @property
    def selector(self) -> tuple[tuple[str, str], ...]:
        """The labels every serving pod of the service carries, whatever its slice size (the
        group's Service selects by them too): no pod label changes when the gateway turns on."""
        return (
            ("app.kubernetes.io/instance", self.service),
            ("app.kubernetes.io/component", "inference"),
        )

    @property
    def picker(self) -> str:
        """The endpoint picker's name (the chart's `<release, 40 characters>-epp`)."""
        return f"{self.name[:40]}-epp"

    @property
    def replicas(self) -> int:
        return sum(s.replicas for s in self.slices)

    @property
    def deployments(self) -> tuple[str, ...]:
        return tuple(s.deployment for s in self.slices)


class GatewayPlan(Struct, frozen=True):
    spec: GatewaySpec
    pools: tuple[ModelPool, ...]
    unrouted: tuple[tuple[str, str], ...]
    """(service, why) of the services the gateway does not front."""
    warnings: tuple[str, ...] = ()
    created_cluster: bool = False
    """The stack creates the cluster: its system pool is known (`clouds.system_pool`)."""

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
        return f"{self.spec.scheme}://{host}:{self.spec.port}"

    @property
    def hostname(self) -> str | None:
        return self.spec.tls.hostname if self.spec.tls is not None else None

    @property
    def namespaces(self) -> list[str]:
        """Namespaces holding routed pools (one HTTPRoute each)."""
        return sorted({pool.namespace for pool in self.pools})

    def pool_of(self, deployment: str) -> ModelPool | None:
        """The InferencePool a Deployment's pods belong to."""
        return next((p for p in self.pools if deployment in p.deployments), None)

    def route_of(self, service: str) -> ModelPool | None:
        return next((p for p in self.pools if p.service == service), None)


def _rate(service: ServicePlan) -> float | None:
    """What one replica serves, from the service's throughput table (None without one)."""
    demand = service.spec.demand
    if demand is None:
        return None
    return next((p.requests_per_second for p in demand.points if p.profile == service.profile),
                None)  # fmt: skip


def _slices(parts: Sequence[ServicePlan]) -> tuple[tuple[SliceShare, ...], str]:
    rates = [_rate(s) for s in parts]
    if all(rate is not None for rate in rates):
        unit = "requests/s"
        each = [float(rate or 0.0) for rate in rates]
    else:
        unit = "compute slices"
        each = [s.offer.compute / s.offer.shared_by for s in parts]
    capacity = [s.replicas * rate for s, rate in zip(parts, each, strict=True)]
    total = sum(capacity) or 1.0
    slices = tuple(
        SliceShare(s.name, s.profile, s.resource, s.pool.name, s.replicas, rate, c / total)
        for s, rate, c in zip(parts, each, capacity, strict=True)
    )
    return slices, unit


def _peak_rate(parts: Sequence[ServicePlan]) -> tuple[float, str]:
    """The most requests per second the model's replicas can take (what its picker must keep
    up with), and where that comes from."""
    replicas = [max(s.replicas, s.spec.autoscaled_max) for s in parts]
    rates = [_rate(s) for s in parts]
    if all(rate is not None for rate in rates):
        peak = sum(n * (rate or 0.0) for n, rate in zip(replicas, rates, strict=True))
        return peak, "the throughput table"
    concurrency = [s.sizing.max_num_seqs or ASSUMED_CONCURRENCY for s in parts]
    peak = sum(n * c for n, c in zip(replicas, concurrency, strict=True)) / ASSUMED_REQUEST_SECONDS
    return peak, (
        f"each replica's concurrent sequences finishing in {ASSUMED_REQUEST_SECONDS:g} s (assumed)"
    )


def picker_size(spec: GatewaySpec, parts: Sequence[ServicePlan]) -> PickerSize:
    """Each endpoint picker's requests: the stack's, or from what it does. It scrapes every
    replica's metrics 20 times a second and passes each request and its streamed answer; both
    grow linearly (llm-d-router `docs/operations.md@v0.10.0`). Each of the two pickers is sized
    for the model's whole peak, so one serves alone while the other is away."""
    endpoints = sum(max(s.replicas, s.spec.autoscaled_max) for s in parts)
    peak, rate_from = _peak_rate(parts)
    tokens = max(s.sizing.max_model_len or ASSUMED_CONTEXT_TOKENS for s in parts)
    scale = tokens / PICKER_GUIDE_TOKENS
    cpu = (
        PICKER_CPU_BASE
        + PICKER_CPU_PER_ENDPOINT * endpoints
        + PICKER_CPU_PER_REQUEST * peak * scale
    )
    memory = PICKER_MEMORY_BASE_GIB + PICKER_MEMORY_PER_REQUEST_GIB * peak * scale
    basis = (
        f"{endpoints} model servers x {PICKER_CPU_PER_ENDPOINT:g} CPU to scrape, {peak:g} "
        f"requests/s at most ({rate_from}) of up to {tokens} tokens"
    )
    cpu = math.ceil(cpu * 20) / 20
    memory = math.ceil(memory * 4) / 4
    if spec.picker_cpu is not None or spec.picker_memory_gib is not None:
        basis = f"given (estimated: {cpu:g} CPU, {memory:g} GiB from {basis})"
    return PickerSize(
        spec.picker_cpu if spec.picker_cpu is not None else cpu,
        spec.picker_memory_gib if spec.picker_memory_gib is not None else memory,
        basis,
    )


def _pool_problems(pools: Sequence[ModelPool], system: SystemPool) -> list[MigError]:
    """Each endpoint picker must fit one node it may run on. It tolerates no taint, so on a
    cluster the stack creates that is a node of the system pool (the GPU pools' nodes are
    tainted: by the stack, or by GKE for GPU nodes beside a CPU pool), whose allocatable CPU and
    memory `clouds.system_pool` holds."""
    problems = []
    picker = key_path("gateway") + ".endpointPicker"
    for pool in pools:
        size = pool.picker_size
        for asked, room, key, unit in (
            (size.cpu, system.allocatable_cpu, "cpu", "CPUs"),
            (size.memory_gib, system.allocatable_memory_gib, "memoryGiB", "GiB"),
        ):
            if asked > room:
                problems.append(
                    MigError(
                        f"the endpoint picker of model {pool.model!r} would ask {asked:g} "
                        f"{unit} ({size.basis}), and the only nodes it may run on, the system "
                        f"pool's {system.machine}, give pods {room:g} {unit} each "
                        f"({system.source}): it would stay Pending and `pulumi up` fail. Set "
                        f"{picker}.{key} to at most {room:g} (the picker then keeps up with "
                        "fewer requests), or join a cluster with larger CPU nodes",
                        f"{picker}.{key}",
                        value=asked,
                    )
                )
    return problems


def system_pods(spec: GatewaySpec) -> tuple[tuple[str, int, float, float], ...]:
    """(what, replicas, CPU, GiB each) of the gateway's pods other than the endpoint pickers
    that run on a created cluster's system pool (they tolerate no GPU taint)."""
    pods = [("body-based router", BODY_ROUTER_REPLICAS, BODY_ROUTER_CPU, BODY_ROUTER_MEMORY_GIB)]
    if not spec.managed:
        pods.append(
            ("Istio gateway", ISTIO_GATEWAY_REPLICAS, ISTIO_PROXY_CPU, ISTIO_PROXY_MEMORY_GIB)
        )
        if spec.install:
            pods.append(("istiod", 1, ISTIOD_CPU, ISTIOD_MEMORY_GIB))
    return tuple(pods)


def system_pool_nodes(system: SystemPool, cloud: Cloud, autoscaler: bool) -> int:
    """The most nodes the created system pool reaches: GKE's autoscales to its maximum, EKS's
    node group runs its desired 2 unless the stack's Cluster Autoscaler (installed when a GPU
    pool autoscales) discovers it too (EKS tags every managed node group for it), OKE's is
    fixed."""
    if cloud is Cloud.GKE or (cloud is Cloud.EKS and autoscaler):
        return system.max_nodes
    return EKS_SYSTEM_DESIRED if cloud is Cloud.EKS else system.min_nodes


EKS_SYSTEM_DESIRED = 2
"""The EKS system node group's desired size (`components.clouds.eks`)."""


def _system_total_problems(
    spec: GatewaySpec, pools: Sequence[ModelPool], system: SystemPool, nodes: int
) -> list[MigError]:
    """Every pod the gateway puts on the created system pool must fit its nodes together: the
    endpoint pickers (two per model), the body-based router's, Istio's gateway pods and istiod.
    The AWS Load Balancer Controller's pods (the stack sets them no requests) and the cluster's
    own system pods are not counted, so fitting is necessary, not sufficient."""
    if not pools:
        return []
    problems = []
    picker = key_path("gateway") + ".endpointPicker"
    others = system_pods(spec)
    count = PICKER_REPLICAS * len(pools)
    for key, unit, room_each, sizes, each in (
        ("cpu", "CPUs", system.allocatable_cpu, [p.picker_size.cpu for p in pools],
         [o[2] for o in others]),
        ("memoryGiB", "GiB", system.allocatable_memory_gib,
         [p.picker_size.memory_gib for p in pools], [o[3] for o in others]),
    ):  # fmt: skip
        room = round(nodes * room_each, 3)
        asked_pickers = sum(PICKER_REPLICAS * size for size in sizes)
        asked_others = sum(o[1] * asked for o, asked in zip(others, each, strict=True))
        if asked_pickers + asked_others <= room + 1e-9:
            continue
        most = math.floor((room - asked_others) / count * 100) / 100
        counted = ", ".join(
            f"{o[1]} x {o[0]} {asked:g}" for o, asked in zip(others, each, strict=True)
        )
        way = (
            f"Set {picker}.{key} to at most {most:g} (every picker then asks that much and "
            "keeps up with fewer requests), or join a cluster with more or larger CPU nodes"
            if most > 0
            else "Join a cluster with more or larger CPU nodes"
        )
        problems.append(
            MigError(
                f"the gateway's pods would ask {asked_pickers + asked_others:g} {unit} of the "
                f"created system pool together: {count} endpoint pickers ({PICKER_REPLICAS} per "
                f"model) {asked_pickers:g}, and {counted} {unit} each; its {nodes} x "
                f"{system.machine} give pods {room:g} {unit} in all ({system.source}). The "
                "cluster's own system pods and the AWS Load Balancer Controller's (the stack "
                "sets it no requests) are not counted. Some would stay Pending and `pulumi up` "
                "fail. " + way,
                f"{picker}.{key}",
                value=max(sizes),
            )
        )
    return problems


def _installed_istio_warning(spec: GatewaySpec, pools: Sequence[ModelPool]) -> list[str]:
    if spec.managed or spec.install:
        return []
    minimum = ".".join(str(n) for n in ISTIO_MIN_INSTALLED)
    several = len({p.namespace for p in pools}) > 1
    return [
        f"{key_path('gateway')}.install: false: the cluster's Istio must run with "
        "ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true and the Gateway API and InferencePool CRDs"
        + (
            f", and be {minimum} or later: the routes of this stack's namespaces each carry an "
            "endpoint picker, which istiod before that keeps for the first route only "
            "(istio/istio#58393)"
            if several
            else ""
        )
        + "; nothing about it is looked up"
    ]


KEPT_CRDS = "the Gateway API and InferencePool CustomResourceDefinitions"


def _kept_crds_warning(spec: StackSpec, gateway: GatewaySpec) -> list[str]:
    """On a joined cluster the CRDs the stack applies are cluster-wide and kept on delete."""
    if gateway.managed or not gateway.install or spec.cluster.create:
        return []
    return [
        f"{key_path('gateway')}.install: true on a joined cluster: the stack applies {KEPT_CRDS} "
        "(cluster-wide: other teams' Gateways, HTTPRoutes and InferencePools are objects of "
        "them) and Istio's base and istiod charts. The CRDs are kept when the gateway is turned "
        "off or the stack destroyed (retainOnDelete; Istio's own CRDs Helm keeps), istiod is "
        "removed; delete the CRDs by hand once nothing uses them"
    ]


def _certificate_warnings(spec: StackSpec, gateway: GatewaySpec) -> list[str]:
    """cert-manager: it must already run (the stack never installs it), and the listener serves
    HTTPS only, so an ACME HTTP-01 challenge (plain HTTP on port 80) never reaches a solver
    through this gateway. A joined GKE cluster: the APIs the gateway uses must be enabled in its
    project (the stack enables them on a cluster it creates only)."""
    warnings = []
    path = key_path("gateway")
    tls = gateway.tls
    if tls is not None and tls.source is CertificateSource.CERT_MANAGER:
        warnings.append(
            f"{path}.tls.certManager: cert-manager must already run in the cluster (the stack "
            f"creates only its Certificate, from {tls.issuer_kind.value} {tls.issuer}), and the "
            f"listener serves HTTPS only (port {gateway.port}): an ACME issuer's HTTP-01 "
            "challenge, plain HTTP on port 80, would never be answered and the certificate "
            "never issued. The issuer must solve DNS-01 (or be a CA, Vault or self-signed one); "
            "nothing about it is looked up"
        )
    if gateway.managed and not spec.cluster.create:
        apis = ", ".join(
            (GKE_NETWORK_SERVICES_API, *(
                (GKE_CERTIFICATE_MANAGER_API,)
                if tls is not None and tls.source is CertificateSource.GCP
                else ()
            ))
        )  # fmt: skip
        warnings.append(
            f"{path}: the joined cluster's project must have {apis} enabled (`gcloud services "
            f"enable {apis.replace(', ', ' ')}`): the stack enables them only on a cluster it "
            "creates; they are not looked up"
        )
    return warnings


def _exposure_warnings(spec: StackSpec, gateway: GatewaySpec) -> list[str]:
    warnings = []
    path = key_path("gateway")
    if gateway.managed and gateway.address is GatewayAddress.INTERNAL and gateway.tls is None:
        warnings.append(
            f"{path}: GKE's internal load balancer (gke-l7-rilb) answers the whole VPC and the "
            "networks peered with it over plain HTTP; give it tls (a certificate) and the "
            "services an apiKeySecret to encrypt and authenticate that path"
        )
    if (
        gateway.address is GatewayAddress.EXTERNAL
        and spec.cloud is Cloud.EKS
        and not spec.cluster.create
    ):
        warnings.append(
            f"{path}.address: external on a joined EKS cluster needs the AWS Load Balancer "
            "Controller (the stack installs it only on clusters it creates): without it the "
            "gateway's Service gets no load balancer; it is not looked up"
        )
    return warnings


def plan_gateway(
    spec: StackSpec, services: Sequence[ServicePlan], autoscaler: bool = False
) -> GatewayPlan | None:
    """The gateway's InferencePools, or None without a gateway (`autoscaler`: a GPU pool
    autoscales, so the stack runs a Cluster Autoscaler). Two services serving one model
    are refused: an InferencePool selects the pods of one service, and two pools behind one
    route rule would get one endpoint picker between them (istio/istio#61594)."""
    gateway = spec.gateway
    if gateway is None:
        return None
    by_service: dict[str, list[ServicePlan]] = {}
    unrouted: list[tuple[str, str]] = []
    for service in services:
        if routed(service.spec):
            by_service.setdefault(service.service_name, []).append(service)
        elif service.service_name not in dict(unrouted):
            engines = ", ".join(sorted(e.value for e in ROUTED_ENGINES))
            unrouted.append(
                (
                    service.service_name,
                    f"engine {service.spec.engine.value}: the gateway fronts {engines} only; "
                    "its own Service still serves it",
                )
            )
    problems: list[MigError] = []
    serving: dict[str, str] = {}
    pools = []
    for name, parts in by_service.items():
        model = served_model(parts[0])
        if model in serving:
            index = next(i for i, s in enumerate(spec.services) if s is parts[0].spec)
            problems.append(
                MigError(
                    f"serves {model!r} like service {serving[model]}: behind the gateway a model "
                    "is one InferencePool, which selects one service's pods. Serve the model "
                    "from one service (sized by requestsPerSecond it runs on several slice "
                    "sizes), or give this one its own --served-model-name",
                    f"{key_path('services')}[{index}].model",
                    value=parts[0].spec.model,
                )
            )
            continue
        serving[model] = name
        slices, unit = _slices(parts)
        pools.append(
            ModelPool(
                name=name,
                model=model,
                namespace=parts[0].spec.namespace,
                service=name,
                port=parts[0].spec.port,
                slices=slices,
                unit=unit,
                picker_size=picker_size(gateway, parts),
                api_key=parts[0].spec.api_key_secret is not None,
            )
        )
    created = spec.cluster.create and spec.cloud in SYSTEM_POOLS
    if created:
        system = SYSTEM_POOLS[spec.cloud]
        problems += _pool_problems(pools, system) or _system_total_problems(
            gateway,
            pools,
            system,
            system_pool_nodes(system, spec.cloud, autoscaler),
        )
    if (
        spec.cloud is Cloud.OKE
        and created
        and gateway.address is GatewayAddress.EXTERNAL
        and gateway.load_balancer_subnet is None
    ):
        problems.append(
            MigError(
                "is required for address: external on a cluster the stack creates: the cluster "
                "is given no load-balancer subnet, and OCI places a load balancer only in one "
                "named; give the OCID of a public subnet of the cluster's VCN",
                f"{key_path('gateway')}.loadBalancerSubnetId",
            )
        )
    if problems:
        raise MigErrors(problems)
    warnings = (
        *_installed_istio_warning(gateway, pools),
        *_kept_crds_warning(spec, gateway),
        *_certificate_warnings(spec, gateway),
        *_exposure_warnings(spec, gateway),
    )
    return GatewayPlan(gateway, tuple(pools), tuple(unrouted), warnings, created)


def gateway_warnings(plan: GatewayPlan | None) -> list[str]:
    """Services the gateway leaves out, and what the preview cannot check about it."""
    if plan is None:
        return []
    return [
        *(f"service {service}: not behind the gateway ({why})" for service, why in plan.unrouted),
        *plan.warnings,
    ]


def gke_version(text: str) -> tuple[int, int, int, int] | None:
    """A GKE version `1.34.0-gke.1626000` as numbers (None when it is not one)."""
    head, _, build = text.partition("-gke.")
    numbers = head.split(".")
    if len(numbers) != 3 or not all(n.isdigit() for n in numbers) or not build.isdigit():
        return None
    major, minor, patch = (int(n) for n in numbers)
    return major, minor, patch, int(build)


def joined_gke_problem(cluster: str, master_version: str | None, channel: str | None) -> str | None:
    """Why a joined GKE cluster cannot serve the gateway (None: it can): the Gateway API must be
    on (`gatewayApiConfig.channel`), and the cluster new enough to install the InferencePool
    CRD itself."""
    path = key_path("gateway")
    if channel in (None, "", "CHANNEL_DISABLED"):
        return (
            f"{path}: cluster {cluster} has the Gateway API off (gatewayApiConfig.channel "
            f"{channel or 'unset'}): turn it on with `gcloud container clusters update "
            f"{cluster} --gateway-api=standard`"
        )
    found = gke_version(master_version or "")
    if found is None or found < GKE_MIN_VERSION:
        return (
            f"{path}: cluster {cluster} runs GKE {master_version or 'of unknown version'}; the "
            f"gateway needs {GKE_MIN_VERSION_TEXT} or later, the first to install the "
            "InferencePool CRD (the stack applies no CRD on GKE): upgrade the control plane"
        )
    return None


PROXY_SUBNET_PURPOSE = "REGIONAL_MANAGED_PROXY"


def proxy_subnet_filter(cidr: str) -> str:
    """The Compute API's list filter for the region's proxy-only subnet of `cidr`: its range
    and its purpose (a node subnet of the range is no proxy-only subnet; the lookup's answer
    holds no purpose to check afterwards). Parenthesized expressions are ANDed (Compute API,
    `subnetworks.list` `filter`)."""
    return f'(ipCidrRange = "{cidr}") (purpose = "{PROXY_SUBNET_PURPOSE}")'


def proxy_subnet_problem(
    cidr: str, region: str, network: str | None, subnetworks: Sequence[object]
) -> str | None:
    """Why the region has no proxy-only subnet of the stack's range on the cluster's VPC (None:
    it has one). `subnetworks` are what `gcp.compute.get_subnetworks` found with that range and
    purpose (`proxy_subnet_filter`); its answer holds no purpose, so the range and the network
    are checked here."""
    wanted = network.rsplit("/", 1)[-1] if network else None

    def field_of(subnet: object, name: str, camel: str) -> str:
        if isinstance(subnet, dict):
            return str(subnet.get(name) or subnet.get(camel) or "")
        return str(getattr(subnet, name, "") or "")

    for subnet in subnetworks:
        if field_of(subnet, "ip_cidr_range", "ipCidrRange") != cidr:
            continue
        found = field_of(subnet, "network", "network").rsplit("/", 1)[-1]
        if wanted is None or found == wanted:
            return None
    on = f" on network {wanted}" if wanted else ""
    return (
        f"{key_path('gateway')}.proxySubnet: region {region} has no subnet {cidr}{on} of purpose "
        f"{PROXY_SUBNET_PURPOSE}: the "
        "regional load balancer needs its proxy-only subnet, which the stack does not create. "
        f"Create it: `gcloud compute networks subnets create <name> --purpose "
        f"REGIONAL_MANAGED_PROXY --role ACTIVE --region {region} --network "
        f"{wanted or '<vpc>'} --range {cidr}`, or give the range of the one the region has"
    )


def gateway_apis(gateway: GatewayPlan | None) -> tuple[str, ...]:
    """The Google APIs a GKE gateway needs enabled in the cluster's project: Network Services
    (the routing extension the body-based router hooks in with), and Certificate Manager when
    the listener's certificates come from it."""
    if gateway is None or not gateway.spec.managed:
        return ()
    tls = gateway.spec.tls
    certificates = tls is not None and tls.source is CertificateSource.GCP
    return (GKE_NETWORK_SERVICES_API, *((GKE_CERTIFICATE_MANAGER_API,) if certificates else ()))


def needs_load_balancer_controller(plan: GatewayPlan | None, cloud: Cloud, created: bool) -> bool:
    """An external Istio gateway on an EKS cluster the stack creates: its Service needs the AWS
    Load Balancer Controller, which the stack installs (a joined cluster is warned about)."""
    return (
        plan is not None
        and cloud is Cloud.EKS
        and created
        and not plan.spec.managed
        and plan.spec.address is GatewayAddress.EXTERNAL
    )
