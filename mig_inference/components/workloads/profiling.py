"""Profiling runs of a service: a Job per candidate profile that starts the engine on one slice
and drives it with vLLM's own benchmark (see `mig_inference/kube/scripts/profile.sh`)."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.engines import engine_container
from mig_inference.kube.scripts import load
from mig_inference.names.digest import short_hash
from mig_inference.plan.startup import PROBE_FLOOR_SECONDS, estimate

from ..planning import planned
from ..stack_args import Stack
from ..workloads.inference import (
    ENGINE_MOUNTS,
    ENGINE_SECURITY,
    HF_TOKEN_KEY,
    engine_pod,
    secret_env,
)
from .device_claim import device_request
from .egress import dns_and_https_egress

BENCHMARK_SECONDS = 3600
"""What a run may take once the engine answers."""


class ProfilingJobsArgs(TypedDict):
    stack: Stack
    """The stack the service belongs to: the planner sizes the engine for each candidate slice
    of the service's pool, as it would serve there."""
    service: str
    """Name of the service in `stack.services` (one with `profiling`)."""


class ProfilingJobs(pulumi.ComponentResource):
    """One Job per candidate profile, on the service's pool: the engine with the arguments it
    would serve with on that slice, then `vllm bench serve` against it; the Job's log ends with
    the result line `mig-inference throughput` reads. `pulumi up` does not wait for them."""

    job_names: pulumi.Output[list[str]]
    """Names of the Jobs, one per profile."""

    def __init__(
        self, name: str, args: ProfilingJobsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:ProfilingJobs", name, None, opts)
        plan_of_stack = planned(args["stack"])
        cache_spec = plan_of_stack.spec.model_cache
        hub = cache_spec.hub_mb_per_s if cache_spec else None
        runs = [r for r in plan_of_stack.profiling if r.service == args["service"]]
        leading = next(
            s.name
            for s in plan_of_stack.services
            if s.service_name == args["service"] and s.leads_group
        )
        credentials = f"{leading}-credentials"
        names = []
        for run in runs:
            plan = run.engine
            engine = engine_container(plan)
            # A profiling run loads alone on its slice, from the hub.
            startup_seconds = max(
                plan.spec.startup_seconds or 0,
                PROBE_FLOOR_SECONDS,
                int(2 * estimate(plan, None, hub).replica_seconds),
            )
            settings = run.settings
            env = [k8s.core.v1.EnvVarArgs(name=key, value=value) for key, value in engine.env]
            env += [
                k8s.core.v1.EnvVarArgs(name=key, value=str(value))
                for key, value in (
                    ("MODEL", plan.spec.model),
                    ("PROFILE", run.profile),
                    ("PORT", plan.spec.port),
                    ("STARTUP_SECONDS", startup_seconds),
                    ("NUM_PROMPTS", settings.num_prompts),
                    ("INPUT_TOKENS", settings.input_tokens),
                    ("OUTPUT_TOKENS", settings.output_tokens),
                    ("MAX_CONCURRENCY", run.max_concurrency),
                )
            ]
            if plan.spec.hf_token_secret:
                # The Secret of the service's (first) Deployment holds the token.
                env += [secret_env(var, credentials, HF_TOKEN_KEY) for var in engine.hf_token_env]
            # Jobs are immutable: what the run measures is in its name, so a change is a new run.
            measured = f"{run.profile}|{settings}|{' '.join(engine.args)}|{engine.image}"
            # Kubernetes names stop at 63 characters: the hash keeps a shortened one unique.
            job_name = f"{run.name[:56].rstrip('-')}-{short_hash(measured, 6)}"
            request = device_request(
                f"{name}-{run.profile}-claim",
                job_name,
                plan.spec.namespace,
                plan,
                plan_of_stack,
                self,
            )
            device = request.resources
            container = k8s.core.v1.ContainerArgs(
                name="profile",
                image=engine.image,
                image_pull_policy="IfNotPresent",
                command=["sh", "-c", load("profile.sh"), "profile", *engine.args],
                env=env,
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={
                        "cpu": f"{plan.cpu_millicores}m",
                        "memory": f"{plan.memory_mib}Mi",
                        **device,
                    },
                    limits={"memory": f"{plan.memory_mib}Mi", **device},
                    claims=request.claims,
                ),
                security_context=ENGINE_SECURITY,
                volume_mounts=ENGINE_MOUNTS,
            )
            labels = {
                "app.kubernetes.io/name": run.name,
                "app.kubernetes.io/instance": run.service,
                "app.kubernetes.io/component": "profiling",
                "app.kubernetes.io/managed-by": "mig-inference",
                "mig-inference.io/profile": run.profile,
            }
            names.append(job_name)
            k8s.batch.v1.Job(
                f"{name}-{run.profile}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=job_name,
                    namespace=plan.spec.namespace,
                    labels=labels,
                    # The run takes as long as the model loads and the benchmark runs; the
                    # result is read from its log afterwards.
                    annotations={"pulumi.com/skipAwait": "true"},
                ),
                spec=k8s.batch.v1.JobSpecArgs(
                    backoff_limit=0,
                    active_deadline_seconds=startup_seconds + BENCHMARK_SECONDS,
                    template=k8s.core.v1.PodTemplateSpecArgs(
                        metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                        spec=engine_pod(
                            plan,
                            container,
                            labels,
                            restart_policy="Never",
                            resource_claims=request.pod_claims,
                        ),
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=request.depends_on),
            )
        if runs:
            # The runs download the model from the hub and talk to their engine on localhost:
            # nothing reaches them, and they reach only DNS and HTTPS.
            k8s.networking.v1.NetworkPolicy(
                f"{name}-policy",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=f"{args['service'][:48]}-profiling",
                    namespace=runs[0].engine.spec.namespace,
                    labels={"app.kubernetes.io/managed-by": "mig-inference"},
                ),
                spec=k8s.networking.v1.NetworkPolicySpecArgs(
                    pod_selector=k8s.meta.v1.LabelSelectorArgs(
                        match_labels={
                            "app.kubernetes.io/component": "profiling",
                            "app.kubernetes.io/instance": args["service"],
                        }
                    ),
                    policy_types=["Ingress", "Egress"],
                    egress=dns_and_https_egress(),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.job_names = pulumi.Output.from_input(names)
        self.register_outputs({"job_names": self.job_names})
