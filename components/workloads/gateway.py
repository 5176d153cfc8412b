"""The inference gateway: one address for every model of the stack. A Gateway, an HTTPRoute per
namespace that sends each model's requests to its InferencePools (weighted by what each serves),
an InferencePool with its endpoint picker per Deployment (the extension's pinned chart), the
body-based router that makes the request's `model` routable, and NetworkPolicies that let only
the gateway reach the pickers."""

from importlib.metadata import version
from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.gateway import (
    BASELINE_NAMESPACE_LABELS,
    EXT_PROC_PORT,
    GATEWAY_API,
    NAMESPACE_NAME_LABEL,
    PICKER_METRICS_PORT,
    PICKER_POD_LABEL,
    gateway_annotations,
    gateway_spec,
    picker_values,
    route_annotations,
    route_spec,
)
from mig_inference.plan.gateway import GatewayPlan
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
    routes and their weights, the gateway class and where its proxies connect from."""


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


class InferenceGateway(pulumi.ComponentResource):
    """The Gateway, its routes, the body-based router, and per Deployment an InferencePool with
    its endpoint picker (Helm release of the extension's `inferencepool` chart)."""

    address: pulumi.Output[str]
    """The URL the gateway answers at: Istio's in-cluster Service, or the address GKE's load
    balancer got."""

    def __init__(
        self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:InferenceGateway", name, None, opts)
        plan = gateway_plan(args["stack"])
        monitoring = planned(args["stack"]).spec.monitoring
        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=plan.namespace, labels={**BASELINE_NAMESPACE_LABELS, **MANAGED_BY}
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        gateway = GatewayObject(
            name,
            k8s.meta.v1.ObjectMetaArgs(
                name=plan.name,
                namespace=plan.namespace,
                labels=MANAGED_BY,
                annotations=gateway_annotations(plan),
            ),
            gateway_spec(plan),
            pulumi.ResourceOptions(
                parent=self,
                depends_on=[namespace],
                custom_timeouts=pulumi.CustomTimeouts(create="20m", update="20m"),
            ),
        )
        router = body_router(f"{name}-router", plan, self, [namespace])
        pickers: list[pulumi.Resource] = []
        for pool in plan.pools:
            pickers.append(
                k8s.helm.v3.Release(
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
            )
            ingress = [
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=proxy_peers(plan),
                    ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=EXT_PROC_PORT)],
                )
            ]
            if monitoring.prometheus_operator:
                ingress.append(
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                        from_=[
                            k8s.networking.v1.NetworkPolicyPeerArgs(
                                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                                    match_labels={
                                        NAMESPACE_NAME_LABEL: monitoring.prometheus_namespace
                                    }
                                )
                            )
                        ],
                        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=PICKER_METRICS_PORT)],
                    )
                )
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{pool.name}-picker",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=pool.picker, namespace=pool.namespace, labels=MANAGED_BY
                ),
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(
                        match_labels={PICKER_POD_LABEL: pool.picker}
                    ),
                    policy_types=["Ingress"],
                    ingress=ingress,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
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
        if plan.in_cluster_url is not None:
            self.address = pulumi.Output.from_input(plan.in_cluster_url)
        else:
            port = plan.spec.port
            self.address = gateway.status.apply(
                lambda status: f"http://{status['addresses'][0]['value']}:{port}"
            )
        self.register_outputs({"address": self.address})
