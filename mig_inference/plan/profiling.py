"""Profiling runs: for each candidate profile of a service that asks for one, the engine as it
would run on that slice of the service's pool, measured by a Job."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from mig_inference.errors import MigError, MigErrors
from mig_inference.plan.model import ProfilingRun, ServicePlan
from mig_inference.plan.services import engine_sizing, replica_requests
from mig_inference.plan.sharing import utilization
from mig_inference.spec import StackSpec, key_path


def profiling_runs(spec: StackSpec, services: Sequence[ServicePlan]) -> list[ProfilingRun]:
    """Every profiling run the stack asks for; MigErrors names every profile its service's pool
    does not offer, and every slice too small for the model."""
    problems: list[MigError] = []
    runs: list[ProfilingRun] = []
    for index, service in enumerate(spec.services):
        settings = service.profiling
        if settings is None:
            continue
        service_path = f"{key_path('services')}[{index}]"
        path = f"{service_path}.profiling.profiles"
        served = next((s for s in services if s.spec is service), None)
        if served is None:
            problems.append(MigError(
                "the service has no replica in the plan, so no pool to measure on",
                f"{key_path('services')}[{index}].profiling",
            ))  # fmt: skip
            continue
        offers = {o.profile: o for o in served.pool.offers}
        for rank, profile in enumerate(settings.profiles):
            offer = offers.get(profile)
            if offer is None or offer.shared_by > 1:
                problems.append(MigError(
                    f"pool {served.pool.name} offers no unshared {profile} to measure; it offers "
                    f"{', '.join(o.profile for o in served.pool.offers if o.shared_by == 1)}",
                    f"{path}[{rank}]", value=profile,
                ))  # fmt: skip
                continue
            try:
                fraction = utilization(offer, service.gpu_memory_utilization, service_path)
                sizing = engine_sizing(service, offer, fraction, service_path, f"{path}[{rank}]")
            except MigError as error:
                problems.append(error)
                continue
            cpu, memory, shm = replica_requests(served.pool, offer)
            engine = replace(
                served, offer=offer, replicas=1, sizing=sizing, cpu_millicores=cpu,
                memory_mib=memory, shm_mib=shm, memory_utilization=fraction,
            )  # fmt: skip
            runs.append(ProfilingRun(service.name, profile, engine, settings))
    if problems:
        raise MigErrors(problems)
    return runs
