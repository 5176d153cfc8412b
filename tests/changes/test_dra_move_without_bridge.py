"""A pool moving between the device plugin and DRA without the extended-resource bridge (claims in
the pod spec): refused on an existing cluster while services run on it (the replicas cannot
follow the nodes the Job switches), with ways forward that `diff` takes; a new generation on the
clouds, whose extra GPUs `diff` states, refused on a protected pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.changes.allocation_move import allocation_move_refusals
from mig_inference.changes.change_plan import PoolChange, change_warnings
from mig_inference.errors import MigError
from mig_inference.plan import plan_stack
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.kube import test_dra_move
from tests.kube.test_dra_move import mig_against_deployed
from tests.rollout.test_rollout import stack, transition

MOVES = Path(__file__).resolve().parent.parent / "stacks" / "dra-move"
CLAIMS = {"kubernetesVersion": "1.35"}
BRIDGE = test_dra_move.BRIDGE
KEY = "mig-inference:pools[0].allocation"


def existing(
    allocation: str = "device-plugin", dra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Two full nodes of an existing cluster (32 replicas on 2 x 16 slices), on `allocation`
    (on DRA without the bridge unless `dra` says otherwise)."""
    plugin, moved = test_dra_move.cloud_versions("existing")
    if allocation != "dra":
        return plugin
    moved["dra"] = dict(dra if dra is not None else CLAIMS)
    return moved


def refusals(v1: dict[str, Any], v2: dict[str, Any]) -> list[MigError]:
    plans = [
        plan_stack(parse_stack("t", v, pinned_operator_version=GPU_OPERATOR_VERSION))
        for v in (v1, v2)
    ]
    return allocation_move_refusals(plans[0], plans[1])


# -- the rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True], ids=["to-dra", "back"])
def test_an_existing_pool_without_the_bridge_is_refused(reverse: bool) -> None:
    v1, v2 = existing(), existing("dra")
    if reverse:
        v1, v2 = v2, v1
    [error] = refusals(v1, v2)
    new, old = ("device-plugin", "dra") if reverse else ("dra", "device-plugin")
    assert error.path == KEY
    assert error.value == new and error.allowed == [old]
    assert f"pool h100 cannot move from {old} to {new}" in error.message
    assert "chat (32 replicas)" in error.message
    assert "extendedResources: true" in error.message
    # The second way forward states the capacity it takes: as many GPUs as the pool has.
    assert (
        "new nodes holding 16 H100-80GB GPUs (as many as this pool has) to another pool with "
        f"allocation: {new}"
    ) in error.message


@pytest.mark.parametrize("reverse", [False, True], ids=["to-dra", "back"])
def test_with_the_bridge_the_existing_pool_moves(reverse: bool) -> None:
    v1, v2 = existing(), existing("dra", BRIDGE)
    if reverse:
        v1, v2 = v2, v1
    assert refusals(v1, v2) == []


def test_a_pool_no_service_runs_on_moves_without_the_bridge() -> None:
    """Nothing serves from it, so nothing drops."""
    v1, v2 = existing(), existing("dra")
    for config in (v1, v2):
        config["pools"].append({**config["pools"][0], "name": "other", "nodeNames": ["gpu-c"],
                                "allocation": "device-plugin"})  # fmt: skip
        config["services"][0].update(pool="other", replicas=8)
    assert refusals(v1, v2) == []


def test_dynamic_mig_is_refused_even_with_the_bridge() -> None:
    """DynamicMIG pools get no MIG manager and no Job: every node would switch at once."""
    [error] = refusals(existing(), existing("dra", {**BRIDGE, "dynamicMig": True}))
    assert error.path == KEY
    assert "every node of the pool would switch at once" in error.message
    assert "extendedResources: true" not in error.message  # the bridge is no way forward there


def test_the_key_path_names_the_pool_that_moves() -> None:
    v1, v2 = existing(), existing("dra")
    for config in (v1, v2):
        config["pools"].insert(0, {**config["pools"][0], "name": "other",
                                   "nodeNames": ["gpu-c"], "allocation": "device-plugin"})  # fmt: skip
    [error] = refusals(v1, v2)
    assert error.path == "mig-inference:pools[1].allocation"


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_a_cloud_pool_is_never_refused_here(cloud: str) -> None:
    """A cloud pool's move without the bridge is a new generation (below)."""
    plugin = stack(cloud, rollout="in-place")
    moved = stack(cloud, rollout="in-place", allocation="dra")
    moved["dra"] = dict(CLAIMS)
    assert refusals(plugin, moved) == []


# -- `diff` and `plan --deployed` as users run them -------------------------------------------
@pytest.mark.parametrize("verb", ["diff", "plan"])
@pytest.mark.parametrize("to", ["claims", "plugin"])
def test_the_commands_refuse_the_move_on_an_existing_cluster(verb: str, to: str) -> None:
    """The stack pair of the move (the shipped DRA stack's services on two full nodes, Kubernetes
    1.35): exit 1, one error at the pool's `allocation`, and with `--json` the error alone on
    stdout."""
    deployed = MOVES / f"Pulumi.existing-{'plugin' if to == 'claims' else 'claims'}.yaml"
    current = MOVES / f"Pulumi.existing-{to}.yaml"
    result = mig_against_deployed(verb, current, deployed)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: {KEY}: pool h100 cannot move from "), line
    assert "mistral-nemo (16 replicas), qwen-small (32 replicas)" in line
    found = json.loads(mig_against_deployed(verb, current, deployed, "--json").stdout)
    [error] = found["errors"]
    assert error["key"] == KEY
    assert error["value"] == ("dra" if to == "claims" else "device-plugin")


def with_config(tmp_path: Path, name: str, source: str, change: Any) -> Path:
    """A stack file of tests/stacks/dra-move changed by `change(config)`, written to tmp_path."""
    document = yaml.safe_load((MOVES / source).read_text())
    change(document["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def diff_json(current: Path, deployed: Path) -> dict[str, Any]:
    result = mig_against_deployed("diff", current, deployed, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    assert found["failure"] is None
    return found


def keeps_serving(found: dict[str, Any]) -> None:
    """Every service down by one replica at most (its rolling update), all back at the end."""
    for service in found["services"]:
        assert service["min_serving"] >= service["serving_before"] - 1, service
        assert service["serving_after"] == service["serving_before"], service


def on_new_nodes(allocation: str, dra: dict[str, Any] | None = None) -> Any:
    """The stack's services moved to a second pool of two new nodes on `allocation`."""

    def change(config: dict[str, Any]) -> None:
        [pool] = config["mig-inference:pools"]
        new = {**pool, "name": f"h100-{allocation}", "nodeNames": ["gpu-node-03", "gpu-node-04"],
               "allocation": allocation}  # fmt: skip
        config["mig-inference:pools"].append(new)
        if dra is not None:
            config["mig-inference:dra"] = dict(dra)
        for service in config["mig-inference:services"]:
            service["pool"] = new["name"]

    return change


def test_the_ways_forward_to_dra_pass_diff(tmp_path: Path) -> None:
    plugin = MOVES / "Pulumi.existing-plugin.yaml"
    # The bridge on (Kubernetes 1.36+): in place, node by node.
    found = diff_json(MOVES / "Pulumi.existing-dra.yaml", plugin)
    assert found["pools"][0]["change"] == "moved between the device plugin and DRA node by node"
    # New nodes on DRA, as another pool: the services roll onto them one replica at a time...
    moved = with_config(
        tmp_path, "moved", "Pulumi.existing-plugin.yaml", on_new_nodes("dra", CLAIMS)
    )
    found = diff_json(moved, plugin)
    assert {p["name"]: p["change"] for p in found["pools"]} == {"h100": "unchanged",
                                                                 "h100-dra": "added"}  # fmt: skip
    keeps_serving(found)

    # ... and the old pool goes in a later `pulumi up`, with nothing on it.
    def without_the_old_pool(config: dict[str, Any]) -> None:
        on_new_nodes("dra", CLAIMS)(config)
        config["mig-inference:pools"].pop(0)

    only = with_config(tmp_path, "only", "Pulumi.existing-plugin.yaml", without_the_old_pool)
    found = diff_json(only, moved)
    assert {p["name"]: p["change"] for p in found["pools"]} == {"h100": "removed",
                                                                 "h100-dra": "unchanged"}  # fmt: skip
    for service in found["services"]:
        assert service["min_serving"] == service["serving_before"], service

    # The old nodes, released, can then join the DRA pool: switched, with nothing on them.
    def joined(config: dict[str, Any]) -> None:
        without_the_old_pool(config)
        config["mig-inference:pools"][0]["nodeNames"] += ["gpu-node-01", "gpu-node-02"]

    found = diff_json(with_config(tmp_path, "joined", "Pulumi.existing-plugin.yaml", joined), only)
    [pool] = found["pools"]
    assert pool["nodes_switched"] == ["gpu-node-01 (dra)", "gpu-node-02 (dra)"]
    for service in found["services"]:
        assert service["min_serving"] == service["serving_before"], service


def test_the_ways_back_to_the_device_plugin_pass_diff(tmp_path: Path) -> None:
    claims = MOVES / "Pulumi.existing-claims.yaml"
    # The bridge on first, allocation: dra kept: the Deployments roll onto nvidia.com/mig-*
    # requests; then the pool moves back in place.
    found = diff_json(MOVES / "Pulumi.existing-dra.yaml", claims)
    assert found["pools"][0]["change"] == "unchanged"
    keeps_serving(found)
    back = diff_json(MOVES / "Pulumi.existing-plugin.yaml", MOVES / "Pulumi.existing-dra.yaml")
    assert back["pools"][0]["change"] == "moved between the device plugin and DRA node by node"
    # New nodes on the device plugin, as another pool.
    moved = with_config(tmp_path, "moved", "Pulumi.existing-claims.yaml",
                        on_new_nodes("device-plugin"))  # fmt: skip
    found = diff_json(moved, claims)
    assert {p["name"]: p["change"] for p in found["pools"]} == {"h100": "unchanged",
                                                                 "h100-device-plugin": "added"}  # fmt: skip
    keeps_serving(found)


# -- the clouds: a new generation ------------------------------------------------------------
def cloud_versions(cloud: str, protect: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two full nodes of an in-place pool, then on DRA without the bridge (Kubernetes 1.35)."""
    plugin, moved = test_dra_move.cloud_versions(cloud, protect)
    moved["dra"] = dict(CLAIMS)
    return plugin, moved


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
@pytest.mark.parametrize("reverse", [False, True], ids=["to-dra", "back"])
def test_a_cloud_pool_moves_as_a_new_generation_with_its_extra_gpus_stated(
    cloud: str, reverse: bool
) -> None:
    v1, v2 = cloud_versions(cloud, protect=False)
    if reverse:
        v1, v2 = v2, v1
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None and not outcome.refused, outcome.failure
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES, pool
    assert "allocation" in [f.key for f in pool.fields]
    # Both generations run at once: the new one's 2 nodes x 8 GPUs on top of the old one's.
    assert pool.extra_gpus == 16 and pool.nodes_created == 2
    assert pool.nodes_switched == []
    [chat] = changes.services
    assert chat.serving_after == chat.serving_before == 32
    assert chat.min_serving is not None and chat.min_serving >= 31
    assert any(
        w.startswith("pool h100: ")
        and "a new generation comes up next to the old one (16 extra "
        "GPUs until the old one is deleted)"
        in w
        for w in change_warnings(changes)
    ), change_warnings(changes)


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
@pytest.mark.parametrize("reverse", [False, True], ids=["to-dra", "back"])
def test_a_protected_cloud_pool_is_refused_with_the_way_forward(cloud: str, reverse: bool) -> None:
    v1, v2 = cloud_versions(cloud, protect=True)
    if reverse:
        v1, v2 = v2, v1
    outcome, changes = transition(v1, v2)
    assert outcome.refused
    [pool] = changes.pools
    assert pool.refusal is not None
    assert "allocation" in pool.refusal and "Pulumi refuses" in pool.refusal
    assert "`pulumi state unprotect '" in pool.refusal
    # Unprotected, the move is a new generation: the refusal says what it costs.
    assert "then `pulumi up` (the new generation comes up next to the old one: 16 extra GPUs)" in (
        pool.refusal
    )
    assert "or undo the change of allocation" in pool.refusal
    # To DRA, the bridge keeps the pool's nodes (test_dra_move: in place on a protected pool);
    # back, turning the bridge on is itself a new generation, so it is no way forward.
    bridge = "extendedResources: true) with this change"
    assert (bridge in pool.refusal) is not reverse, pool.refusal


def test_diff_refuses_the_protected_gke_pool_and_names_the_bridge(tmp_path: Path) -> None:
    """The GKE stack pair of the move (protected, in place) on Kubernetes 1.35 without the
    bridge: exit 1 with the refusal; with the bridge the same pair moves node by node
    (test_dra_move.test_the_diff_command_shows_the_move)."""

    def claims(config: dict[str, Any]) -> None:
        config["mig-inference:dra"] = dict(CLAIMS)

    deployed = MOVES / "Pulumi.gke-plugin.yaml"
    current = with_config(tmp_path, "gke-claims", "Pulumi.gke-dra.yaml", claims)
    result = mig_against_deployed("diff", current, deployed)
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: pool h100: allocation needs new nodes, and Pulumi refuses")
    assert "16 extra GPUs" in line and "extendedResources: true) with this change" in line
