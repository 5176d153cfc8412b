"""Reading `stacks/Pulumi.<stack>.yaml` (or any stack file) into a validated StackSpec."""

from __future__ import annotations

from pathlib import Path

import yaml

from mig.errors import MigError
from mig.spec import StackSpec, parse_stack, stack_file_values
from mig.versions import GPU_OPERATOR_VERSION

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


def stack_path(name: str) -> Path:
    return STACKS_DIR / f"Pulumi.{name}.yaml"


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def load_stack_file(path: Path, stack: str | None = None) -> StackSpec:
    """Parse and validate a stack file; MigError names the file or the key path."""
    name = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        known = ", ".join(stack_names()) or "none"
        raise MigError(
            f"cannot read stack file: {error.strerror} (stacks: {known})", str(path)
        ) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise MigError(f"not valid YAML{where}", str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("config", {}), dict):
        raise MigError("a stack file is a mapping with a `config:` mapping", str(path))
    values, secrets = stack_file_values(data.get("config") or {})
    return parse_stack(
        name, values, secret_keys=secrets, pinned_operator_version=GPU_OPERATOR_VERSION
    )


def load_stack(name: str) -> StackSpec:
    return load_stack_file(stack_path(name), name)
