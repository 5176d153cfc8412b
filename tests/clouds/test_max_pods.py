"""The max pods the plan checks is the one the kubelet gets.

EKS: the rendered launch template's user data is run through a model of nodeadm's config chain,
as awslabs/amazon-eks-ami at 81fec2e8 reads it: every `application/node.eks.aws` part of the
user data in document order, then the NodeConfig EKS appends to a managed node group's user data
(which sets `maxPods`), then the files of `/etc/eks/nodeadm.d/` in name order (written here by
cloud-init before `nodeadm-run.service` starts), each merged over the last (mergo
`WithOverride`)."""

from __future__ import annotations

import email
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.clouds.bootstrap import NODEADM_DROP_IN
from mig_inference.plan import plan_stack
from mig_inference.spec.files import load_stack
from tests.mocked import b64, one, render_config, stack_rendering
from tests.rollout.test_rollout import stack

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODEADM_DIRECTORY = "/etc/eks/nodeadm.d/"
EKS_APPENDED = {
    "apiVersion": "node.eks.aws/v1alpha1",
    "kind": "NodeConfig",
    "spec": {
        "cluster": {"name": "c", "apiServerEndpoint": "https://example", "cidr": "10.100.0.0/16"},
        "kubelet": {"config": {"maxPods": 250, "clusterDNS": ["10.100.0.10"]}},
    },
}
"""What EKS appends for a managed node group: its own cluster details and a `maxPods` of its
choosing (eksctl-io/eksctl#8037); 250, EKS's cap, stands for any value other than the plan's."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _parts(user_data: str) -> list[Message]:
    message = email.message_from_string(b64(user_data))
    assert message.is_multipart()
    return [part for part in message.walk() if not part.is_multipart()]


def _drop_ins(parts: list[Message]) -> dict[str, str]:
    """Files cloud-init writes under nodeadm's drop-in directory (cloud-config `write_files`)."""
    files: dict[str, str] = {}
    for part in parts:
        if part.get_content_type() != "text/cloud-config":
            continue
        text = str(part.get_payload())
        assert text.startswith("#cloud-config\n")
        for item in yaml.safe_load(text)["write_files"]:
            if item["path"].startswith(NODEADM_DIRECTORY):
                files[item["path"]] = item["content"]
    return files


def kubelet_max_pods(user_data: str) -> int:
    parts = _parts(user_data)
    configs = [
        yaml.safe_load(str(part.get_payload()))
        for part in parts
        if part.get_content_type() == "application/node.eks.aws"
    ]
    configs.append(EKS_APPENDED)
    drop_ins = _drop_ins(parts)
    configs.extend(
        yaml.safe_load(drop_ins[path])
        for path in sorted(drop_ins)
        if path.endswith((".yaml", ".yml", ".json"))
    )
    merged: dict[str, Any] = {}
    for config in configs:
        assert config["apiVersion"] == "node.eks.aws/v1alpha1" and config["kind"] == "NodeConfig"
        merged = _merge(merged, config)
    return int(merged["spec"]["kubelet"]["config"]["maxPods"])


@pytest.mark.parametrize("name", ["eks-p4d", "eks-p5-auto", "eks-p5-from-zero"])
def test_the_kubelet_gets_the_planned_max_pods_over_eks_own(name: str) -> None:
    plan = plan_stack(load_stack(name))
    template = one(stack_rendering(name), LAUNCH_TEMPLATE).inputs
    assert kubelet_max_pods(template["userData"]) == plan.pools[0].max_pods
    assert plan.pools[0].max_pods != EKS_APPENDED["spec"]["kubelet"]["config"]["maxPods"]  # type: ignore[index]


def test_a_changed_max_pods_reaches_both_parts(tmp_path: Path) -> None:
    rendering = render_config(tmp_path, stack("eks", maxPods=77))
    parts = _parts(one(rendering, LAUNCH_TEMPLATE).inputs["userData"])
    node_config = yaml.safe_load(str(parts[0].get_payload()))
    assert node_config["spec"]["kubelet"]["config"]["maxPods"] == 77
    [(path, content)] = _drop_ins(parts).items()
    assert path == NODEADM_DROP_IN and yaml.safe_load(content) == node_config
    assert all(part["Content-Transfer-Encoding"] == "7bit" for part in parts)
