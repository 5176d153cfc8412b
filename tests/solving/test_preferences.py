"""The preference stages among the plans with the fewest GPUs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import msgspec
import pytest

from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.solving.milp import Milp
from mig_inference.solving.packing import pack
from mig_inference.solving.throughput import parvagpu_scenarios


def test_a_layout_whose_relaxation_proved_nothing_is_still_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no LP bound for any single layout (every relaxation stopped short), each is solved
    as an integer program in the candidates' order: the plan is the one the bounds lead to."""
    gpu = resolve_gpu("A100-80GB")
    [slo1, *_] = parvagpu_scenarios("single")
    bounded = pack(gpu, slo1.workloads)

    def unbounded(_: Milp, variants: Sequence[Mapping[int, tuple[float, float]]]) -> list[float]:
        return [-math.inf] * len(variants)

    monkeypatch.setattr(Milp, "relaxed_objectives", unbounded)
    unproven = pack(gpu, slo1.workloads)
    assert unproven.refined_optimal and [s.value for s in unproven.preferences] == [1, 100]

    def plan(packed: object) -> object:
        return {k: v for k, v in msgspec.to_builtins(packed).items() if "seconds" not in k}

    assert plan(unproven) == plan(bounded)
