"""The deployed version's program as the deployed stack's export says it runs.

`diff` renders the deployed stack's values with the installed code; where the export says the
deployed stack runs something else (`mig_inference.changes.upgrade`), the rendered program is
changed to match before the simulation starts from it: pools on their exported generation, pools
the stack keeps as they run, and Deployments whose pod the release that deployed them rendered
differently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec.structs import replace

from mig_inference.changes.upgrade import DeployedBasis
from mig_inference.plan import StackPlan
from mig_inference.rollout.resources import Program

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DEPLOYED_POD_VARIABLE = "MIG_INFERENCE_DEPLOYED_POD"
"""Only in the simulation's deployed program: a pod template the deployed release rendered."""


def as_exported(
    deployed: Program, current: Program, basis: DeployedBasis, plan: StackPlan
) -> Program:
    """`deployed` (the deployed values rendered by the installed code) as `basis` says it runs;
    `current`, `plan`: the version the stack is going to."""
    generations = {pool.name: pool.generation for pool in plan.pools}
    program = with_generations(deployed, basis.generations)
    program = kept_pools(program, current, basis.kept(generations))
    return with_deployed_pods(program, basis.pods)


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


def with_deployed_pods(program: Program, pods: Mapping[tuple[str, str], str]) -> Program:
    """`program` whose Deployments in `pods` ((namespace, name) -> the pod fingerprint the
    deployed stack exported) hold that fingerprint in their engine container's environment: the
    release that deployed them rendered another pod template, and the simulation rolls their
    replicas (one at a time) as any change of the template's spec does. The template's other
    fields stay the installed code's: the export holds only the fingerprint."""
    if not pods:
        return program
    result = Program()
    for resource in program:
        metadata = resource.inputs.get("metadata") or {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        if resource.type == DEPLOYMENT and key in pods:
            spec = dict(resource.inputs.get("spec") or {})
            template = dict(spec.get("template") or {})
            pod = dict(template.get("spec") or {})
            [engine, *others] = pod.get("containers") or [{}]
            marker = {"name": DEPLOYED_POD_VARIABLE, "value": pods[key]}
            pod["containers"] = [{**engine, "env": [*(engine.get("env") or []), marker]}, *others]
            template["spec"] = pod
            spec["template"] = template
            resource = replace(resource, inputs={**resource.inputs, "spec": spec})
        result.add(resource)
    return result
