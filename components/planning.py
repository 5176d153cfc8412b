"""The plan of a stack given as typed args, made once per program run and shared by the
components that build from it."""

import json
from functools import cache

import pulumi

from mig_inference.errors import MigError
from mig_inference.plan import PoolPlan, ServicePlan, StackPlan, plan_stack
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION

from .stack_args import Stack, stack_values_of


def stack_name(stack: Stack) -> str:
    """The name cluster-scoped objects carry: the args' or the Pulumi stack's."""
    return stack.get("stack_name") or pulumi.get_stack()


@cache
def _plan(name: str, values_json: str, secret_keys: frozenset[str]) -> StackPlan:
    try:
        spec = parse_stack(
            name,
            json.loads(values_json),
            secret_keys=secret_keys,
            pinned_operator_version=GPU_OPERATOR_VERSION,
        )
        return plan_stack(spec)
    except MigError as error:
        # RunError ends the program with just this message: no traceback, nothing created.
        raise pulumi.RunError(str(error)) from None


def planned(stack: Stack) -> StackPlan:
    """The stack's plan; a stack file the planner refuses ends the run with its errors."""
    values = stack_values_of(stack)
    secret_keys = frozenset(stack.get("secrets") or {})
    return _plan(stack_name(stack), json.dumps(values, sort_keys=True), secret_keys)


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
