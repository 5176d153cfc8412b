"""Every stack file, end to end: the real program under mocks, every Kubernetes object valid
against the Kubernetes OpenAPI schema (strict), and `plan --json` consistent with services."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from mig_inference.cli import main
from mig_inference.spec import StackSpec
from mig_inference.spec.files import load_stack, stack_names
from tests.mocked import stack_rendering

KUBERNETES_VERSION = "1.33.0"
"""What stacks without DRA are validated against (the oldest minor the clouds still run); a stack
with DRA pools is validated against the version its `dra` section targets."""


def schema_version(spec: StackSpec) -> str:
    """The Kubernetes version a stack's objects are validated against."""
    return f"{spec.dra.kubernetes_version}.0" if spec.dra else KUBERNETES_VERSION


CUSTOM_RESOURCE_GROUPS = {"monitoring.coreos.com", "keda.sh", "gateway.networking.k8s.io",
                          "networking.istio.io", "networking.gke.io", "nvidia.com"}  # fmt: skip
REQUIRED_STACKS = {"gke-h100", "gke-native", "eks-p4d", "eks-p5-auto", "oke-h100", "existing",
                   "ephemeral-gke"}  # fmt: skip


def test_required_stacks_exist() -> None:
    assert set(stack_names()) >= REQUIRED_STACKS


@pytest.mark.parametrize("stack", stack_names())
def test_program_runs_and_objects_validate(stack: str) -> None:
    rendering = stack_rendering(stack)
    objects = rendering.kubernetes_objects()
    assert objects, "no Kubernetes objects"
    version = schema_version(load_stack(stack))
    for obj in objects:
        if obj["apiVersion"].split("/")[0] in CUSTOM_RESOURCE_GROUPS:
            continue  # not in Kubernetes' own schema: test_monitoring, test_gateway check them
        kubernetes_validate.validate(obj, version, strict=True)
    assert set(rendering.outputs) >= {"pools", "services"}


@pytest.mark.parametrize("stack", stack_names())
def test_plan_json_matches_services(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--stack", stack, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert {"stack", "cloud", "pools", "services", "errors", "warnings"} <= set(plan)
    assert plan["errors"] == []
    pools = {p["name"]: p for p in plan["pools"]}
    used: dict[tuple[str, str], int] = {}
    for service in plan["services"]:
        pool = pools[service["pool"]]
        assert service["resource"] in pool["capacity"], service
        key = (service["pool"], service["resource"])
        used[key] = used.get(key, 0) + service["replicas"]
        if service["need_mib"]:
            assert service["need_mib"] <= service["slice_mib"]
    for (pool, resource), count in used.items():
        assert count <= pools[pool]["capacity"][resource]
    # The program deploys what the plan says.
    deployments = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in stack_rendering(stack).of_type("kubernetes:apps/v1:Deployment")
    }
    for service in plan["services"]:
        spec = deployments[service["name"]]["spec"]
        assert spec["replicas"] == service["replicas"]
        pod = spec["template"]["spec"]
        resources = pod["containers"][0]["resources"]
        if service["claim"] is None:
            assert resources["limits"][service["resource"]] == "1"
            continue
        # A DRA pool: the pod claims its slice through the planned template, and asks for no
        # extended resource.
        assert not any(key.startswith("nvidia.com/") for key in resources["limits"])
        assert resources["claims"] == [{"name": pod["resourceClaims"][0]["name"]}]
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == service["claim"]["template"]
        [template] = [
            t.inputs
            for t in stack_rendering(stack).of_type(
                "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
            )
            if t.inputs["metadata"]["name"] == service["claim"]["template"]
        ]
        [request] = template["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == service["claim"]["device_class"]
        assert request["exactly"]["selectors"] == [
            {"cel": {"expression": service["claim"]["selector"]}}
        ]


def test_plan_text_and_svg(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    svg = Path(str(tmp_path)) / "layouts.svg"
    assert main(["plan", "--stack", "eks-p4d", "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "[2g.10gb|1g |1g |3g.20gb        ]" in out
    assert "capacity per node: nvidia.com/mig-1g.5gb 16, nvidia.com/mig-2g.10gb 8" in out
    text = svg.read_text()
    assert text.startswith("<svg") and "embedder" in text and "3g.20gb" in text


def test_pulumi_yaml_declares_the_config_contract() -> None:
    from mig_inference.spec import TOP_KEYS
    from tests.reference import ROOT

    text = (ROOT / "Pulumi.yaml").read_text()
    project = yaml.safe_load(text)
    assert project["name"] == "mig-inference" and project["stackConfigDir"] == "stacks"
    assert project["runtime"]["name"] == "python"
    assert project["config"]["cloud"]["type"] == "string"
    for key in TOP_KEYS:
        assert f"#   {key}" in text or key in project["config"], f"{key} is not declared"


@pytest.mark.parametrize("stack", stack_names())
def test_the_picture_shows_every_service_and_every_gpu(stack: str) -> None:
    import re
    import xml.etree.ElementTree as ET

    from mig_inference.plan import plan_stack
    from mig_inference.reports.picture import layouts_svg
    from mig_inference.spec.files import load_stack

    plan = plan_stack(load_stack(stack))
    texts = [
        e.text or "" for e in ET.fromstring(layouts_svg(plan)).iter() if e.tag.endswith("text")
    ]
    for service in plan.services:
        assert f"{service.name}: {service.replicas} replica(s) on pool {service.pool.name}" in texts
    for pool in plan.pools:
        counts = [re.match(rf"{pool.name}: (\d+) x ", text) for text in texts]
        shown = sum(int(found.group(1)) for found in counts if found is not None)
        assert shown == pool.max_nodes * pool.gpus_per_node
        titles = [text for found, text in zip(counts, texts, strict=True) if found is not None]
        assert all(("claimed through DRA" in title) == pool.dra for title in titles)
