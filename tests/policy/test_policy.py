"""The policy pack's rules, run the way the Pulumi engine runs them, on hand-built resources."""

from __future__ import annotations

import copy
import re
import runpy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pulumi_policy
import pytest
import yaml
from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

import mig_inference.policy as pack
from mig_inference.plan import plan_stack
from mig_inference.policy import (
    CLAIMED_MIG_SLICES,
    GPU_POOLS_PROTECTED,
    MIG_PROFILE_EXISTS,
    NO_PLAINTEXT_TOKENS,
    ONE_MIG_DEVICE,
    TENSOR_PARALLEL_ONE,
    policies,
    secret_like,
    target_gpus,
)
from mig_inference.policy_claims import ClaimIndex, claim_source, held_claims
from mig_inference.spec.files import load_stack, stack_names, stack_path
from tests.mocked import render_config, stack_rendering

PACK_DIR = Path(__file__).resolve().parent.parent.parent / "policy"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"
TOKEN = "hf_THIS-IS-A-TEST-TOKEN-0123456789"


@dataclass
class Recorder:
    """A `ReportViolation` that keeps the messages (and the URNs, which policies leave out)."""

    messages: list[str] = field(default_factory=list)
    urns: list[str | None] = field(default_factory=list)

    def __call__(self, message: str, urn: str | None = None) -> None:
        self.messages.append(message)
        self.urns.append(urn)


def engine_props(props: dict[str, Any]) -> Mapping[str, Any]:
    """Properties as the analyzer hands them to a policy: through protobuf and the SDK's proxy."""
    struct = struct_pb2.Struct()
    struct.update(props)
    proxied: Mapping[str, Any] = unknown_checking_proxy(
        deserialize_properties(json_format.MessageToDict(struct))
    )
    return proxied


def resource_options(protect: bool = False) -> PolicyResourceOptions:
    """A resource's options as the engine gives them to a policy."""
    return PolicyResourceOptions(
        protect=protect,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
    )


def violations(
    policy: Policy,
    resource_type: str,
    props: dict[str, Any],
    *,
    protect: bool = False,
    name: str = "gpu-pool",
) -> list[str]:
    assert isinstance(policy, ResourceValidationPolicy)
    args = ResourceValidationArgs(
        resource_type=resource_type,
        props=engine_props(props),
        urn=f"urn:pulumi:dev::other-program::{resource_type}::{name}",
        name=name,
        opts=resource_options(protect),
        provider=None,
    )
    recorder = Recorder()
    assert policy.validate(args, recorder) is None
    assert recorder.urns == [None] * len(recorder.messages)
    return recorder.messages


def stack_args(resources: Sequence[tuple[str, dict[str, Any]]]) -> StackValidationArgs:
    """The stack as the engine gives it to a stack policy (resource `r<i>` for the i-th)."""
    return StackValidationArgs(
        [
            PolicyResource(
                resource_type=resource_type,
                props=engine_props(props),
                urn=f"urn:pulumi:dev::other-program::{resource_type}::r{index}",
                name=f"r{index}",
                opts=resource_options(),
                provider=None,
                parent=None,
                dependencies=[],
                property_dependencies={},
            )
            for index, (resource_type, props) in enumerate(resources)
        ]
    )


def stack_violations(
    policy: Policy, resources: Sequence[tuple[str, dict[str, Any]]]
) -> list[tuple[str, str]]:
    """A stack policy run on `resources` as the engine runs it: (URN, message) per violation."""
    assert isinstance(policy, StackValidationPolicy)
    recorder = Recorder()
    assert policy.validate(stack_args(resources), recorder) is None
    return [
        (str(urn), message) for urn, message in zip(recorder.urns, recorder.messages, strict=True)
    ]


def container(
    name: str = "vllm",
    *,
    mig: str | None = "3g.40gb",
    resources: dict[str, str] | None = None,
    args: Sequence[str] = (),
    env: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A vLLM container asking for one MIG device (limits and requests alike)."""
    wanted = dict(resources or {})
    if mig is not None:
        wanted[f"nvidia.com/mig-{mig}"] = "1"
    return {
        "name": name,
        "image": "vllm/vllm-openai:v0.11.0",
        "args": ["--model", "mistralai/Mistral-Nemo-Instruct-2407", "--port", "8000", *args],
        "env": [{"name": "HOME", "value": "/home/inference"}, *env],
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "resources": {
            "limits": {"cpu": "8", "memory": "64Gi", **wanted},
            "requests": {"cpu": "4", "memory": "48Gi", **wanted},
        },
    }


def pod(
    *containers: dict[str, Any],
    node_selector: dict[str, str] | None = None,
    affinity: list[tuple[str, list[str]]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": list(containers) or [container()],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity is not None:
        expressions = [{"key": k, "operator": "In", "values": v} for k, v in affinity]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        }
    return spec


def deployment(spec: dict[str, Any], name: str = "mistral-nemo") -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "inference", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def on_h100(*containers: dict[str, Any]) -> dict[str, Any]:
    return deployment(pod(*containers, node_selector={"nvidia.com/gpu.product": H100_PRODUCT}))


# --- mig-profile-exists-on-gpu ------------------------------------------------------------------


def test_h100_deployment_requesting_3g_40gb_passes() -> None:
    assert violations(MIG_PROFILE_EXISTS, DEPLOYMENT, on_h100(container(mig="3g.40gb"))) == []


def test_a100_40gb_profile_on_h100_is_reported_with_the_h100_profiles() -> None:
    [message] = violations(MIG_PROFILE_EXISTS, DEPLOYMENT, on_h100(container(mig="3g.20gb")))
    assert 'container "vllm" requests nvidia.com/mig-3g.20gb' in message
    assert "H100-80GB does not have" in message
    offered = message.split("MIG profiles on H100-80GB: ")[1]
    assert offered.split(", ") == [
        "1g.10gb", "1g.10gb.me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ]  # fmt: skip


def test_node_affinity_names_the_gpu_too() -> None:
    a100 = [("cloud.google.com/gke-accelerator", ["nvidia-tesla-a100"])]
    passing = deployment(pod(container(mig="3g.20gb"), affinity=a100))
    assert violations(MIG_PROFILE_EXISTS, DEPLOYMENT, passing) == []
    failing = deployment(pod(container("tgi", mig="3g.40gb"), affinity=a100))
    [message] = violations(MIG_PROFILE_EXISTS, DEPLOYMENT, failing)
    assert 'container "tgi" requests nvidia.com/mig-3g.40gb' in message
    assert "A100-40GB: 1g.5gb, 1g.5gb.me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb" in message


def test_every_targeted_gpu_must_have_the_profile() -> None:
    both_80gb = [("cloud.google.com/gke-accelerator", ["nvidia-h100-80gb", "nvidia-a100-80gb"])]
    spec = deployment(pod(container(mig="3g.40gb"), affinity=both_80gb))
    assert violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec) == []
    p4d_or_p5 = [("node.kubernetes.io/instance-type", ["p4d.24xlarge", "p5.48xlarge"])]
    spec = deployment(pod(container(mig="3g.40gb"), affinity=p4d_or_p5))
    [message] = violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec)
    assert "A100-40GB does not have" in message


def test_gpu_is_read_from_each_label() -> None:
    cases = {
        "nvidia.com/gpu.product": ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED", "A100-40GB"),
        "cloud.google.com/gke-accelerator": ("nvidia-h100-mega-80gb", "H100-80GB"),
        "node.kubernetes.io/instance-type": ("BM.GPU.H100.8", "H100-80GB"),
    }
    for label, (value, gpu) in cases.items():
        spec = engine_props(pod(node_selector={label: value}))
        assert [g.name for g in target_gpus(spec)] == [gpu], label


def test_mig_request_on_a_gpu_without_mig_is_reported() -> None:
    spec = deployment(pod(node_selector={"cloud.google.com/gke-accelerator": "nvidia-l4"}))
    [message] = violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec)
    assert "the pod targets L4-24GB, which has no MIG" in message


@pytest.mark.parametrize(
    ("label", "value", "good", "bad"),
    [
        ("cloud.google.com/gke-accelerator", "nvidia-rtx-pro-6000", "1g.24gb.me.all", "1g.23gb"),
        (
            "nvidia.com/gpu.product",
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
            "2g.48gb-me",
            "2g.48gb.me",
        ),
        ("nvidia.com/gpu.product", "NVIDIA-B300-SXM6-AC", "1g.34gb.me", "1g.35gb"),
        ("nvidia.com/gpu.product", "NVIDIA-GB300", "3g.139gb", "3g.135gb"),
    ],
)
def test_blackwell_profiles_are_judged(label: str, value: str, good: str, bad: str) -> None:
    spec = deployment(pod(container(mig=good), node_selector={label: value}))
    assert violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec) == []
    spec = deployment(pod(container(mig=bad), node_selector={label: value}))
    [message] = violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec)
    assert f"nvidia.com/mig-{bad}, a profile" in message


def test_unknown_gpu_is_not_judged() -> None:
    selectors = [
        {"mig-inference.io/pool": "h100-mig"},
        {"nvidia.com/gpu.product": "NVIDIA-RTX-PRO-4500-Blackwell-Server-Edition"},
        {"node.kubernetes.io/instance-type": "m7i.4xlarge"},
    ]
    for selector in selectors:
        spec = deployment(pod(container(mig="9g.999gb"), node_selector=selector))
        assert violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec) == [], selector


@pytest.mark.parametrize(
    ("resource_type", "wrap"),
    [
        ("kubernetes:core/v1:Pod", lambda spec: {"metadata": {"name": "p"}, "spec": spec}),
        ("kubernetes:apps/v1:StatefulSet", lambda spec: deployment(spec)),
        ("kubernetes:apps/v1:DaemonSet", lambda spec: deployment(spec)),
        ("kubernetes:batch/v1:Job", lambda spec: deployment(spec)),
        (
            "kubernetes:batch/v1:CronJob",
            lambda spec: {"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}},
        ),
        ("kubernetes:apps/v1:DeploymentPatch", lambda spec: deployment(spec)),
    ],
)
def test_every_workload_kind_is_read(resource_type: str, wrap: Any) -> None:
    spec = pod(container(mig="3g.20gb"), node_selector={"nvidia.com/gpu.product": H100_PRODUCT})
    [message] = violations(MIG_PROFILE_EXISTS, resource_type, wrap(spec))
    assert "nvidia.com/mig-3g.20gb" in message


def test_other_resources_are_left_alone() -> None:
    config_map = {"metadata": {"name": "x"}, "data": {"spec": "nvidia.com/mig-3g.20gb"}}
    assert violations(MIG_PROFILE_EXISTS, "kubernetes:core/v1:ConfigMap", config_map) == []


def test_a_gpu_label_unknown_during_preview_is_left_to_the_engine() -> None:
    # The engine turns this error into an advisory "can't run policy during preview".
    spec = deployment(pod(node_selector={"nvidia.com/gpu.product": UNKNOWN_STRING_VALUE}))
    with pytest.raises(UnknownValueError):
        violations(MIG_PROFILE_EXISTS, DEPLOYMENT, spec)


# --- one-mig-device-per-container ---------------------------------------------------------------


def test_one_mig_device_passes() -> None:
    assert violations(ONE_MIG_DEVICE, DEPLOYMENT, on_h100(container())) == []


def test_two_mig_devices_are_reported_once() -> None:
    two = container("triton", mig="3g.40gb", resources={"nvidia.com/mig-1g.10gb": "1"})
    [message] = violations(ONE_MIG_DEVICE, DEPLOYMENT, on_h100(two))
    assert 'container "triton" asks for 2 MIG devices in limits' in message
    assert "nvidia.com/mig-1g.10gb: 1, nvidia.com/mig-3g.40gb: 1" in message


def test_two_of_one_profile_are_two_devices() -> None:
    spec = on_h100(container(mig=None, resources={"nvidia.com/mig-1g.10gb": "2"}))
    [message] = violations(ONE_MIG_DEVICE, DEPLOYMENT, spec)
    assert "asks for 2 MIG devices" in message


def test_whole_gpu_next_to_a_mig_device_is_reported() -> None:
    spec = on_h100(container("mixed", resources={"nvidia.com/gpu": "1"}))
    [message] = violations(ONE_MIG_DEVICE, DEPLOYMENT, spec)
    assert 'container "mixed" mixes nvidia.com/gpu with MIG devices' in message
    assert "nvidia.com/mig-3g.40gb" in message


def test_whole_gpus_alone_are_not_this_rule_s_business() -> None:
    spec = on_h100(container(mig=None, resources={"nvidia.com/gpu": "2"}))
    assert violations(ONE_MIG_DEVICE, DEPLOYMENT, spec) == []


# --- tensor-parallel-one-on-mig -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env", "setting"),
    [
        (["--tensor-parallel-size", "2"], [], "--tensor-parallel-size 2"),
        (["--tensor-parallel-size=4"], [], "--tensor-parallel-size 4"),
        (["-tp", "2"], [], "-tp 2"),
        (["--num-shard", "2"], [], "--num-shard 2"),
        ([], [{"name": "NUM_SHARD", "value": "2"}], "env NUM_SHARD=2"),
        ([], [{"name": "TENSOR_PARALLEL_SIZE", "value": "8"}], "env TENSOR_PARALLEL_SIZE=8"),
        (["-tp", "$(TP)"], [{"name": "TP", "value": "2"}], "-tp $(TP)"),
    ],
)
def test_tensor_parallelism_above_one_on_mig_is_reported(
    args: list[str], env: list[dict[str, Any]], setting: str
) -> None:
    spec = on_h100(container(args=args, env=env))
    [message] = violations(TENSOR_PARALLEL_ONE, DEPLOYMENT, spec)
    assert 'container "vllm" holds a MIG device but asks for tensor parallelism' in message
    assert f"({setting})" in message


def test_tensor_parallelism_in_a_shell_command_is_read() -> None:
    shell = container()
    shell["command"] = ["/bin/sh", "-c", "exec vllm serve /models/m --tensor-parallel-size 2"]
    [message] = violations(TENSOR_PARALLEL_ONE, DEPLOYMENT, on_h100(shell))
    assert "tensor parallelism 2" in message


def test_tensor_parallelism_one_passes() -> None:
    spec = on_h100(
        container(args=["--tensor-parallel-size", "1"], env=[{"name": "NUM_SHARD", "value": "1"}])
    )
    assert violations(TENSOR_PARALLEL_ONE, DEPLOYMENT, spec) == []


def test_tensor_parallelism_on_whole_gpus_passes() -> None:
    whole = container(mig=None, resources={"nvidia.com/gpu": "2"}, args=["-tp", "2"])
    assert violations(TENSOR_PARALLEL_ONE, DEPLOYMENT, on_h100(whole)) == []


# --- no-plaintext-tokens ------------------------------------------------------------------------


def test_plain_hf_token_is_reported_without_its_value() -> None:
    spec = on_h100(container(env=[{"name": "HF_TOKEN", "value": TOKEN}]))
    [message] = violations(NO_PLAINTEXT_TOKENS, DEPLOYMENT, spec)
    assert 'container "vllm" sets HF_TOKEN to a literal value' in message
    assert "secretKeyRef" in message
    assert TOKEN not in message


def test_tokens_from_a_secret_or_empty_pass() -> None:
    env: list[dict[str, Any]] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "mistral-nemo-secrets", "key": "hf-token"}},
        },
        {"name": "VLLM_API_KEY", "value": ""},
        {"name": "HUGGING_FACE_HUB_TOKEN", "value": "$(HF_TOKEN)"},
    ]
    assert violations(NO_PLAINTEXT_TOKENS, DEPLOYMENT, on_h100(container(env=env))) == []


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "API_KEY", "OPENAI_API_KEY",
     "CLIENT_SECRET", "DB_PASSWORD", "PASSWORD", "hf_token"],
)  # fmt: skip
def test_credential_names(name: str) -> None:
    assert secret_like(name)


@pytest.mark.parametrize(
    "name",
    ["HF_HOME", "TOKENIZERS_PARALLELISM", "HF_TOKEN_PATH", "SECRET_NAME", "POSTGRES_PASSWORD_FILE",
     "MAX_TOKENS", "PAD_TOKEN", "EOS_TOKEN", "BOS_TOKEN", "PASSWORD_MIN_LENGTH", "SECRET_NAME_PREFIX"],
)  # fmt: skip
def test_names_that_are_not_credentials(name: str) -> None:
    assert not secret_like(name)


def test_harmless_names_with_literal_values_pass() -> None:
    env = [{"name": "PAD_TOKEN", "value": "<pad>"}, {"name": "EOS_TOKEN", "value": "</s>"},
           {"name": "PASSWORD_MIN_LENGTH", "value": "12"}]  # fmt: skip
    assert violations(NO_PLAINTEXT_TOKENS, DEPLOYMENT, on_h100(container(env=env))) == []


@pytest.mark.parametrize(
    "value",
    ["hf_" + "a1B2" * 9, "AKIA" + "ABCDEFGHIJKLMNOP", "ghp_" + "x" * 36, "nvapi-" + "q" * 40],
)
def test_a_credential_is_reported_by_its_value_whatever_its_name(value: str) -> None:
    spec = on_h100(container(env=[{"name": "MODEL_OPTIONS", "value": f"--x {value}"}]))
    [message] = violations(NO_PLAINTEXT_TOKENS, DEPLOYMENT, spec)
    assert "MODEL_OPTIONS" in message and value not in message


# --- gpu-node-pools-protected -------------------------------------------------------------------

GKE_GPU_POOL: dict[str, Any] = {
    "cluster": "projects/p/locations/us-central1/clusters/inference",
    "location": "us-central1",
    "nodeLocations": ["us-central1-a"],
    "autoscaling": {"minNodeCount": 0, "maxNodeCount": 2},
    "nodeConfig": {
        "machineType": "a3-highgpu-8g",
        "guestAccelerators": [
            {
                "type": "nvidia-h100-80gb",
                "count": 8,
                "gpuDriverInstallationConfig": {"gpuDriverVersion": "INSTALLATION_DISABLED"},
            }
        ],
        "labels": {"mig-inference.io/pool": "h100-mig", "nvidia.com/mig.config": "all-3g.40gb"},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
    },
}


def test_unprotected_gke_gpu_pool_is_reported() -> None:
    [message] = violations(GPU_POOLS_PROTECTED, pack.GKE_NODE_POOL, GKE_GPU_POOL)
    assert "guest accelerators nvidia-h100-80gb" in message
    assert "`protect`" in message


def test_protected_gke_gpu_pool_passes() -> None:
    assert violations(GPU_POOLS_PROTECTED, pack.GKE_NODE_POOL, GKE_GPU_POOL, protect=True) == []


def test_gke_gpu_machine_type_alone_makes_a_gpu_pool() -> None:
    a3 = {"cluster": "c", "nodeConfig": {"machineType": "a3-highgpu-1g"}}
    [message] = violations(GPU_POOLS_PROTECTED, pack.GKE_NODE_POOL, a3)
    assert "GPU machine type a3-highgpu-1g" in message


def test_unprotected_cpu_pools_pass() -> None:
    cpu = {"cluster": "c", "nodeConfig": {"machineType": "e2-standard-4", "diskSizeGb": 100}}
    assert violations(GPU_POOLS_PROTECTED, pack.GKE_NODE_POOL, cpu) == []
    group = {
        "clusterName": "c",
        "instanceTypes": ["m7i.xlarge"],
        "amiType": "AL2023_x86_64_STANDARD",
    }
    assert violations(GPU_POOLS_PROTECTED, pack.EKS_NODE_GROUP, group) == []
    oke = {"clusterId": "ocid1.cluster.oc1..c", "nodeShape": "VM.Standard.E5.Flex"}
    assert violations(GPU_POOLS_PROTECTED, pack.OKE_NODE_POOL, oke) == []


@pytest.mark.parametrize(
    ("resource_type", "props", "reason"),
    [
        (pack.EKS_NODE_GROUP, {"instanceTypes": ["p5.48xlarge"]}, "GPU instance types p5.48xlarge"),
        (pack.EKS_NODE_GROUP, {"instanceTypes": ["g6e.2xlarge"]}, "GPU instance types g6e.2xlarge"),
        (
            pack.EKS_NODE_GROUP,
            {"amiType": "AL2023_x86_64_NVIDIA"},
            "GPU AMI type AL2023_x86_64_NVIDIA",
        ),
        (pack.OKE_NODE_POOL, {"nodeShape": "BM.GPU.H100.8"}, "GPU shape BM.GPU.H100.8"),
        (pack.OKE_NODE_POOL, {"nodeShape": "VM.GPU.A10.2"}, "GPU shape VM.GPU.A10.2"),
    ],
)
def test_unprotected_eks_and_oke_gpu_pools_are_reported(
    resource_type: str, props: dict[str, Any], reason: str
) -> None:
    [message] = violations(GPU_POOLS_PROTECTED, resource_type, props)
    assert f"({reason})" in message
    assert violations(GPU_POOLS_PROTECTED, resource_type, props, protect=True) == []


# --- DRA: a claim is a slice ------------------------------------------------------------------

CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
CLAIM = "kubernetes:resource.k8s.io/v1:ResourceClaim"
DEVICE_CLASS = "kubernetes:resource.k8s.io/v1:DeviceClass"
PROFILE = "device.attributes['gpu.nvidia.com'].profile"


def device_request(
    profile: str | None, name: str = "slice", device_class: str = "mig.nvidia.com", **extra: Any
) -> dict[str, Any]:
    selectors = [{"cel": {"expression": f"{PROFILE} == '{profile}'"}}] if profile else []
    return {"name": name, "exactly": {"deviceClassName": device_class, "selectors": selectors,
                                      **extra}}  # fmt: skip


def claim_template(*requests: dict[str, Any], name: str = "slice-claim") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "inference"},
        "spec": {"spec": {"devices": {"requests": list(requests) or [device_request("3g.40gb")]}}},
    }


def claiming(*names: str, request: str | None = None, **options: Any) -> dict[str, Any]:
    """A vLLM container that holds the pod's claims `names` (and no MIG resource unless given)."""
    spec = container(**{"mig": None, **options})
    spec["resources"]["claims"] = [
        {"name": n, **({"request": request} if request else {})} for n in names
    ]
    return spec


def claiming_pod(*containers: dict[str, Any], templates: dict[str, str]) -> dict[str, Any]:
    """An H100 Deployment whose pod claims (pod claim name -> template name)."""
    spec = pod(*containers, node_selector={"nvidia.com/gpu.product": H100_PRODUCT})
    spec["resourceClaims"] = [
        {"name": claim, "resourceClaimTemplateName": template}
        for claim, template in templates.items()
    ]
    return deployment(spec)


def test_a_claim_selecting_a_profile_no_gpu_has_is_reported() -> None:
    [message] = violations(MIG_PROFILE_EXISTS, CLAIM_TEMPLATE, claim_template(
        device_request("3g.40gbb")))  # fmt: skip
    assert 'ResourceClaimTemplate request "slice"' in message
    assert 'selects the MIG profile "3g.40gbb", which no GPU has' in message
    [message] = violations(MIG_PROFILE_EXISTS, CLAIM, {
        "metadata": {"name": "c"}, "spec": {"devices": {"requests": [device_request("9g.1tb")]}}})  # fmt: skip
    assert "ResourceClaim " in message and '"9g.1tb"' in message


@pytest.mark.parametrize(
    "expression",
    [
        f"{PROFILE} == '3g.40gb'",
        f"'1g.10gb+me' == {PROFILE}",  # NVML's spelling, as the driver publishes it
        'device.attributes["gpu.nvidia.com"]["profile"] == "2g.20gb"',
        f"{PROFILE} in ['1g.24gb', '2g.48gb'] && device.capacity['gpu.nvidia.com'].memory"
        ".compareTo(quantity('20Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    ],
)
def test_claims_selecting_real_profiles_or_none_pass(expression: str) -> None:
    request = {"name": "slice", "exactly": {"deviceClassName": "mig.nvidia.com",
               "selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip
    assert violations(MIG_PROFILE_EXISTS, CLAIM_TEMPLATE, claim_template(request)) == []


def test_a_misspelt_profile_in_an_in_list_is_found() -> None:
    request = {"name": "slice", "exactly": {"deviceClassName": "mig.nvidia.com",
               "selectors": [{"cel": {"expression": f"{PROFILE} in ['3g.40gb', '3g40gb']"}}]}}  # fmt: skip
    [message] = violations(MIG_PROFILE_EXISTS, CLAIM_TEMPLATE, claim_template(request))
    assert '"3g40gb"' in message


def bridge_class(resource: str, expression: str | None) -> dict[str, Any]:
    selectors = [{"cel": {"expression": expression}}] if expression else []
    return {"metadata": {"name": "c.mig-inference.io"},
            "spec": {"extendedResourceName": resource, "selectors": selectors}}  # fmt: skip


def test_a_bridge_class_must_select_the_profile_it_maps() -> None:
    own = bridge_class("nvidia.com/mig-1g.10gb.me", f"{PROFILE} == '1g.10gb+me'")
    assert violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, own) == []
    [other] = violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, bridge_class(
        "nvidia.com/mig-1g.10gb", f"{PROFILE} == '2g.20gb'"))  # fmt: skip
    assert "maps nvidia.com/mig-1g.10gb but selects 2g.20gb" in other
    [anything] = violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, bridge_class(
        "nvidia.com/mig-1g.10gb", "device.attributes['gpu.nvidia.com'].type == 'mig'"))  # fmt: skip
    assert "its selectors name no profile" in anything
    [unknown] = violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, bridge_class(
        "nvidia.com/mig-5g.50gb", f"{PROFILE} == '5g.50gb'"))  # fmt: skip
    assert "nvidia.com/mig-5g.50gb, a MIG profile no GPU has" in unknown
    # Classes that bridge no MIG resource are not this rule's business.
    assert violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, bridge_class("nvidia.com/gpu", None)) == []


@pytest.mark.parametrize(
    ("extra", "amount"), [({"count": 2}, "takes 2 MIG devices"),
                          ({"allocationMode": "All"}, "takes every matching MIG device;")],
)  # fmt: skip
def test_a_claim_request_takes_at_most_one_mig_device(extra: dict[str, Any], amount: str) -> None:
    [message] = violations(ONE_MIG_DEVICE, CLAIM_TEMPLATE, claim_template(
        device_request("3g.40gb", **extra)))  # fmt: skip
    assert amount in message and "CUDA uses one MIG device per process" in message
    assert (
        violations(ONE_MIG_DEVICE, CLAIM_TEMPLATE, claim_template(device_request("3g.40gb"))) == []
    )
    whole = device_request(None, device_class="gpu.nvidia.com", count=2)
    assert violations(ONE_MIG_DEVICE, CLAIM_TEMPLATE, claim_template(whole)) == []


def test_a_claimed_profile_the_targeted_gpu_lacks_is_reported_at_the_pod() -> None:
    workload = claiming_pod(claiming("gpu"), templates={"gpu": "a100-slice"})
    template = claim_template(device_request("3g.20gb"), name="a100-slice")
    [(urn, message)] = stack_violations(
        CLAIMED_MIG_SLICES, [(CLAIM_TEMPLATE, template), (DEPLOYMENT, workload)]
    )
    assert urn.endswith("::r1")
    assert 'container "vllm" holds claim "gpu" (ResourceClaimTemplate a100-slice)' in message
    assert "selects a profile H100-80GB does not have; MIG profiles on H100-80GB: 1g.10gb" in (
        message
    )
    fits = claim_template(device_request("3g.40gb"), name="a100-slice")
    assert (
        stack_violations(CLAIMED_MIG_SLICES, [(CLAIM_TEMPLATE, fits), (DEPLOYMENT, workload)]) == []
    )


def test_a_claimed_slice_counts_as_a_device() -> None:
    template = (CLAIM_TEMPLATE, claim_template())
    both = claiming_pod(claiming("gpu", mig="1g.10gb"), templates={"gpu": "slice-claim"})
    [(_, message)] = stack_violations(CLAIMED_MIG_SLICES, [template, (DEPLOYMENT, both)])
    assert 'holds MIG devices through claim "gpu"' in message and "requests 1 more" in message
    two = claiming_pod(claiming("a", "b"), templates={"a": "slice-claim", "b": "slice-claim"})
    [(_, message)] = stack_violations(CLAIMED_MIG_SLICES, [template, (DEPLOYMENT, two)])
    assert "at most one" in message
    whole = claiming_pod(claiming("gpu", resources={"nvidia.com/gpu": "1"}),
                         templates={"gpu": "slice-claim"})  # fmt: skip
    [(_, message)] = stack_violations(CLAIMED_MIG_SLICES, [template, (DEPLOYMENT, whole)])
    assert "holds a whole GPU next to the MIG slice" in message


def test_one_alternative_or_one_named_request_is_one_device() -> None:
    alternatives = {"name": "slice", "firstAvailable": [
        {"name": "big", "deviceClassName": "mig.nvidia.com",
         "selectors": [{"cel": {"expression": f"{PROFILE} == '3g.40gb'"}}]},
        {"name": "small", "deviceClassName": "mig.nvidia.com",
         "selectors": [{"cel": {"expression": f"{PROFILE} == '2g.20gb'"}}]},
    ]}  # fmt: skip
    first = (CLAIM_TEMPLATE, claim_template(alternatives))
    workload = claiming_pod(claiming("gpu"), templates={"gpu": "slice-claim"})
    assert stack_violations(CLAIMED_MIG_SLICES, [first, (DEPLOYMENT, workload)]) == []
    pair = (CLAIM_TEMPLATE, claim_template(device_request("3g.40gb", "engine"),
                                           device_request("1g.10gb", "sidecar")))  # fmt: skip
    engine = claiming_pod(claiming("gpu", request="engine"), templates={"gpu": "slice-claim"})
    assert stack_violations(CLAIMED_MIG_SLICES, [pair, (DEPLOYMENT, engine)]) == []
    everything = claiming_pod(claiming("gpu"), templates={"gpu": "slice-claim"})
    [(_, message)] = stack_violations(CLAIMED_MIG_SLICES, [pair, (DEPLOYMENT, everything)])
    assert "at most one" in message


def test_tensor_parallelism_on_a_claimed_slice_is_reported() -> None:
    workload = claiming_pod(claiming("gpu", args=["--tensor-parallel-size", "2"]),
                            templates={"gpu": "slice-claim"})  # fmt: skip
    [(_, message)] = stack_violations(
        CLAIMED_MIG_SLICES, [(CLAIM_TEMPLATE, claim_template()), (DEPLOYMENT, workload)]
    )
    assert "asks for tensor parallelism 2 (--tensor-parallel-size 2)" in message


def test_claims_from_outside_the_stack_or_another_namespace_are_not_judged() -> None:
    workload = claiming_pod(claiming("gpu", args=["-tp", "2"]), templates={"gpu": "elsewhere"})
    assert (
        stack_violations(
            CLAIMED_MIG_SLICES, [(CLAIM_TEMPLATE, claim_template()), (DEPLOYMENT, workload)]
        )
        == []
    )
    other = claim_template(name="elsewhere")
    other["metadata"]["namespace"] = "other-team"
    assert (
        stack_violations(CLAIMED_MIG_SLICES, [(CLAIM_TEMPLATE, other), (DEPLOYMENT, workload)])
        == []
    )


def test_an_unknown_selector_still_lets_the_rest_be_judged_then_stops_the_policy() -> None:
    unknown = claim_template(name="later")
    unknown["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": UNKNOWN_STRING_VALUE}}
    ]
    bad = claiming_pod(claiming("gpu", args=["-tp", "4"]), templates={"gpu": "slice-claim"})
    resources = [(CLAIM_TEMPLATE, unknown), (CLAIM_TEMPLATE, claim_template()), (DEPLOYMENT, bad)]
    recorder = Recorder()
    with pytest.raises(UnknownValueError):
        CLAIMED_MIG_SLICES.validate(stack_args(resources), recorder)
    [message] = recorder.messages
    assert "tensor parallelism 4" in message
    assert recorder.urns == ["urn:pulumi:dev::other-program::kubernetes:apps/v1:Deployment::r2"]


def test_the_dra_stack_s_claims_are_resolved_and_judged() -> None:
    # Not vacuous: every GPU container of the DRA stack holds a claim the stack policy resolves.
    rendering = stack_rendering("gke-h100-dra")
    claims = ClaimIndex(
        found for r in rendering.resources if (found := claim_source(r.type, r.inputs))
    )
    judged = 0
    for deployment_ in rendering.of_type(DEPLOYMENT):
        spec = pack.pod_spec(deployment_.type, deployment_.inputs)
        assert spec is not None
        namespace = deployment_.inputs["metadata"]["namespace"]
        for item in pack.containers(spec):
            held = held_claims(spec, item.spec, claims, namespace)
            if item.spec.get("resources", {}).get("claims"):
                [claim] = held
                [request] = claim.requests
                assert request.mig and request.count == 1 and len(request.profiles) == 1
                judged += 1
    assert judged >= 2
    everything = [(r.type, r.inputs) for r in rendering.resources]
    assert stack_violations(CLAIMED_MIG_SLICES, everything) == []


def test_the_bridge_classes_the_program_renders_keep_the_rules(tmp_path: Path) -> None:
    config = yaml.safe_load(Path(stack_path("gke-h100-dra")).read_text())["config"]
    config = {k.removeprefix("mig-inference:"): v for k, v in config.items()
              if not isinstance(v, dict) or "secure" not in v}  # fmt: skip
    config["dra"] = {"kubernetesVersion": "1.36", "extendedResources": True}
    for service in config["services"]:
        service.pop("hfTokenSecret", None)
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    classes = rendering.of_type(DEVICE_CLASS)
    assert len(classes) == 3
    for found in classes:
        assert violations(MIG_PROFILE_EXISTS, found.type, found.inputs) == []
    # A class mapping the wrong profile is caught in the program's own shape.
    swapped = copy.deepcopy(classes[0].inputs)
    swapped["spec"]["extendedResourceName"] = classes[1].inputs["spec"]["extendedResourceName"]
    assert violations(MIG_PROFILE_EXISTS, DEVICE_CLASS, swapped)


# --- the pack -----------------------------------------------------------------------------------


def test_policies_are_named_described_and_mandatory() -> None:
    found = policies()
    names = [p.name for p in found]
    assert names == [
        "mig-profile-exists-on-gpu",
        "one-mig-device-per-container",
        "tensor-parallel-one-on-mig",
        "no-plaintext-tokens",
        "claimed-mig-slices-keep-the-pod-rules",
        "gpu-node-pools-protected",
    ]
    assert all(p.description and p.enforcement_level is EnforcementLevel.MANDATORY for p in found)
    declared = [
        v
        for v in vars(pack).values()
        if isinstance(v, ResourceValidationPolicy | StackValidationPolicy)
    ]
    assert sorted(p.name for p in declared) == sorted(names)


def test_pack_folder_serves_every_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real PolicyPack starts a gRPC server and sleeps forever: record its arguments instead.
    packs: list[tuple[str, list[Policy], dict[str, Any]]] = []

    def record(name: str, policies: list[Policy], **metadata: Any) -> None:
        packs.append((name, policies, metadata))

    monkeypatch.setattr(pulumi_policy, "PolicyPack", record)
    runpy.run_path(str(PACK_DIR / "__main__.py"), run_name="__main__")
    [(name, served, metadata)] = packs
    assert name == "mig-inference"
    assert [p.name for p in served] == [p.name for p in policies()]
    assert metadata["display_name"] and metadata["provider"] == "kubernetes"
    assert "mig-inference" in metadata["tags"]


def _analyzer_info() -> Any:
    """What the pack tells the engine about itself (`GetAnalyzerInfo`), from the SDK's own
    servicer, as `PolicyPack` builds it before it serves."""
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    servicer = _PolicyAnalyzerServicer(
        "mig-inference", "0.0.1", policies(), pulumi_policy.EnforcementLevel.ADVISORY
    )
    return cast(Any, servicer).GetAnalyzerInfo(None, None)


@pytest.mark.parametrize("policy", policies(), ids=lambda p: p.name)
def test_every_rule_carries_severity_remediation_tags_and_a_reference(policy: Policy) -> None:
    """The metadata pulumi-policy 1.21 takes and Pulumi Cloud shows beside a violation: how
    bad it is, how to fix it, what it is about and where to read more."""
    assert isinstance(policy.severity, pulumi_policy.Severity)
    assert policy.remediation_steps and len(policy.remediation_steps.split()) >= 20
    assert policy.tags and "mig-inference" in policy.tags
    assert policy.url and policy.url.startswith("https://")
    [served] = [p for p in _analyzer_info().policies if p.name == policy.name]
    assert served.remediation_steps == policy.remediation_steps
    assert served.severity == servicer_severity(policy.severity) != 0
    assert list(served.tags) == policy.tags and served.url == policy.url


def servicer_severity(severity: pulumi_policy.Severity) -> int:
    """The engine's spelling of a severity (the analyzer protocol's enum)."""
    from pulumi.runtime.proto import analyzer_pb2

    return int(analyzer_pb2.PolicySeverity.Value(f"POLICY_SEVERITY_{severity.name}"))


def test_the_credential_rule_names_the_control_it_keeps() -> None:
    [served] = [p for p in _analyzer_info().policies if p.name == "no-plaintext-tokens"]
    assert (served.framework.name, served.framework.version) == ("NIST SP 800-53", "Rev. 5")
    assert served.framework.reference == "IA-5(7)"
    assert "not embedded" in served.framework.specification
    assert served.severity == servicer_severity(pulumi_policy.Severity.CRITICAL)


def test_pack_folder_declares_python_and_its_requirements() -> None:
    project = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"] == "python"
    lines = [
        line
        for line in (PACK_DIR / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines == ["..[policy]"]
    pyproject = tomllib.loads((PACK_DIR.parent / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["policy"]
    assert sorted(re.split(r"[<>=]", item)[0] for item in extra) == [
        "cel-python",
        "lark",
        "pulumi-policy",
    ]


@pytest.mark.parametrize("stack", stack_names())
def test_the_projects_own_stacks_keep_the_rules(stack: str) -> None:
    # A stack that turns protection off keeps the rules through its pools' explicit opt-out.
    rendering = stack_rendering(stack)
    protected = plan_stack(load_stack(stack)).spec.cluster.protect
    workloads = 0
    for resource in rendering.resources:
        protect = rendering.options[(resource.type, resource.name)].protect
        gpu_pool = pack.gpu_node_pool(resource.type, resource.inputs) is not None
        workloads += pack.pod_spec(resource.type, resource.inputs) is not None
        for policy in policies():
            if isinstance(policy, StackValidationPolicy):
                continue
            found = violations(
                policy, resource.type, resource.inputs, protect=protect, name=resource.name
            )
            assert not found, (policy.name, resource.type, resource.name, found)
        if gpu_pool:
            assert protect or (not protected and pack.opted_out(resource.type, resource.inputs))
    assert workloads > 0
    everything = [(r.type, r.inputs) for r in rendering.resources]
    assert stack_violations(CLAIMED_MIG_SLICES, everything) == []


@pytest.mark.parametrize(
    ("resource_type", "props"),
    [
        (pack.GKE_NODE_POOL, {**GKE_GPU_POOL, "nodeConfig": {**GKE_GPU_POOL["nodeConfig"],
         "resourceLabels": {"mig-inference-unprotected": "by-design"}}}),
        (pack.EKS_NODE_GROUP, {"instanceTypes": ["p5.48xlarge"],
                               "tags": {"mig-inference-unprotected": "by-design"}}),
        (pack.OKE_NODE_POOL, {"nodeShape": "BM.GPU.H100.8",
                              "freeformTags": {"mig-inference-unprotected": "by-design"}}),
    ],
)  # fmt: skip
def test_a_pool_unprotected_by_design_passes(resource_type: str, props: dict[str, Any]) -> None:
    assert violations(GPU_POOLS_PROTECTED, resource_type, props) == []


def test_the_ephemeral_stack_s_pools_carry_the_opt_out_and_protected_ones_do_not() -> None:
    ephemeral = stack_rendering("ephemeral-gke")
    pools = [r for r in ephemeral.of_type(pack.GKE_NODE_POOL) if "-system" not in r.name]
    assert pools and all(pack.opted_out(r.type, r.inputs) for r in pools)
    for stack in ("gke-h100", "eks-p4d", "oke-h100"):
        rendering = stack_rendering(stack)
        marked = [r.name for r in rendering.resources if pack.opted_out(r.type, r.inputs)]
        assert marked == [], stack
