"""`bench`: the planner's benchmark (GPUs against lower bounds and baselines, and time), the
stack program's growth under Pulumi's mocks, and each goal of issue 52 measured on the installed
command (see `mig_inference.cli.bench_processes`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mig_inference.cli.common import Verb, print_json


def register(verb: Verb) -> None:
    sub = verb(
        "bench", _bench, "planner benchmark: GPUs, bounds, baselines, time; start-up and diff goals"
    )
    sub.add_argument("--seed", type=int, default=7)
    sub.add_argument(
        "--quick", action="store_true", help="only the smallest scenario of each kind (a smoke run)"
    )
    sub.add_argument(
        "--parvagpu-bin",
        type=Path,
        metavar="PATH",
        help="ParvaGPU's scheduler built with up to five MPS processes (parva_sched in its "
        "checkout): timed beside the planner's MPS scenarios",
    )
    sub.add_argument(
        "--parvagpu-single-bin",
        type=Path,
        metavar="PATH",
        help="ParvaGPU's scheduler in a checkout whose profiles keep one process per instance: "
        "timed beside the planner's single scenarios",
    )


def _bench(args: argparse.Namespace) -> int:
    from mig_inference.cli.bench_processes import goals_json, goals_text, measure_goals
    from mig_inference.render import run_program
    from mig_inference.solving.bench import bench_text, measure

    parvagpu = {"single": args.parvagpu_single_bin, "mps": args.parvagpu_bin}
    result = measure(run_program, seed=args.seed, quick=args.quick, parvagpu=parvagpu)
    goals = measure_goals(result.demand, quick=args.quick)
    if args.json:
        print_json({**result.as_json(), "goals": goals_json(goals)})
    else:
        print(bench_text(result))
        print()
        print("\n".join(goals_text(goals)))
    return 0
