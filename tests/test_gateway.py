"""The inference gateway as the program renders it, for a GKE stack (`ephemeral-gke`) and an EKS
stack (`eks-p4de-demand`): every Gateway, HTTPRoute and Istio object validated against the
reference CRDs (Gateway API v1.6.1 standard, Istio 1.30.3), the extension's `inferencepool`
chart (v1.5.0) rendered with `helm template` and each stack's values, its InferencePool
validated against the InferencePool CRD (v1.6.0) and wired to the pods of its Deployment and to
its endpoint picker's Service; Istio's charts rendered with the values given; the
NetworkPolicies that keep everyone else from the model servers."""

from __future__ import annotations

import copy
import functools
import http.server
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from mig_inference.kube.gateway import (
    BODY_ROUTER,
    EXT_PROC_PORT,
    GATEWAY_POD_LABEL,
    ISTIO_NAMESPACE,
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
    INFERENCE_POOL_CRD_VERSION,
    INFERENCE_POOL_VERSION,
    ISTIO_VERSION,
)
from tests.mocked import stack_rendering
from tests.reference import helm_binary, reference_dir, strict_schema
from tests.test_gateway_plan import plan_of

GKE, EKS = "ephemeral-gke", "eks-p4de-demand"
STACKS = (GKE, EKS)
RELEASE = "kubernetes:helm.sh/v3:Release"
POOL_CHART = "gateway/charts/inferencepool-v1.5.0"
ISTIO_CHARTS = f"gateway/charts/istio-{ISTIO_VERSION}"
CRD_DIRS = (f"gateway/crds/gateway-api-{GATEWAY_API_VERSION}-standard",
            f"gateway/crds/inference-extension-{INFERENCE_POOL_CRD_VERSION}")  # fmt: skip
KUBERNETES_VERSION = "1.33.0"


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the strict openAPIV3Schema of every served version of the reference
    CRDs: Gateway API, the InferencePool, and Istio's (from its `base` chart)."""
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
                    schema = strict_schema(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
                    schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def validate_custom(obj: dict[str, Any]) -> None:
    """`obj` against its CRD's schema (structural: CEL rules are not evaluated). Not
    `jsonschema.validate`: that first checks the schema's own patterns, written for Go."""
    schema = crd_schemas()[(obj["apiVersion"], obj["kind"])]
    envelope = ("apiVersion", "kind", "metadata")  # checked by the API server itself
    body = {k: v for k, v in obj.items() if k not in envelope}
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in envelope}
    jsonschema.Draft7Validator({**schema, "properties": properties}).validate(body)


def objects(stack: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in stack_rendering(stack).kubernetes_objects() if o["kind"] == kind]


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


# --- the objects the program creates -----------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_gateway_and_routes_validate_against_the_reference_crds(stack: str) -> None:
    kinds = ("Gateway", "HTTPRoute", "EnvoyFilter", "DestinationRule")
    found = [o for o in stack_rendering(stack).kubernetes_objects() if o["kind"] in kinds]
    assert {o["kind"] for o in found} >= {"Gateway", "HTTPRoute"}
    for obj in found:
        validate_custom(obj)


def test_the_validator_catches_a_misspelled_field() -> None:
    """The check can fail: a route whose backend names a misspelled key, or a weight as text."""
    [route] = objects(EKS, "HTTPRoute")
    wrong = copy.deepcopy(route)
    wrong["spec"]["rules"][0]["backendRefs"][0]["wieght"] = 1
    with pytest.raises(jsonschema.ValidationError, match="wieght"):
        validate_custom(wrong)
    wrong = copy.deepcopy(route)
    wrong["spec"]["rules"][0]["backendRefs"][0]["weight"] = "half"
    with pytest.raises(jsonschema.ValidationError):
        validate_custom(wrong)


@pytest.mark.parametrize("stack", STACKS)
def test_one_gateway_one_route_per_namespace_a_rule_per_model(stack: str) -> None:
    plan = stack_plan(stack)
    gateway_plan = plan.gateway
    assert gateway_plan is not None
    [gateway] = objects(stack, "Gateway")
    assert gateway["metadata"]["namespace"] == gateway_plan.namespace
    assert gateway["spec"]["gatewayClassName"] == gateway_plan.class_name
    assert gateway["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Programmed"
    [listener] = gateway["spec"]["listeners"]
    allowed = listener["allowedRoutes"]["namespaces"]["selector"]["matchExpressions"][0]
    assert allowed["values"] == gateway_plan.namespaces
    routes = objects(stack, "HTTPRoute")
    assert [r["metadata"]["namespace"] for r in routes] == gateway_plan.namespaces
    rules = [rule for route in routes for rule in route["spec"]["rules"]]
    assert len(rules) == len(gateway_plan.routes)
    for rule, model in zip(rules, gateway_plan.routes, strict=True):
        [match] = rule["matches"]
        assert match["path"] == {"type": "PathPrefix", "value": ROUTED_PATH}
        assert match["headers"] == [{"type": "Exact", "name": MODEL_HEADER, "value": model.model}]
        assert [(b["kind"], b["name"], b["weight"]) for b in rule["backendRefs"]] == [
            ("InferencePool", p.name, p.weight) for p in model.pools
        ]


def test_the_eks_route_splits_a_model_by_what_each_slice_serves() -> None:
    [route] = objects(EKS, "HTTPRoute")
    [rule] = [
        r
        for r in route["spec"]["rules"]
        if r["matches"][0]["headers"][0]["value"] == "meta-llama/Llama-3.1-8B-Instruct"
    ]
    weights = {b["name"]: b["weight"] for b in rule["backendRefs"]}
    assert weights == {"summarize-2g-20gb": 631, "summarize-3g-40gb": 369}
    assert rule["timeouts"] == {"request": "300s"}


@pytest.mark.parametrize("stack", STACKS)
def test_model_servers_admit_only_the_gateway_and_their_picker(stack: str) -> None:
    plan = stack_plan(stack)
    assert plan.gateway is not None
    policies = {p["metadata"]["name"]: p for p in objects(stack, "NetworkPolicy")}
    for pool in plan.gateway.pools:
        peers = policies[pool.name]["spec"]["ingress"][0]["from"]
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
        picker = policies[pool.picker]["spec"]
        assert picker["podSelector"] == {"matchLabels": {PICKER_POD_LABEL: pool.picker}}
        assert picker["ingress"][0]["ports"] == [{"port": EXT_PROC_PORT}]
    router = policies[BODY_ROUTER]["spec"]
    assert router["podSelector"] == {"matchLabels": {"app": BODY_ROUTER}}


def test_services_the_gateway_does_not_front_keep_their_own_policy() -> None:
    [embedder] = [p for p in objects(EKS, "NetworkPolicy") if p["metadata"]["name"] == "embedder"]
    assert embedder["spec"]["ingress"][0]["from"] == [{"podSelector": {}}]


@pytest.mark.parametrize("stack", STACKS)
def test_the_body_based_router_is_restricted_and_hooked_into_the_gateway(stack: str) -> None:
    [router] = [d for d in objects(stack, "Deployment") if d["metadata"]["name"] == BODY_ROUTER]
    pod = router["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--plugin") + 1] == (
        'body-field-to-header:model-extractor:{"fieldName":"model",'
        f'"headerName":"{MODEL_HEADER}"}}'
    )
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    kinds = {o["kind"] for o in stack_rendering(stack).kubernetes_objects()}
    if stack == GKE:
        [extension] = objects(stack, "GCPRoutingExtension")
        backend = extension["spec"]["extensionChains"][0]["extensions"][0]["backendRef"]
        assert (backend["name"], backend["port"]) == (BODY_ROUTER, 9004)
        assert "EnvoyFilter" not in kinds
    else:
        [hook] = objects(stack, "EnvoyFilter")
        patch = hook["spec"]["configPatches"][0]["patch"]
        assert patch["operation"] == "INSERT_FIRST"
        assert "GCPRoutingExtension" not in kinds


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
    # Pinned releases, matching the reference copies the objects are validated against.
    assert f"/{GATEWAY_API_VERSION}/standard-install.yaml" in GATEWAY_API_CRDS
    crd = INFERENCE_POOL_CRD.rsplit("/", 1)[1]
    assert f"/{INFERENCE_POOL_CRD_VERSION}/" in INFERENCE_POOL_CRD
    assert (reference_dir(CRD_DIRS[1]) / crd).is_file()


def test_namespaces_with_pickers_enforce_baseline_and_audit_restricted() -> None:
    namespaces = {n["metadata"]["name"]: n["metadata"]["labels"] for n in objects(EKS, "Namespace")}
    assert namespaces["inference"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespaces["inference"]["pod-security.kubernetes.io/audit"] == "restricted"
    without = {n["metadata"]["name"]: n["metadata"]["labels"]
               for n in stack_rendering("eks-p4d").kubernetes_objects() if n["kind"] == "Namespace"}  # fmt: skip
    assert without["inference"]["pod-security.kubernetes.io/enforce"] == "restricted"


# --- the endpoint picker's chart ---------------------------------------------------------------


def _keys(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(tree, dict) and tree:
        return [k for key, value in tree.items() for k in _keys(value, (*prefix, key))]
    return [prefix]


@pytest.mark.parametrize("stack", STACKS)
def test_the_picker_chart_renders_an_inference_pool_wired_to_its_pods(
    stack: str, tmp_path: Path
) -> None:
    chart = reference_dir(POOL_CHART)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert INFERENCE_POOL_CHART.endswith("/" + meta["name"])
    defaults = yaml.safe_load((chart / "values.yaml").read_text())
    epplib = yaml.safe_load((chart / "charts" / "epplib" / "values.yaml").read_text())
    rendering = stack_rendering(stack)
    deployments = {d["metadata"]["name"]: d for d in objects(stack, "Deployment")}
    releases = picker_releases(rendering)
    plan = stack_plan(stack)
    assert plan.gateway is not None
    assert [r.inputs["name"] for r in releases] == [p.name for p in plan.gateway.pools]
    for release in releases:
        inputs = release.inputs
        assert inputs["version"] == INFERENCE_POOL_VERSION
        for key in _keys(inputs["values"]):
            known = functools.reduce(lambda tree, k: tree.get(k, {}) if isinstance(tree, dict) else {},
                                     key[:-1], {**defaults, **epplib})  # fmt: skip
            assert key[-1] in known or key[:2] == ("inferencePool", "modelServers"), key
        documents = helm_template(chart, inputs["name"], inputs["namespace"], inputs["values"],
                                  tmp_path)  # fmt: skip
        [pool] = [d for d in documents if d["kind"] == "InferencePool"]
        validate_custom(pool)
        # Wired to the Deployment's serving pods, on the port they serve.
        pods = deployments[inputs["name"]]["spec"]["template"]["metadata"]["labels"]
        selector = pool["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pods.items()
        container = deployments[inputs["name"]]["spec"]["template"]["spec"]["containers"][0]
        assert pool["spec"]["targetPorts"] == [{"number": container["ports"][0]["containerPort"]}]
        # Its endpoint picker behind `endpointPickerRef`.
        ref = pool["spec"]["endpointPickerRef"]
        [service] = [d for d in documents if d["kind"] == "Service"]
        assert ref["name"] == service["metadata"]["name"] == f"{inputs['name'][:40]}-epp"
        assert ref["port"]["number"] in [p["port"] for p in service["spec"]["ports"]]
        [picker] = [d for d in documents if d["kind"] == "Deployment"]
        assert service["spec"]["selector"] == {PICKER_POD_LABEL: ref["name"]}
        assert picker["spec"]["template"]["metadata"]["labels"][PICKER_POD_LABEL] == ref["name"]
        args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--metrics-endpoint-auth=false" in args
        assert args[args.index("--pool-name") + 1] == inputs["name"]
        resources = picker["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert resources["requests"]["cpu"] == f"{plan.gateway.spec.picker_cpu:g}"
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
    values["inferencePool"].pop("modelServers")
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
    crds = [d for d in base if d["kind"] == "CustomResourceDefinition"]
    assert crds and all(d["spec"]["group"].endswith("istio.io") for d in crds)


def test_plan_of_the_gke_stack_reads_its_proxy_subnet() -> None:
    from tests.test_gateway_plan import config_of

    gateway = plan_of(config_of(GKE)).gateway
    assert gateway is not None and gateway.spec.proxy_subnet == "10.129.0.0/23"


def test_the_pickers_metrics_reach_the_stack_s_prometheus(tmp_path: Path) -> None:
    from tests.mocked import render_config
    from tests.reference import crd_schema
    from tests.test_gateway_plan import config_of

    config = config_of(EKS, monitoring={"prometheusOperator": True, "releaseLabel": "kps"})
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    found = rendering.kubernetes_objects()
    monitors = {o["metadata"]["name"]: o for o in found if o["kind"] == "ServiceMonitor"}
    plan = plan_of(config).gateway
    assert plan is not None
    assert set(monitors) == {pool.picker for pool in plan.pools}
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
        [policy] = [
            o
            for o in found
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == pool.picker
        ]
        metrics = policy["spec"]["ingress"][1]
        assert metrics["ports"] == [{"port": 9090}]
        assert metrics["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]


# --- `plan` ------------------------------------------------------------------------------------


def _mig(*args: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mig", *args], capture_output=True, text=True, check=False,
        timeout=300, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip


def test_plan_shows_the_endpoint_and_what_routes_where() -> None:
    import json

    done = _mig("plan", "--stack", EKS, "--json")
    assert done.returncode == 0, done.stderr
    gateway = json.loads(done.stdout)["gateway"]
    assert (
        gateway["endpoint"]
        == "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    )
    [summarize] = [r for r in gateway["routes"] if r["model"] == "meta-llama/Llama-3.1-8B-Instruct"]
    assert [(p["inference_pool"], p["weight"]) for p in summarize["pools"]] == [
        ("summarize-2g-20gb", 631), ("summarize-3g-40gb", 369),
    ]  # fmt: skip
    assert gateway["not_routed"][0]["service"] == "embedder"
    text = _mig("plan", "--stack", EKS)
    assert text.returncode == 0, text.stderr
    assert (
        "endpoint: http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
        in text.stdout
    )
    assert "summarize-2g-20gb 63% (8 x 2g.20gb at 16 requests/s each)" in text.stdout
    none = _mig("plan", "--stack", "eks-p4d", "--json")
    assert json.loads(none.stdout)["gateway"] is None


# --- the serving check through the gateway -----------------------------------------------------


def _verify(rendering: Rendering) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The verify Job's container env, target and NetworkPolicy of a one-service rendering."""
    import json

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


def test_istio_s_check_asks_the_gateway_s_in_cluster_service(tmp_path: Path) -> None:
    from tests.mocked import render_config
    from tests.test_gateway_plan import config_of

    config = config_of(EKS, verify={"enabled": True})
    config["services"] = config["services"][1:2]
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    env, checked, policy = _verify(rendering)
    assert checked["url"] == "http://inference-gateway-istio.inference-gateway.svc.cluster.local:80"
    assert "MIG_VERIFY_URL" not in env
    [to] = policy["spec"]["egress"][0]["to"]
    assert to["podSelector"] == {"matchLabels": {GATEWAY_POD_LABEL: "inference-gateway"}}


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

        from tests.test_verify_probe import ANSWERS

        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        routed = body.get("model") == self.model
        self._answer((ANSWERS / "vllm_completion.json").read_bytes() if routed else None)

    def log_message(self, *args: object) -> None:
        pass


def test_the_check_names_its_model_to_the_gateway(tmp_path: Path) -> None:
    import json
    import threading

    from tests.test_verify_probe import run_program, target

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


# --- `diff` ------------------------------------------------------------------------------------


def test_diff_shows_turning_the_gateway_on_as_a_gateway_change(tmp_path: Path) -> None:
    """Deployed without the gateway, the stack with it: the gateway and each model's route
    appear, no pool changes, no replica moves, the simulated `pulumi up` succeeds."""
    import json

    from mig_inference.spec.files import stack_path

    deployed = tmp_path / "Pulumi.deployed.yaml"
    text = stack_path(EKS).read_text()
    assert "\n  mig-inference:gateway: {}\n" in text
    deployed.write_text(text.replace("\n  mig-inference:gateway: {}\n", "\n"))
    done = _mig("diff", "--stack", EKS, "--deployed", str(deployed), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    changes = json.loads(done.stdout)
    assert changes["failure"] is None and changes["refusals"] == []
    assert {p["change"] for p in changes["pools"]} == {"unchanged"}
    assert {s["change"] for s in changes["services"]} == {"unaffected"}
    assert changes["cost"]["replicas_evicted"] == 0
    gateway = {c["key"]: (c["old"], c["new"]) for c in changes["gateway"]}
    assert gateway["gateway"] == (None, "istio internal :80 in inference-gateway")
    assert gateway["gateway route meta-llama/Llama-3.1-8B-Instruct"] == (
        None, "summarize-2g-20gb weight 631, summarize-3g-40gb weight 369",
    )  # fmt: skip
    text_run = _mig("diff", "--stack", EKS, "--deployed", str(deployed))
    assert "gateway (updated in place; no replica moves):" in text_run.stdout


def test_a_gke_cluster_the_stack_creates_runs_the_gateway_api() -> None:
    [cluster] = stack_rendering(GKE).of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}
