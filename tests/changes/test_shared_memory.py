"""Time-slicing changing on a pool's running nodes while vLLM's memory share follows it: `diff`
refuses before simulating, with the ways forward (vLLM v0.33.0 `request_memory`)."""

from __future__ import annotations

from typing import Any

import pytest

from mig_inference.changes.shared_memory import shared_memory_refusals
from mig_inference.changes.transition import StackVersion, simulate_transition
from mig_inference.errors import MigError, MigErrors
from mig_inference.render import run_program
from tests.rollout.test_rollout import stack


def version(config: dict[str, Any]) -> StackVersion:
    return StackVersion("test", config, frozenset())


def refusals(v1: dict[str, Any], v2: dict[str, Any]) -> list[MigError]:
    return shared_memory_refusals(version(v1).plan, version(v2).plan)


SHARED = {"timeSlicing": {"replicas": 2}}


@pytest.mark.parametrize("cloud", ["gke", "eks"])
def test_adding_time_slicing_in_place_is_refused_with_a_way_that_works(cloud: str) -> None:
    [refusal] = refusals(stack(cloud), stack(cloud, sharing=SHARED))
    assert refusal.path == "mig-inference:pools[0].sharing"
    text = str(refusal)
    assert "chat (0.9 -> 0.45)" in text and "request_memory" in text
    # The way that keeps the nodes: the new share first, with the old sharing.
    assert "first give these services gpuMemoryUtilization at the new share" in text


def test_removing_it_has_only_the_new_nodes_way() -> None:
    [refusal] = refusals(stack("eks", sharing=SHARED), stack("eks"))
    assert "chat (0.45 -> 0.9)" in str(refusal)
    assert "first give these services" not in str(refusal)
    assert "a new pool (another name) with it" in str(refusal)


def test_the_two_steps_are_not_refused() -> None:
    first = stack("eks")
    first["services"][0]["gpuMemoryUtilization"] = 0.45
    assert refusals(stack("eks"), first) == []  # no sharing change
    second = stack("eks", sharing=SHARED)
    second["services"][0]["gpuMemoryUtilization"] = 0.45
    assert refusals(first, second) == []  # the share is the same on both sides


def test_new_nodes_keep_old_and_new_replicas_apart() -> None:
    # OKE reaches sharing only on nodes it creates: a new generation, nothing to refuse.
    assert refusals(stack("oke"), stack("oke", sharing=SHARED)) == []


def test_diff_refuses_before_simulating() -> None:
    with pytest.raises((MigError, MigErrors), match=r"pools\[0\]\.sharing: pool h100: its sharing"):
        simulate_transition(
            version(stack("eks")), version(stack("eks", sharing=SHARED)), render=run_program
        )
