"""The planner: proven optimum against brute force, valid layouts, complete assignments."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile, resolve_gpu
from mig_inference.gpus.layout import Layout, place
from mig_inference.gpus.sizing import GB, MIB
from mig_inference.solving.bench import llm_fleet, random_fleet
from mig_inference.solving.fleet import fleet_document, load_fleet
from mig_inference.solving.packing import PackPlan, Workload, allowed_profiles, pack
from mig_inference.solving.throughput import parvagpu_scenarios

ROOT = Path(__file__).resolve().parent.parent.parent
H100 = resolve_gpu("H100-80GB")


def check_plan(plan: PackPlan, workloads: Sequence[Workload]) -> None:
    """Every layout valid; every replica on exactly one slice of an allowed profile."""
    gpu = plan.gpu_model
    slices: dict[tuple[int, int], str] = {}
    for slot in plan.gpus:
        assert list(slot.placements) == place(gpu, slot.layout)
        for pl in slot.placements:
            slices[(slot.index, pl.start)] = pl.profile
    used = Counter((a.gpu, a.start) for a in plan.assignments)
    assert max(used.values(), default=1) == 1, "a slice holds two replicas"
    for a in plan.assignments:
        assert slices[(a.gpu, a.start)] == a.profile
        assert not plan.gpus[a.gpu].spare
    per_workload = Counter(a.workload for a in plan.assignments)
    for workload in workloads:
        assert per_workload[workload.name] == workload.replicas
        allowed = {p.name for p in allowed_profiles(gpu, workload)}
        assert {a.profile for a in plan.assignments if a.workload == workload.name} <= allowed
    assert plan.lower_bound <= plan.gpu_count


def brute_force_min_gpus(gpu: GpuModel, workloads: Sequence[Workload]) -> int:
    """Iterative deepening: put replicas one at a time on k GPUs, a GPU's multiset staying
    placeable; independent of the solver and of the layout enumeration."""
    replicas = [
        [p.name for p in allowed_profiles(gpu, w)] for w in workloads for _ in range(w.replicas)
    ]

    def fits(counts: Counter[str]) -> bool:
        try:
            place(gpu, Layout.of(gpu, dict(counts)))
        except MigError:
            return False
        return True

    def assign(i: int, gpus: list[Counter[str]], k: int) -> bool:
        if i == len(replicas):
            return True
        for g in range(min(len(gpus) + 1, k)):
            for name in replicas[i]:
                if g == len(gpus):
                    trial: Counter[str] = Counter({name: 1})
                    if fits(trial) and assign(i + 1, [*gpus, trial], k):
                        return True
                else:
                    trial = gpus[g] + Counter({name: 1})
                    if fits(trial) and assign(i + 1, [*gpus[:g], trial, *gpus[g + 1 :]], k):
                        return True
        return False

    k = 1
    while not assign(0, [], k):
        k += 1
    return k


def test_reference_llm_fleet() -> None:
    fleet = llm_fleet()
    plan = pack(H100, fleet, gpus_per_node=8)
    check_plan(plan, fleet)
    assert (plan.gpu_count, plan.lower_bound, plan.optimal) == (7, 7, True)
    assert plan.baselines == {"one_per_gpu": 23, "homogeneous": 8}


def test_issue_stated_needs_give_the_same_plan() -> None:
    # The fleet with the memory needs exactly as the planner issue states them, in GB.
    stated = [("a", 6, 11.2), ("b", 4, 13.6), ("c", 3, 22.4), ("d", 2, 33.7), ("e", 1, 44.1),
              ("f", 4, 3.0), ("g", 3, 6.0)]  # fmt: skip
    fleet = [Workload(n, r, memory_mib=gb * GB / MIB) for n, r, gb in stated]
    plan = pack(H100, fleet)
    check_plan(plan, fleet)
    assert (plan.gpu_count, plan.baselines["homogeneous"], plan.baselines["one_per_gpu"]) == (
        7, 8, 23,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_small_random_fleets(seed: int) -> None:
    rng = random.Random(seed)
    gpu = resolve_gpu(rng.choice(["h100", "a100-40gb", "a30", "h200"]))
    names = [p.name for p in gpu.profiles if not p.media_extensions]
    fleet = []
    for i in range(rng.randint(1, 3)):
        replicas = rng.randint(1, 3)
        if rng.random() < 0.5:
            fleet.append(Workload(f"w{i}", replicas, profile=rng.choice(names)))
        else:
            largest = max(p.memory_mib for p in gpu.profiles)
            fleet.append(Workload(f"w{i}", replicas, memory_mib=rng.uniform(500, largest)))
    plan = pack(gpu, fleet, baselines=False)
    check_plan(plan, fleet)
    assert plan.optimal
    assert plan.gpu_count == brute_force_min_gpus(gpu, fleet)


def test_larger_random_fleets_are_proven_and_complete() -> None:
    fleet = random_fleet(H100, 400, seed=11)
    plan = pack(H100, fleet, gpus_per_node=8)
    check_plan(plan, fleet)
    assert plan.optimal
    assert plan.gpu_count <= plan.baselines["homogeneous"] <= plan.baselines["one_per_gpu"]


def test_upgrade_to_a_containing_profile_when_it_saves_gpus() -> None:
    # Synthetic GPU: `small` may only start at slot 0, `big` (which contains it) at 0 or 2.
    small = Profile("1g.1gb", 1, 1, 1000, 1, (0,))
    big = Profile("1g.2gb", 1, 2, 2000, 2, (0, 2))
    gpu = GpuModel("TEST-4", 4, 4, 4, 4, (), (small, big), (), (), True)
    free = pack(gpu, [Workload("w", 2, profile="1g.1gb")], baselines=False)
    exact = pack(gpu, [Workload("w", 2, profile="1g.1gb", exact=True)], baselines=False)
    assert (free.gpu_count, exact.gpu_count) == (1, 2)
    assert {a.profile for a in exact.assignments} == {"1g.1gb"}


def test_exact_keeps_the_profile_and_never_beats_free_choice() -> None:
    fleet = [Workload("a", 5, profile="2g.20gb"), Workload("b", 3, profile="1g.10gb")]
    exact = [Workload(w.name, w.replicas, profile=w.profile, exact=True) for w in fleet]
    free_plan, exact_plan = pack(H100, fleet), pack(H100, exact)
    check_plan(exact_plan, exact)
    assert {(a.workload, a.profile) for a in exact_plan.assignments} == {
        ("a", "2g.20gb"), ("b", "1g.10gb"),
    }  # fmt: skip
    assert exact_plan.gpu_count >= free_plan.gpu_count


def test_prefers_fewer_distinct_layouts_and_smallest_slices() -> None:
    fleet = [Workload("mistral", 16, memory_mib=24.5 * 1024)]
    plan = pack(H100, fleet, gpus_per_node=8)
    assert plan.gpu_count == 8 and plan.refined_optimal
    assert [str(layout) for layout in plan.distinct_layouts()] == ["2x3g.40gb"]
    assert plan.node_config_names() == ["all-3g.40gb"]


def test_mixed_node_config_uses_device_indexes() -> None:
    fleet = [Workload("big", 1, profile="7g.80gb"), Workload("small", 7, profile="1g.10gb")]
    plan = pack(H100, fleet, gpus_per_node=2)
    check_plan(plan, fleet)
    [(name, entries)] = plan.mig_parted_config()["mig-configs"].items()
    assert name.startswith("custom-mixed-")
    assert sorted(tuple(e["devices"]) for e in entries) == [(0,), (1,)]
    assert {tuple(e["mig-devices"].items()) for e in entries} == {
        (("7g.80gb", 1),), (("1g.10gb", 7),),
    }  # fmt: skip


def test_spare_gpus_on_the_last_node_get_a_layout_but_no_replica() -> None:
    fleet = [Workload("w", 3, profile="3g.40gb")]
    plan = pack(H100, fleet, gpus_per_node=8)
    check_plan(plan, fleet)
    assert (plan.gpu_count, len(plan.gpus), plan.node_count) == (2, 8, 1)
    assert sum(1 for g in plan.gpus if g.spare) == 6


def test_uniform_nodes_are_identical() -> None:
    fleet = llm_fleet()
    plan = pack(H100, fleet, gpus_per_node=4, uniform_nodes=True)
    check_plan(plan, fleet)
    per_node = plan.node_layouts()
    assert all(layouts == per_node[0] for layouts in per_node)
    assert len(set(plan.node_config_names())) == 1
    assert plan.node_count * 4 >= pack(H100, fleet).gpu_count


@pytest.mark.parametrize(
    ("workloads", "message"),
    [
        ([Workload("x", 1, profile="1g.5gb")], r"workloads\[0\] \(x\)\.profile: '1g.5gb' is not"),
        ([Workload("x", 1, memory_mib=90_000)], r"workloads\[0\] \(x\)\.memory_gib: needs 90,000"),
        ([Workload("x", 1, profile="1g.10gb"), Workload("x", 1, profile="1g.10gb")], "duplicate"),
        ([], "no workloads"),
    ],
)
def test_bad_workloads(workloads: list[Workload], message: str) -> None:
    with pytest.raises(MigError, match=message):
        pack(H100, workloads)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{name: a, replicas: 0, profile: 1g.10gb}",
            r"\[0\] \(a\)\.replicas: replicas must be > 0",
        ),
        ("{name: a, replicas: -2, memory_gib: 3}", r"\(a\)\.replicas"),
        ("{name: a, replicas: x, profile: 1g.10gb}", r"\(a\)\.replicas: .*whole number"),
        ("{name: a, replicas: 1}", r"\(a\)\.profile: give exactly one of profile or memory_gib"),
        ("{name: a, replicas: 1, memory_gib: -1}", r"\(a\)\.memory_gib"),
        ("{name: a, replicas: 1, profile: 1g.10gb, gpu: h100}", r"\(a\): unknown key 'gpu'"),
        ("{replicas: 1, profile: 1g.10gb}", r"workloads\[0\]\.name"),
        ("{name: a, replicas: 1, profile: 1g.10gb, exact: maybe}", r"\(a\)\.exact"),
    ],
)
def test_bad_workload_entries(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(f"workloads:\n  - {entry}\n")
    with pytest.raises(MigError, match=message):
        load_fleet(path)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("workloads: [", "not valid YAML at line"),
        ("models: []", "must be a mapping with a `workloads:` list"),
        ("workloads: []", "is empty"),
    ],
)
def test_bad_fleet_files(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(body)
    with pytest.raises(MigError, match=message):
        load_fleet(path)


def test_fleet_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "workloads:\n"
        "  - {name: llama-3-8b, replicas: 4, profile: 1g.20gb}\n"
        "  - {name: mistral-nemo, replicas: 2, memory_gib: 24.5}\n"
    )
    fleet = load_fleet(path)
    plan = pack(H100, fleet)
    check_plan(plan, fleet)
    assert plan.gpu_count == 2


def test_variants_are_used_only_when_named() -> None:
    # RTX PRO 6000's +gfx, -me, +me and +me.all share the plain profiles' slices: the planner
    # chooses among plain profiles, and a variant only when a workload names it.
    rtx = resolve_gpu("rtx-pro-6000")
    by_memory = Workload("m", 5, memory_mib=20 * 1024)
    assert [p.name for p in allowed_profiles(rtx, by_memory)] == ["1g.24gb", "2g.48gb", "4g.96gb"]
    named = Workload("gfx", 1, profile="1g.24gb+gfx")
    assert [p.name for p in allowed_profiles(rtx, named)] == ["1g.24gb+gfx"]
    fleet = [by_memory, named, Workload("media", 1, profile="1g.24gb+me.all")]
    plan = pack(rtx, fleet)
    check_plan(plan, fleet)
    assert {a.profile for a in plan.assignments} == {"1g.24gb", "1g.24gb+gfx", "1g.24gb+me.all"}
    # 7 replicas of 1g on GPUs of 4: the +me.all one takes a GPU of its own (no plain or +gfx
    # instance beside it), the other 6 need 2 more.
    assert plan.gpu_count == plan.lower_bound == 3


def test_a_fleet_document_reads_back_as_the_same_workloads(tmp_path: Path) -> None:
    fleet = [
        Workload("fixed", 3, profile="2g.20gb", exact=True),
        Workload("grows", 2, profile="1g.10gb"),
        Workload("sized", 4, memory_mib=24.5 * 1024),
        *parvagpu_scenarios("mps")[5].workloads,
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_document(fleet)), encoding="utf-8")
    assert load_fleet(path) == fleet


def test_pack_times_the_solve_by_the_process_cpu_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cpu_seconds` is the process's CPU time over the solve, read from `time.process_time`
    (a wall clock would move with the machine's load)."""
    readings = iter([100.0, 102.5])
    monkeypatch.setattr(time, "process_time", lambda: next(readings))
    plan = pack(H100, llm_fleet())
    assert plan.cpu_seconds == 2.5
    assert 0 < plan.seconds < 100


def test_pack_json_carries_the_cpu_seconds_of_the_solve(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(fleet_document(list(parvagpu_scenarios("mps")[4].workloads))))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "mig", "pack", str(fleet), "--gpu", "A100-80GB", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    process_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    payload = json.loads(done.stdout)
    assert 0 < payload["cpu_seconds"] <= process_cpu
    assert payload["seconds"] > 0
