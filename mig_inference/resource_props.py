"""Reading resource properties as the Pulumi engine sends them to a policy: nested mappings and
lists of any shape, where a missing or mistyped value reads as empty."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def mapping(value: object) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def sequence(value: object) -> Sequence[Any]:
    """`value` if it is a list (not a string), else an empty one."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return ()


def dig(value: object, path: Iterable[str]) -> object:
    """The value at `path` inside nested mappings; None where the path ends early."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
