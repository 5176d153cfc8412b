"""Inference services under mocks: requests, placement, engines, secrets, hardening, capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from mig_inference.errors import MigError
from mig_inference.plan import plan_stack
from mig_inference.render import write_rendering
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack
from mig_inference.versions import GPU_OPERATOR_VERSION, TGI_IMAGE, TRITON_IMAGE, VLLM_IMAGE
from tests.mocked import named, one, render_config, stack_rendering
from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
TOKEN = "hf_THIS-IS-A-TEST-TOKEN-0123456789"
API_KEY = "sk-test-api-key-9876543210"


def pod_of(deployment: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def deployment(stack: str, name: str) -> dict[str, Any]:
    found = [r.inputs for r in stack_rendering(stack).of_type(DEPLOYMENT) if r.name == name]
    assert len(found) == 1
    return found[0]


def test_operator_pool_service_seed_004() -> None:
    d = deployment("gke-h100", "mistral-nemo")
    assert d["spec"]["replicas"] == 16
    pod = pod_of(d)
    [container] = pod["containers"]
    assert container["resources"]["requests"]["nvidia.com/mig-3g.40gb"] == "1"
    assert container["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "1"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    generation = plan_stack(load_stack("gke-h100")).pool("h100-mig").generation
    assert terms == [
        {
            "matchExpressions": [
                # Replicas follow the pool's current generation (a new one after a change that
                # needs new nodes).
                {"key": "mig-inference.io/generation", "operator": "In", "values": [generation]},
                {"key": "mig-inference.io/pool", "operator": "In", "values": ["h100-mig"]},
            ]
        }
    ]
    keys = {t["key"] for t in pod["tolerations"]}
    assert keys == {"nvidia.com/gpu", "nvidia/share"}
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    args = container["args"]
    assert args[args.index("--tensor-parallel-size") + 1] == "1"
    assert args[args.index("--max-model-len") + 1] == "8192"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.9"
    assert container["image"] == VLLM_IMAGE
    assert (
        container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"]
        >= 3600
    )
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    # `pulumi up` waits as long as the load estimate says: every replica at once on create,
    # one after the other on an update.
    load = plan_stack(load_stack("gke-h100")).load["mistral-nemo"]
    options = stack_rendering("gke-h100").options[(DEPLOYMENT, "mistral-nemo")]
    assert options.custom_timeouts == (
        f"{load.startup_probe_seconds + 600}s",
        f"{load.rolling_update_seconds() + 600}s",
    )


def test_gke_native_service_requests_a_gpu_on_the_partition() -> None:
    pod = pod_of(deployment("gke-native", "mistral-nemo"))
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {
        "key": "cloud.google.com/gke-gpu-partition-size",
        "operator": "In",
        "values": ["3g.40gb"],
    } in term["matchExpressions"]


def test_secrets_reach_the_pod_only_through_a_secret() -> None:
    rendering = stack_rendering("gke-h100")
    secret = one(rendering, "kubernetes:core/v1:Secret").inputs
    assert set(secret["stringData"]) == {"hf-token", "api-key"}
    env = pod_of(deployment("gke-h100", "mistral-nemo"))["containers"][0]["env"]
    by_name = {e["name"]: e for e in env}
    for name, key in (
        ("HF_TOKEN", "hf-token"),
        ("HUGGING_FACE_HUB_TOKEN", "hf-token"),
        ("VLLM_API_KEY", "api-key"),
    ):
        assert "value" not in by_name[name]
        assert by_name[name]["valueFrom"]["secretKeyRef"] == {
            "name": "mistral-nemo-credentials",
            "key": key,
        }


def _lab(mig: str, services: list[dict[str, Any]]) -> dict[str, Any]:
    """An existing cluster with one 8-GPU H100 node in layout `mig`."""
    return {
        "cloud": "existing",
        "cluster": {"name": "lab", "context": "lab"},
        "pools": [{"name": "p", "gpu": "h100", "gpusPerNode": 8, "nodeNames": ["n1"], "mig": mig}],
        "services": services,
    }


def test_token_never_appears_in_plain_text(tmp_path: Path) -> None:
    config = _lab("all-1g.10gb", [{"name": "s", "model": "m", "memoryGiB": 8, "replicas": 4,
                                   "hfTokenSecret": "hfToken", "apiKeySecret": "apiKey"}])  # fmt: skip
    rendering = render_config(tmp_path, config, hfToken=TOKEN, apiKey=API_KEY)
    assert rendering.error is None
    secret = one(rendering, "kubernetes:core/v1:Secret").inputs
    assert secret["stringData"] == {"hf-token": TOKEN, "api-key": API_KEY}  # reached the Secret
    for resource in rendering.resources:
        if resource.type != "kubernetes:core/v1:Secret":
            assert TOKEN not in str(resource.inputs) and API_KEY not in str(resource.inputs)
    files = write_rendering(rendering, tmp_path / "out")
    for file in files:
        text = file.read_text()
        assert TOKEN not in text and API_KEY not in text, file


def test_service_pdb_networkpolicy_and_hardening() -> None:
    rendering = stack_rendering("gke-h100")
    service = one(rendering, "kubernetes:core/v1:Service").inputs["spec"]
    assert service["type"] == "ClusterIP" and service["ports"][0]["port"] == 8000
    pdb = one(rendering, "kubernetes:policy/v1:PodDisruptionBudget").inputs["spec"]
    assert pdb["maxUnavailable"] == 1
    policy = named(
        rendering, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "mistral-nemo-ingress"
    ).inputs["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}}
    ]
    pod = pod_of(deployment("gke-h100", "mistral-nemo"))
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 10000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = pod["containers"][0]["securityContext"]
    assert context == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    strategy = deployment("gke-h100", "mistral-nemo")["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxSurge": 0, "maxUnavailable": 1}


def test_without_clients_only_the_namespace_may_connect() -> None:
    rendering = stack_rendering("oke-h100")
    policy = named(
        rendering, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "llama-3-1-8b-ingress"
    ).inputs["spec"]
    assert policy["ingress"][0]["from"] == [{"podSelector": {}}]


def _engines(tmp_path: Path, service: dict[str, Any]) -> dict[str, Any]:
    config = _lab("all-balanced", [{"name": "svc", "replicas": 2, "profile": "2g.20gb", **service}])
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    for obj in rendering.kubernetes_objects():
        if obj["apiVersion"].split("/")[0] not in CUSTOM_RESOURCE_GROUPS:
            kubernetes_validate.validate(obj, "1.33.0", strict=True)
    container: dict[str, Any] = pod_of(one(rendering, DEPLOYMENT).inputs)["containers"][0]
    return container


def test_tgi_engine(tmp_path: Path) -> None:
    container = _engines(
        tmp_path,
        {"engine": "tgi", "model": "BAAI/bge-large-en-v1.5", "maxModelLen": 2048, "maxNumSeqs": 4},
    )
    assert container["image"] == TGI_IMAGE
    assert container["args"][:2] == ["--model-id", "BAAI/bge-large-en-v1.5"]
    assert "--num-shard" in container["args"] and "--max-total-tokens" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["resources"]["limits"]["nvidia.com/mig-2g.20gb"] == "1"


def test_triton_engine(tmp_path: Path) -> None:
    container = _engines(tmp_path, {"engine": "triton", "model": "s3://models/repo"})
    assert container["image"] == TRITON_IMAGE and container["command"] == ["tritonserver"]
    assert container["args"][:2] == ["--model-repository", "s3://models/repo"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"


def test_custom_engine(tmp_path: Path) -> None:
    container = _engines(
        tmp_path,
        {"engine": "custom", "image": "registry.example.com/server:1.2.3", "command": ["/server"],
         "args": ["--port", "9000"], "port": 9000, "healthPath": "/ready"},
    )  # fmt: skip
    assert container["image"] == "registry.example.com/server:1.2.3"
    assert container["command"] == ["/server"] and container["args"] == ["--port", "9000"]
    assert container["ports"][0]["containerPort"] == 9000
    assert container["startupProbe"]["httpGet"]["path"] == "/ready"


def test_hpa_is_optional_and_counted_against_capacity(tmp_path: Path) -> None:
    config = _lab(
        "all-3g.40gb",
        [{"name": "s", "model": "m", "memoryGiB": 20, "replicas": 4, "hpaMaxReplicas": 16}],
    )
    rendering = render_config(tmp_path, config)
    assert rendering.error is None
    hpa = one(rendering, "kubernetes:autoscaling/v2:HorizontalPodAutoscaler").inputs["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (4, 16)
    config["services"][0]["hpaMaxReplicas"] = 17
    refused = render_config(tmp_path, config)
    assert (
        refused.error
        and "needs 17 x nvidia.com/mig-3g.40gb on pool p (s), pools offer 16" in refused.error
    )


def _p4d(mig: str, services: list[dict[str, Any]]) -> Any:
    values = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "eu-west-1", "subnetIds": ["subnet-00000005"]},
        "pools": [
            {
                "name": "p4d",
                "gpu": "A100-40GB",
                "machineType": "p4d.24xlarge",
                "nodes": 1,
                "mig": mig,
                "maxPods": 110,
            }
        ],
        "services": services,
    }
    return plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))


def test_seed_003_shortfall_fails_at_preview() -> None:
    with pytest.raises(MigError) as caught:
        _p4d("all-1g.5gb", [{"name": "mig1-5", "model": "m", "profile": "1g.5gb", "replicas": 100}])
    assert str(caught.value) == (
        "mig-inference:services[0].replicas: needs 100 x nvidia.com/mig-1g.5gb on pool p4d "
        "(mig1-5), pools offer 56"
    )


def test_a_profile_no_pool_offers_fails_like_oci_validation() -> None:
    with pytest.raises(
        MigError,
        match=r"services\[0\].profile: no pool offers nvidia.com/mig-2g.10gb; pools offer p4d: nvidia.com/mig-1g.5gb",
    ):
        _p4d("all-1g.5gb", [{"name": "s", "model": "m", "profile": "2g.10gb", "replicas": 1}])


def test_fill_takes_what_is_left() -> None:
    plan = _p4d(
        "all-1g.5gb",
        [
            {"name": "a", "model": "m", "profile": "1g.5gb", "replicas": 20},
            {"name": "b", "model": "m", "profile": "1g.5gb", "replicas": "fill"},
            {"name": "c", "model": "m", "profile": "1g.5gb", "replicas": "fill"},
        ],
    )
    assert [s.replicas for s in plan.services] == [20, 18, 18]


def test_auto_profile_is_the_smallest_offered_slice_that_fits() -> None:
    plan = _p4d("all-balanced", [{"name": "a", "model": "m", "memoryGiB": 6, "replicas": 2}])
    assert plan.services[0].profile == "2g.10gb"  # 1g.5gb is too small; 3g.20gb is larger
    with pytest.raises(
        MigError,
        match=r"services\[0\].memoryGiB: needs 25,600 MiB per replica and no slice the pools offer holds it",
    ):
        _p4d("all-balanced", [{"name": "a", "model": "m", "memoryGiB": 25, "replicas": 2}])


def _llama_8b(**overrides: Any) -> Any:
    service = {"name": "a", "model": "m", "profile": "3g.20gb", "replicas": 1, "params": 8.03,
               "dtype": "fp8", "layers": 32, "kvHeads": 8, "headDim": 128, "context": 4096,
               "concurrency": 1, **overrides}  # fmt: skip
    return _p4d("all-3g.20gb", [service])


def test_vllm_context_is_capped_to_the_slice() -> None:
    sizing = _llama_8b().services[0].sizing
    assert (sizing.max_num_seqs, sizing.max_model_len) == (1, 4096)
    assert sizing.kv_cache_tokens is not None and sizing.kv_cache_tokens >= 4096
    with pytest.raises(
        MigError,
        match=r"the KV cache that fits 3g.20gb holds [0-9,]+ tokens; 1000 sequences of 4,096",
    ):
        _llama_8b(maxModelLen=4096, maxNumSeqs=1000)
    with pytest.raises(
        MigError,
        match=r"the weights \(17.9 GiB with overhead\) leave no room for a KV cache in 90% of 3g.20gb",
    ):
        _llama_8b(dtype="bf16", context=1024)
