"""The error types the domain raises for bad input, and how one run collects every error of an
input: a check that is independent of the others records its error and the run carries on
(`record`); a value that could not be read stops what depends on it with AlreadyReported, which
adds no error of its own (the one that refused the value is recorded already)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

SHOWN_CHARACTERS = 80
"""The longest a value is quoted in a message (the JSON errors carry it whole)."""


def shown(value: Any) -> str:
    """`repr(value)` for a message, cut short (saying how long it was) when it is long."""
    text = repr(value)
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[: SHOWN_CHARACTERS - 20]}... ({len(text):,} characters)"


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

    def relocated(self, path: str | None) -> MigError:
        """The same error at another key path."""
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
    """A value (or a section) could not be read; the errors that stopped it are already
    recorded, and what depends on it stops without an error of its own."""

    def __init__(self, path: str) -> None:
        super().__init__("errors recorded above", path)

    @property
    def errors(self) -> list[MigError]:
        return []


def report(problems: list[MigError] | None, error: MigError) -> None:
    """Record `error` when collecting (`problems` given), else raise it."""
    if problems is None:
        raise error
    problems.append(error)


def record(problems: list[MigError] | None, check: Callable[[], T], placeholder: T) -> T:
    """`check()`; when collecting (`problems` given), a MigError it raises is recorded and
    `placeholder` returned instead, so that the checks after it still run."""
    if problems is None:
        return check()
    try:
        return check()
    except MigError as error:
        problems.append(error)
        return placeholder


class MigErrors(MigError):
    """Every error found in one input, in the order found (one per key path)."""

    def __init__(self, found: Iterable[MigError]) -> None:
        unique: dict[str | None, MigError] = {}
        flat = [inner for error in found for inner in error.errors]
        for error in flat:
            key = error.path if error.path is not None else error.message
            unique.setdefault(key, error)
        self._errors = list(unique.values())
        if not self._errors:
            raise ValueError("MigErrors needs at least one error that is not AlreadyReported")
        first = self._errors[0]
        super().__init__(first.message, first.path, value=first.value, allowed=first.allowed)
        self.args = ("\n".join(str(error) for error in self._errors),)

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def errors(self) -> list[MigError]:
        return list(self._errors)


def collected(problems: Sequence[MigError]) -> MigError:
    """The errors recorded, as one MigErrors to raise (an AlreadyReported alone when nothing
    else was recorded: what stopped is reported elsewhere)."""
    if any(error.errors for error in problems):
        return MigErrors(problems)
    return problems[0]


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
