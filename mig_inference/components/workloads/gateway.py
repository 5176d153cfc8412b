"""The inference gateway: one address for every model of the stack. A Gateway (HTTPS when the
stack names a certificate), an HTTPRoute per namespace that sends each model's requests to its
InferencePool, an InferencePool with two endpoint pickers per model (llm-d's pinned chart) under
a disruption budget, the body-based router that makes the request's `model` routable, and
NetworkPolicies that let only the gateway reach the pickers."""

from importlib.metadata import version
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.gateway import (
    BASELINE_NAMESPACE_LABELS,
    CERT_MANAGER_API,
    EXT_PROC_PORT,
    GATEWAY_API,
    ISTIO_PARAMETERS,
    NAMESPACE_NAME_LABEL,
    PICKER_HEALTH_PORT,
    PICKER_METRICS_PORT,
    PICKER_POD_LABEL,
    certificate_spec,
    gateway_annotations,
    gateway_spec,
    istio_parameters,
    picker_values,
    route_annotations,
    route_spec,
)
from mig_inference.plan.gateway import PICKER_REPLICAS, GatewayPlan, ModelPool
from mig_inference.versions import INFERENCE_POOL_CHART, INFERENCE_POOL_VERSION

from ..planning import planned
from ..stack_args import Stack
from .gateway_peers import proxy_peers
from .gateway_router import body_router
from .node_job import MANAGED_BY

ROUTES_NAME = "inference-routes"


class InferenceGatewayArgs(TypedDict):
    stack: Stack
    """The stack whose vLLM services the gateway fronts: the planner decides the pools, the
    pickers' sizes, the gateway class, its listener and where its proxies connect from."""


class GatewayObject(pulumi.CustomResource):
    """A `gateway.networking.k8s.io/v1` Gateway whose live `status` (its addresses) is an
    output, as the provider's typed resources declare theirs."""

    status: pulumi.Output[Any]
    """The Gateway's status: conditions and the addresses its controller assigned."""

    def __init__(
        self,
        name: str,
        metadata: k8s.meta.v1.ObjectMetaArgs,
        spec: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__(
            f"kubernetes:{GATEWAY_API}:Gateway",
            name,
            {
                "apiVersion": GATEWAY_API,
                "kind": "Gateway",
                "metadata": metadata,
                "spec": spec,
                "status": None,
            },
            # The provider plugin of the SDK's own version, as its typed resources ask for.
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(version=version("pulumi_kubernetes"))
            ),
        )


def gateway_plan(stack: Stack) -> GatewayPlan:
    plan = planned(stack).gateway
    if plan is None:
        raise pulumi.RunError("the stack has no gateway (mig-inference:gateway)")
    return plan


def _gateway_url(plan: GatewayPlan, addresses: Any) -> str:
    """The URL clients call: the certificate's hostname when there is one, else the address
    the load balancer got."""
    host = plan.hostname or addresses[0]["value"]
    return f"{plan.spec.scheme}://{host}:{plan.spec.port}"


class InferenceGateway(pulumi.ComponentResource):
    """The Gateway, its routes, the body-based router, and per model an InferencePool with its
    endpoint pickers (a Helm release of llm-d's `llm-d-router-gateway` chart)."""

    address: pulumi.Output[str]
    """The URL the gateway answers at: the certificate's hostname, Istio's in-cluster Service,
    or the address GKE's load balancer got."""

    def __init__(
        self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:InferenceGateway", name, None, opts)
        plan = gateway_plan(args["stack"])
        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=plan.namespace, labels={**BASELINE_NAMESPACE_LABELS, **MANAGED_BY}
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        before_gateway: list[pulumi.Resource] = [namespace]
        if not plan.spec.managed:
            before_gateway.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-istio-parameters",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=ISTIO_PARAMETERS, namespace=plan.namespace, labels=MANAGED_BY
                    ),
                    data=istio_parameters(plan),
                    opts=in_namespace,
                )
            )
        certificate = certificate_spec(plan)
        if certificate is not None:
            before_gateway.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-certificate",
                    api_version=CERT_MANAGER_API,
                    kind="Certificate",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=plan.name, namespace=plan.namespace, labels=MANAGED_BY
                    ),
                    spec=certificate,
                    opts=in_namespace,
                )
            )
        gateway = GatewayObject(
            name,
            k8s.meta.v1.ObjectMetaArgs(
                name=plan.name,
                namespace=plan.namespace,
                labels=MANAGED_BY,
                annotations=gateway_annotations(),
            ),
            gateway_spec(plan),
            pulumi.ResourceOptions(
                parent=self,
                depends_on=before_gateway,
                custom_timeouts=pulumi.CustomTimeouts(create="20m", update="20m"),
            ),
        )
        router = body_router(f"{name}-router", plan, self, [namespace])
        pickers = [self._pool(name, plan, pool, args["stack"]) for pool in plan.pools]
        for routed in plan.namespaces:
            k8s.apiextensions.CustomResource(
                f"{name}-routes-{routed}",
                api_version=GATEWAY_API,
                kind="HTTPRoute",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=ROUTES_NAME,
                    namespace=routed,
                    labels=MANAGED_BY,
                    annotations=route_annotations(),
                ),
                spec=route_spec(plan, routed),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway, *router, *pickers]),
            )
        if plan.in_cluster_url is not None and plan.hostname is None:
            self.address = pulumi.Output.from_input(plan.in_cluster_url)
        elif plan.hostname is not None:
            self.address = pulumi.Output.from_input(_gateway_url(plan, None))
        else:
            self.address = gateway.status.apply(
                lambda status: _gateway_url(plan, status["addresses"])
            )
        self.register_outputs({"address": self.address})

    def _pool(self, name: str, plan: GatewayPlan, pool: ModelPool, stack: Stack) -> pulumi.Resource:
        """One model's InferencePool and pickers (the chart), the budget that keeps one picker
        through a drain, and the NetworkPolicy that admits only the gateway's proxies (and
        Prometheus to the metrics port)."""
        monitoring = planned(stack).spec.monitoring
        release = k8s.helm.v3.Release(
            f"{name}-{pool.name}",
            k8s.helm.v3.ReleaseArgs(
                name=pool.name,
                chart=INFERENCE_POOL_CHART,
                version=INFERENCE_POOL_VERSION,
                namespace=pool.namespace,
                create_namespace=False,
                values=picker_values(plan, pool),
                cleanup_on_fail=True,
                max_history=10,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        pickers = k8s.meta.v1.LabelSelectorArgs(match_labels={PICKER_POD_LABEL: pool.picker})
        meta = k8s.meta.v1.ObjectMetaArgs(
            name=pool.picker, namespace=pool.namespace, labels=MANAGED_BY
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-{pool.name}-picker-budget",
            metadata=meta,
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                max_unavailable=PICKER_REPLICAS - 1,
                selector=pickers,
                # A picker that is not Ready protects nothing: it may always be evicted.
                unhealthy_pod_eviction_policy="AlwaysAllow",
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        ingress = [
            k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                from_=proxy_peers(plan),
                # GKE's load balancer health-checks the picker on its gRPC health port.
                ports=[
                    k8s.networking.v1.NetworkPolicyPortArgs(port=port)
                    for port in (EXT_PROC_PORT, PICKER_HEALTH_PORT)
                ],
            )
        ]
        if monitoring.prometheus_operator:
            ingress.append(
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[
                        k8s.networking.v1.NetworkPolicyPeerArgs(
                            namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                match_labels={NAMESPACE_NAME_LABEL: monitoring.prometheus_namespace}
                            )
                        )
                    ],
                    ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PICKER_METRICS_PORT)],
                )
            )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-{pool.name}-picker",
            metadata=meta,
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=pickers, policy_types=["Ingress"], ingress=ingress
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return release
