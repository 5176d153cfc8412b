"""Planning part of a stack: without the pools and services that cannot be planned (a refused
value, a pool whose layout does not exist) and without what depends on them, so that the plan
still finds the errors of the rest, and none that only follows from what was left out.

A service depends on a pool left out when it names it, or names none while one is left out (it
might have gone there). A pool with `mig: auto` is sized for the services on it, so it depends
on a service left out that names it or names none. Errors of the part name their keys where
the stack file has them (`pools[i]` and `services[i]` at the file's positions).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.spec import AUTO, StackSpec, key_path
from mig_inference.spec.stack import LeftOut

NOTHING_LEFT_OUT = LeftOut()
_INDEXED = re.compile(rf"^(?P<head>{re.escape(key_path(''))}(?P<section>pools|services))\[(\d+)\]")


class Part(Struct, frozen=True):
    """A stack with pools and services left out, and the position each one kept had in the
    stack file."""

    spec: StackSpec
    pool_positions: tuple[int, ...]
    service_positions: tuple[int, ...]

    def placed(self, error: MigError) -> MigError:
        """An error of the part, named at its key in the stack file."""
        found = _INDEXED.match(error.path or "")
        if found is None or error.path is None:
            return error
        positions = self.pool_positions if found["section"] == "pools" else self.service_positions
        index = positions[int(found[3])]
        return error.relocated(f"{found['head']}[{index}]{error.path[found.end() :]}")


def cut(
    spec: StackSpec,
    left_out: LeftOut = NOTHING_LEFT_OUT,
    pools_out: Collection[int] = (),
    positions: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
) -> Part:
    """`spec` without its pools at `pools_out` and what depends on them or on `left_out` (what
    the stack file has and `spec` does not); `positions`: where the pools and services of
    `spec` stand in the stack file (by default, where they stand in `spec`)."""
    pool_positions, service_positions = positions or (
        tuple(range(len(spec.pools))),
        tuple(range(len(spec.services))),
    )
    out = set(pools_out)
    names_out = set(left_out.pool_names) | {spec.pools[i].name for i in out}
    services_out: set[int] = set()
    targets_out = list(left_out.service_pools)
    changed = True
    while changed:
        changed = False
        kept_names = {p.name for i, p in enumerate(spec.pools) if i not in out}
        for index, service in enumerate(spec.services):
            if index in services_out:
                continue
            wanted = service.pool
            if (
                (wanted is None and (names_out or left_out.unnamed_pool))
                or wanted in names_out
                or (wanted not in kept_names and left_out.unnamed_pool)
            ):
                services_out.add(index)
                targets_out.append(wanted)
                changed = True
        for index, pool in enumerate(spec.pools):
            targeted = any(target in (None, pool.name) for target in targets_out)
            if index not in out and pool.mig == AUTO and targeted:
                out.add(index)
                names_out.add(pool.name)
                changed = True
    pools = [i for i in range(len(spec.pools)) if i not in out]
    services = [i for i in range(len(spec.services)) if i not in services_out]
    return Part(
        replace(
            spec,
            pools=tuple(spec.pools[i] for i in pools),
            services=tuple(spec.services[i] for i in services),
        ),
        tuple(pool_positions[i] for i in pools),
        tuple(service_positions[i] for i in services),
    )
