"""How the program reaches a cluster's Kubernetes API: always the cluster the stack names.

Overrides first (`cluster.kubeconfig`, a secret config key holding a kubeconfig, or
`cluster.context`, a named context of your kubeconfig file); then the created cluster's own
endpoint; otherwise the named cluster is looked up through the cloud's data sources (endpoint
and CA; OKE's generated kubeconfig) and reached with the cloud's exec credential plugin. The
ambient current context is never used: `existing` stacks must name one of the overrides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.clouds import Cloud
from mig_inference.spec import ClusterSpec

from ..clouds.kubeconfig import eks_kubeconfig, gke_kubeconfig, oke_endpoint_type, oke_kubeconfig

Item = TypeVar("Item")


class LookupAnswerIncomplete(Exception):
    """A data source answered without a field the component reads (under mocks that do not
    answer the lookup, typically)."""

    def __init__(self, lookup: str, field: str) -> None:
        super().__init__(
            f"{lookup} answered without {field}, which is read to reach the cluster the stack "
            "joins; under Pulumi's mocks, answer this lookup (mig_inference.components.testing."
            "MigInferenceMocks answers every lookup MigInference makes)"
        )


def first_of(lookup: str, field: str) -> Callable[[Sequence[Item] | None], Item]:
    """The first item of a lookup's list field, or an error naming the lookup and the field."""

    def read(items: Sequence[Item] | None) -> Item:
        if not items:
            raise LookupAnswerIncomplete(lookup, field)
        return items[0]

    return read


def _present(lookup: str, field: str) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if value is None:
            raise LookupAnswerIncomplete(lookup, field)
        return value

    return read


def looked_up_kubeconfig(
    cloud: Cloud,
    cluster: ClusterSpec,
    ref: pulumi.Input[str],
    provider: pulumi.ProviderResource | None,
    project: pulumi.Input[str] | None = None,
) -> pulumi.Output[str]:
    """The kubeconfig of a cluster the stack joins (`ref`: its name, or OCID on OKE), from the
    cloud's data sources (GKE: in `project`, as given, else the stack's)."""
    invoke = pulumi.InvokeOutputOptions(provider=provider)
    # Each cloud's SDK is imported in its branch only (an extra of the package).
    if cloud is Cloud.GKE:
        import pulumi_gcp as gcp

        found = gcp.container.get_cluster_output(
            name=ref,
            location=cluster.get("location"),
            project=project if project is not None else cluster.get("project"),
            opts=invoke,
        )
        lookup = "gcp:container/getCluster"
        return gke_kubeconfig(
            found.name,
            found.endpoint.apply(_present(lookup, "endpoint")),
            found.master_auths.apply(first_of(lookup, "masterAuths")).apply(
                lambda auth: _present(lookup, "masterAuths[0].clusterCaCertificate")(
                    auth.cluster_ca_certificate
                )
            ),
        )
    if cloud is Cloud.EKS:
        import pulumi_aws as aws

        eks = aws.eks.get_cluster_output(name=ref, opts=invoke)
        lookup = "aws:eks/getCluster"
        return eks_kubeconfig(
            eks.name,
            eks.endpoint.apply(_present(lookup, "endpoint")),
            eks.certificate_authorities.apply(first_of(lookup, "certificateAuthorities")).apply(
                lambda ca: _present(lookup, "certificateAuthorities[0].data")(ca.data)
            ),
            cluster.get("region"),
        )
    if cloud is Cloud.OKE:
        import pulumi_oci as oci

        oke = oci.containerengine.get_cluster_output(cluster_id=ref, opts=invoke)
        # Target the public endpoint when the cluster has one, else its private endpoint.
        endpoint = oke.endpoints.apply(
            lambda found: oke_endpoint_type(bool(found and found[0].public_endpoint))
        )
        return oke_kubeconfig(ref, endpoint, invoke)
    raise ValueError(f"cloud {cloud.value} has no cluster to look up")


def kubernetes_provider(
    cloud: Cloud,
    cluster: ClusterSpec,
    ref: pulumi.Input[str],
    given_kubeconfig: pulumi.Output[str] | None,
    created_kubeconfig: pulumi.Output[str] | None,
    cloud_provider: pulumi.ProviderResource | None,
    name: str = "kubernetes",
    opts: pulumi.ResourceOptions | None = None,
    project: pulumi.Input[str] | None = None,
) -> k8s.Provider:
    """The provider every Kubernetes object of the stack is created with: through the
    kubeconfig the stack names (`cluster.kubeconfig`, a secret), its named context, or the
    cluster's own endpoint (created, or looked up)."""
    if given_kubeconfig is not None:
        return k8s.Provider(name, kubeconfig=given_kubeconfig, opts=opts)
    if cluster.get("context"):
        # Explicitly named: that context of the kubeconfig file (KUBECONFIG or ~/.kube/config).
        return k8s.Provider(name, context=cluster.get("context"), opts=opts)
    kubeconfig: pulumi.Output[str] = (
        created_kubeconfig
        if created_kubeconfig is not None
        else pulumi.Output.secret(
            looked_up_kubeconfig(cloud, cluster, ref, cloud_provider, project)
        )
    )
    return k8s.Provider(name, kubeconfig=kubeconfig, opts=opts)
