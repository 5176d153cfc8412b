"""Every shipped stack renders exactly its golden files (tests/golden/<stack>/, see
tests/golden_renders.py): a change to what the program creates fails here until the goldens are
refreshed, so the new YAML is in the same commit for review."""

from __future__ import annotations

import difflib

import pytest

from mig_inference.render import rendered_files
from mig_inference.spec.files import stack_names
from tests.golden_renders import GOLDEN, REFRESH, golden_files
from tests.mocked import stack_rendering

DIFF_LINES = 60


def differences(golden: dict[str, str], rendered: dict[str, str]) -> str:
    """What differs between the golden files and a render, for a person: the files added,
    missing and changed, and the start of a unified diff of the changed ones."""
    added = sorted(rendered.keys() - golden.keys())
    missing = sorted(golden.keys() - rendered.keys())
    changed = sorted(k for k in golden.keys() & rendered.keys() if golden[k] != rendered[k])
    lines = [f"rendered, not golden: {path}" for path in added]
    lines += [f"golden, not rendered: {path}" for path in missing]
    lines += [f"changed: {path}" for path in changed]
    diff: list[str] = []
    for path in changed:
        diff += difflib.unified_diff(
            golden[path].splitlines(),
            rendered[path].splitlines(),
            f"golden/{path}",
            f"rendered/{path}",
            lineterm="",
        )
    if len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more diff lines)"]
    return "\n".join(lines + diff)


@pytest.mark.parametrize("stack", stack_names())
def test_the_stack_renders_its_golden_files(stack: str) -> None:
    rendered = rendered_files(stack_rendering(stack))
    golden = golden_files(stack)
    found = differences(golden, rendered)
    if found:
        pytest.fail(
            f"stack {stack} no longer renders tests/golden/{stack}/. If the change is meant, "
            f"refresh the golden renders with `{REFRESH}` and commit them with it, so the review "
            f"shows the new YAML:\n{found}",
            pytrace=False,
        )


def test_every_golden_folder_is_a_shipped_stack() -> None:
    folders = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())
    assert folders == stack_names(), f"refresh the golden renders with `{REFRESH}`"


def test_a_changed_object_is_shown_with_its_diff() -> None:
    golden = {"kubernetes/a.yaml": "kind: A\nspec: 1\n", "outputs.json": "{}\n"}
    rendered = {"kubernetes/a.yaml": "kind: A\nspec: 2\n", "kubernetes/b.yaml": "kind: B\n"}
    assert differences(golden, rendered).splitlines() == [
        "rendered, not golden: kubernetes/b.yaml",
        "golden, not rendered: outputs.json",
        "changed: kubernetes/a.yaml",
        "--- golden/kubernetes/a.yaml",
        "+++ rendered/kubernetes/a.yaml",
        "@@ -1,2 +1,2 @@",
        " kind: A",
        "-spec: 1",
        "+spec: 2",
    ]
