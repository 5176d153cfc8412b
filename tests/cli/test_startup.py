"""Verbs that solve nothing start fast: they import neither HiGHS nor numpy, and the catalog is
parsed by libyaml's loader, which reads it exactly as the pure-Python loader and the stack-file
reader's yaml.v3 rules do. The planner's own verbs solve with HiGHS's compiled core alone, never
importing numpy (highspy's Python layer would: most of a `pack` process's start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.cli.bench_processes import installed_interpreter
from mig_inference.gpus.catalog import SAFE_LOADER
from mig_inference.solving.fleet import fleet_document
from mig_inference.solving.throughput import parvagpu_scenarios
from mig_inference.stackfile.yamlfile import parse_yaml

ROOT = Path(__file__).resolve().parent.parent.parent


CATALOG_FILES = sorted(
    f"gpus/{model.name}"
    for model in resources.files("mig_inference").joinpath("data/gpus").iterdir()
    if model.name.endswith(".yaml")
)


@pytest.mark.parametrize(
    "data",
    [
        "catalog.yaml", *CATALOG_FILES, "prices.yaml", "load_bandwidth.yaml",
        "throughput-parvagpu-a100-80gb.yaml",
    ],
)  # fmt: skip
def test_the_c_loader_reads_the_shipped_data_as_the_other_readers_do(data: str) -> None:
    """Each data file as PyYAML's pure-Python loader reads it (the catalog's files also as
    yaml.v3's rules do; the others hold dates, which PyYAML reads as dates and those rules as
    text)."""
    text = resources.files("mig_inference").joinpath(f"data/{data}").read_text("utf-8")
    assert SAFE_LOADER is yaml.CSafeLoader, "PyYAML without libyaml: the data loads slowly"
    fast = yaml.load(text, Loader=SAFE_LOADER)
    assert fast == yaml.load(text, Loader=yaml.SafeLoader)
    if data == "catalog.yaml" or data.startswith("gpus/"):
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


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter that starts as one with the package installed from its wheel: the
    clone's editable install imports pathlib (its finder) in every interpreter of `.venv`."""
    return installed_interpreter(tmp_path_factory.mktemp("installed"))


def _imported_by(
    argv: list[str], modules: tuple[str, ...], python: str = sys.executable
) -> tuple[int, list[str], str]:
    """Run the command line's `main(argv)` in a fresh interpreter (`python`): its exit code,
    which of `modules` it imported, and its standard error."""
    script = (
        "import sys\nfrom mig_inference.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(sorted(m for m in {modules!r} if m in sys.modules), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    *_, imported = done.stderr.strip().splitlines() or [""]
    return done.returncode, yaml.safe_load(imported), done.stderr


def test_pack_solves_with_the_highs_core_and_never_imports_numpy(
    tmp_path: Path, installed_python: str
) -> None:
    """Nor hashlib (OpenSSL with it): `pack` names no mig-parted config by its hash; nor
    typing_extensions and inspect (`mig_inference/__init__.py`); nor shutil (the parser measures
    the terminal only for help, `cli._Parser`); nor pathlib (`stackfile.yamlfile.FilePath`)."""
    fleet = tmp_path / "slo1.yaml"
    [slo1, *_] = parvagpu_scenarios("single")
    fleet.write_text(yaml.safe_dump(fleet_document(list(slo1.workloads))), encoding="utf-8")
    argv = ["pack", str(fleet), "--gpu", "A100-80GB", "--json"]
    modules = (
        "numpy", "highspy", "highspy._core", "hashlib", "typing_extensions", "inspect", "shutil",
        "pathlib",
    )  # fmt: skip
    code, imported, stderr = _imported_by(argv, modules, installed_python)
    assert code == 0, stderr
    assert imported == ["highspy._core"], "numpy (or highspy's Python layer) imported by pack"


@pytest.mark.parametrize("stack", ["gke-h100", "eks-p5-auto"])
def test_plan_of_a_shipped_stack_never_imports_numpy(stack: str, installed_python: str) -> None:
    """gke-h100 has fixed layouts; eks-p5-auto's `mig: auto` pool is packed by the planner.
    Nor does it import importlib.resources (zipfile, tempfile and the archive codecs with it):
    the package's data files are read from its folder (`installation.package_text`). Nor
    typing_extensions and inspect (`mig_inference/__init__.py`), nor shutil (`cli._Parser`), nor
    pathlib with urllib.parse (`stackfile.yamlfile.FilePath`)."""
    modules = (
        "numpy", "importlib.resources", "zipfile", "typing_extensions", "inspect", "shutil",
        "pathlib", "urllib.parse",
    )  # fmt: skip
    argv = ["plan", "--stack", stack, "--json"]
    code, imported, stderr = _imported_by(argv, modules, installed_python)
    assert code == 0, stderr
    assert imported == [], "imported by plan"


def _printed(script: str) -> Any:
    """What `script`, run in a fresh interpreter, prints as JSON on its last line."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_msgspec_loads_without_typing_extensions_which_imports_later_as_usual() -> None:
    """Loaded by the package, msgspec takes `typing`'s hints and markers, the objects
    typing_extensions would give it on Python 3.11 and later, and imports no inspect; the
    package's own decoding works with them, and typing_extensions imports afterwards."""
    script = """
import json, sys, typing
import mig_inference
import msgspec._utils as utils
from mig_inference.gpus.catalog import resolve_gpu
seen = {"imported": sorted(m for m in ("typing_extensions", "inspect") if m in sys.modules),
        "typing's": [utils._get_type_hints is typing.get_type_hints,
                     utils.Required is typing.Required, utils.NotRequired is typing.NotRequired],
        "gpu": resolve_gpu("H100-80GB").name}
import typing_extensions
seen["typing_extensions'"] = [utils.Required is typing_extensions.Required,
                              utils.NotRequired is typing_extensions.NotRequired]
print(json.dumps(seen))
"""
    assert _printed(script) == {
        "imported": [], "typing's": [True] * 3, "gpu": "H100-80GB",
        "typing_extensions'": [True] * 2,
    }  # fmt: skip


AT_MSGSPEC_JSON = """
import importlib.machinery, json, sys, threading
seen = {}

def other_thread():
    try:
        import typing_extensions
        seen["other thread"] = typing_extensions.__name__
    except ImportError as error:
        seen["other thread"] = str(error)

class Pause:
    def __init__(self, loader):
        self.loader = loader
    def create_module(self, spec):
        return self.loader.create_module(spec)
    def exec_module(self, module):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        self.loader.exec_module(module)

class AtMsgspecJson:
    def find_spec(self, name, path=None, target=None):
        if name != "msgspec.json":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Pause(spec.loader)
        return spec

sys.meta_path.insert(0, AtMsgspecJson())
"""


def test_another_thread_imports_typing_extensions_while_msgspec_loads() -> None:
    """Only the thread loading msgspec finds no typing_extensions: another thread that imports
    it meanwhile (paused in msgspec's own import, after msgspec took its fallback) gets it."""
    seen = _printed(
        AT_MSGSPEC_JSON + "import typing, mig_inference, msgspec._utils as utils\n"
        "seen['fallback'] = utils._get_type_hints is typing.get_type_hints\n"
        "print(json.dumps(seen))\n"
    )
    assert seen == {"other thread": "typing_extensions", "fallback": True}


def test_msgspec_loaded_after_typing_extensions_keeps_it() -> None:
    """Where typing_extensions is loaded first (Pulumi loads it), msgspec uses it, and it stays
    the one module object."""
    seen = _printed(
        "import json, sys, typing_extensions as first\nimport mig_inference\n"
        "import msgspec._utils as utils\n"
        "print(json.dumps([utils._get_type_hints is first.get_type_hints,"
        " sys.modules['typing_extensions'] is first]))\n"
    )
    assert seen == [True, True]


def test_a_failed_msgspec_import_leaves_no_finder_behind() -> None:
    seen = _printed(
        "import json, sys\nbefore = list(sys.meta_path)\n"
        "class NoCore:\n"
        "    def find_spec(self, name, *_):\n"
        "        if name == 'msgspec._core':\n"
        "            raise ImportError('no core')\n"
        "sys.meta_path.insert(0, NoCore())\n"
        "try:\n    import mig_inference\nexcept ImportError as error:\n    failed = str(error)\n"
        "sys.meta_path.pop(0)\nimport typing_extensions\n"
        "print(json.dumps([failed, sys.meta_path == before]))\n"
    )
    assert seen == ["no core", True]


def test_every_environment_the_makefile_installs_holds_compiled_bytecode() -> None:
    """uv, unlike pip, compiles no bytecode unless asked: each `uv sync` and `uv pip install`
    of the Makefile asks, so where Python cannot write `__pycache__` (CI images, read-only
    installs) a command does not compile every module it imports on every run."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    flags = dict(
        line.split(" := ", 1) for line in makefile.splitlines() if line.startswith("UV_SYNC")
    )
    installs = [
        line.replace("$(UV_SYNC_FLAGS)", flags.get("UV_SYNC_FLAGS", ""))
        for line in makefile.splitlines()
        if "$(UV) sync" in line or "$(UV) pip install" in line or line.startswith("UV_SYNC :=")
    ]
    installs = [line for line in installs if "$(UV_SYNC)" not in line]
    assert len(installs) >= 4, installs  # setup's and plan's syncs, test-latest, extras
    for line in installs:
        assert "--compile-bytecode" in line, line


def test_each_verb_module_registers_exactly_the_verbs_the_table_gives_it() -> None:
    """The command line imports only the named verb's module (`VERBS`): a verb registered by
    another module than the table says would be missing from its parser."""
    import argparse
    import importlib

    from mig_inference.cli import VERBS

    for module in dict.fromkeys(VERBS.values()):
        registered: list[str] = []

        def verb(name: str, *_: object, into: list[str] = registered) -> Any:
            into.append(name)
            return argparse.ArgumentParser(prog=name)

        importlib.import_module(f"mig_inference.cli.{module}").register(verb)
        assert registered == [v for v, m in VERBS.items() if m == module], module


def test_a_verb_imports_no_other_verbs_module() -> None:
    code, imported, stderr = _imported_by(
        ["gpus", "--json"], tuple(f"mig_inference.cli.{m}" for m in ("plan", "replan", "pack"))
    )
    assert code == 0, stderr
    assert imported == [], "gpus imported other verbs' modules"


def test_help_lists_every_verb() -> None:
    from mig_inference.cli import VERBS, build_parser

    text = build_parser(["--help"]).format_help()
    for name in VERBS:
        assert name in text, name


@pytest.mark.parametrize("columns", [50, 150])
def test_help_fits_the_terminal_it_is_printed_on(columns: int) -> None:
    """The parser measures the terminal only when help is formatted, as argparse does, and
    wraps to it: narrow, every line after the usage fits; wide, the long help texts take lines
    longer than a fixed 80 columns would allow."""
    done = subprocess.run(
        [sys.executable, "-m", "mig_inference", "pack", "--help"], capture_output=True,
        text=True, env={**os.environ, "COLUMNS": str(columns)}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    _usage, body = done.stdout.split("\n\n", 1)  # the usage's groups do not break
    longest = max(len(line) for line in body.splitlines())
    if columns < 80:
        assert longest <= columns, done.stdout
    else:
        assert 80 < longest <= columns, done.stdout
