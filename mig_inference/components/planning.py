"""The plan of a stack given as typed args, made once per program run and shared by the
components that build from it."""

import json
from functools import cache
from typing import Any

import pulumi

from mig_inference.errors import MigError
from mig_inference.plan import PoolPlan, ServicePlan, StackPlan, plan_of
from mig_inference.spec import NAMESPACE, parse_stack
from mig_inference.spec.reader import CONFIG_SECRET
from mig_inference.versions import GPU_OPERATOR_VERSION

from .stack_args import (
    CLUSTER_REFERENCES,
    PASSED_THROUGH,
    Stack,
    is_output,
    stack_key,
    stack_values_of,
)

COMPONENT_SECRET = "an entry {name!r} of the component's `secrets` input, a Pulumi secret"
"""How a program using MigInference adds a secret named {name}."""

OUTPUT_KEYS = ", ".join(
    f"cluster.{stack_key(field)}"
    for field in dict.fromkeys(
        [*CLUSTER_REFERENCES, *(f for fields in PASSED_THROUGH.values() for f in fields)]
    )
)
"""The cluster keys that may be Outputs of other resources, as errors name them."""


UNSEEN_BY_GENERATION = {"eks": ("subnet_ids",), "oke": ("subnet_ids", "pod_subnet_ids")}
"""Cluster fields that are generation inputs (a change needs new nodes) and may be Outputs."""


def unseen_changes(stack: Stack) -> list[str]:
    """Warnings for generation inputs given as Outputs: the plan cannot see them change."""
    cluster = stack.get("cluster") or {}
    fields = UNSEEN_BY_GENERATION.get(str(stack.get("cloud")), ())
    return [
        f"{NAMESPACE}:cluster.{stack_key(field)} is an Output of another resource: the planner "
        "cannot see it change, and a change of it needs new nodes, which the pools' generation "
        "brings only when it sees the change. Change it together with a key that brings a new "
        "generation, or give it as plain values"
        for field in fields
        if _outputs_in(cluster.get(field), "x")
    ]


def stack_name(stack: Stack) -> str:
    """The name cluster-scoped objects carry: the args' or the Pulumi stack's."""
    return stack.get("stack_name") or pulumi.get_stack()


@cache
def _plan(
    name: str, values_json: str, secret_keys: frozenset[str], how_to_add_secret: str
) -> StackPlan:
    try:
        return plan_of(
            lambda: parse_stack(
                name,
                json.loads(values_json),
                secret_keys=secret_keys,
                how_to_add_secret=how_to_add_secret,
                pinned_operator_version=GPU_OPERATOR_VERSION,
            )
        )
    except MigError as error:
        # RunError ends the program with just this message: no traceback, nothing created.
        raise pulumi.RunError(str(error)) from None


def plan_of_values(
    name: str,
    values: dict[str, Any],
    secret_keys: frozenset[str] = frozenset(),
    how_to_add_secret: str = CONFIG_SECRET,
) -> StackPlan:
    """The plan of stack-file values (camelCase keys); a stack file the planner refuses ends the
    run with its errors. `how_to_add_secret` tells the author how to add a missing secret."""
    return _plan(name, json.dumps(values, sort_keys=True), secret_keys, how_to_add_secret)


def _outputs_in(value: Any, path: str) -> list[str]:
    """Key paths of `value` that hold Outputs (or values unknown during preview)."""
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _outputs_in(item, _at(path, key))]
    if isinstance(value, list):
        return [
            found for i, item in enumerate(value) for found in _outputs_in(item, f"{path}[{i}]")
        ]
    return [path] if is_output(value) else []


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_PLANNED: dict[int, tuple[Stack, StackPlan]] = {}
"""The plan of each args object a component was given, by identity: every component of a stack
asks for the plan (hundreds of times for a large stack), and converting the args each time made
a render grow with the square of the services. Args are not changed once components get them."""


def planned(stack: Stack) -> StackPlan:
    """The stack's plan, from its typed args. Outputs where the planner needs a value end the
    run with the key paths that hold them."""
    known = _PLANNED.get(id(stack))
    if known is not None and known[0] is stack:
        return known[1]
    plan = _planned(stack)
    if len(_PLANNED) >= 16:
        _PLANNED.clear()
    _PLANNED[id(stack)] = (stack, plan)
    return plan


def _planned(stack: Stack) -> StackPlan:
    secrets = stack.get("secrets") or {}
    if not isinstance(secrets, dict):
        raise pulumi.RunError(
            f"{NAMESPACE}:secrets: must be a map of secret names to values (each value may be an "
            "Output), not one Output"
        )
    values = stack_values_of(stack)
    outputs = _outputs_in(values, "")
    if outputs:
        raise pulumi.RunError(
            "\n".join(
                f"{NAMESPACE}:{path}: is an Output of another resource (or unknown during "
                "preview); the planner decides on it, so it must be a plain value (Outputs may be "
                f"given for {OUTPUT_KEYS} and secrets)"
                for path in outputs
            )
        )
    return plan_of_values(stack_name(stack), values, frozenset(secrets), COMPONENT_SECRET)


def planned_pool(stack: Stack, pool: str) -> PoolPlan:
    """One pool of the stack's plan."""
    found = [planned_one for planned_one in planned(stack).pools if planned_one.name == pool]
    if not found:
        raise pulumi.RunError(f"pool {pool!r} is not in the stack's pools")
    return found[0]


def planned_service(stack: Stack, service: str) -> ServicePlan:
    """One service of the stack's plan."""
    found = [planned_one for planned_one in planned(stack).services if planned_one.name == service]
    if not found:
        raise pulumi.RunError(f"service {service!r} is not in the stack's services")
    return found[0]


def secret_value(stack: Stack, key: str | None) -> pulumi.Output[str] | None:
    """The secret value the stack names by `key`, kept a Pulumi secret."""
    if not key:
        return None
    return pulumi.Output.secret((stack.get("secrets") or {})[key])
