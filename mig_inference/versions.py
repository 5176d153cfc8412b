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

INFERENCE_POOL_CHART = "oci://ghcr.io/llm-d/charts/llm-d-router-gateway"
INFERENCE_POOL_VERSION = "v0.10.0"
"""llm-d's `llm-d-router-gateway` chart: an InferencePool (`inference.networking.k8s.io/v1`) and
its endpoint picker (EPP). The project follows llm-d's router for the EPP, not the Gateway API
Inference Extension: the extension's v1.6 releases (v1.6.2 the newest) ship only the
InferencePool API, a "lightweight" reference EPP "not recommended for production" and the
conformance tests, and moved the EPP, its chart and the InferenceObjective API to
llm-d/llm-d-router (the extension's README and `site-src/guides/implementers.md` at v1.6.0).
v0.10.0 is llm-d-router's newest release (chart version = tag, `hack/push-chart.sh`); its EPP
reads the v1 InferencePool, and skips the InferenceObjective reconciler when that CRD is absent
(`pkg/epp/server/controller_manager.go@v0.10.0`), which this project does not install. Its
values live under `router.*` (the extension's v1.5.0 keys are refused)."""
PICKER_IMAGE = {
    "registry": "ghcr.io/llm-d",
    "repository": "llm-d-router-endpoint-picker",
    "tag": INFERENCE_POOL_VERSION,
}
"""The EPP image of the chart's release: the repository's values name the tag `main` with
`pullPolicy: Always`, which the release rewrites (`hack/push-chart.sh@v0.10.0`); the stack names
the release tag itself, so the chart's repository copy and the published one render alike."""
BODY_ROUTER_IMAGE = "registry.k8s.io/gateway-api-inference-extension/bbr:v1.5.0"
"""The extension's body-based router (BBR): it copies an OpenAI request's `model` into the
`X-Gateway-Model-Name` header the routes match on. v1.5.0 is the last release of the extension
that ships it (v1.6.0 moved it to llm-d/llm-d-inference-payload-processor, of which no release
or chart could be read here), so it stays at v1.5.0."""
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
INFERENCE_POOL_CRD_VERSION = "v1.6.2"
INFERENCE_POOL_CRD = (
    "https://raw.githubusercontent.com/kubernetes-sigs/gateway-api-inference-extension/"
    f"{INFERENCE_POOL_CRD_VERSION}/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml"
)
"""The InferencePool CRD (API v1) of the extension's newest release. Its schema was read here at
v1.6.0 and on the extension's main branch of 2026-08-18, identical but for the bundle-version
annotation; the v1.6.1 and v1.6.2 tags themselves could not be read here. GKE
1.34.0-gke.1626000 and later install it themselves."""

ISTIO_REPO = "https://istio-release.storage.googleapis.com/charts"
ISTIO_VERSION = "1.30.5"
ISTIO_HUB = "docker.io/istio"
"""Istio's `base` and `istiod` charts and images: the Gateway implementation on EKS, OKE and
existing clusters, with `ENABLE_GATEWAY_API_INFERENCE_EXTENSION` on. 1.30.5 is the newest patch
of the newest release line (1.30.4 carries Envoy's fixes of ISTIO-SECURITY-2026-006, HTTP/2 and
ext_authz among them). The fix of istio/istio#61594 (one endpoint picker per HTTPRoute rule,
PR #61601) is on master and, as #61842, on release-1.31, whose only tags read here are
pre-releases (1.31.0-rc.0 predates the cherry-pick); 1.30.4's and 1.30.5's notes do not list it.
The project does not depend on it (one InferencePool per model: `KNOWN_ISSUES`). The charts
rendered here are the 1.30.3 copies (the newest offline); the values given are the same keys."""
ISTIO_MIN_INSTALLED = (1, 28, 5)
"""The oldest Istio a cluster that runs its own (`gateway.install: false`) may run when the
stack routes from more than one namespace: before 1.28.5 (and 1.29.0) istiod kept the endpoint
picker of the first HTTPRoute only when it merged the routes of one Gateway (istio/istio#58393,
`pilot/pkg/config/kube/gateway/route_collections.go`, read at 1.28.4 and 1.28.5)."""

AWS_LOAD_BALANCER_CONTROLLER_CHART = "aws-load-balancer-controller"
AWS_LOAD_BALANCER_CONTROLLER_REPO = "https://aws.github.io/eks-charts"
AWS_LOAD_BALANCER_CONTROLLER_VERSION = "3.5.0"
"""The AWS Load Balancer Controller's chart (app v3.5.0, its newest release, 2026-08-03): an
external gateway's Service on EKS becomes an internet-facing Network Load Balancer. The IAM
policy its role carries is the release's `docs/install/iam_policy.json`, kept verbatim in
`data/aws-load-balancer-controller-iam-policy.json` (its sha256 below)."""
AWS_LOAD_BALANCER_CONTROLLER_POLICY_SHA256 = (
    "16f232c9d9f79366fe949c4550ad517a202380058a9e48d45a4e215044a20a6a"
)
"""sha256 of kubernetes-sigs/aws-load-balancer-controller@v3.5.0:docs/install/iam_policy.json."""


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


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # The gateway's pins.
    KnownIssue(
        "ISTIO_VERSION",
        "istio/istio#61594",
        "Istio 1.30 attaches one endpoint picker per HTTPRoute rule, the last InferencePool "
        "backend's (`conversion.go@1.30.3` keeps one inference-pool config per rule; the notes "
        "of 1.30.4 and 1.30.5 list no fix): a "
        "rule weighting two pools sends most requests past their picker, and all of them get "
        "a 503 when that pool has no ready replica.",
        "One InferencePool per model, selecting the model's pods across slice sizes: every rule "
        "has one InferencePool backend and no weight; two services serving one model are refused "
        "at the second's `model` (the fix, PR #61601, is on release-1.31, which has no release).",
        "tests/test_gateway.py::test_one_gateway_one_route_per_namespace_one_pool_per_rule",
    ),
    KnownIssue(
        "ISTIO_MIN_INSTALLED",
        "istio/istio#58393",
        "Before Istio 1.28.5 and 1.29.0 istiod kept the endpoint picker of the first HTTPRoute "
        "only when it merged the routes of one Gateway: a cluster's own Istio (`install: false`) "
        "would route the models of a second namespace past their picker.",
        "The stack installs Istio 1.30.5; with `install: false` and routes in more than one "
        "namespace the preview warns that the cluster's Istio must be 1.28.5 or later (its "
        "version is not looked up).",
        "tests/test_gateway_plan.py::test_warnings_say_what_the_preview_cannot_check",
    ),
    KnownIssue(
        "INFERENCE_POOL_VERSION",
        "llm-d/llm-d-router#2603",
        "llm-d-router-gateway v0.10.0 runs more than one picker only with leader election (one "
        "Ready leader, which no disruption budget can protect without blocking its node's "
        "drain) and with the Deployment strategy Recreate (an upgrade of its pod template stops "
        "both pickers at once); #2603, after v0.10.0, makes the strategy a value.",
        "Two active pickers (`--ha-enable-leader-election=false` after the chart's own flag), a "
        "budget of one unavailable, and the InferencePool failing open: while no picker is "
        "ready the gateway sends the model's requests to its ready replicas without picking.",
        "tests/test_gateway.py::"
        "test_the_picker_chart_renders_one_inference_pool_per_model_wired_to_its_pods",
    ),
)
"""The known upstream issues of the pins above, each with the project's mitigation and its test."""
