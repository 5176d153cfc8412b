"""The inference gateway as the program renders it, for a GKE stack (`ephemeral-gke`) and an EKS
stack (`eks-p4de-demand`), and with an external gateway on each cloud: every Gateway,
HTTPRoute and Istio object validated against the reference CRDs (Gateway API v1.6.1 standard,
the InferencePool, Istio 1.30.3), their CEL rules evaluated; llm-d's `llm-d-router-gateway`
chart (v0.10.0) rendered with `helm template` and each model's values, its InferencePool wired
to the pods of every Deployment of the model and to its endpoint picker's Service, its pickers
under the stack's budget and NetworkPolicy; Istio's charts rendered with the values given."""

from __future__ import annotations

import collections
import copy
import functools
import http.server
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from mig_inference.kube.gateway import (
    BODY_ROUTER,
    EXT_PROC_PORT,
    GATEWAY_POD_LABEL,
    ISTIO_NAMESPACE,
    ISTIO_PARAMETERS,
    PICKER_CONFIG_FILE,
    PICKER_HEALTH_PORT,
    PICKER_POD_LABEL,
    istiod_values,
)
from mig_inference.plan import StackPlan
from mig_inference.plan.gateway import GKE_HEALTH_CHECK_RANGES, MODEL_HEADER, ROUTED_PATH
from mig_inference.rendering import Recorded, Rendering
from mig_inference.spec.files import load_stack
from mig_inference.versions import (
    GATEWAY_API_CRDS,
    GATEWAY_API_VERSION,
    INFERENCE_POOL_CHART,
    INFERENCE_POOL_CRD,
    INFERENCE_POOL_VERSION,
    ISTIO_VERSION,
    PICKER_IMAGE,
)
from tests.in_process import mig
from tests.mocked import render_config, stack_rendering
from tests.plan.test_gateway_plan import CREATED_EKS, TLS, config_of, keyed
from tests.reference import helm_binary, reference_dir, strict_schema

GKE, EKS = "ephemeral-gke", "eks-p4de-demand"
STACKS = (GKE, EKS)
RELEASE = "kubernetes:helm.sh/v3:Release"
POOL_CHART = f"gateway/charts/llm-d-router-gateway-{INFERENCE_POOL_VERSION}"
ISTIO_CHARTS = "gateway/charts/istio-1.30.3"
"""The newest Istio charts read here (the pin is a later patch of the same release line)."""
INFERENCE_POOL_CRD_READ = "v1.6.0"
"""The InferencePool CRD read here (the pin's schema is the same: versions.py)."""
CRD_DIRS = (f"gateway/crds/gateway-api-{GATEWAY_API_VERSION}-standard",
            f"gateway/crds/inference-extension-{INFERENCE_POOL_CRD_READ}")  # fmt: skip
KUBERNETES_VERSION = "1.33.0"
SUMMARIZE = "meta-llama/Llama-3.1-8B-Instruct"


# --- the reference CRDs: schemas and CEL rules --------------------------------------------------


@functools.cache
def crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the openAPIV3Schema of every served version of the reference CRDs:
    Gateway API, the InferencePool, and Istio's (from its `base` chart)."""
    paths = [p for d in CRD_DIRS for p in sorted(reference_dir(d).glob("*.yaml"))]
    paths.append(reference_dir(f"{ISTIO_CHARTS}/base") / "files" / "crd-all.gen.yaml")
    schemas = {}
    for path in paths:
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if version.get("served"):
                    schemas[(f"{group}/{version['name']}", kind)] = version["schema"][
                        "openAPIV3Schema"
                    ]
    return schemas


def _split(text: Any, separator: Any) -> celtypes.ListType:
    """Kubernetes' CEL string extension `split` (celpy has the standard library only)."""
    return celtypes.ListType([celtypes.StringType(p) for p in str(text).split(str(separator))])


CEL = celpy.Environment()


def cel_failures(schema: dict[str, Any], value: Any, path: str, counts: collections.Counter[str]
                 ) -> list[str]:  # fmt: skip
    """The CEL rules (`x-kubernetes-validations`) `value` breaks, as the API server evaluates
    them on a create: at every node the schema declares them, with `self` that node (an error,
    like an absent field read without `has()`, fails the rule). Transition rules (`oldSelf`) do
    not apply to a create."""
    if value is None:
        return []
    failures = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            counts["transition rules"] += 1
            continue
        program = CEL.program(CEL.compile(rule["rule"]), functions={"split": _split})
        try:
            result: Any = program.evaluate({"self": json_to_cel(value)})
        except CELEvalError as error:
            result = error
        counts["rules evaluated"] += 1
        if isinstance(result, CELEvalError) or not bool(result):
            failures.append(f"{path}: {rule.get('message', rule['rule'])}")
    properties = schema.get("properties") or {}
    if isinstance(value, dict):
        for key, sub in properties.items():
            if key in value:
                failures += cel_failures(sub, value[key], f"{path}.{key}", counts)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in properties:
                    failures += cel_failures(extra, item, f"{path}.{key}", counts)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            failures += cel_failures(schema["items"], item, f"{path}[{index}]", counts)
    return failures


def validate_custom(obj: dict[str, Any]) -> collections.Counter[str]:
    """`obj` against its CRD: the structural schema, strictly (no unknown field), then its CEL
    rules. Not `jsonschema.validate`: that first checks the schema's own patterns, written for
    Go. Returns how many rules it evaluated."""
    schema = crds()[(obj["apiVersion"], obj["kind"])]
    strict = strict_schema(copy.deepcopy(schema))
    envelope = ("apiVersion", "kind", "metadata")  # checked by the API server itself
    body = {k: v for k, v in obj.items() if k not in envelope}
    properties = {k: v for k, v in strict.get("properties", {}).items() if k not in envelope}
    jsonschema.Draft7Validator({**strict, "properties": properties}).validate(body)
    counts: collections.Counter[str] = collections.Counter()
    failures = cel_failures(schema, body, "", counts)
    assert not failures, failures
    return counts


# --- renderings ----------------------------------------------------------------------------------


@functools.cache
def _rendered(config: str) -> Rendering:
    with tempfile.TemporaryDirectory() as folder:
        rendering = render_config(Path(folder), json.loads(config), apiKey="k", hfToken="t")
    return rendering


def rendered(config: dict[str, Any]) -> Rendering:
    """The program run on `config` (the secrets `apiKey` and `hfToken` given), once per config."""
    rendering = _rendered(json.dumps(config, sort_keys=True))
    assert rendering.error is None, rendering.error
    return rendering


def objects_of(rendering: Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendering.kubernetes_objects() if o["kind"] == kind]


def objects(stack: str, kind: str) -> list[dict[str, Any]]:
    return objects_of(stack_rendering(stack), kind)


def picker_releases(rendering: Rendering) -> list[Recorded]:
    return [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] == INFERENCE_POOL_CHART]


def stack_plan(stack: str) -> StackPlan:
    from mig_inference.plan import plan_stack

    return plan_stack(load_stack(stack))


def helm_template(chart: Path, name: str, namespace: str, values: dict[str, Any],
                  tmp_path: Path) -> list[dict[str, Any]]:  # fmt: skip
    path = tmp_path / f"{name}-values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = subprocess.run(
        [helm_binary(), "template", name, str(chart), "--namespace", namespace, "--values",
         str(path)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def external(stack: str, **gateway: Any) -> dict[str, Any]:
    """`stack` with an external gateway over HTTPS (a Secret's certificate unless given) and an
    API key on every vLLM service."""
    base = config_of(stack)
    settings = {**(base.get("gateway") or {}), "address": "external", "tls": TLS, **gateway}
    return keyed({**base, "gateway": settings})


EKS_EXTERNAL = external(EKS)
OKE_EXTERNAL = external("oke-h100", tls={"certManager": {"issuer": "letsencrypt"},
                                         "hostname": "models.example.com"})  # fmt: skip
GKE_EXTERNAL = external(GKE, tls={"gcpCertificates": ["models-example-com"],
                                  "hostname": "models.example.com"})  # fmt: skip
EXISTING_EXTERNAL = external("existing")
EXTERNAL = {"eks": EKS_EXTERNAL, "oke": OKE_EXTERNAL, "gke": GKE_EXTERNAL,
            "existing": EXISTING_EXTERNAL}  # fmt: skip


# --- the objects the program creates -------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_gateway_and_routes_validate_against_the_reference_crds(stack: str) -> None:
    kinds = ("Gateway", "HTTPRoute", "EnvoyFilter", "DestinationRule")
    found = [o for o in stack_rendering(stack).kubernetes_objects() if o["kind"] in kinds]
    assert {o["kind"] for o in found} >= {"Gateway", "HTTPRoute"}
    counts: collections.Counter[str] = collections.Counter()
    for obj in found:
        counts += validate_custom(obj)
    assert counts["rules evaluated"] > 10


@pytest.mark.parametrize("cloud", sorted(EXTERNAL))
def test_an_external_gateway_on_every_cloud_renders_https_with_authenticated_routes(
    cloud: str,
) -> None:
    """Done-when of the issue: GKE, EKS, OKE and an existing cluster, each with an external
    gateway: an HTTPS listener with its certificate (CRD schema and CEL rules), and every routed
    model server checking its API key."""
    rendering = rendered(EXTERNAL[cloud])
    [gateway] = objects_of(rendering, "Gateway")
    validate_custom(gateway)
    [listener] = gateway["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTPS", 443)
    assert listener["tls"]["mode"] == "Terminate"
    assert listener["tls"].get("certificateRefs") or listener["tls"].get("options")
    for route in objects_of(rendering, "HTTPRoute"):
        validate_custom(route)
    deployments = [d for d in objects_of(rendering, "Deployment")
                   if d["metadata"]["labels"].get("app.kubernetes.io/component") == "inference"]  # fmt: skip
    routed = [d for d in deployments if "vllm" in d["spec"]["template"]["spec"]["containers"][0]["image"]]  # fmt: skip
    assert routed
    for deployment in routed:
        env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "api-key"


def test_the_validator_catches_a_misspelled_field_and_a_broken_rule() -> None:
    """The check can fail: a backend's misspelled key, a weight as text, and an HTTPS listener
    without a certificate (a CEL rule of the Gateway CRD)."""
    [route] = objects(EKS, "HTTPRoute")
    wrong = copy.deepcopy(route)
    wrong["spec"]["rules"][0]["backendRefs"][0]["wieght"] = 1
    with pytest.raises(jsonschema.ValidationError, match="wieght"):
        validate_custom(wrong)
    wrong = copy.deepcopy(route)
    wrong["spec"]["rules"][0]["backendRefs"][0]["weight"] = "half"
    with pytest.raises(jsonschema.ValidationError):
        validate_custom(wrong)
    [gateway] = objects_of(rendered(EKS_EXTERNAL), "Gateway")
    broken = copy.deepcopy(gateway)
    del broken["spec"]["listeners"][0]["tls"]["certificateRefs"]
    with pytest.raises(AssertionError, match="certificateRefs or options must be specified"):
        validate_custom(broken)
    plain = copy.deepcopy(gateway)
    plain["spec"]["listeners"][0]["protocol"] = "HTTP"
    with pytest.raises(AssertionError, match="tls must not be specified"):
        validate_custom(plain)


@pytest.mark.parametrize("stack", STACKS)
def test_one_gateway_one_route_per_namespace_one_pool_per_rule(stack: str) -> None:
    plan = stack_plan(stack)
    gateway_plan = plan.gateway
    assert gateway_plan is not None
    [gateway] = objects(stack, "Gateway")
    assert gateway["metadata"]["namespace"] == gateway_plan.namespace
    assert gateway["spec"]["gatewayClassName"] == gateway_plan.class_name
    assert json.loads(gateway["metadata"]["annotations"]["pulumi.com/waitFor"]) == [
        "condition=Accepted", "condition=Programmed",
    ]  # fmt: skip
    # Istio marks a Gateway with its deprecated service-type annotation not Accepted.
    assert "networking.istio.io/service-type" not in gateway["metadata"]["annotations"]
    [listener] = gateway["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTP", 80)
    allowed = listener["allowedRoutes"]["namespaces"]
    assert allowed["from"] == "Selector"
    assert allowed["selector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": gateway_plan.namespaces}
    ]
    routes = objects(stack, "HTTPRoute")
    assert [r["metadata"]["namespace"] for r in routes] == gateway_plan.namespaces
    rules = [rule for route in routes for rule in route["spec"]["rules"]]
    assert len(rules) == len(gateway_plan.pools)
    for rule, pool in zip(rules, gateway_plan.pools, strict=True):
        [match] = rule["matches"]
        assert match["path"] == {"type": "PathPrefix", "value": ROUTED_PATH}
        assert match["headers"] == [{"type": "Exact", "name": MODEL_HEADER, "value": pool.model}]
        # One InferencePool backend per rule, no weight: istio/istio#61594 (one picker per rule).
        assert rule["backendRefs"] == [
            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool.name}
        ]


def test_the_routes_wait_until_accepted_and_resolved() -> None:
    [route] = objects(EKS, "HTTPRoute")
    conditions = json.loads(route["metadata"]["annotations"]["pulumi.com/waitFor"])
    assert conditions == [
        'jsonpath={.status.parents[0].conditions[?(@.type=="Accepted")].status}=True',
        'jsonpath={.status.parents[0].conditions[?(@.type=="ResolvedRefs")].status}=True',
    ]
    [rule] = [r for r in route["spec"]["rules"]
              if r["matches"][0]["headers"][0]["value"] == SUMMARIZE]  # fmt: skip
    assert rule["timeouts"] == {"request": "300s"}


@pytest.mark.parametrize("stack", STACKS)
def test_model_servers_admit_only_the_gateway_and_their_picker(stack: str) -> None:
    plan = stack_plan(stack)
    assert plan.gateway is not None
    policies = {p["metadata"]["name"]: p for p in objects(stack, "NetworkPolicy")}
    for service in plan.services:
        pool = plan.gateway.pool_of(service.name)
        if pool is None:
            continue
        peers = policies[service.name]["spec"]["ingress"][0]["from"]
        assert {"podSelector": {"matchLabels": {PICKER_POD_LABEL: pool.picker}}} in peers
        if plan.gateway.spec.managed:
            blocks = {p["ipBlock"]["cidr"] for p in peers if "ipBlock" in p}
            assert blocks == {plan.gateway.spec.proxy_subnet, *GKE_HEALTH_CHECK_RANGES}
        else:
            proxies = [p for p in peers if "namespaceSelector" in p]
            assert proxies == [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": plan.gateway.namespace}
                    },
                    "podSelector": {"matchLabels": {GATEWAY_POD_LABEL: plan.gateway.name}},
                }
            ]
        # Nothing else: no pod of the namespace, no declared client.
        assert len(peers) == (4 if plan.gateway.spec.managed else 2)
    proxies_of_model = [
        peer
        for peer in policies[plan.gateway.pools[0].deployments[0]]["spec"]["ingress"][0]["from"]
        if "podSelector" not in peer or "namespaceSelector" in peer
    ]
    for pool in plan.gateway.pools:
        picker = policies[pool.picker]["spec"]
        assert picker["podSelector"] == {"matchLabels": {PICKER_POD_LABEL: pool.picker}}
        # Only the gateway's proxies, as at the model servers.
        assert picker["ingress"][0]["from"] == proxies_of_model
        assert picker["ingress"][0]["ports"] == [{"port": EXT_PROC_PORT},
                                                 {"port": PICKER_HEALTH_PORT}]  # fmt: skip
    router = policies[BODY_ROUTER]["spec"]
    assert router["podSelector"] == {"matchLabels": {"app": BODY_ROUTER}}


def test_services_the_gateway_does_not_front_keep_their_own_policy() -> None:
    [embedder] = [p for p in objects(EKS, "NetworkPolicy") if p["metadata"]["name"] == "embedder"]
    assert embedder["spec"]["ingress"][0]["from"] == [{"podSelector": {}}]


# --- the body-based router -----------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_the_body_based_router_survives_an_eviction(stack: str) -> None:
    """Two replicas on different nodes where possible, a budget that keeps one, rolling updates
    that start a new pod first, liveness and readiness on its gRPC health port, a restricted
    pod, and failing closed at the gateway."""
    [router] = [d for d in objects(stack, "Deployment") if d["metadata"]["name"] == BODY_ROUTER]
    spec = router["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}  # fmt: skip
    pod = spec["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["podAffinityTerm"]["labelSelector"] == {"matchLabels": {"app": BODY_ROUTER}}
    [container] = pod["containers"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["grpc"] == {"port": 9005}
    args = container["args"]
    assert args[args.index("--plugin") + 1] == (
        'body-field-to-header:model-extractor:{"fieldName":"model",'
        f'"headerName":"{MODEL_HEADER}"}}'
    )
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    [budget] = [b for b in objects(stack, "PodDisruptionBudget")
                if b["metadata"]["name"] == BODY_ROUTER]  # fmt: skip
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == {"matchLabels": {"app": BODY_ROUTER}}
    assert spec["template"]["metadata"]["labels"]["app"] == BODY_ROUTER
    # Its token is mounted (the binary needs a client to start) but bound to no Role.
    bindings = [b for b in stack_rendering(stack).kubernetes_objects()
                if b["kind"] in ("RoleBinding", "ClusterRoleBinding")]  # fmt: skip
    assert not [b for b in bindings for s in b.get("subjects", []) if s["name"] == BODY_ROUTER]
    kinds = {o["kind"] for o in stack_rendering(stack).kubernetes_objects()}
    if stack == GKE:
        [extension] = objects(stack, "GCPRoutingExtension")
        [hook] = extension["spec"]["extensionChains"][0]["extensions"]
        assert (hook["backendRef"]["name"], hook["backendRef"]["port"]) == (BODY_ROUTER, 9004)
        assert "failOpen" not in hook  # a Service Extensions callout fails closed by default
        assert "EnvoyFilter" not in kinds
    else:
        [hook] = objects(stack, "EnvoyFilter")
        patch = hook["spec"]["configPatches"][0]["patch"]
        assert patch["operation"] == "INSERT_FIRST"
        assert patch["value"]["typed_config"]["failure_mode_allow"] is False
        assert "GCPRoutingExtension" not in kinds


def test_istio_speaks_tls_to_the_body_router() -> None:
    """The router serves its ext_proc over TLS only (`--secure-serving`, on by default, with a
    self-signed certificate): Istio's gateway reaches it through a DestinationRule that
    originates TLS to its Service; a plaintext rule would fail every request closed."""
    [router] = [d for d in objects(EKS, "Deployment") if d["metadata"]["name"] == BODY_ROUTER]
    [container] = router["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--secure-serving")]
    namespace = router["metadata"]["namespace"]
    [rule] = objects(EKS, "DestinationRule")
    assert rule["spec"]["host"] == f"{BODY_ROUTER}.{namespace}.svc.cluster.local"
    assert rule["spec"]["trafficPolicy"]["tls"]["mode"] == "SIMPLE"
    assert not objects(GKE, "DestinationRule")


@pytest.mark.parametrize("stack", STACKS)
def test_the_body_router_streams_request_bodies_as_its_chart_does(stack: str) -> None:
    """The router reads request bodies streamed, as its chart v1.5.0 configures it: the mode in
    which Envoy 1.35 and later can repeat a large body's last chunk
    (kubernetes-sigs/gateway-api-inference-extension#2988, `versions.KNOWN_ISSUES`). A change of
    mode is a change of that row: buffering would refuse every body over Envoy's 1 MiB buffer."""
    [router] = [d for d in objects(stack, "Deployment") if d["metadata"]["name"] == BODY_ROUTER]
    [container] = router["spec"]["template"]["spec"]["containers"]
    assert "--streaming" in container["args"]
    if stack == GKE:
        [extension] = objects(stack, "GCPRoutingExtension")
        [hook] = extension["spec"]["extensionChains"][0]["extensions"]
        assert hook["requestBodySendMode"] == "FullDuplexStreamed"
    else:
        [hook] = objects(stack, "EnvoyFilter")
        mode = hook["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]
        assert mode["processing_mode"]["request_body_mode"] == "FULL_DUPLEX_STREAMED"


# --- Istio's gateway pods, their Service and load balancer --------------------------------------


def _merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


SKELETONS = {
    "deployment": {"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "inference-gateway-istio"},
                   "spec": {"selector": {"matchLabels": {GATEWAY_POD_LABEL: "inference-gateway"}},
                            "template": {"metadata": {"labels": {GATEWAY_POD_LABEL: "inference-gateway"}},
                                         "spec": {"containers": [{"name": "istio-proxy", "image": "proxyv2"}]}}}},
    "service": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "inference-gateway-istio"},
                "spec": {"ports": [{"name": "http", "port": 80}],
                         "selector": {GATEWAY_POD_LABEL: "inference-gateway"}}},
    "podDisruptionBudget": {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": "inference-gateway-istio"},
                            "spec": {"selector": {"matchLabels": {GATEWAY_POD_LABEL: "inference-gateway"}}}},
}  # fmt: skip
"""The objects Istio's `kube-gateway.yaml` (1.30.3) renders, cut to what its overlays touch."""


def istio_parameters_of(rendering: Rendering) -> dict[str, dict[str, Any]]:
    """Istio's gateway objects as its overlays leave them (each checked against Kubernetes'
    schema), from the ConfigMap the Gateway's `parametersRef` names."""
    [gateway] = objects_of(rendering, "Gateway")
    ref = gateway["spec"]["infrastructure"]["parametersRef"]
    assert ref == {"group": "", "kind": "ConfigMap", "name": ISTIO_PARAMETERS}
    [parameters] = [c for c in objects_of(rendering, "ConfigMap")
                    if c["metadata"]["name"] == ISTIO_PARAMETERS]  # fmt: skip
    assert parameters["metadata"]["namespace"] == gateway["metadata"]["namespace"]
    found = {}
    for key, text in parameters["data"].items():
        merged = _merged(SKELETONS[key], yaml.safe_load(text))
        kubernetes_validate.validate(merged, KUBERNETES_VERSION, strict=True)
        found[key] = merged
    return found


def test_istio_s_gateway_pods_are_two_under_a_budget_and_internal_stays_in_the_cluster() -> None:
    overlays = istio_parameters_of(stack_rendering(EKS))
    assert overlays["deployment"]["spec"]["replicas"] == 2
    affinity = overlays["deployment"]["spec"]["template"]["spec"]["affinity"]
    assert affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert overlays["podDisruptionBudget"]["spec"]["minAvailable"] == 1
    assert overlays["service"]["spec"]["type"] == "ClusterIP"
    assert "annotations" not in overlays["service"]["metadata"]


def test_an_external_istio_gateway_gets_each_cloud_s_internet_facing_load_balancer() -> None:
    eks = istio_parameters_of(rendered(EKS_EXTERNAL))["service"]
    assert eks["spec"]["type"] == "LoadBalancer"
    assert eks["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/aws-load-balancer-type": "external",
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
        "service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing",
    }
    subnet = "ocid1.subnet.oc1..lb"
    oke = istio_parameters_of(rendered({**OKE_EXTERNAL, "gateway": {
        **OKE_EXTERNAL["gateway"], "loadBalancerSubnetId": subnet}}))["service"]  # fmt: skip
    assert oke["spec"]["type"] == "LoadBalancer"
    annotations = oke["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/oci-load-balancer-subnet1"] == subnet
    assert annotations["service.beta.kubernetes.io/oci-load-balancer-shape"] == "flexible"
    existing = istio_parameters_of(rendered(EXISTING_EXTERNAL))["service"]
    assert existing["spec"]["type"] == "LoadBalancer" and "annotations" not in existing["metadata"]


def test_a_created_eks_cluster_gets_the_aws_load_balancer_controller_for_an_external_gateway(
) -> None:  # fmt: skip
    import hashlib
    from importlib.resources import files

    from mig_inference.versions import (
        AWS_LOAD_BALANCER_CONTROLLER_POLICY_SHA256,
        AWS_LOAD_BALANCER_CONTROLLER_VERSION,
    )

    created = {**EKS_EXTERNAL, "cluster": {**EKS_EXTERNAL["cluster"], **CREATED_EKS},
               "gateway": {**EKS_EXTERNAL["gateway"], "endpointPicker": {"cpu": 0.7}}}  # fmt: skip
    rendering = rendered(created)
    [controller] = [r for r in rendering.of_type(RELEASE)
                    if r.inputs["chart"] == "aws-load-balancer-controller"]  # fmt: skip
    assert controller.inputs["version"] == AWS_LOAD_BALANCER_CONTROLLER_VERSION
    values = controller.inputs["values"]
    assert (values["clusterName"], values["region"], values["vpcId"]) == (
        "demand-fleet", "us-east-1", "vpc-0a1b2c3d4e5f60718",
    )  # fmt: skip
    assert (values["replicaCount"], values["podDisruptionBudget"]) == (2, {"maxUnavailable": 1})
    # No Service mutator webhook (kubernetes-sigs/aws-load-balancer-controller#4140): until the
    # controller's pods answer, it would refuse every Service the stack creates beside it; the
    # gateway's Service names the controller by its annotations instead.
    assert values["enableServiceMutatorWebhook"] is False
    [association] = [r for r in rendering.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                     if r.inputs["serviceAccount"] == "aws-load-balancer-controller"]  # fmt: skip
    assert association.inputs["namespace"] == "kube-system"
    policy_file = files("mig_inference").joinpath(
        "data", "aws-load-balancer-controller-iam-policy.json"
    )
    digest = hashlib.sha256(policy_file.read_bytes()).hexdigest()
    assert digest == AWS_LOAD_BALANCER_CONTROLLER_POLICY_SHA256
    policies = [r.inputs["policy"] for r in rendering.of_type("aws:iam/rolePolicy:RolePolicy")]
    assert json.dumps(json.loads(policy_file.read_text())) in policies
    addons = {r.inputs["addonName"] for r in rendering.of_type("aws:eks/addon:Addon")}
    assert "eks-pod-identity-agent" in addons
    # The gateway comes after it: its Service is created once the controller can take it.
    [gateway] = [
        o for k, o in rendering.options.items() if k[0] == "mig-inference:index:InferenceGateway"
    ]
    assert any(
        kind == "mig-inference:index:AwsLoadBalancerController" for kind, _ in gateway.dependencies
    )
    # A joined cluster gets none (it is warned about instead).
    joined = rendered(EKS_EXTERNAL)
    assert not [
        r for r in joined.of_type(RELEASE) if r.inputs["chart"] == "aws-load-balancer-controller"
    ]


# --- certificates -------------------------------------------------------------------------------


def test_certificates_from_a_secret_cert_manager_or_google() -> None:
    [secret] = objects_of(rendered(EKS_EXTERNAL), "Gateway")
    [listener] = secret["spec"]["listeners"]
    assert listener["hostname"] == "models.example.com"
    assert listener["tls"]["certificateRefs"] == [
        {"group": "", "kind": "Secret", "name": "models-tls"}
    ]
    oke = rendered({**OKE_EXTERNAL, "gateway": {**OKE_EXTERNAL["gateway"],
                                               "loadBalancerSubnetId": "ocid1.subnet.oc1..lb"}})  # fmt: skip
    [certificate] = objects_of(oke, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["metadata"]["namespace"] == "inference-gateway"
    assert certificate["spec"]["dnsNames"] == ["models.example.com"]
    assert certificate["spec"]["issuerRef"] == {"name": "letsencrypt", "kind": "ClusterIssuer",
                                                "group": "cert-manager.io"}  # fmt: skip
    [gateway] = objects_of(oke, "Gateway")
    assert (
        gateway["spec"]["listeners"][0]["tls"]["certificateRefs"][0]["name"]
        == (certificate["spec"]["secretName"])
    )
    gke = rendered(GKE_EXTERNAL)
    [managed] = objects_of(gke, "Gateway")
    assert managed["spec"]["gatewayClassName"] == "gke-l7-regional-external-managed"
    assert managed["spec"]["listeners"][0]["tls"] == {
        "mode": "Terminate", "options": {"networking.gke.io/cert-manager-certs": "models-example-com"},
    }  # fmt: skip
    apis = {r.inputs["service"] for r in gke.of_type("gcp:projects/service:Service")}
    assert apis == {"networkservices.googleapis.com", "certificatemanager.googleapis.com"}
    # Each route answers the certificate's hostname only.
    for route in objects_of(gke, "HTTPRoute"):
        assert route["spec"]["hostnames"] == ["models.example.com"]
    assert gke.outputs["gateway"]["url"] == "https://models.example.com:443"


def test_a_gke_cluster_the_stack_creates_runs_the_gateway_api_and_its_network_services_api() -> (
    None
):
    rendering = stack_rendering(GKE)
    [cluster] = rendering.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
    [api] = rendering.of_type("gcp:projects/service:Service")
    assert (api.inputs["service"], api.inputs["disableOnDestroy"]) == (
        "networkservices.googleapis.com", False,
    )  # fmt: skip
    [lookup] = [args for token, args in rendering.calls
                if token == "gcp:compute/getSubnetworks:getSubnetworks"]  # fmt: skip
    assert (
        lookup["filter"] == '(ipCidrRange = "10.129.0.0/23") (purpose = "REGIONAL_MANAGED_PROXY")'
    )
    assert lookup["region"] == "us-central1"


def _joined_gke(**gateway: Any) -> dict[str, Any]:
    config = config_of(GKE, gateway={"proxySubnet": "10.129.0.0/23", **gateway})
    config["cluster"] = {"name": "serving", "project": "my-gcp-project", "location": "us-central1"}
    config.pop("ephemeral")
    return config


def test_a_joined_gke_cluster_is_checked_for_the_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its Gateway API on, its version installing the InferencePool CRD, and the region's
    proxy-only subnet of the stack's range on its network: each refused at preview, with the
    way forward."""
    from mig_inference import offline_answers

    token = "gcp:container/getCluster:getCluster"
    assert rendered(_joined_gke()).error is None
    for changed, words in (
        ({"masterVersion": "1.33.5-gke.1000"}, "needs 1.34.0-gke.1626000 or later"),
        ({"gatewayApiConfigs": [{"channel": "CHANNEL_DISABLED"}]}, "--gateway-api=standard"),
        ({"network": "projects/my-gcp-project/global/networks/serving-vpc"},
         "has no subnet 10.129.0.0/23 on network serving-vpc"),
    ):  # fmt: skip
        calls = offline_answers.FAKE_CALLS
        monkeypatch.setitem(calls, token, {**calls[token], **changed})
        with tempfile.TemporaryDirectory() as folder:
            refused = render_config(Path(folder), _joined_gke())
        assert refused.error is not None and words in refused.error, refused.error
        assert refused.error.startswith("mig-inference:gateway")
        monkeypatch.undo()


# --- the endpoint pickers' chart ---------------------------------------------------------------


def _keys(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(tree, dict) and tree:
        return [k for key, value in tree.items() for k in _keys(value, (*prefix, key))]
    return [prefix]


FREE_FORM = (("router", "modelServers", "matchLabels"), ("router", "epp", "flags"),
             ("router", "epp", "pluginsCustomConfig"), ("router", "epp", "affinity"))  # fmt: skip
"""Values the chart passes on as given (no defaults to compare their keys with)."""


@pytest.mark.parametrize("stack", STACKS)
def test_the_picker_chart_renders_one_inference_pool_per_model_wired_to_its_pods(
    stack: str, tmp_path: Path
) -> None:
    chart = reference_dir(POOL_CHART)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert INFERENCE_POOL_CHART.endswith("/" + meta["name"])
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    router = yaml.safe_load((chart / "charts" / "routerlib" / "values.yaml").read_text())
    given = {k: v for k, v in (defaults.get("router") or {}).items() if v is not None}
    known = {**defaults, "router": {**router, **given}}
    rendering = stack_rendering(stack)
    deployments = {d["metadata"]["name"]: d for d in objects(stack, "Deployment")}
    budgets = {b["metadata"]["name"]: b for b in objects(stack, "PodDisruptionBudget")}
    policies = {p["metadata"]["name"]: p for p in objects(stack, "NetworkPolicy")}
    plan = stack_plan(stack)
    assert plan.gateway is not None
    # One release per pool of the plan, by name: the mocks record resources in the order their
    # registrations complete, which need not be the order the program made them in.
    releases = {r.inputs["name"]: r for r in picker_releases(rendering)}
    assert len(releases) == len(picker_releases(rendering))
    assert sorted(releases) == sorted(p.name for p in plan.gateway.pools)
    for pool in plan.gateway.pools:
        inputs = releases[pool.name].inputs
        assert inputs["version"] == INFERENCE_POOL_VERSION
        for key in _keys(inputs["values"]):
            tree = functools.reduce(lambda t, k: t.get(k, {}) if isinstance(t, dict) else {},
                                    key[:-1], known)  # fmt: skip
            assert key[-1] in tree or any(key[: len(f)] == f for f in FREE_FORM), key
        documents = helm_template(chart, inputs["name"], inputs["namespace"], inputs["values"],
                                  tmp_path)  # fmt: skip
        [inference_pool] = [d for d in documents if d["kind"] == "InferencePool"]
        validate_custom(inference_pool)
        # The pods of every Deployment (slice size) of the model, on the port they serve.
        selector = inference_pool["spec"]["selector"]["matchLabels"]
        for part in pool.deployments:
            labels = deployments[part]["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= labels.items(), part
        others = [d for name, d in deployments.items() if name not in pool.deployments]
        for other in others:
            assert not selector.items() <= other["spec"]["template"]["metadata"]["labels"].items()
        container = deployments[pool.deployments[0]]["spec"]["template"]["spec"]["containers"][0]
        assert inference_pool["spec"]["targetPorts"] == [
            {"number": container["ports"][0]["containerPort"]}
        ]
        # Fail open: with both pickers away, requests still reach a ready replica.
        ref = inference_pool["spec"]["endpointPickerRef"]
        assert ref["failureMode"] == "FailOpen"
        [service] = [d for d in documents if d["kind"] == "Service"]
        assert ref["name"] == service["metadata"]["name"] == pool.picker
        assert ref["port"]["number"] in [p["port"] for p in service["spec"]["ports"]]
        [picker] = [d for d in documents if d["kind"] == "Deployment"]
        pod_labels = picker["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
        # Two pickers, both serving (no leader election: the later flag wins), under a budget
        # and a NetworkPolicy that select the chart's own pod labels.
        assert picker["spec"]["replicas"] == 2
        [epp] = [c for c in picker["spec"]["template"]["spec"]["containers"] if c["name"] == "epp"]
        args = epp["args"]
        flags = [a for a in args if a.startswith("--ha-enable-leader-election")]
        assert flags[-1] == "--ha-enable-leader-election=false"
        assert epp["image"] == "{registry}/{repository}:{tag}".format(**PICKER_IMAGE)
        assert epp["livenessProbe"]["grpc"]["port"] == PICKER_HEALTH_PORT
        assert epp["readinessProbe"]["grpc"]["port"] == PICKER_HEALTH_PORT
        budget = budgets[pool.picker]["spec"]
        assert budget["maxUnavailable"] == 1
        assert budget["selector"]["matchLabels"].items() <= pod_labels.items()
        assert policies[pool.picker]["spec"]["podSelector"]["matchLabels"].items() <= (
            pod_labels.items()
        )
        # Its scorers without the prefix-cache one (two active replicas would each see half).
        [config] = [d for d in documents if d["kind"] == "ConfigMap"]
        scorers = yaml.safe_load(config["data"][PICKER_CONFIG_FILE])
        assert args[args.index("--config-file") + 1] == f"/config/{PICKER_CONFIG_FILE}"
        assert {p["type"] for p in scorers["plugins"]} >= {"queue-scorer",
                                                          "kv-cache-utilization-scorer"}  # fmt: skip
        assert "prefix-cache-scorer" not in {p["type"] for p in scorers["plugins"]}
        resources = epp["resources"]
        assert resources["requests"] == {"cpu": pool.picker_size.cpu_text,
                                         "memory": pool.picker_size.memory_text}  # fmt: skip
        for document in documents:
            group = document["apiVersion"].split("/")[0]
            if group in ("inference.networking.k8s.io", "networking.istio.io"):
                validate_custom(document)
            elif group != "networking.gke.io":  # GKE's own CRDs: no reference copy
                kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_picker_chart_refuses_a_pool_without_its_pods(tmp_path: Path) -> None:
    """The render can fail: the chart's own guard, which the values pass."""
    [release] = picker_releases(stack_rendering(GKE))
    values = copy.deepcopy(release.inputs["values"])
    values["router"]["modelServers"].pop("matchLabels")
    with pytest.raises(AssertionError, match="matchLabels is required"):
        helm_template(reference_dir(POOL_CHART), "p", "inference", values, tmp_path)


# --- Istio's charts ------------------------------------------------------------------------------


def test_istio_renders_with_the_inference_extension_on(tmp_path: Path) -> None:
    istiod = helm_template(reference_dir(f"{ISTIO_CHARTS}/istiod"), "istiod", ISTIO_NAMESPACE,
                           istiod_values(), tmp_path)  # fmt: skip
    [deployment] = [d for d in istiod if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"docker.io/istio/pilot:{ISTIO_VERSION}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ENABLE_GATEWAY_API_INFERENCE_EXTENSION"] == "true"
    base = helm_template(reference_dir(f"{ISTIO_CHARTS}/base"), "istio-base", ISTIO_NAMESPACE,
                         {}, tmp_path)  # fmt: skip
    crds_of_base = [d for d in base if d["kind"] == "CustomResourceDefinition"]
    assert crds_of_base and all(d["spec"]["group"].endswith("istio.io") for d in crds_of_base)


def test_gke_applies_no_crds_and_installs_no_gateway_controller() -> None:
    rendering = stack_rendering(GKE)
    assert not [c for c in rendering.components if c[0] == "kubernetes:yaml/v2:ConfigFile"]
    assert not [r for r in rendering.of_type(RELEASE) if r.inputs["chart"] in ("base", "istiod")]


def test_eks_installs_the_crds_and_istio_with_the_extension_on() -> None:
    rendering = stack_rendering(EKS)
    files = [name for kind, name in rendering.components if kind == "kubernetes:yaml/v2:ConfigFile"]
    assert len(files) == 2
    releases = {r.inputs["chart"]: r.inputs for r in rendering.of_type(RELEASE)}
    assert releases["istiod"]["values"] == istiod_values()
    assert releases["istiod"]["namespace"] == releases["base"]["namespace"] == ISTIO_NAMESPACE
    assert releases["istiod"]["version"] == releases["base"]["version"] == ISTIO_VERSION
    assert f"/{GATEWAY_API_VERSION}/standard-install.yaml" in GATEWAY_API_CRDS
    crd = INFERENCE_POOL_CRD.rsplit("/", 1)[1]
    assert (reference_dir(CRD_DIRS[1]) / crd).is_file()


def test_namespaces_with_pickers_enforce_baseline_and_audit_restricted() -> None:
    namespaces = {n["metadata"]["name"]: n["metadata"]["labels"] for n in objects(EKS, "Namespace")}
    assert namespaces["inference"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespaces["inference"]["pod-security.kubernetes.io/audit"] == "restricted"
    without = {n["metadata"]["name"]: n["metadata"]["labels"]
               for n in stack_rendering("eks-p4d").kubernetes_objects() if n["kind"] == "Namespace"}  # fmt: skip
    assert without["inference"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_pickers_metrics_reach_the_stack_s_prometheus() -> None:
    from tests.plan.test_gateway_plan import gateway_of
    from tests.reference import crd_schema

    config = config_of(EKS, monitoring={"prometheusOperator": True, "releaseLabel": "kps"})
    found = rendered(config).kubernetes_objects()
    monitors = {o["metadata"]["name"]: o for o in found if o["kind"] == "ServiceMonitor"}
    plan = gateway_of(config)
    validator = jsonschema.Draft7Validator(
        crd_schema("monitoring.coreos.com", "ServiceMonitor", "v1")
    )
    for pool in plan.pools:
        monitor = monitors[pool.picker]
        validator.validate(monitor)
        assert monitor["metadata"]["labels"]["release"] == "kps"
        assert monitor["spec"]["selector"] == {
            "matchLabels": {"app.kubernetes.io/name": pool.picker}
        }
        assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
        [policy] = [o for o in found if o["kind"] == "NetworkPolicy"
                    and o["metadata"]["name"] == pool.picker]  # fmt: skip
        metrics = policy["spec"]["ingress"][1]
        assert metrics["ports"] == [{"port": 9090}]
        assert metrics["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]


# --- `plan` ------------------------------------------------------------------------------------


def _mig(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line's `main` in this process (what `plan` and `diff` compute; the command
    line as users run it is tested in tests/cli/)."""
    return mig(*args)


def test_plan_shows_the_endpoint_the_pools_and_the_pickers() -> None:
    done = _mig("plan", "--stack", EKS, "--json")
    assert done.returncode == 0, done.stderr
    gateway = json.loads(done.stdout)["gateway"]
    assert gateway["endpoint"] == (
        "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    )
    [summarize] = [r for r in gateway["routes"] if r["model"] == SUMMARIZE]
    assert summarize["inference_pool"] == "summarize"
    assert [(s["profile"], s["share_of_capacity"]) for s in summarize["slices"]] == [
        ("2g.20gb", 0.631), ("3g.40gb", 0.369),
    ]  # fmt: skip
    assert summarize["pickers"]["replicas"] == 2 and summarize["pickers"]["cpu"] == 3.25
    assert gateway["not_routed"][0]["service"] == "embedder"
    text = _mig("plan", "--stack", EKS)
    assert text.returncode == 0, text.stderr
    assert (
        "endpoint: http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
        in text.stdout
    )
    assert "8 x 2g.20gb at 16 requests/s each (63% of its capacity)" in text.stdout
    assert "2 endpoint pickers, 3.25 CPU and 1 GiB each" in text.stdout
    none = _mig("plan", "--stack", "eks-p4d", "--json")
    assert json.loads(none.stdout)["gateway"] is None


# --- the serving check through the gateway -----------------------------------------------------


def _verify(rendering: Rendering) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The verify Job's container env, target and NetworkPolicy of a one-service rendering."""
    [job] = [o for o in rendering.kubernetes_objects() if o["kind"] == "Job"
             and o["metadata"]["name"].startswith("verify-")]  # fmt: skip
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    [policy] = [o for o in rendering.kubernetes_objects() if o["kind"] == "NetworkPolicy"
                and o["metadata"]["name"].startswith("verify-")]  # fmt: skip
    return env, json.loads(env["MIG_VERIFY_TARGET"]), policy


def test_gke_s_check_asks_the_load_balancer_s_address() -> None:
    env, checked, policy = _verify(stack_rendering(GKE))
    assert checked["url"] == "gateway" and checked["model_header"] == MODEL_HEADER
    # The address the Gateway reports once programmed (the mocks' stand-in for GKE's).
    assert env["MIG_VERIFY_URL"] == "http://10.128.0.100:80"
    egress = policy["spec"]["egress"][0]
    assert egress == {"ports": [{"port": 80, "protocol": "TCP"}]}


def test_istio_s_check_asks_the_gateway_s_in_cluster_service() -> None:
    config = config_of(EKS, verify={"enabled": True})
    config["services"] = config["services"][1:2]
    env, checked, policy = _verify(rendered(config))
    assert checked["url"] == "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    assert "MIG_VERIFY_URL" not in env
    [to] = policy["spec"]["egress"][0]["to"]
    assert to["podSelector"] == {"matchLabels": {GATEWAY_POD_LABEL: "inference-gateway"}}


def test_behind_an_https_gateway_the_check_asks_the_service_which_admits_it() -> None:
    """The certificate names the public hostname, which the Job cannot verify inside the
    cluster: it asks the service's own Service, whose NetworkPolicy admits it beside the
    gateway."""
    config = {**EKS_EXTERNAL, "verify": {"enabled": True}}
    config["services"] = config["services"][1:2]
    rendering = rendered(config)
    _, checked, _ = _verify(rendering)
    assert checked["url"].startswith("http://summarize.inference.svc")
    assert checked["model_header"] is None
    [policy] = [p for p in objects_of(rendering, "NetworkPolicy")
                if p["metadata"]["name"] == "summarize-2g-20gb"]  # fmt: skip
    peers = policy["spec"]["ingress"][0]["from"]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mig-inference-verify",
                                            "app.kubernetes.io/instance": "summarize"}}} in peers  # fmt: skip


class Gateway(http.server.BaseHTTPRequestHandler):
    """A stand-in for the gateway: a request reaches the model only when it names it, in the
    routed header (GET) or in its body's `model` (the body-based router's job, done here)."""

    model = "Qwen/Qwen2.5-1.5B-Instruct"

    def _answer(self, body: bytes | None) -> None:
        self.send_response(200 if body else 404)
        body = body or b'{"error": "no route"}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        import json

        listed = json.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        self._answer(listed.encode() if self.headers.get(MODEL_HEADER) == self.model else None)

    def do_POST(self) -> None:
        import json

        from tests.verify.test_verify_probe import ANSWERS

        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        routed = body.get("model") == self.model
        self._answer((ANSWERS / "vllm_completion.json").read_bytes() if routed else None)

    def log_message(self, *args: object) -> None:
        pass


def test_the_check_names_its_model_to_the_gateway(tmp_path: Path) -> None:
    import json
    import threading

    from tests.verify.test_verify_probe import run_program, target

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        spec = {**target("vllm", Gateway.model).__dict__, "url": "gateway",
                "model_header": MODEL_HEADER}  # fmt: skip
        run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec),
                                    "MIG_VERIFY_URL": url}, tmp_path)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        # Without the header, the gateway has no route for the model list.
        spec["model_header"] = None
        run = run_program("probe", {"MIG_VERIFY_TARGET": json.dumps(spec),
                                    "MIG_VERIFY_URL": url}, tmp_path)  # fmt: skip
        assert run.returncode == 1 and "answered HTTP 404" in run.stdout
    finally:
        server.shutdown()
        server.server_close()


# --- `diff`: who may call each service, and each model's pool ---------------------------------


def _diff(deployed_text: str, stack: str, tmp_path: Path) -> dict[str, Any]:
    from mig_inference.spec.files import stack_path

    deployed = tmp_path / "Pulumi.deployed.yaml"
    deployed.write_text(deployed_text)
    done = _mig("diff", "--stack", stack, "--deployed", str(deployed), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    del stack_path
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_diff_says_turning_the_gateway_on_cuts_off_direct_callers(tmp_path: Path) -> None:
    """Deployed without the gateway, the stack with it: no replica moves, and each routed
    service's callers change (its NetworkPolicy admits only the gateway and its picker), the
    TGI embedder's do not; each model's pool and capacity shares appear."""
    from mig_inference.spec.files import stack_path

    text = Path(stack_path(EKS)).read_text()
    assert "\n  mig-inference:gateway: {}\n" in text
    changes = _diff(text.replace("\n  mig-inference:gateway: {}\n", "\n"), EKS, tmp_path)
    assert changes["failure"] is None and changes["refusals"] == []
    assert {p["change"] for p in changes["pools"]} == {"unchanged"}
    assert changes["cost"]["replicas_evicted"] == 0
    services = {s["name"]: s for s in changes["services"]}
    assert services["embedder"]["change"] == "unaffected"
    for name in ("chat-1g-10gb", "summarize-2g-20gb", "summarize-3g-40gb"):
        assert services[name]["change"] == "callers change", services[name]
        reason = services[name]["reason"]
        assert (
            "the pods of its namespace (or the clients it names) -> only Istio's gateway pods"
            in (reason)
        )
        assert "refused from now on" in reason
        assert "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80" in reason
    gateway = {c["key"]: (c["old"], c["new"]) for c in changes["gateway"]}
    assert gateway["gateway"] == (None, "istio internal HTTP :80 in inference-gateway")
    old, new = gateway[f"gateway route {SUMMARIZE}"]
    assert old is None and new.startswith("InferencePool summarize (8 x 2g.20gb (63% of its")
    text_run = _mig("diff", "--stack", EKS, "--deployed", str(tmp_path / "Pulumi.deployed.yaml"))
    assert "chat-1g-10gb: callers change (callers: the pods of its namespace" in text_run.stdout
    assert "gateway (updated in place; no replica moves):" in text_run.stdout


def test_diff_says_turning_it_off_gives_the_services_their_callers_back(tmp_path: Path) -> None:
    from mig_inference.spec.files import stack_path

    text = Path(stack_path(EKS)).read_text()
    off = tmp_path / "stacks"
    off.mkdir()
    (off / f"Pulumi.{EKS}.yaml").write_text(text.replace("\n  mig-inference:gateway: {}\n", "\n"))
    deployed = tmp_path / "Pulumi.deployed.yaml"
    deployed.write_text(text)
    done = _mig("diff", "--stack-file", str(off / f"Pulumi.{EKS}.yaml"), "--deployed",
                str(deployed), "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    services = {s["name"]: s for s in json.loads(done.stdout)["services"]}
    assert services["chat-1g-10gb"]["change"] == "callers change"
    assert services["chat-1g-10gb"]["reason"].startswith(
        "callers: only the gateway -> the pods of its namespace"
    )
    assert services["embedder"]["change"] == "unaffected"


def test_diff_of_the_stack_against_itself_is_clean(tmp_path: Path) -> None:
    from mig_inference.spec.files import stack_path

    changes = _diff(Path(stack_path(EKS)).read_text(), EKS, tmp_path)
    assert {s["change"] for s in changes["services"]} == {"unaffected"}
    assert changes["gateway"] == []
