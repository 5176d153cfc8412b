"""The Kubernetes Cluster Autoscaler on EKS: its official chart, with AWS permissions through
EKS Pod Identity."""

import json
import re
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from mig_inference.versions import (
    CLUSTER_AUTOSCALER_CHART,
    CLUSTER_AUTOSCALER_REPO,
    CLUSTER_AUTOSCALER_VERSION,
)

from .eks import pod_identity_trust

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "cluster-autoscaler"
READ_ACTIONS = [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
    "eks:DescribeNodegroup",
]
"""The autoscaler's AWS README, "Full Cluster Autoscaler Features Policy"."""
SCALE_ACTIONS = [
    "autoscaling:SetDesiredCapacity",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
]


def autoscaler_policy(cluster_name: str) -> str:
    """Read what it must; resize only the Auto Scaling groups of this cluster (EKS tags its
    managed node groups' groups `k8s.io/cluster-autoscaler/<cluster>: owned`)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": READ_ACTIONS, "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": SCALE_ACTIONS,
                    "Resource": "*",
                    "Condition": {
                        "StringEquals": {
                            f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"
                        }
                    },
                },
            ],
        }
    )


def autoscaler_image_tag(kubernetes_version: str) -> str:
    """The Cluster Autoscaler release of the cluster's minor version: its README asks for the
    version "meant for" the control plane, and since Kubernetes 1.12 CA's minor matches
    Kubernetes' exactly (kubernetes/autoscaler `cluster-autoscaler/README.md`, "Releases");
    `v1.N.0` is the first release of each minor (a later patch is not known offline)."""
    found = re.fullmatch(r"v?1\.(\d+)(\.\d+)?(-.*)?", kubernetes_version.strip())
    if found is None:
        raise pulumi.RunError(
            f"mig-inference:cluster.version: {kubernetes_version!r} is not a Kubernetes version "
            "(1.N): the Cluster Autoscaler's image follows it"
        )
    return f"v1.{int(found.group(1))}.0"


def autoscaler_values(
    cluster_name: pulumi.Input[str], region: str, kubernetes_version: pulumi.Input[str]
) -> dict[str, object]:
    return {
        "image": {"tag": pulumi.Output.from_input(kubernetes_version).apply(autoscaler_image_tag)},
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        # GPU pools of one layout are alike: keep their sizes even; grow the one that wastes least.
        "extraArgs": {"balance-similar-node-groups": True, "expander": "least-waste"},
    }


class EksClusterAutoscalerArgs(TypedDict):
    cluster_name: pulumi.Input[str]
    """The EKS cluster whose managed node groups it grows and shrinks."""
    region: str
    """AWS region of the cluster."""
    kubernetes_version: pulumi.Input[str]
    """The cluster's Kubernetes version (1.N): the autoscaler's image is the release of that
    minor."""
    install_pod_identity_agent: NotRequired[bool]
    """Install EKS's Pod Identity agent add-on (false; a cluster this project creates installs
    it itself)."""
    tags: NotRequired[dict[str, str]]
    """Tags on its IAM role, add-on and Pod Identity association."""
    permissions_boundary: NotRequired[pulumi.Input[str] | None]
    """The permissions boundary of its IAM role."""


class EksClusterAutoscaler(pulumi.ComponentResource):
    """The Cluster Autoscaler chart with node-group auto-discovery, and its AWS permissions
    through EKS Pod Identity (an IAM role only its service account can assume)."""

    role_arn: pulumi.Output[str]
    """ARN of the IAM role its service account assumes."""

    def __init__(
        self,
        name: str,
        args: EksClusterAutoscalerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mig-inference:index:EksClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.get("tags") or None
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pod_identity_trust(),
            description="mig-inference cluster autoscaler",
            permissions_boundary=args.get("permissions_boundary"),
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=role.name,
            policy=pulumi.Output.from_input(args["cluster_name"]).apply(autoscaler_policy),
            opts=child,
        )
        depends: list[pulumi.Resource] = [policy]
        if args.get("install_pod_identity_agent", False):
            depends.append(
                aws.eks.Addon(
                    f"{name}-pod-identity-agent",
                    cluster_name=args["cluster_name"],
                    addon_name="eks-pod-identity-agent",
                    tags=tags,
                    opts=child,
                )
            )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-identity",
            cluster_name=args["cluster_name"],
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="cluster-autoscaler",
                chart=CLUSTER_AUTOSCALER_CHART,
                version=CLUSTER_AUTOSCALER_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CLUSTER_AUTOSCALER_REPO),
                namespace=NAMESPACE,
                values=autoscaler_values(
                    args["cluster_name"], args["region"], args["kubernetes_version"]
                ),
            ),
            # The Kubernetes provider comes from this component's `providers`.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
