"""What one version of the program registers: resources with their inputs and options, in the
order Pulumi registers them (a resource only registers once its dependencies finished)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from msgspec import Struct

Key = tuple[str, str]
"""(type token, name) of a resource: unique within one program."""


class Resource(Struct, frozen=True):
    type: str
    name: str
    inputs: Mapping[str, Any]
    custom: bool = True
    """False for a component (it only groups its children)."""
    parent: Key | None = None
    dependencies: tuple[Key, ...] = ()
    """`dependsOn`: the step waits until these (and every descendant of a component) finished."""
    protect: bool = False
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool | None = None
    """As the program set the option; None leaves it to the provider."""
    timeouts: tuple[str | None, str | None] | None = None
    """customTimeouts (create, update) as the program set them, e.g. "1800s"."""

    @property
    def key(self) -> Key:
        return (self.type, self.name)

    @property
    def package(self) -> str:
        return self.type.split(":", 1)[0]


class Program:
    """The resources of one program run, in registration order."""

    def __init__(self, resources: Mapping[Key, Resource] | None = None) -> None:
        self.resources: dict[Key, Resource] = {}
        self._children: dict[Key, list[Key]] = {}
        """Each parent's children, kept by `add` (`descendants` walks it)."""
        self._position: dict[Key, int] = {}
        """Each resource's place in registration order."""
        for resource in (resources or {}).values():
            self.add(resource)

    def __repr__(self) -> str:
        return f"Program({list(self.resources)!r})"

    def add(self, resource: Resource) -> None:
        if resource.key not in self.resources:
            self._position[resource.key] = len(self._position)
        elif (replaced := self.resources[resource.key].parent) is not None:
            self._children[replaced].remove(resource.key)
        self.resources[resource.key] = resource
        if resource.parent is not None:
            self._children.setdefault(resource.parent, []).append(resource.key)

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources.values())

    def __contains__(self, key: object) -> bool:
        return key in self.resources

    def __getitem__(self, key: Key) -> Resource:
        return self.resources[key]

    def of_type(self, type_token: str) -> list[Resource]:
        return [r for r in self if r.type == type_token]

    def ancestors(self, key: Key) -> list[Key]:
        """Parents from the resource's own up to the top (the stack itself excluded)."""
        found: list[Key] = []
        parent = self.resources[key].parent if key in self.resources else None
        while parent is not None and parent not in found:
            found.append(parent)
            parent = self.resources[parent].parent if parent in self.resources else None
        return found

    def descendants(self, key: Key) -> list[Key]:
        """Every resource with `key` among its ancestors, in registration order. Walked down the
        index of children, so it costs what it finds, not the whole program: `waits_for` asks
        it for every dependency of every step."""
        found: set[Key] = set()
        below = list(self._children.get(key, ()))
        while below:
            child = below.pop()
            if child not in found:
                found.add(child)
                below += self._children.get(child, ())
        return sorted(found, key=self._position.__getitem__)

    def urn(self, key: Key, stack: str, project: str) -> str:
        """The resource's URN: its type qualified by every ancestor's type, and its name."""
        types = [parent[0] for parent in reversed(self.ancestors(key))]
        qualified = "$".join([*types, key[0]])
        return f"urn:pulumi:{stack}::{project}::{qualified}::{key[1]}"

    def waits_for(self, key: Key) -> set[Key]:
        """Custom resources whose steps must finish before this one's starts: its dependsOn and
        its ancestors' (a resource registers only once its parent has, and a parent only once
        its own dependencies finished), a component standing for every resource under it."""
        found: set[Key] = set()
        dependencies = [
            dependency
            for each in (key, *self.ancestors(key))
            for dependency in self.resources[each].dependencies
        ]
        for dependency in dependencies:
            if dependency not in self.resources:
                continue
            if self.resources[dependency].custom:
                found.add(dependency)
            found.update(k for k in self.descendants(dependency) if self.resources[k].custom)
        return found
