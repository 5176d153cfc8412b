"""NVIDIA MIG hardware catalog: GPU models, their profiles and placement rules.

The data lives in `mig/data/catalog.yaml`; this module gives it types and name resolution.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources

import yaml

from mig_inference.errors import MigError

RESOURCE_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Profile:
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
    def media_extensions(self) -> bool:
        """True for `+me` profiles, which own the GPU's media engines (one per GPU)."""
        return self.name.endswith("+me")

    @property
    def resource(self) -> str:
        """The extended resource the device plugin advertises under the `mixed` strategy."""
        return RESOURCE_PREFIX + self.name.replace("+", ".")

    def contains(self, other: Profile) -> bool:
        """True when this profile offers at least `other`'s compute and memory."""
        return self.compute >= other.compute and self.memory_mib >= other.memory_mib


@dataclass(frozen=True)
class GpuModel:
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
            f"{name!r} is not a MIG profile of {self.name}; allowed: {allowed}",
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


def _load_profiles(raw: list[dict[str, object]]) -> tuple[Profile, ...]:
    # Unknown sizes are estimated as memory slices x the smallest 1-slice profile's size: every
    # measured profile in the catalog is at least that large, so the estimate never overstates.
    one_slice = min(
        int(str(p["memory_mib"])) for p in raw if p["memory"] == 1 and p["memory_mib"] is not None
    )
    profiles = []
    for p in raw:
        memory = int(str(p["memory"]))
        measured = p["memory_mib"]
        profiles.append(
            Profile(
                name=str(p["name"]),
                compute=int(str(p["compute"])),
                memory=memory,
                memory_mib=int(str(measured)) if measured is not None else memory * one_slice,
                max_instances=int(str(p["max"])),
                starts=tuple(int(s) for s in p["starts"]),  # type: ignore[attr-defined]
                memory_estimated=measured is None,
                unconfirmed=tuple(str(u) for u in p.get("unconfirmed", [])),  # type: ignore[attr-defined]
            )
        )
    return tuple(profiles)


@dataclass(frozen=True)
class Catalog:
    """Every GPU model the project knows, with name resolution."""

    gpus: tuple[GpuModel, ...]
    """MIG-capable models."""
    sources: dict[str, str]
    whole_gpus: tuple[GpuModel, ...] = ()
    """Models without MIG (shared whole, or one per pod)."""

    @property
    def every_gpu(self) -> tuple[GpuModel, ...]:
        return self.gpus + self.whole_gpus

    def names(self) -> list[str]:
        return [g.name for g in self.every_gpu]

    def gpu(self, name: str) -> GpuModel:
        """Resolve a catalog name or alias, case-insensitively (`h100`, `nvidia-h100-80gb`...)."""
        wanted = _normalize(str(name))
        for candidate in (wanted, wanted.removeprefix("nvidia-")):
            for gpu in self.every_gpu:
                keys = {_normalize(gpu.name), *(_normalize(a) for a in gpu.aliases)}
                if candidate in keys:
                    return gpu
        raise MigError(
            f"unknown GPU {name!r}; known models: {', '.join(self.names())}",
            value=name,
            allowed=self.names(),
        )


@cache
def load_catalog() -> Catalog:
    """The catalog shipped in `mig/data/catalog.yaml` (parsed once per process)."""
    text = (
        resources.files("mig_inference").joinpath("data/catalog.yaml").read_text(encoding="utf-8")
    )
    data = yaml.safe_load(text)
    gpus = []
    for name, raw in data["gpus"].items():
        gpus.append(
            GpuModel(
                name=name,
                memory_gib=int(raw["memory_gib"]),
                compute_slices=int(raw["compute_slices"]),
                memory_slices=int(raw["memory_slices"]),
                max_instances=int(raw["max_instances"]),
                pci_device_ids=tuple(raw["pci_device_ids"]),
                profiles=_load_profiles(raw["profiles"]),
                aliases=tuple(raw.get("aliases", [])),
                sources=tuple(raw.get("sources", [])),
                placements_confirmed=raw["placements"] == "confirmed",
                balanced=tuple((str(k), int(v)) for k, v in (raw.get("balanced") or {}).items()),
                notes=tuple(raw.get("notes", [])),
            )
        )
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
    return Catalog(gpus=tuple(gpus), sources=dict(data["sources"]), whole_gpus=whole)


def resolve_gpu(name: str) -> GpuModel:
    """Shorthand for `load_catalog().gpu(name)`."""
    return load_catalog().gpu(name)
