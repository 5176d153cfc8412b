"""DRA services in the rollout simulator: a pod's claim is made from the ResourceClaimTemplate as
it is when the pod is created, so each version's claims stay apart; the API server refuses to
update a template's spec (immutable), so the program replaces it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from mig_inference.changes.change_plan import ServiceChange
from mig_inference.changes.transition import StackVersion
from mig_inference.rollout.facts import config_names, pool_facts
from mig_inference.rollout.model import CLAIM_TEMPLATE
from mig_inference.rollout.rendered import program_of
from mig_inference.rollout.resources import Program
from mig_inference.rollout.simulator import simulate
from mig_inference.spec.files import stack_path
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from tests.mocked import render_config
from tests.rollout.test_rollout import transition


def dra_stack() -> dict[str, Any]:
    engine = read_stack_config(stack_path("gke-h100-dra"))
    values, _ = project_values(engine.values, engine.secret_keys.__contains__)
    values["services"][0].pop("hfTokenSecret")
    values.pop("hfToken", None)
    return values


def new_profile(values: dict[str, Any]) -> dict[str, Any]:
    """In place all-balanced -> all-3g.40gb: qwen-small's 16 x 1g.10gb become 4 x 3g.40gb."""
    changed = copy.deepcopy(values)
    changed["pools"][0]["mig"] = "all-3g.40gb"
    changed["services"][0]["replicas"] = 4
    changed["services"][1].update(profile="3g.40gb", replicas=4)
    return changed


def test_deployed_replicas_keep_the_claims_they_were_made_with() -> None:
    v1 = dra_stack()
    outcome, changes = transition(v1, new_profile(v1))
    assert outcome.failure is None and not outcome.refused, (outcome.failure, changes.refusals)
    qwen = next(s for s in changes.services if s.name == "qwen-small")
    # Its deployed replicas hold 1g.10gb slices the new layout no longer offers: down for the
    # re-partitioning, and their replacements claim 3g.40gb once the template is replaced.
    assert (qwen.serving_before, qwen.min_serving, qwen.serving_after) == (16, 0, 4)
    assert qwen.change is ServiceChange.DOWN and qwen.down_seconds > 0
    [template] = [s for s in outcome.plan.forward if s.key == (CLAIM_TEMPLATE, "qwen-small-claim")]
    assert template.replaced_by == (
        "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression",
    )


def test_an_update_of_a_claim_templates_spec_is_refused_by_the_api_server(tmp_path: Path) -> None:
    """Without replaceOnChanges the provider updates the template in place, and the API
    server's immutable spec stops the preview (its server-side dry run)."""
    v1 = dra_stack()
    v2 = new_profile(v1)
    before, after = (program_of(render_config(tmp_path, v)) for v in (v1, v2))
    updated = Program()
    for resource in after:
        updated.add(
            replace(resource, replace_on_changes=())
            if resource.type == CLAIM_TEMPLATE
            else resource
        )
    plans = [StackVersion("test", v, frozenset()).plan for v in (v1, v2)]
    outcome = simulate(before, updated, pool_facts(*plans), stack="test", project="mig-inference",
                       configs=(config_names(plans[0]), config_names(plans[1])))  # fmt: skip
    messages = [r.message for r in outcome.plan.refusals]
    assert any("qwen-small-gpu-device" in m and "spec is immutable" in m for m in messages), (
        messages
    )


def test_an_in_place_repartition_counts_the_slices_out_of_service() -> None:
    """From the relabel until the restarted kubelet plugin publishes the new layout, the node's
    published slices name instances its GPUs no longer have: none of them serves."""
    v1 = dra_stack()
    _, changes = transition(v1, new_profile(v1))
    [pool] = changes.pools
    assert pool.slices_unavailable == 16  # the one node's 8 GPUs x 2 3g.40gb slices
    assert changes.slices_unavailable == 16
