"""Where this copy of the package runs from: the files it ships (its data, the programs its Jobs
run), and, for the hints that say how to add what is missing, a clone of the repository (the
project's own `.venv`, made by `make` from `uv.lock`) or an installed wheel (pip and the
package's extras)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import mig_inference

if TYPE_CHECKING:
    from pathlib import Path

PACKAGE_DIR = os.path.dirname(mig_inference.__file__)


def package_text(relative: str) -> str:
    """A file shipped inside the package (`data/catalog.yaml`, `verify/probe.py`), read from the
    package's folder. The package is always installed as files (a wheel is unpacked, the clone
    is an editable install), so importlib.resources, whose import brings zipfile, tempfile and
    the archive codecs, would cost a short verb more than the reading; nor pathlib (see
    `stackfile.yamlfile.FilePath`)."""
    with open(os.path.join(PACKAGE_DIR, relative), encoding="utf-8") as file:
        return file.read()


CLONE_MARKERS = ("pyproject.toml", "uv.lock", "Makefile")
"""Files beside the package's folder in a clone, and nowhere in an installed wheel."""


def clone_root(package_dir: Path | None = None) -> Path | None:
    """The clone the package runs from (its folder `package_dir`, default this package's), or
    None for an installed wheel."""
    from pathlib import Path

    root = (package_dir or Path(mig_inference.__file__).resolve().parent).parent
    return root if all((root / name).is_file() for name in CLONE_MARKERS) else None


def extra_hint(extra: str, package_dir: Path | None = None) -> str:
    """How to install the package's `extra` where it runs: `make setup` in a clone (every
    cloud's SDK, from the lock file), pip and the extra for an installed wheel."""
    root = clone_root(package_dir)
    if root is not None:
        return (
            f"in this clone, make setup (every cloud's SDK, from uv.lock), or pip install -e "
            f"'{root}[{extra}]' in an environment of your own"
        )
    return f"pip install 'mig-inference[{extra}]' (or mig-inference[all])"
