"""Rules between sections of a stack file: one key contradicting another, each refused at the key
that the file gives (naming the other), read after every section on its own.

- the namespaces the stack creates (mig_inference.spec.namespaces), from every section that
  decides one;
- a gateway with no service to front, a model cache streaming for no vLLM service;
- Kubernetes versions against the features that need a version: the Istio the stack installs
  (ISTIO_KUBERNETES), and the release channel of a GKE cluster the stack creates against the
  minor its DRA objects are written for;
- a monitoring key that applies only with another (`releaseLabel` without the Prometheus
  Operator objects it labels);
- what the cloud's version table says of the cluster's version (a word, when it had left
  standard support by the table's date).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.kubernetes_versions import (
    GKE_CHANNEL_MINORS,
    GKE_DEFAULT_CHANNEL,
    GKE_RELEASE_NOTES,
    TABLE_DATE,
    gke_channels_offering,
    support_note,
)
from mig_inference.errors import MigError
from mig_inference.spec.gateway import GatewaySpec
from mig_inference.spec.model import (
    ClusterSpec,
    DraSpec,
    Engine,
    GpuOperatorSpec,
    MigManager,
    ModelCacheSpec,
    MonitoringSpec,
    PoolSpec,
    ServiceSpec,
)
from mig_inference.spec.namespaces import (
    ISTIO_NAMESPACE,
    KEDA_NAMESPACE,
    NamespaceClaim,
    namespace_problems,
)
from mig_inference.stackfile.pulumi_config import NAMESPACE
from mig_inference.versions import ISTIO_VERSION

ISTIO_KUBERNETES = (32, 36)
"""The Kubernetes minors Istio 1.30 supports, first and last (istio/istio.io
`data/compatibility/supportStatus.yml`: 1.30, k8sVersions 1.32-1.36); a test keeps the pin in
versions.ISTIO_VERSION on 1.30."""
CLUSTER_VERSION_KEYS = {Cloud.EKS: "version", Cloud.OKE: "kubernetesVersion"}
_MINOR = re.compile(r"v?1\.(\d{1,2})\b")


def _key(path: str) -> str:
    return f"{NAMESPACE}:{path}"


class Sections(Struct, frozen=True):
    """What the stack's sections read as, for the rules between them (None: left out, or
    refused at its own key). `given` is the raw config values, to tell a key the file writes
    from a default."""

    cloud: Cloud
    given: Mapping[str, Any]
    cluster: ClusterSpec | None
    pools: Sequence[PoolSpec]
    services: Sequence[tuple[int, ServiceSpec]]
    operator: GpuOperatorSpec | None
    dra: DraSpec | None
    gateway: GatewaySpec | None
    monitoring: MonitoringSpec | None
    cache: ModelCacheSpec | None = None
    refused: frozenset[str] = frozenset()
    """Key paths an error names already: a rule that would read one of them stays silent."""

    def written(self, section: str, key: str) -> bool:
        value = self.given.get(section)
        return isinstance(value, dict) and value.get(key) is not None

    def service_written(self, index: int, key: str) -> bool:
        services = self.given.get("services")
        item = services[index] if isinstance(services, list) and index < len(services) else None
        return isinstance(item, dict) and item.get(key) is not None


def namespace_claims(s: Sections) -> list[NamespaceClaim]:
    """Every namespace the stack creates, features first (their namespaces are fixed), services
    last."""
    claims: list[NamespaceClaim] = []
    if s.gateway is not None and s.gateway.install:
        claims.append(
            NamespaceClaim(
                ISTIO_NAMESPACE,
                _key("gateway.install"),
                f"the Istio {ISTIO_VERSION} the stack installs",
                False,
            )
        )
    queued = next((i for i, service in s.services if service.queue_autoscaling), None)
    if queued is not None:
        claims.append(
            NamespaceClaim(
                KEDA_NAMESPACE,
                _key(f"services[{queued}].queueAutoscaling"),
                "KEDA (queueAutoscaling)",
                False,
            )
        )
    if s.operator is not None and any(p.mig_manager is MigManager.OPERATOR for p in s.pools):
        claims.append(
            NamespaceClaim(
                s.operator.namespace,
                _key("gpuOperator.namespace"),
                "the GPU Operator",
                s.written("gpuOperator", "namespace"),
            )
        )
    if s.dra is not None:
        claims.append(
            NamespaceClaim(
                s.dra.namespace,
                _key("dra.namespace"),
                "NVIDIA's DRA driver",
                s.written("dra", "namespace"),
            )
        )
    if s.gateway is not None:
        claims.append(
            NamespaceClaim(
                s.gateway.namespace,
                _key("gateway.namespace"),
                "the gateway",
                s.written("gateway", "namespace"),
            )
        )
    by_namespace: dict[str, list[tuple[int, ServiceSpec]]] = {}
    for index, service in s.services:
        by_namespace.setdefault(service.namespace, []).append((index, service))
    for namespace, serving in by_namespace.items():
        index, service = next(
            ((i, sv) for i, sv in serving if s.service_written(i, "namespace")), serving[0]
        )
        claims.append(
            NamespaceClaim(
                namespace,
                _key(f"services[{index}].namespace"),
                f"service {service.name}",
                s.service_written(index, "namespace"),
            )
        )
    return claims


def _prometheus(s: Sections) -> NamespaceClaim | None:
    """Where the Prometheus that scrapes the stack runs, when the stack names one."""
    if s.monitoring is None or s.given.get("monitoring") is None:
        return None
    return NamespaceClaim(
        s.monitoring.prometheus_namespace,
        _key("monitoring.prometheusNamespace"),
        "the Prometheus that scrapes the stack",
        s.written("monitoring", "prometheusNamespace"),
    )


def known_minor(s: Sections) -> tuple[int, str] | None:
    """The Kubernetes minor the cluster runs, when the file says, and the key that says it."""
    key = CLUSTER_VERSION_KEYS.get(s.cloud)
    if s.cluster is not None and key is not None and key not in s.cluster.refused:
        found = _MINOR.match(str(s.cluster.settings.get(key) or ""))
        if found is not None:
            return int(found.group(1)), f"cluster.{key}"
    if s.dra is not None:
        return s.dra.kubernetes_minor, s.dra.version_key
    return None


def _istio_problems(s: Sections) -> list[MigError]:
    known = known_minor(s)
    if s.gateway is None or not s.gateway.install or known is None:
        return []
    minor, where = known
    first, last = ISTIO_KUBERNETES
    if first <= minor <= last:
        return []
    return [
        MigError(
            f"installs Istio {ISTIO_VERSION}, which supports Kubernetes 1.{first} to 1.{last} "
            f"(istio.io, supported releases), and the cluster runs 1.{minor} ({where}): run a "
            "supported version, or set install: false and bring a Gateway API implementation "
            "that supports it",
            _key("gateway.install"),
            value=s.gateway.install,
        )
    ]


def _gke_channel_problems(s: Sections) -> list[MigError]:
    """A GKE cluster the stack creates runs a minor of its release channel: the DRA objects'
    minor (the cluster's minimum master version) must be one the channel offers."""
    if s.cloud is not Cloud.GKE or s.dra is None or s.cluster is None or not s.cluster.create:
        return []
    if "releaseChannel" in s.cluster.refused:
        return []
    channel = s.cluster.settings.get("releaseChannel") or GKE_DEFAULT_CHANNEL
    first, last = GKE_CHANNEL_MINORS[channel]
    minor = s.dra.kubernetes_minor
    if first <= minor <= last:
        return []
    offering = gke_channels_offering(minor)
    given = "cluster.releaseChannel" if s.cluster.settings.get("releaseChannel") else "the default"
    return [
        MigError(
            f"says 1.{minor}, and the GKE cluster the stack creates runs a version of its release "
            f"channel {channel} ({given}), which offers 1.{first} to 1.{last} ({GKE_RELEASE_NOTES}"
            f", as of {TABLE_DATE}): the cluster is created at minimum version 1.{minor}, which "
            f"GKE refuses there; set cluster.releaseChannel to "
            f"{' or '.join(offering) if offering else 'a channel that offers it'}",
            _key(s.dra.version_key),
            value=f"1.{minor}",
            allowed=offering,
        )
    ]


def _no_services(s: Sections) -> bool:
    return not s.services and s.given.get("services") in (None, [])


def _every_service_read(s: Sections) -> bool:
    given = s.given.get("services")
    return isinstance(given, list) and len(s.services) == len(given)


def _gateway_problems(s: Sections) -> list[MigError]:
    if s.gateway is None or not _no_services(s):
        return []
    return [
        MigError(
            "fronts the stack's services, and the stack has none: leave the gateway out, or "
            "set enabled: false",
            _key("gateway"),
        )
    ]


def _cache_problems(s: Sections) -> list[MigError]:
    """vLLM alone streams the weights from the cache's bucket."""
    if s.cache is None or not s.cache.enabled:
        return []
    if (
        s.cache.stream
        and _every_service_read(s)
        and not any(service.engine is Engine.VLLM for _, service in s.services)
    ):
        return [
            MigError(
                "streams the weights with vLLM's Run:ai Model Streamer, and the stack has no "
                "vLLM service (other engines read the mounted files): leave stream out",
                _key("modelCache.stream"),
                value=True,
            )
        ]
    return []


def _monitoring_problems(s: Sections) -> list[MigError]:
    if s.monitoring is None or s.monitoring.prometheus_operator:
        return []
    if not s.written("monitoring", "releaseLabel"):
        return []
    return [
        MigError(
            "labels the Prometheus Operator's objects (ServiceMonitor, PodMonitor, "
            "PrometheusRule), which the stack creates only with prometheusOperator: true; set "
            "it, or leave releaseLabel out",
            _key("monitoring.releaseLabel"),
            value=s.monitoring.release_label,
        )
    ]


def cross_key_problems(s: Sections) -> list[MigError]:
    claims = [claim for claim in namespace_claims(s) if claim.key not in s.refused]
    prometheus = _prometheus(s)
    if prometheus is not None and prometheus.key in s.refused:
        prometheus = None
    return [
        *namespace_problems(claims, s.cloud, prometheus),
        *_gateway_problems(s),
        *_cache_problems(s),
        *_istio_problems(s),
        *_gke_channel_problems(s),
        *_monitoring_problems(s),
    ]


def version_warnings(s: Sections) -> list[str]:
    """What the cloud's version table says of the cluster's version beyond being offered."""
    key = CLUSTER_VERSION_KEYS.get(s.cloud)
    if s.cluster is None or key is None or key in s.cluster.refused:
        return []
    version = s.cluster.settings.get(key)
    note = support_note(s.cloud, version) if isinstance(version, str) else None
    return [f"{_key(f'cluster.{key}')}: {note}"] if note else []
