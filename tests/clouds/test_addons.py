"""The cluster add-ons each stack feature needs (mig_inference/clouds/addons.py): every model
cache storage of every cloud, on a cluster the stack creates and on one it joins, rendered
under Pulumi's mocks. A created cluster carries what the table says; a joined one is looked up,
and refused at the key that needs what it lacks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mig_inference import render
from mig_inference.clouds import Cloud
from mig_inference.clouds.addons import (
    ADDONS,
    FSX_CSI_ADDON,
    POD_IDENTITY_AGENT,
    S3_CSI_ADDON,
    STORAGE_FEATURES,
    VPC_CNI,
    Feature,
    Joined,
    addon,
    storage_offered,
)
from mig_inference.offline_answers import FAKE_CALLS
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.plan.addons import needed_addons
from mig_inference.rendering import Rendering
from mig_inference.spec import parse_stack
from mig_inference.spec.model_cache import STORAGE_BY_CLOUD
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.changes.test_day2 import stack
from tests.mocked import render_config

GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_GET_CLUSTER = "gcp:container/getCluster:getCluster"
EKS_ADDON = "aws:eks/addon:Addon"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
CREATED: dict[str, dict[str, Any]] = {
    "gke": {"network": "gpu-vpc", "subnetwork": "gpu-subnet",
            "authorizedNetworks": ["203.0.113.0/24"]},
    "eks": {"vpcId": "vpc-0123456789abcdef0", "version": "1.33", "endpointPublicAccess": False},
    "oke": {"vcnId": "ocid1.vcn.oc1..v", "endpointSubnetId": "ocid1.subnet.oc1..api",
            "podSubnetIds": ["ocid1.subnet.oc1..pods"], "kubernetesVersion": "v1.34.2",
            "systemImageId": "ocid1.image.oc1..sys"},
}  # fmt: skip
EXTRA: dict[str, dict[str, Any]] = {
    "fsx-lustre": {"securityGroupIds": ["sg-0a1b2c3d"]},
    "storage-class": {"storageClass": "nfs-rwx"},
}
EXISTING: dict[str, Any] = {
    "cloud": "existing",
    "cluster": {"name": "lab", "context": "lab-admin"},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "nodeNames": ["n1"],
               "mig": "all-3g.40gb", "maxPods": 64}],
    "services": [{"name": "chat", "model": "m", "memoryGiB": 8, "replicas": 4, "pool": "h100"}],
}  # fmt: skip


def _config(cloud: str, storage: str, created: bool, **cache: Any) -> dict[str, Any]:
    config: dict[str, Any] = copy.deepcopy(EXISTING if cloud == "existing" else stack(cloud))
    if created:
        config["cluster"].update(create=True, **CREATED[cloud])
        config["cluster"].pop("clusterId", None)
    config["modelCache"] = {"storage": storage, **EXTRA.get(storage, {}), **cache}
    return config


def _plan(config: dict[str, Any]) -> StackPlan:
    """The plan of `config` as `render_config` runs it (its stack is named `test`)."""
    return plan_stack(parse_stack("test", config, pinned_operator_version=GPU_OPERATOR_VERSION))


def _needs(config: dict[str, Any]) -> set[Feature]:
    return {need.feature for need in needed_addons(_plan(config))}


def _addons(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {r.inputs["addonName"]: r.inputs for r in rendering.of_type(EKS_ADDON)}


def _role_policies(rendering: Rendering) -> list[dict[str, Any]]:
    return [
        json.loads(p.inputs["policy"]) for p in rendering.of_type("aws:iam/rolePolicy:RolePolicy")
    ]


def _bucket_actions(policies: list[dict[str, Any]], bucket: str) -> set[frozenset[str]]:
    """The object actions of each policy on `bucket`'s objects."""
    return {
        frozenset(statement["Action"])
        for policy in policies
        for statement in policy["Statement"]
        if statement["Resource"] == [f"arn:aws:s3:::{bucket}/*"]
    }


def test_every_row_has_its_source_and_each_cloud_offers_its_storage() -> None:
    for row in ADDONS:
        if row.feature is not Feature.STORAGE_CLASS:
            assert row.source.startswith("https://"), row
        if row.installed_here:
            assert row.created, row
        if row.identity:
            assert row.cloud is Cloud.EKS and "/" in row.identity
    # The spec's storage per cloud is the table's, the default first.
    for cloud in Cloud:
        assert [s.value for s in STORAGE_BY_CLOUD[cloud]] == [
            f.value for f in storage_offered(cloud)
        ]
        assert set(storage_offered(cloud)) <= set(STORAGE_FEATURES)
    assert storage_offered(Cloud.EXISTING) == (Feature.STORAGE_CLASS,)


CASES = [
    (cloud, storage.value, created)
    for cloud in ("gke", "eks", "oke", "existing")
    for storage in STORAGE_BY_CLOUD[Cloud(cloud)]
    for created in ((False,) if cloud == "existing" else (True, False))
] + [("eks", "s3-mountpoint", True, True), ("eks", "s3-mountpoint", False, True)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_each_storage_gets_what_its_cloud_needs(tmp_path: Path, case: tuple[Any, ...]) -> None:
    cloud, storage, created, *streamed = case
    stream = {"stream": True} if streamed else {}
    config = _config(cloud, storage, created, **stream)
    needs = _needs(config)
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    assert Feature.NETWORK_POLICY in needs  # every one of these stacks has a service
    tokens = [token for token, _ in rendering.calls]
    if cloud == "gke":
        cluster = [r.inputs for r in rendering.of_type(GKE_CLUSTER)]
        if created:
            [inputs] = cluster
            addons = inputs.get("addonsConfig") or {}
            assert ("gcsFuseCsiDriverConfig" in addons) == (storage == "gcs-fuse")
            assert ("gcePersistentDiskCsiDriverConfig" in addons) == (storage == "hyperdisk-ml")
            for config_key in ("gcsFuseCsiDriverConfig", "gcePersistentDiskCsiDriverConfig"):
                if config_key in addons:
                    assert addons[config_key] == {"enabled": True}
            assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
        else:
            assert not cluster and GKE_GET_CLUSTER in tokens
        members = {
            m.inputs["member"].rsplit("/", 1)[-1]: m.inputs["role"]
            for m in rendering.of_type(BUCKET_MEMBER)
        }
        if storage == "gcs-fuse":
            assert members == {
                "model-cache": "roles/storage.objectUser",
                "model-cache-reader": "roles/storage.objectViewer",
            }
        else:
            assert not members
    elif cloud == "eks":
        addons = _addons(rendering)
        lookups = {args["addonName"] for token, args in rendering.calls if "getAddon" in token}
        wanted = {VPC_CNI}
        if storage != "storage-class":
            wanted.add(addon(Cloud.EKS, Feature(storage)).addon)  # type: ignore[union-attr]
        if stream or (created and storage != "storage-class"):
            wanted.add(POD_IDENTITY_AGENT)
        if created:
            assert set(addons) == wanted and not lookups
            assert json.loads(addons[VPC_CNI]["configurationValues"]) == {
                "enableNetworkPolicy": "true"
            }
            for name, account in ((S3_CSI_ADDON, "s3-csi-driver-sa"),
                                  (FSX_CSI_ADDON, "fsx-csi-controller-sa")):  # fmt: skip
                if name in addons:
                    [association] = addons[name]["podIdentityAssociations"]
                    assert association["serviceAccount"] == account
        else:
            assert not addons and lookups == wanted
        bucket = _plan(config).model_cache.bucket  # type: ignore[union-attr]
        actions = _bucket_actions(_role_policies(rendering), str(bucket))
        readers = [r.inputs for r in rendering.of_type(ASSOCIATION)]
        expected: set[frozenset[str]] = set()
        if stream:
            expected.add(frozenset({"s3:GetObject"}))  # the replicas read, nothing more
            assert readers == [
                {"clusterName": "c", "namespace": "inference",
                 "serviceAccount": "model-cache-reader",
                 "roleArn": "arn:aws:iam::123456789012:role/mock"}
            ]  # fmt: skip
        else:
            assert not readers
        if created and storage == "s3-mountpoint":
            expected.add(frozenset({"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload",
                                    "s3:DeleteObject"}))  # fmt: skip
        assert actions == expected
        if created and storage == "fsx-lustre":
            attached = {
                r.inputs["policyArn"]
                for r in rendering.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            }
            assert "arn:aws:iam::aws:policy/AmazonFSxFullAccess" in attached
    else:
        # OKE's File Storage driver comes with the cluster; nobody's NetworkPolicy engine is
        # installed or looked up, and the preview says so.
        assert not any(r.type.endswith("Addon") for r in rendering.resources)
        assert any(
            "go unenforced" in log or "enforced only by a CNI" in log for log in rendering.logs
        )


def test_a_gke_stack_without_network_policies_asks_for_no_dataplane_v2(tmp_path: Path) -> None:
    config = stack("gke", mig="all-3g.40gb", migManager="gke")
    config["services"] = []
    config["cluster"].update(create=True, **CREATED["gke"])
    assert _needs(config) == set()
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    [cluster] = rendering.of_type(GKE_CLUSTER)
    assert "datapathProvider" not in cluster.inputs and "addonsConfig" not in cluster.inputs


def test_a_joined_gke_cluster_without_the_driver_is_refused_at_the_storage_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = FAKE_CALLS[GKE_GET_CLUSTER]
    monkeypatch.setitem(found, "addonsConfigs", [{"gcsFuseCsiDriverConfigs": [{"enabled": False}]}])
    monkeypatch.setitem(found, "datapathProvider", "LEGACY_DATAPATH")
    rendering = render_config(tmp_path, _config("gke", "gcs-fuse", created=False))
    assert rendering.error is not None
    assert rendering.error.startswith(
        "mig-inference:modelCache.storage: cluster c has the Cloud Storage FUSE CSI driver off"
    )
    assert "cloud-storage-fuse-csi-driver-setup" in rendering.error
    # Nothing of the stack is created, and the missing NetworkPolicy enforcement is a warning.
    assert not [r for r in rendering.resources if r.type.startswith("kubernetes:")]
    assert any(
        "mig-inference:cluster: cluster c enforces no NetworkPolicy" in log
        for log in rendering.logs
    )


def test_a_joined_eks_cluster_is_refused_at_every_key_whose_add_on_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "ABSENT_EKS_ADDONS", {S3_CSI_ADDON, POD_IDENTITY_AGENT, VPC_CNI})
    config = _config("eks", "s3-mountpoint", created=False, stream=True)
    config["pools"][0]["nodes"] = {"min": 1, "max": 2}
    rendering = render_config(tmp_path, config)
    assert rendering.error is not None
    refusals = rendering.error.split("; mig-inference:")
    assert refusals[0].startswith(
        f"mig-inference:modelCache.storage: cluster c has no EKS add-on {S3_CSI_ADDON}"
    )
    # The Pod Identity agent: the autoscaler's identity and the streaming replicas'.
    assert refusals[1].startswith(
        "pools[0].nodes, mig-inference:modelCache.stream: cluster c has no EKS add-on "
        f"{POD_IDENTITY_AGENT}"
    )
    assert "pod-id-agent-setup" in refusals[1] and len(refusals) == 2
    assert VPC_CNI not in rendering.error  # NetworkPolicy enforcement only warns
    assert any(f"has no EKS add-on {VPC_CNI}" in log for log in rendering.logs)
    assert not [r for r in rendering.resources if r.type.startswith("kubernetes:")]


def test_the_table_says_how_each_joined_cluster_is_checked() -> None:
    looked_up = {(r.cloud, r.feature) for r in ADDONS if r.joined is not Joined.NOT_LOOKED_UP}
    assert (Cloud.GKE, Feature.GCS_FUSE) in looked_up
    assert (Cloud.EKS, Feature.S3_MOUNTPOINT) in looked_up
    assert (Cloud.OKE, Feature.FILE_STORAGE) in looked_up  # built in: nothing to look up
    assert not any(r.cloud is Cloud.EXISTING for r in ADDONS if (r.cloud, r.feature) in looked_up)


def test_a_joined_eks_cluster_without_the_fsx_csi_add_on_is_refused_at_the_storage_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FSx for Lustre cache mounts through the add-on: a cluster without it would leave the
    cache's volumes unbound, so the preview stops there, before anything is created."""
    config = _config("eks", "fsx-lustre", created=False)
    assert render_config(tmp_path, config).error is None
    monkeypatch.setattr(render, "ABSENT_EKS_ADDONS", {FSX_CSI_ADDON})
    rendering = render_config(tmp_path, config)
    assert rendering.error is not None
    assert rendering.error.startswith(
        f"mig-inference:modelCache.storage: cluster c has no EKS add-on {FSX_CSI_ADDON}"
    ), rendering.error
    assert not [r for r in rendering.resources if r.type.startswith("kubernetes:")]
