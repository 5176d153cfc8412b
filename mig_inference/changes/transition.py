"""A change of a stack, simulated: the deployed version and the current one are each run through
the stack program under Pulumi's mocks, and the rollout simulator runs `pulumi up` from one to
the other (see `mig_inference.rollout`)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from mig_inference.changes.deployed import Deployed
from mig_inference.changes.record import RECORD_FORMAT
from mig_inference.errors import MigError
from mig_inference.plan import StackPlan, plan_of
from mig_inference.rollout.cluster import Timings
from mig_inference.rollout.outcome import Outcome
from mig_inference.rollout.resources import Program
from mig_inference.spec import NAMESPACE, SECRET_MARKER, parse_stack
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from mig_inference.versions import GPU_OPERATOR_VERSION

PROJECT = "mig-inference"


@dataclass(frozen=True)
class StackVersion:
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


def with_generations(program: Program, generations: Mapping[str, str]) -> Program:
    """`program` with each generation in `generations` renamed wherever an input holds it as a
    word: the pool's cloud name `<pool>-<generation>`, its generation label, the affinity and
    the gate's selectors that name it (a generation is a hash: it is no other input's word)."""
    if not generations:
        return program
    word = re.compile(r"\b(" + "|".join(map(re.escape, generations)) + r")\b")

    def renamed(value: Any) -> Any:
        if isinstance(value, str):
            return word.sub(lambda found: generations[found.group(1)], value)
        if isinstance(value, Mapping):
            return {key: renamed(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [renamed(item) for item in value]
        return value

    result = Program()
    for resource in program:
        result.add(replace(resource, inputs=renamed(resource.inputs)))
    return result


POOL_COMPONENTS = (
    "mig-inference:index:GkeGpuPool", "mig-inference:index:EksGpuNodeGroup",
    "mig-inference:index:OkeGpuPool",
)  # fmt: skip


def kept_pools(deployed: Program, current: Program, pools: Iterable[str]) -> Program:
    """`deployed` with the resources of `pools` (each pool component's descendants) as
    `current` renders them. For a pool whose exported generation is the one the installed code
    plans now, that is what runs: its generation hashes every input whose change needs new
    nodes, so the release that deployed it rendered those as the installed one does (the
    installed code's rendering of the deployed values is another generation's)."""
    keys = {
        key
        for pool in pools
        for component in POOL_COMPONENTS
        if (component, pool) in deployed
        for key in deployed.descendants((component, pool))
        if key in current
    }
    if not keys:
        return deployed
    result = Program()
    for resource in deployed:
        result.add(
            replace(resource, inputs=current[resource.key].inputs)
            if resource.key in keys
            else resource
        )
    return result


def simulate_transition(
    deployed: StackVersion,
    current: StackVersion,
    timings: Timings | None = None,
    generations: Mapping[str, str] | None = None,
    kept: Iterable[str] = (),
) -> Outcome:
    """`pulumi up` from `deployed` to `current`, simulated. `generations`: a generation the
    installed code plans for a deployed pool -> the one it runs (exported): the deployed
    version's pools, their labels and the selectors of their services carry the exported one.
    `kept`: pools whose exported generation is the one planned now (see `kept_pools`)."""
    from mig_inference.render import run_program
    from mig_inference.rollout.facts import config_names, load_facts, pool_facts
    from mig_inference.rollout.rendered import program_of
    from mig_inference.rollout.simulator import simulate

    programs = []
    with tempfile.TemporaryDirectory() as directory:
        for version in (deployed, current):
            path = Path(directory) / f"Pulumi.{current.name}.yaml"
            path.write_text(yaml.safe_dump(version.stack_file()), encoding="utf-8")
            rendering = run_program(current.name, path)
            if rendering.error:
                raise MigError(rendering.error)
            programs.append(program_of(rendering))
    return simulate(
        kept_pools(with_generations(programs[0], generations or {}), programs[1], kept),
        programs[1],
        pool_facts(deployed.plan, current.plan),
        stack=current.name,
        project=PROJECT,
        timings=timings,
        configs=(config_names(deployed.plan), config_names(current.plan)),
        load=load_facts(deployed.plan, current.plan),
    )
