"""The benchmark's measurements of whole commands: the goals of issue 52 measured on the
installed command, each run a fresh process whose CPU time (user + system) comes from the
kernel's accounting of the finished child.

Timings are measurements on whatever machine runs them, reported, never asserted.
"""

from __future__ import annotations

import json
import os
import platform
import site
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import yaml
from msgspec import Struct, field

from mig_inference.solving.bench import DemandRow, installed_command, services_stack
from mig_inference.solving.fleet import fleet_document
from mig_inference.solving.throughput import parvagpu_scenarios

BASELINE = ["-c", "import yaml, json"]
"""What start-up is compared with: the interpreter reading the two libraries every verb needs
(run by `installed_interpreter`)."""
STARTUP_STACK = "gke-h100"
PAIRS = 7
"""Measured pairs of runs per start-up comparison (after one warm-up pair)."""
SLO6_TARGET_SECONDS = 0.025
STARTUP_TARGET_RATIO = 3.0
DIFF_TARGET_RATIO = 2.0


def process_cpu(argv: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    """CPU seconds (user + system) of one run of `argv`, as the kernel accounts the finished
    process (`wait4`); its output is discarded. A failed run is an error, not a figure."""
    child = subprocess.Popen(
        list(argv), env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert child.stderr is not None
    error = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}: {error.decode()[-400:]}")
    return usage.ru_utime + usage.ru_stime


class Paired(Struct, frozen=True):
    """Two commands run in turn (A B A B ...): each one's median CPU, and the median of the
    ratios pair by pair (which holds when the machine's speed drifts between pairs)."""

    command: float
    baseline: float
    ratio: float
    pairs: int


def paired_cpu(
    command: Sequence[str],
    baseline: Sequence[str],
    env: Mapping[str, str] | None = None,
    pairs: int = PAIRS,
) -> Paired:
    process_cpu(command, env)  # warm-up: caches, bytecode written where allowed
    process_cpu(baseline, env)
    runs = [(process_cpu(command, env), process_cpu(baseline, env)) for _ in range(pairs)]
    return Paired(
        statistics.median(a for a, _ in runs),
        statistics.median(b for _, b in runs),
        statistics.median(a / b for a, b in runs),
        pairs,
    )


def cached_bytecode_env(prefix: Path) -> dict[str, str]:
    """The environment of a run whose modules' bytecode is read from (and, on the warm-up,
    written to) `prefix`: as in an environment installed with compiled bytecode, whatever
    `PYTHONDONTWRITEBYTECODE` the caller has."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(prefix)}


IMPORTED = (
    "import io, json, os, sys, sysconfig\n"
    "from mig_inference.cli import main\n"
    "argv = json.loads(sys.argv[1])\n"
    "sys.stdout, shown = io.StringIO(), sys.stdout\n"
    "code = main(argv)\n"
    "answer = sys.stdout.getvalue()\n"
    "installed = {os.path.realpath(sysconfig.get_paths()[k]) for k in ('purelib', 'platlib')}\n"
    "kinds = {'environment': [0, 0], 'editable': [0, 0], 'standard library': [0, 0]}\n"
    "for module in list(sys.modules.values()):\n"
    "    cached, source = getattr(module, '__cached__', None), getattr(module, '__file__', None)\n"
    "    if not cached or not source:\n"
    "        continue\n"
    "    where = os.path.realpath(source)\n"
    "    kind = ('environment' if any(where.startswith(p + os.sep) for p in installed)\n"
    "            else 'editable' if module.__name__.split('.')[0] == 'mig_inference'\n"
    "            else 'standard library')\n"
    "    kinds[kind][0] += 1\n"
    "    kinds[kind][1] += os.path.exists(cached)\n"
    "print(json.dumps({'code': code, 'numpy': 'numpy' in sys.modules, 'modules': kinds,\n"
    "    'answer': answer}), file=shown)\n"
)
"""Runs one verb in a fresh interpreter and reports what it imported: numpy or not, and how
many of its modules (those of the environment, the package's own when it is an editable
install outside it, and the standard library's) found compiled bytecode."""


def imported_by(argv: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED, json.dumps(list(argv))], env=None if env is None
        else dict(env), capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr[-400:]}")
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


class Goal(Struct, frozen=True):
    """One goal of issue 52 as measured here: what, the figures, the ratio the goal bounds
    (None for a yes/no goal) and its bound, and whether it is met."""

    goal: str
    measured: str
    target: str
    """The bound on `ratio`, or the answer a yes/no goal wants."""
    ratio: float | None
    met: bool


class Goals(Struct, frozen=True):
    machine: str
    load_before: float
    load_after: float
    goals: list[Goal] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def machine() -> str:
    """Cores, CPU model and memory of this machine."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (OSError, ValueError):
        memory = ""
    return f"{os.cpu_count()} cores ({model}){memory}"


def installed_interpreter(directory: Path) -> str:
    """An interpreter in `directory` that starts as one with the package installed from its
    wheel: a virtualenv without pip whose one `.pth` file lists the folders this interpreter
    finds libraries in (its site-packages, the system's for a venv that sees them, the user's
    when enabled), and the package's root when it is in none of them (an editable install).
    An editable install's own `.pth` imports its finder (pathlib, urllib.parse, fnmatch with
    it) as every interpreter of the environment starts, the baseline's too: measured there,
    the start-up ratios read about 15-20% lower than an installed wheel's. The listed folders'
    own `.pth` files are not run (setuptools' distutils shim among them: a fraction of a ms)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(directory)
    folders = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    paths = dict.fromkeys(str(Path(folder).resolve()) for folder in folders)
    root = Path(__file__).resolve().parents[2]
    if str(root) not in paths:
        paths[str(root)] = None
    own = {"base": str(directory), "platbase": str(directory)}
    library = Path(sysconfig.get_path("purelib", "venv", vars=own))
    (library / "environment.pth").write_text("".join(f"{path}\n" for path in paths))
    return str(directory / "bin" / "python")


def installed_script(python: str) -> list[str]:
    """The command line as an installed wheel runs it: this environment's `mig-inference`
    entry-point script (what pip writes) with `python`'s shebang, beside it; `python -m
    mig_inference` where there is none (which also imports runpy, ~3 ms)."""
    entry, *module = installed_command()
    if module:
        return [python, *module]
    _, body = Path(entry).read_text(encoding="utf-8").split("\n", 1)
    script = Path(python).parent / Path(entry).name
    script.write_text(f"#!{python}\n{body}", encoding="utf-8")
    script.chmod(0o755)
    return [str(script)]


def _startup_goals(directory: Path, pairs: int) -> list[Goal]:
    """`plan` of a shipped stack and `pack` of ParvaGPU's SLO1 against the baseline, bytecode
    cached, both run as an installed wheel's interpreter starts (`installed_interpreter`,
    the command by its entry-point script, `installed_script`); then, in a fresh interpreter
    each, whether they import numpy, and whether `pack --json` carries the solve's CPU
    seconds."""
    env = cached_bytecode_env(directory / "bytecode")
    python = installed_interpreter(directory / "installed")
    command = installed_script(python)
    fleet = directory / "slo1.yaml"
    fleet.write_text(
        yaml.safe_dump(fleet_document(list(parvagpu_scenarios("single")[0].workloads)))
    )
    commands = {
        f"plan --stack {STARTUP_STACK}": ["plan", "--stack", STARTUP_STACK, "--json"],
        "pack SLO1 (single)": ["pack", str(fleet), "--gpu", "A100-80GB", "--json"],
    }
    goals = []
    for name, argv in commands.items():
        timed = paired_cpu([*command, *argv], [python, *BASELINE], env, pairs)
        goals.append(
            Goal(
                f"{name}: process CPU vs python -c 'import yaml, json'"
                " (as installed, bytecode cached)",
                f"{timed.command:.3f} s / {timed.baseline:.3f} s (medians of {pairs} pairs)",
                f"<= {STARTUP_TARGET_RATIO:g}x", timed.ratio, timed.ratio <= STARTUP_TARGET_RATIO,
            )
        )  # fmt: skip
    numpy = {name: imported_by(argv, env) for name, argv in commands.items()}
    goals.append(
        Goal(
            "numpy imported by " + " / ".join(commands),
            " / ".join("yes" if found["numpy"] else "no" for found in numpy.values()),
            "no", None, not any(found["numpy"] for found in numpy.values()),
        )
    )  # fmt: skip
    packed = json.loads(str(numpy["pack SLO1 (single)"]["answer"]))
    carried = isinstance(packed.get("cpu_seconds"), int | float)
    goals.append(
        Goal(
            "pack --json carries the solve's cpu_seconds",
            f"cpu_seconds {packed['cpu_seconds']:.4f}, seconds {packed['seconds']:.4f}"
            if carried else "absent",
            "present", None, carried,
        )
    )  # fmt: skip
    return goals


def _bytecode_goal() -> Goal:
    """Of the modules `plan` imports from the environment (its site-packages, where a wheel
    installs the package too), how many find compiled bytecode, with Python forbidden to write
    any (as in an image with PYTHONDONTWRITEBYTECODE)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    found = imported_by(["plan", "--stack", STARTUP_STACK, "--json"], env)
    kinds: dict[str, list[int]] = found["modules"]  # type: ignore[assignment]
    modules, cached = kinds["environment"]
    counts = "; ".join(f"{kind} {n[1]} of {n[0]}" for kind, n in kinds.items() if n[0])
    if kinds["editable"][0]:
        counts += " (the package is an editable install here: its bytecode is the clone's)"
    return Goal(
        "share of the environment's modules plan imports that find compiled bytecode",
        counts, ">= 1x all", cached / max(modules, 1), cached == modules,
    )  # fmt: skip


def _slo6_goal(demand: Sequence[DemandRow]) -> Goal | None:
    row = next((d for d in demand if d.scenario == "ParvaGPU SLO6 (mps)"), None)
    if row is None:
        return None
    return Goal(
        "ParvaGPU SLO6 with MPS: the solve's CPU, every preference stage proven",
        f"{row.cpu_seconds:.3f} s, {row.gpus} GPUs, stages proven: "
        f"{'yes' if row.preferences_proven else 'no'}",
        f"<= 1x {SLO6_TARGET_SECONDS * 1000:g} ms",
        row.cpu_seconds / SLO6_TARGET_SECONDS,
        row.cpu_seconds <= SLO6_TARGET_SECONDS and row.preferences_proven,
    )


def _diff_goal(directory: Path, services: int) -> Goal:
    """`diff` of a stack of `services` services with itself and with one service changed,
    against `render` of it: each a fresh process of the installed command."""
    stack = services_stack(services)
    path = directory / f"Pulumi.services-{services}.yaml"
    path.write_text(yaml.safe_dump(stack), encoding="utf-8")
    changed = yaml.safe_load(yaml.safe_dump(stack))
    changed["config"]["mig-inference:services"][0]["replicas"] = 2
    deployed = directory / f"Pulumi.services-{services}-deployed.yaml"
    deployed.write_text(yaml.safe_dump(changed), encoding="utf-8")
    command = installed_command()
    render = process_cpu([*command, "render", "--stack-file", str(path), "--out",
                          str(directory / "render"), "--json"])  # fmt: skip
    itself = process_cpu([*command, "diff", "--stack-file", str(path), "--deployed", str(path),
                          "--json"])  # fmt: skip
    change = process_cpu([*command, "diff", "--stack-file", str(path), "--deployed",
                          str(deployed), "--json"])  # fmt: skip
    worst = max(itself, change) / render
    return Goal(
        f"diff of {services:,} services: process CPU vs its render's",
        f"itself {itself:.1f} s, one service changed {change:.1f} s / render {render:.1f} s",
        f"<= {DIFF_TARGET_RATIO:g}x",
        worst,
        worst <= DIFF_TARGET_RATIO,
    )


def measure_goals(demand: Sequence[DemandRow], quick: bool = False) -> Goals:
    """Each goal of issue 52 measured on this machine, with the load average before and
    after. With `quick`, fewer pairs and a 10-service `diff` (a smoke run of the same code)."""
    load_before = os.getloadavg()[0]
    goals: list[Goal] = []
    skipped: list[str] = []
    steps: list[tuple[str, Callable[[Path], list[Goal]]]] = [
        ("start-up", lambda d: _startup_goals(d, 2 if quick else PAIRS)),
        ("bytecode", lambda _: [_bytecode_goal()]),
        ("diff", lambda d: [_diff_goal(d, 10 if quick else 1000)]),
    ]
    slo6 = _slo6_goal(demand)
    if slo6 is not None:
        goals.append(slo6)
    shipped = (Path.cwd() / "stacks" / f"Pulumi.{STARTUP_STACK}.yaml").is_file()
    with tempfile.TemporaryDirectory() as directory:
        for name, step in steps:
            if name != "diff" and not shipped:
                skipped.append(f"{name}: needs the shipped stacks/ (run it from the repository)")
                continue
            goals += step(Path(directory))
    return Goals(machine(), load_before, os.getloadavg()[0], goals, skipped)


def goals_text(goals: Goals) -> list[str]:
    lines = [
        f"goals of issue 52, on {goals.machine}; load average {goals.load_before:.2f} before, "
        f"{goals.load_after:.2f} after",
    ]
    header = f"{'goal':<80} {'ratio':>6} {'target':>13} {'met':>3}"
    lines += [header, "-" * len(header)]
    for g in goals.goals:
        ratio = f"{g.ratio:.2f}x" if g.ratio is not None else "-"
        lines.append(f"{g.goal:<80} {ratio:>6} {g.target:>13} {'yes' if g.met else 'no':>3}")
        lines.append(f"    {g.measured}")
    lines += [f"skipped: {reason}" for reason in goals.skipped]
    return lines


def goals_json(goals: Goals) -> dict[str, object]:
    return {
        "machine": goals.machine,
        "load_average": [goals.load_before, goals.load_after],
        "goals": [
            {"goal": g.goal, "measured": g.measured, "ratio": g.ratio, "target": g.target,
             "met": g.met}
            for g in goals.goals
        ],
        "skipped": goals.skipped,
    }  # fmt: skip
