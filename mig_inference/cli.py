"""`python -m mig`: the offline command line.

Every verb prints a readable answer, or JSON with `--json`. Exit codes: 0 done, 1 bad input (or
a change Pulumi would refuse), 2 a usage error. Bad input is one line per problem on stderr,
`error: <key path>: <message>`, never a traceback; with `--json` stdout also carries
`{"errors": [{"key", "value", "message", "allowed"}], "warnings": [...]}`. Warnings always go to
stderr (`warning: ...`) and, with `--json`, into the payload's `warnings`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mig_inference.catalog import GpuModel, load_catalog, resolve_gpu
from mig_inference.clouds.capacity import Capacity
from mig_inference.errors import MigError
from mig_inference.fleet import load_fleet
from mig_inference.layout import parse_custom_layout, place, slot_bar
from mig_inference.migparted import dump, render_named
from mig_inference.sizing import ModelShape, gib_to_mib, parse_params, smallest_profile

Handler = Callable[[argparse.Namespace], int]


def _print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2))


def _profiles(args: argparse.Namespace) -> int:
    gpu = _mig_gpu(args.gpu)
    rows = [
        {
            "name": p.name,
            "compute_slices": p.compute,
            "memory_slices": p.memory,
            "memory_mib": p.memory_mib,
            "max_instances": p.max_instances,
            "resource": p.resource,
            "starts": list(p.starts),
            "memory_estimated": p.memory_estimated,
            "unconfirmed": list(p.unconfirmed),
        }
        for p in gpu.profiles
    ]
    if args.json:
        _print_json(
            {
                "gpu": gpu.name,
                "compute_slices": gpu.compute_slices,
                "memory_slices": gpu.memory_slices,
                "pci_device_ids": list(gpu.pci_device_ids),
                "placements_confirmed": gpu.placements_confirmed,
                "placements_note": gpu.placements_note,
                "estimate_note": gpu.estimate_note,
                "unconfirmed": list(gpu.unconfirmed),
                "notes": list(gpu.notes),
                "profiles": rows,
            }
        )
        return 0
    print(
        f"{gpu.name}: {gpu.compute_slices} compute slices, {gpu.memory_slices} memory slices, "
        f"PCI {', '.join(gpu.pci_device_ids)}"
    )
    width = max(12, *(len(p.name) for p in gpu.profiles))
    columns = ("profile", "compute", "memory", "MiB", "max", "starts")
    print(f"{{:<{width}}} {{:>7}} {{:>6}} {{:>8}} {{:>4}}  {{:<14}} resource".format(*columns))
    for p in gpu.profiles:
        mib = f"~{p.memory_mib}" if p.memory_estimated else str(p.memory_mib)
        starts = ",".join(str(s) for s in p.starts)
        print(
            f"{p.name:<{width}} {p.compute:>7} {p.memory:>6} {mib:>8} {p.max_instances:>4}  "
            f"{starts:<14} {p.resource}"
        )
    _print_caveats(gpu)
    return 0


def _print_caveats(gpu: GpuModel) -> None:
    if gpu.estimated_profiles:
        names = ", ".join(p.name for p in gpu.estimated_profiles)
        print(f"~ no measured size for {names}: conservative estimate ({gpu.estimate_note})")
    if not gpu.placements_confirmed:
        print(f"placements: {gpu.placements_note}")
    if gpu.unconfirmed:
        print(f"unconfirmed for this model: {', '.join(gpu.unconfirmed)}")
    for note in gpu.notes:
        print(f"note: {note}")


def _mig_gpu(name: str) -> GpuModel:
    """The GPU named by `--gpu`, refused when it has no MIG (for the verbs about MIG slices)."""
    gpu = resolve_gpu(name)
    if not gpu.mig_capable:
        raise MigError(
            f"{gpu.name} has no MIG profiles: its {gpu.whole_gpu_mib:,} MiB serve whole, or "
            "shared by time-slicing (a pool's `sharing`)",
            "--gpu",
            value=name,
        )
    return gpu


def _validate(args: argparse.Namespace) -> int:
    gpu = _mig_gpu(args.gpu)
    layout = parse_custom_layout(
        gpu, ",".join(f"{p}=1" if "=" not in p else p for p in args.profiles)
    )
    placements = place(gpu, layout)
    if args.json:
        _print_json(
            {
                "valid": True,
                "gpu": gpu.name,
                "placements": [
                    {"profile": pl.profile, "start": pl.start, "size": pl.size} for pl in placements
                ],
            }
        )
        return 0
    print(f"{layout} fits on {gpu.name}:")
    print("  " + slot_bar(gpu, placements))
    for pl in placements:
        print(f"  {pl.profile:<12} memory slices {pl.start}-{pl.start + pl.size - 1}")
    return 0


def _config(args: argparse.Namespace) -> int:
    gpu = resolve_gpu(args.gpu)
    document = render_named(gpu, args.name)
    if args.json:
        _print_json(document)
    else:
        print(dump(document), end="")
    return 0


def _fit(args: argparse.Namespace) -> int:
    gpu = resolve_gpu(args.gpu)
    understood = None
    if args.memory_gib is not None:
        try:
            need = gib_to_mib(args.memory_gib)
        except MigError as error:
            raise MigError(error.message, "--memory-gib", value=args.memory_gib) from None
    else:
        billions, understood = parse_params(args.params)
        if not args.json:
            print(f"params: {understood}")
        shape = ModelShape(
            params_billion=billions,
            dtype=args.dtype,
            layers=args.layers,
            kv_heads=args.kv_heads,
            head_dim=args.head_dim,
            context=args.context,
            concurrency=args.concurrency,
            overhead=args.overhead,
        )
        need = shape.need_mib
    if not gpu.mig_capable:
        return _fit_whole(args, gpu, need, billions if understood else None, understood)
    profile = smallest_profile(gpu, need)
    if args.json:
        _print_json(
            {
                "gpu": gpu.name,
                "params_billion": billions if understood else None,
                "params_understood": understood,
                "profile": profile.name,
                "resource": profile.resource,
                "need_mib": round(need, 1),
                "slice_mib": profile.memory_mib,
                "slice_estimated": profile.memory_estimated,
            }
        )
        return 0
    print(
        f"needs {need:,.0f} MiB ({need / 1024:.1f} GiB) -> {profile.name} on {gpu.name} "
        f"({profile.memory_mib:,} MiB usable{', estimated' if profile.memory_estimated else ''}), "
        f"request {profile.resource}: 1"
    )
    return 0


def _fit_whole(
    args: argparse.Namespace,
    gpu: GpuModel,
    need: float,
    billions: float | None,
    understood: str | None,
) -> int:
    """A GPU without MIG: whether one replica fits it, and how many fit it shared."""
    whole = gpu.whole_gpu_mib
    if need > whole:
        raise MigError(
            f"needs {need:,.0f} MiB, more than a whole {gpu.name} ({whole:,} MiB usable)",
            value=round(need, 1),
        )
    sharers = min(int(whole // need), 48)
    shared = (
        f"up to {sharers} replicas fit one when it is time-sliced"
        if sharers >= 2
        else "too large to share it with another replica"
    )
    if args.json:
        _print_json(
            {
                "gpu": gpu.name,
                "params_billion": billions,
                "params_understood": understood,
                "profile": "gpu",
                "resource": "nvidia.com/gpu",
                "need_mib": round(need, 1),
                "slice_mib": whole,
                "slice_estimated": False,
                "replicas_per_shared_gpu": sharers,
            }
        )
        return 0
    print(
        f"needs {need:,.0f} MiB ({need / 1024:.1f} GiB) -> a whole {gpu.name} ({whole:,} MiB "
        f"usable, no MIG); {shared}"
    )
    return 0


def _gpus(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    if args.json:
        _print_json(
            [
                {"name": g.name, "aliases": list(g.aliases), "mig": g.mig_capable}
                for g in catalog.every_gpu
            ]
        )
        return 0
    width = max(len(gpu.name) for gpu in catalog.every_gpu)
    for gpu in catalog.every_gpu:
        mig = "" if gpu.mig_capable else " (no MIG: whole or shared)"
        print(f"{gpu.name:<{width}}  {', '.join(gpu.aliases)}{mig}")
    return 0


def _pack(args: argparse.Namespace) -> int:
    from mig_inference.packing import pack
    from mig_inference.report import pack_json, pack_text

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
    gpu = _mig_gpu(args.gpu)
    fleet = load_fleet(args.file)
    plan = pack(gpu, fleet, gpus_per_node=args.gpus_per_node, uniform_nodes=args.uniform_nodes)
    if args.json:
        _print_json(pack_json(plan))
    else:
        print(pack_text(plan))
    return 0


def _capacity_flag(given: str | None, spot: bool) -> Capacity | None:
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
    from mig_inference.cost import cheapest_machine, cost_json, cost_text
    from mig_inference.prices import load_prices

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
        _print_json(payload)
    else:
        print(cost_text(result, f"{_command()} pack {args.file}"))
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _load_stack(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from mig_inference.stackfile import load_stack, load_stack_file

    if args.stack_file:
        return load_stack_file(Path(args.stack_file))
    return load_stack(args.stack)


def _plan(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mig_inference.plan import plan_stack
    from mig_inference.stack_report import plan_json, plan_text

    plan = plan_stack(_load_stack(args))
    if args.deployed:
        from mig_inference.changes import change_warnings

        plan.warnings.extend(change_warnings(_change_plan(args, _current_version(args))))
    if args.svg:
        from mig_inference.picture import layouts_svg

        _write(Path(args.svg), layouts_svg(plan))
    from mig_inference.prices import load_prices
    from mig_inference.stack_cost import cost_json, cost_text, stack_cost

    cost = stack_cost(plan, load_prices(args.prices))
    _warn(plan.warnings)
    if args.json:
        _print_json({**plan_json(plan), "cost": cost_json(cost)})
    else:
        print(plan_text(plan))
        print()
        print(cost_text(cost))
    return 0


def _throughput(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from mig_inference.profiling_results import throughput_table

    table = throughput_table([Path(log) for log in args.logs])
    if args.out:
        _write(Path(args.out), yaml.safe_dump(table, sort_keys=False))
    if args.json:
        _print_json(table)
    elif not args.out:
        print(yaml.safe_dump(table, sort_keys=False), end="")
    return 0


def _write(path: Any, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise MigError(f"cannot write: {error.strerror}", str(path)) from None


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _same_cloud(deployed: dict[str, Any], current: dict[str, Any], path: str) -> dict[str, Any]:
    if deployed["cloud"] != current["cloud"]:
        raise MigError(
            f"the deployed plan is for cloud {deployed['cloud']}, the stack for "
            f"{current['cloud']}: a stack cannot move between clouds",
            path,
        )
    return deployed


def _current_version(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from mig_inference.stackfile import stack_path
    from mig_inference.transition import version_of_stack_file

    path = Path(args.stack_file) if args.stack_file else stack_path(args.stack)
    _load_stack(args)  # the stack file's own errors first, as `plan` reports them
    return version_of_stack_file(path, args.stack)


def _change_plan(args: argparse.Namespace, current: Any) -> Any:
    """The change from the deployed version (`--deployed`) to `current`, simulated."""
    from pathlib import Path

    from mig_inference.changes import change_plan
    from mig_inference.record import plan_record
    from mig_inference.transition import load_version, simulate_transition

    deployed = load_version(Path(args.deployed), current)
    records = [plan_record(v.plan, v.values, v.secret_keys) for v in (deployed, current)]
    _same_cloud(records[0], records[1], args.deployed)
    return change_plan(records[0], records[1], simulate_transition(deployed, current))


def _diff(args: argparse.Namespace) -> int:
    from mig_inference.changes import change_plan_json, change_plan_text

    changes = _change_plan(args, _current_version(args))
    if args.json:
        _print_json(change_plan_json(changes))
    else:
        print(change_plan_text(changes))
    for refusal in changes.refusals:
        print(f"error: {refusal}", file=sys.stderr)
    if changes.failure:
        print(f"error: pulumi up would fail: {changes.failure}", file=sys.stderr)
    return 1 if changes.refusals or changes.failure else 0


def _render(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mig_inference.plan import plan_stack
    from mig_inference.render import run_program, write_rendering
    from mig_inference.stackfile import stack_path

    plan = plan_stack(_load_stack(args))  # the same errors as `plan`, before Pulumi loads
    path = Path(args.stack_file) if args.stack_file else stack_path(args.stack)
    name = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    rendering = run_program(name, path)
    if rendering.error:
        raise MigError(rendering.error)
    written = write_rendering(rendering, Path(args.out))
    _warn(plan.warnings)
    kinds = {"kubernetes": 0, "helm": 0, "cloud": 0}
    for file in written:
        top = file.relative_to(args.out).parts[0]
        if top in kinds:
            kinds[top] += 1
    if args.json:
        _print_json(
            {"stack": name, "out": str(args.out), "files": kinds, "warnings": plan.warnings}
        )
    else:
        print(
            f"rendered stack {name} into {args.out}: {kinds['kubernetes']} Kubernetes objects, "
            f"{kinds['helm']} Helm release(s), {kinds['cloud']} cloud resources (secrets redacted)"
        )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from mig_inference.bench import bench_text, measure

    result = measure(seed=args.seed, quick=args.quick)
    if args.json:
        _print_json(result.as_json())
    else:
        print(bench_text(result))
    return 0


def _ephemeral(args: argparse.Namespace) -> int:
    from mig_inference.ephemeral.command import run

    return run(args)


def _command() -> str:
    """How the user ran it: the installed `mig-inference` command, or `python -m mig` in a
    clone."""
    return "mig-inference" if sys.argv[0].rsplit("/", 1)[-1] == "mig-inference" else "python -m mig"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, not a usage dump
        command = _command()
        verb = self.prog.removeprefix(command).strip()
        self.exit(2, f"error: {message} (see `{command} {verb + ' ' if verb else ''}--help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=_command(), description="MIG planning for inference fleets.")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    def verb(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        sub.add_argument("--json", action="store_true", help="print JSON")
        return sub

    verb("gpus", _gpus, "list the GPU models and the names they answer to")

    sub = verb("profiles", _profiles, "list a GPU's MIG profiles")
    sub.add_argument("--gpu", required=True, help="GPU model or alias, e.g. h100")

    sub = verb("validate", _validate, "check that profiles fit together on one GPU")
    sub.add_argument("--gpu", required=True)
    sub.add_argument("profiles", nargs="+", help="profile names (repeat for several), or P=N")

    sub = verb("config", _config, "print a mig-parted v1 config")
    sub.add_argument("--gpu", required=True)
    sub.add_argument("name", help="named config (all-balanced, all-1g.10gb...) or P=N,P=N")

    sub = verb(
        "throughput",
        _throughput,
        "a throughput file (for a service's throughputFile) from profiling runs' logs",
    )
    sub.add_argument("logs", nargs="+", help="`kubectl logs job/<name>` of each profiling Job")
    sub.add_argument("--out", help="write the file here instead of printing it")

    sub = verb("fit", _fit, "smallest MIG slice that holds a model replica")
    sub.add_argument("--gpu", required=True)
    need = sub.add_mutually_exclusive_group(required=True)
    need.add_argument("--memory-gib", type=float, help="memory need of one replica in GiB")
    need.add_argument(
        "--params", help="parameters: 3B, 8b, 70e9, 7000000000, or a bare number in billions"
    )
    sub.add_argument("--dtype", default="bf16", help="fp32, bf16, fp16, fp8, int8 or int4")
    sub.add_argument("--layers", type=int)
    sub.add_argument("--kv-heads", type=int)
    sub.add_argument("--head-dim", type=int)
    sub.add_argument("--context", type=int, default=4096)
    sub.add_argument("--concurrency", type=int, default=1)
    sub.add_argument("--overhead", type=float, default=1.2)

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

    def stack_args(sub: argparse.ArgumentParser) -> None:
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--stack", help="stack name: reads stacks/Pulumi.NAME.yaml (or ./Pulumi.NAME.yaml)"
        )
        where.add_argument("--stack-file", help="any stack file")

    sub = verb("plan", _plan, "what a stack builds and whether it fits, offline")
    stack_args(sub)
    sub.add_argument("--svg", help="write a picture of every distinct layout to this file")
    sub.add_argument(
        "--deployed",
        help="also warn about what applying it to this deployed plan costs (see `diff`)",
    )
    sub.add_argument("--prices", help="a price file replacing or adding machine types' prices")

    sub = verb(
        "diff",
        _diff,
        "what applying the stack does to a deployed one: pools, services, transition cost",
    )
    stack_args(sub)
    sub.add_argument(
        "--deployed",
        required=True,
        help="`pulumi stack output --json` saved to a file, or an older stack file",
    )

    sub = verb("render", _render, "run the Pulumi program under mocks; write what it would create")
    stack_args(sub)
    sub.add_argument("--out", required=True, help="output directory")

    from mig_inference.ephemeral.command import add_arguments as ephemeral_arguments

    sub = verb(
        "ephemeral",
        _ephemeral,
        "an ephemeral test stack: up within its budget and TTL, verify its services, destroy",
    )
    ephemeral_arguments(sub)

    sub = verb("bench", _bench, "planner benchmark: GPUs, bounds, baselines and wall time")
    sub.add_argument("--seed", type=int, default=7)
    sub.add_argument(
        "--quick", action="store_true", help="only the smallest scenario of each kind (a smoke run)"
    )
    return parser


def _failed(args: argparse.Namespace, error: MigError) -> int:
    if getattr(args, "json", False):
        _print_json({"errors": [e.as_json() for e in error.errors], "warnings": []})
    for each in error.errors:
        print(f"error: {each}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except MigError as error:
        return _failed(args, error)
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            return 0
        where = f"{error.filename}: " if error.filename else ""
        return _failed(args, MigError(f"{where}{error.strerror or error}"))
