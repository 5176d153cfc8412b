"""Reading raw config values with typed accessors whose errors name the key path.

A ConfigNode reads one value. Given a shared `problems` list, its accessors record what is wrong
(key path, bad value, what is allowed) and carry on with a placeholder, so one run reports every
bad value of a stack file; without one they raise at the first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from enum import Enum
from typing import Any, TypeVar

from msgspec import Struct

from mig_inference.errors import MigError, record, report, shown
from mig_inference.spec.formats import (
    CONFIG_KEY_NAME,
    LABEL_KEY,
    LABEL_NAME_MAX,
    LABEL_VALUE,
    Bound,
    Format,
)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
T = TypeVar("T")


def label_key_problem(key: str, what: str = "label") -> str | None:
    """Why `key` is not a Kubernetes label (or taint) key: its format, and the 63 characters of
    its name part and 253 of its prefix."""
    found = LABEL_KEY.problem(key)
    if found is not None:
        return found.replace("label", what)
    prefix, _, name = key.rpartition("/")
    if len(name) > LABEL_NAME_MAX or len(prefix) > 253:
        return f"{shown(key)}: a {what} key's name has at most 63 characters and its prefix 253"
    return None


CONFIG_SECRET = "`pulumi config set --secret {name} ...`"
"""How a stack file's author adds a secret named {name}."""


class SecretNames(Struct, frozen=True):
    """The secret names a stack may refer to, and how its author adds a missing one."""

    names: frozenset[str]
    how_to_add: str = CONFIG_SECRET


class ConfigNode:
    """A value at a key path, with typed accessors whose errors name the path."""

    def __init__(self, value: Any, path: str, problems: list[MigError] | None = None) -> None:
        self.value = value
        self.path = path
        self.problems = problems

    def child(self, key: str | int) -> ConfigNode:
        if isinstance(key, int):
            return ConfigNode(self.value[key], f"{self.path}[{key}]", self.problems)
        value = self.value.get(key) if isinstance(self.value, dict) else None
        return ConfigNode(value, f"{self.path}.{key}", self.problems)

    def error(self, message: str, allowed: Sequence[str] | None = None) -> MigError:
        return MigError(message, self.path, value=self.value, allowed=allowed)

    def problem(self, message: str, placeholder: T, allowed: Sequence[str] | None = None) -> T:
        """Record (or raise) what is wrong here; carry on with `placeholder`."""
        report(self.problems, self.error(message, allowed))
        return placeholder

    def attempt(self, read: Callable[[], T], placeholder: T) -> T:
        """`read()`, or (collecting) `placeholder` once the error that stopped it is recorded."""
        return record(self.problems, read, placeholder)

    def mapping(self, allowed: tuple[str, ...]) -> dict[str, Any]:
        if self.value is None:
            raise self.error(f"is required: a mapping with keys {', '.join(allowed)}", allowed)
        if not isinstance(self.value, dict):
            raise self.error(
                f"must be a mapping with keys {', '.join(allowed)}; got {shown(self.value)}",
                allowed,
            )
        for key in self.value:
            if key not in allowed:
                self.child(str(key)).problem(
                    f"unknown key {shown(key)}; allowed: {', '.join(allowed)}", None, allowed
                )
        return self.value

    def items(self) -> Iterator[ConfigNode]:
        if self.value is None:
            return
        if not isinstance(self.value, list):
            self.problem(f"must be a list, got {shown(self.value)}", None)
            return
        for index in range(len(self.value)):
            yield self.child(index)

    def text(self, form: Format, default: str | None = None, required: bool = False) -> str | None:
        """A string of the given format."""
        value = self.string(default, required)
        if value is None or value == default or (not value and required):
            return value
        problem = form.problem(value)
        if problem is not None:
            return self.problem(problem, default if not required else "")
        return value

    def texts(self, form: Format) -> tuple[str, ...]:
        found = []
        for item in self.items():
            value = item.text(form, required=True)
            if value:
                found.append(value)
        return tuple(found)

    def string(self, default: str | None = None, required: bool = False) -> str | None:
        if self.value is None:
            if required:
                return self.problem("is required", "")
            return default
        if not isinstance(self.value, str) or not self.value.strip():
            return self.problem(
                f"must be a non-empty string, got {shown(self.value)}", default or ""
            )
        return self.value.strip()

    def unquoted_version(self) -> bool:
        """Record (or raise) that a version was written as a number: YAML reads `1.30` unquoted
        as the number 1.3 (yaml.v3, as PyYAML), so what reaches the program is not what the file
        shows. True when it was."""
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            return False
        self.problem(
            f"is the number {shown(self.value)}: YAML reads an unquoted version as a number "
            '(1.30 becomes 1.3); quote it, like "1.35"',
            None,
        )
        return True

    def req_string(self) -> str:
        return self.string(required=True) or ""

    def boolean(self, default: bool) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            return self.problem(
                f"must be true or false, got {shown(self.value)}", default, ["true", "false"]
            )
        return self.value

    def integer(
        self,
        default: int | None = None,
        minimum: int | None = None,
        maximum: int | None = None,
        bound: Bound | None = None,
    ) -> int | None:
        if self.value is None:
            return default
        fallback = default if default is not None else (minimum or 0)
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            return self.problem(f"must be a whole number, got {shown(self.value)}", fallback)
        if bound is not None and bound.problem(self.value) is not None:
            return self.problem(str(bound.problem(self.value)), fallback)
        if minimum is not None and self.value < minimum:
            return self.problem(f"must be >= {minimum}, got {self.value}", fallback)
        if maximum is not None and self.value > maximum:
            return self.problem(f"must be <= {maximum}, got {self.value}", fallback)
        return self.value

    def number(
        self,
        default: float | None = None,
        minimum: float | None = None,
        bound: Bound | None = None,
    ) -> float | None:
        if self.value is None:
            return default
        fallback = default if default is not None else 1.0
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            return self.problem(f"must be a number, got {shown(self.value)}", fallback)
        if isinstance(self.value, float) and not math.isfinite(self.value):
            return self.problem(f"must be a finite number, got {shown(self.value)}", fallback)
        if bound is not None and bound.problem(self.value) is not None:
            return self.problem(str(bound.problem(self.value)), fallback)
        if minimum is not None and self.value <= minimum:
            return self.problem(f"must be > {minimum}, got {self.value}", fallback)
        return float(self.value)

    def strings(self) -> tuple[str, ...]:
        return tuple(item.req_string() for item in self.items())

    def choice(self, enum: type[Enum], default: Enum) -> Any:
        if self.value is None:
            return default
        allowed = [str(e.value) for e in enum]
        if self.value not in allowed:
            return self.problem(
                f"{shown(self.value)} is not allowed; allowed: {', '.join(allowed)}",
                default,
                allowed,
            )
        return enum(self.value)

    def secret_key_name(self, secrets: SecretNames) -> str | None:
        """The name of a secret (never the secret itself), checked to be one the stack holds."""
        name = self.text(CONFIG_KEY_NAME)
        if name is not None and name not in secrets.names:
            return self.problem(
                f"must name a secret of this stack ({secrets.how_to_add.format(name=name)}); "
                f"{shown(name)} is not one",
                None,
                sorted(secrets.names),
            )
        return name

    def labels(self) -> dict[str, str]:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            return self.problem(
                f"must be a mapping of label keys to values, got {shown(self.value)}", {}
            )
        result = {}
        for key, value in self.value.items():
            key_problem = label_key_problem(key) if isinstance(key, str) else "not a string"
            if key_problem is not None:
                self.child(str(key)).problem(
                    f"{shown(key)} is not a valid Kubernetes label key: {key_problem}", None
                )
            elif not isinstance(value, str) or LABEL_VALUE.problem(value) is not None:
                self.child(str(key)).problem(
                    f"{shown(value)} is not a valid label value (a string of at most 63 letters, "
                    "digits, '-', '_' or '.', starting and ending alphanumeric)",
                    None,
                )
            else:
                result[key] = value
        return result


def dns_label(node: ConfigNode, max_length: int = 40, names: str | None = None) -> str:
    """A lowercase DNS label of at most `max_length` characters; `names`, what it names that
    must start with a letter (a DNS-1035 label), when it names one."""
    value = node.req_string()
    if value and (not DNS_LABEL.match(value) or len(value) > max_length):
        return node.problem(
            f"{shown(value)} must be a lowercase DNS label (letters, digits, '-'; at most "
            f"{max_length} characters)",
            value,
        )
    if value and names and not value[0].isalpha():
        return node.problem(f"{shown(value)} must start with a letter: it names {names}", value)
    return value
