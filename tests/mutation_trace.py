"""A pytest plugin for the clean run of `make mutation` (tests/mutation.py): which test runs which
code that is to be mutated. Per test it records the lines it executes of each Python file named
in MIG_MUTATION_FILES, which formats and bounds of `mig_inference.spec.formats` it holds values
to (by the format's name, the bound's source), and which node Job scripts it runs against the fake API server
(`tests.fake_apiserver.run_script`: a script counts when every part of its own text, between its
`. ./kube.sh` includes, is in what ran). Lines that run outside any test (a module's own
lines, run when collection imports it) are recorded under COLLECTION: every test of the run
depends on them. Each pytest process writes what it saw as JSON into
MIG_MUTATION_TRACE (one file per process: the xdist controller and each worker).

    pytest -p tests.mutation_trace ...
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

COLLECTION = "<collection>"
"""Stands for the import of the test files (and of the code they import), before any test."""
FILES = frozenset(filter(None, os.environ.get("MIG_MUTATION_FILES", "").split(os.pathsep)))
OUT = os.environ.get("MIG_MUTATION_TRACE", "")

_current: str | None = None
_lines: dict[str, dict[int, set[str]]] = {}
_scripts: dict[str, set[str]] = {}
_held_to: dict[str, set[str]] = {}
_seconds: dict[str, float] = {}


def _trace_lines(frame: FrameType, event: str, _arg: object) -> Any:
    if event == "line":
        _lines.setdefault(frame.f_code.co_filename, {}).setdefault(frame.f_lineno, set()).add(
            _current or COLLECTION
        )
    return _trace_lines


def _trace_calls(frame: FrameType, _event: str, _arg: object) -> Any:
    """Only frames of the files to mutate get a line tracer: the rest runs at full speed."""
    if frame.f_code.co_filename not in FILES:
        return None
    if frame.f_code.co_name == "problem" and _current is not None:
        held = frame.f_locals.get("self")
        key = getattr(held, "name", None) or getattr(held, "source", None)
        if isinstance(key, str):
            _held_to.setdefault(key, set()).add(_current)
    return _trace_lines


def own_parts(name: str) -> list[str]:
    """The parts of a node Job script's own text, as they are in the script a Job runs."""
    from mig_inference.kube import scripts

    text = (Path(scripts.__file__).parent / name).read_text(encoding="utf-8")
    for placeholder, value in scripts.PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return [part.strip() for part in scripts.INCLUDE.split(text) if part.strip().count("\n") > 1]


def scripts_in(script: str) -> list[str]:
    """The node Job scripts whose own text `script` holds."""
    from mig_inference.kube import scripts

    names = sorted(p.name for p in Path(scripts.__file__).parent.glob("*.sh"))
    return [name for name in names if all(part in script for part in own_parts(name))]


def pytest_configure() -> None:
    # Traced from here on: the code under test is imported only by the collection that follows
    # (this module imports none of it at its own import).
    if FILES:
        sys.settrace(_trace_calls)
        threading.settrace(_trace_calls)
    from tests import fake_apiserver

    original = fake_apiserver.run_script

    def recorded(cluster: Any, tmp_path: Path, script: str, env: Mapping[str, str],
                 timeout: float = 120) -> Any:  # fmt: skip
        if _current is not None:
            for name in scripts_in(script):
                _scripts.setdefault(name, set()).add(_current)
        return original(cluster, tmp_path, script, env, timeout)

    fake_apiserver.run_script = recorded


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    global _current
    _current = item.nodeid
    started = time.monotonic()
    try:
        yield
    finally:
        _seconds[item.nodeid] = time.monotonic() - started
        _current = None


def pytest_sessionfinish() -> None:
    sys.settrace(None)
    threading.settrace(None)
    if not OUT:
        return
    worker = f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}"
    found = {
        "lines": {f: {str(n): sorted(t) for n, t in lines.items()} for f, lines in _lines.items()},
        "scripts": {name: sorted(tests) for name, tests in _scripts.items()},
        "held_to": {key: sorted(tests) for key, tests in _held_to.items()},
        "seconds": _seconds,
    }
    Path(OUT, f"{worker}.json").write_text(json.dumps(found), encoding="utf-8")
