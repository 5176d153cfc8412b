"""The namespaces a stack creates: none created twice, none that exists in the cluster already,
each refused at the key the file gives (pulumi-kubernetes creates objects client-side, so
`pulumi up` would stop with AlreadyExists part-way through). Rendered stacks never hold two
Namespace objects of one name."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mig_inference.spec.namespaces import ISTIO_NAMESPACE, KEDA_NAMESPACE
from mig_inference.versions import ISTIO_VERSION
from tests.kube.test_dra import variant
from tests.mocked import render_config
from tests.spec.test_all_errors import GKE, error_keys, with_changes
from tests.spec.test_api_formats import EKS

GATEWAY = {"proxySubnet": "10.129.0.0/23"}
QUEUED = {"name": "chat", "model": "m/m", "memoryGiB": 30, "replicas": 1, "maxNumSeqs": 8,
          "queueAutoscaling": {"maxReplicas": 4}}  # fmt: skip


def test_the_namespaces_the_components_create_are_the_ones_checked() -> None:
    from mig_inference.components.workloads.monitoring import KEDA_NAMESPACE as KEDA_INSTALLED
    from mig_inference.kube.gateway import ISTIO_NAMESPACE as ISTIO_INSTALLED

    assert (ISTIO_NAMESPACE, KEDA_NAMESPACE) == (ISTIO_INSTALLED, KEDA_INSTALLED)


@pytest.mark.parametrize(
    ("changes", "key", "said"),
    [
        ({"services__0__namespace": "kube-system"}, "services[0].namespace", "exists in every"),
        ({"services__0__namespace": "default"}, "services[0].namespace", "exists in every"),
        ({"services__0__namespace": "kube-node-lease"}, "services[0].namespace", "every"),
        ({"services__0__namespace": "kube-tools"}, "services[0].namespace", "reserves"),
        ({"services__0__namespace": "gmp-system"}, "services[0].namespace", "GKE's own"),
        ({"gpuOperator": {"namespace": "kube-system"}}, "gpuOperator.namespace", "every"),
        ({"gateway": {**GATEWAY, "namespace": "kube-public"}}, "gateway.namespace", "every"),
        ({"gateway": {**GATEWAY, "namespace": "inference"}}, "gateway.namespace",
         "also the namespace of service chat (services[0].namespace)"),
        ({"gpuOperator": {"namespace": "inference"}}, "gpuOperator.namespace",
         "also the namespace of service chat"),
        ({"gpuOperator": {"namespace": "serving"}, "services__0__namespace": "serving"},
         "services[0].namespace", "also the namespace of the GPU Operator"),
        ({"gateway": {**GATEWAY, "namespace": "gpu-operator"}}, "gateway.namespace",
         "also the namespace of the GPU Operator (gpuOperator.namespace)"),
        ({"monitoring": {"prometheusNamespace": "inference"}}, "monitoring.prometheusNamespace",
         "is where the Prometheus that scrapes the stack runs"),
        ({"monitoring": {"prometheusOperator": True}, "services__0__namespace": "monitoring"},
         "services[0].namespace", "is where the Prometheus that scrapes the stack runs"),
        ({"services": [QUEUED], "services__0__namespace": KEDA_NAMESPACE,
          "monitoring": {"prometheusUrl": "http://p.monitoring:9090"}},
         "services[0].namespace", "also the namespace of KEDA"),
    ],
)  # fmt: skip
def test_a_namespace_created_twice_or_existing_is_refused_at_its_key(
    changes: dict[str, Any], key: str, said: str
) -> None:
    values = with_changes(GKE, **{k: v for k, v in changes.items() if "__" not in k})
    values = with_changes(values, **{k: v for k, v in changes.items() if "__" in k})
    errors = error_keys(values)
    assert list(errors) == [key], errors
    assert said in errors[key]


def test_the_dra_driver_beside_the_gpu_operator() -> None:
    config = variant(dra={"kubernetesVersion": "1.35", "namespace": "gpu-operator"})
    assert error_keys(config) == {
        "dra.namespace": "'gpu-operator' is also the namespace of the GPU Operator "
        "(gpuOperator.namespace): the stack creates a Namespace object for each, and "
        "pulumi-kubernetes creates the second client-side, so `pulumi up` stops with "
        "AlreadyExists part-way through; give NVIDIA's DRA driver a namespace of its own"
    }


@pytest.mark.parametrize("where", ["services__0__namespace", "gateway"])
def test_istio_system_beside_the_istio_the_stack_installs(where: str) -> None:
    gateway: dict[str, Any] = {}
    values = with_changes(EKS, gateway=gateway)
    if where == "gateway":
        values["gateway"] = {"namespace": ISTIO_NAMESPACE}
        key = "gateway.namespace"
    else:
        values = with_changes(values, services__0__namespace=ISTIO_NAMESPACE)
        key = "services[0].namespace"
    errors = error_keys(values)
    assert list(errors) == [key], errors
    assert f"the Istio {ISTIO_VERSION} the stack installs (gateway.install)" in errors[key]
    # A cluster that runs its own Istio (install: false): the stack creates no istio-system.
    values["gateway"] = {**values["gateway"], "install": False}
    assert error_keys(values) == {}


def test_one_namespace_shared_by_services_is_created_once() -> None:
    second = {**GKE["services"][0], "name": "chat-2"}
    values = with_changes(GKE, services=[GKE["services"][0], second])
    assert error_keys(values) == {}


def test_a_refused_namespace_is_not_blamed_again() -> None:
    values = with_changes(GKE, gpuOperator={"namespace": "Not A Label"})
    assert list(error_keys(values)) == ["gpuOperator.namespace"]


def _namespace_names(rendering: Any) -> list[str]:
    return [r.inputs["metadata"]["name"] for r in rendering.of_type("kubernetes:core/v1:Namespace")]


def test_every_namespace_the_stack_creates_is_told_apart(tmp_path: Path) -> None:
    """What the rule reads is what the program creates: a stack with every namespace-creating
    part renders one Namespace per name, and each name the rule knows of."""
    values = copy.deepcopy(EKS)
    values["gateway"] = {}
    values["services"] = [{**QUEUED, "namespace": "serving"}]
    values["monitoring"] = {"prometheusUrl": "http://prometheus.monitoring:9090"}
    rendering = render_config(tmp_path, values)
    assert rendering.error is None, rendering.error
    names = _namespace_names(rendering)
    assert Counter(names) == Counter(set(names)), names
    assert set(names) == {"serving", "gpu-operator", "inference-gateway", ISTIO_NAMESPACE}
    releases = rendering.of_type("kubernetes:helm.sh/v3:Release")
    assert any(r.inputs.get("namespace") == KEDA_NAMESPACE for r in releases)
