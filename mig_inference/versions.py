"""Every pinned chart and image version, in one place, with the upstream issues each carries."""

from dataclasses import dataclass

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = "v26.7.0"

VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference:3.3.5"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"

ENGINE_IMAGES: dict[str, str] = {"vllm": VLLM_IMAGE, "tgi": TGI_IMAGE, "triton": TRITON_IMAGE}
"""Each engine's image when a service names none."""

GATE_IMAGE = "alpine/k8s:1.34.1"
"""kubectl plus a POSIX shell, for the MIG-ready gate Job's wait loop."""

GKE_DRIVER_INSTALLER_MANIFEST = (
    "GoogleCloudPlatform/container-engine-accelerators@95efe95c68ca328150b68a21ef8372369c30beb7:"
    "nvidia-driver-installer/cos/daemonset-preloaded-latest.yaml"
)
"""The release of Google's COS driver-installer manifest the GKE DaemonSet follows."""
GKE_DRIVER_INSTALLER_IMAGE = "cos-nvidia-installer:fixed"
"""Preloaded on GKE COS nodes (pulled never)."""
GKE_PAUSE_IMAGE = "gcr.io/google-containers/pause:2.0"

CLUSTER_AUTOSCALER_CHART = "cluster-autoscaler"
CLUSTER_AUTOSCALER_REPO = "https://kubernetes.github.io/autoscaler"
CLUSTER_AUTOSCALER_VERSION = "9.59.0"
"""The Kubernetes Cluster Autoscaler's official chart (app 1.35.0), for EKS."""

KEDA_CHART = "keda"
KEDA_REPO = "https://kedacore.github.io/charts"
KEDA_VERSION = "2.20.2"
"""KEDA's official chart: replicas follow an engine's queue (Prometheus trigger)."""

VERIFY_IMAGE = "python:3.13.7-slim-trixie"
"""The official Python image (Debian trixie: glibc, which the nvidia-smi the NVIDIA runtime
mounts into a container needs) for the serving check: the verify Job and every verified
replica's slice check run `mig_inference/verify/probe.py` and `slice_check.py`, which use the
standard library only."""

DRA_DRIVER_CHART = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
DRA_DRIVER_VERSION = "0.4.1"
"""NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu): the newest release whose
chart could be sourced (v0.4.1, 2026-06-30; the chart moved from NVIDIA's calendar-versioned
v25.12.0 to this registry). v0.5.0 was released since (release issue #1365, PR #1367 merged
2026-08-19; GPU Operator v26.7.0 pins its image), but neither its tag nor its chart could be
read here (shared/reference/dra/NOTES-0.5.md section 0; no v0.5.1 was found), so the pin stays.
Its image follows the chart (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1`)."""

GKE_A4X_DRIVER_INSTALLER_MANIFEST = (
    "GoogleCloudPlatform/container-engine-accelerators@6253173028d641121e8d9dee08fdcceaa43d4ebd:"
    "nvidia-driver-installer/cos/daemonset-preloaded-latest-a4x.yaml"
)
"""Google's driver installer for A4X (Arm) nodes, which the A4X DaemonSet follows."""
GKE_A4X_PAUSE_IMAGE = (
    "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
)
"""The pause container of Google's A4X manifest (GKE_PAUSE_IMAGE has no arm64 build)."""

ARM64_IMAGES: dict[str, str] = {
    VLLM_IMAGE: "vllm-project/vllm#23210: the release pipeline publishes linux/arm64 under the "
    "same tag as linux/amd64 (this tag's manifest not re-read here)",
    TRITON_IMAGE: "NVIDIA Triton Inference Server release notes: every release ships for x86 "
    "and ARM SBSA Linux (this tag's manifest not re-read here)",
    VERIFY_IMAGE: "docker-library/official-images library/python: the Debian slim tags are "
    "built for arm64v8 (this tag not re-read here)",
    GKE_A4X_PAUSE_IMAGE: GKE_A4X_DRIVER_INSTALLER_MANIFEST,
}
"""Pinned images with a linux/arm64 build, each with where that is stated: the only images
the pods of an Arm pool (GB200, GB300) may run. The charts' own images (GPU Operator: NVIDIA's
"Platform Support" lists Arm platforms; DRA driver: kubernetes-sigs/dra-driver-nvidia-gpu
`deployments/container/Makefile` builds linux/amd64 and linux/arm64) run as per-node agents."""
AMD64_ONLY_IMAGES: dict[str, str] = {
    TGI_IMAGE: "huggingface/text-generation-inference builds its image for `platforms: "
    "linux/amd64` only (.github/workflows/build.yaml); an arm64 image is an open request (#2332)",
}
"""Pinned images without a linux/arm64 build, and where that is stated."""

INFERENCE_POOL_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"
INFERENCE_POOL_VERSION = "v1.5.0"
"""The Gateway API Inference Extension's `inferencepool` chart: an InferencePool
(`inference.networking.k8s.io/v1`) and its endpoint picker (EPP, image
`registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0`). v1.5.0 is the extension's last
release that ships the chart and the EPP; they moved to llm-d's router afterwards
(`llm-d-router-gateway` v0.10.0, image `ghcr.io/llm-d/llm-d-router-endpoint-picker`). Chosen
over that successor because the body-based router this project routes by model with belongs
to the same release (v1.5.0, `bbr` below), the Istio conformance report Istio's gateway is
trusted on is the extension's v1.5.0 suite (Istio 1.30.1, 13 of 13 passed), and the GKE
guides name v1.5.0; the successor renames every value (`router.*`) and refuses the old ones,
for an EPP with the same flags, ports and vLLM metrics."""
BODY_ROUTER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/bbr:v1.5.0"
"""The extension's body-based router (BBR, v1.5.0 like the EPP): it copies an OpenAI request's
`model` into the `X-Gateway-Model-Name` header the routes match on."""
BODY_ROUTER_FOLLOWS = (
    "kubernetes-sigs/gateway-api-inference-extension@v1.5.0:config/charts/body-based-routing"
)
"""The chart whose objects the body-based router's Deployment, Service and gateway hook follow
(its flags, ports, header and Istio/GKE wiring)."""

GATEWAY_API_VERSION = "v1.6.1"
GATEWAY_API_CRDS = (
    "https://github.com/kubernetes-sigs/gateway-api/releases/download/"
    f"{GATEWAY_API_VERSION}/standard-install.yaml"
)
"""Gateway API's standard channel (Gateway, HTTPRoute ...), installed where the cloud does not
manage it (EKS, OKE, existing clusters; GKE manages its own)."""
INFERENCE_POOL_CRD_VERSION = "v1.6.0"
INFERENCE_POOL_CRD = (
    "https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/"
    f"{INFERENCE_POOL_CRD_VERSION}/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml"
)
"""The InferencePool CRD (API v1, the extension's newest release; the v1.5.0 EPP reads the same
v1 API, and v1.6.0 only stopped requiring `endpointPickerRef`). GKE 1.34.0-gke.1626000 and later
install it themselves."""

ISTIO_REPO = "https://istio-release.storage.googleapis.com/charts"
ISTIO_VERSION = "1.30.3"
ISTIO_HUB = "docker.io/istio"
"""Istio's `base` and `istiod` charts and images: the Gateway implementation on EKS, OKE and
existing clusters, with `ENABLE_GATEWAY_API_INFERENCE_EXTENSION` on."""


@dataclass(frozen=True)
class KnownIssue:
    """An upstream fault, open or fixed only after the pin, on the project's path."""

    pin: str
    """The name of the pin in this module it applies to, e.g. `ISTIO_VERSION`."""
    issue: str
    """Where it is tracked, `owner/repo#number`."""
    affects: str
    """What a user of this project meets, in a sentence."""
    mitigation: str
    """What the project does about it (or refuses), in a sentence."""
    test: str
    """The test that shows the mitigation, `tests/<file>.py::<name>`."""


KNOWN_ISSUES: tuple[KnownIssue, ...] = ()
"""The known upstream issues of the pins above, each with the project's mitigation and its test."""
