"""Changing values of a stack file in place, keeping the rest of it as its author wrote it:
comments, key order, flow or block style, quoting.

ruamel.yaml's round-trip mode does the editing (it keeps comments and styles, which a load and
dump through PyYAML would drop). It writes every block of a file with one indentation, so the
file's own is found first; a file whose other lines ruamel.yaml would still write differently is
edited all the same, and `EditedText.reformatted` counts those lines for the caller to say so.
Whether the edited text means what was asked is for the caller to check with the reader Pulumi's
rules use (`pulumi_config`): this module only edits text.
"""

from __future__ import annotations

import copy
import difflib
import io
from collections.abc import Sequence
from typing import Any

from msgspec import Struct
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from mig_inference.errors import MigError

YamlKey = str | int


class Edit(Struct, frozen=True):
    """Set the value at `path` (keys and list indexes from the document's root); a missing last
    key is added at the end of its mapping."""

    path: tuple[YamlKey, ...]
    value: int | float | str


class EditedText(Struct, frozen=True):
    text: str
    reformatted: int
    """Lines other than the edited values that ruamel.yaml writes differently from the input."""
    first_reformatted: int | None = None
    """The first such line (1-based, in the input)."""


class _Indent(Struct, frozen=True):
    mapping: int = 2
    sequence: int = 4
    offset: int = 2


def _round_trip(indent: _Indent) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never fold a long line the author kept on one
    yaml.indent(mapping=indent.mapping, sequence=indent.sequence, offset=indent.offset)
    return yaml


def _file_indent(document: Any) -> _Indent:
    """The indentation of the file's first nested block mapping and block sequence, from the
    positions ruamel.yaml records (`lc`); the project's own style where there is none."""
    mapping: int | None = None
    sequence: tuple[int, int] | None = None
    pending: list[Any] = [document]
    while pending and (mapping is None or sequence is None):
        node = pending.pop(0)
        if not isinstance(node, CommentedMap) or node.fa.flow_style():
            continue
        for key, value in node.items():
            key_column = node.lc.key(key)[1]
            if isinstance(value, CommentedMap) and not value.fa.flow_style() and value:
                if mapping is None:
                    mapping = value.lc.key(next(iter(value)))[1] - key_column
                pending.append(value)
            elif isinstance(value, CommentedSeq) and not value.fa.flow_style() and value:
                dash = value.lc.col
                first = value[0]
                if sequence is None and isinstance(first, CommentedMap) and first:
                    content = first.lc.key(next(iter(first)))[1]
                    sequence = (content - key_column, dash - key_column)
                pending.extend(item for item in value if isinstance(item, CommentedMap))
    found = _Indent()
    return _Indent(
        mapping=mapping if mapping and mapping > 0 else found.mapping,
        sequence=sequence[0] if sequence and sequence[0] > 0 else found.sequence,
        offset=sequence[1] if sequence and sequence[1] >= 0 else found.offset,
    )


def _dump(yaml: YAML, document: Any) -> str:
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _container(document: Any, path: Sequence[YamlKey], source: str) -> Any:
    node = document
    for step in path:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            raise MigError(f"has no {step!r} where the edit expected one", source) from None
    return node


def _append(mapping: CommentedMap, key: YamlKey, value: Any) -> None:
    """A new last key. ruamel.yaml keeps the full-line comments after a block mapping's last
    value with that value (they often introduce what follows the mapping): they move below the
    new key, and an end-of-line comment stays where it is."""
    last = list(mapping)[-1]
    mapping[key] = value
    entry = mapping.ca.items.get(last)
    if mapping.fa.flow_style() or not entry or len(entry) < 3 or entry[2] is None:
        return
    token = entry[2]
    end_of_line, _, following = token.value.partition("\n")
    if following:
        moved = copy.copy(token)
        moved.value = "\n" + following
        mapping.ca.items[key] = [None, None, moved, None]
    if end_of_line.strip():
        token.value = end_of_line + "\n"
    else:
        entry[2] = None


def edited_text(text: str, edits: Sequence[Edit], source: str) -> EditedText:
    """`text` (a YAML document) with each edit's value set."""
    try:
        document = _round_trip(_Indent()).load(text)
    except YAMLError as error:
        raise MigError(f"ruamel.yaml cannot read it for editing: {error}", source) from None
    yaml = _round_trip(_file_indent(document))
    unchanged = _dump(yaml, document)
    for edit in edits:
        parent = _container(document, edit.path[:-1], source)
        key = edit.path[-1]
        if isinstance(parent, CommentedMap) and key not in parent and parent:
            _append(parent, key, edit.value)
        else:
            parent[key] = edit.value
    same = difflib.SequenceMatcher(None, text.splitlines(), unchanged.splitlines(), autojunk=False)
    different = [
        (start, end)
        for tag, start, end, _, _ in same.get_opcodes()
        if tag != "equal"
        for start, end in [(start, max(end, start + 1))]
    ]
    return EditedText(
        _dump(yaml, document),
        reformatted=sum(end - start for start, end in different),
        first_reformatted=different[0][0] + 1 if different else None,
    )
