"""Reading `stacks/Pulumi.<stack>.yaml` (or any stack file) into a validated StackSpec."""

from __future__ import annotations

from pathlib import Path

from mig.errors import MigError
from mig.spec import StackSpec, parse_stack, stack_file_values
from mig.versions import GPU_OPERATOR_VERSION
from mig.yamlfile import load_yaml

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


def stack_path(name: str) -> Path:
    return STACKS_DIR / f"Pulumi.{name}.yaml"


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


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
