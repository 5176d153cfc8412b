"""The cluster objects the simulator moves: nodes, pods, Deployments and their budgets, as plain
data read from the objects the program renders."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from mig_inference.names.labels import (
    DRA_DRIVER,
    DRA_NODE_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from mig_inference.rollout.resources import Resource

DEVICE_PREFIX = "nvidia.com/"
EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule",
           "NO_EXECUTE": "NoExecute"}  # fmt: skip


class Taint(Struct, frozen=True):
    key: str
    value: str
    effect: str
    """Kubernetes spelling: NoSchedule, PreferNoSchedule, NoExecute."""

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Taint:
        effect = str(raw.get("effect", ""))
        return cls(str(raw["key"]), str(raw.get("value") or ""), EFFECTS.get(effect, effect))

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


class Toleration(Struct, frozen=True):
    key: str | None
    operator: str
    value: str | None
    effect: str | None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Toleration:
        return cls(raw.get("key"), str(raw.get("operator") or "Equal"), raw.get("value"),
                   raw.get("effect") or None)  # fmt: skip

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: the effect matches (or is empty), the key matches (or is empty
        with Exists), and with Equal the value matches."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key is None or self.key == "":
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or (self.value or "") == taint.value


class PodTemplate(Struct, frozen=True):
    """What decides where a replica may run and what it holds."""

    resource: str | None
    """The device it requests (`nvidia.com/mig-3g.40gb`, `nvidia.com/gpu`...), None for none."""
    affinity: tuple[tuple[str, str, tuple[str, ...]], ...]
    """Required node affinity: (key, operator, values) that must all hold."""
    tolerations: tuple[Toleration, ...]
    fingerprint: str
    """Changes whenever the pod template does (a rolling update)."""
    claims: tuple[str, ...] = ()
    """ResourceClaimTemplates its pods claim their device through (their claims, and so
    `resource`, are made when a pod is created)."""

    def admits(self, node: Node) -> bool:
        """The node's labels satisfy the affinity and its taints are tolerated."""
        for key, operator, values in self.affinity:
            value = node.labels.get(key)
            if operator == "In" and value not in values:
                return False
            if operator == "NotIn" and value in values:
                return False
            if operator == "Exists" and value is None:
                return False
            if operator == "DoesNotExist" and value is not None:
                return False
        return all(self.tolerates(t) for t in node.taints if t.effect != "PreferNoSchedule")

    def tolerates(self, taint: Taint) -> bool:
        return any(t.tolerates(taint) for t in self.tolerations)


CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
SELECTED_PROFILE = re.compile(r"\.profile == '([^']+)'")
"""The profile a claim template's CEL selector names (`device.attributes[...].profile == 'P'`)."""


def claimed_device(template: Resource) -> str | None:
    """The device a claim made from this ResourceClaimTemplate takes, named as the device plugin
    would advertise it: a whole GPU of the driver's GPU class, else the selector's profile (None:
    a request the simulator does not read)."""
    for request in template.inputs["spec"]["spec"]["devices"]["requests"]:
        exactly = request.get("exactly") or {}
        # The driver's whole-GPU DeviceClass is named after the driver.
        if exactly.get("deviceClassName") == DRA_DRIVER:
            return "nvidia.com/gpu"
        for selector in exactly.get("selectors") or []:
            named = SELECTED_PROFILE.search(selector["cel"]["expression"])
            if named:
                return f"nvidia.com/mig-{named.group(1).replace('+', '.')}"
    return None


def object_key(resource: Resource) -> tuple[str, str]:
    """(namespace, name) of a rendered Kubernetes object."""
    metadata = resource.inputs.get("metadata", {})
    return (metadata.get("namespace", "default"), metadata.get("name", ""))


def pod_template(spec: Mapping[str, Any]) -> PodTemplate:
    """The template of a rendered Deployment's `spec.template.spec`. A pod that claims its device
    through a ResourceClaimTemplate names the template (`claims`): its claim is made from the
    template as it is when the pod is created (`Cluster`)."""
    terms = (
        spec.get("affinity", {}).get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    )  # fmt: skip
    affinity = tuple(
        (e["key"], e["operator"], tuple(e.get("values") or ()))
        for term in terms[:1]
        for e in term.get("matchExpressions", [])
    )
    affinity += tuple((k, "In", (v,)) for k, v in sorted((spec.get("nodeSelector") or {}).items()))
    limits: dict[str, Any] = {}
    for container in spec.get("containers", []):
        limits.update((container.get("resources") or {}).get("limits") or {})
    devices = sorted(k for k in limits if k.startswith(DEVICE_PREFIX))
    claims = tuple(
        str(claim["resourceClaimTemplateName"])
        for claim in spec.get("resourceClaims") or []
        if claim.get("resourceClaimTemplateName")
    )
    return PodTemplate(
        devices[0] if devices else None,
        affinity,
        tuple(Toleration.of(t) for t in spec.get("tolerations") or []),
        json.dumps(spec, sort_keys=True, default=str),
        () if devices else claims,
    )


class Node(Struct):
    name: str
    labels: dict[str, str]
    taints: list[Taint]
    zone: str = ""
    source: str = ""
    """The cloud pool (its physical name) that made the node; empty for existing nodes."""
    gpus: int = 0
    up_at: float = 0.0
    """When it is Ready (a new node boots first)."""
    gone: bool = False
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    applied: str | None = None
    """The MIG config the GPUs have now (what the MIG manager last applied)."""
    published: str | None = None
    """DRA nodes: the layout NVIDIA's DRA kubelet plugin published, the one the GPUs had when it
    last started (None until it starts)."""
    devices: dict[str, int] = field(default_factory=dict)

    @property
    def dra(self) -> bool:
        """NVIDIA's DRA driver, not a device plugin, publishes the node's devices."""
        return self.labels.get(DRA_NODE_LABEL) == "dra"

    """What the device plugin advertises now (allocatable GPU and MIG resources)."""
    draining: bool = False
    replaced: bool = False
    """Removed by a change that brings other nodes in its place."""

    @property
    def pool(self) -> str | None:
        return self.labels.get(POOL_LABEL)

    @property
    def config(self) -> str | None:
        return self.labels.get(MIG_CONFIG_LABEL)

    @property
    def state(self) -> str | None:
        return self.labels.get(MIG_STATE_LABEL)

    def ready(self, now: float) -> bool:
        return not self.gone and now >= self.up_at


class Pod(Struct):
    name: str
    namespace: str
    deployment: str
    service: str
    template: PodTemplate
    created: float
    node: str | None = None
    ready_at: float | None = None
    """When it became (or will become) Ready: bound, image pulled, model loaded."""
    terminating_until: float | None = None
    """Terminating until then; it still holds its device meanwhile."""
    claims_made: bool = True
    """False while a ResourceClaimTemplate it names does not exist (its claim cannot be made,
    so it cannot be scheduled)."""

    def ready(self, now: float) -> bool:
        return (
            self.node is not None
            and self.terminating_until is None
            and self.ready_at is not None
            and now >= self.ready_at
        )

    @property
    def active(self) -> bool:
        return self.terminating_until is None


class Deployment(Struct):
    namespace: str
    name: str
    service: str
    """The Service it serves (a demand-sized service runs one Deployment per profile)."""
    replicas: int
    template: PodTemplate
    start_seconds: float
    """From a bound pod to Ready: image pull and model load."""
    max_unavailable: int = 1
    """Its PodDisruptionBudget (what an eviction may leave unavailable); 0 without one."""
    budget: int | None = None
    """The PodDisruptionBudget's maxUnavailable, None without one."""
    labels: dict[str, str] = field(default_factory=dict)
    deleted: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def device_counts(pods: Sequence[Pod], node: str) -> dict[str, int]:
    """Devices the pods on `node` hold (terminating pods still hold theirs)."""
    held: dict[str, int] = {}
    for pod in pods:
        if pod.node == node and pod.template.resource:
            held[pod.template.resource] = held.get(pod.template.resource, 0) + 1
    return held
