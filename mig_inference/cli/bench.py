"""`bench`: the planner's benchmark (GPUs against lower bounds and baselines, and wall time)."""

from __future__ import annotations

import argparse

from mig_inference.cli.common import Verb, print_json


def register(verb: Verb) -> None:
    sub = verb("bench", _bench, "planner benchmark: GPUs, bounds, baselines and wall time")
    sub.add_argument("--seed", type=int, default=7)
    sub.add_argument(
        "--quick", action="store_true", help="only the smallest scenario of each kind (a smoke run)"
    )


def _bench(args: argparse.Namespace) -> int:
    from mig_inference.solving.bench import bench_text, measure

    result = measure(seed=args.seed, quick=args.quick)
    if args.json:
        print_json(result.as_json())
    else:
        print(bench_text(result))
    return 0
