"""`python -m mig bench`: GPUs vs lower bound vs baselines, and wall time, on reference fleets.

Timings are measurements on whatever machine runs them, reported, never asserted.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import yaml

from mig_inference.catalog import GpuModel, resolve_gpu
from mig_inference.packing import Workload, pack
from mig_inference.sizing import ModelShape

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
    names = [p.name for p in gpu.profiles if not p.media_extensions]
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


@dataclass(frozen=True)
class Row:
    scenario: str
    replicas: int
    workloads: int
    gpus: int
    lower_bound: int
    optimal: bool
    homogeneous: int
    one_per_gpu: int
    seconds: float


def _measure(scenario: str, gpu: GpuModel, fleet: list[Workload]) -> Row:
    started = time.perf_counter()
    plan = pack(gpu, fleet, gpus_per_node=8)
    seconds = time.perf_counter() - started
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


def cli_wall_time(gpu: GpuModel, fleet: list[Workload]) -> float:
    """Wall time of `python -m mig pack FILE --json` in a fresh interpreter."""
    with tempfile.TemporaryDirectory() as directory:
        path = _fleet_file(fleet, Path(directory))
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mig", "pack", str(path), "--gpu", gpu.name,
             "--gpus-per-node", "8", "--json"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        return time.perf_counter() - started


@dataclass(frozen=True)
class BenchResult:
    gpu: str
    rows: list[Row]
    cli_seconds: float

    def as_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu,
            "scenarios": [asdict(row) for row in self.rows],
            "cli_pack_5000_seconds": round(self.cli_seconds, 3),
        }


def measure(seed: int = 7) -> BenchResult:
    gpu = resolve_gpu("H100-80GB")
    base = llm_fleet()
    rows = [
        _measure("LLM fleet", gpu, base),
        _measure("LLM fleet x10", gpu, scaled(base, 10)),
        _measure("LLM fleet x100", gpu, scaled(base, 100)),
        _measure(f"random 1,000 (seed {seed})", gpu, random_fleet(gpu, 1000, seed)),
        _measure(f"random 5,000 (seed {seed})", gpu, random_fleet(gpu, 5000, seed)),
    ]
    return BenchResult(gpu.name, rows, cli_wall_time(gpu, random_fleet(gpu, 5000, seed)))


def bench_text(result: BenchResult) -> str:
    rows, cli = result.rows, result.cli_seconds
    header = (
        f"{'scenario':<24} {'replicas':>8} {'loads':>5} {'GPUs':>6} {'bound':>6} {'optimal':>7} "
        f"{'homog.':>6} {'1/GPU':>6} {'seconds':>8}"
    )
    lines = [f"planner benchmark on {result.gpu}, 8 GPUs per node", header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r.scenario:<24} {r.replicas:>8} {r.workloads:>5} {r.gpus:>6} {r.lower_bound:>6} "
            f"{'yes' if r.optimal else 'no':>7} {r.homogeneous:>6} {r.one_per_gpu:>6} "
            f"{r.seconds:>8.3f}"
        )
    lines.append("")
    lines.append(
        f"`python -m mig pack` on the random 5,000-replica fleet, CLI start-up included: "
        f"{cli:.2f} s wall"
    )
    return "\n".join(lines)
