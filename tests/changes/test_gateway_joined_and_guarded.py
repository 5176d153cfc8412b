"""The gateway on clusters the stack joins, and its guarded keys: there the Gateway API and
InferencePool CRDs it applies are kept on delete (other teams' Gateways, HTTPRoutes and
InferencePools live in them), the plan warns and `diff` turning the gateway off says they stay;
Istio's own ports are refused as the listener's."""

from __future__ import annotations

from pathlib import Path

from mig_inference.changes.change_plan import diff_records
from mig_inference.changes.record import plan_record
from tests.mocked import render_config
from tests.plan.test_gateway_plan import CREATED_EKS, DEMAND, config_of, plan_of

CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


def _crd_options(tmp_path: Path, config: dict[str, object]) -> list[bool]:
    rendering = render_config(tmp_path, config, apiKey="k", hfToken="t")
    assert rendering.error is None, rendering.error
    return [o.retain_on_delete for (kind, _), o in rendering.options.items() if kind == CONFIG_FILE]


def test_a_joined_cluster_keeps_the_crds_the_gateway_applied(tmp_path: Path) -> None:
    assert _crd_options(tmp_path, config_of(DEMAND, gateway={})) == [True, True]
    created = config_of(DEMAND, gateway={"endpointPicker": {"cpu": 0.5}},
                        cluster={**config_of(DEMAND)["cluster"], **CREATED_EKS})  # fmt: skip
    assert _crd_options(tmp_path, created) == [False, False]


def test_the_plan_warns_a_joined_cluster_keeps_the_crds_and_diff_says_they_stay() -> None:
    plan = plan_of(config_of(DEMAND, gateway={}))
    assert plan.gateway is not None
    assert any("CustomResourceDefinitions" in w and "kept" in w for w in plan.gateway.warnings)
    deployed = plan_record(plan)
    off = plan_record(plan_of(config_of(DEMAND, gateway={"enabled": False})))
    fields = {f.key: f for f in diff_records(deployed, off).gateway}
    assert "stay in the cluster" in str(fields["gateway CRDs"])


def test_istio_s_reserved_ports_are_refused_at_gateway_port() -> None:
    """rt-gw D6: Istio's gateway pods listen on these themselves (Istio, "Ports used by
    Istio"): a listener on one of them collides with the proxy's own."""
    import pytest

    from mig_inference.errors import MigErrors

    for port in (15000, 15001, 15006, 15008, 15020, 15021, 15090):
        with pytest.raises(MigErrors) as raised:
            plan_of(config_of(DEMAND, gateway={"port": port}))
        [error] = raised.value.errors
        assert error.path == "mig-inference:gateway.port" and str(port) in str(error)
        assert "Ports used by Istio" in str(error)
    assert plan_of(config_of(DEMAND, gateway={"port": 8080})).gateway is not None


def test_a_gke_node_subnet_is_not_taken_for_the_proxy_only_subnet(tmp_path: Path) -> None:
    """rt-gw D4: the lookup asks for a proxy-only subnet (purpose REGIONAL_MANAGED_PROXY) of
    the range, not any subnet of it: offline, the region's node subnet 10.128.0.0/20 (the
    default network's us-central1 range) is refused."""
    from tests.components.test_gateway import _joined_gke

    config = _joined_gke(proxySubnet="10.128.0.0/20")
    refused = render_config(tmp_path, config, apiKey="k", hfToken="t")
    assert refused.error is not None and "has no subnet 10.128.0.0/20" in refused.error
    assert "REGIONAL_MANAGED_PROXY" in refused.error
    accepted = render_config(tmp_path, _joined_gke(), apiKey="k", hfToken="t")
    assert accepted.error is None, accepted.error
    [lookup] = [a for t, a in accepted.calls if t == "gcp:compute/getSubnetworks:getSubnetworks"]
    assert (
        lookup["filter"] == '(ipCidrRange = "10.129.0.0/23") (purpose = "REGIONAL_MANAGED_PROXY")'
    )


def test_cert_manager_and_a_joined_gke_cluster_s_apis_are_warned() -> None:
    """rt-gw D5: the listener is HTTPS only, so an ACME issuer's HTTP-01 challenge is never
    answered: the issuer must solve DNS-01. D7: cert-manager must already run (the stack does
    not install it), and a joined GKE cluster's project must have the APIs the gateway uses
    enabled (the stack enables them on a cluster it creates only)."""
    from tests.components.test_gateway import _joined_gke
    from tests.plan.test_gateway_plan import TLS

    issued = {"hostname": TLS["hostname"], "certManager": {"issuer": "letsencrypt"}}
    plan = plan_of(config_of(DEMAND, gateway={"tls": issued}))
    assert plan.gateway is not None
    [warning] = [w for w in plan.gateway.warnings if "certManager" in w]
    assert (
        "DNS-01" in warning and "HTTP-01" in warning and "cert-manager must already run" in warning
    )
    joined = plan_of(_joined_gke()).gateway
    assert joined is not None
    assert any("networkservices.googleapis.com" in w and "enabled" in w for w in joined.warnings)
    created = plan_of(config_of("ephemeral-gke")).gateway
    assert created is not None
    assert not any("networkservices.googleapis.com" in w for w in created.warnings)


def test_istio_s_own_crds_are_kept_by_helm(tmp_path: Path) -> None:
    """rt-gw D2: the `base` release's CRDs carry `helm.sh/resource-policy: keep`, so removing
    the release (the gateway off on a joined cluster) leaves them and their objects."""
    from mig_inference.kube.gateway import ISTIO_NAMESPACE
    from tests.components.test_gateway import ISTIO_CHARTS, helm_template
    from tests.reference import reference_dir

    base = helm_template(reference_dir(f"{ISTIO_CHARTS}/base"), "istio-base", ISTIO_NAMESPACE,
                         {}, tmp_path)  # fmt: skip
    crds = [d for d in base if d["kind"] == "CustomResourceDefinition"]
    assert crds
    assert all(d["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for d in crds)
