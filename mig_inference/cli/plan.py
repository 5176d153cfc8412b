"""`plan`: what a stack builds and whether it fits, offline (and, with `--deployed`, what applying
it costs)."""

from __future__ import annotations

import argparse

from msgspec.structs import replace

from mig_inference.cli.common import Verb, print_json, read_stack, stack_arguments, warn, write
from mig_inference.cli.diff import current_version, simulated_change


def register(verb: Verb) -> None:
    sub = verb("plan", _plan, "what a stack builds and whether it fits, offline")
    stack_arguments(sub)
    sub.add_argument("--svg", help="write a picture of every distinct layout to this file")
    sub.add_argument(
        "--deployed",
        help="`pulumi stack output --json` (or an older stack file): mig: auto pools prefer the "
        "layouts it runs, and the warnings say what applying the plan to it costs (see `diff`)",
    )
    sub.add_argument(
        "--prices",
        help="a price file replacing or adding machine types' and model cache storage prices",
    )


def _plan(args: argparse.Namespace) -> int:
    from mig_inference.clouds.prices import load_price_tables
    from mig_inference.plan import plan_of
    from mig_inference.reports.stack import plan_json, plan_text
    from mig_inference.reports.stack_cost import cost_json, cost_text, stack_cost

    if args.deployed:
        from pathlib import Path

        from mig_inference.changes.change_plan import change_warnings, load_deployed
        from mig_inference.plan.pools.deployed import with_deployed_layouts

        current = current_version(args)
        deployed = load_deployed(Path(args.deployed))
        values, preferred = with_deployed_layouts(current.values, deployed)
        current = replace(current, values=values)
        plan = current.plan
        plan.warnings.extend(change_warnings(simulated_change(args, current)))
        plan.warnings.extend(
            f"pool {name}: planned to keep the deployed layout where the fewest nodes allow; pin "
            "its migPrefer line below in the stack file so `pulumi up` plans the same"
            for name in preferred
        )
    else:
        plan = plan_of(lambda: read_stack(args))
    if args.svg:
        from mig_inference.reports.picture import layouts_svg

        write(args.svg, layouts_svg(plan))
    cost = stack_cost(plan, *load_price_tables(args.prices))
    warn(plan.warnings)
    if args.json:
        print_json({**plan_json(plan), "cost": cost_json(cost)})
    else:
        print(plan_text(plan))
        print()
        print(cost_text(cost))
    return 0
