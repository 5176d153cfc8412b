"""Reading the YAML files users give (stack files, fleet, throughput and price files, deployed
plans) with the rules Pulumi reads `Pulumi.<stack>.yaml` with, so that `mig-inference plan` and
`pulumi up` see the same values.

Pulumi decodes stack files with Go's gopkg.in/yaml.v3 (v3.0.1), whose rules are neither YAML 1.1
(PyYAML's) nor the YAML 1.2 core schema. Its resolution of plain scalars (resolve.go) is
re-stated here over PyYAML's parser, which comes from the same libyaml lineage as yaml.v3's:

- booleans only `true`/`false` (and `True`, `TRUE`...): `yes`, `no`, `on`, `off` are strings;
- null: empty, `~`, `null`, `Null`, `NULL`;
- integers as Go's `strconv.ParseInt(s, 0, 64)` reads them once every `_` is removed: `0x1F`,
  `0o17`, `0b101`, and the YAML 1.1 octal `017` (= 15); beyond int64, uint64; beyond that a
  float; `1e3` and `08` are floats (1000.0, 8.0); `1e400` (overflowing) is a string;
- unquoted timestamps (`2024-01-02`, `2024-01-02T10:00:00Z`...) become Go times, which reach a
  program as Go prints them (`2024-01-02 00:00:00 +0000 UTC`);
- `.inf`, `.nan` are floats; a key given twice, spelled the same, is an error; merge keys `<<`
  as in YAML 1.1; only the first document of the file is read.

Three choices are stricter than yaml.v3: keys that only differ in how they are written (`1` and
`"1"`, which a Go map would keep apart and Pulumi would then merge in no fixed order) are refused
as given twice, `!!binary` data that is not UTF-8 text is refused, and lists and mappings may
nest at most MAX_DEPTH levels (yaml.v3 takes 10,000).
"""

from __future__ import annotations

import base64
import binascii
import gc
import math
import os
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeAlias

import yaml
from msgspec import Struct, field
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from mig_inference.errors import MigError
from mig_inference.stackfile.composer import PLAIN, Composer, TooDeep

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _BINARY, _MERGE = (f"{_TAG}{t}" for t in ("timestamp", "binary", "merge"))

# yaml.v3 resolve.go: the first character of a plain scalar says what it may be.
_HINTS = {**dict.fromkeys("+-", "S"), **dict.fromkeys("0123456789", "D"),
          **dict.fromkeys("yYnNtTfFoO~", "M"), ".": "."}  # fmt: skip
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("false", "False", "FALSE"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
# The layouts yaml.v3 tries with Go's time.Parse ("2006-1-2T15:4:5.999999999Z07:00", the same
# with a lower-case t, "2006-1-2 15:4:5.999999999", "2006-1-2"): month, day, hour, minute and
# second take one or two digits; a fraction after `.` or `,` any number of digits. Compiled (and
# cached by `re`) only when a file holds a scalar that starts like a date: most never do.
_TIMESTAMP_FORMS = (
    r"(?P<y>\d{4})-(?P<mo>\d\d?)-(?P<d>\d\d?)[Tt](?P<h>\d\d?):(?P<mi>\d\d?):"
    r"(?P<s>\d\d?)(?:[.,](?P<f>\d+))?(?P<z>Z|[+-]\d\d:\d\d)",
    r"(?P<y>\d{4})-(?P<mo>\d\d?)-(?P<d>\d\d?) (?P<h>\d\d?):(?P<mi>\d\d?):"
    r"(?P<s>\d\d?)(?:[.,](?P<f>\d+))?",
    r"(?P<y>\d{4})-(?P<mo>\d\d?)-(?P<d>\d\d?)",
)  # fmt: skip
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
MAX_DEPTH = 100
"""The most levels of lists and mappings a file may nest, the document's own mapping being the
first (so a stack file's config value nests at most 98). yaml.v3 stops at 10,000 (scannerc.go,
`max_flow_level` and `max_indents`: "exceeded max depth of 10000"), and so does Go's
encoding/json that hands config to the program; but a Python program reads an object config
value with `json.loads` (Pulumi's `Config.get_object`), which fails with RecursionError near the
interpreter's recursion limit (1,000 frames by default), and so would this reader, which
recurses once or more per level. 100 is far above the deepest value a stack key takes (6 levels
in the shipped stacks) and far below those limits."""
YamlPath = tuple[str | int, ...]
FilePath: TypeAlias = str | os.PathLike[str]
"""A file the readers read: its name, or a `pathlib.Path` of it. The readers take names and
read with `open` rather than importing pathlib, which (with urllib.parse and ipaddress) is
about 5 ms of a `pack` or `plan` process."""


def file_name(path: FilePath) -> str:
    """The name the readers open and report a file by: as `pathlib` spells it (no trailing or
    doubled `/`, no `.` step; an empty name is `.`), so a name given as text reads and is named
    the same as one given as a Path, and as the verbs that take a Path name it. pathlib is
    imported only for a name it would respell."""
    name = os.fspath(path)
    steps = name.split("/")
    if name and all(steps[1:]) and "." not in steps:
        return name
    from pathlib import PurePath

    return str(PurePath(name))


def openable_name(path: FilePath, doing: str) -> str:
    """`file_name`, or MigError (`doing`: what could not be done) for a name holding NUL, which
    no file name holds (shown as `\\0`)."""
    name = file_name(path)
    if "\0" in name:
        raise MigError(f"{doing}: a file name cannot hold NUL", name.replace("\0", "\\0"))
    return name


class Reading(Struct, frozen=True):
    """A plain scalar that yaml.v3 reads unlike what its text suggests (a timestamp printed by
    Go, an octal number)."""

    path: YamlPath
    text: str
    value: Any
    why: str


class Document(Struct):
    """A YAML file's first document, as yaml.v3 decodes it, and the readings worth a word."""

    value: Any
    readings: list[Reading] = field(default_factory=list)
    more_documents: bool = False


def too_deep() -> str:
    return (
        f"nests lists and mappings more than {MAX_DEPTH} levels deep; no stack key takes more "
        "than a few"
    )


class YamlError(Exception):
    """What yaml.v3 refuses, and the node (its line) where; `path` is where in the document
    when the value there is what is refused."""

    def __init__(
        self,
        message: str,
        node: Node | None = None,
        *,
        line: int | None = None,
        path: YamlPath | None = None,
    ) -> None:
        self.message = message
        self.line = node.start_mark.line + 1 if node is not None else line
        self.path = path
        super().__init__(message)


def go_int(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 0, 64)`, falling back to `ParseUint`: None when neither
    reads it."""
    sign, digits = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    base = 10
    if digits[:1] == "0" and len(digits) > 1:
        prefix = digits[1].lower()
        if len(digits) >= 3 and prefix in "box":
            base, digits = {"b": 2, "o": 8, "x": 16}[prefix], digits[2:]
        else:
            base, digits = 8, digits[1:]
    if not digits or not all(c in "0123456789abcdef"[:base] for c in digits.lower()):
        return None
    number = int(digits, base) * (-1 if sign == "-" else 1)
    if _INT64[0] <= number <= _INT64[1]:
        return number
    if not sign and number <= _UINT64_MAX:
        return number  # ParseUint takes no sign
    return None


def _shortest(number: float) -> tuple[str, int]:
    """The shortest digits that read back as `number` (not zero, finite) and the position of
    the decimal point after the first `dp` of them: number = 0.d1d2... x 10^dp."""
    exact = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(str(d) for d in exact.digits)
    assert isinstance(exact.exponent, int)
    return digits, len(digits) + exact.exponent


def _fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _exponent(digits: str, point: int) -> tuple[str, int]:
    return digits[0] + ("." + digits[1:] if len(digits) > 1 else ""), point - 1


def go_float_g(number: float) -> str:
    """Go's `strconv.FormatFloat(number, 'g', -1, 64)`, which is also what `%v` prints."""
    if math.isnan(number) or math.isinf(number):
        return "NaN" if math.isnan(number) else "+Inf" if number > 0 else "-Inf"
    sign = "-" if math.copysign(1, number) < 0 else ""
    if number == 0:
        return sign + "0"
    digits, point = _shortest(number)
    if point - 1 < -4 or point - 1 >= 6:  # shortest 'g' decides with a precision of 6
        mantissa, exponent = _exponent(digits, point)
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + _fixed(digits, point)


def go_json_float(number: float) -> str:
    """How Go's encoding/json writes a finite float64: shortest digits, in exponent form below
    1e-6 and from 1e21 on (`1e-7`, `1e+21`), plain otherwise (`100000000000000000000`)."""
    sign = "-" if math.copysign(1, number) < 0 else ""
    if number == 0:
        return sign + "0"
    digits, point = _shortest(number)
    if abs(number) < 1e-6 or abs(number) >= 1e21:
        mantissa, exponent = _exponent(digits, point)
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}".replace(
            "e-0", "e-"
        )
    return sign + _fixed(digits, point)


def _timestamp(text: str) -> str | None:
    """Go's time.Time.String() of a timestamp yaml.v3 reads from `text` (None: not one).
    A numeric offset prints as `+0200 +0200`: Go names a zone only when the offset is the
    local zone's, and Pulumi's runs are taken to be in UTC (as CI is)."""
    if not re.match(r"\d{4}-", text):
        return None
    for form in _TIMESTAMP_FORMS:
        found = re.fullmatch(form, text)
        if found is None:
            continue
        part = {k: v for k, v in found.groupdict().items() if v is not None}
        year, month, day = int(part["y"]), int(part["mo"]), int(part["d"])
        hour, minute, second = (int(part.get(k, "0")) for k in ("h", "mi", "s"))
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        if not 1 <= month <= 12 or not 1 <= day <= _DAYS[month - 1] + (month == 2 and leap):
            continue
        if hour > 23 or minute > 59 or second > 59:
            continue
        fraction = (part.get("f", "") + "0" * 9)[:9].rstrip("0")
        zone = part.get("z", "Z")
        if zone == "Z" or zone in ("+00:00", "-00:00"):
            offset, name = "+0000", "UTC"
        else:
            if int(zone[1:3]) > 24 or int(zone[4:6]) > 60:
                continue
            offset = zone[0] + zone[1:3] + zone[4:6]
            name = offset
        clock = f"{hour:02d}:{minute:02d}:{second:02d}" + (f".{fraction}" if fraction else "")
        return f"{year:04d}-{month:02d}-{day:02d} {clock} {offset} {name}"
    return None


def resolve_plain(text: str, tag: str = "") -> tuple[str, Any]:
    """yaml.v3's `resolve(tag, text)`: the tag a plain scalar resolves to, and its value."""
    hint = _HINTS.get(text[:1], "") if text else "N"
    if hint:
        if text in _WORDS:
            value = _WORDS[text]
            kind = (
                _NULL if value is None else _BOOL if isinstance(value, bool) else _FLOAT
            )  # fmt: skip
            return kind, value
        if hint == ".":
            number = _go_float(text)
            if number is not None:
                return _FLOAT, number
        elif hint in "DS":
            if tag in ("", _TIMESTAMP):
                stamp = _timestamp(text)
                if stamp is not None:
                    return _TIMESTAMP, stamp
            plain = text.replace("_", "")
            whole = go_int(plain)
            if whole is not None:
                return _INT, whole
            if _YAML_FLOAT.match(plain):
                number = _go_float(plain)
                if number is not None:
                    return _FLOAT, number
    if text == "<<":
        return _MERGE, text
    return _STR, text


def _go_float(text: str) -> float | None:
    """Go's `strconv.ParseFloat(text, 64)` on a decimal number: None when it overflows."""
    if not _YAML_FLOAT.match(text):
        return None
    number = float(text)
    return None if math.isinf(number) else number


class _Decoder:
    """yaml.v3's decoding of a node graph into Go's `any`, as Python values: str, int, float,
    bool, None, list, and dict with str keys (non-string keys as Go's `%v` prints them, the
    way Pulumi turns them into strings)."""

    def __init__(self, go_times: bool) -> None:
        self.go_times = go_times
        self.readings: list[Reading] = []
        self.decoded = 0
        self.aliased = 0
        self.seen: dict[int, int] = {}
        self.active: set[int] = set()

    def value(self, node: Node, path: YamlPath) -> Any:
        self.decoded += 1
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)  # only lists and mappings count as aliased
        if len(path) >= MAX_DEPTH:
            raise YamlError(too_deep(), node, path=path)  # deeper through aliases
        times = self.seen.get(id(node), 0)
        self.seen[id(node)] = times + 1
        if times:
            self.aliased += 1
            if id(node) in self.active:
                raise YamlError("anchor value contains itself", node)
            if (
                self.aliased > 100
                and self.decoded > 1000
                and (self.aliased / self.decoded > _allowed_alias_ratio(self.decoded))
            ):
                raise YamlError("document contains excessive aliasing", node)
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.value(item, (*path, i)) for i, item in enumerate(node.value)]
            assert isinstance(node, MappingNode)
            return self.mapping(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode, path: YamlPath) -> Any:
        text = str(node.value)
        tag = node.tag
        if tag == PLAIN:
            kind, value = resolve_plain(text)
            if kind == _TIMESTAMP:
                if not self.go_times:
                    return text
                self.readings.append(Reading(path, text, value, "a timestamp"))
            elif kind == _INT and re.match(r"[-+]?0[0-7_]+$", text):
                self.readings.append(Reading(path, text, value, "an octal number"))
            return value
        if tag == _STR:
            return text
        if tag == _BINARY:
            try:
                data = base64.b64decode(re.sub(r"[\r\n]", "", text), validate=True)
                return data.decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise YamlError("!!binary value is not base64 of UTF-8 text", node) from None
        if tag in (_INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP):
            kind, value = resolve_plain(text, tag)
            if kind == tag:
                return text if kind == _TIMESTAMP and not self.go_times else value
            if tag == _FLOAT and kind == _INT:
                return float(value)
            short = kind.removeprefix(_TAG)
            raise YamlError(
                f"cannot decode !!{short} `{text}` as a !!{tag.removeprefix(_TAG)}", node
            )
        return text  # other tags: yaml.v3 keeps the text

    def key(self, node: Node, path: YamlPath) -> str:
        value = self.value(node, path)
        if isinstance(value, list | dict):
            raise YamlError("a key must be a plain value, got a mapping or list", node)
        return go_key_text(value)

    def mapping(self, node: MappingNode, path: YamlPath) -> dict[str, Any]:
        pairs = list(node.value)
        repeated = first_repeated_key(pairs)
        if repeated is not None:
            raise YamlError(
                f"key {repeated.value!r} is given twice", repeated, path=(*path, repeated.value)
            )
        result: dict[str, Any] = {}
        merges: list[Node] = []
        for key_node, value_node in pairs:
            if _is_merge(key_node):
                merges.append(value_node)
                continue
            key = self.key(key_node, path)
            if key in result:
                raise YamlError(
                    f"key {key!r} is given twice (written differently)", key_node, path=(*path, key)
                )
            result[key] = self.value(value_node, (*path, key))
        for merge in merges:
            sources = merge.value if isinstance(merge, SequenceNode) else [merge]
            for source in sources:
                if not isinstance(source, MappingNode):
                    raise YamlError(
                        "map merge requires map or sequence of maps as the value", merge
                    )
                for key, value in self.mapping(source, path).items():
                    result.setdefault(key, value)
        return result


def first_repeated_key(pairs: list[tuple[Node, Node]]) -> ScalarNode | None:
    """The key yaml.v3 names first as given twice in a mapping's pairs, in one pass.

    yaml.v3 (decode.go, `mapping`, uniqueKeys) compares every key with every later one, by node
    kind and text alone (so `1` and `"1"` repeat each other), and lists each pair it finds by
    the earlier key, then the later: its first error is the earliest key written again, at the
    nearest place it is. Only scalar keys are compared here (a key that is a list or a mapping
    is refused when it is decoded)."""
    first_at: dict[str, int] = {}
    second: dict[str, ScalarNode] = {}
    for position, (key, _value) in enumerate(pairs):
        if not isinstance(key, ScalarNode):
            continue
        text = str(key.value)
        if text not in first_at:
            first_at[text] = position
        elif text not in second:
            second[text] = key
    if not second:
        return None
    earliest = min(second, key=first_at.__getitem__)
    return second[earliest]


def _is_merge(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.value == "<<" and node.tag in (PLAIN, _MERGE)


def _allowed_alias_ratio(decoded: int) -> float:
    """yaml.v3's bound on alias expansion (decode.go, allowedAliasRatio)."""
    low, high = 400_000, 4_000_000
    if decoded <= low:
        return 0.99
    if decoded >= high:
        return 0.10
    return 0.99 - 0.89 * (decoded - low) / (high - low)


def go_key_text(value: Any) -> str:
    """A decoded key as a string: Pulumi prints non-string keys with Go's `%v`."""
    if isinstance(value, str):
        return value
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float_g(value)
    return str(value)


def parse_yaml(text: str, *, go_times: bool = False) -> Document:
    """The first document of `text`, decoded as yaml.v3 decodes it; timestamps as Go prints
    them when `go_times` (a stack file's values reach the program so), else as written. Raises
    YamlError or yaml.YAMLError."""
    text = text.removeprefix("\ufeff")  # Pulumi strips a UTF-8 byte-order mark
    loader = Composer(text, MAX_DEPTH)
    collecting = gc.isenabled()
    # Nothing read is garbage before the document is whole, and the collector's passes over
    # the growing graph of nodes would take as long as reading it (a third of a second for
    # 50,000 keys).
    gc.disable()
    try:
        try:
            node = loader.get_node()
        except TooDeep as error:
            raise YamlError(too_deep(), line=error.line, path=error.path) from None
        document = Document(None)
        if node is not None:
            decoder = _Decoder(go_times)
            document = Document(decoder.value(node, ()), decoder.readings)
        try:
            document.more_documents = loader.check_node()
        except yaml.YAMLError:
            document.more_documents = True  # yaml.v3 stops at the first document
        return document
    finally:
        loader.dispose()
        if collecting:
            gc.enable()


def read_text(path: FilePath, what: str) -> str:
    """The file's text; MigError (naming the file, see `file_name`) when it cannot be read or is
    not UTF-8."""
    name = openable_name(path, f"cannot read {what}")
    try:
        with open(name, "rb") as file:
            data = file.read()
    except OSError as error:
        raise MigError(f"cannot read {what}: {error.strerror}", name) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise MigError(
            f"{what} is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line}", name
        ) from None


def parse_text(
    text: str,
    source: str,
    *,
    go_times: bool = False,
    key_path: Callable[[YamlPath], str] | None = None,
) -> Document:
    """`parse_yaml`, its errors as one MigError naming `source` and the line, or, for a value
    refused where it is, the key path `key_path` names it by (by default its path in `source`)."""
    try:
        return parse_yaml(text, go_times=go_times)
    except YamlError as error:
        where = f" at line {error.line}" if error.line is not None else ""
        if error.path is not None:
            named = key_path(error.path) if key_path else _in_file(source, error.path)
            raise MigError(f"{error.message} (line {error.line})", named) from None
        raise MigError(f"not valid YAML{where}: {error.message}", source) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None)
        # libyaml puts the end of a text without a last line break on a line of its own.
        last_line = text.count("\n") + (not text.endswith("\n"))
        where = f" at line {min(mark.line + 1, max(last_line, 1))}" if mark is not None else ""
        detail = f": {problem}" if problem else ""
        raise MigError(f"not valid YAML{where}{detail}", source) from None


def _in_file(source: str, path: YamlPath) -> str:
    steps = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    return f"{source}:{steps.removeprefix('.')}"


def load_document(
    path: FilePath,
    what: str,
    *,
    go_times: bool = False,
    key_path: Callable[[YamlPath], str] | None = None,
) -> Document:
    text = read_text(path, what)
    return parse_text(text, file_name(path), go_times=go_times, key_path=key_path)


def load_yaml(path: FilePath, what: str) -> Any:
    """A user's YAML (or JSON) file, read as Pulumi reads stack files; MigError names the file
    and the line."""
    return load_document(path, what).value
