"""A mutation check of the checks users trust most: the guard conditions of the node Jobs' shell
scripts, the spec's refusal rules, the formats and bounds every key is held to, and the mutants a
past audit found surviving (each now caught by a test that reads the behaviour). Each mutant
changes one thing in place, runs the tests that execute the changed code (stopping at the first
failure), and restores the file. `make mutation` runs it (not part of `make test`).

    python -m tests.mutation [--only shell|spec|formats|audit] [--limit N] [--seed S] [--list]

First a clean run: the candidate tests, unmutated, with tests/mutation_trace.py recording which
test executes which line of each Python file to mutate and which node Job scripts each runs. If
any fails there is no score. The clean run is the baseline (its tests and time) and gives the map:
a mutant of a Python line goes to the tests that executed that line; a mutant of a script to the
tests that ran that script; fastest first. The candidates are derived too: for a script, every
test file that runs scripts against the fake API server; for a Python file, every test file that
imports its module, plus the corpus of stack files for the spec (SPEC_CORPUS). Tests that compare
text rather than behaviour (IDENTITY_TESTS) are never candidates: they would catch every mutant.

Outcomes: caught (the first failing test is named), survived, timed out (its own outcome, never
counted as caught), and not run (no test of the clean run executes the mutated code: a survivor
too). It refuses to run on files with uncommitted changes, so a mutant can always be undone from
git.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.mutation_trace import COLLECTION

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SCRIPTS = ROOT / "mig_inference" / "kube" / "scripts"
NODE_JOB_SCRIPTS = ("gate.sh", "kube.sh", "repartition.sh")
SPEC = ROOT / "mig_inference" / "spec"
FORMATS = SPEC / "formats.py"
SPEC_CORPUS = [
    "tests/spec/test_broken_stacks.py",
    "tests/render/test_stacks.py",
    "tests/spec/test_all_errors.py",
]
"""Test files that read whole stack files (shipped and broken): they reach every refusal rule
through `parse_stack`, which a module-level import map does not show."""
IDENTITY_TESTS = {
    "tests/render/test_golden_renders.py": "compares the rendered text (the scripts are in it)",
    "tests/project/test_contracts.py": "checks imports, not behaviour",
    "tests/project/test_wheel.py": "checks the package's files",
}
TIME_OUT_FACTOR = 3
"""A mutant's tests may take this many times their clean run (plus a minute) before the mutant
counts as timed out."""


@dataclass(frozen=True)
class Mutant:
    path: Path
    line: int
    """1-based line of the change."""
    operator: str
    before: str
    after: str
    """The file's whole text, mutated."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.path.suffix == ".sh":
            return "shell"
        return "formats" if self.path == FORMATS else "spec"


def _replaced_line(source: str, line: int, start: int, end: int, text: str) -> str:
    """`source` with columns start:end of 1-based `line` replaced by `text`."""
    lines = source.split("\n")
    lines[line - 1] = lines[line - 1][:start] + text + lines[line - 1][end:]
    return "\n".join(lines)


# -- shell scripts -----------------------------------------------------------------------------
GUARD = re.compile(r"(^\s*(if|elif|while) )|(\] (\|\||&&))|(\|\| stop )|(^\s*\[ )")
SHELL_OPERATORS: list[tuple[str, str, str]] = [
    ("-z to -n", r'\[ -z "', '[ -n "'),
    ("-n to -z", r'\[ -n "', '[ -z "'),
    ("= to !=", r'" = "', '" != "'),
    ("!= to =", r'" != "', '" = "'),
    ("-ge to -gt", r" -ge ", " -gt "),
    ("-lt to -le", r" -lt ", " -le "),
    ("-gt 0 to -gt 1", r" -gt 0 ", " -gt 1 "),
    ("negate is_in", r"(?<![!] )is_in ", "! is_in "),
    ("|| stop to || true", r"\|\| stop ", "|| true "),
]
CASE_BRANCH = re.compile(r"^(\s+)(failed|pending|success|rebooting)\)")


def shell_mutants() -> Iterator[Mutant]:
    for name in NODE_JOB_SCRIPTS:
        path = SCRIPTS / name
        source = path.read_text()
        for index, line in enumerate(source.split("\n")):
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
                after = _replaced_line(source, index + 1, 0, len(line), changed)
                yield Mutant(path, index + 1, label, source, after)


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
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.If) or not _refuses(node):
                continue
            test = node.test
            if test.lineno != test.end_lineno:
                continue  # one line only: the mutant is a text edit of that line
            segment = ast.get_source_segment(source, test)
            assert segment is not None and test.end_col_offset is not None
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
            for label, replacement in changes:
                after = _replaced_line(
                    source, test.lineno, test.col_offset, test.end_col_offset, replacement
                )
                yield Mutant(path, test.lineno, label, source, after)


# -- formats and bounds ------------------------------------------------------------------------
LETTER_FIRST = "[a-z]"
"""A pattern that must start with a letter: the mutant lets a digit start it too."""


def _literal_int(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def formats_mutants() -> Iterator[Mutant]:
    """Each `Format`'s length one longer and, where it must start with a letter, a digit let in
    first; each `Bound`'s literal maximum one higher and minimum one lower."""
    source = FORMATS.read_text()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        changes: list[tuple[str, ast.expr, str]] = []
        if node.func.id == "Format" and len(node.args) >= 3:
            length = _literal_int(node.args[2])
            if length is not None:
                changes.append(("max_length + 1", node.args[2], str(length + 1)))
            pattern = node.args[1]
            if isinstance(pattern, ast.Constant) and str(pattern.value).startswith(LETTER_FIRST):
                raw = ast.get_source_segment(source, pattern) or ""
                if LETTER_FIRST in raw:
                    let_in = raw.replace(LETTER_FIRST, "[a-z0-9]", 1)
                    changes.append(("a digit may start it", pattern, let_in))
        elif node.func.id == "Bound" and len(node.args) >= 2:
            for label, arg, step in (("minimum - 1", node.args[0], -1),
                                     ("maximum + 1", node.args[1], 1)):  # fmt: skip
                value = _literal_int(arg)
                if value is not None:
                    changes.append((label, arg, str(value + step)))
        for label, arg, text in changes:
            if arg.lineno != arg.end_lineno or arg.end_col_offset is None:
                continue
            after = _replaced_line(source, arg.lineno, arg.col_offset, arg.end_col_offset, text)
            yield Mutant(FORMATS, arg.lineno, label, source, after)


def held_key(mutant: Mutant) -> str:
    """The name of the format, or the source of the bound, whose definition `mutant` changes
    (as tests/mutation_trace.py records them); empty when it is not a module-level constant."""
    from mig_inference.spec import formats

    for node in ast.walk(ast.parse(mutant.before)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.lineno <= mutant.line <= (node.end_lineno or node.lineno):
            index = {"Format": 0, "Bound": 2}.get(node.func.id)
            if index is None or len(node.args) <= index:
                continue
            try:
                return str(eval(ast.unparse(node.args[index]), vars(formats)))
            except NameError:
                return ""
    return ""


# -- the audit's survivors ---------------------------------------------------------------------
AUDIT: list[tuple[str, str, str, str]] = [
    ("mig_inference/rollout/plugin_configs.py", "keys counted from every ConfigMap",
     "for name, keys in self.held.values() if name == self.read_from for key in keys",
     "for name, keys in self.held.values() for key in keys"),
    ("mig_inference/rollout/plugin_configs.py", "the chart's keys counted with create: false",
     'data = (config.get("data") or {}) if config.get("create") else {}',
     'data = config.get("data") or {}'),
    ("mig_inference/clouds/addons.py", "a joined EKS cluster without the FSx CSI add-on warned",
     '''f"EKS add-on {FSX_CSI_ADDON} with AmazonFSxFullAccess", Joined.REFUSED_WITHOUT,''',
     '''f"EKS add-on {FSX_CSI_ADDON} with AmazonFSxFullAccess", Joined.WARNED_WITHOUT,'''),
    ("mig_inference/clouds/capacity.py", "Capacity Block marks inverted",
     "if blocks and not CAPACITY_BLOCK_TYPES[name]:",
     "if blocks and CAPACITY_BLOCK_TYPES[name]:"),
    ("mig_inference/solving/model.py", "holds_by_counting skips a workload without a profile",
     "        if not mine:\n            return False\n",
     "        if not mine:\n            continue\n"),
    ("mig_inference/rollout/node_updates.py", "an OKE size change reaches only new nodes",
     '("nodeConfigDetails.size", Reach.SIZE, "size"),',
     '("nodeConfigDetails.size", Reach.NEW_NODES, "size"),'),
    ("mig_inference/kube/scripts/repartition.sh", "pace ignores a switched node with one free device",
     '[ "$node_cordoned" != true ] && [ "$free_count" -gt 0 ] || continue',
     '[ "$node_cordoned" != true ] && [ "$free_count" -gt 1 ] || continue'),
    ("mig_inference/spec/formats.py", "a Service name may start with a digit",
     'r"[a-z]([-a-z0-9]*[a-z0-9])?",\n    63,\n    "chat",',
     'r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",\n    63,\n    "chat",'),
]  # fmt: skip
"""(file, what the mutant does, the code, the mutated code), as the audit found them surviving."""


@dataclass
class Stale:
    """An audit mutant whose code is no longer in its file (rewrite the entry)."""

    path: str
    operator: str


def audit_mutants(stale: list[Stale]) -> Iterator[Mutant]:
    for relative, operator, code, mutated in AUDIT:
        path = ROOT / relative
        source = path.read_text()
        if source.count(code) != 1:
            stale.append(Stale(relative, operator))
            continue
        line = source[: source.index(code)].count("\n") + 1
        yield Mutant(path, line, f"audit: {operator}", source, source.replace(code, mutated))


# -- which tests ---------------------------------------------------------------------------------
def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imported_modules(test_file: Path) -> set[str]:
    """Every module a test file imports by name (`from a.b import c` counts a.b and a.b.c)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(test_file.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_files() -> list[Path]:
    return sorted(p for p in TESTS.glob("*/test_*.py")
                  if p.relative_to(ROOT).as_posix() not in IDENTITY_TESTS)  # fmt: skip


def candidates(mutants: Iterable[Mutant]) -> list[str]:
    """The test files of the clean run: those that can execute the mutated code."""
    files = test_files()
    wanted: set[Path] = set()
    for mutant in mutants:
        if mutant.kind == "shell":
            wanted.update(f for f in files if "run_script(" in f.read_text())
            continue
        module = _module_of(mutant.path)
        wanted.update(f for f in files if module in _imported_modules(f))
        if mutant.path.parent == SPEC:
            wanted.update(ROOT / name for name in SPEC_CORPUS)
    return sorted(p.relative_to(ROOT).as_posix() for p in wanted)


@dataclass
class CleanRun:
    """The unmutated run of the candidates: the baseline, and which test runs what."""

    passed: bool
    seconds: float
    output: str
    lines: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    scripts: dict[str, set[str]] = field(default_factory=dict)
    held_to: dict[str, set[str]] = field(default_factory=dict)
    """Per format (its name) or bound (its source): the tests that held a value to it."""
    test_seconds: dict[str, float] = field(default_factory=dict)

    def tests_of(self, mutant: Mutant) -> list[str]:
        if mutant.kind == "shell":
            found = self.scripts.get(mutant.path.name, set())
        else:
            found = set(self.lines.get(str(mutant.path), {}).get(mutant.line, set()))
        if COLLECTION in found:
            # Run when the tests were imported (a module's own lines, a table built at import):
            # every test of the clean run stands on it.
            found = set(self.test_seconds)
        if mutant.path == FORMATS and held_key(mutant):
            # A format or bound defined at module level runs at import: its tests are those
            # that held a value to it, not every test.
            found = set(self.held_to.get(held_key(mutant), set()))
        return sorted(found, key=lambda t: (self.test_seconds.get(t, 0.0), t))


def clean_run(files: list[str], mutants: list[Mutant]) -> CleanRun:
    python_files = sorted({str(m.path) for m in mutants if m.path.suffix == ".py"})
    with tempfile.TemporaryDirectory(prefix="mutation-trace-") as trace:
        env = {**os.environ, "MIG_MUTATION_FILES": os.pathsep.join(python_files),
               "MIG_MUTATION_TRACE": trace}  # fmt: skip
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "tests.mutation_trace", *files],
            cwd=ROOT, capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        result = CleanRun(run.returncode == 0, time.monotonic() - started, run.stdout + run.stderr)
        for worker in Path(trace).glob("*.json"):
            seen = json.loads(worker.read_text())
            for path, lines in seen["lines"].items():
                for number, tests in lines.items():
                    result.lines.setdefault(path, {}).setdefault(int(number), set()).update(tests)
            for name, tests in seen["scripts"].items():
                result.scripts.setdefault(name, set()).update(tests)
            for key, tests in seen["held_to"].items():
                result.held_to.setdefault(key, set()).update(tests)
            result.test_seconds.update(seen["seconds"])
    return result


# -- running -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    outcome: str
    """caught, survived, timed out or not run."""
    seconds: float
    test: str = ""
    """The first test that failed (caught), or how many ran (survived)."""


FAILED_LINE = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)


def run_mutant(mutant: Mutant, tests: list[str], budget: float) -> Verdict:
    if not tests:
        return Verdict("not run", 0.0, "no test of the clean run executes it")
    started = time.monotonic()
    mutant.path.write_text(mutant.after)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider",
             "-rfE", *tests],
            cwd=ROOT, capture_output=True, text=True, timeout=budget, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Verdict("timed out", time.monotonic() - started, f"after {budget:.0f}s")
    finally:
        mutant.path.write_text(mutant.before)
    seconds = time.monotonic() - started
    if run.returncode == 0:
        return Verdict("survived", seconds, f"{len(tests)} tests passed")
    failed = FAILED_LINE.search(run.stdout)
    return Verdict(
        "caught", seconds, failed.group(2) if failed else f"pytest exit {run.returncode}"
    )


def clean(paths: set[Path]) -> bool:
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", *map(str, paths)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return not changed.strip()


def all_mutants(only: str | None, stale: list[Stale]) -> list[Mutant]:
    kinds = {
        "audit": lambda: audit_mutants(stale),
        "shell": shell_mutants,
        "spec": spec_mutants,
        "formats": formats_mutants,
    }
    found: dict[tuple[Path, str], Mutant] = {}
    for kind, make in kinds.items():
        if only in (None, kind):
            for mutant in make():
                found.setdefault((mutant.path, mutant.after), mutant)  # the same edit once
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["shell", "spec", "formats", "audit"])
    parser.add_argument("--limit", type=int, default=0, help="at most N mutants (a sample)")
    parser.add_argument("--seed", type=int, default=0, help="which sample (with --limit)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    args = parser.parse_args(argv)
    stale: list[Stale] = []
    mutants = all_mutants(args.only, stale)
    for entry in stale:
        print(f"stale audit mutant (its code is gone from {entry.path}): {entry.operator}")
    total = len(mutants)
    if args.limit and args.limit < total:
        mutants = sorted(random.Random(args.seed).sample(mutants, args.limit),
                         key=lambda m: (str(m.path), m.line))  # fmt: skip
    sample = f" (a sample of {total}, seed {args.seed})" if len(mutants) < total else ""
    if args.list:
        for mutant in mutants:
            print(f"{mutant.where}: {mutant.operator}")
        print(f"{len(mutants)} of {total} mutants")
        return 0
    if not clean({m.path for m in mutants}):
        print("refused: the files to mutate have uncommitted changes (commit or stash them)")
        return 2
    files = candidates(mutants)
    print(f"clean run: {len(files)} test files, unmutated, tracing what each test runs", flush=True)
    baseline = clean_run(files, mutants)
    if not baseline.passed:
        print(baseline.output[-5000:])
        print(f"no score: the clean run failed ({baseline.seconds:.0f}s)")
        return 2
    print(f"baseline: {len(baseline.test_seconds)} tests passed unmutated in "
          f"{baseline.seconds:.0f}s", flush=True)  # fmt: skip
    verdicts: list[tuple[Mutant, Verdict]] = []
    for number, mutant in enumerate(mutants, 1):
        tests = baseline.tests_of(mutant)
        budget = TIME_OUT_FACTOR * sum(baseline.test_seconds.get(t, 0.0) for t in tests) + 60
        verdict = run_mutant(mutant, tests, budget)
        verdicts.append((mutant, verdict))
        print(f"[{number}/{len(mutants)}] {mutant.where} {mutant.operator}: {verdict.outcome}"
              f" ({verdict.test}; {verdict.seconds:.0f}s)", flush=True)  # fmt: skip
    counts = {o: sum(v.outcome == o for _, v in verdicts)
              for o in ("caught", "survived", "timed out", "not run")}  # fmt: skip
    print(f"mutation score: {counts['caught']}/{len(mutants)} caught{sample}; survived "
          f"{counts['survived']}, timed out {counts['timed out']}, not run {counts['not run']}; "
          f"baseline {len(baseline.test_seconds)} tests in {len(files)} files passed in "
          f"{baseline.seconds:.0f}s")  # fmt: skip
    for mutant, verdict in verdicts:
        if verdict.outcome != "caught":
            print(f"{verdict.outcome}: {mutant.where} {mutant.operator}")
    return 0 if counts["caught"] == len(mutants) and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
