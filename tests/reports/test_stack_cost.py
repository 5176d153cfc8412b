"""`plan` prices a stack: whole nodes per pool, each slice's share of its GPU, each service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from mig_inference.clouds.prices import load_price_tables, load_prices
from mig_inference.errors import MigError
from mig_inference.gpus.sizing import GIB
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.reports.stack_cost import cost_text, stack_cost
from mig_inference.spec.files import load_stack
from tests.plan.test_model_cache import _with_cache


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


# -- the model cache's storage, beside the GPUs --------------------------------------------


def _cached(stack: str, cache: dict[str, Any]) -> StackPlan:
    return _with_cache(stack, cache)


def test_bucket_storage_is_priced_per_gib_stored_once() -> None:
    plan = _cached("gke-h100", {"storage": "gcs-fuse"})
    cache = stack_cost(plan, *load_price_tables()).cache
    assert cache is not None and cache.price is not None
    assert plan.model_cache is not None
    stored = sum(m.weights.bytes for m in plan.model_cache.models) / GIB
    assert cache.gib == pytest.approx(stored)
    assert cache.per_month == pytest.approx(0.020 * stored)
    assert cache.per_hour == pytest.approx(0.020 * stored / 730)
    assert (
        "2022-12-30" in cache.price.date
        and "cloud.google.com/storage/pricing" in cache.price.source
    )


def test_fsx_pays_a_whole_file_system_per_namespace_at_its_throughput() -> None:
    fsx = {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}
    default = stack_cost(_cached("eks-p4d", fsx), *load_price_tables()).cache
    assert default is not None and default.per_month is None  # 250 MB/s/TiB: no sourced price
    assert (
        default.why_not is not None
        and "no sourced price for fsx-lustre at 250 MB/s per TiB" in (default.why_not)
    )
    slow = stack_cost(
        _cached("eks-p4d", {**fsx, "throughputMiBps": 125}), *load_price_tables()
    ).cache
    assert slow is not None and slow.price is not None and slow.price.weak
    assert slow.gib == 1200 and slow.per_month == pytest.approx(0.145 * 1200)
    assert slow.billed.startswith("1 file system(s) of 1,200 GiB, one per namespace")


def test_hyperdisk_ml_counts_the_fill_volume_and_its_clone_and_says_it_is_not_priced() -> None:
    plan = _cached("gke-h100", {"storage": "hyperdisk-ml"})
    cost = stack_cost(plan, *load_price_tables())
    cache = cost.cache
    assert cache is not None and cache.per_month is None
    [model] = plan.model_cache.models  # type: ignore[union-attr]
    assert cache.gib == 2 * plan.model_cache.size_of(model)  # type: ignore[union-attr]
    assert cache.billed.startswith("2 volume(s)")
    line = next(line for line in cost_text(cost).splitlines() if "model cache" in line)
    assert line.startswith("  not priced: model cache (hyperdisk-ml): 2 volume(s)")
    assert "give one with --prices FILE (storage: hyperdisk-ml: per_gb_month:)" in line


def test_plan_shows_the_cache_cost_and_takes_storage_prices_from_a_file(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "storage:\n  hyperdisk-ml: {per_gb_month: 0.08, date: 2026-11-01, source: our quote}\n"
    )
    found = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack", "gke-h100-cache", "--prices",
         str(prices), "--json"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    cache = json.loads(found.stdout)["cost"]["model_cache"]
    assert cache["storage"] == "hyperdisk-ml" and cache["price_source"] == "our quote"
    assert cache["per_month"] == pytest.approx(0.08 * cache["gib"])
    text = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack", "gke-h100-cache"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "not priced: model cache (hyperdisk-ml)" in text
    assert "cluster add-ons (mig_inference/clouds/addons.py" in text


def test_plan_reads_a_price_file_once() -> None:
    """Machines and storage from one reading: `--prices <(...)`, a pipe, reads only once."""
    text = (
        "machines:\n  a3-highgpu-8g: {on_demand: 1.5, spot: 0.5, date: 2026-11-01, source: ours}\n"
        "storage:\n  hyperdisk-ml: {per_gb_month: 0.08, date: 2026-11-01, source: our quote}\n"
    )
    read, written = os.pipe()
    os.write(written, text.encode())
    os.close(written)
    try:
        found = subprocess.run(
            [sys.executable, "-m", "mig", "plan", "--stack", "gke-h100-cache", "--prices",
             f"/dev/fd/{read}", "--json"], capture_output=True, text=True, check=False,
            pass_fds=(read,),
        )  # fmt: skip
    finally:
        os.close(read)
    assert found.returncode == 0, found.stderr
    cost = json.loads(found.stdout)["cost"]
    assert cost["model_cache"]["price_source"] == "our quote"
    assert [(p["node_per_hour"], p["price_source"]) for p in cost["pools"]] == [(0.5, "ours")]


def test_a_bad_storage_price_is_refused_at_its_key(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("storage:\n  nfs: {per_gb_month: 1, date: x, source: y}\n")
    with pytest.raises(MigError, match=r"storage\[nfs\]: unknown model cache storage 'nfs'"):
        load_price_tables(prices)[1]
    prices.write_text("storage:\n  gcs-fuse: {per_gb_month: -1, date: x, source: y}\n")
    with pytest.raises(MigError, match=r"storage\[gcs-fuse\]\.per_gb_month: must be a price"):
        load_price_tables(prices)[1]
    assert load_prices(prices)  # a file of storage prices only leaves the machines as shipped
