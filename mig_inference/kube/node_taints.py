"""Taints on nodes the project does not own (`existing` clusters).

A node's `spec.taints` is an atomic list for server-side apply: whoever applies it sets all of
it. So the project reads the node's live taints, keeps every taint of other owners, replaces its
own, and records which keys are its own in an annotation, so a taint removed from the stack file
is removed from the node too, and a taint someone else added stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

TAINT_KEYS_ANNOTATION = "mig-inference.io/taint-keys"
"""Comma-separated keys of the taints this project set on the node."""


def own_taint_keys(annotations: Mapping[str, str] | None) -> set[str]:
    value = (annotations or {}).get(TAINT_KEYS_ANNOTATION, "")
    return {key for key in value.split(",") if key}


def merged_taints(
    live: Iterable[Mapping[str, str | None]],
    ours: Sequence[tuple[str, str, str]],
    previously_ours: set[str],
) -> list[dict[str, str]]:
    """The node's taints once ours are applied: other owners' taints first, in their order,
    then ours (key, value, effect in Kubernetes spelling; an empty value is left out)."""
    replaced = {(key, effect) for key, _value, effect in ours}
    kept = [
        {k: str(v) for k, v in taint.items() if v not in (None, "") and k != "timeAdded"}
        for taint in live
        if taint.get("key") not in previously_ours
        and (taint.get("key"), taint.get("effect")) not in replaced
    ]
    mine = [
        {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
        for key, value, effect in ours
    ]
    return kept + mine
