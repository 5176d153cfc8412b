"""The stack file as typed Pulumi inputs, for `MigInference` and the components that plan from it.

Each TypedDict mirrors one section of the stack file key for key (snake_case here, camelCase in
the package schema and the stack file), so a program in any language passes what a stack file
holds. Values the planner decides on are plain: layouts, counts, names and regions are checked at
preview. Keys that take several shapes (`mig`, `nodes`, `replicas`) are `Any` to the
schema and checked by the planner, which names the key when it refuses one.

This module must keep its annotations evaluated (no postponed annotations): Pulumi's schema
analyzer reads them at run time.
"""

import typing
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict, cast

import pulumi

from .field_docs import document_fields


class Cluster(TypedDict):
    """The cluster the pools join or, for ephemeral test clusters, create."""

    name: pulumi.Input[str]
    """Cluster name. When joining, it may be an Output of another resource (the cluster your
    program creates): the plan then calls it `joined-cluster`."""
    create: NotRequired[bool]
    """Create the cluster too (ephemeral test clusters); default false: join it."""
    protect: NotRequired[bool]
    """Pulumi `protect` on the cluster and pools, plus the cloud's deletion protection; default
    true."""
    context: NotRequired[str]
    """Reach the Kubernetes API through this context of the ambient kubeconfig file."""
    kubeconfig: NotRequired[str]
    """Reach the Kubernetes API with the kubeconfig held in this entry of `secrets`."""
    project: NotRequired[pulumi.Input[str]]
    """GKE: the project; may be an Output of another resource."""
    location: NotRequired[str]
    """GKE: the cluster's region or zone."""
    network: NotRequired[pulumi.Input[str]]
    """GKE, creating: the VPC network; may be an Output of another resource."""
    subnetwork: NotRequired[pulumi.Input[str]]
    """GKE, creating: the subnetwork; may be an Output of another resource."""
    master_ipv4_cidr_block: NotRequired[str]
    """GKE, creating: the control plane's /28 range."""
    release_channel: NotRequired[str]
    """GKE, creating: the release channel (REGULAR)."""
    cloud_nat: NotRequired[bool]
    """GKE, creating: a Cloud Router and NAT for the private nodes (true)."""
    node_service_account: NotRequired[str]
    """GKE: the GPU nodes' service account email; default: a dedicated one with only the roles
    nodes need; `default`: the Compute Engine default account. A change needs new nodes."""
    workload_identity: NotRequired[bool]
    """GKE: Workload Identity on the GPU pools (GKE_METADATA; true). The cluster must have it
    enabled."""
    authorized_networks: NotRequired[list[str]]
    """GKE, creating (required): the CIDR blocks allowed to the public control-plane
    endpoint."""
    region: NotRequired[str]
    """EKS: the AWS region."""
    subnet_ids: NotRequired[pulumi.Input[Sequence[pulumi.Input[str]]]]
    """EKS: the node groups' subnets; OKE: the node subnet(s). The list, or any of its
    items, may be an Output of another resource."""
    vpc_id: NotRequired[pulumi.Input[str]]
    """EKS, creating: the VPC; may be an Output of another resource."""
    version: NotRequired[str]
    """EKS, creating: the Kubernetes version."""
    node_role_arn: NotRequired[pulumi.Input[str]]
    """EKS: the GPU node groups' IAM role (default: one made with the EKS worker node
    policies); may be an Output."""
    permissions_boundary: NotRequired[pulumi.Input[str]]
    """EKS: the permissions boundary of every IAM role the stack creates; may be an Output."""
    imds_hop_limit: NotRequired[int]
    """EKS: the instance metadata hop limit of GPU nodes (1: pods off the host network cannot
    reach the node's credentials; 2 lets them)."""
    endpoint_public_access: NotRequired[bool]
    """EKS and OKE, creating: a public API endpoint as well (true)."""
    public_access_cidrs: NotRequired[list[str]]
    """EKS, creating: the ranges allowed to the public endpoint (required while it is
    public)."""
    compartment_id: NotRequired[pulumi.Input[str]]
    """OKE: the compartment OCID; may be an Output of another resource."""
    cluster_id: NotRequired[pulumi.Input[str]]
    """OKE, joining: the cluster OCID; may be an Output of another resource."""
    vcn_id: NotRequired[pulumi.Input[str]]
    """OKE, creating: the VCN OCID; may be an Output of another resource."""
    pod_subnet_ids: NotRequired[pulumi.Input[Sequence[pulumi.Input[str]]]]
    """OKE: the pod subnets (VCN-native pod networking); the list or its items may be
    Outputs."""
    endpoint_subnet_id: NotRequired[pulumi.Input[str]]
    """OKE, creating: the API endpoint's subnet; may be an Output of another resource."""
    availability_domains: NotRequired[list[str]]
    """OKE: the availability domains of the node pools."""
    kubernetes_version: NotRequired[str]
    """OKE: the node pools' Kubernetes version (default when joining: the cluster's)."""
    system_image_id: NotRequired[pulumi.Input[str]]
    """OKE, creating: the image of the system node pool; may be an Output."""


class Taint(TypedDict):
    """A node taint, in Kubernetes spelling (translated per cloud)."""

    key: str
    """Taint key."""
    value: NotRequired[str]
    """Taint value (empty by default)."""
    effect: NotRequired[str]
    """NoSchedule (default), PreferNoSchedule or NoExecute."""


class SharingMode(TypedDict):
    """How many pods share one device, and how they see it."""

    replicas: int
    """Pods per device, 2 to 48."""
    rename: NotRequired[bool]
    """Time-slicing: advertise `<resource>.shared` instead of the resource's own name."""
    profiles: NotRequired[list[str]]
    """Time-slicing on MIG: the profiles shared (default: all of the pool's)."""


class Sharing(TypedDict):
    """Sharing without MIG (or on top of it): exactly one strategy."""

    time_slicing: NotRequired[SharingMode]
    """The device plugin advertises each device `replicas` times; no memory isolation."""
    mps: NotRequired[SharingMode]
    """CUDA MPS: `replicas` clients per GPU, each with its share of memory and compute."""


class Pool(TypedDict):
    """A GPU node pool and its MIG layout."""

    name: str
    """DNS label of at most 32 characters; nodes get `mig-inference.io/pool=<name>`."""
    gpu: NotRequired[str]
    """GPU model: a catalog name or alias (h100, nvidia-h100-80gb, NVIDIA-H100-80GB-HBM3...)."""
    machine_type: NotRequired[str]
    """GKE machine type, EKS instance type or OKE shape."""
    gpus_per_node: NotRequired[int]
    """GPUs per node (required for existing nodes and unknown machine types)."""
    nodes: NotRequired[Any]
    """A node count, or {min, max} to autoscale; may be left out with `mig: auto`."""
    mig: NotRequired[Any]
    """A named config (all-balanced, all-1g.10gb...), a layout {profile: count}, or auto."""
    mig_prefer: NotRequired[list[str]]
    """With mig: auto, the layout each GPU of a node runs now (`plan --deployed` prints it):
    among the plans with the fewest nodes, the one re-partitioning the fewest GPUs wins."""
    mig_manager: NotRequired[str]
    """operator (the GPU Operator, mixed strategy; default) or gke (GKE's own partitioning)."""
    max_pods: NotRequired[int]
    """Pods per node; checked against MIG devices, operator pods and the cloud's limits."""
    spot: NotRequired[bool]
    """Spot / preemptible nodes (the same as `capacity: spot`)."""
    capacity: NotRequired[str]
    """How the nodes are bought: on-demand (default), spot, reservation, capacity-block (EKS)
    or flex-start (GKE), as the machine type is sold."""
    reservation: NotRequired[str]
    """The reservation a `reservation` or `capacity-block` pool consumes: a GCP reservation
    name, an EC2 Capacity Reservation ID or an OCI capacity reservation OCID."""
    boot_disk_type: NotRequired[str]
    """GKE: the nodes' boot disk type (default: the first the machine takes)."""
    user_data: NotRequired[str]
    """EKS: a shell script or cloud-config run after the project's nodeadm parts."""
    allocation: NotRequired[str]
    """How the pool's devices reach pods: `device-plugin` (default) or `dra` (NVIDIA's DRA
    driver; needs `dra`)."""
    labels: NotRequired[dict[str, str]]
    """Extra node labels."""
    taints: NotRequired[list[Taint]]
    """Node taints."""
    node_names: NotRequired[list[str]]
    """Existing clusters: the nodes of this pool."""
    system_pods: NotRequired[int]
    """Override of the cloud's system pods per node, counted against max pods."""
    disk_size_gb: NotRequired[int]
    """Boot disk size."""
    zones: NotRequired[list[str]]
    """GKE node zones (of the cluster's region) or OKE availability domains."""
    image_id: NotRequired[str]
    """OKE: the GPU node image."""
    rollout: NotRequired[str]
    """How a layout change reaches running nodes: blue-green (new pool) or in-place."""
    max_unavailable: NotRequired[int]
    """In-place rollout: nodes re-partitioned at a time (1)."""
    evict_unmanaged_pods: NotRequired[bool]
    """In-place rollout: the re-partitioning Job may evict GPU pods no controller owns (deleted
    for good); without it, such a pod stops the Job before any change (false)."""
    sharing: NotRequired[Sharing]
    """Time-slicing or MPS on the pool's devices."""


class GpuOperatorSettings(TypedDict):
    """The NVIDIA GPU Operator release."""

    version: NotRequired[str]
    """Chart version (default: the version this package pins and tests)."""
    namespace: NotRequired[str]
    """Namespace of the operator (gpu-operator)."""
    with_reboot: NotRequired[bool]
    """Let the MIG manager reboot a node when a GPU needs it (true on cloud pools)."""
    service_monitor: NotRequired[bool]
    """DCGM exporter ServiceMonitor (needs the Prometheus Operator's CRD)."""
    timeout_seconds: NotRequired[int]
    """Helm release timeout (1200)."""
    gate: NotRequired[bool]
    """Wait until every pool's MIG config reports success before services roll out (true)."""
    gate_timeout_seconds: NotRequired[int]
    """How long that wait may take (1800)."""


class MonitoringSettings(TypedDict):
    """Per-slice monitoring and the Prometheus that queue autoscaling reads."""

    prometheus_operator: NotRequired[bool]
    """Create ServiceMonitor, PodMonitors, PrometheusRule and a Grafana dashboard."""
    release_label: NotRequired[str]
    """The `release` label your Prometheus selects its monitors and rules by."""
    prometheus_url: NotRequired[str]
    """Prometheus URL KEDA queries for queue autoscaling."""
    prometheus_namespace: NotRequired[str]
    """Where Prometheus and Grafana run (monitoring)."""
    pending_minutes: NotRequired[int]
    """How long a pod may wait for a slice before the alert fires (15)."""


class NetworkClient(TypedDict):
    """Pods allowed to reach a service."""

    namespace: NotRequired[str]
    """Their namespace."""
    pod_labels: NotRequired[dict[str, str]]
    """Their labels."""


class QueueAutoscaling(TypedDict):
    """Replicas that follow the engine's queue (KEDA)."""

    max_replicas: int
    """The most replicas (counted against the pool's capacity)."""
    queue_per_replica: NotRequired[int]
    """Running plus waiting requests one replica takes before another is added."""


class ThroughputPoint(TypedDict):
    """What one replica serves on one profile."""

    profile: str
    """MIG profile, e.g. 1g.10gb."""
    requests_per_second: float
    """Requests per second one replica serves there."""
    batch: NotRequired[int]
    """Batch size of the measurement."""
    latency_ms: NotRequired[float]
    """Latency at that rate; points slower than the service's latencyMs are left out."""
    measured: NotRequired[bool]
    """Measured for this model (true) or assumed (false, the default)."""


class Profiling(TypedDict):
    """An opt-in profiling run: a Job per profile measures the engine with vLLM's benchmark."""

    profiles: list[str]
    """The profiles to measure (slices of the service's pool)."""
    num_prompts: NotRequired[int]
    """Requests the benchmark sends (200)."""
    input_tokens: NotRequired[int]
    """Prompt length of each request (512)."""
    output_tokens: NotRequired[int]
    """Tokens generated per request (128)."""
    max_concurrency: NotRequired[int]
    """Requests in flight (default: the engine's max-num-seqs, else 16)."""


class ServiceVerifySettings(TypedDict):
    """This service's serving check: a switch, and for a custom engine the request to send."""

    enabled: NotRequired[bool]
    """Check this service (default: the stack's `verify.enabled`)."""
    path: NotRequired[str]
    """Custom engines: the path of the request the check sends."""
    method: NotRequired[str]
    """Custom engines: GET (default) or POST."""
    body: NotRequired[str]
    """Custom engines: the POST body (sent as JSON when it parses as JSON)."""
    status: NotRequired[int]
    """Custom engines: the status the answer must have (200)."""
    contains: NotRequired[str]
    """Custom engines: text the answer's body must contain."""


class ReplanSettings(TypedDict):
    """The bounds `mig-inference replan` keeps the service within when it re-plans it from the
    load Prometheus observed."""

    min_requests_per_second: NotRequired[float]
    """A service sized by demand: the least requestsPerSecond replan sets."""
    max_requests_per_second: NotRequired[float]
    """A service sized by demand: the most requestsPerSecond replan sets."""
    min_replicas: NotRequired[int]
    """A service with a replica count: the fewest replicas replan sets."""
    max_replicas: NotRequired[int]
    """A service with a replica count: the most replicas replan sets."""
    throughput: NotRequired[list[ThroughputPoint]]
    """A service with a replica count: what one replica serves per profile (without it, or a
    throughput file, replan keeps the count)."""
    throughput_file: NotRequired[str]
    """A YAML file holding `throughput:` instead."""


class Service(TypedDict):
    """An inference service on MIG slices (or shared or whole GPUs)."""

    name: str
    """DNS label."""
    model: str
    """Hugging Face model id (Triton: a model repository)."""
    engine: NotRequired[str]
    """vllm (default), tgi, triton or custom."""
    image: NotRequired[str]
    """Container image (default: the engine's pinned image)."""
    memory_gi_b: NotRequired[float]
    """Memory one replica needs; or give params and dtype."""
    params: NotRequired[float]
    """Model parameters, in billions (8, 1.5); with dtype instead of memoryGiB."""
    dtype: NotRequired[str]
    """Weight type (bf16, fp8, int4...)."""
    layers: NotRequired[int]
    """Transformer layers (with kvHeads and headDim: the KV cache is sized exactly)."""
    kv_heads: NotRequired[int]
    """KV heads."""
    head_dim: NotRequired[int]
    """Head dimension."""
    context: NotRequired[int]
    """Tokens of context per sequence."""
    concurrency: NotRequired[int]
    """Sequences served at once."""
    overhead: NotRequired[float]
    """Extra GiB per replica (CUDA context, activations)."""
    profile: NotRequired[str]
    """auto (the smallest offered slice that holds the model) or a profile name."""
    replicas: NotRequired[Any]
    """A count, or fill (every slice of that kind left on the pool)."""
    pool: NotRequired[str]
    """The pool to run on (needed when several could serve)."""
    hf_token_secret: NotRequired[str]
    """The entry of `secrets` holding the Hugging Face token."""
    api_key_secret: NotRequired[str]
    """The entry of `secrets` holding the API key clients must send."""
    tensor_parallel_size: NotRequired[int]
    """Must be 1 on MIG: NCCL cannot span MIG devices."""
    gpu_memory_utilization: NotRequired[float]
    """vLLM's share of the slice's memory."""
    max_model_len: NotRequired[int]
    """Longest sequence (derived from the model's shape when given)."""
    max_num_seqs: NotRequired[int]
    """Most sequences at once (derived from the model's shape when given)."""
    max_num_batched_tokens: NotRequired[int]
    """vLLM's tokens per engine step (default: the budget vLLM picks for the slice's parent GPU,
    capped at sequences x context)."""
    port: NotRequired[int]
    """Container and Service port."""
    namespace: NotRequired[str]
    """Namespace of the service."""
    clients: NotRequired[list[NetworkClient]]
    """Who may connect (NetworkPolicy); default: the service's own namespace."""
    hpa_max_replicas: NotRequired[int]
    """CPU-based HPA up to this many replicas (counted against capacity)."""
    command: NotRequired[list[str]]
    """Container command (custom engines)."""
    args: NotRequired[list[str]]
    """Extra container arguments."""
    startup_seconds: NotRequired[int]
    """Startup probe budget (3600)."""
    health_path: NotRequired[str]
    """Health endpoint path."""
    queue_autoscaling: NotRequired[QueueAutoscaling]
    """Replicas that follow the engine's load (needs monitoring.prometheusUrl)."""
    requests_per_second: NotRequired[float]
    """Demand to serve instead of a replica count: the planner chooses replicas per profile
    (one Deployment each, behind one Service)."""
    latency_ms: NotRequired[float]
    """Latency target for the demand: throughput points slower than it are left out."""
    throughput: NotRequired[list[ThroughputPoint]]
    """Requests per second one replica serves per profile (with requestsPerSecond)."""
    throughput_file: NotRequired[str]
    """A YAML file holding `throughput:` instead (e.g. from a profiling run)."""
    profiling: NotRequired[Profiling]
    """Measure the engine on candidate profiles (Jobs; `mig-inference throughput` reads
    their logs into a throughput file)."""
    revision: NotRequired[str]
    """The model's revision on the hub (main); a commit hash pins what the cache holds."""
    weights_gi_b: NotRequired[float]
    """The weights' size on disk, for the load estimate and the cache (default: params x
    dtype, else memoryGiB)."""
    verify: NotRequired[ServiceVerifySettings]
    """This service's serving check (on with the stack's `verify`)."""
    replan: NotRequired[ReplanSettings]
    """The bounds `mig-inference replan` keeps this service within."""


class ModelCache(TypedDict):
    """A model cache per stack: filled once per model revision, read by every replica."""

    enabled: NotRequired[bool]
    """false keeps the settings and turns the cache off (true)."""
    storage: NotRequired[str]
    """gke: hyperdisk-ml (default) or gcs-fuse; eks: s3-mountpoint (default) or fsx-lustre;
    oke: file-storage; any cloud: storage-class (the only one on existing)."""
    storage_class: NotRequired[str]
    """storage-class: a ReadWriteMany StorageClass of yours."""
    bucket: NotRequired[str]
    """gcs-fuse, s3-mountpoint: an existing bucket (default: the stack creates one)."""
    size_gi_b: NotRequired[int]
    """The volume's size (default: the models' bytes with headroom)."""
    throughput_mi_bps: NotRequired[int]
    """hyperdisk-ml: provisioned MiB/s (2400); fsx-lustre: MB/s per TiB (250)."""
    security_group_ids: NotRequired[list[str]]
    """fsx-lustre: the file system's security groups (required)."""
    mount_target_subnet_id: NotRequired[str]
    """file-storage: the mount target's subnet (default: the cluster's first subnet)."""
    stream: NotRequired[bool]
    """gcs-fuse, s3-mountpoint: vLLM streams the weights from the bucket (Run:ai Model
    Streamer)."""
    read_m_bps: NotRequired[float]
    """Your measured read rate of the cache per node, MB/s (for the estimate)."""
    hub_m_bps: NotRequired[float]
    """Your measured download rate from the hub per node, MB/s (for the estimate)."""


class VerifySettings(TypedDict):
    """The serving check: after its rollout, a Job per service sends the engine a real request
    and checks the answer; every replica first checks it sees one device of its profile."""

    enabled: NotRequired[bool]
    """Check every service (default: true when the stack creates its cluster)."""
    timeout_seconds: NotRequired[int]
    """How long one service's check may wait for its answers (600)."""
    prompt: NotRequired[str]
    """The prompt of the short completion sent to vLLM and TGI."""
    max_tokens: NotRequired[int]
    """Tokens that completion asks for (8)."""


class DraSettings(TypedDict):
    """NVIDIA's DRA driver, for pools with `allocation: dra`."""

    kubernetes_version: NotRequired[str]
    """The cluster's Kubernetes minor version, 1.34 to 1.37 (EKS and OKE: the cluster's
    version when the stack creates it)."""
    extended_resources: NotRequired[bool]
    """Kubernetes 1.36+: a DeviceClass per MIG profile maps `nvidia.com/mig-<profile>`, so pods
    keep their extended-resource requests (default false: ResourceClaimTemplates)."""
    dynamic_mig: NotRequired[bool]
    """The driver's alpha DynamicMIG (Kubernetes 1.36+; default false)."""
    namespace: NotRequired[str]
    """The driver's namespace (default nvidia-dra-driver-gpu; never `default`)."""


class EphemeralSettings(TypedDict):
    """An ephemeral test stack: `mig-inference ephemeral up` refuses it above its budget, tags
    it with its expiry, and `ephemeral destroy --expired` removes it after that."""

    ttl: NotRequired[str]
    """How long it may live (`2h`, `90m`, `1d`; default 2h)."""
    max_cost: float
    """US dollars it may cost over its TTL, every pool at its largest."""


class EndpointPicker(TypedDict):
    """What each endpoint picker (one per InferencePool) requests."""

    cpu: NotRequired[float]
    """CPUs (4, the chart's)."""
    memory_gi_b: NotRequired[float]
    """Memory in GiB (8); the limit is twice that."""


class GatewayCertManager(TypedDict):
    """The cert-manager issuer that issues the listener's certificate."""

    issuer: str
    """The issuer's name."""
    kind: NotRequired[str]
    """ClusterIssuer (default) or Issuer (in the gateway's namespace)."""


class GatewayTls(TypedDict):
    """The HTTPS listener's certificate: one of secret, certManager or gcpCertificates."""

    hostname: NotRequired[str]
    """The name clients call the gateway by (the listener's and the certificate's)."""
    secret: NotRequired[str]
    """A `kubernetes.io/tls` Secret made in the gateway's namespace."""
    cert_manager: NotRequired[GatewayCertManager]
    """A certificate cert-manager issues for the hostname."""
    gcp_certificates: NotRequired[list[str]]
    """Certificate Manager certificates (GKE's gateway)."""


class GatewaySettings(TypedDict):
    """One address for every vLLM service, routed by the request's model (the Gateway API
    Inference Extension)."""

    enabled: NotRequired[bool]
    """False keeps the section without a gateway (true)."""
    address: NotRequired[str]
    """internal (default: GKE's gke-l7-rilb, elsewhere a ClusterIP Service) or external."""
    namespace: NotRequired[str]
    """The Gateway's namespace, with the body-based router (inference-gateway)."""
    port: NotRequired[int]
    """The HTTP listener's port (80)."""
    install: NotRequired[bool]
    """EKS, OKE, existing: install Istio and the Gateway API and InferencePool CRDs (true)."""
    proxy_subnet: NotRequired[str]
    """GKE (required): the range of the region's proxy-only subnet."""
    endpoint_picker: NotRequired[EndpointPicker]
    """What each endpoint picker requests."""
    tls: NotRequired[GatewayTls]
    """HTTPS for the listener (required for an external gateway)."""
    load_balancer_subnet_id: NotRequired[str]
    """OKE: the subnet of an external gateway's load balancer (required on a created cluster)."""


class Stack(TypedDict):
    """Everything one stack file holds: cloud, cluster, pools, GPU Operator, services."""

    cloud: str
    """gke, eks, oke or existing."""
    cluster: Cluster
    """The cluster the pools join or create."""
    pools: list[Pool]
    """GPU node pools with their MIG layouts."""
    gpu_operator: NotRequired[GpuOperatorSettings]
    """The GPU Operator release."""
    services: NotRequired[list[Service]]
    """Inference services."""
    monitoring: NotRequired[MonitoringSettings]
    """Per-slice monitoring."""
    model_cache: NotRequired[ModelCache]
    """The model cache (default: every replica downloads from the hub)."""
    verify: NotRequired[VerifySettings]
    """The serving check after the rollout."""
    ephemeral: NotRequired[EphemeralSettings]
    """The budget and lifetime of an ephemeral test stack."""
    dra: NotRequired[DraSettings]
    """NVIDIA's DRA driver, for pools with `allocation: dra`."""
    gateway: NotRequired[GatewaySettings]
    """One address for every model (default: none)."""
    tags: NotRequired[dict[str, str]]
    """EKS and OKE: tags on every cloud resource the stack creates that takes tags (AWS tags, OCI
    freeform tags), beside the provider's default tags."""
    defined_tags: NotRequired[dict[str, str]]
    """OKE: OCI defined tags (`<namespace>.<key>`) on every cloud resource that takes them."""
    labels: NotRequired[dict[str, str]]
    """GKE: Google Cloud resource labels on every cloud resource that takes them (not Kubernetes
    labels), beside the provider's default labels."""
    secrets: NotRequired[dict[str, pulumi.Input[str]]]
    """Secret values the stack names (hfTokenSecret, apiKeySecret, cluster.kubeconfig), each
    kept a Pulumi secret."""
    stack_name: NotRequired[str]
    """Name in cluster-scoped objects (default: the Pulumi stack's name)."""


NOT_STACK_FILE_KEYS = ("secrets", "stack_name")
"""Stack fields that are not keys of the stack file."""
CLUSTER_REFERENCES = {"name": "joined-cluster", "cluster_id": "ocid1.cluster.oc1..joined"}
"""Cluster references that may be Outputs of other resources, and what the plan reads for one:
the planner decides nothing from them, it only checks they are given."""
PASSED_THROUGH: dict[str, dict[str, str]] = {
    "gke": {"project": "from-another-resource", "network": "from-another-resource",
            "subnetwork": "from-another-resource"},
    "eks": {"subnet_ids": "subnet-00000000", "vpc_id": "vpc-00000000",
            "node_role_arn": "arn:aws:iam::000000000000:role/from-another-resource",
            "permissions_boundary": "arn:aws:iam::000000000000:policy/from-another-resource"},
    "oke": {"compartment_id": "ocid1.compartment.oc1..fromanotherresource",
            "vcn_id": "ocid1.vcn.oc1..fromanotherresource",
            "subnet_ids": "ocid1.subnet.oc1..fromanotherresource",
            "pod_subnet_ids": "ocid1.subnet.oc1..fromanotherresource",
            "endpoint_subnet_id": "ocid1.subnet.oc1..fromanotherresource",
            "system_image_id": "ocid1.image.oc1..fromanotherresource"},
}  # fmt: skip
"""Per cloud, the cluster fields only handed to cloud resources, which may therefore be Outputs
of the caller's resources (a list field: the list or any item), and the value the plan reads
for an Output: one of the right format. Location, region and availability domains stay plain:
the planner places the pools' zones and capacity by them."""
LIST_FIELDS = ("subnet_ids", "pod_subnet_ids")


def stack_key(field: str) -> str:
    """The stack-file key of a typed field, `machine_type` -> `machineType`: the camelCase
    Pulumi's schema gives it too (hence `memory_gi_b` for `memoryGiB`)."""
    head, *rest = field.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _unwrapped(hint: Any) -> Any:
    while typing.get_origin(hint) in (NotRequired, typing.Required):
        hint = typing.get_args(hint)[0]
    return hint


def _typed_dict(hint: Any) -> Any:
    """The TypedDict a field holds, or None."""
    hint = _unwrapped(hint)
    return hint if typing.is_typeddict(hint) else None


def _whole_numbers(value: Any) -> Any:
    """Whole floats as ints: every number reaches a component provider as a float (the SDK's
    host converts integer properties, then stores the float it was given)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _convert_value(value: Any, hint: Any, to_stack: bool) -> Any:
    hint = _unwrapped(hint)
    typed = _typed_dict(hint)
    if typed is not None:
        return _convert(value, typed, to_stack)
    if typing.get_origin(hint) is list and isinstance(value, list):
        return [_convert_value(item, typing.get_args(hint)[0], to_stack) for item in value]
    return value


def _convert(value: Any, typed: Any, to_stack: bool) -> Any:
    """`value` with the field names of `typed` renamed, recursively: to stack-file keys when
    `to_stack`, else to field names. Keys `typed` does not have are kept for the planner to
    refuse by name."""
    if not isinstance(value, dict):
        return value  # the planner names the key and says what it expects
    hints: dict[str, Any] = dict(typed.__annotations__)
    fields = {stack_key(name): name for name in hints}
    converted: dict[str, Any] = {}
    for key, item in value.items():
        field = key if to_stack else fields.get(key, key)
        if field not in hints:
            converted[key] = item
            continue
        converted[stack_key(field) if to_stack else field] = _convert_value(
            item, hints[field], to_stack
        )
    return converted


def stack_values_of(args: Stack) -> dict[str, Any]:
    """The stack-file form of typed args (camelCase keys), without secrets and stack name."""
    plain: dict[str, Any] = {k: v for k, v in args.items() if k not in NOT_STACK_FILE_KEYS}
    cluster = plain.get("cluster")
    if isinstance(cluster, dict):
        passed = {**CLUSTER_REFERENCES, **PASSED_THROUGH.get(str(args.get("cloud")), {})}
        plain["cluster"] = {
            key: _planned_form(value, passed[key], key in LIST_FIELDS) if key in passed else value
            for key, value in cluster.items()
        }
    return _whole_numbers(_convert(plain, Stack, to_stack=True))  # type: ignore[no-any-return]


def is_output(value: Any) -> bool:
    """An Output or an awaitable: a value known only once other resources exist."""
    return isinstance(value, pulumi.Output) or hasattr(value, "__await__")


def _planned_form(value: Any, placeholder: str, is_list: bool) -> Any:
    """What the planner reads for a passed-through value: Outputs replaced by `placeholder`
    (a list that is an Output as a list of one)."""
    if is_output(value):
        return [placeholder] if is_list else placeholder
    if isinstance(value, list):
        return [placeholder if is_output(item) else item for item in value]
    return value


def cluster_reference(args: Stack, field: str) -> pulumi.Input[str] | None:
    """A cluster reference as given (an Output stays an Output), or None when not given."""
    value: pulumi.Input[str] | None = args["cluster"].get(field)  # type: ignore[assignment]
    return value


def nth(items: pulumi.Input[Sequence[pulumi.Input[str]]], index: int) -> pulumi.Input[str]:
    """Item `index` (modulo the length) of a list that may be, or hold, Outputs."""
    if isinstance(items, list | tuple):
        item: pulumi.Input[str] = items[index % len(items)]
        return item
    whole: pulumi.Output[Any] = pulumi.Output.from_input(cast(Any, items))
    return whole.apply(lambda found: str(found[index % len(found)]))


def cluster_input(args: Stack, field: str, planned: Any) -> Any:
    """A cluster field as the caller gave it (Outputs stay Outputs) for a cloud resource, or
    the planned value (with its defaults) when not given."""
    given = args["cluster"].get(field)
    return planned if given is None else given


def stack_args(values: dict[str, Any]) -> Stack:
    """Typed args from a stack file's values (the inverse of `stack_values_of`)."""
    return _convert(values, Stack, to_stack=False)  # type: ignore[no-any-return]


document_fields(globals())
