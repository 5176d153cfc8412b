"""`python -m mig`: the offline command line.

Every verb prints a readable answer, or JSON with `--json`. Exit codes: 0 done, 1 bad input (or
a change Pulumi would refuse), 2 a usage error. Bad input is one line per problem on stderr,
`error: <key path>: <message>`, never a traceback; with `--json` stdout also carries
`{"errors": [{"key", "value", "message", "allowed"}], "warnings": [...]}`. Warnings always go to
stderr (`warning: ...`) and, with `--json`, into the payload's `warnings`.

One module per verb (or per family of small ones); each registers its verbs with `register`. A
run names one verb, so only that verb's module is imported and registered: the others' imports
and arguments would be most of a short verb's start-up. `--help`, `--version` and an unknown verb
get the whole parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from mig_inference.cli.common import Handler, command, print_json
from mig_inference.errors import MigError

VERBS = {
    "gpus": "catalog",
    "profiles": "catalog",
    "validate": "catalog",
    "config": "catalog",
    "throughput": "throughput",
    "fit": "fit",
    "pack": "pack",
    "plan": "plan",
    "diff": "diff",
    "replan": "replan",
    "render": "render",
    "ephemeral": "ephemeral",
    "bench": "bench",
}
"""Each verb and the module of `mig_inference.cli` that registers it, in the order `--help` lists
them (tests/cli/test_verbs.py checks that each module registers exactly its verbs here)."""


class _Version(argparse.Action):
    """`--version`: the installed distribution's version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,  # noqa: ARG002 (argparse's signature)
        values: str | Sequence[Any] | None,  # noqa: ARG002
        option_string: str | None = None,  # noqa: ARG002
    ) -> None:
        from mig_inference.release import DISTRIBUTION, installed_version

        print(f"{DISTRIBUTION} {installed_version()}")
        parser.exit(0)


def _unmeasured(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=80)


class _Parser(argparse.ArgumentParser):
    """argparse makes a formatter for each argument added (to check its metavar), and its
    default formatter measures the terminal with shutil, whose import (with zlib, bz2 and lzma)
    is about 3 ms of a `pack` or `plan` process. Parsing never formats help: the terminal is
    measured when help is formatted (`--help`; an error prints one line, no usage), by
    argparse's own formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _unmeasured)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        self.formatter_class = argparse.HelpFormatter
        return super().format_help()

    def error(self, message: str) -> Any:  # one line, not a usage dump
        name = command()
        verb = self.prog.removeprefix(name).strip()
        self.exit(2, f"error: {message} (see `{name} {verb + ' ' if verb else ''}--help`)\n")


def verb_modules(argv: Sequence[str] | None = None) -> list[str]:
    """The modules whose verbs the parser of `argv` needs: the named verb's alone, or (for
    `--help`, `--version`, no verb or an unknown one) all of them."""
    first = next(iter(argv or ()), "")
    if first in VERBS:
        return [VERBS[first]]
    return list(dict.fromkeys(VERBS.values()))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with `argv`, only what parsing it needs (`verb_modules`)."""
    parser = _Parser(prog=command(), description="MIG planning for inference fleets.")
    parser.add_argument("--version", action=_Version)
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    def verb(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        sub = verbs.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        sub.add_argument("--json", action="store_true", help="print JSON")
        return sub

    for name in verb_modules(argv):
        importlib.import_module(f"mig_inference.cli.{name}").register(verb)
    return parser


def _failed(args: argparse.Namespace, error: MigError) -> int:
    if getattr(args, "json", False):
        print_json({"errors": [e.as_json() for e in error.errors], "warnings": []})
    for each in error.errors:
        print(f"error: {each}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.handler(args))
    except MigError as error:
        return _failed(args, error)
    except OSError as error:
        if isinstance(error, BrokenPipeError):
            return 0
        where = f"{error.filename}: " if error.filename else ""
        return _failed(args, MigError(f"{where}{error.strerror or error}"))
