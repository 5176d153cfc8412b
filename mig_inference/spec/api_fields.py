"""Which format each string field the program sends to a cloud API must have, and why the rest
need none: a registry from (resource type, field path) to a rule of mig_inference.spec.formats.

A field path joins the field names with `.`; `[]` stands for any item of a list, `<key>` for
any key of a map the stack (or the project) fills and `<value>` for its values. Kubernetes
objects are held to the rules of their `metadata` (wherever it is nested: a pod template's
too), by kind. tests/spec/test_api_fields.py renders the program and fails on a field that has
neither a rule here nor a reason in WITHOUT_RULE, and on a rendered value its rule refuses.
"""

from __future__ import annotations

from mig_inference.spec import formats
from mig_inference.spec.formats import Format

_NODE_LABELS = {"<key>": formats.LABEL_KEY, "<value>": formats.LABEL_VALUE}
_TAINTS = {"[].key": formats.TAINT_KEY, "[].value": formats.TAINT_VALUE}
_AWS_TAGS = {"<key>": formats.AWS_TAG_KEY, "<value>": formats.AWS_TAG_VALUE}
_OCI_TAGS = {"freeformTags.<key>": formats.OCI_FREEFORM_TAG_KEY,
             "freeformTags.<value>": formats.OCI_TAG_VALUE,
             "definedTags.<key>": formats.OCI_DEFINED_TAG_KEY,
             "definedTags.<value>": formats.OCI_TAG_VALUE}  # fmt: skip
_GCP_LABELS = {"<key>": formats.GCP_LABEL_KEY, "<value>": formats.GCP_LABEL_VALUE}


def _under(prefix: str, rules: dict[str, Format]) -> dict[str, Format]:
    return {f"{prefix}{'' if path.startswith('[') else '.'}{path}": rule
            for path, rule in rules.items()}  # fmt: skip


EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
OKE_NODE_POOL = "oci:ContainerEngine/nodePool:NodePool"

FIELD_RULES: dict[str, dict[str, Format]] = {
    "aws:autoscaling/tag:Tag": {
        "tag.key": formats.AUTOSCALING_TAG_KEY,
        "tag.value": formats.AUTOSCALING_TAG_VALUE,
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "description": formats.EC2_LAUNCH_TEMPLATE_DESCRIPTION,
        "instanceType": formats.EC2_INSTANCE,
        "userData": formats.EC2_USER_DATA_BASE64,
        **_under("tags", _AWS_TAGS),
        **_under("tagSpecifications[].tags", _AWS_TAGS),
    },
    EKS_NODE_GROUP: {
        "clusterName": formats.EKS_CLUSTER_NAME,
        "nodeGroupName": formats.EKS_NODE_GROUP_NAME,
        "instanceTypes[]": formats.EC2_INSTANCE,
        "nodeRoleArn": formats.IAM_ROLE_ARN,
        "subnetIds[]": formats.AWS_SUBNET,
        "labels.<key>": Format(
            "an EKS node group label key (1-63 characters)",
            formats.LABEL_KEY.pattern,
            formats.EKS_NODE_LABEL_KEY_MAX,
            "example.com/team",
        ),
        "labels.<value>": formats.EKS_NODE_LABEL_VALUE,
        "taints[].key": Format(
            "an EKS taint key (1-63 characters)",
            formats.TAINT_KEY.pattern,
            formats.EKS_TAINT_KEY_MAX,
            "nvidia.com/gpu",
        ),
        "taints[].value": formats.TAINT_VALUE,
        **_under("tags", _AWS_TAGS),
    },
    "aws:eks/cluster:Cluster": {
        "name": formats.EKS_CLUSTER_NAME,
        "version": formats.EKS_VERSION,
        "vpcConfig.subnetIds[]": formats.AWS_SUBNET,
        "vpcConfig.publicAccessCidrs[]": formats.IPV4_CIDR,
        **_under("tags", _AWS_TAGS),
    },
    "aws:eks/addon:Addon": {
        "clusterName": formats.EKS_CLUSTER_NAME,
        "podIdentityAssociations[].serviceAccount": formats.OBJECT_NAME,
        **_under("tags", _AWS_TAGS),
    },
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": {
        "clusterName": formats.EKS_CLUSTER_NAME,
        "namespace": formats.DNS_LABEL,
        "serviceAccount": formats.OBJECT_NAME,
        **_under("tags", _AWS_TAGS),
    },
    "aws:iam/role:Role": {
        "description": formats.IAM_DESCRIPTION,
        "permissionsBoundary": formats.IAM_POLICY_ARN,
        **_under("tags", _AWS_TAGS),
    },
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": {"policyArn": formats.IAM_POLICY_ARN},
    "gcp:container/cluster:Cluster": {
        "name": formats.GKE_CLUSTER,
        "location": formats.GCP_LOCATION,
        "network": formats.GCP_RESOURCE,
        "subnetwork": formats.GCP_RESOURCE,
        "privateClusterConfig.masterIpv4CidrBlock": formats.IPV4_CIDR,
        "masterAuthorizedNetworksConfig.cidrBlocks[].cidrBlock": formats.IPV4_CIDR,
        "releaseChannel.channel": formats.GKE_RELEASE_CHANNEL,
        "minMasterVersion": formats.GKE_MINOR_VERSION,
        **_under("resourceLabels", _GCP_LABELS),
    },
    GKE_NODE_POOL: {
        "name": formats.GKE_NODE_POOL_NAME,
        "cluster": formats.GKE_CLUSTER,
        "location": formats.GCP_LOCATION,
        "nodeLocations[]": formats.GCP_ZONE,
        "nodeConfig.machineType": formats.GKE_MACHINE,
        "nodeConfig.serviceAccount": formats.GCP_NODE_SERVICE_ACCOUNT,
        "nodeConfig.diskType": Format(
            "a GKE boot disk type", "|".join(formats.GKE_BOOT_DISK_TYPES), 24, "pd-balanced"
        ),
        "nodeConfig.guestAccelerators[].gpuPartitionSize": formats.MIG_PROFILE,
        "nodeConfig.reservationAffinity.values[]": formats.GCP_RESERVATION,
        **_under("nodeConfig.labels", _NODE_LABELS),
        **_under("nodeConfig.taints", _TAINTS),
        **_under("nodeConfig.resourceLabels", _GCP_LABELS),
    },
    "gcp:compute/router:Router": {"network": formats.GCP_RESOURCE, "region": formats.GCP_REGION},
    "gcp:compute/routerNat:RouterNat": {"region": formats.GCP_REGION},
    "gcp:projects/iAMMember:IAMMember": {"project": formats.GCP_PROJECT},
    "gcp:projects/service:Service": {"project": formats.GCP_PROJECT},
    "gcp:serviceaccount/account:Account": {
        "accountId": formats.GCP_SERVICE_ACCOUNT_ID,
        "project": formats.GCP_PROJECT,
    },
    "gcp:storage/bucket:Bucket": {
        "name": formats.GCS_BUCKET,
        "location": formats.GCS_LOCATION,
        "project": formats.GCP_PROJECT,
        **_under("labels", _GCP_LABELS),
    },
    "gcp:storage/bucketIAMMember:BucketIAMMember": {"bucket": formats.GCS_BUCKET},
    "oci:ContainerEngine/cluster:Cluster": {
        "name": formats.OCI_DISPLAY_NAME,
        "compartmentId": formats.ocid("compartment"),
        "vcnId": formats.ocid("vcn"),
        "endpointConfig.subnetId": formats.ocid("subnet"),
        "kubernetesVersion": formats.OKE_VERSION,
        **_OCI_TAGS,
    },
    OKE_NODE_POOL: {
        "name": formats.OCI_DISPLAY_NAME,
        "compartmentId": formats.ocid("compartment"),
        "kubernetesVersion": formats.OKE_VERSION,
        "nodeShape": formats.OKE_SHAPE,
        "nodeSourceDetails.imageId": formats.ocid("image"),
        "nodeConfigDetails.placementConfigs[].availabilityDomain": formats.AVAILABILITY_DOMAIN,
        "nodeConfigDetails.placementConfigs[].subnetId": formats.ocid("subnet"),
        "nodeConfigDetails.nodePoolPodNetworkOptionDetails.podSubnetIds[]": formats.ocid("subnet"),
        "nodeMetadata.user_data": formats.OCI_USER_DATA_BASE64,
        "initialNodeLabels[].key": formats.LABEL_KEY,
        "initialNodeLabels[].value": formats.LABEL_VALUE,
        **_OCI_TAGS,
        **_under("nodeConfigDetails", _OCI_TAGS),
    },
    "oci:Identity/policy:Policy": {"compartmentId": formats.ocid("compartment"), **_OCI_TAGS},
    "oci:ContainerEngine/addon:Addon": {},
}
"""The rule of each string field of each cloud resource type the program creates."""

_LITERAL = "a constant of the program, one of the values the provider documents for the field"
_CLOUD_ID = "an ID or ARN the cloud returns for a resource the program created"
_DOCUMENT = "a JSON policy document the program writes (its strings are constants and ARNs)"
_FIXED = "text of the program's own, with a name already held to its format"

WITHOUT_RULE: dict[str, dict[str, str]] = {
    "aws:autoscaling/tag:Tag": {"autoscalingGroupName": _CLOUD_ID},
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "blockDeviceMappings[].deviceName": _LITERAL,
        "blockDeviceMappings[].ebs.deleteOnTermination": _LITERAL,
        "blockDeviceMappings[].ebs.encrypted": _LITERAL,
        "blockDeviceMappings[].ebs.volumeType": _LITERAL,
        "metadataOptions.httpEndpoint": _LITERAL,
        "metadataOptions.httpTokens": _LITERAL,
        "tagSpecifications[].resourceType": _LITERAL,
        "instanceMarketOptions.marketType": _LITERAL,
        "capacityReservationSpecification.capacityReservationTarget.capacityReservationId": (
            "the pool's reservation, held to AWS_CAPACITY_RESERVATION at its key"
        ),
    },
    EKS_NODE_GROUP: {
        "amiType": _LITERAL,
        "capacityType": _LITERAL,
        "taints[].effect": _LITERAL,
        "launchTemplate.id": _CLOUD_ID,
        "launchTemplate.version": _CLOUD_ID,
    },
    "aws:eks/cluster:Cluster": {
        "accessConfig.authenticationMode": _LITERAL,
        "roleArn": _CLOUD_ID,
    },
    "aws:eks/addon:Addon": {
        "addonName": _LITERAL,
        "configurationValues": "JSON the program writes from constants",
        "resolveConflictsOnCreate": _LITERAL,
        "resolveConflictsOnUpdate": _LITERAL,
        "podIdentityAssociations[].roleArn": _CLOUD_ID,
    },
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": {"roleArn": _CLOUD_ID},
    "aws:iam/role:Role": {"assumeRolePolicy": _DOCUMENT},
    "aws:iam/rolePolicy:RolePolicy": {"policy": _DOCUMENT},
    "gcp:container/cluster:Cluster": {
        "datapathProvider": _LITERAL,
        "gatewayApiConfig.channel": _LITERAL,
        "networkingMode": _LITERAL,
        "masterAuthorizedNetworksConfig.cidrBlocks[].displayName": _FIXED,
        "workloadIdentityConfig.workloadPool": "<project>.svc.id.goog, the project held to "
        "GCP_PROJECT at cluster.project",
    },
    GKE_NODE_POOL: {
        "autoscaling.locationPolicy": _LITERAL,
        "nodeConfig.imageType": _LITERAL,
        "nodeConfig.oauthScopes[]": _LITERAL,
        "nodeConfig.guestAccelerators[].type": "the accelerator of the GPU catalog's machine",
        "nodeConfig.guestAccelerators[].gpuDriverInstallationConfig.gpuDriverVersion": _LITERAL,
        "nodeConfig.guestAccelerators[].gpuSharingConfig.gpuSharingStrategy": _LITERAL,
        "nodeConfig.reservationAffinity.consumeReservationType": _LITERAL,
        "nodeConfig.reservationAffinity.key": _LITERAL,
        "nodeConfig.taints[].effect": _LITERAL,
        "nodeConfig.workloadMetadataConfig.mode": _LITERAL,
    },
    "gcp:compute/routerNat:RouterNat": {
        "natIpAllocateOption": _LITERAL,
        "sourceSubnetworkIpRangesToNat": _LITERAL,
        "subnetworks[].name": _CLOUD_ID,
        "subnetworks[].sourceIpRangesToNats[]": _LITERAL,
    },
    "gcp:serviceaccount/account:Account": {"displayName": _FIXED},
    "gcp:projects/service:Service": {"service": _LITERAL},
    "gcp:projects/iAMMember:IAMMember": {
        "member": "serviceAccount:<email> of the account the program created",
        "role": _LITERAL,
    },
    "gcp:storage/bucket:Bucket": {"publicAccessPrevention": _LITERAL},
    "gcp:storage/bucketIAMMember:BucketIAMMember": {
        "member": "a Workload Identity principal built from the project number the cloud "
        "returns and names held to their formats",
        "role": _LITERAL,
    },
    "oci:ContainerEngine/cluster:Cluster": {
        "clusterPodNetworkOptions[].cniType": _LITERAL,
        "type": _LITERAL,
    },
    OKE_NODE_POOL: {
        "clusterId": "cluster.clusterId (held to its OCID format) or the created cluster's ID",
        "nodeConfigDetails.nodePoolPodNetworkOptionDetails.cniType": _LITERAL,
        "nodeEvictionNodePoolSettings.evictionGraceDuration": _LITERAL,
        "nodeSourceDetails.bootVolumeSizeInGbs": "a number the spec bounds (DISK_GB), as text",
        "nodeSourceDetails.sourceType": _LITERAL,
        "nodeConfigDetails.placementConfigs[].preemptibleNodeConfig.preemptionAction.type": (
            _LITERAL
        ),
    },
    "oci:Identity/policy:Policy": {
        "description": _FIXED,
        "statements[]": "policy statements the program writes from constants and OCIDs",
    },
    "oci:ContainerEngine/addon:Addon": {
        "addonName": _LITERAL,
        "clusterId": _CLOUD_ID,
        "configurations[].key": _LITERAL,
        "configurations[].value": "the autoscaler's settings, from node pool IDs the cloud "
        "returns and bounded node counts",
    },
}
"""Fields that need no rule of their own, each with the reason."""

KUBERNETES_METADATA: dict[str, Format] = {
    "namespace": formats.DNS_LABEL,
    "labels.<key>": formats.LABEL_KEY,
    "labels.<value>": formats.LABEL_VALUE,
    "annotations.<key>": formats.LABEL_KEY,
}
"""The rules of a Kubernetes object's metadata besides its name (annotation values are free
text, bounded together: ANNOTATIONS_TOTAL_BYTES)."""
KUBERNETES_NAMES: dict[str, Format] = {
    "Namespace": formats.DNS_LABEL,
    "Service": formats.SERVICE_NAME,
    "Role": formats.RBAC_NAME,
    "ClusterRole": formats.RBAC_NAME,
    "RoleBinding": formats.RBAC_NAME,
    "ClusterRoleBinding": formats.RBAC_NAME,
}
"""Kinds whose names are not DNS-1123 subdomains (OBJECT_NAME, every other kind's)."""
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_RELEASE_FIELDS = {"name": formats.HELM_RELEASE_NAME, "namespace": formats.DNS_LABEL}


def kubernetes_name(kind: str) -> Format:
    """The format of a Kubernetes object's name, by kind."""
    return KUBERNETES_NAMES.get(kind, formats.OBJECT_NAME)
