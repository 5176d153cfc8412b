"""The re-partitioning Job's pacing when the pool has room to spare: a replica evicted from one
node must not land on a node still to be switched and be evicted again there before it serves,
and no service may drop below the replicas outside the batch being drained. The real script
against the fake API server (a layout change and the move to DRA), and `diff` through the rollout
simulator on the same shape of pool."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from mig_inference.kube.repartition import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    RepartitionTarget,
    repartition_script,
)
from mig_inference.names.labels import CORDONED_FOR_ANNOTATION, MIG_CONFIG_LABEL, POOL_LABEL
from tests.fake_apiserver import AGENTS, DRA_NAMESPACE, FakeCluster, run_script
from tests.kube.test_dra_move import mig_against_deployed

TWO = ("3g.40gb", "3g.40gb")
THREE = ("2g.20gb",) * 3
WITH_1G = ("3g.40gb", "3g.40gb", "1g.10gb")
CONFIGS = {"all-3g.40gb": (TWO, TWO), "mixed": (TWO, THREE), "with-1g": (WITH_1G, WITH_1G)}
RESOURCE = "nvidia.com/mig-3g.40gb"
CHANGES = {
    # A new layout that keeps the service's profile on one GPU of two.
    "layout": ("mixed", {RESOURCE: 2, "nvidia.com/mig-2g.20gb": 3}, False),
    # The move to DRA with the extended-resource bridge (the pods keep their requests): the
    # layout stays, the plugin changes.
    "dra-move": ("all-3g.40gb", {RESOURCE: 4}, True),
    # A new layout that keeps every 3g.40gb slice.
    "layout-keeping": ("with-1g", {RESOURCE: 4, "nvidia.com/mig-1g.10gb": 2}, False),
}


@pytest.fixture(params=AGENTS)
def agents(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("tests.fake_apiserver.default_agents", request.param)
    return str(request.param)


def spare_room() -> FakeCluster:
    """Three nodes of four 3g.40gb slices; `chat` has 2 replicas on n1 and 2 on n2, loading 60s
    each; n2 has 2 slices free and n3 4, so a replica evicted from n1 can land on n2."""
    cluster = FakeCluster(CONFIGS)
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name, "all-3g.40gb", labels={POOL_LABEL: "p"})
    cluster.add_service("inference", "chat", 4, RESOURCE, pool="p", on={"n1": 2, "n2": 2},
                        start=60)  # fmt: skip
    return cluster


def repartition(
    cluster: FakeCluster, tmp_path: Path, change: str, reconfigure: int = 120, drain: int = 60
) -> subprocess.CompletedProcess[str]:
    config, planned, dra = CHANGES[change]
    target = RepartitionTarget(
        "p", config, f"{POOL_LABEL}=p", (), 1, len(cluster.nodes), planned,
        dra=dra, dra_namespace=DRA_NAMESPACE if dra else "", switch_keeps_requests=dra,
    )  # fmt: skip
    env = {**target.env(60, "gpu-operator"), "REPARTITION_POLL_SECONDS": "1",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "ADVERTISE_TIMEOUT_SECONDS": "30", "RECONFIGURE_TIMEOUT_SECONDS": str(reconfigure),
           "DRAIN_TIMEOUT_SECONDS": str(drain)}  # fmt: skip
    return run_script(cluster, tmp_path, repartition_script(), env)


@pytest.mark.usefixtures("agents")
@pytest.mark.parametrize("change", ["layout", "dra-move"])
def test_an_evicted_replica_is_not_evicted_again_before_it_serves(
    tmp_path: Path, change: str
) -> None:
    cluster = spare_room()
    result = repartition(cluster, tmp_path, change)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cluster.evicted_loading == [], result.stdout
    # One node at a time, each holding at most 2 of the 4 replicas: 2 keep serving throughout.
    assert cluster.least_ready("chat") >= 2, (cluster.ready_history, result.stdout)


@pytest.mark.usefixtures("agents")
@pytest.mark.parametrize("change", ["layout-keeping", "dra-move"])
def test_a_batch_is_drained_only_once_every_replica_elsewhere_serves(
    tmp_path: Path, change: str
) -> None:
    """n2's replicas land on n1 (switched first, room to spare) and load there: n3 is drained
    only once they serve, though n1 is not the node the last batch switched."""
    cluster = FakeCluster(CONFIGS)
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name, "all-3g.40gb", labels={POOL_LABEL: "p"})
    cluster.add_service("inference", "chat", 6, RESOURCE, pool="p",
                        on={"n1": 2, "n2": 2, "n3": 2}, start=60)  # fmt: skip
    result = repartition(cluster, tmp_path, change, reconfigure=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert cluster.evicted_loading == [], result.stdout
    assert cluster.least_ready("chat") >= 4, (cluster.ready_history, result.stdout)
    assert "waiting for the pool's services to settle: loading:" in result.stdout


@pytest.mark.usefixtures("agents")
def test_a_stop_uncordons_every_node_held_and_never_relabelled(tmp_path: Path) -> None:
    """An earlier run, killed, left n1 and n2 cordoned (marked) and never relabelled. This run
    resumes n1, holds n2 and n3, and stops at n1's drain: all three are uncordoned, as a
    cordon of the Job on a node whose layout it never touched must not outlive it."""
    cluster = FakeCluster(CONFIGS)
    for name in ("n1", "n2", "n3"):
        earlier = name != "n3"
        cluster.add_node(name, "all-3g.40gb", labels={POOL_LABEL: "p"}, unschedulable=earlier,
                         annotations={CORDONED_FOR_ANNOTATION: "mixed"} if earlier else None)  # fmt: skip
    cluster.add_pod("team-b", "trainer", "n1", RESOURCE, budget="trainer-pdb", refusals=-1)
    config, planned, _ = CHANGES["layout"]
    target = RepartitionTarget("p", config, f"{POOL_LABEL}=p", (), 1, 3, planned)
    env = {**target.env(60, "gpu-operator"), "REPARTITION_POLL_SECONDS": "1",
           "KUBECTL_RETRY_SECONDS": "0", "KUBECTL_REQUEST_TIMEOUT": "1s",
           "DRAIN_TIMEOUT_SECONDS": "0"}  # fmt: skip
    result = run_script(cluster, tmp_path, repartition_script(), env)
    assert result.returncode == 1
    assert "STOPPED at the drain of n1" in result.stdout
    assert "node n2: cordoned by an earlier run, never relabelled; held until its turn" in (
        result.stdout
    )
    for name in ("n1", "n2", "n3"):
        assert not cluster.cordoned(name), (name, result.stdout)
        assert CORDONED_FOR_ANNOTATION not in cluster.annotations(name)


@pytest.mark.usefixtures("agents")
def test_replicas_that_do_not_turn_ready_stop_the_job_before_the_next_drain(
    tmp_path: Path,
) -> None:
    """n3, empty, is switched first; n1's replicas move onto it but do not turn Ready (a model
    that never loads: the strict budget refuses the second until the drain's deadline relaxes
    it), nor by the reconfiguration deadline: the Job stops before draining n2, naming them, and
    lifts the cordons of the nodes it held; n2 keeps serving its replicas."""
    cluster = spare_room()
    cluster.services[("inference", "chat")].start = 10_000
    result = repartition(cluster, tmp_path, "layout", reconfigure=60, drain=10)
    assert result.returncode == 1, result.stdout
    assert (
        "STOPPED at the pool's services: after 60s they have not settled before the drain of the "
        "next batch: still loading: inference/chat-" in result.stdout
    )
    assert "@n3" in result.stdout.split("still loading:")[1]
    for name in ("n1", "n2", "n3"):
        assert not cluster.cordoned(name), (name, result.stdout)
    assert cluster.node_labels("n2")[MIG_CONFIG_LABEL] == "all-3g.40gb"
    assert cluster.ready_of("chat") == 2  # n2's, never evicted
    assert "PodDisruptionBudget inference/chat: maxUnavailable 1 again" in result.stdout


# -- the rollout simulator (`diff`) ----------------------------------------------------------
def diff_stacks(tmp_path: Path, change: str) -> tuple[Path, Path]:
    """Three nodes of one in-place pool (16 3g.40gb slices each), `chat` spread over them with
    room to spare (`diff` places replicas as a topology spread does); then `change`."""
    from tests.kube.test_dra_move import BRIDGE
    from tests.rollout.test_rollout import stack

    replicas = 24 if change == "dra-move" else 12
    deployed = stack("gke", replicas=replicas, rollout="in-place", nodes=3)
    deployed["services"][0]["profile"] = "3g.40gb"
    current = copy.deepcopy(deployed)
    if change == "dra-move":
        current["pools"][0]["allocation"] = "dra"
        current["dra"] = dict(BRIDGE)
    else:  # all-balanced keeps one 3g.40gb slice per GPU
        current["pools"][0]["mig"] = "all-balanced"
    files = []
    for name, config in (("deployed", deployed), ("current", current)):
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text(yaml.safe_dump({"config": {f"mig-inference:{k}": v
                                                   for k, v in config.items()}}))  # fmt: skip
        files.append(path)
    return files[0], files[1]


@pytest.mark.parametrize(("change", "outside_one_node"), [("dra-move", 16), ("layout", 8)])
def test_diff_keeps_every_replica_outside_the_batch_serving(
    tmp_path: Path, change: str, outside_one_node: int
) -> None:
    """`python -m mig diff --json`: the worst moment of the service is one node's replicas away
    (24 replicas as 8 per node; 12 as 4), not the replicas that moved onto a node drained next."""
    deployed, current = diff_stacks(tmp_path, change)
    result = mig_against_deployed("diff", current, deployed, "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["failure"] is None
    [chat] = found["services"]
    assert chat["min_serving"] == outside_one_node, chat
    assert chat["serving_after"] == chat["serving_before"]
    assert found["cost"]["extra_gpus_at_peak"] == 0


@pytest.mark.usefixtures("agents")
def test_a_pending_replica_one_free_device_could_take_holds_the_next_drain(
    tmp_path: Path,
) -> None:
    """n1 is switched first and takes its 3 replicas back, which leaves it one free 3g.40gb
    slice; a replica of the pool that could land there is still Pending (here it never lands),
    so n2 is not drained: the Job stops at the deadline naming where it could land."""
    cluster = FakeCluster(CONFIGS)
    for name in ("n1", "n2"):
        cluster.add_node(name, "all-3g.40gb", labels={POOL_LABEL: "p"})
    cluster.add_service("inference", "chat", 7, RESOURCE, pool="p", on={"n1": 3, "n2": 4})
    labels = {POOL_LABEL: "p", MANAGED_BY_LABEL: MANAGED_BY, "app.kubernetes.io/name": "batch"}
    cluster.add_pod("inference", "batch-0", "", RESOURCE, labels=labels)  # Pending
    result = repartition(cluster, tmp_path, "layout-keeping", reconfigure=20)
    assert result.returncode == 1, result.stdout
    assert (
        "STOPPED at the pool's services: after 20s they have not settled before the drain of the "
        f"next batch: still loading: none; Pending that could land on a switched node: "
        f"{RESOURCE}@n1" in result.stdout
    ), result.stdout
    assert cluster.node_labels("n2")[MIG_CONFIG_LABEL] == "all-3g.40gb"
    assert cluster.ready_of("chat") == 7
