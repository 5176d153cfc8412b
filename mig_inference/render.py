"""Run the real Pulumi program under Pulumi's unit-test mocks and record what it would create.

It loads Pulumi and the components (only when called: `render`, `diff`, `bench` and the tests),
so it sits above them, beside the command line: the domain below gets `run_program` passed in as
a `Renderer` (`mig_inference.rendering`). No engine, no cloud, no cluster. Secrets are redacted
from everything written.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from mig_inference.clouds.capacity import Capacity
from mig_inference.errors import MigError
from mig_inference.offline_answers import (
    CAPACITY_BLOCK_LOOKUP,
    FAKE_BLOCK_END,
    offline_answer,
    offline_outputs,
)
from mig_inference.rendering import Options, Recorded, Rendering, manifest, plain_values
from mig_inference.spec.files import load_stack_file
from mig_inference.stackfile.pulumi_config import read_stack_config

PROJECT = "mig-inference"
REDACTED = "<redacted>"
DEFAULT_SECRET = "render-placeholder-secret-value"

ABSENT_EKS_ADDONS: set[str] = set()
"""EKS add-ons the offline lookup finds missing on a joined cluster (none, unless a test says)."""
EKS_GET_ADDON = "aws:eks/getAddon:getAddon"


def _capacity_blocks(stack_file: Path) -> dict[str, dict[str, Any]]:
    """How EC2 describes each Capacity Block the stack names, offline: in the first zone of
    the region, holding the pool's instance type and as many instances as it may grow to."""
    try:
        spec = load_stack_file(stack_file)
    except MigError:
        return {}
    zone = f"{spec.cluster.get('region') or 'us-east-1'}a"
    return {
        pool.reservation: {
            "availabilityZone": zone,
            "instanceType": pool.machine_type,
            "instanceCount": pool.nodes.max,
            "endDate": FAKE_BLOCK_END,
        }
        for pool in spec.pools
        if pool.capacity is Capacity.CAPACITY_BLOCK and pool.reservation
    }


def _dra_minor(stack_file: Path) -> int | None:
    """The Kubernetes minor a DRA stack's objects are written for; None for other stacks and for
    a stack file the program itself will refuse."""
    try:
        dra = load_stack_file(stack_file).dra
    except MigError:
        return None
    return dra.kubernetes_minor if dra is not None else None


def stack_config(
    stack_file: Path, secret_values: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str], list[str]]:
    """Pulumi config as the engine passes it to the program (see
    `mig_inference.stackfile.pulumi_config`); secret keys get `secret_values` or a placeholder.
    Returns (config, secret keys, secret values)."""
    engine = read_stack_config(stack_file)
    config = dict(engine.values)
    values: list[str] = []
    for key in sorted(engine.secret_keys):
        short = key.partition(":")[2]
        plain = (secret_values or {}).get(short, f"{DEFAULT_SECRET}-{short}")
        if key not in engine.nested_secrets:
            config[key] = plain
            values.append(plain)
    return config, sorted(engine.secret_keys), values


class _ListHandler(logging.Handler):
    def __init__(self, logs: list[str]) -> None:
        super().__init__()
        self.logs = logs

    def emit(self, record: logging.LogRecord) -> None:
        self.logs.append(f"{record.levelname.lower()}: {record.getMessage()}")


def _log_to(rendering: Rendering) -> logging.Logger:
    """A logger keeping the program's messages in the rendering instead of printing them."""
    logger = logging.getLogger(f"mig_inference.render.{id(rendering)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.handlers = [_ListHandler(rendering.logs)]
    return logger


def run_program(
    stack: str,
    stack_file: Path,
    secret_values: Mapping[str, str] | None = None,
    live: Mapping[tuple[str, str], dict[str, Any]] | None = None,
    program: Callable[[], None] | None = None,
) -> Rendering:
    """Run the stack program (or `program`) for `stack` under mocks, in a fresh event loop.
    `live` gives the state of objects the program reads from the cluster, by (type, id);
    unknown ones read as empty."""
    import pulumi
    from pulumi.runtime import config as runtime_config
    from pulumi.runtime import mocks, settings
    from pulumi.runtime.stack import Stack, run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    rendering = Rendering()
    config, secret_keys, secret_plain = stack_config(stack_file, secret_values)
    rendering.secrets = list(secret_plain)
    dra_minor = _dra_minor(stack_file)
    blocks = _capacity_blocks(stack_file)

    class Recorder(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
            if args.resource_id:  # a read of a live object, not something the program creates
                rendering.reads.append(Recorded(args.typ, args.name, {"id": args.resource_id}))
                return args.resource_id, dict((live or {}).get((args.typ, args.resource_id), {}))
            if not args.custom:
                rendering.components.append((args.typ, args.name))
                return "", {}
            inputs = plain_values(dict(args.inputs), rendering.secrets)
            rendering.resources.append(Recorded(args.typ, args.name, inputs, args.provider or ""))
            return f"{args.name}-id", offline_outputs(args.typ, args.inputs)

        def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
            rendering.calls.append((args.token, dict(args.args)))
            rendering.call_providers.append(args.provider or "")
            if args.token == EKS_GET_ADDON and args.args.get("addonName") in ABSENT_EKS_ADDONS:
                found = f"{args.args.get('clusterName')}:{args.args.get('addonName')}"
                return {}, [("addonName", f"reading EKS Add-On ({found}): couldn't find resource")]
            answer = offline_answer(args.token, args.args, dra_minor)
            if args.token == CAPACITY_BLOCK_LOOKUP:
                # The block the stack names holds its pool's instance type and size.
                answer.update(blocks.get(str(args.args.get("id")), {}))
            return answer, []

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    worker_loops: list[asyncio.AbstractEventLoop] = []
    executors: list[ThreadPoolExecutor] = []

    def executor_of_loops() -> ThreadPoolExecutor:
        executors.append(ThreadPoolExecutor(initializer=give_the_worker_a_loop))
        return executors[-1]

    def give_the_worker_a_loop() -> None:
        # Pulumi's mock monitor, called in an executor's threads, makes each thread an event
        # loop when it has none (sync_await._ensure_event_loop) and never closes it; one left at
        # exit is closed after its sockets, which prints a traceback. The run makes and closes
        # them, and their own executors' (a resource passed as an input is read back through
        # the worker's loop).
        worker = asyncio.new_event_loop()
        worker.set_default_executor(executor_of_loops())
        asyncio.set_event_loop(worker)
        worker_loops.append(worker)

    loop.set_default_executor(executor_of_loops())
    try:
        runtime_config.set_all_config(config, secret_keys)
        settings.reset_options(project=PROJECT, stack=stack)
        mocks.set_mocks(
            Recorder(), project=PROJECT, stack=stack, preview=False, logger=_log_to(rendering)
        )

        def record_options(
            args: pulumi.ResourceTransformationArgs,
        ) -> pulumi.ResourceTransformationResult | None:
            opts = args.opts
            parent = opts.parent if opts else None
            parent_type = None
            parent_key = None
            if parent is not None and not isinstance(parent, Stack):
                parent_type = getattr(parent, "_type", None) or type(parent).__name__
                parent_key = (parent_type, str(getattr(parent, "_name", "?")))
            timeouts = opts.custom_timeouts if opts else None
            depends = opts.depends_on if opts and isinstance(opts.depends_on, list) else []
            rendering.options[(args.type_, args.name)] = Options(
                type=args.type_,
                name=args.name,
                parent_type=parent_type,
                parent=parent_key,
                protect=bool(opts and opts.protect),
                custom_timeouts=(timeouts.create, timeouts.update) if timeouts else None,
                depends_on=tuple(getattr(d, "_name", "?") for d in depends),
                dependencies=tuple(
                    (str(getattr(d, "_type", "?")), str(getattr(d, "_name", "?"))) for d in depends
                ),
                ignore_changes=tuple(opts.ignore_changes or ()) if opts else (),
                replace_on_changes=tuple(opts.replace_on_changes or ()) if opts else (),
                delete_before_replace=opts.delete_before_replace if opts else None,
                retain_on_delete=bool(opts and opts.retain_on_delete),
                aliases_to_stack_root=len(
                    [
                        alias
                        for alias in ((opts.aliases or []) if opts else [])
                        if isinstance(alias, pulumi.Alias)
                        and alias.parent is pulumi.ROOT_STACK_RESOURCE
                    ]
                ),
            )
            return None

        pulumi.runtime.register_stack_transformation(record_options)

        def stack_program() -> None:
            # The package's own components (mig_inference/components/program.py).
            importlib.import_module("mig_inference.components.program").stack_program()

        try:
            _sync_await(run_pulumi_func(program or stack_program))
        except pulumi.RunError as error:
            rendering.error = str(error)
            return rendering
        root = settings.get_root_resource()
        exported = getattr(root, "outputs", {}) if root is not None else {}
        for name, value in exported.items():
            rendering.outputs[name] = _sync_await(pulumi.Output.from_input(value).future())
    finally:
        settings.reset_options()
        runtime_config.set_all_config({})
        while executors:  # without running the loop: a failed program's tasks stay
            executors.pop(0).shutdown(wait=True)
        for worker in worker_loops:
            worker.close()
        loop.close()
        asyncio.set_event_loop(None)
    return rendering


def redact(value: Any, secrets: list[str]) -> Any:
    """`value` with every secret string replaced, and Secret data blanked."""
    if isinstance(value, str):
        for secret in secrets:
            if secret and secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    return value


def _secret_blanked(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("kind") == "Secret":
        for key in ("stringData", "data"):
            if isinstance(obj.get(key), dict):
                obj[key] = dict.fromkeys(obj[key], REDACTED)
    return obj


RENDER_MARKER = ".mig-render"
"""Marks a directory `render` wrote, so a later render may replace it (and nothing else)."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def rendered_files(rendering: Rendering) -> dict[str, str]:
    """Relative path -> text of every file a rendering produces. Names come from what each
    object is (kind, namespace, name), never from creation order; YAML and JSON keys are
    sorted; secrets are redacted. Two renderings of one stack are byte-identical."""
    secrets = rendering.secrets
    files: dict[str, str] = {}
    kubernetes: list[tuple[str, Recorded, dict[str, Any]]] = []
    for resource in rendering.resources:
        if resource.is_kubernetes_object:
            obj = _secret_blanked(redact(manifest(resource), secrets))
            meta = obj.get("metadata") or {}
            base = ".".join(
                _slug(part)
                for part in (obj["kind"].lower(), meta.get("namespace") or "cluster",
                             meta.get("name") or resource.name)
            )  # fmt: skip
            kubernetes.append((base, resource, obj))
        elif resource.is_helm_release:
            inputs = redact(resource.inputs, secrets)
            release = {
                "chart": inputs.get("chart"),
                "version": inputs.get("version"),
                "repository": (inputs.get("repositoryOpts") or {}).get("repo"),
                "namespace": inputs.get("namespace"),
                "timeout": inputs.get("timeout"),
                "values": inputs.get("values"),
            }
            files[f"helm/{_slug(resource.name)}.yaml"] = yaml.safe_dump(release, sort_keys=True)
        elif resource.is_cloud:
            inputs = redact(resource.inputs, secrets)
            kind = _slug(resource.type.replace(":", "_").replace("/", "_"))
            files[f"cloud/{kind}.{_slug(resource.name)}.json"] = (
                json.dumps(inputs, indent=2, sort_keys=True, default=str) + "\n"
            )
    bases = [base for base, _, _ in kubernetes]
    for base, resource, obj in kubernetes:
        # Two objects of one name (a node patched twice): tell them apart by their program name.
        name = f"{base}.{_slug(resource.name)}" if bases.count(base) > 1 else base
        files[f"kubernetes/{name}.yaml"] = yaml.safe_dump(obj, sort_keys=True)
    outputs = redact(rendering.outputs, secrets)
    if "kubeconfig" in outputs:
        outputs["kubeconfig"] = REDACTED
    files["outputs.json"] = json.dumps(outputs, indent=2, sort_keys=True, default=str) + "\n"
    return dict(sorted(files.items()))


def write_rendering(rendering: Rendering, out: Path) -> list[Path]:
    """Replace `out` with the rendering's files; returns them. `out` must be absent, empty, or
    a previous render: the new tree is written beside it and swapped in, so no stale file of an
    older render survives and a failed write leaves the old one whole."""
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / RENDER_MARKER).exists())
    ):
        raise MigError(
            "is not empty and not a previous render; give an empty or new directory",
            str(out),
        )
    try:
        return _replace_tree(rendering, out)
    except OSError as error:
        raise MigError(f"cannot write the render: {error.strerror or error}", str(out)) from None


def _replace_tree(rendering: Rendering, out: Path) -> list[Path]:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for relative, text in rendered_files(rendering).items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (staging / RENDER_MARKER).write_text("written by `python -m mig render`\n")
        staging.chmod(0o755)  # mkdtemp makes it private; a render is an ordinary directory
        if out.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            out.rename(retired / out.name)
            try:
                staging.rename(out)
            except OSError:
                (retired / out.name).rename(out)  # put the previous render back whole
                raise
            shutil.rmtree(retired)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return sorted(p for p in out.rglob("*") if p.is_file() and p.name != RENDER_MARKER)
