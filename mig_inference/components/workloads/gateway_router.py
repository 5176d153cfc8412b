"""The body-based router: it copies an OpenAI request's `model` into the header the gateway's
routes match, so one address serves every model. Its objects follow the extension's v1.5.0
chart (`BODY_ROUTER_FOLLOWS`), with what the chart lacks added: a restricted pod, two replicas
on different nodes under a disruption budget, a liveness probe beside the readiness one, and a
NetworkPolicy; the chart itself is not installed because it has values for none of them.

Every request of every model passes it, so it must survive an eviction and a rollout: two
replicas, a budget of one unavailable, and rolling updates that start the new pod before
stopping an old one."""

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.gateway import (
    BODY_ROUTER,
    BODY_ROUTER_HEALTH_PORT,
    BODY_ROUTER_PORT,
    body_router_args,
    envoy_filter_spec,
    router_health_check_spec,
    routing_extension_spec,
    tls_destination_rule,
)
from mig_inference.plan.gateway import (
    BODY_ROUTER_CPU,
    BODY_ROUTER_MEMORY_GIB,
    BODY_ROUTER_REPLICAS,
    GatewayPlan,
)
from mig_inference.versions import BODY_ROUTER_FOLLOWS, BODY_ROUTER_IMAGE

from .gateway_peers import proxy_peers
from .node_job import MANAGED_BY
from .pod_security import LOCKED_DOWN, TMP_MOUNT, tmp_volume

NONROOT = 65532
"""The distroless `nonroot` user the extension's images run as."""


def _spread(selector: dict[str, str]) -> k8s.core.v1.AffinityArgs:
    """Prefer the replicas on different nodes (as `kube.gateway.spread` for charts)."""
    return k8s.core.v1.AffinityArgs(
        pod_anti_affinity=k8s.core.v1.PodAntiAffinityArgs(
            preferred_during_scheduling_ignored_during_execution=[
                k8s.core.v1.WeightedPodAffinityTermArgs(
                    weight=100,
                    pod_affinity_term=k8s.core.v1.PodAffinityTermArgs(
                        topology_key="kubernetes.io/hostname",
                        label_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                    ),
                )
            ]
        )
    )


def body_router(
    name: str, plan: GatewayPlan, parent: pulumi.Resource, depends_on: list[pulumi.Resource]
) -> list[pulumi.Resource]:
    """The router's objects in the gateway's namespace, and its hook into the gateway (Istio: an
    EnvoyFilter and a DestinationRule; GKE: a routing extension and its health check)."""
    namespace = plan.namespace
    selector = {"app": BODY_ROUTER}
    labels = {**selector, **MANAGED_BY}
    meta = k8s.meta.v1.ObjectMetaArgs(name=BODY_ROUTER, namespace=namespace, labels=labels)
    child = pulumi.ResourceOptions(parent=parent, depends_on=depends_on)
    # Its token stays mounted: the v1.5.0 binary builds a Kubernetes client before it serves
    # (`cmd/bbr/runner/runner.go`: ctrl.GetConfig, then a manager) and exits without one. The
    # account is bound to no Role, so the token reads nothing beyond API discovery.
    account = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata=meta, automount_service_account_token=True, opts=child
    )
    deployment = k8s.apps.v1.Deployment(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=BODY_ROUTER,
            namespace=namespace,
            labels=labels,
            annotations={"mig-inference.io/follows": BODY_ROUTER_FOLLOWS},
        ),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=BODY_ROUTER_REPLICAS,
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            strategy=k8s.apps.v1.DeploymentStrategyArgs(
                type="RollingUpdate",
                rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(
                    max_unavailable=0, max_surge=1
                ),
            ),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                spec=k8s.core.v1.PodSpecArgs(
                    service_account_name=account.metadata.name,
                    affinity=_spread(selector),
                    security_context=k8s.core.v1.PodSecurityContextArgs(
                        run_as_non_root=True,
                        run_as_user=NONROOT,
                        run_as_group=NONROOT,
                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                    ),
                    containers=[
                        k8s.core.v1.ContainerArgs(
                            name="bbr",
                            image=BODY_ROUTER_IMAGE,
                            image_pull_policy="IfNotPresent",
                            args=body_router_args(),
                            env=[
                                k8s.core.v1.EnvVarArgs(
                                    name="NAMESPACE",
                                    value_from=k8s.core.v1.EnvVarSourceArgs(
                                        field_ref=k8s.core.v1.ObjectFieldSelectorArgs(
                                            field_path="metadata.namespace"
                                        )
                                    ),
                                )
                            ],
                            ports=[
                                k8s.core.v1.ContainerPortArgs(
                                    name="grpc", container_port=BODY_ROUTER_PORT
                                ),
                                k8s.core.v1.ContainerPortArgs(
                                    name="grpc-health", container_port=BODY_ROUTER_HEALTH_PORT
                                ),
                            ],
                            readiness_probe=k8s.core.v1.ProbeArgs(
                                grpc=k8s.core.v1.GRPCActionArgs(port=BODY_ROUTER_HEALTH_PORT),
                                period_seconds=5,
                            ),
                            # A router whose health server stops answering is restarted
                            # (its readiness alone would only take it out of the Service).
                            liveness_probe=k8s.core.v1.ProbeArgs(
                                grpc=k8s.core.v1.GRPCActionArgs(port=BODY_ROUTER_HEALTH_PORT),
                                initial_delay_seconds=10,
                                period_seconds=10,
                                failure_threshold=3,
                            ),
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={
                                    "cpu": f"{round(BODY_ROUTER_CPU * 1000)}m",
                                    "memory": f"{round(BODY_ROUTER_MEMORY_GIB * 1024)}Mi",
                                },
                                limits={"memory": "512Mi"},
                            ),
                            security_context=LOCKED_DOWN,
                            volume_mounts=[TMP_MOUNT],
                        )
                    ],
                    volumes=[tmp_volume("64Mi")],
                ),
            ),
        ),
        opts=child,
    )
    service = k8s.core.v1.Service(
        f"{name}-service",
        metadata=meta,
        spec=k8s.core.v1.ServiceSpecArgs(
            type="ClusterIP",
            selector=selector,
            ports=[
                k8s.core.v1.ServicePortArgs(
                    name="grpc",
                    port=BODY_ROUTER_PORT,
                    target_port=BODY_ROUTER_PORT,
                    protocol="TCP",
                    app_protocol="HTTP2",
                )
            ],
        ),
        opts=child,
    )
    k8s.policy.v1.PodDisruptionBudget(
        f"{name}-budget",
        metadata=meta,
        spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
            max_unavailable=BODY_ROUTER_REPLICAS - 1,
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            unhealthy_pod_eviction_policy="AlwaysAllow",
        ),
        opts=child,
    )
    k8s.networking.v1.NetworkPolicy(
        f"{name}-ingress",
        metadata=meta,
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            policy_types=["Ingress"],
            ingress=[
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=proxy_peers(plan),
                    ports=[
                        k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP")
                        for port in (BODY_ROUTER_PORT, BODY_ROUTER_HEALTH_PORT)
                    ],
                )
            ],
        ),
        opts=child,
    )
    hooked = pulumi.ResourceOptions(parent=parent, depends_on=[deployment, service])
    if plan.spec.managed:
        hooks = [
            k8s.apiextensions.CustomResource(
                f"{name}-extension",
                api_version="networking.gke.io/v1",
                kind="GCPRoutingExtension",
                metadata=meta,
                spec=routing_extension_spec(plan),
                opts=hooked,
            ),
            k8s.apiextensions.CustomResource(
                f"{name}-health",
                api_version="networking.gke.io/v1",
                kind="HealthCheckPolicy",
                metadata=meta,
                spec=router_health_check_spec(namespace),
                opts=hooked,
            ),
        ]
    else:
        hooks = [
            k8s.apiextensions.CustomResource(
                f"{name}-filter",
                api_version="networking.istio.io/v1alpha3",
                kind="EnvoyFilter",
                metadata=meta,
                spec=envoy_filter_spec(plan, namespace),
                opts=hooked,
            ),
            k8s.apiextensions.CustomResource(
                f"{name}-tls",
                api_version="networking.istio.io/v1",
                kind="DestinationRule",
                metadata=meta,
                spec=tls_destination_rule(f"{BODY_ROUTER}.{namespace}.svc.cluster.local"),
                opts=hooked,
            ),
        ]
    return [deployment, service, *hooks]
