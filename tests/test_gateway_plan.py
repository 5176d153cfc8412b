"""The gateway section and its plan of routes: what is refused (with its key path), which
InferencePool serves each model, and how one model's requests are split over slices of
different sizes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from mig_inference.errors import MigErrors
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.plan.gateway import GatewayPlan
from mig_inference.spec import parse_stack
from mig_inference.spec.files import stack_path
from mig_inference.spec.gateway import GatewayAddress
from mig_inference.versions import GPU_OPERATOR_VERSION

DEMAND = "eks-p4de-demand"
GKE = "ephemeral-gke"


def config_of(stack: str, **changes: Any) -> dict[str, Any]:
    """A stack's config (keys without the namespace, secrets left out) with `changes`."""
    config = yaml.safe_load(stack_path(stack).read_text())["config"]
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


def plan_of(config: dict[str, Any]) -> StackPlan:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


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
    assert (eks.class_name, eks.provider, eks.spec.install, eks.spec.address) == (
        "istio", "istio", True, GatewayAddress.INTERNAL,
    )  # fmt: skip
    assert eks.in_cluster_url == (
        "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    )
    gke = gateway_of(config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23"}))
    assert (gke.class_name, gke.provider, gke.spec.install, gke.in_cluster_url) == (
        "gke-l7-rilb", "gke", False, None,
    )  # fmt: skip
    external = gateway_of(
        config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23", "address": "external"})
    )
    assert external.class_name == "gke-l7-regional-external-managed"


@pytest.mark.parametrize(
    ("stack", "gateway", "path", "words"),
    [
        (GKE, {}, "gateway.proxySubnet", "is required on GKE"),
        (GKE, {"proxySubnet": "10.129.0.0/23", "install": True}, "gateway.install",
         "GKE runs the Gateway controller"),
        (GKE, {"proxySubnet": "10.129.0.0"}, "gateway.proxySubnet", "not an IPv4 CIDR block"),
        (DEMAND, {"proxySubnet": "10.129.0.0/23"}, "gateway.proxySubnet", "applies to GKE only"),
        (DEMAND, {"address": "public"}, "gateway.address", "allowed: internal, external"),
        (DEMAND, {"port": 0}, "gateway.port", "must be >= 1"),
        (DEMAND, {"namespace": "Gateway"}, "gateway.namespace", "lowercase DNS label"),
        (DEMAND, {"endpointPicker": {"cpu": 0}}, "gateway.endpointPicker.cpu", "must be > 0"),
        (DEMAND, {"endpointPicker": {"gpu": 1}}, "gateway.endpointPicker.gpu", "unknown key"),
        (DEMAND, {"tls": True}, "gateway.tls", "unknown key"),
        (DEMAND, {"enabled": "yes"}, "gateway.enabled", "must be true or false"),
    ],
)  # fmt: skip
def test_refusals_name_the_key(stack: str, gateway: dict[str, Any], path: str, words: str) -> None:
    message = refusal(config_of(stack, gateway=gateway))
    assert f"mig-inference:{path}:" in message and words in message, message


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


def test_a_stack_without_vllm_services_has_nothing_to_route() -> None:
    config = config_of(DEMAND, gateway={})
    config["services"] = [config["services"][2]]
    message = refusal(config)
    assert "mig-inference:gateway: fronts vllm services" in message, message


def test_one_model_in_two_namespaces_is_refused_at_the_second() -> None:
    config = config_of(DEMAND, gateway={})
    twin = {**config["services"][0], "name": "chat-b", "namespace": "other"}
    config["services"].append(twin)
    message = refusal(config)
    assert "mig-inference:services[3].namespace:" in message
    assert "one namespace" in message


def test_a_pool_per_deployment_selecting_its_own_pods() -> None:
    plan = plan_of(config_of(DEMAND, gateway={}))
    gateway = plan.gateway
    assert gateway is not None
    routed = [s for s in plan.services if s.spec.engine.value == "vllm"]
    assert [p.name for p in gateway.pools] == [s.name for s in routed]
    for service in routed:
        pool = gateway.pool_of(service.name)
        assert pool is not None
        assert dict(pool.selector)["app.kubernetes.io/name"] == service.name
        assert (pool.replicas, pool.profile, pool.port) == (
            service.replicas, service.profile, service.spec.port,
        )  # fmt: skip
    assert [s for s, _ in gateway.unrouted] == ["embedder"]
    assert any("service embedder: not behind the gateway" in w for w in plan.warnings)


def test_one_model_on_two_slice_sizes_is_split_by_what_each_serves() -> None:
    """`summarize` runs 8 x 2g.20gb at 16/s and 3 x 3g.40gb at 25/s: 128 and 75 requests/s, so
    the 3g pool takes 37% although it has 27% of the replicas."""
    gateway = gateway_of(config_of(DEMAND, gateway={}))
    route = next(r for r in gateway.routes if r.model == "meta-llama/Llama-3.1-8B-Instruct")
    assert route.unit == "requests/s"
    shares = {p.profile: (p.replicas, p.rate, p.weight) for p in route.pools}
    assert shares == {"2g.20gb": (8, 16.0, 631), "3g.40gb": (3, 25.0, 369)}
    by_replicas = round(1000 * 3 / 11)
    assert shares["3g.40gb"][2] != by_replicas


def test_without_throughput_tables_the_compute_slices_weigh() -> None:
    """Two services of one model on 1g and 3g slices of a balanced A100: 4 x 1 and 1 x 3
    compute slices."""
    config = config_of(DEMAND, gateway={})
    small = {"name": "qwen-small", "model": "Qwen/Qwen2.5-0.5B-Instruct", "memoryGiB": 4,
             "profile": "1g.10gb", "replicas": 4}  # fmt: skip
    large = {**small, "name": "qwen-large", "profile": "3g.40gb", "replicas": 1}
    config["services"] = [small, large]
    gateway = gateway_of(config)
    [route] = gateway.routes
    assert route.unit == "compute slices"
    assert [(p.name, p.rate, p.weight) for p in route.pools] == [
        ("qwen-small", 1.0, 571), ("qwen-large", 3.0, 429),
    ]  # fmt: skip


def test_the_served_model_name_is_what_the_route_matches() -> None:
    config = config_of(DEMAND, gateway={})
    config["services"][0]["args"] = ["--served-model-name", "chat"]
    gateway = gateway_of(config)
    assert {r.model for r in gateway.routes} == {"chat", "meta-llama/Llama-3.1-8B-Instruct"}
