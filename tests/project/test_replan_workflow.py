"""The scheduled replan example (examples/github-actions/replan.yml): valid against GitHub's
workflow schema (check-jsonschema's vendored copy), the loop replan --write -> a pull request
whose body is the change plan, opened with a GitHub App's token so that the change gate of
ephemeral-test-cluster.yml runs on it, and its command line one the CLI takes (run by bash as
the runner runs it, with and without a token and a selector)."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.project.test_ci_example import schema_check
from tests.project.test_ci_example import workflow as ephemeral_workflow
from tests.reference import ROOT

WORKFLOW = ROOT / "examples" / "github-actions" / "replan.yml"
PRIVATE = "secret-token-value"


def workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def steps() -> list[dict[str, Any]]:
    return list(workflow()["jobs"]["replan"]["steps"])


def test_the_workflow_is_valid_against_githubs_schema(tmp_path: Path) -> None:
    run = schema_check(WORKFLOW)
    assert run.returncode == 0, run.stdout + run.stderr
    broken = WORKFLOW.read_text().replace("    runs-on: ubuntu-latest\n", "", 1)
    (tmp_path / "broken.yml").write_text(broken)
    run = schema_check(tmp_path / "broken.yml")
    assert run.returncode == 1 and "validation errors" in run.stdout + run.stderr


def test_it_runs_on_a_schedule_and_writes_nothing_itself() -> None:
    flow = workflow()
    triggers: dict[str, Any] = flow.get("on") or flow[True]  # PyYAML reads `on` as a boolean
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    assert triggers["schedule"][0]["cron"]
    # The App's token writes the branch and the pull request; the job's own token only reads.
    assert flow["permissions"] == {"contents": "read"}


def test_the_pull_request_carries_the_re_planned_file_and_the_change_plan() -> None:
    order = steps()
    [replan] = [i for i, s in enumerate(order) if "mig-inference replan" in s.get("run", "")]
    [app] = [
        i
        for i, s in enumerate(order)
        if s.get("uses", "").startswith("actions/create-github-app-token@")
    ]
    [pull] = [
        i
        for i, s in enumerate(order)
        if s.get("uses", "").startswith("peter-evans/create-pull-request@")
    ]
    assert replan < app < pull
    script = " ".join(order[replan]["run"].split())
    assert '--write "stacks/Pulumi.$STACK.yaml" > out/replan.txt' in script
    assert "out/body.md" in script and "cat out/replan.txt" not in script  # cut to fit a body
    given = order[pull]["with"]
    assert given["body-path"] == "out/body.md"
    assert given["add-paths"] == "stacks/Pulumi.${{ env.STACK }}.yaml"
    # Not the GITHUB_TOKEN: a pull request it opens starts no workflow, so no gate would run.
    assert given["token"] == f"${{{{ steps.{order[app]['id']}.outputs.token }}}}"
    assert set(order[app]["with"]) == {"app-id", "private-key"}
    assert order[app]["with"]["private-key"].startswith("${{ secrets.")


def test_the_change_gate_runs_on_the_file_it_proposes() -> None:
    gate = ephemeral_workflow()
    triggers = gate.get("on") or gate[True]
    [pattern] = triggers["pull_request"]["paths"]
    assert fnmatch.fnmatch("stacks/Pulumi.eks-p4de-demand.yaml", pattern)
    assert "diff --stack" in " ".join(
        s.get("run", "") for s in gate["jobs"]["change-gate"]["steps"]
    )


@pytest.mark.parametrize(("token", "selector"), [(PRIVATE, 'cluster="prod-1"'), ("", "")])
def test_its_command_line_is_one_the_cli_takes(token: str, selector: str, tmp_path: Path) -> None:
    [step] = [s for s in steps() if "mig-inference replan" in s.get("run", "")]
    stub = tmp_path / ".venv" / "bin" / "mig-inference"
    stub.parent.mkdir(parents=True)
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from mig_inference.cli import build_parser\n"
        "build_parser().parse_args(sys.argv[1:])\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "print('the change plan')\n"
        "print('warning: a warning', file=sys.stderr)\n"
    )
    stub.chmod(0o755)
    run = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "STACK": "eks-p4de-demand", "WINDOW": "24h",
             "PROMETHEUS_URL": "https://prometheus.example", "PROMETHEUS_TOKEN": token,
             "SELECTOR": selector},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--write") + 1] == "stacks/Pulumi.eks-p4de-demand.yaml"
    assert argv[argv.index("--window") + 1] == "24h"
    assert ("--bearer-token-env" in argv) == bool(token)
    assert ("--selector" in argv) == bool(selector)
    assert PRIVATE not in " ".join(argv)
    body = (tmp_path / "out" / "body.md").read_text()
    assert "the change plan" in body and "warning: a warning" in body
    assert "warning: a warning" in run.stderr  # in the job's log too: an error must show there
