"""A change of a stack, simulated: the deployed version and the current one are each run through
the stack program under Pulumi's mocks, and the rollout simulator runs `pulumi up` from one to
the other (see `mig_inference.rollout`)."""

from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from msgspec import Struct

from mig_inference.changes.deployed import Deployed
from mig_inference.changes.record import RECORD_FORMAT
from mig_inference.changes.upgrade import DeployedBasis
from mig_inference.errors import MigError, collected
from mig_inference.plan import StackPlan, plan_of
from mig_inference.rendering import Renderer
from mig_inference.rollout.cluster import Timings
from mig_inference.rollout.outcome import Outcome
from mig_inference.spec import NAMESPACE, SECRET_MARKER, parse_stack
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from mig_inference.versions import GPU_OPERATOR_VERSION

PROJECT = "mig-inference"


class StackVersion(Struct, frozen=True, dict=True):
    """One version of a stack: the values of its stack file and the names of its secret keys."""

    name: str
    values: dict[str, Any]
    secret_keys: frozenset[str]

    @cached_property
    def plan(self) -> StackPlan:
        return plan_of(
            lambda: parse_stack(
                self.name,
                self.values,
                secret_keys=self.secret_keys,
                pinned_operator_version=GPU_OPERATOR_VERSION,
            )
        )

    def stack_file(self) -> dict[str, Any]:
        """A stack file of this version (secrets as placeholders: their values never matter
        to what changes)."""
        config: dict[str, Any] = {f"{NAMESPACE}:{key}": value for key, value in self.values.items()}
        for key in sorted(self.secret_keys):
            config[f"{NAMESPACE}:{key}"] = {SECRET_MARKER: "placeholder"}
        return {"config": config}


def version_of_stack_file(path: Path, name: str | None = None) -> StackVersion:
    """A stack file's values as `pulumi up` gives them to the program."""
    engine = read_stack_config(path)
    values, secrets = project_values(engine.values, engine.secret_keys.__contains__)
    stack = name or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return StackVersion(stack, values, secrets)


def version_of_record(record: dict[str, Any], path: str) -> StackVersion:
    """The version a deployed stack exported in its plan (`pulumi stack output plan`)."""
    values = record.get("values")
    if record.get("format") != RECORD_FORMAT or not isinstance(values, dict):
        raise MigError(
            "this deployed plan does not hold its stack's values (it was exported by "
            "mig-inference before 0.3), so the change cannot be simulated: pass the stack file "
            "it was deployed from instead, e.g. `git show <deployed commit>:stacks/Pulumi.<stack>"
            ".yaml > deployed.yaml` and `--deployed deployed.yaml`",
            path,
        )
    return StackVersion(
        str(record.get("stack")), values, frozenset(str(k) for k in record.get("secret_keys", ()))
    )


def load_version(deployed: Deployed, current: StackVersion) -> StackVersion:
    """The deployed version: the values its exported plan holds, or an older stack file's."""
    if deployed.record is None:
        return version_of_stack_file(deployed.path, current.name)
    return version_of_record(deployed.record, str(deployed.path))


def simulate_transition(
    deployed: StackVersion,
    current: StackVersion,
    timings: Timings | None = None,
    basis: DeployedBasis | None = None,
    *,
    render: Renderer,
) -> Outcome:
    """`pulumi up` from `deployed` to `current`, simulated, each version's program run by `render`
    (the command line passes `mig_inference.render.run_program`). `basis`: what the deployed stack
    exported, which the deployed version's program is made to match (`as_exported`). A move
    between the device plugin and DRA the replicas cannot follow is refused first
    (`allocation_move_refusals`), as is a change of time-slicing on running nodes that vLLM's
    memory share follows (`shared_memory_refusals`), as the program refuses bad input: nothing
    is simulated."""
    from mig_inference.changes.allocation_move import allocation_move_refusals
    from mig_inference.changes.deployed_program import as_exported
    from mig_inference.changes.shared_memory import shared_memory_refusals
    from mig_inference.rollout.facts import config_names, load_facts, pool_facts
    from mig_inference.rollout.rendered import program_of
    from mig_inference.rollout.simulator import simulate

    refusals = allocation_move_refusals(deployed.plan, current.plan)
    refusals += shared_memory_refusals(deployed.plan, current.plan)
    if refusals:
        raise collected(refusals)
    programs = []
    with tempfile.TemporaryDirectory() as directory:
        for version in (deployed, current):
            path = Path(directory) / f"Pulumi.{current.name}.yaml"
            path.write_text(yaml.safe_dump(version.stack_file()), encoding="utf-8")
            rendering = render(current.name, path)
            if rendering.error:
                raise MigError(rendering.error)
            programs.append(program_of(rendering))
    return simulate(
        as_exported(programs[0], programs[1], basis, current.plan) if basis else programs[0],
        programs[1],
        pool_facts(deployed.plan, current.plan),
        stack=current.name,
        project=PROJECT,
        timings=timings,
        configs=(config_names(deployed.plan), config_names(current.plan)),
        load=load_facts(deployed.plan, current.plan),
    )
