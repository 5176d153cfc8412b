"""A whole stack: top-level keys, secret references, and the stack file's `config:` mapping."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.clouds import Cloud
from mig_inference.errors import AlreadyReported, MigError, MigErrors, shown
from mig_inference.spec.cloud_tags import TAG_KEYS, CloudTags, cloud_tags_spec
from mig_inference.spec.cluster import cluster_spec
from mig_inference.spec.cross_keys import Sections, cross_key_problems, version_warnings
from mig_inference.spec.dra import dra_spec
from mig_inference.spec.gateway import gateway_service_problems, gateway_spec
from mig_inference.spec.model import (
    CacheStorage,
    Engine,
    GpuOperatorSpec,
    PoolSpec,
    ServiceSpec,
    StackSpec,
)
from mig_inference.spec.model_cache import model_cache_spec
from mig_inference.spec.monitoring import monitoring_spec
from mig_inference.spec.operator import gpu_operator_spec
from mig_inference.spec.pools import pool_spec
from mig_inference.spec.reader import CONFIG_SECRET, ConfigNode, SecretNames
from mig_inference.spec.services import service_spec
from mig_inference.spec.verify import ephemeral_spec, verify_spec
from mig_inference.stackfile.pulumi_config import NAMESPACE

TOP_KEYS = (
    "cloud",
    "cluster",
    "pools",
    "gpuOperator",
    "services",
    "monitoring",
    "modelCache",
    "verify",
    "tags",
    "definedTags",
    "labels",
    "ephemeral",
    "dra",
    "gateway",
)
T = TypeVar("T")


def key_path(key: str) -> str:
    """The full config key path of a top-level key, e.g. `mig-inference:pools`."""
    return f"{NAMESPACE}:{key}"


class LeftOut(Struct, frozen=True):
    """Pools and services of a stack file that a partial spec leaves out."""

    pool_names: frozenset[str] = frozenset()
    unnamed_pool: bool = False
    """A pool whose name cannot be read is left out (a service may name it)."""
    service_pools: tuple[str | None, ...] = ()
    """The pool each left-out service names (None: none, or one that cannot be read)."""


class PartialStack(Struct, frozen=True):
    """What of a stack file with errors reads cleanly, for the plan to find its own errors beside
    the file's: the pools and services with no error under their key (and their positions in the
    file), every other section as read or, when it has an error, as if it were left out, and the
    cluster with the keys it gives wrongly marked (ClusterSpec.refused)."""

    spec: StackSpec
    pool_positions: tuple[int, ...]
    service_positions: tuple[int, ...]
    left_out: LeftOut


class StackErrors(MigErrors):
    """Every error of a stack file, and what of it reads cleanly (None when too little does:
    no cloud, no cluster, or no list of pools)."""

    def __init__(self, found: list[MigError], partial: PartialStack | None) -> None:
        super().__init__(found)
        self.partial = partial


def _refused_paths(problems: Sequence[MigError]) -> frozenset[str]:
    """Every key path an error names, and each key holding one (`pools[0].mig` gives
    `pools[0]` and `pools`): whether a key or one inside it is refused, in one look-up."""
    found: set[str] = set()
    for problem in problems:
        for error in problem.errors:
            path = error.path or ""
            found.add(path)
            found.update(path[:at] for at, char in enumerate(path) if char in ".[")
    return frozenset(found)


def secret_references(values: Mapping[str, Any]) -> dict[str, str]:
    """Config keys that services or the cluster name as secrets -> the key path naming them."""
    found: dict[str, str] = {}
    services = values.get("services")
    for index, service in enumerate(services if isinstance(services, list) else []):
        if isinstance(service, dict):
            for field_name in ("hfTokenSecret", "apiKeySecret"):
                if isinstance(service.get(field_name), str):
                    found.setdefault(service[field_name], f"services[{index}].{field_name}")
    cluster = values.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("kubeconfig"), str):
        found.setdefault(cluster["kubeconfig"], "cluster.kubeconfig")
    return found


def _attempt(problems: list[MigError], parse: Callable[[], T]) -> T | None:
    """Run one section's parser, recording the error that stops it."""
    try:
        return parse()
    except AlreadyReported:
        return None
    except MigError as error:
        problems.append(error)
        return None


def _refused_cluster_keys(problems: Sequence[MigError]) -> frozenset[str]:
    """The cluster keys an error recorded so far refuses."""
    cluster_key = f"{key_path('cluster')}."
    return frozenset(
        error.path.removeprefix(cluster_key).split(".")[0].split("[")[0]
        for problem in problems
        for error in problem.errors
        if error.path and error.path.startswith(cluster_key)
    )


def _duplicates(items: Any, path: str, what: str, problems: list[MigError]) -> None:
    """Names given twice in a list of mappings, at their position in the file."""
    names = [item.get("name") if isinstance(item, dict) else None for item in items or []]
    for index, name in enumerate(names):
        if isinstance(name, str) and names.index(name) != index:
            problems.append(MigError(f"duplicate {what} {shown(name)}", f"{path}[{index}].name",
                                     value=name))  # fmt: skip


def parse_stack(
    stack: str,
    values: Mapping[str, Any],
    *,
    secret_keys: frozenset[str] = frozenset(),
    how_to_add_secret: str = CONFIG_SECRET,
    pinned_operator_version: str,
) -> StackSpec:
    """Validate the project's config values (keys without the `mig-inference:` prefix).

    Raises MigErrors naming every bad value found (one per key path), not only the first."""
    problems: list[MigError] = []
    referenced = {k: v for k, v in secret_references(values).items() if k not in TOP_KEYS}
    for name, where in secret_references(values).items():
        if name in TOP_KEYS:
            problems.append(MigError(
                f"{shown(name)} is a key of the stack itself, not a secret; name the secret config "
                "key that holds the value",
                key_path(where), value=name,
            ))  # fmt: skip
    for key in sorted(secret_keys & set(TOP_KEYS)):
        problems.append(MigError(
            "is a secret, or holds one inside: only the keys that services and the cluster "
            "name (hfTokenSecret, apiKeySecret, kubeconfig) may be secrets; give a secret value "
            "as a config key of its own",
            key_path(key),
        ))  # fmt: skip
    for key in values:
        if key in referenced and key not in secret_keys:
            problems.append(MigError(
                f"is named by {referenced[key]} but stored in plain text; store it as a secret "
                f"(`pulumi config set --secret {key} ...`)",
                key_path(key),
            ))  # fmt: skip
        elif key not in TOP_KEYS and key not in secret_keys:
            problems.append(MigError(
                f"unknown key; allowed: {', '.join(TOP_KEYS)} (and secret keys named by services)",
                key_path(key), allowed=TOP_KEYS,
            ))  # fmt: skip
    clouds = [c.value for c in Cloud]
    cloud_node = ConfigNode(values.get("cloud"), key_path("cloud"), problems)
    if cloud_node.value is None:
        raise MigErrors([*problems, cloud_node.error(f"is required; allowed: {', '.join(clouds)}",
                                                     clouds)])  # fmt: skip
    cloud = cloud_node.choice(Cloud, Cloud.GKE)
    if problems and problems[-1].path == cloud_node.path:
        raise MigErrors(problems)  # every other section depends on the cloud

    # A name stored in plain text is reported once, at its own key, not again where it is named.
    named_keys = SecretNames(
        secret_keys | {key for key in referenced if key in values}, how_to_add_secret
    )

    def node(key: str) -> ConfigNode:
        return ConfigNode(values.get(key), key_path(key), problems)

    cluster = _attempt(problems, lambda: cluster_spec(node("cluster"), cloud, named_keys))
    if cluster is not None:
        # A check of another section that reads a refused cluster key stops without an error
        # of its own (the version a DRA stack reads from cluster.version, say).
        cluster = replace(cluster, refused=_refused_cluster_keys(problems))
    pools_node = node("pools")
    parsed = [
        (index, pool) for index, item in enumerate(pools_node.items())
        if (pool := _attempt(problems, partial(pool_spec, item, cloud))) is not None
    ]  # fmt: skip
    pools = tuple(pool for _index, pool in parsed)
    if pools_node.value is None or pools_node.value == []:
        problems.append(pools_node.error("is required: at least one GPU pool"))
    _duplicates(pools_node.value if isinstance(pools_node.value, list) else [],
                pools_node.path, "pool name", problems)  # fmt: skip
    owners: dict[str, str] = {}
    for index, pool in parsed:
        for position, node_name in enumerate(pool.node_names):
            if owners.setdefault(node_name, pool.name) != pool.name:
                problems.append(MigError(
                    f"node {shown(node_name)} is already in pool {owners[node_name]}",
                    f"{pools_node.path}[{index}].nodeNames[{position}]", value=node_name,
                ))  # fmt: skip
    operator = _attempt(problems, lambda: gpu_operator_spec(
        node("gpuOperator"), cloud, pinned_operator_version))  # fmt: skip
    services_node = node("services")
    parsed_services = [
        (index, service) for index, item in enumerate(services_node.items())
        if (service := _attempt(problems, partial(service_spec, item, named_keys))) is not None
    ]  # fmt: skip
    services = tuple(service for _index, service in parsed_services)
    _duplicates(services_node.value if isinstance(services_node.value, list) else [],
                services_node.path, "service name", problems)  # fmt: skip
    monitoring_path = key_path("monitoring")
    monitoring = _attempt(problems, lambda: monitoring_spec(node("monitoring")))
    cache = _attempt(problems, lambda: model_cache_spec(node("modelCache"), cloud))
    if (
        cache is not None
        and cache.storage is CacheStorage.GCS_FUSE
        and cluster is not None
        and cluster.settings.get("workloadIdentity") is False
    ):
        problems.append(MigError(
            "gcs-fuse mounts the bucket through the Cloud Storage FUSE CSI driver's sidecar, "
            "which authenticates with Workload Identity, and cluster.workloadIdentity is false "
            "(GKE \"Cloud Storage FUSE CSI driver\": Workload Identity Federation is required); "
            "turn it on, or use another storage",
            f"{key_path('modelCache')}.storage", value=cache.storage.value,
        ))  # fmt: skip
    # A refused section or URL is reported at its own key, not again at each service.
    url_refused = any(
        p.path in (monitoring_path, f"{monitoring_path}.prometheusUrl") for p in problems
    )
    for index, service in enumerate(services):
        if (
            service.queue_autoscaling is not None
            and not url_refused
            and (monitoring is None or monitoring.prometheus_url is None)
        ):
            problems.append(MigError(
                "needs monitoring.prometheusUrl: the Prometheus KEDA reads the queue from",
                f"{services_node.path}[{index}].queueAutoscaling",
            ))  # fmt: skip
    first_dra = next(
        (pools_node.child(index).child("allocation") for index, pool in parsed if pool.dra), None
    )
    dra = _attempt(problems, lambda: dra_spec(node("dra"), cloud, cluster, pools, first_dra))
    raw_cluster = values.get("cluster")
    protected = not (isinstance(raw_cluster, dict) and raw_cluster.get("protect") is False)
    tags = _attempt(
        problems, lambda: cloud_tags_spec({k: node(k) for k in TAG_KEYS}, cloud, protected)
    )
    creates = cluster is not None and cluster.create
    verify = _attempt(problems, lambda: verify_spec(node("verify"), creates))
    ephemeral = _attempt(problems, lambda: ephemeral_spec(node("ephemeral")))
    if ephemeral is not None and cluster is not None and cluster.protect:
        problems.append(MigError(
            "an ephemeral stack is destroyed by `mig-inference ephemeral destroy`, which "
            "protected resources refuse: set protect: false",
            f"{key_path('cluster')}.protect", value=True, allowed=["false"],
        ))  # fmt: skip
    gateway = _attempt(problems, lambda: gateway_spec(node("gateway"), cloud))
    if gateway is not None:
        problems.extend(
            gateway_service_problems(
                key_path("gateway"),
                gateway,
                parsed_services,
                services_node.path,
                every_service_read=_every_item_read(parsed_services, services_node.value),
            )
        )
    between = Sections(
        cloud, values, cluster, pools, parsed_services, operator, dra, gateway, monitoring, cache,
        frozenset(filter(None, (error.path for problem in problems for error in problem.errors))),
    )  # fmt: skip
    problems.extend(cross_key_problems(between))
    if verify is not None:
        for index, service in parsed_services:
            problems.extend(
                _unverifiable(verify.enabled, service, f"{services_node.path}[{index}]")
            )
    if problems:
        partial_stack = None
        pools_read = isinstance(pools_node.value, list) and not any(
            error.path == pools_node.path for problem in problems for error in problem.errors
        )
        if cluster is not None and pools_read:
            sections = {
                "gpuOperator": operator,
                "monitoring": monitoring,
                "modelCache": cache,
                "verify": verify,
                "ephemeral": ephemeral,
                "tags": tags,
                "dra": dra,
            }
            partial_stack = _partial(
                StackSpec(stack, cloud, cluster, (), GpuOperatorSpec(pinned_operator_version), (),
                          secret_keys),
                values, problems, parsed, parsed_services, sections, pinned_operator_version,
            )  # fmt: skip
        raise StackErrors(problems, partial_stack)
    assert cluster is not None and operator is not None and monitoring is not None
    assert verify is not None
    return StackSpec(stack, cloud, cluster, pools, operator, services, secret_keys, monitoring,
                     model_cache=cache, verify=verify, ephemeral=ephemeral,
                     cloud_tags=tags or CloudTags(), dra=dra, gateway=gateway,
                     warnings=tuple(version_warnings(between)))  # fmt: skip


def _partial(
    base: StackSpec,
    values: Mapping[str, Any],
    problems: Sequence[MigError],
    pools: Sequence[tuple[int, PoolSpec]],
    services: Sequence[tuple[int, ServiceSpec]],
    sections: Mapping[str, Any],
    pinned_operator_version: str,
) -> PartialStack:
    """`base` (its stack, cloud, cluster and secret keys) with what else reads cleanly: the
    pools and services without an error, each section as read or, with an error, as if it
    were left out."""

    refused_paths = _refused_paths(problems)

    def refused(key: str) -> bool:
        return key_path(key) in refused_paths

    def section(key: str, left_out: Callable[[ConfigNode], Any]) -> Any:
        value = sections[key]
        return left_out(ConfigNode(None, key_path(key))) if value is None or refused(key) else value

    kept_pools = [(i, pool) for i, pool in pools if not refused(f"pools[{i}]")]
    kept_services = [(i, service) for i, service in services if not refused(f"services[{i}]")]
    given_pools = values.get("pools")
    raw_pools: list[Any] = given_pools if isinstance(given_pools, list) else []
    out_pools = [raw for i, raw in enumerate(raw_pools) if i not in dict(kept_pools)]
    names = [raw.get("name") if isinstance(raw, dict) else None for raw in out_pools]
    raw_services = values.get("services")
    if isinstance(raw_services, list):
        out_services = [raw for i, raw in enumerate(raw_services) if i not in dict(kept_services)]
        targets = tuple(
            raw.get("pool") if isinstance(raw, dict) and isinstance(raw.get("pool"), str)
            else None
            for raw in out_services
        )  # fmt: skip
    else:
        targets = (None,) if refused("services") else ()
    cloud, creates = base.cloud, base.cluster.create
    spec = replace(
        base,
        cluster=replace(base.cluster, refused=_refused_cluster_keys(problems)),
        pools=tuple(pool for _i, pool in kept_pools),
        services=tuple(service for _i, service in kept_services),
        gpu_operator=section(
            "gpuOperator", lambda blank: gpu_operator_spec(blank, cloud, pinned_operator_version)
        ),
        monitoring=section("monitoring", monitoring_spec),
        verify=section("verify", lambda blank: verify_spec(blank, creates)),
        model_cache=section("modelCache", lambda _blank: None),
        ephemeral=section("ephemeral", lambda _blank: None),
        cloud_tags=CloudTags()
        if any(refused(key) for key in TAG_KEYS)
        else sections["tags"] or CloudTags(),
        dra=section("dra", lambda _blank: None),
    )
    return PartialStack(
        spec,
        tuple(i for i, _pool in kept_pools),
        tuple(i for i, _service in kept_services),
        LeftOut(
            frozenset(name for name in names if isinstance(name, str)),
            any(not isinstance(name, str) for name in names),
            targets,
        ),
    )


def _unverifiable(stack_enabled: bool, service: ServiceSpec, path: str) -> list[MigError]:
    """A custom engine checked without a probe: nothing says what its API answers."""
    own = service.verify.enabled
    enabled = stack_enabled if own is None else own
    if service.engine is Engine.CUSTOM and enabled and service.verify.probe is None:
        return [MigError(
            "the serving check of a custom engine needs a request to send: give verify.path "
            "(and method, body, status, contains), or verify.enabled: false",
            f"{path}.verify",
        )]  # fmt: skip
    return []


def _every_item_read(parsed: Sequence[object], given: object) -> bool:
    """Whether every entry of a list the stack file gives was read (a value that is no list
    has no entries: it is refused at its own key)."""
    return not isinstance(given, list) or len(parsed) == len(given)
