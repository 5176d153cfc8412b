"""Every value a catalog model cites (`cite:`) against the source file it names, where that file
is in ../shared/reference: NVIDIA's GPU Operator ConfigMap and mig-parted v0.15.0 config, the
per-GPU table of mig-parted's builder test, GKE's MIG partitioner, and pci.ids.

Sources that are web pages or issue threads (NVIDIA's MIG guide, release notes, `-lgip`
transcripts) are not on disk; `test_blackwell_models_are_checked_on_disk` makes sure each
Blackwell model's names, counts, `all-balanced` and device IDs are nonetheless checked against at
least one file here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from importlib import resources
from typing import Any

import pytest
import yaml

from mig_inference.gpus.catalog import GpuModel, load_catalog
from tests.reference import (
    mig_parted_v015_configs,
    nvidia_mig_parted_configs,
    reference_file,
)

CATALOG = load_catalog()
BLACKWELL = ("B200-180GB", "GB200", "B300-269GB", "GB300", "RTX-PRO-6000-96GB")
MUST_BE_CHECKED = ("profiles", "max", "balanced", "pci_device_ids")
BUILDER_TEST = "dra/nvidia/mig-parted-v0.15.0/pkg/mig/builder/builder_test.go"
GKE_PARTITIONER = (
    "dra/gke/container-engine-accelerators-992db8125755/partition_gpu/partition_gpu.go"
)
PCI_IDS = "dra/nvidia/pci.ids-2026.08.22-nvidia-blackwell-excerpt.txt"


@cache
def raw_catalog() -> dict[str, Any]:
    """The shipped catalog as PyYAML's pure-Python loader reads it: the index, with each MIG
    model's file in place of its name."""
    data = resources.files("mig_inference").joinpath("data")

    def read(name: str) -> Any:
        return yaml.safe_load(data.joinpath(name).read_text(encoding="utf-8"))

    index: dict[str, Any] = read("catalog.yaml")
    return {**index, "gpus": {name: read(f"gpus/{name}.yaml") for name in index["gpus"]}}


def citations(model: str) -> dict[str, list[str]]:
    cite: dict[str, list[str]] = raw_catalog()["gpus"][model].get("cite") or {}
    return cite


# --- NVIDIA's named configs (GPU Operator v26.7.0 ConfigMap, mig-parted v0.15.0) --------------


def _config_name(profile: str) -> str:
    # mig-parted's normalizeProfileName (builder_test.go L178-196): "+" is written ".".
    return "all-" + profile.replace("+", ".")


def _entry_for(entries: list[dict[str, Any]], gpu: GpuModel) -> dict[str, Any] | None:
    """The entry of a named config that applies to `gpu`: one whose device filter names one of
    its device IDs, else one without a filter."""
    for entry in entries:
        wanted = entry.get("device-filter")
        ids = [wanted] if isinstance(wanted, str) else list(wanted or [])
        if set(ids) & set(gpu.pci_device_ids):
            return entry
    return next((e for e in entries if "device-filter" not in e), None)


def _check_named_configs(
    configs: dict[str, list[dict[str, Any]]], gpu: GpuModel, field: str, _part: str
) -> None:
    if field in ("profiles", "max"):
        for profile in gpu.profiles:
            name = _config_name(profile.name)
            assert name in configs, f"NVIDIA has no {name} for {gpu.name}"
            entry = _entry_for(configs[name], gpu)
            assert entry is not None, f"NVIDIA's {name} has no entry for {gpu.name}"
            assert entry["mig-devices"] == {profile.name: profile.max_instances}, name
    elif field == "balanced":
        [entry] = [
            e
            for e in configs["all-balanced"]
            if set(gpu.pci_device_ids) & set(e.get("device-filter") or [])
        ]
        assert entry["mig-devices"] == dict(gpu.balanced)
    elif field == "pci_device_ids":
        filtered = {
            device
            for entries in configs.values()
            for entry in entries
            for device in (
                [entry["device-filter"]]
                if isinstance(entry.get("device-filter"), str)
                else entry.get("device-filter") or []
            )
        }
        assert set(gpu.pci_device_ids) <= filtered
    else:
        raise AssertionError(f"NVIDIA's configs give no {field}")


# --- mig-parted's builder_test.go: {Name, MaxCount} per GPU, "from the MIG user guide" ----------


def _builder_table(block: str) -> list[tuple[str, int]]:
    text = reference_file(BUILDER_TEST).read_text()
    start = text.index(f'\t"{block}": {{\n')
    body = text[start : text.index("\n\t},\n", start)]
    return [(n, int(c)) for n, c in re.findall(r'Name: "([^"]+)", MaxCount: (\d+)', body)]


def _check_builder_test(gpu: GpuModel, field: str, block: str) -> None:
    table = _builder_table(block)
    assert table, f"no {block} block in builder_test.go"
    if field == "profiles":
        assert [p.name for p in gpu.profiles] == [name for name, _ in table]
    elif field == "max":
        assert {p.name: p.max_instances for p in gpu.profiles} == dict(table)
    else:
        raise AssertionError(f"builder_test.go gives no {field}")


# --- GKE's partitioner: max count per partition size, grouped by accelerator comments ---------


def _gke_max_counts() -> dict[str, dict[str, int]]:
    text = reference_file(GKE_PARTITIONER).read_text()
    body = text[text.index("partitionSizeMaxCount = map[string]int{") :]
    body = body[: body.index("\n}\n")]
    counts: dict[str, dict[str, int]] = {}
    accelerators: list[str] = []
    for line in body.splitlines()[1:]:
        comment = re.fullmatch(r"\s*//\s*(.+)", line)
        entry = re.fullmatch(r'\s*"([^"]+)":\s*(\d+),', line)
        if comment:
            accelerators = [a.strip() for a in comment.group(1).split(",")]
        elif entry:
            for accelerator in accelerators:
                counts.setdefault(accelerator, {})[entry.group(1)] = int(entry.group(2))
    return counts


def _gke_gpu_names() -> dict[str, str]:
    """accelerator -> the `nvidia-smi` name prefix GKE matches (partition_gpu.go L141-150)."""
    text = reference_file(GKE_PARTITIONER).read_text()
    return {
        accelerator: name
        for name, accelerator in re.findall(r'=\s*"(NVIDIA [^"]+)"\s*//\s*(\S+)', text)
    }


def _check_gke(gpu: GpuModel, field: str, accelerator: str) -> None:
    sizes = _gke_max_counts()[accelerator]
    ours = {p.name: p.max_instances for p in gpu.profiles}
    if field == "profiles":
        assert set(sizes) <= set(ours)
    elif field == "max":
        assert {name: ours.get(name) for name in sizes} == sizes
    elif field == "aliases":
        assert accelerator in gpu.aliases
        prefix = _gke_gpu_names()[accelerator]
        assert any(alias.startswith(prefix) for alias in gpu.aliases), prefix
    else:
        raise AssertionError(f"GKE's partitioner gives no {field}")


# --- pci.ids (NVIDIA Blackwell lines) --------------------------------------------------------

PCI_NAMES = {
    "B200-180GB": "GB100 [B200]",
    "GB200": "GB100 [HGX GB200]",
    "B300-269GB": "GB110 [B300 SXM6 AC]",
    "GB300": "GB110 [GB300]",
    "RTX-PRO-6000-96GB": "GB202GL [RTX PRO 6000 Blackwell Server Edition]",
}


def _check_pci_ids(gpu: GpuModel, field: str, _part: str) -> None:
    assert field == "pci_device_ids", f"pci.ids gives no {field}"
    lines = dict(re.findall(r"^\t([0-9a-f]{4})  (.+)$", reference_file(PCI_IDS).read_text(), re.M))
    for device in gpu.pci_device_ids:
        assert device.endswith("10DE"), device  # vendor 10de, NVIDIA
        assert lines.get(device[2:6].lower()) == PCI_NAMES[gpu.name], device


Checker = Callable[[GpuModel, str, str], None]
ON_DISK: dict[str, Checker] = {
    "GO-CM": lambda gpu, field, part: _check_named_configs(
        nvidia_mig_parted_configs(), gpu, field, part
    ),
    "MP-CFG": lambda gpu, field, part: _check_named_configs(
        mig_parted_v015_configs(), gpu, field, part
    ),
    "MP-TEST": _check_builder_test,
    "GKE-PART": _check_gke,
    "PCIIDS": _check_pci_ids,
}


def _cases() -> Iterator[tuple[str, str, str]]:
    for model in raw_catalog()["gpus"]:
        for field, keys in citations(model).items():
            for key in keys:
                if key.partition(":")[0] in ON_DISK:
                    yield model, field, key


@pytest.mark.parametrize(("model", "field", "key"), list(_cases()))
def test_cited_value_matches_its_source(model: str, field: str, key: str) -> None:
    source, _, part = key.partition(":")
    ON_DISK[source](CATALOG.gpu(model), field, part)


@pytest.mark.parametrize("model", BLACKWELL)
def test_blackwell_models_are_checked_on_disk(model: str) -> None:
    checked = {field for name, field, _ in _cases() if name == model}
    assert set(MUST_BE_CHECKED) <= checked, f"{model}: nothing on disk checks {MUST_BE_CHECKED}"


@pytest.mark.parametrize("model", BLACKWELL)
def test_every_citation_names_a_source_of_the_model(model: str) -> None:
    sources = raw_catalog()["sources"]
    listed = raw_catalog()["gpus"][model]["sources"]
    for keys in citations(model).values():
        for key in keys:
            source = key.partition(":")[0]
            assert source in sources and source in listed, f"{model} cites {key}"


def test_a_wrong_value_is_caught() -> None:
    # The checkers can fail: a GPU whose counts or all-balanced differ from NVIDIA's is refused.
    from msgspec.structs import replace

    b300 = CATALOG.gpu("B300-269GB")
    doubled = replace(b300, profiles=(replace(b300.profiles[0], max_instances=8),))
    with pytest.raises(AssertionError):
        _check_named_configs(mig_parted_v015_configs(), doubled, "max", "")
    with pytest.raises(AssertionError):
        _check_named_configs(
            nvidia_mig_parted_configs(), replace(b300, balanced=(("1g.34gb", 7),)), "balanced", ""
        )
    rtx = CATALOG.gpu("RTX-PRO-6000-96GB")
    with pytest.raises(AssertionError):
        _check_builder_test(replace(rtx, profiles=rtx.profiles[1:]), "profiles", "RTX-PRO-6000")
    with pytest.raises(AssertionError):
        _check_pci_ids(replace(rtx, pci_device_ids=("0x2BB110DE",)), "pci_device_ids", "")


# NVIDIA's MIG guide (UG-PROFILES, supported-mig-profiles.html, read via the text copy the
# catalog cites): fraction of memory per profile. Not on disk, so transcribed here.
PUBLISHED_MEMORY_FRACTIONS = {
    "B200-180GB": {
        "1g.23gb": (1, 8), "1g.23gb+me": (1, 8), "1g.45gb": (2, 8), "2g.45gb": (2, 8),
        "3g.90gb": (4, 8), "4g.90gb": (4, 8), "7g.180gb": (1, 1),
    },
    "RTX-PRO-6000-96GB": {
        "1g.24gb": (1, 4), "1g.24gb+me": (1, 4), "1g.24gb+gfx": (1, 4), "1g.24gb+me.all": (1, 4),
        "1g.24gb-me": (1, 4), "2g.48gb": (1, 2), "2g.48gb+gfx": (1, 2), "2g.48gb+me.all": (1, 2),
        "2g.48gb-me": (1, 2), "4g.96gb": (1, 1), "4g.96gb+gfx": (1, 1),
    },
}  # fmt: skip


@pytest.mark.parametrize("model", list(PUBLISHED_MEMORY_FRACTIONS))
def test_memory_slices_give_nvidias_published_fractions(model: str) -> None:
    gpu = CATALOG.gpu(model)
    assert "UG-PROFILES" in citations(model)["memory_fractions"]
    fractions = PUBLISHED_MEMORY_FRACTIONS[model]
    assert [p.name for p in gpu.profiles] == list(fractions)
    for profile in gpu.profiles:
        numerator, denominator = fractions[profile.name]
        assert profile.memory * denominator == gpu.memory_slices * numerator, profile.name
