"""NVIDIA's reference files in ../shared/reference: present in CI, absent in a user's clone."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MIG_SHARED_DIR", ROOT.parent / "shared"))
REFERENCE = SHARED / "reference"


def reference_file(relative: str) -> Path:
    """The reference file, or skip the test saying where it was looked for."""
    path = REFERENCE / relative
    if not path.is_file():
        pytest.skip(
            f"reference file {path} not found: these checks need the project's shared/ folder "
            "beside the clone (set MIG_SHARED_DIR to point elsewhere)"
        )
    return path


def reference_catalog() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(reference_file("mig-catalog.json").read_text())
    return data


def nvidia_mig_parted_configs() -> dict[str, list[dict[str, Any]]]:
    """`mig-configs` of the GPU Operator's default-mig-parted-config ConfigMap."""
    path = reference_file("nvidia/gpu-operator_default-mig-parted-config_configmap.yaml")
    configmap = yaml.safe_load(path.read_text())
    configs: dict[str, list[dict[str, Any]]] = yaml.safe_load(configmap["data"]["config.yaml"])[
        "mig-configs"
    ]
    return configs
