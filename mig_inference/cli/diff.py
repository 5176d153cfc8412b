"""`diff`: what applying the stack does to a deployed one, from a simulation of the `pulumi up`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from mig_inference.cli.common import Verb, print_json, read_stack, stack_arguments, stack_file_path
from mig_inference.errors import MigError

if TYPE_CHECKING:
    from pathlib import Path


def register(verb: Verb) -> None:
    sub = verb(
        "diff",
        _diff,
        "what applying the stack does to a deployed one: pools, services, transition cost",
    )
    stack_arguments(sub)
    sub.add_argument(
        "--deployed",
        required=True,
        help="`pulumi stack output --json` saved to a file, or an older stack file",
    )
    sub.add_argument(
        "--min-serving",
        metavar="THRESHOLD",
        help="exit 3 when a service serves fewer replicas at the worst moment of the change: a "
        "count (1: never down), a percentage of its replicas (50%%), or `budget` (what its "
        "PodDisruptionBudget keeps)",
    )
    sub.add_argument(
        "--max-extra-gpus",
        metavar="N",
        type=int,
        help="exit 3 when the change needs more than N GPUs beyond the deployed ones at its peak",
    )


def _same_cloud(deployed: dict[str, Any], current: dict[str, Any], path: str) -> dict[str, Any]:
    if deployed["cloud"] != current["cloud"]:
        raise MigError(
            f"the deployed plan is for cloud {deployed['cloud']}, the stack for "
            f"{current['cloud']}: a stack cannot move between clouds",
            path,
        )
    return deployed


def current_version(args: argparse.Namespace) -> Any:
    from mig_inference.changes.transition import version_of_stack_file

    path = stack_file_path(args)
    read_stack(args)  # the stack file's own errors first, as `plan` reports them
    return version_of_stack_file(path, args.stack)


def simulated_change(args: argparse.Namespace, current: Any) -> Any:
    """The change from the deployed stack (`--deployed`) to `current`, simulated from what the
    deployed stack exported where it says (see `mig_inference.changes.upgrade`)."""
    from pathlib import Path

    return change_from(Path(args.deployed), current)


def change_from(deployed_file: Path, current: Any) -> Any:
    """The change from the deployed stack in `deployed_file` (its outputs or a stack file) to
    `current`, simulated."""
    from mig_inference.changes.change_plan import change_plan
    from mig_inference.changes.deployed import read_deployed
    from mig_inference.changes.record import plan_record
    from mig_inference.changes.transition import load_version, simulate_transition
    from mig_inference.changes.upgrade import deployed_basis
    from mig_inference.render import run_program

    exported = read_deployed(deployed_file)
    deployed = load_version(exported, current)
    records = [plan_record(v.plan, v.values, v.secret_keys) for v in (deployed, current)]
    _same_cloud(records[0], records[1], str(deployed_file))
    basis = deployed_basis(records[0], exported)
    outcome = simulate_transition(deployed, current, basis=basis, render=run_program)
    return change_plan(basis.record, records[1], outcome, basis)


GATE_BREACHED = 3
"""`diff`'s exit code when the change works but costs more than `--min-serving` or
`--max-extra-gpus` allow (1 stays a change Pulumi would refuse or fail at)."""


def _diff(args: argparse.Namespace) -> int:
    from mig_inference.changes.change_plan import change_plan_json, change_plan_text
    from mig_inference.changes.gate import breaches, min_serving, wanted_replicas

    serving = min_serving(args.min_serving) if args.min_serving is not None else None
    if args.max_extra_gpus is not None and args.max_extra_gpus < 0:
        raise MigError(f"{args.max_extra_gpus} is below 0", "--max-extra-gpus")
    current = current_version(args)
    changes = simulated_change(args, current)
    budgets = {s.name: s.disruption_budget for s in current.plan.services}
    wanted = wanted_replicas(current.plan)
    breached = breaches(changes, serving, args.max_extra_gpus, wanted, budgets)
    if args.json:
        print_json({**change_plan_json(changes), "gate_breaches": breached})
    else:
        print(change_plan_text(changes))
    for refusal in changes.refusals:
        print(f"error: {refusal}", file=sys.stderr)
    if changes.failure:
        print(f"error: pulumi up would fail: {changes.failure}", file=sys.stderr)
    for breach in breached:
        print(f"error: gate: {breach}", file=sys.stderr)
    if changes.refusals or changes.failure:
        return 1
    return GATE_BREACHED if breached else 0
