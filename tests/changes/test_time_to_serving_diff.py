"""`diff` says how long and how many hub bytes a transition costs: the rollout simulator waits
each Deployment's estimated start and each populate Job's fill, and the change plan counts the
replicas that start and what they pull from the hub."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from mig_inference.changes.change_plan import (
    ChangePlan,
    change_plan,
    change_plan_json,
    change_plan_text,
)
from mig_inference.changes.record import plan_record
from mig_inference.changes.transition import StackVersion, simulate_transition
from mig_inference.gpus.sizing import GIB
from mig_inference.plan.model_cache import fill_job_name
from mig_inference.render import run_program
from mig_inference.rollout.outcome import Outcome
from tests.changes.test_day2 import CLUSTERS, MACHINES

SIZE = int(20 * GIB)


def stack(cache: dict[str, Any] | None, replicas: int = 4, **pool: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "cloud": "gke",
        "cluster": dict(CLUSTERS["gke"], protect=False),
        "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": MACHINES["gke"],
                   "nodes": 1, "mig": "all-3g.40gb", "maxPods": 90, **pool}],
        "services": [{"name": "chat", "model": "org/chat", "memoryGiB": 30, "weightsGiB": 20,
                      "replicas": replicas, "pool": "h100"}],
    }  # fmt: skip
    if cache is not None:
        values["modelCache"] = cache
    return values


@cache
def _simulated(v1: str, v2: str) -> tuple[StackVersion, Outcome, ChangePlan]:
    before, after = (StackVersion("test", json.loads(v), frozenset()) for v in (v1, v2))
    outcome = simulate_transition(before, after, render=run_program)
    records = [plan_record(v.plan, v.values) for v in (before, after)]
    return after, outcome, change_plan(records[0], records[1], outcome)


def simulated(v1: dict[str, Any], v2: dict[str, Any]) -> tuple[StackVersion, Outcome, ChangePlan]:
    return _simulated(json.dumps(v1, sort_keys=True), json.dumps(v2, sort_keys=True))


def test_a_new_generation_without_the_cache_downloads_once_per_replica() -> None:
    after, _, changes = simulated(stack(None), stack(None, diskSizeGb=500))
    [chat] = changes.services
    assert chat.source == "hub"
    assert chat.replicas_started == 4
    assert chat.hub_bytes == 4 * SIZE == changes.hub_bytes
    assert chat.replica_seconds == round(after.plan.load["chat"].replica_seconds)


def test_a_new_generation_with_the_cache_reads_nothing_from_the_hub() -> None:
    _, _, changes = simulated(stack({}), stack({}, diskSizeGb=500))
    [chat] = changes.services
    assert chat.source == "hyperdisk-ml"
    assert chat.replicas_started == 4  # every replica moved to the new generation...
    assert chat.hub_bytes == 0 == changes.hub_bytes  # ...and read the cache, not the hub
    text = change_plan_text(changes)
    assert "4 replica(s) start" in text and "reading hyperdisk-ml: 0.0 GB from the hub" in text
    assert "downloaded from the hub: 0.0 GB" in text
    service = change_plan_json(changes)["services"][0]
    assert (service["hub_bytes"], service["replicas_started"]) == (0, 4)


def test_turning_the_cache_on_fills_it_once_before_the_replicas_roll() -> None:
    after, outcome, changes = simulated(stack(None), stack({}))
    [chat] = changes.services
    assert chat.hub_bytes == SIZE  # the populate Job's one download
    cache_plan = after.plan.model_cache
    assert cache_plan is not None
    load = after.plan.load["chat"]
    # No replica of the old template goes before the populate Job has filled the cache.
    terminated = [t for t, text in outcome.events if "rolling update of chat" in text]
    assert terminated and min(terminated) >= load.populate_seconds
    assert fill_job_name(cache_plan, cache_plan.models[0]).startswith("model-fill-")


def test_a_new_revision_is_filled_again_and_the_same_one_is_not() -> None:
    pinned = stack({})
    pinned["services"][0]["revision"] = "0123456789abcdef0123456789abcdef01234567"
    _, _, changes = simulated(stack({}), pinned)
    assert changes.services[0].hub_bytes == SIZE
    scaled = stack({}, replicas=6)
    _, _, same = simulated(stack({}), scaled)
    assert same.services[0].hub_bytes == 0
    assert same.services[0].replicas_started == 2


def test_the_simulated_update_waits_the_estimated_starts() -> None:
    """With the cache each replica reads faster than it downloads: the same blue/green
    generation finishes sooner, by the estimates (not by the flat `Timings.replica_start`)."""
    _, hub_outcome, _ = simulated(stack(None), stack(None, diskSizeGb=500))
    _, cache_outcome, _ = simulated(stack({}), stack({}, diskSizeGb=500))
    assert cache_outcome.seconds < hub_outcome.seconds
    after = StackVersion("test", stack(None, diskSizeGb=500), frozenset())
    load = after.plan.load["chat"]
    # Four replicas move one at a time: at least four starts of the estimate each.
    assert hub_outcome.seconds >= 4 * load.replica_seconds
