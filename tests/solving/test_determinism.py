"""A plan is a function of its input alone: the same fleet, packed beside two CPU hogs and with
another hash seed, prints byte-identical JSON (the reported solve times aside). A solver stage
that stopped on a wall-clock budget would return another of several plans when starved of CPU,
and a flipped `mig: auto` layout is a new pool generation (its GPU nodes replaced for nothing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from mig_inference.solving.bench import demand_fleet
from mig_inference.solving.throughput import parvagpu_scenarios

ROOT = Path(__file__).resolve().parent.parent.parent
SECONDS = re.compile(r'"(cpu_)?seconds": [0-9.e+-]+')
"""The two timings `pack --json` prints: wall and CPU seconds of the solve."""


def _fleet_file(path: Path, scenario: str) -> Path:
    sharing = "mps" if "(mps)" in scenario else "single"
    [found] = [s for s in parvagpu_scenarios(sharing) if s.name == scenario]
    rows = [
        {"name": w.name, "requests_per_second": w.requests_per_second,
         "throughput": dict(w.throughput)}
        for w in found.workloads
    ]  # fmt: skip
    path.write_text(yaml.safe_dump({"workloads": rows}))
    return path


def _run(argv: list[str], hash_seed: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mig", *argv], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return SECONDS.sub(r'"\1seconds": 0', done.stdout)


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """Busy loops in other processes, taking the CPUs the solver would use."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.fixture(scope="module")
def commands(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    """ParvaGPU's scenarios whose preferences used to stop on a time budget (SLO4 and SLO5 had
    flipped between runs, SLO6 with MPS needs three layouts), a demand fleet on identical nodes,
    and the stack with a `mig: auto` pool."""
    where = tmp_path_factory.mktemp("fleets")
    runs = [
        ["pack", str(_fleet_file(where / f"{name.replace(' ', '')}.yaml", name)), "--gpu", "A100-80GB",
         "--json"]
        for name in ("SLO4 (single)", "SLO5 (single)", "SLO5 (mps)", "SLO6 (mps)")
    ]  # fmt: skip
    demand = [
        {"name": w.name, "requests_per_second": w.requests_per_second,
         "throughput": dict(w.throughput)}
        for w in demand_fleet(12, seed=3)
    ]  # fmt: skip
    (where / "demand.yaml").write_text(yaml.safe_dump({"workloads": demand}))
    runs.append(
        ["pack", str(where / "demand.yaml"), "--gpu", "A100-80GB", "--gpus-per-node", "8",
         "--uniform-nodes", "--json"]
    )  # fmt: skip
    runs.append(["plan", "--stack", "eks-p5-auto", "--json"])
    return runs


def test_the_same_input_gives_byte_identical_plans_under_contention(
    commands: list[list[str]],
) -> None:
    quiet = [_run(argv, hash_seed="0") for argv in commands]
    with cpu_hogs(2):
        loaded = [_run(argv, hash_seed="12345") for argv in commands]
    for argv, alone, beside_hogs in zip(commands, quiet, loaded, strict=True):
        assert alone == beside_hogs, " ".join(argv[:2])
