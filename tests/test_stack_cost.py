"""`plan` prices a stack: whole nodes per pool, each slice's share of its GPU, each service."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mig_inference.clouds.prices import load_prices
from mig_inference.plan import plan_stack
from mig_inference.reports.stack_cost import stack_cost
from mig_inference.spec.files import load_stack


def test_pool_slices_and_services_of_the_demand_stack() -> None:
    cost = stack_cost(plan_stack(load_stack("eks-p4de-demand")), load_prices())
    node = load_prices()["p4de.24xlarge"].on_demand
    assert node is not None
    [pool] = cost.pools
    assert pool.min_per_hour == pool.max_per_hour == pytest.approx(node)
    one_1g = cost.slices["a100-balanced"]["nvidia.com/mig-1g.10gb"]
    assert one_1g == pytest.approx(node / 8 / 7)
    one_2g = cost.slices["a100-balanced"]["nvidia.com/mig-2g.20gb"]
    one_3g = cost.slices["a100-balanced"]["nvidia.com/mig-3g.40gb"]
    assert cost.services["summarize"] == pytest.approx(8 * one_2g + 3 * one_3g)
    assert sum(cost.services.values()) <= pool.max_per_hour


def test_spot_pools_are_priced_at_spot_and_existing_nodes_are_not_priced() -> None:
    gke = stack_cost(plan_stack(load_stack("gke-h100")), load_prices())
    assert gke.pools[0].spot and gke.pools[0].node_per_hour == load_prices()["a3-highgpu-8g"].spot
    existing = stack_cost(plan_stack(load_stack("existing")), load_prices())
    assert not existing.pools and existing.unpriced[0].startswith("lab-h100: existing nodes")


def test_autoscaled_pools_are_priced_from_fewest_to_most_nodes() -> None:
    plan = plan_stack(load_stack("eks-p5-from-zero"))  # a spot pool: no sourced spot price
    assert stack_cost(plan, load_prices()).unpriced == (
        "h100-burst: no spot price for p5.48xlarge (no sourced spot price found; source: "
        "aws/karpenter-provider-aws `pkg/providers/pricing/zz_generated.pricing_aws.go`, "
        "generated 2026-07-20); give one with --prices FILE (spot:)",
    )
    prices = load_prices()
    prices["p5.48xlarge"] = replace(prices["p5.48xlarge"], spot=20.0)
    [pool] = stack_cost(plan, prices).pools
    assert pool.min_per_hour == 0 and pool.max_per_hour == 40.0


def test_plan_takes_a_price_file(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "machines:\n  p4de.24xlarge: {on_demand: 14, date: 2026-11-01, source: our quote}\n"
    )
    found = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack", "eks-p4de-demand", "--prices",
         str(prices), "--json"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    cost = json.loads(found.stdout)["cost"]
    assert (
        cost["pools"][0]["node_per_hour"] == 14 and cost["pools"][0]["price_source"] == "our quote"
    )
    text = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack", "eks-p4de-demand", "--prices", str(prices)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert (
        "pool a100-balanced: $14.00 (p4de.24xlarge on-demand at $14.00/h per node; our quote, 2026-11-01, your file)"
        in text
    )
