"""Machine prices and the cheapest machine type for a fleet: the shipped table against the
reference note, overrides, the choice against brute force, spot, infeasible machines, the CLI."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from mig_inference.cli import main
from mig_inference.clouds import MACHINES, Cloud
from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.prices import (
    MachinePrice,
    load_price_tables,
    load_prices,
    shipped_prices,
)
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.solving.cheapest import cheapest_machine
from mig_inference.solving.packing import Workload
from tests.reference import reference_file
from tests.solving.test_packing import brute_force_min_gpus

GIB = 1024.0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- the shipped table -------------------------------------------------------------------------


def _reference_rows() -> dict[str, dict[str, str]]:
    """Rows of the reference note's price table, `same` resolved to the source above it."""
    rows: dict[str, dict[str, str]] = {}
    source = ""
    text = reference_file("gpu-prices.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] in ("Machine", "") or set(cells[0]) <= {"-"}:
            continue
        machine, gpus, on_demand, spot, region, said = cells
        source = source if said == "same" else said
        rows[machine] = {
            "gpus": gpus,
            "on_demand": on_demand,
            "spot": spot,
            "region": region,
            "source": source,
        }
    return rows


def _stated_price(cell: str) -> float | None:
    found = re.search(r"\d+(?:\.\d+)?", cell)
    return float(found.group()) if found else None


def test_shipped_prices_carry_the_reference_figures_and_sources() -> None:
    rows = _reference_rows()
    table = shipped_prices()
    known = {name for shapes in MACHINES.values() for name in shapes}
    assert len(rows) == 13
    assert {m for m in rows if m in known} == set(table)
    for machine, row in rows.items():
        price = table[machine]
        count, _, gpu = row["gpus"].partition(" x ")
        assert (price.gpus, price.gpu_model) == (int(count), gpu), machine
        assert price.on_demand == _stated_price(row["on_demand"]), machine
        assert price.spot == _stated_price(row["spot"]), machine
        assert price.weak == ("weak" in row["on_demand"] + row["spot"]), machine
        assert price.source == row["source"], machine
        assert price.region == (None if row["region"] in ("—", "-") else row["region"]), machine
    # The approximate OCI list prices stay marked approximate, the missing p5e price missing.
    assert table["BM.GPU.H100.8"].note is not None and "~80.00" in table["BM.GPU.H100.8"].note
    assert table["p5e.48xlarge"].on_demand is None


def test_every_shipped_entry_has_a_date_a_source_and_the_machine_clouds_knows() -> None:
    table = shipped_prices()
    assert table
    for machine, price in table.items():
        assert price.machine == machine
        assert price.date.strip() and price.source.strip(), machine
        shape = MACHINES[price.cloud][machine]
        assert (shape.gpu, shape.gpus) == (price.gpu_model, price.gpus)
        assert not price.overridden
        for value in (price.on_demand, price.spot):
            assert value is None or value > 0
    assert table["p4d.24xlarge"].on_demand == 21.957642
    assert table["p4d.24xlarge"].date == "2026-07-20"
    assert table["a2-highgpu-8g"].spot == 8.816124
    assert {p.cloud for p in table.values()} == {Cloud.GKE, Cloud.EKS, Cloud.OKE}


# --- overrides ---------------------------------------------------------------------------------


def test_override_replaces_and_adds_by_machine_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "prices.yaml",
        "machines:\n"
        "  p5.48xlarge: {on_demand: 40.5, spot: 12, date: 2026-12-01, source: our AWS quote}\n"
        "  a2-highgpu-1g: {on_demand: 3.67, date: '2026-12', source: https://example.com/gcp}\n",
    )
    table = load_prices(path)
    shipped = shipped_prices()
    assert set(table) == set(shipped) | {"a2-highgpu-1g"}
    p5 = table["p5.48xlarge"]
    assert (p5.on_demand, p5.spot, p5.date, p5.source) == (
        40.5,
        12.0,
        "2026-12-01",
        "our AWS quote",
    )
    assert p5.overridden and (p5.cloud, p5.gpu_model, p5.gpus) == (Cloud.EKS, "H100-80GB", 8)
    added = table["a2-highgpu-1g"]
    assert (added.gpus, added.gpu_model, added.spot, added.cloud) == (
        1,
        "A100-40GB",
        None,
        Cloud.GKE,
    )
    assert table["p4d.24xlarge"] == shipped["p4d.24xlarge"]
    assert shipped_prices()["p5.48xlarge"].on_demand == 55.04  # the shipped table is untouched


BAD_OVERRIDES = [
    ("p5.48xlarge: {on_demand: -1, date: x, source: y}", "machines[p5.48xlarge].on_demand", "must be a price >= 0"),
    ("p5.48xlarge: {on_demand: 1, spot: -0.5, date: x, source: y}", "machines[p5.48xlarge].spot", "must be a price >= 0"),
    ("p5.48xlarge: {on_demand: .inf, date: x, source: y}", "machines[p5.48xlarge].on_demand", "must be a price >= 0"),
    ("p5.48xlarge: {on_demand: cheap, date: x, source: y}", "machines[p5.48xlarge].on_demand", "must be a number"),
    ("p5.48xlarge: {on_demand: true, date: x, source: y}", "machines[p5.48xlarge].on_demand", "must be a number"),
    ("p5.48xlarge: {date: x, source: y}", "machines[p5.48xlarge].on_demand", "is missing"),
    ("p5.48xlarge: {on_demand: 1, source: y}", "machines[p5.48xlarge].date", "is missing"),
    ("p5.48xlarge: {on_demand: 1, date: x}", "machines[p5.48xlarge].source", "is missing"),
    ("p5.48xlarge: {on_demand: 1, date: x, source: ''}", "machines[p5.48xlarge].source", "non-empty string"),
    ("p9.huge: {on_demand: 1, date: x, source: y}", "machines[p9.huge]", "unknown machine type 'p9.huge'"),
    ("p5.48xlarge: {on_demand: 1, date: x, source: y, gpus: 4}", "machines[p5.48xlarge].gpus", "is 8 x H100-80GB on eks"),
    ("p5.48xlarge: {on_demand: 1, date: x, source: y, cloud: gke}", "machines[p5.48xlarge].cloud", "not cloud 'gke'"),
    ("p5.48xlarge: {on_demand: 1, date: x, source: y, price: 3}", "machines[p5.48xlarge].price", "unknown key 'price'"),
    ("p5.48xlarge: {on_demand: 1, date: x, source: y, weak: maybe}", "machines[p5.48xlarge].weak", "true or false"),
    ("p5.48xlarge: 55", "machines[p5.48xlarge]", "must be a mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("entry", "key", "message"), BAD_OVERRIDES)
def test_bad_override_values_are_refused_with_their_key_path(
    tmp_path: Path, entry: str, key: str, message: str
) -> None:
    path = write(tmp_path, "prices.yaml", f"machines:\n  {entry}\n")
    with pytest.raises(MigError) as raised:
        load_prices(path)
    assert raised.value.path == f"{path}:{key}"
    assert message in raised.value.message


@pytest.mark.parametrize("spelling", ["./prices.yaml", "prices.yaml/", ".//prices.yaml"])
def test_a_bad_override_is_named_as_pathlib_spells_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    write(tmp_path, "prices.yaml", "machines:\n  p5.48xlarge: {on_demand: 1, source: y}\n")
    write(tmp_path, "storage.yaml", "storage:\n  gke-filestore-zonal: {date: x}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MigError) as machines:
        load_prices(spelling)
    assert machines.value.path == "prices.yaml:machines[p5.48xlarge].date"
    with pytest.raises(MigError) as storage:
        load_price_tables(spelling.replace("prices", "storage"))
    assert str(storage.value).startswith("storage.yaml:storage[gke-filestore-zonal]: ")


def test_bad_override_file_shapes(tmp_path: Path) -> None:
    for body, message in [
        ("- p5.48xlarge\n", "`machines:` mapping"),
        ("machines: {}\nextra: 1\n", "unknown key 'extra'"),
        (
            "machines: {p5.48xlarge: {on_demand: 1, date: x, source: y}, p5.48xlarge: {}}\n",
            "given twice",
        ),
    ]:
        path = write(tmp_path, "prices.yaml", body)
        with pytest.raises(MigError, match=re.escape(message)):
            load_prices(path)
    with pytest.raises(MigError, match="cannot read price file"):
        load_prices(tmp_path / "missing.yaml")


def test_every_bad_entry_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "prices.yaml",
        "machines:\n"
        "  p5.48xlarge: {on_demand: -1, date: x, source: y}\n"
        "  p4d.24xlarge: {on_demand: 1, date: x}\n",
    )
    with pytest.raises(MigError) as raised:
        load_prices(path)
    assert [e.path for e in raised.value.errors] == [
        f"{path}:machines[p5.48xlarge].on_demand",
        f"{path}:machines[p4d.24xlarge].source",
    ]


# --- the choice against brute force (the packer's own brute force, tests/solving/test_packing.py)
# -------


BRUTE_MACHINES = [
    "a2-highgpu-1g", "a2-highgpu-2g", "a2-highgpu-4g",  # A100-40GB
    "a2-ultragpu-1g", "a2-ultragpu-2g",  # A100-80GB
    "a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g",  # H100-80GB
    "p5en.48xlarge", "BM.GPU.H200.8",  # H200-141GB x 8
]  # fmt: skip


def _expected(
    fleet: Sequence[Workload], prices: dict[str, MachinePrice], machines: Sequence[str]
) -> tuple[str | None, dict[str, int | None]]:
    """Argmin of nodes x price (ties: fewer nodes, then name), nodes per machine (None when its
    GPU model cannot hold some workload), each computed by brute force, among the machines the
    cloud sells as spot capacity (OCI's preemptible capacity takes no bare-metal shape)."""
    nodes: dict[str, int | None] = {}
    gpus_needed: dict[str, int | None] = {}
    for machine in machines:
        [shape] = [s for shapes in MACHINES.values() for n, s in shapes.items() if n == machine]
        if shape.facts is not None and Capacity.SPOT not in shape.facts.capacity:
            continue
        price = prices[machine]
        if price.gpu_model not in gpus_needed:
            gpu = resolve_gpu(price.gpu_model)
            try:
                gpus_needed[price.gpu_model] = brute_force_min_gpus(gpu, fleet)
            except MigError:
                gpus_needed[price.gpu_model] = None
        needed = gpus_needed[price.gpu_model]
        nodes[machine] = None if needed is None else math.ceil(needed / price.gpus)
    costs = []
    for machine, count in nodes.items():
        spot = prices[machine].spot
        if count is not None and spot is not None:
            costs.append((round(count * spot, 6), count, machine))
    return (min(costs)[2] if costs else None), nodes


def _random_prices(rng: random.Random, tmp_path: Path) -> dict[str, MachinePrice]:
    lines = ["machines:"]
    for machine in BRUTE_MACHINES:
        gpus = next(
            s.gpus for shapes in MACHINES.values() for n, s in shapes.items() if n == machine
        )
        # Few distinct per-GPU rates, so ties between machine types happen.
        per_gpu = rng.choice([2.0, 3.0, 4.0])
        # Spot: every machine here is sold so (A3 High under 8 GPUs is not sold on-demand).
        lines.append(
            f"  {machine}: {{on_demand: null, spot: {per_gpu * gpus}, date: t, source: test}}"
        )
    return load_prices(write(tmp_path, "prices.yaml", "\n".join(lines) + "\n"))


@pytest.mark.parametrize("seed", range(10))
def test_choice_is_the_brute_force_argmin(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    fleet = [
        Workload(f"w{i}", rng.randint(1, 3), memory_mib=rng.uniform(2 * GIB, 50 * GIB))
        for i in range(rng.randint(1, 2))
    ]
    prices = _random_prices(rng, tmp_path)
    machines = rng.sample(BRUTE_MACHINES, 5)
    result = cheapest_machine(fleet, prices, machines=machines, spot=True)
    choice, nodes = _expected(fleet, prices, machines)
    assert result.choice is not None and result.choice.machine == choice
    assert {c.machine: c.nodes for c in result.candidates} == nodes
    for c in result.candidates:
        assert c.optimal is not False
        if c.nodes is not None:
            assert c.total_per_hour == pytest.approx(c.nodes * c.per_node)
            assert c.per_node == prices[c.machine].spot
    totals = [c.total_per_hour for c in result.candidates if c.total_per_hour is not None]
    assert totals == sorted(totals)
    assert result.proven


def test_ties_go_to_fewer_nodes_then_the_name(tmp_path: Path) -> None:
    # 4 A100-40GB GPUs: two 2-GPU nodes at $10 cost the same as one 4-GPU node at $20.
    fleet = [Workload("big", 4, memory_mib=30 * GIB)]
    prices = load_prices(
        write(
            tmp_path,
            "prices.yaml",
            "machines:\n"
            "  a2-highgpu-2g: {on_demand: 10, date: t, source: test}\n"
            "  a2-highgpu-4g: {on_demand: 20, date: t, source: test}\n"
            "  p5e.48xlarge: {on_demand: 70, date: t, source: test}\n"
            "  p5en.48xlarge: {on_demand: 70, date: t, source: test}\n",
        )
    )
    result = cheapest_machine(fleet, prices, machines=["a2-highgpu-2g", "a2-highgpu-4g"])
    assert result.choice is not None and result.choice.machine == "a2-highgpu-4g"
    assert [(c.machine, c.nodes, c.total_per_hour) for c in result.candidates] == [
        ("a2-highgpu-4g", 1, 20.0),
        ("a2-highgpu-2g", 2, 20.0),
    ]
    assert any("tie at $20.00/h with a2-highgpu-2g" in note for note in result.notes)
    # Same nodes, same price: the name decides (p5e before p5en), and the order is repeatable.
    same = cheapest_machine(fleet, prices, machines=["p5en.48xlarge", "p5e.48xlarge"])
    assert [c.machine for c in same.candidates] == ["p5e.48xlarge", "p5en.48xlarge"]
    assert same.choice is not None and same.choice.total_per_hour == 70.0


def test_uniform_nodes_pass_through_and_never_need_fewer_nodes() -> None:
    fleet = [Workload("a", 5, memory_mib=9 * GIB), Workload("b", 3, memory_mib=35 * GIB)]
    prices = shipped_prices()
    free = {c.machine: c for c in cheapest_machine(fleet, prices, cloud="gke").candidates}
    uniform = cheapest_machine(fleet, prices, cloud="gke", uniform_nodes=True).candidates
    assert {c.machine for c in uniform} == set(free)
    for c in uniform:
        assert c.feasible == free[c.machine].feasible
        if c.plan is not None:
            node_layouts = c.plan.node_layouts()
            assert c.plan.uniform_nodes and all(n == node_layouts[0] for n in node_layouts)
            before = free[c.machine].nodes
            assert c.nodes is not None and before is not None and c.nodes >= before


# --- spot, skipped and infeasible machines ------------------------------------------------------


def test_spot_prices_decide_and_machines_without_one_are_skipped(tmp_path: Path) -> None:
    fleet = [Workload("chat", 3, memory_mib=30 * GIB)]
    prices = load_prices(
        write(
            tmp_path,
            "prices.yaml",
            "machines:\n"
            "  a2-ultragpu-8g: {on_demand: 40, spot: 30, date: t, source: test}\n"
            "  a3-highgpu-8g: {on_demand: 50, spot: 10, date: t, source: test}\n",
        )
    )
    machines = ["a2-ultragpu-8g", "a3-highgpu-8g", "p5.48xlarge"]
    on_demand = cheapest_machine(fleet, prices, machines=machines)
    spot = cheapest_machine(fleet, prices, machines=machines, spot=True)
    assert on_demand.choice is not None and on_demand.choice.machine == "a2-ultragpu-8g"
    assert spot.choice is not None and spot.choice.machine == "a3-highgpu-8g"
    assert spot.choice.per_node == 10.0 and spot.choice.spot
    assert [c.machine for c in spot.candidates] == ["a3-highgpu-8g", "a2-ultragpu-8g"]
    assert [s.machine for s in spot.skipped] == ["p5.48xlarge"]
    assert "no spot price" in spot.skipped[0].reason
    assert any(n.startswith("p5.48xlarge: skipped, no spot price") for n in spot.notes)
    with pytest.raises(MigError, match="no spot price for any candidate machine") as raised:
        cheapest_machine(fleet, shipped_prices(), cloud="eks", spot=True)
    assert raised.value.path == "--spot"


def test_infeasible_candidates_are_reported_not_raised(tmp_path: Path) -> None:
    prices = load_prices(
        write(
            tmp_path,
            "prices.yaml",
            "machines:\n  g6.48xlarge: {on_demand: 13, date: t, source: test}\n",
        )
    )
    # 1g.20gb exists on A100-80GB and H100-80GB, not on A100-40GB or H200-141GB (1g.18gb).
    fleet = [Workload("chat", 4, profile="1g.20gb"), Workload("vision", 1, memory_mib=20 * GIB)]
    result = cheapest_machine(fleet, prices, cloud="eks")
    reasons = {c.machine: c.infeasible_reason for c in result.candidates}
    assert reasons["p4de.24xlarge"] is None and reasons["p5.48xlarge"] is None
    assert "'1g.20gb' is not a MIG profile of A100-40GB" in str(reasons["p4d.24xlarge"])
    assert "'1g.20gb' is not a MIG profile of H200-141GB" in str(reasons["p5en.48xlarge"])
    assert "no MIG" in str(reasons["g6.48xlarge"])
    assert [c.feasible for c in result.candidates] == [True, True, False, False, False]
    assert result.choice is not None and result.choice.machine == "p4de.24xlarge"
    too_big = cheapest_machine([Workload("huge", 1, memory_mib=150 * GIB)], prices, cloud="oke")
    assert too_big.choice is None and not too_big.proven
    assert all("more than any MIG slice" in str(c.infeasible_reason) for c in too_big.candidates)


def test_candidate_selection_errors() -> None:
    prices = shipped_prices()
    fleet = [Workload("a", 1, memory_mib=GIB)]
    with pytest.raises(MigError, match="unknown machine type 'p9'") as raised:
        cheapest_machine(fleet, prices, machines=["p5.48xlarge", "p9"])
    assert raised.value.path == "--machines"
    with pytest.raises(MigError, match="unknown cloud 'azure'"):
        cheapest_machine(fleet, prices, cloud="azure")
    with pytest.raises(MigError, match="no machine types to compare"):
        cheapest_machine(fleet, prices)
    with pytest.raises(MigError, match="duplicate workload name"):
        cheapest_machine([*fleet, *fleet], prices, cloud="eks")
    # Named in any case, each once; a known machine without a price entry is skipped.
    result = cheapest_machine(fleet, prices, machines=["P5.48XLARGE", "p5.48xlarge", "g5.xlarge"])
    assert [c.machine for c in result.candidates] == ["p5.48xlarge"]
    assert [s.machine for s in result.skipped] == ["g5.xlarge"]


# --- the CLI ------------------------------------------------------------------------------------

FLEET = (
    "workloads:\n"
    "  - {name: llama-8b, replicas: 6, memory_gib: 18}\n"
    "  - {name: embedder, replicas: 9, memory_gib: 4}\n"
    "  - {name: llama-70b-int4, replicas: 2, memory_gib: 45}\n"
)


def test_cli_cloud_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.yaml", FLEET)
    code, out, _ = run(capsys, "pack", str(fleet), "--cloud", "eks", "--json")
    data = json.loads(out)
    assert code == 0
    keys = {"machine", "cloud", "gpu_model", "gpus_per_node", "nodes", "gpus", "price_per_hour",
            "total_per_hour", "spot", "optimal", "lower_bound", "infeasible_reason"}  # fmt: skip
    assert all(keys <= set(c) for c in data["candidates"])
    feasible = [c for c in data["candidates"] if c["infeasible_reason"] is None]
    assert [c["total_per_hour"] for c in feasible] == sorted(c["total_per_hour"] for c in feasible)
    assert data["choice"] == feasible[0]["machine"] == "p4de.24xlarge"
    assert feasible[0]["total_per_hour"] == pytest.approx(
        feasible[0]["nodes"] * feasible[0]["price_per_hour"]
    )
    assert {c["machine"] for c in data["candidates"]} == set(data["prices"])
    assert all(p["date"] and p["source"] for p in data["prices"].values())
    p4d = next(c for c in data["candidates"] if c["machine"] == "p4d.24xlarge")
    assert p4d["nodes"] is None and "A100-40GB" in p4d["infeasible_reason"]
    assert [s["machine"] for s in data["skipped"]] == ["p5e.48xlarge"]
    assert data["plan"]["gpu_model"] == "A100-80GB" and data["plan"]["gpus_per_node"] == 8


def test_cli_machines_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.yaml", FLEET)
    code, out, err = run(
        capsys, "pack", str(fleet), "--machines", "a3-highgpu-8g,p4de.24xlarge,BM.GPU4.8"
    )
    assert code == 0 and err == ""
    lines = out.splitlines()
    rows = [line.split()[0] for line in lines[2:5]]
    assert rows == ["p4de.24xlarge", "a3-highgpu-8g", "BM.GPU4.8"]
    assert "infeasible: workloads[2] (llama-70b-int4).memory_gib" in lines[4]
    assert "87.83*" in lines[3] and "* weak source" in out
    assert "choice: p4de.24xlarge (eks, 8 x A100-80GB): 1 node(s) x $27.45/h = $27.45/h" in out
    assert f"pack {fleet} --gpu A100-80GB --gpus-per-node 8" in out
    assert "zz_generated.pricing_aws.go`, generated 2026-07-20; us-east-1" in out


def test_cli_spot_and_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fleet = write(tmp_path, "fleet.yaml", FLEET)
    prices = write(
        tmp_path,
        "prices.yaml",
        "machines:\n  p5.48xlarge: {on_demand: 50, spot: 5, date: '2026-12', source: quote}\n",
    )
    code, out, _ = run(
        capsys, "pack", str(fleet), "--cloud", "eks", "--spot", "--prices", str(prices), "--json"
    )
    data = json.loads(out)
    assert code == 0 and data["choice"] == "p5.48xlarge" and data["spot"] is True
    assert [c["machine"] for c in data["candidates"]] == ["p5.48xlarge"]
    assert data["candidates"][0]["price_per_hour"] == 5.0
    assert data["prices"]["p5.48xlarge"]["source"] == "quote"
    assert data["prices"]["p5.48xlarge"]["overridden"] is True
    assert len(data["skipped"]) == 4


def test_cli_nothing_fits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fleet = write(
        tmp_path, "fleet.yaml", "workloads:\n  - {name: huge, replicas: 1, memory_gib: 150}\n"
    )
    code, out, err = run(capsys, "pack", str(fleet), "--cloud", "oke")
    assert code == 1
    assert "choice: none" in out and out.count("infeasible:") == 4
    assert err.startswith("error: --cloud: no candidate machine holds the fleet")
    code, out, _ = run(capsys, "pack", str(fleet), "--cloud", "oke", "--json")
    data = json.loads(out)
    assert code == 1 and data["choice"] is None
    assert data["errors"][0]["key"] == "--cloud"


CLI_MISUSE = [
    (["--cloud", "eks", "--gpus-per-node", "4"], "--gpus-per-node", "a machine type fixes"),
    (["--gpu", "h100", "--spot"], "--spot", "prices compare machine types"),
    (["--gpu", "h100", "--prices", "p.yaml"], "--prices", "prices compare machine types"),
    (["--machines", "p5.48xlarge,nope"], "--machines", "unknown machine type 'nope'"),
    (["--machines", " , "], "--machines", "name at least one machine type"),
    (["--cloud", "eks", "--prices", "BAD"], "BAD:machines[p5.48xlarge].on_demand", "must be a price >= 0"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "key", "message"), CLI_MISUSE)
def test_cli_bad_input_is_one_line_per_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], key: str, message: str
) -> None:
    fleet = write(tmp_path, "fleet.yaml", FLEET)
    bad = write(
        tmp_path, "bad.yaml", "machines:\n  p5.48xlarge: {on_demand: -2, date: x, source: y}\n"
    )
    argv = [str(bad) if a == "BAD" else a for a in argv]
    key = key.replace("BAD", str(bad))
    code, out, err = run(capsys, "pack", str(fleet), *argv)
    assert code == 1 and out == ""
    assert err.startswith(f"error: {key}: {message}") and err.count("\n") == 1
    code, out, _ = run(capsys, "pack", str(fleet), *argv, "--json")
    errors = json.loads(out)["errors"]
    assert code == 1 and len(errors) == 1
    assert errors[0]["key"] == key and errors[0]["message"].startswith(message)


def test_cli_gpu_and_machines_are_exclusive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fleet = write(tmp_path, "fleet.yaml", FLEET)
    with pytest.raises(SystemExit) as raised:
        main(["pack", str(fleet), "--gpu", "h100", "--cloud", "eks"])
    assert raised.value.code == 2
    assert "not allowed with argument --gpu" in capsys.readouterr().err
