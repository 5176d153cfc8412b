"""vLLM's batch budget, pinned from the plan instead of left to a probe that fails on MIG.

What vLLM v0.33.0 does when a service names no budget (read in its sdist, `vllm-0.33.0.tar.gz`
on PyPI): `EngineArgs.get_batch_defaults` (vllm/engine/arg_utils.py L2940-3039) asks the
platform for the device's total memory and name through NVML and picks, for the OpenAI server,
16384 batched tokens and 1024 sequences at 160 GiB or more, 8192 and 1024 at 70 GiB or more
unless the name holds `a100` (vLLM PR #17885: a larger budget lowers A100 throughput), else 2048
and 256. Any exception in that probe is swallowed and the smallest tier taken. Inside a MIG
container NVML answers for the parent GPU, or refuses (vllm-project/vllm#55381, open): the same
replica gets 2048/256 or 8192/1024 depending on a permission, not on the plan. Then
`_set_default_max_num_seqs_and_batched_tokens_args` (L3153-3238) caps a defaulted budget at
`max_num_seqs * max_model_len` and a defaulted `max_num_seqs` at the budget; and
`SchedulerConfig.verify_max_model_len` (vllm/config/scheduler.py L317-336) refuses to start
with fewer batched tokens than sequences, or, with chunked prefill off
(`--no-enable-chunked-prefill`), fewer than `max_model_len`: a whole prompt must then fit one
step, so the plan's budget is raised to the context there.

So every vLLM replica gets both flags: the tier vLLM picks for the slice's parent GPU when NVML
answers (what the same engine gets on that machine outside a container, and what #55381's
measurements favour on a 2g slice), with vLLM's own caps applied to the plan's sequences and
context. A service's `maxNumBatchedTokens` replaces the tier's budget.
"""

from __future__ import annotations

from msgspec import Struct

from mig_inference.gpus.catalog import GpuModel

LARGEST_TIER_GIB = 160
LARGE_TIER_GIB = 70
"""vLLM's device-memory thresholds (GiB of NVML's total memory)."""
SMALL_TIER_NAME = "a100"
"""A device whose name holds this stays on the smallest tier, whatever its memory."""
TIERS = {"largest": (16384, 1024), "large": (8192, 1024), "small": (2048, 256)}
"""OpenAI-server defaults per tier: (max_num_batched_tokens, max_num_seqs)."""
SOURCE = (
    "vllm-project/vllm v0.33.0 vllm/engine/arg_utils.py EngineArgs.get_batch_defaults; "
    "vllm-project/vllm#55381"
)


class BatchBudget(Struct, frozen=True):
    """What one replica's engine may batch in one step."""

    max_num_batched_tokens: int
    """Tokens per engine step (`--max-num-batched-tokens`)."""
    max_num_seqs: int
    """Sequences in flight (`--max-num-seqs`)."""


def parent_tier(gpu: GpuModel) -> str:
    """The tier vLLM v0.33.0 picks for the whole GPU. The catalog's nominal memory stands for
    NVML's total: every catalog GPU is far from both thresholds (a test holds this)."""
    if gpu.memory_gib >= LARGEST_TIER_GIB:
        return "largest"
    if gpu.memory_gib >= LARGE_TIER_GIB and SMALL_TIER_NAME not in gpu.name.lower():
        return "large"
    return "small"


def batch_budget(
    gpu: GpuModel,
    max_num_seqs: int | None,
    max_model_len: int | None,
    max_num_batched_tokens: int | None = None,
    chunked_prefill: bool = True,
) -> BatchBudget:
    """The budget of a replica on a slice (or a whole GPU) of `gpu`: the plan's sequences (or
    the tier's), the service's token budget (or the tier's, capped at `sequences x context` as
    vLLM caps its own default), and never fewer tokens than sequences, nor than the context when
    chunked prefill is off (`SchedulerConfig.verify_max_model_len` refuses either)."""
    tier_tokens, tier_seqs = TIERS[parent_tier(gpu)]
    seqs = max_num_seqs or tier_seqs
    tokens = max_num_batched_tokens
    if tokens is None:
        tokens = tier_tokens if max_model_len is None else min(tier_tokens, seqs * max_model_len)
        tokens = max(tokens, seqs)
        if not chunked_prefill and max_model_len is not None:
            tokens = max(tokens, max_model_len)
    return BatchBudget(tokens, seqs)
