"""Cloud rules the spec enforces, each with its source beside its bound in spec/formats.py:
bucket names, tag prefixes in any case, IAM names and partitions, EKS public access blocks,
GKE authorized networks, and gcs-fuse's need of Workload Identity."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from mig_inference.spec import formats
from tests.spec.test_api_formats import EKS, changed, run_plan

CREATED_EKS = changed("cluster", {**EKS["cluster"], "create": True, "vpcId": "vpc-0a1b2c3d",
                                  "version": "1.33", "publicAccessCidrs": ["198.51.100.0/24"]})  # fmt: skip
GKE: dict[str, Any] = {
    "cloud": "gke",
    "cluster": {"name": "c", "project": "my-gcp-project", "location": "us-central1-a"},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1,
               "mig": "all-3g.40gb", "maxPods": 64}],
    "services": [{"name": "chat", "model": "m/m", "memoryGiB": 8, "replicas": 2}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "s3", "gcs"),
    [
        ("my-models", True, True),
        ("192.168.5.4", False, False),
        ("xn--models", False, True),
        ("sthree-models", False, True),
        ("amzn-s3-demo-models", False, True),
        ("models-s3alias", False, True),
        ("models--ol-s3", False, True),
        ("models.mrap", False, True),
        ("models--x-s3", False, True),
        ("models--table-s3", False, True),
        ("goog-models", True, False),
        ("my-google-models", True, False),
        ("my-g00gle-models", True, False),
        ("models..x", False, False),
    ],
)
def test_bucket_names(name: str, s3: bool, gcs: bool) -> None:
    assert (formats.S3_BUCKET.problem(name) is None) is s3
    assert (formats.GCS_BUCKET.problem(name) is None) is gcs


@pytest.mark.parametrize("text", ["aws:team", "AWS:team", "Aws:team", "aWs:x"])
def test_the_aws_prefix_in_any_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    code, errors = run_plan(tmp_path, capsys, {**EKS, "tags": {text: "v", "team": text}})
    assert code == 1
    assert {f"mig-inference:tags.{text}", "mig-inference:tags.team"} <= set(errors), errors


@pytest.mark.parametrize(
    ("arn", "accepted"),
    [
        ("arn:aws:iam::123456789012:role/gpu-nodes", True),
        ("arn:aws:iam::123456789012:role/team/gpu/" + "r" * 64, True),
        ("arn:aws:iam::123456789012:role/" + "r" * 65, False),
        ("arn:aws:iam::123456789012:role/gpü-nodes", False),
        ("arn:aws-cn:iam::123456789012:role/gpu-nodes", False),  # a China ARN in us-east-1
        ("arn:awsx:iam::123456789012:role/gpu-nodes", False),
    ],
)
def test_iam_role_arns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arn: str, accepted: bool
) -> None:
    values = changed("cluster.nodeRoleArn", arn)
    code, errors = run_plan(tmp_path, capsys, values)
    assert (code == 0) is accepted, errors
    if not accepted:
        assert list(errors) == ["mig-inference:cluster.nodeRoleArn"], errors


def test_an_arn_of_the_regions_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = changed("cluster.region", "cn-north-1")
    values = changed("cluster.nodeRoleArn", "arn:aws-cn:iam::123456789012:role/gpu", values)
    assert run_plan(tmp_path, capsys, values)[0] == 0
    values = changed("cluster.nodeRoleArn", "arn:aws:iam::123456789012:role/gpu", values)
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and "region cn-north-1 is in aws-cn" in errors[
        "mig-inference:cluster.nodeRoleArn"]  # fmt: skip


def test_eks_public_access_blocks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    many = [f"198.51.{i}.0/24" for i in range(formats.EKS_PUBLIC_ACCESS_CIDRS_MAX + 1)]
    code, errors = run_plan(tmp_path, capsys, changed("cluster.publicAccessCidrs", many,
                                                      CREATED_EKS))  # fmt: skip
    assert code == 1 and list(errors) == ["mig-inference:cluster.publicAccessCidrs"], errors
    blocks = ["0.0.0.0/0", "10.1.0.0/16", "203.0.113.5/32", "192.168.0.0/24"]
    code, errors = run_plan(tmp_path, capsys, changed("cluster.publicAccessCidrs", blocks,
                                                      CREATED_EKS))  # fmt: skip
    assert code == 1
    assert set(errors) == {"mig-inference:cluster.publicAccessCidrs[1]",
                           "mig-inference:cluster.publicAccessCidrs[3]"}, errors  # fmt: skip


def test_gke_authorized_networks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    created = copy.deepcopy(GKE)
    created["cluster"].update(create=True, location="us-central1-a", network="vpc",
                              subnetwork="sub")  # fmt: skip
    most = formats.GKE_AUTHORIZED_NETWORKS_MAX
    created["cluster"]["authorizedNetworks"] = [f"10.{i}.0.0/16" for i in range(most)]
    assert run_plan(tmp_path, capsys, created)[0] == 0
    created["cluster"]["authorizedNetworks"].append("10.200.0.0/16")
    code, errors = run_plan(tmp_path, capsys, created)
    assert code == 1 and list(errors) == ["mig-inference:cluster.authorizedNetworks"], errors


def test_gcs_fuse_needs_workload_identity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = {**GKE, "modelCache": {"storage": "gcs-fuse", "bucket": "my-models"}}
    assert run_plan(tmp_path, capsys, values)[0] == 0
    values["cluster"] = {**GKE["cluster"], "workloadIdentity": False}
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and list(errors) == ["mig-inference:modelCache.storage"], errors
    assert "Workload Identity" in errors["mig-inference:modelCache.storage"]
