"""`throughput`: a throughput file (for a service's `throughputFile`) from profiling runs' logs."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from mig_inference.cli.common import Verb, print_json, write


def register(verb: Verb) -> None:
    sub = verb(
        "throughput",
        _throughput,
        "a throughput file (for a service's throughputFile) from profiling runs' logs",
    )
    sub.add_argument("logs", nargs="+", help="`kubectl logs job/<name>` of each profiling Job")
    sub.add_argument("--out", help="write the file here instead of printing it")


def _throughput(args: argparse.Namespace) -> int:
    from mig_inference.kube.profiling_results import throughput_table

    table = throughput_table([Path(log) for log in args.logs])
    if args.out:
        write(Path(args.out), yaml.safe_dump(table, sort_keys=False))
    if args.json:
        print_json(table)
    elif not args.out:
        print(yaml.safe_dump(table, sort_keys=False), end="")
    return 0
