"""OKE's Cluster Autoscaler add-on, authenticated as a workload identity."""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_oci as oci

ENHANCED_CLUSTER = "ENHANCED_CLUSTER"
ADDONS_NEED_ENHANCED = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Tasks/contengconfiguringclusteraddons.htm"
)
AUTOSCALER_ADDON = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Tasks/"
    "contengusingclusterautoscaler_topic-Working_with_Cluster_Autoscaler_as_Cluster_Add-on.htm"
)
AUTOSCALER_NAMESPACE = "kube-system"
AUTOSCALER_ACCOUNT = "cluster-autoscaler"
"""The add-on's service account, which the workload-identity policy names (AUTOSCALER_ADDON)."""
WORKLOAD_PERMISSIONS = (
    "manage cluster-node-pools",
    "manage instance-family",
    "use subnets",
    "read virtual-network-family",
    "use vnics",
    "inspect compartments",
)
"""What the add-on's workload identity is allowed in the cluster's compartment, as Oracle lists
it for the add-on ("Using workload identity principals to enable the Cluster Autoscaler add-on
to access to node pools", AUTOSCALER_ADDON)."""


def enhanced_only(cluster_id: str, cluster_type: str, autoscaled: Sequence[str]) -> str:
    """The cluster's OCID when it is an enhanced cluster; otherwise the reason the add-on
    cannot be installed (Oracle: cluster add-ons, and workload identities, are available on
    enhanced clusters only)."""
    if cluster_type == ENHANCED_CLUSTER:
        return cluster_id
    raise pulumi.RunError(
        f"{', '.join(autoscaled)}: OKE's Cluster Autoscaler add-on needs an enhanced cluster, "
        f"and cluster {cluster_id} is {cluster_type or 'of an unknown type'} (add-ons are "
        f"available on enhanced clusters only: {ADDONS_NEED_ENHANCED}); upgrade the cluster to "
        "an enhanced cluster, or give these pools a fixed node count"
    )


def workload_statements(compartment_id: str, cluster_id: str) -> list[str]:
    """The policy statements that let only the add-on's service account, in this cluster,
    manage the compartment's node pools."""
    principal = (
        f"request.principal.type = 'workload', request.principal.namespace = "
        f"'{AUTOSCALER_NAMESPACE}', request.principal.service_account = '{AUTOSCALER_ACCOUNT}', "
        f"request.principal.cluster_id = '{cluster_id}'"
    )
    return [
        f"Allow any-user to {permission} in compartment id {compartment_id} where ALL "
        f"{{{principal}}}"
        for permission in WORKLOAD_PERMISSIONS
    ]


class AutoscaledPool(TypedDict):
    """An autoscaled OKE node pool and its bounds."""

    min: int
    """Fewest nodes."""
    max: int
    """Most nodes."""
    node_pool_id: pulumi.Input[str]
    """The node pool's OCID."""


class OkeClusterAutoscalerArgs(TypedDict):
    cluster_id: pulumi.Input[str]
    """The OKE cluster (an enhanced one: workload identities exist only there)."""
    compartment_id: pulumi.Input[str]
    """The compartment of the cluster and its node pools: the policy lives there and lets the
    add-on manage its node pools."""
    pools: list[AutoscaledPool]
    """Every autoscaled pool with its bounds."""
    freeform_tags: NotRequired[dict[str, str]]
    """OCI freeform tags on the policy."""
    defined_tags: NotRequired[dict[str, str]]
    """OCI defined tags (`<namespace>.<key>`) on the policy."""


class OkeClusterAutoscaler(pulumi.ComponentResource):
    """OKE's Cluster Autoscaler add-on, given the autoscaled pools and their bounds. It
    authenticates as its own workload identity (`authType: workload`), which an IAM policy in
    the cluster's compartment allows to manage node pools; no node (and no other pod) gets
    that permission, as it would through the instance principal."""

    policy_id: pulumi.Output[str]
    """The IAM policy that lets the add-on's workload identity manage the node pools."""

    def __init__(
        self, name: str, args: OkeClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:OkeClusterAutoscaler", name, None, opts)
        bounds = [
            # int(): numbers reach a component provider as floats.
            pulumi.Output.concat(
                str(int(pool["min"])), ":", str(int(pool["max"])), ":", pool["node_pool_id"]
            )
            for pool in args["pools"]
        ]
        nodes = pulumi.Output.all(*bounds).apply(",".join)
        statements = pulumi.Output.all(args["compartment_id"], args["cluster_id"]).apply(
            lambda known: workload_statements(str(known[0]), str(known[1]))
        )
        policy = oci.identity.Policy(
            f"{name}-workload",
            compartment_id=args["compartment_id"],
            description="mig-inference: OKE's Cluster Autoscaler add-on manages node pools",
            statements=statements,
            freeform_tags=args.get("freeform_tags") or None,
            defined_tags=args.get("defined_tags") or None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        oci.containerengine.Addon(
            name,
            addon_name="ClusterAutoscaler",
            cluster_id=args["cluster_id"],
            remove_addon_resources_on_delete=True,
            configurations=[
                oci.containerengine.AddonConfigurationArgs(key="nodes", value=nodes),
                oci.containerengine.AddonConfigurationArgs(key="authType", value="workload"),
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        self.policy_id = policy.id
        self.register_outputs({"policy_id": self.policy_id})
