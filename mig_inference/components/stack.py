"""The whole stack in one component: cluster, GPU Operator, pools, MIG-ready gate, monitoring and
inference services, planned from inputs that mirror the stack file."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.changes.record import plan_record
from mig_inference.kube.device_plugin_switch import device_plugin_on
from mig_inference.kube.dra import uses_dra
from mig_inference.kube.gate import gate_targets
from mig_inference.kube.gateway import BASELINE_NAMESPACE_LABELS, ISTIO_NAMESPACE
from mig_inference.kube.operator_values import operator_needed
from mig_inference.kube.repartition import repartition_targets
from mig_inference.kube.startup_taints import tainted_pools
from mig_inference.plan import layout_of
from mig_inference.reports.gateway import gateway_routes
from mig_inference.verify.targets import GATEWAY_ADDRESS, verify_targets

from .clouds.cloud import (
    Children,
    cluster,
    cluster_autoscaler,
    given_provider,
    gpu_pools,
    load_balancer_controller,
    program_children,
)
from .clouds.cluster_access import kubernetes_provider
from .clouds.existing import ExistingNodePool, ExistingNodeTaints, ExistingNodeTaintsArgs
from .planning import planned, secret_value, unseen_changes
from .stack_args import Stack, cluster_input, stack_values_of
from .workloads.dra_driver import DraDriver, DraDriverArgs
from .workloads.gateway import InferenceGateway, InferenceGatewayArgs
from .workloads.gateway_istio import IstioGateway, IstioGatewayArgs
from .workloads.gpu_operator import GpuOperator, GpuOperatorArgs, device_plugin_switch
from .workloads.inference import InferenceService, InferenceServiceArgs
from .workloads.mig_gate import MigReadyGate, MigReadyGateArgs
from .workloads.model_cache import (
    ModelCache,
    ModelCacheArgs,
    fill_lead,
    root_owner_namespaces,
)
from .workloads.monitoring import Keda, KedaArgs, Monitoring, MonitoringArgs
from .workloads.profiling import ProfilingJobs, ProfilingJobsArgs
from .workloads.repartition import InPlaceRepartition, InPlaceRepartitionArgs
from .workloads.startup_taints import StartupTaintAgent, StartupTaintAgentArgs
from .workloads.verify import ServiceVerification, ServiceVerificationArgs


def cloud_pool_outputs(made: pulumi.Resource) -> dict[str, Any]:
    """What a pool component made, as the `cloudPools` output shows it."""
    if isinstance(made, ExistingNodePool):
        return {"nodes": made.node_names}
    outputs: dict[str, Any] = {}
    for key, attribute in CLOUD_POOL_ATTRIBUTES:
        value = getattr(made, attribute, None)
        if value is not None:
            outputs[key] = value
    return outputs


CLOUD_POOL_ATTRIBUTES = (
    ("name", "pool_name"), ("name", "node_group_name"), ("id", "pool_id"),
    ("id", "node_pool_id"), ("serviceAccount", "service_account"), ("arn", "node_group_arn"),
    ("autoscalingGroups", "autoscaling_group_names"), ("nodeRoleArn", "role_arn"),
)  # fmt: skip
"""Output key, and the pool component attribute it comes from (GKE, EKS, OKE)."""

RESTRICTED_NAMESPACE_LABELS = {
    # Inference pods meet the restricted Pod Security Standard.
    "pod-security.kubernetes.io/enforce": "restricted",
    "app.kubernetes.io/managed-by": "mig-inference",
}


class MigInference(pulumi.ComponentResource):
    """MIG GPU node pools, the NVIDIA GPU Operator with their mig-parted config, and MIG-aware
    inference services, from inputs that mirror a mig-inference stack file. Everything the
    planner can decide (layouts on the GPU, models on their slices, replicas on the pools, max
    pods) is checked before any resource is created. Its children are named `<name>-<child>`,
    so one program may hold several."""

    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the cluster when this component created it, else empty (a secret)."""
    plan: pulumi.Output[dict[str, Any]]
    """The plan: per pool its layout, generation and replacement inputs; per service its slice.
    `mig-inference diff --deployed` reads it."""
    pools: pulumi.Output[dict[str, Any]]
    """Per pool: GPU, GPUs per node, node bounds, layout and the MIG devices it offers."""
    services: pulumi.Output[dict[str, Any]]
    """Per service: pool, profile, MIG resource, replicas and in-cluster endpoint."""
    endpoints: pulumi.Output[dict[str, str]]
    """Per service: its in-cluster URL."""
    cloud_pools: pulumi.Output[dict[str, Any]]
    """Per pool, what the cloud made: GKE `name`, `id`, `serviceAccount`; EKS `name`, `arn`,
    `autoscalingGroups`, `nodeRoleArn`; OKE `name`, `id`; existing `nodes`."""
    gateway: pulumi.Output[dict[str, Any]]
    """The gateway's `url` (Istio's in-cluster Service, or the address GKE's load balancer got)
    and per model the InferencePools its requests go to; empty without a gateway."""
    cluster: pulumi.Output[dict[str, Any]]
    """The cluster, for the rest of a team's program: `created`, `name`, and for a cluster this
    component created, GKE `location`, `endpoint`, `certificateAuthority`,
    `workloadIdentityPool`; EKS `arn`, `endpoint`, `certificateAuthority`, `oidcIssuer`,
    `clusterSecurityGroupId`; OKE `id`, `endpoint`, `kubernetesVersion`."""

    def __init__(
        self,
        name: str,
        args: Stack,
        opts: pulumi.ResourceOptions | None = None,
        *,
        stack_program: bool = False,
    ) -> None:
        """`stack_program`: this is the stack program's own instance, whose children keep the
        names and, through aliases, the resources that version 0.1 created at the top of the
        stack."""
        super().__init__("mig-inference:index:MigInference", name, None, opts)
        children = program_children(self) if stack_program else Children(self, f"{name}-")
        plan = planned(args)
        for warning in [*plan.warnings, *unseen_changes(args)]:
            pulumi.log.warn(warning, resource=self)
        operator_spec = plan.spec.gpu_operator
        service_of = {service.name: service.service_name for service in plan.services}
        joined = cluster(args, plan, children)
        kubernetes = given_provider(self, "kubernetes") or kubernetes_provider(
            plan.spec.cloud,
            plan.spec.cluster,
            joined.ref,
            secret_value(args, plan.spec.cluster.get("kubeconfig")),
            joined.kubeconfig,
            joined.cloud_provider,
            children.name("kubernetes"),
            children.opts(depends_on=joined.created),
            cluster_input(args, "project", plan.spec.cluster.get("project")),
        )

        def in_cluster(*after: pulumi.Resource) -> pulumi.ResourceOptions:
            return children.opts([kubernetes], after)

        # Pools come up after the operator, so a new node's MIG manager finds its config; a pool
        # that changes its layout in place is relabelled only after its nodes were
        # re-partitioned one by one.
        pool_after: dict[str, list[pulumi.Resource]] = {}
        operator: GpuOperator | None = None
        dra_driver: list[pulumi.Resource] = []
        repartitions: list[pulumi.Resource] = []
        # The operator's device plugin on for every node, before anything needs it.
        plugin_on: list[pulumi.Resource] = []
        if operator_needed(plan):
            operator = GpuOperator(
                children.name("gpu-operator"),
                GpuOperatorArgs(stack=args),
                in_cluster(*joined.created),
            )
            if device_plugin_on(plan):
                plugin_on.append(
                    device_plugin_switch(
                        children.name("gpu-operator-device-plugin"), True, in_cluster(operator)
                    )
                )
            if uses_dra(plan):
                # After the operator, whose container toolkit writes the CDI specs the
                # driver's kubelet plugin hands devices out with.
                dra_driver.append(
                    DraDriver(
                        children.name("dra-driver"), DraDriverArgs(stack=args), in_cluster(operator)
                    )
                )
            for pool in plan.pools:
                if pool.operator_managed:
                    pool_after[pool.name] = [
                        operator,
                        *plugin_on,
                        *(dra_driver if pool.dra else []),
                    ]
            for target in repartition_targets(plan):
                repartition = InPlaceRepartition(
                    children.name(f"repartition-{target.pool}"),
                    InPlaceRepartitionArgs(stack=args, pool=target.pool),
                    in_cluster(operator, *plugin_on, *dra_driver),
                )
                repartitions.append(repartition)
                pool_after[target.pool].append(repartition)
        pools = gpu_pools(args, plan, joined, children, kubernetes, pool_after)
        cluster_autoscaler(plan, joined, children, kubernetes, pools)
        load_balancers = load_balancer_controller(plan, joined, children, kubernetes)

        if operator is not None and tainted_pools(plan):
            # Takes the autoscaler's startup taint off new nodes once they advertise their slices.
            StartupTaintAgent(
                children.name("startup-taints"),
                StartupTaintAgentArgs(stack=args),
                in_cluster(operator),
            )
        ready: list[pulumi.Resource] = [*pools, *([operator] if operator else []), *dra_driver]
        if operator is not None and operator_spec.gate and gate_targets(plan):
            ready = [
                MigReadyGate(
                    children.name("mig-ready"), MigReadyGateArgs(stack=args), in_cluster(*ready)
                )
            ]

        owner_step = root_owner_namespaces(plan.model_cache)
        # Namespaces with endpoint pickers (the extension's chart) enforce `baseline`.
        picked = set(plan.gateway.namespaces) if plan.gateway is not None else set()
        namespaces = {
            namespace: k8s.core.v1.Namespace(
                children.name(f"ns-{namespace}"),
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=namespace,
                    labels={
                        **RESTRICTED_NAMESPACE_LABELS,
                        **(BASELINE_NAMESPACE_LABELS if namespace in owner_step | picked else {}),
                    },
                ),
                opts=in_cluster(),
            )
            for namespace in sorted({service.spec.namespace for service in plan.services})
        }
        if plan.spec.monitoring.prometheus_operator:
            Monitoring(
                children.name("monitoring"),
                MonitoringArgs(stack=args),
                in_cluster(*ready, *namespaces.values()),
            )
        keda = (
            [Keda(children.name("keda"), KedaArgs(), in_cluster())]
            if any(s.spec.queue_autoscaling for s in plan.services)
            else []
        )
        cache: list[pulumi.Resource] = []
        if plan.model_cache is not None:
            cache.append(
                ModelCache(
                    children.name("model-cache"),
                    ModelCacheArgs(stack=args, cluster_name=joined.ref),
                    in_cluster(*namespaces.values()),
                )
            )
        deployed: dict[str, InferenceService] = {}
        for service in plan.services:
            # A service reading a model another one fills waits for that one's populate Job.
            model = plan.model_cache.model_of(service.name) if plan.model_cache else None
            fillers = [
                deployed[other.name]
                for other in plan.services
                if model is not None
                and other.name in model.services
                and other.name in deployed
                and other.spec.namespace == service.spec.namespace
                and fill_lead(plan, other)
            ]
            deployed[service.name] = InferenceService(
                children.name(service.name),
                InferenceServiceArgs(stack=args, service=service.name),
                in_cluster(*ready, *keda, namespaces[service.spec.namespace], *cache, *fillers),
            )
        front: list[InferenceGateway] = []
        if plan.gateway is not None:
            implementation = (
                [
                    IstioGateway(
                        children.name("istio"),
                        IstioGatewayArgs(
                            namespace=ISTIO_NAMESPACE, keep_crds=not plan.gateway.created_cluster
                        ),
                        in_cluster(),
                    )
                ]
                if plan.gateway.spec.install
                else []
            )
            front.append(
                InferenceGateway(
                    children.name("gateway"),
                    InferenceGatewayArgs(stack=args),
                    in_cluster(*implementation, *load_balancers, *namespaces.values()),
                )
            )
        # Each verified Service is checked once all of its Deployments are available (and,
        # behind the gateway, once its routes are).
        for checked in verify_targets(plan):
            verified = ServiceVerificationArgs(stack=args, service=checked.service)
            if checked.url == GATEWAY_ADDRESS and front:
                verified["gateway_url"] = front[0].address
            ServiceVerification(
                children.name(f"verify-{checked.service}"),
                verified,
                in_cluster(*[deployed[part] for part in checked.parts], *front),
            )
        if operator is not None and not plugin_on:
            # Off only once every node that ran replicas through the device plugin is switched
            # (the re-partitioning Jobs) or left by them (the Deployments rolled onto a new
            # generation): a Job that stops leaves the plugin where its labels still run it.
            device_plugin_switch(
                children.name("gpu-operator-device-plugin"),
                False,
                in_cluster(operator, *repartitions, *deployed.values()),
            )
        # The taints of existing nodes come after the services that run there: their replicas
        # tolerate them before any of those nodes carries them.
        for pool, made in zip(plan.pools, pools, strict=True):
            if isinstance(made, ExistingNodePool):
                ExistingNodeTaints(
                    children.name(f"{pool.name}-taints"),
                    ExistingNodeTaintsArgs(stack=args, pool=pool.name),
                    in_cluster(
                        *[deployed[s.name] for s in plan.services if s.pool.name == pool.name]
                    ),
                    moved_from=made,
                )
        # One endpoint per Service: the parts of a service sized by demand share theirs.
        endpoints = {service_of[name]: component.endpoint for name, component in deployed.items()}
        for profiled in dict.fromkeys(run.service for run in plan.profiling):
            # After the service: its Secret holds the token the runs download the model with.
            ProfilingJobs(
                children.name(f"profiling-{profiled}"),
                ProfilingJobsArgs(stack=args, service=profiled),
                in_cluster(*[c for s, c in deployed.items() if service_of[s] == profiled]),
            )

        self.kubeconfig = (
            joined.kubeconfig if joined.kubeconfig is not None else pulumi.Output.secret("")
        )
        self.plan = pulumi.Output.from_input(
            plan_record(plan, stack_values_of(args), args.get("secrets") or {})
        )
        self.pools = pulumi.Output.from_input(
            {
                pool.name: {
                    "gpu": pool.gpu.name,
                    "gpus_per_node": pool.gpus_per_node,
                    "nodes": {"min": pool.min_nodes, "max": pool.max_nodes},
                    "layout": layout_of(pool),
                    "capacity_per_node": pool.capacity_per_node(),
                    "capacity": pool.capacity(),
                }
                for pool in plan.pools
            }
        )
        self.services = pulumi.Output.from_input(
            {
                service.name: {
                    "pool": service.pool.name,
                    "profile": service.profile,
                    "resource": service.resource,
                    "replicas": service.replicas,
                    "endpoint": endpoints[service.service_name],
                }
                for service in plan.services
            }
        )
        self.endpoints = (
            pulumi.Output.all(**endpoints) if endpoints else pulumi.Output.from_input({})
        )
        self.cloud_pools = pulumi.Output.from_input(
            {
                pool.name: cloud_pool_outputs(made)
                for pool, made in zip(plan.pools, pools, strict=True)
            }
        )
        self.gateway = (
            front[0].address.apply(lambda url: {"url": url, "routes": gateway_routes(plan.gateway)})
            if front
            else pulumi.Output.from_input({})
        )
        self.cluster = (
            joined.outputs.apply(lambda made: {"created": True, **made})
            if joined.outputs is not None
            else pulumi.Output.from_input(joined.ref).apply(
                lambda ref: {"created": False, "name": ref}
            )
        )
        self.register_outputs(
            {
                "gateway": self.gateway,
                "cluster": self.cluster,
                "endpoints": self.endpoints,
                "kubeconfig": self.kubeconfig,
                "plan": self.plan,
                "pools": self.pools,
                "services": self.services,
                "cloud_pools": self.cloud_pools,
            }
        )
