"""A YAML text's first document as a node graph, in one pass over libyaml's events.

yaml.v3 is a port of libyaml, so libyaml's own parser (PyYAML's `CParser`) reads what Pulumi
reads; PyYAML's pure-Python scanner would take seconds on a file of a megabyte, and its
composer recurses once per level. This composer keeps the open lists and mappings on a stack
of its own, so a value nested too deep is refused at its key path (with its line) before it is
built, however deep it goes. It builds what PyYAML's composer builds: untagged plain scalars
tagged `PLAIN` (for yaml.v3's resolution later), quoted ones `str`, anchors and aliases as
shared nodes (an anchor given twice is refused, as PyYAML does).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct
from yaml._yaml import CParser
from yaml.composer import ComposerError
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

PLAIN = "!mig-inference/plain"
"""The tag of an untagged plain scalar, resolved afterwards as yaml.v3 does."""
_TAG = "tag:yaml.org,2002:"
_STR, _SEQ, _MAP = f"{_TAG}str", f"{_TAG}seq", f"{_TAG}map"
Part = str | int | None
_ENDS = (SequenceEndEvent, MappingEndEvent)


def _marks(event: Event) -> tuple[Any, Any]:
    """Where an event starts and ends: libyaml's own Mark type, which PyYAML's nodes and errors
    take as theirs (the stubs tell the two apart)."""
    return event.start_mark, event.end_mark


class TooDeep(Exception):
    """A list or mapping more than `limit` levels deep: where (the keys and indexes leading to
    it) and its line."""

    def __init__(self, path: tuple[str | int, ...], line: int) -> None:
        super().__init__(path, line)
        self.path = path
        self.line = line


class _Open(Struct):
    """A list or mapping being composed, and the part of the path its next child is at."""

    node: SequenceNode | MappingNode
    key: Node | None = None
    """A mapping's key whose value comes next."""

    def part(self) -> Part:
        if isinstance(self.node, SequenceNode):
            return len(self.node.value)
        if self.key is None:
            return None  # a key: not a place in the document
        return self.key.value if isinstance(self.key, ScalarNode) else None


class Composer:
    """The documents of a text, one at a time (`check_node`, `get_node`), lists and mappings
    nested at most `limit` levels (the document's own node is the first)."""

    def __init__(self, text: str, limit: int) -> None:
        self.events = CParser(text)
        self.limit = limit
        self.started = False

    def dispose(self) -> None:
        self.events.dispose()

    def _next(self) -> Event:
        event = self.events.get_event()
        assert event is not None  # libyaml ends every stream with StreamEndEvent
        return event

    def check_node(self) -> bool:
        """Whether another document follows."""
        if not self.started:
            self.started = True
            assert isinstance(self._next(), StreamStartEvent)
        return not self.events.check_event(StreamEndEvent)

    def get_node(self) -> Node | None:
        """The next document's node (None when the stream has no more)."""
        if not self.check_node():
            return None
        assert isinstance(self._next(), DocumentStartEvent)
        node = self._document()
        assert isinstance(self._next(), DocumentEndEvent)
        return node

    def _document(self) -> Node:
        # One turn per event, the hot path of reading a large file: no call per scalar.
        anchors: dict[str, Node] = {}
        stack: list[_Open] = []
        next_event = self.events.get_event
        while True:
            event = next_event()
            node: Node
            if isinstance(event, ScalarEvent) and event.anchor is None:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = PLAIN if event.implicit[0] else _STR
                start, end = _marks(event)
                node = ScalarNode(tag, event.value, start, end, event.style)
            elif isinstance(event, _ENDS):
                done = stack.pop()
                done.node.end_mark = event.end_mark
                node = done.node
            elif isinstance(event, AliasEvent):
                if event.anchor not in anchors:
                    raise ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", _marks(event)[0]
                    )
                node = anchors[event.anchor]
            else:
                assert event is not None  # libyaml ends a document before its stream
                node = self._start(event, stack, anchors)
                if not isinstance(node, ScalarNode):
                    continue  # its children come next
            if not stack:
                return node
            parent = stack[-1]
            if type(parent.node) is SequenceNode:
                parent.node.value.append(node)
            elif parent.key is None:
                parent.key = node
            else:
                parent.node.value.append((parent.key, node))
                parent.key = None

    def _start(self, event: Event, stack: list[_Open], anchors: dict[str, Node]) -> Node:
        """The node an event starts: a scalar whole, a list or mapping opened on the stack."""
        anchor = getattr(event, "anchor", None)
        if anchor is not None and anchor in anchors:
            raise ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence",
                anchors[anchor].start_mark,
                "second occurrence",
                _marks(event)[0],
            )
        given: str | None = getattr(event, "tag", None)
        start, end = _marks(event)
        node: Node
        if isinstance(event, ScalarEvent):
            implicit_plain = event.implicit[0]
            kind = given if given not in (None, "!") else PLAIN if implicit_plain else _STR
            node = ScalarNode(str(kind), event.value, start, end, event.style)
        else:
            assert isinstance(event, SequenceStartEvent | MappingStartEvent)
            if len(stack) >= self.limit:
                where = tuple(p for p in (frame.part() for frame in stack) if p is not None)
                mark = event.start_mark
                raise TooDeep(where, mark.line + 1 if mark is not None else 0)
            explicit = given if given not in (None, "!") else None
            if isinstance(event, SequenceStartEvent):
                node = SequenceNode(explicit or _SEQ, [], start, None, event.flow_style)
            else:
                node = MappingNode(explicit or _MAP, [], start, None, event.flow_style)
            stack.append(_Open(node))
        if anchor is not None:
            anchors[anchor] = node
        return node
