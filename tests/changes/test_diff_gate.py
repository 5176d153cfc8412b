"""`diff` as a CI gate: `--min-serving` and `--max-extra-gpus` turn a change that works but costs
too much into exit 3 with one line per breach, run as a pipeline runs it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.changes.change_plan import (
    ChangePlan,
    PoolChange,
    PoolDiff,
    ServiceChange,
    ServiceDiff,
)
from mig_inference.changes.gate import MinServing, breaches, min_serving, wanted_replicas
from mig_inference.errors import MigError
from tests.in_process import mig
from tests.reference import ROOT


def _plan(before: int, worst: int, extra_gpus: int = 0) -> ChangePlan:
    """One service `s`, `before` replicas serving before the change and `worst` at its worst."""
    return ChangePlan(
        pools=[PoolDiff("p", PoolChange.NEW_NODES, extra_gpus=extra_gpus)],
        services=[ServiceDiff("s", ServiceChange.MOVED, serving_before=before, min_serving=worst)],
    )


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("1", MinServing(count=1)), ("50%", MinServing(percent=50.0)),
     ("budget", MinServing(budget=True))],
)  # fmt: skip
def test_thresholds_are_read(text: str, parsed: MinServing) -> None:
    assert min_serving(text) == parsed


@pytest.mark.parametrize("text", ["0", "-1", "0%", "101%", "half", ""])
def test_a_threshold_that_is_none_is_refused_at_its_option(text: str) -> None:
    with pytest.raises(MigError) as raised:
        min_serving(text)
    assert raised.value.path == "--min-serving"


@pytest.mark.parametrize(
    ("threshold", "worst", "budget", "breached"),
    [("1", 0, None, True), ("1", 1, None, False), ("50%", 7, None, True),
     ("50%", 8, None, False), ("budget", 14, 1, True), ("budget", 15, 1, False),
     ("budget", 0, 16, False)],
)  # fmt: skip
def test_a_service_below_the_threshold_breaches_it(
    threshold: str, worst: int, budget: int | None, breached: bool
) -> None:
    budgets = {"s": budget} if budget is not None else None
    found = breaches(_plan(16, worst), min_serving(threshold), None, {"s": 16}, budgets)
    assert bool(found) is breached, found


@pytest.mark.parametrize(
    ("threshold", "wanted", "worst", "breached"),
    [("budget", 8, 8, False), ("budget", 8, 7, False), ("budget", 8, 6, True),
     ("50%", 8, 4, False), ("50%", 8, 3, True), ("1", 8, 1, False), ("1", 8, 0, True),
     ("budget", 0, 0, False), ("1", 0, 0, False), ("budget", 24, 15, False),
     ("budget", 24, 14, True)],
)  # fmt: skip
def test_the_threshold_is_measured_against_what_the_new_version_runs(
    threshold: str, wanted: int, worst: int, breached: bool
) -> None:
    """16 replicas before: a scale-down to 8 may serve 8 (the budget lets one more go), a
    removed service (0 wanted) may serve none, a scale-up to 24 is judged on the 16 both run."""
    found = breaches(_plan(16, worst), min_serving(threshold), None, {"s": wanted}, {"s": 1})
    assert bool(found) is breached, found
    if found and wanted != 16:
        assert f"(the new version runs {wanted})" in found[0]


def test_a_service_the_new_version_lacks_is_wanted_at_zero() -> None:
    assert breaches(_plan(16, 0), min_serving("budget"), None, {}) == []


def test_what_the_new_version_runs_is_each_services_total() -> None:
    """A service sized by demand runs one Deployment per profile behind one Service: each of
    them is wanted at the Service's total, which is what the simulation counts as serving."""
    from mig_inference.plan import plan_of
    from mig_inference.spec.files import load_stack

    plan = plan_of(lambda: load_stack("eks-p4de-demand"))
    wanted = wanted_replicas(plan)
    for service in plan.services:
        group = [s.replicas for s in plan.services if s.service_name == service.service_name]
        assert wanted[service.name] == wanted[service.service_name] == sum(group)
    assert any(s.group for s in plan.services), "the stack sizes a service by demand"


def test_extra_gpus_above_the_limit_breach_it() -> None:
    assert breaches(_plan(16, 16, extra_gpus=8), None, 8, {"s": 16}) == []
    [breach] = breaches(_plan(16, 16, extra_gpus=8), None, 7, {"s": 16})
    assert "8 extra GPUs" in breach and "7 allowed" in breach


def _stack(
    tmp_path: Path, name: str, services: list[dict[str, Any]] | None = None, **pool: Any
) -> Path:
    """gke-h100 with a small model (it fits a 1g slice too), room for every pod, and `pool`;
    `services`: each service's changes to gke-h100's one service (default: none)."""
    body = yaml.safe_load((ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text())
    config = body["config"]
    config["mig-inference:pools"][0].update({"maxPods": 110, **pool})
    [service] = config["mig-inference:services"]
    service["memoryGiB"] = 9
    config["mig-inference:services"] = [{**service, **given} for given in services or [{}]]
    config["mig-inference:cluster"]["protect"] = False
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _diff(after: Path, before: Path, *gate: str) -> subprocess.CompletedProcess[str]:
    """`diff` run by the command line's `main` in this process: the same exit code, stdout and
    stderr, without an interpreter and the cloud SDKs started for each call."""
    return mig("diff", "--stack-file", str(after), "--deployed", str(before), *gate)


def test_a_service_down_during_an_in_place_change_stops_the_pipeline(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before", rollout="in-place")
    after = _stack(tmp_path, "after", rollout="in-place", mig="all-1g.10gb")
    assert _diff(after, before).returncode == 0
    gated = _diff(after, before, "--min-serving", "1")
    assert gated.returncode == 3, gated.stderr
    assert "error: gate: service mistral-nemo: 0 of 16 replicas serving" in gated.stderr
    as_json = _diff(after, before, "--min-serving", "1", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["gate_breaches"][0].startswith("service mistral-nemo")


def test_a_change_needing_more_gpus_than_allowed_stops_the_pipeline(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before")
    after = _stack(tmp_path, "after", mig="all-1g.10gb")
    assert _diff(after, before, "--max-extra-gpus", "8").returncode == 0
    gated = _diff(after, before, "--max-extra-gpus", "0")
    assert gated.returncode == 3
    assert "error: gate: 8 extra GPUs at the peak of the change, above the 0 allowed" in (
        gated.stderr
    )


def test_a_bad_threshold_is_bad_input(tmp_path: Path) -> None:
    stack = _stack(tmp_path, "same")
    run = _diff(stack, stack, "--min-serving", "0")
    assert run.returncode == 1 and "--min-serving" in run.stderr and "Traceback" not in run.stderr


def test_a_deliberate_scale_down_passes_the_budget_gate(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before")
    after = _stack(tmp_path, "after", [{"replicas": 8}])
    run = _diff(after, before, "--min-serving", "budget")
    assert run.returncode == 0, run.stderr
    assert "mistral-nemo: scaled (replicas 16 -> 8)" in run.stdout
    assert "error: gate" not in run.stderr


def test_a_removed_service_passes_the_budget_gate(tmp_path: Path) -> None:
    before = _stack(tmp_path, "before", [{"replicas": 8}, {"name": "second", "replicas": 8}])
    after = _stack(tmp_path, "after", [{"replicas": 8}])
    run = _diff(after, before, "--min-serving", "budget")
    assert run.returncode == 0, run.stderr
    assert "second: removed" in run.stdout


def test_an_outage_below_the_budget_still_stops_the_pipeline(tmp_path: Path) -> None:
    """A re-partition in place takes every replica of the node's one pool down at once, also
    when the new version runs fewer of them."""
    before = _stack(tmp_path, "before", rollout="in-place")
    after = _stack(tmp_path, "after", [{"replicas": 8}], rollout="in-place", mig="all-1g.10gb")
    run = _diff(after, before, "--min-serving", "budget")
    assert run.returncode == 3, run.stderr
    assert (
        "error: gate: service mistral-nemo: 0 of 16 replicas serving at the worst moment (the "
        "new version runs 8), below its disruption budget (7)"
    ) in run.stderr


def test_a_stack_never_deployed_is_named_as_such(tmp_path: Path) -> None:
    """`pulumi stack output --json` of a stack with no update yet prints `{}`: the CI example
    plans a stack file new in its pull request instead of diffing it."""
    (tmp_path / "deployed.json").write_text("{}\n")
    run = _diff(_stack(tmp_path, "new"), tmp_path / "deployed.json", "--min-serving", "budget")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "the deployed stack exported nothing" in run.stderr
    assert "`plan` shows what the stack builds" in run.stderr


def _without_cloud_sdks(*argv: str) -> subprocess.CompletedProcess[str]:
    """`mig-inference ARGV` where no cloud's SDK can be imported, as in `make plan`'s environment
    (the package's own dependencies only), every ResourceWarning shown."""
    from tests.project.test_cloud_extras import SDKS, WITHOUT

    return subprocess.run(
        [
            sys.executable, "-W", "always::ResourceWarning", "-c", WITHOUT,
            ",".join(sorted(SDKS.values())), *argv,
        ],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("verb", [["diff"], ["plan"]])
def test_diff_without_the_clouds_sdk_names_the_clones_fix(verb: list[str], tmp_path: Path) -> None:
    """`diff` and `plan --deployed` run the stack program under Pulumi's mocks, which creates
    the cloud's resources through its SDK: in `make plan`'s environment they stop with the fix
    for a clone (pip would fetch a package of that name from an index, not this one). No event
    loop is left open for the interpreter to close after its sockets, with a traceback."""
    stack = _stack(tmp_path, "gke")
    run = _without_cloud_sdks(*verb, "--stack-file", str(stack), "--deployed", str(stack))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "ResourceWarning" not in run.stderr, run.stderr
    assert run.stderr.startswith(
        "error: mig-inference:cloud: gke needs the Pulumi SDK pulumi-gcp, which is not "
        "installed: in this clone, make setup (every cloud's SDK, from uv.lock), or pip install "
        f"-e '{ROOT}[gke]' in an environment of your own"
    ), run.stderr


def test_diff_of_an_existing_cluster_needs_no_cloud_sdk() -> None:
    stack = ROOT / "stacks" / "Pulumi.existing.yaml"
    run = _without_cloud_sdks("diff", "--stack", "existing", "--deployed", str(stack))
    assert run.returncode == 0, run.stderr


def test_an_installed_wheel_is_told_its_extra(tmp_path: Path) -> None:
    from mig_inference.installation import extra_hint

    wheel = tmp_path / "lib" / "site-packages" / "mig_inference"
    clone = tmp_path / "clone" / "mig_inference"
    for folder in (wheel, clone):
        folder.mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock", "Makefile"):
        (clone.parent / name).write_text("")
    assert extra_hint("eks", wheel) == "pip install 'mig-inference[eks]' (or mig-inference[all])"
    assert extra_hint("eks", clone).startswith("in this clone, make setup")
    (clone.parent / "uv.lock").unlink()  # a source tree without the lock is no clone of this
    assert extra_hint("eks", clone).startswith("pip install")
