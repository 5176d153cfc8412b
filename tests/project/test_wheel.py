"""The package as a library: the wheel holds one import root with its data, and its command
line works from a virtualenv that has only the wheel of this project (no clone beside it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the tracked files: setuptools builds in the source tree,
    which two test runs (or a stray build/) would share."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    [built] = out.glob("mig_inference-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, built_wheel: Path) -> Path:
    """A new virtualenv with the wheel installed. Its third-party dependencies (the Pulumi SDKs,
    HiGHS, PyYAML) are the test run's own, reached through a path entry: installing them again
    from the registry would add minutes and nothing to what is checked here."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-deps", "--quiet", str(built_wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return venv


def _tracked(*paths: str) -> list[str]:
    return subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()


def installed_name(tracked: str) -> str:
    """Where a tracked file of the package lands in the wheel: at its own path (the package
    is found in the tree, no folder is installed under another name)."""
    return tracked


def tree_packages() -> set[str]:
    """Every package of the source tree (a folder with an __init__.py), by its installed name."""
    return {
        installed_name(name).removesuffix("/__init__.py").replace("/", ".")
        for name in _tracked("mig_inference")
        if name.endswith("/__init__.py")
    }


def wheel_packages(names: list[str]) -> set[str]:
    return {
        n.removesuffix("/__init__.py").replace("/", ".")
        for n in names
        if n.endswith("/__init__.py")
    }


def test_wheel_installs_one_import_root_with_its_data_files(built_wheel: Path) -> None:
    names = zipfile.ZipFile(built_wheel).namelist()
    roots = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert roots == {"mig_inference"}
    # Every package of the tree, found rather than listed: a new subpackage is in.
    assert wheel_packages(names) == tree_packages()
    assert {"mig_inference.components", "mig_inference.components.workloads"} <= tree_packages()
    # Every file of the package is in the wheel: modules, and data (catalog, prices, the node
    # Jobs' scripts, py.typed).
    missing = {installed_name(name) for name in _tracked("mig_inference")}
    assert missing - set(names) == set()
    [entry_points] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert (
        "mig-inference = mig_inference.cli:main"
        in zipfile.ZipFile(built_wheel).read(entry_points).decode()
    )


# Imports each package the wheel installed and finds each module of it, from a checkout's
# folder (`-P`: the working directory is not on the import path, as for the installed
# command): where each one loads from.
WHERE_EACH_LOADS = """
import importlib.util, json, pkgutil
import mig_inference
found = {"mig_inference": mig_inference.__file__}
for module in pkgutil.walk_packages(mig_inference.__path__, "mig_inference."):
    found[module.name] = importlib.util.find_spec(module.name).origin
print(json.dumps(found))
"""


def test_every_package_loads_from_the_wheel_inside_another_checkout(
    fresh_venv: Path, built_wheel: Path, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "mig_inference", checkout / "mig_inference", ignore=ignore)
    found = run(fresh_venv, checkout, "python", "-P", "-c", WHERE_EACH_LOADS)
    assert found.returncode == 0, found.stderr
    origins = json.loads(found.stdout)
    [site] = (fresh_venv / "lib").glob("python*/site-packages")
    elsewhere = {
        name: origin for name, origin in origins.items() if not origin.startswith(str(site))
    }
    assert elsewhere == {}
    packages = {name for name, origin in origins.items() if origin.endswith("/__init__.py")}
    assert packages == wheel_packages(zipfile.ZipFile(built_wheel).namelist())
    assert origins["mig_inference.components.program"] == str(
        site / "mig_inference" / "components" / "program.py"
    )


def run(venv: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_command_line_plans_and_renders_from_the_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    """Run in a folder like a checkout: its `components` folder (importable as `components` by
    `python -m`, whose path starts at the working directory) refuses to load, so the render
    shows the wheel's code runs its own components."""
    (tmp_path / "stacks").mkdir()
    shutil.copy(ROOT / "stacks" / "Pulumi.gke-h100.yaml", tmp_path / "stacks")
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "__init__.py").write_text(
        "raise ImportError('the checkout beside the wheel was loaded')\n"
    )

    where = run(
        fresh_venv, tmp_path, "python", "-c", "import mig_inference; print(mig_inference.__file__)"
    )
    assert where.stdout.startswith(str(fresh_venv)), where.stdout + where.stderr

    plan = run(fresh_venv, tmp_path, "mig-inference", "plan", "--stack", "gke-h100")
    assert plan.returncode == 0, plan.stderr
    assert "16 x nvidia.com/mig-3g.40gb on h100-mig" in plan.stdout

    usage = run(fresh_venv, tmp_path, "mig-inference", "plan", "--nope")
    assert usage.returncode == 2 and "`mig-inference plan --help`" in usage.stderr

    rendered = run(fresh_venv, tmp_path, "python", "-m", "mig_inference", "render", "--stack",
                   "gke-h100", "--out", str(tmp_path / "out"))  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    assert (tmp_path / "out" / "kubernetes").is_dir()


def test_generic_names_are_not_installed(fresh_venv: Path, tmp_path: Path) -> None:
    for name in ("components", "mig"):
        found = run(fresh_venv, tmp_path, "python", "-c", f"import {name}")
        assert found.returncode != 0 and "ModuleNotFoundError" in found.stderr, name


def test_provider_serves_the_same_schema_from_the_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    from mig_inference.components.provider import MigInferenceProvider

    script = (
        "from mig_inference.components.provider import MigInferenceProvider;"
        "print(MigInferenceProvider().schema)"
    )
    found = run(fresh_venv, tmp_path, "python", "-c", script)
    assert found.returncode == 0, found.stderr
    source = MigInferenceProvider().schema
    assert source is not None
    assert json.loads(found.stdout) == json.loads(source)


def test_the_wheel_carries_the_licence(built_wheel: Path) -> None:
    wheel = zipfile.ZipFile(built_wheel)
    [metadata] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    fields = wheel.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in fields
    assert "License-File: LICENSE" in fields
    [licence] = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(licence) == (ROOT / "LICENSE").read_bytes()


def test_bench_runs_from_the_wheel(fresh_venv: Path, tmp_path: Path) -> None:
    """The benchmark times the installed command (`python -m mig` exists only in a clone)."""
    found = run(fresh_venv, tmp_path, "mig-inference", "bench", "--quick", "--json")
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["cli_pack_5000_seconds"] > 0 and result["demand"]
