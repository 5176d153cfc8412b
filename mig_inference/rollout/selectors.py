"""Indexes that answer a label selector's questions without scanning every object: which
objects a `matchLabels` selector can select (`LabelIndex`), and which selectors can select an
object's labels (`SelectorIndex`). Both give candidates only; the caller checks each one as
it did before (namespace and every selector label), so an answer is the scan's answer.

A simulated change of a stack of 1,000 services matched every PodDisruptionBudget against
every Deployment (a million checks) when both were indexed by nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Generic, TypeVar

Pair = tuple[Any, str, Any]
"""(namespace, label key, label value)."""
K = TypeVar("K", bound=Hashable)


class LabelIndex(Generic[K]):
    """Keys of labelled objects (Deployments' pod labels) by namespace and by each label."""

    def __init__(self) -> None:
        self._in_namespace: dict[Any, dict[K, None]] = {}
        self._with_pair: dict[Pair, dict[K, None]] = {}
        self._entries: dict[K, tuple[Any, list[Pair]]] = {}

    def put(self, key: K, namespace: Any, labels: Mapping[str, Any]) -> None:
        """The object `key` is now in `namespace` with `labels` (replacing what it was)."""
        self.discard(key)
        pairs = [(namespace, name, value) for name, value in labels.items()]
        self._in_namespace.setdefault(namespace, {})[key] = None
        for pair in pairs:
            self._with_pair.setdefault(pair, {})[key] = None
        self._entries[key] = (namespace, pairs)

    def discard(self, key: K) -> None:
        namespace, pairs = self._entries.pop(key, (None, []))
        self._in_namespace.get(namespace, {}).pop(key, None)
        for pair in pairs:
            self._with_pair.get(pair, {}).pop(key, None)

    def candidates(self, namespace: Any, selector: Mapping[str, Any]) -> list[K]:
        """The objects in `namespace` that have at least the rarest of the selector's labels
        (every object of the namespace for an empty selector)."""
        if not selector:
            return list(self._in_namespace.get(namespace, {}))
        rarest: dict[K, None] | None = None
        for name, value in selector.items():
            bucket = self._with_pair.get((namespace, name, value), {})
            if rarest is None or len(bucket) < len(rarest):
                rarest = bucket
        return list(rarest or {})


class SelectorIndex(Generic[K]):
    """Keys of selectors (PodDisruptionBudgets' matchLabels) by namespace and by each label they
    require, in the order their keys were first put (as a dict keeps its keys: a key put again
    keeps its place, a key discarded and put again goes last)."""

    def __init__(self) -> None:
        self._position: dict[K, int] = {}
        self._next = 0
        self._unselective: dict[Any, dict[K, None]] = {}
        self._requiring: dict[Pair, dict[K, None]] = {}
        self._entries: dict[K, tuple[Any, list[Pair]]] = {}

    def put(self, key: K, namespace: Any, selector: Mapping[str, Any]) -> None:
        if key not in self._position:
            self._position[key] = self._next
            self._next += 1
        self._unindex(key)
        pairs = [(namespace, name, value) for name, value in selector.items()]
        if not pairs:
            self._unselective.setdefault(namespace, {})[key] = None
        for pair in pairs:
            self._requiring.setdefault(pair, {})[key] = None
        self._entries[key] = (namespace, pairs)

    def discard(self, key: K) -> None:
        self._unindex(key)
        self._position.pop(key, None)

    def _unindex(self, key: K) -> None:
        namespace, pairs = self._entries.pop(key, (None, []))
        self._unselective.get(namespace, {}).pop(key, None)
        for pair in pairs:
            self._requiring.get(pair, {}).pop(key, None)

    def selecting(self, namespace: Any, labels: Mapping[str, Any]) -> list[K]:
        """The selectors of `namespace` that require none of its labels or one of `labels`, in
        their order."""
        found = dict(self._unselective.get(namespace, {}))
        for name, value in labels.items():
            found.update(self._requiring.get((namespace, name, value), {}))
        return sorted(found, key=self._position.__getitem__)
