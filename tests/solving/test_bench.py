"""The benchmark's scenarios and goals (their timings are reported, never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mig_inference
from mig_inference.cli import bench_processes
from mig_inference.cli.bench_processes import (
    BASELINE,
    goals_text,
    measure_goals,
    paired_cpu,
    process_cpu,
)
from mig_inference.clouds.prices import load_prices
from mig_inference.render import run_program
from mig_inference.solving.bench import (
    BenchResult,
    DemandRow,
    _cost_row,
    _demand_rows,
    _parvagpu_text,
    fleet_growth,
    llm_fleet,
    parvagpu_side_by_side,
    scaled,
    stack_growth,
)


def test_demand_rows_report_the_papers_counts_beside_proven_ones() -> None:
    rows = [r for r in _demand_rows() if r.scenario.startswith("ParvaGPU")]
    assert len(rows) == 12 and all(r.optimal and r.lower_bound <= r.gpus for r in rows)
    mps = [r for r in rows if "(mps)" in r.scenario]
    assert all(r.published_gpus is not None and r.gpus <= r.published_gpus for r in mps)
    # The paper deployed with MPS only: a single-process row has no published count to beat.
    single = [r for r in rows if "(single)" in r.scenario]
    assert len(single) == 6 and all(r.published_gpus is None for r in single)


def test_cost_rows_never_cost_more_than_the_homogeneous_choice() -> None:
    row = _cost_row("x", scaled(llm_fleet(), 10), "eks", spot=False)
    price = load_prices()[row.machine].on_demand
    assert price is not None and row.per_hour == row.nodes * price
    assert row.per_hour <= row.homogeneous_per_hour and row.proven


def test_growth_rows_time_the_planner_and_the_program_per_size() -> None:
    rows = fleet_growth(7, quick=True) + stack_growth(run_program, quick=True)
    assert [(r.what, r.size) for r in rows] == [
        ("replicas", 1000), ("replicas", 10_000), ("services", 1), ("services", 10),
    ]  # fmt: skip
    assert all(r.seconds > 0 and r.cpu_seconds > 0 for r in rows)


def test_the_uniform_demand_row_is_proven_from_the_free_bound() -> None:
    [row] = [r for r in _demand_rows(quick=True) if "demands" in r.scenario]
    assert row.optimal and row.gpus % 8 == 0


def _fake_parvagpu(directory: Path, body: str) -> Path:
    """A stand-in for ParvaGPU's built scheduler: a script answering as its main() prints."""
    binary = directory / "parva_sched"
    binary.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    binary.chmod(0o755)
    return binary


DEMAND = [
    DemandRow("ParvaGPU SLO2 (single)", "A100-80GB", 11, 3, 3, True, 3, 0.02, 0.01),
    DemandRow("ParvaGPU SLO6 (mps)", "A100-80GB", 11, 15, 15, True, 16, 0.2, 0.1),
    DemandRow("200 demands, nodes of 8", "A100-80GB", 200, 496, 496, True, None, 9.0, 8.0),
]


def test_parvagpu_runs_in_its_directory_per_slo_row_beside_the_planners_row(
    tmp_path: Path,
) -> None:
    """Each sharing mode's binary runs on the SLO row of its own scenarios only, from its own
    directory (it reads ./SLO and ./prof_data), and its GPU count and clock are read back."""
    (tmp_path / "SLO").mkdir()
    binary = _fake_parvagpu(
        tmp_path,
        'test -d SLO || exit 3\necho "Scenario $1 selected"\n'
        'echo "ParvaGPU | num of gpu: $(($1 + 10))"\n'
        'echo "ParvaGPU | scheduling time: 0.004500 sec"',
    )
    comparison = parvagpu_side_by_side({"single": None, "mps": binary}, DEMAND)
    assert comparison.skipped is None
    [row] = comparison.rows
    assert (row.scenario, row.planner_gpus, row.parvagpu_gpus) == ("SLO6 (mps)", 15, 16)
    assert row.parvagpu_schedule_seconds == 0.0045 and row.parvagpu_wall_seconds > 0
    [line] = [line for line in _parvagpu_text(comparison) if line.startswith("SLO6 (mps)")]
    assert line.split()[2:7] == ["15", "0.100", "|", "16", "0.0045"]
    assert line.split()[-2] == "0.94"  # 15 GPUs / 16
    # `bench --json` carries the side by side's rows, nested objects and all.
    shown = json.loads(
        json.dumps(BenchResult("A100-80GB", [], 1.0, DEMAND, [], [], comparison).as_json())
    )
    assert [r["parvagpu_gpus"] for r in shown["parvagpu"]["rows"]] == [16]


def test_parvagpu_is_skipped_with_the_reason_when_absent_or_unreadable(tmp_path: Path) -> None:
    assert parvagpu_side_by_side({"mps": None}, DEMAND).skipped == (
        "no ParvaGPU binary given (--parvagpu-bin, --parvagpu-single-bin)"
    )
    missing = tmp_path / "nowhere" / "parva_sched"
    assert parvagpu_side_by_side({"mps": missing}, DEMAND).skipped == (
        f"{missing} is not an executable file"
    )
    broken = _fake_parvagpu(tmp_path, "echo Segmentation fault; exit 139")
    skipped = parvagpu_side_by_side({"single": broken}, DEMAND)
    assert skipped.rows == [] and skipped.skipped == (
        f"{broken} 2 exited 139 without a GPU count and scheduling time"
    )
    assert _parvagpu_text(skipped)[0].endswith(f"skipped ({skipped.skipped})")


def test_a_process_cpu_figure_comes_from_the_finished_child() -> None:
    busy = [sys.executable, "-c", "sum(range(20_000_000))"]
    baseline = [sys.executable, *BASELINE]
    assert process_cpu(busy) > process_cpu(baseline) > 0
    with pytest.raises(RuntimeError, match="exited 3"):
        process_cpu([sys.executable, "-c", "raise SystemExit(3)"])
    timed = paired_cpu(busy, baseline, pairs=2)
    assert timed.pairs == 2 and timed.command > timed.baseline and timed.ratio > 1


def test_start_up_is_measured_as_an_installed_wheel_starts(tmp_path: Path) -> None:
    """The start-up interpreter finds the package and its libraries, and imports no editable
    install's finder (this environment's interpreter does, where the package is editable)."""
    python = bench_processes.installed_interpreter(tmp_path / "installed")
    script = (
        "import sys, mig_inference, yaml, msgspec\n"
        "print(mig_inference.__file__)\n"
        "print(sorted(m for m in sys.modules if 'editable' in m))\n"
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True)
    found, finders = done.stdout.splitlines()
    assert Path(found).resolve() == Path(mig_inference.__file__).resolve()
    assert finders == "[]"
    [script] = bench_processes.installed_script(python)
    assert Path(script).read_text().startswith(f"#!{python}\n")
    listed = subprocess.run([script, "gpus", "--json"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "H100-80GB" in listed.stdout


def test_the_goals_are_measured_on_the_installed_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """A smoke run of every goal: start-up pairs, numpy, cpu_seconds, bytecode, SLO6 from the
    demand rows; the diff goal on a one-service stack (its 1,000-service run is the bench's)."""
    monkeypatch.chdir(Path(__file__).resolve().parent.parent.parent)
    slo6 = DEMAND[1]
    diff_sizes: list[int] = []
    real_diff_goal = bench_processes._diff_goal

    def one_service_diff(directory: Path, services: int) -> bench_processes.Goal:
        diff_sizes.append(services)
        return real_diff_goal(directory, 1)

    monkeypatch.setattr(bench_processes, "_diff_goal", one_service_diff)
    goals = measure_goals([slo6], quick=True)
    assert diff_sizes == [10] and goals.skipped == []
    by_goal = {g.goal.split(":")[0]: g for g in goals.goals}
    assert by_goal["ParvaGPU SLO6 with MPS"].ratio == pytest.approx(0.1 / 0.025)
    assert not by_goal["ParvaGPU SLO6 with MPS"].met
    startup = [g for g in goals.goals if "python -c 'import yaml, json'" in g.goal]
    assert len(startup) == 2 and all(g.ratio is not None and g.ratio > 1 for g in startup)
    assert by_goal["numpy imported by plan --stack gke-h100 / pack SLO1 (single)"].met
    assert by_goal["pack --json carries the solve's cpu_seconds"].met
    assert by_goal["diff of 1 services"].ratio is not None
    [bytecode] = [g for g in goals.goals if "compiled bytecode" in g.goal]
    assert bytecode.ratio is not None and 0 <= bytecode.ratio <= 1
    assert bytecode.measured.startswith("environment ") and "standard library" in bytecode.measured
    text = "\n".join(goals_text(goals))
    assert f"{os.cpu_count()} cores" in text and "load average" in text
