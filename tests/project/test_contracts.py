"""The layer contracts of .importlinter (`make contracts`): each one breaks when a copy of the
code gets an import that goes against it, and the contracts agree on where the floors are."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
FLOORS = "importlinter:contract:floors"
NO_PULUMI = "importlinter:contract:no-pulumi-below-components"
STRUCTS = "importlinter:contract:structs-not-dataclasses"


def _contracts() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    return parser


def _layers(contract: str) -> list[list[str]]:
    """The contract's layers from the top, each as its modules."""
    raw = _contracts()[contract]["layers"].strip().splitlines()
    return [[m.strip() for m in re.split(r"[|:]", line) if m.strip()] for line in raw]


def _floors() -> list[list[str]]:
    """The floors contract's layers as whole module names."""
    return [[f"mig_inference.{module}" for module in floor] for floor in _layers(FLOORS)]


def _split_at_policy() -> tuple[set[str], set[str]]:
    floors = _floors()
    [policy] = [i for i, floor in enumerate(floors) if "mig_inference.policy" in floor]
    above = {m for floor in floors[:policy] for m in floor} - {"mig_inference.__main__"}
    below = {m for floor in floors[policy + 1 :] for m in floor}
    return above, below


def test_the_pulumi_contract_covers_every_floor_below_the_components() -> None:
    _, below = _split_at_policy()
    sources = set(_contracts()[NO_PULUMI]["source_modules"].split())
    assert sources == below


def test_the_components_share_the_floor_of_policy() -> None:
    assert ["mig_inference.components", "mig_inference.policy"] in _floors()


def _copy_of_the_code(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__")
    for package in ("mig_inference",):
        shutil.copytree(ROOT / package, tree / package, ignore=ignore)
    shutil.copy(CONFIG, tree / ".importlinter")
    return tree


def _verdicts(tree: Path) -> dict[str, str]:
    """Each contract's name -> KEPT or BROKEN, as lint-imports reports them in `tree` (its
    packages, not the installed ones: the working directory comes first on the import path)."""
    run = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400", "PYTHONPATH": ""},
        check=False,
    )
    names = {section: _contracts()[section]["name"] for section in (FLOORS, NO_PULUMI, STRUCTS)}
    verdicts = {}
    for section, name in names.items():
        found = re.search(re.escape(name) + r" (KEPT|BROKEN)", run.stdout)
        assert found, f"{name} not reported:\n{run.stdout}\n{run.stderr}"
        verdicts[section] = found.group(1)
    assert run.returncode == (1 if "BROKEN" in verdicts.values() else 0), run.stdout
    return verdicts


def test_an_unchanged_copy_keeps_every_contract(tmp_path: Path) -> None:
    tree = _copy_of_the_code(tmp_path)
    assert set(_verdicts(tree).values()) == {"KEPT"}


RENDER_IN_SOLVING = "\n\ndef _renders() -> object:\n    from mig_inference.render import run_program\n\n    return run_program\n"
BREAKING_IMPORTS = [
    # The edge the contracts were written against: bench running the program itself.
    ("mig_inference/solving/bench.py", RENDER_IN_SOLVING, {FLOORS, NO_PULUMI}),
    ("mig_inference/spec/formats.py", "\nimport pulumi  # noqa\n", {NO_PULUMI}),
    (
        "mig_inference/rollout/rendered.py",
        "\nfrom mig_inference.changes import record  # noqa\n",
        {FLOORS},
    ),
    (
        "mig_inference/plan/served.py",
        "\nfrom mig_inference.components import planning  # noqa\n",
        {FLOORS, NO_PULUMI},
    ),
    (
        "mig_inference/components/planning.py",
        "\nfrom mig_inference.cli import main  # noqa\n",
        {FLOORS},
    ),
    ("mig_inference/reviews/__init__.py", '"""A package without a floor."""\n', {FLOORS}),
    ("mig_inference/plan/model.py", "\nimport dataclasses  # noqa\n", {STRUCTS}),
    # Only the two scripts run in the cluster are let off, not the rest of their package.
    ("mig_inference/verify/targets.py", "\nfrom dataclasses import field  # noqa\n", {STRUCTS}),
]


@pytest.mark.parametrize(("path", "added", "broken"), BREAKING_IMPORTS)
def test_an_import_against_a_contract_breaks_it(
    tmp_path: Path, path: str, added: str, broken: set[str]
) -> None:
    tree = _copy_of_the_code(tmp_path)
    target = tree / path
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as file:
        file.write(added)
    verdicts = _verdicts(tree)
    assert {section for section, verdict in verdicts.items() if verdict == "BROKEN"} == broken
