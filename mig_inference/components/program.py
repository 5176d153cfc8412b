"""The stack program: the stack file's `mig-inference:` keys, given to one `MigInference`.

Secret config keys the stack names (Hugging Face tokens, API keys, a kubeconfig) are passed as
Pulumi secrets; everything else is planned, and refused with its key path, before any resource.
`__main__.py` runs it under `pulumi up`; `python -m mig render` runs it under mocks."""

import pulumi
from pulumi.runtime import config as runtime_config

from mig_inference.errors import MigError
from mig_inference.spec import NAMESPACE, secret_references
from mig_inference.stackfile.pulumi_config import project_values

from .planning import plan_of_values
from .stack import MigInference
from .stack_args import stack_args


def engine_config() -> dict[str, str]:
    """Every config value the engine passed the program, as strings (PULUMI_CONFIG), so that
    keys this project does not know are refused as `mig-inference plan` refuses them. The SDK
    has no public call that lists config keys; its runtime holds them in these two places."""
    passed = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return {key: str(value) for key, value in passed.items()}


def stack_program() -> None:
    """Read the stack's config, build the stack, export what `pulumi stack output` shows."""
    config = pulumi.Config(NAMESPACE)
    try:
        values, secret_keys = project_values(
            engine_config(), lambda key: pulumi.runtime.is_config_secret(key)
        )
    except MigError as error:
        raise pulumi.RunError(str(error)) from None
    secrets: dict[str, pulumi.Input[str]] = {
        name: config.require_secret(name)
        for name in secret_references(values)
        if name in secret_keys
    }
    # The stack file itself is checked first: its keys, not the typed args made from them,
    # are what its errors name (a snake_case key there is refused, not read as its field).
    plan_of_values(pulumi.get_stack(), values, secret_keys)
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
    pulumi.export("cloudPools", stack.cloud_pools)
    pulumi.export("cluster", stack.cluster)
    if values.get("gateway") is not None:
        pulumi.export("gateway", stack.gateway)
