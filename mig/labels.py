"""Kubernetes label keys, taint keys and resource names the project sets or selects on."""

POOL_LABEL = "mig-inference.io/pool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
GKE_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
GKE_NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
OPERATOR_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
"""`false` on a node keeps every GPU Operator operand off it (GKE-native MIG pools)."""
GENERATION_LABEL = "mig-inference.io/generation"
"""The pool generation a cloud node belongs to (changes with every input that needs new nodes);
services select it, the gate counts only its nodes."""
OKE_NO_DEVICE_PLUGIN_LABEL = "oci.oraclecloud.com/disable-gpu-device-plugin"
"""`true` keeps OKE's own NVIDIA device plugin off a node, so only the GPU Operator's advertises
its GPUs."""
