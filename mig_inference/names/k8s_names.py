"""Names of the Kubernetes objects the program creates outside any one namespace."""

from __future__ import annotations

import re

from mig_inference.names.digest import short_hash

_INVALID = re.compile(r"[^a-z0-9-]+")
_MAX_LENGTH = 63


def stack_scoped(stack: str, what: str) -> str:
    """`mig-inference-<stack>-<what>`: a cluster-scoped object's name, unique per stack, so two
    stacks can share a cluster (a DNS label; long stack names are shortened with a hash)."""
    slug = _INVALID.sub("-", stack.lower()).strip("-") or "stack"
    name = f"mig-inference-{slug}-{what}"
    if len(name) <= _MAX_LENGTH:
        return name
    digest = short_hash(stack, 8)
    keep = _MAX_LENGTH - len(f"mig-inference--{digest}-{what}")
    return f"mig-inference-{slug[: max(keep, 1)].strip('-')}-{digest}-{what}"
