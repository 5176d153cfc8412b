"""The model id an engine reports, as the program starts it: what the gateway's routes match
and the serving check asks for."""

from __future__ import annotations

from mig_inference.plan.model import ServicePlan
from mig_inference.plan.model_cache import ModelCachePlan
from mig_inference.spec import Engine
from mig_inference.spec.engine_args import last_value


def served_model(service: ServicePlan, cache: ModelCachePlan | None = None) -> str:
    """The model id the engine reports (`/v1/models`, the `model` of its answers, its metrics'
    `model_name`), as `kube.engines` starts it (with the model cache, from its path):
    - vLLM: the first name of the service's last `--served-model-name` (vLLM answers to every
      name given and reports the first: vLLM's engine arguments, `--served-model-name`; its
      parser keeps the last occurrence), else the model: the program names the model as the
      served name of an engine started from the cache, and the stack cannot set `--model`;
    - TGI: its `--model-id`, which is the cache's path when started from the cache: TGI 3.3.5
      takes the model id of a local directory from the tokenizer name, that argument (router/
      src/server.rs: a local path asks the hub nothing, and `/v1/models` answers
      `Info.model_id`; the launcher passes `--tokenizer-name <model-id>`); TGI has no served
      name of its own, and the stack cannot set `--model-id`;
    - others: the stack's model (Triton and custom engines are not asked for it)."""
    spec = service.spec
    if spec.engine is Engine.VLLM:
        return last_value(spec.args, "--served-model-name") or spec.model
    if spec.engine is Engine.TGI and cache is not None:
        return cache.weights_path(service) or spec.model
    return spec.model
