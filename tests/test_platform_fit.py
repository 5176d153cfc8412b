"""MigInference in a platform team's own program: the providers it is given, the tags it puts on
every cloud resource, Outputs of the team's resources where the planner needs no value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components.stack import MigInference
from components.stack_args import Stack, stack_args
from mig_inference.render import Rendering, run_program
from mig_inference.spec import secret_references
from mig_inference.spec.files import stack_path

PACKAGE = {"gke": "gcp", "eks": "aws", "oke": "oci"}
CLOUD_STACKS = sorted(
    name
    for path in Path("stacks").glob("Pulumi.*.yaml")
    if (name := path.name.split(".")[1])
    and yaml.safe_load(path.read_text())["config"]["mig-inference:cloud"] in PACKAGE
)


def stack_values(stack: str) -> dict[str, Any]:
    """A shipped stack file's values without its (placeholder) secrets."""
    config = yaml.safe_load(stack_path(stack).read_text())["config"]
    return {
        key.split(":", 1)[1]: value
        for key, value in config.items()
        if key.startswith("mig-inference:") and not (isinstance(value, dict) and "secure" in value)
    }


def typed(values: dict[str, Any], stack: str = "team") -> Stack:
    """The typed args a Python program writes for these stack-file values."""
    secrets = {name: pulumi.Output.secret(f"{name}-value") for name in secret_references(values)}
    return {**stack_args(values), "secrets": secrets, "stack_name": stack}  # type: ignore[typeddict-item]


def run(tmp_path: Path, program: Callable[[], None]) -> Rendering:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")
    rendering = run_program("test", empty, program=program)
    assert rendering.error is None, rendering.error
    return rendering


def team_provider(package: str) -> pulumi.ProviderResource:
    """The team's own provider, configured as a platform repository configures it."""
    if package == "aws":
        import pulumi_aws as aws

        return aws.Provider(
            "team-aws",
            region="us-east-1",
            assume_roles=[
                aws.ProviderAssumeRoleArgs(role_arn="arn:aws:iam::123456789012:role/deploy")
            ],
            default_tags=aws.ProviderDefaultTagsArgs(tags={"cost-center": "ml"}),
        )
    if package == "gcp":
        import pulumi_gcp as gcp

        return gcp.Provider(
            "team-gcp", project="team-project", default_labels={"cost-center": "ml"}
        )
    import pulumi_oci as oci

    return oci.Provider("team-oci", region="us-ashburn-1")


def cloud_of(stack: str) -> str:
    return str(stack_values(stack)["cloud"])


@pytest.mark.parametrize("how", ["providers-list", "providers-map", "provider", "parent"])
@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_the_team_s_cloud_provider_manages_every_cloud_resource(
    tmp_path: Path, stack: str, how: str
) -> None:
    package = PACKAGE[cloud_of(stack)]

    def program() -> None:
        given = team_provider(package)
        args = typed(stack_values(stack))
        if how == "providers-list":
            MigInference("gpus", args, pulumi.ResourceOptions(providers=[given]))
        elif how == "providers-map":
            MigInference("gpus", args, pulumi.ResourceOptions(providers={package: given}))
        elif how == "provider":
            MigInference("gpus", args, pulumi.ResourceOptions(provider=given))
        else:
            platform = pulumi.ComponentResource(
                "team:index:Platform", "platform", None, pulumi.ResourceOptions(providers=[given])
            )
            MigInference("gpus", args, pulumi.ResourceOptions(parent=platform))

    rendering = run(tmp_path, program)
    made_providers = [
        r.name for r in rendering.resources if r.type == f"pulumi:providers:{package}"
    ]
    assert made_providers == [f"team-{package}"], made_providers
    cloud_resources = [r for r in rendering.resources if r.type.startswith(f"{package}:")]
    assert cloud_resources or rendering.calls
    for resource in cloud_resources:
        assert f"::team-{package}::" in resource.provider, (resource.type, resource.name)
    for (token, _args), provider in zip(rendering.calls, rendering.call_providers, strict=True):
        if token.startswith(f"{package}:"):
            assert f"::team-{package}::" in provider, token


@pytest.mark.parametrize("stack", ["eks-p4d", "gke-h100", "oke-h100"])
def test_without_a_provider_the_component_configures_one_from_the_stack(
    tmp_path: Path, stack: str
) -> None:
    package = PACKAGE[cloud_of(stack)]

    def program() -> None:
        MigInference("gpus", typed(stack_values(stack)))

    rendering = run(tmp_path, program)
    [made] = [r for r in rendering.resources if r.type == f"pulumi:providers:{package}"]
    assert made.name == f"gpus-{package}"
    for resource in rendering.resources:
        if resource.type.startswith(f"{package}:"):
            assert f"::gpus-{package}::" in resource.provider, (resource.type, resource.name)


def test_the_team_s_kubernetes_provider_is_used_for_every_kubernetes_object(
    tmp_path: Path,
) -> None:
    import pulumi_kubernetes as k8s

    def program() -> None:
        cluster = k8s.Provider("team-k8s", kubeconfig=pulumi.Output.secret("apiVersion: v1"))
        MigInference(
            "gpus", typed(stack_values("gke-h100")), pulumi.ResourceOptions(providers=[cluster])
        )

    rendering = run(tmp_path, program)
    made = [r.name for r in rendering.resources if r.type == "pulumi:providers:kubernetes"]
    assert made == ["team-k8s"]
    for resource in rendering.resources:
        if resource.type.startswith("kubernetes:"):
            assert "::team-k8s::" in resource.provider, (resource.type, resource.name)
