"""What a created cluster gives the rest of a team's program (endpoint, CA, identity, security
group, name), as pulumi-eks and the Terraform modules expose them: the `cluster` output of
`MigInference` and of the stack program, per cloud, under Pulumi's mocks."""

from __future__ import annotations

from pathlib import Path

from tests.components.test_right_cluster import _oke_config
from tests.mocked import render_config, stack_rendering
from tests.rollout.test_rollout import stack


def test_a_created_gke_cluster_gives_its_endpoint_ca_and_workload_identity_pool() -> None:
    cluster = stack_rendering("ephemeral-gke").outputs["cluster"]
    assert cluster == {
        "created": True,
        "name": "mig-ephemeral",
        "location": "us-central1",
        "endpoint": "203.0.113.10",
        "certificateAuthority": "Y2EtY2VydGlmaWNhdGU=",
        "workloadIdentityPool": "my-gcp-project.svc.id.goog",
    }


def test_a_created_eks_cluster_gives_its_oidc_issuer_and_security_group(tmp_path: Path) -> None:
    config = stack("eks")
    config["cluster"].update(
        create=True, vpcId="vpc-0123456789abcdef0", version="1.33", endpointPublicAccess=False
    )
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    cluster = rendering.outputs["cluster"]
    assert cluster["created"] is True and cluster["name"] == config["cluster"]["name"]
    assert cluster["oidcIssuer"] == "https://oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"
    assert cluster["clusterSecurityGroupId"] == "sg-0123456789abcdef0"
    assert cluster["endpoint"].startswith("https://") and cluster["certificateAuthority"]
    assert cluster["arn"].startswith("arn:aws:eks:")


def test_a_created_oke_cluster_gives_the_endpoint_its_kubeconfig_targets(tmp_path: Path) -> None:
    config = _oke_config(create=True, vcnId="ocid1.vcn.oc1..v", endpointSubnetId="ocid1.subnet.oc1..api",
                         podSubnetIds=["ocid1.subnet.oc1..pods"], kubernetesVersion="v1.34.2",
                         systemImageId="ocid1.image.oc1..sys")  # fmt: skip
    public = render_config(tmp_path, config).outputs["cluster"]
    assert public["endpoint"] == "203.0.113.40:6443" and public["kubernetesVersion"] == "v1.34.2"
    assert public["id"] and public["created"] is True
    config["cluster"]["endpointPublicAccess"] = False
    assert render_config(tmp_path, config).outputs["cluster"]["endpoint"] == "10.0.0.4:6443"


def test_a_joined_cluster_gives_its_name_only() -> None:
    assert stack_rendering("gke-h100").outputs["cluster"] == {
        "created": False,
        "name": "inference-1",
    }
