"""What Kubernetes or a cloud would refuse (or silently get wrong) is refused at plan time, at
the key that holds it (issue 22's list, one case each)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.cli import main
from mig_inference.spec.formats import REPLICAS, Bound

EKS: dict[str, Any] = {
    "cloud": "eks",
    "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-0a1b2c3d"]},
    "pools": [{"name": "a100", "gpu": "A100-80GB", "machineType": "p4de.24xlarge", "nodes": 1,
               "mig": "all-balanced", "maxPods": 110}],
    "services": [{"name": "chat", "model": "Qwen/Qwen2.5-1.5B-Instruct", "memoryGiB": 3,
                  "replicas": 2, "maxNumSeqs": 8}],
}  # fmt: skip
DEMAND: dict[str, Any] = {"name": "chat", "model": "m", "memoryGiB": 3, "requestsPerSecond": 20,
          "throughput": [{"profile": "1g.10gb", "requestsPerSecond": 9},
                         {"profile": "2g.20gb", "requestsPerSecond": 16}]}  # fmt: skip


def run_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], values: dict[str, Any]
) -> tuple[int, dict[str, str]]:
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in values.items()}})
    )
    code = main(["plan", "--stack-file", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    return code, {e["key"]: e["message"] for e in out.get("errors", [])}


def changed(path: str, value: Any, base: dict[str, Any] = EKS) -> dict[str, Any]:
    """`base` with the value at a dotted path (list indexes as numbers) replaced."""
    values = copy.deepcopy(base)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = values
    for part in parents:
        target = target[part]
    target[last] = value
    return values


CASES = [
    # Accepted, then refused by the API (or silently wrong).
    ("monitoring", {"releaseLabel": "kube prometheus stack"}, "monitoring.releaseLabel",
     "is not a label value"),
    ("pools.0.taints", [{"key": "a.io/x", "value": "v", "effect": "NoSchedule"},
                        {"key": "a.io/x", "value": "w", "effect": "NoSchedule"}],
     "pools[0].taints[1]", "one taint per key and effect"),
    ("pools.0.taints", [{"key": "a.io/x", "value": "v" * 64}], "pools[0].taints[0].value",
     "longer than 63"),
    ("pools.0.labels", {"mig-inference.io/pool": "other"}, "pools[0].labels.mig-inference.io/pool",
     "this project sets"),
    ("pools.0.labels", {"kubernetes.io/role": "gpu"}, "pools[0].labels.kubernetes.io/role",
     "Kubernetes reserves"),
    ("pools.0.zones", ["us-east-1a"], "pools[0].zones", "a node group's zones are those of"),
    ("services.0.args", ["--tensor-parallel-size", "2"], "services[0].args[0]",
     "tensorParallelSize must be 1"),
    ("services.0.args", ["--tensor_parallel_size=2"], "services[0].args[0]",
     "tensorParallelSize must be 1"),
    ("services.0.args", ["-tp", "4"], "services[0].args[0]", "tensorParallelSize must be 1"),
    ("services.0.args", ["--max-model-len", "99999999999"], "services[0].args[0]",
     "must be <= 10,000,000"),
    ("services.0.args", ["--max-num-seqs", "64"], "services[0].args[0]",
     "is set by the key maxNumSeqs; give maxNumSeqs: 64"),
    ("services.0.args", ["--port=80"], "services[0].args[0]", "cannot listen below 1024"),
    # Numbers bounded by what the cloud or engine accepts.
    ("pools.0.nodes", 10**20, "pools[0].nodes", "450 nodes per managed node group"),
    ("pools.0.nodes", {"min": 0, "max": 10**6}, "pools[0].nodes.max", "<= 450"),
    ("services.0.maxNumSeqs", 10**20, "services[0].maxNumSeqs", "must be <= 1,000,000"),
    ("pools.0.diskSizeGb", 2**64, "pools[0].diskSizeGb", "16 TiB"),
    ("services.0.replicas", 2**40, "services[0].replicas", "int32"),
    ("services.0.port", 80, "services[0].port", "below 1024"),
    # Cloud identifiers against their documented formats.
    ("cluster.region", "🚀", "cluster.region", "is not an AWS region"),
    ("cluster.subnetIds", ["../../etc/passwd"], "cluster.subnetIds[0]", "is not an EC2 subnet ID"),
    ("services.0.model", "../../etc/passwd", "services[0].model", "is not a Hugging Face model ID"),
    ("services.0.model", "🚀", "services[0].model", "is not a Hugging Face model ID"),
    ("services.0.image", "Not An Image!", "services[0].image", "is not a container image"),
    ("pools.0.machineType", "p4de 24xlarge", "pools[0].machineType", "is not an EC2 instance"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "key", "message"), CASES)
def test_refused_at_its_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    value: Any,
    key: str,
    message: str,
) -> None:
    code, errors = run_plan(tmp_path, capsys, changed(path, value))
    assert code == 1
    assert message in errors.get(f"mig-inference:{key}", ""), errors


def test_existing_node_names_must_be_kubernetes_node_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = {"cloud": "existing", "cluster": {"name": "lab", "context": "lab"},
              "pools": [{"name": "p", "gpu": "h100", "gpusPerNode": 8, "mig": "all-balanced",
                         "nodeNames": ["GPU_Node_01", "gpu-node-02"]}]}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and list(errors) == ["mig-inference:pools[0].nodeNames[0]"]
    assert "is not a Kubernetes node name" in errors["mig-inference:pools[0].nodeNames[0]"]


def test_gke_and_oke_identifiers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gke = {"cloud": "gke", "cluster": {"name": "c", "project": "../../etc/passwd",
                                       "location": "🚀"},
           "pools": [{"name": "h100", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                      "mig": "all-3g.40gb", "maxPods": 64, "zones": ["us central1 a"]}]}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, gke)
    assert code == 1
    assert {"mig-inference:cluster.project", "mig-inference:cluster.location",
            "mig-inference:pools[0].zones[0]"} <= set(errors)  # fmt: skip
    oke = {"cloud": "oke", "cluster": {"name": "c", "compartmentId": "ocid1.vcn.oc1..x",
                                       "clusterId": "ocid1.cluster.oc1..k",
                                       "subnetIds": ["ocid1.subnet.oc1..s"],
                                       "availabilityDomains": ["AD 1"]},
           "pools": [{"name": "h100", "gpu": "h100", "machineType": "BM.GPU.H100.8", "nodes": 1,
                      "mig": "all-1g.10gb", "maxPods": 90, "imageId": "🚀"}]}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, oke)
    assert code == 1
    assert {"mig-inference:cluster.compartmentId", "mig-inference:cluster.availabilityDomains[0]",
            "mig-inference:pools[0].imageId"} <= set(errors)  # fmt: skip


def test_profiling_bounds_and_duplicates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = {**DEMAND, "profiling": {"profiles": ["1g.10gb", "1g.10gb"], "inputTokens": 2**64}}
    code, errors = run_plan(tmp_path, capsys, changed("services", [service]))
    assert code == 1
    assert "listed twice" in errors["mig-inference:services[0].profiling.profiles[1]"]
    assert "must be <=" in errors["mig-inference:services[0].profiling.inputTokens"]


def test_a_throughput_profile_the_gpu_lacks_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = {
        **DEMAND,
        "throughput": [*DEMAND["throughput"], {"profile": "2g.20g", "requestsPerSecond": 30}],
    }
    code, errors = run_plan(tmp_path, capsys, changed("services", [typo]))
    assert code == 1
    assert (
        "'2g.20g' is not a MIG profile" in errors["mig-inference:services[0].throughput[2].profile"]
    )
    one_of_another_gpu = {
        **DEMAND,
        "throughput": [*DEMAND["throughput"], {"profile": "3g.71gb", "requestsPerSecond": 30}],
    }
    code, errors = run_plan(tmp_path, capsys, changed("services", [one_of_another_gpu]))
    assert (
        code == 1
        and "'3g.71gb' is not a profile of A100-80GB"
        in errors["mig-inference:services[0].throughput"]
    )


def test_a_throughput_file_of_another_gpu_is_named_at_throughput_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h100.yaml").write_text(
        "throughput:\n  - {profile: 1g.5gb, requestsPerSecond: 9}\n  - {profile: 3g.20gb, requestsPerSecond: 20}\n"
    )
    service = {k: v for k, v in DEMAND.items() if k != "throughput"}
    service["throughputFile"] = "h100.yaml"
    code, errors = run_plan(tmp_path, capsys, changed("services", [service]))
    assert code == 1 and list(errors) == ["mig-inference:services[0].throughputFile"], errors


def test_tiny_rates_and_demands_are_refused_or_served_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny_point = {**DEMAND, "throughput": [{"profile": "1g.10gb", "requestsPerSecond": 1.0e-309}]}
    code, errors = run_plan(tmp_path, capsys, changed("services", [tiny_point]))
    assert (
        code == 1
        and "must be >= 1e-06"
        in errors["mig-inference:services[0].throughput[0].requestsPerSecond"]
    )
    # A demand far below one replica's rate still gets a replica (and its profiling run).
    small = {**DEMAND, "requestsPerSecond": 1e-6, "profiling": {"profiles": ["1g.10gb"]}}
    code, errors = run_plan(tmp_path, capsys, changed("services", [small]))
    assert code == 0, errors


def test_absurd_model_shapes_are_named_at_the_bad_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shaped = {"name": "chat", "model": "m", "params": 8, "layers": 10**9, "kvHeads": 8,
              "headDim": 128, "replicas": 1}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, changed("services", [shaped]))
    assert code == 1 and list(errors) == ["mig-inference:services[0].layers"], errors


def test_bounds_say_where_they_come_from() -> None:
    assert "int32" in str(REPLICAS.problem(2**40))
    assert Bound(1, 2, "x").problem(1.5) is None


def test_what_the_plan_reads_for_a_cluster_given_as_an_output_passes_the_formats() -> None:
    from mig_inference.components.stack_args import CLUSTER_REFERENCES
    from mig_inference.spec.formats import CLUSTER_NAME, ocid

    assert CLUSTER_NAME.problem(CLUSTER_REFERENCES["name"]) is None
    assert ocid("cluster").problem(CLUSTER_REFERENCES["cluster_id"]) is None


@pytest.mark.parametrize(
    ("overhead", "refused"), [(0.5, True), (1.0, False), (1.2, False), (5, True)]
)
def test_overhead_is_a_multiplier_on_weights_and_kv_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overhead: float, refused: bool
) -> None:
    service = {"name": "chat", "model": "Qwen/Qwen2.5-1.5B-Instruct", "params": 1.54,
               "dtype": "bf16", "layers": 28, "kvHeads": 2, "headDim": 128, "context": 4096,
               "concurrency": 4, "overhead": overhead, "replicas": 2}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, changed("services", [service]))
    key = "mig-inference:services[0].overhead"
    if refused:
        assert code == 1 and list(errors) == [key], errors
        assert "multiplier" in errors[key] or "below 1" in errors[key], errors[key]
    else:
        assert code == 0, errors


def test_a_dra_version_taken_from_the_cluster_is_refused_at_the_cluster_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eks = changed("cluster", {**EKS["cluster"], "create": True, "vpcId": "vpc-0a1b2c3d",
                              "version": "1.31", "publicAccessCidrs": ["203.0.113.0/24"]})  # fmt: skip
    eks = changed("pools.0.allocation", "dra", eks)
    code, errors = run_plan(tmp_path, capsys, eks)
    assert code == 1 and list(errors) == ["mig-inference:cluster.version"], errors
    assert "Kubernetes 1.31 has no GA DRA" in errors["mig-inference:cluster.version"]


@pytest.mark.parametrize(
    ("account", "accepted"),
    [
        ("default", True),
        ("123456789012-compute@developer.gserviceaccount.com", True),
        ("gpu-nodes@my-gcp-project.iam.gserviceaccount.com", True),
        ("0123-compute@developer.gserviceaccount.com", False),
        ("compute@developer.gserviceaccount.com", False),
    ],
)
def test_the_compute_engine_default_account_by_its_email(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], account: str, accepted: bool
) -> None:
    gke = {"cloud": "gke", "cluster": {"name": "c", "project": "my-gcp-project",
                                       "location": "us-central1-a", "nodeServiceAccount": account},
           "pools": [{"name": "h100", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                      "mig": "all-3g.40gb", "maxPods": 64}]}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, gke)
    assert (code == 0) is accepted, errors
    if not accepted:
        assert list(errors) == ["mig-inference:cluster.nodeServiceAccount"]


@pytest.mark.parametrize(
    ("name", "valid"),
    [("chat", True), ("chat-1", True), ("a", True), ("1chat", False), ("-chat", False),
     ("chat-", False), ("Chat", False), ("chat.1", False), ("c" * 63, True), ("c" * 64, False)],
)  # fmt: skip
def test_a_rendered_service_name_is_held_to_kubernetes_dns_1035_rule(
    name: str, valid: bool
) -> None:
    """The rule tests/spec/test_api_fields.py holds every rendered Service name to is Kubernetes'
    `ValidateServiceName`: a DNS-1035 label, whose first character is a letter."""
    from mig_inference.spec.formats import SERVICE_NAME

    assert (SERVICE_NAME.problem(name) is None) is valid
