"""Every string field the program sends to a cloud API, and every Kubernetes object's name,
labels and annotations, has a format rule in the registry (mig_inference/spec/api_fields.py) or
a reason there why it needs none; and every rendered value keeps its rule. The program is
rendered under the project's mocks for every shipped stack and for stacks that reach the
optional keys (cache storage kinds, capacity kinds, created clusters, DRA, verify, gateway,
tags) and for names at their longest."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.cli import main
from mig_inference.render import run_program
from mig_inference.rendering import Rendering
from mig_inference.spec import api_fields, formats
from mig_inference.spec.files import stack_names
from mig_inference.spec.formats import Format
from tests.mocked import stack_rendering
from tests.stack_mutations import shipped

Values = dict[str, Any]


def _cluster(**changes: Any) -> Callable[[Values], None]:
    def change(values: Values) -> None:
        values["cluster"].update(changes)
        if changes.get("create") and "clusterId" in values["cluster"]:
            del values["cluster"]["clusterId"]

    return change


def _pool(**changes: Any) -> Callable[[Values], None]:
    def change(values: Values) -> None:
        values["pools"][0].update(changes)

    return change


def _top(**changes: Any) -> Callable[[Values], None]:
    return lambda values: values.update(copy.deepcopy(changes))


LONGEST_POOL = "p" + "0" * 31
"""A pool name of the spec's longest (POOL_NAME_MAX); services and clusters get 40."""
LONGEST = "s" + "0" * 39
VARIANTS: dict[str, tuple[str, list[Callable[[Values], None]]]] = {
    "eks-created": ("eks-p5-from-zero", [
        _cluster(create=True, vpcId="vpc-0a1b2c3d", version="1.33",
                 publicAccessCidrs=["198.51.100.0/24"],
                 permissionsBoundary="arn:aws:iam::123456789012:policy/boundary"),
        _top(tags={"team": "ml"}, modelCache={"storage": "s3-mountpoint", "bucket": "my-models"},
             verify={"enabled": True})]),
    "eks-capacity-block": ("eks-b300", [
        _pool(capacity="capacity-block", reservation="cr-0a1b2c3d4e5f60718"),
        _top(modelCache={"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]})]),
    "eks-spot-labels": ("eks-p4d", [
        _pool(capacity="spot", name=LONGEST_POOL,
              labels={"example.com/team": "ml", "b" * 63: "v" * 63},
              taints=[{"key": "example.com/t", "value": "v" * 63, "effect": "NoSchedule"}]),
        _top(tags={"k" * 128: "v" * 256})]),
    "gke-created": ("ephemeral-gke", [
        _cluster(nodeServiceAccount="gpu-nodes@my-gcp-project.iam.gserviceaccount.com"),
        _top(labels={"team": "ml"}, modelCache={"storage": "gcs-fuse", "bucket": "my-models"})]),
    "gke-owned-bucket": ("gke-h100", [_top(labels={"team": "ml"},
                                           modelCache={"storage": "gcs-fuse"})]),
    "oke-spot-vm": ("oke-h100", [
        _pool(gpu="A10", machineType="VM.GPU.A10.1", capacity="spot", mig=None),
        lambda values: values["pools"][0].pop("mig")]),
    "gke-reservation": ("gke-h100", [
        _pool(spot=False, capacity="reservation", reservation="h100-reservation",
              name=LONGEST_POOL),
        _top(labels={"k" * 63: "v" * 63})]),
    "gke-flex-start": ("gke-h100", [_pool(spot=False, capacity="flex-start",
                                          nodes={"min": 1, "max": 2})]),
    "gke-longest-names": ("gke-l4-timeshare", [
        _cluster(name=LONGEST), _pool(name=LONGEST_POOL),
        lambda values: values["services"][0].update(name=LONGEST)]),
    "eks-longest-names": ("eks-p4d", [
        _cluster(name=LONGEST), lambda values: values["services"][0].update(name=LONGEST)]),
    "gke-dra-created": ("gke-h100-dra", [
        _cluster(create=True, network="vpc", subnetwork="sub",
                 authorizedNetworks=["203.0.113.0/24"])]),
    "oke-created": ("oke-h100", [
        _cluster(create=True, vcnId="ocid1.vcn.oc1.us-chicago-1.aaaa",
                 endpointSubnetId="ocid1.subnet.oc1.us-chicago-1.aaaa",
                 systemImageId="ocid1.image.oc1.us-chicago-1.aaaa"),
        _pool(nodes={"min": 1, "max": 3}, name=LONGEST_POOL),
        _top(tags={"team": "ml"}, definedTags={"Operations.CostCenter": "42"},
             modelCache={"storage": "file-storage",
                         "mountTargetSubnetId": "ocid1.subnet.oc1.us-chicago-1.aaaa"})]),
    "existing-cache": ("existing", [
        _top(modelCache={"storage": "storage-class", "storageClass": "nfs-rwx"},
             verify={"enabled": True})]),
}  # fmt: skip
"""Stacks reaching what the shipped ones leave out, each a shipped stack with changes."""


def variant_values(name: str) -> tuple[Values, frozenset[str]]:
    stack, changes = VARIANTS[name]
    values, secrets = shipped(stack)
    for change in changes:
        change(values)
    return values, secrets


def _stack_file(directory: Path, name: str, values: Values, secrets: frozenset[str]) -> Path:
    body = {f"mig-inference:{key}": value for key, value in values.items()}
    body.update({f"mig-inference:{key}": {"secure": "v1:test"} for key in secrets})
    path = directory / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": body}))
    return path


def _plan(
    directory: Path, capsys: pytest.CaptureFixture[str], values: Values, secrets: frozenset[str]
) -> tuple[int, dict[str, str]]:
    code = main(["plan", "--stack-file", str(_stack_file(directory, "t", values, secrets)),
                 "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    return code, {error["key"]: error["message"] for error in out.get("errors", [])}


@cache
def variant_rendering(name: str, directory: Path) -> Rendering:
    values, secrets = variant_values(name)
    rendering = run_program(name, _stack_file(directory, name, values, secrets))
    assert rendering.error is None, (name, rendering.error)
    return rendering


@pytest.fixture(scope="module")
def renderings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Rendering]:
    directory = tmp_path_factory.mktemp("variants")
    found = {stack: stack_rendering(stack) for stack in stack_names()}
    found.update({name: variant_rendering(name, directory) for name in VARIANTS})
    return found


Field = tuple[str, str, str]
"""(resource type, field path, rendered value)."""


def _map_paths(type_token: str) -> set[str]:
    paths = {
        *api_fields.FIELD_RULES.get(type_token, {}),
        *api_fields.WITHOUT_RULE.get(type_token, {}),
    }
    return {path.removesuffix(".<key>") for path in paths if path.endswith(".<key>")}


def _strings(value: Any, path: str, maps: set[str]) -> Iterator[tuple[str, str]]:
    def joined(name: str) -> str:
        return f"{path}.{name}" if path else name

    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, f"{path}[]", maps)
    elif isinstance(value, dict):
        for key, item in value.items():
            if path in maps:
                yield joined("<key>"), key
                yield from _strings(item, joined("<value>"), maps)
            else:
                yield from _strings(item, joined(key), maps)


def _metadata(value: Any, whose: str = "object") -> Iterator[tuple[str, Any]]:
    """The `metadata` of a Kubernetes object and of every pod template in it, with whose it
    is (`object` or `template`)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "metadata" and isinstance(item, dict) and whose:
                yield whose, item
            else:
                yield from _metadata(item, "template" if key == "template" else "")
    elif isinstance(value, list):
        for item in value:
            yield from _metadata(item, "")


def rendered_fields(rendering: Rendering) -> Iterator[Field]:
    for resource in rendering.resources:
        if resource.is_cloud:
            maps = _map_paths(resource.type)
            for path, value in _strings(resource.inputs, "", maps):
                yield resource.type, path, value
        elif resource.is_helm_release:
            for key in api_fields.HELM_RELEASE_FIELDS:
                yield resource.type, key, str(resource.inputs.get(key))
        elif resource.is_kubernetes_object:
            kind = resource.type.rsplit(":", 1)[-1].removesuffix("Patch")
            for whose, metadata in _metadata(resource.inputs):
                for path, value in _strings(metadata, "", {"labels", "annotations"}):
                    if path == "name" and whose == "object":
                        yield f"kubernetes:{kind}", "name", value
                    elif not path.startswith("annotations.<value>"):
                        yield "kubernetes", path, value


def rule_of(type_token: str, path: str) -> Format | str | None:
    """The field's rule, the reason it needs none, or None when it has neither."""
    if type_token == api_fields.HELM_RELEASE:
        return api_fields.HELM_RELEASE_FIELDS.get(path)
    if type_token.startswith("kubernetes:") and path == "name":
        return api_fields.kubernetes_name(type_token.removeprefix("kubernetes:"))
    if type_token == "kubernetes":
        return api_fields.KUBERNETES_METADATA.get(path)
    rule = api_fields.FIELD_RULES.get(type_token, {}).get(path)
    return rule if rule is not None else api_fields.WITHOUT_RULE.get(type_token, {}).get(path)


def unruled(renderings: dict[str, Rendering]) -> set[tuple[str, str]]:
    return {
        (type_token, path)
        for rendering in renderings.values()
        for type_token, path, _value in rendered_fields(rendering)
        if rule_of(type_token, path) is None
    }


def test_every_rendered_field_has_a_rule_or_a_reason(renderings: dict[str, Rendering]) -> None:
    assert unruled(renderings) == set()


def test_every_rendered_value_keeps_its_rule(renderings: dict[str, Rendering]) -> None:
    broken = []
    for stack, rendering in renderings.items():
        for type_token, path, value in rendered_fields(rendering):
            rule = rule_of(type_token, path)
            if isinstance(rule, Format) and (problem := rule.problem(value)) is not None:
                broken.append((stack, type_token, path, problem))
    assert broken == []


def test_every_entry_of_the_registry_is_rendered(renderings: dict[str, Rendering]) -> None:
    """No rule or reason for a field the program does not send (a stale entry hides nothing,
    but says something untrue)."""
    seen = {
        (t, path) for rendering in renderings.values() for t, path, _v in rendered_fields(rendering)
    }
    listed = {(t, path) for table in (api_fields.FIELD_RULES, api_fields.WITHOUT_RULE)
              for t, fields in table.items() for path in fields}  # fmt: skip
    assert listed - seen == set()


def test_annotations_fit_their_total(renderings: dict[str, Rendering]) -> None:
    for rendering in renderings.values():
        for resource in rendering.resources:
            for _whose, metadata in _metadata(resource.inputs):
                annotations = metadata.get("annotations") or {}
                size = sum(len(str(k).encode()) + len(str(v).encode())
                           for k, v in annotations.items())  # fmt: skip
                assert size <= formats.ANNOTATIONS_TOTAL_BYTES, resource.name


def test_the_variants_reach_the_optional_resources(renderings: dict[str, Rendering]) -> None:
    types = {r.type for rendering in renderings.values() for r in rendering.resources}
    assert {"aws:eks/cluster:Cluster", "aws:eks/addon:Addon", "gcp:container/cluster:Cluster",
            "oci:ContainerEngine/cluster:Cluster", "oci:Identity/policy:Policy",
            "gcp:storage/bucketIAMMember:BucketIAMMember"} <= types  # fmt: skip


@pytest.mark.parametrize(
    ("type_token", "path"),
    [
        (api_fields.EKS_NODE_GROUP, "nodeGroupName"),
        (api_fields.EKS_NODE_GROUP, "labels.<value>"),
        (api_fields.GKE_NODE_POOL, "name"),
        ("aws:ec2/launchTemplate:LaunchTemplate", "userData"),
    ],
)
def test_a_field_whose_rule_is_removed_is_found(
    renderings: dict[str, Rendering], monkeypatch: pytest.MonkeyPatch, type_token: str, path: str
) -> None:
    rules = {**api_fields.FIELD_RULES[type_token]}
    del rules[path]
    monkeypatch.setitem(api_fields.FIELD_RULES, type_token, rules)
    assert (type_token, path) in unruled(renderings)


@pytest.mark.parametrize(
    ("stack", "key", "accepted_elsewhere"),
    [
        ("gke-l4-timeshare", "cluster.name", ("eks-p4d", "oke-h100")),
        ("gke-l4-timeshare", "pools[0].name", ("eks-p4d", "oke-h100")),
        ("gke-l4-timeshare", "services[0].name", ()),
        ("eks-p4d", "services[0].name", ()),
    ],
)
def test_names_the_apis_refuse_to_start_with_a_digit(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stack: str,
    key: str,
    accepted_elsewhere: tuple[str, ...],
) -> None:
    """GKE cluster and node pool names start with a letter (the walk above found both rendered
    with a digit first), and so do Kubernetes Service names (DNS-1035) on every cloud."""
    for name, refused in ((stack, True), *((other, False) for other in accepted_elsewhere)):
        values, secrets = shipped(name)
        _set(values, key, "0" * 8)
        code, errors = _plan(tmp_path, capsys, values, secrets)
        if refused:
            assert code == 1 and list(errors) == [f"mig-inference:{key}"], errors
            assert "must start with a letter" in errors[f"mig-inference:{key}"]
        else:
            assert f"mig-inference:{key}" not in errors, (name, errors)


def _set(values: Values, key: str, value: Any) -> None:
    *parents, last = key.replace("[", ".").replace("]", "").split(".")
    target: Any = values
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
