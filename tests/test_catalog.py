"""The catalog file against the reference catalog, and GPU name resolution."""

from __future__ import annotations

import pytest

from mig_inference.catalog import load_catalog, resolve_gpu
from mig_inference.errors import MigError
from tests.reference import reference_catalog

CATALOG = load_catalog()
MODELS = [g.name for g in CATALOG.gpus]


def test_every_required_model_is_present() -> None:
    required = {
        "A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H100-96GB",
        "GH200-144GB", "H200-141GB", "B200-180GB",
    }  # fmt: skip
    assert required <= set(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_transcription_matches_reference(name: str) -> None:
    ref = reference_catalog()[name]
    gpu = CATALOG.gpu(name)
    assert gpu.compute_slices == ref["compute_slices_total"]
    assert gpu.memory_slices == ref["memory_slices_total"]
    assert gpu.max_instances == ref["max_instances"]
    assert list(gpu.pci_device_ids) == ref["pci_device_ids"]
    assert gpu.placements_confirmed == ref["placements_status"].startswith("confirmed")
    assert [p.name for p in gpu.profiles] == [p["name"] for p in ref["profiles"]]
    for mine, theirs in zip(gpu.profiles, ref["profiles"], strict=True):
        assert mine.compute == theirs["compute_slices"], mine.name
        assert mine.memory == theirs["memory_slices"], mine.name
        assert mine.max_instances == theirs["max_instances"], mine.name
        assert list(mine.starts) == [p["start"] for p in theirs["placements"]], mine.name
        assert all(p["size"] == mine.memory for p in theirs["placements"]), mine.name
        assert list(mine.unconfirmed) == theirs.get("unconfirmed", []), mine.name
        if theirs["memory_mib"] is None:
            assert mine.memory_estimated, f"{name} {mine.name} has no measured size"
        else:
            assert (mine.memory_mib, mine.memory_estimated) == (theirs["memory_mib"], False)


def test_estimates_never_exceed_a_measured_profile_of_equal_or_more_slices() -> None:
    for gpu in CATALOG.gpus:
        measured = [p for p in gpu.profiles if not p.memory_estimated]
        for estimate in gpu.estimated_profiles:
            bigger = [p for p in measured if p.memory >= estimate.memory]
            assert all(estimate.memory_mib <= p.memory_mib for p in bigger), (gpu.name, estimate)


@pytest.mark.parametrize(
    ("alias", "model"),
    [
        ("h100", "H100-80GB"),
        ("H100", "H100-80GB"),
        ("nvidia-h100-80gb", "H100-80GB"),
        ("nvidia-h100-mega-80gb", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"),
        ("A100-SXM4-40GB", "A100-40GB"),
        ("nvidia-tesla-a100", "A100-40GB"),
        ("a100-sxm4-80gb", "A100-80GB"),
        ("nvidia-a100-80gb", "A100-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("h100-nvl", "H100-94GB"),
        ("NVIDIA-H100-NVL", "H100-94GB"),
        ("NVIDIA GH200 480GB", "H100-96GB"),
        ("gh200", "GH200-144GB"),
        ("nvidia-h200-141gb", "H200-141GB"),
        ("NVIDIA-H200", "H200-141GB"),
        ("nvidia-b200", "B200-180GB"),
        ("NVIDIA-B200", "B200-180GB"),
        ("a30", "A30-24GB"),
        ("gb200", "GB200"),
    ],
)
def test_aliases_resolve(alias: str, model: str) -> None:
    assert resolve_gpu(alias).name == model


def test_aliases_are_unambiguous() -> None:
    seen: dict[str, str] = {}
    for gpu in CATALOG.gpus:
        for alias in (gpu.name, *gpu.aliases):
            key = alias.lower().replace(" ", "-")
            assert seen.setdefault(key, gpu.name) == gpu.name, f"{alias} names two models"


def test_unknown_gpu_lists_known_models() -> None:
    with pytest.raises(MigError, match=r"unknown GPU 'v100'; known models: A30-24GB, A100-40GB"):
        resolve_gpu("v100")


def test_mixed_strategy_resource_names() -> None:
    gpu = resolve_gpu("h100")
    assert gpu.profile("1g.10gb").resource == "nvidia.com/mig-1g.10gb"
    assert gpu.profile("1g.10gb+me").resource == "nvidia.com/mig-1g.10gb.me"
    assert gpu.profile("nvidia.com/mig-1g.10gb.me").name == "1g.10gb+me"


def test_profile_names_differ_per_model() -> None:
    # 1g.10gb takes two memory slices on A100-40GB but one on H100-80GB.
    assert resolve_gpu("a100-40gb").profile("1g.10gb").memory == 2
    assert resolve_gpu("h100").profile("1g.10gb").memory == 1
