"""The POSIX shell scripts the project's Jobs run (kubectl and sh only)."""

from __future__ import annotations

from importlib.resources import files

from mig_inference.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL, POOL_LABEL


def _jsonpath(label: str) -> str:
    """A label key as a kubectl jsonpath field (dots escaped)."""
    return label.replace(".", "\\.")


PLACEHOLDERS = {
    "CONFIG_PATH": _jsonpath(MIG_CONFIG_LABEL),
    "STATE_PATH": _jsonpath(MIG_STATE_LABEL),
    "CONFIG_LABEL": MIG_CONFIG_LABEL,
    "STATE_LABEL": MIG_STATE_LABEL,
    "POOL_LABEL": POOL_LABEL,
}
"""Words in the scripts that stand for the node labels, so the labels are named in one place."""


def load(name: str) -> str:
    """A script with its label placeholders filled in."""
    text = files(__name__).joinpath(name).read_text(encoding="utf-8")
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text
