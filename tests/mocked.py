"""Run the real Pulumi program under mocks, once per stack file (each run in a fresh loop)."""

from __future__ import annotations

import base64
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from mig_inference.render import run_program
from mig_inference.rendering import Recorded, Rendering
from mig_inference.spec.files import stack_path


@cache
def stack_rendering(stack: str) -> Rendering:
    rendering = run_program(stack, Path(stack_path(stack)))
    assert rendering.error is None, rendering.error
    return rendering


def render_config(tmp_path: Path, config: dict[str, Any], **secrets: str) -> Rendering:
    """Run the program on a stack file written from `config` (keys without the namespace)."""
    body = {f"mig-inference:{key}": value for key, value in config.items()}
    for key in secrets:
        body[f"mig-inference:{key}"] = {"secure": "v1:test"}
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": body}))
    return run_program("test", path, secret_values=secrets)


def release(rendering: Rendering, chart: str = "gpu-operator") -> Recorded:
    """The Helm release of `chart` the program created."""
    [found] = [
        r for r in rendering.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == chart
    ]
    return found


def plugin_configs(rendering: Rendering) -> dict[str, str]:
    """The device plugin's ConfigMap as the program leaves it: its base, then every patch."""
    name = release(rendering).inputs["values"]["devicePlugin"]["config"]["name"]
    data: dict[str, str] = {}
    for kind in ("kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:ConfigMapPatch"):
        for recorded in rendering.of_type(kind):
            if recorded.inputs["metadata"]["name"] == name:
                data.update(recorded.inputs["data"])
    return data


def one(rendering: Rendering, type_token: str) -> Recorded:
    found = rendering.of_type(type_token)
    assert len(found) == 1, f"{len(found)} x {type_token}"
    return found[0]


def named(rendering: Rendering, type_token: str, name: str) -> Recorded:
    return next(r for r in rendering.of_type(type_token) if r.name == name)


def b64(text: str) -> str:
    return base64.b64decode(text).decode()
