"""Reading a fleet file (`workloads:` YAML) into planner workloads, with key-path errors."""

from __future__ import annotations

import math
from typing import Any

from mig_inference.errors import MigError
from mig_inference.gpus.sizing import gib_to_mib
from mig_inference.solving.packing import Workload
from mig_inference.stackfile.yamlfile import FilePath, load_yaml

WORKLOAD_KEYS = (
    "name", "replicas", "profile", "memory_gib", "exact", "requests_per_second", "throughput",
)  # fmt: skip


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
    if exact and memory is not None:
        raise MigError(
            "exact only applies with profile (it keeps that profile, never a larger one); with "
            "memory_gib any slice that holds the need may serve: drop exact, or give a profile",
            f"{where}.exact",
        )
    profile = raw.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise MigError(f"must be a profile name, got {profile!r}", f"{where}.profile")
    demand = raw.get("requests_per_second")
    throughput = _throughput(raw.get("throughput"), f"{where}.throughput")
    try:
        memory_mib = None if memory is None else gib_to_mib(memory)
        return Workload(
            name=name,
            replicas=raw.get("replicas", 0 if demand is not None else None),  # type: ignore[arg-type]
            profile=profile,
            memory_mib=memory_mib,
            exact=exact,
            requests_per_second=demand,
            throughput=throughput,
        )
    except MigError as error:
        field = error.path or "memory_gib"
        raise MigError(error.message, f"{where}.{field}") from None


def _throughput(raw: Any, path: str) -> tuple[tuple[str, float], ...]:
    """`{profile: requests per second of one replica}`."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise MigError(f"must be a mapping of profile to requests per second, got {raw!r}", path)
    rates = []
    for profile, rate in raw.items():
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < math.inf:
            raise MigError(f"must be a number >= 0, got {rate!r}", f"{path}.{profile}")
        rates.append((str(profile), float(rate)))
    return tuple(rates)


def load_fleet(path: FilePath) -> list[Workload]:
    """Parse a fleet file: `workloads: [{name, replicas, profile | memory_gib, exact}]`, or a
    demand, `{name, requests_per_second, throughput: {profile: requests per second}}`."""
    data = load_yaml(path, "fleet file")
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), list):
        raise MigError("must be a mapping with a `workloads:` list", str(path))
    if not data["workloads"]:
        raise MigError("`workloads:` is empty", str(path))
    return [
        workload_from_mapping(raw, f"workloads[{index}]")
        for index, raw in enumerate(data["workloads"])
    ]


def fleet_document(workloads: list[Workload]) -> dict[str, Any]:
    """The fleet file `load_fleet` reads back as `workloads`: what the benchmark and tests hand
    to `pack` on the command line."""
    rows: list[dict[str, Any]] = []
    for w in workloads:
        row: dict[str, Any] = {"name": w.name}
        if w.demand_driven:
            row["requests_per_second"] = w.requests_per_second
            row["throughput"] = dict(w.throughput)
        else:
            row["replicas"] = w.replicas
            if w.profile is not None:
                row["profile"] = w.profile
                if w.exact:
                    row["exact"] = True
            else:
                assert w.memory_mib is not None
                row["memory_gib"] = w.memory_mib / 1024
        rows.append(row)
    return {"workloads": rows}
