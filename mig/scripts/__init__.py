"""The POSIX shell scripts the project's Jobs run (kubectl and sh only)."""

from __future__ import annotations

from importlib.resources import files


def load(name: str) -> str:
    return files(__name__).joinpath(name).read_text(encoding="utf-8")
