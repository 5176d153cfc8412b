"""Which input changes make a provider replace a resource instead of updating it, and which
resources a provider replaces delete-before-replace when the program does not say.

Sources (read at the versions the project pins, or the newest available; see DESIGN.md "Facts"):
- Terraform Google provider `resource_container_node_pool.go` / `node_config.go` and
  `resource_container_cluster.go` (`datapath_provider`) (ForceNew), as bridged by pulumi-gcp;
  Terraform AWS provider `eks_node_group.go`; Terraform OCI provider
  `containerengine_node_pool_resource.go`; pulumi-kubernetes `provider/pkg/provider/diff.go`
  (`forceNewProperties`).
- pulumi-terraform-bridge `pkg/tfbridge/schema.go` `nameRequiresDeleteBeforeReplace`: a bridged
  resource whose auto-named field (`name`, EKS `nodeGroupName`) the program sets is replaced
  delete-before-replace, unless the program's `deleteBeforeReplace` option says otherwise.
- pulumi-kubernetes `provider.go`: an object whose `metadata.name` the program sets is replaced
  delete-before-replace when the new object keeps that name and namespace.
- Set-typed inputs (`schema.TypeSet`, whose order the bridged provider ignores): Terraform AWS
  provider `internal/service/eks/node_group.go` (`subnet_ids`, `taint`,
  `remote_access.source_security_group_ids`), Terraform Google provider
  `resource_container_node_pool.go` / `node_config.go` (`node_locations`, `oauth_scopes`),
  Terraform OCI provider `containerengine_node_pool_resource.go` (`subnet_ids`,
  `node_config_details.placement_configs`, `node_config_details.nsg_ids`).
"""

from __future__ import annotations

FORCE_NEW: dict[str, tuple[str, ...]] = {
    "gcp:container/nodePool:NodePool": (
        "name", "cluster", "location", "project", "initialNodeCount", "maxPodsPerNode",
        "queuedProvisioning", "placementPolicy", "networkConfig.podRange",
        "networkConfig.createPodRange", "nodeConfig.guestAccelerators", "nodeConfig.spot",
        "nodeConfig.preemptible", "nodeConfig.reservationAffinity", "nodeConfig.serviceAccount",
        "nodeConfig.oauthScopes", "nodeConfig.shieldedInstanceConfig", "nodeConfig.metadata",
        "nodeConfig.localSsdCount", "nodeConfig.minCpuPlatform", "nodeConfig.flexStart",
    ),
    "gcp:container/cluster:Cluster": (
        "name", "location", "project", "privateClusterConfig.masterIpv4CidrBlock",
        "datapathProvider",
    ),
    "aws:eks/nodeGroup:NodeGroup": (
        "nodeGroupName", "clusterName", "subnetIds", "instanceTypes", "amiType", "capacityType",
        "diskSize", "nodeRoleArn", "remoteAccess", "launchTemplate.id", "launchTemplate.name",
    ),
    "aws:eks/cluster:Cluster": ("name",),
    "oci:ContainerEngine/nodePool:NodePool": (
        "clusterId", "compartmentId", "nodeImageId", "nodeImageName",
        "nodeConfigDetails.nodePoolPodNetworkOptionDetails.cniType",
    ),
    "kubernetes:apps/v1:Deployment": ("spec.selector",),
    "kubernetes:apps/v1:DaemonSet": ("spec.selector",),
    "kubernetes:batch/v1:Job": (
        "spec.template", "spec.selector", "spec.completions", "spec.parallelism",
    ),
    "kubernetes:core/v1:Service": ("spec.clusterIP",),
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
}  # fmt: skip
"""Input paths whose change replaces the resource (beyond `replaceOnChanges`)."""

SET_TYPED: dict[str, tuple[str, ...]] = {
    "aws:eks/nodeGroup:NodeGroup": ("subnetIds", "taints", "remoteAccess.sourceSecurityGroupIds"),
    "gcp:container/nodePool:NodePool": ("nodeLocations", "nodeConfig.oauthScopes"),
    "oci:ContainerEngine/nodePool:NodePool": (
        "subnetIds", "nodeConfigDetails.placementConfigs", "nodeConfigDetails.nsgIds",
    ),
}  # fmt: skip
"""Input paths the provider holds as sets: a new order of the same items is no change."""

SERVER_IMMUTABLE: dict[str, tuple[str, ...]] = {
    "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate": ("spec",),
}
"""Kubernetes fields the API server refuses to update (kubernetes/kubernetes
`pkg/apis/resource/validation/validation.go` `ValidateResourceClaimTemplateUpdate`:
`ValidateImmutableField(template.Spec, ...)`) that pulumi-kubernetes' `forceNew` table does not
list: it plans an update, whose preview (a server-side dry run) fails."""

KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")
"""Every Kubernetes object is another object under another name or namespace."""

AUTO_NAMED: dict[str, str] = {
    "gcp": "name",
    "oci": "name",
}
"""The auto-named input of every resource of a bridged package (`SetAutonaming`)."""
AUTO_NAMED_BY_TYPE: dict[str, str] = {
    "aws:eks/nodeGroup:NodeGroup": "nodeGroupName",
    "aws:iam/role:Role": "name",
    "aws:ec2/launchTemplate:LaunchTemplate": "name",
    "aws:eks/cluster:Cluster": "name",
}
"""pulumi-aws names its auto-named fields resource by resource."""


def force_new_paths(type_token: str) -> tuple[str, ...]:
    paths = FORCE_NEW.get(type_token, ())
    if type_token.startswith("kubernetes:") and not type_token.startswith("kubernetes:helm.sh/"):
        paths = (*KUBERNETES_IDENTITY, *paths)
    return paths


def provider_deletes_first(type_token: str, old: dict[str, object], new: dict[str, object]) -> bool:
    """Whether the provider replaces this resource delete-before-replace (the program's option
    not set)."""
    package = type_token.split(":", 1)[0]
    field = AUTO_NAMED_BY_TYPE.get(type_token) or AUTO_NAMED.get(package)
    if field is not None:
        return new.get(field) is not None
    if package == "kubernetes" and not type_token.startswith("kubernetes:helm.sh/"):
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        assert isinstance(old_meta, dict) and isinstance(new_meta, dict)
        return (
            new_meta.get("name") is not None
            and old_meta.get("name") == new_meta.get("name")
            and old_meta.get("namespace") == new_meta.get("namespace")
        )
    return False
