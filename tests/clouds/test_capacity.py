"""GPU capacity as each cloud sells it: the `capacity` key checked per machine type, its mapping
to each cloud's mechanism on the rendered inputs (under Pulumi mocks), the pools that would never
get a node, OKE's availability domains, and the generation a capacity change brings."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mig_inference.changes.change_plan import PoolChange
from mig_inference.clouds import MACHINES, MAX_PODS_RANGE, Cloud
from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.prices import load_prices
from mig_inference.errors import MigError
from mig_inference.plan import plan_stack
from mig_inference.reports.stack_cost import stack_cost
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.changes.test_day2 import EKS_GROUP, GKE_POOL, OKE_POOL
from tests.mocked import one, render_config
from tests.rollout.test_rollout import stack, transition

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def _plan(config: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def _errors(config: dict[str, Any]) -> list[MigError]:
    with pytest.raises(MigError) as caught:
        _plan(config)
    return list(caught.value.errors)


def gke(machine: str, gpu: str = "H100-80GB", **pool: Any) -> dict[str, Any]:
    return stack("gke", replicas=1, machineType=machine, gpu=gpu, **pool)


EKS_AMI = "awslabs/amazon-eks-ami@0254c5b490f819627461d1b24f87e440cbdb251f"
EKS_MAX_PODS = {
    # instance type: (max pods, line of templates/shared/runtime/eni-max-pods.txt at EKS_AMI).
    # The same values follow from nodeadm's formula (nodeadm/internal/kubelet/eni_max_pods.go
    # L75-77: ENIs x (IPv4 per ENI - 1) + 2) over nodeadm/internal/kubelet/instance-info.jsonl at
    # awslabs/amazon-eks-ami@81fec2e895854f599974fe4d3d72f61c0a9aaffa, whose lines are given too.
    "p4d.24xlarge": (737, 750, 913), "p4de.24xlarge": (737, 751, 914),
    "p5.48xlarge": (100, 752, 915), "p5e.48xlarge": (100, 754, 917),
    "p5en.48xlarge": (198, 755, 918), "p6-b200.48xlarge": (198, 756, 919),
    "p6-b300.48xlarge": (198, 757, 920), "g4dn.xlarge": (29, 341, 365),
    "g4dn.12xlarge": (234, 335, 359), "g5.xlarge": (58, 349, 373),
    "g5.12xlarge": (737, 342, 366), "g5.48xlarge": (345, 346, 370), "g6.xlarge": (58, 363, 387),
    "g6.12xlarge": (234, 356, 380), "g6.48xlarge": (737, 360, 384),
    "g6e.xlarge": (58, 371, 395), "g6e.12xlarge": (292, 364, 388),
    "g6e.48xlarge": (492, 368, 392),
}  # fmt: skip
GKE_MAX_PODS = 256
"""GKE "Configure maximum Pods per node" (cloud.google.com/kubernetes-engine/docs/how-to/
flexible-pod-cidr): 8 to 256 per node on Standard clusters, default 110."""
OKE_MAX_PODS = (31, 110)
"""OKE "Using the OCI VCN-Native Pod Networking CNI plugin" (docs.oracle.com/en-us/iaas/Content/
ContEng/Concepts/contengpodnetworking_topic-OCI_CNI_plugin.htm): 31 pods per node by default, at
most 110."""


def test_every_known_gpu_machine_has_its_capacity_disks_and_max_pods_with_sources() -> None:
    for cloud, machines in MACHINES.items():
        for name, shape in machines.items():
            facts = shape.facts
            assert facts is not None, name
            assert facts.capacity and facts.boot_disks and facts.max_pods > 0
            assert all(facts.sources().values()), name
            if cloud is Cloud.EKS:
                # The EKS AMI's own value, transcribed above: the planner's ceiling and default.
                assert (facts.max_pods, shape.default_max_pods) == (EKS_MAX_PODS[name][0],) * 2
                assert "max_pods" not in facts.unconfirmed
            elif cloud is Cloud.GKE:
                assert facts.max_pods == GKE_MAX_PODS
            else:
                assert (shape.default_max_pods, facts.max_pods) == OKE_MAX_PODS
    assert set(MACHINES) == {Cloud.GKE, Cloud.EKS, Cloud.OKE}
    assert MAX_PODS_RANGE[Cloud.GKE][1] == GKE_MAX_PODS
    assert MAX_PODS_RANGE[Cloud.OKE][1] == OKE_MAX_PODS[1]


@pytest.mark.parametrize("machine", ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"])
def test_small_a3_high_is_refused_on_demand(machine: str) -> None:
    [error] = _errors(gke(machine))
    assert error.path == "mig-inference:pools[0].capacity"
    assert f"{machine} is not sold as on-demand capacity" in error.message
    assert error.allowed == ["spot", "flex-start"]
    [error] = _errors(gke(machine, spot=False))
    assert error.allowed == ["spot", "flex-start"]
    assert _plan(gke(machine, spot=True)).pools[0].spec.capacity is Capacity.SPOT


@pytest.mark.parametrize(
    ("machine", "gpu"), [("a3-ultragpu-8g", "H200-141GB"), ("a4-highgpu-8g", "B200-180GB")]
)
def test_a3_ultra_and_a4_need_a_reservation_spot_or_flex_start_and_boot_from_hyperdisk(
    tmp_path: Path, machine: str, gpu: str
) -> None:
    [error] = _errors(gke(machine, gpu, mig="all-disabled"))
    assert error.allowed == ["reservation", "spot", "flex-start"]
    config = gke(machine, gpu, mig="all-disabled", capacity="reservation",
                 reservation="projects/my-project/reservations/h200-block")  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    node_config = one(rendering, GKE_POOL).inputs["nodeConfig"]
    assert node_config["diskType"] == "hyperdisk-balanced"
    assert node_config["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/my-project/reservations/h200-block"],
    }
    assert node_config["spot"] is False and "flexStart" not in node_config


def test_gke_flex_start_autoscales_without_reservation_or_repair(tmp_path: Path) -> None:
    [error] = _errors(gke("a3-highgpu-1g", capacity="flex-start", migManager="gke"))
    assert error.path == "mig-inference:pools[0].nodes" and "{min, max}" in error.message
    config = gke(
        "a3-highgpu-1g", capacity="flex-start", migManager="gke", nodes={"min": 0, "max": 2}
    )
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    pool = one(rendering, GKE_POOL).inputs
    assert pool["nodeConfig"]["flexStart"] is True
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert pool["autoscaling"]["locationPolicy"] == "ANY"
    assert pool["management"]["autoRepair"] is False
    assert pool["nodeConfig"]["diskType"] == "pd-balanced"


def test_gke_on_demand_pool_keeps_its_inputs(tmp_path: Path) -> None:
    rendering = render_config(tmp_path, stack("gke"))
    node_config = one(rendering, GKE_POOL).inputs["nodeConfig"]
    assert "reservationAffinity" not in node_config and "flexStart" not in node_config
    assert node_config["spot"] is False and node_config["diskType"] == "pd-balanced"


@pytest.mark.parametrize(
    ("cloud", "pool", "path", "message"),
    [
        ("gke", {"capacity": "capacity-block"}, "capacity",
         "'capacity-block' is not a capacity choice on gke; allowed: on-demand, spot, reservation, flex-start"),
        ("oke", {"capacity": "flex-start"}, "capacity", "allowed: on-demand, reservation, spot"),
        ("eks", {"capacity": "reservation"}, "reservation", "is required with capacity: reservation"),
        ("eks", {"reservation": "cr-0a1b2c3d4e5f60718"}, "reservation",
         "only applies to capacity: reservation or capacity-block (capacity is on-demand)"),
        ("eks", {"capacity": "reservation", "reservation": "cr-123"}, "reservation",
         "is not an EC2 Capacity Reservation ID"),
        ("gke", {"capacity": "reservation", "reservation": "Bad_Name"}, "reservation",
         "is not a Compute Engine reservation name"),
        ("oke", {"capacity": "reservation", "reservation": "ocid1.image.oc1..x"}, "reservation",
         "is not an OCI capacityreservation OCID"),
        ("gke", {"capacity": "reservation", "reservation": "r1", "spot": True}, "spot",
         "spot: true contradicts capacity: reservation"),
    ],
)  # fmt: skip
def test_bad_capacity_is_one_error_at_its_key(
    cloud: str, pool: dict[str, Any], path: str, message: str
) -> None:
    errors = _errors(stack(cloud, **pool))
    assert [e.path for e in errors] == [f"mig-inference:pools[0].{path}"]
    assert message in errors[0].message


@pytest.mark.parametrize(
    ("machine", "gpu"),
    [("p4de.24xlarge", "A100-80GB"), ("p6-b200.48xlarge", "B200-180GB"),
     ("p6-b300.48xlarge", "B300-269GB"), ("p5en.48xlarge", "H200-141GB")],
)  # fmt: skip
def test_capacity_blocks_where_aws_sells_them(machine: str, gpu: str) -> None:
    plan = _plan(
        stack("eks", machineType=machine, gpu=gpu, mig="all-balanced",
              capacity="capacity-block", reservation="cr-0a1b2c3d4e5f60718")
    )  # fmt: skip
    assert plan.pools[0].spec.capacity is Capacity.CAPACITY_BLOCK


def test_capacity_blocks_refused_where_aws_does_not_sell_them() -> None:
    [error] = _errors(
        stack("eks", machineType="g6e.12xlarge", gpu="L40S-48GB", mig=None,
              capacity="capacity-block", reservation="cr-0a1b2c3d4e5f60718")
    )  # fmt: skip
    assert error.path == "mig-inference:pools[0].capacity"
    assert error.allowed == ["on-demand", "spot", "reservation"]
    assert "AWS sells Capacity Blocks for ML for p4d.24xlarge, p4de.24xlarge" in error.message
    assert "ec2-capacity-blocks.html" in error.message


def test_eks_reservation_and_capacity_block_reach_the_launch_template(tmp_path: Path) -> None:
    reserved = render_config(
        tmp_path, stack("eks", capacity="reservation", reservation="cr-0a1b2c3d4e5f60718")
    )
    assert reserved.error is None, reserved.error
    assert one(reserved, EKS_GROUP).inputs["capacityType"] == "ON_DEMAND"
    template = one(reserved, LAUNCH_TEMPLATE).inputs
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0a1b2c3d4e5f60718"}
    }
    assert "instanceMarketOptions" not in template
    (tmp_path / "b").mkdir()
    block = render_config(
        tmp_path / "b",
        stack("eks", capacity="capacity-block", reservation="cr-0a1b2c3d4e5f60719"),
    )
    assert block.error is None, block.error
    assert one(block, EKS_GROUP).inputs["capacityType"] == "CAPACITY_BLOCK"
    template = one(block, LAUNCH_TEMPLATE).inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0a1b2c3d4e5f60719"
    }


def test_oke_reservation_reaches_the_placement_of_its_one_domain(tmp_path: Path) -> None:
    reservation = "ocid1.capacityreservation.oc1.us-chicago-1.aaaaaaaaexample"
    rendering = render_config(
        tmp_path, stack("oke", capacity="reservation", reservation=reservation)
    )
    assert rendering.error is None, rendering.error
    [placement] = one(rendering, OKE_POOL).inputs["nodeConfigDetails"]["placementConfigs"]
    assert placement["capacityReservationId"] == reservation
    config = stack("oke", capacity="reservation", reservation=reservation)
    config["cluster"]["availabilityDomains"] = ["Uocm:US-CHICAGO-1-AD-1", "Uocm:US-CHICAGO-1-AD-2"]
    config["pools"][0]["zones"] = config["cluster"]["availabilityDomains"]
    [error] = _errors(config)
    assert (
        error.path == "mig-inference:pools[0].zones" and "one availability domain" in error.message
    )


def test_oke_bare_metal_pool_names_its_domain_when_the_cluster_has_several() -> None:
    config = stack("oke")
    domains = ["Uocm:US-CHICAGO-1-AD-1", "Uocm:US-CHICAGO-1-AD-2", "Uocm:US-CHICAGO-1-AD-3"]
    config["cluster"]["availabilityDomains"] = domains
    [error] = _errors(config)
    assert error.path == "mig-inference:pools[0].zones"
    assert "BM.GPU.H100.8" in error.message and error.allowed == domains
    config["pools"][0]["zones"] = ["Uocm:US-CHICAGO-1-AD-2"]
    assert _plan(config).pools[0].zones == ("Uocm:US-CHICAGO-1-AD-2",)


def test_capacity_joins_the_generation_only_beyond_on_demand_and_spot() -> None:
    on_demand, spot = _plan(stack("eks")).pools[0], _plan(stack("eks", spot=True)).pools[0]
    assert "capacity" not in on_demand.replacement_inputs
    assert "capacity" not in spot.replacement_inputs
    assert _plan(stack("eks", capacity="on-demand")).pools[0].generation == on_demand.generation
    reserved = _plan(stack("eks", capacity="reservation", reservation="cr-0a1b2c3d4e5f60718"))
    assert reserved.pools[0].replacement_inputs["capacity"] == "reservation:cr-0a1b2c3d4e5f60718"
    assert reserved.pools[0].generation != on_demand.generation


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_a_move_to_reserved_capacity_is_a_new_generation_in_the_simulator(cloud: str) -> None:
    reservation = {
        "gke": "h100-reservation",
        "eks": "cr-0a1b2c3d4e5f60718",
        "oke": "ocid1.capacityreservation.oc1.us-chicago-1.aaaaaaaaexample",
    }[cloud]
    before = stack(cloud)
    after = copy.deepcopy(before)
    after["pools"][0].update(capacity="reservation", reservation=reservation)
    outcome, changes = transition(before, after)
    [pool] = changes.pools
    assert pool.change is PoolChange.NEW_NODES
    assert any(field.key == "capacity" for field in pool.fields)
    assert (pool.nodes_created, pool.replicas_evicted) == (1, 0)
    assert outcome.services["chat"].after == 4 and outcome.failure is None


def test_plan_prices_the_capacity_choice_or_says_why_not(tmp_path: Path) -> None:
    reserved = _plan(stack("eks", capacity="reservation", reservation="cr-0a1b2c3d4e5f60718"))
    cost = stack_cost(reserved, load_prices())
    assert cost.pools == ()
    [why] = cost.unpriced
    assert why.startswith("h100: no reservation price for p5.48xlarge: the price sources")
    assert "--prices FILE (reservation:)" in why
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "machines:\n  p5.48xlarge: {on_demand: 55.04, reservation: 41.5, date: '2026-11-01',"
        " source: our ODCR}\n"
    )
    [pool] = stack_cost(reserved, load_prices(prices)).pools
    assert (pool.capacity, pool.node_per_hour) == (Capacity.RESERVATION, 41.5)
    [pool] = stack_cost(_plan(stack("eks")), load_prices(prices)).pools
    assert (pool.capacity, pool.node_per_hour) == (Capacity.ON_DEMAND, 55.04)


def test_pack_compares_a_capacity_choice_as_users_run_it(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("workloads:\n  - {name: chat, replicas: 8, profile: 3g.40gb}\n")
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "machines:\n  a3-highgpu-8g: {on_demand: 88.0, reservation: 60.0, date: '2026-11-01',"
        " source: our reservation}\n"
    )

    def pack(*flags: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mig_inference", "pack", str(fleet), "--cloud", "gke"]
        return subprocess.run([*command, *flags], capture_output=True, text=True, check=False)

    done = pack("--capacity", "reservation", "--prices", str(prices), "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["choice"], answer["capacity"]) == ("a3-highgpu-8g", "reservation")
    assert answer["candidates"][0]["price_per_hour"] == 60.0
    on_demand = json.loads(pack("--json").stdout)
    skipped = {s["machine"]: s["reason"] for s in on_demand["skipped"]}
    assert skipped["a3-ultragpu-8g"] == (
        "not sold as on-demand (its choices: reservation, spot, flex-start)"
    )
    refused = pack("--capacity", "capacity-block")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("error: --capacity: no capacity-block price")
    bad = pack("--capacity", "reserved")
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "error: --capacity: 'reserved' is not a capacity choice; allowed: on-demand, spot, "
        "reservation, capacity-block, flex-start"
    )


@pytest.mark.parametrize("shape", [s for s in MACHINES[Cloud.OKE] if s.startswith("BM.GPU")])
def test_oke_spot_is_refused_on_every_bare_metal_shape(shape: str) -> None:
    gpu = MACHINES[Cloud.OKE][shape].gpu
    [error] = _errors(stack("oke", machineType=shape, gpu=gpu, mig=None, spot=True))
    # The file says `spot: true`: the error names that key.
    assert (error.path, error.value) == ("mig-inference:pools[0].spot", True)
    assert "OCI's preemptible capacity does not support bare metal instances" in error.message
    assert "Compute/Concepts/preemptible.htm" in error.message
    assert "unconfirmed" not in error.message
    [error] = _errors(stack("oke", machineType=shape, gpu=gpu, mig=None, capacity="spot"))
    assert error.path == "mig-inference:pools[0].capacity"
    assert error.allowed == ["on-demand", "reservation"]


def test_oke_spot_stays_on_virtual_machine_shapes() -> None:
    plan = _plan(stack("oke", 1, machineType="VM.GPU.A10.1", gpu="A10-24GB", mig=None,
                       spot=True, maxPods=31))  # fmt: skip
    assert plan.pools[0].spec.capacity is Capacity.SPOT


@pytest.mark.parametrize("capacity", ["spot", "flex-start", "on-demand"])
def test_a4x_is_sold_through_reservations_only(capacity: str) -> None:
    pool: dict[str, Any] = {"capacity": capacity, "mig": "all-3g.93gb"}
    if capacity == "flex-start":
        pool["nodes"] = {"min": 0, "max": 1}
    # A flex-start pool's scale from zero is refused too, in the same run.
    errors = _errors(gke("a4x-highgpu-4g", "GB200", **pool))
    [error] = [e for e in errors if e.path == "mig-inference:pools[0].capacity"]
    assert error.path == "mig-inference:pools[0].capacity"
    assert error.allowed == ["reservation"]
    assert "Google sells A4X only through reservations" in error.message
    assert "ai-hypercomputer/docs/consumption-models" in error.message
    assert "unconfirmed" not in error.message
    reserved = _plan(gke("a4x-highgpu-4g", "GB200", mig="all-3g.93gb", capacity="reservation",
                         reservation="gb200-block"))  # fmt: skip
    assert reserved.pools[0].spec.capacity is Capacity.RESERVATION


def test_spot_and_capacity_may_both_be_given_when_they_agree() -> None:
    # `spot` is the older spelling of `capacity: spot`: refused only when it says otherwise.
    assert _plan(gke("a3-highgpu-8g", capacity="spot")).pools[0].spec.capacity is Capacity.SPOT
    assert _plan(gke("a3-highgpu-8g", capacity="spot", spot=True)).pools[0].spec.spot
    [error] = _errors(gke("a3-highgpu-8g", capacity="spot", spot=False))
    assert error.path == "mig-inference:pools[0].spot"
    assert "spot: false contradicts capacity: spot" in error.message


def test_a_capacity_block_is_unconfirmed_only_where_the_page_read_here_does_not_list_it() -> None:
    """Every instance type sold as Capacity Blocks takes them; the mark says which of them the
    copy of AWS's page read here lists (p5) and which only the current page does (p6-b200)."""
    from mig_inference.clouds.capacity import CAPACITY_BLOCK_TYPES

    facts = {name: shape.facts for name, shape in MACHINES[Cloud.EKS].items() if shape.facts}
    for machine, listed_here in CAPACITY_BLOCK_TYPES.items():
        assert Capacity.CAPACITY_BLOCK in facts[machine].capacity, machine
        marked = "capacity:capacity-block" in facts[machine].unconfirmed
        assert marked is not listed_here, machine
    assert "capacity:capacity-block" not in facts["p5.48xlarge"].unconfirmed
    assert "capacity:capacity-block" in facts["p6-b200.48xlarge"].unconfirmed
