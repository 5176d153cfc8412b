"""The error types the domain raises for bad input."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class MigError(ValueError):
    """Bad input, with a message meant for the user: what is wrong, the value, what is allowed.

    `path` is the key path of the offending value (for example `mig-inference:pools[0].mig`)
    when the error comes from configuration; `value` the value found there and `allowed` what
    may stand there instead, when those are known.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        *,
        value: Any = None,
        allowed: Sequence[str] | None = None,
    ) -> None:
        self.path = path
        self.message = message
        self.value = value
        self.allowed = list(allowed) if allowed is not None else None
        super().__init__(f"{path}: {message}" if path else message)

    def at(self, path: str) -> MigError:
        """The same error placed under a key path (an inner path is appended to it)."""
        if self.path:
            joined = self.path if self.path.startswith(("[", ".")) else f".{self.path}"
            return MigError(self.message, f"{path}{joined}", value=self.value, allowed=self.allowed)
        return MigError(self.message, path, value=self.value, allowed=self.allowed)

    @property
    def errors(self) -> list[MigError]:
        return [self]

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.path,
            "value": _jsonable(self.value),
            "message": self.message,
            "allowed": self.allowed,
        }


class AlreadyReported(MigError):
    """A section could not be read; the errors that stopped it are already recorded."""

    def __init__(self, path: str) -> None:
        super().__init__("errors recorded above", path)


class MigErrors(MigError):
    """Every error found in one input, in the order found (one per key path)."""

    def __init__(self, found: Iterable[MigError]) -> None:
        unique: dict[str | None, MigError] = {}
        flat = [inner for error in found for inner in error.errors]
        for error in flat:
            key = error.path if error.path is not None else error.message
            unique.setdefault(key, error)
        self._errors = list(unique.values())
        first = self._errors[0]
        super().__init__(first.message, first.path, value=first.value, allowed=first.allowed)
        self.args = ("\n".join(str(error) for error in self._errors),)

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def errors(self) -> list[MigError]:
        return list(self._errors)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
