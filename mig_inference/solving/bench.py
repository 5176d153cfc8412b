"""The planner's benchmark: GPUs vs lower bound vs baselines, and time, on reference fleets,
each packed twice on nodes of 8 GPUs: freely, and with every node identical (`--uniform-nodes`);
ParvaGPU's scenarios beside its own built scheduler; the planner's and the stack program's
growth (the program run by the `Renderer` the caller hands in). What times whole commands is
`mig_inference.cli.bench_processes`.

Timings are measurements on whatever machine runs them, reported, never asserted.
"""

from __future__ import annotations

import math
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import yaml
from msgspec import Struct, field, to_builtins
from msgspec.structs import replace

from mig_inference.clouds.prices import load_prices
from mig_inference.gpus.catalog import GpuModel, resolve_gpu
from mig_inference.gpus.sizing import ModelShape
from mig_inference.rendering import Renderer
from mig_inference.solving.cheapest import cheapest_machine
from mig_inference.solving.packing import PackPlan, Workload, pack
from mig_inference.solving.throughput import parvagpu_scenarios

CONTEXT = 4096
CONCURRENCY = 8
OVERHEAD = 1.1


def _llm(
    params: float, dtype: str, layers: int, kv_heads: int, kv_dtype: str | None = None
) -> float:
    shape = ModelShape(
        params, dtype, layers, kv_heads, 128, CONTEXT, CONCURRENCY, kv_dtype, OVERHEAD
    )
    return shape.need_mib


def llm_fleet() -> list[Workload]:
    """The reference LLM fleet on H100-80GB: needs from the sizing formula, 8 concurrent 4k
    sequences, 1.1 overhead (architectures from the models' published configs)."""
    return [
        Workload("llama-3.2-3b-bf16", 6, memory_mib=_llm(3.21, "bf16", 28, 8)),
        Workload("llama-3.1-8b-fp8", 4, memory_mib=_llm(8.03, "fp8", 32, 8)),
        Workload("llama-3.1-8b-bf16", 3, memory_mib=_llm(8.03, "bf16", 32, 8)),
        Workload("llama-2-7b-bf16", 2, memory_mib=_llm(6.74, "bf16", 32, 32)),
        Workload("llama-3-70b-int4", 1, memory_mib=_llm(70.6, "int4", 80, 8, "fp8")),
        Workload("embedder", 4, memory_mib=3 * 1e9 / 2**20),
        Workload("resnet50", 3, memory_mib=6 * 1e9 / 2**20),
    ]


def scaled(fleet: list[Workload], factor: int) -> list[Workload]:
    return [replace(w, replicas=w.replicas * factor) for w in fleet]


def random_fleet(gpu: GpuModel, replicas: int, seed: int) -> list[Workload]:
    """Seeded fleet: workloads of 1-60 replicas, half by memory need, half by fixed profile."""
    rng = random.Random(seed)
    largest = max(p.memory_mib for p in gpu.profiles)
    names = [p.name for p in gpu.profiles if not p.variant]
    fleet: list[Workload] = []
    left = replicas
    while left:
        count = min(left, rng.randint(1, 60))
        left -= count
        name = f"model-{len(fleet)}"
        if rng.random() < 0.5:
            fleet.append(Workload(name, count, memory_mib=rng.uniform(1024, largest)))
        else:
            fleet.append(Workload(name, count, profile=rng.choice(names)))
    return fleet


def demand_fleet(workloads: int, seed: int, gpu_name: str = "A100-80GB") -> list[Workload]:
    """Seeded demand fleet: each service's full-GPU throughput (50-500 requests/s) scales to
    its slices as (compute share)^a, a in 0.5-1 (sub-linear, as MIG slices measure); its table
    starts at a random profile (the smallest its model fits) and lists each larger one with
    probability 0.7 (the others miss its latency target); it asks for 0.2-6 GPUs' worth."""
    gpu = resolve_gpu(gpu_name)
    rng = random.Random(seed)
    plain = [p for p in gpu.profiles if not p.variant]
    fleet = []
    for index in range(workloads):
        full = rng.uniform(50, 500)
        scaling = rng.uniform(0.5, 1.0)
        smallest = rng.randrange(len(plain) - 1)
        table = tuple(
            (p.name, round(full * (p.compute / gpu.compute_slices) ** scaling, 3))
            for k, p in enumerate(plain)
            if k >= smallest and (k == smallest or rng.random() < 0.7)
        )
        demand = round(full * rng.uniform(0.2, 6), 2)
        fleet.append(Workload(f"service-{index}", 0, requests_per_second=demand, throughput=table))
    return fleet


class Row(Struct, frozen=True):
    scenario: str
    replicas: int
    workloads: int
    gpus: int
    lower_bound: int
    optimal: bool
    homogeneous: int
    one_per_gpu: int
    seconds: float
    uniform_gpus: int
    """GPUs with every node identical (whole nodes of 8)."""
    uniform_optimal: bool
    """That node count is proven minimal among identical-node plans."""
    uniform_homogeneous: int
    """The homogeneous baseline with identical nodes too (whole nodes of 8)."""
    uniform_seconds: float


def _measure(scenario: str, gpu: GpuModel, fleet: list[Workload]) -> Row:
    started = time.perf_counter()
    plan = pack(gpu, fleet, gpus_per_node=8)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    uniform = pack(gpu, fleet, gpus_per_node=8, uniform_nodes=True)
    uniform_seconds = time.perf_counter() - started
    return Row(
        scenario,
        sum(w.replicas for w in fleet),
        len(fleet),
        plan.gpu_count,
        plan.lower_bound,
        plan.optimal,
        plan.baselines["homogeneous"],
        plan.baselines["one_per_gpu"],
        seconds,
        uniform.gpu_count,
        uniform.optimal,
        uniform.baselines["homogeneous"],
        uniform_seconds,
    )


def _fleet_file(fleet: list[Workload], directory: Path) -> Path:
    path = directory / "fleet.yaml"
    rows = []
    for w in fleet:
        row: dict[str, object] = {"name": w.name, "replicas": w.replicas}
        if w.profile:
            row["profile"] = w.profile
        else:
            assert w.memory_mib is not None
            row["memory_gib"] = round(w.memory_mib / 1024, 3)
        rows.append(row)
    path.write_text(yaml.safe_dump({"workloads": rows}))
    return path


def installed_command() -> list[str]:
    """The installed command line: the `mig-inference` entry point beside this interpreter (what
    `pip install` puts in a virtualenv's bin/), else the package run as a module. Never the
    clone's `python -m mig`, which an installed package does not have."""
    script = Path(sys.executable).parent / "mig-inference"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mig_inference"]


def cli_wall_time(gpu: GpuModel, fleet: list[Workload]) -> float:
    """Wall time of `mig-inference pack FILE --json` in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as directory:
        path = _fleet_file(fleet, Path(directory))
        started = time.perf_counter()
        subprocess.run(
            [*installed_command(), "pack", str(path), "--gpu", gpu.name, "--gpus-per-node", "8",
             "--json"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        return time.perf_counter() - started


class DemandRow(Struct, frozen=True):
    """A demand scenario: services at requests per second, replicas and profiles chosen."""

    scenario: str
    gpu: str
    workloads: int
    gpus: int
    lower_bound: int
    optimal: bool
    published_gpus: int | None
    """GPUs the source's own planner used."""
    seconds: float
    cpu_seconds: float = 0.0
    preferences_proven: bool = False
    preferences: str = ""
    """Each preference stage unproven: what it found and the bound it proved."""


class GrowthRow(Struct, frozen=True):
    """How the work grows: one fleet size (replicas) or stack size (services)."""

    what: str
    size: int
    seconds: float
    cpu_seconds: float


class CostRow(Struct, frozen=True):
    """A cost scenario: the cheapest whole-node machine for a fleet, against the cheapest
    machine holding the same fleet with homogeneous `all-<profile>` GPUs."""

    scenario: str
    machine: str
    nodes: int
    per_hour: float
    proven: bool
    homogeneous_machine: str
    homogeneous_nodes: int
    homogeneous_per_hour: float
    seconds: float


def _unproven(plan: PackPlan) -> str:
    """The preference stages that stopped on their work limit: found, and proven bound."""
    return "; ".join(
        f"{stage.name} {stage.value} (proven {'>=' if stage.value >= stage.bound else '<='} "
        f"{stage.bound})"
        for stage in plan.preferences
        if not stage.proven
    )


def _demand_rows(quick: bool = False) -> list[DemandRow]:
    rows = []
    for sharing in ("single",) if quick else ("single", "mps"):
        for scenario in parvagpu_scenarios(sharing)[: 2 if quick else None]:
            gpu = resolve_gpu(scenario.gpu)
            started, cpu = time.perf_counter(), time.process_time()
            plan = pack(gpu, scenario.workloads)
            rows.append(
                DemandRow(
                    f"ParvaGPU {scenario.name}", gpu.name, len(scenario.workloads),
                    plan.gpu_count, plan.lower_bound, plan.optimal, scenario.published_gpus,
                    time.perf_counter() - started, time.process_time() - cpu,
                    plan.refined_optimal, _unproven(plan),
                )
            )  # fmt: skip
    workloads = 40 if quick else 200
    gpu = resolve_gpu("A100-80GB")
    started, cpu = time.perf_counter(), time.process_time()
    plan = pack(gpu, demand_fleet(workloads, seed=7), gpus_per_node=8, uniform_nodes=True)
    rows.append(
        DemandRow(
            f"{workloads} demands, nodes of 8", gpu.name, workloads, plan.gpu_count,
            plan.lower_bound, plan.optimal, None, time.perf_counter() - started,
            time.process_time() - cpu, plan.refined_optimal, _unproven(plan),
        )
    )  # fmt: skip
    return rows


class ParvaGpuRow(Struct, frozen=True):
    """One ParvaGPU scenario side by side: the planner's plan (from the demand rows) and what
    ParvaGPU's own scheduler, a binary built from its C code, reports on the same inputs."""

    scenario: str
    planner_gpus: int
    planner_optimal: bool
    planner_cpu_seconds: float
    parvagpu_gpus: int
    parvagpu_schedule_seconds: float
    """ParvaGPU's own clock around its two scheduling steps (data loading excluded)."""
    parvagpu_wall_seconds: float
    """The whole process, start to exit."""
    parvagpu_cpu_seconds: float
    """The whole process's user and system CPU (as the kernel accounts it, in ticks)."""


class ParvaGpuComparison(Struct, frozen=True):
    """The side by side, or why it was skipped (no binary given, or it did not answer)."""

    rows: list[ParvaGpuRow] = field(default_factory=list)
    skipped: str | None = None


_GPUS = re.compile(r"num of gpu: (\d+)")
_SCHEDULE = re.compile(r"scheduling time: ([0-9.]+) sec")


def _run_parvagpu(binary: Path, slo: int) -> tuple[int, float, float, float]:
    """GPUs, scheduling seconds, wall seconds and CPU seconds of one run of ParvaGPU's
    scheduler on its SLO row `slo` (it reads ./prof_data and ./SLO, so it runs in its own
    directory)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [str(binary), str(slo)], cwd=binary.parent, capture_output=True, text=True, timeout=120
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    gpus, schedule = _GPUS.search(done.stdout), _SCHEDULE.search(done.stdout)
    if done.returncode != 0 or gpus is None or schedule is None:
        raise ValueError(
            f"{binary} {slo} exited {done.returncode} without a GPU count and scheduling time"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(gpus.group(1)), float(schedule.group(1)), wall, cpu


def parvagpu_side_by_side(
    binaries: dict[str, Path | None], demand: list[DemandRow]
) -> ParvaGpuComparison:
    """ParvaGPU's scheduler (one binary per sharing mode: "single", "mps") on each ParvaGPU
    scenario among `demand`, beside the planner's row for it. Skipped, with the reason, when
    no binary is given or one does not run: its code is not part of this project (build it as
    docs/demand-and-cost.md says)."""
    if not any(binaries.values()):
        return ParvaGpuComparison(
            skipped="no ParvaGPU binary given (--parvagpu-bin, --parvagpu-single-bin)"
        )
    rows = []
    for sharing, binary in binaries.items():
        if binary is None:
            continue
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            return ParvaGpuComparison(skipped=f"{binary} is not an executable file")
        for row in demand:
            name = row.scenario.removeprefix("ParvaGPU ")
            if name == row.scenario or not name.endswith(f"({sharing})"):
                continue
            slo = int(name.split()[0].removeprefix("SLO"))
            try:
                gpus, schedule, wall, cpu = _run_parvagpu(binary, slo)
            except (ValueError, OSError, subprocess.TimeoutExpired) as error:
                return ParvaGpuComparison(skipped=str(error))
            rows.append(
                ParvaGpuRow(name, row.gpus, row.optimal, row.cpu_seconds, gpus, schedule, wall,
                            cpu)
            )  # fmt: skip
    return ParvaGpuComparison(rows)


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - started, time.process_time() - cpu


def fleet_growth(seed: int, quick: bool = False) -> list[GrowthRow]:
    """The planner on random fleets of 1,000 to 100,000 replicas (nodes of 8 H100s)."""
    gpu = resolve_gpu("H100-80GB")
    rows = []
    for size in (1000, 10_000) if quick else (1000, 10_000, 100_000):
        fleet = random_fleet(gpu, size, seed)
        wall, cpu = _timed(partial(pack, gpu, fleet, gpus_per_node=8, baselines=False))
        rows.append(GrowthRow("replicas", size, wall, cpu))
    return rows


def services_stack(services: int) -> dict[str, object]:
    """A GKE stack of `services` services of one replica each on 3g.40gb slices."""
    nodes = max(1, -(-services // 16))
    return {
        "config": {
            "mig-inference:cloud": "gke",
            "mig-inference:cluster": {
                "name": "inference-1", "project": "my-gcp-project", "location": "us-central1",
            },
            "mig-inference:pools": [
                {"name": "h100-mig", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g",
                 "nodes": nodes, "mig": "all-3g.40gb", "maxPods": 64, "zones": ["us-central1-c"]},
            ],
            "mig-inference:services": [
                {"name": f"model-{i}", "model": "mistralai/Mistral-Nemo-Instruct-2407",
                 "memoryGiB": 24.5, "replicas": 1}
                for i in range(services)
            ],
        }
    }  # fmt: skip


def stack_growth(run_program: Renderer, quick: bool = False) -> list[GrowthRow]:
    """The whole program under Pulumi's mocks (`run_program`: what `render` runs) for 1 to 1,000
    services."""
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        warm = Path(directory) / "Pulumi.warm.yaml"
        warm.write_text(yaml.safe_dump(services_stack(1)), encoding="utf-8")
        run_program("warm", warm)  # the first run imports the cloud SDKs: not counted
        for size in (1, 10) if quick else (1, 10, 100, 1000):
            path = Path(directory) / f"Pulumi.growth-{size}.yaml"
            path.write_text(yaml.safe_dump(services_stack(size)), encoding="utf-8")
            wall, cpu = _timed(partial(run_program, f"growth-{size}", path))
            rows.append(GrowthRow("services", size, wall, cpu))
    return rows


def _cost_row(scenario: str, fleet: list[Workload], cloud: str, spot: bool) -> CostRow:
    prices = load_prices()
    started = time.perf_counter()
    chosen = cheapest_machine(fleet, prices, cloud=cloud, spot=spot)
    seconds = time.perf_counter() - started
    best = chosen.choice
    assert best is not None and best.nodes is not None and best.total_per_hour is not None
    homogeneous: list[tuple[float, int, str]] = []
    for candidate in chosen.candidates:
        if not candidate.feasible:
            continue
        gpu = resolve_gpu(candidate.price.gpu_model)
        plan = pack(gpu, fleet, gpus_per_node=candidate.gpus_per_node)
        nodes = math.ceil(plan.baselines["homogeneous"] / candidate.gpus_per_node)
        homogeneous.append((nodes * candidate.per_node, nodes, candidate.machine))
    per_hour, nodes, machine = min(homogeneous)
    return CostRow(
        scenario, best.machine, best.nodes, best.total_per_hour, chosen.proven, machine, nodes,
        per_hour, seconds,
    )  # fmt: skip


class BenchResult(Struct, frozen=True):
    gpu: str
    rows: list[Row]
    cli_seconds: float
    demand: list[DemandRow]
    cost: list[CostRow]
    growth: list[GrowthRow] = field(default_factory=list)
    parvagpu: ParvaGpuComparison = field(default_factory=ParvaGpuComparison)

    def as_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "scenarios": to_builtins(self.rows),
            "cli_pack_5000_seconds": round(self.cli_seconds, 3),
            "demand": to_builtins(self.demand),
            "cost": to_builtins(self.cost),
            "growth": to_builtins(self.growth),
            "parvagpu": to_builtins(self.parvagpu),
        }


def measure(
    run_program: Renderer,
    seed: int = 7,
    quick: bool = False,
    parvagpu: dict[str, Path | None] | None = None,
) -> BenchResult:
    """Every scenario; with `quick`, only the smallest of each section (a smoke run of the same
    code, for tests: its numbers are not the benchmark's). `run_program` renders the growth
    section's stacks (the command line passes `render`'s). `parvagpu` gives ParvaGPU's built
    scheduler per sharing mode ("single", "mps") for the side by side."""
    gpu = resolve_gpu("H100-80GB")
    base = llm_fleet()
    if quick:
        demand = _demand_rows(quick=True)
        return BenchResult(
            gpu.name,
            [_measure("LLM fleet", gpu, base)],
            cli_wall_time(gpu, random_fleet(gpu, 5000, seed)),
            demand,
            [_cost_row("LLM fleet, EKS on-demand", base, "eks", spot=False)],
            fleet_growth(seed, quick=True) + stack_growth(run_program, quick=True),
            parvagpu_side_by_side(parvagpu or {}, demand),
        )
    rows = [
        _measure("LLM fleet", gpu, base),
        _measure("LLM fleet x10", gpu, scaled(base, 10)),
        _measure("LLM fleet x100", gpu, scaled(base, 100)),
        _measure(f"random 1,000 (seed {seed})", gpu, random_fleet(gpu, 1000, seed)),
        _measure(f"random 5,000 (seed {seed})", gpu, random_fleet(gpu, 5000, seed)),
        _measure(f"random 50,000 (seed {seed})", gpu, random_fleet(gpu, 50_000, seed)),
        _measure(f"random 200,000 (seed {seed})", gpu, random_fleet(gpu, 200_000, seed)),
    ]
    cost = [
        _cost_row("LLM fleet x100, EKS on-demand", scaled(base, 100), "eks", spot=False),
        _cost_row("LLM fleet x100, GKE spot", scaled(base, 100), "gke", spot=True),
        _cost_row("LLM fleet x100, OKE on-demand", scaled(base, 100), "oke", spot=False),
        _cost_row("random 5,000, EKS on-demand", random_fleet(gpu, 5000, seed), "eks", spot=False),
    ]
    demand = _demand_rows(quick=False)
    return BenchResult(
        gpu.name,
        rows,
        cli_wall_time(gpu, random_fleet(gpu, 5000, seed)),
        demand,
        cost,
        fleet_growth(seed) + stack_growth(run_program),
        parvagpu_side_by_side(parvagpu or {}, demand),
    )


def bench_text(result: BenchResult) -> str:
    rows, cli = result.rows, result.cli_seconds
    header = (
        f"{'scenario':<26} {'replicas':>8} {'loads':>5} {'GPUs':>6} {'bound':>6} {'optimal':>7} "
        f"{'homog.':>6} {'1/GPU':>6} {'seconds':>8} | {'GPUs':>6} {'optimal':>7} {'homog.':>6} "
        f"{'seconds':>8}"
    )
    width = len(header.split("|")[0])
    lines = [
        f"planner benchmark on {result.gpu}, 8 GPUs per node",
        f"{'':<{width}}| identical nodes (--uniform-nodes)",
        header,
        "-" * len(header),
    ]
    for r in rows:
        lines.append(
            f"{r.scenario:<26} {r.replicas:>8} {r.workloads:>5} {r.gpus:>6} {r.lower_bound:>6} "
            f"{'yes' if r.optimal else 'no':>7} {r.homogeneous:>6} {r.one_per_gpu:>6} "
            f"{r.seconds:>8.3f} | {r.uniform_gpus:>6} {'yes' if r.uniform_optimal else 'no':>7} "
            f"{r.uniform_homogeneous:>6} {r.uniform_seconds:>8.3f}"
        )
    lines.append("")
    lines.append(
        f"`mig-inference pack` on the random 5,000-replica fleet, CLI start-up included: "
        f"{cli:.2f} s wall"
    )
    lines.append("")
    lines.append("demand: replicas per profile chosen to serve requests per second (free GPUs)")
    header = (
        f"{'scenario':<28} {'GPU':<10} {'loads':>5} {'GPUs':>5} {'bound':>5} {'optimal':>7} "
        f"{'ParvaGPU':>8} {'seconds':>8} {'cpu s':>7} {'prefs':>5}"
    )
    lines += [header, "-" * len(header)]
    for d in result.demand:
        paper = str(d.published_gpus) if d.published_gpus is not None else "-"
        lines.append(
            f"{d.scenario:<28} {d.gpu:<10} {d.workloads:>5} {d.gpus:>5} {d.lower_bound:>5} "
            f"{'yes' if d.optimal else 'no':>7} {paper:>8} {d.seconds:>8.3f} "
            f"{d.cpu_seconds:>7.3f} {'yes' if d.preferences_proven else 'no':>5}"
        )
    lines.append(
        "ParvaGPU: the GPUs its paper deployed, with MPS (Lee et al., SC'24; none published for "
        "one process per instance); prefs: the preferences among the fewest GPUs proven too"
    )
    for d in result.demand:
        if d.preferences:
            lines.append(f"  {d.scenario}, preferences not proven: {d.preferences}")
    lines.append("")
    lines += _parvagpu_text(result.parvagpu)
    lines.append("")
    lines.append("growth: time against size, as ratios to the smallest (linear: equal ratios)")
    header = f"{'size':<18} {'seconds':>8} {'cpu s':>8} {'size x':>7} {'cpu x':>7}"
    lines += [header, "-" * len(header)]
    for what in ("replicas", "services"):
        rows_of = [g for g in result.growth if g.what == what]
        for g in rows_of:
            first = rows_of[0]
            lines.append(
                f"{f'{g.size:,} {what}':<18} {g.seconds:>8.3f} {g.cpu_seconds:>8.3f} "
                f"{g.size / first.size:>7g} {g.cpu_seconds / max(first.cpu_seconds, 1e-9):>7.1f}"
            )
    lines.append("")
    lines.append("cost: the cheapest whole-node machine vs the cheapest with homogeneous GPUs")
    header = (
        f"{'scenario':<30} {'machine':<16} {'nodes':>5} {'$/h':>9} {'proven':>6} | "
        f"{'homogeneous':<16} {'nodes':>5} {'$/h':>9} {'seconds':>8}"
    )
    lines += [header, "-" * len(header)]
    for c in result.cost:
        lines.append(
            f"{c.scenario:<30} {c.machine:<16} {c.nodes:>5} {c.per_hour:>9.2f} "
            f"{'yes' if c.proven else 'no':>6} | {c.homogeneous_machine:<16} "
            f"{c.homogeneous_nodes:>5} {c.homogeneous_per_hour:>9.2f} {c.seconds:>8.3f}"
        )
    return "\n".join(lines)


def _parvagpu_text(comparison: ParvaGpuComparison) -> list[str]:
    title = "ParvaGPU's own scheduler (its C code, built) on the same scenarios"
    if comparison.skipped:
        return [f"{title}: skipped ({comparison.skipped})"]
    header = (
        f"{'scenario':<14} {'GPUs':>5} {'cpu s':>7} | {'GPUs':>5} {'sched s':>8} {'proc s':>7} "
        f"{'proc cpu':>8} | {'GPUs x':>6} {'cpu x':>6}"
    )
    lines = [f"{title}", f"{'':<14} planner        | ParvaGPU", header, "-" * len(header)]
    for r in comparison.rows:
        cpu_ratio = (
            f"{r.planner_cpu_seconds / r.parvagpu_cpu_seconds:>6.1f}"
            if r.parvagpu_cpu_seconds > 0
            else f"{'-':>6}"
        )
        lines.append(
            f"{r.scenario:<14} {r.planner_gpus:>5} {r.planner_cpu_seconds:>7.3f} | "
            f"{r.parvagpu_gpus:>5} {r.parvagpu_schedule_seconds:>8.4f} "
            f"{r.parvagpu_wall_seconds:>7.3f} {r.parvagpu_cpu_seconds:>8.3f} | "
            f"{r.planner_gpus / r.parvagpu_gpus:>6.2f} {cpu_ratio}"
        )
    lines.append(
        "planner cpu s: pack's solve and proof; ParvaGPU sched s: its own clock around its "
        "scheduler; proc s / proc cpu: its whole process (cpu in kernel ticks); x: planner / "
        "ParvaGPU"
    )
    return lines
