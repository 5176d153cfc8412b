"""Limits count what the project adds itself: the tag (label on GKE) a stack with
`cluster.protect: false` puts on its GPU pools, and the node-template tags an autoscaled EKS
pool's Auto Scaling group carries. A property test renders accepted stack files under mocks and
checks every tag and label map the clouds get against their limits."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mig_inference.render import run_program
from mig_inference.spec import formats
from tests.spec.test_api_formats import EKS, run_plan
from tests.spec.test_stack_properties import STACKS, check_plan

GKE: dict[str, Any] = {
    "cloud": "gke",
    "cluster": {"name": "c", "project": "my-gcp-project", "location": "us-central1-a"},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1,
               "mig": "all-3g.40gb", "maxPods": 64}],
}  # fmt: skip


def unprotected(values: dict[str, Any], protect: bool = False) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    changed["cluster"]["protect"] = protect
    return changed


@pytest.mark.parametrize(
    ("base", "key", "most"),
    [(EKS, "tags", formats.AWS_TAGS_MAX), (GKE, "labels", formats.GCP_LABELS_MAX)],
)
def test_the_projects_own_tag_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: dict[str, Any], key: str, most: int
) -> None:
    full = {f"t{i}": "v" for i in range(most)}
    code, errors = run_plan(tmp_path, capsys, {**unprotected(base), key: full})
    assert code == 1 and list(errors) == [f"mig-inference:{key}"], errors
    assert "the project adds mig-inference-unprotected" in errors[f"mig-inference:{key}"]
    code, errors = run_plan(tmp_path, capsys, {**unprotected(base, protect=True), key: full})
    assert code == 0, errors
    one_less = {f"t{i}": "v" for i in range(most - 1)}
    code, errors = run_plan(tmp_path, capsys, {**unprotected(base), key: one_less})
    assert code == 0, errors


AUTOSCALED = copy.deepcopy(EKS)
AUTOSCALED["pools"][0]["nodes"] = {"min": 0, "max": 2}


def test_node_template_tag_keys_fit_auto_scaling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """EKS holds node group label and taint keys to 63 characters (spec/pools.py), so the
    longest node-template tag key is 46 + 63 = 109, within EC2 Auto Scaling's 128: the key that
    would make one longer is refused for EKS's own limit, autoscaled or not."""
    prefix = "k8s.io/cluster-autoscaler/node-template/label/"
    assert len(prefix) + formats.EKS_NODE_LABEL_KEY_MAX <= formats.AUTOSCALING_TAG_KEY_MAX
    room = formats.AUTOSCALING_TAG_KEY_MAX - len(prefix)
    too_long = "a" * 30 + "/" + "b" * (room - 30)
    for base in (AUTOSCALED, EKS):
        values = copy.deepcopy(base)
        values["pools"][0]["labels"] = {too_long: "v"}
        values["pools"][0]["taints"] = [{"key": too_long, "value": "v", "effect": "NoSchedule"}]
        code, errors = run_plan(tmp_path, capsys, values)
        assert code == 1
        assert set(errors) == {
            f"mig-inference:pools[0].labels.{too_long}",
            "mig-inference:pools[0].taints[0].key",
        }, errors
        assert "at most 63" in errors[f"mig-inference:pools[0].labels.{too_long}"]


def test_node_template_tags_count_in_the_auto_scaling_groups_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = copy.deepcopy(AUTOSCALED)
    values["pools"][0]["labels"] = {f"team.example.com/l{i}": "v" for i in range(40)}
    code, errors = run_plan(tmp_path, capsys, values)
    assert code == 1 and list(errors) == ["mig-inference:pools[0].labels"], errors
    assert "EC2 Auto Scaling takes at most 50" in errors["mig-inference:pools[0].labels"]


# Rendered: every tag and label map a cloud resource gets, within the cloud's limits.
TAGGED = {
    "aws": (formats.AWS_TAGS_MAX, formats.AWS_TAG_KEY, formats.AWS_TAG_VALUE),
    "gcp": (formats.GCP_LABELS_MAX, formats.GCP_LABEL_KEY, formats.GCP_LABEL_VALUE),
}


def _maps(value: Any, field: str) -> list[dict[str, Any]]:
    """Every mapping held under `field` in `value`, at any depth."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == field and isinstance(item, dict):
                found.append(item)
            found += _maps(item, field)
    elif isinstance(value, list):
        for item in value:
            found += _maps(item, field)
    return found


def cloud_tag_maps(resource_type: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The tag maps (labels on Google Cloud) of a resource's inputs; a GKE node pool's
    `nodeConfig.labels` are Kubernetes labels, not Google Cloud's."""
    cloud = resource_type.split(":")[0]
    if cloud == "aws":
        return _maps(inputs, "tags")
    if cloud == "gcp":
        own = [inputs["labels"]] if isinstance(inputs.get("labels"), dict) else []
        if resource_type.startswith("gcp:container/"):
            own = []
        return own + _maps(inputs, "resourceLabels")
    return []


@st.composite
def tagged_stacks(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from([n for n in sorted(STACKS) if n.startswith(("eks", "gke"))]))
    values = copy.deepcopy(STACKS[name][0])
    values["cluster"]["protect"] = draw(st.booleans())
    key, most = ("tags", formats.AWS_TAGS_MAX) if name.startswith("eks") else (
        "labels", formats.GCP_LABELS_MAX)  # fmt: skip
    count = draw(st.integers(most - 2, most + 1))
    values[key] = {f"k{i}": "v" for i in range(count)}
    if name.startswith("eks") and draw(st.booleans()):
        values["pools"][0]["nodes"] = {"min": 0, "max": 2}
        labels = draw(st.integers(0, 45))
        values["pools"][0]["labels"] = {f"l{i}.example.com/x": "v" for i in range(labels)}
    return values


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=tagged_stacks())
def test_rendered_tags_and_labels_are_within_the_clouds_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], values: dict[str, Any]
) -> None:
    secrets = STACKS["gke-h100"][1] | STACKS["eks-p4d"][1]
    path = tmp_path / "Pulumi.prop.yaml"
    body = {f"mig-inference:{k}": v for k, v in values.items()}
    body.update({f"mig-inference:{k}": {"secure": "v1:test"} for k in secrets})
    path.write_text(yaml.safe_dump({"config": body}))
    assume(check_plan(path, capsys) == 0)
    rendering = run_program("prop", path)
    assert rendering.error is None, rendering.error
    template_tags: dict[str, int] = {}
    for resource in rendering.resources:
        if resource.type == "aws:autoscaling/tag:Tag":
            key = resource.inputs["tag"]["key"]
            assert len(key) <= formats.AUTOSCALING_TAG_KEY_MAX, key
            group = str(resource.inputs["autoscalingGroupName"])
            template_tags[group] = template_tags.get(group, 0) + 1
        cloud = resource.type.split(":")[0]
        if cloud not in TAGGED or not resource.is_cloud:
            continue
        most, key_format, value_format = TAGGED[cloud]
        for tags in cloud_tag_maps(resource.type, resource.inputs):
            assert len(tags) <= most, (resource.type, resource.name, len(tags))
            for key, value in tags.items():
                assert key_format.problem(key) is None, (resource.type, key)
                assert value_format.problem(str(value)) is None, (resource.type, value)
    for count in template_tags.values():
        assert count + formats.EKS_AUTOSCALING_GROUP_TAGS <= formats.AUTOSCALING_TAGS_MAX
