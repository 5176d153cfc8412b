"""The catalog's verbs: `gpus`, `profiles`, `validate` (profiles that fit one GPU) and `config`
(a mig-parted config)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mig_inference.cli.common import Verb, mig_gpu, print_json

if TYPE_CHECKING:
    from mig_inference.gpus.catalog import GpuModel


def register(verb: Verb) -> None:
    verb("gpus", _gpus, "list the GPU models and the names they answer to")

    sub = verb("profiles", _profiles, "list a GPU's MIG profiles")
    sub.add_argument("--gpu", required=True, help="GPU model or alias, e.g. h100")

    sub = verb("validate", _validate, "check that profiles fit together on one GPU")
    sub.add_argument("--gpu", required=True)
    sub.add_argument("profiles", nargs="+", help="profile names (repeat for several), or P=N")

    sub = verb("config", _config, "print a mig-parted v1 config")
    sub.add_argument("--gpu", required=True)
    sub.add_argument("name", help="named config (all-balanced, all-1g.10gb...) or P=N,P=N")


def _gpus(args: argparse.Namespace) -> int:
    from mig_inference.gpus.catalog import load_catalog

    catalog = load_catalog()
    if args.json:
        print_json(
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


def _profiles(args: argparse.Namespace) -> int:
    gpu = mig_gpu(args.gpu)
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
        print_json(
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


def _validate(args: argparse.Namespace) -> int:
    from mig_inference.gpus.layout import parse_custom_layout, place, slot_bar

    gpu = mig_gpu(args.gpu)
    layout = parse_custom_layout(
        gpu, ",".join(f"{p}=1" if "=" not in p else p for p in args.profiles)
    )
    placements = place(gpu, layout)
    if args.json:
        print_json(
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
    from mig_inference.gpus.catalog import resolve_gpu
    from mig_inference.gpus.migparted import dump, render_named

    gpu = resolve_gpu(args.gpu)
    document = render_named(gpu, args.name)
    if args.json:
        print_json(document)
    else:
        print(dump(document), end="")
    return 0
