"""`render`: run the Pulumi program under mocks and write what it would create."""

from __future__ import annotations

import argparse
from pathlib import Path

from mig_inference.cli.common import (
    Verb,
    print_json,
    read_stack,
    stack_arguments,
    stack_file_path,
    warn,
)
from mig_inference.errors import MigError


def register(verb: Verb) -> None:
    sub = verb("render", _render, "run the Pulumi program under mocks; write what it would create")
    stack_arguments(sub)
    sub.add_argument("--out", required=True, help="output directory")


def _render(args: argparse.Namespace) -> int:
    from mig_inference.plan import plan_of
    from mig_inference.render import run_program, write_rendering

    plan = plan_of(lambda: read_stack(args))  # the same errors as `plan`, before Pulumi loads
    path = stack_file_path(args)
    name = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    rendering = run_program(name, path)
    if rendering.error:
        raise MigError(rendering.error)
    written = write_rendering(rendering, Path(args.out))
    warn(plan.warnings)
    kinds = {"kubernetes": 0, "helm": 0, "cloud": 0}
    for file in written:
        top = file.relative_to(args.out).parts[0]
        if top in kinds:
            kinds[top] += 1
    if args.json:
        print_json({"stack": name, "out": str(args.out), "files": kinds, "warnings": plan.warnings})
    else:
        print(
            f"rendered stack {name} into {args.out}: {kinds['kubernetes']} Kubernetes objects, "
            f"{kinds['helm']} Helm release(s), {kinds['cloud']} cloud resources (secrets redacted)"
        )
    return 0
