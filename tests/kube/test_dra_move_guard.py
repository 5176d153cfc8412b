"""The re-partitioning Job's own refusal of a move between the device plugin and DRA that the
pool's replicas cannot follow (a `pulumi up` run without `diff`): the real script against the fake
API server refuses before touching any node unless the program says the pods keep their requests
across the switch (`SWITCH_KEEPS_REQUESTS`, the extended-resource bridge), and the program sets
that only when the stack has the bridge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.names.labels import CORDONED_FOR_ANNOTATION, POOL_LABEL
from tests.fake_apiserver import FakeCluster
from tests.kube.test_dra_move import (
    CONFIGS,
    LAYOUT,
    MOVES,
    RESOURCE,
    allocation_of,
    move,
    output,
    pool,
)
from tests.mocked import render_config


def serving(cluster: FakeCluster, *, claims: bool = False) -> None:
    """The pool's service `chat`, 3 replicas on each of n1 and n2; with `claims`, its pods claim
    their slice through a ResourceClaimTemplate (DRA without the bridge) instead of requesting
    it."""
    cluster.add_service("inference", "chat", 6, RESOURCE, pool="p", on={"n1": 3, "n2": 3})
    if not claims:
        return
    for found in cluster.pods.values():
        if found["metadata"]["labels"].get("app.kubernetes.io/name") != "chat":
            continue
        found["spec"]["containers"][0]["resources"]["limits"].pop(RESOURCE)
        found["spec"]["containers"][0]["resources"]["requests"].pop(RESOURCE)
        found["spec"]["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": "chat"}]


def untouched(cluster: FakeCluster, before: dict[str, dict[str, str]]) -> None:
    assert cluster.changes == []
    for node, labels in before.items():
        assert cluster.node_labels(node) == labels
        assert not cluster.cordoned(node)
        assert CORDONED_FOR_ANNOTATION not in cluster.annotations(node)
    assert cluster.ready_of("chat") == 6


@pytest.mark.parametrize(
    ("to_dra", "claims", "keeps_requests"),
    [
        (True, False, False),
        (False, True, False),
        # A claim never reaches the device plugin, whatever the stack says now (the bridge turned
        # on in the same change as the move back: the running pods still claim).
        (False, True, True),
    ],
    ids=["to-dra", "back", "back-with-the-bridge-turned-on-now"],
)
def test_a_switch_the_replicas_cannot_follow_is_refused_before_any_node_is_touched(
    tmp_path: Path, to_dra: bool, claims: bool, keeps_requests: bool
) -> None:
    cluster = pool("n1", "n2", dra=not to_dra)
    serving(cluster, claims=claims)
    before = {node: cluster.node_labels(node) for node in ("n1", "n2")}
    result = move(cluster, tmp_path, to_dra=to_dra, keeps_requests=keeps_requests)
    assert result.returncode == 1, output(result)
    direction = "from the device plugin to DRA" if to_dra else "from DRA back to the device plugin"
    assert f"STOPPED at the pool's move {direction}: switching n1 n2 would strand 6 replicas" in (
        result.stdout
    )
    assert "replicas of the pool's services running there (chat (6))" in result.stdout
    assert "Nothing was cordoned, labelled or evicted" in result.stdout
    assert "on Kubernetes 1.36 or later turn the extended-resource bridge on" in result.stdout
    assert "kubernetesVersion 1.36+, extendedResources: true" in result.stdout
    assert "mig-inference diff --deployed" in result.stdout
    assert f"keep allocation: {'device-plugin' if to_dra else 'dra'}" in result.stdout
    assert "left untouched (still on their old config): n1 n2" in result.stdout
    untouched(cluster, before)


@pytest.mark.parametrize("to_dra", [True, False], ids=["to-dra", "back"])
def test_only_the_replicas_on_the_nodes_to_switch_count(tmp_path: Path, to_dra: bool) -> None:
    """n1 already runs the target plugin (an earlier run switched it): only n2's replicas are
    stranded, and the refusal names n2 alone."""
    cluster = FakeCluster(CONFIGS)
    cluster.add_node("n1", LAYOUT, labels={POOL_LABEL: "p"}, dra=to_dra)
    cluster.add_node("n2", LAYOUT, labels={POOL_LABEL: "p"}, dra=not to_dra)
    serving(cluster, claims=not to_dra)
    result = move(cluster, tmp_path, to_dra=to_dra, keeps_requests=False)
    assert result.returncode == 1, output(result)
    assert "switching n2 would strand 3 replicas" in result.stdout
    assert "running there (chat (3))" in result.stdout
    assert cluster.changes == []


@pytest.mark.parametrize("to_dra", [True, False], ids=["to-dra", "back"])
def test_a_pool_no_replica_runs_on_switches(tmp_path: Path, to_dra: bool) -> None:
    cluster = pool("n1", "n2", dra=not to_dra)
    result = move(cluster, tmp_path, to_dra=to_dra, keeps_requests=False)
    assert result.returncode == 0, output(result)
    expected = ("dra", "false") if to_dra else (None, "true")
    assert [allocation_of(cluster, n) for n in ("n1", "n2")] == [expected] * 2
    assert cluster.offered_twice == []


@pytest.mark.parametrize(
    ("to_dra", "keeps_requests"),
    [
        (True, True),
        (False, True),
        # Pods that request their slice (deployed with the bridge) follow the nodes back to the
        # device plugin whatever the stack says now (its `dra` section goes with its last DRA
        # pool).
        (False, False),
    ],
    ids=["to-dra", "back", "back-with-the-dra-section-gone"],
)
def test_replicas_that_request_their_slice_follow_with_the_bridge(
    tmp_path: Path, to_dra: bool, keeps_requests: bool
) -> None:
    cluster = pool("n1", "n2", dra=not to_dra)
    serving(cluster)
    result = move(cluster, tmp_path, to_dra=to_dra, keeps_requests=keeps_requests)
    assert result.returncode == 0, output(result)
    assert "would strand" not in result.stdout
    expected = ("dra", "false") if to_dra else (None, "true")
    assert [allocation_of(cluster, n) for n in ("n1", "n2")] == [expected] * 2


# -- the program: the Job's environment --------------------------------------------------------
def stack_config(stack_file: str) -> dict[str, Any]:
    raw = yaml.safe_load((MOVES / stack_file).read_text())["config"]
    return {key.removeprefix("mig-inference:"): value for key, value in raw.items()}


def repartition_envs(tmp_path: Path, config: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The environment of each pool's re-partitioning Job, by the Job's name less its hash."""
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    envs = {}
    for job in rendering.of_type("kubernetes:batch/v1:Job"):
        name = job.inputs["metadata"]["name"]
        if name.startswith("mig-repartition-"):
            containers: list[dict[str, Any]] = job.inputs["spec"]["template"]["spec"]["containers"]
            envs[name.rsplit("-", 1)[0]] = {e["name"]: e["value"] for e in containers[0]["env"]}
    return envs


@pytest.mark.parametrize(
    ("stack_file", "keeps"),
    [
        ("Pulumi.existing-dra.yaml", True),  # DRA with the bridge
        ("Pulumi.existing-claims.yaml", False),  # DRA without it: claims in the pod spec
        ("Pulumi.existing-plugin.yaml", False),  # no DRA section
    ],
)
def test_the_job_says_the_requests_are_kept_only_with_the_bridge(
    tmp_path: Path, stack_file: str, keeps: bool
) -> None:
    [env] = repartition_envs(tmp_path, stack_config(stack_file)).values()
    assert env["TARGET_CONFIG"]
    assert ("SWITCH_KEEPS_REQUESTS" in env) is keeps
    if keeps:
        assert env["SWITCH_KEEPS_REQUESTS"] == "1"


def test_a_device_plugin_pool_beside_the_bridge_is_not_told_so(tmp_path: Path) -> None:
    """The pods decide on the way back: the flag is the DRA pools' only."""
    config = stack_config("Pulumi.existing-dra.yaml")
    plain = {**config["pools"][0], "name": "plain", "nodeNames": ["gpu-node-03"]}
    plain.pop("allocation")
    config["pools"].append(plain)
    for service in config["services"]:
        service["pool"] = "h100"
    envs = repartition_envs(tmp_path, config)
    assert envs["mig-repartition-h100"].get("SWITCH_KEEPS_REQUESTS") == "1"
    assert "SWITCH_KEEPS_REQUESTS" not in envs["mig-repartition-plain"]


def test_a_listing_of_the_services_pods_that_fails_stops_before_any_change(
    tmp_path: Path,
) -> None:
    cluster = pool("n1", "n2", dra=False)
    serving(cluster)
    cluster.fail("GET", "/api/v1/pods", times=-1)
    result = move(cluster, tmp_path, to_dra=True, keeps_requests=False)
    assert result.returncode == 1, output(result)
    assert "STOPPED at the pool's services: listing their pods" in result.stdout
    assert cluster.changes == []
