"""OKE's Cluster Autoscaler add-on."""

from collections.abc import Sequence
from typing import TypedDict

import pulumi
import pulumi_oci as oci

ENHANCED_CLUSTER = "ENHANCED_CLUSTER"
ADDONS_NEED_ENHANCED = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Tasks/contengconfiguringclusteraddons.htm"
)


def enhanced_only(cluster_id: str, cluster_type: str, autoscaled: Sequence[str]) -> str:
    """The cluster's OCID when it is an enhanced cluster; otherwise the reason the add-on
    cannot be installed (Oracle: cluster add-ons are available on enhanced clusters only)."""
    if cluster_type == ENHANCED_CLUSTER:
        return cluster_id
    raise pulumi.RunError(
        f"{', '.join(autoscaled)}: OKE's Cluster Autoscaler add-on needs an enhanced cluster, "
        f"and cluster {cluster_id} is {cluster_type or 'of an unknown type'} (add-ons are "
        f"available on enhanced clusters only: {ADDONS_NEED_ENHANCED}); upgrade the cluster to "
        "an enhanced cluster, or give these pools a fixed node count"
    )


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
    """The OKE cluster."""
    pools: list[AutoscaledPool]
    """Every autoscaled pool with its bounds."""


class OkeClusterAutoscaler(pulumi.ComponentResource):
    """OKE's Cluster Autoscaler add-on, given the autoscaled pools and their bounds. It
    authenticates as the instance (OKE's default): the node pool's dynamic group needs a
    policy to manage the cluster's node pools (see README, "Autoscaling")."""

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
        oci.containerengine.Addon(
            name,
            addon_name="ClusterAutoscaler",
            cluster_id=args["cluster_id"],
            remove_addon_resources_on_delete=True,
            configurations=[oci.containerengine.AddonConfigurationArgs(key="nodes", value=nodes)],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
