"""Named configs against NVIDIA's shipped mig-parted config, and rendering."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, load_catalog, resolve_gpu
from mig_inference.gpus.migparted import (
    custom_config_name,
    dump,
    named_configs,
    render_named,
    resolve_config,
)
from tests.reference import mig_parted_v015_configs, nvidia_mig_parted_configs

CATALOG = load_catalog()
# NVIDIA's named configs as shipped: the GPU Operator v26.7.0 ConfigMap and mig-parted v0.15.0's
# own config-default.yaml (same configs, the all-balanced entries in another order).
NVIDIA_DOCUMENTS = {
    "gpu-operator-v26.7.0": nvidia_mig_parted_configs,
    "mig-parted-v0.15.0": mig_parted_v015_configs,
}


def _filter(entry: dict[str, Any]) -> list[str] | None:
    value = entry.get("device-filter")
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _applies(entry: dict[str, Any], gpu: GpuModel, device_id: str) -> bool:
    ids = _filter(entry)
    if ids is not None:
        return device_id in ids
    return all(gpu.has_profile(name) for name in (entry.get("mig-devices") or {}))


def _nvidia_cases(shipped: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    cases = []
    for name, entries in shipped.items():
        for gpu in CATALOG.gpus:
            for device_id in gpu.pci_device_ids:
                if any(_applies(e, gpu, device_id) for e in entries):
                    cases.append((name, gpu.name, device_id))
    return cases


@pytest.mark.parametrize("document", list(NVIDIA_DOCUMENTS))
def test_every_nvidia_named_config_and_device_filter_matches(document: str) -> None:
    shipped = NVIDIA_DOCUMENTS[document]()
    checked = 0
    models = set()
    for name, gpu_name, device_id in _nvidia_cases(shipped):
        gpu = CATALOG.gpu(gpu_name)
        entries = shipped[name]
        theirs = next(e for e in entries if _applies(e, gpu, device_id))
        rendered = render_named(gpu, name)
        assert list(rendered["mig-configs"]) == [name]
        [mine] = rendered["mig-configs"][name]
        assert mine["devices"] == theirs["devices"] == "all"
        assert mine["mig-enabled"] == theirs["mig-enabled"], (name, gpu_name)
        assert mine.get("mig-devices") == theirs.get("mig-devices"), (name, gpu_name)
        if mine.get("device-filter") is not None:
            assert device_id in mine["device-filter"]
        checked += 1
        models.add(gpu_name)
    assert checked > 60, f"only {checked} (config, device) pairs compared"
    assert models == {g.name for g in CATALOG.gpus}


@pytest.mark.parametrize("document", list(NVIDIA_DOCUMENTS))
@pytest.mark.parametrize("gpu_name", [g.name for g in CATALOG.gpus])
def test_our_named_configs_are_all_shipped_by_nvidia(gpu_name: str, document: str) -> None:
    gpu = CATALOG.gpu(gpu_name)
    shipped = NVIDIA_DOCUMENTS[document]()
    for name in named_configs(gpu):
        assert name in shipped, f"{name} for {gpu_name} is not one of NVIDIA's named configs"
        assert any(
            _applies(entry, gpu, device_id)
            for entry in shipped[name]
            for device_id in gpu.pci_device_ids
        ), f"NVIDIA's {name} has no entry for {gpu_name}"


def test_all_balanced_per_model() -> None:
    h100 = render_named(resolve_gpu("h100"), "all-balanced")["mig-configs"]["all-balanced"][0]
    assert h100["mig-devices"] == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
    a100 = render_named(resolve_gpu("a100-40gb"), "all-balanced")["mig-configs"]["all-balanced"]
    assert a100[0]["mig-devices"] == {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}


@pytest.mark.parametrize("document", list(NVIDIA_DOCUMENTS))
@pytest.mark.parametrize(
    ("gpu_name", "device_filter"),
    [
        ("B200-180GB", "0x290110DE"),
        ("GB200", "0x294110DE"),
        ("B300-269GB", "0x318210DE"),
        ("GB300", "0x31C210DE"),
        ("RTX-PRO-6000-96GB", "0x2BB510DE"),
    ],
)
def test_blackwell_all_balanced_is_nvidias(
    gpu_name: str, device_filter: str, document: str
) -> None:
    shipped = NVIDIA_DOCUMENTS[document]()
    [theirs] = [e for e in shipped["all-balanced"] if device_filter in e["device-filter"]]
    [mine] = render_named(CATALOG.gpu(gpu_name), "all-balanced")["mig-configs"]["all-balanced"]
    assert mine == {**theirs, "device-filter": [device_filter]}


def test_variant_config_names_are_nvidias() -> None:
    # mig-parted writes `+` as `.` and keeps `-me` (builder_test.go normalizeProfileName).
    names = named_configs(resolve_gpu("rtx-pro-6000"))
    assert {"all-1g.24gb.me.all", "all-1g.24gb-me", "all-4g.96gb.gfx", "all-2g.48gb-me"} <= set(
        names
    )


def test_plus_is_written_dot_in_config_names() -> None:
    assert "all-1g.10gb.me" in named_configs(resolve_gpu("h100"))
    name = resolve_config(resolve_gpu("h100"), "1g.10gb+me=1,1g.10gb=5").name
    assert name == "custom-1x1g.10gb.me-5x1g.10gb"


def test_long_custom_names_stay_label_safe() -> None:
    layout = resolve_config(
        resolve_gpu("h100"), "1g.10gb+me=1,1g.10gb=1,1g.20gb=1,2g.20gb=1"
    ).layout
    assert layout is not None
    name = custom_config_name(layout)
    assert len(name) <= 63 and "+" not in name


def test_custom_layout_equal_to_a_named_one_uses_nvidias_name() -> None:
    resolved = resolve_config(resolve_gpu("h100"), "1g.10gb=2,2g.20gb=1,3g.40gb=1")
    assert (resolved.name, resolved.named) == ("all-balanced", True)


def test_custom_layout_document_is_v1_and_parses() -> None:
    text = dump(render_named(resolve_gpu("h100"), "1g.10gb=3,2g.20gb=2"))
    doc = yaml.safe_load(text)
    assert doc["version"] == "v1"
    [entry] = doc["mig-configs"]["custom-2x2g.20gb-3x1g.10gb"]
    assert entry == {
        "device-filter": ["0x233010DE", "0x233110DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"2g.20gb": 2, "1g.10gb": 3},
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("all-9g.99gb", "not a named MIG config of H100-80GB; allowed: all-disabled"),
        ("3g.40gb=3", "exceeds its limit of 2"),
        ("4g.40gb=1,3g.40gb=1,1g.10gb=1", "compute slices"),
        ("1g.5gb=1", "not a MIG profile of H100-80GB"),
    ],
)
def test_bad_configs(config: str, message: str) -> None:
    with pytest.raises(MigError, match=message):
        render_named(resolve_gpu("h100"), config)
