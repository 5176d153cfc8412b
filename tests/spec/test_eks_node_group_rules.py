"""What EKS's node group API refuses of labels and taints that Kubernetes takes: keys (prefix
included) and values of 1-63 characters, and at most 50 taints (spec/formats.py, with the
EKS API reference). On GKE and OKE the same labels are Kubernetes', and accepted."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from mig_inference.spec import formats
from tests.spec.test_api_formats import EKS, run_plan
from tests.spec.test_project_tags import GKE

LONG_KEY = "team.example.com/" + "k" * 47
"""64 characters: a valid Kubernetes label key, one more than EKS takes."""


def with_pool(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    values = copy.deepcopy(base)
    values["pools"][0].update(changes)
    return values


def test_label_keys_and_values_eks_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fits = "team.example.com/" + "k" * 46
    labels = {LONG_KEY: "v", fits: "v", "empty.example.com/x": "", "long.example.com/x": "v" * 63}
    code, errors = run_plan(tmp_path, capsys, with_pool(EKS, labels=labels))
    assert code == 1
    assert set(errors) == {f"mig-inference:pools[0].labels.{LONG_KEY}",
                           "mig-inference:pools[0].labels.empty.example.com/x"}, errors  # fmt: skip
    assert "at most 63, prefix included" in errors[f"mig-inference:pools[0].labels.{LONG_KEY}"]
    gke = with_pool(GKE, labels={LONG_KEY: "v", "empty.example.com/x": ""})
    gke["services"] = EKS["services"]
    code, errors = run_plan(tmp_path, capsys, gke)
    assert code == 0, errors


def test_taints_eks_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taints = [{"key": LONG_KEY, "value": "v", "effect": "NoSchedule"},
              {"key": "ok.example.com/x", "value": "v" * 63, "effect": "NoSchedule"}]  # fmt: skip
    code, errors = run_plan(tmp_path, capsys, with_pool(EKS, taints=taints))
    assert code == 1 and list(errors) == ["mig-inference:pools[0].taints[0].key"], errors
    most = formats.EKS_TAINTS_MAX
    many = [{"key": f"t{i}.example.com/x", "effect": "NoSchedule"} for i in range(most + 1)]
    code, errors = run_plan(tmp_path, capsys, with_pool(EKS, taints=many))
    assert code == 1 and list(errors) == ["mig-inference:pools[0].taints"], errors
    assert f"at most {most} per node group" in errors["mig-inference:pools[0].taints"]
    code, errors = run_plan(tmp_path, capsys, with_pool(EKS, taints=many[:most]))
    assert code == 0, errors
