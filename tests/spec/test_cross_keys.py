"""Keys that contradict another section, each refused at the key the file gives and naming the
other (mig_inference.spec.cross_keys); the namespaces and the versions per cloud have their own
tests (test_namespaces, test_version_keys)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mig_inference.spec.cross_keys import ISTIO_KUBERNETES
from mig_inference.versions import ISTIO_VERSION
from tests.spec.test_all_errors import GKE, error_keys, with_changes
from tests.spec.test_api_formats import EKS

GATEWAY = {"proxySubnet": "10.129.0.0/23"}
CREATED_EKS = copy.deepcopy(EKS)
CREATED_EKS["cluster"].update(create=True, vpcId="vpc-0a1b2c3d", version="1.35",
                              publicAccessCidrs=["198.51.100.0/24"])  # fmt: skip


def test_the_istio_range_is_the_pinned_istios() -> None:
    """ISTIO_KUBERNETES is Istio 1.30's row of istio.io's support table: a new pin needs its
    own row."""
    assert ISTIO_VERSION.startswith("1.30.")
    assert ISTIO_KUBERNETES == (32, 36)


def test_a_gateway_with_no_service_is_refused() -> None:
    values = with_changes(GKE, gateway=GATEWAY, services=None)
    assert list(error_keys(values)) == ["gateway"]
    assert "the stack has none" in error_keys(values)["gateway"]
    values["gateway"] = {**GATEWAY, "enabled": False}
    assert error_keys(values) == {}


def test_a_gateway_whose_services_are_refused_is_not_blamed_for_it() -> None:
    values = with_changes(GKE, gateway=GATEWAY, services__0__replicas="many")
    assert list(error_keys(values)) == ["services[0].replicas"]


@pytest.mark.parametrize(("version", "refused"), [("1.31", True), ("1.32", False), ("1.36", False)])
def test_the_istio_the_stack_installs_against_the_clusters_version(
    version: str, refused: bool
) -> None:
    values = copy.deepcopy(CREATED_EKS)
    values["cluster"]["version"] = version
    values["gateway"] = {}
    errors = error_keys(values)
    if not refused:
        assert errors == {}, errors
        return
    assert list(errors) == ["gateway.install"], errors
    assert f"the cluster runs {version} (cluster.version)" in errors["gateway.install"]
    assert "supports Kubernetes 1.32 to 1.36" in errors["gateway.install"]
    values["gateway"] = {"install": False}
    assert error_keys(values) == {}


def test_a_refused_cluster_version_is_not_blamed_again_at_the_gateway() -> None:
    values = copy.deepcopy(CREATED_EKS)
    values["cluster"]["version"] = "1.20"
    values["gateway"] = {}
    assert list(error_keys(values)) == ["cluster.version"]


def test_a_release_label_without_the_prometheus_operator() -> None:
    values = with_changes(GKE, monitoring={"releaseLabel": "kube-prometheus-stack"})
    errors = error_keys(values)
    assert list(errors) == ["monitoring.releaseLabel"], errors
    assert "prometheusOperator: true" in errors["monitoring.releaseLabel"]
    values["monitoring"]["prometheusOperator"] = True
    assert error_keys(values) == {}


def _streaming(engine: str) -> dict[str, Any]:
    service: dict[str, Any] = {**GKE["services"][0], "engine": engine}
    if engine == "tgi":
        service["model"] = "m/m"
    return with_changes(
        GKE,
        modelCache={"storage": "gcs-fuse", "stream": True, "bucket": "team-models"},
        services=[{**service, "weightsGiB": 10}],
    )


def test_streaming_weights_needs_a_vllm_service() -> None:
    errors = error_keys(_streaming("tgi"))
    assert list(errors) == ["modelCache.stream"], errors
    assert "Run:ai Model Streamer" in errors["modelCache.stream"]
    assert error_keys(_streaming("vllm")) == {}
