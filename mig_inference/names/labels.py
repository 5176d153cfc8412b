"""Kubernetes label keys, taint keys and resource names the project sets or selects on."""

POOL_LABEL = "mig-inference.io/pool"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
GKE_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
GKE_NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
STARTUP_TAINT_PREFIX = "startup-taint.cluster-autoscaler.kubernetes.io/"
"""Taints the Cluster Autoscaler treats as startup taints (kubernetes/autoscaler
`cluster-autoscaler/utils/taints/taints.go` `StartupTaintPrefix`, FAQ "How does Cluster Autoscaler
treat nodes with status/startup/ignore taints?"): the node counts as starting, not ready, so pods
waiting for it trigger no further scale-up, and the taint is left out of node templates."""
STARTUP_TAINT_KEY = STARTUP_TAINT_PREFIX + "mig-slices"
STARTUP_TAINT = (STARTUP_TAINT_KEY, "pending", "NoSchedule")
"""On a new node of an autoscaled MIG pool until it advertises its planned slices (Kubernetes
spelling); the startup-taint agent removes it."""
OPERATOR_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"
"""`false` on a node keeps every GPU Operator operand off it (GKE-native MIG pools)."""
GENERATION_LABEL = "mig-inference.io/generation"
"""The pool generation a cloud node belongs to (changes with every input that needs new nodes);
services select it, the gate counts only its nodes."""
OKE_NO_DEVICE_PLUGIN_LABEL = "oci.oraclecloud.com/disable-gpu-device-plugin"
"""`true` keeps OKE's own NVIDIA device plugin off a node, so only the GPU Operator's advertises
its GPUs."""
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
"""Which entry of the device plugin's config ConfigMap a node uses (its sharing)."""
GKE_SHARED_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
"""GKE's label on nodes whose GPUs it shares: how many pods share one."""
GPU_DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
"""The GPU Operator's per-operand node labels (`...device-plugin`, `...dcgm`...): `true` runs the
operand on the node; the MIG manager sets them to `paused-for-mig-change` while it works."""
PAUSED_FOR_MIG_CHANGE = "paused-for-mig-change"
CLIENT_DEPLOY_LABEL = GPU_DEPLOY_LABEL_PREFIX + "client"
"""Third-party GPU clients' label (GPU Operator v26.7.0 sets it `true` on GPU nodes; mig-manager
v0.15.0 sets it `paused-for-mig-change` while it applies a layout and waits until no
DaemonSet-owned pod on the node selects on it, then sets it back)."""
MIG_MANAGER_POD_SELECTOR = "app=nvidia-mig-manager"
"""The GPU Operator's MIG manager pods (assets/state-mig-manager/0600_daemonset.yaml, v26.7.0)."""
CORDONED_FOR_ANNOTATION = "mig-inference.io/cordoned-for"
"""On a node the re-partitioning Job cordoned: the config it moves the node to. A later run
resumes such a node; a cordon without it is someone else's and is left in place."""
RELAXED_FROM_ANNOTATION = "mig-inference.io/relaxed-from"
"""On a PodDisruptionBudget the re-partitioning Job relaxed while it runs: the maxUnavailable to
restore."""
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
"""`false` keeps the GPU Operator's device plugin off a node: the operator sets a deploy label
only where it is absent or empty (gpu-operator v26.7.0 controllers/state_manager.go:476-480) and
the MIG manager leaves a `false` one as it is (mig-parted v0.15.0 `maybeSetPaused`)."""
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"
"""`false` keeps the GPU Operator's MIG manager off a node (DynamicMIG pools)."""
DRA_NODE_LABEL = "mig-inference.io/allocation"
"""`dra` on the nodes of DRA pools: the DRA driver's kubelet plugin runs there and nowhere else,
so no slice is ever offered by both a device plugin and the driver."""
DRA_DRIVER = "gpu.nvidia.com"
"""The DRA driver's name, and the domain of the attributes it publishes (v0.4.1
cmd/gpu-kubelet-plugin/main.go)."""
MIG_DEVICE_CLASS = "mig.nvidia.com"
"""The DRA driver's DeviceClass of every MIG slice it publishes (chart `deviceclass-mig.yaml`)."""
GPU_DEVICE_CLASS = "gpu.nvidia.com"
"""The DRA driver's DeviceClass of every whole GPU it publishes (chart `deviceclass-gpu.yaml`)."""
DRA_PLUGIN_POD_SELECTOR = "dra-driver-nvidia-gpu-component=kubelet-plugin"
"""The DRA driver's kubelet-plugin pods (chart v0.4.1 `_helpers.tpl` selectorLabels)."""
ARCH_LABEL = "kubernetes.io/arch"
"""A node's CPU architecture; GKE also taints every Arm node `kubernetes.io/arch=arm64:NoSchedule`
(GKE "Prepare an Arm workload for deployment")."""
