"""The stack program: the stack file's `mig-inference:` keys, given to one `MigInference`.

Secret config keys the stack names (Hugging Face tokens, API keys, a kubeconfig) are passed as
Pulumi secrets; everything else is planned, and refused with its key path, before any resource.
`__main__.py` runs it under `pulumi up`; `python -m mig render` runs it under mocks."""

from typing import Any

import pulumi

from mig_inference.spec import NAMESPACE, TOP_KEYS, secret_references

from .planning import plan_of_values
from .stack import MigInference
from .stack_args import stack_args


def stack_program() -> None:
    """Read the stack's config, build the stack, export what `pulumi stack output` shows."""
    config = pulumi.Config(NAMESPACE)
    values: dict[str, Any] = {
        key: config.get(key) if key == "cloud" else config.get_object(key)
        for key in TOP_KEYS
        if config.get(key) is not None
    }
    secrets: dict[str, pulumi.Input[str]] = {
        name: config.require_secret(name)
        for name in secret_references(values)
        if pulumi.runtime.is_config_secret(f"{NAMESPACE}:{name}")
    }
    # The stack file itself is checked first: its keys, not the typed args made from them,
    # are what its errors name (a snake_case key there is refused, not read as its field).
    plan_of_values(pulumi.get_stack(), values, frozenset(secrets))
    stack = MigInference(
        "mig-inference",
        {**stack_args(values), "secrets": secrets, "stack_name": pulumi.get_stack()},
        stack_program=True,
    )

    cluster = values.get("cluster")
    if isinstance(cluster, dict) and cluster.get("create"):
        pulumi.export("kubeconfig", stack.kubeconfig)
    pulumi.export("plan", stack.plan)
    pulumi.export("pools", stack.pools)
    pulumi.export("services", stack.services)
