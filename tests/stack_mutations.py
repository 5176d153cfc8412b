"""A deterministic corpus of broken stack files: every shipped stack, with each of its key paths
deleted, given a value of every other type, nested past the reader's bound, duplicated, or
made huge; and every shipped stack with a namespace created twice or existing already, or a
cluster version its cloud did not offer (cross_key_corpus). `python -m tests.stack_mutations`
runs all of it through `plan` and counts the outcomes; tests/cli/test_stack_mutations.py runs a
fixed sample of the first and all of the second."""

from __future__ import annotations

import copy
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from mig_inference.spec.files import stack_names, stack_path
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from mig_inference.stackfile.yamlfile import MAX_DEPTH

MARK = "__mutated__"
RETYPED: dict[str, str] = {
    "null": "null",
    "true": "true",
    "zero": "0",
    "negative": "-1",
    "fraction": "1.5",
    "huge-number": str(2**70),
    "word": "x",
    "empty-string": '""',
    "empty-list": "[]",
    "empty-mapping": "{}",
    "list": "[x]",
    "mapping": "{k: v}",
}
"""Every kind of value, as YAML flow text."""
KINDS = ("delete", *RETYPED, "deepen-lists", "deepen-mappings", "duplicate", "huge-string",
         "huge-list")  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    stack: str
    path: tuple[str | int, ...]
    kind: str

    @property
    def name(self) -> str:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.path)
        return f"{self.stack}:{where.removeprefix('.')}:{self.kind}"


@cache
def _shipped(stack: str) -> tuple[dict[str, Any], frozenset[str]]:
    engine = read_stack_config(stack_path(stack))
    return project_values(engine.values, engine.secret_keys.__contains__)


def shipped(stack: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The values of a shipped stack (a copy to change) and its secret keys."""
    values, secrets = _shipped(stack)
    return copy.deepcopy(values), secrets


def key_paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += key_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += key_paths(item, (*path, index))
    return found


def corpus() -> Iterator[Mutation]:
    for stack in stack_names():
        values, _secrets = shipped(stack)
        for path in key_paths(values):
            for kind in KINDS:
                yield Mutation(stack, path, kind)


def _flow(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def mutated_text(mutation: Mutation) -> str | None:
    """The stack file of `mutation`, or None when the kind does not apply at its path."""
    values, secrets = shipped(mutation.stack)
    parent: Any = values
    for part in mutation.path[:-1]:
        parent = parent[part]
    last = mutation.path[-1]
    original = parent[last]
    kind = mutation.kind
    replacement: str
    if kind == "delete":
        if not isinstance(parent, dict):
            return None
        del parent[last]
        replacement = ""
    elif kind in RETYPED:
        replacement = RETYPED[kind]
    elif kind == "deepen-lists":
        replacement = "[" * (MAX_DEPTH + 50) + _flow(original) + "]" * (MAX_DEPTH + 50)
    elif kind == "deepen-mappings":
        replacement = "{k: " * MAX_DEPTH + _flow(original) + "}" * MAX_DEPTH
    elif kind == "huge-string":
        replacement = "x" * 100_000
    elif kind == "huge-list":
        replacement = "[" + ", ".join([_flow(original)] * 10_000) + "]"
    else:  # duplicate: a list item twice, or a mapping key given twice
        if isinstance(parent, list):
            parent.append(original)
            replacement = ""
        else:
            replacement = "DUPLICATE"
    if replacement:
        parent[last] = MARK
    body = {"config": {f"mig-inference:{key}": value for key, value in values.items()}}
    body["config"].update({f"mig-inference:{key}": {"secure": "v1:test"} for key in secrets})
    text = yaml.safe_dump(body, width=10**9, allow_unicode=True)
    if replacement == "DUPLICATE":
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if MARK in line)
        line = lines[at].replace(MARK, _flow(original))
        indent = line[: len(line) - len(line.lstrip(" -"))]
        lines[at : at + 1] = [line, " " * len(indent) + line[len(indent) :]]
        return "\n".join(lines) + "\n"
    return text.replace(MARK, replacement)


def key_of(mutation: Mutation) -> str:
    """The key path of the mutated value, as errors name it."""
    first, *rest = mutation.path
    return f"mig-inference:{first}" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest
    )


def _related(key: str, other: str) -> bool:
    """Whether one key path holds the other (or is it)."""
    short, long = sorted((key, other), key=len)
    return long == short or (long.startswith(short) and long[len(short)] in ".[")


def _outcome(mutation: Mutation, code: int, keys: list[str | None]) -> str:
    """`accepted`, `refused at the key` (an error names the mutated key, a key inside it or
    the key holding it) or `refused at another key`."""
    if code == 0:
        return "accepted"
    where = key_of(mutation)
    if any(key is not None and _related(where, key) for key in keys):
        return "refused at the key"
    return "refused at another key"


EXISTING_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "kube-tools")
"""Namespaces every cluster has, and one of the prefix Kubernetes reserves."""
UNOFFERED_VERSIONS = {"eks": ("1.20", "1.3", "1.30", "1.37", "1.40"),
                      "oke": ("v1.20.8", "v1.33.1", "v1.34.9", "v1.37.0", "v1.99.0")}  # fmt: skip
"""Versions each cloud did not offer as of the version table's date."""


@dataclass(frozen=True)
class CrossKeyMutation:
    """A shipped stack changed so that two sections contradict each other (or one names what
    the cluster has already): `key` is where the refusal must be."""

    stack: str
    kind: str
    key: str
    values: dict[str, Any]
    secrets: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.stack}:{self.key}:{self.kind}"


def _created_namespaces(values: dict[str, Any]) -> dict[str, str]:
    """The fixed-name namespaces a stack's features create -> the feature (defaults only)."""
    created: dict[str, str] = {}
    pools = values.get("pools") or []
    if any(p.get("migManager", "operator") == "operator" for p in pools):
        created["gpu-operator"] = "gpuOperator"
    if values.get("dra") is not None:
        created["nvidia-dra-driver-gpu"] = "dra"
    if values.get("gateway") is not None:
        created["inference-gateway"] = "gateway"
        if values.get("cloud") != "gke" and values["gateway"].get("install", True):
            created["istio-system"] = "gateway.install"
    if any(s.get("queueAutoscaling") for s in values.get("services") or []):
        created["keda"] = "queueAutoscaling"
    return created


def _with(values: dict[str, Any], change: Any) -> dict[str, Any]:
    copied = copy.deepcopy(values)
    change(copied)
    return copied


def cross_key_corpus() -> Iterator[CrossKeyMutation]:
    """Every shipped stack with a namespace that exists already or that another part creates,
    and every cluster version its cloud did not offer (an EKS stack made to create its
    cluster), each with the key the refusal must name."""
    for stack in stack_names():
        values, secrets = shipped(stack)
        services = values.get("services") or []
        for index in range(len(services)):
            key = f"mig-inference:services[{index}].namespace"
            for namespace in EXISTING_NAMESPACES:
                changed = _with(values, lambda v, n=namespace, i=index: v["services"][i].update(
                    namespace=n))  # fmt: skip
                yield CrossKeyMutation(stack, f"existing-{namespace}", key, changed, secrets)
            for namespace, feature in _created_namespaces(values).items():
                changed = _with(values, lambda v, n=namespace, i=index: v["services"][i].update(
                    namespace=n))  # fmt: skip
                yield CrossKeyMutation(stack, f"namespace-of-{feature}", key, changed, secrets)
        if services and "gpuOperator" in _created_namespaces(values).values():
            own = services[0].get("namespace", "inference")
            changed = _with(values, lambda v, n=own: v.setdefault("gpuOperator", {}).update(
                namespace=n))  # fmt: skip
            yield CrossKeyMutation(stack, "operator-namespace-of-a-service",
                                   "mig-inference:gpuOperator.namespace", changed, secrets)  # fmt: skip
        cloud = values.get("cloud")
        cluster = values.get("cluster") or {}
        if cloud == "oke":
            for version in UNOFFERED_VERSIONS["oke"]:
                changed = _with(values, lambda v, w=version: v["cluster"].update(
                    kubernetesVersion=w))  # fmt: skip
                yield CrossKeyMutation(stack, f"version-{version}",
                                       "mig-inference:cluster.kubernetesVersion", changed, secrets)  # fmt: skip
        if cloud == "eks" and not cluster.get("create"):
            for version in UNOFFERED_VERSIONS["eks"]:
                changed = _with(values, lambda v, w=version: v["cluster"].update(
                    create=True, vpcId="vpc-0a1b2c3d", version=w,
                    publicAccessCidrs=["198.51.100.0/24"]))  # fmt: skip
                yield CrossKeyMutation(stack, f"version-{version}", "mig-inference:cluster.version",
                                       changed, secrets)  # fmt: skip


def cross_key_text(mutation: CrossKeyMutation) -> str:
    body = {"config": {f"mig-inference:{k}": v for k, v in mutation.values.items()}}
    body["config"].update({f"mig-inference:{k}": {"secure": "v1:test"} for k in mutation.secrets})
    return yaml.safe_dump(body, width=10**9, allow_unicode=True)


def main() -> int:
    from contextlib import redirect_stdout
    from io import StringIO

    from mig_inference.cli import main as mig

    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    work = Path(sys.argv[1] if len(sys.argv) > 1 else "out/mutations")
    work.mkdir(parents=True, exist_ok=True)
    path = work / "Pulumi.mutated.yaml"
    elsewhere: list[str] = []
    for mutation in corpus():
        text = mutated_text(mutation)
        if text is None:
            continue
        path.write_text(text, encoding="utf-8")
        out = StringIO()
        try:
            with redirect_stdout(out):
                code = mig(["plan", "--stack-file", str(path), "--json"])
            keys = [error["key"] for error in json.loads(out.getvalue()).get("errors", [])]
            outcome = _outcome(mutation, code, keys)
            outcomes[outcome] += 1
            if outcome == "refused at another key":
                elsewhere.append(f"{mutation.name}: {keys[:3]}")
        except Exception as error:  # the corpus counts what the tests must never see
            outcomes["traceback"] += 1
            print(f"{mutation.name}: {type(error).__name__}: {error}"[:300], file=sys.stderr)
    for crossed in cross_key_corpus():
        path.write_text(cross_key_text(crossed), encoding="utf-8")
        out = StringIO()
        with redirect_stdout(out):
            code = mig(["plan", "--stack-file", str(path), "--json"])
        keys = [error["key"] for error in json.loads(out.getvalue()).get("errors", [])]
        outcome = "refused at the key" if crossed.key in keys else "accepted" if code == 0 else (
            "refused at another key")  # fmt: skip
        outcomes[f"cross-key: {outcome}"] += 1
        if outcome != "refused at the key":
            elsewhere.append(f"{crossed.name}: {keys[:3]}")
    (work / "refused-elsewhere.txt").write_text("\n".join(elsewhere) + "\n", encoding="utf-8")
    print(json.dumps({**outcomes, "seconds": round(time.monotonic() - started)}))
    return 1 if outcomes["traceback"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
