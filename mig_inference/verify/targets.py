"""What the serving check covers, decided from the plan: one verify Job per Service (after all
of its Deployments), what it asks, where it may connect, and the slice every replica must see.
"""

from __future__ import annotations

import json
from functools import cache

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.installation import package_text
from mig_inference.kube.engines import engine_container
from mig_inference.names.digest import short_hash
from mig_inference.plan import ServicePlan, StackPlan
from mig_inference.plan.gateway import MODEL_HEADER
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.plan.served import served_model
from mig_inference.spec import Engine
from mig_inference.spec.model import Probe
from mig_inference.versions import VERIFY_IMAGE

VERIFY_APP = "mig-inference-verify"
"""`app.kubernetes.io/name` of the verify Jobs' pods."""
VERIFY_COMPONENT = "verify"
SLICE_CHECK_CONTAINER = "mig-slice-check"
API_KEY_KEY = "api-key"
"""The key of a service's API key in its credentials Secret."""
GATEWAY_ADDRESS = "gateway"
"""The target's URL when the gateway's address is known only once it is programmed (GKE): the
Job's `MIG_VERIFY_URL` gives it."""


@cache
def program_source(module: str) -> str:
    """The source of `probe` or `slice_check`: what the containers run with `python3 -c`."""
    return package_text(f"verify/{module}.py")


def pod_selector(service_name: str) -> dict[str, str]:
    """The serving pods of a Service, every profile of a service sized by demand included."""
    return {"app.kubernetes.io/instance": service_name, "app.kubernetes.io/component": "inference"}


def credentials_secret(service: ServicePlan) -> str:
    """The Secret holding the service's tokens (created by InferenceService)."""
    return f"{service.name}-credentials"


class VerifyTarget(Struct, frozen=True):
    service: str
    """The Service's name (a service sized by demand runs several Deployments behind it)."""
    namespace: str
    engine: Engine
    url: str
    port: int
    model: str
    prompt: str
    max_tokens: int
    timeout_seconds: int
    probe: Probe | None
    api_key_secret: str | None
    """The Secret whose `api-key` the check sends (services with `apiKeySecret`)."""
    parts: tuple[str, ...]
    """The service's Deployments (plan names), all available before the check runs."""
    model_header: str | None = None
    """Behind the gateway: the header its routes match the model by, which the check sends on
    requests without a body (the body-based router reads the others' `model`)."""
    fingerprint: str = ""
    """Changes with anything the check or the service's replicas depend on: a new Job runs."""

    @property
    def job_name(self) -> str:
        return f"verify-{self.service}-{self.fingerprint}"

    @property
    def selector(self) -> dict[str, str]:
        return pod_selector(self.service)

    @property
    def requests(self) -> list[str]:
        """What the check asks (`probe.run_checks`), for the plan's report."""
        if self.engine in (Engine.VLLM, Engine.TGI):
            return ["GET /v1/models", "POST /v1/completions"]
        if self.engine is Engine.TRITON:
            each = "/v2/models/<each READY model>"
            return ["GET /v2/health/ready", "POST /v2/repository/index", f"GET {each}/ready",
                    f"GET {each}"]  # fmt: skip
        assert self.probe is not None
        return [f"{self.probe.method} {self.probe.path}"]

    def target_json(self) -> str:
        """The probe's `MIG_VERIFY_TARGET`."""
        probe = None
        if self.probe is not None:
            probe = {
                "path": self.probe.path,
                "method": self.probe.method,
                "body": self.probe.body,
                "status": self.probe.status,
                "contains": self.probe.contains,
            }
        return json.dumps(
            {
                "service": self.service,
                "engine": self.engine.value,
                "url": self.url,
                "model": self.model,
                "prompt": self.prompt,
                "max_tokens": self.max_tokens,
                "timeout_seconds": self.timeout_seconds,
                "probe": probe,
                "api_key_secret": self.api_key_secret,
                "model_header": self.model_header,
            },
            sort_keys=True,
        )


def _replica_fingerprint(service: ServicePlan, cache: ModelCachePlan | None) -> dict[str, object]:
    engine = engine_container(service, cache)
    return {
        "image": engine.image,
        "command": list(engine.command),
        "args": list(engine.args),
        "resource": service.resource,
        "replicas": service.replicas,
        "pool": service.pool.physical_name,
    }


def verify_targets(plan: StackPlan) -> list[VerifyTarget]:
    """One target per verified Service, in the plan's order."""
    groups: dict[str, list[ServicePlan]] = {}
    for service in plan.services:
        if plan.spec.verified(service.spec):
            groups.setdefault(service.service_name, []).append(service)
    settings = plan.spec.verify
    targets = []
    for name, parts in groups.items():
        lead = parts[0]
        spec = lead.spec
        keyed = spec.api_key_secret is not None and engine_container(lead).api_key_env is not None
        # Behind the gateway the check asks through it: Istio's in-cluster Service, or (GKE) the
        # address the Job gets once the load balancer has one. Behind an HTTPS gateway it asks
        # the service itself: the certificate names the public hostname, which the Job cannot
        # verify from inside the cluster (the model servers admit the Job: workloads.inference).
        gateway = (
            plan.gateway
            if plan.gateway and plan.gateway.route_of(name) and plan.gateway.spec.tls is None
            else None
        )
        target = VerifyTarget(
            service=name,
            namespace=spec.namespace,
            engine=spec.engine,
            url=lead.endpoint if gateway is None else gateway.in_cluster_url or GATEWAY_ADDRESS,
            port=spec.port,
            model=served_model(lead, plan.model_cache),
            prompt=settings.prompt,
            max_tokens=settings.max_tokens,
            timeout_seconds=settings.timeout_seconds,
            probe=spec.verify.probe,
            api_key_secret=credentials_secret(lead) if keyed else None,
            parts=tuple(p.name for p in parts),
            model_header=MODEL_HEADER if gateway is not None else None,
        )
        content = {
            "target": target.target_json(),
            "program": program_source("probe"),
            "image": VERIFY_IMAGE,
            "replicas": [_replica_fingerprint(p, plan.model_cache) for p in parts],
        }
        fingerprint = short_hash(json.dumps(content, sort_keys=True), 8)
        targets.append(replace(target, fingerprint=fingerprint))
    return targets


def slice_profile(service: ServicePlan) -> str:
    """What `nvidia-smi -L` must list in a replica: the MIG profile, or `gpu` for a whole GPU."""
    return service.profile
