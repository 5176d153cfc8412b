"""The POSIX shell scripts the project's Jobs run: the node Jobs need kubectl and sh only; a
profiling run, the engine image's own vllm and python3; the populate Job, the engine image's
huggingface_hub (and `engine_files.py`, the Python program it runs)."""

from __future__ import annotations

import re
from importlib.resources import files

from mig_inference.names.labels import (
    CORDONED_FOR_ANNOTATION,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_DRIVER,
    DRA_NODE_LABEL,
    DRA_PLUGIN_POD_SELECTOR,
    GPU_DEPLOY_LABEL_PREFIX,
    MIG_CONFIG_LABEL,
    MIG_MANAGER_POD_SELECTOR,
    MIG_STATE_LABEL,
    PAUSED_FOR_MIG_CHANGE,
    POOL_LABEL,
    RELAXED_FROM_ANNOTATION,
    STARTUP_TAINT_KEY,
)
from mig_inference.spec.dra import EXTENDED_RESOURCE_MINOR

THROUGHPUT_MARKER = "mig-inference-throughput"
"""Starts the line a profiling run prints with its result."""


def _jsonpath(label: str) -> str:
    """A label key as a kubectl jsonpath field (dots escaped)."""
    return label.replace(".", "\\.")


PLACEHOLDERS = {
    "CONFIG_PATH": _jsonpath(MIG_CONFIG_LABEL),
    "STATE_PATH": _jsonpath(MIG_STATE_LABEL),
    "CORDON_PATH": _jsonpath(CORDONED_FOR_ANNOTATION),
    "RELAXED_PATH": _jsonpath(RELAXED_FROM_ANNOTATION),
    "CONFIG_LABEL": MIG_CONFIG_LABEL,
    "STATE_LABEL": MIG_STATE_LABEL,
    "POOL_LABEL": POOL_LABEL,
    "CORDON_ANNOTATION": CORDONED_FOR_ANNOTATION,
    "RELAXED_ANNOTATION": RELAXED_FROM_ANNOTATION,
    "DEPLOY_LABEL_PREFIX": GPU_DEPLOY_LABEL_PREFIX,
    "PAUSED_VALUE": PAUSED_FOR_MIG_CHANGE,
    "MIG_MANAGER_SELECTOR": MIG_MANAGER_POD_SELECTOR,
    "RESULT_MARKER": THROUGHPUT_MARKER,
    "DRA_PLUGIN_SELECTOR": DRA_PLUGIN_POD_SELECTOR,
    "DRA_DRIVER_NAME": DRA_DRIVER,
    "ALLOCATION_LABEL": DRA_NODE_LABEL,
    "DEVICE_PLUGIN_LABEL": DEVICE_PLUGIN_DEPLOY_LABEL,
    "BRIDGE_KUBERNETES_VERSION": f"1.{EXTENDED_RESOURCE_MINOR}",
    "STARTUP_TAINT_NAME": STARTUP_TAINT_KEY,
}
"""Words in the scripts that stand for the node labels (and the Kubernetes version the
extended-resource bridge needs), so each is named in one place."""

INCLUDE = re.compile(r"^\. \./(?P<name>[a-z_]+\.sh)\n", re.MULTILINE)
"""`. ./kube.sh` on a line of its own: the Job runs `sh -c SCRIPT` (no file beside it), so the
file is inlined there."""


def load(name: str) -> str:
    """A script with its includes inlined and its label placeholders filled in."""
    text = files(__name__).joinpath(name).read_text(encoding="utf-8")
    text = INCLUDE.sub(lambda m: files(__name__).joinpath(m["name"]).read_text("utf-8"), text)
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text


def program(name: str) -> str:
    """A Python program of this folder, as a Job runs it with `python3 -c` (verbatim)."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")
