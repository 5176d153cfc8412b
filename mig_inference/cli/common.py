"""What the verbs share: printing, the GPU and stack arguments, how the user ran the command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mig_inference.errors import MigError

if TYPE_CHECKING:
    from pathlib import Path

    from mig_inference.gpus.catalog import GpuModel
    from mig_inference.stackfile.yamlfile import FilePath

Handler = Callable[[argparse.Namespace], int]


class Verb(Protocol):
    """Adds a verb to the parser: its name, handler and one-line help; `--json` comes with it."""

    def __call__(self, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser: ...


def command() -> str:
    """How the user ran it: the installed `mig-inference` command, or `python -m mig` in a
    clone."""
    return "mig-inference" if sys.argv[0].rsplit("/", 1)[-1] == "mig-inference" else "python -m mig"


def print_json(payload: Any) -> None:
    print(json.dumps(payload, indent=2))


def warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


def write(path: FilePath, text: str) -> None:
    from mig_inference.stackfile.yamlfile import openable_name

    name = openable_name(path, "cannot write")
    try:
        with open(name, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise MigError(f"cannot write: {error.strerror}", name) from None


def mig_gpu(name: str) -> GpuModel:
    """The GPU named by `--gpu`, refused when it has no MIG (for the verbs about MIG slices)."""
    from mig_inference.gpus.catalog import resolve_gpu

    gpu = resolve_gpu(name)
    if not gpu.mig_capable:
        raise MigError(
            f"{gpu.name} has no MIG profiles: its {gpu.whole_gpu_mib:,} MiB serve whole, or "
            "shared by time-slicing (a pool's `sharing`)",
            "--gpu",
            value=name,
        )
    return gpu


def stack_arguments(sub: argparse.ArgumentParser) -> None:
    where = sub.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--stack", help="stack name: reads stacks/Pulumi.NAME.yaml (or ./Pulumi.NAME.yaml)"
    )
    where.add_argument("--stack-file", help="any stack file")


def stack_file_path(args: argparse.Namespace) -> Path:
    """The stack file of `--stack` or `--stack-file`, for the verbs that work on its path
    (`render`, `diff`, `replan`); `read_stack` reads it."""
    from pathlib import Path

    from mig_inference.spec.files import stack_path

    return Path(stack_path(args.stack) if args.stack_file is None else args.stack_file)


def read_stack(args: argparse.Namespace) -> Any:
    from mig_inference.spec.files import load_stack, load_stack_file

    if args.stack_file is not None:
        return load_stack_file(args.stack_file)
    return load_stack(args.stack)
