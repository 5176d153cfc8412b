"""A whole stack: top-level keys, secret references, and the stack file's `config:` mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mig.clouds import Cloud
from mig.errors import MigError
from mig.spec.cluster import cluster_spec
from mig.spec.model import StackSpec
from mig.spec.operator import gpu_operator_spec
from mig.spec.pools import pool_spec
from mig.spec.reader import ConfigNode
from mig.spec.services import service_spec

NAMESPACE = "mig-inference"
TOP_KEYS = ("cloud", "cluster", "pools", "gpuOperator", "services")
SECRET_MARKER = "secure"


def key_path(key: str) -> str:
    """The full config key path of a top-level key, e.g. `mig-inference:pools`."""
    return f"{NAMESPACE}:{key}"


def _secret_references(values: Mapping[str, Any]) -> dict[str, str]:
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


def parse_stack(
    stack: str,
    values: Mapping[str, Any],
    *,
    secret_keys: frozenset[str] = frozenset(),
    pinned_operator_version: str,
) -> StackSpec:
    """Validate the project's config values (keys without the `mig-inference:` prefix)."""
    root = f"{NAMESPACE}:"
    referenced = _secret_references(values)
    for key in values:
        if key in referenced and key not in secret_keys:
            raise MigError(
                f"is named by {referenced[key]} but stored in plain text; store it as a secret "
                f"(`pulumi config set --secret {key} ...`)",
                f"{root}{key}",
            )
        if key not in TOP_KEYS and key not in secret_keys:
            raise MigError(
                f"unknown key; allowed: {', '.join(TOP_KEYS)} (and secret keys named by services)",
                f"{root}{key}",
            )
    cloud_node = ConfigNode(values.get("cloud"), f"{root}cloud")
    if cloud_node.value is None:
        raise cloud_node.error(f"is required; allowed: {', '.join(c.value for c in Cloud)}")
    cloud = cloud_node.choice(Cloud, Cloud.GKE)
    cluster = cluster_spec(ConfigNode(values.get("cluster"), f"{root}cluster"), cloud, secret_keys)
    pools_node = ConfigNode(values.get("pools"), f"{root}pools")
    pools = tuple(pool_spec(item, cloud) for item in pools_node.items())
    if not pools:
        raise pools_node.error("is required: at least one GPU pool")
    names = [p.name for p in pools]
    for index, name in enumerate(names):
        if names.index(name) != index:
            raise MigError(f"duplicate pool name {name!r}", f"{root}pools[{index}].name")
    operator = gpu_operator_spec(
        ConfigNode(values.get("gpuOperator"), f"{root}gpuOperator"), cloud, pinned_operator_version
    )
    services = tuple(
        service_spec(item, secret_keys)
        for item in ConfigNode(values.get("services"), f"{root}services").items()
    )
    service_names = [s.name for s in services]
    for index, name in enumerate(service_names):
        if service_names.index(name) != index:
            raise MigError(f"duplicate service name {name!r}", f"{root}services[{index}].name")
    return StackSpec(stack, cloud, cluster, pools, operator, services, secret_keys)


def stack_file_values(config: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """Split a stack file's `config:` into project values and the set of secret keys.

    Keys of other namespaces (e.g. `gcp:project`) are left to their providers."""
    values: dict[str, Any] = {}
    secrets: set[str] = set()
    for full_key, value in (config or {}).items():
        namespace, _, key = str(full_key).partition(":")
        if namespace != NAMESPACE or not key:
            continue
        if isinstance(value, dict) and set(value) == {SECRET_MARKER}:
            secrets.add(key)
            values[key] = "[secret]"
        else:
            values[key] = value
    return {k: v for k, v in values.items() if k not in secrets}, frozenset(secrets)
