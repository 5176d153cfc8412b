"""Per-slice observability and queue-based replica autoscaling: the Prometheus Operator objects,
alert rules and dashboard, KEDA's ScaledObject, and every PromQL expression parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import promql_parser
import pytest

from mig_inference.errors import MigError, MigErrors
from mig_inference.kube.monitoring import (
    dashboard_uid,
    expressions,
    ksm_allowlist,
    prometheus_label,
    queue_query,
    queue_threshold,
)
from mig_inference.plan import plan_stack
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack, stack_names
from mig_inference.versions import GPU_OPERATOR_VERSION, KEDA_VERSION
from tests.mocked import named, release, render_config, stack_rendering
from tests.promql_instant import evaluate, series
from tests.reference import crd_schema

STACK = "eks-p5-from-zero"


def _kinds(kind: str) -> list[dict[str, Any]]:
    return [o for o in stack_rendering(STACK).kubernetes_objects() if o["kind"] == kind]


@pytest.mark.parametrize("stack", stack_names())
def test_every_expression_parses(stack: str) -> None:
    for expr in expressions(plan_stack(load_stack(stack))):
        promql_parser.parse(expr)  # raises ValueError on bad PromQL


def test_the_parser_refuses_bad_promql() -> None:
    with pytest.raises(ValueError, match="unclosed"):
        promql_parser.parse("sum(vllm:num_requests_waiting")


def test_pod_monitor_per_service() -> None:
    [monitor] = _kinds("PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["selector"] == {"matchLabels": {"app.kubernetes.io/name": "chat"}}
    assert spec["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics"}]
    assert spec["podTargetLabels"] == ["app.kubernetes.io/name"]


def test_alert_rules() -> None:
    [rules] = _kinds("PrometheusRule")
    [group] = rules["spec"]["groups"]
    by_name = {rule["alert"]: rule for rule in group["rules"]}
    assert set(by_name) == {"MigConfigFailed", "MigConfigPending", "MigSliceMemoryFull",
                            "VLLMQueueGrowing", "TGIQueueGrowing"}  # fmt: skip
    assert by_name["MigConfigPending"]["for"] == "15m"
    assert 'label_nvidia_com_mig_config_state="failed"' in by_name["MigConfigFailed"]["expr"]
    assert "DCGM_FI_DEV_FB_USED" in by_name["MigSliceMemoryFull"]["expr"]
    # Two rules of the slice-memory alert: a full slice, and slices whose memory goes unreported.
    reasons = [
        r["labels"].get("reason") for r in group["rules"] if r["alert"] == "MigSliceMemoryFull"
    ]
    assert reasons == [None, "memory-not-reported"]
    assert "DCGM_FI_DEV_GPU_UTIL" not in json.dumps(group)  # not reported for MIG devices
    for rule in group["rules"]:
        assert rule["expr"] and rule["labels"]["severity"] in {"warning", "critical"}


def _slice_memory_rules() -> tuple[str, str]:
    [rules] = _kinds("PrometheusRule")
    [full, unreported] = [
        r["expr"] for r in rules["spec"]["groups"][0]["rules"] if r["alert"] == "MigSliceMemoryFull"
    ]
    return full, unreported


def _node(name: str, pool: str, state: str = "success") -> tuple[Any, float]:
    return series("kube_node_labels", 1, node=name, label_mig_inference_io_pool=pool,
                  label_nvidia_com_mig_config_state=state)  # fmt: skip


def _slice(metric: str, node: str, value: float, instance: str = "1") -> tuple[Any, float]:
    return series(metric, value, hostname=node, gpu="0", GPU_I_ID=instance,
                  GPU_I_PROFILE="1g.10gb", instance=f"{node}:9400")  # fmt: skip


def test_the_slice_memory_alert_fires_when_a_mig_node_reports_no_slice_memory() -> None:
    # NVIDIA/dcgm-exporter#512: on H100 the exporter reports DCGM_FI_DEV_FB_* for no MIG
    # instance, so the ratio rule has no series to exceed its threshold on that node.
    full, unreported = _slice_memory_rules()
    pool = plan_stack(load_stack(STACK)).pools[0].name
    samples = [
        _node("reported", pool), _node("silent", pool), _node("starting", pool, "pending"),
        _node("cpu", ""),
        _slice("DCGM_FI_DEV_FB_USED", "reported", 9_900), _slice("DCGM_FI_DEV_FB_FREE", "reported", 100),
        _slice("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "silent", 0.4),
    ]  # fmt: skip
    assert [s["node"] for s in evaluate(unreported, samples)] == ["silent"]
    # The ratio rule sees only the node that reports its slices (99% used there).
    assert [s["hostname"] for s in evaluate(full, samples)] == ["reported"]
    # Once the silent node reports its slices, only the ratio rule speaks.
    samples += [
        _slice("DCGM_FI_DEV_FB_USED", "silent", 10),
        _slice("DCGM_FI_DEV_FB_FREE", "silent", 9_990),
    ]
    assert evaluate(unreported, samples) == []


def test_no_unreported_rule_without_slices_the_operator_watches() -> None:
    # GKE's own partitions: no GPU Operator, no DCGM exporter of its own to miss them.
    from mig_inference.kube.monitoring import slice_memory_unreported

    assert slice_memory_unreported(plan_stack(load_stack("gke-native"))) is None


def test_the_evaluator_reads_what_it_is_given() -> None:
    assert evaluate('up{job="a"} unless on (node) down', [series("up", 1, job="a", node="n")]) == [
        {"__name__": "up", "job": "a", "node": "n"}
    ]
    with pytest.raises(NotImplementedError):
        evaluate("rate(up[5m])", [series("up", 1)])


def test_dashboard_config_map_for_grafanas_sidecar() -> None:
    [configmap] = [
        c for c in _kinds("ConfigMap") if c["metadata"]["name"] == "mig-inference-dashboard"
    ]
    kubernetes_validate.validate(configmap, "1.33.0", strict=True)
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(configmap["data"]["mig-inference.json"])
    titles = [panel["title"] for panel in board["panels"]]
    assert titles == [
        "Slice engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
        "Slice memory used, MiB (DCGM_FI_DEV_FB_USED)",
        "Replicas available per service",
        "Waiting requests per service",
        "Nodes per MIG config state",
    ]
    assert board["uid"] == f"mig-{STACK}" and board["schemaVersion"] == 39


def test_dcgm_service_monitor_is_on_and_labelled() -> None:
    values = release(stack_rendering(STACK)).inputs["values"]
    assert values["dcgmExporter"]["serviceMonitor"] == {
        "enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}
    }  # fmt: skip
    # Off where monitoring is not asked for (the chart's default is on).
    assert release(stack_rendering("eks-p4d")).inputs["values"]["dcgmExporter"] == {
        "serviceMonitor": {"enabled": False}
    }


def test_queue_autoscaling_with_keda() -> None:
    rendering = stack_rendering(STACK)
    keda = release(rendering, "keda").inputs
    assert keda["version"] == KEDA_VERSION and keda["namespace"] == "keda"
    assert keda["repositoryOpts"] == {"repo": "https://kedacore.github.io/charts"}
    [scaler] = _kinds("ScaledObject")
    spec = scaler["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (8, 16)
    [trigger] = spec["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"] == {
        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
        "query": 'sum(vllm:num_requests_running{namespace="inference",'
                 'app_kubernetes_io_name="chat"}) + sum(vllm:num_requests_waiting{'
                 'namespace="inference",app_kubernetes_io_name="chat"})',
        # maxNumSeqs 8 running plus queuePerReplica 4 waiting per replica.
        "threshold": "12",
        "ignoreNullValues": "false",
    }  # fmt: skip
    options = rendering.options[("mig-inference:index:InferenceService", "chat")]
    assert "keda" in options.depends_on
    deployment = named(rendering, "kubernetes:apps/v1:Deployment", "chat").inputs
    assert deployment["spec"]["replicas"] == 8
    # KEDA owns the count once running: a later `pulumi up` leaves it alone.
    deployment_options = rendering.options[("kubernetes:apps/v1:Deployment", "chat")]
    assert list(deployment_options.ignore_changes) == ["spec.replicas"]
    fixed = stack_rendering("gke-h100").options
    assert all(not o.ignore_changes for (token, _), o in fixed.items()
               if token == "kubernetes:apps/v1:Deployment")  # fmt: skip


def test_prometheus_may_scrape_the_engine() -> None:
    # The service's own (the startup-taint agent's denies every ingress).
    [policy] = [p for p in _kinds("NetworkPolicy") if p["metadata"]["name"] == "chat"]
    sources = [rule["from"] for rule in policy["spec"]["ingress"]]
    prometheus = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    }
    assert [prometheus] in sources
    for rule in policy["spec"]["ingress"]:
        assert rule["ports"] == [{"port": 8000, "protocol": "TCP"}]
    # Without monitoring, only the service's clients.
    for policy in [o for o in stack_rendering("gke-h100").kubernetes_objects()
                   if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == "inference"]:  # fmt: skip
        assert len(policy["spec"]["ingress"]) == 1


def test_rules_and_dashboard_live_with_prometheus() -> None:
    for kind in ("PrometheusRule", "ConfigMap"):
        for obj in _kinds(kind):
            if obj["metadata"]["name"].startswith("mig-inference"):
                assert obj["metadata"]["namespace"] == "monitoring"


def test_replicas_may_be_moved_by_the_cluster_autoscaler() -> None:
    [deployment] = [d for d in _kinds("Deployment") if d["metadata"]["name"] == "chat"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    volumes = {v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]}
    safe = annotations["cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"]
    assert set(safe.split(",")) == volumes


def _stack(service: dict[str, Any], monitoring: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        "pools": [{"name": "p", "gpu": "h100", "machineType": "p5.48xlarge", "nodes": 1,
                   "mig": "all-3g.40gb"}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 20, "replicas": 4,
                      "maxNumSeqs": 8, **service}],
    }  # fmt: skip
    if monitoring is not None:
        config["monitoring"] = monitoring
    return config


@pytest.mark.parametrize(
    ("service", "monitoring", "message"),
    [
        ({"queueAutoscaling": {"maxReplicas": 8}}, None,
         r"services\[0\].queueAutoscaling: needs monitoring.prometheusUrl"),
        ({"queueAutoscaling": {"maxReplicas": 2}}, {"prometheusUrl": "http://p:9090"},
         r"queueAutoscaling.maxReplicas: must be >= replicas \(4\), got 2"),
        ({"queueAutoscaling": {"maxReplicas": 40}}, {"prometheusUrl": "http://p:9090"},
         r"queueAutoscaling.maxReplicas: needs 40 x nvidia.com/mig-3g.40gb on pool p"),
        ({"engine": "triton", "queueAutoscaling": {"maxReplicas": 8}},
         {"prometheusUrl": "http://p:9090"}, "exports no queue metric"),
        ({"queueAutoscaling": {"maxReplicas": 8}, "hpaMaxReplicas": 8},
         {"prometheusUrl": "http://p:9090"}, "give queueAutoscaling or hpaMaxReplicas"),
        ({}, {"prometheusUrl": "prometheus:9090"}, "monitoring.prometheusUrl: 'prometheus:9090'"),
        ({"queueAutoscaling": {"maxReplicas": 8}, "maxNumSeqs": None},
         {"prometheusUrl": "http://p:9090"},
         r"services\[0\].queueAutoscaling: needs maxNumSeqs or the model's shape"),
        ({}, {"prometheusNamespace": "Monitoring"}, "monitoring.prometheusNamespace: 'Monitoring'"),
    ],
)  # fmt: skip
def test_bad_autoscaling_and_monitoring(
    service: dict[str, Any], monitoring: dict[str, Any] | None, message: str
) -> None:
    config = _stack(service, monitoring)
    with pytest.raises(MigError, match=message):
        plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def test_helpers() -> None:
    assert prometheus_label("nvidia.com/mig.config.state") == "label_nvidia_com_mig_config_state"
    assert ksm_allowlist() == (
        "nodes=[nvidia.com/mig.config,nvidia.com/mig.config.state,mig-inference.io/pool]"
    )
    plan = plan_stack(load_stack(STACK))
    assert queue_query(plan.services[0]).startswith("sum(vllm:num_requests_running{")
    assert queue_threshold(plan.services[0]) == 12
    assert dashboard_uid("prod.eu/west") == "mig-prod-eu-west"
    assert len(dashboard_uid("x" * 60)) == 40


def test_other_monitoring_errors_do_not_hide_a_missing_url() -> None:
    config = _stack({"queueAutoscaling": {"maxReplicas": 8}}, {"pendingMinutes": 0})
    with pytest.raises(MigErrors) as raised:
        parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
    assert [e.path for e in raised.value.errors] == [
        "mig-inference:monitoring.pendingMinutes",
        "mig-inference:services[0].queueAutoscaling",
    ]


def test_tgi_admits_more_than_the_scaling_threshold(tmp_path: Path) -> None:
    service = {"engine": "tgi", "queueAutoscaling": {"maxReplicas": 8}}
    rendering = render_config(tmp_path, _stack(service, {"prometheusUrl": "http://p:9090"}))
    assert rendering.error is None
    [scaler] = [o for o in rendering.kubernetes_objects() if o["kind"] == "ScaledObject"]
    trigger = scaler["spec"]["triggers"][0]["metadata"]
    assert trigger["query"].startswith("sum(tgi_batch_current_size{")
    assert "+ sum(tgi_queue_size{" in trigger["query"]
    deployment = named(rendering, "kubernetes:apps/v1:Deployment", "chat").inputs
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    admitted = int(args[args.index("--max-concurrent-requests") + 1])
    # TGI refuses requests beyond its limit: KEDA must see load above the threshold first.
    assert admitted > int(trigger["threshold"]) == 12


def test_one_error_for_a_bad_prometheus_url() -> None:
    config = _stack({"queueAutoscaling": {"maxReplicas": 8}}, {"prometheusUrl": "prometheus"})
    with pytest.raises(MigErrors) as raised:
        parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION)
    assert [e.path for e in raised.value.errors] == ["mig-inference:monitoring.prometheusUrl"]


def test_no_monitoring_objects_unless_asked() -> None:
    kinds = {o["kind"] for o in stack_rendering("gke-h100").kubernetes_objects()}
    assert not kinds & {"PodMonitor", "PrometheusRule", "ScaledObject"}


@pytest.mark.parametrize(
    ("kind", "group", "version"),
    [("PodMonitor", "monitoring.coreos.com", "v1"),
     ("PrometheusRule", "monitoring.coreos.com", "v1"),
     ("ScaledObject", "keda.sh", "v1alpha1")],
)  # fmt: skip
def test_custom_resources_match_their_crds(kind: str, group: str, version: str) -> None:
    schema = crd_schema(group, kind, version)
    objects = _kinds(kind)
    assert objects
    # Not `jsonschema.validate`: it first checks the schema's own patterns, and the CRDs use
    # Go regular expressions (`^(?i)...`) Python's `re` does not compile.
    validator = jsonschema.Draft7Validator(schema)
    for obj in objects:
        validator.validate(obj)


def test_scrape_annotations_without_the_prometheus_operator(tmp_path: Path) -> None:
    config = _stack({}, {"pendingMinutes": 30})
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    dcgm = release(rendering).inputs["values"]["dcgmExporter"]
    assert dcgm["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9400",
                                   "prometheus.io/path": "/metrics"}  # fmt: skip
    assert dcgm["serviceMonitor"] == {"enabled": False}
    deployment = named(rendering, "kubernetes:apps/v1:Deployment", "chat").inputs
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "8000"
    kinds = {o["kind"] for o in rendering.kubernetes_objects()}
    assert not kinds & {"PodMonitor", "PrometheusRule"}


def test_engines_without_metrics_are_not_scraped(tmp_path: Path) -> None:
    config = _stack({"engine": "triton", "model": "s3://models/repo"}, {"prometheusOperator": True})
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    kinds = {o["kind"] for o in rendering.kubernetes_objects()}
    assert "PodMonitor" not in kinds and "PrometheusRule" in kinds
    [policy] = [
        o
        for o in rendering.kubernetes_objects()
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "chat"
    ]
    assert len(policy["spec"]["ingress"]) == 1
