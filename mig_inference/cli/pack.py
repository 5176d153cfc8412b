"""`pack`: the fewest GPUs whose MIG layouts hold a fleet, or the cheapest machine type for it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mig_inference.cli.common import Verb, command, mig_gpu, print_json
from mig_inference.errors import MigError

if TYPE_CHECKING:
    from mig_inference.clouds.capacity import Capacity


def register(verb: Verb) -> None:
    sub = verb("pack", _pack, "fewest GPUs whose MIG layouts hold a fleet of workloads")
    sub.add_argument("file", help="YAML: workloads: [{name, replicas, profile | memory_gib}]")
    onto = sub.add_mutually_exclusive_group(required=True)
    onto.add_argument("--gpu", help="pack onto GPUs of this model")
    onto.add_argument(
        "--machines",
        help="comma-separated machine types: pack onto whole nodes of each, pick the cheapest",
    )
    onto.add_argument(
        "--cloud",
        choices=("gke", "eks", "oke"),
        help="compare every priced machine type of this cloud, pick the cheapest",
    )
    sub.add_argument("--gpus-per-node", type=int, help="group GPUs into nodes of this size")
    sub.add_argument(
        "--uniform-nodes", action="store_true", help="every node identical (one node-pool label)"
    )
    sub.add_argument(
        "--spot", action="store_true", help="with --machines/--cloud: compare spot prices"
    )
    sub.add_argument(
        "--capacity",
        metavar="CHOICE",
        help="with --machines/--cloud: compare prices of on-demand (default), spot, "
        "reservation, capacity-block or flex-start capacity; machines not sold so are skipped",
    )
    sub.add_argument(
        "--prices",
        metavar="FILE",
        help="with --machines/--cloud: YAML prices replacing or adding to the shipped table",
    )


def _pack(args: argparse.Namespace) -> int:
    from mig_inference.reports.packing import pack_json, pack_text
    from mig_inference.solving.packing import pack

    if args.gpu is None:
        return _pack_cheapest(args)
    given_flags = (
        ("--spot", args.spot),
        ("--capacity", args.capacity is not None),
        ("--prices", args.prices is not None),
    )
    for flag, given in given_flags:
        if given:
            raise MigError(
                "prices compare machine types: use it with --machines or --cloud, not --gpu", flag
            )
    gpu = mig_gpu(args.gpu)
    from mig_inference.solving.fleet import load_fleet

    fleet = load_fleet(args.file)
    plan = pack(gpu, fleet, gpus_per_node=args.gpus_per_node, uniform_nodes=args.uniform_nodes)
    if args.json:
        print_json(pack_json(plan))
    else:
        print(pack_text(plan))
    return 0


def _capacity_flag(given: str | None, spot: bool) -> Capacity | None:
    from mig_inference.clouds.capacity import Capacity

    if given is None:
        return None
    allowed = [str(c) for c in Capacity]
    if given not in allowed:
        raise MigError(
            f"{given!r} is not a capacity choice; allowed: {', '.join(allowed)}",
            "--capacity",
            value=given,
            allowed=allowed,
        )
    if spot and given != Capacity.SPOT:
        raise MigError(
            f"--spot is --capacity spot; it contradicts --capacity {given}", "--spot", value=True
        )
    return Capacity(given)


def _pack_cheapest(args: argparse.Namespace) -> int:
    """`pack --machines/--cloud`: the cheapest machine type on whole nodes."""
    from mig_inference.clouds.prices import load_prices
    from mig_inference.reports.cheapest import cost_json, cost_text
    from mig_inference.solving.cheapest import cheapest_machine

    if args.gpus_per_node is not None:
        raise MigError(
            "a machine type fixes the GPUs per node: drop it with --machines or --cloud",
            "--gpus-per-node",
            value=args.gpus_per_node,
        )
    machines = [m.strip() for m in (args.machines or "").split(",") if m.strip()]
    if args.machines is not None and not machines:
        raise MigError("name at least one machine type", "--machines", value=args.machines)
    prices = load_prices(args.prices)
    from mig_inference.solving.fleet import load_fleet

    fleet = load_fleet(args.file)
    result = cheapest_machine(
        fleet,
        prices,
        machines=machines,
        cloud=args.cloud,
        spot=args.spot,
        uniform_nodes=args.uniform_nodes,
        capacity=_capacity_flag(args.capacity, args.spot),
    )
    error = None
    if result.choice is None:
        error = MigError(
            "no candidate machine holds the fleet (each one's reason is in its "
            f"{'`infeasible_reason`' if args.json else 'row'})",
            "--machines" if args.machines is not None else "--cloud",
            value=[c.machine for c in result.candidates],
        )
    if args.json:
        payload = cost_json(result)
        if error is not None:
            payload.update(errors=[error.as_json()], warnings=[])
        print_json(payload)
    else:
        print(cost_text(result, f"{command()} pack {args.file}"))
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
