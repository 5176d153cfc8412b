"""The serving check of one Service: a Job that, once every Deployment of the service is
available, sends the engine a real request and checks the answer (`pulumi up` waits for it and
fails with its message), its ServiceAccount without API access, and a NetworkPolicy that lets
it reach only the service's pods (behind the gateway: the gateway's listener) and DNS."""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.plan.gateway import GatewayPlan
from mig_inference.verify.targets import (
    API_KEY_KEY,
    VERIFY_APP,
    VERIFY_COMPONENT,
    VerifyTarget,
    program_source,
    verify_targets,
)
from mig_inference.versions import VERIFY_IMAGE

from ..planning import planned
from ..stack_args import Stack
from ..workloads.gateway_peers import proxy_peers
from ..workloads.node_job import MANAGED_BY
from ..workloads.pod_security import LOCKED_DOWN, TMP_MOUNT, nobody_pod, tmp_volume

DNS_PORT = 53
"""DNS, on any address: the resolver a pod uses differs per cluster (kube-dns or CoreDNS pods,
GKE's NodeLocal DNSCache on a node-local address), and a NetworkPolicy peer cannot name a
node-local address portably."""


class ServiceVerificationArgs(TypedDict):
    stack: Stack
    """The stack the service belongs to: the planner decides what the check asks and where it
    may connect; the stack's `verify` gives its timeout, prompt and completion length."""
    service: str
    """The name of the Service to check (a service sized by demand: the service's name)."""
    gateway_url: NotRequired[pulumi.Input[str]]
    """Behind the gateway on GKE: the URL its load balancer answers at, known once programmed
    (Istio's in-cluster address is in the plan)."""


def _target(stack: Stack, service: str) -> VerifyTarget:
    for target in verify_targets(planned(stack)):
        if target.service == service:
            return target
    raise pulumi.RunError(f"service {service!r} is not a verified service of the stack")


class ServiceVerification(pulumi.ComponentResource):
    """A Job that proves the service answers: the engine's documented API asked and its answer
    checked (vLLM and TGI: `/v1/models` and a short completion; Triton: ready, repository index
    and model endpoints; custom engines: the stack's probe), with the latency of each request."""

    job_name: pulumi.Output[str]
    """The name of the Job (it changes with the service, so a changed service is checked
    again)."""

    def __init__(
        self, name: str, args: ServiceVerificationArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:ServiceVerification", name, None, opts)
        target = _target(args["stack"], args["service"])
        gateway = planned(args["stack"]).gateway if target.model_header else None
        child = pulumi.ResourceOptions(parent=self)
        own = {"app.kubernetes.io/name": VERIFY_APP, "app.kubernetes.io/instance": target.service}
        labels = {**own, "app.kubernetes.io/component": VERIFY_COMPONENT, **MANAGED_BY}
        object_name = f"verify-{target.service}"

        def meta(object_name: str) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=object_name, namespace=target.namespace, labels=labels
            )

        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=meta(object_name),
            # The check talks to the service only, never to the Kubernetes API.
            automount_service_account_token=False,
            opts=child,
        )
        network = k8s.networking.v1.NetworkPolicy(
            f"{name}-network",
            metadata=meta(object_name),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=own),
                # No ingress rule: nothing may connect to the check.
                policy_types=["Ingress", "Egress"],
                egress=[
                    _service_egress(target) if gateway is None else _gateway_egress(gateway),
                    k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(port=DNS_PORT, protocol=p)
                            for p in ("UDP", "TCP")
                        ]
                    ),
                ],
            ),
            opts=child,
        )
        budget = target.timeout_seconds
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=target.job_name,
                namespace=target.namespace,
                labels=labels,
                # A failed check is replaced on the next `pulumi up`, not awaited again.
                annotations={"pulumi.com/replaceUnready": "true"},
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=0,
                active_deadline_seconds=budget + 60,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=_pod(target, account.metadata.name, args.get("gateway_url")),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                # The egress rule exists before the check connects.
                depends_on=[network],
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{budget + 120}s", update=f"{budget + 120}s"
                ),
                delete_before_replace=True,
            ),
        )
        self.job_name = job.metadata.name
        self.register_outputs({"job_name": self.job_name})


def _service_egress(target: VerifyTarget) -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """To the service's own pods on its port."""
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(
        to=[
            k8s.networking.v1.NetworkPolicyPeerArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=target.selector)
            )
        ],
        ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=target.port, protocol="TCP")],
    )


def _gateway_egress(gateway: GatewayPlan) -> k8s.networking.v1.NetworkPolicyEgressRuleArgs:
    """To the gateway's listener: Istio's gateway pods, or (GKE) the load balancer's address,
    which only the cluster learns, on the listener's port."""
    port = [k8s.networking.v1.NetworkPolicyPortArgs(port=gateway.spec.port, protocol="TCP")]
    if gateway.spec.managed:
        return k8s.networking.v1.NetworkPolicyEgressRuleArgs(ports=port)
    return k8s.networking.v1.NetworkPolicyEgressRuleArgs(to=proxy_peers(gateway), ports=port)


def _pod(
    target: VerifyTarget, account: pulumi.Input[str], gateway_url: pulumi.Input[str] | None
) -> k8s.core.v1.PodSpecArgs:
    env = [
        k8s.core.v1.EnvVarArgs(name="MIG_VERIFY_TARGET", value=target.target_json()),
        k8s.core.v1.EnvVarArgs(name="PYTHONDONTWRITEBYTECODE", value="1"),
        k8s.core.v1.EnvVarArgs(name="HOME", value="/tmp"),
    ]
    if gateway_url is not None:
        env.append(k8s.core.v1.EnvVarArgs(name="MIG_VERIFY_URL", value=gateway_url))
    if target.api_key_secret is not None:
        env.append(
            k8s.core.v1.EnvVarArgs(
                name="MIG_VERIFY_API_KEY",
                value_from=k8s.core.v1.EnvVarSourceArgs(
                    secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(
                        name=target.api_key_secret, key=API_KEY_KEY
                    )
                ),
            )
        )
    return k8s.core.v1.PodSpecArgs(
        service_account_name=account,
        automount_service_account_token=False,
        enable_service_links=False,
        restart_policy="Never",
        security_context=nobody_pod(),
        volumes=[tmp_volume("16Mi")],
        containers=[
            k8s.core.v1.ContainerArgs(
                name="verify",
                image=VERIFY_IMAGE,
                image_pull_policy="IfNotPresent",
                command=["python3", "-c", program_source("probe")],
                env=env,
                # The probe writes its verdict there; should it crash, its last log lines.
                termination_message_policy="FallbackToLogsOnError",
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "10m", "memory": "32Mi"},
                    limits={"cpu": "200m", "memory": "128Mi"},
                ),
                security_context=LOCKED_DOWN,
                volume_mounts=[TMP_MOUNT],
            )
        ],
    )
