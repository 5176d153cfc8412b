"""Each cloud's SDK is an extra (`mig-inference[gke]`, `[eks]`, `[oke]`): a stack runs with its
own cloud's SDK alone, and a stack whose cloud's SDK is missing stops with one line naming the
extra. The other SDKs are made unimportable in a subprocess, as in an install without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SDKS = {"gke": "pulumi_gcp", "eks": "pulumi_aws", "oke": "pulumi_oci"}
WITHOUT = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
ABSENT = set(sys.argv[1].split(","))
sys.meta_path.insert(0, Absent())
from mig_inference.cli import main
code = main(sys.argv[2:])
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ABSENT)
assert not leaked, leaked
sys.exit(code)
"""


def render_without(absent: set[str], stack: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, ",".join(sorted(absent)), "render", "--stack", stack,
         "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    "stack", ["gke-h100", "ephemeral-gke", "eks-p4d", "eks-p5-from-zero", "oke-h100"]
)
def test_a_stack_renders_with_its_own_clouds_sdk_alone(stack: str, tmp_path: Path) -> None:
    cloud = stack.split("-")[0] if stack != "ephemeral-gke" else "gke"
    result = render_without(set(SDKS.values()) - {SDKS[cloud]}, stack, tmp_path / "out")
    assert result.returncode == 0, result.stderr


def test_an_existing_cluster_needs_no_cloud_sdk(tmp_path: Path) -> None:
    result = render_without(set(SDKS.values()), "existing", tmp_path / "out")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("stack", "extra"), [("eks-p4d", "eks"), ("gke-h100", "gke"), ("oke-h100", "oke")])  # fmt: skip
def test_a_missing_sdk_is_named_with_its_extra(stack: str, extra: str, tmp_path: Path) -> None:
    result = render_without({SDKS[extra]}, stack, tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.startswith(  # in this clone: the hint a clone needs
        f"error: mig-inference:cloud: {extra} needs the Pulumi SDK "
        f"{SDKS[extra].replace('_', '-')}, which is not installed: in this clone, make setup"
    ), result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


NOT_FOR_THE_PLAN = {
    *SDKS.values(), "pulumi_policy", "celpy", "lark", "kubernetes_validate", "hypothesis",
    "pytest", "mypy", "json_merge_patch",
}  # fmt: skip
"""Import names of the extras' packages (clouds, policy, dev): `make plan` installs none of them."""


@pytest.mark.parametrize(
    "stack", sorted(p.stem.removeprefix("Pulumi.") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
)
def test_the_offline_plan_needs_none_of_the_extras(stack: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT, ",".join(sorted(NOT_FOR_THE_PLAN)),
         "plan", "--stack", stack],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr


def test_make_plan_installs_only_the_packages_own_dependencies() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    [plan] = [line for line in makefile.splitlines() if line.startswith("plan:")]
    assert plan.split(":", 1)[1].split() == ["$(VENV)/.installed-base"]
    recipe = makefile.split("$(VENV)/.installed-base: pyproject.toml uv.lock", 1)[1].split("\n\n")[
        0
    ]
    sync = [line for line in recipe.splitlines() if " sync " in line]
    assert len(sync) == 1 and "--locked" in sync[0] and "--inexact" in sync[0]
    assert "--all-extras" not in sync[0] and "--extra" not in sync[0]
