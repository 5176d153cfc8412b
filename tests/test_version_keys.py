"""A check whose value comes from another key names the key that holds it: a DRA stack's
Kubernetes version read from the cluster's own version key, and no second error when that key
is refused already."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from mig_inference.offline_answers import CLUSTER_VERSIONS, FAKE_CALLS
from tests.mocked import render_config
from tests.test_api_formats import EKS, run_plan
from tests.test_dra import OKE_GET_CLUSTER, joined_oke_dra

CREATED_DRA_EKS = copy.deepcopy(EKS)
CREATED_DRA_EKS["cluster"].update(create=True, vpcId="vpc-0a1b2c3d", version="1.35",
                                  publicAccessCidrs=["198.51.100.0/24"])  # fmt: skip
CREATED_DRA_EKS["pools"][0]["allocation"] = "dra"


def test_a_refused_cluster_version_is_not_reported_again_at_the_dra_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_plan(tmp_path, capsys, CREATED_DRA_EKS)[0] == 0
    values = copy.deepcopy(CREATED_DRA_EKS)
    values["cluster"]["version"] = "banana"
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and list(errors) == ["mig-inference:cluster.version"], errors


def test_dra_features_compared_with_the_clusters_version_name_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values: dict[str, Any] = {**CREATED_DRA_EKS, "dra": {"extendedResources": True,
                                                         "dynamicMig": True}}  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1
    assert set(errors) == {"mig-inference:dra.extendedResources", "mig-inference:dra.dynamicMig"}
    assert all("the cluster is 1.35 (cluster.version)" in message for message in errors.values())
    values["dra"] = {**values["dra"], "kubernetesVersion": "1.35"}
    code, errors = run_plan(tmp_path, capsys, values)
    assert all("(dra.kubernetesVersion)" in message for message in errors.values()), errors


def test_a_joined_cluster_older_than_the_version_of_the_cluster_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OKE joins a cluster whose version the stack may give as cluster.kubernetesVersion; when
    the cluster runs an older one, the preview stops naming that key (not the dra section the
    file leaves out)."""
    config = joined_oke_dra()
    del config["dra"]
    assert render_config(tmp_path, config).error is None
    monkeypatch.delitem(CLUSTER_VERSIONS, OKE_GET_CLUSTER)
    monkeypatch.setitem(FAKE_CALLS, OKE_GET_CLUSTER,
                        {**FAKE_CALLS[OKE_GET_CLUSTER], "kubernetesVersion": "v1.34.2"})  # fmt: skip
    rendering = render_config(tmp_path, config)
    assert rendering.error is not None
    assert "mig-inference:cluster.kubernetesVersion: says 1.35, and the cluster runs v1.34.2" in (
        rendering.error
    )
