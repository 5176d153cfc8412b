"""The docs: the README and docs/ link only to files and headings that exist, and the guide's
steps print what the guide says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GUIDE = ROOT / "docs" / "write-your-own-stack.md"
CHECKED_FOR_LINKS = [*PAGES, ROOT / "CHANGELOG.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(page.read_text(encoding="utf-8")), re.M):
        text = re.sub(r"[`*_]", "", heading.strip()).lower()
        found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", CHECKED_FOR_LINKS, ids=lambda p: p.name)
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL: not fetched here (no network)
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT)}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, broken


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
        if target.startswith("docs/")
    }
    assert {p.resolve() for p in PAGES[1:]} <= linked


def guide_steps() -> list[tuple[str, str]]:
    """Each full stack file of the guide (a ```yaml block starting with `config:`) and the
    ```text block that follows it."""
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```(yaml|text)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    steps = []
    for (kind, body), (next_kind, shown) in pairwise(blocks):
        if kind == "yaml" and body.startswith("config:") and next_kind == "text":
            steps.append((body, shown))
    return steps


def test_the_guide_has_its_steps() -> None:
    assert len(guide_steps()) >= 5


@pytest.mark.parametrize("step", range(len(guide_steps())))
def test_each_step_of_the_guide_prints_what_it_shows(step: int, tmp_path: Path) -> None:
    stack_file, shown = guide_steps()[step]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.guide.yaml").write_text(stack_file, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "mig_inference", "plan", "--stack", "guide"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    printed = result.stdout + result.stderr
    missing = [line for line in shown.splitlines() if line.strip() and line not in printed]
    assert not missing, printed
    assert result.returncode == (1 if shown.startswith("error:") else 0), printed


def _contained(excerpt: object, whole: object, path: str) -> list[str]:
    """Where `excerpt` says something `whole` does not (lists compared item by item)."""
    if isinstance(excerpt, dict):
        if not isinstance(whole, dict):
            return [f"{path}: not a map in the stack file"]
        return [
            found
            for key, value in excerpt.items()
            for found in (
                _contained(value, whole[key], f"{path}.{key}")
                if key in whole
                else [f"{path}.{key}: not in the stack file"]
            )
        ]
    if isinstance(excerpt, list):
        if not isinstance(whole, list) or len(whole) < len(excerpt):
            return [f"{path}: the stack file's list is shorter"]
        return [
            f for i, item in enumerate(excerpt) for f in _contained(item, whole[i], f"{path}[{i}]")
        ]
    return [] if excerpt == whole else [f"{path}: {excerpt!r} here, {whole!r} in the stack file"]


def test_the_readme_s_stack_is_an_excerpt_of_the_shipped_stack_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [shown] = re.findall(r"^```yaml\n(config:.*?)^```", readme, re.MULTILINE | re.DOTALL)
    whole = (ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text(encoding="utf-8")
    assert "`stacks/Pulumi.gke-h100.yaml`" in readme
    assert not _contained(yaml.safe_load(shown), yaml.safe_load(whole), "")
