"""`mig-inference ephemeral` as users run it (a subprocess: stdout, stderr, exit code), on the
Automation API against a fake `pulumi` first on PATH (tests/fake_pulumi.py) that records every
command line and plays back `up` and `destroy`, including a failing `up` followed by
`destroy`; the pure parts (budget, expiry tags, report) directly."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mig_inference.clouds.prices import load_prices
from mig_inference.ephemeral import budget, expiry, report
from mig_inference.plan import plan_stack
from mig_inference.reports.stack_cost import stack_cost
from mig_inference.spec.files import load_stack
from tests.mocked import one, stack_rendering
from tests.reference import ROOT

PRICES = "examples/prices/a2-highgpu-1g.yaml"
STACK = "ephemeral-gke"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"


@dataclass
class Cli:
    tmp: Path
    env: dict[str, str]

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mig", "ephemeral", *argv],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    def scenario(self, **steps: list[dict[str, Any]]) -> None:
        (self.tmp / "scenario.json").write_text(json.dumps(steps))

    def state(self) -> dict[str, Any]:
        path = self.tmp / "state.json"
        return json.loads(path.read_text()) if path.exists() else {"stacks": {}}

    def save_state(self, state: dict[str, Any]) -> None:
        (self.tmp / "state.json").write_text(json.dumps(state))

    def commands(self) -> list[list[str]]:
        """Every pulumi command line, without the Automation API's `--non-interactive`."""
        path = self.tmp / "pulumi.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [[a for a in json.loads(line)["argv"] if a != "--non-interactive"] for line in lines]

    def verbs(self) -> list[str]:
        def verb(c: list[str]) -> list[str]:
            if c[0] != "stack":
                return c[:1]
            return c[:3] if c[1] == "tag" else c[:2]

        return [" ".join(verb(c)) for c in self.commands()]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in (("pulumi", "fake_pulumi.py"), ("kubectl", None)):
        shim = bin_dir / name
        if script:
            shim.write_text(
                f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / script}" "$@"\n'
            )
        else:
            # kubectl: records its arguments and the kubeconfig file's mode, prints the log.
            shim.write_text(
                "#!/bin/sh\n"
                f'echo "$@" >> "{tmp_path}/kubectl.log"\n'
                f'stat -c %a "$2" >> "{tmp_path}/kubectl.log"\n'
                f'cat "{tmp_path}/job.log"\n'
            )
        shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_PULUMI_STATE": str(tmp_path / "state.json"),
        "FAKE_PULUMI_SCENARIO": str(tmp_path / "scenario.json"),
        "FAKE_PULUMI_LOG": str(tmp_path / "pulumi.log"),
    }
    return Cli(tmp_path, env)


def verify_job_resource(succeeded: bool) -> dict[str, Any]:
    """The verify Job as pulumi-kubernetes keeps it in the state: its inputs' metadata (taken
    from the real program's rendering, so the driver looks for what the component sets) and a
    status."""
    job = one(stack_rendering(STACK), "kubernetes:batch/v1:Job")
    status: dict[str, Any] = {"startTime": "2026-11-23T10:00:00Z"}
    status |= (
        {"succeeded": 1, "completionTime": "2026-11-23T10:00:09Z"} if succeeded else {"failed": 1}
    )
    return {
        "urn": f"urn:pulumi:{STACK}::mig-inference::kubernetes:batch/v1:Job::{job.name}",
        "type": "kubernetes:batch/v1:Job",
        "outputs": {"metadata": job.inputs["metadata"], "status": status},
    }


UP_FAILED = """Updating (ephemeral-gke):
 +  kubernetes:batch/v1:Job verify-tiny-chat-job creating failed 1 error
Diagnostics:
  kubernetes:batch/v1:Job (verify-tiny-chat-job):
    error: 3 errors occurred:
    \t* Resource 'verify-tiny-chat-04b354a6' was created but failed to initialize
    \t* [BackoffLimitExceeded] Job has reached the specified backoff limit
    \t* [Pod inference/verify-tiny-chat-04b354a6-7xk2p]: [Error] verify failed: service tiny-chat (vllm): answered HTTP 500, expected 200
    request: POST http://tiny-chat.inference.svc.cluster.local:8000/v1/completions {"max_tokens": 8, "model": "Qwen/Qwen2.5-0.5B-Instruct", "prompt": "The capital of France is", "temperature": 0}
    answer: HTTP 500: {"error": {"message": "CUDA out of memory", "type": "InternalServerError"}}
    last log lines:
"""


def test_up_within_budget_tags_the_stack_and_runs_pulumi_up(cli: Cli) -> None:
    cli.scenario(up=[{"exit": 0, "resources": [verify_job_resource(True)],
                      "outputs": {"kubeconfig": KUBECONFIG}, "secret_outputs": ["kubeconfig"]}])  # fmt: skip
    before = datetime.datetime.now(datetime.UTC)
    run = cli.run("up", "--stack", STACK, "--prices", PRICES, "--ttl", "90m")
    assert run.returncode == 0, run.stderr
    assert "budget: up to $2.20/h x 1.5 h = $3.31 (maxCost $10.00)" in run.stderr
    assert run.stdout.startswith(f"stack {STACK} is up and every verified service answered")
    assert cli.verbs() == [
        "version", "stack select", "stack init", "stack tag set", "stack tag set",
        "stack tag set", "stack tag set", "up", "stack output", "stack output", "stack history",
    ]  # fmt: skip
    up = cli.commands()[7]
    assert up[:3] == ["up", "--yes", "--skip-preview"] and "--target" not in up
    assert up[up.index("--stack") + 1] == STACK and up[up.index("--color") + 1] == "never"
    tags = cli.state()["stacks"][STACK]["tags"]
    assert tags[expiry.EPHEMERAL_TAG] == "true" and tags[expiry.MAX_COST_TAG] == "10"
    expires = expiry.expires_at(tags)
    assert expires is not None
    assert datetime.timedelta(minutes=89) < expires - before < datetime.timedelta(minutes=91)


def test_a_failing_up_names_the_service_and_request_then_destroys_the_stack(cli: Cli) -> None:
    cli.scenario(up=[{"exit": 255, "stdout": UP_FAILED, "stderr": "error: update failed"}])
    run = cli.run("up", "--stack", STACK, "--prices", PRICES)
    assert run.returncode == 1
    assert run.stdout.splitlines()[:4] == [
        f"stack {STACK}: up failed:",
        "  [Pod inference/verify-tiny-chat-04b354a6-7xk2p]: [Error] verify failed: service "
        "tiny-chat (vllm): answered HTTP 500, expected 200",
        "  request: POST http://tiny-chat.inference.svc.cluster.local:8000/v1/completions "
        '{"max_tokens": 8, "model": "Qwen/Qwen2.5-0.5B-Instruct", "prompt": "The capital of '
        'France is", "temperature": 0}',
        '  answer: HTTP 500: {"error": {"message": "CUDA out of memory", "type": '
        '"InternalServerError"}}',
    ]
    assert run.stdout.splitlines()[-1] == f"  destroyed stack {STACK}"
    verbs = cli.verbs()
    assert verbs[verbs.index("up") + 1 :] == ["destroy", "stack history", "stack rm"]
    destroy = cli.commands()[verbs.index("destroy")]
    assert destroy[:3] == ["destroy", "--skip-preview", "--yes"]
    assert cli.commands()[-1] == ["stack", "rm", "--yes", "--preserve-config", STACK]
    assert STACK not in cli.state()["stacks"]


def test_keep_on_failure_leaves_the_stack(cli: Cli) -> None:
    cli.scenario(up=[{"exit": 255, "stdout": UP_FAILED}])
    run = cli.run("up", "--stack", STACK, "--prices", PRICES, "--keep-on-failure", "--json")
    assert run.returncode == 1
    payload = json.loads(run.stdout)
    assert payload["ok"] is False and "destroyed" not in payload
    assert any("verify failed: service tiny-chat" in f for f in payload["failures"])
    assert "destroy" not in cli.verbs() and STACK in cli.state()["stacks"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ("--prices", PRICES, "--ttl", "9h"),
            "error: mig-inference:ephemeral.maxCost: the plan costs up to $2.20/h",
        ),
        (
            (),
            "error: mig-inference:ephemeral.maxCost: cannot hold the stack to its budget: a100-spot: a2-highgpu-1g is not in the price table",
        ),
        (
            ("--prices", PRICES, "--ttl", "8d"),
            "error: --ttl: '8d' is 11,520 minutes; must be <= 10,080",
        ),
    ],
)
def test_up_is_refused_before_pulumi_runs(cli: Cli, argv: tuple[str, ...], error: str) -> None:
    run = cli.run("up", "--stack", STACK, *argv)
    assert run.returncode == 1 and run.stderr.startswith(error), run.stderr
    assert cli.commands() == [] and "Traceback" not in run.stderr


def test_unpriced_pools_go_ahead_only_when_allowed(cli: Cli) -> None:
    run = cli.run("up", "--stack", STACK, "--allow-unpriced")
    assert run.returncode == 0, run.stderr
    assert "not priced: a100-spot: a2-highgpu-1g is not in the price table" in run.stderr


def test_a_missing_stack_is_named_with_the_stacks_of_its_project(cli: Cli) -> None:
    project = cli.tmp / "platform"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(
        "name: platform\nruntime: python\nstackConfigDir: stacks\n"
    )
    (project / "stacks" / "Pulumi.team-a.yaml").write_text("config: {}\n")
    run = cli.run("up", "--project-dir", str(project), "--stack", "nope")
    assert run.returncode == 1
    assert run.stderr == (
        f"error: {project / 'stacks' / 'Pulumi.nope.yaml'}: cannot read stack file: no such file"
        " (stacks: team-a)\n"
    )
    assert cli.commands() == []


def test_a_stack_file_without_ephemeral_is_refused(cli: Cli) -> None:
    run = cli.run("up", "--stack", "gke-h100")
    assert run.returncode == 1
    assert run.stderr.startswith("error: mig-inference:ephemeral: is required for `ephemeral up`")
    assert cli.commands() == []


def test_up_does_not_take_over_a_stack_it_did_not_create(cli: Cli) -> None:
    cli.save_state({"stacks": {STACK: {"tags": {}, "resources": [], "outputs": {},
                                       "secret_outputs": [], "history": []}}, "current": None})  # fmt: skip
    run = cli.run("up", "--stack", STACK, "--prices", PRICES)
    assert run.returncode == 1 and "is not marked ephemeral" in run.stderr
    assert "up" not in cli.verbs()


def test_destroy_refuses_a_stack_not_marked_ephemeral_and_skips_a_missing_one(cli: Cli) -> None:
    cli.save_state({"stacks": {"prod": {"tags": {"owner": "team"}, "resources": [{"urn": "x"}],
                                        "outputs": {}, "secret_outputs": [], "history": []}},
                    "current": None})  # fmt: skip
    run = cli.run("destroy", "--stack", "prod")
    assert run.returncode == 1
    assert run.stderr.startswith("error: --stack prod: is not marked ephemeral")
    assert "destroy" not in cli.verbs() and cli.state()["stacks"]["prod"]["resources"]
    run = cli.run("destroy", "--stack", "gone")
    assert run.returncode == 0 and run.stdout == "stack gone does not exist: nothing to destroy\n"


def _stack(tags: dict[str, str]) -> dict[str, Any]:
    return {"tags": tags, "resources": [{"urn": "u"}], "outputs": {}, "secret_outputs": [],
            "history": []}  # fmt: skip


def test_destroy_expired_destroys_only_ephemeral_stacks_past_their_expiry(cli: Cli) -> None:
    now = datetime.datetime.now(datetime.UTC)
    cli.save_state({"current": None, "stacks": {
        "old": _stack(expiry.stack_tags(now - datetime.timedelta(minutes=5), 10, 1)),
        "young": _stack(expiry.stack_tags(now + datetime.timedelta(hours=1), 10, 1)),
        "untagged-expiry": _stack({expiry.EPHEMERAL_TAG: "true"}),
        "prod": _stack({}),
    }})  # fmt: skip
    run = cli.run("destroy", "--expired", "--json")
    assert run.returncode == 0, run.stderr
    rows = {row["stack"]: row["result"] for row in json.loads(run.stdout)["stacks"]}
    assert rows == {"old": "destroyed", "young": "kept", "untagged-expiry": "destroyed"}
    assert set(cli.state()["stacks"]) == {"young", "prod"}
    destroyed = [c[c.index("--stack") + 1] for c in cli.commands() if c[0] == "destroy"]
    assert sorted(destroyed) == ["old", "untagged-expiry"]


def test_verify_runs_the_checks_again_and_writes_the_report(cli: Cli) -> None:
    cli.scenario(up=[{"exit": 0, "resources": [verify_job_resource(True)],
                      "outputs": {"kubeconfig": KUBECONFIG}, "secret_outputs": ["kubeconfig"]}],
                 )  # fmt: skip
    assert cli.run("up", "--stack", STACK, "--prices", PRICES).returncode == 0
    (cli.tmp / "job.log").write_text(
        "verify: service tiny-chat (vllm) at http://tiny-chat.inference.svc.cluster.local:8000\n"
        + json.dumps({"mig_inference_verify": {
            "service": "tiny-chat", "ok": True, "answer": " Paris.", "problem": None,
            "requests": [{"request": "GET /v1/models", "status": 200, "ms": 4.2},
                         {"request": "POST /v1/completions", "status": 200, "ms": 81.0}]}})
        + "\n"
    )  # fmt: skip
    report_file = cli.tmp / "verify-report.json"
    run = cli.run("verify", "--stack", STACK, "--report", str(report_file))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"stack {STACK}: every service answered",
        "  tiny-chat: GET /v1/models 4.2 ms, POST /v1/completions 81 ms",
    ]
    job = verify_job_resource(True)
    up = [c for c in cli.commands() if c[0] == "up"][-1]
    assert up[up.index("--target") + 1] == job["urn"] == up[up.index("--replace") + 1]
    written = json.loads(report_file.read_text())
    [service] = written["services"]
    assert written["passed"] and service["passed"] and service["answer"] == " Paris."
    assert service["job"] == f"inference/{job['outputs']['metadata']['name']}"
    kubectl = (cli.tmp / "kubectl.log").read_text().splitlines()
    assert kubectl[0].split()[2:] == ["logs", "-n", "inference",
                                      f"job/{job['outputs']['metadata']['name']}", "--tail=200"]  # fmt: skip
    assert kubectl[1] == "600"  # the kubeconfig (a secret) was readable by its owner only
    assert KUBECONFIG not in run.stdout + run.stderr + report_file.read_text()


def test_a_failing_verify_names_the_service_and_destroys_the_stack(cli: Cli) -> None:
    cli.scenario(
        up=[{"exit": 0, "resources": [verify_job_resource(True)]},
            {"exit": 255, "stdout": UP_FAILED}],
    )  # fmt: skip
    assert cli.run("up", "--stack", STACK, "--prices", PRICES).returncode == 0
    report_file = cli.tmp / "verify-report.json"
    run = cli.run("verify", "--stack", STACK, "--report", str(report_file))
    assert run.returncode == 1
    assert "verify failed: service tiny-chat (vllm)" in run.stdout
    assert run.stdout.splitlines()[-1] == f"  destroyed stack {STACK}"
    written = json.loads(report_file.read_text())
    assert not written["passed"] and any("request: POST" in f for f in written["failures"])
    assert "kubectl is not on PATH" not in report_file.read_text()
    assert STACK not in cli.state()["stacks"]


def test_verify_and_destroy_refuse_stacks_not_marked_ephemeral(cli: Cli) -> None:
    cli.save_state({"current": None, "stacks": {STACK: _stack({})}})
    for argv in (("verify", "--stack", STACK), ("destroy", "--stack", STACK)):
        run = cli.run(*argv)
        assert run.returncode == 1 and "is not marked ephemeral" in run.stderr
    assert not {"up", "destroy"} & set(cli.verbs())


def test_without_pulumi_the_error_says_so(cli: Cli) -> None:
    env = {**cli.env, "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "mig", "ephemeral", "destroy", "--expired"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr == (
        "error: pulumi: the Pulumi CLI is not on PATH: install it "
        "(https://www.pulumi.com/docs/install/)\n"
    )


def test_a_failing_pulumi_command_is_one_error_line(cli: Cli) -> None:
    cli.env["FAKE_PULUMI_FAIL"] = "stack ls"
    run = cli.run("destroy", "--expired")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr == (
        "error: pulumi: the Pulumi CLI failed: PULUMI_ACCESS_TOKEN must be set for "
        "login during non-interactive CLI sessions\n"
    )


# The pure parts.


def test_the_budget_uses_every_pool_at_its_largest() -> None:
    plan = plan_stack(load_stack(STACK))
    cost = stack_cost(plan, load_prices(str(ROOT / PRICES)))
    b = budget.budget(cost, 120, 10)
    assert b.per_hour == pytest.approx(2 * 1.102016) and b.total == pytest.approx(4.408064)
    assert budget.budget_problem(b, allow_unpriced=False) is None
    over = budget.budget(cost, 600, 10)
    problem = budget.budget_problem(over, allow_unpriced=False)
    assert problem is not None and problem.path == "mig-inference:ephemeral.maxCost"
    unpriced = budget.budget(stack_cost(plan, load_prices(None)), 120, 10)
    assert unpriced.per_hour == 0 and budget.budget_problem(unpriced, allow_unpriced=True) is None


def test_expiry_tags_round_trip_and_decide_what_expired() -> None:
    now = datetime.datetime(2026, 11, 23, 10, 0, tzinfo=datetime.UTC)
    tags = expiry.stack_tags(expiry.expiry(now, 120), 25, 2.2)
    assert tags == {"mig-inference:ephemeral": "true", "mig-inference:expires": "2026-11-23T12:00:00Z",
                    "mig-inference:max-cost": "25", "mig-inference:cost-per-hour": "2.20"}  # fmt: skip
    assert not expiry.expired(tags, now) and expiry.expired(tags, now + datetime.timedelta(hours=2))
    assert not expiry.expired({"mig-inference:expires": "2020-01-01T00:00:00Z"}, now)
    # Pulumi's stack tag rules: names of at most 40 of [A-Za-z0-9-_.:], values at most 256.
    for name, value in tags.items():
        assert len(name) <= 40 and set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-_.:")
        assert len(value) <= 256


def test_the_report_reads_only_verify_jobs_and_their_json_line() -> None:
    other = {"urn": "u2", "type": "kubernetes:batch/v1:Job",
             "outputs": {"metadata": {"name": "mig-ready-gate-1", "labels": {"app.kubernetes.io/name": "mig-ready-gate"}}}}  # fmt: skip
    jobs = report.verify_jobs({"resources": [other, verify_job_resource(False)]})
    assert [(j.service, j.succeeded, j.failed) for j in jobs] == [("tiny-chat", False, True)]
    assert report.log_report("noise\n{not json mig_inference_verify\n") is None
    built = report.verify_report(
        "s", jobs, {jobs[0].name: "not read: kubectl is not on PATH"}, [], False
    )
    assert built["services"][0]["log"] == "not read: kubectl is not on PATH"
    assert built["services"][0]["passed"] is False
