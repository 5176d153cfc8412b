"""The device plugin's ConfigMap over one `pulumi up`: the config keys it holds at each moment, as
the program's resources put them there, and what a device plugin does when its node's
`nvidia.com/device-plugin.config` label names a key it lacks.

Where a key comes from (the GPU Operator chart v26.7.0, `templates/plugin_config.yaml`,
`templates/clusterpolicy.yaml`): the operator's release points the device plugin at the ConfigMap
`devicePlugin.config.name`; with `create: true` the chart renders it from `devicePlugin.config.data`
(its keys change when the release does); else it is another object's, and here the program's
`ConfigMap` and its `ConfigMapPatch`es (server-side apply: each adds its keys when created and
takes them away when deleted).

What a missing key does (NVIDIA/k8s-device-plugin v0.20.0 `cmd/config-manager/main.go`
`updateConfigName`: `specified config ... does not exist`, exit 1; the operator runs it as the
plugin pod's `config-manager-init`, GPU Operator v26.7.0 `controllers/object_controls.go`
`handleDevicePluginConfig`): a running plugin keeps serving the config it has (only its sidecar
exits), but a plugin that starts while its node names a missing key stays in its init container,
advertising nothing, until the label names a key the ConfigMap has."""

from __future__ import annotations

from msgspec import Struct, field

from mig_inference.rollout.resources import Key, Resource
from mig_inference.versions import GPU_OPERATOR_CHART

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CONFIG_MAP_PATCH = "kubernetes:core/v1:ConfigMapPatch"
ObjectName = tuple[str, str]
"""(namespace, name) of a ConfigMap."""


def _operator_plugin_config(release: Resource) -> tuple[ObjectName | None, frozenset[str]]:
    """The ConfigMap a GPU Operator release points its device plugin at (None: no config
    manager) and the keys the chart itself renders into it."""
    config = (release.inputs.get("values") or {}).get("devicePlugin", {}).get("config") or {}
    if not config.get("name"):
        return None, frozenset()
    name = (str(release.inputs.get("namespace") or ""), str(config["name"]))
    data = (config.get("data") or {}) if config.get("create") else {}
    return name, frozenset(data)


def _config_map_keys(resource: Resource) -> tuple[ObjectName, frozenset[str]]:
    metadata = resource.inputs.get("metadata") or {}
    name = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
    return name, frozenset(resource.inputs.get("data") or {})


class PluginConfigs(Struct):
    """The device plugin's ConfigMap as the update has left it so far."""

    read_from: ObjectName | None = None
    """The ConfigMap the operator's device plugin reads (None: no config manager runs)."""
    held: dict[Key, tuple[ObjectName, frozenset[str]]] = field(default_factory=dict)
    """Per resource, the keys it puts in which ConfigMap."""

    def apply(self, resource: Resource) -> None:
        """The resource created or updated."""
        if resource.type == RELEASE and resource.inputs.get("chart") == GPU_OPERATOR_CHART:
            self.read_from, rendered = _operator_plugin_config(resource)
            if self.read_from is None:
                self.held.pop(resource.key, None)
            else:
                self.held[resource.key] = (self.read_from, rendered)
        elif resource.type in (CONFIG_MAP, CONFIG_MAP_PATCH):
            self.held[resource.key] = _config_map_keys(resource)

    def remove(self, resource: Resource) -> None:
        """The resource deleted: its keys leave the ConfigMap."""
        self.held.pop(resource.key, None)
        if resource.type == RELEASE and resource.inputs.get("chart") == GPU_OPERATOR_CHART:
            self.read_from = None

    def known(self) -> frozenset[str] | None:
        """The keys the device plugin finds now (None: it reads no config, any label goes)."""
        if self.read_from is None:
            return None
        return frozenset(
            key for name, keys in self.held.values() if name == self.read_from for key in keys
        )
