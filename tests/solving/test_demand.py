"""Planning from demand: replicas of whichever profiles meet each workload's requests per
second, chosen together with every GPU's layout."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, resolve_gpu
from mig_inference.gpus.layout import Layout, maximal_layouts, valid_layouts
from mig_inference.solving import model as model_module
from mig_inference.solving import uniform
from mig_inference.solving.bench import demand_fleet
from mig_inference.solving.milp import Milp, Solution
from mig_inference.solving.model import (
    Problem,
    at_total,
    candidate_layouts,
    fewest_compute_slices,
    fewest_gpus,
    holds_by_counting,
    lower_bound,
    replicas_lower_bound,
)
from mig_inference.solving.packing import Workload, allowed_profiles, pack
from mig_inference.solving.throughput import parvagpu_scenarios

H100 = resolve_gpu("h100")


def demand(name: str, rate: float, **table: float) -> Workload:
    """A demand-driven workload; profile names are given with `_` for `.` (1g_10gb)."""
    return Workload(
        name,
        0,
        requests_per_second=rate,
        throughput=tuple((p.replace("_", "."), r) for p, r in table.items()),
    )


def feasible(capacity: dict[str, int], fleet: list[Workload]) -> bool:
    """Whether slices `capacity` can serve every demand: every split for the first workload,
    the rest of the capacity at full rate for the second (exact for fleets of two)."""
    first, *rest = fleet
    names = sorted(capacity)
    for counts in itertools.product(*(range(capacity[n] + 1) for n in names)):
        served = sum(first.throughput_on(n) * c for n, c in zip(names, counts, strict=True))
        if served + 1e-9 < float(first.requests_per_second or 0):
            continue
        left = {n: capacity[n] - c for n, c in zip(names, counts, strict=True)}
        if all(
            sum(w.throughput_on(n) * left[n] for n in names) + 1e-9
            >= float(w.requests_per_second or 0)
            for w in rest
        ):
            return True
    return False


def brute_force_gpus(gpu: GpuModel, fleet: list[Workload], most: int = 4) -> int:
    profiles = sorted({name for w in fleet for name, _ in w.throughput})
    layouts = maximal_layouts(valid_layouts(gpu, tuple(profiles)))
    for n in range(1, most + 1):
        for chosen in itertools.combinations_with_replacement(layouts, n):
            capacity = dict.fromkeys(profiles, 0)
            for layout in chosen:
                for name, count in layout.as_dict().items():
                    capacity[name] += count
            if feasible(capacity, fleet):
                return n
    raise AssertionError("more GPUs than the brute force tries")


@pytest.mark.parametrize("seed", range(12))
def test_fewest_gpus_match_brute_force_and_every_demand_is_met(seed: int) -> None:
    rng = random.Random(seed)
    fleet = [
        demand(f"m{i}", rng.choice([30, 55, 90, 140, 200]),
               **{"1g_10gb": rng.choice([10, 18, 25]), "3g_40gb": rng.choice([35, 50, 70])})
        for i in range(2)
    ]  # fmt: skip
    plan = pack(H100, fleet)
    assert plan.optimal
    assert plan.gpu_count == brute_force_gpus(H100, fleet)
    for met in plan.demand_met():
        assert met.served + 1e-9 >= met.requests_per_second
        assert sum(met.replicas.values()) == sum(
            1 for a in plan.assignments if a.workload == met.workload
        )


def test_a_slice_that_is_nearly_as_fast_wins_over_a_bigger_one() -> None:
    """At small batch a 1g slice is almost as fast as 3g: seven 1g slices serve far more."""
    plan = pack(H100, [demand("chat", 150, **{"1g_10gb": 22, "3g_40gb": 30})])
    [met] = plan.demand_met()
    assert plan.gpu_count == 1 and met.replicas == {"1g.10gb": 7} and met.served == 154


def test_one_service_may_mix_profiles() -> None:
    """On one H100, `a` could take two 2g slices or a 2g and two 1g (3g + 2g + 1g + 1g is a
    valid layout); the mix hands out less memory beyond the smallest slice that serves it."""
    plan = pack(H100, [demand("a", 70, **{"1g_10gb": 15, "2g_20gb": 40}),
                       demand("b", 60, **{"3g_40gb": 60})])  # fmt: skip
    assert plan.gpu_count == 1
    met = {m.workload: m for m in plan.demand_met()}
    assert met["a"].replicas == {"1g.10gb": 2, "2g.20gb": 1} and met["a"].served == 70
    assert met["b"].replicas == {"3g.40gb": 1}


@pytest.mark.parametrize(
    ("workload", "key", "message"),
    [
        (lambda: demand("x", 10), "throughput", "no profile serves this workload"),
        (lambda: demand("x", 10, **{"1g_10gb": 0.0}), "throughput", "no profile serves"),
        (lambda: Workload("x", 2, requests_per_second=5, throughput=(("1g.10gb", 3.0),)),
         "replicas", "give replicas or requests_per_second"),
        (lambda: Workload("x", 0, requests_per_second=-1, throughput=(("1g.10gb", 3.0),)),
         "requests_per_second", "must be a number > 0"),
        (lambda: Workload("x", 0, profile="1g.10gb", requests_per_second=5,
                          throughput=(("1g.10gb", 3.0),)), "profile", "runs on the profiles"),
        (lambda: Workload("x", 2, profile="1g.10gb", throughput=(("1g.10gb", 3.0),)),
         "throughput", "only applies with requests_per_second"),
    ],
)  # fmt: skip
def test_bad_demands_are_refused_naming_the_key(workload, key: str, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MigError) as raised:
        workload()
    assert raised.value.path == key and message in raised.value.message


def test_a_profile_the_gpu_lacks_is_named() -> None:
    with pytest.raises(MigError) as raised:
        pack(H100, [demand("x", 10, **{"3g_20gb": 5.0})])
    assert raised.value.path == "workloads[0] (x).throughput.3g.20gb"


@pytest.mark.parametrize("seed", range(8))
def test_uniform_nodes_serve_demand_on_the_fewest_identical_nodes(seed: int) -> None:
    """Every node identical (one pool label): checked against brute force over node layouts
    (multisets of 2 GPU layouts, repeated on every node)."""
    rng = random.Random(100 + seed)
    fleet = [
        demand(f"m{i}", rng.choice([40, 90, 160, 260]),
               **{"1g_10gb": rng.choice([10, 18]), "3g_40gb": rng.choice([35, 60])})
        for i in range(2)
    ]  # fmt: skip
    plan = pack(H100, fleet, gpus_per_node=2, uniform_nodes=True)
    assert plan.optimal
    assert all(m.served + 1e-9 >= m.requests_per_second for m in plan.demand_met())
    layouts = maximal_layouts(valid_layouts(H100, ("1g.10gb", "3g.40gb")))
    node_layouts = list(itertools.combinations_with_replacement(layouts, 2))
    fewest = next(
        nodes
        for nodes in range(1, 20)
        if any(
            feasible(
                {
                    name: nodes * sum(layout.as_dict().get(name, 0) for layout in node)
                    for name in ("1g.10gb", "3g.40gb")
                },
                fleet,
            )
            for node in node_layouts
        )
    )
    assert plan.node_count == fewest


def test_a_demand_no_plan_could_list_is_refused() -> None:
    with pytest.raises(MigError) as raised:
        pack(H100, [demand("x", 1e9, **{"1g_10gb": 1.0})])
    assert raised.value.path == "workloads[0] (x).requests_per_second"


@pytest.mark.parametrize("sharing", ["single", "mps"])
def test_parvagpu_scenarios_are_met_proven_and_near_the_papers_counts(sharing: str) -> None:
    """ParvaGPU (SC'24) deploys its six SLO scenarios on 2, 3, 5, 7, 13 and 16 A100s, with MPS.
    With the same throughput the planner proves its counts optimal and needs at most as many;
    one engine per slice (no MPS) needs at most one GPU more."""
    gpu = resolve_gpu("A100-80GB")
    papers = [scenario.published_gpus for scenario in parvagpu_scenarios("mps")]
    for scenario, paper in zip(parvagpu_scenarios(sharing), papers, strict=True):
        plan = pack(gpu, scenario.workloads)
        assert plan.optimal, scenario.name
        assert all(m.served + 1e-9 >= m.requests_per_second for m in plan.demand_met())
        assert paper is not None
        assert plan.gpu_count <= paper + (0 if sharing == "mps" else 1)


def test_pack_reads_demand_from_a_fleet_file(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "workloads:\n"
        "  - {name: bert, requests_per_second: 69, throughput: {1g.10gb: 135.1, 3g.40gb: 243.3}}\n"
        "  - {name: chat, replicas: 3, profile: 2g.20gb}\n"
    )
    found = subprocess.run(
        [sys.executable, "-m", "mig", "pack", str(fleet), "--gpu", "A100-80GB", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(found.stdout)
    assert result["demand"] == [
        {"workload": "bert", "requests_per_second": 69, "served": 135.1, "replicas": {"1g.10gb": 1}}
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text("workloads:\n  - {name: x, requests_per_second: 5, throughput: {1g.10gb: -1}}\n")
    refused = subprocess.run(
        [sys.executable, "-m", "mig", "pack", str(bad), "--gpu", "A100-80GB"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 1
    assert (
        refused.stderr.strip()
        == "error: workloads[0] (x).throughput.1g.10gb: must be a number >= 0, got -1"
    )


@pytest.mark.parametrize("line", [
    "{name: x, requests_per_second: .inf, throughput: {1g.10gb: 3}}",
    "{name: x, requests_per_second: 5, throughput: {1g.10gb: .nan}}",
])  # fmt: skip
def test_non_finite_demands_are_refused(tmp_path: Path, line: str) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"workloads:\n  - {line}\n")
    refused = subprocess.run(
        [sys.executable, "-m", "mig", "pack", str(fleet), "--gpu", "H100"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 1 and refused.stderr.startswith("error: workloads[0] (x).")
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize("sharing", ["single", "mps"])
def test_a_plan_at_the_lower_bound_proves_the_count_without_the_full_program(
    sharing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the proven lower bound, the fewest GPUs are the same as the full program's, and
    when the bound holds the full program (whose root cuts were most of SLO6's work) is never
    solved; when it does not (SLO4 with MPS: bound 6, plan 7) the full program proves the count."""
    gpu = resolve_gpu("A100-80GB")
    full_solves = []
    original = Milp.solve

    def solve(milp: Milp, **options: Any) -> Solution:
        if options.get("integral_objective"):
            full_solves.append(milp)
        return original(milp, **options)

    for scenario in parvagpu_scenarios(sharing):
        allowed = [allowed_profiles(gpu, w) for w in scenario.workloads]
        problem = Problem(
            gpu,
            scenario.workloads,
            allowed,
            candidate_layouts(gpu, [p for a in allowed for p in a]),
        )
        alone = fewest_gpus(problem)
        lower = lower_bound(problem)
        monkeypatch.setattr(Milp, "solve", solve)
        full_solves.clear()
        bounded = fewest_gpus(problem, lower)
        monkeypatch.setattr(Milp, "solve", original)
        assert (bounded.gpus, bounded.proven) == (alone.gpus, True), scenario.name
        assert len(full_solves) == (0 if alone.gpus == lower else 1), scenario.name


def test_a_demand_probe_goes_straight_to_the_full_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixing a node's layouts from the relaxation settles replica counts (a transport
    problem), not demands: for a demand fleet the identical-node probes skip that step (on the
    benchmark's 200 demands it spent 2 s of CPU in vain) and still find the fewest nodes."""
    node_limits = []
    original = Milp.solve

    def solve(milp: Milp, **options: Any) -> Solution:
        node_limits.append(options.get("node_limit"))
        return original(milp, **options)

    monkeypatch.setattr(Milp, "solve", solve)
    fleet = [demand("a", 260, **{"1g_10gb": 18, "3g_40gb": 35}), demand("b", 90, **{"1g_10gb": 10})]
    plan = pack(H100, fleet, gpus_per_node=2, uniform_nodes=True, baselines=False)
    assert plan.optimal and all(m.served >= m.requests_per_second for m in plan.demand_met())
    assert uniform.FIXED_LAYOUT_NODES not in node_limits


def fewest_compute_by_enumeration(workload: Workload, gpu: GpuModel) -> int:
    """The fewest compute slices of an integral mix serving `workload`'s demand: every count of
    each profile but the last, and of the last as many as the rest leaves to serve."""
    profiles = allowed_profiles(gpu, workload)
    demand = float(workload.requests_per_second or 0.0)
    *others, last = profiles
    ranges = [range(int(demand // workload.throughput_on(p.name)) + 2) for p in others]
    best = None
    for counts in itertools.product(*ranges):
        served = sum(
            n * workload.throughput_on(p.name) for n, p in zip(counts, others, strict=True)
        )
        rest = max(0, -(-(demand - served) // workload.throughput_on(last.name)))
        compute = (
            sum(n * p.compute for n, p in zip(counts, others, strict=True))
            + int(rest) * last.compute
        )
        best = compute if best is None else min(best, compute)
    assert best is not None
    return best


@pytest.mark.parametrize("sharing", ["single", "mps"])
def test_the_compute_row_holds_the_fewest_slices_of_a_whole_replica_mix(sharing: str) -> None:
    """A free pack's compute row per demand states the fewest compute slices of any integral
    mix (checked against every mix), which may exceed the fractional bound rounded up: on SLO6
    with MPS it does, and the 105 compute slices of its 15 GPUs have one to spare, not two."""
    gpu = resolve_gpu("A100-80GB")
    above_rounded = 0
    for scenario in parvagpu_scenarios(sharing):
        for workload in scenario.workloads:
            allowed = tuple(allowed_profiles(gpu, workload))
            fewest = fewest_compute_slices(workload, allowed)
            assert fewest == fewest_compute_by_enumeration(workload, gpu), workload.name
            rounded = -int(-replicas_lower_bound(workload, allowed, "compute") // 1)
            above_rounded += fewest > rounded
    assert above_rounded > 0
    if sharing == "mps":
        slo6 = parvagpu_scenarios("mps")[5].workloads
        total = sum(fewest_compute_slices(w, tuple(allowed_profiles(gpu, w))) for w in slo6)
        assert total == 104


def test_counting_finds_the_fewest_compute_slices_highs_proves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fewest compute slices of a whole-replica mix, counted, are the ones HiGHS proves
    on each workload alone: every ParvaGPU workload and 200 seeded demands."""
    gpu = resolve_gpu("A100-80GB")
    workloads = [
        *(
            w
            for sharing in ("single", "mps")
            for s in parvagpu_scenarios(sharing)
            for w in s.workloads
        ),
        *demand_fleet(200, seed=7),
    ]
    calls: list[object] = []
    counting = model_module._fewest_compute_counted

    def counted(*arguments: Any) -> int | None:
        calls.append(arguments)
        return counting(*arguments)

    monkeypatch.setattr(model_module, "_fewest_compute_counted", counted)
    found = []
    for workload in workloads:
        fewest_compute_slices.cache_clear()
        found.append(fewest_compute_slices(workload, tuple(allowed_profiles(gpu, workload))))
    assert len(calls) > 50  # counted wherever one profile alone does not reach the rounded bound
    monkeypatch.setattr(model_module, "_fewest_compute_counted", lambda *_: None)
    for workload, fewest in zip(workloads, found, strict=True):
        fewest_compute_slices.cache_clear()
        assert fewest_compute_slices(workload, tuple(allowed_profiles(gpu, workload))) == fewest
    fewest_compute_slices.cache_clear()


Recorded = list[tuple[Milp, dict[str, Any], Solution]]


@pytest.fixture
def solves(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """Every program solved from now on, with the options and the solution, in order. The LP
    relaxations solved together (`Milp.relaxed_objectives`) count one each, as the program with
    that variant's bounds, marked `relax`."""
    recorded: Recorded = []
    original = Milp.solve
    original_relaxed = Milp.relaxed_objectives

    def solve(milp: Milp, **options: Any) -> Solution:
        solution = original(milp, **options)
        recorded.append((milp, options, solution))
        return solution

    def relaxed(milp: Milp, variants: Sequence[Mapping[int, tuple[float, float]]]) -> Any:
        objectives = original_relaxed(milp, variants)
        for variant, objective in zip(variants, objectives, strict=True):
            value = math.inf if objective is None else objective
            solution = Solution(math.isfinite(value), [], value, value, objective is None)
            recorded.append((milp.with_bounds(variant), {"relax": True}, solution))
        return objectives

    monkeypatch.setattr(Milp, "solve", solve)
    monkeypatch.setattr(Milp, "relaxed_objectives", relaxed)
    return recorded


def fleet_columns(gpu: GpuModel, fleet: Sequence[Workload]) -> tuple[int, int]:
    """Columns of the fleet's program, and of its layouts (their x come first)."""
    allowed = [allowed_profiles(gpu, w) for w in fleet]
    candidates = candidate_layouts(gpu, [p for a in allowed for p in a])
    return len(Problem(gpu, fleet, allowed, candidates).model().milp.cost), len(candidates)


def test_one_layout_of_slo6_with_mps_is_ruled_out_by_relaxations_alone(solves: Recorded) -> None:
    """With the compute rows at the integral fewest, the LP relaxation of every single layout on
    SLO6's 15 GPUs is infeasible: the fleet's program is solved as an integer program three
    times (a plan at the bound, fewest distinct layouts, least memory), none to rule out a
    single layout."""
    gpu = resolve_gpu("A100-80GB")
    scenario = parvagpu_scenarios("mps")[5]
    columns, _ = fleet_columns(gpu, scenario.workloads)
    plan = pack(gpu, scenario.workloads)
    assert plan.gpu_count == 15 and plan.optimal and plan.refined_optimal
    assert len(plan.distinct_layouts()) == 3
    integer = [m for m, options, _ in solves if not options.get("relax") and len(m.cost) >= columns]
    assert len(integer) == 3


def test_slo6_with_mps_states_that_every_layout_found_is_used(solves: Recorded) -> None:
    """The least memory on the three layouts found gives each a GPU at least (with three proven
    the fewest, a plan leaving one out cannot exist): that spares HiGHS work it would do to
    prove it again, and the plan's values stay the proven optima."""
    gpu = resolve_gpu("A100-80GB")
    scenario = parvagpu_scenarios("mps")[5]
    _, layouts = fleet_columns(gpu, scenario.workloads)
    plan = pack(gpu, scenario.workloads)
    memory, _, solution = solves[-1]
    chosen = [x for x in range(layouts) if solution.values[x] > 0.5]
    assert len(chosen) == 3 and all(memory.lower[x] == 1.0 for x in chosen)
    assert [s.value for s in plan.preferences] == [3, 658_970]
    assert all(s.proven for s in plan.preferences)


@pytest.mark.parametrize("sharing", ["single", "mps"])
def test_one_layout_at_the_lower_bound_needs_no_search_over_every_layout(
    sharing: str, solves: Recorded
) -> None:
    """When one layout holds the fleet on its lower bound of GPUs, that plan proves the count:
    no integer program over every layout is solved (the plan at the bound it replaces took 40
    ms of CPU on SLO5 with MPS). Eleven of the twelve scenarios are such fleets."""
    gpu = resolve_gpu("A100-80GB")
    at_bound = 0
    for scenario in parvagpu_scenarios(sharing):
        columns, layouts = fleet_columns(gpu, scenario.workloads)
        solves.clear()
        plan = pack(gpu, scenario.workloads)
        free = [
            m
            for m, options, _ in solves
            if not options.get("relax")
            and len(m.cost) >= columns
            and all(m.upper[x] for x in range(layouts))
        ]
        assert plan.optimal and plan.refined_optimal, scenario.name
        if plan.gpu_count == plan.lower_bound and len(plan.distinct_layouts()) == 1:
            at_bound += 1
            assert free == [], scenario.name
        else:
            assert free, scenario.name
    assert at_bound == (6 if sharing == "single" else 5)


def test_a_fleet_whose_lower_bound_does_not_hold_gets_the_full_programs_count() -> None:
    """No single layout at the bound (41 GPUs), nor any plan: the fewest GPUs are then proven by
    the full program (42), and the preferences are chosen among plans with that many."""
    gpu = resolve_gpu("A100-80GB")
    fleet = demand_fleet(15, seed=2)
    plan = pack(gpu, fleet, baselines=False)
    allowed = [allowed_profiles(gpu, w) for w in fleet]
    problem = Problem(gpu, fleet, allowed, candidate_layouts(gpu, [p for a in allowed for p in a]))
    assert (plan.gpu_count, plan.lower_bound) == (42, 41) == (fewest_gpus(problem).gpus, 41)
    assert plan.optimal and plan.refined_optimal
    assert plan.preferences[0].value == len(plan.distinct_layouts()) == 3


def test_identical_nodes_keep_the_rounded_compute_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The identical-node search keeps the compute rows its work-limited preference stages were
    measured with (the fractional fewest rounded up): no whole-replica minimum is asked for."""
    asked: list[object] = []

    def fewest_compute_slices(*arguments: object) -> int:
        asked.append(arguments)
        return 0

    monkeypatch.setattr(model_module, "fewest_compute_slices", fewest_compute_slices)
    fleet = [demand("a", 260, **{"1g_10gb": 18, "3g_40gb": 35}), demand("b", 90, **{"1g_10gb": 10})]
    plan = pack(H100, fleet, gpus_per_node=2, uniform_nodes=True, baselines=False)
    assert plan.optimal and asked == []
    pack(H100, fleet, baselines=False)
    assert asked


@pytest.mark.parametrize("sharing", ["single", "mps"])
def test_a_layout_ruled_out_by_counting_holds_no_plan(sharing: str) -> None:
    """Counting rules a layout out only when no plan of that layout alone exists on the fleet's
    GPUs (checked by solving each such layout's program): on SLO6 with MPS it rules out 10 of
    the 12 layouts, whose LP relaxations were solved before."""
    gpu = resolve_gpu("A100-80GB")
    for scenario in parvagpu_scenarios(sharing):
        allowed = [allowed_profiles(gpu, w) for w in scenario.workloads]
        candidates = candidate_layouts(gpu, [p for a in allowed for p in a])
        problem = Problem(gpu, scenario.workloads, allowed, candidates, whole_replica_compute=True)
        gpus = pack(gpu, scenario.workloads, baselines=False).gpu_count
        model = problem.model()
        ruled_out = [x for x in candidates if not holds_by_counting(problem, x, gpus)]
        for layout in ruled_out:
            alone = at_total(model, gpus)
            for other, var in model.x.items():
                alone.upper[var] = 0.0 if other != layout else alone.upper[var]
            assert alone.solve().infeasible, (scenario.name, str(layout))
        if scenario.name == "SLO6 (mps)":
            assert (len(ruled_out), len(candidates)) == (10, 12)


def test_slo6_with_mps_solves_two_single_layout_relaxations(solves: Recorded) -> None:
    """The fleet's LP relaxation is solved for its lower bound and for the two layouts counting
    leaves (before, for all twelve)."""
    gpu = resolve_gpu("A100-80GB")
    pack(gpu, parvagpu_scenarios("mps")[5].workloads)
    assert sum(1 for _, options, _ in solves if options.get("relax")) == 1 + 2


def test_counting_rules_out_a_layout_without_a_profile_for_some_workload() -> None:
    """However many GPUs, copies of a layout that has no profile one workload may use hold no
    plan of that fleet: the count may not pass over that workload."""
    gpu = resolve_gpu("H100-80GB")
    fleet = [Workload("small", 1, profile="1g.10gb", exact=True),
             Workload("large", 1, profile="3g.40gb", exact=True)]  # fmt: skip
    problem = Problem(gpu, fleet, [allowed_profiles(gpu, w) for w in fleet], [])
    only_small = Layout.of(gpu, {"1g.10gb": 7})
    both = Layout.of(gpu, {"1g.10gb": 4, "3g.40gb": 1})
    assert not holds_by_counting(problem, only_small, 100)
    assert holds_by_counting(problem, both, 1)
