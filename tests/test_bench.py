"""The benchmark's demand and cost scenarios (their timings are reported, never asserted)."""

from __future__ import annotations

from mig_inference.clouds.prices import load_prices
from mig_inference.solving.bench import (
    _cost_row,
    _demand_rows,
    fleet_growth,
    llm_fleet,
    scaled,
    stack_growth,
)


def test_demand_rows_report_the_papers_counts_beside_proven_ones() -> None:
    rows = [r for r in _demand_rows() if r.scenario.startswith("ParvaGPU")]
    assert len(rows) == 12 and all(r.optimal and r.lower_bound <= r.gpus for r in rows)
    mps = [r for r in rows if "(mps)" in r.scenario]
    assert all(r.published_gpus is not None and r.gpus <= r.published_gpus for r in mps)


def test_cost_rows_never_cost_more_than_the_homogeneous_choice() -> None:
    row = _cost_row("x", scaled(llm_fleet(), 10), "eks", spot=False)
    price = load_prices()[row.machine].on_demand
    assert price is not None and row.per_hour == row.nodes * price
    assert row.per_hour <= row.homogeneous_per_hour and row.proven


def test_growth_rows_time_the_planner_and_the_program_per_size() -> None:
    rows = fleet_growth(7, quick=True) + stack_growth(quick=True)
    assert [(r.what, r.size) for r in rows] == [
        ("replicas", 1000), ("replicas", 10_000), ("services", 1), ("services", 10),
    ]  # fmt: skip
    assert all(r.seconds > 0 and r.cpu_seconds > 0 for r in rows)


def test_the_uniform_demand_row_is_proven_from_the_free_bound() -> None:
    [row] = [r for r in _demand_rows(quick=True) if "demands" in r.scenario]
    assert row.optimal and row.gpus % 8 == 0
