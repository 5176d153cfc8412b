"""The benchmark's demand and cost scenarios (their timings are reported, never asserted)."""

from __future__ import annotations

from mig_inference.clouds.prices import load_prices
from mig_inference.solving.bench import _cost_row, _demand_rows, llm_fleet, scaled


def test_demand_rows_report_the_papers_counts_beside_proven_ones() -> None:
    rows = _demand_rows()
    assert len(rows) == 12 and all(r.optimal and r.lower_bound <= r.gpus for r in rows)
    mps = [r for r in rows if "(mps)" in r.scenario]
    assert all(r.published_gpus is not None and r.gpus <= r.published_gpus for r in mps)


def test_cost_rows_never_cost_more_than_the_homogeneous_choice() -> None:
    row = _cost_row("x", scaled(llm_fleet(), 10), "eks", spot=False)
    price = load_prices()[row.machine].on_demand
    assert price is not None and row.per_hour == row.nodes * price
    assert row.per_hour <= row.homogeneous_per_hour and row.proven
