"""Arm pools (GB200, GB300): what every pod scheduled there needs.

GKE taints every Arm node `kubernetes.io/arch=arm64:NoSchedule` (GKE "Prepare an Arm workload
for deployment"): the pool's tolerations carry it, so engines, fill, verify and profiling Jobs
tolerate it. Every image they run needs a linux/arm64 build: a pinned image known to have none
is refused at the key that chose it; an image the project knows nothing about is a warning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mig_inference.clouds import MachineShape
from mig_inference.clouds.capacity import Arch
from mig_inference.errors import MigError
from mig_inference.names.labels import ARCH_LABEL
from mig_inference.plan.model import PoolPlan, ServicePlan
from mig_inference.spec import StackSpec, key_path
from mig_inference.versions import AMD64_ONLY_IMAGES, ARM64_IMAGES, ENGINE_IMAGES

ARM_TOLERATION: Mapping[str, str] = {
    "key": ARCH_LABEL,
    "operator": "Equal",
    "value": Arch.ARM64.value,
    "effect": "NoSchedule",
}
"""The toleration of GKE's Arm taint, as GKE writes it (`GKE_ARM`)."""


def arch_tolerations(machine: MachineShape | None) -> tuple[Mapping[str, str], ...]:
    """What a pod needs to land on the machine's nodes because of their architecture."""
    return (ARM_TOLERATION,) if machine is not None and machine.arch is Arch.ARM64 else ()


def check_arm_images(
    spec: StackSpec, services: Sequence[ServicePlan]
) -> tuple[list[MigError], list[str]]:
    """Services on Arm pools whose image has no arm64 build (errors at `image`, or `engine` for
    an engine's pinned image), and those whose image the project cannot vouch for (warnings)."""
    errors: list[MigError] = []
    warnings: list[str] = []
    for index, service in enumerate(spec.services):
        pools = {plan.pool.name: plan.pool for plan in services if plan.spec is service}
        arm = [pool for pool in pools.values() if _arm(pool)]
        if not arm:
            continue
        image = service.image or ENGINE_IMAGES.get(service.engine.value)
        where = f"{key_path('services')}[{index}].{'image' if service.image else 'engine'}"
        machine = arm[0].machine
        assert machine is not None and machine.facts is not None
        arch_source = machine.facts.arch_source
        if image in AMD64_ONLY_IMAGES:
            errors.append(
                MigError(
                    f"{image} has no arm64 build ({AMD64_ONLY_IMAGES[image]}), and pool "
                    f"{arm[0].name}'s {machine.name} nodes are Arm ({arch_source}); give an image "
                    "built for linux/arm64, or an engine whose pinned image is (vllm, triton)",
                    where,
                    value=image if service.image else service.engine.value,
                )
            )
        elif image not in ARM64_IMAGES:
            warnings.append(
                f"service {service.name}: pool {arm[0].name}'s nodes are Arm ({machine.name}); "
                f"the project does not know whether {image} has a linux/arm64 build: make sure "
                "it does, or its pods fail with an exec format error"
            )
    return errors, warnings


def _arm(pool: PoolPlan) -> bool:
    return pool.machine is not None and pool.machine.arch is Arch.ARM64
