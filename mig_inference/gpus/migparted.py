"""mig-parted configuration: NVIDIA's named configs and custom layouts as `version: v1` documents.

A node chooses its layout through the label `nvidia.com/mig.config=<config name>`; the MIG manager
looks that name up in a mig-parted config. NVIDIA ships named configs (`all-disabled`,
`all-enabled`, `all-<profile>`, `all-balanced`); any other layout needs a custom config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from msgspec import Struct

from mig_inference.errors import MigError, shown
from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout, parse_custom_layout, place
from mig_inference.names.digest import short_hash

ALL_DISABLED = "all-disabled"
ALL_ENABLED = "all-enabled"
ALL_BALANCED = "all-balanced"
CUSTOM_PREFIX = "custom-"
# Kubernetes label values are at most 63 characters.
_LABEL_VALUE_MAX = 63


def config_name_of_profile(profile_name: str) -> str:
    """`1g.10gb+me` -> `all-1g.10gb.me`: config names write `+` as `.`."""
    return "all-" + profile_name.replace("+", ".")


def named_configs(gpu: GpuModel) -> dict[str, Layout | None]:
    """NVIDIA's named configs that apply to `gpu`: name -> layout (None = MIG disabled).

    `all-enabled` maps to an empty layout: MIG mode on, no instances.
    """
    if not gpu.mig_capable:
        return {ALL_DISABLED: None}
    configs: dict[str, Layout | None] = {ALL_DISABLED: None, ALL_ENABLED: Layout(())}
    for profile in gpu.profiles:
        configs[config_name_of_profile(profile.name)] = Layout.of(
            gpu, {profile.name: profile.max_instances}
        )
    if gpu.balanced:
        configs[ALL_BALANCED] = Layout.of(gpu, dict(gpu.balanced))
    return configs


def custom_config_name(layout: Layout) -> str:
    """A stable, label-safe name for a custom layout, e.g. `custom-1x3g.40gb-2x1g.10gb`."""
    name = CUSTOM_PREFIX + "-".join(f"{c}x{n.replace('+', '.')}" for n, c in layout.counts)
    if len(name) <= _LABEL_VALUE_MAX:
        return name
    digest = short_hash(name, 12)
    return f"{CUSTOM_PREFIX}{digest}"


def config_name_for(gpu: GpuModel, layout: Layout) -> str:
    """NVIDIA's name for `layout` when it is one of the named configs, else a custom name."""
    for name, named in named_configs(gpu).items():
        if named is not None and named.counts and named == layout:
            return name
    return custom_config_name(layout)


class ResolvedConfig(Struct, frozen=True):
    """A node-level MIG choice: the label value and the per-GPU layout (None = MIG off)."""

    name: str
    layout: Layout | None
    named: bool
    """True when NVIDIA ships this config, so the GPU Operator needs no custom ConfigMap."""

    @property
    def mig_enabled(self) -> bool:
        return self.layout is not None


def resolve_config(gpu: GpuModel, text: str | Mapping[str, int]) -> ResolvedConfig:
    """Resolve a named config, `{profile: count}` mapping or `PROFILE=COUNT,...` string."""
    if isinstance(text, Mapping):
        layout = Layout.of(gpu, text)
    else:
        configs = named_configs(gpu)
        if text in configs:
            return ResolvedConfig(text, configs[text], named=True)
        if text.startswith("all-"):
            allowed = ", ".join(configs)
            raise MigError(
                f"{shown(text)} is not a named MIG config of {gpu.name}; allowed: {allowed}",
                value=text,
                allowed=list(configs),
            )
        layout = parse_custom_layout(gpu, text)
    if not layout.counts:
        raise MigError("a custom layout needs at least one profile")
    place(gpu, layout)
    name = config_name_for(gpu, layout)
    return ResolvedConfig(name, layout, named=not name.startswith(CUSTOM_PREFIX))


def _entry(
    gpu: GpuModel, layout: Layout | None, devices: str | Sequence[int] = "all"
) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if layout is not None and layout.counts:
        entry["device-filter"] = list(gpu.pci_device_ids)
    entry["devices"] = devices if isinstance(devices, str) else list(devices)
    entry["mig-enabled"] = layout is not None
    if layout is not None:
        entry["mig-devices"] = layout.as_dict()
    return entry


def config_entries(gpu: GpuModel, per_gpu_layouts: Sequence[Layout | None]) -> list[dict[str, Any]]:
    """mig-parted entries for one node: one `devices: all` entry when every GPU is alike,
    otherwise one entry per group of GPU indexes sharing a layout."""
    distinct = list(dict.fromkeys(per_gpu_layouts))
    if len(distinct) == 1:
        return [_entry(gpu, distinct[0])]
    return [
        _entry(gpu, layout, [i for i, each in enumerate(per_gpu_layouts) if each == layout])
        for layout in distinct
    ]


def document(configs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A mig-parted `version: v1` document."""
    return {"version": "v1", "mig-configs": dict(configs)}


def render_named(gpu: GpuModel, name: str) -> dict[str, Any]:
    """The v1 document holding one config for `gpu`: a named one or a custom `P=N,...` layout."""
    resolved = resolve_config(gpu, name)
    return document({resolved.name: config_entries(gpu, [resolved.layout])})


def dump(doc: Mapping[str, Any]) -> str:
    """YAML text with mig-parted's key order kept."""
    return yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False)
