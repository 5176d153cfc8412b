"""Reading `stacks/Pulumi.<stack>.yaml` (or any stack file) into a validated StackSpec."""

from __future__ import annotations

from pathlib import Path

from mig_inference.errors import MigError
from mig_inference.spec import StackSpec, parse_stack, stack_file_values
from mig_inference.versions import GPU_OPERATOR_VERSION
from mig_inference.yamlfile import load_yaml


def stacks_dir() -> Path:
    """Where `--stack NAME` looks: `stacks/` of the working directory (a platform team's IaC
    repository, or this one), else the working directory itself, as Pulumi keeps
    `Pulumi.<stack>.yaml` beside `Pulumi.yaml`."""
    here = Path.cwd()
    return here / "stacks" if (here / "stacks").is_dir() else here


def stack_path(name: str) -> Path:
    return stacks_dir() / f"Pulumi.{name}.yaml"


def stack_names() -> list[str]:
    found = stacks_dir().glob("Pulumi.*.yaml")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in found)


def load_stack_file(path: Path, stack: str | None = None) -> StackSpec:
    """Parse and validate a stack file; MigError names the file or the key path."""
    name = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    if not path.exists():
        known = ", ".join(stack_names()) or "none"
        raise MigError(f"cannot read stack file: no such file (stacks: {known})", str(path))
    data = load_yaml(path, "stack file") or {}
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise MigError("a stack file is a mapping with a `config:` mapping", str(path))
    values, secrets = stack_file_values(data.get("config") or {})
    return parse_stack(
        name, values, secret_keys=secrets, pinned_operator_version=GPU_OPERATOR_VERSION
    )


def load_stack(name: str) -> StackSpec:
    return load_stack_file(stack_path(name), name)
