"""What GKE and OKE do to a pool's nodes when Pulumi updates the pool in place: every input the
program renders on a GPU pool is classified, no change the program makes is one GKE applies as a
surge upgrade (those are new generations), and `diff` says which OKE updates reach only the nodes
OKE creates later."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.rollout.force_new import force_new_paths
from mig_inference.rollout.node_pools import GKE_POOL, OKE_POOL
from mig_inference.rollout.node_updates import Reach, node_update
from mig_inference.rollout.rendered import program_of
from mig_inference.rollout.steps import Op, leaf_paths, path_under
from mig_inference.spec.files import stack_names, stack_path
from tests import in_process
from tests.mocked import stack_rendering
from tests.rollout.test_rollout import stack, transition


@pytest.mark.parametrize(
    "name", [n for n in stack_names() if n.startswith(("gke", "oke", "ephemeral"))]
)
def test_every_input_of_a_rendered_gpu_pool_is_classified(name: str) -> None:
    """An input the provider updates in place has a rule saying what the cloud does to the
    nodes; the others replace the pool or are left to the cloud (`ignoreChanges`)."""
    pools = [r for r in program_of(stack_rendering(name)) if r.type in (GKE_POOL, OKE_POOL)]
    assert pools, name
    for pool in pools:
        fixed = (*force_new_paths(pool.type), *pool.replace_on_changes, *pool.ignore_changes)
        for path, _ in leaf_paths(dict(pool.inputs)):
            if any(path_under(path, p) for p in fixed):
                continue
            update = node_update(pool.type, (path,))
            assert update is not None and not update.unknown, (name, path)


GKE_NODE_EDITS: dict[str, Any] = {
    "machineType": lambda v: v["pools"][0].update(machineType="a3-megagpu-8g"),
    "diskSizeGb": lambda v: v["pools"][0].update(diskSizeGb=500),
    "bootDiskType": lambda v: v["pools"][0].update(bootDiskType="hyperdisk-balanced"),
    "workloadIdentity": lambda v: v["cluster"].update(workloadIdentity=False),
    "nodeServiceAccount": lambda v: v["cluster"].update(nodeServiceAccount="default"),
    "labels": lambda v: v["pools"][0].update(labels={"team": "ml"}),
    "taints": lambda v: v["pools"][0].update(
        taints=[{"key": "team", "value": "ml", "effect": "NoSchedule"}]
    ),
    "cloud labels": lambda v: v.update(labels={"team": "ml"}),
    "nodes": lambda v: v["pools"][0].update(nodes=2),
    "autoscaled": lambda v: v["pools"][0].update(nodes={"min": 1, "max": 3}),
    "in-place layout": lambda v: v["pools"][0].update(mig="all-1g.10gb"),
}


@pytest.mark.parametrize("edit", sorted(GKE_NODE_EDITS))
def test_no_change_of_a_gke_pool_is_a_surge_upgrade(edit: str) -> None:
    """GKE recreates every node of a pool whose machine type, disk, image or metadata server an
    update changes (a surge upgrade). The program makes each of those a new generation (a new
    pool), so an update of the pool resource only ever changes inputs GKE applies to the
    running nodes, or the pool's size."""
    v1 = stack("gke", rollout="in-place")
    v2 = copy.deepcopy(v1)
    GKE_NODE_EDITS[edit](v2)
    outcome, changes = transition(v1, v2)
    assert not outcome.refused and outcome.failure is None, (outcome.failure, changes.refusals)
    [step] = [s for s in outcome.plan.forward if s.key[0] == GKE_POOL]
    assert step.op is not Op.SAME, edit
    if step.op is Op.UPDATE:
        update = node_update(GKE_POOL, step.changed)
        assert update is not None and not update.unknown
        assert set(update.reach) <= {Reach.RUNNING, Reach.SIZE, Reach.POOL}, (edit, update)
        [pool] = changes.pools
        assert pool.node_update == update.describe(running=1)
    else:
        # A new generation: the new pool comes up next to the old one, no node is recreated.
        assert step.op is Op.REPLACE and "name" in step.replaced_by, edit


def test_a_recreating_update_is_named_as_a_surge_upgrade_not_simulated() -> None:
    update = node_update(GKE_POOL, ("nodeConfig.machineType", "nodeConfig.labels.team"))
    assert update is not None
    assert update.reach == {Reach.RUNNING: ("node labels",), Reach.RECREATED: ("machine type",)}
    line = update.describe(running=2)
    assert "surge upgrade" in line and "maxSurge 1, maxUnavailable 0" in line
    assert "not simulated" in line and "up to an hour" in line


def _stack_file(tmp_path: Path, name: str, edit: Any) -> Path:
    data = yaml.safe_load(Path(stack_path(name)).read_text())
    edit(data["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _diff(deployed: Path, current: Path) -> dict[str, Any]:
    result = in_process.mig(
        "diff", "--json", "--stack-file", str(current), "--deployed", str(deployed)
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("tags", {"team": "ml"}, "node tags: only nodes OKE creates from now on get it"),
        (
            "cluster",
            "v1.35.1",
            "Kubernetes version: only nodes OKE creates from now on get it",
        ),
    ],
)
def test_diff_says_which_oke_updates_reach_only_new_nodes(
    tmp_path: Path, key: str, value: Any, said: str
) -> None:
    def edit(config: dict[str, Any]) -> None:
        if key == "cluster":
            config["mig-inference:cluster"]["kubernetesVersion"] = value
        else:
            config[f"mig-inference:{key}"] = value

    deployed = Path(stack_path("oke-h100"))
    report = _diff(deployed, _stack_file(tmp_path, "oke-h100", edit))
    [pool] = report["pools"]
    assert said in pool["node_update"]
    assert "the 1 running node(s) keep the old value until they are replaced" in pool["node_update"]
    assert pool["nodes_created"] == pool["nodes_replaced"] == 0
    assert all(s["min_serving"] == s["serving_before"] for s in report["services"])


def test_diff_says_a_gke_label_change_reaches_the_running_nodes(tmp_path: Path) -> None:
    deployed = Path(stack_path("gke-h100"))

    def edit(config: dict[str, Any]) -> None:
        config["mig-inference:pools"][0]["labels"] = {"role": "h100-premium"}

    report = _diff(deployed, _stack_file(tmp_path, "gke-h100", edit))
    [pool] = report["pools"]
    assert pool["node_update"] == "node labels: applied to the running nodes, none recreated"
    assert pool["nodes_created"] == pool["nodes_replaced"] == 0


def test_an_oke_layout_label_is_the_jobs_and_other_labels_reach_only_new_nodes() -> None:
    """OKE's node labels are a list of key/value pairs: the label keys that changed are named;
    an in-place layout's `nvidia.com/mig.config` reaches running nodes through the Job."""
    old = {"nvidia.com/mig.config": "all-3g.40gb", "team": "a"}
    new = {"nvidia.com/mig.config": "all-1g.10gb", "team": "b"}
    update = node_update(OKE_POOL, ("initialNodeLabels[1].value", "initialNodeLabels[2].value"),
                         old, new)  # fmt: skip
    assert update is not None
    assert update.reach == {
        Reach.RUNNING: ("nvidia.com/mig.config (by the re-partitioning Job)",),
        Reach.NEW_NODES: ("node label team",),
    }
    assert "the 3 running node(s) keep the old value" in update.describe(running=3)


def test_diff_says_an_oke_pool_size_change_adds_nodes_and_touches_no_running_one(
    tmp_path: Path,
) -> None:
    """OKE applies a new size by adding or removing nodes: not a change that waits for nodes
    OKE creates later (the running ones have nothing to keep)."""

    def edit(config: dict[str, Any]) -> None:
        config["mig-inference:pools"][0]["nodes"] = 2

    report = _diff(Path(stack_path("oke-h100")), _stack_file(tmp_path, "oke-h100", edit))
    [pool] = report["pools"]
    assert pool["node_update"] == "size: nodes added or removed"
    assert pool["nodes_replaced"] == 0
