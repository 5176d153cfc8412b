"""The gateway section and its plan: what is refused (with its key path), one InferencePool per
model across slice sizes, what the endpoint pickers ask and whether a created cluster's nodes
have room for them, what a GKE cluster is checked for, and what an external gateway needs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.clouds import Cloud
from mig_inference.clouds.system_pool import SYSTEM_POOLS
from mig_inference.errors import MigErrors
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.plan.gateway import (
    PICKER_CPU_PER_ENDPOINT,
    GatewayPlan,
    gke_version,
    joined_gke_problem,
    proxy_subnet_problem,
)
from mig_inference.spec import parse_stack
from mig_inference.spec.files import stack_path
from mig_inference.spec.gateway import CertificateSource, GatewayAddress
from mig_inference.versions import GPU_OPERATOR_VERSION

DEMAND = "eks-p4de-demand"
GKE = "ephemeral-gke"
SUMMARIZE = "meta-llama/Llama-3.1-8B-Instruct"
TLS = {"secret": "models-tls", "hostname": "models.example.com"}
CREATED_EKS = {"create": True, "vpcId": "vpc-0000000a", "version": "1.34",
               "publicAccessCidrs": ["203.0.113.0/24"]}  # fmt: skip
CREATED_OKE = {"create": True, "vcnId": "ocid1.vcn.oc1..v",
               "endpointSubnetId": "ocid1.subnet.oc1..api", "podSubnetIds": ["ocid1.subnet.oc1..p"],
               "kubernetesVersion": "v1.34.2", "systemImageId": "ocid1.image.oc1..sys"}  # fmt: skip


def config_of(stack: str, **changes: Any) -> dict[str, Any]:
    """A stack's config (keys without the namespace, secrets left out) with `changes`."""
    config = yaml.safe_load(Path(stack_path(stack)).read_text())["config"]
    values = {
        key.removeprefix("mig-inference:"): value
        for key, value in config.items()
        if not isinstance(value, dict) or "secure" not in value
    }
    values = copy.deepcopy(values)
    for service in values["services"]:
        service.pop("hfTokenSecret", None)
        service.pop("apiKeySecret", None)
    values.update(changes)
    return values


def keyed(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with every vLLM service keyed by the secret `apiKey`."""
    for service in config["services"]:
        if service.get("engine", "vllm") == "vllm":
            service["apiKeySecret"] = "apiKey"
    return config


def plan_of(config: dict[str, Any], secrets: tuple[str, ...] = ("apiKey",)) -> StackPlan:
    spec = parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION,
                       secret_keys=frozenset(secrets))  # fmt: skip
    return plan_stack(spec)


def gateway_of(config: dict[str, Any]) -> GatewayPlan:
    gateway = plan_of(config).gateway
    assert gateway is not None
    return gateway


def refusal(config: dict[str, Any]) -> str:
    with pytest.raises(MigErrors) as raised:
        plan_of(config)
    return str(raised.value)


def test_no_section_no_gateway_and_enabled_false_keeps_it_off() -> None:
    config = config_of(DEMAND)
    config.pop("gateway")
    assert plan_of(config).gateway is None
    assert plan_of(config_of(DEMAND, gateway={"enabled": False})).gateway is None


def test_defaults_per_cloud() -> None:
    eks = gateway_of(config_of(DEMAND, gateway={}))
    assert (eks.class_name, eks.provider, eks.spec.install, eks.spec.address, eks.spec.port) == (
        "istio", "istio", True, GatewayAddress.INTERNAL, 80,
    )  # fmt: skip
    assert eks.in_cluster_url == (
        "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    )
    gke = gateway_of(config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23"}))
    assert (gke.class_name, gke.provider, gke.spec.install, gke.in_cluster_url) == (
        "gke-l7-rilb", "gke", False, None,
    )  # fmt: skip
    external = gateway_of(keyed(config_of(GKE, gateway={
        "proxySubnet": "10.129.0.0/23", "address": "external", "tls": TLS})))  # fmt: skip
    assert external.class_name == "gke-l7-regional-external-managed"
    assert (external.spec.port, external.spec.scheme) == (443, "https")


@pytest.mark.parametrize(
    ("stack", "gateway", "path", "words"),
    [
        (GKE, {}, "gateway.proxySubnet", "is required on GKE"),
        (GKE, {"proxySubnet": "10.129.0.0/23", "install": True}, "gateway.install",
         "GKE runs the Gateway controller"),
        (GKE, {"proxySubnet": "10.129.0.0"}, "gateway.proxySubnet", "not an IPv4 CIDR block"),
        (GKE, {"proxySubnet": "0.0.0.0/0"}, "gateway.proxySubnet", "is overly broad"),
        (GKE, {"proxySubnet": "10.0.0.0/8"}, "gateway.proxySubnet", "is overly broad"),
        (GKE, {"proxySubnet": "10.129.0.0/28"}, "gateway.proxySubnet", "must be /26 or larger"),
        (GKE, {"proxySubnet": "10.129.0.1/23"}, "gateway.proxySubnet", "has host bits set"),
        (GKE, {"proxySubnet": "8.8.8.0/24"}, "gateway.proxySubnet", "private address space"),
        (DEMAND, {"proxySubnet": "10.129.0.0/23"}, "gateway.proxySubnet", "applies to GKE only"),
        (DEMAND, {"address": "public"}, "gateway.address", "allowed: internal, external"),
        (DEMAND, {"port": 0}, "gateway.port", "must be >= 1"),
        (DEMAND, {"namespace": "Gateway"}, "gateway.namespace", "lowercase DNS label"),
        (DEMAND, {"endpointPicker": {"cpu": 0}}, "gateway.endpointPicker.cpu", "must be > 0"),
        (DEMAND, {"endpointPicker": {"gpu": 1}}, "gateway.endpointPicker.gpu", "unknown key"),
        (DEMAND, {"enabled": "yes"}, "gateway.enabled", "must be true or false"),
        (DEMAND, {"address": "external"}, "gateway.tls",
         "is required with address: external"),
        (DEMAND, {"tls": {"hostname": "models.example.com"}}, "gateway.tls",
         "exactly one way"),
        (DEMAND, {"tls": {"secret": "s", "certManager": {"issuer": "i"}}}, "gateway.tls",
         "exactly one way"),
        (DEMAND, {"tls": {"certManager": {"issuer": "letsencrypt"}}}, "gateway.tls.hostname",
         "is required with certManager"),
        (DEMAND, {"tls": {"gcpCertificates": ["models"]}}, "gateway.tls.gcpCertificates",
         "applies to GKE only"),
        (DEMAND, {"tls": {"secret": "Models_TLS"}}, "gateway.tls.secret", "Secret name"),
        (DEMAND, {"tls": {"secret": "s", "hostname": "*.example.com"}}, "gateway.tls.hostname",
         "DNS hostname"),
        (DEMAND, {"tls": {"certManager": {"issuer": "i", "kind": "Vault"}, "hostname": "a.b"}},
         "gateway.tls.certManager.kind", "allowed: ClusterIssuer, Issuer"),
        (DEMAND, {"loadBalancerSubnetId": "ocid1.subnet.oc1..s"},
         "gateway.loadBalancerSubnetId", "applies to OKE only"),
    ],
)  # fmt: skip
def test_refusals_name_the_key(stack: str, gateway: dict[str, Any], path: str, words: str) -> None:
    message = refusal(config_of(stack, gateway=gateway))
    assert f"mig-inference:{path}:" in message and words in message, message


def test_a_proxy_subnet_in_the_bounds_is_taken() -> None:
    for cidr in ("10.129.0.0/23", "10.129.0.0/26", "172.16.0.0/16", "100.64.0.0/23"):
        gateway = gateway_of(config_of(GKE, gateway={"proxySubnet": cidr}))
        assert gateway.spec.proxy_subnet == cidr


def test_routed_services_may_not_name_their_own_clients() -> None:
    config = config_of(DEMAND, gateway={})
    config["services"][0]["clients"] = [{"namespace": "apps"}]
    message = refusal(config)
    assert "mig-inference:services[0].clients:" in message
    assert "only the model servers, whose clients call it" in message
    # A service the gateway does not front keeps its clients.
    config = config_of(DEMAND, gateway={})
    config["services"][2]["clients"] = [{"namespace": "apps"}]
    assert plan_of(config).gateway is not None


def test_an_external_gateway_authenticates_every_route() -> None:
    """Every vLLM service behind `address: external` needs its API key; the TGI embedder, which
    the gateway does not route, does not."""
    config = config_of(DEMAND, gateway={"address": "external", "tls": TLS})
    message = refusal(config)
    assert "mig-inference:services[0].apiKeySecret: is required behind an external gateway" in (
        message
    )
    assert "mig-inference:services[1].apiKeySecret:" in message
    assert "services[2]" not in message
    gateway = gateway_of(keyed(config_of(DEMAND, gateway={"address": "external", "tls": TLS})))
    assert all(pool.api_key for pool in gateway.pools)
    # Internal: the key stays the service's choice.
    assert gateway_of(config_of(DEMAND, gateway={})).pools[0].api_key is False


def test_tls_sources() -> None:
    secret = gateway_of(config_of(DEMAND, gateway={"tls": TLS}))
    assert secret.spec.tls is not None
    assert (secret.spec.tls.source, secret.spec.tls.secret, secret.hostname) == (
        CertificateSource.SECRET, "models-tls", "models.example.com",
    )  # fmt: skip
    issued = gateway_of(config_of(DEMAND, gateway={"tls": {
        "certManager": {"issuer": "letsencrypt"}, "hostname": "models.example.com"}}))  # fmt: skip
    assert issued.spec.tls is not None
    assert (issued.spec.tls.source, issued.spec.tls.secret) == (
        CertificateSource.CERT_MANAGER, "models-example-com-tls",
    )  # fmt: skip
    gcp = gateway_of(config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23",
                                             "tls": {"gcpCertificates": ["models-a", "models-b"]}}))  # fmt: skip
    assert gcp.spec.tls is not None and gcp.spec.tls.gcp_certificates == ("models-a", "models-b")


def test_one_pool_per_model_selects_its_pods_across_slice_sizes() -> None:
    """`summarize` runs 8 x 2g.20gb at 16/s and 3 x 3g.40gb at 25/s: one InferencePool
    selecting both Deployments' pods; the 3g slices give 37% of its capacity although they are
    27% of its replicas. No weight splits the requests."""
    plan = plan_of(config_of(DEMAND, gateway={}))
    gateway = plan.gateway
    assert gateway is not None
    [pool] = [p for p in gateway.pools if p.model == SUMMARIZE]
    assert (pool.name, pool.unit) == ("summarize", "requests/s")
    assert dict(pool.selector) == {"app.kubernetes.io/instance": "summarize",
                                   "app.kubernetes.io/component": "inference"}  # fmt: skip
    shares = {s.profile: (s.replicas, s.rate, round(s.share, 3)) for s in pool.slices}
    assert shares == {"2g.20gb": (8, 16.0, 0.631), "3g.40gb": (3, 25.0, 0.369)}
    for service in plan.services:
        if service.service_name == "summarize":
            assert gateway.pool_of(service.name) is pool
    assert [s for s, _ in gateway.unrouted] == ["embedder"]
    assert any("service embedder: not behind the gateway" in w for w in plan.warnings)


def test_two_services_of_one_model_are_refused_at_the_second() -> None:
    config = config_of(DEMAND, gateway={})
    small = {"name": "qwen-small", "model": "Qwen/Qwen2.5-0.5B-Instruct", "memoryGiB": 4,
             "profile": "1g.10gb", "replicas": 4}  # fmt: skip
    config["services"] = [small, {**small, "name": "qwen-large", "profile": "3g.40gb"}]
    message = refusal(config)
    assert "mig-inference:services[1].model: serves 'Qwen/Qwen2.5-0.5B-Instruct' like " in message
    assert "one InferencePool" in message
    # Its own served name makes it another model.
    config["services"][1]["args"] = ["--served-model-name", "qwen-large"]
    assert {p.model for p in gateway_of(config).pools} == {"Qwen/Qwen2.5-0.5B-Instruct",
                                                           "qwen-large"}  # fmt: skip


def test_without_throughput_tables_the_compute_slices_count() -> None:
    config = config_of(DEMAND, gateway={})
    config["services"] = [{"name": "qwen", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                           "memoryGiB": 4, "profile": "3g.40gb", "replicas": 2}]  # fmt: skip
    [pool] = gateway_of(config).pools
    assert pool.unit == "compute slices" and [(s.rate, s.share) for s in pool.slices] == [
        (3.0, 1.0)
    ]


def test_the_served_model_name_is_what_the_route_matches() -> None:
    config = config_of(DEMAND, gateway={})
    config["services"][0]["args"] = ["--served-model-name", "chat"]
    assert {p.model for p in gateway_of(config).pools} == {"chat", SUMMARIZE}


def test_the_picker_is_sized_from_what_it_does() -> None:
    """Scraping grows with the model servers, request handling with the requests per second
    and their tokens; each of the two pickers takes the model's whole peak."""
    gateway = gateway_of(config_of(DEMAND, gateway={}))
    sizes = {p.name: p.picker_size for p in gateway.pools}
    # summarize: 11 replicas, 8 x 16 + 3 x 25 = 203 requests/s of up to 4096 tokens.
    assert (sizes["summarize"].cpu, sizes["summarize"].memory_gib) == (3.25, 1.0)
    assert "11 model servers" in sizes["summarize"].basis and "203 requests/s" in (
        sizes["summarize"].basis
    )
    # chat: 7 replicas at 9/s.
    assert (sizes["chat"].cpu, sizes["chat"].memory_gib) == (1.35, 0.75)
    more = config_of(DEMAND, gateway={})
    more["services"][1]["requestsPerSecond"] = 300
    bigger = {p.name: p.picker_size for p in gateway_of(more).pools}["summarize"]
    assert bigger.cpu > sizes["summarize"].cpu + 2 * PICKER_CPU_PER_ENDPOINT
    given = gateway_of(config_of(DEMAND, gateway={"endpointPicker": {"cpu": 2, "memoryGiB": 3}}))
    size = given.pools[0].picker_size
    assert (size.cpu, size.memory_gib, size.cpu_text, size.memory_limit_text) == (
        2.0, 3.0, "2000m", "6144Mi",
    )  # fmt: skip
    assert size.basis.startswith("given (estimated:")


@pytest.mark.parametrize("cloud", [Cloud.EKS, Cloud.OKE])
def test_a_created_cluster_s_system_nodes_must_have_room_for_the_picker(cloud: Cloud) -> None:
    """On a cluster the stack creates the pickers, which tolerate no taint, run on the system
    pool: a request larger than its node's allocatable CPU is refused at its key."""
    base = config_of(DEMAND) if cloud is Cloud.EKS else config_of("oke-h100")
    cluster = {**base["cluster"], **(CREATED_EKS if cloud is Cloud.EKS else CREATED_OKE)}
    system = SYSTEM_POOLS[cloud]
    config = {**base, "cluster": cluster,
              "gateway": {"endpointPicker": {"cpu": system.allocatable_cpu + 0.05}}}  # fmt: skip
    message = refusal(config)
    assert "mig-inference:gateway.endpointPicker.cpu:" in message
    assert system.machine in message and f"give pods {system.allocatable_cpu:g} CPUs" in message
    config["gateway"] = {"endpointPicker": {"cpu": system.allocatable_cpu}}
    together = refusal(config)  # each fits a node, not all of them and the gateway's others
    assert "CPUs each (" not in together and "CPUs in all" in together
    config["gateway"] = {"endpointPicker": {"memoryGiB": system.allocatable_memory_gib + 1}}
    assert "mig-inference:gateway.endpointPicker.memoryGiB:" in refusal(config)


def test_the_derived_picker_of_the_demand_stack_does_not_fit_a_created_eks_cluster() -> None:
    """eks-p4de-demand's summarize picker (3.25 CPUs) fits its own cluster's nodes, which the
    stack does not know; on a cluster it created (m6i.large, 1.93) it is refused, with what
    it would take."""
    config = config_of(DEMAND, gateway={}, cluster={**config_of(DEMAND)["cluster"], **CREATED_EKS})
    message = refusal(config)
    assert "the endpoint picker of model 'meta-llama/Llama-3.1-8B-Instruct' would ask 3.25" in (
        message
    )
    assert "model 'Qwen/Qwen2.5-1.5B-Instruct'" not in message  # 1.35 CPUs fits


def test_gke_s_created_cluster_refuses_the_chart_s_four_cpus() -> None:
    message = refusal(config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23",
                                              "endpointPicker": {"cpu": 4}}))  # fmt: skip
    assert "e2-standard-4" in message and "give pods 3.92 CPUs" in message


def test_an_external_gateway_on_a_created_oke_cluster_names_its_load_balancer_subnet() -> None:
    base = config_of("oke-h100")
    config = keyed({**base, "cluster": {**base["cluster"], **CREATED_OKE},
                    "gateway": {"address": "external", "tls": TLS}})  # fmt: skip
    message = refusal(config)
    assert "mig-inference:gateway.loadBalancerSubnetId: is required for address: external" in (
        message
    )
    config["gateway"]["loadBalancerSubnetId"] = "ocid1.subnet.oc1..lb"
    assert gateway_of(config).spec.load_balancer_subnet == "ocid1.subnet.oc1..lb"
    # On a joined cluster, OKE's own load-balancer subnets serve.
    joined = keyed({**base, "gateway": {"address": "external", "tls": TLS}})
    assert gateway_of(joined).spec.load_balancer_subnet is None
    internal = {**base, "gateway": {"loadBalancerSubnetId": "ocid1.subnet.oc1..lb"}}
    assert "applies to address: external only" in refusal(internal)


def test_warnings_say_what_the_preview_cannot_check() -> None:
    gke = plan_of(config_of(GKE))
    assert any("gke-l7-rilb) answers the whole VPC" in w for w in gke.warnings)
    tls = plan_of(keyed(config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23",
                                                "tls": {"gcpCertificates": ["m"]}})))  # fmt: skip
    assert not any("answers the whole VPC" in w for w in tls.warnings)
    joined_eks = plan_of(keyed(config_of(DEMAND, gateway={"address": "external", "tls": TLS})))
    assert any("AWS Load Balancer Controller" in w for w in joined_eks.warnings)
    installed = config_of(DEMAND, gateway={"install": False})
    installed["services"][1]["namespace"] = "other"
    warned = plan_of(installed).warnings
    assert any("1.28.5 or later" in w and "istio/istio#58393" in w for w in warned)
    installed["services"][1]["namespace"] = "inference"
    assert not any("1.28.5" in w for w in plan_of(installed).warnings)


def test_gke_versions_and_the_gateway_api_of_a_joined_cluster() -> None:
    assert gke_version("1.34.0-gke.1626000") == (1, 34, 0, 1626000)
    assert gke_version("1.34") is None
    assert joined_gke_problem("c", "1.34.0-gke.1626000", "CHANNEL_STANDARD") is None
    assert joined_gke_problem("c", "1.35.1-gke.100", "CHANNEL_EXPERIMENTAL") is None
    old = joined_gke_problem("c", "1.34.0-gke.1625999", "CHANNEL_STANDARD")
    assert old is not None and "needs 1.34.0-gke.1626000 or later" in old
    assert "of unknown version" in str(joined_gke_problem("c", None, "CHANNEL_STANDARD"))
    off = joined_gke_problem("c", "1.35.1-gke.100", "CHANNEL_DISABLED")
    assert off is not None and "--gateway-api=standard" in off
    assert joined_gke_problem("c", "1.35.1-gke.100", None) is not None


def test_the_proxy_subnet_must_be_on_the_cluster_s_network() -> None:
    on = {"ipCidrRange": "10.129.0.0/23", "network": "projects/p/global/networks/vpc-a"}
    assert proxy_subnet_problem("10.129.0.0/23", "us-central1", "vpc-a", [on]) is None
    assert proxy_subnet_problem("10.129.0.0/23", "us-central1", None, [on]) is None
    other = proxy_subnet_problem("10.129.0.0/23", "us-central1", "vpc-b", [on])
    assert other is not None and "--purpose REGIONAL_MANAGED_PROXY" in other
    assert "on network vpc-b" in other and other.startswith("mig-inference:gateway.proxySubnet:")
    assert proxy_subnet_problem("10.130.0.0/23", "us-central1", "vpc-a", [on]) is not None


def test_a_record_exported_before_one_pool_per_model_still_compares() -> None:
    """A plan record whose gateway has `routes` (a weight per Deployment, before this release):
    the services it routed stay routed (no callers change), the model's route reads as the
    static split it was."""
    from mig_inference.changes.gateway import caller_changes, gateway_fields, gateway_record
    from mig_inference.changes.record import plan_record

    plan = plan_of(config_of(DEMAND, gateway={}))
    current = plan_record(plan)
    deployed = copy.deepcopy(current)
    deployed["gateway"] = {"class": "istio", "namespace": "inference-gateway",
                           "address": "internal", "port": 80,
                           "routes": {SUMMARIZE: {"summarize-2g-20gb": 631,
                                                  "summarize-3g-40gb": 369},
                                      "Qwen/Qwen2.5-1.5B-Instruct": {"chat-1g-10gb": 1000}}}  # fmt: skip
    assert caller_changes(deployed, current) == {}
    old = gateway_fields(deployed["gateway"])[f"gateway route {SUMMARIZE}"]
    assert old == "static split: summarize-2g-20gb weight 631, summarize-3g-40gb weight 369"
    new = gateway_fields(gateway_record(plan.gateway))[f"gateway route {SUMMARIZE}"]
    assert new.startswith("InferencePool summarize (8 x 2g.20gb (63% of its capacity)")
    # GKE's proxies after Istio's: the same services, other callers.
    moved = copy.deepcopy(current)
    moved["gateway"]["proxies"] = "GKE's load balancer (10.129.0.0/23, ...)"
    notes = caller_changes(current, moved)
    assert set(notes) == {"chat-1g-10gb", "summarize-2g-20gb", "summarize-3g-40gb"}
    assert notes["chat-1g-10gb"].startswith("callers: Istio's gateway pods in inference-gateway ->")
