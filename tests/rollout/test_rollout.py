"""Day 2 through the rollout simulator: every shipped stack applied to itself, and transitions that
once cost capacity (each runs the real program twice under mocks, then simulates `pulumi up`)."""

from __future__ import annotations

import copy
import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from mig_inference.changes.change_plan import (
    ChangePlan,
    PoolChange,
    ServiceChange,
    change_plan,
    change_warnings,
)
from mig_inference.changes.record import plan_record
from mig_inference.changes.transition import StackVersion, simulate_transition
from mig_inference.plan import plan_stack
from mig_inference.render import run_program
from mig_inference.rollout.cluster import Timings
from mig_inference.rollout.facts import config_names, load_facts, pool_facts
from mig_inference.rollout.mig_manager import Durations
from mig_inference.rollout.outcome import Outcome
from mig_inference.rollout.rendered import program_of
from mig_inference.rollout.resources import Program
from mig_inference.rollout.simulator import simulate
from mig_inference.rollout.steps import Op
from mig_inference.spec.files import load_stack, stack_names
from tests.changes.test_day2 import CLUSTERS, MACHINES
from tests.mocked import render_config, stack_rendering

GKE_POOL = "gcp:container/nodePool:NodePool"
BUDGET = "kubernetes:policy/v1:PodDisruptionBudget"


def stack(
    cloud: str = "gke", replicas: int = 4, protect: bool = False, **pool: Any
) -> dict[str, Any]:
    base = {"name": "h100", "gpu": "H100-80GB", "machineType": MACHINES[cloud], "nodes": 1,
            "mig": "all-3g.40gb", "maxPods": 90}  # fmt: skip
    if cloud == "oke":
        base["imageId"] = "ocid1.image.oc1..gpu"
    return {
        "cloud": cloud,
        "cluster": dict(CLUSTERS[cloud], protect=protect),
        "pools": [{**base, **pool}],
        "services": [
            {"name": "chat", "model": "m", "memoryGiB": 8, "replicas": replicas, "pool": "h100"}
        ],
    }


@cache
def _simulated(v1: str, v2: str) -> tuple[Outcome, ChangePlan]:
    before, after = (StackVersion("test", json.loads(v), frozenset()) for v in (v1, v2))
    outcome = simulate_transition(before, after, render=run_program)
    records = [plan_record(v.plan, v.values) for v in (before, after)]
    return outcome, change_plan(records[0], records[1], outcome)


def transition(v1: dict[str, Any], v2: dict[str, Any]) -> tuple[Outcome, ChangePlan]:
    return _simulated(json.dumps(v1, sort_keys=True), json.dumps(v2, sort_keys=True))


@pytest.mark.parametrize("name", stack_names())
def test_a_stack_applied_to_itself_changes_nothing(name: str) -> None:
    plan = plan_stack(load_stack(name))
    program = program_of(stack_rendering(name))
    outcome = simulate(program, program, pool_facts(plan), stack=name, project="mig-inference",
                       configs=(config_names(plan), config_names(plan)))  # fmt: skip
    assert not outcome.plan.changed() and not outcome.plan.refusals and outcome.failure is None
    assert outcome.services, name
    for service, served in outcome.services.items():
        assert served.least == served.before == served.after, (service, served)
        assert served.pending_at_end == 0
    for pool in outcome.pools.values():
        assert (pool.nodes_created, pool.nodes_deleted, pool.nodes_drained, pool.evicted) == (
            0,
            0,
            0,
            0,
        )
        assert pool.left_cordoned == [] and pool.extra_gpus == 0
        assert pool.most_devices_down == 0  # every node advertises what its labels give it
        assert pool.without_plugin == [] and pool.mig_config_missing == {}


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_a_new_generation_comes_up_before_the_old_one_goes(cloud: str) -> None:
    outcome, changes = transition(stack(cloud), stack(cloud, mig="all-1g.10gb"))
    [pool_step] = [
        s
        for s in outcome.plan.forward
        if s.key[0].endswith(("nodePool:NodePool", "nodeGroup:NodeGroup"))
    ]
    assert pool_step.op is Op.REPLACE and not pool_step.delete_first
    served = outcome.services["chat"]
    assert served.least == served.before - 1 and served.after == 4  # one replica at a time
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES and pool.extra_gpus == 8
    assert (pool.nodes_created, pool.nodes_replaced, pool.replicas_evicted) == (1, 1, 0)
    assert pool.nodes_left_cordoned == [] and outcome.failure is None


def test_a_pool_replaced_delete_before_replace_would_lose_every_replica(tmp_path: Path) -> None:
    """What 0.2 did: the pool's name set, the option unset, so the bridged provider deleted the
    old generation first. The simulator sees the outage."""
    configs = (stack(), stack(mig="all-1g.10gb"))
    before, after = (program_of(render_config(tmp_path, config)) for config in configs)
    unset = Program()
    for resource in after:
        unset.add(
            replace(resource, delete_before_replace=None) if resource.type == GKE_POOL else resource
        )
    plans = [StackVersion("test", config, frozenset()).plan for config in configs]
    outcome = simulate(before, unset, pool_facts(*plans), stack="test", project="mig-inference",
                       configs=(config_names(plans[0]), config_names(plans[1])))  # fmt: skip
    [pool_step] = [s for s in outcome.plan.forward if s.key[0] == GKE_POOL]
    assert pool_step.op is Op.REPLACE and pool_step.delete_first
    assert outcome.services["chat"].least == 0 and outcome.services["chat"].down_seconds > 0


@pytest.mark.parametrize("cloud", ["gke", "eks"])
def test_a_new_no_execute_taint_evicts_no_replica(cloud: str) -> None:
    taint = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
    outcome, changes = transition(stack(cloud), stack(cloud, taints=[taint]))
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES and pool.replicas_evicted == 0
    assert outcome.services["chat"].least >= 3


def test_a_no_execute_value_or_effect_change_stays_in_place_and_evicts_nothing() -> None:
    before = stack(taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}])
    after = stack(taints=[{"key": "dedicated", "value": "llm", "effect": "NoExecute"}])
    outcome, changes = transition(before, after)
    [pool] = changes.pools
    assert pool.change is PoolChange.IN_PLACE and pool.replicas_evicted == 0
    assert outcome.services["chat"].least == 4


def test_a_gke_zone_move_is_a_new_generation_the_gate_waits_for() -> None:
    outcome, changes = transition(stack(zones=["us-central1-c"]), stack(zones=["us-central1-b"]))
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES and [f.key for f in pool.fields] == ["zones"]
    gate = [s for s in outcome.plan.forward if s.key[1].endswith("mig-ready-job")]
    assert gate and gate[0].op is Op.REPLACE
    assert outcome.services["chat"].least == 3 and pool.replicas_evicted == 0


def test_zone_order_is_no_change() -> None:
    zones = ["us-central1-b", "us-central1-c"]
    cluster = {**CLUSTERS["gke"], "location": "us-central1"}
    v1, v2 = stack(zones=zones, nodes=2), stack(zones=zones[::-1], nodes=2)
    v1["cluster"] = v2["cluster"] = dict(cluster, protect=False)
    outcome, changes = transition(v1, v2)
    assert not outcome.plan.changed()
    assert [p.change for p in changes.pools] == [PoolChange.UNCHANGED]


def test_an_in_place_layout_change_on_one_node_is_down_for_the_window() -> None:
    v1 = stack(rollout="in-place")
    v2 = stack(rollout="in-place", mig="all-1g.10gb")
    v2["services"][0]["profile"] = "1g.10gb"
    outcome, changes = transition(v1, v2)
    [service] = changes.services
    assert service.change is ServiceChange.DOWN and service.min_serving == 0
    assert service.down_seconds > 0 and "no replica serves for" in service.reason
    assert outcome.failure is None and changes.pools[0].nodes_left_cordoned == []


def test_moving_a_service_to_another_namespace_in_a_full_pool_fails_naming_the_pending() -> None:
    v1 = stack(replicas=16, nodes=1)  # 16 slices of 3g.40gb: every one in use
    v2 = copy.deepcopy(v1)
    v2["services"][0]["namespace"] = "other"
    _, changes = transition(v1, v2)
    assert changes.failure is not None and "Pending" in changes.failure
    assert "other/chat" in changes.failure


def test_shrinking_a_pool_with_its_services_evicts_before_the_scale_down() -> None:
    v2 = stack("eks", replicas=2)
    _, changes = transition(stack("eks", nodes=2), v2)
    [pool] = changes.pools
    assert pool.change is PoolChange.IN_PLACE and [str(f) for f in pool.fields] == ["nodes: 2 -> 1"]
    assert pool.replicas_evicted > 0 and pool.nodes_replaced == 1
    assert any("evicted before their Deployments scale down" in w for w in change_warnings(changes))


def test_switching_rollout_names_the_rollout_not_an_unset_layout() -> None:
    _, changes = transition(stack(), stack(rollout="in-place"))
    [pool] = changes.pools
    assert [str(f) for f in pool.fields] == ["rollout: blue-green -> in-place"]


def test_a_new_max_unavailable_reruns_the_job_and_diff_says_so() -> None:
    outcome, changes = transition(
        stack(nodes=2, rollout="in-place"), stack(nodes=2, rollout="in-place", maxUnavailable=2)
    )
    [job] = outcome.plan.changed()
    assert job.key == ("kubernetes:batch/v1:Job", "repartition-h100-job") and job.op is Op.REPLACE
    [pool] = changes.pools
    assert pool.change is PoolChange.IN_PLACE and [f.key for f in pool.fields] == ["maxUnavailable"]
    assert any("runs again" in w for w in change_warnings(changes))


def test_renaming_a_protected_pool_is_refused_with_its_urn() -> None:
    v1 = stack(protect=True)
    v2 = stack(protect=True)
    v2["pools"][0]["name"] = "h100-b"
    v2["services"][0]["pool"] = "h100-b"
    outcome, changes = transition(v1, v2)
    assert outcome.refused
    urn = (
        "urn:pulumi:test::mig-inference::mig-inference:index:MigInference$"
        "mig-inference:index:GkeGpuPool$gcp:container/nodePool:NodePool::h100"
    )
    assert any(urn in refusal for refusal in changes.refusals), changes.refusals


def test_raising_an_eks_minimum_above_the_state_desired_size_is_refused_with_the_way_forward() -> (
    None
):
    v1 = stack("eks", nodes={"min": 1, "max": 3})
    v2 = stack("eks", nodes={"min": 2, "max": 3})
    _, changes = transition(v1, v2)
    [refusal] = changes.refusals
    assert "EKS refuses nodes.min 2" in refusal and "`nodes: 2`" in refusal


def test_autoscaled_pools_report_the_gpus_of_both_generations() -> None:
    v1 = stack("eks", nodes={"min": 0, "max": 2}, replicas=8)
    v2 = stack("eks", nodes={"min": 0, "max": 2}, replicas=8, mig="all-balanced")
    _, changes = transition(v1, v2)
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES and pool.extra_gpus > 0


def test_swapping_a_node_of_an_existing_pool_moves_its_replicas_before_the_node_leaves() -> None:
    # nodeNames [a, b] -> [a, c] was "unchanged": Pulumi stripped b's pool labels, layout and taint
    # last, with the service's replicas still running there.
    v1: dict[str, Any] = {"cloud": "existing", "cluster": {"name": "lab", "context": "lab"},
          "pools": [{"name": "lab", "gpu": "H100-80GB", "gpusPerNode": 1, "nodeNames": ["a", "b"],
                     "mig": "all-3g.40gb", "maxPods": 110}],
          "services": [{"name": "chat", "model": "m", "memoryGiB": 8, "replicas": 4,
                        "pool": "lab"}]}  # fmt: skip
    v2 = copy.deepcopy(v1)
    v2["pools"][0]["nodeNames"] = ["a", "c"]
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None
    [pool] = changes.pools
    assert pool.change is PoolChange.IN_PLACE and [str(f) for f in pool.fields] == [
        "nodeNames: a,b -> a,c"
    ]
    assert pool.nodes_released == ["b"] and pool.replicas_evicted == 2
    assert pool.nodes_left_cordoned == []
    [chat] = changes.services
    # b's two replicas leave one at a time under chat's budget (3 of 4 kept): no budget is
    # relaxed where the drain does not need it.
    assert (chat.serving_before, chat.min_serving, chat.serving_after) == (4, 3, 4)
    assert chat.change is ServiceChange.DISRUPTED and chat.pending_at_end == 0
    assert any("b leave(s) the pool" in w for w in change_warnings(changes))
    # Every replica runs on the pool's nodes at the end, none on the released one.
    assert "re-partitioning Job: released b" in [text for _, text in outcome.events]


def test_reordering_set_typed_inputs_changes_nothing() -> None:
    """`aws_eks_node_group.subnet_ids` and `taint` are TypeSets: the bridged provider ignores
    their order, so a reorder is no step of the node group (subnets were a refused
    replacement)."""
    subnets = ["subnet-00000001", "subnet-00000002"]
    v1, v2 = stack("eks", protect=True), stack("eks", protect=True)
    v1["cluster"]["subnetIds"], v2["cluster"]["subnetIds"] = subnets, subnets[::-1]
    outcome, changes = transition(v1, v2)
    assert not outcome.plan.changed() and not outcome.refused, outcome.plan.changed()
    assert [p.change for p in changes.pools] == [PoolChange.UNCHANGED]
    taints = [{"key": "a", "value": "1", "effect": "NoSchedule"},
              {"key": "b", "value": "2", "effect": "NoSchedule"}]  # fmt: skip
    outcome, _ = transition(stack("eks", taints=taints), stack("eks", taints=taints[::-1]))
    [group] = [s for s in outcome.plan.forward if s.key[0] == "aws:eks/nodeGroup:NodeGroup"]
    assert group.op is Op.SAME


def test_gke_native_nodes_come_up_partitioned_and_serve() -> None:
    """GKE partitions a native-MIG node when it creates it (no MIG manager there): a new
    generation's nodes offer their partitions, and a scale-up lands on them."""
    native: dict[str, Any] = {"migManager": "gke", "zones": ["us-central1-c"]}
    v1 = stack(replicas=16, **native)
    outcome, changes = transition(v1, stack(replicas=16, diskSizeGb=500, **native))
    assert outcome.failure is None, outcome.failure
    [chat] = changes.services
    assert (chat.serving_before, chat.serving_after, chat.pending_at_end) == (16, 16, 0)
    assert changes.pools[0].slices_unavailable == 0
    outcome, changes = transition(v1, stack(replicas=16, nodes=2, **native))
    assert outcome.failure is None and changes.pools[0].slices_unavailable == 0


def test_a_sharing_change_keeps_each_versions_device_plugin_config_apart() -> None:
    """Time-sliced nodes advertise what their own device-plugin config label names: the
    deployed nodes serve the deployed factor until their label moves."""
    base = {"name": "l40s", "gpu": "L40S-48GB", "machineType": "g6e.12xlarge", "nodes": 1,
            "maxPods": 50}  # fmt: skip
    v1 = stack("eks", replicas=16)
    v1["pools"] = [{**base, "sharing": {"timeSlicing": {"replicas": 4}}}]
    # One memory share on both sides: vLLM's changing with the sharing is refused in place
    # (changes/shared_memory.py).
    v1["services"][0].update(pool="l40s", memoryGiB=8, gpuMemoryUtilization=0.2)
    v2 = copy.deepcopy(v1)
    v2["pools"][0]["sharing"]["timeSlicing"]["replicas"] = 2
    v2["services"][0]["replicas"] = 8
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    [chat] = changes.services
    assert (chat.serving_before, chat.serving_after, chat.pending_at_end) == (16, 8, 0)


def test_the_simulation_settles_only_when_nothing_can_change() -> None:
    """The update fails (the Deployment times out while the new node's MIG manager still
    applies its layout), yet the replicas pending then are served once it is done: the run ends
    at a fixpoint, not while a node is still working."""
    v1 = stack(replicas=16)
    v1["gpuOperator"] = {"gate": False}
    v2 = copy.deepcopy(v1)
    v2["pools"][0]["nodes"], v2["services"][0]["replicas"] = 2, 32
    timings = Timings(mig_manager=Durations(apply=6 * 3600.0))
    before, after = (StackVersion("test", v, frozenset()) for v in (v1, v2))
    outcome = simulate_transition(before, after, timings, render=run_program)
    assert outcome.failure is not None and "did not roll out" in outcome.failure
    served = outcome.services["chat"]
    assert (served.after, served.pending_at_end) == (32, 0)


def test_a_removed_service_is_not_pending() -> None:
    v1 = stack(replicas=16)
    v1["services"].append({"name": "gone", "model": "m", "memoryGiB": 8, "replicas": 4,
                           "pool": "h100"})  # fmt: skip
    v1["pools"][0]["nodes"] = 2
    v2 = copy.deepcopy(v1)
    v2["services"].pop()
    outcome, _ = transition(v1, v2)
    assert outcome.services["gone"].pending_at_end == 0 and outcome.services["gone"].after == 0


def test_an_eks_launch_template_roll_follows_the_documented_phases() -> None:
    """A tag value is a new launch template version: EKS surges max(2 x AZs, maxUnavailable)
    new nodes, waits for them Ready, cordons the old ones, then drains maxUnavailable at a time
    through the Eviction API; pods that do not leave in 15 minutes fail the update
    (PodEvictionFailure) with the old node left cordoned."""
    v1, v2 = stack("eks", replicas=16), stack("eks", replicas=16)
    v1["tags"], v2["tags"] = {"team": "a"}, {"team": "b"}
    outcome, changes = transition(v1, v2)
    assert outcome.failure is not None and "PodEvictionFailure" in outcome.failure
    [pool] = changes.pools
    assert pool.change is PoolChange.NODES_REPLACED and pool.nodes_created == 2  # 1 AZ: 2
    assert outcome.pools["h100"].peak_gpus == 24  # the old node's 8 GPUs and the surge's 16
    assert len(pool.nodes_left_cordoned) == 1
    served = outcome.services["chat"]
    assert served.least >= 15  # the budget lets one replica go at a time: never a full outage
    # A group whose replicas leave in time is replaced: the surplus new node goes at the end.
    v1, v2 = stack("eks", replicas=1), stack("eks", replicas=1)
    v1["tags"], v2["tags"] = {"team": "a"}, {"team": "b"}
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    [pool] = changes.pools
    assert pool.change is PoolChange.NODES_REPLACED and pool.nodes_left_cordoned == []
    assert (pool.nodes_created, pool.nodes_replaced, pool.extra_gpus) == (2, 2, 16)
    assert outcome.services["chat"].after == 1


def budgets_first(program: Program) -> Program:
    """The program with its PodDisruptionBudgets registered before everything else: Pulumi's
    runtime registers resources from a thread pool, so a budget may come before its Deployment."""
    reordered = Program()
    for resource in sorted(program, key=lambda r: r.type != BUDGET):
        reordered.add(resource)
    return reordered


def registered_anew(program: Program, rng: random.Random) -> Program:
    """Another order Pulumi may register the program in: each resource after its parent and
    what it depends on, the rest in any order."""
    keys, placed = {r.key for r in program}, set()
    pending, reordered = list(program), Program()
    while pending:
        ready = [r for r in pending if all(k in placed or k not in keys
                                           for k in (r.parent, *r.dependencies))]  # fmt: skip
        resource = rng.choice(ready)
        pending.remove(resource)
        placed.add(resource.key)
        reordered.add(resource)
    return reordered


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"cloud": "eks", "replicas": 16, "tags": {"team": "a"}},
         {"cloud": "eks", "replicas": 16, "tags": {"team": "b"}}),
        ({"cloud": "gke"}, {"cloud": "gke", "mig": "all-1g.10gb"}),
        ({"cloud": "gke", "rollout": "in-place"},
         {"cloud": "gke", "rollout": "in-place", "mig": "all-1g.10gb"}),
    ],
    ids=["eks roll", "gke new generation", "gke in place"],
)  # fmt: skip
def test_what_a_transition_does_does_not_depend_on_the_order_resources_registered_in(
    before: dict[str, Any], after: dict[str, Any], tmp_path: Path
) -> None:
    """Pulumi registers a program's resources in no fixed order (its runtime registers them
    from a thread pool, each once its inputs resolved): the simulated `pulumi up` is the same
    for each order that keeps parents and dependencies first. Once, a rendering registered the
    PodDisruptionBudget before its Deployment and the EKS roll finished, every replica evicted
    at once, instead of ending in PodEvictionFailure."""
    configs = []
    for version in (before, after):
        tags = version.get("tags")
        config = stack(**{k: v for k, v in version.items() if k != "tags"})
        configs.append({**config, "tags": tags} if tags else config)
    programs = [program_of(render_config(tmp_path, config)) for config in configs]
    plans = [StackVersion("test", config, frozenset()).plan for config in configs]

    def outcome(old: Program, new: Program) -> tuple[Any, ...]:
        found = simulate(old, new, pool_facts(*plans), stack="test", project="mig-inference",
                         configs=(config_names(plans[0]), config_names(plans[1])),
                         load=load_facts(*plans))  # fmt: skip
        return (
            found.failure,
            {name: (s.least, s.after, s.pending_at_end) for name, s in found.services.items()},
            {name: (p.nodes_created, p.nodes_deleted, p.evicted, p.peak_gpus)
             for name, p in found.pools.items()},
        )  # fmt: skip

    registered = outcome(*programs)
    assert outcome(*(budgets_first(p) for p in programs)) == registered
    rng = random.Random(7)
    for _ in range(6):
        assert outcome(*(registered_anew(p, rng) for p in programs)) == registered


@pytest.mark.parametrize("cloud", ["gke", "eks"])
def test_reordering_a_pools_taints_changes_nothing(cloud: str, tmp_path: Path) -> None:
    """Neither a node's taints nor a pod's tolerations mean anything by their order: the
    program renders both in a stable order, so the stack file's order is no change."""
    taints = [
        {"key": "team", "value": "ml", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"},
    ]
    v1, v2 = stack(cloud, taints=taints), stack(cloud, taints=taints[::-1])
    before, after = (program_of(render_config(tmp_path, v)) for v in (v1, v2))
    assert {r.key: r.inputs for r in before} == {r.key: r.inputs for r in after}
    outcome, changes = transition(v1, v2)
    assert outcome.plan.changed() == [] and outcome.failure is None
    assert [s.change for s in changes.services] == [ServiceChange.UNAFFECTED]
    assert all(p.change is PoolChange.UNCHANGED and not p.fields for p in changes.pools)
    assert outcome.services["chat"].least == 4
