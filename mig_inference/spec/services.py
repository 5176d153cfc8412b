"""`mig-inference:services`: inference services."""

from __future__ import annotations

from collections.abc import Callable

from mig_inference.errors import MigError, shown
from mig_inference.gpus.sizing import BYTES_PER_PARAM, DEFAULT_OVERHEAD, ModelShape, gib_to_mib
from mig_inference.spec import formats
from mig_inference.spec.demand import DEMAND_KEYS, demand_spec, profiling_spec
from mig_inference.spec.engine_args import check_engine_args, tensor_parallel_problem
from mig_inference.spec.model import (
    AUTO,
    FILL,
    Engine,
    NetworkClient,
    QueueAutoscaling,
    ServiceSpec,
)
from mig_inference.spec.reader import ConfigNode, SecretNames, dns_label
from mig_inference.spec.verify import service_verify_spec

MODEL_FORMATS = {Engine.TRITON: formats.MODEL_REPOSITORY}
"""The format of `model` per engine (a Hugging Face ID or path otherwise)."""

SERVICE_KEYS = ("name", "model", "engine", "image", "memoryGiB", "params", "dtype", "layers",
                "kvHeads", "headDim", "context", "concurrency", "overhead", "profile", "replicas",
                "pool", "hfTokenSecret", "apiKeySecret", "tensorParallelSize",
                "gpuMemoryUtilization", "maxModelLen", "maxNumSeqs", "maxNumBatchedTokens", "port",
                "namespace",
                "clients", "hpaMaxReplicas", "command", "args", "startupSeconds",
                "healthPath", "queueAutoscaling", "revision", "weightsGiB", "verify",
                *DEMAND_KEYS)  # fmt: skip


_SHAPE_KEYS = {"params": "params", "layers": "layers", "kv_heads": "kvHeads",
               "head_dim": "headDim", "context": "context", "concurrency": "concurrency",
               "overhead": "overhead"}  # fmt: skip
MAX_MODEL_LEN_UNCHECKED = 131_072
"""The longest `maxModelLen` taken without the model's shape, which alone lets the plan check
that the KV cache of that context fits the slice."""


def _clients(node: ConfigNode) -> tuple[NetworkClient, ...]:
    clients = []
    for item in node.items():
        item.mapping(("namespace", "podLabels"))
        namespace = (
            dns_label(item.child("namespace"), 63) if item.child("namespace").value else None
        )
        labels = item.child("podLabels").labels()
        if namespace is None and not labels:
            raise item.error("needs a namespace, podLabels or both")
        clients.append(NetworkClient(namespace, labels))
    return tuple(clients)


def _max_model_len(node: ConfigNode, shape: ModelShape | None) -> int | None:
    length = node.integer(bound=formats.TOKENS)
    if length is not None and shape is None and length > MAX_MODEL_LEN_UNCHECKED:
        return node.problem(
            f"{length:,} tokens cannot be checked against the slice without the model's shape; "
            f"give params, dtype, layers, kvHeads and headDim, or at most "
            f"{MAX_MODEL_LEN_UNCHECKED:,}",
            None,
        )
    return length


def _queue_autoscaling(node: ConfigNode, engine: Engine) -> QueueAutoscaling | None:
    if node.value is None:
        return None
    node.mapping(("maxReplicas", "queuePerReplica"))
    if engine not in (Engine.VLLM, Engine.TGI):
        return node.problem(
            f"engine {engine.value} exports no queue metric this project knows; use vllm or tgi, "
            "or hpaMaxReplicas",
            None,
        )
    most = node.child("maxReplicas").integer(bound=formats.REPLICAS)
    if most is None:
        return node.child("maxReplicas").problem("is required: the most replicas to run", None)
    per = node.child("queuePerReplica").integer(4, bound=formats.CONCURRENCY)
    assert per is not None
    return QueueAutoscaling(max_replicas=most, queue_per_replica=per)


def _utilization(node: ConfigNode) -> float | None:
    utilization = node.number(minimum=0)
    if utilization is not None and not 0 < utilization <= 0.98:
        return node.problem(f"must be in (0, 0.98], got {utilization}", None)
    return utilization


def service_spec(node: ConfigNode, secrets: SecretNames) -> ServiceSpec:
    raw = node.mapping(SERVICE_KEYS)
    # formats.SERVICE_NAME: a Kubernetes Service name is a DNS-1035 label.
    name = dns_label(
        node.child("name"), names="the service's Kubernetes Service (a DNS-1035 label)"
    )
    engine = node.child("engine").choice(Engine, Engine.VLLM)
    model = node.child("model").text(MODEL_FORMATS.get(engine, formats.HF_MODEL))
    if model is None and engine is not Engine.CUSTOM:
        node.child("model").problem(f"is required for engine {engine.value}", None)
    shape = None
    need = None
    if raw.get("memoryGiB") is not None and raw.get("params") is not None:
        node.child("memoryGiB").problem("give memoryGiB or params (with dtype...), not both", None)
    if raw.get("memoryGiB") is not None:
        memory = node.child("memoryGiB").number(bound=formats.MEMORY_GIB)
        assert memory is not None
        need = gib_to_mib(memory)
    elif raw.get("params") is not None:
        dtype = node.child("dtype").string("bf16")
        if dtype not in BYTES_PER_PARAM:
            dtype = node.child("dtype").problem(
                f"{shown(dtype)} is not allowed; allowed: {', '.join(BYTES_PER_PARAM)}",
                "bf16",
                list(BYTES_PER_PARAM),
            )
        try:
            shape = ModelShape(
                params_billion=node.child("params").number(bound=formats.PARAMS_BILLION) or 1.0,
                dtype=dtype or "bf16",
                layers=node.child("layers").integer(bound=formats.LAYERS),
                kv_heads=node.child("kvHeads").integer(bound=formats.HEADS),
                head_dim=node.child("headDim").integer(bound=formats.HEAD_DIM),
                context=node.child("context").integer(4096, bound=formats.TOKENS) or 4096,
                concurrency=node.child("concurrency").integer(1, bound=formats.CONCURRENCY) or 1,
                overhead=node.child("overhead").number(
                    DEFAULT_OVERHEAD, bound=formats.OVERHEAD_FACTOR
                )
                or DEFAULT_OVERHEAD,
            )
        except MigError as error:
            # ModelShape names its field in the message; point at the stack key it came from.
            key = next((k for f, k in _SHAPE_KEYS.items() if error.message.startswith(f)), "params")
            node.child(key).problem(error.message, None)
        need = shape.need_mib if shape is not None else None
    demand = demand_spec(node)
    profile = node.child("profile").text(formats.MIG_PROFILE, AUTO) or AUTO
    if raw.get("requestsPerSecond") is not None:
        for key in ("replicas", "hpaMaxReplicas", "queueAutoscaling"):
            if raw.get(key) is not None:
                node.child(key).problem(
                    "give replicas (or an autoscaler) or requestsPerSecond, not both: the planner "
                    "chooses the replicas that serve a demand",
                    None,
                )
        if profile != AUTO:
            node.child("profile").problem(
                "a service sized by requestsPerSecond runs on the profiles of its throughput "
                "table; leave profile out",
                None,
            )
    elif profile == AUTO and raw.get("memoryGiB") is None and raw.get("params") is None:
        node.child("memoryGiB").problem(
            "is required with profile auto: give memoryGiB, or params and dtype, or a profile",
            None,
        )
    replicas_raw = raw.get("replicas", 1)
    replicas: int | str
    if raw.get("requestsPerSecond") is not None:
        replicas = 0
    elif replicas_raw == FILL:
        replicas = FILL
    else:
        count = node.child("replicas").integer(1, bound=formats.REPLICAS)
        assert count is not None
        replicas = count
    tp = node.child("tensorParallelSize").integer(1, minimum=1)
    if tp is not None and tensor_parallel_problem(tp) is not None:
        node.child("tensorParallelSize").problem(str(tensor_parallel_problem(tp)), None)
    utilization = _utilization(node.child("gpuMemoryUtilization"))
    command = node.child("command").texts(formats.ARGUMENT)
    image = node.child("image").text(formats.IMAGE)
    if engine is Engine.CUSTOM and (image is None or raw.get("command") in (None, [])):
        node.child("image" if image is None else "command").problem(
            "engine custom needs both image and command", None
        )
    namespace = dns_label(node.child("namespace"), 63) if raw.get("namespace") else "inference"
    health_path = node.child("healthPath").text(formats.URL_PATH)
    if raw.get("apiKeySecret") is not None and engine not in (Engine.VLLM, Engine.CUSTOM):
        node.child("apiKeySecret").problem(
            f"engine {engine.value} takes no API key here; put a gateway in front of it", None
        )
    hpa = node.child("hpaMaxReplicas").integer(bound=formats.REPLICAS)
    queue = _queue_autoscaling(node.child("queueAutoscaling"), engine)
    if queue is not None and hpa is not None:
        queue = node.child("queueAutoscaling").problem(
            "give queueAutoscaling or hpaMaxReplicas, not both", None
        )
    if queue is not None and isinstance(replicas, int) and queue.max_replicas < replicas:
        queue = (
            node.child("queueAutoscaling")
            .child("maxReplicas")
            .problem(f"must be >= replicas ({replicas}), got {queue.max_replicas}", None)
        )
    if queue is not None and replicas == FILL:
        queue = node.child("queueAutoscaling").problem("cannot autoscale a `fill` service", None)
    if hpa is not None and replicas == FILL:
        hpa = node.child("hpaMaxReplicas").problem("cannot autoscale a `fill` service", None)
    if hpa is not None and isinstance(replicas, int) and hpa < replicas:
        hpa = node.child("hpaMaxReplicas").problem(
            f"must be >= replicas ({replicas}), got {hpa}", None
        )
    max_num_seqs = node.child("maxNumSeqs").integer(bound=formats.CONCURRENCY)
    batched_tokens = node.child("maxNumBatchedTokens").integer(bound=formats.TOKENS)
    if batched_tokens is not None and engine is not Engine.VLLM:
        batched_tokens = node.child("maxNumBatchedTokens").problem(
            f"is vLLM's step budget (--max-num-batched-tokens); engine {engine.value} has none "
            "here",
            None,
        )
    if (
        queue is not None
        and max_num_seqs is None
        and (shape is None or not shape.kv_bytes_per_token)
    ):
        # A replica's load is its running sequences plus its queue: without the model's shape
        # the engine picks its own concurrency, which the scaling threshold cannot know.
        queue = node.child("queueAutoscaling").problem(
            "needs maxNumSeqs or the model's shape: a replica takes maxNumSeqs running requests "
            "plus queuePerReplica waiting ones before another is added",
            None,
        )
    args = node.child("args").texts(formats.ARGUMENT)
    checks: dict[str, Callable[[ConfigNode], object]] = {
        "model": lambda value: value.text(MODEL_FORMATS.get(engine, formats.HF_MODEL)),
        "port": lambda value: value.integer(bound=formats.PORT),
        "gpuMemoryUtilization": _utilization,
        "maxModelLen": lambda value: value.integer(bound=formats.TOKENS),
        "maxNumSeqs": lambda value: value.integer(bound=formats.CONCURRENCY),
        "maxNumBatchedTokens": lambda value: value.integer(bound=formats.TOKENS),
    }

    def key_check(key: str, value: ConfigNode) -> object:
        return checks[key](value)

    check_engine_args(node.child("args"), engine, args, key_check)
    if engine is Engine.CUSTOM:
        check_engine_args(node.child("command"), engine, command, key_check)
    return ServiceSpec(
        name=name,
        model=model or "",
        engine=engine,
        image=image,
        need_mib=need,
        shape=shape,
        profile=profile,
        replicas=replicas,
        pool=node.child("pool").text(formats.DNS_LABEL),
        hf_token_secret=node.child("hfTokenSecret").secret_key_name(secrets),
        api_key_secret=node.child("apiKeySecret").secret_key_name(secrets),
        tensor_parallel_size=1,
        gpu_memory_utilization=utilization,
        max_model_len=_max_model_len(node.child("maxModelLen"), shape),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched_tokens,
        port=node.child("port").integer(8000, bound=formats.PORT) or 8000,
        namespace=namespace,
        clients=_clients(node.child("clients")),
        hpa_max_replicas=hpa,
        queue_autoscaling=queue,
        demand=demand,
        profiling=profiling_spec(node.child("profiling"), engine),
        command=command,
        args=args,
        startup_seconds=node.child("startupSeconds").integer(bound=formats.STARTUP_SECONDS),
        health_path=health_path,
        revision=node.child("revision").text(formats.HF_REVISION, "main") or "main",
        weights_gib=node.child("weightsGiB").number(bound=formats.MEMORY_GIB),
        verify=service_verify_spec(node.child("verify"), engine is Engine.CUSTOM),
    )
