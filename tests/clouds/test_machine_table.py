"""The machine table (`mig_inference.clouds.MACHINES`) enumerated.

Every machine family of each cloud (the rows whose facts are alike, one machine each) is tried
with every capacity choice its cloud has a mechanism for: the choices the table says the cloud
refuses are refused at their key, with the cloud's rule; the others go, for each allocation
(device plugin, DRA) and each cluster (created, joined), into one stack per cloud, rendered
under Pulumi's mocks, whose cloud resources and Kubernetes objects are checked for what the
table says must be there: the capacity settings on each node pool, a Capacity Block's instance
type and zone in its launch template, the boot disk, and on Arm pools the toleration of the Arm
taint and an arm64-capable image on every pod scheduled there."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.clouds import MACHINES, Cloud, MachineShape
from mig_inference.clouds.capacity import CLOUD_CAPACITY, RESERVED, Arch, Capacity
from mig_inference.components.clouds.eks import block_subnets
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.gpus.migparted import resolve_config
from mig_inference.plan import plan_stack
from mig_inference.rendering import Rendering, manifest
from mig_inference.spec import parse_stack
from mig_inference.versions import ARM64_IMAGES, GPU_OPERATOR_VERSION
from tests.mocked import render_config

POOL_TYPES = {
    Cloud.GKE: "gcp:container/nodePool:NodePool",
    Cloud.EKS: "aws:eks/nodeGroup:NodeGroup",
    Cloud.OKE: "oci:ContainerEngine/nodePool:NodePool",
}
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
JOINED: dict[Cloud, dict[str, Any]] = {
    Cloud.GKE: {"name": "c", "project": "my-project", "location": "us-central1-c"},
    Cloud.EKS: {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-0000000a"]},
    Cloud.OKE: {"name": "c", "compartmentId": "ocid1.compartment.oc1..c",
                "clusterId": "ocid1.cluster.oc1..k", "subnetIds": ["ocid1.subnet.oc1..s"],
                "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
}  # fmt: skip
CREATED: dict[Cloud, dict[str, Any]] = {
    Cloud.GKE: {"create": True, "network": "default", "subnetwork": "default",
                "authorizedNetworks": ["203.0.113.0/24"]},
    Cloud.EKS: {"create": True, "vpcId": "vpc-0000000a", "version": "1.34",
                "publicAccessCidrs": ["203.0.113.0/24"]},
    Cloud.OKE: {"create": True, "vcnId": "ocid1.vcn.oc1..v",
                "endpointSubnetId": "ocid1.subnet.oc1..api", "podSubnetIds": ["ocid1.subnet.oc1..p"],
                "kubernetesVersion": "v1.34.2", "systemImageId": "ocid1.image.oc1..sys"},
}  # fmt: skip
RESERVATIONS = {
    Cloud.GKE: "reservation-{n}",
    Cloud.EKS: "cr-0a1b2c3d4e5f6{n:04x}",
    Cloud.OKE: "ocid1.capacityreservation.oc1.us-chicago-1.aaaaaaaa{n}",
}


def families(cloud: Cloud) -> list[MachineShape]:
    """One machine per family: the rows alike in GPU and in how they are sold (capacity,
    architecture, boot disks, native MIG), the one with fewest GPUs."""
    chosen: dict[tuple[Any, ...], MachineShape] = {}
    for machine in MACHINES[cloud].values():
        facts = machine.facts
        assert facts is not None
        key = (machine.gpu, facts.capacity, facts.arch, facts.boot_disks, facts.native_mig)
        if key not in chosen or machine.gpus < chosen[key].gpus:
            chosen[key] = machine
    return list(chosen.values())


def _mig(gpu_name: str) -> str | None:
    """A layout NVIDIA names for the GPU (the first `all-<profile>`), or none without MIG."""
    gpu = resolve_gpu(gpu_name)
    if not gpu.mig_capable:
        return None
    for profile in gpu.profiles:
        try:
            return resolve_config(gpu, f"all-{profile.name}").name
        except MigError:
            continue
    raise AssertionError(f"no named layout for {gpu_name}")


def _pool(cloud: Cloud, machine: MachineShape, capacity: Capacity, number: int) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": f"p{number}",
        "gpu": machine.gpu,
        "machineType": machine.name,
        "nodes": {"min": 0, "max": 1} if capacity is Capacity.FLEX_START else 1,
        "mig": _mig(machine.gpu),
        "capacity": str(capacity),
    }
    if capacity in RESERVED:
        pool["reservation"] = RESERVATIONS[cloud].format(n=number)
    if cloud is Cloud.OKE:
        pool.update(imageId="ocid1.image.oc1..gpu", maxPods=110)
    return pool


def _stack(cloud: Cloud, pools: list[dict[str, Any]], created: bool, dra: bool) -> dict[str, Any]:
    cluster = dict(JOINED[cloud])
    if created:
        cluster.update(CREATED[cloud])
    config: dict[str, Any] = {
        "cloud": cloud.value,
        "cluster": {**cluster, "protect": False},
        "pools": pools,
        "services": [
            {"name": f"s-{pool['name']}", "model": "m", "memoryGiB": 1, "replicas": 1,
             "pool": pool["name"]}
            for pool in pools
        ],
    }  # fmt: skip
    if dra:
        config["dra"] = {"kubernetesVersion": "1.34"}
        for pool in pools:
            pool["allocation"] = "dra"
    return config


def _plan(config: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def _accepted(cloud: Cloud, pool: dict[str, Any], created: bool, dra: bool) -> bool:
    """Whether the spec takes the pool alone (a DRA pool cannot autoscale, for one)."""
    try:
        _plan(_stack(cloud, [dict(pool)], created, dra))
    except MigError:
        return False
    return True


@cache
def combinations(
    cloud: Cloud, created: bool, dra: bool
) -> tuple[tuple[MachineShape, Capacity], ...]:
    found = []
    for machine in families(cloud):
        assert machine.facts is not None
        for capacity in machine.facts.capacity:
            if _accepted(cloud, _pool(cloud, machine, capacity, 0), created, dra):
                found.append((machine, capacity))
    return tuple(found)


@pytest.mark.parametrize("cloud", [Cloud.GKE, Cloud.EKS, Cloud.OKE])
def test_every_choice_the_table_leaves_out_is_refused_at_its_key_with_the_rule(
    cloud: Cloud,
) -> None:
    refused = 0
    for machine in families(cloud):
        assert machine.facts is not None
        for capacity in CLOUD_CAPACITY[cloud.value]:
            if capacity in machine.facts.capacity:
                continue
            pool = _pool(cloud, machine, capacity, 0)
            with pytest.raises(MigError) as caught:
                _plan(_stack(cloud, [pool], created=False, dra=False))
            # Other independent errors of the pool (a flex-start pool's scale from zero) come
            # in the same run; the capacity's is one of them.
            [error] = [e for e in caught.value.errors if (e.path or "").endswith(".capacity")]
            assert error.path == "mig-inference:pools[0].capacity", (machine.name, capacity)
            assert f"{machine.name} is not sold as {capacity} capacity" in error.message
            assert machine.facts.capacity_rule in error.message
            assert error.allowed == [str(c) for c in machine.facts.capacity]
            refused += 1
    assert refused


@pytest.mark.parametrize("dra", [False, True], ids=["device-plugin", "dra"])
@pytest.mark.parametrize("created", [False, True], ids=["joined", "created"])
@pytest.mark.parametrize("cloud", [Cloud.GKE, Cloud.EKS, Cloud.OKE])
def test_every_accepted_combination_renders_what_the_table_says(
    tmp_path: Path, cloud: Cloud, created: bool, dra: bool
) -> None:
    chosen = combinations(cloud, created, dra)
    if not dra:
        # Every family is accepted with every choice it is sold as on the device plugin.
        assert {m.name for m, _ in chosen} == {m.name for m in families(cloud)}
    pools = [_pool(cloud, m, c, n) for n, (m, c) in enumerate(chosen)]
    rendering = render_config(tmp_path, _stack(cloud, pools, created, dra))
    assert rendering.error is None, rendering.error
    rendered = {_pool_name(r.inputs, cloud): r.inputs for r in rendering.of_type(POOL_TYPES[cloud])}
    templates = {r.name: r.inputs for r in rendering.of_type(LAUNCH_TEMPLATE)}
    for number, (machine, capacity) in enumerate(chosen):
        inputs = next(v for k, v in rendered.items() if k.startswith(f"p{number}-"))
        _check_capacity(cloud, machine, capacity, number, inputs, templates)
        _check_arch(rendering, machine, f"p{number}")


def _pool_name(inputs: dict[str, Any], cloud: Cloud) -> str:
    return str(inputs.get("nodeGroupName" if cloud is Cloud.EKS else "name", ""))


def _check_capacity(
    cloud: Cloud,
    machine: MachineShape,
    capacity: Capacity,
    number: int,
    inputs: dict[str, Any],
    templates: dict[str, dict[str, Any]],
) -> None:
    assert machine.facts is not None
    reservation = RESERVATIONS[cloud].format(n=number)
    if cloud is Cloud.GKE:
        config = inputs["nodeConfig"]
        assert config["machineType"] == machine.name
        assert config["diskType"] == machine.facts.boot_disks[0]
        assert config["spot"] is (capacity is Capacity.SPOT)
        assert config.get("flexStart") is (True if capacity is Capacity.FLEX_START else None)
        affinity = config.get("reservationAffinity")
        if capacity is Capacity.RESERVATION:
            assert affinity["values"] == [reservation]
        else:
            assert affinity in (None, {"consumeReservationType": "NO_RESERVATION"})
    elif cloud is Cloud.EKS:
        template = next(t for n, t in templates.items() if n.endswith(f"p{number}"))
        types = {Capacity.SPOT: "SPOT", Capacity.CAPACITY_BLOCK: "CAPACITY_BLOCK"}
        assert inputs["capacityType"] == types.get(capacity, "ON_DEMAND")
        target = (template.get("capacityReservationSpecification") or {}).get(
            "capacityReservationTarget"
        )
        if capacity is Capacity.CAPACITY_BLOCK:
            # The block's instance type in the launch template, none on the node group, and
            # the cluster's subnets of the block's zone (offline: all of them).
            assert template["instanceType"] == machine.name and "instanceTypes" not in inputs
            assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
            assert target == {"capacityReservationId": reservation}
            assert inputs["subnetIds"] == ["subnet-0000000a"]
        else:
            assert inputs["instanceTypes"] == [machine.name] and "instanceType" not in template
            assert target == ({"capacityReservationId": reservation} if capacity in RESERVED
                              else None)  # fmt: skip
    else:
        [placement] = inputs["nodeConfigDetails"]["placementConfigs"]
        assert inputs["nodeShape"] == machine.name
        assert ("preemptibleNodeConfig" in placement) is (capacity is Capacity.SPOT)
        assert placement.get("capacityReservationId") == (
            reservation if capacity is Capacity.RESERVATION else None
        )


ARM_TOLERATION = {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                  "effect": "NoSchedule"}  # fmt: skip


def _pods_on(rendering: Rendering, pool: str) -> list[dict[str, Any]]:
    """Every pod template the program schedules onto the pool's nodes (by the pool label)."""
    found = []
    for resource in rendering.resources:
        if not resource.is_kubernetes_object:
            continue
        obj = manifest(resource)
        spec = (obj.get("spec") or {}).get("template", {}).get("spec")
        if spec is None:
            continue
        terms = (
            ((spec.get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", [])
        )
        values = [
            v for t in terms for e in t.get("matchExpressions") or []
            if e["key"] == "mig-inference.io/pool" for v in e.get("values") or []
        ]  # fmt: skip
        if pool in values:
            found.append(spec)
    return found


def _check_arch(rendering: Rendering, machine: MachineShape, pool: str) -> None:
    pods = _pods_on(rendering, pool)
    assert pods, pool
    for spec in pods:
        tolerations = spec.get("tolerations") or []
        assert (ARM_TOLERATION in tolerations) is (machine.arch is Arch.ARM64), machine.name
        if machine.arch is Arch.ARM64:
            images = [c["image"] for c in [*spec.get("initContainers", []), *spec["containers"]]]
            assert set(images) <= set(ARM64_IMAGES), (machine.name, images)


def test_a_capacity_block_that_cannot_serve_the_pool_stops_at_its_key() -> None:
    block = {"availability_zone": "us-east-1b", "instance_type": "p5.48xlarge",
             "instance_count": 2}  # fmt: skip
    args = ("mig-inference:pools[0]", "cr-0a1b2c3d4e5f60718", "p5.48xlarge")
    assert block_subnets(*args, 2, block, ["subnet-b"]) == ["subnet-b"]
    with pytest.raises(Exception, match=r"pools\[0\]\.reservation: Capacity Block .* is in "
                       r"us-east-1b, and no subnet of mig-inference:cluster\.subnetIds is"):  # fmt: skip
        block_subnets(*args, 2, block, [])
    with pytest.raises(Exception, match=r"pools\[0\]\.nodes: Capacity Block .* holds 2"):
        block_subnets(*args, 3, block, ["subnet-b"])
    with pytest.raises(Exception, match=r"pools\[0\]\.reservation: .* holds p4d.24xlarge"):
        block_subnets(*args, 2, {**block, "instance_type": "p4d.24xlarge"}, ["subnet-b"])


@pytest.mark.parametrize(
    ("cloud", "machine", "capacity"),
    [("gke", "a4x-highgpu-4g", "reservation"), ("oke", "BM.GPU.GB200.4", "on-demand"),
     ("oke", "BM.GPU.GB300.4", "reservation")],
)  # fmt: skip
def test_an_engine_image_without_an_arm64_build_is_refused_on_arm_pools(
    cloud: str, machine: str, capacity: str
) -> None:
    pool = _pool(Cloud(cloud), MACHINES[Cloud(cloud)][machine], Capacity(capacity), 0)
    config = _stack(Cloud(cloud), [pool], created=False, dra=False)
    config["services"][0]["engine"] = "tgi"
    with pytest.raises(MigError) as caught:
        _plan(config)
    [error] = caught.value.errors
    assert (error.path, error.value) == ("mig-inference:services[0].engine", "tgi")
    assert "text-generation-inference:3.3.5 has no arm64 build" in error.message
    assert "platforms: linux/amd64" in error.message and f"{machine} nodes are Arm" in error.message
    config["services"][0]["image"] = "registry.example/tgi-arm:1"
    [warning] = [w for w in _plan(config).warnings if "linux/arm64" in w]
    assert "does not know whether registry.example/tgi-arm:1 has a linux/arm64 build" in warning
    del config["services"][0]["image"]
    config["services"][0]["engine"] = "vllm"
    assert not [w for w in _plan(config).warnings if "linux/arm64" in w]


def test_a4x_nodes_get_googles_a4x_driver_installer(tmp_path: Path) -> None:
    gke = Cloud.GKE
    pools = [_pool(gke, MACHINES[gke]["a4x-highgpu-4g"], Capacity.RESERVATION, 0),
             _pool(gke, MACHINES[gke]["a3-highgpu-8g"], Capacity.SPOT, 1)]  # fmt: skip
    rendering = render_config(tmp_path, _stack(gke, pools, created=False, dra=False))
    assert rendering.error is None, rendering.error
    installers = {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]
        for obj in rendering.kubernetes_objects()
        if obj["kind"] == "DaemonSet" and obj["metadata"]["name"].startswith("nvidia-driver")
    }
    assert set(installers) == {"nvidia-driver-installer", "nvidia-driver-installer-a4x"}
    for name, operator, pause in (
        ("nvidia-driver-installer", "NotIn", "gcr.io/google-containers/pause:2.0"),
        ("nvidia-driver-installer-a4x", "In", "gke.gcr.io/pause:3.8@sha256:"),
    ):
        spec = installers[name]
        [term] = spec["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]  # fmt: skip
        assert {"key": "node.kubernetes.io/instance-type", "operator": operator,
                "values": ["a4x-highgpu-4g"]} in term["matchExpressions"]  # fmt: skip
        assert spec["containers"][0]["image"].startswith(pause)
    assert installers["nvidia-driver-installer-a4x"]["containers"][0]["image"] in ARM64_IMAGES


def test_fill_and_profiling_jobs_on_an_arm_pool_tolerate_it_and_run_arm64_images(
    tmp_path: Path,
) -> None:
    gke = Cloud.GKE
    machine = MACHINES[gke]["a4x-highgpu-4g"]
    config = _stack(gke, [_pool(gke, machine, Capacity.RESERVATION, 0)], created=False, dra=False)
    config["modelCache"] = {"storage": "hyperdisk-ml"}
    config["services"][0].update(
        model="org/model", weightsGiB=1, profiling={"profiles": ["1g.23gb"]}
    )
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    # The engine's Deployment, the cache's fill Job and the profiling Job.
    assert len(_pods_on(rendering, "p0")) == 3
    _check_arch(rendering, machine, "p0")


def _plan_cli(tmp_path: Path, config: dict[str, Any], *flags: str) -> Any:
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in config.items()}})
    )
    command = [sys.executable, "-m", "mig_inference", "plan", "--stack-file", str(path), *flags]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_plan_prints_unconfirmed_facts_as_unconfirmed_and_when_a_block_ends(tmp_path: Path) -> None:
    gke, eks = Cloud.GKE, Cloud.EKS
    config = _stack(gke, [_pool(gke, MACHINES[gke]["a4x-highgpu-4g"], Capacity.RESERVATION, 0),
                          _pool(gke, MACHINES[gke]["a3-highgpu-8g"], Capacity.SPOT, 1)],
                    created=False, dra=False)  # fmt: skip
    done = _plan_cli(tmp_path, config)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    # A4X's capacity is confirmed (reservations only); its boot disk and CPU facts are not.
    assert (
        "  capacity: reservation reservation-0; boots from hyperdisk-balanced (unconfirmed)\n"
        in (text)
    )
    assert "  capacity: spot (unconfirmed); boots from pd-balanced (unconfirmed)\n" in text
    assert "arm64 (unconfirmed): every pod here tolerates kubernetes.io/arch" in text
    assert "  unconfirmed here: boot disks, max pods ceiling, CPU architecture" in text
    answer = json.loads(_plan_cli(tmp_path, config, "--json").stdout)
    row = answer["pools"][0]["machine"]
    assert (row["arch"], row["capacity"], row["native_mig"]) == ("arm64", ["reservation"], False)
    assert "consumption-models" in row["sources"]["capacity"]
    assert "capacity" not in row["unconfirmed"] and "boot_disks" in row["unconfirmed"]
    block = _stack(eks, [_pool(eks, MACHINES[eks]["p5.48xlarge"], Capacity.CAPACITY_BLOCK, 0)],
                   created=False, dra=False)  # fmt: skip
    done = _plan_cli(tmp_path, block)
    assert done.returncode == 0, done.stderr
    assert (
        "  when the block ends: a Capacity Block ends at its end time (11:30 UTC): EC2 begins "
        "terminating its instances 30 minutes before" in done.stdout
    )


def test_the_rollout_simulator_knows_gke_taints_arm_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.rollout.test_rollout import transition

    gke = Cloud.GKE
    x86 = _pool(gke, MACHINES[gke]["a3-highgpu-8g"], Capacity.SPOT, 0)
    arm = _pool(gke, MACHINES[gke]["a4x-highgpu-4g"], Capacity.RESERVATION, 1)
    before = _stack(gke, [x86], created=False, dra=False)
    after = _stack(gke, [dict(x86), arm], created=False, dra=False)
    outcome, _ = transition(before, after)
    assert outcome.services["s-p1"].after == 1 and outcome.services["s-p1"].pending_at_end == 0
    # Without the toleration the new replica stays off the Arm node, as on GKE. (Another
    # service size: the plans and simulations above are cached by the stack's values.)
    monkeypatch.setattr("mig_inference.plan.pools.arch_tolerations", lambda _: ())
    after["services"][1]["memoryGiB"] = 2
    outcome, _ = transition(before, after)
    assert outcome.services["s-p1"].pending_at_end == 1
