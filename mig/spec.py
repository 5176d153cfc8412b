"""The stack configuration contract: parse and validate a stack's config into typed objects.

Input is the `config:` mapping of `stacks/Pulumi.<stack>.yaml` (keys `mig-inference:<key>`), or
the same values read through `pulumi.Config`. Every default lives here. Errors name the key path,
the bad value and what is allowed, e.g. `mig-inference:pools[0].maxPods: ...`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from mig.catalog import GpuModel, resolve_gpu
from mig.clouds import K8S_TAINT_EFFECTS, Cloud
from mig.errors import MigError
from mig.sizing import BYTES_PER_PARAM, DEFAULT_OVERHEAD, ModelShape, gib_to_mib

NAMESPACE = "mig-inference"
TOP_KEYS = ("cloud", "cluster", "pools", "gpuOperator", "services")
SECRET_MARKER = "secure"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class MigManager(StrEnum):
    OPERATOR = "operator"
    """The GPU Operator's MIG manager and the `mixed` strategy (any layout)."""
    GKE = "gke"
    """GKE's native `gpu_partition_size`: one profile per GPU, advertised as `nvidia.com/gpu`."""


class Engine(StrEnum):
    VLLM = "vllm"
    TRITON = "triton"
    TGI = "tgi"
    CUSTOM = "custom"


AUTO = "auto"
FILL = "fill"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str
    """Kubernetes spelling: NoSchedule, PreferNoSchedule or NoExecute."""


@dataclass(frozen=True)
class NodeCount:
    """Fixed (`min == max`) or autoscaling node count."""

    min: int
    max: int

    @property
    def fixed(self) -> bool:
        return self.min == self.max


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    """Cluster name."""
    create: bool = False
    """Create the cluster too (ephemeral test clusters)."""
    protect: bool = True
    """Protect the cluster and pools from accidental deletion."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Cloud-specific keys (project, location, region, subnetIds, compartmentId, ...)."""

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


@dataclass(frozen=True)
class PoolSpec:
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
    nodes_given: bool = True
    """False when `nodes` was left out (allowed with `mig: auto`, which then sizes the pool)."""


@dataclass(frozen=True)
class GpuOperatorSpec:
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


@dataclass(frozen=True)
class NetworkClient:
    """Pods allowed to reach a service: a namespace and/or pod labels."""

    namespace: str | None
    pod_labels: Mapping[str, str]


@dataclass(frozen=True)
class ServiceSpec:
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
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    port: int = 8000
    namespace: str = "inference"
    clients: tuple[NetworkClient, ...] = ()
    hpa_max_replicas: int | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    startup_seconds: int = 3600
    """Startup probe budget: how long a replica may take to load its model."""
    health_path: str | None = None
    """HTTP health path (custom engines; the presets know theirs)."""


@dataclass(frozen=True)
class StackSpec:
    stack: str
    cloud: Cloud
    cluster: ClusterSpec
    pools: tuple[PoolSpec, ...]
    gpu_operator: GpuOperatorSpec
    services: tuple[ServiceSpec, ...]
    secret_keys: frozenset[str] = frozenset()
    """Config keys (without namespace) that hold Pulumi secrets."""

    def pool(self, name: str) -> PoolSpec:
        return next(p for p in self.pools if p.name == name)


# --- reading -------------------------------------------------------------------------------


class _Node:
    """A value at a key path, with typed accessors that raise MigError naming the path."""

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path

    def child(self, key: str | int) -> _Node:
        if isinstance(key, int):
            return _Node(self.value[key], f"{self.path}[{key}]")
        return _Node(
            self.value.get(key) if isinstance(self.value, dict) else None, f"{self.path}.{key}"
        )

    def error(self, message: str) -> MigError:
        return MigError(message, self.path)

    def mapping(self, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise self.error(
                f"must be a mapping with keys {', '.join(allowed)}; got {self.value!r}"
            )
        for key in self.value:
            if key not in allowed:
                raise MigError(
                    f"unknown key {key!r}; allowed: {', '.join(allowed)}", f"{self.path}.{key}"
                )
        return self.value

    def items(self) -> Iterator[_Node]:
        if self.value is None:
            return
        if not isinstance(self.value, list):
            raise self.error(f"must be a list, got {self.value!r}")
        for index in range(len(self.value)):
            yield self.child(index)

    def string(self, default: str | None = None, required: bool = False) -> str | None:
        if self.value is None:
            if required:
                raise self.error("is required")
            return default
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.error(f"must be a non-empty string, got {self.value!r}")
        return self.value.strip()

    def req_string(self) -> str:
        value = self.string(required=True)
        assert value is not None
        return value

    def boolean(self, default: bool) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.error(f"must be true or false, got {self.value!r}")
        return self.value

    def integer(
        self, default: int | None = None, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.error(f"must be a whole number, got {self.value!r}")
        if minimum is not None and self.value < minimum:
            raise self.error(f"must be >= {minimum}, got {self.value}")
        if maximum is not None and self.value > maximum:
            raise self.error(f"must be <= {maximum}, got {self.value}")
        return self.value

    def number(self, default: float | None = None, minimum: float | None = None) -> float | None:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.error(f"must be a number, got {self.value!r}")
        if minimum is not None and self.value <= minimum:
            raise self.error(f"must be > {minimum}, got {self.value}")
        return float(self.value)

    def strings(self) -> tuple[str, ...]:
        return tuple(item.req_string() for item in self.items())

    def choice(self, enum: type[Enum], default: Enum) -> Any:
        if self.value is None:
            return default
        allowed = [str(e.value) for e in enum]
        if self.value not in allowed:
            raise self.error(f"{self.value!r} is not allowed; allowed: {', '.join(allowed)}")
        return enum(self.value)

    def labels(self) -> dict[str, str]:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.error(f"must be a mapping of label keys to values, got {self.value!r}")
        result = {}
        for key, value in self.value.items():
            where = self.child(str(key))
            if not isinstance(key, str) or not _LABEL_KEY.match(key) or len(key) > 316:
                raise where.error(f"{key!r} is not a valid Kubernetes label key")
            if not isinstance(value, str) or not _LABEL_VALUE.match(value) or len(value) > 63:
                raise where.error(
                    f"{value!r} is not a valid label value (a string of at most 63 letters, "
                    "digits, '-', '_' or '.', starting and ending alphanumeric)"
                )
            result[key] = value
        return result


def _dns_label(node: _Node) -> str:
    value = node.req_string()
    if not _DNS_LABEL.match(value) or len(value) > 40:
        raise node.error(
            f"{value!r} must be a lowercase DNS label (letters, digits, '-'; at most 40 characters)"
        )
    return value


# --- sections ------------------------------------------------------------------------------

CLUSTER_KEYS: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location", "network", "subnetwork", "masterIpv4CidrBlock",
                "releaseChannel"),
    Cloud.EKS: ("region", "subnetIds", "vpcId", "version", "endpointPublicAccess"),
    Cloud.OKE: ("compartmentId", "clusterId", "vcnId", "subnetIds", "podSubnetIds",
                "endpointSubnetId", "availabilityDomains", "kubernetesVersion", "systemImageId"),
    Cloud.EXISTING: ("kubeconfig", "context"),
}  # fmt: skip
CLUSTER_REQUIRED: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("project", "location"),
    Cloud.EKS: ("region", "subnetIds"),
    Cloud.OKE: ("compartmentId", "subnetIds", "availabilityDomains"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_CREATING: dict[Cloud, tuple[str, ...]] = {
    Cloud.GKE: ("network", "subnetwork"),
    Cloud.EKS: ("vpcId", "version"),
    Cloud.OKE: ("vcnId", "endpointSubnetId", "podSubnetIds", "kubernetesVersion", "systemImageId"),
    Cloud.EXISTING: (),
}
CLUSTER_REQUIRED_WHEN_EXISTING: dict[Cloud, tuple[str, ...]] = {
    Cloud.OKE: ("clusterId", "kubernetesVersion"),
}


def _cluster(node: _Node, cloud: Cloud, secret_keys: frozenset[str]) -> ClusterSpec:
    base = ("name", "create", "protect")
    raw = node.mapping(base + CLUSTER_KEYS[cloud])
    create = node.child("create").boolean(False)
    if create and cloud is Cloud.EXISTING:
        raise node.child("create").error(
            "an `existing` cluster cannot be created; pick gke, eks or oke"
        )
    required = CLUSTER_REQUIRED[cloud] + (
        CLUSTER_REQUIRED_WHEN_CREATING[cloud]
        if create
        else CLUSTER_REQUIRED_WHEN_EXISTING.get(cloud, ())
    )
    for key in required:
        if raw.get(key) in (None, "", []):
            when = " when create is true" if key in CLUSTER_REQUIRED_WHEN_CREATING[cloud] else ""
            raise node.child(key).error(f"is required for cloud {cloud.value}{when}")
    settings: dict[str, Any] = {}
    for key in CLUSTER_KEYS[cloud]:
        child = node.child(key)
        if key in ("subnetIds", "podSubnetIds", "availabilityDomains"):
            settings[key] = child.strings()
        elif key == "endpointPublicAccess":
            settings[key] = child.boolean(False)
        elif key == "kubeconfig":
            # The name of a secret config key holding the kubeconfig, never the kubeconfig itself.
            name = child.string()
            if name is not None and name not in secret_keys:
                raise child.error(
                    f"must name a secret config key (`pulumi config set --secret {name} ...`); "
                    f"{name!r} is not a secret key of this stack"
                )
            settings[key] = name
        else:
            settings[key] = child.string()
    return ClusterSpec(
        name=_dns_label(node.child("name")),
        create=create,
        protect=node.child("protect").boolean(True),
        settings=settings,
    )


POOL_KEYS = ("name", "gpu", "machineType", "gpusPerNode", "nodes", "mig", "migManager", "maxPods",
             "spot", "labels", "taints", "nodeNames", "systemPods", "diskSizeGb", "zones",
             "imageId")  # fmt: skip


def _nodes(node: _Node) -> NodeCount:
    if isinstance(node.value, dict):
        node.mapping(("min", "max"))
        low = node.child("min").integer(0, minimum=0)
        high = node.child("max").integer(minimum=1)
        if high is None:
            raise node.child("max").error("is required for an autoscaling pool")
        assert low is not None
        if low > high:
            raise node.error(f"min {low} is above max {high}")
        return NodeCount(low, high)
    count = node.integer(minimum=0)
    if count is None:
        raise node.error("is required: a node count or {min, max}")
    return NodeCount(count, count)


def _taints(node: _Node) -> tuple[Taint, ...]:
    taints = []
    for item in node.items():
        item.mapping(("key", "value", "effect"))
        effect = item.child("effect").string("NoSchedule")
        if effect not in K8S_TAINT_EFFECTS:
            raise item.child("effect").error(
                f"{effect!r} is not a taint effect; allowed: {', '.join(K8S_TAINT_EFFECTS)} "
                "(Kubernetes spelling; translated per cloud)"
            )
        key = item.child("key").req_string()
        if not _LABEL_KEY.match(key):
            raise item.child("key").error(f"{key!r} is not a valid taint key")
        value = item.child("value").string("") or ""
        if value and not _LABEL_VALUE.match(value):
            raise item.child("value").error(f"{value!r} is not a valid taint value")
        assert effect is not None
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def _mig(node: _Node) -> str | Mapping[str, int]:
    value = node.value
    if value is None:
        return "all-disabled"
    if isinstance(value, dict):
        for key, count in value.items():
            if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
                raise node.child(str(key)).error(f"must be a count > 0, got {count!r}")
        return {str(k): int(v) for k, v in value.items()}
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise node.error(
        f"must be a named config (all-balanced, all-1g.10gb...), {{profile: count}} or auto; "
        f"got {value!r}"
    )


def _pool(node: _Node, cloud: Cloud) -> PoolSpec:
    raw = node.mapping(POOL_KEYS)
    name = _dns_label(node.child("name"))
    try:
        gpu = resolve_gpu(node.child("gpu").req_string())
    except MigError as error:
        raise error.at(node.child("gpu").path) if error.path is None else error from None
    machine = node.child("machineType").string()
    if cloud is not Cloud.EXISTING and machine is None:
        raise node.child("machineType").error(f"is required for cloud {cloud.value}")
    node_names = node.child("nodeNames").strings()
    if cloud is Cloud.EXISTING:
        if not node_names:
            raise node.child("nodeNames").error(
                "is required for an existing cluster: the nodes of this pool"
            )
    elif node_names:
        raise node.child("nodeNames").error("is only for cloud `existing`; cloud pools are created")
    mig_manager = node.child("migManager").choice(MigManager, MigManager.OPERATOR)
    if mig_manager is MigManager.GKE and cloud is not Cloud.GKE:
        raise node.child("migManager").error(f"`gke` is GKE's native MIG; cloud is {cloud.value}")
    nodes_given = raw.get("nodes") is not None
    mig = _mig(node.child("mig"))
    if cloud is Cloud.EXISTING:
        nodes = NodeCount(len(node_names), len(node_names))
        if nodes_given and _nodes(node.child("nodes")) != nodes:
            raise node.child("nodes").error(
                f"must equal the {len(node_names)} nodeNames (or be left out)"
            )
    elif nodes_given:
        nodes = _nodes(node.child("nodes"))
    elif mig == AUTO:
        nodes = NodeCount(0, 0)  # sized by the planner
    else:
        raise node.child("nodes").error("is required: a node count or {min, max}")
    disk = node.child("diskSizeGb").integer(200, minimum=50)
    assert disk is not None
    if cloud is Cloud.OKE and raw.get("imageId") is None:
        raise node.child("imageId").error("is required on OKE: the OCID of a GPU node image")
    return PoolSpec(
        name=name,
        gpu=gpu,
        machine_type=machine,
        gpus_per_node=node.child("gpusPerNode").integer(minimum=1, maximum=16),
        nodes=nodes,
        mig=mig,
        mig_manager=mig_manager,
        max_pods=node.child("maxPods").integer(minimum=1),
        spot=node.child("spot").boolean(False),
        labels=node.child("labels").labels(),
        taints=_taints(node.child("taints")),
        node_names=node_names,
        system_pods=node.child("systemPods").integer(minimum=0),
        disk_size_gb=disk,
        zones=node.child("zones").strings(),
        image_id=node.child("imageId").string(),
        nodes_given=nodes_given or cloud is Cloud.EXISTING,
    )


OPERATOR_KEYS = ("version", "namespace", "withReboot", "serviceMonitor", "timeoutSeconds", "gate",
                 "gateTimeoutSeconds")  # fmt: skip


def _gpu_operator(node: _Node, cloud: Cloud, pinned_version: str) -> GpuOperatorSpec:
    node.value = node.value if node.value is not None else {}
    node.mapping(OPERATOR_KEYS)
    version = node.child("version").string(pinned_version)
    assert version is not None
    if not re.match(r"^v\d+\.\d+\.\d+$", version):
        raise node.child("version").error(f"{version!r} is not a chart version like v26.7.0")
    namespace = (
        _dns_label(node.child("namespace")) if node.child("namespace").value else "gpu-operator"
    )
    timeout = node.child("timeoutSeconds").integer(1200, minimum=300, maximum=3600)
    gate_timeout = node.child("gateTimeoutSeconds").integer(1800, minimum=60, maximum=7200)
    assert timeout is not None and gate_timeout is not None
    return GpuOperatorSpec(
        version=version,
        namespace=namespace,
        with_reboot=node.child("withReboot").boolean(cloud is not Cloud.EXISTING),
        service_monitor=node.child("serviceMonitor").boolean(False),
        timeout_seconds=timeout,
        gate=node.child("gate").boolean(True),
        gate_timeout_seconds=gate_timeout,
    )


SERVICE_KEYS = ("name", "model", "engine", "image", "memoryGiB", "params", "dtype", "layers",
                "kvHeads", "headDim", "context", "concurrency", "overhead", "profile", "replicas",
                "pool", "hfTokenSecret", "apiKeySecret", "tensorParallelSize",
                "gpuMemoryUtilization", "maxModelLen", "maxNumSeqs", "port", "namespace",
                "clients", "hpaMaxReplicas", "command", "args", "startupSeconds",
                "healthPath")  # fmt: skip


def _secret_ref(node: _Node, secret_keys: frozenset[str]) -> str | None:
    name = node.string()
    if name is not None and name not in secret_keys:
        raise node.error(
            f"must name a secret config key (`pulumi config set --secret {name} ...`); "
            f"{name!r} is not a secret key of this stack"
        )
    return name


def _clients(node: _Node) -> tuple[NetworkClient, ...]:
    clients = []
    for item in node.items():
        item.mapping(("namespace", "podLabels"))
        namespace = item.child("namespace").string()
        labels = item.child("podLabels").labels()
        if namespace is None and not labels:
            raise item.error("needs a namespace, podLabels or both")
        clients.append(NetworkClient(namespace, labels))
    return tuple(clients)


def _service(node: _Node, secret_keys: frozenset[str]) -> ServiceSpec:
    raw = node.mapping(SERVICE_KEYS)
    name = _dns_label(node.child("name"))
    engine = node.child("engine").choice(Engine, Engine.VLLM)
    model = node.child("model").string()
    if model is None and engine is not Engine.CUSTOM:
        raise node.child("model").error(f"is required for engine {engine.value}")
    shape = None
    need = None
    if raw.get("memoryGiB") is not None and raw.get("params") is not None:
        raise node.child("memoryGiB").error("give memoryGiB or params (with dtype...), not both")
    if raw.get("memoryGiB") is not None:
        memory = node.child("memoryGiB").number(minimum=0)
        assert memory is not None
        need = gib_to_mib(memory)
    elif raw.get("params") is not None:
        dtype = node.child("dtype").string("bf16")
        if dtype not in BYTES_PER_PARAM:
            raise node.child("dtype").error(
                f"{dtype!r} is not allowed; allowed: {', '.join(BYTES_PER_PARAM)}"
            )
        try:
            shape = ModelShape(
                params_billion=node.child("params").number(minimum=0) or 0.0,
                dtype=dtype or "bf16",
                layers=node.child("layers").integer(minimum=1),
                kv_heads=node.child("kvHeads").integer(minimum=1),
                head_dim=node.child("headDim").integer(minimum=1),
                context=node.child("context").integer(4096, minimum=1) or 4096,
                concurrency=node.child("concurrency").integer(1, minimum=1) or 1,
                overhead=node.child("overhead").number(DEFAULT_OVERHEAD, minimum=0)
                or DEFAULT_OVERHEAD,
            )
        except MigError as error:
            raise node.error(error.message) from None
        need = shape.need_mib
    profile = node.child("profile").string(AUTO) or AUTO
    if profile == AUTO and need is None:
        raise node.child("memoryGiB").error(
            "is required with profile auto: give memoryGiB, or params and dtype, or a profile"
        )
    replicas_raw = raw.get("replicas", 1)
    if replicas_raw == FILL:
        replicas: int | str = FILL
    else:
        count = node.child("replicas").integer(1, minimum=1)
        assert count is not None
        replicas = count
    tp = node.child("tensorParallelSize").integer(1, minimum=1)
    if tp != 1:
        raise node.child("tensorParallelSize").error(
            f"must be 1 on MIG, got {tp}: a replica runs on one MIG slice and NCCL cannot "
            "span MIG devices; use a larger slice, or full GPUs (mig: all-disabled) for "
            "tensor parallelism"
        )
    utilization = node.child("gpuMemoryUtilization").number(0.9, minimum=0) or 0.9
    if utilization > 0.98:
        raise node.child("gpuMemoryUtilization").error(f"must be in (0, 0.98], got {utilization}")
    command = node.child("command").strings()
    image = node.child("image").string()
    if engine is Engine.CUSTOM and (image is None or not command):
        raise node.child("image" if image is None else "command").error(
            "engine custom needs both image and command"
        )
    namespace = _dns_label(node.child("namespace")) if raw.get("namespace") else "inference"
    health_path = node.child("healthPath").string()
    if health_path is not None and not health_path.startswith("/"):
        raise node.child("healthPath").error(f"must start with /, got {health_path!r}")
    if raw.get("apiKeySecret") is not None and engine not in (Engine.VLLM, Engine.CUSTOM):
        raise node.child("apiKeySecret").error(
            f"engine {engine.value} takes no API key here; put a gateway in front of it"
        )
    hpa = node.child("hpaMaxReplicas").integer(minimum=1)
    if hpa is not None and replicas == FILL:
        raise node.child("hpaMaxReplicas").error("cannot autoscale a `fill` service")
    if hpa is not None and isinstance(replicas, int) and hpa < replicas:
        raise node.child("hpaMaxReplicas").error(f"must be >= replicas ({replicas}), got {hpa}")
    return ServiceSpec(
        name=name,
        model=model or "",
        engine=engine,
        image=image,
        need_mib=need,
        shape=shape,
        profile=profile,
        replicas=replicas,
        pool=node.child("pool").string(),
        hf_token_secret=_secret_ref(node.child("hfTokenSecret"), secret_keys),
        api_key_secret=_secret_ref(node.child("apiKeySecret"), secret_keys),
        tensor_parallel_size=1,
        gpu_memory_utilization=utilization,
        max_model_len=node.child("maxModelLen").integer(minimum=1),
        max_num_seqs=node.child("maxNumSeqs").integer(minimum=1),
        port=node.child("port").integer(8000, minimum=1, maximum=65535) or 8000,
        namespace=namespace,
        clients=_clients(node.child("clients")),
        hpa_max_replicas=hpa,
        command=command,
        args=node.child("args").strings(),
        startup_seconds=node.child("startupSeconds").integer(3600, minimum=60, maximum=4 * 3600)
        or 3600,
        health_path=health_path,
    )


def _secret_references(values: Mapping[str, Any]) -> dict[str, str]:
    """Config keys that services or the cluster name as secrets -> the key path naming them."""
    found: dict[str, str] = {}
    services = values.get("services")
    for index, service in enumerate(services if isinstance(services, list) else []):
        if isinstance(service, dict):
            for field_name in ("hfTokenSecret", "apiKeySecret"):
                if isinstance(service.get(field_name), str):
                    found.setdefault(service[field_name], f"services[{index}].{field_name}")
    cluster = values.get("cluster")
    if isinstance(cluster, dict) and isinstance(cluster.get("kubeconfig"), str):
        found.setdefault(cluster["kubeconfig"], "cluster.kubeconfig")
    return found


def parse_stack(
    stack: str,
    values: Mapping[str, Any],
    *,
    secret_keys: frozenset[str] = frozenset(),
    pinned_operator_version: str,
) -> StackSpec:
    """Validate the project's config values (keys without the `mig-inference:` prefix)."""
    root = f"{NAMESPACE}:"
    referenced = _secret_references(values)
    for key in values:
        if key in referenced and key not in secret_keys:
            raise MigError(
                f"is named by {referenced[key]} but stored in plain text; store it as a secret "
                f"(`pulumi config set --secret {key} ...`)",
                f"{root}{key}",
            )
        if key not in TOP_KEYS and key not in secret_keys:
            raise MigError(
                f"unknown key; allowed: {', '.join(TOP_KEYS)} (and secret keys named by services)",
                f"{root}{key}",
            )
    cloud_node = _Node(values.get("cloud"), f"{root}cloud")
    if cloud_node.value is None:
        raise cloud_node.error(f"is required; allowed: {', '.join(c.value for c in Cloud)}")
    cloud = cloud_node.choice(Cloud, Cloud.GKE)
    cluster = _cluster(_Node(values.get("cluster"), f"{root}cluster"), cloud, secret_keys)
    pools_node = _Node(values.get("pools"), f"{root}pools")
    pools = tuple(_pool(item, cloud) for item in pools_node.items())
    if not pools:
        raise pools_node.error("is required: at least one GPU pool")
    names = [p.name for p in pools]
    for index, name in enumerate(names):
        if names.index(name) != index:
            raise MigError(f"duplicate pool name {name!r}", f"{root}pools[{index}].name")
    operator = _gpu_operator(
        _Node(values.get("gpuOperator"), f"{root}gpuOperator"), cloud, pinned_operator_version
    )
    services = tuple(
        _service(item, secret_keys)
        for item in _Node(values.get("services"), f"{root}services").items()
    )
    service_names = [s.name for s in services]
    for index, name in enumerate(service_names):
        if service_names.index(name) != index:
            raise MigError(f"duplicate service name {name!r}", f"{root}services[{index}].name")
    return StackSpec(stack, cloud, cluster, pools, operator, services, secret_keys)


def stack_file_values(config: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """Split a stack file's `config:` into project values and the set of secret keys.

    Keys of other namespaces (e.g. `gcp:project`) are left to their providers."""
    values: dict[str, Any] = {}
    secrets: set[str] = set()
    for full_key, value in (config or {}).items():
        namespace, _, key = str(full_key).partition(":")
        if namespace != NAMESPACE or not key:
            continue
        if isinstance(value, dict) and set(value) == {SECRET_MARKER}:
            secrets.add(key)
            values[key] = "[secret]"
        else:
            values[key] = value
    return {k: v for k, v in values.items() if k not in secrets}, frozenset(secrets)
