"""Prometheus Operator objects (a PodMonitor per service, a ServiceMonitor per endpoint picker
of the gateway, the alert rules), a Grafana dashboard ConfigMap for Grafana's sidecar, and KEDA
for queue-based replica autoscaling."""

import json
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.monitoring import SCRAPED_ENGINES, alert_rules, dashboard
from mig_inference.versions import KEDA_CHART, KEDA_REPO, KEDA_VERSION

from ..planning import planned
from ..stack_args import Stack

MONITORING_API = "monitoring.coreos.com/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "mig-inference"}
KEDA_NAMESPACE = "keda"


class MonitoringArgs(TypedDict):
    stack: Stack
    """The stack whose services are monitored; the alert rules and the dashboard go to
    `monitoring.prometheusNamespace`, Prometheus's and Grafana's own, which their rule selector
    and dashboard sidecar read without further settings."""


class KedaArgs(TypedDict):
    namespace: NotRequired[str]
    """Namespace of KEDA (keda)."""


class Monitoring(pulumi.ComponentResource):
    """A PodMonitor per inference service (its engine's /metrics, labelled with the service),
    the PrometheusRule with the MIG and engine alerts, and the dashboard as a ConfigMap that
    Grafana's sidecar loads (label `grafana_dashboard: "1"`)."""

    def __init__(
        self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        plan = planned(args["stack"])
        namespace = plan.spec.monitoring.prometheus_namespace
        release = plan.spec.monitoring.release_label
        labels = {**MANAGED_BY, **({"release": release} if release else {})}
        for service in plan.services:
            if service.spec.engine not in SCRAPED_ENGINES:
                continue
            k8s.apiextensions.CustomResource(
                f"{name}-{service.name}",
                api_version=MONITORING_API,
                kind="PodMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=service.name, namespace=service.spec.namespace, labels=labels
                ),
                spec={
                    "selector": {"matchLabels": {"app.kubernetes.io/name": service.name}},
                    # Carries the service's name onto its metrics (`app_kubernetes_io_name`).
                    "podTargetLabels": ["app.kubernetes.io/name"],
                    "podMetricsEndpoints": [{"port": "http", "path": "/metrics"}],
                },
                opts=child,
            )
        for pool in plan.gateway.pools if plan.gateway is not None else []:
            # The endpoint picker's own metrics (llm_d_epp_* / inference_*), from the Service
            # its chart creates: port `http-metrics`, labelled with the picker's name.
            k8s.apiextensions.CustomResource(
                f"{name}-{pool.picker}",
                api_version=MONITORING_API,
                kind="ServiceMonitor",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=pool.picker, namespace=pool.namespace, labels=labels
                ),
                spec={
                    "selector": {"matchLabels": {"app.kubernetes.io/name": pool.picker}},
                    "endpoints": [{"port": "http-metrics", "path": "/metrics"}],
                },
                opts=child,
            )
        k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version=MONITORING_API,
            kind="PrometheusRule",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="mig-inference", namespace=namespace, labels=labels
            ),
            spec={"groups": alert_rules(plan)},
            opts=child,
        )
        k8s.core.v1.ConfigMap(
            f"{name}-dashboard",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="mig-inference-dashboard",
                namespace=namespace,
                labels={**labels, "grafana_dashboard": "1"},
            ),
            data={"mig-inference.json": json.dumps(dashboard(plan), indent=2, sort_keys=True)},
            opts=child,
        )
        self.register_outputs({})


class Keda(pulumi.ComponentResource):
    """KEDA's official chart (it brings its CRDs): ScaledObjects scale services on a queue."""

    def __init__(
        self, name: str, args: KedaArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:Keda", name, None, opts)
        k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="keda",
                chart=KEDA_CHART,
                version=KEDA_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KEDA_REPO),
                namespace=args.get("namespace", KEDA_NAMESPACE),
                create_namespace=True,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
