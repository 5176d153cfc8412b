"""Reading `stacks/Pulumi.<stack>.yaml` (or any stack file) into a validated StackSpec."""

from __future__ import annotations

import errno
import fnmatch
import os

from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.spec import StackSpec, parse_stack
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from mig_inference.stackfile.yamlfile import FilePath, file_name
from mig_inference.versions import GPU_OPERATOR_VERSION


def stacks_dir() -> str:
    """Where `--stack NAME` looks: `stacks/` of the working directory (a platform team's IaC
    repository, or this one), else the working directory itself, as Pulumi keeps
    `Pulumi.<stack>.yaml` beside `Pulumi.yaml`."""
    here = os.getcwd()
    stacks = os.path.join(here, "stacks")
    return stacks if os.path.isdir(stacks) else here


def stack_path(name: str) -> str:
    return os.path.join(stacks_dir(), f"Pulumi.{name}.yaml")


def stack_names(folder: FilePath | None = None) -> list[str]:
    """The stacks of `folder` (by default the one `--stack` looks in); none where it cannot be
    listed."""
    try:
        listed = os.listdir(stacks_dir() if folder is None else folder)
    except OSError:
        return []
    found = fnmatch.filter(listed, "Pulumi.*.yaml")
    return sorted(name[len("Pulumi.") : -len(".yaml")] for name in found)


def load_stack_file(
    path: FilePath, stack: str | None = None, *, stacks_in: FilePath | None = None
) -> StackSpec:
    """Parse and validate a stack file as `pulumi up` gives it to the program (see
    mig_inference.stackfile.pulumi_config); MigError names the file or the key path. A missing
    one is named with the stacks of `stacks_in` (by default those `--stack` finds)."""
    path = file_name(path)
    name = stack or os.path.basename(path).removeprefix("Pulumi.").removesuffix(".yaml")
    if not _exists(path):
        known = ", ".join(stack_names(stacks_in)) or "none"
        raise MigError(f"cannot read stack file: no such file (stacks: {known})", path)
    engine = read_stack_config(path)
    values, secrets = project_values(engine.values, engine.secret_keys.__contains__)
    spec = parse_stack(
        name, values, secret_keys=secrets, pinned_operator_version=GPU_OPERATOR_VERSION
    )
    return replace(spec, warnings=spec.warnings + engine.warnings)


_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
"""What `pathlib.Path.exists` takes to mean that nothing has the name; any other failure to
look (permission, a name too long) is left to the reader, whose error says why."""


def _exists(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as error:
        return error.errno not in _ABSENT
    except ValueError:
        return True  # a NUL: the reader names it
    return True


def load_stack(name: str) -> StackSpec:
    return load_stack_file(stack_path(name), name)
