"""The `ephemeral` verb: `up` (refused above the stack's budget; tags the stack with its expiry;
destroys it again when it fails), `verify` (runs every service's check again and writes a
report; destroys the stack when one fails), `destroy` (only stacks marked ephemeral; also
`--expired`: every ephemeral stack past its expiry).

Pulumi's output streams to stderr as it comes; stdout carries the answer (text, or JSON with
`--json`). Exit codes as every verb: 0 done, 1 refused or failed, 2 a usage error. This module
imports only argparse at load time: the CLI builds its parser without loading Pulumi.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mig_inference.spec import StackSpec

EXIT_FAILED = 1


def add_arguments(verb: argparse.ArgumentParser) -> None:
    """The verb's actions and their options (on the `ephemeral` parser the CLI made)."""
    actions = verb.add_subparsers(dest="action", required=True, parser_class=type(verb))

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
        )
        sub.add_argument(
            "--project-dir",
            default=".",
            help="the Pulumi project (Pulumi.yaml and its stack files); default: here",
        )
        return sub

    up = action("up", "bring an ephemeral stack up within its budget, tagged with its expiry")
    up.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.NAME.yaml")
    up.add_argument("--ttl", help="how long it may live (`2h`, `90m`); default: ephemeral.ttl")
    up.add_argument("--prices", help="a price file replacing or adding machine types' prices")
    up.add_argument(
        "--allow-unpriced",
        action="store_true",
        help="go ahead when a pool has no price (the budget then covers only the priced ones)",
    )
    up.add_argument(
        "--keep-on-failure",
        action="store_true",
        help="leave a stack whose `up` failed for inspection (it still expires)",
    )

    verify = action("verify", "check again that every service answers; write a report")
    verify.add_argument("--stack", required=True)
    verify.add_argument("--report", help="write the verify report (JSON) to this file")
    verify.add_argument(
        "--keep-on-failure", action="store_true", help="leave the stack when a check fails"
    )

    destroy = action("destroy", "destroy an ephemeral stack, or every expired one")
    which = destroy.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack")
    which.add_argument(
        "--expired", action="store_true", help="every ephemeral stack past its expiry"
    )


def run(args: argparse.Namespace) -> int:
    import pulumi.automation as auto

    from mig_inference.errors import MigError

    handler = {"up": _up, "verify": _verify, "destroy": _destroy}[args.action]
    try:
        return handler(args)
    except auto.CommandError as error:
        # A command of the Pulumi CLI itself failed (not logged in, a locked stack...): its own
        # words, never a traceback.
        lines = (line.strip().removeprefix("stderr:").strip() for line in str(error).splitlines())
        said = [line.removeprefix("error:").strip() for line in lines if line.startswith("error:")]
        raise MigError(
            f"the Pulumi CLI failed: {'; '.join(said) or str(error).strip()}", "pulumi"
        ) from None


def _read_stack(args: argparse.Namespace) -> StackSpec:
    """The stack file Pulumi reads for `--stack`, in the project's `stackConfigDir`; a missing
    one is named with the stacks there."""
    from mig_inference.spec.files import load_stack_file

    folder = _stack_folder(args)
    return load_stack_file(folder / f"Pulumi.{args.stack}.yaml", args.stack, stacks_in=folder)


def _stack_folder(args: argparse.Namespace) -> Path:
    """The project's `stackConfigDir`, where Pulumi keeps its stack files."""
    import yaml

    from mig_inference.errors import MigError

    project = Path(args.project_dir)
    try:
        settings = yaml.safe_load((project / "Pulumi.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise MigError(
            f"cannot read the Pulumi project there ({error}): run from the project, or give "
            "--project-dir",
            str(project / "Pulumi.yaml"),
        ) from None
    config_dir = settings.get("stackConfigDir", ".") if isinstance(settings, dict) else "."
    return project / str(config_dir)


def _stacks(args: argparse.Namespace) -> Any:
    """The project's stacks; Pulumi is started only once the offline checks passed."""
    from mig_inference.ephemeral import driver

    return driver.Stacks(Path(args.project_dir), _progress)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _answer(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(payload, indent=2))
    else:
        print(text)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _up(args: argparse.Namespace) -> int:
    from mig_inference.clouds.prices import load_prices
    from mig_inference.ephemeral.budget import budget, budget_problem, budget_text
    from mig_inference.ephemeral.expiry import EXPIRES_TAG, expiry, is_ephemeral, stack_tags
    from mig_inference.errors import MigError
    from mig_inference.plan import plan_of
    from mig_inference.reports.stack_cost import stack_cost
    from mig_inference.spec import key_path
    from mig_inference.spec.verify import duration_minutes, ttl_problem

    plan = plan_of(lambda: _read_stack(args))
    spec = plan.spec
    if spec.ephemeral is None:
        raise MigError(
            "is required for `ephemeral up`: give maxCost (US dollars) and ttl, e.g. "
            "{ttl: 2h, maxCost: 20}",
            key_path("ephemeral"),
        )
    ttl = args.ttl or spec.ephemeral.ttl
    problem = ttl_problem(ttl)
    if problem is not None:
        raise MigError(problem, "--ttl", value=ttl)
    minutes = duration_minutes(ttl)
    assert minutes is not None
    costs = budget(stack_cost(plan, load_prices(args.prices)), minutes, spec.ephemeral.max_cost)
    refused = budget_problem(costs, args.allow_unpriced)
    if refused is not None:
        raise refused
    _progress(budget_text(costs))

    stacks = _stacks(args)
    stack = stacks.find(args.stack)
    if stack is not None and not is_ephemeral(stacks.tags(args.stack)):
        raise MigError(
            "exists and is not marked ephemeral (stack tag mig-inference:ephemeral=true): "
            "`ephemeral up` does not take over a stack it did not create",
            f"--stack {args.stack}",
        )
    stack = stack or stacks.create(args.stack)
    tags = stack_tags(expiry(_now(), minutes), costs.max_cost, costs.per_hour)
    stacks.set_tags(args.stack, tags)
    outcome = stacks.up(stack, f"mig-inference ephemeral up (ttl {ttl})")
    payload: dict[str, Any] = {
        "stack": args.stack,
        "action": "up",
        "ok": outcome.ok,
        "expires": tags[EXPIRES_TAG],
        "per_hour": round(costs.per_hour, 2),
        "budget": round(costs.total, 2),
        "max_cost": costs.max_cost,
    }
    if outcome.ok:
        _answer(
            args,
            payload,
            f"stack {args.stack} is up and every verified service answered; it expires at "
            f"{payload['expires']} (up to ${costs.total:,.2f}); destroy it with "
            f"`mig-inference ephemeral destroy --stack {args.stack}`",
        )
        return 0
    return _failed(args, stacks, stack, outcome.output, payload)


def _failed(
    args: argparse.Namespace, stacks: Any, stack: Any, output: str, payload: dict[str, Any]
) -> int:
    """Name what failed, then destroy the stack unless asked to keep it."""
    from mig_inference.ephemeral.report import failure_lines

    failures = failure_lines(output) or [
        f"pulumi {args.action} failed: see its output above (stderr)"
    ]
    payload["failures"] = failures
    kept = args.keep_on_failure
    if not kept:
        _progress(f"{args.action} failed: destroying stack {args.stack}")
        destroyed = stacks.destroy(stack, f"mig-inference ephemeral {args.action} failed")
        payload["destroyed"] = destroyed.ok
        if not destroyed.ok:
            failures.append(
                f"destroying {args.stack} failed too: run `mig-inference ephemeral destroy "
                f"--stack {args.stack}` again"
            )
    lines = [f"stack {args.stack}: {args.action} failed:", *(f"  {f}" for f in failures)]
    if kept:
        lines.append(f"  kept for inspection until it expires ({payload.get('expires', '?')})")
    elif payload.get("destroyed"):
        lines.append(f"  destroyed stack {args.stack}")
    _answer(args, payload, "\n".join(lines))
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return EXIT_FAILED


def _marked(stacks: Any, name: str) -> None:
    from mig_inference.ephemeral.expiry import is_ephemeral
    from mig_inference.errors import MigError

    if not is_ephemeral(stacks.tags(name)):
        raise MigError(
            "is not marked ephemeral (stack tag mig-inference:ephemeral=true, set by "
            "`ephemeral up`): refused; use `pulumi destroy` for other stacks",
            f"--stack {name}",
        )


def _verify(args: argparse.Namespace) -> int:
    from mig_inference.ephemeral.driver import job_logs
    from mig_inference.ephemeral.report import failure_lines, verify_jobs, verify_report
    from mig_inference.errors import MigError

    stacks = _stacks(args)
    stack = stacks.find(args.stack)
    if stack is None:
        raise MigError("no such stack: bring it up with `ephemeral up`", f"--stack {args.stack}")
    _marked(stacks, args.stack)
    jobs = verify_jobs(stacks.state(stack))
    if not jobs:
        raise MigError(
            "the stack has no serving check: set mig-inference:verify.enabled: true (the "
            "default for stacks that create their cluster) and run `ephemeral up`",
            f"--stack {args.stack}",
        )
    outcome = stacks.up(stack, "mig-inference ephemeral verify", targets=[job.urn for job in jobs])
    jobs = verify_jobs(stacks.state(stack)) or jobs
    logs = job_logs(jobs, stacks.kubeconfig(stack))
    failures = failure_lines(outcome.output)
    report = verify_report(args.stack, jobs, logs, failures, outcome.ok)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    payload: dict[str, Any] = {"stack": args.stack, "action": "verify", "ok": outcome.ok,
                               "report": report}  # fmt: skip
    if outcome.ok:
        lines = [f"stack {args.stack}: every service answered"]
        for service in report["services"]:
            timings = (
                ", ".join(f"{r['request']} {r['ms']:g} ms" for r in service["requests"] or [])
                or "latency: its log was not read"
            )
            lines.append(f"  {service['service']}: {timings}")
        _answer(args, payload, "\n".join(lines))
        return 0
    return _failed(args, stacks, stack, outcome.output, payload)


def _destroy(args: argparse.Namespace) -> int:
    stacks = _stacks(args)
    if args.expired:
        return _destroy_expired(args, stacks)
    stack = stacks.find(args.stack)
    if stack is None:
        _answer(
            args,
            {"stack": args.stack, "action": "destroy", "ok": True, "existed": False},
            f"stack {args.stack} does not exist: nothing to destroy",
        )
        return 0
    _marked(stacks, args.stack)
    outcome = stacks.destroy(stack, "mig-inference ephemeral destroy")
    payload = {"stack": args.stack, "action": "destroy", "ok": outcome.ok, "existed": True}
    if outcome.ok:
        _answer(args, payload, f"destroyed stack {args.stack}")
        return 0
    _answer(args, payload, f"stack {args.stack}: destroy failed (see its output above)")
    print(f"error: destroying {args.stack} failed; run it again", file=sys.stderr)
    return EXIT_FAILED


def _destroy_expired(args: argparse.Namespace, stacks: Any) -> int:
    from mig_inference.ephemeral.expiry import EXPIRES_TAG, expired, is_ephemeral

    now = _now()
    rows = []
    for name in stacks.names():
        tags = stacks.tags(name)
        if not is_ephemeral(tags):
            continue
        if not expired(tags, now):
            rows.append({"stack": name, "expires": tags.get(EXPIRES_TAG), "result": "kept"})
            continue
        stack = stacks.find(name)
        outcome = stacks.destroy(stack, "mig-inference ephemeral destroy --expired")
        result = "destroyed" if outcome.ok else "destroy failed"
        rows.append({"stack": name, "expires": tags.get(EXPIRES_TAG), "result": result})
    ok = all(row["result"] != "destroy failed" for row in rows)
    text = (
        "\n".join(f"{row['stack']}: {row['result']} (expires {row['expires']})" for row in rows)
        or "no ephemeral stack"
    )
    _answer(args, {"action": "destroy", "expired": True, "ok": ok, "stacks": rows}, text)
    if not ok:
        print("error: some expired stacks could not be destroyed; run it again", file=sys.stderr)
    return 0 if ok else EXIT_FAILED
