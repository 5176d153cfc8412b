"""The layouts a deployed stack runs, as preferences for its next plan (`plan --deployed`).

The program cannot read what it deployed while it plans, so a `mig: auto` pool keeps its
layout through `migPrefer` in the stack file; `plan --deployed` fills it from the deployed plan
(`pulumi stack output --json`, whose `plan` lists each pool's layout per GPU) and prints the line
to pin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.gpus.layout import Layout
from mig_inference.spec import AUTO


def deployed_layouts(record: Mapping[str, Any]) -> dict[str, tuple[str, list[str]]]:
    """Per deployed pool with MIG: its GPU model and each GPU's layout in device order. A
    record from before `devices` lists each layout's GPUs one after the other."""
    found = {}
    for name, pool in (record.get("pools") or {}).items():
        per_gpu = (pool.get("layout") or {}).get("per_gpu") or []
        if not per_gpu or not all(entry.get("mig_enabled") for entry in per_gpu):
            continue
        try:
            gpu = resolve_gpu(str(pool.get("gpu")))
        except MigError:
            continue
        slots: dict[int, str] = {}
        index = 0
        for entry in per_gpu:
            layout = str(Layout.of(gpu, list(entry.get("profiles") or [])))
            devices = entry.get("devices") or list(range(index, index + int(entry["gpus"])))
            for device in devices:
                slots[int(device)] = layout
            index += int(entry["gpus"])
        found[str(name)] = (gpu.name, [slots[i] for i in sorted(slots)])
    return found


def with_deployed_layouts(
    values: Mapping[str, Any], record: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Stack-file values whose `mig: auto` pools prefer the layout the deployed plan runs (same
    GPU model), and the names of those pools."""
    deployed = deployed_layouts(record)
    pools = []
    preferred = []
    for pool in values.get("pools") or []:
        if isinstance(pool, dict) and pool.get("mig") == AUTO and pool.get("name") in deployed:
            gpu_name, layouts = deployed[pool["name"]]
            try:
                same_gpu = resolve_gpu(str(pool.get("gpu"))).name == gpu_name
            except MigError:
                same_gpu = False
            if same_gpu:
                pool = {**pool, "migPrefer": layouts}
                preferred.append(str(pool["name"]))
        pools.append(pool)
    return {**values, "pools": pools} if "pools" in values else dict(values), preferred
