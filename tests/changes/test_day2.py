"""Day 2: sequences of stack files (v1 -> v2) run through the real program under mocks, and the
change plan `python -m mig diff` makes of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.changes.change_plan import PoolChange, ServiceChange, diff_records
from mig_inference.changes.record import plan_record
from mig_inference.cli import main
from mig_inference.errors import MigError
from mig_inference.plan import plan_stack
from mig_inference.rendering import Rendering
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import named, one, render_config

GKE_POOL = "gcp:container/nodePool:NodePool"
EKS_GROUP = "aws:eks/nodeGroup:NodeGroup"
OKE_POOL = "oci:ContainerEngine/nodePool:NodePool"
POOL_TYPE = {"gke": GKE_POOL, "eks": EKS_GROUP, "oke": OKE_POOL}
NAME_FIELD = {"gke": "name", "eks": "nodeGroupName", "oke": "name"}
CLUSTERS: dict[str, dict[str, Any]] = {
    "gke": {"name": "c", "project": "my-project", "location": "us-central1-c"},
    "eks": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000001"]},
    "oke": {"name": "c", "compartmentId": "ocid1.compartment.oc1..c", "clusterId": "ocid1.cluster.oc1..k", "subnetIds": ["ocid1.subnet.oc1..s"],
            "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
}  # fmt: skip
MACHINES = {"gke": "a3-highgpu-8g", "eks": "p5.48xlarge", "oke": "BM.GPU.H100.8"}


def stack(cloud: str = "gke", **pool: Any) -> dict[str, Any]:
    base = {"name": "h100", "gpu": "H100-80GB", "machineType": MACHINES[cloud], "nodes": 1,
            "mig": "all-3g.40gb", "maxPods": 64}  # fmt: skip
    if cloud == "oke":
        base["imageId"] = "ocid1.image.oc1..gpu"
    return {
        "cloud": cloud,
        "cluster": dict(CLUSTERS[cloud], protect=False),
        "pools": [{**base, **pool}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 8, "replicas": 4, "pool": "h100"}],
    }


def record(config: dict[str, Any]) -> dict[str, Any]:
    return plan_record(
        plan_stack(parse_stack("test", config, pinned_operator_version=GPU_OPERATOR_VERSION)),
        config,
    )


def render(tmp_path: Path, config: dict[str, Any]) -> Rendering:
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    return rendering


def physical(rendering: Rendering, cloud: str, pool: str = "h100") -> str:
    name: str = named(rendering, POOL_TYPE[cloud], pool).inputs[NAME_FIELD[cloud]]
    return name


def affinity(rendering: Rendering, service: str = "chat") -> dict[str, list[str]]:
    deployment = named(rendering, "kubernetes:apps/v1:Deployment", service).inputs
    [term] = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return {e["key"]: e["values"] for e in term["matchExpressions"]}


def gate_targets(rendering: Rendering) -> str:
    job = one(rendering, "kubernetes:batch/v1:Job").inputs
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    return str(env["GATE_TARGETS"])


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_layout_change_brings_up_a_new_generation_first(tmp_path: Path, cloud: str) -> None:
    v1, v2 = stack(cloud), stack(cloud, mig="all-1g.10gb", maxPods=90)
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    old, new = physical(before, cloud), physical(after, cloud)
    assert old != new and old.startswith("h100-") and new.startswith("h100-")
    generation = new.removeprefix("h100-")
    # Same Pulumi resource (so a replacement), never deleted before its successor exists.
    options = after.options[(POOL_TYPE[cloud], "h100")]
    assert options.delete_before_replace is False
    if cloud == "oke":  # OKE would rename in place: the name must force a new pool
        assert options.replace_on_changes == ("name",)
    # Services follow the new generation by node affinity; the gate waits for its nodes.
    assert affinity(after)["mig-inference.io/generation"] == [generation]
    assert affinity(before)["mig-inference.io/generation"] != [generation]
    assert f"mig-inference.io/generation={generation}" in gate_targets(after)
    assert " all-1g.10gb 1" in gate_targets(after)
    changes = diff_records(record(v1), record(v2))
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES
    assert {f.key for f in pool.fields} == {"mig", "maxPods"}
    assert pool.extra_gpus == 8 and changes.extra_gpus == 8 and changes.replicas_evicted == 0
    [service] = changes.services
    assert service.change is ServiceChange.MOVED and generation in service.reason


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_max_pods_change_needs_new_nodes(tmp_path: Path, cloud: str) -> None:
    v1, v2 = stack(cloud), stack(cloud, maxPods=100)
    assert physical(render(tmp_path, v1), cloud) != physical(render(tmp_path, v2), cloud)
    [pool] = diff_records(record(v1), record(v2)).pools
    assert pool.change is PoolChange.NEW_NODES
    assert [str(f) for f in pool.fields] == ["maxPods: 64 -> 100"]


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_nodes_min_change_is_in_place_and_the_size_is_left_to_the_autoscaler(
    tmp_path: Path, cloud: str
) -> None:
    v1, v2 = stack(cloud, nodes={"min": 1, "max": 4}), stack(cloud, nodes={"min": 2, "max": 4})
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    assert physical(before, cloud) == physical(after, cloud)
    ignored = set(after.options[(POOL_TYPE[cloud], "h100")].ignore_changes)
    expected = {
        "gke": {"initialNodeCount", "nodeCount"},
        "eks": {"scalingConfig.desiredSize"},
        "oke": {"nodeConfigDetails.size"},
    }[cloud]
    assert ignored == expected
    [pool] = diff_records(record(v1), record(v2)).pools
    assert pool.change is PoolChange.IN_PLACE
    assert [str(f) for f in pool.fields] == ["nodes: 1-4 -> 2-4"]


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_fixed_to_autoscaled_keeps_the_pool(tmp_path: Path, cloud: str) -> None:
    v1, v2 = stack(cloud, nodes=2), stack(cloud, nodes={"min": 2, "max": 5})
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    assert physical(before, cloud) == physical(after, cloud)
    fixed = before.options[(POOL_TYPE[cloud], "h100")].ignore_changes
    if cloud == "gke":
        old = named(before, GKE_POOL, "h100").inputs
        new = named(after, GKE_POOL, "h100").inputs
        assert old["nodeCount"] == 2 and "autoscaling" not in old
        assert "nodeCount" not in new and new["autoscaling"] == {
            "totalMinNodeCount": 2, "totalMaxNodeCount": 5
        }  # fmt: skip
        # initial_node_count forces a new pool when it changes: it is never compared.
        assert fixed == ("initialNodeCount",)
    else:
        assert fixed == ()  # a fixed size is the stack's to set
    assert diff_records(record(v1), record(v2)).pools[0].change is PoolChange.IN_PLACE


def test_labels_and_taints_update_in_place_on_gke_and_eks_but_need_new_nodes_on_oke() -> None:
    taint = [{"key": "team", "value": "ml", "effect": "NoSchedule"}]
    for cloud, change in (("gke", PoolChange.IN_PLACE), ("eks", PoolChange.IN_PLACE),
                          ("oke", PoolChange.NEW_NODES)):  # fmt: skip
        v2 = stack(cloud, labels={"team": "ml"}, taints=taint)
        [pool] = diff_records(record(stack(cloud)), record(v2)).pools
        assert pool.change is change, cloud
        assert {f.key for f in pool.fields} == {"labels", "taints"}


def test_a_service_moving_pools(tmp_path: Path) -> None:
    v1 = stack()
    v1["pools"].append({**v1["pools"][0], "name": "spare", "mig": "all-1g.20gb", "maxPods": 64})
    v2 = copy.deepcopy(v1)
    v2["services"][0].update({"pool": "spare", "memoryGiB": 15})
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    assert physical(before, "gke", "spare") == physical(after, "gke", "spare")
    assert affinity(after)["mig-inference.io/pool"] == ["spare"]
    changes = diff_records(record(v1), record(v2))
    assert {p.name: p.change for p in changes.pools} == {
        "h100": PoolChange.UNCHANGED, "spare": PoolChange.UNCHANGED
    }  # fmt: skip
    [service] = changes.services
    assert (service.change, service.reason) == (ServiceChange.MOVED, "pool h100 -> spare")


def test_a_pool_added_next_to_existing_ones_leaves_them_alone(tmp_path: Path) -> None:
    v1 = stack()
    v2 = copy.deepcopy(v1)
    v2["pools"].append({**v1["pools"][0], "name": "more", "mig": "all-balanced"})
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    assert physical(before, "gke") == physical(after, "gke")
    assert affinity(before) == affinity(after)
    changes = diff_records(record(v1), record(v2))
    assert {p.name: p.change for p in changes.pools} == {
        "h100": PoolChange.UNCHANGED, "more": PoolChange.ADDED
    }  # fmt: skip
    assert [s.change for s in changes.services] == [ServiceChange.UNAFFECTED]


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_in_place_rollout_repartitions_node_by_node(tmp_path: Path, cloud: str) -> None:
    v1 = stack(cloud, rollout="in-place", maxUnavailable=1)
    v2 = stack(cloud, rollout="in-place", maxUnavailable=1, mig="all-balanced")
    before, after = render(tmp_path, v1), render(tmp_path, v2)
    assert physical(before, cloud) == physical(after, cloud)  # same nodes, same generation
    jobs = {
        j.inputs["metadata"]["name"]: j.inputs for j in after.of_type("kubernetes:batch/v1:Job")
    }
    [repartition] = [job for name, job in jobs.items() if name.startswith("mig-repartition-h100")]
    env = {e["name"]: e["value"]
           for e in repartition["spec"]["template"]["spec"]["containers"][0]["env"]}  # fmt: skip
    assert env["TARGET_CONFIG"] == "all-balanced" and env["MAX_UNAVAILABLE"] == "1"
    assert env["REPARTITION_SELECTOR"].startswith("mig-inference.io/generation=")
    # The pool is relabelled only after the Job moved its nodes one by one.
    pool_component = {"gke": "GkeGpuPool", "eks": "EksGpuNodeGroup", "oke": "OkeGpuPool"}[cloud]
    depends = after.options[(f"mig-inference:index:{pool_component}", "h100")].depends_on
    assert "repartition-h100" in depends and "gpu-operator" in depends
    changes = diff_records(record(v1), record(v2))
    [pool] = changes.pools
    assert pool.change is PoolChange.REPARTITIONED
    assert pool.replicas_evicted == 4 and pool.slices_unavailable == 16  # one node of 2x8 slices
    assert changes.services[0].change is ServiceChange.RESCHEDULED


def test_a_protected_pool_that_must_be_replaced_is_refused_with_ways_forward() -> None:
    v1, v2 = stack(), stack(mig="all-1g.10gb", maxPods=90)
    v1["cluster"]["protect"] = v2["cluster"]["protect"] = True
    changes = diff_records(record(v1), record(v2))
    [refusal] = changes.refusals
    assert "pool h100 is protected and maxPods, mig needs new nodes" in refusal
    assert "pulumi state unprotect 'urn:pulumi:test::mig-inference::" in refusal
    assert "GkeGpuPool$gcp:container/nodePool:NodePool::h100'" in refusal
    # Switching to in-place is itself one new generation (the name stops carrying the layout),
    # so it is no way around the refusal, and is not offered as one.
    assert "rollout: in-place" not in refusal
    switched = stack(rollout="in-place")
    switched["cluster"]["protect"] = True
    [pool] = diff_records(record(v1), record(switched)).pools
    assert pool.change is PoolChange.NEW_NODES
    # The layout itself did not change: only the rollout is named (never `mig: X -> (unset)`).
    assert [str(f) for f in pool.fields] == ["rollout: blue-green -> in-place"]


def test_subnet_order_does_not_replace_an_eks_group_but_oke_placement_does() -> None:
    v1, v2 = stack("eks"), stack("eks")
    v1["cluster"]["subnetIds"] = ["subnet-00000001", "subnet-00000002"]
    v2["cluster"]["subnetIds"] = ["subnet-00000002", "subnet-00000001"]
    assert diff_records(record(v1), record(v2)).pools[0].change is PoolChange.UNCHANGED
    o1, o2 = stack("oke"), stack("oke")
    o2["cluster"]["availabilityDomains"] = ["Uocm:US-CHICAGO-1-AD-2"]
    [pool] = diff_records(record(o1), record(o2)).pools
    assert pool.change is PoolChange.NEW_NODES
    assert [f.key for f in pool.fields] == ["cluster.availabilityDomains"]


def test_in_place_pools_keep_their_services_budgets_strict_between_updates(
    tmp_path: Path,
) -> None:
    # A budget of every replica let a cloud's node upgrade or a `kubectl drain` take the service
    # to zero between `pulumi up`s; the re-partitioning Job relaxes it only while it runs.
    for config in (stack(rollout="in-place"), stack()):
        rendering = render(tmp_path, config)
        budget = named(rendering, "kubernetes:policy/v1:PodDisruptionBudget", "chat-pdb").inputs
        assert budget["spec"]["maxUnavailable"] == 1
        assert budget["metadata"]["labels"]["mig-inference.io/pool"] == "h100"
        assert budget["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "mig-inference"
    [job] = [j.inputs for j in render(tmp_path, stack(rollout="in-place")).of_type(
        "kubernetes:batch/v1:Job") if j.inputs["metadata"]["name"].startswith("mig-repartition")]  # fmt: skip
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BUDGET_SELECTOR"] == (
        "mig-inference.io/pool=h100,app.kubernetes.io/managed-by=mig-inference"
    )


def test_a_failed_job_is_replaced_on_the_next_up(tmp_path: Path) -> None:
    for job in render(tmp_path, stack(rollout="in-place")).of_type("kubernetes:batch/v1:Job"):
        assert job.inputs["metadata"]["annotations"] == {"pulumi.com/replaceUnready": "true"}


def test_gke_nodes_are_totals_spread_over_the_named_zones(tmp_path: Path) -> None:
    config = stack(nodes=2, zones=["us-central1-a", "us-central1-b"])
    config["cluster"]["location"] = "us-central1"
    pool = named(render(tmp_path, config), GKE_POOL, "h100").inputs
    assert pool["nodeCount"] == 1 and pool["nodeLocations"] == ["us-central1-a", "us-central1-b"]
    plan = plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))
    assert (plan.pools[0].min_nodes, plan.pools[0].nodes_per_zone) == (2, 1)
    for pool_change, message in (
        ({"nodes": 3}, r"pools\[0\].nodes: 3 node\(s\) cannot be spread evenly over 2 zones"),
        ({"zones": []}, r"pools\[0\].zones: is required on a regional cluster \(us-central1\)"),
        ({"zones": ["us-east1-b"]}, r"zones\[0\]: 'us-east1-b' is not a zone of the cluster's region"),
    ):  # fmt: skip
        bad = copy.deepcopy(config)
        bad["pools"][0].update(pool_change)
        with pytest.raises(MigError, match=message):
            parse_and_plan(bad)


def parse_and_plan(config: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({"rollout": "in-place", "migManager": "gke", "mig": "all-3g.40gb"},
         "GKE's native MIG partitions GPUs when a node is created"),
        ({"maxUnavailable": 2}, "only applies to rollout: in-place"),
        ({"rollout": "sideways"}, "'sideways' is not allowed; allowed: blue-green, in-place"),
    ],
)  # fmt: skip
def test_rollout_refusals(pool: dict[str, Any], message: str) -> None:
    with pytest.raises(MigError, match=message):
        parse_and_plan(stack(**pool))


def write(path: Path, config: dict[str, Any]) -> Path:
    body = {f"mig-inference:{key}": value for key, value in config.items()}
    path.write_text(yaml.safe_dump({"config": body}))
    return path


def test_diff_command_from_pulumi_stack_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed = tmp_path / "outputs.json"
    deployed.write_text(json.dumps({"plan": record(stack()), "kubeconfig": "[secret]"}))
    new = write(tmp_path / "Pulumi.test.yaml", stack(mig="all-1g.10gb", maxPods=90))
    assert main(["diff", "--deployed", str(deployed), "--stack-file", str(new)]) == 0
    out = capsys.readouterr().out
    assert "h100: new nodes needed (maxPods: 64 -> 90; mig: all-3g.40gb -> all-1g.10gb)" in out
    assert "chat: moved (to pool h100's new generation" in out
    assert "extra GPUs at the peak (both generations running): 8" in out
    assert main(["diff", "--deployed", str(deployed), "--stack-file", str(new), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # Every replica moves to the new generation and, without a model cache, downloads its
    # model again (memoryGiB 8 stands for the weights: no weightsGiB, no params).
    assert report["cost"] == {"replicas_evicted": 0, "slices_unavailable_at_once": 0,
                              "extra_gpus_at_peak": 8, "hub_bytes": 4 * 8 * 2**30}  # fmt: skip
    assert report["pools"][0]["change"] == "new nodes needed"


def test_diff_command_from_an_older_stack_file_and_plan_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path / "Pulumi.old.yaml", stack(rollout="in-place"))
    new = write(tmp_path / "Pulumi.test.yaml", stack(rollout="in-place", mig="all-balanced"))
    assert main(["diff", "--deployed", str(old), "--stack-file", str(new)]) == 0
    assert "h100: re-partitioned node by node (mig: all-3g.40gb -> all-balanced)" in (
        capsys.readouterr().out
    )
    assert main(["plan", "--stack-file", str(new), "--deployed", str(old), "--json"]) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("re-partitioned in place, node by node: 4 replica(s) evicted" in w for w in warnings)


def test_diff_refuses_protected_replacement_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = stack(), stack(maxPods=90)
    v1["cluster"]["protect"] = v2["cluster"]["protect"] = True
    old, new = write(tmp_path / "Pulumi.old.yaml", v1), write(tmp_path / "Pulumi.test.yaml", v2)
    assert main(["diff", "--deployed", str(old), "--stack-file", str(new)]) == 1
    err = capsys.readouterr().err
    assert "error: pool h100: maxPods needs new nodes, and Pulumi refuses" in err
    # The URN carries the real parent chain, so the command given works as printed.
    assert (
        "pulumi state unprotect 'urn:pulumi:test::mig-inference::mig-inference:index:MigInference"
        "$mig-inference:index:GkeGpuPool$gcp:container/nodePool:NodePool::h100'" in err
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read deployed plan: No such file or directory"),
        (b"\xff\xfe\x00", "deployed plan is not UTF-8 text: byte 0xff on line 1"),
        (b'{"outputs": {"x": 1}}', "not a deployed plan"),
        (b"[1, 2", "not valid YAML at line 1"),
    ],
)
def test_diff_bad_input_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, message: str
) -> None:
    deployed = tmp_path / "deployed.json"
    if content is not None:
        deployed.write_bytes(content)
    new = write(tmp_path / "Pulumi.test.yaml", stack())
    assert main(["diff", "--deployed", str(deployed), "--stack-file", str(new)]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err
    assert "Traceback" not in captured.err


def test_diff_refuses_a_plan_of_another_cloud(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed = tmp_path / "outputs.json"
    deployed.write_text(json.dumps({"plan": record(stack("eks"))}))
    new = write(tmp_path / "Pulumi.test.yaml", stack())
    assert main(["diff", "--deployed", str(deployed), "--stack-file", str(new)]) == 1
    assert "cannot move between clouds" in capsys.readouterr().err


def test_the_program_exports_the_plan_diff_reads(tmp_path: Path) -> None:
    rendering = render(tmp_path, stack())
    assert rendering.outputs["plan"] == json.loads(json.dumps(record(stack())))


def test_a_namespace_move_moves_the_service() -> None:
    v2 = copy.deepcopy(stack())
    v2["services"][0]["namespace"] = "other"
    [service] = diff_records(record(stack()), record(v2)).services
    assert (
        service.change is ServiceChange.MOVED and "namespace inference -> other" in service.reason
    )


def test_a_boot_disk_type_equal_to_the_default_keeps_the_generation() -> None:
    # a3-highgpu-8g boots from pd-balanced unless told otherwise: writing it changes nothing.
    [pool] = diff_records(record(stack()), record(stack(bootDiskType="pd-balanced"))).pools
    assert pool.change is PoolChange.UNCHANGED
    [pool] = diff_records(record(stack()), record(stack(bootDiskType="pd-ssd"))).pools
    assert pool.change is PoolChange.NEW_NODES
    assert [str(f) for f in pool.fields] == ["bootDiskType: pd-balanced -> pd-ssd"]


def test_an_imds_hop_limit_of_2_is_named_not_unset() -> None:
    v1, v2 = stack("eks"), stack("eks")
    v1["cluster"]["imdsHopLimit"], v2["cluster"]["imdsHopLimit"] = 2, 1
    [pool] = diff_records(record(v1), record(v2)).pools
    assert pool.change is PoolChange.NEW_NODES
    assert [str(f) for f in pool.fields] == ["cluster.imdsHopLimit: 2 -> 1"]


def test_a_new_generation_of_a_reserved_pool_needs_the_reservation_twice() -> None:
    from mig_inference.changes.change_plan import change_warnings
    from tests.rollout.test_rollout import transition

    v1 = stack(capacity="reservation", reservation="h100-res")
    _, changes = transition(v1, stack(capacity="reservation", reservation="h100-res", maxPods=90))
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES and pool.reservation == "h100-res"
    [warning] = [w for w in change_warnings(changes) if "pool h100" in w]
    assert "reservation h100-res must hold 16 GPUs while both generations run" in warning
    assert "8 more than the deployed pool holds" in warning and "extra GPUs until" not in warning


CUSTOM = {"3g.40gb": 1, "1g.10gb": 4}
RENAMED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}


@pytest.mark.parametrize("rollout", ["in-place", "blue-green"])
def test_a_renamed_custom_layout_says_when_a_reboot_loses_its_instances(rollout: str) -> None:
    """A custom layout changed is a new mig-parted config name: the operator's release drops the
    old one while nodes still name it (until the Job relabels them, or the old generation is
    deleted). `diff` names those nodes and how long; a named layout (NVIDIA's, always there) is
    never listed."""
    from mig_inference.changes.change_plan import change_plan_json, change_warnings
    from tests.rollout.test_rollout import stack, transition

    v1 = stack(nodes=2, rollout=rollout, mig=CUSTOM, replicas=4)
    v2 = stack(nodes=2, rollout=rollout, mig=RENAMED, replicas=4)
    outcome, changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    [pool] = changes.pools
    old = record(v1)["pools"]["h100"]["config"]
    assert set(pool.mig_config_missing) and {c for c, _ in pool.mig_config_missing.values()} == {
        old
    }
    assert all(seconds > 0 for _, seconds in pool.mig_config_missing.values())
    [warning] = [w for w in change_warnings(changes) if "a node that reboots" in w]
    assert f"the MIG layout {old}, which the GPU Operator's mig-parted config no longer" in warning
    assert change_plan_json(changes)["pools"][0]["mig_config_missing"]
    _, named = transition(
        stack(nodes=2, rollout=rollout, replicas=4),
        stack(nodes=2, rollout=rollout, mig="all-1g.10gb", replicas=4),
    )
    assert named.pools[0].mig_config_missing == {}


def test_a_new_generation_names_the_allocation_it_leaves() -> None:
    """A move to DRA without the bridge is a new generation: `allocation: device-plugin -> dra`
    both ways, never `(unset)`."""
    from tests.kube.test_dra_move import versions

    plugin, dra = versions("gke", {"kubernetesVersion": "1.36"}, rollout="in-place")
    for deployed, current, fields in (
        (plugin, dra, ["allocation: device-plugin -> dra"]),
        (dra, plugin, ["allocation: dra -> device-plugin"]),
    ):
        [pool] = diff_records(record(deployed), record(current)).pools
        assert pool.change is PoolChange.NEW_NODES
        assert [str(f) for f in pool.fields] == fields
