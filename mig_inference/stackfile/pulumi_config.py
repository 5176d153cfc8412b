"""What a Python Pulumi program receives as config from `Pulumi.<stack>.yaml`, and how this
project's program reads it; the command line uses the same two steps, so `plan` sees exactly the
values `pulumi up` does.

The engine's side (pulumi/pulumi at 1b5949891b3c, see docs in README "How stack files are
read"): the stack file is decoded with gopkg.in/yaml.v3 (`mig_inference.stackfile.yamlfile`);
keys without a namespace get the project's (`cloud` is `mig-inference:cloud`), `ns:config:name` is
`ns:name`; each value becomes one string: a string stays itself, an empty value is "" (Pulumi
warns), anything else is JSON as Go writes it (`yes` stays "yes", `1e3` is "1000", a timestamp
is Go's `2024-01-02 00:00:00 +0000 UTC`, `.inf` and `.nan` make the whole file fail). A value
`{secure: <ciphertext>}` is a secret. The Python language host hands these strings to the program
(PULUMI_CONFIG), where `pulumi.Config.get` returns them as they are.

The program's side (`project_values`): `cloud` is the string; every other key is that string read
as JSON (what `Config.get_object` does), or the string itself when it is not JSON, so that the
spec reader can say what is wrong with it at its key path. A value nested deeper than the stack
file reader takes (yamlfile.MAX_DEPTH) is refused at its key before `json.loads` recurses into it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from msgspec import Struct, field

from mig_inference.errors import MigError, MigErrors
from mig_inference.stackfile.yamlfile import (
    MAX_DEPTH,
    Document,
    FilePath,
    YamlPath,
    file_name,
    go_json_float,
    load_document,
    parse_text,
    read_text,
    too_deep,
)

NAMESPACE = "mig-inference"
SECRET_MARKER = "secure"
_INT64 = (-(2**63), 2**63 - 1)
PLAIN_KEYS = ("cloud",)
"""Keys the program reads with `Config.get` (a string); the others are JSON objects."""


class EngineConfig(Struct, frozen=True):
    """The config Pulumi's engine gives the program: full key -> string, and the secret keys."""

    values: Mapping[str, str]
    secret_keys: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()
    nested_secrets: frozenset[str] = frozenset()
    """Keys whose value holds a secret inside an object (the engine decrypts it in place)."""


class _Conversion(Struct):
    warnings: list[str] = field(default_factory=list)
    nested_secret: bool = False


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(SECRET_MARKER), str)


_GO_ESCAPES = {char: f"\\u{ord(char):04x}" for char in "<>&\u2028\u2029"}
"""What Go's encoding/json escapes that Python's json does not (only strings hold them)."""


def _go_escaped(text: str) -> str:
    for char, escape in _GO_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def _holds_float(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
    return False


def go_json(value: Any) -> str:
    """`value` as Go's encoding/json writes it (keys sorted, `<`, `>`, `&` escaped). Python's
    json writes everything but floats as Go does, in one call; floats as Go's shortest form."""
    if not _holds_float(value):
        return _go_escaped(
            json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        )
    if isinstance(value, float):
        return go_json_float(value)
    if isinstance(value, list):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    assert isinstance(value, dict)
    return "{" + ",".join(f"{go_json(k)}:{go_json(value[k])}" for k in sorted(value)) + "}"


def _engine_value(value: Any, key: str, path: str, state: _Conversion) -> Any:
    """A decoded value as it leaves the engine, secrets replaced by a placeholder."""
    if isinstance(value, float) and not math.isfinite(value):
        raise MigError(
            f"{value!r} cannot be passed to the program: Pulumi refuses the stack file "
            "(`json: unsupported value`); give a finite number",
            f"{key}{path}",
            value=value,
        )
    if (
        path
        and isinstance(value, int)
        and not isinstance(value, bool)
        and (not _INT64[0] <= value <= _INT64[1])
    ):
        # Inside an object the engine reads numbers back from JSON as int64, else float64.
        return float(value)
    if _is_secret(value):
        state.nested_secret = True
        return f"[secret {value[SECRET_MARKER][:12]}...]"
    # Strings leave as they are: only other values need a look (and a path to name).
    if isinstance(value, list):
        return [
            item if type(item) is str else _engine_value(item, key, f"{path}[{i}]", state)
            for i, item in enumerate(value)
        ]
    if isinstance(value, dict):
        return {
            k: v if type(v) is str else _engine_value(v, key, f"{path}.{k}", state)
            for k, v in value.items()
        }
    return value


def _text(value: Any) -> str:
    """Pulumi's string form of a top-level value (marshalText): strings as they are, the rest
    as Go's JSON."""
    return value if isinstance(value, str) else go_json(value)


def _full_key(key: str, project: str) -> str | None:
    """config.ParseKey after the project's namespace is added to a bare key."""
    parts = key.split(":")
    if len(parts) == 1:
        return f"{project}:{key}"
    if len(parts) == 2:
        return key
    if len(parts) == 3 and parts[1] == "config" and parts[0] and parts[2]:
        return f"{parts[0]}:{parts[2]}"
    return None


def engine_config(document: Document, source: str, project: str = NAMESPACE) -> EngineConfig:
    """What the engine passes the program for a stack file already decoded by yamlfile."""
    data = document.value
    if data is None:
        return EngineConfig({})
    if not isinstance(data, dict):
        raise MigError("a stack file is a mapping with a `config:` mapping", source)
    config = data.get("config")
    if config is None:
        return EngineConfig({})
    if not isinstance(config, dict):
        raise MigError(f"`config:` must be a mapping, got {config!r}", source)
    problems: list[MigError] = []
    values: dict[str, str] = {}
    secrets: set[str] = set()
    nested: set[str] = set()
    warnings = [
        f"{_readable(source, path)}: Pulumi reads the unquoted {reading.text} as {reading.why}: "
        f"the program receives {reading.value!r}; quote it to keep the text"
        for reading in document.readings
        for path in [reading.path]
    ]
    if document.more_documents:
        warnings.append(f"{source}: only the first YAML document is read (as Pulumi does)")
    empty = []
    for key, value in config.items():
        full = _full_key(key, project)
        if full is None:
            problems.append(MigError(
                "is not a configuration key (`<namespace>:<name>`, or a name of this project)",
                key, value=key,
            ))  # fmt: skip
            continue
        if full in values or full in secrets:
            problems.append(MigError(f"is given twice (also as {full})", key, value=key))
            continue
        if value is None:
            empty.append(full)
            values[full] = ""  # Pulumi's zero Value: an empty string
            continue
        if _is_secret(value):
            secrets.add(full)
            values[full] = value[SECRET_MARKER]
            continue
        state = _Conversion()
        try:
            converted = _engine_value(value, full, "", state)
        except MigError as error:
            problems.append(error)
            continue
        values[full] = _text(converted)
        if state.nested_secret:
            secrets.add(full)
            nested.add(full)
    if empty:
        warnings.append(
            f"{source}: no value for {', '.join(empty)}: Pulumi passes an empty string (and will "
            "pass null in a later version); the key is left out"
        )
    if problems:
        raise MigErrors(problems)
    return EngineConfig(values, frozenset(secrets), tuple(warnings), frozenset(nested))


def _readable(source: str, path: YamlPath) -> str:
    """A YAML path under `config:` as a key path (`mig-inference:pools[0].name`)."""
    if len(path) < 2 or path[0] != "config":
        return source
    text = str(path[1])
    text = text if ":" in text else f"{NAMESPACE}:{text}"
    for part in path[2:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def project_name(stack_file: FilePath) -> str:
    """The name of the Pulumi project a stack file belongs to (the namespace of its bare keys):
    `Pulumi.yaml` beside it or one level up (its `stackConfigDir`); this project's by default."""
    # Folders as named (lexically, as `pulumi` run in the working directory takes `stacks/`
    # there, a link or not), from the working directory; a name ending in `..` goes up by it.
    name = file_name(stack_file)
    beside = os.path.dirname(name if os.path.isabs(name) else os.path.join(os.getcwd(), name))
    above = (
        os.path.join(beside, os.pardir)
        if os.path.basename(beside) == os.pardir
        else os.path.dirname(beside)
    )
    for folder in (beside, above):
        for name in ("Pulumi.yaml", "Pulumi.yml"):
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                try:
                    data = parse_text(read_text(candidate, "project file"), candidate).value
                except MigError:
                    return NAMESPACE
                if isinstance(data, dict) and isinstance(data.get("name"), str):
                    return str(data["name"])
                return NAMESPACE
    return NAMESPACE


def read_stack_config(path: FilePath) -> EngineConfig:
    """The engine's config for the stack file at `path`."""
    source = str(path)
    document = load_document(
        path, "stack file", go_times=True, key_path=lambda where: _readable(source, where)
    )
    return engine_config(document, source, project_name(path))


CONFIG_VALUE_DEPTH = MAX_DEPTH - 2
"""How deep a config value may nest: the stack file's own mapping and its `config:` mapping are
the first two of yamlfile.MAX_DEPTH levels."""
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""JSON strings (skipped whole: brackets in them do not nest) and brackets."""
_CUT = "\x00nested too deep"


def _too_deep_span(text: str) -> tuple[int, int] | None:
    """Where the first list or object of JSON `text` nested deeper than CONFIG_VALUE_DEPTH
    starts and ends, found without recursing (Python's json recurses once per level)."""
    if text.count("[") + text.count("{") <= CONFIG_VALUE_DEPTH:
        return None  # too few brackets to nest that deep (most values: one pass in C)
    depth, start = 0, None
    for token in _JSON_NESTING.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > CONFIG_VALUE_DEPTH and start is None:
                start = token.start()
        elif bracket in "]}":
            depth -= 1
            if start is not None and depth == CONFIG_VALUE_DEPTH:
                return start, token.end()
    return None if start is None else (start, len(text))


def _path_to(value: Any, target: str, path: str = "") -> str | None:
    """The key path (`.key`, `[index]`) of `target` in a decoded JSON value."""
    if value == target:
        return path
    if isinstance(value, dict):
        steps = [(f".{key}", item) for key, item in value.items()]
    elif isinstance(value, list):
        steps = [(f"[{index}]", item) for index, item in enumerate(value)]
    else:
        return None
    for step, item in steps:
        found = _path_to(item, target, path + step)
        if found is not None:
            return found
    return None


def as_object(text: str, key: str = "") -> Any:
    """A config string as `Config.get_object` reads it (JSON); the string itself when it is not
    JSON, for the spec reader to refuse with its key path. MigError at the key path of a value
    nested deeper than CONFIG_VALUE_DEPTH (`key` names the config key)."""
    span = _too_deep_span(text)
    if span is not None:
        # The deep part cut out, the rest is shallow enough to read and to find the cut in.
        start, end = span
        try:
            where = _path_to(json.loads(f"{text[:start]}{json.dumps(_CUT)}{text[end:]}"), _CUT)
        except ValueError:
            where = None
        raise MigError(too_deep(), f"{key}{where or ''}")
    try:
        return json.loads(text)
    except ValueError:
        return text


def project_values(
    config: Mapping[str, str], is_secret: Callable[[str], bool]
) -> tuple[dict[str, Any], frozenset[str]]:
    """The program's reading of the engine's config: this project's keys (without namespace)
    and their values, and the names of its secret keys (whose values are never read here).
    Empty values are left out."""
    values: dict[str, Any] = {}
    secrets: set[str] = set()
    problems: list[MigError] = []
    prefix = f"{NAMESPACE}:"
    for full_key in sorted(config):
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix) :]
        if is_secret(full_key):
            secrets.add(key)
        elif config[full_key] != "":
            text = config[full_key]
            try:
                values[key] = text if key in PLAIN_KEYS else as_object(text, full_key)
            except MigError as error:
                problems.append(error)
    if problems:
        raise MigErrors(problems)
    return values, frozenset(secrets)
