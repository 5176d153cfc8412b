"""`fit`: the smallest MIG slice that holds one replica of a model (or whether a GPU without MIG
holds it, and how many share it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mig_inference.cli.common import Verb, print_json
from mig_inference.errors import MigError

if TYPE_CHECKING:
    from mig_inference.gpus.catalog import GpuModel


def register(verb: Verb) -> None:
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


def _fit(args: argparse.Namespace) -> int:
    from mig_inference.gpus.catalog import resolve_gpu
    from mig_inference.gpus.sizing import ModelShape, gib_to_mib, parse_params, smallest_profile

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
        print_json(
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
        print_json(
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
