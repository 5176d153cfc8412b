"""Verbs that solve nothing start fast: they import neither HiGHS nor numpy, and the catalog is
parsed by libyaml's loader, which reads it exactly as the pure-Python loader and the stack-file
reader's yaml.v3 rules do."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import pytest
import yaml

from mig_inference.gpus.catalog import SAFE_LOADER
from mig_inference.stackfile.yamlfile import parse_yaml


def test_the_c_loader_reads_the_catalog_as_the_other_readers_do() -> None:
    text = resources.files("mig_inference").joinpath("data/catalog.yaml").read_text("utf-8")
    assert SAFE_LOADER is yaml.CSafeLoader, "PyYAML without libyaml: the catalog loads slowly"
    fast = yaml.load(text, Loader=SAFE_LOADER)
    assert fast == yaml.load(text, Loader=yaml.SafeLoader)
    assert fast == parse_yaml(text).value


@pytest.mark.parametrize(
    "argv",
    [["profiles", "--gpu", "h100"], ["gpus"], ["fit", "--gpu", "h100", "--memory-gib", "20"]],
)
def test_verbs_that_solve_nothing_import_no_solver(argv: list[str]) -> None:
    script = (
        "import sys\nfrom mig_inference.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = sorted(m for m in ('highspy', 'numpy') if m in sys.modules)\n"
        "print('imported:', heavy, file=sys.stderr)\nsys.exit(code or (3 if heavy else 0))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
