"""The simulator's Jobs (mig_inference/rollout/jobs.py) follow the scripts where the scripts'
tests (test_gate.py, test_repartition.py, test_repartition_pacing.py) pin a behaviour down: here,
the watchdog that restarts a MIG manager wedged in `pending` (NVIDIA/gpu-operator#2833), the
pool's budgets, and the pacing's stop with the held nodes uncordoned."""

from __future__ import annotations

import copy
from pathlib import Path

from mig_inference.names.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL, POOL_LABEL
from mig_inference.rollout.cluster import Cluster, Timings
from mig_inference.rollout.jobs import GateRun, RepartitionRun
from mig_inference.rollout.mig_manager import Durations, NodeLayout, devices_of
from mig_inference.rollout.model import Deployment, Node, PodTemplate

TWO = ("3g.40gb", "3g.40gb")
SEVEN = ("1g.10gb",) * 7
WITH_1G = ("3g.40gb", "3g.40gb", "1g.10gb")
LAYOUTS: dict[str, NodeLayout] = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN),
                                  "with-1g": (WITH_1G, WITH_1G)}  # fmt: skip


def one_node(durations: Durations) -> Cluster:
    """A cluster of one H100-like node `n1` of pool `p` on all-3g.40gb, its MIG manager running."""
    cluster = Cluster(
        Timings(mig_manager=durations),
        devices_of=lambda _, config: devices_of(LAYOUTS[config]) if config else {},
        configs_of=lambda _: dict(LAYOUTS),
        config_of=lambda _, layout: next((n for n, lay in LAYOUTS.items() if lay == layout), None),
    )  # fmt: skip
    labels = {POOL_LABEL: "p", MIG_CONFIG_LABEL: "all-3g.40gb", MIG_STATE_LABEL: "success"}
    cluster.add_node(Node("n1", labels, [], gpus=2), applied="all-3g.40gb")
    return cluster


def wedged_cluster(*, operand_gone: bool) -> Cluster:
    """One node relabelled to all-1g.10gb whose operands do not stop in the MIG manager's wait:
    its run ends with no state, `pending` for good; with `operand_gone` the stuck operand has gone
    since (only a new MIG manager process notices)."""
    cluster = one_node(Durations(operands_timeout=300))
    cluster.managers["n1"].operands_stuck = True
    cluster.set_labels("n1", {MIG_CONFIG_LABEL: "all-1g.10gb"})
    for _ in range(60):  # ten minutes: the MIG manager gave up at five
        cluster.tick()
    assert cluster.nodes["n1"].state == "pending"
    if operand_gone:
        cluster.managers["n1"].operands_stuck = False
    return cluster


def test_the_gate_restarts_a_wedged_mig_manager_once_as_the_script_does() -> None:
    cluster = wedged_cluster(operand_gone=True)
    env = {"GATE_TARGETS": "p mig-inference.io/pool=p all-1g.10gb 1",
           "GATE_TIMEOUT_SECONDS": "3600", "GATE_PENDING_LIMIT_SECONDS": "600"}  # fmt: skip
    gate = GateRun.of(env, cluster.now)
    while gate.outcome is None:
        cluster.tick()
        gate.advance(cluster)
    assert gate.outcome == "complete"
    assert any("its MIG manager restarted" in e.text for e in cluster.events)


def test_the_job_restarts_a_wedged_mig_manager_once_then_stops() -> None:
    cluster = wedged_cluster(operand_gone=False)
    env = {"TARGET_CONFIG": "all-1g.10gb", "REPARTITION_SELECTOR": "mig-inference.io/pool=p",
           "PENDING_LIMIT_SECONDS": "600"}  # fmt: skip
    job = RepartitionRun.of(env)
    job.phase, job.batch, job.deadline = "wait", ["n1"], cluster.now + 7200
    while job.outcome is None:
        cluster.tick()
        job.advance(cluster)
    restarts = [e for e in cluster.events if "its MIG manager restarted" in e.text]
    assert len(restarts) == 1
    assert job.outcome.startswith("failed: node n1 stays nvidia.com/mig.config.state=pending")


def test_the_job_relaxes_its_pool_s_budgets_while_it_runs_and_restores_them() -> None:
    cluster = one_node(Durations(pod_start=10, checks=5, operands_stop=10, apply=10))
    pods = {POOL_LABEL: "p", "app.kubernetes.io/managed-by": "mig-inference"}
    template = PodTemplate("nvidia.com/mig-3g.40gb", ((POOL_LABEL, "In", ("p",)),), (), "v1")
    chat = Deployment("inference", "chat", "chat", 2, template, 60.0, budget=1, labels=pods)
    elsewhere = PodTemplate("nvidia.com/mig-3g.40gb", ((POOL_LABEL, "In", ("q",)),), (), "v1")
    other = Deployment("team-b", "other", "other", 1, elsewhere, 60.0, budget=0, labels={})
    cluster.deployments = {chat.key: chat, other.key: other}
    for _ in range(3):
        cluster.tick()
    env = {"TARGET_CONFIG": "all-1g.10gb", "REPARTITION_SELECTOR": "mig-inference.io/pool=p",
           "BUDGET_SELECTOR": "mig-inference.io/pool=p,app.kubernetes.io/managed-by=mig-inference"}  # fmt: skip
    job = RepartitionRun.of(env)
    relaxed = []
    while job.outcome is None:
        cluster.tick()
        job.advance(cluster)
        relaxed.append(chat.budget)
    assert job.outcome == "complete"
    assert cluster.evicted.get("p") == 2  # both replicas of one node, one budget of one
    assert 2 in relaxed and chat.budget == 1 and other.budget == 0


def test_diff_shows_an_in_place_roll_keeping_a_surviving_profile_serving() -> None:
    # 16 replicas on 1g.10gb per node; the new layout keeps 1g.10gb. The Job waits until the
    # replicas moved back onto a re-partitioned node are Ready before it drains the next one.
    from tests.rollout.test_rollout import stack, transition

    v1 = stack(nodes=2, rollout="in-place", mig="all-balanced", replicas=32)
    v2 = stack(nodes=2, rollout="in-place", mig="all-1g.10gb", replicas=32)
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None
    [chat] = changes.services
    assert (chat.serving_before, chat.min_serving, chat.serving_after) == (32, 16, 32)


def test_replicas_that_do_not_turn_ready_stop_the_job_and_lift_the_hold() -> None:
    # As the script: the nodes still to be switched are held cordoned from the first drain; the
    # replicas moved back onto n1 (the new layout keeps 3g.40gb) never turn Ready, so the Job
    # stops before draining n2 and lifts the cordons of the nodes it held.
    cluster = one_node(Durations(pod_start=10, checks=5, operands_stop=10, apply=10))
    labels = {POOL_LABEL: "p", MIG_CONFIG_LABEL: "all-3g.40gb", MIG_STATE_LABEL: "success"}
    for name in ("n2", "n3"):
        cluster.add_node(Node(name, dict(labels), [], gpus=2), applied="all-3g.40gb")
    pods = {POOL_LABEL: "p", "app.kubernetes.io/managed-by": "mig-inference"}
    template = PodTemplate("nvidia.com/mig-3g.40gb", ((POOL_LABEL, "In", ("p",)),), (), "v1")
    chat = Deployment("inference", "chat", "chat", 6, template, 10_000.0, budget=1, labels=pods)
    cluster.deployments = {chat.key: chat}
    cluster.tick()
    for pod in cluster.pods:
        pod.ready_at = cluster.now  # the running replicas serve; a new one never loads in time
    env = {"TARGET_CONFIG": "with-1g", "REPARTITION_SELECTOR": "mig-inference.io/pool=p",
           "RECONFIGURE_TIMEOUT_SECONDS": "600",
           "BUDGET_SELECTOR": "mig-inference.io/pool=p,app.kubernetes.io/managed-by=mig-inference"}  # fmt: skip
    job = RepartitionRun.of(env)
    held = False
    while job.outcome is None:
        cluster.tick()
        job.advance(cluster)
        held = held or all(cluster.nodes[n].unschedulable for n in ("n1", "n2", "n3"))
    assert held
    assert job.outcome == "failed: the pool's services did not settle before the drain of n2"
    assert not any(cluster.nodes[n].unschedulable for n in ("n1", "n2", "n3"))
    assert cluster.nodes["n2"].config == "all-3g.40gb" and chat.budget == 1


def three_nodes(replicas: dict[str, int], start: float) -> tuple[Cluster, Deployment]:
    """Three nodes of 4 x 3g.40gb; `chat`'s replicas as `replicas` places them (node -> count),
    serving; new ones load for `start` seconds."""
    cluster = one_node(Durations(pod_start=10, checks=5, operands_stop=10, apply=10))
    labels = {POOL_LABEL: "p", MIG_CONFIG_LABEL: "all-3g.40gb", MIG_STATE_LABEL: "success"}
    for name in ("n2", "n3"):
        cluster.add_node(Node(name, dict(labels), [], gpus=2), applied="all-3g.40gb")
    pods = {POOL_LABEL: "p", "app.kubernetes.io/managed-by": "mig-inference"}
    template = PodTemplate("nvidia.com/mig-3g.40gb", ((POOL_LABEL, "In", ("p",)),), (), "v1")
    chat = Deployment("inference", "chat", "chat", sum(replicas.values()), template, start,
                      budget=1, labels=pods)  # fmt: skip
    cluster.deployments = {chat.key: chat}
    placed = 0
    for name, count in replicas.items():  # the scheduler may use only `name` for these
        for other in ("n1", "n2", "n3"):
            cluster.nodes[other].unschedulable = other != name
        placed += count
        chat.replicas = placed
        cluster.tick()
    for node in cluster.nodes.values():
        node.unschedulable = False
    for pod in cluster.pods:
        pod.ready_at = cluster.now
    return cluster, chat


def run_job(cluster: Cluster, chat: Deployment, target: str) -> tuple[RepartitionRun, list[int]]:
    env = {"TARGET_CONFIG": target, "REPARTITION_SELECTOR": "mig-inference.io/pool=p",
           "RECONFIGURE_TIMEOUT_SECONDS": "3600",
           "BUDGET_SELECTOR": "mig-inference.io/pool=p,app.kubernetes.io/managed-by=mig-inference"}  # fmt: skip
    job = RepartitionRun.of(env)
    serving = []
    while job.outcome is None:
        cluster.tick()
        job.advance(cluster)
        serving.append(sum(1 for p in cluster.pods_of(chat) if p.ready(cluster.now)))
    return job, serving


def test_a_pool_with_room_to_spare_is_not_halved_in_the_simulation_either() -> None:
    """As the script: n3, empty, goes first; n1's and then n2's replicas move onto the switched
    nodes' free slices one at a time, as chat's strict budget allows."""
    cluster, chat = three_nodes({"n1": 2, "n2": 2}, start=60.0)
    assert [len([p for p in cluster.pods if p.node == n]) for n in ("n1", "n2", "n3")] == [2, 2, 0]
    job, serving = run_job(cluster, chat, "with-1g")
    assert job.outcome == "complete"
    assert job.done[0] == "n3"
    assert min(serving) == 3
    assert not any("budgets relaxed" in e.text for e in cluster.events)


def test_the_simulated_job_relaxes_a_budget_only_for_the_drain_that_needs_it() -> None:
    """No room anywhere: chat's budget is relaxed for each node's drain and strict again while
    the node is re-partitioned and between batches."""
    cluster, chat = three_nodes({"n1": 2, "n2": 2, "n3": 2}, start=60.0)
    env = {"TARGET_CONFIG": "with-1g", "REPARTITION_SELECTOR": "mig-inference.io/pool=p",
           "RECONFIGURE_TIMEOUT_SECONDS": "3600",
           "BUDGET_SELECTOR": "mig-inference.io/pool=p,app.kubernetes.io/managed-by=mig-inference"}  # fmt: skip
    job = RepartitionRun.of(env)
    budgets: dict[str, set[int | None]] = {}
    while job.outcome is None:
        cluster.tick()
        job.advance(cluster)
        budgets.setdefault(job.phase, set()).add(chat.budget)
    assert job.outcome == "complete"
    assert budgets["wait"] == {1} and budgets["pick"] == {1}, budgets
    assert 6 in budgets["drain"], budgets
    relaxed = [e.text for e in cluster.events if "budgets relaxed" in e.text]
    # n1 first; its replicas back on n1 leave room there for n2's, and n2's for n3's.
    assert relaxed == ["re-partitioning Job: 1 budgets relaxed for the drain of n1"], relaxed


def test_while_a_service_waits_for_the_job_to_end_the_simulated_job_does_not_slow_down() -> None:
    """The shipped `existing` stack moved to all-3g.40gb: small-chat's 1g.10gb slices are gone
    until Pulumi moves it after the Job, so the Job relaxes reasoning's budget too rather than
    moving its replicas one model load at a time onto the room the first node leaves: the
    update takes about 66 minutes (about two hours otherwise), small-chat is down ~11."""
    from msgspec.structs import replace

    from mig_inference.changes.change_plan import change_plan
    from mig_inference.changes.record import plan_record
    from mig_inference.changes.transition import simulate_transition, version_of_stack_file
    from mig_inference.render import run_program
    from mig_inference.spec.files import stack_path

    deployed = version_of_stack_file(Path(stack_path("existing")))
    values = copy.deepcopy(deployed.values)
    values["pools"][0]["mig"] = "all-3g.40gb"
    current = replace(deployed, values=values)
    outcome = simulate_transition(deployed, current, render=run_program)
    records = [plan_record(v.plan, v.values) for v in (deployed, current)]
    changes = change_plan(records[0], records[1], outcome)
    assert outcome.failure is None
    assert outcome.seconds < 80 * 60, outcome.seconds
    served = {s.name: s for s in changes.services}
    assert served["reasoning"].min_serving == 4
    assert served["small-chat"].down_seconds < 15 * 60
