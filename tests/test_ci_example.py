"""The CI example (examples/github-actions/ephemeral-test-cluster.yml): valid YAML, valid
against GitHub's workflow schema (schemastore's github-workflow.json as check-jsonschema pins
it), the loop plan -> ephemeral up -> verify -> destroy (always) with the artifacts, each
cloud's OIDC action with the inputs its documentation names, sessions that outlast the job (or
are renewed before the destroy), the OCI CLI that OKE's kubeconfig runs, a sweep that signs in
only to the clouds the repository uses, and every `mig-inference` command line one the CLI
accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reference import ROOT

WORKFLOW = ROOT / "examples" / "github-actions" / "ephemeral-test-cluster.yml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
DOCUMENTED_INPUTS = {
    "pulumi/auth-actions@v1": {"organization", "requested-token-type"},
    "google-github-actions/auth@v2": {"workload_identity_provider", "service_account"},
    "google-github-actions/setup-gcloud@v2": {"install_components"},
    "aws-actions/configure-aws-credentials@v4": {
        "role-to-assume", "aws-region", "role-duration-seconds",
    },
    "gtrevorrow/oci-token-exchange-action@v1": {
        "oidc_client_identifier", "domain_base_url", "oci_tenancy", "oci_region",
    },
}  # fmt: skip


def workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_workflow_is_valid_against_githubs_schema(tmp_path: Path) -> None:
    run = schema_check(WORKFLOW)
    assert run.returncode == 0, run.stdout + run.stderr
    # The check can fail: a job without `runs-on`, a step with a misspelled key.
    broken = WORKFLOW.read_text().replace("    runs-on: ubuntu-latest\n", "", 1)
    broken = broken.replace("        with:\n", "        whith:\n", 1)
    (tmp_path / "broken.yml").write_text(broken)
    run = schema_check(tmp_path / "broken.yml")
    assert run.returncode == 1 and "validation errors" in run.stdout + run.stderr


def test_plan_up_verify_then_destroy_always_with_the_artifacts() -> None:
    flow = workflow()
    triggers: dict[str, Any] = flow.get("on") or flow[True]  # PyYAML reads `on` as a boolean
    assert set(triggers) == {"workflow_dispatch", "schedule", "pull_request"}
    assert flow["permissions"] == {"contents": "read", "id-token": "write"}
    steps = flow["jobs"]["test-cluster"]["steps"]
    runs = [(s.get("run", ""), s.get("if")) for s in steps]
    order = [
        next(i for i, (run, _) in enumerate(runs) if needle in run)
        for needle in ("mig-inference plan", "ephemeral up", "ephemeral verify",
                       "ephemeral destroy")
    ]  # fmt: skip
    assert order == sorted(order)
    assert runs[order[-1]][1] == "always()"
    [upload] = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()"
    assert upload["with"]["path"].split() == ["out/plan.json", "out/verify-report.json"]
    assert "--report out/verify-report.json" in runs[order[2]][0]
    assert "> out/plan.json" in " ".join(runs[order[0]][0].split())
    sweep = flow["jobs"]["sweep-expired"]
    assert sweep["if"] == "github.event_name == 'schedule'"
    assert any("ephemeral destroy --expired" in s.get("run", "") for s in sweep["steps"])


def test_each_clouds_oidc_action_gets_its_documented_inputs() -> None:
    steps = [s for job in workflow()["jobs"].values() for s in job["steps"]]
    used = {s["uses"] for s in steps if s.get("uses") in DOCUMENTED_INPUTS}
    assert used == set(DOCUMENTED_INPUTS)
    for step in steps:
        if step.get("uses") in DOCUMENTED_INPUTS:
            assert set(step["with"]) == DOCUMENTED_INPUTS[step["uses"]], step["uses"]
    clouds = {s.get("if") for s in workflow()["jobs"]["test-cluster"]["steps"] if s.get("if")}
    assert {"inputs.cloud == 'gke'", "inputs.cloud == 'eks'", "inputs.cloud == 'oke'"} <= clouds


SIGN_IN = {
    "gke": "google-github-actions/auth@v2",
    "eks": "aws-actions/configure-aws-credentials@v4",
    "oke": "gtrevorrow/oci-token-exchange-action@v1",
}
AWS_OIDC_DEFAULT_SESSION = 3600
"""configure-aws-credentials' action.yml: `role-duration-seconds` defaults to 1 hour with OIDC."""
SWEEP_VARIABLE = {
    "gke": "vars.GCP_WORKLOAD_IDENTITY_PROVIDER",
    "eks": "vars.AWS_ROLE_ARN",
    "oke": "vars.OCI_TENANCY",
}


def test_aws_sessions_outlast_the_job_that_asks_for_them() -> None:
    for name, job in workflow()["jobs"].items():
        for step in job["steps"]:
            if step.get("uses") == SIGN_IN["eks"]:
                session = int(step["with"].get("role-duration-seconds", AWS_OIDC_DEFAULT_SESSION))
                assert session >= job["timeout-minutes"] * 60, (name, step.get("name"))


def test_the_destroy_signs_in_again_to_each_cloud_first() -> None:
    """A long `up` can outlive the first session (OCI's lasts about an hour): the destroy, which
    runs whatever happened before it, gets fresh credentials for the stack's cloud."""
    steps = workflow()["jobs"]["test-cluster"]["steps"]
    destroy = next(i for i, s in enumerate(steps) if "ephemeral destroy" in s.get("run", ""))
    verify = next(i for i, s in enumerate(steps) if "ephemeral verify" in s.get("run", ""))
    for cloud, action in SIGN_IN.items():
        renewals = [
            i
            for i, step in enumerate(steps)
            if step.get("uses") == action
            and step.get("if") == f"always() && inputs.cloud == '{cloud}'"
        ]
        assert renewals and all(verify < i < destroy for i in renewals), cloud


def _installs_the_oci_cli(step: dict[str, Any]) -> bool:
    script = step.get("run", "")
    return (
        "pip install" in script
        and "oci-cli==" in script
        and ('echo "OCI_CLI_AUTH=security_token" >> "$GITHUB_ENV"' in script)
    )


def test_oke_jobs_install_the_oci_cli_that_its_kubeconfig_runs() -> None:
    jobs = workflow()["jobs"]
    steps = jobs["test-cluster"]["steps"]
    [install] = [i for i, s in enumerate(steps) if _installs_the_oci_cli(s)]
    assert steps[install]["if"] == "inputs.cloud == 'oke'"
    first_ephemeral = next(i for i, s in enumerate(steps) if "ephemeral" in s.get("run", ""))
    assert install < first_ephemeral
    sweep = jobs["sweep-expired"]["steps"]
    [install] = [i for i, s in enumerate(sweep) if _installs_the_oci_cli(s)]
    assert sweep[install]["if"] == f"{SWEEP_VARIABLE['oke']} != ''"
    assert install < next(i for i, s in enumerate(sweep) if "ephemeral" in s.get("run", ""))


def test_the_sweep_signs_in_only_to_the_clouds_the_repository_uses() -> None:
    steps = workflow()["jobs"]["sweep-expired"]["steps"]
    for cloud, action in SIGN_IN.items():
        [step] = [s for s in steps if s.get("uses") == action]
        assert step.get("if") == f"{SWEEP_VARIABLE[cloud]} != ''", cloud
    for step in steps:
        if step.get("uses", "").startswith("google-github-actions/setup-gcloud"):
            assert step.get("if") == f"{SWEEP_VARIABLE['gke']} != ''"


def _scripts() -> list[str]:
    return [
        step["run"]
        for job in workflow()["jobs"].values()
        for step in job["steps"]
        if "mig-inference" in step.get("run", "")
    ]


@pytest.mark.parametrize("script", _scripts())
def test_every_command_line_is_one_the_cli_takes(script: str, tmp_path: Path) -> None:
    """Each step's script, run by bash as the runner runs it, against a `mig-inference` that
    parses its arguments with the CLI's own parser and records them."""
    stub = tmp_path / ".venv" / "bin" / "mig-inference"
    stub.parent.mkdir(parents=True)
    stub.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from mig_inference.cli import build_parser\n"
        "args = build_parser().parse_args(sys.argv[1:])\n"
        f"open({str(tmp_path / 'argv.jsonl')!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stub.chmod(0o755)
    # The runner's pulumi and git, as far as the gate's script uses them: a deployed stack's
    # outputs, and the stack files a pull request changed.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "pulumi").write_text('#!/bin/sh\necho "{}"\n')
    (tools / "git").write_text("#!/bin/sh\necho stacks/Pulumi.ephemeral-gke.yaml\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.ephemeral-gke.yaml").write_text("config: {}\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    run = subprocess.run(
        ["bash", "-e", "-c", script.replace("${{ inputs.ttl }}", "2h")],
        cwd=tmp_path,
        env={"PATH": f"{tools}:/usr/bin:/bin", "STACK": "ephemeral-gke", "BASE": "base",
             "PRICES": "examples/prices/a2-highgpu-1g.yaml"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    calls = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert calls and all(call[:1] in (["plan"], ["ephemeral"], ["diff"]) for call in calls)
    for call in calls:
        if call[0] == "diff":
            assert call[call.index("--min-serving") + 1] == "budget"
            assert call[call.index("--deployed") + 1] == "out/ephemeral-gke.deployed.json"
        if call[0] == "plan" or call[:2] == ["ephemeral", "up"]:
            assert call[call.index("--prices") + 1] == "examples/prices/a2-highgpu-1g.yaml"


def _oci_provider(tmp_path: Path, **oci_config: str) -> dict[str, Any]:
    """The inputs of the OCI provider oke-h100's program configures (the stack gives none),
    with `oci_config` added to the stack file's `oci:` namespace."""
    from mig_inference.render import run_program

    body = yaml.safe_load((ROOT / "stacks" / "Pulumi.oke-h100.yaml").read_text())
    body["config"].update({f"oci:{key}": value for key, value in oci_config.items()})
    path = tmp_path / "Pulumi.oke-h100.yaml"
    path.write_text(yaml.safe_dump(body))
    rendering = run_program("oke-h100", path)
    assert rendering.error is None, rendering.error
    [provider] = [r for r in rendering.resources if r.type == "pulumi:providers:oci"]
    return dict(provider.inputs)


def test_the_oci_provider_signs_in_with_the_session_the_job_exchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job tells the OCI CLI to use the exchanged session token (`OCI_CLI_AUTH`): the
    program's provider uses it too, not the API key it assumes by default."""
    monkeypatch.delenv("OCI_CLI_AUTH", raising=False)
    monkeypatch.delenv("OCI_CLI_PROFILE", raising=False)
    assert "auth" not in _oci_provider(tmp_path)
    monkeypatch.setenv("OCI_CLI_AUTH", "security_token")
    assert _oci_provider(tmp_path)["auth"] == "SecurityToken"
    monkeypatch.setenv("OCI_CLI_PROFILE", "ci")
    assert _oci_provider(tmp_path)["configFileProfile"] == "ci"
    # The stack's own oci: config wins over the environment.
    chosen = _oci_provider(tmp_path, auth="InstancePrincipal", configFileProfile="ops")
    assert (chosen["auth"], chosen["configFileProfile"]) == ("InstancePrincipal", "ops")


def test_every_job_that_runs_pulumi_on_oke_tells_the_cli_to_use_the_session() -> None:
    for name, job in workflow()["jobs"].items():
        steps = job["steps"]
        exchanges = [i for i, s in enumerate(steps) if s.get("uses") == SIGN_IN["oke"]]
        if not exchanges:
            continue
        [install] = [i for i, s in enumerate(steps) if _installs_the_oci_cli(s)]
        pulumi_runs = [
            i for i, s in enumerate(steps) if "mig-inference ephemeral" in s.get("run", "")
        ]
        assert install < min(pulumi_runs), name
