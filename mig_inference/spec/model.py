"""The typed stack spec: what a validated stack file says, with every default applied."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from mig_inference.clouds import Cloud
from mig_inference.clouds.capacity import Capacity
from mig_inference.errors import AlreadyReported
from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout
from mig_inference.gpus.sizing import ModelShape
from mig_inference.spec.cloud_tags import CloudTags
from mig_inference.stackfile.pulumi_config import NAMESPACE

if TYPE_CHECKING:
    from mig_inference.spec.gateway import GatewaySpec

AUTO = "auto"
FILL = "fill"


class MigManager(StrEnum):
    OPERATOR = "operator"
    """The GPU Operator's MIG manager and the `mixed` strategy (any layout)."""
    GKE = "gke"
    """GKE's native `gpu_partition_size`: one profile per GPU, advertised as `nvidia.com/gpu`."""


class Rollout(StrEnum):
    BLUE_GREEN = "blue-green"
    """A change that needs new nodes brings up a new generation of the pool next to the old
    one; services move to it; the old one is deleted last."""
    IN_PLACE = "in-place"
    """Layout changes re-partition the pool's nodes one at a time (cordon, evict the pods
    holding MIG devices, relabel, wait for success, uncordon). `existing` pools always."""


class Allocation(StrEnum):
    """How a pool's MIG slices (or whole GPUs) reach pods."""

    DEVICE_PLUGIN = "device-plugin"
    """NVIDIA's device plugin advertises each slice as the extended resource
    `nvidia.com/mig-<profile>` (the GPU Operator's, `mixed` strategy)."""
    DRA = "dra"
    """NVIDIA's DRA driver publishes each slice as a device in a ResourceSlice; pods claim one
    through a ResourceClaimTemplate (or, with `dra.extendedResources`, keep their
    `nvidia.com/mig-<profile>` request, which a DeviceClass maps to the device)."""


class SharingStrategy(StrEnum):
    TIME_SLICING = "timeSlicing"
    """The device plugin advertises each device `replicas` times; no memory isolation."""
    MPS = "mps"
    """CUDA MPS: `replicas` clients per GPU, each with its share of memory and compute."""


class SharingSpec(Struct, frozen=True):
    """How a pool's devices are shared between pods."""

    strategy: SharingStrategy
    replicas: int
    """Pods per device (2 to 48)."""
    rename: bool = False
    """Advertise shared devices as `<resource>.shared` (`nvidia.com/gpu.shared`)."""
    profiles: tuple[str, ...] = ()
    """MIG profiles whose slices are shared (default: every device of the pool)."""


class CacheStorage(StrEnum):
    """Where the model cache lives: cluster storage every node reads, never the nodes."""

    HYPERDISK_ML = "hyperdisk-ml"
    """GKE: a Hyperdisk ML volume per model revision, filled read-write, read by every node
    read-only (a ReadOnlyMany clone)."""
    GCS_FUSE = "gcs-fuse"
    """GKE: a Cloud Storage bucket through the Cloud Storage FUSE CSI driver, with its file
    cache."""
    S3_MOUNTPOINT = "s3-mountpoint"
    """EKS: an S3 bucket through the Mountpoint for Amazon S3 CSI driver."""
    FSX_LUSTRE = "fsx-lustre"
    """EKS: an FSx for Lustre file system the FSx CSI driver creates."""
    FILE_STORAGE = "file-storage"
    """OKE: an OCI File Storage file system the FSS CSI driver creates."""
    STORAGE_CLASS = "storage-class"
    """Any cluster: a ReadWriteMany StorageClass you name."""

    @property
    def object_storage(self) -> bool:
        """A bucket: the engine may stream from it (vLLM's Run:ai Model Streamer)."""
        return self in (CacheStorage.GCS_FUSE, CacheStorage.S3_MOUNTPOINT)


class ModelCacheSpec(Struct, frozen=True):
    """One cache per stack, filled once per model revision, read by every replica."""

    storage: CacheStorage
    storage_class: str | None = None
    """storage-class: the StorageClass (ReadWriteMany) the cache's volume claims."""
    bucket: str | None = None
    """gcs-fuse, s3-mountpoint: an existing bucket; None: the stack creates one."""
    size_gib: int | None = None
    """The volume's size (per model revision on Hyperdisk ML); None: from the models' bytes."""
    throughput_mib_per_s: int | None = None
    """hyperdisk-ml: the volume's provisioned throughput; fsx-lustre: MB/s per TiB."""
    security_group_ids: tuple[str, ...] = ()
    """fsx-lustre: the security groups of the file system (they must allow Lustre from the
    nodes)."""
    mount_target_subnet_id: str | None = None
    """file-storage: the subnet of the mount target (default: the cluster's first subnet)."""
    stream: bool = False
    """vLLM streams the weights from the bucket into GPU memory (Run:ai Model Streamer)."""
    read_mb_per_s: float | None = None
    """Your measured read rate of the cache, per node (overrides the shipped figure)."""
    hub_mb_per_s: float | None = None
    """Your measured download rate from the hub, per node (overrides the shipped figure)."""
    enabled: bool = True
    """False: settings kept, replicas download from the hub as without the key."""


class Engine(StrEnum):
    VLLM = "vllm"
    TRITON = "triton"
    TGI = "tgi"
    CUSTOM = "custom"


class Taint(Struct, frozen=True):
    key: str
    value: str
    effect: str
    """Kubernetes spelling: NoSchedule, PreferNoSchedule or NoExecute."""


class NodeCount(Struct, frozen=True):
    """Fixed (`min == max`) or autoscaling node count."""

    min: int
    max: int

    @property
    def fixed(self) -> bool:
        return self.min == self.max


class ClusterSpec(Struct, frozen=True):
    name: str
    """Cluster name."""
    create: bool = False
    """Create the cluster too (ephemeral test clusters)."""
    protect: bool = True
    """Protect the cluster and pools from accidental deletion."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Cloud-specific keys (project, location, region, subnetIds, compartmentId, ...)."""
    refused: frozenset[str] = frozenset()
    """Keys whose value the stack file gives wrongly (only in a spec planned to find the plan's
    own errors beside them): reading one stops the check that reads it, without a second
    error for the same value."""

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.refused:
            raise AlreadyReported(f"{NAMESPACE}:cluster.{key}")
        return self.settings.get(key, default)


class PoolSpec(Struct, frozen=True):
    name: str
    """Pool name (a DNS label)."""
    gpu: GpuModel
    """GPU model of every node."""
    machine_type: str | None
    """GKE machine type, EKS instance type or OKE shape (None for existing nodes)."""
    gpus_per_node: int | None
    """Explicit GPUs per node; otherwise derived from the machine type."""
    nodes: NodeCount
    mig: str | Mapping[str, int]
    """Named config, `{profile: count}`, `P=N,...` string, or `auto`."""
    mig_manager: MigManager
    max_pods: int | None
    spot: bool
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    node_names: tuple[str, ...]
    """Existing clusters: the nodes that form this pool."""
    system_pods: int | None
    """Override of the cloud's system pods per node in the max-pods check."""
    disk_size_gb: int
    zones: tuple[str, ...]
    """GKE node locations / OKE availability domains for this pool (default: the cluster's)."""
    image_id: str | None
    """OKE node image OCID (a GPU image)."""
    boot_disk_type: str | None = None
    """GKE: the nodes' boot disk type (None: the first the machine takes)."""
    user_data: str | None = None
    """EKS: a shell script or cloud-config run after this project's nodeadm parts."""
    nodes_given: bool = True
    """False when `nodes` was left out (allowed with `mig: auto`, which then sizes the pool)."""
    mig_prefer: tuple[Layout, ...] = ()
    """`mig: auto`: the layout each GPU of a node runs now; among the plans with the fewest
    nodes, the one re-partitioning the fewest GPUs wins."""
    rollout: Rollout = Rollout.BLUE_GREEN
    """How a change of layout reaches the pool's nodes."""
    max_unavailable: int = 1
    """In-place re-partitioning: nodes re-partitioned at once."""
    evict_unmanaged_pods: bool = False
    """In-place re-partitioning: GPU pods no controller owns are evicted (deleted for good, as
    `kubectl drain --force` does) instead of stopping the Job."""
    sharing: SharingSpec | None = None
    """Time-slicing or MPS of the pool's devices (whole GPUs or MIG slices)."""
    capacity: Capacity = Capacity.ON_DEMAND
    """How the pool's nodes are bought (`spot: true` is `capacity: spot`)."""
    capacity_key: str = "capacity"
    """The key that chose `capacity`: `spot` when the file says `spot: true` alone."""
    reservation: str | None = None
    """The reservation a `reservation` or `capacity-block` pool consumes (GCP reservation name,
    EC2 Capacity Reservation ID, OCI capacity reservation OCID)."""
    allocation: Allocation = Allocation.DEVICE_PLUGIN
    """How the pool's devices reach pods: the device plugin, or NVIDIA's DRA driver."""

    @property
    def dra(self) -> bool:
        return self.allocation is Allocation.DRA


class GpuOperatorSpec(Struct, frozen=True):
    version: str
    """GPU Operator chart version."""
    namespace: str = "gpu-operator"
    with_reboot: bool = True
    """Reboot the node when a MIG mode change needs it (cloud VMs do)."""
    service_monitor: bool = False
    """Create the DCGM exporter's ServiceMonitor (needs the Prometheus Operator's CRD)."""
    timeout_seconds: int = 1200
    """Helm release timeout for the first install."""
    gate: bool = True
    """Wait for `nvidia.com/mig.config.state=success` on the pools' nodes before services."""
    gate_timeout_seconds: int = 1800


DRA_NAMESPACE = "nvidia-dra-driver-gpu"
"""Where the DRA driver runs when the stack names no namespace."""


class DraSpec(Struct, frozen=True):
    """`mig-inference:dra`: NVIDIA's DRA driver for the pools with `allocation: dra`."""

    kubernetes_minor: int
    """The cluster's Kubernetes minor version (1.<minor>): what the DRA objects are written and
    validated for."""
    extended_resources: bool = False
    """Kubernetes 1.36+: one DeviceClass per MIG profile with `extendedResourceName`, so pods keep
    their `nvidia.com/mig-<profile>` requests instead of claims."""
    dynamic_mig: bool = False
    """The driver's alpha `DynamicMIG`: it creates the slices itself when a claim is prepared
    (the MIG manager leaves DRA pools alone)."""
    namespace: str = DRA_NAMESPACE
    """Where the driver runs (never `default`: the chart refuses it)."""
    version_key: str = "dra.kubernetesVersion"
    """The key the version is read from: `dra.kubernetesVersion`, or the cluster's own version
    key (`cluster.version`, `cluster.kubernetesVersion`) when the section leaves it out."""

    @property
    def kubernetes_version(self) -> str:
        return f"1.{self.kubernetes_minor}"


class MonitoringSpec(Struct, frozen=True):
    prometheus_operator: bool = False
    """Create ServiceMonitor/PodMonitor/PrometheusRule objects and a Grafana dashboard ConfigMap
    (needs the Prometheus Operator's CRDs, e.g. from kube-prometheus-stack)."""
    release_label: str | None = None
    """`release` label on those objects, for a Prometheus that selects by it."""
    prometheus_url: str | None = None
    """Prometheus that queue-based autoscaling (KEDA) queries."""
    prometheus_namespace: str = "monitoring"
    """Namespace of the Prometheus that scrapes the engines: their NetworkPolicy lets it in."""
    pending_minutes: int = 15
    """Alert when a node's MIG config stays `pending` this long."""
    scrape_annotations: bool = False
    """Without the Prometheus Operator: `prometheus.io/*` annotations on the DCGM exporter and
    the engines' pods, for a Prometheus that discovers targets by them."""

    @property
    def scraped(self) -> bool:
        """A Prometheus scrapes the engines (through a PodMonitor or by annotations)."""
        return self.prometheus_operator or self.scrape_annotations


class QueueAutoscaling(Struct, frozen=True):
    """Replicas follow the engine's waiting requests (KEDA, Prometheus trigger)."""

    max_replicas: int
    """At most this many replicas; counted against the pool's capacity."""
    queue_per_replica: int = 4
    """Waiting requests one replica is meant to carry."""


class NetworkClient(Struct, frozen=True):
    """Pods allowed to reach a service: a namespace and/or pod labels."""

    namespace: str | None
    pod_labels: Mapping[str, str]


class ThroughputPoint(Struct, frozen=True):
    """Requests per second one replica serves on one profile, and how that was found."""

    profile: str
    requests_per_second: float
    batch: int | None = None
    latency_ms: float | None = None
    """Latency at that rate (per batch or per request, as the source measured it)."""
    measured: bool = False
    """Measured for this model (a profiling run or the user's benchmark), or assumed."""


class Demand(Struct, frozen=True):
    """A service sized by the load it must serve instead of a replica count."""

    requests_per_second: float
    latency_ms: float | None
    """The latency target: points slower than it are left out."""
    points: tuple[ThroughputPoint, ...]
    """The fastest point per profile that meets the latency target."""
    source: str
    """Where the table came from: the stack file, or the throughput file it names."""

    def rates(self) -> tuple[tuple[str, float], ...]:
        return tuple((p.profile, p.requests_per_second) for p in self.points)

    def point(self, profile: str) -> ThroughputPoint:
        return next(p for p in self.points if p.profile == profile)


class ReplanSpec(Struct, frozen=True):
    """What `mig-inference replan` may set a service to from the load it served (`replan:`): a
    floor and a ceiling, in requests per second for a service sized by demand and in replicas for
    one with a replica count, which may also say what one replica serves (without it, `replan`
    keeps its count)."""

    min_requests_per_second: float | None = None
    max_requests_per_second: float | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    throughput: tuple[ThroughputPoint, ...] = ()
    throughput_source: str = "the stack file"


class ProfilingSpec(Struct, frozen=True):
    """An opt-in profiling run: one Job per candidate profile measures the service's engine."""

    profiles: tuple[str, ...]
    num_prompts: int = 200
    input_tokens: int = 512
    output_tokens: int = 128
    max_concurrency: int | None = None
    """Requests in flight (default: the engine's max-num-seqs, else 16)."""


DEFAULT_VERIFY_PROMPT = "The capital of France is"
"""The prompt of the serving check's short completion."""


class Probe(Struct, frozen=True):
    """A custom engine's serving check: one HTTP request and what its answer must hold."""

    path: str
    method: str = "GET"
    body: str | None = None
    """Sent as is (with `Content-Type: application/json` when it parses as JSON)."""
    status: int = 200
    contains: str | None = None
    """Text the answer's body must contain."""


class ServiceVerify(Struct, frozen=True):
    """`services[].verify`: whether this service is checked, and a custom engine's probe."""

    enabled: bool | None = None
    """None: as the stack's `verify.enabled`."""
    probe: Probe | None = None


class VerifySpec(Struct, frozen=True):
    """`verify`: a Job per service, after its rollout, sends the engine a real request and
    checks the answer; every replica first checks that it sees one device of its profile."""

    enabled: bool
    """Default: on for stacks that create their cluster (ephemeral test clusters)."""
    timeout_seconds: int = 600
    """How long one service's check may wait for its answers (the Service may still warm up)."""
    prompt: str = DEFAULT_VERIFY_PROMPT
    max_tokens: int = 8


class EphemeralSpec(Struct, frozen=True):
    """`ephemeral`: a test stack that `mig-inference ephemeral` brings up, checks and destroys;
    it may live `ttl` and cost at most `max_cost` over that time."""

    ttl: str
    """As written (`2h`)."""
    ttl_minutes: int
    max_cost: float
    """US dollars: the plan's $/hour (every pool at its largest) times the TTL must stay below."""


class ServiceSpec(Struct, frozen=True):
    name: str
    model: str
    engine: Engine
    image: str | None
    """Pinned image; a default exists per engine (see `mig.versions`)."""
    need_mib: float | None
    """Memory need of one replica (from memoryGiB or the model's shape)."""
    shape: ModelShape | None
    """Model shape when given; vLLM's max-model-len is derived from it."""
    profile: str
    """A profile name or `auto`."""
    replicas: int | str
    """A count or `fill`."""
    pool: str | None
    hf_token_secret: str | None
    api_key_secret: str | None
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    """vLLM/TGI share of the device's memory; None: 0.9, or derived on a shared device."""
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    """vLLM's tokens per engine step; None: the tier vLLM picks for the slice's parent GPU
    (`mig_inference.kube.vllm_batch`)."""
    port: int = 8000
    namespace: str = "inference"
    clients: tuple[NetworkClient, ...] = ()
    hpa_max_replicas: int | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    startup_seconds: int | None = None
    """Startup probe budget: how long a replica may take to load its model (None: derived from
    the model's bytes and where it reads them)."""
    health_path: str | None = None
    """HTTP health path (custom engines; the presets know theirs)."""
    queue_autoscaling: QueueAutoscaling | None = None
    """Scale replicas on the engine's queue (vLLM, TGI) instead of a fixed count."""
    demand: Demand | None = None
    """Serve this load: the planner chooses replicas per profile (`replicas` is then 0)."""
    profiling: ProfilingSpec | None = None
    """Measure the engine on these profiles (Jobs next to the service)."""
    revision: str = "main"
    """The model's revision on the hub (a commit hash pins it; a branch is read once)."""
    weights_gib: float | None = None
    """The weights' size on disk, when given (else from params x dtype, or memoryGiB)."""
    verify: ServiceVerify = field(default_factory=ServiceVerify)
    """The serving check of this service."""
    replan: ReplanSpec = field(default_factory=ReplanSpec)
    """The bounds `mig-inference replan` keeps this service within."""

    @property
    def autoscaled_max(self) -> int:
        """The most replicas an autoscaler may run (0 when the count is fixed)."""
        queue = self.queue_autoscaling.max_replicas if self.queue_autoscaling else 0
        return max(self.hpa_max_replicas or 0, queue)

    @property
    def autoscale_key(self) -> str:
        return "queueAutoscaling.maxReplicas" if self.queue_autoscaling else "hpaMaxReplicas"


class StackSpec(Struct, frozen=True):
    stack: str
    cloud: Cloud
    cluster: ClusterSpec
    pools: tuple[PoolSpec, ...]
    gpu_operator: GpuOperatorSpec
    services: tuple[ServiceSpec, ...]
    secret_keys: frozenset[str] = frozenset()
    """Config keys (without namespace) that hold Pulumi secrets."""
    monitoring: MonitoringSpec = field(default_factory=MonitoringSpec)
    warnings: tuple[str, ...] = ()
    """What the stack file's reading is worth a word about (a timestamp, an octal number)."""
    model_cache: ModelCacheSpec | None = None
    """The stack's model cache (None: every replica downloads from the hub)."""
    verify: VerifySpec = field(default_factory=lambda: VerifySpec(enabled=False))
    ephemeral: EphemeralSpec | None = None
    cloud_tags: CloudTags = field(default_factory=CloudTags)
    """What every cloud resource the stack creates carries (`tags`, `definedTags`, `labels`)."""
    dra: DraSpec | None = None
    """NVIDIA's DRA driver (None: no pool has `allocation: dra`)."""
    gateway: GatewaySpec | None = None
    """One address for every model (None: each service only behind its own Service)."""

    def verified(self, service: ServiceSpec) -> bool:
        """Whether the service gets the serving check: its own switch, else the stack's."""
        own = service.verify.enabled
        return self.verify.enabled if own is None else own

    def pool(self, name: str) -> PoolSpec:
        return next(p for p in self.pools if p.name == name)
