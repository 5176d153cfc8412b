"""`python -m mig render`: what the program would create, written to disk, secrets redacted."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from mig_inference.cli import main
from mig_inference.errors import MigError
from mig_inference.render import run_program
from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS

ROOT = Path(__file__).resolve().parent.parent.parent


def test_render_writes_objects_releases_and_cloud_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--stack", "gke-h100", "--out", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # The node pool, and the nodes' service account with its two role bindings.
    assert summary["files"]["helm"] == 1 and summary["files"]["cloud"] == 4
    objects = [
        yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "kubernetes").glob("*.yaml"))
    ]
    assert len(objects) == summary["files"]["kubernetes"] >= 10
    for obj in objects:
        if obj["apiVersion"].split("/")[0] not in CUSTOM_RESOURCE_GROUPS:
            kubernetes_validate.validate(obj, "1.33.0", strict=True)
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert set(secret["stringData"].values()) == {"<redacted>"}
    release = yaml.safe_load((tmp_path / "helm" / "gpu-operator.yaml").read_text())
    assert (release["chart"], release["version"]) == ("gpu-operator", "v26.7.0")
    assert release["repository"] == "https://helm.ngc.nvidia.com/nvidia"
    assert release["values"]["mig"] == {"strategy": "mixed"}
    [pool] = list((tmp_path / "cloud").glob("gcp_container_nodePool_NodePool.*.json"))
    assert json.loads(pool.read_text())["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    assert outputs["services"]["mistral-nemo"]["endpoint"] == (
        "http://mistral-nemo.inference.svc.cluster.local:8000"
    )


def test_render_redacts_the_kubeconfig_of_a_created_cluster(tmp_path: Path) -> None:
    assert main(["render", "--stack", "ephemeral-gke", "--out", str(tmp_path)]) == 0
    outputs = json.loads((tmp_path / "outputs.json").read_text())
    assert outputs["kubeconfig"] == "<redacted>"


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("stack", ["existing", "eks-p5-auto"])
def test_two_renders_are_byte_identical(tmp_path: Path, stack: str) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["render", "--stack", stack, "--out", str(first)]) == 0
    assert main(["render", "--stack", stack, "--out", str(second)]) == 0
    assert _tree(first) == _tree(second)
    names = [p.name for p in (first / "kubernetes").iterdir()]
    assert not any(name[:3].isdigit() for name in names)  # named by what, not by order
    # Both patches of one node, told apart by their program names.
    assert (
        "node.cluster.gpu-node-01.lab-h100-gpu-node-01-taints.yaml" in names or stack != "existing"
    )


def test_a_render_replaces_the_previous_one_and_only_that(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["render", "--stack", "gke-h100", "--out", str(out)]) == 0
    stale = out / "kubernetes" / "stale.yaml"
    stale.write_text("left over\n")
    assert main(["render", "--stack", "gke-h100", "--out", str(out)]) == 0
    assert not stale.exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me\n")
    capsys.readouterr()
    assert main(["render", "--stack", "gke-h100", "--out", str(foreign)]) == 1
    assert "is not empty and not a previous render" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "keep me\n"


def _config_maps(error: Exception | None, reference: bool) -> Callable[[], None]:
    def program() -> None:
        import pulumi_kubernetes as k8s

        first = k8s.core.v1.ConfigMap("probe", data={"key": "value"})
        if reference:  # the mocks read a resource passed as an input back in a worker's loop
            k8s.core.v1.ConfigMap("second", data={"first": first})  # type: ignore[dict-item]
        if error is not None:
            raise error

    return program


@pytest.mark.parametrize(
    ("error", "reference"),
    [(None, False), (MigError("refused"), False), (None, True), (MigError("refused"), True)],
    ids=["completes", "stops", "reference-completes", "reference-stops"],
)
def test_a_run_closes_every_event_loop_it_made(
    error: Exception | None, reference: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulumi's mock monitor makes an event loop in each executor thread it runs in and never
    closes it; one left open is closed at exit after its sockets, which prints a traceback (seen
    on `diff`'s error path in CI). `run_program` closes them and its own, after a program that
    completes and after one that stops with an error, also where a resource is an input (read
    back through a worker's loop and its executor); their threads have ended first."""
    made: list[asyncio.AbstractEventLoop] = []
    new_event_loop = asyncio.new_event_loop

    def recorded() -> asyncio.AbstractEventLoop:
        made.append(new_event_loop())
        return made[-1]

    monkeypatch.setattr(asyncio, "new_event_loop", recorded)
    threads = set(threading.enumerate())
    stack_file = ROOT / "stacks" / "Pulumi.existing.yaml"
    program = _config_maps(error, reference)
    if error is None:
        rendering = run_program("existing", stack_file, program=program)
        assert len(rendering.resources) == 1 + reference
    else:
        with pytest.raises(MigError, match="refused"):
            run_program("existing", stack_file, program=program)
    assert len(made) >= 2 + reference, "fewer loops than threads: the check proves nothing"
    assert [loop for loop in made if not loop.is_closed()] == []
    assert set(threading.enumerate()) <= threads, "an executor's thread outlived the run"
