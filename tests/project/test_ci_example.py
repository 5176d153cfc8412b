"""The CI example (examples/github-actions/ephemeral-test-cluster.yml): valid YAML, valid
against GitHub's workflow schema (schemastore's github-workflow.json as check-jsonschema pins
it) and actionlint, every action at a major release that runs on Node 24 (or the reason it
cannot), the loop plan -> ephemeral up -> verify -> destroy (always) with the artifacts, each
sign-in with the inputs its documentation names, sessions that outlast the job that asks for
them and are asked for again before the destroy (Pulumi Cloud, GitHub OIDC per cloud, Pulumi
ESC's aws-login and gcp-login), the OCI CLI that OKE's kubeconfig runs and the provider signed
in with the same session, a sweep that signs in only to the clouds the repository uses, a gate
that plans a new stack and diffs a deployed one, and every `mig-inference` command line one the
CLI accepts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.reference import ROOT

EXAMPLE = ROOT / "examples" / "github-actions"
WORKFLOW = EXAMPLE / "ephemeral-test-cluster.yml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
ACTIONLINT = Path(sys.executable).parent / "actionlint"
PULUMI_LOGIN = "pulumi/auth-actions@v2"
ESC = "pulumi/esc-action@v3"
GOOGLE = "google-github-actions/auth@v3"
AWS = "aws-actions/configure-aws-credentials@v6"
OCI_EXCHANGE = "gtrevorrow/oci-token-exchange-action@v1"
DOCUMENTED_INPUTS = {
    PULUMI_LOGIN: {"organization", "requested-token-type", "token-expiration"},
    ESC: {"environment"},
    GOOGLE: {"workload_identity_provider", "service_account"},
    "google-github-actions/setup-gcloud@v3": {"install_components"},
    AWS: {"role-to-assume", "aws-region", "role-duration-seconds"},
    OCI_EXCHANGE: {"oidc_client_identifier", "domain_base_url", "oci_tenancy", "oci_region"},
}
"""Each sign-in action with the inputs its action.yml and README name for what it does here."""
RUNTIMES = {
    "actions/checkout@v7": "node24",
    "actions/setup-python@v7": "node24",
    "actions/upload-artifact@v7": "node24",
    "pulumi/actions@v7": "node24",
    PULUMI_LOGIN: "node24",
    ESC: "node24",
    GOOGLE: "node24",
    "google-github-actions/setup-gcloud@v3": "node24",
    AWS: "node24",
    OCI_EXCHANGE: "node20",
}
"""`runs.using` of each action's action.yml at the major used, read from its repository's tags
(2026-12-01). GitHub deprecated Node 20 for actions (changelog 2025-09-19; removed 2026-09-23:
a Node 20 action runs on Node 24 with a deprecation notice)."""
NODE20_WITHOUT_SUCCESSOR = {OCI_EXCHANGE: "its latest release, v1.2.2, still declares node20"}
"""Actions left on a Node 20 release because none of theirs runs on Node 24, and why."""
ESC_ENVIRONMENTS = {
    "vars.ESC_AWS_ENVIRONMENT": EXAMPLE / "esc-aws.yaml",
    "vars.ESC_GCP_ENVIRONMENT": EXAMPLE / "esc-gcp.yaml",
}
"""The repository variable naming each ESC environment, and the example's definition of it."""
AWS_OIDC_DEFAULT_SESSION = 3600
"""configure-aws-credentials' action.yml: `role-duration-seconds` defaults to 1 hour with OIDC."""
SWEEP_VARIABLES = {
    GOOGLE: "vars.GCP_WORKLOAD_IDENTITY_PROVIDER",
    AWS: "vars.AWS_ROLE_ARN",
    OCI_EXCHANGE: "vars.OCI_TENANCY",
}


def workflow(path: Path = WORKFLOW) -> dict[Any, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
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


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    """actionlint on `path`, with the dev environment's shellcheck for the `run:` scripts."""
    return subprocess.run(
        [str(ACTIONLINT), "-no-color", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": f"{ACTIONLINT.parent}:/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.skipif(sys.platform != "linux", reason="actionlint's wheels: pyproject, linux only")
def test_actionlint_finds_nothing_and_can_fail(tmp_path: Path) -> None:
    run = actionlint(WORKFLOW)
    assert run.returncode == 0, run.stdout + run.stderr
    # It can fail: an input checkout does not have, an older major on Node 20, a context typo.
    broken = WORKFLOW.read_text().replace("fetch-depth: 0", "fetch-dept: 0", 1)
    broken = broken.replace("actions/setup-python@v7", "actions/setup-python@v5", 1)
    broken = broken.replace("github.event_name == 'schedule'", "github.event_nme == 'schedule'")
    (tmp_path / "broken.yml").write_text(broken)
    found = actionlint(tmp_path / "broken.yml").stdout
    assert 'input "fetch-dept" is not defined in action "actions/checkout@v7"' in found
    assert 'runtime "node20" is deprecated' in found and "actions/setup-python@v5" in found
    assert 'property "event_nme" is not defined' in found


def _steps() -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in workflow()["jobs"].items() for step in job["steps"]]


def test_every_action_runs_on_node_24_or_says_why_it_cannot() -> None:
    used = {step["uses"] for _, step in _steps() if "uses" in step}
    assert used == set(RUNTIMES), used ^ set(RUNTIMES)
    old = {action for action in used if RUNTIMES[action] != "node24"}
    assert old == set(NODE20_WITHOUT_SUCCESSOR)
    header = WORKFLOW.read_text().split("\nname:", 1)[0]
    assert "its latest release (v1.2.2) still declares Node 20" in header


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


def test_each_sign_in_gets_its_documented_inputs() -> None:
    steps = [step for _, step in _steps()]
    used = {s["uses"] for s in steps if s.get("uses") in DOCUMENTED_INPUTS}
    assert used == set(DOCUMENTED_INPUTS)
    for step in steps:
        if step.get("uses") in DOCUMENTED_INPUTS:
            assert set(step["with"]) == DOCUMENTED_INPUTS[step["uses"]], step["uses"]
    conditions = {s.get("if") for s in workflow()["jobs"]["test-cluster"]["steps"]}
    for cloud in ("gke", "eks", "oke"):
        assert any(c and f"inputs.cloud == '{cloud}'" in c for c in conditions), cloud


def _hours(duration: str) -> float:
    """An ESC duration (`4h`, `90m`, `1h30m`) in hours."""
    parts = re.findall(r"(\d+)([hm])", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) / (1 if u == "h" else 60) for n, u in parts)


def _esc_session_hours(variable: str) -> float:
    """How long the credentials of the ESC environment that `variable` names last."""
    login = yaml.safe_load(ESC_ENVIRONMENTS[variable].read_text())["values"]
    provider = login["aws"]["login"] if "AWS" in variable else login["gcp"]["login"]
    [(kind, spec)] = provider.items()
    assert kind in ("fn::open::aws-login", "fn::open::gcp-login")
    lasts = spec["oidc"]["duration" if kind.endswith("aws-login") else "tokenLifetime"]
    return _hours(str(lasts))


def _session_seconds(step: dict[str, Any]) -> float | None:
    """How long what `step` signs in with lasts (None: as long as the job, re-exchanged)."""
    uses, given = step["uses"], step.get("with", {})
    if uses == PULUMI_LOGIN:
        return float(given["token-expiration"])
    if uses == AWS:
        return float(given.get("role-duration-seconds", AWS_OIDC_DEFAULT_SESSION))
    if uses == ESC:
        variable = given["environment"].removeprefix("${{ ").removesuffix(" }}")
        return _esc_session_hours(variable) * 3600
    if uses == GOOGLE:
        # A credentials file (no token_format): Google's libraries fetch a new GitHub token and
        # exchange it whenever theirs expires (the action's createCredentialsFile).
        assert "token_format" not in given
        return None
    return None


def test_every_session_outlasts_the_job_that_asks_for_it() -> None:
    for name, job in workflow()["jobs"].items():
        for step in job["steps"]:
            if step.get("uses") not in (PULUMI_LOGIN, AWS, ESC, GOOGLE):
                continue
            lasts = _session_seconds(step)
            assert lasts is None or lasts >= job["timeout-minutes"] * 60, (name, step["uses"])


def test_the_esc_environments_export_what_the_tools_read() -> None:
    aws = yaml.safe_load(ESC_ENVIRONMENTS["vars.ESC_AWS_ENVIRONMENT"].read_text())["values"]
    oidc = aws["aws"]["login"]["fn::open::aws-login"]["oidc"]
    assert {"roleArn", "sessionName", "duration"} <= set(oidc)
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} <= set(
        aws["environmentVariables"]
    )
    gcp = yaml.safe_load(ESC_ENVIRONMENTS["vars.ESC_GCP_ENVIRONMENT"].read_text())["values"]
    oidc = gcp["gcp"]["login"]["fn::open::gcp-login"]["oidc"]
    assert {"workloadPoolId", "providerId", "serviceAccount", "tokenLifetime"} <= set(oidc)
    exported = gcp["environmentVariables"]
    assert exported["GOOGLE_OAUTH_ACCESS_TOKEN"] == exported["CLOUDSDK_AUTH_ACCESS_TOKEN"]
    assert exported["GOOGLE_OAUTH_ACCESS_TOKEN"] == "${gcp.login.accessToken}"


def test_the_destroy_signs_in_again_first() -> None:
    """A long `up` can outlive a session (OCI's lasts about an hour): the destroy, which runs
    whatever happened before it, gets each sign-in of the job again, under `always()`."""
    steps = workflow()["jobs"]["test-cluster"]["steps"]
    destroy = next(i for i, s in enumerate(steps) if "ephemeral destroy" in s.get("run", ""))
    verify = next(i for i, s in enumerate(steps) if "ephemeral verify" in s.get("run", ""))
    signed_in = [
        (i, s) for i, s in enumerate(steps[:verify]) if s.get("uses") in DOCUMENTED_INPUTS
        and not s["uses"].endswith("/setup-gcloud@v3")
    ]  # fmt: skip
    assert {s["uses"] for _, s in signed_in} == set(DOCUMENTED_INPUTS) - {
        "google-github-actions/setup-gcloud@v3"
    }
    for _, first in signed_in:
        again = f"always() && {first['if']}" if first.get("if") else "always()"
        renewals = [
            i for i, s in enumerate(steps) if s.get("uses") == first["uses"]
            and s.get("if") == again and s.get("with") == first.get("with")
        ]  # fmt: skip
        assert renewals and all(verify < i < destroy for i in renewals), first.get("name")


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
    assert sweep[install]["if"] == f"{SWEEP_VARIABLES[OCI_EXCHANGE]} != ''"
    assert install < next(i for i, s in enumerate(sweep) if "ephemeral" in s.get("run", ""))


def test_the_sweep_signs_in_only_to_the_clouds_the_repository_uses() -> None:
    steps = workflow()["jobs"]["sweep-expired"]["steps"]
    for action, variable in SWEEP_VARIABLES.items():
        [step] = [s for s in steps if s.get("uses") == action]
        assert step["if"].startswith(f"{variable} != ''"), action
    for variable in ESC_ENVIRONMENTS:
        [step] = [s for s in steps if s.get("uses") == ESC and variable in s["with"]["environment"]]
        assert step["if"] == f"{variable} != ''"
    [gcloud] = [s for s in steps if s.get("uses", "").startswith("google-github-actions/setup")]
    assert gcloud["if"] == (f"{SWEEP_VARIABLES[GOOGLE]} != '' || vars.ESC_GCP_ENVIRONMENT != ''")


def test_one_way_in_per_cloud_either_github_oidc_or_esc() -> None:
    """With an ESC environment named for a cloud, its GitHub OIDC sign-in is skipped, so one
    set of credentials is in the job's environment at a time."""
    steps = workflow()["jobs"]["test-cluster"]["steps"]
    for direct, variable in (
        (GOOGLE, "vars.ESC_GCP_ENVIRONMENT"),
        (AWS, "vars.ESC_AWS_ENVIRONMENT"),
    ):
        for step in steps:
            if step.get("uses") == direct:
                assert step["if"].endswith(f"{variable} == ''"), step["name"]
            if step.get("uses") == ESC and variable in step["with"]["environment"]:
                assert step["if"].endswith(f"{variable} != ''"), step["name"]


def _scripts() -> list[str]:
    return [step["run"] for _, step in _steps() if "mig-inference" in step.get("run", "")]


DEPLOYED_OUTPUTS = '{"plan": {"cloud": "gke"}}'
"""What `pulumi stack output --json` prints for a deployed stack (its exports; abridged)."""
PULUMI_STACK_OUTPUT = {
    "deployed": f"echo '{DEPLOYED_OUTPUTS}'",
    # A stack with no update yet, or one whose last update was a destroy.
    "nothing": "echo '{}'",
    # A stack that is not there: never created, or removed (`ephemeral destroy` removes it).
    "absent": "echo \"error: no stack named 'ephemeral-gke' found\" >&2; exit 255",
    # Any other failure: no sign-in to the backend.
    "broken": "echo 'error: [401] Unauthorized: No credentials provided' >&2; exit 255",
}
"""The runner's `pulumi stack output --json --stack <stack>`, per state of the stack."""


def _run_script(
    script: str,
    tmp_path: Path,
    new_stack: bool = False,
    deployed: str = "deployed",
    expect_ok: bool = True,
) -> list[list[str]]:
    """`script`, run by bash as the runner runs it, against a `mig-inference` that parses its
    arguments with the CLI's own parser and records them; the runner's pulumi and git as far as
    the gate uses them (the stack's outputs as `PULUMI_STACK_OUTPUT[deployed]` gives them, the
    stack files a pull request changed, and whether the base branch had the file: not when
    `new_stack`). `expect_ok`: whether the script must succeed (else: fail)."""
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
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "pulumi").write_text(f"#!/bin/sh\n{PULUMI_STACK_OUTPUT[deployed]}\n")
    absent = 1 if new_stack else 0
    (tools / "git").write_text(
        f'#!/bin/sh\nif [ "$1" = cat-file ]; then exit {absent}; fi\n'
        "echo stacks/Pulumi.ephemeral-gke.yaml\n"
    )
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
    assert (run.returncode == 0) is expect_ok, run.stderr
    calls = tmp_path / "argv.jsonl"
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


@pytest.mark.parametrize("script", _scripts())
def test_every_command_line_is_one_the_cli_takes(script: str, tmp_path: Path) -> None:
    calls = _run_script(script, tmp_path)
    assert calls and all(call[:1] in (["plan"], ["ephemeral"], ["diff"]) for call in calls)
    for call in calls:
        if call[0] == "diff":
            assert call[call.index("--min-serving") + 1] == "budget"
            assert call[call.index("--deployed") + 1] == "out/ephemeral-gke.deployed.json"
        if call[0] == "plan" or call[:2] == ["ephemeral", "up"]:
            assert call[call.index("--prices") + 1] == "examples/prices/a2-highgpu-1g.yaml"


def test_the_gate_plans_a_stack_the_pull_request_adds(tmp_path: Path) -> None:
    [gate] = [s for s in _scripts() if "mig-inference diff" in s]
    assert _run_script(gate, tmp_path / "deployed") == [
        ["diff", "--stack", "ephemeral-gke", "--deployed", "out/ephemeral-gke.deployed.json",
         "--min-serving", "budget", "--max-extra-gpus", "8"],
    ]  # fmt: skip
    assert _run_script(gate, tmp_path / "new", new_stack=True) == [
        ["plan", "--stack", "ephemeral-gke"]
    ]


@pytest.mark.parametrize("deployed", ["nothing", "absent"])
def test_the_gate_plans_a_stack_with_nothing_deployed(deployed: str, tmp_path: Path) -> None:
    """A stack file the base branch has, whose stack is not deployed: one never brought up, or
    an ephemeral stack after its destroy (which removes the stack). `diff` refuses `{}` (exit
    1) and `pulumi stack output` fails on a stack that is not there: the gate plans it."""
    [gate] = [s for s in _scripts() if "mig-inference diff" in s]
    assert _run_script(gate, tmp_path, deployed=deployed) == [["plan", "--stack", "ephemeral-gke"]]


def test_the_gate_fails_when_the_deployed_outputs_cannot_be_read(tmp_path: Path) -> None:
    """Only a stack that is not there is planned: any other failure of `pulumi stack output`
    (no sign-in, the backend down) fails the job instead of passing it unchecked."""
    [gate] = [s for s in _scripts() if "mig-inference diff" in s]
    assert _run_script(gate, tmp_path, deployed="broken", expect_ok=False) == []


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
        exchanges = [i for i, s in enumerate(steps) if s.get("uses") == OCI_EXCHANGE]
        if not exchanges:
            continue
        [install] = [i for i, s in enumerate(steps) if _installs_the_oci_cli(s)]
        pulumi_runs = [
            i for i, s in enumerate(steps) if "mig-inference ephemeral" in s.get("run", "")
        ]
        assert install < min(pulumi_runs), name
