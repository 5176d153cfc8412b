"""The re-planned stack file: the user's file with only the re-planned values changed, read back
as Pulumi reads it to make sure it says exactly what was decided, before anything is written."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from msgspec import Struct

from mig_inference.changes.replan import Replan
from mig_inference.changes.transition import StackVersion
from mig_inference.errors import MigError
from mig_inference.spec import NAMESPACE
from mig_inference.stackfile.pulumi_config import engine_config, project_name, project_values
from mig_inference.stackfile.roundtrip import Edit, edited_text
from mig_inference.stackfile.yamlfile import parse_text, read_text

SERVICES = "services"


class ReplannedStack(Struct, frozen=True):
    text: str
    version: StackVersion
    reformatted: int = 0
    """Lines besides the changed values that the editor writes differently."""
    first_reformatted: int | None = None


def _services_key(config: Any, project: str) -> str:
    """How the file spells `mig-inference:services` under `config:`."""
    for key in config if isinstance(config, dict) else ():
        if key == f"{NAMESPACE}:{SERVICES}" or (key == SERVICES and project == NAMESPACE):
            return str(key)
    raise MigError(f"has no {NAMESPACE}:{SERVICES} to re-plan")


def replanned_stack(path: Path, current: StackVersion, replan: Replan) -> ReplannedStack:
    """`path`'s stack file (the one `current` was read from) with `replan`'s changes."""
    source = str(path)
    text = read_text(path, "stack file")
    changes = replan.changes()
    if not changes:
        return ReplannedStack(text, current)
    project = project_name(path)
    document = parse_text(text, source).value
    key = _services_key(document.get("config") if isinstance(document, dict) else None, project)
    edits = [Edit(("config", key, index, name), value) for index, (name, value) in changes.items()]
    edited = edited_text(text, edits, source)
    engine = engine_config(parse_text(edited.text, source, go_times=True), source, project)
    values, secrets = project_values(engine.values, engine.secret_keys.__contains__)
    expected = copy.deepcopy(current.values)
    for index, (name, value) in changes.items():
        expected[SERVICES][index][name] = value
    if values != expected or secrets != current.secret_keys:
        changed = sorted(k for k in {*values, *expected} if values.get(k) != expected.get(k))
        raise MigError(
            "the edited stack file does not read back as the re-planned values (changed: "
            f"{', '.join(changed) or 'its secrets'}); is a service's value shared through a YAML "
            "anchor? Nothing was written",
            source,
        )
    version = StackVersion(current.name, values, secrets)
    return ReplannedStack(edited.text, version, edited.reformatted, edited.first_reformatted)
