"""A pool's capacity choice checked against its machine type, and where its nodes may be.

The machine table (mig_inference.clouds.MACHINES, facts from mig_inference.clouds.capacity) says
which choices a machine type is sold with and which disks it boots from; a choice the machine
lacks is refused at `capacity` (`spot: true` is `capacity: spot`), quoting the cloud's rule and
naming the machine's choices. OKE bare-metal GPU shapes are usually offered in one availability
domain: a pool of one must name it.
"""

from __future__ import annotations

from msgspec import Struct

from mig_inference.clouds import Cloud, MachineShape
from mig_inference.clouds.capacity import (
    CLOUD_CAPACITY,
    GKE_FLEX_START,
    OKE_BARE_METAL_PREFIX,
    Capacity,
    MachineFacts,
)
from mig_inference.errors import MigError, MigErrors
from mig_inference.spec import PoolSpec, StackSpec

OKE_SINGLE_DOMAIN_SOURCE = (
    "https://docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm "
    "(bare-metal GPU shapes are offered per availability domain, often in one; unconfirmed)"
)


class PoolCapacity(Struct, frozen=True):
    """What a pool's nodes are bought as, and what they boot from."""

    capacity: Capacity
    reservation: str | None
    boot_disk: str | None
    """The boot disk type the pool sets (None: the cloud's default)."""
    facts: MachineFacts | None
    """The machine's facts (None for a machine type the project does not know)."""


def check_capacity(
    spec: StackSpec, pool: PoolSpec, machine: MachineShape | None, path: str
) -> PoolCapacity:
    cloud = spec.cloud
    if cloud is Cloud.EXISTING or machine is None:
        given = pool.boot_disk_type if cloud is Cloud.GKE else None
        return PoolCapacity(pool.capacity, None, given, None)
    facts = machine.facts
    # The boot disk is checked apart from the capacity: a file wrong on both hears of both.
    problems = [*_boot_disk_problems(pool, machine, path)]
    try:
        _check_bought(spec, pool, machine, path)
    except MigError as error:
        problems.insert(0, error)
    if problems:
        raise problems[0] if len(problems) == 1 else MigErrors(problems)
    boot_disk = facts.boot_disks[0] if facts and cloud is Cloud.GKE else None
    if pool.boot_disk_type is not None:
        boot_disk = pool.boot_disk_type
    return PoolCapacity(pool.capacity, pool.reservation, boot_disk, facts)


def _check_bought(spec: StackSpec, pool: PoolSpec, machine: MachineShape, path: str) -> None:
    """The pool's capacity choice against what the machine is sold as."""
    cloud = spec.cloud
    facts = machine.facts
    choices = facts.capacity if facts else CLOUD_CAPACITY[cloud.value]
    if pool.capacity not in choices:
        allowed = [str(c) for c in choices]
        rule = f": {facts.capacity_rule}" if facts and facts.capacity_rule else ""
        source = ""
        if facts:
            doubt = ", unconfirmed here" if facts.is_unconfirmed("capacity") else ""
            source = f" ({facts.capacity_source}{doubt})"
        raise MigError(
            f"{machine.name} is not sold as {pool.capacity} capacity{rule}; its choices: "
            f"{', '.join(allowed)}{source}",
            f"{path}.{pool.capacity_key}",
            value=str(pool.capacity) if pool.capacity_key == "capacity" else True,
            allowed=allowed,
        )
    if pool.capacity is Capacity.FLEX_START and pool.nodes.fixed:
        raise MigError(
            "flex-start nodes come from GKE's cluster autoscaler (Dynamic Workload Scheduler): "
            f"give nodes as {{min, max}} ({GKE_FLEX_START})",
            f"{path}.nodes",
        )
    if cloud is Cloud.OKE and pool.capacity is Capacity.RESERVATION:
        domains = pool.zones or tuple(spec.cluster.get("availabilityDomains") or ())
        if len(domains) != 1:
            raise MigError(
                "an OCI capacity reservation holds capacity in one availability domain: give "
                f"the pool that one domain in zones (it would place nodes in {len(domains)})",
                f"{path}.zones",
                allowed=list(domains),
            )


def _boot_disk_problems(pool: PoolSpec, machine: MachineShape, path: str) -> list[MigError]:
    facts = machine.facts
    if pool.boot_disk_type is None or not facts or pool.boot_disk_type in facts.boot_disks:
        return []
    return [
        MigError(
            f"{machine.name} boots only from {', '.join(facts.boot_disks)} "
            f"({facts.boot_disk_source})",
            f"{path}.bootDiskType",
            value=pool.boot_disk_type,
            allowed=list(facts.boot_disks),
        )
    ]


def check_oke_domains(
    spec: StackSpec, pool: PoolSpec, machine: MachineShape | None, path: str
) -> None:
    """A bare-metal GPU pool without `zones` would spread over every availability domain of
    the cluster and fail for capacity in those where the shape is not offered."""
    if spec.cloud is not Cloud.OKE or machine is None or pool.zones:
        return
    if not machine.name.startswith(OKE_BARE_METAL_PREFIX):
        return
    domains = tuple(spec.cluster.get("availabilityDomains") or ())
    if len(domains) > 1:
        raise MigError(
            f"is required for {machine.name} when the cluster has {len(domains)} availability "
            f"domains ({', '.join(domains)}): bare-metal GPU shapes are usually offered in one, "
            f"and the pool would place nodes in each ({OKE_SINGLE_DOMAIN_SOURCE}); name the "
            "domain of your capacity",
            f"{path}.zones",
            allowed=list(domains),
        )
