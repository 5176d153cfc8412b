"""A deterministic corpus of broken stack files: every shipped stack, with each of its key paths
deleted, given a value of every other type, nested past the reader's bound, duplicated, or
made huge. `python -m tests.stack_mutations` runs all of it through `plan` and counts the
outcomes; tests/test_stack_mutations.py runs a fixed sample of it."""

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
    (work / "refused-elsewhere.txt").write_text("\n".join(elsewhere) + "\n", encoding="utf-8")
    print(json.dumps({**outcomes, "seconds": round(time.monotonic() - started)}))
    return 1 if outcomes["traceback"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
