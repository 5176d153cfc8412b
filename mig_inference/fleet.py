"""Reading a fleet file (`workloads:` YAML) into planner workloads, with key-path errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mig_inference.errors import MigError
from mig_inference.packing import Workload
from mig_inference.sizing import gib_to_mib
from mig_inference.yamlfile import load_yaml

WORKLOAD_KEYS = ("name", "replicas", "profile", "memory_gib", "exact")


def workload_from_mapping(raw: Any, path: str) -> Workload:
    if not isinstance(raw, dict):
        raise MigError(f"must be a mapping with {', '.join(WORKLOAD_KEYS)}, got {raw!r}", path)
    name = raw.get("name")
    where = f"{path} ({name})" if isinstance(name, str) and name else path
    unknown = sorted(set(raw) - set(WORKLOAD_KEYS))
    if unknown:
        raise MigError(f"unknown key {unknown[0]!r}; allowed: {', '.join(WORKLOAD_KEYS)}", where)
    if not isinstance(name, str) or not name:
        raise MigError(f"must be a non-empty string, got {name!r}", f"{path}.name")
    memory = raw.get("memory_gib")
    exact = raw.get("exact", False)
    if not isinstance(exact, bool):
        raise MigError(f"must be true or false, got {exact!r}", f"{where}.exact")
    profile = raw.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise MigError(f"must be a profile name, got {profile!r}", f"{where}.profile")
    try:
        memory_mib = None if memory is None else gib_to_mib(memory)
        return Workload(
            name=name,
            replicas=raw.get("replicas"),  # type: ignore[arg-type]
            profile=profile,
            memory_mib=memory_mib,
            exact=exact,
        )
    except MigError as error:
        field = error.path or "memory_gib"
        raise MigError(error.message, f"{where}.{field}") from None


def load_fleet(path: str | Path) -> list[Workload]:
    """Parse a fleet file: `workloads: [{name, replicas, profile | memory_gib, exact}]`."""
    data = load_yaml(Path(path), "fleet file")
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        raise MigError("must be a mapping with a `workloads:` list", str(path))
    if not data["workloads"]:
        raise MigError("`workloads:` is empty", str(path))
    return [
        workload_from_mapping(raw, f"workloads[{index}]")
        for index, raw in enumerate(data["workloads"])
    ]
