"""Every pinned chart and image version, in one place, with the upstream issues each carries."""

from msgspec import Struct

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = "v26.7.0"
"""NVIDIA's GPU Operator chart. Patch releases exist after it, and the pin stays until their chart
can be had: the tests render the pinned chart
(`shared/reference/nvidia/charts/gpu-operator-v26.7.0`, the only GPU Operator chart there) and
check every operator value against its own `values.yaml`;
CI requires that reference (`MIG_REQUIRE_REFERENCE=1`), and the Helm repositories are out of
reach here. What could be read of them (searched again 2026-12-02):
- 26.7.2: the release notes of NVIDIA's docs preview (cloud-native-docs review build `pr-525`,
  `gpu-operator/latest/release-notes.html`, only its opening): DRA driver v0.5.1; an
  `app.kubernetes.io/component` label on the DCGM and DCGM exporter DaemonSets, pods and
  Services (GPU Operator PR #3017: additive, the project's DCGM scrape is the operator's own
  ServiceMonitor); an OpenShift fix for MPS with the DRA driver under the `GPUCluster` resource
  (the project installs the DRA driver's own chart, not through `GPUCluster`). Nothing read
  there touches the MIG manager, so #2833 and #2415 (`KNOWN_ISSUES`) stay open for it.
- 26.7.1: only Chainguard's OSV advisories for its `gpu-operator-26.7` package (2026-10-09; Go
  standard-library fixes, go1.27.1; 26.7.2's build has go1.27.2, 2026-10-21): no notes.
- The mirror of NVIDIA/gpu-operator ends at tag v26.7.0 (2026-08-21; `release-26.7` and
  `gh-pages` too), NVIDIA/cloud-native-docs at 2026-08-22; the issues corpus has no release PR
  of 26.7.1 or 26.7.2.
Meanwhile the project carries the v26.7.0 mitigations in `KNOWN_ISSUES` below."""

VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
"""vLLM's newest release (PyPI lists 0.33.0 last, 2026-12-01); its source read in the sdist."""
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
2026-08-19; GPU Operator v26.7.0 pins its image) and v0.5.1 after it (GPU Operator 26.7.2's
release notes, NVIDIA's docs preview `pr-525`), but neither tag nor chart could be read here:
`shared/reference/dra/charts` holds 0.4.1, 25.12.0 and `0.5.0-dev` from `main@95932046`
(2026-08-07, not a release; NOTES-0.5.md section 0), the mirrors of kubernetes-sigs/
dra-driver-nvidia-gpu and NVIDIA/k8s-dra-driver-gpu stop at v0.4.1 and v0.4.0, and no v0.5.1
release issue or notes were found (searched again 2026-12-02: the issues, docs and code corpora).
Rendering a dev chart as a release would fake the check, so the pin stays; v0.5's static-MIG
changes for this project are in NOTES-0.5.md (values only added, CRDs and DeviceClasses
unchanged).
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


class KnownIssue(Struct, frozen=True):
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


class SearchedPin(Struct, frozen=True):
    """A pin whose open upstream issues were searched and none found on the project's path."""

    pin: str
    """The name of the pin in this module."""
    as_of: str
    """When the search was made (YYYY-MM-DD)."""
    searched: str
    """Where: the trackers and the queries, in a sentence."""


SEARCHED_ON = "2026-12-01"
ISSUES = "the stored GitHub issues corpus"

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
        "tests/components/test_gateway.py::"
        "test_one_gateway_one_route_per_namespace_one_pool_per_rule",
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
        "tests/plan/test_gateway_plan.py::test_warnings_say_what_the_preview_cannot_check",
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
        "tests/components/test_gateway.py::"
        "test_the_picker_chart_renders_one_inference_pool_per_model_wired_to_its_pods",
    ),
    KnownIssue(
        "AWS_LOAD_BALANCER_CONTROLLER_VERSION",
        "kubernetes-sigs/aws-load-balancer-controller#4140",
        "The chart's Service mutator webhook (on by default, failure policy Fail) refuses every "
        "Service created in the cluster until the controller's pods answer it, so on an EKS "
        "cluster the stack creates, the charts and Services created beside the controller fail "
        'with `no endpoints available for service "aws-load-balancer-webhook-service"`.',
        "The stack installs the controller with `enableServiceMutatorWebhook: false`: the "
        "gateway's Service hands itself to the controller by its annotations "
        "(`aws-load-balancer-type: external`), and other LoadBalancer Services stay with the "
        "cloud provider's controller.",
        "tests/components/test_gateway.py::"
        "test_a_created_eks_cluster_gets_the_aws_load_balancer_controller_for_an_external_gateway",
    ),
    KnownIssue(
        "BODY_ROUTER_IMAGE",
        "kubernetes-sigs/gateway-api-inference-extension#2988",
        "With `FULL_DUPLEX_STREAMED` request bodies, Envoy 1.35 and later (Istio 1.30's among "
        "them) can send the last chunk of a large body (about 1 MB and more) twice "
        "(envoyproxy/envoy#46237, open); the router v1.5.0 appends it and parses again, so such "
        "a request gets `400 BadRequest - failed to parse request body` now and then.",
        "None in the stack: the router streams bodies as its chart does (buffering them instead "
        "would refuse every body over Envoy's 1 MiB buffer); docs/troubleshooting.md names the "
        "symptom, and the test holds the mode this row is about.",
        "tests/components/test_gateway.py::"
        "test_the_body_router_streams_request_bodies_as_its_chart_does",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/gpu-operator#2415",
        "With the host's driver (EKS's AL2023 NVIDIA AMI, OKE's GPU images) the MIG manager "
        "stops and restarts the host's kubelet around a MIG mode change (mig-parted v0.15.0 "
        "reconfigure.go); on AL2023's cgroup v2 that leaves the node NotReady for good "
        "(also NVIDIA/mig-parted#368; the three fix PRs were closed unmerged).",
        "EKS and OKE nodes switch MIG mode on from their user data before the kubelet starts, "
        "so the first apply changes no mode; EKS node groups turn node auto repair on, which "
        "replaces a node NotReady for 30 minutes.",
        "tests/clouds/test_mig_mode_at_boot.py::"
        "test_the_first_apply_changes_no_mode_on_gpus_the_user_data_prepared",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/gpu-operator#2415",
        "A node that still meets it (a MIG mode change on a running node: an in-place "
        "re-partitioning on an existing cluster, a node whose user data did not switch the "
        "mode) reports `success` but stays NotReady with nothing advertised; no pod restart "
        "clears it, only a new instance.",
        "The gate and the re-partitioning Job restart nothing on a node NotReady with its run "
        "ended and report it with the cure (a new instance, which EKS node auto repair brings); "
        "the Job stops there with the node cordoned, the gate keeps waiting for a replacement.",
        "tests/kube/test_repartition.py::"
        "test_a_node_its_mode_change_left_notready_stops_the_job_with_the_way_forward",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/gpu-operator#2833",
        "An operand that outlives the MIG manager's 5-minute wait leaves the node `pending` "
        "for good with its operands paused (fixed in mig-parted by PR #484 after v0.15.0, "
        "the MIG manager v26.7.0 runs).",
        "The gate and the re-partitioning Job restart the MIG manager pod of a node `pending` "
        "for 10 minutes on its pool's config, once, and say so.",
        "tests/kube/test_gate.py::"
        "test_a_node_wedged_in_pending_gets_its_mig_manager_restarted_once",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/gpu-operator#2833",
        "The same MIG manager never restores the operands a later failed run paused once its "
        "process completed a reconfigure (v0.15.0's process-wide flags): `success` for the "
        "same layout then leaves the device plugin off.",
        "The gate restarts the MIG manager pod of a node reporting `success` with its operands "
        "paused on two polls, once; the new process, finding the layout applied, restores them.",
        "tests/kube/test_gate.py::test_operands_left_paused_after_success_get_the_mig_manager_"
        "restarted_once",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/dcgm-exporter#512",
        "The DCGM exporter the operator deploys can report no DCGM_FI_DEV_FB_* for MIG "
        "instances (seen on H100), so the slice-memory alert had nothing to fire on.",
        "MigSliceMemoryFull also fires, reason memory-not-reported, for a configured node of a "
        "MIG pool whose slices report no frame-buffer memory.",
        "tests/kube/test_monitoring.py::"
        "test_the_slice_memory_alert_fires_when_a_mig_node_reports_no_slice_memory",
    ),
    KnownIssue(
        "GPU_OPERATOR_VERSION",
        "NVIDIA/gpu-operator#2874",
        "After the driver is unloaded and loaded again a MIG manager container can start without "
        "driver libraries and leave its node `failed` (ERROR_LIBRARY_NOT_FOUND), no retry "
        "(closed after v26.7.0; the release with the fix was not read).",
        "None automatic: the gate fails at once naming the node and its MIG manager's log; "
        "docs/troubleshooting.md gives the pod restart that clears it.",
        "tests/kube/test_gate.py::test_fails_fast_naming_a_failed_node_that_carries_the_config",
    ),
    KnownIssue(
        "VLLM_IMAGE",
        "vllm-project/vllm#55381",
        "Inside a MIG container vLLM's NVML probe of the parent GPU fails or answers for the "
        "whole GPU, so its batch defaults depend on a permission (2048 tokens / 256 sequences "
        "on a refusal, 28-53% less throughput measured on an H200 2g.35gb).",
        "Every vLLM Deployment gets --max-num-batched-tokens and --max-num-seqs from the plan: "
        "the tier vLLM picks for the parent GPU, capped at sequences x context.",
        "tests/kube/test_engine_batch.py::test_every_vllm_deployment_pins_its_budget_from_the_plan",
    ),
    KnownIssue(
        "VLLM_IMAGE",
        "vllm-project/vllm#42514",
        "PyTorch's allocator with expandable segments asks NVML for the parent GPU on a MIG "
        "slice and asserts (`NVML_SUCCESS == r` in CUDACachingAllocator.cpp); vLLM's own MIG "
        "runners turn it off, v0.33.0 does not (the PR closed unmerged).",
        "vLLM replicas on MIG slices run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False.",
        "tests/kube/test_engine_batch.py::"
        "test_mig_slices_run_the_allocator_without_expandable_segments",
    ),
    KnownIssue(
        "CLUSTER_AUTOSCALER_VERSION",
        "kubernetes/autoscaler#8095",
        "A node carrying the cloud provider's GPU label counts as unready while it advertises "
        "no nvidia.com/gpu, which a MIG node never does; past --ok-total-unready-count the "
        "autoscaler stops (GKE's managed autoscaler may meet it on GKE's own accelerator label).",
        "The EKS pools carry no k8s.amazonaws.com/accelerator label (the AWS provider's GPU "
        "label), in their nodes or their node-template tags; new nodes wait under a startup "
        "taint instead.",
        "tests/kube/test_startup_taints.py::test_eks_mig_nodes_are_not_judged_by_nvidia_gpu",
    ),
    KnownIssue(
        "CLUSTER_AUTOSCALER_VERSION",
        "NVIDIA/gpu-operator#708",
        "A new MIG node is Ready before its layout is applied and advertises no nvidia.com/mig-*, "
        "so the autoscaler grows the pool again for the pods it will take (closed there as an "
        "enhancement; the autoscaler has no fix).",
        "Autoscaled MIG pools' new nodes carry the startup taint "
        "startup-taint.cluster-autoscaler.kubernetes.io/mig-slices until the mig-startup-taints "
        "agent sees them advertise their planned slices.",
        "tests/kube/test_startup_taints.py::"
        "test_the_taint_comes_off_a_node_that_advertises_its_planned_slices",
    ),
    KnownIssue(
        "DRA_DRIVER_VERSION",
        "NVIDIA/cloud-native-docs#400",
        "The GPU Operator's documented known issue for the DRA driver: on A100 the MIG manager "
        "does not restart the DRA kubelet plugin around a layout change, and the plugin keeps "
        "publishing the slices it found when it started.",
        "The gate restarts a kubelet plugin seen Ready with other slices than planned (once), "
        "and the re-partitioning Job restarts it where the MIG manager does not.",
        "tests/kube/test_dra_restart.py::"
        "test_the_gate_restarts_a_plugin_that_published_before_the_layout",
    ),
    KnownIssue(
        "TRITON_IMAGE",
        "triton-inference-server/server#5324",
        "Triton cannot read GPU metrics on a MIG slice (its embedded DCGM fails to start, "
        "#7906), so its own GPU metrics are missing there.",
        "Triton services are not scraped; per-slice GPU metrics come from the DCGM exporter.",
        "tests/kube/test_monitoring.py::test_engines_without_metrics_are_not_scraped",
    ),
)
"""The known upstream issues of the pins above, each with the project's mitigation and its test
(docs/troubleshooting.md lists them for users)."""

SEARCHED: tuple[SearchedPin, ...] = (
    SearchedPin("TGI_IMAGE", SEARCHED_ON, f"{ISSUES}, huggingface/text-generation-inference: MIG, "
                "cuda-memory-fraction and startup on a slice (only #382, closed, TGI 0.6)"),
    SearchedPin("KEDA_VERSION", SEARCHED_ON, f"{ISSUES}, kedacore/keda: the Prometheus scaler and "
                "ignoreNullValues (#3065 closed; #7062 asks for a metric, not a fault)"),
    SearchedPin("GATE_IMAGE", SEARCHED_ON, f"{ISSUES}, alpine/k8s: kubectl and sh in the image "
                "(nothing on the commands the scripts run)"),
    SearchedPin("VERIFY_IMAGE", SEARCHED_ON, f"{ISSUES}, docker-library/python: the slim trixie "
                "tags (nothing on the standard library the checks use)"),
    SearchedPin("GKE_DRIVER_INSTALLER_MANIFEST", SEARCHED_ON, f"{ISSUES}, GoogleCloudPlatform/"
                "container-engine-accelerators: the COS preloaded installer with the GPU Operator "
                "and MIG (merged PRs only: #179, #259, #469)"),
    SearchedPin("GKE_DRIVER_INSTALLER_IMAGE", SEARCHED_ON, "with GKE_DRIVER_INSTALLER_MANIFEST, "
                "whose image it is"),
    SearchedPin("GKE_PAUSE_IMAGE", SEARCHED_ON, "with GKE_DRIVER_INSTALLER_MANIFEST, whose "
                "container it is"),
    SearchedPin("GKE_A4X_DRIVER_INSTALLER_MANIFEST", SEARCHED_ON, "with "
                "GKE_DRIVER_INSTALLER_MANIFEST (the same installer for A4X, #469)"),
    SearchedPin("GKE_A4X_PAUSE_IMAGE", SEARCHED_ON, "with GKE_A4X_DRIVER_INSTALLER_MANIFEST, "
                "whose container it is"),
    SearchedPin("GATEWAY_API_VERSION", "2026-12-02", f"{ISSUES}, kubernetes-sigs/gateway-api: "
                "v1.6 standard-install, HTTPRoute and the safe-upgrades ValidatingAdmissionPolicy "
                "(its faults fixed before v1.6.0: #4557, #4603; v1.6.1 changes conformance tests "
                "only, no CRD)"),
    SearchedPin("INFERENCE_POOL_CRD_VERSION", "2026-12-02", f"{ISSUES}, kubernetes-sigs/gateway-"
                "api-inference-extension: the v1 InferencePool CRD at v1.6, its endpointPickerRef "
                "and failureMode (faults found are in gateways' use of it, not the CRD)"),
)  # fmt: skip
"""Pins searched for open issues on the project's path, none found: when and where."""
