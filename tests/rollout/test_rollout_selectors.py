"""The simulator's selector indexes answer as the scans they replaced: every object a selector
selects is among the index's candidates, and the first selecting budget is the first in the
order the budgets were put (as a dict keeps its keys)."""

from __future__ import annotations

import random

import pytest

from mig_inference.rollout.selectors import LabelIndex, SelectorIndex

NAMESPACES = ["inference", "other"]
LABELS = {"app": ["a", "b", "c"], "pool": ["p", "q"], "tier": ["gpu"]}


def labels(rng: random.Random) -> dict[str, str]:
    return {k: rng.choice(v) for k, v in LABELS.items() if rng.random() < 0.7}


def selects(selector: dict[str, str], found: dict[str, str]) -> bool:
    return all(found.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("seed", range(20))
def test_the_label_index_finds_every_object_a_selector_selects(seed: int) -> None:
    rng = random.Random(seed)
    index: LabelIndex[int] = LabelIndex()
    objects: dict[int, tuple[str, dict[str, str]]] = {}
    for step in range(200):
        key = rng.randrange(40)
        if rng.random() < 0.2:
            index.discard(key)
            objects.pop(key, None)
        else:
            objects[key] = (rng.choice(NAMESPACES), labels(rng))
            index.put(key, *objects[key])
        namespace, selector = rng.choice(NAMESPACES), labels(rng)
        candidates = index.candidates(namespace, selector)
        assert len(candidates) == len(set(candidates)), step
        scanned = {
            k for k, (ns, found) in objects.items() if ns == namespace and selects(selector, found)
        }
        assert scanned <= set(candidates), step
        assert all(objects[k][0] == namespace for k in candidates), step


@pytest.mark.parametrize("seed", range(20))
def test_the_selector_index_gives_the_first_selecting_budget_in_dict_order(seed: int) -> None:
    rng = random.Random(seed)
    index: SelectorIndex[int] = SelectorIndex()
    budgets: dict[int, tuple[str, dict[str, str]]] = {}
    for step in range(200):
        key = rng.randrange(30)
        if rng.random() < 0.2:
            budgets.pop(key, None)
            index.discard(key)
        else:
            budgets[key] = (rng.choice(NAMESPACES), labels(rng))
            index.put(key, *budgets[key])
        namespace, found = rng.choice(NAMESPACES), labels(rng)
        scanned = [k for k, (ns, sel) in budgets.items() if ns == namespace and selects(sel, found)]
        indexed = [k for k in index.selecting(namespace, found) if selects(budgets[k][1], found)]
        assert indexed == scanned, step
