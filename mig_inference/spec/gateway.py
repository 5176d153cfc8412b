"""`mig-inference:gateway`: one address for every model of the stack, through the Gateway API
Inference Extension (an InferencePool and endpoint picker per model, routed by model)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from enum import StrEnum

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError
from mig_inference.spec import formats
from mig_inference.spec.model import Engine, ServiceSpec
from mig_inference.spec.reader import ConfigNode, dns_label

GATEWAY_KEYS = ("enabled", "address", "namespace", "port", "install", "proxySubnet",
                "endpointPicker", "tls", "loadBalancerSubnetId")  # fmt: skip
PICKER_KEYS = ("cpu", "memoryGiB")
TLS_KEYS = ("hostname", "secret", "certManager", "gcpCertificates")
CERT_MANAGER_KEYS = ("issuer", "kind")
ROUTED_ENGINES = frozenset({Engine.VLLM})
"""Engines the gateway fronts: an OpenAI API whose requests carry the model, and the metrics the
endpoint picker scores by (vLLM's queue and KV-cache gauges)."""
LISTENER_PORT = formats.Bound(1, 65535, "a TCP port")
PICKER_CPU = formats.Bound(0, 64, "sanity: llm-d's sizing guide goes to 46 cores",
                           exclusive_minimum=True)  # fmt: skip
PICKER_MEMORY_GIB = formats.Bound(0, 256, "sanity: the guide's largest is 20+ GiB",
                                  exclusive_minimum=True)  # fmt: skip
DEFAULT_NAMESPACE = "inference-gateway"
HTTP_PORT = 80
ISTIO_RESERVED_PORTS = (15000, 15001, 15006, 15008, 15020, 15021, 15090)
"""Ports Istio's proxies listen on themselves (istio.io, "Ports used by Istio": Envoy admin,
outbound and inbound capture, HBONE, merged metrics, health checks, Envoy's Prometheus)."""
HTTPS_PORT = 443
PROXY_SUBNET_PREFIX = (16, 26)
"""The prefix lengths a GKE proxy-only subnet may have here: Google requires at least a /26
("Proxy-only subnets for Envoy-based load balancers": "must be /26 or larger", /23 recommended);
a range wider than a /16 is refused as overly broad, because the model servers' NetworkPolicy
admits every address in it."""
PROXY_SUBNET_RANGES = (
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv4Network("172.16.0.0/12"),
    ipaddress.IPv4Network("192.168.0.0/16"),
    ipaddress.IPv4Network("100.64.0.0/10"),
)
"""Where a proxy-only subnet's range may lie here: RFC 1918 and RFC 6598 space. Google Cloud also
allows privately used public ranges, which would put public addresses into the model servers'
NetworkPolicy: they are refused."""
HOSTNAME = formats.Format(
    "a DNS hostname (lowercase labels of letters, digits and '-', joined by '.')",
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+",
    253,
    "models.example.com",
)
"""The listener's hostname (Gateway API `Hostname`, without the wildcard form)."""
SECRET_NAME = formats.Format(
    "a Kubernetes Secret name (a DNS-1123 subdomain)",
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    253,
    "models-example-com-tls",
)
GCP_CERTIFICATE = formats.Format(
    "a Certificate Manager certificate name (a lowercase letter, then letters, digits, '-')",
    r"[a-z]([-a-z0-9]*[a-z0-9])?",
    63,
    "models-example-com",
)


class GatewayAddress(StrEnum):
    INTERNAL = "internal"
    """GKE: a regional internal Application Load Balancer (`gke-l7-rilb`, reachable from the
    VPC); elsewhere a ClusterIP Service in front of Istio's gateway pods (in-cluster only)."""
    EXTERNAL = "external"
    """GKE: a regional external Application Load Balancer; elsewhere a LoadBalancer Service
    (internet-facing)."""


class CertificateSource(StrEnum):
    SECRET = "secret"
    """A `kubernetes.io/tls` Secret the user made in the gateway's namespace."""
    CERT_MANAGER = "certManager"
    """A cert-manager Certificate the stack creates from the user's Issuer or ClusterIssuer."""
    GCP = "gcpCertificates"
    """GKE: Certificate Manager certificates of the cluster's region, by name."""


class IssuerKind(StrEnum):
    CLUSTER_ISSUER = "ClusterIssuer"
    ISSUER = "Issuer"


class GatewayTls(Struct, frozen=True):
    """Where the HTTPS listener's certificate comes from."""

    source: CertificateSource
    hostname: str | None
    """The name clients call the gateway by (the listener's hostname and the certificate's)."""
    secret: str | None = None
    """The Secret the listener reads: the user's, or the one cert-manager writes."""
    issuer: str | None = None
    issuer_kind: IssuerKind = IssuerKind.CLUSTER_ISSUER
    gcp_certificates: tuple[str, ...] = ()


class GatewaySpec(Struct, frozen=True):
    address: GatewayAddress = GatewayAddress.INTERNAL
    namespace: str = DEFAULT_NAMESPACE
    """The Gateway's namespace, with the body-based router (and Istio's gateway pods)."""
    port: int = HTTP_PORT
    """The listener's port (443 with TLS, else 80, unless given)."""
    install: bool = True
    """EKS, OKE, existing: install Istio and the Gateway API and InferencePool CRDs (false: the
    cluster runs them already)."""
    proxy_subnet: str | None = None
    """GKE: the range of the region's proxy-only subnet, where the load balancer's proxies
    connect from (the model servers' NetworkPolicy admits it)."""
    picker_cpu: float | None = None
    """CPU each endpoint picker requests (None: sized by the planner from what it does)."""
    picker_memory_gib: float | None = None
    """Memory each endpoint picker requests (None: sized by the planner); the limit is twice."""
    managed: bool = False
    """GKE: the cloud runs the Gateway controller and its CRDs (its managed gateway classes)."""
    tls: GatewayTls | None = None
    """The HTTPS listener's certificate (None: plain HTTP, refused for `address: external`)."""
    load_balancer_subnet: str | None = None
    """OKE: the subnet of the external gateway's load balancer."""
    cloud: Cloud = Cloud.EXISTING
    """The stack's cloud: which load balancer an external gateway gets."""

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


def _proxy_subnet(node: ConfigNode) -> str | None:
    """The proxy-only subnet's range, refused when it is not one Google allows or when it
    admits more than the load balancers' proxies."""
    value = node.text(formats.IPV4_CIDR)
    if value is None or not value:
        return value
    network = ipaddress.IPv4Network(value, strict=False)
    shortest, longest = PROXY_SUBNET_PREFIX
    if str(network) != value:
        return node.problem(f"{value} has host bits set: the subnet's range is {network}", None)
    if network.prefixlen > longest:
        return node.problem(
            f'a proxy-only subnet must be /{longest} or larger (Google Cloud, "Proxy-only '
            f'subnets for Envoy-based load balancers"; /23 recommended), got /{network.prefixlen}',
            None,
        )
    if network.prefixlen < shortest:
        return node.problem(
            f"is overly broad: the model servers, their endpoint pickers and the body-based "
            f"router admit every address in it; a proxy-only subnet is a /{longest} to "
            f"/{shortest} (Google recommends a /23)",
            None,
        )
    if not any(network.subnet_of(allowed) for allowed in PROXY_SUBNET_RANGES):
        ranges = ", ".join(str(r) for r in PROXY_SUBNET_RANGES)
        return node.problem(
            f"must lie in private address space ({ranges}): the model servers' NetworkPolicy "
            "admits it",
            None,
        )
    return value


def _tls(node: ConfigNode, managed: bool) -> GatewayTls | None:
    if node.value is None:
        return None
    node.mapping(TLS_KEYS)
    hostname = node.child("hostname").text(HOSTNAME)
    given = [source for source in CertificateSource if node.child(source.value).value is not None]
    if len(given) != 1:
        choices = ", ".join(s.value for s in CertificateSource if managed or s is not s.GCP)
        return node.problem(
            f"names the certificate in exactly one way ({choices}); got "
            f"{', '.join(s.value for s in given) or 'none'}",
            None,
        )
    [source] = given
    where = node.child(source.value)
    if source is CertificateSource.SECRET:
        secret = where.text(SECRET_NAME, required=True)
        return GatewayTls(source, hostname, secret=secret)
    if source is CertificateSource.CERT_MANAGER:
        where.mapping(CERT_MANAGER_KEYS)
        issuer = where.child("issuer").text(SECRET_NAME, required=True)
        kind = where.child("kind").choice(IssuerKind, IssuerKind.CLUSTER_ISSUER)
        if hostname is None:
            node.child("hostname").problem(
                "is required with certManager: the certificate is issued for it", None
            )
        secret = f"{(hostname or 'gateway').replace('.', '-')[:200]}-tls"
        return GatewayTls(source, hostname, secret=secret, issuer=issuer, issuer_kind=kind)
    if not managed:
        return where.problem(
            "applies to GKE only (Certificate Manager certificates on its load balancer); "
            "elsewhere name a Secret (secret) or a cert-manager issuer (certManager)",
            None,
        )
    names = where.texts(GCP_CERTIFICATE)
    if not names:
        return where.problem("must list at least one certificate name", None)
    return GatewayTls(source, hostname, gcp_certificates=names)


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
    proxy_subnet = _proxy_subnet(subnet)
    if gke and subnet.value is None:
        proxy_subnet = subnet.problem(
            "is required on GKE: the range of the region's proxy-only subnet (the regional "
            "load balancers' proxies connect to the model servers from it)",
            None,
        )
    if not gke and subnet.value is not None:
        proxy_subnet = subnet.problem(
            "applies to GKE only: elsewhere Istio's gateway pods reach the model servers", None
        )
    picker = node.child("endpointPicker")
    if picker.value is not None:
        picker.mapping(PICKER_KEYS)
    cpu = picker.child("cpu").number(None, bound=PICKER_CPU)
    memory = picker.child("memoryGiB").number(None, bound=PICKER_MEMORY_GIB)
    address = node.child("address").choice(GatewayAddress, GatewayAddress.INTERNAL)
    tls = _tls(node.child("tls"), gke)
    if address is GatewayAddress.EXTERNAL and tls is None and node.child("tls").value is None:
        node.child("tls").problem(
            "is required with address: external: the gateway would publish every model over "
            "plain HTTP. Give it a certificate: tls.secret (a kubernetes.io/tls Secret in "
            "gateway.namespace), tls.certManager {issuer} with tls.hostname (a cert-manager "
            "Certificate)"
            + (", or tls.gcpCertificates (Certificate Manager)" if gke else "")
            + "; or keep the gateway internal",
            None,
        )
    port = node.child("port").integer(
        HTTPS_PORT if node.child("tls").value is not None else HTTP_PORT, bound=LISTENER_PORT
    )
    if not gke and port in ISTIO_RESERVED_PORTS:
        port = node.child("port").problem(
            f"{port} is one of the ports Istio's gateway pods listen on themselves (istio.io, "
            f'"Ports used by Istio": {", ".join(str(p) for p in ISTIO_RESERVED_PORTS)}); give the '
            "listener another port (80 or 443 by default)",
            HTTP_PORT,
        )
    lb_subnet_node = node.child("loadBalancerSubnetId")
    lb_subnet = lb_subnet_node.text(formats.ocid("subnet"))
    if lb_subnet_node.value is not None and cloud is not Cloud.OKE:
        lb_subnet = lb_subnet_node.problem(
            "applies to OKE only (the subnet OCI's load balancer is placed in)", None
        )
    elif lb_subnet_node.value is not None and address is not GatewayAddress.EXTERNAL:
        lb_subnet = lb_subnet_node.problem(
            "applies to address: external only: the internal gateway has no load balancer", None
        )
    assert port is not None
    return GatewaySpec(
        address=address,
        namespace=dns_label(node.child("namespace"), 63)
        if node.child("namespace").value is not None
        else DEFAULT_NAMESPACE,
        port=port,
        install=False if gke else install.boolean(True),
        proxy_subnet=proxy_subnet if gke else None,
        picker_cpu=cpu,
        picker_memory_gib=memory,
        managed=gke,
        tls=tls,
        load_balancer_subnet=lb_subnet,
        cloud=cloud,
    )


def routed(service: ServiceSpec) -> bool:
    """Whether the gateway fronts the service."""
    return service.engine in ROUTED_ENGINES


def gateway_service_problems(
    gateway_path: str,
    gateway: GatewaySpec,
    services: Sequence[tuple[int, ServiceSpec]],
    services_path: str,
    every_service_read: bool = True,
) -> list[MigError]:
    """What the gateway cannot front: no service it routes, routed services that name their
    own clients (only the gateway and the endpoint picker reach the model servers), and, behind
    an external gateway, a routed service without an API key (every route is authenticated by
    the model server's `--api-key`: vLLM checks it on each `/v1` request the gateway forwards).
    Whether any service is routed is said only when `every_service_read`: an entry refused at its
    own key may be the one the gateway fronts."""
    problems = [
        MigError(
            "the gateway fronts only the model servers, whose clients call it: remove clients, "
            "or turn the gateway off (gateway.enabled: false)",
            f"{services_path}[{index}].clients",
        )
        for index, service in services
        if routed(service) and service.clients
    ]
    if gateway.address is GatewayAddress.EXTERNAL:
        problems += [
            MigError(
                "is required behind an external gateway: every route it publishes must "
                "authenticate its callers, and vLLM checks the service's API key on each /v1 "
                "request the gateway forwards. Name a secret config key holding the key "
                "(`pulumi config set --secret <name> ...`), or keep the gateway internal",
                f"{services_path}[{index}].apiKeySecret",
            )
            for index, service in services
            if routed(service) and service.api_key_secret is None
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
