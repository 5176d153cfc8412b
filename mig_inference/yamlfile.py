"""Reading the YAML files users give (stack files, fleet files, deployed plans): UTF-8 text,
valid YAML, and no mapping key given twice (PyYAML would silently keep the last one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from mig_inference.errors import MigError


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges another mapping; PyYAML expands it below
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"a key must be a plain value, got {key!r}",
                    key_node.start_mark,
                ) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"key {key!r} is given twice (line {key_node.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path, what: str) -> str:
    """The file's text; MigError (naming the file) when it cannot be read or is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise MigError(f"cannot read {what}: {error.strerror}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise MigError(
            f"{what} is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line}", str(path)
        ) from None


def load_yaml(path: Path, what: str) -> Any:
    """Parse a user's YAML (or JSON) file; MigError names the file and the line."""
    text = read_text(path, what)
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        detail = f": {problem}" if problem else ""
        raise MigError(f"not valid YAML{where}{detail}", str(path)) from None
