"""What to watch on MIG slices: alert rules, a Grafana dashboard and the queue queries that
replica autoscaling reads, as plain data built from the plan.

Metrics (with their sources in the README, "Monitoring"): the DCGM exporter reports per MIG
instance `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE` with the
`GPU_I_PROFILE` and `GPU_I_ID` labels (`DCGM_FI_DEV_GPU_UTIL` is not reported for MIG devices);
vLLM exports `vllm:num_requests_waiting` and `vllm:num_requests_running`, TGI `tgi_queue_size`;
kube-state-metrics exports node labels as `kube_node_labels{label_<name>}` when allowed to.
"""

from __future__ import annotations

import re
from typing import Any

from mig_inference.names.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL, POOL_LABEL
from mig_inference.plan import ServicePlan, StackPlan
from mig_inference.spec import Engine

SERVICE_LABEL = "app_kubernetes_io_name"
"""The service's `app.kubernetes.io/name` pod label, as the PodMonitor carries it onto metrics."""
QUEUE_METRIC = {Engine.VLLM: "vllm:num_requests_waiting", Engine.TGI: "tgi_queue_size"}
RUNNING_METRIC = {Engine.VLLM: "vllm:num_requests_running", Engine.TGI: "tgi_batch_current_size"}
SCRAPED_ENGINES = frozenset(QUEUE_METRIC)
"""Engines that export Prometheus metrics at `/metrics` on their serving port."""
SLICE_MEMORY_FULL = 0.97
"""vLLM takes its share (0.9 by default) of a slice at start; beyond this the slice is full."""
QUEUE_ALERT_MINUTES = 10
DCGM_HOST_LABEL = "hostname"
"""The exporter's label naming the node (its `NODE_NAME`, the pod's `spec.nodeName`): lowercase
since dcgm-exporter 4.6.0 (PR NVIDIA/dcgm-exporter#655), the release GPU Operator v26.7.0 runs."""
UNREPORTED = "memory-not-reported"
"""The `reason` of the slice-memory alert when a MIG node reports no slice memory at all."""
KSM_NODE_LABELS = (MIG_CONFIG_LABEL, MIG_STATE_LABEL, POOL_LABEL)
"""Node labels kube-state-metrics must be allowed to export for the MIG alerts."""


def prometheus_label(label: str) -> str:
    """A Kubernetes label as kube-state-metrics names it: `label_` and `_` for other chars."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)


def ksm_allowlist() -> str:
    """The kube-state-metrics `--metric-labels-allowlist` entry the MIG alerts need."""
    return f"nodes=[{','.join(KSM_NODE_LABELS)}]"


def queue_query(service: ServicePlan) -> str:
    """Requests running and waiting across the service's replicas (one value, as KEDA needs).

    Running requests count too: on waiting ones alone, the replica that drains the queue would
    bring it to zero and KEDA would take that replica away again. No `or vector(0)`: with no
    samples (Prometheus not scraping) KEDA reports an error instead of reading zero load."""
    engine = service.spec.engine
    selector = f'namespace="{service.spec.namespace}",{SERVICE_LABEL}="{service.name}"'
    return (
        f"sum({RUNNING_METRIC[engine]}{{{selector}}}) + sum({QUEUE_METRIC[engine]}{{{selector}}})"
    )


def queue_threshold(service: ServicePlan) -> int:
    """The load one replica carries: its concurrent sequences plus `queuePerReplica` waiting."""
    queue = service.spec.queue_autoscaling
    assert queue is not None and service.sizing.max_num_seqs is not None
    return service.sizing.max_num_seqs + queue.queue_per_replica


def dashboard_uid(stack: str) -> str:
    """Grafana uids take letters, digits, '-' and '_', at most 40 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"mig-{stack}")[:40]


def _state(state: str) -> str:
    pool = prometheus_label(POOL_LABEL)
    return (
        f"max by (node, {prometheus_label(MIG_CONFIG_LABEL)}) "
        f'(kube_node_labels{{{pool}!="", {prometheus_label(MIG_STATE_LABEL)}="{state}"}})'
    )


def slice_memory_unreported(plan: StackPlan) -> str | None:
    """Nodes of the pools whose slices the GPU Operator's exporter watches, their layout applied
    (`success`), that report no slice's frame-buffer memory: the DCGM exporter can leave it out
    for MIG instances (NVIDIA/dcgm-exporter#512), and the slice-memory ratio then has nothing
    to exceed its threshold. None when no pool has such slices."""
    pools = sorted(p.name for p in plan.pools if p.mig_manager_applies and p.mig_enabled)
    if not pools:
        return None
    nodes = (
        f'max by (node) (kube_node_labels{{{prometheus_label(POOL_LABEL)}=~"{"|".join(pools)}", '
        f'{prometheus_label(MIG_STATE_LABEL)}="success"}})'
    )
    reported = (
        f'label_replace(max by ({DCGM_HOST_LABEL}) (DCGM_FI_DEV_FB_USED{{GPU_I_PROFILE!=""}}), '
        f'"node", "$1", "{DCGM_HOST_LABEL}", "(.*)")'
    )
    return f"{nodes} unless on (node) {reported}"


def alert_rules(plan: StackPlan) -> list[dict[str, Any]]:
    """PrometheusRule groups: MIG config failed or stuck pending, a slice's memory full, an
    engine's queue growing."""
    pending = plan.spec.monitoring.pending_minutes
    slice_filter = 'GPU_I_PROFILE!=""'
    used = f"DCGM_FI_DEV_FB_USED{{{slice_filter}}}"
    free = f"DCGM_FI_DEV_FB_FREE{{{slice_filter}}}"
    rules: list[dict[str, Any]] = [
        {
            "alert": "MigConfigFailed",
            "expr": f"{_state('failed')} > 0",
            "for": "1m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "MIG layout failed on node {{ $labels.node }}",
                "description": "nvidia.com/mig.config.state=failed; see the nvidia-mig-manager "
                "logs on that node.",
            },
        },
        {
            "alert": "MigConfigPending",
            "expr": f"{_state('pending')} > 0",
            "for": f"{pending}m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"MIG layout pending for {pending}m on node {{{{ $labels.node }}}}",
                "description": "The MIG manager waits for GPU clients to stop: a pod still holds "
                "a slice of this node.",
            },
        },
        {
            "alert": "MigSliceMemoryFull",
            "expr": f"{used} / ({used} + {free}) > {SLICE_MEMORY_FULL}",
            "for": "10m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "MIG slice {{ $labels.GPU_I_PROFILE }} #{{ $labels.GPU_I_ID }} on "
                "{{ $labels.hostname }} is full",
                "description": "Its memory is nearly all used: the replica on it may fail to "
                "allocate.",
            },
        },
    ]
    unreported = slice_memory_unreported(plan)
    if unreported is not None:
        rules.append(
            {
                "alert": "MigSliceMemoryFull",
                "expr": unreported,
                "for": "10m",
                "labels": {"severity": "warning", "reason": UNREPORTED},
                "annotations": {
                    "summary": "MIG slice memory on node {{ $labels.node }} is not reported",
                    "description": "The DCGM exporter reports no frame-buffer metric for this "
                    "node's MIG slices (NVIDIA/dcgm-exporter#512, open: seen on H100), so a "
                    "full slice would not be noticed; check the slices with nvidia-smi on the "
                    "node.",
                },
            }
        )
    for engine, metric in QUEUE_METRIC.items():
        total = f"sum by (namespace, {SERVICE_LABEL}) ({metric})"
        rules.append(
            {
                "alert": f"{engine.value.upper()}QueueGrowing",
                # A subquery: a range over an aggregation needs a resolution (`[10m:1m]`).
                "expr": f"deriv(({total})[{QUEUE_ALERT_MINUTES}m:1m]) > 0 and {total} > 0",
                "for": f"{QUEUE_ALERT_MINUTES}m",
                "labels": {"severity": "warning"},
                "annotations": {
                    "summary": f"{{{{ $labels.{SERVICE_LABEL} }}}}: the queue keeps growing",
                    "description": "Requests wait longer and longer: add replicas (or slices).",
                },
            }
        )
    return [{"name": "mig-inference", "rules": rules}]


def _panel(title: str, exprs: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def dashboard(plan: StackPlan) -> dict[str, Any]:
    """A Grafana dashboard (classic JSON model): per-slice engine activity and memory, each
    service's replicas and queue, and the nodes' MIG config state."""
    # The exporter's own `pod` label is overwritten by the scrape; the workload's is `exported_pod`.
    slice_legend = "{{hostname}} {{GPU_I_PROFILE}} #{{GPU_I_ID}} {{exported_pod}}"
    namespaces = "|".join(sorted({s.spec.namespace for s in plan.services})) or "inference"
    deployments = "|".join(s.name for s in plan.services) or ".*"
    queues = [
        (f"sum by ({SERVICE_LABEL}) ({metric})", f"{{{{{SERVICE_LABEL}}}}} ({engine.value})")
        for engine, metric in QUEUE_METRIC.items()
    ]
    return {
        "title": f"MIG inference: {plan.spec.stack}",
        "uid": dashboard_uid(plan.spec.stack),
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
        },
        "panels": [
            _panel("Slice engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE)",
                   [('DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_PROFILE!=""}', slice_legend)], 0, 0),
            _panel("Slice memory used, MiB (DCGM_FI_DEV_FB_USED)",
                   [('DCGM_FI_DEV_FB_USED{GPU_I_PROFILE!=""}', slice_legend)], 12, 0),
            _panel("Replicas available per service",
                   [(f'kube_deployment_status_replicas_available{{namespace=~"{namespaces}",'
                     f'deployment=~"{deployments}"}}', "{{deployment}}")], 0, 8),
            _panel("Waiting requests per service", queues, 12, 8),
            _panel("Nodes per MIG config state",
                   [(f"count by ({prometheus_label(MIG_STATE_LABEL)}) "
                     f'(kube_node_labels{{{prometheus_label(POOL_LABEL)}!=""}})',
                     f"{{{{{prometheus_label(MIG_STATE_LABEL)}}}}}")], 0, 16),
        ],
    }  # fmt: skip


def expressions(plan: StackPlan) -> list[str]:
    """Every PromQL expression the stack ships (alerts, dashboard, autoscaling)."""
    exprs = [rule["expr"] for group in alert_rules(plan) for rule in group["rules"]]
    exprs += [t["expr"] for panel in dashboard(plan)["panels"] for t in panel["targets"]]
    exprs += [queue_query(s) for s in plan.services if s.spec.queue_autoscaling is not None]
    return exprs


DCGM_PORT = 9400
"""The DCGM exporter's metrics port (`gpu-metrics`)."""


def scrape_annotations(port: int) -> dict[str, str]:
    """The `prometheus.io/*` annotations a Prometheus without the Operator discovers pods by."""
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }
