"""Every pinned version carries its known upstream issues (`versions.KNOWN_ISSUES`), or a record
of where its issues were searched and none found (`versions.SEARCHED`); every row names the test
that shows its mitigation, and docs/troubleshooting.md lists them for users."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mig_inference import versions
from mig_inference.versions import KNOWN_ISSUES, SEARCHED

ROOT = Path(__file__).resolve().parent.parent.parent
PIN = re.compile(r"[A-Z0-9_]+_(VERSION|IMAGE|MANIFEST|MIN_INSTALLED)")
PINS = sorted(
    n for n, v in vars(versions).items() if PIN.fullmatch(n) and isinstance(v, (str, tuple))
)


def test_the_pins_are_found() -> None:
    assert {"GPU_OPERATOR_VERSION", "VLLM_IMAGE", "DRA_DRIVER_VERSION"} <= set(PINS)
    assert {"INFERENCE_POOL_VERSION", "GATEWAY_API_VERSION", "ISTIO_VERSION"} <= set(PINS)


@pytest.mark.parametrize("pin", PINS)
def test_every_pin_has_its_known_issues_or_where_they_were_searched(pin: str) -> None:
    rows = [row for row in KNOWN_ISSUES if row.pin == pin]
    searched = [entry for entry in SEARCHED if entry.pin == pin]
    assert rows or searched, f"{pin}: no KnownIssue row and no SearchedPin entry"
    assert not (rows and searched), f"{pin}: known issues and 'none known' at once"


def test_every_row_names_a_pin_an_issue_and_a_mitigation() -> None:
    assert {row.pin for row in KNOWN_ISSUES} | {entry.pin for entry in SEARCHED} <= set(PINS)
    for row in KNOWN_ISSUES:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", row.issue), row.issue
        assert row.affects.strip() and row.mitigation.strip(), row
    for entry in SEARCHED:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.as_of) and entry.searched.strip(), entry


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("row", KNOWN_ISSUES, ids=lambda row: f"{row.pin}-{row.issue}")
def test_every_row_names_an_existing_test(row: versions.KnownIssue) -> None:
    file, _, name = row.test.partition("::")
    path = ROOT / file
    assert file.startswith("tests/") and path.is_file(), row.test
    assert name in _test_functions(path), f"{row.test}: no such test function"


def test_the_troubleshooting_page_lists_every_row() -> None:
    page = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    section = page.split("## Known upstream issues", 1)[1]
    for row in KNOWN_ISSUES:
        assert row.issue in section, row.issue
