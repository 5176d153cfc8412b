"""Every pinned chart and image version, in one place."""

GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_VERSION = "v26.7.0"

VLLM_IMAGE = "vllm/vllm-openai:v0.33.0"
TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference:3.3.5"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"

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
"""NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu), its newest release
(v0.4.1, 2026-06-30; the chart moved from NVIDIA's calendar-versioned v25.12.0 to this
registry). Its image follows the chart (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:
v0.4.1`)."""
