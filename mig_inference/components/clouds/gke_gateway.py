"""What a GKE cluster must have for the stack's inference gateway, looked up at preview: its
Gateway API turned on and a version that installs the InferencePool CRD (a joined cluster), and
the region's proxy-only subnet of the stack's range on the cluster's VPC (joined or created)."""

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_gcp as gcp

from mig_inference.plan import StackPlan
from mig_inference.plan.gateway import (
    joined_gke_problem,
    proxy_subnet_filter,
    proxy_subnet_problem,
)
from mig_inference.plan.pools.zones import gke_region


def _subnetworks(
    plan: StackPlan, project: pulumi.Input[str] | None, opts: pulumi.InvokeOutputOptions
) -> pulumi.Output[Any]:
    gateway = plan.gateway
    assert gateway is not None and gateway.spec.proxy_subnet is not None
    return gcp.compute.get_subnetworks_output(
        filter=proxy_subnet_filter(str(gateway.spec.proxy_subnet)),
        region=gke_region(plan.spec.cluster.get("location")),
        project=project,
        opts=opts,
    ).subnetworks


def _judged(ref: str, problems: Sequence[str | None]) -> str:
    found = [problem for problem in problems if problem]
    if found:
        raise pulumi.RunError("; ".join(found))
    return ref


def joined_gateway_checked(
    ref: pulumi.Input[str],
    plan: StackPlan,
    found: Any,
    project: pulumi.Input[str] | None,
    opts: pulumi.InvokeOutputOptions,
) -> pulumi.Output[str]:
    """A joined GKE cluster's reference, once `gcp.container.get_cluster` showed the Gateway API
    on and a version new enough, and the proxy-only subnet was found on its network."""
    gateway = plan.gateway
    assert gateway is not None
    cidr = str(gateway.spec.proxy_subnet)
    region = str(gke_region(plan.spec.cluster.get("location")))

    def judge(known: list[Any]) -> str:
        name, version, configs, network, subnets = known
        channel = None
        for config in configs or ():
            channel = config.get("channel") if isinstance(config, dict) else config.channel
        return _judged(
            str(name),
            [
                joined_gke_problem(str(name), version, channel),
                proxy_subnet_problem(cidr, region, network, subnets or ()),
            ],
        )

    return pulumi.Output.all(
        ref, found.master_version, found.gateway_api_configs, found.network,
        _subnetworks(plan, project, opts),
    ).apply(judge)  # fmt: skip


def created_gateway_checked(
    ref: pulumi.Input[str],
    plan: StackPlan,
    network: pulumi.Input[str],
    project: pulumi.Input[str] | None,
    opts: pulumi.InvokeOutputOptions,
) -> pulumi.Output[str]:
    """A created GKE cluster's name, once the proxy-only subnet was found on the VPC the stack
    puts it in (its Gateway API and version are the stack's own)."""
    gateway = plan.gateway
    assert gateway is not None
    cidr = str(gateway.spec.proxy_subnet)
    region = str(gke_region(plan.spec.cluster.get("location")))
    # Judged apart from the cluster's name, which a preview does not know yet: the network and
    # the lookup are known, so the refusal comes at preview.
    checked = pulumi.Output.all(network, _subnetworks(plan, project, opts)).apply(
        lambda known: _judged("", [proxy_subnet_problem(cidr, region, known[0], known[1] or ())])
    )
    return pulumi.Output.all(ref, checked).apply(lambda known: str(known[0]))
