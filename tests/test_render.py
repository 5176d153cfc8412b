"""`python -m mig render`: what the program would create, written to disk, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from mig.cli import main


def test_render_writes_objects_releases_and_cloud_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--stack", "gke-h100", "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["files"]["helm"] == 1 and summary["files"]["cloud"] == 1
    objects = [
        yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "kubernetes").glob("*.yaml"))
    ]
    assert len(objects) == summary["files"]["kubernetes"] >= 10
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33.0", strict=True)
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert set(secret["stringData"].values()) == {"<redacted>"}
    release = yaml.safe_load((tmp_path / "helm" / "gpu-operator.yaml").read_text())
    assert (release["chart"], release["version"]) == ("gpu-operator", "v26.7.0")
    assert release["repository"] == "https://helm.ngc.nvidia.com/nvidia"
    assert release["values"]["mig"] == {"strategy": "mixed"}
    [pool] = list((tmp_path / "cloud").glob("*.json"))
    assert json.loads(pool.read_text())["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    assert outputs["services"]["mistral-nemo"]["endpoint"] == (
        "http://mistral-nemo.inference.svc.cluster.local:8000"
    )


def test_render_redacts_the_kubeconfig_of_a_created_cluster(tmp_path: Path) -> None:
    assert main(["render", "--stack", "ephemeral-gke", "--out", str(tmp_path)]) == 0
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    assert outputs["kubeconfig"] == "<redacted>"
