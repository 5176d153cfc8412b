"""NVIDIA MIG hardware catalog: GPU models, their profiles and placement rules.

The data lives in `mig_inference/data/catalog.yaml` (the sources, the GPUs without MIG, and the
list of MIG models) and `mig_inference/data/gpus/<model>.yaml` (each MIG model); this module
gives it types and name resolution. A model's file is parsed when the model is first asked
for: a command that names one GPU reads one file, not the whole catalog.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, cached_property
from typing import Any

import yaml
from msgspec import Struct

from mig_inference.errors import MigError, shown
from mig_inference.installation import package_text

RESOURCE_PREFIX = "nvidia.com/mig-"
# Profile name suffixes (go-nvlib's MIG profile attributes, vendored by the k8s-device-plugin):
# `+me` one instance may hold the media extensions, `+me.all` all of the GPU's media engines,
# `-me` none of them, `+gfx` graphics APIs.
MEDIA_EXTENSIONS = "+me"
ALL_MEDIA_ENGINES = "+me.all"
NO_MEDIA_ENGINES = "-me"
# Usable memory is a multiple of 1/16 GiB (the catalog's memory_mib); estimates are floored to it.
_MIB_STEP = 64


class Profile(Struct, frozen=True):
    """One GPU-instance profile of one GPU model, e.g. `3g.40gb` on H100-80GB."""

    name: str
    """NVIDIA's profile name, e.g. `1g.10gb` or `1g.10gb+me`."""
    compute: int
    """Compute slices taken (the N of `Ng`)."""
    memory: int
    """Memory slices occupied: the length of the contiguous run it takes."""
    memory_mib: int
    """Usable device memory in MiB (estimated when `memory_estimated`)."""
    max_instances: int
    """How many instances of this profile fit on one GPU."""
    starts: tuple[int, ...]
    """Memory-slice indexes at which an instance may start."""
    memory_estimated: bool = False
    """True when the catalog has no measured size and `memory_mib` is a conservative estimate."""
    unconfirmed: tuple[str, ...] = ()
    """Catalog fields that no citable source confirmed."""

    @property
    def variant(self) -> str:
        """The suffix after the size (`+me`, `+me.all`, `-me`, `+gfx`), empty for a plain profile.

        Variants share their plain profile's slices; the planner uses them only when asked to."""
        plain = self.name.partition("+")[0].partition("-")[0]
        return self.name[len(plain) :]

    @property
    def media_extensions(self) -> bool:
        """True for `+me` and `+me.all` profiles: they hold the GPU's one set of media extensions
        (the OFA), so at most one such instance fits a GPU."""
        return self.variant in (MEDIA_EXTENSIONS, ALL_MEDIA_ENGINES)

    @property
    def all_media_engines(self) -> bool:
        """True for `+me.all`: every decoder, encoder, JPEG and OFA engine of the GPU."""
        return self.variant == ALL_MEDIA_ENGINES

    @property
    def no_media_engines(self) -> bool:
        """True for `-me`: no decoder, encoder, JPEG or OFA engine."""
        return self.variant == NO_MEDIA_ENGINES

    @property
    def resource(self) -> str:
        """The extended resource the device plugin advertises under the `mixed` strategy."""
        return RESOURCE_PREFIX + self.name.replace("+", ".")

    def contains(self, other: Profile) -> bool:
        """True when this profile offers at least `other`'s compute and memory."""
        return self.compute >= other.compute and self.memory_mib >= other.memory_mib


class GpuModel(Struct, frozen=True, dict=True):
    """A MIG-capable GPU model and its profiles."""

    name: str
    """Catalog name, e.g. `H100-80GB`."""
    memory_gib: int
    """Nominal device memory."""
    compute_slices: int
    """Compute slices of the whole GPU (7 on A100/H100-class GPUs, 4 on A30)."""
    memory_slices: int
    """Memory slices of the whole GPU (8 on A100/H100-class GPUs, 4 on A30)."""
    max_instances: int
    """Most GPU instances at once."""
    pci_device_ids: tuple[str, ...]
    """PCI device IDs as mig-parted's `device-filter` writes them (`0x233010DE`)."""
    profiles: tuple[Profile, ...]
    """Profiles, smallest first as NVIDIA lists them."""
    aliases: tuple[str, ...]
    """Other names that resolve to this model (GKE accelerator, GFD product label, nvidia-smi)."""
    sources: tuple[str, ...]
    """Keys of the catalog's source list that back this model's values."""
    placements_confirmed: bool
    """False when the placement table is assumed from the A100/H100 layout."""
    balanced: tuple[tuple[str, int], ...] = ()
    """Content of NVIDIA's `all-balanced` config for this model (empty when NVIDIA has none)."""
    notes: tuple[str, ...] = ()
    """Caveats recorded in the catalog."""
    usable_mib: int = 0
    """Usable memory of the whole GPU (GPUs without MIG; MIG GPUs use their full profile)."""
    unconfirmed: tuple[str, ...] = ()
    """Model-level fields no citable source confirmed."""
    placements_note: str = ""
    """Where the placement table comes from (observed `-lgipp`, or how it was derived)."""
    estimate_note: str = ""
    """How the sizes of profiles without a measured size were estimated (empty when none are)."""

    @property
    def mig_capable(self) -> bool:
        return bool(self.profiles)

    @property
    def whole_gpu_mib(self) -> int:
        """Usable memory of the GPU with MIG off."""
        return self.full_profile.memory_mib if self.profiles else self.usable_mib

    @cached_property
    def _by_name(self) -> dict[str, Profile]:
        names: dict[str, Profile] = {}
        for profile in self.profiles:
            names[profile.name.lower()] = profile
            names[profile.name.lower().replace("+", ".")] = profile
        return names

    def profile(self, name: str) -> Profile:
        """The profile called `name` (also accepts the resource spelling `1g.10gb.me`)."""
        found = self._by_name.get(name)
        if found is not None:
            return found
        wanted = str(name).strip().lower().removeprefix(RESOURCE_PREFIX).removeprefix("mig-")
        found = self._by_name.get(wanted)
        if found is not None:
            return found
        if not self.profiles:
            raise MigError(f"{self.name} has no MIG profiles", value=name)
        allowed = ", ".join(p.name for p in self.profiles)
        raise MigError(
            f"{shown(name)} is not a MIG profile of {self.name}; allowed: {allowed}",
            value=name,
            allowed=[p.name for p in self.profiles],
        )

    def has_profile(self, name: str) -> bool:
        try:
            self.profile(name)
        except MigError:
            return False
        return True

    @property
    def full_profile(self) -> Profile:
        """The profile that takes the whole GPU (`7g.80gb` on H100-80GB); MIG GPUs only."""
        if not self.profiles:
            raise MigError(f"{self.name} has no MIG", value=self.name)
        return max(self.profiles, key=lambda p: (p.memory, p.compute))

    @property
    def estimated_profiles(self) -> tuple[Profile, ...]:
        return tuple(p for p in self.profiles if p.memory_estimated)


def _normalize(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.strip().lower()).strip("-")


def _full_nominal_gb(raw: list[dict[str, object]]) -> int:
    """The GB in the name of the profile taking the whole GPU (`7g.269gb` -> 269)."""
    full = max(raw, key=lambda p: (int(str(p["memory"])), int(str(p["compute"]))))
    found = re.match(r"\d+g\.(\d+)gb", str(full["name"]))
    if found is None:
        raise ValueError(f"cannot read a size from profile name {full['name']!r}")
    return int(found.group(1))


def _measured_mib_per_slice(raw: list[dict[str, object]]) -> float | None:
    """MiB per memory slice of the smallest measured profiles (those taking the fewest slices)."""
    measured = [p for p in raw if p["memory_mib"] is not None]
    if not measured:
        return None
    fewest = min(int(str(p["memory"])) for p in measured)
    return min(
        int(str(p["memory_mib"])) / fewest for p in measured if int(str(p["memory"])) == fewest
    )


def _estimate_per_slice(
    name: str, raw_model: dict[str, Any], raw_of: Callable[[str], dict[str, Any]]
) -> tuple[float, str]:
    """MiB per memory slice for profiles with no measured size, and how it was obtained.

    With a measured profile: the smallest one's MiB per slice (every measured profile in the
    catalog holds at least that much per slice, so the estimate never overstates). With none
    (`estimate_from` siblings): each sibling's MiB per slice scaled by the ratio of the two GPUs'
    full-profile sizes (`7g.269gb` / `7g.180gb`), the lowest result kept.
    """
    raw = raw_model["profiles"]
    assert isinstance(raw, list)
    own = _measured_mib_per_slice(raw)
    if own is not None:
        return own, "memory slices x the MiB per slice of its smallest measured profile"
    siblings = raw_model.get("estimate_from") or []
    assert isinstance(siblings, list)
    if not siblings:
        raise ValueError(f"{name}: no measured profile size and no estimate_from siblings")
    candidates = []
    for sibling in siblings:
        other = raw_of(str(sibling))["profiles"]
        assert isinstance(other, list)
        per_slice = _measured_mib_per_slice(other)
        if per_slice is None:
            raise ValueError(f"{name}: estimate_from {sibling} has no measured profile size")
        ratio = _full_nominal_gb(raw) / _full_nominal_gb(other)
        candidates.append((per_slice * ratio, str(sibling)))
    per_slice, sibling = min(candidates)
    floored = per_slice // _MIB_STEP * _MIB_STEP
    return floored, (
        f"no profile size measured: memory slices x {floored:,.0f} MiB, {sibling}'s smallest "
        f"measured slice scaled by the ratio of the full profiles' sizes (lowest of "
        f"{', '.join(str(s) for s in siblings)})"
    )


def _load_profiles(raw: list[dict[str, object]], per_slice: float) -> tuple[Profile, ...]:
    profiles = []
    for p in raw:
        memory = int(str(p["memory"]))
        measured = p["memory_mib"]
        estimate = int(memory * per_slice) // _MIB_STEP * _MIB_STEP
        profiles.append(
            Profile(
                name=str(p["name"]),
                compute=int(str(p["compute"])),
                memory=memory,
                memory_mib=int(str(measured)) if measured is not None else estimate,
                max_instances=int(str(p["max"])),
                starts=tuple(int(s) for s in p["starts"]),  # type: ignore[attr-defined]
                memory_estimated=measured is None,
                unconfirmed=tuple(str(u) for u in p.get("unconfirmed", [])),  # type: ignore[attr-defined]
            )
        )
    return tuple(profiles)


class Catalog(Struct, frozen=True, dict=True):
    """Every GPU model the project knows, with name resolution. A MIG model is built from its
    file when first asked for (`gpu`), every one of them for `gpus`."""

    mig_models: tuple[str, ...]
    """The MIG-capable models' names, in the catalog's order."""
    sources: dict[str, str]
    whole_gpus: tuple[GpuModel, ...] = ()
    """Models without MIG (shared whole, or one per pod)."""

    @cached_property
    def gpus(self) -> tuple[GpuModel, ...]:
        """The MIG-capable models."""
        return tuple(_mig_model(name) for name in self.mig_models)

    @property
    def every_gpu(self) -> tuple[GpuModel, ...]:
        return self.gpus + self.whole_gpus

    def names(self) -> list[str]:
        return [*self.mig_models, *(g.name for g in self.whole_gpus)]

    def gpu(self, name: str) -> GpuModel:
        """Resolve a catalog name or alias, case-insensitively (`h100`, `nvidia-h100-80gb`...).
        A model's own name is found without reading the other models' files: no alias is
        another model's name (a test keeps it so), so the answer is the one a search of every
        model's names and aliases gives."""
        wanted = _normalize(str(name))
        for model in self.mig_models:
            if _normalize(model) == wanted:
                return _mig_model(model)
        for gpu in self.whole_gpus:
            if _normalize(gpu.name) == wanted:
                return gpu
        for candidate in (wanted, wanted.removeprefix("nvidia-")):
            for gpu in self.every_gpu:
                keys = {_normalize(gpu.name), *(_normalize(a) for a in gpu.aliases)}
                if candidate in keys:
                    return gpu
        raise MigError(
            f"unknown GPU {shown(name)}; known models: {', '.join(self.names())}",
            value=name,
            allowed=self.names(),
        )


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: the same resolvers as the pure-Python
one (PyYAML's, YAML 1.1), which read these files exactly as the stack-file reader's yaml.v3
rules do (a test compares all three), about seven times faster; the catalog is read by every
verb."""

INDEX = "data/catalog.yaml"


def model_file(name: str) -> str:
    """The package's file of one MIG model."""
    return f"data/gpus/{name}.yaml"


@cache
def _index() -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(package_text(INDEX), Loader=SAFE_LOADER)
    return data


@cache
def _raw_model(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(package_text(model_file(name)), Loader=SAFE_LOADER)
    return data


def catalog_document() -> dict[str, Any]:
    """The whole catalog as one mapping: `catalog.yaml` with each MIG model's file in place of
    its name under `gpus`."""
    index = _index()
    return {**index, "gpus": {name: _raw_model(name) for name in index["gpus"]}}


@cache
def _mig_model(name: str) -> GpuModel:
    raw = _raw_model(name)
    estimated = any(p["memory_mib"] is None for p in raw["profiles"])
    per_slice, how = _estimate_per_slice(name, raw, _raw_model) if estimated else (0.0, "")
    return GpuModel(
        name=name,
        memory_gib=int(raw["memory_gib"]),
        compute_slices=int(raw["compute_slices"]),
        memory_slices=int(raw["memory_slices"]),
        max_instances=int(raw["max_instances"]),
        pci_device_ids=tuple(raw["pci_device_ids"]),
        profiles=_load_profiles(raw["profiles"], per_slice),
        aliases=tuple(raw.get("aliases", [])),
        sources=tuple(raw.get("sources", [])),
        placements_confirmed=raw["placements"] == "confirmed",
        balanced=tuple((str(k), int(v)) for k, v in (raw.get("balanced") or {}).items()),
        notes=tuple(raw.get("notes", [])),
        unconfirmed=tuple(raw.get("unconfirmed", [])),
        placements_note=str(raw.get("placements_note", "")),
        estimate_note=how,
    )


@cache
def load_catalog() -> Catalog:
    """The catalog shipped in the package (its index parsed once per process)."""
    data = _index()
    whole = tuple(
        GpuModel(
            name=name,
            memory_gib=int(raw["memory_gib"]),
            compute_slices=1,
            memory_slices=1,
            max_instances=0,
            pci_device_ids=tuple(raw["pci_device_ids"]),
            profiles=(),
            aliases=tuple(raw.get("aliases", [])),
            sources=tuple(raw.get("sources", [])),
            placements_confirmed=True,
            usable_mib=int(raw["memory_mib"]),
            unconfirmed=tuple(raw.get("unconfirmed", [])),
        )
        for name, raw in (data.get("whole_gpus") or {}).items()
    )
    return Catalog(
        mig_models=tuple(str(name) for name in data["gpus"]),
        sources=dict(data["sources"]),
        whole_gpus=whole,
    )


def resolve_gpu(name: str) -> GpuModel:
    """Shorthand for `load_catalog().gpu(name)`."""
    return load_catalog().gpu(name)
