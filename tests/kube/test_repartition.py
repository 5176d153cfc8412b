"""In-place re-partitioning: the real script, run with /bin/sh and the real kubectl against a fake
API server whose nodes run the model of NVIDIA's MIG manager v0.15.0 (tests/fake_apiserver.py).
Each requirement of issue 20 for the Job has its test here; the Job's objects (placement, RBAC,
environment) are checked on the program's rendering at the end."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.repartition import (
    RepartitionTarget,
    repartition_script,
    repartition_targets,
)
from mig_inference.names.labels import (
    CORDONED_FOR_ANNOTATION,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from mig_inference.plan import plan_stack
from mig_inference.rollout.mig_manager import DEVICE_PLUGIN_LABEL, OPERAND_LABELS, PAUSED, Durations
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests import fake_apiserver
from tests.fake_apiserver import AGENTS, FakeCluster, run_script
from tests.mocked import stack_rendering
from tests.reference import ROOT

SEVEN = ("1g.10gb",) * 7
TWO = ("3g.40gb", "3g.40gb")
THREE = ("2g.20gb",) * 3
CONFIGS = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN),
           "all-2g.20gb": (THREE, THREE), "all-disabled": (None, None)}  # fmt: skip
OLD, TARGET = "all-3g.40gb", "all-1g.10gb"
PLANNED = {"nvidia.com/mig-1g.10gb": 14}
CORDON = f"@{CORDONED_FOR_ANNOTATION}={TARGET} cordon"
UNCORDON = f"@{CORDONED_FOR_ANNOTATION}- uncordon"
RELABEL = f"{MIG_CONFIG_LABEL}={TARGET} {MIG_STATE_LABEL}-"
RECOVERY = (
    f"kubectl label node n1 {MIG_STATE_LABEL}- && kubectl delete pod -n gpu-operator "
    "-l app=nvidia-mig-manager --field-selector spec.nodeName=n1"
)


@pytest.fixture(autouse=True, params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs against both models of NVIDIA's node agents."""
    monkeypatch.setattr(fake_apiserver, "default_agents", request.param)
    return str(request.param)


def pool(*names: str, config: str = OLD, **options: Any) -> FakeCluster:
    cluster = FakeCluster(CONFIGS, **options)
    for name in names:
        cluster.add_node(name, config, labels={POOL_LABEL: "p"})
    return cluster


def run(
    cluster: FakeCluster,
    tmp_path: Path,
    *,
    named: tuple[str, ...] = (),
    max_unavailable: int = 1,
    drain: int = 30,
    reconfigure: int = 30,
    pending: int = 30,
    advertise: int = 30,
    capacity: dict[str, int] | None = None,
    poll: int = 1,
    evict_unmanaged: bool = False,
    notready: int | None = None,
) -> subprocess.CompletedProcess[str]:
    selector = None if named else f"{POOL_LABEL}=p"
    key = "pools[2].nodeNames" if named else ""
    target = RepartitionTarget("p", TARGET, selector, named, max_unavailable, len(cluster.nodes),
                               PLANNED if capacity is None else capacity, key,
                               evict_unmanaged=evict_unmanaged,
                               unmanaged_key="pools[0].evictUnmanagedPods")  # fmt: skip
    env = {**target.env(30, "gpu-operator"), "REPARTITION_POLL_SECONDS": str(poll),
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "DRAIN_TIMEOUT_SECONDS": str(drain), "RECONFIGURE_TIMEOUT_SECONDS": str(reconfigure),
           "PENDING_LIMIT_SECONDS": str(pending), "ADVERTISE_TIMEOUT_SECONDS": str(advertise)}  # fmt: skip
    if notready is not None:
        env["NOTREADY_LIMIT_SECONDS"] = str(notready)
    return run_script(cluster, tmp_path, repartition_script(), env)


def on_target(cluster: FakeCluster, node: str) -> bool:
    """The node carries the target, reports success, has the target's instances, advertises
    them, and nothing of ours holds it cordoned."""
    manager = cluster.nodes[node].manager
    assert manager is not None
    labels = cluster.node_labels(node)
    return (
        labels[MIG_CONFIG_LABEL] == TARGET
        and labels.get(MIG_STATE_LABEL) == "success"
        and manager.hardware == CONFIGS[TARGET]
        and manager.advertised() == PLANNED
        and not cluster.cordoned(node)
        and CORDONED_FOR_ANNOTATION not in cluster.annotations(node)
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def test_node_by_node_evicting_only_pods_that_hold_devices(tmp_path: Path) -> None:
    cluster = pool("n1", "n2")
    cluster.add_pod("inference", "llm-a", "n1")
    cluster.add_pod("inference", "sidecar", "n1", resource=None)
    cluster.add_pod("inference", "llm-b", "n2")
    cluster.add_pod("inference", "whole", "n2", resource="nvidia.com/gpu")
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    # n2 is cordoned with n1 (held until its turn: llm-a cannot land there), drained after it.
    assert cluster.changes == [
        f"patch n1 {CORDON}", f"patch n2 {CORDON}", "evict inference/llm-a", f"patch n1 {RELABEL}",
        f"patch n1 {UNCORDON}", "evict inference/llm-b", "evict inference/whole",
        f"patch n2 {RELABEL}", f"patch n2 {UNCORDON}",
    ]  # fmt: skip
    assert on_target(cluster, "n1") and on_target(cluster, "n2")
    assert cluster.pods_on("n1") == ["gpu-operator/nvidia-mig-manager-00001", "inference/sidecar"]
    assert f"re-partitioned to {TARGET}: n1 n2" in result.stdout


def test_max_unavailable_takes_nodes_in_batches(tmp_path: Path) -> None:
    cluster = pool("n1", "n2", "n3")
    result = run(cluster, tmp_path, max_unavailable=2)
    assert result.returncode == 0, output(result)
    steps = [c.split()[1] + (" up" if "uncordon" in c else " down" if "cordon" in c else " relabel")
             for c in cluster.changes]  # fmt: skip
    # All three cordoned at first (n3 held until its turn); n3 relabelled once n1 and n2 are back.
    assert steps == ["n1 down", "n2 down", "n3 down", "n1 relabel", "n2 relabel", "n1 up", "n2 up",
                     "n3 relabel", "n3 up"]  # fmt: skip
    assert all(on_target(cluster, n) for n in ("n1", "n2", "n3"))


# -- 1. every API read fails closed ---------------------------------------------------------------
def test_a_pod_listing_that_fails_stops_before_any_change(tmp_path: Path) -> None:
    # Today's script read the listing's status from awk: "no pod holds a GPU", then relabelled.
    cluster = pool("n1")
    cluster.add_pod("inference", "llm", "n1")
    # The first listing is of the pool's services' pods (the switch's guard, tested apart).
    cluster.fail("GET", "/api/v1/pods", times=-1, after=1)
    result = run(cluster, tmp_path)
    assert cluster.changes == []
    assert cluster.node_labels("n1")[MIG_CONFIG_LABEL] == OLD
    assert cluster.pods_on("n1")[-1] == "inference/llm"
    assert result.returncode == 1
    assert "STOPPED at node n1: listing its pods failed after 3 tries" in result.stdout
    assert "injected API error" in result.stdout


def test_a_pod_listing_that_fails_during_the_drain_uncordons_and_never_relabels(
    tmp_path: Path,
) -> None:
    cluster = pool("n1")
    cluster.add_pod("inference", "llm", "n1", budget="llm", refusals=1)
    cluster.fail("GET", "/api/v1/pods", times=-1, after=2)  # the check and one drain round pass
    result = run(cluster, tmp_path)
    assert cluster.node_labels("n1")[MIG_CONFIG_LABEL] == OLD
    assert not cluster.cordoned("n1")
    assert cluster.changes == [f"patch n1 {CORDON}", f"patch n1 {UNCORDON}"]
    assert result.returncode == 1, output(result)
    # The drain's next listing is of the pool's services' pods (is a replica Pending?).
    assert "STOPPED at the pool's services: listing their pods failed after 3 tries" in (
        result.stdout
    )


def test_a_node_read_that_fails_is_never_read_as_a_state(tmp_path: Path) -> None:
    # The first read fails three times, later ones pass: today's script took the error text for
    # "<config>|<state>" and went on to re-partition the node.
    cluster = pool("n1")
    cluster.fail("GET", "/api/v1/nodes/n1", times=3)
    result = run(cluster, tmp_path)
    assert cluster.changes == []
    assert result.returncode == 1
    assert "STOPPED at node n1: reading it failed after 3 tries" in result.stdout


def test_passing_api_errors_and_a_request_without_answer_are_retried(tmp_path: Path) -> None:
    cluster = pool("n1")
    cluster.add_pod("inference", "llm", "n1")
    cluster.fail("GET", "/api/v1/pods", times=2)
    cluster.fail("GET", "/api/v1/nodes/n1", times=1, status=0, after=3)  # no answer in time
    cluster.fail("PATCH", "/api/v1/nodes/n1", times=1)
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1")


def test_a_node_patch_that_keeps_failing_stops_the_job_at_that_patch(tmp_path: Path) -> None:
    cluster = pool("n1")
    cluster.fail("PATCH", "/api/v1/nodes/n1", times=-1)
    result = run(cluster, tmp_path)
    assert result.returncode == 1 and cluster.changes == []
    assert "STOPPED at node n1: patching it with" in result.stdout
    assert "cordoned-for" in result.stdout.split("STOPPED at node n1: patching it with")[1]


# -- 2. own cordons are marked and resumed ------------------------------------------------------
def test_a_rerun_resumes_a_node_an_interrupted_run_left_cordoned(tmp_path: Path) -> None:
    # Today's script took its own earlier cordon for someone else's: left cordoned, exit 0.
    cluster = pool("n2")
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, unschedulable=True,
                     annotations={CORDONED_FOR_ANNOTATION: TARGET})  # fmt: skip
    result = run(cluster, tmp_path)
    assert on_target(cluster, "n1") and on_target(cluster, "n2")
    assert result.returncode == 0, output(result)
    # Resumed first, with no second cordon; n2 is held cordoned meanwhile.
    assert cluster.changes[:2] == [f"patch n2 {CORDON}", f"patch n1 {RELABEL}"]
    assert "node n1: cordoned by an earlier run (for all-1g.10gb); resumed" in result.stdout


def test_a_rerun_uncordons_a_node_already_on_the_target_it_left_cordoned(tmp_path: Path) -> None:
    cluster = pool("n1", config=TARGET)
    cluster.add_node("n2", TARGET, labels={POOL_LABEL: "p"}, unschedulable=True,
                     annotations={CORDONED_FOR_ANNOTATION: TARGET})  # fmt: skip
    result = run(cluster, tmp_path)
    assert on_target(cluster, "n1") and on_target(cluster, "n2")
    assert cluster.changes == [f"patch n2 {UNCORDON}"]
    assert result.returncode == 0, output(result)


def test_a_node_cordoned_by_someone_else_is_repartitioned_and_stays_cordoned(
    tmp_path: Path,
) -> None:
    cluster = pool()
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, unschedulable=True)
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert cluster.changes == [f"patch n1 {RELABEL}"]
    assert cluster.cordoned("n1") and cluster.annotations("n1") == {}
    assert "cordoned by someone else" in result.stdout
    assert "left cordoned as it was" in result.stdout


def test_a_cordon_of_an_older_target_is_ours_too(tmp_path: Path) -> None:
    cluster = pool()
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, unschedulable=True,
                     annotations={CORDONED_FOR_ANNOTATION: "all-2g.20gb"})  # fmt: skip
    result = run(cluster, tmp_path)
    assert on_target(cluster, "n1")
    assert result.returncode == 0, output(result)
    assert cluster.changes[0] == f"patch n1 @{CORDONED_FOR_ANNOTATION}={TARGET}"


# -- 3. the drain -------------------------------------------------------------------------------
def test_a_daemonset_gpu_pod_stops_the_job_before_any_change(tmp_path: Path) -> None:
    # Today's script cordoned, evicted the DaemonSet's pod (which came back) until its deadline.
    cluster = pool("n1", "n2")
    cluster.add_pod("inference", "llm", "n1")
    cluster.add_pod("monitoring", "gpu-probe", "n2", resource="nvidia.com/gpu", owner="DaemonSet")
    result = run(cluster, tmp_path, drain=2)
    assert cluster.changes == []
    assert result.returncode == 1
    assert "STOPPED at node n2: pods owned by a DaemonSet hold its GPUs: monitoring/gpu-probe" in (
        result.stdout
    )


def test_a_drain_that_cannot_finish_uncordons_and_names_the_blocker(tmp_path: Path) -> None:
    # Today's script left the node cordoned after evicting the service's replicas.
    cluster = pool("n1", "n2")
    cluster.add_pod("inference", "llm", "n1")
    cluster.add_pod("team-b", "trainer", "n1", budget="trainer-pdb", refusals=-1)
    for name in ("other", "another"):  # as busy as n1, which goes first by name
        cluster.add_pod("inference", name, "n2")
    result = run(cluster, tmp_path, drain=0)
    assert cluster.node_labels("n1")[MIG_CONFIG_LABEL] == OLD and not cluster.cordoned("n1")
    assert result.returncode == 1
    out = result.stdout
    assert "STOPPED at the drain of n1: after 0s these pods still hold GPU or MIG devices:" in out
    assert "team-b/trainer: Error from server (TooManyRequests): Cannot evict pod as it would " \
        "violate the pod's disruption budget." in out  # fmt: skip
    assert "node n1: uncordoned (never relabelled)" in out
    assert "node n2: uncordoned (held until its turn, never relabelled)" in out
    assert "left untouched (still on their old config): n2" in out
    assert cluster.changes == [f"patch n1 {CORDON}", f"patch n2 {CORDON}", "evict inference/llm",
                               f"patch n1 {UNCORDON}", f"patch n2 {UNCORDON}"]  # fmt: skip
    assert not cluster.cordoned("n2")


def test_an_eviction_refused_for_a_while_is_retried(tmp_path: Path) -> None:
    cluster = pool("n1")
    cluster.add_pod("inference", "guarded", "n1", budget="guarded", refusals=2)
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert result.stdout.count("inference/guarded: Error from server (TooManyRequests)") == 2
    assert on_target(cluster, "n1")


# -- the pool's own budgets: strict between updates, relaxed only while the Job runs --------------
RELAXED = "mig-inference.io/relaxed-from"


def test_the_pool_s_budgets_are_relaxed_while_the_job_runs_and_restored_after(
    tmp_path: Path,
) -> None:
    # One node holds both replicas of a service whose budget lets one go at a time: the drain
    # needs the budget relaxed, and only while the Job runs.
    cluster = pool("n1")
    cluster.add_service("inference", "chat", 2, "nvidia.com/mig-3g.40gb", pool="p", on={"n1": 2})
    cluster.add_service("team-b", "other", 1, "nvidia.com/mig-3g.40gb", pool="q", on={},
                        max_unavailable=0)  # fmt: skip
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1")
    budget = cluster.budgets[("inference", "chat")]
    assert (
        budget["spec"]["maxUnavailable"] == 1 and RELAXED not in budget["metadata"]["annotations"]
    )
    assert [c for c in cluster.changes if c.startswith("patch pdb")] == [
        f"patch pdb inference/chat @{RELAXED}=1 maxUnavailable=100%",
        f"patch pdb inference/chat @{RELAXED}- maxUnavailable=1",
    ]
    assert cluster.budgets[("team-b", "other")]["spec"]["maxUnavailable"] == 0  # not ours
    assert "PodDisruptionBudget inference/chat: maxUnavailable 1 again" in result.stdout


def test_a_stop_restores_the_budgets_too(tmp_path: Path) -> None:
    # chat's budget is relaxed for n1's drain, which someone else's budget stops.
    cluster = pool("n1")
    cluster.add_service("inference", "chat", 2, "nvidia.com/mig-3g.40gb", pool="p", on={"n1": 2})
    cluster.add_pod("team-b", "trainer", "n1", budget="trainer-pdb", refusals=-1)
    result = run(cluster, tmp_path, drain=0)
    assert result.returncode == 1 and "STOPPED at the drain of n1" in result.stdout
    assert f"patch pdb inference/chat @{RELAXED}=1 maxUnavailable=100%" in cluster.changes
    budget = cluster.budgets[("inference", "chat")]
    assert (
        budget["spec"]["maxUnavailable"] == 1 and RELAXED not in budget["metadata"]["annotations"]
    )


def test_a_budget_a_killed_run_left_relaxed_is_restored(tmp_path: Path) -> None:
    cluster = pool("n1", config=TARGET)
    cluster.add_service("inference", "chat", 2, "nvidia.com/mig-1g.10gb", pool="p", on={"n1": 2},
                        max_unavailable="100%")  # fmt: skip
    cluster.budgets[("inference", "chat")]["metadata"]["annotations"][RELAXED] = "1"
    cluster.add_node("n2", OLD, labels={POOL_LABEL: "p"})
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    budget = cluster.budgets[("inference", "chat")]
    assert (
        budget["spec"]["maxUnavailable"] == 1 and RELAXED not in budget["metadata"]["annotations"]
    )


def test_the_next_node_waits_until_the_replicas_moved_back_are_serving(tmp_path: Path) -> None:
    # Each node serves 7 of 14 replicas on 1g.10gb slices, a profile the new layout keeps. The
    # old Job drained n2 while n1's replicas, back on n1, were still loading: none served.
    configs = {**CONFIGS, "mixed": (SEVEN, TWO)}
    cluster = FakeCluster(configs)
    for name in ("n1", "n2"):
        cluster.add_node(name, "mixed", labels={POOL_LABEL: "p"})
    cluster.add_service("inference", "chat", 14, "nvidia.com/mig-1g.10gb", pool="p",
                        on={"n1": 7, "n2": 7}, start=25)  # fmt: skip
    result = run(cluster, tmp_path, reconfigure=120)
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1") and on_target(cluster, "n2")
    assert cluster.least_ready("chat") == 7
    assert "waiting for the pool's services to settle: loading:" in result.stdout
    assert cluster.ready_of("chat") >= 7


def test_replicas_whose_slice_is_gone_are_not_waited_for(tmp_path: Path) -> None:
    cluster = pool("n1", "n2")
    cluster.add_service("inference", "chat", 8, "nvidia.com/mig-3g.40gb", pool="p",
                        on={"n1": 4, "n2": 4}, start=25)  # fmt: skip
    result = run(cluster, tmp_path, reconfigure=120)
    assert result.returncode == 0, output(result)
    assert "waiting for the pool's services" not in result.stdout
    assert cluster.ready_of("chat") == 0  # 3g.40gb is gone until the service moves to 1g.10gb


# -- 4. relabel so that success is provably about the target --------------------------------------
def test_the_relabel_is_one_patch_that_clears_the_state(tmp_path: Path) -> None:
    cluster = pool("n1")
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert f"patch n1 {RELABEL}" in cluster.changes


def test_a_relabel_whose_answer_was_lost_is_not_sent_again(tmp_path: Path) -> None:
    # The relabel reached the API server, its answer did not; the MIG manager (instant here) wrote
    # `success` before the Job tried again. The old retry sent the same patch, clearing that
    # `success` for good (the label's value did not change again): the Job waited out its deadline.
    instant = Durations(pod_start=0, checks=0, operands_stop=0, apply=0, plugin_start=0)
    cluster = pool("n1", durations=instant)
    cluster.fail("PATCH", "/api/v1/nodes/n1", times=1, after=1, applied=True)  # after the cordon
    result = run(cluster, tmp_path, reconfigure=3)
    assert result.returncode == 0, output(result)
    assert cluster.changes.count(f"patch n1 {RELABEL}") == 1
    assert on_target(cluster, "n1")


def test_a_relabel_refused_because_the_node_changed_is_read_and_sent_again(
    tmp_path: Path,
) -> None:
    # The relabel carries the version the Job read; a label someone else changes in between
    # makes the API refuse it (409), and the Job reads the node again and relabels.
    cluster = pool("n1")
    cluster.before("PATCH", "/api/v1/nodes/n1", lambda: cluster.relabel("n1", {"team": "a"}),
                   after=1)  # fmt: skip
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert 409 in cluster.statuses
    assert cluster.changes.count(f"patch n1 {RELABEL}") == 1 and on_target(cluster, "n1")


def test_gpu_pods_without_a_controller_stop_the_job_before_any_change(tmp_path: Path) -> None:
    # An eviction deletes a bare pod for good; `kubectl drain` refuses it without --force.
    cluster = pool("n1", "n2")
    cluster.add_pod("inference", "llm", "n1")
    cluster.add_pod("research", "notebook", "n2", owner=None)
    cluster.add_pod("research", "adopted", "n2", owner="Foo", controller=False)
    result = run(cluster, tmp_path)
    assert cluster.changes == []
    assert result.returncode == 1
    assert (
        "STOPPED at node n2: pods that declare no controller hold its GPUs: research/adopted "
        "research/notebook. No controller would recreate them, so an eviction deletes them for "
        "good; `kubectl drain` refuses them too." in result.stdout
    )
    assert "set pools[0].evictUnmanagedPods: true" in result.stdout


def test_the_stack_may_let_the_job_evict_pods_without_a_controller(tmp_path: Path) -> None:
    cluster = pool("n1")
    cluster.add_pod("research", "notebook", "n1", owner=None)
    result = run(cluster, tmp_path, evict_unmanaged=True)
    assert result.returncode == 0, output(result)
    assert "evict research/notebook" in cluster.changes and on_target(cluster, "n1")


def test_a_stop_names_as_cordoned_only_the_nodes_that_are(tmp_path: Path) -> None:
    # n1 is done and uncordoned; reading n2 for the next batch fails (its first two reads, to
    # list the pool and to hold it, succeed). The old stop still listed n1 (the finished batch)
    # as staying cordoned.
    cluster = pool("n1", "n2")
    cluster.fail("GET", "/api/v1/nodes/n2", times=-1, after=3)
    result = run(cluster, tmp_path)
    assert result.returncode == 1
    assert "STOPPED at node n2: reading it failed after 3 tries" in result.stdout
    assert on_target(cluster, "n1")
    assert "stays cordoned" not in result.stdout, result.stdout
    # n2, held cordoned since n1's batch, cannot be read, nor patched (kubectl reads it first):
    # the stop says how to lift the cordon by hand.
    assert "node n2: could not be uncordoned" in result.stdout
    assert "by hand: kubectl uncordon n2" in result.stdout


def test_a_failed_node_on_the_target_is_reapplied_by_restarting_its_mig_manager(
    tmp_path: Path,
) -> None:
    # Today's script relabelled it with the same value: the MIG manager never reacts; time out.
    cluster = pool("n2", config=TARGET)
    cluster.add_node("n1", TARGET, state="failed", hardware=CONFIGS[OLD],
                     labels={POOL_LABEL: "p"}, unschedulable=True,
                     annotations={CORDONED_FOR_ANNOTATION: TARGET})  # fmt: skip
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert cluster.changes[:2] == [
        f"patch n1 {MIG_STATE_LABEL}-", "delete gpu-operator/nvidia-mig-manager-00002"
    ]  # fmt: skip
    assert "restarted its MIG manager (nvidia-mig-manager-00002)" in result.stdout
    assert on_target(cluster, "n1") and on_target(cluster, "n2")


def wedge(cluster: FakeCluster, node: str, config: str) -> None:
    """NVIDIA's v0.15.0 wedge on `node`: after a full reconfigure, a run that fails (its GPUs in
    use) leaves the operands paused; then `config`, already applied, reports success without
    restoring them."""
    cluster.relabel(node, {MIG_CONFIG_LABEL: TARGET})
    cluster.settle(100)
    cluster.add_pod("inference", "busy", node)
    cluster.relabel(node, {MIG_CONFIG_LABEL: "all-2g.20gb"})
    cluster.settle(100)
    cluster.remove_pod("inference", "busy")
    cluster.relabel(node, {MIG_CONFIG_LABEL: config})
    cluster.settle(100)


def test_success_with_paused_operands_is_not_on_the_target(tmp_path: Path) -> None:
    # Today's script took "<target>|success" for done, with the device plugin off.
    cluster = pool("n1")
    wedge(cluster, "n1", TARGET)
    labels = cluster.node_labels("n1")
    assert labels[MIG_STATE_LABEL] == "success" and labels[DEVICE_PLUGIN_LABEL] == PAUSED
    result = run(cluster, tmp_path)
    assert on_target(cluster, "n1")
    assert all(cluster.node_labels("n1")[key] == "true" for key in OPERAND_LABELS)
    assert result.returncode == 0, output(result)
    assert "operands paused" in result.stdout and "restarted its MIG manager" in result.stdout


def test_paused_operands_are_not_on_the_target_while_the_kubelet_shows_the_old_devices(
    tmp_path: Path,
) -> None:
    # The node carries the target with `success`, but its device plugin is paused (the v0.15.0
    # wedge) and the kubelet has not reported since it stopped: the node object still shows the
    # planned devices. The Job must not take it for done: it restarts the MIG manager.
    cluster = pool("n1", config=TARGET)
    cluster.freeze_status("n1")
    cluster.relabel("n1", {DEVICE_PLUGIN_LABEL: PAUSED})
    result = run(cluster, tmp_path)
    assert "already on all-1g.10gb" not in result.stdout
    assert "restarted its MIG manager" in result.stdout, output(result)
    assert any(change.startswith("delete gpu-operator/nvidia-mig-manager") for change in
               cluster.changes)  # fmt: skip


def test_a_stale_success_from_a_run_in_progress_cannot_pass(tmp_path: Path) -> None:
    # The MIG manager is applying an older value when the Job relabels: that run's `success` comes
    # after the patch. Today's script took it for the target's and uncordoned a node that then
    # went on to re-partition.
    slow = Durations(pod_start=2, checks=1, operands_stop=1, apply=25, plugin_start=1)
    cluster = pool("n1", config="all-disabled", durations=slow)
    cluster.relabel("n1", {MIG_CONFIG_LABEL: OLD})
    # The reconfiguration deadline (simulated seconds) holds the older run and the target's.
    result = run(cluster, tmp_path, reconfigure=120)
    assert on_target(cluster, "n1")
    assert result.returncode == 0, output(result)


def test_success_without_the_planned_devices_stops_after_the_advertise_deadline(
    tmp_path: Path,
) -> None:
    cluster = pool("n1", "n2")
    result = run(cluster, tmp_path, capacity={"nvidia.com/mig-1g.10gb": 28}, advertise=1)
    assert result.returncode == 1
    assert (
        "STOPPED at node n1: nvidia.com/mig.config.state=success, but after 1s it advertises "
        "'nvidia.com/mig-1g.10gb=14' where the plan has 'nvidia.com/mig-1g.10gb=28'"
    ) in result.stdout
    assert cluster.cordoned("n1")


def test_time_shared_devices_count_as_the_plan_has_them(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, shared_by=2, rename=True)
    result = run(cluster, tmp_path, capacity={"nvidia.com/mig-1g.10gb.shared": 28})
    assert result.returncode == 0, output(result)
    assert "applied (nvidia.com/mig-1g.10gb.shared=28); uncordoned" in result.stdout


# -- 5. separate deadlines; failed and time-outs stop, a re-run recovers ----------------------------
def test_failed_stops_keeps_the_node_cordoned_and_a_rerun_recovers_it(tmp_path: Path) -> None:
    cluster = pool("n1", "n2", "n3")
    del cluster.configs[TARGET]  # the MIG manager's mig-parted config lacks it: failed at once
    cluster.add_pod("inference", "llm", "n2")
    first = run(cluster, tmp_path)
    assert first.returncode == 1
    assert cluster.cordoned("n1") and not cluster.cordoned("n2")
    assert cluster.pods_on("n2")[-1] == "inference/llm"
    # The cause fixed, `pulumi up` runs the Job again: it resumes n1 and re-triggers it.
    cluster.configs[TARGET] = (SEVEN, SEVEN)
    (tmp_path / "again").mkdir()
    second = run(cluster, tmp_path / "again")
    assert all(on_target(cluster, n) for n in ("n1", "n2", "n3"))
    assert second.returncode == 0, output(second)
    assert "node n1: cordoned by an earlier run (for all-1g.10gb); resumed" in second.stdout
    out = first.stdout
    assert (
        "STOPPED at node n1: nvidia.com/mig.config.state=failed with "
        "nvidia.com/mig.config=all-1g.10gb" in out
    )
    assert "node n1 stays cordoned (mig-inference.io/cordoned-for=all-1g.10gb)" in out
    assert RECOVERY in out
    assert "left untouched (still on their old config): n2 n3" in out


def test_a_pending_that_does_not_move_after_a_restart_stops(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, operands_stuck=True)
    result = run(cluster, tmp_path, pending=0)
    assert result.returncode == 1
    assert "restarted its MIG manager" in result.stdout
    assert (
        "STOPPED at node n1: nvidia.com/mig.config.state=pending for 0s without moving, again "
        "after its MIG manager was restarted" in result.stdout
    )
    assert cluster.cordoned("n1")


def test_the_mig_manager_s_pending_wedge_is_recovered_by_restarting_it(tmp_path: Path) -> None:
    # An operand pod outlives the MIG manager's 5-minute wait (5 simulated seconds here): its run
    # ends with no state, `pending` for good (NVIDIA/gpu-operator#2833). The pod goes later; only a
    # restart of the MIG manager applies the label again. The Job's limit on `pending` (20
    # simulated seconds) is longer than a healthy run's pending (the restarted manager's start,
    # checks and operand stop), shorter than the wedge's.
    cluster = FakeCluster(CONFIGS)
    node = cluster.add_node("n1", OLD, labels={POOL_LABEL: "p"}, operands_stuck=True)
    manager = node.manager
    assert manager is not None

    def unstick() -> None:
        manager.operands_stuck = False

    # By the time the watchdog fires the stuck operand has gone (the wedge outlives it).
    cluster.after_change(lambda change: change.startswith("delete gpu-operator/nvidia-mig-manager"),
                         unstick)  # fmt: skip
    result = run(cluster, tmp_path, pending=20, reconfigure=120)
    assert result.returncode == 0, output(result)
    assert (
        "node n1: nvidia.com/mig.config.state=pending for 20s without moving: the MIG manager's "
        "known wedge (NVIDIA/gpu-operator#2833); restarting its MIG manager pod" in result.stdout
    )
    assert on_target(cluster, "n1")


def test_a_node_its_mode_change_left_notready_stops_the_job_with_the_way_forward(
    tmp_path: Path,
) -> None:
    # NVIDIA/gpu-operator#2415: with the host's driver the MIG manager stops and restarts the
    # host's kubelet around a MIG mode change; on AL2023 the node stays NotReady, its labels
    # written (`success`) and nothing advertised. No pod restart cures it: the Job says so at
    # once, names the cure (a new instance) and leaves the node cordoned.
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", "all-disabled", labels={POOL_LABEL: "p"}, host_gpu_clients=True,
                     kubelet_restart_breaks=True)  # fmt: skip
    result = run(cluster, tmp_path, advertise=2, notready=0)
    assert result.returncode == 1
    assert (
        f"STOPPED at node n1: {MIG_STATE_LABEL}=success with {MIG_CONFIG_LABEL}={TARGET}, but "
        "node n1 is NotReady since its MIG manager ended its run: the known fault of a MIG mode "
        "change with the host's driver" in result.stdout
    ), output(result)
    assert "(NVIDIA/gpu-operator#2415;" in result.stdout
    assert "EKS node auto repair replaces a node NotReady for 30 minutes" in result.stdout
    assert not [c for c in cluster.changes if c.startswith("delete gpu-operator/nvidia-mig")]
    assert cluster.cordoned("n1")


def test_a_reboot_is_waited_for(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", "all-disabled", labels={POOL_LABEL: "p"}, with_reboot=True,
                     mode_change_needs_reboot=True)  # fmt: skip
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert any("n1 reboots" in event for event in cluster.events)
    assert on_target(cluster, "n1")


def test_the_reconfiguration_deadline_stops(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", "all-disabled", labels={POOL_LABEL: "p"}, with_reboot=True,
                     mode_change_needs_reboot=True)  # fmt: skip
    result = run(cluster, tmp_path, reconfigure=0)
    assert result.returncode == 1
    assert "STOPPED at node n1: no nvidia.com/mig.config.state=success with the planned devices " \
        "within 0s" in result.stdout  # fmt: skip
    assert cluster.cordoned("n1")


def test_the_drain_has_its_own_deadline(tmp_path: Path) -> None:
    # A drain of about two seconds, a reconfiguration deadline of one: today one deadline,
    # started at the cordon, covered both.
    instant = Durations(pod_start=0, checks=0, operands_stop=0, apply=0, plugin_start=0)
    cluster = pool("n1", durations=instant)
    cluster.add_pod("inference", "guarded", "n1", budget="guarded", refusals=2)
    result = run(cluster, tmp_path, drain=30, reconfigure=1, poll=1)
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1")


# -- 6. vanished and missing nodes ------------------------------------------------------------------
def test_a_node_that_vanishes_mid_run_is_skipped_and_said_so(tmp_path: Path) -> None:
    cluster = pool("n1", "n2")
    cluster.add_pod("inference", "llm", "n2")
    cluster.after_change(lambda change: change == "evict inference/llm",
                         lambda: cluster.delete_node("n2"))  # fmt: skip
    result = run(cluster, tmp_path)
    assert on_target(cluster, "n1") and "n2" not in cluster.nodes
    assert result.returncode == 0, output(result)
    assert "node n2: gone (scaled away or replaced); skipped" in result.stdout
    assert f"re-partitioned to {TARGET}: n1 (gone, skipped: n2)" in result.stdout


def test_named_nodes_that_do_not_exist_stop_before_any_change(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", OLD)
    result = run(cluster, tmp_path, named=("n1", "gpu-node-9"))
    assert cluster.changes == []
    assert result.returncode == 1
    assert (
        "STOPPED before any change: pools[2].nodeNames names nodes the cluster does not have: "
        "gpu-node-9" in result.stdout
    )


def test_existing_pools_repartition_by_node_name(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", OLD)
    cluster.add_node("n2", OLD)
    result = run(cluster, tmp_path, named=("n1", "n2"))
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1") and on_target(cluster, "n2")


def test_a_node_swapped_out_of_an_existing_pool_is_released_after_its_pods_move(
    tmp_path: Path,
) -> None:
    # nodeNames [n1, n2] -> [n1, n3]: Pulumi deletes n2's patches last, stripping the pool's
    # labels while the service's replicas still ran there (and the GPU Operator's fallback layout
    # then met busy GPUs). The Job moves them first.
    cluster = pool("n1", "n2")
    cluster.add_node("n3", OLD)
    cluster.add_pod("inference", "llm-on-n2", "n2")
    result = run(cluster, tmp_path, named=("n1", "n3"))
    assert result.returncode == 0, output(result)
    assert on_target(cluster, "n1") and on_target(cluster, "n3")
    assert cluster.changes[-3:] == [
        f"patch n2 {CORDON}", "evict inference/llm-on-n2",
        f"patch n2 {POOL_LABEL}- @{CORDONED_FOR_ANNOTATION}- uncordon",
    ]  # fmt: skip
    assert POOL_LABEL not in cluster.node_labels("n2") and not cluster.cordoned("n2")
    assert cluster.node_labels("n2")[MIG_CONFIG_LABEL] == OLD  # Pulumi's delete removes it
    assert "released from the pool (no longer in pools[2].nodeNames): n2" in result.stdout
    assert result.stdout.rstrip().endswith("; released: n2")


def test_a_release_whose_drain_cannot_finish_keeps_the_node_in_the_pool(tmp_path: Path) -> None:
    cluster = pool("n1", "n2")
    cluster.add_pod("team-b", "trainer", "n2", budget="trainer-pdb", refusals=-1)
    result = run(cluster, tmp_path, named=("n1",), drain=0)
    assert result.returncode == 1
    assert "STOPPED at the drain of n2" in result.stdout
    assert cluster.node_labels("n2")[POOL_LABEL] == "p" and not cluster.cordoned("n2")
    assert on_target(cluster, "n1")


def test_a_node_that_joins_during_the_roll_out_is_repartitioned_too(tmp_path: Path) -> None:
    cluster = pool("n1")
    cluster.after_change(lambda change: change.startswith("patch n1") and change.endswith("uncordon"),
                         lambda: cluster.add_node("n9", OLD, labels={POOL_LABEL: "p"}))  # fmt: skip
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert f"re-partitioned to {TARGET}: n1 n9" in result.stdout
    assert on_target(cluster, "n9")


def test_nodes_already_on_the_config_are_left_alone(tmp_path: Path) -> None:
    cluster = pool("n2")
    cluster.add_node("n1", TARGET, labels={POOL_LABEL: "p"})
    result = run(cluster, tmp_path)
    assert result.returncode == 0, output(result)
    assert "node n1: already on all-1g.10gb (nvidia.com/mig-1g.10gb=14)" in result.stdout
    assert not any(" n1 " in f"{change} " for change in cluster.changes)


# -- the Job's objects --------------------------------------------------------------------------
def test_the_job_gets_the_plan_s_devices_namespace_and_deadlines() -> None:
    [target] = repartition_targets(plan_stack(load_stack("existing")))
    assert target.node_names == ("gpu-node-01", "gpu-node-02") and target.selector is None
    env = target.env(1800, "gpu-operator")
    assert env["REPARTITION_NODES"] == "gpu-node-01 gpu-node-02"
    assert env["REPARTITION_NODES_KEY"] == "pools[0].nodeNames"
    # all-balanced on 8 H100s: 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb per GPU
    assert env["CAPACITY_PER_NODE"] == (
        "nvidia.com/mig-1g.10gb=16 nvidia.com/mig-2g.20gb=8 nvidia.com/mig-3g.40gb=8"
    )
    assert env["DRAIN_TIMEOUT_SECONDS"] == env["RECONFIGURE_TIMEOUT_SECONDS"] == "1800"
    assert env["OPERATOR_NAMESPACE"] == "gpu-operator"
    assert target.budget_seconds(1800) == 2 * (4 * 1800 + 300)


def test_evicting_pods_without_a_controller_is_the_stack_s_choice_on_in_place_pools() -> None:
    from mig_inference.errors import MigError
    from tests.rollout.test_rollout import stack

    [target] = repartition_targets(plan_stack(load_stack("existing")))
    assert "EVICT_UNMANAGED" not in target.env(60, "gpu-operator")
    assert target.env(60, "gpu-operator")["UNMANAGED_KEY"] == "pools[0].evictUnmanagedPods"
    config = stack(rollout="in-place", evictUnmanagedPods=True)
    [allowed] = repartition_targets(
        plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))
    )
    assert allowed.env(60, "gpu-operator")["EVICT_UNMANAGED"] == "1"
    with pytest.raises(MigError) as caught:
        plan_stack(
            parse_stack(
                "t", stack(evictUnmanagedPods=True), pinned_operator_version=GPU_OPERATOR_VERSION
            )
        )
    [error] = caught.value.errors
    assert error.path == "mig-inference:pools[0].evictUnmanagedPods"
    assert "only applies to rollout: in-place" in error.message


def test_cloud_pools_in_blue_green_have_no_repartition_job() -> None:
    assert repartition_targets(plan_stack(load_stack("gke-h100"))) == []


def job(stack: str, prefix: str) -> dict[str, Any]:
    jobs = [j.inputs for j in stack_rendering(stack).of_type("kubernetes:batch/v1:Job")]
    [found] = [j for j in jobs if j["metadata"]["name"].startswith(prefix)]
    return found


@pytest.mark.parametrize("prefix", ["mig-repartition-lab-h100", "mig-ready-gate"])
def test_the_jobs_never_run_on_a_node_they_may_repartition(prefix: str) -> None:
    spec = job("existing", prefix)["spec"]["template"]["spec"]
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "DoesNotExist"}]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn",
                                     "values": ["gpu-node-01", "gpu-node-02"]}]  # fmt: skip


def test_cloud_stacks_keep_the_gate_off_their_gpu_pools() -> None:
    spec = job("gke-h100", "mig-ready-gate")["spec"]["template"]["spec"]
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {"matchExpressions": [{"key": POOL_LABEL, "operator": "DoesNotExist"}]}


def test_the_mig_manager_restart_is_allowed_only_in_the_operator_namespace() -> None:
    rendering = stack_rendering("existing")
    [role] = [r.inputs for r in rendering.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
              if r.inputs["metadata"]["name"] == "mig-repartition-lab-h100"]  # fmt: skip
    assert role["metadata"]["namespace"] == "gpu-operator"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]
    [binding] = [b.inputs for b in rendering.of_type(
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
    ) if b.inputs["metadata"]["name"] == "mig-repartition-lab-h100"]  # fmt: skip
    assert binding["metadata"]["namespace"] == "gpu-operator"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "mig-repartition-lab-h100"}  # fmt: skip
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mig-repartition-lab-h100",
                                    "namespace": "gpu-operator"}]  # fmt: skip
    # The gate may restart a MIG manager wedged in `pending`: there, and nowhere else.
    gate_roles = [r.inputs for r in rendering.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
                  if "gate" in r.inputs["metadata"]["name"]]  # fmt: skip
    assert [(r["metadata"]["namespace"], r["rules"]) for r in gate_roles] == [
        ("gpu-operator", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}])
    ]


# -- the documented way back ------------------------------------------------------------------------
def readme_block(containing: str) -> str:
    """The troubleshooting page's ```sh block that contains `containing` (its commands, unindented)."""
    text = (ROOT / "docs" / "troubleshooting.md").read_text()
    blocks = re.findall(r"^( *)```sh\n(.*?)^\1```", text, re.MULTILINE | re.DOTALL)
    [block] = [textwrap.dedent(body) for _, body in blocks if containing in body]
    return block


def test_the_readme_s_commands_re_apply_a_failed_node(tmp_path: Path) -> None:
    # The README said `kubectl label node NODE nvidia.com/mig.config=<config> --overwrite`: the
    # value does not change, so NVIDIA's MIG manager never runs again.
    commands = readme_block("nvidia.com/mig.config.state-").replace("NODE", "n1")
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", TARGET, state="failed", hardware=CONFIGS[OLD])
    result = run_script(cluster, tmp_path, f"set -e\n{commands}", {})
    assert result.returncode == 0, output(result)
    cluster.settle(100)
    labels = cluster.node_labels("n1")
    assert labels[MIG_STATE_LABEL] == "success" and labels[MIG_CONFIG_LABEL] == TARGET
    manager = cluster.nodes["n1"].manager
    assert manager is not None and manager.advertised() == PLANNED
