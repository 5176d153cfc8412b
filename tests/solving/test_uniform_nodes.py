"""Identical nodes (`--uniform-nodes`): proven node counts against an independent brute force,
a bisection instead of a scan, baselines under the same rule, and the fleet-file refusals."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from msgspec.structs import replace

from mig_inference.cli import main
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, resolve_gpu
from mig_inference.gpus.layout import Layout, maximal_layouts, valid_layouts
from mig_inference.solving import model as solving_model
from mig_inference.solving import uniform
from mig_inference.solving.bench import llm_fleet, random_fleet, scaled
from mig_inference.solving.fleet import load_fleet
from mig_inference.solving.milp import Milp
from mig_inference.solving.packing import (
    MAX_REPLICAS,
    PackPlan,
    Workload,
    allowed_profiles,
    compute_baselines,
    pack,
)
from tests.solving.test_packing import check_plan

H100 = resolve_gpu("H100-80GB")


def brute_force_uniform_nodes(
    gpu: GpuModel, fleet: Sequence[Workload], gpus_per_node: int
) -> float:
    """Fewest identical nodes, without the solver: every multiset of `gpus_per_node` maximal
    layouts; for one, the fewest copies meeting Hall's condition (every set of workloads has at
    least as many slices among the profiles any of them may use as it has replicas). inf when
    no node holds the fleet."""
    names = tuple(p.name for p in gpu.profiles if not p.media_extensions)
    layouts = maximal_layouts(valid_layouts(gpu, names))
    allowed = [{p.name for p in allowed_profiles(gpu, w)} for w in fleet]
    subsets = [
        s for r in range(1, len(fleet) + 1) for s in itertools.combinations(range(len(fleet)), r)
    ]
    best = math.inf
    for node in itertools.combinations_with_replacement(layouts, gpus_per_node):
        slices: dict[str, int] = {}
        for layout in node:
            for name, count in layout.as_dict().items():
                slices[name] = slices.get(name, 0) + count
        copies = 1.0
        for subset in subsets:
            offered = sum(slices.get(n, 0) for n in set().union(*(allowed[i] for i in subset)))
            replicas = sum(fleet[i].replicas for i in subset)
            copies = max(copies, math.ceil(replicas / offered) if offered else math.inf)
        best = min(best, copies)
    return best


def small_fleet(seed: int) -> tuple[list[Workload], int]:
    rng = random.Random(seed)
    per_node = rng.choice([1, 2, 3])
    names = [p.name for p in H100.profiles if not p.media_extensions]
    fleet = []
    for i in range(rng.randint(1, 3)):
        replicas = rng.randint(1, 12)
        if rng.random() < 0.5:
            name = rng.choice(names)
            fleet.append(Workload(f"w{i}", replicas, profile=name, exact=rng.random() < 0.5))
        else:
            fleet.append(Workload(f"w{i}", replicas, memory_mib=rng.uniform(500, 80_000)))
    return fleet, per_node


def problem_of(fleet: Sequence[Workload]) -> solving_model.Problem:
    allowed = [allowed_profiles(H100, w) for w in fleet]
    layouts = solving_model.candidate_layouts(H100, [p for a in allowed for p in a])
    return solving_model.Problem(H100, fleet, allowed, layouts)


def check_uniform(plan: PackPlan, fleet: Sequence[Workload]) -> None:
    check_plan(plan, fleet)
    per_node = plan.node_layouts()
    assert all(layouts == per_node[0] for layouts in per_node)
    assert len(set(plan.node_config_names())) == 1
    assert not any(slot.spare for slot in plan.gpus)


# -- 1. a node count HiGHS proves infeasible is a proof, not a time-out ----------------------


def pigeons(pigeons: int, holes: int) -> Milp:
    """Every pigeon in a hole, at most one per hole: infeasible with more pigeons than holes."""
    milp = Milp()
    x = {(i, h): milp.variable(upper=1.0) for i in range(pigeons) for h in range(holes)}
    for i in range(pigeons):
        milp.constrain({x[(i, h)]: 1.0 for h in range(holes)}, lower=1.0)
    for h in range(holes):
        milp.constrain({x[(i, h)]: 1.0 for i in range(pigeons)}, upper=1.0)
    return milp


def test_milp_tells_infeasible_from_a_work_limit() -> None:
    proven = pigeons(5, 4).solve()
    assert (proven.infeasible, proven.optimal, proven.values) == (True, False, [])
    stopped = pigeons(13, 12).solve(node_limit=0)
    assert (stopped.infeasible, stopped.optimal, stopped.values) == (False, False, [])
    feasible = pigeons(4, 4).solve()
    assert (feasible.infeasible, feasible.optimal) == (False, True)


# Seeds whose fewest identical nodes lie above the lower bound's node count, so the smaller
# counts must be proven infeasible by the solver (the old scan reported these "not proven").
ABOVE_THE_BOUND = [16, 17, 24]


@pytest.mark.parametrize("seed", ABOVE_THE_BOUND)
def test_counts_proven_infeasible_make_the_plan_optimal(seed: int) -> None:
    fleet, per_node = small_fleet(seed)
    plan = pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True, baselines=False)
    check_uniform(plan, fleet)
    assert plan.node_count > math.ceil(plan.lower_bound / per_node)
    assert plan.optimal is True
    assert plan.node_count == brute_force_uniform_nodes(H100, fleet, per_node)


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force_on_small_fleets(seed: int) -> None:
    fleet, per_node = small_fleet(seed)
    expected = brute_force_uniform_nodes(H100, fleet, per_node)
    if math.isinf(expected):
        with pytest.raises(MigError, match="no uniform node layout holds the fleet"):
            pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True, baselines=False)
        return
    plan = pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True, baselines=False)
    check_uniform(plan, fleet)
    assert plan.optimal
    assert plan.node_count == expected


def test_a_work_limit_is_not_a_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    fleet, per_node = small_fleet(ABOVE_THE_BOUND[0])
    answer = pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True).node_count
    probe = uniform.probe

    def stops_below_the_answer(
        model: solving_model.Model, nodes: int, gpus_per_node: int
    ) -> tuple[bool | None, list[float]]:
        return (None, []) if nodes == answer - 1 else probe(model, nodes, gpus_per_node)

    monkeypatch.setattr(uniform, "probe", stops_below_the_answer)
    plan = pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True, baselines=False)
    check_uniform(plan, fleet)
    assert (plan.node_count, plan.optimal) == (answer, False)


# -- 2. a bisection, not one solve per node count ---------------------------------------------


def test_bisection_needs_few_probes_and_agrees_with_a_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = random_fleet(H100, 5000, seed=7)
    probe = uniform.probe
    tried: list[int] = []

    def counted(
        model: solving_model.Model, nodes: int, gpus_per_node: int
    ) -> tuple[bool | None, list[float]]:
        tried.append(nodes)
        return probe(model, nodes, gpus_per_node)

    monkeypatch.setattr(uniform, "probe", counted)
    plan = pack(H100, fleet, gpus_per_node=8, uniform_nodes=True, baselines=False)
    check_uniform(plan, fleet)
    low = math.ceil(plan.lower_bound / 8)
    assert plan.optimal
    assert plan.node_count - low >= 15, "a scan from the bound would need many solves"
    assert len(tried) <= 12
    # The scan the bisection replaces: every count from the bound up is refused, the answer held.
    grouped, _ = solving_model.grouped(problem_of(fleet))
    model = grouped.model()
    verdicts = [probe(model, n, 8)[0] for n in range(low, plan.node_count + 1)]
    assert verdicts == [False] * (plan.node_count - low) + [True]


# -- 3. baselines obey the uniform rule too ---------------------------------------------------


@pytest.mark.parametrize(
    ("fleet", "per_node"),
    [
        (scaled(llm_fleet(), 10), 8),
        (llm_fleet(), 4),
        (random_fleet(H100, 400, seed=11), 8),
        (random_fleet(H100, 120, seed=3), 2),
    ],
)
def test_uniform_baselines_never_beat_the_uniform_plan(
    fleet: list[Workload], per_node: int
) -> None:
    plan = pack(H100, fleet, gpus_per_node=per_node, uniform_nodes=True)
    check_uniform(plan, fleet)
    assert plan.optimal
    for name, gpus in plan.baselines.items():
        assert gpus % per_node == 0, f"{name} counts whole nodes"
        assert gpus >= plan.gpu_count, name


def test_llm_fleet_x10_free_homogeneous_beats_uniform_but_uniform_baseline_does_not() -> None:
    fleet = scaled(llm_fleet(), 10)
    free = pack(H100, fleet, gpus_per_node=8)
    uniform = pack(H100, fleet, gpus_per_node=8, uniform_nodes=True)
    assert free.baselines["homogeneous"] < uniform.gpu_count  # what the old baseline reported
    assert uniform.baselines["homogeneous"] >= uniform.gpu_count
    assert free.baselines == {"one_per_gpu": 230, "homogeneous": 70}


def test_grouped_baselines_equal_per_workload_ones() -> None:
    fleet = random_fleet(H100, 300, seed=5)
    problem = problem_of(fleet)
    grouped, members = solving_model.grouped(problem)
    assert len(grouped.workloads) < len(fleet)
    assert sorted(w for group in members for w in group) == list(range(len(fleet)))
    profiles = {p for a in problem.allowed for p in a}
    homogeneous = [Layout.of(H100, {p.name: p.max_instances}) for p in profiles]
    ungrouped = solving_model.fewest_gpus(replace(problem, layouts=homogeneous)).gpus
    assert compute_baselines(problem)["homogeneous"] == ungrouped


# -- 4. huge fleets are refused before any work -----------------------------------------------


def test_a_billion_replicas_are_refused_naming_the_workload() -> None:
    fleet = [Workload("chat", 10**9, profile="1g.10gb")]
    with pytest.raises(MigError, match=r"1,000,000,000 replicas, more than .* 1,000,000") as info:
        pack(H100, fleet, gpus_per_node=8, uniform_nodes=True)
    assert info.value.path == "workloads[0] (chat).replicas"


def test_a_total_above_the_limit_is_refused_naming_the_total() -> None:
    half = MAX_REPLICAS // 2 + 1
    fleet = [Workload("a", half, profile="1g.10gb"), Workload("b", half, profile="2g.20gb")]
    with pytest.raises(MigError, match="replicas in total") as info:
        pack(H100, fleet)
    assert info.value.path == "workloads"


def test_the_cli_refuses_a_huge_fleet_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("workloads:\n  - {name: a, replicas: 1000000000, profile: 1g.10gb}\n")
    code = main(["pack", str(path), "--gpu", "h100", "--gpus-per-node", "8", "--uniform-nodes"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.strip().splitlines() == [
        "error: workloads[0] (a).replicas: 1,000,000,000 replicas, more than the planner's "
        "limit of 1,000,000 (a plan lists every replica)"
    ]


# -- 5. exact with memory_gib is refused ------------------------------------------------------


def test_exact_with_memory_is_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("workloads:\n  - {name: a, replicas: 2, memory_gib: 12, exact: true}\n")
    with pytest.raises(MigError, match="exact only applies with profile") as info:
        load_fleet(path)
    assert info.value.path == "workloads[0] (a).exact"


def test_exact_false_with_memory_and_exact_with_profile_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "workloads:\n"
        "  - {name: a, replicas: 2, memory_gib: 12, exact: false}\n"
        "  - {name: b, replicas: 1, profile: 1g.10gb, exact: true}\n"
    )
    assert [(w.memory_mib, w.exact) for w in load_fleet(path)] == [(12 * 1024, False), (None, True)]


# -- 6. a fleet file that is not UTF-8 -------------------------------------------------------


def test_non_utf8_fleet_file_is_a_mig_error(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"workloads:\n  - {name: caf\xe9, replicas: 1, profile: 1g.10gb}\n")
    with pytest.raises(MigError, match=r"fleet file is not UTF-8 text: byte 0xe9 on line 2"):
        load_fleet(path)


def test_non_utf8_fleet_file_is_one_line_from_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"\xff\xfew\x00o\x00r\x00k\x00")
    code = main(["pack", str(path), "--gpu", "h100"])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.strip().splitlines() == [
        f"error: {path}: fleet file is not UTF-8 text: byte 0xff on line 1"
    ]
