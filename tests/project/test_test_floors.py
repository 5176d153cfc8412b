"""The tests are grouped by the floor they check (docs/contributing.md "How the layers are
checked"): tests/<floor>/test_*.py, where <floor> is a package or module of mig_inference with a
floor in the floors contract (.importlinter), or `project` for the checks of the repository as a
whole (docs, the wheel, the contracts, the release, the CI example). The helpers the tests share
(mocked, reference, fake_apiserver, ...) stay at the top of tests/, imported as `tests.<name>`."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PROJECT = "project"


def _floors() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    layers = parser["importlinter:contract:floors"]["layers"]
    return {m.strip() for m in re.split(r"[|:\n]", layers) if m.strip()} - {"__main__"}


def _test_folders() -> list[Path]:
    return sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.rglob("test_*.py")))


def test_no_test_file_sits_at_the_top_of_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_every_test_folder_names_a_floor() -> None:
    floors = _floors()
    folders = [p.name for p in _test_folders()]
    assert PROJECT in folders
    for name in folders:
        if name == PROJECT:
            continue
        assert name in floors, f"tests/{name}/: no floor of that name in .importlinter"
        module = ROOT / "mig_inference" / name
        assert module.is_dir() or module.with_suffix(".py").is_file(), name


def test_each_floor_folder_is_a_package_of_test_files_one_level_deep() -> None:
    for folder in _test_folders():
        assert (folder / "__init__.py").is_file(), f"tests/{folder.name}/ has no __init__.py"
        deeper = [p for p in folder.rglob("test_*.py") if p.parent != folder]
        assert deeper == [], f"test files below tests/{folder.name}/: {deeper}"


def test_a_test_file_name_is_used_once() -> None:
    names = [p.name for p in TESTS.glob("*/test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
