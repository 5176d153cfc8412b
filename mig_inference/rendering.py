"""What the stack program registered when it ran under Pulumi's mocks: a `Rendering` holds its
resources with their options, components, outputs, data-source calls and logs. Plain data, no
Pulumi: the rollout simulator and `diff` read renderings, and get the `Renderer` that makes them
(`mig_inference.render.run_program`) passed in from above."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from msgspec import Struct, field


class Recorded(Struct):
    """One custom resource the program registered."""

    type: str
    name: str
    inputs: dict[str, Any]
    provider: str = ""
    """The provider reference (`<urn>::<id>`) the engine was given; empty for the default one."""

    @property
    def is_kubernetes_object(self) -> bool:
        return self.type.startswith("kubernetes:") and not self.type.startswith(
            "kubernetes:helm.sh/"
        )

    @property
    def is_helm_release(self) -> bool:
        return self.type == "kubernetes:helm.sh/v3:Release"

    @property
    def is_cloud(self) -> bool:
        return not self.type.startswith(("kubernetes:", "pulumi:"))


class Options(Struct, frozen=True):
    """Resource options of one resource, as the program set them."""

    type: str
    name: str
    parent_type: str | None
    parent: tuple[str, str] | None
    """(type, name) of the parent (None under the stack itself)."""
    protect: bool
    custom_timeouts: tuple[str | None, str | None] | None
    depends_on: tuple[str, ...]
    """Names of the resources in `dependsOn`."""
    dependencies: tuple[tuple[str, str], ...]
    """(type, name) of the resources in `dependsOn`."""
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool | None = None
    """The option as the program set it: None leaves the choice to the provider."""
    retain_on_delete: bool = False
    """Pulumi keeps the object in the cluster when it deletes the resource."""
    aliases_to_stack_root: int = 0
    """Aliases naming the stack itself as the resource's earlier parent."""


class Rendering(Struct):
    resources: list[Recorded] = field(default_factory=list)
    options: dict[tuple[str, str], Options] = field(default_factory=dict)
    components: list[tuple[str, str]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    secrets: list[str] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Data sources the program called (token, arguments)."""
    call_providers: list[str] = field(default_factory=list)
    """The provider reference of each call, in the order of `calls`."""
    reads: list[Recorded] = field(default_factory=list)
    """Live objects the program read (type, name, id as `inputs["id"]`)."""
    logs: list[str] = field(default_factory=list)
    """What the program logged (`pulumi.log`), as `<level>: <message>`."""

    def of_type(self, type_token: str) -> list[Recorded]:
        return [r for r in self.resources if r.type == type_token]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        return [manifest(r) for r in self.resources if r.is_kubernetes_object]


class Renderer(Protocol):
    """Runs the stack program of `stack` with the config of `stack_file` under Pulumi's mocks."""

    def __call__(self, stack: str, stack_file: Path) -> Rendering: ...


_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
"""Pulumi's wire-format envelope around a secret value (`pulumi.runtime.rpc`)."""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def plain_values(value: Any, secrets: list[str] | None = None) -> Any:
    """Plain values from Pulumi's wire format: whole-number doubles back to ints, and secret
    envelopes unwrapped (their strings added to `secrets`, to be redacted when written)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [plain_values(v, secrets) for v in value]
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            inner = plain_values(value.get("value"), secrets)
            if secrets is not None:
                secrets.extend(s for s in _strings(inner) if s not in secrets)
            return inner
        return {k: plain_values(v, secrets) for k, v in value.items()}
    return value


def manifest(resource: Recorded) -> dict[str, Any]:
    """A Kubernetes object from a recorded resource (NodePatch becomes a Node)."""
    obj = {k: plain_values(v) for k, v in resource.inputs.items() if v is not None}
    kind = resource.type.rsplit(":", 1)[-1]
    obj["kind"] = kind.removesuffix("Patch")
    return obj
