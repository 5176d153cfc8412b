"""The re-partitioning Job and the PodDisruptionBudgets of the pool's services: relaxed only for
the drain that needs it and only for the services whose replicas there have nowhere to go at
once; strict (one replica at a time) where the nodes already switched have room; the emptiest
nodes first, so that room exists early; and restored by whichever run finds them marked, with or
without a node to switch. The real script with /bin/sh and kubectl against the fake API server
(both models of NVIDIA's node agents)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.repartition import RepartitionTarget, repartition_script
from mig_inference.names.labels import CORDONED_FOR_ANNOTATION, MIG_CONFIG_LABEL, POOL_LABEL
from tests.fake_apiserver import AGENTS, DRA_NAMESPACE, FakeCluster, run_script

TWO = ("3g.40gb", "3g.40gb")
THREE = ("2g.20gb",) * 3
CONFIGS = {"all-3g.40gb": (TWO, TWO), "mixed": (TWO, THREE), "all-2g.20gb": (THREE, THREE),
           "all-disabled": (None, None)}  # fmt: skip
RESOURCE = "nvidia.com/mig-3g.40gb"
RELAXED = "mig-inference.io/relaxed-from"
CHANGES = {
    # A new layout that keeps two 3g.40gb slices of four per node.
    "layout": ("mixed", {RESOURCE: 2, "nvidia.com/mig-2g.20gb": 3}, False),
    # The move to DRA with the extended-resource bridge: the layout stays.
    "dra-move": ("all-3g.40gb", {RESOURCE: 4}, True),
    # The layout change undone: the nodes' own layout is the target.
    "undone": ("all-3g.40gb", {RESOURCE: 4}, False),
    # From `mixed`, a layout without 3g.40gb: a replica on it has nowhere to go until the Job ends.
    "no-3g": ("all-2g.20gb", {"nvidia.com/mig-2g.20gb": 6}, False),
}


@pytest.fixture(autouse=True, params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("tests.fake_apiserver.default_agents", request.param)
    return str(request.param)


def cluster_of(*nodes: str, config: str = "all-3g.40gb", **node: Any) -> FakeCluster:
    cluster = FakeCluster(CONFIGS)
    for name in nodes:
        cluster.add_node(name, config, labels={POOL_LABEL: "p"}, **node)
    return cluster


def repartition(
    cluster: FakeCluster, tmp_path: Path, change: str = "layout", **timeouts: int
) -> subprocess.CompletedProcess[str]:
    config, planned, dra = CHANGES[change]
    target = RepartitionTarget(
        "p", config, f"{POOL_LABEL}=p", (), 1, len(cluster.nodes), planned,
        dra=dra, dra_namespace=DRA_NAMESPACE if dra else "", switch_keeps_requests=dra,
    )  # fmt: skip
    env = {**target.env(60, "gpu-operator"), "REPARTITION_POLL_SECONDS": "1",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "ADVERTISE_TIMEOUT_SECONDS": "30", "RECONFIGURE_TIMEOUT_SECONDS": "120",
           **{k: str(v) for k, v in timeouts.items()}}  # fmt: skip
    return run_script(cluster, tmp_path, repartition_script(), env)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def strict(cluster: FakeCluster, service: str, namespace: str = "inference") -> bool:
    budget = cluster.budgets[(namespace, service)]
    return (
        budget["spec"]["maxUnavailable"] == 1 and RELAXED not in budget["metadata"]["annotations"]
    )


def budget_patches(cluster: FakeCluster) -> list[str]:
    return [c for c in cluster.changes if c.startswith("patch pdb")]


def mark(cluster: FakeCluster, service: str, relaxed_from: str = "1") -> None:
    """The budget as a run that relaxed it and never restored it left it."""
    budget = cluster.budgets[("inference", service)]
    budget["spec"]["maxUnavailable"] = "100%"
    budget["metadata"]["annotations"][RELAXED] = relaxed_from


# -- whichever run finds the marks restores them ---------------------------------------------------
def test_a_run_with_nothing_to_switch_restores_the_budgets_a_killed_run_left_relaxed(
    tmp_path: Path,
) -> None:
    """Killed after its last node: every node is on the target (one still carries the Job's
    cordon), both budgets still let every replica go. The next run has nothing to switch, and
    still gives them back (the value the mark holds: `25%` stays a percentage)."""
    cluster = cluster_of("n1", config="mixed")
    cluster.add_node("n2", "mixed", labels={POOL_LABEL: "p"}, unschedulable=True,
                     annotations={CORDONED_FOR_ANNOTATION: "mixed"})  # fmt: skip
    cluster.add_service("inference", "chat", 2, RESOURCE, pool="p", on={"n1": 1, "n2": 1})
    cluster.add_service("inference", "code", 1, RESOURCE, pool="p", on={"n1": 1},
                        max_unavailable="25%")  # fmt: skip
    mark(cluster, "chat")
    mark(cluster, "code", "25%")
    result = repartition(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert strict(cluster, "chat")
    code = cluster.budgets[("inference", "code")]
    assert (
        code["spec"]["maxUnavailable"] == "25%" and RELAXED not in code["metadata"]["annotations"]
    )
    assert "PodDisruptionBudget inference/chat: left at maxUnavailable 100% by an earlier run" in (
        result.stdout
    )
    assert not cluster.cordoned("n2")
    assert not any(c.startswith(("evict", "patch n1")) for c in cluster.changes), cluster.changes


def test_a_restore_that_fails_fails_the_job_and_the_next_run_restores_it(tmp_path: Path) -> None:
    """The restore after n1's drain fails: the Job stops, n1 never relabelled, the budget still
    marked. The change is undone, so the next run has no node to switch: it restores it."""
    cluster = cluster_of("n1")
    cluster.add_service("inference", "chat", 2, RESOURCE, pool="p", on={"n1": 2})
    # The relax goes through; every restore after it fails.
    cluster.fail("PATCH", "/apis/policy/v1/namespaces/inference/poddisruptionbudgets/chat",
                  times=-1, after=1)  # fmt: skip
    first = repartition(cluster, tmp_path)
    assert first.returncode == 1, output(first)
    assert "PodDisruptionBudget inference/chat: could not be restored" in first.stdout
    assert "kubectl patch pdb -n inference chat --type merge" in first.stdout
    budget = cluster.budgets[("inference", "chat")]
    assert budget["metadata"]["annotations"][RELAXED] == "1"
    cluster.faults.clear()
    for _ in range(10):
        cluster.tick()  # the replicas evicted from n1 come back and load
    (tmp_path / "again").mkdir()
    second = repartition(cluster, tmp_path / "again", "undone")
    assert second.returncode == 0, output(second)
    assert "node n1: already on all-3g.40gb" in second.stdout
    assert strict(cluster, "chat")


def test_a_take_over_that_fails_stops_before_any_node_is_touched(tmp_path: Path) -> None:
    cluster = cluster_of("n1")
    cluster.add_service("inference", "chat", 2, RESOURCE, pool="p", on={"n1": 2})
    mark(cluster, "chat")
    cluster.fail("PATCH", "/apis/policy/v1/namespaces/inference/poddisruptionbudgets/chat",
                 times=-1)  # fmt: skip
    result = repartition(cluster, tmp_path)
    assert result.returncode == 1, output(result)
    assert "STOPPED at the pool's PodDisruptionBudgets: an earlier run left them relaxed" in (
        result.stdout
    )
    assert not any(c.startswith(("patch n", "evict")) for c in cluster.changes), cluster.changes
    assert cluster.budgets[("inference", "chat")]["metadata"]["annotations"][RELAXED] == "1"


# -- relaxed only where, and while, it must be ---------------------------------------------------
def test_only_the_drain_that_needs_it_relaxes_only_the_budgets_it_needs(tmp_path: Path) -> None:
    """chat's two replicas on n1 have nowhere to go at once (n2 is held until its turn): chat's
    budget, and only chat's, is relaxed for n1's drain and strict again before n1 is relabelled;
    code, on n2, keeps its budget until its own drain (n1's two 3g.40gb slices taken by chat by
    then), and has it back before n2 is relabelled."""
    cluster = cluster_of("n1", "n2")
    cluster.add_service("inference", "chat", 2, RESOURCE, pool="p", on={"n1": 2})
    cluster.add_service("inference", "code", 2, RESOURCE, pool="p", on={"n2": 2})
    result = repartition(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    changes = cluster.changes

    def first(node: str, what: str) -> int:
        return next(i for i, c in enumerate(changes) if c.startswith(f"patch {node} ")
                    and what in c)  # fmt: skip

    patches = [(i, c) for i, c in enumerate(changes) if c.startswith("patch pdb")]
    assert [c for _, c in patches] == [
        f"patch pdb inference/chat @{RELAXED}=1 maxUnavailable=100%",
        f"patch pdb inference/chat @{RELAXED}- maxUnavailable=1",
        f"patch pdb inference/code @{RELAXED}=1 maxUnavailable=100%",
        f"patch pdb inference/code @{RELAXED}- maxUnavailable=1",
    ], changes
    assert patches[1][0] < first("n1", f"{MIG_CONFIG_LABEL}=mixed")
    assert first("n1", "uncordon") < patches[2][0]
    assert patches[3][0] < first("n2", f"{MIG_CONFIG_LABEL}=mixed")
    assert strict(cluster, "chat") and strict(cluster, "code")


@pytest.mark.parametrize("change", ["layout", "dra-move"])
def test_a_pool_with_room_to_spare_is_not_halved(tmp_path: Path, change: str) -> None:
    """n3 is empty: it is switched first, and the replicas of n1 and then n2 move onto the free
    slices one at a time as chat's budget allows. The service never loses more than one."""
    cluster = cluster_of("n1", "n2", "n3")
    cluster.add_service("inference", "chat", 4, RESOURCE, pool="p", on={"n1": 2, "n2": 2},
                        start=3)  # fmt: skip
    result = repartition(cluster, tmp_path, change)
    assert result.returncode == 0, output(result)
    assert cluster.least_ready("chat") == 3, (cluster.ready_history, result.stdout)
    assert budget_patches(cluster) == [], cluster.changes
    assert cluster.evicted_loading == []
    switched = [c.split()[1] for c in cluster.changes
                if c.startswith("patch n") and c.endswith(" uncordon")]  # fmt: skip
    assert switched[0] == "n3", cluster.changes


def test_a_strict_budget_too_slow_for_the_drain_is_relaxed_at_its_deadline(tmp_path: Path) -> None:
    """n1 is empty, so n2's two replicas have room there and go one at a time; the first one
    moved never turns Ready, so the budget would refuse the second for good: at the drain's
    deadline the Job relaxes it, finishes the drain and restores it."""
    cluster = cluster_of("n1", "n2")
    cluster.add_service("inference", "chat", 2, RESOURCE, pool="p", on={"n2": 2}, start=10_000)
    result = repartition(cluster, tmp_path, DRAIN_TIMEOUT_SECONDS=10)
    assert result.returncode == 0, output(result)
    assert "did not all leave n2 within 10s one at a time" in result.stdout
    assert budget_patches(cluster) == [
        f"patch pdb inference/chat @{RELAXED}=1 maxUnavailable=100%",
        f"patch pdb inference/chat @{RELAXED}- maxUnavailable=1",
    ]
    assert strict(cluster, "chat")


def test_while_a_replica_waits_for_the_job_to_end_no_budget_is_held_strict(tmp_path: Path) -> None:
    """chat's slice is gone from the new layout: its replica evicted from n1 (first, the
    emptiest) waits for the Job to end. code has room on n1 for its two replicas on n2, but the
    Job does not slow down to move them one at a time while chat is down: code's budget is
    relaxed for n2's drain too, and given back after it."""
    cluster = cluster_of("n1", "n2", config="mixed")
    cluster.add_service("inference", "chat", 1, RESOURCE, pool="p", on={"n1": 1})
    cluster.add_service("inference", "code", 2, "nvidia.com/mig-2g.20gb", pool="p", on={"n2": 2},
                        start=3)  # fmt: skip
    result = repartition(cluster, tmp_path, "no-3g")
    assert result.returncode == 0, output(result)
    assert "PodDisruptionBudget inference/code: maxUnavailable 100% for the drain of n2" in (
        result.stdout
    )
    assert "wait for the Job to end (Pending: inference/chat-" in result.stdout
    assert strict(cluster, "chat") and strict(cluster, "code")
