"""A MIG-aware inference service: Deployment, Service, PDB, NetworkPolicy, Secret, optional HPA."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.dra import claim_template_name
from mig_inference.kube.engines import HOME, engine_container, engine_image
from mig_inference.kube.monitoring import (
    SCRAPED_ENGINES,
    queue_query,
    queue_threshold,
    scrape_annotations,
)
from mig_inference.plan import ServicePlan
from mig_inference.verify.targets import (
    API_KEY_KEY,
    SLICE_CHECK_CONTAINER,
    VERIFY_APP,
    credentials_secret,
    program_source,
    slice_profile,
)
from mig_inference.versions import VERIFY_IMAGE

from ..planning import planned, planned_service, secret_value
from ..stack_args import Stack
from ..workloads.device_claim import DeviceRequest, device_request
from ..workloads.gateway_peers import picker_peer, proxy_peers
from ..workloads.model_cache import (
    ModelFill,
    fill_lead,
    reader_account,
    reader_volumes,
)

HF_TOKEN_KEY = "hf-token"
RUN_AS = 10001
"""A high UID, so the engine never shares a UID with a host account."""
PROBE_PERIOD_SECONDS = 10
HPA_CPU_TARGET = 80
LOCAL_VOLUMES = ("dshm", "home", "tmp")
"""Scratch volumes (shared memory, the model cache, /tmp) that a move to another node may drop."""


class InferenceServiceArgs(TypedDict):
    stack: Stack
    """The stack the service belongs to: the planner decides its pool, profile, MIG resource,
    replicas and engine sizing from it; its tokens come from `stack.secrets` and its monitoring
    from `stack.monitoring`."""
    service: str
    """Name of the service in `stack.services`."""


def secret_env(name: str, secret: str, key: str) -> k8s.core.v1.EnvVarArgs:
    return k8s.core.v1.EnvVarArgs(
        name=name,
        value_from=k8s.core.v1.EnvVarSourceArgs(
            secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret, key=key)
        ),
    )


ENGINE_SECURITY = k8s.core.v1.SecurityContextArgs(
    allow_privilege_escalation=False,
    read_only_root_filesystem=True,
    run_as_non_root=True,
    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
)
ENGINE_MOUNTS = [
    k8s.core.v1.VolumeMountArgs(name="dshm", mount_path="/dev/shm"),
    k8s.core.v1.VolumeMountArgs(name="home", mount_path=HOME),
    k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
]


def slice_check(plan: ServicePlan, request: DeviceRequest) -> k8s.core.v1.ContainerArgs:
    """The init container that fails the replica unless it sees exactly one device of the
    planned profile; it asks for the engine's device (or shares its claim), which the kubelet
    then gives the engine."""
    device = request.resources
    return k8s.core.v1.ContainerArgs(
        name=SLICE_CHECK_CONTAINER,
        image=VERIFY_IMAGE,
        image_pull_policy="IfNotPresent",
        command=["python3", "-c", program_source("slice_check")],
        env=[
            k8s.core.v1.EnvVarArgs(name="MIG_EXPECT_PROFILE", value=slice_profile(plan)),
            k8s.core.v1.EnvVarArgs(name="MIG_SERVICE", value=plan.name),
            # nvidia-smi and NVML: the driver capability `utility`.
            k8s.core.v1.EnvVarArgs(name="NVIDIA_DRIVER_CAPABILITIES", value="utility"),
            # Where GKE's own device plugin mounts the driver's libraries.
            k8s.core.v1.EnvVarArgs(name="LD_LIBRARY_PATH", value="/usr/local/nvidia/lib64"),
            k8s.core.v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1"),
        ],
        termination_message_policy="FallbackToLogsOnError",
        resources=k8s.core.v1.ResourceRequirementsArgs(
            requests={"cpu": "10m", "memory": "32Mi", **device},
            limits={"memory": "128Mi", **device},
            claims=request.claims,
        ),
        security_context=ENGINE_SECURITY,
    )


def verify_peer(service: str) -> k8s.networking.v1.NetworkPolicyPeerArgs:
    """The service's serving check (its Job runs in the service's namespace)."""
    return k8s.networking.v1.NetworkPolicyPeerArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(
            match_labels={
                "app.kubernetes.io/name": VERIFY_APP,
                "app.kubernetes.io/instance": service,
            }
        )
    )


def engine_pod(
    plan: ServicePlan,
    container: k8s.core.v1.ContainerArgs,
    selector: dict[str, str],
    restart_policy: str | None = None,
    volumes: list[k8s.core.v1.VolumeArgs] | None = None,
    service_account: str | None = None,
    init_containers: list[k8s.core.v1.ContainerArgs] | None = None,
    resource_claims: list[k8s.core.v1.PodResourceClaimArgs] | None = None,
) -> k8s.core.v1.PodSpecArgs:
    """The pod an engine runs in: on its pool's current nodes, tolerating the pool's taints,
    restricted (non-root, read-only root filesystem, no capabilities), with scratch volumes
    for shared memory, the hub's download cache and /tmp (and `volumes`: the model cache)."""
    cache_mib = max(20 * 1024, int(2 * plan.offer.memory_mib))
    affinity = k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[
                    k8s.core.v1.NodeSelectorTermArgs(
                        match_expressions=[
                            k8s.core.v1.NodeSelectorRequirementArgs(
                                key=key, operator="In", values=[value]
                            )
                            for key, value in sorted(plan.node_selector.items())
                        ]
                    )
                ]
            )
        )
    )
    return k8s.core.v1.PodSpecArgs(
        restart_policy=restart_policy,
        affinity=affinity,
        tolerations=[
            k8s.core.v1.TolerationArgs(
                key=t["key"], operator=t["operator"], value=t.get("value"), effect=t.get("effect")
            )
            for t in plan.pool.tolerations
        ],
        topology_spread_constraints=[
            k8s.core.v1.TopologySpreadConstraintArgs(
                max_skew=1,
                topology_key="kubernetes.io/hostname",
                when_unsatisfiable="ScheduleAnyway",
                label_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            )
        ],
        service_account_name=service_account,
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=60,
        security_context=k8s.core.v1.PodSecurityContextArgs(
            run_as_non_root=True,
            run_as_user=RUN_AS,
            run_as_group=RUN_AS,
            fs_group=RUN_AS,
            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
        ),
        init_containers=init_containers or None,
        containers=[container],
        resource_claims=resource_claims,
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="dshm",
                empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(
                    medium="Memory", size_limit=f"{plan.shm_mib}Mi"
                ),
            ),
            k8s.core.v1.VolumeArgs(
                name="home",
                empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{cache_mib}Mi"),
            ),
            k8s.core.v1.VolumeArgs(
                name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="4Gi")
            ),
            *(volumes or []),
        ],
    )


class InferenceService(pulumi.ComponentResource):
    """Replicas that request exactly one MIG slice each, land only on their pool, tolerate its
    taints, and fit the slice they get."""

    endpoint: pulumi.Output[str]
    """In-cluster URL of the service."""
    deployment_name: pulumi.Output[str]
    """Name of the Deployment."""

    def __init__(
        self, name: str, args: InferenceServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:InferenceService", name, None, opts)
        stack = args["stack"]
        plan = planned_service(stack, args["service"])
        spec = plan.spec
        stack_plan = planned(stack)
        monitoring = stack_plan.spec.monitoring
        cache = stack_plan.model_cache
        estimate = stack_plan.load[plan.name]
        hf_token = secret_value(stack, spec.hf_token_secret)
        api_key = secret_value(stack, spec.api_key_secret)
        engine = engine_container(plan, cache)
        fills = fill_lead(stack_plan, plan)
        scraped = spec.engine in SCRAPED_ENGINES
        autoscaled = spec.queue_autoscaling is not None or spec.hpa_max_replicas is not None
        namespace = spec.namespace
        # A service sized by demand runs one Deployment per profile (name: the part), all
        # labelled with the service (instance) that the one Service selects.
        selector = {
            "app.kubernetes.io/name": plan.name,
            "app.kubernetes.io/instance": plan.service_name,
        }
        # The group's Service selects the serving pods of every profile (not profiling runs).
        service_selector = (
            {
                "app.kubernetes.io/instance": plan.service_name,
                "app.kubernetes.io/component": "inference",
            }
            if plan.group
            else selector
        )
        labels = {
            **selector,
            "app.kubernetes.io/component": "inference",
            "app.kubernetes.io/managed-by": "mig-inference",
            "mig-inference.io/pool": plan.pool.name,
            "mig-inference.io/profile": plan.profile,
        }

        def meta(object_name: str) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(name=object_name, namespace=namespace, labels=labels)

        env = [k8s.core.v1.EnvVarArgs(name=key, value=value) for key, value in engine.env]
        secret_data: dict[str, pulumi.Input[str]] = {}
        if hf_token is not None and (engine.hf_token_env or fills):
            # With the cache only the populate Job downloads: the replicas get no token.
            secret_data[HF_TOKEN_KEY] = hf_token
        if api_key is not None and engine.api_key_env:
            secret_data[API_KEY_KEY] = api_key
        secret_name = credentials_secret(plan)
        depends: list[pulumi.Resource] = []
        if secret_data:
            secret = k8s.core.v1.Secret(
                f"{name}-credentials",
                metadata=meta(secret_name),
                type="Opaque",
                string_data=secret_data,
                opts=pulumi.ResourceOptions(parent=self),
            )
            depends.append(secret)
            if HF_TOKEN_KEY in secret_data:
                env += [secret_env(var, secret_name, HF_TOKEN_KEY) for var in engine.hf_token_env]
            if API_KEY_KEY in secret_data and engine.api_key_env:
                env.append(secret_env(engine.api_key_env, secret_name, API_KEY_KEY))
        if fills:
            image = engine_image(plan)
            assert image is not None
            # Filled once, before this Deployment (and those reading the same model) roll.
            depends.append(
                ModelFill(
                    f"{name}-fill",
                    stack_plan,
                    plan,
                    image,
                    (secret_name, HF_TOKEN_KEY) if HF_TOKEN_KEY in secret_data else None,
                    pulumi.ResourceOptions(parent=self, depends_on=list(depends)),
                )
            )
        cache_volumes, cache_mounts, cache_annotations = (
            reader_volumes(cache, plan) if cache is not None else ([], [], {})
        )
        request = device_request(
            f"{name}-claim", claim_template_name(plan), namespace, plan, stack_plan, self
        )
        depends += request.depends_on
        device = request.resources
        resources = k8s.core.v1.ResourceRequirementsArgs(
            requests={"cpu": f"{plan.cpu_millicores}m", "memory": f"{plan.memory_mib}Mi", **device},
            limits={"memory": f"{plan.memory_mib}Mi", **device},
            claims=request.claims,
        )
        http = k8s.core.v1.HTTPGetActionArgs(path=engine.health_path, port="http")
        # Sized to the load: the model's bytes, where they are read from, every replica at once.
        startup_seconds = estimate.startup_probe_seconds
        startup_failures = max(1, -(-startup_seconds // PROBE_PERIOD_SECONDS))
        container = k8s.core.v1.ContainerArgs(
            name="engine",
            image=engine.image,
            image_pull_policy="IfNotPresent",
            command=list(engine.command) or None,
            args=list(engine.args) or None,
            ports=[
                k8s.core.v1.ContainerPortArgs(name="http", container_port=spec.port, protocol="TCP")
            ],
            env=env,
            resources=resources,
            startup_probe=k8s.core.v1.ProbeArgs(
                http_get=http,
                period_seconds=PROBE_PERIOD_SECONDS,
                failure_threshold=startup_failures,
            ),
            readiness_probe=k8s.core.v1.ProbeArgs(
                http_get=http,
                period_seconds=PROBE_PERIOD_SECONDS,
                failure_threshold=3,
                timeout_seconds=5,
            ),
            liveness_probe=k8s.core.v1.ProbeArgs(
                http_get=http, period_seconds=20, failure_threshold=3, timeout_seconds=5
            ),
            security_context=ENGINE_SECURITY,
            volume_mounts=[*ENGINE_MOUNTS, *cache_mounts],
        )
        verified = planned(stack).spec.verified(spec)
        pod = engine_pod(
            plan, container, selector, volumes=cache_volumes,
            service_account=reader_account(cache, plan),
            init_containers=[slice_check(plan, request)] if verified else None,
            resource_claims=request.pod_claims,
        )  # fmt: skip
        rollout_seconds = startup_seconds + 600
        # An update replaces replicas one at a time: `pulumi up` waits for all of them.
        update_seconds = max(rollout_seconds, estimate.rolling_update_seconds() + 600)
        annotations = {
            # The cluster autoscaler may move a replica to empty a node: its volumes are scratch.
            "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": ",".join(LOCAL_VOLUMES),
            **(scrape_annotations(spec.port) if monitoring.scrape_annotations and scraped else {}),
            **cache_annotations,
        }
        deployment = k8s.apps.v1.Deployment(
            name,
            metadata=meta(plan.name),
            spec=k8s.apps.v1.DeploymentSpecArgs(
                replicas=plan.replicas,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                # Every slice is spoken for: replace replicas one at a time, never surge.
                strategy=k8s.apps.v1.DeploymentStrategyArgs(
                    type="RollingUpdate",
                    rolling_update=k8s.apps.v1.RollingUpdateDeploymentArgs(
                        max_surge=0, max_unavailable=1
                    ),
                ),
                progress_deadline_seconds=rollout_seconds,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=annotations),
                    spec=pod,
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=depends,
                # An autoscaler owns the replica count once the service runs; the plan's count
                # is its minimum, and a later `pulumi up` must not reset what it chose.
                ignore_changes=["spec.replicas"] if autoscaled else None,
                # Large models take long to download and load: `pulumi up` waits that long
                # (every replica at once on create, one after the other on update).
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{rollout_seconds}s", update=f"{update_seconds}s"
                ),
            ),
        )
        if plan.leads_group:
            # Named after the service, not the part that leads it: the Service stays the same
            # resource when the mix of profiles changes (a URN holds the name, not the parent's).
            prefix = name[: -len(plan.name)] if name.endswith(plan.name) else f"{name}-"
            k8s.core.v1.Service(
                f"{prefix}{plan.service_name}-service" if plan.group else f"{name}-service",
                metadata=meta(plan.service_name),
                spec=k8s.core.v1.ServiceSpecArgs(
                    type="ClusterIP",
                    selector=service_selector,
                    ports=[
                        k8s.core.v1.ServicePortArgs(
                            name="http", port=spec.port, target_port="http", protocol="TCP"
                        )
                    ],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata=meta(plan.name),
            spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                max_unavailable=plan.disruption_budget,
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        route = stack_plan.gateway.pool_of(plan.name) if stack_plan.gateway else None
        peers = [
            k8s.networking.v1.NetworkPolicyPeerArgs(
                namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"kubernetes.io/metadata.name": client.namespace}
                )
                if client.namespace
                else None,
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(client.pod_labels))
                if client.pod_labels
                else None,
            )
            for client in spec.clients
        ] or [
            # No declared clients: only pods of the service's own namespace.
            k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=k8s.meta.v1.LabelSelectorArgs())
        ]
        if stack_plan.gateway is not None and route is not None:
            # Behind the gateway: only its proxies and the model's endpoint picker (and, behind
            # an HTTPS gateway, the serving check, which asks the service itself).
            peers = [*proxy_peers(stack_plan.gateway), picker_peer(route)]
            if verified and stack_plan.gateway.spec.tls is not None:
                peers.append(verify_peer(plan.service_name))
        elif verified and spec.clients:
            # The serving check runs in the service's namespace.
            peers.append(verify_peer(plan.service_name))
        ports = [k8s.networking.v1.NetworkPolicyPortArgs(port=spec.port, protocol="TCP")]
        ingress_from = [peers]
        if monitoring.scraped and scraped:
            # Prometheus scrapes /metrics on the serving port.
            ingress_from.append(
                [
                    k8s.networking.v1.NetworkPolicyPeerArgs(
                        namespace_selector=k8s.meta.v1.LabelSelectorArgs(
                            match_labels={
                                "kubernetes.io/metadata.name": monitoring.prometheus_namespace
                            }
                        )
                    )
                ]
            )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-ingress",
            metadata=meta(plan.name),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=selector),
                policy_types=["Ingress"],
                ingress=[
                    k8s.networking.v1.NetworkPolicyIngressRuleArgs(from_=sources, ports=ports)
                    for sources in ingress_from
                ],
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        queue = spec.queue_autoscaling
        if queue is not None:
            # KEDA keeps replicas between the planned count and the maximum the pool can hold,
            # one replica per `maxNumSeqs` running plus `queuePerReplica` waiting requests.
            k8s.apiextensions.CustomResource(
                f"{name}-scaler",
                api_version="keda.sh/v1alpha1",
                kind="ScaledObject",
                metadata=meta(plan.name),
                spec={
                    "scaleTargetRef": {"name": plan.name},
                    "minReplicaCount": plan.replicas,
                    "maxReplicaCount": queue.max_replicas,
                    "triggers": [
                        {
                            "type": "prometheus",
                            "metadata": {
                                "serverAddress": monitoring.prometheus_url,
                                "query": queue_query(plan),
                                "threshold": str(queue_threshold(plan)),
                                # No samples is an error on the ScaledObject, not zero load.
                                "ignoreNullValues": "false",
                            },
                        }
                    ],
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
            )
        if spec.hpa_max_replicas is not None:
            k8s.autoscaling.v2.HorizontalPodAutoscaler(
                f"{name}-hpa",
                metadata=meta(plan.name),
                spec=k8s.autoscaling.v2.HorizontalPodAutoscalerSpecArgs(
                    scale_target_ref=k8s.autoscaling.v2.CrossVersionObjectReferenceArgs(
                        api_version="apps/v1", kind="Deployment", name=plan.name
                    ),
                    min_replicas=plan.replicas,
                    max_replicas=spec.hpa_max_replicas,
                    metrics=[
                        k8s.autoscaling.v2.MetricSpecArgs(
                            type="Resource",
                            resource=k8s.autoscaling.v2.ResourceMetricSourceArgs(
                                name="cpu",
                                target=k8s.autoscaling.v2.MetricTargetArgs(
                                    type="Utilization", average_utilization=HPA_CPU_TARGET
                                ),
                            ),
                        )
                    ],
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
            )
        self.endpoint = pulumi.Output.from_input(plan.endpoint)
        self.deployment_name = deployment.metadata.name
        self.register_outputs({"endpoint": self.endpoint, "deployment_name": self.deployment_name})
