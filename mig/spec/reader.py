"""Reading raw config values with typed accessors whose errors name the key path."""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import Enum
from typing import Any

from mig.errors import MigError

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class ConfigNode:
    """A value at a key path, with typed accessors that raise MigError naming the path."""

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path

    def child(self, key: str | int) -> ConfigNode:
        if isinstance(key, int):
            return ConfigNode(self.value[key], f"{self.path}[{key}]")
        return ConfigNode(
            self.value.get(key) if isinstance(self.value, dict) else None, f"{self.path}.{key}"
        )

    def error(self, message: str) -> MigError:
        return MigError(message, self.path)

    def mapping(self, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            raise self.error(
                f"must be a mapping with keys {', '.join(allowed)}; got {self.value!r}"
            )
        for key in self.value:
            if key not in allowed:
                raise MigError(
                    f"unknown key {key!r}; allowed: {', '.join(allowed)}", f"{self.path}.{key}"
                )
        return self.value

    def items(self) -> Iterator[ConfigNode]:
        if self.value is None:
            return
        if not isinstance(self.value, list):
            raise self.error(f"must be a list, got {self.value!r}")
        for index in range(len(self.value)):
            yield self.child(index)

    def string(self, default: str | None = None, required: bool = False) -> str | None:
        if self.value is None:
            if required:
                raise self.error("is required")
            return default
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.error(f"must be a non-empty string, got {self.value!r}")
        return self.value.strip()

    def req_string(self) -> str:
        value = self.string(required=True)
        assert value is not None
        return value

    def boolean(self, default: bool) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.error(f"must be true or false, got {self.value!r}")
        return self.value

    def integer(
        self, default: int | None = None, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.error(f"must be a whole number, got {self.value!r}")
        if minimum is not None and self.value < minimum:
            raise self.error(f"must be >= {minimum}, got {self.value}")
        if maximum is not None and self.value > maximum:
            raise self.error(f"must be <= {maximum}, got {self.value}")
        return self.value

    def number(self, default: float | None = None, minimum: float | None = None) -> float | None:
        if self.value is None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise self.error(f"must be a number, got {self.value!r}")
        if minimum is not None and self.value <= minimum:
            raise self.error(f"must be > {minimum}, got {self.value}")
        return float(self.value)

    def strings(self) -> tuple[str, ...]:
        return tuple(item.req_string() for item in self.items())

    def choice(self, enum: type[Enum], default: Enum) -> Any:
        if self.value is None:
            return default
        allowed = [str(e.value) for e in enum]
        if self.value not in allowed:
            raise self.error(f"{self.value!r} is not allowed; allowed: {', '.join(allowed)}")
        return enum(self.value)

    def secret_key_name(self, secret_keys: frozenset[str]) -> str | None:
        """The name of a secret config key (never the secret itself), checked to be secret."""
        name = self.string()
        if name is not None and name not in secret_keys:
            raise self.error(
                f"must name a secret config key (`pulumi config set --secret {name} ...`); "
                f"{name!r} is not a secret key of this stack"
            )
        return name

    def labels(self) -> dict[str, str]:
        if self.value is None:
            return {}
        if not isinstance(self.value, dict):
            raise self.error(f"must be a mapping of label keys to values, got {self.value!r}")
        result = {}
        for key, value in self.value.items():
            where = self.child(str(key))
            if not isinstance(key, str) or not LABEL_KEY.match(key) or len(key) > 316:
                raise where.error(f"{key!r} is not a valid Kubernetes label key")
            if not isinstance(value, str) or not LABEL_VALUE.match(value) or len(value) > 63:
                raise where.error(
                    f"{value!r} is not a valid label value (a string of at most 63 letters, "
                    "digits, '-', '_' or '.', starting and ending alphanumeric)"
                )
            result[key] = value
        return result


def dns_label(node: ConfigNode, max_length: int = 40) -> str:
    value = node.req_string()
    if not DNS_LABEL.match(value) or len(value) > max_length:
        raise node.error(
            f"{value!r} must be a lowercase DNS label (letters, digits, '-'; at most "
            f"{max_length} characters)"
        )
    return value
