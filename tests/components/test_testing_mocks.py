"""The mocks a team's own unit tests use (`mig_inference.components.testing.MigInferenceMocks`):
a program that joins a cluster runs to the end under them on each cloud, the team's own mocks
still answer what is not the package's, and without answers the components fail with the name
of the lookup and the field it lacked instead of a TypeError deep inside the package."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as runtime_mocks
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from mig_inference.components.stack import MigInference
from mig_inference.components.testing import MigInferenceMocks
from mig_inference.offline_answers import answers_offline
from tests.components.test_platform_fit import stack_values, typed
from tests.mocked import stack_rendering

JOINING = {"gke": "gke-h100", "eks": "eks-p4d", "oke": "oke-h100"}


class TeamMocks(pulumi.runtime.Mocks):
    """A team's own mocks: they answer their own lookup and record what is created."""

    def __init__(self) -> None:
        self.created: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[Any, Any]]:
        self.created.append((args.typ, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[Any]]:
        if args.token == "team:index:getNetwork":
            return {"subnet": "subnet-team"}, []
        return dict(args.args), []


def run_under(mocks: pulumi.runtime.Mocks, program: Callable[[], None]) -> str | None:
    """Run `program` under `mocks` in a fresh event loop; the error Pulumi reports, if any."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        settings.reset_options(project="team", stack="test")
        runtime_mocks.set_mocks(mocks, project="team", stack="test", preview=False)
        _sync_await(run_pulumi_func(program))
        return None
    except Exception as error:
        return str(error)
    finally:
        settings.reset_options()
        loop.close()
        asyncio.set_event_loop(None)


def team_program(cloud: str) -> Callable[[], None]:
    def program() -> None:
        MigInference("gpus", typed(stack_values(JOINING[cloud])))

    return program


@pytest.mark.parametrize("cloud", sorted(JOINING))
def test_a_team_program_joining_a_cluster_runs_under_the_package_mocks(cloud: str) -> None:
    team = TeamMocks()
    assert run_under(MigInferenceMocks(fallback=team), team_program(cloud)) is None
    [provider] = [inputs for typ, inputs in team.created if typ == "pulumi:providers:kubernetes"]
    assert "apiVersion: v1" in str(provider.get("kubeconfig"))


def test_the_team_mocks_answer_what_is_not_the_package_s() -> None:
    team = TeamMocks()
    answer, _ = MigInferenceMocks(fallback=team).call(
        pulumi.runtime.MockCallArgs("team:index:getNetwork", {}, "")
    )
    assert answer == {"subnet": "subnet-team"}
    answer, _ = MigInferenceMocks(fallback=team).call(
        pulumi.runtime.MockCallArgs("aws:eks/getCluster:getCluster", {"name": "c"}, "")
    )
    assert answer["certificateAuthorities"] and answer["endpoint"]


@pytest.mark.parametrize(
    ("cloud", "lookup", "field"),
    [("gke", "gcp:container/getCluster", "endpoint"), ("eks", "aws:eks/getCluster", "endpoint")],
)
def test_an_unanswered_lookup_is_named_with_the_field_it_lacks(
    cloud: str, lookup: str, field: str
) -> None:
    error = run_under(TeamMocks(), team_program(cloud))
    assert error is not None
    assert f"{lookup} answered without {field}" in error, error
    assert "TypeError" not in error


STACKS = sorted(p.name.split(".")[1] for p in Path("stacks").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", STACKS)
def test_every_lookup_a_shipped_stack_makes_has_an_answer(stack: str) -> None:
    unanswered = {token for token, _ in stack_rendering(stack).calls if not answers_offline(token)}
    assert not unanswered, f"add the fields the components read to render's answers: {unanswered}"


class TeamAnswers(TeamMocks):
    """A team's mocks that also give a created EKS cluster a `vpcConfig` of their own."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[Any, Any]]:
        resource_id, outputs = super().new_resource(args)
        if args.typ == "aws:eks/cluster:Cluster":
            outputs["vpcConfig"] = {**outputs.get("vpcConfig", {}), "vpcId": "vpc-team"}
        return resource_id, outputs


def _created_eks_cluster(mocks: pulumi.runtime.Mocks) -> dict[str, Any]:
    """The `cluster` output of a program creating an EKS cluster (eks-p4d's, created) under
    `mocks`."""
    seen: dict[str, Any] = {}
    values = stack_values("eks-p4d")
    values["cluster"] = {**values["cluster"], "create": True, "vpcId": "vpc-0a1b2c3d",
                         "endpointPublicAccess": False, "version": "1.33"}  # fmt: skip

    def program() -> None:
        gpus = MigInference("gpus", typed(values))
        gpus.cluster.apply(lambda cluster: seen.update(cluster))

    assert run_under(mocks, program) is None
    return seen


@pytest.mark.parametrize("team", [TeamMocks, TeamAnswers])
def test_a_created_cluster_keeps_the_package_s_nested_outputs_under_the_team_s_mocks(
    team: type[TeamMocks],
) -> None:
    """The documented fallback echoes inputs: a created EKS cluster's `vpcConfig` comes back
    with the subnets it was given, and the package's computed `clusterSecurityGroupId` stays
    beside them (merged, not replaced by the team's `vpcConfig`)."""
    cluster = _created_eks_cluster(MigInferenceMocks(fallback=team()))
    assert cluster["clusterSecurityGroupId"] == "sg-0123456789abcdef0"
    assert cluster["created"] is True


def test_the_team_s_nested_answer_wins_and_lists_are_not_doubled() -> None:
    mocks = MigInferenceMocks(fallback=TeamAnswers())
    inputs = {"name": "c", "vpcConfig": {"subnetIds": ["subnet-a", "subnet-b"]}}
    _, outputs = mocks.new_resource(
        pulumi.runtime.MockResourceArgs("aws:eks/cluster:Cluster", "c", inputs, "", "", None)
    )
    assert outputs["vpcConfig"] == {
        "subnetIds": ["subnet-a", "subnet-b"],
        "vpcId": "vpc-team",
        "clusterSecurityGroupId": "sg-0123456789abcdef0",
    }
