"""Pulumi mocks for unit-testing a program that uses `MigInference`.

Under `pulumi.runtime.set_mocks`, every data source answers with what the mocks return, and a
cluster the stack joins is found through lookups (GKE `getCluster`, EKS `getCluster`, OKE
`getCluster` and `getClusterKubeConfig`, ...) whose answers the components read. `MigInferenceMocks`
answers each of them with the fields the components read, per cloud, and gives created cloud
resources the computed outputs the components read (a cluster's endpoint and CA, a launch
template's version, a node group's Auto Scaling group). Anything else goes to the team's own
mocks (`fallback`), or has its inputs echoed back."""

from __future__ import annotations

from typing import Any

import pulumi

from mig_inference.offline_answers import answers_offline, offline_answer, offline_outputs


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
        if self.fallback is not None:
            resource_id, outputs = self.fallback.new_resource(args)
            return resource_id, {**offline_outputs(args.typ, args.inputs), **outputs}
        return f"{args.name}-id", offline_outputs(args.typ, args.inputs)

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if answers_offline(args.token) or self.fallback is None:
            return offline_answer(args.token, args.args, self.kubernetes_minor), []
        return self.fallback.call(args)
