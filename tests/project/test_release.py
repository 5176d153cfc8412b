"""What a team needs to adopt a release: the licence pyproject declares, a changelog in Keep a
Changelog's shape, and a version that names one package: a release's number is carried only by
the release itself (its changelog section cut, nothing unreleased), every other commit carries a
development version of the next release, and the policy pack and the provider's schema carry the
same number in the SemVer spelling Pulumi reads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from datetime import date

import pytest
import semver as semver_lib
import yaml
from packaging.version import Version

from mig_inference.release import installed_version, semver
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


def _unreleased_entries(changelog: str) -> list[str]:
    block = re.split(r"^## .+$", changelog, flags=re.M)[1]
    return re.findall(r"^- ", block, re.M)


def version_problems(version: str, changelog: str) -> list[str]:
    """Why `version` would name two packages given `changelog` (empty: it names one)."""
    releases = [Version(f"{a}.{b}.{c}") for a, b, c, _ in RELEASE.findall(changelog)]
    carried = Version(version)
    if not re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", version):
        return [f"{version}: a release X.Y.Z or a development version X.Y.Z.devN"]
    if carried.is_devrelease:
        next_release = Version(carried.base_version)
        if releases and next_release <= releases[0]:
            return [f"{version} is a build of {next_release}, which is not after {releases[0]}"]
        return []
    if not releases or carried != releases[0]:
        return [f"{version} is no release of the changelog: cut its section, or set .devN"]
    if _unreleased_entries(changelog):
        return [
            f"{version} is released, and the changelog lists changes after it: set "
            f"{carried.major}.{carried.minor}.{carried.micro + 1}.dev0 (or the next minor's)"
        ]
    return []


def test_the_package_carries_a_version_no_other_package_has() -> None:
    assert version_problems(PYPROJECT["version"], CHANGELOG) == []


CUT = CHANGELOG.replace("## [Unreleased]\n", "## [Unreleased]\n\n## [0.4.0] - 2026-12-01\n", 1)
"""This changelog with its unreleased entries cut as 0.4.0."""


@pytest.mark.parametrize(
    ("version", "changelog", "named_once"),
    [("0.4.0.dev0", CHANGELOG, True), ("0.3.0", CHANGELOG, False), ("0.3.0.dev1", CHANGELOG, False),
     ("0.4.0", CUT, True), ("0.4.1.dev0", CUT, True), ("0.4.0.dev0", CUT, False),
     ("0.5.0", CHANGELOG, False), ("0.4.0rc1", CHANGELOG, False), ("0.4.0", CHANGELOG, False)],
)  # fmt: skip
def test_a_version_is_a_release_only_with_its_section_and_nothing_after_it(
    version: str, changelog: str, named_once: bool
) -> None:
    """The check can fail: 0.3.0 with unreleased entries after it (what main carried before
    0.4.0.dev0), a build of a release already cut, a release without its section."""
    assert (version_problems(version, changelog) == []) is named_once


def test_changes_have_an_unreleased_section_to_go_to() -> None:
    """Every branch adds its entries under `## [Unreleased]`, which a release leaves in place
    (empty) above the section it cuts."""
    assert re.findall(r"^## (.+)$", CHANGELOG, re.M)[0] == "[Unreleased]"


def test_the_policy_pack_carries_the_packages_version_as_semver() -> None:
    pack = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert pack["version"] == semver(PYPROJECT["version"])


@pytest.mark.parametrize(
    ("pep440", "expected"),
    [("0.4.0.dev0", "0.4.0-dev.0"), ("0.4.0", "0.4.0"), ("1.2.0rc1", "1.2.0-rc.1"),
     ("1.2.0a3.dev4", "1.2.0-alpha.3.dev.4"), ("1.2.0b2", "1.2.0-beta.2"),
     ("1.2.0.post1", "1.2.0+post.1"), ("1.2.0+local.7", "1.2.0+local.7"), ("2", "2.0.0")],
)  # fmt: skip
def test_versions_read_as_pulumi_reads_them(pep440: str, expected: str) -> None:
    assert semver(pep440) == expected
    parsed = semver_lib.Version.parse(expected)
    assert (parsed.prerelease is not None) is Version(pep440).is_prerelease


def test_a_development_version_sorts_before_its_release_in_both_spellings() -> None:
    assert semver_lib.Version.parse(semver("0.4.0.dev0")) < semver_lib.Version.parse("0.4.0")
    assert semver_lib.Version.parse(semver("0.4.0.dev0")) > semver_lib.Version.parse("0.3.0")


def test_what_is_not_a_version_is_refused() -> None:
    with pytest.raises(ValueError, match="not a PEP 440 version"):
        semver("0.4.0-next")


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


def test_the_providers_schema_carries_the_version_as_semver() -> None:
    """The engine reads a plugin's schema version as SemVer: `0.4.0.dev0` would not parse."""
    from mig_inference.components.provider import MigInferenceProvider

    carried = json.loads(MigInferenceProvider().schema or "{}")["version"]
    assert carried == semver(installed_version())
    assert str(semver_lib.Version.parse(carried)) == carried


def test_the_command_line_says_which_package_it_is() -> None:
    """The clone's environment holds the project as pyproject.toml declares it (`make setup`
    installs it again whenever pyproject.toml changes)."""
    run = subprocess.run(
        [sys.executable, "-m", "mig", "--version"],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"mig-inference {PYPROJECT['version']}\n"
