"""vLLM's batch budget and allocator on a MIG slice: pinned from the plan (vllm-project/vllm
#55381), never left to the NVML probe a MIG container fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import load_catalog, resolve_gpu
from mig_inference.kube.engines import engine_container
from mig_inference.kube.vllm_batch import (
    LARGE_TIER_GIB,
    LARGEST_TIER_GIB,
    BatchBudget,
    batch_budget,
)
from mig_inference.plan import plan_stack
from mig_inference.spec import parse_stack
from mig_inference.spec.files import load_stack, load_stack_file, stack_path
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import stack_rendering

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
STACKS = ("gke-h100", "eks-p4d", "eks-b300", "oke-h100", "eks-g6e-timeslice")


def option(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def vllm_containers(stack: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for deployment in stack_rendering(stack).of_type(DEPLOYMENT):
        [container] = deployment.inputs["spec"]["template"]["spec"]["containers"]
        if container["image"].startswith("vllm/"):
            found.append((deployment.name, container))
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_vllm_deployment_pins_its_budget_from_the_plan(stack: str) -> None:
    plan = plan_stack(load_stack(stack))
    containers = vllm_containers(stack)
    assert containers
    for name, container in containers:
        service = next(s for s in plan.services if s.name == name)
        args = container["args"]
        seqs, tokens = option(args, "--max-num-seqs"), option(args, "--max-num-batched-tokens")
        assert seqs is not None and tokens is not None, (stack, name, args)
        # The plan's concurrency, and a budget no smaller than it.
        assert int(seqs) == service.sizing.max_num_seqs
        assert int(tokens) >= int(seqs)


def _h100(**service: Any) -> Any:
    values = {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "eu-west-1", "subnetIds": ["subnet-00000005"]},
        "pools": [
            {"name": "p5", "gpu": "H100-80GB", "machineType": "p5.48xlarge", "nodes": 1,
             "mig": "all-1g.10gb", "maxPods": 100}
        ],
        "services": [{"name": "a", "model": "m", "replicas": 1, **service}],
    }  # fmt: skip
    return plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))


def _args(plan: Any) -> list[str]:
    return list(engine_container(plan.services[0]).args)


def test_the_budget_is_vllms_tier_for_the_parent_gpu() -> None:
    # vLLM v0.33.0 get_batch_defaults for the OpenAI server: 8192 tokens on a GPU of 70 GiB or
    # more without `a100` in its name, 16384 from 160 GiB, else 2048; 1024 or 256 sequences.
    assert batch_budget(resolve_gpu("H100-80GB"), None, None) == BatchBudget(8192, 1024)
    assert batch_budget(resolve_gpu("H200-141GB"), None, None) == BatchBudget(8192, 1024)
    assert batch_budget(resolve_gpu("B200-180GB"), None, None) == BatchBudget(16384, 1024)
    assert batch_budget(resolve_gpu("A100-80GB"), None, None) == BatchBudget(2048, 256)
    assert batch_budget(resolve_gpu("A30-24GB"), None, None) == BatchBudget(2048, 256)
    # Its own cap on a defaulted budget: sequences x context.
    assert batch_budget(resolve_gpu("H100-80GB"), 2, 1024) == BatchBudget(2048, 2)
    # Never fewer tokens than sequences (vLLM refuses to start otherwise).
    assert batch_budget(resolve_gpu("H100-80GB"), 3000, 1) == BatchBudget(3000, 3000)


def test_a_slice_without_a_planned_concurrency_still_gets_both_flags() -> None:
    args = _args(_h100(memoryGiB=4))
    assert option(args, "--max-num-seqs") == "1024"
    assert option(args, "--max-num-batched-tokens") == "8192"


def test_the_plan_caps_the_budget_at_sequences_times_context() -> None:
    args = _args(_h100(params=1, dtype="bf16", layers=16, kvHeads=8, headDim=64, context=1024,
                       concurrency=2))  # fmt: skip
    assert option(args, "--max-model-len") == "1024"
    assert option(args, "--max-num-seqs") == "2"
    assert option(args, "--max-num-batched-tokens") == "2048"


def test_the_service_may_give_its_own_budget() -> None:
    args = _args(_h100(memoryGiB=4, maxNumSeqs=64, maxNumBatchedTokens=4096))
    assert (option(args, "--max-num-seqs"), option(args, "--max-num-batched-tokens")) == (
        "64", "4096",
    )  # fmt: skip


def test_a_budget_below_the_sequences_is_refused_at_its_key() -> None:
    with pytest.raises(MigError, match=r"services\[0\]\.maxNumBatchedTokens: 32 batched tokens "
                       r"for 64 sequences in flight: vLLM refuses"):  # fmt: skip
        _h100(memoryGiB=4, maxNumSeqs=64, maxNumBatchedTokens=32)


def test_the_budget_flag_in_args_is_refused_with_its_key() -> None:
    with pytest.raises(MigError, match=r"services\[0\]\.args\[0\]: --max-num-batched-tokens is "
                       r"set by the key maxNumBatchedTokens"):  # fmt: skip
        _h100(memoryGiB=4, args=["--max-num-batched-tokens=4096"])


def test_the_budget_is_vllm_only() -> None:
    with pytest.raises(MigError, match=r"services\[0\]\.maxNumBatchedTokens: is vLLM's step "
                       r"budget"):  # fmt: skip
        _h100(memoryGiB=4, engine="tgi", maxNumBatchedTokens=4096)


def test_every_catalog_gpu_is_far_from_vllms_thresholds() -> None:
    """The catalog's nominal memory stands for NVML's total (slightly less than nominal): no GPU
    may sit within 5 GiB of a threshold, where that difference could change the tier."""
    catalog = load_catalog()
    for gpu in (*catalog.gpus, *catalog.whole_gpus):
        for threshold in (LARGE_TIER_GIB, LARGEST_TIER_GIB):
            assert abs(gpu.memory_gib - threshold) > 5, (gpu.name, threshold)


def test_mig_slices_run_the_allocator_without_expandable_segments() -> None:
    [(_, sliced)] = vllm_containers("gke-h100")
    assert {"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:False"} in sliced[
        "env"
    ]
    [(_, whole)] = vllm_containers("eks-g6e-timeslice")
    assert all(e["name"] != "PYTORCH_CUDA_ALLOC_CONF" for e in whole["env"])


@pytest.mark.parametrize(
    "off", ["--no-enable-chunked-prefill", "--enable-chunked-prefill=false",
            "--enable_chunked_prefill=False", "--no_enable_chunked_prefill"],
)  # fmt: skip
def test_a_budget_below_the_context_without_chunked_prefill_is_refused_at_its_key(
    off: str,
) -> None:
    # vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (v0.33.0): with chunked
    # prefill off, fewer batched tokens than max_model_len is refused at engine start.
    with pytest.raises(MigError, match=r"services\[0\]\.maxNumBatchedTokens: 2,048 batched tokens "
                       r"with chunked prefill off .* max_model_len \(8,192\)"):  # fmt: skip
        _h100(memoryGiB=4, maxModelLen=8192, maxNumSeqs=8, maxNumBatchedTokens=2048,
              args=[off])  # fmt: skip


def test_chunked_prefill_turned_back_on_keeps_the_smaller_budget() -> None:
    args = _args(_h100(memoryGiB=4, maxModelLen=8192, maxNumSeqs=8, maxNumBatchedTokens=2048,
                       args=["--no-enable-chunked-prefill", "--enable-chunked-prefill"]))  # fmt: skip
    assert option(args, "--max-num-batched-tokens") == "2048"


def test_the_pinned_budget_covers_the_context_without_chunked_prefill() -> None:
    # The tier's 8192 on an H100, below a 16384 context: vLLM would refuse it.
    args = _args(_h100(memoryGiB=4, maxModelLen=16384, maxNumSeqs=8,
                       args=["--no-enable-chunked-prefill"]))  # fmt: skip
    assert option(args, "--max-num-batched-tokens") == "16384"
    args = _args(_h100(memoryGiB=4, maxModelLen=16384, maxNumSeqs=8))
    assert option(args, "--max-num-batched-tokens") == "8192"


def test_chunked_prefill_off_needs_a_known_context() -> None:
    with pytest.raises(MigError, match=r"services\[0\]\.maxModelLen: .*chunked prefill off"):
        _h100(memoryGiB=4, maxNumSeqs=8, args=["--no-enable-chunked-prefill"])


def test_the_repro_stack_with_chunked_prefill_off_is_refused(tmp_path: Path) -> None:
    text = Path(stack_path("eks-p5-from-zero")).read_text()
    chat = "      maxNumSeqs: 8\n"
    assert text.count(chat) == 1
    text = text.replace(
        chat, chat + "      maxNumBatchedTokens: 2048\n      args: [--no-enable-chunked-prefill]\n"
    )
    path = tmp_path / "Pulumi.eks-p5-from-zero.yaml"
    path.write_text(text)
    with pytest.raises(MigError, match=r"services\[0\]\.maxNumBatchedTokens: 2,048 batched"):
        plan_stack(load_stack_file(path))
