"""A mutation check of the checks users trust most: the guard conditions of the node Jobs' shell
scripts and the spec's refusal rules. Each mutant changes one condition in place, runs the tests
that cover that file (stopping at the first failure), and restores the file; a mutant the tests
do not fail has survived. `make mutation` runs it (not part of `make test`: every surviving mutant
runs its whole test set).

    python -m tests.mutation [--only shell|spec] [--limit N] [--seed S] [--list]

Shell scripts get this module's own mutator (a handful of operators on lines that guard: `if`,
`while`, `[ ... ] ||`/`&&`, `case` branches, `stop` on failure); Python refusal rules are found with
`ast` (an `if` whose body reports a `problem`) and their test is negated or its comparison
flipped. It refuses to run on files with uncommitted changes, so a mutant can always be undone
from git.
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "mig_inference" / "kube" / "scripts"
SHELL_TESTS = {
    "gate.sh": ["tests/test_gate.py", "tests/test_dra_restart.py"],
    "repartition.sh": ["tests/test_repartition.py", "tests/test_dra_restart.py"],
    "kube.sh": ["tests/test_repartition.py", "tests/test_gate.py", "tests/test_dra_restart.py"],
}
SPEC = ROOT / "mig_inference" / "spec"
SPEC_TESTS = ["tests/test_broken_stacks.py", "tests/test_pools.py", "tests/test_sharing.py",
              "tests/test_capacity.py", "tests/test_day2.py", "tests/test_dra.py",
              "tests/test_demand.py", "tests/test_demand_services.py", "tests/test_model_cache.py",
              "tests/test_verify_jobs.py", "tests/test_cloud_extras.py",
              "tests/test_secure_clusters.py", "tests/test_inference.py"]  # fmt: skip
TIMEOUT_SECONDS = 1200


@dataclass(frozen=True)
class Mutant:
    path: Path
    line: int
    """1-based line of the change."""
    operator: str
    before: str
    after: str
    """The file's whole text, mutated."""
    tests: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


# -- shell scripts -----------------------------------------------------------------------------
GUARD = re.compile(r"(^\s*(if|elif|while) )|(\] (\|\||&&))|(\|\| stop )|(^\s*\[ )")
SHELL_OPERATORS: list[tuple[str, str, str]] = [
    ("-z to -n", r'\[ -z "', '[ -n "'),
    ("-n to -z", r'\[ -n "', '[ -z "'),
    ("= to !=", r'" = "', '" != "'),
    ("!= to =", r'" != "', '" = "'),
    ("-ge to -gt", r" -ge ", " -gt "),
    ("-lt to -le", r" -lt ", " -le "),
    ("negate is_in", r"(?<![!] )is_in ", "! is_in "),
    ("|| stop to || true", r"\|\| stop ", "|| true "),
]
CASE_BRANCH = re.compile(r"^(\s+)(failed|pending|success|rebooting)\)")


def shell_mutants() -> Iterator[Mutant]:
    for name, tests in SHELL_TESTS.items():
        path = SCRIPTS / name
        lines = path.read_text().split("\n")
        for index, line in enumerate(lines):
            stripped = line.lstrip()
            if stripped.startswith("#") or not (GUARD.search(line) or CASE_BRANCH.match(line)):
                continue
            found = CASE_BRANCH.match(line)
            changes = (
                [("drop case branch", CASE_BRANCH.sub(r"\1\2_mutated)", line))] if found else []
            )
            for label, pattern, replacement in SHELL_OPERATORS:
                for match in re.finditer(pattern, line):
                    changes.append(
                        (label, line[: match.start()] + replacement + line[match.end() :])
                    )
            for label, changed in changes:
                text = "\n".join([*lines[:index], changed, *lines[index + 1 :]])
                yield Mutant(path, index + 1, label, path.read_text(), text, tuple(tests))


# -- the spec's refusal rules ------------------------------------------------------------------
FLIPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
         ast.NotIn: ast.In}  # fmt: skip


def _refuses(node: ast.If) -> bool:
    """An `if` whose own body reports a problem (a refusal rule)."""
    return any(
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "problem"
        for statement in node.body
        for call in ast.walk(statement)
    )


def spec_mutants() -> Iterator[Mutant]:
    for path in sorted(SPEC.glob("*.py")):
        source = path.read_text()
        lines = source.split("\n")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.If) or not _refuses(node):
                continue
            test = node.test
            if test.lineno != test.end_lineno:
                continue  # one line only: the mutant is a text edit of that line
            segment = ast.get_source_segment(source, test)
            assert segment is not None
            changes = [("negate the condition", f"not ({segment})")]
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                flipped = FLIPS.get(type(test.ops[0]))
                if flipped is not None:
                    mutated = ast.Compare(test.left, [flipped()], test.comparators)
                    changes.append((f"{type(test.ops[0]).__name__} to {flipped.__name__}",
                                    ast.unparse(mutated)))  # fmt: skip
            if isinstance(test, ast.BoolOp):
                other = ast.Or() if isinstance(test.op, ast.And) else ast.And()
                changes.append(("and/or swapped", ast.unparse(ast.BoolOp(other, test.values))))
            line = lines[test.lineno - 1]
            start, end = test.col_offset, test.end_col_offset
            for label, replacement in changes:
                changed = line[:start] + replacement + line[end:]
                text = "\n".join([*lines[: test.lineno - 1], changed, *lines[test.lineno :]])
                yield Mutant(path, test.lineno, label, source, text, tuple(SPEC_TESTS))


# -- running -----------------------------------------------------------------------------------
def caught(mutant: Mutant) -> tuple[bool, float]:
    """Whether the tests fail with the mutant in place (a time-out counts as caught)."""
    started = time.monotonic()
    mutant.path.write_text(mutant.after)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.tests],
            cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False,
        )  # fmt: skip
        failed = run.returncode != 0
    except subprocess.TimeoutExpired:
        failed = True
    finally:
        mutant.path.write_text(mutant.before)
    return failed, time.monotonic() - started


def clean(paths: set[Path]) -> bool:
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", *map(str, paths)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return not changed.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["shell", "spec"])
    parser.add_argument("--limit", type=int, default=0, help="at most N mutants (a sample)")
    parser.add_argument("--seed", type=int, default=0, help="which sample (with --limit)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    args = parser.parse_args(argv)
    mutants = [*(shell_mutants() if args.only != "spec" else ()),
               *(spec_mutants() if args.only != "shell" else ())]  # fmt: skip
    total = len(mutants)
    if args.limit and args.limit < total:
        mutants = sorted(random.Random(args.seed).sample(mutants, args.limit),
                         key=lambda m: (str(m.path), m.line))  # fmt: skip
    if args.list:
        for mutant in mutants:
            print(f"{mutant.where}: {mutant.operator}")
        print(f"{len(mutants)} of {total} mutants")
        return 0
    if not clean({m.path for m in mutants}):
        print("refused: the files to mutate have uncommitted changes (commit or stash them)")
        return 2
    survivors = []
    for number, mutant in enumerate(mutants, 1):
        was_caught, seconds = caught(mutant)
        verdict = "caught" if was_caught else "SURVIVED"
        print(f"[{number}/{len(mutants)}] {mutant.where} {mutant.operator}: {verdict} "
              f"({seconds:.0f}s)", flush=True)  # fmt: skip
        if not was_caught:
            survivors.append(mutant)
    score = len(mutants) - len(survivors)
    print(
        f"mutation score: {score}/{len(mutants)} caught"
        + (f" (a sample of {total}, seed {args.seed})" if len(mutants) < total else "")
    )
    for mutant in survivors:
        print(f"survived: {mutant.where} {mutant.operator}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
