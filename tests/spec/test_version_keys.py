"""A check whose value comes from another key names the key that holds it: a DRA stack's
Kubernetes version read from the cluster's own version key, and no second error when that key
is refused already."""

from __future__ import annotations

import copy
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.clouds import Cloud, kubernetes_versions
from mig_inference.clouds.kubernetes_versions import version_problem
from mig_inference.offline_answers import CLUSTER_VERSIONS, FAKE_CALLS
from mig_inference.spec.files import load_stack, load_stack_file, stack_names
from tests.kube.test_dra import OKE_GET_CLUSTER, joined_oke_dra
from tests.mocked import one, render_config, stack_rendering
from tests.spec.test_api_formats import EKS, run_plan

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


# --- versions against what each cloud offers (mig_inference.clouds.kubernetes_versions) ----

CREATED_EKS = copy.deepcopy(EKS)
CREATED_EKS["cluster"].update(create=True, vpcId="vpc-0a1b2c3d", version="1.35",
                              publicAccessCidrs=["198.51.100.0/24"])  # fmt: skip


def _oke(version: str) -> dict[str, Any]:
    from tests.spec.test_all_errors import OKE

    config = copy.deepcopy(OKE)
    config["cluster"].update(vcnId="ocid1.vcn.oc1.iad.aaaa",
                             endpointSubnetId="ocid1.subnet.oc1.iad.aaaa",
                             podSubnetIds=["ocid1.subnet.oc1.iad.aaaa"],
                             systemImageId="ocid1.image.oc1.iad.aaaa", kubernetesVersion=version)  # fmt: skip
    return config


@pytest.mark.parametrize(
    ("cloud", "version", "said"),
    [("eks", "1.20", "older than every version"), ("eks", "1.3", "older than every version"),
     ("eks", "1.40", "newer than every version"), ("eks", "1.37", "aws/containers-roadmap#2864"),
     ("eks", "1.30", "stopped offering Kubernetes 1.30 on 2026-07-23"),
     ("oke", "v1.20.8", "older than every version"), ("oke", "v1.99.0", "newer than every"),
     ("oke", "v1.33.1", "stopped offering Kubernetes 1.33 on 2026-06-27"),
     ("oke", "v1.34.1", "only the patch versions it lists: for 1.34 v1.34.2")],
)  # fmt: skip
def test_a_version_the_cloud_does_not_offer_is_refused_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cloud: str, version: str, said: str
) -> None:
    if cloud == "eks":
        values = copy.deepcopy(CREATED_EKS)
        values["cluster"]["version"] = version
        key = "mig-inference:cluster.version"
    else:
        values, key = _oke(version), "mig-inference:cluster.kubernetesVersion"
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and list(errors) == [key], errors
    assert said in errors[key]
    assert "as of 2026-09-17" in errors[key]  # the table's date, never the clock's


@pytest.mark.parametrize(
    ("cloud", "version"),
    [("eks", v) for v in ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36")]
    + [("oke", v) for v in ("v1.34.2", "v1.35.1", "v1.36.0")],
)
def test_every_offered_version_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cloud: str, version: str
) -> None:
    if cloud == "eks":
        values = copy.deepcopy(CREATED_EKS)
        values["cluster"]["version"] = version
    else:
        values = _oke(version)
    assert run_plan(tmp_path, capsys, values) == (0, {})


def test_past_standard_support_is_said_from_the_tables_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """EKS 1.33 left standard support on 2026-07-29, before the table's date: a warning says
    so. The date compared with is the table's, so moving it (as an update of the table would)
    is what changes the result, not the calendar."""
    values = copy.deepcopy(CREATED_EKS)
    values["cluster"]["version"] = "1.33"
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in values.items()}})
    )
    [warning] = [w for w in load_stack_file(path).warnings if "standard support" in w]
    assert warning.startswith("mig-inference:cluster.version: EKS 1.33 left standard support on "
                              "2026-07-29 (as of the version table of 2026-09-17)")  # fmt: skip
    assert "until 2027-07-29" in warning
    values["cluster"]["version"] = "1.34"  # standard support until 2026-12-02
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in values.items()}})
    )
    assert not [w for w in load_stack_file(path).warnings if "standard support" in w]
    monkeypatch.setattr(kubernetes_versions, "TABLE_DATE", date(2026, 12, 3))
    assert [w for w in load_stack_file(path).warnings if "left standard support on 2026-12-02" in w]
    values["cluster"]["version"] = "1.31"  # extended support ended 2026-11-26
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in values.items()}})
    )
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and "stopped offering Kubernetes 1.31 on 2026-11-26" in errors[
        "mig-inference:cluster.version"]  # fmt: skip


def test_the_version_table_reads_no_clock() -> None:
    source = Path(kubernetes_versions.__file__).read_text()
    assert not any(call in source for call in ("today(", "now(", "time.time", "utcnow"))


def test_the_shipped_stacks_versions_are_offered() -> None:
    """Each shipped stack that names a cluster version names one its cloud offers as of the
    table's date (docs/stack-file.md lists them with when they leave support)."""
    named = {}
    for stack in stack_names():
        spec = load_stack(stack)
        key = {Cloud.EKS: "version", Cloud.OKE: "kubernetesVersion"}.get(spec.cloud)
        version = spec.cluster.settings.get(key) if key else None
        if version is not None:
            named[stack] = version
            assert version_problem(spec.cloud, version) is None, (stack, version)
    assert named == {"oke-b300": "v1.34.2", "oke-h100": "v1.34.2"}


# --- a GKE cluster the stack creates runs the DRA objects' minor ---------------------------


def _created_gke_dra(**cluster: Any) -> dict[str, Any]:
    from tests.kube.test_dra import variant

    config: dict[str, Any] = variant(dra={"kubernetesVersion": "1.35"})
    config["cluster"] = {**config["cluster"], "create": True, "protect": False,
                         "network": "default", "subnetwork": "default",
                         "authorizedNetworks": ["203.0.113.0/24"], **cluster}  # fmt: skip
    return config


def test_a_created_gke_cluster_starts_at_the_dra_minor(tmp_path: Path) -> None:
    rendering = render_config(tmp_path, _created_gke_dra())
    assert rendering.error is None, rendering.error
    cluster = one(rendering, "gcp:container/cluster:Cluster")
    assert cluster.inputs["minMasterVersion"] == "1.35"
    assert cluster.inputs["releaseChannel"] == {"channel": "REGULAR"}


def test_a_created_gke_cluster_without_dra_leaves_the_version_to_its_channel() -> None:
    cluster = one(stack_rendering("ephemeral-gke"), "gcp:container/cluster:Cluster")
    assert "minMasterVersion" not in cluster.inputs


@pytest.mark.parametrize(
    ("channel", "minor", "refused"),
    [(None, "1.35", False), (None, "1.37", True), ("RAPID", "1.37", False),
     ("STABLE", "1.36", True), ("STABLE", "1.35", False), ("EXTENDED", "1.34", False)],
)  # fmt: skip
def test_the_release_channel_must_offer_the_dra_minor(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    channel: str | None,
    minor: str,
    refused: bool,
) -> None:
    config = _created_gke_dra(**({"releaseChannel": channel} if channel else {}))
    config["dra"] = {"kubernetesVersion": minor}
    code, errors = run_plan(tmp_path, capsys, config)
    if not refused:
        assert code == 0, errors
        return
    assert code == 1 and list(errors) == ["mig-inference:dra.kubernetesVersion"], errors
    message = errors["mig-inference:dra.kubernetesVersion"]
    assert f"release channel {channel or 'REGULAR'}" in message
    assert "set cluster.releaseChannel to RAPID" in message
