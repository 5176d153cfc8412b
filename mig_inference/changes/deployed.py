"""What a deployed stack exported, read once for `plan --deployed` and `diff --deployed`.

Three shapes are accepted: `pulumi stack output --json` saved to a file (an object whose `plan`
is the plan record the program exports, beside `pools`, `services`, `cloudPools`...), a plan
record alone (`pulumi stack output plan --json`), or an older stack file (`config:`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import Struct

from mig_inference.changes.record import RECORD_FORMAT
from mig_inference.errors import MigError
from mig_inference.stackfile.yamlfile import load_yaml


class Deployed(Struct, frozen=True):
    """A deployed stack as its file shows it."""

    path: Path
    record: dict[str, Any] | None = None
    """The plan record a release of mig-inference exported (`pulumi stack output --json`'s
    `plan`, or the record alone); None for a stack file, which the installed code plans."""


def read_deployed(path: Path) -> Deployed:
    """The deployed stack in `path`, by its shape; one clear error for anything else."""
    data = load_yaml(path, "deployed plan")
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        return Deployed(path, _record(data["plan"], path))
    if isinstance(data, dict) and "config" in data:
        return Deployed(path)
    if isinstance(data, dict) and str(data.get("format", "")).startswith("mig-inference/plan/"):
        return Deployed(path, _record(data, path))
    if data == {}:
        raise MigError(
            "the deployed stack exported nothing (`pulumi stack output --json` of a stack that "
            "was never deployed): there is nothing to compare with, and nothing running that the "
            "change could disrupt; `plan` shows what the stack builds",
            str(path),
        )
    raise MigError(
        f"not a deployed plan: expected `pulumi stack output --json` of a mig-inference stack "
        f"(with a `plan` of format {RECORD_FORMAT}) or a stack file",
        str(path),
    )


def _record(data: dict[str, Any], path: Path) -> dict[str, Any]:
    pools, services = data.get("pools", {}), data.get("services", {})
    if not isinstance(pools, dict) or not isinstance(services, dict):
        raise MigError(
            "the deployed plan's `pools` and `services` must be mappings by name (is the file "
            "`pulumi stack output --json` of a mig-inference stack?)",
            f"{path}: plan",
        )
    return data
