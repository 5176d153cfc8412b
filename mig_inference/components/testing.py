"""Pulumi mocks for unit-testing a program that uses `MigInference`.

Under `pulumi.runtime.set_mocks`, every data source answers with what the mocks return, and a
cluster the stack joins is found through lookups (GKE `getCluster`, EKS `getCluster`, OKE
`getCluster` and `getClusterKubeConfig`, ...) whose answers the components read. `MigInferenceMocks`
answers each of them with the fields the components read, per cloud, and gives created cloud
resources the computed outputs the components read (a cluster's endpoint and CA, a launch
template's version, a node group's Auto Scaling group). Anything else goes to the team's own
mocks (`fallback`), or has its inputs echoed back.

A created resource's outputs are its inputs, the package's computed outputs and the team's
answer, merged key by key at every depth: a team whose mocks echo a created EKS cluster's inputs
(`vpcConfig` with its subnets) keeps the cluster security group the package computes inside
`vpcConfig`. The later answer wins a key both give; a list is taken whole, never concatenated."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
from deepmerge import Merger

from mig_inference.offline_answers import answers_offline, offline_answer, offline_outputs

NESTED = Merger([(dict, ["merge"]), (list, ["override"])], ["override"], ["override"])
"""Mappings merged key by key; lists and other values replaced by the later answer."""


def merged_outputs(*answers: dict[Any, Any]) -> dict[Any, Any]:
    """`answers` merged in order, the later winning each key both give (copies: the answers
    themselves stay as they were)."""
    result: dict[Any, Any] = {}
    for answer in answers:
        result = NESTED.merge(result, copy.deepcopy(answer))
    return result


class MigInferenceMocks(pulumi.runtime.Mocks):
    """Mocks answering every lookup `MigInference` makes, and the team's own through `fallback`.

    `kubernetes_minor`: the Kubernetes minor a joined cluster reports (e.g. 35 for a DRA stack
    written for 1.35); without it the placeholders' versions (1.33) are reported."""

    def __init__(
        self,
        fallback: pulumi.runtime.Mocks | None = None,
        kubernetes_minor: int | None = None,
    ) -> None:
        self.fallback = fallback
        self.kubernetes_minor = kubernetes_minor

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[Any, Any]]:
        computed = offline_outputs(args.typ, {})
        if self.fallback is not None:
            resource_id, outputs = self.fallback.new_resource(args)
            return resource_id, merged_outputs(dict(args.inputs), computed, outputs)
        return f"{args.name}-id", merged_outputs(dict(args.inputs), computed)

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if answers_offline(args.token) or self.fallback is None:
            return offline_answer(args.token, args.args, self.kubernetes_minor), []
        return self.fallback.call(args)
