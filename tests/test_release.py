"""What a team needs to adopt a release: the licence pyproject declares, and a changelog in Keep a
Changelog's shape whose newest release is the version the package carries."""

from __future__ import annotations

import re
import tomllib
from datetime import date

from tests.reference import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _versions() -> list[tuple[tuple[int, int, int], date]]:
    return [
        ((int(a), int(b), int(c)), date.fromisoformat(day))
        for a, b, c, day in RELEASE.findall(CHANGELOG)
    ]


def test_the_licence_file_is_the_one_pyproject_declares() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["license"] == "Apache-2.0"
    assert PYPROJECT["license-files"] == ["LICENSE"]
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_newest_release_is_the_packages_version() -> None:
    versions = _versions()
    assert versions, "no release heading"
    newest = ".".join(map(str, versions[0][0]))
    assert newest == PYPROJECT["version"]


def test_unreleased_first_then_releases_newest_first() -> None:
    headings = re.findall(r"^## (.+)$", CHANGELOG, re.M)
    assert headings[0] == "[Unreleased]"
    assert len(headings) == 1 + len(_versions()), "a release heading is not `[X.Y.Z] - date`"
    numbers = [number for number, _ in _versions()]
    days = [day for _, day in _versions()]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers)
    assert days == sorted(days, reverse=True)


def test_sections_are_keep_a_changelogs_kinds_or_upgrade_notes() -> None:
    versions = ["Unreleased", *(".".join(map(str, n)) for n, _ in _versions())]
    for index, block in enumerate(re.split(r"^## .+$", CHANGELOG, flags=re.M)[1:]):
        for section in re.findall(r"^### (.+)$", block, re.M):
            upgrade = re.fullmatch(r"Upgrading from (\d+\.\d+\.\d+)", section)
            if upgrade:
                # The note names the release before this one.
                assert upgrade.group(1) == versions[index + 1], (versions[index], section)
            else:
                assert section in KINDS, (versions[index], section)


def test_every_change_that_replaces_nodes_says_how_to_keep_them() -> None:
    entries = re.findall(r"^- (\*\*Replaces nodes.+?)(?=^- |^#|\Z)", CHANGELOG, re.M | re.S)
    assert entries
    for entry in entries:
        assert "Keep the old nodes:" in entry or "only when used" in entry, entry
