"""Every Python and shell block of the README and docs/ runs as a user would copy it, against the
installed wheel (a fresh virtualenv with only the package's wheel, not the clone): shell blocks
with bash in a directory holding a team's `stacks/` and `examples/`, Python blocks as a Pulumi
program under `MigInferenceMocks`. A block that cannot run here says why, in a comment on the
line before it: `<!-- not run: <why> -->` (the Pulumi CLI, a cloud, a cluster)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.project.test_wheel import built_wheel, fresh_venv

__all__ = ["built_wheel", "fresh_venv"]  # the wheel and its virtualenv, as fixtures here

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(?:^<!-- not run: (?P<why>[^\n]*?) -->\n)?^```(?P<lang>sh|python)\n(?P<body>.*?)^```",
    re.M | re.S,
)
PROGRAM = """
import asyncio, sys
import pulumi
from pulumi.runtime import config, mocks, settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await
from mig_inference.components.testing import MigInferenceMocks

body = open(sys.argv[1], encoding="utf-8").read()
asyncio.set_event_loop(asyncio.new_event_loop())
settings.reset_options(project="team", stack="docs")
config.set_all_config({"team:hfToken": "hf_docs"}, ["team:hfToken"])
mocks.set_mocks(MigInferenceMocks(), project="team", stack="docs", preview=False)
_sync_await(run_pulumi_func(lambda: exec(compile(body, sys.argv[1], "exec"), {})))
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    why_not_run: str | None

    def __str__(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text[: match.start("lang")].count("\n") + 1
            found.append(Block(page, line, match["lang"], match["body"], match["why"]))
    return found


RUN = [b for b in blocks() if b.why_not_run is None]


def test_the_blocks_are_found_and_most_run() -> None:
    assert len(blocks()) >= 16
    assert len(RUN) >= 5


@pytest.mark.parametrize("block", [b for b in blocks() if b.why_not_run is not None], ids=str)
def test_a_block_not_run_says_why(block: Block) -> None:
    assert block.why_not_run and len(block.why_not_run.split()) >= 3, block


@pytest.mark.parametrize("block", RUN, ids=str)
def test_every_block_runs_against_the_installed_wheel(
    block: Block, fresh_venv: Path, tmp_path: Path
) -> None:
    for folder in ("stacks", "examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    script = tmp_path / f"block.{'py' if block.lang == 'python' else 'sh'}"
    script.write_text(block.body, encoding="utf-8")
    if block.lang == "python":
        command = [str(fresh_venv / "bin" / "python"), "-c", PROGRAM, str(script)]
    else:
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    run = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={"PATH": f"{fresh_venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert run.returncode == 0, f"{block}:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
