"""Golden renders: what `render` writes for every shipped stack (stacks/Pulumi.<stack>.yaml),
kept under tests/golden/<stack>/ so that a change's Kubernetes objects, Helm values and cloud
inputs show in review. tests/render/test_golden_renders.py compares each stack's render with its
folder; `make golden` (this module) rewrites them all.

    python -m tests.golden_renders

A render is byte-identical per stack (names from what each object is, keys sorted, secrets
redacted), so the refresh is deterministic: running it twice changes nothing, and a stack
removed from stacks/ loses its folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mig_inference.render import rendered_files, run_program
from mig_inference.spec.files import stack_names, stack_path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
REFRESH = "make golden"


def stack_render(stack: str) -> dict[str, str]:
    """Relative path -> text of every file `render --stack <stack>` writes."""
    rendering = run_program(stack, Path(stack_path(stack)))
    if rendering.error:
        raise RuntimeError(f"stack {stack} does not render: {rendering.error}")
    return rendered_files(rendering)


def golden_files(stack: str) -> dict[str, str]:
    """Relative path -> text of the stack's golden render, as kept in the repository."""
    folder = GOLDEN / stack
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def refresh() -> list[str]:
    """Rewrite tests/golden/ from today's renders; returns the files it changed."""
    wanted = {
        f"{stack}/{relative}": text
        for stack in stack_names()
        for relative, text in stack_render(stack).items()
    }
    changed = []
    kept = [p for p in GOLDEN.rglob("*") if p.is_file()] if GOLDEN.exists() else []
    for path in kept:
        if path.relative_to(GOLDEN).as_posix() not in wanted:
            path.unlink()
            changed.append(f"removed {path.relative_to(ROOT)}")
    for relative, text in sorted(wanted.items()):
        path = GOLDEN / relative
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        changed.append(f"{'updated' if path.exists() else 'added'} {path.relative_to(ROOT)}")
        path.write_text(text, encoding="utf-8")
    for folder in sorted((p for p in GOLDEN.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return changed


def main() -> int:
    changed = refresh()
    for line in changed:
        print(line)
    size = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    count = sum(1 for p in GOLDEN.rglob("*") if p.is_file())
    print(
        f"golden renders: {len(changed)} file(s) changed; {count} files, {size / 1024:.0f} KiB "
        f"in {GOLDEN.relative_to(ROOT)} (review and commit them with the change)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
