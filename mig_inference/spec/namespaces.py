"""The namespaces a stack creates, refused when one is created twice or exists in the cluster
already.

The stack creates a Namespace object for each namespace it uses: one per distinct service
namespace, the GPU Operator's and the DRA driver's (components.workloads.agent_namespace), the
gateway's, Istio's `istio-system` when the stack installs Istio, and KEDA's `keda` (its Helm
release's createNamespace) when a service scales on its queue. pulumi-kubernetes creates objects
client-side: a second Namespace of one name, or one that every cluster has, makes `pulumi up`
stop with AlreadyExists part-way through. So each is refused at the key that names it.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError, shown

ISTIO_NAMESPACE = "istio-system"
"""Where the stack installs Istio (mig_inference.kube.gateway.ISTIO_NAMESPACE, a test keeps the
two equal)."""
KEDA_NAMESPACE = "keda"
"""Where the stack installs KEDA (components.workloads.monitoring.KEDA_NAMESPACE, a test keeps
the two equal)."""
EVERY_CLUSTER = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Kubernetes "Namespaces", Initial namespaces: every cluster starts with these four; and "Avoid
creating namespaces with the prefix `kube-`, since it is reserved for Kubernetes system
namespaces"."""
RESERVED_PREFIX = "kube-"
CLOUD_NAMESPACES: dict[Cloud, tuple[str, ...]] = {Cloud.GKE: ("gmp-system", "gmp-public")}
"""GKE creates `gmp-system` and `gmp-public` for Managed Service for Prometheus, on by default on
new clusters ("Do not modify or deploy anything in this namespace": GKE, Managed Service for
Prometheus, "Set up managed collection")."""


class NamespaceClaim(Struct, frozen=True):
    """A namespace the stack creates, and the key that decides it."""

    namespace: str
    key: str
    """The full key path to name in an error."""
    what: str
    """What lives there (`the GPU Operator`, `service chat`)."""
    written: bool
    """The file gives the key (False: a default, or a namespace a feature implies)."""


def _existing_problem(claim: NamespaceClaim, cloud: Cloud) -> str | None:
    name = claim.namespace
    if name in EVERY_CLUSTER:
        return (
            f'{shown(name)} exists in every cluster (Kubernetes "Namespaces": '
            f"{', '.join(EVERY_CLUSTER)}), and the stack creates the namespace of {claim.what}: "
            "`pulumi up` would stop with AlreadyExists; pick a namespace of its own"
        )
    if name.startswith(RESERVED_PREFIX):
        return (
            f"{shown(name)} starts with {RESERVED_PREFIX!r}, which Kubernetes reserves for its "
            'system namespaces (Kubernetes "Namespaces"); pick a namespace of its own for '
            f"{claim.what}"
        )
    if name in CLOUD_NAMESPACES.get(cloud, ()):
        return (
            f"{shown(name)} is GKE's own (Managed Service for Prometheus creates "
            f"{' and '.join(CLOUD_NAMESPACES[cloud])}), and the stack creates the namespace of "
            f"{claim.what}: `pulumi up` would stop with AlreadyExists; pick a namespace of its own"
        )
    return None


def _short(key: str) -> str:
    """A key path without the project's namespace, as messages name the other key."""
    return key.partition(":")[2] or key


def _blamed(
    later: NamespaceClaim, earlier: NamespaceClaim
) -> tuple[NamespaceClaim, NamespaceClaim]:
    """Of two claims of one namespace, the one to name (the later, unless only the earlier is
    written in the file) and the other."""
    return (later, earlier) if later.written or not earlier.written else (earlier, later)


def namespace_problems(
    claims: Sequence[NamespaceClaim], cloud: Cloud, prometheus: NamespaceClaim | None = None
) -> list[MigError]:
    """One error per namespace the stack would create that exists already, or that two parts of
    the stack create (at the key the file gives, the later one when both are given);
    `prometheus`: where the Prometheus that scrapes the stack runs, which exists already."""
    problems: list[MigError] = []
    first: dict[str, NamespaceClaim] = {}
    for claim in claims:
        problem = _existing_problem(claim, cloud)
        if problem is not None:
            if claim.written:
                problems.append(MigError(problem, claim.key, value=claim.namespace))
            continue
        earlier = first.setdefault(claim.namespace, claim)
        if earlier is claim:
            continue
        blamed, other = _blamed(claim, earlier)
        problems.append(
            MigError(
                f"{shown(claim.namespace)} is also the namespace of {other.what} "
                f"({_short(other.key)}): the stack creates a Namespace object for each, "
                "and pulumi-kubernetes creates the second client-side, so `pulumi up` stops with "
                f"AlreadyExists part-way through; give {blamed.what} a namespace of its own",
                blamed.key,
                value=claim.namespace,
            )
        )
    if prometheus is not None and prometheus.namespace in first:
        made = first[prometheus.namespace]
        blamed, _other = _blamed(prometheus, made)
        fix = (
            "name the namespace Prometheus runs in"
            if blamed is prometheus
            else f"give {made.what} a namespace of its own"
        )
        problems.append(
            MigError(
                f"{shown(prometheus.namespace)} is where {prometheus.what} runs "
                f"({_short(prometheus.key)}), so it exists already, and the stack creates it for "
                f"{made.what} ({_short(made.key)}): `pulumi up` would stop with AlreadyExists; "
                f"{fix}",
                blamed.key,
                value=prometheus.namespace,
            )
        )
    return problems
