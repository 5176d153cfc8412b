"""Throughput tables: requests per second one replica serves on each MIG profile, for planning
from demand. The project ships ParvaGPU's public A100-80GB measurements as a reference fleet."""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml
from msgspec import Struct

from mig_inference.gpus.catalog import SAFE_LOADER
from mig_inference.installation import package_text
from mig_inference.solving.packing import Workload

PARVAGPU = "data/throughput-parvagpu-a100-80gb.yaml"


class Scenario(Struct, frozen=True):
    """A demand scenario: workloads with their request rates and per-profile throughput."""

    name: str
    gpu: str
    workloads: tuple[Workload, ...]
    published_gpus: int | None
    """GPUs the source's own planner deployed it on, when it says for this sharing mode."""


@cache
def _parvagpu() -> dict[str, Any]:
    text = package_text(PARVAGPU)
    data: dict[str, Any] = yaml.load(text, Loader=SAFE_LOADER)
    return data


def parvagpu_scenarios(sharing: str = "single") -> list[Scenario]:
    """ParvaGPU's six SLO scenarios on A100-80GB. `sharing="single"` is one engine per slice
    (how this project deploys); `"mps"` lets up to five processes share a slice, as ParvaGPU's
    own deployments do."""
    data = _parvagpu()
    scenarios = []
    for name, models in data["scenarios"].items():
        workloads = tuple(
            Workload(
                model,
                0,
                requests_per_second=float(row["requests_per_second"]),
                throughput=tuple((profile, float(rate)) for profile, rate in row[sharing].items()),
            )
            for model, row in models.items()
        )
        # ParvaGPU's paper deployed every scenario with MPS: no count was published for one
        # process per instance (its built code's single-process counts are the bench's own).
        published = data["published_gpus"][name] if sharing == "mps" else None
        scenarios.append(Scenario(f"{name} ({sharing})", data["gpu"], workloads, published))
    return scenarios
