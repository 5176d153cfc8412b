"""The steps `pulumi up` takes from one version of a program to the next, in Pulumi's order.

As the engine does (pulumi/pulumi `pkg/resource/deploy/step_generator.go`,
`deployment_executor.go`): `ignoreChanges` paths keep their old values; a change of a
`replaceOnChanges` path or of one the provider cannot update replaces the resource, any other
change updates it. A replacement creates the new resource first and deletes the old one in the
delete phase, unless it is delete-before-replace (the option, or the provider's choice when the
option is not set), which deletes the old one right away. Creates, updates and replacements run
as resources register, after what they depend on; every delete (removed resources, the old half
of a replacement) runs after the program finished, in reverse dependency order. A protected
resource is never replaced or deleted: Pulumi refuses, at preview.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any

from msgspec import Struct

from mig_inference.rollout.force_new import (
    SERVER_IMMUTABLE,
    SET_TYPED,
    force_new_paths,
    provider_deletes_first,
)
from mig_inference.rollout.resources import Key, Program, Resource


class Op(StrEnum):
    SAME = "same"
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"


class Step(Struct, frozen=True):
    op: Op
    key: Key
    old: Resource | None
    new: Resource | None
    changed: tuple[str, ...] = ()
    """Input paths whose values differ (after `ignoreChanges`)."""
    replaced_by: tuple[str, ...] = ()
    """The changed paths that force the replacement."""
    delete_first: bool = False
    """A delete-before-replace replacement: the old resource goes before the new one exists."""

    @property
    def resource(self) -> Resource:
        found = self.new or self.old
        assert found is not None
        return found


class Refusal(Struct, frozen=True):
    key: Key
    urn: str
    message: str
    way: str = ""
    """The way forward (empty: unprotect the resource, or undo the change)."""


class StepPlan(Struct):
    forward: list[Step]
    """Creates, updates, replacements and sames, in registration order."""
    deletes: list[Step]
    """The delete phase: removed resources and the old halves of replacements."""
    refusals: list[Refusal]

    def step(self, key: Key) -> Step | None:
        return next((s for s in self.forward if s.key == key), None)

    def changed(self) -> list[Step]:
        return [s for s in [*self.forward, *self.deletes] if s.op is not Op.SAME]


def leaf_paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a nested input as (path, value); lists index as `path[i]`."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from leaf_paths(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from leaf_paths(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def path_under(path: str, prefix: str) -> bool:
    """`path` is `prefix` or lies under it (a field or an item of it)."""
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def changed_paths(
    old: Mapping[str, Any], new: Mapping[str, Any], ignored: tuple[str, ...]
) -> list[str]:
    """Leaf paths whose values differ, leaving out ignored paths."""
    before, after = dict(leaf_paths(dict(old))), dict(leaf_paths(dict(new)))
    paths = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    return [p for p in paths if not any(path_under(p, i) for i in ignored)]


def as_sets(inputs: Mapping[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    """`inputs` with the lists at `paths` (dotted) in one canonical order, as a provider that
    holds them as sets compares them."""
    copied = dict(inputs)
    for path in paths:
        head, _, rest = path.partition(".")
        value = copied.get(head)
        if rest and isinstance(value, Mapping):
            copied[head] = as_sets(value, (rest,))
        elif not rest and isinstance(value, list):
            copied[head] = sorted(value, key=lambda item: json.dumps(item, sort_keys=True))
    return copied


def _diff(old: Resource, new: Resource) -> Step:
    if not new.custom:
        return Step(Op.SAME, new.key, old, new)
    sets = SET_TYPED.get(new.type, ())
    changed = changed_paths(
        as_sets(old.inputs, sets), as_sets(new.inputs, sets), new.ignore_changes
    )
    if not changed:
        return Step(Op.SAME, new.key, old, new)
    forcing = (*new.replace_on_changes, *force_new_paths(new.type))
    replaced_by = tuple(p for p in changed if any(path_under(p, f) for f in forcing))
    if not replaced_by:
        return Step(Op.UPDATE, new.key, old, new, tuple(changed))
    delete_first = (
        new.delete_before_replace
        if new.delete_before_replace is not None
        else provider_deletes_first(new.type, dict(old.inputs), dict(new.inputs))
    )
    return Step(Op.REPLACE, new.key, old, new, tuple(changed), replaced_by, delete_first)


def plan_steps(before: Program, after: Program, stack: str, project: str) -> StepPlan:
    """The steps from `before` (deployed) to `after`, and what Pulumi would refuse."""
    forward: list[Step] = []
    refusals: list[Refusal] = []
    for resource in after:
        old = before.resources.get(resource.key)
        step = (
            Step(Op.CREATE, resource.key, None, resource) if old is None else _diff(old, resource)
        )
        forward.append(step)
        # Unprotecting and replacing in one update is allowed: both must be protected.
        if step.op is Op.REPLACE and old is not None and old.protect and resource.protect:
            urn = before.urn(resource.key, stack, project)
            refusals.append(
                Refusal(
                    resource.key,
                    urn,
                    f"unable to replace resource {urn} as it is currently marked for protection "
                    f"({', '.join(step.replaced_by)} changed)",
                )
            )
        immutable = [
            p
            for p in step.changed
            if step.op is Op.UPDATE
            and any(path_under(p, f) for f in SERVER_IMMUTABLE.get(resource.type, ()))
        ]
        if immutable:
            urn = after.urn(resource.key, stack, project)
            name = (resource.inputs.get("metadata") or {}).get("name", resource.name)
            kind = resource.type.rsplit(":", 1)[-1]
            refusals.append(
                Refusal(
                    resource.key,
                    urn,
                    f"the API server refuses to update {kind} {name}: its "
                    f"{', '.join(SERVER_IMMUTABLE[resource.type])} is immutable "
                    f"({', '.join(immutable)} changed), and the preview's server-side dry run "
                    "fails",
                    f"replace it (the `replaceOnChanges` option on {urn})",
                )
            )
    replaced = {s.key for s in forward if s.op is Op.REPLACE and not s.delete_first}
    deletes = [
        Step(Op.DELETE, old.key, old, None)
        for old in reversed(list(before))
        if old.custom and (old.key not in after or old.key in replaced)
    ]
    for step in deletes:
        if step.key not in after and step.resource.protect:
            urn = before.urn(step.key, stack, project)
            refusals.append(
                Refusal(step.key, urn, f"resource {urn} cannot be deleted because it is protected")
            )
    return StepPlan(forward, deletes, refusals)
