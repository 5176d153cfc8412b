"""The AWS Load Balancer Controller on an EKS cluster the stack creates, for an external gateway:
Istio's gateway Service becomes an internet-facing Network Load Balancer (its annotations:
`kube.gateway.AWS_NLB_ANNOTATIONS`). The official chart, with AWS permissions through EKS Pod
Identity: an IAM role carrying the controller release's own policy, assumable by its service
account only."""

import json
from importlib.resources import files
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from mig_inference.versions import (
    AWS_LOAD_BALANCER_CONTROLLER_CHART,
    AWS_LOAD_BALANCER_CONTROLLER_REPO,
    AWS_LOAD_BALANCER_CONTROLLER_VERSION,
)

from .eks import pod_identity_trust

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
POLICY_FILE = "aws-load-balancer-controller-iam-policy.json"


def controller_policy() -> str:
    """The controller release's IAM policy (`docs/install/iam_policy.json@v3.5.0`), verbatim."""
    text = files("mig_inference").joinpath("data", POLICY_FILE).read_text(encoding="utf-8")
    return json.dumps(json.loads(text))


def controller_values(
    cluster_name: pulumi.Input[str], region: str, vpc_id: pulumi.Input[str]
) -> dict[str, object]:
    """Region and VPC given, so the controller need not ask the instance metadata service, which
    a pod reaches only where the node's hop limit is 2 or more (the controller's
    `docs/deploy/installation.md@v3.5.0`); two replicas under a budget of one unavailable.
    No Service mutator webhook: the chart's (`enableServiceMutatorWebhook`, on by default,
    failure policy `Fail`) refuses every Service created in the cluster until the controller's
    pods answer it (kubernetes-sigs/aws-load-balancer-controller#4140, open): here, the charts
    and Services the stack creates beside the controller on the cluster it creates;
    the gateway's Service hands itself to the controller by its annotations
    (`kube.gateway.AWS_NLB_ANNOTATIONS`, `aws-load-balancer-type: external`), not by the
    `loadBalancerClass` the webhook would set, and other LoadBalancer Services in the cluster
    stay with the cloud provider's controller."""
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "replicaCount": 2,
        "podDisruptionBudget": {"maxUnavailable": 1},
        "enableServiceMutatorWebhook": False,
    }


class AwsLoadBalancerControllerArgs(TypedDict):
    cluster_name: pulumi.Input[str]
    """The EKS cluster whose LoadBalancer Services it serves."""
    region: str
    """AWS region of the cluster."""
    vpc_id: pulumi.Input[str]
    """The cluster's VPC, where it creates load balancers and target groups."""
    tags: NotRequired[dict[str, str]]
    """Tags on its IAM role and Pod Identity association."""
    permissions_boundary: NotRequired[pulumi.Input[str] | None]
    """The permissions boundary of its IAM role."""


class AwsLoadBalancerController(pulumi.ComponentResource):
    """The AWS Load Balancer Controller's chart and its Pod Identity role."""

    role_arn: pulumi.Output[str]
    """ARN of the IAM role its service account assumes."""

    def __init__(
        self,
        name: str,
        args: AwsLoadBalancerControllerArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mig-inference:index:AwsLoadBalancerController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.get("tags") or None
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pod_identity_trust(),
            description="mig-inference AWS Load Balancer Controller",
            permissions_boundary=args.get("permissions_boundary"),
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-policy", role=role.name, policy=controller_policy(), opts=child
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-identity",
            cluster_name=args["cluster_name"],
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name=SERVICE_ACCOUNT,
                chart=AWS_LOAD_BALANCER_CONTROLLER_CHART,
                version=AWS_LOAD_BALANCER_CONTROLLER_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(
                    repo=AWS_LOAD_BALANCER_CONTROLLER_REPO
                ),
                namespace=NAMESPACE,
                values=controller_values(args["cluster_name"], args["region"], args["vpc_id"]),
            ),
            # The Kubernetes provider comes from this component's `providers`.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[association]),
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": self.role_arn})
