"""Memory need of a replica and the slice it fits, on the seed documents' examples."""

from __future__ import annotations

import pytest

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.gpus.sizing import GB, ModelShape, gib_to_mib, smallest_profile


def test_seed_3b_fp16_needs_7_2_gb_and_fits_1g_10gb_on_h100() -> None:
    shape = ModelShape(params_billion=3, dtype="fp16")
    assert shape.need_bytes / GB == pytest.approx(7.2)
    assert smallest_profile(resolve_gpu("h100"), shape.need_mib).name == "1g.10gb"


@pytest.mark.parametrize(
    ("gpu", "gib", "profile"),
    [
        ("h100", 16, "1g.20gb"),  # seed 000: Llama-3.1-8B at 16 GB
        ("h100", 24.5, "3g.40gb"),  # seed 004: Mistral-Nemo
        ("a100-40gb", 4, "1g.5gb"),  # Run:ai --gpu-memory 4G
        ("a100-40gb", 5, "1g.10gb"),  # just over 1g.5gb's 4,864 MiB
        ("h100", 39.5, "3g.40gb"),  # exactly the usable 40,448 MiB
        ("h100", 39.6, "7g.80gb"),  # 4g.40gb has the same memory, so only 7g holds more
    ],
)
def test_smallest_profile(gpu: str, gib: float, profile: str) -> None:
    assert smallest_profile(resolve_gpu(gpu), gib_to_mib(gib)).name == profile


def test_equal_memory_prefers_fewer_slices_and_less_compute() -> None:
    # 1g.20gb and 2g.20gb hold the same memory; 1g.20gb leaves a compute slice for others.
    assert smallest_profile(resolve_gpu("h100"), gib_to_mib(12)).name == "1g.20gb"


@pytest.mark.parametrize(
    ("shape", "expected_gb"),
    [
        # The planner issue's fleet: 8 concurrent 4k sequences, 1.1 overhead.
        (ModelShape(3.21, "bf16", 28, 8, 128, 4096, 8, overhead=1.1), 11.2),
        (ModelShape(8.03, "fp8", 32, 8, 128, 4096, 8, overhead=1.1), 13.6),
        (ModelShape(8.03, "bf16", 32, 8, 128, 4096, 8, overhead=1.1), 22.4),
        (ModelShape(6.74, "bf16", 32, 32, 128, 4096, 8, overhead=1.1), 33.7),
    ],
)
def test_kv_cache_formula(shape: ModelShape, expected_gb: float) -> None:
    assert shape.need_bytes / GB == pytest.approx(expected_gb, abs=0.05)


def test_nothing_fits_names_the_largest_profile() -> None:
    with pytest.raises(MigError, match=r"the largest, 7g.80gb, has 81,152 MiB"):
        smallest_profile(resolve_gpu("h100"), gib_to_mib(90))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"params_billion": 0}, "params must be > 0"),
        ({"params_billion": 7, "dtype": "fp9"}, "unknown dtype 'fp9'; allowed: fp32"),
        ({"params_billion": 7, "layers": 32}, "give all three or none"),
        ({"params_billion": 7, "context": 0}, "context must be a whole number > 0"),
        ({"params_billion": 7, "overhead": 0.5}, "overhead must be >= 1"),
    ],
)
def test_bad_shapes(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(MigError, match=message):
        ModelShape(**kwargs)  # type: ignore[arg-type]


def test_bad_memory() -> None:
    with pytest.raises(MigError, match="memory must be a finite number of GiB > 0"):
        gib_to_mib(-1)
