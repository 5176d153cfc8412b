"""The catalog file against the reference catalog, and GPU name resolution.

tests/gpus/test_catalog_sources.py checks the Blackwell models' cited values against NVIDIA's files.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import (
    INDEX,
    catalog_document,
    load_catalog,
    model_file,
    resolve_gpu,
)
from mig_inference.installation import PACKAGE_DIR
from tests.reference import reference_catalog

CATALOG = load_catalog()
MODELS = [g.name for g in CATALOG.gpus]
# Added with issue 24 from NVIDIA's configs and the Blackwell reference
# (../shared/reference/dra/nvidia/blackwell-mig-profiles.md); mig-catalog.json predates them.
ADDED_AFTER_REFERENCE_CATALOG = ("B300-269GB", "GB300", "RTX-PRO-6000-96GB")
TRANSCRIBED = [name for name in MODELS if name not in ADDED_AFTER_REFERENCE_CATALOG]
# Values the Blackwell re-check changed on purpose, (reference catalog's value, catalog's value):
# B200's 1g.23gb reads 22.00 GiB (22528 MiB) with the driver of mig-parted#166 (2025-01) and
# 20.50 GiB (20992 MiB) with the later one of mig-parted#187 (2025-03); the catalog keeps the lower.
DELIBERATE_CHANGES = {
    ("B200-180GB", "1g.23gb"): (22528, 20992),
    ("B200-180GB", "1g.23gb+me"): (22528, 20992),
}


def test_every_required_model_is_present() -> None:
    required = {
        "A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H100-96GB",
        "GH200-144GB", "H200-141GB", "B200-180GB", "GB200", "B300-269GB", "GB300",
        "RTX-PRO-6000-96GB",
    }  # fmt: skip
    assert required <= set(MODELS)


def test_reference_catalog_holds_exactly_the_transcribed_models() -> None:
    assert set(reference_catalog()) - {"_meta"} == set(TRANSCRIBED)


@pytest.mark.parametrize("name", TRANSCRIBED)
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
        elif (name, mine.name) in DELIBERATE_CHANGES:
            was, now = DELIBERATE_CHANGES[name, mine.name]
            assert theirs["memory_mib"] == was, "the reference changed: drop the deviation"
            assert (mine.memory_mib, mine.memory_estimated) == (now, False)
        else:
            assert (mine.memory_mib, mine.memory_estimated) == (theirs["memory_mib"], False)


def test_estimates_never_exceed_a_measured_profile_of_equal_or_more_slices() -> None:
    for gpu in CATALOG.gpus:
        measured = [p for p in gpu.profiles if not p.memory_estimated]
        for estimate in gpu.estimated_profiles:
            bigger = [p for p in measured if p.memory >= estimate.memory]
            assert all(estimate.memory_mib <= p.memory_mib for p in bigger), (gpu.name, estimate)


def test_models_with_no_measured_size_scale_the_lowest_sibling() -> None:
    # B300 and GB300 have no measured profile: MiB per memory slice = a sibling's measured
    # 1-slice profile x the ratio of the full profiles' sizes (7g.269gb / 7g.180gb), the lowest
    # sibling kept, floored to 64 MiB.
    siblings = [
        (resolve_gpu("b200").profile("1g.23gb").memory_mib, 180),
        (resolve_gpu("gb200").profile("1g.23gb").memory_mib, 186),
    ]
    for name, full_gb in (("B300-269GB", 269), ("GB300", 278)):
        gpu = CATALOG.gpu(name)
        per_slice = int(min(mib * full_gb / size for mib, size in siblings)) // 64 * 64
        assert all(p.memory_estimated for p in gpu.profiles)
        assert [p.memory_mib for p in gpu.profiles] == [p.memory * per_slice for p in gpu.profiles]
        # Below the nominal share of one memory slice (the name's GB over 8 slices).
        assert per_slice < full_gb * 1024 / gpu.memory_slices
        assert "B200-180GB" in gpu.estimate_note and f"{per_slice:,}" in gpu.estimate_note


def test_full_profile_names_give_the_nominal_memory() -> None:
    # go-nvlib names a profile after ceil(device GiB) x its fraction (NVLIB-NAME), so the full
    # profile's name carries the memory MIG sees (the catalog's memory_gib).
    for gpu in CATALOG.gpus:
        assert gpu.full_profile.name.split(".")[1].startswith(f"{gpu.memory_gib}gb"), gpu.name


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
        ("nvidia-gb200", "GB200"),
        ("NVIDIA GB200", "GB200"),
        ("b300", "B300-269GB"),
        ("B300", "B300-269GB"),
        ("NVIDIA B300 SXM6 AC", "B300-269GB"),
        ("NVIDIA-B300-SXM6-AC", "B300-269GB"),
        ("gb300", "GB300"),
        ("NVIDIA GB300", "GB300"),
        ("rtx-pro-6000", "RTX-PRO-6000-96GB"),
        ("nvidia-rtx-pro-6000", "RTX-PRO-6000-96GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-96GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-96GB"),
    ],
)
def test_aliases_resolve(alias: str, model: str) -> None:
    assert resolve_gpu(alias).name == model


def test_aliases_are_unambiguous() -> None:
    """No name or alias names two models: so a model's own name resolves to it without a
    search of the others' aliases (`Catalog.gpu` reads only that model's file)."""
    seen: dict[str, str] = {}
    for gpu in CATALOG.every_gpu:
        for alias in (gpu.name, *gpu.aliases):
            key = re.sub(r"[^a-z0-9]+", "-", alias.lower()).strip("-")
            assert seen.setdefault(key, gpu.name) == gpu.name, f"{alias} names two models"


def test_unknown_gpu_lists_known_models() -> None:
    with pytest.raises(MigError, match=r"unknown GPU 'v100'; known models: A30-24GB, A100-40GB"):
        resolve_gpu("v100")


def test_mixed_strategy_resource_names() -> None:
    gpu = resolve_gpu("h100")
    assert gpu.profile("1g.10gb").resource == "nvidia.com/mig-1g.10gb"
    assert gpu.profile("1g.10gb+me").resource == "nvidia.com/mig-1g.10gb.me"
    assert gpu.profile("nvidia.com/mig-1g.10gb.me").name == "1g.10gb+me"


@pytest.mark.parametrize(
    ("profile", "resource"),
    [
        # k8s-device-plugin v0.20.0 (internal/rm/rm.go L145): "mig-" + the profile, "+" as ".".
        ("1g.24gb", "nvidia.com/mig-1g.24gb"),
        ("1g.24gb+me", "nvidia.com/mig-1g.24gb.me"),
        ("1g.24gb+gfx", "nvidia.com/mig-1g.24gb.gfx"),
        ("1g.24gb+me.all", "nvidia.com/mig-1g.24gb.me.all"),
        ("1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
        ("2g.48gb+me.all", "nvidia.com/mig-2g.48gb.me.all"),
        ("4g.96gb+gfx", "nvidia.com/mig-4g.96gb.gfx"),
    ],
)
def test_variant_resource_names(profile: str, resource: str) -> None:
    gpu = resolve_gpu("rtx-pro-6000")
    assert gpu.profile(profile).resource == resource
    assert gpu.profile(resource).name == profile


# An extended resource's name after the `nvidia.com/` prefix: a qualified name of 63 at most.
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@pytest.mark.parametrize("name", MODELS)
def test_resources_are_valid_distinct_and_resolve_back(name: str) -> None:
    gpu = CATALOG.gpu(name)
    resources = [p.resource for p in gpu.profiles]
    assert len(set(resources)) == len(resources)
    for profile, resource in zip(gpu.profiles, resources, strict=True):
        prefix, _, rest = resource.partition("/")
        assert prefix == "nvidia.com" and QUALIFIED_NAME.fullmatch(rest), resource
        assert gpu.profile(resource) == profile
        assert gpu.profile(rest.removeprefix("mig-")) == profile


@pytest.mark.parametrize(
    ("profile", "variant", "extensions", "every_engine", "no_engine"),
    [
        ("1g.24gb", "", False, False, False),
        ("1g.24gb+me", "+me", True, False, False),
        ("1g.24gb+me.all", "+me.all", True, True, False),
        ("1g.24gb-me", "-me", False, False, True),
        ("1g.24gb+gfx", "+gfx", False, False, False),
    ],
)
def test_variant_semantics(
    profile: str, variant: str, extensions: bool, every_engine: bool, no_engine: bool
) -> None:
    found = resolve_gpu("rtx-pro-6000").profile(profile)
    assert (found.variant, found.media_extensions) == (variant, extensions)
    assert (found.all_media_engines, found.no_media_engines) == (every_engine, no_engine)


def test_profile_names_differ_per_model() -> None:
    # 1g.10gb takes two memory slices on A100-40GB but one on H100-80GB.
    assert resolve_gpu("a100-40gb").profile("1g.10gb").memory == 2
    assert resolve_gpu("h100").profile("1g.10gb").memory == 1


READS = """
import json, sys
from mig_inference.gpus import catalog
read = []
real = catalog.package_text
catalog.package_text = lambda relative: read.append(relative) or real(relative)
names = [catalog.resolve_gpu(name).name for name in sys.argv[1:]]
print(json.dumps([names, read]))
"""


def files_read_to_resolve(*names: str) -> tuple[list[str], list[str]]:
    """In a fresh interpreter: the models `names` resolve to, and the catalog files read."""
    done = subprocess.run(
        [sys.executable, "-c", READS, *names], capture_output=True, text=True, check=True
    )
    resolved, read = json.loads(done.stdout)
    return resolved, read


def test_a_model_named_exactly_reads_only_its_own_file() -> None:
    assert files_read_to_resolve("H100-80GB", "h100-80gb") == (
        ["H100-80GB", "H100-80GB"], [INDEX, model_file("H100-80GB")]
    )  # fmt: skip
    assert files_read_to_resolve("L4-24GB") == (["L4-24GB"], [INDEX])


def test_a_model_estimated_from_siblings_reads_theirs_too() -> None:
    siblings = catalog_document()["gpus"]["B300-269GB"]["estimate_from"]
    resolved, read = files_read_to_resolve("B300-269GB")
    assert resolved == ["B300-269GB"] and siblings
    assert read == [INDEX, model_file("B300-269GB"), *map(model_file, siblings)]


def test_an_alias_is_looked_up_in_every_model() -> None:
    resolved, read = files_read_to_resolve("h100")
    assert resolved == ["H100-80GB"]
    assert sorted(read[1:]) == sorted(model_file(name) for name in CATALOG.mig_models)


def test_the_index_lists_every_model_file_once() -> None:
    folder = Path(PACKAGE_DIR) / "data" / "gpus"
    assert sorted(CATALOG.mig_models) == sorted(f.stem for f in folder.glob("*.yaml"))
    assert len(set(CATALOG.mig_models)) == len(CATALOG.mig_models)
