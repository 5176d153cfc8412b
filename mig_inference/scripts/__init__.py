"""The POSIX shell scripts the project's Jobs run: the node Jobs need kubectl and sh only; a
profiling run, the engine image's own vllm and python3."""

from __future__ import annotations

from importlib.resources import files

from mig_inference.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL, POOL_LABEL

THROUGHPUT_MARKER = "mig-inference-throughput"
"""Starts the line a profiling run prints with its result."""


def _jsonpath(label: str) -> str:
    """A label key as a kubectl jsonpath field (dots escaped)."""
    return label.replace(".", "\\.")


PLACEHOLDERS = {
    "CONFIG_PATH": _jsonpath(MIG_CONFIG_LABEL),
    "STATE_PATH": _jsonpath(MIG_STATE_LABEL),
    "CONFIG_LABEL": MIG_CONFIG_LABEL,
    "STATE_LABEL": MIG_STATE_LABEL,
    "POOL_LABEL": POOL_LABEL,
    "RESULT_MARKER": THROUGHPUT_MARKER,
}
"""Words in the scripts that stand for the node labels, so the labels are named in one place."""


def load(name: str) -> str:
    """A script with its label placeholders filled in."""
    text = files(__name__).joinpath(name).read_text(encoding="utf-8")
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text
