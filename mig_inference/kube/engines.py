"""Inference engine presets: image, command line, health endpoint and secret env names."""

from __future__ import annotations

from msgspec import Struct

from mig_inference.kube.vllm_batch import batch_budget
from mig_inference.plan import ServicePlan
from mig_inference.plan.model import WHOLE_GPU
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.spec import Engine
from mig_inference.spec.engine_args import chunked_prefill_off
from mig_inference.versions import ENGINE_IMAGES, TGI_IMAGE, TRITON_IMAGE, VLLM_IMAGE

HOME = "/home/inference"
"""Writable HOME (an emptyDir): model downloads and compile caches land here."""


MIG_ALLOCATOR = ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
"""PyTorch's caching allocator without expandable segments on a MIG slice: their path queries
NVML for the parent GPU, which a MIG container is refused (`NVML_SUCCESS == r INTERNAL ASSERT
FAILED` in CUDACachingAllocator.cpp); what vLLM's own CI sets on its MIG runners
(vllm-project/ci-infra#355, vllm-project/vllm#42514, closed unmerged: vLLM v0.33.0's
`vllm/env_override.py` sets no allocator option)."""


class EngineContainer(Struct, frozen=True):
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    health_path: str
    env: tuple[tuple[str, str], ...]
    hf_token_env: tuple[str, ...]
    """Env vars that receive the Hugging Face token (from the Kubernetes Secret)."""
    api_key_env: str | None
    """Env var that receives the API key, when the engine checks one."""


def _vllm(service: ServicePlan, weights: str | None, streamed: bool) -> tuple[str, ...]:
    spec = service.spec
    args = [
        "--model", weights or spec.model,
        "--host", "0.0.0.0",
        "--port", str(spec.port),
        "--tensor-parallel-size", "1",
        "--gpu-memory-utilization", f"{service.memory_utilization:g}",
    ]  # fmt: skip
    if service.sizing.max_model_len:
        args += ["--max-model-len", str(service.sizing.max_model_len)]
    budget = batch_budget(
        service.pool.gpu,
        service.sizing.max_num_seqs,
        service.sizing.max_model_len,
        spec.max_num_batched_tokens,
        chunked_prefill=not chunked_prefill_off(spec.args),
    )
    # Never left to vLLM's NVML probe, which a MIG container fails (kube/vllm_batch.py).
    args += ["--max-num-seqs", str(budget.max_num_seqs)]
    args += ["--max-num-batched-tokens", str(budget.max_num_batched_tokens)]
    if weights:
        # Clients keep asking for the hub's model id, whatever path the weights come from.
        args += ["--served-model-name", spec.model]
    if streamed:
        # vLLM docs, "Loading models with Run:ai Model Streamer": safetensors streamed from
        # s3:// or gs:// straight into GPU memory.
        args += ["--load-format", "runai_streamer"]
    return tuple(args) + spec.args


def _tgi(service: ServicePlan, weights: str | None) -> tuple[str, ...]:
    spec = service.spec
    args = [
        "--model-id", weights or spec.model,
        "--hostname", "0.0.0.0",
        "--port", str(spec.port),
        "--num-shard", "1",
        "--cuda-memory-fraction", f"{service.memory_utilization:g}",
    ]  # fmt: skip
    if service.sizing.max_model_len:
        args += ["--max-total-tokens", str(service.sizing.max_model_len)]
        args += ["--max-input-tokens", str(service.sizing.max_model_len - 1)]
    if service.sizing.max_num_seqs:
        limit = service.sizing.max_num_seqs
        if spec.queue_autoscaling is not None:
            # TGI counts queued requests against this limit and refuses (429) beyond it; KEDA
            # adds a replica above `maxNumSeqs + queuePerReplica` in flight, so admit more.
            limit += 2 * spec.queue_autoscaling.queue_per_replica
        args += ["--max-concurrent-requests", str(limit)]
    return tuple(args) + spec.args


def _triton(service: ServicePlan) -> tuple[str, ...]:
    spec = service.spec
    return (
        "--model-repository", spec.model,
        "--http-port", str(spec.port),
        "--allow-grpc", "false",
        "--allow-metrics", "true",
        *spec.args,
    )  # fmt: skip


def engine_image(service: ServicePlan) -> str | None:
    """The image the service's engine runs (its pinned default when the stack names none)."""
    return service.spec.image or ENGINE_IMAGES.get(service.spec.engine.value)


def engine_container(service: ServicePlan, cache: ModelCachePlan | None = None) -> EngineContainer:
    """The engine's container. With the model cache, the engine starts from the cache (a read-
    only local path, or the bucket vLLM streams from) with the hub switched off
    (`HF_HUB_OFFLINE`), and receives no Hugging Face token."""
    spec = service.spec
    env: tuple[tuple[str, str], ...] = (
        ("HOME", HOME),
        ("HF_HOME", f"{HOME}/.cache/huggingface"),
        ("XDG_CACHE_HOME", f"{HOME}/.cache"),
    )
    weights = cache.weights_path(service) if cache is not None else None
    if weights is not None:
        env += (("HF_HUB_OFFLINE", "1"),)
    streamed = cache is not None and cache.streamed(service)
    if spec.engine is Engine.VLLM:
        if service.profile != WHOLE_GPU:
            env += (MIG_ALLOCATOR,)
        return EngineContainer(
            spec.image or VLLM_IMAGE, spec.command, _vllm(service, weights, streamed), "/health",
            env, () if weights else ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"), "VLLM_API_KEY",
        )  # fmt: skip
    if spec.engine is Engine.TGI:
        return EngineContainer(
            spec.image or TGI_IMAGE, spec.command, _tgi(service, weights), "/health",
            (*env, ("HUGGINGFACE_HUB_CACHE", f"{HOME}/.cache/huggingface")),
            () if weights else ("HF_TOKEN",), None,
        )  # fmt: skip
    if spec.engine is Engine.TRITON:
        return EngineContainer(
            spec.image or TRITON_IMAGE, spec.command or ("tritonserver",), _triton(service),
            "/v2/health/ready", env, (), None,
        )  # fmt: skip
    assert spec.image is not None
    return EngineContainer(
        spec.image, spec.command, spec.args, spec.health_path or "/health", env,
        ("HF_TOKEN",), "API_KEY",
    )  # fmt: skip
