"""What the planner packs: workloads (replicas of one model, or a demand in requests per
second), the profiles that may serve each, and the refusals of fleets it will not plan."""

from __future__ import annotations

import math
from collections.abc import Sequence

from msgspec import Struct

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile


class Workload(Struct, frozen=True):
    """Replicas of one model, each needing one slice."""

    name: str
    """Workload name, unique in the fleet."""
    replicas: int
    """Replicas to place (one slice each)."""
    profile: str | None = None
    """A fixed slice size; a larger profile containing it may serve unless `exact`."""
    memory_mib: float | None = None
    """Memory need of one replica; any profile whose usable memory holds it may serve."""
    exact: bool = False
    """With `profile`: only that profile, never a larger one."""
    requests_per_second: float | None = None
    """Demand to meet instead of a replica count (`replicas` is then 0)."""
    throughput: tuple[tuple[str, float], ...] = ()
    """Requests per second one replica serves on each profile it may use (demand-driven)."""

    @property
    def demand_driven(self) -> bool:
        return self.requests_per_second is not None

    @property
    def fewest_replicas(self) -> int:
        """Its replica count, or the fewest replicas that can serve its demand."""
        if not self.demand_driven:
            return self.replicas
        fastest = max((rate for _, rate in self.throughput), default=0.0)
        return math.ceil(float(self.requests_per_second or 0) / fastest) if fastest > 0 else 0

    def throughput_on(self, profile: str) -> float:
        return dict(self.throughput).get(profile, 0.0)

    def __post_init__(self) -> None:
        if not self.name:
            raise MigError("a workload needs a name")
        if self.demand_driven:
            self._check_demand()
            return
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise MigError(
                f"replicas must be a whole number > 0, got {self.replicas!r}", "replicas"
            )
        if self.replicas <= 0:
            raise MigError(f"replicas must be > 0, got {self.replicas}", "replicas")
        if (self.profile is None) == (self.memory_mib is None):
            raise MigError("give exactly one of profile or memory_gib", "profile")
        if self.memory_mib is not None and not self.memory_mib > 0:
            raise MigError(f"memory must be > 0, got {self.memory_mib!r}", "memory_gib")
        if self.throughput:
            raise MigError("throughput only applies with requests_per_second", "throughput")

    def _check_demand(self) -> None:
        demand = self.requests_per_second
        if (
            isinstance(demand, bool)
            or not isinstance(demand, int | float)
            or not math.isfinite(demand)
            or not demand > 0
        ):
            raise MigError(f"must be a number > 0, got {demand!r}", "requests_per_second")
        if self.replicas:
            raise MigError(
                "give replicas or requests_per_second, not both: the planner chooses the replicas "
                "that meet a demand",
                "replicas",
            )
        if self.profile is not None or self.memory_mib is not None:
            raise MigError(
                "a demand-driven workload runs on the profiles of its throughput table; give no "
                "profile or memory_gib",
                "profile" if self.profile is not None else "memory_gib",
            )
        serving = [(name, rate) for name, rate in self.throughput if rate > 0]
        if not serving:
            raise MigError(
                "no profile serves this workload within its latency target: the throughput table "
                "is empty (or every rate is 0)",
                "throughput",
            )


def allowed_profiles(gpu: GpuModel, workload: Workload) -> list[Profile]:
    """Profiles that may serve one replica of `workload`, smallest first."""
    if workload.demand_driven:
        serving = []
        for name, rate in workload.throughput:
            try:
                profile = gpu.profile(name)
            except MigError as error:
                raise MigError(error.message, f"throughput.{name}") from None
            if rate > 0:
                serving.append(profile)
        return sorted(serving, key=lambda p: (p.memory_mib, p.memory, p.compute))
    plain = [p for p in gpu.profiles if not p.variant]
    if workload.profile is not None:
        try:
            wanted = gpu.profile(workload.profile)
        except MigError as error:
            raise MigError(error.message, "profile") from None
        if workload.exact or wanted.variant:
            return [wanted]
        return sorted(
            [wanted, *(p for p in plain if p != wanted and p.contains(wanted))],
            key=lambda p: (p.memory_mib, p.memory, p.compute),
        )
    assert workload.memory_mib is not None
    fitting = [p for p in plain if p.memory_mib >= workload.memory_mib]
    if not fitting:
        largest = max(plain, key=lambda p: p.memory_mib)
        raise MigError(
            f"needs {workload.memory_mib:,.0f} MiB, more than any MIG slice of {gpu.name} "
            f"(the largest, {largest.name}, has {largest.memory_mib:,} MiB)",
            "memory_gib",
        )
    return sorted(fitting, key=lambda p: (p.memory_mib, p.memory, p.compute))


def need_mib(workload: Workload, gpu: GpuModel) -> float:
    if workload.memory_mib is not None:
        return workload.memory_mib
    if workload.demand_driven:
        return float(min(allowed_profiles(gpu, workload), key=lambda p: p.memory_mib).memory_mib)
    assert workload.profile is not None
    return float(gpu.profile(workload.profile).memory_mib)


def check_unique_names(workloads: Sequence[Workload]) -> None:
    seen: set[str] = set()
    for index, workload in enumerate(workloads):
        if workload.name in seen:
            raise MigError(f"duplicate workload name {workload.name!r}", f"workloads[{index}].name")
        seen.add(workload.name)


MAX_REPLICAS = 1_000_000
"""Most replicas one plan places. A plan lists every GPU and every replica's slice (`pack --json`
peaks at about 2.5 KiB per replica: some 2.5 GB at this limit), so the work is bounded here; a
Kubernetes cluster runs at most 150,000 pods, far below it."""


def check_fleet_size(workloads: Sequence[Workload]) -> None:
    """Refuse a fleet of more than MAX_REPLICAS replicas, naming the workload that alone
    exceeds it, else the total."""
    limit = f"more than the planner's limit of {MAX_REPLICAS:,} (a plan lists every replica)"
    for index, workload in enumerate(workloads):
        if workload.fewest_replicas > MAX_REPLICAS:
            key = "requests_per_second" if workload.demand_driven else "replicas"
            raise MigError(
                f"{workload.fewest_replicas:,} replicas, {limit}",
                f"workloads[{index}] ({workload.name}).{key}",
                value=workload.fewest_replicas,
            )
    total = sum(w.fewest_replicas for w in workloads)
    if total > MAX_REPLICAS:
        raise MigError(f"{total:,} replicas in total, {limit}", "workloads", value=total)
