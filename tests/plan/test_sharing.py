"""Sharing GPUs without MIG, and MIG slices: time-slicing through the GPU Operator's device plugin
or GKE, MPS on GKE; memory that shared replicas must fit together; derived engine memory."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mig_inference.changes.change_plan import PoolChange, diff_records
from mig_inference.changes.record import plan_record
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import load_catalog, resolve_gpu
from mig_inference.plan import plan_stack
from mig_inference.rendering import manifest
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import named, one, plugin_configs, release, render_config, stack_rendering

RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CONFIG_MAP_PATCH = "kubernetes:core/v1:ConfigMapPatch"


def _plan(config: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def l4(**pool: Any) -> dict[str, Any]:
    return {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-a"},
        "pools": [{"name": "l4", "gpu": "l4", "machineType": "g2-standard-24", "nodes": 1,
                   "migManager": "gke", "maxPods": 32,
                   "sharing": {"timeSlicing": {"replicas": 4}}, **pool}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 4, "replicas": 8}],
    }  # fmt: skip


def test_catalog_knows_gpus_without_mig() -> None:
    catalog = load_catalog()
    assert {g.name for g in catalog.whole_gpus} == {
        "T4-16GB", "A10-24GB", "A10G-24GB", "L4-24GB", "L40S-48GB"
    }  # fmt: skip
    for gpu in catalog.whole_gpus:
        assert not gpu.mig_capable and gpu.whole_gpu_mib < gpu.memory_gib * 1024
        assert gpu.sources and all(source in catalog.sources for source in gpu.sources)
        assert len(gpu.pci_device_ids) == 1 and gpu.pci_device_ids[0].endswith("10DE")
    assert resolve_gpu("nvidia-l4").name == "L4-24GB"
    assert resolve_gpu("Tesla T4").whole_gpu_mib == 15109


def test_operator_time_slicing_config_in_nvidias_format() -> None:
    rendering = stack_rendering("eks-g6e-timeslice")
    config = release(rendering).inputs["values"]["devicePlugin"]["config"]
    assert config == {
        "create": False, "name": "mig-inference-device-plugin-configs", "default": "default"
    }  # fmt: skip
    pool = plan_stack(load_stack("eks-g6e-timeslice")).pool("l40s-shared")
    key = pool.node_labels["nvidia.com/device-plugin.config"]
    data = plugin_configs(rendering)
    assert key.startswith("l40s-shared-") and sorted(data) == sorted(["default", key])
    assert yaml.safe_load(data["default"]) == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    document = yaml.safe_load(data[key])
    assert document == {
        "version": "v1",
        "flags": {"migStrategy": "mixed"},
        "sharing": {"timeSlicing": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }},
    }  # fmt: skip
    assert "nvidia.com/mig.config" not in pool.node_labels  # an L40S has no MIG
    assert pool.capacity_per_node() == {"nvidia.com/gpu": 16}
    assert pool.max_pods_required == 16 + 10 + 5


def test_every_config_key_is_its_own_patch_applied_before_the_release() -> None:
    """A key is a patch with its own field manager (deleting it relinquishes that key alone),
    applied after the base ConfigMap and before the operator's release, whose component the
    pools wait for."""
    rendering = stack_rendering("eks-h100-mig-timeslice")
    operator = release(rendering)
    [base] = [r for r in rendering.of_type(CONFIG_MAP) if r.name.endswith("device-plugin-configs")]
    patches = rendering.of_type(CONFIG_MAP_PATCH)
    keys = [key for patch in patches for key in patch.inputs["data"]]
    assert keys == list(plugin_configs(rendering))[1:] and len(keys) == 1
    managers = {
        p.inputs["metadata"]["annotations"]["pulumi.com/patchFieldManager"] for p in patches
    }
    assert managers == {f"mig-inference-device-plugin-{key}" for key in keys}
    released_after = rendering.options[(RELEASE, operator.name)].dependencies
    assert (CONFIG_MAP, base.name) in released_after
    for patch in patches:
        assert (CONFIG_MAP, base.name) in rendering.options[
            (CONFIG_MAP_PATCH, patch.name)
        ].dependencies
        assert (CONFIG_MAP_PATCH, patch.name) in released_after
        assert patch.inputs["metadata"]["namespace"] == base.inputs["metadata"]["namespace"]
    for recorded in (base, *patches):
        kubernetes_validate.validate(manifest(recorded), "1.33.0", strict=True)
    [group] = [o for o in rendering.options.values() if o.type == "aws:eks/nodeGroup:NodeGroup"]
    assert group.parent is not None
    # The component holding the patches: the pool's labels come after its keys (and after the
    # ClusterPolicy patch that keeps the device plugin where the re-partitioning Job has not
    # switched a node yet).
    assert set(rendering.options[group.parent].dependencies) == {
        ("mig-inference:index:GpuOperator", "gpu-operator"),
        ("kubernetes:nvidia.com/v1:ClusterPolicyPatch", "gpu-operator-device-plugin"),
    }


def test_time_sliced_mig_slices_next_to_unshared_ones() -> None:
    data = plugin_configs(stack_rendering("eks-h100-mig-timeslice"))
    [document] = [yaml.safe_load(v) for k, v in data.items() if k != "default"]
    assert document["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}
    ]
    pool = plan_stack(load_stack("eks-h100-mig-timeslice")).pool("h100-mixed")
    assert pool.capacity_per_node() == {
        "nvidia.com/mig-1g.10gb": 32, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8
    }  # fmt: skip


def test_gke_native_sharing_through_the_typed_provider_args() -> None:
    rendering = stack_rendering("gke-l4-timeshare")
    pool = named(rendering, "gcp:container/nodePool:NodePool", "l4-shared").inputs
    [accelerator] = pool["nodeConfig"]["guestAccelerators"]
    assert accelerator["gpuSharingConfig"] == {
        "gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4
    }  # fmt: skip
    assert (accelerator["type"], accelerator["count"]) == ("nvidia-l4", 2)
    assert "gpuPartitionSize" not in accelerator
    deployment = one(rendering, "kubernetes:apps/v1:Deployment").inputs
    spec = deployment["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "cloud.google.com/gke-max-shared-clients-per-gpu", "operator": "In",
            "values": ["4"]} in term["matchExpressions"]  # fmt: skip
    assert not rendering.of_type(RELEASE)  # no GPU Operator on a GKE-native stack


def test_engine_memory_is_divided_among_the_sharers() -> None:
    args = one(stack_rendering("gke-l4-timeshare"), "kubernetes:apps/v1:Deployment").inputs["spec"][
        "template"
    ]["spec"]["containers"][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.22"  # 0.9 / 4
    config = l4()
    config["services"][0]["gpuMemoryUtilization"] = 0.5
    with pytest.raises(MigError, match=r"gpuMemoryUtilization: 0.5 of a device shared by 4"):
        _plan(config)
    config["services"][0]["gpuMemoryUtilization"] = 0.2
    assert _plan(config).services[0].memory_utilization == 0.2


def test_replicas_that_cannot_fit_a_shared_gpu_together_are_refused() -> None:
    config = l4()
    config["services"][0]["memoryGiB"] = 7  # 4 x 7 GiB > one L4's 23,034 MiB
    with pytest.raises(MigError) as caught:
        _plan(config)
    assert "services[0].memoryGiB" in str(caught.value)
    assert "no slice the pools offer holds it" in str(caught.value)
    config["services"][0].update({"profile": "gpu"})
    with pytest.raises(MigError, match=r"shared by 4 replicas without memory isolation: 5,758"):
        _plan(config)


def test_renamed_shared_resources(tmp_path: Path) -> None:
    config = l4(migManager="operator", sharing={"timeSlicing": {"replicas": 4, "rename": True}})
    plan = _plan(config)
    assert plan.services[0].resource == "nvidia.com/gpu.shared"
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    limits = one(rendering, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu.shared"] == "1"


def test_gke_mps_on_mig_partitions_is_refused_time_sharing_is_not() -> None:
    """GKE documents time-sharing on MIG partitions, and MPS only on whole GPUs (issue 27)."""
    config: dict[str, Any] = {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-c"},
        "pools": [{"name": "h", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                   "migManager": "gke", "mig": "all-3g.40gb", "maxPods": 64,
                   "sharing": {"mps": {"replicas": 2}}}],
    }  # fmt: skip
    with pytest.raises(MigError, match="GKE documents sharing MIG partitions by time-sharing") as e:
        _plan(config)
    assert e.value.path == "mig-inference:pools[0].sharing.mps"
    assert e.value.allowed == ["timeSlicing"]
    config["pools"][0]["sharing"] = {"timeSlicing": {"replicas": 2}}
    pool = _plan(config).pools[0]
    assert pool.capacity_per_node() == {"nvidia.com/gpu": 32}
    assert pool.node_selector["cloud.google.com/gke-gpu-partition-size"] == "3g.40gb"
    config["pools"][0].update(mig="all-disabled", sharing={"mps": {"replicas": 2}})
    assert _plan(config).pools[0].capacity_per_node() == {"nvidia.com/gpu": 16}


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({"sharing": {"timeSlicing": {"replicas": 0}}}, r"sharing.timeSlicing.replicas: must be >= 2, got 0"),
        ({"sharing": {"timeSlicing": {"replicas": 1}}}, r"must be >= 2, got 1"),
        ({"sharing": {"timeSlicing": {"replicas": 64}}}, r"must be <= 48, got 64"),
        ({"sharing": {"timeSlicing": {"replicas": 2}, "mps": {"replicas": 2}}}, "must name one strategy"),
        ({"sharing": {"timeSlicing": {}}}, r"sharing.timeSlicing.replicas: is required"),
        ({"mig": "all-balanced"}, r"pools\[0\].mig: L4-24GB has no MIG"),
        ({"migManager": "operator", "sharing": {"mps": {"replicas": 2}}},
         r"sharing.mps: MPS is not available on GPU Operator pools"),
        ({"sharing": {"timeSlicing": {"replicas": 2, "rename": True}}},
         r"sharing.timeSlicing.rename: GKE shares every device"),
    ],
)  # fmt: skip
def test_bad_sharing_is_one_clear_error(pool: dict[str, Any], message: str) -> None:
    with pytest.raises(MigError, match=message) as caught:
        _plan(l4(**pool))
    assert str(caught.value).startswith("mig-inference:pools[0]")


def test_profiles_must_be_slices_of_the_layout() -> None:
    config = plan_config = copy.deepcopy(load_stack_config("eks-h100-mig-timeslice"))
    plan_config["pools"][0]["sharing"] = {"timeSlicing": {"replicas": 2, "profiles": ["1g.20gb"]}}
    with pytest.raises(MigError, match=r"profiles\[0\]: '1g.20gb' is not a slice of this pool"):
        _plan(config)


def test_shared_capacity_is_checked() -> None:
    config = l4()
    config["services"][0]["replicas"] = 9  # 2 L4 x 4 shares
    with pytest.raises(MigError, match=r"replicas: needs 9 x nvidia.com/gpu on pool l4"):
        _plan(config)


def test_a_gke_sharing_change_needs_new_nodes_an_operator_one_does_not() -> None:
    fewer = l4(sharing={"timeSlicing": {"replicas": 2}})
    fewer["services"][0]["replicas"] = 4
    gke = diff_records(plan_record(_plan(l4())), plan_record(_plan(fewer)))
    assert gke.pools[0].change is PoolChange.NEW_NODES
    assert [f.key for f in gke.pools[0].fields] == ["sharing"]
    operator = l4(migManager="operator")
    other = l4(migManager="operator", sharing={"timeSlicing": {"replicas": 2}})
    other["services"][0]["replicas"] = 4
    changes = diff_records(plan_record(_plan(operator)), plan_record(_plan(other)))
    assert changes.pools[0].change is PoolChange.IN_PLACE  # the device plugin's config
    assert [str(f) for f in changes.pools[0].fields] == ["sharing: timeSlicingx4 -> timeSlicingx2"]


def load_stack_config(name: str) -> dict[str, Any]:
    from mig_inference.spec.files import stack_path

    data = yaml.safe_load(Path(stack_path(name)).read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in data.items() if "hfToken" not in k}
    for service in values.get("services", []):
        service.pop("hfTokenSecret", None)
    return values


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profiles", "--gpu", "l4"], "L4-24GB has no MIG profiles"),
        (["validate", "--gpu", "l4", "1g.10gb"], "L4-24GB has no MIG profiles"),
        (["fit", "--gpu", "l4", "--memory-gib", "30"], "more than a whole L4-24GB"),
    ],
)
def test_the_cli_on_gpus_without_mig(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from mig_inference.cli import main

    assert main(argv) == 1
    assert message in capsys.readouterr().err
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("workloads: [{name: a, replicas: 2, memory_gib: 5}]\n")
    assert main(["pack", str(fleet), "--gpu", "t4"]) == 1
    assert "T4-16GB has no MIG" in capsys.readouterr().err
    assert main(["fit", "--gpu", "l4", "--memory-gib", "5"]) == 0
    assert "up to 4 replicas fit one when it is time-sliced" in capsys.readouterr().out


def test_a_sharing_change_gives_the_nodes_a_new_config_key() -> None:
    """The device plugin reloads when a node's config label changes, not its ConfigMap."""
    keys = set()
    for sharing in ({"replicas": 4}, {"replicas": 2}, {"replicas": 4, "rename": True}):
        config = l4(migManager="operator", sharing={"timeSlicing": sharing})
        config["services"][0]["replicas"] = 4
        pool = _plan(config).pools[0]
        keys.add(pool.node_labels["nvidia.com/device-plugin.config"])
    assert len(keys) == 3


def test_gpus_without_mig_are_never_repartitioned() -> None:
    from mig_inference.kube.repartition import repartition_targets

    config = {
        "cloud": "existing",
        "cluster": {"name": "lab", "context": "lab"},
        "pools": [{"name": "l4", "gpu": "l4", "gpusPerNode": 2, "nodeNames": ["n1"]}],
    }
    assert repartition_targets(_plan(config)) == []


def test_shared_replicas_ask_for_their_share_of_the_node() -> None:
    plan = plan_stack(load_stack("gke-l4-timeshare"))
    [service] = plan.services
    vcpus, gib = service.pool.node_vcpus_and_gib
    devices = sum(o.per_node for o in service.pool.offers)
    assert service.cpu_millicores * devices <= vcpus * 1000 * 0.85
    assert service.memory_mib * devices <= gib * 1024 * 0.85


def test_a_context_cut_to_fit_a_share_is_said() -> None:
    config = l4()
    config["services"][0] = {"name": "chat", "model": "m", "params": 1.5, "dtype": "bf16",
                             "layers": 28, "kvHeads": 2, "headDim": 128, "context": 65536,
                             "concurrency": 1, "replicas": 8}  # fmt: skip
    plan = _plan(config)
    [service] = plan.services
    # It fits a quarter of the L4 (the plan's check) but not vLLM's 0.22 of it at full context.
    assert service.sizing.max_model_len is not None and service.sizing.max_model_len < 65536
    assert any(
        w.startswith(f"service chat: context cut from 65,536 to {service.sizing.max_model_len:,}")
        for w in plan.warnings
    )


def test_a_sharing_change_on_oke_needs_new_nodes() -> None:
    def oke(replicas: int) -> dict[str, Any]:
        return {
            "cloud": "oke",
            "cluster": {"name": "c", "compartmentId": "ocid1.compartment.oc1..o", "clusterId": "ocid1.cluster.oc1..k", "subnetIds": ["ocid1.subnet.oc1..s"],
                        "availabilityDomains": ["Uocm:US-CHICAGO-1-AD-1"]},
            "pools": [{"name": "a10", "gpu": "a10", "machineType": "VM.GPU.A10.2", "nodes": 1,
                       "imageId": "ocid1.image.oc1..gpuimage", "sharing": {"timeSlicing": {"replicas": replicas}}}],
        }  # fmt: skip

    [pool] = diff_records(plan_record(_plan(oke(2))), plan_record(_plan(oke(4)))).pools
    assert pool.change is PoolChange.NEW_NODES and [f.key for f in pool.fields] == ["sharing"]
